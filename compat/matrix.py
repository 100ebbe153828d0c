"""The compatibility matrix page's data: verdict cells for backends x GPUs (compute capabilities) and
backends x KV-cache dtypes, for one release, platform and model (a shipped config.json). Plain Python."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from calculator.engine.gpus import all_gpus

from . import checks, extract

CONFIG_DIR = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"
DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
PLATFORMS = ("cuda", "rocm", "cpu", "xpu")


@lru_cache(maxsize=1)
def model_choices() -> list[str]:
    """``ORG/NAME`` of every config shipped in calculator/data/model_configs."""
    return sorted(p.stem.replace("__", "/", 1) for p in CONFIG_DIR.glob("*.json"))


def load_model_config(model: str) -> dict:
    path = CONFIG_DIR / (model.replace("/", "__") + ".json")
    if model not in model_choices():
        raise checks.CompatInputError("model", f"unknown model {model!r}")
    return json.loads(path.read_text())


def representative_gpus(platform: str) -> list:
    """One catalog GPU per compute capability (the first in catalog order) for ``platform``."""
    seen, out = set(), []
    for g in all_gpus():
        if checks.platform_of(g) != platform or g.compute_capability in seen:
            continue
        seen.add(g.compute_capability)
        out.append(g)
    return sorted(out, key=lambda g: (g.capability_tuple or (0, 0)))


@dataclass
class Cell:
    ok: bool | None
    reasons: list[str]
    query: dict  # GET parameters of the verdict page for this cell
    auto: bool = False  # what vLLM picks with no --attention-backend

    @property
    def label(self) -> str:
        return {True: "ok", False: "no", None: "depends"}[self.ok]


@dataclass
class Matrix:
    release: str
    platform: str
    model: str
    kv_cache_dtype: str
    gpu: str
    features: checks.ModelFeatures
    gpus: list = field(default_factory=list)  # column headers: (name, capability)
    kv_dtypes: list[str] = field(default_factory=list)
    backends: list[dict] = field(default_factory=list)  # rows: name, declared, source, by_gpu, by_kv, auto
    auto_by_gpu: dict = field(default_factory=dict)
    auto_by_kv: dict = field(default_factory=dict)


def _cells(report: checks.CompatReport, query: dict, explicit: bool = True) -> dict[str, Cell]:
    """One cell per backend; its link asks for that backend explicitly, except where the release takes none on the
    command line (0.9 / 0.10: the link is vLLM's own choice)."""
    return {b.name: Cell(b.ok, b.reasons, {**query, "attention_backend": b.name} if explicit else dict(query),
                         b.name == report.auto_selected)
            for b in report.backends}


def build_matrix(release: str, platform: str, model: str = DEFAULT_MODEL, kv_cache_dtype: str = "auto",
                 gpu: str | None = None, block_size: int | None = None) -> Matrix:
    """Evaluate every backend of ``platform`` for ``model`` on one GPU per compute capability (at
    ``kv_cache_dtype``) and for every KV-cache dtype the release knows (on ``gpu``).

    Raises:
        CompatInputError: unknown release, platform, model or dtype.
    """
    data = checks.load_release(release)
    if platform not in data["platforms"]:
        raise checks.CompatInputError("platform", f"vLLM {release} has no selector for {platform!r}")
    gpus = representative_gpus(platform)
    if not gpus:
        raise checks.CompatInputError("platform", f"the GPU catalog has no {platform} device")
    config = load_model_config(model)
    col_gpu = gpu or gpus[-1].name
    m = Matrix(release=data["release"], platform=platform, model=model, kv_cache_dtype=kv_cache_dtype,
               gpu=col_gpu, features=checks.features_from_hf_config(config))
    base_q = {"model": model, "vllm_version": data["release"], "block_size": block_size or ""}
    explicit = (data.get("selection") or {}).get("flag", "--attention-backend") is not None
    by_gpu, by_kv = {}, {}
    for g in gpus:
        q = {**base_q, "gpu": g.name, "kv_cache_dtype": kv_cache_dtype}
        r = checks.verdict_for(config, g.name, kv_cache_dtype=kv_cache_dtype, block_size=block_size,
                               vllm_version=data["release"])
        by_gpu[g.name] = _cells(r, q, explicit)
        m.auto_by_gpu[g.name] = r.auto_selected
        m.gpus.append((g.name, g.compute_capability or "-"))
    kv_values = [k for k in data["cache_dtypes"]["values"]]
    for kv in kv_values:
        q = {**base_q, "gpu": col_gpu, "kv_cache_dtype": kv}
        r = checks.verdict_for(config, col_gpu, kv_cache_dtype=kv, block_size=block_size,
                               vllm_version=data["release"])
        by_kv[kv] = _cells(r, q, explicit)
        m.auto_by_kv[kv] = r.auto_selected
    m.kv_dtypes = kv_values
    names = list(dict.fromkeys(n for cells in by_gpu.values() for n in cells))
    declared = {b["name"]: b for b in data["backends"]}
    for name in names:
        b = declared.get(name, {})
        m.backends.append({
            "name": name, "source": b.get("source"), "registry": b.get("registry"),
            "declared": b.get("declared") or {}, "missing": b.get("missing"),
            "by_gpu": [by_gpu[g][name] for g, _ in m.gpus],
            "by_kv": [by_kv[k][name] for k in kv_values if name in by_kv[k]],
        })
    return m


def source_url(release: str, loc: str | None) -> str | None:
    """GitHub link for ``file:line`` at the release tag (``vllm/platforms/cuda.py:83``)."""
    if not loc or ":" not in loc:
        return None
    path, line = loc.rsplit(":", 1)
    return f"https://github.com/vllm-project/vllm/blob/v{release}/{path}#L{line}"


def releases() -> list[str]:
    """Covered releases, oldest first (:func:`compat.releases.covered_releases`)."""
    from .releases import covered_releases
    return list(covered_releases())
