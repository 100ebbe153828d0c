"""Bad input gets a clear error naming the field."""
from __future__ import annotations

import pytest

from calculator.engine import EngineInput, EngineInputError, estimate
from tests.conftest import load_config


def run(**kw):
    cfg = kw.pop("hf_config", None) or load_config("Qwen__Qwen3-8B.json")
    return estimate(EngineInput(hf_config=cfg, **kw))


@pytest.mark.parametrize("kw,field", [
    ({"gpu": "H900"}, "gpu"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": 0.0}, "gpu_memory_utilization"),
    ({"max_model_len": -5}, "max_model_len"),
    ({"tensor_parallel_size": 0}, "tensor_parallel_size"),
    ({"tensor_parallel_size": 3}, "tensor_parallel_size"),
    ({"block_size": 7}, "block_size"),
    ({"vllm_version": "latest"}, "vllm_version"),
    ({"quantization": "int3-magic"}, "quantization"),
])
def test_bad_flag_names_the_field(kw, field):
    with pytest.raises(EngineInputError) as err:
        run(**kw)
    assert err.value.field == field


def test_zero_heads():
    cfg = {**load_config("Qwen__Qwen3-8B.json"), "num_attention_heads": 0}
    with pytest.raises(EngineInputError) as err:
        run(hf_config=cfg)
    assert err.value.field == "config.num_attention_heads"


def test_missing_required_field():
    cfg = load_config("Qwen__Qwen3-8B.json")
    del cfg["hidden_size"]
    with pytest.raises(EngineInputError) as err:
        run(hf_config=cfg)
    assert err.value.field == "config.hidden_size" and "missing" in err.value.message


def test_mtp_on_a_model_without_mtp_layers():
    with pytest.raises(EngineInputError) as err:
        run(speculative_config={"method": "mtp", "num_speculative_tokens": 2})
    assert err.value.field == "speculative_config"


def test_does_not_fit_gives_vllm_reason():
    # Llama-3.1-70B in bf16 on one H100: 131 GiB of weights cannot fit at all. (The changes that would make it
    # work are searched by calculator.verdict.suggest, tests/test_verdict.py.)
    res = run(hf_config=load_config("meta-llama__Llama-3.1-70B-Instruct.json"), gpu="H100", max_model_len=8192)
    # 70.6 G parameters x 2 B = 131.4 GiB > the H100's 79.2 GiB: vLLM dies loading them (load_model), before any
    # KV sizing, so the reason is the out-of-memory error, not "No available memory for the cache blocks"
    assert not res.fits and res.reason.startswith("CUDA out of memory while loading the weights: they take ")
    assert res.weights_gib > 79.2 and f"{res.weights_gib:.2f} GiB per GPU" in res.reason
    # weights that fit the device but not the --gpu-memory-utilization budget keep vLLM's own message
    res = run(hf_config=load_config("meta-llama__Llama-3.1-70B-Instruct.json"), gpu="H100", max_model_len=8192,
              tensor_parallel_size=2, gpu_memory_utilization=0.5)
    assert not res.fits and res.reason.startswith("No available memory for the cache blocks")


def test_long_context_does_not_fit_and_estimated_max_len_does():
    # Qwen3-8B at its full 40,960 tokens on a 24 GiB RTX 4090 with u=0.9: KV budget ~3.7 GiB < 5.6 GiB needed
    res = run(gpu="RTX4090", max_model_len=40960, gpu_memory_utilization=0.9)
    assert not res.fits
    assert "estimated maximum model length" in res.reason
    assert 0 < res.estimated_max_model_len < 40960
    again = run(gpu="RTX4090", max_model_len=res.estimated_max_model_len, gpu_memory_utilization=0.9)
    assert again.fits


def test_max_model_len_beyond_the_derived_length_is_refused_as_vllm_does():
    # Qwen3-8B: max_position_embeddings 40960, no rope scaling -> derived max_model_len 40960
    assert run(max_model_len=40960).max_model_len == 40960
    with pytest.raises(EngineInputError) as err:
        run(max_model_len=40961)
    assert err.value.field == "max_model_len" and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in err.value.message


def test_default_max_model_len_is_the_derived_length():
    # gemma-7b: max_position_embeddings 8192
    assert run(hf_config=load_config("google__gemma-7b.json")).max_model_len == 8192


def test_a_prefill_budget_below_max_num_seqs_is_refused_as_vllm_does():
    """vLLM's SchedulerConfig refuses max_num_batched_tokens < max_num_seqs before anything loads (vllm/config/
    scheduler.py verify_max_model_len, 0.32.0): 16 tokens against the default 256 sequences; 256 against 256 starts."""
    with pytest.raises(EngineInputError) as err:
        run(gpu="A100-80GB", max_model_len=8192, max_num_batched_tokens=16)
    assert err.value.field == "max_num_batched_tokens"
    assert "must be greater than or equal to max_num_seqs (256)" in err.value.message
    assert run(gpu="A100-80GB", max_model_len=8192, max_num_batched_tokens=256).resolved["max_num_seqs"] == 256


def test_a_context_past_the_derived_length_is_refused_and_says_how_to_raise_it():
    # Qwen3-8B: max_position_embeddings 40,960; vLLM 0.32 refuses a longer --max-model-len without
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN (vllm/config/model.py _get_and_verify_max_len), and YaRN leaves it unscaled
    with pytest.raises(EngineInputError) as err:
        run(hf_config=load_config("Qwen__Qwen3-8B.json"), gpu="H100", max_model_len=131072)
    assert err.value.field == "max_model_len"
    assert "greater than the model's derived maximum length 40,960" in str(err.value)
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in str(err.value) and "hf_overrides (--hf-overrides)" in str(err.value)
