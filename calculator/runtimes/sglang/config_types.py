"""Whether an SGLang release can load a checkpoint's ``config.json`` with the transformers its wheel pins.

SGLang builds the model's config in its ``get_config`` with transformers' ``AutoConfig.from_pretrained(model,
trust_remote_code=<--trust-remote-code, default False>)``. AutoConfig looks the config's top-level ``model_type`` up in
``CONFIG_MAPPING``; for a type it does not know it raises ``ValueError("The checkpoint you are trying to load has model
type `X` but Transformers does not recognize this architecture. ...")`` (transformers/models/auto/configuration_auto.py),
or, when the config names its own class (``auto_map.AutoConfig``) and ``--trust-remote-code`` is not given,
``ValueError("The repository ... contains custom code which must be executed to correctly load the model. ...")``
(transformers/dynamic_module_utils.py ``resolve_trust_remote_code``). SGLang avoids that for the types it registers a
config class of its own for (``_CONFIG_REGISTRY``, ``AutoConfig.register``) and for ``deepseek_v32``, whose error its
``get_config`` catches (0.5.3 to 0.5.10.post1: ``_load_deepseek_v32_model`` reads it as ``deepseek_v3``).

What each release pins, registers and catches, and which transformers releases know each model type, is read from the
wheels by ``data/extract_config_types.py`` into ``data/config_types.json`` (wheel sha256 and file:line of every entry).
Only the top-level ``model_type`` is checked (the one AutoConfig resolves); a sub-config's type (``text_config``) is
resolved by the top-level class and not checked here.
"""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .releases import COVERED, architectures, check_release

_DATA = Path(__file__).resolve().parent / "data" / "config_types.json"


@cache
def _data() -> dict[str, Any]:
    return json.loads(_DATA.read_text())


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def transformers_pin(release: str) -> tuple[str, str]:
    """``(version, source)`` of the ``transformers==X`` the release's wheel requires (``sglang-X.dist-info/METADATA``;
    0.4.x under the ``runtime-common`` extra, which ``sglang[all]`` installs)."""
    pin = _data()["sglang"][check_release(release)]["transformers"]
    return pin["version"], f"sglang=={release} {pin['source']}"


def loaded_by(release: str, model_type: str) -> tuple[str, str] | None:
    """How SGLang ``release`` with its pinned transformers knows ``model_type``: ``(words, source)``: it registers its
    own config class (``_CONFIG_REGISTRY`` / ``AutoConfig.register``), its get_config catches transformers' error for
    it, or its pin's ``CONFIG_MAPPING_NAMES`` has it; ``None`` when none does (AutoConfig raises)."""
    rel = _data()["sglang"][check_release(release)]
    if model_type in rel["registry"]:
        return "it registers its own config class for it", f"sglang=={release} {rel['registry'][model_type]}"
    if model_type in rel["caught"]:
        return "its get_config catches transformers' error for it", f"sglang=={release} {rel['caught'][model_type]}"
    pin = rel["transformers"]["version"]
    tf = _data()["transformers"][pin]
    if model_type in set(tf["model_types"]):
        return f"its pin transformers=={pin} knows it", f"transformers=={pin} {tf['source']} CONFIG_MAPPING_NAMES"
    return None


def _known_runs(model_type: str) -> list[dict[str, str]]:
    """The runs of consecutive transformers releases (``first`` .. ``last``, ``before`` the one just before ``first``,
    ``source`` the entry in ``first``) that know ``model_type``, among those read (``transformers_read``)."""
    return _data()["first_known"].get(model_type, [])


class ConfigLoad(BaseModel):
    """Whether SGLang ``release`` loads a config of ``model_type`` with its pinned transformers.

    ``loads``: it does (``source`` says whose class); otherwise ``condition`` (it loads when that holds: a newer
    transformers over the pin, or ``--trust-remote-code`` for a config with ``auto_map.AutoConfig``) or ``error`` (no
    way: no transformers release read knows the type, SGLang does not register it and the config names no class of its
    own). ``releases``: the covered releases that load it out of the box and have the model class (nearest newer
    first, then nearest older)."""

    release: str
    model_type: str
    loads: bool
    source: str = ""
    condition: str | None = None
    error: str | None = None
    releases: list[str] = []
    #: the config's own class (``auto_map.AutoConfig``) when ``condition`` includes starting SGLang with
    #: --trust-remote-code: the launch command then carries the flag, as the condition says
    remote_class: str | None = None


def check_config(release: str, hf_config: dict[str, Any]) -> ConfigLoad | None:
    """:class:`ConfigLoad` for the config's top-level ``model_type`` on SGLang ``release``; ``None`` when the config has
    no ``model_type`` (AutoConfig then matches the repository name, which is not checked here).

    Raises:
        EngineInputError(field="release"): the release is not covered.
    """
    release = check_release(release)
    model_type = hf_config.get("model_type") if isinstance(hf_config, dict) else None
    if not isinstance(model_type, str) or not model_type:
        return None
    where = loaded_by(release, model_type)
    if where is not None:
        return ConfigLoad(release=release, model_type=model_type, loads=True, source=f"{where[0]} ({where[1]})")
    data = _data()
    rel = data["sglang"][release]
    pin, pin_src = transformers_pin(release)
    tf = data["transformers"][pin]
    arch = (hf_config.get("architectures") or [None])[0]
    here = COVERED.index(release)
    order = list(COVERED[here + 1:]) + list(reversed(COVERED[:here]))
    releases = [r for r in order if loaded_by(r, model_type) is not None and (arch is None or arch in architectures(r))]
    first_read, newest = data["transformers_read"]["from"], data["transformers_read"]["to"]
    runs = [r for r in _known_runs(model_type) if _vkey(r["first"]) > _vkey(pin)] or _known_runs(model_type)
    upgrade = known = None
    if runs:
        run = runs[0]
        upgrade = (f"transformers >= {run['first']}" if run["last"] == newest
                   else f"transformers {run['first']} to {run['last']}")
        known = (f"{run['first']} is the first transformers that knows it ({run['source']}; "
                 + (f"{run['before']} does not" if run["before"] else f"known from {first_read}, the oldest read")
                 + ("" if run["last"] == newest else f"; {run['last']} is the last that does") + ")")
    else:
        known = f"no transformers release from {first_read} to {newest} knows it"
    remote = (hf_config.get("auto_map") or {}).get("AutoConfig") if isinstance(hf_config.get("auto_map"), dict) else None
    pinned = f"SGLang {release}'s pin transformers=={pin} ({pin_src})"
    call = f"get_config's AutoConfig.from_pretrained (sglang=={release} {rel['get_config']}) raises"
    not_found = (f"ValueError \"The checkpoint you are trying to load has model type `{model_type}` but Transformers "
                 f"does not recognize this architecture\" (transformers=={pin} {tf['errors']['unknown_type']})")
    unregistered = f"SGLang {release} registers no config class of its own for it"
    out_of_box = ""
    if releases:
        words, src = loaded_by(releases[0], model_type)
        out_of_box = f". Out of the box: --sglang-version {releases[0]}, as {words} ({src})"
    if remote:
        flag = (f"SGLang is started with --trust-remote-code (sglang=={release} {rel['trust_remote_code']}, default "
                f"False), which runs the repository's own config class (auto_map AutoConfig {remote})")
        cond = (f"{flag}{' or ' + upgrade + ' is installed over ' + pinned if upgrade else ''}: without "
                f"{'either' if upgrade else 'it'}, {call} ValueError \"The repository ... contains custom code which "
                f"must be executed to correctly load the model\" (transformers=={pin} {tf['errors']['remote_code']}), "
                f"as {'transformers==' + pin if upgrade else pinned} does not know model type `{model_type}` and "
                f"{unregistered}; {known}"
                f"{out_of_box}")
        return ConfigLoad(release=release, model_type=model_type, loads=False, condition=cond, releases=releases,
                          remote_class=remote)
    if upgrade:
        cond = f"{upgrade} is installed over {pinned}: with the pin, {call} {not_found}, as {unregistered}; {known}" \
               f"{out_of_box}"
        return ConfigLoad(release=release, model_type=model_type, loads=False, condition=cond, releases=releases)
    err = (f"SGLang {release} cannot load this config: {call} {not_found} with {pinned}, as {unregistered}; {known}, "
           f"and the config names no class of its own (auto_map AutoConfig) for --trust-remote-code{out_of_box}")
    return ConfigLoad(release=release, model_type=model_type, loads=False, error=err, releases=releases)
