"""Grouping and capacity against the numbers vLLM logged (shared cases), and weights/KV for whole cases."""
from __future__ import annotations

import subprocess
import sys

import pytest

from calculator.engine import EngineInput, estimate
from calculator.engine.kv import KVContext, capacity, group_specs
from calculator.engine.memory import build_specs
from calculator.engine.arch import parse_config
from calculator.crosscheck.groundtruth import load_cases
from tests.conftest import ROOT, load_config


def groups_for(config_file: str, block_size: int = 16):
    arch = parse_config(load_config(config_file))
    specs = build_specs(arch, tp=1, pp=1, block_size=block_size, kv_bytes=2, model_bytes=2, num_spec=0)
    return group_specs(specs)


def test_gemma2_27b_log_llmd006_blocks_to_tokens_and_concurrency():
    # vLLM 0.19 log: 7,335 blocks -> "GPU KV cache size: 58,672 tokens", "Maximum concurrency for 8,192 tokens
    # per request: 7.16x". 46 layers = 23 sliding + 23 full -> 2 groups of 23 layers.
    groups = groups_for("google__gemma-2-27b-it.json")
    assert len(groups) == 2 and all(len(g.layer_names) == 23 for g in groups)
    per_block = groups[0].bytes_per_block
    assert per_block == 23 * 16 * 16 * 128 * 2 * 2  # 23 layers x (16 tokens x 16 KV heads x 128 x K,V x 2 B)
    ctx = KVContext(max_model_len=8192, max_in_flight_tokens=8192)
    cap = capacity(groups, 7335 * per_block, ctx, 16, legacy_token_formula=True)
    assert cap.kv_cache_tokens == 58672
    assert round(cap.max_concurrency, 2) == 7.16


def test_gemma3_4b_log_llmd011_seven_groups():
    # 34 layers: 5 global + 29 sliding -> group size 5 -> 1 full group + cdiv(29, 5) = 6 sliding groups.
    # Log: 204,817 blocks, 468,144 tokens, 57.05x at 8,192 tokens.
    groups = groups_for("google__gemma-3-4b-it.json")
    assert len(groups) == 7
    ctx = KVContext(max_model_len=8192, max_in_flight_tokens=8192)
    cap = capacity(groups, 204817 * groups[0].bytes_per_block, ctx, 16, legacy_token_formula=True)
    assert cap.kv_cache_tokens == 468144
    assert round(cap.max_concurrency, 2) == 57.05


def test_new_token_formula_is_concurrency_times_len():
    groups = groups_for("google__gemma-3-4b-it.json")
    ctx = KVContext(max_model_len=8192, max_in_flight_tokens=16384)
    cap = capacity(groups, 204817 * groups[0].bytes_per_block, ctx, 16)
    # sliding groups need cdiv(min(1023 + 16384, 8192), 16) + 1 = 513 blocks, the full group 512
    assert cap.blocks_per_request == 512 + 6 * 513
    assert cap.kv_cache_tokens == int(204817 / (512 + 6 * 513) * 8192)


def test_sliding_window_saves_blocks_when_context_exceeds_window_plus_batch():
    groups = groups_for("google__gemma-3-4b-it.json")
    ctx = KVContext(max_model_len=131072, max_in_flight_tokens=2048)
    cap = capacity(groups, 10**10, ctx, 16)
    assert cap.blocks_per_request == 131072 // 16 + 6 * (-(-(1023 + 2048) // 16) + 1)


CASES = [c for c in load_cases() if c.engine_input is not None]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_public_log_case_weights_and_kv_tokens(case):
    """Every runnable public log: weights within 2% and KV cache tokens within 10% (the issue's "no case
    off by more than 10%"); the per-field accuracy table is benchmarks/memory_cases.py."""
    res = estimate(case.engine_input)
    assert res.weights_gib == pytest.approx(case.raw["weights_gib"], rel=0.02)
    assert res.kv_cache_tokens == pytest.approx(case.raw["kv_cache_tokens"], rel=0.10)
    assert res.max_concurrency == pytest.approx(case.raw["max_concurrency"], rel=0.10)


def test_llama_8b_h100_case_is_close():
    # llmd-020: vLLM 0.19.0, H100, u=0.95, max_model_len 8192: weights 14.99 GiB, 476,016 tokens
    res = estimate(EngineInput(hf_config=load_config("meta-llama__Llama-3.1-8B-Instruct.json"), gpu="H100",
                               max_model_len=8192, gpu_memory_utilization=0.95, vllm_version="0.19.0"))
    assert res.weights_gib == 14.99
    assert abs(res.kv_cache_tokens - 476016) / 476016 < 0.005


def test_engine_imports_without_django():
    code = ("import sys, calculator.engine, calculator.crosscheck.groundtruth; "
            "assert not any(m == 'django' or m.startswith('django.') for m in sys.modules), 'django imported'")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={"PATH": "/usr/bin:/bin"})
