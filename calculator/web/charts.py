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
    """Speedup (TPOT without / with speculation) against the acceptance rate α per drafted token.

    Args:
        curve: ``[(alpha, speedup), ...]`` (``SpecResult.speedup_curve``), alpha in [0, 1).
        break_even: α where the speedup is 1 (``SpecResult.break_even_acceptance_rate``); ``None`` when
            speculation never pays, which the chart states in its subtitle.
        expected_alpha, expected_speedup: the expected point (public figure or the user's rate).

    Returns a Vega-Lite v5 spec: the curve, a dashed rule at speedup 1, a rule at the break-even α, and
    a labelled point at the expected α. The ``$schema`` URL is an identifier; no network is needed when
    vega-embed is served locally.
    """
    values = [{"alpha": round(a, 4), "speedup": round(s, 4)} for a, s in curve]
    x = {"field": "alpha", "type": "quantitative", "title": "acceptance rate α per drafted token",
         "scale": {"domain": [0, 1]}}
    y = {"field": "speedup", "type": "quantitative", "title": "speedup (×)"}
    layers: list[dict[str, Any]] = [
        {"data": {"values": values}, "mark": {"type": "line", "point": False},
         "encoding": {"x": x, "y": y, "tooltip": [{"field": "alpha", "format": ".2f"},
                                                  {"field": "speedup", "format": ".2f"}]}},
        {"data": {"values": [{"speedup": 1}]}, "mark": {"type": "rule", "strokeDash": [4, 4], "color": "gray"},
         "encoding": {"y": {"field": "speedup", "type": "quantitative"}}},
    ]
    if break_even is not None:
        layers.append({
            "data": {"values": [{"alpha": round(break_even, 4), "label": f"break-even α = {break_even:.2f}"}]},
            "layer": [
                {"mark": {"type": "rule", "color": "firebrick"},
                 "encoding": {"x": {"field": "alpha", "type": "quantitative"}}},
                {"mark": {"type": "text", "align": "left", "dx": 4, "dy": -6, "color": "firebrick", "y": 0},
                 "encoding": {"x": {"field": "alpha", "type": "quantitative"}, "text": {"field": "label"}}},
            ],
        })
    if expected_alpha is not None and expected_speedup is not None:
        layers.append({
            "data": {"values": [{"alpha": round(expected_alpha, 4), "speedup": round(expected_speedup, 4),
                                 "label": f"expected: α {expected_alpha:.2f}, {expected_speedup:.2f}×"}]},
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
