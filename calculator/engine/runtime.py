"""vLLM release rules that change what the startup log says, and the runtime overheads we model.

Every release difference is one row of :data:`RULES` (rule, first release it applies to, value, the
``file:line`` in that release's wheel), read from the source of each release's wheel (latest patch of every
minor from 0.10 to 0.34, plus the patches around a switch: 0.9.0, 0.9.1, 0.9.2, 0.10.0, 0.10.1.1, 0.11.0,
0.11.1, 0.19.0, 0.20.0, 0.20.1). ``calculator/engine/RELEASES.md`` is the same table for people.
:class:`ReleaseRules` reads the table; the rules are not fitted (the one fit it selects,
``non_torch_tp_fit_gib``, says so).

Overhead constants at the end of the module (activation peak, non-torch memory, CUDA-graph pool) are fitted
to the public startup logs in ``../shared/cases/vllm_ground_truth.json`` (``benchmarks/memory_cases.py``
prints the fit and its residuals); they are labelled as fits wherever they appear.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from .errors import EngineInputError

Release = tuple[int, int, int]
GiB = 2**30

#: Oldest and newest minor release whose source the rules were read from (both inclusive, any patch).
OLDEST_COVERED: Release = (0, 9, 1)
NEWEST_COVERED_MINOR: tuple[int, int] = (0, 34)


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
    """Whether the engine has memory rules for this vLLM release (:meth:`ReleaseRules.is_supported`);
    ``False`` for text that is not a release."""
    try:
        return ReleaseRules.is_supported(text)
    except EngineInputError:
        return False


@dataclass(frozen=True)
class ReleaseRule:
    """One behaviour of vLLM, from the first release that has it until the next row of the same ``rule``.

    ``since`` is the first release whose source shows ``value``; where only the latest patch of a minor was
    read, ``since`` is that minor's ``.0`` and ``source`` names the patch actually read. ``source`` is
    ``path:line (release)`` relative to the wheel root.
    """

    rule: str
    since: Release
    value: Any
    source: str
    note: str = ""


# The table. Rows of one rule are in release order; the row that applies to a release is the last one whose
# ``since`` is not after it.
RULES: tuple[ReleaseRule, ...] = (
    # --- budget ---------------------------------------------------------------------------------------------
    ReleaseRule("default_gpu_memory_utilization", (0, 9, 1), 0.9,
                "vllm/config.py:1464 (0.9.1); vllm/config.py:1626 (0.10.0); "
                "vllm/config/cache.py:41 (0.19.1)"),
    ReleaseRule("default_gpu_memory_utilization", (0, 20, 0), 0.92,
                "vllm/config/cache.py:66 (0.20.0); vllm/config/cache.py:102 (0.32.0); vllm/config/cache.py:215 "
                "(0.33.0)"),
    ReleaseRule("default_gpu_memory_utilization", (0, 34, 0), 0.92,
                "vllm/config/cache.py:186 DEFAULT_GPU_MEMORY_UTILIZATION, :216 (the field defaults to None), "
                ":495-501 resolved_gpu_memory_utilization (0.34.0)",
                "only without the extensible KV cache (the CPU build, --kv-cache-memory-bytes); with it the default "
                "is 1.0 (extensible_kv_cache rows)"),
    ReleaseRule("requested_memory", (0, 9, 1), "total x utilization",
                "vllm/v1/worker/gpu_worker.py:136 (0.9.1); vllm/v1/worker/gpu_worker.py:241 (0.13.0)",
                "a float, not rounded"),
    ReleaseRule("requested_memory", (0, 14, 0), "ceil(total x utilization)",
                "vllm/v1/worker/utils.py:258 (0.14.1); utils.py:724 (0.32.0), :743 (0.34.0)"),
    ReleaseRule("free_memory_check", (0, 9, 1), "without device name",
                "vllm/v1/worker/gpu_worker.py:138-148 (0.9.1); vllm/v1/worker/gpu_worker.py:245-255 (0.13.0)",
                "ValueError when free memory at start < requested memory"),
    ReleaseRule("free_memory_check", (0, 14, 0), "with device name",
                "vllm/v1/worker/utils.py:263-271 (0.14.1); utils.py:761-770 (0.33.0)"),
    ReleaseRule("free_memory_check", (0, 34, 0), "with device name, not with the extensible KV cache",
                "vllm/v1/worker/utils.py:783-797 (0.34.0)",
                "the extensible KV cache skips it: 'the budget is only a cap; exceeding free memory over-reserves "
                "address space rather than pages'"),
    ReleaseRule("snapshot_after_distributed_init", (0, 9, 1), False,
                "vllm/v1/worker/gpu_worker.py:135 before :153 (0.9.1); :175 before :193 (0.10.2)",
                "NCCL / custom all-reduce buffers are charged to the budget"),
    ReleaseRule("snapshot_after_distributed_init", (0, 11, 0), True,
                "vllm/v1/worker/gpu_worker.py:169 before :182 (0.11.0); :506 before :549 (0.34.0)",
                "NCCL buffers live in the memory outside gpu_memory_utilization"),
    # --- CUDA graphs ---------------------------------------------------------------------------------------
    ReleaseRule("cuda_graph_memory", (0, 9, 1), "not budgeted",
                "vllm/v1/worker/gpu_worker.py:218-219, :261 (0.9.1); :279-280, :342-344 (0.10.2); "
                ":407, :530 (0.17.1)",
                "capture_model() runs after the KV cache is allocated; the pool comes from the memory "
                "outside gpu_memory_utilization and is only reported afterwards"),
    ReleaseRule("cuda_graph_memory", (0, 18, 0), "estimated, not deducted",
                "vllm/v1/worker/gpu_worker.py:397-416 (0.18.1); vllm/envs.py:1636 (0.18.1), :1655 (0.19.1)",
                "profile_cudagraph_memory() runs; VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 0"),
    ReleaseRule("cuda_graph_memory", (0, 20, 0), "deducted",
                "vllm/envs.py:1725 (0.20.0); vllm/v1/worker/gpu_worker.py:424 (0.20.0), :754-757 (0.33.0); "
                "envs.py:2355-2356, gpu_worker.py:747, :776-780 (0.34.0)",
                "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 from 0.20.0 although the log line "
                "says 'default since v0.21.0' (gpu_worker.py:456, 0.20.0)"),
    # --- KV cache sizing ------------------------------------------------------------------------------------
    ReleaseRule("extensible_kv_cache", (0, 9, 1), "none",
                "vllm/v1/worker/gpu_worker.py:753-757 determine_available_memory sizes it (0.33.0); no "
                "vllm/v1/worker/extensible_kv_cache.py before 0.34",
                "the KV cache is sized once, from the profiling estimate (the budget rows above)"),
    ReleaseRule("extensible_kv_cache", (0, 34, 0), "CUDA and ROCm, unless --kv-cache-memory-bytes",
                "vllm/config/vllm.py:3180-3254 _resolve_extensible_kv_cache, vllm/config/cache.py:395-405, "
                ":495-501 (default utilization 1.0) (0.34.0)",
                "the cache reserves the profiled capacity ('Available KV cache memory') and is sized after warmup "
                "and CUDA-graph capture from the memory measured free (extensible_kv_cache_budget)"),
    ReleaseRule("extensible_kv_cache_budget", (0, 9, 1), None,
                "vllm/v1/worker/gpu_worker.py:753-757 (0.33.0): the budget rows above; no extensible KV cache "
                "before 0.34"),
    ReleaseRule("extensible_kv_cache_budget", (0, 34, 0),
                "min(requested - non-KV in use, free + committed - max(floor, 0.75 x peak)) - peak; floor 1 GiB "
                "(3 GiB on ROCm)",
                "vllm/v1/worker/extensible_kv_cache.py:64-65, :592-618 measure_kv_cache_bytes, :621-708 "
                "(0.34.0); peak starts at the profiled activation peak + CUDA-graph estimate: "
                "vllm/v1/worker/gpu_worker.py:771-773, :946-948 (0.34.0)",
                "peak = max(that, the sizing warmup's allocated peak, torch's reservation growth), measured at run "
                "time (gpu_worker.py:1080-1098, v1/worker/gpu/warmup.py:483-543)"),
    # --- capacity log ---------------------------------------------------------------------------------------
    ReleaseRule("kv_cache_tokens_log", (0, 9, 1), "num_blocks // num_groups x min_block_size",
                "vllm/v1/core/kv_cache_utils.py:713, :867-868 (0.9.1); :995 (0.10.0); :1302-1306 (0.19.1); "
                ":1694-1698 (0.20.0)"),
    ReleaseRule("kv_cache_tokens_log", (0, 20, 1), "int(max_concurrency x max_model_len)",
                "vllm/v1/core/kv_cache_utils.py:1706 (0.20.1); kv_cache_utils.py:1128 (0.33.0), :1149 (0.34.0)"),
    # --- profile run: sampler warm-up ---------------------------------------------------------------------
    ReleaseRule("flashinfer_sampler_default", (0, 9, 1), True,
                "vllm/v1/sample/ops/topk_topp_sampler.py:40 (0.9.1), :40 (0.10.0), :46 (0.11.0)",
                "VLLM_USE_FLASHINFER_SAMPLER unset means on; flashinfer is the optional 'flashinfer' extra "
                "of the 0.10 wheels (the vllm-openai image ships it)"),
    ReleaseRule("flashinfer_sampler_default", (0, 11, 1), False,
                "vllm/v1/sample/ops/topk_topp_sampler.py:34 (0.11.1), :39 (0.20.2)",
                "opt-in: the dummy sampler run sorts the logits (PyTorch-native top-k/top-p)"),
    ReleaseRule("flashinfer_sampler_default", (0, 21, 0), True,
                "vllm/envs.py:726-733 (0.21.0); vllm/v1/sample/ops/topk_topp_sampler.py:39-51 (0.21.0); "
                "envs.py:937-941, topk_topp_sampler.py:86-127 (0.34.0)",
                "on by default where FlashInfer supports the GPU"),
    ReleaseRule("flashinfer_sampler_capability", (0, 9, 1), None,
                "vllm/v1/sample/ops/topk_topp_sampler.py:40 (0.9.1)",
                "no capability check on the default path"),
    ReleaseRule("flashinfer_sampler_capability", (0, 21, 0), ((7, 5), (12, 1)),
                "vllm/v1/attention/backends/flashinfer.py:409-412, topk_topp_sampler.py:39-65 (0.21.0)",
                "outside it the default-on sampler falls back to the sorting PyTorch-native one"),
    ReleaseRule("flashinfer_sampler_capability", (0, 24, 0), ((8, 0), (12, 1)),
                "vllm/v1/attention/backends/flashinfer.py:426-434 (0.24.0), :696-704 (0.33.0), :698-706 (0.34.0)",
                "SM75 excluded while FlashInfer is broken there"),
    ReleaseRule("v2_model_runner_default", (0, 9, 1), "none",
                "no vllm/v1/worker/gpu/ before 0.12; VLLM_USE_V2_MODEL_RUNNER defaults to 0: "
                "vllm/envs.py:1550 (0.12.0); vllm/envs.py:1711-1712 (0.21.0)"),
    ReleaseRule("v2_model_runner_default", (0, 22, 0), "listed, not MoE, not quantized",
                "vllm/config/vllm.py:69, :518-533 (0.22.1); vllm/config/vllm.py:69-75, :544 (0.23.0)"),
    ReleaseRule("v2_model_runner_default", (0, 24, 0), "listed",
                "vllm/config/vllm.py:68-77, :550-561 (0.24.0)"),
    ReleaseRule("v2_model_runner_default", (0, 25, 0), "listed or not MoE; never hybrid",
                "vllm/config/vllm.py:68-74, :557-574 (0.25.1); vllm/config/vllm.py:68-78, :605-621 (0.26.0)"),
    ReleaseRule("v2_model_runner_default", (0, 27, 0), "listed, or not MoE and not hybrid",
                "vllm/config/vllm.py:69-80, :637-660 (0.27.1); vllm/config/vllm.py:69-80, :691-712 (0.28.0)"),
    ReleaseRule("v2_model_runner_default", (0, 29, 0), "all",
                "vllm/config/vllm.py:645-676 (0.29.0); vllm/config/vllm.py:703-739 (0.32.0)",
                "unless a feature V2 lacks is used"),
    ReleaseRule("v2_model_runner_default", (0, 34, 0), "only",
                "vllm/v1/worker/gpu_worker.py:579-587 (0.34.0): the GPU worker builds vllm/v1/worker/gpu/"
                "model_runner.py's GPUModelRunner; no vllm/v1/worker/gpu_model_runner.py, no "
                "VLLM_USE_V2_MODEL_RUNNER in vllm/envs.py",
                "the V1 model runner is gone: no fallback for features V2 lacks"),
    # --- KV specs ------------------------------------------------------------------------------------------
    ReleaseRule("sliding_window_in_flight", (0, 9, 1), "max_num_batched_tokens",
                "vllm/v1/kv_cache_interface.py:147 (0.9.1), :188 (0.10.0), :561 (0.25.1)"),
    ReleaseRule("sliding_window_in_flight", (0, 26, 0), "max_concurrent_batches x max_num_batched_tokens",
                "vllm/v1/kv_cache_interface.py:523 (0.26.0); vllm/config/vllm.py:512-532 (0.26.0); "
                "kv_cache_interface.py:952, config/vllm.py:560-577 (0.34.0)"),
    ReleaseRule("checkpoint_kv_cache_dtype", (0, 9, 1), False,
                "vllm/engine/arg_utils.py:1397 (0.12.0), :1364 (0.13.0): CacheConfig(cache_dtype=self.kv_cache_dtype)",
                "--kv-cache-dtype auto is the model dtype, whatever the checkpoint says"),
    ReleaseRule("checkpoint_kv_cache_dtype", (0, 14, 0), True,
                "vllm/engine/arg_utils.py:1398 resolve_kv_cache_dtype_string, vllm/utils/torch_utils.py:240-289 "
                "get_kv_cache_quant_algo_string (0.14.1; absent in 0.13.0, vllm PR #30785); arg_utils.py:2257, "
                "torch_utils.py:457-530 (0.32.0); arg_utils.py:2330, torch_utils.py:463-538 (0.34.0)",
                "auto takes a ModelOpt checkpoint's kv_cache_quant_algo / kv_cache_scheme (FP8 -> fp8_e4m3)"),
    ReleaseRule("yarn_derived_max_model_len", (0, 9, 1), "original_max_position_embeddings x factor",
                "vllm/config.py:3463-3478 (0.9.2); vllm/config/__init__.py:2881-2896 (0.10.2); "
                "vllm/config/model.py:2452-2458 (0.29.0)",
                "a YaRN rope_scaling derives the maximum length from its original_max_position_embeddings x factor; "
                "only su / longrope / llama3 keep max_position_embeddings"),
    ReleaseRule("yarn_derived_max_model_len", (0, 30, 0), "max_position_embeddings",
                "vllm/config/model.py:2471-2478 (0.30.0), :2595-2602 (0.32.0), :2657-2664 (0.34.0)",
                "yarn, deepseek_yarn and deepseek_llama_scaling keep max_position_embeddings (already scaled, as "
                "transformers' _compute_yarn_parameters assumes): a YaRN context extension overrides it too"),
    ReleaseRule("async_scheduling_default", (0, 9, 1), False,
                "no async scheduling in 0.9.1; vllm/config.py:2358 (0.10.0); "
                "vllm/config/scheduler.py:133 (0.13.0)"),
    ReleaseRule("async_scheduling_default", (0, 14, 0), True,
                "vllm/config/scheduler.py:133, vllm/config/vllm.py:588 (0.14.1); off on the CPU: "
                "vllm/platforms/cpu.py:144 (0.26.0), :331 (0.32.0); scheduler.py:246, cpu.py:347 (0.34.0)",
                "None = on unless an incompatible option is set"),
    ReleaseRule("hybrid_prefix_caching_default", (0, 9, 1), False,
                "vllm/engine/arg_utils.py:1847 (0.11.1); vllm/config/model.py:1883-1888 (0.25.1); "
                "vllm/engine/arg_utils.py:2519-2522 (0.26.0)",
                "irrelevant before 0.15: no mamba_cache_mode, one state per request"),
    ReleaseRule("hybrid_prefix_caching_default", (0, 28, 0), True,
                "vllm/config/model.py:2072-2074, vllm/engine/arg_utils.py:2650 (0.28.0); model.py:2321-2323, "
                "arg_utils.py:3113 (0.34.0)"),
    ReleaseRule("mamba_cache_mode_with_prefix_caching", (0, 9, 1), "none",
                "vllm/config/cache.py:118-122, vllm/v1/kv_cache_interface.py:292-294 (0.14.1)",
                "no mamba_cache_mode before 0.15: one state page per request"),
    ReleaseRule("mamba_cache_mode_with_prefix_caching", (0, 15, 0), "align",
                "vllm/config/cache.py:127, vllm/model_executor/models/config.py:332-336 (0.15.1); "
                "models/config.py:602-604 (0.28.0), :685-687 (0.32.0), :1094-1096 (0.34.0)",
                "reached by default only when prefix caching is on for hybrid models (from 0.28)"),
    # --- defaults of vllm serve ----------------------------------------------------------------------------
    ReleaseRule("batch_default_tiers", (0, 9, 1), ">=70 GiB non-A100: 8192/1024; else 2048/256",
                "vllm/engine/arg_utils.py:1554-1568 (0.9.1); :1584-1601 (0.10.0)"),
    ReleaseRule("batch_default_tiers", (0, 28, 0), ">=160 GiB: 16384/1024; >=70 GiB non-A100: 8192/1024; "
                "else 2048/256", "vllm/engine/arg_utils.py:2582-2601 (0.28.0)"),
    ReleaseRule("batch_default_tiers", (0, 33, 0), ">=160 GiB: 16384/1024; >=70 GiB non-A100 non-GB10: "
                "8192/1024; else 2048/256", "vllm/engine/arg_utils.py:2963, :2973-2994 (0.33.0); :3000, "
                ":3010-3043 (0.34.0)",
                "GB10 = compute capability 12.1"),
    ReleaseRule("cpu_batch_defaults", (0, 9, 1), None,
                "vllm/engine/arg_utils.py:1554-1598 (0.9.1): no CPU branch", "not modelled"),
    ReleaseRule("cpu_batch_defaults", (0, 10, 0), "2048*ws / 128*ws",
                "vllm/engine/arg_utils.py:1621-1630 (0.10.0); unchanged in 0.33.0; :3066-3074 (0.34.0)"),
    ReleaseRule("default_block_size", (0, 9, 1), 16,
                "vllm/platforms/cuda.py:140 (0.9.1), :148 (0.10.0), :179 (0.17.1); "
                "CacheConfig.DEFAULT_BLOCK_SIZE "
                "vllm/config/cache.py:34 (0.18.1), :185 (0.33.0)"),
    ReleaseRule("default_block_size", (0, 34, 0), 64,
                "CacheConfig.DEFAULT_BLOCK_SIZE vllm/config/cache.py:185; the backend's get_preferred_block_size(64): "
                "vllm/platforms/interface.py:781-791, vllm/v1/attention/backend.py:158-166 (0.34.0)",
                "every CUDA backend that takes 64 keeps it (FLASH_ATTN, FLASHINFER, TRITON_ATTN, and the MLA ones "
                "but CUTLASS_MLA, 128); ROCM_ATTN prefers 16 (vllm/v1/attention/backends/rocm_attn.py:167-172)"),
    ReleaseRule("cpu_block_size", (0, 9, 1), "128 with intel_extension_for_pytorch, else 16",
                "vllm/platforms/cpu.py:104 (0.9.1), :148 (0.11.0)"),
    ReleaseRule("cpu_block_size", (0, 11, 1), "128",
                "vllm/platforms/cpu.py:185 (0.11.1), :293 (0.32.0), :559-562 (0.33.0), :560-562 (0.34.0)"),
    ReleaseRule("cpu_mla_block_size", (0, 9, 1), "as other models",
                "vllm/platforms/cpu.py:185 (0.11.1): no MLA case before 0.28"),
    ReleaseRule("cpu_mla_block_size", (0, 28, 0), 16,
                "vllm/platforms/cpu.py:137-147 (0.28.0), :298 (0.33.0), :297 (0.34.0)",
                "the CPU MLA decode kernel only takes 16 (AMX MLA in 0.32+ not modelled)"),
    ReleaseRule("mla_block_size", (0, 9, 1), "Hopper: FLASHMLA 64",
                "vllm/platforms/cuda.py:148-153 (0.9.1), :155-161 (0.10.0)"),
    ReleaseRule("mla_block_size", (0, 10, 1), "Hopper: FLASHMLA 64; Blackwell: CUTLASS_MLA 128",
                "vllm/platforms/cuda.py:152-179 (0.10.2), :186-213 (0.14.1)"),
    ReleaseRule("mla_block_size", (0, 15, 0), "Hopper: FLASHMLA 64; Blackwell: FLASHINFER_MLA 64 when "
                "qk_nope_head_dim == 128, else CUTLASS_MLA 128",
                "vllm/platforms/cuda.py:186-230 (0.15.1), :214-262 (0.17.1)"),
    ReleaseRule("mla_block_size", (0, 18, 0), "backend preferred size (update_block_size_for_backend)",
                "vllm/platforms/interface.py:427 (0.18.1), :750 (0.32.0); "
                "vllm/platforms/cuda.py:54-81 (0.18.1); "
                "vllm/v1/attention/backend.py:189-197 (0.18.1), :152-160 (0.32.0)",
                "smallest supported size of the first usable backend: Blackwell FLASHINFER_MLA 32; Hopper "
                "FLASH_ATTN_MLA 16, FLASHMLA 64 for an fp8 KV cache; same sizes in 0.18.1, 0.25.1, 0.32.0"),
    ReleaseRule("mla_block_size", (0, 34, 0), "backend preferred size for the default 64",
                "vllm/platforms/interface.py:781-791, vllm/v1/attention/backend.py:158-166 (0.34.0); "
                "mla/flashinfer_mla.py:205 [32, 64], mla/flashmla.py:58 [64], mla/flashattn_mla.py:50 and "
                "mla/triton_mla.py:127 MultipleOf(16), mla/cutlass_mla.py:50 [128] (0.34.0)",
                "64 on every MLA backend that takes it (FLASHINFER_MLA was 32, FLASH_ATTN_MLA 16); CUTLASS_MLA "
                "128"),
)

RULE_NAMES = tuple(dict.fromkeys(r.rule for r in RULES))


def applicable_row(rows, version: tuple[int, int, int]) -> ReleaseRule | None:
    """The row of one rule (``rows``, oldest first) that applies to ``version``: the last whose ``since`` is not
    after it; None when ``version`` predates the first row."""
    applicable = [r for r in rows if r.since <= version]
    return applicable[-1] if applicable else None


def rule_rows(rule: str) -> tuple[ReleaseRule, ...]:
    """All rows of one rule, oldest first.

    Raises:
        KeyError: no such rule.
    """
    rows = tuple(r for r in RULES if r.rule == rule)
    if not rows:
        raise KeyError(rule)
    return rows


def rules_markdown_table() -> str:
    """:data:`RULES` as the markdown table of ``calculator/engine/RELEASES.md``
    (regenerate it with
    ``python -c "from calculator.engine.runtime import rules_markdown_table as t; print(t())"``)."""
    lines = ["| rule | first release | value / behaviour | file:line |", "|---|---|---|---|"]
    for r in RULES:
        val = str(r.value) + (f" ({r.note})" if r.note else "")
        lines.append(f"| `{r.rule}` | {'.'.join(map(str, r.since))} | {val.replace('|', '/')} | {r.source} |")
    return "\n".join(lines)


def _covered_label() -> str:
    n = NEWEST_COVERED_MINOR
    return f"{'.'.join(map(str, OLDEST_COVERED))} to {n[0]}.{n[1]}.x"


@dataclass(frozen=True)
class ReleaseRules:
    """What a vLLM release does differently, for the parts the engine predicts. Reads :data:`RULES`.

    Raises:
        EngineInputError: (``vllm_version``) a release outside :attr:`covered_releases`.
    """

    version: tuple[int, int, int]

    #: ``(oldest, newest)`` releases the rules cover, as text (any patch of the newest minor).
    covered_releases = ("0.9.1", "0.34.x")

    def __post_init__(self) -> None:
        if not self.is_supported(self.version):
            v = ".".join(map(str, self.version))
            raise EngineInputError(
                "vllm_version",
                f"vLLM {v} is not modelled: the memory rules are read from the V1-engine sources of vLLM "
                f"{_covered_label()}; pick a release in that range")

    @staticmethod
    def is_supported(version: str | tuple[int, int, int]) -> bool:
        """Whether the rules cover ``version`` (text such as ``"0.19.0"`` or a parsed tuple).

        0.9.1 is the oldest: from it the V1 worker sizes the KV cache as ``requested − non-KV memory`` of
        this process (``memory_profiling``, vllm/v1/worker/gpu_worker.py:202-219 in 0.9.1). 0.9.0 still
        charged every allocation on the device, other processes' included, against ``total × utilization``
        (gpu_worker.py:179-213 in 0.9.0), which this model does not follow. 0.34.x is the newest read.
        Raises EngineInputError for text that is not a version.
        """
        v = parse_version(version) if isinstance(version, str) else tuple(version)
        return OLDEST_COVERED <= v and v[:2] <= NEWEST_COVERED_MINOR

    @classmethod
    def for_version(cls, text: str) -> ReleaseRules:
        """Parse and check a release string. Raises EngineInputError (``vllm_version``)."""
        return cls(parse_version(text))

    def rule(self, name: str) -> ReleaseRule:
        """The row of ``name`` that applies to this release.

        Raises:
            KeyError: no such rule.
        """
        return applicable_row(rule_rows(name), self.version)  # every rule starts at OLDEST_COVERED

    def value(self, name: str) -> Any:
        return self.rule(name).value

    @property
    def label(self) -> str:
        return ".".join(map(str, self.version))

    # --- budget ---------------------------------------------------------------------------------------------
    @property
    def default_gpu_memory_utilization(self) -> float:
        """0.9 up to 0.19.x, 0.92 from 0.20.0 (see ``RULES``: vllm/config/cache.py:66 in 0.20.0); from 0.34 only
        without the extensible KV cache (:meth:`default_utilization`)."""
        return float(self.value("default_gpu_memory_utilization"))

    def extensible_kv_cache(self, vendor: str, kv_cache_memory_bytes: int | None = None) -> bool:
        """Whether vLLM sizes the KV cache after warmup from measured memory (the extensible KV cache): from 0.34.0,
        on by default on CUDA and ROCm (``vendor`` ``nvidia`` / ``amd``) unless ``--kv-cache-memory-bytes`` is
        given (vllm/config/vllm.py:3180-3254 in 0.34.0). Drivers without virtual-memory management and KV
        connectors that turn it off are not modelled."""
        if self.value("extensible_kv_cache") == "none":
            return False
        return vendor in ("nvidia", "amd") and kv_cache_memory_bytes is None

    def default_utilization(self, extensible: bool) -> float:
        """``--gpu-memory-utilization`` when none is given: 1.0 with the extensible KV cache
        (``resolved_gpu_memory_utilization``, vllm/config/cache.py:495-501 in 0.34.0), else
        :attr:`default_gpu_memory_utilization`."""
        if extensible and self.value("extensible_kv_cache") != "none":
            return 1.0
        return self.default_gpu_memory_utilization

    def requested_memory(self, total_bytes: int, utilization: float) -> float:
        """Bytes vLLM may use: ``total × utilization`` (a float) before 0.14, ``ceil`` of it from 0.14
        (vllm/v1/worker/utils.py:258 in 0.14.1)."""
        raw = total_bytes * utilization
        return math.ceil(raw) if self.value("requested_memory").startswith("ceil") else raw

    # --- CUDA graphs ---------------------------------------------------------------------------------------
    @property
    def cuda_graph_memory(self) -> str:
        """``"not budgeted"`` (< 0.18), ``"estimated, not deducted"`` (0.18-0.19), ``"deducted"`` (≥ 0.20)."""
        return self.value("cuda_graph_memory")

    @property
    def cuda_graph_memory_deducted(self) -> bool:
        """The CUDA-graph estimate is subtracted from the KV budget by default from 0.20.0
        (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` defaults to 1, vllm/envs.py:1725 in 0.20.0)."""
        return self.cuda_graph_memory == "deducted"

    # --- capacity log ---------------------------------------------------------------------------------------
    @property
    def legacy_token_formula(self) -> bool:
        """Up to 0.20.0 the logged token count is ``num_blocks // num_groups × min_block_size``
        (kv_cache_utils.py:1694-1698 in 0.20.0); from 0.20.1 it is ``int(max_concurrency × max_model_len)``
        (kv_cache_utils.py:1706 in 0.20.1)."""
        return self.value("kv_cache_tokens_log").startswith("num_blocks")

    # --- profile run ----------------------------------------------------------------------------------------
    @property
    def flashinfer_sampler_default(self) -> bool:
        """FlashInfer top-k/top-p sampling without ``VLLM_USE_FLASHINFER_SAMPLER`` set: on up to 0.11.0,
        opt-in from 0.11.1 to 0.20.x, on again from 0.21.0."""
        return bool(self.value("flashinfer_sampler_default"))

    @property
    def heavy_sampler_profile(self) -> bool:
        """Whether the profile run's dummy sampler pass sorts the logits (PyTorch-native top-k/top-p,
        ``apply_top_k_top_p``: a sorted copy and int64 indices beside the fp32 logits) rather than calling
        FlashInfer's sort-free kernel: exactly the releases where the FlashInfer sampler is opt-in
        (0.11.1-0.20.x). From 0.22 the V2 model runner's dummy sampler skips top-k/top-p altogether
        (vllm/v1/worker/gpu/model_runner.py:979-983 in 0.32.0), so it is light as well. The bytes per
        (max_num_seqs × vocab) entry of each case are fits (``SAMPLER_BYTES_PER_SEQ_VOCAB*``)."""
        return not self.flashinfer_sampler_default

    def sampler_sorts_logits(self, capability: tuple[int, int] | None = None, uses_v2: bool = False) -> bool:
        """:attr:`heavy_sampler_profile` for one GPU: from 0.21 the default-on FlashInfer sampler falls back
        to the sorting PyTorch-native one on GPUs FlashInfer does not support
        (``flashinfer_sampler_capability`` rows: compute capability 7.5-12.1 in 0.21-0.23, 8.0-12.1 from
        0.24), e.g. a V100, or a T4 from 0.24. The V2 model runner never sorts in
        its dummy run (vllm/v1/worker/gpu/model_runner.py:576-580 in 0.22.1)."""
        if uses_v2:
            return False
        if self.heavy_sampler_profile:
            return True
        supported = self.value("flashinfer_sampler_capability")
        if supported is not None and capability is not None:
            return not (supported[0] <= tuple(capability) <= supported[1])
        return False

    @property
    def non_torch_tp_fit_gib(self) -> float:
        """FIT, not source: non-torch memory at tp > 1, from the nearest release with public logs
        (0.10.1.1 → ``NON_TORCH_GIB_TP_OLD``, 0.19.0 → ``NON_TORCH_GIB_TP``). The source does not say
        where between them it changes; we switch at 0.15, midway."""
        return NON_TORCH_GIB_TP if self.version >= (0, 15, 0) else NON_TORCH_GIB_TP_OLD

    # --- KV specs ------------------------------------------------------------------------------------------
    @property
    def hybrid_prefix_caching_default(self) -> bool:
        """Prefix caching is on by default for generative hybrid (attention + Mamba) models from 0.28.0
        (vllm/config/model.py:2072-2074 in 0.28.0); off before (0.26-0.27 explicitly in arg_utils.py)."""
        return bool(self.value("hybrid_prefix_caching_default"))

    def mamba_cache_mode(self, prefix_caching: bool | None = None) -> str:
        """``"align"`` when vLLM keeps two Mamba states per request (plus one per speculative token),
        ``"none"`` (one state) otherwise. Align is what models/config.py sets when prefix caching is on
        (from 0.15, vllm/model_executor/models/config.py:332-336 in 0.15.1); prefix caching is on by default
        for hybrid models from 0.28.0. ``prefix_caching=None`` means vLLM's default for this release."""
        if prefix_caching is None:
            prefix_caching = self.hybrid_prefix_caching_default
        return self.value("mamba_cache_mode_with_prefix_caching") if prefix_caching else "none"

    def uses_v2_model_runner(self, architectures: tuple[str, ...] | list[str] = (), is_moe: bool = False,
                             is_hybrid: bool = False) -> bool:
        """Whether the V2 model runner (vllm/v1/worker/gpu/) runs by default for this model.

        See the ``v2_model_runner_default`` rows: none before 0.22; 0.22-0.23 listed architectures that
        are neither MoE nor quantized (quantization is not an input here: assumed absent); 0.24 listed;
        0.25-0.26 listed or not MoE, never hybrid; 0.27-0.28 listed, or not MoE and not hybrid; from 0.29
        every model (the features V2 lacks, config/vllm.py ``_get_v2_model_runner_unsupported_features``,
        are not modelled); from 0.34 the only GPU model runner (gpu_worker.py:579-587 in 0.34.0).
        """
        mode = self.value("v2_model_runner_default")
        listed = any(a in _V2_ARCHITECTURES.get(self.version[:2], ()) for a in architectures)
        if mode == "none":
            return False
        if mode == "listed, not MoE, not quantized":
            return listed and not is_moe
        if mode == "listed":
            return listed
        if mode == "listed or not MoE; never hybrid":
            return not is_hybrid and (listed or not is_moe)
        if mode == "listed, or not MoE and not hybrid":
            return listed or (not is_moe and not is_hybrid)
        return True

    def max_concurrent_batches(self, pp: int, platform_is_cpu: bool, *, architectures: tuple[str, ...] = (),
                               is_moe: bool = False, is_hybrid: bool = False,
                               async_scheduling: bool | None = None) -> int:
        """Batches of ``max_num_batched_tokens`` that sliding-window / chunked-local layers reserve for.

        Before 0.26 the spec reserves one batch (``sliding_window - 1 + max_num_batched_tokens``,
        vllm/v1/kv_cache_interface.py:561 in 0.25.1). From 0.26 it is ``VllmConfig.max_concurrent_batches``
        (config/vllm.py:512-522 in 0.26.0): with async scheduling ``pp + 1`` on the V2 model runner, 2 on
        V1 when pp = 1, else ``pp`` (0.34 has no V1 runner: ``pp + 1``, config/vllm.py:560-566 in 0.34.0). Async
        scheduling is on by default on GPUs (``async_scheduling=None``) and off on the CPU (vllm/platforms/cpu.py:331
        in 0.32.0).
        """
        if self.value("sliding_window_in_flight") == "max_num_batched_tokens":
            return 1
        if async_scheduling is None:
            async_scheduling = bool(self.value("async_scheduling_default")) and not platform_is_cpu
        pp = max(pp, 1)
        if async_scheduling:
            if self.uses_v2_model_runner(architectures, is_moe, is_hybrid):
                return pp + 1
            if pp <= 1:
                return 2
        return pp

    # --- defaults of vllm serve ----------------------------------------------------------------------------
    def batch_defaults(self, gpu_memory_gib: float, gpu_name: str, is_cpu: bool, world_size: int = 1,
                       capability: tuple[int, int] | None = None) -> tuple[int, int]:
        """``(max_num_batched_tokens, max_num_seqs)`` defaults of ``vllm serve`` in this release
        (``EngineArgs``' default batch sizes, see the ``batch_default_tiers`` rows):
        ≥160 GiB → 16384 / 1024 from 0.28; ≥70 GiB and not an A100 (and from 0.33 not a GB10, compute
        capability 12.1) → 8192 / 1024; otherwise 2048 / 256; CPU → 2048·ws / 128·ws in every release."""
        if is_cpu:
            if self.value("cpu_batch_defaults") is None:
                raise EngineInputError("vllm_version", f"vLLM {self.label} has no CPU batch defaults "
                                       "(vllm/engine/arg_utils.py); CPU builds are modelled from 0.10.0")
            return 2048 * world_size, 128 * world_size
        tiers = rule_rows("batch_default_tiers")
        if self.version >= tiers[1].since and gpu_memory_gib >= 160:
            return 16384, 1024
        is_gb10 = self.version >= tiers[2].since and capability == (12, 1)
        if gpu_memory_gib >= 70 and "a100" not in gpu_name.lower() and not is_gb10:
            return 8192, 1024
        return 2048, 256

    def default_block_size(self, is_cpu: bool, is_mla: bool, capability: tuple[int, int] | None, kv_fp8: bool,
                           attention_backend: str | None,
                           qk_nope_head_dim: int | None = None, rocm: bool = False) -> tuple[int, str]:
        """The cache block size this release picks when ``--block-size`` is not given, and why.

        16 for every non-MLA CUDA model up to 0.33. MLA before 0.18: ``platforms/cuda.py`` forces the backend's
        size (Hopper FLASHMLA 64; Blackwell CUTLASS_MLA 128 from 0.10.1, FLASHINFER_MLA 64 from 0.15 when
        ``qk_nope_head_dim == 128``). From 0.18 the backend's preferred size (:func:`default_block_size`,
        read in 0.32). From 0.34 the default is 64 and every backend that takes it keeps it
        (:func:`_block_size_for_default_64`; ``rocm``: an AMD GPU, whose first backend ROCM_ATTN prefers 16).
        CPU: 128 (``cpu_block_size`` rows; before 0.11.1 only with IPEX installed), MLA 16 from 0.28.
        """
        if is_cpu:
            src = f"vLLM {self.label} platforms/cpu.py"
            if is_mla and self.value("cpu_mla_block_size") == 16:
                return 16, f"CPU MLA decode kernel takes 16 ({src})"
            if self.value("cpu_block_size") != "128":
                return 128, (f"CPU default 128, assuming intel_extension_for_pytorch is installed "
                             f"(16 without; {src})")
            return 128, f"CPU default ({src})"
        mode = self.value("mla_block_size")
        if self.value("default_block_size") == 64:
            return _block_size_for_default_64(is_mla, attention_backend, rocm, self.label)
        if not is_mla or mode.startswith("backend"):
            return default_block_size(is_cpu, is_mla, capability, kv_fp8, attention_backend)
        src = f"vLLM {self.label} platforms/cuda.py ({self.rule('mla_block_size').source})"
        backend = (attention_backend or "").upper()
        major = capability[0] if capability else None
        if not backend:
            if major == 9:
                backend = "FLASHMLA"
            elif major == 10 and "Blackwell" in mode:
                backend = ("FLASHINFER_MLA" if "FLASHINFER_MLA" in mode and qk_nope_head_dim == 128
                           else "CUTLASS_MLA")
        if backend == "FLASHMLA" and major == 9:
            return 64, f"FLASHMLA forces block size 64 ({src})"
        if backend == "CUTLASS_MLA":
            return 128, f"CUTLASS_MLA forces block size 128 ({src})"
        if backend == "FLASHINFER_MLA":
            return 64, f"FLASHINFER_MLA forces block size 64 ({src})"
        return 16, f"default block size 16 ({src})"


def _block_size_for_default_64(is_mla: bool, attention_backend: str | None, rocm: bool,
                               label: str) -> tuple[int, str]:
    """vLLM 0.34's block size on CUDA / ROCm without ``--block-size``: ``CacheConfig.DEFAULT_BLOCK_SIZE`` 64
    (vllm/config/cache.py:185) passed to the backend's ``get_preferred_block_size``
    (vllm/platforms/interface.py:781-791), which keeps a size the backend takes (vllm/v1/attention/backend.py:158-166), else its smallest kernel block.
    Sizes that differ, read in 0.34.0: CUTLASS_MLA 128 (mla/cutlass_mla.py:50), ROCM_ATTN 16 (rocm_attn.py:167-172,
    the first ROCm backend for a model without MLA, vllm/platforms/rocm.py:559-562), ROCM_AITER_FA 16
    (rocm_aiter_fa.py:873-874: kernel blocks 16, 32)."""
    src = f"vLLM {label} vllm/config/cache.py:185 DEFAULT_BLOCK_SIZE, vllm/platforms/interface.py:781-791"
    backend = (attention_backend or "").upper()
    if backend == "CUTLASS_MLA":
        return 128, f"CUTLASS_MLA takes only 128-token blocks (mla/cutlass_mla.py:50; {src})"
    if backend in ("ROCM_ATTN", "ROCM_AITER_FA") or (not backend and rocm and not is_mla):
        which = backend or "ROCM_ATTN (the first ROCm backend, vllm/platforms/rocm.py:559-562)"
        return 16, f"{which} prefers 16-token blocks over the default 64 ({src})"
    if backend:
        return 64, f"default block size 64, which {backend} takes ({src})"
    return 64, f"default block size 64, which every CUDA attention backend but CUTLASS_MLA takes ({src})"


# Architectures the V2 model runner is the default for, by release (vllm/config/vllm.py:69).
_V2_ARCHITECTURES: dict[tuple[int, int], tuple[str, ...]] = {
    (0, 22): ("Qwen3ForCausalLM",),
    (0, 23): ("LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"),
    (0, 24): ("Qwen3ForCausalLM", "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM",
              "LlamaForCausalLM", "MistralForCausalLM"),
    (0, 25): ("DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"),
    (0, 26): ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
              "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM"),
    (0, 27): ("DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
              "InklingForConditionalGeneration", "KimiK3ForConditionalGeneration",
              "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM"),
    (0, 28): ("DeepseekV2ForCausalLM", "DeepseekV4ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM",
              "InklingForConditionalGeneration", "KimiK3ForConditionalGeneration",
              "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM"),
}


def graph_capture_fits(rules: ReleaseRules, cuda_graph_bytes: int, total_bytes: int, requested_bytes: float,
                       memory_in_use_bytes: int = 0) -> tuple[bool, str | None]:
    """Whether vLLM survives CUDA-graph capture, and why not.

    Where the estimate is deducted (≥ 0.20, ``cuda_graph_memory_deducted``), the KV budget already leaves
    room for the graph pool inside ``requested_bytes``: ``(True, None)``. Before, the KV cache is sized
    without it (``available = requested − non-KV``, gpu_worker.py:279-280 in 0.10.2; 0.18-0.19 only log
    the estimate, gpu_worker.py:413-416 in 0.18.1) and ``capture_model()`` runs after the KV cache is
    allocated (gpu_worker.py:342-344 in 0.10.2, :530 in 0.17.1) with no OOM handling
    (gpu_model_runner.py:5355-5369 in 0.17.1). The pool then has to come from the memory outside
    ``gpu_memory_utilization``: ``total − requested − memory in use at start``. Capture may borrow the
    freed profiling peak, but the sampler warm-up right after it (gpu_worker.py:393-412 in 0.10.2) and the
    first full batch need that back, so we require the pool to fit outside the budget.

    Args:
        cuda_graph_bytes: the graph pool (0 with ``--enforce-eager``).
        total_bytes: device memory.
        requested_bytes: ``rules.requested_memory(total, gpu_memory_utilization)``.
        memory_in_use_bytes: memory already taken on the device when vLLM starts (other processes, and the
            CUDA context vLLM creates before its snapshot), 0 when unknown.

    Returns:
        ``(fits, reason)``; ``reason`` is None when it fits.
    """
    if cuda_graph_bytes <= 0 or rules.cuda_graph_memory_deducted:
        return True, None
    outside = total_bytes - requested_bytes - memory_in_use_bytes
    if cuda_graph_bytes <= outside:
        return True, None
    return False, (
        f"CUDA graph capture needs about {cuda_graph_bytes / GiB:.2f} GiB, but only "
        f"{max(outside, 0) / GiB:.2f} GiB is left outside --gpu-memory-utilization: vLLM {rules.label} "
        f"sizes the KV cache without CUDA-graph memory ({rules.cuda_graph_memory}) and captures the graphs "
        f"afterwards, so the start-up dies with CUDA out of memory during capture. Lower "
        f"--gpu-memory-utilization, use --enforce-eager, or use vLLM 0.20 or later (the estimate is deducted "
        f"from the KV budget).")


def free_memory_check(rules: ReleaseRules, total_bytes: int, memory_in_use_bytes: int, utilization: float,
                      device: str = "cuda:0", extensible: bool = False) -> tuple[bool, str | None]:
    """vLLM's start-up refusal when the device is partly taken: free memory at start (``total − in use``)
    below the requested memory raises ``ValueError`` with this message (gpu_worker.py:170-177 in 0.10.0,
    without the device name; ``request_memory``, v1/worker/utils.py:263-271 in 0.14.1 and
    utils.py:761-770 in 0.33.0, with it). GiB figures are ``round(bytes / 2**30, 2)`` as vLLM prints them.
    With the extensible KV cache (``extensible``, :meth:`ReleaseRules.extensible_kv_cache`) 0.34 skips the check
    (utils.py:783-797 in 0.34.0): the requested memory is only a cap.

    Returns:
        ``(ok, message)``; ``message`` is vLLM's text when it refuses, None otherwise.
    """
    if extensible and "not with the extensible" in rules.value("free_memory_check"):
        return True, None
    requested = rules.requested_memory(total_bytes, utilization)
    free = total_bytes - memory_in_use_bytes
    if free >= requested:
        return True, None
    where = f" {device}" if rules.value("free_memory_check").startswith("with device name") else ""
    g = lambda b: round(b / GiB, 2)  # noqa: E731  vLLM's GiB / format_gib
    return False, (f"Free memory on device{where} ({g(free)}/{g(total_bytes)} GiB) on startup is less than "
                   f"desired GPU memory utilization ({utilization}, {g(requested)} GiB). Decrease GPU memory "
                   f"utilization or reduce GPU memory used by other processes.")


#: vLLM 0.32.0's check of the requested share against the free memory (``request_memory``, called from the worker's
#: ``init_device``)
FREE_MEMORY_CHECK_SOURCE = ("vllm/v1/worker/utils.py:724-726 requested_memory = ceil(total x --gpu-memory-utilization), "
                            ":761-770 free memory below it raises, request_memory called at vllm/v1/worker/"
                            "gpu_worker.py:535-537 (0.32.0)")


def largest_utilization_beside(rules: ReleaseRules, total_bytes: int, memory_in_use_bytes: int) -> float | None:
    """The largest ``--gpu-memory-utilization`` in hundredths whose requested memory
    (:meth:`ReleaseRules.requested_memory`) fits in the free memory beside ``memory_in_use_bytes``, so that
    :func:`free_memory_check` passes (:data:`FREE_MEMORY_CHECK_SOURCE`); ``None`` when not even 0.01 does."""
    free = total_bytes - memory_in_use_bytes
    if total_bytes <= 0 or free <= 0:
        return None
    u = min(100, math.floor(free / total_bytes * 100)) / 100
    while u > 0 and rules.requested_memory(total_bytes, u) > free:
        u = round(u - 0.01, 2)
    return u if u > 0 else None


#: The extensible KV cache's sizing margin (vllm/v1/worker/extensible_kv_cache.py:64-65 in 0.34.0): at least 1 GiB
#: (3 GiB on ROCm), else 0.75 of the transient peak.
KV_CACHE_MARGIN_FLOOR_BYTES = 1 << 30
KV_CACHE_MARGIN_FLOOR_BYTES_ROCM = 3 << 30
KV_CACHE_MARGIN_FRACTION = 0.75


def extensible_kv_budget(*, total_bytes: int, requested_bytes: int, in_use_bytes: int, non_kv_bytes: int,
                         transient_peak_bytes: int, rocm: bool = False) -> int:
    """Bytes vLLM 0.34's extensible KV cache gets after warmup (``measure_kv_cache_bytes``,
    vllm/v1/worker/extensible_kv_cache.py:592-618 in 0.34.0)::

        headroom  = free after warmup + committed KV = total − in use at start − non-KV in use
        available = min(requested − non-KV in use, headroom − max(floor, 0.75 × peak)) − peak

    Args:
        total_bytes: device memory.
        requested_bytes: ``ceil(total × gpu_memory_utilization)`` (1.0 by default with this cache).
        in_use_bytes: memory taken before vLLM's snapshot (its CUDA context and NCCL set-up, other processes).
        non_kv_bytes: what vLLM holds after warmup besides the KV cache (weights, non-torch memory, CUDA graphs).
        transient_peak_bytes: the peak vLLM keeps free (``reserved_headroom_bytes``; it starts at the profiled
            activation peak plus the CUDA-graph estimate, gpu_worker.py:771-773, :946-948, and grows with the
            sizing warmup's allocated peak and torch's reservation growth, measured at run time).
        rocm: an AMD GPU (a 3 GiB floor instead of 1 GiB).

    Returns:
        The bytes, never negative.
    """
    floor = KV_CACHE_MARGIN_FLOOR_BYTES_ROCM if rocm else KV_CACHE_MARGIN_FLOOR_BYTES
    headroom = total_bytes - in_use_bytes - non_kv_bytes
    margin = max(floor, int(transient_peak_bytes * KV_CACHE_MARGIN_FRACTION))
    available = min(requested_bytes - non_kv_bytes, headroom - margin) - transient_peak_bytes
    return max(available, 0)


def batch_defaults(gpu_memory_gib: float, gpu_name: str, is_cpu: bool, world_size: int = 1) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` defaults of ``vllm serve`` in 0.28-0.32
    (``EngineArgs.get_batch_defaults``, ``vllm/engine/arg_utils.py:2893-2985``, 0.32):
    ≥160 GiB → 16384 / 1024; ≥70 GiB and not an A100 → 8192 / 1024; otherwise 2048 / 256;
    CPU → 2048·ws / 128·ws. Other releases: :meth:`ReleaseRules.batch_defaults`."""
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
# The tp > 1 fit comes from one GPU and link (the llm-d planner's vLLM 0.19 logs, all "NVIDIA H100 80GB HBM3" over
# NVLink: 2.06-2.21 GiB). Other public logs at tp > 1 show far less: 0.34 GiB on an A100 40GB at tp = 4 (vLLM 0.8.3,
# https://github.com/vllm-project/vllm/issues/16570, shared case gh-008; its other ranks 0.38 and 0.43) and 0.55 GiB on
# an H100 at tp = 2 (shared case gh-033). On any other GPU the figure is not known: the answer says so, and a plan
# that fits only at the low end depends on it (memory.estimate_memory).
NON_TORCH_TP_FIT_GPUS = ("NVIDIA H100 80GB HBM3",)
NON_TORCH_GIB_TP_LOW = 0.34
NON_TORCH_TP_LOW_SOURCE = ("0.34 GiB on an A100 40GB at tensor_parallel_size 4, vLLM 0.8.3 "
                           "(https://github.com/vllm-project/vllm/issues/16570)")
NON_TORCH_GIB_PP = 0.07
# Memory in use when vLLM takes its start-up snapshot (its CUDA context; at tp > 1 also NCCL's set-up, which runs
# first): "Free memory on device: 78.57/79.18 GiB on startup" in the H100 logs at tp = 1 (shared cases gh-031,
# gh-035, gh-036), 77.64/79.18 at tp = 2 (gh-033). Only the extensible KV cache (vLLM 0.34+) depends on it.
IN_USE_AT_START_GIB_SINGLE = 0.61
IN_USE_AT_START_GIB_TP = 1.54
# CUDA-graph pool ("Graph capturing finished ... took X GiB" in 0.19 logs): a base plus a per-layer term.
CUDA_GRAPH_BASE_GIB = 0.45
CUDA_GRAPH_PER_LAYER_GIB = 0.0145
CUDA_GRAPH_MOE_EXTRA_GIB = 0.5
