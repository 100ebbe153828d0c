"""Regenerate ``quant_config_holders.json``: for each model class (``EntryClass``) of each covered SGLang release,
whether an instance carries the ``quant_config`` attribute that ``--kv-cache-dtype auto`` reads.

SGLang resolves ``auto`` with ``getattr(self.model, "quant_config", None)`` and then that object's
``kv_cache_quant_algo`` (``model_executor/model_runner.py`` up to 0.5.10.post1, ``mem_cache/kv_cache_dtype.py`` in
0.5.23; see :mod:`calculator.runtimes.sglang.kv_dtype`). A model class that never sets ``self.quant_config`` (for
example Qwen3.5's ``Qwen3_5MoeForConditionalGeneration`` in 0.5.9) keeps the KV cache in the model dtype whatever
the checkpoint declares. This reads every ``sglang/srt/models/*.py`` of each wheel with ``ast`` (nothing imported)
and, per ``EntryClass``, looks for an assignment ``self.quant_config = ...`` in the class or in its base classes
(resolved by name: the same file, then a ``from sglang.srt.models.X import`` of that file, then the one class of
that name in the package):

- ``holds``: ``self.quant_config = quant_config`` (the loader's object), with the ``file:line`` of the assignment;
- ``none``: neither the class nor its SGLang base classes assign it (bases outside SGLang, such as ``nn.Module``,
  add nothing);
- ``other``: it assigns something else (``None`` for some layers, another module's config), with the line and
  the expression;
- ``unknown``: a class that forwards attributes (``__getattr__``) or a base class this cannot resolve.

    python calculator/runtimes/sglang/data/extract_quant_config_holders.py /work/wheels
"""
from __future__ import annotations

import ast
import json
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
_EXTERNAL_BASES = {"Module", "object", "Generic", "ABC", "Protocol"}


def _classes(z: zipfile.ZipFile) -> tuple[dict, dict, list]:
    """``(classes, imports, entries)`` of a wheel's ``sglang/srt/models`` package: ``classes[name]`` a list of
    ``(file, bases, assignment or None, forwards attributes)``, ``imports[file][name] = (file, name)`` for the
    ``from sglang.srt.models.X import Y`` of each file, ``entries`` the ``(file, EntryClass name)`` pairs."""
    classes: dict[str, list] = defaultdict(list)
    imports: dict[str, dict] = {}
    entries: list[tuple[str, str]] = []
    for name in z.namelist():
        if not (name.startswith("sglang/srt/models/") and name.endswith(".py")):
            continue
        try:
            tree = ast.parse(z.read(name).decode("utf-8-sig"))
        except SyntaxError:
            continue
        imp: dict[str, tuple[str, str]] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sglang.srt.models."):
                path = "sglang/srt/models/" + node.module.removeprefix("sglang.srt.models.").replace(".", "/") + ".py"
                for a in node.names:
                    imp[a.asname or a.name] = (path, a.name)
            elif isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                         if isinstance(b, (ast.Name, ast.Attribute))]
                assign = None
                forwards = any(isinstance(f, ast.FunctionDef) and f.name == "__getattr__" for f in node.body)
                for sub in ast.walk(node):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(
                        sub, ast.AnnAssign) else []
                    for t in targets:
                        if (assign is None and isinstance(t, ast.Attribute) and t.attr == "quant_config"
                                and isinstance(t.value, ast.Name) and t.value.id == "self"):
                            assign = (sub.lineno, ast.unparse(sub.value))
                classes[node.name].append((name, bases, assign, forwards))
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass"
                                                      for t in node.targets):
                vals = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                entries += [(name, v.id) for v in vals if isinstance(v, ast.Name)]
        imports[name] = imp
    return classes, imports, entries


def holders(z: zipfile.ZipFile) -> dict[str, list[str]]:
    """``{EntryClass: [status, where]}`` for one wheel (status ``holds`` / ``none`` / ``other`` / ``unknown``)."""
    classes, imports, entries = _classes(z)

    def find(file: str, name: str):
        same = [c for c in classes.get(name, []) if c[0] == file]
        if same:
            return same[0]
        if name in imports.get(file, {}):
            f2, n2 = imports[file][name]
            got = [c for c in classes.get(n2, []) if c[0] == f2]
            return got[0] if got else None
        anywhere = classes.get(name, [])
        return anywhere[0] if len(anywhere) == 1 else None

    def resolve(file: str, name: str, depth: int = 0) -> list[str]:
        found = find(file, name)
        if found is None or depth > 20:
            return ["unknown", f"{file}: base class {name} not resolved"]
        f, bases, assign, forwards = found
        if assign is not None:
            status = "holds" if assign[1] == "quant_config" else "other"
            return [status, f"{f}:{assign[0]}" + ("" if status == "holds" else f" self.quant_config = {assign[1]}")]
        if forwards:
            return ["unknown", f"{f}: {name} forwards attributes (__getattr__)"]
        for b in bases:
            if b in _EXTERNAL_BASES or (find(f, b) is None and b not in imports.get(f, {})):
                continue  # a base outside SGLang's models (torch, transformers, typing, mixins) adds no quant_config
            got = resolve(f, b, depth + 1)
            if got[0] != "none":
                return got
        return ["none", f"{f}: {name} (and its SGLang base classes) sets no self.quant_config"]

    return {e: resolve(f, e) for f, e in entries}


def main(wheels: Path) -> None:
    sys.path.insert(0, str(HERE.parents[3]))
    from calculator.runtimes.sglang.data.extract_architectures import find_wheel
    from calculator.runtimes.sglang.releases import COVERED

    out = {"about": "Per SGLang release and model class (EntryClass): whether the model keeps self.quant_config, which "
                    "--kv-cache-dtype auto reads (getattr(self.model, 'quant_config', None)); [status, file:line]. "
                    "Read from sglang/srt/models/*.py of each wheel by "
                    "calculator/runtimes/sglang/data/extract_quant_config_holders.py",
           "releases": {}}
    for rel in COVERED:
        with zipfile.ZipFile(find_wheel(wheels, rel)) as z:
            out["releases"][rel] = dict(sorted(holders(z).items()))
    (HERE / "quant_config_holders.json").write_text(json.dumps(out, indent=0) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/work/wheels"))
