"""The calculator form: one Django form shared by the HTML page and the JSON API.

Field names are the ``estimate`` command's flags in snake_case (= vLLM's engine arguments), so a
permalink, an API call and a ``vllm serve`` command read the same. ``None`` (an empty field) means "the
release's default"; the engine resolves it and reports it in ``EstimateResult.resolved``.

``clean_*`` return engine types (a catalog ``GPU``, a ``SpeculativeConfig``); ``to_engine_input()``
loads the model's metadata (``load_metadata``: database cache -> Hub -> offline catalog) and builds the
``EngineInput``.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, get_args
from urllib.parse import urlencode

from django import forms
from django.core.exceptions import ValidationError
from django.http import QueryDict
from pydantic import ValidationError as PydanticValidationError

from calculator import catalog
from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import GPU, all_gpus, get_gpu
from calculator.engine.schemas import DType, EngineInput, KVCacheDType, SpecMethod, SpeculativeConfig

DEFAULT_GPU = EngineInput.model_fields["gpu"].default
DEFAULT_VLLM_VERSION = EngineInput.model_fields["vllm_version"].default
SUPPORTED_VLLM_VERSIONS = (DEFAULT_VLLM_VERSION,)

# Hub repo ids: "org/name" of letters, digits, "-", "_", "." (huggingface_hub's validate_repo_id rules,
# which also keeps a leading "-" out of the argv of ``vllm serve``).
HUB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
REVISION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,127}")

# vLLM 0.32 ``AttentionBackendEnum`` (vllm/v1/attention/backends/registry.py:40-140), the values
# ``--attention-backend`` accepts, minus TORCH_SDPA (ViT only).
ATTENTION_BACKENDS = (
    "FLASH_ATTN",
    "FLASHINFER",
    "TRITON_ATTN",
    "FLEX_ATTENTION",
    "FLASHMLA",
    "FLASHMLA_SPARSE",
    "FLASHINFER_MLA",
    "CUTLASS_MLA",
    "TRITON_MLA",
    "FLASH_ATTN_MLA",
    "ROCM_ATTN",
    "ROCM_AITER_FA",
    "ROCM_AITER_MLA",
    "ROCM_AITER_TRITON_MLA",
    "ROCM_SEGMENTED_ATTN",
    "TRITON_FLASH_ATTN",
    "FLASH_ATTN_DIFFKV",
    "TRITON_ATTN_DIFFKV",
    "FLASHINFER_MLA_SPARSE",
    "ROCM_AITER_MLA_SPARSE",
    "XPU_MLA_SPARSE",
    "TRITON_FLASHINFER",
    "NO_ATTENTION",
)

# vLLM 0.32 ``QuantizationMethods`` (vllm/model_executor/layers/quantization/__init__.py:15), the
# common ones, offered as suggestions; the engine validates the value.
QUANTIZATION_SUGGESTIONS = (
    "fp8",
    "awq",
    "awq_marlin",
    "gptq",
    "gptq_marlin",
    "compressed-tensors",
    "modelopt",
    "modelopt_fp4",
    "mxfp4",
    "bitsandbytes",
    "gguf",
    "experts_int8",
    "moe_wna16",
)

# Speed prediction defaults: ``manage.py estimate``'s, which follow ``vllm bench serve --dataset-name random``
# (1024 tokens in, 128 out) at one request in flight.
SPEED_DEFAULTS = {"prompt_len": 1024, "output_len": 128, "concurrency": 1}

# Methods whose draft weights come from ``speculative_config.model`` (vllm/config/speculative.py).
DRAFT_MODEL_METHODS = ("draft_model", "eagle", "eagle3")

# Characters left readable in permalinks (all legal in a query component, RFC 3986 3.4).
QUERY_SAFE = "/:,"


# Per-process memo of metadata answers: (model id, revision) -> (monotonic expiry, ModelMetadata). The
# metadata layer's database cache already re-resolves branches only after HUB_BRANCH_TTL_S (1 h); this
# spares each keystroke's request its database round trips. Errors are not memoized.
METADATA_MEMO_TTL_S = 60.0
_metadata_memo: dict[tuple[str, str | None], tuple[float, Any]] = {}


def clear_metadata_memo() -> None:
    """Forget the per-process metadata answers (tests)."""
    _metadata_memo.clear()


def load_metadata(model_id: str, revision: str | None, field: str = "model"):
    """The one place the web gets a model's metadata: ``calculator.metadata.load_model`` (database
    cache, then the Hub at ``revision``, then the offline catalog), returning a ``ModelMetadata``
    (``repo_id``, ``config``, ``quant_config``, ``weights``, ``sha``, ``source``, ``notes``), memoized per
    process for ``METADATA_MEMO_TTL_S`` seconds.

    Raises:
        EngineInputError: on ``field`` with the metadata layer's sentence (unknown model or revision,
            gated repo, Hub down and no copy). Without a migrated database the offline catalog answers.
    """
    from django.db import DatabaseError

    from calculator.metadata import MetadataError, RevisionNotFoundError, load_model

    key = (model_id, revision)
    hit = _metadata_memo.get(key)
    if hit is not None and hit[0] > time.monotonic():
        return hit[1]
    try:
        meta = load_model(model_id, revision)
    except RevisionNotFoundError as exc:
        raise EngineInputError("revision" if field == "model" else field, exc.message) from None
    except MetadataError as exc:
        raise EngineInputError(field, exc.message) from None
    except DatabaseError:
        meta = catalog.catalog_lookup(model_id, count_params=False)
        if meta is None:
            raise EngineInputError(
                field,
                f"{model_id!r} is not in the offline catalog and the metadata cache is "
                "not set up (run `python manage.py migrate`; scripts/start does)",
            ) from None
    if len(_metadata_memo) > 1024:
        _metadata_memo.clear()
    _metadata_memo[key] = (time.monotonic() + METADATA_MEMO_TTL_S, meta)
    return meta


def gpu_key(gpu: GPU) -> str:
    """The short name a permalink uses for a device: its first alias (``H100``), else its name."""
    return gpu.aliases[0] if gpu.aliases else gpu.name


def human_readable_int(value: str) -> int:
    """``"32k"`` -> 32000, ``"32K"`` -> 32768, ``"8192"`` -> 8192, as ``--max-model-len`` parses it
    (vllm/utils/argparse_utils.py:29 ``human_readable_int`` in 0.32). Raises ``ValueError``."""
    value = value.strip().replace("_", "").replace(",", "")
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG])", value)
    if not match:
        return int(value)
    number, suffix = match.groups()
    if suffix.islower():
        return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9}[suffix])
    if "." in number:
        raise ValueError(
            f"decimals are not allowed with binary suffixes; did you mean {number}{suffix.lower()}?"
        )
    return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30}[suffix]


class HumanIntField(forms.IntegerField):
    """An integer that also accepts vLLM's ``32k`` / ``32K`` spellings."""

    widget = forms.TextInput

    def to_python(self, value):
        if value in self.empty_values:
            return None
        try:
            return human_readable_int(str(value))
        except ValueError:
            raise ValidationError("Enter a whole number of tokens, e.g. 8192, 32k or 32K.", code="invalid")


class CheckboxInput(forms.CheckboxInput):
    """A checkbox that also reads ``0``/``false``/``off``/``no`` from a query string as unchecked."""

    def value_from_datadict(self, data, files, name):
        value = data.get(name)
        if isinstance(value, str) and value.strip().lower() in ("", "0", "false", "off", "no"):
            return False
        return super().value_from_datadict(data, files, name)


def _choices(literal, blank: str | None = None) -> list[tuple[str, str]]:
    values = [(v, v) for v in get_args(literal)]
    return [("", blank), *values] if blank is not None else values


GPU_CHOICES = [(gpu_key(g), f"{g.name} ({g.memory_gib:g} GiB)") for g in all_gpus()]


class EstimateForm(forms.Form):
    """Everything ``estimate`` takes, named as its flags. Field order is the permalink's order."""

    model = forms.CharField(
        max_length=200, help_text="Hugging Face model id, e.g. meta-llama/Llama-3.1-8B-Instruct"
    )
    revision = forms.CharField(
        required=False, max_length=128, help_text="branch, tag or commit sha (default: main)"
    )
    gpu = forms.CharField(
        required=False, initial=gpu_key(get_gpu(DEFAULT_GPU)), widget=forms.Select(choices=GPU_CHOICES)
    )
    tensor_parallel_size = forms.IntegerField(required=False, min_value=1, max_value=1024, initial=1)
    pipeline_parallel_size = forms.IntegerField(required=False, min_value=1, max_value=1024, initial=1)
    max_model_len = HumanIntField(required=False, min_value=1, max_value=2**24)
    concurrency = forms.IntegerField(
        required=False, min_value=1, max_value=100_000, help_text="expected concurrent requests"
    )
    prompt_len = HumanIntField(
        required=False, min_value=1, max_value=2**24, help_text="prompt tokens per request"
    )
    output_len = HumanIntField(
        required=False, min_value=1, max_value=2**24, help_text="output tokens per request"
    )
    dtype = forms.ChoiceField(required=False, choices=_choices(DType), initial="auto")
    quantization = forms.CharField(required=False, max_length=40)
    kv_cache_dtype = forms.ChoiceField(required=False, choices=_choices(KVCacheDType), initial="auto")
    attention_backend = forms.ChoiceField(
        required=False, choices=[("", "auto (vLLM picks)"), *((b, b) for b in ATTENTION_BACKENDS)]
    )
    gpu_memory_utilization = forms.FloatField(required=False, min_value=0.01, max_value=1.0)
    vllm_version = forms.ChoiceField(
        required=False,
        choices=[(v, f"vLLM {v}") for v in SUPPORTED_VLLM_VERSIONS],
        initial=DEFAULT_VLLM_VERSION,
    )
    speculative_method = forms.ChoiceField(required=False, choices=_choices(SpecMethod, blank="off"))
    speculative_model = forms.CharField(required=False, max_length=200)
    num_speculative_tokens = forms.IntegerField(required=False, min_value=1, max_value=64)
    acceptance_rate = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        help_text="expected acceptance rate of draft tokens (speed only)",
    )
    block_size = forms.IntegerField(required=False, min_value=1, max_value=4096)
    max_num_batched_tokens = HumanIntField(required=False, min_value=1, max_value=2**24)
    max_num_seqs = forms.IntegerField(required=False, min_value=1, max_value=100_000)
    enforce_eager = forms.BooleanField(required=False, widget=CheckboxInput)

    ADVANCED = ("block_size", "max_num_batched_tokens", "max_num_seqs", "enforce_eager")
    quantization_suggestions = QUANTIZATION_SUGGESTIONS

    @property
    def error_slots(self) -> list[tuple[str, list[str]]]:
        """``[(field name, [messages])]`` for every field, in order, plus ``("form", non-field errors)``:
        the out-of-band error containers an htmx response refreshes (empty lists clear old messages)."""
        errors = self.errors if self.is_bound else {}
        slots = [(name, list(errors.get(name, ()))) for name in self.fields]
        return [*slots, ("form", list(errors.get("__all__", ())))]

    @property
    def advanced_open(self) -> bool:
        """Open the "Advanced" group when one of its fields is set or has an error."""
        data = self.data if self.is_bound else self.initial
        return any(data.get(n) not in (None, "", False, "0", "false") for n in self.ADVANCED) or any(
            n in self.errors for n in self.ADVANCED
        )

    @classmethod
    def from_query(cls, query: QueryDict | dict[str, Any]) -> EstimateForm:
        """Bind a query string. ``speculative_config`` (the permalink's JSON form of the speculative
        fields, as ``--speculative-config`` takes it) fills ``speculative_method/model/
        num_speculative_tokens``; a value that is not such JSON becomes an error on ``speculative_method``."""
        data = {k: query.get(k) for k in query}
        raw = (data.pop("speculative_config", None) or "").strip()
        form_errors: list[str] = []
        if raw:
            try:
                spec = json.loads(raw)
                if not isinstance(spec, dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                form_errors.append(f"speculative_config is not a JSON object: {exc}")
            else:
                data["speculative_method"] = str(spec.get("method") or "")
                data["speculative_model"] = str(spec.get("model") or "")
                data["num_speculative_tokens"] = str(spec.get("num_speculative_tokens") or "")
        form = cls(data)
        form._query_errors = form_errors
        return form

    # -- field cleaning: each returns the engine's type -------------------------------------------
    def clean_model(self) -> str:
        model = self.cleaned_data["model"].strip()
        if not HUB_ID_RE.fullmatch(model):
            raise ValidationError("Enter a Hugging Face model id of the form org/name.")
        return model

    def clean_revision(self) -> str | None:
        revision = self.cleaned_data["revision"].strip()
        if revision and not REVISION_RE.fullmatch(revision):
            raise ValidationError("A revision is a branch, tag or commit sha (letters, digits, . _ / -).")
        return revision or None

    def clean_gpu(self) -> GPU:
        try:
            return get_gpu(self.cleaned_data["gpu"].strip() or DEFAULT_GPU)
        except EngineInputError as exc:
            raise ValidationError(exc.message) from None

    def clean_quantization(self) -> str | None:
        value = self.cleaned_data["quantization"].strip()
        if value and not re.fullmatch(r"[a-z0-9_-]+", value):
            raise ValidationError("A quantization method is a vLLM name such as fp8, awq or gptq_marlin.")
        return value or None

    def clean_speculative_model(self) -> str | None:
        model = self.cleaned_data["speculative_model"].strip()
        if model and not HUB_ID_RE.fullmatch(model):
            raise ValidationError("Enter the draft model's Hugging Face id (org/name).")
        return model or None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for message in getattr(self, "_query_errors", ()):
            self.add_error("speculative_method", message)
        method = data.get("speculative_method") or None
        if method:
            if not data.get("num_speculative_tokens"):
                self.add_error(
                    "num_speculative_tokens", f"Set the number of speculative tokens for {method}."
                )
            if method in DRAFT_MODEL_METHODS and not data.get("speculative_model"):
                self.add_error("speculative_model", f"{method} needs a draft model id.")
        elif data.get("speculative_model") or data.get("num_speculative_tokens"):
            self.add_error(
                "speculative_method", "Pick a speculative decoding method (or clear the draft fields)."
            )
        return data

    # -- building engine input -------------------------------------------------------------------
    def speculative_config(self) -> SpeculativeConfig | None:
        """``--speculative-config`` from the cleaned speculative fields (``None`` when off)."""
        data = self.cleaned_data
        if not data.get("speculative_method"):
            return None
        return SpeculativeConfig(
            method=data["speculative_method"],
            model=data.get("speculative_model"),
            num_speculative_tokens=data["num_speculative_tokens"],
        )

    def to_engine_input(self) -> tuple[EngineInput, Any]:
        """Load the model's metadata and build the ``EngineInput``. Call after ``is_valid()``.

        Returns ``(engine_input, metadata)`` (``metadata`` has ``.sha`` and ``.source``).

        Raises:
            EngineInputError: unknown model / revision / draft model (fields ``model``, ``revision``,
                ``speculative_model``), or a value pydantic rejects.
        """
        data = self.cleaned_data
        meta = load_metadata(data["model"], data["revision"])
        data["model"] = meta.repo_id  # the Hub's spelling (ids are case-insensitive there)
        spec = self.speculative_config()
        draft = None
        if spec is not None and spec.model and spec.method in DRAFT_MODEL_METHODS:
            draft = load_metadata(spec.model, None, field="speculative_model")
        kwargs: dict[str, Any] = {
            **meta.engine_kwargs(),
            "draft_hf_config": draft.config if draft else None,
            "draft_weights": draft.weights if draft else None,
            "gpu": data["gpu"].name,
            "speculative_config": spec,
        }
        for name in (
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "max_model_len",
            "gpu_memory_utilization",
            "dtype",
            "quantization",
            "kv_cache_dtype",
            "block_size",
            "max_num_seqs",
            "max_num_batched_tokens",
            "vllm_version",
            "attention_backend",
        ):
            value = data.get(name)
            if value not in (None, ""):
                kwargs[name] = value
        kwargs["enforce_eager"] = bool(data.get("enforce_eager"))
        try:
            return EngineInput(**kwargs), meta
        except PydanticValidationError as exc:
            err = exc.errors()[0]
            raise EngineInputError(str(err["loc"][0]) if err.get("loc") else "model", err["msg"]) from None

    # -- permalinks ------------------------------------------------------------------------------
    def canonical_query(self, sha: str | None = None) -> str:
        """The permalink's query string: values that differ from the defaults, in field order, with
        ``speculative_config`` as one JSON value. ``gpu`` and ``vllm_version`` are always written (the
        defaults are the release's, so the release is part of what a link means, like the revision
        sha); ``revision`` is the resolved ``sha`` when the metadata layer gives one."""
        return urlencode(canonical_params(self.cleaned_data, sha), safe=QUERY_SAFE)

    def error_list(self) -> list[tuple[str | None, str]]:
        """``[(field or None, message), ...]`` in field order, for the JSON API."""
        out = []
        for name, errors in self.errors.items():
            for message in errors:
                out.append((None if name == "__all__" else name, message))
        return out


def _widget_attrs(fields: dict[str, forms.Field]) -> None:
    """Set the inputs' HTML hints once, on the class's fields (each form deep-copies them)."""
    fields["model"].widget.attrs.update(list="catalog-models", placeholder="org/name", autocomplete="off")
    fields["quantization"].widget.attrs.update(list="quantization-methods", placeholder="from the checkpoint")
    fields["revision"].widget.attrs["placeholder"] = "main"
    fields["speculative_model"].widget.attrs["placeholder"] = "draft model org/name"
    for name in (
        "max_model_len",
        "gpu_memory_utilization",
        "block_size",
        "max_num_batched_tokens",
        "max_num_seqs",
    ):
        fields[name].widget.attrs["placeholder"] = "release default"
    fields["concurrency"].widget.attrs["placeholder"] = "1"
    fields["prompt_len"].widget.attrs["placeholder"] = str(SPEED_DEFAULTS["prompt_len"])
    fields["output_len"].widget.attrs["placeholder"] = str(SPEED_DEFAULTS["output_len"])
    fields["num_speculative_tokens"].widget.attrs["placeholder"] = "e.g. 3"
    fields["acceptance_rate"].widget.attrs["placeholder"] = "e.g. 0.7"
    fields["max_model_len"].widget.attrs["inputmode"] = "numeric"
    fields["max_num_batched_tokens"].widget.attrs["inputmode"] = "numeric"


_widget_attrs(EstimateForm.base_fields)

_DEFAULTS = {
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "dtype": "auto",
    "kv_cache_dtype": "auto",
    "enforce_eager": False,
    "revision": "main",
}


def canonical_params(data: dict[str, Any], sha: str | None = None) -> list[tuple[str, str]]:
    """``[(name, value), ...]`` for a permalink from a form's ``cleaned_data`` (see
    ``EstimateForm.canonical_query``)."""
    params: list[tuple[str, str]] = []
    spec_written = False
    for name in EstimateForm.base_fields:
        value = data.get(name)
        if name == "revision":
            value = sha or value
        elif name == "gpu":
            value = gpu_key(value) if isinstance(value, GPU) else value
        elif name == "vllm_version":
            value = value or DEFAULT_VLLM_VERSION
        elif name in ("speculative_method", "speculative_model", "num_speculative_tokens"):
            if not spec_written and data.get("speculative_method"):
                spec = {"method": data["speculative_method"]}
                if data.get("speculative_model"):
                    spec["model"] = data["speculative_model"]
                spec["num_speculative_tokens"] = data.get("num_speculative_tokens")
                params.append(("speculative_config", json.dumps(spec, separators=(",", ":"))))
            spec_written = True
            continue
        if value in (None, "") or _DEFAULTS.get(name, object()) == value:
            continue
        if isinstance(value, bool):
            value = "true"
        elif isinstance(value, float):
            value = repr(value)
        params.append((name, str(value)))
    return params


def tidy_query(query: QueryDict) -> str:
    """What the user typed, minus empty values, in field order: the URL pushed while the form has
    errors (so nothing they submitted is lost)."""
    names = [*EstimateForm.base_fields, "speculative_config"]
    return urlencode([(n, query[n]) for n in names if query.get(n, "").strip()], safe=QUERY_SAFE)
