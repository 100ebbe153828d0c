"""Why SGLang reports more KV tokens than vLLM for the same model and GPUs, from the two plans' terms.

vLLM (``gpu_memory_utilization``, default 0.9, 0.92 from 0.20) budgets ``total x utilization - weights - peak
activation (a profiling forward pass of max_num_batched_tokens and a dummy sampler pass) - non-torch memory``
(``Worker.determine_available_memory``, vllm/v1/worker/gpu_worker.py), and CUDA graphs come out of that budget
afterwards in recent releases; SGLang budgets ``free_before_load x mem_fraction_static - weights``
(``profile_max_num_token``) and keeps activations and CUDA graphs in the ``1 - mem_fraction_static`` share
without measuring them. Both divide by the bytes per token of one rank. See :mod:`.memory` for SGLang's side.

The public example (vllm-project/vllm#21348, Qwen3-235B-A22B-FP8 on 4x H100 80GB): SGLang logged 367,404 tokens
(K 8.23 GB + V 8.23 GB) and vLLM 178,880 (8.11 GiB). Read from both sources, the reasons are:

- SGLang was launched with ``--mem-fraction-static 0.93`` (its own default for 4 ranks of an 80 GB GPU is
  0.855 in 0.4.10.post2, 0.823 from 0.5.x), vLLM with its default ``gpu_memory_utilization`` 0.9;
- 0.93 applies to the ~76.7 GiB free before loading (weights included), so SGLang's pool is
  ``0.93 x 76.7 - 55.1 = 16.2 GiB``, 361,611 tokens from the configuration (1.6% under the log);
- both store bf16 KV (48,128 B per token per GPU: 1 KV head x 256 x 94 layers x 2 B): the checkpoint's
  quantization_config names no KV scheme, so neither runtime turns fp8 KV on; the KV dtype is not a reason;
- vLLM subtracts its profiled peak and non-torch memory from ``0.9 x 79.19 = 71.3 GiB``: the vLLM model gives
  13.6 GiB (303,008 tokens) for 0.9.2; the log's 8.11 GiB is 5.5 GiB less. That run had an LMCache KV connector
  (``--kv-transfer-config LMCacheConnectorV1``) and a pip-installed 0.9.2 has no FlashInfer (its sampler profile
  then sorts the logits: about 1.5 GiB more at 1024 sequences); neither is in the configuration, so that part
  is said, not modelled.
"""
from __future__ import annotations

from .memory import GIB, SGLangPlan

_DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8 (e5m2)", "auto": "auto"}


def explain_vs_vllm(sglang: SGLangPlan, *, vllm_kv_tokens: int, vllm_kv_gib: float,
                    vllm_gpu_memory_utilization: float, vllm_weights_gib: float,
                    vllm_activation_gib: float | None = None, vllm_non_torch_gib: float | None = None,
                    vllm_cuda_graph_gib: float | None = None, vllm_bytes_per_token: int | None = None,
                    vllm_total_gib: float | None = None, vllm_kv_cache_dtype: str | None = None,
                    vllm_logged_kv_gib: float | None = None, vllm_logged_tokens: int | None = None) -> str:
    """One sentence naming the terms that make the two KV capacities differ, with their numbers.

    Inputs from the vLLM plan (or its log): ``vllm_kv_tokens`` ("GPU KV cache size: N tokens"),
    ``vllm_kv_gib`` ("Available KV cache memory"), ``vllm_gpu_memory_utilization``, ``vllm_weights_gib``
    ("Model loading took"), and when known the profiled activation peak, non-torch memory, CUDA-graph
    memory, bytes per token, its KV dtype and the GPU total the utilization multiplies (default: the SGLang
    plan's GPU memory before loading). SGLang's KV is ``max_total_num_tokens x cell_size_bytes``, or for a hybrid SWA
    pool its two parts (``kv_pool_gib``: the full-attention layers' tokens and the sliding-window layers' fewer ones).
    ``vllm_logged_kv_gib`` / ``vllm_logged_tokens``: what a vLLM log says for the same setup, when the sentence should
    also say how far the log is from the vLLM plan (memory the configuration does not give). Whether SGLang's ``mem_fraction_static`` was passed or is its default is
    read from the plan's sources.
    """
    if sglang.does_not_start is not None or vllm_kv_tokens <= 0:  # no KV capacities to compare
        sides = [f"SGLang: {sglang.does_not_start}" if sglang.does_not_start is not None else
                 f"SGLang starts with {sglang.max_total_num_tokens:,} KV tokens",
                 f"vLLM: its weights ({vllm_weights_gib:.1f} GiB per GPU) and profiled memory leave no KV cache"
                 if vllm_kv_tokens <= 0 else f"vLLM starts with {vllm_kv_tokens:,} KV tokens"]
        return "There are no KV capacities to compare: " + "; ".join(sides) + "."
    total = vllm_total_gib if vllm_total_gib is not None else sglang.free_before_load_gib
    swa_split = sglang.attention == "hybrid_swa" and sglang.swa_max_total_num_tokens is not None
    # a hybrid SWA pool holds max_total_num_tokens on its full-attention layers and swa_max_total_num_tokens on its
    # sliding ones (memory.plan: k_size_gib / v_size_gib by layer kind): its own size, not tokens x the full-length cell
    s_kv = sglang.kv_pool_gib if swa_split else sglang.max_total_num_tokens * sglang.cell_size_bytes / GIB
    ratio = sglang.max_total_num_tokens / vllm_kv_tokens if vllm_kv_tokens else float("inf")
    try:
        passed = sglang.source_of("mem_fraction_static").kind == "input"
    except KeyError:
        passed = False
    how = ("as passed with --mem-fraction-static" if passed else
           f"its default for {sglang.tp_size}x {sglang.gpu_memory_capacity_mib / 1024:.0f} GiB")
    parts = [(f"SGLang keeps {sglang.mem_fraction_static:.3f} ({how}) of the {sglang.free_before_load_gib:.1f} GiB "
              f"free before loading ({sglang.free_before_load_gib * sglang.mem_fraction_static:.1f} GiB) for weights + "
              f"KV and reserves the rest for activations and CUDA graphs without measuring them, while vLLM takes "
              f"{vllm_gpu_memory_utilization:.2f} of {total:.1f} GiB ({total * vllm_gpu_memory_utilization:.1f} GiB)")]
    sub = []
    if vllm_activation_gib:
        sub.append(f"the profiled activation peak ({vllm_activation_gib:.1f} GiB)")
    if vllm_non_torch_gib:
        sub.append(f"non-torch memory ({vllm_non_torch_gib:.1f} GiB)")
    if vllm_cuda_graph_gib:
        sub.append(f"CUDA graphs ({vllm_cuda_graph_gib:.1f} GiB)")
    if sub:
        parts.append(" and then subtracts " + ", ".join(sub) + " from it")
    w_diff = vllm_weights_gib - sglang.weights_gib
    if abs(w_diff) >= 0.5:
        parts.append(f"; weights differ by {w_diff:+.1f} GiB per GPU (vLLM - SGLang)")
    s_dtype = _DTYPE_NAMES.get(sglang.kv_cache_dtype, sglang.kv_cache_dtype)
    v_dtype = _DTYPE_NAMES.get(vllm_kv_cache_dtype, vllm_kv_cache_dtype) if vllm_kv_cache_dtype else None
    if vllm_bytes_per_token and vllm_bytes_per_token != sglang.cell_size_bytes:
        parts.append(f"; bytes per token differ ({vllm_bytes_per_token:,} in vLLM"
                     f"{f' ({v_dtype} KV)' if v_dtype else ''} vs {sglang.cell_size_bytes:,} in SGLang ({s_dtype} KV))")
    elif vllm_bytes_per_token:
        parts.append(f"; both store {s_dtype} KV at {sglang.cell_size_bytes:,} B per token per GPU")
    parts.append(f", leaving {s_kv:.1f} GiB for KV in SGLang"
                 + (f" (full-attention layers {sglang.max_total_num_tokens:,} tokens, sliding-window layers "
                    f"{sglang.swa_max_total_num_tokens:,})" if swa_split else "")
                 + f" vs {vllm_kv_gib:.1f} GiB in vLLM "
                 f"({sglang.max_total_num_tokens:,} vs {vllm_kv_tokens:,} tokens, x{ratio:.2f})")
    if vllm_logged_kv_gib is not None:
        gap = vllm_kv_gib - vllm_logged_kv_gib
        logged = f" ({vllm_logged_tokens:,} tokens)" if vllm_logged_tokens else ""
        parts.append(f"; vLLM's own log says {vllm_logged_kv_gib:.2f} GiB{logged}, {abs(gap):.1f} GiB "
                     f"{'less' if gap > 0 else 'more'} than this vLLM estimate: memory the configuration does not give "
                     "(other processes, KV connectors, the libraries installed)")
    return "".join(parts) + "."
