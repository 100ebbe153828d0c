"""Data-parallel replicas in the speed model: the clients spread over the replicas (each its own scheduler and KV
cache), so one replica runs ceil(C / dp) of them and the output tok/s is that of the busy replicas together."""
from __future__ import annotations

import pytest

from calculator.engine import EngineInput, perf
from tests.conftest import load_config


def _speed(cfg: str, dp: int, concurrency: int):
    inp = EngineInput(hf_config=load_config(cfg), gpu="H100", max_model_len=8192, data_parallel_size=dp)
    return perf.estimate_speed(inp, prompt_len=1024, output_len=128, concurrency=concurrency)


def test_two_replicas_of_a_dense_model_serve_half_the_clients_each():
    two, one = _speed("Qwen__Qwen3-8B.json", 2, 64), _speed("Qwen__Qwen3-8B.json", 1, 32)
    assert two.itl_ms == one.itl_ms and two.ttft_ms == one.ttft_ms
    assert two.output_tokens_per_s == pytest.approx(2 * one.output_tokens_per_s, abs=0.2)
    assert "each at 32 clients" in two.sources["data_parallel"]
    assert not any("step together" in w for w in two.warnings)
    # 3 clients on 4 replicas: 3 busy, one client each
    three = _speed("Qwen__Qwen3-8B.json", 4, 3)
    assert three.output_tokens_per_s == pytest.approx(3 * _speed("Qwen__Qwen3-8B.json", 1, 1).output_tokens_per_s,
                                                      abs=0.2)
    # 9 clients on 8 replicas: one replica serves 2, seven serve 1 (the sum of each replica's own output)
    nine = _speed("Qwen__Qwen3-8B.json", 8, 9)
    assert nine.output_tokens_per_s == pytest.approx(_speed("Qwen__Qwen3-8B.json", 1, 2).output_tokens_per_s
                                                     + 7 * _speed("Qwen__Qwen3-8B.json", 1, 1).output_tokens_per_s,
                                                     abs=0.3)
    assert nine.itl_ms == _speed("Qwen__Qwen3-8B.json", 1, 2).itl_ms


def test_vllm_dp_with_moe_layers_says_the_lockstep_is_not_modelled():
    r = _speed("Qwen__Qwen3-30B-A3B.json", 2, 64)
    assert any("step together" in w and "not modelled" in w for w in r.warnings)
