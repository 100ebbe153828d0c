"""The release comparison: the same request answered for a second vLLM release, and what differs
(``calculator.release_comparison``; ``estimate --compare-vllm-version``, the API's ``compare_vllm_version``, the page).

The expected values are read from vLLM's own source (``pip download vllm==X --no-deps``):

- vllm==0.32.0 vllm/config/cache.py:72 ``DEFAULT_BLOCK_SIZE: ClassVar[int] = 16``, applied at :344-345
  (``_apply_block_size_default``); :102 ``gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)``;
- vllm==0.34.0 vllm/config/cache.py:185 ``DEFAULT_BLOCK_SIZE: ClassVar[int] = 64``, which FLASH_ATTN keeps
  (vllm/platforms/interface.py:781-791 passes it to ``get_preferred_block_size``, vllm/v1/attention/backend.py:158-166
  returns it when the backend supports it); :186 ``DEFAULT_GPU_MEMORY_UTILIZATION: ClassVar[float] = 0.92``, :216 the
  field defaults to ``None`` and :495-501 ``resolved_gpu_memory_utilization`` is 1.0 when the extensible KV cache is on
  (the default on CUDA).
"""
from __future__ import annotations

import html
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from calculator.plan import make_plan
from calculator.release_comparison import NO_DIFFERENCE, compare_releases
from calculator.request import InputError, parse_request

LLAMA = "meta-llama/Llama-3.1-8B"  # calculator/data/model_configs/meta-llama__Llama-3.1-8B.json
BASE = {"model": LLAMA, "gpu": "H100", "vllm_version": "0.32.0"}
# 32 layers x 8 KV heads x head_dim 128 x 2 (K, V) x 2 bytes (bf16), from the config
KV_BYTES_PER_TOKEN = 32 * 8 * 128 * 2 * 2


pytestmark = pytest.mark.usefixtures("offline_hub")


def _by_key(comparison):
    return {d.key: d for d in comparison.differences}


def test_llama_8b_on_h100_from_0_32_to_0_34():
    comparison = compare_releases(parse_request(BASE), "0.34.0")
    diff = _by_key(comparison)
    assert (comparison.release, comparison.compare_release) == ("0.32.0", "0.34.0")
    # block size 16 -> 64 (0.32.0 cache.py:72, 0.34.0 cache.py:185), each side citing its release's line
    block = diff["block_size"]
    assert (block.before, block.after, block.delta) == (16, 64, 48)
    assert "vllm/config/cache.py:72" in block.source and "vllm/config/cache.py:185" in block.source
    # default --gpu-memory-utilization 0.92 (0.32.0 cache.py:102) -> 1.0 with the extensible KV cache (0.34.0 :495-501)
    util = diff["gpu_memory_utilization"]
    assert (util.before, util.after) == (0.92, 1.0) and "default" in util.label
    assert "cache.py:102 (0.32.0)" in util.source and ":495-501" in util.source
    assert (diff["extensible_kv_cache"].before, diff["extensible_kv_cache"].after) == (False, True)
    # the 0.34 warning about the extensible KV cache estimate is added, none removed
    warnings = [d for d in comparison.differences if d.key == "warning"]
    assert [d.change for d in warnings] == ["added"] and "extensible KV cache" in warnings[0].after
    # same verdict, backend and KV layout: not listed
    assert not {"verdict", "verdict_reason", "attention_backend", "kv_bytes_per_token", "weights_gib"} & set(diff)


def test_the_kv_differences_are_the_differences_of_the_two_single_answers():
    comparison = compare_releases(parse_request(BASE), "0.34.0")
    old = make_plan(parse_request(BASE)).memory
    new = make_plan(parse_request({**BASE, "vllm_version": "0.34.0"})).memory
    diff = _by_key(comparison)
    for key in ("kv_cache_tokens", "num_gpu_blocks", "max_concurrency", "available_kv_cache_gib"):
        d = diff[key]
        assert (d.before, d.after) == (getattr(old, key), getattr(new, key)), key
        assert d.delta == pytest.approx(getattr(new, key) - getattr(old, key)), key
    # independently: a full-attention model's KV tokens are its blocks x the block size, at 128 KiB per token
    assert old.kv_bytes_per_token == new.kv_bytes_per_token == KV_BYTES_PER_TOKEN
    assert diff["kv_cache_tokens"].before == diff["num_gpu_blocks"].before * 16
    assert diff["kv_cache_tokens"].after == diff["num_gpu_blocks"].after * 64
    assert diff["kv_cache_tokens"].delta == new.kv_cache_tokens - old.kv_cache_tokens
    assert f"max_model_len {old.max_model_len:,} tokens" in diff["max_concurrency"].label


def test_identical_releases_say_no_difference_in_what_the_calculator_models():
    comparison = compare_releases(parse_request(BASE), "0.32.0")
    assert comparison.differences == [] and comparison.same
    assert NO_DIFFERENCE in comparison.summary and "nothing changes" not in comparison.summary
    out = StringIO()
    call_command("estimate", "--model", LLAMA, "--gpu", "H100", "--vllm-version", "0.32.0",
                 "--compare-vllm-version", "0.32.0", stdout=out)
    assert "Release comparison: vLLM 0.32.0 -> 0.32.0" in out.getvalue()
    assert "no difference in what the calculator models" in out.getvalue()


def test_the_cli_prints_and_returns_the_comparison():
    out = StringIO()
    call_command("estimate", "--model", LLAMA, "--gpu", "H100", "--vllm-version", "0.32.0",
                 "--compare-vllm-version", "0.34.0", "--format", "json", stdout=out)
    data = json.loads(out.getvalue())
    rc = data["release_comparison"]
    assert rc["release"] == "0.32.0" and rc["compare_release"] == "0.34.0"
    block = next(d for d in rc["differences"] if d["key"] == "block_size")
    assert (block["before"], block["after"]) == (16, 64) and block["source"]
    assert data["block_size"] == 16  # the answer itself stays the request's release's
    out = StringIO()
    call_command("estimate", "--model", LLAMA, "--gpu", "H100", "--format", "json", stdout=out)
    assert json.loads(out.getvalue())["release_comparison"] is None  # the key is always there for vLLM
    out = StringIO()
    call_command("estimate", "--model", LLAMA, "--gpu", "H100", "--vllm-version", "0.32.0",
                 "--compare-vllm-version", "0.34.0", stdout=out)
    text = out.getvalue()
    assert "Release comparison: vLLM 0.32.0 -> 0.34.0" in text
    assert "KV cache block size: 16 tokens -> 64 tokens (+48 tokens)" in text


def test_a_release_not_covered_is_refused_as_vllm_version_refuses_it(client):
    with pytest.raises(InputError) as same:
        parse_request({**BASE, "vllm_version": "0.6.4"})
    message = same.value.message
    api = client.get("/api/estimate", {**BASE, "compare_vllm_version": "0.6.4"})
    assert api.status_code == 400
    assert api.json() == {"error": f"compare_vllm_version: {message}", "field": "compare_vllm_version"}
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", LLAMA, "--compare-vllm-version", "0.6.4", stdout=StringIO(),
                     stderr=StringIO())
    assert err.value.returncode == 2 and str(err.value) == f"--compare-vllm-version: {message}"
    page = client.get("/", {**BASE, "compare_vllm_version": "0.6.4"})
    assert page.status_code == 400 and message in html.unescape(page.content.decode())
    with pytest.raises(InputError) as engine:
        compare_releases(parse_request(BASE), "0.6.4")
    assert (engine.value.field, engine.value.message) == ("compare_vllm_version", message)


def test_only_vllm_and_only_estimate(client):
    api = client.get("/api/estimate", {"model": LLAMA, "gpu": "H100", "runtime": "sglang",
                                       "compare_vllm_version": "0.34.0"})
    assert api.status_code == 400 and api.json()["field"] == "compare_vllm_version"
    assert "only for vLLM" in api.json()["error"]
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", LLAMA, "--runtime", "sglang", "--compare-vllm-version", "0.34.0",
                     stdout=StringIO(), stderr=StringIO())
    assert err.value.returncode == 2 and "only for vLLM" in str(err.value)
    # check_compat and validate answer one release's start-up: the flag is not theirs
    for command in ("check_compat", "validate"):
        with pytest.raises(CommandError) as err:
            call_command(command, "--model", LLAMA, "--compare-vllm-version", "0.34.0", stdout=StringIO(),
                         stderr=StringIO())
        assert err.value.returncode == 2 and "unrecognized flag --compare-vllm-version" in str(err.value), command


def test_the_api_and_the_page_carry_the_comparison(client):
    body = client.get("/api/estimate", {**BASE, "compare_vllm_version": "0.34.0"}).json()
    keys = {d["key"] for d in body["release_comparison"]["differences"]}
    assert {"block_size", "gpu_memory_utilization", "kv_cache_tokens", "warning"} <= keys
    assert client.get("/api/estimate", BASE).json()["release_comparison"] is None
    page = client.get("/", {**BASE, "compare_vllm_version": "0.34.0"})
    assert page.status_code == 200  # the permalink keeps the parameter (no redirect dropping it)
    text = html.unescape(page.content.decode())
    assert 'id="field-compare_vllm_version"' in text and 'id="release-comparison"' in text
    assert "KV cache block size: 16 tokens -> 64 tokens (+48 tokens)" in text
    assert "compare_vllm_version=0.34.0" in text.split('id="permalink"', 1)[1].split("</a>", 1)[0]
    # the link to the compared release's own answer drops the comparison
    link = text.split('id="release-comparison-link" href="', 1)[1].split('"', 1)[0]
    assert "vllm_version=0.34.0" in link and "compare_vllm_version" not in link


def test_the_speculative_configs_verdict_is_compared():
    """EAGLE-3 on a Qwen3 MoE target: vLLM 0.10.0 allows EAGLE-3 for Llama targets only, 0.10.1 adds qwen
    (vllm/config.py:3027 in 0.10.0, the allowlist the compat data extracts; test_spec_refusals holds the case)."""
    spec = '{"method":"eagle3","model":"AngelSlim/Qwen3-a3B_eagle3","num_speculative_tokens":3}'
    request = parse_request({"model": "Qwen/Qwen3-30B-A3B", "gpu": "H100", "vllm_version": "0.10.0",
                             "speculative_config": spec})
    diff = _by_key(compare_releases(request, "0.10.1"))
    assert (diff["verdict"].before, diff["verdict"].after) == ("does_not_start", "works")
    assert (diff["speculative"].before, diff["speculative"].after) == ("refused", "accepted")
    assert diff["speculative_reason"].change == "removed" and "qwen3_moe" in diff["speculative_reason"].before


def test_a_release_that_does_not_start_compares_no_start_up_figures():
    """gpt-oss-20b (MXFP4) on 0.10.0: vLLM lists mxfp4 and registers GptOssForCausalLM from 0.10.1, so 0.10.0 stops
    before it loads anything and never logs a KV cache: only the verdict and the release's defaults differ, no KV
    tokens, blocks or concurrency."""
    request = parse_request({"model": "openai/gpt-oss-20b", "gpu": "H100", "vllm_version": "0.32.0"})
    comp = compare_releases(request, "0.10.0")
    diff = _by_key(comp)
    assert (diff["verdict"].before, diff["verdict"].after) == ("works", "does_not_start")
    assert not {"kv_cache_tokens", "num_gpu_blocks", "max_concurrency", "available_kv_cache_gib"} & set(diff)
    assert comp.other_error is None  # answered: a verdict, not a refusal of the request


def test_a_backend_named_by_class_in_old_releases_is_not_a_difference():
    """0.10 names backends by class (FlashAttentionBackend), later releases by enum member (FLASH_ATTN): one kernel."""
    request = parse_request({"model": LLAMA, "gpu": "H100", "vllm_version": "0.10.1.1"})
    assert make_plan(request).compat.auto_selected == "FlashAttentionBackend"
    assert "attention_backend" not in _by_key(compare_releases(request, "0.32.0"))
