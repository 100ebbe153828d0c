"""``--kv-cache-dtype auto`` on a ModelOpt checkpoint that names its KV cache scheme.

From vLLM 0.14 ``EngineArgs.create_engine_config`` resolves ``auto`` with ``resolve_kv_cache_dtype_string``
(vllm/engine/arg_utils.py:1398 in 0.14.1, :2257 in 0.32.0): a ModelOpt checkpoint's ``kv_cache_quant_algo``
``FP8`` (or ``kv_cache_scheme`` ``{"num_bits": 8, "type": "float", "dynamic": false}``) makes the KV cache
``fp8_e4m3``. 0.13.0 has no such resolution (auto = the model dtype). Expected bytes by hand from the configs.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from calculator.engine import EngineInput, EngineInputError, estimate

CATALOG = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"


def _load(name: str) -> tuple[dict, dict | None]:
    cfg = json.loads((CATALOG / f"{name}.json").read_text())
    extra = CATALOG / "extra" / f"{name}__hf_quant_config.json"
    return cfg, (json.loads(extra.read_text()) if extra.exists() else None)


def _estimate(name: str, release: str, **kw):
    cfg, qc = _load(name)
    return estimate(EngineInput(hf_config=cfg, quant_config=qc, gpu="B200", vllm_version=release, **kw))


def test_hf_quant_config_fp8_kv_makes_auto_fp8_from_0_14():
    # nvidia/Qwen3-32B-NVFP4: hf_quant_config.json (no quant_method; producer modelopt, quant_algo NVFP4,
    # kv_cache_quant_algo FP8). 64 layers x 8 KV heads x head_dim 128 x (K + V):
    bf16 = 64 * 8 * 128 * 2 * 2
    assert bf16 == 262_144
    old = _estimate("nvidia__Qwen3-32B-NVFP4", "0.13.0")
    assert old.kv_bytes_per_token == bf16 and old.resolved["kv_cache_dtype"] == "bfloat16"
    for release in ("0.14.1", "0.32.0"):
        new = _estimate("nvidia__Qwen3-32B-NVFP4", release)
        assert new.kv_bytes_per_token == bf16 // 2, release
        assert new.resolved["kv_cache_dtype"] == "fp8_e4m3"
        assert "kv_cache_quant_algo 'FP8'" in new.sources["kv_cache_dtype"]
        # the same as asking for it
        asked = _estimate("nvidia__Qwen3-32B-NVFP4", release, kv_cache_dtype="fp8")
        assert asked.kv_cache_tokens == new.kv_cache_tokens
    # an explicit dtype still wins over the checkpoint
    assert _estimate("nvidia__Qwen3-32B-NVFP4", "0.32.0", kv_cache_dtype="bfloat16").kv_bytes_per_token == bf16


def test_kv_cache_scheme_dict_in_config_json():
    # nvidia/Gemma-4-31B-IT-NVFP4: config.json quantization_config {quant_method modelopt, kv_cache_scheme
    # {dynamic false, num_bits 8, type float}}. text_config: 50 sliding layers x 16 KV heads x 256 and 10 global
    # layers x 4 KV heads x 512 (V slot built), K + V, 1 byte each:
    fp8 = 50 * 16 * 256 * 2 + 10 * 4 * 512 * 2
    r = _estimate("nvidia__Gemma-4-31B-IT-NVFP4", "0.32.0")
    assert r.resolved["kv_cache_dtype"] == "fp8_e4m3"
    assert r.kv_bytes_per_token == fp8 == 450_560


def test_a_4_bit_kv_scheme_is_refused_not_sized():
    cfg, _ = _load("nvidia__Gemma-4-31B-IT-NVFP4")
    cfg = json.loads(json.dumps(cfg))
    cfg["quantization_config"]["kv_cache_scheme"] = {"dynamic": False, "num_bits": 4, "type": "float"}
    with pytest.raises(EngineInputError) as err:
        estimate(EngineInput(hf_config=cfg, gpu="B200", vllm_version="0.32.0"))
    assert err.value.field == "kv_cache_dtype" and "nvfp4" in err.value.message


def test_the_backend_check_sees_the_resolved_kv_dtype(db, monkeypatch):
    """vLLM picks the attention backend for cache_config.cache_dtype, which auto has already become fp8_e4m3."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from calculator.plan import make_plan
    from calculator.request import parse_request

    plan = make_plan(parse_request({"model": "nvidia/Qwen3-32B-NVFP4", "gpu": "B200"}))
    assert plan.memory.resolved["kv_cache_dtype"] == "fp8_e4m3" and plan.compat.kv_cache_dtype == "fp8_e4m3"
    plain = make_plan(parse_request({"model": "Qwen/Qwen3-32B", "gpu": "B200"}))
    assert plain.compat.kv_cache_dtype == "auto"
