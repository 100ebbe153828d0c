"""The run report as the page and ``validate --format json`` show it, and its Vega-Lite chart specs."""
from __future__ import annotations

import shlex
from typing import Any

from .bench import PERCENTILE_METRICS

GiB = 2**30
METRIC_LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}


def latency_rows(measured: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (metric, phase): p50/p95/p99 in ms (mean over repeats) and the run-to-run spread."""
    rows = []
    for m in PERCENTILE_METRICS:
        for phase in ("baseline", "speculative"):
            agg = measured.get("phases", {}).get(phase, {}).get("aggregate", {})
            if f"p50_{m}_ms" not in agg:
                continue
            rows.append({"metric": METRIC_LABELS[m], "phase": phase,
                         **{p: agg.get(f"{p}_{m}_ms") for p in ("p50", "p95", "p99")},
                         "spread_p50": agg.get(f"spread_p50_{m}_ms")})
    return rows


ERROR_BANDS = ((10.0, "err-ok"), (30.0, "err-warn"))  # |error %| below 10: green, below 30: amber, else red


def error_class(error_pct: float | None) -> str:
    """CSS class of a predicted-vs-measured row by its relative error: ``err-ok`` (|e| < 10 %),
    ``err-warn`` (< 30 %), ``err-bad`` (30 % or more), ``err-none`` when there is no figure."""
    if error_pct is None:
        return "err-none"
    for limit, cls in ERROR_BANDS:
        if abs(error_pct) < limit:
            return cls
    return "err-bad"


def is_count(row: dict[str, Any]) -> bool:
    """Whether a predicted-vs-measured row counts whole tokens (``kv_cache_tokens``, SGLang's token pools), shown
    without decimals; a mean in tokens (``mean_acceptance_length``: 1 + accepted / drafts, e.g. 2.78) is not."""
    return row.get("unit") == "tokens" and not str(row.get("field", "")).startswith("mean_")


def speed_model_line(sm: dict[str, Any] | None) -> str | None:
    """What the speed prediction stood on: "calibrated from run <id> ..." or the row's label and source."""
    if not sm:
        return None
    if sm.get("label") == "calibrated":
        return f"{sm['source']}"
    return f"{sm.get('label')} efficiency for {sm.get('gpu')} (not calibrated by a run): {sm.get('source')}"


def differences(verdict: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The verdict's paired differences as rows: label, change and interval (%), direction, used."""
    rows = []
    for key, d in ((verdict or {}).get("differences") or {}).items():
        if d.get("change_pct") is None:
            continue
        rows.append({"key": key, **d})
    return rows


def pairs_stop(stop: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run's ``{"pairs", "why"}`` (``bench_serve_entry.PairSchedule``) with the stop rule's widths labelled as
    what they are: a run stored before ``validator.stats.STILL_WIDE`` said "still wide: output tok/s ±63.4 %" above a
    table whose tok/s interval was -12.2 to +33.8 %, two widths of two different intervals under one name."""
    from .stats import STILL_WIDE

    if not stop or not isinstance(stop.get("why"), str) or STILL_WIDE in stop["why"]:
        return stop
    return {**stop, "why": stop["why"].replace("still wide: ", STILL_WIDE)}


def summary(run) -> dict[str, Any]:
    """Everything a report needs, JSON-ready: configuration, predicted vs measured, latency
    percentiles (ms), output tok/s, peak memory (GiB), acceptance figures, verdict."""
    measured = run.measured or {}
    phases = measured.get("phases", {})
    out: dict[str, Any] = {
        "id": str(run.pk), "status": run.status, "stage": run.stage, "error": run.error,
        "model_id": run.configuration.get("model_id"), "run_model": run.configuration.get("run_model"),
        "platform": run.configuration.get("platform"), "adjustments": run.configuration.get("adjustments", []),
        "profile": run.configuration.get("profile", {}), "prediction_error": run.prediction_error,
        "comparison": measured.get("comparison", []), "verdict": measured.get("verdict"),
        "latency_ms": latency_rows(measured), "phases": {},
        "hardware": run.hardware or {}, "worker_host": run.worker_host,
        "workload": measured.get("workload") or run.configuration.get("workload", "random"),
        "acceptance": measured.get("acceptance"), "differences": differences(measured.get("verdict")),
        "calibration": measured.get("calibration"), "worker": measured.get("worker"),
        "order": measured.get("order"), "design": measured.get("design"),
        "what_ran": measured.get("what_ran"),
        "runtime": run.configuration.get("runtime", "vllm"), "runtime_release": measured.get("runtime_release"),
        "gguf": measured.get("gguf"), "llamacpp_prediction": measured.get("prediction"),
        "prediction_note": measured.get("prediction_note"), "command_note": measured.get("command_note"),
        "prompt_tokens": measured.get("prompt_tokens"), "speed_model": measured.get("speed_model"),
        "prompts": measured.get("prompts"), "pairs_stop": pairs_stop(measured.get("pairs_stop")),
        "host_load": measured.get("host_load"),
    }
    out["speed_model_line"] = speed_model_line(out["speed_model"])
    if out["runtime"] == "llama.cpp":
        from .llamacpp import DRAFT_NOTE

        out["draft_note"] = DRAFT_NOTE
    v = out["verdict"] or {}
    word = v.get("verdict") or ("keep" if v.get("keep") else "disable") if v else None
    out["verdict_word"] = word
    out["verdict_class"] = {"keep": "works", "disable": "does_not_fit"}.get(word or "", "depends")
    for row in out["comparison"]:
        row["error_class"] = error_class(row.get("error_pct"))
    for name, ph in phases.items():
        agg = ph.get("aggregate", {})
        out["phases"][name] = {
            "serve_command": shlex.join(ph.get("serve_argv") or []),
            "command_run": " ".join(f"{k}={shlex.quote(v)}" for k, v in (ph.get("env") or {}).items())
                           + (" " if ph.get("env") else "") + shlex.join(ph.get("argv") or []),
            "startup": ph.get("startup", {}),
            "startup_s": ph.get("startup_s"),
            "output_tok_s": agg.get("output_throughput"), "spread_output_tok_s": agg.get("spread_output_throughput"),
            "peak_memory_gib": (ph.get("peak_memory_bytes") or 0) / GiB, "peak_memory_method": ph.get("peak_memory_method"),
            "spec_decode": agg.get("spec_decode"), "repeats": len(ph.get("repeats", [])),
            "prefix_cache": ph.get("prefix_cache"),
        }
    return out


def charts(measured: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Vega-Lite v5 specs: ``latency`` (p50/p95/p99 per metric, baseline vs speculative),
    ``distribution`` (per-request TTFT and E2EL, box plots) and ``acceptance`` (per-position rate)."""
    rows = latency_rows(measured)
    values = [{"metric": r["metric"], "phase": r["phase"], "percentile": p, "ms": r[p]}
              for r in rows for p in ("p50", "p95", "p99") if r[p] is not None]
    schema = "https://vega.github.io/schema/vega-lite/v5.json"
    specs: dict[str, dict[str, Any]] = {}
    if values:
        specs["latency"] = {
            "$schema": schema, "description": "Latency percentiles, baseline vs speculative decoding",
            "data": {"values": values},
            "facet": {"column": {"field": "metric", "type": "nominal", "title": None}},
            "spec": {"width": 140, "height": 180, "mark": "bar", "encoding": {
                "x": {"field": "percentile", "type": "ordinal", "title": None},
                "xOffset": {"field": "phase"},
                "y": {"field": "ms", "type": "quantitative", "title": "ms"},
                "color": {"field": "phase", "type": "nominal"},
                "tooltip": [{"field": "phase"}, {"field": "percentile"}, {"field": "ms", "format": ".2f"}]}},
            "resolve": {"scale": {"y": "independent"}},
        }
    dist = []
    for phase, ph in measured.get("phases", {}).items():
        for r in ph.get("repeats", []):
            dist += [{"phase": phase, "metric": "TTFT", "ms": v} for v in r["bench"].get("ttfts_ms", [])]
            dist += [{"phase": phase, "metric": "E2EL", "ms": v} for v in r["bench"].get("e2els_ms", [])]
    if dist:
        specs["distribution"] = {
            "$schema": schema, "description": "Per-request latency distribution",
            "data": {"values": dist},
            "facet": {"column": {"field": "metric", "type": "nominal", "title": None}},
            "spec": {"width": 220, "height": 160, "mark": {"type": "boxplot", "extent": "min-max"}, "encoding": {
                "y": {"field": "phase", "type": "nominal", "title": None},
                "x": {"field": "ms", "type": "quantitative", "title": "ms"},
                "color": {"field": "phase", "type": "nominal", "legend": None}}},
            "resolve": {"scale": {"x": "independent"}},
        }
    spec = measured.get("phases", {}).get("speculative", {}).get("aggregate", {}).get("spec_decode")
    if spec and spec.get("per_position"):
        specs["acceptance"] = {
            "$schema": schema, "description": "Acceptance rate per draft position",
            "data": {"values": [{"position": i, "rate": r} for i, r in enumerate(spec["per_position"])]},
            "width": 260, "height": 160, "mark": "bar",
            "encoding": {"x": {"field": "position", "type": "ordinal", "title": "draft position"},
                         "y": {"field": "rate", "type": "quantitative", "title": "accepted / drafts",
                               "scale": {"domain": [0, 1]}},
                         "tooltip": [{"field": "position"}, {"field": "rate", "format": ".3f"}]},
        }
    return specs


def format_text(s: dict[str, Any]) -> str:
    """The report as plain text for ``manage.py validate --wait``."""
    lines = [f"Validation run {s['id']}: {s['status']}" + (f" — {s['error']}" if s["error"] else "")]
    if s["verdict"]:
        lines.append(f"VERDICT: {(s['verdict_word'] or '?').upper()} — {s['verdict']['summary']}")
        if s["verdict"].get("rule"):
            lines.append(f"  rule: {s['verdict']['rule']}")
    if s.get("what_ran"):
        lines.append(f"WHAT RAN: {s['what_ran']['what']}")
        lines.append(f"  {s['what_ran']['why']}")
    lines.append(f"model: {s['model_id']} (ran {s['run_model']} on {s['platform']}), workload {s['workload']}")
    if s.get("prompts"):
        lines.append(f"  prompts: {s['prompts']}")
    if s.get("host_load"):
        lines.append(f"  {s['host_load']['text']}")
    lines += [f"  note: {a}" for a in s["adjustments"]]
    if s["prediction_error"]:
        lines.append(f"  prediction: {s['prediction_error']}")
    if s["comparison"]:
        lines.append("")
        if s.get("speed_model_line"):
            lines.append(f"speed prediction: {s['speed_model_line']}")
        lines.append(f"{'field':<26}{'predicted':>14}{'measured':>14}{'error':>12}{'error %':>10}")
        for r in s["comparison"]:
            def f(v):
                return "—" if v is None else (f"{v:,.0f}" if is_count(r) else f"{v:,.2f}")
            pct = "—" if r["error_pct"] is None else f"{r['error_pct']:+.2f}"
            lines.append(f"{r['field'] + ' (' + r['unit'] + ')':<26}{f(r['predicted']):>14}{f(r['measured']):>14}"
                         f"{f(r['error']):>12}{pct:>10}  {r['note']}")
    if s["latency_ms"]:
        lines.append("")
        lines.append(f"{'latency (ms)':<14}{'phase':<13}{'p50':>10}{'p95':>10}{'p99':>10}")
        for r in s["latency_ms"]:
            lines.append(f"{r['metric']:<14}{r['phase']:<13}{r['p50']:>10.2f}{r['p95']:>10.2f}{r['p99']:>10.2f}")
    for name, ph in s["phases"].items():
        lines.append("")
        lines.append(f"{name}: output {ph['output_tok_s'] or 0:.1f} tok/s (spread {ph['spread_output_tok_s'] or 0:.1f}),"
                     f" peak memory {ph['peak_memory_gib']:.2f} GiB ({ph['peak_memory_method']})")
        sd = ph.get("spec_decode")
        if sd:
            pos = ", ".join(f"{p:.3f}" for p in sd["per_position"])
            lines.append(f"  acceptance rate {sd['acceptance_rate'] * 100:.1f} %, mean acceptance length "
                         f"{sd['mean_acceptance_length']:.2f}, per position [{pos}]")
    if s["differences"]:
        lines.append("")
        stop = s.get("pairs_stop") or {}
        lines.append("paired differences, speculative vs baseline (95 % bootstrap interval)"
                     + (f", {stop['pairs']} pairs ({stop['why']})" if stop.get("pairs") else "") + ":")
        for d in s["differences"]:
            ci = (f"[{d['ci_low_pct']:+.1f}, {d['ci_high_pct']:+.1f}] %" if d.get("ci_low_pct") is not None else "")
            if d.get("threshold_pct") is not None:
                role = f"{d.get('side')} +{d['threshold_pct']:g} % ({'margin' if d.get('role') == 'decides' else 'limit'})"
            else:
                role = d.get("direction", "") + ("" if d.get("used", True) else " (reported, not used)")
            lines.append(f"  {d['label']:<36}{d['change_pct']:+8.1f} %  {ci:<22}{role}")
    c = s.get("calibration") or {}
    if c.get("efficiency"):
        lines.append(f"calibration ({c['gpu']}, vLLM {c.get('release')}): TPOT predicted {c['tpot_before_ms']:.2f} ms "
                     f"-> {c['tpot_after_ms']:.2f} ms after calibration, measured {c['measured_tpot_ms']:.2f} ms"
                     + (f" ({c['tpot_source']})" if c.get("tpot_source") else "")
                     + (f"; TTFT {c['ttft_before_ms']:.1f} -> {c['ttft_after_ms']:.1f} ms, measured "
                        f"{c['measured_ttft_ms']:.1f} ms" if c.get("measured_ttft_ms") else
                        f"; TTFT {c['ttft_source']}" if c.get("ttft_source") else "")
                     + (f". NOT INSTALLED — {c['dropped']['reason']}; estimates do not use it "
                        f"(manage.py calibrations --restore {s['id'][:8]} installs it if you want it)."
                        if (c.get("dropped") or {}).get("automatic") else
                        f". Later predictions for {c['gpu']} with vLLM {c.get('release')} and the same kernel path say "
                        f"\"calibrated from run {s['id'][:8]}\" (manage.py calibrations --drop {s['id'][:8]} drops it)"
                        + (" — dropped: estimates no longer use it." if c.get("dropped") else ".")))
    return "\n".join(lines)
