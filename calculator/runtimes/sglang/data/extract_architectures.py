"""Regenerate ``architectures.json``: the model classes each covered SGLang release registers, and which of them it
treats as multimodal.

SGLang's model registry imports every ``sglang/srt/models/*.py`` and collects its ``EntryClass`` (one class
or a list), see ``sglang/srt/models/registry.py``. This reads those assignments from the release wheels
(``pip download sglang==X --no-deps -d WHEELS``) without importing anything. ``multimodal`` holds, per release that
has them, ``sglang/srt/configs/model_config.py``'s ``multimodal_model_archs`` list and its ``mm_disabled_models`` (the
architectures served text-only unless ``--enable-multimodal``), each with the line it starts on.

    python calculator/runtimes/sglang/data/extract_architectures.py ~/.cache/llmcalc/wheels
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


def multimodal_lists(source: str) -> dict[str, object] | None:
    """``multimodal_model_archs`` (module level) and ``mm_disabled_models`` (in ``ModelConfig``) of a
    ``configs/model_config.py``, with their lines; ``None`` when the release has neither."""
    tree = ast.parse(source)
    # module-level tuples / lists of names, for ``*NAME`` entries (0.5.23: ``*MIMO_V2_MULTIMODAL_ARCHS``)
    consts: dict[str, list[str]] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.List, ast.Tuple))):
            consts[node.targets[0].id] = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]

    def names(elts: list[ast.expr]) -> list[str]:
        got: list[str] = []
        for e in elts:
            if isinstance(e, ast.Constant):
                got.append(e.value)
            elif isinstance(e, ast.Starred) and isinstance(e.value, ast.Name):
                got += consts[e.value.id]
            else:
                raise ValueError(f"unexpected entry at line {e.lineno}")
        return got

    out: dict[str, object] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.List, ast.Tuple))):
            key = {"multimodal_model_archs": "archs", "mm_disabled_models": "text_only"}.get(node.targets[0].id)
            if key:
                out[key] = names(node.value.elts)
                out[f"{key}_line"] = node.lineno
    return out or None


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
                    "calculator/runtimes/sglang/data/extract_architectures.py; multimodal: configs/model_config.py's "
                    "multimodal_model_archs and mm_disabled_models (text-only unless --enable-multimodal)",
           "releases": {}, "multimodal": {}}
    for rel in COVERED:
        whl = find_wheel(wheels, rel)
        with zipfile.ZipFile(whl) as z:
            archs: set[str] = set()
            for name in z.namelist():
                if name.startswith("sglang/srt/models/") and name.endswith(".py"):
                    try:
                        archs.update(entry_classes(z.read(name).decode("utf-8-sig")))  # a BOM (qwen2_classification.py) is not code
                    except SyntaxError:
                        continue
            mm = multimodal_lists(z.read("sglang/srt/configs/model_config.py").decode())
        out["releases"][rel] = sorted(archs)
        if mm:
            out["multimodal"][rel] = mm
    (HERE / "architectures.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    from compat.fetch import default_wheel_dir  # $LLMCALC_WHEEL_DIR or ~/.cache/llmcalc/wheels

    main(Path(sys.argv[1] if len(sys.argv) > 1 else default_wheel_dir()))
