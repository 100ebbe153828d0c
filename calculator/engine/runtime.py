"""vLLM release rules that change what the startup log says, and the runtime overheads we model.

Each rule names the release it comes from. Overhead constants (activation peak, non-torch memory,
CUDA-graph pool) are fitted to the public startup logs in ``../shared/cases/vllm_ground_truth.json``
(``benchmarks/memory_cases.py`` prints the fit and its residuals); they are labelled as fits wherever
they appear.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import EngineInputError


def parse_version(text: str) -> tuple[int, int, int]:
    """``"0.32.0"`` → ``(0, 32, 0)``; suffixes (``rc1``, ``.post1``, ``+cpu``) are ignored.

    Raises:
        EngineInputError: not a ``MAJOR.MINOR[.PATCH]`` version.
    """
    m = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    if not m:
        raise EngineInputError("vllm_version", f"expected a release such as 0.32.0, got {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def supports_release(text: str) -> bool:
    """Whether the engine has memory rules for this vLLM release: the V1 engine's (0.11 onwards; the
    compat data starts there too)."""
    try:
        return parse_version(text) >= (0, 11, 0)
    except EngineInputError:
        return False


@dataclass(frozen=True)
class ReleaseRules:
    """What a vLLM release does differently, for the parts the engine predicts."""

    version: tuple[int, int, int]

    @property
    def label(self) -> str:
        return ".".join(map(str, self.version))

    @property
    def default_gpu_memory_utilization(self) -> float:
        """0.92 from 0.32 (``vllm/config/cache.py:102``), 0.9 before."""
        return 0.92 if self.version >= (0, 32, 0) else 0.9

    @property
    def cuda_graph_memory_deducted(self) -> bool:
        """CUDA-graph memory profiling is subtracted from the KV budget by default since 0.21
        (log text in ``vllm/v1/worker/gpu_worker.py``: "enabled (default since v0.21.0)"); 0.19 logs
        estimate it but do not deduct it (shared cases ``llmd-*`` notes)."""
        return self.version >= (0, 21, 0)

    @property
    def legacy_token_formula(self) -> bool:
        """Before the one-line capacity log, the token count was ``num_blocks // num_groups × block_size``
        (0.19 logs in the shared cases satisfy it exactly); 0.32 logs ``int(concurrency × max_model_len)``
        (``vllm/v1/core/kv_cache_utils.py:2300``). The switch release is not pinned down; we use 0.20."""
        return self.version < (0, 20, 0)

    @property
    def heavy_sampler_profile(self) -> bool:
        """0.19 logs show ~14 B per (max_num_seqs × vocab) entry in the profile peak, 0.10 logs ~4 B (the
        fp32 logits alone). Where between them it changed is unknown; we switch at 0.15."""
        return self.version >= (0, 15, 0)

    def mamba_cache_mode(self, prefix_caching: bool = True) -> str:
        """``"align"`` when vLLM keeps two Mamba states per request (plus one per speculative token): 0.32
        turns prefix caching on for generative hybrid models (``is_prefix_caching_supported``,
        vllm/config/model.py:2259-2261) and then sets ``mamba_cache_mode="align"``
        (vllm/model_executor/models/config.py:684-690; checked against the CPU build by
        ``calculator/crosscheck.py``). Earlier releases: align mode arrived in vllm-project/vllm#30877
        (2026-01) as an opt-in (``--mamba-cache-mode align``); when it became the default is not pinned
        down, so releases before 0.32 keep ``"none"`` (one state)."""
        return "align" if prefix_caching and self.version >= (0, 32, 0) else "none"

    def max_concurrent_batches(self, pp: int, platform_is_cpu: bool) -> int:
        """Batches in flight that sliding-window layers reserve for: ``pp + 1`` with async scheduling on the
        V2 model runner (0.32 default on GPU, ``vllm/config/vllm.py:577``); 1 on the CPU (async scheduling
        off, ``vllm/platforms/cpu.py``) and before async scheduling became the default."""
        if platform_is_cpu or self.version < (0, 20, 0):
            return max(pp, 1)
        return pp + 1


def batch_defaults(gpu_memory_gib: float, gpu_name: str, is_cpu: bool, world_size: int = 1) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` defaults of ``vllm serve``
    (``EngineArgs.get_batch_defaults``, ``vllm/engine/arg_utils.py:2893-2985``, 0.32):
    ≥160 GiB → 16384 / 1024; ≥70 GiB and not an A100 → 8192 / 1024; otherwise 2048 / 256;
    CPU → 2048·ws / 128·ws."""
    if is_cpu:
        return 2048 * world_size, 128 * world_size
    if gpu_memory_gib >= 160:
        return 16384, 1024
    if gpu_memory_gib >= 70 and "a100" not in gpu_name.lower():
        return 8192, 1024
    return 2048, 256


def default_block_size(is_cpu: bool, is_mla: bool, capability: tuple[int, int] | None, kv_fp8: bool,
                       attention_backend: str | None) -> tuple[int, str]:
    """The cache block size vLLM picks when ``--block-size`` is not given, and why.

    CUDA backends keep 16 (``vllm/config/cache.py:72``) except MLA backends that prefer larger blocks
    (``vllm/platforms/interface.py:699-781``): FLASHMLA 64 (Hopper with an fp8 KV cache), CUTLASS_MLA 128
    and FLASHINFER_MLA 32 (Blackwell). CPU: 128, CPU_MLA 16 (``vllm/platforms/cpu.py:273-299``).
    """
    backend = (attention_backend or "").upper()
    if is_cpu:
        return (16, "CPU_MLA backend (vllm/platforms/cpu.py)") if is_mla else (128, "CPU default (vllm/platforms/cpu.py)")
    if backend:
        table = {"FLASHMLA": 64, "FLASHMLA_SPARSE": 64, "CUTLASS_MLA": 128, "FLASHINFER_MLA": 32}
        if backend in table:
            return table[backend], f"{backend} preferred block size (vllm/platforms/interface.py)"
        return 16, "default block size (vllm/config/cache.py:72)"
    if is_mla and capability:
        if capability[0] == 9 and kv_fp8:
            return 64, "FLASHMLA on Hopper for an fp8 KV cache (vllm/platforms/cuda.py priority order)"
        if capability[0] == 10:
            return 32, "FLASHINFER_MLA on Blackwell (vllm/platforms/cuda.py priority order)"
    return 16, "default block size (vllm/config/cache.py:72)"


# --- Overheads fitted to public logs (vLLM 0.19.0 on H100, llm-d-planner sweep; shared cases) --------
# Activation peak ("torch peak memory increase"): the dummy sampler pass over max_num_seqs rows of the
# full vocabulary dominates, plus the forward pass of max_num_batched_tokens tokens and the fused-MoE
# workspace. See benchmarks/memory_cases.py --fit for the data behind these constants.
SAMPLER_BYTES_PER_SEQ_VOCAB = 14.36  # ≈ fp32 logits + softmax/log-softmax copies + top-k/p sort buffers
SAMPLER_BYTES_PER_SEQ_VOCAB_OLD = 4.0  # fp32 logits only: fits the 0.10.1.1 logs (shared cases dl-081..083)
SAMPLER_BASE_GIB = 0.134
FORWARD_FACTOR = 1.15  # × tokens × (3·hidden + 3·intermediate/tp) × activation bytes
MOE_WORKSPACE_FACTOR = 1.0  # × tokens × top-k × (2·moe_intermediate/tp + hidden) × 2 B (fused Triton MoE)
# Non-torch memory after the snapshot: cuBLAS/cuDNN workspaces (tp = 1); custom all-reduce and NCCL
# buffers when tp > 1 ("non-torch forward increase memory" in the 0.19 logs).
NON_TORCH_GIB_SINGLE = 0.25
NON_TORCH_GIB_TP = 2.1
NON_TORCH_GIB_TP_OLD = 1.25  # 0.10.1.1 log at tp=2 (dl-083)
NON_TORCH_GIB_PP = 0.07
# CUDA-graph pool ("Graph capturing finished ... took X GiB" in 0.19 logs): a base plus a per-layer term.
CUDA_GRAPH_BASE_GIB = 0.45
CUDA_GRAPH_PER_LAYER_GIB = 0.0145
CUDA_GRAPH_MOE_EXTRA_GIB = 0.5
