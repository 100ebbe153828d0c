"""Calibration: a finished validation run refines the speed model's efficiency for its hardware and runtime.

The speed model (``calculator.engine.perf``) predicts TTFT and TPOT from a roofline with an efficiency row
per (runtime, GPU) that is ``assumed`` or ``fitted``. A validation run measures the baseline phase
(no speculation) at a known prompt length, output length and concurrency; ``from_run`` feeds that
measurement to ``perf.calibrate`` (which rescales the bound term of the decode step and the prefill compute,
then the fixed per-step costs, until the predicted TPOT equals the measured one within 1 %) and stores the result with the run in
``measured["calibration"]``: the efficiency, the predicted TPOT/TTFT before and after, and the key
(runtime, catalog GPU row, runtime release, the worker's hardware).

``apply_latest()`` reads the newest calibration of every (runtime, GPU row) from finished runs and installs
it with ``perf.apply_measured_efficiency``, with ``source`` = "calibrated from run <id> ..."; the
calculator's speed figures then carry ``efficiency_label`` "calibrated: calibrated from run <id> ...".
The web and worker processes call it through a ``request_started`` receiver (``validator.apps``), at most
every ``REFRESH_S`` seconds.

Limits (stated, not hidden): one run gives one point; the calibrated row reproduces that point's TPOT, and
other contexts / concurrencies follow the model's form. When even the factor limits (bandwidth or compute
×0.05 to 1, fixed costs ×0.05 to ×20) cannot reach the measurement, ``tpot_after_ms`` vs
``measured_tpot_ms`` shows by how much it still differs.
"""
from __future__ import annotations

import time
from dataclasses import asdict, replace
from typing import Any

REFRESH_S = 30.0
_state = {"checked": 0.0, "applied": ()}


TTFT_TOLERANCE = 0.01  # a calibrated TTFT within 1 % of the measurement it came from


def from_run(configuration: dict[str, Any], baseline: dict[str, Any], hardware: dict[str, Any]) -> dict[str, Any]:
    """The calibration a run's baseline phase gives, or ``{"skipped": reason}``.

    Uses vllm bench serve's mean TPOT and mean TTFT (ms) of the baseline, averaged over repeats, at the
    run's profile (``input_len``, ``output_len``, ``concurrency``). When the client's per-token figures are not
    the engine's (more than ``bench.BURST_LIMIT`` of the requests' streams reached the client in one burst:
    ``bench.per_token_measurable``), the TPOT is vLLM's own mean inter-token latency (``/metrics``,
    ``engine_itl_ms``) and TTFT is not calibrated (the client's TTFT then holds the late bursts, which no term of
    the speed model is). ``perf.calibrate`` fits the decode terms to the TPOT (and the prefill compute to the TTFT);
    what TTFT still differs by then goes into ``ttft_fixed_ms`` (the API server's part of TTFT: tokenization,
    scheduling, the first streamed chunk), never below 0. ``tpot_source`` / ``ttft_source`` say which figures
    were used."""
    from calculator.engine import perf
    from calculator.engine.schemas import EngineInput

    from .bench import per_token_measurable

    agg = baseline.get("aggregate") or {}
    tpot, ttft = agg.get("mean_tpot_ms"), agg.get("mean_ttft_ms")
    tpot_source, ttft_source = "vllm bench serve's mean TPOT", "vllm bench serve's mean TTFT"
    known = agg.get("burst_share") is not None or (agg.get("median_ttft_ms") is not None and agg.get("median_e2el_ms"))
    if known and not per_token_measurable(agg):
        share = agg.get("burst_share")
        why = (f"{share:.0%} of the requests' streams reached the client in one burst" if share is not None
               else "the server sent each request's tokens in one burst")
        tpot, ttft = agg.get("engine_itl_ms"), None
        tpot_source = f"vLLM's own mean inter-token latency (/metrics; {why})"
        ttft_source = f"not calibrated: {why}, so the client's TTFT is not the engine's"
        if not tpot:
            return {"skipped": f"{why} and the server reported no inter-token latency, so there is no TPOT to "
                               "calibrate on"}
    elif not tpot or not ttft:
        return {"skipped": "the baseline measured no TPOT/TTFT"}
    profile = configuration["profile"]
    base_input = {k: v for k, v in configuration["engine_input"].items() if k != "speculative_config"}
    kw = dict(prompt_len=profile["input_len"], output_len=profile["output_len"], concurrency=profile["concurrency"])
    runtime = "vllm"
    try:
        inp = EngineInput(**base_input)
        gpu = perf.get_gpu(inp.gpu).name
        eff, before, after = perf.calibrate(inp, measured_itl_ms=tpot, measured_ttft_ms=ttft,
                                            source="validation run", runtime=runtime, **kw)
        if ttft and abs(ttft - after.ttft_ms) > TTFT_TOLERANCE * ttft:
            eff = replace(eff, ttft_fixed_ms=max(0.0, eff.ttft_fixed_ms + ttft - after.ttft_ms))
            after = _predict_with(inp, eff, gpu, runtime, kw)
    except Exception as e:  # noqa: BLE001 - a run is never failed by its calibration
        return {"skipped": f"the speed model could not predict this configuration: {e}"}
    from . import capabilities

    return {
        "runtime": runtime, "gpu": gpu, "release": capabilities.runtime_release("vllm"),
        "hardware": capabilities.hardware_label(hardware),
        "efficiency": {k: v for k, v in asdict(eff).items() if k not in ("source", "label")},
        "efficiency_before": {k: v for k, v in before.efficiency.items() if k != "source"},
        "measured_tpot_ms": tpot, "measured_ttft_ms": ttft, "tpot_source": tpot_source, "ttft_source": ttft_source,
        "tpot_before_ms": before.itl_ms, "tpot_after_ms": after.itl_ms,
        "ttft_before_ms": before.ttft_ms, "ttft_after_ms": after.ttft_ms,
        "profile": kw,
    }


def _predict_with(inp, eff, gpu: str, runtime: str, kw: dict[str, Any]):
    """``perf.estimate_speed`` with ``eff`` installed for ``(runtime, gpu)`` for this one call."""
    from calculator.engine import perf

    key = (runtime, gpu)
    previous = perf._MEASURED.get(key)
    perf._MEASURED[key] = eff
    try:
        return perf.estimate_speed(inp, None, runtime=runtime, **kw)
    finally:
        if previous is None:
            perf._MEASURED.pop(key, None)
        else:
            perf._MEASURED[key] = previous


def source_text(run) -> str:
    c = run.measured["calibration"]
    when = run.finished_at.strftime("%Y-%m-%d") if run.finished_at else ""
    what = "" if c.get("tpot_source", "").startswith("vllm bench") or not c.get("tpot_source") else " (vLLM /metrics)"
    return (f"calibrated from run {str(run.pk)[:8]} ({c.get('hardware')}, vLLM {c.get('release') or '?'}, "
            f"{when}; measured TPOT{what} {c['measured_tpot_ms']:.2f} ms at concurrency {c['profile']['concurrency']}"
            + ("" if c.get("measured_ttft_ms") else "; TTFT not calibrated") + ")")


def latest_runs() -> dict[tuple[str, str], Any]:
    """The newest finished run with a calibration per ``(runtime, gpu)``."""
    from .models import ValidationRun

    out: dict[tuple[str, str], Any] = {}
    for run in ValidationRun.objects.filter(status=ValidationRun.Status.DONE).order_by("-finished_at")[:200]:
        c = (run.measured or {}).get("calibration") or {}
        if "efficiency" in c and (c["runtime"], c["gpu"]) not in out:
            out[(c["runtime"], c["gpu"])] = run
    return out


def apply_latest(force: bool = False) -> list[str]:
    """Install the newest calibration per (runtime, GPU) into the speed model; returns their sources.

    Throttled to one database query per ``REFRESH_S`` unless ``force``. When the set of calibrations
    changed, Django's cache (which holds computed plans) is cleared so no plan keeps the old figures."""
    from calculator.engine import perf
    from calculator.engine.perf import Efficiency

    now = time.monotonic()
    if not force and now - _state["checked"] < REFRESH_S:
        return list(_state["applied"])
    _state["checked"] = now
    try:
        runs = latest_runs()
    except Exception:  # noqa: BLE001 - no table yet (before migrate), database down: no calibration
        return []
    applied = []
    for (runtime, gpu), run in runs.items():
        c = run.measured["calibration"]
        src = source_text(run)
        perf.apply_measured_efficiency(gpu, Efficiency(**c["efficiency"], source=src, label="calibrated"), runtime)
        applied.append(src)
    key = tuple(sorted(applied))
    if key != _state["applied"]:
        for (runtime, gpu) in list(perf._MEASURED):
            if (runtime, gpu) not in runs:
                perf._MEASURED.pop((runtime, gpu))
        _state["applied"] = key
        from django.core.cache import cache

        cache.clear()
    return applied


def calibrated_from(gpu: str, runtime: str = "vllm") -> str | None:
    """"calibrated from run <id> ..." when the speed model's efficiency for this GPU comes from a run."""
    from calculator.engine import perf

    try:
        eff = perf.get_efficiency(perf.get_gpu(gpu).name, runtime)
    except Exception:  # noqa: BLE001
        return None
    return eff.source if eff.label == "calibrated" else None
