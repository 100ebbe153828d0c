"""GPU catalog: the devices the calculator and the compatibility checks know.

The data lives in ``calculator/data/gpus.json`` (one row per device, each figure with its source).
``memory_gib`` is what the driver reports to torch, which is what vLLM multiplies by
``--gpu-memory-utilization`` (``vllm/v1/worker/utils.py`` in 0.32: ``requested_memory =
ceil(total_device_memory * gpu_memory_utilization)``).
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .errors import EngineInputError

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "gpus.json"


class GPU(BaseModel):
    """One device. Units: GiB (2**30 B) for memory, GB/s (10**9 B/s) for bandwidth, dense TFLOP/s."""

    model_config = ConfigDict(frozen=True)

    name: str
    aliases: tuple[str, ...] = ()
    vendor: str
    architecture: str
    compute_capability: str | None
    memory_gib: float
    memory_source: str
    bandwidth_gbps: float
    tflops_bf16: float
    tflops_fp8: float | None
    spec_source: str

    @property
    def memory_bytes(self) -> int:
        return int(round(self.memory_gib * 2**30))

    @property
    def is_cpu(self) -> bool:
        return self.vendor == "cpu"

    @property
    def capability_tuple(self) -> tuple[int, int] | None:
        """``(major, minor)`` for NVIDIA parts, ``None`` for AMD gfx targets and the CPU."""
        if not self.compute_capability or not re.fullmatch(r"\d+\.\d+", self.compute_capability):
            return None
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@lru_cache(maxsize=1)
def all_gpus() -> tuple[GPU, ...]:
    """Every catalog row, in file order."""
    rows = json.loads(DATA_FILE.read_text())["gpus"]
    return tuple(GPU(**{**r, "aliases": tuple(r.get("aliases", ()))}) for r in rows)


@lru_cache(maxsize=1)
def _index() -> dict[str, GPU]:
    index: dict[str, GPU] = {}
    for gpu in all_gpus():
        for key in (gpu.name, *gpu.aliases):
            index.setdefault(_norm(key), gpu)
    return index


def get_gpu(name: str) -> GPU:
    """Look a device up by the name torch / nvidia-smi report (``NVIDIA H100 80GB HBM3``) or an alias
    (``H100-80GB``). Case, spaces and punctuation are ignored.

    Raises:
        EngineInputError: the name matches no catalog row; the message lists the known names.
    """
    gpu = _index().get(_norm(name or ""))
    if gpu is None:
        known = ", ".join(g.name for g in all_gpus())
        raise EngineInputError("gpu", f"unknown GPU {name!r}; known GPUs: {known}")
    return gpu
