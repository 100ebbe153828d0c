"""Thin views: GET form -> compat.matrix / compat.checks -> template."""
from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET

from . import checks, diff, extract, matrix
from .forms import MatrixForm, VerdictForm


@require_GET
def matrix_page(request):
    form = MatrixForm(request.GET)  # every field optional: an empty query shows the default matrix
    result, error, changes = None, None, None
    if form.is_valid():
        try:
            result = matrix.build_matrix(**form.params())
        except checks.CompatInputError as e:
            error = e.message
    if result:
        known = extract.available_releases()  # oldest first
        older = known[:known.index(result.release)] if result.release in known else []
        if older:
            changes = diff.diff_releases(extract.load(older[-1]), extract.load(result.release))
    return render(request, "compat/matrix.html", {"form": form, "m": result, "error": error, "changes": changes},
                  status=200 if result else 400)


@require_GET
def verdict_page(request):
    form = VerdictForm(request.GET)
    report, error = None, None
    if form.is_valid():
        d = form.cleaned_data
        try:
            report = checks.verdict_for(
                matrix.load_model_config(d["model"]), d["gpu"], dtype=d.get("dtype") or "auto",
                kv_cache_dtype=d.get("kv_cache_dtype") or "auto", block_size=d.get("block_size"),
                attention_backend=d.get("attention_backend") or None,
                vllm_version=d.get("vllm_version") or None)
        except checks.CompatInputError as e:
            error = e.message
    status = 200 if report else 400
    template = "compat/_verdict.html" if getattr(request, "htmx", False) else "compat/verdict.html"
    return render(request, template, {"form": form, "verdict": report, "error": error}, status=status)
