"""KV cache specs, grouping and capacity, mirroring vLLM's hybrid KV cache manager.

Three pure stages, as in vLLM 0.32:

1. :func:`layer_specs` — one frozen spec per layer (``vllm/v1/kv_cache_interface.py``: ``FullAttentionSpec``
   :578, ``SlidingWindowSpec`` :850, ``ChunkedLocalAttentionSpec`` :810, ``MLAAttentionSpec`` :686,
   ``MambaSpec`` :1035, ``CrossAttentionSpec`` :1157), built the way each layer's
   ``get_kv_cache_spec`` builds it.
2. :func:`group_specs` — ``get_kv_cache_groups`` (``vllm/v1/core/kv_cache_utils.py:2159``): one group
   when all specs are equal, one ``UniformTypeKVCacheSpecs`` group when all layers need the same token slots
   (full attention and MLA alike) in one block size, otherwise pages unified (:1292) and layers grouped by the
   repeating pattern (:1362).
3. :func:`capacity` — ``num_blocks = available // bytes_per_block`` (:1588), concurrency = blocks /
   Σ_groups cdiv(max_memory, page) (:1195), tokens = ⌊concurrency × max_model_len⌋ (:2300) — or the
   pre-0.2x formula ``num_blocks // num_groups × block_size`` for older releases.

Units: bytes and tokens. No torch, no Django.
"""
from __future__ import annotations

from .arch import LayerKind
from .errors import EngineInputError

from collections import defaultdict
from dataclasses import dataclass, replace

from pydantic import BaseModel


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KVContext:
    """The scheduler facts that size one request's KV cache (``VllmConfig`` in vLLM).

    ``max_in_flight_tokens`` = ``max_concurrent_batches × max_num_batched_tokens``
    (``vllm/config/vllm.py:588`` in 0.32; older releases reserved one batch).
    """

    max_model_len: int
    max_in_flight_tokens: int
    encoder_tokens: int = 0


@dataclass(frozen=True)
class AttentionSpec:
    """A paged attention cache: ``page = block_size × num_kv_heads × (head_size + head_size_v) × dtype_bytes``
    (``AttentionSpec.page_size_bytes``, kv_cache_interface.py:545-560). ``page_size_padded`` replaces it
    when pages are unified by padding. ``token_bytes``: a packed per-token row whose size does not follow
    from the head size (DeepSeek's ``fp8_ds_mla``: 656 B; ``state_content_bytes`` in vLLM 0.32,
    kv_cache_interface.py:536-553; ``block_size * 656`` in 0.11.0, kv_cache_interface.py:148-151)."""

    block_size: int
    num_kv_heads: int
    head_size: int
    head_size_v: int
    dtype_bytes: int
    page_size_padded: int | None = None
    draft: bool = False
    token_bytes: int | None = None

    kind = "attention"

    @property
    def bytes_per_token(self) -> int:
        if self.token_bytes is not None:
            return self.num_kv_heads * self.token_bytes
        return self.num_kv_heads * (self.head_size + self.head_size_v) * self.dtype_bytes

    @property
    def real_page_size_bytes(self) -> int:
        return self.block_size * self.bytes_per_token

    @property
    def page_size_bytes(self) -> int:
        return self.page_size_padded or self.real_page_size_bytes

    def max_memory_bytes(self, ctx: KVContext) -> int:
        raise NotImplementedError


@dataclass(frozen=True)
class FullAttentionSpec(AttentionSpec):
    """Full attention: ``cdiv(max_model_len, block_size) × page`` per request (kv_cache_interface.py:602)."""

    kind = LayerKind.FULL

    def max_memory_bytes(self, ctx: KVContext) -> int:
        return cdiv(ctx.max_model_len, self.block_size) * self.page_size_bytes


@dataclass(frozen=True)
class MLAAttentionSpec(FullAttentionSpec):
    """MLA: one latent "head" of ``kv_lora_rank + qk_rope_head_dim`` and no separate V
    (``head_size_v = 0``), replicated on every TP rank (kv_cache_interface.py:686;
    mla_attention.py:479). DeepSeek-V3.2's indexer key cache is one too (one "head" of
    ``index_head_dim + index_head_dim // 128 * 4`` bytes; ``role="indexer"``), full attention like the latent
    cache, so both land in one group (``UniformTypeKVCacheSpecs``)."""

    role: str = "latent"
    kind = LayerKind.MLA


@dataclass(frozen=True)
class SlidingWindowSpec(AttentionSpec):
    """Sliding window: ``cdiv(min(W − 1 + in_flight, max_model_len), block_size) + 1`` blocks per request
    (kv_cache_interface.py:859-896; the +1 because the window may start mid-block)."""

    sliding_window: int = 0
    kind = LayerKind.SLIDING

    def max_memory_bytes(self, ctx: KVContext) -> int:
        tokens = min(self.sliding_window - 1 + ctx.max_in_flight_tokens, ctx.max_model_len)
        return (cdiv(tokens, self.block_size) + 1) * self.page_size_bytes


@dataclass(frozen=True)
class ChunkedLocalAttentionSpec(AttentionSpec):
    """Chunked local attention (Llama 4): ``cdiv(min(chunk + in_flight, max_model_len), block_size)``
    blocks per request (kv_cache_interface.py:810-846)."""

    attention_chunk_size: int = 0
    kind = LayerKind.CHUNKED

    def max_memory_bytes(self, ctx: KVContext) -> int:
        tokens = min(self.attention_chunk_size + ctx.max_in_flight_tokens, ctx.max_model_len)
        return cdiv(tokens, self.block_size) * self.page_size_bytes


@dataclass(frozen=True)
class CrossAttentionSpec(AttentionSpec):
    """Cross-attention (mllama): sized by the encoder tokens, ``cdiv(encoder_tokens, bs) × page``
    (kv_cache_interface.py:1157-1164)."""

    kind = LayerKind.CROSS

    def max_memory_bytes(self, ctx: KVContext) -> int:
        return cdiv(ctx.encoder_tokens, self.block_size) * self.page_size_bytes


@dataclass(frozen=True)
class MambaSpec:
    """Mamba / linear-attention state: one page holds a request's whole state (Σ prod(shape) × dtype
    bytes, independent of block size); a request needs ``1 + num_speculative_tokens`` pages in
    ``mamba_cache_mode="none"`` and ``2 + num_speculative_tokens`` in ``"align"`` (the mode vLLM 0.32 sets
    for hybrid models when prefix caching is on, its default: ``MambaSpec.max_memory_usage_bytes``,
    kv_cache_interface.py:1076-1082; ``MambaModelConfig``, model_executor/models/config.py:684-690).
    ``cache_mode``: ``none`` or ``align``. ``prefill_checkpoint_blocks``: one more page per request in align
    mode for Mamba-2 mixers, which export the block-boundary state mid-prefill
    (``MambaMixer2.get_kv_cache_spec``, model_executor/layers/mamba/mamba_mixer2.py:1098-1108); 0 for
    gated delta-net and Mamba-1."""

    state_bytes: int
    block_size: int
    num_speculative_blocks: int = 0
    page_size_padded: int | None = None
    draft: bool = False
    cache_mode: str = "none"
    prefill_checkpoint_blocks: int = 0

    kind = "mamba"

    @property
    def page_size_bytes(self) -> int:
        return self.page_size_padded or self.state_bytes

    @property
    def bytes_per_token(self) -> int:
        return 0

    def max_memory_bytes(self, ctx: KVContext) -> int:
        if self.cache_mode == "align":
            return self.page_size_bytes * (2 + self.num_speculative_blocks + self.prefill_checkpoint_blocks)
        return self.page_size_bytes * (1 + self.num_speculative_blocks)


Spec = AttentionSpec | MambaSpec


@dataclass(frozen=True)
class KVGroup:
    """One KV cache group: layer names sharing one block table, and the spec of each layer."""

    layer_names: tuple[str, ...]
    specs: tuple[Spec, ...]

    @property
    def bytes_per_block(self) -> int:
        return sum(s.page_size_bytes for s in self.specs)

    def blocks_per_request(self, ctx: KVContext) -> int:
        """``cdiv(max_memory_usage_bytes, page_size_bytes)`` of the group's spec (kv_cache_utils.py:1213)."""
        total_mem = sum(s.max_memory_bytes(ctx) for s in self.specs)
        return cdiv(total_mem, self.bytes_per_block)


def unify_page_sizes(specs: dict[str, Spec]) -> dict[str, Spec]:
    """``unify_kv_cache_spec_page_size`` (kv_cache_utils.py:1292): smaller attention pages grow their
    block size by ``max_page / page`` when it divides, else (non-MLA attention, Mamba) are padded.

    Raises:
        EngineInputError: an MLA page that neither divides nor may be padded (vLLM then falls back to
        another allocation, which this engine does not model; field ``speculative_config`` when a draft's
        layers are the odd ones out, else ``model``).
    """
    pages = {s.page_size_bytes for s in specs.values()}
    if len(pages) <= 1:
        return specs
    max_page = max(pages)
    out: dict[str, Spec] = {}
    for name, spec in specs.items():
        if spec.page_size_bytes == max_page:
            out[name] = spec
        elif isinstance(spec, MambaSpec):
            out[name] = replace(spec, page_size_padded=max_page)
        elif max_page % spec.page_size_bytes == 0:
            out[name] = replace(spec, block_size=spec.block_size * (max_page // spec.page_size_bytes))
        elif not isinstance(spec, MLAAttentionSpec):
            out[name] = replace(spec, page_size_padded=max_page)
        else:
            field = "speculative_config" if getattr(spec, "draft", False) or any(
                getattr(x, "draft", False) for x in specs.values()) else "model"
            fallback = any(isinstance(x, SlidingWindowSpec) for x in specs.values())
            raise EngineInputError(field, (
                f"vLLM stops here: \"Layer {name}: page size is not divisible by the maximum page size and cannot be "
                "padded. Padding is only supported for non-MLA attention layers.\" (NotImplementedError, "
                f"unify_kv_cache_spec_page_size, vllm/v1/core/kv_cache_utils.py:1347 in 0.32; MLA page "
                f"{spec.page_size_bytes:,} B, largest page {max_page:,} B)")
                + ("; not modelled: vLLM 0.32 then allocates the sliding-window layers as full attention "
                   "(_try_get_full_allocation_fallback_groups, kv_cache_utils.py:1765)" if fallback else ""))
    return out


#: The first release whose ``get_kv_cache_groups`` puts layers that need the same token slots but differ in page
#: size into one ``UniformTypeKVCacheSpecs`` group (vllm/v1/core/kv_cache_utils.py:1175 and
#: v1/kv_cache_interface.py:265-320 in 0.11.0; absent in 0.10.2). Before it, layers whose specs differ must share
#: one page size, or ``get_kv_cache_config`` raises a bare ``NotImplementedError``
#: (kv_cache_utils.py:963 (0.9.2), :1133 (0.10.2)).
UNIFORM_TYPE_SINCE = (0, 11, 0)


def _uniform_type_key(spec: Spec) -> tuple | None:
    """The class of token slots a spec needs, as ``UniformTypeKVCacheSpecs.is_uniform_type`` compares them: full
    attention and MLA alike (``MLAAttentionSpec`` registers ``FullAttentionSpec`` as its uniform base,
    vllm/v1/core/single_type_kv_cache_manager.py:2685-2687 (0.32); ``isinstance(spec, FullAttentionSpec)`` in
    0.11.0, kv_cache_interface.py:296-299), sliding windows of one size, chunks of one size, cross attention.
    ``None`` for Mamba states (grouped by the pattern rules here)."""
    if isinstance(spec, MambaSpec):
        return None
    if isinstance(spec, SlidingWindowSpec):
        return ("sliding", spec.sliding_window, spec.block_size)
    if isinstance(spec, ChunkedLocalAttentionSpec):
        return ("chunked", spec.attention_chunk_size, spec.block_size)
    if isinstance(spec, CrossAttentionSpec):
        return ("cross", spec.block_size)
    if isinstance(spec, FullAttentionSpec):
        return ("full", spec.block_size)
    return (type(spec).__name__, spec.block_size)


def group_specs(specs: dict[str, Spec], version: tuple[int, int, int] | None = None) -> list[KVGroup]:
    """``get_kv_cache_groups`` (kv_cache_utils.py:2159-2253) for the cases our families produce.

    - no specs (attention-free) → ``[]``;
    - all specs equal → one group;
    - the same kind of token slots and one block size (full attention and MLA alike — an MLA target with a
      non-MLA EAGLE-3 head —, or per-layer head sizes) → one ``UniformTypeKVCacheSpecs`` group whose page is
      the sum of its layers' pages (from :data:`UNIFORM_TYPE_SINCE`; :func:`_uniform_type_key`);
    - otherwise: unify page sizes, bucket equal specs, ``group_size = min(len(bucket))`` (or ``max`` when
      ``max < 1.5 × min``), split each bucket into ``cdiv(n, group_size)`` groups taking ``layers[i::k]``
      (padding layers are only a warning in vLLM; they do not add bytes to the pool's block).

    ``version``: the vLLM release (None: the newest rules). Before 0.11.0 specs that differ must have one page
    size (then the pattern grouping applies).

    Raises:
        EngineInputError: where vLLM stops: pages that cannot be unified (:func:`unify_page_sizes`), or before
        0.11.0 differing specs of different page sizes (field ``speculative_config`` when draft layers are
        among them, else ``model``).
    """
    if not specs:
        return []
    names = list(specs)
    values = list(specs.values())
    # a draft's layers are marked for the accounting only: vLLM compares the specs themselves (0.9 / 0.10:
    # is_kv_cache_type_uniform merges them, kv_cache_utils.py:747-764 in 0.10.2), so an EAGLE head with the target's
    # heads, head size and dtype joins the target's one group
    bare = [replace(v, draft=False) if getattr(v, "draft", False) else v for v in values]
    if all(v == bare[0] for v in bare):
        return [KVGroup(tuple(names), tuple(values))]
    if version is not None and tuple(version) < UNIFORM_TYPE_SINCE:
        pages = {v.page_size_bytes for v in values}
        if len(pages) > 1:
            field = "speculative_config" if any(getattr(v, "draft", False) for v in values) else "model"
            label = ".".join(map(str, version))
            raise EngineInputError(field, (
                f"vLLM {label} stops with a bare NotImplementedError in get_kv_cache_config: its layers' KV specs "
                f"differ and so do their page sizes ({', '.join(f'{p:,}' for p in sorted(pages))} B), which it "
                "cannot group (vllm/v1/core/kv_cache_utils.py:963 (0.9.2), :1133 (0.10.2)); from 0.11.0 layers "
                "needing the same token slots share one group (UniformTypeKVCacheSpecs)"))
    else:
        keys = {_uniform_type_key(v) for v in values}
        if len(keys) == 1 and None not in keys:
            return [KVGroup(tuple(names), tuple(values))]

    unified = unify_page_sizes(specs)
    buckets: dict[Spec, list[str]] = defaultdict(list)
    for name, spec in unified.items():
        buckets[spec].append(name)
    layer_buckets = list(buckets.values())
    sizes = [len(b) for b in layer_buckets]
    group_size = min(sizes)
    if max(sizes) < min(sizes) * 1.5:
        group_size = max(sizes)
    groups: list[KVGroup] = []
    for bucket in layer_buckets:
        n_groups = cdiv(len(bucket), group_size)
        for i in range(n_groups):
            members = bucket[i::n_groups]
            groups.append(KVGroup(tuple(members), tuple(unified[m] for m in members)))
    return groups


class KVCapacity(BaseModel):
    """What vLLM logs after sizing the pool: ``num_blocks`` (``num_gpu_blocks``), ``kv_cache_tokens``
    ("GPU KV cache size: N tokens"), ``max_concurrency`` ("Maximum concurrency for L tokens per request")."""

    num_blocks: int
    bytes_per_block: int
    blocks_per_request: int
    num_groups: int
    max_concurrency: float
    kv_cache_tokens: int
    bytes_per_request: int  # what one max_model_len request needs (for the admission check)


def capacity(groups: list[KVGroup], available_bytes: int, ctx: KVContext, block_size: int,
             legacy_token_formula: bool = False) -> KVCapacity:
    """Blocks, tokens and concurrency from the groups and the bytes available for the KV cache.

    ``legacy_token_formula``: releases before the single-line log (<= 0.19 in the shared cases) logged
    ``num_blocks // num_groups × block_size`` tokens; 0.32 logs ``int(concurrency × max_model_len)``
    (kv_cache_utils.py:2300-2314).
    """
    if not groups:
        return KVCapacity(num_blocks=0, bytes_per_block=0, blocks_per_request=0, num_groups=0,
                          max_concurrency=0.0, kv_cache_tokens=0, bytes_per_request=0)
    bytes_per_block = max(g.bytes_per_block for g in groups)
    num_blocks = max(available_bytes, 0) // bytes_per_block
    per_request = sum(g.blocks_per_request(ctx) for g in groups)
    concurrency = num_blocks / per_request if per_request else 0.0
    if legacy_token_formula:
        tokens = num_blocks // len(groups) * block_size
    else:
        tokens = int(concurrency * ctx.max_model_len)
    return KVCapacity(num_blocks=num_blocks, bytes_per_block=bytes_per_block, blocks_per_request=per_request,
                      num_groups=len(groups), max_concurrency=concurrency, kv_cache_tokens=tokens,
                      bytes_per_request=per_request * bytes_per_block)


def estimate_max_model_len(groups: list[KVGroup], ctx: KVContext, available_bytes: int, upper: int) -> int:
    """``estimate_max_model_len`` (kv_cache_utils.py:1050): the largest ``max_model_len`` (≤ ``upper``)
    whose one request, plus the null block, fits in ``available_bytes``, by binary search."""
    per_block = max(g.bytes_per_block for g in groups)
    lo, hi, best = 1, upper, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        c = replace(ctx, max_model_len=mid)
        need = sum(g.blocks_per_request(c) for g in groups) * per_block
        if need <= available_bytes - per_block:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best
