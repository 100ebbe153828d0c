"""GPU catalog: the devices the calculator and the compatibility checks know, plus custom devices.

The data lives in ``calculator/data/gpus.json`` (one row per device, each figure with its source).
``memory_gib`` is what the driver reports to torch, which is what vLLM multiplies by
``--gpu-memory-utilization`` (``vllm/v1/worker/utils.py`` in 0.32: ``requested_memory =
ceil(total_device_memory * gpu_memory_utilization)``). For Apple Silicon rows it is the unified memory of
the machine; what Metal lets a process keep resident is :func:`metal_working_set_bytes`.

Lookup (:func:`get_gpu`) takes, in this order:

1. a ``custom:`` string (see :func:`parse_custom_gpu`), e.g. ``custom:24GiB`` or ``custom:22.5GiB:sm89:bw1008``;
2. a name or alias of one row (``NVIDIA GeForce RTX 4090``, ``RTX 4090``, ``4090``); case, spaces and
   punctuation are ignored;
3. an *ambiguous* key from the catalog's ``ambiguous`` table, which either resolves to a documented
   choice (``A100`` is the A100-SXM4-80GB, ``H100`` the SXM5 80 GB HBM3, ``V100`` the 32 GB SXM2,
   ``NVIDIA GeForce RTX 3060`` the 12 GB card because torch prints the same name for the 8 GB one...) or
   is refused with the candidates listed (``RTX 4060 Ti``: 8 or 16 GB; ``Apple M2 Max``: 32, 64 or 96 GB;
   ``AMD Instinct MI250X / MI250``: the name ROCm prints for both; ``GH200``: 96 GB HBM3 or 144 GB HBM3e).

Anything else raises ``EngineInputError("gpu", ...)`` naming the five closest known names.
"""
from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .errors import EngineInputError

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "gpus.json"

Kind = Literal["datacenter", "workstation", "consumer", "apple", "cpu", "custom"]
KINDS: tuple[str, ...] = ("datacenter", "workstation", "consumer", "apple", "cpu", "custom")
VENDORS: tuple[str, ...] = ("nvidia", "amd", "intel", "apple", "cpu", "unknown")
CUSTOM_PREFIX = "custom:"
MIB = 2**20
GIB = 2**30


class GPU(BaseModel):
    """One device. Units: GiB (2**30 B) for memory, GB/s (10**9 B/s) for bandwidth, dense TFLOP/s.

    ``kind`` groups a picker: ``datacenter`` | ``workstation`` | ``consumer`` | ``apple`` | ``cpu`` |
    ``custom`` (a :func:`custom_gpu`, never a catalog row). ``vendor``: ``nvidia`` | ``amd`` | ``intel`` |
    ``apple`` | ``cpu`` | ``unknown`` (custom only). ``compute_capability`` is ``"8.9"`` for NVIDIA, the gfx
    target (``gfx942``) for AMD, the Metal GPU family (``apple9``) for Apple, ``None`` where unknown.
    ``bandwidth_gbps`` / ``tflops_bf16`` are ``None`` only for a custom GPU that did not give them; the
    speed model then refuses to run (it never guesses them). For Apple rows ``metal_working_set_gib`` is
    Metal's default ``recommendedMaxWorkingSetSize`` with its source; it is ``None`` elsewhere.
    ``board_memory_gb`` is the memory as the vendor sells it (the "80GB" of an H100, the unified memory of
    a Mac); the driver reports less (``memory_gib``). ``None`` for the CPU and custom GPUs.
    ``sm_count`` is the number of streaming multiprocessors of an NVIDIA GPU (``multiProcessorCount``), with
    ``sm_source``; ``None`` where no source was found (and for other vendors). NVIDIA rows carry ``tops_int8`` (dense
    INT8 TOPS of the tensor cores, or of dp4a before Turing: the rate llama.cpp's quantized prefill runs at) and
    ``tflops_fp16_acc16`` (FP16 tensor with FP16 accumulate), each with its source; a figure derived by a rule says
    so in its source.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    aliases: tuple[str, ...] = ()
    vendor: str
    kind: Kind
    architecture: str
    compute_capability: str | None
    memory_gib: float
    memory_source: str
    bandwidth_gbps: float | None
    tflops_bf16: float | None
    tflops_fp8: float | None
    spec_source: str
    # dense FP4 (NVFP4 W4A4) TFLOP/s where the datasheet gives it (Blackwell); None: not in the catalog
    tflops_fp4: float | None = None
    fp4_source: str | None = None
    # dense INT8 TOPS of the unit llama.cpp's quantized matmuls (MMQ) run on: INT8 tensor-core MMA from Turing (7.5),
    # dp4a on the CUDA cores on Pascal / Volta (calculator/runtimes/llamacpp/cuda_matmul.py); None: not in the catalog
    tops_int8: float | None = None
    int8_source: str | None = None
    # dense FP16 tensor TFLOP/s with FP16 accumulate (cuBLAS CUBLAS_COMPUTE_16F, llama.cpp's F16 GEMMs); GeForce boards
    # run FP32 accumulate (``tflops_bf16``) at half this rate, datacenter and workstation boards at the same
    tflops_fp16_acc16: float | None = None
    fp16_acc16_source: str | None = None
    board_memory_gb: float | None = None
    metal_working_set_gib: float | None = None
    metal_working_set_source: str | None = None
    sm_count: int | None = None
    sm_source: str | None = None

    @property
    def memory_bytes(self) -> int:
        return int(round(self.memory_gib * GIB))

    @property
    def is_cpu(self) -> bool:
        return self.vendor == "cpu"

    @property
    def is_custom(self) -> bool:
        return self.kind == "custom"

    @property
    def capability_tuple(self) -> tuple[int, int] | None:
        """``(major, minor)`` for NVIDIA parts, ``None`` for AMD gfx targets, Apple and the CPU."""
        if not self.compute_capability or not re.fullmatch(r"\d+\.\d+", self.compute_capability):
            return None
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)


# Maximum number of resident threads per SM by compute capability: CUDA C++ Programming Guide, "Technical
# Specifications per Compute Capability" (maxThreadsPerMultiProcessor). Capabilities not listed: None (not guessed).
MAX_THREADS_PER_SM: dict[str, int] = {
    "6.0": 2048, "6.1": 2048, "6.2": 2048, "7.0": 2048, "7.2": 2048, "7.5": 1024, "8.0": 2048, "8.6": 1536,
    "8.7": 2048, "8.9": 1536, "9.0": 2048, "10.0": 2048, "10.3": 2048, "12.0": 1536, "12.1": 1536,
}


def resident_threads(gpu: GPU) -> int | None:
    """Threads an NVIDIA GPU can hold resident at once: ``sm_count`` x max resident threads per SM of its compute
    capability (:data:`MAX_THREADS_PER_SM`). None when either is unknown (non-NVIDIA, no sourced SM count).

    The CUDA driver reserves each context's local memory for exactly this many threads (local memory per thread x
    max threads per SM x SMs; NVIDIA's answer in https://forums.developer.nvidia.com/t/local-memory-management/289339/9,
    and ``CU_CTX_LMEM_RESIZE_TO_MAX`` in the driver API's cuCtxCreate).
    """
    if gpu.vendor != "nvidia" or not gpu.sm_count or gpu.compute_capability not in MAX_THREADS_PER_SM:
        return None
    return gpu.sm_count * MAX_THREADS_PER_SM[gpu.compute_capability]


class Ambiguous(BaseModel):
    """A name that fits several rows: ``choice`` is the documented pick (``None``: refused)."""

    model_config = ConfigDict(frozen=True)

    key: str
    choice: str | None
    candidates: tuple[str, ...]
    why: str


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@lru_cache(maxsize=1)
def _catalog() -> tuple[tuple[GPU, ...], tuple[Ambiguous, ...]]:
    data = json.loads(DATA_FILE.read_text())
    gpus = tuple(GPU(**{**r, "aliases": tuple(r.get("aliases", ()))}) for r in data["gpus"])
    ambiguous = tuple(Ambiguous(**{**a, "candidates": tuple(a["candidates"])}) for a in data.get("ambiguous", ()))
    return gpus, ambiguous


def all_gpus() -> tuple[GPU, ...]:
    """Every catalog row, in file order (the compat matrix picks the first row per capability)."""
    return _catalog()[0]


def ambiguous_names() -> tuple[Ambiguous, ...]:
    """The catalog's ambiguous keys with their documented choice or candidates."""
    return _catalog()[1]


def gpus_by_kind() -> dict[str, list[GPU]]:
    """Catalog rows grouped by ``kind`` in :data:`KINDS` order (a picker's ``<optgroup>``s), file order
    inside each group. Kinds without rows are left out."""
    groups: dict[str, list[GPU]] = {k: [] for k in KINDS}
    for gpu in all_gpus():
        groups[gpu.kind].append(gpu)
    return {k: v for k, v in groups.items() if v}


@lru_cache(maxsize=1)
def _index() -> tuple[dict[str, GPU], dict[str, Ambiguous]]:
    """Normalised name/alias -> row, and normalised ambiguous key -> entry.

    Raises:
        ValueError: the catalog is inconsistent (one key on two rows, an ambiguous key that is also a row
            key but resolves elsewhere, a refused key that a row also answers to, an unknown candidate).
    """
    index: dict[str, GPU] = {}
    for gpu in all_gpus():
        for key in {_norm(k) for k in (gpu.name, *gpu.aliases)}:
            if key in index:
                raise ValueError(f"gpus.json: {key!r} names both {index[key].name!r} and {gpu.name!r}")
            index[key] = gpu
    names = {g.name for g in all_gpus()}
    amb: dict[str, Ambiguous] = {}
    for entry in ambiguous_names():
        key = _norm(entry.key)
        unknown = [c for c in (*entry.candidates, entry.choice or entry.candidates[0]) if c not in names]
        if unknown or len(entry.candidates) < 2 or key in amb:
            raise ValueError(f"gpus.json ambiguous {entry.key!r}: unknown candidates {unknown} or duplicate")
        row = index.get(key)
        if entry.choice is None and row is not None:
            raise ValueError(f"gpus.json: refused {entry.key!r} is also a key of {row.name!r}")
        if entry.choice is not None and row is not None and row.name != entry.choice:
            raise ValueError(f"gpus.json: {entry.key!r} resolves to {row.name!r}, documented {entry.choice!r}")
        if entry.choice is not None and entry.choice not in entry.candidates:
            raise ValueError(f"gpus.json: choice of {entry.key!r} is not among its candidates")
        amb[key] = entry
    return index, amb


def get_gpu(name: str) -> GPU:
    """Look a device up by the name torch / nvidia-smi / rocm-smi report (``NVIDIA H100 80GB HBM3``,
    ``AMD Instinct MI300X``), an alias (``H100``, ``RTX 4090``, ``4090``, ``M2 Max 96GB``) or a custom
    string (``custom:24GiB:sm89``, see :func:`parse_custom_gpu`). Case, spaces and punctuation are ignored.

    Ambiguous names resolve to the choice documented in the catalog's ``ambiguous`` table (module
    docstring) or are refused with their candidates.

    Raises:
        EngineInputError("gpu", ...): an ambiguous name without a documented choice (the message lists
            the candidates), a malformed custom string, or an unknown name (the message lists the five
            closest known names and the custom form).
    """
    text = (name or "").strip()
    if text.lower().startswith(CUSTOM_PREFIX):
        return parse_custom_gpu(text)
    index, amb = _index()
    key = _norm(text)
    gpu = index.get(key)
    if gpu is not None:
        return gpu
    gpu = _loose_match(key, index)
    if gpu is not None:
        return gpu
    entry = amb.get(key)
    if entry is not None:
        if entry.choice is not None:
            return index[_norm(entry.choice)]
        raise EngineInputError(
            "gpu", f"{name!r} is ambiguous ({entry.why}); pick one of: {', '.join(entry.candidates)}")
    close = closest_gpu_names(text, cutoff=CLOSE_ENOUGH)
    hint = (f"closest known: {', '.join(close)}" if close else
            "no catalog name is close to it (the page's GPU picker lists them all)")
    raise EngineInputError(
        "gpu", f"unknown GPU {name!r}; {hint}; "
               f"for another device give its memory as {CUSTOM_PREFIX}<GiB>GiB, e.g. custom:24GiB:sm89")


def documented_choice(name: str) -> Ambiguous | None:
    """The catalog's ``ambiguous`` entry when ``name`` is a key that fits several rows and resolves to the documented
    choice (``A100``: the 80 GB SXM4 of four A100s; ``H100``: the SXM5 of three), so an answer can say which card it
    planned for; ``None`` for a name of one row, a refused one (no choice: :func:`get_gpu` raises) or a custom GPU.
    A vendor prefix is ignored, as :func:`get_gpu` ignores it (``NVIDIA A100``)."""
    text = (name or "").strip()
    if text.lower().startswith(CUSTOM_PREFIX):
        return None
    _, amb = _index()
    key = _norm(text)
    entry = amb.get(key) or amb.get(re.sub(r"^(nvidia|amd|geforce|radeon|intel)+", "", key))
    return entry if entry is not None and entry.choice is not None else None


def _loose_match(key: str, index: dict[str, GPU]) -> GPU | None:
    """The names people write around a catalog name: a vendor / brand prefix (``NVIDIA H100 SXM``,
    ``NVIDIA GeForce RTX 4090``) and a trailing board size that agrees with the row (``RTX 4090 24GB``,
    ``A100 SXM 80GB``). A size that disagrees with the row is not dropped."""
    stripped = re.sub(r"^(nvidia|amd|geforce|radeon|intel)+", "", key)
    gpu = index.get(stripped)
    if gpu is not None:
        return gpu
    if stripped.endswith("gb"):
        for digits in (3, 2):
            size, cand = stripped[-2 - digits:-2], stripped[:-2 - digits]
            gpu = index.get(cand) if size.isdigit() and cand else None
            if gpu is not None and (gpu.board_memory_gb is None or int(size) == round(gpu.board_memory_gb)):
                return gpu
    return None


CLOSE_ENOUGH = 0.5  # difflib ratio below which a catalog name is not offered as "closest" (it would look random)


def closest_gpu_names(name: str, n: int = 5, cutoff: float = 0.0) -> list[str]:
    """The ``n`` catalog names whose name or alias is closest to ``name`` (``difflib`` ratio on the
    normalised strings, at least ``cutoff``), best first, each row once."""
    index, _ = _index()
    query = _norm(name or "")
    scored = sorted(((difflib.SequenceMatcher(None, query, k).ratio(), k) for k in index), key=lambda t: -t[0])
    out: list[str] = []
    for ratio, k in scored:
        if ratio < cutoff:
            break
        if index[k].name not in out:
            out.append(index[k].name)
        if len(out) == n:
            break
    return out


# --------------------------------------------------------------------------------------------------------
# Custom GPUs
# --------------------------------------------------------------------------------------------------------
_NUM = r"(\d+(?:\.\d+)?)"


def _fmt(x: float) -> str:
    return f"{x:g}"


def custom_gpu(memory_gib: float, compute_capability: str | None = None, bandwidth_gbps: float | None = None,
               tflops_bf16: float | None = None, tflops_fp8: float | None = None,
               vendor: str | None = None, tops_int8: float | None = None) -> GPU:
    """A device that is not in the catalog, described by what the user knows.

    Args:
        memory_gib: total memory as the driver reports it (``torch.cuda.mem_get_info()[1] / 2**30``), in
            GiB; 0 < memory_gib <= 16384.
        compute_capability: ``"8.9"`` (NVIDIA, implies vendor ``nvidia``) or a gfx target ``"gfx942"``
            (implies ``amd``); ``None`` when unknown.
        bandwidth_gbps, tflops_bf16, tflops_fp8: GB/s and dense TFLOP/s; ``None`` when unknown (the speed
            estimate then refuses to run; memory estimates do not need them).
        tops_int8: dense INT8 TOPS (llama.cpp's quantized prefill on CUDA runs at it); ``None`` when unknown (that
            prefill is then not modelled).
        vendor: one of :data:`VENDORS`; default from the capability, else ``"unknown"`` (compatibility
            checks then say they have no platform for it).

    Returns:
        A ``GPU`` of kind ``custom`` whose ``name`` is the canonical custom string
        (``custom:24GiB:sm89:bw1008``), so the name round-trips through :func:`get_gpu` and permalinks.

    Raises:
        EngineInputError("gpu", ...): a value out of range or an unknown vendor / capability form.
    """
    if not (0 < memory_gib <= 16384):
        raise EngineInputError("gpu", f"custom GPU memory must be in (0, 16384] GiB, got {memory_gib:g}")
    for label, value in (("bandwidth", bandwidth_gbps), ("bf16 TFLOP/s", tflops_bf16), ("fp8 TFLOP/s", tflops_fp8),
                         ("int8 TOPS", tops_int8)):
        if value is not None and not (0 < value <= 1e6):
            raise EngineInputError("gpu", f"custom GPU {label} must be positive, got {value:g}")
    parts = [f"{_fmt(memory_gib)}GiB"]
    cap_vendor = None
    if compute_capability is not None:
        m = re.fullmatch(r"(\d{1,2})\.(\d)", compute_capability)
        if m:
            cap_vendor = "nvidia"
            parts.append(f"sm{m.group(1)}{m.group(2)}")
        elif re.fullmatch(r"gfx[0-9a-f]{3,4}", compute_capability):
            cap_vendor = "amd"
            parts.append(compute_capability)
        else:
            raise EngineInputError("gpu", f"custom GPU compute capability {compute_capability!r}: write 8.9 "
                                          "(NVIDIA) or a gfx target such as gfx942 (AMD)")
    vendor = vendor or cap_vendor or "unknown"
    if vendor not in VENDORS:
        raise EngineInputError("gpu", f"custom GPU vendor {vendor!r}: one of {', '.join(VENDORS)}")
    if cap_vendor and vendor != cap_vendor:
        raise EngineInputError("gpu", f"custom GPU: capability {compute_capability} is {cap_vendor}, not {vendor}")
    if vendor not in ("unknown", cap_vendor):
        parts.append(vendor)
    for prefix, value in (("bw", bandwidth_gbps), ("bf16", tflops_bf16), ("fp8", tflops_fp8), ("int8", tops_int8)):
        if value is not None:
            parts.append(f"{prefix}{_fmt(value)}")
    given = "user input (custom GPU)"
    return GPU(name=CUSTOM_PREFIX + ":".join(parts), vendor=vendor, kind="custom", architecture="custom",
               compute_capability=compute_capability, memory_gib=memory_gib, memory_source=given,
               bandwidth_gbps=bandwidth_gbps, tflops_bf16=tflops_bf16, tflops_fp8=tflops_fp8,
               spec_source=given if bandwidth_gbps or tflops_bf16 else "not given", tops_int8=tops_int8,
               int8_source=given if tops_int8 is not None else None)


def parse_custom_gpu(text: str) -> GPU:
    """Parse the URL/CLI form of :func:`custom_gpu`.

    Grammar (fields after the memory in any order, each at most once, case-insensitive)::

        custom:<memory>[:sm<MAJOR><MINOR> | :gfx<target>][:<vendor>][:bw<GB/s>][:bf16<TFLOP/s>][:fp8<TFLOP/s>]
               [:int8<TOPS>]

    ``<memory>`` is a number with ``GiB`` (2**30 B) or ``MiB`` (2**20 B): ``24GiB``, ``22.5GiB``,
    ``24564MiB``. ``GB`` is refused because it does not say which gigabyte is meant. ``sm89`` is compute
    capability 8.9 and ``sm120`` 12.0 (the last digit is the minor version, as in nvcc's ``sm_XY``).
    ``<vendor>`` is one of ``nvidia``, ``amd``, ``intel``, ``apple``, ``cpu``.

    Examples: ``custom:24GiB``, ``custom:22.5GiB:sm89:bw1008:bf16165:fp8330``, ``custom:64GiB:gfx90a``.

    Raises:
        EngineInputError("gpu", ...): the text does not follow the grammar; the message says which part.
    """
    body = text.strip()[len(CUSTOM_PREFIX):]
    fields = [f.strip() for f in body.split(":")]
    hint = "e.g. custom:24GiB or custom:22.5GiB:sm89:bw1008:bf16165"
    m = re.fullmatch(_NUM + r"\s*(gib|mib)", fields[0].lower()) if fields and fields[0] else None
    if not m:
        if re.fullmatch(_NUM + r"\s*(gb|g|mb)?", (fields[0] if fields else "").lower()):
            raise EngineInputError("gpu", f"custom GPU {text!r}: give the memory in GiB or MiB as the driver "
                                          f"reports it (GB is ambiguous), {hint}")
        if (fields[0] if fields else "").startswith("-"):  # custom:-5GiB
            raise EngineInputError("gpu", f"custom GPU {text!r}: the memory must be a positive number of GiB or MiB, "
                                          f"{hint}")
        raise EngineInputError("gpu", f"custom GPU {text!r}: the memory comes first, {hint}")
    memory_gib = float(m.group(1)) * (1 if m.group(2) == "gib" else MIB / GIB)
    kw: dict = {}
    for field in fields[1:]:
        f = field.lower()
        for pattern, name, conv in (
            (r"sm(\d{1,2})(\d)", "compute_capability", lambda g: f"{int(g[0])}.{g[1]}"),
            (r"(gfx[0-9a-f]{3,4})", "compute_capability", lambda g: g[0]),
            (r"bw" + _NUM, "bandwidth_gbps", lambda g: float(g[0])),
            (r"bf16" + _NUM, "tflops_bf16", lambda g: float(g[0])),
            (r"fp8" + _NUM, "tflops_fp8", lambda g: float(g[0])),
            (r"int8" + _NUM, "tops_int8", lambda g: float(g[0])),
            (r"(nvidia|amd|intel|apple|cpu)", "vendor", lambda g: g[0]),
        ):
            mm = re.fullmatch(pattern, f)
            if mm:
                if name in kw:
                    raise EngineInputError("gpu", f"custom GPU {text!r}: {name} given twice")
                kw[name] = conv(mm.groups())
                break
        else:
            raise EngineInputError("gpu", f"custom GPU {text!r}: cannot read {field!r}; fields are "
                                          f"sm<XY>, gfx<target>, a vendor, bw<GB/s>, bf16<TFLOP/s>, fp8<TFLOP/s>, "
                                          f"int8<TOPS>; {hint}")
    return custom_gpu(memory_gib, **kw)


# --------------------------------------------------------------------------------------------------------
# Apple Silicon: what Metal lets a process keep resident
# --------------------------------------------------------------------------------------------------------
def metal_working_set_bytes(gpu: GPU | str, wired_limit_mb: int | None = None) -> int:
    """Bytes Metal reports as ``MTLDevice.recommendedMaxWorkingSetSize`` on an Apple Silicon Mac: the
    budget llama.cpp's Metal backend gives as the device memory (a 2026 llama-server log prints
    ``recommendedMaxWorkingSetSize = 12713.12 MB`` and then ``using device MTL0 (Apple M4) - 12123 MiB
    free``, i.e. the same 12124 MiB less what is allocated; ../shared/cases lcpp-019) and Ollama shows as
    the Metal device's ``total`` (lcpp-026: ``total="5.3 GiB"`` on an 8 GB M2). Units of the log line:
    ``ggml/src/ggml-metal/ggml-metal-device.m`` ``ggml_metal_device_init`` prints
    ``max_working_set_size / 1e6`` ("MB" = 10**6 B); 2023 builds (``ggml-metal.m`` ``ggml_metal_init``)
    printed ``recommendedMaxWorkingSetSize / 1024.0 / 1024.0`` (2**20 B).

    Default (``wired_limit_mb`` ``None`` or 0, i.e. ``sysctl iogpu.wired_limit_mb`` unset): the row's
    ``metal_working_set_gib``. Public logs show 2/3 of unified memory on machines of 32 GiB or less
    and 3/4 above (8 GiB M2 -> 5726.63 MB, Ollama 0.21 log; 16 GiB -> 10922.67 MiB, llama-cpp-python#687;
    32 GiB M2 Max -> 21845.34 MiB, ollama#434; 36 GiB M4 Max -> 28991.03 MB; 64 GiB M2 Max -> 51539.61
    MB; 96 GiB M2 Max -> 73728.00 MiB, llama.cpp#3213; 128 GiB M3 Max -> 103079.22 MB). Newer macOS
    releases report more on some machines (16 GiB M3/M4 -> 11.84 GiB, llmfit#754 and a 2026
    llama-server log; 128 GiB M5 Max on macOS 26 -> 107.52 GiB, antirez/ds4#893); the rows keep the
    documented rule and say so in ``metal_working_set_source``.

    With ``sudo sysctl iogpu.wired_limit_mb=N`` (N > 0) Metal reports exactly N MiB: llmfit#754 measured
    12000 and 14000 MiB on a 16 GB M3 and got those values; ds4#893 set 114688 and read 112.00 GiB.

    Args:
        gpu: an Apple catalog row (or its name / alias).
        wired_limit_mb: the ``iogpu.wired_limit_mb`` sysctl value in MiB; ``None`` or 0 = macOS default.

    Returns:
        The working-set budget in bytes.

    Raises:
        EngineInputError("gpu", ...): the device is not an Apple Silicon row.
        EngineInputError("wired_limit_mb", ...): negative, or above the machine's unified memory.
    """
    row = get_gpu(gpu) if isinstance(gpu, str) else gpu
    if row.vendor != "apple" or row.metal_working_set_gib is None:
        raise EngineInputError("gpu", f"{row.name} is not an Apple Silicon Mac; Metal's working set applies "
                                      "only to Apple rows")
    if wired_limit_mb is None or wired_limit_mb == 0:
        return int(round(row.metal_working_set_gib * GIB))
    if wired_limit_mb < 0:
        raise EngineInputError("wired_limit_mb", f"iogpu.wired_limit_mb must be 0 (default) or positive MiB, "
                                                 f"got {wired_limit_mb}")
    limit = int(wired_limit_mb) * MIB
    if limit > row.memory_bytes:
        raise EngineInputError("wired_limit_mb", f"iogpu.wired_limit_mb={wired_limit_mb} MiB is more than the "
                                                 f"{row.memory_gib:g} GiB of unified memory of {row.name}")
    return limit
