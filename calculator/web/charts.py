"""Vega-Lite specs (plain dicts) for the results page; rendered in the browser with vega-embed.

Pure functions: data in, a JSON-serialisable dict out. No Django, no altair.
"""
from __future__ import annotations

from typing import Any

VEGA_LITE_SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"


def speedup_chart_spec(curve: list[tuple[float, float]], *, break_even: float | None,
                       expected_alpha: float | None = None, expected_speedup: float | None = None,
                       title: str = "Speculative decoding: speedup vs acceptance rate",
                       width: int | str = "container", height: int = 260) -> dict[str, Any]:
    """Speedup (TPOT without / with speculation) against the acceptance rate: accepted / drafted tokens, vLLM's
    "Avg Draft acceptance rate" (mean acceptance length ``1 + k x rate``).

    Args:
        curve: ``[(alpha, speedup), ...]`` (``SpecResult.speedup_curve``), alpha in [0, 1).
        break_even: the rate where the speedup is 1 (``SpecResult.break_even_acceptance_rate``); ``None`` when
            speculation never pays, which the chart states in its subtitle.
        expected_alpha, expected_speedup: the expected point (public figure or the user's rate).

    Returns a Vega-Lite v5 spec: the curve, a dashed rule at speedup 1, a rule at the break-even rate, and
    a labelled point at the expected rate. The ``$schema`` URL is an identifier; no network is needed when
    vega-embed is served locally.
    """
    values = [{"alpha": round(a, 4), "speedup": round(s, 4)} for a, s in curve]
    x = {"field": "alpha", "type": "quantitative", "title": "acceptance rate (accepted / drafted tokens)",
         "scale": {"domain": [0, 1]}}
    y = {"field": "speedup", "type": "quantitative", "title": "speedup (×)"}
    layers: list[dict[str, Any]] = [
        {"name": "curve", "data": {"values": values}, "mark": {"type": "line", "point": False},
         "encoding": {"x": x, "y": y, "tooltip": [{"field": "alpha", "format": ".2f"},
                                                  {"field": "speedup", "format": ".2f"}]}},
        {"data": {"values": [{"speedup": 1}]}, "mark": {"type": "rule", "strokeDash": [4, 4], "color": "gray"},
         "encoding": {"y": {"field": "speedup", "type": "quantitative"}}},
    ]
    if break_even is not None:
        layers.append({
            "name": "break_even",
            "data": {"values": [{"alpha": round(break_even, 4), "label": f"break-even rate {break_even:.2f}"}]},
            "layer": [
                {"mark": {"type": "rule", "color": "firebrick"},
                 "encoding": {"x": {"field": "alpha", "type": "quantitative"}}},
                {"mark": {"type": "text", "align": "left", "dx": 4, "dy": -6, "color": "firebrick", "y": 0},
                 "encoding": {"x": {"field": "alpha", "type": "quantitative"}, "text": {"field": "label"}}},
            ],
        })
    if expected_alpha is not None and expected_speedup is not None:
        layers.append({
            "name": "expected",
            "data": {"values": [{"alpha": round(expected_alpha, 4), "speedup": round(expected_speedup, 4),
                                 "label": f"expected: rate {expected_alpha:.2f}, {expected_speedup:.2f}×"}]},
            "layer": [
                {"mark": {"type": "point", "filled": True, "size": 90, "color": "steelblue"},
                 "encoding": {"x": {"field": "alpha", "type": "quantitative"},
                              "y": {"field": "speedup", "type": "quantitative"}}},
                {"mark": {"type": "text", "align": "left", "dx": 8, "dy": 10},
                 "encoding": {"x": {"field": "alpha", "type": "quantitative"},
                              "y": {"field": "speedup", "type": "quantitative"}, "text": {"field": "label"}}},
            ],
        })
    subtitle = ("speculation pays right of the red line" if break_even is not None
                else "speculation never pays at this concurrency")
    return {"$schema": VEGA_LITE_SCHEMA, "title": {"text": title, "subtitle": subtitle}, "width": width,
            "height": height, "layer": layers}


def speedup_chart_for(spec: Any) -> dict[str, Any]:
    """:func:`speedup_chart_spec` from a ``calculator.engine.perf.SpecResult``."""
    return speedup_chart_spec(spec.speedup_curve, break_even=spec.break_even_acceptance_rate,
                              expected_alpha=spec.acceptance_rate, expected_speedup=spec.speedup,
                              title=f"{spec.method}, k={spec.num_speculative_tokens}: speedup vs acceptance rate")


def speedup_concurrency_chart_spec(curves: dict[int, list[tuple[int, float]]], *, k: int, concurrency: int | None,
                                   method: str, width: int | str = "container", height: int = 260,
                                   clients: int | None = None) -> dict[str, Any]:
    """Speedup against the number of concurrent requests, one line per ``num_speculative_tokens``.

    Args:
        curves: ``{k: [(concurrency, speedup), ...]}`` (``SpecResult.speedup_vs_concurrency``: the same cost
            and acceptance model at each concurrency of the grid), concurrency >= 1.
        k: the configured ``num_speculative_tokens`` (its line is drawn thicker).
        concurrency: the configured concurrency (a vertical rule), or ``None``; where the server runs fewer of the
            clients at once, the requests it runs (the curve ends at the server's limit) and ``clients`` the configured
            number (the rule's data then carries ``clients``).
        method: the speculative method, for the title.

    Returns a Vega-Lite v5 spec: a log-scale concurrency axis, a line per k, a dashed rule at speedup 1
    (below it speculation is slower than the plain target).
    """
    values = [{"concurrency": c, "speedup": round(v, 4), "k": f"k={kk}", "configured": kk == k}
              for kk, curve in sorted(curves.items()) for c, v in curve]
    grid = [v["concurrency"] for v in values] or [1]
    layers: list[dict[str, Any]] = [
        {"name": "curves", "data": {"values": values}, "mark": {"type": "line", "point": True},
         "encoding": {"x": {"field": "concurrency", "type": "quantitative", "scale": {"type": "log", "nice": False,
                                                                           "domain": [min(grid), max(grid)]},
                            "title": "concurrent requests"},
                      "y": {"field": "speedup", "type": "quantitative", "title": "speedup (×)"},
                      "color": {"field": "k", "type": "nominal", "title": "num_speculative_tokens"},
                      "strokeWidth": {"condition": {"test": "datum.configured", "value": 3}, "value": 1.5},
                      "tooltip": [{"field": "k"}, {"field": "concurrency"},
                                  {"field": "speedup", "format": ".2f"}]}},
        {"data": {"values": [{"speedup": 1}]}, "mark": {"type": "rule", "strokeDash": [4, 4], "color": "gray"},
         "encoding": {"y": {"field": "speedup", "type": "quantitative"}}},
    ]
    if concurrency:
        point = {"concurrency": concurrency}
        if clients is not None and clients != concurrency:
            point["clients"] = clients
        layers.append({"name": "configured_concurrency", "data": {"values": [point]},
                       "mark": {"type": "rule", "color": "#555"},
                       "encoding": {"x": {"field": "concurrency", "type": "quantitative"}}})
    return {"$schema": VEGA_LITE_SCHEMA,
            "title": {"text": f"{method}: speedup vs concurrency",
                      "subtitle": "below the dashed line speculation is slower than the target alone"},
            "width": width, "height": height, "layer": layers}


def speedup_concurrency_chart_for(spec: Any, concurrency: int | None) -> dict[str, Any] | None:
    """:func:`speedup_concurrency_chart_spec` from a ``SpecResult``; ``None`` when it has no curves (no
    acceptance figure). The curve ends at the speculative server's limit (``SpecResult.concurrency_limit``); more
    clients than that are marked where the server runs them, at the limit."""
    if not spec.speedup_vs_concurrency:
        return None
    limit = getattr(spec, "concurrency_limit", None)
    running = min(concurrency, limit) if concurrency and limit else concurrency
    return speedup_concurrency_chart_spec(spec.speedup_vs_concurrency, k=spec.num_speculative_tokens,
                                          concurrency=running, method=spec.method, clients=concurrency)


def _layer_values(spec: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The data of the layer called ``name`` in a spec of this module ([] when it has none)."""
    for layer in spec.get("layer", ()):
        if layer.get("name") == name:
            return layer["data"]["values"]
    return []


def speedup_table(spec: dict[str, Any]) -> dict[str, Any]:
    """The data of :func:`speedup_chart_spec`'s chart as a table (for screen readers and pages without scripts):
    ``{"rows": [{"alpha", "speedup"}, ...], "break_even": rate or None, "expected": {"alpha", "speedup"} or None}``,
    read from the spec itself, so the table shows exactly what the chart draws."""
    expected = _layer_values(spec, "expected")
    break_even = _layer_values(spec, "break_even")
    return {"rows": [{"alpha": v["alpha"], "speedup": v["speedup"]} for v in _layer_values(spec, "curve")],
            "break_even": break_even[0]["alpha"] if break_even else None,
            "expected": {"alpha": expected[0]["alpha"], "speedup": expected[0]["speedup"]} if expected else None}


def speedup_concurrency_table(spec: dict[str, Any]) -> dict[str, Any]:
    """The data of :func:`speedup_concurrency_chart_spec`'s chart as a table, one row per concurrency and one
    column per ``num_speculative_tokens``: ``{"ks": [k, ...], "configured_k": k, "clients": N or None, "rows":
    [{"concurrency", "speedups": [speedup or None per k], "current"}, ...]}``, read from the spec itself (``current``:
    the configured concurrency, or the requests the server runs at once of them when it runs fewer, ``clients`` then
    being the configured number)."""
    values = _layer_values(spec, "curves")
    ks = sorted({int(v["k"].removeprefix("k=")) for v in values})
    configured_k = next((int(v["k"].removeprefix("k=")) for v in values if v["configured"]), None)
    at = {(int(v["k"].removeprefix("k=")), v["concurrency"]): v["speedup"] for v in values}
    configured = _layer_values(spec, "configured_concurrency")
    current = configured[0]["concurrency"] if configured else None
    return {"ks": ks, "configured_k": configured_k,
            "clients": configured[0].get("clients") if configured else None,
            "rows": [{"concurrency": c, "speedups": [at.get((k, c)) for k in ks], "current": c == current}
                     for c in sorted({v["concurrency"] for v in values})]}
