"""Bytes per element of the dtypes the engine meets. Unknown names raise (no silent fallback).

Names: torch dtype names (``bfloat16``), vLLM ``--dtype`` / ``--kv-cache-dtype`` values (``half``,
``fp8_e4m3``) and safetensors dtypes (``BF16``, ``F8_E4M3``). vLLM stores every fp8 KV-cache variant as
one byte (``vllm/utils/torch_utils.py``: ``STR_DTYPE_TO_TORCH_DTYPE``, 0.32).
"""
from __future__ import annotations

from .errors import EngineInputError

_BYTES = {
    "float32": 4, "fp32": 4, "float": 4, "f32": 4,
    "bfloat16": 2, "bf16": 2,
    "float16": 2, "fp16": 2, "half": 2, "f16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "f8_e4m3": 1, "f8_e5m2": 1, "float8_e4m3fn": 1,
    "int8": 1, "i8": 1, "uint8": 1, "u8": 1,
    "int32": 4, "i32": 4, "int64": 8, "i64": 8, "int16": 2, "i16": 2, "bool": 1, "f64": 8, "float64": 8,
}


def dtype_bytes(name: str, field: str = "dtype") -> int:
    """Bytes per element of ``name``.

    Raises:
        EngineInputError: the dtype is unknown (``field`` names the input it came from).
    """
    key = str(name).lower().replace("torch.", "")
    if key not in _BYTES:
        raise EngineInputError(field, f"unknown dtype {name!r}")
    return _BYTES[key]
