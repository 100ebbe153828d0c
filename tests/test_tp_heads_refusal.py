"""A tensor parallel size vLLM refuses at start-up is refused with vLLM's own sentence and the sizes that work."""
from __future__ import annotations

import pytest

from calculator.engine import EngineInput, estimate
from calculator.request import InputError

from .conftest import load_config


def test_a_tensor_parallel_size_that_does_not_split_the_heads_names_vllms_error_and_the_sizes_that_do():
    # Llama-3.1-8B: 32 attention heads, 8 KV heads. 3 does not divide 32 (vllm/config/model.py:1544-1550 in 0.32.0);
    # 1, 2, 4, 8 divide both, 16 divides 32 and replicates the 8 KV heads twice (tp % num_kv_heads == 0)
    cfg = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (32, 8)
    with pytest.raises(InputError) as err:
        estimate(EngineInput(hf_config=cfg, gpu="H100", tensor_parallel_size=3))
    assert "Total number of attention heads (32) must be divisible by tensor parallel size (3)." in err.value.message
    assert err.value.message.endswith("the sizes up to 16 that split this model: 1, 2, 4, 8, 16")
