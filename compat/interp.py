"""A small, safe evaluator for the vLLM functions the extractor stored as source text.

vLLM decides backend compatibility in ordinary Python: ``supports_*`` classmethods, a base-class
``validate_configuration(...) -> list[str]`` (``vllm/v1/attention/backend.py:276`` in 0.32) and a
per-platform priority function (``vllm/platforms/cuda.py:83`` ``_get_backend_priorities``). Copying
those rules into a hand-written table would drift with every release, so the extractor keeps each
function's source (with file:line) in the release's data file and this module *evaluates* it, never
importing vLLM or torch.

Only a small subset of Python is understood (if/return/assign, comparisons, boolean logic, literals,
calls to other stored functions and methods, f-strings, list append/insert). Anything else (a call into
a kernel package, an environment variable, ``get_current_vllm_config()``) evaluates to
:class:`Unknown`, whose ``text`` is the expression with every known value substituted. When an
``Unknown`` is used as a condition the evaluation raises :class:`Undecided`; :func:`evaluate` then
re-runs the function once assuming the condition true and once false and returns a :class:`Fork`.
That is how "decided at run time" rules become recorded conditions instead of a guessed yes/no.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

MAX_FORKS = 64
MAX_DEPTH = 40


@dataclass(frozen=True)
class Unknown:
    """A value only known at run time; ``text`` is the expression, e.g. ``is_fa_version_supported(3)``."""

    text: str

    def __repr__(self) -> str:
        return self.text


class Undecided(Exception):
    """Raised when an :class:`Unknown` is needed as a bool and no assumption covers it."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class Raised(Exception):
    """The evaluated function executed ``raise``; ``message`` is the exception's text."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class NotEvaluable(Exception):
    """The function uses a construct this evaluator does not model (the caller turns it into Unknown)."""


@dataclass
class Fork:
    """Outcome that depends on a run-time condition: ``then`` if ``condition`` is true, else ``otherwise``."""

    condition: str
    then: Any
    otherwise: Any

    def leaves(self, path: tuple = ()) -> list[tuple[tuple, Any]]:
        out = []
        for val, branch in ((True, self.then), (False, self.otherwise)):
            p = path + ((self.condition, val),)
            out.extend(branch.leaves(p) if isinstance(branch, Fork) else [(p, branch)])
        return out


@dataclass(frozen=True)
class Capability:
    """vLLM's ``DeviceCapability(major, minor)`` (``vllm/platforms/interface.py:93``)."""

    major: int
    minor: int

    def _t(self, other):
        if isinstance(other, Capability):
            return (other.major, other.minor)
        if isinstance(other, tuple):
            return other
        raise NotEvaluable(f"compare capability with {other!r}")

    def __lt__(self, o):
        return (self.major, self.minor) < self._t(o)

    def __le__(self, o):
        return (self.major, self.minor) <= self._t(o)

    def __gt__(self, o):
        return (self.major, self.minor) > self._t(o)

    def __ge__(self, o):
        return (self.major, self.minor) >= self._t(o)

    def __getitem__(self, i):  # DeviceCapability is a NamedTuple: capability[0] is the major version
        return (self.major, self.minor)[i]

    def __iter__(self):
        return iter((self.major, self.minor))

    def to_int(self) -> int:
        return self.major * 10 + self.minor

    def as_version_str(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class MultipleOf:
    """vLLM's ``MultipleOf(base)`` kernel block-size marker (``vllm/v1/attention/backend.py:52``)."""

    base: int

    def __repr__(self) -> str:
        return f"MultipleOf({self.base})"


@dataclass(frozen=True)
class BackendRef:
    """A member of ``AttentionBackendEnum`` (``vllm/v1/attention/backends/registry.py``)."""

    name: str

    def get_path(self, include_classname: bool = True) -> "BackendRef":
        return self

    def get_class(self) -> "BackendRef":
        return self


class _Namespace:
    """Attribute access on a dict (``attn_selector_config.use_mla``) and ``_asdict()``; nested dicts
    become namespaces too (``vllm_config.model_config.hf_text_config.qk_nope_head_dim``)."""

    def __init__(self, values: dict):
        self._values = {k: (_Namespace(v) if isinstance(v, dict) and not k.startswith("_") else v)
                        for k, v in values.items()}

    def __getattr__(self, item):
        try:
            return self.__dict__["_values"][item]
        except KeyError:
            raise AttributeError(item) from None

    def _asdict(self) -> dict:
        return dict(self._values)

    def __getitem__(self, i):
        """``model_arch_config[i]``: the per-layer entries stored under ``_items`` (vllm/config/model_arch.py)."""
        items = self.__dict__["_values"].get("_items")
        if items is None:
            raise NotEvaluable("subscript of a config object")
        return items[i]

    def _set(self, name: str, value) -> None:
        """``vllm_config.attention_config.backend = X`` (a model config's ``verify_and_update_config``)."""
        self.__dict__["_values"][name] = value


@dataclass
class Platform:
    """``current_platform`` as the checks see it: the platform kind and the device capability."""

    kind: str  # cuda | rocm | cpu | xpu
    capability: Capability | None
    # 0.9 / 0.10 (data layout "legacy"): the stored platform class (``vllm.platforms.cuda.CudaPlatformBase``) whose
    # other classmethods ``current_platform.X(...)`` runs (``is_kv_cache_dtype_supported``, ``supports_v1``)
    cls_q: str | None = None

    def is_cuda(self):
        return self.kind == "cuda"

    def is_rocm(self):
        return self.kind == "rocm"

    def is_cpu(self):
        return self.kind == "cpu"

    def is_xpu(self):
        return self.kind == "xpu"

    def is_cuda_alike(self):
        return self.kind in ("cuda", "rocm")

    def get_device_capability(self, device_id: int = 0):
        return self.capability

    def _unknown(self, what: str, capability):
        if isinstance(self.capability, Unknown):
            return Unknown(f"current_platform.{what}({capability!r})")
        return None

    # vllm/platforms/interface.py:531-588 (0.32)
    def has_device_capability(self, capability, device_id: int = 0):
        if (u := self._unknown("has_device_capability", capability)) is not None:
            return u
        if self.capability is None:
            return False
        if isinstance(capability, tuple):
            return (self.capability.major, self.capability.minor) >= capability
        return self.capability.to_int() >= capability

    def is_device_capability(self, capability, device_id: int = 0):
        if (u := self._unknown("is_device_capability", capability)) is not None:
            return u
        if self.capability is None:
            return False
        if isinstance(capability, tuple):
            return (self.capability.major, self.capability.minor) == capability
        return self.capability.to_int() == capability

    def is_device_capability_family(self, capability, device_id: int = 0):
        if (u := self._unknown("is_device_capability_family", capability)) is not None:
            return u
        if self.capability is None:
            return False
        return self.capability.to_int() // 10 == capability // 10


class _Torch:
    """``torch.<dtype>`` becomes the dtype's name; anything else is Unknown."""

    DTYPES = {"float16", "bfloat16", "float32", "half", "float", "float8_e4m3fn", "float8_e5m2",
              "uint8", "int8"}
    ALIASES = {"half": "float16", "float": "float32"}

    def attr(self, name: str):
        if name in self.DTYPES:
            return self.ALIASES.get(name, name)
        return Unknown(f"torch.{name}")


class _BackendEnum:
    def attr(self, name: str):
        return BackendRef(name)


TORCH = _Torch()
BACKEND_ENUM = _BackendEnum()
_IGNORED_CALL_ROOTS = {"logger", "warnings", "logging"}
_SAFE_METHODS = {
    str: {"startswith", "endswith", "lower", "upper", "split", "replace", "format", "strip"},
    list: {"append", "insert", "extend", "index", "count", "copy", "remove"},
    dict: {"get", "keys", "values", "items"},
    tuple: {"index", "count"},
    set: {"add", "issubset", "isdisjoint"},
}
_BUILTINS: dict[str, Callable] = {
    "len": len, "min": min, "max": max, "any": any, "all": all, "set": set, "tuple": tuple,
    "list": list, "str": str, "int": int, "bool": bool, "sorted": sorted, "frozenset": frozenset,
    "abs": abs, "range": range,
}
_EXC_NAMES = {"ValueError", "NotImplementedError", "RuntimeError", "AssertionError", "ImportError",
              "TypeError", "KeyError"}


@lru_cache(maxsize=4096)
def parse_function(src: str) -> ast.FunctionDef:
    node = ast.parse(src).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


@lru_cache(maxsize=4096)
def parse_expr(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def _text(v: Any) -> str:
    if isinstance(v, _Namespace):
        return "config"
    if isinstance(v, Unknown):
        return v.text
    if isinstance(v, BackendRef):
        return f"AttentionBackendEnum.{v.name}"
    if isinstance(v, Capability):
        return f"DeviceCapability({v.major}, {v.minor})"
    return repr(v)


class _Return(Exception):
    def __init__(self, value):
        self.value = value


@dataclass
class ClassRef:
    """A backend (or base) class stored in the data file, bound for ``cls.x`` lookups."""

    qualname: str


@dataclass
class _Super:
    cls: ClassRef  # the class ``cls`` is bound to
    after: str  # the class whose method called super()


@dataclass
class _BoundMethod:
    owner: str  # class qualname the method was found on
    name: str
    cls: ClassRef


@dataclass
class _FunctionRef:
    qualname: str


@dataclass
class _Closure:
    """A function defined inside the evaluated function (0.9 / 0.10 only); it sees the enclosing locals."""

    fn: ast.FunctionDef
    local: dict
    module: str
    cls: Any
    owner: Any


@dataclass
class _Instance:
    """An instance of a stored field-only class (``_IsSupported(can_import=..., head_size=..., dtype=...)``)."""

    cls: ClassRef
    values: dict


# what ``cls.X(...)`` in a platform classmethod asks the device (answered by :class:`Platform`, 0.9 / 0.10 only)
PLATFORM_QUERIES = {"has_device_capability", "is_device_capability", "get_device_capability",
                    "is_device_capability_family", "is_cuda", "is_rocm", "is_cpu", "is_xpu", "is_cuda_alike"}
# imports that ``pip install vllm`` always provides (0.9 / 0.10 evaluation: anything else is a run-time condition)
IMPORTS_ALWAYS_THERE = {"vllm", "torch", "typing", "functools", "os", "math", "dataclasses", "enum", "contextlib",
                        "importlib", "collections", "itertools", "warnings", "transformers", "triton"}


@dataclass
class Evaluator:
    """Evaluates stored functions of one release's data file.

    ``data``: the release data (``classes``, ``functions``, ``modules``). ``platform``: what
    ``current_platform`` answers. ``assumptions``: ``{Unknown.text: value}`` for run-time conditions
    already decided (by :func:`evaluate` forking, or by the caller's defaults).
    """

    data: dict
    platform: Platform
    assumptions: dict = field(default_factory=dict)
    used: dict = field(default_factory=dict)
    depth: int = 0

    vllm_config: Any = None  # _Namespace returned by get_current_vllm_config(); None: unknown
    # evaluate ``assert`` statements (a 0.9 / 0.10 attention implementation's constructor refuses a layer with them,
    # ``vllm/v1/attention/backends/flash_attn.py:416`` in 0.10.2); elsewhere they are skipped
    check_asserts: bool = False
    instance: Any = None  # the object an ``__init__`` being evaluated builds (its ``self``; :func:`construct`)

    @property
    def legacy(self) -> bool:
        """The data is a 0.9 / 0.10 release (``provenance.layout`` "legacy"): the selectors are if-chains returning
        class paths and the constructs below are evaluated instead of left unknown."""
        return self.data.get("provenance", {}).get("layout") == "legacy"

    def _maybe(self, u: Unknown):
        """An Unknown whose text the caller assumed (``platform.machine()`` = x86_64) becomes that value."""
        if u.text in self.assumptions and not isinstance(self.assumptions[u.text], bool):
            self.used[u.text] = self.assumptions[u.text]
            return self.assumptions[u.text]
        return u

    # ---- truthiness with three-valued logic ----
    def truth(self, v: Any) -> bool:
        if isinstance(v, Unknown):
            if v.text in self.assumptions:
                self.used[v.text] = self.assumptions[v.text]
                return bool(self.assumptions[v.text])
            raise Undecided(v.text)
        if isinstance(v, (ClassRef, _FunctionRef, _BoundMethod, BackendRef, Capability)):
            return True
        if isinstance(v, _Instance):
            found = self.find_member(v.cls.qualname, "__bool__")
            if found is None:
                return True
            return self.truth(self._invoke_on(v, found[0], "__bool__"))
        return bool(v)

    def _invoke_on(self, inst: "_Instance", owner: str, name: str, *args):
        entry = self.data["classes"][owner]["methods"][name]
        fn = parse_function(entry["src"])
        local = self._bind(fn, [inst, *args], {}, self.data["classes"][owner]["module"], owner)
        try:
            self.exec_block(fn.body, local, self.data["classes"][owner]["module"], inst.cls, owner)
        except _Return as r:
            return r.value
        return None

    # ---- class model ----
    def mro(self, qualname: str) -> list[str]:
        out: list[str] = []

        def walk(q: str):
            if q in out or q not in self.data["classes"]:
                return
            out.append(q)
            for b in self.data["classes"][q]["bases"]:
                walk(b)

        walk(qualname)
        return out

    def find_member(self, cls_q: str, name: str, after: str | None = None):
        chain = self.mro(cls_q)
        if after is not None and after in chain:
            chain = chain[chain.index(after) + 1:]
        for q in chain:
            c = self.data["classes"][q]
            if name in c["methods"]:
                return q, "method", c["methods"][name]
            if name in c["attrs"]:
                return q, "attr", c["attrs"][name]
        return None

    def class_attr(self, ref: ClassRef, name: str, after: str | None = None):
        if self.legacy and ref.qualname.startswith("vllm.platforms.") and name in PLATFORM_QUERIES:
            # ``cls.has_device_capability(80)`` inside a platform classmethod asks the device
            return getattr(self.platform, name)
        found = self.find_member(ref.qualname, name, after)
        if found is None:
            if name == "__name__":
                return ref.qualname.rsplit(".", 1)[-1]
            return Unknown(f"{ref.qualname.rsplit('.', 1)[-1]}.{name}")
        owner, kind, entry = found
        if kind == "attr" and self.data["classes"][owner].get("enum") == "plain":
            return f"{self.data['classes'][owner]['name']}.{name}"  # enum member, compared by identity
        if kind == "attr":
            module = self.data["classes"][owner]["module"]
            return self.eval_expr(parse_expr(entry["src"]), {}, module, None, owner)
        return _BoundMethod(owner, name, ref)

    # ---- calling ----
    def call_method(self, cls_q: str, name: str, *args, **kwargs):
        """Call classmethod/staticmethod ``name`` of class ``cls_q`` (resolved through its bases)."""
        found = self.find_member(cls_q, name)
        if found is None or found[1] != "method":
            raise NotEvaluable(f"{cls_q}.{name} not stored")
        return self._invoke(_BoundMethod(found[0], name, ClassRef(cls_q)), list(args), kwargs)

    def call_function(self, qualname: str, *args, **kwargs):
        return self._invoke(_FunctionRef(qualname), list(args), kwargs)

    def _invoke(self, target, args: list, kwargs: dict):
        if isinstance(target, _BoundMethod):
            entry = self.data["classes"][target.owner]["methods"][target.name]
            module = self.data["classes"][target.owner]["module"]
            fn = parse_function(entry["src"])
            if entry.get("kind") == "classmethod":
                args = [target.cls] + args
            elif entry.get("kind") == "method":
                args = [self.instance if self.instance is not None else Unknown("self")] + args
            owner = target.owner
        else:
            entry = self.data["functions"][target.qualname]
            module = entry["module"]
            fn = parse_function(entry["src"])
            owner = None
        if self.depth > MAX_DEPTH:
            raise NotEvaluable("recursion too deep")
        local = self._bind(fn, args, kwargs, module, owner)
        self.depth += 1
        try:
            self.exec_block(fn.body, local, module, target.cls if isinstance(target, _BoundMethod) else None,
                            owner)
        except _Return as r:
            return r.value
        finally:
            self.depth -= 1
        return None

    def _bind(self, fn: ast.FunctionDef, args: list, kwargs: dict, module: str, owner):
        a = fn.args
        positional = [p.arg for p in a.posonlyargs + a.args]
        defaults = a.defaults
        local: dict[str, Any] = {}
        first_default = len(positional) - len(defaults)
        for i, p in enumerate(positional):
            if i >= first_default:
                local[p] = self.eval_expr(defaults[i - first_default], {}, module, None, owner)
        for kw, d in zip(a.kwonlyargs, a.kw_defaults):
            if d is not None:
                local[kw.arg] = self.eval_expr(d, {}, module, None, owner)
        for p, v in zip(positional, args):
            local[p] = v
        extra = {}
        for k, v in kwargs.items():
            if k in positional or k in [x.arg for x in a.kwonlyargs]:
                local[k] = v
            else:
                extra[k] = v
        if a.kwarg is not None:
            local[a.kwarg.arg] = extra
        return local

    def _imported(self, qualname: str, depth: int = 0):
        """What ``from <module> import <name>`` binds, for a stored function or class (following the module's own
        re-export once); None when it is neither."""
        special = self._special(qualname)
        if special is not None:
            return special
        if qualname in self.data["functions"]:
            return _FunctionRef(qualname)
        if qualname in self.data["classes"]:
            return ClassRef(qualname)
        mod, _, name = qualname.rpartition(".")
        target = self.data["modules"].get(mod, {}).get("imports", {}).get(name)
        if target and target != qualname and depth < 3:
            return self._imported(target, depth + 1)
        return None

    def need_import(self, package: str) -> None:
        """``import <package>`` of a package ``pip install vllm`` may not have (0.9 / 0.10 only): a run-time
        condition ``import <package>``; assumed False it raises ``ImportError`` as Python would."""
        text = f"import {package}"
        if text in self.assumptions:
            self.used[text] = self.assumptions[text]
            if not self.assumptions[text]:
                raise Raised("ImportError", f"No module named '{package}'")
            return
        raise Undecided(text)

    def _call_closure(self, c: "_Closure", args: list, kwargs: dict):
        local = {**c.local, **self._bind(c.fn, args, kwargs, c.module, c.owner)}
        self.depth += 1
        try:
            self.exec_block(c.fn.body, local, c.module, c.cls, c.owner)
        except _Return as r:
            return r.value
        finally:
            self.depth -= 1
        return None

    def instantiate(self, ref: ClassRef, args: list, kwargs: dict):
        """A stored class without ``__init__`` called with keyword fields (a dataclass such as ``_IsSupported``,
        vllm/attention/selector.py:84 in 0.10.2): an :class:`_Instance`."""
        if self.find_member(ref.qualname, "__init__") is not None or args:
            raise NotEvaluable("instantiating a class")
        return _Instance(ref, dict(kwargs))

    # ---- statements ----
    def exec_block(self, body, local, module, cls, owner):
        for stmt in body:
            self.exec_stmt(stmt, local, module, cls, owner)

    def exec_stmt(self, s, local, module, cls, owner):
        ev = lambda e: self.eval_expr(e, local, module, cls, owner)  # noqa: E731
        if isinstance(s, ast.Return):
            raise _Return(ev(s.value) if s.value is not None else None)
        if isinstance(s, ast.If):
            branch = s.body if self.truth(ev(s.test)) else s.orelse
            self.exec_block(branch, local, module, cls, owner)
        elif isinstance(s, ast.Assign):
            value = ev(s.value)
            for t in s.targets:
                self._assign(t, value, local)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self._assign(s.target, ev(s.value), local)
        elif isinstance(s, ast.AugAssign):
            cur = ev(s.target)
            self._assign(s.target, self._binop(s.op, cur, ev(s.value)), local)
        elif isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant):  # docstring
                return
            ev(s.value)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            if self.legacy:
                roots = [a.name.split(".")[0] for a in s.names] if isinstance(s, ast.Import) else \
                    [(s.module or "").split(".")[0]] if not s.level else ["vllm"]
                for root in roots:
                    if root not in IMPORTS_ALWAYS_THERE:
                        self.need_import(root)
            for alias in s.names:  # lazily imported names resolve through the module's import map
                local.pop(alias.asname or alias.name.split(".")[0], None)
                if self.legacy and isinstance(s, ast.ImportFrom) and not s.level and \
                        (s.module or "").startswith("vllm"):
                    # a name imported inside the function means what this import says, not what another
                    # import of the same name elsewhere in the module says (vllm/platforms/cuda.py:429, :553 in 0.10.2)
                    bound = self._imported(f"{s.module}.{alias.name}")
                    if bound is not None:
                        local[alias.asname or alias.name] = bound
        elif isinstance(s, ast.Assert) and self.check_asserts:
            if not self.truth(ev(s.test)):
                msg = ev(s.msg) if s.msg is not None else ast.unparse(s.test)
                raise Raised("AssertionError", msg if isinstance(msg, str) else _text(msg))
        elif isinstance(s, ast.FunctionDef) and self.legacy:
            # a helper defined inside the function (``_get_version`` in vllm/platforms/cuda.py:250 of 0.10.2)
            local[s.name] = _Closure(s, local, module, cls, owner)
        elif isinstance(s, (ast.Pass, ast.Assert, ast.Global, ast.Nonlocal)):
            return
        elif isinstance(s, ast.Try):
            try:
                self.exec_block(s.body, local, module, cls, owner)
            except Raised as e:
                for h in s.handlers:
                    names = []
                    if isinstance(h.type, ast.Name):
                        names = [h.type.id]
                    elif isinstance(h.type, ast.Tuple):
                        names = [x.id for x in h.type.elts if isinstance(x, ast.Name)]
                    if h.type is None or e.kind in names or "Exception" in names:
                        self.exec_block(h.body, local, module, cls, owner)
                        break
                else:
                    raise
            else:
                self.exec_block(s.orelse, local, module, cls, owner)
            self.exec_block(s.finalbody, local, module, cls, owner)
        elif isinstance(s, ast.Raise):
            exc = s.exc
            kind, msg = "Exception", ""
            if isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name):
                kind = exc.func.id
                if exc.args:
                    v = ev(exc.args[0])
                    msg = v if isinstance(v, str) else _text(v)
            raise Raised(kind, msg)
        elif isinstance(s, ast.For):
            it = ev(s.iter)
            if isinstance(it, Unknown):
                raise NotEvaluable("loop over unknown")
            for item in list(it):
                self._assign(s.target, item, local)
                self.exec_block(s.body, local, module, cls, owner)
            else:
                self.exec_block(s.orelse, local, module, cls, owner)
        elif isinstance(s, ast.With):
            self.exec_block(s.body, local, module, cls, owner)
        else:
            raise NotEvaluable(type(s).__name__)

    def _assign(self, target, value, local):
        if isinstance(target, ast.Name):
            local[target.id] = value
        elif isinstance(target, ast.Subscript) and self.legacy and isinstance(target.value, ast.Name) \
                and isinstance(local.get(target.value.id), dict):
            # ``reasons["head_size"] = head_size`` (vllm/platforms/cuda.py:375 in 0.10.2)
            local[target.value.id][self.eval_expr(target.slice, local, None, None, None)] = value
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (tuple, list)):
            for t, v in zip(target.elts, value):
                self._assign(t, v, local)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, (ast.Name, ast.Attribute)) \
                and isinstance(base := self._assign_base(target.value, local), _Namespace):
            base._set(target.attr, value)
        else:
            raise NotEvaluable("assignment target")

    def _assign_base(self, node, local):
        """The object an attribute assignment writes to: a name bound in ``local`` or an attribute chain on one."""
        if isinstance(node, ast.Name):
            return local.get(node.id)
        base = self._assign_base(node.value, local) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
        return getattr(base, node.attr, None) if isinstance(base, _Namespace) else None

    # ---- expressions ----
    def resolve_name(self, name: str, local, module: str, cls):
        if name in local:
            return local[name]
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        mod = self.data["modules"].get(module, {})
        q = f"{module}.{name}"
        if (special := self._special(q)) is not None:
            return special
        if q in self.data["functions"]:
            return _FunctionRef(q)
        if q in self.data["classes"]:
            return self._special(q) or ClassRef(q)
        if name in mod.get("constants", {}):
            return self.eval_expr(parse_expr(mod["constants"][name]["src"]), {}, module, None, None)
        target = mod.get("imports", {}).get(name)
        if target is not None:
            special = self._special(target)
            if special is not None:
                return special
            if target in self.data["functions"]:
                return _FunctionRef(target)
            if target in self.data["classes"]:
                return ClassRef(target)
            return self._maybe(Unknown(name))
        if name in _BUILTINS:
            return _BUILTINS[name]
        if name in _EXC_NAMES:
            return Unknown(name)
        return Unknown(name)

    def _special(self, qualname: str):
        if qualname == "torch":
            return TORCH
        if qualname.endswith("current_platform"):
            return self.platform
        if qualname.endswith(".AttentionBackendEnum"):
            return BACKEND_ENUM
        if qualname.endswith("._Backend") and self.legacy:  # 0.9 / 0.10: vllm/platforms/interface.py:41
            return BACKEND_ENUM
        if qualname == "vllm.platforms.cuda.CudaPlatform" and self.legacy and self.platform.kind == "cuda":
            # ``CudaPlatform = NvmlCudaPlatform if ... else NonNvmlCudaPlatform`` (vllm/platforms/cuda.py, module
            # level): the device's platform (``CudaPlatform.has_device_capability(100)`` in FlashMLAImpl.__init__)
            return self.platform
        if qualname.endswith(".DeviceCapability"):
            return Capability
        if qualname.endswith(".MultipleOf"):
            return MultipleOf
        return None

    def eval_expr(self, e, local, module, cls, owner):  # noqa: C901 - one case per node type
        ev = lambda x: self.eval_expr(x, local, module, cls, owner)  # noqa: E731
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            return self.resolve_name(e.id, local, module, cls)
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for elt in e.elts:
                if isinstance(elt, ast.Starred):
                    v = ev(elt.value)
                    if isinstance(v, Unknown):
                        raise NotEvaluable("starred unknown")
                    out.extend(v)
                else:
                    out.append(ev(elt))
            if isinstance(e, ast.Tuple):
                return tuple(out)
            if isinstance(e, ast.Set):
                return set(out)
            return out
        if isinstance(e, ast.Dict):
            return {ev(k): ev(v) for k, v in zip(e.keys, e.values) if k is not None}
        if isinstance(e, ast.Attribute):
            return self._getattr(ev(e.value), e.attr, cls, owner)
        if isinstance(e, ast.Call):
            return self._call(e, local, module, cls, owner)
        if isinstance(e, ast.BoolOp):
            is_and = isinstance(e.op, ast.And)
            v = None
            for operand in e.values:
                v = ev(operand)
                t = self.truth(v)
                if is_and and not t:
                    return v
                if not is_and and t:
                    return v
            return v
        if isinstance(e, ast.UnaryOp):
            v = ev(e.operand)
            if isinstance(e.op, ast.Not):
                return not self.truth(v)
            if isinstance(v, Unknown):
                return Unknown(f"-{v.text}")
            if isinstance(e.op, ast.USub):
                return -v
            return v
        if isinstance(e, ast.Compare):
            left = ev(e.left)
            for op, right_node in zip(e.ops, e.comparators):
                right = ev(right_node)
                r = self._compare(op, left, right)
                if isinstance(r, Unknown) or not r:
                    return r
                left = right
            return True
        if isinstance(e, ast.BinOp):
            return self._binop(e.op, ev(e.left), ev(e.right))
        if isinstance(e, ast.IfExp):
            return ev(e.body) if self.truth(ev(e.test)) else ev(e.orelse)
        if isinstance(e, ast.NamedExpr):
            v = ev(e.value)
            local[e.target.id] = v
            return v
        if isinstance(e, ast.JoinedStr):
            parts = []
            for p in e.values:
                if isinstance(p, ast.Constant):
                    parts.append(str(p.value))
                else:
                    v = ev(p.value)
                    parts.append(_text(v) if not isinstance(v, (str, int, float)) else format(v))
            return "".join(parts)
        if isinstance(e, ast.Subscript):
            base, idx = ev(e.value), ev(e.slice)
            if isinstance(base, Unknown) or isinstance(idx, Unknown):
                return Unknown(f"{_text(base)}[{_text(idx)}]")
            return base[idx]
        if isinstance(e, ast.Lambda):
            raise NotEvaluable("lambda")
        if isinstance(e, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            return self._comprehension(e, local, module, cls, owner)
        raise NotEvaluable(type(e).__name__)

    def _comprehension(self, e, local, module, cls, owner):
        if len(e.generators) != 1:
            raise NotEvaluable("nested comprehension")
        g = e.generators[0]
        it = self.eval_expr(g.iter, local, module, cls, owner)
        if isinstance(it, Unknown):
            raise NotEvaluable("comprehension over unknown")
        out = []
        inner = dict(local)
        for item in it:
            self._assign(g.target, item, inner)
            if all(self.truth(self.eval_expr(c, inner, module, cls, owner)) for c in g.ifs):
                if isinstance(e, ast.DictComp):
                    out.append((self.eval_expr(e.key, inner, module, cls, owner),
                                self.eval_expr(e.value, inner, module, cls, owner)))
                else:
                    out.append(self.eval_expr(e.elt, inner, module, cls, owner))
        if isinstance(e, ast.DictComp):
            return dict(out)
        return set(out) if isinstance(e, ast.SetComp) else out

    def _getattr(self, base, attr: str, cls, owner):
        if isinstance(base, Unknown):
            return self._maybe(Unknown(f"{base.text}.{attr}"))
        if base is TORCH:
            return TORCH.attr(attr)
        if base is BACKEND_ENUM:
            return BackendRef(attr)
        if isinstance(base, ClassRef):
            return self.class_attr(base, attr)
        if isinstance(base, _Super):
            found = self.find_member(base.cls.qualname, attr, after=base.after)
            if found is None:
                raise NotEvaluable(f"super().{attr}")
            if found[1] == "attr":
                return self.class_attr(base.cls, attr, after=base.after)
            return _BoundMethod(found[0], attr, base.cls)
        if isinstance(base, BackendRef):
            if attr == "name":
                return base.name
            if attr == "get_class":
                # AttentionBackendEnum.X.get_class() -> the stored class, so its rules can be called
                # (0.33 vllm/platforms/cpu.py:190 asks CPU_ATTN.get_class().supports_kv_cache_dtype)
                cls_q = next((b.get("class") for b in self.data.get("backends", []) if b["name"] == base.name),
                             None)
                if cls_q and cls_q in self.data.get("classes", {}):
                    return lambda: ClassRef(cls_q)
            if attr in ("get_path", "get_class"):
                return getattr(base, attr)
            return Unknown(f"AttentionBackendEnum.{base.name}.{attr}")
        if isinstance(base, Platform):
            if hasattr(base, attr) and not attr.startswith("_") and attr not in ("kind", "capability", "cls_q"):
                return getattr(base, attr)
            if self.legacy and base.cls_q and attr not in PLATFORM_QUERIES:
                found = self.find_member(base.cls_q, attr)
                if found is not None and found[1] == "method":
                    return _BoundMethod(found[0], attr, ClassRef(base.cls_q))
            return Unknown(f"current_platform.{attr}")
        if isinstance(base, _Instance):
            if attr in base.values:
                return base.values[attr]
            return Unknown(f"{base.cls.qualname.rsplit('.', 1)[-1]}.{attr}")
        if isinstance(base, Capability):
            if attr in ("major", "minor", "to_int", "as_version_str"):
                return getattr(base, attr)
        if isinstance(base, _Namespace):
            try:
                return getattr(base, attr)
            except AttributeError:
                return Unknown(f"config.{attr}")
        if isinstance(base, MultipleOf) and attr == "base":
            return base.base
        if type(base) in _SAFE_METHODS and attr in _SAFE_METHODS[type(base)]:
            return getattr(base, attr)
        if self.legacy and isinstance(base, str) and attr in ("removesuffix", "removeprefix"):
            # ``cls.__name__.removesuffix("Backend")`` (vllm/v1/attention/backends/flash_attn.py:56 in 0.10.2)
            return getattr(base, attr)
        if base is None:
            raise NotEvaluable(f"None.{attr}")
        return Unknown(f"{_text(base)}.{attr}")

    def _call(self, e: ast.Call, local, module, cls, owner):
        func = e.func
        # logging and warnings never change a decision
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in _IGNORED_CALL_ROOTS:
            return None
        if isinstance(func, ast.Name) and func.id == "super":
            if cls is None or owner is None:
                raise NotEvaluable("super() outside a method")
            return _Super(cls, owner)
        if isinstance(func, ast.Name) and func.id == "isinstance" and "isinstance" not in local:
            value = self.eval_expr(e.args[0], local, module, cls, owner)
            kinds = self.eval_expr(e.args[1], local, module, cls, owner)
            kinds = kinds if isinstance(kinds, tuple) else (kinds,)
            if isinstance(value, Unknown) or not all(isinstance(k, type) for k in kinds):
                raise NotEvaluable("isinstance")
            if isinstance(value, Capability) and tuple in kinds:  # DeviceCapability is a NamedTuple
                return True
            return isinstance(value, kinds)
        if isinstance(func, ast.Name) and func.id == "hasattr" and "hasattr" not in local:
            base = self.eval_expr(e.args[0], local, module, cls, owner)
            name = self.eval_expr(e.args[1], local, module, cls, owner)
            if isinstance(base, _Namespace) and isinstance(name, str):
                return name in base._values
            return self._maybe(Unknown(f"hasattr({_text(base)}, {_text(name)})"))
        if isinstance(func, ast.Name) and func.id == "getattr" and "getattr" not in local:
            vals = [self.eval_expr(a, local, module, cls, owner) for a in e.args]
            base, name = vals[0], vals[1]
            if self.legacy and isinstance(base, ClassRef) and isinstance(name, str):
                found = self.find_member(base.qualname, name)
                if found is None:
                    return vals[2] if len(vals) > 2 else Unknown(f"{base.qualname}.{name}")
                return self.class_attr(base, name)
            if isinstance(base, _Namespace) and isinstance(name, str):
                if name in base._values:
                    return base._values[name]
                if len(vals) > 2:
                    return vals[2]
            if isinstance(base, (Unknown, _Namespace)) or isinstance(name, Unknown):
                return self._maybe(Unknown(f"getattr({_text(base)}, {_text(name)})"))
            raise NotEvaluable("getattr")
        target = self.eval_expr(func, local, module, cls, owner)
        args = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                v = self.eval_expr(a.value, local, module, cls, owner)
                if isinstance(v, Unknown):
                    raise NotEvaluable("starred unknown")
                args.extend(v)
            else:
                args.append(self.eval_expr(a, local, module, cls, owner))
        kwargs = {}
        for k in e.keywords:
            v = self.eval_expr(k.value, local, module, cls, owner)
            if k.arg is None:
                if isinstance(v, _Namespace):
                    v = v._asdict()
                if not isinstance(v, dict):
                    raise NotEvaluable("** of unknown")
                kwargs.update(v)
            else:
                kwargs[k.arg] = v
        if isinstance(target, Unknown) and self.legacy and target.text == "resolve_obj_by_qualname" and args \
                and isinstance(args[0], str):
            return self.resolve_class_path(args[0])
        if isinstance(target, _Closure):
            return self._call_closure(target, args, kwargs)
        if isinstance(target, ClassRef) and self.legacy:
            return self.instantiate(target, args, kwargs)
        if isinstance(target, Unknown):
            shown = ", ".join([_text(a) for a in args] + [f"{k}={_text(v)}" for k, v in kwargs.items()])
            if target.text in ("get_current_vllm_config", "get_current_vllm_config_or_none") \
                    and self.vllm_config is not None:
                return self.vllm_config
            return self._maybe(Unknown(f"{target.text}({shown})"))
        if isinstance(target, (_BoundMethod, _FunctionRef)):
            try:
                return self._invoke(target, args, kwargs)
            except NotEvaluable:
                name = target.name if isinstance(target, _BoundMethod) else target.qualname.rsplit(".", 1)[-1]
                shown = ", ".join(_text(a) for a in args)
                return Unknown(f"{name}({shown})")
        if isinstance(target, ClassRef):
            raise NotEvaluable("instantiating a class")
        if self.legacy and target in (any, all) and len(args) == 1 and isinstance(args[0], (list, tuple)) and \
                any(isinstance(a, Unknown) for a in args[0]):
            # any([None, sliding_window, Unknown]) is only known when a known element decides it
            known = [bool(a) for a in args[0] if not isinstance(a, Unknown)]
            if target is any and any(known):
                return True
            if target is all and not all(known):
                return False
            return Unknown(f"{target.__name__}({_text(args[0])})")
        if callable(target):
            if any(isinstance(a, Unknown) for a in list(args) + list(kwargs.values())):
                name = getattr(target, "__name__", "call")
                return Unknown(f"{name}({', '.join(_text(a) for a in args)})")
            try:
                return target(*args, **kwargs)
            except (TypeError, AttributeError, ValueError) as exc:
                raise NotEvaluable(f"call failed: {exc}") from exc
        raise NotEvaluable(f"call of {target!r}")

    def resolve_class_path(self, path: str):
        """``resolve_obj_by_qualname("vllm.v1.attention.backends.flashinfer.FlashInferBackend")`` (0.9 / 0.10): the
        stored class, after the imports of its module that ``pip install vllm`` does not provide (each a run-time
        condition, :meth:`need_import`); ``ImportError`` for a class the wheel does not have."""
        backend = next((b for b in self.data.get("backends", []) if b.get("path") == path), None)
        if backend is None or path not in self.data.get("classes", {}):
            raise Raised("ImportError", f"cannot import {path}")
        for imp in backend.get("optional_imports", []):
            self.need_import(imp["package"])
        return ClassRef(path)

    def _compare(self, op, left, right):
        if isinstance(left, Unknown) or isinstance(right, Unknown):
            sym = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                   ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}[type(op)]
            return Unknown(f"{_text(left)} {sym} {_text(right)}")
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
        if isinstance(op, ast.Lt):
            return left < right
        if isinstance(op, ast.LtE):
            return left <= right
        if isinstance(op, ast.Gt):
            return left > right
        if isinstance(op, ast.GtE):
            return left >= right
        if isinstance(op, ast.In):
            if any(isinstance(x, Unknown) for x in right):
                return Unknown(f"{_text(left)} in {_text(right)}")
            return left in right
        if isinstance(op, ast.NotIn):
            if any(isinstance(x, Unknown) for x in right):
                return Unknown(f"{_text(left)} not in {_text(right)}")
            return left not in right
        if isinstance(op, ast.Is):
            return left is right or (left is None and right is None)
        if isinstance(op, ast.IsNot):
            return not (left is right or (left is None and right is None))
        raise NotEvaluable("comparison")

    def _binop(self, op, a, b):
        if isinstance(a, Unknown) or isinstance(b, Unknown):
            return Unknown(f"({_text(a)} {type(op).__name__} {_text(b)})")
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b, ast.Div: lambda: a / b,
               ast.BitOr: lambda: a | b, ast.BitAnd: lambda: a & b}
        if type(op) not in ops:
            raise NotEvaluable("operator")
        return ops[type(op)]()


def construct(ev: Evaluator, cls_q: str, **kwargs) -> _Namespace:
    """Run ``cls_q.__init__(self, **kwargs)`` with asserts checked, ``self`` an attribute namespace; returns ``self``.
    A ``raise`` or a failed ``assert`` comes out as :class:`Raised` (what vLLM raises when it builds the object)."""
    obj = _Namespace({})
    ev.instance, ev.check_asserts = obj, True
    found = ev.find_member(cls_q, "__init__")
    if found is None or found[1] != "method":
        raise NotEvaluable(f"{cls_q}.__init__ not stored")
    ev._invoke(_BoundMethod(found[0], "__init__", ClassRef(cls_q)), [], kwargs)
    return obj


def evaluate(run: Callable[[Evaluator], Any], data: dict, platform: Platform,
             assumptions: dict | None = None, vllm_config: Any = None) -> Any:
    """Run ``run(evaluator)``; fork on every undecided run-time condition.

    Returns the plain result, or a :class:`Fork` tree whose leaves are results. A function that
    executes ``raise`` yields a :class:`Raised` leaf (returned, not thrown).
    """
    count = [0]

    def go(assume: dict):
        count[0] += 1
        if count[0] > MAX_FORKS:
            raise NotEvaluable("too many run-time conditions")
        ev = Evaluator(data=data, platform=platform, assumptions=assume, vllm_config=vllm_config)
        try:
            return run(ev)
        except Raised as r:
            return r
        except Undecided as u:
            return Fork(u.text, go({**assume, u.text: True}), go({**assume, u.text: False}))

    return go(dict(assumptions or {}))
