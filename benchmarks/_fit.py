"""The grid search and leave-one-source-out refit that the speed-fit scripts share (benchmarks/sglang_speed_fit.py,
benchmarks/rocm_speed_fit.py): one set of terms for every record, never per record."""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence


def grid_points(grid: dict[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, as ``{term: value}``."""
    return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def grid_fit(records: list[dict], points: list[dict], errors_at: Callable[[dict, dict], dict],
             cost: Callable[[list[dict]], float]) -> tuple[int, dict[str, dict]]:
    """Fit on ``records`` by grid search, and refit leave-one-source-out.

    ``errors_at(record, point)`` gives the record's errors (``{metric: (predicted - measured) / measured}``) with
    the grid point's terms; ``cost(errors of several records)`` is what the fit minimizes. Each point is evaluated
    once on every record; the refits reuse that table.

    Returns ``(best, loso)``: the index in ``points`` of the lowest cost over all records, and per
    ``record["source"]`` (sorted) ``{"params": the point fitted without that source's records, "errors": those
    records' errors with it}``."""
    table = [[errors_at(r, pt) for r in records] for pt in points]
    best = min(range(len(points)), key=lambda i: cost(table[i]))
    loso: dict[str, dict] = {}
    for source in sorted({r["source"] for r in records}):
        keep = [j for j, r in enumerate(records) if r["source"] != source]
        b = min(range(len(points)), key=lambda i: cost([table[i][j] for j in keep]))
        loso[source] = {"params": points[b],
                        "errors": [table[b][j] for j, r in enumerate(records) if r["source"] == source]}
    return best, loso
