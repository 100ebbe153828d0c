"""The validation request: the calculator's request (:class:`calculator.request.ServingRequest`), posted with
the permalink's parameter names and checked by the same :func:`~calculator.request.parse_request`."""
from __future__ import annotations

from typing import Any

from django import forms

from calculator.request import ALIASES, KNOWN_PARAMS, InputError, parse_request, repeated_parameter

from .config import WORKLOAD_PARAM
from .workloads import WORKLOADS


class ValidationRequestForm(forms.Form):
    """Valid when the posted parameters are a valid calculator request (same bounds, choices, speculative
    allow-list and messages as the page, the API and the commands); unknown parameters are refused."""

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        raw = {k: v for k, v in self.data.items() if k not in ("csrfmiddlewaretoken", WORKLOAD_PARAM)}
        workload = self.data.get(WORKLOAD_PARAM)
        if workload and workload not in WORKLOADS:
            self.add_error(None, f"{WORKLOAD_PARAM}: unknown workload set {workload!r}; one of {', '.join(WORKLOADS)}")
        repeated = repeated_parameter(self.data)
        if repeated is not None:
            self.add_error(None, f"{repeated.field}: {repeated.message}")
            return data
        try:
            parse_request({"gpu": "CPU", **raw})
        except InputError as exc:
            self.add_error(None, f"{exc.field}: {exc.message}")
        return data

    def params(self) -> dict[str, Any]:
        """The posted request parameters that were given (empty ones dropped), under their own names or a
        runtime's alias (SGLang's ``tp_size``, ``context_length``: ``clean`` checked them as such)."""
        return {k: v for k, v in self.data.items()
                if (k in KNOWN_PARAMS or k in ALIASES or k == WORKLOAD_PARAM) and v not in (None, "")}
