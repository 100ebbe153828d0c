"""Does a vLLM release know the model's class? The ``ModelRegistry`` check vLLM makes when it builds the model
config, before any attention backend is chosen.

Plain Python (no Django, vLLM never imported). The facts come from each release's
``vllm/model_executor/models/registry.py`` as :func:`compat.extract.model_architectures` stored them
(``model_architectures`` and ``model_registry`` in ``compat/data/vllm-<release>.json``). What vLLM does with
the config's ``architectures`` (``_ModelRegistry.inspect_model_cls``, ``registry.py:894`` in 0.11.2, ``:1323`` in
0.32.0), in order:

1. ``model_impl`` is ``"auto"`` unless ``--model-impl`` says otherwise (``vllm/config/model.py:269`` in 0.11.2,
   ``:394`` in 0.32.0; the calculator's ``vllm serve`` command never sets it).
2. When no name of ``architectures`` is registered, it first tries its Transformers modelling backend on
   ``architectures[0]`` (``_try_resolve_transformers``): the installed ``transformers`` must define the class
   (or the config's ``auto_map`` name an ``AutoModel`` class, remote code) and the class must pass
   ``is_backend_compatible()`` (``registry.py:857`` in 0.11.2; ``... or _can_set_attn_implementation()`` from
   0.30, ``registry.py:1283`` in 0.32.0). Where the wheel caps ``transformers`` (``<5`` up to 0.19.0), pip
   installs the newest release under the cap (:data:`PIP_RESOLVES`), whose classes are known
   (``compat/data/transformers-<release>.json``): without the class vLLM stops. With the class, the same file says
   whether it passes the test (:func:`attention_support`: ``_supports_attention_backend`` along its bases, and the
   ``_can_set_attn_implementation()`` heuristic on its modeling file, read from the transformers wheel); when it
   fails, ``_try_resolve_transformers`` returns None under ``model_impl`` auto (``registry.py:567-571`` in 0.10.1,
   ``:1283-1290`` in 0.32.0; only ``--model-impl transformers`` raises "... is not compatible with vLLM.") and vLLM
   stops with step 4's message. Otherwise whether the class is there and compatible is a fact of the installed
   package, so the answer *depends*, with that condition; where every covered transformers release that the
   requirement admits and that defines the class fails the test, the condition says so (still *depends*: pip
   installs whatever is newest on the day, and the releases between the covered ones are not read).
3. Each name is normalised (``_normalize_arch``): an unregistered ``FooForConditionalGeneration`` is served
   as the first registered ``Foo<suffix>`` over ``_SUFFIX_TO_DEFAULTS`` (``vllm/config/model.py``).
4. Otherwise ``_raise_for_unsupported``: "Model architecture X was supported in vLLM until vY" for a retired
   name, "... is not supported in-tree anymore. Please install the plugin at URL" for a plugin one, else
   "Model architectures [...] are not supported for now".

Public API::

    check_architecture(data: dict, hf_config: dict) -> ArchitectureCheck
    first_release_with(architecture: str) -> str | None
    attention_support(tf: dict, arch: str) -> dict | None
"""
from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from . import extract, releases

Status = Literal["registered", "normalized", "transformers_backend", "unsupported", "not_checked"]


class ArchitectureCheck(BaseModel):
    """The registry's answer for one model on one release.

    ``ok``: True (vLLM has a class for it), None (only through the Transformers backend: ``condition`` says
    what must hold) or False (vLLM stops at start-up: ``message`` in its words, cited in ``source``).
    ``first_release``: the covered release to offer instead, when this one does not register ``architectures[0]``:
    the first later release that registers it, else (a name later releases dropped) the last earlier one
    (:func:`nearest_release_with`); None when none does or when this release does.
    """

    architectures: list[str]
    status: Status
    ok: bool | None
    resolved: str | None = None  # the registry name vLLM builds (itself, or the normalised name)
    registry_dict: str | None = None  # which dict of _VLLM_MODELS lists it
    source: str | None = None  # registry.py:LINE of the name, or of the raise
    message: str | None = None
    condition: str | None = None
    first_release: str | None = None
    sources: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def _architectures(hf_config: dict) -> list[str]:
    """``architectures`` of the config as vLLM reads it (``hf_config.architectures``; a config nesting the text
    model keeps it at the top, the text config's is the fallback ``features_from_hf_config`` uses too)."""
    archs = hf_config.get("architectures")
    if not archs and isinstance(hf_config.get("text_config"), dict):
        archs = hf_config["text_config"].get("architectures")
    if isinstance(archs, str):
        archs = [archs]
    return [str(a) for a in archs or [] if a]


#: The transformers release pip installs with a vLLM wheel that caps transformers below a bound: the newest release
#: under that bound on PyPI (``pip index versions transformers``, read 2026-12-02: 4.57.6 is the last 4.x, then
#: 5.17.0 < 5.18.0, 5.19.0 < 5.20.0, 5.20.2 < 5.21.0, and 5.22.2 < 5.23.0 for vLLM 0.34.0). Each has its data
#: file, ``compat/data/transformers-<release>.json`` (``manage.py sync_compat --package transformers --release X``).
#: Requirements without a cap (0.19.1-0.30: ``>=4.56.0`` less some 5.x, ``>=5.5.3``, ``>=5.10.4``) leave the
#: Transformers fallback a condition: pip then installs whatever is newest on the day.
PIP_RESOLVES = {"5": "4.57.6", "5.18.0": "5.17.0", "5.20.0": "5.19.0", "5.21.0": "5.20.2", "5.23.0": "5.22.2"}
#: the placeholder of transformers' "does not recognize this architecture" message (configuration_auto.py:1362-1363
#: in 4.57.6: f"... model type `{config_dict['model_type']}` but ...")
UNKNOWN_TYPE_FIELD = "{config_dict['model_type']}"


def pip_transformers(requirement: str | None) -> dict | None:
    """The transformers data (:func:`compat.extract.extract_transformers`, plus ``"bound"``) of the release pip
    installs for ``requirement`` (``"transformers<5,>=4.56.0"``), when the requirement caps it below a bound of
    :data:`PIP_RESOLVES`; None otherwise."""
    m = re.search(r"<(?!=)\s*([0-9][0-9.]*)", requirement or "")
    if not m or m.group(1) not in PIP_RESOLVES:
        return None
    rel = PIP_RESOLVES[m.group(1)]
    if not releases.is_covered(rel, "transformers"):
        return None
    return {**extract.load(rel, "transformers"), "bound": m.group(1)}


_SUPPORT_INDEX: dict[tuple[str, str], dict] = {}


def attention_support(tf: dict, arch: str) -> dict | None:
    """What transformers ``tf`` (a ``transformers-<release>.json``) answers for the two tests vLLM's fallback puts to
    its class ``arch``: ``{"backend": [bool | None, source], "can_set": [bool | None, source]}``, where ``backend`` is
    ``is_backend_compatible()`` (``_supports_attention_backend`` along the class's bases, with the line that sets
    it) and ``can_set`` is ``_can_set_attn_implementation()`` (vLLM 0.30+ accepts either). None when ``tf`` was
    extracted before these were recorded or has no class ``arch``; a value None when the extractor could not decide
    it (bases it could not follow, an override that computes its answer)."""
    if "supports_attention_backend" not in tf or arch not in tf.get("classes", {}):
        return None
    key = (tf["release"], tf["provenance"]["sha256"])
    if key not in _SUPPORT_INDEX:
        _SUPPORT_INDEX[key] = {cls: [value, source] for value in (True, False)
                               for source, names in tf["supports_attention_backend"][str(value).lower()].items()
                               for cls in names}
    backend = _SUPPORT_INDEX[key].get(arch, [None, None])
    can = tf["can_set_attn_implementation"]
    file = tf["classes"][arch].rsplit(":", 1)[0]
    can_set = can["overrides"].get(arch) or (can["files"].get(file) if backend[0] is not None else None)
    return {"backend": backend, "can_set": can_set or [None, None]}


def _accepts(tf_rules: dict, support: dict | None) -> bool | None:
    """Whether the release's test (``tf_rules["compatible"]["test"]``: ``is_backend_compatible()``, from 0.30 ``...
    or _can_set_attn_implementation()``) passes for a class of :func:`attention_support`; None when not known."""
    if support is None:
        return None
    backend, can_set = support["backend"][0], support["can_set"][0]
    if backend is True:
        return True
    if "_can_set_attn_implementation" not in tf_rules["compatible"]["test"]:
        return backend
    if can_set is True:
        return True
    return False if backend is False and can_set is False else None


def _why_not(tf_rules: dict, support: dict, trel: str) -> str:
    """The facts of transformers ``trel`` that make vLLM's test false, each with its ``file:line``."""
    out = f"`_supports_attention_backend` is False for it in transformers {trel} ({support['backend'][1]})"
    if "_can_set_attn_implementation" in tf_rules["compatible"]["test"]:
        out += (f" and `_can_set_attn_implementation()` is False (its module's attention class at "
                f"{support['can_set'][1]} does not call the attention interface)")
    return out


def _admits(requirement: str | None, release: str) -> bool:
    """Whether the ``Requires-Dist`` specifier (``"transformers!=5.0.*,>=4.56.0"``) admits ``release``; a clause
    this does not read (``~=``, ``===``, a pre-release) admits it."""
    v = releases.version_key(release)
    for clause in re.sub(r"^\s*transformers\s*", "", requirement or "").split(","):
        m = re.fullmatch(r"\s*(==|!=|>=|<=|>|<)\s*([0-9][0-9.]*)(\.\*)?\s*", clause)
        if not m:
            continue
        op, ver, star = m.group(1), releases.version_key(m.group(2)), m.group(3)
        if star:
            hit = v[:len(ver)] == ver
            if (op == "==" and not hit) or (op == "!=" and hit):
                return False
            continue
        n = max(len(v), len(ver))
        a, b = v + (0,) * (n - len(v)), ver + (0,) * (n - len(ver))
        if not {"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b}[op]:
            return False
    return True


def _with_arch(message: str, arch: str) -> str:
    """vLLM's fallback message with the architecture put in (``{architecture!r}``, ``'{arch}'`` or ``{arch}``)."""
    return message.replace("{architecture!r}", repr(arch)).replace("{arch}", arch)


def _span(first: str, last: str) -> str:
    """``"registry.py:567-571"`` from ``"registry.py:567"`` and ``"registry.py:571"`` (the same file)."""
    f, a = first.rsplit(":", 1)
    g, b = last.rsplit(":", 1)
    return f"{first}-{b}" if f == g else f"{first}, {last}"


def _fallback_stop(tf: dict, arch: str, stop: str, stop_source: str) -> tuple[str, str]:
    """What vLLM stops with when its fallback finds ``arch`` but refuses it: ``_raise_for_unsupported``'s message from
    0.10.1 (the fallback returns None under ``model_impl`` auto), the fallback's own "is not compatible with vLLM"
    in 0.9 / 0.10.0 (``stops_with_own_errors``: ``resolve_transformers_arch`` raises it)."""
    if tf.get("stops_with_own_errors") and tf.get("not_compatible"):
        return _with_arch(tf["not_compatible"]["message"], arch), tf["not_compatible"]["source"]
    return stop, stop_source


def _accepted_by(tf: dict, support: dict | None, arch: str, pinned: dict | None) -> list[str]:
    """The source line that makes the pinned transformers' ``arch`` pass vLLM's test, when it does (the verdict still
    depends: the backend has to build the model)."""
    if pinned is None or not _accepts(tf, support):
        return []
    if support["backend"][0]:
        return [f"{support['backend'][1]} _supports_attention_backend = True for {arch} (transformers {pinned['release']})"]
    return [f"{support['can_set'][1]} _can_set_attn_implementation() is True for {arch} (transformers "
            f"{pinned['release']})"]


def _covered_refusals(tf: dict, requirement: str | None, arch: str) -> list[tuple[str, dict]]:
    """``[(transformers release, attention_support)]`` for every covered transformers release that ``requirement``
    admits and that defines ``arch``, when each of them fails the release's test (:func:`_accepts` False); ``[]``
    when none defines it or any passes or cannot be decided."""
    out = []
    for rel in releases.covered_releases("transformers"):
        if not _admits(requirement, rel):
            continue
        data = extract.load(rel, "transformers")
        if arch not in data.get("classes", {}):
            continue
        support = attention_support(data, arch)
        if _accepts(tf, support) is not False:
            return []
        out.append((rel, support))
    return out


def first_release_with(architecture: str) -> str | None:
    """The oldest covered vLLM release whose registry lists ``architecture`` (by name, as stored)."""
    for rel in releases.covered_releases():
        if architecture in (extract.load(rel).get("model_architectures") or {}):
            return rel
    return None


def nearest_release_with(architecture: str, release: str) -> tuple[str | None, str]:
    """The covered release to offer for ``architecture`` asked of ``release`` (which lacks it), and how to say it:
    the first later release that registers it (``"vLLM registers it from 0.10.1"``), else the last earlier one, for
    a name a later release dropped (``"vLLM 0.10.2 is the last covered release that registers it"``: Mllama)."""
    key = releases.version_key(release)
    having = [r for r in releases.covered_releases()
              if architecture in (extract.load(r).get("model_architectures") or {})]
    later = [r for r in having if releases.version_key(r) > key]
    if later:
        return later[0], f"vLLM registers it from {later[0]}"
    if having:
        return having[-1], f"vLLM {having[-1]} is the last covered release that registers it"
    return None, "no covered vLLM release registers it"


def _normalized(arch: str, names: dict, normalize: dict | None) -> str | None:
    """``_ModelRegistry._normalize_arch``: the registered name an unregistered ``arch`` is served as, or None.

    The suffix is matched with the runner and convert type vLLM resolves from that same suffix (the model
    config has none given), so the first suffix of ``_SUFFIX_TO_DEFAULTS`` that ends the name; each suffix of
    the list then replaces it (``str.replace``, as vLLM does) until a registered name comes out."""
    if not normalize:
        return None
    match = next((s for s, _runner, _convert in normalize["suffixes"] if arch.endswith(s)), None)
    if match is None:
        return None
    for repl, _runner, _convert in normalize["suffixes"]:
        base = arch.replace(match, repl)
        if base in names:
            return base
    return None


def _stop_message(archs: list[str], rules: dict, names: dict, release: str) -> tuple[str, str]:
    """What ``_raise_for_unsupported`` raises for ``archs`` (vLLM's template with the names put in), and its
    ``file:line``. The list of supported names vLLM appends is shortened to a count."""
    msgs = rules["messages"]
    for arch in archs:
        for key, field, placeholder in (("previously_supported", "until", "{previous_version}"),
                                        ("out_of_tree", "plugin", "{plugin_url}")):
            entry = rules.get(key, {}).get(arch)
            if entry and msgs.get(key):
                text = msgs[key]["message"].replace("{arch}", arch).replace(placeholder, entry[field])
                return text, msgs[key]["source"]
    m = msgs["unsupported"]
    text = (m["message"].replace("{architectures}", repr(archs))
            .replace("{all_supported_archs}", f"<the {len(names)} names of vLLM {release}'s registry>"))
    return text, m["source"]


def check_architecture(data: dict, hf_config: dict) -> ArchitectureCheck:
    """Whether the release in ``data`` (a compat data file) builds a model class for ``hf_config``.

    Returns an :class:`ArchitectureCheck`; ``not_checked`` (``ok`` True, with a note saying why) when the data
    file has no registry (extracted before extractor v4) or the config names no architecture.
    """
    release = data.get("release", "?")
    names: dict = data.get("model_architectures") or {}
    rules: dict = data.get("model_registry") or {}
    archs = _architectures(hf_config)
    if not names or not rules:
        return ArchitectureCheck(architectures=archs, status="not_checked", ok=True, notes=[
            f"the compat data of vLLM {release} has no model registry: the architecture is not checked"])
    if not archs:
        return ArchitectureCheck(architectures=archs, status="not_checked", ok=True, notes=[
            "config.json names no architectures: vLLM's registry check is not made here"])
    for arch in archs:
        if arch in names:
            e = names[arch]
            return ArchitectureCheck(architectures=archs, status="registered", ok=True, resolved=arch,
                                     registry_dict=e["dict"], source=e["source"],
                                     sources=[f"{e['source']} {arch} in {e['dict']} (vLLM {release})"])
    first, where = nearest_release_with(archs[0], release)
    later = f"; {where}"
    tf = rules.get("transformers_fallback")
    req = (data.get("requirements") or {}).get("transformers") or {}
    stop, stop_source = _stop_message(archs, rules, names, release)
    normalize = rules.get("normalize")
    for arch in archs:
        base = _normalized(arch, names, normalize)
        if base is not None:
            e = names[base]
            note = (f"{arch} is not in vLLM {release}'s registry; _normalize_arch ({normalize['source']}, suffixes "
                    f"{normalize['suffixes_source']}) serves it as {base} ({e['source']})")
            if tf and tf["model_impl_default"]["value"] == "auto" and arch == archs[0]:
                note += (" unless the installed transformers defines it for the Transformers backend, which vLLM "
                         f"tries first ({tf['fallback'][0]})")
            return ArchitectureCheck(architectures=archs, status="normalized", ok=True, resolved=base,
                                     registry_dict=e["dict"], source=e["source"], sources=[note], notes=[note],
                                     first_release=first)
    if tf and tf["model_impl_default"]["value"] == "auto":
        arch = archs[0]
        remote = any(k.startswith("AutoModel") for k in (hf_config.get("auto_map") or {}))
        pinned = None if remote else pip_transformers(req.get("value"))
        fallback = (f"with --model-impl auto ({tf['model_impl_default']['source']}) vLLM {release} tries its Transformers "
                    f"modelling backend for {arch} ({tf['fallback'][0]}, {tf['resolve']})")
        if pinned is not None and arch not in pinned["classes"]:
            bound, trel = pinned["bound"], pinned["release"]
            why = (f"the transformers pip installs with vLLM {release} ({trel}, the newest under {req['value']}, "
                   f"{req['source']}) has no {arch} for the Transformers-backend fallback ({tf['fallback'][0]})")
            notes = [f"{fallback}: `getattr(transformers, {arch!r})` finds nothing in transformers {trel} (no "
                     f"modeling file exports it, read from the transformers {trel} wheel), and the config has no auto_map "
                     "AutoModel entry"]
            model_type = str(hf_config.get("model_type") or "")
            unknown = pinned.get("unknown_model_type")
            if model_type and model_type not in pinned["model_types"] and unknown:
                notes.append(f"transformers {trel} does not know model_type {model_type!r} either, so loading the config "
                             "may stop first (unless vLLM ships its own config class for it): "
                             f"\"{unknown['message'].replace(UNKNOWN_TYPE_FIELD, model_type)}\" "
                             f"({unknown['source']} in transformers {trel})")
            return ArchitectureCheck(
                architectures=archs, status="unsupported", ok=False, source=stop_source,
                message=f"{stop} ({stop_source}{later}); {why}", first_release=first, notes=notes,
                sources=[f"{stop_source} {stop}", f"{req['source']} {req['value']}",
                         f"{tf['resolve']} _try_resolve_transformers: getattr(transformers, {arch!r})"])
        fb_stop, fb_stop_source = _fallback_stop(tf, arch, stop, stop_source)
        returns_none = (f"with --model-impl auto `_try_resolve_transformers` then returns None "
                        f"({_span(tf['compatible']['source'], tf['not_compatible']['source'])})"
                        if not tf.get("stops_with_own_errors") else
                        f"`resolve_transformers_arch` then raises ({tf['not_compatible']['source']})")
        support = attention_support(pinned, arch) if pinned is not None else None
        if pinned is not None and _accepts(tf, support) is False:
            trel = pinned["release"]
            why = (f"the transformers pip installs with vLLM {release} ({trel}, the newest under {req['value']}, "
                   f"{req['source']}) defines {arch} ({pinned['classes'][arch]}) but fails the Transformers-backend "
                   f"test `{tf['compatible']['test']}` ({tf['compatible']['source']}): {_why_not(tf, support, trel)}; "
                   f"{returns_none}")
            notes = [f"{fallback}; transformers {trel}'s is_backend_compatible() returns "
                     f"cls._supports_attention_backend ({pinned['attention_interface']['is_backend_compatible']['source']}"
                     f" in transformers {trel}), False for {arch}, so vLLM does not take it"]
            if not tf.get("stops_with_own_errors") and tf.get("not_compatible"):
                notes.append(f"with --model-impl transformers vLLM would stop instead with \""
                             f"{_with_arch(tf['not_compatible']['message'], arch)}\" ({tf['not_compatible']['source']})")
            return ArchitectureCheck(
                architectures=archs, status="unsupported", ok=False, source=fb_stop_source,
                message=f"{fb_stop} ({fb_stop_source}{later}); {why}", first_release=first, notes=notes,
                sources=[f"{fb_stop_source} {fb_stop}", f"{req['source']} {req['value']}",
                         f"{tf['compatible']['source']} {tf['compatible']['test']}",
                         f"{support['backend'][1]} _supports_attention_backend of {arch} (transformers {trel})"])
        refusals = [] if pinned is not None or remote else _covered_refusals(tf, req.get("value"), arch)
        if refusals:
            can = "_can_set_attn_implementation" in tf["compatible"]["test"]
            listed = "; ".join(
                f"{r}: `_supports_attention_backend` False ({s_['backend'][1]})"
                + (f", `_can_set_attn_implementation()` False (attention class at {s_['can_set'][1]})" if can else "")
                for r, s_ in refusals)
            condition = (f"the installed transformers is a release not read here whose {arch} passes vLLM's "
                         f"Transformers-backend test `{tf['compatible']['test']}` ({tf['compatible']['source']}): none of "
                         f"the {len(refusals)} covered transformers releases that vLLM {release}'s {req['value']} "
                         f"({req['source']}, no upper bound: pip installs the newest release on the day) admits and "
                         f"that define {arch} passes it ({listed}). With any of them {returns_none} and vLLM {release} "
                         f"stops: \"{fb_stop}\" ({fb_stop_source}). vLLM {release} does not register {arch}{later}, and "
                         f"{fallback}")
            return ArchitectureCheck(
                architectures=archs, status="transformers_backend", ok=None, source=tf["fallback"][0],
                message=fb_stop, condition=condition, first_release=first,
                sources=[f"{tf['fallback'][0]} Transformers backend fallback (model_impl auto)",
                         f"{tf['compatible']['source']} {tf['compatible']['test']}", f"{fb_stop_source} {fb_stop}",
                         *(f"{s_['backend'][1]} _supports_attention_backend of {arch} (transformers {r})"
                           for r, s_ in refusals)],
                notes=[f"not a does-not-start: {req['value']} has no upper bound, so the transformers installed is "
                       "whatever is newest when vLLM is installed (or any older one the requirement admits), and "
                       f"only the covered transformers releases ({', '.join(releases.covered_releases('transformers'))})"
                       " are read here"])
        if pinned is not None:  # the class is there (transformers-<release>.json names its file:line)
            has = (f"{arch} of transformers {pinned['release']} (what pip installs for {req['value']}, "
                   f"{pinned['classes'][arch]}) supports")
        elif remote:
            has = (f"the config's auto_map AutoModel class (remote code, --trust-remote-code) or the installed "
                   f"transformers' {arch} exists and supports")
        else:
            has = (f"the installed transformers (vLLM {release} requires {req.get('value', 'transformers')}"
                   f"{', ' + req['source'] if req else ''}) defines {arch} and it supports")
        condition = (f"{has} vLLM's attention interface (`{tf['compatible']['test']}`, {tf['compatible']['source']}): "
                     f"vLLM {release} does not register {arch}{later}, and {fallback}; otherwise it stops: "
                     f"\"{stop}\" ({stop_source})")
        return ArchitectureCheck(
            architectures=archs, status="transformers_backend", ok=None, source=tf["fallback"][0], message=stop,
            condition=condition, first_release=first,
            sources=[f"{tf['fallback'][0]} Transformers backend fallback (model_impl auto)",
                     f"{tf['compatible']['source']} {tf['compatible']['test']}", f"{stop_source} {stop}",
                     *_accepted_by(tf, support, arch, pinned)],
            notes=[f"{arch} would run on vLLM's Transformers modelling backend: the memory and speed figures are "
                   "those of vLLM's own implementation of the model, not of that backend"])
    return ArchitectureCheck(architectures=archs, status="unsupported", ok=False, source=stop_source,
                             message=f"{stop} ({stop_source}{later})", first_release=first,
                             sources=[f"{stop_source} {stop}"])
