"""A closed loop's prompts arriving together (a wave): each waits for the scheduler step that finishes its prompt
(perf.wave_ttft_ms), and how many requests ride in waves follows the run's length spread (perf.wave_share,
vllm bench serve's --random-range-ratio).

Hand computations follow vLLM 0.32's scheduler: waiting prompts are packed first come, first served into steps of
max_num_batched_tokens tokens (v1/core/sched/scheduler.py:899-912, :1169), and a request's first token comes at the
end of the step holding its prompt's last token. The public check is vLLM PR 23151's Qwen3-30B-A3B run."""
from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from calculator.engine import EngineInput, perf

from .conftest import CONFIGS, load_config

H100 = "NVIDIA H100 80GB HBM3"
QWEN_MOE = "Qwen__Qwen3-30B-A3B.json"


def _setup(config: str, gpu: str, **kw):
    inp = EngineInput(hf_config=load_config(config), gpu=gpu, max_model_len=8192, **kw)
    return inp, perf._setup(perf.plan_from_engine(inp), "vllm")


def _step(s, pre, prompts: float) -> float:
    """One prefill step carrying ``prompts`` prompts' worth of tokens: compute or the weights read once, whichever is
    longer, + the step overhead + those prompts' all-reduces."""
    read = s.target.weight_bytes(s.chunk) / (s.hw.bandwidth * s.hw.eff.mem_bw) * 1e3
    return max(prompts * pre.compute_ms, read) + s.hw.eff.step_overhead_ms + prompts * pre.comm_ms


def test_ten_2048_token_prompts_wait_for_one_two_or_three_steps_of_8192_tokens():
    """10 prompts of 2048 tokens in steps of 8192 (the API server's default budget on an H100): prompts 1-4 end in
    step 1, 5-8 in step 2, 9-10 in step 3 (half full), so the mean TTFT is
    (4 t1 + 4 (t1 + t2) + 2 (t1 + t2 + t3)) / 10."""
    _, s = _setup(QWEN_MOE, H100)
    assert s.chunk == 8192
    pre = perf.prefill_cost(s.target, s.hw, prompt_len=2048, chunk=8192)
    t_full, t_half = _step(s, pre, 4), _step(s, pre, 2)
    want = (4 * t_full + 4 * 2 * t_full + 2 * (2 * t_full + t_half)) / 10
    assert perf.wave_ttft_ms(s, pre, 10, 2048) == pytest.approx(want, rel=1e-9)
    # the step is compute-bound here (8192 tokens of a 3B-active MoE), so the wave is not the weights read 3 times
    assert 4 * pre.compute_ms > s.target.weight_bytes(s.chunk) / (s.hw.bandwidth * s.hw.eff.mem_bw) * 1e3


def test_a_wave_in_one_step_makes_every_prompt_wait_for_all_of_it():
    """4 prompts of 256 tokens (1,024 <= the budget): one step, and every request's first token comes at its end (the
    old form had the mean request wait for half the wave's work: the CPU validation runs of the padded target at 4
    clients measured 59-70 % above it, benchmarks/cpu_speed_check.py)."""
    _, s = _setup("mistralai__Mistral-7B-Instruct-v0.3.json", "NVIDIA GeForce RTX 4090")
    assert 4 * 256 <= s.chunk
    pre = perf.prefill_cost(s.target, s.hw, prompt_len=256, chunk=s.chunk)
    assert perf.wave_ttft_ms(s, pre, 4, 256) == pytest.approx(_step(s, pre, 4), rel=1e-9)


def test_fixed_lengths_put_every_request_in_a_wave_and_a_spread_or_no_word_takes_the_fitted_blend():
    eff = perf.EFFICIENCY[("vllm", "*")]
    assert perf.wave_share(eff, 0.0)[0] == 1.0
    blend, why = perf.wave_share(eff, None)
    assert blend == eff.wave_share == 0.2 and "not given" in why
    spread, why = perf.wave_share(eff, 0.5)
    assert spread == blend and "--random-range-ratio 0.5" in why


def test_vllm_pr_23151_qwen3_moe_run_is_all_waves():
    """vllm-project/vllm PR 23151 (H100, Qwen3-30B-A3B BF16, vllm bench serve random 2048 / 1024, fixed lengths,
    --max-concurrency 10, 100 prompts): mean / median / P99 TTFT 267.22 / 300.05 / 454.62 ms, i.e. one, two and three
    prefill steps of ~150 ms. With --random-range-ratio 0 the prediction is the wave's mean + the API server's part;
    unsaid, the blend falls between the steady figure and the wave."""
    inp, s = _setup(QWEN_MOE, H100)
    kw = dict(prompt_len=2048, output_len=1024, concurrency=10, num_prompts=100)
    waves = perf.estimate_speed(inp, random_range_ratio=0.0, **kw)
    pre = perf.prefill_cost(s.target, s.hw, prompt_len=2048, chunk=s.chunk)
    assert waves.ttft_ms == pytest.approx(perf.wave_ttft_ms(s, pre, 10, 2048) + s.hw.eff.ttft_fixed_ms, rel=1e-3)
    assert waves.ttft_ms == pytest.approx(267.22, rel=0.15)
    blend = perf.estimate_speed(inp, **kw)
    assert blend.ttft_ms < 0.6 * waves.ttft_ms
    assert perf.estimate_speed(inp, random_range_ratio=0.3, **kw).ttft_ms == blend.ttft_ms
    assert "share of the requests in waves 1: --random-range-ratio 0" in waves.sources["ttft_ms.wave"]
    # the first token still ends the same step: TPOT and tok/s move only through TTFT
    assert waves.itl_ms == blend.itl_ms
    with pytest.raises(perf.EngineInputError, match="random_range_ratio"):
        perf.estimate_speed(inp, random_range_ratio=1.0, **kw)


@pytest.mark.django_db
def test_the_ratio_reaches_the_api_and_the_command_line_and_llamacpp_says_it_does_not_use_it(client):
    q = {"model": "Qwen/Qwen3-30B-A3B", "gpu": "H100", "max_model_len": "8192", "prompt_len": "2048",
         "output_len": "1024", "concurrency": "10"}
    fixed = client.get("/api/estimate", q | {"random_range_ratio": "0"}).json()
    unsaid = client.get("/api/estimate", q).json()
    assert fixed["ttft_ms"] > 1.5 * unsaid["ttft_ms"]
    assert "--random-range-ratio 0" in fixed["speed_sources"]["ttft_ms.wave"]
    page = client.get("/", q | {"random_range_ratio": "0"}, follow=True).content.decode()
    assert "10 in flight, fixed lengths (--random-range-ratio 0)" in page
    bad = client.get("/api/estimate", q | {"random_range_ratio": "1.5"})
    assert bad.status_code == 400 and "random_range_ratio" in bad.content.decode()
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--config", str(CONFIGS / QWEN_MOE), "--gpu", "H100", "--random-range-ratio", "1.5")
    assert str(err.value).startswith("--random-range-ratio") and err.value.returncode == 2
    llama = client.get("/api/estimate", {"model": "meta-llama/Llama-3.1-8B-Instruct", "runtime": "llama.cpp",
                                         "gpu": "RTX 4090", "concurrency": "2", "random_range_ratio": "0"}).json()
    assert llama["speed_error"].startswith("random_range_ratio: the length spread (waves of prompts arriving "
                                           "together) is modelled for vLLM and SGLang")


def test_the_validator_predicts_its_own_fixed_length_runs_as_waves(monkeypatch):
    """Its runs send --ignore-eos with fixed output lengths (validator/bench.py), so its prediction asks for
    --random-range-ratio 0 over the run's prompts."""
    from validator import bench

    seen = {}

    def fake(inp, est, **kw):
        seen.update(kw)
        raise RuntimeError("stop here")

    monkeypatch.setattr(perf, "speed_fields", fake)
    cfg = {"profile": {"input_len": 128, "output_len": 48, "concurrency": 4, "num_prompts": 16},
           "engine_input": {"hf_config": load_config("meta-llama__Llama-3.1-8B-Instruct.json"), "gpu": "H100"}}
    bench.speed_comparison(cfg, {"aggregate": {}}, None)
    assert seen["random_range_ratio"] == 0.0 and seen["concurrency"] == 4
