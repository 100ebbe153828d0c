"""llama-server's ``--fit`` (``llama-fit-params``): the placement llama.cpp picks itself when the model does not fit.

``--fit`` is on by default (``bool fit_params = true``, common/common.h:478). Before the model is loaded,
``common_init_result`` (common/common.cpp:1200-1231) calls ``common_fit_params`` (common/fit.cpp:879-904), which
loads the model and a context *without allocating* (``no_alloc``, fit.cpp:52-58), reads every device's
model / context / compute buffers and free memory (fit.cpp:28-145) and, when a device would keep less than its
margin free, rewrites the parameters the user left unset. This module ports that algorithm (fit.cpp:179-877) over
the memory plan of :func:`.memory.plan`, which stands in for llama.cpp's measurement:

* **step 1** (fit.cpp:261-371): with the parameters as given, ``projected free = free - (model + context +
  compute)`` per device; when every device keeps ``free - used >= margin`` nothing changes.
* **step 2** (fit.cpp:373-458): only when ``-c`` is not given (``n_ctx == 0``: the context is first resolved to
  ``n_ctx_train x n_streams``, fit.cpp:256-278) and the devices together are short of their margins: the context is
  lowered by linear interpolation between the memory at ``--fit-ctx`` (default 4096, common/common.h:480) x
  ``n_streams`` and at the full context, rounded down to ``256 x n_streams`` cells; on one device that is the whole
  answer ("entire model can be fit by reducing context", status ``context_reduced``), on several step 3 follows at
  that context. ``-c 0`` sets the minimum to UINT32_MAX (common/arg.cpp:1641-1646: "disable context reduction ...
  if the user explicitly requests the full context size"), so the calculator's commands leave ``-c`` out when the
  request gives no context.
* **abort** (fit.cpp:463-486): with ``-ngl`` set by the user (anything but the default -1, "auto"), with a
  ``-ts`` of non-zero shares or ``-sm row`` on several devices, or with ``-ot`` overrides, fit gives up and the
  parameters stay as given (the load then succeeds or fails on its own); fit logs "failed to fit params to free
  device memory" and llama-server continues (fit.cpp:894-896).
* **step 3** (fit.cpp:488-733): layers are filled back to front, the last device first, by the method of false
  position (fit.cpp:663-729) between "no layer" and "every unassigned layer" until one more layer would exceed the
  device's target ``free - margin`` (fit.cpp:647-652). Units are llama.cpp's ``-ngl`` units: the output layer is
  the last one. For an MoE model (``n_expert > 0``) the layers are "dense-only": every routed-expert tensor of a
  *partial* layer goes to the CPU (the ``LAYER_FRACTION_MOE`` pattern, fit.cpp:520-526), one full unit per device.
* **step 4** (fit.cpp:735-876, MoE only, when all dense weights fit: ``global_surplus_cpu_moe > 0``, fit.cpp:616-645):
  dense-only layers are converted to full layers front to back (the experts of the *first* layers stay on the GPU,
  those of the last layers go to the CPU), then one more layer is tried with only its attention + ``ffn_up``
  (``LAYER_FRACTION_UP``), attention + up + gate (``GATE``) or attention only (``ATTN``) on the GPU
  (fit.cpp:810-860).

The result is ``-ngl`` (and ``-ts`` with several GPUs) plus ``-ot`` tensor overrides (fit.cpp:548-586), which
:func:`argv_equivalent` writes as llama-fit-params prints them.

Assumptions and approximations, stated wherever the result is shown:

* each device's *free* memory is the catalog budget the plan already uses (an idle GPU: nothing else allocated; a
  desktop's display and other processes take memory from it, and CUDA's own context takes a few hundred MiB);
* llama.cpp's measurement is replaced by the plan's figures: model and KV buffers as :func:`.memory.plan` computes
  them (exact where the plan is), compute buffers by its estimate (point value, without its stated error). The
  compute estimate does not hold the copies of CPU-resident weights that op offload makes on the GPU for large
  batches (ggml-cuda.cu:5636-5655 ``offload_op``, batch >= 32): llama.cpp measures them, so its -ngl can be one
  layer lower than the one computed here;
* the algorithm is exact (the same integer steps, patterns and order) given those figures;
* ``llama_max_tensor_buft_overrides`` (the override table's size) is not checked;
* a speculative draft model is added to every measurement as a constant (``extra_bytes``: its plan does not change
  with the target's layers), as fit.cpp:200-259 adds the extra model; an mmproj (server-context.cpp:1045-1061) is
  not modelled.

Units: bytes; ``MiB`` = 2^20 B. Pure functions, no Django.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Callable

from .memory import CPU, SRC, LlamaCppPlan, NotModelled, _buft_name, plan, tensor_layer, weight_device

MiB = 1024 * 1024
FIT_SRC = SRC + "common/fit.cpp"
#: ``fit_params_target``: 1024 MiB per device (common/common.h:482-483; -fitt / --fit-target, common/arg.cpp:2895-2919)
DEFAULT_MARGIN_MIB = 1024
#: ``fit_params_min_ctx`` (common/common.h:480; -fitc / --fit-ctx, common/arg.cpp:2920-2926)
DEFAULT_MIN_CTX = 4096
FIT_DEFAULT_SRC = SRC + "common/common.h:478 (bool fit_params = true), common/common.cpp:1200-1231"

#: The parts of a layer fit.cpp can leave on the CPU (common_layer_fraction_t, fit.cpp:17-23): the regex of the
#: tensors that go to the overflow buffer for each (get_overflow_pattern, fit.cpp:493-530).
FRACTIONS = ("ATTN", "UP", "GATE", "MOE")
MOE_ALL_PATTERN = r"blk\.\d+\.ffn_(up|down|gate_up|gate)_(ch|)exps"  # fit.cpp:618


def overflow_pattern(il: int, fraction: str) -> str:
    """The tensor pattern fit.cpp sends to the overflow buffer for layer ``il`` (fit.cpp:493-530): ``ATTN`` keeps only
    attention (every ffn_gate / up / gate_up / down tensor moves), ``UP`` keeps attention + ffn_up, ``GATE`` keeps
    attention + up + gate (ffn_down moves), ``MOE`` moves only the routed experts (``*_exps`` / ``*_chexps``).
    Raises ``ValueError`` for another fraction and for ``il >= 1000`` (fit.cpp:494-497)."""
    if il >= 1000:
        raise ValueError("at most 1000 model layers are supported (common/fit.cpp:494-497)")
    pats = {"ATTN": r"\.ffn_(gate|up|gate_up|down).*", "UP": r"\.ffn_(gate|gate_up|down).*",
            "GATE": r"\.ffn_down.*", "MOE": r"\.ffn_(up|down|gate_up|gate)_(ch|)exps"}
    if fraction not in pats:
        raise ValueError(f"fraction: one of {', '.join(FRACTIONS)}, not {fraction!r}")
    return rf"blk\.{il}" + pats[fraction]


@dataclass
class DeviceLayers:
    """``ngl_t`` (fit.cpp:532-543): ``n_layer`` units on the device, ``n_part`` of them partial (their
    ``overflow_type`` part, for the first partial layer, or their routed experts, for the others, on the overflow
    device / the CPU)."""

    n_layer: int = 0
    n_part: int = 0
    overflow_type: str = "MOE"

    def n_full(self) -> int:
        return self.n_layer - self.n_part


def layout_params(layers: list[DeviceLayers], overflow_devs: list[int], hp_ngl: int
                  ) -> tuple[int, list[float] | None, list[tuple[str, int]]]:
    """``set_ngl_tensor_split_tbo`` (fit.cpp:548-586): ``(n_gpu_layers, tensor_split or None for one device,
    [(pattern, device)] overrides)``. Each device's slice starts at ``il0 = hp_ngl + 1 - n_gpu_layers``
    (fit.cpp:560); its first ``n_full`` units are whole, the next ``n_part`` partial: the first partial layer sends
    its ``overflow_type`` pattern to ``overflow_devs[id]``, the others their experts to the CPU (fit.cpp:565-581)."""
    nd = len(layers)
    ngl = sum(d.n_layer for d in layers)
    ts = [float(d.n_layer) for d in layers] if nd > 1 else None
    il0 = hp_ngl + 1 - ngl
    overrides: list[tuple[str, int]] = []
    for i, d in enumerate(layers):
        il0 += d.n_full()
        for il in range(il0, il0 + d.n_part):
            first = il == il0
            overrides.append((overflow_pattern(il, d.overflow_type if first else "MOE"),
                              overflow_devs[i] if first else CPU))
        il0 += d.n_part
    return ngl, ts, overrides


def _step(delta: int, target: int, low: int, high: int) -> int:
    """``uint32_t step_size = int64_t(delta) * (target - low) / (high - low)`` clamped to ``[1, delta - 1]``
    (fit.cpp:694-696, 766-768): C++ integer division truncates toward zero and a negative result wraps in uint32."""
    num, den = delta * (target - low), (high - low)
    if den == 0:
        q = 0
    else:
        q = abs(num) // abs(den)
        q = q if (num >= 0) == (den > 0) else -q
    step = q & 0xFFFFFFFF
    return min(max(step, 1), delta - 1)


@dataclass
class FitResult:
    """What ``common_fit_params`` did. ``status``: ``no_change`` (step 1: every device keeps its margin),
    ``context_reduced`` (step 2 lowered the context to ``n_ctx`` and that was enough, one device), ``aborted`` (the
    user set -ngl / -ts / -ot: ``reason`` is fit.cpp's message), ``fitted`` (steps 3-4 chose
    ``n_gpu_layers``, ``tensor_split``, ``overrides``). ``layers`` per device, ``mem`` the measured bytes per device
    for the final choice, ``targets`` ``free - margin`` per device, ``measurements`` how many trial loads fit made."""

    status: str
    reason: str = ""
    n_gpu_layers: int | None = None
    tensor_split: list[float] | None = None
    overrides: list[tuple[str, int]] = field(default_factory=list)
    layers: list[DeviceLayers] = field(default_factory=list)
    mem: list[int] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)
    projected_free: list[int] = field(default_factory=list)
    moe_surplus: int | None = None
    measurements: int = 0
    n_ctx: int | None = None  # step 2's context (``-c`` not given), else None


Measure = Callable[[int, "list[float] | None", "list[tuple[str, int]]"], "list[int]"]


@dataclass
class AutoContext:
    """``-c`` not given (``n_ctx == 0``, ``n_ctx_auto``, fit.cpp:253): step 2 may lower the context
    (fit.cpp:373-458). ``n_ctx_max``: ``n_ctx_train x n_streams`` (fit.cpp:256-278; ``n_streams`` = 1 with
    ``-kvu``, else ``n_seq_max``), the context measured first; ``n_ctx_min``: ``fit_params_min_ctx x n_streams``
    (4096 by default, common/common.h:480; ``-c 0`` makes it UINT32_MAX, common/arg.cpp:1641-1646, so no
    AutoContext then); ``measure_at(n_ctx)``: bytes per device with the parameters as given at that context;
    ``model_bytes``: model-buffer bytes per device at the start (``sum_projected_model``, fit.cpp:344-355);
    ``use(n_ctx)``: later measurements (step 3) run at that context."""

    n_ctx_max: int
    n_ctx_min: int
    n_streams: int
    measure_at: Callable[[int], "list[int]"]
    model_bytes: list[int]
    use: Callable[[int], None]


def fit_core(*, hp_ngl: int, hp_nex: int, free: list[int], margins: list[int], initial: list[int], measure: Measure,
             user_ngl: bool = False, user_ts: bool = False, user_overrides: bool = False, split_row: bool = False,
             auto_ctx: AutoContext | None = None) -> FitResult:
    """``common_params_fit_impl`` (fit.cpp:179-877) for ``len(free)`` devices (>= 1).

    ``hp_ngl``: the model's layer count without NextN layers (``llama_model_n_layer``, llama-model.cpp:2961-2963,
    llama-hparams.cpp:348-350); ``hp_nex``: its expert count; ``free`` / ``margins`` per device (bytes);
    ``initial``: bytes per device (model + context + compute) with the parameters as given; ``measure(n_gpu_layers,
    tensor_split or None, overrides)`` the same for a trial placement (what fit.cpp's no-alloc load reports).
    ``user_*``: what the user set (fit.cpp:463-486 aborts). ``auto_ctx``: the context was left to llama.cpp (no ``-c``),
    so step 2 may lower it (:class:`AutoContext`; one device: status ``context_reduced`` when that is enough).
    Returns a :class:`FitResult`."""
    nd = len(free)
    if nd < 1 or len(margins) != nd or len(initial) != nd:
        raise ValueError("free, margins and initial need one entry per device (at least one device)")
    count = [0]
    cache: dict = {}

    def mem_for(layers: list[DeviceLayers], overflow_devs: list[int]) -> list[int]:
        ngl, ts, ovr = layout_params(layers, overflow_devs, hp_ngl)
        key = (ngl, tuple(ts) if ts else None, tuple(ovr))
        if key not in cache:
            count[0] += 1
            cache[key] = list(measure(ngl, ts, ovr))
        return cache[key]

    # step 1 (fit.cpp:332-371)
    projected_free = [free[i] - initial[i] for i in range(nd)]
    if all(projected_free[i] >= margins[i] for i in range(nd)):
        return FitResult(status="no_change", projected_free=projected_free, mem=list(initial),
                         targets=[free[i] - margins[i] for i in range(nd)])
    # step 2 (fit.cpp:373-458): only with -c unset, a total deficit and a minimum context below the model's
    n_ctx = None
    if auto_ctx is not None and sum(projected_free) - sum(margins) < 0 and auto_ctx.n_ctx_max > auto_ctx.n_ctx_min:
        used_target = sum(free) - sum(margins)
        if nd > 1:  # whole layers / tensors per device waste about half a unit each (fit.cpp:391-399)
            model_per_layer = sum(auto_ctx.model_bytes) // hp_ngl
            used_target -= (nd + 1) * model_per_layer // (2 if hp_nex == 0 else 6)
        used_min = sum(auto_ctx.measure_at(auto_ctx.n_ctx_min))
        used_full = sum(initial)
        n_ctx = auto_ctx.n_ctx_min  # fit.cpp:402: measured there, and kept when interpolation cannot help
        if used_target > used_min and used_full > used_min:
            # linear interpolation between the minimum and the full context (fit.cpp:412-417), rounded down to
            # 256 x n_streams cells (fit.cpp:419-420)
            n_ctx += (auto_ctx.n_ctx_max - auto_ctx.n_ctx_min) * (used_target - used_min) // (used_full - used_min)
            align = 256 * auto_ctx.n_streams
            n_ctx = max(n_ctx - n_ctx % align, auto_ctx.n_ctx_min)
            if nd <= 1:  # "entire model can be fit by reducing context" (fit.cpp:425-428)
                return FitResult(status="context_reduced", projected_free=projected_free,
                                 mem=auto_ctx.measure_at(n_ctx), targets=[free[i] - margins[i] for i in range(nd)],
                                 n_ctx=n_ctx)
        auto_ctx.use(n_ctx)
    # abort (fit.cpp:463-486)
    why = None
    if user_ngl:
        why = "n_gpu_layers already set by user, abort (common/fit.cpp:463-465)"
    elif nd > 1 and user_ts:
        why = "model_params::tensor_split already set by user, abort (common/fit.cpp:470-476)"
    elif nd > 1 and split_row:
        why = "changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented, abort (common/fit.cpp:477-479)"
    elif user_overrides:
        why = "model_params::tensor_buft_overrides already set by user, abort (common/fit.cpp:484-486)"
    if why:
        return FitResult(status="aborted", reason=why, n_ctx=n_ctx, projected_free=projected_free, mem=list(initial),
                         targets=[free[i] - margins[i] for i in range(nd)])

    # fit.cpp:616-645: the total surplus with every routed expert in system memory
    moe_surplus = None
    if hp_nex > 0:
        m = measure(-1, None, [(MOE_ALL_PATTERN, CPU)])
        count[0] += 1
        moe_surplus = sum(free[i] - (m[i] + margins[i]) for i in range(nd))
    targets = [free[i] - margins[i] for i in range(nd)]
    overflow_devs = [CPU] * nd
    layers = [DeviceLayers() for _ in range(nd)]
    mem = mem_for(layers, overflow_devs)

    def copy(ls: list[DeviceLayers]) -> list[DeviceLayers]:
        return [replace(d) for d in ls]

    # step 3 (fit.cpp:675-729): back to front, false position on n_layer
    for i in reversed(range(nd)):
        n_unassigned = hp_ngl + 1 - sum(layers[j].n_layer for j in range(i + 1, nd))
        high = copy(layers)
        high[i].n_layer = n_unassigned
        if hp_nex > 0:
            high[i].n_part = high[i].n_layer if i < nd - 1 else high[i].n_layer - 1
        if high[i].n_layer > 0:
            mem_high = mem_for(high, overflow_devs)
            if mem_high[i] > targets[i]:
                delta = high[i].n_layer - layers[i].n_layer
                while delta > 1:
                    step = _step(delta, targets[i], mem[i], mem_high[i])
                    test = copy(layers)
                    test[i].n_layer += step
                    if hp_nex:
                        test[i].n_part += step - 1 if (i == nd - 1 and test[i].n_part == 0) else step
                    mem_test = mem_for(test, overflow_devs)
                    if mem_test[i] <= targets[i]:
                        layers, mem = test, mem_test
                    else:
                        high, mem_high = test, mem_test
                    delta = high[i].n_layer - layers[i].n_layer
            else:
                layers, mem = high, mem_high
    if hp_nex == 0 or moe_surplus <= 0:
        ngl, ts, ovr = layout_params(layers, overflow_devs, hp_ngl)
        return FitResult(status="fitted", n_ctx=n_ctx, n_gpu_layers=ngl, tensor_split=ts, overrides=ovr, layers=layers, mem=mem,
                         targets=targets, projected_free=projected_free, moe_surplus=moe_surplus,
                         measurements=count[0])

    # step 4 (fit.cpp:740-866): dense-only layers back to full layers, front to back
    dense_start = nd
    for i in reversed(range(nd)):
        if layers[i].n_layer > 0:
            dense_start = i
            continue
        break
    i = 0
    while i <= dense_start < nd:
        high = copy(layers)
        for j in range(dense_start, nd):
            move = high[j].n_layer if j < nd - 1 else high[j].n_layer - 1
            high[i].n_layer += move
            high[j].n_layer -= move
            high[j].n_part = 0
        dense_start_high = nd - 1
        mem_high = mem_for(high, overflow_devs)
        if mem_high[i] > targets[i]:
            delta = high[i].n_full() - layers[i].n_full()
            while delta > 1:
                step = _step(delta, targets[i], mem[i], mem_high[i])
                test = copy(layers)
                ds_test, converted = dense_start, 0
                while ds_test < nd:
                    n_conv = min(step - converted, test[ds_test].n_part)
                    test[ds_test].n_layer -= n_conv
                    test[ds_test].n_part -= n_conv
                    test[i].n_layer += n_conv
                    converted += n_conv
                    if test[ds_test].n_part > 0:
                        break
                    ds_test += 1
                mem_test = mem_for(test, overflow_devs)
                if mem_test[i] <= targets[i]:
                    layers, mem, dense_start = test, mem_test, ds_test
                else:
                    high, mem_high, dense_start_high = test, mem_test, ds_test
                delta = high[i].n_full() - layers[i].n_full()
        else:
            layers, mem, dense_start = high, mem_high, dense_start_high
        # fit.cpp:810-860: at least part of one more layer
        if dense_start < nd and layers[dense_start].n_layer > (0 if i < nd - 1 else 1) and \
                layers[dense_start].n_part > 0:
            test = copy(layers)
            ds_test = dense_start
            test[ds_test].n_layer -= 1
            test[ds_test].n_part -= 1
            test[i].n_layer += 1
            test[i].n_part += 1
            if test[ds_test].n_part == 0:
                ds_test += 1
            test[i].overflow_type = "UP"
            ob_test = list(overflow_devs)
            if i < nd - 1:
                ob_test[i] = i + 1

            def ok(m: list[int]) -> bool:
                return m[i] < targets[i] and (i + 1 == nd or m[i + 1] < targets[i + 1])

            mem_test = mem_for(test, ob_test)
            if ok(mem_test):
                layers, overflow_devs, mem, dense_start = copy(test), ob_test, mem_test, ds_test
                test[i].overflow_type = "GATE"
                mem_test = mem_for(test, ob_test)
                if ok(mem_test):
                    layers, overflow_devs, mem, dense_start = copy(test), ob_test, mem_test, ds_test
            else:
                test[i].overflow_type = "ATTN"
                mem_test = mem_for(test, ob_test)
                if ok(mem_test):
                    layers, overflow_devs, mem, dense_start = copy(test), ob_test, mem_test, ds_test
        i += 1
    ngl, ts, ovr = layout_params(layers, overflow_devs, hp_ngl)
    return FitResult(status="fitted", n_ctx=n_ctx, n_gpu_layers=ngl, tensor_split=ts, overrides=ovr, layers=layers, mem=mem,
                     targets=targets, projected_free=projected_free, moe_surplus=moe_surplus, measurements=count[0])


# ---------------------------------------------------------------- over the memory plan


def _device_bufts(p: LlamaCppPlan, g: int) -> tuple[str, str]:
    """GPU ``g``'s own buffer types in the plan: its device buffer (``CUDA0``) and its mapped one (``CUDA0_Mapped``)."""
    name = _buft_name(p.device, g)
    return name, f"{name}_Mapped"


def device_bytes(p: LlamaCppPlan, gpu_ids: list[int]) -> list[int]:
    """What fit.cpp reads per device (``llama_memory_breakdown``: model + context + compute on the device's non-host
    buffer types, fit.cpp:75-97): the device's model buffer, its KV buffers and its compute buffer (the estimate's
    point value). Host buffers (CPU, CPU_Mapped, CUDA_Host) are not device memory. Raises ``NotModelled`` when a
    model or compute buffer of the device is not modelled."""
    out = []
    for g in gpu_ids:
        own = _device_bufts(p, g)
        name = own[0]
        total = 0
        for b in p.buffers:
            if b.buft in own and b.kind in ("model", "compute", "output"):
                if b.bytes is None:
                    raise NotModelled(f"--fit needs every buffer on {name}: its {b.kind} buffer is not modelled "
                                      f"({b.note})", field="gguf_file" if b.kind == "model" else "model")
                total += b.bytes
        total += sum(c.buffers.get(name, 0) for c in p.kv_caches)
        out.append(total)
    return out


def host_bytes(meta, p: LlamaCppPlan) -> dict[str, int]:
    """System memory the placement needs (bytes): ``weights`` (the tensors left on the CPU, their own bytes: the
    mapped file range the log prints may be larger), ``kv`` (the CPU's KV buffers), ``compute`` (the host compute
    buffer estimate), ``output`` (the logits buffer, a host buffer) and ``total``."""
    overrides = [(re.compile(pat), d) for pat, d in p.tensor_overrides]
    n_all = meta.n_layer_all
    weights = 0
    for t in meta.tensors:
        unit = tensor_layer(t.name, n_all, meta)
        if weight_device(t.name, unit, p.layer_devices, p.output_device, overrides) == CPU:
            weights += t.n_bytes
    kv = sum(c.buffers.get("CPU", 0) for c in p.kv_caches)
    # the CPU backend's compute buffer: "CPU", or the GPU's pinned host type (CUDA_Host, memory.host_buft_name)
    compute = sum(b.bytes or 0 for b in p.buffers if b.kind == "compute" and (b.buft == "CPU" or b.buft.endswith("_Host")))
    output = sum(b.bytes or 0 for b in p.buffers if b.kind == "output")
    return {"weights": weights, "kv": kv, "compute": compute, "output": output,
            "total": weights + kv + compute + output}


@dataclass
class FitOutcome:
    """``--fit`` over a memory plan: ``result`` (:class:`FitResult`), the ``plan`` of the chosen placement (the
    given plan when nothing changed), ``gpu_ids`` the devices fit saw, ``margin_bytes`` per device, ``free_bytes``
    the assumed free memory per device."""

    result: FitResult
    plan: LlamaCppPlan
    gpu_ids: list[int]
    margin_bytes: list[int]
    free_bytes: list[int]
    hp_ngl: int
    plan_ctx_max: int = 0  # the context fit measured first (n_ctx_train x n_streams with -c left to llama.cpp)
    min_ctx_total: int = 0  # --fit-ctx x n_streams: the lowest context step 2 may choose

    @property
    def changed(self) -> bool:
        return self.result.status == "fitted"


def fit_plan(meta, base: LlamaCppPlan, plan_kwargs: dict, *, free_bytes: int, margin_mib: int = DEFAULT_MARGIN_MIB,
             user_ngl: bool = False, user_ts: bool = False, extra_bytes: int = 0,
             min_ctx: int | None = DEFAULT_MIN_CTX) -> FitOutcome:
    """llama-server's ``--fit`` for ``meta`` with the plan ``base`` (made by :func:`.memory.plan` with
    ``plan_kwargs``). ``free_bytes``: each device's free memory (identical devices; the catalog budget = an idle
    GPU); ``margin_mib``: ``--fit-target`` (default 1024 MiB, common/common.h:482-483); ``user_ngl`` / ``user_ts``:
    -ngl / -ts given; ``extra_bytes``: a draft model's bytes per device, added to every measurement; ``min_ctx``:
    ``--fit-ctx`` when ``-c`` is not given (``plan_kwargs["n_ctx"] == 0``; None for an explicit ``-c 0``, which turns
    step 2 off). With the context left to llama.cpp fit first resolves it to ``n_ctx_train x n_streams``
    (fit.cpp:256-278: more than the plan's ``n_ctx_train`` in all when several sequences have their own streams),
    then step 2 may lower it. Returns a
    :class:`FitOutcome`. Raises ``NotModelled`` when the plan cannot stand in for fit's measurement (no tensor
    table, a buffer not modelled, a CPU-only build)."""
    if base.device == "CPU":
        raise NotModelled("--fit on a CPU-only build only compares the plan with the host's memory (common/fit.cpp:"
                          "317-327, 459-461); the host's memory is not known here", field="gpu")
    if not meta.tensors:
        raise NotModelled("--fit needs the model buffers: give gguf_file (the .gguf file)", field="gguf_file")
    if plan_kwargs.get("split_mode", "layer") == "none" or plan_kwargs.get("n_gpus", 1) == 1:
        gpu_ids = [plan_kwargs.get("main_gpu", 0) if plan_kwargs.get("split_mode") == "none" else 0]
    else:
        gpu_ids = list(range(plan_kwargs["n_gpus"]))
    nd = len(gpu_ids)
    hp_ngl = meta.n_layer_all - meta.n_layer_nextn
    auto = None
    if plan_kwargs.get("n_ctx", 0) == 0:  # n_ctx_auto (fit.cpp:253): the context is resolved before measuring
        if not meta.n_ctx_train:
            raise NotModelled("--fit with the context left to llama.cpp needs the model's training context",
                              field="max_model_len")
        n_streams = 1 if plan_kwargs.get("kv_unified") else max(1, plan_kwargs.get("n_seq_max", 1))
        n_ctx_max = meta.n_ctx_train * n_streams
        plan_kwargs = dict(plan_kwargs, n_ctx=n_ctx_max)
        if n_streams > 1:  # fit.cpp:266-278: n_ctx_train per stream, not in all
            base = plan(meta, **plan_kwargs)
        if min_ctx is not None:
            auto = (n_ctx_max, min(min_ctx * n_streams, 0xFFFFFFFF), n_streams)
    plans: dict = {}
    state = {"n_ctx": plan_kwargs["n_ctx"]}

    def measure_with(n_ctx: int, ngl: int, ts: list[float] | None, ovr: list[tuple[str, int]]) -> list[int]:
        kw = dict(plan_kwargs, n_ctx=n_ctx, n_gpu_layers=ngl, tensor_overrides=list(ovr))
        if nd > 1:
            kw["tensor_split"] = ts
        p = plan(meta, **kw)
        plans[(n_ctx, ngl, tuple(ts) if ts else None, tuple(ovr))] = p
        return [b + extra_bytes for b in device_bytes(p, gpu_ids)]

    def measure(ngl: int, ts: list[float] | None, ovr: list[tuple[str, int]]) -> list[int]:
        return measure_with(state["n_ctx"], ngl, ts, ovr)

    given_ngl = plan_kwargs.get("n_gpu_layers", -1)
    given_ts = plan_kwargs.get("tensor_split") if nd > 1 else None
    initial = [b + extra_bytes for b in device_bytes(base, gpu_ids)]
    auto_ctx = None if auto is None else AutoContext(
        n_ctx_max=auto[0], n_ctx_min=auto[1], n_streams=auto[2],
        measure_at=lambda n: measure_with(n, given_ngl, given_ts, plan_kwargs.get("tensor_overrides") or []),
        model_bytes=[sum(b.bytes or 0 for b in base.buffers if b.kind == "model" and b.buft in _device_bufts(base, g))
                     for g in gpu_ids],
        use=lambda n: state.__setitem__("n_ctx", n))
    margins = [margin_mib * MiB] * nd
    free = [free_bytes] * nd
    res = fit_core(hp_ngl=hp_ngl, hp_nex=meta.n_expert or 0, free=free,
                   margins=margins, initial=initial, measure=measure, user_ngl=user_ngl, user_ts=user_ts,
                   split_row=plan_kwargs.get("split_mode") == "row", auto_ctx=auto_ctx)
    chosen = base
    if res.status == "fitted":
        key = (state["n_ctx"], res.n_gpu_layers, tuple(res.tensor_split) if res.tensor_split else None,
               tuple(res.overrides))
        chosen = plans.get(key) or plan(meta, **dict(plan_kwargs, n_ctx=state["n_ctx"], n_gpu_layers=res.n_gpu_layers,
                                                     tensor_overrides=list(res.overrides),
                                                     **({"tensor_split": res.tensor_split} if nd > 1 else {})))
    elif res.n_ctx is not None:  # the context step 2 chose (one device), or kept by an abort after it (fit.cpp:894)
        chosen = plan(meta, **dict(plan_kwargs, n_ctx=res.n_ctx))
    return FitOutcome(result=res, plan=chosen, gpu_ids=gpu_ids, margin_bytes=margins, free_bytes=free,
                      hp_ngl=hp_ngl, plan_ctx_max=plan_kwargs["n_ctx"], min_ctx_total=auto[1] if auto else 0)


def argv_equivalent(res: FitResult, device: str = "CUDA") -> list[str]:
    """The flags that reproduce fit's choice with ``--fit off``, as llama-fit-params prints them: ``-ngl N
    [-ts a,b] [-ot "pattern=CPU,pattern=CUDA1,..."]`` (buffer types named as ``device``'s backend names them:
    CPU, CUDA0, ROCm0, Vulkan0, MTL0)."""
    out = ["-ngl", str(res.n_gpu_layers)]
    if res.tensor_split:
        out += ["-ts", ",".join(str(int(x)) for x in res.tensor_split)]
    if res.overrides:
        out += ["-ot", ",".join(f"{p}={_buft_name(device, d)}" for p, d in res.overrides)]
    return out


#: When --fit appeared: ggml-org/llama.cpp PR #16653 ("llama: automatically set parameters not set by the user in
#: such a way that maximizes GPU utilization", merged mid-December 2025: PR #18070 of 2025-12-15 fixes it after the
#: merge and issue #18097 of 2025-12-16 reports it on build 7437), on by default from the start; in the vendored
#: 0.3.36 tree common/common.h:478.
FIT_HISTORY = ("--fit came with ggml-org/llama.cpp PR #16653 (merged mid-December 2025, on by default; "
               "https://github.com/ggml-org/llama.cpp/pull/16653)")


def _mapped_range_note(p: LlamaCppPlan, cpu_weights: int) -> str:
    """When the ``CPU_Mapped`` model buffer llama.cpp prints is larger than the weights left on the CPU: it is the
    mmap'd file range from the first to the last CPU tensor (src/llama-model-loader.cpp:1449 get_mapping_range, used
    by src/llama-model.cpp:1863 for the mapped CPU buffer), which spans the GPU tensors stored between them; pages
    of those are not read."""
    mapped = sum(b.bytes or 0 for b in p.buffers if b.kind == "model" and b.buft == "CPU_Mapped")
    if mapped <= cpu_weights * 1.05:
        return ""
    return (f". The CPU_Mapped line ({mapped / MiB:.2f} MiB) is the mmap'd file range from the first to the last CPU "
            "tensor (llama-model-loader.cpp:1449 get_mapping_range), which spans GPU tensors stored between them; it is "
            "address space, not RAM the CPU part reads")


def _others(device: str) -> str:
    """What else takes the device's memory, in the backend's words (the assumption text of :func:`fit_for_request`)."""
    if device == "Metal":
        return "macOS, the display and other apps share the unified memory and leave less"
    owner = {"CUDA": "CUDA's own context", "ROCm": "HIP's own context", "Vulkan": "the Vulkan driver"}.get(device,
                                                                                                        "the driver")
    return f"a display, other processes and {owner} leave less"


def _gib(b: int) -> str:
    return f"{b / 2**30:.2f} GiB"


def fit_for_request(meta, base: LlamaCppPlan, plan_kwargs: dict, *, fit: str | None, fit_target: int | None,
                     user_ngl: bool, user_ts: bool, release: str, free_bytes: int, free_source: str,
                     extra_bytes: int = 0, unified_ram: int | None = None, ctx_zero: bool = False
                     ) -> tuple[LlamaCppPlan, dict | None, list[str], str | None]:
    """``--fit`` as llama-server runs it for a request: ``(plan to use, the "fit" JSON or None, notes, condition or
    None)``. The notes replace the plan's generic "--fit" note; the plan is the fitted one when fit changes the
    placement. ``fit``: ``--fit on|off`` (None = on, the default); ``fit_target``: -fitt MiB (None = 1024);
    ``release``: the rule set (:data:`.memory.RELEASES`): the 0.3.36 tree has fit.cpp; the PR #17046 .. #19067
    range straddles PR #16653 (the verdict then depends on the build); the legacy 2025 builds predate it.
    ``unified_ram``: the Mac's unified memory (bytes) when the device is Apple's Metal GPU: what fit leaves in CPU
    memory then comes from the same memory as the Metal buffers, so no "free system RAM" condition is returned (the
    runtime checks the whole, :func:`.unified.unified_memory`). ``ctx_zero``: ``-c 0`` given explicitly (the model's
    context, which fit may then not lower: common/arg.cpp:1641-1646 sets --fit-ctx to UINT32_MAX, so fit.cpp:394's
    ``n_ctx_max > n_ctx_min_total`` never holds); without it ``n_ctx == 0`` is ``-c`` left out. Raises nothing:
    what cannot be modelled is said in the notes and leaves the plan as given."""
    from .memory import RELEASE_0_3_36, RELEASE_LEGACY

    src = f"{FIT_DEFAULT_SRC}; {FIT_SRC}"
    if release == RELEASE_LEGACY:
        return base, None, [f"llama-server's --fit does not exist in these builds ({FIT_HISTORY}): -ngl as given"], None
    if fit == "off":
        return base, {"status": "off", "source": src}, ["llama-server's --fit is off (--fit off): -ngl, -ts and -c "
                                                        "stay as given"], None
    if base.device == "CPU":
        return base, None, ["llama-server's --fit changes nothing on a CPU-only build here (it only compares the "
                            "plan with the host's memory, common/fit.cpp:317-327, which is not known)"], None
    margin = DEFAULT_MARGIN_MIB if fit_target is None else fit_target
    try:
        out = fit_plan(meta, base, plan_kwargs, free_bytes=free_bytes, margin_mib=margin, user_ngl=user_ngl,
                       user_ts=user_ts, extra_bytes=extra_bytes, min_ctx=None if ctx_zero else DEFAULT_MIN_CTX)
    except NotModelled as exc:
        return base, {"status": "not_modelled", "reason": str(exc), "source": src}, [
            f"llama-server's --fit (on by default) may move layers to the CPU when the device would keep less than "
            f"{margin} MiB free; not modelled here: {exc}"], None
    res = out.result
    names = [_buft_name(base.device, g) for g in out.gpu_ids]
    assumption = (f"free memory assumed = the device budget, {_gib(free_bytes)} ({free_source}): an idle GPU; "
                  f"{_others(base.device)}, and fit then keeps fewer layers")
    info: dict = {"status": res.status, "reason": res.reason, "margin_mib": margin,
                  "free_mib": round(free_bytes / MiB, 2), "free_assumption": assumption,
                  "devices": names, "projected_free_mib": [round(x / MiB, 2) for x in res.projected_free],
                  "targets_mib": [round(x / MiB, 2) for x in res.targets], "source": src}
    condition = None
    if release != RELEASE_0_3_36 and res.status in ("fitted", "context_reduced"):
        condition = (f"the llama.cpp build has --fit ({FIT_HISTORY}; builds before it load every layer and fail) and "
                     "its algorithm is the 0.3.36 one modelled here")
    ctx_note = ""
    if res.n_ctx is not None:
        info["n_ctx"] = res.n_ctx
        info["n_ctx_from"] = out.plan_ctx_max
        ctx_note = (f"-c is not given, so it first lowers the context from {out.plan_ctx_max} to {res.n_ctx} cells by "
                    f"linear interpolation down to its minimum of {out.min_ctx_total} (--fit-ctx; common/fit.cpp:373-"
                    f"428), rounded down to a multiple of 256; ")
    if res.status == "context_reduced":
        return out.plan, info, [
            f"llama-server's --fit (on by default, {FIT_DEFAULT_SRC}): with the model's full context a device would keep "
            f"less than its {margin} MiB margin free ({', '.join(f'{n} {x / MiB:.0f} MiB' for n, x in zip(names, res.projected_free))} "
            f"projected free, common/fit.cpp:332-371); {ctx_note}every layer stays on the GPU (\"entire model can be "
            f"fit by reducing context\", fit.cpp:425-428). The same with --fit off: -c {res.n_ctx}; {assumption}"], None
    if res.status == "no_change":
        free_txt = ", ".join(f"{n} {x / MiB:.0f} MiB" for n, x in zip(names, res.projected_free))
        return out.plan, info, [f"llama-server's --fit (on by default, {FIT_DEFAULT_SRC}) changes nothing: every device "
                            f"keeps at least its {margin} MiB margin free ({free_txt} projected free; common/fit.cpp:"
                            f"332-371); {assumption}"], None
    if res.status == "aborted":
        return out.plan, info, [f"llama-server's --fit finds a device short of its {margin} MiB margin but gives up: "
                                f"{ctx_note}{res.reason}; llama-server then loads with the parameters as given"
                                f"{' and the lowered context' if ctx_note else ''} (fit.cpp:894-896)"], None
    p = out.plan
    n_all = meta.n_layer_all
    hp = out.hp_ngl
    per_dev = []
    for n, g, dl in zip(names, out.gpu_ids, res.layers):
        layers = sum(1 for d in p.layer_devices if d == g)
        per_dev.append(f"{n}: {layers} of {n_all} layers" + (" + the output layer" if p.output_device == g else ""))
    ovr_layers = sorted({il for pat, _ in res.overrides
                         if (m := re.match(r"blk\\\.(\d+)", pat)) and (il := int(m.group(1))) < n_all})
    partial = [dl for dl in res.layers if dl.n_part]
    moe_txt = ""
    if meta.n_expert and ovr_layers:
        first = [(pat, d) for pat, d in res.overrides if not pat.endswith("_(ch|)exps")]
        moe_txt = (f"; the routed experts of layers {ovr_layers[0]}-{ovr_layers[-1]} ({len(ovr_layers)} layers) stay "
                   "in CPU memory (their attention and the other layers' experts on the GPU)")
        if first:
            kind = next(dl.overflow_type for dl in partial)
            moe_txt += (f"; layer {ovr_layers[0]} keeps only {'attention' if kind == 'ATTN' else 'attention + ffn_up' if kind == 'UP' else 'attention + ffn_up + ffn_gate'}"
                        " on the GPU (fit.cpp:810-860)")
    host = host_bytes(meta, p)
    cpu_layers = sum(1 for d in p.layer_devices if d == CPU)
    argv = argv_equivalent(res, base.device)
    info |= {"n_gpu_layers": res.n_gpu_layers, "n_gpu_layers_of": hp + 1, "tensor_split": res.tensor_split,
             "tensor_overrides": [{"pattern": pat, "buffer": _buft_name(base.device, d)} for pat, d in res.overrides],
             "layers_per_device": {n: {"n_layer": dl.n_layer, "n_part": dl.n_part, "overflow_type": dl.overflow_type}
                                   for n, dl in zip(names, res.layers)},
             "used_mib": [round(x / MiB, 2) for x in res.mem], "measurements": res.measurements,
             "equivalent_argv": ["--fit", "off", *argv],
             "host_memory_gib": {k: round(v / 2**30, 2) for k, v in host.items()},
             "moe_surplus_mib": None if res.moe_surplus is None else round(res.moe_surplus / MiB, 2)}
    notes = [
        f"llama-server's --fit (on by default, {FIT_DEFAULT_SRC}) moves what does not fit to the CPU: with every layer "
        f"on the GPU a device would keep less than its {margin} MiB margin free "
        f"({', '.join(f'{n} {x / MiB:.0f} MiB' for n, x in zip(names, res.projected_free))} projected free, "
        f"common/fit.cpp:332-371), {ctx_note}-ngl and -ts are not given, so it fills layers back to front "
        f"(common/fit.cpp:488-733{'; MoE: experts first, 616-645 and 735-866' if meta.n_expert else ''}) and keeps "
        f"-ngl {res.n_gpu_layers} of {hp + 1} units: {'; '.join(per_dev)}"
        + (f"; {cpu_layers} layers in CPU memory" if cpu_layers else "") + moe_txt
        + f". The same with --fit off: {' '.join(argv)}" + (f" -c {res.n_ctx}" if res.n_ctx is not None else ""),
        (f"the CPU part, {_gib(host['total'])} (weights {_gib(host['weights'])}, KV cache {_gib(host['kv'])}, "
         f"compute ~{_gib(host['compute'])}, logits {_gib(host['output'])}), comes from the same "
         f"{_gib(unified_ram or 0)} of unified memory as the Metal buffers: on a Mac --fit moves layers from the "
         "GPU's cores to the CPU's without freeing memory (the CPU device's memory is the whole RAM, ggml-cpu.cpp:"
         "365-382, and fit compares it only on a build without GPUs, fit.cpp:317-327); the verdict checks the whole "
         "against the Mac's memory"
         if unified_ram is not None else
         f"system RAM must hold the CPU part: {_gib(host['total'])} (weights {_gib(host['weights'])}, KV cache "
         f"{_gib(host['kv'])}, compute ~{_gib(host['compute'])}, logits {_gib(host['output'])}); the machine's RAM is "
         "not known here") + _mapped_range_note(p, host["weights"]),
        f"--fit's choice is computed from this plan's buffers in place of llama.cpp's own no-alloc measurement "
        f"(fit.cpp:28-145): {assumption}; the compute-buffer estimate leaves out the copies of CPU weights that op "
        "offload makes on the GPU ("
        + ("ggml-metal.cpp:774-780" if base.device == "Metal" else "ggml-cuda.cu:5636-5655")
        + "), so llama.cpp may keep one layer fewer",
    ]
    if (cpu_layers or res.overrides) and unified_ram is None:
        # the machine's RAM is not an input: what the start needs from it is the condition (a Mac's is: the runtime
        # checks the whole unified memory instead)
        what = ([f"{cpu_layers} of {n_all} layers"] if cpu_layers else []) + (
            [f"the routed experts of {len(ovr_layers)} layers"] if moe_txt else [])
        ram = (f"the machine's free system RAM holds the {_gib(host['total'])} --fit leaves in CPU memory "
               f"({' and '.join(what) or 'tensors moved by -ot'}); weights beyond it are paged in from the mmap'd "
               "file on every token")
        condition = f"{condition}; and {ram}" if condition else ram
    return p, info, notes, condition
