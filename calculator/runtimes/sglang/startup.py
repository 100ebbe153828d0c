"""GPU memory SGLang does not see free before loading the weights (the start-up overhead), per rank.

SGLang sizes the KV pool from the free memory it measures when ``init_torch_distributed`` returns (the minimum over
ranks; ``Load weight begin. avail mem`` in the log, see :data:`calculator.runtimes.sglang.releases` ``pre_load``).
What is gone by then, from SGLang's source (file:line per release in ``data/startup_overhead.json``
``source_rules``):

1. the CUDA/HIP context and torch's first allocations, made by ``torch.cuda.set_device`` before
   ``init_torch_distributed`` measures ``before_avail_memory`` -- the **pre** part, ``total - T - D``;
2. what ``init_torch_distributed`` allocates -- the **dist** part ``D``, which SGLang itself logs as
   ``Init torch distributed ends. mem usage=D GB``: one NCCL/RCCL communicator per group with more than one rank
   (the TP group in plain TP; groups with one rank make none), and the custom all-reduce buffers (about 24 MiB per
   rank, 8 MiB ``_MAX_CAR_SIZE`` x 3; none for more than two PCIe GPUs).

SGLang's source fixes which communicators exist and its own buffers but neither the driver's context nor NCCL's
buffers (channel count and protocol buffers follow the topology and the NCCL version). So both parts come from public
logs (``data/startup_overhead.json`` ``logs``, each with its URL or library locator; none is a record of
``shared/cases/runtime_startup_logs.json``), taken as medians (one exception, the line of the first bullet):

- **pre**: the logs of the same GPU model if the table has one; else, for an NVIDIA GPU with a sourced SM count, a
  least-squares line through the NVIDIA logs against resident threads (SMs x max threads per SM: the CUDA context
  reserves local memory per resident thread, :func:`_context_line`); else all the logs of the vendor.
- **dist**: for one rank, the median of the vendor's one-rank logs (no communicator is made; what the init still
  allocates is small: 0.00 on NVIDIA, 0.15 on MI355X); for several ranks, the logs of the same vendor and link
  (PCIe, NVLink, xGMI): the same GPU and number of ranks if any, else the same number of ranks, else all of that link.

Each part comes with a spread: half the range of the wider group it was chosen from (all the vendor's logs for pre,
all the link's logs for dist; the line's largest residual), and the answer names the logs used.
Units: GiB (2**30 B), as SGLang's "GB". Raises :class:`~calculator.engine.errors.EngineInputError` (field ``gpu``)
when the table has no log of that vendor and link.
"""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from statistics import median

from pydantic import BaseModel, ConfigDict, Field

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import GIB, GPU, get_gpu

DATA_FILE = Path(__file__).resolve().parent / "data" / "startup_overhead.json"


class StartupLog(BaseModel):
    """One public start-up log (a row of ``data/startup_overhead.json``). GiB."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    id: str
    source: str
    date: str
    sglang: str
    gpu: str | None = None
    vendor_field: str | None = Field(default=None, alias="vendor")
    gpu_evidence: str
    world: int
    link: str
    init_dist_mem_usage: float | None = None
    avail_before_load: float | None = None
    avail_before_dist: float | None = None
    related_records: tuple[str, ...] = ()
    quote: str

    @property
    def gpu_total_gib(self) -> float | None:
        """The catalog's total of the row's GPU; None for a GPU the catalog does not have."""
        return None if self.gpu is None else get_gpu(self.gpu).memory_gib

    @property
    def vendor(self) -> str:
        if self.vendor_field:
            return self.vendor_field
        return "amd" if self.gpu and "AMD" in self.gpu else "nvidia"

    @property
    def pre(self) -> float | None:
        """GiB gone before ``init_torch_distributed`` measures (context, torch): total - T - D, or total minus the
        free memory an older log prints when the distributed init begins. None when the log gives neither."""
        if self.gpu_total_gib is None:
            return None
        if self.avail_before_dist is not None:
            return round(self.gpu_total_gib - self.avail_before_dist, 2)
        if self.avail_before_load is None:
            return None
        return round(self.gpu_total_gib - self.avail_before_load - (self.init_dist_mem_usage or 0.0), 2)

    @property
    def total(self) -> float | None:
        """total - ``Load weight begin. avail mem``: the whole start-up overhead of this log."""
        if self.avail_before_load is None or self.gpu_total_gib is None:
            return None
        return round(self.gpu_total_gib - self.avail_before_load, 2)


class Part(BaseModel):
    """One part of the overhead: the median of some logs, half their range, and which logs."""

    gib: float
    spread: float
    logs: tuple[str, ...]
    how: str


class StartupOverhead(BaseModel):
    """Start-up overhead of one rank (GiB) = ``pre.gib + dist.gib``, with the spread of the logs it came from."""

    gib: float
    spread: float
    pre: Part
    dist: Part

    def describe(self) -> str:
        return (f"pre {self.pre.gib:.2f} ({self.pre.how}: {', '.join(self.pre.logs)}) + dist {self.dist.gib:.2f} "
                f"({self.dist.how}{': ' + ', '.join(self.dist.logs) if self.dist.logs else ''}); "
                f"+-{self.spread:.2f} GiB from the spread of those logs")


@cache
def startup_logs() -> tuple[StartupLog, ...]:
    """The rows of ``data/startup_overhead.json`` ``logs``."""
    return tuple(StartupLog(**row) for row in json.loads(DATA_FILE.read_text())["logs"])


def _part(values: list[tuple[str, float]], how: str, group: list[float]) -> Part:
    """Median of ``values``; the spread is half the range of the wider ``group`` the values were chosen from (so a
    part resting on one log still carries how much such logs differ)."""
    vals = [v for _, v in values]
    return Part(gib=round(median(vals), 3), spread=round((max(group) - min(group)) / 2, 3),
                logs=tuple(f"{i} {v:.2f}" for i, v in values), how=how)


def _context_line(gpu: GPU, logs: list[StartupLog]) -> Part | None:
    """The pre part of an NVIDIA GPU without a log of its own, from a least-squares line through the NVIDIA logs
    against resident threads (``SMs x max threads per SM``, :func:`calculator.engine.gpus.resident_threads`).

    Why threads: the CUDA context reserves local memory for every thread the GPU can hold resident (local memory
    per thread x max threads per SM x SMs, see ``resident_threads``), so the context of a 58-SM L4 is smaller than
    that of a 132-SM H100. The line ``pre = a + b x threads`` is a fit (intercept: the rest of the context and
    torch's first allocations; slope: the bytes reserved per resident thread), made over the public logs only and
    never over a scored record. Spread: the largest |residual| of the logs. None when the GPU's threads are unknown
    or fewer than three logs with known threads span at least two GPUs.
    """
    from statistics import linear_regression

    from calculator.engine.gpus import resident_threads

    threads = resident_threads(gpu)
    if threads is None:
        return None
    pts = [(lg.id, resident_threads(get_gpu(lg.gpu)), lg.pre) for lg in logs
           if lg.vendor == "nvidia" and lg.gpu and lg.pre is not None]
    pts = [(i, t, v) for i, t, v in pts if t]
    if len(pts) < 3 or len({t for _, t, _ in pts}) < 2:
        return None
    b, a = linear_regression([t for _, t, _ in pts], [v for _, _, v in pts])
    resid = max(abs(v - (a + b * t)) for _, t, v in pts)
    return Part(gib=round(a + b * threads, 3), spread=round(resid, 3),
                logs=tuple(f"{i} {v:.2f}" for i, _, v in pts),
                how=(f"no context figure logged on the {gpu.name}: line through the NVIDIA logs by resident threads, "
                     f"{a:.3f} GiB + {b * GIB / 1024:.2f} KiB x {threads:,} threads ({gpu.sm_count} SMs)"))


def _link(gpu: GPU, world: int, vendor: str) -> str:
    from calculator.engine.perf import interconnect

    if world <= 1:
        return "single"
    if vendor == "amd":
        return "xgmi"
    return "nvlink" if "NVLink" in interconnect(gpu)[1] else "pcie"


def startup_overhead(gpu: GPU, world: int, vendor: str, exclude_record: str | None = None) -> StartupOverhead:
    """Start-up overhead (GiB per rank) of ``world`` ranks of ``gpu`` on one node, from the public logs.

    ``vendor``: ``"nvidia"`` or ``"amd"`` (the caller knows whether the GPU runs HIP). ``exclude_record``: leave out
    logs related to that shared record (``related_records``; same author and machine), for a leave-one-out check.

    Raises:
        EngineInputError(field="gpu"): no public log of that vendor (pre) or of that vendor and link (dist).
    """
    logs = [lg for lg in startup_logs() if lg.vendor == vendor and exclude_record not in lg.related_records]
    link = _link(gpu, world, vendor)

    pre_all = [(lg.id, lg.pre) for lg in logs if lg.pre is not None]
    if not pre_all:
        raise EngineInputError("gpu", f"no public start-up log of {vendor} GPUs to estimate the memory taken before "
                                      "loading; give free_memory_before_load_gib")
    pre_same = [(i, v) for i, v in pre_all if next(lg for lg in logs if lg.id == i).gpu == gpu.name]
    pre_group = [v for _, v in pre_all]
    line = None if pre_same else _context_line(gpu, logs)
    pre = (_part(pre_same, f"logs of the {gpu.name}", pre_group) if pre_same
           else line if line is not None
           else _part(pre_all, f"all {vendor} logs (none of the {gpu.name})", pre_group))

    if world <= 1:
        ones = [(lg.id, lg.init_dist_mem_usage) for lg in logs if lg.world == 1 and lg.init_dist_mem_usage is not None]
        dist = (_part(ones, f"one-rank {vendor} logs ('mem usage' of the init)", [v for _, v in ones]) if ones
                else Part(gib=0.0, spread=0.0, logs=(), how="one rank: no communicator (parallel_state world_size > 1)"))
    else:
        multi = [lg for lg in logs if lg.world > 1 and lg.link == link and lg.init_dist_mem_usage is not None]
        if not multi:
            raise EngineInputError("gpu", f"no public start-up log of {world} {vendor} GPUs over {link} to estimate the "
                                          "memory the distributed init takes; give free_memory_before_load_gib")
        same = [lg for lg in multi if lg.gpu == gpu.name and lg.world == world]
        same_world = [lg for lg in multi if lg.world == world]
        chosen, how = ((same, f"{world}x {gpu.name}") if same else
                       (same_world, f"{world} ranks over {link}") if same_world else
                       (multi, f"all {link} logs (none of {world} ranks)"))
        dist = _part([(lg.id, lg.init_dist_mem_usage) for lg in chosen], how, [lg.init_dist_mem_usage for lg in multi])
    return StartupOverhead(gib=round(pre.gib + dist.gib, 3), spread=round(pre.spread + dist.spread, 3),
                           pre=pre, dist=dist)
