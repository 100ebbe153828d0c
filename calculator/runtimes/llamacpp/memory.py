"""llama.cpp start-up memory, as llama.cpp logs it per device, from a GGUF header (``gguf_meta.GGUFMeta``).

``plan(meta, n_ctx=..., ...)`` returns a ``LlamaCppPlan`` holding what llama.cpp prints while it loads:

* ``llama_kv_cache: size = X MiB (N cells, L layers, s/S seqs), K (f16): .. MiB, V (f16): .. MiB``, one line
  per cache (two for sliding-window models: the non-SWA and the SWA cache of ``llama_kv_cache_iswa``);
* ``<dev> KV buffer size``, ``<buft> model buffer size`` (``CPU_Mapped``, ``CUDA0``, ``MTL0_Mapped``...) and
  ``<buft> output buffer size``;
* ``<dev> compute buffer size`` per device, **estimated from the reserved graph's largest live tensors**
  (:func:`compute_buffers`): ggml-alloc's peak over the worst-case graph ``sched_reserve`` reserves
  (n_ubatch tokens, n_ubatch outputs). It is an estimate with a stated error (``COMPUTE_ERR_REL`` +
  ``COMPUTE_ERR_ABS``), checked on the CPU oracle and the public logs; the plan never calls it exact.

The release modelled is the llama.cpp vendored in llama-cpp-python 0.3.36 (``RELEASE_0_3_36``); every rule
cites ``file:line`` of that tree (``vendor/llama.cpp/...``). The rules hold from ggml-org/llama.cpp PR
#17046 (2025-11-07, "kv-cache : pad the cache size to 256") on. ``release=RELEASE_LEGACY`` models the
``llama_kv_cache_unified`` builds of 2025 before PR #16812 (2025-10-28, "memory : remove KV cache size
padding"), where the cache size was ``n_ctx`` padded by ``get_padding``: 256 cells with flash attention, 32
without (PR #7257); the public lcpp-014 log (-c 70000 -> 70016 cells) shows it. Only a single sequence and
no sliding window are modelled there; anything else raises ``NotModelled``. Builds between #16812 and #17046,
and 2024 builds that also padded ``n_ctx`` itself to 256 (PR #6438), are not modelled.
``release=RELEASE_PRE_VLESS`` is the 0.3.36 rule set except for MLA models (DeepSeek-V2/V3, Kimi-K2): before
PR #19067 ("kv-cache : support V-less cache", 2026-01-24) they also stored a V cache of ``value_length``
(= kv_lora_rank) per token; the public lcpp-024 log (b7522, DeepSeek-V3.1, 61 layers of K 576 + V 512 in
q4_0) shows it.

Units: bytes everywhere (``*_bytes``); ``MiB`` = 2^20 B only in the rendered log lines.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from calculator.runtimes.llamacpp.gguf_meta import GGUFMeta

MiB = 1024 * 1024

RELEASE_0_3_36 = "llama-cpp-python==0.3.36"
RELEASE_PRE_VLESS = "llama.cpp PR #17046 .. PR #19067 (2025-11-07 .. 2026-01-24)"
RELEASE_LEGACY = "legacy 2025 llama_kv_cache_unified (before PR #16812)"
RELEASES = (RELEASE_0_3_36, RELEASE_PRE_VLESS, RELEASE_LEGACY)

SRC = "llama-cpp-python 0.3.36 vendor/llama.cpp/"

#: KV cache types llama.cpp accepts for -ctk / -ctv (common/arg.cpp:304-314), with ggml's
#: (block size in values, bytes per block) from ggml/src/ggml.c type_traits (block_q8_0 = 2 B scale + 32 B,
#: block_q4_0 = 2 + 16, block_q4_1 = 2 + 2 + 16, block_iq4_nl = 2 + 16, block_q5_0 = 2 + 4 + 16,
#: block_q5_1 = 2 + 2 + 4 + 16). The same table is gguf.GGML_QUANT_SIZES; tests check both by hand.
KV_CACHE_TYPES: dict[str, tuple[int, int]] = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q4_0": (32, 18),
    "q4_1": (32, 20),
    "iq4_nl": (32, 18),
    "q5_0": (32, 22),
    "q5_1": (32, 24),
}

#: Architectures whose llama.cpp model file sets no sliding window and that use the plain llama_kv_cache
#: (llama-model.cpp:2859-2875 ``new llama_kv_cache(...)``, reached from the ``default:`` branch at
#: llama-model.cpp:2658 for archs that are neither recurrent nor hybrid). Checked: no ``swa_type`` /
#: ``n_swa`` in src/models/<arch>.cpp of the vendored tree.
PLAIN_ARCHS = {
    "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma", "mistral3", "granite", "granitemoe",
    "command-r", "starcoder2", "internlm2", "stablelm", "phi2", "qwen2vl", "qwen3vl", "qwen3vlmoe",
    "deepseek2", "glm4", "glm4moe",
}

#: Sliding-window architectures: (default n_swa or None = the GGUF key is required, default pattern period,
#: dense_first, the line that sets it). ``load_swa_pattern`` (llama-model.cpp:3434-3441) prefers a per-layer
#: ``sliding_window_pattern`` array, then a scalar period from the file, then this default; the period rule
#: is ``llama_hparams::set_swa_pattern`` (llama-hparams.cpp:8-21): layer il is SWA iff
#: ``il % n_pattern < n_pattern - 1`` (dense_first: ``il % n_pattern != 0``).
SWA_ARCHS: dict[str, tuple[int | None, int | None, bool, str]] = {
    "gemma2": (4096, 2, False, "src/models/gemma2.cpp:4-12"),
    "gemma3": (None, 6, False, "src/models/gemma3.cpp:4-11 (SWA only when sliding_window > 0)"),
    "gpt-oss": (None, 2, False, "src/models/openai-moe.cpp:6-9"),
    "cohere2": (None, 4, False, "src/models/cohere2.cpp:4-5"),
    "gemma4": (None, None, False, "src/models/gemma4.cpp:5-16 (pattern array and shared_kv_layers required)"),
}

DEVICE_KINDS = ("CPU", "CUDA", "ROCm", "Metal", "Vulkan")

#: Backends built from ggml-cuda's source: the HIP build (ggml/src/ggml-hip/CMakeLists.txt compiles
#: ../ggml-cuda/*.cu with GGML_USE_HIP) differs in its names only for what this model reads: GGML_CUDA_NAME is
#: "ROCm" (ggml/include/ggml-cuda.h:10-11), so its devices and buffers are ROCm0, ROCm1, ... (ggml-cuda.cu:728, 948)
#: and its pinned host buffer ROCm_Host (ggml-cuda.cu:1257-1258); the buffer alignment (128, ggml-cuda.cu:897-901),
#: the quantized row padding (MATRIX_ROW_PADDING 512, :903-919, common.cuh:186), the device caps (async, events)
#: and the flash-attention rule (fattn.cu:525-631) are the same code.
CUDA_LIKE = ("CUDA", "ROCm")


#: K / V cache types ggml-cuda's flash attention takes (fattn.cu:525-539; iq4_nl is not among them) and ggml-vulkan's
#: (ggml-vulkan.cpp:15471-15486, with iq4_nl).
FA_KV_TYPES = {"CUDA": {"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0"},
               "Vulkan": {"f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"}}
FA_SRC = {"CUDA": SRC + "ggml/src/ggml-cuda/ggml-cuda.cu:5610-5611, fattn.cu:525-631, 775-777 (the same code in the HIP "
                  "build: FLASH_ATTN_AVAILABLE unless GGML_CUDA_NO_FA, common.cuh:304-306)",
          "Vulkan": SRC + "ggml/src/ggml-vulkan/ggml-vulkan.cpp:15451-15497 (supports_op FLASH_ATTN_EXT)"}


def fa_support(device: str, head_dims: set[tuple[int, int]], cache_type_k: str, cache_type_v: str,
               gqa_ratio: int = 1) -> tuple[bool | None, str, str]:
    """Whether ``device``'s backend runs FLASH_ATTN_EXT for these (K head size, V head size) pairs and cache types,
    as its ``supports_op`` decides: ``(True | False | None, reason, source)``; None = not modelled (Metal).

    * CUDA and ROCm (ggml-cuda, fattn.cu:541-631 ``ggml_cuda_get_best_fattn_kernel`` != NONE): K head size 40, 64,
      72, 80, 96, 112, 128 or 256 with V of the same size; 192/128, 320/256, 512/512 and 576/512 only with the GQA
      optimisation (gqa ratio >= 2; 192 needs a ratio multiple of 8, 320 of 32); K and V types in ``FA_KV_TYPES``.
      The architecture (Turing MMA, AMD MFMA / WMMA, tile) only picks the kernel, never refuses.
    * Vulkan (ggml-vulkan.cpp:15451-15497): K and V head sizes multiples of 8, types in ``FA_KV_TYPES``, bf16 for
      both or neither; and the device must have cooperative matrix 2 or subgroup shuffle + vote (Vulkan 1.1 subgroup
      features, reported by current AMD and Intel drivers): assumed, said in the reason.
    * CPU: ggml-cpu runs every FLASH_ATTN_EXT (no supports_op case refuses it)."""
    if device == "CPU":
        return True, "ggml-cpu runs FLASH_ATTN_EXT for every head size and cache type", SRC + "ggml/src/ggml-cpu"
    if device in CUDA_LIKE:
        src = FA_SRC["CUDA"]
        bad = sorted({t for t in (cache_type_k, cache_type_v) if t not in FA_KV_TYPES["CUDA"]})
        if bad:
            return False, f"ggml-cuda's flash attention has no {'/'.join(bad)} cache kernel (fattn.cu:525-539)", src
        for hk, hv in sorted(head_dims):
            ok = (hk in (40, 64, 72, 80, 96, 112, 128, 256) and hv == hk) or \
                 (hk == 192 and hv == 128 and gqa_ratio >= 2 and gqa_ratio % 8 == 0) or \
                 (hk == 320 and hv == 256 and gqa_ratio >= 2 and gqa_ratio % 32 == 0) or \
                 (hk == 512 and hv == 512 and gqa_ratio >= 2) or (hk == 576 and hv == 512 and gqa_ratio >= 2)
            if not ok:
                return False, (f"ggml-cuda's flash attention has no kernel for K head size {hk} with V {hv} (gqa ratio "
                               f"{gqa_ratio}; fattn.cu:569-623)"), src
        return True, (f"ggml-cuda runs flash attention for head sizes {sorted(head_dims)} and {cache_type_k}/"
                      f"{cache_type_v} caches"), src
    if device == "Vulkan":
        src = FA_SRC["Vulkan"]
        bad = sorted({t for t in (cache_type_k, cache_type_v) if t not in FA_KV_TYPES["Vulkan"]})
        if bad:
            return False, f"ggml-vulkan's flash attention takes no {'/'.join(bad)} cache (ggml-vulkan.cpp:15471-15486)", src
        if (cache_type_k == "bf16") != (cache_type_v == "bf16"):
            return False, "ggml-vulkan's flash attention needs bf16 for both K and V or neither (:15490-15492)", src
        for hk, hv in sorted(head_dims):
            if hk % 8 or hv % 8:
                return False, f"ggml-vulkan's flash attention needs head sizes that are multiples of 8, not {hk}/{hv}", src
        return True, ("ggml-vulkan runs flash attention for these head sizes and cache types when the device has "
                      "cooperative matrix 2 or subgroup shuffle and vote (:15493-15496; current AMD and Intel drivers "
                      "report them: assumed)"), src
    return None, f"{device}'s flash-attention support is not modelled here", ""


class NotModelled(ValueError):
    """The request is valid for llama.cpp but this model does not cover it; ``field`` names the input."""

    def __init__(self, message: str, *, field: str):
        super().__init__(message)
        self.field = field


class KVCache(BaseModel):
    """One ``llama_kv_cache`` (llama-kv-cache.cpp:65-305): K and V tensors of shape
    ``[n_embd_{k,v}_gqa(il), cells, n_stream]`` per layer (llama-kv-cache.cpp:233-234)."""

    name: Literal["kv", "non-SWA", "SWA"]
    cells: int
    layers: list[int]
    n_seq_max: int
    n_stream: int
    type_k: str
    type_v: str
    k_bytes: int
    v_bytes: int
    per_layer_k_bytes: list[int]
    per_layer_v_bytes: list[int]
    buffers: dict[str, int] = Field(default_factory=dict)  # "<dev> KV buffer size" bytes per device
    source: str

    @property
    def total_bytes(self) -> int:
        return self.k_bytes + self.v_bytes

    def log_line(self) -> str:
        """The line llama-kv-cache.cpp:301-304 prints (``%7.2f`` MiB, ``%6u`` cells, ``%3d`` layers)."""
        return ("llama_kv_cache: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, "
                "V (%s): %7.2f MiB" % (self.total_bytes / MiB, self.cells, len(self.layers), self.n_seq_max,
                                        self.n_stream, self.type_k, self.k_bytes / MiB, self.type_v,
                                        self.v_bytes / MiB))


class Buffer(BaseModel):
    """One backend buffer llama.cpp logs: ``kind`` model / KV / output / compute on buffer type ``buft``.
    ``bytes`` is None where it is not modelled (``note`` says why)."""

    kind: Literal["model", "KV", "output", "compute"]
    buft: str
    bytes: int | None
    source: str
    note: str = ""
    error_bytes: int | None = None  # set for an estimate: llama.cpp's figure lies within bytes +- error_bytes
    terms: dict[str, int] = Field(default_factory=dict)  # an estimate's parts (name -> bytes)


class LlamaCppPlan(BaseModel):
    release: str
    architecture: str
    n_ctx: int  # after llama.cpp's padding / rounding
    n_ctx_requested: int
    n_ctx_seq: int
    n_seq_max: int
    n_stream: int
    n_batch: int = 2048  # -b, cut to n_ctx with causal attention (llama-context.cpp:245-246)
    n_ubatch: int = 512  # -ub, cut to n_batch (:248): the tokens of one compute pass, the prefill chunk
    kv_unified: bool
    flash_attn: Literal["on", "off", "auto"]
    device: str
    n_gpu_layers: int  # as requested (-1 = all)
    layers_on_gpu: list[int]
    output_on_gpu: bool
    n_gpus: int = 1  # GPUs llama.cpp sees (identical ones)
    split_mode: Literal["none", "layer", "row"] = "layer"
    tensor_split: list[float] | None = None
    main_gpu: int = 0
    layer_devices: list[int] = Field(default_factory=list)  # per layer: GPU index (CUDA<i>) or -1 for the CPU
    output_device: int = 0
    pipeline_parallel: bool = False  # llama-context.cpp:430-457: n_copies = 4 in the scheduler
    fa_supported: bool | None = None  # the GPU backend runs FLASH_ATTN_EXT for this model (fa_support); None: unknown
    fa_reason: str = ""  # why, with the backend's source
    fa_enabled: bool | None = None  # flash attention in the compute graph after -fa auto is resolved; None: unknown
    kv_caches: list[KVCache]
    buffers: list[Buffer]
    notes: list[str] = Field(default_factory=list)
    tensor_overrides: list[tuple[str, int]] = Field(default_factory=list)  # -ot (regex, device: -1 CPU / GPU i)

    @property
    def kv_bytes(self) -> int:
        return sum(c.total_bytes for c in self.kv_caches)

    def buffer(self, kind: str, buft: str) -> Buffer | None:
        for b in self.buffers:
            if b.kind == kind and b.buft == buft:
                return b
        return None

    def log_lines(self) -> list[str]:
        lines = []
        for b in self.buffers:
            if b.bytes is None:
                continue
            if b.kind == "model":
                lines.append("load_tensors: %12s model buffer size = %8.2f MiB" % (b.buft, b.bytes / MiB))
            elif b.kind == "output":
                lines.append("llama_context: %10s  output buffer size = %8.2f MiB" % (b.buft, b.bytes / MiB))
        for c in self.kv_caches:
            for dev, n in c.buffers.items():
                lines.append("llama_kv_cache: %10s KV buffer size = %8.2f MiB" % (dev, n / MiB))
            lines.append(c.log_line())
        for b in self.buffers:
            if b.kind == "compute" and b.bytes is not None:
                lines.append("sched_reserve: %10s compute buffer size = %8.2f MiB (+- %.2f MiB, %s)"
                             % (b.buft, b.bytes / MiB, (b.error_bytes or 0) / MiB, COMPUTE_LABEL))
        return lines



# ---------------------------------------------------------------- placement over devices

CPU = -1  # device index of the CPU in a Placement
SPLIT_MODES = ("none", "layer", "row")
PLACEMENT_SRC = SRC + "src/llama-model.cpp:1556-1613 (split points :1556-1585, layer device :1587-1600, output :1614)"


@dataclass(frozen=True)
class Placement:
    """Where each placement unit of a model runs. ``layers[il]``: device of layer ``il`` (``CPU`` = -1, GPUs
    0..n-1 as llama.cpp numbers them: CUDA0, CUDA1, ...); ``output``: device of the output layer;
    ``expert_cpu_layers``: layers whose routed experts stay in CPU memory (``--n-cpu-moe``); ``split_mode``:
    ``none`` / ``layer`` / ``row``; ``shares``: each GPU's share of the ``--tensor-split`` (normalised);
    ``n_gpus``: the GPUs llama.cpp uses (1 with ``-sm none``); ``gpu_ids``: their indices."""

    layers: tuple[int, ...]
    output: int
    n_gpus: int
    split_mode: str = "layer"
    shares: tuple[float, ...] = (1.0,)
    expert_cpu_layers: frozenset[int] = field(default_factory=frozenset)
    gpu_ids: tuple[int, ...] = (0,)

    def device_of(self, unit: int | str) -> int:
        if unit == "input":
            return CPU
        if unit == "output":
            return self.output
        return self.layers[unit]

    @property
    def sequence(self) -> list[int]:
        """Devices in the order a token's activations visit them: input (CPU), layers, output."""
        return [CPU, *self.layers, self.output]


def placement(n_layer_all: int, n_gpu_layers: int = -1, *, n_gpus: int = 1, tensor_split: list[float] | None = None,
              split_mode: str = "layer", n_cpu_moe: int = 0, main_gpu: int = 0) -> Placement:
    """llama.cpp's device of every layer and of the output layer (vendor/llama.cpp/src/llama-model.cpp:1556-1614),
    the one rule the memory plan and the speed model both use.

    * ``n_gpu_layers`` (-ngl; -1 or anything above ``n_layer_all`` = all layers and the output): the *last*
      ``n_gpu_layers`` units go to the GPUs (``i_gpu_start = max(n_layer_all + 1 - ngl, 0)``, :1589); the input
      layer (token_embd) always stays on the CPU (:1603-1605).
    * ``tensor_split`` (-ts; shorter than ``n_gpus`` = the rest 0, common/arg.cpp:2831-2855; None or all zero =
      llama.cpp's default, each GPU's *free* memory, :1557-1573: equal shares here, i.e. identical idle GPUs).
      The shares are summed and normalised into split points in float32 (:1579-1585) and unit ``il`` goes to the
      first GPU whose split point exceeds ``float(il - i_gpu_start) / act_gpu_layers`` (``std::upper_bound``,
      :1595; ``act_gpu_layers = min(ngl, n_layer_all + 1)`` counts the output layer): with 32 layers on 2 equal
      GPUs, 33 units, GPU0 gets layers 0-16 and GPU1 layers 17-31 and the output.
    * ``split_mode`` ``none`` keeps only GPU ``main_gpu`` (-mg; src/llama.cpp:289-300; ``main_gpu < 0``: no GPU);
      ``row`` places layers as ``layer`` does (the row split of each matrix is the speed model's business).
    * ``n_cpu_moe``: the routed experts of the first N layers stay on the CPU (common/arg.cpp:2767-2775).

    Raises ``ValueError`` for a bad ``n_gpus``, ``split_mode``, ``tensor_split``, ``main_gpu`` or ``n_cpu_moe``."""
    import numpy as np

    f32 = np.float32
    if n_gpus < 1:
        raise ValueError(f"n_gpus must be >= 1, not {n_gpus}")
    if split_mode not in SPLIT_MODES:
        raise ValueError(f"split_mode (-sm): one of {', '.join(SPLIT_MODES)}, not {split_mode!r}")
    if n_cpu_moe < 0:
        raise ValueError(f"n_cpu_moe (--n-cpu-moe) must be >= 0, not {n_cpu_moe}")
    if tensor_split is not None and (len(tensor_split) > n_gpus or any(x < 0 for x in tensor_split)):
        raise ValueError(f"tensor_split (-ts): at most {n_gpus} non-negative shares (one per GPU), not {tensor_split}")
    if split_mode == "none":
        if main_gpu >= n_gpus:
            # src/llama.cpp:293-295 "invalid value for main_gpu"
            raise ValueError(f"main_gpu (-mg) {main_gpu}: llama.cpp has {n_gpus} GPU(s), 0..{n_gpus - 1}")
        gpu_ids = (main_gpu,) if main_gpu >= 0 else ()
        split = [f32(1.0)] if gpu_ids else []
    else:
        gpu_ids = tuple(range(n_gpus))
        given = [f32(x) for x in (tensor_split or [])] + [f32(0.0)] * (n_gpus - len(tensor_split or []))
        split = [f32(1.0)] * n_gpus if all(x == 0 for x in given) else given
    cum, acc = [], f32(0.0)
    for x in split:  # :1579-1585: cumulative sums, then divided by the total, in float32
        acc = f32(acc + x)
        cum.append(acc)
    cum = [f32(c / acc) for c in cum]
    ngl = n_layer_all + 1 if n_gpu_layers < 0 else n_gpu_layers
    i_gpu_start = max(n_layer_all + 1 - ngl, 0)
    act = min(ngl, n_layer_all + 1) if gpu_ids else 0

    def dev(il: int) -> int:
        if il < i_gpu_start or il - i_gpu_start >= act:
            return CPU
        x = f32(f32(il - i_gpu_start) / f32(act))  # std::upper_bound(splits, x): first split point > x (:1595)
        k = next((i for i, c in enumerate(cum) if c > x), len(cum) - 1)
        return gpu_ids[min(k, len(gpu_ids) - 1)]

    layers = tuple(dev(il) for il in range(n_layer_all))
    total = float(acc) if gpu_ids else 1.0
    return Placement(layers=layers, output=dev(n_layer_all), n_gpus=max(len(gpu_ids), 1), split_mode=split_mode,
                     shares=tuple(float(x) / total for x in split) or (1.0,),
                     expert_cpu_layers=frozenset(range(min(n_cpu_moe, n_layer_all))), gpu_ids=gpu_ids)

# ---------------------------------------------------------------- helpers


def ggml_row_bytes(type_name: str, n: int) -> int:
    """Bytes of ``n`` values of a KV cache type (``ggml_row_size``: n / block * bytes per block).
    Raises ``NotModelled`` for a type not in ``KV_CACHE_TYPES`` and ``ValueError`` when ``n`` is not a
    whole number of blocks (llama.cpp refuses such a cache: ggml asserts ``ne0 % blck_size == 0``)."""
    if type_name not in KV_CACHE_TYPES:
        raise NotModelled(f"cache type {type_name!r} is not one llama.cpp accepts ({', '.join(KV_CACHE_TYPES)}); "
                          "common/arg.cpp:304-314", field="cache_type")
    block, size = KV_CACHE_TYPES[type_name]
    if n % block:
        raise ValueError(f"{n} values are not a whole number of {type_name} blocks of {block}: llama.cpp "
                         "cannot create this cache")
    return n // block * size


def _pad(x: int, n: int) -> int:
    """GGML_PAD(x, n) (ggml/include/ggml.h): x rounded up to a multiple of n."""
    return (x + n - 1) // n * n


def swa_layers(meta: GGUFMeta) -> tuple[list[bool], int, str]:
    """Per-layer SWA flags, the window ``n_swa`` and the rule's source, for ``meta.architecture``.
    Raises ``NotModelled`` for an architecture outside ``PLAIN_ARCHS`` / ``SWA_ARCHS``."""
    arch, n = meta.architecture, meta.n_layer_all
    if arch in PLAIN_ARCHS:
        return [False] * n, 0, "no sliding window for this architecture (src/models/%s.cpp)" % arch
    if arch not in SWA_ARCHS:
        raise NotModelled(
            f"architecture {arch!r}: its KV cache layout (recurrent, hybrid, MLA-indexer or sliding-window "
            "variant) is not modelled for llama.cpp", field="model")
    default_swa, period, dense_first, src = SWA_ARCHS[arch]
    n_swa = meta.sliding_window if meta.sliding_window is not None else default_swa
    if arch == "gemma3" and not n_swa:
        return [False] * n, 0, src
    if n_swa is None:
        raise NotModelled(f"{arch}: GGUF has no {arch}.attention.sliding_window key", field="model")
    n_layer = n - meta.n_layer_nextn
    pattern = meta.sliding_window_pattern
    if isinstance(pattern, list):
        flags = list(pattern) + [False] * (n - len(pattern))
        return flags[:n], n_swa, src
    if period is None and pattern is None:
        raise NotModelled(f"{arch}: GGUF has no sliding_window_pattern array", field="model")
    p = int(pattern) if pattern is not None else int(period)
    flags = []
    for il in range(n):
        if il >= n_layer:
            flags.append(False)
        elif dense_first:
            flags.append(p == 0 or il % p != 0)
        else:
            flags.append(p == 0 or il % p < p - 1)
    return flags, n_swa, src


def _layer_dims(meta: GGUFMeta, il: int, is_swa: bool) -> tuple[int, int]:
    """(n_embd_k_gqa, n_embd_v_gqa) of layer il (llama-hparams.cpp:140-166): head size x n_head_kv, with the
    SWA head sizes (key_length_swa, llama-model.cpp:1462-1467) on SWA layers."""
    hk = meta.head_dim_k or 0
    hv = meta.head_dim_v or 0
    if is_swa:
        hk = meta.head_dim_k_swa or hk
        hv = meta.head_dim_v_swa or hv
    return hk * meta.n_head_kv[il], hv * meta.n_head_kv[il]


# ---------------------------------------------------------------- the plan


def plan(
    meta: GGUFMeta,
    *,
    n_ctx: int,
    n_seq_max: int = 1,
    kv_unified: bool = False,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    flash_attn: Literal["on", "off", "auto"] = "auto",
    n_gpu_layers: int = -1,
    swa_full: bool = False,
    n_batch: int = 2048,
    n_ubatch: int = 512,
    device: str = "CUDA",
    use_mmap: bool = True,
    offload_kqv: bool = True,
    release: str = RELEASE_0_3_36,
    cpu_features: frozenset[str] | set[str] | None = None,
    kq_mask_f16: bool | None = None,
    n_outputs_max: int | None = None,
    n_gpus: int = 1,
    split_mode: str = "layer",
    tensor_split: list[float] | None = None,
    main_gpu: int = 0,
    tensor_overrides: list[tuple[str, int]] | None = None,
) -> LlamaCppPlan:
    """What llama.cpp allocates at start-up for ``meta`` with these context parameters.

    Parameters use llama.cpp's names: ``n_ctx`` (-c; 0 = the model's context_length), ``n_seq_max`` (-np /
    --parallel), ``kv_unified`` (-kvu), ``cache_type_k/v`` (-ctk/-ctv), ``flash_attn`` (-fa), ``n_gpu_layers``
    (-ngl; -1 = all, any value above the layer count = all), ``swa_full`` (--swa-full), ``n_batch`` (-b),
    ``n_ubatch`` (-ub), ``use_mmap`` (--no-mmap = False), ``offload_kqv`` (--no-kv-offload = False).
    ``device`` is the GPU backend ("CUDA", "ROCm" -- ggml-cuda built with HIP, the same code paths, ``CUDA_LIKE`` --,
    "Metal", "Vulkan") or "CPU" for a build without one; flash attention with ``-fa auto`` is resolved per backend
    (:func:`fa_support`). ``n_gpus`` identical CUDA / ROCm / Vulkan GPUs (CUDA0, CUDA1, ...; ROCm0, ...; Vulkan0, ...) with ``split_mode`` (-sm ``layer``, the default, or ``none``),
    ``tensor_split`` (-ts; None = llama.cpp's default, each GPU's free memory: equal for identical idle GPUs) and
    ``main_gpu`` (-mg, the one GPU of ``-sm none``): every layer, its KV cache and the output layer sit on the
    device :func:`placement` gives (llama-model.cpp:1556-1614, llama-kv-cache.cpp:214-221), each device gets
    its own model, KV and compute buffers, and with every layer offloaded over several GPUs the scheduler runs
    pipeline parallelism (llama-context.cpp:430-457: 4 copies of each split input, ggml-backend.cpp:1379-1430).
    ``-sm row`` (matrices split by rows into a CUDA_Split buffer) and ``-sm tensor`` raise ``NotModelled``; so
    do several Metal / Vulkan devices. The per-device split is read from llama.cpp's source, not checked
    against a multi-GPU log (the CPU oracle has one device).
    ``cpu_features`` (subset of ``CPU_FEATURES``) are the ggml-cpu build's SIMD features, which decide the
    CPU_REPACK buffer; ``None`` = unknown (no repacking modelled, said in ``notes`` when it matters).
    ``kq_mask_f16`` (compute buffers only): whether the build creates the KQ mask f16 with flash attention
    (ggml-org/llama.cpp PR #23764, 2026-05-28, in 0.3.36); ``None`` = by ``release`` (True for 0.3.36). Builds
    before it (the public logs of 2025 / early 2026) made an f32 mask and cast it: give False.
    ``n_outputs_max`` (``llama_context_params.n_outputs_max``; None/0 = n_batch, llama-context.cpp:250): the
    outputs the worst-case graph reserves, ``min(n_tokens, n_outputs_max)`` (:896-898); a speculative draft's
    context is made with ``n_parallel`` (common/speculative.cpp:2480).
    ``tensor_overrides`` (``-ot PATTERN=DEV``, ``llama_model_params.tensor_buft_overrides``): ``(regex, device)``
    pairs, device ``CPU`` (-1) or a GPU index; a weight whose name matches a pattern (``std::regex_search``, the first
    match wins: src/llama-model-loader.cpp:1234-1258) goes to that device's buffer instead of its layer's. This is
    how llama-server's ``--fit`` keeps routed experts (or parts of a layer's FFN) in CPU memory
    (:mod:`.fit`). Only the model buffers follow the overrides; the compute-buffer estimate does not (an override to
    the CPU may also pick CPU_REPACK on a CPU-only host list: not modelled, the GPU's host buffer type comes first).

    Returns a ``LlamaCppPlan``. Raises ``NotModelled`` (with ``field``) for what the model does not cover and
    ``ValueError`` (message naming the parameter) for what llama.cpp itself rejects.
    """
    if release not in RELEASES:
        raise NotModelled(f"release {release!r}: modelled releases are {', '.join(RELEASES)}", field="release")
    if device not in DEVICE_KINDS:
        raise ValueError(f"device: one of {', '.join(DEVICE_KINDS)}, not {device!r}")
    if split_mode == "tensor":
        raise NotModelled("split_mode (-sm) tensor: the experimental tensor-parallel Meta device "
                          "(src/llama.cpp:158-231) is not modelled; -sm layer and none are", field="split_mode")
    if split_mode == "row" and device != "CPU":
        raise NotModelled("split_mode (-sm) row: the matrices split by rows over the GPUs (CUDA_Split buffer, "
                          "llama-model.cpp:1140-1162, ggml-cuda's row rounding) are not modelled for memory; "
                          "-sm layer and none are", field="split_mode")
    if n_gpus < 1 or n_gpus > 16:
        raise ValueError(f"n_gpus must be 1..16 (GGML_CUDA_MAX_DEVICES), not {n_gpus}")
    if n_gpus > 1 and device not in ("CUDA", "ROCm", "Vulkan"):
        raise NotModelled(f"several {device} devices are not modelled; several CUDA, ROCm or Vulkan GPUs are",
                          field="n_gpus")
    for name, value in (("n_ctx", n_ctx), ("n_batch", n_batch), ("n_ubatch", n_ubatch)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, not {value}")
    if n_seq_max < 1 or n_seq_max > 256:
        # LLAMA_MAX_SEQ = 256 (src/llama-cparams.h); llama-context.cpp:100-103
        raise ValueError(f"n_seq_max (--parallel) must be 1..256, not {n_seq_max}")
    for name, t in (("cache_type_k", cache_type_k), ("cache_type_v", cache_type_v)):
        if t not in KV_CACHE_TYPES:
            raise ValueError(f"{name}: llama.cpp accepts {', '.join(KV_CACHE_TYPES)} (common/arg.cpp:304-314), "
                             f"not {t!r}")
    if flash_attn not in ("on", "off", "auto"):
        raise ValueError(f"flash_attn (-fa): on, off or auto, not {flash_attn!r}")
    notes: list[str] = []
    fa_enabled = flash_attn != "off"  # llama-context.cpp:230-231: auto counts as enabled when the cache is made
    if cache_type_v not in ("f32", "f16", "bf16"):
        if flash_attn == "off":
            # llama-context.cpp:465-469
            raise ValueError("cache_type_v: a quantized V cache requires flash attention (-fa on/auto); "
                             "llama.cpp: 'quantized V cache was requested, but this requires Flash Attention'")
        if flash_attn == "auto":
            notes.append("Quantized V with -fa auto: llama.cpp fails at start-up if the device cannot run flash "
                         "attention for this model (llama-context.cpp:557-560, 465-469).")

    # llama_init_from_model refuses a quantized cache whose block does not divide the head size, when flash
    # attention is not disabled (llama-context.cpp:3851-3870)
    if fa_enabled:
        for name, t, dims in (("cache_type_k", cache_type_k, (meta.head_dim_k, meta.head_dim_k_swa)),
                              ("cache_type_v", cache_type_v, (meta.head_dim_v, meta.head_dim_v_swa))):
            block = KV_CACHE_TYPES[t][0]
            for d in dims:
                if block > 1 and d and d % block:
                    raise ValueError(f"{name}: {t} blocks of {block} do not divide the head size {d}; llama.cpp "
                                     "refuses this cache with flash attention (llama-context.cpp:3851-3870)")

    # ---- context sizes: llama-context.cpp:133, 246-248, 290-306
    n_ctx_req = n_ctx
    n_ctx = n_ctx if n_ctx > 0 else meta.n_ctx_train
    n_batch_eff = min(n_ctx, n_batch)
    n_ubatch_eff = min(n_batch_eff, n_ubatch if n_ubatch > 0 else n_batch_eff)
    if release in (RELEASE_0_3_36, RELEASE_PRE_VLESS):
        n_ctx = _pad(n_ctx, 256)  # llama-context.cpp:290
        if kv_unified:
            n_ctx_seq = n_ctx  # :292-293
        else:
            n_ctx_seq = _pad(n_ctx // n_seq_max, 256)  # :295-296
            if n_ctx != n_ctx_seq * n_seq_max:  # :302-305 (named "rounding down", it can round up)
                notes.append(f"llama.cpp: n_ctx is not divisible by n_seq_max - rounding to {n_ctx_seq * n_seq_max}")
                n_ctx = n_ctx_seq * n_seq_max
        kv_size = n_ctx_seq  # llama-model.cpp create_memory passes cparams.n_ctx_seq (e.g. :2857-2868)
    else:
        if n_seq_max != 1:
            raise NotModelled("legacy builds: only --parallel 1 is modelled", field="n_seq_max")
        pad = 256 if fa_enabled else 32  # llama_kv_cache_unified::get_padding, PR #7257
        if flash_attn == "auto":
            raise NotModelled("legacy builds: -fa auto decides the padding (256 with, 32 without flash "
                              "attention) on the device; give on or off", field="flash_attn")
        n_ctx = _pad(n_ctx, pad)
        n_ctx_seq = n_ctx
        kv_size = n_ctx
    n_stream = 1 if kv_unified else n_seq_max  # llama-kv-cache.cpp:84

    # ---- which layers have which cache
    flags, n_swa, swa_src = swa_layers(meta)
    if release == RELEASE_LEGACY and any(flags):
        raise NotModelled("legacy builds: sliding-window caches are not modelled", field="release")
    n_all = meta.n_layer_all
    n_layer = n_all - meta.n_layer_nextn
    has_kv = [True] * n_all
    if meta.architecture == "gemma4":
        kv_from = n_all - (meta.shared_kv_layers or 0)  # src/models/gemma4.cpp:8-11
        has_kv = [il < kv_from for il in range(n_all)]  # llama-hparams.cpp:321-331
    trunk = [il < n_layer for il in range(n_all)]  # NextN layers are filtered out (llama-model.cpp:2797-2804)
    is_mla = meta.key_length_mla is not None and meta.value_length_mla is not None
    if is_mla and release == RELEASE_PRE_VLESS:
        is_mla = False  # V cache of value_length (= kv_lora_rank) per token until PR #19067
        notes.append("MLA before PR #19067: K (kv_lora_rank + rope) and V (kv_lora_rank) are both cached.")
    elif is_mla:
        if release == RELEASE_LEGACY:
            raise NotModelled("legacy builds: the MLA cache layout changed several times; not modelled",
                              field="release")
        notes.append("MLA: the cache holds K only (llama-kv-cache.cpp:231, has_v = !is_mla; PR #19067).")
    if meta.n_head and any(h == 0 for il, h in enumerate(meta.n_head_kv) if has_kv[il] and trunk[il]):
        raise NotModelled(f"{meta.architecture}: a layer without attention heads (recurrent/hybrid)", field="model")

    # GPU placement: llama-model.cpp:1556-1614 (placement(), the rule the speed model uses too)
    gpu = device != "CPU"
    if gpu:
        pl = placement(n_all, n_gpu_layers, n_gpus=n_gpus, tensor_split=tensor_split, split_mode=split_mode,
                       main_gpu=main_gpu)
        unit_dev = [*pl.layers, pl.output]
    else:
        unit_dev = [CPU] * (n_all + 1)
    on_gpu = [d != CPU for d in unit_dev]
    layers_on_gpu = [il for il in range(n_all) if on_gpu[il]]
    output_on_gpu = on_gpu[n_all]
    gpus_used = sorted({d for d in unit_dev if d != CPU})
    # llama-context.cpp:430-457: more than one device, every layer and the output offloaded (n_gpu_layers >
    # n_layer_all: -ngl -1 resolves to n_layer_all + 1, llama-model.cpp:2002-2005), -sm layer, KV offloaded; CUDA
    # devices report async compute and events (ggml-cuda.cu device caps), so the scheduler keeps 4 copies
    n_gpu_eff = n_all + 1 if n_gpu_layers < 0 else n_gpu_layers
    n_devices = 1 if split_mode == "none" else n_gpus
    # (ggml-vulkan.cpp:15285-15290 reports async and events too)
    pipeline_parallel = (gpu and n_devices > 1 and n_gpu_eff > n_all and split_mode == "layer" and offload_kqv
                         and device in ("CUDA", "ROCm", "Vulkan"))

    # -fa auto: the cache is made with flash attention counted as enabled (above), then resolve_fused_ops
    # (llama-context.cpp:506-560) reserves a graph and disables it when a layer's FLASH_ATTN_EXT lands on another
    # device than the layer's, i.e. when the layer's backend does not support the op (fa_support). A quantized V
    # with auto was already forced on (llama-context.cpp:3840-3844), so it is not resolved.
    fa_ok, fa_why = None, ""
    if gpu and layers_on_gpu:
        if is_mla:
            heads = {(meta.key_length_mla, meta.value_length_mla)}
            gqa = max(meta.n_head) if meta.n_head else 1
        else:
            heads = set()
            for il in layers_on_gpu:
                hk, hv = meta.head_dim_k or 0, meta.head_dim_v or 0
                if flags[il]:
                    hk, hv = meta.head_dim_k_swa or hk, meta.head_dim_v_swa or hv
                heads.add((hk, hv))
            gqa = (max(meta.n_head) // max(max(meta.n_head_kv), 1)) if meta.n_head and meta.n_head_kv else 1
        fa_ok, why, fa_src = fa_support(device, heads, cache_type_k, cache_type_v, gqa_ratio=gqa)
        fa_why = f"{why} ({fa_src})" if fa_src else why
    fa_compute = fa_enabled
    if flash_attn == "auto" and cache_type_v in ("f32", "f16", "bf16") and fa_ok is False:
        fa_compute = False
        notes.append(f"-fa auto resolves to disabled on {device}: {fa_why}; llama.cpp logs 'Flash Attention not "
                     "supported, set to disabled' (llama-context.cpp:546-549). The KV cache was sized with it enabled "
                     "(V not transposed); the compute buffer is for attention without it.")
    elif flash_attn == "on" and fa_ok is False:
        notes.append(f"-fa on but {device} cannot run it: {fa_why}; the scheduler runs FLASH_ATTN_EXT on the CPU for "
                     "these layers (slow); the compute buffers are not modelled for that split.")
    elif flash_attn == "auto" and fa_ok is True and cache_type_v in ("f32", "f16", "bf16"):
        notes.append(f"-fa auto resolves to enabled on {device}: {fa_why}")
    v_trans = not fa_enabled  # create_memory passes !cparams.flash_attn (llama-model.cpp:2864)
    v_max = max(_layer_dims(meta, il, flags[il])[1] for il in range(n_all)) if n_all else 0
    if v_trans and any(_layer_dims(meta, il, flags[il])[1] != v_max for il in range(n_all)):
        notes.append("V embedding sizes differ across layers and flash attention is off: every V row is padded "
                     f"to {v_max} (llama-kv-cache.cpp:157-160, 210).")

    def build(name, layer_ids, cells, src) -> KVCache:
        ks, vs, bufs = [], [], {}
        for il in layer_ids:
            k_dim, v_dim = _layer_dims(meta, il, flags[il])
            if v_trans:
                v_dim = v_max  # llama-kv-cache.cpp:210
            k = ggml_row_bytes(cache_type_k, k_dim) * cells * n_stream
            v = 0 if is_mla else ggml_row_bytes(cache_type_v, v_dim) * cells * n_stream
            ks.append(k)
            vs.append(v)
            dev = _buft_name(device, unit_dev[il]) if (offload_kqv and on_gpu[il]) else "CPU"  # llama-kv-cache.cpp:214-221
            bufs[dev] = bufs.get(dev, 0) + _alloc(device if dev != "CPU" else "CPU", cache_type_k, k_dim, k)
            if not is_mla:
                bufs[dev] += _alloc(device if dev != "CPU" else "CPU", cache_type_v, v_dim, v)
        return KVCache(name=name, cells=cells, layers=list(layer_ids), n_seq_max=n_seq_max, n_stream=n_stream,
                       type_k=cache_type_k, type_v=cache_type_v, k_bytes=sum(ks), v_bytes=sum(vs),
                       per_layer_k_bytes=ks, per_layer_v_bytes=vs, buffers=bufs, source=src)

    kv_layers = [il for il in range(n_all) if has_kv[il] and trunk[il]]
    caches: list[KVCache]
    if any(flags):
        # llama_kv_cache_iswa (llama-kv-cache-iswa.cpp:52-108)
        size_swa = _pad(min(kv_size, n_swa * (n_seq_max if kv_unified else 1) + n_ubatch_eff), 256)  # :73
        if swa_full:
            size_swa = kv_size  # :76-81
        caches = [
            build("non-SWA", [il for il in kv_layers if not flags[il]], kv_size,
                  SRC + "src/llama-kv-cache-iswa.cpp:69,95-98"),
            build("SWA", [il for il in kv_layers if flags[il]], size_swa,
                  SRC + f"src/llama-kv-cache-iswa.cpp:73-81,102-105 (n_swa={n_swa}, {swa_src})"),
        ]
    else:
        caches = [build("kv", kv_layers, kv_size, SRC + "src/llama-model.cpp:2859-2875, src/llama-kv-cache.cpp:65-305")]

    # ---- buffers
    if cpu_features is not None:
        cpu_features = frozenset(cpu_features)
        if not cpu_features <= CPU_FEATURES:
            raise ValueError(f"cpu_features: known features are {', '.join(sorted(CPU_FEATURES))}, not "
                             f"{', '.join(sorted(cpu_features - CPU_FEATURES))}")
    overrides = [(re.compile(pat), dev) for pat, dev in (tensor_overrides or [])] if gpu else []
    buffers = _model_buffers(meta, unit_dev, device, use_mmap, cpu_features, notes, overrides)
    if meta.n_vocab is not None:
        # llama-context.cpp:2116-2160: logits n_vocab x max(n_seq_max, requested outputs) floats
        out = meta.n_vocab * n_seq_max * 4
        out_buft = host_buft_name(device)
        note = ""
        if device == "Metal":
            # Metal has no host buffer type here (ggml-metal.cpp:822), so the CPU buffer holds the logits and
            # the unrounded size is printed. Ollama 0.21's bundled build printed 0.50 MiB for 128256 x 4 B
            # (lcpp-027): a page-rounded size (16 KiB pages), so older Metal builds differ by up to 16 KiB.
            note = "older Metal builds print this rounded up to the 16 KiB page (not modelled)"
        buffers.append(Buffer(kind="output", buft=out_buft, bytes=out, note=note,
                              source=SRC + "src/llama-context.cpp:375-384,2116-2160"))
    n_tokens = min(n_ctx, n_ubatch_eff)  # sched_reserve: n_tokens = min(cparams.n_ctx, cparams.n_ubatch)
    if n_outputs_max is not None and n_outputs_max < 0:
        raise ValueError(f"n_outputs_max must be >= 0, not {n_outputs_max}")
    n_outputs = min(n_tokens, n_outputs_max) if n_outputs_max else None  # llama-context.cpp:250, 896-898
    if len(gpus_used) > 1:
        buffers += compute_buffers_multi(meta, caches, n_tokens=n_tokens, n_outputs=n_outputs,
                                         flash_attn_on=fa_compute, device=device, unit_dev=unit_dev,
                                         offload_kqv=offload_kqv, release=release, kq_mask_f16=kq_mask_f16,
                                         pipeline_parallel=pipeline_parallel)
        notes.append(f"{n_gpus} GPUs, -sm {split_mode}: layers per device "
                     + ", ".join(f"{_buft_name(device, g)} {sum(1 for d in unit_dev[:n_all] if d == g)}"
                                 for g in gpus_used)
                     + f", output layer on {_buft_name(device, unit_dev[n_all]) if output_on_gpu else 'CPU'}; "
                     "the per-device split is read from llama.cpp's source (llama-model.cpp:1556-1614), not checked "
                     "against a multi-GPU log (the CPU oracle has one device)")
        if tensor_split is None or not any(tensor_split):
            notes.append("-ts not given: llama.cpp splits by each GPU's free memory at start-up (llama-model.cpp:"
                         "1557-1573); equal shares are assumed (identical, idle GPUs). A GPU that also drives a "
                         "display or runs other work has less free memory and gets fewer layers.")
    else:
        gdev = gpus_used[0] if gpus_used else 0
        buffers += compute_buffers(meta, caches, n_tokens=n_tokens, n_outputs=n_outputs, flash_attn_on=fa_compute,
                                   device=device,
                                   layers_on_gpu=layers_on_gpu, output_on_gpu=output_on_gpu, offload_kqv=offload_kqv,
                                   release=release, kq_mask_f16=kq_mask_f16, gpu_index=gdev)
    if len(gpus_used) > 1:
        notes.append("llama-server's --fit (on by default) keeps this split when every GPU keeps its free-memory "
                     "margin (common/fit.cpp:352-368); otherwise it changes -c, -ngl and -ts itself when they are not "
                     "given: not modelled.")
    else:
        notes.append("llama-server's --fit (on by default in recent builds) may lower -c / -ngl to fit the device; "
                     "not modelled (common/fit.cpp).")
    return LlamaCppPlan(
        release=release, architecture=meta.architecture, n_ctx=n_ctx, n_ctx_requested=n_ctx_req,
        n_ctx_seq=n_ctx_seq, n_seq_max=n_seq_max, n_stream=n_stream, n_batch=n_batch_eff, n_ubatch=n_ubatch_eff,
        kv_unified=kv_unified, flash_attn=flash_attn, device=device, n_gpu_layers=n_gpu_layers,
        layers_on_gpu=layers_on_gpu, output_on_gpu=output_on_gpu, kv_caches=caches, buffers=buffers, notes=notes, n_gpus=n_gpus,
        split_mode=split_mode, tensor_split=tensor_split, main_gpu=main_gpu, layer_devices=unit_dev[:n_all],
        output_device=unit_dev[n_all], pipeline_parallel=pipeline_parallel, fa_supported=fa_ok, fa_reason=fa_why,
        fa_enabled=(fa_compute if (not gpu or fa_ok is not None or flash_attn == "off") else None),
        tensor_overrides=[(pat, dev) for pat, dev in (tensor_overrides or [])] if gpu else [],
    )


def host_buft_name(device: str) -> str:
    """The host buffer type llama.cpp gives the CPU backend's compute buffer and the output buffer when a GPU is
    used: the first device's pinned host buffer type (src/llama-context.cpp:408-421 for the scheduler's buffers,
    :2197 for the output), named ``<backend>_Host`` (ggml-cuda.cu:1258 GGML_CUDA_NAME "_Host": CUDA_Host, ROCm_Host
    in the HIP build; ggml-vulkan.cpp:13061 Vulkan_Host); Metal has none (ggml-metal.cpp:822 NULL) and a CPU-only
    run no device, so their host buffers are the plain "CPU" type."""
    return {"CUDA": "CUDA_Host", "ROCm": "ROCm_Host", "Vulkan": "Vulkan_Host"}.get(device, "CPU")


def _buft_name(device: str, index: int = 0) -> str:
    """Device buffer names as ggml prints them for device ``index`` (ggml-cuda: "CUDA0", "CUDA1", ...;
    ggml-cuda built for HIP: "ROCm0" (ggml-cuda.h:10-11); ggml-metal: "MTL0", ggml-vulkan: "Vulkan0"); "CPU" for
    the CPU or ``index`` -1."""
    if device == "CPU" or index == CPU:
        return "CPU"
    return {"CUDA": "CUDA", "ROCm": "ROCm", "Metal": "MTL", "Vulkan": "Vulkan"}[device] + str(index)


#: The compute-buffer estimate's stated error: llama.cpp's logged figure lies within
#: ``estimate +- (COMPUTE_ERR_REL x estimate + COMPUTE_ERR_ABS)``. Why there is one: ggml-alloc packs the reserved
#: graph's tensors into one buffer per backend, best fit among the free blocks, else at the end
#: (ggml/src/ggml-alloc.c ``ggml_dyn_tallocr_alloc``), freeing a tensor when its last consumer has run; the buffer
#: is the highest offset reached, i.e. the largest set of simultaneously live tensors *plus the holes the allocation
#: order leaves*, which is not simulated here. Measured, not fitted (no term is scaled by these figures): on the CPU
#: oracle (crosscheck, 51 cases, llama-cpp-python 0.3.36) llama.cpp's buffer is 0.49 MiB below to 1.01 MiB above
#: the estimate (buffers of 30 MiB and more: 0 .. +1.4%); on the public Metal / Vulkan logs
#: (benchmarks/llamacpp_cases.py) the logged figure is 2.3% below to 0.1% above.
COMPUTE_ERR_REL = 0.03
COMPUTE_ERR_ABS = MiB
COMPUTE_LABEL = "estimated from the reserved graph's largest live tensors"
COMPUTE_SRC = (SRC + "src/llama-context.cpp:615-745 sched_reserve (worst case n_tokens = min(n_ctx, "
               "n_ubatch) :629, n_outputs = min(n_tokens, n_outputs_max = n_batch) :670, :250; the log line :740); "
               "src/llama-graph.cpp:29-45 (KQ mask [n_kv, n_tokens] per cache, f16 with flash attention); "
               "src/models/llama.cpp:232-243 (result_norm, result_output = logits [n_vocab, n_outputs] f32); "
               "ggml/src/ggml-alloc.c:202-280 (ggml_dyn_tallocr_alloc), :692 (graph outputs never freed), :718 "
               "(ggml_gallocr_alloc_graph_impl: inputs first, each tensor freed after its last consumer)")


def ffn_width(meta: GGUFMeta) -> int | None:
    """Values per token of the widest FFN activation: ``n_ff`` (``blk.*.ffn_up.weight`` ne[1]) for a dense layer,
    ``n_ff_exp x n_expert_used`` for an MoE layer (``ffn_up_exps`` ne[1]: the ``[n_ff_exp, n_expert_used, n_tokens]``
    activations of build_moe_ffn); the larger when a model has both. None without a tensor table and without the
    ``{arch}.feed_forward_length`` key."""
    widths = []
    for t in meta.tensors:
        if t.name.endswith(".ffn_up_exps.weight") and len(t.shape) >= 2 and meta.n_expert_used:
            widths.append(t.shape[1] * meta.n_expert_used)
        elif t.name.endswith(".ffn_gate_up_exps.weight") and len(t.shape) >= 2 and meta.n_expert_used:
            # fused gate and up (Gemma 4): [2 x n_ff_exp, n_expert_used, T] then their product, the same 3 x n_ff_exp
            widths.append(t.shape[1] // 2 * meta.n_expert_used)
        elif t.name.endswith(".ffn_up.weight") and len(t.shape) >= 2:
            widths.append(t.shape[1])
    if widths:
        return max(widths)
    ff = meta.kv.get(f"{meta.architecture}.feed_forward_length")
    return int(ff) if isinstance(ff, int) and ff > 0 else None


def compute_phases(meta: GGUFMeta, caches: list, *, n_tokens: int, flash_attn_on: bool, layers: bool = True,
                   output: bool = True, mask_bytes: int | None = None,
                   kq_mask_f16: bool = True, n_outputs: int | None = None) -> dict[str, dict[str, int]]:
    """The sets of tensors that are live together at the candidate peaks of the reserved graph, in bytes.

    ``n_tokens`` = T (the ubatch reserved), n_outputs = T; ``caches`` the plan's KV caches (one KQ mask of
    ``[cells, T]`` each, live through every layer: llama-graph.cpp build_attn_inp_kv / _iswa). Phases:

    * ``output``: logits f32 ``[n_vocab, T]`` (the ``result_output`` mul_mat) + 2 hidden states f32 ``[n_embd, T]``
      (its normed input and, depending on in-place reuse, the residual);
    * ``attention``: flash attention: the masks (f16) + 6 hidden-sized f32 tensors (Q, K, V views
      and copies, attention output, residual); without: KQ f32 ``[n_kv, T, n_head]`` (soft_max runs in place) + the
      f32 masks + the same 6 hidden states;
    * ``ffn``: the masks + 3 FFN activations f32 ``[n_ff, T]`` (gate, up, their product) + 2 hidden states;
    * ``mask cast`` (flash attention in builds before PR #23764, ``kq_mask_f16=False``): the f32 mask and its f16
      ``ggml_cast`` live together (6 bytes per element) + 2 hidden states.

    ``layers`` / ``output`` say whether this device runs the layers / the output layer; ``mask_bytes`` overrides
    the bytes per mask element (0: the masks are counted elsewhere). ``kq_mask_f16``: with flash attention the mask
    is created f16 (llama-graph.cpp:29-45 build_attn_inp_kq_mask, "flash attention requires an f16 mask", PR #23764
    of 2026-05-28); before, an f32 mask was cast to f16 in the graph. Raises nothing; an unknown FFN width leaves
    the ffn phase out. ``n_outputs`` (default T): the logits rows reserved, fewer when the context's
    ``n_outputs_max`` is below the ubatch (a speculative draft's context)."""
    T, E = n_tokens, meta.n_embd
    n_out = T if n_outputs is None else n_outputs
    hidden = 4 * T * E
    mask_elems = sum(c.cells * T for c in caches)
    per = mask_bytes if mask_bytes is not None else (2 if flash_attn_on else 4)
    masks = mask_elems * per
    out: dict[str, dict[str, int]] = {}
    if output and meta.n_vocab:
        out["output"] = {"logits f32 [n_vocab x n_outputs]": 4 * n_out * meta.n_vocab,
                         "2 hidden states f32 [n_embd x n_ubatch]": 2 * hidden}
    if layers:
        if flash_attn_on:
            out["attention"] = {"KQ masks (f16 for flash attention)": masks,
                                "6 hidden-sized f32 tensors (Q, K, V, attention out, residual)": 6 * hidden}
        else:
            kq = max((c.cells * T * max((meta.n_head[il] for il in c.layers), default=0) * 4 for c in caches),
                     default=0)
            out["attention"] = {"KQ f32 [n_kv x n_ubatch x n_head]": kq,
                                "KQ masks f32": mask_elems * 4 if mask_bytes is None else masks,
                                "6 hidden-sized f32 tensors (Q, K, V, attention out, residual)": 6 * hidden}
        if flash_attn_on and not kq_mask_f16 and mask_bytes is None:
            out["mask cast"] = {"KQ masks f32 and their f16 cast": mask_elems * 6,
                                "2 hidden states f32 [n_embd x n_ubatch]": 2 * hidden}
        ff = ffn_width(meta)
        if ff:
            out["ffn"] = {"KQ masks": masks, "3 FFN activations f32 [n_ff x n_ubatch]": 3 * 4 * T * ff,
                          "2 hidden states f32 [n_embd x n_ubatch]": 2 * hidden}
    return out


def _peak(phases: dict[str, dict[str, int]]) -> tuple[str, dict[str, int]]:
    if not phases:
        return "none", {}
    name = max(phases, key=lambda k: sum(phases[k].values()))
    return name, phases[name]


def compute_error_bytes(estimate: int) -> int:
    """The stated error of a compute-buffer estimate (``COMPUTE_ERR_REL`` x estimate + ``COMPUTE_ERR_ABS``)."""
    return int(COMPUTE_ERR_REL * estimate) + COMPUTE_ERR_ABS


def compute_buffers(meta: GGUFMeta, caches: list, *, n_tokens: int, flash_attn_on: bool, device: str,
                    layers_on_gpu: list[int], output_on_gpu: bool, offload_kqv: bool = True,
                    release: str = RELEASE_0_3_36, kq_mask_f16: bool | None = None,
                    n_outputs: int | None = None, gpu_index: int = 0) -> list[Buffer]:
    """``<dev> compute buffer size`` per device, estimated from the reserved graph's largest live tensors.

    llama.cpp reserves the worst-case graph (``sched_reserve``: n_tokens = min(n_ctx, n_ubatch) = ``n_tokens``,
    n_outputs = n_tokens) and ggml-alloc gives each backend one buffer, the peak of its live tensors
    (:func:`compute_phases`). Per device:

    * ``device == "CPU"``: one ``CPU`` buffer, the largest phase;
    * a GPU with every layer and the output on it: the GPU buffer is its largest phase; the host (``CPU``) buffer
      holds the graph inputs set on the host, all live at once: the KQ masks ``[cells, T]`` per cache (f16 with
      flash attention from PR #23764, ``kq_mask_f16``; f32 before it and without flash attention), the token
      embeddings f32 ``[n_embd, T]`` (get_rows on token_embd, which stays on the CPU) and the token / position /
      output-id inputs (3 x 4 x T bytes);
    * partial offload: the GPU buffer also holds one copied hidden state, the host buffer adds the largest phase of
      what runs on the CPU (its layers' attention and FFN, the output layer if it stays there).

    Every buffer is an estimate: ``error_bytes`` = :func:`compute_error_bytes`, ``terms`` its parts, ``note`` the
    label. Returns a ``bytes=None`` buffer saying why for what is not modelled (no vocabulary size; the KV cache
    kept on the host with --no-kv-offload). ``n_outputs`` (default ``n_tokens``): the logits rows reserved
    (:func:`compute_phases`); below ``n_tokens`` (a draft's context) the stated error was not measured. Units:
    bytes."""
    T = n_tokens
    gpu = device != "CPU"
    dev_buft = _buft_name(device, gpu_index)
    if kq_mask_f16 is None:
        kq_mask_f16 = release == RELEASE_0_3_36
    if not meta.n_vocab:
        return [Buffer(kind="compute", buft=dev_buft, bytes=None, source=COMPUTE_SRC,
                       note="not modelled: the vocabulary size (logits) is unknown")]
    if gpu and not offload_kqv:
        return [Buffer(kind="compute", buft=dev_buft, bytes=None, source=COMPUTE_SRC,
                       note="not modelled: with --no-kv-offload attention runs on the host")]

    def make(buft: str, phase: str, terms: dict[str, int], extra: str = "") -> Buffer:
        total = sum(terms.values())
        err = compute_error_bytes(total)
        return Buffer(kind="compute", buft=buft, bytes=total, error_bytes=err, terms=terms, source=COMPUTE_SRC,
                      note=(f"{COMPUTE_LABEL} (peak: {phase}); stated error +- {err / MiB:.2f} MiB "
                            f"({COMPUTE_ERR_REL:.0%} + {COMPUTE_ERR_ABS / MiB:.0f} MiB: allocation holes are not "
                            f"simulated; measured on the CPU oracle and public logs){extra}"))

    if not gpu:
        phase, terms = _peak(compute_phases(meta, caches, n_tokens=T, flash_attn_on=flash_attn_on,
                                            kq_mask_f16=kq_mask_f16, n_outputs=n_outputs))
        return [make("CPU", phase, terms)]
    n_all = meta.n_layer_all
    all_on_gpu = len(layers_on_gpu) == n_all and output_on_gpu
    phase, terms = _peak(compute_phases(meta, caches, n_tokens=T, flash_attn_on=flash_attn_on,
                                        layers=bool(layers_on_gpu), output=output_on_gpu, kq_mask_f16=kq_mask_f16,
                                        n_outputs=n_outputs))
    extra = ""
    if not all_on_gpu and (layers_on_gpu or output_on_gpu):
        terms = dict(terms) | {"hidden state copied between devices": 4 * T * meta.n_embd}
        extra = "; partial offload: the split between the devices is not checked against llama.cpp"
    out = []
    if layers_on_gpu or output_on_gpu:
        out.append(make(dev_buft, phase, terms, extra))
    mask_elems = sum(c.cells * T for c in caches)
    f16 = flash_attn_on and kq_mask_f16
    host = {f"KQ masks {'f16' if f16 else 'f32'} [n_kv x n_ubatch] set on the host": (2 if f16 else 4) * mask_elems,
            "token embeddings f32 [n_embd x n_ubatch] (get_rows on the CPU's token_embd)": 4 * T * meta.n_embd,
            "tokens, positions, output ids (i32 x n_ubatch each)": 3 * 4 * T}
    host_phase = "graph inputs"
    cpu_layers = len(layers_on_gpu) < n_all
    if cpu_layers or not output_on_gpu:
        p2, t2 = _peak(compute_phases(meta, caches, n_tokens=T, flash_attn_on=flash_attn_on, layers=cpu_layers,
                                      output=not output_on_gpu, mask_bytes=0, n_outputs=n_outputs))
        host |= {f"{k} (on the CPU)": v for k, v in t2.items()}
        host_phase = f"graph inputs + {p2} on the CPU"
    out.append(make(host_buft_name(device), host_phase, host, extra if not all_on_gpu else ""))
    return out


#: ggml-backend.cpp:772 GGML_SCHED_MAX_COPIES: copies of each split input the scheduler keeps with pipeline
#: parallelism (ggml_backend_sched_new(..., parallel=true), :1888).
SCHED_MAX_COPIES = 4
COMPUTE_MULTI_SRC = (COMPUTE_SRC + "; several GPUs: one compute buffer per backend (llama-context.cpp:745-755), "
                     "split inputs copied into the consuming backend's buffer (ggml-backend.cpp:1375-1395), with "
                     "pipeline parallelism n_copies = 4 of each split input and each graph input, kept to the end "
                     "(:1379-1388, :1411-1430, llama-context.cpp:430-457)")


def compute_buffers_multi(meta: GGUFMeta, caches: list, *, n_tokens: int, flash_attn_on: bool, device: str,
                          unit_dev: list[int], offload_kqv: bool = True, release: str = RELEASE_0_3_36,
                          kq_mask_f16: bool | None = None, n_outputs: int | None = None,
                          pipeline_parallel: bool = False) -> list[Buffer]:
    """``CUDA<i> compute buffer size`` per GPU and the host's, when the layers are spread over several GPUs
    (``unit_dev``: each layer's device, then the output layer's; -1 = CPU). An estimate built like
    :func:`compute_buffers`, per device:

    * each GPU: the largest phase (:func:`compute_phases`) of what it runs (its layers; the output layer on the GPU
      that holds it), plus, for every GPU but the first along the layers, the hidden state f32 ``[n_embd, T]``
      copied in from the previous device;
    * with pipeline parallelism (``pipeline_parallel``: several GPUs, every layer offloaded, -sm layer) the
      scheduler keeps ``SCHED_MAX_COPIES`` = 4 copies of every split input (ggml-backend.cpp:1379-1388): 3 more
      copies of the KQ masks, the incoming hidden state and the positions on each GPU, and 4 copies of the graph
      inputs set on the host (:1411-1430);
    * the host (``CPU``) buffer: the graph inputs as in :func:`compute_buffers` and the largest phase of what
      runs on the CPU (layers / output left there).

    These are *not checked against a llama.cpp log* (the CPU oracle has one device; the public multi-GPU logs are
    2024 builds or --fit runs with hand-made quants): the stated error is :func:`compute_error_bytes` plus the whole
    pipeline-parallel copies term. Returns ``bytes=None`` buffers for what :func:`compute_buffers` does not model
    (no vocabulary size, --no-kv-offload). Units: bytes."""
    T = n_tokens
    n_all = meta.n_layer_all
    if kq_mask_f16 is None:
        kq_mask_f16 = release == RELEASE_0_3_36
    gpus = sorted({d for d in unit_dev if d != CPU})
    if not meta.n_vocab or not offload_kqv:
        why = ("not modelled: the vocabulary size (logits) is unknown" if not meta.n_vocab else
               "not modelled: with --no-kv-offload attention runs on the host")
        return [Buffer(kind="compute", buft=_buft_name(device, g), bytes=None, source=COMPUTE_MULTI_SRC, note=why)
                for g in gpus]
    n_copies = SCHED_MAX_COPIES if pipeline_parallel else 1
    f16 = flash_attn_on and kq_mask_f16
    mask_bytes = (2 if f16 else 4) * sum(c.cells * T for c in caches)
    hidden = 4 * T * meta.n_embd
    first_gpu = next(d for d in unit_dev if d != CPU)
    out = []

    def make(buft: str, phase: str, terms: dict[str, int], uncertain: int) -> Buffer:
        total = sum(terms.values())
        err = compute_error_bytes(total) + uncertain
        return Buffer(kind="compute", buft=buft, bytes=total, error_bytes=err, terms=terms, source=COMPUTE_MULTI_SRC,
                      note=(f"{COMPUTE_LABEL} (peak: {phase}); several GPUs: from llama.cpp's source, not checked "
                            f"against a log; stated error +- {err / MiB:.2f} MiB ({COMPUTE_ERR_REL:.0%} + "
                            f"{COMPUTE_ERR_ABS / MiB:.0f} MiB" + (" + the pipeline-parallel copies" if uncertain else "")
                            + ")"))

    for g in gpus:
        has_layers = any(d == g for d in unit_dev[:n_all])
        has_output = unit_dev[n_all] == g
        phase, terms = _peak(compute_phases(meta, caches, n_tokens=T, flash_attn_on=flash_attn_on, layers=has_layers,
                                            output=has_output, kq_mask_f16=kq_mask_f16, n_outputs=n_outputs))
        terms = dict(terms)
        if g != first_gpu:
            terms["hidden state f32 [n_embd x n_ubatch] copied in from the previous device"] = hidden
        extra = 0
        if n_copies > 1:
            extra = (n_copies - 1) * ((mask_bytes if has_layers else 0) + hidden + 4 * T)
            terms[f"pipeline parallelism: {n_copies - 1} more copies of the split inputs (KQ masks, hidden state, "
                  "positions)"] = extra
        out.append(make(_buft_name(device, g), phase, terms, extra))
    host = {f"KQ masks {'f16' if f16 else 'f32'} [n_kv x n_ubatch] set on the host": mask_bytes * n_copies,
            "token embeddings f32 [n_embd x n_ubatch] (get_rows on the CPU's token_embd)": hidden,
            "tokens, positions, output ids (i32 x n_ubatch each)": 3 * 4 * T * n_copies}
    host_phase = "graph inputs" + (f" x {n_copies} copies" if n_copies > 1 else "")
    cpu_layers = any(d == CPU for d in unit_dev[:n_all])
    cpu_output = unit_dev[n_all] == CPU
    if cpu_layers or cpu_output:
        p2, t2 = _peak(compute_phases(meta, caches, n_tokens=T, flash_attn_on=flash_attn_on, layers=cpu_layers,
                                      output=cpu_output, mask_bytes=0, n_outputs=n_outputs))
        host |= {f"{k} (on the CPU)": v for k, v in t2.items()}
        host_phase += f" + {p2} on the CPU"
    host_extra = (n_copies - 1) * (mask_bytes + 3 * 4 * T) if n_copies > 1 else 0
    out.append(make(host_buft_name(device), host_phase, host, host_extra))
    return out


def _alloc(device: str, type_name: str, ne0: int, nbytes: int) -> int:
    """Bytes a tensor takes in a buffer of ``device``: ``GGML_PAD(alloc_size, alignment)``
    (ggml/src/ggml-alloc.c:1182-1185). CPU: alignment 32 (ggml-impl.h:44, ggml-backend.cpp:2474-2476).
    CUDA: alignment 128 and quantized tensors get one extra row of ``512 - ne0 % 512`` values
    (ggml-cuda.cu:897-920, MATRIX_ROW_PADDING common.cuh:186); ROCm is the same code (``CUDA_LIKE``). Vulkan:
    ``ggml_nbytes`` (ggml-vulkan.cpp:13044-13048) padded to the device's minStorageBufferOffsetAlignment (:13034-13037,
    not in the catalog: the CPU's 32 is used; callers label it). Metal: not modelled (returns the CPU rule; callers
    label it)."""
    if device in CUDA_LIKE:
        size = nbytes
        if type_name.lower() not in ("f32", "f16", "bf16", "i8", "i16", "i32", "i64", "f64") and ne0 % 512:
            size += _row_bytes_any(type_name, 512 - ne0 % 512)
        return _pad(size, 128)
    return _pad(nbytes, 32)


def _row_bytes_any(type_name: str, n: int) -> int:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    t = GGMLQuantizationType[type_name.upper()]
    block, size = GGML_QUANT_SIZES[t]
    return n // block * size


#: CPU_REPACK (ggml/src/ggml-cpu/repack.cpp:4925-5141, ggml_repack_get_optimal_repack_type): weight type ->
#: [(ggml-cpu build features required, ne[1] multiple)], first match wins. Features are the ggml-cpu build's
#: (ggml_cpu_has_avx2() etc. are compile-time): "avx2", "avx512", "neon", "dotprod", "i8mm". SVE and RISC-V
#: variants are not modelled.
REPACK_RULES: dict[str, list[tuple[frozenset, int]]] = {
    "Q4_0": [(frozenset({"avx2"}), 8), (frozenset({"neon", "i8mm"}), 4), (frozenset({"neon", "dotprod"}), 4)],
    "Q4_K": [(frozenset({"avx2"}), 8), (frozenset({"neon", "i8mm"}), 8), (frozenset({"neon", "dotprod"}), 8)],
    "Q2_K": [(frozenset({"avx512"}), 8)],
    "Q5_K": [(frozenset({"neon", "i8mm"}), 8), (frozenset({"neon", "dotprod"}), 8)],
    "Q6_K": [(frozenset({"neon", "i8mm"}), 8), (frozenset({"neon", "dotprod"}), 8)],
    "IQ4_NL": [(frozenset({"avx2"}), 8), (frozenset({"neon", "dotprod"}), 4)],
    "MXFP4": [(frozenset({"avx2"}), 8), (frozenset({"neon", "dotprod"}), 4)],
    "Q8_0": [(frozenset({"neon", "i8mm"}), 4), (frozenset({"neon", "dotprod"}), 4)],
    "Q1_0": [(frozenset({"neon", "i8mm"}), 4), (frozenset({"neon", "dotprod"}), 4)],
}
CPU_FEATURES = frozenset({"avx2", "avx512", "neon", "dotprod", "i8mm", "amx_int8"})

#: The AMX buffer type (ggml/src/ggml-cpu/amx/amx.cpp; built with __AMX_INT8__ and __AVX512VNNI__, the
#: "AMX_INT8 = 1" of llama_print_system_info) comes first in ggml-cpu's extra buffer types
#: (ggml-cpu.cpp:42-66: AMX, then KleidiAI, then CPU_REPACK). It takes a MUL_MAT weight (not MUL_MAT_ID) when
#: ``ne[1] % 32 == 0`` (op->ne[0] % (TILE_N * 2), amx.cpp:161) and ``ne[0]`` is a multiple of the type's
#: alignment (amx.cpp:163-185): type -> (ne[0] multiple, extra bytes per block in the packed row of
#: get_row_size, amx/mmq.cpp:245-260: Q8_0 stores an int32 compensation, Q4_K / Q5_K 4 bytes, IQ4_XS 2 bytes).
#: F16 is taken unpacked (ggml_nbytes, mmq.cpp:2281-2286).
AMX_RULES: dict[str, tuple[int, int]] = {
    "Q4_0": (32, 0), "Q4_1": (32, 0), "Q8_0": (32, 4), "Q4_K": (256, 4), "Q5_K": (256, 4), "Q6_K": (256, 0),
    "IQ4_XS": (256, 2), "F16": (16, 0),
}


#: Weights outside ``blk.N.`` that feed a MUL_MAT: the output layer and Gemma 3n / 4's per-layer model projection
#: (llama-arch.cpp:922 ``LLM_TENSOR_PER_LAYER_MODEL_PROJ`` {LAYER_REPEATING, GGML_OP_MUL_MAT}).
_MATMUL_GLOBALS = ("output.weight", "per_layer_model_proj.weight")


def amx_takes(t) -> bool:
    """Whether a CPU-resident weight goes to the AMX buffer (see ``AMX_RULES``): a 2-D layer matrix or
    output.weight (MUL_MAT; token_embd feeds GET_ROWS, 3-D experts MUL_MAT_ID)."""
    if t.ggml_type not in AMX_RULES or len(t.shape) != 2 or not t.name.endswith(".weight"):
        return False
    if not (t.name.startswith("blk.") or t.name in _MATMUL_GLOBALS) or "_norm" in t.name \
            or "ffn_gate_inp" in t.name:
        return False
    multiple, _ = AMX_RULES[t.ggml_type]
    return t.shape[1] % 32 == 0 and t.shape[0] % multiple == 0


def amx_alloc_bytes(t) -> int:
    """``ggml_backend_amx_get_alloc_size`` (amx/mmq.cpp:2267-2287): rows x packed row size."""
    if t.ggml_type == "F16":
        return t.n_bytes
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[t.ggml_type]]
    kb = t.shape[0] // block
    rows = t.n_elements // t.shape[0]
    return rows * kb * (size + AMX_RULES[t.ggml_type][1])


def repacks(t, features: frozenset) -> bool:
    """Whether a CPU-resident weight goes to the CPU_REPACK buffer: it feeds a MUL_MAT (2-D layer matrix or
    output.weight) or MUL_MAT_ID (3-D ``*_exps``) (repack.cpp:5191-5215; token_embd feeds GET_ROWS) and its
    type has a repacked layout for these features with ``ne[1]`` a multiple of the interleave."""
    if t.name == "token_embd.weight" or t.ggml_type not in REPACK_RULES:
        return False
    dims = len(t.shape)
    if not t.name.endswith(".weight"):
        return False
    is_matmul = (dims == 2 and (t.name.startswith("blk.") or t.name in _MATMUL_GLOBALS)) or \
        (dims == 3 and t.name.endswith("_exps.weight"))
    if not is_matmul:
        return False
    for need, multiple in REPACK_RULES[t.ggml_type]:
        if need <= features:
            return t.shape[1] % multiple == 0
    return False


_BLK = re.compile(r"^blk\.(\d+)\.")
_OUTPUT_TENSORS = ("output.weight", "output_norm.weight", "output_norm.bias", "output.bias")


def tensor_layer(name: str, n_all: int, meta: GGUFMeta | None = None) -> int | str:
    """Which placement unit a GGUF tensor belongs to: a layer index, ``"input"`` (token_embd and other
    non-layer tensors, always on the CPU: llama-model.cpp:1603-1605) or ``"output"`` (llama-model.cpp:1614).

    With ``meta`` of a Gemma 4 model, the tensors without a ``blk.N.`` prefix that llama.cpp creates as layer
    tensors (LLM_TENSOR_LAYER_REPEATING, llama-arch.cpp:743, 922-923; the buffer of the layer number they are
    created with, llama-model-loader.cpp:1217-1227) go to that layer: ``per_layer_model_proj`` and
    ``per_layer_proj_norm`` to layer 0 (src/models/gemma4.cpp:57-59), ``rope_freqs`` to the first full-attention
    layer (:95-99; later full layers share it, TENSOR_DUPLICATED). (Llama's ``rope_freqs``, made with layer 0, is
    still counted on the CPU here.)"""
    m = _BLK.match(name)
    if m:
        return int(m.group(1))
    if meta is not None and meta.architecture == "gemma4":
        if name in ("per_layer_model_proj.weight", "per_layer_proj_norm.weight"):
            return 0
        if name == "rope_freqs.weight":
            pattern = meta.sliding_window_pattern
            if isinstance(pattern, list):
                return next((il for il, f in enumerate(pattern) if not f), 0)
    if name in _OUTPUT_TENSORS or name.startswith("output"):
        return "output"
    return "input"


def override_device(name: str, overrides: list) -> int | None:
    """The device a ``-ot`` override sends tensor ``name`` to (the first ``(compiled regex, device)`` whose pattern
    ``re.search``-es the name: src/llama-model-loader.cpp:1234-1258), or None when none matches."""
    for pat, dev in overrides:
        if pat.search(name):
            return dev
    return None


def weight_device(name: str, unit: int | str, layer_devices: list[int], output_device: int, overrides: list) -> int:
    """The device whose buffer holds weight ``name`` of placement ``unit`` (:func:`tensor_layer`): the CPU for the
    input layer (llama-model.cpp:1603-1605), else its layer's or the output layer's device, unless a ``-ot``
    override (:func:`override_device`, compiled patterns) sends it elsewhere (src/llama-model-loader.cpp:1234-1258).
    ``CPU`` is -1."""
    if unit == "input":
        return CPU
    dev = output_device if unit == "output" else layer_devices[unit]
    if overrides:
        od = override_device(name, overrides)
        if od is not None:
            return od
    return dev


def model_buffers(meta: GGUFMeta, *, device: str, n_gpu_layers: int = -1, n_gpus: int = 1, split_mode: str = "layer",
                  tensor_split: list[float] | None = None, main_gpu: int = 0, use_mmap: bool = True) -> list[Buffer]:
    """The model buffers alone, as :func:`plan` makes them for these placement settings (its :func:`placement` and
    ``_model_buffers``, without overrides or CPU repacking): they depend on none of the context settings."""
    gpu = device != "CPU"
    if gpu:
        pl = placement(meta.n_layer_all, n_gpu_layers, n_gpus=n_gpus, tensor_split=tensor_split,
                       split_mode=split_mode, main_gpu=main_gpu)
        unit_dev = [*pl.layers, pl.output]
    else:
        unit_dev = [CPU] * (meta.n_layer_all + 1)
    return _model_buffers(meta, unit_dev, device, use_mmap, None, [], [])


def _model_buffers(meta: GGUFMeta, unit_dev: list[int], device: str,
                   use_mmap: bool, cpu_features: frozenset | None, notes: list[str],
                   overrides: list | None = None) -> list[Buffer]:
    """Model weight buffers per buffer type (llama-model.cpp:1838-1900, 1927-1932).

    With mmap, a buffer type that can wrap host memory (the CPU; Metal) gets ``<buft>_Mapped``: the file
    range from its first to the end of its last tensor (llama-model-loader.cpp:1449-1464), gaps included.
    Otherwise (CUDA, or --no-mmap) tensors are allocated: the sum of ``_alloc`` sizes. A tied output (no
    output.weight) is token_embd duplicated into the output layer's buffer (TENSOR_DUPLICATED,
    llama-model-loader.cpp:1162-1168). ``unit_dev``: the device of each layer and (last) of the output layer
    (:func:`placement`); each GPU gets its own buffer (CUDA0, CUDA1, ...)."""
    n_all = meta.n_layer_all
    output_on_gpu = unit_dev[n_all] != CPU
    groups: dict[str, list] = {}
    for t in meta.tensors:
        unit = tensor_layer(t.name, n_all, meta)
        if isinstance(unit, int) and unit >= n_all:
            raise NotModelled(f"tensor {t.name} names layer {unit} of {n_all}", field="model")
        where = _buft_name(device, weight_device(t.name, unit, unit_dev, unit_dev[n_all], overrides))
        groups.setdefault(where, []).append(t)
    if meta.tensor("output.weight") is None and meta.tensor("token_embd.weight") is not None:
        dup_where = _buft_name(device, unit_dev[n_all])
        if dup_where != "CPU":
            groups.setdefault(dup_where, []).append(meta.tensor("token_embd.weight"))
    dup_cpu = None
    if meta.tensor("output.weight") is None and meta.tensor("token_embd.weight") is not None and not output_on_gpu:
        # On the CPU the output layer's copy feeds a MUL_MAT, so an AMX / CPU_REPACK buffer may take it and load
        # token_embd's data a second time there (crosscheck cases qwen3-tied, quant-gemma3-Q8_0); left in the
        # plain CPU buffer it shares token_embd's mapped range.
        dup_cpu = meta.tensor("token_embd.weight").model_copy(update={"name": "output.weight"})

    out = []
    cpu = groups.get("CPU", [])
    # The CPU buffer-type list (llama-model.cpp:1078-1136) starts with the GPU's host buffer type (CUDA_Host,
    # Vulkan_Host; Metal has none), so with such a GPU no CPU weight reaches CPU_REPACK; with mmap the host
    # type is swapped for the plain CPU type (llama-model-loader.cpp:1269-1277).
    host_first = device in ("CUDA", "ROCm", "Vulkan")
    if cpu and not host_first:
        if cpu_features is None:
            candidates = [t for t in cpu if (t.ggml_type in REPACK_RULES or t.ggml_type in AMX_RULES)
                          and t.name != "token_embd.weight"]
            if candidates:
                notes.append(
                    f"{len(candidates)} CPU weights of types {sorted({t.ggml_type for t in candidates})} may be "
                    "repacked into an AMX or CPU_REPACK buffer depending on the ggml-cpu build (give "
                    "cpu_features); modelled without repacking")
        else:
            pool = cpu + ([dup_cpu] if dup_cpu is not None else [])
            if "amx_int8" in cpu_features:
                amx = [t for t in pool if amx_takes(t)]
                if amx:
                    groups["AMX"] = amx
                    pool = [t for t in pool if not amx_takes(t)]
            moved = [t for t in pool if repacks(t, cpu_features)]
            if moved:
                groups["CPU_REPACK"] = moved
                pool = [t for t in pool if not repacks(t, cpu_features)]
            groups["CPU"] = [t for t in pool if t is not dup_cpu]
    if cpu and host_first and not use_mmap:
        groups[f"{device}_Host"] = groups.pop("CPU")
    for where, tensors in sorted(groups.items()):
        if not tensors:
            continue
        mapped = use_mmap and where in ("CPU", "MTL0")
        if mapped:
            name = f"{where}_Mapped"
            total = 0
            for idx in sorted({t.file_index for t in tensors}):
                ts = [t for t in tensors if t.file_index == idx]
                total += max(t.offset + t.n_bytes for t in ts) - min(t.offset for t in ts)
            out.append(Buffer(kind="model", buft=name, bytes=total,
                              source=SRC + "src/llama-model.cpp:1855-1871, src/llama-model-loader.cpp:1449-1464"))
        else:
            dev_kind = next((k for k in CUDA_LIKE if where.startswith(k) and where[len(k):].isdigit()), "CPU")
            if where == "AMX":  # ggml-alloc pads each amx_alloc_bytes to the buffer's 32-byte alignment
                total = sum(_pad(amx_alloc_bytes(t), 32) for t in tensors)
            else:
                total = sum(_alloc(dev_kind, t.ggml_type, t.shape[0] if t.shape else 1, t.n_bytes) for t in tensors)
            note = ""
            if where.startswith(("Vulkan", "MTL")) and not where.endswith("_Host"):
                note = f"{where} alignment rules not modelled; CPU's 32-byte alignment used"
            out.append(Buffer(kind="model", buft=where, bytes=total, note=note,
                              source=SRC + "src/llama-model.cpp:1872-1890, ggml/src/ggml-alloc.c:1168-1200"))
    return out


# ---------------------------------------------------------------- Ollama


class OllamaDefaults(BaseModel):
    num_ctx: int
    num_parallel: int
    kv_cache_type: str
    flash_attention: Literal["on", "off", "auto"]
    kv_size: int  # cells llama.cpp is asked for: num_ctx x num_parallel
    sources: dict[str, str]


OLLAMA_GRAPH_SRC = ("ollama fs/ggml/ggml.go:601-910 GraphSize and llm/server.go:557-664 at f63eea3d (the parent of "
                    "9db4bdbad, 2026-05-29, which removed it: v0.30.0 runs llama-server and reads its logged buffers, "
                    "llm/llama_server.go memoryParsingWriter)")


def ollama_graph_size(meta: GGUFMeta, *, num_ctx: int, num_parallel: int = 1, kv_cache_type: str = "f16",
                      num_batch: int = 512, metal: bool = False) -> dict | None:
    """Ollama's own estimate of the compute graph (releases before 0.30.0), which its scheduler reserved on every GPU
    it placed layers on when deciding the offload (llm/server.go:664 ``Graph = max(graphPartialOffload,
    graphFullOffload)``): ``GraphSize(context=num_ctx, batch=min(num_batch, num_ctx), numParallel, kvCacheType,
    flashAttention)`` of fs/ggml/ggml.go, transcribed for the architectures whose case is written here ("llama"
    dense and with ``ffn_gate_exps``, "qwen2", "gemma"/"gemma2") and the default of llm/server.go:631-641
    (``gqa x kvTotal / 6``) for the others that have no case in the switch. On Metal the partial-offload graph is
    the full one (server.go:643-646). (Flash attention only enters the gpt-oss case, not transcribed.)
    Returns ``{"partial_bytes", "full_bytes", "reserved_bytes", "source"}`` or None for an architecture with a case
    not transcribed here (mllama, command-r, phi2, stablelm, deepseek2, chatglm, gemma3n, llama with
    ``ffn_gate.0``) and for gemma3 / gpt-oss, which Ollama runs on its own Go engine ("Gemma3 always uses the Ollama
    engine", ggml.go:745-746), whose graph is measured, not estimated (the lcpp-026 log). Units: bytes."""
    arch = meta.architecture
    if arch in ("mllama", "command-r", "phi2", "stablelm", "deepseek2", "chatglm", "gemma3n", "gemma3",
                "gpt-oss") or \
            meta.tensor("blk.0.ffn_gate.0.weight") is not None or not meta.n_vocab or not meta.n_head:
        return None
    context = num_ctx * num_parallel  # ggml.go:602
    batch = min(num_batch, num_ctx)  # llm/server.go:173
    embedding, vocab = meta.n_embd, meta.n_vocab
    heads, heads_min = max(meta.n_head), min(meta.n_head)
    heads_kv, heads_kv_min = max(meta.n_head_kv), min(meta.n_head_kv) or 1
    emb_heads = embedding // heads_min if heads_min else 0  # EmbeddingHeadCountMax
    hk = meta.head_dim_k or emb_heads
    hv = meta.head_dim_v or emb_heads
    per = {"q8_0": 1.0, "q4_0": 0.5, "f32": 4.0}.get(kv_cache_type, 2.0)  # ggml.go:912-923
    kv_total = sum(int(context * (hk + hv) * meta.n_head_kv[i] * per) for i in range(meta.n_layer_all)
                   if meta.n_head[i] > 0 and meta.n_head_kv[i] > 0)  # ggml.go:631-660
    full = partial = 0
    if arch in ("llama", "llama4"):  # ggml.go:665-692
        full = max(4 * batch * (1 + 4 * embedding + context * (1 + heads)), 4 * batch * (embedding + vocab))
        partial = 4 * batch * embedding + max(
            4 * batch * (1 + embedding + max(context, embedding)) + embedding * embedding * 9 // 16
            + 4 * context * (batch * heads + emb_heads * heads_kv),
            4 * batch * (embedding + vocab) + embedding * vocab * 105 // 128)
        exps = meta.tensor("blk.0.ffn_gate_exps.weight")
        if exps is not None:
            ff = int(meta.kv.get(f"{arch}.feed_forward_length") or 0)
            partial = max(3 * exps.n_bytes
                          + 4 * batch * (2 * ff + heads_kv + embedding + context + emb_heads * heads_kv),
                          4 * (context * batch * heads + context * emb_heads * heads_kv + batch * 1024
                               + emb_heads * heads_kv * batch))
    elif arch in ("gemma", "gemma2"):  # ggml.go:727-738
        full = max(4 * batch * (embedding + vocab),
                   4 * batch * (2 + context + context * heads + 2 * embedding + 2 * hk * heads))
        partial = max(4 * embedding * batch + embedding * vocab * 105 // 128 + 4 * vocab * batch,
                      4 * batch * (2 * embedding + 1 + 2 * hk * heads + context + context * heads)
                      + 4 * hk * context * 8 + embedding * hk * heads * 9 // 16)
    elif arch == "qwen2":  # ggml.go:768-777
        full = max(4 * batch * (embedding + vocab), 4 * batch * (1 + 2 * embedding + context + context * heads))
        partial = max(4 * batch * (embedding + vocab) + embedding * vocab * 105 // 128,
                      4 * (batch * (1 + 2 * embedding + context * (1 + heads)) + embedding * (1 + context)))
    if partial == 0:  # llm/server.go:631-641
        partial = (heads // heads_kv_min) * kv_total // 6
    if full == 0:
        full = partial
    if metal:
        partial = full
    return {"partial_bytes": partial, "full_bytes": full, "reserved_bytes": max(partial, full),
            "source": OLLAMA_GRAPH_SRC}


def ollama_defaults(*, total_vram_gib: float, num_ctx: int | None = None, num_parallel: int | None = None,
                    kv_cache_type: str | None = None, flash_attention: bool | None = None,
                    gpu_overhead_gib: float = 0.0, n_gpus: int = 1) -> OllamaDefaults:
    """Ollama's defaults for one model load, recent releases (0.19+, the "vram-based default context").

    * ``num_ctx`` (``OLLAMA_CONTEXT_LENGTH``, default 0 = automatic; Modelfile ``PARAMETER num_ctx``): when
      unset, ollama server/routes.go (``Serve``) sums ``TotalMemory - OLLAMA_GPU_OVERHEAD`` over the GPUs and
      picks 262144 from 47 GiB, 32768 from 23 GiB, else 4096 ("slightly lower thresholds (47/23 GiB vs. 48/24
      GiB)" than docs/context-length.mdx states); it logs ``msg="vram-based default context" total_vram=...
      default_num_ctx=...``. ``total_vram_gib`` is the per-GPU total Ollama reports, ``n_gpus`` how many.
    * ``num_parallel``: ``NumParallel = Uint("OLLAMA_NUM_PARALLEL", 1)`` (ollama envconfig/config.go). Ollama
      asks llama.cpp for ``KvSize = num_ctx x num_parallel`` cells (server/sched.go
      ``req.opts.NumCtx = req.origNumCtx * p``; the runner's load request logs it as ``KvSize``, e.g.
      ``Parallel:32 KvSize:1048576`` for num_ctx 32768 in a public issue log).
    * ``kv_cache_type`` (``OLLAMA_KV_CACHE_TYPE``): f16 when empty (envconfig/config.go AsMap: "Quantization
      type for the K/V cache (default: f16)"); a quantized type needs flash attention.
    * ``flash_attention`` (``OLLAMA_FLASH_ATTENTION``): unset = auto (the runner's load request shows
      ``FlashAttention:Auto``; the new engine logs "enabling flash attention" for supported models).
    Raises ``ValueError`` naming the field for a negative or zero value."""
    if total_vram_gib < 0 or gpu_overhead_gib < 0 or n_gpus < 0:
        raise ValueError("total_vram_gib, gpu_overhead_gib and n_gpus must be >= 0")
    sources = {}
    if num_ctx is None:
        total = n_gpus * (total_vram_gib - gpu_overhead_gib)
        num_ctx = 262144 if total >= 47 else 32768 if total >= 23 else 4096
        sources["num_ctx"] = ("ollama server/routes.go Serve: sum(TotalMemory - OLLAMA_GPU_OVERHEAD) >= 47 GiB "
                              "-> 262144, >= 23 GiB -> 32768, else 4096")
    else:
        sources["num_ctx"] = "given"
    if num_ctx <= 0:
        raise ValueError("num_ctx must be > 0")
    if num_parallel is None:
        num_parallel = 1
        sources["num_parallel"] = 'ollama envconfig/config.go: NumParallel = Uint("OLLAMA_NUM_PARALLEL", 1)'
    else:
        sources["num_parallel"] = "given"
    if num_parallel <= 0:
        raise ValueError("num_parallel (OLLAMA_NUM_PARALLEL) must be > 0")
    kv = (kv_cache_type or "f16").lower()
    sources["kv_cache_type"] = "ollama envconfig/config.go (OLLAMA_KV_CACHE_TYPE default f16)" \
        if kv_cache_type is None else "given"
    if kv not in KV_CACHE_TYPES:
        raise ValueError(f"kv_cache_type (OLLAMA_KV_CACHE_TYPE): one of {', '.join(KV_CACHE_TYPES)}, not {kv!r}")
    fa = "auto" if flash_attention is None else ("on" if flash_attention else "off")
    sources["flash_attention"] = "runner load request FlashAttention:Auto when OLLAMA_FLASH_ATTENTION is unset" \
        if flash_attention is None else "given"
    return OllamaDefaults(num_ctx=num_ctx, num_parallel=num_parallel, kv_cache_type=kv, flash_attention=fa,
                          kv_size=num_ctx * num_parallel, sources=sources)
