"""``{% validation_offer request.GET as offer %}``: whether a live worker can validate the calculator's
configuration (``validator.capabilities.who_can_run``), and the workload sets the form offers."""
from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.simple_tag
def validation_offer(query) -> dict[str, Any]:
    """``{"ok": bool, "message": str, "params": [(name, value)], "workloads": [(key, label)],
    "default_workload": str}`` for ``query`` (a QueryDict or ``[(name, value), ...]``).

    ``message`` says why validation is not offered: the request cannot run on a worker (bad or
    unrunnable model, with the field), or no live worker has the hardware it needs."""
    from validator import capabilities, workloads
    from validator.config import ConfigurationError, build_configuration

    items = query.items() if hasattr(query, "items") else query  # QueryDict or [(name, value), ...]
    params = {k: v for k, v in items if v not in (None, "") and k != "validation_workload"}
    offer: dict[str, Any] = {"ok": False, "message": "", "params": sorted(params.items()), "workloads": list(workloads.WORKLOADS.items()),
                             "default_workload": "code" if workloads.is_pair_model(params.get("model")) else "random"}
    if not params.get("model"):
        offer["message"] = "choose a model to validate"
        return offer
    try:
        configuration = build_configuration(params)
    except ConfigurationError as e:
        offer["message"] = f"{e.field}: {e.message}"
        return offer
    who = capabilities.who_can_run(configuration)
    offer.update(ok=who["ok"], message=who["message"], workers=who["workers"], need=who["need"])
    return offer
