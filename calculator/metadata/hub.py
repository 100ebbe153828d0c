"""Model metadata from the Hugging Face Hub, pinned to a commit sha. No Django in here.

One lookup (``HubClient.lookup``) makes, against a Hub endpoint (``HF_ENDPOINT``, token ``HF_TOKEN``):

1. ``GET /api/models/{repo}/revision/{rev}`` (``HfApi.model_info``): resolves a branch, tag or sha to the
   commit sha and lists the repo's files (``siblings``) and whether it is gated;
2. ``GET /{repo}/resolve/{sha}/config.json`` and, only if the file list has them, the quantization files
   vLLM reads beside it (``hf_quant_config.json`` for NVIDIA ModelOpt, ``quantize_config.json`` for
   AutoGPTQ/AutoAWQ, ``quant_config.json`` for AWQ; vLLM 0.32 ``model_executor/model_loader/
   weight_utils.py`` ``get_quant_config``), all pinned to the sha;
3. the safetensors headers: one ranged ``GET`` of the first 100 kB of each weight file
   (``HfApi.parse_safetensors_file_metadata``; a second one only for larger headers), plus the index file
   of a sharded checkpoint. Bytes per dtype are the stored byte ranges (``data_offsets``) of every tensor,
   scales and zero points included; parameters are the stored element counts.

A single-file checkpoint costs 3 requests, a sharded one 3 + number of shards (read in parallel).
Small files are fetched with one ``GET`` through huggingface_hub's own session and error mapping instead
of ``hf_hub_download`` (``HEAD`` + ``GET`` and a second copy on disk): the database cache in
``calculator.metadata`` is the cache.

Without safetensors headers the parameters are counted by instantiating the architecture on torch's
``meta`` device through transformers (no memory, no download, never remote code), see
``count_parameters_on_meta_device``. Errors are ``MetadataError`` subclasses carrying a ``.message``
a user can act on.
"""
from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from calculator.engine.schemas import CheckpointWeights


DEFAULT_REVISION = "main"
DEFAULT_TIMEOUT_S = 10.0
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")

# Quantization files vLLM looks for beside config.json, in the order we report them.
QUANT_FILES = ("hf_quant_config.json", "quantize_config.json", "quant_config.json")
SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
MAX_PARALLEL_HEADERS = 8

# The config keys a decoder's memory depends on; reported as "read" / "missing" for remote-code repos.
CORE_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
)


# --------------------------------------------------------------------------------------------- errors


class MetadataError(Exception):
    """A model lookup the user must fix. ``field`` is the form field / CLI flag (``model``), ``message``
    one or two sentences to show as is (HTTP 400, the page). ``cli_message``: the same in the command line's words,
    where the way out is a flag (``--config PATH``) the page and the API do not have; ``None`` when ``message``
    serves every surface (:class:`calculator.request.WordedPerSurface` carries both to the surfaces)."""

    field = "model"

    def __init__(self, message: str, *, field: str = "model", cli_message: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.cli_message = cli_message


class InvalidModelIdError(MetadataError):
    """The text is not a Hub id of the form ``ORG/NAME``."""


class RepoNotFoundError(MetadataError):
    """404 (or the Hub's 401 for a private repo without a token)."""


class RevisionNotFoundError(MetadataError):
    """The repo exists, the branch / tag / sha does not."""


class GatedRepoError(MetadataError):
    """Gated repo: no token (401) or a token not granted access (403). ``has_token`` says which."""

    def __init__(self, message: str, *, has_token: bool):
        super().__init__(message)
        self.has_token = has_token


class InvalidTokenError(MetadataError):
    """``HF_TOKEN`` is set but the Hub rejects it (401 "Invalid credentials in Authorization header")."""


class NoConfigError(MetadataError):
    """The repo has no ``config.json``. ``gguf_files`` lists its ``.gguf`` files (GGUF-only repo)."""

    def __init__(self, message: str, *, gguf_files: list[str], cli_message: str | None = None):
        super().__init__(message, cli_message=cli_message)
        self.gguf_files = gguf_files


class BadConfigError(MetadataError):
    """``config.json`` is not a JSON object."""


class HubUnavailableError(MetadataError):
    """Timeout, rate limit (429), 5xx, connection error or ``HF_HUB_OFFLINE=1``. ``calculator.metadata``
    catches it and falls back to the cache, then the offline catalog; raised to the user only when
    neither has the model."""


# --------------------------------------------------------------------------------------------- result


class ModelMetadata(BaseModel):
    """What the calculator knows about one model, and where it came from.

    ``revision`` is what the user asked for (``main`` by default), ``sha`` the commit it resolved to
    (``None`` for the offline catalog, whose copies carry no sha). ``config`` is ``config.json``;
    ``quant_config`` the separate quantization file named ``quant_config_file`` (``None`` when the repo has
    none: most checkpoints keep ``quantization_config`` inside ``config.json``). ``weights`` are the stored
    bytes / parameters per safetensors dtype, or ``None`` when neither headers nor a meta-device count were
    possible (the engine then counts from the config). ``source`` is a one-line label such as
    ``Hugging Face Hub meta-llama/Llama-3.1-8B @ 0e9e39f`` or ``offline catalog (SOURCES.md row 9)``;
    ``notes`` list every assumption and fallback, in order.
    """

    repo_id: str
    revision: str = DEFAULT_REVISION
    sha: str | None = None
    origin: str = "hub"  # hub | catalog | builtin
    config: dict[str, Any]
    quant_config: dict[str, Any] | None = None
    quant_config_file: str | None = None
    weights: CheckpointWeights | None = None
    source: str
    notes: list[str] = Field(default_factory=list)
    fetched_at: datetime
    gated: bool = False
    remote_code: bool = False
    multimodal: bool = False

    @property
    def short_sha(self) -> str:
        return (self.sha or "")[:7]

    def engine_kwargs(self) -> dict[str, Any]:
        """The ``EngineInput`` fields this lookup fills: ``EngineInput(**meta.engine_kwargs(), gpu=...)``."""
        return {
            "hf_config": self.config,
            "quant_config": self.quant_config,
            "weights": self.weights,
            "model_label": self.repo_id,
            "model_source": self.source,
        }


# --------------------------------------------------------------------------------------------- helpers


def env_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) read now, not at import as huggingface_hub does."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "true", "yes", "on")


def validate_model_id(model_id: str) -> str:
    """Strip and check ``ORG/NAME``; raises ``InvalidModelIdError``."""
    model_id = (model_id or "").strip()
    if model_id.startswith(("https://huggingface.co/", "http://huggingface.co/")):
        model_id = model_id.split("huggingface.co/", 1)[1].strip("/")
    if not REPO_ID.fullmatch(model_id) or ".." in model_id or model_id.endswith((".", "-")):
        raise InvalidModelIdError(
            f"{model_id!r} is not a Hugging Face model id: expected ORG/NAME, e.g. meta-llama/Llama-3.1-8B."
        )
    return model_id


def hub_label(repo_id: str, sha: str | None) -> str:
    return f"Hugging Face Hub {repo_id} @ {(sha or '')[:7]}"


def describe_config(config: dict[str, Any], *, siblings: list[str] | None = None) -> tuple[list[str], bool, bool]:
    """Notes on what the config says about reading it: the dtype key, multimodal ``text_config``,
    remote code (``auto_map`` or ``*.py`` files: never executed; we list the standard fields we could read
    and what we assumed for the missing ones). Returns ``(notes, remote_code, multimodal)``."""
    notes: list[str] = []
    arch = ", ".join(config.get("architectures") or []) or f"model_type {config.get('model_type')!r}"
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    multimodal = text is not None
    if multimodal:
        notes.append(
            f"Multimodal ({arch}): the language model's fields are read from text_config "
            f"(model_type {text.get('model_type')!r}); the vision tower's weights count, its activations do not."
        )
    core = text if text is not None else config
    dtype_key = next((k for k in ("dtype", "torch_dtype") if k in core or k in config), None)
    if dtype_key is None:
        notes.append("config.json states no dtype (torch_dtype/dtype), so it reads as float32: vLLM loads such weights "
                     "as bfloat16, SGLang as float16 (bfloat16 for Gemma; sglang 0.5.10.post1 configs/model_config.py:"
                     "1224-1239): 2 bytes per weight either way.")
    py_files = sorted(f for f in (siblings or []) if f.endswith(".py"))
    remote_code = bool(config.get("auto_map")) or bool(py_files)
    if remote_code:
        read = [k for k in CORE_FIELDS if k in core]
        missing = [k for k in CORE_FIELDS if k not in core]
        assumed = []
        if "num_key_value_heads" in missing and "num_attention_heads" in core:
            assumed.append("num_key_value_heads = num_attention_heads (no GQA)")
        if core.get("kv_lora_rank"):
            # MLA (DeepSeek V2/V3, Kimi): the head sizes are qk_nope_head_dim / qk_rope_head_dim / v_head_dim, which
            # the config states; no head_dim is read or assumed
            missing = [k for k in missing if k != "head_dim"]
        elif "head_dim" in missing and "hidden_size" in core and "num_attention_heads" in core:
            assumed.append("head_dim = hidden_size / num_attention_heads")
        what = "auto_map " + ", ".join(sorted((config.get("auto_map") or {}).values())) if config.get(
            "auto_map") else "model code " + ", ".join(py_files)
        notes.append(
            f"Remote code ({what}) was not executed (no trust_remote_code). Read from config.json: "
            f"{', '.join(read) or 'none of the standard fields'}"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; assumed {'; '.join(assumed)}" if assumed else "")
            + ". Layers the code adds beyond the standard fields are not counted."
        )
    return notes, remote_code, multimodal


def weights_from_safetensors(files_metadata: dict[str, Any], source: str) -> CheckpointWeights:
    """Sum the tensors of parsed safetensors headers per dtype.

    ``files_metadata`` maps a file name to huggingface_hub's ``SafetensorsFileMetadata``. Bytes are each
    tensor's stored byte range ``data_offsets[1] - data_offsets[0]`` (exact for packed dtypes too);
    parameters are the element counts ``prod(shape)`` (safetensors format,
    https://huggingface.co/docs/safetensors/index#format).
    """
    bytes_by: dict[str, int] = {}
    params_by: dict[str, int] = {}
    for meta in files_metadata.values():
        for tensor in meta.tensors.values():
            start, end = tensor.data_offsets
            bytes_by[tensor.dtype] = bytes_by.get(tensor.dtype, 0) + (end - start)
            params_by[tensor.dtype] = params_by.get(tensor.dtype, 0) + tensor.parameter_count
    return CheckpointWeights(bytes_by_dtype=bytes_by, params_by_dtype=params_by, source=source)


_TORCH_TO_SAFETENSORS = {
    "torch.bfloat16": ("BF16", 2),
    "torch.float16": ("F16", 2),
    "torch.float32": ("F32", 4),
    "torch.float64": ("F64", 8),
    "torch.int8": ("I8", 1),
    "torch.uint8": ("U8", 1),
    "torch.int32": ("I32", 4),
    "torch.int64": ("I64", 8),
    "torch.float8_e4m3fn": ("F8_E4M3", 1),
    "torch.float8_e5m2": ("F8_E5M2", 1),
}


def count_parameters_on_meta_device(
    config: dict[str, Any], label: str, *, repo_id: str = "", quant_file: str | None = None
) -> tuple[CheckpointWeights | None, str]:
    """Count parameters by building the architecture on torch's ``meta`` device (no memory, no download).

    The model class is the config's first ``architectures`` entry when transformers has it (so a
    ``...ForConditionalGeneration`` keeps its vision tower), else ``AutoModelForCausalLM``; never remote
    code: a config with ``auto_map`` is built only when transformers has the named class built in (the
    repo's code is ignored). Tied embeddings count once (``Module.parameters()`` deduplicates), as they
    are stored once. Returns ``(weights or None, note)``; ``None`` for quantized checkpoints
    (``quantization_config`` or a separate ``quant_file``: a meta model has the unquantized shapes and
    dtypes, so its bytes would be wrong), speculative-decoding draft heads (EAGLE: the checkpoint stores
    only the head, not what the Llama-shaped config describes), architectures transformers lacks, or when
    transformers / torch are missing or cannot build the config.
    """
    quant = config.get("quantization_config") or (config.get("text_config") or {}).get("quantization_config")
    if quant or quant_file:
        method = (quant or {}).get("quant_method") or quant_file
        return None, (
            f"No safetensors headers, and the checkpoint is quantized ({method}): a meta-device count would "
            "give unquantized sizes, so the engine counts the weights from the config."
        )
    archs = config.get("architectures") or []
    if "eagle" in repo_id.lower() or any(re.search("eagle|medusa", a, re.I) for a in archs):
        return None, (
            "No safetensors headers, and this is a speculative-decoding draft head: its checkpoint holds only "
            "the head's layers, so the engine counts the draft weights from the config."
        )
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM
    except ImportError as exc:  # transformers/torch come with the worker extra (vLLM)
        return None, f"No safetensors headers and {exc.name} is not installed: the engine counts from the config."
    model_type = config.get("model_type")
    try:
        config_cls = transformers.CONFIG_MAPPING[model_type]
    except KeyError:
        return None, (
            f"No safetensors headers, and transformers {transformers.__version__} does not know model_type "
            f"{model_type!r}: the engine counts from the config."
        )
    arch = archs[0] if archs else None
    model_cls = getattr(transformers, arch, None) if arch else None
    if arch and model_cls is None:
        return None, (
            f"No safetensors headers, and transformers {transformers.__version__} has no class {arch} "
            "(remote code is never run): the engine counts the weights from the config."
        )
    try:
        hf_config = config_cls.from_dict({k: v for k, v in config.items() if k != "auto_map"})
        text_config = getattr(hf_config, "text_config", None)
        if text_config is not None and "tie_word_embeddings" not in config:
            # The language model ties as its text_config says (vLLM reads text_config); transformers 5
            # would apply the top-level default (true) and drop Mistral-Small-3.1's separate lm_head.
            hf_config.tie_word_embeddings = getattr(text_config, "tie_word_embeddings", False)
        # Build in the dtype the config states; multimodal configs (Qwen3-VL, Qwen3.5) may state it only in
        # text_config, and transformers would then build float32 parameters (twice the stored bytes).
        text = config.get("text_config") or {}
        declared = next((d.get(k) for d in (config, text) for k in ("dtype", "torch_dtype") if d.get(k)), None)
        build_dtype = getattr(torch, declared, None) if isinstance(declared, str) else None
        kwargs = {"dtype": build_dtype} if isinstance(build_dtype, torch.dtype) else {}
        with torch.device("meta"):
            model = (model_cls._from_config(hf_config, **kwargs) if model_cls
                     else AutoModelForCausalLM.from_config(hf_config, **kwargs))
        counts: dict[str, int] = {}
        for param in model.parameters():
            key = str(param.dtype)
            counts[key] = counts.get(key, 0) + param.numel()
    except Exception as exc:  # transformers raises many kinds; any failure means "no count"
        return None, (
            f"No safetensors headers; building {arch or model_type} on the meta device failed "
            f"({type(exc).__name__}: {str(exc)[:160]}): the engine counts from the config."
        )
    params_by: dict[str, int] = {}
    bytes_by: dict[str, int] = {}
    for torch_dtype, n in counts.items():
        name, size = _TORCH_TO_SAFETENSORS.get(torch_dtype, (torch_dtype, 0))
        if size == 0:
            return None, f"No safetensors headers; meta-device model has parameters of {torch_dtype}: not counted."
        params_by[name] = params_by.get(name, 0) + n
        bytes_by[name] = bytes_by.get(name, 0) + n * size
    source = (
        f"parameters counted on the meta device with transformers {transformers.__version__} "
        f"({type(model).__name__}) from {label}"
    )
    if config.get("auto_map"):
        source += "; the repo's auto_map code was ignored in favour of the built-in class"
    tied = bool(getattr(getattr(model, "config", None), "tie_word_embeddings", False))
    return CheckpointWeights(bytes_by_dtype=bytes_by, params_by_dtype=params_by, source=source), (
        f"No safetensors headers: weights are {source}"
        + (" (tied input and output embeddings count once)." if tied else ".")
    )


# --------------------------------------------------------------------------------------------- client


class RepoRevision(BaseModel):
    """``model_info`` at one revision: the commit sha and the file names there."""

    repo_id: str
    revision: str
    sha: str
    siblings: list[str]
    gated: bool = False
    private: bool = False


# The largest public checkpoints have ~160 shards (e.g. DeepSeek-V3: 163); a repo naming more is read from its
# config instead, so one request costs at most MAX_SHARDS + 3 Hub reads.
MAX_SHARDS = 256
# All shard headers of one request must arrive within this many seconds (HUB_HEADERS_DEADLINE_S).
HEADERS_DEADLINE_S = float(os.environ.get("HUB_HEADERS_DEADLINE_S", "15"))


class HubClient:
    """Talks to one Hub endpoint. ``endpoint`` defaults to ``HF_ENDPOINT`` (read now, so tests and the
    settings page can change it), ``token`` to ``HF_TOKEN``; ``timeout`` (seconds) applies to every request.
    Every method raises ``MetadataError`` subclasses only."""

    def __init__(self, endpoint: str | None = None, token: str | None = None, timeout: float = DEFAULT_TIMEOUT_S):
        self.skipped_note: str | None = None
        from huggingface_hub import HfApi, constants

        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants._HF_DEFAULT_ENDPOINT).rstrip("/")
        self.token = token if token is not None else (os.environ.get("HF_TOKEN") or None)
        self.timeout = timeout
        # token=False: never fall back to a token saved on disk by `hf auth login` on the server.
        self.api = HfApi(endpoint=self.endpoint, token=self.token or False)

    # ---- public

    def lookup(self, repo_id: str, revision: str | None = None, *, count_params: bool = True) -> ModelMetadata:
        """Resolve ``revision`` and fetch everything at that sha (see the module docstring)."""
        return self.fetch(self.resolve(repo_id, revision), count_params=count_params)

    def resolve(self, repo_id: str, revision: str | None = None) -> RepoRevision:
        """Branch / tag / sha -> commit sha and file list (one request, ``HfApi.model_info``)."""
        revision = revision or DEFAULT_REVISION
        info = self._call(repo_id, revision, lambda: self.api.model_info(
            repo_id, revision=revision, timeout=self.timeout, expand=["sha", "siblings", "gated", "private"]))
        if not info.sha:
            raise HubUnavailableError(f"The Hub at {self.endpoint} answered for {repo_id} without a commit sha.")
        return RepoRevision(
            repo_id=repo_id,
            revision=revision,
            sha=info.sha,
            siblings=[s.rfilename for s in (info.siblings or [])],
            gated=bool(info.gated),
            private=bool(info.private),
        )

    def fetch(self, rev: RepoRevision, *, count_params: bool = True) -> ModelMetadata:
        """``config.json``, quantization file and safetensors headers at ``rev.sha``."""
        repo_id, sha, files = rev.repo_id, rev.sha, set(rev.siblings)
        label = hub_label(repo_id, sha)
        if "config.json" not in files:
            gguf = sorted(f for f in files if f.lower().endswith(".gguf"))
            if gguf:
                shown = ", ".join(gguf[:3]) + (f" and {len(gguf) - 3} more" if len(gguf) > 3 else "")
                head = (f"{repo_id} @ {sha[:7]} has no config.json: it looks like a GGUF-only repo ({shown}). "
                        "The calculator needs the original model's config: enter the base model's Hub id "
                        "(see the model card's 'base_model')")
                raise NoConfigError(
                    head + " in the model field.", gguf_files=gguf,
                    cli_message=head + " as --model, or give its config.json to manage.py estimate or "
                    "check_compat with --config PATH.")
            head = (f"{repo_id} @ {sha[:7]} has no config.json, so it is not a Transformers-format model vLLM can "
                    "load. Enter the Hub id of a model with a config.json")
            raise NoConfigError(head + " in the model field.", gguf_files=[],
                                cli_message=head + " as --model, or give a config.json to manage.py estimate or "
                                "check_compat with --config PATH.")
        config = self._get_json(repo_id, rev.revision, sha, "config.json")
        notes, remote_code, multimodal = describe_config(config, siblings=rev.siblings)
        if rev.gated:
            notes.insert(0, f"{repo_id} is gated; read with the token in HF_TOKEN.")

        quant_config = quant_file = None
        for name in QUANT_FILES:
            if name in files:
                quant_config, quant_file = self._get_json(repo_id, rev.revision, sha, name), name
                notes.append(f"Quantization settings read from {name} (beside config.json), as vLLM does.")
                break

        self.skipped_note = None
        weights = self._safetensors_weights(rev, label)
        if self.skipped_note:
            notes.append(self.skipped_note)
        if weights is None:
            if count_params:
                weights, note = count_parameters_on_meta_device(
                    config, label, repo_id=repo_id, quant_file=quant_file)
            else:
                note = "No safetensors headers: the engine counts the weights from the config."
            notes.append(note)
        return ModelMetadata(
            repo_id=repo_id,
            revision=rev.revision,
            sha=sha,
            origin="hub",
            config=config,
            quant_config=quant_config,
            quant_config_file=quant_file,
            weights=weights,
            source=label,
            notes=notes,
            fetched_at=datetime.now(timezone.utc),
            gated=rev.gated,
            remote_code=remote_code,
            multimodal=multimodal,
        )

    # ---- internals

    def _safetensors_weights(self, rev: RepoRevision, label: str) -> CheckpointWeights | None:
        """Headers of the checkpoint vLLM loads: the shards named by ``model.safetensors.index.json``, else
        ``model.safetensors``. ``None`` when the repo has neither."""
        files = set(rev.siblings)
        if SAFETENSORS_INDEX in files:
            index = self._get_json(rev.repo_id, rev.revision, rev.sha, SAFETENSORS_INDEX)
            weight_map = index.get("weight_map")
            if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
                self.skipped_note = (f"{SAFETENSORS_INDEX} has no weight_map object of file names: the engine counts "
                                     "the weights from the config.")
                return None
            shards = sorted(set(weight_map.values()))
        elif SAFETENSORS_SINGLE in files:
            shards = [SAFETENSORS_SINGLE]
        else:
            return None
        if not shards:
            return None
        if len(shards) > MAX_SHARDS:
            # bounded work per user request: one header read per shard would be len(shards) Hub requests
            self.skipped_note = (f"{SAFETENSORS_INDEX} names {len(shards):,} shards, more than the {MAX_SHARDS} this "
                                 "calculator reads per request: the engine counts the weights from the config.")
            return None

        def parse(name: str):
            return name, self._call(rev.repo_id, rev.revision, lambda: self.api.parse_safetensors_file_metadata(
                rev.repo_id, name, revision=rev.sha, timeout=self.timeout))

        pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_HEADERS, len(shards)))
        futures = [pool.submit(parse, name) for name in shards]
        done, pending = wait(futures, timeout=HEADERS_DEADLINE_S)
        pool.shutdown(wait=False, cancel_futures=True)
        if pending:
            # a total deadline for the headers of one request, whatever each shard's own timeout allows
            self.skipped_note = (f"The Hub did not give the {len(shards)} safetensors headers within "
                                 f"{HEADERS_DEADLINE_S:g} s: the engine counts the weights from the config.")
            return None
        parsed = dict(f.result() for f in futures)
        source = f"safetensors headers of {rev.repo_id} @ {rev.sha[:7]} ({len(shards)} file{'s' * (len(shards) > 1)})"
        return weights_from_safetensors(parsed, source)

    def _get_json(self, repo_id: str, revision: str, sha: str, filename: str) -> dict[str, Any]:
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = hf_hub_url(repo_id, filename, revision=sha, endpoint=self.endpoint)

        def get():
            response = get_session().get(url, headers=build_hf_headers(token=self.token or False),
                                         timeout=self.timeout)
            hf_raise_for_status(response)
            return response.content

        raw = self._call(repo_id, revision, get, filename=filename)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise BadConfigError(f"{repo_id} @ {sha[:7]}: {filename} is not valid JSON ({exc}).") from None
        if not isinstance(data, dict):
            raise BadConfigError(f"{repo_id} @ {sha[:7]}: {filename} is not a JSON object.")
        return data

    def _call(self, repo_id: str, revision: str, fn, *, filename: str | None = None):
        """Run one huggingface_hub call, turning its exceptions into ``MetadataError`` subclasses."""
        import httpx2
        from huggingface_hub import errors as hf_errors

        from huggingface_hub import constants as hf_constants

        # huggingface_hub reads HF_HUB_OFFLINE once, at import; follow the environment as it is now.
        hf_constants.HF_HUB_OFFLINE = env_offline()
        where = f"{self.endpoint}"
        try:
            return fn()
        except hf_errors.OfflineModeIsEnabled:
            raise HubUnavailableError("HF_HUB_OFFLINE is set: the Hub is not contacted.") from None
        except hf_errors.GatedRepoError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            if self.token and status == 403:
                raise GatedRepoError(
                    f"{repo_id} is gated and the token in HF_TOKEN has not been granted access: request access "
                    f"on {self.endpoint}/{repo_id} with that account, then try again.",
                    has_token=True,
                ) from None
            raise GatedRepoError(
                f"{repo_id} is gated: accept its licence on {self.endpoint}/{repo_id} and set HF_TOKEN to a "
                "read token of that account (or pick a model from the offline catalog).",
                has_token=bool(self.token),
            ) from None
        except hf_errors.RevisionNotFoundError:
            raise RevisionNotFoundError(
                f"{repo_id} has no revision {revision!r}: give a branch, a tag or a full 40-character commit sha."
            ) from None
        except hf_errors.RepositoryNotFoundError:
            raise RepoNotFoundError(
                f"{repo_id}: no such model on {where}. Check the spelling (ORG/NAME); if it is private, set "
                "HF_TOKEN to a token that can read it."
            ) from None
        except hf_errors.RemoteEntryNotFoundError:
            raise NoConfigError(
                f"{repo_id} @ {revision}: {filename or 'a file'} is listed but the Hub does not serve it.",
                gguf_files=[],
            ) from None
        except hf_errors.HfHubHTTPError as exc:
            response = exc.response
            status = response.status_code if response is not None else 0
            message = response.headers.get("X-Error-Message", "") if response is not None else ""
            if status == 401 and "Invalid credentials" in message:
                raise InvalidTokenError(
                    "The Hub rejected the token in HF_TOKEN (401 invalid credentials): fix it or unset it."
                ) from None
            if status == 401:
                raise RepoNotFoundError(
                    f"{repo_id}: the Hub answered 401: the repo does not exist or is private; set HF_TOKEN "
                    "to a token that can read it."
                ) from None
            if status == 403:
                raise GatedRepoError(
                    f"{repo_id}: the Hub answered 403 Forbidden ({message or 'no access'}): the token in "
                    "HF_TOKEN cannot read this repo.",
                    has_token=bool(self.token),
                ) from None
            if status == 429:
                raise HubUnavailableError(f"The Hub at {where} is rate limiting us (429 Too Many Requests).") from None
            raise HubUnavailableError(f"The Hub at {where} answered {status} for {repo_id}.") from None
        except httpx2.TimeoutException:
            raise HubUnavailableError(f"The Hub at {where} did not answer within {self.timeout:g} s.") from None
        except httpx2.TransportError as exc:
            raise HubUnavailableError(f"The Hub at {where} cannot be reached ({type(exc).__name__}).") from None
        except hf_errors.SafetensorsParsingError as exc:
            raise BadConfigError(f"{repo_id}: a safetensors header could not be parsed ({exc}).") from None


