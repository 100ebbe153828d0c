"""Calculator pages: the home page (form + results, live with htmx) and the JSON API.

Thin views: query -> ``EstimateForm`` -> ``EngineInput`` -> ``calculator.results.build`` -> render.
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import parse_qsl

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import push_url

from calculator import catalog, results
from calculator.engine.errors import EngineInputError
from calculator.forms import EstimateForm, tidy_query

# Engine error fields that the form splits into several inputs: show the message by this one.
_FORM_FIELD = {"speculative_config": "speculative_method", "speculative_config.model": "speculative_model"}


def _evaluate(form: EstimateForm) -> results.Outcome | None:
    """Validate the form and run the engine; engine and metadata errors go onto the field they name."""
    if not form.is_valid():
        return None
    try:
        inp, meta = form.to_engine_input()
        return results.build(form, inp, meta)
    except EngineInputError as exc:
        field = _FORM_FIELD.get(exc.field, exc.field)
        form.add_error(field if field in form.fields else None, exc.message)
        return None


@lru_cache(maxsize=1)
def _validate_url() -> str | None:
    """Where the "Validate on a GPU worker" button posts (``None`` hides it until the validator exists)."""
    try:
        return reverse("validator:new")
    except NoReverseMatch:
        return None


@require_safe
@vary_on_headers("HX-Request")
def home(request: HttpRequest) -> HttpResponse:
    """``/``: the form; with ``?model=...`` the results too. htmx requests get only the results fragment
    (plus out-of-band field errors) and the canonical permalink in ``HX-Push-Url``; a full-page GET of a
    non-canonical query is redirected to the permalink; bad input renders the page with a 400."""
    has_model = bool(request.GET.get("model", "").strip())
    form = (
        EstimateForm.from_query(request.GET)
        if has_model
        else EstimateForm(initial=request.GET.dict() or None)
    )
    outcome = _evaluate(form) if has_model else None
    # htmx asks for the whole page when restoring history it no longer has cached
    partial = bool(request.htmx) and not request.htmx.boosted and not request.htmx.history_restore_request
    if outcome and not partial and list(request.GET.items()) != parse_qsl(outcome.canonical_query):
        return redirect(f"{request.path}?{outcome.canonical_query}")
    context = {
        "form": form,
        "outcome": outcome,
        "partial": partial,
        "validate_url": _validate_url(),
        "catalog_models": catalog.catalog_models(),
    }
    if outcome:
        context["permalink_url"] = request.build_absolute_uri(f"{request.path}?{outcome.canonical_query}")
    if partial:
        response = render(request, "calculator/_results.html", context)
        query = outcome.canonical_query if outcome else tidy_query(request.GET)
        return push_url(response, f"{request.path}?{query}" if query else request.path)
    status = 400 if has_model and outcome is None else 200
    return render(request, "calculator/home.html", context, status=status)


@require_safe
def api_estimate(request: HttpRequest) -> JsonResponse:
    """``GET /api/estimate?<the form's parameters>`` -> the keys of ``manage.py estimate --format json``
    (``results.api_payload``); bad input -> 400 ``{"error": sentence, "field": name}``."""
    known = {*EstimateForm.base_fields, "speculative_config"}
    unknown = sorted(set(request.GET) - known)
    if unknown:
        return JsonResponse(
            {
                "error": f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(known))}",
                "field": unknown[0],
            },
            status=400,
        )
    form = EstimateForm.from_query(request.GET)
    if not form.is_valid():
        field, message = form.error_list()[0]
        return JsonResponse(
            {"error": f"{field}: {message}" if field else message, "field": field}, status=400
        )
    try:
        inp, meta = form.to_engine_input()
        payload = results.api_payload(form, inp, meta)
    except EngineInputError as exc:
        return JsonResponse({"error": str(exc), "field": exc.field}, status=400)
    return JsonResponse(payload)
