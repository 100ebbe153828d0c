"""Calibration: a finished validation run refines the speed model's efficiency for its hardware and runtime.

The speed model (``calculator.engine.perf``) predicts TTFT and TPOT from a roofline with an efficiency row
per (runtime, GPU) that is ``assumed`` or ``fitted``. A validation run measures the baseline phase
(no speculation) at a known prompt length, output length and concurrency; ``from_run`` feeds that
measurement to ``perf.calibrate`` (which rescales the bound term of the decode step and the prefill compute,
then the fixed per-step costs, until the predicted TPOT equals the measured one within 1 %) and stores the result with the run in
``measured["calibration"]``: the efficiency, the predicted TPOT/TTFT before and after, and what it measured
(runtime, catalog GPU row, the runtime release the worker ran, the kernel path — ``perf.KERNEL_PATH_KEYS``:
dtype, quantization, KV cache dtype, attention backend asked for, eager mode — and the worker's hardware).

**A calibration applies only to what it measured.** ``apply_latest()`` reads the newest calibration of every
(runtime, GPU row, release, kernel path) from finished runs and installs each with ``perf.set_calibrations``
under its ``perf.CalibrationScope``: an estimate for another release (an upgrade of the worker, or a user asking
about 0.31.0), another dtype, quantization, KV cache dtype or attention backend, or with CUDA graphs where the run
was eager, keeps its fitted or assumed row, and that row's source names the run whose calibration was not applied
and why. A calibration stored before the kernel path was recorded is limited to its GPU, runtime and release; one
without a release is not applied. Where one applies, the speed figures carry ``efficiency_label``
"calibrated: calibrated from run <id> (measured <date>, <age>, on <hardware>; release ...; kernel path; ...)".
The web and worker processes call it through a ``request_started`` receiver (``validator.apps``), at most every
``REFRESH_S`` seconds.

**Dropping one.** ``drop(run)`` marks a run's calibration dropped (``measured["calibration"]["dropped"]``: when,
by whom, why) and ``restore(run)`` undoes it; the next refresh installs the newest calibration left for that
scope, or none. ``python manage.py calibrations`` lists them with their scope, age and state (``--drop RUN``,
``--drop-all``, ``--restore RUN``); the admin's validation runs have the same actions.

**Held back on an overloaded host.** ``hold_if_overloaded`` stores a CPU run's calibration dropped (``by``
``HELD_BY``, ``automatic``) when ``validator.runner.host_load`` found the host overloaded by other work before the run
(load average) or during it (``validator.runner.CpuWatch``): such a run measured the other work's contention. ``restore`` installs it if the user wants it.

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

    _, path = perf.calibration_scope(inp)
    return {
        "runtime": runtime, "gpu": gpu, "release": capabilities.runtime_release("vllm"),
        "kernel_path": path, "attention_backend_logged": (baseline.get("startup") or {}).get("attention_backend"),
        "hardware": capabilities.hardware_label(hardware),
        "efficiency": {k: v for k, v in asdict(eff).items() if k not in ("source", "label")},
        "efficiency_before": {k: v for k, v in before.efficiency.items() if k != "source"},
        "measured_tpot_ms": tpot, "measured_ttft_ms": ttft, "tpot_source": tpot_source, "ttft_source": ttft_source,
        "tpot_before_ms": before.itl_ms, "tpot_after_ms": after.itl_ms,
        "ttft_before_ms": before.ttft_ms, "ttft_after_ms": after.ttft_ms,
        "profile": kw,
    }


HELD_BY = "the validator"  # ``dropped["by"]`` of a calibration held back because the host was overloaded


def hold_if_overloaded(cal: dict[str, Any], load: dict[str, Any] | None) -> dict[str, Any]:
    """``cal`` (``from_run``'s) stored dropped when ``load`` (``validator.runner.host_load``) says the host was
    overloaded: a run that contended with other work measured that work, and installing it would carry the
    contention into every later estimate of its scope (a run at load 8.5 on 2 CPUs took TPOT from 2.29 to 6.74 ms).
    ``dropped`` then says so (``automatic``: True, ``by``: ``HELD_BY``); ``restore`` (``manage.py calibrations
    --restore RUN``) installs it if the user wants it. A skipped calibration, or one on a host that was not
    overloaded, is returned as it is."""
    from datetime import datetime, timezone

    if "efficiency" not in cal or not (load or {}).get("overloaded"):
        return cal
    return {**cal, "dropped": {"at": datetime.now(timezone.utc).isoformat(), "by": HELD_BY, "automatic": True,
                               "reason": f"not installed automatically: {load['text']}"}}


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


def age_text(finished_at, now=None) -> str:
    """A calibration's age in words: ``today``, ``1 day old``, ``12 days old`` (``now``: the current time)."""
    from django.utils import timezone

    if finished_at is None:
        return "age unknown"
    days = ((now or timezone.now()) - finished_at).days
    return "today" if days <= 0 else f"{days} day{'s' if days != 1 else ''} old"


def scope_of(c: dict[str, Any]):
    """The ``perf.CalibrationScope`` of a stored calibration, or None when it recorded no release (what it measured
    cannot be told, so it is never applied)."""
    from calculator.engine import perf

    if not c.get("release"):
        return None
    return perf.CalibrationScope.of(c["release"], c.get("kernel_path"))


def source_text(run, now=None) -> str:
    """The efficiency label's source for a run's calibration: the run, when it was measured and how long ago, on
    what, what it is limited to (``perf.CalibrationScope``), the measurement it reproduces, and how to drop it."""
    c = run.measured["calibration"]
    when = run.finished_at.strftime("%Y-%m-%d") if run.finished_at else "date unknown"
    what = "" if c.get("tpot_source", "").startswith("vllm bench") or not c.get("tpot_source") else " (vLLM /metrics)"
    scope = scope_of(c)
    return (f"calibrated from run {str(run.pk)[:8]} (measured {when}, {age_text(run.finished_at, now)}, on "
            f"{c.get('hardware')}; vLLM {scope.describe() if scope else 'release not recorded'}; measured TPOT{what} "
            f"{c['measured_tpot_ms']:.2f} ms at concurrency {c['profile']['concurrency']}"
            + ("" if c.get("measured_ttft_ms") else "; TTFT not calibrated")
            + f"; drop it with manage.py calibrations --drop {str(run.pk)[:8]})")


def _scope_key(c: dict[str, Any]) -> tuple:
    scope = scope_of(c)
    return (c["runtime"], c["gpu"], scope)


def calibrated_runs(limit: int = 500) -> list:
    """Finished runs with a calibration, newest first."""
    from .models import ValidationRun

    runs = ValidationRun.objects.filter(status=ValidationRun.Status.DONE).order_by("-finished_at")[:limit]
    return [run for run in runs if "efficiency" in ((run.measured or {}).get("calibration") or {})]


def latest_runs() -> dict[tuple, Any]:
    """The newest finished run with a calibration that is neither dropped nor without a release, per ``(runtime,
    gpu, perf.CalibrationScope)``."""
    out: dict[tuple, Any] = {}
    for run in calibrated_runs():
        c = run.measured["calibration"]
        key = _scope_key(c)
        if c.get("dropped") or key[2] is None or key in out:
            continue
        out[key] = run
    return out


def latest_ids() -> dict[tuple, Any]:
    """``latest_runs`` as run ids, per ``(runtime, gpu, perf.CalibrationScope)``."""
    return {key: run.pk for key, run in latest_runs().items()}


def states(runs: list | None = None, latest: dict[tuple, Any] | None = None) -> list[dict[str, Any]]:
    """Every stored calibration (of ``runs``; default all) with what becomes of it: ``{"run", "runtime", "gpu",
    "scope", "age", "state"}``; ``state``: ``applied``, ``superseded by run <id>`` (a newer one of the same scope),
    ``dropped <when> by <who>: <why>`` or ``not applied: no release recorded``. ``latest``: ``latest_ids()`` when
    the caller has it already."""
    runs = calibrated_runs() if runs is None else runs
    latest = latest_ids() if latest is None else latest
    out = []
    for run in runs:
        c = run.measured["calibration"]
        key = _scope_key(c)
        if c.get("dropped"):
            d = c["dropped"]
            state = f"dropped {d.get('at', '')[:10]}" + (f" by {d['by']}" if d.get("by") else "") + \
                (f": {d['reason']}" if d.get("reason") else "")
        elif key[2] is None:
            state = "not applied: no release recorded"
        elif latest.get(key) == run.pk:
            state = "applied"
        else:
            state = f"superseded by run {str(latest.get(key))[:8]}"
        out.append({"run": run, "runtime": c["runtime"], "gpu": c["gpu"],
                    "scope": key[2].describe() if key[2] else "release not recorded",
                    "age": age_text(run.finished_at), "state": state})
    return out


def drop(run, by: str = "", reason: str = "") -> bool:
    """Mark ``run``'s calibration dropped (it applies to no estimate from the next refresh on; the newest other one
    of its scope does, if any). False when the run has no calibration or it is dropped already."""
    from django.utils import timezone

    c = (run.measured or {}).get("calibration") or {}
    if "efficiency" not in c or c.get("dropped"):
        return False
    c["dropped"] = {"at": timezone.now().isoformat(), "by": by, "reason": reason}
    run.measured = {**run.measured, "calibration": c}
    run.save(update_fields=["measured"])
    _state["checked"] = 0.0  # this process looks again at its next request
    return True


def restore(run) -> bool:
    """Undo ``drop``: the run's calibration applies again where it is the newest of its scope. False when it was not
    dropped."""
    c = (run.measured or {}).get("calibration") or {}
    if not c.get("dropped"):
        return False
    c = {k: v for k, v in c.items() if k != "dropped"}
    run.measured = {**run.measured, "calibration": c}
    run.save(update_fields=["measured"])
    _state["checked"] = 0.0
    return True


def apply_latest(force: bool = False) -> list[str]:
    """Install the newest calibration per (runtime, GPU row, release, kernel path) into the speed model (each limited
    to its ``perf.CalibrationScope``); returns their sources.

    Throttled to one database query per ``REFRESH_S`` unless ``force``. When the set of calibrations changed
    (a new run, a dropped or restored one, a day older), Django's cache (which holds computed plans) is cleared so
    no plan keeps the old figures."""
    from django.utils import timezone

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
    applied, rows = [], []
    today = timezone.now()
    for (runtime, gpu, scope), run in runs.items():
        c = run.measured["calibration"]
        src = source_text(run, today)
        name = f"run {str(run.pk)[:8]} ({age_text(run.finished_at, today)})"
        rows.append((gpu, Efficiency(**c["efficiency"], source=src, label="calibrated"), scope, runtime, name))
        applied.append(src)
    perf.set_calibrations(rows)
    key = tuple(sorted(applied))
    if key != _state["applied"]:
        _state["applied"] = key
        from django.core.cache import cache

        cache.clear()
    return applied


def calibrated_from(gpu: str, runtime: str = "vllm", scope: tuple[str, dict[str, Any]] | None = None) -> str | None:
    """"calibrated from run <id> ..." when the speed model's efficiency for this GPU, for an estimate of ``scope``
    (``(release, kernel_path)``: ``perf.calibration_scope``), comes from a run; None otherwise."""
    from calculator.engine import perf

    try:
        eff = perf.get_efficiency(perf.get_gpu(gpu).name, runtime, scope=scope)
    except Exception:  # noqa: BLE001
        return None
    return eff.source if eff.label == "calibrated" else None
