"""Weights on one rank as SGLang's ``Load weight end ... mem usage`` reports them, from config.json alone.

``mem usage`` is ``free before loading - free after loading`` (``torch.cuda.mem_get_info`` after
``torch.cuda.empty_cache()``), so it counts everything the process holds on the GPU once the model is built
and its weights post-processed, not only the parameters. :func:`estimate` starts from the parameter count
(:func:`calculator.engine.weights.weights_per_gpu`, vLLM's sharding rules) and adds or removes what SGLang
does differently, each as a :class:`Term` with its source:

- ``rope``: the rotary cos/sin cache is a GPU buffer built in ``__init__`` (one per distinct rotary embedding,
  ``get_rope`` caches them). SGLang keeps it in float32 on CUDA and in the model dtype elsewhere
  (``RotaryEmbedding.__init__``: ``if not _is_cuda: cache = cache.to(dtype)``), in float32 on ROCm too from 0.5.23
  (``if not (_is_cuda or _is_hip or ...)``); DeepSeek's YaRN class also keeps ``cos_cached_total`` /
  ``sin_cached_total`` (float32, full rotary width) from 0.5.7, on NPU only from 0.5.23. ``rotary_dim`` is
  ``head_dim x partial_rotary_factor`` (read from ``rope_parameters`` too).
- ``mla_a_proj_replicated``: DeepSeek-style MLA keeps ``q_a_proj`` and ``kv_a_proj_with_mqa`` (and their RMSNorms)
  replicated on every rank (``ReplicatedLinear``; fused as ``fused_qkv_a_proj_with_mqa`` from 0.4.10); the shared
  count already holds them whole (vLLM does the same), so this term only takes back the DP-attention split of them.
- ``vision``: SGLang shards the Qwen3-VL / Qwen3.5 vision tower by the attention-TP size
  (``Qwen3VLMoeVisionModel``: ``ColumnParallelLinear`` / ``RowParallelLinear``); Kimi-K2.5's MoonViT shards only
  its attention (``VisionAttention``), its MLP (``MLP2``: ``nn.Linear``) and projector (``ReplicatedLinear``)
  stay whole on every rank. Llama 4 served text-only (the default) builds no vision model nor projector: its
  count comes out. Other vision towers: the count's rule (replicated), said in a note.
- ``wna16_g_idx``: compressed-tensors W4A16/W8A16 MoE on ROCm (``CompressedTensorsWNA16TritonMoE``, from 0.5.9)
  keeps the four int32 ``g_idx`` / ``g_idx_sort_indices`` tensors of every MoE layer (``num_experts x hidden``
  twice, ``num_experts x intermediate / tp`` twice); the CUDA Marlin path replaces them with empty tensors. From
  0.5.23 SM100 GPUs take the Triton path too for symmetric INT4 group-32/128 schemes without act-order.
- ``dp_attention:embedding``: under DP attention each model file says how its input embedding
  (``VocabParallelEmbedding``) is split (:func:`dp_embedding_split`, read per release): whole on every rank
  (``enable_tp=not is_dp_attention_enabled()``: DeepSeek up to 0.5.7, Qwen2/3 (MoE), GLM-4.5, gpt-oss, Qwen3-Next from
  0.4.10 to 0.5.8.post1), over the attention-TP group (``use_attn_tp_group=is_dp_attention_enabled()``: DeepSeek from
  0.5.8.post1, the others from 0.5.9, MiniMax-M2 in 0.5.23) or over the whole TP group (Llama, Mixtral, MiniMax-M2 up
  to 0.5.10, Qwen2 in 0.4.3.post4: the count's rule); other classes: a note. The lm_head stays split over the TP group
  (``ParallelLMHead(use_attn_tp_group=enable_dp_lm_head)``, off by default).
- ``aiter_moe_copy``: Qwen3-MoE classes cache ``dict(self.named_parameters())`` in ``load_weights``
  (``_cached_params_dict``, 0.5.3 to 0.5.9), and with ``SGLANG_USE_AITER=1`` (set in SGLang's ROCm images,
  ``docker/Dockerfile.rocm``) ``UnquantizedFusedMoEMethod.process_weights_after_loading`` replaces ``w13_weight`` /
  ``w2_weight`` by shuffled copies: the cached originals stay alive, so unquantized expert weights are held twice.
- ``allocator``: PyTorch's caching allocator (``c10/cuda/CUDACachingAllocator.cpp``; hipified the same on
  ROCm) rounds each segment: allocations of at least 10 MiB (``kMinLargeAlloc``) get a segment rounded up to
  2 MiB (``kRoundLarge``), 1-10 MiB ones are carved from 20 MiB segments (``kLargeBuffer``), at most 1 MiB from
  2 MiB ones (``kSmallBuffer``), blocks rounded to 512 B; a split remainder stays in its segment, and
  ``empty_cache`` only returns whole free segments. :func:`allocator_reserved` replays that best-fit policy over
  the parameters in construction order (standard unquantized decoder layouts; other layouts: not modelled,
  under 2 MiB per tensor).

What this does not count (said in ``notes``): kernel modules and library workspaces first loaded while the
weights load (0 to 0.07 GiB in the public CUDA logs), and buffers of model classes not listed above.
Units: bytes; GiB = 2**30 B.
"""
from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from calculator.engine.arch import parse_config
from calculator.engine.weights import is_excluded, mtp_draft_weights, mtp_layer_bytes_per_weight, resolve_quant, round_up, weights_per_gpu

from .releases import at_least, cite, has_rule

MIB = 1 << 20
# c10/cuda/CUDACachingAllocator.cpp (the constants have not changed since PyTorch 1.x)
K_MIN_BLOCK = 512
K_SMALL_SIZE = 1 * MIB
K_SMALL_BUFFER = 2 * MIB
K_LARGE_BUFFER = 20 * MIB
K_MIN_LARGE_ALLOC = 10 * MIB
K_ROUND_LARGE = 2 * MIB
ALLOCATOR_SOURCE = ("PyTorch c10/cuda/CUDACachingAllocator.cpp: round_size (512 B), get_allocation_size "
                    "(2 MiB segments up to 1 MiB, 20 MiB up to 10 MiB, else rounded up to 2 MiB), best-fit reuse, "
                    "split remainders kept in their segment")

_QWEN3_MOE_CACHED = {"Qwen3MoeForCausalLM", "Qwen3VLMoeForConditionalGeneration",
                     "Qwen3OmniMoeForConditionalGeneration"}
# How each model family splits its input embedding under DP attention (releases.py embed_<family> cites the line per
# release): the architecture's family (why, when the class is not in the family's own file), and per family the mode
# from each release on. "whole": VocabParallelEmbedding(enable_tp=not is_dp_attention_enabled()); "attn_tp":
# use_attn_tp_group=is_dp_attention_enabled() (0.5.23 DeepSeek: get_embedding_tp_kwargs, vocab_parallel_embedding.py:185,
# unless SGLANG_ENABLE_EMBED_REPLICATION); "tp": no such argument, split over the whole TP group.
_EMBED_FAMILY: dict[str, tuple[str, str]] = {
    "DeepseekV2ForCausalLM": ("deepseek", ""), "DeepseekV3ForCausalLM": ("deepseek", ""),
    "DeepseekV32ForCausalLM": ("deepseek", ""),
    "KimiK25ForConditionalGeneration": ("deepseek", " (its language model is DeepseekV3ForCausalLM)"),
    "GlmMoeDsaForCausalLM": ("deepseek", " (GlmMoeDsaForCausalLM(DeepseekV2ForCausalLM), models/glm4_moe.py)"),
    "Qwen2ForCausalLM": ("qwen2", ""), "Qwen3ForCausalLM": ("qwen2", " (Qwen3Model(Qwen2Model))"),
    "Qwen2MoeForCausalLM": ("qwen2_moe", ""), "Qwen3MoeForCausalLM": ("qwen2_moe", " (Qwen3MoeModel(Qwen2MoeModel))"),
    "Glm4MoeForCausalLM": ("glm4_moe", ""), "GptOssForCausalLM": ("gpt_oss", ""),
    "Qwen3NextForCausalLM": ("qwen3_next", ""), "LlamaForCausalLM": ("llama", ""), "MixtralForCausalLM": ("mixtral", ""),
    "MiniMaxM2ForCausalLM": ("minimax_m2", ""),
}
_EMBED_MODES: dict[str, tuple[tuple[str, str], ...]] = {
    "deepseek": (("0.4.3.post4", "whole"), ("0.5.8.post1", "attn_tp")),
    "qwen2": (("0.4.3.post4", "tp"), ("0.4.10.post2", "whole"), ("0.5.9", "attn_tp")),
    "qwen2_moe": (("0.4.3.post4", "tp"), ("0.4.10.post2", "whole"), ("0.5.9", "attn_tp")),
    "glm4_moe": (("0.4.10.post2", "whole"), ("0.5.9", "attn_tp")),
    "gpt_oss": (("0.5.3", "whole"), ("0.5.9", "attn_tp")),
    "qwen3_next": (("0.5.3", "whole"), ("0.5.9", "attn_tp")),
    "llama": (("0.4.3.post4", "tp"),),
    "mixtral": (("0.4.3.post4", "tp"),),
    "minimax_m2": (("0.5.7", "tp"), ("0.5.23", "attn_tp")),
}
_EMBED_WHY = {"whole": "VocabParallelEmbedding(enable_tp=not is_dp_attention_enabled()): whole on every rank",
              "attn_tp": "VocabParallelEmbedding(use_attn_tp_group=is_dp_attention_enabled()): split over the "
                         "attention-TP group",
              "tp": "VocabParallelEmbedding without a DP-attention argument: split over the whole TP group"}


def dp_embedding_split(release: str, arch_name: str) -> tuple[str, str] | None:
    """How SGLang ``release`` splits the input embedding of ``arch_name`` under DP attention: ``(mode, citation)`` with
    ``mode`` ``"whole"`` (every rank holds it), ``"attn_tp"`` (split over the attention-TP group) or ``"tp"`` (split over
    the TP group, as without DP attention); ``None`` for a class whose model file was not read here."""
    fam = _EMBED_FAMILY.get(arch_name)
    if fam is None or not has_rule(release, f"embed_{fam[0]}"):
        return None
    mode = None
    for first, m in _EMBED_MODES[fam[0]]:
        if at_least(release, first):
            mode = m
    if mode is None:
        return None
    return mode, f"{cite(release, f'embed_{fam[0]}')}{fam[1]} {_EMBED_WHY[mode]}"

_QWEN3_VL_VISION = {"Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration",
                    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}


class Term(BaseModel):
    """One part of the weights figure: ``bytes`` per rank (negative: removed from the count)."""

    name: str
    bytes: int
    kind: str  # estimate | source
    source: str


class WeightsEstimate(BaseModel):
    """``total`` bytes per rank = the sum of ``terms``; ``notes`` say what is not counted."""

    total: int
    terms: list[Term]
    notes: list[str] = []


def _round_size(size: int) -> int:
    return max(K_MIN_BLOCK, -(-size // K_MIN_BLOCK) * K_MIN_BLOCK)


def _segment_size(size: int) -> int:
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


def allocator_reserved(sizes: list[int]) -> int:
    """Bytes of GPU segments PyTorch's caching allocator holds after allocating tensors of ``sizes`` bytes in
    that order and freeing none: best fit among the free blocks of the pool (small: at most 1 MiB; large: the
    rest), else a new segment of ``get_allocation_size``; a block is split when the remainder is at least
    512 B (small pool) or more than 1 MiB (large pool). Source: :data:`ALLOCATOR_SOURCE`."""
    free_small: list[int] = []
    free_large: list[int] = []
    reserved = 0
    for size in sizes:
        r = _round_size(size)
        pool = free_small if r <= K_SMALL_SIZE else free_large
        fits = [b for b in pool if b >= r]
        if fits:
            block = min(fits)
            pool.remove(block)
        else:
            block = _segment_size(r)
            reserved += block
        rest = block - r
        if (pool is free_small and rest >= K_MIN_BLOCK) or (pool is free_large and rest > K_SMALL_SIZE):
            pool.append(rest)
    return reserved


def _partial_rotary(c: dict[str, Any]) -> float:
    for src in (c, c.get("rope_parameters") or {}, c.get("rope_scaling") or {}):
        if isinstance(src, dict) and src.get("partial_rotary_factor"):
            return float(src["partial_rotary_factor"])
    return 1.0


def _rope_type(c: dict[str, Any]) -> str | None:
    rs = c.get("rope_scaling") or c.get("rope_parameters") or {}
    return rs.get("rope_type", rs.get("type")) if isinstance(rs, dict) else None


def rope_bytes(c: dict[str, Any], arch, *, release: str, is_hip: bool, model_bytes: int) -> tuple[int, str]:
    """Bytes of SGLang's rotary caches on one rank and the formula."""
    positions = arch.rope_cache_len + arch.rope_cache_len_extra
    if not positions:
        return 0, "no rotary embedding"
    gemma3_default = (arch.model_type in ("gemma3", "gemma3_text") and has_rule(release, "gemma3_rope")
                      and at_least(release, "0.5.10.post1"))
    if gemma3_default:
        # from 0.5.10.post1 the global layers build their rotary embedding with rope_type "default" too: two caches
        # (local and global base) of max_position_embeddings positions each, the linear factor not applied
        positions = 2 * (arch.rope_cache_len_extra or arch.rope_cache_len)
    if arch.kv_lora_rank:
        rd = arch.qk_rope_head_dim or arch.rotary_dim
    else:
        head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        rd = int(head_dim * _partial_rotary(c))
    hip_dtype = is_hip and not at_least(release, "0.5.23")  # 0.5.23 keeps float32 on ROCm as well
    elem = model_bytes if hip_dtype else 4
    total = positions * rd * elem
    text = (f"{positions} positions x rotary_dim {rd} x {elem} B ("
            + ("model dtype on ROCm" if hip_dtype else "float32 on CUDA and ROCm" if at_least(release, "0.5.23")
               else "float32 on CUDA") + ")")
    if gemma3_default:
        text += (f"; Gemma 3: local and global caches of {positions // 2} positions each, the global layers' "
                 f"rope_type 'default' ({cite(release, 'gemma3_rope')})")
    if arch.kv_lora_rank and _rope_type(c) in ("yarn", "deepseek_yarn") and at_least(release, "0.5.7") \
            and not at_least(release, "0.5.23"):
        total += 2 * positions * rd * 4
        text += f" + cos_cached_total / sin_cached_total 2 x {positions} x {rd} x 4 B (DeepseekScalingRotaryEmbedding)"
    elif arch.kv_lora_rank and _rope_type(c) in ("yarn", "deepseek_yarn") and at_least(release, "0.5.23"):
        text += f"; no cos/sin_cached_total (built on NPU only, {cite(release, 'rope_yarn_npu')})"
    return total, text


def _dense_layout(c: dict[str, Any], arch, tp: int, attn_tp: int, b: int) -> list[int] | None:
    """Parameter sizes in construction order for a standard unquantized decoder (GQA attention with merged QKV,
    merged gate/up MLP or fused MoE experts), or ``None`` for any other layout."""
    if arch.kv_lora_rank or arch.params.mamba or arch.params.vision or arch.params.shared_experts or arch.mtp_layers:
        return None
    if any(la.kind.value not in ("full_attention",) for la in arch.layers):
        return None
    h, heads, kv, hd = arch.hidden_size, arch.num_attention_heads, arch.num_kv_heads, arch.head_dim
    if heads % attn_tp:
        return None
    kv_rank = max(1, kv // attn_tp)
    vocab = round_up(arch.vocab_size, 64)
    bias = bool(c.get("attention_bias")) or arch.model_type in ("qwen2", "qwen2_moe")
    qk_norm = arch.model_type in ("qwen3", "qwen3_moe")
    sizes = [vocab // tp * h * b]
    for _ in range(arch.num_layers):
        qkv = (heads // attn_tp + 2 * kv_rank) * hd
        sizes.append(qkv * h * b)
        if bias:
            sizes.append(qkv * b)
        sizes.append(h * heads // attn_tp * hd * b)
        if qk_norm:
            sizes += [hd * b, hd * b]
        if arch.num_experts:
            e, mi = arch.num_experts, arch.moe_intermediate_size
            if mi % tp:
                return None
            sizes += [e * h * b, e * 2 * mi // tp * h * b, e * h * mi // tp * b]
        else:
            if arch.intermediate_size % tp:
                return None
            sizes += [2 * arch.intermediate_size // tp * h * b, h * arch.intermediate_size // tp * b]
        sizes += [h * b, h * b]
    sizes.append(h * b)
    if not arch.tie_word_embeddings:
        sizes.append(vocab // tp * h * b)
    return sizes


def _config_attr(c: dict[str, Any], key: str, default: Any) -> Any:
    """``getattr(config, key, default)`` on the config SGLang builds from ``c`` (a key present with ``null`` is
    ``None``, not the default)."""
    return c[key] if key in c else default


def dsa_indexer_rope_bytes(c: dict[str, Any], arch, *, release: str, is_hip: bool, model_bytes: int) -> tuple[int, str]:
    """Bytes of the DSA indexer's own rotary cache on one rank, and why: 0 when it is the MLA attention's.

    ``get_rope`` keeps one module per key (head size, rotary dim, positions, base, ``is_neox_style``, rope_scaling,
    dtype; ``rope_key``), shared by every caller of the process. The indexer (every DSA layer's, the NextN draft's
    too) passes the MLA attention's sizes, base and rope_scaling dict, so it gets a cache of its own only when its
    ``is_neox_style`` differs (``idx_rope_neox`` against ``mla_rope_neox``):

    - 0.5.3 / 0.5.3.post1: both ``False``: shared, nothing more;
    - 0.5.7 / 0.5.8.post1: the indexer ``True``, the attention ``False``: a second cache;
    - from 0.5.9: the indexer ``not config.indexer_rope_interleave`` (default ``False`` -> neox), the attention
      ``not config.rope_interleave`` (default ``True`` -> not neox): a second cache for DeepSeek-V3.2 (neither key),
      none for GLM-5 (both ``true``).

    The second cache is the same class at the same sizes as the attention's (:func:`rope_bytes`), built while the model
    loads, so it is inside ``Load weight end ... mem usage``: 40 MiB for DeepSeek-V3.2 in 0.5.23 (163,840 positions x
    64 x 4 B), 120 MiB in 0.5.7 to 0.5.10.post1 (DeepseekScalingRotaryEmbedding's cos/sin_cached_total as well)."""
    if c.get("index_topk") is None or not has_rule(release, "idx_rope_neox"):
        return 0, "no DSA indexer"
    if at_least(release, "0.5.9"):
        idx = not _config_attr(c, "indexer_rope_interleave", False)
        mla = not _config_attr(c, "rope_interleave", True)
    else:
        idx, mla = at_least(release, "0.5.7"), False
    sides = (f"indexer is_neox_style {idx} ({cite(release, 'idx_rope_neox')}), attention {mla} "
             f"({cite(release, 'mla_rope_neox')})")
    if idx == mla:
        return 0, f"{sides}: the same get_rope key, one shared cache ({cite(release, 'rope_key')})"
    rb, text = rope_bytes(c, arch, release=release, is_hip=is_hip, model_bytes=model_bytes)
    aiter = " (SGLang's get_rope; with SGLANG_USE_AITER=1 aiter's own get_rope builds it)" if is_hip else ""
    return rb, (f"the DSA indexer's rotary cache: {sides} differ, so get_rope ({cite(release, 'rope_key')}) builds a "
                f"second one{aiter}, shared by every indexer: {text}")


def dsa_indexer_bytes(c: dict[str, Any], *, release: str, lin_b: float, model_b: int, is_hip: bool) -> tuple[int, str]:
    """Bytes of one DSA lightning indexer (DeepSeek-V3.2, GLM-5: ``index_topk`` in the config) on one rank as SGLang
    ``release`` builds it, and the formula. ``c``: the text config; ``lin_b``: bytes per weight of the layer's quantized
    linears (``bits / 8`` + scales, or ``model_b`` when unquantized); ``model_b``: the model dtype's bytes.

    Every part is whole on every rank (``ReplicatedLinear`` or a norm), ``h`` = hidden_size, ``d`` = index_head_dim,
    ``n`` = index_n_heads, ``q`` = q_lora_rank (hidden_size without one):

    - ``wq_b`` ``q x n*d`` and ``wk`` ``h x d`` with the layer's quant_config (``idx_wq_b``, ``idx_wk``);
    - ``weights_proj`` ``h x n``, never quantized: the model dtype up to 0.5.3.post1, float32 in 0.5.7, bfloat16 on CUDA
      (float32 on ROCm) from 0.5.8.post1 to 0.5.10.post1, bfloat16 in 0.5.23 (``idx_weights_proj``);
    - ``k_norm``: a LayerNorm of ``d`` with weight and bias in float32 (``idx_k_norm``); 0.5.23: an RMSNorm of ``d`` at
      the model dtype when ``index_k_norm_type`` is ``"rms"`` (``idx_k_norm_rms``);
    - 0.5.23 on CUDA with an interleaved indexer rope (``indexer_rope_interleave``: ``is_neox_style`` False,
      ``idx_neox``) fuses ``wk`` and ``weights_proj`` into one bfloat16 ``wk_weights_proj`` ``h x (d + n)``, unquantized
      (``idx_fusion``, ``idx_fused``; SGLANG_DISABLE_DSA_INDEXER_FUSION unset, its default).

    Its rotary cache is one for every indexer of the process, counted by :func:`dsa_indexer_rope_bytes`.
    Raises EngineInputError(config.index_head_dim) when the config lacks the indexer's sizes."""
    from calculator.engine.errors import EngineInputError

    h = c["hidden_size"]
    if not c.get("index_head_dim") or not c.get("index_n_heads"):
        raise EngineInputError("config.index_head_dim", "a DSA model (index_topk) needs index_head_dim and "
                               "index_n_heads in config.json")
    d, n = int(c["index_head_dim"]), int(c["index_n_heads"])
    q = c.get("q_lora_rank") or h
    wq_b = q * n * d * lin_b
    parts = [f"wq_b {q} x {n * d} x {lin_b:g} B ({cite(release, 'idx_wq_b')})"]
    fused = at_least(release, "0.5.23") and not is_hip and bool(c.get("indexer_rope_interleave"))
    if fused:
        wk_wp = h * (d + n) * 2
        parts.append(f"wk_weights_proj {h} x ({d} + {n}) x 2 B, bfloat16 unquantized (the indexer rope is interleaved, "
                     f"{cite(release, 'idx_neox')}: fused on CUDA, {cite(release, 'idx_fusion')}, "
                     f"{cite(release, 'idx_fused')})")
    else:
        if at_least(release, "0.5.23"):
            wp_b, wp_why = 2, "bfloat16"
        elif at_least(release, "0.5.8.post1"):
            wp_b, wp_why = (4, "float32 off CUDA") if is_hip else (2, "bfloat16 on CUDA")
        elif at_least(release, "0.5.7"):
            wp_b, wp_why = 4, "float32"
        else:
            wp_b, wp_why = model_b, "the model dtype"
        wk_wp = h * d * lin_b + h * n * wp_b
        parts.append(f"wk {h} x {d} x {lin_b:g} B ({cite(release, 'idx_wk')}) + weights_proj {h} x {n} x {wp_b} B, "
                     f"{wp_why} ({cite(release, 'idx_weights_proj')})")
    if at_least(release, "0.5.23") and c.get("index_k_norm_type") == "rms":
        norm = d * model_b
        parts.append(f"k_norm RMSNorm {d} x {model_b} B ({cite(release, 'idx_k_norm_rms')})")
    else:
        norm = 2 * d * 4
        parts.append(f"k_norm LayerNorm weight + bias 2 x {d} x 4 B, float32 ({cite(release, 'idx_k_norm')})")
    return int(wq_b + wk_wp + norm), "; ".join(parts)


def gptoss_mxfp4_sm90_bytes(c: dict[str, Any], *, release: str, tp: int) -> tuple[int, str]:
    """Bytes on one rank of gpt-oss's MXFP4 experts as SGLang ``release`` (0.5.3 on) keeps them on Hopper (SM90, CUDA),
    where gpt-oss's MoE runner defaults to ``triton_kernel`` (``gptoss_tk_backend``; ep_size 1, triton_kernels installed:
    sgl-kernel / sglang-kernel ship it), and the formula. ``c``: the text config; ``tp``: the MoE TP size.

    Per MoE layer, ``E`` experts, hidden ``H``, per-rank intermediate ``I = round_up(intermediate_size / tp, a)`` with
    ``a`` = 32 up to 0.5.9, 64 from 0.5.10.post1 (``gptoss_tk_pad``; FusedMoE pads nothing else here):

    - the packed e2m1 weights after ``_swizzle_mxfp4`` (``gptoss_tk_swizzle``), in triton_kernels' Hopper value layout:
      up to 0.5.10.post1 (triton_kernels of sgl-kernel 0.3.14.post1 to sglang-kernel 0.4.1,
      tensor_details/layout_details/hopper_value.py:136-148) the uint8 ``(N, K/2)`` matrix padded to 16 rows and 32
      columns: w13 ``E x round_up(2I, 16) x round_up(H/2, 32)``, w2 ``E x round_up(H, 16) x round_up(I/2, 32)``; 0.5.23
      (sglang-kernel 0.4.10, hopper_value.py:56-64) ``K/2`` to 64 and ``N`` to 256: w13 ``E x round_up(H/2, 64) x
      round_up(2I, 256)``, w2 ``E x round_up(I/2, 64) x round_up(H, 256)``;
    - the swizzled E8M0 scales (Hopper scale layout, 8 warps): ``N`` rows padded to 256 and ``K/32`` columns to 2
      (hopper_scale.py:57-61; 0.4.10: :55-62); 0.5.23 first pads the columns to ``round_up(K, 128) / 32``
      (``gptoss_tk_scale_pad``);
    - the unswizzled scale Parameters ``E x 2I x H/32`` and ``E x H x I/32`` uint8, which stay registered: only the
      weights are deleted (``gptoss_tk_del``);
    - the biases in float32 (``gptoss_tk_bias``): ``E x 2I x 4 + E x H x 4``.

    Checked on the CPU against triton_kernels' own ``convert_layout`` of both versions (one expert, H = I = 2880)."""
    h, e, inter = int(c["hidden_size"]), int(c["num_local_experts"]), int(c["intermediate_size"])
    n_layers = int(c["num_hidden_layers"])
    a = 64 if at_least(release, "0.5.10.post1") else 32
    i = round_up(inter // tp, a)
    if at_least(release, "0.5.23"):
        w13 = e * round_up(h // 2, 64) * round_up(2 * i, 256)
        w2 = e * round_up(i // 2, 64) * round_up(h, 256)
        s13 = e * round_up(2 * i, 256) * (round_up(h, 128) // 32)
        s2 = e * round_up(h, 256) * (round_up(i, 128) // 32)
        layout = ("sglang-kernel 0.4.10 triton_kernels: values K/2 to 64, N to 256; scales padded to round_up(K, 128)/32 "
                  f"columns ({cite(release, 'gptoss_tk_scale_pad')}), N to 256")
    else:
        w13 = e * round_up(2 * i, 16) * round_up(h // 2, 32)
        w2 = e * round_up(h, 16) * round_up(i // 2, 32)
        s13 = e * round_up(2 * i, 256) * round_up(h // 32, 2)
        s2 = e * round_up(h, 256) * round_up(i // 32, 2)
        layout = "sgl-kernel triton_kernels: values N to 16, K/2 to 32; scales N to 256, K/32 to 2"
    kept = e * 2 * i * (h // 32) + e * h * (i // 32)
    bias = e * 2 * i * 4 + e * h * 4
    per = w13 + w2 + s13 + s2 + kept + bias
    return n_layers * per, (
        f"gpt-oss MXFP4 experts on SM90 with the triton_kernel MoE runner ({cite(release, 'gptoss_tk_backend')}): "
        f"{n_layers} layers x [{e} experts, intermediate {inter} / TP {tp} padded to {i} "
        f"({cite(release, 'gptoss_tk_pad')}); swizzled weights w13 {w13:,} + w2 {w2:,} B and scales {s13:,} + {s2:,} B "
        f"({cite(release, 'gptoss_tk_swizzle')}; {layout}); the unswizzled scale Parameters {kept:,} B stay "
        f"({cite(release, 'gptoss_tk_del')} deletes only the weights); float32 biases {bias:,} B "
        f"({cite(release, 'gptoss_tk_bias')})] = {per:,} B per layer")


def _kimi_vision(hf_config: dict[str, Any], tp: int, b: int) -> tuple[int, str]:
    """MoonViT + projector of KimiK25ForConditionalGeneration on one rank: attention (qkv, proj) split by TP,
    MLP (``MLP2``, ``nn.Linear``), norms, patch/position embeddings and the projector whole."""
    vc = hf_config.get("vision_config") or {}
    hv = vc.get("vt_hidden_size", 1152)
    layers = vc.get("vt_num_hidden_layers", 27)
    inter = vc.get("vt_intermediate_size", 4304)
    patch = vc.get("patch_size", 14)
    mh, mw = vc.get("merge_kernel_size", [2, 2])
    text_h = vc.get("text_hidden_size") or hf_config.get("text_config", {}).get("hidden_size")
    attn = layers * (3 * hv * hv + 3 * hv + hv * hv + hv)
    whole = layers * (2 * hv * inter + inter + hv + 4 * hv)  # MLP2 fc0/fc1 + two LayerNorms
    whole += 3 * patch * patch * hv + hv + vc.get("init_pos_emb_height", 64) * vc.get("init_pos_emb_width", 64) * hv
    whole += 2 * hv  # final norm
    proj_in = hv * mh * mw
    whole += 2 * hv + proj_in * proj_in + proj_in + proj_in * text_h + text_h
    return int((attn / tp + whole) * b), (f"MoonViT {layers} layers: attention {attn:,} params / TP {tp}, MLP, "
                                          f"norms, embeddings and projector {whole:,} params whole")


def estimate(hf_config: dict[str, Any], *, release: str, is_hip: bool, model_dtype: str, quantization: str | None,
             tp: int, attn_tp: int, quant_config: dict | None = None, draft: bool = False,
             sm_major: int | None = None) -> WeightsEstimate:
    """Bytes of weights on one rank as SGLang's ``mem usage`` counts them (see the module docstring).
    ``sm_major``: the CUDA compute capability's major (SGLang 0.5.23 picks the WNA16 MoE kernel by it)."""
    from .memory import _text  # local import: memory imports this module

    arch = parse_config(hf_config)
    quant = resolve_quant(arch, quant_config, quantization)
    est = weights_per_gpu(arch, model_dtype, quant, tp, 1)
    b = 2 if model_dtype in ("bfloat16", "float16") else 4
    lin = (quant.bits / 8 + quant.scale_bytes_per_weight) if quant and not quant.experts_only else b
    c = _text(hf_config)
    terms: list[Term] = []
    notes: list[str] = []
    arch_name = (hf_config.get("architectures") or [""])[0]

    def add(name: str, value: float, kind: str, source: str) -> None:
        if value:
            terms.append(Term(name=name, bytes=int(value), kind=kind, source=source))

    add("parameters", est.bytes_per_gpu - est.rope_cache_bytes, "estimate",
        "parameter count x bytes per parameter, sharded by TP (calculator.engine.weights)")

    attn_b = lin
    qc = arch.quantization_config or {}
    ignore = qc.get("ignore") if isinstance(qc.get("ignore"), list) else []
    if quant and ignore:
        # compressed-tensors keeps the modules of its ``ignore`` list unquantized (model dtype)
        def ignored(name: str) -> bool:
            return any((re.match(pat[3:], name) if pat.startswith("re:") else pat == name) for pat in ignore)
        # the modules themselves are priced unquantized by weights_per_gpu (weights.is_excluded); here only the
        # attention's byte width for the terms below
        if arch.params.attention and ignored("model.layers.0.self_attn.q_proj"):
            attn_b = b
    if attn_tp != tp:
        add("dp_attention:attention", arch.params.attention * attn_b * (1 / attn_tp - 1 / tp), "source",
            "DP attention: attention weights split by the attention-TP size")
        # the input embedding as the model file builds it under DP attention (dp_embedding_split); the lm_head stays
        # TP-split unless --enable-dp-lm-head (not modelled)
        emb = round_up(arch.vocab_size, 64) * arch.hidden_size * b
        rule = dp_embedding_split(release, arch_name)
        if rule is None:
            notes.append(f"DP attention: how SGLang {release}'s {arch_name} splits its input embedding (the whole TP "
                         "group, the attention-TP group or none) is not modelled; the TP split is counted")
        else:
            mode, where = rule
            split = {"whole": 1, "attn_tp": attn_tp, "tp": tp}[mode]
            add("dp_attention:embedding", emb * (1 / split - 1 / tp), "source",
                f"{where}: {round_up(arch.vocab_size, 64)} x {arch.hidden_size} x {b} B / {split} instead of / {tp}")
        if arch.kv_lora_rank:
            n_mla = sum(1 for la in arch.layers if la.kind == "mla")
            absorbed = n_mla * arch.kv_lora_rank * arch.num_attention_heads * arch.mla_nope_v_dim
            add("dp_attention:w_kc_w_vc", absorbed * b * (1 / attn_tp - 1 / tp), "source",
                "deepseek_v2.py post_load_weights: absorbed w_kc / w_vc hold the attention-TP share of the heads")
    if arch.kv_lora_rank:
        n_mla = sum(1 for la in arch.layers if la.kind == "mla")
        q_lora = c.get("q_lora_rank") or 0
        kv_a = arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)
        rep = n_mla * (arch.hidden_size * (q_lora + kv_a) + q_lora + arch.kv_lora_rank)
        # weights_per_gpu already holds q_a_proj, kv_a_proj_with_mqa and their norms whole on every rank (vLLM's rule,
        # the same here); only the DP-attention term above split them by the attention-TP size: take that back
        add("mla_a_proj_replicated", -rep * attn_b * (1 / attn_tp - 1 / tp), "source",
            f"{cite(release, 'mla_q_a')} (q_a_proj and kv_a_proj_with_mqa, fused as fused_qkv_a_proj_with_mqa from "
            f"0.4.10, are ReplicatedLinear, q_a_layernorm / kv_a_layernorm RMSNorm: whole on every rank): {n_mla} "
            f"layers x ({arch.hidden_size} x ({q_lora} + {kv_a}) + {q_lora} + {arch.kv_lora_rank}) parameters")
    if c.get("index_topk") is not None and c.get("index_head_dim") and has_rule(release, "idx_wq_b"):
        # the DSA lightning indexer of every DSA layer (0.5.23: of the layers not reusing the previous layer's top-k,
        # dsa_layer_skips_topk), whole on every rank
        from .memory import dsa_indexer_layers

        per, why = dsa_indexer_bytes(c, release=release, lin_b=lin, model_b=b, is_hip=is_hip)
        n_idx = dsa_indexer_layers(c, arch.num_layers) if at_least(release, "0.5.23") else arch.num_layers
        add("nsa_indexer", n_idx * per, "source",
            f"{n_idx} indexer layers x {per:,} B: {why}"
            + (f" (the layers that run their own, {cite(release, 'idx_layer')})" if at_least(release, "0.5.23")
               else ""))
        rb_idx, rtext_idx = dsa_indexer_rope_bytes(c, arch, release=release, is_hip=is_hip, model_bytes=b)
        if rb_idx:
            add("nsa_indexer_rope", rb_idx, "source", rtext_idx)

    # Qwen3.5's gated query (q_proj num_heads x head_dim x (1 + attn_output_gate)) is in the parameter count
    # (arch._gated_query), as in SGLang ({cite(release, 'qwen3_5_gate')})

    # vision tower
    if arch_name == "KimiK25ForConditionalGeneration":
        v, text = _kimi_vision(hf_config, attn_tp, b)
        add("vision", v - arch.params.vision * b, "source", f"{cite(release, 'kimi_vision')}: {text}")
    elif arch.params.vision and arch_name in _QWEN3_VL_VISION:
        add("vision", -arch.params.vision * b * (1 - 1 / attn_tp), "source",
            f"{cite(release, 'qwen3_vl_vision')} (vision blocks ColumnParallelLinear / RowParallelLinear over the "
            "attention-TP group unless --mm-enable-dp-encoder)")
    elif arch.params.vision and arch_name == "Llama4ForConditionalGeneration" and has_rule(release, "llama4_text_only"):
        from .memory import served_text_only  # local import: memory imports this module

        if served_text_only(release, hf_config):
            # has_vision = has_vision_weights and enable_multimodal: text-only by default, so neither the vision
            # model nor the projector is built
            add("vision", -arch.params.vision * b, "source", f"{cite(release, 'llama4_text_only')}: served text-only "
                "(no --enable-multimodal), SGLang builds no vision_model nor multi_modal_projector")
    elif arch.params.vision:
        notes.append(f"{arch_name}: the vision tower is counted whole on every rank; how SGLang shards it for this "
                     "class is not modelled")

    # gpt-oss MXFP4 experts on Hopper: SGLang's triton_kernels layout instead of the count's (vLLM's) padded experts
    if (arch_name == "GptOssForCausalLM" and quant is not None and quant.name == "mxfp4" and not is_hip
            and sm_major == 9 and has_rule(release, "gptoss_tk_pad") and arch.num_experts):
        mb, mtext = gptoss_mxfp4_sm90_bytes(c, release=release, tp=tp)
        # what the "parameters" term holds for the experts (calculator.engine.weights.weights_per_gpu, MXFP4 branch)
        lin_x = quant.bits / 8 + quant.scale_bytes_per_weight
        inter_v = round_up(-(-arch.moe_intermediate_size // tp), 128)
        hid_v = round_up(arch.hidden_size, 256)
        counted = arch.num_layers * arch.num_experts * (3 * inter_v * hid_v * lin_x + (2 * inter_v + hid_v) * b)
        add("mxfp4_moe_sm90", mb - counted, "source",
            f"{mtext}; replaces the count's experts ({counted:,.0f} B: vLLM's padding of the intermediate size to 128 "
            "and the hidden size to 256, bf16 biases)")
    elif arch_name == "GptOssForCausalLM" and quant is not None and quant.name == "mxfp4":
        notes.append("gpt-oss MXFP4 experts: SGLang's layout is modelled on Hopper (SM90, CUDA) only; elsewhere the "
                     "count's (vLLM's padded) expert bytes are used")

    # rotary caches
    rb, rtext = rope_bytes(c, arch, release=release, is_hip=is_hip, model_bytes=b)
    add("rope", rb, "source", f"{cite(release, 'rope_cache')}: {rtext}")

    # compressed-tensors WNA16 MoE on ROCm keeps its g_idx tensors
    scheme = (qc.get("config_groups") or {}).get("group_0", {}).get("weights") or {}
    is_wna16 = (qc.get("quant_method") == "compressed-tensors" and scheme.get("num_bits") in (4, 8)
                and (qc.get("config_groups") or {}).get("group_0", {}).get("input_activations") is None)
    wq = scheme
    triton_sm100 = (at_least(release, "0.5.23") and sm_major == 10 and not is_hip and is_wna16
                    and wq.get("num_bits") == 4 and wq.get("type", "int") == "int" and wq.get("strategy") == "group"
                    and wq.get("group_size") in (32, 128) and wq.get("symmetric", True) and not wq.get("actorder"))
    if (is_hip or triton_sm100) and is_wna16 and arch.num_experts:
        if at_least(release, "0.5.9"):
            n_moe = arch.params.experts // max(1, arch.num_experts * 3 * arch.hidden_size * arch.moe_intermediate_size)
            g_idx = n_moe * arch.num_experts * (2 * arch.hidden_size + 2 * arch.moe_intermediate_size // tp) * 4
            add("wna16_g_idx", g_idx, "source",
                f"{cite(release, 'wna16_g_idx')} (CompressedTensorsWNA16TritonMoE "
                + (f"on SM100, {cite(release, 'wna16_triton_sm100')}, " if triton_sm100 else "on ROCm ")
                + "keeps w13/w2 g_idx and "
                f"sort indices, int32: {n_moe} MoE layers x {arch.num_experts} experts x (2 x {arch.hidden_size} + "
                f"2 x {arch.moe_intermediate_size // tp}) x 4 B)")
        else:
            notes.append(f"compressed-tensors WNA16 MoE on ROCm in SGLang {release}: not modelled")

    # aiter shuffle + the Qwen3-MoE params-dict cache
    if is_hip and arch.num_experts and arch_name in _QWEN3_MOE_CACHED and at_least(release, "0.5.3") \
            and not at_least(release, "0.5.10.post1"):
        if quant is None:
            add("aiter_moe_copy", arch.params.experts * b / tp, "source",
                f"{cite(release, 'params_dict_cache')} keeps the loaded parameters while "
                f"{cite(release, 'aiter_moe_shuffle')} replaces w13/w2 by shuffled copies (SGLANG_USE_AITER=1, as "
                "SGLang's ROCm images set it: docker/Dockerfile.rocm): the experts are held twice")
        else:
            notes.append("quantized Qwen3-MoE on ROCm with aiter: whether the weight shuffle leaves a second copy "
                         "alive through the cached parameter dict is not modelled")

    # allocator rounding
    if quant is None and not draft:
        layout = _dense_layout(c, arch, tp, attn_tp, b)
        if layout is not None:
            add("allocator", allocator_reserved(layout) - sum(layout), "source", ALLOCATOR_SOURCE)
        else:
            notes.append("caching-allocator rounding of the parameters is not modelled for this layout "
                         "(under 2 MiB per tensor)")
    elif quant is not None:
        notes.append("caching-allocator rounding of quantized parameters is not modelled (under 2 MiB per tensor)")
    notes.append("kernel modules and library workspaces first loaded while the weights load are not counted "
                 "(0 to 0.07 GiB in the public CUDA logs)")
    return WeightsEstimate(total=sum(t.bytes for t in terms), terms=terms, notes=notes)


def _nextn_draft_class(release: str, arch_name: str, c: dict[str, Any], arch) -> dict[str, Any] | None:
    """Which NextN class SGLang ``release`` builds as the NEXTN draft of ``arch_name`` (read: DeepSeek-V3 / R1, the DSA
    models DeepSeek-V3.2 and GLM-5, GLM-4.5 to 4.7, GLM-4.7-Flash): ``prefix`` of its rules (``<prefix>_eh_proj``,
    ``_decoder``, ``_modelopt_off``), ``cls`` its name, ``why`` the architecture rewrite that picks it, ``indexer``
    whether its layer builds a DSA indexer, ``gqa`` (when present) that it builds GLM-4.5's GQA attention; None for a
    class not read."""
    dsa = c.get("index_topk") is not None
    if (arch_name in ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM") and arch.mtp_draft_type == "deepseek_mtp"
            and (not dsa or has_rule(release, "nextn_dsa_rename"))):
        if not dsa:
            return {"prefix": "nextn", "cls": "DeepseekV3ForCausalLMNextN", "why": "", "indexer": False}
        why = ("the draft's architecture is rewritten to DeepseekV3ForCausalLMNextN "
               f"({cite(release, 'nextn_dsa_rename')}")
        if arch_name == "DeepseekV32ForCausalLM" and has_rule(release, "v32_config_load"):
            why += f"; the V3.2 config loads as DeepseekV3ForCausalLM, {cite(release, 'v32_config_load')}"
        return {"prefix": "nextn", "cls": "DeepseekV3ForCausalLMNextN", "why": why + ")",
                "indexer": at_least(release, "0.5.7")}
    if arch_name == "GlmMoeDsaForCausalLM" and dsa and has_rule(release, "glm_dsa_nextn_rename") \
            and arch.mtp_draft_type == "deepseek_mtp":
        if has_rule(release, "glm_dsa_nextn_cls"):
            return {"prefix": "nextn", "cls": "GlmMoeDsaForCausalLMNextN", "indexer": True,
                    "why": f"the draft's architecture is rewritten to GlmMoeDsaForCausalLMNextN "
                           f"({cite(release, 'glm_dsa_nextn_rename')}), a DeepseekV3ForCausalLMNextN "
                           f"({cite(release, 'glm_dsa_nextn_cls')})"}
        return {"prefix": "nextn", "cls": "DeepseekV3ForCausalLMNextN", "indexer": True,
                "why": f"the draft's architecture is rewritten to DeepseekV3ForCausalLMNextN "
                       f"({cite(release, 'glm_dsa_nextn_rename')})"}
    if arch_name == "Glm4MoeForCausalLM" and has_rule(release, "glm_nextn_eh_proj") \
            and arch.mtp_draft_type == "glm4_moe_mtp":
        return {"prefix": "glm_nextn", "cls": "Glm4MoeForCausalLMNextN", "why": "", "indexer": False}
    if arch_name == "Glm4MoeLiteForCausalLM" and has_rule(release, "glm_lite_nextn_rename") \
            and arch.mtp_draft_type == "glm4_moe_lite_mtp":
        if has_rule(release, "glm_lite_nextn_eh_proj"):
            return {"prefix": "glm_lite_nextn", "cls": "Glm4MoeLiteForCausalLMNextN", "indexer": False,
                    "why": f"the draft's architecture is rewritten to Glm4MoeLiteForCausalLMNextN "
                           f"({cite(release, 'glm_lite_nextn_rename')})"}
        return {"prefix": "glm_nextn", "cls": "Glm4MoeForCausalLMNextN", "indexer": False, "gqa": True,
                "why": f"the draft's architecture is rewritten to GLM-4.5's Glm4MoeForCausalLMNextN "
                       f"({cite(release, 'glm_lite_nextn_rename')})"}
    return None


def glm_lite_gqa_draft_head_dim(c: dict[str, Any]) -> int:
    """The ``head_dim`` SGLang 0.5.8.post1 to 0.5.10.post1 give GLM-4.7-Flash's GQA NextN draft (attention and KV
    pool): ``getattr(config, "head_dim", hidden_size // num_attention_heads)`` (``glm_gqa_head_dim``, ``mc_head_dim``)
    on the transformers ``Glm4MoeLiteConfig``, whose ``head_dim`` is ``qk_rope_head_dim`` (transformers
    src/transformers/models/glm4_moe_lite/configuration_glm4_moe_lite.py: ``self.head_dim = qk_rope_head_dim``, later
    ``attribute_map = {"head_dim": "qk_rope_head_dim"}``): 64 for GLM-4.7-Flash."""
    return int(c.get("head_dim") or c.get("qk_rope_head_dim") or c["hidden_size"] // c["num_attention_heads"])


def nextn_draft_weights(hf_config: dict[str, Any], *, release: str, model_dtype: str, quantization: str | None,
                        quant_config: dict | None, tp: int, attn_tp: int, is_hip: bool = False) -> tuple[int, str, str]:
    """Bytes on one rank of the NEXTN / MTP draft SGLang ``release`` builds for ``--speculative-algorithm NEXTN``
    once its own embedding and lm_head are dropped, ``(bytes, kind, source)``.

    DeepSeek-V3 / R1 (``DeepseekV3ForCausalLMNextN``, models/deepseek_nextn.py), GLM-4.5 to 4.7
    (``Glm4MoeForCausalLMNextN``, models/glm4_moe_nextn.py), every covered release, the DSA models (DeepSeek-V3.2 from
    0.5.3 and GLM-5 from 0.5.9: ``DeepseekV3ForCausalLMNextN``, 0.5.23's ``GlmMoeDsaForCausalLMNextN`` is one) and
    GLM-4.7-Flash from 0.5.8.post1 (see below):

    - ``eh_proj`` is a plain ``nn.Linear(2 x hidden, hidden)``: model dtype, whole on every rank (``nextn_eh_proj``);
    - the decoder layer is the target's layer type built with the checkpoint's quant_config (``nextn_decoder``), so at
      its bytes per weight and split like the target's layers (MLA's q_a / kv_a projections whole), except that a
      ModelOpt NVFP4 checkpoint gets ``quant_config = None`` (``nextn_modelopt_off``, from 0.4.10.post2): model dtype;
    - norms and the router gate whole at the model dtype;
    - its own ``embed_tokens`` and ``lm_head`` are built and loaded, then replaced by the target's
      (``set_embed_and_head``, ``spec_share_embed``): not counted (they exist while the draft loads);
    - under DP attention the layer's attention (not its replicated projections) is split over the attention-TP group;
    - MLA: ``post_load_weights(is_nextn=True)`` builds the layer's absorbed ``w_kc`` / ``w_vc`` from ``kv_b_proj``
      (``nextn_w_kc``), counted like the target's (model dtype, attention-TP share of the heads);
    - DSA: from 0.5.7 the draft class is in ``is_deepseek_nsa`` / ``is_deepseek_dsa`` (``nextn_dsa_draft``), so its
      layer builds the lightning indexer (:func:`dsa_indexer_bytes`, whole on every rank, with the layer's
      quant_config); in 0.5.3 and 0.5.3.post1 the list names only the targets, so the draft layer is plain MLA.

    GLM-4.7-Flash (``Glm4MoeLiteForCausalLM``, MLA): 0.5.8.post1 to 0.5.10.post1 rewrite its draft to GLM-4.5's
    ``Glm4MoeForCausalLMNextN`` (``glm_lite_nextn_rename``), whose ``Glm4MoeDecoderLayer`` builds a GQA
    ``Glm4MoeAttention`` from the config (``glm_gqa_attn``): ``num_attention_heads`` query and ``num_key_value_heads``
    KV heads of :func:`glm_lite_gqa_draft_head_dim` (64), ``qkv_proj`` and ``o_proj`` over the attention-TP group
    (``glm_gqa_qkv``; the checkpoint's MLA weights do not match them and are skipped while loading), its own rotary
    cache (``glm_gqa_rope``: ``is_neox_style`` True where the target's MLA rope is not, ``mla_rope_neox``, so
    ``get_rope`` does not share it: ``max_position_embeddings x head_dim``, float32 on CUDA, the model dtype on ROCm),
    the MoE (routed + shared experts over TP, ``glm_experts``; router gate at the model dtype, float32
    ``e_score_correction_bias``, ``glm_gate_bias``), the two layer norms, enorm / hnorm / shared_head.norm. 0.5.23
    builds its own MLA class ``Glm4MoeLiteForCausalLMNextN`` (models/glm4_moe_lite_nextn.py), as DeepSeek's above.

    The arithmetic of the first three is :func:`calculator.engine.weights.mtp_draft_weights` (vLLM builds these drafts
    the same way). Other architectures: the MTP layer parameters x the linear layers' bytes per parameter / TP, labelled
    an estimate with the draft class not read.
    """
    arch = parse_config(hf_config)
    quant = resolve_quant(arch, quant_config, quantization)
    b = 2 if model_dtype in ("bfloat16", "float16") else 4
    arch_name = (hf_config.get("architectures") or [""])[0]
    c = hf_config.get("text_config") if isinstance(hf_config.get("text_config"), dict) else hf_config
    draft = _nextn_draft_class(release, arch_name, c, arch)
    if draft is None:
        lin = (quant.bits / 8 + quant.scale_bytes_per_weight) if quant and not quant.experts_only else b
        return int(arch.params.mtp * lin / tp), "estimate", (
            f"MTP layer parameters x bytes per parameter / TP (embedding and lm_head shared with the target); how SGLang "
            f"{release}'s draft class for {arch_name} builds its projection and quantizes its layer was not read")
    prefix, draft_cls = draft["prefix"], draft["cls"]
    parts: list[str] = [draft["why"]] if draft["why"] else []
    q = quant
    if q is not None and q.name == "nvfp4" and q.exclude_style == "modelopt" and has_rule(release,
                                                                                         f"{prefix}_modelopt_off"):
        q = None
        parts.append(f"ModelOpt NVFP4: {draft_cls} builds its layer with quant_config = None "
                     f"({cite(release, f'{prefix}_modelopt_off')}): model dtype")
    layer_name = (f"layers.{arch.num_layers}.mlp.experts.0.up_proj" if arch.num_experts
                  else f"layers.{arch.num_layers}.mlp.up_proj")
    body_b = mtp_layer_bytes_per_weight(arch, model_dtype, q)  # the layer's bytes per weight, as mtp_draft_weights
    if q is not None and not q.experts_only and is_excluded(q, layer_name):
        parts.append(f"the checkpoint's exclude list names the MTP layer ({layer_name}); SGLang builds it as "
                     "model.decoder.* and matches its exclusions against that name: counted unquantized, as stored "
                     "(not modelled further)")
    n = arch.mtp_layers
    if draft.get("gqa"):
        total, why = _glm_gqa_nextn_bytes(c, release=release, n=n, b=b, body_b=body_b, tp=tp, attn_tp=attn_tp,
                                          is_hip=is_hip)
        text = (f"{draft_cls}: eh_proj nn.Linear, model dtype, whole on every rank "
                f"({cite(release, 'glm_nextn_eh_proj')}); decoder layer Glm4MoeDecoderLayer with the checkpoint's quant_config "
                f"({cite(release, 'glm_nextn_decoder')}); its own embedding and lm_head replaced by the target's "
                f"({cite(release, 'spec_share_embed')}): {why}" + ("; " + "; ".join(parts) if parts else ""))
        return int(total), "source", text
    total, why = mtp_draft_weights(arch, model_dtype, q, tp)
    extra = 0.0
    if arch.kv_lora_rank:
        absorbed = n * arch.kv_lora_rank * arch.num_attention_heads * arch.mla_nope_v_dim
        extra += absorbed * b / attn_tp
        w_kc = "glm_lite_nextn_w_kc" if prefix == "glm_lite_nextn" else "nextn_w_kc"
        parts.append(f"absorbed w_kc / w_vc {n} x {arch.kv_lora_rank} x {arch.num_attention_heads} x "
                     f"{arch.mla_nope_v_dim} x {b} B / {attn_tp} ({cite(release, w_kc)})")
    if attn_tp != tp:
        per_layer = arch.params.attention / max(1, arch.num_layers)
        rep = 0
        if arch.kv_lora_rank:
            q_lora = arch.q_lora_rank or 0
            rep = arch.hidden_size * (q_lora + arch.kv_lora_rank + (arch.qk_rope_head_dim or 0))
        split = n * (per_layer - rep)
        extra += split * body_b * (1 / attn_tp - 1 / tp)
        parts.append(f"DP attention: the layer's attention ({split:,.0f} parameters, replicated projections aside) "
                     f"split over the attention-TP size {attn_tp} instead of {tp}")
    if c.get("index_topk") is not None:
        if draft["indexer"]:
            per, idx_why = dsa_indexer_bytes(c, release=release, lin_b=body_b, model_b=b, is_hip=is_hip)
            extra += n * per
            parts.append(f"DSA: {draft_cls} is in the DSA list ({cite(release, 'nextn_dsa_draft')}), so its layer "
                         f"builds the lightning indexer, {n} x {per:,} B whole on every rank: {idx_why}")
        else:
            parts.append(f"DSA: SGLang {release}'s is_deepseek_nsa names only the targets "
                         f"({cite(release, 'nextn_dsa_draft')}), so the {draft_cls} layer builds no indexer "
                         "(plain MLA)")
    text = (f"{draft_cls}: eh_proj nn.Linear, model dtype, whole on every rank ({cite(release, f'{prefix}_eh_proj')}); "
            f"decoder layer with the checkpoint's quant_config ({cite(release, f'{prefix}_decoder')}); its own embedding "
            f"and lm_head replaced by the target's ({cite(release, 'spec_share_embed')}): {why}"
            + ("; " + "; ".join(parts) if parts else ""))
    return int(total + extra), "source", text


def _glm_gqa_nextn_bytes(c: dict[str, Any], *, release: str, n: int, b: int, body_b: float, tp: int, attn_tp: int,
                         is_hip: bool) -> tuple[float, str]:
    """Bytes on one rank of GLM-4.5's ``Glm4MoeForCausalLMNextN`` built from GLM-4.7-Flash's MLA config (0.5.8.post1 to
    0.5.10.post1, :func:`nextn_draft_weights`), embedding and lm_head aside, and the formula."""
    h = c["hidden_size"]
    heads, kvh = c["num_attention_heads"], c.get("num_key_value_heads") or c["num_attention_heads"]
    hd = glm_lite_gqa_draft_head_dim(c)
    kv_rank = max(1, kvh // attn_tp)
    q_rank = heads // attn_tp
    attn = (q_rank + 2 * kv_rank) * hd * h + q_rank * hd * h
    attn_bytes = attn * body_b
    if c.get("attention_bias"):
        attn_bytes += (q_rank + 2 * kv_rank) * hd * b
    if c.get("use_qk_norm"):
        attn_bytes += 2 * hd * b
    n_exp, n_sh, mi = c["n_routed_experts"], c.get("n_shared_experts") or 0, c["moe_intermediate_size"]
    experts = (n_exp + n_sh) * 3 * h * mi * body_b / tp
    gate = n_exp * h * b + n_exp * 4
    proj_norms = 2 * h * h * b + 5 * h * b
    positions = int(c.get("max_position_embeddings") or 8192)
    rope_elem = b if is_hip else 4
    rope = positions * hd * rope_elem
    total = n * (attn_bytes + experts + gate + proj_norms) + rope
    why = (f"{n} layer(s) x [GQA Glm4MoeAttention ({cite(release, 'glm_gqa_attn')}, {cite(release, 'glm_gqa_qkv')}): "
           f"({heads} + 2 x {kvh}) x {hd} x {h} qkv + {heads} x {hd} x {h} o, over the attention-TP size {attn_tp} "
           f"(KV heads {kv_rank} per rank), x {body_b:g} B, head_dim {hd} ({cite(release, 'glm_gqa_head_dim')}: "
           f"transformers' Glm4MoeLiteConfig.head_dim is qk_rope_head_dim); MoE ({n_exp} routed + {n_sh} shared "
           f"experts of 3 x {h} x {mi}, x {body_b:g} B / TP {tp}, {cite(release, 'glm_experts')}); router gate {n_exp} x {h} x "
           f"{b} B + e_score_correction_bias {n_exp} x 4 B ({cite(release, 'glm_gate_bias')}); eh_proj 2 x {h} x {h} "
           f"and five norms of {h} x {b} B] + its rotary cache {positions} positions x {hd} x {rope_elem} B "
           f"({cite(release, 'glm_gqa_rope')}: is_neox_style True, not the target MLA's cache, "
           f"{cite(release, 'mla_rope_neox')})")
    return total, why
