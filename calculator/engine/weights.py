"""Weights memory per GPU: what vLLM logs as "Model loading took X GiB".

Two sources, best first:

1. The checkpoint's own tensors (``CheckpointWeights`` from safetensors headers): stored bytes, split
   across tensor-parallel ranks, minus nothing. Used when the checkpoint's storage format is what vLLM
   keeps in memory (unquantized, or the same quantized format).
2. A count from ``config.json`` (:class:`~calculator.engine.arch.ParamCount`) times bytes per parameter
   of the quantization scheme, with vLLM's sharding rules: column/row-parallel linears split by TP,
   vocabulary-parallel embedding and ``lm_head`` padded to a multiple of 64 rows
   (``vllm/model_executor/layers/vocab_parallel_embedding.py``: ``DEFAULT_VOCAB_PADDING_SIZE = 64``) and
   split, norms and routers replicated, K/V projections replicated when TP exceeds the KV heads
   (``vllm/model_executor/layers/linear.py``: ``QKVParallelLinear``), pipeline stages taking an equal
   share of the layers (``vllm/distributed/utils.py``: ``get_pp_indices``).

Modules a quantized checkpoint keeps unquantized (ModelOpt ``exclude_modules`` / ``ignore``, compressed-tensors
``ignore``) are matched per module (:func:`is_excluded`, ``ParamCount.modules``) and priced in the model dtype.

Plus the rotary cos/sin cache buffer (``max_position × rotary_dim`` in the model dtype,
``vllm/model_executor/layers/rotary_embedding/base.py``), which the load-time profiler also sees.
"""
from __future__ import annotations

import re
from fnmatch import fnmatch
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from .arch import LayerKind, ModelArch
from .dtypes import dtype_bytes
from .errors import EngineInputError
from .kv import cdiv


class QuantScheme(BaseModel):
    """How linear-layer weights are stored in GPU memory.

    ``bits`` per weight element, plus ``scale_bytes_per_weight`` (scales/zeros amortised per element).
    ``experts_only``: only MoE experts are quantized (gpt-oss MXFP4). ``quantize_lm_head``: rarely true.
    """

    name: str
    bits: float
    scale_bytes_per_weight: float = 0.0
    experts_only: bool = False
    quantize_lm_head: bool = False
    source: str
    # Modules the checkpoint keeps unquantized: ModelOpt ``exclude_modules`` (hf_quant_config.json) / ``ignore``
    # (config.json), compressed-tensors ``ignore``; matched as ``exclude_style`` says (:func:`is_excluded`).
    exclude: list[str] = []
    exclude_style: str = ""


# The roots a checkpoint puts before ``layers.<i>.``: patterns and module names are compared below them, as
# vLLM compares them after its hf_to_vllm_mapper renamed both the same way.
_ROOTS = ("model.language_model.", "language_model.model.", "model.", "backbone.", "language_model.",
          "transformer.")


def _strip_root(name: str) -> str:
    for root in _ROOTS:
        if name.startswith(root):
            return name[len(root):]
    return name


def is_excluded(quant: QuantScheme, name: str) -> bool:
    """Whether the module ``name`` (below the model root: ``layers.3.self_attn.q_proj``, ``lm_head``) stays
    unquantized under ``quant``'s exclude list.

    ModelOpt (``ModelOptQuantConfigBase.is_layer_excluded``, vllm/model_executor/layers/quantization/
    modelopt.py:187-221 in 0.32): an exact name, a pattern contained in the name, or an fnmatch wildcard; a
    pattern ``X*`` (not ``X.*``) is first split into ``X`` and ``X.*`` (``apply_vllm_mapper``, :263-281).
    compressed-tensors (``should_ignore_layer``, compressed_tensors/utils.py:53-70 with
    ``is_equal_or_regex_match``, utils/config_utils.py:392-412): an exact name, or ``re:`` + a regex matched
    from the start of the full name.
    """
    if not quant.exclude:
        return False
    stripped = _strip_root(name)
    if quant.exclude_style == "compressed-tensors":
        fulls = [stripped] + [root + stripped for root in _ROOTS]
        for target in quant.exclude:
            if target.startswith("re:"):
                if any(re.match(target[3:], f) for f in fulls):
                    return True
            elif _strip_root(target) == stripped:
                return True
        return False
    return any(pat == stripped or pat in stripped or fnmatch(stripped, pat)
               for pat in _modelopt_patterns(tuple(quant.exclude)))


@lru_cache(maxsize=64)
def _modelopt_patterns(exclude: tuple[str, ...]) -> tuple[str, ...]:
    """ModelOpt patterns below the root, ``X*`` split into ``X`` and ``X.*`` (modelopt.py:263-281 in 0.32)."""
    patterns: list[str] = []
    for ex in exclude:
        ex = _strip_root(ex)
        if len(ex) >= 2 and ex[-1] == "*" and ex[-2] != ".":
            patterns += [ex[:-1], ex[:-1] + ".*"]
        else:
            patterns.append(ex)
    return tuple(patterns)


def excluded_params(arch: ModelArch, quant: QuantScheme | None) -> dict[str, int]:
    """Elements per component (``ParamCount.modules`` components) whose modules ``quant`` keeps unquantized."""
    out: dict[str, int] = {}
    if quant is None or not quant.exclude:
        return out
    for i, comp, name, n in arch.params.modules:
        if is_excluded(quant, f"layers.{i}.{name}"):
            out[comp] = out.get(comp, 0) + n
    return out


def round_up(x: int, m: int) -> int:
    """``x`` rounded up to a multiple of ``m``."""
    return cdiv(x, m) * m


# ``--quantization`` values of vLLM 0.32 (``QuantizationMethods``,
# vllm/model_executor/layers/quantization/__init__.py:15-50).
VLLM_QUANTIZATION_METHODS = (
    "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4", "modelopt_mxfp8",
    "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin", "humming", "compressed-tensors",
    "experts_int8", "quark", "moe_wna16", "torchao", "inc", "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8", "online",
    "fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token",
    "mxfp8",
)
# A checkpoint's quant_method and the flag values vLLM accepts with it: the method itself, and the kernel
# overrides it converts to (``override_quantization_method``, vllm/config/model.py:1380-1445).
_FLAG_ALIASES = {
    "gptq": ("gptq", "gptq_marlin", "moe_wna16"),
    "awq": ("awq", "awq_marlin", "moe_wna16"),
    "mxfp4": ("mxfp4", "gpt_oss_mxfp4"),
    "modelopt": ("modelopt", "modelopt_fp4"),
}


def _check_quantization_flag(method: str, flag: str | None) -> None:
    """Refuse ``--quantization`` values vLLM 0.32 refuses at start-up, with its message.

    - not a vLLM method: "Unknown quantization method" (vllm/config/model.py:1452-1456);
    - the checkpoint has its own ``quant_method`` and the flag names another: "... does not match ..."
      (vllm/config/model.py:1441-1448);
    - an unquantized checkpoint and a checkpoint format (awq, gptq, ...): vLLM looks for the format's config
      file and fails with "Cannot find the config file for X" (model_loader/weight_utils.py:370-375);
      ``fp8`` quantizes at load time and is modelled; other load-time methods are refused as not modelled.
    """
    if flag is None:
        return
    if flag not in VLLM_QUANTIZATION_METHODS:
        raise EngineInputError("quantization", f"Unknown quantization method: {flag}. vLLM accepts "
                               f"{', '.join(VLLM_QUANTIZATION_METHODS)} (vllm/config/model.py:1452)")
    if method:
        if flag == method or flag in _FLAG_ALIASES.get(method, ()) or (flag == "fp8" and "fp8" in method):
            return
        raise EngineInputError("quantization", f"Quantization method specified in the model config ({method}) does "
                               f"not match the quantization method specified in the `quantization` argument "
                               f"({flag}): vLLM refuses to start (vllm/config/model.py:1441). Leave quantization "
                               "empty to use the checkpoint's own.")
    if flag == "fp8":
        return
    if flag in ("fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only",
                "nvfp4_per_token", "mxfp8", "online", "experts_int8", "torchao", "bitsandbytes"):
        raise EngineInputError("quantization", f"load-time quantization {flag!r} is not modelled by this calculator; "
                               "fp8 is")
    raise EngineInputError("quantization", f"Cannot find the config file for {flag}: this checkpoint is not "
                           f"quantized, and {flag} needs a checkpoint in that format (vLLM fails at load, "
                           "model_loader/weight_utils.py:375). Pick a quantized checkpoint, or fp8 to quantize at "
                           "load time.")


def resolve_quant(arch: ModelArch, quant_config: dict[str, Any] | None, quantization: str | None) -> QuantScheme | None:
    """The weight storage scheme, from the checkpoint's quantization config (``config.json``
    ``quantization_config`` or a separate file such as ``hf_quant_config.json``) or the ``--quantization``
    flag (runtime ``fp8``).

    Raises:
        EngineInputError: an unknown ``--quantization`` value.
    """
    qc = quant_config or arch.quantization_config or {}
    if not isinstance(qc, dict):
        raise EngineInputError("quant_config", f"the quantization config must be a JSON object, got {type(qc).__name__}")
    inner = qc.get("quantization")
    inner = inner if isinstance(inner, dict) else {}
    method = str(qc.get("quant_method") or inner.get("quant_algo") or "").lower()
    if not method and qc.get("producer", {}).get("name") == "modelopt":
        method = "modelopt"
    flag = (quantization or "").lower() or None
    if flag in ("none", "auto"):
        flag = None
    if not (flag in _FLAG_ALIASES["modelopt"] and not qc.get("quant_method") and inner.get("quant_algo")):
        # a ModelOpt hf_quant_config.json names no quant_method: the runtimes map it to "modelopt", so --quantization
        # modelopt / modelopt_fp4 is its own method there (vLLM's override_quantization_method; SGLang's
        # compatible_quantization_methods, sglang/srt/configs/model_config.py:561 in 0.5.3)
        _check_quantization_flag(method, flag)
    if flag in ("fp8",) and not method:
        return QuantScheme(name="fp8", bits=8, source="--quantization fp8: weights quantized to FP8 at load "
                           "(vllm/model_executor/layers/quantization/fp8.py), per-tensor scales")
    if not method and flag in (None, "none", "auto"):
        return None
    method = method or flag or ""
    if method in ("fp8",) or "fp8" in method and "modelopt" not in method:
        block = qc.get("weight_block_size")
        scale = 4 / (block[0] * block[1]) if block else 0.0
        return QuantScheme(name="fp8", bits=8, scale_bytes_per_weight=scale,
                           source=f"checkpoint quantization_config: fp8{' block ' + str(block) if block else ''}")
    if method in ("modelopt", "modelopt_fp4", "mixed_precision") or "fp8" in method or "nvfp4" in method:
        algo = str(inner.get("quant_algo") or qc.get("quant_algo") or "FP8").upper()
        # exclude list: "exclude_modules" in hf_quant_config.json's "quantization", else config.json's "ignore"
        # (ModelOptQuantConfigBase.from_config, modelopt.py:320-356 in 0.32)
        exclude = inner.get("exclude_modules") if "quantization" in qc else qc.get("ignore")
        exclude = [str(x) for x in exclude] if isinstance(exclude, list) else []
        note = f", {len(exclude)} module pattern(s) kept unquantized (exclude_modules)" if exclude else ""
        if "MIXED" in algo:
            raise EngineInputError("quant_config", "not modelled: ModelOpt MIXED_PRECISION checkpoints choose the "
                                   "format per layer (quantized_layers, ModelOptMixedPrecisionConfig, modelopt.py:1543); "
                                   "this calculator does not size them, rather than guess")
        if "FP4" in algo:
            return QuantScheme(name="nvfp4", bits=4, scale_bytes_per_weight=1 / 16, exclude=exclude,
                               exclude_style="modelopt",
                               source="checkpoint quantization: ModelOpt NVFP4 (FP8 scale per 16 weights)" + note)
        return QuantScheme(name="fp8", bits=8, exclude=exclude, exclude_style="modelopt",
                           source="checkpoint quantization: ModelOpt FP8 (per-tensor scales)" + note)
    if method == "mxfp4":
        return QuantScheme(name="mxfp4", bits=4, scale_bytes_per_weight=1 / 32, experts_only=True,
                           source="checkpoint quantization_config: mxfp4 (E8M0 scale per 32 weights) on MoE experts")
    if method in ("gptq", "awq", "gptq_marlin", "awq_marlin", "auto-round", "auto_round", "moe_wna16"):
        bits = qc.get("bits") or qc.get("w_bit") or 4
        group = qc.get("group_size") or qc.get("q_group_size") or 128
        group = group if group and group > 0 else 4096
        # fp16 scale + packed zero point per group per output column
        scale = (2 + bits / 8) / group
        return QuantScheme(name=f"{method}-int{bits}", bits=bits, scale_bytes_per_weight=scale,
                           source=f"checkpoint quantization_config: {method} {bits}-bit, group {group}")
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        first = next(iter(groups.values()), {}) if isinstance(groups, dict) else {}
        w = first.get("weights") or {}
        bits = w.get("num_bits") or 8
        strategy = w.get("strategy") or "channel"
        group = w.get("group_size") or 0
        scale = (2 / group) if strategy == "group" and group else 0.0
        ignore = qc.get("ignore")
        ignore = [str(x) for x in ignore] if isinstance(ignore, list) else []
        return QuantScheme(name=f"compressed-tensors-{w.get('type', 'int')}{bits}", bits=bits,
                           scale_bytes_per_weight=scale, exclude=ignore, exclude_style="compressed-tensors",
                           source=f"checkpoint compressed-tensors: {w.get('type', 'int')}{bits} {strategy}"
                                  f"{' group ' + str(group) if group else ''}")
    if method in ("bitsandbytes",):
        bits = 4 if qc.get("load_in_4bit", True) else 8
        return QuantScheme(name=f"bitsandbytes-{bits}bit", bits=bits, scale_bytes_per_weight=4 / 64 if bits == 4 else 0,
                           source="checkpoint quantization_config: bitsandbytes")
    if flag and flag not in ("fp8",):
        raise EngineInputError("quantization", f"unsupported quantization {flag!r}; supported: fp8 (runtime), or "
                               "the checkpoint's own (fp8, compressed-tensors, gptq, awq, mxfp4, modelopt, bitsandbytes)")
    raise EngineInputError("quant_config", f"unsupported checkpoint quant_method {method!r}")


class WeightsEstimate(BaseModel):
    """``bytes_per_gpu``: rank 0 (first pipeline stage); ``last_stage_bytes``: a rank of the last stage;
    ``stage_bytes``: a rank of every stage, in order (one entry without pipeline parallelism)."""

    bytes_per_gpu: int
    last_stage_bytes: int = 0
    stage_bytes: list[int] = []
    total_bytes: int
    rope_cache_bytes: int
    quant: str
    source: str


def rope_cache_bytes(arch: ModelArch, model_bytes: int) -> int:
    """The rotary cos/sin cache: ``positions × rotary_dim`` elements in the model dtype (fp32 for DeepSeek's
    scaling RoPE, ``deepseek_scaling_rope.py``), one per distinct rotary embedding."""
    elem = 4 if arch.kv_lora_rank else model_bytes
    return ((arch.rope_cache_len + arch.rope_cache_len_extra) * arch.rotary_dim + arch.rope_cache_extra_elems) * elem


def weights_per_gpu(arch: ModelArch, model_dtype: str, quant: QuantScheme | None, tp: int, pp: int,
                    partition: list[int] | None = None, dp: int = 1, ep: bool = False) -> WeightsEstimate:
    """Bytes of weights on the most loaded GPU (the first pipeline stage, which also holds the embedding).

    Formula per component: params × bytes/param (quantized linears: ``bits/8 + scale bytes``), divided
    by ``tp`` for tensor-parallel weights; see the module docstring for the sharding rules.
    """
    p = arch.params
    b = dtype_bytes(model_dtype)
    lin_bytes = (quant.bits / 8 + quant.scale_bytes_per_weight) if quant else b
    dense_lin_bytes = b if (quant and quant.experts_only) else lin_bytes

    vocab_rows = round_up(arch.vocab_size, 64)
    embed = vocab_rows * arch.hidden_size * b / tp
    lm_head = (vocab_rows * arch.hidden_size * (lin_bytes if quant and quant.quantize_lm_head else b) / tp
               if not arch.tie_word_embeddings else 0)
    if p.lm_head and p.lm_head > arch.vocab_size * arch.hidden_size:  # lm_head bias (phi)
        lm_head += (p.lm_head - arch.vocab_size * arch.hidden_size) * b / tp

    # modules the checkpoint keeps unquantized (exclude_modules / ignore) are stored in the model dtype
    ex = excluded_params(arch, quant)

    def priced(total: int, comp: str, per: float) -> float:
        return (total - ex.get(comp, 0)) * per + ex.get(comp, 0) * b

    kv_heads_total = arch.num_kv_heads
    kv_replication = max(1, tp // kv_heads_total) if kv_heads_total and not arch.kv_lora_rank else 1
    attention = (priced(p.attention - p.kv_proj, "attention", dense_lin_bytes) / tp
                 + (priced(p.kv_proj, "kv_proj", dense_lin_bytes) + priced(p.kv_alloc_only, "kv_alloc_only",
                                                                           dense_lin_bytes)) * kv_replication / tp)
    mlp = priced(p.mlp, "mlp", dense_lin_bytes) / tp
    shared = priced(p.shared_experts, "shared_experts", dense_lin_bytes) / tp
    mamba = priced(p.mamba, "mamba", dense_lin_bytes) / tp
    # MoE layers span the data-parallel ranks: without expert parallelism each expert is sharded over
    # tp x dp ranks (flatten_tp_across_dp), with --enable-expert-parallel each of the tp x dp ranks holds
    # num_experts / (tp x dp) whole experts (vllm/model_executor/layers/fused_moe/config.py:1189-1235 in 0.32);
    # either way a rank stores 1 / (tp x dp) of the expert weights.
    moe_ranks = tp * dp
    experts = priced(p.experts, "experts", lin_bytes) / moe_ranks
    if quant and quant.name == "mxfp4" and arch.num_experts:
        # MXFP4 MoE kernels pad the expert dims: Marlin/TRT-LLM (NVIDIA) round the per-rank intermediate
        # size up to 128 and the hidden size to 256 (vllm/model_executor/layers/fused_moe/oracle/mxfp4.py,
        # mxfp4_round_up_hidden_size_and_intermediate_size).
        inter = round_up(cdiv(arch.moe_intermediate_size, 1 if ep else moe_ranks), 128)
        hidden = round_up(arch.hidden_size, 256)
        n_moe_layers = p.experts // (arch.num_experts * (3 * arch.hidden_size * arch.moe_intermediate_size
                                                         + 2 * arch.moe_intermediate_size + arch.hidden_size))
        local_experts = cdiv(arch.num_experts, moe_ranks) if ep else arch.num_experts
        experts = n_moe_layers * local_experts * (3 * inter * hidden * lin_bytes + (2 * inter + hidden) * b)
    replicated = (p.norms + p.router) * b
    vision = p.vision * b  # vision towers are replicated on every TP rank in vLLM's multimodal wrappers
    if arch.kv_lora_rank:
        # MLA keeps kv_a_proj_with_mqa and (with q_lora_rank) q_a_proj replicated on every TP rank:
        # ReplicatedLinear (vllm/model_executor/models/deepseek_v2.py:494-525 in 0.32, and in earlier releases),
        # or the fused q_a + kv_a projection DeepSeekV2FusedQkvAProjLinear(..., disable_tp=True)
        # (deepseek_v2.py:960-966, :1052-1062); their RMSNorms (q_a_layernorm, kv_a_layernorm) are whole too
        # (:1082, :1098). ParamCount counts them split like the rest of the attention: add the other ranks' share.
        n_mla = sum(1 for la in arch.layers if la.kind == LayerKind.MLA)
        rep = 0.0
        for i, comp, name, n in p.modules:
            if name in ("self_attn.kv_a_proj_with_mqa", "self_attn.q_a_proj"):
                rep += n * (b if is_excluded(quant, f"layers.{i}.{name}") else dense_lin_bytes) if quant else n * b
        rep += n_mla * (arch.kv_lora_rank + (arch.q_lora_rank or 0)) * dense_lin_bytes
        attention += rep * (1 - 1 / tp)
        absorbed = n_mla * arch.kv_lora_rank * arch.num_attention_heads * arch.mla_nope_v_dim
        attention += absorbed * b / tp
    per_layer_sharded = attention + mlp + shared + mamba + experts
    # Pipeline parallel: layers split as vLLM splits them (partition, memory.pp_partition); the first stage
    # holds the embedding (and the vision tower), the last the lm_head. Rank 0 (the first stage) logs.
    parts = partition or [arch.num_layers]
    rope = rope_cache_bytes(arch, b)
    stages = []
    for i, n in enumerate(parts):
        share = n / arch.num_layers
        stage = (per_layer_sharded + replicated) * share
        if i == 0:
            stage += embed + vision
        if i == len(parts) - 1:
            stage += lm_head
        stages.append(int(stage + rope))
    total = stages[0]
    all_gpus = (embed + lm_head) * tp + (per_layer_sharded - experts) * tp + experts * moe_ranks + replicated + vision
    return WeightsEstimate(
        bytes_per_gpu=int(total), last_stage_bytes=stages[-1], stage_bytes=stages,
        total_bytes=int(all_gpus), rope_cache_bytes=int(rope),
        quant=quant.name if quant else model_dtype,
        source=("config.json parameter count x bytes per parameter "
                f"({quant.source if quant else model_dtype + ', unquantized'}); sharded by vLLM's TP/PP rules"),
    )


def weights_from_checkpoint(stored_bytes: int, arch: ModelArch, tp: int, pp: int, model_dtype: str,
                            source: str, partition: list[int] | None = None, dp: int = 1,
                            stored_mtp: bool = True) -> WeightsEstimate:
    """Per-GPU bytes from the checkpoint's stored tensors: the replicated share (norms, routers, vision)
    stays whole, the rest is split by TP and PP; plus the rotary cache. Exact for unquantized checkpoints.
    ``stored_mtp``: the stored bytes include the MTP layers (safetensors headers do; a meta-device count of the
    transformers class does not), which vLLM does not load into the target, so they are taken out."""
    b = dtype_bytes(model_dtype)
    p = arch.params
    replicated = (p.norms + p.router + p.vision) * b
    mtp = p.mtp * b if stored_mtp else 0
    sharded = max(stored_bytes - replicated - mtp, 0) + p.kv_alloc_only * b  # + slots vLLM builds but the files lack
    rope = rope_cache_bytes(arch, b)
    parts = partition or [arch.num_layers] * pp
    experts = min(p.experts * b, sharded) if dp > 1 else 0  # MoE layers span tp x dp ranks (weights_per_gpu)
    # MLA's q_a_proj / kv_a_proj_with_mqa and their norms are whole on every TP rank (weights_per_gpu)
    mla_rep = sum(n for _, _, name, n in p.modules if name in ("self_attn.kv_a_proj_with_mqa", "self_attn.q_a_proj"))
    mla_rep += sum(1 for la in arch.layers if la.kind == LayerKind.MLA) * ((arch.kv_lora_rank or 0)
                                                                           + (arch.q_lora_rank or 0))
    mla_rep = min(mla_rep * b, sharded) if arch.kv_lora_rank else 0
    stages = [int(((sharded - experts - mla_rep) / tp + experts / (tp * dp) + mla_rep) * n / sum(parts)
                  + replicated + rope) for n in parts]
    return WeightsEstimate(bytes_per_gpu=stages[0], last_stage_bytes=stages[-1], stage_bytes=stages,
                           total_bytes=stored_bytes, rope_cache_bytes=int(rope),
                           quant="checkpoint", source=source)


# How each MTP draft builds the projection of [embedding; hidden] (eh_proj / fc), vllm/model_executor/models/*_mtp.py in
# 0.32: a plain nn.Linear (model dtype, whole on every rank), a ReplicatedLinear with the checkpoint's quant_config (whole
# on every rank), or a ColumnParallelLinear with it (split over TP; Qwen3-Next / Qwen3.5 pass no quant_config under
# ModelOpt NVFP4, qwen3_5_mtp.py:92-106, qwen3_next_mtp.py:73-87)
_MTP_PROJ_PLAIN = ("deepseek_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp", "hy_v3_mtp", "pangu_ultra_moe_mtp",
                   "step3p5_mtp", "bailing_hybrid_mtp")
_MTP_PROJ_REPLICATED = ("bailing_hybrid_v3_mtp", "longcat_flash_mtp", "mimo_v2_mtp")
_MTP_PROJ_COLUMN = ("qwen3_next_mtp", "qwen3_5_mtp", "exaone_moe_mtp", "exaone4_5_mtp", "nemotron_h_mtp")


def mtp_layer_bytes_per_weight(arch: ModelArch, model_dtype: str, quant: QuantScheme | None) -> float:
    """Bytes per weight of the MTP decoder layer's linears (:func:`mtp_draft_weights`): the checkpoint's
    quantization (``bits / 8`` + scales), or the model dtype when there is none, when it quantizes only the experts,
    or when its exclude / ignore list keeps the MTP layer unquantized (matched on the layer's first expert or MLP
    projection, ``layers.<num_hidden_layers>.mlp...`` or Qwen3-Next / Qwen3.5's ``mtp.layers.0.mlp...``)."""
    b = dtype_bytes(model_dtype)
    if quant is None or quant.experts_only:
        return b
    mlp = "mlp.experts.0.up_proj" if arch.num_experts else "mlp.up_proj"
    name = (f"mtp.layers.0.{mlp}" if arch.mtp_draft_type in ("qwen3_next_mtp", "qwen3_5_mtp")
            else f"layers.{arch.num_layers}.{mlp}")
    return b if is_excluded(quant, name) else quant.bits / 8 + quant.scale_bytes_per_weight


def mtp_draft_weights(arch: ModelArch, model_dtype: str, quant: QuantScheme | None, tp: int) -> tuple[int, str]:
    """Bytes per GPU of the MTP layers vLLM builds for ``--speculative-config '{"method": "mtp"}'`` (embedding and
    lm_head shared with the target, not counted), and where each part comes from.

    - the decoder layer(s) (attention, MoE or MLP): the target's layer type, built with the checkpoint's quant_config
      (``DeepseekV2DecoderLayer(vllm_config, ...)``, deepseek_mtp.py:106-111 in 0.32), so stored at its bytes per
      weight (``bits / 8`` + scales) and split over TP like the target's layers (MLA's q_a / kv_a projections whole); at the model dtype when the
      checkpoint keeps the MTP layer unquantized (its exclude / ignore list names it: ``model.layers.61*``,
      ``mtp*``, :func:`is_excluded`) or the scheme quantizes only the experts;
    - the projection (eh_proj / fc, ``2 x hidden x hidden`` per layer) as the draft's model file builds it
      (:data:`_MTP_PROJ_PLAIN`, :data:`_MTP_PROJ_REPLICATED`, :data:`_MTP_PROJ_COLUMN`);
    - norms and the router's gate at the model dtype, whole on every rank.
    """
    b = dtype_bytes(model_dtype)
    p = arch.params
    kind = arch.mtp_draft_type or ""
    proj_name = "mtp.fc" if kind in ("qwen3_next_mtp", "qwen3_5_mtp") else f"layers.{arch.num_layers}.eh_proj"
    quant_b = (quant.bits / 8 + quant.scale_bytes_per_weight) if quant is not None else b
    body_b = mtp_layer_bytes_per_weight(arch, model_dtype, quant)
    body_quantized = quant is not None and body_b != b
    body = (p.mtp - p.mtp_proj - p.mtp_replicated) * body_b / tp
    if arch.kv_lora_rank and not arch.mtp_full_attention:
        # MLA's q_a_proj and kv_a_proj_with_mqa are whole on every rank (as in the target, weights_per_gpu)
        rep = arch.mtp_layers * arch.hidden_size * ((arch.q_lora_rank or 0) + arch.kv_lora_rank
                                                     + (arch.qk_rope_head_dim or 0))
        body += rep * body_b * (1 - 1 / tp)
    proj_quant = quant is not None and not quant.experts_only and not is_excluded(quant, proj_name)
    if kind in _MTP_PROJ_PLAIN:
        proj, proj_why = p.mtp_proj * b, "nn.Linear: model dtype, whole on every rank"
    elif kind in _MTP_PROJ_REPLICATED:
        proj = p.mtp_proj * (quant_b if proj_quant else b)
        proj_why = "ReplicatedLinear: the checkpoint's quantization, whole on every rank"
    elif kind in _MTP_PROJ_COLUMN:
        if kind in ("qwen3_next_mtp", "qwen3_5_mtp") and quant is not None and quant.name == "nvfp4" \
                and quant.exclude_style == "modelopt":
            proj_quant = False  # fc_quant = None under modelopt_fp4
        proj = p.mtp_proj * (quant_b if proj_quant else b) / tp
        proj_why = "ColumnParallelLinear: split over TP" + (", quantized" if proj_quant else ", model dtype")
    else:
        proj, proj_why = p.mtp_proj * b / tp, f"{kind or 'this'} draft's projection not read: counted at the model dtype, split over TP"
    total = int(body + proj + p.mtp_replicated * b)
    why = (f"decoder layer(s) at {'the checkpoint quantization (' + quant.name + ')' if body_quantized else model_dtype}"
           f"{' (the checkpoint keeps the MTP layer unquantized)' if quant is not None and not body_quantized else ''},"
           f" split over TP; eh_proj/fc {proj_why}; norms and router gate whole at {model_dtype}")
    return total, why


def eagle3_draft_weights(draft: ModelArch, target: ModelArch, draft_config: dict[str, Any], model_dtype: str,
                         tp: int) -> tuple[int, str]:
    """Bytes per GPU of an EAGLE-3 head (``Eagle3LlamaForCausalLM``, vllm/model_executor/models/llama_eagle3.py
    in 0.32), ``tp``: the draft's TP size.

    - its decoder layer(s) as a Llama layer, the first one taking ``[embeds; hidden]`` (2 x hidden) into
      q/k/v (``qkv_input_size``, :80-95), each with a ``hidden_norm`` (:98); the final norm (:253);
    - ``fc``: a ReplicatedLinear of ``target_hidden_size x num_aux_hidden_states`` (3 unless the config lists
      ``eagle_aux_hidden_state_layer_ids``) to hidden, whole on every rank (:209-250);
    - ``lm_head`` over ``draft_vocab_size`` (the target's vocabulary when absent, :312-334), padded to 64 rows
      and split; a head whose vocabulary is the target's shares the target's lm_head, and every head shares
      the target's embedding (``_should_share``, vllm/v1/worker/gpu/spec_decode/eagle/utils.py:15-123);
    - ``draft_id_to_target_id``: ``draft_vocab_size`` int64 when the vocabularies differ (:339-343); the
      checkpoint's ``t2d`` is not loaded (:426-427).
    """
    b = dtype_bytes(model_dtype)
    h = draft.hidden_size
    body = weights_per_gpu(draft, model_dtype, None, tp, 1)
    vocab_rows = round_up(draft.vocab_size, 64)
    out = body.bytes_per_gpu - vocab_rows * h * b / tp  # the embedding: the target's
    if not draft.tie_word_embeddings:
        out -= vocab_rows * h * b / tp  # lm_head over the full vocabulary, replaced below
    draft_vocab = int(draft_config.get("draft_vocab_size") or draft.vocab_size)
    own_head = draft_vocab != target.vocab_size
    if own_head:
        out += round_up(draft_vocab, 64) * h * b / tp + draft_vocab * 8
    kv_rep = max(1, tp // draft.num_kv_heads)
    out += h * (draft.num_attention_heads * draft.head_dim
                + 2 * draft.num_kv_heads * draft.head_dim * kv_rep) * b / tp  # first layer: 2h into q/k/v
    out += draft.num_layers * h * b  # hidden_norm per layer
    ids = (draft_config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    n_aux = draft_config.get("num_aux_hidden_states") or (len(ids) if ids else 3)
    target_h = draft_config.get("target_hidden_size") or h
    out += target_h * n_aux * h * b  # fc, replicated
    why = (f"EAGLE-3 head (llama_eagle3.py): layers with a 2h q/k/v input, fc {n_aux}x{target_h}->{h} replicated, "
           + (f"own lm_head over draft_vocab_size {draft_vocab} + draft_id_to_target_id" if own_head
              else "lm_head and embedding shared with the target"))
    return int(max(out, 0)), why
