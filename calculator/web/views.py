"""Calculator pages: the home page (form + results, live with htmx) and the JSON API.

Thin views: query -> ``ServingRequest`` (through ``EstimateForm`` on the page) -> ``make_plan`` -> render.
"""

from __future__ import annotations

import logging
import uuid
from functools import lru_cache
from urllib.parse import parse_qsl

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import push_url

from calculator.metadata import catalog
from calculator.web import presets, results
from calculator.engine.errors import EngineInputError
from calculator.web.forms import EstimateForm, tidy_query
from calculator.plan import make_plan
from calculator.request import gpu_choice_note, parse_request, runtime_named

def _evaluate(form: EstimateForm) -> results.Outcome | None:
    """Validate the form (the request model) and answer it; input errors go beside the field they name."""
    if not form.is_valid() or form.request is None:
        return None
    try:
        return results.build(make_plan(form.request))
    except EngineInputError as exc:
        form.show_error(runtime_named(exc, form.request.runtime))
        return None


logger = logging.getLogger("calculator")


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
    """``/``: the form and the results. With no query the landing page answers the first example
    (:mod:`calculator.web.presets`); with ``?model=...`` the results follow the query. htmx requests get only
    the results fragment (plus out-of-band field errors) and the canonical permalink in ``HX-Push-Url``; a
    full-page GET of a non-canonical query is redirected to the permalink; bad input is a 400 on both paths (the
    full page with the form as typed; for htmx the fragment with the error summary and the field errors, which
    the page's ``htmx-config`` swaps in, and ``HX-Push-Url: false``, so the bad address never enters the
    history). A query without a model (the model field emptied) says so by the model field.

    A query with parameters the answer leaves out (:attr:`EstimateForm.not_applied`) is answered in the same
    response, not redirected: the notice naming each of them is rendered from the request itself (no session or
    cookie carries it), with the address as given; the page's script puts the permalink in the address bar.

    Back / Forward: the page sets htmx's ``historyCacheSize`` to 0, so htmx asks for the whole page
    (``HX-History-Restore-Request``) and the form and the results are both re-rendered from the URL."""
    landing = not request.GET
    form = EstimateForm.from_query(dict(presets.landing().params) if landing else request.GET)
    outcome = _evaluate(form)  # without a model: the request model's "give a model" by the model field
    # htmx asks for the whole page when restoring history it no longer has cached
    partial = bool(request.htmx) and not request.htmx.boosted and not request.htmx.history_restore_request
    notes = form.not_applied
    if (outcome and not partial and not landing and not notes
            and list(request.GET.items()) != parse_qsl(outcome.canonical_query)):
        return redirect(f"{request.path}?{outcome.canonical_query}")
    context = {
        "form": form,
        "outcome": outcome,
        "partial": partial,
        "landing": landing,
        "presets": presets.PRESETS,
        "validate_url": _validate_url(),
        "catalog_models": catalog.catalog_models(),
        "not_applied": notes,
        "asked": _asked(request) if notes and not partial else None,
    }
    permalink = f"{request.path}?{outcome.canonical_query}" if outcome else None
    if outcome:
        context["permalink_path"] = permalink
        context["permalink_url"] = request.build_absolute_uri(permalink)
        context["compat_query"] = compat_query(outcome)
    status = 400 if outcome is None else 200
    if partial:
        response = render(request, "calculator/_results.html", context, status=status)
        return push_url(response, permalink if outcome else False)
    return render(request, "calculator/home.html", context, status=status)


MAX_SHOWN_ADDRESS = 400  # characters of the address as given shown beside the "Not applied" notes


def _asked(request: HttpRequest) -> str:
    """The address as the user gave it, shown under the "Not applied" notes of a full page (cut after
    :data:`MAX_SHOWN_ADDRESS` characters)."""
    asked = request.get_full_path()
    return asked if len(asked) <= MAX_SHOWN_ADDRESS else asked[:MAX_SHOWN_ADDRESS] + "…"


def compat_query(outcome) -> str:
    """The compat page's query for the calculator's state: model, GPU, KV-cache dtype, release (the
    pickers of ``/compat/`` start there)."""
    from urllib.parse import urlencode

    r = outcome.plan.request
    params = {"model": outcome.model_id, "gpu": r.gpu, "kv_cache_dtype": r.kv_cache_dtype or "auto"}
    if r.runtime == "vllm" and r.vllm_version:
        params["vllm_version"] = r.vllm_version
    return urlencode(params, safe="/")


#: the methods the read-only JSON API answers (its ``Allow`` header on a 405)
API_METHODS = ("GET", "HEAD")


def read_only_json(view):
    """A read-only JSON endpoint: any method but GET / HEAD is a JSON 405 with ``Allow: GET, HEAD`` and the
    sentence saying how to ask. The view is exempt from the CSRF check so that a POST gets that 405 rather than
    Django's HTML "CSRF verification failed" page: nothing but GET / HEAD ever reaches the view, and those change
    nothing (the CSRF check applies to unsafe methods only), so no protection is given up."""
    from functools import wraps

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        if request.method not in API_METHODS:
            response = JsonResponse({"error": f"method {request.method} not allowed: the API is read-only, use GET "
                                              "with query parameters (/api/estimate?model=...&gpu=...)"},
                                    status=405)
            response["Allow"] = ", ".join(API_METHODS)
            return response
        return view(request, *args, **kwargs)

    return csrf_exempt(wrapped)


@read_only_json
def api_estimate(request: HttpRequest) -> JsonResponse:
    """``GET /api/estimate?<the page's parameters>`` -> the keys of ``manage.py estimate --format json``
    (``results.api_payload``), with ``verdict`` and ``suggestions``; bad input -> 400
    ``{"error": sentence, "field": name}``; another method -> 405 (:func:`read_only_json`)."""
    try:
        plan = make_plan(parse_request(request.GET))
        payload = results.api_payload(plan, [n for n in [gpu_choice_note(request.GET)] if n])
    except EngineInputError as exc:
        exc = runtime_named(exc, request.GET.get("runtime"))  # llama.cpp's / Ollama's context is ctx_size
        return JsonResponse({"error": f"{exc.field}: {exc.message}", "field": exc.field}, status=400)
    except Exception:  # an internal fault: logged with a reference, never a traceback to the client
        ref = uuid.uuid4().hex[:12]
        logger.exception("internal error %s on %s", ref, request.get_full_path()[:2000])
        return JsonResponse({"error": f"internal error (reference {ref}); the input was not the problem",
                             "id": ref}, status=500)
    return JsonResponse(payload)
