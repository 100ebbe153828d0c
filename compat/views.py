"""Thin views: GET form -> compat.matrix / compat.checks -> template. What the pages compute depends only
on the query, so it is kept in Django's cache (a warm page is a template render)."""
from __future__ import annotations

import hashlib

from django.core.cache import cache
from django.shortcuts import render
from django.views.decorators.http import require_GET

from . import checks, diff, extract, matrix
from .forms import MatrixForm, VerdictForm

CACHE_S = 3600


def _key(prefix: str, params: dict) -> str:
    return f"compat:{prefix}:" + hashlib.sha256(repr(sorted(params.items())).encode()).hexdigest()


def _matrix(params: dict):
    """``(Matrix or None, error or None, release diff or None)`` for the form's params, cached."""
    key = _key("matrix", params)
    hit = cache.get(key)
    if hit is not None:
        return hit
    result, error, changes = None, None, None
    try:
        result = matrix.build_matrix(**params)
    except checks.CompatInputError as e:
        error = e.message
    if result:
        known = extract.available_releases()  # oldest first
        older = known[:known.index(result.release)] if result.release in known else []
        if older:
            changes = diff.diff_releases(extract.load(older[-1]), extract.load(result.release))
    cache.set(key, (result, error, changes), CACHE_S)
    return result, error, changes


def _left_out(query, form_class) -> list:
    """Each parameter of ``query`` the page does not take (not a field of ``form_class``), with the sentence naming
    the nearest one it takes (:func:`calculator.request.unknown_parameter`): the page answers without it, but says
    so, as the calculator's page does (README, "How a request flows"). Empty values are left out without a word."""
    from calculator.request import unknown_parameter
    from calculator.web.forms import MAX_SHOWN_VALUE, NotApplied

    known = tuple(form_class.base_fields)
    out = []
    for name in query:
        value = query.get(name) or ""
        if name in known or not value.strip():
            continue
        exc = unknown_parameter(name, known)
        shown = value if len(value) <= MAX_SHOWN_VALUE else value[:MAX_SHOWN_VALUE] + "…"
        out.append(NotApplied(exc.field, shown, f"{exc.field}: {exc.message}"))
    return out


@require_GET
def matrix_page(request):
    form = MatrixForm.from_query(request.GET)  # the defaults filled in: the pickers show what is described
    result, error, changes, key = None, None, None, ""
    if form.is_valid():
        result, error, changes = _matrix(form.params())
        key = _key("matrix", form.params())
    return render(request, "compat/matrix.html", {"form": form, "m": result, "error": error, "changes": changes,
                                                  "models": matrix.model_choices(), "cache_key": key,
                                                  "not_applied": _left_out(request.GET, MatrixForm)},
                  status=200 if result else 400)


@require_GET
def verdict_page(request):
    form = VerdictForm(request.GET)
    report, error = None, None
    if form.is_valid():
        d = form.cleaned_data
        params = {"model": d["model"], "gpu": d["gpu"], "dtype": d.get("dtype") or "auto",
                  "kv_cache_dtype": d.get("kv_cache_dtype") or "auto", "block_size": d.get("block_size"),
                  "attention_backend": d.get("attention_backend") or None,
                  "vllm_version": d.get("vllm_version") or None}
        key = _key("verdict", params)
        report, error = cache.get(key, (None, None))
        if report is None and error is None:
            try:
                report = checks.verdict_for(matrix.load_model_config(params.pop("model")), params.pop("gpu"),
                                            **params)
            except checks.CompatInputError as e:
                error = e.message
            cache.set(key, (report, error), CACHE_S)
    status = 200 if report else 400
    template = "compat/_verdict.html" if getattr(request, "htmx", False) else "compat/verdict.html"
    return render(request, template, {"form": form, "verdict": report, "error": error,
                                      "models": matrix.model_choices(),
                                      "not_applied": _left_out(request.GET, VerdictForm)}, status=status)
