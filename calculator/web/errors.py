"""Friendly error pages (400, 403 for a failed CSRF check, 404, 414, 500) in the site's layout that keep what the
user asked.

Each page offers the calculator with the parameters of the failed request that the calculator knows
(``calculator.request.KNOWN_PARAMS``, values of at most ``MAX_VALUE_CHARS``), so a mistyped path or an
over-long address does not lose the configuration. Django's own handlers would render ``500.html`` without
the request; these render with it.

Too long an address: gunicorn (``scripts/start``) lets any request line through (``--limit-request-line 0``)
and :class:`LongUrlMiddleware` answers 414 with this page above ``MAX_URL_CHARS``, instead of gunicorn's bare
"Request Line is too large".
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, urlencode

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

log = logging.getLogger(__name__)

# gunicorn's largest finite request-line limit (gunicorn/http/message.py MAX_REQUEST_LINE = 8190).
MAX_URL_CHARS = 8190
MAX_VALUE_CHARS = 500

TITLES = {
    400: "That request could not be read",
    403: "That request was refused",
    404: "No page at this address",
    414: "That address is too long",
    500: "Something broke on our side",
}


def kept_query(request: HttpRequest) -> str:
    """The calculator parameters of the request's query (known names, short values), as a query string."""
    from calculator.request import ALIASES, KNOWN_PARAMS
    from calculator.web.forms import QUERY_SAFE

    raw = request.META.get("QUERY_STRING", "")
    pairs = [(k, v) for k, v in parse_qsl(raw, keep_blank_values=False)
             if (k in KNOWN_PARAMS or k in ALIASES) and len(v) <= MAX_VALUE_CHARS]
    return urlencode(pairs, safe=QUERY_SAFE)


def render_error(request: HttpRequest, status: int, detail: str = "") -> HttpResponse:
    """The error page for ``status`` with the kept parameters (see :func:`kept_query`)."""
    query = kept_query(request)
    context = {
        "status": status,
        "title": TITLES.get(status, "Error"),
        "detail": detail,
        "path": request.path[:300],
        "url_chars": len(request.get_full_path()),
        "max_url_chars": MAX_URL_CHARS,
        "kept_query": query,
        "kept_params": parse_qsl(query),
    }
    try:
        html = render_to_string("error.html", context, request=request)
    except Exception:  # the error page itself must not fail (a broken template, a database down)
        log.exception("error page %s failed to render", status)
        html = f"<!doctype html><title>{status}</title><h1>{TITLES.get(status, 'Error')}</h1><p><a href='/'>llmcalc</a></p>"
    return HttpResponse(html, status=status)


def bad_request(request, exception=None):
    return render_error(request, 400, "The request was malformed or refused (a bad header or cookie, or a field "
                                      "the server could not read).")


def page_not_found(request, exception=None):
    return render_error(request, 404)


def server_error(request):
    return render_error(request, 500, "The error is logged. Your parameters are kept below: try again, or change "
                                      "one of them.")


def csrf_message(request: HttpRequest, reason: str = "") -> str:
    """What a request refused by the CSRF check is told: which check failed (Django's ``reason``), how a form of this
    site is sent again, and that the calculator answers GET (its page and its JSON API need no token)."""
    why = f" ({reason.rstrip('.')})" if reason else ""
    return (f"{request.method} {request.path[:300]} was refused: it carries no valid CSRF token{why}. A form of this "
            "site posts with the token of the page it is on: reload that page (with cookies on) and send the form "
            "again. The calculator answers GET: its page (/?model=...&gpu=..., the permalinks) and its JSON API "
            "(GET /api/estimate?model=...&gpu=...) need no token.")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``settings.CSRF_FAILURE_VIEW``: a 403 that says why in the site's words (:func:`csrf_message`) instead of
    Django's "CSRF verification failed" page: ``{"error": ...}`` JSON for a request that asks for JSON (its
    ``Accept`` prefers ``application/json`` to HTML, or its body is JSON), else the site's short error page. The
    check itself is Django's ``CsrfViewMiddleware``, unchanged; the read-only API is exempt from it and never gets
    here (a POST to it is its JSON 405)."""
    from django.http import JsonResponse

    message = csrf_message(request, reason)
    asks_json = (request.content_type == "application/json"
                 or request.get_preferred_type(["text/html", "application/json"]) == "application/json")
    if asks_json:
        return JsonResponse({"error": message}, status=403)
    return render_error(request, 403, message)


class LongUrlMiddleware:
    """Answers 414 (with :func:`render_error`) for an address longer than ``MAX_URL_CHARS``, before a view
    parses it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if len(request.META.get("QUERY_STRING", "")) + len(request.path) > MAX_URL_CHARS:
            return render_error(request, 414)
        return self.get_response(request)
