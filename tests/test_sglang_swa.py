"""SGLang's hybrid sliding-window KV pool (SWAKVPool) for Llama 4, MiMo-V2-Flash and Gemma 4, by hand.

Every expected number is worked out below from the model's config.json and SGLang's formulas as read in the
release's wheel (calculator/runtimes/sglang/releases.py cites the lines; test_swa_cited_lines_say_what_the_rule_says
reads them back from the wheel folder, compat.fetch.default_wheel_dir):

  layers   configs/model_config.py get_hybrid_layer_ids: Llama 4 layer i full when (i + 1) % 4 == 0 (0.5.10.post1
           :1456, 0.5.23 :2705); MiMo-V2 hybrid_layer_pattern 1 = SWA (:1471 / :2723); Gemma 4 layer_types (0.5.23
           :2754)
  rows     per layer and token, one rank: full max(1, kv_heads // tp) x (head_dim + v_head_dim) x bytes, SWA
           max(1, swa_num_key_value_heads // tp) x (swa_head_dim + swa_v_head_dim) x bytes
           (0.5.10 model_runner_kv_cache_mixin.py:338, 0.5.23 pool_configurator.py:705)
  0.5.23   HybridSWAPoolConfigurator: cell = full rows x full layers + 0.8 x SWA rows x SWA layers
           (pool_configurator.py:801, swa_full_tokens_ratio fallback 0.8 arg_groups/fields/schedule.py:160);
           full = int(int(rest x 2^30) // cell) aligned down to the page; swa = int(full x 0.8) aligned (:881);
           the SWA pool must exceed sliding_window_size + page_size (:210)
  0.5.10   capacity = int(rest x 2^30) // (full rows x full layers + SWA rows x SWA layers), aligned; full =
           int(capacity x that / (full rows x full layers + 0.8 x SWA rows x SWA layers)) aligned, swa = int(full x 0.8)
           aligned (model_runner_kv_cache_mixin.py:313)
  rest     = free_before_load - weights - free_before_load x (1 - mem_fraction_static) (GiB = 2^30 B); 0.5.23 keeps
           100 MiB more back for a multimodal model (kv_cache_configurator.py:210)
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import get_gpu
from calculator.runtimes.sglang import check_backend, default_backend, plan
from calculator.runtimes.sglang import releases as R
from compat.fetch import default_wheel_dir
from tests.conftest import load_config

GIB = 2**30
WHEELS = default_wheel_dir()  # $LLMCALC_WHEEL_DIR or ~/.cache/llmcalc/wheels (.ci/run downloads the SGLang wheels)
CATALOG = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"
LOGS = Path("/work/shared/cases/runtime_startup_logs.json")


def scout() -> dict:
    return load_config("meta-llama__Llama-4-Scout-17B-16E-Instruct.json")


def gemma4() -> dict:
    return json.loads((CATALOG / "google__gemma-4-26B-A4B.json").read_text())


# XiaomiMiMo/MiMo-V2-Flash's config.json as its public copies quote the Hub file (the Hub is not reachable here):
# the shapes from Megatron-Bridge's MiMo-V2-Flash bridge test (_MIMO_V2_FLASH_CONFIG, "HF metadata", 6 layers of it:
# heads 64 / KV 4, head_dim 192, v_head_dim 128, swa_* 64 / 8 / 192 / 128, sliding_window(_size) 128,
# attention_chunk_size 128, max_position_embeddings 262144, vocab 152576, experts 256 x 2048 top-8), the 48-layer
# pattern of a hub-config test (full at layer 0 and every (l + 1) % 6 == 0: 9 full, 39 SWA), three MTP layers, FP8
# block-128 weights (the MoE kernel config name of sgl-009's log: fp8_w8a8, block_shape=[128, 128]).
MIMO_V2_FLASH = {
    "architectures": ["MiMoV2FlashForCausalLM"], "model_type": "mimo_v2_flash", "torch_dtype": "bfloat16",
    "num_hidden_layers": 48, "hidden_size": 4096, "intermediate_size": 16384, "num_attention_heads": 64,
    "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128, "vocab_size": 152576,
    "max_position_embeddings": 262144, "rope_theta": 5000000, "partial_rotary_factor": 0.334,
    "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu", "layernorm_epsilon": 1e-5,
    "hybrid_layer_pattern": [0 if (i == 0 or (i + 1) % 6 == 0) else 1 for i in range(48)],
    "sliding_window": 128, "sliding_window_size": 128, "attention_chunk_size": 128, "swa_rope_theta": 10000,
    "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
    "add_swa_attention_sink_bias": True, "add_full_attention_sink_bias": False, "attention_value_scale": 0.707,
    "moe_layer_freq": [0] + [1] * 47, "n_routed_experts": 256, "moe_intermediate_size": 2048,
    "num_experts_per_tok": 8, "scoring_func": "sigmoid", "n_shared_experts": None, "n_group": 1, "topk_group": 1,
    "topk_method": "noaux_tc", "norm_topk_prob": True, "routed_scaling_factor": None, "num_nextn_predict_layers": 3,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]},
}


def rest_bytes(free: float, weights: float, mfs: float, reserve: float = 0.0) -> int:
    """int(rest x 2^30), rest in GiB as SGLang computes it (the same order of operations)."""
    return int(((free - weights) - free * (1 - mfs) - reserve) * GIB)


# ---------------------------------------------------------------------------------------------------------
# Llama 4 (chunked local attention on the SWA side)


def test_llama4_scout_hybrid_pool_by_hand_both_releases():
    """Llama-4-Scout on 4x H100, --mem-fraction-static 0.85, 78.0 GiB free before loading, 52 GiB of weights per rank.

    48 layers: 12 full (3, 7, ..., 47: the NoPE layers), 36 chunked-local on the SWA side. 8 KV heads / TP 4 = 2 per
    rank, head_dim 128, bf16: both kinds' row = 2 x (128 + 128) x 2 = 1,024 B.
      rest = 78.0 - 52 - 78.0 x 0.15 = 14.3 GiB -> int(rest x 2^30) = 15,354,508,083 B
    0.5.23: cell = 1,024 x 12 + 0.8 x 1,024 x 36 = 41,779.2 B; full = int(15,354,508,083 // 41,779.2) = 367,515;
            swa = int(367,515 x 0.8) = 294,012 > 8,192 (attention_chunk_size, the runner's sliding_window_size) + 1
    0.5.10: capacity = 15,354,508,083 // 49,152 = 312,388; full = int(312,388 x 49,152 / 41,779.2) = 367,515;
            swa = 294,012: the same counts.
    Backend: Llama 4's own default on SM90, fa3 (page 1). K = V = (367,515 x 12 + 294,012 x 36) x 2 x 128 x 2 B."""
    available = rest_bytes(78.0, 52, 0.85)
    assert available == 15354508083
    full = int(available // (1024 * 12 + 0.8 * 1024 * 36))
    swa = int(full * 0.8)
    assert (full, swa) == (367515, 294012)
    cap = available // 49152
    assert (cap, int(int(cap * 49152 / (1024 * 12 + 0.8 * 1024 * 36)))) == (312388, full)
    k = (full * 12 + swa * 36) * 2 * 128 * 2 / GIB
    for release in ("0.5.23", "0.5.10.post1"):
        p = plan(scout(), gpu=get_gpu("H100"), release=release, tp_size=4, mem_fraction_static=0.85,
                 free_memory_before_load_gib=78.0, weights_bytes=52 * GIB)
        assert p.attention == "hybrid_swa" and p.attention_backend == "fa3" and p.page_size == 1
        g = p.swa_pool
        assert (g.full_layers, g.swa_layers, g.full_bytes_per_token, g.swa_bytes_per_token) == (12, 36, 1024, 1024)
        assert g.sliding_window_size == 8192
        assert (p.max_total_num_tokens, p.swa_max_total_num_tokens) == (full, swa)
        assert abs(p.k_size_gib - k) < 1e-9 and abs(p.v_size_gib - k) < 1e-9
        assert p.max_running_requests == 2048  # min(max(int(367,515 / 10,485,760 x 512), 2048), 4096, full // 2)
        assert p.does_not_start is None
        if release == "0.5.23":
            assert float(p.source_of("cell_size_bytes.hybrid_swa").value) == 41779.2


def test_llama4_swa_pool_below_one_chunk_does_not_start_in_0_5_23_only():
    """The same setting with 65.9 GiB of weights: rest = 78.0 - 65.9 - 11.7 = 0.4 GiB -> 429,496,730 B. 0.5.23:
    full = int(429,496,730 // 41,779.2) = 10,280, swa = 8,224 > 8,192 + 1, so it starts. With 65.92 GiB: 408,021,893
    B, full = 9,766, swa = 7,812 <= 8,193: validate_swa_pool_size raises at start-up (pool_configurator.py:210).
    0.5.10.post1 has no such check."""
    kw = {"gpu": get_gpu("H100"), "tp_size": 4, "mem_fraction_static": 0.85, "free_memory_before_load_gib": 78.0}
    for w, full, swa, starts in ((65.9, 10280, 8224, True), (65.92, 9766, 7812, False)):
        available = rest_bytes(78.0, int(w * GIB) / GIB, 0.85)
        assert (int(available // 41779.2), int(int(available // 41779.2) * 0.8)) == (full, swa)
        assert (swa > 8192 + 1) is starts
        p = plan(scout(), release="0.5.23", weights_bytes=int(w * GIB), **kw)
        assert (p.max_total_num_tokens, p.swa_max_total_num_tokens) == (full, swa)
        assert (p.does_not_start is None) is starts
        if not starts:
            assert "sliding_window_size 8192" in p.does_not_start and "pool_configurator.py:210" in p.does_not_start
    old = plan(scout(), release="0.5.10.post1", weights_bytes=int(65.92 * GIB), **kw)
    assert old.does_not_start is None and old.swa_max_total_num_tokens < 8193


def test_llama4_backend_page_and_the_text_only_class():
    """B200: Llama 4's default is trtllm_mha, which takes 64-token pages (both pools aligned to 64). A100: triton
    (Llama 4's own pick; the generic MHA rule would give flashinfer, which Llama 4's assert refuses). Llama4ForCausalLM
    is not in is_hybrid_swa_model: one MHA pool over all 48 layers, 48 x 1,024 B = 49,152 B per token."""
    p = plan(scout(), gpu=get_gpu("B200"), release="0.5.23", tp_size=4)
    assert p.attention_backend == "trtllm_mha" and p.page_size == 64
    assert p.max_total_num_tokens % 64 == 0 and p.swa_max_total_num_tokens % 64 == 0
    for release in ("0.5.10.post1", "0.5.23"):
        assert default_backend(release, get_gpu("A100"), scout()).backend == "triton"
        v = check_backend(release, get_gpu("A100"), scout(), "flashinfer")
        assert v.verdict == "no" and "Llama4" in v.reasons[0].text
    text = scout()["text_config"] | {"architectures": ["Llama4ForCausalLM"]}
    p = plan(text, gpu=get_gpu("H100"), release="0.5.23", tp_size=4, mem_fraction_static=0.85,
             free_memory_before_load_gib=78.0, weights_bytes=52 * GIB)
    assert p.attention == "mha" and p.swa_pool is None and p.cell_size_bytes == 48 * 1024
    assert p.max_total_num_tokens == rest_bytes(78.0, 52, 0.85) // 49152


def test_llama4_text_only_builds_no_vision_tower():
    """Served text-only (Llama 4 is in mm_disabled_models), Llama4ForConditionalGeneration builds neither
    vision_model nor multi_modal_projector (models/mllama4.py:468 in 0.5.23, :447 in 0.5.10.post1): the weights
    leave the vision tower's parameters out (its count, bf16) instead of counting it on every rank."""
    from calculator.engine.arch import parse_config

    vision = parse_config(scout()).params.vision
    assert vision > 0
    for release in ("0.5.10.post1", "0.5.23"):
        p = plan(scout(), gpu=get_gpu("H100"), release=release, tp_size=4)
        assert float(p.source_of("weights.vision").value) == round(-vision * 2 / GIB, 4)


def test_llama4_refused_on_releases_not_modelled_naming_the_ones_that_are():
    for release in ("0.5.9", "0.5.7", "0.4.10.post2"):
        with pytest.raises(EngineInputError) as e:
            plan(scout(), gpu=get_gpu("H100"), release=release, tp_size=4)
        assert e.value.field == "release"
        assert "--sglang-version 0.5.10.post1" in e.value.message and "--sglang-version 0.5.23" in e.value.message


# ---------------------------------------------------------------------------------------------------------
# MiMo-V2-Flash (its own SWA heads, V narrower than K)


def test_mimo_v2_flash_hybrid_pool_by_hand():
    """MiMo-V2-Flash on 4x H200, --mem-fraction-static 0.85, 139.0 GiB free before loading, 72 GiB of weights.

    Rows per rank: full layers 4 KV heads / 4 = 1 x (192 + 128) x 2 = 640 B (9 layers); SWA layers 8 / 4 = 2 x (192 +
    128) x 2 = 1,280 B (39 layers). rest = 139.0 - 72 - 139.0 x 0.15 = 46.15 GiB.
    0.5.23: cell = 640 x 9 + 0.8 x 1,280 x 39 = 5,760 + 39,936 = 45,696 B; full = int(int(46.15 x 2^30) // 45,696);
            swa = int(full x 0.8); window sliding_window_size 128 (no get_attention_sliding_window_size in
            models/mimo_v2.py: resolve_sliding_window_size takes the config's).
    0.5.10: capacity = int(46.15 x 2^30) // 55,680, full = int(capacity x 55,680 / 45,696).
    Backend fa3 on SM90, page 1."""
    available = rest_bytes(139.0, 72, 0.85)
    full = int(available // 45696)
    swa = int(full * 0.8)
    cap = available // 55680
    full10 = int(cap * 55680 / 45696)
    for release, f, s in (("0.5.23", full, swa), ("0.5.10.post1", full10, int(full10 * 0.8))):
        p = plan(MIMO_V2_FLASH, gpu=get_gpu("H200"), release=release, tp_size=4, mem_fraction_static=0.85,
                 free_memory_before_load_gib=139.0, weights_bytes=72 * GIB)
        g = p.swa_pool
        assert (g.full_layers, g.swa_layers) == (9, 39)
        assert (g.full_kv_heads, g.head_dim, g.v_head_dim) == (1, 192, 128)
        assert (g.swa_kv_heads, g.swa_head_dim, g.swa_v_head_dim) == (2, 192, 128)
        assert (g.full_bytes_per_token, g.swa_bytes_per_token, g.sliding_window_size) == (640, 1280, 128)
        assert p.attention_backend == "fa3" and p.page_size == 1 and p.cell_size_bytes == 55680
        assert (p.max_total_num_tokens, p.swa_max_total_num_tokens) == (f, s)
        assert abs(p.k_size_gib - (f * 9 * 192 * 2 + s * 39 * 2 * 192 * 2) / GIB) < 1e-9
        assert abs(p.v_size_gib - (f * 9 * 128 * 2 + s * 39 * 2 * 128 * 2) / GIB) < 1e-9
    # B200: MiMo-V2's own fa4 on SM100 (arg_groups/model_overrides/mimo_v2.py:27), 128-token pages for non-MLA models
    p = plan(MIMO_V2_FLASH, gpu=get_gpu("B200"), release="0.5.23", tp_size=4)
    assert p.attention_backend == "fa4" and p.page_size == 128 and p.max_total_num_tokens % 128 == 0


def test_mimo_v2_flash_against_its_public_start_up_log_sgl_009():
    """sgl-009 (sglang PR #15464, main branch 2025-12-19, 4x B200, TP4): per rank

        KV Cache is allocated. #tokens: 1496958, K size: 41.76 GB, V size: 27.84 GB   (the SWA sub-pool)
        KV Cache is allocated. #tokens: 1496958, K size: 4.82 GB, V size: 3.21 GB     (the full sub-pool)
        SWAKVPool mem usage: 77.63 GB, swa size: 1496958, full size: 1496958

    By hand from the config: SWA K = 1,496,958 x 39 layers x 2 heads x 192 x 2 B = 41.76 GiB, V (128 wide) 27.84;
    full K = 1,496,958 x 9 x 1 x 192 x 2 = 4.82, V 3.21; together 77.63 GiB = 1,496,958 x 55,680 B: the plan's
    layer split, heads per rank and K / V widths reproduce every logged size.

    What differs, and why the token count itself is not asserted: the log shows swa size == full size, i.e.
    --swa-full-tokens-ratio 1.0 (passed, or MiMo's hierarchical-cache reset to 1.0; with the default 0.8 the SWA
    pool would hold int(0.8 x full)), the excerpt has neither the free memory before loading, the weights nor
    mem_fraction_static, and the build is a December 2025 main (between 0.5.6 and 0.5.7), not a covered release.
    With the ratio 1.0 every one of those splits (0.5.7's by layer counts, 0.5.10's, 0.5.23's) gives full = swa =
    the budget / 55,680 B, so the logged pool is the whole budget (77.63 GiB). Its count (1,496,958) is not a
    multiple of 128: the run used 1-token pages, not 0.5.23's fa4 default on B200. The plan with the ratio 1.0 gives
    swa = full and a pool of full x 55,680 B."""
    rec = next(r for r in json.loads(LOGS.read_text())["sglang"] if r["id"] == "sgl-009")
    logged = rec["logged"]
    tokens = logged["kv_tokens"]
    assert tokens == 1496958 and tokens % 128 != 0
    p = plan(MIMO_V2_FLASH, gpu=get_gpu("B200"), release="0.5.23", tp_size=4, swa_full_tokens_ratio=1.0,
             page_size=1, attention_backend="triton", mem_fraction_static=0.85, free_memory_before_load_gib=176.0,
             weights_bytes=72 * GIB)
    g = p.swa_pool
    swa_k = tokens * g.swa_layers * g.swa_kv_heads * g.swa_head_dim * 2 / GIB
    swa_v = tokens * g.swa_layers * g.swa_kv_heads * g.swa_v_head_dim * 2 / GIB
    full_k = tokens * g.full_layers * g.full_kv_heads * g.head_dim * 2 / GIB
    full_v = tokens * g.full_layers * g.full_kv_heads * g.v_head_dim * 2 / GIB
    assert (round(swa_k, 2), round(swa_v, 2)) == (logged["swa_k_size_gb"], logged["swa_v_size_gb"]) == (41.76, 27.84)
    assert (round(full_k, 2), round(full_v, 2)) == (logged["full_k_size_gb"], logged["full_v_size_gb"]) == (4.82, 3.21)
    assert round(tokens * 55680 / GIB, 2) == round(swa_k + swa_v + full_k + full_v, 2) == 77.63
    assert p.swa_max_total_num_tokens == p.max_total_num_tokens  # ratio 1.0: swa size == full size
    # the budget divided by the pool's own bytes per token: int(int(rest x 2^30) // 55,680) with 1-token pages
    assert p.max_total_num_tokens == rest_bytes(176.0, 72, 0.85) // 55680
    assert abs(p.kv_pool_gib - p.max_total_num_tokens * 55680 / GIB) < 1e-9


def test_mimo_refusals_name_what_would_answer():
    """0.5.7 to 0.5.9 have MiMo-V2-Flash but split its pool by layer counts (0.5.7 set_num_tokens_hybrid_swa), not
    modelled: refused naming 0.5.10.post1 and 0.5.23. Its MTP / multi-layer EAGLE drafts are not followed."""
    with pytest.raises(EngineInputError) as e:
        plan(MIMO_V2_FLASH, gpu=get_gpu("H200"), release="0.5.8.post1", tp_size=4)
    assert e.value.field == "release" and "--sglang-version 0.5.10.post1" in e.value.message
    with pytest.raises(EngineInputError) as e:
        plan(MIMO_V2_FLASH, gpu=get_gpu("H200"), release="0.5.23", tp_size=4, speculative_algorithm="NEXTN")
    assert e.value.field == "speculative_algorithm"
    with pytest.raises(EngineInputError) as e:
        plan(MIMO_V2_FLASH, gpu=get_gpu("H200"), release="0.5.23", tp_size=4, swa_full_tokens_ratio=1.5)
    assert e.value.field == "swa_full_tokens_ratio"


# ---------------------------------------------------------------------------------------------------------
# Gemma 4 (0.5.23 only: full layers with their own heads and head size)


def test_gemma4_hybrid_pool_by_hand():
    """gemma-4-26B-A4B on 2x H100, SGLang 0.5.23, --mem-fraction-static 0.85, 78.0 GiB free, 25 GiB of weights.

    SGLang flattens the checkpoint's SWA-first shapes (utils/hf_transformers/config.py:115): full layers
    num_global_key_value_heads 2 / TP 2 = 1 head of global_head_dim 512 (V as wide), 1 x (512 + 512) x 2 = 2,048 B
    (5 layers); SWA layers num_key_value_heads 8 / 2 = 4 heads of head_dim 256, 4 x 512 x 2 = 4,096 B (25 layers).
    Multimodal in 0.5.23 (Gemma4ForConditionalGeneration), so 100 MiB more is kept back:
      rest = 78.0 - 25 - 78.0 x 0.15 - 100 / 1024 GiB; cell = 2,048 x 5 + 0.8 x 4,096 x 25 = 92,160 B;
      full = int(int(rest x 2^30) // 92,160), swa = int(full x 0.8) > 1,023 (sliding_window - 1,
      models/gemma4_mm.py:314) + 1. Backend: Gemma 4's own triton off SM100 (model_overrides/gemma4.py:30)."""
    available = rest_bytes(78.0, 25, 0.85, reserve=100 / 1024)
    full = int(available // 92160)
    p = plan(gemma4(), gpu=get_gpu("H100"), release="0.5.23", tp_size=2, mem_fraction_static=0.85,
             free_memory_before_load_gib=78.0, weights_bytes=25 * GIB)
    g = p.swa_pool
    assert (g.full_layers, g.swa_layers, g.full_kv_heads, g.head_dim, g.v_head_dim) == (5, 25, 1, 512, 512)
    assert (g.swa_kv_heads, g.swa_head_dim, g.swa_v_head_dim, g.sliding_window_size) == (4, 256, 256, 1023)
    assert float(p.source_of("cell_size_bytes.hybrid_swa").value) == 92160
    assert p.attention_backend == "triton" and p.page_size == 1
    assert (p.max_total_num_tokens, p.swa_max_total_num_tokens) == (full, int(full * 0.8))
    assert abs(p.k_size_gib - (full * 5 * 512 * 2 + int(full * 0.8) * 25 * 4 * 256 * 2) / GIB) < 1e-9
    assert check_backend("0.5.23", get_gpu("H100"), gemma4(), "fa3").verdict == "no"
    assert plan(gemma4(), gpu=get_gpu("B200"), release="0.5.23").attention_backend == "trtllm_mha"


def test_gemma4_refusals():
    """Gemma 4 is not a model class before 0.5.23; its KV-shared layers (the small E2B / E4B checkpoints) and its
    drafts are not followed."""
    with pytest.raises(EngineInputError) as e:
        plan(gemma4(), gpu=get_gpu("H100"), release="0.5.10.post1")
    assert e.value.field == "config.architectures"
    shared = gemma4()
    shared["text_config"] = shared["text_config"] | {"num_kv_shared_layers": 10}
    with pytest.raises(EngineInputError) as e:
        plan(shared, gpu=get_gpu("H100"), release="0.5.23")
    assert e.value.field == "config.num_kv_shared_layers"


def test_other_hybrid_swa_architectures_refused_saying_no_release_models_them():
    """Step3.5 (gpt-oss's shapes under its class name) is hybrid SWA in 0.5.10.post1 and 0.5.23, neither modelled."""
    step = load_config("openai__gpt-oss-120b.json") | {"architectures": ["Step3p5ForCausalLM"]}
    for release in ("0.5.10.post1", "0.5.23"):
        with pytest.raises(EngineInputError) as e:
            plan(step, gpu=get_gpu("H200"), release=release, tp_size=8)
        assert "no covered SGLang release is modelled" in e.value.message


# ---------------------------------------------------------------------------------------------------------
# The speed path


def test_speed_plan_reads_sglang_rows_and_the_windows():
    """The speed model gets SGLang's own KV rows per layer type (its two sub-pools) and the layers' windows: Llama 4's
    chunked layers read min(context, 8192), MiMo-V2's SWA layers min(context, 128) (the vLLM engine does not size
    MiMo-V2's KV, so its speed plan is built from SGLang's plan alone)."""
    from calculator.engine import perf
    from calculator.request import parse_request
    from calculator.runtimes.base import LoadedModel
    from calculator.runtimes.sglang.runtime import SGLang

    for repo, cfg, gpu, rows, window in (
            ("meta-llama/Llama-4-Scout-17B-16E-Instruct", scout(), "H100",
             {"full_attention": 12 * 1024, "chunked_local": 36 * 1024}, 8192),
            ("XiaomiMiMo/MiMo-V2-Flash", MIMO_V2_FLASH, "H200",
             {"full_attention": 9 * 640, "sliding_window": 39 * 1280}, 128)):
        req = parse_request({"model": repo, "runtime": "sglang", "gpu": gpu, "tensor_parallel_size": "4"})
        model = LoadedModel(repo_id=repo, config=cfg, source="test")
        sp = SGLang()._speed_plan(req, model, None)
        assert {e.kind: e.bytes_per_token for e in sp.kv_by_layer_type} == rows
        groups = perf._setup(sp, "sglang").target.attn
        assert sorted((g.kv_bytes_per_token, g.window) for g in groups) == sorted(
            (b, None if k == "full_attention" else window) for k, b in rows.items())
        result = SGLang().speed(req, model, None)
        assert result.itl_ms > 0 and result.ttft_ms > 0


# ---------------------------------------------------------------------------------------------------------
# The cited lines


_CITED = [
    ("0.5.10.post1", "swa_layers_llama4", 'if "Llama4ForConditionalGeneration" in model_architectures:'),
    ("0.5.10.post1", "swa_layers_gptoss", 'elif "GptOssForCausalLM" in model_architectures:'),
    ("0.5.10.post1", "swa_layers_mimo", 'elif "MiMoV2FlashForCausalLM" in model_architectures:'),
    ("0.5.10.post1", "swa_rows", "full_per_token = ("),
    ("0.5.10.post1", "swa_window_gptoss", "def get_attention_sliding_window_size(config):"),
    ("0.5.10.post1", "swa_window_config", "self.sliding_window_size = self.model_config.sliding_window_size"),
    ("0.5.10.post1", "swa_window_chunk", "self.sliding_window_size = self.model_config.attention_chunk_size"),
    ("0.5.10.post1", "llama4_text_only", "self.has_vision = ("),
    ("0.5.10.post1", "llama4_backend", "if self.attention_backend is None:"),
    ("0.5.10.post1", "llama4_backends", "assert self.attention_backend in {"),
    ("0.5.10.post1", "swa_ratio_default", "swa_full_tokens_ratio: float = 0.8"),
    ("0.5.10.post1", "swa_ratio_check", "if not (0 < self.swa_full_tokens_ratio <= 1.0):"),
    ("0.5.23", "swa_layers_llama4", 'if "Llama4ForConditionalGeneration" in model_architectures:'),
    ("0.5.23", "swa_layers_gptoss", "elif any(arch in SWA_SINK_ARCHS for arch in model_architectures)"),
    ("0.5.23", "swa_layers_mimo", "elif any(arch in MIMO_V2_MODEL_ARCHS for arch in model_architectures):"),
    ("0.5.23", "swa_layers_gemma4", 'or "Gemma4ForCausalLM" in model_architectures'),
    ("0.5.23", "swa_rows", "self._full_per_token = ("),
    ("0.5.23", "swa_window_gptoss", "def get_attention_sliding_window_size(config):"),
    ("0.5.23", "swa_window_config",
     "elif model_config.is_hybrid_swa and model_config.sliding_window_size is not None:"),
    ("0.5.23", "swa_window_chunk", "elif model_config.attention_chunk_size is not None:"),
    ("0.5.23", "swa_window_gemma4", "def get_attention_sliding_window_size(self):"),
    ("0.5.23", "gemma4_shapes", "def _apply_gemma4_attention_overrides(config):"),
    ("0.5.23", "llama4_text_only", "self.has_vision = self.has_vision_weights and get_mm().enable_multimodal"),
    ("0.5.23", "llama4_backend", "if cfg.attention_backend is None:"),
    ("0.5.23", "llama4_backends", "assert attention_backend in {"),
    ("0.5.23", "gemma4_backend", "default_attention_backend = ("),
    ("0.5.23", "gemma4_backends", "accepted_backends = ("),
    ("0.5.23", "mimo_backend", "if get_platform().is_sm100 and is_attention_backend_not_set(cfg):"),
    ("0.5.23", "swa_ratio_check", 'if not (0 < resolution_result(server_args, "swa_full_tokens_ratio") <= 1.0):'),
]


def _line(release: str, path: str, line: int) -> str:
    found = sorted(WHEELS.glob(f"sglang-{release}-*.whl"))
    if not found:
        pytest.skip(f"sglang {release} wheel not downloaded (pip download sglang=={release} --no-deps -d {WHEELS})")
    with zipfile.ZipFile(found[0]) as z:
        return z.read(path).decode().splitlines()[line - 1]


@pytest.mark.parametrize("release,rule,text", _CITED)
def test_swa_cited_lines_say_what_the_rule_says(release, rule, text):
    path, line = R._LINES[release][rule]
    assert text in _line(release, path, line)


def test_llama4_backend_lines_say_what_the_rule_says():
    from calculator.runtimes.sglang import compat as C

    for release, (accepts, where) in C._LLAMA4_ACCEPTS.items():
        path, line = where.rsplit(":", 1)
        text = _line(release, path, int(line))
        assert "assert" in text and ("fa3" in text or "attention_backend in {" in text)
    for release, where in C._LLAMA4_DEFAULT.items():
        path, line = where.rsplit(":", 1)
        assert "attention_backend is None" in _line(release, path, int(line))
