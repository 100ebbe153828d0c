"""Number formatting for the results: thousands separators and GiB (2**30 bytes) with two decimals."""
from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def thousands(value) -> str:
    """``131072`` -> ``131,072``; floats keep two decimals; anything else as is."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
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
