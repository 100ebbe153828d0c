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
   (``compat/data/transformers-<release>.json``): without the class vLLM stops. Otherwise whether the class is
   there and compatible is a fact of the installed package, so the answer *depends*, with that condition.
3. Each name is normalised (``_normalize_arch``): an unregistered ``FooForConditionalGeneration`` is served
   as the first registered ``Foo<suffix>`` over ``_SUFFIX_TO_DEFAULTS`` (``vllm/config/model.py``).
4. Otherwise ``_raise_for_unsupported``: "Model architecture X was supported in vLLM until vY" for a retired
   name, "... is not supported in-tree anymore. Please install the plugin at URL" for a plugin one, else
   "Model architectures [...] are not supported for now".

Public API::

    check_architecture(data: dict, hf_config: dict) -> ArchitectureCheck
    first_release_with(architecture: str) -> str | None
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
                     f"{tf['compatible']['source']} {tf['compatible']['test']}", f"{stop_source} {stop}"],
            notes=[f"{arch} would run on vLLM's Transformers modelling backend: the memory and speed figures are "
                   "those of vLLM's own implementation of the model, not of that backend"])
    return ArchitectureCheck(architectures=archs, status="unsupported", ok=False, source=stop_source,
                             message=f"{stop} ({stop_source}{later})", first_release=first,
                             sources=[f"{stop_source} {stop}"])
