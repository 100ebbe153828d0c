"""vLLM-style command-line flags shared by ``estimate``, ``check_compat`` and ``validate``.

``add_engine_arguments(parser)`` declares the flags with vLLM's names; ``engine_input_from_options``
turns parsed options into an :class:`~calculator.engine.EngineInput`, loading the model's config from a
file (``--config``) or by Hub id (``--model``, through the metadata layer with its offline catalog).
Errors are :class:`CLIInputError` with the flag named, for a clean exit code 2.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .engine import EngineInput, EngineInputError, SpeculativeConfig


class CLIInputError(Exception):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_argument_group("model")
    src.add_argument("--config", help="path to a config.json")
    src.add_argument("--model", help="Hugging Face Hub id (ORG/NAME), resolved through the cache / Hub / offline catalog")
    src.add_argument("--revision", help="branch, tag or commit sha (with --model)")
    src.add_argument("--quant-config", help="path to a separate quantization file (hf_quant_config.json ...)")
    v = parser.add_argument_group("vLLM engine arguments")
    v.add_argument("--gpu", default="NVIDIA H100 80GB HBM3",
                   help="device name as torch/nvidia-smi report it (NVIDIA H100 80GB HBM3) or an alias (H100-80GB)")
    v.add_argument("--gpu-memory-gib", type=float, help="override the memory the driver reports (vGPU, MIG)")
    v.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    v.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    v.add_argument("--max-model-len", type=int)
    v.add_argument("--gpu-memory-utilization", type=float)
    v.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"])
    v.add_argument("--quantization", "-q", help="runtime quantization (fp8); a checkpoint's own is read from it")
    v.add_argument("--kv-cache-dtype", default="auto",
                   choices=["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"])
    v.add_argument("--block-size", type=int)
    v.add_argument("--max-num-seqs", type=int)
    v.add_argument("--max-num-batched-tokens", type=int)
    v.add_argument("--enforce-eager", action="store_true")
    v.add_argument("--vllm-version", default="0.32.0")
    v.add_argument("--speculative-config", help='JSON, e.g. {"method": "ngram", "num_speculative_tokens": 3}')
    v.add_argument("--attention-backend", help="a named backend (FLASH_ATTN, FLASHMLA...) or auto")
    v.add_argument("--kv-cache-memory-bytes", type=int, help="fixed KV cache size (skips the budget rule)")


def _read_json(path: str, field: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise CLIInputError(field, f"no such file: {path}") from None
    except (OSError, ValueError) as exc:
        raise CLIInputError(field, f"cannot read {path} as JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CLIInputError(field, f"{path} is not a JSON object")
    return data


def load_metadata(model_id: str, revision: str | None = None, field: str = "model"):
    """The metadata layer's answer for a Hub id (DB cache → Hub → offline catalog), see
    :func:`calculator.metadata.load_model`. Needs Django settings (the cache is a model)."""
    from django.db import DatabaseError

    from .catalog import catalog_lookup
    from .metadata import MetadataError, load_model

    try:
        return load_model(model_id, revision)
    except MetadataError as exc:
        raise CLIInputError(field, getattr(exc, "message", str(exc))) from None
    except DatabaseError:
        # No database yet (``manage.py migrate`` not run): the offline catalog still answers.
        meta = catalog_lookup(model_id, count_params=False)
        if meta is None:
            raise CLIInputError(field, f"{model_id!r} is not in the offline catalog and the metadata cache is not "
                                "set up: run `python manage.py migrate` (scripts/start does) to look it up on "
                                "the Hub") from None
        meta.notes.append("metadata cache unavailable (database not migrated): answered from the offline catalog")
        return meta


def parse_speculative_config(text: str | None) -> SpeculativeConfig | None:
    if not text:
        return None
    try:
        return SpeculativeConfig.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "value"
        raise CLIInputError("speculative_config", f"{where}: {err.get('msg')}") from None


def engine_input_from_options(opts: dict[str, Any]) -> tuple[EngineInput, dict[str, Any]]:
    """Build the engine input from parsed options (``vars(args)`` or Django's ``options``).

    Returns ``(engine_input, info)`` where ``info`` has ``model`` (label), ``source``, ``sha``.

    Raises:
        CLIInputError: a flag's value is unusable (file missing, JSON invalid, unknown model...).
    """
    quant = _read_json(opts["quant_config"], "quant_config") if opts.get("quant_config") else None
    weights = None
    sha = None
    notes: list[str] = []
    if opts.get("config"):
        config = _read_json(opts["config"], "config")
        label, source = opts.get("model") or Path(opts["config"]).name, f"config.json file {opts['config']}"
    elif opts.get("model"):
        meta = load_metadata(opts["model"], opts.get("revision"))
        config, weights, source, sha, notes = meta.config, meta.weights, meta.source, meta.sha, list(meta.notes)
        quant = quant or meta.quant_config
        label = meta.repo_id
    else:
        raise CLIInputError("model", "give --model ORG/NAME or --config PATH")
    spec = parse_speculative_config(opts.get("speculative_config"))
    draft = None
    if spec and spec.method in ("draft_model", "eagle", "eagle3"):
        if not spec.model:
            raise CLIInputError("speculative_config", f"method {spec.method} needs \"model\": the draft's Hub id or path")
        if Path(spec.model).is_file():
            draft = _read_json(spec.model, "speculative_config.model")
        elif (Path(spec.model) / "config.json").is_file():
            draft = _read_json(str(Path(spec.model) / "config.json"), "speculative_config.model")
        else:
            draft = load_metadata(spec.model, field="speculative_config.model").config
    backend = opts.get("attention_backend")
    try:
        inp = EngineInput(
            hf_config=config, quant_config=quant, weights=weights, model_label=label, model_source=source,
            draft_hf_config=draft, gpu=opts.get("gpu") or "NVIDIA H100 80GB HBM3",
            gpu_memory_gib=opts.get("gpu_memory_gib"),
            tensor_parallel_size=opts.get("tensor_parallel_size") or 1,
            pipeline_parallel_size=opts.get("pipeline_parallel_size") or 1,
            max_model_len=opts.get("max_model_len"), gpu_memory_utilization=opts.get("gpu_memory_utilization"),
            dtype=opts.get("dtype") or "auto", quantization=opts.get("quantization"),
            kv_cache_dtype=opts.get("kv_cache_dtype") or "auto", block_size=opts.get("block_size"),
            max_num_seqs=opts.get("max_num_seqs"), max_num_batched_tokens=opts.get("max_num_batched_tokens"),
            enforce_eager=bool(opts.get("enforce_eager")), vllm_version=opts.get("vllm_version") or "0.32.0",
            speculative_config=spec, attention_backend=None if backend in (None, "", "auto") else backend,
            kv_cache_memory_bytes=opts.get("kv_cache_memory_bytes"),
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CLIInputError(str(err["loc"][0]) if err.get("loc") else "input", err["msg"]) from None
    except EngineInputError as exc:
        raise CLIInputError(exc.field, exc.message) from None
    return inp, {"model": label, "source": source, "sha": sha, "notes": notes}
