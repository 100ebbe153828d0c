"""Model metadata: where a model's ``config.json``, quantization file and stored weights come from.

- :mod:`.hub`: the Hugging Face Hub client (sha-pinned, safetensors headers by ranged reads), errors;
- :mod:`.catalog`: the offline catalog shipped in ``calculator/data/model_configs`` (no Django);
- :mod:`.builtin`: built-in tiny models (``tiny-random/llama``) written on first use;
- :mod:`.cache`: ``load_model``, the order cache -> Hub -> catalog, over the Django models in
  ``calculator/models.py``.

``from calculator.metadata import load_model`` (and the names below) reach :mod:`.cache` / :mod:`.hub`
lazily, so importing the catalog or the Hub client needs no Django settings.
"""
from __future__ import annotations

import importlib

_CACHE_NAMES = {"load_model", "load_catalog", "reset_hub_state"}
_HUB_NAMES = {"MetadataError", "InvalidModelIdError", "RepoNotFoundError", "RevisionNotFoundError",
              "GatedRepoError", "NoConfigError", "HubUnavailableError", "ModelMetadata"}


def __getattr__(name: str):
    if name in _CACHE_NAMES:
        return getattr(importlib.import_module("calculator.metadata.cache"), name)
    if name in _HUB_NAMES:
        return getattr(importlib.import_module("calculator.metadata.hub"), name)
    if name == "catalog_models":
        return importlib.import_module("calculator.metadata.catalog").catalog_models
    raise AttributeError(f"module 'calculator.metadata' has no attribute {name!r}")


__all__ = sorted(_CACHE_NAMES | _HUB_NAMES | {"catalog_models"})
