"""The offline model catalog: real ``config.json`` copies shipped in ``calculator/data/model_configs/``.

A file ``Org__Name.json`` is the config of Hub id ``Org/Name``; ``SOURCES.md`` gives each file's source in a
numbered table row, which every answer cites (``offline catalog (SOURCES.md row 9)``). Rows marked
**SIBLING**, **DERIVATIVE**, **REVISION** or **IDENTITY UNVERIFIED** there carry that mark into the notes.
``model_aliases.json`` maps a few Hub ids without their own copy to a config of the same architecture,
with the reason. ``extra/<file stem>__<quant file>.json`` holds a separate quantization file
(``hf_quant_config.json`` of the NVIDIA ModelOpt FP8 checkpoint). No Django in here.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from calculator.metadata.hub import QUANT_FILES, ModelMetadata, count_parameters_on_meta_device, describe_config

CATALOG_DIR = Path(__file__).resolve().parents[1] / "data" / "model_configs"
# Parameter counts of the catalog's configs, counted once on torch's meta device by
# ``manage.py count_catalog_weights`` and committed, so a lookup never imports torch.
WEIGHTS_FILE = Path(__file__).resolve().parents[1] / "data" / "catalog_weights.json"
ALIASES_FILE = Path(__file__).resolve().parents[1] / "data" / "model_aliases.json"
CATALOG_REVISION_NOTE = (
    "From the offline catalog (a copy shipped with the calculator, not fetched from the Hub): its commit on "
    "the Hub is unknown, and there are no safetensors headers."
)

_ROW = re.compile(r"^\| (\d+) \| `([^`]+\.json)`(.*?)\|")
_MARK = re.compile(r"\*\*([^*]*(?:SIBLING|DERIVATIVE|REVISION|IDENTITY UNVERIFIED)[^*]*)\*\*")


def file_to_repo_id(filename: str) -> str | None:
    """``Org__Name.json`` -> ``Org/Name``; ``None`` for names that are no Hub id (``a__b__c.json``)."""
    stem = filename.removesuffix(".json")
    parts = stem.split("__")
    return f"{parts[0]}/{parts[1]}" if len(parts) == 2 else None


@lru_cache(maxsize=1)
def _sources() -> dict[str, tuple[int, str | None]]:
    """File name -> (SOURCES.md row number, identity mark or None)."""
    rows: dict[str, tuple[int, str | None]] = {}
    for line in (CATALOG_DIR / "SOURCES.md").read_text().splitlines():
        match = _ROW.match(line)
        if match:
            mark = _MARK.search(match.group(3))
            rows[match.group(2)] = (int(match.group(1)), mark.group(1).strip() if mark else None)
    return rows


@lru_cache(maxsize=1)
def _files() -> dict[str, str]:
    """Hub id -> config file name, for every shipped config whose name is a Hub id."""
    out = {}
    for path in sorted(CATALOG_DIR.glob("*.json")):
        repo_id = file_to_repo_id(path.name)
        if repo_id:
            out[repo_id] = path.name
    return out


@lru_cache(maxsize=1)
def _aliases() -> dict[str, dict[str, str]]:
    return json.loads(ALIASES_FILE.read_text()).get("aliases", {})


def catalog_models() -> list[str]:
    """Hub ids the offline catalog answers for (shipped configs plus aliases), sorted case-insensitively.
    For the web form's suggestions and ``load_catalog``."""
    return sorted({*_files(), *_aliases()}, key=str.lower)


NEAREST_CUTOFF = 0.7  # difflib ratio below which a catalog id is not offered (it would look random)


def nearest_models(repo_id: str, n: int = 3) -> list[str]:
    """The (at most ``n``) catalog ids closest to ``repo_id``, closest first: ``difflib``'s ratio on the lower-cased
    ids (the Hub treats ids case-insensitively), at least :data:`NEAREST_CUTOFF`; never ``repo_id`` itself (the
    catalog answers that one); empty when none is close."""
    import difflib

    key = (repo_id or "").strip().lower()
    ids = {m.lower(): m for m in catalog_models() if m.lower() != key}
    return [ids[k] for k in difflib.get_close_matches(key, list(ids), n=n, cutoff=NEAREST_CUTOFF)]


def did_you_mean(repo_id: str) -> str:
    """``"did you mean 'meta-llama/Llama-3.1-8B-Instruct'? (also close: ...)"`` from :func:`nearest_models`, the
    sentence a mistyped model id gets on every surface; ``""`` when no catalog id is close."""
    near = nearest_models(repo_id)
    if not near:
        return ""
    also = f" (also close: {', '.join(repr(m) for m in near[1:])})" if near[1:] else ""
    return f"did you mean {near[0]!r}?{also}"


def _find(repo_id: str) -> tuple[str, str | None] | None:
    """Case-insensitive match (the Hub treats ids so): (file name, alias reason or None)."""
    files = {k.lower(): v for k, v in _files().items()}
    aliases = {k.lower(): v for k, v in _aliases().items()}
    key = repo_id.lower()
    if key in files:
        return files[key], None
    if key in aliases:
        return aliases[key]["config"], aliases[key]["why"]
    return None


def catalog_repo_id(repo_id: str) -> str | None:
    """The catalog's spelling of ``repo_id`` (case-insensitive), or ``None`` when it is not in the catalog."""
    key = repo_id.lower()
    return next((m for m in catalog_models() if m.lower() == key), None)


@lru_cache(maxsize=1)
def _counted() -> dict[str, Any]:
    if not WEIGHTS_FILE.is_file():
        return {}
    return json.loads(WEIGHTS_FILE.read_text())["models"]


def catalog_weights(filename: str) -> tuple[Any, str]:
    """``(CheckpointWeights or None, note)`` of a catalog file from the committed meta-device counts
    (``calculator/data/catalog_weights.json``); ``None`` with the reason where no count exists (quantized
    configs, draft heads, architectures transformers lacks): the engine then counts from the config."""
    from calculator.engine.schemas import CheckpointWeights

    entry = _counted().get(filename)
    if entry is None:
        return None, ("No safetensors headers in the offline catalog and no meta-device count for this file "
                      "(run manage.py count_catalog_weights): the engine counts the weights from the config.")
    if entry.get("weights") is None:
        return None, entry["note"]
    return CheckpointWeights(**entry["weights"]), entry["note"]


def count_catalog_weights() -> dict[str, Any]:
    """Count every catalog config on torch's meta device (``count_parameters_on_meta_device``; imports
    transformers and torch). Returns the content of ``catalog_weights.json``."""
    models: dict[str, Any] = {}
    for filename in sorted(_files().values()):
        config = json.loads((CATALOG_DIR / filename).read_text())
        repo_id = file_to_repo_id(filename) or filename
        row, _ = _sources().get(filename, (None, None))
        source = f"offline catalog ({filename}, SOURCES.md row {row})" if row else f"offline catalog ({filename})"
        quant_file = next((n for n in QUANT_FILES
                           if (CATALOG_DIR / "extra" / f"{filename.removesuffix('.json')}__{n}").exists()), None)
        weights, note = count_parameters_on_meta_device(config, source, repo_id=repo_id, quant_file=quant_file)
        models[filename] = {"weights": weights.model_dump() if weights else None, "note": note}
    return {"about": "Meta-device parameter counts of calculator/data/model_configs (manage.py "
                     "count_catalog_weights); read by calculator.metadata.catalog.catalog_weights.", "models": models}


def catalog_lookup(repo_id: str, *, count_params: bool = True) -> ModelMetadata | None:
    """The catalog's ``ModelMetadata`` for ``repo_id``, or ``None`` when the catalog lacks it.

    ``weights`` come from the committed meta-device counts (:func:`catalog_weights`), the same numbers
    whether the answer comes through the metadata cache or not; torch is never imported here.
    ``count_params=False`` leaves them out (the engine counts from the config). ``sha`` is ``None``: the
    copy's Hub commit is unknown.
    """
    found = _find(repo_id)
    if found is None:
        return None
    filename, alias_why = found
    repo_id = catalog_repo_id(repo_id) or repo_id
    row, mark = _sources().get(filename, (None, None))
    config: dict[str, Any] = json.loads((CATALOG_DIR / filename).read_text())
    source = f"offline catalog ({filename}, SOURCES.md row {row})" if row else f"offline catalog ({filename})"
    notes = [CATALOG_REVISION_NOTE]
    if alias_why:
        notes.append(f"{repo_id} has no copy of its own; using {filename}: {alias_why}")
    if mark:
        notes.append(f"SOURCES.md row {row} marks this copy: {mark}.")
    more, remote_code, multimodal = describe_config(config)
    notes += more
    quant_config = quant_file = None
    for name in QUANT_FILES:
        extra = CATALOG_DIR / "extra" / f"{filename.removesuffix('.json')}__{name}"
        if extra.exists():
            quant_config, quant_file = json.loads(extra.read_text()), name
            notes.append(f"Quantization settings from the catalog's copy of {name} (extra/{extra.name}).")
            break
    weights = None
    if count_params:
        weights, note = catalog_weights(filename)
    else:
        note = "No safetensors headers in the offline catalog: the engine counts the weights from the config."
    notes.append(note)
    return ModelMetadata(
        repo_id=repo_id,
        revision="main",
        sha=None,
        origin="catalog",
        config=config,
        quant_config=quant_config,
        quant_config_file=quant_file,
        weights=weights,
        source=source,
        notes=notes,
        fetched_at=datetime.now(timezone.utc),
        remote_code=remote_code,
        multimodal=multimodal,
    )
