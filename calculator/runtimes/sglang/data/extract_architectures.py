"""Regenerate ``architectures.json``: the model classes each covered SGLang release registers.

SGLang's model registry imports every ``sglang/srt/models/*.py`` and collects its ``EntryClass`` (one class
or a list), see ``sglang/srt/models/registry.py``. This reads those assignments from the release wheels
(``pip download sglang==X --no-deps -d WHEELS``) without importing anything.

    python calculator/runtimes/sglang/data/extract_architectures.py /work/wheels
"""
from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def entry_classes(source: str) -> list[str]:
    names: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets):
            vals = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            names += [v.id for v in vals if isinstance(v, ast.Name)]
    return names


def find_wheel(wheels: Path, release: str) -> Path:
    """The release's wheel in ``wheels``: ``sglang-X-py3-none-any.whl`` up to 0.5.10, a platform wheel from 0.5.23
    (``sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl``); any of them carries the same Python sources."""
    found = sorted(wheels.glob(f"sglang-{release}-*.whl"))
    if not found:
        raise FileNotFoundError(f"no sglang-{release}-*.whl in {wheels} (pip download sglang=={release} --no-deps "
                                f"-d {wheels})")
    return found[0]


def main(wheels: Path) -> None:
    sys.path.insert(0, str(HERE.parents[3]))
    from calculator.runtimes.sglang.releases import COVERED

    out = {"about": "EntryClass names per SGLang release, read from sglang/srt/models/*.py of each wheel by "
                    "calculator/runtimes/sglang/data/extract_architectures.py", "releases": {}}
    for rel in COVERED:
        whl = find_wheel(wheels, rel)
        with zipfile.ZipFile(whl) as z:
            archs: set[str] = set()
            for name in z.namelist():
                if name.startswith("sglang/srt/models/") and name.endswith(".py"):
                    try:
                        archs.update(entry_classes(z.read(name).decode()))
                    except SyntaxError:
                        continue
        out["releases"][rel] = sorted(archs)
    (HERE / "architectures.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/work/wheels"))
