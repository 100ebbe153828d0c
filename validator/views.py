"""Run pages: ``/runs/`` (your runs and recent ones), ``POST /runs/new``, ``/runs/<uuid>/`` (shareable) and
its polled status fragment."""
from __future__ import annotations

import os
import re
import sys
import sysconfig
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from . import capabilities, report, stats, workloads
from .config import ConfigurationError, build_configuration
from .forms import ValidationRequestForm
from .models import RunLimitReached, ValidationRun


def _get_run_or_404(run_id) -> ValidationRun:
    return get_object_or_404(ValidationRun, pk=run_id)


def _local_prefixes() -> list[tuple[str, str]]:
    """(local directory, placeholder) pairs, longest first: what a run's texts may contain of this site."""
    pairs = {
        sysconfig.get_paths()["purelib"]: "<site-packages>",
        sysconfig.get_paths()["platlib"]: "<site-packages>",
        str(Path(settings.VAR_DIR).resolve()): "<var>",
        str(settings.VAR_DIR): "<var>",
        str(Path(settings.BASE_DIR)): "<app>",
        sys.prefix: "<python>",
        sys.base_prefix: "<python>",
        os.path.expanduser("~"): "~",
    }
    return sorted(((k, v) for k, v in pairs.items() if k and k != "/"), key=lambda kv: -len(kv[0]))


# An absolute path of two or more components not under a known prefix: only its last two are kept.
_ABS_PATH = re.compile(r"(?<![\w.:/~<>-])/(?:[\w.+@-]+/)+([\w.+@-]+/[\w.+@-]+)")


def public_text(text: str) -> str:
    """``text`` with this machine's local paths replaced: the app, venv/site-packages, ``VAR_DIR`` and home
    directories by placeholders, any other absolute path by ``…/`` and its last two components. Run pages
    are public to anyone with the link; log lines and commands keep their meaning without the layout of
    the worker's disk."""
    if not text:
        return text
    for prefix, placeholder in _local_prefixes():
        text = text.replace(prefix, placeholder)
    return _ABS_PATH.sub(lambda m: "…/" + m.group(1), text)


def _context(request: HttpRequest, run: ValidationRun) -> dict[str, Any]:
    """What a run page shows, to anyone with its link: no worker host name, no local paths; the
    submitter is named only to themselves ("by you")."""
    summary = report.summary(run)
    summary.pop("worker_host", None)
    summary["error"] = public_text(summary.get("error") or "")
    summary["prediction_error"] = public_text(summary.get("prediction_error") or "")
    summary["hardware"] = {k: v for k, v in (summary.get("hardware") or {}).items() if k != "host"}
    for ph in summary.get("phases", {}).values():
        ph["command_run"] = public_text(ph.get("command_run") or "")
        ph["serve_command"] = public_text(ph.get("serve_command") or "")
    user = getattr(request, "user", None)
    return {
        "run": run, "report": summary, "charts": report.charts(run.measured or {}),
        "public": {"error": summary["error"], "log_tail": public_text(run.log_tail)},
        "submitted_by_viewer": bool(user and user.is_authenticated and run.created_by_id == user.pk),
    }


RECENT_RUNS = 30


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    """``/runs/``: the signed-in user's runs (newest first), then the most recent runs of everyone else
    (every run page is public by its id). Each row: when, model, GPU, status and the run's verdict."""
    mine = []
    recent = ValidationRun.objects.order_by("-created")
    if request.user.is_authenticated:
        mine = list(ValidationRun.objects.filter(created_by=request.user).order_by("-created")[:RECENT_RUNS])
        recent = recent.exclude(created_by=request.user)
    recent = list(recent[:RECENT_RUNS])
    for run in (*mine, *recent):
        run.public_error = public_text(run.error)  # no local paths of the worker on a public page
    return render(request, "validator/run_list.html", {"mine": mine, "recent": recent})


@require_POST
@login_required
@permission_required("validator.add_validationrun", raise_exception=True)
def new(request: HttpRequest) -> HttpResponse:
    form = ValidationRequestForm(request.POST)
    if not form.is_valid():
        errors = [(f, e) for f, errs in form.errors.items() for e in errs]
        return render(request, "validator/rejected.html", {"errors": errors}, status=400)
    limit = int(getattr(settings, "VALIDATOR_MAX_ACTIVE_RUNS_PER_USER", 2))
    if ValidationRun.objects.active().filter(created_by=request.user).count() >= limit:
        msg = f"you already have {limit} validation run(s) queued or running; wait for one to finish"
        return render(request, "validator/rejected.html", {"errors": [(None, msg)]}, status=429)
    try:
        who = capabilities.who_can_run(build_configuration(form.params()))
        if not who["ok"]:  # refused up front: no live worker can take it
            return render(request, "validator/rejected.html", {"errors": [(None, who["message"])]}, status=503)
        run = ValidationRun.submit(form.params(), request.user, limit=limit)  # the limit, atomically
    except RunLimitReached as e:
        return render(request, "validator/rejected.html", {"errors": [(None, str(e))]}, status=429)
    except ConfigurationError as e:
        return render(request, "validator/rejected.html", {"errors": [(e.field, e.message)]}, status=400)
    return redirect(run)


@require_GET
def detail(request: HttpRequest, run_id) -> HttpResponse:
    return render(request, "validator/run_detail.html", _context(request, _get_run_or_404(run_id)))


@require_GET
def status(request: HttpRequest, run_id) -> HttpResponse:
    run = _get_run_or_404(run_id)
    response = render(request, "validator/_run_status.html", _context(request, run))
    if run.is_terminal:
        return HttpResponseStopPolling(response.content)
    return response


@require_POST
@login_required
def cancel(request: HttpRequest, run_id) -> HttpResponse:
    """Cancel a queued or running run: its creator or a user with ``validator.change_validationrun``."""
    run = _get_run_or_404(run_id)
    if run.created_by_id != request.user.pk and not request.user.has_perm("validator.change_validationrun"):
        return HttpResponse("only the run's creator can cancel it", status=403)
    # the reason is shown on the public run page: no user names
    run.cancel("cancelled by its submitter" if run.created_by_id == request.user.pk else "cancelled by an administrator")
    return redirect(run)


@require_GET
def presets(request: HttpRequest) -> HttpResponse:
    """The trained pair's presets (workload set x speculative method), each with its validate form when a
    live CPU worker can run it."""
    rows = []
    for p in workloads.PRESETS:
        try:
            who = capabilities.who_can_run(build_configuration(dict(p["params"])))
        except ConfigurationError as e:
            who = {"ok": False, "message": f"{e.field}: {e.message}"}
        rows.append({**p, "ok": who["ok"], "message": who["message"]})
    return render(request, "validator/presets.html", {"presets": rows, "workloads": workloads.WORKLOADS,
                                                      "workers": capabilities.live_workers(),
                                                      "what_ran": workloads.served_target_note(workloads.PAIR_TARGET),
                                                      "rule": stats.rule_text(),
                                                      "pairs": build_configuration(dict(workloads.PRESETS[0]["params"]))["profile"]["repeats"]})


def _show(v) -> str:
    if v is None:
        return "—"
    return f"{v:,.2f}" if isinstance(v, (int, float)) else str(v)


def _metric_rows(a: dict, b: dict) -> list[dict]:
    keys = [("verdict", "verdict"), ("workload", "workload"), ("acceptance rate", "acceptance_rate"),
            ("mean acceptance length", "mean_acceptance_length")]
    rows = []
    for label, key in keys:
        rows.append({"label": label, "a": a.get(key), "b": b.get(key), "delta": None})
    for label in sorted(set(a["changes"]) | set(b["changes"])):
        va, vb = a["changes"].get(label), b["changes"].get(label)
        rows.append({"label": f"{label}: change vs baseline (%)", "a": va, "b": vb,
                     "delta": (vb - va) if va is not None and vb is not None else None})
    for label in sorted(set(a["baseline"]) | set(b["baseline"])):
        va, vb = a["baseline"].get(label), b["baseline"].get(label)
        rows.append({"label": f"baseline {label}", "a": va, "b": vb,
                     "delta": (vb - va) if va is not None and vb is not None else None})
    return [{**r, "a": _show(r["a"]), "b": _show(r["b"]),
             "delta": "" if r["delta"] is None else f"{r['delta']:+,.2f}"} for r in rows]


def _compare_side(run: ValidationRun) -> dict:
    s = report.summary(run)
    v = s.get("verdict") or {}
    acc = s.get("acceptance") or {}
    base = (run.measured or {}).get("phases", {}).get("baseline", {}).get("aggregate", {})
    return {"run": run, "summary": s, "verdict": v.get("verdict"), "workload": s.get("workload"),
            "acceptance_rate": acc.get("acceptance_rate"), "mean_acceptance_length": acc.get("mean_acceptance_length"),
            "changes": {d["label"]: d["change_pct"] for d in s.get("differences", [])},
            "baseline": {k: base.get(k) for k in ("output_throughput", "median_ttft_ms", "median_tpot_ms",
                                                   "p95_e2el_ms") if base.get(k) is not None}}


@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    """``/runs/compare?a=<uuid>&b=<uuid>``: two runs side by side (configuration, verdict, paired changes,
    baseline figures) with the difference b - a."""
    import uuid

    ids = []
    for key in ("a", "b"):
        try:
            ids.append(uuid.UUID(request.GET.get(key, "")))
        except ValueError:
            return HttpResponse(f"{key}: give a run id (uuid) as ?a=...&b=...", status=400)
    a, b = (_compare_side(_get_run_or_404(i)) for i in ids)
    config_rows = []
    for key in sorted(set(a["run"].configuration.get("params", {})) | set(b["run"].configuration.get("params", {}))):
        va, vb = a["run"].configuration.get("params", {}).get(key), b["run"].configuration.get("params", {}).get(key)
        config_rows.append({"key": key, "a": va, "b": vb, "same": va == vb})
    return render(request, "validator/compare.html", {"a": a, "b": b, "rows": _metric_rows(a, b),
                                                      "config_rows": config_rows})
