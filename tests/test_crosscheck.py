"""The memory engine against vLLM itself: tiny random-weight models on vLLM's CPU build.

vLLM 0.32's CPU build sizes the KV cache with the same specs/grouping/block logic as on a GPU; with
``VLLM_CPU_KVCACHE_SPACE=1`` (1 GiB) its logged ``CPU KV cache size: N tokens`` is an exact oracle for the
engine's KV logic. The slow tests start vLLM once per case (one at a time, ~10-40 s each here).

Hand check of the first case (independent of the engine): a 4-layer Llama, 2 KV heads of 32, float32,
block 128 → page = 128 × 2 × (32+32) × 4 B = 65,536 B per layer, 4 layers → 262,144 B per block;
2**30 / 262,144 = 4,096 blocks; 8 blocks per 1,024-token request → 512× → 524,288 tokens.
"""
from __future__ import annotations

import io
import json
import pytest

from calculator.crosscheck import CASES, find_cases, parse_capacity_line, run_case

try:  # the CPU build is a "worker" extra; without it the slow tests skip with a reason
    import importlib.util

    HAVE_VLLM = importlib.util.find_spec("vllm") is not None
except Exception:  # pragma: no cover
    HAVE_VLLM = False

REAL_LINE = ("(EngineCore pid=15478) INFO 11-29 14:51:57 [kv_cache_utils.py:2327] CPU KV cache size: 524,288 "
             "tokens, Maximum concurrency for 1,024 tokens per request: 512.00x")


def test_parse_capacity_line_real_log():
    assert parse_capacity_line(REAL_LINE) == (524288, 1024, 512.0)
    assert parse_capacity_line("GPU KV cache size: 1,234,560 tokens, Maximum concurrency for 131,072 tokens "
                               "per request: 9.42x") == (1234560, 131072, 9.42)
    assert parse_capacity_line("Explicitly set (1.0/8.71) GiB for KV cache on node 0.") is None


def test_find_cases_rejects_unknown_family():
    with pytest.raises(ValueError, match="families: "):
        find_cases("no-such-family")
    assert {c.family for c in find_cases("all")} >= {"llama", "gemma2", "deepseek-v2", "qwen3-next"}


@pytest.mark.skipif(not HAVE_VLLM, reason="writing tiny models needs the 'worker' extra (torch, transformers)")
def test_llama_prediction_matches_hand_count():
    """The engine's prediction for the tiny Llama equals the hand count in the module docstring."""
    from calculator.crosscheck import predict
    from calculator.crosscheck.tiny_models import write_tiny_model

    case = find_cases("llama", "default")[0]
    res = predict(case, write_tiny_model("llama"))
    assert (res.block_size, res.num_gpu_blocks, res.kv_cache_tokens) == (128, 4096, 524288)


@pytest.mark.skipif(not HAVE_VLLM, reason="writing tiny models needs the 'worker' extra (torch, transformers)")
@pytest.mark.parametrize("family", ["gemma4", "gemma4-kv-shared"])
def test_gemma4_prediction_matches_hand_count(family):
    """The tiny Gemma 4 (tiny_models._gemma4), float32, CPU block 128: a sliding page is 128 x 4 KV heads x
    (32 + 32) x 4 B = 131,072 B, the global layer's 128 x 1 x (64 + 64) x 4 B = 65,536 B, so its block grows to
    256 tokens; 5 sliding + 1 global layers make 6 groups of one layer: 2**30 / 131,072 = 8,192 blocks. A
    1,024-token request: 5 x (cdiv(1024, 128) + 1) + cdiv(1024, 256) = 49 blocks -> 8,192 / 49 x 1,024 =
    171,196 tokens, the figure vLLM 0.32's CPU build logged for both (the 4 KV-shared layers of
    gemma4-kv-shared keep no cache)."""
    from calculator.crosscheck import predict
    from calculator.crosscheck.tiny_models import write_tiny_model

    res = predict(find_cases(family, "default")[0], write_tiny_model(family))
    assert (res.block_size, res.num_gpu_blocks) == (128, 2**30 // 131_072)
    assert res.kv_cache_tokens == int(8192 / (5 * (1024 // 128 + 1) + 1024 // 256) * 1024) == 171_196


# Families vLLM's CPU build refuses at start-up: the harness must report vLLM's reason.
EXPECTED_REFUSED = {("bamba", "default"), ("deepseek-v32", "default")}
# ``ci=False`` cases repeat a rule another case already checks; they run with the command, not here,
# to keep this file under 5 minutes on 2 cores. The fp8 Llama case runs through the command test below.
CHECKED = [c for c in CASES if c.ci and (c.family, c.variation) not in EXPECTED_REFUSED
           and (c.family, c.variation) != ("llama", "kv_cache_dtype=fp8")]


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_VLLM, reason="vLLM's CPU build (extra 'worker') is not installed")
@pytest.mark.parametrize("case", CHECKED, ids=[c.name for c in CHECKED])
def test_engine_matches_vllm_cpu(case):
    r = run_case(case, timeout=150)
    assert r.vllm_tokens is not None, f"{case.name}: vLLM logged no capacity line: {r.reason} (log {r.log})"
    assert r.predicted_tokens is not None, f"{case.name}: engine error: {r.reason}"
    if r.status == "exact":
        return
    assert r.status == "within_one_block", (
        f"{case.name}: engine predicts {r.predicted_tokens:,} tokens, vLLM logged {r.vllm_tokens:,} "
        f"(difference {r.difference:+,}, more than one block = {r.one_block_tokens} tokens; log {r.log})")


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_VLLM, reason="vLLM's CPU build (extra 'worker') is not installed")
@pytest.mark.parametrize("family,variation", sorted(EXPECTED_REFUSED))
def test_refused_case_reports_reason(family, variation):
    r = run_case(find_cases(family, variation)[0], timeout=150)
    assert r.status == "refused", f"{family}/{variation} now starts: move it to the checked cases ({r})"
    assert r.reason and ("Error" in r.reason or "not" in r.reason), r.reason


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_VLLM, reason="vLLM's CPU build (extra 'worker') is not installed")
def test_command_json_output():
    from django.core.management import call_command

    out = io.StringIO()
    call_command("crosscheck_vllm", "--family", "llama", "--variation", "kv_cache_dtype=fp8", "--format", "json",
                 stdout=out)
    rows = json.loads(out.getvalue())
    assert [(r["family"], r["variation"]) for r in rows] == [("llama", "kv_cache_dtype=fp8")]
    # fp8 KV: 1 B instead of 4 B per element → 4 × the float32 capacity (hand count above: 4 × 524,288)
    assert rows[0]["vllm_tokens"] == 2097152
    assert rows[0]["predicted_tokens"] == rows[0]["vllm_tokens"]


def test_command_rejects_unknown_family():
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("crosscheck_vllm", "--family", "nope", stdout=io.StringIO())



@pytest.mark.skipif(not HAVE_VLLM, reason="writing tiny models needs the 'worker' extra (torch, transformers)")
@pytest.mark.parametrize("avx512_bf16, logged_tokens", [
    # vLLM 0.32 CPU build on a CPU with AVX-512 BF16 (this project's first test machine): float32 SSM state
    (True, 1_290_555),
    # the same start-up on an AMD EPYC without AVX-512 BF16 (issue 18): the SSM state stays bfloat16
    (False, 1_973_790),
])
def test_granite_hybrid_bf16_ssm_state_follows_the_host_cpu(avx512_bf16, logged_tokens):
    """vllm/platforms/cpu.py:301-321 resets the SSM state to float32 only where
    ``torch.cpu._is_avx512_bf16_supported()``: the CPU feature is an input, so both machines' logs hold."""
    from calculator.crosscheck import predict
    from calculator.crosscheck.tiny_models import write_tiny_model

    case = find_cases("granite4-hybrid", "dtype=bfloat16")[0]
    inp_model = write_tiny_model("granite4-hybrid")
    import calculator.engine.memory as memory

    real = memory.host_has_avx512_bf16
    memory.host_has_avx512_bf16 = lambda: avx512_bf16
    try:
        res = predict(case, inp_model)
    finally:
        memory.host_has_avx512_bf16 = real
    assert res.kv_cache_tokens == logged_tokens


def test_draft_layers_get_the_case_attention_backend():
    """vLLM never hands --attention-backend to a draft (vllm/v1/spec_decode/llm_base_proposer.py:1282-1290,
    0.32): it picks its own, AMX_MLA on a CPU with AMX tiles (vllm/platforms/cpu.py:150-163), which refuses
    float32 weights ("expect weight to be bfloat16, float16, ..."; amx_mla.py:303). A case that pins the target's
    backend must pin the draft's too (speculative_config.attention_backend), or it passes only on CPUs without
    AMX."""
    from calculator.crosscheck import vllm_kwargs
    from pathlib import Path

    pinned = [c for c in CASES if c.attention_backend and c.speculative
              and c.speculative.get("method") not in ("ngram", "suffix")]
    assert pinned, "no case with a pinned backend and draft layers"
    for case in pinned:
        spec = vllm_kwargs(case, Path("/nonexistent"))["speculative_config"]
        assert spec.get("attention_backend") == case.attention_backend, case.name


@pytest.mark.skipif(not HAVE_VLLM, reason="writing tiny models needs the 'worker' extra (torch, transformers)")
def test_mla_target_with_eagle3_head_prediction_matches_hand_count():
    """The tiny DeepSeek-V3 (4 MLA layers, latent 64 + rope 16) with the tiny EAGLE-3 head (1 layer, 2 KV heads x
    32), float32, CPU_MLA block 16: MLA pages 16 x 80 x 4 B = 5,120 B, the head's 16 x 2 x 64 x 4 B = 8,192 B, one
    group of 4 x 5,120 + 8,192 = 28,672 B a block: 2**30 // 28,672 = 37,449 blocks, 1,024 / 16 = 64 a request ->
    int(37,449 / 64 x 1,024) = 599,184 tokens, the figure vLLM 0.32's CPU build logged (585.14x)."""
    from calculator.crosscheck import predict
    from calculator.crosscheck.tiny_models import write_tiny_model

    res = predict(find_cases("deepseek-v3", "spec=eagle3")[0], write_tiny_model("deepseek-v3"))
    assert (res.block_size, res.num_gpu_blocks) == (16, 2**30 // (4 * 5120 + 8192)) == (16, 37_449)
    assert res.kv_cache_tokens == int(37_449 / 64 * 1024) == 599_184
