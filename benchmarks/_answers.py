"""Shared tail of the answer-map scripts (verdict_or_error.py, sglang_config_sweep.py): the count of changed
answers and the JSON file of every answer."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


def print_changes(changed: Counter) -> None:
    """The ``changes by kind`` table: how many (model, release) pairs went from one kind of answer to another
    (``changed``: ``(kind before, kind after)`` -> count), the most common first."""
    print("\nchanges by kind:")
    for (b, a), n in changed.most_common():
        print(f"  {n:5d}  {b} -> {a}")


def write_answers(path: str | None, results: dict) -> None:
    """Every answer as JSON to ``path`` (``--out``; nothing when it is not given), the file
    ``verdict_or_error.py --compare`` reads back."""
    if path:
        Path(path).write_text(json.dumps(results, indent=1))
