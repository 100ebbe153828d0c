"""Speed predictions: roofline terms computed by hand from real configs and the GPU catalog, the
acceptance-length formula, the public speculative-decoding logs, and the break-even solver."""
from __future__ import annotations

import json
import math

import pytest

from calculator.web.charts import speedup_chart_for, speedup_chart_spec
from calculator.engine import EngineInput, EngineInputError, estimate
from calculator.engine import perf
from calculator.engine.gpus import DATA_FILE as GPU_FILE

from .conftest import load_config

H100 = "NVIDIA H100 80GB HBM3"


def core(mem: float, comp: float, eff) -> float:
    """Memory and compute time of one pass combined as the efficiency row says: the ideal roofline max,
    or the overlap_p-norm (p = 1: no overlap, the two add)."""
    p = eff.overlap_p
    return (mem ** p + comp ** p) ** (1 / p) if p else max(mem, comp)


def catalog(name: str) -> dict:
    return next(g for g in json.loads(GPU_FILE.read_text())["gpus"] if g["name"] == name)


@pytest.fixture(autouse=True)
def _no_measured_overrides():
    perf.reset_measured_efficiency()
    yield
    perf.reset_measured_efficiency()


# --- Llama-3.1-8B-Instruct (dense, GQA, bf16) on one H100 -------------------------------------------------
LLAMA = "meta-llama__Llama-3.1-8B-Instruct.json"


def llama_by_hand() -> dict:
    c = load_config(LLAMA)
    h, layers, heads, kv, inter, vocab = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                                          c["num_key_value_heads"], c["intermediate_size"], c["vocab_size"])
    hd = h // heads
    attn = layers * (h * heads * hd + 2 * h * kv * hd + heads * hd * h)
    mlp = layers * 3 * h * inter
    lm_head = vocab * h  # untied: the embedding table is only looked up, lm_head is read every step
    norms = (2 * layers + 1) * h
    return dict(h=h, layers=layers, heads=heads, hd=hd, matmul=attn + mlp + lm_head,
                weight_bytes=2 * (attn + mlp + lm_head + norms), kv_per_token=layers * 2 * kv * hd * 2)


def test_dense_decode_step_is_weights_plus_kv_over_bandwidth():
    m = llama_by_hand()
    gpu = catalog(H100)
    eff = perf.get_efficiency(H100)
    prompt, out, batch = 1536, 1024, 4
    ctx = prompt + out // 2  # mean context over the generation: 2048
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192)
    r = perf.estimate_speed(inp, prompt_len=prompt, output_len=out, concurrency=batch)

    assert r.effective_concurrency == batch and r.mean_context == 2048
    kv_bytes = m["kv_per_token"] * ctx * batch
    assert r.decode.bytes_weights == pytest.approx(m["weight_bytes"], rel=1e-6)
    assert r.decode.bytes_kv == pytest.approx(kv_bytes, rel=1e-9)
    memory_ms = (m["weight_bytes"] + kv_bytes) / (gpu["bandwidth_gbps"] * 1e9 * eff.mem_bw) * 1e3
    flops = 2 * m["matmul"] * batch + batch * 4 * m["layers"] * m["heads"] * m["hd"] * ctx
    compute_ms = flops / (gpu["tflops_bf16"] * 1e12 * eff.compute) * 1e3
    assert r.decode.flops == pytest.approx(flops, rel=1e-6)
    assert r.decode.memory_ms == pytest.approx(memory_ms, rel=1e-6)
    assert r.decode.compute_ms == pytest.approx(compute_ms, rel=1e-6)
    assert r.decode.bound == "memory" and r.decode.comm_ms == 0
    fixed_ms = eff.step_overhead_ms + m["layers"] * eff.layer_us * 1e-3  # + the per-layer small kernels
    assert r.decode_step_ms == pytest.approx(core(memory_ms, compute_ms, eff) + fixed_ms, rel=1e-4)
    assert r.compute_dtype == "bf16/fp16"


def test_dense_prefill_ttft_is_flops_over_tflops():
    m = llama_by_hand()
    gpu = catalog(H100)
    eff = perf.get_efficiency(H100)
    p = 1536
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192)
    r = perf.estimate_speed(inp, prompt_len=p, output_len=64, concurrency=1)
    # one chunk (max_num_batched_tokens 8192 on an H100): 2 x params x P + causal attention over P(P+1)/2 pairs
    flops = 2 * m["matmul"] * p + 4 * m["layers"] * m["heads"] * m["hd"] * p * (p + 1) / 2
    assert r.prefill.flops == pytest.approx(flops, rel=1e-6)
    assert r.prefill.bound == "compute"
    compute_ms = flops / (gpu["tflops_bf16"] * 1e12 * eff.compute) * 1e3
    memory_ms = (m["weight_bytes"] + m["kv_per_token"] * p) / (gpu["bandwidth_gbps"] * 1e9 * eff.mem_bw) * 1e3
    ttft = core(memory_ms, compute_ms, eff) + eff.step_overhead_ms + m["layers"] * eff.layer_us * 1e-3 \
        + eff.ttft_fixed_ms
    assert r.ttft_ms == pytest.approx(ttft, rel=1e-4)  # concurrency 1: no other prefill to wait for
    # concurrency 1: TPOT is the decode step; tok/s = O / (TTFT + (O-1) TPOT)
    assert r.itl_ms == pytest.approx(r.decode_step_ms, abs=1e-3)
    assert r.output_tokens_per_s == pytest.approx(64 / ((r.ttft_ms + 63 * r.itl_ms) / 1e3), rel=1e-3)


def test_tensor_parallel_adds_two_ring_all_reduces_per_layer():
    m = llama_by_hand()
    eff = perf.get_efficiency(H100)
    link_gbps, _ = perf.interconnect(perf.get_gpu(H100))
    assert link_gbps == 450  # NVLink 4, 900 GB/s bidirectional
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192, tensor_parallel_size=2)
    r = perf.estimate_speed(inp, prompt_len=1024, output_len=2, concurrency=1)
    msg = 1 * m["h"] * 2  # one token's hidden state in bf16
    per = eff.allreduce_latency_us * 1e-6 + 2 * (2 - 1) / 2 * msg / (link_gbps * 1e9)
    assert r.decode.comm_ms == pytest.approx(2 * m["layers"] * per * 1e3, rel=1e-9)
    # each of the two GPUs reads half of the sharded weights (norms are replicated)
    norms = 2 * (2 * m["layers"] + 1) * m["h"]
    assert r.decode.bytes_weights == pytest.approx((m["weight_bytes"] - norms) / 2 + norms, rel=1e-6)


# --- Qwen3-30B-A3B (MoE: 128 experts, top-8) ------------------------------------------------------------
QWEN_MOE = "Qwen__Qwen3-30B-A3B.json"


def qwen_moe_by_hand() -> dict:
    c = load_config(QWEN_MOE)
    h, layers, heads, kv, hd = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                                c["num_key_value_heads"], c["head_dim"])
    e, k, mi, vocab = c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], c["vocab_size"]
    attn = h * heads * hd + 2 * h * kv * hd + heads * hd * h + 2 * hd  # q, k, v, o + q/k RMSNorm
    router = h * e
    expert = 3 * h * mi
    norms = 2 * h
    dense = layers * (attn + router + norms) + h + vocab * h  # + final norm + lm_head (untied)
    return dict(e=e, k=k, layers=layers, dense=dense, experts=layers * e * expert,
                active_matmul=layers * (attn + router + k * expert) + vocab * h)


@pytest.mark.parametrize("batch", [1, 16])
def test_moe_decode_reads_only_the_experts_the_batch_touches(batch):
    m = qwen_moe_by_hand()
    inp = EngineInput(hf_config=load_config(QWEN_MOE), gpu=H100, max_model_len=4096)
    r = perf.estimate_speed(inp, prompt_len=128, output_len=2, concurrency=batch)
    touched = m["e"] * (1 - (1 - m["k"] / m["e"]) ** batch)  # 8 for one token, ~82.4 for 16
    assert r.decode.experts_touched == pytest.approx(touched, rel=1e-9)
    if batch == 1:
        assert touched == pytest.approx(8)
    expected = 2 * (m["dense"] + m["experts"] * touched / m["e"])
    assert r.decode.bytes_weights == pytest.approx(expected, rel=1e-6)
    # FLOPs use the active parameters (top-8 experts per token) regardless of how many experts are touched
    ctx = 128 + 1
    attn_flops = batch * 4 * m["layers"] * 32 * 128 * ctx
    assert r.decode.flops == pytest.approx(2 * m["active_matmul"] * batch + attn_flops, rel=1e-6)


def test_fp8_checkpoint_uses_fp8_tensor_cores_on_hopper_and_halves_the_bytes():
    bf16 = perf.estimate_speed(EngineInput(hf_config=load_config(QWEN_MOE), gpu=H100, max_model_len=4096),
                               prompt_len=128, output_len=2)
    fp8 = perf.estimate_speed(EngineInput(hf_config=load_config("Qwen__Qwen3-30B-A3B-FP8.json"), gpu=H100,
                                          max_model_len=4096), prompt_len=128, output_len=2)
    assert fp8.compute_dtype == "fp8"
    # linears in fp8 (+ block scales), lm_head / norms / router stay bf16: a bit more than half
    assert 0.5 < fp8.decode.bytes_weights / bf16.decode.bytes_weights < 0.56


# --- speculative decoding -------------------------------------------------------------------------------
def test_acceptance_length_formula():
    assert perf.acceptance_length(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert perf.acceptance_length(0.8, 1) == pytest.approx(1.8)
    assert perf.acceptance_length(0.0, 5) == 1.0
    assert perf.acceptance_length(1.0, 4) == 5.0
    assert perf.alpha_from_acceptance_length(1.875, 3) == pytest.approx(0.5, abs=1e-9)
    with pytest.raises(EngineInputError):
        perf.acceptance_length(1.2, 3)


def test_public_per_position_rates_give_the_logged_acceptance_length(ground_truth):
    cases = [c for c in ground_truth["spec_decode_cases"] if c["per_position_acceptance_rate"]]
    checked = 0
    for case in cases:
        rates = case["per_position_acceptance_rate"]
        assert len(rates) == case["num_speculative_tokens"], case["id"]
        length = perf.acceptance_length_from_per_position(rates)
        if case["mean_acceptance_length"] is not None:
            assert length == pytest.approx(case["mean_acceptance_length"], abs=0.02), case["id"]
            checked += 1
        if case["draft_acceptance_rate"] is not None:  # vLLM's "Avg Draft acceptance rate" = (AL - 1) / k
            assert (length - 1) / len(rates) == pytest.approx(case["draft_acceptance_rate"], abs=0.006), case["id"]
    assert checked >= 6


def test_shipped_typical_figures_match_the_shared_cases(ground_truth):
    shared = {c["id"]: c for c in ground_truth["spec_decode_cases"]}
    for fig in perf.typical_figures():
        case = shared[fig.case_id]
        assert fig.source_url == case["source_url"]
        assert fig.num_speculative_tokens == case["num_speculative_tokens"]
        logged = case["mean_acceptance_length"]
        if logged is None:
            logged = 1 + sum(case["per_position_acceptance_rate"])
        assert fig.mean_acceptance_length == pytest.approx(logged, abs=1e-3)
        assert fig.label == "public figure"
        # the per-token rate reproduces the figure at its own k
        assert perf.acceptance_length(fig.alpha, fig.num_speculative_tokens) == pytest.approx(logged, abs=1e-6)


def test_break_even_solver_by_hand():
    # the rate is accepted / drafted tokens (vLLM's): AL = 1 + k x rate, so rate* = (cost - 1) / k
    assert perf.break_even_acceptance_rate(1.25, 1) == pytest.approx(0.25, abs=1e-9)
    assert perf.break_even_acceptance_rate(1.75, 2) == pytest.approx(0.375, abs=1e-9)
    assert perf.break_even_acceptance_rate(0.9, 3) == 0.0
    assert perf.break_even_acceptance_rate(4.0, 3) is None


def test_ngram_break_even_at_high_concurrency_by_hand():
    """ngram drafts on the CPU; k=3 verifies 4 tokens per request. At 64 requests the 256-token verification
    pass is compute-bound while a plain step is memory-bound; the break-even a solves 1 + a + a^2 + a^3 =
    t_spec_step / t_step, i.e. rate = (ratio - 1) / k in vLLM's accepted / drafted terms."""
    m = llama_by_hand()
    gpu = catalog(H100)
    eff = perf.get_efficiency(H100)
    batch, prompt, out, k = 64, 512, 128, 3
    ctx = prompt + out // 2
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192,
                      speculative_config={"method": "ngram", "num_speculative_tokens": k})
    r = perf.estimate_speed(inp, prompt_len=prompt, output_len=out, concurrency=batch, acceptance_rate=0.6)
    bw, peak = gpu["bandwidth_gbps"] * 1e9 * eff.mem_bw, gpu["tflops_bf16"] * 1e12 * eff.compute
    per_pair = 4 * m["layers"] * m["heads"] * m["hd"]
    kv = m["kv_per_token"] * ctx * batch
    step = core((m["weight_bytes"] + kv) / bw, (2 * m["matmul"] * batch + batch * per_pair * ctx) / peak, eff)
    # 4 new tokens per request at the end of the context attend to ctx-3 .. ctx keys
    verify = core((m["weight_bytes"] + kv) / bw,
                  (2 * m["matmul"] * 4 * batch + batch * per_pair * (4 * ctx - 6)) / peak, eff)
    ovh = eff.step_overhead_ms * 1e-3 + m["layers"] * eff.layer_us * 1e-6
    # ngram on the CPU: 64 requests over 8 numba threads = 8 scans of (5 us + 2 ns x 576 tokens) + 20 us for the
    # parallel region; rejection sampler: 2 x 64 x 3 x vocab fp32; the runtime's fixed cost per speculative step
    # + its per-request host time
    cpu = batch / 8 * (5e-6 + 2e-9 * ctx) + 20e-6
    rej = 2 * batch * k * 128256 * 4 / bw
    fixed = (eff.spec_step_overhead_ms + batch * eff.spec_cpu_ms_per_request) * 1e-3
    ratio = (verify + ovh + cpu + rej + fixed) / (step + ovh)
    assert r.spec.cost_ratio == pytest.approx(ratio, rel=1e-3)
    assert r.spec.break_even_acceptance_rate == pytest.approx((ratio - 1) / k, abs=1e-3)
    assert r.spec.mean_acceptance_length == pytest.approx(1 + k * 0.6)  # vLLM: AL = 1 + k x accepted/drafted
    assert r.spec.verify.bound == "compute"
    assert any("compute-bound" in w for w in r.warnings)
    fields = perf.speed_fields(inp, None, prompt, out, batch, acceptance_rate=0.6)
    assert fields["spec_speedup"] == r.spec.speedup and fields["itl_ms"] == pytest.approx(r.spec.itl_ms, rel=5e-3)


def test_cpu_drafter_with_memory_bound_verify_still_has_a_break_even_above_zero():
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192,
                      speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    r = perf.estimate_speed(inp, prompt_len=512, output_len=128, concurrency=1, acceptance_rate=0.5)
    eff = perf.get_efficiency(H100)
    assert r.spec.verify.bound == "memory"
    base = r.decode_step_ms
    # same weight bytes for 4 tokens as for 1, but the CPU proposer, the rejection sampler and the fixed
    # per-step cost are paid on top: 1 x (5 us + 2 ns x 576) + 2 x 3 x 128256 x 4 B / bandwidth + 0.5 + 0.02 ms
    extra = (5e-3 + 2e-6 * 576) + 2 * 3 * 128256 * 4 / (3350e9 * eff.mem_bw) * 1e3 + eff.spec_step_overhead_ms \
        + eff.spec_cpu_ms_per_request
    # the verification pass reads the same bytes; with overlap_p = 1 it adds the compute of 3 more tokens
    m = llama_by_hand()
    assert eff.overlap_p == 1
    three_tokens_ms = 2 * m["matmul"] * 3 / (989e12 * eff.compute) * 1e3
    assert r.spec.verify.total_ms - base == pytest.approx(three_tokens_ms, rel=0.05)
    assert r.spec.cost_ratio == pytest.approx((r.spec.verify.total_ms + extra) / base, rel=1e-3)
    assert r.spec.break_even_acceptance_rate > 0.05  # never 0 for a method with a cost
    assert r.spec.speedup == pytest.approx((1 + 3 * 0.5) / r.spec.cost_ratio, rel=0.01)  # AL = 1 + k x rate


def test_eagle3_uses_the_public_figure_and_a_one_layer_head():
    target, head = load_config(LLAMA), load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")
    inp = EngineInput(hf_config=target, draft_hf_config=head, gpu=H100, max_model_len=8192,
                      speculative_config={"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                                          "num_speculative_tokens": 3})
    est = estimate(inp)
    r = perf.estimate_speed(inp, est, prompt_len=1024, output_len=256, concurrency=1)
    sp = r.spec
    assert "sd-003" in sp.acceptance_rate_source
    # decay = geometric mean of the conditional-rate ratios of the sd-003 and sd-011 per-position logs;
    # AL = 1 + a1 + a1^2 d + a1^3 d^3
    logs = [[0.6541, 0.3993, 0.202], [0.622, 0.356, 0.203, 0.119, 0.06]]
    ratios = []
    for p in logs:
        cond = [p[0]] + [p[i] / p[i - 1] for i in range(1, len(p))]
        ratios += [cond[i + 1] / cond[i] for i in range(len(cond) - 1)]
    d = math.exp(sum(map(math.log, ratios)) / len(ratios))
    # alpha_1 is solved so that the model gives the logged 2.26 at the figure's own k = 3
    assert sp.mean_acceptance_length == pytest.approx(2.26, abs=1e-3)
    a = perf.predict_acceptance("eagle3", 3).alpha1
    assert 1 + a + a * a * d + a ** 3 * d ** 3 == pytest.approx(2.26, abs=1e-6)
    # the head: one decoder layer + fc (3h -> h) + q/k/v over 2h + a 32000-token lm_head, in bf16, per pass
    h, inter, kvd = 4096, 14336, 8 * 128
    head_params = (2 * h * h + 2 * h * kvd) + 3 * h * inter + 3 * h * h + h * (h + 2 * kvd) + 32000 * h
    head_ms = head_params * 2 / (catalog(H100)["bandwidth_gbps"] * 1e9 * perf.get_efficiency(H100).mem_bw) * 1e3
    eff = perf.get_efficiency(H100)
    head_compute_ms = 2 * head_params / (989e12 * eff.compute) * 1e3  # one token per pass, no overlap (p = 1)
    assert sp.step.draft_gpu_ms == pytest.approx(3 * (head_ms + head_compute_ms + eff.layer_us * 1e-3), rel=0.05)
    # + 3 x the runtime's fixed cost per drafter pass (launch, argmax, slot updates)
    eff = perf.get_efficiency(H100)
    assert sp.draft_ms == pytest.approx(sp.step.draft_gpu_ms + 3 * eff.draft_step_overhead_ms, abs=2e-3)
    assert 1.4 < sp.speedup < sp.mean_acceptance_length
    fields = perf.speed_fields(inp, est, 1024, 256, 1)
    assert set(fields) == {"ttft_ms", "itl_ms", "output_tokens_per_s", "speed_with_speculation", "efficiency_label",
                           "efficiency_precision", "request_rate", "mean_in_flight", "saturated",
                           "acceptance_rate",
                           "mean_acceptance_length",
                           "spec_speedup", "spec_speedup_low", "spec_speedup_high", "spec_slowdown",
                           "best_num_speculative_tokens", "spec_stops_paying_above_concurrency", "spec_pays_from_concurrency",
                           "break_even_acceptance_rate", "speed_sources", "speed_warnings"}
    # a closed loop: the open-loop keys are there, null; the figures are the speculative server's (EAGLE-3's public AL)
    assert (fields["request_rate"], fields["mean_in_flight"], fields["saturated"]) == (None, None, None)
    assert fields["speed_with_speculation"] is True
    assert fields["spec_speedup_low"] < fields["spec_speedup"] < fields["spec_speedup_high"]
    # vLLM's "Avg Draft acceptance rate": (AL - 1) / k
    assert fields["acceptance_rate"] == pytest.approx((fields["mean_acceptance_length"] - 1) / 3, abs=1e-3)
    assert fields["efficiency_label"] == "fitted"  # vLLM row: fitted on the public serving records
    assert fields["efficiency_precision"] == perf.PRECISION["fitted"] and "±30 % on other public runs" in \
        fields["efficiency_precision"]
    assert fields["itl_ms"] == pytest.approx(r.itl_ms / sp.speedup, rel=5e-3)  # 3 significant digits


def test_user_rate_overrides_the_public_figure_and_low_acceptance_is_a_stop_sign():
    head = load_config("yuhuili__EAGLE-LLaMA3-Instruct-8B.json")
    inp = EngineInput(hf_config=load_config(LLAMA), draft_hf_config=head, gpu=H100, max_model_len=8192,
                      speculative_config={"method": "eagle", "model": "x", "num_speculative_tokens": 4})
    r = perf.estimate_speed(inp, prompt_len=512, output_len=128, acceptance_rate=0.05, temperature=1.0)
    assert r.spec.acceptance_rate == 0.05 and "user input" in r.spec.acceptance_rate_source
    assert r.spec.speedup < 1
    assert any(w.startswith("stop sign") for w in r.warnings)
    assert any("temperature 1.0" in w for w in r.warnings)


def test_method_without_public_figure_asks_for_a_rate():
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192,
                      speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    fields = perf.speed_fields(inp, None, 512, 128, 1)
    assert fields["spec_speedup"] is None and fields["mean_acceptance_length"] is None
    assert fields["break_even_acceptance_rate"] > 0
    assert any("--acceptance-rate" in w for w in fields["speed_warnings"])


# --- concurrency, curves, bad input, efficiency hook ----------------------------------------------------
def test_concurrency_is_capped_by_the_kv_cache():
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192)
    est = estimate(inp)
    r = perf.estimate_speed(inp, est, prompt_len=7000, output_len=1000, concurrency=1000)
    assert r.effective_concurrency == est.kv_cache_tokens // 8000
    assert any("limited by the KV cache" in w for w in r.warnings)
    xs = [p.x for p in r.vs_concurrency]
    assert xs == sorted(xs) and xs[-1] == r.effective_concurrency
    tps = [p.output_tokens_per_s for p in r.vs_concurrency]
    assert tps == sorted(tps)  # throughput grows with the batch in this range
    itl = [p.itl_ms for p in r.vs_context]
    assert itl == sorted(itl)  # longer context, more KV to read


@pytest.mark.parametrize("kwargs,field", [(dict(prompt_len=0), "prompt_len"), (dict(concurrency=-1), "concurrency"),
                                          (dict(acceptance_rate=1.5), "acceptance_rate")])
def test_bad_input_names_the_field(kwargs, field):
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192)
    with pytest.raises(EngineInputError) as err:
        perf.estimate_speed(inp, **{"prompt_len": 512, "output_len": 64, **kwargs})
    assert err.value.field == field


def test_measured_itl_refines_the_bandwidth_efficiency():
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192)
    r = perf.estimate_speed(inp, prompt_len=512, output_len=64, concurrency=1)
    measured = r.itl_ms * 1.2
    eff = perf.efficiency_from_measurement(r, measured_itl_ms=measured, source="test run")
    perf.apply_measured_efficiency(H100, eff)
    again = perf.estimate_speed(inp, prompt_len=512, output_len=64, concurrency=1)
    assert again.itl_ms == pytest.approx(measured, rel=1e-4)  # itl_ms is rounded to 3 decimals
    # by hand: the memory term grows by the whole 20 % of TPOT (compute, overhead and per-layer time fixed)
    assert again.decode.memory_ms == pytest.approx(r.decode.memory_ms + 0.2 * r.itl_ms, rel=1e-4)
    assert again.efficiency["source"] == "test run"


def test_speedup_chart_marks_break_even_and_expected_point():
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192,
                      speculative_config={"method": "ngram", "num_speculative_tokens": 1})
    r = perf.estimate_speed(inp, prompt_len=512, output_len=128, concurrency=32, acceptance_rate=0.6)
    spec = speedup_chart_for(r.spec)
    json.dumps(spec)
    assert spec["$schema"].endswith("vega-lite/v5.json")
    rule = spec["layer"][2]["data"]["values"][0]
    assert rule["alpha"] == pytest.approx(r.spec.break_even_acceptance_rate, abs=1e-4)
    point = spec["layer"][3]["data"]["values"][0]
    assert point["alpha"] == 0.6 and point["speedup"] == pytest.approx(r.spec.speedup, abs=1e-3)
    # the curve crosses 1 at the break-even rate
    below = [s for a, s in r.spec.speedup_curve if a < r.spec.break_even_acceptance_rate - 0.01]
    above = [s for a, s in r.spec.speedup_curve if a > r.spec.break_even_acceptance_rate + 0.01]
    assert max(below) < 1 < min(above)
    never = speedup_chart_spec([(0.0, 0.5), (0.99, 0.9)], break_even=None)
    assert len(never["layer"]) == 2 and "never pays" in never["title"]["subtitle"]
    assert not math.isnan(r.spec.cost_ratio)


# --- the estimate command ---------------------------------------------------------------------------------
def test_estimate_command_carries_the_speed_fields():
    from io import StringIO

    from django.core.management import CommandError, call_command

    from .conftest import CONFIGS

    out = StringIO()
    call_command("estimate", "--config", str(CONFIGS / LLAMA), "--gpu", "H100", "--max-model-len", "8192",
                 "--prompt-len", "1536", "--output-len", "1024", "--concurrency", "4", "--format", "json", stdout=out)
    data = json.loads(out.getvalue())
    m = llama_by_hand()
    eff = perf.get_efficiency(H100)
    step_ms = (m["weight_bytes"] + m["kv_per_token"] * 2048 * 4) / (3350e9 * eff.mem_bw) * 1e3 + eff.step_overhead_ms
    assert data["itl_ms"] >= step_ms * 0.999  # the step plus the stalls from the other 3 requests' prefills
    assert data["ttft_ms"] > 0 and data["output_tokens_per_s"] > 0
    # no speculation: its keys are there, null, and the figures are those of the server without drafts
    assert data["spec_speedup"] is None and data["speed_with_speculation"] is False and data["speed_error"] is None

    out = StringIO()
    call_command("estimate", "--config", str(CONFIGS / LLAMA), "--gpu", "H100", "--max-model-len", "8192",
                 "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}', "--acceptance-rate", "0.5",
                 "--format", "json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["mean_acceptance_length"] == pytest.approx(2.0)  # 1 + k x rate = 1 + 2 x 0.5
    assert 0 < data["break_even_acceptance_rate"] < 0.2 and data["spec_speedup"] > 1

    with pytest.raises(CommandError) as err:
        call_command("estimate", "--config", str(CONFIGS / LLAMA), "--acceptance-rate", "2")
    assert str(err.value).startswith("--acceptance-rate") and err.value.returncode == 2


@pytest.mark.django_db
def test_num_prompts_without_concurrency_is_a_burst_that_queues(client):
    """vllm bench serve --request-rate inf --num-prompts N without --max-concurrency sends all N at once: the
    engine runs M of them (KV cache / max_num_seqs) and the rest queue; a burst's mean wait is half of
    (N/M - 1) request lifetimes (each lifetime = TTFT + (O - 1) x TPOT of the running wave), by Little's law."""
    inp = EngineInput(hf_config=load_config("Qwen__Qwen3-32B.json"), gpu=H100, max_model_len=8192)
    n, p, o = 500, 4000, 200
    wave = perf.estimate_speed(inp, prompt_len=p, output_len=o, concurrency=n, arrival="burst")
    m = wave.effective_concurrency
    assert 1 < m < n
    alone = perf.estimate_speed(inp, prompt_len=p, output_len=o, concurrency=m, arrival="burst")
    lifetime = alone.ttft_ms + (o - 1) * alone.itl_ms
    assert wave.ttft_ms == pytest.approx(alone.ttft_ms + (n / m - 1) / 2 * lifetime, rel=1e-3)
    # the API: --num-prompts alone is that burst; with --concurrency it is a closed loop of that many
    q = {"model": "Qwen/Qwen3-32B", "gpu": "H100", "max_model_len": "8192", "prompt_len": str(p), "output_len": str(o)}
    burst = client.get("/api/estimate", q | {"num_prompts": str(n)}).json()
    assert burst["ttft_ms"] == pytest.approx(wave.ttft_ms, rel=0.01)
    closed = client.get("/api/estimate", q | {"num_prompts": str(n), "concurrency": "4"}).json()
    assert closed["ttft_ms"] < burst["ttft_ms"] / 100
    # --max-concurrency at or above --num-prompts holds none back: the same burst
    capped = client.get("/api/estimate", q | {"num_prompts": str(n), "concurrency": str(2 * n)}).json()
    assert capped["ttft_ms"] == burst["ttft_ms"]
    lc = client.get("/api/estimate", {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "llama.cpp",
                                      "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "gpu": "RTX 3090",
                                      "num_prompts": "50"}).json()
    assert "llama.cpp serves its --parallel slots" in str(lc)


def test_a_full_prefill_budget_caps_the_decoding_requests():
    """vLLM serves the running requests first and gives waiting prompts what is left of max_num_batched_tokens
    (vllm/v1/core/sched/scheduler.py Scheduler.schedule). A request takes P + O - 1 scheduled tokens, so with
    B = 2048, P = 4000, O = 200 a full budget keeps 2048 x 199 / 4199 = 97.06 -> 97 requests decoding (Little's
    law); the other clients of a closed loop wait for their prefill: (C/M - 1) request lifetimes in TTFT."""
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192, max_num_batched_tokens=2048)
    est = estimate(inp)
    assert est.kv_cache_tokens // 4200 > 97  # the KV cache alone would admit more
    assert perf.prefill_budget_cap(perf._setup(perf.plan_from_engine(inp, est), "vllm"), 4000, 200) == 97
    r = perf.estimate_speed(inp, est, prompt_len=4000, output_len=200, concurrency=256)
    assert r.effective_concurrency == 97
    assert any("prefill token budget" in w and "2,048" in w for w in r.warnings)
    assert "Scheduler.schedule" in r.sources["effective_concurrency"]
    alone = perf.estimate_speed(inp, est, prompt_len=4000, output_len=200, concurrency=97)
    assert r.itl_ms == pytest.approx(alone.itl_ms)
    lifetime = alone.ttft_ms + 199 * alone.itl_ms
    assert r.ttft_ms == pytest.approx(alone.ttft_ms + (256 / 97 - 1) * lifetime, rel=1e-3)
    assert max(p.x for p in r.vs_concurrency) == 97
    # below the cap every client decodes; output_len 1 has no decode phase to cap
    assert perf.estimate_speed(inp, est, prompt_len=4000, output_len=200, concurrency=64).effective_concurrency == 64
    assert perf.prefill_budget_cap(perf._setup(perf.plan_from_engine(inp, est), "vllm"), 4000, 1) is None
    # with speculation the drafts take budget too: not modelled, and said so
    spec = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192, max_num_batched_tokens=2048,
                       speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    rs = perf.estimate_speed(spec, prompt_len=4000, output_len=200, concurrency=256, acceptance_rate=0.5)
    assert rs.effective_concurrency == 97
    assert any(w.startswith("speculation at a full prefill token budget is not modelled") and "up to 4 " in w
               for w in rs.warnings)
    # ... and from fewer clients than the plain run: acceptance rate 0.5 at k=3 is AL 1 + 3 x 0.5 = 2.5, so a request
    # decodes for S = 199 / 2.5 = 79.6 steps of 4 scheduled tokens: 2048 x 79.6 / (4000 + 79.6 x 4) = 37.75 -> 37
    # decoding at once. At 64 clients the plain run is not budget-bound (97) but the speculative one is.
    s64 = perf.estimate_speed(spec, prompt_len=4000, output_len=200, concurrency=64, acceptance_rate=0.5)
    assert s64.effective_concurrency == 64 and s64.spec.mean_acceptance_length == pytest.approx(2.5)
    assert perf.prefill_budget_cap(perf._setup(perf.plan_from_engine(inp, est), "vllm"), 4000, 200, spec_k=3,
                                   acceptance_length=2.5) == 37
    assert any(w.startswith("speculation at a full prefill token budget is not modelled") and "about 37 " in w
               for w in s64.warnings)
    assert not any("full prefill token budget" in w for w in
                   perf.estimate_speed(spec, prompt_len=4000, output_len=200, concurrency=30,
                                       acceptance_rate=0.5).warnings)
    # SGLang runs prefill batches ahead of decode batches: its caps are max_running_requests and the KV pool
    assert perf.prefill_budget_cap(perf._setup(perf.plan_from_engine(inp, est), "sglang"), 4000, 200) is None
    # no budget cap (SGLang, or output_len 1): the curve against concurrency still runs to the runtime's own caps,
    # whatever concurrency the user asked for
    for runtime, out in (("sglang", 200), ("vllm", 1)):
        xs = [[p.x for p in perf.estimate_speed(inp, est, prompt_len=4000, output_len=out, concurrency=c,
                                                runtime=runtime).vs_concurrency] for c in (1, 8)]
        assert xs[0] == xs[1] and max(xs[0]) >= 64, (runtime, xs)



def test_the_prefill_budget_is_per_pipeline_micro_batch():
    """With pipeline parallelism vLLM keeps pipeline_parallel_size micro-batches in flight (vllm/config/vllm.py
    max_concurrent_batches; v1/engine/core.py step_with_batch_queue), each scheduled with its own
    max_num_batched_tokens: at PP 2, B = 2048, P = 4000, O = 200 a pass through both stages schedules 4096 tokens and
    keeps 4096 x 199 / 4199 = 194.1 -> 194 requests decoding, twice the PP 1 figure (97)."""
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192, max_num_batched_tokens=2048,
                      pipeline_parallel_size=2)
    est = estimate(inp)
    assert est.kv_cache_tokens // 4200 > 194  # the KV cache alone would admit more
    assert perf.prefill_budget_cap(perf._setup(perf.plan_from_engine(inp, est), "vllm"), 4000, 200) == 194
    assert perf.estimate_speed(inp, est, prompt_len=4000, output_len=200, concurrency=150).effective_concurrency == 150
    r = perf.estimate_speed(inp, est, prompt_len=4000, output_len=200, concurrency=256)
    assert r.effective_concurrency == 194
    assert any("prefill token budget" in w and "2 pipeline micro-batches" in w for w in r.warnings)


def test_deepseek_sparse_attention_reads_the_top_k_latents_and_every_indexer_key():
    """DeepSeek-V3.2 (61 MLA layers, 128 heads, kv_lora_rank 512, rope 64, index_topk 2048, indexer 64 heads x 128)
    on 8x H200, bf16 KV: per token and layer the latent is (512 + 64) x 2 B = 1152 B and the indexer's key cache
    128 + 128 / 128 x 4 = 132 B. A decode step of one request at 30,000 tokens reads the latents of the 2,048 tokens
    the indexer picks and the indexer keys of all 30,000; the sparse backend attends in the absorbed form,
    2 x 16 heads per GPU x (576 + 512) FLOPs per (query, key) pair, the replicated indexer 2 x 64 x 128."""
    from calculator.metadata.catalog import CATALOG_DIR

    cfg = json.loads((CATALOG_DIR / "deepseek-ai__DeepSeek-V3.2.json").read_text())
    inp = EngineInput(hf_config=cfg, gpu="H200", tensor_parallel_size=8, max_model_len=32768)
    s = perf._setup(perf.plan_from_engine(inp, estimate(inp)), "vllm")
    by_window = {g.window: g for g in s.target.attn}
    assert set(by_window) == {2048, None}
    assert by_window[2048].kv_bytes_per_token == 61 * 1152
    assert by_window[None].kv_bytes_per_token == 61 * 132
    assert by_window[2048].flops_per_pair == 61 * 2 * (128 / 8) * (576 + 512)
    assert by_window[None].flops_per_pair == 61 * 2 * 64 * 128
    assert s.target.kv_bytes(30_000) == 61 * 1152 * 2048 + 61 * 132 * 30_000
    assert s.target.kv_bytes(1_000) == 61 * (1152 + 132) * 1_000  # below index_topk every token is attended
    one = s.target.attention_flops(30_000, 1)
    assert one == pytest.approx(61 * 2 * 16 * 1088 * 2048 + 61 * 2 * 64 * 128 * 30_000)


def test_output_len_1_has_no_decode_stall():
    """With output_len 1 there is no decode phase: the time per output token is the plain step, without a share of
    the other requests' prefills divided by output_len - 1 (which would be a division by zero)."""
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192)
    r = perf.estimate_speed(inp, prompt_len=1024, output_len=1, concurrency=64)
    assert r.itl_ms == pytest.approx(r.decode_step_ms, rel=1e-3)


def test_speculation_throughput_counts_the_running_requests_not_the_queue():
    """With more clients than run at once (the KV cache caps them), the plain throughput is M running requests over
    their lifetime, the queue wait apart; the speculative one must be counted the same way (it was M requests over a
    lifetime that included the whole queue wait: 376 -> 145 tok/s at a 1.05x speedup), and the queue wait shrinks
    with the speculative lifetime (Little's law)."""
    head = load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")
    inp = EngineInput(hf_config=load_config(LLAMA), draft_hf_config=head, gpu=H100, max_model_len=8192,
                      speculative_config={"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                                          "num_speculative_tokens": 3})
    est = estimate(inp)
    # the result's own figures are the plain run's (same memory plan: the head's weights and KV included)
    plain = r = perf.estimate_speed(inp, est, prompt_len=7000, output_len=1000, concurrency=1000, acceptance_length=2.5)
    m = r.effective_concurrency
    assert m == est.kv_cache_tokens // 8000 < 1000 and r.spec.speedup > 1
    sp = r.spec
    # the running requests' throughput: M x O over (TTFT without the wait + (O - 1) x TPOT), for both
    lifetime_plain = 1000 * m / plain.output_tokens_per_s  # seconds
    lifetime_spec = 1000 * m / sp.output_tokens_per_s
    assert sp.output_tokens_per_s > plain.output_tokens_per_s
    assert lifetime_spec == pytest.approx(lifetime_plain * sp.itl_ms / plain.itl_ms, rel=0.05)
    # the queue wait: (C/M - 1) lifetimes each
    wait_plain = plain.ttft_ms - (lifetime_plain * 1e3 - 999 * plain.itl_ms)
    wait_spec = sp.ttft_ms - (lifetime_spec * 1e3 - 999 * sp.itl_ms)
    assert wait_plain == pytest.approx((1000 / m - 1) * lifetime_plain * 1e3, rel=1e-3)
    assert wait_spec == pytest.approx((1000 / m - 1) * lifetime_spec * 1e3, rel=1e-3)


def test_an_mla_model_is_said_to_be_outside_the_fitted_data():
    """No MLA model is among the runs vLLM's row was fitted on: a DeepSeek answer says so (with the row's own
    per-layer time) and its precision label too; a GQA model's does not."""
    from calculator.metadata.catalog import CATALOG_DIR

    r1 = json.loads((CATALOG_DIR / "deepseek-ai__DeepSeek-R1.json").read_text())
    r = perf.estimate_speed(EngineInput(hf_config=r1, gpu="H200", tensor_parallel_size=8, max_model_len=8192))
    assert r.efficiency_label == "fitted"
    assert perf.MLA_FIT_WARNING.format(layer_us=perf.get_efficiency(H100).layer_us) in r.warnings
    assert "against the 60 us this fit carries" in " ".join(r.warnings)
    # R1's 61 layers at 107-163 us instead of the row's 60: +61 x 47 us = 2.867 ms to +61 x 103 us = 6.283 ms per step
    lo, hi = r.itl_ms + 2.867, r.itl_ms + 6.283
    assert r.efficiency_precision.startswith("a best case for MLA attention")
    assert f"TPOT without speculation would be {lo:.3g}-{hi:.3g} ms, not {r.itl_ms:.3g}" in r.efficiency_precision
    # the range is held beside the best case, for the headline to show, and cited in the sources
    assert r.itl_ms_likely == pytest.approx((lo, hi), abs=2e-3)
    assert r.sources["itl_ms.mla_likely"].startswith(f"TPOT without speculation {lo:.3g}-{hi:.3g} ms more likely")
    # with MTP (k=1) the headline TPOT is the speculative server's: the same 2.867-6.283 ms more per verification
    # pass, over the tokens each yields (the mean acceptance length)
    mtp = perf.estimate_speed(EngineInput(hf_config=r1, gpu="H200", tensor_parallel_size=8, max_model_len=8192,
                                          speculative_config={"method": "mtp", "num_speculative_tokens": 1}))
    sp = mtp.spec
    assert sp.itl_ms_likely == pytest.approx((sp.itl_ms + 2.867 / sp.mean_acceptance_length,
                                              sp.itl_ms + 6.283 / sp.mean_acceptance_length), abs=2e-3)
    llama = perf.estimate_speed(EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192))
    assert llama.itl_ms_likely is None and "itl_ms.mla_likely" not in llama.sources
    assert not any(w.startswith("MLA attention") for w in llama.warnings)
    assert llama.efficiency_precision == perf.PRECISION["fitted"]


def test_workload_warnings_say_what_was_used():
    """A workload or temperature without speculation sets nothing (the plain figures) and says so; with a workload the
    generic 'acceptance falls on hard reasoning' reminder gives way to one about that workload's figure (GSM8K-style
    reasoning raises EAGLE-3's acceptance); a measured acceptance gets no reminder to measure it."""
    cfg = load_config(LLAMA)
    plain = perf.estimate_speed(EngineInput(hf_config=cfg, gpu=H100, max_model_len=8192), workload="code",
                                temperature=0.5)
    assert any(w.startswith("the workload / temperature given is not used") for w in plain.warnings)
    spec = {"method": "eagle3", "num_speculative_tokens": 3}
    inp = EngineInput(hf_config=cfg, gpu=H100, max_model_len=8192, speculative_config=spec,
                      model_label="meta-llama/Llama-3.1-8B-Instruct")
    reasoning = perf.estimate_speed(inp, workload="reasoning")
    assert not any("hard reasoning" in w for w in reasoning.warnings)
    assert any(w.startswith("the acceptance for 'reasoning' comes from public benchmark prompts") for w in reasoning.warnings)
    given = perf.estimate_speed(inp, acceptance_length=2.5)
    assert not any("measure" in w and "traffic" in w for w in given.warnings)


def test_one_output_token_says_there_is_no_tpot():
    r = perf.estimate_speed(EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192), output_len=1)
    assert any(w.startswith("output_len 1: there is no decode phase, so no TPOT") for w in r.warnings)
    r2 = perf.estimate_speed(EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192), output_len=2)
    assert not any(w.startswith("output_len 1") for w in r2.warnings)


@pytest.mark.parametrize("curve, expected, text", [
    # pays everywhere up to the limit: neither number
    ([(1, 1.4), (8, 1.2), (64, 1.01)], (None, None), "does not stop paying up to the server's limit of 64"),
    # pays nowhere
    ([(1, 0.9), (8, 0.8)], (0, None), "pays at no concurrency up to the server's limit of 64"),
    # pays, then loses (a dense target): stops above the last paying point
    ([(1, 1.5), (8, 1.1), (16, 0.95), (32, 0.8)], (8, None), "stops paying above 8 concurrent requests"),
    # loses alone, pays in a batch (an MoE target)
    ([(1, 0.9), (8, 1.1), (64, 1.3)], (None, 8), "pays only from 8 concurrent requests: it does not stop paying"),
    # a dip: pays alone, loses at a few clients, pays again (the fresh user's Qwen3-30B-A3B EAGLE-3 on an H100)
    ([(1, 1.03), (2, 0.96), (4, 0.96), (8, 1.1), (64, 1.35)], (1, 8),
     "stops paying above 1 concurrent requests, loses from 2 to 7 and pays again from 8: it does not stop paying"),
    # a hump: pays only between the crossings; a third crossing is not reported
    ([(1, 0.9), (8, 1.1), (16, 1.05), (32, 0.9), (64, 1.01)], (16, 8), "pays only from 8 to 16 concurrent requests"),
])
def test_where_speculation_pays_along_concurrency_reads_the_curves_first_two_crossings(curve, expected, text):
    assert perf.stops_paying(curve) == expected
    assert text in perf.paying_text(*expected, limit=64, limit_reason="the KV cache")
