"""How many GPU kernels one decoder layer launches in an SGLang decode step.

SGLang replays decode steps as CUDA graphs, so what a layer costs beyond its weight and KV traffic is the
latency of its small kernels (norms, rotary, routing, activation quantization...), each a few µs whatever
the batch. Public SGLang runs at concurrency 1 show that this time per layer differs by architecture (41 µs
for gpt-oss-120b up to 117 µs for DeepSeek-R1 on B200, measured TPOT minus weight, KV and all-reduce time)
while the time per counted kernel is nearly constant (4.6-5.7 µs on B200): the speed model's SGLang row
therefore prices ``kernels x kernel_us`` instead of one ``layer_us`` (benchmarks/sglang_speed_fit.py fits
``kernel_us``).

The counts follow the model code and SGLang's default choices in sglang 0.5.7 (``python/sglang/srt``):

- **all-reduce fusion** (server_args.py:1470-1493): for DeepseekV3, GptOss, Glm4Moe and Qwen3Moe on SM90 /
  SM100, one node, TP > 1 (not H20), the residual add + RMSNorm after each all-reduce run inside the
  flashinfer all-reduce kernel (layers/communicator.py), so the layer's two norms are not kernels of
  their own. The all-reduces themselves are perf's ``comm`` term, not counted here.
- **attention**: GQA/MHA = qkv_proj, rotary, KV-cache store, attention, o_proj (+ q/k RMSNorm for models
  with ``qk_norm``, + the output gate of Qwen3-Next's full-attention layers). MLA (models/deepseek_v2.py
  ``forward_absorb_prepare`` / ``forward_absorb_core``, :1858-2227) = fused_qkv_a_proj_with_mqa,
  q_a_layernorm, kv_a_layernorm, q_b_proj, the ``w_kc`` bmm, rotary, the cache store, attention, the
  ``w_vc`` bmm, o_proj (without ``q_lora_rank``: q_proj and kv_a_proj instead of the first four but one).
  The triton decode backend adds its second (reduce) stage (layers/attention/triton_ops/
  decode_attention.py ``_decode_softmax_reducev_fwd``), FA3 its split-KV combine.
- **gated delta-net** (models/qwen3_next.py): in_proj_qkvz, in_proj_ba, the conv1d update, the gating,
  the recurrent update, the gated RMSNorm, out_proj.
- **FFN**: a dense MLP = gate_up_proj, silu_and_mul, down_proj. A MoE block = the router GEMM, then the
  Triton chain (``fused_topk``, ``moe_align_block_size``, the w13 GEMM, the activation, the w2 GEMM,
  ``moe_sum_reduce``: layers/moe/fused_moe_triton/fused_moe.py :518-681), or the fused flashinfer runners
  SGLang picks on SM100 (``flashinfer_trtllm`` for FP8 DeepSeek / Qwen3 MoE, server_args.py:1120-1141 and
  :1353-1375; ``flashinfer_mxfp4`` for MXFP4 gpt-oss, :1199-1200): routing and two GEMMs. Shared experts
  add gate_up, activation, down and the add.
- **block-wise FP8** (``weight_block_size`` in the checkpoint's quantization_config): every linear that
  takes bf16 activations first runs ``per_token_group_quant_fp8``, one kernel more per linear.

These are counts from the model code, not from a profiler trace: the fitted ``kernel_us`` absorbs a
common scale, and a model whose count is off by a few kernels per layer is off by ~5 µs per kernel.
"""
from __future__ import annotations

from typing import Any

from dataclasses import replace

from pydantic import BaseModel

from calculator.engine import perf
from calculator.engine.arch import LayerKind, ModelArch, parse_config
from calculator.engine.gpus import GPU

SOURCE = "sglang==0.5.7 python/sglang/srt"
# flashinfer all-reduce + residual + RMSNorm fusion, server_args.py:1470-1493
AR_FUSION_ARCHS = ("DeepseekV3ForCausalLM", "GptOssForCausalLM", "Glm4MoeForCausalLM", "Qwen3MoeForCausalLM")


class KernelCount(BaseModel):
    """Kernels per decoder layer of one decode step (mean over the layers), with what they are.

    ``per_layer``: mean kernels per layer (excluding the TP all-reduces); ``parts``: the mean per layer of
    each part (attention, ffn, norms, fp8_quant); ``triton_layers``: layers whose attention runs the triton
    decode kernel (its split-KV loop grows with the context: :func:`calculator.engine.perf.triton_decode_iterations`);
    ``notes``: the choices that set the count, with their source."""

    per_layer: float
    parts: dict[str, float]
    triton_layers: int = 0
    notes: list[str] = []


def _fp8_block(quant_config: dict[str, Any] | None) -> bool:
    q = quant_config or {}
    return q.get("quant_method") == "fp8" and bool(q.get("weight_block_size"))


def decode_kernels(arch: ModelArch, *, backend: str, capability: tuple[int, int] | None, tp: int,
                   quant_config: dict[str, Any] | None = None, gpu_name: str = "") -> KernelCount:
    """Kernels one decoder layer launches per decode step under SGLang's defaults (module docstring).

    ``backend``: the attention backend SGLang runs (the resolved ``--attention-backend``); ``capability``:
    the GPU's compute capability (SM90 / SM100 choose the fused paths); ``tp``: tensor parallelism (the
    all-reduce fusion needs TP > 1). Returns the mean over the layers: MLA, GQA, gated delta-net and
    MLP-only layers are counted each by its own rule, dense-MLP and MoE FFNs by ``arch.num_moe_layers``."""
    major = capability[0] if capability else None
    notes: list[str] = []
    fused_ar = (arch.architecture in AR_FUSION_ARCHS and major in (9, 10) and tp > 1
                and not ("H20" in gpu_name and "H200" not in gpu_name))
    if fused_ar:
        notes.append(f"{arch.architecture} on SM{major}0 with TP {tp}: the residual add + RMSNorm run inside the "
                     f"flashinfer all-reduce ({SOURCE}/server_args.py:1470-1493)")
    fp8 = _fp8_block(quant_config or arch.quantization_config)
    quant = 1 if fp8 else 0
    if fp8:
        notes.append("block-wise FP8: one activation-quantization kernel per linear (per_token_group_quant_fp8)")
    qmethod = (quant_config or arch.quantization_config or {}).get("quant_method")
    fused_moe = major == 10 and (
        (arch.architecture in ("DeepseekV3ForCausalLM", "Qwen3MoeForCausalLM") and qmethod in ("fp8", None)
         and (fp8 or arch.architecture == "DeepseekV3ForCausalLM"))
        or (arch.architecture == "GptOssForCausalLM" and qmethod == "mxfp4"))
    if arch.num_moe_layers:
        notes.append("MoE runner: " + ("fused flashinfer (routing + 2 GEMMs), server_args.py:1120-1141 / 1199-1200 / "
                                       "1353-1375" if fused_moe else "the Triton fused_moe chain (7 kernels), "
                                       "layers/moe/fused_moe_triton/fused_moe.py:518-681"))
    shared = bool(arch.params.shared_experts)
    extra_attn = 1 if backend in ("triton", "fa3") else 0

    def attention(kind: str) -> tuple[float, float]:
        """(attention kernels, of them quantized linears) of one layer of ``kind``."""
        if kind == LayerKind.MLA:
            if arch.q_lora_rank:
                return 10 + extra_attn, 3 * quant  # fused_qkv_a, q_b_proj, o_proj take bf16 activations
            return 9 + extra_attn, 3 * quant  # q_proj, kv_a_proj_with_mqa, o_proj
        if kind in (LayerKind.GDN, LayerKind.KDA):
            return 7, 3 * quant  # in_proj_qkvz, in_proj_ba, out_proj
        if kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.CROSS):
            n = 5 + extra_attn + (2 if arch.qk_norm else 0) + (1 if arch.model_type == "qwen3_next" else 0)
            return n, 2 * quant  # qkv_proj, o_proj
        return 0, 0

    moe_ffn = (4 if fused_moe else 7) + ((4 + (1 if arch.model_type == "qwen3_next" else 0)) if shared else 0)
    moe_quant = (1 + (2 if shared else 0)) * quant
    n_layers = len(arch.layers) or arch.num_layers
    n_moe = min(arch.num_moe_layers, n_layers)
    attn_total = quant_total = 0.0
    triton_layers = 0
    for la in arch.layers:
        a, q = attention(la.kind)
        attn_total += a
        quant_total += q
        if backend == "triton" and la.kind in (LayerKind.MLA, LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED):
            triton_layers += 1
    ffn_total = n_moe * moe_ffn + (n_layers - n_moe) * 3
    quant_total += n_moe * moe_quant + (n_layers - n_moe) * 2 * quant
    norms = 0 if fused_ar else 2
    parts = {"attention": attn_total / n_layers, "ffn": ffn_total / n_layers, "norms": float(norms),
             "fp8_quant": quant_total / n_layers}
    return KernelCount(per_layer=sum(parts.values()), parts=parts, triton_layers=triton_layers, notes=notes)


def with_kernel_count(plan: perf.Plan, *, config: dict[str, Any], gpu: GPU, tp: int, backend: str,
                      quant_config: dict[str, Any] | None = None) -> perf.Plan:
    """``plan`` with SGLang's kernel count (:func:`decode_kernels`) for the speed model: ``layer_kernels``,
    ``triton_layers`` and a ``kernels_note`` that says what was counted and why."""
    kernels = decode_kernels(parse_config(config), backend=backend, tp=tp, capability=gpu.capability_tuple,
                             quant_config=quant_config, gpu_name=gpu.name)
    note = (f"{kernels.per_layer:.1f} kernels per layer per decode step ("
            + ", ".join(f"{k} {v:.1f}" for k, v in kernels.parts.items() if v)
            + f"; attention backend {backend}" + ("; " + "; ".join(kernels.notes) if kernels.notes else "")
            + "): calculator/runtimes/sglang/kernels.py")
    return replace(plan, layer_kernels=kernels.per_layer, triton_layers=kernels.triton_layers, kernels_note=note)

