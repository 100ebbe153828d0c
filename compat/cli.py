"""Argument parsing for ``check_compat`` (kept separate so ``estimate`` and other commands can reuse it).

Flags are vLLM's (``--kv-cache-dtype``, ``--block-size``, ``--speculative-config`` JSON...), the same as
``python manage.py estimate`` takes, plus ``--attention-backend NAME|auto``.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .checks import DEFAULT_RELEASE, CheckRequest, CompatInputError, SpeculativeConfig, features_from_hf_config

SHIPPED_CONFIGS = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``estimate``-style flags plus ``--attention-backend``."""
    parser.add_argument("--config", help="path to the model's config.json")
    parser.add_argument("--model", help="ORG/NAME (offline: a config shipped in calculator/data/model_configs)")
    parser.add_argument("--revision", help="accepted for compatibility with estimate; unused offline")
    parser.add_argument("--gpu", required=False, help="GPU catalog name or alias (H100, A100-80GB, MI300X, CPU)")
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--pipeline-parallel-size", type=int, default=1)
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--gpu-memory-utilization", type=float)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--quantization")
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--block-size", type=int)
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--max-num-batched-tokens", type=int)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--vllm-version", default=DEFAULT_RELEASE)
    parser.add_argument("--speculative-config", help='JSON, e.g. {"method": "mtp", "num_speculative_tokens": 1}')
    parser.add_argument("--draft-config", help="path to the draft model's config.json (vocab/hidden checks)")
    parser.add_argument("--attention-backend", default="auto", help="backend name (FLASH_ATTN...) or auto")


def load_hf_config(config: str | None, model: str | None) -> dict:
    """The config.json dict from ``--config`` or an offline ``--model``.

    Raises:
        CompatInputError: no source given, file missing, or not a JSON object.
    """
    if config:
        path = Path(config)
    elif model:
        path = SHIPPED_CONFIGS / (model.replace("/", "__") + ".json")
        if not path.is_file():
            raise CompatInputError("model", f"no offline config for {model!r}; pass --config PATH")
    else:
        raise CompatInputError("config", "give --config PATH (a config.json) or --model ORG/NAME")
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CompatInputError("config", f"{path}: no such file") from None
    except (OSError, json.JSONDecodeError) as e:
        raise CompatInputError("config", f"{path}: not a readable JSON file ({e})") from None
    if not isinstance(data, dict):
        raise CompatInputError("config", f"{path}: expected a JSON object")
    return data


def request_from_options(opts: dict, hf_config: dict | None = None) -> CheckRequest:
    """Turn parsed options (``vars(args)`` or Django's ``options``) into a :class:`CheckRequest`.

    ``hf_config``: pass it when the caller already has the config (the lead's metadata layer).

    Raises:
        CompatInputError: bad or missing input, with the flag it is about.
    """
    if hf_config is None:
        hf_config = load_hf_config(opts.get("config"), opts.get("model"))
    if not opts.get("gpu"):
        raise CompatInputError("gpu", "give --gpu (e.g. H100, A100-80GB, L4, MI300X, CPU)")
    spec = None
    if opts.get("speculative_config"):
        try:
            raw = json.loads(opts["speculative_config"])
        except json.JSONDecodeError as e:
            raise CompatInputError("speculative_config", f"--speculative-config is not JSON: {e}") from None
        if not isinstance(raw, dict):
            raise CompatInputError("speculative_config", "--speculative-config must be a JSON object")
        draft = raw.pop("draft_config", None)
        if opts.get("draft_config"):
            draft = load_hf_config(opts["draft_config"], None)
        known = {k: raw[k] for k in ("method", "model", "num_speculative_tokens") if k in raw}
        spec = SpeculativeConfig(**known, draft_config=draft)
    if opts.get("block_size") is not None and opts["block_size"] <= 0:
        raise CompatInputError("block_size", "--block-size must be a positive integer")
    if (opts.get("tensor_parallel_size") or 1) < 1:
        raise CompatInputError("tensor_parallel_size", "--tensor-parallel-size must be >= 1")
    return CheckRequest(
        features=features_from_hf_config(hf_config), hf_config=hf_config, gpu=opts["gpu"],
        dtype=opts.get("dtype") or "auto", kv_cache_dtype=opts.get("kv_cache_dtype") or "auto",
        block_size=opts.get("block_size"), attention_backend=opts.get("attention_backend") or "auto",
        speculative=spec, vllm_version=opts.get("vllm_version") or DEFAULT_RELEASE,
        tensor_parallel_size=opts.get("tensor_parallel_size") or 1, quantization=opts.get("quantization"))
