"""Pipeline parallelism as vLLM lays it out: its stage split (and VLLM_PP_LAYER_PARTITION), each stage's own
KV pool, and the number of blocks set by the tightest stage. Expected values by hand from real configs and
from vLLM's own ``get_pp_indices``."""
from __future__ import annotations

import importlib.util

import pytest

from calculator.engine import EngineInput, EngineInputError, estimate
from calculator.engine.memory import pp_partition
from tests.conftest import load_config

HAVE_VLLM = importlib.util.find_spec("vllm") is not None


@pytest.mark.parametrize("layers,pp,expected", [
    (61, 2, [31, 30]),  # DeepSeek-V3: the remainder goes to the stage before the last
    (80, 3, [27, 27, 26]),  # Llama-3.1-70B: 26 each, +1 to partitions[-2] and [-3]
    (32, 2, [16, 16]),
    (94, 4, [23, 24, 24, 23]),  # Qwen3-235B: 23 each r 2 -> partitions[-2] and [-3] get one more
])
def test_the_stage_split_by_hand(layers, pp, expected):
    assert pp_partition(layers, pp) == expected


@pytest.mark.skipif(not HAVE_VLLM, reason="vLLM's own get_pp_indices comes with the worker extra")
@pytest.mark.parametrize("layers,pp", [(61, 2), (80, 3), (94, 4), (62, 8), (27, 4), (36, 5)])
def test_the_stage_split_equals_vllms(layers, pp):
    from vllm.distributed.utils import get_pp_indices

    spans = [get_pp_indices(layers, rank, pp) for rank in range(pp)]
    assert pp_partition(layers, pp) == [end - start for start, end in spans]


def test_the_first_stage_caches_its_own_layers():
    """Llama-3.1-70B at PP=3 on H100: the first stage holds 27 layers, so its KV bytes per token are
    27 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 110,592 B (not 80 // 3 = 26 layers)."""
    cfg = load_config("meta-llama__Llama-3.1-70B-Instruct.json")
    res = estimate(EngineInput(hf_config=cfg, gpu="H100", pipeline_parallel_size=3, max_model_len=8192))
    assert res.kv_bytes_per_token == 27 * 2 * 8 * 128 * 2 == 110592
    assert res.resolved["pp_layer_partition"] == "27,27,26"


def test_the_partition_override_and_its_refusals():
    cfg = load_config("meta-llama__Llama-3.1-70B-Instruct.json")
    res = estimate(EngineInput(hf_config=cfg, gpu="H100", pipeline_parallel_size=3, max_model_len=8192,
                               pp_layer_partition="20,30,30"))
    assert res.kv_bytes_per_token == 20 * 2 * 8 * 128 * 2
    for bad in ("40,40", "30,30,30", "a,b,c"):
        with pytest.raises(EngineInputError) as err:
            estimate(EngineInput(hf_config=cfg, gpu="H100", pipeline_parallel_size=3, max_model_len=8192,
                                 pp_layer_partition=bad))
        assert err.value.field == "pp_layer_partition"


def test_a_heavier_stage_sets_the_blocks_for_all():
    """With 60 of Llama-3.1-70B's 80 layers on the second of two H100 stages, that stage has the least room
    (more weights and twice the KV bytes per block), so the first stage's pool is cut to its block count."""
    cfg = load_config("meta-llama__Llama-3.1-70B-Instruct.json")
    even = estimate(EngineInput(hf_config=cfg, gpu="H100", pipeline_parallel_size=2, max_model_len=8192))
    skewed = estimate(EngineInput(hf_config=cfg, gpu="H100", pipeline_parallel_size=2, max_model_len=8192,
                                  pp_layer_partition="20,60"))
    assert any("pipeline stage 1" in w for w in skewed.warnings)
    # stage 1 by hand: 60/80 of the layer weights + lm_head; its block = 60 x 2 x 8 x 128 x 2 B x 16 tokens
    stage1_block = 60 * 2 * 8 * 128 * 2 * 16
    assert skewed.num_gpu_blocks < even.num_gpu_blocks
    assert skewed.num_gpu_blocks * stage1_block <= 80 * 2**30


@pytest.mark.parametrize("extra,what", [
    ({"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64, "architectures": ["GlmMoeDsaForCausalLM"]},
     "DeepSeek sparse attention"),
    ({"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64, "index_topk_freq": 4}, "IndexCache"),
    ({"global_head_dim": 512, "num_global_key_value_heads": 4}, "global layers with their own head size"),
    ({"linear_attn_config": {"kda_layers": [1, 2]}}, "Kimi delta attention"),
])
def test_a_layer_shape_the_engine_does_not_size_is_refused_by_name(extra, what):
    """Sparse MLA, per-layer global heads and KDA layers are sized only in the families whose vLLM model file
    the engine follows (DeepSeek-V3/V3.2, Gemma 4, Kimi Linear; tests/test_engine_shapes.py); the same keys in
    another family, or DeepSeek's IndexCache layer pattern, are refused with what is not modelled."""
    cfg = {**load_config("deepseek-ai__DeepSeek-V3.json"), **extra}
    with pytest.raises(EngineInputError) as err:
        estimate(EngineInput(hf_config=cfg, gpu="H200", tensor_parallel_size=8))
    assert err.value.field == "model" and "not modelled" in err.value.message and what in err.value.message


def test_data_parallel_splits_the_experts_over_tp_x_dp_ranks():
    """Qwen3-30B-A3B (48 layers, 128 experts of 3 x 2,048 x 768 weights, bf16) at TP 1: with DP 4 the MoE
    layers span 4 ranks (flatten_tp_across_dp; with --enable-expert-parallel each holds 32 whole experts), so
    a GPU stores 3/4 less of the expert weights: 48 x 128 x 3 x 2048 x 768 x 2 B x 3/4 = 43,486,543,872 B
    fewer. Attention and KV stay as at TP 1."""
    cfg = load_config("Qwen__Qwen3-30B-A3B.json")
    one = estimate(EngineInput(hf_config=cfg, gpu="H100", max_model_len=8192))
    for ep in (False, True):
        four = estimate(EngineInput(hf_config=cfg, gpu="H100", max_model_len=8192, data_parallel_size=4,
                                    enable_expert_parallel=ep))
        experts = cfg["num_hidden_layers"] * cfg["num_experts"] * 3 * cfg["hidden_size"] * cfg["moe_intermediate_size"] * 2
        assert experts * 3 // 4 == 43486543872
        assert (one.weights_gib - four.weights_gib) == pytest.approx(experts * 3 / 4 / 2**30, abs=0.011)
        assert four.kv_bytes_per_token == one.kv_bytes_per_token


def test_expert_parallel_needs_experts():
    with pytest.raises(EngineInputError) as err:
        estimate(EngineInput(hf_config=load_config("meta-llama__Llama-3.1-8B-Instruct.json"), gpu="H100",
                             max_model_len=8192, enable_expert_parallel=True, data_parallel_size=2))
    assert err.value.field == "enable_expert_parallel"
