"""KV bytes per token, computed by hand from each architecture family's real config.json.

Formula (vLLM ``AttentionSpec.page_size_bytes`` / block_size): layers x 2 (K and V) x KV heads per GPU x
head size x dtype bytes; MLA: layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes; Mamba state is
per request, not per token.
"""
from __future__ import annotations

import pytest

from calculator.engine import EngineInput, estimate
from tests.conftest import load_config


def kv(config_file: str, **kw):
    cfg = load_config(config_file)
    kw.setdefault("max_model_len", 4096)
    return estimate(EngineInput(hf_config=cfg, **kw))


def by_kind(res, kind, draft=False):
    return next(e for e in res.kv_by_layer_type if e.kind == kind and e.draft == draft)


def test_llama_gqa_bf16():
    # Llama-3.1-8B: 32 layers, 8 KV heads, head_dim 4096/32 = 128, bf16
    assert kv("meta-llama__Llama-3.1-8B-Instruct.json").kv_bytes_per_token == 32 * 2 * 8 * 128 * 2 == 131072


def test_llama_fp8_kv_cache_halves_it():
    res = kv("meta-llama__Llama-3.1-8B-Instruct.json", kv_cache_dtype="fp8")
    assert res.kv_bytes_per_token == 32 * 2 * 8 * 128 * 1


def test_tensor_parallel_splits_kv_heads_then_replicates():
    # 8 KV heads: tp=2 -> 4 per GPU; tp=8 -> 1; tp=16 -> still 1 (heads replicated, vLLM requires tp % 8 == 0)
    assert kv("meta-llama__Llama-3.1-70B-Instruct.json", tensor_parallel_size=2).kv_bytes_per_token == 80 * 2 * 4 * 128 * 2
    assert kv("meta-llama__Llama-3.1-70B-Instruct.json", tensor_parallel_size=8).kv_bytes_per_token == 80 * 2 * 1 * 128 * 2
    assert kv("meta-llama__Llama-3.1-70B-Instruct.json", tensor_parallel_size=16,
              gpu="H200").kv_bytes_per_token == 80 * 2 * 1 * 128 * 2


def test_pipeline_parallel_holds_half_the_layers():
    res = kv("meta-llama__Llama-3.1-8B-Instruct.json", pipeline_parallel_size=2)
    assert res.kv_bytes_per_token == 16 * 2 * 8 * 128 * 2


def test_explicit_head_dim_qwen3():
    # Qwen3-8B: head_dim 128 given explicitly (hidden 4096 / 32 heads would also be 128), 36 layers, 8 KV
    assert kv("Qwen__Qwen3-8B.json").kv_bytes_per_token == 36 * 2 * 8 * 128 * 2


def test_explicit_head_dim_wider_than_hidden_gemma7b():
    # gemma-7b: MHA, 16 heads x head_dim 256 (= 4096 > hidden 3072), 28 layers
    assert kv("google__gemma-7b.json").kv_bytes_per_token == 28 * 2 * 16 * 256 * 2


def test_mha_codellama():
    assert kv("codellama__CodeLlama-7b-hf.json").kv_bytes_per_token == 32 * 2 * 32 * 128 * 2


def test_gemma2_sliding_and_global_layers():
    res = kv("google__gemma-2-9b-it.json")
    per_layer = 2 * 8 * 256 * 2  # 8 KV heads, head_dim 256
    assert by_kind(res, "sliding_window").num_layers == 21  # even layers slide
    assert by_kind(res, "full_attention").num_layers == 21
    assert res.kv_bytes_per_token == 42 * per_layer


def test_gemma3_five_to_one_pattern_from_sparse_config():
    # gemma-3-27b: 62 layers, global when (i+1) % 6 == 0 -> 10 global, 52 sliding; 16 KV heads x 128
    res = kv("google__gemma-3-27b-it.json")
    assert by_kind(res, "full_attention").num_layers == 10
    assert by_kind(res, "sliding_window").num_layers == 52
    assert res.kv_bytes_per_token == 62 * 2 * 16 * 128 * 2


def test_gpt_oss_alternating_window():
    res = kv("openai__gpt-oss-20b.json")
    assert by_kind(res, "sliding_window").num_layers == 12
    assert res.kv_bytes_per_token == 24 * 2 * 8 * 64 * 2


def test_mixtral_moe_attention():
    assert kv("mistralai__Mixtral-8x7B-Instruct-v0.1.json").kv_bytes_per_token == 32 * 2 * 8 * 128 * 2


def test_mla_deepseek_v3_latent_cache():
    # 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B = 70,272 B, the same on every TP rank
    assert kv("deepseek-ai__DeepSeek-V3.json", gpu="H200", tensor_parallel_size=8).kv_bytes_per_token == 61 * 576 * 2
    assert kv("deepseek-ai__DeepSeek-V3.json", gpu="H200", tensor_parallel_size=8,
              kv_cache_dtype="fp8").kv_bytes_per_token == 61 * 576


def test_mla_mtp_layer_adds_one_layer_of_cache():
    res = kv("deepseek-ai__DeepSeek-V3.json", gpu="H200", tensor_parallel_size=8,
             speculative_config={"method": "mtp", "num_speculative_tokens": 1})
    assert res.kv_bytes_per_token == 62 * 576 * 2
    assert res.draft_kv_bytes_per_token == 576 * 2


def test_qwen3_next_gated_delta_net_state():
    # 48 layers, full attention every 4th: 12 x (2 x 2 KV heads x 256 x 2 B)
    # GDN state per layer: conv (2*16*128 + 32*128) x (4 - 1) + ssm 32 x 128 x 128, in bf16
    res = kv("Qwen__Qwen3-Next-80B-A3B-Instruct.json", gpu="H200")
    assert res.kv_bytes_per_token == 12 * 2 * 2 * 256 * 2
    mamba = by_kind(res, "mamba")
    assert mamba.num_layers == 36
    per_layer_state = ((2 * 16 * 128 + 32 * 128) * 3 + 32 * 128 * 128) * 2
    assert mamba.state_bytes_per_request == 36 * per_layer_state


def test_nemotron_h_mamba2_state_and_attention_layers():
    cfg = load_config("nvidia__Nemotron-H-56B-Base-8K.json")
    n_attn = cfg["hybrid_override_pattern"].count("*")
    n_mamba = cfg["hybrid_override_pattern"].count("M")
    res = kv("nvidia__Nemotron-H-56B-Base-8K.json", gpu="H200", tensor_parallel_size=2)
    assert res.kv_bytes_per_token == n_attn * 2 * (8 // 2) * 128 * 2
    d_inner, groups, state, conv_k, heads = 256 * 64, 8, 256, 4, 256
    # conv state in the model dtype (bf16); Nemotron-H keeps the SSM state in float32
    # (vllm/model_executor/models/config.py NemotronHForCausalLMConfig, 0.32)
    per_layer = (d_inner + 2 * groups * state) // 2 * (conv_k - 1) * 2 + heads // 2 * 64 * state * 4
    assert by_kind(res, "mamba").state_bytes_per_request == n_mamba * per_layer


def test_mllama_cross_attention_layers_are_separate():
    res = kv("meta-llama__Llama-3.2-11B-Vision.json")
    assert by_kind(res, "cross_attention").num_layers == 8
    assert by_kind(res, "full_attention").num_layers == 32
    assert res.kv_bytes_per_token == 40 * 2 * 8 * 128 * 2


def test_eagle_draft_layer_joins_the_pool():
    draft = load_config("yuhuili__EAGLE-LLaMA3-Instruct-8B.json")
    res = kv("meta-llama__Llama-3.1-8B-Instruct.json", draft_hf_config=draft,
             speculative_config={"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B",
                                 "num_speculative_tokens": 3})
    layers = draft["num_hidden_layers"]
    assert res.draft_kv_bytes_per_token == layers * 2 * draft["num_key_value_heads"] * 128 * 2
    assert res.kv_bytes_per_token == 131072 + res.draft_kv_bytes_per_token


@pytest.mark.parametrize("method", ["ngram", "suffix"])
def test_ngram_and_suffix_add_no_kv(method):
    res = kv("meta-llama__Llama-3.1-8B-Instruct.json",
             speculative_config={"method": method, "num_speculative_tokens": 4})
    assert res.kv_bytes_per_token == 131072 and res.draft_weights_gib == 0


def test_speed_model_scales_kda_state_to_every_stage():
    """Kimi-Linear-48B-A3B under PP 2: vLLM's get_pp_indices gives 27 layers as 14 + 13, so the first stage's
    KV specs hold KDA layers 1-3, 5-7, 9-11, 13, 14 (11 of the 20 in linear_attn_config.kda_layers). A token
    step reads every stage's state, so the speed model scales the first stage's state to all 20 KDA layers.
    One KDA layer's state, TP 1, bf16, vLLM 0.32 (mamba_utils.py:304-327): conv 3 x 32 x 128 channels over
    k - 1 = 3 positions x 2 B = 73,728 B + recurrent 32 x 128 x 128 x 4 B = 2,097,152 B."""
    import json
    from pathlib import Path

    from calculator.engine.arch import parse_config
    from calculator.engine.perf import model_cost, plan_from_engine

    cfg = json.loads((Path(__file__).parent / "data" / "moonshotai__Kimi-Linear-48B-A3B-Instruct.json").read_text())
    inp = EngineInput(hf_config=cfg, gpu="H100", pipeline_parallel_size=2, dtype="bfloat16", vllm_version="0.32.0",
                      max_model_len=8192, kv_cache_memory_bytes=4 * 2**30)
    est = estimate(inp)
    per_layer = 3 * 32 * 128 * 3 * 2 + 32 * 128 * 128 * 4
    assert by_kind(est, "mamba").state_bytes_per_request == 11 * per_layer  # the first stage only
    cost = model_cost(parse_config(cfg), plan_from_engine(inp, est), dtype="bfloat16", quant=None, tp=1, pp=2)
    assert cost.state_bytes == pytest.approx(20 * per_layer)


# --- an MLA target with a non-MLA EAGLE-3 head ---------------------------------------------------------------

def test_mla_target_with_gqa_eagle3_head_shares_one_group():
    """zai-org/GLM-4.7-Flash (47 MLA layers, kv_lora_rank 512 + qk_rope_head_dim 64) with
    thoughtworks/GLM-4.7-Flash-Eagle3 (one Llama layer, 4 KV heads x 128), bf16, --block-size 64, vLLM 0.32.
    MLA page 64 x 576 x 2 B = 73,728 B; head page 64 x 4 x (128 + 128) x 2 B = 131,072 B, not a multiple, so
    page unification would fail, but MLA registers FullAttentionSpec as its uniform base
    (single_type_kv_cache_manager.py:2685-2687) and both have block 64: one UniformTypeKVCacheSpecs group
    (kv_cache_utils.py:2189) whose block is 47 x 73,728 + 131,072 = 3,596,288 B.
    10 GiB // 3,596,288 = 2,985 blocks; a 32,768-token request takes 32,768 / 64 = 512 of them."""
    import json
    from pathlib import Path

    catalog = Path(__file__).resolve().parents[1] / "calculator" / "data" / "model_configs"  # the offline catalog
    target, head = (json.loads((catalog / f).read_text()) for f in
                    ("zai-org__GLM-4.7-Flash.json", "thoughtworks__GLM-4.7-Flash-Eagle3.json"))
    spec = {"method": "eagle3", "model": "thoughtworks/GLM-4.7-Flash-Eagle3", "num_speculative_tokens": 3}
    res = estimate(EngineInput(hf_config=target, draft_hf_config=head, speculative_config=spec, gpu="H100",
                               vllm_version="0.32.0", dtype="bfloat16", block_size=64, max_model_len=32768,
                               kv_cache_memory_bytes=10 * 2**30))
    assert by_kind(res, "mla").page_size_bytes == 64 * 576 * 2
    assert by_kind(res, "full_attention", draft=True).page_size_bytes == 64 * 4 * 256 * 2
    blocks = 10 * 2**30 // (47 * 73_728 + 131_072)
    assert res.num_gpu_blocks == blocks == 2985
    assert res.kv_cache_tokens == int(blocks / 512 * 32768) == 191_040


def _mla_and_draft(draft_cls, **draft_kw):
    from calculator.engine.kv import MLAAttentionSpec

    specs = {f"layers.{i}": MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=80, head_size_v=0,
                                             dtype_bytes=4) for i in range(4)}
    specs["draft.layers.0"] = draft_cls(block_size=16, num_kv_heads=2, head_size=32, head_size_v=32, dtype_bytes=4,
                                        draft=True, **draft_kw)
    return specs


def test_mla_with_non_mla_draft_by_release():
    """The tiny DeepSeek-V3 + EAGLE-3 of the cross-check (float32, block 16): MLA pages 16 x 80 x 4 = 5,120 B, the
    head's 16 x 2 x 64 x 4 = 8,192 B. From 0.11.0 one group (UniformTypeKVCacheSpecs, kv_cache_interface.py:287-299
    in 0.11.0); 0.10.2 has no such group and raises a bare NotImplementedError (kv_cache_utils.py:1133)."""
    from calculator.engine.errors import EngineInputError
    from calculator.engine.kv import FullAttentionSpec, group_specs

    specs = _mla_and_draft(FullAttentionSpec)
    for version in ((0, 11, 0), (0, 32, 0), None):
        groups = group_specs(specs, version=version)
        assert len(groups) == 1 and groups[0].bytes_per_block == 4 * 5120 + 8192
    with pytest.raises(EngineInputError) as err:
        group_specs(specs, version=(0, 10, 2))
    assert err.value.field == "speculative_config" and "NotImplementedError" in str(err.value)


def test_mla_with_sliding_window_draft_is_refused_with_vllms_reason():
    """A sliding-window layer is not full attention: no common group, and 8,192 is not a multiple of 5,120, which
    an MLA page may not be padded to (unify_kv_cache_spec_page_size, kv_cache_utils.py:1347 in 0.32)."""
    from calculator.engine.errors import EngineInputError
    from calculator.engine.kv import SlidingWindowSpec, group_specs

    with pytest.raises(EngineInputError) as err:
        group_specs(_mla_and_draft(SlidingWindowSpec, sliding_window=64))
    assert "Padding is only supported for non-MLA attention layers" in str(err.value)
    assert "not modelled" in str(err.value)  # vLLM 0.32's full-allocation fallback for MLA + sliding window


@pytest.mark.parametrize("version", [(0, 9, 2), (0, 10, 1), (0, 11, 2), None])
def test_a_draft_layer_with_the_targets_spec_joins_the_targets_group(version):
    """An EAGLE-3 head whose layer has the target's KV spec (Llama-3.1-8B: 8 KV heads x 128, bf16, block 16) is one
    group with the target in every release: 0.9 / 0.10 merge equal specs (is_kv_cache_type_uniform,
    vllm/v1/core/kv_cache_utils.py:747-764 in 0.10.2) and size one pool of available // (33 layers x 32 KiB) blocks.
    The draft mark (our accounting) must not split them: it made 0.10.1 print 889,161 blocks of 16 (one layer's page
    each, 33 groups) for 431,104 tokens."""
    from calculator.engine.kv import FullAttentionSpec, group_specs

    target = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128, dtype_bytes=2)
    specs = {f"model.layers.{i}.self_attn.attn": target for i in range(32)}
    specs["draft.layers.0.attn"] = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, head_size_v=128,
                                                     dtype_bytes=2, draft=True)
    groups = group_specs(specs, version=version)
    assert len(groups) == 1 and len(groups[0].layer_names) == 33
    assert groups[0].bytes_per_block == 33 * 16 * 8 * 256 * 2  # 33 layers x 16 tokens x 8 heads x (K+V) x 2 B


def test_vllm_0_10_sizes_one_pool_for_llama_8b_with_its_eagle3_head():
    """Llama-3.1-8B + EAGLE-3 on an H100 with vLLM 0.10.1: one group of 33 layers, 135,168 B per token, so the blocks
    are the KV budget // (16 x 135,168 B) and the log's tokens are blocks // 1 group x 16 (kv_cache_utils.py:995 in
    0.10.0's num_blocks // num_groups x block_size)."""
    inp = EngineInput(hf_config=load_config("meta-llama__Llama-3.1-8B-Instruct.json"),
                      draft_hf_config=load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json"), gpu="H100",
                      vllm_version="0.10.1", speculative_config={"method": "eagle3", "num_speculative_tokens": 3,
                                                                 "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"})
    r = estimate(inp)
    # the target's 32 layers and the head's one, 8 KV heads x (128 + 128) x 2 B each (the total includes the draft's)
    assert r.kv_bytes_per_token == 32 * 8 * 256 * 2 + 8 * 256 * 2 == 135_168 and r.draft_kv_bytes_per_token == 4096
    # the GiB figure is rounded to 2 places (+-0.005 GiB = +-2.5 blocks of 2.06 MiB)
    assert abs(r.num_gpu_blocks - r.available_kv_cache_gib * 2**30 / (16 * 135_168)) < 3
    assert r.kv_cache_tokens == r.num_gpu_blocks * 16
