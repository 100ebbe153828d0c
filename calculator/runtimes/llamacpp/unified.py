"""Apple Silicon: llama.cpp's Metal device and its CPU device share one pool of unified memory.

What llama.cpp itself does on a Mac (llama-cpp-python 0.3.36, ``vendor/llama.cpp``):

* the Metal device reports ``recommendedMaxWorkingSetSize`` as its total and that less ``currentAllocatedSize`` as
  its free memory (ggml/src/ggml-metal/ggml-metal-device.m:1501-1511 ``ggml_metal_device_get_memory``, called by
  ggml-metal.cpp:676-680 ``ggml_backend_metal_device_get_memory``); it is a ``GPU`` device (ggml-metal.cpp:682-686),
  not an ``IGPU``; Apple's GPUs have unified memory, so its buffers are shared (CPU-visible) buffers
  (ggml-metal-device.m:1137 ``has_unified_memory``, :1269 ``use_shared_buffers = has_unified_memory``);
* the CPU device reports the whole physical RAM as total *and* free (ggml/src/ggml-cpu/ggml-cpu.cpp:365-382:
  ``sysconf(_SC_PHYS_PAGES) * _SC_PAGE_SIZE``; "free system memory is ill-defined ... assume that all of it is
  free");
* ``--fit`` (common/fit.cpp) compares the host's memory with the plan only on a build without GPU devices
  (``nd == 0``, fit.cpp:317-327, and the abort at :459-461); with the Metal device it fits the layers to the Metal
  device's free memory less the ``--fit-target`` margin (fit.cpp:332-371, :647-652) and sends the rest to
  ``ggml_backend_cpu_buffer_type()`` (fit.cpp:576-577, :654-658): layers beyond ``-ngl`` live in the CPU's buffers
  (``CPU_Mapped`` with mmap: views of the mmap'd GGUF file; src/llama-model.cpp:1589 ``i_gpu_start``). Nothing in
  llama.cpp checks that those CPU buffers and the Metal buffers together fit the Mac's RAM: they come from the same
  memory, so on a Mac ``--fit`` does not free memory, it only moves layers from the GPU's cores to the CPU's.
* the Metal backend does not compute on CPU buffers (ggml-metal.cpp:753-761 ``supports_buft``: only its own buffer
  types), so the CPU's layers are computed by the CPU cores during decode, reading the same LPDDR at the Mac's
  memory bandwidth; in a batch of at least 32 tokens the Metal device takes their matrix multiplications
  (ggml-metal.cpp:774-780 ``offload_op``; ``GGML_OP_OFFLOAD_MIN_BATCH`` default 32, ggml-metal-device.m:1285) and
  the scheduler copies those weights into a Metal buffer, a copy within the same memory.

What the verdict checks (:func:`unified_memory`): everything llama.cpp allocates (the Metal device's model, KV and
compute buffers, and the CPU's weights, KV, compute and logits) must fit what a model can use of the Mac's memory,

    usable = max(Metal working set, unified memory - 4 GiB)

* the Metal working set is what macOS lets the GPU keep resident ("an approximation of how much memory ... this
  GPU device can allocate without affecting its runtime performance", Apple's documentation of
  ``MTLDevice.recommendedMaxWorkingSetSize``); llama.cpp fits against it, and the two 8 GB M2 logs of
  ../shared/cases (lcpp-026, lcpp-027) load their whole model within it;
* a model that spills past it to the CPU has the rest of the RAM, less what macOS and the other apps keep:
  4096 MiB, the floor ggml-org's own macOS app keeps out of a model's reach ("Physical RAM (in MB) kept out of a
  model's reach for macOS and other apps", ggml-org/LlamaBarn Llama/Models/Model+Compatibility.swift:17-23
  ``osFloorMb = 4096`` at e09c838a1; its :49-52: "taking a model past ~4 GB on an 8 GB machine doesn't just slow
  it down, it wedges it"). LlamaBarn itself also keeps every model inside the working set less --fit's 1 GiB
  margin (its budget is ``min(working set - 1024 MiB, RAM - 4096 MiB)``, :29-59); llama-server does not: its
  ``--fit`` spills what does not fit the working set to the CPU, and this check answers whether that still fits.

So macOS keeps ``min(unified memory - working set, 4 GiB)``: 2.67 GiB on an 8 GB Mac (the working set binds), 4 GiB
from 16 GB up. Beyond ``usable`` the verdict is ``does_not_fit``. llama-server itself would still start (the CPU's
weights are mmap'd and nothing checks the total), but macOS then keeps paging the weights in from the SSD as each
token reads them. The compute buffers are estimates with a stated error: a total whose error straddles ``usable``
is ``depends``.

Units: bytes; ``GiB`` = 2^30 B. Pure functions, no Django.
"""
from __future__ import annotations

from .memory import CPU, SRC, LlamaCppPlan, tensor_layer, weight_device

GiB = 2**30
MiB = 2**20

#: What macOS and the other apps keep out of a model's reach (bytes): ggml-org/LlamaBarn's ``osFloorMb``.
OS_FLOOR_BYTES = 4096 * MiB
OS_FLOOR_SRC = ("ggml-org/LlamaBarn Llama/Models/Model+Compatibility.swift:17-23 (osFloorMb = 4096: \"Physical RAM "
                "kept out of a model's reach for macOS and other apps\") and :29-59 (its own budget, min(working "
                "set - 1024 MiB, RAM - osFloor)), commit e09c838a1 (ggml-org's macOS app for llama.cpp)")
#: The sources of the whole-Mac check, in llama.cpp's own code.
UNIFIED_SRC = (SRC + "ggml/src/ggml-metal/ggml-metal-device.m:1501-1511 (Metal: total = recommendedMaxWorkingSetSize), "
               "ggml/src/ggml-cpu/ggml-cpu.cpp:365-382 (CPU: the whole physical RAM), common/fit.cpp:317-327 (the host "
               "is compared only without GPU devices), :576-577 and :654-658 (what does not fit goes to the CPU "
               "buffer type)")


def is_unified(gpu, device: str) -> bool:
    """Whether the plan's device shares its memory with the CPU: llama.cpp's Metal build on an Apple Silicon row
    of the catalog (its ``metal_working_set_gib`` set)."""
    return device == "Metal" and getattr(gpu, "vendor", None) == "apple" and \
        getattr(gpu, "metal_working_set_gib", None) is not None


def usable_bytes(ram: int, working_set: int) -> int:
    """What a model may use of a Mac's ``ram`` bytes of unified memory: ``max(working_set, ram - 4 GiB)`` (see the
    module docstring for both sources)."""
    return max(working_set, ram - OS_FLOOR_BYTES)


def _gib(b: float) -> str:
    return f"{b / GiB:.2f} GiB"


def resident_weights(meta, p: LlamaCppPlan) -> int:
    """Bytes of the model's weights resident in the Mac's memory. With mmap (``MTL0_Mapped`` / ``CPU_Mapped``) both
    devices' buffers are views of the one mmap'd file: the Metal buffer wraps the file range from its first to the
    end of its last tensor (src/llama-model.cpp:1855-1871, llama-model-loader.cpp:1449-1464; ggml-metal.cpp:739-745
    ``buffer_from_host_ptr``), which Metal keeps resident whole, and the CPU reads the pages of its own tensors, so a
    page counts once: the Metal range plus the CPU's tensors outside it, per file. Without mmap (``MTL0`` and
    ``CPU`` allocations) the model buffers' sizes add up."""
    import re

    bufs = {b.buft: b.bytes or 0 for b in p.buffers if b.kind == "model"}
    if "MTL0_Mapped" not in bufs and "CPU_Mapped" not in bufs:
        return sum(bufs.values())
    overrides = [(re.compile(pat), d) for pat, d in p.tensor_overrides]
    n_all = meta.n_layer_all
    metal: dict[int, list] = {}
    cpu: list = []
    for t in meta.tensors:
        dev = weight_device(t.name, tensor_layer(t.name, n_all, meta), p.layer_devices, p.output_device, overrides)
        (cpu.append(t) if dev == CPU else metal.setdefault(t.file_index, []).append(t))
    tied = meta.tensor("output.weight") is None and meta.tensor("token_embd.weight") is not None
    if tied and p.output_device != CPU:  # the output layer's duplicate of token_embd (llama-model-loader.cpp:1162-1168)
        e = meta.tensor("token_embd.weight")
        metal.setdefault(e.file_index, []).append(e)
    ranges = {i: (min(t.offset for t in ts), max(t.offset + t.n_bytes for t in ts)) for i, ts in metal.items()}
    total = sum(hi - lo for lo, hi in ranges.values())
    for t in cpu:
        lo, hi = ranges.get(t.file_index, (0, 0))
        total += t.n_bytes - max(0, min(hi, t.offset + t.n_bytes) - max(lo, t.offset))
    return total


#: Why the server starts all the same (llama-server: nothing in llama.cpp compares the total with the Mac's RAM).
LLAMA_SERVER_STARTS = ("llama-server would still start (--fit fits only the Metal device, common/fit.cpp:332-371, and "
                       "the CPU's weights are mmap'd)")


def unified_memory(meta, p: LlamaCppPlan, *, ram: int, working_set: int, device_bytes: int, extra_bytes: int = 0,
                   extra_error: int = 0, starts: str = LLAMA_SERVER_STARTS) -> dict:
    """The whole Mac's share of a plan against :func:`usable_bytes`: the weights resident once
    (:func:`resident_weights`), every KV cache, every compute buffer (estimates: their stated errors add up) and
    the logits buffer, plus ``extra_bytes`` +- ``extra_error`` (a draft model's whole share). ``device_bytes`` is
    what the Metal device itself holds (model, output and KV buffers, a draft's included, and its compute buffer):
    the answer's ``metal``; ``cpu`` is what the CPU adds beyond it. ``starts``: the sentence saying why the server
    starts all the same (:data:`LLAMA_SERVER_STARTS`; Ollama's scheduler has its own).

    Returns a dict: ``ram``, ``working_set``, ``os_floor``, ``usable`` (and ``usable_rule``), ``parts`` (weights,
    kv, compute, output, draft), ``metal``, ``cpu``, ``total``, ``error`` (bytes), ``status`` (``fits`` |
    ``does_not_fit`` | ``within_error`` | ``not_modelled``), ``text`` (the reason or condition in words) and
    ``source``."""
    usable = usable_bytes(ram, working_set)
    floor_binds = ram - OS_FLOOR_BYTES > working_set
    out = {"ram": ram, "working_set": working_set, "os_floor": OS_FLOOR_BYTES, "usable": usable,
           "usable_rule": ("the memory less 4 GiB for macOS and other apps" if floor_binds else
                           "Metal's working set: macOS keeps the rest, less than 4 GiB"),
           "source": f"{UNIFIED_SRC}; {OS_FLOOR_SRC}"}
    computes = [b for b in p.buffers if b.kind == "compute"]
    if any(b.bytes is None for b in computes):
        out |= {"parts": None, "metal": None, "cpu": None, "total": None, "error": None, "status": "not_modelled",
                "text": "a compute buffer is not modelled, so the whole Mac's share is not either"}
        return out
    parts = {"weights": resident_weights(meta, p), "kv": p.kv_bytes, "compute": sum(b.bytes for b in computes),
             "output": sum(b.bytes or 0 for b in p.buffers if b.kind == "output"), "draft": extra_bytes}
    total = sum(parts.values())
    err = sum(b.error_bytes or 0 for b in computes) + extra_error
    out |= {"parts": parts, "metal": device_bytes, "cpu": max(0, total - device_bytes), "total": total, "error": err}
    n_cpu = sum(1 for d in p.layer_devices if d < 0)
    where = (f"weights {_gib(parts['weights'])}, KV cache {_gib(parts['kv'])}, compute ~{_gib(parts['compute'])}"
             + (f", draft model {_gib(extra_bytes)}" if extra_bytes else "")
             + (f"; {n_cpu} of {meta.n_layer_all} layers in CPU memory" if n_cpu else "")
             + (f"; +- {err / MiB:.0f} MiB of compute estimate" if err else ""))
    mac = (f"the {_gib(usable)} a model can use of this Mac's {_gib(ram)} of unified memory, which the CPU and the GPU "
           f"share ({out['usable_rule']}; the larger of the working set, {_gib(working_set)}, and {_gib(ram)} - 4 GiB)")
    if total - err > ram:
        out["status"] = "does_not_fit"
        out["text"] = (f"llama.cpp would allocate {_gib(total)} in all ({where}), more than the whole {_gib(ram)} of "
                       f"this Mac's unified memory, which the CPU and the GPU share (a model can use {_gib(usable)} of "
                       f"it: {out['usable_rule']}). {starts} but macOS would page the weights in from the SSD as each "
                       "token reads them")
    elif total - err > usable:
        out["status"] = "does_not_fit"
        out["text"] = (f"llama.cpp would allocate {_gib(total)} in all ({where}), more than {mac}: it would leave "
                       f"macOS and the other apps {_gib(ram - total)} of the {_gib(ram - usable)} they keep. {starts} "
                       "and macOS would then compress and swap to make room")
    elif total + err > usable:
        out["status"] = "within_error"
        out["text"] = (f"the {_gib(total)} llama.cpp allocates in all ({where}) fit in {mac}: the remaining memory "
                       "lies within the estimate's stated error")
    else:
        out["status"] = "fits"
        out["text"] = f"llama.cpp allocates {_gib(total)} in all ({where}), within {mac}"
    return out
