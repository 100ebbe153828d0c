"""SGLang's start-up memory plan, attention-backend answers and launch command.

Every expected number is worked out by hand below from a real config.json (../shared/data/model_configs)
and SGLang's formulas as read in the release's source (calculator/runtimes/sglang/releases.py cites the
lines); the public log the setup comes from (shared/cases/runtime_startup_logs.json) is the check.

Formulas used by hand (GiB = 2**30 B):
  rest   = free_after_load - free_before_load * (1 - mem_fraction_static)
  tokens = int(rest * 2**30) // cell, aligned down to the page size
  cell   MHA/GQA: max(1, kv_heads // attn_tp) * (head_dim + v_head_dim) * layers * bytes
         MLA: (kv_lora_rank + qk_rope_head_dim) * layers * bytes (+ NSA indexer (128 + 4) * layers from 0.5.3.post1)
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from calculator.engine.arch import parse_config

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import GPU, get_gpu
from calculator.runtimes.sglang import (
    COVERED,
    check_backend,
    default_backend,
    explain_vs_vllm,
    launch_argv,
    plan,
)
from calculator.runtimes.sglang import releases as R
from calculator.runtimes.sglang.memory import nsa_architectures
from compat.fetch import default_wheel_dir
from tests.conftest import CONFIGS, load_config

GIB = 2**30
WHEELS = default_wheel_dir()  # $LLMCALC_WHEEL_DIR or ~/.cache/llmcalc/wheels (.ci/run downloads the SGLang wheels)
CATALOG = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"  # the offline catalog


def wheel_of(release: str) -> Path:
    """The release's wheel in WHEELS (``sglang-X-py3-none-any.whl`` up to 0.5.10, a platform wheel from 0.5.23); a
    path that does not exist when it is not downloaded."""
    found = sorted(WHEELS.glob(f"sglang-{release}-*.whl"))
    return found[0] if found else WHEELS / f"sglang-{release}-py3-none-any.whl"


def rtx5080() -> GPU:
    # sgl-025's nvidia-smi: 16303 MiB total
    return GPU(name="NVIDIA GeForce RTX 5080", vendor="nvidia", architecture="blackwell", compute_capability="12.0",
               memory_gib=16303 / 1024, memory_source="sgl-025 nvidia-smi", bandwidth_gbps=960, tflops_bf16=0,
               tflops_fp8=None, spec_source="test", kind="consumer")


def v32_config() -> dict:
    # DeepSeek-V3's config with deepseek-ai/DeepSeek-V3.2-Exp's architecture and indexer keys
    cfg = load_config("deepseek-ai__DeepSeek-V3.json")
    cfg.update({"architectures": ["DeepseekV32ForCausalLM"], "index_head_dim": 128, "index_n_heads": 64,
                "index_topk": 2048})
    return cfg


# ---------------------------------------------------------------------------------------------------------
# MHA / GQA


def test_gqa_qwq32b_tp4_on_l4_release_0_4_3():
    """sgl-011: QwQ-32B, 4x L4, SGLang 0.4.3.post4, no --mem-fraction-static.

    mem_fraction_static: TP 4 -> 0.85 (0.4.3 table 0.88/0.87/0.85/0.81/0.79 for TP 1/2/4/8/16).
    cell: 64 layers, 8 KV heads // TP 4 = 2, head_dim 5120/40 = 128, bf16:
          2 * (128 + 128) * 64 * 2 = 65,536 B.
    rest: 21.63 - 15.54 - 21.63 * 0.15 = 6.09 - 3.2445 = 2.8455 GiB
    tokens: int(2.8455 * 2**30) = 3,055,305,..., // 65,536 = 46,620 (log: 46,611; the log rounds 21.63 and
            15.54 to 0.01 GiB, i.e. +-0.005 GiB = +-82 tokens each).
    max_num_reqs: min(max(int(46620 / 131072 * 512), 2048), 4096) = 2048 -> ReqToTokenPool 2049 rows;
    max_running_requests = min(46620 // 2, 2049) = 2049 (log: 2049). context_len 131072 (config).
    """
    p = plan(load_config("Qwen__QwQ-32B.json"), gpu=get_gpu("L4"), release="0.4.3.post4", tp_size=4,
             free_memory_before_load_gib=21.63, weights_bytes=int(15.54 * GIB))
    assert p.mem_fraction_static == 0.85
    assert p.cell_size_bytes == 65536
    assert p.max_total_num_tokens == 46620
    assert abs(p.max_total_num_tokens - 46611) / 46611 < 0.002
    assert p.max_running_requests == 2049
    assert p.context_length == 131072
    # K size = V size = 46620 * 65536 / 2 / 2**30 = 1.4227 GiB (log: 1.42 GB each)
    assert round(p.k_size_gib, 2) == 1.42 and round(p.v_size_gib, 2) == 1.42
    # defaults below 25,000 MiB: chunked prefill 2048, cuda graph max bs 80 at TP 4 (log: 2048, 80)
    assert (p.chunked_prefill_size, p.cuda_graph_max_bs) == (2048, 80)
    assert p.source_of("mem_fraction_static").kind == "source"
    assert p.source_of("free_before_load_gib").kind == "input"


def test_gqa_qwen3_0_6b_on_16gb_gpu_release_0_4_10():
    """sgl-025: Qwen3-0.6B on an RTX 5080 (16303 MiB), default mem_fraction_static, 0.4.10.post2 rules.

    mem_fraction_static: gpu_mem 16303 MiB < 20 GiB -> reserved (2.8 + 1/10) * 1024 = 2969.6 MiB;
          round((16303 - 2969.6) / 16303, 3) = round(0.81785, 3) = 0.818.
    cell: 28 layers, 8 KV heads, head_dim 128, bf16: 8 * 256 * 28 * 2 = 114,688 B.
    free before load = 13.91 + 1.25 = 15.16 GiB ('Load weight end. avail mem=13.91, mem usage=1.25').
    rest: 13.91 - 15.16 * 0.182 = 13.91 - 2.75912 = 11.15088 GiB -> // 114,688 = 104,397 (log 104,273).
    """
    p = plan(load_config("Qwen__Qwen3-0.6B.json"), gpu=rtx5080(), release="0.4.10.post2",
             free_memory_before_load_gib=15.16, weights_bytes=int(1.25 * GIB))
    assert p.mem_fraction_static == 0.818
    assert p.cell_size_bytes == 114688
    assert p.max_total_num_tokens == 104397
    assert abs(p.max_total_num_tokens - 104273) / 104273 < 0.002
    assert p.max_running_requests == 2048  # log: 2048 (rows = max_num_reqs from 0.4.10 on)
    assert p.context_length == 40960  # log: context_len=40960


def test_kv_heads_replicated_when_tp_exceeds_them():
    # Qwen2.5-7B: 4 KV heads, head_dim 3584/28 = 128, 28 layers; TP 4 -> 1 head per rank:
    # 1 * (128 + 128) * 28 * 2 = 14,336 B (TP 2 -> 2 heads: 28,672 B)
    cfg = load_config("Qwen__Qwen2.5-7B-Instruct.json")
    kw = {"gpu": get_gpu("H100"), "release": "0.5.7", "mem_fraction_static": 0.8, "free_memory_before_load_gib": 78.0,
              "weights_bytes": 2 * GIB}
    assert plan(cfg, tp_size=4, **kw).cell_size_bytes == 14336
    assert plan(cfg, tp_size=2, **kw).cell_size_bytes == 28672
    # Llama-3.1-8B at TP 16: 8 KV heads replicated, max(1, 8 // 16) = 1 per rank: 1 * 256 * 32 layers * 2 B
    assert plan(load_config("meta-llama__Llama-3.1-8B-Instruct.json"), tp_size=16, **kw).cell_size_bytes == 16384
    # Qwen2.5-7B's 28 query heads do not split over 8 ranks: SGLang's Qwen2Attention asserts it at load
    with pytest.raises(EngineInputError) as err:
        plan(cfg, tp_size=8, **kw)
    assert err.value.field == "tensor_parallel_size" and "28 attention heads" in err.value.message


def test_mi355x_aiter_long_context_factor_release_0_5_7():
    """sgl-006: 5-layer Qwen3-30B-A3B on one MI355X, ROCm, 0.5.7, default fraction, aiter backend.

    gpu_mem 287.98 GiB = 294,891.5 MiB; chunked prefill 16384, cuda graph bs 512 (>= 160 GiB);
    reserved = 512 + 16384 * 1.5 + 512 * 2 + 1 * 1 / 8 * 1024 = 26,240 MiB;
    round((294891.5 - 26240) / 294891.5, 3) = round(0.91102, 3) = 0.911; aiter with context_len 40960 > 8192:
    0.911 * 0.85 = 0.77435.
    cell: 5 layers, 4 KV heads, head_dim 128, bf16: 4 * 256 * 5 * 2 = 10,240 B.
    rest: 287.20 - 12.79 - 287.20 * 0.22565 = 274.41 - 64.80668 = 209.60332 GiB -> 21,978,501 tokens
    (log 21,985,288: -0.03%).
    """
    cfg = load_config("Qwen__Qwen3-30B-A3B.json")
    cfg["num_hidden_layers"] = 5
    p = plan(cfg, gpu=get_gpu("MI355X"), release="0.5.7", free_memory_before_load_gib=287.20,
             weights_bytes=int(12.79 * GIB))
    assert p.attention_backend == "aiter"
    assert p.mem_fraction_static == pytest.approx(0.77435, abs=1e-9)
    assert p.cell_size_bytes == 10240
    assert p.max_total_num_tokens == 21978501
    assert abs(p.max_total_num_tokens - 21985288) / 21985288 < 0.001


# ---------------------------------------------------------------------------------------------------------
# MLA


def test_mla_kimi_k25_vlm_fraction_and_pool_release_0_5_9():
    """sgl-003: Kimi-K2.5 (MLA, multimodal), 8x MI355X, rocm/sgl-dev 'v0.5.8.post1' image of 2026-02-18 (main
    between 0.5.8.post1, which has no Kimi-K2.5 class, and 0.5.9, the first release with it: modelled as 0.5.9),
    default fraction, triton backend.

    reserved = 512 + 16384 * 1.5 + 512 * 2 + 8 / 8 * 1024 = 27,136 MiB;
    round((294891.5 - 27136) / 294891.5, 3) = round(0.90798, 3) = 0.908.
    VLM: vision 27 layers x 1152 hidden: 27 * 1152^2 / (24 * 1024^2) = 1.423828125;
    factor 0.95 * (1 - 0.1 * 0.423828125) = 0.95 * 0.9576171875 = 0.909736328125;
    0.908 * 0.909736328125 = 0.8260405859375 -- exactly the mem_fraction_static the log prints.
    cell: (512 + 64) * 61 * 2 = 70,272 B.
    rest: 283.56 - 73.58 - 283.56 * 0.1739594140625 = 209.98 - 49.32793 = 160.65207 GiB
    -> 2,454,730 tokens (log 2,454,421); KV size 2,454,730 * 70,272 / 2**30 = 160.65 GiB (log 160.63).
    Default backend: MLA on ROCm with 64 KV heads / 8 = 8 per rank (aiter needs 16 or 128) -> triton (log).
    """
    p = plan(load_config("moonshotai__Kimi-K2.5.json"), gpu=get_gpu("MI355X"), release="0.5.9", tp_size=8,
             free_memory_before_load_gib=283.56, weights_bytes=int(73.58 * GIB))
    assert p.mem_fraction_static == pytest.approx(0.8260405859375, abs=1e-12)
    assert p.attention == "mla" and p.cell_size_bytes == 70272
    assert p.max_total_num_tokens == 2454730
    assert abs(p.max_total_num_tokens - 2454421) / 2454421 < 0.001
    assert round(p.kv_size_gib, 2) == 160.65 and p.k_size_gib is None
    assert p.attention_backend == "triton"


def test_nsa_cell_and_pool_sizes_match_the_pr_11309_logs():
    """sgl-004 / sgl-005 (DeepSeek-V3.2-Exp, 8x B200, --tp 8 --dp 8 --enable-dp-attention).

    KV dtype fp8 on SM100 (1 byte). Profile cell: (512 + 64) * 61 * 1 = 35,136 B (0.5.3); 0.5.3.post1 adds
    the indexer (128 + 128 // 128 * 4) * 61 = 8,052 -> 43,188 B.
    Pool rows: fp8 NSA layout 512 + 512 // 128 * 4 + 64 * 2 = 656 B per layer -> 656 * 61 = 40,016 B; with
    the indexer 48,068 B.
    Logged: 1,462,784 tokens * 40,016 / 2**30 = 54.51 GiB ('KV size: 54.52 GB', indexer left out in 0.5.3);
            975,424 * 48,068 / 2**30 = 43.67 GiB ('KV size: 43.67 GB' with the PR).
    Default fraction with the PR (0.5.3.post1): reserved = 512 + 16384 * 1.5 + 512 * 2 + 8 / 8 * 1024
      + 512 * 8 * 3 + 512 * 8 * 1.5 = 45,568 MiB; round((182,640.6 - 45,568) / 182,640.6, 3) = 0.751.
    Both records on one machine: rest_005 - rest_004 = T * (0.8 - 0.751) with
      rest_005 >= 1,462,784 * 35,136 / 2**30 = 47.867 GiB, rest_004 >= 975,424 * 43,188 / 2**30 = 39.233 GiB
      -> T = 8.633 / 0.049 = 176.2 GiB free before loading, i.e. 2.2 GiB below the B200's 178.36: both logs
      are explained by one free-memory figure.
    """
    cfg = v32_config()
    b200 = get_gpu("B200")
    old = plan(cfg, gpu=b200, release="0.5.3", tp_size=8, dp_size=8, enable_dp_attention=True)
    new = plan(cfg, gpu=b200, release="0.5.3.post1", tp_size=8, dp_size=8, enable_dp_attention=True)
    assert old.attention == new.attention == "nsa" and old.kv_cache_dtype == "fp8_e4m3"
    assert old.page_size == new.page_size == 64
    assert old.cell_size_bytes == 35136 and new.cell_size_bytes == 43188
    assert old.pool_bytes_per_token == new.pool_bytes_per_token == 48068
    capacity_mib = b200.memory_gib * 1024  # 178.35 GiB (a public CUDA device query) = 182,630.4 MiB
    assert old.mem_fraction_static == 0.8
    assert new.mem_fraction_static == round((capacity_mib - 45568) / capacity_mib, 3) == 0.75
    assert round(1462784 * 40016 / GIB, 2) == 54.51  # by hand, vs logged 54.52
    assert round(975424 * new.pool_bytes_per_token / GIB, 2) == 43.67
    assert new.chunked_prefill_size == 16384 // 8
    t = (1462784 * 35136 / GIB - 975424 * 43188 / GIB) / (0.8 - 0.751)  # the fraction on the logs' machine
    assert 174.0 < t < b200.memory_gib
    # both plans put tokens on page boundaries
    assert old.max_total_num_tokens % 64 == 0 and new.max_total_num_tokens % 64 == 0


# ---------------------------------------------------------------------------------------------------------
# Sliding window


def test_gemma2_sliding_layers_keep_full_length_kv():
    # Gemma-2-9B: 42 layers (every other one sliding, window 4096), 8 KV heads, head_dim 256, bf16.
    # SGLang disables the hybrid SWA pool for Gemma 2 (server_args.py), so all 42 layers are sized:
    # 8 * (256 + 256) * 42 * 2 = 344,064 B per token.
    p = plan(load_config("google__gemma-2-9b-it.json"), gpu=get_gpu("H100"), release="0.5.3",
             mem_fraction_static=0.8, free_memory_before_load_gib=78.0, weights_bytes=18 * GIB)
    assert p.cell_size_bytes == 344064
    assert p.swa_max_total_num_tokens is None
    assert "gemma_swa_off" in R._LINES["0.5.3"] and p.source_of("sliding_window").source == R.cite("0.5.3", "gemma_swa_off")
    # rest = 78 - 18 - 78 * 0.2 = 44.4 GiB -> int(44.4 * 2**30) // 344,064 = 138,561
    assert p.max_total_num_tokens == 138561


def test_gpt_oss_hybrid_swa_split_release_0_5_10():
    """gpt-oss-20b on H100, 0.5.10.post1 (hybrid SWA pool on): 24 layers (12 sliding, 12 full), 8 KV heads,
    head_dim 64, bf16: per layer 8 * (64 + 64) * 2 = 2,048 B; cell = 2,048 * 24 = 49,152 B.
    rest = 78 - 13 - 78 * 0.2 = 49.4 GiB -> capacity int(49.4 * 2**30) // 49,152 = 1,079,159 tokens.
    Split with swa_full_tokens_ratio 0.8: full = int(1,079,159 * (12 + 12) / (12 + 0.8 * 12))
    = int(1,079,159 * 24 / 21.6) = 1,199,065; swa = int(1,199,065 * 0.8) = 959,252.
    Up to 0.5.7 the pool is not split: 1,079,159 tokens on every layer.
    """
    cfg = load_config("openai__gpt-oss-20b.json")
    kw = {"gpu": get_gpu("H100"), "mem_fraction_static": 0.8, "free_memory_before_load_gib": 78.0, "weights_bytes": 13 * GIB}
    p = plan(cfg, release="0.5.10.post1", **kw)
    assert p.attention == "hybrid_swa" and p.attention_backend == "fa3"
    assert p.cell_size_bytes == 49152
    assert p.max_total_num_tokens == 1199065 and p.swa_max_total_num_tokens == 959252
    old = plan(cfg, release="0.5.7", **kw)
    assert old.max_total_num_tokens == 1079159 and old.swa_max_total_num_tokens is None


# ---------------------------------------------------------------------------------------------------------
# Hybrid GDN


def test_hybrid_gdn_qwen35_9b_mamba_split_release_0_5_10():
    """sgl-015: Qwen3.5-9B, 2x RTX 4090, --tp-size 2 --mem-fraction-static 0.8 --context-length 262144.

    Linear (GDN) layers: 24 of 32 (every 4th is full attention). Per request per linear layer at TP 2:
      conv: (128 * 32 + 2 * 16 * 128) / 2 * (4 - 1) * 2 B = 4096 * 3 * 2 = 24,576 B
      ssm:  (32 / 2) * 128 * 128 * 4 B (float32) = 1,048,576 B
      per request: 24 * (24,576 + 1,048,576) = 25,755,648 B.
    rest = 22.93 - 8.85 - 22.93 * 0.2 = 9.494 GiB; Mamba share 9.494 * 0.9 / 1.9 = 4.49716 GiB
      -> max_mamba_cache_size = int(4.49716 * 2**30) // 25,755,648 = 187 (log 186; ssm 187 * 24 * 1 MiB
      = 4.38 GiB = the logged 'ssm_state size: 4.38GB', conv 187 * 24 * 24,576 B = 0.10 GiB, logged 0.10).
    KV: 9.494 - 187 * 25,755,648 / 2**30 = 5.00847 GiB; cell 8 full layers * (4 // 2) * (256 + 256) * 2
      = 16,384 B -> 328,234 tokens (log 327,310: +0.28%); K = V = 328,234 * 8,192 / 2**30 = 2.50 GiB (log 2.50).
    max_running_requests = min(..., 187 // 3) = 62 (log 62).
    """
    p = plan(load_config("Qwen__Qwen3.5-9B.json"), gpu=get_gpu("RTX4090"), release="0.5.10.post1", tp_size=2,
             mem_fraction_static=0.8, context_length=262144, free_memory_before_load_gib=22.93,
             weights_bytes=int(8.85 * GIB))
    assert p.attention == "hybrid_gdn"
    assert p.mamba.per_request_bytes == 25755648
    assert p.mamba.max_mamba_cache_size == 187
    assert round(p.mamba.ssm_state_gib, 2) == 4.38 and round(p.mamba.conv_state_gib, 2) == 0.10
    assert p.cell_size_bytes == 16384
    assert p.max_total_num_tokens == 328234
    assert abs(p.max_total_num_tokens - 327310) / 327310 < 0.005
    assert round(p.k_size_gib, 2) == 2.50
    assert p.max_running_requests == 62


# ---------------------------------------------------------------------------------------------------------
# Speculative decoding


def test_eagle_defaults_and_draft_pool():
    """Llama-3.1-8B + EAGLE3 head on H100, 0.5.7: defaults (5, 4, 8) for LlamaForCausalLM; reserve + 2 GiB;
    max_running_requests 48. Draft KV: the EAGLE3 head has 1 layer, 8 KV heads, head_dim 128, bf16:
    8 * 2 * 128 * 1 * 2 = 4,096 B per token over the target's token count."""
    target = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    draft = load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")
    kw = {"gpu": get_gpu("H100"), "release": "0.5.7", "free_memory_before_load_gib": 78.5, "weights_bytes": 15 * GIB}
    base = plan(target, **kw)
    p = plan(target, speculative_algorithm="EAGLE3", draft_hf_config=draft, draft_weights_bytes=GIB, **kw)
    s = p.speculative
    assert (s.num_steps, s.eagle_topk, s.num_draft_tokens) == (5, 4, 8)
    assert p.max_running_requests == 48
    # H100: gpu_mem 81,090.6 MiB; reserved 512 + 8192 * 1.5 + 256 * 2 + 1024 / 8 = 13,440 -> 0.834;
    # with EAGLE + 2048 -> 15,488 -> round(65,602.6 / 81,090.6, 3) = 0.809
    assert base.mem_fraction_static == 0.834 and p.mem_fraction_static == 0.809
    assert s.draft_cell_size_bytes == 4096
    assert s.draft_kv_gib == pytest.approx(p.max_total_num_tokens * 4096 / GIB)


def test_mtp_uses_nextn_layers_and_topk1_draft_tokens():
    # DeepSeek-V3 NEXTN: 1 MTP layer -> draft cell (512 + 64) * 1 * 2 = 1,152 B; defaults (3, 1, 4) for
    # DeepSeek; topk 1 -> num_draft_tokens = num_steps + 1 = 4.
    p = plan(load_config("deepseek-ai__DeepSeek-V3.json"), gpu=get_gpu("H200"), release="0.5.10.post1", tp_size=8,
             speculative_algorithm="MTP", free_memory_before_load_gib=137.0, weights_bytes=80 * GIB)
    assert (p.speculative.num_steps, p.speculative.eagle_topk, p.speculative.num_draft_tokens) == (3, 1, 4)
    assert p.speculative.draft_cell_size_bytes == 1152


# ---------------------------------------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize("kw,field", [
    ({"release": "0.4.0"}, "release"),
    ({"release": "0.5.7", "pp_size": 2}, "pp_size"),
    ({"release": "0.5.7", "kv_cache_dtype": "int4"}, "kv_cache_dtype"),
    ({"release": "0.5.7", "mem_fraction_static": 1.2}, "mem_fraction_static"),
    ({"release": "0.4.10.post2", "page_size": 16, "tp_size": 0}, "tp_size"),
    ({"release": "0.4.3.post4", "page_size": 16}, "page_size"),
    ({"release": "0.5.7", "enable_dp_attention": True, "tp_size": 4, "dp_size": 3}, "dp_size"),
])
def test_bad_or_unmodelled_input_names_the_field(kw, field):
    with pytest.raises(EngineInputError) as e:
        plan(load_config("Qwen__Qwen3-8B.json"), gpu=get_gpu("H100"), **kw)
    assert e.value.field == field


def test_unmodelled_architectures_are_refused_by_name():
    with pytest.raises(EngineInputError, match="Mamba-2 hybrid"):
        plan(load_config("nvidia__Nemotron-H-56B-Base-8K.json"), gpu=get_gpu("H100"), release="0.5.10.post1")
    with pytest.raises(EngineInputError, match="sliding-window") as e:
        plan(load_config("microsoft__Phi-3-mini-4k-instruct.json"), gpu=get_gpu("H100"), release="0.5.10.post1")
    assert e.value.field == "config.sliding_window"
    with pytest.raises(EngineInputError, match="not a model class of SGLang 0.5.7"):
        plan(load_config("Qwen__Qwen3.5-9B.json"), gpu=get_gpu("H100"), release="0.5.7")
    with pytest.raises(EngineInputError, match="not a model class of SGLang 0.4.3.post4"):
        plan(load_config("Qwen__Qwen3-8B.json"), gpu=get_gpu("H100"), release="0.4.3.post4")
    with pytest.raises(EngineInputError) as e:
        plan(load_config("meta-llama__Llama-3.2-11B-Vision.json"), gpu=get_gpu("H100"), release="0.5.7")
    assert e.value.field == "config.cross_attention_layers"


def test_release_coverage_is_explicit():
    assert COVERED == ("0.4.3.post4", "0.4.10.post2", "0.5.3", "0.5.3.post1", "0.5.7", "0.5.8.post1", "0.5.9",
                       "0.5.10.post1", "0.5.23")
    # the default is the newest covered release (what SGLang users run today); what 0.5.23 does not model is refused
    # naming 0.5.10.post1, which does
    assert R.DEFAULT == COVERED[-1] == "0.5.23"


# ---------------------------------------------------------------------------------------------------------
# Attention backends


def test_default_backends_match_the_logs():
    # sgl-011 server_args: attention_backend='flashinfer' (QwQ-32B on L4, 0.4.3.post4)
    assert default_backend("0.4.3.post4", get_gpu("L4"), load_config("Qwen__QwQ-32B.json")).backend == "flashinfer"
    # sgl-003 server_args: attention_backend='triton' (Kimi-K2.5 MLA, TP 8, ROCm)
    assert default_backend("0.5.9", get_gpu("MI355X"), load_config("moonshotai__Kimi-K2.5.json"),
                           tp_size=8).backend == "triton"
    # sgl-021: 'Attention backend not specified. Use flashinfer backend by default.' is the non-Hopper,
    # non-SM100 branch; on H100 the same MHA model gets fa3, on B200 (0.5.7+) trtllm_mha
    q = load_config("Qwen__Qwen3-8B.json")
    assert default_backend("0.5.10.post1", get_gpu("A100"), q).backend == "flashinfer"
    assert default_backend("0.5.10.post1", get_gpu("H100"), q).backend == "fa3"
    assert default_backend("0.5.10.post1", get_gpu("B200"), q).backend == "trtllm_mha"
    assert default_backend("0.5.3", get_gpu("B200"), q).backend == "flashinfer"
    assert default_backend("0.5.3", get_gpu("B200"), v32_config()).backend == "nsa"


def test_backend_refusals_cite_sglang_lines():
    ds = load_config("deepseek-ai__DeepSeek-V3.json")
    llama = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    v = check_backend("0.5.10.post1", get_gpu("A100"), ds, "fa3")
    assert v.verdict == "no"
    assert v.reasons[0].source == "sglang==0.5.10.post1 sglang/srt/layers/attention/attention_registry.py:133"
    v = check_backend("0.5.10.post1", get_gpu("H100"), llama, "trtllm_mla")
    assert v.verdict == "no" and any("MLA models" in r.text for r in v.reasons)
    v = check_backend("0.5.3", get_gpu("H100"), llama, "trtllm_mha")
    assert v.verdict == "no" and v.reasons[0].source == "sglang==0.5.3 sglang/srt/server_args.py:921"
    v = check_backend("0.5.7", get_gpu("B200"), llama, "fa4")
    assert v.verdict == "no" and "prefill" in v.reasons[0].text
    v = check_backend("0.5.7", get_gpu("H100"), ds, "flashmla", page_size=1)
    # page 64 (server_args.py:1587); H100 is among sgl-kernel's FlashMLA builds (sm_90a, sm_100a): starts
    assert v.page_size == 64 and v.verdict == "adjusted"
    v = check_backend("0.5.7", get_gpu("MI355X"), llama, "flashinfer")
    assert v.verdict == "no"
    assert check_backend("0.5.7", get_gpu("H100"), llama, "fa3").verdict == "works"
    with pytest.raises(EngineInputError) as e:
        check_backend("0.4.3.post4", get_gpu("H100"), llama, "fa3")
    assert e.value.field == "attention_backend"


@pytest.mark.parametrize("release,model,gpu,backend", [
    ("0.5.10.post1", "deepseek-ai__DeepSeek-R1.json", "B200", "trtllm_mla"),
    ("0.5.7", "deepseek-ai__DeepSeek-R1.json", "B200", "trtllm_mla"),
    ("0.5.3.post1", "deepseek-ai__DeepSeek-R1.json", "B200", "flashinfer"),  # no model-specific pick yet
    ("0.5.10.post1", "deepseek-ai__DeepSeek-R1.json", "H200", "fa3"),  # SM90: the generic MLA rule
    ("0.5.9", "moonshotai__Kimi-K2.5.json", "B200", "trtllm_mla"),  # KimiK25 joins the list in 0.5.9
    ("0.5.8.post1", "moonshotai__Kimi-K2.5.json", "B200", "flashinfer"),
])
def test_deepseek_mla_on_sm100_gets_trtllm_mla_with_64_token_pages(release, model, gpu, backend):
    """ServerArgs._handle_model_specific_adjustments (0.5.7+): DeepseekV3ForCausalLM without NSA (and the
    architectures listed with it: KimiK25 from 0.5.9) on SM100 gets trtllm_mla when no backend is given
    ("Use trtllm_mla as attention backend on sm100 for DeepseekV3ForCausalLM", server_args.py:1610 in 0.5.10.post1),
    and trtllm_mla takes 64-token pages (:2348-2355); the kv-cache-dtype check reads the flag ("auto")."""
    choice = default_backend(release, get_gpu(gpu), load_config(model))
    assert choice.backend == backend
    if backend == "trtllm_mla":
        assert "model-specific" in choice.reason
        wheel = wheel_of(release)
        if wheel.exists():  # the cited line is the log line
            rel, line = choice.source.rsplit(":", 1)
            with zipfile.ZipFile(wheel) as z:
                text = z.read("sglang/srt/server_args.py").decode().splitlines()[int(line) - 1]
            assert "Use trtllm_mla as attention backend on sm100" in text
    if model.startswith("deepseek") and release == "0.5.10.post1":
        p = plan(load_config(model), gpu=get_gpu(gpu), release=release, tp_size=8)
        assert p.page_size == (64 if gpu == "B200" else 1)


_CITED_TEXT = [  # (release, rule, text the cited line must contain)
    ("0.4.3.post4", "profile", "rest_memory = available_gpu_memory - total_gpu_memory"),
    ("0.5.3", "nsa_mfs", "self.mem_fraction_static = 0.8"),
    ("0.5.3.post1", "nsa_indexer", "indexer KV cache"),
    ("0.5.7", "aiter", "self.mem_fraction_static *= 0.85"),
    ("0.5.8.post1", "vlm_formula", "def adjust_mem_fraction_for_vlm"),
    ("0.5.10.post1", "mamba_split", "mamba_state_memory_raw"),
    ("0.5.10.post1", "page_align", "capacity // page_size * page_size"),
    ("0.5.9", "nsa_archs", "def is_deepseek_nsa"),
    ("0.5.9", "nsa_page", "if is_hip():"),
    ("0.5.9", "nsa_pool", "def calculate_mla_kv_cache_dim"),
    ("0.5.7", "nsa", "self.enable_dp_attention = True"),
    ("0.5.7", "nsa_pool", "Calculate override_kv_cache_dim"),
    ("0.5.3.post1", "nsa", "self.enable_dp_attention = True"),
    ("0.4.3.post4", "context_over", "raise ValueError("),
    ("0.4.10.post2", "context_over", '"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", default="True"'),
    ("0.5.3", "context_over", "raise ValueError("),
    ("0.5.3.post1", "context_over", "raise ValueError("),
    ("0.5.7", "context_over", "raise ValueError("),
    ("0.5.8.post1", "context_over", "raise ValueError("),
    ("0.5.9", "context_over", "raise ValueError("),
    ("0.5.10.post1", "context_over", "raise ValueError("),
    ("0.5.23", "context_over", "raise ValueError("),
    ("0.5.23", "mfs_reserved", "reserved_mem = 512"),
    ("0.5.23", "gpu_tables", "if gpu_mem is not None:"),
    ("0.5.23", "decode_bs_cap", "decode_cuda_graph_config.max_bs = cfg.max_running_requests"),
    ("0.5.23", "piecewise", "reserved_mem += len(prefill_cuda_graph_config.bs) * 8"),
    ("0.5.23", "piecewise_mla", "reserved_mem += 1.5 * 1024"),
    ("0.5.23", "piecewise_default", "Backend.BREAKABLE if is_cuda() else Backend.DISABLED"),
    ("0.5.23", "piecewise_max_tokens", "prefill_cuda_graph_config.max_bs = cfg.chunked_prefill_size"),
    ("0.5.23", "profile", "rest_memory = available_gpu_memory - slack_gb - mm_reservation_gb"),
    ("0.5.23", "page_align", "max_total_num_tokens // page_size * page_size"),
    ("0.5.23", "max_num_reqs", "estimated = int(token_capacity / self.model_config.context_len * 512)"),
    ("0.5.23", "max_num_reqs_flag", "min(requested_per_worker, token_capacity // 2)"),
    ("0.5.23", "spec_cell", "draft_kv_size = int("),
    ("0.5.23", "spec_draft_first", "self.maybe_init_draft_worker()"),
    ("0.5.23", "spec_max_running", "max_running_requests=48"),
    ("0.5.23", "req_to_token_pad", "self._alloc_size = size + 1"),
    ("0.5.23", "mm_reserve", "SGLANG_VLM_CACHE_SIZE_MB"),
    ("0.5.23", "aiter", "mem_fraction_static * 0.85"),
    ("0.5.23", "dp_chunked", "chunked_prefill_size // cfg.attn_dp_size"),
    ("0.5.23", "post_capture", "SGLANG_ENABLE_POST_CAPTURE_KV_SIZING = EnvBool(False)"),
    ("0.5.23", "rope_cache", "if not (_is_cuda or _is_hip"),
    ("0.5.23", "pool_end", "Memory pool end."),
    ("0.5.23", "kv_log", "'is allocated'"),
    ("0.5.23", "dp_prefill_graph", 'clamped = {"max_bs": cfg.chunked_prefill_size}'),
    ("0.5.23", "swa_layer_ids", "arch in SWA_SINK_ARCHS"),
    ("0.5.23", "swa_configurator", "return HybridSWAPoolConfigurator(kvc)"),
    ("0.5.23", "swa_request_cap", "def is_applicable("),
    ("0.5.23", "swa_cell", "self._swa_full_tokens_ratio * self._swa_cell_bytes()"),
    ("0.5.23", "swa_draft_layers", "self._draft_full_layers_num = ("),
    ("0.5.23", "swa_tokens", "int(available_bytes // self._cell_size)"),
    ("0.5.23", "swa_split", "int(full_tokens * self._swa_full_tokens_ratio)"),
    ("0.5.23", "swa_validate", "if sliding_window_size + page_size >= swa_tokens:"),
    ("0.5.23", "swa_ratio_default", "fallback=0.8"),
    ("0.5.23", "mamba_ratio_default", "fallback=0.9"),
    ("0.5.23", "mamba_split", "mamba_full_memory_ratio"),
    ("0.5.23", "mamba_size", "(mamba_budget_bytes - replayssm_fixed_bytes - per_slot)"),
    ("0.5.23", "mamba_pad", "(get_schedule().max_mamba_cache_size + 1) * (stage_per_req + extra_per_slot)"),
    ("0.5.23", "mamba_too_small", "max_mamba_cache_size <= 0"),
    ("0.5.23", "mamba_ratio", "mamba_cap = get_schedule().max_mamba_cache_size // ratio"),
    ("0.5.23", "mamba_ratio_base", "MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3"),
    ("0.5.23", "mamba_tracking", "return 2 if overlap else 1"),
    ("0.5.23", "mamba_extra_buffer", 'declared["mamba_radix_cache_strategy"] = "extra_buffer"'),
    ("0.5.23", "mamba_no_reqs", "if max_num_reqs <= 0:"),
    ("0.5.23", "nsa_page", "page_size = 64 * index_kpool"),
    ("0.5.23", "nsa_kv_dtype", '"fp8_e4m3" if major >= 10 and not has_attention_sinks else "bfloat16"'),
    ("0.5.23", "dsa_backends", 'default = "trtllm" if major >= 10 else "flashmla_kv"'),
    ("0.5.23", "nsa_pool", "+ qk_rope_head_dim * rope_storage_dtype.itemsize"),
    ("0.5.23", "nsa_indexer", "index_head_dim + index_head_dim // DSATokenToKVPool.quant_block_size * 4,"),
    ("0.5.23", "dsa_draft_cell", "draft_kv_size = ("),
    ("0.5.23", "dsa_skip_topk", "def dsa_layer_skips_topk("),
    ("0.5.23", "dsa_glm_sm12", "is_glm_sm12_fp8 = ("),
    ("0.5.10.post1", "piecewise_mm", "if self.get_model_config().is_multimodal:"),
    ("0.5.10.post1", "mm_subconfig", "has_multimodal_subconfig = ("),
    ("0.5.23", "mm_subconfig", "has_multimodal_subconfig = self.hf_config is not self.hf_text_config or ("),
    ("0.5.23", "mm_is_multimodal", "self.is_multimodal = ("),
    ("0.5.23", "mm_lm_only", "self.is_lm_only = language_model_only or getattr("),
    ("0.5.23", "hf_text_config", "# Priority: thinker_config > llm_config > language_config > text_config"),
    *[(rel, "nextn_eh_proj", "self.eh_proj = nn.Linear(") for rel in COVERED],
    *[(rel, "nextn_decoder", "quant_config=quant_config,") for rel in COVERED],
    *[(rel, "nextn_modelopt_off", 'quant_config.get_name() == "modelopt_fp4"') for rel in COVERED[1:]],
    *[(rel, "glm_nextn_eh_proj", "self.eh_proj = nn.Linear(") for rel in COVERED[1:]],
    *[(rel, "glm_nextn_decoder", "quant_config=quant_config,") for rel in COVERED[1:]],
    *[(rel, "glm_nextn_modelopt_off", 'quant_config.get_name() == "modelopt_fp4"') for rel in COVERED[1:]],
    *[(rel, "spec_share_embed", ".model.set_embed_and_head(embed, head)") for rel in COVERED],
    ("0.4.3.post4", "nextn_w_kc", "self_attn.w_kc = "),
    *[(rel, "nextn_w_kc", "layer_ids = [self.config.num_hidden_layers]") for rel in COVERED[1:]],
    # the DSA indexer (weights.dsa_indexer_bytes) and the NEXTN drafts of DSA models and GLM-4.7-Flash
    *[(rel, "idx_wq_b", "self.wq_b = ReplicatedLinear(") for rel in COVERED[2:]],
    *[(rel, "idx_wk", "self.wk = ReplicatedLinear(") for rel in COVERED[2:]],
    *[(rel, "idx_weights_proj", "self.weights_proj = ReplicatedLinear(") for rel in ("0.5.3", "0.5.3.post1")],
    ("0.5.7", "idx_weights_proj", "params_dtype=torch.float32,"),
    *[(rel, "idx_weights_proj", "params_dtype=torch.bfloat16 if _is_cuda else torch.float32,")
      for rel in ("0.5.8.post1", "0.5.9", "0.5.10.post1")],
    ("0.5.23", "idx_weights_proj", "params_dtype=torch.bfloat16,"),
    *[(rel, "idx_k_norm", "self.weight = nn.Parameter(torch.ones(dim, dtype=torch.float32))")
      for rel in ("0.5.3", "0.5.3.post1")],
    *[(rel, "idx_k_norm", "self.k_norm = LayerNorm(self.head_dim, dtype=torch.float32)")
      for rel in ("0.5.7", "0.5.8.post1", "0.5.9", "0.5.10.post1")],
    ("0.5.23", "idx_k_norm", "torch.float32"),
    ("0.5.23", "idx_k_norm_rms", "self.k_norm = RMSNorm(self.head_dim)"),
    ("0.5.23", "idx_fusion", "self.use_dsa_indexer_fusion = ("),
    ("0.5.23", "idx_fused", "self.wk_weights_proj = ReplicatedLinear("),
    ("0.5.23", "idx_neox", 'is_neox_style = not getattr(config, "indexer_rope_interleave", False)'),
    ("0.5.23", "idx_layer", "if not self.skip_topk or is_nextn:"),
    *[(rel, "nextn_dsa_draft", 'in ["DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM"]')
      for rel in ("0.5.3", "0.5.3.post1")],
    *[(rel, "nextn_dsa_draft", '"DeepseekV3ForCausalLMNextN",') for rel in COVERED[4:]],
    *[(rel, "nextn_dsa_rename", 'self.hf_config.architectures[0] = "DeepseekV3ForCausalLMNextN"')
      for rel in COVERED[2:]],
    *[(rel, "v32_config_load", 'config_json["architectures"] = ["DeepseekV3ForCausalLM"]') for rel in COVERED[2:8]],
    *[(rel, "glm_dsa_nextn_rename", '"GlmMoeDsaForCausalLM",') for rel in ("0.5.9", "0.5.10.post1")],
    ("0.5.23", "glm_dsa_nextn_rename", 'self.hf_config.architectures[0] = "GlmMoeDsaForCausalLMNextN"'),
    ("0.5.23", "glm_dsa_nextn_cls", "class GlmMoeDsaForCausalLMNextN(DeepseekV3ForCausalLMNextN):"),
    *[(rel, "glm_lite_nextn_rename", 'self.hf_config.architectures[0] = "Glm4MoeForCausalLMNextN"')
      for rel in ("0.5.8.post1", "0.5.9", "0.5.10.post1")],
    ("0.5.23", "glm_lite_nextn_rename", 'self.hf_config.architectures[0] = "Glm4MoeLiteForCausalLMNextN"'),
    *[(rel, rule, text) for rel in ("0.5.8.post1", "0.5.9", "0.5.10.post1") for rule, text in (
        ("glm_gqa_attn", "self.self_attn = Glm4MoeAttention("), ("glm_gqa_head_dim", "head_dim = getattr("),
        ("glm_gqa_qkv", "self.qkv_proj = QKVParallelLinear("), ("glm_gqa_rope", "self.rotary_emb = get_rope("),
        ("glm_gate_bias", "torch.empty((config.n_routed_experts), dtype=torch.float32)"),
        ("glm_experts", "num_experts=config.n_routed_experts + self.num_fused_shared_experts,"),
        ("mc_mla_list", 'or "Glm4MoeLiteForCausalLM" in self.hf_config.architectures'),
        ("mc_head_dim", "self.head_dim = getattr("), ("draft_mha_pool", "self.token_to_kv_pool = MHATokenToKVPool("))],
    ("0.5.8.post1", "mla_rope_neox", "is_neox_style=False,"),
    *[(rel, "mla_rope_neox", 'is_neox_style = not getattr(config, "rope_interleave", True)')
      for rel in ("0.5.9", "0.5.10.post1")],
    ("0.5.23", "glm_lite_nextn_eh_proj", "self.eh_proj = nn.Linear("),
    ("0.5.23", "glm_lite_nextn_decoder", "self.decoder = Glm4MoeLiteDecoderLayer("),
    ("0.5.23", "glm_lite_nextn_modelopt_off", "quant_config = None"),
    ("0.5.23", "glm_lite_nextn_w_kc", "self.post_load_weights(is_nextn=is_nextn, weight_names=None)"),
    # --kv-cache-dtype auto and the checkpoint's KV scheme (kv_dtype.py)
    *[(rel, "kv_auto", 'kv_cache_dtype == "auto"') for rel in COVERED[:8]],
    ("0.5.23", "kv_auto", 'if server_args_kv_cache_dtype == "auto":'),
    *[(rel, "q_detect", "def _parse_quant_hf_config(self):") for rel in COVERED[1:]],
    ("0.4.10.post2", "q_file", "quant_cfg = modelopt_quant_config"), ("0.5.3", "q_file", "quant_cfg = modelopt_quant_config"),
    *[(rel, "q_file", "def _parse_modelopt_quant_config(self") for rel in COVERED[3:]],
    ("0.5.9", "q_cfg_rewrite", 'if "quant_method" not in quant_cfg:'),
    *[(rel, "q_verify", "quantization_override = method.override_quantization_method(") for rel in COVERED[1:]],
    *[(rel, "q_compat", "compatible_quantization_methods = {") for rel in COVERED[1:]],
    *[(rel, "q_unknown", 'f"Unknown quantization method: {self.quantization}') for rel in COVERED[1:]],
    ("0.5.3", "q_alias_fp8", '"modelopt": ModelOptFp8Config'),
    ("0.5.3.post1", "q_alias_fp8", '"modelopt_fp8": ModelOptFp8Config'),
    *[(rel, "mo_override", 'if user_quant == "modelopt":') for rel in COVERED[4:]],
    *[(rel, "mo_fp8_kv_attr", "self.kv_cache_quant_method = kv_cache_quant_method") for rel in COVERED[1:4]],
    *[(rel, "mo_fp8_kv_attr", "self.kv_cache_quant_algo = kv_cache_quant_algo") for rel in COVERED[4:]],
    *[(rel, "mo_fp4_kv_attr", "self.kv_cache_quant_algo = kv_cache_quant_algo") for rel in COVERED[1:]],
    *[(rel, "mo_fp8_flat_kv", 'kv_cache_scheme = config.get("kv_cache_scheme")') for rel in COVERED[2:]],
    *[(rel, "mo_fp8_nested_kv", 'quantization_section.get("kv_cache_quant_algo")') for rel in COVERED[2:]],
    *[(rel, "mo_fp4_nested_kv", 'quant_config.get("kv_cache_quant_algo")') for rel in COVERED[2:]],
    *[(rel, "mo_fp4_flat_kv", 'kv_cache_quant_algo = config.get("kv_cache_quant_algo")') for rel in COVERED[2:6]],
    *[(rel, "mo_fp4_flat_kv", 'kv_cache_scheme = config.get("kv_cache_scheme")') for rel in COVERED[6:]],
    *[(rel, "mo_fp8_algo", 'if "FP8" not in quant_method:') for rel in COVERED[1:8]],
    ("0.5.23", "mo_fp8_algo", 'if quant_method != "FP8":'),
    ("0.5.23", "ct_kv_attr", "def kv_cache_quant_algo(self) -> Optional[str]:"),
    ("0.5.23", "ct_kv_scheme", "def is_supported_scheme(kv_cache_scheme"),
    ("0.5.23", "fp8_kv_attr", "kv_cache_quant_algo = cls.get_from_keys_or("),
    ("0.5.3", "nsa_kv_dtype", "if major >= 10:"), ("0.5.3.post1", "nsa_kv_dtype", "if major >= 10:"),
    *[(rel, "nsa_kv_dtype", 'if self.kv_cache_dtype == "auto":') for rel in COVERED[4:8]],
    *[(rel, "nsa_kv_assert", "assert self.kv_cache_dtype in [") for rel in COVERED[4:8]],
    # the DSA indexer's rope against the attention's (weights.dsa_indexer_rope_bytes)
    *[(rel, "idx_rope_neox", "is_neox_style=False,") for rel in COVERED[2:4]],
    *[(rel, "idx_rope_neox", "is_neox_style=True,") for rel in COVERED[4:6]],
    *[(rel, "idx_rope_neox", 'is_neox_style = not getattr(config, "indexer_rope_interleave", False)')
      for rel in COVERED[6:]],
    *[(rel, "mla_rope_neox", "is_neox_style=False,") for rel in COVERED[2:6]],
    *[(rel, "mla_rope_neox", 'is_neox_style = not getattr(config, "rope_interleave", True)') for rel in COVERED[6:]],
    *[(rel, "rope_key", "key = (") for rel in COVERED[2:]],
    *[(rel, "gemma3_vision", "self.vision_tower = SiglipVisionModel(") for rel in COVERED[1:]],
    *[(rel, "gemma3_rope", "self.rope_scaling = config.rope_scaling") for rel in COVERED[1:7]],
    *[(rel, "gemma3_rope", 'self.rope_scaling = {"rope_type": "default"}') for rel in COVERED[7:]],
    # speculative decoding and the overlap scheduler (releases.spec_overlap)
    *[(rel, "spec_overlap_off", "self.disable_overlap_schedule = True") for rel in COVERED[:8]],
    *[(rel, "spec_v2_env", "SGLANG_ENABLE_SPEC_V2 = EnvBool(False)") for rel in COVERED[4:8]],
    *[(rel, "spec_v2_mimo", "if not envs.SGLANG_ENABLE_SPEC_V2.get():") for rel in COVERED[4:8]],
    *[(rel, "spec_v2_step3p5", "if not envs.SGLANG_ENABLE_SPEC_V2.get():") for rel in ("0.5.9", "0.5.10.post1")],
    ("0.5.23", "spec_overlap_cpu", "def _disable_overlap_schedule_for_cpu(server_args: ServerArgs) -> None:"),
    ("0.5.23", "spec_overlap_on", "_disable_overlap_schedule_for_cpu(server_args)"),
]


@pytest.mark.parametrize("release,rule,text", _CITED_TEXT)
def test_cited_lines_say_what_the_rule_says(release, rule, text):
    wheel = wheel_of(release)
    if not wheel.exists():
        pytest.skip(f"{wheel} not downloaded (pip download sglang=={release} --no-deps -d {WHEELS})")
    path, line = R._LINES[release][rule]
    with zipfile.ZipFile(wheel) as z:
        lines = z.read(path).decode().splitlines()
    assert text in lines[line - 1]


# ---------------------------------------------------------------------------------------------------------
# Launch command and the vLLM comparison


def test_launch_argv_reproduces_the_plan():
    p = plan(load_config("Qwen__QwQ-32B.json"), gpu=get_gpu("L4"), release="0.4.3.post4", tp_size=4,
             free_memory_before_load_gib=21.63, weights_bytes=int(15.54 * GIB))
    argv = launch_argv(p, "Qwen/QwQ-32B", port=30000)
    assert argv[:5] == ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/QwQ-32B"]
    flat = " ".join(argv)
    for pair in ("--tp-size 4", "--mem-fraction-static 0.85", "--context-length 131072",
                 "--chunked-prefill-size 2048", "--cuda-graph-max-bs 80", "--attention-backend flashinfer",
                 "--port 30000"):
        assert pair in flat
    with pytest.raises(EngineInputError) as e:
        launch_argv(p, "Qwen/QwQ-32B; rm -rf /")
    assert e.value.field == "model_path"


def test_launch_argv_speculative_flags():
    target = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    p = plan(target, gpu=get_gpu("H100"), release="0.5.7", speculative_algorithm="EAGLE3",
             draft_hf_config=load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json"), draft_weights_bytes=GIB,
             free_memory_before_load_gib=78.5, weights_bytes=15 * GIB)
    flat = " ".join(launch_argv(p, "meta-llama/Llama-3.1-8B-Instruct",
                                draft_model_path="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"))
    assert "--speculative-algorithm EAGLE3" in flat
    assert "--speculative-num-steps 5 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8" in flat
    with pytest.raises(EngineInputError):
        launch_argv(p, "meta-llama/Llama-3.1-8B-Instruct")


def test_explain_vs_vllm_names_the_terms():
    # vllm-project/vllm#21348: Qwen3-235B-A22B-FP8 on 4x H100, vLLM 178,880 tokens vs SGLang 367,404.
    # The sentence is built from the plan's own terms; the ratio is the plans' token counts.
    p = plan(load_config("Qwen__Qwen3-235B-A22B-FP8.json"), gpu=get_gpu("H100"), release="0.4.10.post2", tp_size=4,
             free_memory_before_load_gib=78.4, weights_bytes=int(55.0 * GIB))
    s = explain_vs_vllm(p, vllm_kv_tokens=178880, vllm_kv_gib=178880 * p.cell_size_bytes / GIB,
                        vllm_gpu_memory_utilization=0.9, vllm_weights_gib=55.0, vllm_activation_gib=5.0,
                        vllm_total_gib=79.19)
    assert f"{p.mem_fraction_static:.3f}" in s and "0.90" in s and "activation" in s
    assert f"x{p.max_total_num_tokens / 178880:.2f}" in s


def test_explain_vs_vllm_takes_a_hybrid_swa_pool_by_its_two_parts():
    """gpt-oss-20b on H100, 0.5.10.post1 (as test_gpt_oss_hybrid_swa_split_release_0_5_10): the 12 full-attention layers
    hold 1,199,065 tokens and the 12 sliding ones 959,252, 2,048 B per token per layer: (1,199,065 + 959,252) x 12 x
    2,048 B = 49.40 GiB, the budget rest (49.4 GiB); 1,199,065 x the 24-layer cell 49,152 B would say 54.89 GiB."""
    cfg = load_config("openai__gpt-oss-20b.json")
    p = plan(cfg, gpu=get_gpu("H100"), release="0.5.10.post1", mem_fraction_static=0.8, free_memory_before_load_gib=78.0,
             weights_bytes=13 * GIB)
    by_hand = (1199065 + 959252) * 12 * 2048 / GIB
    assert round(by_hand, 2) == 49.40 and round(1199065 * 49152 / GIB, 2) == 54.89
    s = explain_vs_vllm(p, vllm_kv_tokens=1_000_000, vllm_kv_gib=40.0, vllm_gpu_memory_utilization=0.9,
                        vllm_weights_gib=13.0)
    assert f"leaving {by_hand:.1f} GiB for KV in SGLang (full-attention layers 1,199,065 tokens, sliding-window " \
           "layers 959,252)" in s


def test_piecewise_cuda_graph_reserve_release_0_5_10():
    """Qwen3-8B on H100 (catalog 79.19 GiB = 81,090.6 MiB), 0.5.10.post1 defaults: chunked prefill 8192,
    cuda graph bs 256 (TP < 4). Piecewise CUDA graphs are on (text model, no spec, no DP attention, CUDA):
    capture sizes up to 8192: 8 (4..32 by 4) + 14 (48..256 by 16) + 8 (288..512 by 32) + 8 (576..1024 by 64)
    + 12 (1280..4096 by 256) + 8 (4608..8192 by 512) = 58 -> 58 * 8 = 464 MiB.
    reserved = 512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024 + 464 = 13,904 MiB (above the 10 GiB floor);
    round((81,090.6 - 13,904) / 81,090.6, 3) = round(0.82853, 3) = 0.829. Without piecewise graphs: 0.834."""
    cfg = load_config("Qwen__Qwen3-8B.json")
    kw = {"gpu": get_gpu("H100"), "release": "0.5.10.post1", "free_memory_before_load_gib": 78.4, "weights_bytes": 16 * GIB}
    assert plan(cfg, **kw).mem_fraction_static == 0.829
    assert plan(cfg, disable_piecewise_cuda_graph=True, **kw).mem_fraction_static == 0.834


def test_trtllm_mha_default_on_b200_forces_page_64():
    # 0.5.7+: MHA on SM100 defaults to trtllm_mha, which only takes page sizes 16/32/64 -> 64
    # (server_args.py 'TensorRT-LLM MHA only supports page_size of 16, 32 or 64, changing page_size ... to 64')
    p = plan(load_config("Qwen__Qwen3-8B.json"), gpu=get_gpu("B200"), release="0.5.7",
             free_memory_before_load_gib=176.0, weights_bytes=16 * GIB)
    assert p.attention_backend == "trtllm_mha" and p.page_size == 64
    assert p.max_total_num_tokens % 64 == 0
    assert p.source_of("page_size").source == "sglang==0.5.7 sglang/srt/server_args.py:1631"


def test_hybrid_gdn_default_backend_on_b200_is_triton():
    # Qwen3-Next on SM100: SGLang sets triton for the full-attention layers from 0.5.7 (server_args.py
    # "Use triton as attention backend on sm100 for Qwen3NextForCausalLM"). On H100 the generic MHA rule: 0.5.7
    # gives fa3 only to the architectures of is_fa3_default_architecture (Qwen3Next is not one -> flashinfer),
    # 0.5.8.post1 gives fa3 to every MHA model on Hopper.
    cfg = load_config("Qwen__Qwen3-Next-80B-A3B-Instruct.json")
    c = default_backend("0.5.7", get_gpu("B200"), cfg)
    assert c.backend == "triton" and c.source == "sglang==0.5.7 sglang/srt/server_args.py:1396"
    assert default_backend("0.5.7", get_gpu("H100"), cfg).backend == "flashinfer"
    assert default_backend("0.5.8.post1", get_gpu("H100"), cfg).backend == "fa3"


def test_every_complete_public_record_is_explained_with_its_logged_memory():
    """benchmarks/sglang_cases.py over shared/cases/runtime_startup_logs.json: with the two figures each log
    gives before the pool is sized (free memory before loading, weights), SGLang's rules reproduce the KV
    token count of every complete record that logs them within 0.5%; records that do not log them
    (sgl-004/005, DeepSeek-V3.2 on 8x B200) come within 2% from the config alone (weights from the parameter
    count with DP attention's replicated attention, absorbed MLA copies, indexer and embedding; the
    start-up overhead fit)."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "sglang_cases.py"
    spec = importlib.util.spec_from_file_location("sglang_cases", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not mod.CASES.exists():
        pytest.skip(f"{mod.CASES} not present")
    rows, _ = mod.run(mod.CASES)
    assert len(rows) == 7
    for row in rows:
        logged = row["logged-mem"]
        if logged is not None:
            assert abs(logged["err_pct"]) < 0.5, row["id"]
        else:
            assert abs(row["config"]["err_pct"]) < 2, row["id"]


def test_speculative_topk_and_the_default_backend_order():
    # Up to 0.5.3.post1 the model runner picks the backend after the speculative defaults (5, 4, 8) are set:
    # topk 4 > 1 rules fa3 out on Hopper (is_no_spec_infer_or_topk_one) -> flashinfer. From 0.5.7 ServerArgs
    # picks it before they are filled in (topk None) -> fa3.
    target = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    kw = {"gpu": get_gpu("H100"), "speculative_algorithm": "EAGLE3",
          "draft_hf_config": load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json"), "draft_weights_bytes": GIB,
          "free_memory_before_load_gib": 78.5, "weights_bytes": 15 * GIB}
    assert plan(target, release="0.5.3", **kw).attention_backend == "flashinfer"
    assert plan(target, release="0.5.7", **kw).attention_backend == "fa3"


def test_glm5_dsa_on_mi355x_is_nsa_from_0_5_9_with_page_1_and_tp_attention():
    """GLM-5-FP8 (GlmMoeDsaForCausalLM) on 8x MI355X, 'launch_server --attention-backend triton --tp-size 8
    --kv-cache-dtype fp8_e4m3' (ajith-sirra-amd/Issues GLM-5-FP8-MI355X-SGLANG-ERROR.md, image of 2026-02-18,
    modelled as 0.5.9): 'Load weight end ... avail mem=193.92 GB, mem usage=89.58 GB', mem_fraction_static=0.908
    printed, 'Setting page size to 1 for DeepSeek DSA on ROCm', 'DSA with TP mode is active, dp_size=1, tp_size=8',
    'KV Cache is allocated. #tokens: 3262823, KV size: 186.77 GB'.

    0.5.9 is_deepseek_nsa lists GlmMoeDsaForCausalLM (configs/model_config.py:54), so the indexer is in the cell:
    (512 + 64) x 78 x 1 + (128 + 128 // 128 x 4) x 78 = 44,928 + 10,296 = 55,224 B.
    rest = 193.92 - 283.50 x (1 - 0.908) = 167.838 GiB -> int(167.838 x 2**30 / 55,224) = 3,263,339 (log 3,262,823:
    the two logged 0.01-GB figures). Pool rows: (512 + 512 // 128 x 4 + 64 x 2) x 78 + 10,296 = 61,464 B ->
    3,262,823 x 61,464 / 2**30 = 186.77 GiB, the logged KV size (more than the 167.84 budgeted: SGLang sizes with
    576-byte rows and allocates 656-byte ones, so only 3.90 GB stay free)."""
    # zai-org/GLM-5-FP8's config.json from the CLI's offline catalog (not among the shared configs)
    cfg = json.loads((Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"
                      / "zai-org__GLM-5-FP8.json").read_text())
    p = plan(cfg, gpu=get_gpu("MI355X"), release="0.5.9", tp_size=8, kv_cache_dtype="fp8_e4m3",
             attention_backend="triton", free_memory_before_load_gib=193.92 + 89.58, weights_bytes=int(89.58 * GIB))
    assert p.mem_fraction_static == 0.908  # as printed by ServerArgs
    assert p.page_size == 1 and not p.enable_dp_attention and p.attention_tp_size == 8
    assert p.cell_size_bytes == (512 + 64) * 78 + (128 + 4) * 78 == 55224
    assert p.pool_bytes_per_token == (512 + 16 + 128) * 78 + (128 + 4) * 78 == 61464
    rest = (193.92 + 89.58 - 89.58) - (193.92 + 89.58) * (1 - 0.908)
    assert p.max_total_num_tokens == int(rest * GIB / 55224) == 3263339
    assert abs(p.max_total_num_tokens - 3262823) / 3262823 < 0.001
    assert round(3262823 * 61464 / GIB, 2) == 186.77
    # before 0.5.9 SGLang has no GLM-5 class at all; 0.5.8.post1's is_deepseek_nsa does not list it either
    assert "GlmMoeDsaForCausalLM" not in nsa_architectures("0.5.8.post1")
    assert "GlmMoeDsaForCausalLM" in nsa_architectures("0.5.10.post1")


def test_nsa_dp_attention_and_page_size_by_release():
    """What the NSA block of ServerArgs forces, per release (DeepSeek-V3.2, --tp 8, no DP flags):
    0.5.3.post1: enable_dp_attention and dp_size = tp_size (server_args.py:859-860) -> attention TP 1, page 64;
    0.5.7: enable_dp_attention = True only (server_args.py:1035), dp_size stays 1, so _handle_data_parallelism, which
    runs after the model adjustments (:675, :689), turns it off again (:1802-1803) -> attention TP 8, page 64 (:1058);
    with --dp-size 2 passed (no --enable-dp-attention) it stays on: attention TP 4;
    0.5.8.post1: nothing ('DSA with TP mode is active', :1147), page 64 on CUDA, 1 on ROCm (:1151-1158);
    0.5.3.post1 at --tp 1: dp_size = tp_size = 1, so off again too (:990-991)."""
    cfg = v32_config()
    b200, mi355x = get_gpu("B200"), get_gpu("MI355X")
    a = plan(cfg, gpu=b200, release="0.5.3.post1", tp_size=8)
    b = plan(cfg, gpu=b200, release="0.5.7", tp_size=8)
    c = plan(cfg, gpu=b200, release="0.5.8.post1", tp_size=8)
    d = plan(cfg, gpu=mi355x, release="0.5.8.post1", tp_size=8)
    assert (a.enable_dp_attention, a.dp_size, a.attention_tp_size, a.page_size) == (True, 8, 1, 64)
    assert (b.enable_dp_attention, b.dp_size, b.attention_tp_size, b.page_size) == (False, 1, 8, 64)
    assert "server_args.py:1802" in b.source_of("enable_dp_attention").source
    b2 = plan(cfg, gpu=b200, release="0.5.7", tp_size=8, dp_size=2)
    assert (b2.enable_dp_attention, b2.dp_size, b2.attention_tp_size) == (True, 2, 4)
    a1 = plan(cfg, gpu=b200, release="0.5.3.post1", tp_size=1)
    assert (a1.enable_dp_attention, a1.dp_size, a1.attention_tp_size) == (False, 1, 1)
    assert (c.enable_dp_attention, c.dp_size, c.attention_tp_size, c.page_size) == (False, 1, 8, 64)
    assert (d.enable_dp_attention, d.attention_tp_size, d.page_size) == (False, 8, 1)
    # the cell is per rank and MLA keeps one latent per token whatever the attention TP: same bytes
    assert a.cell_size_bytes == b.cell_size_bytes == c.cell_size_bytes
    # the command: 0.5.3.post1 gets the DP flags it forces anyway; 0.5.7 has none (off at dp_size 1)
    assert "--enable-dp-attention" in launch_argv(a, model_path="deepseek-ai/DeepSeek-V3.2-Exp")
    assert "--enable-dp-attention" not in launch_argv(b, model_path="deepseek-ai/DeepSeek-V3.2-Exp")


def test_nsa_without_dp_flags_reserve_sees_the_flags_as_passed():
    # DeepSeek-V3.2 on 8x B200, 0.5.3.post1, no --enable-dp-attention: SGLang's memory defaults run before the
    # NSA adjustment turns DP attention on, so the reserve has no DP term:
    # 512 + 16384 * 1.5 + 512 * 2 + 8 / 8 * 1024 = 27,136 MiB -> round((182,640.6 - 27,136) / 182,640.6, 3) = 0.851;
    # the pool is still per DP rank (attention TP 1) with chunked prefill 16384 // 8 = 2048.
    p = plan(v32_config(), gpu=get_gpu("B200"), release="0.5.3.post1", tp_size=8)
    assert p.mem_fraction_static == 0.851
    assert p.enable_dp_attention and p.dp_size == 8 and p.attention_tp_size == 1
    assert p.chunked_prefill_size == 2048


@pytest.mark.parametrize("release", COVERED)
def test_every_cited_line_exists_in_the_release_wheel(release):
    """Each (file, line) of releases._LINES and compat._L points at a non-blank line of that release's file."""
    from calculator.runtimes.sglang import compat as C

    wheel = wheel_of(release)
    if not wheel.exists():
        pytest.skip(f"{wheel} not downloaded")
    cites = list(R._LINES[release].values())
    for key, line in C._L.get(release, {}).items():
        if line is None or key == "fa3_default_list":
            continue
        if isinstance(line, tuple):  # 0.5.23: the entry names its file
            cites.append(line)
            continue
        if key in ("fa3_reg", "mla_only_reg", "mha_only_reg"):
            path = C._REG
        elif key in ("default", "fa3_e5m2") and not R.at_least(release, "0.5.7"):
            path = C._MR
        else:
            path = C._SA
        cites.append((path, line))
    with zipfile.ZipFile(wheel) as z:
        for path, line in cites:
            lines = z.read(path).decode().splitlines()
            assert line <= len(lines) and lines[line - 1].strip(), (path, line)


# ---------------------------------------------------------------------------------------------------------
# Weights as 'Load weight end ... mem usage' counts them, from config.json alone (calculator/runtimes/sglang/
# weights.py), and the start-up overhead before loading


def _terms(p) -> dict[str, float]:
    return {s.field.split(".", 1)[1]: float(s.value) for s in p.sources if s.field.startswith("weights.")}


def test_weights_qwq32b_tp4_parameters_rope_and_allocator_rounding():
    """sgl-011 (QwQ-32B, 4x L4, 0.4.3.post4) from the config: 64 layers, hidden 5120, 40 heads, 8 KV heads,
    head_dim 128, intermediate 27648, vocab 152064, qkv bias, untied lm_head; one rank of TP 4 (bf16):

    embed = lm_head = 152064 / 4 * 5120 * 2 = 389,283,840 B (371.25 MiB each)
    per layer: qkv (40/4 + 2 * 8/4) * 128 = 1792 rows: 1792 * 5120 * 2 = 18,350,080 (17.5 MiB) + bias 3,584;
      o_proj 5120 * 1280 * 2 = 13,107,200 (12.5 MiB); gate_up 13824 * 5120 * 2 = 141,557,760 (135 MiB);
      down 5120 * 6912 * 2 = 70,778,880 (67.5 MiB); 2 RMSNorms 2 * 10,240
    parameters: 2 * 389,283,840 + 64 * 243,817,984 + 10,240 (final norm) = 16,382,928,896 B
    rotary cache: 131,072 positions * 128 * 4 B (float32 on CUDA) = 67,108,864 B
    caching allocator (segments >= 10 MiB rounded up to 2 MiB): per layer 17.5->18, 12.5->14, 135->136,
      67.5->68 = 3.5 MiB; embed and lm_head 371.25->372 each: 64 * 3.5 + 1.5 = 225.5 MiB = 236,453,888 B;
      the small tensors (64 * (3,584 + 2 * 10,240) + 10,240 = 1,550,336 B) share one 2 MiB segment:
      +546,816 B; allocator total 237,000,704 B.
    weights = 16,687,038,464 B = 15.541 GiB; the log's 'mem usage=15.54 GB'.
    """
    p = plan(load_config("Qwen__QwQ-32B.json"), gpu=get_gpu("L4"), release="0.4.3.post4", tp_size=4)
    t = _terms(p)
    assert t["rope"] * GIB == pytest.approx(67_108_864, abs=GIB * 1e-4)
    assert t["allocator"] * GIB == pytest.approx(237_000_704, abs=GIB * 1e-4)
    assert round(p.weights_gib * GIB) == 16_687_038_464
    assert abs(p.weights_gib - 15.54) < 0.01
    assert p.source_of("weights_gib").kind == "estimate"
    assert p.source_of("weights.rope").source.startswith("sglang==0.4.3.post4 sglang/srt/layers/rotary_embedding.py:84")


def test_weights_rocm_aiter_keeps_qwen3_moe_experts_twice_from_0_5_3_to_0_5_9():
    """sgl-006 (5-layer Qwen3-30B-A3B, MI355X, 0.5.7): qwen3_moe.py caches dict(self.named_parameters()) in
    load_weights, and with SGLANG_USE_AITER=1 UnquantizedFusedMoEMethod replaces w13/w2 by shuffled copies, so
    the experts stay twice: 5 layers * 128 experts * 3 * 2048 * 768 * 2 B = 6,039,797,760 B (5.625 GiB).
    Parameters 7,475,...: 6.96 GiB + 5.625 = 12.6 GiB against the log's 'mem usage=12.79 GB' (the count alone:
    6.96). Not on CUDA, and not in 0.5.10.post1 (no cache, copy_or_rebind_param)."""
    cfg = load_config("Qwen__Qwen3-30B-A3B.json")
    cfg["num_hidden_layers"] = 5
    rocm = plan(cfg, gpu=get_gpu("MI355X"), release="0.5.7")
    assert _terms(rocm)["aiter_moe_copy"] * GIB == pytest.approx(6_039_797_760, abs=GIB * 1e-4)
    assert abs(rocm.weights_gib - 12.79) < 0.25
    assert "aiter_moe_copy" not in _terms(plan(cfg, gpu=get_gpu("H100"), release="0.5.7"))
    assert "aiter_moe_copy" not in _terms(plan(cfg, gpu=get_gpu("MI355X"), release="0.5.10.post1"))


def test_weights_kimi_k25_rocm_replicated_q_a_moonvit_and_g_idx():
    """sgl-003 (Kimi-K2.5, 8x MI355X, 0.5.9), one rank of TP 8:

    q_a_proj replicated (fused_qkv_a_proj_with_mqa is a ReplicatedLinear; the count splits it by 8), kept in
      bf16 by the checkpoint's ignore list: 61 * 7168 * 1536 * 2 * (1 - 1/8) = 1,175,322,624 B;
    CompressedTensorsWNA16TritonMoE (ROCm) keeps four int32 g_idx tensors per MoE layer:
      60 * 384 * (2 * 7168 + 2 * 2048/8) * 4 = 1,368,391,680 B;
    MoonViT (vt_hidden 1152, 27 layers, MLP 4304, patch 14, 64x64 position table) and its projector (4608 ->
      4608 -> 7168): attention 27 * (4 * 1152^2 + 4 * 1152) = 143,451,648 params / 8, the rest whole
      (MLP 27 * (2 * 1152 * 4304 + 4304 + 1152 + 4 * 1152) = 268,014,960; patch 678,528; positions
      4,718,592; final norm 2,304; projector 54,277,888) -> (17,931,456 + 327,692,272) * 2 = 691,247,456 B.
    The estimate comes within 1 GiB of the log's 'mem usage=73.58 GB' (the bare count: 68.1)."""
    p = plan(load_config("moonshotai__Kimi-K2.5.json"), gpu=get_gpu("MI355X"), release="0.5.9", tp_size=8)
    t = _terms(p)
    # q_a_proj is held whole by the shared count now (calculator.engine.weights, vLLM's rule too): no extra term
    assert "mla_a_proj_replicated" not in t
    q_a = sum(n for _, _, name, n in parse_config(load_config("moonshotai__Kimi-K2.5.json")).params.modules
              if name == "self_attn.q_a_proj")
    assert q_a * 2 * (1 - 1 / 8) == 1_175_322_624
    assert t["wna16_g_idx"] * GIB == pytest.approx(1_368_391_680, abs=GIB * 1e-4)
    assert t["vision"] * GIB == pytest.approx(691_247_456, abs=GIB * 1e-4)
    assert abs(p.weights_gib - 73.58) < 1.0
    # the g_idx tensors are freed on the CUDA (Marlin) path
    assert "wna16_g_idx" not in _terms(plan(load_config("moonshotai__Kimi-K2.5.json"), gpu=get_gpu("B200"),
                                            release="0.5.9", tp_size=8))


def test_weights_qwen35_vision_sharded_and_gated_query():
    """sgl-015 (Qwen3.5-9B, 2x RTX 4090, 0.5.10.post1): the vision tower (433,847,152 params) is split over the
    attention-TP group in SGLang: -433,847,152 * 2 * (1 - 1/2) = -433,847,152 B; the 8 full-attention layers'
    q_proj is 16 heads * 256 * 2 wide (attn_output_gate): +8 * 4096 * 16 * 256 * 2 / 2 = 134,217,728 B; rotary
    cache 262,144 * (256 * 0.25) * 4 = 67,108,864 B. The estimate comes within 0.05 GiB of 'mem usage=8.85 GB'."""
    p = plan(load_config("Qwen__Qwen3.5-9B.json"), gpu=get_gpu("RTX4090"), release="0.5.10.post1", tp_size=2,
             mem_fraction_static=0.8, context_length=262144)
    t = _terms(p)
    assert t["vision"] * GIB == pytest.approx(-433_847_152, abs=GIB * 1e-4)
    # the gate is in the shared parameter count now (arch._gated_query): 8 layers x 4096 x 16 x 256 x 2 wide q_proj
    assert "qwen3_5_output_gate" not in t
    q = [n for _, _, name, n in parse_config(load_config("Qwen__Qwen3.5-9B.json")).params.modules
         if name == "self_attn.q_proj"]
    assert len(q) == 8 and sum(q) * 2 / 2 - 8 * 4096 * 16 * 256 * 2 / 2 == 134_217_728
    assert t["rope"] * GIB == pytest.approx(67_108_864, abs=GIB * 1e-4)
    assert abs(p.weights_gib - 8.85) < 0.05


def test_allocator_replay_rounds_segments_as_pytorch_does():
    from calculator.runtimes.sglang.weights import allocator_reserved

    mib = 1 << 20
    # >= 10 MiB: own segment rounded up to 2 MiB; the 1.5 MiB remainder of 12.5 stays split in its segment
    assert allocator_reserved([int(12.5 * mib)]) == 14 * mib
    # 1-10 MiB requests share one 20 MiB segment (best fit into the remainder)
    assert allocator_reserved([8 * mib, 4 * mib, 6 * mib]) == 20 * mib
    # small requests share 2 MiB segments
    assert allocator_reserved([1000] * 100) == 2 * mib


def test_startup_overhead_from_public_logs_by_hand():
    """The start-up overhead is pre (context: total - 'Load weight begin' - 'Init torch distributed ends. mem
    usage') + dist (the 'mem usage'), from the public logs of data/startup_overhead.json, by hand from the
    logged figures and the catalog totals (GiB):

    NVIDIA pre: sglang#40558 4x RTX PRO 6000 94.97 - 94.01 - 0.39 = 0.57; Grok-2 blog 8x H100 79.19 - 77.43 - 1.25 =
    0.51; sglang#5390 8x B200 178.35 - 175.37 - 2.38 = 0.60; sglang#9743 H200 139.81 - 139.34 = 0.47; sglang#11032
    H20 95.00 - 94.63 = 0.37; Dynamo notes A10G 22.07 - 21.82 = 0.25; sglang#485 H100 79.19 - 78.81 = 0.38.
    A GPU with logs of its own takes their median; an NVIDIA GPU without takes the least-squares line of those seven
    against resident threads = SMs x max threads per SM (CUDA guide: 2048 on 9.0 / 10.0, 1536 on 8.6 / 8.9 / 12.0):
    RTX PRO 6000 188 x 1536, H100 / H200 132 x 2048, B200 148 x 2048, H20 78 x 2048, A10G 80 x 1536.
    dist of 2x RTX 4090: sglang#16920 0.26. 4x L4 (sgl-011): the 4-rank PCIe logs are sglang#40558 0.39 and
    sglang#5942 (4x RTX 2080 Ti 22 GB, 0.4.6) 0.10 -> 0.245."""
    from calculator.runtimes.sglang.memory import startup_overhead_gib

    logs = [(188 * 1536, round(94.97 - 94.01 - 0.39, 2)), (132 * 2048, round(79.19 - 77.43 - 1.25, 2)),
            (148 * 2048, round(178.35 - 175.37 - 2.38, 2)), (132 * 2048, round(139.81 - 139.34, 2)),
            (78 * 2048, round(95.00 - 94.63, 2)), (80 * 1536, round(22.07 - 21.82, 2)),
            (132 * 2048, round(79.19 - 78.81, 2))]
    assert sorted(v for _, v in logs) == [0.25, 0.37, 0.38, 0.47, 0.51, 0.57, 0.60]
    mx = sum(t for t, _ in logs) / 7
    my = sum(v for _, v in logs) / 7
    slope = sum((t - mx) * (v - my) for t, v in logs) / sum((t - mx) ** 2 for t, _ in logs)
    icpt = my - slope * mx
    assert 1.5 < slope * 2**30 / 1024 < 1.9  # KiB per resident thread: the order of CUDA's 1 KiB default stack
    resid = max(abs(v - icpt - slope * t) for t, v in logs)

    def line(threads):
        return icpt + slope * threads

    # 2x RTX 4090 (sgl-015): 128 SMs (AD102 as sold in the 4090) x 1536
    gib, spread, how = startup_overhead_gib(get_gpu("RTX4090"), 2)
    assert gib == pytest.approx(round(line(128 * 1536), 3) + 0.26, abs=1e-9)
    assert spread == pytest.approx(round(resid, 3) + (0.39 - 0.10) / 2, abs=1e-6)
    assert "pub-4090x2 0.26" in how and "no context figure logged on the NVIDIA GeForce RTX 4090" in how and "128 SMs" in how
    # a GPU the table has: B200 x8 is that log alone, 178.35 - 175.37 = 2.98
    assert startup_overhead_gib(get_gpu("B200"), 8)[0] == pytest.approx(178.35 - 175.37, abs=1e-9)
    # one NVIDIA rank: no communicator, the one-rank logs print 0.00 -> the line alone (RTX 5080: 84 SMs x 1536)
    assert startup_overhead_gib(get_gpu("RTX 5080"), 1)[0] == pytest.approx(round(line(84 * 1536), 3), abs=1e-9)
    # H100 one rank: its own two logs (0.51, 0.38) -> 0.445
    assert startup_overhead_gib(get_gpu("H100"), 1)[0] == pytest.approx((0.51 + 0.38) / 2, abs=1e-9)
    # AMD MI355X one rank: pre of its logs (287.98 - 287.26 - 0.15 = 0.57, 287.98 - 283.50 - 3.81 = 0.67) + 0.15
    assert startup_overhead_gib(get_gpu("MI355X"), 1)[0] == pytest.approx((0.57 + 0.67) / 2 + 0.15, abs=1e-9)
    p = plan(load_config("Qwen__QwQ-32B.json"), gpu=get_gpu("L4"), release="0.4.3.post4", tp_size=4)
    # no L4 log: the line at 58 SMs x 1536 (about 0.20) + the median of the two 4-rank PCIe logs (0.39, 0.10); the
    # log itself (sgl-011) lost 22.03 - 21.63 = 0.40
    assert p.free_before_load_gib == pytest.approx(22.03 - round(line(58 * 1536), 3) - (0.39 + 0.10) / 2, abs=1e-6)
    assert abs(p.free_before_load_gib - 21.63) < 0.06
    src = p.source_of("free_before_load_gib")
    assert src.kind == "fit" and "pub-sm120x4 0.39, pub-2080ti22x4 0.10" in src.source
    assert "startup_overhead.json" in src.source and "resident threads" in src.source
    # a GPU without a sourced SM count keeps the median of the vendor's logs, and says so
    from calculator.engine.gpus import custom_gpu
    g = custom_gpu(40.0, compute_capability="8.0", bandwidth_gbps=1500, tflops_bf16=300)
    gib, _, how = startup_overhead_gib(g, 1)
    assert gib == pytest.approx(0.47, abs=1e-9) and "all nvidia logs" in how
    # without the log that shares author and machine with sgl-003, no 8-rank AMD log is left -> refused by name
    with pytest.raises(EngineInputError) as e:
        startup_overhead_gib(get_gpu("MI355X"), 8, exclude_record="sgl-003")
    assert e.value.field == "gpu"


def test_startup_logs_agree_with_their_quotes_and_are_not_shared_records():
    """Every number of a row of data/startup_overhead.json is printed in its quote as SGLang formats it (:.2f),
    every GPU is a catalog name, and no row comes from the source page of a record of the shared cases (those are
    what the benchmark scores)."""
    from calculator.runtimes.sglang.startup import startup_logs

    for lg in startup_logs():
        if lg.gpu is not None:
            get_gpu(lg.gpu)
        else:
            assert lg.pre is None and lg.vendor in ("nvidia", "amd")
        for v in (lg.init_dist_mem_usage, lg.avail_before_load, lg.avail_before_dist):
            if v is not None:
                assert f"{v:.2f}" in lg.quote, (lg.id, v)
    cases = Path("/work/shared/cases/runtime_startup_logs.json")
    if not cases.exists():
        pytest.skip("shared cases not present")
    urls = {r.get("source_url") for r in json.loads(cases.read_text())["sglang"]} - {None}
    assert not urls & {lg.source for lg in startup_logs()}


def test_small_pool_says_how_much_the_overhead_fit_moves_it():
    """QwQ-32B on 4x L4: T = 22.03 - 0.443 (public logs: context line at 58 SMs 0.198 + 4-rank PCIe init 0.245) =
    21.587 GiB, W = 15.54, rest = 0.85 * T - W = 2.81 GiB, so 0.1 GiB of start-up overhead is 0.85 * 0.1 / 2.81 =
    3.0% of the tokens; the plan says so and asks for the logged figure. With the log's free-before-load given, no
    such note."""
    p = plan(load_config("Qwen__QwQ-32B.json"), gpu=get_gpu("L4"), release="0.4.3.post4", tp_size=4)
    assert p.tokens_pct_per_0_1_gib_overhead == pytest.approx(0.1 * 0.85 / p.rest_memory_gib * 100, abs=0.006)
    assert 2.95 < p.tokens_pct_per_0_1_gib_overhead < 3.1
    assert any("free_memory_before_load_gib" in n for n in p.notes)
    q = plan(load_config("Qwen__QwQ-32B.json"), gpu=get_gpu("L4"), release="0.4.3.post4", tp_size=4,
             free_memory_before_load_gib=21.63)
    assert q.tokens_pct_per_0_1_gib_overhead is None
    assert not any("free_memory_before_load_gib" in n for n in q.notes)


def test_vllm_issue_21348_example_sglang_side_from_the_config():
    """vllm-project/vllm#21348: Qwen3-235B-A22B-FP8 on 4x H100, 'sglang.launch_server --tp 4
    --mem-fraction-static 0.93' logged 'KV Cache is allocated. #tokens: 367404, K size: 8.23 GB'; vLLM (default
    gpu_memory_utilization 0.9, LMCacheConnectorV1) 'Available KV cache memory: 8.11 GiB', 178,880 tokens.

    KV dtype: the checkpoint's quantization_config (fp8 block weights) names no KV scheme, so 'auto' is the model
    dtype, bf16: cell = max(1, 4 // 4) * (128 + 128) * 94 * 2 = 48,128 B; the log's K size agrees:
    367,404 * 24,064 / 2**30 = 8.23. From the config alone (release 0.4.10.post2, the nearest covered one after
    the 2025-07-22 log) SGLang comes within 2% of 367,404. With 0.93 its budget (0.93 x free before loading)
    equals vLLM's 0.9 x 79.19 GiB, so the sentence puts the difference where it is: vLLM's subtractions."""
    p = plan(load_config("Qwen__Qwen3-235B-A22B-FP8.json"), gpu=get_gpu("H100"), release="0.4.10.post2",
             tp_size=4, mem_fraction_static=0.93)
    assert p.kv_cache_dtype == "bfloat16" and p.cell_size_bytes == 48128
    assert round(367404 * 24064 / GIB, 2) == 8.23
    assert abs(p.max_total_num_tokens - 367404) / 367404 < 0.02
    s = explain_vs_vllm(p, vllm_kv_tokens=303008, vllm_kv_gib=13.58, vllm_gpu_memory_utilization=0.9,
                        vllm_weights_gib=55.13, vllm_activation_gib=1.31, vllm_non_torch_gib=1.25,
                        vllm_bytes_per_token=48128, vllm_total_gib=79.19, vllm_kv_cache_dtype="bfloat16",
                        vllm_logged_kv_gib=8.11, vllm_logged_tokens=178880)
    assert "0.930 (as passed with --mem-fraction-static)" in s and "0.90 of 79.2 GiB (71.3 GiB)" in s
    assert "both store bf16 KV at 48,128 B per token per GPU" in s
    assert "vLLM's own log says 8.11 GiB (178,880 tokens), 5.5 GiB less than this vLLM estimate" in s


@pytest.mark.django_db
def test_every_row_of_the_answer_says_where_it_comes_from():
    """The table / page rows of an SGLang answer each carry a source (K and V size, page_size and the attention
    backend had none: a fresh user saw "K size: 25.139404296875  ()")."""
    from calculator.plan import make_plan
    from calculator.request import parse_request

    p = make_plan(parse_request({"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "runtime": "sglang",
                                 "max_model_len": "32768"}), with_speed=False, with_suggestions=False)
    rows = p.memory.rows()
    assert {label for label, _, _ in rows} >= {"K size (GB)", "V size (GB)", "page_size", "attention backend"}
    assert all(source for _, _, source in rows), [r for r in rows if not r[2]]


def test_a_geforce_plan_says_a_display_takes_memory_the_plan_does_not_count():
    """sgx-003 (benchmarks/data/sglang_extra_logs.json, RTX 3090 under WSL2) had 0.55 GiB less free before loading
    than the catalog's card: the desktop. A GeForce plan says so where it gives the sensitivity; an H100's does not."""
    cfg = load_config("Qwen__Qwen3-8B.json")
    consumer = plan(cfg, gpu=get_gpu("RTX3090"), release="0.5.10.post1")
    datacenter = plan(cfg, gpu=get_gpu("L4"), release="0.5.10.post1", context_length=40960)
    assert any("drives a display" in n for n in consumer.notes)
    assert any("The KV pool is" in n for n in datacenter.notes)  # the sensitivity note is there,
    assert not any("drives a display" in n for n in datacenter.notes)  # without the display sentence


@pytest.mark.parametrize("release", [r for r in COVERED if r != "0.4.10.post2"])
def test_a_context_length_above_the_models_is_refused_as_sglang_refuses_it(release):
    """ModelConfig._derive_context_length: --context-length above the derived one (Qwen2.5-7B-Instruct:
    max_position_embeddings 32,768, no rope scaling) raises ValueError at start-up unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set,
    whose default is False in these releases (environ.py EnvBool(False); 0.4.3.post4 get_bool_env_var default
    "False"); the model's own length is accepted."""
    kw = {"gpu": get_gpu("H100"), "release": release, "free_memory_before_load_gib": 78.0, "weights_bytes": 2 * GIB}
    cfg = load_config("Qwen__Qwen2.5-7B-Instruct.json")
    assert plan(cfg, context_length=32768, **kw).context_length == 32768
    with pytest.raises(EngineInputError) as err:
        plan(cfg, context_length=32769, **kw)
    assert err.value.field == "context_length"
    assert "derived context length 32,768" in err.value.message
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in err.value.message


def test_sglang_0_4_10_accepts_a_longer_context_length_with_a_warning():
    """0.4.10.post2 reads the variable with default="True" (model_config.py:164): SGLang logs a warning and runs with
    the given length, so the plan sizes it and says so."""
    p = plan(load_config("Qwen__Qwen3-0.6B.json"), gpu=get_gpu("H100"), release="0.4.10.post2",
             free_memory_before_load_gib=78.0, weights_bytes=2 * GIB, context_length=65536)
    assert p.context_length == 65536
    assert any("above the model's derived 40,960" in n for n in p.notes)


# ---------------------------------------------------------------------------------------------------------
# SGLang 0.5.23: each rule that changed since 0.5.10.post1, with the value worked out by hand from 0.5.23's source
# (sglang==0.5.23 wheel; releases.py cites each line) and, beside it, 0.5.10.post1's for the same input.

H100_SMI = 81559  # nvidia-smi memory.total of an H100 80GB HBM3, MiB
PREFILL_SIZES_8192 = 58  # generate_prefill_cuda_graph_batch_sizes(8192): 8 + 14 + 8 + 8 + 12 + 8 sizes


def test_0_5_23_gpu_table_below_35_gib_and_the_reserve_with_both_graphs():
    """arg_groups/memory_hook.py:101-117: below 35 GiB chunked prefill 4096 and decode CUDA-graph batch 48 (TP < 4)
    (0.5.10.post1: 2048 and 24). The reserve (:309-315, reserve_for_graph_mb :357-399) on an RTX 5090 (nvidia-smi
    32607 MiB), Qwen3-8B, TP 1:
      512 + 1.5 x 4096 + 1/8 x 1024 + 2 x 48 (decode graph) + 8 x 50 prefill-graph sizes up to 4096
      = 512 + 6144 + 128 + 96 + 400 = 7280 MiB -> round((32607 - 7280) / 32607, 3) = 0.777
    0.5.10.post1: 512 + 1.5 x 2048 + 2 x 24 + 128 + 8 x 42 piecewise sizes up to 2048 = 4096 -> 0.874."""
    cfg = load_config("Qwen__Qwen3-8B.json")
    kw = {"gpu": get_gpu("RTX 5090"), "gpu_memory_capacity_mib": 32607, "free_memory_before_load_gib": 30.5,
          "weights_bytes": int(15.3 * GIB)}
    new = plan(cfg, release="0.5.23", **kw)
    assert (new.chunked_prefill_size, new.cuda_graph_max_bs) == (4096, 48)
    assert new.mem_fraction_static == 0.777
    assert new.piecewise_cuda_graph and new.piecewise_cuda_graph_max_tokens == 4096
    old = plan(cfg, release="0.5.10.post1", **kw)
    assert (old.chunked_prefill_size, old.cuda_graph_max_bs, old.mem_fraction_static) == (2048, 24, 0.874)


def test_0_5_23_decode_batch_capped_at_max_running_requests_and_the_flag_not_capped_at_4096():
    """memory_hook.py:182-188: a default decode batch above --max-running-requests comes down to it, and the reserve
    counts the lower batch: 512 + 1.5 x 8192 + 128 + 2 x 64 + 8 x 58 = 13520 MiB -> round((81559 - 13520) / 81559, 3)
    = 0.834 (without the cap 2 x 256: 13904 -> 0.830).
    kv_cache_configurator.py:3127-3129 resolve_max_num_reqs: the flag is capped at half the pool only (0.5.10.post1
    also at the 2048-4096 estimate). Qwen3-8B, T 78.5 GiB, weights 15.3 GiB, --mem-fraction-static 0.85:
      rest = 78.5 - 15.3 - 78.5 x 0.15 = 51.425 GiB; cell 8 x 256 x 36 x 2 = 147,456 B;
      tokens = int(51.425 x 2^30) // 147,456 = 374,465; --max-running-requests 10000 -> min(10000, 187,232) = 10000
      (0.5.10.post1: min(10000, min(max(int(374465 / 40960 x 512), 2048), 4096) = 4096) = 4096)."""
    cfg = load_config("Qwen__Qwen3-8B.json")
    capped = plan(cfg, gpu=get_gpu("H100"), release="0.5.23", gpu_memory_capacity_mib=H100_SMI, max_running_requests=64)
    assert capped.cuda_graph_max_bs == 64 and capped.mem_fraction_static == 0.834 and capped.max_running_requests == 64
    assert "memory_hook.py:188" in capped.source_of("cuda_graph_max_bs").source
    free = plan(cfg, gpu=get_gpu("H100"), release="0.5.23", gpu_memory_capacity_mib=H100_SMI)
    assert free.cuda_graph_max_bs == 256 and free.mem_fraction_static == 0.83
    kw = {"gpu": get_gpu("H100"), "free_memory_before_load_gib": 78.5, "weights_bytes": int(15.3 * GIB),
          "mem_fraction_static": 0.85, "max_running_requests": 10000}
    new = plan(cfg, release="0.5.23", **kw)
    assert new.max_total_num_tokens == 374465 and new.max_running_requests == 10000
    assert plan(cfg, release="0.5.10.post1", **kw).max_running_requests == 4096
    # ReqToTokenPool: one padding row more (memory_pool.py:402): 10001 rows x (40960 + 4) x 4 B
    assert new.req_to_token_gib == pytest.approx(10001 * 40964 * 4 / GIB)


def test_0_5_23_disable_cuda_graph_takes_the_graphs_out_of_the_reserve():
    """0.5.23 counts the decode graph (2 x bs) and the prefill graph only while they are on (reserve_for_graph_mb):
    --disable-cuda-graph: 512 + 1.5 x 8192 + 128 = 12928 MiB -> round((81559 - 12928) / 81559, 3) = 0.841.
    0.5.10.post1's formula does not look at the flag."""
    cfg = load_config("Qwen__Qwen3-8B.json")
    kw = {"gpu": get_gpu("H100"), "gpu_memory_capacity_mib": H100_SMI, "disable_cuda_graph": True}
    p = plan(cfg, release="0.5.23", **kw)
    assert p.mem_fraction_static == 0.841 and not p.piecewise_cuda_graph and p.piecewise_cuda_graph_max_tokens == 0
    assert plan(cfg, release="0.5.10.post1", **kw).mem_fraction_static == \
        plan(cfg, release="0.5.10.post1", gpu=get_gpu("H100"), gpu_memory_capacity_mib=H100_SMI).mem_fraction_static


def test_0_5_23_eagle_draft_weights_and_kv_are_in_the_pool_and_not_in_the_reserve():
    """Llama-3.1-8B + EAGLE3 head on H100.
    Reserve (no speculative term in 0.5.23; the prefill graph stays on with speculative decoding):
      512 + 12288 + 128 + 2 x 256 + 8 x 58 = 13904 MiB -> 0.830
      (0.5.10.post1: piecewise off for speculative decoding, + 4 GiB: 512 + 12288 + 512 + 128 + 4096 = 17536 -> 0.785).
    Pool (T 78.5, weights 15.0, draft 1.0 GiB, --mem-fraction-static 0.85): the draft worker loads before the target
    pool is sized (managers/scheduler.py:1133), and the draft's KV is charged in the cell (pool_configurator.py:311):
      rest = 78.5 - 15.0 - 1.0 - 78.5 x 0.15 = 50.725 GiB; cell 8 x 256 x 32 x 2 = 131,072 + int(131,072 x 1 / 32)
      = 135,168 B; tokens = int(50.725 x 2^30) // 135,168 = 402,947 (0.5.10.post1: (78.5 - 15 - 11.775) x 2^30 //
      131,072 = 423,731). max_running_requests 48 (speculative_hook.py:1090); ReqToTokenPool 49 rows x (131072 + 4 +
      8 draft tokens) x 4 B (allocation_sizing.py:105; Llama's defaults 5/4/8)."""
    target = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    draft = load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")
    base = {"gpu": get_gpu("H100"), "gpu_memory_capacity_mib": H100_SMI, "speculative_algorithm": "EAGLE3",
            "draft_hf_config": draft}
    assert plan(target, release="0.5.23", **base).mem_fraction_static == 0.83
    assert plan(target, release="0.5.10.post1", **base).mem_fraction_static == 0.785
    kw = base | {"free_memory_before_load_gib": 78.5, "weights_bytes": 15 * GIB, "draft_weights_bytes": GIB,
                 "mem_fraction_static": 0.85}
    p = plan(target, release="0.5.23", **kw)
    assert p.cell_size_bytes == 135168 and p.pool_bytes_per_token == 131072
    assert p.max_total_num_tokens == 402947 and p.max_running_requests == 48
    assert p.free_after_load_gib == pytest.approx(78.5 - 15 - 1)
    assert p.req_to_token_gib == pytest.approx(49 * (131072 + 12) * 4 / GIB)
    assert p.piecewise_cuda_graph and p.speculative.draft_weights_gib == 1.0
    assert plan(target, release="0.5.10.post1", **kw).max_total_num_tokens == 423731


def test_0_5_23_mtp_adds_the_nextn_layer_to_deepseeks_cell():
    """DeepSeek-R1, NEXTN, 8 x H200: cell (512 + 64) x 61 layers x 2 B = 70,272 + int(70,272 x 1 / 61) = 71,424 B
    (pool_configurator.py:311, num_nextn_predict_layers 1)."""
    p = plan(load_config("deepseek-ai__DeepSeek-R1.json"), gpu=get_gpu("H200"), release="0.5.23", tp_size=8,
             speculative_algorithm="NEXTN", free_memory_before_load_gib=139.0, weights_bytes=80 * GIB,
             draft_weights_bytes=2 * GIB, mem_fraction_static=0.88)
    assert p.cell_size_bytes == 71424
    # rest = 139 - 80 - 2 - 139 x 0.12 = 40.32 GiB -> int(40.32 x 2^30) // 71,424 = 606,144
    assert p.max_total_num_tokens == 606144


def test_0_5_23_multimodal_keeps_100_mib_and_loses_the_prefill_graph():
    """Mistral-Small-3.1 (Mistral3ForConditionalGeneration, multimodal, not on the breakable-graph allow-list,
    cuda_graph_hook.py:231): the prefill graph is off and out of the reserve: 512 + 12288 + 128 + 2 x 256 = 13440 MiB
    -> round((81559 - 13440) / 81559, 3) = 0.835; x the VLM factor 0.95 x clamp(1 - 0.1 x (24 x 1024^2 / (24 x
    1024^2) - 1)) = 0.95 (memory_hook.py:417) -> 0.79325. The KV budget keeps SGLANG_VLM_CACHE_SIZE_MB 100 MiB out
    (kv_cache_configurator.py:210): T 78.5, weights 45 GiB: rest = 78.5 - 45 - 78.5 x (1 - 0.79325) - 100/1024 =
    17.17247 GiB; cell 8 x 256 x 40 x 2 = 163,840 B -> 112,541 tokens."""
    p = plan(load_config("mistralai__Mistral-Small-3.1-24B-Instruct-2503.json"), gpu=get_gpu("H100"), release="0.5.23",
             gpu_memory_capacity_mib=H100_SMI, free_memory_before_load_gib=78.5, weights_bytes=45 * GIB)
    assert not p.piecewise_cuda_graph
    assert p.mem_fraction_static == pytest.approx(0.79325)
    assert p.max_total_num_tokens == 112541


def test_0_5_23_deepseek_v3_on_b200_keeps_the_mla_prefill_reserve_but_not_the_graph():
    """DeepSeek-V3, 8 x B200 (nvidia-smi 183359 MiB): trtllm_mla (model_overrides/deepseek_v2.py:185, 64-token pages);
    the reserve is sized before cuda_graph_hook.py:279 turns the prefill graph off for DeepSeek-V3 on trtllm_mla, so
    it still holds 1.5 GiB for it: 512 + 1.5 x 16384 + 8/8 x 1024 + 2 x 512 + 1536 = 28672 MiB ->
    round((183359 - 28672) / 183359, 3) = 0.844."""
    p = plan(load_config("deepseek-ai__DeepSeek-V3.json"), gpu=get_gpu("B200"), release="0.5.23", tp_size=8,
             gpu_memory_capacity_mib=183359)
    assert p.attention_backend == "trtllm_mla" and p.page_size == 64
    assert p.mem_fraction_static == 0.844
    assert not p.piecewise_cuda_graph and "cuda_graph_hook.py:279" in p.source_of("piecewise_cuda_graph_max_tokens").source


def test_0_5_23_weights_rope_fp32_on_rocm_and_no_yarn_totals():
    """base.py:119: 0.5.23 keeps the rotary cache in float32 on ROCm too (0.5.10.post1: model dtype). Llama-3.1-8B on
    MI300X: 131072 positions x 128 x 4 B = 64 MiB (0.5.10.post1: x 2 B = 32 MiB).
    rope_variant.py:417: DeepSeek's YaRN cos/sin_cached_total only on NPU: DeepSeek-R1 on H200 keeps
    163840 x 64 x 4 B = 40 MiB (0.5.10.post1: three times that)."""
    llama = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    for release, rope in (("0.5.23", 131072 * 128 * 4), ("0.5.10.post1", 131072 * 128 * 2)):
        p = plan(llama, gpu=get_gpu("MI300X"), release=release)
        assert float(p.source_of("weights.rope").value) == round(rope / GIB, 4)
    r1 = load_config("deepseek-ai__DeepSeek-R1.json")
    for release, rope in (("0.5.23", 163840 * 64 * 4), ("0.5.10.post1", 3 * 163840 * 64 * 4)):
        p = plan(r1, gpu=get_gpu("H200"), release=release, tp_size=8)
        assert float(p.source_of("weights.rope").value) == round(rope / GIB, 4)


def test_0_5_23_refuses_what_it_does_not_model_by_name():
    """DeepSeek DSA on ROCm (its page size follows the aiter build) or another DSA family (LongCat), and the hybrid
    sliding-window models other than gpt-oss, Llama 4, MiMo-V2 and Gemma 4 (Step3.5 here, gpt-oss's shapes under its
    class name): 0.5.23 sizes them with rules this calculator has not followed; each is refused naming the release,
    never answered with 0.5.10's rule. gpt-oss with the radix cache off and --max-running-requests takes
    SWARequestCapPoolConfigurator, refused as well."""
    longcat = v32_config() | {"architectures": ["LongcatFlashForCausalLM"]}
    step35 = load_config("openai__gpt-oss-120b.json") | {"architectures": ["Step3p5ForCausalLM"]}
    for cfg, gpu, field in ((step35, "H200", "config.sliding_window"),
                            # on ROCm the release is what to change (0.5.10.post1 answers it, below)
                            (v32_config(), "MI355X", "release"),
                            (longcat, "H200", "config.architectures")):
        with pytest.raises(EngineInputError) as e:
            plan(cfg, gpu=get_gpu(gpu), release="0.5.23", tp_size=8)
        assert e.value.field == field and "0.5.23" in e.value.message
    plan(v32_config(), gpu=get_gpu("MI355X"), release="0.5.10.post1", tp_size=8)
    with pytest.raises(EngineInputError) as e:
        plan(load_config("openai__gpt-oss-120b.json"), gpu=get_gpu("H200"), release="0.5.23", disable_radix_cache=True,
             max_running_requests=64)
    assert e.value.field == "disable_radix_cache" and "SWARequestCapPoolConfigurator" in e.value.message


def test_0_5_23_gpt_oss_hybrid_swa_pool_by_hand():
    """gpt-oss-120b on H200, SGLang 0.5.23, --mem-fraction-static 0.85, 139.0 GiB free before loading, 61 GiB of
    weights. 36 layers: 18 sliding (window 128), 18 full (layer_types, configs/model_config.py:2712); 8 KV heads,
    head_dim 64, bf16: one layer's row is 8 x (64 + 64) x 2 = 2,048 B.

    HybridSWAPoolConfigurator (pool_configurator.py:1723; gpt-oss is is_hybrid_swa_model and nothing disables it):
      cell = 2,048 x 18 + swa_full_tokens_ratio 0.8 (arg_groups/fields/schedule.py:160) x 2,048 x 18
           = 36,864 + 29,491.2 = 66,355.2 B                                      (pool_configurator.py:801)
      rest = 139.0 - 61 - 139.0 x (1 - 0.85) = 57.15 GiB                        (kv_cache_configurator.py:3038)
      available = int(57.15 x 2^30) = 61,364,345,241 B                          (kv_cache_configurator.py:3060)
      full = int(61,364,345,241 // 66,355.2) = 924,785 (page 1)                 (pool_configurator.py:915, :880)
      swa  = int(924,785 x 0.8) = 739,828                                       (pool_configurator.py:881)
      the SWA pool holds more than sliding_window_size 127 + page 1            (pool_configurator.py:210)
      max_running_requests = min(max(int(924,785 / 131,072 x 512), 2048), 4096, 924,785 // 2) = 3,612
    0.5.10.post1's two-step split (capacity at 73,728 B, then x 36 / 32.4) lands on the same counts here.
    """
    available = int((139.0 - 61 - 139.0 * (1 - 0.85)) * GIB)
    assert available == 61364345241
    cell = 2048 * 18 + 0.8 * 2048 * 18
    full = int(available // cell)
    swa = int(full * 0.8)
    assert (full, swa) == (924785, 739828)
    kw = {"gpu": get_gpu("H200"), "mem_fraction_static": 0.85, "free_memory_before_load_gib": 139.0,
          "weights_bytes": 61 * GIB}
    p = plan(load_config("openai__gpt-oss-120b.json"), release="0.5.23", **kw)
    assert p.attention == "hybrid_swa" and p.attention_backend == "fa3" and p.page_size == 1
    assert float(p.source_of("cell_size_bytes.hybrid_swa").value) == 66355.2
    assert p.max_total_num_tokens == full and p.swa_max_total_num_tokens == swa
    assert p.max_running_requests == min(max(int(full / 131072 * 512), 2048), 4096) == 3612
    assert abs(p.kv_pool_gib - (full * 2048 * 18 + swa * 2048 * 18) / GIB) < 1e-9
    assert p.does_not_start is None
    old = plan(load_config("openai__gpt-oss-120b.json"), release="0.5.10.post1", **kw)
    assert (old.max_total_num_tokens, old.swa_max_total_num_tokens) == (full, swa)


def test_0_5_23_gpt_oss_eagle3_draft_layer_on_the_full_side_of_the_swa_cell():
    """gpt-oss-120b + a one-layer EAGLE3 head (Llama-style, not hybrid SWA; 1 GiB of draft weights) on H200, 0.5.23, the
    setting above. The draft loads before the pool is sized (managers/scheduler.py:1133), so rest = 57.15 - 1 = 56.15
    GiB; its layer is one more full-attention row of the target's size (pool_configurator.py:755, :777-780):
    cell = 2,048 x (18 + 1) + 0.8 x 2,048 x 18 = 38,912 + 29,491.2 = 68,403.2 B, so
    full = int(int(56.15 x 2^30) // 68,403.2) = int(60,290,603,417 // 68,403.2) = 881,400; swa = int(881,400 x 0.8)
    = 705,120."""
    available = int((139.0 - 61 - 1 - 139.0 * (1 - 0.85)) * GIB)
    full = int(available // (2048 * 19 + 0.8 * 2048 * 18))
    assert (available, full, int(full * 0.8)) == (60290603417, 881400, 705120)
    draft = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    draft.update({"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1})
    p = plan(load_config("openai__gpt-oss-120b.json"), gpu=get_gpu("H200"), release="0.5.23", mem_fraction_static=0.85,
             free_memory_before_load_gib=139.0, weights_bytes=61 * GIB, speculative_algorithm="EAGLE3",
             draft_hf_config=draft, draft_weights_bytes=GIB)
    assert p.max_total_num_tokens == full and p.swa_max_total_num_tokens == int(full * 0.8)
    assert int(p.source_of("cell_size_bytes.draft").value) == 2048


def test_0_5_23_qwen3_next_mamba_pool_with_the_padding_slot_and_the_extra_buffer_by_hand():
    """Qwen3-Next-80B-A3B-Instruct on 2x H200 (TP 2), SGLang 0.5.23, --mem-fraction-static 0.85, 139.0 GiB free before
    loading, 75 GiB of weights per rank. 48 layers: 12 full attention (every 4th), 36 gated delta-net.
    Per request per GDN layer at TP 2 (configs/qwen3_next.py mamba2_cache_params, configs/mamba_utils.py create):
      conv: (128 x 32 + 2 x 16 x 128) / 2 x (4 - 1) x 2 B (bf16) = 24,576 B
      ssm:  32 / 2 x 128 x 128 x 4 B (float32) = 1,048,576 B
      per request: 36 x 1,073,152 = 38,633,472 B.
    rest = 139.0 - 75 - 139.0 x 0.15 = 43.15 GiB                                 (kv_cache_configurator.py:3038)
    _handle_max_mamba_cache: budget = 43.15 x 0.9 / 1.9 GiB (mamba_full_memory_ratio fallback 0.9,
      arg_groups/fields/schedule.py:225; kv_cache_configurator.py:3354)
      K = int((budget x 2^30 - 38,633,472) // 38,633,472) = 567                  (:3383; 0.5.10.post1: 568)
      K + 1 = 568 slots come out of rest: 43.15 - 568 x 38,633,472 / 2^30 = 22.71323 GiB (:3406; memory_pool.py:724)
    KV: cell = 12 full layers x (2 // 2) x (256 + 256) x 2 = 12,288 B -> int(22.71323 x 2^30) // 12,288 = 1,984,712
    max_running_requests = min(max(int(1,984,712 / 262,144 x 512), 2048), 4096) = 3,876, capped at K // 5 = 113:
      _calculate_mamba_ratio = 3 (:227) + 2 tracking slots (allocation_sizing.py:19) of the Mamba extra buffer, which
      the radix cache takes by default (arg_groups/overrides.py:483); 0.5.10.post1 (no extra buffer): 568 // 3 = 189.
    """
    per_req = 36 * ((128 * 32 + 2 * 16 * 128) // 2 * 3 * 2 + 32 // 2 * 128 * 128 * 4)
    assert per_req == 38633472
    rest = 139.0 - 75 - 139.0 * (1 - 0.85)
    k = int((rest * 0.9 / (1 + 0.9) * GIB - per_req) // per_req)
    assert k == 567
    rest_kv = rest - (k + 1) * per_req / GIB
    tokens = int(rest_kv * GIB) // 12288
    assert tokens == 1984712
    assert min(max(int(tokens / 262144 * 512), 2048), 4096) == 3876 and k // 5 == 113
    kw = {"gpu": get_gpu("H200"), "tp_size": 2, "mem_fraction_static": 0.85, "free_memory_before_load_gib": 139.0,
          "weights_bytes": 75 * GIB}
    cfg = load_config("Qwen__Qwen3-Next-80B-A3B-Instruct.json")
    p = plan(cfg, release="0.5.23", **kw)
    assert p.attention == "hybrid_gdn" and p.attention_backend == "fa3" and p.page_size == 1
    assert p.mamba.per_request_bytes == per_req and p.mamba.max_mamba_cache_size == 567
    assert abs(p.mamba.ssm_state_gib - 568 * 36 * 1048576 / GIB) < 1e-9  # the log counts the padding slot
    assert p.cell_size_bytes == 12288 and p.max_total_num_tokens == tokens
    assert p.max_running_requests == 113
    old = plan(cfg, release="0.5.10.post1", **kw)
    assert (old.mamba.max_mamba_cache_size, old.max_total_num_tokens, old.max_running_requests) == (568, tokens, 189)


def test_0_5_23_qwen35_keeps_100_mib_out_before_the_mamba_split_and_runs_trtllm_mha_on_b200():
    """Qwen3.5-9B on H100, 0.5.23, --mem-fraction-static 0.85, 79.0 GiB free, 17 GiB of weights (TP 1). A multimodal
    model: 100 MiB leave the budget before the Mamba split (kv_cache_configurator.py:210, :3038-3040).
    24 GDN layers at TP 1: conv (128 x 32 + 2 x 16 x 128) x 3 x 2 = 49,152 B, ssm 32 x 128 x 128 x 4 = 2,097,152 B
    -> 24 x 2,146,304 = 51,511,296 B per request. rest = 79.0 - 17 - 79.0 x 0.15 - 100 / 1024 = 50.05234375 GiB;
    K = int((rest x 0.9 / 1.9 x 2^30 - 51,511,296) // 51,511,296) = 493; KV: 8 full layers x 4 KV heads x 512 x 2
    = 32,768 B per token -> int((rest - 494 x 51,511,296 / 2^30) x 2^30) // 32,768 = 863,547;
    max_running_requests = min(2048, 493 // 5 = 98) = 98.
    On B200 SGLang 0.5.23 gives Qwen3.5 / Qwen3-Next trtllm_mha with 64-token pages (model_overrides/qwen3_5.py:28-48:
    the Mamba extra buffer is on), where 0.5.10.post1 gave triton."""
    per_req = 24 * ((128 * 32 + 2 * 16 * 128) * 3 * 2 + 32 * 128 * 128 * 4)
    rest = 79.0 - 17 - 79.0 * (1 - 0.85) - 100 / 1024
    k = int((rest * 0.9 / 1.9 * GIB - per_req) // per_req)
    tokens = int((rest - (k + 1) * per_req / GIB) * GIB) // 32768
    assert (per_req, k, tokens) == (51511296, 493, 863547)
    cfg = load_config("Qwen__Qwen3.5-9B.json")
    p = plan(cfg, gpu=get_gpu("H100"), release="0.5.23", mem_fraction_static=0.85, free_memory_before_load_gib=79.0,
             weights_bytes=17 * GIB)
    assert p.mamba.max_mamba_cache_size == k and p.max_total_num_tokens == tokens and p.max_running_requests == 98
    b = plan(cfg, gpu=get_gpu("B200"), release="0.5.23")
    assert b.attention_backend == "trtllm_mha" and b.page_size == 64 and b.max_total_num_tokens % 64 == 0
    assert default_backend("0.5.23", get_gpu("B200"), cfg).source == (
        "sglang==0.5.23 sglang/srt/arg_groups/model_overrides/qwen3_5.py:28")
    assert default_backend("0.5.10.post1", get_gpu("B200"), cfg).backend == "triton"


def test_0_5_23_deepseek_v32_dsa_pool_counts_its_own_rows_by_hand():
    """DeepSeek-V3.2 (61 layers, kv_lora_rank 512, rope 64, index_head_dim 128), TP 8, SGLang 0.5.23,
    --mem-fraction-static 0.85, 80 GiB of weights per rank. Page 64 (model_overrides/deepseek_v2.py:171, index_kpool 1).
    The cell is what the pool allocates (pool_configurator.py:492, kv_cache_configurator.py:3412-3475), + the indexer's
    fp8 K with scales, 128 + 128 / 128 x 4 = 132 B per layer (pool_configurator.py:569):
    - H200, --kv-cache-dtype fp8_e4m3: flashmla_kv both ways (overrides.py:716), the scaled rows 512 + 16 + 64 x 2 =
      656 B: cell = (656 + 132) x 61 = 48,068 B (0.5.10.post1 divided by 576 + 132 and allocated 656-byte rows);
      rest = 139.0 - 80 - 139.0 x 0.15 = 38.15 GiB -> int(38.15 x 2^30) // 48,068 = 852,193 -> 852,160 (page 64).
    - H200 + NEXTN (1 MTP layer, 1 GiB of draft weights loaded first): the draft adds int((48,068 - 132 x 61) x 1 / 61)
      + 132 = 656 + 132 B (pool_configurator.py:296-318): 48,856 B; rest 37.15 GiB -> 816,448 tokens.
    - B200, KV auto: fp8_e4m3 from SM100 (overrides.py:534), trtllm both ways: the raw 576 B rows, cell = (576 + 132) x
      61 = 43,188 B; rest = 178.0 - 80 - 178.0 x 0.15 = 71.3 GiB -> int(71.3 x 2^30) // 43,188 -> 1,772,608.
    """
    cfg = json.loads((CATALOG / "deepseek-ai__DeepSeek-V3.2.json").read_text())
    kw = {"tp_size": 8, "mem_fraction_static": 0.85, "weights_bytes": 80 * GIB}
    assert (656 + 132) * 61 == 48068 and (576 + 132) * 61 == 43188
    h = plan(cfg, gpu=get_gpu("H200"), release="0.5.23", kv_cache_dtype="fp8_e4m3", free_memory_before_load_gib=139.0,
             **kw)
    assert h.attention == "nsa" and h.attention_backend == "dsa" and h.page_size == 64
    assert h.cell_size_bytes == h.pool_bytes_per_token == 48068
    assert h.max_total_num_tokens == int(38.15 * GIB) // 48068 // 64 * 64 == 852160
    m = plan(cfg, gpu=get_gpu("H200"), release="0.5.23", kv_cache_dtype="fp8_e4m3", free_memory_before_load_gib=139.0,
             speculative_algorithm="NEXTN", draft_weights_bytes=GIB, **kw)
    assert m.cell_size_bytes == 48068 + int((48068 - 132 * 61) / 61) + 132 == 48856
    assert m.max_total_num_tokens == int(37.15 * GIB) // 48856 // 64 * 64 == 816448
    b = plan(cfg, gpu=get_gpu("B200"), release="0.5.23", free_memory_before_load_gib=178.0, **kw)
    assert b.kv_cache_dtype == "fp8_e4m3" and b.cell_size_bytes == b.pool_bytes_per_token == 43188
    assert b.max_total_num_tokens == int(71.3 * GIB) // 43188 // 64 * 64 == 1772608
    old = plan(cfg, gpu=get_gpu("H200"), release="0.5.10.post1", kv_cache_dtype="fp8_e4m3",
               free_memory_before_load_gib=139.0, **kw)
    assert old.cell_size_bytes == (576 + 132) * 61 and old.pool_bytes_per_token == 48068


def test_0_5_23_glm_dsa_indexer_layers_and_rows_by_compute_capability():
    """GLM-5.1-NVFP4 (78 layers, indexer_types all "full": every layer keeps index-K rows, configs/model_config.py:488)
    on H200 with the KV auto -> bfloat16 below SM100 (overrides.py:534): raw 576-element rows x 2 B,
    cell = (1,152 + 132) x 78 = 100,152 B. With "shared" on every other layer from layer 2 only 40 layers keep them:
    (1,152 x 78) + 132 x 40 = 95,136 B. GLM-5 with an fp8 KV on SM12x takes flashinfer_sparse_mla
    (overrides.py:637-651), the scaled 656-byte rows: (656 + 132) x 78 = 61,464 B."""
    glm = json.loads((CATALOG / "nvidia__GLM-5.1-NVFP4.json").read_text())
    p = plan(glm, gpu=get_gpu("H200"), release="0.5.23", tp_size=8)
    assert p.kv_cache_dtype == "bfloat16" and p.cell_size_bytes == (1152 + 132) * 78 == 100152
    shared = glm | {"indexer_types": ["full", "full"] + ["shared" if i % 2 == 0 else "full" for i in range(2, 78)]}
    assert plan(shared, gpu=get_gpu("H200"), release="0.5.23", tp_size=8).cell_size_bytes == 1152 * 78 + 132 * 40
    p = plan(json.loads((CATALOG / "zai-org__GLM-5-FP8.json").read_text()), gpu=get_gpu("RTX5090"), release="0.5.23",
             tp_size=8)
    assert p.kv_cache_dtype == "fp8_e4m3" and p.cell_size_bytes == (656 + 132) * 78 == 61464


def test_0_5_23_refuses_qwen3_vl_on_a_large_hopper_by_the_top_level_model_type():
    """model_overrides/qwen3_vl.py:20-32: SGLang 0.5.23 applies its Qwen3-VL serving defaults on SM90 GPUs of 60 GiB or
    more by the top-level ``model_type`` (qwen3_vl), not the text config's (qwen3_vl_text); not modelled: refused there,
    answered on a 48 GiB L40S and by 0.5.10.post1."""
    cfg = json.loads((CATALOG / "Qwen__Qwen3-VL-8B-Instruct.json").read_text())
    assert cfg["model_type"] == "qwen3_vl" and cfg["text_config"]["model_type"] == "qwen3_vl_text"
    with pytest.raises(EngineInputError) as e:
        plan(cfg, gpu=get_gpu("H100"), release="0.5.23")
    assert "0.5.23" in e.value.message and "qwen3_vl.py:20" in e.value.message
    plan(cfg, gpu=get_gpu("L40S"), release="0.5.23")
    plan(cfg, gpu=get_gpu("H100"), release="0.5.10.post1")


def test_0_5_23_backends():
    """model_override_base.py:277 get_default_attn_backend and the 0.5.23 checks: trtllm_mha runs prefill on SM90 too
    (attention_hook.py:200-205; 0.5.10.post1: SM100 only), pages 16-128 (overrides.py:1185); cutlass_mla is no longer
    a choice (arg_groups/choices.py:69); trtllm_mla's KV dtypes are fp8_e4m3, bf16, auto (overrides.py:1216)."""
    llama = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    ds = load_config("deepseek-ai__DeepSeek-R1.json")
    assert default_backend("0.5.23", get_gpu("H100"), llama).backend == "fa3"
    assert default_backend("0.5.23", get_gpu("B200"), llama).backend == "trtllm_mha"
    assert default_backend("0.5.23", get_gpu("B200"), ds).backend == "trtllm_mla"
    assert default_backend("0.5.23", get_gpu("H200"), ds).backend == "fa3"
    v = check_backend("0.5.23", get_gpu("H100"), llama, "trtllm_mha", page_size=128)
    assert v.verdict == "works" and v.page_size == 128
    assert check_backend("0.5.10.post1", get_gpu("H100"), llama, "trtllm_mha").verdict != "works"
    with pytest.raises(EngineInputError):
        check_backend("0.5.23", get_gpu("B200"), ds, "cutlass_mla")
    assert check_backend("0.5.23", get_gpu("B200"), ds, "trtllm_mla", kv_cache_dtype="fp4_e2m1").verdict == "no"


def test_0_5_23_wna16_moe_on_b200_takes_the_triton_path_and_keeps_g_idx():
    """compressed_tensors.py:927-948 (0.5.23): on SM100 with the auto MoE runner a symmetric INT4 group-32/128 scheme
    without act-order (Kimi-K2.5's: num_bits 4, group_size 32, symmetric, actorder null) runs
    CompressedTensorsWNA16TritonMoE, which keeps the four int32 g_idx tensors (compressed_tensors_wNa16_moe.py:219):
    60 MoE layers x 384 x (2 x 7168 + 2 x 2048/8) x 4 B = 1,368,391,680 B at TP 8 -- as on ROCm; 0.5.10.post1's CUDA
    path (Marlin) frees them."""
    cfg = load_config("moonshotai__Kimi-K2.5.json")
    new = _terms(plan(cfg, gpu=get_gpu("B200"), release="0.5.23", tp_size=8))
    assert new["wna16_g_idx"] * GIB == pytest.approx(1_368_391_680, abs=GIB * 1e-4)
    assert "wna16_g_idx" not in _terms(plan(cfg, gpu=get_gpu("B200"), release="0.5.10.post1", tp_size=8))
    assert "wna16_g_idx" not in _terms(plan(cfg, gpu=get_gpu("H200"), release="0.5.23", tp_size=8))


def test_0_5_23_launch_command_uses_its_flag_names():
    """0.5.23 has no --cuda-graph-max-bs (the decode phase's is --cuda-graph-max-bs-decode, arg_groups/fields/exec_.py:629)
    and spells DP attention --attn-dp-size N (--dp-size N --enable-dp-attention is deprecated, server_args.py:419)."""
    p = plan(load_config("deepseek-ai__DeepSeek-V3.json"), gpu=get_gpu("H200"), release="0.5.23", tp_size=8, dp_size=8,
             enable_dp_attention=True)
    argv = launch_argv(p, "deepseek-ai/DeepSeek-V3")
    flat = " ".join(argv)
    assert "--attn-dp-size 8" in flat and "--enable-dp-attention" not in flat and "--dp-size" not in flat
    assert f"--cuda-graph-max-bs-decode {p.cuda_graph_max_bs}" in flat and "--cuda-graph-max-bs " not in flat
    old = " ".join(launch_argv(plan(load_config("deepseek-ai__DeepSeek-V3.json"), gpu=get_gpu("H200"),
                                    release="0.5.10.post1", tp_size=8, dp_size=8, enable_dp_attention=True),
                               "deepseek-ai/DeepSeek-V3"))
    assert "--dp-size 8 --enable-dp-attention" in old and "--cuda-graph-max-bs " in old


# ---------------------------------------------------------------------------------------------------------
# DP attention: the launch command's --chunked-prefill-size and the embedding split, per release


def _sglang_chunk_from_argv(release: str, argv: list[str]) -> int:
    """chunked_prefill_size as SGLang ``release`` resolves it from a launch command's flags, by SGLang's rule written
    out here from its source: with --enable-dp-attention ``chunked_prefill_size // 2`` in 0.4.3.post4
    (server_args.py:265) and ``// dp_size`` up to 0.5.10.post1 (0.5.10.post1 server_args.py:2641); 0.5.23: with
    --attn-dp-size N, ``// N`` (arg_groups/parallel_hook.py:331)."""
    flags = {a: (argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else True)
             for i, a in enumerate(argv) if a.startswith("--")}
    chunk = int(flags["--chunked-prefill-size"])
    if "--attn-dp-size" in flags:
        return chunk // int(flags["--attn-dp-size"])
    if flags.get("--enable-dp-attention"):
        return chunk // 2 if release == "0.4.3.post4" else chunk // int(flags["--dp-size"])
    return chunk


@pytest.mark.parametrize("release,dp,per_rank", [
    # DeepSeek-R1 on 8 x H200 (139.8 GiB < 160 GiB: the GPU table's chunked prefill 8192 in every release here)
    ("0.4.3.post4", 8, 8192 // 2), ("0.5.3", 8, 8192 // 8), ("0.5.7", 4, 8192 // 4), ("0.5.10.post1", 8, 8192 // 8),
    ("0.5.10.post1", 2, 8192 // 2), ("0.5.23", 8, 8192 // 8), ("0.5.23", 4, 8192 // 4)])
def test_the_launch_command_under_dp_attention_makes_sglang_derive_the_planned_chunk(release, dp, per_rank):
    """The printed command must reproduce the plan: SGLang divides --chunked-prefill-size under DP attention itself, so
    the command carries the undivided 8192 and SGLang's own rule applied to the printed flags gives the plan's per-rank
    chunk (before the fix the command printed the divided value, which SGLang divided a second time)."""
    p = plan(load_config("deepseek-ai__DeepSeek-R1.json"), gpu=get_gpu("H200"), release=release, tp_size=8,
             dp_size=dp, enable_dp_attention=True)
    argv = launch_argv(p, "deepseek-ai/DeepSeek-R1")
    assert p.chunked_prefill_size == per_rank
    assert argv[argv.index("--chunked-prefill-size") + 1] == "8192" == str(p.chunked_prefill_size_arg)
    assert _sglang_chunk_from_argv(release, argv) == p.chunked_prefill_size


def test_the_launch_command_of_a_forced_dp_attention_and_of_a_given_chunk():
    """DeepSeek-V3.2 on 8 x B200 with 0.5.3.post1: the NSA block turns DP attention on with dp_size = tp_size
    (server_args.py:859-860) and the command passes --dp-size 8 --enable-dp-attention; B200 (178 GiB) -> chunked prefill
    16384, per rank 16384 // 8 = 2048. A given --chunked-prefill-size 4096 with --dp-size 2 on 0.5.10.post1: 4096 in
    the command, 2048 per rank. Without DP attention the command carries the plan's value unchanged."""
    a = plan(v32_config(), gpu=get_gpu("B200"), release="0.5.3.post1", tp_size=8)
    argv = launch_argv(a, "deepseek-ai/DeepSeek-V3.2-Exp")
    assert (a.chunked_prefill_size, a.chunked_prefill_size_arg) == (2048, 16384)
    assert _sglang_chunk_from_argv("0.5.3.post1", argv) == 2048
    r1 = load_config("deepseek-ai__DeepSeek-R1.json")
    b = plan(r1, gpu=get_gpu("H200"), release="0.5.10.post1", tp_size=8, dp_size=2, enable_dp_attention=True,
             chunked_prefill_size=4096)
    argv = launch_argv(b, "deepseek-ai/DeepSeek-R1")
    assert argv[argv.index("--chunked-prefill-size") + 1] == "4096" and b.chunked_prefill_size == 2048
    assert b.source_of("chunked_prefill_size_arg").kind == "input"
    c = plan(r1, gpu=get_gpu("H200"), release="0.5.10.post1", tp_size=8)
    argv = launch_argv(c, "deepseek-ai/DeepSeek-R1")
    assert argv[argv.index("--chunked-prefill-size") + 1] == "8192" == str(c.chunked_prefill_size)


def test_0_5_23_dp_attention_reclamps_the_prefill_graph_to_the_per_rank_chunk():
    """0.5.23 sizes the breakable prefill CUDA graph from the undivided chunk (MLA: min(8192, 8192)) in the memory hook,
    then re-clamps it to the per-DP-rank chunked prefill size (arg_groups/parallel_hook.py:351): 8192 // 8 = 1024; the
    reserve keeps the MLA graph's flat 1.5 GiB either way."""
    p = plan(load_config("deepseek-ai__DeepSeek-R1.json"), gpu=get_gpu("H200"), release="0.5.23", tp_size=8,
             dp_size=8, enable_dp_attention=True)
    assert p.piecewise_cuda_graph and p.piecewise_cuda_graph_max_tokens == 1024
    assert "parallel_hook.py:351" in p.source_of("piecewise_cuda_graph_max_tokens").source


R1_EMB = 129280 * 7168 * 2  # vocab 129280 (a multiple of 64) x hidden 7168 x bf16 = 1,853,358,080 B
Q3_EMB = 151936 * 4096 * 2  # Qwen3-235B-A22B: vocab 151936 (a multiple of 64) x hidden 4096 x bf16 = 1,244,659,712 B


@pytest.mark.parametrize("release,dp,expected", [
    # DeepSeek-R1, 8 GPUs: the count splits the embedding over TP 8; the term is what SGLang holds beyond that.
    # --dp-size 8 (attention TP 1): whole in every release (enable_tp=False up to 0.5.7, the attention-TP group of 1
    # from 0.5.8.post1): 1,853,358,080 x (1 - 1/8) = 1,621,688,320 B
    ("0.4.3.post4", 8, 1_621_688_320), ("0.5.3", 8, 1_621_688_320), ("0.5.7", 8, 1_621_688_320),
    ("0.5.8.post1", 8, 1_621_688_320), ("0.5.10.post1", 8, 1_621_688_320), ("0.5.23", 8, 1_621_688_320),
    # --dp-size 4 (attention TP 2): whole up to 0.5.7; split over the attention-TP group of 2 from 0.5.8.post1:
    # 1,853,358,080 x (1/2 - 1/8) = 695,009,280 B
    ("0.5.3", 4, 1_621_688_320), ("0.5.7", 4, 1_621_688_320), ("0.5.8.post1", 4, 695_009_280),
    ("0.5.9", 4, 695_009_280), ("0.5.10.post1", 4, 695_009_280), ("0.5.23", 4, 695_009_280)])
def test_dp_attention_embedding_of_deepseek_by_release(release, dp, expected):
    assert R1_EMB * (1 - 1 / 8) == 1_621_688_320 and R1_EMB * (1 / 2 - 1 / 8) == 695_009_280
    p = plan(load_config("deepseek-ai__DeepSeek-R1.json"), gpu=get_gpu("H200"), release=release, tp_size=8,
             dp_size=dp, enable_dp_attention=True)
    term = p.source_of("weights.dp_attention:embedding")
    assert float(term.value) == round(expected / GIB, 4)
    assert "models/deepseek_v2.py:" in term.source


@pytest.mark.parametrize("release,expected", [
    # Qwen3-235B-A22B, --tp 8 --dp-size 4 (attention TP 2): Qwen3MoeModel(Qwen2MoeModel) keeps it whole from 0.4.10.post2
    # to 0.5.8.post1 (x 7/8 = 1,089,077,248 B), splits it over the attention-TP group from 0.5.9 (x 3/8 = 466,747,392 B)
    ("0.4.10.post2", 1_089_077_248), ("0.5.3", 1_089_077_248), ("0.5.8.post1", 1_089_077_248),
    ("0.5.9", 466_747_392), ("0.5.10.post1", 466_747_392), ("0.5.23", 466_747_392)])
def test_dp_attention_embedding_of_qwen3_moe_by_release(release, expected):
    assert Q3_EMB * 7 / 8 == 1_089_077_248 and Q3_EMB * 3 / 8 == 466_747_392
    p = plan(load_config("Qwen__Qwen3-235B-A22B.json"), gpu=get_gpu("H200"), release=release, tp_size=8, dp_size=4,
             enable_dp_attention=True)
    assert float(p.source_of("weights.dp_attention:embedding").value) == round(expected / GIB, 4)


@pytest.mark.parametrize("release", ["0.4.10.post2", "0.5.3", "0.5.8.post1", "0.5.10.post1", "0.5.23"])
def test_dp_attention_keeps_llamas_embedding_split_over_the_tp_group(release):
    """LlamaModel builds VocabParallelEmbedding without a DP-attention argument in every covered release: the embedding
    stays split over the TP group as the count has it (before the fix 0.4.10-0.5.10 counted it whole)."""
    p = plan(load_config("meta-llama__Llama-3.1-70B-Instruct.json"), gpu=get_gpu("H200"), release=release, tp_size=8,
             dp_size=4, enable_dp_attention=True)
    assert not any(s.field == "weights.dp_attention:embedding" for s in p.sources)
    assert not any("splits its input embedding" in n for n in p.notes)


def test_the_embedding_rule_is_what_each_cited_line_says():
    """For every covered release and model family, the cited line of the wheel (and the call it opens) says the mode
    dp_embedding_split answers: enable_tp=not ... -> whole, use_attn_tp_group=is_dp_attention_enabled() or
    get_embedding_tp_kwargs() -> the attention-TP group, neither -> the TP group."""
    from calculator.runtimes.sglang.weights import dp_embedding_split

    family_arch = {"deepseek": "DeepseekV3ForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM",
                   "glm4_moe": "Glm4MoeForCausalLM", "gpt_oss": "GptOssForCausalLM", "qwen3_next": "Qwen3NextForCausalLM",
                   "llama": "LlamaForCausalLM", "mixtral": "MixtralForCausalLM", "minimax_m2": "MiniMaxM2ForCausalLM"}
    checked = 0
    for release in COVERED:
        wheel = wheel_of(release)
        if not wheel.exists():
            continue
        with zipfile.ZipFile(wheel) as z:
            for fam, arch in family_arch.items():
                if not R.has_rule(release, f"embed_{fam}"):
                    assert dp_embedding_split(release, arch) is None
                    continue
                path, line = R._LINES[release][f"embed_{fam}"]
                lines = z.read(path).decode().splitlines()
                call = lines[line - 1]
                if "VocabParallelEmbedding(" in call:  # the call's arguments up to its closing parenthesis
                    i = line
                    while not lines[i - 1].strip().startswith(")") and i - line < 10:
                        i += 1
                        call += lines[i - 1]
                want = ("whole" if "enable_tp=not" in call else "attn_tp" if (
                    "use_attn_tp_group=is_dp_attention_enabled()" in call or "get_embedding_tp_kwargs()" in call)
                    else "tp" if "VocabParallelEmbedding(" in call and "enable_tp" not in call
                    and "use_attn_tp_group" not in call else None)
                assert want is not None, (release, fam, call)
                assert dp_embedding_split(release, arch)[0] == want, (release, fam)
                checked += 1
    if not checked:
        pytest.skip("no SGLang wheel downloaded")


def test_dp_attention_keeps_mlas_a_projections_whole():
    """DeepSeek-R1 FP8 (block 128 x 128: 1 + 4 / 128^2 B per weight), --tp 8 --dp-size 8: q_a_proj and
    kv_a_proj_with_mqa (fused_qkv_a_proj_with_mqa, ReplicatedLinear) and the q_a / kv_a RMSNorms stay whole on every rank,
    so the attention's DP-attention split is taken back for 61 x (7168 x (1536 + 512 + 64) + 1536 + 512) = 923,592,704
    parameters x (1 - 1/8) (before the fix kv_a_proj_with_mqa was taken back neither: counted 1.875 times)."""
    fp8 = 1 + 4 / (128 * 128)
    rep = 61 * (7168 * (1536 + 512 + 64) + 1536 + 512)
    assert rep == 923_592_704
    p = plan(load_config("deepseek-ai__DeepSeek-R1.json"), gpu=get_gpu("H200"), release="0.5.10.post1", tp_size=8,
             dp_size=8, enable_dp_attention=True)
    assert float(p.source_of("weights.mla_a_proj_replicated").value) == round(-rep * fp8 * (1 - 1 / 8) / GIB, 4)


# ---------------------------------------------------------------------------------------------------------
# Gemma 3 served text-only by default


GEMMA3_TEXT = 262208 * 5376 + 62 * (5376 * 32 * 128 * 2 + 5376 * 16 * 128 * 2 + 2 * 128 + 3 * 5376 * 21504
                                     + 4 * 5376) + 5376
SIGLIP = (3 * 14 * 14 * 1152 + 1152 + 4096 * 1152
          + 27 * (4 * (1152 * 1152 + 1152) + 2 * 2 * 1152 + 1152 * 4304 + 4304 + 4304 * 1152 + 1152) + 2 * 1152
          + 1152 * 5376 + 1152)


def test_gemma3_27b_is_served_text_only_by_default_in_0_5_10():
    """google/gemma-3-27b-it on one H100 (nvidia-smi 81,559 MiB; 78.5 GiB free before loading given), SGLang 0.5.10.post1.
    Gemma3ForConditionalGeneration is in mm_disabled_models (configs/model_config.py:156): enable_multimodal False, so
    model_config.is_multimodal is False -> no adjust_mem_fraction_for_vlm (server_args.py:1333) and the piecewise CUDA
    graph stays on (:1110). The vision tower is still built and loaded (models/gemma3_mm.py:181), so it is in the
    weights.

    By hand from the config (text: 62 layers, hidden 5376, 32 heads / 16 KV heads of 128, intermediate 21504, vocab
    262208 tied; SigLIP: 27 layers of 1152, MLP 4304, 14-px patches of 896-px images, projector 1152 -> 5376):
      parameters = 27,009,346,304 (text) + 423,060,336 (vision) -> x 2 B;
      rotary caches (0.5.10: both the local and the global layers' rope_type 'default', models/gemma3_causal.py:202):
        2 x 131072 x 128 x 4 B = 134,217,728 B;
      W = 54,864,813,280 + 134,217,728 = 54,999,031,008 B.
      H100: chunked prefill 8192, cuda_graph_max_bs 256; the piecewise graph captures 58 sizes up to 8192
        (8 of 4-32, 14 of 48-256, 8 of 288-512, 8 of 576-1024, 12 of 1280-4096, 8 of 4608-8192) -> 464 MiB;
      reserved = 512 + 8192 x 1.5 + 256 x 2 + 1 / 8 x 1024 + 464 = 13,904 MiB;
      mem_fraction_static = round((81559 - 13904) / 81559, 3) = 0.83 (0.8 x 0.909736 = 0.7551 with the VLM factor);
      rest = 78.5 x 0.83 - W / 2^30 = 65.155 - 51.2221 GiB; cell = 16 x (128 + 128) x 62 x 2 = 507,904 B;
      max_total_num_tokens = int(rest x 2^30) // 507,904."""
    assert GEMMA3_TEXT == 27_009_346_304 and SIGLIP == 423_060_336
    w = (GEMMA3_TEXT + SIGLIP) * 2 + 2 * 131072 * 128 * 4
    assert w == 54_999_031_008
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32)) + list(range(576, 1025, 64))
             + list(range(1280, 4097, 256)) + list(range(4608, 8193, 512)))
    assert len(sizes) == 58
    reserved = 512 + 8192 * 1.5 + 256 * 2 + 1 / 8 * 1024 + 58 * 8
    mfs = round((81559 - reserved) / 81559, 3)
    assert (reserved, mfs) == (13904, 0.83)
    tokens = int((78.5 * mfs - w / GIB) * GIB) // (16 * 256 * 62 * 2)
    cfg = load_config("google__gemma-3-27b-it.json")
    kw = {"gpu": get_gpu("H100"), "release": "0.5.10.post1", "gpu_memory_capacity_mib": 81559,
          "free_memory_before_load_gib": 78.5, "context_length": 32768}
    p = plan(cfg, weights_bytes=w, **kw)
    assert p.mem_fraction_static == mfs and p.max_total_num_tokens == tokens
    assert p.piecewise_cuda_graph and not any(s.field == "mem_fraction_static.vlm" for s in p.sources)
    assert "model_config.py:156" in p.source_of("multimodal").source
    # the estimate counts the vision tower and the two default rotary caches (engine count of SigLIP within 8 KB)
    est = plan(cfg, **kw)
    t = _terms(est)
    assert t["parameters"] * GIB == pytest.approx((GEMMA3_TEXT + SIGLIP) * 2, abs=GIB * 1e-4)
    assert t["rope"] * GIB == pytest.approx(2 * 131072 * 128 * 4, abs=GIB * 1e-4)
    assert est.weights_gib == pytest.approx(w / GIB, abs=1e-3)


@pytest.mark.parametrize("release", ["0.5.3", "0.5.7", "0.5.9", "0.5.23"])
def test_gemma3_27b_gets_no_vlm_factor_in_any_release(release):
    """Every covered release that serves Gemma3ForConditionalGeneration lists it in mm_disabled_models (from 0.4.10.post2;
    0.4.3.post4 has no such class, and refuses Gemma 3's sliding-window layers in 0.4.10.post2 here), so
    mem_fraction_static is the reserve formula's alone. H100 81,559 MiB, reserve without the piecewise graph (not yet
    default before 0.5.10): 512 + 8192 x 1.5 + 256 x 2 + 128 = 13,440 MiB -> round(68,119 / 81,559, 3) = 0.835; 0.5.23's
    reserve has the breakable prefill graph (on for a text-only model): 13,904 MiB -> 0.83."""
    assert round((81559 - 13440) / 81559, 3) == 0.835 and round((81559 - 13904) / 81559, 3) == 0.83
    p = plan(load_config("google__gemma-3-27b-it.json"), gpu=get_gpu("H100"), release=release,
             gpu_memory_capacity_mib=81559, free_memory_before_load_gib=78.5)
    assert p.mem_fraction_static == (0.83 if release == "0.5.23" else 0.835)
    assert not any(s.field == "mem_fraction_static.vlm" for s in p.sources)


def test_0_5_23_is_multimodal_also_by_a_text_sub_config_and_not_for_language_model_only():
    """sglang==0.5.23 configs/model_config.py:809-829: is_multimodal = enable_multimodal and not is_lm_only and
    (is_multimodal_model(architectures) or has_multimodal_subconfig or has_dsv41_vision), has_multimodal_subconfig =
    hf_config is not hf_text_config (a thinker / llm / language / text sub-config, utils/hf_transformers/common.py:582-606;
    a vision or audio config only with --model-impl transformers), is_lm_only = the config's language_model_only (:674).
    - KimiK3ForConditionalGeneration is not in multimodal_model_archs; with a text_config it is multimodal, without not;
    - a vision_config alone does not make it multimodal in 0.5.23 (it does in 0.5.10.post1, model_config.py:183);
    - Mistral-Small-3.1 (Mistral3ForConditionalGeneration, listed) with "language_model_only": true is not: its pool
      keeps the 100 MiB the multimodal one gives to the embedding cache (kv_cache_configurator.py:210), and its prefill
      CUDA graph (off for a multimodal model outside the allow-list, cuda_graph_hook.py:231)."""
    from calculator.runtimes.sglang.memory import is_multimodal

    text = {"hidden_size": 1024, "num_attention_heads": 8}
    assert is_multimodal("0.5.23", {"architectures": ["KimiK3ForConditionalGeneration"], "text_config": text})
    assert not is_multimodal("0.5.23", {"architectures": ["KimiK3ForConditionalGeneration"]})
    vision_only = {"architectures": ["KimiK3ForConditionalGeneration"], "vision_config": {"hidden_size": 1152}}
    assert not is_multimodal("0.5.23", vision_only) and is_multimodal("0.5.10.post1", vision_only)
    cfg = load_config("mistralai__Mistral-Small-3.1-24B-Instruct-2503.json")
    assert is_multimodal("0.5.23", cfg) and not is_multimodal("0.5.23", {**cfg, "language_model_only": True})
    kw = {"gpu": get_gpu("H100"), "release": "0.5.23", "mem_fraction_static": 0.85, "free_memory_before_load_gib": 79.0,
          "weights_bytes": 48 * GIB}
    mm, lm = plan(cfg, **kw), plan({**cfg, "language_model_only": True}, **kw)
    assert not mm.piecewise_cuda_graph and lm.piecewise_cuda_graph
    assert any(x.field == "rest_memory_gib.multimodal" for x in mm.sources)
    assert not any(x.field == "rest_memory_gib.multimodal" for x in lm.sources)
    assert lm.rest_memory_gib - mm.rest_memory_gib == pytest.approx(100 / 1024)
    assert "model_config.py:820" in mm.source_of("rest_memory_gib.multimodal").source


def test_the_multimodal_lists_are_the_wheels():
    """releases.multimodal_lists (data/architectures.json) against each wheel's configs/model_config.py; 0.5.23's
    is_multimodal reads the same extracted lists (no copy of its own)."""
    from calculator.runtimes.sglang.data.extract_architectures import multimodal_lists
    from calculator.runtimes.sglang.memory import is_multimodal_0523

    assert R.multimodal_lists("0.4.3.post4") is None
    archs, text_only = R.multimodal_lists("0.5.23")
    assert all(is_multimodal_0523(a, {}) for a in archs - text_only - {"MiMoV2ForCausalLM"})
    assert not any(is_multimodal_0523(a, {}) for a in text_only)
    for release in COVERED:
        wheel = wheel_of(release)
        if not wheel.exists():
            continue
        with zipfile.ZipFile(wheel) as z:
            mm = multimodal_lists(z.read("sglang/srt/configs/model_config.py").decode())
        got = R.multimodal_lists(release)
        if mm is None:
            assert got is None
            continue
        assert got == (frozenset(mm["archs"]), frozenset(mm["text_only"]))
        if R.has_rule(release, "mm_disabled"):
            assert R._LINES[release]["mm_disabled"][1] == mm["text_only_line"]
            assert R._LINES[release]["mm_archs"][1] == mm["archs_line"]


# ---------------------------------------------------------------------------------------------------------
# The NEXTN (MTP) draft as deepseek_nextn.py builds it


def _r1_nextn_by_hand(tp: int, attn_tp: int, *, body_bytes: float) -> float:
    """DeepSeek-R1's MTP layer as sglang==0.5.10.post1 models/deepseek_nextn.py builds it, bytes on one rank:
    - DeepseekV2DecoderLayer(quant_config=the checkpoint's) (:125-133): MLA attention 187,107,328 parameters per layer
      (q_a 7168 x 1536, q_a_layernorm 1536, q_b 1536 x 128 x 192, kv_a 7168 x 576, kv_a_layernorm 512,
      kv_b 512 x 128 x 256, o 128 x 128 x 7168), q_a / kv_a (ReplicatedLinear) whole, the rest over the attention-TP
      group; MoE (is_nextn: sparse) 256 routed + 1 shared expert of 3 x 7168 x 2048, over TP;
    - eh_proj nn.Linear(2 x 7168, 7168) (:102): bf16, whole; enorm, hnorm, the two layer norms, shared_head.norm and the
      router gate 256 x 7168 at bf16, e_score_correction_bias 256 x fp32;
    - absorbed w_kc / w_vc (post_load_weights(is_nextn=True)): 512 x 128 x 256 x 2 B over the attention-TP group;
    - its own embed_tokens / lm_head replaced by the target's (speculative/eagle_worker.py:184): 0."""
    mla = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    assert mla == 187_107_328
    rep = 7168 * (1536 + 576)
    experts = 257 * 3 * 7168 * 2048
    return ((mla - rep) * body_bytes / attn_tp + rep * body_bytes + experts * body_bytes / tp
            + 2 * 7168 * 7168 * 2 + (5 * 7168 + 256 * 7168) * 2 + 256 * 4 + 512 * 128 * 256 * 2 / attn_tp)


def test_nextn_draft_of_deepseek_r1_fp8_is_built_as_deepseek_nextn_says():
    """DeepSeek-R1 FP8 (block 128 x 128), --tp 8, --speculative-algorithm NEXTN: the layer at the checkpoint's fp8, the
    eh_proj at bf16 whole: about 1.55 GiB per rank (the old 'MTP parameters x fp8 / TP' said 1.35); with --dp-size 8
    --enable-dp-attention the attention is whole on the rank (attention TP 1)."""
    fp8 = 1 + 4 / (128 * 128)
    r1 = load_config("deepseek-ai__DeepSeek-R1.json")
    expected = _r1_nextn_by_hand(8, 8, body_bytes=fp8)
    p = plan(r1, gpu=get_gpu("H200"), release="0.5.10.post1", tp_size=8, speculative_algorithm="NEXTN")
    assert p.speculative.draft_weights_gib * GIB == pytest.approx(expected, abs=64 * 1024)
    assert round(expected / GIB, 2) == 1.55
    src = p.source_of("speculative.draft_weights_gib")
    assert src.kind == "source" and "deepseek_nextn.py:102" in src.source and "eagle_worker.py:184" in src.source
    dp = plan(r1, gpu=get_gpu("H200"), release="0.5.10.post1", tp_size=8, dp_size=8, enable_dp_attention=True,
              speculative_algorithm="NEXTN")
    assert dp.speculative.draft_weights_gib * GIB == pytest.approx(_r1_nextn_by_hand(8, 1, body_bytes=fp8),
                                                                   abs=64 * 1024)


def test_nextn_draft_of_a_modelopt_nvfp4_deepseek_is_unquantized():
    """A ModelOpt NVFP4 checkpoint (hf_quant_config.json quant_algo NVFP4): DeepseekModelNextN sets quant_config = None
    (models/deepseek_nextn.py:84-88 in 0.5.10.post1), so the layer is bf16 however the target is stored."""
    from calculator.runtimes.sglang.weights import nextn_draft_weights

    qc = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                                                             "exclude_modules": ["lm_head"]}}
    got, kind, text = nextn_draft_weights(load_config("deepseek-ai__DeepSeek-V3.json"), release="0.5.10.post1",
                                          model_dtype="bfloat16", quantization=None, quant_config=qc, tp=8, attn_tp=8)
    assert got == pytest.approx(_r1_nextn_by_hand(8, 8, body_bytes=2), abs=64 * 1024)
    assert kind == "source" and "deepseek_nextn.py:84" in text


def _v32_indexer_by_hand(*, lin_b: float, weights_proj_b: int) -> float:
    """One DeepSeek-V3.2 lightning indexer (index_n_heads 64, index_head_dim 128, q_lora_rank 1536, hidden 7168), whole
    on every rank: wq_b 1536 x (64 x 128) and wk 7168 x 128 at the layer's bytes per weight, weights_proj 7168 x 64 at
    its own dtype, k_norm LayerNorm weight + bias 2 x 128 x 4 B (layers/attention/nsa/nsa_indexer.py)."""
    return (1536 * 64 * 128 + 7168 * 128) * lin_b + 7168 * 64 * weights_proj_b + 2 * 128 * 4


def test_nextn_draft_of_deepseek_v32_builds_the_indexer_from_0_5_7():
    """DeepSeek-V3.2 (FP8 block 128 x 128; R1's sizes + index_topk), --tp 8, NEXTN, H200 (bf16 KV):
    - 0.5.3.post1: is_deepseek_nsa lists DeepseekV3ForCausalLM / DeepseekV32ForCausalLM only
      (configs/model_config.py:56), so the DeepseekV3ForCausalLMNextN draft is plain MLA: R1's layer at attention TP 1
      (NSA forces dp = tp = 8), no indexer; its pool MLATokenToKVPool (512 + 64) x 2 = 1,152 B per token;
    - 0.5.7: DeepseekV3ForCausalLMNextN is in the list (:60): + one indexer with weights_proj in float32
      (nsa_indexer.py:155); the pool is an NSA one: 1,152 + (128 + 4) = 1,284 B; DP attention switched off at dp_size 1
      so attention TP 8;
    - 0.5.10.post1: weights_proj bfloat16 on CUDA (nsa_indexer.py:212);
    - B200 (fp8 KV forced): 0.5.7 NSA rows 512 + 512 // 128 x 4 + 64 x 2 = 656 B + 132 = 788 B per token; 0.5.23 on
      Blackwell keeps the raw 576-byte rows (trtllm): 576 + 132 = 708 B."""
    fp8 = 1 + 4 / (128 * 128)
    cfg = json.loads((CATALOG / "deepseek-ai__DeepSeek-V3.2.json").read_text())
    h200, b200 = get_gpu("H200"), get_gpu("B200")
    kw = {"tp_size": 8, "speculative_algorithm": "NEXTN"}
    a = plan(cfg, gpu=h200, release="0.5.3.post1", **kw)
    assert a.speculative.draft_weights_gib * GIB == pytest.approx(_r1_nextn_by_hand(8, 1, body_bytes=fp8),
                                                                  abs=64 * 1024)
    assert a.speculative.draft_cell_size_bytes == 1152
    assert "no indexer" in a.source_of("speculative.draft_weights_gib").source
    b = plan(cfg, gpu=h200, release="0.5.7", **kw)
    assert b.speculative.draft_weights_gib * GIB == pytest.approx(
        _r1_nextn_by_hand(8, 8, body_bytes=fp8) + _v32_indexer_by_hand(lin_b=fp8, weights_proj_b=4), abs=64 * 1024)
    assert b.speculative.draft_cell_size_bytes == 1152 + 132
    c = plan(cfg, gpu=h200, release="0.5.10.post1", **kw)
    expected = _r1_nextn_by_hand(8, 8, body_bytes=fp8) + _v32_indexer_by_hand(lin_b=fp8, weights_proj_b=2)
    assert c.speculative.draft_weights_gib * GIB == pytest.approx(expected, abs=64 * 1024)
    assert round(expected / GIB, 3) == 1.564
    src = c.source_of("speculative.draft_weights_gib")
    assert src.kind == "source" and "model_config.py:72" in src.source and "nsa_indexer.py:212" in src.source
    assert c.speculative.draft_kv_gib == pytest.approx(c.max_total_num_tokens * 1284 / GIB)
    assert plan(cfg, gpu=b200, release="0.5.7", **kw).speculative.draft_cell_size_bytes == 656 + 132
    assert plan(cfg, gpu=b200, release="0.5.23", **kw).speculative.draft_cell_size_bytes == 576 + 132


def test_dsa_indexer_weights_by_release_in_the_target_and_glm5_draft():
    """The target's indexers follow the same rule: DeepSeek-V3.2 on 0.5.7 (weights_proj float32) is 61 x the indexer by
    hand. GLM-5-FP8 (hidden 6144, q_lora 2048, index_n_heads 32, indexer_rope_interleave true) on 0.5.23 / CUDA: the
    indexer rope is not neox-style (models/deepseek_v2.py:2118), so wk and weights_proj are one bfloat16
    wk_weights_proj 6144 x (128 + 32) (dsa_indexer.py:310, :353): wq_b 2048 x 32 x 128 x fp8 + 6144 x 160 x 2 +
    2 x 128 x 4 per layer, in each of the 78 target layers and in the GlmMoeDsaForCausalLMNextN draft
    (glm4_moe.py:1288)."""
    from calculator.runtimes.sglang.weights import dsa_indexer_bytes, estimate, nextn_draft_weights

    fp8 = 1 + 4 / (128 * 128)
    v32 = json.loads((CATALOG / "deepseek-ai__DeepSeek-V3.2.json").read_text())
    est = estimate(v32, release="0.5.7", is_hip=False, model_dtype="bfloat16", quantization=None, tp=8, attn_tp=8)
    idx = next(t for t in est.terms if t.name == "nsa_indexer")
    assert idx.bytes == pytest.approx(61 * _v32_indexer_by_hand(lin_b=fp8, weights_proj_b=4), abs=61)
    glm5 = json.loads((CATALOG / "zai-org__GLM-5-FP8.json").read_text())
    per_glm5 = 2048 * 32 * 128 * fp8 + 6144 * (128 + 32) * 2 + 2 * 128 * 4
    got, _ = dsa_indexer_bytes(glm5, release="0.5.23", lin_b=fp8, model_b=2, is_hip=False)
    assert got == pytest.approx(per_glm5, abs=1)
    # 0.5.10.post1: not fused; wk fp8 + weights_proj bfloat16 on CUDA
    got, _ = dsa_indexer_bytes(glm5, release="0.5.10.post1", lin_b=fp8, model_b=2, is_hip=False)
    assert got == pytest.approx((2048 * 32 * 128 + 6144 * 128) * fp8 + 6144 * 32 * 2 + 2 * 128 * 4, abs=1)
    with_idx, _, text = nextn_draft_weights(glm5, release="0.5.23", model_dtype="bfloat16", quantization=None,
                                            quant_config=None, tp=8, attn_tp=8)
    assert "GlmMoeDsaForCausalLMNextN" in text and "glm4_moe.py:1288" in text and "dsa_indexer.py:353" in text
    without = {**glm5, "index_topk": None}  # the same layer read as GLM-5 without DSA: no indexer (and not our class)
    assert nextn_draft_weights(without, release="0.5.23", model_dtype="bfloat16", quantization=None, quant_config=None,
                               tp=8, attn_tp=8)[1] == "estimate"


def test_nextn_draft_of_glm_4_7_flash_is_what_each_release_builds():
    """GLM-4.7-Flash (Glm4MoeLiteForCausalLM: MLA, hidden 2048, 20 heads / 20 KV heads, q_lora 768, kv_lora 512,
    rope 64, nope 192, v 256, 64 routed + 1 shared expert of 1536, bf16), --tp 1, NEXTN, H200:
    - 0.5.10.post1 rewrites the draft to GLM-4.5's Glm4MoeForCausalLMNextN (configs/model_config.py:305): a GQA
      Glm4MoeAttention of 20 + 2 x 20 heads of head_dim 64 (transformers' Glm4MoeLiteConfig.head_dim is
      qk_rope_head_dim): qkv 60 x 64 x 2048 + o 20 x 64 x 2048 = 10,485,760 parameters; MoE 65 x 3 x 2048 x 1536;
      gate 64 x 2048 x 2 B + bias 64 x 4 B; eh_proj 2 x 2048^2; 5 norms of 2048; its own rotary cache (neox style,
      not the MLA one) 202,752 x 64 x 4 B; 1,316,770,048 B. Its ModelConfig is not MLA (model_config.py:442), so the
      draft's pool is MHA: 20 KV heads x (64 + 64) x 2 B = 5,120 B per token;
    - 0.5.23 builds Glm4MoeLiteForCausalLMNextN (glm4_moe_lite_nextn.py:74-83): MLA 21,759,232 parameters + MoE + gate +
      eh_proj + norms at bf16 + absorbed w_kc / w_vc 512 x 20 x 448 x 2 B; its pool MLA (512 + 64) x 2 = 1,152 B."""
    cfg = json.loads((CATALOG / "zai-org__GLM-4.7-Flash.json").read_text())
    h200 = get_gpu("H200")
    old = plan(cfg, gpu=h200, release="0.5.10.post1", speculative_algorithm="NEXTN")
    gqa = ((20 + 2 * 20) * 64 * 2048 + 20 * 64 * 2048) * 2
    moe = 65 * 3 * 2048 * 1536 * 2 + 64 * 2048 * 2 + 64 * 4
    rest = 2 * 2048 * 2048 * 2 + 5 * 2048 * 2
    assert gqa + moe + rest + 202752 * 64 * 4 == 1_316_770_048
    assert old.speculative.draft_weights_gib * GIB == pytest.approx(1_316_770_048, abs=1)
    assert old.speculative.draft_cell_size_bytes == 20 * (64 + 64) * 2 == 5120
    assert old.speculative.draft_kv_gib == pytest.approx(old.max_total_num_tokens * 5120 / GIB)
    assert "model_config.py:442" in old.source_of("speculative.draft_cell_size_bytes").source
    assert any("GQA layer" in n for n in old.notes)
    new = plan(cfg, gpu=h200, release="0.5.23", speculative_algorithm="NEXTN")
    mla = 2048 * 768 + 768 + 768 * 20 * 256 + 2048 * 576 + 512 + 512 * 20 * 448 + 20 * 256 * 2048
    assert mla == 21_759_232
    by_hand = mla * 2 + moe + rest + 512 * 20 * 448 * 2
    assert new.speculative.draft_weights_gib * GIB == pytest.approx(by_hand, abs=64 * 1024)
    assert new.speculative.draft_cell_size_bytes == 1152
    assert "glm4_moe_lite_nextn.py:74" in new.source_of("speculative.draft_weights_gib").source


@pytest.mark.parametrize("release,ctx", [("0.5.3", 8 * 131072), ("0.5.9", 8 * 131072), ("0.5.10.post1", 131072),
                                         ("0.5.23", 131072)])
def test_gemma3_context_length_from_the_class_default(release, ctx):
    """gemma-3-27b-it's config.json leaves max_position_embeddings out: transformers' Gemma3TextConfig default is 131072.
    SGLang's get_context_length multiplies by rope_scaling["factor"]: up to 0.5.9 (transformers 4.57.1) the config's
    rope_scaling is the flat {"factor": 8.0, "rope_type": "linear"} -> 1,048,576; from 0.5.10.post1 (transformers 5.3.0 /
    5.19.0) it is nested per layer type ({"sliding_attention": ..., "full_attention": {... "factor": 8.0}}) with no
    top-level factor -> 131,072 (both read with those transformers versions from this config.json)."""
    p = plan(load_config("google__gemma-3-27b-it.json"), gpu=get_gpu("H100"), release=release,
             free_memory_before_load_gib=78.5)
    assert p.context_length == ctx


def test_dp_attention_on_0_4_3_post4_takes_dp_size_from_tp_size_and_only_for_deepseek():
    """0.4.3.post4's ServerArgs sets ``dp_size = tp_size`` under --enable-dp-attention (server_args.py:262-263), so
    --dp-size 2 on 8 GPUs runs 8 attention-DP ranks, each with its whole attention; its only model code with DP
    attention is DeepSeek's (models/deepseek_v2.py:889-893), so another model is refused as not modelled."""
    h200 = get_gpu("H200")
    forced = plan(load_config("deepseek-ai__DeepSeek-R1.json"), gpu=h200, release="0.4.3.post4", tp_size=8,
                  dp_size=2, enable_dp_attention=True)
    asked = plan(load_config("deepseek-ai__DeepSeek-R1.json"), gpu=h200, release="0.4.3.post4", tp_size=8,
                 dp_size=8, enable_dp_attention=True)
    assert forced.dp_size == 8 and forced.attention_tp_size == 1
    assert forced.max_total_num_tokens == asked.max_total_num_tokens
    assert any("sets dp_size = tp_size = 8" in n and "server_args.py:262-263" in n for n in forced.notes)
    with pytest.raises(EngineInputError) as err:
        plan(load_config("meta-llama__Llama-3.1-70B-Instruct.json"), gpu=h200, release="0.4.3.post4", tp_size=8,
             dp_size=8, enable_dp_attention=True)
    assert err.value.field == "enable_dp_attention" and "only in its DeepSeek model code" in err.value.message


def test_a_model_file_that_starts_with_a_bom_is_read():
    """sglang/srt/models/qwen2_classification.py starts with a UTF-8 byte-order mark (bytes EF BB BF, checked with
    xxd in the 0.5.9 wheel) and registers ``EntryClass = [Qwen2ForSequenceClassification]`` (line 73 there); the
    extractor once skipped it, so the architecture was missing from 0.4.10.post2 to 0.5.10.post1."""
    for release in ("0.4.10.post2", "0.5.9", "0.5.10.post1"):
        assert "Qwen2ForSequenceClassification" in R.architectures(release), release
    wheel = wheel_of("0.5.9")
    if not wheel.exists():
        pytest.skip(f"{wheel} not downloaded")
    with zipfile.ZipFile(wheel) as z:
        raw = z.read("sglang/srt/models/qwen2_classification.py")
    assert raw[:3] == b"\xef\xbb\xbf"
    assert "Qwen2ForSequenceClassification" in raw.decode("utf-8-sig").split("EntryClass = [", 1)[1].split("]")[0]
