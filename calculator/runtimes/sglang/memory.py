"""SGLang's start-up memory plan, per rank, as SGLang computes and logs it.

What SGLang does at start-up (every step cited per release in :mod:`.releases`):

1. ``ServerArgs.__post_init__`` picks ``chunked_prefill_size``, ``cuda_graph_max_bs`` and, unless
   ``--mem-fraction-static`` is passed, ``mem_fraction_static`` from the GPU memory capacity that
   ``nvidia-smi`` (``rocminfo`` on ROCm) reports, in MiB (``gpu_capacity``).
2. The model runner measures free memory before loading (``pre_load``: ``torch.cuda.mem_get_info``, the
   minimum over ranks) -- the log's ``Load weight begin. avail mem=T GB`` -- loads the weights
   (``Load weight end ... mem usage=W GB``) and measures free memory again (``X = T - W``).
3. ``profile_max_num_token``: ``rest = X - T * (1 - mem_fraction_static)`` GiB; for hybrid Mamba/GDN
   models a share ``mamba_full_memory_ratio / (1 + ratio)`` of ``rest`` goes to the Mamba state pool (0.5.23: solved
   with the pool's padding slot, ``K = (share - per_req) // per_req`` and ``K + 1`` slots taken);
   ``max_total_num_tokens = int(rest * 2**30) // cell_size``, aligned down to ``page_size``. Hybrid SWA (gpt-oss,
   Llama 4, MiMo-V2-Flash; Gemma 4 and MiMo-V2 in 0.5.23): 0.5.10 sizes every layer at its own row (full / SWA heads
   and head sizes) then splits the tokens so that the sliding layers hold ``swa_full_tokens_ratio`` (0.8) of the
   full ones; 0.5.23 divides by full rows + 0.8 x sliding rows directly (:func:`hybrid_swa_geometry`).
   So ``max_total_num_tokens * cell = T * mem_fraction_static - W`` (minus Mamba): the fraction applies to
   the memory free *before* loading, and activations, CUDA graphs and NCCL buffers live in the
   ``(1 - mem_fraction_static)`` share SGLang keeps back (no profiling run, unlike vLLM).
4. ``cell_size`` (bytes per token, one rank): MHA/GQA ``kv_heads_per_rank * (head_dim + v_head_dim) *
   layers * elem``, ``kv_heads_per_rank = max(1, num_key_value_heads // attention_tp_size)`` (heads are
   replicated when TP exceeds them); MLA ``(kv_lora_rank + qk_rope_head_dim) * layers * elem``; DeepSeek
   NSA (V3.2) adds the indexer's ``index_head_dim + index_head_dim // 128 * 4`` bytes per layer from
   0.5.3.post1 (0.5.23: the pool's own rows, 656-byte scaled fp8 rows on Hopper with an fp8 KV, are the MLA part);
   hybrid GDN models count only their full-attention layers.
5. ``max_num_reqs = min(max(int(tokens / context_len * 512), 2048), 4096)`` rows of ``ReqToTokenPool``;
   ``max_running_requests = min(tokens // 2 (or the flag), rows)``.

What the source cannot give, and how this module takes it:

- ``T`` (free memory before loading) = GPU memory minus the CUDA context, torch and NCCL/custom-all-reduce
  buffers created at start-up. An input (``free_memory_before_load_gib``, the log's ``Load weight begin``
  value) or public start-up logs (:mod:`.startup`: the context part by GPU model, else by resident threads, the
  part SGLang logs as ``Init torch distributed ends. mem usage`` by vendor, link and ranks), labelled ``fit`` in
  ``sources`` with the logs named; when the pool is small next to it, a note says how far the logs' spread moves
  the token count.
- ``W`` (weights on one rank): an input (``weights_bytes``; the log's ``mem usage``) or an estimate
  (:mod:`.weights`: the parameter count plus what SGLang keeps beside it: rotary caches, replicated layers,
  vision-tower sharding, ROCm-only copies, caching-allocator rounding), each term in ``sources``.
- The CUDA-graph, activation and NCCL memory taken *after* the pool is sized is not modelled: SGLang does
  not size the pool from it (it lives in the ``1 - mem_fraction_static`` share).

Units: GiB = 2**30 bytes (SGLang's "GB" in its logs divides by 2**30). Raises
:class:`~calculator.engine.errors.EngineInputError` naming the field for configurations this module does
not model (unknown release, attention kinds not listed above, float32 checkpoints, ...).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import GPU

from . import releases as R
from .compat import _DSA_ARCHS_0523, below_sm75, check_backend, default_backend, fa3_e5m2_switch
from .kv_dtype import checkpoint_kv
from .releases import at_least, check_release, cite
from .startup import startup_overhead
from .weights import estimate as estimate_weights
from .weights import nextn_draft_weights

GIB = 1 << 30

# The start-up overhead (GPU memory gone before loading: CUDA/HIP context, torch, NCCL/RCCL communicators, custom
# all-reduce buffers) lives in :mod:`.startup`: SGLang's source says which communicators exist, the public logs of
# ``data/startup_overhead.json`` give the context and communicator sizes (no record of the shared cases among them).

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}

SpecAlgo = Literal["EAGLE", "EAGLE3", "NEXTN", "MTP", "STANDALONE", "NGRAM"]


class Source(BaseModel):
    """Where one number comes from. ``kind``: ``source`` (SGLang code, cited), ``config`` (the model's
    config.json), ``input`` (given by the caller or read from a log), ``fit`` (fitted to data, see the
    constant), ``estimate`` (computed outside SGLang's code, e.g. parameter count)."""

    field: str
    value: str
    kind: Literal["source", "config", "input", "fit", "estimate"]
    source: str


class MambaPool(BaseModel):
    """The Mamba / GDN state pool of a hybrid model (one rank)."""

    per_request_bytes: int
    conv_bytes_per_request: int
    ssm_bytes_per_request: int
    max_mamba_cache_size: int
    conv_state_gib: float
    ssm_state_gib: float


class SpeculativePlan(BaseModel):
    """Speculative decoding as SGLang sets it up: the resolved parameters and the draft's KV pool."""

    algorithm: str
    num_steps: int | None
    eagle_topk: int | None
    num_draft_tokens: int | None
    draft_cell_size_bytes: int | None
    draft_layers: int | None
    draft_kv_gib: float | None
    draft_weights_gib: float | None
    target_headroom_tokens: int = 0


class SGLangPlan(BaseModel):
    """Per-rank start-up figures, named like SGLang's log lines. Memory in GiB (2**30 B)."""

    model_config = ConfigDict(frozen=True)

    release: str
    architecture: str
    gpu: str
    tp_size: int
    dp_size: int
    enable_dp_attention: bool
    ep_size: int
    pp_size: int
    attention_tp_size: int
    attention: Literal["mha", "mla", "nsa", "hybrid_gdn", "hybrid_swa"]
    attention_backend: str | None
    kv_cache_dtype: str
    page_size: int
    context_length: int
    chunked_prefill_size: int  # as ServerArgs holds it once resolved: per DP rank under DP attention
    # what --chunked-prefill-size carries (the flag, else the GPU-table default) before SGLang divides it under DP
    # attention (_handle_data_parallelism, cite(release, "dp_chunked")): the value a launch command passes
    chunked_prefill_size_arg: int
    cuda_graph_max_bs: int
    # prefill (extend) batches of up to piecewise_cuda_graph_max_tokens tokens replay piecewise CUDA graphs (0.5.10:
    # on by default, server_args.py _handle_piecewise_cuda_graph); False: every prefill pass runs eagerly
    piecewise_cuda_graph: bool = False
    piecewise_cuda_graph_max_tokens: int = 0
    max_prefill_tokens: int
    gpu_memory_capacity_mib: float
    mem_fraction_static: float
    # Load weight begin / end
    free_before_load_gib: float
    weights_gib: float
    free_after_load_gib: float
    # profile_max_num_token
    reserved_gib: float  # free_before_load * (1 - mem_fraction_static)
    rest_memory_gib: float
    mamba: MambaPool | None = None
    cell_size_bytes: int  # bytes per token SGLang divides by (one rank)
    pool_bytes_per_token: int  # bytes per token the pool actually allocates (NSA fp8 rows differ)
    max_total_num_tokens: int
    swa_max_total_num_tokens: int | None = None
    k_size_gib: float | None = None
    v_size_gib: float | None = None
    kv_size_gib: float  # K + V (MHA) or the single MLA/NSA figure, as the log line prints it
    kv_pool_gib: float  # what the pool allocates, including an NSA indexer the 0.5.3 log left out
    max_num_reqs: int
    does_not_start: str | None = None  # why SGLang fails at start-up (weights too big, no KV pool), else None
    # why the NEXTN draft this release builds cannot use the checkpoint's MTP attention weights (its acceptance is then
    # not the public MTP figure's), else None; said in ``notes``, read by the speed model, not part of SGLang's log
    draft_mismatch: str | None = Field(None, exclude=True)
    # SGLang stops while reading the checkpoint's quantization config (kv_dtype.checkpoint_kv), and the --quantization
    # that loads it when one does: the runtime's compat check reports them (a start-up refusal, not a memory one)
    quantization_refusal: str | None = Field(None, exclude=True)
    quantization_fix: str | None = Field(None, exclude=True)
    max_running_requests: int
    req_to_token_gib: float
    free_after_pool_gib: float  # estimate: free_after_load - pool - Mamba - req_to_token
    # when free_before_load is the fit: % change of max_total_num_tokens per 0.1 GiB of start-up overhead
    tokens_pct_per_0_1_gib_overhead: float | None = None
    speculative: SpeculativePlan | None = None
    swa_pool: HybridSWAPool | None = None  # the hybrid sliding-window pool's two sub-pools (attention "hybrid_swa")
    sources: list[Source]
    notes: list[str] = []

    def source_of(self, field: str) -> Source:
        for s in self.sources:
            if s.field == field:
                return s
        raise KeyError(field)


# ----------------------------------------------------------------------------------------------------
# Model description (SGLang's view of config.json)

_NSA_ARCHS = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM")


def nsa_architectures(release: str) -> tuple[str, ...]:
    """The ``architectures[0]`` values SGLang ``release`` treats as DeepSeek NSA/DSA (with ``index_topk`` set):
    ``is_deepseek_nsa`` of ``sglang/srt/configs/model_config.py`` (``cite(release, "nsa_archs")``). 0.5.3 and
    0.5.3.post1: DeepSeek V3/V3.2 only; 0.5.7 and 0.5.8.post1 add the NextN draft, Mistral Large 3 and Pixtral;
    0.5.9 and 0.5.10.post1 add GLM-5 (``GlmMoeDsaForCausalLM``); 0.5.23 names them DSA (``is_deepseek_dsa``) and adds
    GLM-5 Next, LongCat-Flash, Dots3 and HYV4 (the memory plan refuses DSA there)."""
    if at_least(release, "0.5.23"):
        return _DSA_ARCHS_0523
    archs = _NSA_ARCHS
    if at_least(release, "0.5.7"):
        archs += ("DeepseekV3ForCausalLMNextN", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration")
    if at_least(release, "0.5.9"):
        archs += ("GlmMoeDsaForCausalLM",)
    return archs
# the DSA architectures whose 0.5.23 pool is modelled (DeepSeek V3.2 and GLM-5: the dsa backend, page 64, the indexer on
# every layer)
_DSA_MODELLED_0523 = ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "GlmMoeDsaForCausalLM")


def dsa_indexer_layers(c: dict[str, Any], n_layers: int) -> int:
    """How many of the ``n_layers`` DSA layers run their own indexer (and keep index-K rows in SGLang 0.5.23's pool):
    those for which ``dsa_layer_skips_topk`` (configs/model_config.py:488) is False -- ``indexer_types`` not
    ``"shared"``, else every ``cli_factor``-th layer, else ``index_topk_pattern`` not ``"S"``, else the
    ``index_topk_freq`` / ``index_skip_topk_offset`` schedule (every layer with the defaults)."""
    types = c.get("indexer_types")
    if types is not None:
        return sum(1 for i in range(n_layers) if not (i < len(types) and types[i] == "shared"))
    cli = c.get("cli_factor") or 1
    if cli > 1:
        return sum(1 for i in range(n_layers) if i % cli == 0)
    pattern = c.get("index_topk_pattern")
    if pattern is not None:
        return sum(1 for i in range(n_layers) if not (i < len(pattern) and pattern[i] == "S"))
    freq = c.get("index_topk_freq") or 1
    offset = c.get("index_skip_topk_offset")
    return sum(1 for i in range(n_layers)
               if (max(i - offset + 1, 0) if offset is not None else max(i - 1, 0)) % freq == 0)


# gated delta-net hybrids (SGLang configs/qwen3_next.py, qwen3_5.py); which releases have them: data/architectures.json
_GDN_ARCHS = {"Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM",
              "Qwen3_5MoeForConditionalGeneration"}
_MAMBA2_TYPES = {"nemotron_h", "mamba2", "bamba", "granitemoehybrid", "falcon_h1", "zamba2", "plamo2", "jamba"}
_PIECEWISE_OFF_ARCHS = {"DeepseekV32ForCausalLM", "Qwen3NextForCausalLM", "GlmMoeDsaForCausalLM",
                        "BailingMoeV2_5ForCausalLM", "LLaDAModelLM"}
_GEMMA_SWA = {"Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"}

# sglang==0.5.23 configs/model_config.py:2651 is_hybrid_swa_model (with SWA_SINK_ARCHS, :88, and MIMO_V2_MODEL_ARCHS, :74)
_HYBRID_SWA_0523 = {"BeamForCausalLM", "Llama4ForConditionalGeneration", "DeepseekV4ForCausalLM",
                    "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark", "GptOssForCausalLM",
                    "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM", "IQuestQ1MTP",
                    "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2MTP", "Step3p5ForCausalLM", "Step3p5MTP",
                    "Step3p7ForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
                    "EmbeddingGemma2Model", "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
                    "LagunaForCausalLM", "MellumForCausalLM", "MuseGlimmerForCausalLM",
                    "MuseGlimmerForConditionalGeneration", "InklingForConditionalGeneration",
                    "InklingForConditionalGenerationMTP", "UnlimitedOCRForCausalLM"}


# ----------------------------------------------------------------------------------------------------
# Hybrid sliding-window pools (SWAKVPool): which layers go where and how wide their rows are

#: The architectures whose hybrid SWA pool (``is_hybrid_swa_model`` and not disabled) is modelled, per release.
#: 0.5.10.post1's list (configs/model_config.py:1438) also has Step3.5 (refused); 0.5.23's (:2651) has the others of
#: :data:`_HYBRID_SWA_0523` (refused). Up to 0.5.9 only gpt-oss's switched-off pool is modelled.
_SWA_MODELLED = {
    "0.5.10.post1": ("GptOssForCausalLM", "Llama4ForConditionalGeneration", "MiMoV2FlashForCausalLM"),
    "0.5.23": ("GptOssForCausalLM", "Llama4ForConditionalGeneration", "MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM",
               "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"),
}
_MIMO_V2 = ("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM")
_GEMMA4 = ("Gemma4ForCausalLM", "Gemma4ForConditionalGeneration")


def swa_modelled_releases(arch: str) -> tuple[str, ...]:
    """The covered releases whose hybrid sliding-window pool for ``arch`` (``architectures[0]``) is modelled."""
    return tuple(rel for rel, archs in _SWA_MODELLED.items() if arch in archs)


def swa_unmodelled_why(arch: str, release: str) -> str:
    """What would answer a hybrid-SWA model refused in ``release``: the releases modelled for ``arch`` (as
    ``--sglang-version``), or that no covered release is."""
    others = [r for r in swa_modelled_releases(arch) if r != release]
    if others:
        return "; modelled in SGLang " + " and ".join(others) + " (" + " or ".join(
            f"--sglang-version {r}" for r in others) + ")"
    return "; no covered SGLang release is modelled for it"


class HybridSWAPool(BaseModel):
    """SGLang's hybrid sliding-window KV pool on one rank (``SWAKVPool``: a full-attention ``MHATokenToKVPool`` of
    ``max_total_num_tokens`` tokens and a sliding-window one of ``swa_max_total_num_tokens``, each logging its own
    "KV Cache is allocated" line; sizes in GiB as SGLang prints them, without the pools' one padding page).

    Rows: ``kv_heads x (head_dim + v_head_dim) x bytes`` per layer and token, the full layers' and the sliding ones'
    (``full_bytes_per_token`` / ``swa_bytes_per_token``; ``HybridSWAPoolConfigurator`` ``_full_per_token`` /
    ``_swa_per_token``, 0.5.10 ``get_cell_size_per_token``). ``sliding_window_size``: the window SGLang 0.5.23 checks
    the SWA pool against (``validate_swa_pool_size``), tokens; ``window_rule`` says where it comes from."""

    architecture: str
    full_layers: int
    swa_layers: int
    full_kv_heads: int
    head_dim: int
    v_head_dim: int
    swa_kv_heads: int
    swa_head_dim: int
    swa_v_head_dim: int
    full_bytes_per_token: int
    swa_bytes_per_token: int
    sliding_window_size: int | None
    window_rule: str
    swa_full_tokens_ratio: float = 0.8
    full_k_gib: float = 0.0
    full_v_gib: float = 0.0
    swa_k_gib: float = 0.0
    swa_v_gib: float = 0.0


def hybrid_swa_geometry(release: str, arch: str, c: dict[str, Any], *, attn_tp: int, elem: int) -> tuple[
        HybridSWAPool, str]:
    """The layer split and row widths of the hybrid SWA pool SGLang ``release`` builds for ``arch`` (``c``: the text
    config), one rank of attention TP ``attn_tp``, ``elem`` bytes per KV element. Returns the pool (sizes 0) and the
    rules it followed, cited.

    - Layers (``get_hybrid_layer_ids``, ``cite(release, "swa_layers_*")``): gpt-oss and Gemma 4 by ``layer_types``
      (``sliding_attention`` / ``full_attention``), Llama 4 every 4th layer full (``(i + 1) % 4 == 0``: the NoPE
      layers) and the rest chunked-local on the SWA side, MiMo-V2 by ``hybrid_layer_pattern`` (1 SWA, 0 full).
    - Heads and widths: full layers ``max(1, num_key_value_heads // attn_tp) x (head_dim + v_head_dim)``, SWA layers
      ``max(1, swa_num_key_value_heads // attn_tp) x (swa_head_dim + swa_v_head_dim)``, each key falling back to the
      full layers' (``ModelConfig.get_swa_num_kv_heads``, ``_derive_model_shapes``). Gemma 4: SGLang flattens the
      checkpoint's SWA-first shapes, full = ``num_global_key_value_heads`` x ``global_head_dim``, SWA =
      ``num_key_value_heads`` x ``head_dim`` (utils/hf_transformers/config.py:115, transformers' per-layer config).
    - Window: gpt-oss and Gemma 4 ``sliding_window - 1`` (the model's ``get_attention_sliding_window_size``), Llama 4
      ``attention_chunk_size`` (no such method, no ``sliding_window`` key), MiMo-V2 the first of
      ``sliding_window_size`` / ``sliding_window`` / ``window_size`` (``resolve_sliding_window_size``).

    Raises:
        EngineInputError: a config missing the keys the rule reads, or heads the TP size does not divide as SGLang
        asserts.
    """
    n = int(_req(c, "num_hidden_layers"))
    heads = int(_req(c, "num_attention_heads"))
    kv = int(c.get("num_key_value_heads") or heads)
    hd = int(c.get("head_dim") or _req(c, "hidden_size") // heads)
    new = at_least(release, "0.5.23")
    if arch == "GptOssForCausalLM":
        types = c.get("layer_types") or []
        is_swa = [t == "sliding_attention" for t in types[:n]]
        full = (kv, hd, hd)
        swa = full
        window = int(_req(c, "sliding_window")) - 1
        wrule = f"sliding_window - 1 ({cite(release, 'swa_window_gptoss')} get_attention_sliding_window_size)"
        layers = f"{cite(release, 'swa_layers_gptoss')} layer_types"
    elif arch == "Llama4ForConditionalGeneration":
        is_swa = [(i + 1) % 4 != 0 for i in range(n)]
        full = swa = (kv, hd, hd)
        window = int(_req(c, "attention_chunk_size"))
        wrule = f"attention_chunk_size ({cite(release, 'swa_window_chunk')}: no sliding_window in the Llama 4 config)"
        layers = (f"{cite(release, 'swa_layers_llama4')}: layer i is full when (i + 1) % 4 == 0 (the NoPE layers, "
                  "models/llama4.py use_rope), the chunked-local ones go to the SWA pool")
    elif arch in _MIMO_V2:
        pattern = _req(c, "hybrid_layer_pattern")
        if len(pattern) < n:
            raise EngineInputError("config.hybrid_layer_pattern", f"{len(pattern)} entries for {n} layers")
        is_swa = [pattern[i] == 1 for i in range(n)]
        v = int(c.get("v_head_dim") or hd)
        full = (kv, hd, v)
        s_hd = int(c.get("swa_head_dim") or hd)
        # 0.5.23 _derive_model_shapes: swa_v_head_dim defaults to swa_head_dim; 0.5.10 to v_head_dim
        s_v = int(c.get("swa_v_head_dim") or (s_hd if new else v))
        swa = (int(c.get("swa_num_key_value_heads") or kv), s_hd, s_v)
        window = next((int(c[k]) for k in ("sliding_window_size", "sliding_window", "window_size") if c.get(k)), None)
        if window is None:
            raise EngineInputError("config.sliding_window_size", f"{arch}: no sliding_window_size / sliding_window")
        wrule = f"sliding_window_size ({cite(release, 'swa_window_config')}, resolve_sliding_window_size)"
        layers = f"{cite(release, 'swa_layers_mimo')}: hybrid_layer_pattern (1 = SWA, 0 = full)"
    elif arch in _GEMMA4:
        types = c.get("layer_types") or []
        is_swa = [t == "sliding_attention" for t in types[:n]]
        g_hd = int(c.get("global_head_dim") or hd)
        full = (int(c.get("num_global_key_value_heads") or kv), g_hd, g_hd)  # v_head_dim = head_dim (config.py:146)
        swa = (kv, hd, hd)
        window = int(_req(c, "sliding_window")) - 1
        wrule = f"sliding_window - 1 ({cite(release, 'swa_window_gemma4')} get_attention_sliding_window_size)"
        layers = (f"{cite(release, 'swa_layers_gemma4')} layer_types; full layers num_global_key_value_heads x "
                  f"global_head_dim, SWA layers num_key_value_heads x head_dim ({cite(release, 'gemma4_shapes')})")
    else:  # pragma: no cover - guarded by the callers
        raise EngineInputError("config.architectures", f"{arch}: no hybrid SWA geometry")
    if len(is_swa) != n:
        raise EngineInputError("config.layer_types", f"{arch}: {len(is_swa)} layer types for {n} layers")
    n_swa = sum(is_swa)
    if n_swa == 0 or n_swa == n:
        # SGLang asserts at least one SWA layer and, with no full layer, sizes an all-SWA pool: neither is followed
        raise EngineInputError("config.layer_types", f"{arch}: {n_swa} sliding-window layers of {n}: an all-full or "
                               "all-SWA pool is not modelled")
    for what, total in (("full-attention", full[0]), ("sliding-window", swa[0])):
        if total % attn_tp if total >= attn_tp else attn_tp % total:
            raise EngineInputError("tensor_parallel_size", f"{arch}: {total} {what} KV heads and attention TP size "
                                   f"{attn_tp}: SGLang asserts total_num_kv_heads % tp_size == 0 (or tp_size % "
                                   "total_num_kv_heads == 0 when the heads are replicated)")
    fh, sh = max(1, full[0] // attn_tp), max(1, swa[0] // attn_tp)
    pool = HybridSWAPool(architecture=arch, full_layers=n - n_swa, swa_layers=n_swa, full_kv_heads=fh,
                         head_dim=full[1], v_head_dim=full[2], swa_kv_heads=sh, swa_head_dim=swa[1],
                         swa_v_head_dim=swa[2], full_bytes_per_token=fh * (full[1] + full[2]) * elem,
                         swa_bytes_per_token=sh * (swa[1] + swa[2]) * elem, sliding_window_size=window,
                         window_rule=wrule)
    rows = (f"{layers}; rows per layer and token {cite(release, 'swa_rows')}: full max(1, {full[0]} // {attn_tp}) x "
            f"({full[1]} + {full[2]}) x {elem} = {pool.full_bytes_per_token} B, SWA max(1, {swa[0]} // {attn_tp}) x "
            f"({swa[1]} + {swa[2]}) x {elem} = {pool.swa_bytes_per_token} B")
    return pool, rows


def _new_hybrid_swa(release: str, arch: str, hf_config: dict[str, Any], c: dict[str, Any], *,
                    speculative_algorithm: str | None, disable_radix_cache: bool, max_running_requests: int | None,
                    chunked_prefill_size: int | None, notes: list[str], src: Any) -> dict[str, Any] | None:
    """The pool decision for Llama 4, MiMo-V2 and Gemma 4 (gpt-oss keeps its own branch in :func:`plan`): a
    ``{"arch": ...}`` marker when SGLang ``release`` gives the model its hybrid SWA pool and this module follows it,
    ``None`` for a model without one (Llama4ForCausalLM: not in ``is_hybrid_swa_model``, its chunked layers keep
    full-length KV), each recorded in ``sources``.

    Raises:
        EngineInputError: a release whose pool for the model is not modelled (naming the releases that are), or a
        setting that changes the pool in ways not followed (the radix cache off with a request cap, speculative
        decoding with MiMo-V2 / Gemma 4 drafts, Gemma 4's KV-shared layers, MiMo-V2 with its vision and audio towers).
    """
    llama4 = arch.startswith("Llama4")
    if not (llama4 or arch in _MIMO_V2 or arch in _GEMMA4):
        if c.get("attention_chunk_size") and arch != "GptOssForCausalLM":
            raise EngineInputError("config.attention_chunk_size", f"{arch}: chunked local-attention pools are not "
                                   "modelled for SGLang (modelled: Llama 4, in 0.5.10.post1 and 0.5.23)")
        return None
    if arch == "Llama4ForCausalLM":
        if release in ("0.5.10.post1", "0.5.23"):
            src("sliding_window", "all layers full length", "source",
                f"{cite(release, 'hybrid_swa_archs')} is_hybrid_swa_model lists Llama4ForConditionalGeneration only: "
                "Llama4ForCausalLM's chunked-local layers keep full-length KV in the one MHATokenToKVPool")
            notes.append("Llama4ForCausalLM: SGLang gives it no hybrid SWA pool (only Llama4ForConditionalGeneration "
                         "gets one), so every layer keeps full-length KV")
            return None
        raise EngineInputError("config.attention_chunk_size", f"{arch}: the Llama 4 KV pool of SGLang {release} is not "
                               "modelled; modelled in SGLang 0.5.10.post1 and 0.5.23 (--sglang-version 0.5.10.post1 or "
                               "--sglang-version 0.5.23)")
    if release not in swa_modelled_releases(arch):
        what = "chunked-attention" if llama4 else "sliding-window"
        raise EngineInputError("release", f"{arch}: the hybrid {what} KV pool of SGLang {release} is not modelled"
                               + swa_unmodelled_why(arch, release))
    name = "Llama 4" if llama4 else "MiMo-V2" if arch in _MIMO_V2 else "Gemma 4"
    if arch in _GEMMA4 and (c.get("num_kv_shared_layers") or 0) > 0:
        raise EngineInputError("config.num_kv_shared_layers", f"{arch}: Gemma 4's KV-shared layers "
                               f"(num_kv_shared_layers {c['num_kv_shared_layers']}, models/gemma4_causal.py:397) reuse "
                               f"earlier layers' KV; how SGLang {release}'s pool counts them is not modelled (the "
                               "26B / 31B checkpoints have none)")
    if arch == "MiMoV2ForCausalLM" and is_multimodal_0523(arch, hf_config):
        raise EngineInputError("config.vision_config", f"{arch} with its vision and audio towers (multimodal in SGLang "
                               f"{release}, configs/model_config.py:703-712): their weights are not modelled")
    if speculative_algorithm is not None and not llama4:
        raise EngineInputError("speculative_algorithm", f"{name} with speculative decoding in SGLang {release}: its "
                               "drafts (MTP layers on the SWA side, multi-layer EAGLE, Gemma 4 assistants) are not "
                               "modelled in the hybrid SWA pool")
    if at_least(release, "0.5.23") and disable_radix_cache and (
            max_running_requests is not None or speculative_algorithm is not None) and (
            chunked_prefill_size is None or chunked_prefill_size > 0):
        raise EngineInputError("disable_radix_cache", f"SGLang {release} sizes the SWA pool of {name} from "
                               "--max-running-requests when the radix cache is off "
                               f"({cite(release, 'swa_request_cap')} SWARequestCapPoolConfigurator); not modelled"
                               + swa_unmodelled_why(arch, release))
    src("sliding_window", f"hybrid SWA pool ({name})", "source",
        f"{cite(release, 'hybrid_swa_archs')} is_hybrid_swa_model lists {arch} and nothing sets "
        "disable_hybrid_swa_memory for it"
        + (f"; {cite(release, 'swa_configurator')} HybridSWAPoolConfigurator" if at_least(release, "0.5.23") else
           f"; {cite(release, 'swa_split')} _resolve_hybrid_swa_tokens"))
    return {"arch": arch}


# sglang==0.5.23 configs/model_config.py:2501: the multimodal architectures that keep the breakable prefill CUDA graph
# (multimodal_model_archs (:2391) and the text-only-by-default ones (:692) come from the wheel:
# releases.multimodal_lists("0.5.23"), data/architectures.json)
_MM_BREAKABLE_0523 = {"MiniMaxM3SparseForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
                      "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
                      "PaddleOCRVLForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
                      "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
                      "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration",
                      "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration", "MiniMaxM3SparseForCausalLM"}


# sglang==0.5.23 utils/hf_transformers/common.py:582-606 get_hf_text_config: the text sub-config it returns (thinker_config
# first, then llm_config, language_config, text_config); the model's own config when there is none
_TEXT_SUBCONFIG_KEYS_0523 = ("thinker_config", "llm_config", "language_config", "text_config")
# configs/model_config.py:78 MIMO_V2_MULTIMODAL_ARCHS
_MIMO_V2_MULTIMODAL_0523 = ("MiMoV2ForCausalLM",)


def is_multimodal_0523(arch: str, hf_config: dict[str, Any]) -> bool:
    """SGLang 0.5.23's ``ModelConfig.is_multimodal`` without ``--enable-multimodal`` / ``--language-model-only``
    (configs/model_config.py:820-829): ``enable_multimodal and not is_lm_only and (is_multimodal_model(architectures) or
    has_multimodal_subconfig or has_dsv41_vision)``, where

    - ``enable_multimodal`` is False for ``mm_disabled_models`` (:692-702, the default model implementation) and for
      MiMo-V2 without both a vision and an audio config (:703-712), True otherwise;
    - ``is_lm_only``: the config's own ``language_model_only`` (:674-676);
    - ``is_multimodal_model``: one of the architectures is in ``multimodal_model_archs`` (:2391, :2522);
    - ``has_multimodal_subconfig`` (:809-815): ``hf_config is not hf_text_config``, i.e. ``get_hf_text_config`` found a
      thinker / LLM / language / text sub-config (utils/hf_transformers/common.py:582-606; a ``Llava*ForCausalLM`` keeps
      its own config, :553-559); a vision or audio config counts only with ``--model-impl transformers``;
    - ``has_dsv41_vision``: ``model_type`` ``deepseek_v41`` with ``vision_n_layers`` > 0 (:816-819).

    The architecture lists are the wheel's (``releases.multimodal_lists("0.5.23")``, data/architectures.json)."""
    archs, text_only = R.multimodal_lists("0.5.23")
    if arch in text_only:
        return False
    if arch in _MIMO_V2_MULTIMODAL_0523 and not ("vision_config" in hf_config and "audio_config" in hf_config):
        return False
    if hf_config.get("language_model_only"):
        return False
    listed = any(a in archs for a in hf_config.get("architectures") or [arch])
    llava_own = arch.startswith("Llava") and arch.endswith("ForCausalLM")
    subconfig = not llava_own and any(hf_config.get(k) is not None for k in _TEXT_SUBCONFIG_KEYS_0523)
    dsv41 = hf_config.get("model_type") == "deepseek_v41" and (hf_config.get("vision_n_layers") or 0) > 0
    return listed or subconfig or dsv41


_SUBCONFIG_KEYS = ("thinker_config", "llm_config", "language_config", "text_config", "vision_config", "audio_config")


def is_multimodal(release: str, hf_config: dict[str, Any]) -> bool:
    """``ModelConfig.is_multimodal`` of SGLang ``release`` when ``--enable-multimodal`` is not passed (what the VLM
    mem-fraction factor, 0.5.10's piecewise CUDA graph and 0.5.23's multimodal reserve look at):

    - ``enable_multimodal`` stays False for the architectures of ``mm_disabled_models`` (Gemma 3, Llama 4, Step3-VL;
      0.5.23 adds Inkling), served text-only by default (``cite(release, "mm_disabled")``);
    - otherwise 0.4.10.post2 to 0.5.9: one of ``architectures`` is in ``multimodal_model_archs``
      (``cite(release, "mm_archs")``); 0.5.10.post1: that, or the config has a text / LLM / language / thinker,
      vision or audio sub-config (``has_multimodal_subconfig``, ``cite(release, "mm_subconfig")``); 0.5.23: that with a
      text / LLM / language / thinker sub-config only, and not for a ``language_model_only`` config
      (:func:`is_multimodal_0523`).

    The lists are the release's own (``releases.multimodal_lists``, read from each wheel). 0.4.3.post4 has no such
    test (and no multimodal adjustment): False."""
    arch = (hf_config.get("architectures") or [""])[0]
    if at_least(release, "0.5.23"):
        return is_multimodal_0523(arch, hf_config)
    lists = R.multimodal_lists(release)
    if lists is None:
        return False
    archs, text_only = lists
    if arch in text_only:
        return False
    listed = any(a in archs for a in hf_config.get("architectures") or [])
    if release == "0.5.10.post1":
        return listed or any(isinstance(hf_config.get(k), dict) for k in _SUBCONFIG_KEYS)
    return listed


def served_text_only(release: str, hf_config: dict[str, Any]) -> bool:
    """The architecture is one SGLang ``release`` serves text-only unless ``--enable-multimodal`` is passed
    (``mm_disabled_models``, ``cite(release, "mm_disabled")``)."""
    lists = R.multimodal_lists(release)
    return lists is not None and (hf_config.get("architectures") or [""])[0] in lists[1]


def _text(cfg: dict[str, Any]) -> dict[str, Any]:
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(cfg.get(key), dict):
            merged = dict(cfg[key])
            merged.setdefault("architectures", cfg.get("architectures"))
            return merged
    return cfg


def _req(c: dict[str, Any], key: str) -> Any:
    if c.get(key) is None:
        raise EngineInputError(f"config.{key}", "missing from config.json")
    return c[key]


# transformers config classes SGLang reads through whose rope_scaling transformers 5 nests per layer type
# ({"sliding_attention": {...}, "full_attention": {"rope_type": "linear", "factor": 8.0, ...}}: no top-level "factor")
_ROPE_PER_LAYER_TYPE = {"gemma3_text"}


def context_length_of(hf_config: dict[str, Any], release: str | None = None) -> int:
    """SGLang's default ``context_len``: the first of ``max_sequence_length``, ``seq_length``,
    ``max_seq_len``, ``model_max_length``, ``max_position_embeddings`` in the text config, times the
    ``rope_scaling.factor`` unless the scaling has ``original_max_position_embeddings`` or is ``llama3``
    (``get_context_length``, hf_transformers_utils.py; 2048 when no key is present).

    SGLang reads the transformers config object, so a key a sparse config.json leaves out has the class default
    (``calculator.engine.arch``'s class defaults: Gemma 3's ``max_position_embeddings`` 131072). Gemma 3 from
    0.5.10.post1: SGLang runs with transformers 5 (``Requires-Dist: transformers==5.3.0`` in sglang 0.5.10.post1's
    METADATA, 5.19.0 in 0.5.23), where ``Gemma3TextConfig.rope_scaling`` is nested per layer type with no top-level
    ``factor``, so the factor is 1 (131,072 for gemma-3-27b-it); with transformers 4 (up to 0.5.9) the flat
    ``{"factor": 8.0, "rope_type": "linear"}`` gives 8 x 131,072."""
    from calculator.engine.arch import _CLASS_DEFAULTS  # the transformers class defaults of sparse configs

    c = _text(hf_config)
    model_type = str(c.get("model_type") or "")
    c = {**_CLASS_DEFAULTS.get(model_type, {}), **{k: v for k, v in c.items() if v is not None}}
    rs = c.get("rope_scaling") or None
    factor = 1
    if rs and not (model_type in _ROPE_PER_LAYER_TYPE and release is not None and at_least(release, "0.5.10.post1")):
        factor = rs.get("factor", 1)
        if "original_max_position_embeddings" in rs or rs.get("rope_type") == "llama3":
            factor = 1
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings"):
        if c.get(key) is not None:
            return int(factor * c[key])
    return 2048


def _gpu_is_hip(gpu: GPU) -> bool:
    return gpu.vendor.lower() == "amd"


def _sm_major(gpu: GPU) -> int | None:
    cap = gpu.capability_tuple
    return cap[0] if cap else None


# ----------------------------------------------------------------------------------------------------
# ServerArgs defaults


def gpu_defaults(release: str, gpu_mem_mib: float, tp_size: int) -> tuple[int, int, str]:
    """``(chunked_prefill_size, cuda_graph_max_bs, citation)`` SGLang picks from the GPU memory capacity
    in MiB (``nvidia-smi --query-gpu=memory.total``) and TP size."""
    src = cite(release, "gpu_tables")
    if release == "0.4.3.post4":
        chunk = 2048 if gpu_mem_mib < 25_000 else 8192
        bs = (8 if tp_size < 4 else 80) if gpu_mem_mib < 25_000 else 160
        return chunk, bs, src
    if release == "0.4.10.post2":
        chunk = 2048 if gpu_mem_mib < 35 * 1024 else 8192 if gpu_mem_mib < 160 * 1024 else 16384
        # cuda_graph_max_bs stays None above 35 GiB here: cuda_graph_runner then uses 160 (256 with
        # DP attention) -- not needed by the mem_fraction_static table of this release.
        bs = (8 if tp_size < 4 else 80) if gpu_mem_mib < 35 * 1024 else 160
        return chunk, bs, src
    if at_least(release, "0.5.23"):
        # handle_gpu_memory_settings: 4096 / 48 (160 at TP >= 4) below 35 GiB (the RTX 5090 bucket), the rest as before
        if gpu_mem_mib < 20 * 1024:
            return 2048, 8, src
        if gpu_mem_mib < 35 * 1024:
            return 4096, (48 if tp_size < 4 else 160), src
        if gpu_mem_mib < 60 * 1024:
            return 4096, (32 if tp_size < 4 else 160), src
        if gpu_mem_mib < 160 * 1024:
            return 8192, (256 if tp_size < 4 else 512), src
        return 16384, 512, src
    small_bs = 16 if release in ("0.5.3", "0.5.3.post1") else 24
    if gpu_mem_mib < 20 * 1024:
        return 2048, 8, src
    if gpu_mem_mib < 35 * 1024:
        return 2048, (small_bs if tp_size < 4 else 80), src
    if gpu_mem_mib < 60 * 1024:
        return 4096, (32 if tp_size < 4 else 160), src
    if gpu_mem_mib < 160 * 1024:
        return 8192, (256 if tp_size < 4 else 512), src
    return 16384, 512, src


def spec_max_running(release: str) -> int:
    """``max_running_requests`` SGLang ``release`` resets to for EAGLE / EAGLE3 / NEXTN / STANDALONE when it is not
    given (server_args.py, ``cite(release, "spec_max_running")``): 32 in 0.4.3.post4, 48 after."""
    return 32 if release == "0.4.3.post4" else 48


def _piecewise_tokens(max_tokens: int) -> list[int]:
    """``_generate_piecewise_cuda_graph_tokens`` (0.5.10 server_args.py); the same sizes as 0.5.23's
    ``generate_prefill_cuda_graph_batch_sizes`` (arg_groups/cuda_graph_hook.py:480)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_tokens + 1, 512)))
    return [s for s in sizes if s <= max_tokens]


def default_mem_fraction_static(release: str, *, gpu_mem_mib: float, tp_size: int, pp_size: int, dp_size: int,
                                enable_dp_attention: bool, chunked_prefill_size: int, cuda_graph_max_bs: int,
                                speculative_algorithm: str | None, piecewise_cuda_graph: bool,
                                use_mla: bool, decode_cuda_graph: bool = True,
                                piecewise_cuda_graph_max_tokens: int = 0) -> tuple[float, float | None, str]:
    """``(mem_fraction_static, reserved_mib, citation)`` as ``ServerArgs`` sets it when the flag is not
    passed (before the multimodal and aiter adjustments, see :func:`plan`).

    - 0.4.3.post4: 0.79 / 0.81 / 0.85 / 0.87 / 0.88 for TP >= 16 / 8 / 4 / 2 / 1.
    - 0.4.10.post2: reserved = (2.8 + TP*PP/10) GiB below 35 GiB, (9.5 + TP*PP/2) below 90, (12 + TP*PP/2)
      below 160, else 32 GiB; +2 GiB with speculative decoding, +4 GiB with DP attention.
    - 0.5.x: reserved = 512 MiB + 1.5 * max(chunked_prefill_size, 2048) + 2 * cuda_graph_max_bs
      + TP*PP/8 GiB (+ 3 * bs * dp, + 1.5 * bs * dp above bs 300, with DP attention) (+ piecewise CUDA
      graphs in 0.5.10: 8 MiB per captured size, 1.5 GiB for MLA); at least 10 GiB above 60 GiB GPUs;
      + 6 GiB STANDALONE, + 2 GiB (4 GiB in 0.5.10) other draft methods, none for NGRAM.
    - 0.5.23 (arg_groups/memory_hook.py:281-328, reserve_for_graph_mb :357-399): 512 MiB + 1.5 * max(chunked_prefill_size,
      2048) (``max_prefill_tokens`` when chunked prefill is off) + TP*PP/8 GiB + 2 * cuda_graph_max_bs only while the
      decode CUDA graph is on (+ 3 * bs * dp, + 1.5 * bs * dp above bs 300, with DP attention) + the breakable prefill
      graph while it is on (8 MiB per captured size up to ``piecewise_cuda_graph_max_tokens``, 1.5 GiB for MLA); at
      least 10 GiB above 60 GiB GPUs; nothing for speculative decoding (the draft's weights and KV are counted in the
      pool itself, see :func:`plan`).
    Then ``round((gpu_mem - reserved) / gpu_mem, 3)``.
    """
    src = cite(release, "mfs_default")
    if release == "0.4.3.post4":
        table = 0.79 if tp_size >= 16 else 0.81 if tp_size >= 8 else 0.85 if tp_size >= 4 else 0.87 if tp_size >= 2 else 0.88
        return table, None, src
    ps = tp_size * pp_size
    if release == "0.4.10.post2":
        if gpu_mem_mib < 35 * 1024:
            reserved = (2.8 + ps / 10) * 1024
        elif gpu_mem_mib < 90 * 1024:
            reserved = (9.5 + ps / 2) * 1024
        elif gpu_mem_mib < 160 * 1024:
            reserved = (12 + ps / 2) * 1024
        else:
            reserved = 32 * 1024
        if speculative_algorithm is not None:
            reserved += 2 * 1024
        if enable_dp_attention:
            reserved += 4 * 1024
        return round((gpu_mem_mib - reserved) / gpu_mem_mib, 3), reserved, cite(release, "mfs_reserved")
    if at_least(release, "0.5.23"):
        activation = max(chunked_prefill_size if chunked_prefill_size > 0 else 16384, 2048)
        reserved = 512 + activation * 1.5 + ps / 8 * 1024
        if decode_cuda_graph:
            reserved += cuda_graph_max_bs * 2
        if enable_dp_attention:
            reserved += cuda_graph_max_bs * dp_size * 3
            if cuda_graph_max_bs > 300:
                reserved += cuda_graph_max_bs * dp_size * 1.5
        if piecewise_cuda_graph:
            reserved += 1.5 * 1024 if use_mla else len(_piecewise_tokens(piecewise_cuda_graph_max_tokens)) * 8
        if gpu_mem_mib > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        return round((gpu_mem_mib - reserved) / gpu_mem_mib, 3), reserved, cite(release, "mfs_reserved")
    reserved = 512 + max(chunked_prefill_size, 2048) * 1.5 + cuda_graph_max_bs * 2 + ps / 8 * 1024
    if enable_dp_attention:
        reserved += cuda_graph_max_bs * dp_size * 3
        if cuda_graph_max_bs > 300:
            reserved += cuda_graph_max_bs * dp_size * 1.5
    if piecewise_cuda_graph:
        if release == "0.5.10.post1":
            reserved += 1.5 * 1024 if use_mla else len(_piecewise_tokens(chunked_prefill_size)) * 8
        else:
            raise EngineInputError("enable_piecewise_cuda_graph",
                                   f"the piecewise CUDA graph reserve of SGLang {release} is not modelled")
    if gpu_mem_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if speculative_algorithm is not None:
        if speculative_algorithm == "STANDALONE":
            reserved += 6 * 1024
        elif speculative_algorithm != "NGRAM":
            reserved += (4 if release == "0.5.10.post1" else 2) * 1024
    return round((gpu_mem_mib - reserved) / gpu_mem_mib, 3), reserved, cite(release, "mfs_reserved")


def vlm_factor(hf_config: dict[str, Any]) -> float | None:
    """``adjust_mem_fraction_for_vlm``: ``0.95 * clamp(1 - 0.1 * (L * H^2 / (24 * 1024^2) - 1), 0.8, 1.05)``
    with the vision tower's layers ``L`` and hidden size ``H`` (defaults 24 and 1024 when the vision config
    has no such keys). ``None`` when the model has no ``vision_config`` (no adjustment).

    SGLang reads ``getattr(vision_config, "num_hidden_layers", 24)`` and ``"hidden_size", 1024`` on the
    config object, so keys named otherwise (``depth``, ``embed_dim``) are not seen. Kimi-K2.5's JSON names them
    ``vt_num_hidden_layers`` / ``vt_hidden_size``; SGLang's ``KimiK25VisionConfig`` has ``num_hidden_layers=27``,
    ``hidden_size=1152`` as class defaults (configs/kimi_k25.py:45-46), the same values, which reproduce the
    logged ``mem_fraction_static=0.8260405859375`` = 0.908 * 0.95 * 0.95762 of sgl-003.
    """
    vc = hf_config.get("vision_config")
    if not isinstance(vc, dict):
        return None
    kimi = (hf_config.get("architectures") or [""])[0] == "KimiK25ForConditionalGeneration"
    layers = vc.get("num_hidden_layers", 27 if kimi else 24)
    hidden = vc.get("hidden_size", 1152 if kimi else 1024)
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    dyn = max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return 0.95 * dyn


# ----------------------------------------------------------------------------------------------------
# Mamba / GDN state


def gdn_state_bytes(c: dict[str, Any], attn_tp: int, ssm_bytes: int = 4, conv_bytes: int = 2) -> tuple[int, int, int]:
    """``(conv, ssm, n_linear_layers)`` bytes per request per linear layer for gated delta-net layers
    (Qwen3-Next / Qwen3.5), SGLang's ``Mamba2StateShape.create`` (configs/mamba_utils.py):
    ``n_groups = linear_num_key_heads`` (extended to a multiple of TP), ``conv_dim = V*Hv + 2*n_groups*K``,
    conv state ``conv_dim / tp x (kernel - 1)`` in bf16, SSM state ``(Hv / tp) x V x K`` in float32
    (``mamba_ssm_dtype``, default float32)."""
    hv, hk = _req(c, "linear_num_value_heads"), _req(c, "linear_num_key_heads")
    dv, dk = _req(c, "linear_value_head_dim"), _req(c, "linear_key_head_dim")
    kernel = _req(c, "linear_conv_kernel_dim")
    groups = hk if hk % attn_tp == 0 else hk + (attn_tp - hk)
    conv_dim = dv * hv + 2 * groups * dk
    if conv_dim % attn_tp or hv % attn_tp:
        raise EngineInputError("tp_size", f"{attn_tp} does not divide the linear-attention heads ({hv})")
    conv = conv_dim // attn_tp * (kernel - 1) * conv_bytes
    ssm = hv // attn_tp * dv * dk * ssm_bytes
    layers = c.get("layer_types")
    if layers:
        n_lin = sum(1 for t in layers if t == "linear_attention")
    else:
        interval = _req(c, "full_attention_interval")
        n_lin = sum(1 for i in range(c["num_hidden_layers"]) if (i + 1) % interval != 0)
    return conv, ssm, n_lin


# ----------------------------------------------------------------------------------------------------
# The plan


def startup_overhead_gib(gpu: GPU, world: int, exclude_record: str | None = None) -> tuple[float, float, str]:
    """``(GiB, spread GiB, description)`` of the start-up overhead of ``world`` ranks of ``gpu`` on one node, from
    the public logs of :mod:`.startup` (``exclude_record``: leave out logs related to that shared record).

    Raises:
        EngineInputError(field="gpu"): no public log of that vendor and link.
    """
    oh = startup_overhead(gpu, world, "amd" if _gpu_is_hip(gpu) else "nvidia", exclude_record=exclude_record)
    return oh.gib, oh.spread, oh.describe()


def _spec_defaults(release: str, algo: str, arch: str) -> tuple[int, int, int]:
    if release == "0.4.3.post4":
        return 5, 4, 8
    if at_least(release, "0.5.23"):
        # arg_groups/speculative_hook.py:1430-1461 _auto_choose_speculative_params: STANDALONE and every model but
        # Llama and Grok-1 (3, 1, 4)
        if algo == "STANDALONE":
            return 3, 1, 4
        return (5, 4, 8) if arch in ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM") else (3, 1, 4)
    if algo == "STANDALONE" and release != "0.4.10.post2":
        return 3, 1, 4
    deepseek_like = {"DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM", "GptOssForCausalLM",
                     "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "BailingMoeForCausalLM", "MiMoV2FlashForCausalLM"}
    if arch == "LlamaForCausalLM" or arch.startswith("Grok1"):
        return 5, 4, 8
    if release == "0.4.10.post2":
        return (3, 1, 4) if arch in ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM") else (5, 4, 8)
    if arch in deepseek_like:
        return 3, 1, 4
    # "all other models": (5, 4, 8) up to 0.5.7, (3, 1, 4) from 0.5.8.post1
    return (3, 1, 4) if at_least(release, "0.5.8.post1") else (5, 4, 8)


def _nextn_draft_cell(release: str, arch_name: str, c: dict[str, Any], *, cell: int, n_layers: int, is_gdn: bool,
                      n_full: int | None, dlayers: int, elem: int, attn_tp: int, is_nsa: bool,
                      nsa_row: int | None) -> tuple[int, str]:
    """Bytes per token (one rank) of the KV pool the NEXTN draft worker allocates for its ``dlayers`` MTP layers, and
    where they come from. The draft's own ModelConfig picks the pool (the ``num_nextn_predict_layers`` layers of
    ``model_runner``; ``is_deepseek_nsa`` / ``is_deepseek_dsa`` and the MLA list of its rewritten architecture):

    - a DSA target's draft (DeepSeek-V3.2, GLM-5): from 0.5.7 its class is in the DSA list (``nextn_dsa_draft``), so the
      pool is a DSA one: the target's per-layer rows (``nsa_row``: 656-byte scaled fp8 rows or the raw 576 elements) +
      the indexer's ``index_head_dim + index_head_dim // 128 x 4`` bytes on every draft layer; in 0.5.3 and 0.5.3.post1
      the list names only the targets: a plain MLA pool, ``(kv_lora_rank + qk_rope_head_dim) x elem`` per layer;
    - GLM-4.7-Flash from 0.5.8.post1 to 0.5.10.post1: the draft is GLM-4.5's Glm4MoeForCausalLMNextN, not in the MLA
      list (``mc_mla_list``), so an MHATokenToKVPool (``draft_mha_pool``): ``max(1, num_key_value_heads // attn_tp) x 2 x
      head_dim (64, weights.glm_lite_gqa_draft_head_dim) x elem`` per layer;
    - otherwise the target's bytes per layer (MHA / MLA; the full-attention layers of a hybrid GDN model) x ``dlayers``.
    """
    if is_nsa and nsa_row is not None and R.has_rule(release, "nextn_dsa_draft"):
        idx_row = _req(c, "index_head_dim") + _req(c, "index_head_dim") // 128 * 4
        if at_least(release, "0.5.7"):
            return (nsa_row + idx_row) * dlayers, (
                f"the draft's DSA pool ({cite(release, 'nextn_dsa_draft')}: its class is DSA): ({nsa_row} B of MLA "
                f"rows + indexer {idx_row} B) x {dlayers} layer(s), as the target's rows")
        mla = (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * elem
        return mla * dlayers, (
            f"the draft's plain MLA pool: SGLang {release}'s is_deepseek_nsa names only the targets "
            f"({cite(release, 'nextn_dsa_draft')}), so the DeepseekV3ForCausalLMNextN draft has no indexer rows: "
            f"({c['kv_lora_rank']} + {c['qk_rope_head_dim']}) x {elem} B x {dlayers} layer(s)")
    if arch_name == "Glm4MoeLiteForCausalLM" and R.has_rule(release, "draft_mha_pool"):
        from .weights import glm_lite_gqa_draft_head_dim

        hd = glm_lite_gqa_draft_head_dim(c)
        kvh = int(c.get("num_key_value_heads") or c["num_attention_heads"])
        per = max(1, kvh // attn_tp) * 2 * hd * elem
        return per * dlayers, (
            f"the draft's MHA pool: GLM-4.7-Flash's draft is rewritten to GLM-4.5's Glm4MoeForCausalLMNextN "
            f"({cite(release, 'glm_lite_nextn_rename')}), which the MLA list does not name ({cite(release, 'mc_mla_list')}),"
            f" so SGLang builds an MHATokenToKVPool ({cite(release, 'draft_mha_pool')}): max(1, {kvh} // {attn_tp}) KV "
            f"heads x (K + V) x head_dim {hd} ({cite(release, 'mc_head_dim')}: transformers' Glm4MoeLiteConfig.head_dim "
            f"is qk_rope_head_dim) x {elem} B x {dlayers} layer(s)")
    per_layer = cell // (n_full if is_gdn and n_full else n_layers)
    return per_layer * dlayers, (f"the target's {per_layer} B per layer x {dlayers} MTP layer(s) "
                                 "(num_nextn_predict_layers: the draft worker's layers)")


def plan(hf_config: dict, *, gpu: GPU, release: str, tp_size: int = 1, dp_size: int = 1,
         enable_dp_attention: bool = False, ep_size: int = 1, pp_size: int = 1,
         mem_fraction_static: float | None = None, context_length: int | None = None,
         kv_cache_dtype: str = "auto", dtype: str = "auto", quantization: str | None = None,
         page_size: int | None = None, chunked_prefill_size: int | None = None,
         cuda_graph_max_bs: int | None = None, max_running_requests: int | None = None,
         max_running_requests_why: str | None = None,
         speculative_algorithm: str | None = None, speculative_num_steps: int | None = None,
         speculative_eagle_topk: int | None = None, speculative_num_draft_tokens: int | None = None,
         draft_hf_config: dict | None = None, weights_bytes: int | None = None,
         quant_config: dict | None = None,
         draft_weights_bytes: int | None = None,
         free_memory_before_load_gib: float | None = None, gpu_memory_capacity_mib: float | None = None,
         attention_backend: str | None = None, disable_cuda_graph: bool = False,
         disable_radix_cache: bool = False, disable_piecewise_cuda_graph: bool = False,
         model_path: str | None = None, swa_full_tokens_ratio: float | None = None,
         allow_longer_context: bool = False) -> SGLangPlan:
    """SGLang's per-rank memory plan for ``hf_config`` (a config.json dict) on ``gpu`` with SGLang
    ``release`` and the given ``launch_server`` flags (SGLang's own names, snake_case).

    Extra inputs beyond the flags (each labelled ``input`` in ``sources`` when given):
      ``quant_config``: the checkpoint's separate quantization file (``hf_quant_config.json``), when it
      has one; with config.json's ``quantization_config`` and ``quantization`` (``--quantization``) it decides the
      quantization class SGLang loads and so what ``--kv-cache-dtype auto`` stores (:mod:`.kv_dtype`; a config the
      release cannot load is a ``does_not_start``). ``weights_bytes``: bytes of weights on one rank (the log's ``Load weight end ... mem usage``); else an
      estimate from the parameter count. ``free_memory_before_load_gib``: the log's ``Load weight begin.
      avail mem``; else GPU memory minus the start-up overhead of :mod:`.startup` (public logs: medians, or
      a line by resident threads).
      ``gpu_memory_capacity_mib``: what ``nvidia-smi``/``rocminfo`` reports (SGLang's defaults read it);
      else the catalog's ``memory_gib * 1024``. ``attention_backend``: the resolved backend when it changes
      memory (``aiter`` x0.85 on ROCm; the page size some backends force); else SGLang's default for the GPU
      (:mod:`.compat`). ``disable_cuda_graph``: up to 0.5.10 for the command line only (SGLang's reserve formula
      does not look at it); from 0.5.23 it turns both CUDA graphs off and the reserve leaves their share out.
      ``disable_piecewise_cuda_graph``: the piecewise (0.5.10) / breakable prefill (0.5.23,
      ``--disable-prefill-cuda-graph``) CUDA graph off. ``model_path``: the ``--model-path`` (SGLang 0.5.23 caps the
      prefill graph at 4096 tokens when it contains "llama-2"). ``swa_full_tokens_ratio``: ``--swa-full-tokens-ratio``
      (SWA-pool tokens per full-pool token of a hybrid sliding-window pool, 0 < r <= 1; default 0.8), read only by
      models with that pool.

    Returns: :class:`SGLangPlan` (GiB, per rank).
    Raises: EngineInputError naming the field for anything not modelled or invalid.
    """
    release = check_release(release)
    for name, v in (("tp_size", tp_size), ("dp_size", dp_size), ("ep_size", ep_size), ("pp_size", pp_size)):
        if not isinstance(v, int) or v < 1:
            raise EngineInputError(name, f"must be a positive integer, got {v!r}")
    dp_forced_note = None
    if release == "0.4.3.post4" and enable_dp_attention:
        # 0.4.3.post4 sets dp_size = tp_size under --enable-dp-attention (server_args.py:262-263), and only its DeepSeek
        # model code runs attention data-parallel (models/deepseek_v2.py:889-893, deepseek_nextn.py)
        arch0 = (hf_config.get("architectures") or [""])[0]
        if arch0 not in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"):
            raise EngineInputError("enable_dp_attention", f"not modelled: SGLang 0.4.3.post4 runs DP attention only in "
                                   f"its DeepSeek model code (sglang/srt/models/deepseek_v2.py:889-893), not for "
                                   f"{arch0 or 'this model'}")
        if dp_size != tp_size:
            dp_forced_note = (f"SGLang 0.4.3.post4 sets dp_size = tp_size = {tp_size} with --enable-dp-attention "
                              f"(sglang/srt/server_args.py:262-263; --dp-size {dp_size} is not used)")
            dp_size = tp_size
    if enable_dp_attention and (dp_size < 2 or tp_size % dp_size):
        raise EngineInputError("dp_size", "--enable-dp-attention needs 1 < dp_size <= tp_size dividing tp_size")
    if pp_size > 1:
        raise EngineInputError("pp_size", "pipeline parallelism (per-stage layer split and PP all-reduce of the "
                               "token count) is not modelled")
    if ep_size not in (1, tp_size):
        raise EngineInputError("ep_size", "ep_size must be 1 or equal to tp_size")
    if release == "0.4.3.post4" and page_size not in (None, 1):
        raise EngineInputError("page_size", "SGLang 0.4.3.post4 has no --page-size (token-granular pool only)")
    if mem_fraction_static is not None and not 0 < mem_fraction_static < 1:
        raise EngineInputError("mem_fraction_static", "must be between 0 and 1")
    if swa_full_tokens_ratio is not None and not (isinstance(swa_full_tokens_ratio, (int, float))
                                                  and 0 < swa_full_tokens_ratio <= 1):
        raise EngineInputError("swa_full_tokens_ratio", "--swa-full-tokens-ratio should be in range (0, 1.0] (SGLang "
                               "raises ValueError at start-up" + (f", {cite(release, 'swa_ratio_check')})" if
                                                                   R.has_rule(release, "swa_ratio_check") else ")"))
    swa_r = 0.8 if swa_full_tokens_ratio is None else float(swa_full_tokens_ratio)
    if speculative_algorithm is not None:
        speculative_algorithm = speculative_algorithm.upper()
        if speculative_algorithm not in ("EAGLE", "EAGLE3", "NEXTN", "MTP", "STANDALONE", "NGRAM"):
            raise EngineInputError("speculative_algorithm", f"unknown algorithm {speculative_algorithm!r}")
        if speculative_algorithm in ("NGRAM",) and not at_least(release, "0.5.3"):
            raise EngineInputError("speculative_algorithm", f"NGRAM is not in SGLang {release}")
        if speculative_algorithm in ("STANDALONE",) and not at_least(release, "0.5.3"):
            raise EngineInputError("speculative_algorithm", f"STANDALONE is not in SGLang {release}")
        if speculative_algorithm == "EAGLE3" and release == "0.4.3.post4":
            # --speculative-algorithm choices=["EAGLE", "NEXTN"] (sglang==0.4.3.post4 server_args.py:749); EAGLE3 is
            # among them from 0.4.10.post2 on (its server_args.py:1329)
            raise EngineInputError("speculative_algorithm", "EAGLE3 (--speculative-algorithm EAGLE3, or "
                                   "speculative_config method eagle3) is not in SGLang 0.4.3.post4: its "
                                   "--speculative-algorithm takes EAGLE or NEXTN (server_args.py:749); --sglang-version "
                                   "0.4.10.post2 takes EAGLE3 (sglang==0.4.10.post2 sglang/srt/server_args.py:1329)")
        if speculative_algorithm == "MTP":
            speculative_algorithm = "NEXTN"
        if speculative_algorithm == "STANDALONE" and enable_dp_attention and at_least(release, "0.5.23"):
            raise EngineInputError("speculative_algorithm", "SGLang 0.5.23 refuses STANDALONE speculative decoding with "
                                   "DP attention (sglang/srt/arg_groups/speculative_hook.py:1078-1084)")

    sources: list[Source] = []
    notes: list[str] = [dp_forced_note] if dp_forced_note else []

    def src(field: str, value: Any, kind: str, where: str) -> None:
        sources.append(Source(field=field, value=str(value), kind=kind, source=where))

    def draft_weights_gib(algo: str, attn_tp_: int) -> float:
        """The draft's weights on one rank (GiB), recorded in ``sources``."""
        if draft_weights_bytes is not None:
            dw_ = draft_weights_bytes / GIB
            src("speculative.draft_weights_gib", round(dw_, 3), "input", "draft weights as given")
        elif algo == "NEXTN":
            # the NextN layer(s) as the draft class builds them; embedding and head replaced by the target's
            nb, nkind, ntext = nextn_draft_weights(hf_config, release=release, model_dtype=model_dtype,
                                                   quantization=quantization, quant_config=quant_config, tp=tp_size,
                                                   attn_tp=attn_tp_, is_hip=is_hip)
            dw_ = nb / GIB
            src("speculative.draft_weights_gib", round(dw_, 3), nkind, ntext)
        else:
            dw_ = estimate_weights(draft_hf_config, release=release, is_hip=is_hip, model_dtype=model_dtype,
                                   quantization=None, tp=tp_size, attn_tp=attn_tp_, draft=True,
                                   sm_major=sm).total / GIB
            src("speculative.draft_weights_gib", round(dw_, 3), "estimate", "draft parameter count x bytes")
        return dw_

    if not isinstance(hf_config, dict) or not hf_config.get("architectures"):
        raise EngineInputError("config.architectures", "config.json must name its architecture")
    arch_name = hf_config["architectures"][0]
    c = _text(hf_config)
    model_type = str(c.get("model_type") or hf_config.get("model_type") or "")
    is_hip = _gpu_is_hip(gpu)
    sm = _sm_major(gpu)
    if gpu.is_cpu or gpu.vendor.lower() not in ("nvidia", "amd"):
        hint = (" (a custom GPU names its vendor by its architecture: add :sm89 for an NVIDIA compute capability, "
                ":gfx942 for an AMD target)" if gpu.is_custom else "")
        raise EngineInputError("gpu", f"{gpu.name}: only NVIDIA (CUDA) and AMD (ROCm) GPUs are modelled{hint}")

    # --- attention kind ---------------------------------------------------------------------------
    is_mla = bool(c.get("kv_lora_rank"))
    is_nsa = is_mla and c.get("index_topk") is not None and (
        arch_name in (nsa_architectures(release) if at_least(release, "0.5.3") else _NSA_ARCHS))
    is_gdn = arch_name in _GDN_ARCHS
    if model_type in _MAMBA2_TYPES or c.get("hybrid_override_pattern") or c.get("layers_block_type"):
        raise EngineInputError("config.architectures",
                               f"{arch_name}: Mamba-2 hybrid state pools (NemotronH, Granite 4, Falcon-H1, ...) are "
                               "not modelled for SGLang; GDN hybrids (Qwen3-Next, Qwen3.5) are")
    if arch_name not in R.architectures(release):
        raise EngineInputError("config.architectures", f"{arch_name} is not a model class of SGLang {release} (no "
                               "EntryClass of that name in its sglang/srt/models)")
    if c.get("cross_attention_layers"):
        raise EngineInputError("config.cross_attention_layers", f"{arch_name}: cross-attention (encoder) KV pools are "
                               "not modelled for SGLang")
    if is_gdn and not at_least(release, "0.5.7"):
        raise EngineInputError("release", f"the hybrid GDN pool split of SGLang {release} is not modelled "
                               "(modelled from 0.5.7: mamba_full_memory_ratio)")
    if at_least(release, "0.5.23"):
        # what 0.5.23 sizes with pool configurators this module has not followed: refused by name, not answered with
        # an older release's rule (where 0.5.10.post1 answers the same request, the refusal says so)
        older = "; SGLang 0.5.10.post1's rules are modelled for it (--sglang-version 0.5.10.post1)"
        if is_nsa:
            # modelled: DeepSeek V3.2 and GLM-5 on CUDA Hopper / Blackwell (SM90 / SM100), every layer running its own
            # indexer and index_kpool 1; the other DSA families and settings have rules of their own
            dsa_why = None
            if arch_name not in _DSA_MODELLED_0523:
                dsa_why = (f"{arch_name} (modelled: DeepSeek V3.2 / V3-with-index_topk and GLM-5; the other DSA models "
                           "have their own sinks, indexer sharing or MTP layouts)")
            elif is_hip:
                dsa_why = ("on ROCm the page size follows the aiter build (1 without the preshuffle paged-MQA kernel, "
                           f"else 64; {cite(release, 'nsa_page')})" + older)
            elif sm is None:
                dsa_why = "without a known compute capability (its DSA backends and KV rows follow it)"
            elif kv_cache_dtype not in ("auto", "bf16", "bfloat16", "fp8", "fp8_e4m3"):
                dsa_why = f"--kv-cache-dtype {kv_cache_dtype} (SGLang asserts bf16 or fp8_e4m3 for DSA)"
            elif (c.get("index_kpool") or 1) != 1 or c.get("learnable_sink"):
                dsa_why = f"with pooled index keys (index_kpool) or attention sinks ({cite(release, 'nsa_indexer')})"
            if dsa_why:
                # on ROCm the release is what to change (0.5.10.post1 answers it); otherwise the model
                raise EngineInputError("release" if is_hip and arch_name in _DSA_MODELLED_0523 else
                                       "config.architectures", f"DeepSeek DSA pools of SGLang {release} are not "
                                       f"modelled {dsa_why}")
        if (arch_name in _HYBRID_SWA_0523 or c.get("is_hybrid_swa")) and arch_name not in _SWA_MODELLED[release]:
            # gpt-oss, Llama 4, MiMo-V2 and Gemma 4 are modelled (HybridSWAPoolConfigurator below); the others have
            # per-architecture layer lists, SWA head shapes, compressed pools or MTP drafts of their own
            raise EngineInputError("config.sliding_window", f"{arch_name}: SGLang {release} gives this model a hybrid "
                                   f"sliding-window pool ({cite(release, 'hybrid_swa_archs')} is_hybrid_swa_model; "
                                   "HybridSWAPoolConfigurator, DSV4PoolConfigurator for DeepSeek-V4), which is "
                                   "modelled for gpt-oss, Llama 4 (Llama4ForConditionalGeneration), MiMo-V2 and "
                                   "Gemma 4 only (its layer split, SWA head shapes and draft layers are not followed "
                                   "here)"
                                   + swa_unmodelled_why(arch_name, release))
        if arch_name == "GptOssForCausalLM" and disable_radix_cache and (
                max_running_requests is not None or speculative_algorithm is not None) and (
                chunked_prefill_size is None or chunked_prefill_size > 0):
            raise EngineInputError("disable_radix_cache", f"SGLang {release} sizes the SWA pool of gpt-oss from "
                                   "--max-running-requests when the radix cache is off "
                                   f"({cite(release, 'swa_request_cap')} SWARequestCapPoolConfigurator); not modelled"
                                   + older)
        cap_guess = gpu_memory_capacity_mib or gpu.memory_gib * 1024
        # large_hopper_qwen3_vl_model_type reads the top-level hf_config.model_type (qwen3_vl), not the text config's
        # (qwen3_vl_text)
        if (hf_config.get("model_type") in ("qwen3_vl", "qwen3_vl_moe") and is_multimodal_0523(arch_name, hf_config)
                and sm == 9 and cap_guess >= 60 * 1024):
            raise EngineInputError("release", f"{arch_name} on a Hopper GPU of 60 GiB or more: SGLang "
                                   f"{release} applies Qwen3-VL serving defaults there ({cite(release, 'qwen3_vl_hopper')}: "
                                   "CUDA-IPC feature transport with its 1-3 GiB pool, the decode CUDA graph up to "
                                   "--max-running-requests, flashinfer decode), which are not modelled" + older)
    if is_nsa and not at_least(release, "0.5.3"):
        raise EngineInputError("config.architectures", f"DeepSeek NSA (V3.2) is not in SGLang {release}")
    window = c.get("sliding_window")
    swa = _new_hybrid_swa(release, arch_name, hf_config, c, speculative_algorithm=speculative_algorithm,
                          disable_radix_cache=disable_radix_cache, max_running_requests=max_running_requests,
                          chunked_prefill_size=chunked_prefill_size, notes=notes, src=src)
    if swa is not None:
        pass  # Llama 4 / MiMo-V2 / Gemma 4 (0.5.10.post1, 0.5.23): _new_hybrid_swa decided and cited it
    elif window and (c.get("use_sliding_window") is not False) and not is_gdn:
        gemma_off = arch_name == "Gemma2ForCausalLM" or (arch_name in _GEMMA_SWA and at_least(release, "0.5.3"))
        if arch_name in _GEMMA_SWA and (gemma_off or release == "0.4.3.post4"):
            if release == "0.4.3.post4":
                src("sliding_window", "all layers full length", "source",
                    f"{cite(release, 'cell')} (one MHATokenToKVPool over num_hidden_layers; no SWA pool in {release})")
            else:
                notes.append(f"{arch_name}: SGLang disables the hybrid SWA pool (disable_hybrid_swa_memory), so "
                             "sliding-window layers keep full-length KV like global layers")
                src("sliding_window", "all layers full length", "source", cite(release, "gemma_swa_off"))
        elif arch_name == "GptOssForCausalLM" and at_least(release, "0.5.3"):
            backend_for_swa = attention_backend or ("trtllm_mha" if sm == 10 else "fa3" if sm == 9 else
                                                    "aiter" if is_hip and release == "0.5.10.post1" else "triton")
            if release == "0.5.10.post1":
                swa = {"window": window}
                src("sliding_window", "hybrid SWA pool", "source", cite(release, "hybrid_swa_on"))
            elif at_least(release, "0.5.23"):
                # is_hybrid_swa_model (GptOss is in SWA_SINK_ARCHS) and nothing sets disable_hybrid_swa_memory for it,
                # whatever the backend; layer kinds from layer_types (get_hybrid_layer_ids)
                swa = {"window": window}
                src("sliding_window", "hybrid SWA pool (HybridSWAPoolConfigurator)", "source",
                    f"{cite(release, 'hybrid_swa_archs')} is_hybrid_swa_model, {cite(release, 'swa_layer_ids')} "
                    f"layer_types, {cite(release, 'swa_configurator')}")
            else:
                if not at_least(release, "0.5.8.post1"):
                    key = "gptoss_swa_off"  # always off up to 0.5.7
                elif backend_for_swa == "trtllm_mha":
                    key = "gptoss_swa_off"
                elif release == "0.5.8.post1" and speculative_algorithm is not None:
                    key = "gptoss_swa_off_spec"
                else:
                    raise EngineInputError("release", f"the gpt-oss hybrid SWA pool split of SGLang {release} is not "
                                           "modelled: ask --sglang-version 0.5.10.post1 or 0.5.23 (the default), which "
                                           "are (up to 0.5.7 the pool is not split)")
                notes.append("gpt-oss: SGLang disables the hybrid SWA pool here (up to 0.5.7 always; from 0.5.8 with "
                             "trtllm_mha, in 0.5.8 also with speculative decoding), so every layer keeps full-length KV")
                src("sliding_window", "all layers full length", "source", cite(release, key))
        else:
            # the covered releases that do answer this family (Gemma 2 / 3 keep every layer full length there, as the
            # branches above model), else the hybrid-pool releases of swa_unmodelled_why
            family = [r for r in R.COVERED if r != release and (
                (arch_name.startswith("Gemma3") and (r == "0.4.3.post4" or at_least(r, "0.5.3")))
                or arch_name.startswith("Gemma2"))]
            why = (("; SGLang " + ", ".join(family) + " are modelled for it (ask --sglang-version "
                    + (R.DEFAULT if R.DEFAULT in family else family[-1]) + ")") if family
                   else swa_unmodelled_why(arch_name, release))
            raise EngineInputError("release" if family or swa_modelled_releases(arch_name) else "config.sliding_window",
                                   f"{arch_name}: how SGLang {release} pools sliding-window layers for this "
                                   "architecture is not modelled (modelled: Gemma 2 from 0.4.3, Gemma 3 in 0.4.3 and "
                                   "from 0.5.3, gpt-oss from 0.5.3, Llama 4 and MiMo-V2-Flash in 0.5.10.post1 and "
                                   "0.5.23, Gemma 4 in 0.5.23)" + why)

    # --- dtypes ----------------------------------------------------------------------------------
    cfg_dtype = str(c.get("torch_dtype") or c.get("dtype") or hf_config.get("torch_dtype")
                    or hf_config.get("dtype") or "bfloat16").replace("torch.", "")
    model_dtype = cfg_dtype if dtype == "auto" else dtype
    model_dtype = {"half": "float16", "bf16": "bfloat16", "fp16": "float16"}.get(model_dtype, model_dtype)
    if model_dtype not in ("bfloat16", "float16"):
        raise EngineInputError("dtype", f"model dtype {model_dtype!r} is not modelled (bfloat16 / float16)")

    # --- parallel sizes --------------------------------------------------------------------------
    attn_tp = tp_size // dp_size if enable_dp_attention else tp_size
    # ServerArgs sizes the memory defaults before the model-specific adjustments switch DP attention on
    # for NSA, so the reserve formula sees the flags as passed
    flag_dp_attention, flag_dp_size = enable_dp_attention, dp_size
    page = page_size
    if is_nsa:
        # NSA block of ServerArgs (not on NPU). 0.5.3 / 0.5.3.post1: DP attention with dp_size = tp_size, page 64
        # (0.5.3: also mem_fraction_static 0.8). 0.5.7: enable_dp_attention = True with dp_size as passed (attention
        # TP stays tp_size // dp_size), page 64. From 0.5.8.post1: nothing forced ("DSA with TP mode is active"; DP
        # attention only with --enable-nsa-prefill-context-parallel, not modelled), page 1 on ROCm, 64 on CUDA.
        # then _handle_data_parallelism (cite(release, "dp_off")) turns it off again where dp_size is 1
        if not at_least(release, "0.5.7"):
            if not enable_dp_attention:
                enable_dp_attention, dp_size = True, tp_size
                notes.append("DeepSeek NSA: SGLang turns on DP attention with dp_size = tp_size"
                             + (" (off again: dp_size 1)" if dp_size == 1 else ""))
        elif not at_least(release, "0.5.8.post1"):
            if not enable_dp_attention:
                enable_dp_attention = True
                notes.append(f"DeepSeek NSA: SGLang {release} sets enable_dp_attention with dp_size as passed "
                             f"({dp_size}), so attention stays split over tp_size // dp_size ranks"
                             + ("; at dp_size 1 _handle_data_parallelism turns it off again" if dp_size == 1 else ""))
        if not at_least(release, "0.5.8.post1"):
            if dp_size == 1:
                enable_dp_attention = False
                src("enable_dp_attention", "False, dp_size 1", "source", f"{cite(release, 'nsa')} sets it, then "
                    f"{cite(release, 'dp_off')} (_handle_data_parallelism, after the model adjustments) turns it off "
                    "at dp_size 1")
            else:
                src("enable_dp_attention", f"True, dp_size {dp_size}", "source", cite(release, "nsa"))
        attn_tp = tp_size // dp_size if enable_dp_attention else tp_size
        page = 1 if is_hip and at_least(release, "0.5.8.post1") else 64
        src("page_size", page, "source", cite(release, "nsa_page"))
    if page is None:
        page = 1
    if not isinstance(page, int) or page < 1:
        raise EngineInputError("page_size", "must be a positive integer")
    # the attention layers split the query heads (and the KV heads, or replicate them) over the attention TP ranks and
    # assert it divides: sglang==0.5.10.post1 models/llama.py:139-149, qwen3.py:84-94 (the same in every model file)
    heads = int(c.get("num_attention_heads") or 0)
    kv_heads = int(c.get("num_key_value_heads") or heads)
    if heads and heads % attn_tp:
        raise EngineInputError("tensor_parallel_size", f"{heads} attention heads are not divisible by the attention TP "
                               f"size {attn_tp}: SGLang's model code asserts total_num_heads % tp_size == 0 "
                               "(models/llama.py:139 in 0.5.10.post1) and the server fails while loading")
    if kv_heads and not c.get("kv_lora_rank") and (kv_heads % attn_tp if kv_heads >= attn_tp else attn_tp % kv_heads):
        raise EngineInputError("tensor_parallel_size", f"{kv_heads} KV heads and attention TP size {attn_tp}: SGLang "
                               "asserts total_num_kv_heads % tp_size == 0 (or tp_size % total_num_kv_heads == 0 when "
                               "the heads are replicated), models/llama.py:145-149 in 0.5.10.post1")

    # --- KV dtype --------------------------------------------------------------------------------
    kv = kv_cache_dtype
    # how the release reads the checkpoint's quantization config: the KV dtype auto takes from it, and whether reading
    # it stops SGLang at start-up (whatever --kv-cache-dtype says)
    try:
        ck, ck_error = checkpoint_kv(release, hf_config, quant_config, quantization, is_hip=is_hip,
                                     model_dtype=model_dtype), None
    except EngineInputError as exc:  # a path not followed: raised only where the KV dtype depends on it
        ck, ck_error = None, exc
    quant_refusal = (f"SGLang {release} does not load this checkpoint's quantization config: {ck.refusal}"
                     if ck is not None and ck.refusal else None)
    # DSA: ServerArgs sets the KV dtype before the model runner resolves auto. torch reports the compute capability
    # (ROCm: gfx9xx -> major 9, so the below-SM100 branch)
    dsa_major = 9 if is_hip else sm
    if is_nsa and at_least(release, "0.5.23") and kv == "auto":
        # _dsa_kv_cache_dtype_default: fp8_e4m3 from SM100 (no attention sinks), bfloat16 below, whatever the checkpoint
        kv = "fp8_e4m3" if sm is not None and sm >= 10 else "bfloat16"
        src("kv_cache_dtype", kv, "source", f"{cite(release, 'nsa_kv_dtype')} (DSA: auto -> fp8_e4m3 on SM100+, "
            "bfloat16 below, whatever the checkpoint declares)")
    elif is_nsa and release in ("0.5.3", "0.5.3.post1") and dsa_major is not None and dsa_major >= 10:
        # 0.5.3 / 0.5.3.post1: fp8_e4m3 from SM100 whatever --kv-cache-dtype says; below, auto goes to the model runner
        kv = "fp8_e4m3"
        src("kv_cache_dtype", kv, "source", f"{cite(release, 'nsa_kv_dtype')} (DSA: fp8_e4m3 from SM100, whatever "
            "--kv-cache-dtype says)")
    elif is_nsa and at_least(release, "0.5.7") and not at_least(release, "0.5.23") and (
            kv in ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8")):
        if dsa_major is None:
            raise EngineInputError("gpu", f"{gpu.name}: SGLang {release} picks the DSA KV dtype by compute capability "
                                   f"({cite(release, 'nsa_kv_dtype')}); give the GPU's (a custom GPU: :sm90, :sm100)")
        if kv == "auto":
            kv = "fp8_e4m3" if dsa_major >= 10 else "bfloat16"
            src("kv_cache_dtype", kv, "source", f"{cite(release, 'nsa_kv_dtype')} (DSA: auto -> fp8_e4m3 on SM100+, "
                "bfloat16 below, whatever the checkpoint declares)")
        else:
            kv = {"fp8": "fp8_e4m3", "bf16": "bfloat16"}.get(kv, kv)
            src("kv_cache_dtype", kv, "input", "--kv-cache-dtype")
    elif is_nsa and at_least(release, "0.5.7") and not at_least(release, "0.5.23"):
        raise EngineInputError("kv_cache_dtype", f"--kv-cache-dtype {kv_cache_dtype}: SGLang {release} asserts bf16 / "
                               f"bfloat16 or fp8_e4m3 for DeepSeek DSA ({cite(release, 'nsa_kv_assert')}) and does "
                               "not start")
    elif kv == "auto":
        if ck is None:
            raise ck_error
        kv = ck.kv_cache_dtype or model_dtype
        src("kv_cache_dtype", kv, "source", ck.source)
        if ck.note:
            notes.append(ck.note)
    else:
        kv = {"fp8": "fp8_e4m3", "bf16": "bfloat16"}.get(kv, kv)
        if kv not in DTYPE_BYTES:
            raise EngineInputError("kv_cache_dtype", f"{kv_cache_dtype!r} is not modelled (auto, fp8_e4m3, fp8_e5m2, "
                                   "bfloat16)")
        src("kv_cache_dtype", kv, "input", "--kv-cache-dtype")
    elem = DTYPE_BYTES[kv]

    # --- context length --------------------------------------------------------------------------
    derived_ctx = context_length_of(hf_config, release)
    ctx = context_length or derived_ctx
    derivation = (cite(release, "context_len") + " get_context_length(text config): max_position_embeddings x rope "
                  "factor unless original/llama3")
    if context_length and context_length > derived_ctx:
        # ModelConfig._derive_context_length: a longer --context-length than the derived one raises ValueError at
        # start-up unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set; that variable defaults to False in every
        # covered release but 0.4.10.post2, where it defaults to True and SGLang only logs a warning
        if release != "0.4.10.post2" and not allow_longer_context:
            raise EngineInputError(
                "context_length", f"--context-length {context_length:,} is greater than the model's derived context "
                f"length {derived_ctx:,} ({derivation}): SGLang {release} refuses to start (ValueError, "
                f"{cite(release, 'context_over')}) unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 is set, and "
                "outputs past the trained length may be wrong; give at most "
                f"{derived_ctx:,} (or raise it: allow_long_max_model_len, or a RoPE-scaled context with hf_overrides "
                "as SGLang's --json-model-override-args" + (
                    f"; with original_max_position_embeddings in rope_scaling SGLang does not multiply by the factor, "
                    f"so add \"max_position_embeddings\": {context_length} to it"
                    if "original_max_position_embeddings" in ((_text(hf_config).get("rope_scaling") or {})) else "")
                + ")")
        notes.append(f"--context-length {context_length:,} is above the model's derived {derived_ctx:,}: SGLang "
                     f"{release} accepts it with a warning (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN "
                     + ("=1 as asked" if allow_longer_context and release != "0.4.10.post2" else "defaults to True")
                     + f", {cite(release, 'context_over')}); outputs past the trained length may be wrong")
    if context_length:
        src("context_length", ctx, "input", f"--context-length as given; the model's own is {derived_ctx:,} "
            f"({derivation})")
    else:
        src("context_length", ctx, "config", derivation)

    # --- speculative parameters ------------------------------------------------------------------
    spec: SpeculativePlan | None = None
    steps = topk = ndraft = None
    # where --max-running-requests comes from: the user's flag, the command's lifted value (the runtime says why), or
    # SGLang's own reset for speculative decoding when it is not given (mrr_default: the value and its server_args line)
    mrr_origin = (None if max_running_requests is None else "user" if max_running_requests_why is None
                  else "command")
    mrr_default: tuple[int, str] | None = None
    if speculative_algorithm is not None and speculative_algorithm != "NGRAM":
        if speculative_num_steps is None:
            if speculative_eagle_topk is not None or speculative_num_draft_tokens is not None:
                raise EngineInputError("speculative_num_steps", "set all three speculative parameters or none")
            steps, topk, ndraft = _spec_defaults(release, speculative_algorithm, arch_name)
            src("speculative_num_steps", f"{steps}/{topk}/{ndraft}", "source", cite(release, "spec_defaults"))
        else:
            steps = speculative_num_steps
            topk = speculative_eagle_topk if speculative_eagle_topk is not None else 1
            ndraft = speculative_num_draft_tokens if speculative_num_draft_tokens is not None else steps + 1
        if topk == 1 and ndraft != steps + 1 and at_least(release, "0.4.10.post2"):
            ndraft = steps + 1
            notes.append("speculative_num_draft_tokens set to num_steps + 1 because eagle_topk == 1 (server_args.py)")
        mrr_default = (spec_max_running(release), cite(release, "spec_max_running"))
        if max_running_requests is None:
            max_running_requests = spec_max_running(release)
            mrr_origin = "speculative default"
    elif speculative_algorithm == "NGRAM":
        # the NGRAM block of server_args: 48 running requests unless given; the calculator's chain of k proposals
        # is --speculative-num-draft-tokens k + 1 (the root and k; SGLang's own default is 12)
        ndraft = speculative_num_draft_tokens if speculative_num_draft_tokens is not None else (
            speculative_num_steps + 1 if speculative_num_steps is not None else 12)
        mrr_default = (48, cite(release, "ngram_max_running"))
        if max_running_requests is None:
            max_running_requests = 48
            mrr_origin = "speculative default"

    # --- GPU capacity and server-args defaults ---------------------------------------------------
    cap_mib = gpu_memory_capacity_mib or gpu.memory_gib * 1024
    src("gpu_memory_capacity_mib", round(cap_mib), "input" if gpu_memory_capacity_mib else "estimate",
        ("nvidia-smi / rocminfo total as given" if gpu_memory_capacity_mib else
         f"GPU catalog {gpu.memory_gib} GiB (torch's total; nvidia-smi's figure, which SGLang reads, is a little "
         "larger)") + f"; read by {cite(release, 'gpu_capacity') if R.has_rule(release, 'gpu_capacity') else 'get_device_memory_capacity'}")
    chunk_d, bs_d, table_src = gpu_defaults(release, cap_mib, tp_size)
    chunk = chunked_prefill_size if chunked_prefill_size is not None else chunk_d
    bs = cuda_graph_max_bs if cuda_graph_max_bs is not None else bs_d
    src("chunked_prefill_size", chunk, "input" if chunked_prefill_size is not None else "source", table_src)
    if (at_least(release, "0.5.23") and cuda_graph_max_bs is None and mrr_origin in ("user", "command")
            and max_running_requests is not None and bs > max_running_requests):
        # handle_gpu_memory_settings: a default decode batch above --max-running-requests comes down to it (SGLang's
        # own speculative reset to 48 comes later, in handle_speculative_decoding, and does not)
        src("cuda_graph_max_bs", max_running_requests, "source",
            f"{table_src} gives {bs}; {cite(release, 'decode_bs_cap')}: capped at --max-running-requests "
            f"{max_running_requests}")
        bs = max_running_requests
    else:
        src("cuda_graph_max_bs", bs, "input" if cuda_graph_max_bs is not None else "source", table_src)

    use_mla = is_mla
    mm_on = is_multimodal(release, hf_config)
    is_mm = at_least(release, "0.5.23") and mm_on
    if served_text_only(release, hf_config) and R.has_rule(release, "vlm_adjust"):
        notes.append(f"{arch_name}: SGLang {release} serves it text-only unless --enable-multimodal is passed "
                     f"({cite(release, 'mm_disabled')}): no multimodal mem-fraction factor"
                     + (", piecewise CUDA graphs stay on" if release == "0.5.10.post1" else "")
                     + (f"; the vision tower is still built and loaded ({cite(release, 'gemma3_vision')}), so its "
                        "weights are counted" if arch_name == "Gemma3ForConditionalGeneration" else ""))
        src("multimodal", "off (text-only by default)", "source", f"{cite(release, 'mm_disabled')} mm_disabled_models"
            " -> enable_multimodal = False unless --enable-multimodal")
    pcg_reserved = False  # the prefill graph counted in the reserve (0.5.23 decides before the backend-specific offs)
    pcg_max = 0
    if at_least(release, "0.5.23"):
        # the breakable prefill CUDA graph: on by default with CUDA (cuda_graph_config.py:123), kept with speculative
        # decoding and DP attention; off for PP (we refuse PP), multimodal models outside the allow-list
        # (cuda_graph_hook.py:231), --disable-prefill-cuda-graph / --disable-cuda-graph
        pcg_reserved = (not is_hip and not disable_cuda_graph and not disable_piecewise_cuda_graph and pp_size == 1
                        and not (is_mm and arch_name not in _MM_BREAKABLE_0523))
        # max_bs: the chunked prefill size as set by then (before the DP-attention division), 8192 at most with MLA,
        # 4096 at most for a "llama-2" model path
        pcg_max = min(8192, chunk) if use_mla else chunk
        if model_path and "llama-2" in model_path.lower():
            pcg_max = min(pcg_max, 4096)
        pcg_max = max(0, pcg_max)
        piecewise = pcg_reserved
    else:
        # 0.5.10 _handle_piecewise_cuda_graph: off for the listed architectures (configs/model_config.py:1352)
        # and DeepSeek NSA, speculative decoding, DP attention, PP, ROCm, multimodal models
        piecewise = (release == "0.5.10.post1" and not disable_piecewise_cuda_graph and speculative_algorithm is None
                     and not flag_dp_attention and not is_hip and not mm_on and pp_size == 1 and not is_nsa
                     and arch_name not in _PIECEWISE_OFF_ARCHS)
        pcg_reserved = piecewise
    pcg_tokens = (pcg_max if at_least(release, "0.5.23") else (2048 if use_mla else chunk)) if piecewise else 0
    if at_least(release, "0.5.23"):
        pcg_src = (f"prefill batches up to the chunked prefill size ({'8192 at most with MLA, ' if use_mla else ''}"
                   f"{cite(release, 'piecewise_max_tokens')}) replay the breakable prefill CUDA graph, on by default "
                   f"with CUDA ({cite(release, 'piecewise_default')})" if piecewise else
                   "none: the breakable prefill CUDA graph is off here ("
                   + ("ROCm: on by default with CUDA only, " + cite(release, 'piecewise_default') if is_hip else
                      "--disable-cuda-graph / --disable-prefill-cuda-graph" if disable_cuda_graph or
                      disable_piecewise_cuda_graph else f"multimodal model, {cite(release, 'piecewise_mm')}") + ")")
        if piecewise and model_path and "llama-2" in model_path.lower():
            pcg_src += f"; a 'llama-2' model path caps it at 4096 ({cite(release, 'piecewise_llama2')})"
        src("piecewise_cuda_graph_max_tokens", pcg_tokens, "source", pcg_src)
    else:
        src("piecewise_cuda_graph_max_tokens", pcg_tokens, "source",
            f"prefill batches up to the chunked prefill size (2048 with an MLA backend) replay piecewise CUDA graphs "
            f"({cite(release, 'piecewise_max_tokens')} piecewise_cuda_graph_max_tokens)" if piecewise else
            ("none: piecewise CUDA graphs are on by default from 0.5.10, off here"
             + (f" ({cite(release, 'piecewise_off')} _handle_piecewise_cuda_graph: speculative decoding, DP attention, "
                "PP, ROCm, multimodal and the listed architectures turn them off)" if release == "0.5.10.post1" else "")))
    mfs_passed = mem_fraction_static is not None
    reserved_mib = None
    if mfs_passed:
        mfs = float(mem_fraction_static)
        src("mem_fraction_static", mfs, "input", "--mem-fraction-static")
    elif is_nsa and release == "0.5.3":
        mfs = 0.8
        src("mem_fraction_static", mfs, "source", cite(release, "nsa_mfs") + " (DeepSeek NSA: fixed 0.8)")
    else:
        mfs, reserved_mib, where = default_mem_fraction_static(
            release, gpu_mem_mib=cap_mib, tp_size=tp_size, pp_size=pp_size, dp_size=flag_dp_size,
            enable_dp_attention=flag_dp_attention, chunked_prefill_size=chunk, cuda_graph_max_bs=bs,
            speculative_algorithm=speculative_algorithm, piecewise_cuda_graph=pcg_reserved, use_mla=use_mla,
            decode_cuda_graph=not disable_cuda_graph, piecewise_cuda_graph_max_tokens=pcg_max)
        detail = f" reserved {reserved_mib:.0f} MiB" if reserved_mib is not None else " (TP table)"
        if at_least(release, "0.5.23"):
            detail += (f"; CUDA graphs ({cite(release, 'graph_reserve')}): decode {'2 x ' + str(bs) + ' MiB' if not disable_cuda_graph else 'off'}"
                       + (f", prefill {'1.5 GiB (MLA)' if use_mla else str(len(_piecewise_tokens(pcg_max))) + ' sizes x 8 MiB'}"
                          if pcg_reserved else ", prefill off")
                       + ("; no speculative term in 0.5.23" if speculative_algorithm else ""))
        elif piecewise:
            detail += f"; piecewise CUDA graph reserve included ({cite(release, 'piecewise_off')})"
        src("mem_fraction_static", mfs, "source", where + detail)
        # ServerArgs adjusts only when model_config.is_multimodal (cite(release, "vlm_adjust"))
        vf = vlm_factor(hf_config) if mm_on and R.has_rule(release, "vlm_adjust") else None
        if vf is not None:
            mfs = mfs * vf
            src("mem_fraction_static.vlm", round(vf, 6), "source",
                cite(release, "vlm_formula" if R.has_rule(release, "vlm_formula") else "vlm_adjust")
                + " adjust_mem_fraction_for_vlm")
    backend = attention_backend
    backend_refusal = None
    if backend is None:
        # 0.5.7+ picks the backend in ServerArgs before the speculative defaults are filled in (topk as
        # passed); up to 0.5.3.post1 the model runner picks it after (topk resolved)
        choice = default_backend(release, gpu, hf_config, tp_size=tp_size, speculative_algorithm=speculative_algorithm,
                                 speculative_eagle_topk=speculative_eagle_topk if at_least(release, "0.5.7")
                                 else topk, kv_cache_dtype=kv_cache_dtype or "auto")
        backend = choice.backend
        src("attention_backend", backend, "source", f"{choice.reason} ({choice.source})")
    elif (switch := fa3_e5m2_switch(release, backend, kv_cache_dtype)) is not None:
        # SGLang runs triton instead (a warning); the plan, its kernels and the command are triton's
        backend = "triton"
        src("attention_backend", backend, "source", f"--attention-backend fa3 given; {switch.text} ({switch.source})")
    else:
        src("attention_backend", backend, "input", "--attention-backend")
    if not is_nsa:
        # ServerArgs checks the flag as given (self.kv_cache_dtype: "auto" unless passed), not the dtype it resolves to
        forced = check_backend(release, gpu, hf_config, backend, kv_cache_dtype=kv_cache_dtype, page_size=page,
                               tp_size=tp_size,
                               speculative_algorithm=speculative_algorithm,
                               speculative_eagle_topk=speculative_eagle_topk)
        # below SM75 SGLang stops whatever the backend: the compat verdict says so (below_sm75), not the backend
        old_gpu = below_sm75(release, gpu)
        backend_reasons = [r for r in forced.reasons if old_gpu is None or r.source != old_gpu.source]
        if forced.verdict == "no" and any(r.text for r in backend_reasons) and (
                old_gpu is None or len(backend_reasons) < len(forced.reasons)):
            # SGLang stops at start-up with it (the backend's own check, attention_registry / ServerArgs): a verdict,
            # with the memory figures of the plan as asked
            backend_refusal = (f"--attention-backend {backend} does not start: " + "; ".join(
                f"{r.text} ({r.source})" for r in backend_reasons))
        if forced.page_size and forced.page_size != page:
            page = forced.page_size
            src("page_size", page, "source", next((r.source for r in forced.reasons if "page_size" in r.text),
                                                   "attention backend page size"))
    if not any(x.field == "page_size" for x in sources):
        src("page_size", page, "input" if page_size is not None else "source",
            "--page-size" if page_size is not None else
            (f"{cite(release, 'page_default')} _page_size_default: None -> 1" if R.has_rule(release, "page_default")
             else f"sglang=={release} sglang/srt/server_args.py: ServerArgs.page_size None -> 1"))
    if piecewise and at_least(release, "0.5.23") and (
            (arch_name == "DeepseekV3ForCausalLM" and backend == "trtllm_mla") or backend in ("torch_native",
                                                                                            "flex_attention")):
        # decided after the reserve: the reserve above still holds the prefill graph's share
        piecewise, pcg_tokens = False, 0
        why = (cite(release, "piecewise_dsv3_trtllm") + " (DeepSeek-V3 with trtllm_mla)" if backend == "trtllm_mla"
               else cite(release, "piecewise_torch_native") + f" ({backend})")
        sources[:] = [x for x in sources if x.field != "piecewise_cuda_graph_max_tokens"]
        src("piecewise_cuda_graph_max_tokens", 0, "source", f"none: SGLang turns the prefill CUDA graph off after "
            f"sizing the reserve, {why}; the reserve keeps its share")
    if is_gdn and backend == "trtllm_mha" and not at_least(release, "0.5.23"):
        # 0.5.23 keeps the radix cache (the Mamba extra buffer, on by default, runs with pages > 1)
        raise EngineInputError("attention_backend", "trtllm_mha with a hybrid GDN model makes SGLang turn the radix "
                               "cache off and size the Mamba pool from max_running_requests; not modelled")
    if is_hip and backend == "aiter" and R.has_rule(release, "aiter") and ctx > 8192:
        mfs = mfs * 0.85
        src("mem_fraction_static.aiter", 0.85, "source", cite(release, "aiter") + " (aiter, context_len > 8192)")

    chunk_arg = chunk
    src("chunked_prefill_size_arg", chunk_arg, "input" if chunked_prefill_size is not None else "source",
        ("--chunked-prefill-size as given" if chunked_prefill_size is not None else table_src)
        + (": the value before SGLang's DP-attention division, which a launch command passes" if enable_dp_attention
           else ": what a launch command passes (no DP-attention division)"))
    if enable_dp_attention:
        if release == "0.4.3.post4":
            chunk = chunk // 2
        else:
            chunk = chunk // dp_size
        div = 2 if release == "0.4.3.post4" else dp_size
        src("chunked_prefill_size.dp_attention", chunk, "source", f"{cite(release, 'dp_chunked')}: {chunk_arg} // "
            f"{div} (--chunked-prefill-size {chunk_arg} is divided again by "
            "SGLang, so a command passes the undivided value)")
        # the headline figure is the per-rank chunk: say so where it is shown, with the value the command passes
        before = next(x for x in sources if x.field == "chunked_prefill_size")
        sources[:] = [x for x in sources if x.field != "chunked_prefill_size"]
        src("chunked_prefill_size", chunk, before.kind,
            f"per DP-attention rank: {chunk_arg} // {div} ({cite(release, 'dp_chunked')}); {chunk_arg} is "
            f"{'--chunked-prefill-size as given' if chunked_prefill_size is not None else 'the default: ' + before.source}"
            f", which the command passes")
        if at_least(release, "0.5.23") and piecewise and chunk > 0 and pcg_tokens > chunk:
            # the prefill graph sized from the undivided chunk (the reserve above keeps that) is re-clamped to the
            # per-DP-rank chunk after the division
            pcg_tokens = chunk
            sources[:] = [x for x in sources if x.field != "piecewise_cuda_graph_max_tokens"]
            src("piecewise_cuda_graph_max_tokens", pcg_tokens, "source", f"{cite(release, 'dp_prefill_graph')}: under "
                f"DP attention the breakable prefill CUDA graph is re-clamped to the per-DP-rank chunked prefill size "
                f"{chunk}, after the reserve was sized from {pcg_max}")

    # --- weights ---------------------------------------------------------------------------------
    if weights_bytes is not None:
        if weights_bytes <= 0:
            raise EngineInputError("weights_bytes", "must be positive")
        w_gib = weights_bytes / GIB
        src("weights_gib", round(w_gib, 3), "input", "weights on one rank as given (e.g. the log's 'mem usage')")
    else:
        west = estimate_weights(hf_config, release=release, is_hip=is_hip, model_dtype=model_dtype,
                                quantization=quantization, tp=tp_size, attn_tp=attn_tp, quant_config=quant_config,
                                sm_major=sm)
        w_gib = west.total / GIB
        src("weights_gib", round(w_gib, 3), "estimate",
            "the sum of the weights.* terms: what SGLang's 'Load weight end ... mem usage' counts, from config.json")
        for t in west.terms:
            src(f"weights.{t.name}", round(t.bytes / GIB, 4), t.kind, t.source)
        notes.append("Weights per rank (estimate) = " + " + ".join(f"{t.name} {t.bytes / GIB:.3f}" for t in west.terms)
                     + f" = {w_gib:.3f} GiB")
        notes.extend(west.notes)

    world = tp_size * pp_size
    if free_memory_before_load_gib is not None:
        t_gib = float(free_memory_before_load_gib)
        src("free_before_load_gib", t_gib, "input", "free memory before loading as given ('Load weight begin. avail "
            f"mem'); SGLang measures it at {cite(release, 'pre_load')}")
    else:
        oh, oh_spread, oh_data = startup_overhead_gib(gpu, world)
        t_gib = gpu.memory_gib - oh
        src("free_before_load_gib", round(t_gib, 3), "fit",
            f"GPU {gpu.memory_gib} GiB - start-up overhead {oh:.2f} GiB (CUDA context, torch, NCCL/custom all-reduce; "
            f"not in the configuration nor in SGLang's source: public start-up logs, "
            f"calculator/runtimes/sglang/data/startup_overhead.json: {oh_data})")
    x_gib = t_gib - w_gib
    dw_before_pool = None
    if at_least(release, "0.5.23") and speculative_algorithm in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"):
        # the draft worker (and its weights) is made before the target's pool is sized
        # (cite(release, "spec_draft_first")), so the free memory the pool is sized from has the draft's weights out
        if speculative_algorithm != "NEXTN" and draft_hf_config is None:
            raise EngineInputError("draft_hf_config", f"{speculative_algorithm} needs the draft model's config.json")
        dw_before_pool = draft_weights_gib(speculative_algorithm, attn_tp)
        x_gib -= dw_before_pool
        src("free_after_load_gib.draft_weights", round(dw_before_pool, 3), "source",
            f"{cite(release, 'spec_draft_first')}: the draft worker loads its weights before the target's KV pool is "
            "sized, so they come out of the memory the pool is sized from")
    # a configuration SGLang cannot start is a verdict, not bad input: the plan carries it with 0 KV tokens
    does_not_start = backend_refusal or quant_refusal
    if x_gib <= 0:
        does_not_start = (f"the weights ({w_gib:.2f} GiB per rank) do not fit in the {t_gib:.2f} GiB free on "
                          f"{gpu.name} before loading: SGLang fails while loading them (CUDA out of memory)")

    # --- cell size -------------------------------------------------------------------------------
    n_layers = _req(c, "num_hidden_layers")
    heads = _req(c, "num_attention_heads")
    kv_heads = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or _req(c, "hidden_size") // heads
    v_head_dim = head_dim
    pool_per_token = None
    nsa_row = None  # DSA / NSA: the pool's bytes per token per layer of MLA rows (the indexer's apart)
    mamba = None
    swa_geom: HybridSWAPool | None = None
    kind: str
    if is_mla:
        kind = "nsa" if is_nsa else "mla"
        dim = c["kv_lora_rank"] + _req(c, "qk_rope_head_dim")
        cell = dim * n_layers * elem
        src("cell_size_bytes.mla", f"({c['kv_lora_rank']} + {c['qk_rope_head_dim']}) x {n_layers} x {elem}", "source",
            cite(release, "cell"))
        pool_per_token = cell
        if is_nsa and at_least(release, "0.5.23"):
            # DefaultPoolConfigurator._compute_cell_size: the pool's own rows (calculate_mla_kv_cache_dim) x layers x
            # the KV element size, + the indexer's fp8 K with scales, (index_head_dim + index_head_dim / 128 x 4) B per
            # layer (index_kpool 1; every layer runs its indexer). The rows: the scaled fp8 layout, kv_lora_rank +
            # kv_lora_rank / 128 x 4 + rope x 2 (bf16 rope) = 656 B, with an fp8 KV on Hopper (flashmla_kv both ways);
            # the raw 576 elements with trtllm (Blackwell's backend for both dtypes) or a bf16 KV
            idx_dim = _req(c, "index_head_dim")
            n_idx = dsa_indexer_layers(c, n_layers)
            indexer = (idx_dim + idx_dim // 128 * 4) * n_idx
            # GLM-5 with an fp8 KV on SM12x runs flashinfer_sparse_mla both ways (overrides.py:637-651), scaled rows too
            glm_sm12 = arch_name == "GlmMoeDsaForCausalLM" and sm == 12 and elem == 1
            scaled = elem == 1 and (sm < 10 or glm_sm12)
            row = ((c["kv_lora_rank"] + c["kv_lora_rank"] // 128 * 4 + c["qk_rope_head_dim"] * 2) if scaled
                   else dim * elem)
            cell = row * n_layers + indexer
            pool_per_token = cell
            nsa_row = row
            sources[:] = [x for x in sources if x.field != "cell_size_bytes.mla"]
            src("dsa_backends", "flashinfer_sparse_mla / flashinfer_sparse_mla" if glm_sm12 else
                "flashmla_kv / flashmla_kv" if scaled else ("trtllm / trtllm" if sm >= 10 and elem == 1
                else "flashmla_sparse / " + ("trtllm" if sm >= 10 else "fa3")), "source",
                f"{cite(release, 'dsa_backends')} (prefill / decode by KV dtype and compute capability)")
            src("cell_size_bytes.mla", f"{row} x {n_layers}", "source", f"{cite(release, 'cell')} x "
                f"{cite(release, 'nsa_pool')} calculate_mla_kv_cache_dim: "
                + (f"{c['kv_lora_rank']} + {c['kv_lora_rank'] // 128 * 4} scales + {c['qk_rope_head_dim']} x 2 (bf16 "
                   "rope) = 656 B fp8 rows" if scaled else
                   f"({c['kv_lora_rank']} + {c['qk_rope_head_dim']}) x {elem} B raw rows"
                   + (" (trtllm)" if sm >= 10 else "")) + (f"; {cite(release, 'dsa_glm_sm12')}" if glm_sm12 else ""))
            src("cell_size_bytes.nsa_indexer", indexer, "source", f"{cite(release, 'nsa_indexer')} ({idx_dim} + "
                f"{idx_dim // 128 * 4}) x {n_idx} indexer layers (of {n_layers}: the ones not reusing the previous "
                f"layer's top-k, {cite(release, 'dsa_skip_topk')}), uint8")
            src("pool_bytes_per_token.nsa", f"{row} x {n_layers} + {indexer}", "source",
                f"{cite(release, 'nsa_pool')}: the rows SGLang divides by are the ones the pool allocates")
        elif is_nsa:
            idx_dim = _req(c, "index_head_dim")
            indexer = (idx_dim + idx_dim // 128 * 4) * n_layers
            row = (c["kv_lora_rank"] + c["kv_lora_rank"] // 128 * 4 + c["qk_rope_head_dim"] * 2) if elem == 1 else dim * elem
            pool_per_token = row * n_layers + indexer
            nsa_row = row
            src("pool_bytes_per_token.nsa", f"{row} x {n_layers} + indexer ({idx_dim} + {idx_dim // 128 * 4}) x {n_layers}",
                "source", cite(release, "nsa_pool"))
            if at_least(release, "0.5.7") and elem == 1:  # the row layouts differ for an fp8 pool only
                notes.append("NSA pool rows: the 656-byte fp8 layout is assumed; SGLang keeps 576-byte rows with the "
                             "trtllm NSA backends and on ROCm tilelang (model_runner_kv_cache_mixin "
                             "calculate_mla_kv_cache_dim); the token count does not depend on it")
            if at_least(release, "0.5.3.post1"):
                cell += indexer
                src("cell_size_bytes.nsa_indexer", indexer, "source", cite(release, "nsa_indexer" if R.has_rule(
                    release, "nsa_indexer") else "cell") + " (PR #11309: indexer counted in the cell)")
            else:
                notes.append("SGLang 0.5.3 sizes the NSA pool without the indexer cache (fixed in PR #11309), so "
                             "the pool allocates more than it budgeted and the logged KV size leaves the indexer out")
    else:
        kv_per_rank = max(1, kv_heads // attn_tp)
        if is_gdn:
            kind = "hybrid_gdn"
            layer_types = c.get("layer_types")
            n_full = (sum(1 for t in layer_types if t == "full_attention") if layer_types
                      else sum(1 for i in range(n_layers) if (i + 1) % _req(c, "full_attention_interval") == 0))
            cell = kv_per_rank * (head_dim + v_head_dim) * n_full * elem
            src("cell_size_bytes.hybrid_gdn", f"{kv_per_rank} x ({head_dim} + {v_head_dim}) x {n_full} full-attention "
                f"layers x {elem}", "source", cite(release, "cell"))
            ssm_bytes = 4 if str(c.get("mamba_ssm_dtype", "float32")) == "float32" else 2
            conv_b, ssm_b, n_lin = gdn_state_bytes(c, attn_tp, ssm_bytes=ssm_bytes)
            per_req = (conv_b + ssm_b) * n_lin
            mamba = {"per_req": per_req, "conv": conv_b * n_lin, "ssm": ssm_b * n_lin}
        elif swa:
            kind = "hybrid_swa"
            # the pool's two row widths (full / SWA layers: heads and head sizes may differ, MiMo-V2 and Gemma 4); the
            # cell is the sum over the layers (0.5.10 get_cell_size_per_token; 0.5.23 divides by its own, below)
            swa_geom, swa_rows = hybrid_swa_geometry(release, arch_name, c, attn_tp=attn_tp, elem=elem)
            cell = (swa_geom.full_bytes_per_token * swa_geom.full_layers
                    + swa_geom.swa_bytes_per_token * swa_geom.swa_layers)
            src("hybrid_swa.layers", f"{swa_geom.full_layers} full, {swa_geom.swa_layers} SWA", "source", swa_rows)
            src("cell_size_bytes", f"{swa_geom.full_bytes_per_token} x {swa_geom.full_layers} + "
                f"{swa_geom.swa_bytes_per_token} x {swa_geom.swa_layers}", "source",
                cite(release, "cell") + " (full rows x full layers + SWA rows x SWA layers)")
        else:
            kind = "mha"
            cell = kv_per_rank * (head_dim + v_head_dim) * n_layers * elem
            src("cell_size_bytes", f"max(1, {kv_heads} // {attn_tp}) x ({head_dim} + {v_head_dim}) x {n_layers} x {elem}",
                "source", cite(release, "cell"))
        pool_per_token = cell

    # --- profile_max_num_token -------------------------------------------------------------------
    reserved_gib = t_gib * (1 - mfs)
    rest = x_gib - reserved_gib
    if is_mm:
        # SGLANG_VLM_CACHE_SIZE_MB (100 by default, environ.py:1598) of multimodal embedding cache, allocated after the
        # pool, is kept out of its budget (CPU feature transport, the default on one node)
        rest -= 100 / 1024
        archs_0523 = R.multimodal_lists(release)[0]
        mm_why = (f"{arch_name} is in multimodal_model_archs ({cite(release, 'mm_archs')})" if arch_name in archs_0523
                  else f"the config has a text sub-config ({cite(release, 'mm_subconfig')}, "
                  f"{cite(release, 'hf_text_config')})" if any(hf_config.get(k) is not None
                                                              for k in _TEXT_SUBCONFIG_KEYS_0523)
                  else "a DeepSeek-V4.1 vision tower (vision_n_layers > 0)")
        src("rest_memory_gib.multimodal", -round(100 / 1024, 4), "source", f"{cite(release, 'mm_reserve')} "
            "mm_runtime_reservation_gb: 100 MiB of multimodal embedding cache kept out of the KV budget; the model is "
            f"multimodal ({cite(release, 'mm_is_multimodal')}): {mm_why}")
    cell_div = cell
    if at_least(release, "0.5.23") and speculative_algorithm in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"):
        # DefaultPoolConfigurator: the draft's KV is charged in the target's cell, as the target's per-layer size times
        # the draft's layers (the MTP layers of the config for NEXTN; the draft config's num_nextn_predict_layers or
        # num_hidden_layers for a draft model)
        if is_gdn:  # as below for every release: the draft's Mamba intermediate states are not modelled
            raise EngineInputError("speculative_algorithm", "Mamba intermediate states for speculative decoding on "
                                   "hybrid GDN models are not modelled")
        if speculative_algorithm == "NEXTN":
            e_layers = c.get("num_nextn_predict_layers")
            if not e_layers:
                raise EngineInputError("speculative_algorithm", f"{arch_name} has no MTP (NEXTN) layers in config.json "
                                       "(num_nextn_predict_layers)")
        else:
            dtext = _text(draft_hf_config)
            e_layers = dtext.get("num_nextn_predict_layers") or _req(dtext, "num_hidden_layers")
            if swa and ((draft_hf_config.get("architectures") or [""])[0] in _HYBRID_SWA_0523
                        or dtext.get("is_hybrid_swa")):
                raise EngineInputError("draft_hf_config", "a hybrid sliding-window draft model's SWA layers in SGLang "
                                       f"{release}'s SWA pool are not modelled")
        # the KV layers of the target SGLang divides by: the full-attention ones for a hybrid GDN model
        kv_layers = n_full if is_gdn else n_layers
        if is_nsa:
            # DSA: the target's rows without its indexer, scaled to the draft's layers, + the draft's own indexer rows
            # on all its layers
            idx_row = _req(c, "index_head_dim") + _req(c, "index_head_dim") // 128 * 4
            t_idx = idx_row * dsa_indexer_layers(c, n_layers)
            d_kv = int((cell - t_idx) * e_layers / n_layers)
            cell_div = cell + d_kv + idx_row * e_layers
            src("cell_size_bytes.draft", cell_div - cell, "source", f"{cite(release, 'dsa_draft_cell')}: int("
                f"{cell - t_idx} x {e_layers} / {n_layers}) + indexer {idx_row} x {e_layers} (all the draft's layers) "
                "charged in the target's cell for the draft's KV")
        elif swa:
            # HybridSWAPoolConfigurator: a draft that is not itself hybrid SWA has only full-length layers, each the
            # target's full-layer size, added to the full side of the cell
            cell_div = cell + swa_geom.full_bytes_per_token * e_layers
            src("cell_size_bytes.draft", cell_div - cell, "source", f"{cite(release, 'swa_draft_layers')}: "
                f"{e_layers} draft layer(s) x {swa_geom.full_bytes_per_token} B (the target's full-layer row) on the "
                "full side of the SWA pool's cell for the draft's KV")
        else:
            cell_div = cell + int(cell * e_layers / kv_layers)
            src("cell_size_bytes.draft", cell_div - cell, "source", f"{cite(release, 'spec_cell')}: int({cell} x "
                f"{e_layers} draft layer(s) / {kv_layers}) charged in the target's cell for the draft's KV")
    swa_div = None
    if swa and at_least(release, "0.5.23"):
        # HybridSWAPoolConfigurator._recompute_cell_size: bytes per full-pool token = the full layers' rows (and the
        # draft's) + swa_full_tokens_ratio x the sliding layers' rows (each side its own heads and head sizes)
        n_swa_, per_, per_s = swa_geom.swa_layers, swa_geom.full_bytes_per_token, swa_geom.swa_bytes_per_token
        swa_div = (cell_div - per_s * n_swa_) + swa_r * per_s * n_swa_
        src("cell_size_bytes.hybrid_swa", round(swa_div, 3), "source",
            f"{cite(release, 'swa_cell')}: {per_} B x {swa_geom.full_layers} full layers"
            + (f" (+ {(cell_div - cell) // per_} draft layer(s))" if cell_div != cell else "")
            + f" + swa_full_tokens_ratio {swa_r:g} x {per_s} B x {n_swa_} sliding layers: what SGLang divides the "
            "budget by")
    src("reserved_gib", round(reserved_gib, 4), "source", cite(release, "profile") + " free_before_load x (1 - "
        "mem_fraction_static): kept free for activations and CUDA graphs")
    src("rest_memory_gib", round(rest, 4), "source", cite(release, "profile") + " rest = post_load - pre_load x (1 - mfs)")
    sensitivity = None
    if free_memory_before_load_gib is None and rest > 0:
        # tokens are proportional to rest; rest moves by mfs per GiB of free memory before loading
        sensitivity = 0.1 * mfs / rest * 100
        src("tokens_pct_per_0_1_gib_overhead", round(sensitivity, 2), "source", "0.1 x mem_fraction_static / "
            "rest_memory_gib x 100: how far 0.1 GiB more or less taken before loading moves max_total_num_tokens")
        if sensitivity * max(oh_spread, 0.1) / 0.1 > 2:
            notes.append(
                f"The KV pool is {rest:.2f} GiB of the {t_gib:.2f} GiB free before loading: each 0.1 GiB by which the "
                f"memory taken before loading (CUDA context, NCCL buffers: not in the configuration; public logs of "
                f"this kind spread +-{oh_spread:.2f} GiB around the {oh:.2f} GiB used) differs moves max_total_num_tokens "
                f"by {sensitivity:.1f}%. "
                + ("A GeForce card that also drives a display (a desktop, or Windows under WSL2) has less free: the "
                   "desktop's memory is not counted here. " if gpu.kind == "consumer" else "")
                + "Give free_memory_before_load_gib (the log's 'Load weight begin. avail mem') for the exact count.")
    mamba_plan = None
    if mamba is not None and rest > 0:
        ratio = 0.9
        if speculative_algorithm is not None:
            raise EngineInputError("speculative_algorithm", "Mamba intermediate states for speculative decoding on "
                                   "hybrid GDN models are not modelled")
        if disable_radix_cache:
            raise EngineInputError("disable_radix_cache", "the Mamba pool sized from max_running_requests "
                                   "(radix cache disabled) is not modelled")
        raw = rest * ratio / (1 + ratio)
        per_req = mamba["per_req"]
        if at_least(release, "0.5.23"):
            # _handle_max_mamba_cache: solved with the pool's padding slot, K = int((budget - per_req) // per_req), and
            # K + 1 slots taken from rest (MambaPool allocates size + 1 rows, memory_pool.py:724/750)
            size = int((raw * GIB - per_req) // per_req)
            if size <= 0 and does_not_start is None:
                does_not_start = (f"the Mamba state pool gets {size} slots ({cite(release, 'mamba_too_small')}: "
                                  "'Not enough GPU memory for hybrid (mamba/linear-attention) state cache')")
            slots = max(size, 0) + 1
            src("max_mamba_cache_size", size, "source", f"{cite(release, 'mamba_split')} budget = rest x 0.9 / 1.9 "
                f"(mamba_full_memory_ratio 0.9, {cite(release, 'mamba_ratio_default')} fallback); "
                f"{cite(release, 'mamba_size')} int((budget - {per_req}) // {per_req}); {cite(release, 'mamba_pad')} "
                f"(K + 1) x {per_req} B come out of rest")
        else:
            size = int(raw * GIB // per_req)
            slots = size
            src("max_mamba_cache_size", size, "source", cite(release, "mamba_split") + " mamba_full_memory_ratio 0.9")
        m_gib = slots * per_req / GIB
        rest -= m_gib
        mamba_plan = MambaPool(per_request_bytes=per_req, conv_bytes_per_request=mamba["conv"],
                               ssm_bytes_per_request=mamba["ssm"], max_mamba_cache_size=size,
                               conv_state_gib=slots * mamba["conv"] / GIB, ssm_state_gib=slots * mamba["ssm"] / GIB)
    if rest <= 0 and does_not_start is None:
        does_not_start = (f"no memory left for the KV cache: rest = {rest:.2f} GiB (SGLang: " + (
            "'Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=...', "
            "sglang/srt/mem_cache/kv_cache_configurator.py:3050)" if at_least(release, "0.5.23") else
            "'Not enough memory. Please try to increase --mem-fraction-static.')"))
    if swa_div is not None:
        # HybridSWAPoolConfigurator.calculate_pool_sizes: int(available_bytes // cell_size), the bytes as
        # _profile_available_bytes returns them (int(rest x 2^30))
        tokens = max(0, int(int(rest * GIB) // swa_div))
    else:
        tokens = max(0, int(rest * GIB) // cell_div)
    headroom = 0
    # before 0.5.10 max_num_reqs is taken from the profiled count (before headroom and page alignment)
    max_num_reqs = min(max(int(tokens / ctx * 512), 2048), 4096)
    if max_running_requests is not None and not at_least(release, "0.5.10.post1"):
        max_num_reqs = max_running_requests  # init_memory_pool(max_num_reqs=server_args.max_running_requests)
    if speculative_algorithm in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE") and not at_least(release, "0.5.7"):
        headroom = max_num_reqs * steps * topk + max_num_reqs * ndraft + 100
        tokens += headroom
        src("max_total_num_tokens.spec_headroom", headroom, "source", cite(release, "spec_headroom"))
    tokens = tokens // page * page
    if release != "0.4.3.post4":
        src("max_total_num_tokens.page_align", page, "source", cite(release, "page_align"))
    swa_tokens = None
    full_tokens = tokens
    if swa:
        n_swa, n_full = swa_geom.swa_layers, swa_geom.full_layers
        per, per_s = swa_geom.full_bytes_per_token, swa_geom.swa_bytes_per_token
        r = swa_r
        swa_geom = swa_geom.model_copy(update={"swa_full_tokens_ratio": r})
        src("swa_full_tokens_ratio", r, "input" if swa_full_tokens_ratio is not None else "source",
            "--swa-full-tokens-ratio as given" if swa_full_tokens_ratio is not None else
            f"{cite(release, 'swa_ratio_default')}: 0.8 when --swa-full-tokens-ratio is not given")
        if swa_div is not None:
            # 0.5.23 _solve_pool_sizes: full = the page-aligned count, swa = int(full x r) page-aligned
            full_tokens = tokens
            swa_tokens = int(full_tokens * r) // page * page
            src("swa_max_total_num_tokens", swa_tokens, "source", f"{cite(release, 'swa_split')} int(full x "
                f"swa_full_tokens_ratio {r:g}), aligned down to the page size")
            # validate_swa_pool_size: the SWA pool must hold more than sliding_window_size + page_size tokens
            # (the window as the model runner resolves it: hybrid_swa_geometry)
            swa_window = swa_geom.sliding_window_size
            if (swa_window is not None and swa_window + page >= swa_tokens and does_not_start is None
                    and tokens > 0):
                does_not_start = (f"the SWA pool ({swa_tokens} tokens) cannot hold one request: SGLang requires more "
                                  f"than sliding_window_size {swa_window} ({swa_geom.window_rule}) + page_size {page} "
                                  f"({cite(release, 'swa_validate')}, ValueError at start-up)")
        else:
            # 0.5.10 _resolve_hybrid_swa_tokens: full = cap * (F*nf + S*ns) / (F*nf + r*S*ns)
            total = tokens * (per * n_full + per_s * n_swa)
            full_tokens = int(total / (per * n_full + r * per_s * n_swa)) // page * page
            swa_tokens = int(full_tokens * r) // page * page
            src("swa_max_total_num_tokens", swa_tokens, "source",
                f"{cite(release, 'swa_split')} full = int({tokens} x ({per} x {n_full} + {per_s} x {n_swa}) / ({per} x "
                f"{n_full} + {r:g} x {per_s} x {n_swa})), swa = int(full x swa_full_tokens_ratio {r:g}), both aligned "
                "down to the page size")
        tokens = full_tokens
    if tokens <= 0 and does_not_start is None:
        does_not_start = ("no KV tokens fit: SGLang's pool would be empty ('Not enough memory. Please try to increase "
                          "--mem-fraction-static.')")
    if swa_div is not None:
        src("max_total_num_tokens", tokens, "source", f"{cite(release, 'profile')} int(rest x 2^30) // "
            f"{cite(release, 'swa_tokens')} the SWA cell ({swa_div:g} B, cell_size_bytes.hybrid_swa), aligned down to "
            "the page size: the full-attention pool's tokens")
    else:
        src("max_total_num_tokens", tokens, "source", cite(release, "profile") + " int(rest x 2^30) // cell_size"
            + (f", then the full pool's share of the hybrid SWA split ({cite(release, 'swa_split')}, "
               "swa_max_total_num_tokens)" if swa else ""))

    # --- requests --------------------------------------------------------------------------------
    if at_least(release, "0.5.23"):
        # resolve_max_num_reqs: the 2048-4096 estimate without the flag; the flag (per DP rank, at least 1) is capped
        # at half the pool only
        max_num_reqs = min(max(int(tokens / ctx * 512), 2048), 4096)
        if max_running_requests is not None:
            max_num_reqs = min(max(1, max_running_requests // (dp_size if enable_dp_attention else 1)), tokens // 2)
        else:
            max_num_reqs = min(max_num_reqs, tokens // 2)
    elif release == "0.5.10.post1":
        # _resolve_max_num_reqs: from the aligned capacity; the flag (per DP rank) caps it
        max_num_reqs = min(max(int(tokens / ctx * 512), 2048), 4096)
        if max_running_requests is not None:
            max_num_reqs = min(max_running_requests // (dp_size if enable_dp_attention else 1), max_num_reqs)
        else:
            max_num_reqs = min(max_num_reqs, tokens // 2)
    if mamba_plan is not None:
        # MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3, plus in 0.5.7 the overlap ratio 2 even without the
        # extra buffer (its else branch, model_runner_kv_cache_mixin.py:297); 0.5.8+ adds it only with extra_buffer
        if at_least(release, "0.5.23"):
            # _calculate_mamba_ratio: 3 + the two ping-pong tracking slots of the Mamba extra buffer, which the
            # hybrid-Mamba radix cache takes by default with the overlap scheduler and the triton linear-attention
            # backend (the defaults)
            m_ratio = 5
            why = (f"{cite(release, 'mamba_ratio')} max_mamba_cache_size // 5 (_calculate_mamba_ratio: "
                   f"{cite(release, 'mamba_ratio_base')} 3 + {cite(release, 'mamba_tracking')} 2 tracking slots of the "
                   f"extra buffer, on by default: {cite(release, 'mamba_extra_buffer')})")
        else:
            m_ratio = 5 if release == "0.5.7" else 3
            why = cite(release, "mamba_ratio") + f" max_mamba_cache_size // {m_ratio}"
        max_num_reqs = min(max_num_reqs, mamba_plan.max_mamba_cache_size // m_ratio)
        src("max_num_reqs.mamba", max_num_reqs, "source", why)
        if max_num_reqs <= 0 and does_not_start is None and at_least(release, "0.5.23"):
            does_not_start = (f"the Mamba state pool ({mamba_plan.max_mamba_cache_size} slots) serves no request at "
                              f"{m_ratio} slots per request ({cite(release, 'mamba_no_reqs')}: 'Hybrid "
                              "(mamba/linear-attention) state cache is too small to serve any requests')")
    # 0.4.3.post4: max_num_reqs + 1 rows; 0.5.23: one padding row at index 0 (cite(release, "req_to_token_pad"))
    rows = max_num_reqs + 1 if release == "0.4.3.post4" or at_least(release, "0.5.23") else max_num_reqs
    src("max_num_reqs", max_num_reqs, "source", cite(release, "max_num_reqs") + (
        f" (with --max-running-requests: {cite(release, 'max_num_reqs_flag')})" if at_least(release, "0.5.23")
        and max_running_requests is not None else ""))
    if at_least(release, "0.5.10.post1"):
        mrr = max_num_reqs
    else:
        want = (tokens // 2 if max_running_requests is None
                else max_running_requests // (dp_size if enable_dp_attention else 1))
        mrr = min(want, rows)
    slots = cite(release, "max_running" if R.has_rule(release, "max_running") else "max_num_reqs")
    if mrr_origin == "user":
        why = f"--max-running-requests {max_running_requests} as given"
    elif mrr_origin == "command":
        why = f"the command's --max-running-requests {max_running_requests}: {max_running_requests_why}" + (
            f" ({mrr_default[0]}, {mrr_default[1]})" if mrr_default else "")
    elif mrr_origin == "speculative default":
        why = (f"SGLang's speculative default {mrr_default[0]}: --max-running-requests was not given, so SGLang resets "
               f"it to {mrr_default[0]} for {speculative_algorithm} ({mrr_default[1]})")
    else:
        why = None
    src("max_running_requests", mrr, "input" if mrr_origin == "user" else "source",
        (f"{why}, capped by the request slots: " if why else "") + slots)

    # --- pool sizes as logged --------------------------------------------------------------------
    if kind in ("mla", "nsa"):
        logged_pool = tokens * (pool_per_token if at_least(release, "0.5.3.post1") or not is_nsa
                                else (pool_per_token - (c["index_head_dim"] + c["index_head_dim"] // 128 * 4) * n_layers))
        kv_size = logged_pool / GIB
        k_size = v_size = None
        pool_gib = tokens * pool_per_token / GIB
    elif swa:
        # SWAKVPool: the full pool (full_tokens x the full layers' rows) and the SWA pool (swa_tokens x the SWA
        # layers' rows), each logging its own K and V sizes; their sums are what the plan's K / V sizes hold
        g = swa_geom
        swa_geom = g.model_copy(update={
            "full_k_gib": full_tokens * g.full_kv_heads * g.head_dim * elem * n_full / GIB,
            "full_v_gib": full_tokens * g.full_kv_heads * g.v_head_dim * elem * n_full / GIB,
            "swa_k_gib": swa_tokens * g.swa_kv_heads * g.swa_head_dim * elem * n_swa / GIB,
            "swa_v_gib": swa_tokens * g.swa_kv_heads * g.swa_v_head_dim * elem * n_swa / GIB})
        k_size = swa_geom.full_k_gib + swa_geom.swa_k_gib
        v_size = swa_geom.full_v_gib + swa_geom.swa_v_gib
        kv_size = k_size + v_size
        pool_gib = kv_size
        src("hybrid_swa.pool_gib", f"full K {swa_geom.full_k_gib:.2f} V {swa_geom.full_v_gib:.2f}, SWA K "
            f"{swa_geom.swa_k_gib:.2f} V {swa_geom.swa_v_gib:.2f}", "source",
            f"{cite(release, 'kv_log')}: one 'KV Cache is allocated' line per sub-pool ({full_tokens} tokens x "
            f"{n_full} full layers x {g.full_kv_heads} heads x {g.head_dim} (K) / {g.v_head_dim} (V); {swa_tokens} "
            f"tokens x {n_swa} SWA layers x {g.swa_kv_heads} heads x {g.swa_head_dim} / {g.swa_v_head_dim}) x {elem} "
            "B; then 'SWAKVPool mem usage' = their sum")
    else:
        k_size = tokens * cell / 2 / GIB
        v_size = k_size
        kv_size = k_size + v_size
        pool_gib = kv_size
    src("pool_bytes_per_token", pool_per_token, "source", "the pool's bytes per token: cell_size_bytes" +
        (" (with the NSA indexer rows, pool_bytes_per_token.nsa)" if is_nsa else ""))
    src("kv_pool_gib", round(pool_gib, 4), "source", "what the KV pool allocates: max_total_num_tokens x the pool's "
        "bytes per token (K + V, or the MLA / NSA rows; SWA pools by layer kind)")
    row_extra = 4
    if at_least(release, "0.5.23") and speculative_algorithm is not None:
        # get_req_to_token_extra_context_len: 4 + the draft tokens; with pages of more than one token at least twice the
        # KV one decode step allocates, plus page - 1
        row_extra = 4 + (ndraft or 0)
        if page > 1:
            if topk in (None, 1):
                alloc = max((steps or 1) * (topk or 1), ndraft or 0)
            else:
                alloc = max(((page - 1) + steps + page - 1) // page * page * topk, ndraft or 0)
            row_extra = max(row_extra, 2 * alloc + page - 1)
    req_to_token = rows * (ctx + row_extra) * 4 / GIB
    free_after_pool = x_gib - pool_gib - (mamba_plan.conv_state_gib + mamba_plan.ssm_state_gib if mamba_plan else 0) \
        - req_to_token
    kv_log = (cite(release, "kv_log") if R.has_rule(release, "kv_log")
              else "memory_pool.py 'KV Cache is allocated' log line")
    src("kv_size_gib", round(kv_size, 3), "source", kv_log)
    if k_size is not None and v_size is not None:
        src("k_size_gib", round(k_size, 3), "source", f"{kv_log}: the K buffers, tokens x K bytes per token")
        src("v_size_gib", round(v_size, 3), "source", f"{kv_log}: the V buffers, tokens x V bytes per token")
    src("free_after_load_gib", round(x_gib, 3), "source", "free before load - weights ('Load weight end. avail mem')")
    src("req_to_token_gib", round(req_to_token, 4), "source",
        f"{cite(release, 'req_to_token')}: {rows} rows x (context_len + {row_extra}) x int32")
    src("free_after_pool_gib", round(free_after_pool, 3), "estimate",
        f"free after load - KV pool - Mamba pool - req_to_token ({cite(release, 'pool_end')}); other small "
        "buffers made in init_memory_pool are not counted")
    src("max_prefill_tokens", 16384, "source", cite(release, "max_prefill_tokens"))

    # --- speculative draft pool ------------------------------------------------------------------
    draft_mismatch = None
    if speculative_algorithm is not None:
        dcell = dlayers = dkv = dw = None
        if speculative_algorithm == "NEXTN":
            dlayers = c.get("num_nextn_predict_layers") or c.get("mtp_num_hidden_layers")
            if not dlayers:
                raise EngineInputError("speculative_algorithm", f"{arch_name} has no MTP (NEXTN) layers in config.json")
            dcell, dcell_why = _nextn_draft_cell(release, arch_name, c, cell=cell, n_layers=n_layers, is_gdn=is_gdn,
                                                 n_full=n_full if is_gdn else None, dlayers=dlayers, elem=elem,
                                                 attn_tp=attn_tp, is_nsa=is_nsa, nsa_row=nsa_row)
            src("speculative.draft_cell_size_bytes", dcell, "source", dcell_why)
            if arch_name == "Glm4MoeLiteForCausalLM" and R.has_rule(release, "draft_mha_pool"):
                draft_mismatch = (f"SGLang {release} builds GLM-4.7-Flash's NEXTN draft as GLM-4.5's GQA layer "
                                  f"(Glm4MoeForCausalLMNextN, {cite(release, 'glm_lite_nextn_rename')})")
                notes.append(f"{draft_mismatch} with an MHA KV pool; the checkpoint's MLA attention weights do not "
                             "match it (the loader skips the names it lacks), so memory is counted as built but few "
                             "draft tokens should be accepted; 0.5.23 builds the MLA draft (Glm4MoeLiteForCausalLMNextN)")
            dw = dw_before_pool if dw_before_pool is not None else draft_weights_gib("NEXTN", attn_tp)
        elif speculative_algorithm in ("EAGLE", "EAGLE3", "STANDALONE"):
            if draft_hf_config is None:
                raise EngineInputError("draft_hf_config", f"{speculative_algorithm} needs the draft model's config.json")
            d = _text(draft_hf_config)
            dlayers = _req(d, "num_hidden_layers")
            dh = d.get("num_attention_heads") or heads
            dkvh = d.get("num_key_value_heads") or dh
            dhd = d.get("head_dim") or (d.get("hidden_size") or c["hidden_size"]) // dh
            dcell = max(1, dkvh // attn_tp) * 2 * dhd * dlayers * elem
            dw = dw_before_pool if dw_before_pool is not None else draft_weights_gib(speculative_algorithm, attn_tp)
        if dcell:
            dkv = tokens * dcell / GIB
            if at_least(release, "0.5.23"):
                src("speculative.draft_kv_gib", round(dkv, 3), "source",
                    "the draft worker's own KV pool with the target's max_total_num_tokens, allocated after the "
                    f"target's pool; SGLang budgets it in the target's cell ({cite(release, 'spec_cell')})")
            else:
                src("speculative.draft_kv_gib", round(dkv, 3), "source",
                    "the draft worker's own KV pool with the target's max_total_num_tokens (draft_runner_cache_size, "
                    f"{cite(release, 'spec_headroom') if R.has_rule(release, 'spec_headroom') else cite(release, 'profile')}); "
                    "allocated after the target pool from the (1 - mem_fraction_static) share")
            free_after_pool -= dkv
        if dw and dw_before_pool is None:
            free_after_pool -= dw
        spec = SpeculativePlan(algorithm=speculative_algorithm, num_steps=steps, eagle_topk=topk,
                               num_draft_tokens=ndraft, draft_cell_size_bytes=dcell, draft_layers=dlayers,
                               draft_kv_gib=dkv, draft_weights_gib=dw, target_headroom_tokens=headroom)

    return SGLangPlan(
        release=release, architecture=arch_name, gpu=gpu.name, tp_size=tp_size, dp_size=dp_size,
        enable_dp_attention=enable_dp_attention, ep_size=ep_size, pp_size=pp_size, attention_tp_size=attn_tp,
        attention=kind, attention_backend=backend, kv_cache_dtype=kv, page_size=page, context_length=ctx,
        chunked_prefill_size=chunk, chunked_prefill_size_arg=chunk_arg, cuda_graph_max_bs=bs, max_prefill_tokens=16384,
        piecewise_cuda_graph=piecewise,
        piecewise_cuda_graph_max_tokens=pcg_tokens,
        gpu_memory_capacity_mib=cap_mib, mem_fraction_static=mfs, free_before_load_gib=t_gib, weights_gib=w_gib,
        free_after_load_gib=x_gib, reserved_gib=reserved_gib, rest_memory_gib=rest, mamba=mamba_plan,
        cell_size_bytes=cell_div, pool_bytes_per_token=pool_per_token, max_total_num_tokens=tokens,
        swa_max_total_num_tokens=swa_tokens, k_size_gib=k_size, v_size_gib=v_size, kv_size_gib=kv_size,
        kv_pool_gib=pool_gib, max_num_reqs=max_num_reqs, max_running_requests=mrr, req_to_token_gib=req_to_token,
        free_after_pool_gib=free_after_pool, speculative=spec, sources=sources, notes=notes,
        swa_pool=swa_geom if swa else None,
        tokens_pct_per_0_1_gib_overhead=round(sensitivity, 2) if sensitivity is not None else None,
        does_not_start=does_not_start, draft_mismatch=draft_mismatch, quantization_refusal=quant_refusal,
        quantization_fix=ck.fix if ck is not None else None)
