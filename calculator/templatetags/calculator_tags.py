"""Number formatting for the results: thousands separators and GiB (2**30 bytes) with two decimals."""

from __future__ import annotations

from django import template
from django.utils.html import format_html_join

register = template.Library()


@register.filter
def thousands(value) -> str:
    """``131072`` -> ``131,072``; floats keep two decimals, three below 1 (a share such as SGLang's
    ``mem_fraction_static`` 0.829, which its command passes to three); anything else as is."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1 else f"{value:,.2f}"
    return str(value)


@register.filter
def gib(value) -> str:
    """A GiB figure (already in GiB) with two decimals and the unit: ``14.99 GiB``."""
    if value is None:
        return "—"
    return f"{value:,.2f} GiB"


@register.filter
def kib(value) -> str:
    """A byte count as KiB (2**10 B) with up to two decimals: ``131072`` -> ``128 KiB``."""
    if value is None:
        return "—"
    return f"{value / 1024:,.2f}".rstrip("0").rstrip(".") + " KiB"


@register.simple_tag
def field_errors(errors) -> str:
    """The messages of one field (or the form's non-field errors): the only markup for an error."""
    return format_html_join("", '<p class="error" role="alert">{}</p>', ((e,) for e in errors or ()))


@register.simple_tag
def oob_field_errors(form) -> str:
    """One ``hx-swap-oob`` error container per field (and ``errors-form``) for an htmx response: the
    form stays as typed, and each container gets its messages or is emptied of stale ones."""
    return format_html_join(
        "\n",
        '<div class="field-errors" id="errors-{}" hx-swap-oob="true">{}</div>',
        ((name, field_errors(errors)) for name, errors in form.error_slots),
    )


@register.simple_tag
def apply_params(query: str, params: dict) -> str:
    """A permalink query with ``params`` applied (``""`` removes a parameter), in canonical form (defaults
    left out, the request's field order): the link of a suggestion."""
    from urllib.parse import parse_qsl

    from calculator.web.forms import canonical_query
    from calculator.request import InputError, merge_params, parse_request

    merged = merge_params(dict(parse_qsl(query)), params)
    try:
        return canonical_query(parse_request(merged).to_params())
    except InputError:
        return canonical_query({k: v for k, v in merged.items() if v != ""})


@register.filter
def duration_ms(value) -> str:
    """A predicted time in ms with its unit, to two significant figures: ``"63 ms"``; ten seconds and more in
    seconds (``190,000`` ms -> ``"190 s"``: a burst's queueing TTFT reads better so)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return sig(value)
    return f"{sig(x / 1000)} s" if x >= 10_000 else f"{sig(x)} ms"


@register.filter
def sig(value, digits=2) -> str:
    """A model's estimate to ``digits`` significant figures, with thousands separators: ``1234.5`` ->
    ``1,200``, ``12.345`` -> ``12``, ``0.01234`` -> ``0.012``, ``635.0`` -> ``640`` (half up,
    :func:`calculator.engine.figures.sig_text`). For figures the model cannot know to more digits (the uncalibrated
    roofline speed prediction)."""
    if value is None or isinstance(value, bool):
        return "—" if value is None else str(value)
    try:
        x = float(value)
        digits = int(digits)
    except (TypeError, ValueError):
        return str(value)
    from calculator.engine.figures import sig_text

    return sig_text(x, digits)  # the one rule (half up on the decimal) the JSON's figures and the link preview use


@register.filter
def speedup_table(chart):
    """The rows of a speedup-vs-acceptance-rate chart spec (:func:`calculator.web.charts.speedup_table`)."""
    from calculator.web.charts import speedup_table as table

    return table(chart)


@register.filter
def speedup_concurrency_table(chart):
    """The rows of a speedup-vs-concurrency chart spec (:func:`calculator.web.charts.speedup_concurrency_table`)."""
    from calculator.web.charts import speedup_concurrency_table as table

    return table(chart)
