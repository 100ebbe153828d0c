"""The costs that make speculative decoding lose, and the acceptance model, pinned by values computed by
hand from real configs, the GPU catalog and the public figures the data file quotes."""
from __future__ import annotations

import math

import pytest

from calculator.engine import EngineInput, EngineInputError
from calculator.engine import acceptance as acc
from calculator.engine import perf

from .conftest import load_config
from .test_perf import H100, LLAMA, QWEN_MOE, catalog, llama_by_hand, qwen_moe_by_hand

HEAD3 = "yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json"


@pytest.fixture(autouse=True)
def _no_measured_overrides():
    perf.reset_measured_efficiency()
    yield
    perf.reset_measured_efficiency()


def ngram(k: int, **kw) -> EngineInput:
    return EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192,
                       speculative_config={"method": "ngram", "num_speculative_tokens": k}, **kw)


def geometric_alpha(tau: float, k: int) -> float:
    """Solve (1 - a^(k+1)) / (1 - a) = tau by bisection (independent of the code under test)."""
    lo, hi = 0.0, 0.99
    for _ in range(80):
        mid = (lo + hi) / 2
        if (1 - mid ** (k + 1)) / (1 - mid) < tau:
            lo = mid
        else:
            hi = mid
    return lo


# --- the verification pass through the roofline -----------------------------------------------------------
def test_verification_turns_compute_bound_at_the_gpus_flop_per_byte_ratio():
    m = llama_by_hand()
    gpu = catalog(H100)
    eff = perf.get_efficiency(H100)
    # FLOP/byte the GPU sustains x bytes per multiplied parameter / 2 FLOP per parameter and token
    ridge = gpu["tflops_bf16"] * 1e12 * eff.compute / (gpu["bandwidth_gbps"] * 1e9 * eff.mem_bw)
    tokens = ridge * m["weight_bytes"] / (2 * m["matmul"])
    assert 150 < tokens < 200  # ~180 tokens for bf16 weights on an H100 at these efficiencies
    r = perf.estimate_speed(ngram(3), prompt_len=16, output_len=2, concurrency=1, acceptance_rate=0.5)
    assert r.spec.verify_compute_bound_tokens == pytest.approx(tokens, rel=1e-3)
    below = math.floor(tokens / 4) - 2  # requests x 4 tokens just under the ridge
    above = math.ceil(tokens / 4) + 2
    r_below = perf.estimate_speed(ngram(3), prompt_len=16, output_len=2, concurrency=below, acceptance_rate=0.5)
    r_above = perf.estimate_speed(ngram(3), prompt_len=16, output_len=2, concurrency=above, acceptance_rate=0.5)
    assert r_below.spec.verify.bound == "memory" and r_above.spec.verify.bound == "compute"
    assert r_below.decode.bound == "memory" and r_above.decode.bound == "memory"  # plain steps: 1 token each
    assert any("compute-bound" in w for w in r_above.warnings)


def test_ngram_is_predicted_slower_at_high_concurrency_and_faster_alone():
    """ngram k=3 at acceptance rate 0.5 (AL 2.5): alone the verification costs about one step and speculation pays;
    at 256 requests the 1024-token verification is compute-bound (~4x a step's compute) and the CPU
    matching of 256 requests is serial with the GPU, so it loses."""
    one = perf.estimate_speed(ngram(3), prompt_len=512, output_len=128, concurrency=1, acceptance_rate=0.5)
    many = perf.estimate_speed(ngram(3), prompt_len=512, output_len=128, concurrency=256, acceptance_rate=0.5)
    assert one.spec.speedup > 1.3 and one.spec.slowdown == "unlikely"
    assert many.spec.speedup < 1 and many.spec.slowdown == "likely"
    assert many.spec.break_even_acceptance_rate > 0.5  # the given alpha is below break-even
    assert any(w.startswith("stop sign") for w in many.warnings)
    # where it stops paying, and a smaller k is better at high concurrency
    stop = many.spec.stops_paying_above_concurrency
    assert stop is not None and 1 <= stop < 256
    curve = dict(many.spec.speedup_vs_concurrency[3])
    assert curve[1] > 1 > curve[256]
    assert many.spec.best_num_speculative_tokens < one.spec.best_num_speculative_tokens
    # the CPU proposer, serial with the GPU step: vLLM scans the 256 requests in a numba prange over
    # max(1, (cpu_count // 2) // tp) threads (8 assumed): 256 / 8 = 32 scans of (5 us + 2 ns x 576 tokens) each,
    # + 20 us to enter and leave the parallel region
    assert many.spec.step.proposer_cpu_ms == pytest.approx(32 * (5e-3 + 2e-6 * 576) + 20e-3, rel=1e-6)
    assert one.spec.step.proposer_cpu_ms == pytest.approx(5e-3 + 2e-6 * 576, rel=1e-6)  # one request: one thread


def test_moe_verification_touches_more_experts_and_gains_less():
    m = qwen_moe_by_hand()
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    moe = EngineInput(hf_config=load_config(QWEN_MOE), gpu=H100, max_model_len=4096, speculative_config=spec)
    r = perf.estimate_speed(moe, prompt_len=128, output_len=64, concurrency=1, acceptance_rate=0.6)
    touched = m["e"] * (1 - (1 - m["k"] / m["e"]) ** 4)  # 4 tokens route to ~29.6 of 128 experts
    assert r.spec.verify.experts_touched == pytest.approx(touched, rel=1e-9)
    assert r.decode.experts_touched == pytest.approx(8)
    assert r.spec.verify.bytes_weights == pytest.approx(2 * (m["dense"] + m["experts"] * touched / m["e"]), rel=1e-6)
    # the verification reads ~2.4x the bytes of a plain step, so the gain is far below the dense model's
    assert r.spec.verify.bytes_weights / r.decode.bytes_weights > 2.2
    dense = perf.estimate_speed(ngram(3), prompt_len=128, output_len=64, concurrency=1, acceptance_rate=0.6)
    assert r.spec.speedup < 0.75 * dense.spec.speedup
    assert r.spec.cost_ratio > 1.6 > dense.spec.cost_ratio
    assert any("MoE target" in w for w in r.warnings)


def test_tensor_parallel_all_reduces_in_verification_and_a_smaller_gain_at_tp4():
    m = llama_by_hand()
    eff = perf.get_efficiency(H100)
    link = perf.interconnect(perf.get_gpu(H100))[0] * 1e9

    def run(tp: int):
        inp = EngineInput(hf_config=load_config(LLAMA), draft_hf_config=load_config(HEAD3), gpu=H100,
                          max_model_len=8192, tensor_parallel_size=tp,
                          speculative_config={"method": "eagle3", "model": "x", "num_speculative_tokens": 3})
        return perf.estimate_speed(inp, prompt_len=512, output_len=128, concurrency=4, acceptance_length=2.5)

    tp1, tp4 = run(1), run(4)
    # 2 ring all-reduces per layer over 4 requests x 4 tokens of hidden states in bf16
    msg = 4 * 4 * m["h"] * 2
    per = eff.allreduce_latency_us * 1e-6 + 2 * 3 / 4 * msg / link
    assert tp4.spec.verify.comm_ms == pytest.approx(2 * m["layers"] * per * 1e3, rel=1e-9)
    assert tp1.spec.verify.comm_ms == 0
    # same acceptance, but fixed costs (all-reduce latency, drafter passes, per-step overhead) weigh more when
    # each GPU reads a quarter of the weights
    assert tp4.spec.mean_acceptance_length == tp1.spec.mean_acceptance_length == 2.5
    assert tp4.spec.speedup < 0.97 * tp1.spec.speedup
    assert tp4.spec.cost_ratio > tp1.spec.cost_ratio


def test_break_even_is_never_zero_for_a_method_with_a_cost():
    for method, extra in (("ngram", {}), ("suffix", {}),
                          ("eagle3", {"draft_hf_config": load_config(HEAD3)})):
        spec = {"method": method, "num_speculative_tokens": 3, **({"model": "x"} if extra else {})}
        inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192, speculative_config=spec,
                          **extra)
        r = perf.estimate_speed(inp, prompt_len=512, output_len=128, concurrency=1, acceptance_rate=0.5)
        assert r.spec.cost_ratio > 1 and r.spec.break_even_acceptance_rate > 0, method


# --- the acceptance model --------------------------------------------------------------------------------
def test_per_position_decay_from_the_public_logs_by_hand():
    # sd-003 and sd-011 log unconditional per-position rates p_i; conditional a_i = p_i / p_(i-1)
    logs = [[0.6541, 0.3993, 0.202], [0.622, 0.356, 0.203, 0.119, 0.06]]
    ratios = []
    for p in logs:
        a = [p[0]] + [p[i] / p[i - 1] for i in range(1, len(p))]
        ratios += [a[i + 1] / a[i] for i in range(len(a) - 1)]
    d = math.prod(ratios) ** (1 / len(ratios))
    mm = acc.method_model("eagle3")
    assert mm.decay == pytest.approx(d, rel=1e-9)
    a = mm.alpha1  # solved so that sd-003's AL 2.26 at k = 3 is reproduced; its logged first position is 0.654
    assert 1 + a + a * a * d + a ** 3 * d ** 3 == pytest.approx(2.26, abs=1e-6)
    assert a == pytest.approx(0.6541, abs=0.01)
    # MTP: sd-013 logged [0.7694, 0.3807]: one ratio, (0.3807 / 0.7694) / 0.7694
    assert acc.method_model("mtp").decay == pytest.approx(0.3807 / 0.7694 / 0.7694, rel=1e-9)
    # DeepSeek-V3 report: second-token acceptance 85-90 %, midpoint 0.875 at k = 1
    assert acc.method_model("mtp").alpha1 == pytest.approx(0.875, abs=1e-6)


def test_workload_and_temperature_factors_from_the_quoted_figures():
    # yuhuili EAGLE-3 head on Llama-3.1-8B, K = 7: MT-bench 2.77, HumanEval 3.49, GSM8K 3.34 (geometric alpha)
    code = geometric_alpha(3.49, 7) / geometric_alpha(2.77, 7)
    math_ = geometric_alpha(3.34, 7) / geometric_alpha(2.77, 7)
    assert acc.workload_factor("eagle_family", "code")[0] == pytest.approx(code, rel=1e-6)
    assert acc.workload_factor("eagle_family", "reasoning")[0] == pytest.approx(math_, rel=1e-6)
    assert code > math_ > 1
    chat = acc.predict_acceptance("eagle3", 3)
    assert acc.predict_acceptance("eagle3", 3, workload="humaneval").length > chat.length
    creative = acc.predict_acceptance("eagle3", 3, workload="creative")
    assert creative.length == chat.length and creative.label == "public figure, other workload"
    # temperature: tau 4.50 at T=1 vs 4.78 at T=0 (K = 7) -> alpha ratio r; at T=0.5 the factor is 1 - (1-r)/2
    r = geometric_alpha(4.50, 7) / geometric_alpha(4.78, 7)
    assert acc.temperature_factor(1.0) == pytest.approx(r, rel=1e-6)
    assert acc.temperature_factor(0.5) == pytest.approx(1 - (1 - r) / 2, rel=1e-6)
    hot = acc.predict_acceptance("eagle3", 3, temperature=1.0)
    assert hot.alpha1 == pytest.approx(chat.alpha1 * r, rel=1e-6) and hot.length < chat.length


def test_target_figure_and_user_overrides():
    a = acc.predict_acceptance("eagle3", 3, target="meta-llama/Llama-3.1-8B-Instruct")
    assert "nebius" in a.source and a.length > acc.predict_acceptance("eagle3", 3).length
    # the figure was measured with yuhuili/EAGLE3-LLaMA3.1-Instruct-8B: naming that head keeps it; another head (one
    # nobody measured) gets the method's base figure (sd-003) and a note that it stands in
    same = acc.predict_acceptance("eagle3", 3, target="meta-llama/Llama-3.1-8B-Instruct",
                                  head="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert same.length == a.length and not same.notes
    other = acc.predict_acceptance("eagle3", 3, target="meta-llama/Llama-3.1-8B-Instruct", head="someone/my-eagle3")
    base = acc.predict_acceptance("eagle3", 3)
    assert other.length == base.length and "sd-003" in other.source
    assert any("no public acceptance figure for the head someone/my-eagle3" in n for n in other.notes)
    u = acc.predict_acceptance("eagle3", 3, acceptance_length=2.4)
    assert u.length == 2.4 and u.label == "user input"
    assert (1 - u.alpha ** 4) / (1 - u.alpha) == pytest.approx(2.4, abs=1e-6)
    assert u.low < 2.4 < u.high
    rate = acc.predict_acceptance("ngram", 2, acceptance_rate=0.5)  # vLLM's accepted / drafted
    assert rate.length == pytest.approx(2.0) and rate.rate == pytest.approx(0.5)
    assert acc.predict_acceptance("ngram", 3, workload="chat") is None  # no public figure: the user must say
    # sd-001 (flat ~0.96 then a drop at position 5) is not geometric: alpha_1 hits its 0.99 cap and the model
    # gives 1 + sum_i prod_j 0.99 d^(j-1) with d from the same log, within 0.4 of the logged 5.44
    rep = acc.predict_acceptance("ngram", 5, workload="repetitive")
    d = acc.method_model("ngram").decay
    assert rep.alpha1 == pytest.approx(0.99, abs=1e-6)
    assert rep.length == pytest.approx(1 + sum(math.prod(0.99 * d ** j for j in range(i + 1)) for i in range(5)))
    assert rep.length == pytest.approx(5.44, abs=0.4)
    for kw, field in ((dict(acceptance_length=5.0), "acceptance_length"), (dict(workload="poetry"), "workload"),
                      (dict(acceptance_length=2.0, acceptance_rate=0.5), "acceptance_length")):
        with pytest.raises(EngineInputError) as err:
            acc.predict_acceptance("eagle3", 3, **kw)
        assert err.value.field == field


def test_target_figure_with_lengths_at_several_k():
    # vllm-project/vllm#20780, Eagle 1 column (yuhuili/EAGLE-LLaMA3.1-Instruct-8B on Llama-3.1-8B-Instruct,
    # MT-Bench, greedy): AL 2.1, 2.29, 2.39, 2.43, 2.45, 2.47 at K = 2..7
    measured = {2: 2.1, 3: 2.29, 4: 2.39, 5: 2.43, 6: 2.45, 7: 2.47}
    d = acc.method_model("eagle").decay
    # lengths made from a known alpha_1 give it back
    made = {k: acc.mean_length(0.7, d, k) for k in (2, 4, 6)}
    assert acc.solve_alpha1_lengths(made, d) == pytest.approx(0.7, abs=1e-6)
    # the least-squares alpha_1 by a plain grid over [0.5, 0.8] (step 1e-4), independent of the ternary search
    grid = min((sum((acc.mean_length(i / 1e4, d, k) - v) ** 2 for k, v in measured.items()), i / 1e4)
               for i in range(5000, 8001))[1]
    assert acc.solve_alpha1_lengths(measured, d) == pytest.approx(grid, abs=2e-4)
    for k, v in measured.items():
        a = acc.predict_acceptance("eagle", k, target="meta-llama/Llama-3.1-8B-Instruct", runtime="vllm")
        assert "vllm/issues/20780" in a.source and a.alpha1 == pytest.approx(grid, abs=2e-4)
        assert a.length == pytest.approx(v, rel=0.03)  # one alpha_1 and the method's decay fit all six within 3 %
    # the head's own figure, not PR 16035's (Meta-Llama-3-8B + the lmsys head: AL 1.89 at k=2)
    assert acc.predict_acceptance("eagle", 7).length < 2.2
    # measured on vLLM: SGLang's EAGLE accepts fewer tokens with the same head and chain (sglang#8228), so SGLang
    # (and a caller that names no runtime) keeps the method's base figure
    for runtime in ("sglang", None):
        other = acc.predict_acceptance("eagle", 3, target="meta-llama/Llama-3.1-8B-Instruct", runtime=runtime)
        assert "20780" not in other.source and other.alpha1 == acc.predict_acceptance("eagle", 3).alpha1


def test_eagle3_on_llama_3_1_8b_uses_the_vllm_measured_eagle3_column():
    # vllm-project/vllm#20780, Eagle 3 column (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, MT-Bench, greedy, vLLM V1):
    # AL 2.36, 2.79, 3.08, 3.32, 3.46, 3.54 at K = 2..7, measured on vLLM at temperature 0; before it the answer used a
    # temperature-1, K=7 model-card figure (nebius), which SGLang keeps (a length measured on vLLM does not carry over)
    measured = {2: 2.36, 3: 2.79, 4: 3.08, 5: 3.32, 6: 3.46, 7: 3.54}
    for k, v in measured.items():
        a = acc.predict_acceptance("eagle3", k, target="meta-llama/Llama-3.1-8B-Instruct", runtime="vllm")
        assert "vllm/issues/20780" in a.source and a.length == pytest.approx(v, rel=0.04)
    sglang = acc.predict_acceptance("eagle3", 3, target="meta-llama/Llama-3.1-8B-Instruct", runtime="sglang")
    assert "20780" not in sglang.source and "nebius" in sglang.source


def test_known_public_heads():
    head, src = acc.known_draft_head("meta-llama/Llama-3.1-8B-Instruct", "eagle3")
    assert head == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" and src.startswith("https://")
    assert acc.known_draft_head("Qwen/Qwen3-8B", "eagle3")[0] == "RedHatAI/Qwen3-8B-speculator.eagle3"
    assert acc.known_draft_head("meta-llama/Llama-3.1-8B-Instruct", "eagle")[0] == "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
    assert acc.known_draft_head("mistralai/Mistral-7B-Instruct-v0.3", "eagle3") is None


def test_speed_fields_take_workload_temperature_and_acceptance_length():
    inp = EngineInput(hf_config=load_config(LLAMA), draft_hf_config=load_config(HEAD3), gpu=H100,
                      max_model_len=8192,
                      speculative_config={"method": "eagle3", "model": "x", "num_speculative_tokens": 3})
    chat = perf.speed_fields(inp, None, 512, 128, 1)
    code = perf.speed_fields(inp, None, 512, 128, 1, workload="code")
    hot = perf.speed_fields(inp, None, 512, 128, 1, temperature=1.0)
    given = perf.speed_fields(inp, None, 512, 128, 1, acceptance_length=3.0)
    assert code["spec_speedup"] > chat["spec_speedup"] > hot["spec_speedup"]
    assert given["mean_acceptance_length"] == 3.0
    assert chat["spec_speedup_low"] < chat["spec_speedup"] < chat["spec_speedup_high"]
    assert 1 <= chat["best_num_speculative_tokens"] <= 8
    assert 0 < chat["break_even_acceptance_rate"] < 1
    with pytest.raises(EngineInputError) as err:
        perf.speed_fields(inp, None, 512, 128, 1, runtime="tgi")
    assert err.value.field == "runtime"


def test_a_validation_run_marks_the_efficiency_calibrated():
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192)
    r = perf.estimate_speed(inp, prompt_len=512, output_len=64, concurrency=1)
    assert r.efficiency_label == "fitted"
    perf.apply_measured_efficiency(H100, perf.efficiency_from_measurement(r, measured_itl_ms=r.itl_ms * 1.1,
                                                                          source="validation run"))
    again = perf.estimate_speed(inp, prompt_len=512, output_len=64, concurrency=1)
    assert again.efficiency_label == "calibrated"


def test_eagle_without_a_head_config_costs_the_public_head_or_refuses():
    # the public EAGLE-3 head for Llama-3.1-8B has exactly the shapes synthetic_eagle_head derives from the target
    real, syn = load_config(HEAD3), perf.synthetic_eagle_head(load_config(LLAMA), "eagle3")
    for key in ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "num_hidden_layers",
                "vocab_size", "draft_vocab_size"):
        assert syn[key] == real[key], key
    spec = {"method": "eagle3", "num_speculative_tokens": 3}
    named = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192, speculative_config=spec,
                        model_label="meta-llama/Llama-3.1-8B-Instruct")
    with_head = EngineInput(**{**named.model_dump(), "draft_hf_config": real,
                               "speculative_config": {**spec, "model": "x"}})
    a = perf.estimate_speed(named, prompt_len=512, output_len=128, concurrency=2, acceptance_length=2.5)
    b = perf.estimate_speed(with_head, prompt_len=512, output_len=128, concurrency=2, acceptance_length=2.5)
    assert a.spec.step.draft_gpu_ms == pytest.approx(b.spec.step.draft_gpu_ms, rel=1e-3)
    assert "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" in a.sources["draft"]
    unnamed = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192, speculative_config=spec)
    with pytest.raises(EngineInputError) as err:
        perf.estimate_speed(unnamed)
    assert err.value.field == "speculative_config" and "no public eagle3 head" in err.value.message


def test_sglang_tree_verifies_the_draft_tokens_and_drafts_topk_per_step():
    # SGLang --speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 6
    inp = EngineInput(hf_config=load_config(LLAMA), draft_hf_config=load_config(HEAD3), gpu=H100, max_model_len=8192,
                      speculative_config={"method": "eagle3", "model": "x", "num_speculative_tokens": 6})
    tree = perf.estimate_speed(inp, prompt_len=512, output_len=128, concurrency=2, acceptance_length=2.4,
                               runtime="sglang", speculative_num_steps=3, speculative_eagle_topk=4)
    assert tree.spec.verify.tokens == 2 * 6  # the root is one of the 6 draft tokens
    assert tree.spec.best_num_speculative_tokens is None  # the tree's shape is the user's
    chain3 = EngineInput(**{**inp.model_dump(), "speculative_config": {"method": "eagle3", "model": "x",
                                                                         "num_speculative_tokens": 3}})
    chain = perf.estimate_speed(chain3, prompt_len=512, output_len=128, concurrency=2, acceptance_length=2.4,
                                runtime="sglang")
    assert chain.spec.verify.tokens == 2 * 4
    # 3 drafter passes either way; the tree's passes carry 4 tokens per request (more compute, same bytes)
    assert chain.spec.step.draft_overhead_ms == tree.spec.step.draft_overhead_ms == 3 * perf.get_efficiency(
        H100, "sglang").draft_step_overhead_ms
    assert tree.spec.step.draft_gpu_ms > chain.spec.step.draft_gpu_ms
    assert tree.spec.speedup < chain.spec.speedup  # same acceptance, more work
    with pytest.raises(EngineInputError) as err:
        perf.estimate_speed(inp, speculative_eagle_topk=4)
    assert err.value.field == "speculative_num_steps"


# --- the base model's kernel-path and chunked-prefill terms ----------------------------------------------
def test_routed_expert_flops_run_at_the_moe_kernel_efficiency():
    m = qwen_moe_by_hand()
    eff = perf.get_efficiency(H100)
    assert eff.moe_compute is not None and eff.moe_compute < eff.compute
    inp = EngineInput(hf_config=load_config(QWEN_MOE), gpu=H100, max_model_len=4096)
    p = 2048
    r = perf.estimate_speed(inp, prompt_len=p, output_len=2, concurrency=1)
    c = load_config(QWEN_MOE)
    expert_active = m["layers"] * m["k"] * 3 * c["hidden_size"] * c["moe_intermediate_size"]
    moe_flops = 2 * expert_active * p
    peak = catalog(H100)["tflops_bf16"] * 1e12
    expected = (r.prefill.flops - moe_flops) / (peak * eff.compute) + moe_flops / (peak * eff.moe_compute)
    assert r.prefill.compute_ms == pytest.approx(expected * 1e3, rel=1e-6)


def test_prefills_of_other_requests_stall_the_decodes_by_their_compute_and_kv_traffic():
    """No memory/compute overlap (overlap_p = 1): a prompt riding in decode steps adds all of its compute
    and its KV writes/reads, and its all-reduces; each of C-1 other requests does so once per lifetime."""
    m = llama_by_hand()
    eff = perf.get_efficiency(H100)
    assert eff.overlap_p == 1
    inp = EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=8192)
    prompt, out, conc = 1024, 128, 4
    r = perf.estimate_speed(inp, prompt_len=prompt, output_len=out, concurrency=conc)
    peak, bw = catalog(H100)["tflops_bf16"] * 1e12, catalog(H100)["bandwidth_gbps"] * 1e9
    flops = 2 * m["matmul"] * prompt + 4 * m["layers"] * m["heads"] * m["hd"] * prompt * (prompt + 1) / 2
    stall_ms = (flops / (peak * eff.compute) + m["kv_per_token"] * prompt / (bw * eff.mem_bw)) * 1e3
    assert r.itl_ms == pytest.approx(r.decode_step_ms + (conc - 1) * stall_ms / (out - 1), rel=1e-3)


def test_prefill_in_groups_equals_the_chunk_by_chunk_sum():
    """A 16M-token prompt in chunks of 1 token must not loop 16M times: the grouped sum (at most
    PREFILL_GROUPS evaluations) equals the plain per-chunk sum, since each chunk's terms are linear in its
    end position for a full-attention model (Llama-3.1-8B, 2,048 chunks of 16 tokens checked by brute force)."""
    plan = perf.plan_from_engine(EngineInput(hf_config=load_config(LLAMA), gpu=H100, max_model_len=131072))
    s = perf._setup(plan, "vllm")
    mc, hw = s.target, s.hw
    grouped = perf.prefill_cost(mc, hw, prompt_len=2048 * 16 + 5, chunk=16)
    mem = comp = 0.0
    for i in range(2048):
        end = (i + 1) * 16
        mem += (mc.weight_bytes(16) + mc.kv_bytes(end)) / (hw.bandwidth * hw.eff.mem_bw)
        comp += perf._compute_seconds(mc, hw, 2 * mc.matmul_params * 16 + mc.attention_flops(end, 16), 16)
    mem += (mc.weight_bytes(5) + mc.kv_bytes(2048 * 16 + 5)) / (hw.bandwidth * hw.eff.mem_bw)
    comp += perf._compute_seconds(mc, hw, 2 * mc.matmul_params * 5 + mc.attention_flops(2048 * 16 + 5, 5), 5)
    assert grouped.memory_ms == pytest.approx(mem * 1e3, rel=1e-6)
    assert grouped.compute_ms == pytest.approx(comp * 1e3, rel=1e-6)


# --- where speculation stops paying: the whole curve, not its first dip -----------------------------------
def test_stops_paying_reads_the_whole_speedup_vs_concurrency_curve():
    dense = [(1, 1.6), (8, 1.3), (32, 1.02), (64, 0.9), (128, 0.8)]
    assert perf.stops_paying(dense) == (32, None)  # pays up to 32, loses above
    assert perf.stops_paying([(1, 1.5), (64, 1.1)]) == (None, None)  # still pays at the largest modelled
    assert perf.stops_paying([(1, 0.9), (64, 0.7)]) == (0, None)  # pays nowhere
    moe = [(1, 0.96), (4, 0.82), (16, 1.09), (32, 1.24), (96, 1.08), (128, 0.99)]
    assert perf.stops_paying(moe) == (96, 16)  # loses alone, pays from 16, stops above 96


def test_moe_target_loses_alone_and_pays_in_a_batch_where_the_plain_step_already_reads_most_experts():
    """Qwen3-30B-A3B (128 experts, top-8) with ngram k=3 at acceptance rate 0.25 (AL 1.75): alone, verifying
    4 tokens reads ~29.6 experts per layer against 8 for a plain step, so it loses; at 16 requests the plain step
    already reads ~82 and the 64-token verification ~126, so the extra bytes are small and it pays; far higher up
    the verification turns compute-bound and it loses again."""
    m = qwen_moe_by_hand()
    e, k = m["e"], m["k"]
    inp = EngineInput(hf_config=load_config(QWEN_MOE), gpu=H100, max_model_len=4096,
                      speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    one = perf.estimate_speed(inp, prompt_len=512, output_len=128, concurrency=1, acceptance_rate=0.25)
    sixteen = perf.estimate_speed(inp, prompt_len=512, output_len=128, concurrency=16, acceptance_rate=0.25)
    assert one.spec.verify.experts_touched == pytest.approx(e * (1 - (1 - k / e) ** 4), rel=1e-9)  # 29.6
    assert sixteen.decode.experts_touched == pytest.approx(e * (1 - (1 - k / e) ** 16), rel=1e-9)  # 82.4
    assert sixteen.spec.verify.experts_touched == pytest.approx(e * (1 - (1 - k / e) ** 64), rel=1e-9)  # 125.9
    assert one.spec.speedup < 1 < sixteen.spec.speedup
    curve = one.spec.speedup_vs_concurrency[3]
    paying = [c for c, v in curve if v >= 1]
    # the grid brackets each crossing; the answer is the crossing itself, the same whatever concurrency is asked
    grid = [c for c, _ in curve]
    first, last = min(paying), max(paying)
    pays_from, stops = one.spec.pays_from_concurrency, one.spec.stops_paying_above_concurrency
    assert grid[grid.index(first) - 1] < pays_from <= first and last <= stops < grid[grid.index(last) + 1]
    at = {c: perf.estimate_speed(inp, prompt_len=512, output_len=128, concurrency=c, acceptance_rate=0.25).spec
          for c in (pays_from - 1, pays_from, stops, stops + 1)}
    assert at[pays_from - 1].speedup < 1 <= at[pays_from].speedup and at[stops].speedup >= 1 > at[stops + 1].speedup
    assert (at[stops].pays_from_concurrency, at[stops].stops_paying_above_concurrency) == (pays_from, stops)
    assert any(f"loses below {pays_from} concurrent requests, pays from {pays_from} to {stops} and stops paying "
               f"above {stops}" in w for w in one.warnings)
    assert not any("does not pay at any concurrency" in w for w in one.warnings)


def test_sglang_speculative_step_adds_its_exposed_host_time():
    # (SGLang's cap of 48 running requests with speculation is the runtime's: tests/test_runtime_sglang.py)
    inp = EngineInput(hf_config=load_config(LLAMA), draft_hf_config=load_config(HEAD3), gpu=H100, max_model_len=8192,
                      speculative_config={"method": "eagle3", "model": "x", "num_speculative_tokens": 3})
    at32 = perf.estimate_speed(inp, prompt_len=512, output_len=128, concurrency=32, runtime="sglang",
                               acceptance_length=2.5)
    # the speculative step adds SGLang's exposed host time: fixed per step plus per running request
    eff = perf.get_efficiency(H100, "sglang")
    step = at32.spec.step
    assert step.spec_overhead_ms == pytest.approx(eff.spec_step_overhead_ms + 32 * eff.spec_cpu_ms_per_request)
    assert step.total_ms == pytest.approx(step.verify.total_ms + step.draft_gpu_ms + step.draft_overhead_ms
                                          + step.rejection_ms + step.spec_overhead_ms, rel=1e-9)


def test_an_mtp_figure_says_whose_mtp_it_was_measured_on():
    """The MTP base figure is DeepSeek-V3's (deepseek-v3-mtp, AL 1.875 at k=1): a DeepSeek target uses it plainly, another
    model's MTP layers (Qwen3-Next) get it with a note that it was measured on DeepSeek-V3's module."""
    ds = acc.predict_acceptance("mtp", 1, target="deepseek-ai/DeepSeek-R1")
    qn = acc.predict_acceptance("mtp", 1, target="Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert ds.length == qn.length == pytest.approx(1.875, abs=1e-3)
    assert not any("DeepSeek-V3's MTP" in n for n in ds.notes)
    assert any(n.startswith("no public MTP acceptance figure for Qwen/Qwen3-Next-80B-A3B-Instruct") for n in qn.notes)


def test_the_stop_sign_quotes_the_speedup_the_answer_shows():
    # the answer holds the speedup to 3 places (SpecResult.speedup = round(x, 3)) and shows it to 2: 0.5549 is held
    # as 0.555 and shown as 0.56, so the stop sign says 0.56 too (formatting 0.5549 directly would say 0.55)
    from calculator.engine import perf

    assert f"{round(0.5549, 3):.2f}" == "0.56" and f"{0.5549:.2f}" == "0.55"
    (line,) = perf.slowdown_warnings(1.8, 0.5549, 0.4449, 0.7)
    assert "(speedup 0.56x, range 0.45-0.70)" in line  # 0.4449 held as 0.445, shown 0.45


def test_best_k_is_zero_when_no_k_pays_and_the_argmax_when_one_does():
    """The best num_speculative_tokens is the k whose own estimate is fastest; when every k from 1 to 8 is slower
    than plain decoding (ngram at acceptance rate 0.3 and 256 clients on one H100) the answer is 0, serve without
    speculation, not the least slow k. Each k is estimated on its own here (the per-k speedups are not read from
    the search under test)."""
    def speedup(k: int, conc: int, rate: float) -> float:
        return perf.speed_fields(ngram(k), None, 512, 128, conc, acceptance_rate=rate)["spec_speedup"]

    lose = perf.speed_fields(ngram(3), None, 512, 128, 256, acceptance_rate=0.3)
    assert max(speedup(k, 256, 0.3) for k in range(1, 9)) < 1
    assert lose["best_num_speculative_tokens"] == 0
    assert any("serving without speculation is predicted faster" in w for w in lose["speed_warnings"])
    curves = perf.estimate_speed(ngram(3), None, prompt_len=512, output_len=128, concurrency=256,
                                 acceptance_rate=0.3).spec.speedup_vs_concurrency
    assert 0 not in curves and 3 in curves  # no curve is drawn for k = 0

    win = perf.speed_fields(ngram(3), None, 512, 128, 1, acceptance_rate=0.8)
    per_k = {k: speedup(k, 1, 0.8) for k in range(1, 9)}
    assert max(per_k.values()) > 1
    assert win["best_num_speculative_tokens"] == max(per_k, key=per_k.get)


# --- where speculation stops paying stays within what the speculative server runs at once ------------------------
QWEN_EAGLE3 = {"model": "Qwen/Qwen3-30B-A3B", "gpu": "H100", "concurrency": "128",
               "speculative_config": '{"method":"eagle3","num_speculative_tokens":3}'}


def _spec_plan(params: dict):
    from calculator.plan import make_plan
    from calculator.request import parse_request

    return make_plan(parse_request(params))


@pytest.mark.django_db
@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_the_speedup_curve_ends_at_the_speculative_servers_limit(runtime, monkeypatch):
    """Qwen3-30B-A3B with EAGLE-3 k=3 and 128 clients on one H100: the server runs only as many requests at once as
    its KV cache holds (prompt 1024 + output 128 = 1,152 tokens each), its max_num_seqs / --max-running-requests
    allows and, for vLLM, a full prefill budget of 8,192 tokens sustains with 4 tokens per decoding request per step
    (P + S x 4 with S = 127 / AL steps). The curve ends there and, as speculation still pays there, both runtimes
    answer null and say why, never a concurrency the server cannot run (vLLM said 294 above a limit of ~117)."""
    from django.core.cache import cache

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache.clear()
    plan = _spec_plan({**QWEN_EAGLE3, "runtime": runtime})
    sp = plan.speed.spec
    kv = plan.memory.kv_cache_tokens // (1024 + 128)
    if runtime == "vllm":
        seqs = plan.memory.resolved["max_num_seqs"]
        steps = 127 / sp.mean_acceptance_length
        budget = math.floor(8192 * steps / (1024 + steps * 4))
        limit = min(seqs, kv, budget, 1024)
    else:
        limit = min(plan.memory.plan.max_running_requests, kv, 1024)
    assert limit == kv < 128  # the KV cache binds in both (vLLM ~117, SGLang's smaller pool ~68)
    assert sp.concurrency_limit == limit and "the KV cache" in sp.concurrency_limit_reason
    for curve in sp.speedup_vs_concurrency.values():
        assert max(c for c, _ in curve) == limit  # no point beyond what the server runs at once
    curve = sp.speedup_vs_concurrency[3]
    assert dict(curve)[limit] >= 1  # still pays at the limit ...
    losing = [c for c, v in curve if v < 1]
    fields = perf.result_fields(plan.speed)
    stop, pays_from = fields["spec_stops_paying_above_concurrency"], fields["spec_pays_from_concurrency"]
    if not losing:  # ... so no stop within it
        assert stop is None and pays_from is None
    else:  # ... after a dip (vLLM: pays alone, loses at a few clients, where a plain step reads few experts)
        assert curve[0][1] >= 1 and stop < min(losing) and max(losing) < pays_from <= limit
        assert any(f"pays again from {pays_from}" in w for w in fields["speed_warnings"])
    assert any(f"does not stop paying up to the server's limit of {limit} concurrent requests" in w
               for w in fields["speed_warnings"])
    src = fields["speed_sources"]["spec_stops_paying_above_concurrency"]
    assert "perf.stops_paying" in src and f"= {limit} here" in src and "null: no paying stretch ends" in src
    assert "spec_pays_from_concurrency" in fields["speed_sources"]
    # an independent run at the limit itself: the server runs all of them, and speculation pays there
    at_limit = _spec_plan({**QWEN_EAGLE3, "runtime": runtime, "concurrency": str(limit)}).speed
    assert at_limit.effective_concurrency == limit and at_limit.spec.speedup >= 1


def test_the_prefill_budget_with_drafts_limits_the_speculative_curve():
    """vLLM with --max-num-batched-tokens 2048, prompts of 2,048 and outputs of 128 tokens, ngram k=3 at a given mean
    acceptance length 2.5: a decoding request takes 4 of the budget's tokens per step for S = 127 / 2.5 = 50.8 steps,
    so a full budget keeps floor(2048 x 50.8 / (2048 + 50.8 x 4)) = 46 decoding at once (the plain server: floor(2048
    x 127 / 2175) = 119, so the 64 clients all run without drafts). The curve ends at 46, and the chart marks the
    64 clients at the 46 the speculative server runs."""
    from calculator.web.charts import speedup_concurrency_chart_for, speedup_concurrency_table

    inp = ngram(3, max_num_batched_tokens=2048)
    r = perf.estimate_speed(inp, prompt_len=2048, output_len=128, concurrency=64, acceptance_length=2.5)
    steps = 127 / 2.5
    want = math.floor(2048 * steps / (2048 + steps * 4))
    assert want == 46 and r.effective_concurrency == 64 == min(64, math.floor(2048 * 127 / 2175))
    assert r.spec.concurrency_limit == want
    reason = r.spec.concurrency_limit_reason
    assert "prefill token budget" in reason and "46 decoding" in reason
    assert [c for c, _ in r.spec.speedup_vs_concurrency[3]][-1] == want
    assert all(c <= want for curve in r.spec.speedup_vs_concurrency.values() for c, _ in curve)
    stop = r.spec.stops_paying_above_concurrency
    assert stop is None or stop <= want
    chart = speedup_concurrency_chart_for(r.spec, 64)
    assert chart["layer"][2]["data"]["values"] == [{"concurrency": 46, "clients": 64}]
    table = speedup_concurrency_table(chart)
    assert table["clients"] == 64 and [row["concurrency"] for row in table["rows"] if row["current"]] == [46]


def test_the_compute_bound_warning_names_the_device_kind():
    """The verification pass's compute-bound warning says where it turns so: on an H100 "this GPU", on vLLM's CPU
    build (the catalog's CPU row) "this CPU" (Qwen3-0.6B: its weights fit the CPU row's memory)."""
    def warning(gpu: str) -> str:
        inp = EngineInput(hf_config=load_config("Qwen__Qwen3-0.6B.json"), gpu=gpu, max_model_len=8192,
                          speculative_config={"method": "ngram", "num_speculative_tokens": 3})
        r = perf.estimate_speed(inp, prompt_len=16, output_len=2, concurrency=256, acceptance_rate=0.5)
        [w] = [w for w in r.warnings if "compute-bound (it turns so above" in w]
        return w

    assert "tokens on this GPU)" in warning(H100)
    cpu = warning("CPU")
    assert "tokens on this CPU)" in cpu and "GPU" not in cpu
