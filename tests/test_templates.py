"""Template hygiene: Django's ``{# ... #}`` comment is single-line only; a multi-line one is printed on the page
as text (a run page once showed its report template's comment to users)."""
from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def test_no_template_has_a_multi_line_hash_comment():
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for opening in re.finditer(r"\{#", line):
                if "#}" not in line[opening.end():]:
                    offenders.append(f"{path.relative_to(TEMPLATES)}:{n}")
    assert offenders == []
