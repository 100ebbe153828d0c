"""Read vLLM's attention-backend rules out of its source with ``ast`` (never importing vLLM).

Input: an unpacked vLLM tree, an installed ``vllm`` package directory, or a wheel file (read with
``zipfile``). Output: one JSON document per release (``compat/data/vllm-<release>.json``) holding

* ``backends``: every ``AttentionBackendEnum`` member (``vllm/v1/attention/backends/registry.py``)
  whose class could be found, with its class, file:line, the platforms whose selector names it, and a
  ``declared`` summary (model dtypes, KV-cache dtypes, kernel block sizes, head sizes, compute
  capabilities, MLA / sparse, sinks, sliding window, attention types, multimodal prefix, CUDA graphs,
  the reason strings ``supports_combination`` returns), each with ``source`` = ``file:line``. A value
  vLLM decides at run time (FA3 built or not, an env var) is a ``{"if": condition, "then", "else"}``.
* ``classes`` / ``functions`` / ``modules``: the source of every method and helper those rules call,
  so :mod:`compat.interp` can evaluate them for a concrete configuration. A module's ``constants`` are only the
  literals the source decides; a name the module rebinds in a branch, a ``try``, a loop or a ``global`` function
  (``_ROCM_FLASH_ATTN_AVAILABLE``, set when the upstream flash-attn package imports) is in ``runtime_constants``
  with every binding and what it runs under (:func:`module_bindings`), and is a run-time condition.
* ``platforms``: each platform's selector (``_get_backend_priorities`` for CUDA/ROCm,
  ``get_attn_backend_cls`` for CPU/XPU) with file:line.
* ``cache_dtypes`` (``CacheDType`` Literal) and ``speculative`` (``SpeculativeMethod`` Literal, MTP
  layer key, heterogeneous-vocab flag, and in 0.9 to 0.21 the EAGLE-3 target allowlist ``eagle3_targets``),
  with file:line.
* ``eagle3_interface`` (0.22.1 onwards, where that allowlist is gone): the registered architectures whose model class
  implements ``SupportsEagle3``, which the model runner requires of an EAGLE-3 target (:func:`eagle3_interface`).

The output depends only on the source, so re-running on the same release gives the same bytes.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import interp

SCHEMA_VERSION = 1
# Bump when a change to this module changes what it writes for an unchanged source (recorded in each file).
EXTRACTOR_VERSION = 7
DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Layout:
    """Where one generation of vLLM keeps the attention-backend rules.

    ``v1`` (0.14 onwards): ``vllm/v1/attention/backend.py`` and ``vllm/v1/attention/backends/registry.py``.
    ``attention`` (0.11 to 0.13): the same ``AttentionBackend.validate_configuration`` design, but the base
    class is in ``vllm/attention/backends/abstract.py`` (``validate_configuration`` at line 175 in 0.11.2,
    201 in 0.12.0, 205 in 0.13.0), the enum in ``vllm/attention/backends/registry.py`` (line 34 in all
    three), ``AttentionCGSupport`` in ``vllm/v1/attention/backends/utils.py``.
    """

    name: str
    registry: str
    base_backend: str
    extra_classes: tuple[str, ...]
    inline_prefixes: tuple[str, ...]


_COMMON_INLINE = ("vllm.v1.attention.", "vllm.utils.torch_utils", "vllm.model_executor.layers.attention.",
                  "vllm.platforms.interface", "vllm.platforms.cuda", "vllm.platforms.rocm", "vllm.platforms.cpu",
                  "vllm.platforms.xpu",
                  # 0.33 _get_backend_priorities calls is_quantized_kv_cache (vllm/v1/kv_cache_interface.py:152),
                  # which asks get_kv_cache_dtype_handler (vllm/config/cache.py:161)
                  "vllm.v1.kv_cache_interface", "vllm.config.cache")
LAYOUTS = {
    "v1": Layout("v1", "vllm.v1.attention.backends.registry", "vllm.v1.attention.backend.AttentionBackend",
                 ("vllm.v1.attention.backend.AttentionType", "vllm.v1.attention.backend.AttentionCGSupport"),
                 _COMMON_INLINE),
    "attention": Layout("attention", "vllm.attention.backends.registry",
                        "vllm.attention.backends.abstract.AttentionBackend",
                        ("vllm.attention.backends.abstract.AttentionType",
                         "vllm.v1.attention.backends.utils.AttentionCGSupport"),
                        _COMMON_INLINE + ("vllm.attention.",)),
    # 0.9 / 0.10: no per-backend rules; ``_Backend`` (vllm/platforms/interface.py:41 in 0.10.2) names what
    # VLLM_ATTENTION_BACKEND takes, and each platform's ``get_attn_backend_cls`` returns a class path
    # (vllm/platforms/cuda.py:226 in 0.10.2); see :func:`legacy_backends`
    "legacy": Layout("legacy", "vllm.platforms.interface", "vllm.attention.backends.abstract.AttentionBackend",
                     ("vllm.attention.backends.abstract.AttentionType", "vllm.attention.selector._IsSupported"),
                     _COMMON_INLINE + ("vllm.attention.",)),
}
PLATFORM_SELECTORS = {
    # platform -> candidates, first found wins: (module, function or Class.method, kind)
    "cuda": [("vllm.platforms.cuda", "_get_backend_priorities", "priority_list"),
             # 0.9 / 0.10: if-chains returning a class path (vllm/platforms/cuda.py:226 in 0.10.2)
             ("vllm.platforms.cuda", "CudaPlatformBase.get_attn_backend_cls", "direct")],
    # ROCm has a priority list from 0.18 (vllm/platforms/rocm.py:309 in 0.18.1); before that
    # RocmPlatform.get_attn_backend_cls chose directly (rocm.py:209 in 0.11.2, :353 in 0.17.1)
    "rocm": [("vllm.platforms.rocm", "_get_backend_priorities", "priority_list"),
             ("vllm.platforms.rocm", "RocmPlatform.get_attn_backend_cls", "direct")],
    "cpu": [("vllm.platforms.cpu", "CpuPlatform.get_attn_backend_cls", "direct")],
    "xpu": [("vllm.platforms.xpu", "XPUPlatform.get_attn_backend_cls", "direct")],
}
PLATFORM_VALIDATION_LOOP = {
    # where the platform walks the priority list and keeps the first backend with no reasons
    "cuda": ("vllm.platforms.cuda", "CudaPlatformBase.get_valid_backends"),
    "rocm": ("vllm.platforms.rocm", "RocmPlatform.get_valid_backends"),
}
# Model config classes whose ``verify_and_update_config`` rewrites the attention config, stored with the
# ``MODELS_CONFIG_MAP`` entries that name them (vllm/model_executor/models/config.py): Gemma 4's heterogeneous
# head sizes (config.py:61 in 0.19.0, :229 in 0.32.0). Only these are modelled; other classes of the map are not
# stored, so they change no verdict.
MODEL_CONFIG_CLASSES = ("Gemma4Config",)
MODEL_CONFIG_MODULE = "vllm.model_executor.models.config"
# Which FlashAttention versions the wheel can run and on which devices: ``_is_fa<N>_supported``
# (vllm/vllm_flash_attn/flash_attn_interface.py:72 for FA4 from 0.17.1).
FA_INTERFACE = "vllm/vllm_flash_attn/flash_attn_interface.py"
CAPABILITIES = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"]
ATTN_TYPES = ["decoder", "encoder", "encoder_only", "encoder_decoder"]


class SourceError(Exception):
    """The path is not a vLLM tree, package or wheel (message says what was expected)."""


# ---------------------------------------------------------------- sources
class Source:
    """Files of one vLLM release addressed as ``vllm/...`` paths."""

    def read(self, rel: str) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError

    def provenance(self) -> dict:
        """Where the files came from: ``{"file": name, "sha256": hex or None}``."""
        return {"file": self.label(), "sha256": None}

    def layout(self) -> Layout | None:
        """Which :data:`LAYOUTS` entry this source follows (None: neither)."""
        if self.read("vllm/v1/attention/backend.py") is not None:
            return LAYOUTS["v1"]
        reg = self.read("vllm/attention/backends/registry.py")
        abstract = self.read("vllm/attention/backends/abstract.py") or ""
        if reg is not None and "class AttentionBackendEnum" in reg and "def validate_configuration" in abstract:
            return LAYOUTS["attention"]
        interface = self.read("vllm/platforms/interface.py") or ""
        if reg is None and "class _Backend(" in interface and \
                self.read("vllm/v1/attention/backends/flash_attn.py") is not None:
            return LAYOUTS["legacy"]
        return None

    def metadata(self) -> tuple[str, str] | None:
        """``(path, text)`` of the package's ``*.dist-info/METADATA``, or None (a source tree has none)."""
        return None

    def requirement(self, name: str) -> dict | None:
        """``{"value": "transformers<5,>=4.56.0", "source": "<dist-info>/METADATA:LINE"}``: the package's
        unconditional ``Requires-Dist`` on ``name`` (what ``pip install vllm==X`` installs), or None."""
        meta = self.metadata()
        if meta is None:
            return None
        for i, line in enumerate(meta[1].splitlines(), 1):
            m = re.match(r"Requires-Dist: ([A-Za-z0-9_.-]+)\s*(\[[^]]*\])?\s*([^;]*)(;.*)?$", line)
            if m and m.group(1).lower() == name and not (m.group(4) and "extra" in m.group(4)):
                return {"value": f"{name}{m.group(3).strip()}", "source": f"{meta[0]}:{i}"}
        return None

    def release(self) -> str | None:
        text = self.read("vllm/_version.py") or ""
        m = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text)
        return m.group(1).split("+")[0] if m else None


class DirSource(Source):
    def __init__(self, root: Path):
        self.root = root  # the directory that contains ``vllm/``

    def label(self) -> str:
        metas = sorted(self.root.glob("vllm*.dist-info"))
        return f"installed package {metas[0].name}" if metas else "source tree"

    def metadata(self):
        metas = sorted(self.root.glob("vllm*.dist-info/METADATA"))
        return (str(metas[0].relative_to(self.root)), metas[0].read_text(encoding="utf-8")) if metas else None

    def read(self, rel):
        p = self.root / rel
        return p.read_text(encoding="utf-8") if p.is_file() else None

    def release(self):
        found = super().release()
        if found:
            return found
        for meta in sorted(self.root.glob("vllm*.dist-info/METADATA")):
            m = re.search(r"^Version: (\S+)", meta.read_text(), re.M)
            if m:
                return m.group(1).split("+")[0]
        return None


class WheelSource(Source):
    def __init__(self, path: Path):
        self.zf = zipfile.ZipFile(path)
        self.names = set(self.zf.namelist())
        self.path = path

    def read(self, rel):
        return self.zf.read(rel).decode("utf-8") if rel in self.names else None

    def label(self) -> str:
        return f"wheel {self.path.name}"

    def metadata(self):
        metas = sorted(n for n in self.names if re.fullmatch(r"vllm[^/]*\.dist-info/METADATA", n))
        return (metas[0], self.zf.read(metas[0]).decode("utf-8")) if metas else None

    def provenance(self) -> dict:
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return {"file": self.path.name, "sha256": h.hexdigest()}

    def release(self):
        found = super().release()
        if found:
            return found
        m = re.match(r"vllm(?:_cpu)?-([0-9][^-]*)-", self.path.name)
        return m.group(1).split("+")[0] if m else None


def open_source(path: str | Path) -> Source:
    """A :class:`Source` for a wheel, an installed ``vllm`` package dir, or a tree containing ``vllm/``.

    Raises:
        SourceError: nothing at ``path`` looks like vLLM, or it follows none of :data:`LAYOUTS` (a vLLM older
            than the V1 engine's ``vllm/v1/attention/backends/flash_attn.py``).
    """
    p = Path(path)
    if p.is_file() and p.suffix in (".whl", ".zip"):
        try:
            src: Source = WheelSource(p)
        except zipfile.BadZipFile as e:
            raise SourceError(f"{p} is not a readable wheel: {e}") from e
    elif p.is_dir() and (p / "platforms" / "interface.py").is_file() and p.name == "vllm":
        src = DirSource(p.parent)  # the package directory itself
    elif p.is_dir() and (p / "vllm" / "platforms" / "interface.py").is_file():
        src = DirSource(p)
    else:
        raise SourceError(
            f"{p}: expected a vLLM wheel (.whl), an installed vllm package directory, or a directory "
            "containing vllm/ (vllm/platforms/interface.py not found)")
    if src.layout() is None:
        raise SourceError(
            f"{p}: neither vllm/v1/attention/backend.py (vLLM >= 0.14), vllm/attention/backends/registry.py "
            "with AttentionBackend.validate_configuration (0.11 to 0.13), nor vllm/platforms/interface.py's _Backend "
            "with the V1 engine's vllm/v1/attention/backends/flash_attn.py (0.9, 0.10) found")
    return src


# ---------------------------------------------------------------- module parsing
@dataclass
class Module:
    name: str
    file: str
    tree: ast.Module
    imports: dict[str, str] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    constants: dict[str, dict] = field(default_factory=dict)
    # names with a literal module-level assignment whose value is not known from the source alone (see
    # :func:`module_bindings`): name -> every binding, in the order the module runs them
    runtime_constants: dict[str, list[dict]] = field(default_factory=dict)


def _bound_names(target: ast.AST) -> list[str]:
    """The plain names an assignment target binds (``x``, ``x, y``, ``*rest``); attributes and subscripts bind none."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _bound_names(e)]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    return []


def _imports_in(stmts: list[ast.stmt], before: int) -> list[str]:
    """``module.name (:line)`` of each import in ``stmts`` (at any depth) above line ``before``: what a ``try`` block
    tries before an assignment it guards."""
    out = []
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.ImportFrom) and n.lineno < before:
                out += [f"{'.' * n.level}{n.module or ''}.{a.name} (:{n.lineno})" for a in n.names]
            elif isinstance(n, ast.Import) and n.lineno < before:
                out += [f"{a.name} (:{n.lineno})" for a in n.names]
    return out


def module_bindings(tree: ast.Module) -> dict[str, list[dict]]:
    """Every place a module binds each of its global names, in the order the module runs them.

    Returns ``{name: [{"line", "src", "under"}, ...]}``: ``src`` is the assigned expression (``from x import name``,
    ``def name``, the whole statement for an augmented assignment), ``under`` the conditions under which the statement
    runs, outermost first, each with its line: ``current_platform.is_rocm() (:38)``, ``not (current_platform.is_cuda())
    (:22)`` for an ``else`` / ``elif``, ``try (:46) raises nothing before :54 (imports flash_attn.flash_attn_varlen_func
    (:52))``, ``except ImportError (:55)``, a loop or ``with`` body, or a function that declares the name ``global``
    (it runs when that function is called, after the module's own statements). An empty ``under`` is an unconditional
    module-level statement.

    A module constant (``_ROCM_FLASH_ATTN_AVAILABLE = False``, ``vllm/v1/attention/backends/fa_utils.py:20`` in 0.32.0)
    that the module reassigns in a branch (``= True`` at :54, inside ``elif current_platform.is_rocm():`` and a ``try``
    that imports the upstream flash-attn package) has no value the source decides: :func:`parse_module` keeps a literal
    value only when the name's last binding is that unconditional literal assignment.
    """
    out: dict[str, list[dict]] = {}

    def add(name: str, line: int, src: str, under: list[str]):
        out.setdefault(name, []).append({"line": line, "src": src, "under": list(under)})

    def function_globals(fn: ast.AST, under: list[str]):
        declared = {n for s in ast.walk(fn) if isinstance(s, ast.Global) for n in s.names}
        if not declared:
            return
        what = "a method of class" if isinstance(fn, ast.ClassDef) else "function"
        where = [*under, f"{what} {fn.name} (:{fn.lineno}) runs (it declares it global)"]
        for n in ast.walk(fn):
            targets = (n.targets if isinstance(n, ast.Assign) else
                       [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else [])
            for t in targets:
                for name in _bound_names(t):
                    if name in declared:
                        add(name, n.lineno, ast.unparse(n.value) if isinstance(n, (ast.Assign, ast.AnnAssign))
                            and n.value is not None else ast.unparse(n), where)

    def visit(stmts: list[ast.stmt], under: list[str]):
        for s in stmts:
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    for name in _bound_names(t):
                        add(name, s.lineno, ast.unparse(s.value), under)
            elif isinstance(s, ast.AnnAssign):
                if s.value is not None:
                    for name in _bound_names(s.target):
                        add(name, s.lineno, ast.unparse(s.value), under)
            elif isinstance(s, ast.AugAssign):
                for name in _bound_names(s.target):
                    add(name, s.lineno, ast.unparse(s), under)
            elif isinstance(s, (ast.Import, ast.ImportFrom)):
                for a in s.names:
                    name = a.asname or a.name.split(".")[0]
                    add(name, s.lineno, ast.unparse(s), under)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(s.name, s.lineno, f"{'class' if isinstance(s, ast.ClassDef) else 'def'} {s.name}", under)
                function_globals(s, under)
            elif isinstance(s, ast.Delete):
                for t in s.targets:
                    for name in _bound_names(t):
                        add(name, s.lineno, "del", under)
            elif isinstance(s, ast.If):
                test = ast.unparse(s.test)
                visit(s.body, [*under, f"{test} (:{s.lineno})"])
                visit(s.orelse, [*under, f"not ({test}) (:{s.lineno})"])
            elif isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
                for b in s.body:
                    visit([b], [*under, f"try (:{s.lineno}) raises nothing before :{b.lineno}"
                                + (f" (imports {', '.join(imps)})" if (imps := _imports_in(s.body, b.lineno))
                                   else "")])
                for h in s.handlers:
                    visit(h.body, [*under, f"except {ast.unparse(h.type) if h.type else ''} (:{h.lineno})".replace(
                        "except  (", "except (")])
                visit(s.orelse, [*under, f"try (:{s.lineno}) raises nothing (its else)"])
                visit(s.finalbody, [*under, f"finally of try (:{s.lineno})"])
            elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
                head = (f"for {ast.unparse(s.target)} in {ast.unparse(s.iter)}" if not isinstance(s, ast.While)
                        else f"while {ast.unparse(s.test)}")
                for name in (_bound_names(s.target) if not isinstance(s, ast.While) else []):
                    add(name, s.lineno, head, [*under, f"{head} (:{s.lineno})"])
                visit(s.body, [*under, f"{head} (:{s.lineno})"])
                visit(s.orelse, [*under, f"else of {head} (:{s.lineno})"])
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                visit(s.body, [*under, f"with {', '.join(ast.unparse(i) for i in s.items)} (:{s.lineno})"])
            elif isinstance(s, ast.Match):
                for c in s.cases:
                    visit(c.body, [*under, f"match {ast.unparse(s.subject)} case {ast.unparse(c.pattern)} "
                                           f"(:{s.lineno})"])

    visit(tree.body, [])
    # a function's ``global`` assignments run when it is called, after the module's own statements
    for names in out.values():
        names.sort(key=lambda b: any("declares it global" in u for u in b["under"]))
    return out


def _literalish(node: ast.AST) -> bool:
    if isinstance(node, ast.Dict) and not node.keys:  # an empty registry, e.g. _KV_CACHE_DTYPE_HANDLERS = {}
        return True
    return all(isinstance(n, (ast.Constant, ast.Tuple, ast.List, ast.BinOp, ast.operator, ast.Load,
                              ast.UnaryOp, ast.unaryop)) for n in ast.walk(node))


def parse_module(name: str, file: str, text: str) -> Module:
    """Parse one vLLM module: its imports, top-level functions and classes, and its ``constants``: the names a
    top-level statement assigns a literal to (``FA4_HD256_PAGE_SIZE = 128``) whose value the source alone decides. A
    name the module also binds in a branch, a loop, a ``try`` or a function that declares it ``global`` after that
    assignment (:func:`module_bindings`) is not one: it goes to ``runtime_constants`` with every binding and what it
    runs under, so :mod:`compat.interp` treats it as a run-time condition instead of reading its first value."""
    tree = ast.parse(text)
    mod = Module(name, file, tree)
    package = name if file.endswith("__init__.py") else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            for a in node.names:
                mod.imports.setdefault(a.asname or a.name, f"{base}.{a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                mod.imports.setdefault(a.asname or a.name.split(".")[0],
                                       a.name if a.asname else a.name.split(".")[0])
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            mod.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            mod.classes[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if _literalish(node.value):
                mod.constants[node.targets[0].id] = {"src": ast.unparse(node.value), "line": node.lineno}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if _literalish(node.value):
                mod.constants[node.target.id] = {"src": ast.unparse(node.value), "line": node.lineno}
    if mod.constants:
        bindings = module_bindings(tree)
        for const in list(mod.constants):
            found = bindings.get(const, [])
            last = found[-1] if found else None
            if last is not None and not last["under"] and last["line"] == mod.constants[const]["line"]:
                continue  # its last binding is the unconditional literal assignment: the value is known
            del mod.constants[const]
            mod.runtime_constants[const] = found
    return mod


class Extractor:
    def __init__(self, source: Source):
        self.src = source
        self.layout = source.layout() or LAYOUTS["v1"]
        self._modules: dict[str, Module | None] = {}
        self.out_classes: dict[str, dict] = {}
        self.out_functions: dict[str, dict] = {}
        self.used_modules: set[str] = set()

    # --- loading
    def module(self, name: str) -> Module | None:
        if name in self._modules:
            return self._modules[name]
        rel = name.replace(".", "/")
        for cand in (f"{rel}.py", f"{rel}/__init__.py"):
            text = self.src.read(cand)
            if text is not None:
                mod = self._parse(name, cand, text)
                self._modules[name] = mod
                return mod
        self._modules[name] = None
        return None

    def _parse(self, name: str, file: str, text: str) -> Module:
        return parse_module(name, file, text)

    def resolve(self, module: Module, name: str) -> str | None:
        """Qualified name that ``name`` means inside ``module`` (a def there, or what it imports)."""
        if name in module.functions or name in module.classes:
            return f"{module.name}.{name}"
        target = module.imports.get(name)
        if target is None:
            return None
        # follow re-exports (``from vllm.platforms import current_platform`` stays as is)
        mod_name, _, attr = target.rpartition(".")
        m = self.module(mod_name) if mod_name.startswith("vllm") else None
        if m is not None and attr not in m.functions and attr not in m.classes and attr in m.imports:
            return m.imports[attr]
        return target

    def find_class(self, qualname: str) -> tuple[Module, ast.ClassDef] | None:
        mod_name, _, cls = qualname.rpartition(".")
        m = self.module(mod_name)
        if m is None:
            return None
        if cls in m.classes:
            return m, m.classes[cls]
        target = m.imports.get(cls)
        if target and target != qualname:
            return self.find_class(target)
        return None

    # --- storing classes and functions (with everything they reference)
    def store_class(self, qualname: str, fill: Callable[[Module, ast.ClassDef, dict], None]) -> str | None:
        """Store the class ``qualname`` names (through re-exports) once in ``out_classes``: where it is defined, then
        its vLLM bases, each stored the same way (with the same ``fill``), then ``fill(module, class node, entry)``
        adds what the entry keeps of its body. Returns the qualified name it is stored under; None when not found."""
        found = self.find_class(qualname)
        if found is None:
            return None
        mod, node = found
        q = f"{mod.name}.{node.name}"
        if q in self.out_classes:
            return q
        self.used_modules.add(mod.name)
        entry: dict[str, Any] = {"module": mod.name, "name": node.name, "file": mod.file, "line": node.lineno,
                                 "bases": [], "attrs": {}, "methods": {}}
        self.out_classes[q] = entry
        for b in node.bases:
            if isinstance(b, ast.Subscript):  # Generic base: AttentionMetadataBuilder[Meta]
                b = b.value
            if isinstance(b, ast.Name):
                bq = self.resolve(mod, b.id)
                if bq and bq.startswith("vllm"):
                    stored = self.store_class(bq, fill)
                    if stored:
                        entry["bases"].append(stored)
        fill(mod, node, entry)
        return q

    def add_class(self, qualname: str) -> str | None:
        """Store a class (see :meth:`store_class`) with every method and class attribute, and what they reference."""
        return self.store_class(qualname, self._fill_class)

    def _fill_class(self, mod: Module, node: ast.ClassDef, entry: dict[str, Any]) -> None:
        """:meth:`add_class`'s part of the entry: enum kind, methods, class attributes."""
        base_names = [ast.unparse(b) for b in node.bases]
        if any(b.endswith("Enum") for b in base_names):
            # ``class AttentionType(str, Enum)`` up to 0.33; ``class AttentionType(StrEnum)`` from 0.34
            # (vllm/v1/attention/backend.py:34 in 0.34.0): both compare equal to their string values
            str_enum = "str" in base_names or any(b.rpartition(".")[2] == "StrEnum" for b in base_names)
            entry["enum"] = "str" if str_enum else "plain"
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                decos = [ast.unparse(d) for d in item.decorator_list]
                kind = ("classmethod" if "classmethod" in decos else
                        "staticmethod" if "staticmethod" in decos else
                        "property" if "property" in decos else "method")
                entry["methods"][item.name] = {"src": ast.unparse(item), "line": item.lineno, "kind": kind}
                self._add_referenced(mod, item)
            elif isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name):
                entry["attrs"][item.targets[0].id] = {"src": ast.unparse(item.value), "line": item.lineno}
                self._add_referenced(mod, item.value)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                entry["attrs"][item.target.id] = {"src": ast.unparse(item.value), "line": item.lineno}
                self._add_referenced(mod, item.value)

    def add_function(self, qualname: str) -> str | None:
        if qualname in self.out_functions:
            return qualname
        mod_name, _, name = qualname.rpartition(".")
        mod = self.module(mod_name)
        if mod is None or name not in mod.functions:
            return None
        node = mod.functions[name]
        self.used_modules.add(mod.name)
        self.out_functions[qualname] = {"module": mod.name, "file": mod.file, "line": node.lineno,
                                        "src": ast.unparse(node)}
        self._add_referenced(mod, node)
        return qualname

    def _add_referenced(self, mod: Module, node: ast.AST):
        self.used_modules.add(mod.name)
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                q = self.resolve(mod, n.id)
                if not q or not q.startswith(self.layout.inline_prefixes):
                    continue
                mod_name, _, attr = q.rpartition(".")
                m = self.module(mod_name)
                if m is None:
                    continue
                if attr in m.functions:
                    self.add_function(q)
                elif self.layout.name == "legacy" and ("Builder" in attr or "Impl" in attr):
                    # 0.9 / 0.10: no rule reads the metadata builders; implementations are stored by add_init_only
                    continue
                elif attr in m.classes and (attr.endswith(("Enum", "Type", "Support")) or
                                            "Builder" in attr or "Backend" in attr or
                                            any(ast.unparse(b).endswith("Enum") for b in m.classes[attr].bases)):
                    self.add_class(q)

    # --- registry, platforms, literals
    def registry(self) -> list[dict]:
        reg = self.layout.registry
        mod = self.module(reg)
        if mod is None or "AttentionBackendEnum" not in mod.classes:
            raise SourceError(f"{reg}: AttentionBackendEnum not found")
        out = []
        for item in mod.classes["AttentionBackendEnum"].body:
            if (isinstance(item, ast.Assign) and isinstance(item.targets[0], ast.Name)
                    and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str)
                    and item.value.value):
                out.append({"name": item.targets[0].id, "path": item.value.value, "registry_line": item.lineno})
        return out

    def literal_values(self, module: str, name: str) -> tuple[list[str], int] | None:
        mod = self.module(module)
        if mod is None:
            return None
        for node in mod.tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name:
                return self._literal(mod, node.value), node.lineno
        return None

    def _literal(self, mod: Module, node: ast.AST) -> list[str]:
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "Literal":
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            out: list[str] = []
            for e in elts:
                if isinstance(e, ast.Constant):
                    out.append(e.value)
                elif isinstance(e, ast.Name):
                    found = self.literal_values(mod.name, e.id)
                    if found:
                        out.extend(found[0])
            return out
        return []


def _literal_in(ex: Extractor, name: str, modules: tuple[str, ...]) -> tuple[list[str], str, int] | None:
    """``(values, file, line)`` of the ``name = Literal[...]`` in the first of ``modules`` that defines it."""
    for module in modules:
        found = ex.literal_values(module, name)
        if found:
            return found[0], ex.module(module).file, found[1]
    return None


def _find_line(text: str | None, needle: str) -> int | None:
    if not text:
        return None
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i
    return None


def _is_model_type(node: ast.AST) -> bool:
    """``<...>.hf_text_config.model_type``."""
    return isinstance(node, ast.Attribute) and node.attr == "model_type" and \
        isinstance(node.value, ast.Attribute) and node.value.attr == "hf_text_config"


def eagle3_targets(spec_text: str | None, spec_file: str) -> dict | None:
    """The EAGLE-3 target allowlist of ``SpeculativeConfig`` (its ``_verify_args``): the ``if`` that raises when
    ``self.method`` is ``"eagle3"`` (from 0.17 also ``"extract_hidden_states"``) and no listed name is a substring
    of the target's ``hf_text_config.model_type``. 0.9 / 0.10.0 test ``"llama" not in ...model_type``
    (vllm/config.py:2906-2910 in 0.9.2); 0.10.1 to 0.16 name the list ``eagle3_target_supported``, 0.17 onwards
    ``aux_hidden_states_supported``; a release without such an ``if`` gives ``None``.

    Returns ``{"methods", "values", "source" (the list's file:line), "check" (the if's file:line), "message"}``;
    ``message`` is vLLM's ``ValueError`` text with ``{method}``, ``{targets}`` and ``{model_type}`` standing for
    the method, the list and the model type (as vLLM's f-string prints them: ``str(list)``, ``repr(str)``).
    """
    if not spec_text:
        return None
    try:
        tree = ast.parse(spec_text)
    except SyntaxError:
        return None
    lists: dict[str, tuple[list[str], int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, (ast.List, ast.Tuple)) \
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts):
            lists[node.targets[0].id] = ([e.value for e in node.value.elts], node.lineno)
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        methods: list[str] = []
        values: list[str] | None = None
        list_line = None
        list_name = None
        for sub in ast.walk(node.test):
            if isinstance(sub, ast.Compare) and isinstance(sub.left, ast.Attribute) and sub.left.attr == "method":
                right = sub.comparators[0]
                if isinstance(sub.ops[0], ast.Eq) and isinstance(right, ast.Constant):
                    methods = [right.value]
                elif isinstance(sub.ops[0], ast.In) and isinstance(right, (ast.Tuple, ast.List)):
                    methods = [e.value for e in right.elts if isinstance(e, ast.Constant)]
            elif isinstance(sub, ast.Compare) and isinstance(sub.ops[0], ast.NotIn) \
                    and isinstance(sub.left, ast.Constant) and _is_model_type(sub.comparators[0]):
                values, list_line = [sub.left.value], sub.lineno
            elif isinstance(sub, ast.GeneratorExp) and isinstance(sub.elt, ast.Compare) \
                    and _is_model_type(sub.elt.comparators[0]) and isinstance(sub.generators[0].iter, ast.Name):
                list_name = sub.generators[0].iter.id
                if list_name in lists:
                    values, list_line = lists[list_name]
        if "eagle3" not in methods or values is None:
            continue
        raise_ = next((n for n in node.body if isinstance(n, ast.Raise)), None)
        message = None
        if raise_ is not None and isinstance(raise_.exc, ast.Call) and raise_.exc.args:
            message = _message_template(raise_.exc.args[0], list_name)
        return {"methods": methods, "values": values, "source": f"{spec_file}:{list_line}",
                "check": f"{spec_file}:{node.lineno}", "message": message}
    return None


def _message_template(node: ast.AST, list_name: str | None) -> str | None:
    """An f-string's text with ``{method}`` / ``{targets}`` / ``{model_type}`` for its three expressions."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if not isinstance(node, ast.JoinedStr):
        return None
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            out.append(str(part.value).replace("{", "{{").replace("}", "}}"))
        elif isinstance(part, ast.FormattedValue):
            v = part.value
            if _is_model_type(v):
                out.append("{model_type}")
            elif isinstance(v, ast.Name) and v.id == list_name:
                out.append("{targets}")
            elif isinstance(v, ast.Attribute) and v.attr == "method":
                out.append("{method}")
            else:
                return None
    return "".join(out)


# ---------------------------------------------------------------- summaries
def _jsonable(v: Any) -> Any:
    if isinstance(v, interp.Fork):
        return {"if": v.condition, "then": _jsonable(v.then), "else": _jsonable(v.otherwise)}
    if isinstance(v, interp.Raised):
        return {"raises": f"{v.kind}: {v.message}"}
    if isinstance(v, (list, tuple, set)):
        items = [_jsonable(x) for x in v]
        return sorted(items, key=str) if isinstance(v, set) else items
    if isinstance(v, interp.MultipleOf):
        return f"MultipleOf({v.base})"
    if isinstance(v, interp.Unknown):
        return {"runtime": v.text}
    if isinstance(v, interp.BackendRef):
        return v.name
    if isinstance(v, interp.Capability):
        return v.as_version_str()
    return v


def _loc(data: dict, cls_q: str, name: str) -> str | None:
    ev = interp.Evaluator(data=data, platform=interp.Platform("cuda", None))
    found = ev.find_member(cls_q, name)
    if not found:
        return None
    owner = data["classes"][found[0]]
    return f"{owner['file']}:{found[2]['line']}"


def summarize_backend(data: dict, cls_q: str, platform: str) -> dict:
    """The declared capabilities of one backend class, each ``{"value": ..., "source": file:line}``."""
    cap_unknown = interp.Unknown("device_capability")
    plat = interp.Platform(platform, cap_unknown)  # type: ignore[arg-type]

    def run(fn):
        try:
            return _jsonable(interp.evaluate(fn, data, plat))
        except interp.NotEvaluable as e:
            return {"runtime": f"not evaluable: {e}"}

    def item(name: str, fn, member: str):
        loc = _loc(data, cls_q, member)
        if loc is None:
            return {"value": None, "source": None, "note": f"no {member} rule in this release"}
        return {"value": run(fn), "source": loc}

    def meth(m, *a):
        return lambda ev: ev.call_method(cls_q, m, *a)

    def attr(a):
        return lambda ev: ev.class_attr(interp.ClassRef(cls_q), a)

    s: dict[str, Any] = {
        "model_dtypes": item("model_dtypes", attr("supported_dtypes"), "supported_dtypes"),
        "kv_cache_dtypes": item("kv", attr("supported_kv_cache_dtypes"), "supported_kv_cache_dtypes"),
        "kv_cache_dtype_rule": {"source": _loc(data, cls_q, "supports_kv_cache_dtype")},
        "kernel_block_sizes": item("bs", meth("get_supported_kernel_block_sizes"),
                                   "get_supported_kernel_block_sizes"),
        "head_sizes": item("hs", meth("get_supported_head_sizes"), "get_supported_head_sizes"),
        "head_size_rule": {"source": _loc(data, cls_q, "supports_head_size")},
        "mla": item("mla", meth("is_mla"), "is_mla"),
        "sparse": item("sparse", meth("is_sparse"), "is_sparse"),
        "sinks": item("sinks", meth("supports_sink"), "supports_sink"),
        "sliding_window": item("sw", meth("supports_sliding_window"), "supports_sliding_window"),
        "mm_prefix": item("mm", meth("supports_mm_prefix"), "supports_mm_prefix"),
        "attention_types": {"value": [t for t in ATTN_TYPES
                                      if run(meth("supports_attn_type", t)) is True],
                            "source": _loc(data, cls_q, "supports_attn_type")},
    }
    if platform == "cuda":
        caps = []
        for c in CAPABILITIES:
            major, minor = (int(x) for x in c.split("."))
            cap = interp.Capability(major, minor)
            v = interp.evaluate(lambda ev: ev.call_method(cls_q, "supports_compute_capability", cap), data,
                                interp.Platform("cuda", cap))
            caps.append({"capability": c, "ok": _jsonable(v)})
        s["compute_capability"] = {"value": [c["capability"] for c in caps if c["ok"] is True],
                                   "conditional": [c for c in caps if isinstance(c["ok"], dict)],
                                   "source": _loc(data, cls_q, "supports_compute_capability")}
    # CUDA graphs: the metadata builder's _cudagraph_support (vllm/v1/attention/backend.py:592 in 0.32)
    builder = _builder_class(data, cls_q)
    if builder:
        s["cudagraph_support"] = {
            "value": run(lambda ev: ev.class_attr(interp.ClassRef(builder), "_cudagraph_support")),
            "source": _loc(data, builder, "_cudagraph_support"), "builder": builder}
    # reason strings returned by supports_combination
    reasons = []
    ev = interp.Evaluator(data=data, platform=plat)
    found = ev.find_member(cls_q, "supports_combination")
    if found and found[1] == "method":
        owner = data["classes"][found[0]]
        fn = interp.parse_function(found[2]["src"])
        for n in ast.walk(fn):
            if isinstance(n, ast.Return) and isinstance(n.value, (ast.Constant, ast.JoinedStr)) \
                    and not (isinstance(n.value, ast.Constant) and n.value.value is None):
                text = n.value.value if isinstance(n.value, ast.Constant) else ast.unparse(n.value)
                reasons.append({"reason": text, "source": f"{owner['file']}:{found[2]['line']}"})
    s["combination_reasons"] = reasons
    return s


# ---------------------------------------------------------------- 0.9 / 0.10 (layout "legacy")
LEGACY_V1_PREFIX = "vllm.v1.attention.backends."
# ``VLLM_ATTENTION_BACKEND`` and ``VLLM_USE_V1`` in ``vllm/envs.py`` (lines 478 and 745 in 0.10.2)
ENVS_FILE = "vllm/envs.py"


def _env_line(src: Source, name: str) -> str | None:
    """``vllm/envs.py:LINE`` of the ``"NAME":`` entry of ``environment_variables`` (its default), or None."""
    line = _find_line(src.read(ENVS_FILE), f'"{name}":')
    return f"{ENVS_FILE}:{line}" if line else None


def legacy_enum(ex: Extractor) -> list[dict]:
    """The members of ``_Backend`` (``vllm/platforms/interface.py``), the names ``VLLM_ATTENTION_BACKEND`` takes in
    0.9 / 0.10 (``backend_name_to_enum``, ``vllm/attention/selector.py``), each with its line."""
    mod = ex.module("vllm.platforms.interface")
    cls = mod.classes.get("_Backend") if mod else None
    if cls is None:
        raise SourceError("vllm/platforms/interface.py: no _Backend enum")
    return [{"name": item.targets[0].id, "line": item.lineno} for item in cls.body
            if isinstance(item, ast.Assign) and isinstance(item.targets[0], ast.Name)]


def _selector_paths(ex: Extractor, node: ast.FunctionDef) -> list[str]:
    """The V1 backend class paths a 0.9 / 0.10 ``get_attn_backend_cls`` can return: its string constants that name a
    class under ``vllm.v1.attention.backends`` (whole, or a suffix its ``f"vllm.v1.attention.backends.mla.{x}"``
    helper completes, ``vllm/platforms/cuda.py:250-256`` in 0.10.2), in source order."""
    prefixes = {LEGACY_V1_PREFIX}
    for n in ast.walk(node):
        if isinstance(n, ast.JoinedStr) and n.values and isinstance(n.values[0], ast.Constant) and \
                str(n.values[0].value).startswith(LEGACY_V1_PREFIX):
            prefixes.add(str(n.values[0].value))
    out: list[str] = []
    for n in ast.walk(node):
        if not (isinstance(n, ast.Constant) and isinstance(n.value, str) and re.fullmatch(r"[\w.]+\.\w+", n.value)):
            continue
        for path in [n.value] + [p + n.value for p in sorted(prefixes) if not n.value.startswith("vllm.")]:
            if path.startswith(LEGACY_V1_PREFIX) and path not in out and ex.find_class(path) is not None:
                out.append(path)
                break
    return out


def _static_return(node: ast.FunctionDef | None) -> Any:
    """The constant a ``get_name()``-style method returns (``return "FLASH_ATTN_VLLM_V1"``), or None."""
    if node is None:
        return None
    rets = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
    if len(rets) == 1 and isinstance(rets[0].value, ast.Constant):
        return rets[0].value.value
    return None


def _method(cls_node: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((i for i in cls_node.body if isinstance(i, ast.FunctionDef) and i.name == name), None)


def add_init_only(ex: Extractor, qualname: str) -> str | None:
    """Store ``qualname`` (an attention ``Impl`` class) with only its ``__init__`` (and its vLLM bases' ``__init__``):
    in 0.9 / 0.10 the checks a backend makes of a layer (head size, KV-cache dtype, sinks, sliding window) run in
    its implementation's constructor; ``forward`` and the kernels are not stored."""
    return ex.store_class(qualname, lambda mod, node, entry: _fill_init(ex, mod, node, entry))


def _fill_init(ex: Extractor, mod: Module, node: ast.ClassDef, entry: dict[str, Any]) -> None:
    """:func:`add_init_only`'s part of the entry: ``__init__`` and the classes it asks."""
    init = _method(node, "__init__")
    if init is not None:
        entry["methods"]["__init__"] = {"src": ast.unparse(init), "line": init.lineno, "kind": "method"}
        ex._add_referenced(mod, init)
        # classes the constructor asks (``PagedAttention.get_supported_head_sizes()`` in TorchSDPABackendImpl,
        # vllm/attention/backends/torch_sdpa.py:440 in 0.9.2) whatever their name
        for n in ast.walk(init):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                target = ex.resolve(mod, n.value.id)
                if target and target.startswith(ex.layout.inline_prefixes) and ex.find_class(target) is not None:
                    ex.add_class(target)


def _optional_imports(ex: Extractor, module: str, required: set[str]) -> list[dict]:
    """Top-level imports of ``module`` that ``pip install vllm`` does not provide: a package outside the standard
    library, vLLM and torch that no unconditional ``Requires-Dist`` of the wheel names (``flashinfer`` in 0.10:
    only the ``flashinfer`` extra installs it, ``METADATA:99`` in 0.10.2). Importing the backend fails without it."""
    import sys
    mod = ex.module(module)
    out = []
    for n in (mod.tree.body if mod else []):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
            [n.module] if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module else []
        for name in names:
            root = name.split(".")[0]
            if root in ("vllm", "torch", "__future__") or root in sys.stdlib_module_names:
                continue
            if root.replace("_", "-").lower() in required or root.lower() in required:
                continue
            if not any(o["package"] == root for o in out):
                out.append({"package": root, "source": f"{mod.file}:{n.lineno}"})
    return out


def legacy_backends(ex: Extractor, src: Source, selector_paths: dict[str, list[str]]) -> list[dict]:
    """One entry per V1 backend class a 0.9 / 0.10 platform selector can return (``selector_paths``: platform ->
    class paths). ``name`` is the class name (``get_name()`` repeats across classes: ``FLASH_ATTN_VLLM_V1`` for
    FlashAttention and ROCm's AITER FlashAttention, ``vllm/v1/attention/backends/rocm_aiter_fa.py:343`` in 0.10.2),
    ``enum_name`` what ``get_name()`` returns; ``impl`` the ``Impl`` class whose constructor checks the layer."""
    meta = src.metadata()
    required = set()
    for line in (meta[1].splitlines() if meta else []):
        m = re.match(r"Requires-Dist: ([A-Za-z0-9_.-]+)\s*(\[[^]]*\])?\s*([^;]*)(;.*)?$", line)
        if m and not (m.group(4) and "extra" in m.group(4)):
            required.add(m.group(1).replace("_", "-").lower())
    paths: list[str] = []
    for plat_paths in selector_paths.values():
        paths += [p for p in plat_paths if p not in paths]
    out = []
    for path in paths:
        q = ex.add_class(path)
        mod, node = ex.find_class(path)
        get_name = _method(node, "get_name")
        impl_fn = _method(node, "get_impl_cls")
        impl_name = _static_return_name(impl_fn)
        impl_q = add_init_only(ex, ex.resolve(mod, impl_name) or f"{mod.name}.{impl_name}") if impl_name else None
        checks = []
        for cq in _class_chain(ex, impl_q):
            imod, inode = ex.find_class(cq)
            init = _method(inode, "__init__")
            for n in ast.walk(init) if init else []:
                if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args:
                    checks.append({"raises": f"{ast.unparse(n.exc.func)}: {_fstring(n.exc.args[0])}",
                                   "source": f"{imod.file}:{n.lineno}"})
                elif isinstance(n, ast.Assert):
                    checks.append({"asserts": ast.unparse(n.test), "source": f"{imod.file}:{n.lineno}",
                                   **({"message": _fstring(n.msg)} if n.msg is not None else {})})
        entry: dict[str, Any] = {
            "name": node.name, "class": q, "path": path, "enum_name": _static_return(get_name),
            "registry": f"{mod.file}:{get_name.lineno}" if get_name else None,
            "platforms": sorted(p for p, ps in selector_paths.items() if path in ps),
            "impl": impl_q, "impl_checks": checks, "optional_imports": _optional_imports(ex, mod.name, required)}
        out.append(entry)
    return out


def _class_chain(ex: Extractor, q: str | None) -> list[str]:
    """``q`` and its stored vLLM bases, nearest first (the constructors ``super().__init__`` reaches)."""
    out: list[str] = []
    todo = [q] if q else []
    while todo:
        c = todo.pop(0)
        if c in out or c not in ex.out_classes:
            continue
        out.append(c)
        todo += ex.out_classes[c]["bases"]
    return out


def _static_return_name(node: ast.FunctionDef | None) -> str | None:
    """The class name ``get_impl_cls()`` returns (``return FlashAttentionImpl``), or None."""
    if node is None:
        return None
    rets = [n for n in ast.walk(node) if isinstance(n, ast.Return)]
    return rets[0].value.id if len(rets) == 1 and isinstance(rets[0].value, ast.Name) else None


def summarize_legacy_backend(data: dict, entry: dict) -> dict:
    """What a 0.9 / 0.10 backend declares: its class methods ``get_supported_head_sizes`` / ``get_supported_dtypes``,
    read by ``is_attn_backend_supported`` (``vllm/attention/selector.py:93`` in 0.10.2), each with its file:line."""
    cls_q = entry["class"]
    plat = interp.Platform("cuda", interp.Unknown("device_capability"))  # type: ignore[arg-type]

    def item(member: str):
        loc = _loc(data, cls_q, member)
        if loc is None:
            return {"value": None, "source": None, "note": f"no {member} in this release"}
        try:
            v = _jsonable(interp.evaluate(lambda ev: ev.call_method(cls_q, member), data, plat))
        except interp.NotEvaluable as e:
            v = {"runtime": f"not evaluable: {e}"}
        return {"value": v, "source": loc}

    s: dict[str, Any] = {"head_sizes": item("get_supported_head_sizes"), "model_dtypes": item("get_supported_dtypes")}
    return s


def _selector(ex: Extractor, platforms: dict, plat: str, mod_name: str, fn_name: str, kind: str):
    """Store one platform selector (a function or ``Class.method``); its parsed def, or None if absent."""
    mod = ex.module(mod_name)
    if mod is None:
        return None
    if "." in fn_name:
        cls_name, meth = fn_name.split(".")
        cls_node = mod.classes.get(cls_name)
        if cls_node is None or not any(isinstance(i, ast.FunctionDef) and i.name == meth for i in cls_node.body):
            return None
        q = ex.add_class(f"{mod_name}.{cls_name}")
        entry = ex.out_classes[q]["methods"][meth]
        platforms[plat] = {"kind": kind, "class": q, "method": meth, "source": f"{mod.file}:{entry['line']}"}
        return interp.parse_function(entry["src"])
    if fn_name not in mod.functions:
        return None
    q = ex.add_function(f"{mod_name}.{fn_name}")
    platforms[plat] = {"kind": kind, "function": q, "source": f"{mod.file}:{ex.out_functions[q]['line']}"}
    return interp.parse_function(ex.out_functions[q]["src"])


def _why_missing(ex: Extractor, path: str) -> str:
    """Why a registry member has no stored class: its module is absent from this source, or the class
    is built at import time by a factory call (0.30+ composite backends, e.g. ``TritonFlashAttentionBackend
    = create_composite_attention_backend(...)`` in ``vllm/v1/attention/backends/triton_flash_attn.py:66``
    of 0.33.0), which the extractor does not model."""
    mod_name, _, name = path.rpartition(".")
    mod = ex.module(mod_name)
    if mod is None:
        return "class not found in this release's source"
    for node in mod.tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
                and isinstance(node.value, ast.Call)):
            return f"class built at import by {ast.unparse(node.value.func)}(...) at {mod.file}:{node.lineno}"
    return "class not found in this release's source"


def _builder_class(data: dict, cls_q: str) -> str | None:
    ev = interp.Evaluator(data=data, platform=interp.Platform("cuda", None))
    found = ev.find_member(cls_q, "get_builder_cls")
    if not found or found[1] != "method":
        return None
    fn = interp.parse_function(found[2]["src"])
    for n in ast.walk(fn):
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Name):
            owner = data["classes"][found[0]]
            q = f"{owner['module']}.{n.value.id}"
            if q in data["classes"]:
                return q
            target = data["modules"].get(owner["module"], {}).get("imports", {}).get(n.value.id)
            if target in data["classes"]:
                return target
    return None


def model_configs(ex: Extractor) -> dict:
    """``MODELS_CONFIG_MAP`` entries (architecture -> config class) whose class is in
    :data:`MODEL_CONFIG_CLASSES`; each class is stored in ``classes`` so :mod:`compat.checks` can evaluate its
    ``verify_and_update_config``. ``{arch: {"class", "source" (the method's file:line), "map" (the entry's)}}``."""
    mod = ex.module(MODEL_CONFIG_MODULE)
    if mod is None:
        return {}
    out = {}
    for node in mod.tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if not (isinstance(target, ast.Name) and target.id == "MODELS_CONFIG_MAP" and isinstance(node.value, ast.Dict)):
            continue
        for k, v in zip(node.value.keys, node.value.values):
            if not (isinstance(k, ast.Constant) and isinstance(v, ast.Name) and v.id in MODEL_CONFIG_CLASSES):
                continue
            q = ex.add_class(f"{MODEL_CONFIG_MODULE}.{v.id}")
            meth = (ex.out_classes[q]["methods"].get("verify_and_update_config") if q else None)
            if meth is None:
                continue
            out[k.value] = {"class": q, "source": f"{mod.file}:{meth['line']}", "map": f"{mod.file}:{k.lineno}"}
    return dict(sorted(out.items()))


def flash_attn_support(src: Source) -> dict:
    """FlashAttention 4 in this wheel: whether it ships (``FA4_AVAILABLE``) and the capabilities
    ``_is_fa4_supported`` accepts, evaluated for each of :data:`CAPABILITIES`.

    From 0.17 the wheel ships the CuTe DSL kernels as ``vllm/vllm_flash_attn/cute/interface.py`` and
    ``FA4_AVAILABLE`` checks that file; before, FA4 is imported from ``flash_attn.cute.interface``, a package
    the wheel neither ships nor requires, so a stock install has no FA4. Returns ``{"4": {"available",
    "why", "capabilities", "source"}}`` (``{}`` when the wheel has no FlashAttention interface).
    """
    text = src.read(FA_INTERFACE)
    if text is None:
        return {}
    tree = ast.parse(text)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_is_fa4_supported"), None)
    if fn is None:
        return {}
    avail_line = _find_line(text, "FA4_AVAILABLE = True")
    if '"cute", "interface.py"' in text:
        shipped = src.read("vllm/vllm_flash_attn/cute/interface.py") is not None
        why = (f"{FA_INTERFACE}:{avail_line}: FA4_AVAILABLE when vllm/vllm_flash_attn/cute/interface.py exists; "
               + ("the wheel ships it" if shipped else "the wheel does not ship it"))
    else:
        shipped = False
        imp = next((ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and "cute" in (n.module or "")), "an external package")
        why = (f"{FA_INTERFACE}:{avail_line}: FA4_AVAILABLE only if `{imp}` imports, a package the wheel "
               "neither ships nor requires")
    data = {"functions": {"fa._is_fa4_supported": {"module": "fa", "file": FA_INTERFACE, "line": fn.lineno,
                                                     "src": ast.unparse(fn)}},
            "modules": {"fa": {"imports": {"current_platform": "vllm.platforms.current_platform"},
                               "constants": {}}}, "classes": {}}
    caps = []
    for c in CAPABILITIES:
        cap = interp.Capability(*(int(x) for x in c.split(".")))
        try:
            r = interp.evaluate(lambda ev: ev.call_function("fa._is_fa4_supported"), data,
                                interp.Platform("cuda", cap), {"FA4_AVAILABLE": shipped})
        except interp.NotEvaluable:
            r = None
        if isinstance(r, tuple) and r and r[0] is True:
            caps.append(c)
    return {"4": {"available": shipped, "why": why, "capabilities": caps, "source": f"{FA_INTERFACE}:{fn.lineno}"}}


# ---------------------------------------------------------------- model registry
REGISTRY_FILE = "vllm/model_executor/models/registry.py"
MODEL_CONFIG_FILE = "vllm/config/model.py"


def _fstring(node: ast.AST) -> str:
    """The text of a message literal, ``{expr}`` where an f-string formats a value (``!r`` kept)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                out.append("{" + ast.unparse(part.value) + ("!r" if part.conversion == 114 else "") + "}")
        return "".join(out)
    return ast.unparse(node)


def _raise_with(fn: ast.FunctionDef, needle: str, file: str) -> dict | None:
    """``{"message", "source"}`` of the first ``raise X("...needle...")`` in ``fn``."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args:
            text = _fstring(n.exc.args[0])
            if needle in text:
                return {"message": f"{ast.unparse(n.exc.func)}: {text}", "source": f"{file}:{n.lineno}"}
    return None


def _top_assign(tree: ast.Module, name: str) -> ast.AST | None:
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            getattr(node, "target", None) if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            return node
    return None


def _registry_method(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_ModelRegistry"), None)
    return next((m for m in (cls.body if cls else []) if isinstance(m, ast.FunctionDef) and m.name == name), None)


def model_architectures(src: Source) -> tuple[dict, dict]:
    """The architecture names vLLM's ``ModelRegistry`` answers for, and how it resolves the others.

    ``ModelRegistry = _ModelRegistry({arch: ... for arch, ... in _VLLM_MODELS.items()})`` (``registry.py:1097`` in
    0.11.2, ``:1537`` in 0.32.0); ``_VLLM_MODELS`` is ``{**_TEXT_GENERATION_MODELS, **_EMBEDDING_MODELS, ...}``,
    whose dicts change across releases (``_CROSS_ENCODER_MODELS`` up to 0.17, ``_LATE_INTERACTION_MODELS``,
    ``_REWARD_MODELS``, ``_TOKEN_CLASSIFICATION_MODELS`` and ``_SEQUENCE_CLASSIFICATION_MODELS`` from 0.18), so they
    are read from ``_VLLM_MODELS`` itself. A ``**{k: v for k, v in D.items() if ...}`` entry (``_EMBEDDING_MODELS``
    re-keys Llama-shaped names of ``_TEXT_GENERATION_MODELS``, ``registry.py:193`` in 0.11.2) adds no name that
    ``D`` does not have, and ``D`` must itself be in ``_VLLM_MODELS``.

    Returns ``(architectures, resolution)``: ``{name: {"dict", "source"}}`` (the first dict of ``_VLLM_MODELS``
    that lists the name, and the key's ``file:line``), and the rules :mod:`compat.checks` applies to a name not
    listed: ``_raise_for_unsupported``'s messages (with ``_PREVIOUSLY_SUPPORTED_MODELS`` /
    ``_OOT_SUPPORTED_MODELS``), ``_normalize_arch`` with ``_SUFFIX_TO_DEFAULTS`` (``vllm/config/model.py``),
    and the Transformers-backend fallback of ``inspect_model_cls`` (``model_impl`` "auto",
    ``_try_resolve_transformers``). ``({}, {})`` when the source has no registry.

    Raises:
        SourceError: the registry is built some other way than the constructs above (the extractor would
            otherwise miss names silently).
    """
    text = src.read(REGISTRY_FILE)
    if text is None:
        return {}, {}
    tree = ast.parse(text)
    dicts = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            getattr(node, "target", None) if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict):
            dicts[target.id] = node
    top = dicts.get("_VLLM_MODELS")
    built = _top_assign(tree, "ModelRegistry")
    if top is None or built is None or "_VLLM_MODELS.items()" not in ast.unparse(built.value):
        raise SourceError(f"{REGISTRY_FILE}: ModelRegistry is not built from a _VLLM_MODELS dict literal")
    order: list[str] = []
    for k, v in zip(top.value.keys, top.value.values):
        if k is not None or not isinstance(v, ast.Name) or v.id not in dicts:
            raise SourceError(f"{REGISTRY_FILE}:{top.lineno}: _VLLM_MODELS entry {ast.unparse(v)} is not **<dict>")
        order.append(v.id)
    names: dict[str, dict] = {}

    def collect(dict_name: str):
        node = dicts[dict_name]
        for k, v in zip(node.value.keys, node.value.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                names.setdefault(k.value, {"dict": dict_name, "source": f"{REGISTRY_FILE}:{k.lineno}"})
            elif k is None and isinstance(v, ast.Name) and v.id in dicts:
                collect(v.id)
            elif k is None and isinstance(v, ast.DictComp) and len(v.generators) == 1 and \
                    re.fullmatch(r"(\w+)\.items\(\)", ast.unparse(v.generators[0].iter)) and \
                    ast.unparse(v.generators[0].iter)[:-len(".items()")] in order:
                continue  # a filtered copy of a dict that _VLLM_MODELS spreads itself
            else:
                raise SourceError(f"{REGISTRY_FILE}:{getattr(k or v, 'lineno', node.lineno)}: {dict_name} entry "
                                  f"{ast.unparse(v)[:80]} is neither a string key nor a spread of a registry dict")
    for d in order:
        collect(d)

    rules: dict[str, Any] = {
        "registry": f"{REGISTRY_FILE}:{built.lineno}",
        "dicts": [[d, f"{REGISTRY_FILE}:{dicts[d].lineno}"] for d in order],
    }
    for key, var, field_name in (("previously_supported", "_PREVIOUSLY_SUPPORTED_MODELS", "until"),
                                 ("out_of_tree", "_OOT_SUPPORTED_MODELS", "plugin")):
        node = dicts.get(var)
        rules[key] = {k.value: {field_name: v.value, "source": f"{REGISTRY_FILE}:{k.lineno}"}
                      for k, v in zip(node.value.keys, node.value.values)
                      if isinstance(k, ast.Constant) and isinstance(v, ast.Constant)} if node else {}
    raise_fn = _registry_method(tree, "_raise_for_unsupported")
    if raise_fn is None:
        raise SourceError(f"{REGISTRY_FILE}: no _ModelRegistry._raise_for_unsupported")
    rules["messages"] = {key: _raise_with(raise_fn, needle, REGISTRY_FILE) for key, needle in (
        ("unsupported", "are not supported for now"), ("previously_supported", "was supported in vLLM until"),
        ("out_of_tree", "not supported in-tree anymore"))}
    loader = _loader_architecture(src)
    if rules["messages"]["previously_supported"] is None and loader is not None:
        # 0.10.0 raises it from get_model_architecture (vllm/model_executor/model_loader/utils.py:265-271)
        rules["messages"]["previously_supported"] = _raise_with(loader[1], "was supported", LOADER_FILE)
    if rules["messages"]["unsupported"] is None:
        raise SourceError(f"{REGISTRY_FILE}: _raise_for_unsupported raises no 'are not supported for now'")
    norm = _registry_method(tree, "_normalize_arch")
    # vllm/config/model.py from 0.11; vllm/config/__init__.py in 0.10.1-0.10.2, vllm/config.py before
    config_file = next((f for f in CONFIG_FILES if "model_impl:" in (src.read(f) or "")), MODEL_CONFIG_FILE)
    model_text = src.read(config_file) or ""
    model_tree = ast.parse(model_text) if model_text else None
    suffixes = _top_assign(model_tree, "_SUFFIX_TO_DEFAULTS") if model_tree else None
    rules["normalize"] = None if norm is None or suffixes is None else {
        "source": f"{REGISTRY_FILE}:{norm.lineno}", "suffixes_source": f"{config_file}:{suffixes.lineno}",
        "suffixes": [[e.elts[0].value, e.elts[1].elts[0].value, e.elts[1].elts[1].value]
                     for e in suffixes.value.elts]}
    inspect = _registry_method(tree, "inspect_model_cls")
    resolve = _registry_method(tree, "_try_resolve_transformers")
    file = REGISTRY_FILE
    fallback = sorted(n.lineno for n in ast.walk(inspect) if isinstance(n, ast.If)
                      and re.search(r"model_config\.model_impl == (?:'auto'|ModelImpl\.AUTO\b)", ast.unparse(n.test))
                      ) if inspect else []
    if resolve is None and loader is not None:
        # 0.9 / 0.10.0: get_model_architecture falls back when no name is registered and model_impl is not "vllm",
        # and resolve_transformers_arch raises when it cannot (vllm/model_executor/model_loader/utils.py:172-275)
        resolve, file = loader[0], LOADER_FILE
        fallback = sorted(n.lineno for n in ast.walk(loader[1]) if isinstance(n, ast.If)
                          and "model_impl" in ast.unparse(n.test) and "vllm_not_supported" in ast.unparse(n.test))
    impl = next((n for n in ast.walk(model_tree) if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                 and n.target.id == "model_impl"), None) if model_tree else None
    impl_default = _enum_value(model_tree, impl.value) if impl is not None else None
    impl_line = impl.lineno if impl is not None and impl_default is not None else None
    compatible = next((n for n in ast.walk(resolve) if isinstance(n, ast.If)
                       and "is_backend_compatible" in ast.unparse(n.test)), None) if resolve else None
    rules["transformers_fallback"] = None if not (fallback and resolve and compatible) else {
        "fallback": [f"{file}:{line}" for line in fallback],
        "resolve": f"{file}:{resolve.lineno}",
        "compatible": {"test": ast.unparse(compatible.test.operand if isinstance(compatible.test, ast.UnaryOp)
                                           else compatible.test), "source": f"{file}:{compatible.lineno}"},
        "not_found": _raise_with(resolve, "Cannot find model module", file),
        "not_compatible": _raise_with(resolve, "is not compatible with vLLM", file),
        "model_impl_default": {"value": impl_default, "source": f"{config_file}:{impl_line}"}}
    if rules["transformers_fallback"] is not None and file == LOADER_FILE:
        # the fallback's own errors are what vLLM stops with, not _raise_for_unsupported
        rules["transformers_fallback"]["stops_with_own_errors"] = True
    return dict(sorted(names.items())), rules


LOADER_FILE = "vllm/model_executor/model_loader/utils.py"


def _loader_architecture(src: Source) -> tuple[ast.FunctionDef, ast.FunctionDef] | None:
    """``(resolve_transformers_arch, get_model_architecture)`` of ``vllm/model_executor/model_loader/utils.py`` where
    the Transformers fallback lives there (0.9, 0.10.0: ``utils.py:172``, ``:227`` in 0.10.0), else None."""
    text = src.read(LOADER_FILE)
    if text is None:
        return None
    tree = ast.parse(text)
    fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "resolve_transformers_arch" not in fns or "get_model_architecture" not in fns:
        return None
    return fns["resolve_transformers_arch"], fns["get_model_architecture"]


def _enum_value(tree: ast.Module, node: ast.AST) -> Any:
    """A default written as a constant, or as ``Enum.MEMBER.value`` of an enum defined in ``tree``
    (``model_impl: Union[str, ModelImpl] = ModelImpl.AUTO.value``, ``vllm/config/__init__.py:491`` in 0.10.2)."""
    if isinstance(node, ast.Constant):
        return node.value
    m = re.fullmatch(r"(\w+)\.(\w+)\.value", ast.unparse(node))
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == m.group(1)), None) if m else None
    for item in (cls.body if cls else []):
        if isinstance(item, ast.Assign) and isinstance(item.targets[0], ast.Name) and item.targets[0].id == m.group(2) \
                and isinstance(item.value, ast.Constant):
            return item.value.value
    return None


# ---------------------------------------------------------------- environment variable defaults (0.9 / 0.10)
def _env_expr_value(node: ast.expr) -> Any:
    """The value of an ``environment_variables`` lambda body when the variable is unset: ``os.getenv(NAME, d)`` /
    ``os.environ.get(NAME, d)`` become ``d``, ``NAME in os.environ`` False, then the expression is evaluated with
    ``bool`` / ``int`` / ``float`` / ``str`` only. Raises ValueError for anything else."""
    class Unset(ast.NodeTransformer):
        def visit_Call(self, n):
            f = ast.unparse(n.func)
            if f in ("os.getenv", "os.environ.get"):
                return n.args[1] if len(n.args) > 1 else ast.Constant(None)
            if f == "maybe_convert_int":
                return self.visit(n.args[0])
            self.generic_visit(n)
            return n

        def visit_Compare(self, n):
            if len(n.ops) == 1 and isinstance(n.ops[0], (ast.In, ast.NotIn)) and \
                    ast.unparse(n.comparators[0]) == "os.environ":
                return ast.Constant(isinstance(n.ops[0], ast.NotIn))
            self.generic_visit(n)
            return n

    expr = ast.fix_missing_locations(ast.Expression(Unset().visit(node)))
    if any(isinstance(n, ast.Name) and n.id not in ("bool", "int", "float", "str") for n in ast.walk(expr)) or \
            any(isinstance(n, (ast.Lambda, ast.Subscript)) for n in ast.walk(expr)):
        raise ValueError(ast.unparse(expr))
    try:
        return eval(compile(expr, "<env>", "eval"), {"__builtins__": {}, "bool": bool, "int": int, "float": float,
                                                     "str": str})
    except Exception as e:  # noqa: BLE001 - any failure means "not readable"
        raise ValueError(str(e)) from e


def env_defaults(src: Source, data: dict) -> dict:
    """``{NAME: {"value", "source"}}``: the default (variable unset) of every ``envs.NAME`` the stored rules read, from
    its ``environment_variables`` entry in ``vllm/envs.py`` (``"VLLM_ROCM_USE_AITER": lambda: ...`` at ``:750`` in
    0.10.2), evaluated by :func:`_env_expr_value`; a default that is not a plain expression of the variable is left
    out (the rule then stays a run-time condition)."""
    text = src.read(ENVS_FILE)
    if text is None:
        return {}
    srcs = [f["src"] for f in data["functions"].values()] + \
        [m["src"] for c in data["classes"].values() for m in c["methods"].values()]
    wanted = {m for t in srcs for m in re.findall(r"envs\.([A-Z][A-Z0-9_]+)", t)} | \
        {m for t in srcs for m in re.findall(r"envs\.is_set\(['\"]([A-Z0-9_]+)['\"]\)", t)}
    out = {}
    for node in ast.walk(ast.parse(text)):
        if not (isinstance(node, ast.Dict)):
            continue
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and k.value in wanted and isinstance(v, ast.Lambda):
                try:
                    out[k.value] = {"value": _env_expr_value(v.body), "source": f"{ENVS_FILE}:{k.lineno}"}
                except ValueError:
                    continue
    return dict(sorted(out.items()))


# ---------------------------------------------------------------- quantization methods
QUANT_MODULE = "vllm.model_executor.layers.quantization"
CONFIG_FILES = ("vllm/config/model.py", "vllm/config/__init__.py", "vllm/config.py")


def quantization_methods(ex: Extractor) -> dict:
    """The ``--quantization`` names the release knows (``QuantizationMethods`` Literal,
    ``vllm/model_executor/layers/quantization/__init__.py:9`` in 0.10.2) and the error ``ModelConfig`` raises for a
    checkpoint whose ``quant_method`` is not one of them (``Unknown quantization method: ...``,
    ``vllm/config/__init__.py:1212`` in 0.10.2). ``{}`` when the release has no such Literal."""
    src = ex.src
    found = ex.literal_values(QUANT_MODULE, "QuantizationMethods")
    if not found or not found[0]:
        return {}
    file = f"{QUANT_MODULE.replace('.', '/')}/__init__.py"
    unknown = None
    for cfg in CONFIG_FILES:
        text = src.read(cfg)
        if not text or "Unknown quantization method" not in text:
            continue
        for n in ast.walk(ast.parse(text)):
            if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args and \
                    "Unknown quantization method" in _fstring(n.exc.args[0]):
                unknown = {"message": f"{ast.unparse(n.exc.func)}: {_fstring(n.exc.args[0])}", "source": f"{cfg}:{n.lineno}"}
                break
        if unknown:
            break
    return {"methods": list(dict.fromkeys(found[0])), "source": f"{file}:{found[1]}", "unknown": unknown,
            "min_capability": min_capabilities(src)}


# ``VllmConfig._get_quantization_config`` (0.11 onwards), ``ModelConfig``'s module before that
MIN_CAPABILITY_FILES = ("vllm/config/vllm.py", "vllm/config/__init__.py", "vllm/config.py")
MIN_CAPABILITY_NEEDLE = "is not supported for the current GPU"
QUANT_DIR = "vllm/model_executor/layers/quantization"


def _resolve_import(module_file: str, level: int, module: str | None) -> str | None:
    """The file an ``import`` in ``module_file`` names (``from .fp8 import X`` -> ``.../quantization/fp8.py``), as a
    module path; None for a name outside ``vllm``."""
    if level:
        parts = module_file.split("/")[:-1]
        parts = parts[:len(parts) - (level - 1)] if level > 1 else parts
        base = "/".join(parts + (module.split(".") if module else []))
    elif module and module.split(".")[0] == "vllm":
        base = module.replace(".", "/")
    else:
        return None
    return base


def _class_in(src: Source, base: str, name: str, seen: set) -> tuple[ast.ClassDef, ast.Module, str] | None:
    """``(class node, module tree, file)`` of class ``name`` defined in (or imported into) module ``base``."""
    for file in (f"{base}.py", f"{base}/__init__.py"):
        if (base, name) in seen:
            return None
        text = src.read(file)
        if text is None:
            continue
        seen.add((base, name))
        tree = ast.parse(text)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node, tree, file
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                orig = next(a.name for a in node.names if (a.asname or a.name) == name)
                target = _resolve_import(file, node.level, node.module)
                if target:
                    return _class_in(src, target, orig, seen)
        return None
    return None


def _name_file(tree: ast.Module, file: str, name: str) -> str | None:
    """The module path ``name`` is imported from in ``tree`` (any scope), or ``file``'s own module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return _resolve_import(file, node.level, node.module)
    return file[:-len("/__init__.py")] if file.endswith("/__init__.py") else file[:-3]


def _class_min_capability(src: Source, cls: ast.ClassDef, tree: ast.Module, file: str, depth: int = 0) -> dict:
    """``{"value", "source", "class"}``: what ``cls.get_min_capability()`` returns, read from the first class along
    its bases (first base first, as far as the source says) that defines it: a literal ``return <int>``, or
    ``return Other.get_min_capability()`` followed. ``value`` is None (with ``expr``) where it is not a literal."""
    out: dict[str, Any] = {"class": cls.name}
    if depth > 12:
        return {**out, "value": None, "expr": "too deep"}
    meth = _method(cls, "get_min_capability")
    if meth is not None:
        rets = [n for n in ast.walk(meth) if isinstance(n, ast.Return)]
        raises = [n for n in ast.walk(meth) if isinstance(n, ast.Raise)]
        value = rets[0].value if len(rets) == 1 else None
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and \
                isinstance(value.operand, ast.Constant) and isinstance(value.operand.value, int):
            value = ast.Constant(-value.operand.value)  # ``return -1`` (the CPU / XPU configs)
        if isinstance(value, ast.Constant) and isinstance(value.value, int) and not raises:
            return {**out, "value": value.value, "source": f"{file}:{meth.lineno}"}
        if len(rets) == 1 and isinstance(rets[0].value, ast.Call) and not raises and \
                isinstance(rets[0].value.func, ast.Attribute) and rets[0].value.func.attr == "get_min_capability" \
                and isinstance(rets[0].value.func.value, ast.Name):
            other = rets[0].value.func.value.id
            found = _class_in(src, _name_file(tree, file, other), other, set())
            if found:
                got = _class_min_capability(src, *found, depth + 1)
                return {**out, "value": got.get("value"), "source": f"{file}:{meth.lineno}",
                        "via": f"{got['class']} ({got.get('source')})", **({"expr": got["expr"]} if "expr" in got else {})}
        return {**out, "value": None, "source": f"{file}:{meth.lineno}",
                "expr": ast.unparse(meth).splitlines()[-1].strip()}
    for b in cls.bases:
        if not isinstance(b, ast.Name):
            continue
        found = _class_in(src, _name_file(tree, file, b.id), b.id, set())
        if found:
            got = _class_min_capability(src, *found, depth + 1)
            return {**out, **{k: v for k, v in got.items() if k != "class"}, "inherited_from": got["class"]}
    return {**out, "value": None, "expr": "no get_min_capability found along the bases"}


def _override_requires_flag(fn: ast.FunctionDef) -> str | None:
    """The ``--quantization`` value every non-None ``return`` of an ``override_quantization_method`` is guarded by
    (``return "humming" if user_quant == "humming" else None``, ``humming.py:218`` in 0.20.2; ``if can_convert and
    user_quant == "moe_wna16": return ...``): such an override claims a checkpoint only when the user names it.
    None when some return is not guarded so."""
    args = [a.arg for a in fn.args.args]
    if len(args) < 3:
        return None
    user = args[2]  # (cls, hf_quant_cfg, user_quant, ...)
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node

    def flag_in(test: ast.AST) -> str | None:
        for n in ast.walk(test):
            if isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and n.left.id == user and \
                    len(n.ops) == 1 and isinstance(n.ops[0], ast.Eq) and isinstance(n.comparators[0], ast.Constant):
                return n.comparators[0].value
        return None

    flags = set()
    for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return)):
        v = ret.value
        if v is None or (isinstance(v, ast.Constant) and v.value is None):
            continue
        if isinstance(v, ast.IfExp) and isinstance(v.orelse, ast.Constant) and v.orelse.value is None:
            got = flag_in(v.test)
        else:
            got, node = None, ret
            while got is None and id(node) in parents:
                up = parents[id(node)]
                if isinstance(up, ast.If) and node in up.body:
                    got = flag_in(up.test)
                node = up
        if got is None:
            return None
        flags.add(got)
    return flags.pop() if len(flags) == 1 else None


def _override_model_types(fn: ast.FunctionDef) -> list[str]:
    """The ``model_type`` values an ``override_quantization_method`` compares with (``if model_type != "gpt_oss":
    return None``, ``GptOssMxfp4Config``, ``mxfp4.py:144-145`` in 0.32.0): an override that names the checkpoint's
    model type and method is the one vLLM reports."""
    def is_model_type(n: ast.AST) -> bool:
        return (isinstance(n, ast.Name) and n.id == "model_type") or (
            isinstance(n, ast.Attribute) and n.attr == "model_type")

    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], (ast.Eq, ast.NotEq)):
            left, right = n.left, n.comparators[0]
            for a, b in ((left, right), (right, left)):
                if is_model_type(a) and isinstance(b, ast.Constant) and isinstance(b.value, str):
                    out.add(b.value)
    return sorted(out)


def _override_platforms(fn: ast.FunctionDef) -> list[str] | None:
    """The platforms an ``override_quantization_method`` claims on, where its source says so: a leading ``if not
    current_platform.is_xpu(): return None`` (``ipex_quant.py:140-141`` in 0.13.0; ``not is_cpu() and not is_xpu()``,
    ``ipex_quant.py:104-105`` in 0.9.2), or every non-None ``return`` under
    ``current_platform.is_cpu() and ...`` (``cpu_wna16.py:158-159``). None when it does not test the platform so."""
    def plat(test: ast.AST, negated: bool) -> str | None:
        if negated:
            if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
                return None
            test = test.operand
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and \
                isinstance(test.func.value, ast.Name) and test.func.value.id == "current_platform" and \
                test.func.attr.startswith("is_") and not test.args:
            return test.func.attr[3:]
        return None

    for stmt in fn.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring
        if isinstance(stmt, ast.If) and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return) and \
                (stmt.body[0].value is None or (isinstance(stmt.body[0].value, ast.Constant)
                                                and stmt.body[0].value.value is None)):
            parts = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.And) \
                else [stmt.test]  # ``if not current_platform.is_cpu() and not current_platform.is_xpu()`` (0.9.2)
            got = [plat(x, True) for x in parts]
            if all(got):
                return sorted(got)
        break
    found = set()
    for stmt in ast.walk(fn):
        if isinstance(stmt, ast.If) and any(isinstance(b, ast.Return) and b.value is not None and not (
                isinstance(b.value, ast.Constant) and b.value.value is None) for b in stmt.body):
            parts = stmt.test.values if isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.And) \
                else [stmt.test]
            got = next((p for p in (plat(x, False) for x in parts) if p), None)
            if got is None:
                return None
            found.add(got)
    others = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None and not (
        isinstance(n.value, ast.Constant) and n.value.value is None)]
    guarded = sum(1 for stmt in ast.walk(fn) if isinstance(stmt, ast.If) for b in stmt.body
                  if isinstance(b, ast.Return) and b.value is not None and not (
                      isinstance(b.value, ast.Constant) and b.value.value is None))
    return sorted(found) if found and guarded == len(others) else None


def min_capabilities(src: Source) -> dict | None:
    """The start-up check of a quantization method against the GPU (``VllmConfig._get_quantization_config``:
    ``ValueError: The quantization method {name} is not supported for the current GPU. Minimum capability: {x}.
    Current capability: {y}.``, ``vllm/config/vllm.py:900-906`` in 0.32.0) and what it compares: per method name of
    ``get_quantization_config``'s map (``method_to_config``, ``quantization/__init__.py``), the config class and its
    ``get_min_capability()`` with file:line (``fp8.py:146`` returns 75 in 0.32.0). vLLM runs the check only where
    ``current_platform.get_device_capability()`` is not None. None when the release has no such check."""
    check = None
    for cfg in MIN_CAPABILITY_FILES:
        text = src.read(cfg)
        if not text or MIN_CAPABILITY_NEEDLE not in text:
            continue
        for n in ast.walk(ast.parse(text)):
            if isinstance(n, ast.FunctionDef):
                got = _raise_with(n, MIN_CAPABILITY_NEEDLE, cfg)
                if got:
                    check = {**got, "function": n.name}
                    break
        if check:
            break
    if check is None:
        return None
    init = f"{QUANT_DIR}/__init__.py"
    text = src.read(init)
    tree = ast.parse(text or "")
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_quantization_config"), None)
    if fn is None:
        return {"check": check, "methods": {}}
    mapping = None
    for n in ast.walk(fn):
        if isinstance(n, ast.Dict) and n.keys and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                      for k in n.keys if k is not None):
            if mapping is None or len(n.keys) > len(mapping.keys):
                mapping = n
    methods: dict[str, dict] = {}
    for k, v in zip(mapping.keys if mapping else [], mapping.values if mapping else []):
        if k is None:
            continue
        entry: dict[str, Any] = {"map": f"{init}:{k.lineno}"}
        if not isinstance(v, ast.Name):
            methods[k.value] = {**entry, "class": ast.unparse(v), "value": None, "expr": "not a class name"}
            continue
        found = _class_in(src, _name_file(fn, init, v.id) or init[:-3], v.id, set())
        if found is None:  # bound in the function by other means (a conditional import, a call)
            methods[k.value] = {**entry, "class": v.id, "value": None, "expr": f"{v.id} is not an imported class"}
            continue
        methods[k.value] = {**entry, **_class_min_capability(src, *found)}
        own = _method(found[0], "override_quantization_method")
        if own is not None:
            # the checkpoint quant_method names this override may claim (``_verify_quantization`` asks every
            # override before it keeps the checkpoint's own name): the method names its source mentions
            names = {k2.value for k2 in mapping.keys if k2 is not None}
            methods[k.value]["override"] = {
                "source": f"{found[2]}:{own.lineno}",
                "mentions": sorted({n.value for n in ast.walk(own) if isinstance(n, ast.Constant) and n.value in names}),
                "requires_flag": _override_requires_flag(own), "platforms": _override_platforms(own),
                "model_types": _override_model_types(own)}
    return {"check": check, "methods": dict(sorted(methods.items()))}


# ---------------------------------------------------------------- the V1 engine oracle (0.9 / 0.10)
ARG_UTILS = "vllm.engine.arg_utils"


def v1_oracle(ex: Extractor) -> dict:
    """``EngineArgs._is_v1_supported_oracle`` (``vllm/engine/arg_utils.py:1431`` in 0.10.2): where 0.9 / 0.10 leave the
    V1 engine. Each top-level ``if`` of the method that calls ``_raise_or_fallback`` / ``_warn_or_fallback`` or raises
    is stored as a function of its own (``if <test>: <body>``; it returns ``False`` where vLLM falls back to V0) with
    its file:line, its feature name and what it reads (``self.<flag>``, ``model_config.<attr>``,
    ``current_platform.<method>``), so :mod:`compat.checks` evaluates the branches the calculator's inputs reach and
    names the others. ``_raise_or_fallback`` / ``_warn_or_fallback`` are stored too (they read ``VLLM_USE_V1``)."""
    mod = ex.module(ARG_UTILS)
    cls = mod.classes.get("EngineArgs") if mod else None
    fn = _method(cls, "_is_v1_supported_oracle") if cls else None
    if fn is None:
        return {}
    ex.used_modules.add(mod.name)
    for helper in ("_raise_or_fallback", "_warn_or_fallback"):
        if helper in mod.functions:
            ex.out_functions[f"{ARG_UTILS}.{helper}"] = {"module": ARG_UTILS, "file": mod.file,
                                                          "line": mod.functions[helper].lineno,
                                                          "src": ast.unparse(mod.functions[helper])}
    branches = []
    prelude: list[ast.stmt] = []  # plain assignments before a branch (``is_ngram_enabled = False``, 0.9.2)
    for node in fn.body:
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            prelude.append(node)
            continue
        if not isinstance(node, ast.If):
            continue
        text = ast.unparse(node)
        kind = ("raise_or_fallback" if "_raise_or_fallback(" in text else
                "warn_or_fallback" if "_warn_or_fallback(" in text else
                "raise" if any(isinstance(n, ast.Raise) for n in ast.walk(node)) else None)
        if kind is None:
            continue
        feature = next((ast.unparse(k.value) for n in ast.walk(node) if isinstance(n, ast.Call)
                        for k in n.keywords if k.arg == "feature_name"), None)
        if feature is None:  # _warn_or_fallback(current_platform.device_name) passes it positionally
            feature = next((ast.unparse(n.args[0]) for n in ast.walk(node) if isinstance(n, ast.Call)
                            and ast.unparse(n.func) in ("_raise_or_fallback", "_warn_or_fallback") and n.args), None)
        reads = sorted({ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.Attribute)
                        and isinstance(n.value, ast.Name) and n.value.id in ("self", "model_config", "current_platform",
                                                                           "envs")})
        key = f"{ARG_UTILS}._is_v1_supported_oracle@{node.lineno}"
        branch = ast.FunctionDef(name="_branch", args=ast.arguments(
            posonlyargs=[], args=[ast.arg("self"), ast.arg("model_config")], kwonlyargs=[], kw_defaults=[],
            defaults=[]), body=[*prelude, node], decorator_list=[], returns=None, type_params=[])
        ex.out_functions[key] = {"module": ARG_UTILS, "file": mod.file, "line": node.lineno,
                                 "src": ast.unparse(ast.fix_missing_locations(branch))}
        ex._add_referenced(mod, node)
        branches.append({"function": key, "kind": kind, "feature": feature, "reads": reads,
                         "source": f"{mod.file}:{node.lineno}"})
    return {"source": f"{mod.file}:{fn.lineno}", "branches": branches, **model_interfaces(ex.src)}


#: the model-class interfaces the V1 oracle asks about (``vllm/model_executor/models/interfaces.py``):
#: ``SupportsV0Only`` (``ModelConfig.is_v1_compatible``) and ``HasInnerState`` (``has_inner_state``)
ORACLE_INTERFACES = ("SupportsV0Only", "HasInnerState")


def model_interfaces(src: Source) -> dict:
    """``{"v0_only": {arch: file:line}, "inner_state": {arch: file:line}}``: the registered architectures whose model
    class (``_VLLM_MODELS[arch] = (module, class)``) has :data:`ORACLE_INTERFACES` among its bases, followed through
    base classes defined in ``vllm/model_executor/models/``; the line is the class's."""
    text = src.read(REGISTRY_FILE)
    if text is None:
        return {}
    tree = ast.parse(text)
    entries: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            getattr(node, "target", None) if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) == 2 and \
                        all(isinstance(e, ast.Constant) for e in v.elts):
                    entries.setdefault(k.value, (v.elts[0].value, v.elts[1].value))
    parsed: dict[str, ast.Module | None] = {}

    def module(name: str) -> ast.Module | None:
        if name not in parsed:
            t = src.read(f"vllm/model_executor/models/{name}.py")
            parsed[name] = ast.parse(t) if t is not None else None
        return parsed[name]

    def bases(mod_name: str, cls_name: str, depth: int = 0) -> tuple[set[str], int | None]:
        t = module(mod_name)
        cls = next((n for n in t.body if isinstance(n, ast.ClassDef) and n.name == cls_name), None) if t else None
        if cls is None or depth > 6:
            return set(), None
        out: set[str] = set()
        imports = {a.asname or a.name: (n.module or "") for n in t.body if isinstance(n, ast.ImportFrom)
                   for a in n.names}
        for b in cls.bases:
            name = ast.unparse(b.value if isinstance(b, ast.Subscript) else b)
            out.add(name)
            if name in {c.name for c in t.body if isinstance(c, ast.ClassDef)}:
                out |= bases(mod_name, name, depth + 1)[0]
            elif imports.get(name, "").lstrip(".") and "interfaces" not in imports[name]:
                other = imports[name].rsplit(".", 1)[-1]
                out |= bases(other, name, depth + 1)[0]
        return out, cls.lineno

    out: dict[str, dict] = {"v0_only": {}, "inner_state": {}}
    for arch, (mod_name, cls_name) in sorted(entries.items()):
        found, line = bases(mod_name, cls_name)
        for key, iface in (("v0_only", "SupportsV0Only"), ("inner_state", "HasInnerState")):
            if iface in found:
                out[key][arch] = f"vllm/model_executor/models/{mod_name}.py:{line}"
    return out


EAGLE3_INTERFACE = "vllm.model_executor.models.interfaces.SupportsEagle3"
# where the model runners refuse an EAGLE-3 target without the interface (``if not supports_eagle3(model): raise``):
# the V1 runner's _setup_eagle3_aux_hidden_state_outputs (gpu_model_runner.py:5208-5212 in 0.22.1, gone in 0.34.0)
# and the V2 runner's set_eagle3_aux_hidden_state_layers (eagle3_utils.py:18-19 in 0.22.1)
EAGLE3_CHECK_FILES = (("v1", "vllm/v1/worker/gpu_model_runner.py"),
                      ("v2", "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"))


def _registry_entries(src: Source) -> dict[str, tuple[str, str]]:
    """``{architecture: (module, class)}`` of every ``"Name": ("module", "Class")`` entry of registry.py's dicts."""
    text = src.read(REGISTRY_FILE)
    if text is None:
        return {}
    entries: dict[str, tuple[str, str]] = {}
    for node in ast.parse(text).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            getattr(node, "target", None) if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Tuple) and len(v.elts) == 2 and \
                        all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in v.elts):
                    entries.setdefault(k.value, (v.elts[0].value, v.elts[1].value))
    return entries


def _cuda_test(test: ast.AST) -> bool | None:
    """A module-level ``if`` test as it evaluates when vLLM runs on CUDA: ``TYPE_CHECKING`` False,
    ``current_platform.is_cuda()`` / ``is_cuda_alike()`` True, every other ``current_platform.is_*()`` False; None when
    it depends on something else."""
    if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
        return False
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr.startswith("is_") \
            and ast.unparse(test.func.value).endswith("current_platform") and not test.args:
        return test.func.attr in ("is_cuda", "is_cuda_alike")
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        v = _cuda_test(test.operand)
        return None if v is None else not v
    if isinstance(test, ast.BoolOp):
        vals = [_cuda_test(v) for v in test.values]
        if isinstance(test.op, ast.Or):
            return True if True in vals else (None if None in vals else False)
        return False if False in vals else (None if None in vals else True)
    return None


def _cuda_body(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's top-level statements with each ``if`` replaced by the branch CUDA takes (:func:`_cuda_test`; both
    when undecided) and each ``try`` by its body."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            v = _cuda_test(node.test)
            out += _cuda_body(node.body if v else node.orelse) if v is not None else \
                _cuda_body(node.body) + _cuda_body(node.orelse)
        elif isinstance(node, ast.Try):
            out += _cuda_body(node.body)
        else:
            out.append(node)
    return out


def eagle3_interface(src: Source, architectures: dict) -> dict | None:
    """Which registered architectures' model classes implement ``SupportsEagle3``, and how vLLM refuses the others as
    an EAGLE-3 target.

    From 0.22.1 ``SpeculativeConfig`` has no EAGLE-3 target allowlist (:func:`eagle3_targets`); the model runner
    checks the loaded target instead: ``if not supports_eagle3(model): raise RuntimeError("Model does not support
    EAGLE3 interface ...")`` (``supports_eagle3`` is ``isinstance(model, SupportsEagle3)``, a runtime-checkable
    Protocol, vllm/model_executor/models/interfaces.py:1335, :1403-1406 in 0.22.1). The V1 runner makes it when the
    head uses auxiliary hidden states (vllm/v1/worker/gpu_model_runner.py:5208-5212), the V2 runner whenever
    ``use_aux_hidden_state_outputs`` is set (vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:18-19).

    Each architecture of ``architectures`` (:func:`model_architectures`) is followed to its class
    (``_VLLM_MODELS[arch] = (module, class)`` in registry.py) and through its base classes, imports and module-level
    aliases inside ``vllm/``, as Python's MRO would: it implements the interface when ``SupportsEagle3`` is among
    them. A class that only defines the Protocol's members without inheriting it (which ``isinstance`` would accept)
    is not looked for. ``None`` when the source has no ``SupportsEagle3`` or no runner check.

    Returns ``{"interface": file:line, "predicate": file:line, "checks": [{"runner", "source": file:first-last,
    "message"}], "architectures": {arch: file:line of its class}, "unresolved": [arch, ...]}`` (``unresolved``: a
    class or a ``vllm`` base the extractor could not find, so the verdict does not judge it).
    """
    ex = Extractor(src)
    iface_mod = ex.module(EAGLE3_INTERFACE.rsplit(".", 1)[0])
    if iface_mod is None or "SupportsEagle3" not in iface_mod.classes:
        return None
    predicate = iface_mod.functions.get("supports_eagle3")
    pred_line = max((n.lineno for n in iface_mod.tree.body
                     if isinstance(n, ast.FunctionDef) and n.name == "supports_eagle3"), default=None)
    checks = []
    for runner, file in EAGLE3_CHECK_FILES:
        text = src.read(file)
        if text is None:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.If) and isinstance(node.test, ast.UnaryOp) and \
                    isinstance(node.test.op, ast.Not) and isinstance(node.test.operand, ast.Call) and \
                    ast.unparse(node.test.operand.func) == "supports_eagle3":
                raise_ = next((n for n in node.body if isinstance(n, ast.Raise)), None)
                if raise_ is None or not isinstance(raise_.exc, ast.Call) or not raise_.exc.args:
                    continue
                checks.append({"runner": runner, "source": f"{file}:{node.lineno}-{raise_.end_lineno}",
                               "message": f"{ast.unparse(raise_.exc.func)}: {_fstring(raise_.exc.args[0])}"})
                break
    if predicate is None or not checks:
        return None
    memo: dict[str, tuple[bool | None, str | None]] = {}
    views: dict[str, tuple[str, dict[str, Any]] | None] = {}

    def view(mod_name: str) -> tuple[str, dict[str, Any]] | None:
        """``(file, {name: ClassDef | qualified name | ast expression})`` of what a module defines at import on CUDA."""
        if mod_name not in views:
            m = ex.module(mod_name)
            if m is None:
                views[mod_name] = None
                return None
            package = mod_name if m.file.endswith("__init__.py") else mod_name.rsplit(".", 1)[0]
            names: dict[str, Any] = {}
            for node in _cuda_body(m.tree.body):
                if isinstance(node, ast.ClassDef):
                    names[node.name] = node
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        parts = package.split(".")
                        base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
                    for a in node.names:
                        names[a.asname or a.name] = f"{base}.{a.name}"
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    # X = Y (an alias, followed); X = f(Y) (as_embedding_model(...), built at import: unknown)
                    names[node.targets[0].id] = node.value if isinstance(node.value, (ast.Name, ast.Attribute)) \
                        else None
            views[mod_name] = (m.file, names)
        return views[mod_name]

    def qualify(mod_name: str, names: dict[str, Any], expr: ast.AST) -> str | None:
        """The qualified name a base class expression means in a module (a builtin such as ``object`` as is; None:
        a call such as ``as_seq_cls_model(LlamaForCausalLM)``, which builds its class at import)."""
        if isinstance(expr, ast.Subscript):  # Generic[T], SupportsX[...]
            expr = expr.value
        dotted = ast.unparse(expr)
        if not re.fullmatch(r"[A-Za-z_]\w*(\.\w+)*", dotted):
            return None
        root, _, rest = dotted.partition(".")
        if root not in names:
            return dotted if hasattr(builtins, root) else None  # object; an undefined name: unknown
        target = names[root]
        if target is None:
            return None
        if isinstance(target, str):
            return target + (f".{rest}" if rest else "")
        return f"{mod_name}.{dotted}"

    def implements(qual: str, depth: int = 0) -> tuple[bool | None, str | None]:
        """Whether the class ``qual`` has SupportsEagle3 in its MRO (None: not found), and its file:line."""
        if qual == EAGLE3_INTERFACE:
            return True, None
        if not qual.startswith("vllm."):
            return False, None  # torch.nn.Module, typing.Protocol, object, ...
        if qual in memo or depth > 30:
            return memo.get(qual, (None, None))
        memo[qual] = (None, None)  # a cycle answers "unknown"
        mod_name, _, name = qual.rpartition(".")
        v = view(mod_name)
        if v is None or name not in v[1]:
            memo[qual] = (None, None)
            return memo[qual]
        file, names = v
        target = names[name]
        if isinstance(target, ast.ClassDef):
            answers = [implements(q, depth + 1)[0] if q else None
                       for q in (qualify(mod_name, names, b) for b in target.bases)]
            memo[qual] = (True if True in answers else None if None in answers else False), f"{file}:{target.lineno}"
        elif isinstance(target, str):
            memo[qual] = implements(target, depth + 1) if target != qual else (None, None)
        elif target is None:
            memo[qual] = (None, None)
        else:  # X = Y at module level
            q = qualify(mod_name, {k: t for k, t in names.items() if k != name}, target)
            memo[qual] = implements(q, depth + 1) if q and q != qual else (None, None)
        return memo[qual]

    entries = _registry_entries(src)
    found: dict[str, str] = {}
    unresolved: list[str] = []
    for arch in sorted(architectures):
        if arch not in entries:
            unresolved.append(arch)
            continue
        mod, cls = entries[arch]
        # registry.py's _resolve_module_name: a module path starting "vllm." as is (vllm.models.deepseek_v4, 0.22.1)
        ok, where = implements(f"{mod if mod.startswith('vllm.') else 'vllm.model_executor.models.' + mod}.{cls}")
        if ok:
            found[arch] = where
        elif ok is None:
            unresolved.append(arch)
    return {"interface": f"{iface_mod.file}:{iface_mod.classes['SupportsEagle3'].lineno}",
            "predicate": f"{iface_mod.file}:{pred_line}", "checks": checks, "architectures": found,
            "unresolved": unresolved}


# ---------------------------------------------------------------- transformers (the Transformers-backend fallback)
TRANSFORMERS_CONFIG_AUTO = "transformers/models/auto/configuration_auto.py"


def _config_mapping_names(zf: zipfile.ZipFile, names: set, p: Path) -> dict[str, str]:
    """The model types of ``CONFIG_MAPPING_NAMES``, each with its ``file:line``: an ``OrderedDict([(type, class),
    ...])`` literal in ``configuration_auto.py`` (4.x) or in ``auto_mappings.py`` (5.x, generated), plus the keys of
    ``CONFIG_MAPPING_NAMES.update({...})`` and ``OrderedDict(**{...}, **CONFIG_MAPPING_NAMES)`` in
    ``configuration_auto.py`` (5.19.0: ``:36``, ``:48``).

    Raises:
        SourceError: the mapping is built some other way."""
    out: dict[str, str] = {}
    found_literal = False
    for file in ("transformers/models/auto/auto_mappings.py", TRANSFORMERS_CONFIG_AUTO):
        if file not in names:
            continue
        tree = ast.parse(zf.read(file).decode("utf-8"))
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            call = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
            if isinstance(target, ast.Name) and target.id == "CONFIG_MAPPING_NAMES" and isinstance(call, ast.Call):
                if call.args and isinstance(call.args[0], (ast.List, ast.Tuple)):
                    found_literal = True
                    for e in call.args[0].elts:
                        if isinstance(e, ast.Tuple) and isinstance(e.elts[0], ast.Constant):
                            out.setdefault(e.elts[0].value, f"{file}:{e.lineno}")
                    continue
                for kw in call.keywords:
                    if kw.arg is None and isinstance(kw.value, ast.Dict):
                        for k in kw.value.keys:
                            out.setdefault(k.value, f"{file}:{k.lineno}")
                    elif not (kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id == "CONFIG_MAPPING_NAMES"):
                        raise SourceError(f"{p}: {file}:{node.lineno} builds CONFIG_MAPPING_NAMES in an unknown way")
            elif isinstance(node, ast.Expr) and isinstance(call, ast.Call) and \
                    ast.unparse(call.func) == "CONFIG_MAPPING_NAMES.update":
                if not (call.args and isinstance(call.args[0], ast.Dict)):
                    raise SourceError(f"{p}: {file}:{node.lineno} updates CONFIG_MAPPING_NAMES in an unknown way")
                for k in call.args[0].keys:
                    out.setdefault(k.value, f"{file}:{k.lineno}")
    if not found_literal:
        raise SourceError(f"{p}: no CONFIG_MAPPING_NAMES = OrderedDict([...]) literal found")
    return out


TRANSFORMERS_MODELING_UTILS = "transformers/modeling_utils.py"
_PRETRAINED = ("transformers.modeling_utils", "PreTrainedModel")
_EXTERNAL = "<external>"


class _TfModules:
    """The top-level classes and imports of a transformers wheel's modules, parsed on demand (``ast``), and the C3
    method resolution order of a class over them.

    A base imported from outside ``transformers`` (``nn.Module``, ``ABC``, ``object``) is *external*: it defines none
    of the attributes looked up here. A base that cannot be followed inside transformers (a name neither defined nor
    imported, a name defined twice at module level, a base built by an expression) makes the class *unresolved*:
    :meth:`mro` returns None rather than a guess."""

    def __init__(self, zf: zipfile.ZipFile, names: set):
        self.zf, self.names = zf, names
        self._mods: dict[str, dict | None] = {}
        self._mro: dict[tuple, list | None] = {}

    @staticmethod
    def file_of(module: str, names: set) -> str | None:
        base = module.replace(".", "/")
        return next((f for f in (f"{base}.py", f"{base}/__init__.py") if f in names), None)

    def module(self, module: str) -> dict | None:
        """``{"file", "text", "classes": {name: ClassDef | None (defined twice)}, "imports": {name: (module, name |
        None)}}`` of a transformers module, None when the wheel has no such file."""
        if module in self._mods:
            return self._mods[module]
        file = self.file_of(module, self.names)
        if file is None:
            self._mods[module] = None
            return None
        text = self.zf.read(file).decode("utf-8")
        pkg = module if file.endswith("/__init__.py") else module.rpartition(".")[0]
        classes: dict[str, ast.ClassDef | None] = {}
        imports: dict[str, tuple[str, str | None]] = {}

        def visit(body):
            for n in body:
                if isinstance(n, ast.ClassDef):
                    classes[n.name] = None if n.name in classes else n
                elif isinstance(n, ast.ImportFrom):
                    if n.level:
                        parts = pkg.split(".")
                        base = ".".join(parts[:len(parts) - (n.level - 1)] if n.level > 1 else parts)
                        src = f"{base}.{n.module}" if n.module else base
                    else:
                        src = n.module or ""
                    for a in n.names:
                        imports.setdefault(a.asname or a.name, (src, a.name))
                elif isinstance(n, ast.Import):
                    for a in n.names:
                        imports.setdefault(a.asname or a.name.split(".")[0], (a.name if a.asname else
                                                                              a.name.split(".")[0], None))
                elif isinstance(n, (ast.If, ast.Try)):
                    visit(n.body)
                    visit(n.orelse)
                    for h in getattr(n, "handlers", []):
                        visit(h.body)
        visit(ast.parse(text).body)
        self._mods[module] = {"file": file, "text": text, "classes": classes, "imports": imports}
        return self._mods[module]

    def resolve(self, module: str, name: str, depth: int = 0) -> tuple[str, str] | str | None:
        """``(module, class)`` where ``name`` as seen from ``module`` is defined, :data:`_EXTERNAL`, or None."""
        mod = self.module(module)
        if mod is None or depth > 20:
            return None
        if name in mod["classes"]:
            return (module, name) if mod["classes"][name] is not None else None
        if name in mod["imports"]:
            src, attr = mod["imports"][name]
            if src.split(".")[0] != "transformers":
                return _EXTERNAL
            return None if attr is None else self.resolve(src, attr, depth + 1)
        return _EXTERNAL if name == "object" else None

    def _base(self, module: str, node: ast.expr):
        if isinstance(node, ast.Name):
            return self.resolve(module, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):  # nn.Module
            mod = self.module(module)
            src = (mod or {}).get("imports", {}).get(node.value.id)
            if src is None:
                return None
            if src[0].split(".")[0] != "transformers":
                return _EXTERNAL
            return self.resolve(f"{src[0]}.{src[1]}" if src[1] else src[0], node.attr)
        if isinstance(node, ast.Subscript):  # Generic[T]
            return self._base(module, node.value)
        return None

    def node(self, key: tuple[str, str]) -> ast.ClassDef:
        return self.module(key[0])["classes"][key[1]]

    def mro(self, key: tuple[str, str], depth: int = 0) -> list | None:
        """C3 linearisation of the class ``key`` (``(module, name)``) over its transformers bases; external bases are
        left out (they define nothing looked up here); None when a base cannot be resolved."""
        if key in self._mro:
            return self._mro[key]
        self._mro[key] = None  # a cycle resolves to None
        if depth > 50:
            return None
        seqs = []
        direct = []
        for b in self.node(key).bases:
            r = self._base(key[0], b)
            if r is None:
                return None
            if r == _EXTERNAL:
                continue
            sub = self.mro(r, depth + 1)
            if sub is None:
                return None
            seqs.append(list(sub))
            direct.append(r)
        seqs.append(direct)
        out = [key]
        while any(seqs):
            seqs = [s for s in seqs if s]
            head = next((s[0] for s in seqs if not any(s[0] in t[1:] for t in seqs)), None)
            if head is None:
                return None  # inconsistent hierarchy: Python would refuse it
            out.append(head)
            seqs = [s[1:] if s[0] == head else s for s in seqs]
        self._mro[key] = out
        return out


def _class_attr(node: ast.ClassDef, name: str) -> ast.stmt | None:
    """The statement of ``node``'s body that binds ``name`` (an assignment or a ``def``), the last one as Python
    keeps it."""
    found = None
    for n in node.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name:
            found = n
        elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets):
            found = n
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == name and n.value:
            found = n
    return found


def _can_set_heuristic(fn: ast.FunctionDef, file: str) -> dict:
    """What ``PreTrainedModel._can_set_attn_implementation`` decides from the text of the class's module: a
    ``re.search(PATTERN, code[, FLAGS])`` for an attention ``nn.Module`` class, then ``"NEEDLE" in code and ...``;
    without such a class, True (``modeling_utils.py:2731`` in 4.57.6, ``:1912`` in 5.19.0).

    Raises:
        SourceError: the method decides some other way."""
    branch = next((n for n in ast.walk(fn) if isinstance(n, ast.If) and isinstance(n.test, ast.Call)
                   and ast.unparse(n.test.func) == "re.search"), None)
    if branch is None or not isinstance(branch.test.args[0], ast.Constant):
        raise SourceError(f"{file}:{fn.lineno}: _can_set_attn_implementation has no re.search(<pattern>, code) test")
    flags = branch.test.args[2] if len(branch.test.args) > 2 else next(
        (k.value for k in branch.test.keywords if k.arg == "flags"), None)
    flag_text = ast.unparse(flags) if flags is not None else None
    if flag_text not in (None, "re.MULTILINE", "re.M"):
        raise SourceError(f"{file}:{branch.lineno}: unknown re.search flags {flag_text}")

    def value(stmts) -> ast.expr:
        last = stmts[-1]
        if isinstance(last, (ast.Return, ast.Assign)) and last.value is not None:
            return last.value
        raise SourceError(f"{file}:{last.lineno}: _can_set_attn_implementation branch does not end in a value")
    then, other = value(branch.body), value(branch.orelse) if branch.orelse else None
    tests = then.values if isinstance(then, ast.BoolOp) and isinstance(then.op, ast.And) else [then]
    needles = []
    for t in tests:
        if not (isinstance(t, ast.Compare) and isinstance(t.left, ast.Constant) and isinstance(t.left.value, str)
                and len(t.ops) == 1 and isinstance(t.ops[0], ast.In)):
            raise SourceError(f"{file}:{t.lineno}: _can_set_attn_implementation tests {ast.unparse(t)}")
        needles.append(t.left.value)
    if not (isinstance(other, ast.Constant) and other.value is True):
        raise SourceError(f"{file}:{branch.lineno}: _can_set_attn_implementation without an attention class is not True")
    return {"source": f"{file}:{fn.lineno}", "attention_class": branch.test.args[0].value,
            "multiline": flag_text is not None, "requires": needles, "without_attention_class": True}


def _transformers_attention(zf: zipfile.ZipFile, names: set, classes: dict[str, str], p: Path) -> dict:
    """What vLLM's ``_try_resolve_transformers`` asks of each exported class (``classes``: name -> ``file:line``):
    ``is_backend_compatible()`` (``return cls._supports_attention_backend``, ``modeling_utils.py:4728`` in 5.19.0,
    default False at ``:1145``) and, from vLLM 0.30, ``_can_set_attn_implementation()``.

    ``_supports_attention_backend`` is looked up along the class's method resolution order (C3, over the bases
    followed through transformers' own modules, :class:`_TfModules`); a class that does not derive from
    ``PreTrainedModel``, or whose bases cannot be followed, is in neither list. ``_can_set_attn_implementation`` is
    the first definition along the same order: ``PreTrainedModel``'s reads the text of the class's own module
    (``inspect.getsource(sys.modules[cls.__module__])``, the modeling file), so its answer is decided here from that
    file's text by the method's own pattern and needles (:func:`_can_set_heuristic`); an override that returns a
    constant gives that constant, any other override is None (not decided).

    Returns ``{"attention_interface": {...rules with file:line...}, "supports_attention_backend": {"true":
    {file:line of the assignment: [classes]}, "false": {file:line of the assignment or of the default: [classes]}},
    "can_set_attn_implementation": {"files": {modeling file: [bool, file:line]}, "overrides": {cls: [bool | None,
    file:line]}}}`` (grouped by source to keep the file small: :func:`compat.architectures.attention_support` reads
    one class back). ``files`` answers for every class of that file whose resolution order reaches
    ``PreTrainedModel``'s method, ``overrides`` for the others; its ``file:line`` is the attention class that decides
    (False: the class without the interface; True: the line of the first needle), or the file alone where it has no
    attention class.

    Raises:
        SourceError: ``modeling_utils.py`` does not define the two methods and the default the way read here."""
    mods = _TfModules(zf, names)
    pre = mods.module(_PRETRAINED[0])
    pre_node = pre and pre["classes"].get(_PRETRAINED[1])
    if pre_node is None:
        raise SourceError(f"{p}: no {TRANSFORMERS_MODELING_UTILS} class PreTrainedModel")
    mu = TRANSFORMERS_MODELING_UTILS
    default = _class_attr(pre_node, "_supports_attention_backend")
    compat_fn = _class_attr(pre_node, "is_backend_compatible")
    can_fn = _class_attr(pre_node, "_can_set_attn_implementation")
    if not (isinstance(default, (ast.Assign, ast.AnnAssign)) and isinstance(default.value, ast.Constant)
            and isinstance(compat_fn, ast.FunctionDef) and isinstance(can_fn, ast.FunctionDef)):
        raise SourceError(f"{p}: {mu} PreTrainedModel lacks _supports_attention_backend = <bool>, "
                          "is_backend_compatible or _can_set_attn_implementation")
    ret = [n for n in ast.walk(compat_fn) if isinstance(n, ast.Return)]
    if len(ret) != 1 or ast.unparse(ret[0].value) != "cls._supports_attention_backend":
        raise SourceError(f"{p}: {mu}:{compat_fn.lineno} is_backend_compatible does not return "
                          "cls._supports_attention_backend")
    heur = _can_set_heuristic(can_fn, mu)
    flags = re.MULTILINE if heur["multiline"] else 0
    file_answer: dict[str, list] = {}

    def by_file(file: str) -> list:
        if file not in file_answer:
            text = zf.read(file).decode("utf-8")
            m = re.search(heur["attention_class"], text, flags)
            if m is None:
                file_answer[file] = [True, file]
            else:
                missing = [s for s in heur["requires"] if s not in text]
                at = text.index(heur["requires"][0]) if not missing else m.start()
                file_answer[file] = [not missing, f"{file}:{text.count(chr(10), 0, at) + 1}"]
        return file_answer[file]

    true: dict[str, list] = {}
    false: dict[str, list] = {}
    overrides: dict[str, list] = {}
    for cls, where in classes.items():
        file = where.rsplit(":", 1)[0]
        module = file[:-len(".py")].replace("/", ".")
        order = mods.mro((module, cls))
        if order is None or _PRETRAINED not in order:
            continue
        flag = can = None
        for key in order:
            node = mods.node(key)
            file_k = mods.module(key[0])["file"]
            if flag is None:
                a = _class_attr(node, "_supports_attention_backend")
                if a is not None:
                    flag = (a.value.value if isinstance(a, (ast.Assign, ast.AnnAssign)) and isinstance(a.value, ast.Constant)
                            and isinstance(a.value.value, bool) else None, f"{file_k}:{a.lineno}")
            if can is None:
                cached = _class_attr(node, "_can_set_attn_implementation_cached_value")
                fn = _class_attr(node, "_can_set_attn_implementation")
                if cached is not None:
                    can = [None, f"{file_k}:{cached.lineno}"]
                elif fn is not None and key == _PRETRAINED:
                    can = by_file(file)  # recorded once per file, "files"
                elif fn is not None:
                    body = [s for s in getattr(fn, "body", []) if not (isinstance(s, ast.Expr)
                                                                       and isinstance(s.value, ast.Constant))]
                    const = body[0].value.value if len(body) == 1 and isinstance(body[0], ast.Return) and \
                        isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, bool) else None
                    can = [const, f"{file_k}:{fn.lineno}"]
            if flag is not None and can is not None:
                break
        if flag is not None and flag[0] is True:
            true.setdefault(flag[1], []).append(cls)
        elif flag is not None and flag[0] is False:
            false.setdefault(flag[1], []).append(cls)
        if can is not None and can is not file_answer.get(file):
            overrides[cls] = can
    return {
        "attention_interface": {
            "is_backend_compatible": {"source": f"{mu}:{compat_fn.lineno}", "returns": "cls._supports_attention_backend",
                                      "default": {"value": default.value.value, "source": f"{mu}:{default.lineno}"}},
            "can_set_attn_implementation": heur},
        "supports_attention_backend": {"true": {k: sorted(v) for k, v in sorted(true.items())},
                                       "false": {k: sorted(v) for k, v in sorted(false.items())}},
        "can_set_attn_implementation": {"files": dict(sorted(file_answer.items())),
                                        "overrides": dict(sorted(overrides.items()))},
    }


def extract_transformers(path: str | Path) -> dict:
    """What a ``transformers`` wheel offers vLLM's Transformers-backend fallback, read with ``ast``.

    vLLM's ``_try_resolve_transformers`` takes ``getattr(transformers, architecture)``; transformers exports the
    names each ``transformers/models/<name>/modeling_<name>.py`` lists in ``__all__`` (``define_import_structure``,
    lazily), so ``classes`` is the union of those lists (TF / Flax modules left out: their names carry a prefix),
    each with its class's ``file:line``. ``model_types`` are the keys of ``CONFIG_MAPPING_NAMES``
    (:func:`_config_mapping_names`): a config whose ``model_type`` is missing there is refused by ``AutoConfig`` with
    ``unknown_model_type``'s message (unless vLLM ships its own config class for it).

    Whether vLLM's fallback accepts a class it finds is :func:`_transformers_attention`'s part
    (``attention_interface``, ``supports_attention_backend``, ``can_set_attn_implementation``).

    Returns ``{"schema", "runtime": "transformers", "release", "extracted_from", "provenance", "model_types",
    "classes", "unknown_model_type", "attention_interface", "supports_attention_backend",
    "can_set_attn_implementation"}``.

    Raises:
        SourceError: not a transformers wheel.
    """
    p = Path(path)
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, FileNotFoundError, IsADirectoryError) as e:
        raise SourceError(f"{p} is not a readable wheel: {e}") from e
    names = set(zf.namelist())
    if TRANSFORMERS_CONFIG_AUTO not in names:
        raise SourceError(f"{p}: not a transformers wheel ({TRANSFORMERS_CONFIG_AUTO} not found)")
    m = re.match(r"transformers-([0-9][^-]*)-", p.name)
    if not m:
        raise SourceError(f"{p}: cannot tell the transformers release from the file name")
    text = zf.read(TRANSFORMERS_CONFIG_AUTO).decode("utf-8")
    tree = ast.parse(text)
    model_types = _config_mapping_names(zf, names, p)
    classes: dict[str, str] = {}
    for name in sorted(names):
        if not re.fullmatch(r"transformers/models/(?:[^/]+/)+modeling_(?!tf_|flax_)[^/]+\.py", name):
            continue
        mod = ast.parse(zf.read(name).decode("utf-8"))
        defs = {n.name: n.lineno for n in mod.body if isinstance(n, ast.ClassDef)}
        exported = _top_assign(mod, "__all__")
        if exported is None or not isinstance(exported.value, (ast.List, ast.Tuple)):
            continue
        for e in exported.value.elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in defs:
                classes.setdefault(e.value, f"{name}:{defs[e.value]}")
    unknown = None
    for n in ast.walk(tree):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args and \
                "does not recognize this architecture" in _fstring(n.exc.args[0]):
            first = _fstring(n.exc.args[0]).split("\n")[0]
            unknown = {"message": f"{ast.unparse(n.exc.func)}: {first}", "source": f"{TRANSFORMERS_CONFIG_AUTO}:{n.lineno}"}
            break
    h = hashlib.sha256(p.read_bytes()).hexdigest()
    return {"schema": SCHEMA_VERSION, "runtime": "transformers", "release": m.group(1), "extracted_from": f"wheel {p.name}",
            "provenance": {"file": p.name, "sha256": h, "extractor_version": EXTRACTOR_VERSION},
            "model_types": dict(sorted(model_types.items())), "classes": dict(sorted(classes.items())),
            "unknown_model_type": unknown, **_transformers_attention(zf, names, classes, p)}


# ---------------------------------------------------------------- main entry
def extract(path: str | Path, release: str | None = None) -> dict:
    """Extract one release's compatibility data from ``path`` (wheel, package dir or tree).

    Returns the JSON-ready dict described in the module docstring.

    Raises:
        SourceError: ``path`` is not vLLM, or its release cannot be determined and ``release`` is None.
    """
    src = open_source(path)
    release = release or src.release()
    if not release:
        raise SourceError(f"{path}: cannot tell the vLLM release; pass --release")
    ex = Extractor(src)
    legacy = ex.layout.name == "legacy"
    base = ex.add_class(ex.layout.base_backend)
    if base is None:
        raise SourceError(f"AttentionBackend base class {ex.layout.base_backend} not found")
    registry_file = f"{ex.layout.registry.replace('.', '/')}.py"
    backends = []
    for member in ([] if legacy else ex.registry()):
        cls_q = ex.add_class(member["path"])
        backends.append({"name": member["name"], "class": cls_q, "path": member["path"],
                         "registry": f"{registry_file}:{member['registry_line']}"})
    for extra in ex.layout.extra_classes:
        ex.add_class(extra)

    platforms = {}
    selector_paths: dict[str, list[str]] = {}
    for plat, candidates in PLATFORM_SELECTORS.items():
        node = None
        for mod_name, fn_name, kind in candidates:
            node = _selector(ex, platforms, plat, mod_name, fn_name, kind)
            if node is not None:
                break
        if node is None:
            continue
        enum_name = "_Backend" if legacy else "AttentionBackendEnum"
        names = sorted({n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                        and isinstance(n.value, ast.Name) and n.value.id == enum_name})
        if legacy:
            # the selector returns class paths; the _Backend members it compares with are what
            # VLLM_ATTENTION_BACKEND can pick on this platform
            selector_paths[plat] = _selector_paths(ex, node)
            platforms[plat]["backends"] = [p.rsplit(".", 1)[-1] for p in selector_paths[plat]]
            platforms[plat]["env_names"] = names
            continue
        platforms[plat]["backends"] = names
        loop = PLATFORM_VALIDATION_LOOP.get(plat)
        if loop:
            lm = ex.module(loop[0])
            cls_name, meth = loop[1].split(".")
            for cname, cnode in (lm.classes.items() if lm else []):
                for item in cnode.body:
                    if isinstance(item, ast.FunctionDef) and item.name == meth:
                        platforms[plat]["validation_loop"] = f"{lm.file}:{item.lineno}"
    # the XPU MLA path validates XPUFlashAttnMLABackend directly
    configs = model_configs(ex)
    ex.add_class("vllm.v1.attention.backends.mla.flashattn_mla.XPUFlashAttnMLABackend")

    if legacy:
        backends = legacy_backends(ex, src, selector_paths)
    data: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "runtime": "vllm",
        "release": release,
        "extracted_from": src.label(),
        "provenance": {**src.provenance(), "extractor_version": EXTRACTOR_VERSION, "layout": ex.layout.name},
        "base_class": base,
        "validate_configuration": None if legacy else (
            f"{ex.out_classes[base]['file']}:{ex.out_classes[base]['methods']['validate_configuration']['line']}"),
        "platforms": platforms,
    }
    if legacy:
        # no --attention-backend before 0.11: VLLM_ATTENTION_BACKEND names a _Backend member; the V1 engine unless
        # VLLM_USE_V1=0 or EngineArgs._is_v1_supported_oracle falls back to V0 (:func:`v1_oracle`)
        interface = ex.module("vllm.platforms.interface")
        data["selection"] = {
            "flag": None, "env": "VLLM_ATTENTION_BACKEND", "env_source": _env_line(src, "VLLM_ATTENTION_BACKEND"),
            "enum": f"{interface.file}:{interface.classes['_Backend'].lineno}",
            "enum_members": [m["name"] for m in legacy_enum(ex)],
            "use_v1_source": _env_line(src, "VLLM_USE_V1")}
    # vllm/config/cache.py and vllm/config/speculative.py; 0.10.x keeps SpeculativeMethod in vllm/config/__init__.py,
    # 0.9 / 0.10.0 both in vllm/config.py (module vllm.config either way)
    cache = _literal_in(ex, "CacheDType", ("vllm.config.cache", "vllm.config"))
    data["cache_dtypes"] = {"values": cache[0] if cache else [], "source": f"{cache[1]}:{cache[2]}" if cache else None}
    spec = _literal_in(ex, "SpeculativeMethod", ("vllm.config.speculative", "vllm.config"))
    spec_file = spec[1] if spec else "vllm/config/speculative.py"
    spec_text = src.read(spec_file)
    if spec_text is not None and spec_file != "vllm/config/speculative.py":
        # a shared config module: only SpeculativeConfig's own lines count
        start = _find_line(spec_text, "class SpeculativeConfig") or 1
        spec_text = "\n" * (start - 1) + "\n".join(spec_text.splitlines()[start - 1:])
    mtp = _literal_in(ex, "MTPModelTypes", ("vllm.config.speculative", "vllm.config"))
    data["speculative"] = {
        "methods": sorted(set(spec[0])) if spec else [],
        "source": f"{spec[1]}:{spec[2]}" if spec else None,
        "mtp_model_types": sorted(set(mtp[0])) if mtp else [],
        "mtp_layers_key_source": (f"{spec_file}:{_find_line(spec_text, 'num_nextn_predict_layers')}"
                                  if _find_line(spec_text, "num_nextn_predict_layers") else None),
        "heterogeneous_vocab_source": (
            f"{spec_file}:{_find_line(spec_text, 'use_heterogeneous_vocab: bool')}"
            if _find_line(spec_text, "use_heterogeneous_vocab: bool") else None),
    }
    eagle3 = eagle3_targets(spec_text, spec_file)
    if eagle3 is not None:  # only where the release has the check: the files of the others stay as they were
        data["speculative"]["eagle3_targets"] = eagle3
    data["model_configs"] = configs
    data["model_architectures"], data["model_registry"] = model_architectures(src)
    if eagle3 is None:
        # 0.22.1 onwards: no target allowlist; the model runner checks the target's class (:func:`eagle3_interface`).
        # Earlier releases' runners check it too, after the allowlist: not read (their files stay as they were).
        e3i = eagle3_interface(src, data["model_architectures"])
        if e3i is not None:
            data["eagle3_interface"] = e3i
    data["quantization"] = quantization_methods(ex)
    if legacy:
        data["v1_oracle"] = v1_oracle(ex)
    # what ``pip install vllm==X`` installs with it (the transformers the Transformers-backend fallback imports)
    data["requirements"] = {"transformers": src.requirement("transformers")}
    data["flash_attn"] = flash_attn_support(src)
    data["modules"] = {
        name: {"file": ex._modules[name].file, "imports": dict(sorted(ex._modules[name].imports.items())),
               "constants": dict(sorted(ex._modules[name].constants.items())),
               # only where a module has one, so the other modules' entries read as before
               **({"runtime_constants": dict(sorted(ex._modules[name].runtime_constants.items()))}
                  if ex._modules[name].runtime_constants else {})}
        for name in sorted(ex.used_modules) if ex._modules.get(name) is not None}
    data["classes"] = dict(sorted(ex.out_classes.items()))
    data["functions"] = dict(sorted(ex.out_functions.items()))
    if legacy:
        data["env_defaults"] = env_defaults(src, data)

    in_platform: dict[str, list[str]] = {}
    for plat, p in platforms.items():
        for name in p["backends"]:
            in_platform.setdefault(name, []).append(plat)
    for b in backends:
        if legacy:
            b["source"] = f"{data['classes'][b['class']]['file']}:{data['classes'][b['class']]['line']}"
            b["declared"] = summarize_legacy_backend(data, b)
            continue
        b["platforms"] = sorted(in_platform.get(b["name"], []))
        if b["class"] is None:
            b["missing"] = _why_missing(ex, b["path"])
            continue
        c = data["classes"][b["class"]]
        b["source"] = f"{c['file']}:{c['line']}"
        b["declared"] = summarize_backend(data, b["class"], (b["platforms"] or ["cuda"])[0])
    data["backends"] = backends
    return data


def dump(data: dict) -> str:
    """Canonical JSON text (sorted keys, 1-space indent, trailing newline) so re-runs are byte-equal."""
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def data_path(release: str, runtime: str = "vllm") -> Path:
    return DATA_DIR / f"{runtime}-{release}.json"


def available_releases(runtime: str = "vllm") -> list[str]:
    """Releases with a committed data file, oldest first (:func:`compat.releases.covered_releases`)."""
    from .releases import covered_releases
    return list(covered_releases(runtime))


def load(release: str, runtime: str = "vllm") -> dict:
    """The committed data file of ``release``.

    Raises:
        FileNotFoundError: no data file; the message lists the releases that have one.
    """
    p = data_path(release, runtime)
    if not p.is_file():
        from .releases import not_covered_message
        raise FileNotFoundError(not_covered_message(release, runtime))
    return _load_cached(str(p), p.stat().st_mtime)


_cache: dict[tuple[str, float], dict] = {}


def _load_cached(path: str, mtime: float) -> dict:
    key = (path, mtime)
    if key not in _cache:
        _cache[key] = json.loads(Path(path).read_text())
    return _cache[key]
