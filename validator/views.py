"""Run pages: ``/runs/`` (your runs and recent ones), ``POST /runs/new``, ``/runs/<uuid>/`` (shareable) and
its polled status fragment."""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseStopPolling

from . import report
from .config import ConfigurationError
from .forms import ValidationRequestForm
from .models import ValidationRun


def _get_run_or_404(run_id) -> ValidationRun:
    return get_object_or_404(ValidationRun, pk=run_id)


def _context(run: ValidationRun) -> dict:
    return {"run": run, "report": report.summary(run), "charts": report.charts(run.measured or {})}


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
        run = ValidationRun.submit(form.params(), request.user)
    except ConfigurationError as e:
        return render(request, "validator/rejected.html", {"errors": [(e.field, e.message)]}, status=400)
    return redirect(run)


@require_GET
def detail(request: HttpRequest, run_id) -> HttpResponse:
    return render(request, "validator/run_detail.html", _context(_get_run_or_404(run_id)))


@require_GET
def status(request: HttpRequest, run_id) -> HttpResponse:
    run = _get_run_or_404(run_id)
    response = render(request, "validator/_run_status.html", _context(run))
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
    run.cancel(f"cancelled by {request.user.get_username()}")
    return redirect(run)
