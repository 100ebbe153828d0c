"""Decode and prefill speed of llama.cpp / Ollama on one GPU (Apple Metal or a consumer card), from the GGUF
bytes each token reads.

The roofline is ``calculator.engine.perf``'s (its public ``ModelCost``, ``hardware``, ``step_cost`` and
``prefill_cost``); only the cost terms are llama.cpp's own, read from the GGUF tensor table (the header, or the
table derived by :mod:`.quant_rules`) and the memory plan:

* a decode step reads every weight on the device once (its stored GGUF bytes: the K-quant / IQ blocks as
  they are), except ``token_embd`` which feeds GET_ROWS (one row per token); a tied output reads the
  embedding again as the output matmul; routed experts (``*_exps``) are read for the experts the batch
  touches (perf's ``experts_touched``); plus the KV cache of the context (the plan's cache types, sliding-window
  layers capped at the window);
* prefill runs ``-ub`` (n_ubatch, 512) tokens per pass, compute-bound: 2 FLOPs per weight per token plus the
  attention pairs.

Bandwidth and dense TFLOP/s are the GPU catalog's (Apple's from its spec pages, NVIDIA's from its
datasheets: ``calculator/data/gpus.json``). The efficiency (the share of bandwidth and FLOP/s llama.cpp
reaches, its per-token overhead) is **assumed**: perf's ``llama.cpp`` row, not fitted to any measurement;
the dequantization cost of each GGUF type is inside it, not modelled separately. Layers left on the CPU
(``-ngl`` below the layer count) and CPU-only builds are not modelled (the system RAM bandwidth is not in
the catalog): :class:`~.memory.NotModelled` says so.

Units: milliseconds, bytes, tokens per second.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from calculator.runtimes.llamacpp.gguf_meta import GGUFMeta
from calculator.runtimes.llamacpp.memory import LlamaCppPlan, NotModelled, swa_layers


@dataclass(frozen=True)
class KVGroup:
    """One of llama.cpp's KV caches as perf's roofline reads it (the fields of perf's attention groups):
    ``kv_bytes_per_token`` over its layers, ``flops_per_pair`` = 2 x heads x (d_k + d_v) per layer summed over
    them (QK^T and PV), ``window`` the sliding window (None: the whole context)."""

    layers: int
    flops_per_pair: float
    kv_bytes_per_token: float
    window: int | None
    fixed_tokens: int | None = None


class LlamaCppSpeed(BaseModel):
    """Predicted speed. ``itl_ms`` is the time per output token at ``concurrency`` sequences; ``ttft_ms`` the
    prompt's prefill plus one decode step; ``bytes_per_token`` what one decode step reads (weights + KV)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    runtime: str
    gpu: str
    prompt_len: int
    output_len: int
    concurrency: int
    mean_context: int
    ttft_ms: float | None
    itl_ms: float
    decode_step_ms: float
    output_tokens_per_s: float
    weight_bytes_per_token: float
    kv_bytes_per_token_step: float
    decode: object
    prefill: object | None
    efficiency_label: str
    efficiency: dict
    sources: dict[str, str]
    notes: list[str]
    spec: None = None

    @property
    def assumption(self) -> str:
        return f"llama.cpp efficiency {self.efficiency_label}: {self.sources.get('efficiency', '')}"


def cost_terms(meta: GGUFMeta, plan: LlamaCppPlan):
    """perf ``ModelCost`` of one decode pass from the GGUF tensors on the device and the plan's KV caches.
    Raises ``NotModelled`` when layers or the output stay on the CPU."""
    from calculator.engine.perf import ModelCost

    n_all = meta.n_layer_all
    if plan.device == "CPU":
        raise NotModelled("speed on a CPU-only build is not modelled (the system RAM bandwidth is not in the GPU "
                          "catalog)", field="gpu")
    if len(plan.layers_on_gpu) < n_all or not plan.output_on_gpu:
        raise NotModelled(f"speed with layers on the CPU (-ngl {plan.n_gpu_layers}: {len(plan.layers_on_gpu)} of "
                          f"{n_all} layers on the {plan.device} device) is not modelled: the CPU part runs at the "
                          "system RAM's bandwidth, which the catalog does not hold", field="n_gpu_layers")
    if not meta.tensors:
        raise NotModelled("speed needs the GGUF tensor table (give gguf_file)", field="gguf_file")
    dense = experts = 0.0
    dense_params = expert_params = 0.0
    tied = meta.tensor("output.weight") is None
    for t in meta.tensors:
        if t.name == "token_embd.weight":
            if tied:  # the output matmul reads the embedding (the tied copy)
                dense += t.n_bytes
                dense_params += t.n_elements
            continue
        if "_exps." in t.name:
            experts += t.n_bytes
            expert_params += t.n_elements if t.name.endswith(".weight") else 0
        else:
            dense += t.n_bytes
            if len(t.shape) >= 2 and t.name.endswith(".weight"):
                dense_params += t.n_elements
    n_exp, topk = meta.n_expert, meta.n_expert_used
    active_expert_params = expert_params * topk / n_exp if n_exp else 0.0
    flags, n_swa, _ = swa_layers(meta)
    groups = []
    for c in plan.kv_caches:
        if not c.layers:
            continue
        per_token = c.total_bytes / max(1, c.cells * c.n_stream)
        pair = sum(2 * meta.n_head[il] * ((meta.head_dim_k_swa or meta.head_dim_k or 0) if flags[il] else
                                          (meta.head_dim_k or 0)) * 2 for il in c.layers)
        groups.append(KVGroup(layers=len(c.layers), flops_per_pair=pair, kv_bytes_per_token=per_token,
                              window=n_swa if c.name == "SWA" else None))
    return ModelCost(dense_bytes=dense, expert_bytes=experts, num_experts=n_exp if experts else 0,
                     topk=topk if experts else 0, matmul_params=dense_params + active_expert_params,
                     attn=tuple(groups), state_bytes=0.0, hidden=meta.n_embd, allreduce_layers=n_all, tp=1, pp=1,
                     expert_matmul_params=active_expert_params)


def speed(meta: GGUFMeta, plan: LlamaCppPlan, gpu, *, prompt_len: int = 1024, output_len: int = 128,
          concurrency: int = 1, n_ubatch: int = 512, runtime_label: str = "llama.cpp") -> LlamaCppSpeed:
    """TTFT, time per output token and output tok/s for ``concurrency`` sequences (at most the plan's
    ``n_seq_max`` slots decode together) with ``prompt_len`` prompt and ``output_len`` output tokens.

    ``gpu``: a catalog GPU (``calculator.engine.gpus.GPU``). A GPU without a TFLOP/s figure (Apple M3 / M4:
    Apple publishes none) gets the decode estimate (bandwidth-bound) and no TTFT. Raises ``NotModelled``
    (field named) for what is not modelled and ``ValueError`` for lengths below 1."""
    from calculator.engine.perf import Hardware, get_efficiency, hardware, prefill_cost, step_cost

    for name, value in (("prompt_len", prompt_len), ("output_len", output_len), ("concurrency", concurrency)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, not {value}")
    if gpu.bandwidth_gbps is None:
        raise NotModelled(f"{gpu.name}: no memory bandwidth in the catalog, so the speed is not modelled", field="gpu")
    mc = cost_terms(meta, plan)
    notes = []
    if gpu.tflops_bf16 is None:
        eff = get_efficiency(gpu.name, "llama.cpp")
        hw = Hardware(bandwidth=gpu.bandwidth_gbps * 1e9, peak_flops=math.inf, link=1.0, eff=eff,
                      compute_dtype="not modelled", sources={
                          "bandwidth": f"{gpu.bandwidth_gbps:g} GB/s, {gpu.spec_source}",
                          "tflops": f"{gpu.name}: no published TFLOP/s; compute not modelled (decode taken as "
                                    "bandwidth-bound, no TTFT)", "efficiency": eff.source})
        notes.append("no TFLOP/s for this GPU: decode is taken as bandwidth-bound and TTFT is not given")
    else:
        hw = hardware(gpu, None, runtime="llama.cpp")
    conc = min(concurrency, plan.n_seq_max)
    if concurrency > plan.n_seq_max:
        notes.append(f"{concurrency} requests but {plan.n_seq_max} slots (--parallel): {conc} decode together, "
                     "the rest wait")
    ctx_cap = plan.n_ctx_seq or plan.n_ctx
    mean_ctx = min(prompt_len + max(1, output_len // 2), ctx_cap)
    dec = step_cost(mc, hw, requests=conc, tokens_per_request=1, context=mean_ctx)
    pre = None
    ttft = None
    if math.isfinite(hw.peak_flops):
        pre = prefill_cost(mc, hw, prompt_len=min(prompt_len, ctx_cap), chunk=max(1, n_ubatch))
        ttft = pre.total_ms + dec.total_ms
    itl = dec.total_ms
    eff = hw.eff
    sources = dict(hw.sources)
    sources["bytes"] = (f"GGUF tensor bytes on the {plan.device} device ({meta.source}); token_embd read as one row "
                        "per token; KV from the plan's cache types")
    return LlamaCppSpeed(
        runtime=runtime_label, gpu=gpu.name, prompt_len=prompt_len, output_len=output_len, concurrency=conc,
        mean_context=mean_ctx, ttft_ms=None if ttft is None else round(ttft, 2), itl_ms=round(itl, 3),
        decode_step_ms=round(dec.total_ms, 3), output_tokens_per_s=round(conc * 1000.0 / itl, 2),
        weight_bytes_per_token=dec.bytes_weights, kv_bytes_per_token_step=dec.bytes_kv, decode=dec, prefill=pre,
        efficiency_label=eff.label,
        efficiency={"mem_bw": eff.mem_bw, "compute": eff.compute, "step_overhead_ms": eff.step_overhead_ms,
                    "layer_us": eff.layer_us, "overlap_p": eff.overlap_p},
        sources=sources, notes=notes)
