from __future__ import annotations

from urllib.parse import urlencode

from django import template

from compat.matrix import source_url

register = template.Library()


@register.filter
def vllm_source(loc, release):
    """``file:line`` -> GitHub URL at the release tag."""
    return source_url(release, loc) or ""


@register.filter
def query(params: dict) -> str:
    return urlencode({k: v for k, v in params.items() if v not in (None, "")})


@register.filter
def declared_value(item):
    if not isinstance(item, dict):
        return ""
    v = item.get("value")
    if isinstance(v, list):
        return ", ".join(str(x) for x in v) if v else "any"
    if isinstance(v, dict):
        return "depends: " + (v.get("if") or v.get("runtime") or "run time")
    if v is None:
        return item.get("note", "-")
    return str(v)
