"""The one place the web views get a model's metadata from.

Two sources, in this order:

1. ``calculator.metadata.load_model(model_id, revision)`` (Hub metadata layer: safetensors headers at a
   pinned revision sha, cached), when that module exists in the checkout;
2. the offline catalog shipped in ``calculator/data/model_configs/Org__Name.json`` (real ``config.json``
   copies; ``SOURCES.md`` there gives where each came from). No revision sha, no safetensors headers:
   the engine counts the weights from the config.

Every failure becomes ``EngineInputError("model" | "revision", message)`` so the form and the JSON API
show it beside the field (400, never 500).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from calculator.engine.errors import EngineInputError
from calculator.engine.schemas import CheckpointWeights

CATALOG_DIR = Path(__file__).resolve().parent / "data" / "model_configs"

try:  # the Hub metadata layer (another branch); the catalog below is the fallback until it lands
    from calculator.metadata import load_model as _metadata_load_model  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on what is merged
    _metadata_load_model = None


@dataclass(frozen=True)
class CatalogModel:
    """Same attribute names as ``calculator.metadata.ModelMetadata``: ``config`` is ``config.json`` as a
    dict, ``quant_config`` the checkpoint's quantization config (or ``None``), ``weights`` the counted
    checkpoint bytes (``None``: the engine counts them from the config), ``sha`` the resolved revision
    (``None`` for the offline catalog), ``source`` a sentence naming where the config came from."""

    model_id: str
    config: dict[str, Any]
    quant_config: dict[str, Any] | None
    weights: CheckpointWeights | None
    sha: str | None
    source: str


def _file_for(model_id: str) -> Path:
    return CATALOG_DIR / (model_id.replace("/", "__", 1) + ".json")


@lru_cache(maxsize=1)
def catalog_model_ids() -> tuple[str, ...]:
    """Hub ids of the offline catalog (``Org/Name``), sorted case-insensitively, for the form's
    suggestions. Only the top-level ``*.json`` files are configs (``extra/`` holds companions)."""
    ids = [p.stem.replace("__", "/", 1) for p in CATALOG_DIR.glob("*.json")]
    return tuple(sorted(ids, key=str.lower))


@lru_cache(maxsize=256)
def _load_catalog(model_id: str) -> CatalogModel:
    path = _file_for(model_id)
    if "/" not in model_id or not path.is_file() or path.parent != CATALOG_DIR:
        raise EngineInputError(
            "model",
            f"{model_id!r} is not in the offline catalog ({len(catalog_model_ids())} models; "
            "pick one from the suggestions)",
        )
    config = json.loads(path.read_text())
    quant = config.get("quantization_config")
    companion = CATALOG_DIR / "extra" / f"{path.stem}__hf_quant_config.json"
    if quant is None and companion.is_file():
        quant = json.loads(companion.read_text())
    return CatalogModel(
        model_id=model_id,
        config=config,
        quant_config=quant,
        weights=None,
        sha=None,
        source=f"offline catalog: calculator/data/model_configs/{path.name}",
    )


def load_model(model_id: str, revision: str | None = None):
    """Metadata of ``model_id`` (``Org/Name``) at ``revision`` (branch, tag or sha; ``None`` = main).

    Returns an object with ``config``, ``quant_config``, ``weights``, ``sha`` and ``source``.

    Raises:
        EngineInputError: field ``model`` (unknown id, Hub unreachable) or ``revision``.
    """
    model_id = (model_id or "").strip()
    if not model_id:
        raise EngineInputError("model", "enter a Hugging Face model id such as meta-llama/Llama-3.1-8B")
    if _metadata_load_model is not None:
        try:
            return _metadata_load_model(model_id, revision)
        except EngineInputError:
            raise
        except (LookupError, ValueError, OSError) as exc:
            raise EngineInputError("model", str(exc)) from exc
    if revision and revision != "main":
        raise EngineInputError(
            "revision", "the offline catalog has one revision per model; leave the revision empty"
        )
    return _load_catalog(model_id)
