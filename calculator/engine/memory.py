"""The memory engine: from a model config and vLLM flags to the numbers vLLM logs at startup.

Per GPU (rank 0 of the first pipeline stage), following ``vllm/v1/worker/gpu_worker.py``
(``determine_available_memory``, 0.32):

    requested  = ceil(total_device_memory × gpu_memory_utilization)          (v1/worker/utils.py:724)
    available  = requested − weights − activation_peak − non_torch − cuda_graph_estimate
    num_blocks = available // bytes_per_block                                (kv_cache_utils.py:1588)

Weights come from :mod:`weights`, KV specs/grouping/capacity from :mod:`kv`, release differences and
fitted overheads from :mod:`runtime`. Every number in the result carries its source in
``EstimateResult.sources``.
"""
from __future__ import annotations

import math
from typing import Any

from .arch import MTP_NOT_LOADED, LayerKind, ModelArch, parse_config, refuse_unmodelled_kv
from .dtypes import dtype_bytes
from .errors import EngineInputError
from .gpus import GPU, get_gpu
from .kv import (ChunkedLocalAttentionSpec, CrossAttentionSpec, FullAttentionSpec, KVContext, KVGroup,
                 MambaSpec, MLAAttentionSpec, SlidingWindowSpec, Spec, capacity, cdiv, estimate_max_model_len,
                 group_specs)
from .layers import (check_architecture, check_kda, hybrid_mla_alignment, indexer_bytes_per_token,
                     indexer_weight_bytes, kda_state_bytes, sparse_mla_backend, sparse_mla_block_size,
                     sparse_mla_cache)
from .runtime import (CUDA_GRAPH_BASE_GIB, CUDA_GRAPH_MOE_EXTRA_GIB, CUDA_GRAPH_PER_LAYER_GIB, FORWARD_FACTOR,
                      IN_USE_AT_START_GIB_SINGLE, IN_USE_AT_START_GIB_TP, MOE_WORKSPACE_FACTOR, NON_TORCH_GIB_PP,
                      NON_TORCH_GIB_SINGLE, NON_TORCH_GIB_TP_LOW, NON_TORCH_TP_FIT_GPUS, NON_TORCH_TP_LOW_SOURCE,
                      SAMPLER_BASE_GIB, SAMPLER_BYTES_PER_SEQ_VOCAB,
                      SAMPLER_BYTES_PER_SEQ_VOCAB_OLD, ReleaseRules, extensible_kv_budget, parse_version)
from .schemas import EngineInput, EstimateResult, LayerKV
from .weights import eagle3_draft_weights, mtp_draft_weights, resolve_quant, round_up, weights_from_checkpoint, weights_per_gpu

GiB = 2**30
FIT_SOURCE = "fit to public vLLM 0.19 startup logs (shared cases llmd-*; benchmarks/memory_cases.py)"


def _gib(x: float) -> float:
    return round(x / GiB, 2)


def _validate(inp: EngineInput) -> None:
    checks = [
        ("tensor_parallel_size", inp.tensor_parallel_size, 1),
        ("pipeline_parallel_size", inp.pipeline_parallel_size, 1),
    ]
    for field, value, minimum in checks:
        if value < minimum:
            raise EngineInputError(field, f"must be at least {minimum}, got {value}")
    for field in ("max_model_len", "block_size", "max_num_seqs", "max_num_batched_tokens"):
        value = getattr(inp, field)
        if value is not None and value < 1:
            raise EngineInputError(field, f"must be a positive integer, got {value}")
    u = inp.gpu_memory_utilization
    if u is not None and not (0 < u <= 1):
        raise EngineInputError("gpu_memory_utilization", f"must be in (0, 1], got {u}")
    if inp.kv_cache_memory_bytes is not None and inp.kv_cache_memory_bytes < 0:
        raise EngineInputError("kv_cache_memory_bytes", "must not be negative")
    if inp.block_size is not None and inp.block_size % 16 and inp.block_size not in (1, 8):
        raise EngineInputError("block_size", f"vLLM block sizes are 1, 8 or multiples of 16, got {inp.block_size}")


def supports_bf16(gpu: GPU) -> bool:
    """Whether vLLM runs bfloat16 on ``gpu``: the CPU, a GPU of unknown capability, or compute capability 8.0 and up
    (``has_device_capability(80)``, vllm/platforms/cuda.py:638-656 check_if_supports_dtype in 0.33.0; the same test
    picks float16 for ``--dtype auto``, vllm/config/model.py:2430)."""
    cap = gpu.capability_tuple
    return gpu.is_cpu or cap is None or cap >= (8, 0)


def resolve_dtype(requested: str, arch: ModelArch, gpu: GPU) -> tuple[str, str]:
    """``--dtype auto`` → the checkpoint's ``torch_dtype``, float32 checkpoints downcast to bfloat16
    (float16 before compute capability 8.0), bfloat16 to float16 where bf16 is unsupported
    (``_resolve_auto_dtype``, vllm/config/model.py:2405)."""
    if requested != "auto":
        return requested, "user input (--dtype)"
    cfg = arch.torch_dtype if arch.torch_dtype in ("bfloat16", "float16", "float32") else "bfloat16"
    bf16_ok = supports_bf16(gpu)
    if cfg == "float32":
        return ("bfloat16" if bf16_ok else "float16"), "float32 checkpoint downcast (vllm/config/model.py:2423)"
    if cfg == "bfloat16" and not bf16_ok:
        return "float16", f"{gpu.name} lacks bfloat16: float16 (vllm/config/model.py:2430)"
    return cfg, "config.json torch_dtype"


def _mamba_state_bytes(arch: ModelArch, tp: int, num_spec: int, conv_b: int, ssm_b: int) -> int:
    """Σ prod(shape) × bytes of one request's state (``vllm/model_executor/layers/mamba/mamba_utils.py``)."""
    m = arch.mamba
    if "gdn_hv" in m:  # GatedDeltaNet (:280-301)
        hk, dk, hv, dv, k = m["gdn_hk"], m["gdn_dk"], m["gdn_hv"], m["gdn_dv"], m["conv_kernel"]
        conv = (2 * hk * dk + hv * dv) // tp * (k - 1 + num_spec)
        ssm = hv // tp * dv * dk
        return conv * conv_b + ssm * ssm_b
    if "m2_heads" in m:  # Mamba2 (:195-220)
        groups = m["m2_groups"]
        if groups % tp:
            groups = groups * tp  # extra groups replicated so each rank has whole groups
        conv = (m["m2_d_inner"] + 2 * groups * m["m2_state"]) // tp * (m["conv_kernel"] - 1 + num_spec)
        ssm = m["m2_heads"] // tp * m["m2_head_dim"] * m["m2_state"]
        return conv * conv_b + ssm * ssm_b
    if "m1_d_inner" in m:  # Mamba1 (:180-192)
        d = m["m1_d_inner"] // tp
        return d * (m["conv_kernel"] - 1) * conv_b + d * m["m1_state"] * ssm_b
    return 0


def host_has_avx512_bf16() -> bool:
    """Whether this machine's CPU has AVX-512 BF16 (the ``avx512_bf16`` flag of ``/proc/cpuinfo``, the
    feature ``torch.cpu._is_avx512_bf16_supported()`` tests). ``False`` where ``/proc/cpuinfo`` is absent."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            return any(line.startswith("flags") and " avx512_bf16" in line for line in fh)
    except OSError:
        return False


def _ssm_state_bytes(arch: ModelArch, model_bytes: int, is_cpu: bool, cpu_avx512_bf16: bool = False) -> int:
    """Bytes per element of the SSM (temporal) state; the conv state keeps the model dtype.

    - CPU build on a CPU with AVX-512 BF16: float32 for every Mamba/GDN layer —
      ``CpuPlatform.check_and_update_config`` resets ``mamba_ssm_cache_dtype`` to float32 only where
      ``torch.cpu._is_avx512_bf16_supported()`` (vllm/platforms/cpu.py:301-321, 0.32) unless fp16/bf16
      was asked for with the GDN backend; without that feature the rules below apply as on a GPU;
    - Nemotron-H: float32 unless config.json sets ``mamba_ssm_cache_dtype``
      (``NemotronHForCausalLMConfig``, vllm/model_executor/models/config.py:712-739);
    - otherwise ``auto``: the conv-state dtype (mamba_utils.py:98-110).
    """
    if is_cpu and cpu_avx512_bf16:
        return 4
    if arch.mamba_ssm_cache_dtype:
        return dtype_bytes(arch.mamba_ssm_cache_dtype)
    return model_bytes


def pp_partition(num_layers: int, pp: int, override: str | None = None) -> list[int]:
    """Layers per pipeline stage as vLLM splits them (``get_pp_indices``, vllm/distributed/utils.py:126-166
    in 0.32): ``num_layers // pp`` each, and the remainder one by one to the stages before the last, starting
    from the second-to-last (``partitions[-i] += 1`` for i in 2..remainder+1); or ``VLLM_PP_LAYER_PARTITION``
    (``override``, e.g. ``"17,15"``), which must name ``pp`` stages summing to ``num_layers``.

    Raises:
        EngineInputError: on ``pp_layer_partition`` when the override does not fit, as vLLM refuses it.
    """
    if override:
        try:
            parts = [int(x) for x in override.split(",")]
        except ValueError:
            raise EngineInputError("pp_layer_partition", f"Invalid partition string: {override}") from None
        if len(parts) != pp:
            raise EngineInputError("pp_layer_partition", f"len(partitions)={len(parts)} does not match pp_size={pp}")
        if sum(parts) != num_layers or min(parts) < 1:
            raise EngineInputError("pp_layer_partition", f"sum(partitions)={sum(parts)} does not match "
                                   f"num_hidden_layers={num_layers}")
        return parts
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


def _stage_layers(arch: ModelArch, pp: int, stage: int = 0, partition: list[int] | None = None) -> list[int]:
    """Layer indices of pipeline ``stage`` (:func:`pp_partition`)."""
    if pp <= 1:
        return list(range(arch.num_layers))
    parts = partition or pp_partition(arch.num_layers, pp)
    start = sum(parts[:stage])
    return list(range(start, start + parts[stage]))


def build_specs(arch: ModelArch, *, tp: int, pp: int, block_size: int, kv_bytes: int, model_bytes: int,
                num_spec: int, prefix: str = "", draft: bool = False,
                is_cpu: bool = False, mamba_cache_mode: str = "none",
                cpu_avx512_bf16: bool = False, stage: int = 0,
                partition: list[int] | None = None, mla_token_bytes: int | None = None,
                indexer_token_bytes: int = 0, version: tuple[int, int, int] = (0, 32, 0)) -> dict[str, Spec]:
    """Layer name → KV spec for the layers on rank 0 of the first pipeline stage.

    KV heads per rank: ``max(1, num_kv_heads // tp)`` (replicated when tp > heads; vllm/config/model.py
    ``get_num_kv_heads``), with a layer's own head size and KV heads where it has them (Gemma 4's global
    layers); layers that share another layer's cache get no spec (Gemma 4's ``num_kv_shared_layers``).
    MLA: one latent head of ``kv_lora_rank + qk_rope_head_dim`` on every rank, ``mla_token_bytes`` per token
    when the cache is a packed format (``fp8_ds_mla``); a sparse-attention layer adds its indexer's key cache
    (``indexer_token_bytes`` per token, :func:`.layers.indexer_bytes_per_token`) as a second MLA spec.
    KDA layers: a Mamba spec of :func:`.layers.kda_state_bytes` (``version`` picks the state layout).
    """
    specs: dict[str, Spec] = {}
    mamba_bytes = None
    for i in _stage_layers(arch, pp, stage, partition):
        layer = arch.layers[i]
        if layer.kv_shared:
            continue  # reads an earlier layer's cache (kv_sharing_target_layer_name): no spec of its own
        name = f"{prefix}layers.{i}"
        common = dict(block_size=block_size, dtype_bytes=kv_bytes, draft=draft)
        hd = layer.head_dim or arch.head_dim
        kv_heads = max(1, (layer.num_kv_heads or arch.num_kv_heads) // tp)
        if layer.kind == LayerKind.MLA:
            specs[name] = MLAAttentionSpec(num_kv_heads=1, head_size=arch.kv_lora_rank + arch.qk_rope_head_dim,
                                           head_size_v=0, token_bytes=mla_token_bytes, **common)
            if layer.indexer:
                specs[f"{name}.indexer"] = MLAAttentionSpec(
                    num_kv_heads=1, head_size=indexer_token_bytes, head_size_v=0, block_size=block_size,
                    dtype_bytes=1, draft=draft, role="indexer")
        elif layer.kind == LayerKind.FULL:
            specs[name] = FullAttentionSpec(num_kv_heads=kv_heads, head_size=hd, head_size_v=hd, **common)
        elif layer.kind == LayerKind.SLIDING:
            specs[name] = SlidingWindowSpec(num_kv_heads=kv_heads, head_size=hd, head_size_v=hd,
                                            sliding_window=layer.sliding_window or 0, **common)
        elif layer.kind == LayerKind.CHUNKED:
            specs[name] = ChunkedLocalAttentionSpec(num_kv_heads=kv_heads, head_size=arch.head_dim,
                                                    head_size_v=arch.head_dim,
                                                    attention_chunk_size=layer.chunk_size or 0, **common)
        elif layer.kind == LayerKind.CROSS:
            specs[name] = CrossAttentionSpec(num_kv_heads=kv_heads, head_size=arch.head_dim,
                                             head_size_v=arch.head_dim, **common)
        elif layer.kind in (LayerKind.MAMBA2, LayerKind.MAMBA1, LayerKind.GDN, LayerKind.KDA):
            if mamba_bytes is None:
                if layer.kind == LayerKind.KDA:
                    mamba_bytes, _ = kda_state_bytes(version, arch.mamba, tp, num_spec, model_bytes)
                else:
                    ssm_b = _ssm_state_bytes(arch, model_bytes, is_cpu, cpu_avx512_bf16)
                    mamba_bytes = _mamba_state_bytes(arch, tp, num_spec, model_bytes, ssm_b)
            specs[name] = MambaSpec(state_bytes=mamba_bytes, block_size=block_size, num_speculative_blocks=num_spec,
                                    draft=draft, cache_mode=mamba_cache_mode,
                                    prefill_checkpoint_blocks=1 if layer.kind == LayerKind.MAMBA2 else 0)
    return specs


def align_hybrid_block_size(specs: dict[str, Spec], block_size: int, kernel_alignment: int,
                            is_mla: bool, mla_alignment: int | None = None) -> tuple[int, int | None]:
    """For attention + Mamba models: raise the attention block size until one attention page holds a
    Mamba state, then pad the Mamba page to the attention page (``_align_hybrid_block_size``,
    vllm/platforms/interface.py:939-1125). Returns ``(block_size, mamba_page_padded)``.

    ``mla_alignment``: the kernel block alignment of an MLA hybrid as the release computes it
    (:func:`.layers.hybrid_mla_alignment`); None: ``max(kernel_alignment, block_size, 128)`` (0.27+)."""
    mamba_pages = [s.state_bytes for s in specs.values() if isinstance(s, MambaSpec)]
    attn = [s for s in specs.values() if not isinstance(s, MambaSpec)]
    if not mamba_pages or not attn:
        return block_size, None
    page_1tok = attn[0].bytes_per_token
    mamba_page = max(mamba_pages)
    align = max(kernel_alignment, block_size)
    if is_mla:
        align = mla_alignment if mla_alignment is not None else max(align, 128)
    attn_block = align * cdiv(mamba_page, align * page_1tok)
    attn_block = kernel_alignment * cdiv(attn_block, kernel_alignment)
    block_size = max(block_size, attn_block)
    return block_size, block_size * page_1tok


def _with_block_size(specs: dict[str, Spec], block_size: int, mamba_padded: int | None) -> dict[str, Spec]:
    from dataclasses import replace

    out: dict[str, Spec] = {}
    for name, s in specs.items():
        if isinstance(s, MambaSpec):
            out[name] = replace(s, block_size=block_size, page_size_padded=mamba_padded)
        else:
            out[name] = replace(s, block_size=block_size)
    return out


def activation_peak_bytes(arch: ModelArch, *, tp: int, max_num_seqs: int, max_num_batched_tokens: int,
                          act_bytes: int, stage: str = "only", heavy_sampler: bool = True,
                          moe_workspace: bool = True) -> int:
    """Peak of the profiling run above the weights ("torch peak memory increase" in vLLM's debug log).

    ``max(sampler, forward) + MoE workspace``: the dummy sampler pass holds ``max_num_seqs × vocab × 14.4 B``
    (fp32 logits and their softmax/sort copies; 4 B in older releases) on the last pipeline stage; the
    forward pass ``1.15 × tokens × (3·hidden + 3·intermediate/tp) × activation bytes``, plus the hidden
    states and residual sent to the next stage on a first stage; the fused-MoE workspace
    ``tokens × top-k × (2·moe_intermediate/tp + hidden) × 2 B`` stays allocated (not for MXFP4 kernels).
    ``stage``: ``only`` (no pipeline), ``first`` or ``last``. The constants are a fit to the public logs
    (``runtime.py``), not a derivation: the real peak depends on kernels and the allocator.
    """
    tokens = max_num_batched_tokens
    per_entry = SAMPLER_BYTES_PER_SEQ_VOCAB if heavy_sampler else SAMPLER_BYTES_PER_SEQ_VOCAB_OLD
    sampler = SAMPLER_BASE_GIB * GiB + max_num_seqs * arch.vocab_size * per_entry
    inter = arch.intermediate_size if not arch.num_experts else max(arch.intermediate_size, arch.moe_intermediate_size)
    forward = tokens * (3 * arch.hidden_size + 3 * inter / tp) * act_bytes * FORWARD_FACTOR
    moe = 0.0
    if arch.num_experts and moe_workspace:
        moe = tokens * arch.num_experts_per_tok * (2 * arch.moe_intermediate_size / tp + arch.hidden_size) \
            * act_bytes * MOE_WORKSPACE_FACTOR
    if stage == "first":
        sampler = 0.0
        forward += 2 * tokens * arch.hidden_size * act_bytes  # hidden states + residual for the next stage
    return int(max(sampler, forward) + moe)


def cuda_graph_bytes(arch: ModelArch, pp: int, stage: int = 0, partition: list[int] | None = None) -> int:
    """CUDA-graph pool: a fit to "Graph capturing finished in … took X GiB" in the 0.19 logs:
    ``0.45 GiB + 0.0145 GiB × layers on the stage (+0.5 GiB for MoE)``."""
    layers = len(_stage_layers(arch, pp, stage, partition))
    gib = CUDA_GRAPH_BASE_GIB + CUDA_GRAPH_PER_LAYER_GIB * layers + (CUDA_GRAPH_MOE_EXTRA_GIB if arch.num_experts else 0)
    return int(gib * GiB)


def _draft_arch(inp: EngineInput, target: ModelArch) -> ModelArch | None:
    spec = inp.speculative_config
    if spec is None or spec.method in ("ngram", "suffix"):
        return None
    if spec.method == "mtp":
        if not target.mtp_layers:
            raise EngineInputError("speculative_config", f"method {spec.vllm_name} needs a model with an MTP head vLLM "
                                   f"runs; this model has none: {target.mtp_refusal}")
        n, k = target.mtp_n_predict, spec.num_speculative_tokens
        if n and k > n and k % n:
            # vLLM reuses the n_predict MTP modules in turn: ValueError at start-up (each release's lines in
            # mtp.N_PREDICT_RULE)
            from .mtp import n_predict_refusal

            raise EngineInputError("speculative_config.num_speculative_tokens",
                                   f"{n_predict_refusal(k, n, inp.vllm_version)}; use {n} or a multiple of it")
        return None
    if not inp.draft_hf_config:
        raise EngineInputError("speculative_config", f"method {spec.method} needs the draft model's config "
                               "(speculative_config.model)")
    return parse_config(inp.draft_hf_config)


def _derived_max_model_len(arch: ModelArch, hf_config: dict[str, Any], rules: ReleaseRules) -> tuple[int | None, str]:
    """vLLM's derived maximum length for the release (``_get_and_verify_max_len``: max_position_embeddings, times the
    RoPE factor except where the release keeps it; the runtime rule ``yarn_derived_max_model_len`` says what a YaRN
    scaling does) and what it was derived from, for the sources and the refusal."""
    scaled = rules.value("yarn_derived_max_model_len") == "original_max_position_embeddings x factor"
    length = arch.derived_max_model_len_yarn_scaled if scaled else arch.derived_max_model_len
    rope = hf_config.get("rope_scaling") if isinstance(hf_config.get("rope_scaling"), dict) else {}
    kind = rope.get("rope_type", rope.get("type"))
    if kind == "yarn" and rope.get("factor") and "gemma3" not in str(hf_config.get("model_type")):
        if scaled:
            return length, (f"rope_scaling yarn: original_max_position_embeddings "
                            f"{rope.get('original_max_position_embeddings')} x factor {rope.get('factor'):g}, "
                            f"as vLLM {rules.label} derives it ({rules.rule('yarn_derived_max_model_len').source})")
        return length, (f"max_position_embeddings; vLLM {rules.label} does not scale it by the yarn factor "
                        f"({rules.rule('yarn_derived_max_model_len').source})")
    if kind and rope.get("factor") and length != hf_config.get("max_position_embeddings"):
        return length, f"max_position_embeddings x rope_scaling {kind} factor {rope.get('factor'):g}"
    return length, "max_position_embeddings"


def estimate(inp: EngineInput) -> EstimateResult:
    """Predict vLLM's startup memory figures for one GPU.

    Raises:
        EngineInputError: bad input (unknown GPU, impossible values, config missing required fields);
        ``field`` names the offending input.
    """
    _validate(inp)
    gpu = get_gpu(inp.gpu)
    if inp.gpu_memory_gib is not None:
        if inp.gpu_memory_gib <= 0:
            raise EngineInputError("gpu_memory_gib", "must be positive")
        gpu = gpu.model_copy(update={"memory_gib": inp.gpu_memory_gib,
                                     "memory_source": "user input (gpu_memory_gib)"})
    rules = ReleaseRules(parse_version(inp.vllm_version))
    arch = parse_config(inp.hf_config)
    refuse_unmodelled_kv(inp.hf_config)
    tp, pp = inp.tensor_parallel_size, inp.pipeline_parallel_size
    sources: dict[str, str] = {}
    # the note that vLLM loads the stored MTP layers only with method mtp does not apply when the method is mtp
    mtp_in_use = inp.speculative_config is not None and inp.speculative_config.method == "mtp"
    warnings: list[str] = [w for w in arch.assumptions if not (mtp_in_use and w.endswith(MTP_NOT_LOADED))]
    resolved: dict[str, Any] = {}
    for why in check_architecture(arch.architecture, rules.version, sparse=arch.is_sparse_mla):
        sources["architecture"] = why
    if arch.is_sparse_mla and gpu.is_cpu:
        raise EngineInputError("gpu", "vLLM's CPU build refuses DeepSeek sparse attention (index_topk): "
                               "\"Sparse Attention is not supported on CPU.\" (vllm/platforms/cpu.py:101-103 in "
                               "0.11.0, :150 in 0.32.0)")
    if any(la.kind == LayerKind.KDA for la in arch.layers):
        c_text = inp.hf_config.get("text_config") or inp.hf_config
        check_kda(rules.version, c_text, gpu.capability_tuple, arch.torch_dtype, gpu.is_cpu)
    for la in arch.layers:  # a layer's own KV heads (Gemma 4's global layers) must split over TP as well
        heads = la.num_kv_heads
        if heads and tp > heads and tp % heads:
            raise EngineInputError("tensor_parallel_size", f"{tp} is above the {heads} KV heads of the model's "
                                   f"{la.kind.value} layers and not a multiple of them; vLLM requires tp % num_kv_heads "
                                   "== 0 to replicate KV heads (gemma4.py Gemma4Attention)")
        if heads and heads >= tp and heads % tp:
            raise EngineInputError("tensor_parallel_size", f"the {heads} KV heads of the model's {la.kind.value} layers "
                                   f"are not divisible by tensor_parallel_size={tp} (vLLM requires it)")

    if arch.num_kv_heads and not arch.kv_lora_rank and tp > arch.num_kv_heads and tp % arch.num_kv_heads:
        raise EngineInputError("tensor_parallel_size", f"{tp} is above the model's {arch.num_kv_heads} KV heads and "
                               "not a multiple of them; vLLM requires tp % num_kv_heads == 0 to replicate KV heads")
    if arch.num_attention_heads % tp:
        heads, kv = arch.num_attention_heads, arch.num_kv_heads
        fits = [d for d in range(1, 17) if not heads % d and (not kv or arch.kv_lora_rank or not kv % d or not d % kv)]
        raise EngineInputError("tensor_parallel_size", f"{heads} attention heads are not divisible by "
                               f"tensor_parallel_size={tp}: vLLM stops at start-up with \"Total number of attention "
                               f"heads ({heads}) must be divisible by tensor parallel size ({tp}).\" (vllm/config/"
                               f"model.py:1544-1550 in 0.32.0); the sizes up to 16 that split this model: "
                               f"{', '.join(map(str, fits))}")
    if pp > arch.num_layers:
        raise EngineInputError("pipeline_parallel_size", f"{pp} stages for {arch.num_layers} layers")

    dtype, dtype_src = resolve_dtype(inp.dtype, arch, gpu)
    resolved["dtype"] = dtype
    sources["dtype"] = dtype_src
    model_b = dtype_bytes(dtype)
    checkpoint_kv = checkpoint_kv_cache_dtype(inp.hf_config, inp.quant_config, rules)
    if inp.kv_cache_dtype in ("auto",) and checkpoint_kv is not None:
        kv_dtype, sources["kv_cache_dtype"] = checkpoint_kv
    elif inp.kv_cache_dtype in ("auto",):
        kv_dtype = dtype
        sources["kv_cache_dtype"] = "auto: the model dtype (vllm/utils/torch_utils.py)"
    else:
        kv_dtype = inp.kv_cache_dtype
        sources["kv_cache_dtype"] = "user input (--kv-cache-dtype); fp8 variants are 1 byte"
    kv_b = dtype_bytes(kv_dtype, "kv_cache_dtype")
    resolved["kv_cache_dtype"] = kv_dtype

    max_len = inp.max_model_len
    derived, derived_from = _derived_max_model_len(arch, inp.hf_config, rules)
    if max_len is None:
        if not derived:
            raise EngineInputError("max_model_len", "config.json has no max_position_embeddings; give --max-model-len")
        max_len = derived
        sources["max_model_len"] = f"derived from config.json {derived_from} (vLLM default, " \
            "vllm/config/model.py _get_and_verify_max_len)"
    else:
        sources["max_model_len"] = "user input (--max-model-len)"
        if derived and max_len > derived and not inp.allow_long_max_model_len:
            raise EngineInputError("max_model_len", f"{max_len:,} is greater than the model's derived maximum length "
                                   f"{derived:,} ({derived_from}); vLLM {rules.label} refuses it unless "
                                   "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set (allow_long_max_model_len here; with RoPE, "
                                   "positions beyond it give NaN). A RoPE-scaled context raises the maximum: "
                                   "hf_overrides (--hf-overrides) with rope_scaling and, from vLLM 0.30 for YaRN, "
                                   "max_position_embeddings")
        if derived and max_len > derived:
            warnings.append(f"--max-model-len {max_len:,} is above the model's derived maximum {derived:,} "
                            f"({derived_from}); vLLM starts only because VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, and warns: "
                            "\"If the model uses relative position encoding (RoPE), positions exceeding "
                            "derived_max_model_len lead to nan\" (vllm/config/model.py:2639-2661 in 0.32.0). The "
                            "memory is planned at the length given")
    resolved["max_model_len"] = max_len

    d_mnbt, d_seqs = rules.batch_defaults(gpu.memory_gib, gpu.name, gpu.is_cpu, tp * pp, gpu.capability_tuple)
    mnbt = inp.max_num_batched_tokens or d_mnbt
    seqs = inp.max_num_seqs or d_seqs
    sources["max_num_batched_tokens"] = "user input" if inp.max_num_batched_tokens else \
        "vllm serve default for this GPU (vllm/engine/arg_utils.py get_batch_defaults)"
    sources["max_num_seqs"] = "user input" if inp.max_num_seqs else sources["max_num_batched_tokens"]
    resolved.update(max_num_batched_tokens=mnbt, max_num_seqs=seqs)
    if mnbt < seqs:  # SchedulerConfig refuses it before anything loads
        raise EngineInputError("max_num_batched_tokens", f"max_num_batched_tokens ({mnbt}) must be greater than or "
                               f"equal to max_num_seqs ({seqs}): vLLM refuses to start (vllm/config/scheduler.py "
                               "verify_max_model_len, 0.32.0:328-332); raise --max-num-batched-tokens or lower "
                               "--max-num-seqs")

    extensible = rules.extensible_kv_cache(gpu.vendor, inp.kv_cache_memory_bytes)
    u = inp.gpu_memory_utilization or rules.default_utilization(extensible)
    sources["gpu_memory_utilization"] = "user input" if inp.gpu_memory_utilization else \
        f"vLLM {rules.label} default ({rules.rule('default_gpu_memory_utilization').source})" + (
            ": 1.0 with the extensible KV cache (resolved_gpu_memory_utilization)" if extensible else "")
    resolved["gpu_memory_utilization"] = u
    resolved["extensible_kv_cache"] = extensible
    sources["extensible_kv_cache"] = (f"{'on' if extensible else 'off'} in vLLM {rules.label}: "
                                      f"{rules.rule('extensible_kv_cache').source}"
                                      + (" (--kv-cache-memory-bytes turns it off)" if inp.kv_cache_memory_bytes
                                         is not None and rules.value('extensible_kv_cache') != "none" else ""))

    if inp.block_size:
        block_size = inp.block_size
        sources["block_size"] = "user input (--block-size)"
    else:
        block_size, why = rules.default_block_size(gpu.is_cpu, bool(arch.kv_lora_rank), gpu.capability_tuple,
                                                   kv_b == 1, inp.attention_backend,
                                                   (inp.hf_config or {}).get("qk_nope_head_dim"),
                                                   rocm=gpu.vendor == "amd")
        sources["block_size"] = why

    # --- DeepSeek sparse attention (V3.2): backend, cache format, block size (layers.py) -------------
    mla_token_bytes: int | None = None
    indexer_bytes = 0
    if arch.is_sparse_mla:
        backend, why = sparse_mla_backend(rules.version, gpu.capability_tuple, inp.kv_cache_dtype,
                                          arch.num_attention_heads // tp, inp.attention_backend,
                                          rocm=gpu.vendor == "amd")
        resolved["attention_backend"] = backend
        sources["attention_backend"] = why
        fmt, per_token, why = sparse_mla_cache(rules.version, inp.kv_cache_dtype, backend, model_b,
                                               arch.kv_lora_rank + arch.qk_rope_head_dim)
        mla_token_bytes = per_token
        # the element dtype (fp8_ds_mla stores fp8 values with their scales); the packed format apart
        resolved["kv_cache_dtype"] = "fp8" if fmt == "fp8_ds_mla" else (fmt if fmt != "auto" else dtype)
        resolved["kv_cache_format"] = fmt if fmt != "auto" else dtype
        sources["kv_cache_dtype"] = sources["kv_cache_format"] = why
        indexer_bytes, why = indexer_bytes_per_token(arch.index_head_dim or 0)
        sources["indexer_bytes_per_token"] = why
        resolved["indexer_bytes_per_token"] = indexer_bytes
        block_size, why = sparse_mla_block_size(rules.version, inp.block_size, backend)
        sources["block_size"] = why

    # --- speculative decoding -------------------------------------------------------------------
    spec = inp.speculative_config
    num_spec = spec.num_speculative_tokens if spec else 0
    draft = _draft_arch(inp, arch)

    # --- weights --------------------------------------------------------------------------------
    quant = resolve_quant(arch, inp.quant_config, inp.quantization)
    partition = pp_partition(arch.num_layers, pp, inp.pp_layer_partition) if pp > 1 else None
    if partition is not None:
        resolved["pp_layer_partition"] = ",".join(map(str, partition))
        sources["pp_layer_partition"] = ("VLLM_PP_LAYER_PARTITION (user input)" if inp.pp_layer_partition else
                                         "get_pp_indices: equal split, the remainder to the stages before the last "
                                         "(vllm/distributed/utils.py:126-166)")
    if inp.weights and inp.weights.bytes_by_dtype and quant is None:
        # A count on the meta device (transformers' model class) holds no MTP layers: transformers skips them on
        # load (_keys_to_ignore_on_load_unexpected, e.g. r"^mtp.*" in modeling_qwen3_next.py:937,
        # r"model\.layers\.61.*" in modeling_deepseek_v3.py:552, transformers 5.19); safetensors headers hold them.
        stored_mtp = not inp.weights.source.startswith("parameters counted on the meta device")
        w = weights_from_checkpoint(sum(inp.weights.bytes_by_dtype.values()), arch, tp, pp, dtype, inp.weights.source,
                                    partition, dp=inp.data_parallel_size, stored_mtp=stored_mtp)
    else:
        w = weights_per_gpu(arch, dtype, quant, tp, pp, partition, dp=inp.data_parallel_size,
                            ep=inp.enable_expert_parallel)
    if inp.data_parallel_size > 1 or inp.enable_expert_parallel:
        if not arch.num_experts and inp.enable_expert_parallel:
            raise EngineInputError("enable_expert_parallel", "the model has no experts: expert parallelism applies "
                                   "to MoE models")
        resolved["moe_ranks"] = tp * inp.data_parallel_size
        sources["moe_ranks"] = ("MoE layers span tp x dp ranks (vllm/model_executor/layers/fused_moe/config.py:1189-1235)"
                                + ("; experts split whole (--enable-expert-parallel)" if inp.enable_expert_parallel
                                   else "; each expert sharded"))
        warnings.append("data / expert parallel: the all-to-all and DP-coordination buffers are not modelled "
                        "(they come out of the memory outside the KV budget)")
    if arch.is_sparse_mla:
        lin_b = (quant.bits / 8 + quant.scale_bytes_per_weight) if quant else model_b
        per_layer, why = indexer_weight_bytes(rules.version, arch.hidden_size, arch.q_lora_rank or arch.hidden_size,
                                              arch.index_head_dim or 0, arch.index_n_heads, lin_b, model_b)
        stages = [per_layer * n for n in (partition or [arch.num_layers])]
        w = w.model_copy(update={"bytes_per_gpu": w.bytes_per_gpu + stages[0],
                                 "stage_bytes": [b + x for b, x in zip(w.stage_bytes, stages)] if w.stage_bytes
                                 else w.stage_bytes,
                                 "source": w.source + f"; + {why}"})
    weights = w.bytes_per_gpu
    sources["weights_gib"] = w.source + ("; + rotary cos/sin cache" if w.rope_cache_bytes else "")
    draft_weights = 0
    if spec and spec.method == "mtp":
        draft_weights, why = mtp_draft_weights(arch, dtype, quant, tp)
        sources["draft_weights_gib"] = (f"{arch.mtp_layers} MTP layer(s) counted from config.json ({arch.mtp_head}): "
                                        f"{why} (weights.mtp_draft_weights); embedding and lm_head shared with the "
                                        "target")
    elif draft is not None:
        dtp = tp if draft.num_attention_heads % tp == 0 else 1
        dw = weights_per_gpu(draft, dtype, None, dtp, 1)
        draft_weights = dw.bytes_per_gpu
        if spec.method == "eagle3":
            draft_weights, why = eagle3_draft_weights(draft, arch, inp.draft_hf_config or {}, dtype, dtp)
        elif spec.method == "eagle":
            # EAGLE heads share the target's embedding (and lm_head unless they bring their own)
            # (vllm/v1/worker/gpu/spec_decode/eagle/utils.py:15-123)
            shared = round_up(draft.vocab_size, 64) * draft.hidden_size * model_b // tp
            draft_weights = max(draft_weights - shared, 0)
            if draft.vocab_size == arch.vocab_size and not draft.tie_word_embeddings:
                draft_weights = max(draft_weights - shared, 0)
        sources["draft_weights_gib"] = (f"draft config parameter count ({spec.method})"
                                        + (f": {why}" if spec.method == "eagle3" else ""))
    else:
        sources["draft_weights_gib"] = "no draft weights for this method" if spec else "no speculative decoding"

    # --- KV specs ---------------------------------------------------------------------------------
    mamba_mode = rules.mamba_cache_mode()
    if arch.has_state_layers:
        resolved["mamba_cache_mode"] = mamba_mode
        sources["mamba_cache_mode"] = ("prefix caching on by default for hybrid models: 'align', two states per "
                                       "request (vllm/model_executor/models/config.py:684-690)"
                                       if mamba_mode == "align" else "one state per request (mamba_cache_mode none)")
    if any(la.kind == LayerKind.KDA for la in arch.layers):
        sources["kda_state_bytes"] = kda_state_bytes(rules.version, arch.mamba, tp, num_spec, model_b)[1]
    avx512_bf16 = False
    if gpu.is_cpu and any(la.kind in (LayerKind.MAMBA1, LayerKind.MAMBA2, LayerKind.GDN) for la in arch.layers):
        if inp.cpu_avx512_bf16 is None:
            avx512_bf16 = host_has_avx512_bf16()
            warnings.append(f"CPU build: the SSM state is float32 only on CPUs with AVX-512 BF16 (vllm/platforms/"
                            f"cpu.py:301-321); assumed {'with' if avx512_bf16 else 'without'} it, as this "
                            "server's CPU: give cpu_avx512_bf16 for another CPU")
        else:
            avx512_bf16 = inp.cpu_avx512_bf16
        resolved["cpu_avx512_bf16"] = avx512_bf16
        sources["cpu_avx512_bf16"] = ("user input" if inp.cpu_avx512_bf16 is not None else
                                      "this server's CPU (/proc/cpuinfo flag avx512_bf16)")

    def specs_for(bs: int, stage: int = 0) -> dict[str, Spec]:
        shape_kw = dict(mla_token_bytes=mla_token_bytes, indexer_token_bytes=indexer_bytes, version=rules.version)
        s = build_specs(arch, tp=tp, pp=pp, block_size=bs, kv_bytes=kv_b, model_bytes=model_b, num_spec=num_spec,
                        is_cpu=gpu.is_cpu, mamba_cache_mode=mamba_mode, cpu_avx512_bf16=avx512_bf16, stage=stage,
                        partition=partition, **shape_kw)
        if stage:
            return s  # the draft's layers are placed with the first stage's (rank 0) here
        if spec and spec.method == "mtp":
            mtp_kv = arch.layers[:arch.mtp_layers]
            if arch.mtp_full_attention:  # Qwen3-Next / Qwen3.5: the MTP layers are full-attention layers
                full = next(la for la in arch.layers if la.kind == LayerKind.FULL)
                mtp_kv = [full] * arch.mtp_layers
            mtp_arch = arch.model_copy(update={"layers": mtp_kv, "num_layers": arch.mtp_layers})
            s.update(build_specs(mtp_arch, tp=tp, pp=1, block_size=bs, kv_bytes=kv_b, model_bytes=model_b,
                                 num_spec=num_spec, prefix="mtp.", draft=True, is_cpu=gpu.is_cpu,
                                 cpu_avx512_bf16=avx512_bf16, **shape_kw))
        elif draft is not None:
            s.update(build_specs(draft, tp=tp if draft.num_attention_heads % tp == 0 else 1, pp=1, block_size=bs,
                                 kv_bytes=kv_b, model_bytes=model_b, num_spec=num_spec, prefix="draft.", draft=True,
                                 is_cpu=gpu.is_cpu, cpu_avx512_bf16=avx512_bf16))
        return s

    specs = specs_for(block_size)
    kernel_align = 16 if not gpu.is_cpu else (16 if arch.kv_lora_rank else 128)
    mla_align = None
    if arch.kv_lora_rank and arch.has_state_layers and not gpu.is_cpu:
        mla_align, why = hybrid_mla_alignment(rules.version, block_size, inp.attention_backend)
        sources["hybrid_block_alignment"] = f"{mla_align} tokens ({why})"
    new_bs, mamba_pad = align_hybrid_block_size(specs, block_size, kernel_align, bool(arch.kv_lora_rank), mla_align)
    if new_bs != block_size or mamba_pad:
        if new_bs != block_size:
            warnings.append(f"attention block size raised to {new_bs} tokens so one page holds a Mamba state "
                            "(vllm/platforms/interface.py _align_hybrid_block_size)")
            sources["block_size"] = "raised to hold a Mamba/linear-attention state page"
        block_size = new_bs
        specs = _with_block_size(specs_for(block_size), block_size, mamba_pad)
    resolved["block_size"] = block_size

    in_flight = rules.max_concurrent_batches(
        pp, gpu.is_cpu, architectures=(arch.architecture,), is_moe=arch.num_experts > 0,
        is_hybrid=arch.has_state_layers) * mnbt
    ctx = KVContext(max_model_len=max_len, max_in_flight_tokens=in_flight, encoder_tokens=arch.encoder_tokens)
    groups = group_specs(specs, version=rules.version)

    # --- budget -----------------------------------------------------------------------------------
    total = gpu.memory_bytes
    requested = math.ceil(total * u)
    act_bytes = 4 if dtype == "float32" else 2
    if gpu.is_cpu:
        activation = non_torch = cuda_graph = 0
        sources["activation_peak_gib"] = sources["non_torch_gib"] = "not modelled on the CPU build"
        sources["cuda_graph_gib"] = "no CUDA graphs on the CPU build"
    else:
        act_kw = dict(tp=tp, max_num_seqs=seqs, max_num_batched_tokens=mnbt, act_bytes=act_bytes,
                      heavy_sampler=rules.sampler_sorts_logits(gpu.capability_tuple),
                      moe_workspace=not (quant and quant.name == "mxfp4"))
        activation = activation_peak_bytes(arch, stage="first" if pp > 1 else "only", **act_kw)
        sources["activation_peak_gib"] = FIT_SOURCE + ": max(sampler over max_num_seqs x vocab, forward over " \
            "max_num_batched_tokens) + MoE workspace"
        nt_tp = rules.non_torch_tp_fit_gib
        non_torch = int((nt_tp if tp > 1 else (NON_TORCH_GIB_PP if pp > 1 else NON_TORCH_GIB_SINGLE)) * GiB)
        sources["non_torch_gib"] = FIT_SOURCE + (": custom all-reduce + NCCL buffers (tp > 1)" if tp > 1
                                                 else ": cuBLAS workspaces")
        cuda_graph = 0 if inp.enforce_eager else cuda_graph_bytes(arch, pp, 0, partition)
        sources["cuda_graph_gib"] = "--enforce-eager: no CUDA graphs" if inp.enforce_eager else \
            FIT_SOURCE + ": 'Graph capturing finished … took X GiB' vs layers"
    deducted = rules.cuda_graph_memory_deducted and cuda_graph > 0
    if gpu.is_cpu and inp.kv_cache_memory_bytes is None:
        warnings.append(f"CPU build: the KV cache gets VLLM_CPU_KVCACHE_SPACE GiB when set, otherwise a share of the "
                        f"NUMA node's memory minus the process ({CPU_KV_SOURCE}); this estimate assumes "
                        f"{gpu.memory_gib:g} GiB ({_cpu_memory_origin(gpu)}): give kv_cache_memory_bytes for an exact "
                        "figure")
    in_use_at_start = 0
    if extensible:
        in_use = (inp.gpu_memory_in_use_gib or 0) * GiB
        in_use_fit = (IN_USE_AT_START_GIB_TP if tp * pp > 1 else IN_USE_AT_START_GIB_SINGLE) * GiB
        in_use_at_start = int(in_use + in_use_fit)
        sources["in_use_at_start_gib"] = (
            f"{_gib(in_use_at_start):.2f} GiB: vLLM's CUDA context" + (" and NCCL set-up" if tp * pp > 1 else "")
            + f" ({_gib(in_use_fit):.2f} GiB, fit to the 'Free memory on device ... on startup' of public H100 logs, "
            "shared cases gh-031/033/035/036)" + (f" + {_gib(in_use):.2f} GiB in use by others "
                                                "(--gpu-memory-in-use-gib)" if in_use else ""))
        resolved["in_use_at_start_gib"] = _gib(in_use_at_start)

    def kv_budget(weights_st: int, act_st: int, cg_st: int) -> int:
        """The KV bytes of one rank (or pipeline stage): the profiled budget, or the extensible KV cache's
        measured size with the fitted activation peak and CUDA-graph pool standing in for vLLM's measurements."""
        profiled = requested - weights_st - act_st - non_torch - (cg_st if deducted else 0)
        if not extensible:
            return profiled
        return min(profiled, extensible_kv_budget(
            total_bytes=total, requested_bytes=requested, in_use_bytes=in_use_at_start,
            non_kv_bytes=weights_st + non_torch + cg_st, transient_peak_bytes=act_st + cg_st,
            rocm=gpu.vendor == "amd"))

    if inp.kv_cache_memory_bytes is not None:
        available = inp.kv_cache_memory_bytes
        sources["available_kv_cache_gib"] = "--kv-cache-memory-bytes / VLLM_CPU_KVCACHE_SPACE (skips the budget rule)"
    elif extensible:
        capacity_bytes = requested - weights - draft_weights - activation - non_torch - (cuda_graph if deducted else 0)
        available = kv_budget(weights + draft_weights, activation, cuda_graph)
        resolved["kv_cache_capacity_gib"] = _gib(capacity_bytes)
        src = rules.rule("extensible_kv_cache_budget").source
        sources["available_kv_cache_gib"] = (
            f"the extensible KV cache of vLLM {rules.label}, sized after warmup: min(requested - non-KV in use, "
            "total - in use at start - non-KV in use - max(1 GiB, 0.75 x peak)) - peak, non-KV in use = weights + "
            "non-torch + CUDA graphs, peak = activation peak + CUDA-graph estimate "
            f"({src}); vLLM logs the capacity it reserves first, 'Available KV cache memory: "
            f"{_gib(capacity_bytes):.2f} GiB' (ceil(total x utilization) - weights - activation - non-torch - "
            "CUDA graph estimate)")
        warnings.append(
            f"vLLM {rules.label} sizes the KV cache after warmup and CUDA-graph capture from the memory it measures "
            "free (the extensible KV cache, on by default on CUDA and ROCm; vllm/v1/worker/extensible_kv_cache.py). "
            "This estimate puts the fitted activation peak and CUDA-graph pool in place of those measurements and "
            "assumes the sizing warmup's own peak (a full max_num_batched_tokens step with prompt logprobs) and "
            "torch's reservation growth stay below them; a larger measured peak takes 1.75x its excess from the KV "
            "cache. --kv-cache-memory-bytes turns the extensible KV cache off and fixes the size.")
    else:
        available = kv_budget(weights + draft_weights, activation, cuda_graph)
        sources["available_kv_cache_gib"] = (
            "ceil(total x gpu_memory_utilization) - weights - activation peak - non-torch"
            + (" - CUDA graph estimate (deducted since vLLM 0.20.0)" if deducted else
               " (CUDA graph memory not deducted in this release)" if cuda_graph else ""))
    pool_available = available
    if pp > 1 and inp.kv_cache_memory_bytes is None and not gpu.is_cpu:
        # Every stage sizes its own pool from its own layers and memory, and the engine gives every rank the
        # smallest number of blocks (get_kv_cache_configs, kv_cache_utils.py:2662-2678). The last stage holds
        # lm_head and runs the sampler; the others send hidden states on.
        first_bpb = max(g.bytes_per_block for g in groups) if groups else 0
        stage_blocks = []
        for st in range(pp):
            groups_st = groups if st == 0 else group_specs(_with_block_size(specs_for(block_size, st), block_size,
                                                                             mamba_pad) if mamba_pad else
                                                           specs_for(block_size, st), version=rules.version)
            act_st = activation if st == 0 else activation_peak_bytes(
                arch, stage="last" if st == pp - 1 else "first", **act_kw)
            cg_st = 0 if inp.enforce_eager else cuda_graph_bytes(arch, pp, st, partition)
            avail_st = kv_budget(w.stage_bytes[st], act_st, cg_st)
            bpb = max(g.bytes_per_block for g in groups_st) if groups_st else 0
            stage_blocks.append(max(avail_st, 0) // bpb if bpb else 0)
        tightest = min(range(pp), key=lambda i: stage_blocks[i])
        if stage_blocks[tightest] < stage_blocks[0]:
            pool_available = stage_blocks[tightest] * first_bpb
            warnings.append(f"pipeline stage {tightest} (of {pp}; layers {resolved['pp_layer_partition']}) has room for "
                            f"the fewest blocks ({stage_blocks[tightest]:,} vs {stage_blocks[0]:,} on the first "
                            "stage) and sets the number of blocks for every stage")

    cap = capacity(groups, pool_available, ctx, block_size, legacy_token_formula=rules.legacy_token_formula)
    sources["kv_cache_tokens"] = ("num_blocks // num_groups x block_size (vLLM <= 0.20.0 log formula)"
                                  if rules.legacy_token_formula else
                                  "int(max_concurrency x max_model_len) (vllm/v1/core/kv_cache_utils.py:2300)")
    sources["num_gpu_blocks"] = "available // bytes_per_block (vllm/v1/core/kv_cache_utils.py:1588)"
    sources["max_concurrency"] = "num_blocks / sum over groups of cdiv(max_memory, page) (kv_cache_utils.py:1195)"

    # --- KV bytes per token by layer type ------------------------------------------------------------
    by_type: dict[tuple[str, bool], LayerKV] = {}
    for name, s in specs.items():
        key = (s.kind, s.draft)
        entry = by_type.get(key)
        bpt = s.bytes_per_token
        state = s.state_bytes if isinstance(s, MambaSpec) else 0
        if entry is None:
            detail = ""
            if isinstance(s, MambaSpec):
                resident = 2 + s.prefill_checkpoint_blocks if s.cache_mode == "align" else 1
                detail = (f"state {state:,} B per request (x{resident + s.num_speculative_blocks} pages: "
                          f"mamba_cache_mode {s.cache_mode}, {s.num_speculative_blocks} speculative)")
            elif isinstance(s, SlidingWindowSpec):
                kept = min(s.sliding_window - 1 + ctx.max_in_flight_tokens, ctx.max_model_len)
                detail = (f"window {s.sliding_window} tokens; a request holds up to {kept:,} tokens of these layers: "
                          f"window - 1 + {ctx.max_in_flight_tokens:,} scheduled per step (max_num_batched_tokens), at "
                          f"most max_model_len (kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes)")
            elif isinstance(s, MLAAttentionSpec):
                detail = (f"latent {s.token_bytes} B ({resolved.get('kv_cache_format')})" if s.token_bytes
                          else f"latent {s.head_size} x {kv_b} B")
                if arch.is_sparse_mla:
                    detail += (f" + indexer keys {indexer_bytes} B (uint8) per layer; each layer is two KV specs "
                               "(latent and indexer), counted as two")
            else:
                detail = f"{s.num_kv_heads} KV heads x {s.head_size} x 2 (K,V) x {kv_b} B"
            by_type[key] = LayerKV(kind=s.kind, num_layers=1, block_size=s.block_size, page_size_bytes=s.page_size_bytes,
                                   bytes_per_token=bpt, state_bytes_per_request=state, detail=detail, draft=s.draft)
        else:
            entry.num_layers += 1
            entry.bytes_per_token += bpt
            entry.state_bytes_per_request += state
    kv_by_type = list(by_type.values())
    kv_per_token = sum(e.bytes_per_token for e in kv_by_type)
    draft_kv = sum(e.bytes_per_token for e in kv_by_type if e.draft)

    # --- verdict ------------------------------------------------------------------------------------
    fits, reason, _, est_len = _verdict(inp, arch, pool_available, cap, groups, ctx, max_len,
                                                 weights + draft_weights, requested, u, gpu)
    fit_condition = None
    if (tp > 1 and not gpu.is_cpu and inp.kv_cache_memory_bytes is None and gpu.name not in NON_TORCH_TP_FIT_GPUS
            and rules.version >= (0, 15, 0)):
        # the tp > 1 non-torch fit is the H100 NVLink logs'; elsewhere public logs show as little as 0.34 GiB
        slack = non_torch - int(NON_TORCH_GIB_TP_LOW * GiB)
        if slack > 0:
            unknown = (f"vLLM's non-torch memory at tensor_parallel_size {tp} (NCCL and custom all-reduce buffers) is "
                       f"taken as the {_gib(non_torch):.2f} GiB fit to H100 80GB HBM3 logs over NVLink; no public log "
                       f"covers the {gpu.name}, and others at tp > 1 show as little as {NON_TORCH_TP_LOW_SOURCE}")
            if fits:
                warnings.append(f"{unknown}: at that figure the KV cache gets {_gib(slack):.2f} GiB more per GPU")
            elif groups and _verdict(inp, arch, pool_available + slack, cap, groups, ctx, max_len,
                                     weights + draft_weights, requested, u, gpu)[0]:
                fit_condition = (f"vLLM's non-torch memory at tensor_parallel_size {tp} on the {gpu.name} stays "
                                 f"near the low end of the public logs ({NON_TORCH_TP_LOW_SOURCE}) rather than the "
                                 f"{_gib(non_torch):.2f} GiB fit to H100 NVLink logs: {_gib(slack):.2f} GiB more "
                                 "per GPU for the KV cache would fit it")
                sources["non_torch_gib"] += f"; {unknown}"

    return EstimateResult(
        model=inp.model_label, gpu=gpu.name, vllm_version=rules.label, total_memory_gib=gpu.memory_gib,
        requested_memory_gib=_gib(requested), weights_gib=_gib(weights), draft_weights_gib=_gib(draft_weights),
        activation_peak_gib=_gib(activation), non_torch_gib=_gib(non_torch), cuda_graph_gib=_gib(cuda_graph),
        cuda_graph_deducted=deducted, available_kv_cache_gib=_gib(available), kv_cache_tokens=cap.kv_cache_tokens,
        num_gpu_blocks=cap.num_blocks, max_concurrency=round(cap.max_concurrency, 2), max_model_len=max_len,
        block_size=block_size, kv_bytes_per_token=kv_per_token, kv_by_layer_type=kv_by_type,
        draft_kv_bytes_per_token=draft_kv, fits=fits, reason=reason, fit_condition=fit_condition,
        estimated_max_model_len=est_len, warnings=warnings, resolved=resolved,
        sources={**sources, "total_memory_gib": gpu.memory_source,
                 "requested_memory_gib": "ceil(total x gpu_memory_utilization) (vllm/v1/worker/utils.py:724)",
                 "kv_bytes_per_token": "sum over layers of the KV spec page / block_size (vllm/v1/kv_cache_interface.py)"},
    )


#: Where vLLM's CPU build sizes its KV cache (0.32.0): VLLM_CPU_KVCACHE_SPACE GiB when the variable is set (it becomes
#: kv_cache_memory_bytes), else ceil(NUMA node memory x gpu_memory_utilization) minus the process's resident memory.
CPU_KV_SOURCE = ("vllm/platforms/cpu.py:323-327 in 0.32.0: VLLM_CPU_KVCACHE_SPACE GiB -> kv_cache_memory_bytes; else "
                 "vllm/v1/worker/cpu_worker.py:72-76 requested = ceil(node total memory x gpu_memory_utilization) and "
                 ":234-236 KV = requested - the process's RSS")


def _cpu_memory_origin(gpu) -> str:
    """Where the CPU row's memory figure comes from: the user's, or the catalog's placeholder for the NUMA node."""
    if gpu.memory_source.startswith("user input"):
        return "the node memory given (gpu_memory_gib)"
    return "the CPU catalog row's placeholder for the NUMA node's memory (calculator/data/gpus.json), not this machine's"


def _cpu_budget_text(inp, gpu, u, requested) -> str:
    """The CPU build's KV budget in words, for a does-not-fit reason: the setting vLLM 0.32.0 sizes it with and the
    memory figure this estimate used (:data:`CPU_KV_SOURCE`)."""
    if inp.kv_cache_memory_bytes is not None:
        return (f"The KV space is the {inp.kv_cache_memory_bytes / GiB:.2f} GiB given: VLLM_CPU_KVCACHE_SPACE on vLLM's "
                "CPU build (vllm/platforms/cpu.py:323-327 in 0.32.0).")
    return (f"vLLM's CPU build reserves ceil({gpu.memory_gib:g} GiB x --gpu-memory-utilization {u}) = "
            f"{_gib(requested):.2f} GiB, {gpu.memory_gib:g} GiB being {_cpu_memory_origin(gpu)}; without "
            "VLLM_CPU_KVCACHE_SPACE its KV cache is that minus the process's memory (vllm/v1/worker/cpu_worker.py:72-76, "
            ":234-236 in 0.32.0), with it VLLM_CPU_KVCACHE_SPACE GiB (vllm/platforms/cpu.py:323-327): set it, or give "
            "the node's memory.")


def _verdict(inp, arch, available, cap, groups: list[KVGroup], ctx, max_len, weights, requested, u, gpu):
    """vLLM's admission check (``_check_enough_kv_cache_memory``, kv_cache_utils.py:1003-1040): one
    ``max_model_len`` request plus the null block must fit in the available KV memory. On the CPU build the reason
    names what vLLM sizes the KV cache with there and the memory figure used (:func:`_cpu_budget_text`)."""
    if not groups:
        return True, None, None, None
    needed = cap.bytes_per_request
    if available <= 0:
        if gpu.is_cpu and inp.kv_cache_memory_bytes is None:
            reason = (f"No available memory for the cache blocks: the model's weights take "
                      f"{_gib(requested - available):.2f} GiB of the {_gib(requested):.2f} GiB budget. "
                      + _cpu_budget_text(inp, gpu, u, requested))
        elif not gpu.is_cpu and weights > gpu.memory_gib * GiB:
            # the weights do not fit the device at all: vLLM loads them before it measures memory (vllm 0.32
            # v1/worker/gpu_worker.py:587-594 load_model; the KV budget, determine_available_memory, is :634 on)
            reason = (f"CUDA out of memory while loading the weights: they take {_gib(weights):.2f} GiB per GPU, more "
                      f"than the {gpu.memory_gib:g} GiB the {gpu.name} has, so vLLM fails in load_model "
                      "(v1/worker/gpu_worker.py:587-594 in 0.32.0) before it sizes the KV cache; spread them over "
                      "more GPUs (--tensor-parallel-size / --pipeline-parallel-size) or use a quantized checkpoint.")
        elif inp.kv_cache_memory_bytes is not None:
            reason = ("No available memory for the cache blocks: the KV space given (--kv-cache-memory-bytes"
                      + (", VLLM_CPU_KVCACHE_SPACE on the CPU build" if gpu.is_cpu else "") + ") is 0.")
        else:
            reason = (f"No available memory for the cache blocks: weights and runtime overheads take "
                      f"{_gib(requested - available):.2f} GiB of the {_gib(requested):.2f} GiB budget "
                      f"(--gpu-memory-utilization={u}).")
        return False, reason, None, None
    if needed <= available - cap.bytes_per_block:
        return True, None, None, None

    est = estimate_max_model_len(groups, ctx, available, max_len)
    reason = (f"To serve at least one request with max_model_len {max_len:,}, {needed / GiB:.2f} GiB of KV cache is "
              f"needed, which is larger than the available KV cache memory ({available / GiB:.2f} GiB). "
              f"Based on the available memory, the estimated maximum model length is {est:,}."
              + (" " + _cpu_budget_text(inp, gpu, u, requested) if gpu.is_cpu else ""))
    return False, reason, None, est


def checkpoint_kv_cache_dtype(hf_config: dict[str, Any], quant_config: dict[str, Any] | None,
                              rules: ReleaseRules) -> tuple[str, str] | None:
    """``(kv cache dtype, source)`` that ``--kv-cache-dtype auto`` takes from a ModelOpt checkpoint, or ``None``
    (auto stays the model dtype).

    From vLLM 0.14 (rule ``checkpoint_kv_cache_dtype``), ``EngineArgs.create_engine_config`` resolves ``auto``
    with ``resolve_kv_cache_dtype_string``: the checkpoint's quantization config (``config.json``'s
    ``quantization_config``, else ``hf_quant_config.json``, vllm/transformers_utils/config.py:888-901 in
    0.32.0) with a ``quant_method`` starting ``modelopt`` names ``kv_cache_scheme`` or ``kv_cache_quant_algo``
    (top level or under ``quantization``); ``FP8`` (or a static 8-bit float scheme) becomes ``fp8_e4m3``, an
    unknown value stays ``auto`` (vllm/utils/torch_utils.py:457-530 in 0.32.0).

    Raises:
        EngineInputError: (``kv_cache_dtype``) a 4-bit float KV scheme (``nvfp4``): not modelled.
    """
    if not rules.value("checkpoint_kv_cache_dtype"):
        return None
    qc = hf_config.get("quantization_config") if isinstance(hf_config.get("quantization_config"), dict) else None
    qc = qc or (quant_config if isinstance(quant_config, dict) else None)
    if not qc:
        return None
    inner = qc.get("quantization") if isinstance(qc.get("quantization"), dict) else qc
    method = str(qc.get("quant_method") or "")
    producer = qc.get("producer").get("name") if isinstance(qc.get("producer"), dict) else None
    if not method and (producer == "modelopt" or "modelopt_quant_config" in inner) and str(
            inner.get("quant_algo") or "").upper() in ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4"):
        # an hf_quant_config.json names no quant_method: vLLM sets it from the producer and quant_algo before it
        # resolves the cache dtype (vllm/transformers_utils/model_arch_config_convertor.py:263-291 in 0.32.0)
        method = "modelopt"
    if not method.startswith("modelopt"):
        return None
    algo = (inner.get("kv_cache_scheme") or qc.get("kv_cache_scheme") or inner.get("kv_cache_quant_algo")
            or qc.get("kv_cache_quant_algo"))
    where = "quantization config's " + ("kv_cache_scheme" if (inner.get("kv_cache_scheme") or
                                                             qc.get("kv_cache_scheme")) else "kv_cache_quant_algo")
    given = algo
    if isinstance(algo, dict):
        if algo.get("dynamic") is False and algo.get("num_bits") == 8 and algo.get("type") == "float":
            algo = "fp8"
        elif algo.get("num_bits") == 4 and algo.get("type") == "float":
            raise EngineInputError("kv_cache_dtype", "the checkpoint asks for a 4-bit float (nvfp4) KV cache, which "
                                   "this calculator does not model; pass --kv-cache-dtype explicitly")
        else:
            return None
    if isinstance(algo, str) and algo.lower() == "fp8":
        return "fp8_e4m3", (f"auto: the checkpoint's {where} {given!r} (ModelOpt) -> fp8_e4m3, as vLLM "
                            f"{rules.label} resolves it ({rules.rule('checkpoint_kv_cache_dtype').source})")
    return None
