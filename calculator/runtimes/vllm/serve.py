"""The ``vllm serve`` command line that reproduces an ``EngineInput``.

Flag names are vLLM 0.32's (``vllm/engine/arg_utils.py``: ``--tensor-parallel-size``, ``--max-model-len``,
``--gpu-memory-utilization``, ``--kv-cache-dtype``, ``--block-size``, ``--attention-backend`` (:1086),
``--speculative-config`` (:1828, JSON) ...). Only values the user set are written: a value left to the
release default is vLLM's own default, so leaving the flag out reproduces it.

The result is an argv list, never a shell string: the validator passes it to ``subprocess`` as is, and
the page shows ``shlex.join(argv)``.
"""

from __future__ import annotations

import json
import shlex

from calculator.engine.schemas import EngineInput

# (EngineInput field, flag); written when the value is not None and differs from vLLM's default.
_VALUE_FLAGS = (
    ("tensor_parallel_size", "--tensor-parallel-size", 1),
    ("pipeline_parallel_size", "--pipeline-parallel-size", 1),
    ("data_parallel_size", "--data-parallel-size", 1),
    ("max_model_len", "--max-model-len", None),
    ("gpu_memory_utilization", "--gpu-memory-utilization", None),
    ("dtype", "--dtype", "auto"),
    ("quantization", "--quantization", None),
    ("kv_cache_dtype", "--kv-cache-dtype", "auto"),
    ("block_size", "--block-size", None),
    ("max_num_seqs", "--max-num-seqs", None),
    ("max_num_batched_tokens", "--max-num-batched-tokens", None),
    ("kv_cache_memory_bytes", "--kv-cache-memory-bytes", None),
    ("attention_backend", "--attention-backend", None),
)


def serve_argv(inp: EngineInput, model_id: str, revision: str | None = None,
               hf_overrides: dict | None = None) -> list[str]:
    """``["vllm", "serve", model_id, "--flag", "value", ...]`` for ``inp``.

    ``revision`` (a branch, tag or sha) adds ``--revision``. ``--speculative-config`` and ``--hf-overrides``
    (``hf_overrides``, the overrides already applied to ``inp.hf_config``) are compact JSON, one argv item each.
    vLLM's environment variables (``VLLM_PP_LAYER_PARTITION``, ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``) go before the
    command through ``env``. Raises nothing; the caller validated ``model_id``.
    """
    argv = ["vllm", "serve", model_id]
    env = []
    if inp.pp_layer_partition:  # an environment variable of vLLM's, not a flag
        env.append(f"VLLM_PP_LAYER_PARTITION={inp.pp_layer_partition}")
    if inp.allow_long_max_model_len:
        env.append("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    if env:
        argv = ["env", *env, *argv]
    if revision and revision != "main":
        argv += ["--revision", revision]
    for field, flag, default in _VALUE_FLAGS:
        value = getattr(inp, field)
        if value is None or value == default:
            continue
        argv += [flag, str(value)]
    if inp.enforce_eager:
        argv.append("--enforce-eager")
    if inp.enable_expert_parallel:
        argv.append("--enable-expert-parallel")
    if inp.speculative_config is not None:
        spec = inp.speculative_config.model_dump(mode="json", exclude_none=True)
        argv += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    if hf_overrides:
        argv += ["--hf-overrides", json.dumps(hf_overrides, separators=(",", ":"))]
    return argv


def serve_command(inp: EngineInput, model_id: str, revision: str | None = None,
                  hf_overrides: dict | None = None) -> str:
    """``serve_argv`` joined for display with ``shlex.join`` (safe to paste into a POSIX shell)."""
    return shlex.join(serve_argv(inp, model_id, revision, hf_overrides))
