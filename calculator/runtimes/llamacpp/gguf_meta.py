"""GGUF header reader: architecture, attention shapes and the tensor table, from a local file or the Hub.

Everything comes from the ``gguf`` package (``gguf.GGUFReader`` parses the header, ``gguf.GGML_QUANT_SIZES``
gives each ggml type's block size and bytes per block); nothing here reads tensor data.

* ``read_gguf(path)``: a local ``.gguf`` file; a split file (``name-00001-of-00003.gguf``) reads its siblings
  in the same folder too (llama.cpp's ``gguf-split`` layout: the first split holds the metadata, every split
  holds its own tensor table).
* ``read_gguf_from_hub(repo_id, filename, revision=...)``: the same through ranged HTTP requests
  (``Range: bytes=a-b``) made by ``huggingface_hub``'s session against ``HF_ENDPOINT``; only the header and
  the tensor table at the start of each file are read (``first_bytes``, doubled while the header is longer).

Units: bytes (``n_bytes``), elements (``n_elements``); shapes are ggml order (``ne[0]`` = the contiguous row
length first), as GGUF stores them. Errors: ``GGUFError`` (with the field that is wrong) and, from the Hub,
``calculator.metadata.hub.MetadataError`` subclasses.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

#: ``name-00001-of-00003.gguf``: llama.cpp's split naming (``llama_split_path``, ``src/llama.cpp``; the
#: format string is ``"%s-%05d-of-%05d.gguf"``).
SPLIT_RE = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")

#: First ranged read from the Hub. The header of a GGUF is its metadata (the tokenizer's vocabulary and merges
#: are most of it: 2-12 MiB for 150k-260k token vocabularies) followed by the tensor table.
DEFAULT_FIRST_BYTES = 4 * 1024 * 1024
MAX_HEADER_BYTES = 512 * 1024 * 1024


class GGUFError(ValueError):
    """A file that is not a GGUF we can read; ``field`` names the offending input (``model``, ``gguf``)."""

    def __init__(self, message: str, *, field: str = "gguf"):
        super().__init__(message)
        self.field = field


class GGUFTensor(BaseModel):
    """One tensor-table entry. ``shape`` is ggml order (``ne[0]`` first); ``n_bytes`` = rows x row bytes, a
    row being ``ne[0] / block_size`` blocks of ``type_size`` bytes (``ggml_nbytes``, ``ggml/src/ggml.c``)."""

    name: str
    ggml_type: str  # gguf.GGMLQuantizationType name: F32, F16, BF16, Q8_0, Q4_K, MXFP4, ...
    type_id: int
    shape: list[int]
    n_elements: int
    n_bytes: int
    offset: int  # absolute byte offset of the data in its file
    file_index: int = 0  # which split file (0-based)


class GGUFMeta(BaseModel):
    """What a GGUF header says about the model, as llama.cpp reads it (``llama_model::load_hparams``,
    ``src/llama-model.cpp``). Per-layer arrays (``n_head``, ``n_head_kv``) are expanded to ``n_layer_all``
    entries whether the file stores a scalar or an array (``get_key_or_arr``)."""

    source: str
    files: list[str]
    file_sizes: list[int]
    architecture: str
    name: str | None = None
    file_type: int | None = None
    n_layer_all: int  # {arch}.block_count (includes NextN/MTP layers)
    n_layer_nextn: int = 0  # {arch}.nextn_predict_layers
    n_ctx_train: int  # {arch}.context_length
    n_embd: int  # {arch}.embedding_length
    n_head: list[int]
    n_head_kv: list[int]
    head_dim_k: int | None  # {arch}.attention.key_length, default n_embd / n_head (llama-model.cpp)
    head_dim_v: int | None
    head_dim_k_swa: int | None = None  # {arch}.attention.key_length_swa
    head_dim_v_swa: int | None = None
    kv_lora_rank: int | None = None  # MLA
    key_length_mla: int | None = None
    value_length_mla: int | None = None
    sliding_window: int | None = None  # {arch}.attention.sliding_window
    sliding_window_pattern: int | list[bool] | None = None  # scalar period or per-layer flags, as stored
    shared_kv_layers: int | None = None  # {arch}.attention.shared_kv_layers (gemma3n / gemma4)
    n_expert: int = 0
    n_expert_used: int = 0
    n_vocab: int | None = None  # {arch}.vocab_size, else the length of tokenizer.ggml.tokens
    alignment: int = 32
    data_offsets: list[int] = Field(default_factory=list)  # start of the tensor data in each file
    tensors: list[GGUFTensor]
    kv: dict[str, Any] = Field(default_factory=dict)  # every scalar key/value (arrays left out)

    def tensor(self, name: str) -> GGUFTensor | None:
        for t in self.tensors:
            if t.name == name:
                return t
        return None

    @property
    def total_tensor_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)


# ---------------------------------------------------------------- parsing


def _meta_from_readers(readers: list, files: list[str], sizes: list[int], source: str) -> GGUFMeta:
    """Combine the readers of one model's split files (``readers[0]`` holds the metadata)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

    first = readers[0]
    kv: dict[str, Any] = {}
    arrays: dict[str, Any] = {}
    for key, field in first.fields.items():
        if key.startswith("GGUF."):
            continue
        if field.types and field.types[0] == GGUFValueType.ARRAY:
            if key.startswith("tokenizer.ggml."):
                arrays[key + ".__len__"] = len(field.data)
            else:
                arrays[key] = field.contents()
        else:
            kv[key] = field.contents()

    arch = kv.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise GGUFError(f"{source}: no general.architecture key: not a model GGUF (an mmproj or LoRA file?).")

    def get(suffix: str, default=None):
        key = f"{arch}.{suffix}"
        if key in kv:
            return kv[key]
        if key in arrays:
            return arrays[key]
        return default

    def required(suffix: str) -> int:
        value = get(suffix)
        if value is None:
            raise GGUFError(f"{source}: required key {arch}.{suffix} is missing.")
        return int(value)

    n_layer_all = required("block_count")

    def per_layer(value, name: str, default: list[int] | None) -> list[int]:
        if value is None:
            if default is None:
                raise GGUFError(f"{source}: required key {arch}.{name} is missing.")
            return list(default)
        if isinstance(value, list):
            if len(value) != n_layer_all:
                raise GGUFError(f"{source}: {arch}.{name} has {len(value)} entries for {n_layer_all} layers.")
            return [int(v) for v in value]
        return [int(value)] * n_layer_all

    n_embd = required("embedding_length")
    n_head = per_layer(get("attention.head_count"), "attention.head_count", [0] * n_layer_all)
    n_head_kv = per_layer(get("attention.head_count_kv"), "attention.head_count_kv", n_head)
    head0 = n_head[0] if n_head else 0
    head_k = get("attention.key_length")
    head_v = get("attention.value_length")
    if head0 > 0:
        head_k = int(head_k) if head_k is not None else n_embd // head0
        head_v = int(head_v) if head_v is not None else n_embd // head0
    pattern = get("attention.sliding_window_pattern")
    if isinstance(pattern, list):
        pattern = [bool(v) for v in pattern]
    elif pattern is not None:
        pattern = int(pattern)

    n_vocab = get("vocab_size")
    if n_vocab is None:
        n_vocab = arrays.get("tokenizer.ggml.tokens.__len__")

    tensors: list[GGUFTensor] = []
    data_offsets = []
    for idx, reader in enumerate(readers):
        data_offsets.append(int(reader.data_offset))
        for t in reader.tensors:
            gtype = GGMLQuantizationType(int(t.tensor_type))
            block, type_size = GGML_QUANT_SIZES[gtype]
            shape = [int(d) for d in t.shape]
            if shape and shape[0] % block:
                raise GGUFError(f"{source}: tensor {t.name} row of {shape[0]} is not a multiple of the "
                                f"{gtype.name} block of {block}.")
            n_el = 1
            for d in shape:
                n_el *= d
            tensors.append(GGUFTensor(
                name=t.name, ggml_type=gtype.name, type_id=int(gtype), shape=shape, n_elements=n_el,
                n_bytes=n_el // block * type_size, offset=int(t.data_offset), file_index=idx,
            ))

    def opt_int(suffix: str) -> int | None:
        value = get(suffix)
        return int(value) if value is not None and not isinstance(value, list) else None

    return GGUFMeta(
        source=source,
        files=files,
        file_sizes=sizes,
        architecture=arch,
        name=kv.get("general.name"),
        file_type=kv.get("general.file_type"),
        n_layer_all=n_layer_all,
        n_layer_nextn=opt_int("nextn_predict_layers") or 0,
        n_ctx_train=required("context_length"),
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim_k=head_k,
        head_dim_v=head_v,
        head_dim_k_swa=opt_int("attention.key_length_swa"),
        head_dim_v_swa=opt_int("attention.value_length_swa"),
        kv_lora_rank=opt_int("attention.kv_lora_rank"),
        key_length_mla=opt_int("attention.key_length_mla"),
        value_length_mla=opt_int("attention.value_length_mla"),
        sliding_window=opt_int("attention.sliding_window"),
        sliding_window_pattern=pattern,
        shared_kv_layers=opt_int("attention.shared_kv_layers"),
        n_expert=opt_int("expert_count") or 0,
        n_expert_used=opt_int("expert_used_count") or 0,
        n_vocab=int(n_vocab) if n_vocab is not None else None,
        alignment=int(kv.get("general.alignment", 32)),
        data_offsets=data_offsets,
        tensors=tensors,
        kv=kv,
    )


def _open_reader(path: str | os.PathLike):
    from gguf import GGUFReader

    try:
        return GGUFReader(path)
    except (ValueError, KeyError, IndexError) as exc:
        raise GGUFError(f"{path}: not a readable GGUF file ({exc}).") from None


def split_siblings(filename: str) -> list[str] | None:
    """``x-00002-of-00003.gguf`` -> the three file names in order; ``None`` for an unsplit name."""
    m = SPLIT_RE.match(filename)
    if not m:
        return None
    count = int(m.group("count"))
    if count < 1 or int(m.group("no")) < 1 or int(m.group("no")) > count:
        raise GGUFError(f"{filename}: split number out of range.", field="model")
    return [f"{m.group('prefix')}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


def read_gguf(path: str | os.PathLike) -> GGUFMeta:
    """Read a local GGUF header (and its split siblings, found next to it). Raises ``GGUFError``."""
    path = Path(path)
    if not path.is_file():
        raise GGUFError(f"{path}: no such file.", field="model")
    names = split_siblings(path.name) or [path.name]
    files = [path.parent / n for n in names]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise GGUFError(f"{path}: split file(s) missing: {', '.join(missing)}.", field="model")
    readers = [_open_reader(f) for f in files]
    _check_split_count(readers, str(path))
    return _meta_from_readers(readers, [str(f) for f in files], [f.stat().st_size for f in files], str(path))


def _check_split_count(readers: list, source: str) -> None:
    if len(readers) < 2:
        return
    field = readers[0].fields.get("split.count")
    if field is not None and int(field.contents()) != len(readers):
        raise GGUFError(f"{source}: split.count says {int(field.contents())} files, the name says {len(readers)}.")


# ---------------------------------------------------------------- the Hub


def _header_end(reader) -> int:
    """Byte offset just past the header (metadata + tensor table) as the reader parsed it."""
    end = 0
    for field in list(reader.fields.values()) + [t.field for t in reader.tensors]:
        end = max(end, int(field.offset) + sum(int(p.nbytes) for p in field.parts))
    return end


def parse_prefix(prefix: bytes, total_size: int):
    """Parse a GGUF header from the first ``len(prefix)`` bytes of a ``total_size``-byte file.

    The prefix is written into a sparse temporary file of the full size (the zeros past the prefix are
    never read as data: ``GGUFReader`` only maps tensor data), so the package's own parser does the work.
    Returns the reader, or ``None`` when the header runs past the prefix (read more and call again)."""
    with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as fh:
        fh.write(prefix)
        fh.truncate(max(total_size, len(prefix)))
        name = fh.name
    try:
        from gguf import GGUFReader

        try:
            reader = GGUFReader(name)
        except (ValueError, KeyError, IndexError, OverflowError, MemoryError):
            if len(prefix) >= total_size:
                raise GGUFError("not a readable GGUF file (the header does not parse).") from None
            return None
        if len(prefix) < total_size and _header_end(reader) > len(prefix):
            return None
        return reader
    finally:
        os.unlink(name)


def read_gguf_from_hub(
    repo_id: str,
    filename: str,
    revision: str | None = None,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    first_bytes: int = DEFAULT_FIRST_BYTES,
) -> GGUFMeta:
    """Read the header of ``filename`` (and of its split siblings) in ``repo_id`` at ``revision`` with ranged
    GETs: ``first_bytes`` first, doubled while the header runs past what was read. ``endpoint`` defaults to
    ``HF_ENDPOINT``, ``token`` to ``HF_TOKEN``. Raises ``calculator.metadata.hub.MetadataError`` subclasses (repo,
    revision, gating, network) and ``GGUFError`` (not a GGUF, a listed split file missing)."""
    from calculator.metadata.hub import DEFAULT_TIMEOUT_S, HubClient, NoConfigError

    client = HubClient(endpoint=endpoint, token=token, timeout=timeout or DEFAULT_TIMEOUT_S)
    rev = client.resolve(repo_id, revision)
    names = split_siblings(Path(filename).name)
    if names is not None:
        folder = str(Path(filename).parent)
        names = [n if folder in ("", ".") else f"{folder}/{n}" for n in names]
    else:
        names = [filename]
    missing = [n for n in names if n not in rev.siblings]
    if missing:
        if filename not in rev.siblings:
            raise NoConfigError(f"{repo_id} @ {rev.sha[:7]} has no file {filename}.", gguf_files=sorted(
                s for s in rev.siblings if s.lower().endswith(".gguf")))
        raise GGUFError(f"{repo_id} @ {rev.sha[:7]}: split file(s) missing: {', '.join(missing)}.", field="model")

    readers, sizes = [], []
    for name in names:
        reader, size = _hub_header(client, repo_id, rev, name, first_bytes)
        readers.append(reader)
        sizes.append(size)
    _check_split_count(readers, f"{repo_id}/{filename}")
    source = f"GGUF header of {repo_id} @ {rev.sha[:7]}: {filename}" + (
        f" (+{len(names) - 1} split files)" if len(names) > 1 else "")
    return _meta_from_readers(readers, names, sizes, source)


def _hub_header(client, repo_id: str, rev, name: str, first_bytes: int):
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = hf_hub_url(repo_id, name, revision=rev.sha, endpoint=client.endpoint)
    headers = build_hf_headers(token=client.token or False)
    buf = bytearray()
    total: int | None = None
    want = max(64, first_bytes)
    while True:
        start, end = len(buf), want - 1

        def get(start=start, end=end):
            response = get_session().get(url, headers={**headers, "range": f"bytes={start}-{end}"},
                                         timeout=client.timeout)
            hf_raise_for_status(response)
            return response

        response = client._call(repo_id, rev.revision, get, filename=name)
        chunk = response.content
        if response.status_code == 206:
            content_range = response.headers.get("content-range", "")
            m = re.match(r"bytes (\d+)-(\d+)/(\d+)", content_range)
            if not m or int(m.group(1)) != start:
                raise GGUFError(f"{repo_id}/{name}: unexpected Content-Range {content_range!r}.")
            total = int(m.group(3))
            buf += chunk
        else:  # 200: the server sent the whole file
            buf = bytearray(chunk)
            total = len(buf)
        if buf[:4] != b"GGUF":
            raise GGUFError(f"{repo_id}/{name}: not a GGUF file (magic {bytes(buf[:4])!r}).", field="model")
        reader = parse_prefix(bytes(buf), total)
        if reader is not None:
            return reader, total
        if len(buf) >= total or want >= MAX_HEADER_BYTES:
            raise GGUFError(f"{repo_id}/{name}: GGUF header does not parse within {len(buf)} bytes.")
        want *= 2


# ---------------------------------------------------------------- from a Transformers config

#: HF ``model_type`` -> GGUF ``general.architecture`` as llama.cpp's converter writes it
#: (vendor/llama.cpp/conversion/*.py ``model_arch``; Mistral checkpoints convert as ``llama``).
HF_TO_GGUF_ARCH = {
    "llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen2_moe": "qwen2moe", "qwen3": "qwen3",
    "qwen3_moe": "qwen3moe", "gemma": "gemma", "gemma2": "gemma2", "gemma3": "gemma3", "gemma3_text": "gemma3",
    "gpt_oss": "gpt-oss", "granite": "granite", "phi": "phi2", "starcoder2": "starcoder2",
    "deepseek_v2": "deepseek2", "deepseek_v3": "deepseek2", "kimi_k2": "deepseek2", "glm4_moe": "glm4moe",
    # MixtralForCausalLM converts as the llama architecture (vendor/llama.cpp/conversion/llama.py:17-34)
    "mixtral": "llama",
    # Gemma4ForConditionalGeneration / Gemma4ForCausalLM (conversion/gemma.py:632-634)
    "gemma4": "gemma4", "gemma4_text": "gemma4",
}

CONV = "llama-cpp-python 0.3.36 vendor/llama.cpp/conversion/"


def _gemma4_meta(cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """The attention keys conversion/gemma.py (``Gemma4Model.set_gguf_parameters``, :670-738, on top of
    ``Gemma3Model.set_gguf_parameters`` :140-158) writes for a Gemma 4 ``text_config``:

    * ``sliding_window_pattern`` = ``[t == "sliding_attention" for t in layer_types]`` (:681-682);
    * ``key_length`` / ``value_length`` = ``global_head_dim`` (full-attention layers), ``key_length_swa`` /
      ``value_length_swa`` = ``head_dim`` (:686-701);
    * ``head_count_kv`` = per layer ``num_key_value_heads`` on sliding and ``num_global_key_value_heads`` on full
      layers when the config has the latter (:716-726), else the scalar ``num_key_value_heads`` (gemma.py:158);
    * ``shared_kv_layers`` = ``num_kv_shared_layers`` (:674-675): the last N layers keep no cache
      (src/models/gemma4.cpp:8-11);
    * ``expert_count`` / ``expert_used_count`` = ``num_experts`` / ``top_k_experts`` (conversion/base.py:1516-1521);
    * ``sliding_window`` (gemma.py:156-157), ``context_length`` = ``max_position_embeddings`` (:146).

    ``attention_k_eq_v`` (the full layers' V is their K, no ``v_proj``) changes no key: llama.cpp still caches V
    for those layers (``Vcur = Kcur``, src/models/gemma4.cpp:249-251; llama-kv-cache.cpp:231-234 makes V for
    every non-MLA layer). Raises ``GGUFError`` for a config that lacks the keys."""
    try:
        n_layer = int(cfg["num_hidden_layers"])
        layer_types = list(cfg["layer_types"])
        head_swa = int(cfg["head_dim"])
        head_full = int(cfg.get("global_head_dim") or head_swa)
        n_kv_swa = int(cfg["num_key_value_heads"])
        window = int(cfg["sliding_window"])
    except (KeyError, TypeError, ValueError) as exc:
        raise GGUFError(f"{source}: Gemma 4 config lacks {exc} (layer_types, head_dim, num_key_value_heads, "
                        "sliding_window are needed)", field="model") from None
    if len(layer_types) != n_layer:
        raise GGUFError(f"{source}: layer_types has {len(layer_types)} entries for {n_layer} layers", field="model")
    swa = [t == "sliding_attention" for t in layer_types]
    n_kv_full = cfg.get("num_global_key_value_heads")
    n_kv_full = int(n_kv_full) if n_kv_full is not None else n_kv_swa
    n_experts = int(cfg.get("num_experts") or 0) if cfg.get("enable_moe_block", True) else 0
    return {
        "n_head_kv": [n_kv_swa if s else n_kv_full for s in swa],
        "head_dim_k": head_full, "head_dim_v": head_full, "head_dim_k_swa": head_swa, "head_dim_v_swa": head_swa,
        "sliding_window": window, "sliding_window_pattern": swa,
        "shared_kv_layers": int(cfg.get("num_kv_shared_layers") or 0),
        "n_expert": n_experts,
        "n_expert_used": next((int(cfg[k]) for k in ("num_experts_per_tok", "num_experts_per_token", "top_k_experts")
                               if cfg.get(k)), 0) if n_experts else 0,
        "source": f"{source} (as llama.cpp's converter writes it: {CONV}gemma.py:670-738; no tensor table)",
    }


def meta_from_hf_config(config: dict[str, Any], *, source: str = "config.json") -> GGUFMeta:
    """The attention metadata llama.cpp's converter would write for a Transformers ``config.json``: block
    count, heads, head dims (``head_dim`` or hidden / heads), context length, sliding window
    (conversion/gemma.py:103 and :157, conversion/gpt_oss.py:130 write ``sliding_window``; no pattern key,
    so llama.cpp's per-architecture default applies; Gemma 4 writes a per-layer pattern, :func:`_gemma4_meta`).
    No tensor table (weights need the GGUF itself).
    Raises ``GGUFError`` for a model type not in ``HF_TO_GGUF_ARCH``."""
    cfg = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    model_type = cfg.get("model_type") or config.get("model_type")
    arch = HF_TO_GGUF_ARCH.get(model_type or "")
    if arch is None:
        raise GGUFError(f"{source}: model_type {model_type!r} has no modelled GGUF architecture", field="model")
    n_layer = int(cfg["num_hidden_layers"])
    n_head = int(cfg["num_attention_heads"])
    n_kv = int(cfg.get("num_key_value_heads") or n_head)
    n_embd = int(cfg["hidden_size"])
    head = int(cfg.get("head_dim") or n_embd // n_head)
    window = cfg.get("sliding_window") if arch in ("gemma2", "gemma3", "gpt-oss") else None
    if arch == "gemma4":
        g4 = _gemma4_meta(cfg, source)
        return GGUFMeta(
            files=[], file_sizes=[], architecture=arch, name=config.get("_name_or_path"), n_layer_all=n_layer,
            n_ctx_train=int(cfg.get("max_position_embeddings") or 0), n_embd=n_embd, n_head=[n_head] * n_layer,
            n_vocab=int(cfg["vocab_size"]) if cfg.get("vocab_size") else None, tensors=[], **g4)
    mla: dict[str, int] = {}
    if arch == "deepseek2" and cfg.get("kv_lora_rank"):
        # conversion/deepseek.py:326 (num_key_value_heads = 1) and :349-353: MLA is written as MQA with
        # key_length = kv_lora_rank + qk_rope_head_dim, value_length = kv_lora_rank
        rank = int(cfg["kv_lora_rank"])
        n_kv, head = 1, rank + int(cfg["qk_rope_head_dim"])
        mla = {"head_dim_v": rank, "kv_lora_rank": rank,
               "key_length_mla": int(cfg["qk_nope_head_dim"]) + int(cfg["qk_rope_head_dim"]),
               "value_length_mla": int(cfg["v_head_dim"])}
    return GGUFMeta(
        source=f"{source} (as llama.cpp's converter writes it; no tensor table)",
        files=[], file_sizes=[], architecture=arch, name=config.get("_name_or_path"),
        n_layer_all=n_layer, n_ctx_train=int(cfg.get("max_position_embeddings") or 0), n_embd=n_embd,
        n_head=[n_head] * n_layer, n_head_kv=[n_kv] * n_layer, head_dim_k=head,
        head_dim_v=mla.pop("head_dim_v", head), **mla,
        sliding_window=int(window) if window else None,
        n_expert=int(cfg.get("num_experts") or cfg.get("num_local_experts") or 0),
        n_expert_used=int(cfg.get("num_experts_per_tok") or 0),
        n_vocab=int(cfg["vocab_size"]) if cfg.get("vocab_size") else None,
        tensors=[],
    )
