"""vLLM weight bytes per GPU for shapes the parameter count alone got wrong (calculator/engine/weights.py, arch.py):
ModelOpt / compressed-tensors exclude lists, Nemotron-H MoE layers, MLA's replicated q_a / kv_a projections,
Qwen3.5's gated query and nested partial_rotary_factor, Gemma 4's V slot / global RoPE cache / vision tower, and
the EAGLE-3 head as vllm/model_executor/models/llama_eagle3.py builds it.

Every expected value is worked out here by hand from the real config (keys quoted in each test) and the rule of
the vLLM source named beside it; two are public references: the vLLM log of nvidia/Gemma-4-31B-IT-NVFP4 (shared
case gh-027, 31.18 GiB) and transformers 5.19's meta-device parameter count of Nemotron-3-Nano-30B-A3B
(calculator/data/catalog_weights.json, 31,577,937,344). Configs are the offline catalog's
(calculator/data/model_configs, SOURCES.md rows 68, 70, 71, 92 and the Qwen3.5 / DeepSeek-V3 rows).
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from calculator.engine import EngineInput, EngineInputError, estimate
from calculator.engine.arch import parse_config
from calculator.engine.weights import (QuantScheme, eagle3_draft_weights, is_excluded, resolve_quant,
                                       weights_per_gpu)

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "calculator" / "data" / "model_configs"
GiB = 2**30
NVFP4 = 0.5 + 1 / 16  # bytes per weight: 4-bit value + one FP8 scale per 16 weights


def catalog(name: str) -> dict:
    return json.loads((CATALOG / name).read_text())


def quant_file(name: str) -> dict:
    return json.loads((CATALOG / "extra" / f"{name}__hf_quant_config.json").read_text())


def test_modelopt_exclude_patterns_match_as_vllm_matches_them():
    """ModelOptQuantConfigBase.is_layer_excluded (modelopt.py:187-221 in 0.32): exact, substring, fnmatch, after
    ``X*`` is split into ``X`` and ``X.*`` (apply_vllm_mapper, :263-281); roots (model.language_model., backbone.)
    are renamed alike on both sides."""
    q = resolve_quant(parse_config(catalog("nvidia__Gemma-4-31B-IT-NVFP4.json")),
                      quant_file("nvidia__Gemma-4-31B-IT-NVFP4"), None)
    assert q.name == "nvfp4" and len(q.exclude) == 63
    assert is_excluded(q, "layers.7.self_attn.q_proj") and is_excluded(q, "layers.59.self_attn.o_proj")
    assert not is_excluded(q, "layers.7.mlp.gate_proj")
    assert is_excluded(q, "lm_head")
    nano = QuantScheme(name="nvfp4", bits=4, source="", exclude_style="modelopt",
                       exclude=["backbone.layers.4.mixer.in_proj", "model.layers.1.self_attn*"])
    assert is_excluded(nano, "layers.4.mixer.in_proj") and not is_excluded(nano, "layers.14.mixer.in_proj")
    assert is_excluded(nano, "layers.1.self_attn.k_proj") and not is_excluded(nano, "layers.11.self_attn.k_proj")


def test_compressed_tensors_ignore_is_exact_or_regex():
    """should_ignore_layer -> is_equal_or_regex_match (compressed_tensors/utils.py:53-70, utils/config_utils.py:
    392-412 in 0.32): a name equal to the target, or ``re:`` + a regex matched from the start of the name."""
    q = QuantScheme(name="ct", bits=8, source="", exclude_style="compressed-tensors",
                    exclude=["lm_head", "re:.*mlp.gate$", "model.layers.0.self_attn.q_proj"])
    assert is_excluded(q, "layers.3.mlp.gate") and not is_excluded(q, "layers.3.mlp.gate_proj")
    assert is_excluded(q, "layers.0.self_attn.q_proj") and not is_excluded(q, "layers.0.self_attn.k_proj")
    assert not is_excluded(q, "layers.10.self_attn.q_proj")


def test_gemma4_31b_nvfp4_keeps_attention_in_bf16():
    """nvidia/Gemma-4-31B-IT-NVFP4: hf_quant_config excludes every layer's self_attn* (and the vision tower), so
    attention stays bf16 and only the MLPs are NVFP4.

    text_config: hidden 5376, 60 layers (layer_types: 50 sliding, 10 full), 32 heads, 16 KV heads x head_dim 256
    (sliding); global_head_dim 512 with num_global_key_value_heads 4 and attention_k_eq_v (vLLM still builds the
    V slot, gemma4.py:419-431); intermediate 21504; vocab 262144 (tied); max_position_embeddings 262144.
    RoPE caches: sliding 262144 x 256, global "proportional" 262144 x 512 (gemma4_rope.py:30-55), bf16.
    Vision: transformers Gemma4VisionModel 569,548,080 parameters (meta-device count, transformers 5.19) +
    embedding_projection 1152 x 5376. Norms: q/k norms per attention layer, 4 per layer, 1 final."""
    cfg = catalog("nvidia__Gemma-4-31B-IT-NVFP4.json")
    arch = parse_config(cfg)
    assert cfg["text_config"]["layer_types"].count("full_attention") == 10
    h, hd, ghd = 5376, 256, 512
    sliding_attn = h * 32 * hd + 2 * h * 16 * hd + 32 * hd * h + 2 * hd
    global_attn = h * 32 * ghd + 2 * h * 4 * ghd + 32 * ghd * h + 2 * ghd
    attention = 50 * sliding_attn + 10 * global_attn
    mlp = 60 * 3 * h * 21504
    norms = 60 * 4 * h + h
    embed = 262144 * h
    vision = 569_548_080 + 1152 * h
    rope = 262144 * 256 + 262144 * 512
    expected = (attention + norms + embed + vision + rope) * 2 + mlp * NVFP4
    q = resolve_quant(arch, quant_file("nvidia__Gemma-4-31B-IT-NVFP4"), None)
    got = weights_per_gpu(arch, "bfloat16", q, 1, 1).bytes_per_gpu
    assert abs(got - expected) < 64 * 1024
    # the public vLLM log (gh-027): "Weights 31.18 GiB"; within 1%
    assert abs(got / GiB - 31.18) / 31.18 < 0.01
    # config.json's own quantization_config (the "ignore" form) gives the same
    assert weights_per_gpu(arch, "bfloat16", resolve_quant(arch, None, None), 1, 1).bytes_per_gpu == got


def nano_hand_count(latent: int = 0) -> dict[str, int]:
    """Nemotron-3-Nano-30B-A3B by hand: hidden 2688, vocab 131072 (untied), pattern
    MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME (23 M, 23 E, 6 *); attention 32 heads / 2 KV heads x 128;
    Mamba-2 64 heads x 64 (d_inner 4096), n_groups 8, state 128, conv 4 (+ conv bias, A, D, dt_bias, norm);
    MoE 128 experts x (up + down) 2688 x 1856, shared expert 3712 (up + down), router 2688 x 128 + the fp32
    e_score_correction_bias (nemotron_h.py:160-170)."""
    h = 2688
    d_inner, conv_dim = 4096, 4096 + 2 * 8 * 128
    mamba_in, mamba_out = h * (2 * d_inner + 2 * 8 * 128 + 64), d_inner * h
    mamba_rest = conv_dim * 4 + conv_dim + 3 * 64 + d_inner
    return dict(embed=131072 * h, lm_head=131072 * h,
                attention=h * 4096 + 2 * h * 256 + 4096 * h,
                mamba_in=mamba_in, mamba_out=mamba_out, mamba_rest=mamba_rest,
                experts=128 * 2 * (latent or h) * 1856, shared=2 * h * 3712, router=h * 128 + 128,
                latent=2 * h * latent, norms=52 * h + h)


def test_nemotron_h_moe_layers_are_counted():
    """The E layers are NemotronHMoE blocks (nemotron_h.py:340-360 in 0.32). BF16: the count equals transformers
    5.19's meta-device count (31,577,937,344) plus the 23 x 128 e_score_correction_bias values, a parameter in vLLM
    and a buffer in transformers."""
    n = nano_hand_count()
    total = (n["embed"] + n["lm_head"] + 6 * n["attention"] + 23 * (n["mamba_in"] + n["mamba_out"] + n["mamba_rest"])
             + 23 * (n["experts"] + n["shared"] + n["router"]) + n["norms"])
    arch = parse_config(catalog("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"))
    assert arch.params.total == total == 31_577_937_344 + 23 * 128
    assert arch.num_experts == 128 and arch.params.active_experts == 23 * 6 * 2 * 2688 * 1856


def test_nemotron_h_nvfp4_prices_excluded_modules_in_bf16():
    """NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4: exclude_modules keeps the 6 attention layers (5, 12, 19, 26, 33, 42),
    the in/out projections of Mamba layers 4, 11, 18, 25, 32, 41 and every Mamba conv1d in bf16; experts and
    shared experts are NVFP4; embedding, lm_head, router and norms bf16."""
    n = nano_hand_count()
    bf16 = (n["embed"] + n["lm_head"] + 6 * n["attention"] + 6 * (n["mamba_in"] + n["mamba_out"])
            + 23 * n["mamba_rest"] + 23 * n["router"] + n["norms"])
    fp4 = 17 * (n["mamba_in"] + n["mamba_out"]) + 23 * (n["experts"] + n["shared"])
    rope = 262144 * 128
    expected = (bf16 + rope) * 2 + fp4 * NVFP4
    arch = parse_config(catalog("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.json"))
    q = resolve_quant(arch, quant_file("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"), None)
    got = weights_per_gpu(arch, "bfloat16", q, 1, 1).bytes_per_gpu
    assert abs(got - expected) < 1024
    assert 17 < got / GiB < 19  # was 1.92 GiB with the MoE layers uncounted


def test_nemotron_h_latent_moe():
    """moe_latent_size (Nemotron-3-Super): experts work in the latent width, behind the replicated
    fc1/fc2_latent_proj (hidden <-> latent, nemotron_h.py:196-226)."""
    cfg = copy.deepcopy(catalog("nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"))
    cfg["moe_latent_size"] = 1024
    n = nano_hand_count(latent=1024)
    p = parse_config(cfg).params
    assert p.experts == 23 * n["experts"] == 23 * 128 * 2 * 1024 * 1856
    assert p.router == 23 * (n["router"] + n["latent"])


def test_nemotron_3_super_latent_moe_and_mtp():
    """nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8, config.json verbatim from ai-dynamo/aiconfigurator @ 095f58a51
    (aic-core/.../nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8_config.json, saved as tests/data/): hidden 4096, 88
    layers (pattern counted below), attention 32 heads / 2 KV heads x 128; Mamba-2 128 heads x 64 (d_inner 8192),
    8 groups, state 128; 512 latent experts (moe_latent_size 1024) of 2688, 22 per token, shared 5376; one MTP step
    "*E" (nemotron_h_mtp.py:221-300). Was 6.41 GiB per GPU with the MoE layers uncounted; 120.7B
    parameters (the "120B" of its name) without the MTP step."""
    cfg = json.loads((ROOT / "tests" / "data" / "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json").read_text())
    pattern = cfg["hybrid_override_pattern"]
    n_m, n_e, n_a = pattern.count("M"), pattern.count("E"), pattern.count("*")
    assert (n_m, n_e, n_a, len(pattern)) == (40, 40, 8, 88)
    h = 4096
    attention = h * 4096 + 2 * h * 256 + 4096 * h
    mamba = h * (2 * 8192 + 2 * 8 * 128 + 128) + 10240 * 4 + 10240 + 3 * 128 + 8192 + 8192 * h
    moe = 512 * 2 * 1024 * 2688 + 2 * h * 5376 + h * 512 + 512 + 2 * h * 1024
    body = 2 * 131072 * h + n_a * attention + n_m * mamba + n_e * moe + 88 * h + h
    mtp = attention + moe + 2 * h + 2 * h * h + 3 * h
    p = parse_config(cfg).params
    assert p.total - p.mtp == body and p.mtp == mtp
    assert 120.6e9 < body < 120.7e9
    assert p.active_experts == n_e * 22 * 2 * 1024 * 2688


def test_mla_q_a_and_kv_a_projections_are_replicated():
    """DeepSeek-V3 (hidden 7168, 61 MLA layers, q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64): the
    fused q_a + kv_a projection is built with disable_tp=True (deepseek_v2.py:960-966, :1052-1062 in 0.32;
    ReplicatedLinear in earlier releases, :494, :518), and its two RMSNorms are whole. So TP 8 holds them 8 times:
    8 x rank - whole model = 7 x (every replicated byte)."""
    cfg = catalog("deepseek-ai__DeepSeek-V3.json")
    arch = parse_config(cfg)
    one = weights_per_gpu(arch, "bfloat16", None, 1, 1)
    eight = weights_per_gpu(arch, "bfloat16", None, 8, 1)
    h, layers = 7168, 61
    mla = layers * (h * 1536 + h * (512 + 64) + 1536 + 512)
    norms = layers * 2 * h + h
    router = 58 * (h * 256 + 256)  # n_routed_experts 256 from layer 3 (first_k_dense_replace), noaux_tc bias
    replicated = (mla + norms + router) * 2 + one.rope_cache_bytes
    assert one.rope_cache_bytes == 4096 * 40 * 64 * 4  # YaRN: original 4096 x factor 40, rotary 64, fp32
    assert abs(8 * eight.bytes_per_gpu - one.bytes_per_gpu - 7 * replicated) < 64


def test_qwen35_gated_query_and_nested_partial_rotary():
    """Qwen3.5-27B (text_config: hidden 5120, 24 heads x head_dim 256, rope_parameters.partial_rotary_factor
    0.25): Qwen3NextAttention (reused by qwen3_5.py:158) makes q_proj heads x head_dim x 2 when attn_output_gate
    (default True, qwen3_next.py:315-320); get_rope reads partial_rotary_factor from rope_parameters
    (rotary_embedding/__init__.py:66-72): rotary_dim 64, cache 262144 x 64."""
    cfg = catalog("Qwen__Qwen3.5-27B.json")
    tc = cfg["text_config"]
    assert tc["rope_parameters"]["partial_rotary_factor"] == 0.25 and "partial_rotary_factor" not in tc
    arch = parse_config(cfg)
    h, heads, hd = tc["hidden_size"], tc["num_attention_heads"], tc["head_dim"]
    q = [n for _, _, name, n in arch.params.modules if name == "self_attn.q_proj"]
    assert q and set(q) == {h * heads * hd * 2}
    assert arch.rotary_dim == 64
    assert weights_per_gpu(arch, "bfloat16", None, 1, 1).rope_cache_bytes == tc["max_position_embeddings"] * 64 * 2
    no_gate = copy.deepcopy(cfg)
    no_gate["text_config"]["attn_output_gate"] = False
    q = [n for _, _, name, n in parse_config(no_gate).params.modules if name == "self_attn.q_proj"]
    assert set(q) == {h * heads * hd}


def test_eagle3_head_as_llama_eagle3_builds_it():
    """AngelSlim/Qwen3-a3B_eagle3 on Qwen3-30B-A3B (vocab 151936): hidden 2048, 32 heads / 4 KV heads x 128, one
    layer, intermediate 6144, draft_vocab_size 32000, max_position_embeddings 40960. Per llama_eagle3.py (0.32):
    q/k/v take 2 x hidden (:80-95), a hidden_norm (:98), fc 3 x 2048 -> 2048 replicated (:209-250), lm_head over
    32000 rows (:329), draft_id_to_target_id 32000 int64 (:339-343); the embedding is the target's."""
    h = 2048
    layer = 2 * h * (32 * 128 + 2 * 4 * 128) + 32 * 128 * h + 3 * h * 6144 + 3 * h
    params = layer + h + 3 * h * h + 32000 * h
    expected = params * 2 + 32000 * 8 + 40960 * 128 * 2
    draft_cfg = catalog("AngelSlim__Qwen3-a3B_eagle3.json")
    target = parse_config(catalog("Qwen__Qwen3-30B-A3B.json"))
    got, _ = eagle3_draft_weights(parse_config(draft_cfg), target, draft_cfg, "bfloat16", 1)
    assert abs(got - expected) < 1024
    assert 0.26 < got / GiB < 0.29  # the checkpoint's 0.27 GiB (was 0.12 GiB)
    r = estimate(EngineInput(hf_config=catalog("Qwen__Qwen3-30B-A3B.json"), draft_hf_config=draft_cfg, gpu="H100",
                             max_model_len=4096, speculative_config={"method": "eagle3", "model": "x",
                                                                     "num_speculative_tokens": 3}))
    assert abs(r.draft_weights_gib - got / GiB) < 0.01


def nas_config(blocks: list[dict]) -> dict:
    """A DeciLM (nemotron-nas) config in the layout of nvidia/Llama-3_3-Nemotron-Super-49B-v1: hidden 8192, 64
    heads of 128, vocab 128256, untied, one block_configs entry per layer."""
    return {"architectures": ["DeciLMForCausalLM"], "model_type": "nemotron-nas", "hidden_size": 8192,
            "num_attention_heads": 64, "num_hidden_layers": len(blocks), "vocab_size": 128256,
            "max_position_embeddings": 131072, "rope_theta": 500000.0, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5, "hidden_act": "silu", "block_configs": blocks}


def test_nemotron_nas_blocks_per_layer():
    """DeciLMDecoderLayer (nemotron_nas.py:127-195 in 0.32): no-op attention -> no attention, no KV cache, no
    input_layernorm; n_heads_in_group 8 -> 64 / 8 = 8 KV heads; ffn_mult 2.625 -> int(2 x 2.625 x 8192 / 3) =
    14336 (a multiple of 256); ffn_mult 1.0 -> int(5461.33) = 5461 -> 5632 (_find_multiple 256, :60-70);
    no-op FFN -> no MLP, no post_attention_layernorm."""
    attn = {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": False}
    none = {"n_heads_in_group": None, "no_op": True, "replace_with_linear": False}
    cfg = nas_config([{"attention": attn, "ffn": {"ffn_mult": 2.625, "no_op": False}},
                      {"attention": none, "ffn": {"ffn_mult": 1.0, "no_op": False}},
                      {"attention": attn, "ffn": {"no_op": True}},
                      {"attention": none, "ffn": {"no_op": True}}])
    h = 8192
    attention = h * h + 2 * h * 8 * 128 + h * h
    mlp = 3 * h * 14336 + 3 * h * 5632
    norms = 2 * h + h + h + 0 + h
    arch = parse_config(cfg)
    assert arch.params.total == 2 * 128256 * h + 2 * attention + mlp + norms
    assert [la.kind for la in arch.layers] == ["full_attention", "none", "full_attention", "none"]
    r = estimate(EngineInput(hf_config=cfg, gpu="H100", max_model_len=8192, kv_cache_memory_bytes=GiB))
    assert r.kv_bytes_per_token == 2 * 2 * 8 * 128 * 2  # two attention layers, K and V, 8 heads x 128, bf16


def test_llama_nemotron_super_49b():
    """nvidia/Llama-3_3-Nemotron-Super-49B-v1, config.json verbatim from ai-dynamo/aiconfigurator @ 095f58a51
    (aic-core/src/aiconfigurator_core/model_configs/nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json, saved as
    tests/data/). Its 80 block_configs: 49 with attention (n_heads_in_group 8 -> 8 KV heads; 48 with ffn_mult 5.25,
    1 with 2.625) and 31 without (ffn_mult 1.3125 x 10, 1.0 x 8, 0.5 x 6, 2.625 x 5, 3.28125 x 1, 5.25 x 1).
    Intermediate sizes (int(2 x mult x 8192 / 3), up to 256): 5.25 -> 28672, 2.625 -> 14336, 1.3125 -> 7168,
    1.0 -> 5461 -> 5632, 0.5 -> 2730 -> 2816, 3.28125 -> 17920. The whole model was 163.95 GiB when sized as 80
    full layers; the KV cache is 49 x 2 x 8 x 128 x 2 = 200,704 B per token in bf16."""
    cfg = json.loads((ROOT / "tests" / "data" / "nvidia__Llama-3_3-Nemotron-Super-49B-v1.json").read_text())
    h = 8192
    attention = 49 * (2 * h * h + 2 * h * 8 * 128)
    mlp = 3 * h * (49 * 28672 + 6 * 14336 + 10 * 7168 + 8 * 5632 + 6 * 2816 + 17920)
    norms = (49 + 80 + 1) * h
    total = 2 * 128256 * h + attention + mlp + norms
    arch = parse_config(cfg)
    assert arch.params.total == total == 49_867_145_216
    rope = 131072 * 128 * 2  # llama3 RoPE: max_position_embeddings x head_dim, bf16
    assert weights_per_gpu(arch, "bfloat16", None, 1, 1).bytes_per_gpu == total * 2 + rope
    r = estimate(EngineInput(hf_config=cfg, gpu="H100", max_model_len=8192, kv_cache_memory_bytes=GiB))
    assert r.kv_bytes_per_token == 49 * 2 * 8 * 128 * 2 == 200_704


def test_refused_by_name():
    """Shapes not modelled are refused with what is missing, never sized by another layer's rule."""
    cfg = nas_config([{"attention": {"n_heads_in_group": 8, "no_op": False, "replace_with_linear": True},
                       "ffn": {"ffn_mult": 1.0}}])
    with pytest.raises(EngineInputError, match="replace_with_linear"):
        parse_config(cfg)
    arch = parse_config(catalog("Qwen__Qwen2.5-7B-Instruct.json"))
    with pytest.raises(EngineInputError, match="MIXED_PRECISION"):
        resolve_quant(arch, quant_file("nvidia__Qwen3.6-35B-A3B-NVFP4"), None)


def test_modelopt_flags_are_the_own_method_of_an_hf_quant_config_checkpoint():
    """nvidia/Qwen3-32B-NVFP4 ships only hf_quant_config.json (no quant_method): both runtimes call it "modelopt", so
    --quantization modelopt / modelopt_fp4 is accepted (SGLang: compatible_quantization_methods, model_config.py:561 in
    0.5.3, which needs modelopt_fp4 for it) and the weights stay the checkpoint's NVFP4; another method is refused."""
    arch = parse_config(catalog("nvidia__Qwen3-32B-NVFP4.json"))
    qc = quant_file("nvidia__Qwen3-32B-NVFP4")
    for flag in ("modelopt", "modelopt_fp4"):
        q = resolve_quant(arch, qc, flag)
        assert q.name == "nvfp4" and q.bits == 4
    with pytest.raises(EngineInputError) as err:
        resolve_quant(arch, qc, "gptq")
    assert err.value.field == "quantization"
