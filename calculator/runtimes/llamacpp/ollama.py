"""Which engine Ollama runs a GGUF model on, per Ollama release, and the memory of its own Go engine.

Ollama has had two engines for GGUF (GGML) models:

* its llama.cpp runner ("llamarunner", llama.cpp's C++ graph; since 0.30.0 the upstream ``llama-server`` itself), whose
  buffers are llama.cpp's (:mod:`.memory`);
* its own Go engine ("ollamarunner": the model graphs in ``model/models/*``, the KV cache in ``kvcache/``, the ggml
  backend in ``ml/backend/ggml``), which logs ``msg="model weights" device=.. size=..``, ``msg="kv cache" ...`` and
  ``msg="compute graph" ...`` (``ml/device.go`` ``BackendMemory.Log``) instead of llama.cpp's lines.

From 0.19.0 to 0.24.0 ``llm/server.go:148-165`` (``NewLlamaServer``) takes the Go engine when
``envconfig.NewEngine() || f.KV().OllamaEngineRequired()`` (``OLLAMA_NEW_ENGINE``, default off; the architecture list
of ``fs/ggml/ggml.go`` ``OllamaEngineRequired``) **and** no separate projector file was given ("split vision models
aren't supported") **and** the Go engine has a text processor for the model; otherwise it falls back to the llama.cpp
runner (``StartRunner(tok != nil, ...)``, server.go:276-277). Commit 9db4bdbad (2026-05-29, PR #16031, "runner: Remove
CGO engines, use llama-server exclusively for GGML models"), first in 0.30.0 (there is no 0.25 .. 0.29), removed both
runners: ``llm/server.go:106-120`` at v0.30.0 "All GGML models are served via the upstream llama-server subprocess".

The batch Ollama passes to its runner (before 0.30 ``min(512, num_ctx)``; from 0.30 ``-b N -ub N`` with N picked by
its scheduler from the context and the free memory: :func:`ollama_batch`), the slots it forces to one for some model
families and for embedding models (:func:`ollama_num_parallel`) and its out-of-memory retry with a lower automatic
context (:func:`oom_retry`) cite their lines per span of tags (:data:`OLLAMA_LINES`).

Everything here is transcribed from the ollama/ollama tags named in each source (mirror of github.com/ollama/ollama,
tags v0.19.0 .. v0.33.0-rc2). Units: bytes unless a name says MiB; MiB = 2^20 B.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .gguf_meta import GGUFMeta

MiB = 1024 * 1024
GiB = 1024 * MiB

#: fs/ggml/ggml.go OllamaEngineRequired at v0.19.0 (31f968fe1), lines 277-301
_REQUIRED_0_19 = ("bert", "deepseek2", "deepseekocr", "gemma3", "gemma3n", "gptoss", "gpt-oss", "llama4", "mistral3",
                  "mllama", "nemotron_h", "nemotron_h_moe", "nomic-bert", "olmo3", "qwen25vl", "qwen3", "qwen3moe",
                  "qwen35", "qwen35moe", "qwen3next", "qwen3vl", "qwen3vlmoe", "glm4moelite", "glmocr", "lfm2",
                  "lfm2moe")
#: fs/ggml/ggml.go FlashAttention() (the architectures whose flash attention is on by default) at v0.19.0, :888-905
_FA_0_19 = ("bert", "gemma3", "glm4moelite", "glmocr", "gptoss", "gpt-oss", "lfm2", "lfm2moe", "mistral3", "nemotron_h",
            "nemotron_h_moe", "olmo3", "qwen3", "qwen3moe", "qwen35", "qwen35moe", "qwen3next", "qwen3vl", "qwen3vlmoe")

#: Ollama's runner admits OLLAMA_NUM_PARALLEL requests at once: ``sem: semaphore.NewWeighted(int64(numParallel))``,
#: which every completion acquires before it is sent to the runner (``s.sem.Acquire(ctx, 1)``); the rest block on it.
OLLAMA_QUEUE_SRC = ("Ollama's runner admits OLLAMA_NUM_PARALLEL completions at once and the rest block on its semaphore: "
                    "ollama v0.21.0 (57653b8e4) llm/server.go:293 semaphore.NewWeighted(int64(numParallel)), :1580 "
                    "s.sem.Acquire(ctx, 1) in Completion; v0.32.15 (b7871fc0d) llm/llama_server.go:960 and :1536, in "
                    "front of the llama-server it starts with -np numParallel (:375-376)")

#: NewLlamaServer cuts a num_ctx above the model's training context to it, before the runner is asked for
#: num_ctx x numParallel cells (the Go engine and the llama.cpp runner alike before 0.30, llama-server since).
OLLAMA_CTX_CUT_SRC = ("ollama llm/server.go:166-171 at v0.21.0 (57653b8e4; the same lines v0.19.0 .. v0.24.0), "
                      ":111-116 at v0.32.15 (b7871fc0d; the same from v0.30.0)")

OLLAMA_SERVER_SRC = ("llm/server.go:148-165 (envconfig.NewEngine() || f.KV().OllamaEngineRequired(), no projector, a "
                     "text processor) and :276-277 StartRunner(tok != nil, ...)")


@dataclass(frozen=True)
class OllamaRule:
    """One span of Ollama releases with the same engine choice. ``engine_required`` None: llama-server for every GGML
    model. ``fa_default``: architectures whose flash attention Ollama turns on when ``OLLAMA_FLASH_ATTENTION`` is unset
    (fs/ggml/ggml.go ``FlashAttention``)."""

    first: tuple[int, int, int]
    last: tuple[int, int, int]
    engine_required: tuple[str, ...] | None
    fa_default: tuple[str, ...]
    source: str

    @property
    def label(self) -> str:
        a = ".".join(map(str, self.first))
        b = ".".join(map(str, self.last[:2])) + ".x" if self.last[2] == 99 else ".".join(map(str, self.last))
        return f"Ollama {a}" if a == b else f"Ollama {a} .. {b}"


OLLAMA_RULES: tuple[OllamaRule, ...] = (
    OllamaRule((0, 19, 0), (0, 19, 0), _REQUIRED_0_19, _FA_0_19,
               "ollama v0.19.0 (31f968fe1) fs/ggml/ggml.go:277-301 OllamaEngineRequired, :888-905 FlashAttention; "
               + OLLAMA_SERVER_SRC.replace(":276-277", ":264-265")),
    OllamaRule((0, 20, 0), (0, 20, 3), _REQUIRED_0_19 + ("gemma4",), _FA_0_19,
               "ollama v0.20.0 (de9673ac3) fs/ggml/ggml.go:277-302 OllamaEngineRequired (adds gemma4), :889-906 "
               "FlashAttention; " + OLLAMA_SERVER_SRC.replace(":276-277", ":264-265")),
    OllamaRule((0, 20, 4), (0, 21, 2), _REQUIRED_0_19 + ("gemma4",), _FA_0_19 + ("gemma4",),
               "ollama v0.21.0 (57653b8e4) fs/ggml/ggml.go:277-302 OllamaEngineRequired, :889-907 FlashAttention "
               "(gemma4 on by default from v0.20.4); " + OLLAMA_SERVER_SRC),
    OllamaRule((0, 22, 0), (0, 24, 0), _REQUIRED_0_19 + ("gemma4", "laguna", "nemotron_h_omni"),
               _FA_0_19 + ("gemma4", "nemotron_h_omni"),
               "ollama v0.22.0 (955112e50) fs/ggml/ggml.go:277-303 OllamaEngineRequired (adds laguna, "
               "nemotron_h_omni), :890-908 FlashAttention; same at v0.24.0 (c28ddc0a7); " + OLLAMA_SERVER_SRC),
    OllamaRule((0, 30, 0), (0, 33, 99), None, (),
               "ollama v0.30.0 (2c71d8d7c) llm/server.go:106-120 NewLlamaServer: \"All GGML models are served via the "
               "upstream llama-server subprocess\" (commit 9db4bdbad, PR #16031, 2026-05-29, removed the Go and "
               "llama.cpp runners); unchanged through v0.33.0-rc2 (fb3076099)"),
)

#: The Ollama release answered when none is asked: the newest stable tag in the mirror.
DEFAULT_OLLAMA_RELEASE = "0.32.15"
OLLAMA_RELEASE_RANGE = "0.19.0 .. 0.24.0 and 0.30.0 .. 0.33.x"


def parse_release(text: str) -> tuple[int, int, int]:
    """``"0.21.0"`` (an optional leading ``v`` and a ``-rcN`` tail are accepted) -> ``(0, 21, 0)``.
    Raises ``ValueError`` for anything else."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)(-rc\d+)?", (text or "").strip())
    if not m:
        raise ValueError(f"ollama_release: an Ollama version like 0.21.0, not {text!r}")
    return int(m[1]), int(m[2]), int(m[3])


def ollama_rule(release: str) -> OllamaRule:
    """The :data:`OLLAMA_RULES` span holding ``release``. Raises ``ValueError`` (message starts ``ollama_release:``)
    for a malformed version, one outside 0.19.0 .. 0.33.x, or one Ollama never released (0.25 .. 0.29: v0.24.0 was
    followed by v0.30.0)."""
    v = parse_release(release)
    for rule in OLLAMA_RULES:
        if rule.first <= v <= rule.last:
            return rule
    if (0, 24, 0) < v < (0, 30, 0):
        raise ValueError(f"ollama_release: {release} is not an Ollama release (v0.24.0 was followed by v0.30.0)")
    raise ValueError(f"ollama_release: {release} is not modelled; modelled releases: {OLLAMA_RELEASE_RANGE} (the "
                     "engine choice and defaults read from those tags)")


@dataclass(frozen=True)
class OllamaEngine:
    """Which runner an Ollama release uses for a model. ``engine``: ``"ollama"`` (its own Go engine) or
    ``"llama.cpp"`` (its llama.cpp runner before 0.30, ``llama-server`` since). ``why`` says which rule decided."""

    release: str
    rule: str  # the rule's label, e.g. "Ollama 0.20.4 .. 0.21.2"
    engine: str
    runner: str  # "ollamarunner", "llamarunner" or "llama-server"
    why: str
    source: str

    def to_json(self) -> dict:
        return {"release": self.release, "rule": self.rule, "engine": self.engine, "runner": self.runner,
                "why": self.why, "source": self.source}


def ollama_engine(architecture: str, release: str = DEFAULT_OLLAMA_RELEASE) -> OllamaEngine:
    """The engine Ollama ``release`` runs a GGUF of ``architecture`` (``general.architecture``) on, with
    ``OLLAMA_NEW_ENGINE`` unset and the model in one file (Ollama's library blobs carry the vision tower in the same
    file; with a separate projector (``mmproj``) releases before 0.30 fall back to the llama.cpp runner, server.go
    :149-156). Raises ``ValueError`` for a release not modelled (:func:`ollama_rule`)."""
    rule = ollama_rule(release)
    if rule.engine_required is None:
        return OllamaEngine(release, rule.label, "llama.cpp", "llama-server",
                            "since 0.30.0 Ollama runs every GGML model on the upstream llama-server", rule.source)
    if architecture in rule.engine_required:
        return OllamaEngine(release, rule.label, "ollama", "ollamarunner",
                            f"{architecture!r} is in OllamaEngineRequired: Ollama's own Go engine (when the model is "
                            "one file; a separate projector file falls back to the llama.cpp runner)", rule.source)
    return OllamaEngine(release, rule.label, "llama.cpp", "llamarunner",
                        f"{architecture!r} is not in OllamaEngineRequired: Ollama's llama.cpp runner (unless "
                        "OLLAMA_NEW_ENGINE=1)", rule.source)


# ---------------------------------------------------------------- the Go engine's KV cache

KV_SRC = ("ollama v0.21.0 kvcache/causal.go:130-182 Causal.Init (cells = parallel x num_ctx, or for a sliding-window "
          "cache parallel x window + num_batch, rounded up to CachePadding 256 from ml/backend/ggml/ggml.go:686-692), "
          ":449-473 Put (K [head_dim_k, n_kv_head, cells], V the same or permuted, one tensor per layer), "
          "runner/ollamarunner/cache.go:34-70 NewInputCache (num_ctx = KvSize / parallel; f16 unless q8_0 / q4_0), "
          "llm/server.go:166-173 (num_ctx <= the training context, num_batch <= num_ctx), :256-270 (the KV type only "
          "with flash attention); unchanged v0.19.0 .. v0.24.0")

#: architecture -> (how its layers split between the sliding-window and the full cache, source). ``swa(il, meta)``
#: True for a sliding-window layer. ``memory``: the SWA cache's memory size (NewSWAMemCache), None = the window.
_CACHE_LAYOUTS = {
    "gemma3": (lambda il: (il + 1) % 6 != 0, None,
               "model/models/gemma3/model.go:95-96 NewWrapperCache(NewSWACache(sliding_window), NewCausalCache), "
               "model_text.go:241-251 (every 6th layer global: (i+1) % 6 == 0)"),
    "gptoss": (lambda il: il % 2 == 0, 4096,
               "model/models/gptoss/model.go:238-241 NewWrapperCache(NewSWAMemCache(sliding_window, 4096), "
               "NewCausalCache), :36-39 (even layers sliding window)"),
    "qwen3": (lambda il: False, None, "model/models/qwen3/model.go:255 NewCausalCache"),
    "qwen3moe": (lambda il: False, None, "model/models/qwen3/model.go:255 NewCausalCache (qwen3moe shares it)"),
    "mistral3": (lambda il: False, None, "model/models/mistral3/model.go:57 NewCausalCache"),
}
_CACHE_LAYOUTS["gpt-oss"] = _CACHE_LAYOUTS["gptoss"]

#: ggml (block values, bytes per block) of the cache types the Go engine allocates (kvCacheTypeFromStr)
_KV_TYPES = {"f16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18)}


def _round_up(n: int, pad: int) -> int:
    return (n + pad - 1) // pad * pad


def engine_kv_type(kv_cache_type: str, flash_attention: bool) -> tuple[str, str]:
    """The cache type the Go engine allocates for ``OLLAMA_KV_CACHE_TYPE`` and the flash-attention state, with why:
    q8_0 / q4_0 only with flash attention (llm/server.go:256-270 at v0.21.0), anything else f16
    (runner/ollamarunner/cache.go:61-70 kvCacheTypeFromStr; fs/ggml/ggml.go:850-856 SupportsKVCacheType)."""
    kv = (kv_cache_type or "f16").lower()
    if kv == "f16":
        return "f16", ""
    if kv not in ("q8_0", "q4_0"):
        return "f16", f"OLLAMA_KV_CACHE_TYPE={kv} is not a type the Go engine supports (f16, q8_0, q4_0): f16 is used"
    if not flash_attention:
        return "f16", f"OLLAMA_KV_CACHE_TYPE={kv} needs flash attention, which is off: f16 is used"
    return kv, ""


def _head_dims(meta: GGUFMeta) -> tuple[int, int]:
    """``(K, V)`` head sizes: the GGUF's key / value lengths, else embedding / the largest head count (0 without
    heads)."""
    emb = meta.n_embd // max(meta.n_head) if meta.n_head and max(meta.n_head) else 0
    return meta.head_dim_k or emb, meta.head_dim_v or emb


def engine_kv(meta: GGUFMeta, *, num_ctx: int, num_parallel: int = 1, num_batch: int = 512,
              kv_cache_type: str = "f16", flash_attention: bool = True) -> dict | None:
    """The KV cache Ollama's Go engine allocates (Ollama 0.19 .. 0.24), for the architectures whose cache layout is
    transcribed here (gemma3, gpt-oss, qwen3, qwen3moe, mistral3); None for others.

    Per :data:`KV_SRC`: ``capacity = min(num_ctx, n_ctx_train)``, ``batch = min(num_batch, capacity)``; a full cache
    has ``roundup(parallel x capacity, 256)`` cells; a sliding-window cache with window ``w`` and memory ``m`` (``w``,
    or 4096 for gpt-oss's NewSWAMemCache; ``max(m, w + 1)`` when parallel > 1) has ``roundup(parallel x m + batch,
    256)`` cells, or the full count when ``m >= capacity``. Each layer holds K ``[head_dim_k, n_kv_head(il), cells]``
    and V ``[head_dim_v, n_kv_head(il), cells]`` of the cache type (:func:`engine_kv_type`).

    Returns ``{"bytes", "k_bytes", "v_bytes", "type", "type_note", "caches": [{"name", "cells", "layers"}],
    "source"}`` (bytes). Raises ``ValueError`` for ``num_ctx``/``num_parallel``/``num_batch`` below 1."""
    if num_ctx < 1 or num_parallel < 1 or num_batch < 1:
        raise ValueError("num_ctx, num_parallel and num_batch must be >= 1")
    layout = _CACHE_LAYOUTS.get(meta.architecture)
    if layout is None:
        return None
    is_swa, memory, layout_src = layout
    capacity = min(num_ctx, meta.n_ctx_train) if meta.n_ctx_train else num_ctx
    batch = min(num_batch, capacity)
    full_cells = _round_up(num_parallel * capacity, 256)
    window = meta.sliding_window or 0
    swa_cells = full_cells
    if window:
        mem = memory or window
        if num_parallel > 1:
            mem = max(mem, window + 1)
        if mem < capacity:
            swa_cells = _round_up(num_parallel * mem + batch, 256)
    kv_type, type_note = engine_kv_type(kv_cache_type, flash_attention)
    block, per_block = _KV_TYPES[kv_type]
    hk, hv = _head_dims(meta)
    k_bytes = v_bytes = 0
    layers = {"SWA": [], "full": []}
    n_layers = meta.n_layer_all - meta.n_layer_nextn
    for il in range(n_layers):
        heads = meta.n_head_kv[il] if il < len(meta.n_head_kv) else 0
        if heads <= 0:
            continue
        swa = bool(window) and is_swa(il)
        cells = swa_cells if swa else full_cells
        layers["SWA" if swa else "full"].append(il)
        k_bytes += hk * heads // block * per_block * cells
        v_bytes += hv * heads // block * per_block * cells
    caches = [{"name": name, "cells": swa_cells if name == "SWA" else full_cells, "layers": ls}
              for name, ls in (("full", layers["full"]), ("SWA", layers["SWA"])) if ls]
    return {"bytes": k_bytes + v_bytes, "k_bytes": k_bytes, "v_bytes": v_bytes, "type": kv_type, "type_note": type_note,
            "caches": caches, "capacity": capacity, "batch": batch,
            "source": f"{KV_SRC}; {layout_src} (v0.21.0)"}


# ---------------------------------------------------------------- the Go engine's model weights

WEIGHTS_SRC = ("ollama v0.21.0 ml/backend/ggml/ggml.go:306-343 (token_embd / position_embd / token_norm_embd / "
               "token_types and any tensor outside a layer on the CPU as input weights; output, output_norm, the tied "
               "output copy of token_embd when the file has no output tensor, and v.* / mm.* / s.* on the output "
               "layer's device; rope_freqs repeated per layer; blk.N.* on layer N's device), :290 size = "
               "pad(alloc_size, alignment), ml/device.go:238-248 (logged per device)")

_INPUT_PARTS = ("position_embd", "token_embd", "token_norm_embd", "token_types")
_OUTPUT_PARTS = ("cls", "output", "output_norm", "altup_proj", "altup_unembd_proj", "per_layer_token_embd",
                 "per_layer_model_proj", "per_layer_proj_norm")
_ROPE_PARTS = ("rope_freqs", "rope_factors_long", "rope_factors_short")


def _tensor_bytes(t, align: int) -> int:
    n = t.n_bytes
    if t.ggml_type.upper() == "BF16" and t.name.endswith("_exps.bias"):  # ggml.go:271-273: bf16 _exps.bias -> f32
        n *= 2
    return _round_up(n, align)


def engine_weights(meta: GGUFMeta, gpu_name: str) -> dict | None:
    """The Go engine's "model weights" per device with every layer and the output on the GPU ``gpu_name`` (as Ollama
    logs it: "Metal", "CUDA0", ...), per :data:`WEIGHTS_SRC`: ``{"CPU": bytes, gpu_name: bytes, "source", "note"}``.
    Each tensor is padded to 32 bytes (the CPU's and Metal's buffer alignment; CUDA's 128 and its row padding of
    quantized tensors are not applied: the note says so). None without a tensor table."""
    if not meta.tensors:
        return None
    names = {t.name for t in meta.tensors}
    has_output = any(n.split(".")[0] == "output" for n in names)
    cpu = gpu = 0
    blocks = meta.n_layer_all
    for t in meta.tensors:
        parts = t.name.split(".")
        size = _tensor_bytes(t, 32)
        if any(p in parts for p in _INPUT_PARTS):
            cpu += size
            if not has_output and t.name == "token_embd.weight":
                gpu += size
        elif any(p in parts for p in _OUTPUT_PARTS) or t.name.startswith(("v.", "mm.", "s.")):
            gpu += size
        elif any(p in parts for p in _ROPE_PARTS):
            gpu += size * blocks
        elif re.search(r"\d+", t.name):
            gpu += size
        else:
            cpu += size
    note = "" if gpu_name in ("Metal", "CPU") else (
        f"{gpu_name}: its buffer alignment and row padding of quantized tensors are not applied (32-byte padding)")
    return {"CPU": cpu, gpu_name: gpu, "source": WEIGHTS_SRC, "note": note}


# ---------------------------------------------------------------- the log lines

COMPUTE_NOT_MODELLED = ("compute graph: not modelled (Ollama's own engine: it reserves the graph its Go model code "
                        "builds for a worst-case batch, ollama v0.21.0 runner/ollamarunner/runner.go:1069-1169 "
                        "reserveWorstCaseGraph, ml/backend/ggml/ggml.go:845-861 Reserve; llama.cpp's compute-buffer "
                        "estimate does not apply)")


def human_bytes2(n: int) -> str:
    """Ollama's format.HumanBytes2 (format/bytes.go:52-63): one decimal in GiB / MiB / KiB, else bytes."""
    if n >= GiB:
        return f"{n / GiB:.1f} GiB"
    if n >= MiB:
        return f"{n / MiB:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} B"


def log_lines(*, weights: dict | None, kv: dict | None, gpu_name: str) -> list[str]:
    """The lines the Go engine logs (ml/device.go:236-274 BackendMemory.Log at v0.21.0) for what is modelled:
    ``msg="model weights" device=Metal size="3.1 GiB"``, ``msg="kv cache" device=Metal size="254.0 MiB"``. The
    compute graph lines are not printed (:data:`COMPUTE_NOT_MODELLED`), nor the total."""
    out = []
    if weights is not None:
        for dev in (gpu_name, "CPU"):
            if weights.get(dev):
                out.append(f'msg="model weights" device={dev} size="{human_bytes2(weights[dev])}"')
    if kv is not None:
        out.append(f'msg="kv cache" device={gpu_name} size="{human_bytes2(kv["bytes"])}"')
    return out


def ollama_device_name(buft: str) -> str:
    """The device name Ollama's Go engine logs for a llama.cpp buffer name: ``MTL0`` -> ``Metal`` (ggml-metal's
    device name, as the lcpp-026 log shows ``device=Metal``), others unchanged (CUDA0, ROCm0, Vulkan0, CPU)."""
    return "Metal" if buft.startswith("MTL") else buft


FA_SRC = ("ollama v0.21.0 llm/server.go:193-199 (fa = OLLAMA_FLASH_ATTENTION, else the architecture's default, "
          "fs/ggml/ggml.go:889-907 FlashAttention), :203-211 (off unless every GPU supports it, ml/device.go:480-493: "
          "Metal, CUDA other than compute 7.2, ROCm, Vulkan, CPU; and the model: fs/ggml/ggml.go:867-886 "
          "SupportsFlashAttention, K and V head sizes equal and not gemma2 / grok / an embedding model)")


def engine_flash_attention(meta: GGUFMeta, rule: OllamaRule, requested: bool | None) -> tuple[bool, str]:
    """Whether the Go engine runs with flash attention (:data:`FA_SRC`), with why. ``requested``: the
    ``OLLAMA_FLASH_ATTENTION`` setting (None: unset). The GPU check is taken as passed (every backend Ollama ships
    supports it except CUDA compute 7.2, Jetson Xavier)."""
    arch = meta.architecture
    if "pooling_type" in " ".join(k for k in meta.kv if k.startswith(f"{arch}.")) or arch in ("gemma2", "grok"):
        model_ok = False
    elif arch in ("qwen35", "qwen35moe", "qwen3next"):
        model_ok = True
    else:
        hk, hv = _head_dims(meta)
        model_ok = bool(hk and hk == hv)
    want = (arch in rule.fa_default) if requested is None else requested
    why = ("OLLAMA_FLASH_ATTENTION" if requested is not None else
           f"{'on' if want else 'off'} by default for {arch!r} in {rule.label}")
    if want and not model_ok:
        return False, f"{why}, but the model does not support it (SupportsFlashAttention)"
    return want, why


# ---------------------------------------------------------------- the batch size, the slots and the OOM retry
#
# Which lines of which tag say what (read from the ollama/ollama tags; the text of each rule is the same over the
# spans named, only its line numbers move):
#
# * the slots: ``numParallel := max(OLLAMA_NUM_PARALLEL, 1)``, 1 for a model without the completion capability (an
#   embedding model: its GGUF has ``{arch}.pooling_type``, server/images.go) and 1 for the model families "not safe
#   with num_parallel > 1" (server/sched.go ``load``; ``ModelFamily`` is the GGUF's general.architecture,
#   server/create.go:790 at v0.32.15);
# * before 0.30.0 the runner gets ``BatchSize = min(num_batch, num_ctx)`` (num_batch 512 unless the Modelfile / API
#   options set it, api/types.go DefaultOptions; an embedding model gets num_ctx) and llama.cpp's runner makes its
#   context with ``n_batch = BatchSize x parallel, n_ubatch = BatchSize`` (llama/llama.go NewContextParams);
# * from 0.30.0 Ollama starts llama-server with ``-b N -ub N`` (llm/llama_server.go appendBatchArgs), N chosen by the
#   scheduler (server/sched.go ``applyAutomaticGenerationBatch``) when num_batch is not set (server/routes.go
#   ``usesAutomaticNumBatch``), or the embedding default min(2048, num_ctx).

@dataclass(frozen=True)
class OllamaLines:
    """The line numbers of the batch / slot / OOM-retry rules in one span of Ollama tags (``first`` up to the next
    span's first release). Keys: ``<file>.<what>`` (:data:`_LINE_FILES` names the file)."""

    first: tuple[int, int, int]
    tags: str  # "v0.32.15 (b7871fc0d) .. v0.33.0-rc2 (fb3076099)"
    lines: dict[str, str]


_LINE_FILES = {"sched": "server/sched.go", "ls": "llm/llama_server.go", "routes": "server/routes.go",
               "device": "ml/device.go", "images": "server/images.go", "types": "api/types.go",
               "server": "llm/server.go", "llama": "llama/llama.go", "llamarunner": "runner/llamarunner/runner.go"}

# Generated from the tags v0.19.0 .. v0.24.0 and v0.30.0 .. v0.33.0-rc2 of github.com/ollama/ollama: one row per span
# of tags whose cited lines are the same (tests/test_ollama_batch.py reads them back from a mirror when there is one).
OLLAMA_LINES = (
    OllamaLines((0, 19, 0), 'v0.19.0 (31f968fe1)', {
        'sched.parallel': '412-422', 'types.NumBatch': '1074', 'server.numbatch': '173-175',
        'server.embedding': '518-522', 'llama.ctxparams': '125-126', 'llamarunner.ctx': '846',
        'images.pooling': '87',
    }),
    OllamaLines((0, 20, 0), 'v0.20.0 (de9673ac3) .. v0.20.3 (8c8f8f345)', {
        'sched.parallel': '412-422', 'types.NumBatch': '1075', 'server.numbatch': '173-175',
        'server.embedding': '518-522', 'llama.ctxparams': '125-126', 'llamarunner.ctx': '846',
        'images.pooling': '88',
    }),
    OllamaLines((0, 20, 4), 'v0.20.4 (f86a969f2) .. v0.20.7 (8d0dcf4b6)', {
        'sched.parallel': '412-422', 'types.NumBatch': '1075', 'server.numbatch': '173-175',
        'server.embedding': '530-534', 'llama.ctxparams': '125-126', 'llamarunner.ctx': '846',
        'images.pooling': '88',
    }),
    OllamaLines((0, 21, 0), 'v0.21.0 (57653b8e4) .. v0.22.0 (955112e50)', {
        'sched.parallel': '412-422', 'types.NumBatch': '1075', 'server.numbatch': '173-175',
        'server.embedding': '530-534', 'llama.ctxparams': '125-126', 'llamarunner.ctx': '846',
        'images.pooling': '93',
    }),
    OllamaLines((0, 22, 1), 'v0.22.1 (c7c2837c9)', {
        'sched.parallel': '412-422', 'types.NumBatch': '1089', 'server.numbatch': '173-175',
        'server.embedding': '530-534', 'llama.ctxparams': '125-126', 'llamarunner.ctx': '846',
        'images.pooling': '93',
    }),
    OllamaLines((0, 23, 0), 'v0.23.0 (9ba5a0491) .. v0.23.1 (15e6076d7)', {
        'sched.parallel': '412-422', 'types.NumBatch': '1089', 'server.numbatch': '173-175',
        'server.embedding': '551-555', 'llama.ctxparams': '125-126', 'llamarunner.ctx': '846',
        'images.pooling': '93',
    }),
    OllamaLines((0, 23, 2), 'v0.23.2 (f866e7608) .. v0.24.0 (c28ddc0a7)', {
        'sched.parallel': '412-422', 'types.NumBatch': '1090', 'server.numbatch': '173-175',
        'server.embedding': '551-555', 'llama.ctxparams': '125-126', 'llamarunner.ctx': '846',
        'images.pooling': '93',
    }),
    OllamaLines((0, 30, 0), 'v0.30.0 (2c71d8d7c)', {
        'sched.parallel': '493-504', 'types.NumBatch': '1111', 'sched.load_batch': '531-537',
        'sched.rule': '797-915', 'sched.oom_call': '649-652', 'sched.oom_func': '757-783',
        'sched.next_ctx': '917-926', 'sched.avail_load': '928-950', 'sched.avail_place': '952-962',
        'sched.effective': '793-795', 'ls.batchargs': '548-561', 'ls.fa': '564-578', 'ls.predict': '2386-2405',
        'ls.emb_default': '81-86', 'ls.emb_size': '528-537', 'routes.auto': '191-201', 'routes.numBatchAuto': '228',
        'device.fa': '571-600', 'images.pooling': '142', 'ls.fa_args': '580-589', 'ls.argv': '339-367',
        'sched.completion': '494', 'server.cut': '112-116',
        'routes.auto_ctx': '179-189',
    }),
    OllamaLines((0, 30, 1), 'v0.30.1 (e828061b6) .. v0.30.8 (12e04379c)', {
        'sched.parallel': '493-504', 'types.NumBatch': '1111', 'sched.load_batch': '531-537',
        'sched.rule': '798-916', 'sched.oom_call': '649-652', 'sched.oom_func': '758-784',
        'sched.next_ctx': '918-927', 'sched.avail_load': '929-951', 'sched.avail_place': '953-963',
        'sched.effective': '794-796', 'ls.batchargs': '551-564', 'ls.fa': '567-581', 'ls.predict': '2474-2493',
        'ls.emb_default': '82-87', 'ls.emb_size': '531-540', 'routes.auto': '191-201', 'routes.numBatchAuto': '228',
        'device.fa': '571-600', 'images.pooling': '163', 'ls.fa_args': '583-592', 'ls.argv': '342-370',
        'sched.completion': '494', 'server.cut': '112-116',
        'routes.auto_ctx': '179-189',
    }),
    OllamaLines((0, 30, 9), 'v0.30.9 (0f047feef) .. v0.30.10 (e1f7f9cbd)', {
        'sched.parallel': '503-514', 'types.NumBatch': '1111', 'sched.load_batch': '541-547',
        'sched.rule': '808-926', 'sched.oom_call': '659-662', 'sched.oom_func': '768-794',
        'sched.next_ctx': '928-937', 'sched.avail_load': '939-961', 'sched.avail_place': '963-973',
        'sched.effective': '804-806', 'ls.batchargs': '554-567', 'ls.fa': '570-584', 'ls.predict': '2477-2496',
        'ls.emb_default': '82-87', 'ls.emb_size': '534-543', 'routes.auto': '191-201', 'routes.numBatchAuto': '228',
        'device.fa': '571-600', 'images.pooling': '163', 'ls.fa_args': '586-595', 'ls.argv': '345-373',
        'sched.completion': '504', 'server.cut': '112-116',
        'routes.auto_ctx': '179-189',
    }),
    OllamaLines((0, 30, 11), 'v0.30.11 (d26a58557) .. v0.31.1 (710292ff4)', {
        'sched.parallel': '503-514', 'types.NumBatch': '1111', 'sched.load_batch': '541-547',
        'sched.rule': '808-926', 'sched.oom_call': '659-662', 'sched.oom_func': '768-794',
        'sched.next_ctx': '928-937', 'sched.avail_load': '939-961', 'sched.avail_place': '963-973',
        'sched.effective': '804-806', 'ls.batchargs': '573-586', 'ls.fa': '589-603', 'ls.predict': '2565-2584',
        'ls.emb_default': '82-87', 'ls.emb_size': '553-562', 'routes.auto': '191-201', 'routes.numBatchAuto': '228',
        'device.fa': '571-600', 'images.pooling': '163', 'ls.fa_args': '605-614', 'ls.argv': '364-392',
        'sched.completion': '504', 'server.cut': '112-116',
        'routes.auto_ctx': '179-189',
    }),
    OllamaLines((0, 31, 2), 'v0.31.2 (a6293eb51) .. v0.32.1 (30c390384)', {
        'sched.parallel': '503-514', 'types.NumBatch': '1141', 'sched.load_batch': '541-547',
        'sched.rule': '808-926', 'sched.oom_call': '659-662', 'sched.oom_func': '768-794',
        'sched.next_ctx': '928-937', 'sched.avail_load': '939-961', 'sched.avail_place': '963-973',
        'sched.effective': '804-806', 'ls.batchargs': '581-594', 'ls.fa': '597-611', 'ls.predict': '2606-2625',
        'ls.emb_default': '90-95', 'ls.emb_size': '561-570', 'routes.auto': '189-199', 'routes.numBatchAuto': '226',
        'device.fa': '571-600', 'images.pooling': '163', 'ls.fa_args': '613-622', 'ls.argv': '372-400',
        'sched.completion': '504', 'server.cut': '112-116',
        'routes.auto_ctx': '177-187',
    }),
    OllamaLines((0, 32, 2), 'v0.32.2 (a51df8157) .. v0.32.3 (fce745fe5)', {
        'sched.parallel': '503-514', 'types.NumBatch': '1144', 'sched.load_batch': '541-547',
        'sched.rule': '808-926', 'sched.oom_call': '659-662', 'sched.oom_func': '768-794',
        'sched.next_ctx': '928-937', 'sched.avail_load': '939-961', 'sched.avail_place': '963-973',
        'sched.effective': '804-806', 'ls.batchargs': '590-603', 'ls.fa': '606-620', 'ls.predict': '2615-2634',
        'ls.emb_default': '90-95', 'ls.emb_size': '570-579', 'routes.auto': '189-199', 'routes.numBatchAuto': '226',
        'device.fa': '571-600', 'images.pooling': '163', 'ls.fa_args': '622-631', 'ls.argv': '372-409',
        'sched.completion': '504', 'server.cut': '112-116',
        'routes.auto_ctx': '177-187',
    }),
    OllamaLines((0, 32, 4), 'v0.32.4 (64ee2f984) .. v0.32.5 (eec8e0b94)', {
        'sched.parallel': '498-509', 'types.NumBatch': '1144', 'sched.load_batch': '536-542',
        'sched.rule': '803-921', 'sched.oom_call': '654-657', 'sched.oom_func': '763-789',
        'sched.next_ctx': '923-932', 'sched.avail_load': '934-956', 'sched.avail_place': '958-968',
        'sched.effective': '799-801', 'ls.batchargs': '590-603', 'ls.fa': '606-620', 'ls.predict': '2615-2634',
        'ls.emb_default': '90-95', 'ls.emb_size': '570-579', 'routes.auto': '189-199', 'routes.numBatchAuto': '226',
        'device.fa': '571-600', 'images.pooling': '163', 'ls.fa_args': '622-631', 'ls.argv': '372-409',
        'sched.completion': '499', 'server.cut': '112-116',
        'routes.auto_ctx': '177-187',
    }),
    OllamaLines((0, 32, 6), 'v0.32.6 (c82ebbd5b)', {
        'sched.parallel': '497-508', 'types.NumBatch': '1116', 'sched.load_batch': '535-541',
        'sched.rule': '797-915', 'sched.oom_call': '649-652', 'sched.oom_func': '757-783',
        'sched.next_ctx': '917-926', 'sched.avail_load': '928-950', 'sched.avail_place': '952-962',
        'sched.effective': '793-795', 'ls.batchargs': '578-591', 'ls.fa': '594-608', 'ls.predict': '2620-2639',
        'ls.emb_default': '90-95', 'ls.emb_size': '558-567', 'routes.auto': '188-198', 'routes.numBatchAuto': '222',
        'device.fa': '571-600', 'images.pooling': '163', 'ls.fa_args': '610-619', 'ls.argv': '372-397',
        'sched.completion': '498', 'server.cut': '112-116',
        'routes.auto_ctx': '176-186',
    }),
    OllamaLines((0, 32, 7), 'v0.32.7 (9c15f5c07) .. v0.32.9 (1d5febee1)', {
        'sched.parallel': '497-508', 'types.NumBatch': '1116', 'sched.load_batch': '535-541',
        'sched.rule': '797-915', 'sched.oom_call': '649-652', 'sched.oom_func': '757-783',
        'sched.next_ctx': '917-926', 'sched.avail_load': '928-950', 'sched.avail_place': '952-962',
        'sched.effective': '793-795', 'ls.batchargs': '579-592', 'ls.fa': '595-609', 'ls.predict': '2651-2670',
        'ls.emb_default': '90-95', 'ls.emb_size': '559-568', 'routes.auto': '188-198', 'routes.numBatchAuto': '222',
        'device.fa': '571-600', 'images.pooling': '163', 'ls.fa_args': '611-620', 'ls.argv': '373-398',
        'sched.completion': '498', 'server.cut': '112-116',
        'routes.auto_ctx': '176-186',
    }),
    OllamaLines((0, 32, 10), 'v0.32.10 (9a56a0e84) .. v0.32.13 (0f25c31bd)', {
        'sched.parallel': '497-508', 'types.NumBatch': '1116', 'sched.load_batch': '535-541',
        'sched.rule': '797-915', 'sched.oom_call': '649-652', 'sched.oom_func': '757-783',
        'sched.next_ctx': '917-926', 'sched.avail_load': '928-950', 'sched.avail_place': '952-962',
        'sched.effective': '793-795', 'ls.batchargs': '579-592', 'ls.fa': '595-609', 'ls.predict': '2651-2670',
        'ls.emb_default': '90-95', 'ls.emb_size': '559-568', 'routes.auto': '188-198', 'routes.numBatchAuto': '222',
        'device.fa': '571-600', 'images.pooling': '164', 'ls.fa_args': '611-620', 'ls.argv': '373-398',
        'sched.completion': '498', 'server.cut': '112-116',
        'routes.auto_ctx': '176-186',
    }),
    OllamaLines((0, 32, 14), 'v0.32.14 (d67ad8342)', {
        'sched.parallel': '497-508', 'types.NumBatch': '1116', 'sched.load_batch': '535-541',
        'sched.rule': '797-915', 'sched.oom_call': '649-652', 'sched.oom_func': '757-783',
        'sched.next_ctx': '917-926', 'sched.avail_load': '928-950', 'sched.avail_place': '952-962',
        'sched.effective': '793-795', 'ls.batchargs': '581-594', 'ls.fa': '597-611', 'ls.predict': '2681-2700',
        'ls.emb_default': '92-97', 'ls.emb_size': '561-570', 'routes.auto': '188-198', 'routes.numBatchAuto': '222',
        'device.fa': '571-600', 'images.pooling': '164', 'ls.fa_args': '613-622', 'ls.argv': '375-400',
        'sched.completion': '498', 'server.cut': '112-116',
        'routes.auto_ctx': '176-186',
    }),
    OllamaLines((0, 32, 15), 'v0.32.15 (b7871fc0d) .. v0.33.0-rc2 (fb3076099)', {
        'sched.parallel': '497-508', 'types.NumBatch': '1116', 'sched.load_batch': '535-541',
        'sched.rule': '797-915', 'sched.oom_call': '649-652', 'sched.oom_func': '757-783',
        'sched.next_ctx': '917-926', 'sched.avail_load': '928-950', 'sched.avail_place': '952-962',
        'sched.effective': '793-795', 'ls.batchargs': '581-594', 'ls.fa': '597-611', 'ls.predict': '2681-2700',
        'ls.emb_default': '92-97', 'ls.emb_size': '561-570', 'routes.auto': '188-198', 'routes.numBatchAuto': '217',
        'device.fa': '571-600', 'images.pooling': '171', 'ls.fa_args': '613-622', 'ls.argv': '375-400',
        'sched.completion': '498', 'server.cut': '112-116',
        'routes.auto_ctx': '176-186',
    }),
)

#: server/sched.go ``load``: the model families loaded with one slot whatever OLLAMA_NUM_PARALLEL says ("Some
#: architectures are not safe with num_parallel > 1", ollama/ollama#4165); nemotron_h_omni joins in v0.22.0.
ONE_SLOT_FAMILIES_0_19 = ("mllama", "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "qwen3next", "lfm2", "lfm2moe",
                          "nemotron_h", "nemotron_h_moe")
ONE_SLOT_FAMILIES_0_22 = ONE_SLOT_FAMILIES_0_19 + ("nemotron_h_omni",)


def ollama_lines(release: str) -> OllamaLines:
    """The :data:`OLLAMA_LINES` span holding ``release`` (a covered release: :func:`ollama_rule` first)."""
    ollama_rule(release)
    v = parse_release(release)
    return [row for row in OLLAMA_LINES if row.first <= v][-1]


def cite(release: str, *keys: str) -> str:
    """``"ollama v0.32.15 (b7871fc0d) .. v0.33.0-rc2 (fb3076099) server/sched.go:797-915, ..."``: where the rules
    ``keys`` (:class:`OllamaLines` keys) are in the span of tags holding ``release``."""
    return f"ollama {ollama_lines(release).tags} " + cite_lines(release, *keys)


def cite_lines(release: str, *keys: str) -> str:
    """``"server/sched.go:797-915, ..."``: :func:`cite` without the tags."""
    row = ollama_lines(release)
    return ", ".join(f"{_LINE_FILES[k.split('.')[0]]}:{row.lines[k]}" for k in keys)


def is_embedding(meta: GGUFMeta) -> bool:
    """Whether Ollama takes the GGUF for an embedding model: ``{arch}.pooling_type`` present (server/images.go
    ggufCapabilities: then no completion capability). A header not read (no keys) reads as a completion model."""
    return f"{meta.architecture}.pooling_type" in meta.kv


def ollama_num_parallel(architecture: str, *, embedding: bool, requested: int, release: str) -> tuple[int, str]:
    """The slots Ollama ``release`` loads a model with: ``requested`` (OLLAMA_NUM_PARALLEL), or 1 for an embedding
    model and for the families of :data:`ONE_SLOT_FAMILIES_0_19` / ``_0_22`` (server/sched.go ``load``), with why
    ("" when the request stands)."""
    if requested <= 1:
        return max(requested, 1), ""
    src = cite(release, "sched.parallel")
    if embedding:
        return 1, (f"an embedding model (its GGUF has {architecture}.pooling_type, so no completion capability): "
                   f"Ollama loads it with one slot whatever OLLAMA_NUM_PARALLEL says ({src})")
    families = ONE_SLOT_FAMILIES_0_22 if parse_release(release) >= (0, 22, 0) else ONE_SLOT_FAMILIES_0_19
    if architecture in families:
        return 1, (f"Ollama {release} loads the {architecture!r} family with one slot whatever OLLAMA_NUM_PARALLEL "
                   f"says (\"model architecture does not currently support parallel requests\", {src})")
    return requested, ""


# server/sched.go (v0.30.0 .. v0.33.0-rc2, the same text): llamaServerGenerationBatch*
BATCH_DEFAULT, BATCH_CONSTRAINED, BATCH_MEDIUM, BATCH_LARGE = 512, 256, 1024, 2048
_HEADROOM_PERCENT = {BATCH_LARGE: 60, BATCH_MEDIUM: 75}  # generationBatchHasHeadroom
_SURCHARGE = {BATCH_LARGE: 2 * GiB, BATCH_MEDIUM: 768 * MiB}  # generationBatchSurcharge
EMBEDDING_BATCH = 2048  # llm/llama_server.go DefaultEmbeddingNumBatch


def batch_for_context(effective_ctx: int) -> int:
    """``generationBatchForContext``: 2048 above 32,768 cells, 1024 above 4,096, else 512."""
    return BATCH_LARGE if effective_ctx > 32768 else BATCH_MEDIUM if effective_ctx > 4096 else BATCH_DEFAULT


def batch_fits(batch: int, predicted: int, available: int) -> bool:
    """``generationBatchFits``: true when either figure is 0; else ``predicted <= 80% of available`` (integer
    percent of bytes, as Go's uint64 ``available*80/100``), within the batch's headroom (2048: 60%, 1024: 75%) and
    its surcharge (2048: 2 GiB, 1024: 768 MiB) within ``80% of available - predicted``."""
    if predicted == 0 or available == 0:
        return True
    threshold = available * 80 // 100
    if predicted > threshold:
        return False
    pct = next((p for b, p in sorted(_HEADROOM_PERCENT.items(), reverse=True) if batch >= b), None)
    if pct is not None and predicted > available * pct // 100:
        return False
    surcharge = next((s for b, s in sorted(_SURCHARGE.items(), reverse=True) if batch >= b), 0)
    return surcharge <= threshold - predicted


def automatic_batch(effective_ctx: int, predicted: int, available: int, *, fa_disabled: bool, cuda: bool,
                    cuda_memory: int) -> int:
    """``automaticGenerationBatch``: flash attention disabled on a CUDA device -> 512, or 256 when the context is
    above 4,096 cells and a CUDA GPU has at most 8 GiB (``cuda_memory``: its free memory, else its total); otherwise
    :func:`batch_for_context`, lowered 2048 -> 1024 -> 512 while :func:`batch_fits` says no."""
    if fa_disabled and cuda:
        if effective_ctx > 4096 and 0 < cuda_memory <= 8 * GiB:
            return BATCH_CONSTRAINED
        return BATCH_DEFAULT
    batch = batch_for_context(effective_ctx)
    while batch > BATCH_DEFAULT and not batch_fits(batch, predicted, available):
        batch = BATCH_MEDIUM if batch > BATCH_MEDIUM else BATCH_DEFAULT
    return batch


def min_free_for_batch(batch: int, predicted: int) -> int:
    """The least free memory (bytes) for which :func:`batch_fits` accepts ``batch`` (1024 or 2048) with this
    prediction: ``available x pct // 100 >= predicted`` and ``available x 80 // 100 >= predicted + surcharge``."""
    pct = _HEADROOM_PERCENT[batch]
    return max(-(-100 * predicted // pct), -(-100 * (predicted + _SURCHARGE[batch]) // 80))


def predicted_kv_bytes(meta: GGUFMeta, num_ctx: int) -> int:
    """The KV part of ``PredictServerVRAM`` (llm/llama_server.go): ``2 x block_count x min(head_count_kv) x
    (embedding_length / max(head_count)) x num_ctx x 2`` bytes (f16 whatever the cache type; a 0 minimum of
    head_count_kv counts 1). ``num_ctx``: the cells asked of llama-server (num_ctx x parallel)."""
    kv_heads = min(meta.n_head_kv) if meta.n_head_kv else 1
    heads = max(meta.n_head) if meta.n_head else 1
    head_dim = meta.n_embd // heads if heads else 0
    return 2 * meta.n_layer_all * (kv_heads or 1) * head_dim * num_ctx * 2


def flash_attention_supported(device: str, compute_capability: str | None, release: str) -> bool | None:
    """``ml.FlashAttentionSupported`` for one device of the plan's kind: Metal, ROCm, Vulkan and no GPU (the CPU)
    yes; CUDA unless compute 7.2 or below 7.0 (releases 0.30.0 .. 0.31.1) / 6.0 (0.31.2 on) (ml/device.go; the CUDA
    driver taken as 7 or newer). None for CUDA without a compute capability."""
    if device != "CUDA":
        return True
    try:
        major, minor = (int(x) for x in (compute_capability or "").split(".")[:2])
    except ValueError:
        return None
    floor = 6 if parse_release(release) >= (0, 31, 2) else 7
    return not (major < floor or (major, minor) == (7, 2))


def next_lower_auto_ctx(num_ctx: int) -> int | None:
    """``nextLowerAutoNumCtx``: 32,768 above it, 4,096 above that, else None (no retry)."""
    return 32768 if num_ctx > 32768 else 4096 if num_ctx > 4096 else None


@dataclass(frozen=True)
class OllamaBatch:
    """The batch Ollama ``release`` passes to its runner: ``num_batch`` (Ollama's option; before 0.30 the runner's
    BatchSize) and what llama.cpp gets from it, ``n_batch`` / ``n_ubatch`` (-b / -ub). ``determined`` False when an
    input the choice depends on is not known exactly (the file size): then ``num_batch`` is the largest it can be
    (``low`` the smallest) and ``why`` says so. ``thresholds``: the least free GPU memory (bytes) for 2048 / 1024
    with this prediction (the automatic choice only). ``predicted``: (low, high) of ``PredictServerVRAM``, bytes."""

    num_batch: int
    n_batch: int
    n_ubatch: int
    rule: str  # "automatic", "flash attention off on CUDA", "embedding default", "default (before 0.30)"
    why: str
    source: str
    determined: bool = True
    low: int | None = None
    thresholds: dict[int, int] | None = None
    predicted: tuple[int, int | None] | None = None

    def to_json(self) -> dict:
        return {"num_batch": self.num_batch, "n_batch": self.n_batch, "n_ubatch": self.n_ubatch, "rule": self.rule,
                "determined": self.determined, "num_batch_low": self.low, "why": self.why,
                "free_memory_thresholds_gib": None if self.thresholds is None else
                {str(b): round(v / GiB, 2) for b, v in self.thresholds.items()},
                "predicted_vram_gib": None if self.predicted is None else
                [round(self.predicted[0] / GiB, 2), None if self.predicted[1] is None else
                 round(self.predicted[1] / GiB, 2)],
                "source": self.source}


def ollama_batch(release: str, *, embedding: bool, num_ctx: int, num_parallel: int, device: str,
                 compute_capability: str | None, fa_env: bool | None, available: int,
                 predicted: tuple[int, int | None], file_note: str = "") -> OllamaBatch:
    """The batch Ollama ``release`` runs a model with, the Modelfile / API ``num_batch`` not set.

    ``num_ctx``: the context per slot after Ollama cuts it to the model's training context; ``num_parallel`` the
    slots; ``device``: the plan's device kind ("CUDA", "ROCm", "Vulkan", "Metal", "CPU" = no GPU); ``fa_env``:
    OLLAMA_FLASH_ATTENTION (None: unset); ``available``: the free memory Ollama's scheduler sees on the GPU (0 with
    no GPU); ``predicted``: ``PredictServerVRAM`` (model file size + :func:`predicted_kv_bytes`) as (low, high),
    high None when unbounded (the file size not known); ``file_note`` says why it is a range.

    * before 0.30.0: ``min(512, num_ctx)`` (an embedding model: num_ctx), the llama.cpp runner's n_ubatch, its
      n_batch that times the slots;
    * 0.30.0 on, an embedding model: ``min(2048, num_ctx x slots)`` as -b / -ub;
    * 0.30.0 on, a completion model: :func:`automatic_batch` over ``num_ctx x slots`` cells, as -b / -ub; with the
      prediction a range, the batch at both ends: equal -> determined, else the larger with ``determined`` False."""
    cells = num_ctx * num_parallel
    if parse_release(release) < (0, 30, 0):
        nb = min(BATCH_DEFAULT, num_ctx)
        src = cite(release, "types.NumBatch", "server.numbatch", "llama.ctxparams", "llamarunner.ctx")
        if embedding and nb < num_ctx:
            return OllamaBatch(num_ctx, num_ctx * num_parallel, num_ctx, "embedding default (before 0.30)",
                               f"an embedding model: Ollama {release} sets the runner's batch to num_ctx, {num_ctx:,}",
                               cite(release, "server.embedding", "llama.ctxparams"))
        return OllamaBatch(nb, nb * num_parallel, nb, "default (before 0.30)",
                           f"num_batch 512 (Ollama's default option) cut to num_ctx: BatchSize {nb}; Ollama {release}'s "
                           f"llama.cpp runner makes its context with n_batch = BatchSize x {num_parallel} slot(s) = "
                           f"{nb * num_parallel}, n_ubatch = {nb} (its own Go engine batches BatchSize tokens)", src)
    if embedding:
        nb = min(EMBEDDING_BATCH, cells)
        return OllamaBatch(nb, nb, nb, "embedding default",
                           f"an embedding model: Ollama {release} passes -b / -ub min(2048, num_ctx x slots) = {nb}",
                           cite(release, "ls.emb_default", "ls.emb_size", "ls.batchargs"))
    src = cite(release, "routes.auto", "sched.load_batch", "sched.rule", "ls.predict", "ls.fa", "device.fa",
               "ls.batchargs")
    fa_disabled = fa_env is False or (fa_env is None and flash_attention_supported(device, compute_capability,
                                                                                   release) is False)
    cuda = device == "CUDA"
    if fa_disabled and cuda:
        nb = automatic_batch(cells, 0, available, fa_disabled=True, cuda=True, cuda_memory=available)
        why = ("OLLAMA_FLASH_ATTENTION=0" if fa_env is False else
               f"flash attention not supported on this CUDA GPU (compute {compute_capability}) in Ollama {release}")
        why += (f": {nb} ({cells:,} cells above 4,096 on a GPU of at most 8 GiB)" if nb == BATCH_CONSTRAINED else
                f": {nb} (Ollama's default; 256 only above 4,096 cells on a GPU of at most 8 GiB)")
        return OllamaBatch(nb, nb, nb, "flash attention off on CUDA", why, src)
    lo, hi = predicted
    at_lo = automatic_batch(cells, lo, available, fa_disabled=False, cuda=cuda, cuda_memory=available)
    at_hi = BATCH_DEFAULT if hi is None and available else (
        automatic_batch(cells, hi, available, fa_disabled=False, cuda=cuda, cuda_memory=available) if hi is not None
        else at_lo)
    start = batch_for_context(cells)
    thresholds = None if hi is None or not available else (
        {b: min_free_for_batch(b, hi) for b in (BATCH_LARGE, BATCH_MEDIUM) if b <= start} or None)
    gib = (lambda n: f"{n / GiB:.2f} GiB")
    pred = gib(lo) if hi == lo else (f"{gib(lo)} .. {gib(hi)}" if hi is not None else f"at least {gib(lo)}")
    if not available:
        head = (f"{start} for {cells:,} cells (above 32,768: 2048, above 4,096: 1024); with no GPU the scheduler "
                "sees no free memory, and the headroom check passes then")
        src += ", " + cite_lines(release, "sched.avail_load")
    else:
        head = (f"{cells:,} cells start at {start} (above 32,768: 2048, above 4,096: 1024), kept while Ollama's "
                f"prediction ({pred}: the model file + an f16 KV cache of num_ctx x slots) is at most 60% (2048) / 75% "
                f"(1024) of the free memory, {gib(available)}, and 80% of it holds the prediction plus 2 GiB / 768 MiB")
        if thresholds:
            head += ("; free memory needed for " + ", ".join(f"{b}: {gib(v)}" for b, v in thresholds.items())
                     + ("" if hi == lo else " (at the larger prediction)"))
    if at_lo == at_hi:
        return OllamaBatch(at_lo, at_lo, at_lo, "automatic", f"Ollama {release} picks {at_lo}: {head}", src,
                           thresholds=thresholds, predicted=(lo, hi))
    unknown = file_note or "the model file size is not known"
    return OllamaBatch(at_lo, at_lo, at_lo, "automatic",
                       f"not modelled exactly: Ollama {release} picks {at_hi} .. {at_lo} here ({unknown}); the plan "
                       f"uses {at_lo}, the largest, so its compute buffers "
                       f"are an upper bound: {head}", src, determined=False, low=at_hi, thresholds=thresholds,
                       predicted=(lo, hi))


def oom_retry(release: str, *, num_ctx: int, num_ctx_auto: bool) -> dict | None:
    """Ollama 0.30+ retries a llama-server load that failed out of memory once with a lower automatic context
    (server/sched.go ``reduceAutoNumCtxForLoadOOM``): ``{"num_ctx": 32768 or 4096, "source"}`` when ``num_ctx``
    (the context per slot, cut to the model's) came from Ollama's automatic default (OLLAMA_CONTEXT_LENGTH unset /
    0, no num_ctx option) and lies above 4,096; None otherwise (before 0.30 there is no such retry)."""
    if parse_release(release) < (0, 30, 0) or not num_ctx_auto:
        return None
    new = next_lower_auto_ctx(num_ctx)
    if new is None:
        return None
    return {"num_ctx": new, "source": cite(release, "sched.oom_call", "sched.oom_func", "sched.next_ctx",
                                           "routes.auto_ctx")}
