"""Regenerate ``config_types.json``: which config ``model_type`` values each covered SGLang release can load.

SGLang reads a checkpoint's ``config.json`` through its own ``get_config`` (``sglang/srt/hf_transformers_utils.py`` up
to 0.4.10.post2, ``sglang/srt/utils/hf_transformers_utils.py`` from 0.5.3, ``sglang/srt/utils/hf_transformers/`` in
0.5.23), which calls transformers' ``AutoConfig.from_pretrained``. That resolves ``config_dict["model_type"]`` in
``CONFIG_MAPPING`` (transformers/models/auto/configuration_auto.py) and raises ``ValueError("The checkpoint you are
trying to load has model type `X` but Transformers does not recognize this architecture. ...")`` for a type it does not
know, unless SGLang registered a config class of its own for it first (``AutoConfig.register`` over its
``_CONFIG_REGISTRY``) or catches that error for the type (``_load_deepseek_v32_model`` for ``deepseek_v32``). This
reads, without importing anything:

- per SGLang release (its wheel and sha256): the ``transformers==X`` its METADATA pins (with the line), the model
  types SGLang registers a config class for (each with file:line: the ``_CONFIG_REGISTRY`` entry, an
  ``AutoConfig.register`` call of ``sglang/srt/configs``), and the types its ``get_config`` catches the
  unknown-type error for;
- per pinned transformers release (its wheel and sha256): the keys of ``CONFIG_MAPPING_NAMES`` (with the line of the
  mapping);
- ``first_known``: for every model type some pin lacks and some transformers release knows, the releases that know
  it, as runs of consecutive PyPI releases (``first`` .. ``last``, with ``before`` the release just before ``first``
  that does not know it, and the line of the entry in ``first``). Every release from the oldest pin to the newest on
  PyPI is read for this (``pip download transformers==V --no-deps``; only the extracted keys are kept).

    python calculator/runtimes/sglang/data/extract_config_types.py ~/.cache/llmcalc/wheels /tmp/transformers-wheels

The transformers wheels missing from the second folder are downloaded into it (``pip download``).
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
_AUTO = "transformers/models/auto/configuration_auto.py"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


# --- transformers ---------------------------------------------------------------------------------------------------
def config_mapping_names(z: zipfile.ZipFile) -> tuple[dict[str, tuple[str, int]], tuple[str, int]]:
    """The keys of ``CONFIG_MAPPING_NAMES`` of a transformers wheel, each with ``(file, line)`` of its entry, and
    ``(file, line)`` where the mapping is defined. Follows the forms read: ``OrderedDict([...])`` /
    ``OrderedDict[str, str]([...])`` in configuration_auto.py (4.x, 5.0-5.3), the mapping imported from
    ``auto_mappings.py`` then ``.update({...})`` and ``OrderedDict(**{...}, **CONFIG_MAPPING_NAMES)`` (5.19)."""
    found: dict[str, tuple[str, int]] = {}
    where: list[tuple[str, int]] = []

    def entries(node: ast.expr, path: str) -> dict[str, tuple[str, int]]:
        out: dict[str, tuple[str, int]] = {}
        if isinstance(node, ast.Call):
            for a in node.args:
                out.update(entries(a, path))
            for kw in node.keywords:
                if kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id == "CONFIG_MAPPING_NAMES":
                    out.update(found)
                elif kw.arg is None:
                    out.update(entries(kw.value, path))
        elif isinstance(node, (ast.List, ast.Tuple)):
            for e in node.elts:
                if isinstance(e, ast.Tuple) and e.elts and isinstance(e.elts[0], ast.Constant):
                    out[e.elts[0].value] = (path, e.lineno)
                else:
                    raise ValueError(f"{path}:{e.lineno}: unexpected CONFIG_MAPPING_NAMES entry")
        elif isinstance(node, ast.Dict):
            for k in node.keys:
                if not isinstance(k, ast.Constant):
                    raise ValueError(f"{path}:{node.lineno}: unexpected CONFIG_MAPPING_NAMES key")
                out[k.value] = (path, k.lineno)
        else:
            raise ValueError(f"{path}:{node.lineno}: unexpected CONFIG_MAPPING_NAMES value")
        return out

    def walk(path: str) -> None:
        nonlocal found
        for node in ast.parse(z.read(path).decode()).body:
            if isinstance(node, ast.ImportFrom) and any(a.name == "CONFIG_MAPPING_NAMES" for a in node.names):
                walk(str(Path(path).parent / (node.module.replace(".", "/") + ".py")))
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                  and node.targets[0].id == "CONFIG_MAPPING_NAMES"):
                found = entries(node.value, path)
                where.append((path, node.lineno))
            elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                  and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "update"
                  and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id == "CONFIG_MAPPING_NAMES"):
                found.update(entries(node.value.args[0], path))

    walk(_AUTO)
    if not found:
        raise ValueError("no CONFIG_MAPPING_NAMES found")
    return found, where[0]


def error_lines(z: zipfile.ZipFile) -> dict[str, str]:
    """``file:line`` of the two errors ``AutoConfig.from_pretrained`` raises for a model type it cannot load: the
    unknown type (``raise ValueError(... "but Transformers does not recognize this architecture" ...)``) and remote
    code refused (``resolve_trust_remote_code``: ``if has_remote_code and not has_local_code and not
    trust_remote_code: raise ValueError(...)``)."""
    out: dict[str, str] = {}
    lines = z.read(_AUTO).decode().splitlines()
    hit = next(i for i, x in enumerate(lines) if "but Transformers does not recognize this architecture" in x)
    out["unknown_type"] = f"{_AUTO}:{next(i for i in range(hit, 0, -1) if 'raise ValueError' in lines[i]) + 1}"
    dyn = "transformers/dynamic_module_utils.py"
    lines = z.read(dyn).decode().splitlines()
    hit = next(i for i, x in enumerate(lines) if re.search(r"if has_remote_code and not has_local_code and not "
                                                             r"trust_remote_code", x))
    out["remote_code"] = f"{dyn}:{hit + 2}"
    return out


def pypi_versions() -> list[str]:
    """transformers' final releases on PyPI, oldest first (``pip index versions transformers``)."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "transformers"], capture_output=True,
                         text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("Available versions:"))
    vs = [v.strip() for v in line.split(":", 1)[1].split(",")]
    return sorted((v for v in vs if re.fullmatch(r"\d+(\.\d+)*", v)), key=_vkey)


def transformers_wheel(folder: Path, version: str) -> Path:
    name = folder / f"transformers-{version}-py3-none-any.whl"
    if not name.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", f"transformers=={version}", "--no-deps", "-q",
                        "-d", str(folder)], check=True)
    return name


# --- SGLang ---------------------------------------------------------------------------------------------------------
_HF_UTILS = ("sglang/srt/utils/hf_transformers/common.py", "sglang/srt/utils/hf_transformers_utils.py",
             "sglang/srt/hf_transformers_utils.py")
_GET_CONFIG = ("sglang/srt/utils/hf_transformers/config.py",) + _HF_UTILS


def find_wheel(wheels: Path, release: str) -> Path:
    found = sorted(wheels.glob(f"sglang-{release}-*.whl"))
    if not found:
        raise FileNotFoundError(f"no sglang-{release}-*.whl in {wheels} (pip download sglang=={release} --no-deps "
                                f"-d {wheels})")
    return found[0]


def transformers_pin(z: zipfile.ZipFile, release: str) -> dict[str, object]:
    """The ``Requires-Dist: transformers==X`` line of the wheel's METADATA (with the extra it sits in, if any)."""
    path = f"sglang-{release}.dist-info/METADATA"
    for n, line in enumerate(z.read(path).decode().splitlines(), 1):
        m = re.match(r"Requires-Dist: transformers==([\w.]+)\s*(?:;\s*extra == \"([\w-]+)\")?", line)
        if m:
            return {"version": m.group(1), "source": f"{path}:{n}", "extra": m.group(2)}
    raise ValueError(f"{path}: no transformers pin")


def _class_model_types(z: zipfile.ZipFile) -> tuple[dict[str, tuple[str, str, int]], dict[str, list[str]]]:
    """``class X: model_type = "..."`` of every ``sglang/srt`` module: name -> (model_type, file, line) (the
    ``sglang/srt/configs`` one where a name is defined twice), and the module-level tuples / lists of names."""
    classes: dict[str, tuple[str, str, int]] = {}
    seqs: dict[str, list[str]] = {}
    for name in sorted(z.namelist()):
        if not (name.startswith("sglang/srt/") and name.endswith(".py")):
            continue
        try:
            tree = ast.parse(z.read(name).decode())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for st in node.body:
                    tgts = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) \
                        else []
                    if (any(isinstance(t, ast.Name) and t.id == "model_type" for t in tgts)
                            and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)):
                        if node.name not in classes or name.startswith("sglang/srt/configs/"):
                            classes[node.name] = (st.value.value, name, st.lineno)
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, (ast.List, ast.Tuple))
                    and all(isinstance(e, ast.Name) for e in node.value.elts)):
                seqs[node.targets[0].id] = [e.id for e in node.value.elts]
    return classes, seqs


def sglang_registry(z: zipfile.ZipFile) -> tuple[dict[str, str], dict[str, str]]:
    """The model types SGLang registers its own config class for (``_CONFIG_REGISTRY`` and ``AutoConfig.register``
    calls of ``sglang/srt/configs`` and the hf-utils module: ``file:line`` of each entry) and those whose
    unknown-type error ``get_config`` catches (``except ValueError as e: if not "deepseek_v32" in str(e): raise``)."""
    names = set(z.namelist())
    classes, seqs = _class_model_types(z)
    reg: dict[str, str] = {}

    def cls_type(node: ast.expr, path: str) -> tuple[str, str]:
        """(model_type, file:line) of a Name (class), ``X.model_type`` or a string constant."""
        if isinstance(node, ast.Attribute) and node.attr == "model_type":
            node = node.value
        if isinstance(node, ast.Name):
            if node.id not in classes:
                raise ValueError(f"{path}:{node.lineno}: class {node.id} has no model_type found")
            t, f, _ = classes[node.id]
            return t, f"{path}:{node.lineno}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value, f"{path}:{node.lineno}"
        raise ValueError(f"{path}:{node.lineno}: unexpected registry entry")

    hf = next(p for p in _HF_UTILS if p in names)
    tree = ast.parse(z.read(hf).decode())
    for node in ast.walk(tree):
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and target.id == "_CONFIG_REGISTRY" and value is not None:
            if isinstance(value, ast.Dict):
                for k in value.keys:
                    t, src = cls_type(k, hf)
                    reg.setdefault(t, src)
            elif isinstance(value, ast.List):
                for e in value.elts:
                    t, src = cls_type(e, hf)
                    reg.setdefault(t, src)
            elif isinstance(value, ast.DictComp):
                it = value.generators[0].iter
                if isinstance(it, (ast.List, ast.Tuple)):
                    for e in it.elts:
                        t, src = cls_type(e, hf)
                        reg.setdefault(t, src)
                # a comprehension over _CONFIG_REGISTRY itself (the list re-keyed by model_type) adds nothing
        elif (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
              and target.value.id == "_CONFIG_REGISTRY"):
            t, src = cls_type(target.slice, hf)
            reg.setdefault(t, src)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "_CONFIG_REGISTRY"):
            arg = node.args[0]
            if isinstance(arg, ast.DictComp) and isinstance(arg.generators[0].iter, ast.Name):
                for cname in seqs[arg.generators[0].iter.id]:
                    reg.setdefault(classes[cname][0], f"{hf}:{node.lineno}")
            else:
                raise ValueError(f"{hf}:{node.lineno}: unexpected _CONFIG_REGISTRY.update")

    # AutoConfig.register(<type or X.model_type>, ...) run when sglang.srt.configs is imported (module level, or a
    # function the module calls), and in the hf-utils module (the loop over _CONFIG_REGISTRY adds nothing new; a loop
    # over a tuple of classes registers each)
    for path in sorted(n for n in names if n.startswith("sglang/srt/configs/") and n.endswith(".py")) + [hf]:
        tree = ast.parse(z.read(path).decode())
        loops: dict[str, list[ast.expr]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Tuple):
                loops[node.target.id] = list(node.iter.elts)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "AutoConfig" and node.args):
                a = node.args[0]
                if isinstance(a, ast.Name):
                    continue  # for name, cls in _CONFIG_REGISTRY.items(): AutoConfig.register(name, cls)
                if (isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id in loops):
                    for e in loops[a.value.id]:
                        t, _ = cls_type(e, path)
                        reg.setdefault(t, f"{path}:{node.lineno}")
                    continue
                t, _ = cls_type(a, path)
                reg.setdefault(t, f"{path}:{node.lineno}")

    caught: dict[str, str] = {}
    for path in (p for p in _GET_CONFIG if p in names):
        for n, line in enumerate(z.read(path).decode().splitlines(), 1):
            m = re.search(r'if not "([\w-]+)" in str\(e\)', line)
            if m:
                caught.setdefault(m.group(1), f"{path}:{n}")
    return dict(sorted(reg.items())), caught


def get_config_lines(z: zipfile.ZipFile) -> dict[str, str]:
    """``file:line`` of ``get_config``'s ``AutoConfig.from_pretrained`` call (0.5.23: ``HfModelConfigParser.parse``'s)
    and of the ``trust_remote_code`` server argument (default False: ``--trust-remote-code``)."""
    names = set(z.namelist())
    out: dict[str, str] = {}
    for path in (p for p in _GET_CONFIG if p in names):
        for node in ast.walk(ast.parse(z.read(path).decode())):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in ("get_config", "HfModelConfigParser"):
                call = next((c for c in ast.walk(node) if isinstance(c, ast.Call)
                             and isinstance(c.func, ast.Attribute) and c.func.attr == "from_pretrained"
                             and isinstance(c.func.value, ast.Name) and c.func.value.id == "AutoConfig"), None)
                if call is not None and "get_config" not in out:
                    out["get_config"] = f"{path}:{call.lineno}"
    for path in ("sglang/srt/server_args.py", "sglang/srt/arg_groups/arg_utils.py"):
        if path in names:
            for n, line in enumerate(z.read(path).decode().splitlines(), 1):
                if re.match(r"\s+trust_remote_code: .*= False", line):
                    out.setdefault("trust_remote_code", f"{path}:{n}")
    if set(out) != {"get_config", "trust_remote_code"}:
        raise ValueError(f"get_config / trust_remote_code not found: {out}")
    return out


def main(wheels: Path, tf_dir: Path) -> None:
    sys.path.insert(0, str(HERE.parents[3]))
    from calculator.runtimes.sglang.releases import COVERED

    tf_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, object] = {
        "about": "Which config model_type values each covered SGLang release loads: the transformers its wheel pins "
                 "(METADATA), the model types SGLang registers its own config class for (_CONFIG_REGISTRY / "
                 "AutoConfig.register) or catches transformers' unknown-type error for (get_config), and the keys of "
                 "each pinned transformers' CONFIG_MAPPING_NAMES; first_known: the transformers releases that know a "
                 "type some pin lacks (runs of consecutive PyPI releases). Read by "
                 "calculator/runtimes/sglang/data/extract_config_types.py from the wheels (sha256 given).",
        "sglang": {}, "transformers": {}, "first_known": {}}
    pins: set[str] = set()
    for rel in COVERED:
        whl = find_wheel(wheels, rel)
        with zipfile.ZipFile(whl) as z:
            pin = transformers_pin(z, rel)
            reg, caught = sglang_registry(z)
            lines = get_config_lines(z)
        pins.add(pin["version"])
        out["sglang"][rel] = {"wheel": whl.name, "sha256": sha256(whl), "transformers": pin, **lines,
                              "registry": reg, "caught": caught}
        print(rel, pin["version"], len(reg), "registered", sorted(caught), file=sys.stderr)

    versions = pypi_versions()
    oldest = min(pins, key=_vkey)
    # a yanked release (4.57.0, SGLang 0.5.3's pin) is not in pip's list: the pins are read whatever pip lists
    read = sorted({v for v in versions if _vkey(v) >= _vkey(oldest)} | pins, key=_vkey)
    known: dict[str, dict[str, tuple[str, int]]] = {}
    for v in read:
        whl = transformers_wheel(tf_dir, v)
        with zipfile.ZipFile(whl) as z:
            types, where = config_mapping_names(z)
        known[v] = types
        if v in pins:
            with zipfile.ZipFile(whl) as z:
                errors = error_lines(z)
            out["transformers"][v] = {"wheel": whl.name, "sha256": sha256(whl), "source": f"{where[0]}:{where[1]}",
                                      "errors": errors, "model_types": sorted(types)}
        print(v, len(types), file=sys.stderr)
    out["transformers_read"] = {"from": read[0], "to": read[-1], "releases": len(read),
                                "yanked_pins": sorted(pins - set(versions), key=_vkey),
                                "how": "pip index versions transformers (yanked releases not listed); every final "
                                       "release from the oldest pin on, and the pins, pip download transformers==V "
                                       "--no-deps"}
    lacking = set().union(*(known[v] for v in read)) - set.intersection(*(set(known[p]) for p in pins))
    for t in sorted(lacking):
        runs, cur = [], None
        for i, v in enumerate(read):
            if t in known[v]:
                if cur is None:
                    cur = {"first": v, "before": read[i - 1] if i else None,
                           "source": f"transformers=={v} {known[v][t][0]}:{known[v][t][1]}"}
                cur["last"] = v
            elif cur is not None:
                runs.append(cur)
                cur = None
        if cur is not None:
            runs.append(cur)
        out["first_known"][t] = runs
    # one line per list of model types and per run, so the file reads (and diffs) by entry
    text = json.dumps(out, indent=1)
    text = re.sub(r'\[\n\s*("[^\]]*?)\n\s*\]', lambda m: "[" + re.sub(r",\n\s*", ", ", m.group(1)) + "]", text)
    text = re.sub(r'\{\n\s*("first"[^}]*?)\n\s*\}', lambda m: "{" + re.sub(r",\n\s*", ", ", m.group(1)) + "}", text)
    (HERE / "config_types.json").write_text(text + "\n")


if __name__ == "__main__":
    from compat.fetch import default_wheel_dir  # $LLMCALC_WHEEL_DIR or ~/.cache/llmcalc/wheels

    main(Path(sys.argv[1] if len(sys.argv) > 1 else default_wheel_dir()),
         Path(sys.argv[2] if len(sys.argv) > 2 else "/tmp/transformers-wheels"))
