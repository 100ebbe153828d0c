"""Why SGLang reports more KV tokens than vLLM for the same model and GPUs, from the two plans' terms.

vLLM (``gpu_memory_utilization``, default 0.9) budgets ``total x utilization - weights - peak activation
(a profiling forward pass of max_num_batched_tokens) - non-torch memory``, and CUDA graphs come out of
that budget afterwards in recent releases; SGLang budgets ``free_before_load x mem_fraction_static -
weights`` and keeps activations and CUDA graphs in the ``1 - mem_fraction_static`` share without
measuring them. Both divide by bytes per token of one rank. See :mod:`.memory` for SGLang's side.
"""
from __future__ import annotations

from .memory import GIB, SGLangPlan


def explain_vs_vllm(sglang: SGLangPlan, *, vllm_kv_tokens: int, vllm_kv_gib: float,
                    vllm_gpu_memory_utilization: float, vllm_weights_gib: float,
                    vllm_activation_gib: float | None = None, vllm_non_torch_gib: float | None = None,
                    vllm_cuda_graph_gib: float | None = None, vllm_bytes_per_token: int | None = None,
                    vllm_total_gib: float | None = None) -> str:
    """One sentence naming the terms that make the two KV capacities differ.

    Inputs from the vLLM plan (or its log): ``vllm_kv_tokens`` ("GPU KV cache size: N tokens"),
    ``vllm_kv_gib`` ("Available KV cache memory"), ``vllm_gpu_memory_utilization``, ``vllm_weights_gib``
    ("Model loading took"), and when known the profiled activation peak, non-torch memory, CUDA-graph
    memory, bytes per token and the GPU total the utilization multiplies (default: the SGLang plan's
    GPU memory before loading plus nothing).
    """
    total = vllm_total_gib if vllm_total_gib is not None else sglang.free_before_load_gib
    s_kv = sglang.max_total_num_tokens * sglang.cell_size_bytes / GIB
    ratio = sglang.max_total_num_tokens / vllm_kv_tokens if vllm_kv_tokens else float("inf")
    parts = [(f"SGLang keeps {sglang.mem_fraction_static:.3f} of the {sglang.free_before_load_gib:.1f} GiB free before "
             f"loading ({sglang.free_before_load_gib * sglang.mem_fraction_static:.1f} GiB) for weights + KV and "
             f"reserves the rest for activations and CUDA graphs without measuring them, while vLLM takes "
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
    if vllm_bytes_per_token and vllm_bytes_per_token != sglang.cell_size_bytes:
        parts.append(f"; bytes per token differ ({vllm_bytes_per_token} in vLLM vs {sglang.cell_size_bytes} in SGLang)")
    parts.append(f", leaving {s_kv:.1f} GiB for KV in SGLang vs {vllm_kv_gib:.1f} GiB in vLLM "
                 f"({sglang.max_total_num_tokens:,} vs {vllm_kv_tokens:,} tokens, x{ratio:.2f}).")
    return "".join(parts)
