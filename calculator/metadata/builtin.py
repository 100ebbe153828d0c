"""Built-in model ids (``tiny-random/llama``): tiny random-weight models written locally on first use, so
the calculator can estimate them and a validation run needs nothing from the Hub.

Each family has one writer, ``write_tiny_<family>(path, **overrides) -> dict``, that saves a seeded,
float32 checkpoint (``transformers`` ``save_pretrained``, safetensors) plus a byte-level BPE tokenizer
(``tokenizers``, saved through ``PreTrainedTokenizerFast``) into ``path`` and returns the
``config.json`` dict it wrote, so the memory engine can predict for exactly that model.

Built-in model ids map to a family and a directory under ``settings.VAR_DIR / "models"``:
``tiny-random/llama`` -> ``var/models/tiny-random-llama`` (about 1 MB).

Float32 because vLLM's CPU build kills the worker with SIGILL on bfloat16 on CPUs without AVX512-BF16.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

from calculator.crosscheck.tiny_models import write_tokenizer

_IMPORT_LOCK = threading.Lock()

TINY_LLAMA_DEFAULTS: dict[str, Any] = {
    "vocab_size": 1024,
    "hidden_size": 128,  # 4 heads x head_dim 32 (CPU attention needs head_dim >= 32)
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
}


def write_tiny_llama(path: str | Path, seed: int = 0, **overrides: Any) -> dict[str, Any]:
    """Write a random-weight ``LlamaForCausalLM`` (float32) and its tokenizer to ``path``.

    ``overrides`` replace entries of ``TINY_LLAMA_DEFAULTS`` (any ``LlamaConfig`` key). Returns the
    written ``config.json`` as a dict. Weights are drawn with ``torch.manual_seed(seed)``, so two calls
    with the same arguments write the same tensors. The vocabulary may end up smaller than
    ``vocab_size`` tokens in the tokenizer (BPE stops when the corpus runs out of merges); the
    embedding keeps ``vocab_size`` rows, as real checkpoints with padded vocabularies do.
    """
    with _IMPORT_LOCK:  # transformers' lazy module is not safe to import from two threads at once
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    params = {**TINY_LLAMA_DEFAULTS, **overrides}
    config = LlamaConfig(**params, torch_dtype="float32")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(str(path), safe_serialization=True)
    write_tokenizer(path, params["vocab_size"])
    return json.loads((path / "config.json").read_text())


# model id -> (directory name, writer). Another family is one more line here.
BUILTIN_MODELS: dict[str, tuple[str, Callable[..., dict[str, Any]]]] = {
    "tiny-random/llama": ("tiny-random-llama", write_tiny_llama),
}

# architecture in a requested config.json -> built-in stand-in used when the real model cannot be
# downloaded (only Llama-shaped models so far; others are refused with a message).
ARCHITECTURE_STAND_INS: dict[str, str] = {
    "LlamaForCausalLM": "tiny-random/llama",
    "MistralForCausalLM": "tiny-random/llama",
}


def is_builtin(model_id: str) -> bool:
    return model_id in BUILTIN_MODELS


def models_dir() -> Path:
    from django.conf import settings

    return Path(settings.VAR_DIR) / "models"


CONFIG_DIR = Path(__file__).resolve().parents[1] / "data" / "builtin"


def builtin_config(model_id: str) -> dict[str, Any]:
    """The ``config.json`` a built-in model's writer writes, committed in ``calculator/data/builtin/`` so the
    calculator answers it without importing torch or writing weights (``tests/test_builtin_models.py``
    checks it equals a fresh write). Raises ``KeyError`` for an id that is not built in."""
    dirname, _ = BUILTIN_MODELS[model_id]
    return json.loads((CONFIG_DIR / f"{dirname}.json").read_text())


def ensure_builtin(model_id: str, root: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Write the built-in model ``model_id`` on first use; return ``(directory, config dict)``.

    Raises ``KeyError`` for an id that is not built in. Writing is idempotent: an existing directory
    with a ``config.json`` and ``tokenizer.json`` is reused.
    """
    dirname, writer = BUILTIN_MODELS[model_id]
    target = (root or models_dir()) / dirname
    if not ((target / "config.json").exists() and (target / "tokenizer.json").exists()
            and (target / "model.safetensors").exists()):
        import shutil
        import tempfile

        target.parent.mkdir(parents=True, exist_ok=True)
        # a private temporary directory per writer: two first uses at once do not trip over each other
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".partial-", dir=target.parent))
        writer(tmp)
        if (target / "model.safetensors").exists():
            shutil.rmtree(tmp, ignore_errors=True)  # another writer finished first: keep theirs
        else:
            if target.exists():
                shutil.rmtree(target, ignore_errors=True)
            try:
                tmp.rename(target)
            except OSError:  # another writer renamed its copy in between
                shutil.rmtree(tmp, ignore_errors=True)
    return target, json.loads((target / "config.json").read_text())
