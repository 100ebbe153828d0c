"""The public vLLM startup logs in ``../shared/cases/vllm_ground_truth.json`` as engine inputs.

Used by ``benchmarks/memory_cases.py`` (the accuracy table) and by the tests. A case is runnable when we
have its model's ``config.json`` (in the shipped catalog, by Hub id ``Org/Name`` → ``Org__Name.json``, or
through ``model_aliases.json``) and its GPU is in the catalog. No Django.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import get_gpu
from calculator.engine.runtime import ReleaseRules
from calculator.engine.schemas import EngineInput

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data"
CATALOG_DIR = DATA / "model_configs"
DEFAULT_CASES = ROOT.parent / "shared" / "cases" / "vllm_ground_truth.json"
FIELDS = ("weights_gib", "available_kv_cache_gib", "kv_cache_tokens", "num_gpu_blocks", "max_concurrency")


@dataclass
class Case:
    id: str
    raw: dict[str, Any]
    engine_input: EngineInput | None
    skip_reason: str | None


def config_for(model_id: str | None) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str]:
    """``(config, quant_config, where)`` for a Hub id from the shipped catalog or the alias table."""
    if not model_id:
        return None, None, "no model id"
    path = CATALOG_DIR / (model_id.replace("/", "__") + ".json")
    where = f"catalog {path.name}"
    if not path.exists():
        aliases = json.loads((DATA / "model_aliases.json").read_text())["aliases"]
        alias = aliases.get(model_id)
        if not alias:
            return None, None, f"no config.json for {model_id} in the catalog"
        path = CATALOG_DIR / alias["config"]
        where = f"alias {alias['config']} ({alias['why'][:60]}...)"
    quant = None
    extra = CATALOG_DIR / "extra" / (path.stem + "__hf_quant_config.json")
    if extra.exists():
        quant = json.loads(extra.read_text())
    return json.loads(path.read_text()), quant, where


def _gpu_name(text: str | None) -> str | None:
    if not text:
        return None
    return re.sub(r"\s*\(.*\)\s*$", "", text).strip()


def case_input(case: dict[str, Any]) -> tuple[EngineInput | None, str | None]:
    """Build the engine input for one case, or say why it cannot be run."""
    config, quant, where = config_for(case.get("model"))
    if config is None:
        return None, where
    gpu = _gpu_name(case.get("gpu"))
    try:
        gpu_row = get_gpu(gpu or "")
    except EngineInputError:
        return None, f"GPU {case.get('gpu')!r} not in the catalog"
    version = str(case.get("vllm_version") or "")
    if not re.match(r"^\d+\.\d+", version):
        return None, f"vLLM release not stated ({version or 'none'})"
    if not ReleaseRules.is_supported(version):
        return None, f"vLLM {version} is outside the modelled releases ({' to '.join(ReleaseRules.covered_releases)})"
    dtype = str(case.get("dtype") or "auto").replace("torch.", "")
    quantization = case.get("quantization")
    if quantization and quantization != "fp8":
        quantization = None  # the checkpoint's own scheme, read from its config
    spec = case.get("speculative_config")
    total = case.get("total_gpu_memory_gib")
    try:
        inp = EngineInput(
            hf_config=config, quant_config=quant, model_label=case.get("model") or "?", model_source=where,
            gpu=gpu_row.name, tensor_parallel_size=case.get("tensor_parallel_size") or 1,
            pipeline_parallel_size=case.get("pipeline_parallel_size") or 1,
            max_model_len=case.get("max_model_len"), gpu_memory_utilization=case.get("gpu_memory_utilization"),
            dtype=dtype if dtype in ("bfloat16", "float16", "float32") else "auto", quantization=quantization,
            kv_cache_dtype=case.get("kv_cache_dtype") or "auto", block_size=case.get("block_size"),
            max_num_seqs=case.get("max_num_seqs"), max_num_batched_tokens=case.get("max_num_batched_tokens"),
            enforce_eager=bool(case.get("enforce_eager")), vllm_version=version, speculative_config=spec,
            gpu_memory_gib=total if total and abs(total - gpu_row.memory_gib) > 0.05 else None,
        )
    except Exception as exc:  # pydantic validation of an odd case
        return None, f"case fields not usable: {exc}"
    return inp, None


def load_cases(path: Path = DEFAULT_CASES, complete_only: bool = True) -> list[Case]:
    data = json.loads(Path(path).read_text())
    out = []
    for raw in data["memory_cases"]:
        if complete_only and not raw.get("complete"):
            continue
        inp, why = case_input(raw)
        out.append(Case(id=raw["id"], raw=raw, engine_input=inp, skip_reason=why))
    return out
