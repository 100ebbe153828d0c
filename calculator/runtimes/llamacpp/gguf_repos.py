"""GGUF repositories: the ``.gguf`` files of a Hub repo with their sizes, split files grouped, for the picker;
and the offline catalog of popular GGUF repos (``calculator/data/gguf_repos.json``) that keeps it working
without the Hub.

* ``list_gguf_files(repo_id, revision)``: the Hub's file tree (``HfApi.list_repo_tree(recursive=True)``, one
  paginated request) when it can be reached, else the offline catalog; ``None`` when neither knows the repo.
  Split files (``name-00001-of-00003.gguf``, llama.cpp's ``gguf-split`` naming) are one entry whose size is the
  sum of its parts; vision projectors (``mmproj*.gguf``) are listed apart (they are not a model).
* ``catalog_entry(repo_id)``: the offline entry (base model config, importance-matrix flag, files with the size
  the Hub page lists).

Sizes: ``size_bytes`` is the Hub's byte count; offline, ``listed_gb`` is the decimal GB the Hub page shows
(rounded there) and ``derived_bytes`` the tensor data llama.cpp's quantization rules give for the file type
(:mod:`.quant_rules`; the header's metadata, a few MB, not counted). No Django here.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from calculator.runtimes.llamacpp.gguf_meta import SPLIT_RE

CATALOG_FILE = Path(__file__).resolve().parents[2] / "data" / "gguf_repos.json"
CONFIGS_DIR = Path(__file__).resolve().parents[2] / "data" / "model_configs"


class GGUFFile(BaseModel):
    """One model file of a repo (a split model is one entry: ``name`` is its first part)."""

    name: str
    parts: list[str]
    size_bytes: int | None = None  # from the Hub (sum of the parts)
    listed_gb: float | None = None  # offline: as the Hub page lists it
    ftype: str | None = None  # llama.cpp file type stated by the name, when it is one
    ftype_note: str | None = None  # why the type cannot be derived (UD-, _L mixes, no type in the name)
    derived_bytes: int | None = None  # tensor data from llama.cpp's quantization rules for ftype

    @property
    def params(self) -> dict[str, str]:
        """The query parameters that pick this file (the picker's link)."""
        return {"gguf_file": self.name}

    @property
    def size_label(self) -> str:
        if self.size_bytes is not None:
            return f"{self.size_bytes / 1e9:.2f} GB"
        if self.listed_gb is not None:
            return f"{self.listed_gb:g} GB (as listed)"
        if self.derived_bytes is not None:
            return f"{self.derived_bytes / 1e9:.2f} GB (derived)"
        return "size unknown"


class GGUFListing(BaseModel):
    repo_id: str
    revision: str | None
    files: list[GGUFFile]
    projectors: list[str] = Field(default_factory=list)
    source: str
    base_model: str | None = None
    config_file: str | None = None
    imatrix: bool | None = None

    def file(self, name: str) -> GGUFFile | None:
        for f in self.files:
            if name == f.name or name in f.parts:
                return f
        return None

    def default_for_ollama(self) -> GGUFFile | None:
        """The file ``ollama run hf.co/{repo}`` pulls without a tag: Q4_K_M when the repo has it
        (https://huggingface.co/docs/hub/ollama, "By default, the Q4_K_M quantization scheme is used")."""
        for f in self.files:
            if f.ftype == "Q4_K_M":
                return f
        return None


@lru_cache(maxsize=1)
def _catalog() -> dict[str, dict[str, Any]]:
    return json.loads(CATALOG_FILE.read_text())["repos"]


def catalog_entry(repo_id: str) -> dict[str, Any] | None:
    """The offline catalog entry for ``repo_id`` (case-insensitive, as the Hub treats ids), or None."""
    for key, value in _catalog().items():
        if key.lower() == repo_id.lower():
            return {"repo_id": key, **value}
    return None


def catalog_config(entry: dict[str, Any]) -> dict[str, Any]:
    """The base model's config.json the entry names (a file of the offline model catalog)."""
    return json.loads((CONFIGS_DIR / entry["config"]).read_text())


def _describe(name: str, parts: list[str], config: dict | None, imatrix: bool | None) -> GGUFFile:
    from calculator.runtimes.llamacpp.memory import NotModelled
    from calculator.runtimes.llamacpp.quant_rules import derive_meta, ftype_from_filename

    out = GGUFFile(name=name, parts=parts)
    try:
        out.ftype = ftype_from_filename(name)
    except NotModelled as exc:
        out.ftype_note = str(exc)
        return out
    if config is not None:
        try:
            meta = derive_meta(config, out.ftype, has_imatrix=imatrix if imatrix is not None else None)
            out.derived_bytes = meta.file_sizes[0]
        except NotModelled as exc:
            out.ftype_note = str(exc)
    return out


def group_files(paths: list[tuple[str, int | None]]) -> tuple[list[tuple[str, list[str], int | None]], list[str]]:
    """``[(path, size)]`` -> ``([(first part, parts, total size)], projectors)``: ``.gguf`` files only, split parts
    grouped under their first part (in order), ``mmproj*`` files apart. A split group missing parts keeps the
    parts present (the header reader reports the missing ones)."""
    groups: dict[str, dict] = {}
    projectors = []
    for path, size in sorted(paths):
        if not path.lower().endswith(".gguf"):
            continue
        base = path.rsplit("/", 1)[-1]
        if base.lower().startswith("mmproj"):
            projectors.append(path)
            continue
        m = SPLIT_RE.match(path)
        key = f"{m.group('prefix')}-00001-of-{m.group('count')}.gguf" if m else path
        g = groups.setdefault(key, {"parts": [], "size": 0})
        g["parts"].append(path)
        g["size"] = None if size is None or g["size"] is None else g["size"] + size
    return [(k, v["parts"], v["size"]) for k, v in groups.items()], projectors


def list_gguf_files(repo_id: str, revision: str | None = None, *, use_hub: bool = True) -> GGUFListing | None:
    """The repo's GGUF files (see the module docstring). ``use_hub=False`` answers from the offline catalog
    only. Returns None when the Hub cannot be reached (or says nothing) and the catalog does not know the repo.
    Raises ``calculator.metadata.hub.MetadataError`` subclasses for a definite Hub answer (no such repo,
    gated...)."""
    from calculator.metadata.hub import HubClient, HubUnavailableError, env_offline

    entry = catalog_entry(repo_id)
    config = catalog_config(entry) if entry else None
    imatrix = entry.get("imatrix") if entry else None
    if use_hub and not env_offline():
        client = HubClient()
        try:
            rev = client.resolve(repo_id, revision)
            tree = client._call(repo_id, rev.revision, lambda: list(client.api.list_repo_tree(
                repo_id, revision=rev.sha, recursive=True, expand=False)))
        except HubUnavailableError:
            tree = None
        if tree is not None:
            paths = [(f.path, getattr(f, "size", None)) for f in tree if hasattr(f, "size")]
            groups, projectors = group_files(paths)
            files = []
            for name, parts, size in groups:
                f = _describe(name, parts, config, imatrix)
                f.size_bytes = size
                files.append(f)
            return GGUFListing(repo_id=repo_id, revision=rev.sha, files=files, projectors=projectors,
                               source=f"Hugging Face Hub file tree of {repo_id} @ {rev.sha[:7]}",
                               base_model=entry.get("base_model") if entry else None,
                               config_file=entry.get("config") if entry else None, imatrix=imatrix)
    if entry is None:
        return None
    groups, projectors = group_files([(f["name"], None) for f in entry["files"]])
    listed = {f["name"]: f.get("listed_gb") for f in entry["files"]}
    files = []
    for name, parts, _ in groups:
        f = _describe(name, parts, config, imatrix)
        f.listed_gb = listed.get(name)
        files.append(f)
    return GGUFListing(repo_id=entry["repo_id"], revision=None, files=files, projectors=projectors,
                       source=f"offline GGUF catalog (calculator/data/gguf_repos.json: {', '.join(entry['sources'])})",
                       base_model=entry.get("base_model"), config_file=entry.get("config"), imatrix=imatrix)
