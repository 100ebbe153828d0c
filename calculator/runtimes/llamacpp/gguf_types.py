"""Which of llama-quantize's file types fit the device, for a model asked without a GGUF file.

A model given as safetensors (``config.json``, no ``gguf_file``) has no tensor table, so llama.cpp's model buffers
are not known for *the* file the user will run. They are known for each file ``llama-quantize`` would write from
it: :func:`.quant_rules.derive_meta` derives every tensor's type for a file type from llama.cpp's quantization rules
(``llama_tensor_get_type``, src/llama-quant.cpp:446-714 of llama-cpp-python 0.3.36's llama.cpp) and the file
layout (:1368, ggml/src/gguf.cpp:1445). For each type of :data:`LISTED` this module plans that file with the
request's settings and every layer on the GPU (``-ngl -1``): the model buffers by llama.cpp's placement
(:func:`.memory.plan`), the KV cache and compute buffers of the same plan, and checks each device as the verdict
checks a real GGUF (the runtime's own rules: the budget, the compute estimate's stated error, the 1024 MiB
llama.cpp's ``--fit`` keeps free on a discrete GPU; a Mac's unified memory as a whole).

Cheap by construction: the KV cache and compute buffers do not depend on the tensor types (they read shapes:
:func:`.memory.ffn_width`, ``n_vocab``), so one plan per distinct setting, of a skeleton holding only the FFN
tensors, gives them for every type, and each type's model buffers (which do not depend on the context, the slots or
the cache types: :func:`.memory.model_buffers`) are cached per (config, type, placement) in this process, as are the
derived tables; :func:`table` checks the composition against a full :func:`.memory.plan` once per model and
placement.

Units: bytes; ``MiB`` = 2^20 B, ``GiB`` = 2^30 B. Pure functions, no Django.
"""
from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from .gguf_meta import GGUFMeta
from .memory import SRC, Buffer, LlamaCppPlan, NotModelled, _buft_name, plan
from .memory import model_buffers as memory_model_buffers
from .gguf_meta import meta_from_hf_config
from .quant_rules import FTYPES, QUANT, derive_meta, hf_tensor_table

MiB = 2**20
GiB = 2**30

#: The file types listed, largest first: the common ``llama-quantize`` types (its own list, tools/quantize/quantize.cpp:
#: 34-75 QUANT_OPTIONS) that :func:`.quant_rules.derive_meta` derives: one per size step from Q8_0 down to IQ1_S (the
#: _S siblings of the K types, within a few % of their _M, and the legacy Q4_0 / Q5_0 are left out to keep the answer
#: cheap; Q1_0 / Q2_0 and the ternary TQ types are not among FTYPES).
LISTED = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS", "Q3_K_L", "Q3_K_M", "IQ3_M", "IQ3_XXS", "Q2_K", "IQ2_M",
          "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S")
assert set(LISTED) <= set(FTYPES)
LISTED_SRC = SRC + "tools/quantize/quantize.cpp:34-75 (QUANT_OPTIONS)"

#: What the figures rest on, said with every table.
TYPES_SRC = (f"derived from llama.cpp's quantization rules: each tensor's type as llama-quantize picks it for the file "
             f"type ({QUANT}:446-714 llama_tensor_get_type, :390-443 the fallback for rows that are no whole number "
             f"of blocks), the file's layout ({QUANT}:1368, {SRC}ggml/src/gguf.cpp:1445), quant_rules.derive_meta; the "
             "buffers by llama.cpp's placement with every layer on the GPU (memory.plan)")

#: The ggml types llama-quantize refuses to write without an importance matrix (``tensor_requires_imatrix``,
#: src/llama-quant.cpp:856-877: not for token_embd / output.weight; Q2_K only inside a Q2_K_S file), and the refusal
#: (:1129-1144, "this quantization requires an importance matrix!").
IMATRIX_TYPES = frozenset({"IQ3_XXS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_M", "IQ1_S"})
IMATRIX_SRC = QUANT + ":856-877 (tensor_requires_imatrix), :1129-1144 (the refusal)"

_LOCK = threading.Lock()
_METAS: OrderedDict[tuple[str, str], tuple[GGUFMeta, list[str]] | NotModelled] = OrderedDict()
_MODEL_BUFFERS: OrderedDict[tuple, list[Buffer]] = OrderedDict()
_KEYS: OrderedDict[str, str] = OrderedDict()  # a config's own fingerprint -> config_key
_CHECKED: OrderedDict[tuple, bool] = OrderedDict()  # (config, placement): the types change only the model buffers
_MAX_METAS = 128  # a 70B's table is ~700 tensors; 128 entries are a few models' whole list
_MAX_BUFFERS = 1024


def config_key(config: dict[str, Any]) -> str:
    """The cache key of a config's derived tables: a fingerprint of what :func:`.quant_rules.derive_meta` reads from
    it (the converter's tensor table and hyper-parameters, :func:`.quant_rules.hf_tensor_table`, and the attention
    metadata, :func:`.gguf_meta.meta_from_hf_config`, less the name), so two checkpoints of one model (BF16, FP8) share
    them (the shared meta keeps the first one's name, which the table does not read). Raises
    ``NotModelled`` where the tensor table is not modelled."""
    raw = hashlib.sha1(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()
    with _LOCK:
        hit = _KEYS.get(raw)
    if hit is None:
        arch, t, hp, n_vocab = hf_tensor_table(config)
        base = meta_from_hf_config(config).model_dump(mode="json", exclude={"name", "source"})  # where it was saved
        blob = json.dumps([arch, t, vars(hp), n_vocab, base], sort_keys=True, default=str)
        hit = _remember(_KEYS, raw, hashlib.sha1(blob.encode()).hexdigest(), _MAX_BUFFERS)
    return hit


def _remember(cache: OrderedDict, key, value, limit: int):
    with _LOCK:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > limit:
            cache.popitem(last=False)
    return value


def derived(config: dict[str, Any], ftype: str, key: str | None = None) -> tuple[GGUFMeta, list[str]]:
    """``(meta, imatrix types)``: :func:`.quant_rules.derive_meta` for ``config`` at ``ftype`` with its own defaults
    (an importance matrix where llama-quantize requires one, none elsewhere) and :func:`requires_imatrix`, cached per
    (config, type) in this process; the meta returned is shared: read it, never change it. Raises ``NotModelled``
    (cached too)."""
    key = key or config_key(config)
    with _LOCK:
        hit = _METAS.get((key, ftype))
    if hit is None:
        try:
            meta = derive_meta(config, ftype)
            hit = (meta, requires_imatrix(meta, ftype))
        except NotModelled as exc:
            hit = exc
        _remember(_METAS, (key, ftype), hit, _MAX_METAS)
    if isinstance(hit, NotModelled):
        raise hit
    return hit


def model_buffers(meta: GGUFMeta, cache_key: tuple, *, device: str, n_gpus: int, split_mode: str,
                  tensor_split: list[float] | None, main_gpu: int) -> list[Buffer]:
    """The model buffers llama.cpp makes for ``meta`` with every layer on the GPU(s) (:func:`.memory.model_buffers`,
    ``plan``'s own, which do not depend on the context, the slots, the cache types or the batch), cached under
    ``cache_key`` + the placement."""
    key = (*cache_key, device, n_gpus, split_mode, tuple(tensor_split or ()), main_gpu)
    with _LOCK:
        hit = _MODEL_BUFFERS.get(key)
    if hit is None:
        hit = _remember(_MODEL_BUFFERS, key, memory_model_buffers(
            meta, device=device, n_gpu_layers=-1, n_gpus=n_gpus, split_mode=split_mode, tensor_split=tensor_split,
            main_gpu=main_gpu), _MAX_BUFFERS)
    return hit


def requires_imatrix(meta: GGUFMeta, ftype: str) -> list[str]:
    """The ggml types of ``meta``'s tensors for which llama-quantize needs an importance matrix (:data:`IMATRIX_SRC`):
    IQ1 / IQ2 / IQ3_XXS targets and Q2_K inside a Q2_K_S file, token_embd and output.weight exempt. Empty when the
    file can be made without one."""
    need = set()
    for t in meta.tensors:
        if t.name in ("token_embd.weight", "output.weight"):
            continue
        if t.ggml_type in IMATRIX_TYPES or (t.ggml_type == "Q2_K" and ftype == "Q2_K_S"):
            need.add(t.ggml_type)
    return sorted(need)


@dataclass
class DeviceCheck:
    """One device's check for one file type: its model buffers, KV cache, compute buffer (estimate) and budget."""

    name: str
    model: int
    kv: int  # the KV cache on the device, plus a draft model's model / KV buffers there
    compute: Buffer | None
    budget: int
    fits: bool | None = None
    why: str = ""
    room: int | None = None  # what the model buffers may take there (see :func:`check_device`)


def check_device(d: DeviceCheck, *, headroom_mib: int, discrete: bool) -> DeviceCheck:
    """The verdict's rule for one device (runtime ``LlamaCpp._compute_memory`` / ``_multi_gpu_memory``): model + KV
    over the budget does not fit; a compute buffer whose estimate minus its error exceeds the rest does not fit;
    one that fits with its error fits, unless a discrete GPU keeps less than ``headroom_mib`` (llama.cpp's --fit
    target) beside every buffer (then it depends: the GPU context and the backend's pool are not among llama.cpp's
    buffers); within the error it depends. ``room``: ``budget - KV - compute - max(its error, the headroom)`` on a
    discrete GPU (its error elsewhere), the model buffers a type may have to fit."""
    used = d.model + d.kv
    left = d.budget - used
    cb = d.compute
    err = (cb.error_bytes or 0) if cb is not None and cb.bytes is not None else 0
    if cb is not None and cb.bytes is not None:
        d.room = d.budget - d.kv - cb.bytes - (max(err, headroom_mib * MiB) if discrete else err)
    if used > d.budget:
        d.fits, d.why = False, (f"model buffers {d.model / GiB:.2f} GiB + KV cache {d.kv / GiB:.2f} GiB, more than "
                                f"{d.name}'s {d.budget / GiB:.2f} GiB")
    elif cb is None or cb.bytes is None:
        d.fits, d.why = None, f"{d.name}'s compute buffer is not modelled ({cb.note if cb is not None else 'none'})"
    elif cb.bytes + err <= left:
        spare = left - cb.bytes
        if discrete and spare < (headroom_mib - 0.5) * MiB:
            d.fits, d.why = None, (f"{d.name} keeps {max(spare, 0) / MiB:.0f} MiB beside llama.cpp's buffers, less "
                                   f"than the {headroom_mib} MiB llama.cpp's --fit keeps free for the GPU context and "
                                   "the backend's pool")
        else:
            d.fits = True
    elif cb.bytes - err > left:
        d.fits, d.why = False, (f"model buffers + KV cache leave {left / MiB:.0f} MiB on {d.name}, less than its "
                                f"compute buffer (~{cb.bytes / MiB:.0f} MiB)")
    else:
        d.fits, d.why = None, (f"{d.name}'s compute buffer (~{cb.bytes / MiB:.0f} MiB +- {err / MiB:.0f}) fits in the "
                               f"{left / MiB:.0f} MiB left only within the estimate's stated error")
    return d


@dataclass
class TypeRow:
    """One file type's answer: its model buffers per buffer type (``model_buffer``), per device checks, and the
    type's status (``fits``: True / False / None = depends, with ``why``)."""

    ftype: str
    file_bytes: int
    model_buffer: dict[str, int]
    devices: list[DeviceCheck]
    imatrix: list[str] = field(default_factory=list)  # ggml types that need an importance matrix
    fits: bool | None = None
    why: str = ""
    unified: dict | None = None  # a Mac: the whole plan against its unified memory (unified.unified_memory)

    @property
    def device_model(self) -> int:
        """The model buffers on the GPU(s), in all."""
        return sum(d.model for d in self.devices)

    @property
    def device_model_gib(self) -> float:
        return self.device_model / GiB

    @property
    def file_gib(self) -> float:
        return self.file_bytes / GiB

    @property
    def status(self) -> str:
        """``fits``, ``does not fit`` or ``depends``."""
        return {True: "fits", False: "does not fit", None: "depends"}[self.fits]

    def to_json(self) -> dict[str, Any]:
        """``type``, ``file_gib`` (the tensor data llama-quantize writes; the file adds its header),
        ``model_buffer_mib`` per buffer type (as llama.cpp logs them), ``device_model_buffer_mib`` (on the GPU(s)),
        ``fits`` (true / false / null = depends) and ``why``, ``needs_imatrix`` (the ggml types that need one; empty:
        none), and per device ``devices``: ``model_buffer_mib``, ``kv_mib``, ``compute_mib``, ``room_mib`` (what the
        model buffers may take there), ``fits``, ``why``."""
        r = (lambda b: None if b is None else round(b / MiB, 2))
        return {"type": self.ftype, "file_gib": round(self.file_bytes / GiB, 2),
                "model_buffer_mib": {k: r(v) for k, v in self.model_buffer.items()},
                "device_model_buffer_mib": r(self.device_model), "fits": self.fits, "why": self.why,
                "needs_imatrix": self.imatrix,
                "devices": [{"device": d.name, "model_buffer_mib": r(d.model), "kv_mib": r(d.kv),
                             "compute_mib": r(d.compute.bytes if d.compute is not None else None),
                             "room_mib": r(d.room), "fits": d.fits, "why": d.why} for d in self.devices]}


def _skeleton(meta: GGUFMeta) -> GGUFMeta:
    """``meta`` with only the tensors :func:`.memory.plan` reads besides laying out the model buffers: the FFN up
    projections, whose widths size the compute buffers (:func:`.memory.ffn_width`)."""
    keep = (".ffn_up.weight", ".ffn_up_exps.weight", ".ffn_gate_up_exps.weight")
    return meta.model_copy(update={"tensors": [t for t in meta.tensors if t.name.endswith(keep)]})


def _compose(ref: LlamaCppPlan, model: list[Buffer]) -> LlamaCppPlan:
    """``ref`` (a plan of the skeleton, :func:`_skeleton`) with a file's model buffers in place of its own."""
    return ref.model_copy(update={"buffers": list(model) + [b for b in ref.buffers if b.kind != "model"]})


def table(config: dict[str, Any], *, plan_kw: Callable[[GGUFMeta], dict[str, Any]],
          check: Callable[[LlamaCppPlan, GGUFMeta], tuple[list[DeviceCheck], dict | None]],
          types: tuple[str, ...] = LISTED) -> list[TypeRow]:
    """Each type of ``types`` that :func:`.quant_rules.derive_meta` derives for ``config``, planned with
    ``plan_kw(meta)`` (the request's settings for that file, every layer on the GPU) and checked by ``check(plan,
    meta)`` (the runtime's: per device :class:`DeviceCheck` rows, already decided by :func:`check_device`, and a Mac's
    unified-memory answer or None). Sorted by the model buffers on the GPU(s), largest first. Raises ``NotModelled``
    when the architecture's tensor table is not modelled (the first type's error) and whatever ``plan`` raises."""
    key = config_key(config)
    refs: dict[str, LlamaCppPlan] = {}
    rows: list[TypeRow] = []
    for i, ftype in enumerate(types):
        try:
            meta, imatrix = derived(config, ftype, key)
        except NotModelled:
            if i == 0:
                raise
            continue
        kw = plan_kw(meta)
        place = dict(device=kw.get("device", "CUDA"), n_gpus=kw.get("n_gpus", 1),
                     split_mode=kw.get("split_mode", "layer"), tensor_split=kw.get("tensor_split"),
                     main_gpu=kw.get("main_gpu", 0))
        kw_key = json.dumps(kw, sort_keys=True, default=str)
        ref = refs.get(kw_key)
        if ref is None:
            # the KV cache and compute buffers, from the tensors plan reads besides the weights' buffers: the FFN
            # widths (memory.ffn_width); the model buffers are each type's own, composed in below
            ref = refs[kw_key] = plan(_skeleton(meta), **kw)
            checked = (key, *(str(v) for v in place.values()))
            with _LOCK:
                same = _CHECKED.get(checked)
            if same is None:  # the composition rests on it: check it against a full plan of another type, once
                oname = types[-1] if ftype != types[-1] else types[0]
                other = derived(config, oname, key)[0]
                full, composed = plan(other, **kw), _compose(ref, model_buffers(other, (key, oname), **place))
                same = _remember(_CHECKED, checked, composed.kv_caches == full.kv_caches and
                                 composed.buffers == full.buffers, _MAX_BUFFERS)
            if not same:
                raise NotModelled("the KV cache or compute buffers of two file types differ: the per-type table is "
                                  "not modelled for this model", field="gguf_file")
        p = _compose(ref, model_buffers(meta, (key, ftype), **place))
        devices, unified = check(p, meta)
        row = TypeRow(ftype=ftype, file_bytes=meta.file_sizes[0] if meta.file_sizes else meta.total_tensor_bytes,
                      model_buffer={b.buft: b.bytes for b in p.buffers if b.kind == "model" and b.bytes is not None},
                      devices=devices, imatrix=imatrix, unified=unified)
        verdicts = [d.fits for d in devices]
        bad = next((d for d in devices if d.fits is False), None) or next((d for d in devices if d.fits is None), None)
        row.fits = False if False in verdicts else (None if None in verdicts else True)
        row.why = bad.why if bad is not None else ""
        if unified is not None and row.fits is not False:
            if unified["status"] == "does_not_fit":
                row.fits, row.why = False, unified["text"]
            elif unified["status"] in ("within_error", "not_modelled"):
                row.fits, row.why = None, unified["text"]
        rows.append(row)
    rows.sort(key=lambda r: -r.device_model)
    return rows


def imatrix_text(row: TypeRow) -> str:
    """``"the IQ2_XS file is made with an importance matrix (llama-quantize refuses its IQ2_XS tensors without
    --imatrix: ...)"``, or "" when the type needs none."""
    if not row.imatrix:
        return ""
    return (f"the {row.ftype} file is made with an importance matrix (llama-quantize refuses its "
            f"{', '.join(row.imatrix)} tensors without --imatrix: {IMATRIX_SRC})")


def summary(rows: list[TypeRow]) -> dict[str, Any]:
    """What the verdict says from the rows (largest first): ``best`` (the largest type that fits, or None),
    ``fitting`` (the types that fit), ``smaller_all_fit`` (every type below ``best`` fits too), ``above`` (the row
    just above ``best``, which does not fit or depends; None when ``best`` is the largest), ``tight`` (types that depend)."""
    fitting = [r for r in rows if r.fits is True]
    best = fitting[0] if fitting else None
    idx = rows.index(best) if best is not None else len(rows)
    return {"best": best, "fitting": fitting, "smaller_all_fit": all(r.fits is True for r in rows[idx:]),
            "above": rows[idx - 1] if idx > 0 else None, "tight": [r for r in rows if r.fits is None]}


def device_names(p: LlamaCppPlan) -> list[str]:
    """The GPU buffer names a plan uses (CUDA0, CUDA1, ...; MTL0 ...), in device order."""
    gpus = sorted({d for d in [*p.layer_devices, p.output_device] if d >= 0})
    return [_buft_name(p.device, g) for g in gpus]
