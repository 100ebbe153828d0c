"""Read a Hugging Face ``config.json`` into what the memory engine needs: the layer pattern (which KV
cache spec each layer gets), head shapes, MoE / MLA / Mamba fields, and a parameter count per component.

Remote code is never executed: the config is read as a plain dict. Keys are read the way vLLM's model
classes read them (``vllm/model_executor/models/<family>.py`` in 0.32), and every default we apply is
recorded in ``ModelArch.assumptions`` so the answer can say what it assumed.

Raises :class:`~calculator.engine.errors.EngineInputError` with ``field="config.<key>"`` when a required
key is missing or impossible (zero heads, negative sizes).
"""
from __future__ import annotations

from enum import StrEnum

from typing import Any

from pydantic import BaseModel

from .errors import EngineInputError
from .mtp import MtpHead, NoMtpHead, mtp_head

# Model types whose config omits ``tie_word_embeddings`` while the transformers class defaults to True.
_TIED_BY_DEFAULT = {"gemma", "gemma2", "gemma3", "gemma3_text", "granite", "phi3small", "qwen3"}
# Multimodal wrappers keep the language model under one of these keys.
_TEXT_KEYS = ("text_config", "llm_config", "language_config", "text_model_config")
# Gated MLPs (gate_proj + up_proj + down_proj = 3 matrices) unless the family is listed as plain.
_PLAIN_MLP_TYPES = {"phi", "gpt2", "gpt_bigcode", "gptj", "gpt_neox", "falcon", "opt", "starcoder2", "nemotron_h",
                    "bloom", "mpt", "nemotron"}
# Class defaults of transformers config classes whose Hub files are sparse (keys equal to the default are
# left out). Source: transformers Gemma3TextConfig (4.50); see shared SOURCES.md notes on Gemma 3.
_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {"vocab_size": 262208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "sliding_window": 4096, "sliding_window_pattern": 6, "max_position_embeddings": 131072,
                    "tie_word_embeddings": True, "num_hidden_layers": 26, "hidden_size": 2304,
                    "intermediate_size": 9216, "rope_theta": 1000000.0},
}
_MAMBA2_TYPES = {"nemotron_h", "mamba2", "bamba", "granitemoehybrid", "falcon_h1", "zamba2", "plamo2"}


class LayerKind(StrEnum):
    """The KV cache a layer gets, named after the vLLM spec that sizes it (vllm/v1/kv_cache_interface.py);
    one vocabulary for the config parser, the KV specs (``Spec.kind``), the speed model and the JSON output.
    The Mamba-family kinds all get a ``MambaSpec`` (kind ``mamba``) with their own state shapes."""

    FULL = "full_attention"  # FullAttentionSpec
    SLIDING = "sliding_window"  # SlidingWindowSpec
    CHUNKED = "chunked_local"  # ChunkedLocalAttentionSpec
    MLA = "mla"  # MLAAttentionSpec
    CROSS = "cross_attention"  # CrossAttentionSpec
    MAMBA1 = "mamba1"  # MambaSpec, Mamba-1 state (MambaMixer)
    MAMBA2 = "mamba2"  # MambaSpec, Mamba-2 state (MambaMixer2)
    GDN = "gdn"  # MambaSpec, gated delta-net state
    KDA = "kda"  # MambaSpec, Kimi delta attention state (Kimi Linear)
    NONE = "none"  # an MLP-only layer: no cache


ATTENTION_KINDS = (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA, LayerKind.CROSS)
STATE_KINDS = (LayerKind.MAMBA1, LayerKind.MAMBA2, LayerKind.GDN, LayerKind.KDA)


class LayerDesc(BaseModel):
    """One decoder layer as the KV cache sees it: its :class:`LayerKind`, and the window or chunk of a
    sliding-window / chunked-local layer.

    ``head_dim`` / ``num_kv_heads``: this layer's own attention shape where it differs from the model's
    (Gemma 4's global layers: ``global_head_dim`` and ``num_global_key_value_heads``); None: the model's.
    ``kv_shared``: the layer reads another layer's cache and has none of its own (Gemma 4's last
    ``num_kv_shared_layers``; vLLM skips such layers when it collects the KV specs,
    ``kv_sharing_target_layer_name``, vllm/v1/worker/gpu_model_runner.py:7161-7173 in 0.32).
    ``indexer``: a DeepSeek sparse-attention (V3.2) layer whose lightning indexer keeps its own key cache.
    """

    kind: LayerKind
    sliding_window: int | None = None
    chunk_size: int | None = None
    head_dim: int | None = None
    num_kv_heads: int | None = None
    kv_shared: bool = False
    indexer: bool = False


class ParamCount(BaseModel):
    """Parameter counts (elements) per component. ``tp_replicated`` components are whole on every
    tensor-parallel rank; everything else is split across ranks."""

    embed: int = 0
    lm_head: int = 0
    attention: int = 0  # q/k/v/o (+ biases, qk-norm, sinks) over all layers
    kv_proj: int = 0  # the k/v projections alone (part of ``attention``; replicated when TP > KV heads)
    mlp: int = 0  # dense MLPs
    experts: int = 0  # routed experts of all MoE layers
    shared_experts: int = 0
    router: int = 0
    mamba: int = 0  # Mamba / linear-attention mixers
    norms: int = 0
    vision: int = 0  # vision tower + projector of multimodal wrappers (approximate: see assumptions)
    mtp: int = 0  # MTP (next-n prediction) layers stored in the checkpoint
    # of ``mtp``: the projection of [embedding; hidden] (eh_proj / fc, 2h -> h) and the parameters no quantization
    # touches and every TP rank holds whole (norms, the router's gate)
    mtp_proj: int = 0
    mtp_replicated: int = 0
    active_experts: int = 0  # routed expert parameters used per token
    # Weights vLLM allocates that the checkpoint does not hold (not in ``total``): Gemma 4's k_eq_v V slot.
    kv_alloc_only: int = 0
    # The linear modules of each decoder layer, as (layer index, component, checkpoint module name below
    # ``layers.<i>.``, elements): what a quantization config's exclude / ignore list is matched against
    # (weights.excluded_params). component is one of attention, kv_proj, mlp, experts, shared_experts, mamba.
    modules: list[tuple[int, str, str, int]] = []

    @property
    def total(self) -> int:
        return (self.embed + self.lm_head + self.attention + self.mlp + self.experts + self.shared_experts
                + self.router + self.mamba + self.norms + self.vision + self.mtp)

    @property
    def active(self) -> int:
        """Parameters touched per token (routed experts counted for ``num_experts_per_tok`` only)."""
        return self.total - self.experts - self.mtp + self.active_experts


class ModelArch(BaseModel):
    """The language model's shape, read from ``config.json`` (``text_config`` for multimodal wrappers)."""

    architecture: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None
    torch_dtype: str
    layers: list[LayerDesc]
    # MLA (DeepSeek V2/V3, Kimi): latent cache of kv_lora_rank + qk_rope_head_dim per token per layer.
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    mla_nope_v_dim: int = 0  # qk_nope_head_dim + v_head_dim (the per-head width of kv_b_proj)
    # DeepSeek sparse attention (V3.2): the lightning indexer's key width (index_head_dim) and top-k.
    index_head_dim: int | None = None
    index_topk: int | None = None
    index_n_heads: int = 0
    q_lora_rank: int | None = None
    # MoE
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    num_moe_layers: int = 0  # decoder layers whose FFN is the routed-expert block (the rest: a dense MLP)
    qk_norm: bool = False  # a per-head RMSNorm on q and k before rotary (Qwen3, Gemma 3, OLMo 2...)
    # Mamba-2 (Nemotron-H, Bamba, Granite 4), gated delta-net (Qwen3-Next) and KDA (Kimi Linear) state fields.
    mamba: dict[str, int] = {}
    mtp_layers: int = 0  # MTP layers vLLM builds for method mtp (calculator.engine.mtp.mtp_head)
    mtp_head: str | None = None  # where the count comes from (vLLM file:line)
    mtp_refusal: str | None = None  # why vLLM runs no MTP draft for this model
    mtp_n_predict: int | None = None  # the draft's n_predict (num_speculative_tokens above it must be a multiple)
    mtp_draft_type: str | None = None  # the draft's model_type (deepseek_mtp, qwen3_5_mtp...)
    # the MTP layers are full-attention layers whatever the target's first layer is (Qwen3-Next / Qwen3.5:
    # layer_type="full_attention", qwen3_next_mtp.py:88-95, qwen3_5_mtp.py:118-125)
    mtp_full_attention: bool = False
    # dtype of the SSM (temporal) state when the model class pins it (Nemotron-H: float32 unless config.json
    # says otherwise; vllm/model_executor/models/config.py:712-739); None: the conv-state dtype.
    mamba_ssm_cache_dtype: str | None = None
    has_sinks: bool = False
    rotary_dim: int = 0
    rope_cache_len: int = 0
    rope_cache_len_extra: int = 0  # a second rotary embedding (Gemma 3 local layers)
    rope_cache_extra_elems: int = 0  # another rotary cache of its own width (Gemma 4 global layers), elements
    derived_max_model_len: int | None = None  # vLLM's default and upper bound for --max-model-len (from 0.30)
    # the same before vLLM 0.30, where a YaRN scaling derived original_max_position_embeddings x factor
    # (runtime rule "yarn_derived_max_model_len")
    derived_max_model_len_yarn_scaled: int | None = None
    is_multimodal: bool = False
    encoder_tokens: int = 0  # cross-attention tokens per request (mllama: image tokens)
    quantization_config: dict[str, Any] | None = None
    params: ParamCount
    assumptions: list[str] = []

    @property
    def attention_layers(self) -> list[LayerDesc]:
        return [la for la in self.layers if la.kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA, LayerKind.CROSS)]

    @property
    def has_state_layers(self) -> bool:
        """Whether any layer keeps a Mamba-style recurrent state (a hybrid model in vLLM's terms)."""
        return any(la.kind in STATE_KINDS for la in self.layers)

    @property
    def is_sparse_mla(self) -> bool:
        """DeepSeek sparse attention: MLA layers with a lightning indexer (``index_topk`` in the config)."""
        return any(la.indexer for la in self.layers)


def _text_config(config: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    for key in _TEXT_KEYS:
        sub = config.get(key)
        if isinstance(sub, dict) and (sub.get("hidden_size") or sub.get("num_hidden_layers")):
            return sub, True
    return config, False


# Upper bounds a real config stays far below (the largest published models: ~160 layers, hidden 25,600,
# 256-512 experts, vocabularies of ~260k, ~10M context): anything beyond is refused at the edge, so every
# per-layer or per-expert computation of the engine is bounded whatever a Hub repo publishes.
CONFIG_LIMITS = {"num_hidden_layers": 1024, "n_layer": 1024, "num_layers": 1024, "hidden_size": 131072,
                 "d_model": 131072, "n_embd": 131072, "num_attention_heads": 4096, "n_head": 4096,
                 "num_key_value_heads": 4096, "num_kv_heads": 4096, "intermediate_size": 1 << 20,
                 "moe_intermediate_size": 1 << 20, "vocab_size": 1 << 24, "num_local_experts": 65536,
                 "n_routed_experts": 65536, "num_experts": 65536, "head_dim": 65536,
                 "max_position_embeddings": 1 << 28}


def _check_limit(key: str, value: int) -> int:
    limit = CONFIG_LIMITS.get(key)
    if limit is not None and value > limit:
        raise EngineInputError(f"config.{key}", f"{value:,} is beyond any real model (this calculator takes at most "
                               f"{limit:,}): not a config it can size")
    return value


def _req_int(c: dict[str, Any], *keys: str, minimum: int = 1) -> int:
    for key in keys:
        value = c.get(key)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise EngineInputError(f"config.{key}", f"must be an integer >= {minimum}, got {value!r}")
            return _check_limit(key, value)
    raise EngineInputError(f"config.{keys[0]}", "missing from config.json (required to size the model)")


def _opt_int(c: dict[str, Any], key: str, default: int | None = None) -> int | None:
    value = c.get(key)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise EngineInputError(f"config.{key}", f"must be a non-negative integer, got {value!r}")
    return _check_limit(key, value)


# The end of the note on MTP layers a checkpoint stores: true unless the request's speculative method is mtp (the
# engine's estimate then drops it: the layers are the draft, counted in draft_weights_gib)
MTP_NOT_LOADED = "vLLM loads them only with speculative method mtp"
# Layer shapes the engine sizes only in the model families whose vLLM model file it has read: the same key
# in another family is refused with what is not modelled, never sized by another layer type's rule.
# (config key, the model types / architectures where it is modelled, what it is, where vLLM sizes it)
SPARSE_MLA_ARCHS = ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM")
GEMMA4_TYPES = ("gemma4", "gemma4_text")
NOT_MODELLED = (
    ("index_topk", SPARSE_MLA_ARCHS, "DeepSeek sparse attention (a lightning-indexer key cache beside the MLA "
     "cache)", "vllm/model_executor/models/deepseek_v2.py (DeepseekV32IndexerCache)"),
    ("global_head_dim", GEMMA4_TYPES, "global layers with their own head size and KV heads",
     "vllm/model_executor/models/gemma4.py"),
    ("num_global_key_value_heads", GEMMA4_TYPES, "global layers with their own head size and KV heads",
     "vllm/model_executor/models/gemma4.py"),
    ("per_layer_config", GEMMA4_TYPES, "per-layer attention shapes (transformers per_layer_config)",
     "vllm/transformers_utils/model_arch_config_convertor.py"),
    ("linear_attn_config", ("kimi_linear",), "Kimi delta attention (KDA) layers and their recurrent state",
     "vllm/model_executor/models/kimi_linear.py"),
    ("hybrid_layer_pattern", (), "MiMo-V2's full / sliding-window layers with their own KV heads and a V head size "
     "unlike K's", "vllm/model_executor/models/mimo_v2_flash.py"),
)
# The per-layer keys of Gemma 4's per_layer_config the engine reads (transformers Gemma4TextConfig.__post_init__
# writes exactly these two for the full-attention layers).
_GEMMA4_LAYER_KEYS = {"head_dim", "num_key_value_heads"}


def refuse_unmodelled_kv(config: dict[str, Any]) -> None:
    """Refuse a config whose KV cache has a layer shape the vLLM engine does not size (:data:`NOT_MODELLED`
    outside the families it is modelled in, DeepSeek's IndexCache top-k sharing, Gemma 4 without a global
    head size); parameter counting (:func:`parse_config`) still reads it.

    Raises:
        EngineInputError: on ``model``, naming what is not modelled and where vLLM sizes it.
    """
    c, _ = _text_config(config)
    archs = config.get("architectures") or c.get("architectures") or [""]
    arch = archs[0] if isinstance(archs, list) and archs else str(archs)
    _refuse_unmodelled(c, str(c.get("model_type") or config.get("model_type") or ""), str(arch))


def _refuse_unmodelled(c: dict[str, Any], model_type: str, architecture: str) -> None:
    """Refuse a config with a layer shape the engine does not size (see :func:`refuse_unmodelled_kv`)."""
    for key, where_modelled, what, where in NOT_MODELLED:
        if c.get(key) in (None, False, 0, [], {}):
            continue
        if model_type in where_modelled or architecture in where_modelled:
            continue
        only = (f"sizes it only for {', '.join(where_modelled)}" if where_modelled else
                "does not size it for vLLM yet")
        raise EngineInputError("model", f"not modelled: config.json has {key} ({what}, sized in {where}) in "
                               f"{architecture or model_type or 'this model'}; this calculator {only}, rather than "
                               "guess")
    if c.get("index_topk") and ((c.get("index_topk_freq") or 1) != 1 or c.get("index_topk_pattern")):
        raise EngineInputError("model", "not modelled: config.json has index_topk_freq / index_topk_pattern "
                               "(IndexCache: layers that reuse another layer's indexer top-k and keep no indexer "
                               "cache, vllm/model_executor/models/deepseek_v2.py:1138-1168 in 0.32); this "
                               "calculator does not size that layer pattern yet, rather than guess")
    if model_type in GEMMA4_TYPES:
        plc = c.get("per_layer_config")
        if plc is not None:
            entries = list(plc.values()) if isinstance(plc, dict) else [plc]
            bad = sorted({k for v in entries if isinstance(v, dict) for k in v} - _GEMMA4_LAYER_KEYS)
            if bad or not all(isinstance(v, dict) for v in entries):
                raise EngineInputError("model", f"not modelled: Gemma 4 per_layer_config with "
                                       f"{', '.join(bad) or 'entries that are not objects'} (this calculator reads "
                                       "only head_dim and num_key_value_heads per layer)")
        if c.get("use_bidirectional_attention") == "all":
            raise EngineInputError("model", "not modelled: Gemma 4 with use_bidirectional_attention=all (its "
                                   "sliding window is rewritten by the config class and its layers are not causal)")


def _kimi_linear_layers(c: dict[str, Any], num_layers: int) -> list[LayerDesc]:
    """Kimi Linear: ``linear_attn_config.kda_layers`` (1-based) are KDA layers, ``full_attn_layers`` MLA
    (``KimiLinearConfig.is_kda_layer``: ``(layer_idx + 1) in kda_layers``,
    vllm/transformers_utils/configs/kimi_linear.py:144-148 in 0.19; ``KimiDecoderLayer``,
    vllm/model_executor/models/kimi_linear.py:305-330 in 0.19).

    Raises:
        EngineInputError: the two lists do not partition the layers, or a KDA size is missing.
    """
    lac = c["linear_attn_config"]
    if not isinstance(lac, dict):
        raise EngineInputError("config.linear_attn_config", "must be a JSON object")
    kda, full = lac.get("kda_layers"), lac.get("full_attn_layers")
    if not isinstance(kda, list) or not isinstance(full, list):
        raise EngineInputError("config.linear_attn_config", "needs the lists kda_layers and full_attn_layers "
                               "(vllm/transformers_utils/configs/kimi_linear.py asserts both)")
    if sorted(kda + full) != list(range(1, num_layers + 1)):
        raise EngineInputError("config.linear_attn_config", f"kda_layers and full_attn_layers must number the "
                               f"{num_layers} layers 1..{num_layers} once each")
    for key in ("num_heads", "head_dim", "short_conv_kernel_size"):
        v = lac.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise EngineInputError(f"config.linear_attn_config.{key}", f"must be a positive integer, got {v!r}")
    kda_set = set(kda)
    return [LayerDesc(kind=LayerKind.KDA) if i + 1 in kda_set else LayerDesc(kind=LayerKind.MLA)
            for i in range(num_layers)]


def _gemma4_layers(c: dict[str, Any], num_layers: int, window: int | None, notes: list[str]) -> list[LayerDesc]:
    """Gemma 4: ``layer_types`` sliding / full; full-attention layers take their own head size and KV heads.

    vLLM 0.19 (vllm/model_executor/models/gemma4.py:439-460): full layers ``head_dim = global_head_dim`` and,
    with ``attention_k_eq_v``, ``num_kv_heads = num_global_key_value_heads`` (else ``num_key_value_heads``);
    0.28 through ``gemma4_layer_config`` (vllm/transformers_utils/configs/gemma4.py:10-35 (0.28.0): global_head_dim
    or head_dim); 0.32 through ``config.per_layer_config[layer_idx]`` (gemma4.py:576-589), which transformers'
    Gemma4TextConfig fills from those two keys for the full layers (configuration_gemma4.py:210-223) or which
    a transformers >= 5.6 config.json carries itself. The last ``num_kv_shared_layers`` layers read the cache of
    the last earlier layer of their type and keep none (gemma4.py:471-492 in 0.32, :337-363 in 0.19).
    """
    types = c.get("layer_types")
    if not isinstance(types, list) or len(types) != num_layers:
        raise EngineInputError("config.layer_types", f"Gemma 4 needs one layer type per layer ({num_layers})")
    if any(t not in ("sliding_attention", "full_attention") for t in types):
        raise EngineInputError("config.layer_types", "Gemma 4 layer types are sliding_attention / full_attention")
    if not window:
        raise EngineInputError("config.sliding_window", "Gemma 4's sliding layers need sliding_window")
    plc = c.get("per_layer_config")
    overrides: dict[int, dict[str, int]] = {}
    if isinstance(plc, dict):
        overrides = {int(k): v for k, v in plc.items()}
    else:
        if c.get("global_head_dim") is None:
            raise EngineInputError("config.global_head_dim", "missing: without it vLLM 0.19 sizes Gemma 4's global "
                                   "layers with head_dim (gemma4.py:443) but transformers >= 5.6 with 512 "
                                   "(Gemma4TextConfig.__post_init__), so their cache depends on the installed "
                                   "transformers; not modelled, rather than guess")
        ghd = _req_int(c, "global_head_dim")
        override: dict[str, int] = {"head_dim": ghd}
        if c.get("attention_k_eq_v") and c.get("num_global_key_value_heads") is not None:
            override["num_key_value_heads"] = _req_int(c, "num_global_key_value_heads")
        overrides = {i: override for i, t in enumerate(types) if t == "full_attention"}
    shared = _opt_int(c, "num_kv_shared_layers", 0) or 0
    first_shared = num_layers - shared
    out = []
    for i, t in enumerate(types):
        o = overrides.get(i, {})
        desc = LayerDesc(kind=LayerKind.SLIDING if t == "sliding_attention" else LayerKind.FULL,
                         sliding_window=window if t == "sliding_attention" else None,
                         head_dim=o.get("head_dim"), num_kv_heads=o.get("num_key_value_heads"),
                         kv_shared=shared > 0 and i >= first_shared)
        if desc.kv_shared and t not in types[:first_shared]:
            raise EngineInputError("config.num_kv_shared_layers", f"layer {i} ({t}) shares the cache of an earlier "
                                   f"{t} layer, but the first {first_shared} layers have none")
        out.append(desc)
    if shared:
        notes.append(f"Gemma 4: the last {shared} layers reuse an earlier layer's KV cache and keep none "
                     "(num_kv_shared_layers)")
    return out


def _layer_kinds(c: dict[str, Any], model_type: str, num_layers: int, notes: list[str]) -> list[LayerDesc]:
    """The per-layer cache kind, following each family's vLLM model file (0.32)."""
    window = c.get("sliding_window")
    if isinstance(window, list):  # some configs store one window per layer; vLLM takes the per-layer value
        window = max(w for w in window if w) if any(window) else None

    if model_type == "kimi_linear" and c.get("linear_attn_config"):
        return _kimi_linear_layers(c, num_layers)

    if model_type in GEMMA4_TYPES:
        return _gemma4_layers(c, num_layers, window, notes)

    if c.get("kv_lora_rank"):
        # DeepSeek-V3.2: every MLA layer builds a lightning indexer with its own key cache when the config
        # has index_topk (is_v32 = hasattr(config, "index_topk"), vllm/model_executor/models/deepseek_v2.py:1138
        # and :1168 in 0.32; :1044 in 0.11.0); IndexCache patterns are refused in refuse_unmodelled_kv.
        indexer = c.get("index_topk") is not None
        return [LayerDesc(kind=LayerKind.MLA, indexer=indexer) for _ in range(num_layers)]

    if model_type == "nemotron_h" and c.get("hybrid_override_pattern"):
        pattern = c["hybrid_override_pattern"]
        kinds = {"M": LayerKind.MAMBA2, "*": LayerKind.FULL, "-": LayerKind.NONE, "E": LayerKind.NONE}
        if len(pattern) != num_layers:
            raise EngineInputError("config.hybrid_override_pattern",
                                   f"has {len(pattern)} entries for {num_layers} layers")
        return [LayerDesc(kind=kinds.get(ch, LayerKind.NONE)) for ch in pattern]

    if model_type == "qwen3_next" or c.get("linear_num_value_heads"):
        layer_types = c.get("layer_types")
        if layer_types:
            return [LayerDesc(kind=LayerKind.GDN if t == "linear_attention" else LayerKind.FULL) for t in layer_types]
        interval = c.get("full_attention_interval") or 4
        return [LayerDesc(kind=LayerKind.FULL if (i + 1) % interval == 0 else LayerKind.GDN) for i in range(num_layers)]

    if model_type in ("jamba",):
        period, offset = c.get("attn_layer_period", 8), c.get("attn_layer_offset", 4)
        return [LayerDesc(kind=LayerKind.FULL if i % period == offset else LayerKind.MAMBA1) for i in range(num_layers)]

    if model_type in ("bamba", "granitemoehybrid", "falcon_h1") or c.get("layers_block_type"):
        types = c.get("layer_types") or c.get("layers_block_type")
        if types:
            # "attention"/"mamba" in Hub configs; transformers >= 5 writes "full_attention"/"linear_attention"
            # (vllm/model_executor/models/granitemoehybrid.py:322-325 keys the layer class on the latter)
            return [LayerDesc(kind=LayerKind.FULL if t in ("attention", "full_attention") else LayerKind.MAMBA2) for t in types]
        attn = set(c.get("attn_layer_indices") or [])
        return [LayerDesc(kind=LayerKind.FULL if i in attn else LayerKind.MAMBA2) for i in range(num_layers)]

    if c.get("cross_attention_layers"):  # mllama: cross-attention layers read the image tokens
        cross = set(c["cross_attention_layers"])
        return [LayerDesc(kind=LayerKind.CROSS if i in cross else LayerKind.FULL) for i in range(num_layers)]

    if c.get("attention_chunk_size") and model_type in ("llama4_text", "llama4"):
        # Llama 4: every 4th layer is global (no RoPE), the rest chunked local (vllm/model_executor/models/llama4.py)
        no_rope = c.get("no_rope_layers")
        chunk = c["attention_chunk_size"]
        if no_rope:
            return [LayerDesc(kind=LayerKind.CHUNKED, chunk_size=chunk) if no_rope[i] else LayerDesc(kind=LayerKind.FULL)
                    for i in range(num_layers)]
        interval = c.get("interleave_moe_layer_step") and 4 or 4
        return [LayerDesc(kind=LayerKind.FULL) if (i + 1) % interval == 0 else LayerDesc(kind=LayerKind.CHUNKED, chunk_size=chunk)
                for i in range(num_layers)]

    if isinstance(c.get("hybrid_layer_pattern"), list):
        # MiMo-V2: 1 = a sliding-window layer with its own KV heads and head size (swa_*), 0 = full attention
        # (sglang configs/model_config.py get_hybrid_layer_ids, :1471 in 0.5.10.post1; the window: sliding_window_size
        # first, configs/model_config.py:883). The vLLM engine refuses these KV shapes (NOT_MODELLED); the layer kinds
        # serve the parameter count and the speed model's per-layer-type reads.
        pattern = c["hybrid_layer_pattern"]
        if len(pattern) < num_layers:
            raise EngineInputError("config.hybrid_layer_pattern", f"has {len(pattern)} entries for {num_layers} layers")
        w = c.get("sliding_window_size") or window
        return [LayerDesc(kind=LayerKind.SLIDING, sliding_window=w, num_kv_heads=c.get("swa_num_key_value_heads"),
                          head_dim=c.get("swa_head_dim")) if pattern[i] == 1 else LayerDesc(kind=LayerKind.FULL)
                for i in range(num_layers)]

    layer_types = c.get("layer_types")
    if layer_types and window:
        return [LayerDesc(kind=LayerKind.SLIDING, sliding_window=window) if t == "sliding_attention" else LayerDesc(kind=LayerKind.FULL)
                for t in layer_types]

    if model_type == "gemma2" and window:
        # Gemma 2: even layers slide (vllm/model_executor/models/gemma2.py: layer_idx % 2 == 0)
        return [LayerDesc(kind=LayerKind.SLIDING, sliding_window=window) if i % 2 == 0 else LayerDesc(kind=LayerKind.FULL)
                for i in range(num_layers)]

    if model_type in ("gemma3_text", "gemma3") and window:
        pattern = c.get("sliding_window_pattern") or 6
        notes.append(f"Gemma 3 layer pattern: every {pattern}th layer global, others sliding window {window}")
        return [LayerDesc(kind=LayerKind.FULL) if (i + 1) % pattern == 0 else LayerDesc(kind=LayerKind.SLIDING, sliding_window=window)
                for i in range(num_layers)]

    use_sw = c.get("use_sliding_window")
    if window and use_sw is not False and model_type in ("mistral", "mixtral", "phi3", "starcoder2", "qwen2", "qwen3",
                                                          "qwen2_moe", "qwen3_moe", "cohere2"):
        if model_type.startswith("qwen") and not use_sw:
            return [LayerDesc(kind=LayerKind.FULL) for _ in range(num_layers)]
        max_window_layers = c.get("max_window_layers")
        if model_type.startswith("qwen") and max_window_layers is not None:
            return [LayerDesc(kind=LayerKind.SLIDING, sliding_window=window) if i >= max_window_layers else LayerDesc(kind=LayerKind.FULL)
                    for i in range(num_layers)]
        max_pos = c.get("max_position_embeddings") or 0
        if window >= max_pos > 0:
            return [LayerDesc(kind=LayerKind.FULL) for _ in range(num_layers)]
        return [LayerDesc(kind=LayerKind.SLIDING, sliding_window=window) for _ in range(num_layers)]

    return [LayerDesc(kind=LayerKind.FULL) for _ in range(num_layers)]


# transformers >= 5 writes Nemotron-H's layer pattern as a list (``layers_block_type``) and drops
# ``num_hidden_layers``; vLLM reads the legacy string ``hybrid_override_pattern`` from the config class's
# property (transformers/models/nemotron_h/configuration_nemotron_h.py ``_list_to_pattern``;
# vllm/model_executor/models/nemotron_h.py:598).
_NEMOTRON_H_SYMBOLS = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*",
                       "mlp": "-", "moe": "E"}


def _normalize_layer_list(c: dict[str, Any], model_type: str) -> dict[str, Any]:
    """Fill ``num_hidden_layers`` (and Nemotron-H's ``hybrid_override_pattern``) from a per-layer type
    list when a transformers-5 config has only the list."""
    types = c.get("layers_block_type") if model_type == "nemotron_h" else None
    types = types or c.get("layer_types")
    if not isinstance(types, list) or not types:
        return c
    extra: dict[str, Any] = {}
    if c.get("num_hidden_layers") is None:
        extra["num_hidden_layers"] = len(types)
    if model_type == "nemotron_h" and not c.get("hybrid_override_pattern"):
        if any(t not in _NEMOTRON_H_SYMBOLS for t in types):
            raise EngineInputError("config.layers_block_type", f"unknown Nemotron-H layer type in {types}")
        extra["hybrid_override_pattern"] = "".join(_NEMOTRON_H_SYMBOLS[t] for t in types)
    return {**c, **extra} if extra else c


def _vision_params(config: dict[str, Any], notes: list[str]) -> int:
    """Approximate vision tower + projector parameters of a multimodal wrapper, from ``vision_config``.

    ViT blocks: 4·h² (attention) + 2·h·i (MLP) + norms per layer; patch embedding 3·p²·h; projector
    from the vision width (after spatial merge) to the text width. Approximate by construction (±2% of
    the tower on the families checked); the tower is typically 2-5% of the model.
    """
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return 0
    h = vc.get("hidden_size") or vc.get("embed_dim") or vc.get("width")
    layers = vc.get("num_hidden_layers") or vc.get("depth") or vc.get("num_layers")
    if not h or not layers:
        return 0
    i = vc.get("intermediate_size") or 4 * h
    patch = vc.get("patch_size") or 14
    channels = vc.get("num_channels") or 3
    text, _ = _text_config(config)
    if vc.get("model_type") == "gemma4_vision":
        # transformers Gemma4VisionModel (vLLM loads it with AutoModel.from_config, gemma4_mm.py:1096 in 0.32):
        # per layer q/k/v/o (h x h, no bias), q/k norms (head_dim), gated MLP (3 x h x i), four norms; a patch
        # input projection (channels x patch^2 -> h, no bias) and a 2 x position_embedding_size x h position
        # table; then embed_vision.embedding_projection (h -> text hidden, gemma4_mm.py:988). Exact against a
        # meta-device count with transformers 5.19 (569,548,080 for Gemma-4-31B-IT's tower).
        vhd = vc.get("head_dim") or h // (vc.get("num_attention_heads") or 1)
        tower = layers * (4 * h * h + 2 * vhd + 3 * h * i + 4 * h) + (channels * patch * patch) * h \
            + 2 * (vc.get("position_embedding_size") or 0) * h
        notes.append(f"vision tower (gemma4_vision, {layers} layers, width {h}) counted from vision_config")
        return tower + h * (text.get("hidden_size") or 0)
    gated = vc.get("model_type") == "pixtral"  # Pixtral's FFN is gated (w1, w2, w3)
    per_layer = 4 * h * h + 4 * h + (3 if gated else 2) * h * i + i + h + 4 * h
    tower = layers * per_layer + channels * patch * patch * h
    if vc.get("model_type") == "mllama_vision_model":
        tower += (vc.get("num_global_layers") or 0) * (per_layer + 2)
        image_size = vc.get("image_size") or 560
        tower += ((image_size // patch) ** 2 + 1) * h * 2 + (vc.get("max_num_tiles") or 4) ** 2 * h * 2
    text_h = text.get("hidden_size") or 0
    merge = config.get("spatial_merge_size") or 1
    proj_in = h * merge * merge
    if vc.get("model_type") == "mllama_vision_model":
        proj_in = h * (len(vc.get("intermediate_layers_indices") or []) + 1)
    projector = proj_in * text_h + text_h * text_h
    if merge > 1:  # Mistral 3: patch merger (h*m*m -> h), then h -> text width -> text width
        projector = h * merge * merge * h + h * text_h + text_h * text_h
    if vc.get("model_type") == "siglip_vision_model":
        image_size = vc.get("image_size") or 224
        tower += (image_size // patch) ** 2 * h  # position embedding
        projector = h * text_h + h
    notes.append(f"vision tower ({vc.get('model_type', 'vision')}, {layers} layers, width {h}) counted from "
                 "vision_config by the standard ViT formula (approximate)")
    return tower + projector


# Qwen3-Next's attention, which Qwen3.5 reuses (vllm/model_executor/models/qwen3_5.py:158): q_proj outputs
# heads x head_dim x (1 + attn_output_gate), attn_output_gate = getattr(config, "attn_output_gate", True)
# (vllm/model_executor/models/qwen3_next.py:315-320 in 0.32)
_GATED_QUERY_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")


def _gated_query(c: dict[str, Any], model_type: str) -> bool:
    """Whether the full-attention layers' q_proj also produces the output gate (twice the query width)."""
    return model_type in _GATED_QUERY_TYPES and c.get("attn_output_gate", True) is not False


def _nas_blocks(c: dict[str, Any]) -> list[dict[str, Any]]:
    """DeciLM / Llama-Nemotron NAS ``block_configs`` (model_type nemotron-nas) as vLLM builds each layer
    (``DeciLMDecoderLayer``, vllm/model_executor/models/nemotron_nas.py:127-195 in 0.32): attention absent when
    ``attention.no_op``, else ``num_attention_heads // n_heads_in_group`` KV heads; the FFN absent when
    ``ffn.no_op``, else a gated LlamaMLP of ``_ffn_mult_to_intermediate_size(ffn_mult, hidden)`` =
    ``int(2 x ffn_mult x hidden / 3)`` rounded up to a multiple of 256 (:60-70), or ``ffn.intermediate_size``.

    Returns one dict per layer: ``n_heads_in_group`` (None: no attention) and ``intermediate`` (0: no FFN).

    Raises:
        EngineInputError: a block vLLM cannot build (``replace_with_linear``: no such module in nemotron_nas.py,
            the checkpoint's linear would not load) or a block without its sizes.
    """
    hidden = _req_int(c, "hidden_size")
    blocks = c["block_configs"]
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise EngineInputError("config.block_configs", "must be a list of {attention, ffn} objects")
    out = []
    for i, b in enumerate(blocks):
        attn, ffn = b.get("attention") or {}, b.get("ffn") or {}
        if attn.get("replace_with_linear") or ffn.get("replace_with_linear"):
            raise EngineInputError("model", f"not modelled: block_configs[{i}] has replace_with_linear, which vLLM's "
                                   "nemotron_nas.py does not build (the checkpoint's linear would not load)")
        group = None
        if not attn.get("no_op"):
            group = attn.get("n_heads_in_group")
            if not isinstance(group, int) or isinstance(group, bool) or group < 1:
                raise EngineInputError(f"config.block_configs[{i}].attention.n_heads_in_group",
                                       f"must be a positive integer, got {group!r}")
        inter = 0
        if not ffn.get("no_op"):
            if ffn.get("ffn_mult") is not None:
                inter = int(2 * float(ffn["ffn_mult"]) * hidden / 3)
                inter = inter if inter % 256 == 0 else inter + 256 - inter % 256
            else:
                inter = ffn.get("intermediate_size")
                if not isinstance(inter, int) or inter < 1:
                    raise EngineInputError(f"config.block_configs[{i}].ffn", "needs ffn_mult or intermediate_size")
        out.append({"n_heads_in_group": group, "intermediate": inter})
    return out


def parse_config(config: dict[str, Any]) -> ModelArch:
    """Parse a ``config.json`` dict into a :class:`ModelArch`.

    Head size: explicit ``head_dim`` when present (Qwen3, Gemma, Mistral Small), else
    ``hidden_size // num_attention_heads`` (vLLM ``ModelConfig.get_head_size``, config/model.py).
    KV heads: ``num_key_value_heads``, else ``num_attention_heads`` (MHA).

    Raises:
        EngineInputError: a required key is missing or impossible; the field is ``config.<key>``.
    """
    if not isinstance(config, dict) or not config:
        raise EngineInputError("config", "config.json is empty or not a JSON object")
    notes: list[str] = []
    c, is_mm = _text_config(config)
    model_type = str(c.get("model_type") or config.get("model_type") or "unknown")
    defaults = _CLASS_DEFAULTS.get(model_type)
    if defaults:
        filled = sorted(k for k in defaults if c.get(k) is None)
        if filled:
            notes.append(f"{model_type} config is sparse: transformers class defaults used for {', '.join(filled)}")
            c = {**c, **{k: defaults[k] for k in filled}}
    c = _normalize_layer_list(c, model_type)
    nas = _nas_blocks(c) if c.get("block_configs") is not None else None
    archs = config.get("architectures") or c.get("architectures") or ["unknown"]
    architecture = archs[0] if isinstance(archs, list) and archs else str(archs)

    hidden = _req_int(c, "hidden_size", "d_model", "n_embd")
    num_layers = _req_int(c, "num_hidden_layers", "n_layer", "num_layers")
    num_heads = _req_int(c, "num_attention_heads", "n_head")
    num_kv = _opt_int(c, "num_key_value_heads")
    if num_kv is None and nas:
        # DeciLM has no model-wide KV heads: the first attention block's (each layer keeps its own below)
        num_kv = next((num_heads // b["n_heads_in_group"] for b in nas if b["n_heads_in_group"]), num_heads)
    if num_kv is None:
        num_kv = _opt_int(c, "num_kv_heads") or num_heads
        if model_type != "unknown" and not c.get("kv_lora_rank"):
            notes.append("num_key_value_heads absent: multi-head attention assumed (KV heads = attention heads)")
    if num_kv == 0:
        raise EngineInputError("config.num_key_value_heads", "must be at least 1")
    head_dim = _opt_int(c, "head_dim") or _opt_int(c, "attention_head_dim") or hidden // num_heads
    if head_dim <= 0:
        raise EngineInputError("config.head_dim", "must be positive")
    vocab = _req_int(c, "vocab_size", "padded_vocab_size")
    intermediate = _opt_int(c, "intermediate_size") or _opt_int(c, "ffn_hidden_size") or 4 * hidden

    tie = c.get("tie_word_embeddings")
    if tie is None:
        tie = config.get("tie_word_embeddings") if not is_mm else None
    if tie is None:
        tie = model_type in _TIED_BY_DEFAULT
        notes.append(f"tie_word_embeddings absent: {'tied' if tie else 'untied'} assumed "
                     f"(transformers default for {model_type})")

    dtype = str(c.get("torch_dtype") or config.get("torch_dtype") or c.get("dtype") or config.get("dtype") or "")
    if not dtype:
        dtype = "bfloat16"
        notes.append("torch_dtype absent: bfloat16 assumed")

    if nas is not None:
        if len(nas) != num_layers:
            raise EngineInputError("config.block_configs", f"has {len(nas)} blocks for {num_layers} layers")
        layers = [LayerDesc(kind=LayerKind.NONE) if b["n_heads_in_group"] is None
                  else LayerDesc(kind=LayerKind.FULL, num_kv_heads=num_heads // b["n_heads_in_group"]) for b in nas]
    else:
        layers = _layer_kinds(c, model_type, num_layers, notes)

    # MoE fields (Mixtral/gpt-oss: num_local_experts; Qwen MoE: num_experts; DeepSeek/GLM: n_routed_experts)
    n_exp = _opt_int(c, "num_local_experts") or _opt_int(c, "num_experts") or _opt_int(c, "n_routed_experts") or 0
    topk = _opt_int(c, "num_experts_per_tok") or _opt_int(c, "experts_per_token") or _opt_int(c, "moe_topk") \
        or _opt_int(c, "num_experts_per_token") or _opt_int(c, "top_k_experts") or 0  # Kimi Linear, Gemma 4
    moe_i = _opt_int(c, "moe_intermediate_size") or _opt_int(c, "expert_intermediate_size") \
        or (intermediate if n_exp else 0)
    gemma4 = model_type in GEMMA4_TYPES
    n_shared = _opt_int(c, "n_shared_experts") or _opt_int(c, "num_shared_experts") or 0  # DeepSeek / Kimi Linear
    first_dense = _opt_int(c, "first_k_dense_replace", 0) or 0
    mlp_only = set(c.get("mlp_only_layers") or [])
    sparse_step = c.get("decoder_sparse_step") or 1
    moe_freq = c.get("moe_layer_freq") or 1
    if model_type == "llama4_text" and c.get("interleave_moe_layer_step"):
        step = c["interleave_moe_layer_step"]
        moe_layers = [i for i in range(num_layers) if (i + 1) % step == 0] if n_exp else []
    elif isinstance(moe_freq, list):
        # MiMo-V2: one flag per layer, truthy = the routed-expert block (sglang models/mimo_v2_flash.py:726-729 in
        # 0.5.10.post1: moe_layer_freq[layer_idx] when it is not an int)
        moe_layers = [i for i in range(num_layers) if n_exp and i < len(moe_freq) and moe_freq[i]]
    else:
        moe_layers = [i for i in range(num_layers)
                      if n_exp and i >= first_dense and i not in mlp_only and (i + 1) % sparse_step == 0
                      and i % moe_freq == 0 and layers[i].kind != LayerKind.MAMBA2]
    if model_type == "nemotron_h":
        # Nemotron-H: the "E" layers of hybrid_override_pattern are NemotronHMoE blocks
        # (vllm/model_executor/models/nemotron_h.py:340-360 in 0.32)
        moe_layers = [i for i, ch in enumerate(c.get("hybrid_override_pattern") or "") if ch == "E"] if n_exp else []
        if any(ch == "E" for ch in c.get("hybrid_override_pattern") or "") and not (n_exp and moe_i and topk):
            raise EngineInputError("config.n_routed_experts", "Nemotron-H MoE layers (E in hybrid_override_pattern) "
                                   "need n_routed_experts, moe_intermediate_size and num_experts_per_tok")

    # --- parameter count (elements), per component -------------------------------------------
    p = ParamCount()
    p.embed = vocab * hidden
    p.lm_head = 0 if tie else vocab * hidden
    bias = bool(c.get("attention_bias")) or model_type in ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "phi")
    qk_norm = model_type in ("qwen3", "qwen3_moe", "qwen3_next", "gemma3_text", "gemma3", "olmo2", "glm4_moe",
                             "gemma4", "gemma4_text") or bool(c.get("use_qk_norm")) \
        or model_type in _GATED_QUERY_TYPES  # Qwen3NextAttention's q_norm / k_norm (qwen3_next.py, reused by Qwen3.5)
    kv_lora = c.get("kv_lora_rank")
    rope_dim = c.get("qk_rope_head_dim")
    mamba: dict[str, int] = {}
    norms_per_layer = 2 * hidden
    if model_type in ("gemma2", "gemma3_text", "gemma3", "gemma4", "gemma4_text"):
        norms_per_layer = 4 * hidden
    elif model_type == "phi":
        norms_per_layer = hidden  # one LayerNorm per layer (weight here, bias added below)

    nemotron = model_type == "nemotron_h"
    mixer = "mixer" if nemotron else "self_attn"
    moe_block = "block_sparse_moe" if model_type in ("mixtral", "minimax", "minimax_m2") else "mlp"
    gated_query = _gated_query(c, model_type)

    def module(i: int, comp: str, name: str, n: int) -> None:
        p.modules.append((i, comp, name, n))

    for i, layer in enumerate(layers):
        kind = layer.kind
        if kind == LayerKind.MLA:
            ql, nope, v_hd = c.get("q_lora_rank"), c["qk_nope_head_dim"], c["v_head_dim"]
            q = hidden * ql + ql + ql * num_heads * (nope + rope_dim) if ql else hidden * num_heads * (nope + rope_dim)
            kv = hidden * (kv_lora + rope_dim) + kv_lora + kv_lora * num_heads * (nope + v_hd)
            p.attention += q + kv + num_heads * v_hd * hidden
            if ql:
                module(i, "attention", "self_attn.q_a_proj", hidden * ql)
                module(i, "attention", "self_attn.q_b_proj", ql * num_heads * (nope + rope_dim))
            else:
                module(i, "attention", "self_attn.q_proj", hidden * num_heads * (nope + rope_dim))
            module(i, "attention", "self_attn.kv_a_proj_with_mqa", hidden * (kv_lora + rope_dim))
            module(i, "attention", "self_attn.kv_b_proj", kv_lora * num_heads * (nope + v_hd))
            module(i, "attention", "self_attn.o_proj", num_heads * v_hd * hidden)
            # DeepSeek-V3.2's lightning indexer is not in this count: vLLM replicates it on every TP rank
            # (memory.py adds it, layers.indexer_weight_bytes)
        elif kind in (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.CROSS):
            hd = layer.head_dim or head_dim
            kvh = layer.num_kv_heads or num_kv
            q_out = num_heads * hd * (2 if gated_query else 1)  # Qwen3-Next / Qwen3.5: gated query
            # Gemma 4: k_eq_v full layers have no v_proj (K loaded into both slots); KV-shared layers have only
            # q_proj (gemma4.py _gemma4_layer_weights_mapper and Gemma4Attention, 0.32)
            kv_mats = 0 if layer.kv_shared else (1 if gemma4 and kind == LayerKind.FULL and c.get("attention_k_eq_v")
                                                  else 2)
            if kv_mats == 1:
                # ... but vLLM still builds the whole QKVParallelLinear, V slot included, and loads K into both
                # (gemma4.py:419-431 in 0.32): memory the checkpoint does not count
                p.kv_alloc_only += hidden * kvh * hd
                module(i, "kv_alloc_only", f"{mixer}.v_proj", hidden * kvh * hd)
            kv_p = kv_mats * hidden * kvh * hd
            a = hidden * q_out + kv_p + num_heads * hd * hidden
            if bias:
                a += num_heads * head_dim + 2 * num_kv * head_dim
            if c.get("attention_bias") and model_type == "gpt_oss":
                a += hidden  # o_proj bias
            if model_type == "gpt_oss":
                a += num_heads  # attention sinks
            if qk_norm or kind == LayerKind.CROSS:
                a += (1 if layer.kv_shared else 2) * hd  # q_norm (+ k_norm)
            if model_type == "phi":
                a += hidden  # dense bias
            p.attention += a
            p.kv_proj += kv_p
            module(i, "attention", f"{mixer}.q_proj", hidden * q_out)
            if kv_mats:
                module(i, "kv_proj", f"{mixer}.k_proj", hidden * kvh * hd)
            if kv_mats == 2:
                module(i, "kv_proj", f"{mixer}.v_proj", hidden * kvh * hd)
            module(i, "attention", f"{mixer}.o_proj", num_heads * hd * hidden)
        elif kind == LayerKind.GDN:
            hk, dk = c["linear_num_key_heads"], c["linear_key_head_dim"]
            hv, dv = c["linear_num_value_heads"], c["linear_value_head_dim"]
            conv_k = c.get("linear_conv_kernel_dim") or 4
            conv_dim = 2 * hk * dk + hv * dv
            gdn = hidden * (2 * hk * dk + 2 * hv * dv) + hidden * 2 * hv + conv_dim * conv_k \
                + 2 * hv + dv + hv * dv * hidden
            p.mamba += gdn
            module(i, "mamba", "linear_attn.in_proj_qkvz", gdn)
            mamba.update(gdn_hk=hk, gdn_dk=dk, gdn_hv=hv, gdn_dv=dv, conv_kernel=conv_k)
        elif kind == LayerKind.MAMBA2:
            heads = c.get("mamba_num_heads") or c.get("mamba_n_heads") or c.get("n_heads") or 0
            hd = c.get("mamba_head_dim") or c.get("mamba_d_head") or 64
            d_inner = heads * hd if heads else (c.get("expand") or 2) * hidden
            heads = heads or d_inner // hd
            groups = c.get("n_groups") or c.get("mamba_n_groups") or 1
            state = c.get("ssm_state_size") or c.get("mamba_d_state") or 128
            conv_k = c.get("conv_kernel") or c.get("mamba_d_conv") or 4
            conv_dim = d_inner + 2 * groups * state
            in_proj = hidden * (2 * d_inner + 2 * groups * state + heads)
            p.mamba += in_proj + conv_dim * conv_k + conv_dim + 3 * heads + d_inner + d_inner * hidden
            m2 = "mixer" if nemotron else "mamba"
            module(i, "mamba", f"{m2}.in_proj", in_proj)
            module(i, "mamba", f"{m2}.conv1d", conv_dim * conv_k + conv_dim + 3 * heads + d_inner)
            module(i, "mamba", f"{m2}.out_proj", d_inner * hidden)
            mamba.update(m2_heads=heads, m2_head_dim=hd, m2_d_inner=d_inner, m2_groups=groups, m2_state=state,
                         conv_kernel=conv_k)
        elif kind == LayerKind.KDA:
            # KimiDeltaAttention (vllm/model_executor/layers/kda.py:120-200 in 0.19): q/k/v projections, the
            # low-rank forget (f_a, f_b) and output (g_a, g_b) gates, beta (b_proj), A_log, dt_bias, three
            # depthwise short convolutions, the gated output norm and o_proj
            lac = c["linear_attn_config"]
            kh, kd, conv_k = lac["num_heads"], lac["head_dim"], lac["short_conv_kernel_size"]
            proj = kh * kd
            p.mamba += 3 * hidden * proj + 2 * (hidden * kd + kd * proj) + hidden * kh + kh + proj \
                + 3 * proj * conv_k + kd + proj * hidden
            mamba.update(kda_heads=kh, kda_head_dim=kd, conv_kernel=conv_k)
        elif kind == LayerKind.MAMBA1:
            d_inner = (c.get("mamba_expand") or 2) * hidden
            state = c.get("mamba_d_state") or 16
            conv_k = c.get("mamba_d_conv") or 4
            dt_rank = c.get("mamba_dt_rank") or -(-hidden // 16)
            p.mamba += hidden * 2 * d_inner + d_inner * conv_k + d_inner + d_inner * (dt_rank + 2 * state) \
                + dt_rank * d_inner + d_inner + d_inner * state + d_inner + d_inner * hidden
            mamba.update(m1_d_inner=d_inner, m1_state=state, conv_kernel=conv_k)

        # MLP / MoE of this layer
        if i in moe_layers and nemotron:
            # NemotronHMoE (vllm/model_executor/models/nemotron_h.py:140-255 in 0.32): a router (hidden x experts,
            # replicated, + fp32 e_score_correction_bias), non-gated relu2 experts (up + down) of
            # moe_intermediate_size, optionally in a latent space (moe_latent_size: fc1/fc2_latent_proj,
            # ReplicatedLinear, unquantized in quantized checkpoints, :196-226), and a shared NemotronHMLP of
            # moe_shared_expert_intermediate_size x n_shared_experts (up + down, :179-194).
            latent = _opt_int(c, "moe_latent_size") or 0
            per_expert = 2 * (latent or hidden) * moe_i
            p.experts += n_exp * per_expert
            p.active_experts += topk * per_expert
            p.router += hidden * n_exp + n_exp + (2 * hidden * latent if latent else 0)
            module(i, "experts", "mixer.experts", n_exp * per_expert)
            shared_i = (_opt_int(c, "moe_shared_expert_intermediate_size") or 0) * n_shared
            if shared_i:
                p.shared_experts += 2 * hidden * shared_i
                module(i, "shared_experts", "mixer.shared_experts.up_proj", hidden * shared_i)
                module(i, "shared_experts", "mixer.shared_experts.down_proj", hidden * shared_i)
        elif i in moe_layers:
            per_expert = 3 * hidden * moe_i  # gate + up (fused for gpt-oss) + down
            if model_type == "gpt_oss":
                per_expert += 2 * moe_i + hidden  # gate_up and down biases
            p.experts += n_exp * per_expert
            p.active_experts += topk * per_expert
            # Gemma 4 keeps its experts beside the dense MLP at layers.<i>.experts (gemma4.py:646-653 in 0.32)
            module(i, "experts", "experts" if gemma4 else f"{moe_block}.experts", n_exp * per_expert)
            p.router += hidden * n_exp + (n_exp if model_type in ("gpt_oss", "kimi_linear")
                                          or c.get("topk_method") == "noaux_tc" else 0)
            if gemma4:
                # Gemma4Router: proj + scale (hidden) + per_expert_scale; the dense MLP runs beside the experts,
                # with three more norms (gemma4.py:300-320, :630-665 in 0.32)
                p.router += hidden + n_exp
                p.mlp += 3 * hidden * intermediate
                for proj in ("gate_proj", "up_proj", "down_proj"):
                    module(i, "mlp", f"mlp.{proj}", hidden * intermediate)
                p.norms += 3 * hidden
            shared_i = n_shared * moe_i or c.get("shared_expert_intermediate_size") or 0
            if shared_i:
                p.shared_experts += 3 * hidden * shared_i
                name = "mlp.shared_expert" if c.get("shared_expert_intermediate_size") else "mlp.shared_experts"
                for proj in ("gate_proj", "up_proj", "down_proj"):
                    module(i, "shared_experts", f"{name}.{proj}", hidden * shared_i)
                if c.get("shared_expert_intermediate_size"):
                    p.shared_experts += hidden  # shared expert gate (Qwen MoE)
        elif model_type == "nemotron_h":
            if c.get("hybrid_override_pattern", "")[i:i + 1] == "-":
                p.mlp += 2 * hidden * intermediate
                module(i, "mlp", "mixer.up_proj", hidden * intermediate)
                module(i, "mlp", "mixer.down_proj", hidden * intermediate)
        elif nas is not None:
            ffn_i = nas[i]["intermediate"]
            if ffn_i:
                p.mlp += 3 * hidden * ffn_i
                for proj in ("gate_proj", "up_proj", "down_proj"):
                    module(i, "mlp", f"mlp.{proj}", hidden * ffn_i)
        elif layer.kind != LayerKind.MAMBA2 or model_type not in _MAMBA2_TYPES:
            gated = model_type not in _PLAIN_MLP_TYPES
            # Gemma 4 use_double_wide_mlp: the KV-shared layers' MLP is twice as wide (gemma4.py:597-606, 0.32)
            wide = 2 if gemma4 and layer.kv_shared and c.get("use_double_wide_mlp") else 1
            p.mlp += (3 if gated else 2) * hidden * intermediate * wide
            for proj in ("gate_proj", "up_proj", "down_proj")[(0 if gated else 1):]:
                module(i, "mlp", f"mlp.{proj}", hidden * intermediate * wide)
            if model_type == "phi":
                p.mlp += intermediate + hidden
        if nas is not None:  # input_layernorm with attention, post_attention_layernorm with the FFN
            p.norms += hidden * ((nas[i]["n_heads_in_group"] is not None) + bool(nas[i]["intermediate"]))
        else:
            p.norms += hidden if model_type == "nemotron_h" else norms_per_layer
    p.norms += hidden  # final norm
    ple = _opt_int(c, "hidden_size_per_layer_input", 0) or 0
    if gemma4 and ple:
        # Gemma 4 per-layer embeddings (PLE): a vocab_size_per_layer_input x (layers x ple) table, its projection
        # from the hidden state and norm, and per layer a gate (hidden -> ple), a projection (ple -> hidden) and a
        # norm (gemma4.py:674-706, :823-840 in 0.32)
        ple_vocab = _opt_int(c, "vocab_size_per_layer_input") or vocab
        p.embed += ple_vocab * num_layers * ple
        p.attention += hidden * num_layers * ple
        p.norms += ple + num_layers * hidden
        p.mlp += num_layers * 2 * hidden * ple
    if model_type == "phi":
        p.norms += num_layers * hidden + hidden  # LayerNorm biases
        p.lm_head += vocab  # lm_head bias

    head = mtp_head(config)
    mtp = head.layers if isinstance(head, MtpHead) else 0
    if mtp > 64:
        raise EngineInputError("config.num_nextn_predict_layers", f"{mtp} MTP layers is beyond any real model (this "
                               "calculator takes at most 64)")
    gdn_hybrid = model_type in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe")
    if mtp and nemotron and c.get("mtp_hybrid_override_pattern"):
        # Nemotron-H MTP (NemotronHMultiTokenPredictor, vllm/model_executor/models/nemotron_h_mtp.py:221-300 in
        # 0.32): one layer per character of mtp_hybrid_override_pattern ("*" attention, "E" MoE), each with its
        # norm; the first adds enorm, hnorm and eh_proj (2h -> h), the last a final_layernorm (:60-95, :134-180)
        pattern = str(c["mtp_hybrid_override_pattern"])
        if any(ch not in "*E" for ch in pattern):
            raise EngineInputError("config.mtp_hybrid_override_pattern", "vLLM builds only * and E MTP layers "
                                   "(nemotron_h_mtp.py:288-296)")
        n_attn = sum(1 for la in layers if la.kind == LayerKind.FULL)
        per_attn = p.attention // n_attn if n_attn else 0
        per_moe = (p.experts + p.shared_experts + p.router) // len(moe_layers) if moe_layers else 0
        if ("*" in pattern and not per_attn) or ("E" in pattern and not per_moe):
            raise EngineInputError("config.mtp_hybrid_override_pattern", "names a layer type the model has none of")
        p.mtp = mtp * (sum(per_attn if ch == "*" else per_moe for ch in pattern) + len(pattern) * hidden
                       + 2 * hidden * hidden + 3 * hidden)
        p.mtp_proj, p.mtp_replicated = mtp * 2 * hidden * hidden, mtp * (len(pattern) * hidden + 3 * hidden)
        notes.append(f"{mtp} MTP step(s) ({pattern}) stored in the checkpoint; {MTP_NOT_LOADED}")
    elif mtp and gdn_hybrid:
        # Qwen3-Next / Qwen3.5 MTP (Qwen3NextMultiTokenPredictor, vllm/model_executor/models/qwen3_next_mtp.py:47-112;
        # Qwen3_5MultiTokenPredictor, qwen3_5_mtp.py:66-140 in 0.32): ``mtp`` decoder layers built with
        # layer_type="full_attention" (the target's gated-query full-attention layer, its FFN: the sparse MoE block
        # with its shared expert for the MoE models, the dense MLP otherwise; input and post-attention norms), plus,
        # once, fc (2h -> h, no bias) and three norms (norm, pre_fc_norm_hidden, pre_fc_norm_embedding).
        # embed_tokens and lm_head are the target's (shared by the proposer), so not counted.
        n_full = sum(1 for la in layers if la.kind == LayerKind.FULL)
        if not n_full:
            raise EngineInputError("config.layer_types", "the MTP layer is a full-attention layer and this config "
                                   "lists none to size it from")
        per_attn = p.attention // n_full
        ffn = ((p.experts + p.shared_experts + p.router) // len(moe_layers) if moe_layers
               else p.mlp // num_layers)
        p.mtp = mtp * (per_attn + ffn + 2 * hidden) + 2 * hidden * hidden + 3 * hidden
        p.mtp_proj = 2 * hidden * hidden
        p.mtp_replicated = mtp * (2 * hidden + (p.router // len(moe_layers) if moe_layers else 0)) + 3 * hidden
        notes.append(f"{mtp} MTP layer(s) ({head.key}) stored in the checkpoint; {MTP_NOT_LOADED}")
    elif mtp:
        # One DeepSeek-style MTP module: a full decoder layer (MoE) + enorm/hnorm + eh_proj (2h -> h).
        per_layer_attn = p.attention // num_layers
        moe_layer = (n_exp * 3 * hidden * moe_i + hidden * n_exp + n_shared * 3 * hidden * moe_i)
        p.mtp = mtp * (per_layer_attn + moe_layer + 2 * hidden * hidden + 4 * hidden)
        p.mtp_proj, p.mtp_replicated = mtp * 2 * hidden * hidden, mtp * (4 * hidden + hidden * n_exp)
        notes.append(f"{mtp} MTP layer(s) stored in the checkpoint; {MTP_NOT_LOADED}")

    p.vision = _vision_params(config, notes) if is_mm else 0

    # Rotary cos/sin cache: vLLM keeps a (max_position, rotary_dim) buffer in the model dtype
    # (vllm/model_executor/layers/rotary_embedding/base.py), counted in "Model loading took".
    # get_rope reads rope_parameters["partial_rotary_factor"] (vllm/model_executor/layers/rotary_embedding/
    # __init__.py:66-72 in 0.32), where transformers 5 configs keep it (Qwen3.5); older configs have it at the top
    # level (moved into rope_parameters by patch_rope_parameters, vllm/transformers_utils/config.py:622-640)
    rope_params = c.get("rope_parameters") if isinstance(c.get("rope_parameters"), dict) else {}
    partial = rope_params.get("partial_rotary_factor") or c.get("partial_rotary_factor") or 1.0
    rotary_dim = int((rope_dim or head_dim) * partial)
    max_pos = _opt_int(c, "max_position_embeddings")
    rope_scaling = c.get("rope_scaling") or {}
    rope_len = max_pos or 0
    rope_type = rope_scaling.get("rope_type", rope_scaling.get("type")) if isinstance(rope_scaling, dict) else None
    factor = rope_scaling.get("factor") if isinstance(rope_scaling, dict) else None
    if rope_type in ("yarn", "deepseek_yarn") and factor:
        # YaRN caches original_max_position_embeddings × factor positions (yarn_scaling_rope.py)
        rope_len = int((rope_scaling.get("original_max_position_embeddings") or max_pos or 0) * factor)
    elif rope_type in ("linear", "dynamic") and factor:
        # Linear / dynamic-NTK scaling cache max_position × factor positions
        # (vllm/model_executor/layers/rotary_embedding/linear_scaling_rope.py, dynamic_ntk_scaling_rope.py)
        rope_len = int((max_pos or 0) * factor)
    # vLLM's derived max_model_len: max_position_embeddings x the RoPE factor, except for YaRN / llama3 /
    # longrope (already scaled) and Gemma 3 (vllm/config/model.py _get_and_verify_max_len, 0.32).
    derived_len = max_pos or _opt_int(c, "n_positions") or _opt_int(c, "max_seq_len") or _opt_int(c, "seq_length")
    # Before 0.30 only su / longrope / llama3 kept the length, and YaRN derived it from
    # original_max_position_embeddings x factor (vllm/config/model.py:2452-2458 in 0.29.0; vllm/config.py:3463-3478
    # in 0.9.2); 0.30.0 added yarn, deepseek_yarn and deepseek_llama_scaling to the kept ones (model.py:2471-2478).
    yarn_scaled_len = derived_len
    if derived_len and factor and "gemma3" not in model_type:
        if rope_type not in (None, "default", "su", "longrope", "llama3", "yarn", "deepseek_yarn",
                             "deepseek_llama_scaling", "mrope"):
            derived_len = int(derived_len * factor)
        if rope_type not in (None, "default", "su", "longrope", "llama3", "mrope"):
            base = rope_scaling.get("original_max_position_embeddings") if rope_type == "yarn" else None
            yarn_scaled_len = int((base or yarn_scaled_len) * factor)
    rope_cache_len_extra = 0
    rope_cache_extra_elems = 0
    if gemma4 and isinstance(rope_params.get("full_attention"), dict):
        # Gemma 4 builds one rotary embedding per layer type from rope_parameters[layer_type] (gemma4.py:453-498
        # in 0.32): the sliding layers' (head_dim) and the global layers' (global head size). A "proportional"
        # global RoPE (Gemma4RotaryEmbedding) caches the whole head size, not the rotary part
        # (rotary_embedding/gemma4_rope.py:30-55; get_rope, rotary_embedding/__init__.py:156-166).
        sliding_rp = rope_params.get("sliding_attention") or {}
        rotary_dim = int(head_dim * (sliding_rp.get("partial_rotary_factor") or 1.0))
        full_rp = rope_params["full_attention"]
        ghd = next((la.head_dim for la in layers if la.kind == LayerKind.FULL and la.head_dim), head_dim)
        full_dim = ghd if full_rp.get("rope_type") == "proportional" else \
            int(ghd * (full_rp.get("partial_rotary_factor") or 1.0))
        if any(la.kind == LayerKind.FULL for la in layers) and (ghd, full_dim) != (head_dim, rotary_dim):
            rope_cache_extra_elems = (max_pos or 0) * full_dim
    if model_type in ("gemma3_text", "gemma3") and rope_type:
        rope_cache_len_extra = max_pos or 0  # Gemma 3's local layers use a second, unscaled rotary embedding

    encoder_tokens = 0
    if any(la.kind == LayerKind.CROSS for la in layers):
        vc = config.get("vision_config") or {}
        patches = ((vc.get("image_size") or 560) // (vc.get("patch_size") or 14)) ** 2 + 1
        encoder_tokens = (vc.get("max_num_tiles") or 4) * patches
        notes.append(f"cross-attention layers sized for one image of {encoder_tokens} tokens "
                     "(max_num_tiles x (patches + 1))")

    quant = config.get("quantization_config") or c.get("quantization_config") or config.get("compression_config")
    if quant is not None and not isinstance(quant, dict):
        raise EngineInputError("config.quantization_config", f"must be a JSON object (vLLM reads its quant_method), "
                               f"got {type(quant).__name__}")
    if quant is not None and not quant.get("quant_method"):
        raise EngineInputError("config.quantization_config", "has no quant_method: vLLM reads "
                               "quantization_config['quant_method'] (vllm/config/model.py:1379) and fails at start-up")
    return ModelArch(
        architecture=architecture, model_type=model_type, hidden_size=hidden, num_layers=num_layers,
        num_attention_heads=num_heads, num_kv_heads=num_kv, head_dim=head_dim, vocab_size=vocab,
        intermediate_size=intermediate, tie_word_embeddings=bool(tie), max_position_embeddings=max_pos,
        torch_dtype=dtype.replace("torch.", ""), layers=layers, kv_lora_rank=kv_lora, qk_rope_head_dim=rope_dim,
        index_head_dim=_req_int(c, "index_head_dim") if any(la.indexer for la in layers) else None,
        index_n_heads=_req_int(c, "index_n_heads") if any(la.indexer for la in layers) else 0,
        q_lora_rank=_opt_int(c, "q_lora_rank") if kv_lora else None,
        index_topk=_opt_int(c, "index_topk") if any(la.indexer for la in layers) else None,
        mla_nope_v_dim=(c.get("qk_nope_head_dim") or 0) + (c.get("v_head_dim") or 0) if kv_lora else 0,
        num_experts=n_exp if moe_layers else 0, num_experts_per_tok=topk if moe_layers else 0,
        moe_intermediate_size=moe_i if moe_layers else 0, num_moe_layers=len(moe_layers), qk_norm=qk_norm,
        mamba=mamba, mtp_layers=mtp,
        mtp_head=head.source if isinstance(head, MtpHead) else None,
        mtp_refusal=head.reason if isinstance(head, NoMtpHead) else None,
        mtp_n_predict=head.n_predict if isinstance(head, MtpHead) else None,
        mtp_full_attention=bool(mtp and gdn_hybrid),
        mtp_draft_type=head.draft_type if isinstance(head, MtpHead) else None,
        mamba_ssm_cache_dtype=(c.get("mamba_ssm_cache_dtype") or "float32") if model_type == "nemotron_h" else None,
        has_sinks=model_type == "gpt_oss", rotary_dim=rotary_dim, rope_cache_len=rope_len,
        rope_cache_len_extra=rope_cache_len_extra, rope_cache_extra_elems=rope_cache_extra_elems, derived_max_model_len=derived_len,
        derived_max_model_len_yarn_scaled=yarn_scaled_len, is_multimodal=is_mm,
        encoder_tokens=encoder_tokens, quantization_config=quant if isinstance(quant, dict) else None,
        params=p, assumptions=notes,
    )
