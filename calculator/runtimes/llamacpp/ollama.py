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
