"""The AMD Instinct (ROCm) efficiency rows: which GPUs get them, and a decode step's terms computed by hand from the
row's fitted figures (layer_us 100 µs, all-reduce latency 60 µs, 80 % of HBM bandwidth; benchmarks/rocm_speed_fit.py)
and the MI300X datasheet (5.3 TB/s, 448 GB/s per direction to each peer)."""
from __future__ import annotations

import pytest

from calculator.engine import EngineInput, EngineInputError
from calculator.engine import perf
from calculator.engine.gpus import get_gpu

from .conftest import load_config

MI300X = "AMD Instinct MI300X"
H100 = "NVIDIA H100 80GB HBM3"
LLAMA = "meta-llama__Llama-3.1-8B-Instruct.json"


@pytest.fixture(autouse=True)
def _no_measured_overrides():
    perf.reset_measured_efficiency()
    yield
    perf.reset_measured_efficiency()


def test_mi300x_gets_the_amd_instinct_row_and_h100_does_not():
    amd = perf.EFFICIENCY[("vllm", perf.AMD_INSTINCT)]
    hw = perf.hardware(get_gpu(MI300X), None, "vllm")
    assert hw.eff is amd and hw.eff.label == "fitted" and "speed-070" in hw.eff.source
    assert perf.get_efficiency(MI300X) is amd  # by catalog name too (the validator's calibration reads this)
    assert perf.hardware(get_gpu(H100), None, "vllm").eff is perf.EFFICIENCY[("vllm", "*")]
    r = perf.estimate_speed(EngineInput(hf_config=load_config(LLAMA), gpu=MI300X, max_model_len=8192),
                            prompt_len=1024, output_len=128, concurrency=1)
    assert r.efficiency_label == "fitted"
    assert not any("is assumed" in w for w in r.warnings)


def test_other_amd_gpus_and_runtimes():
    # CDNA4: the AMD row's figures, but labelled assumed (the records are MI300X / CDNA3 only)
    mi355 = perf.hardware(get_gpu("AMD Instinct MI355X"), None, "vllm").eff
    assert (mi355.layer_us, mi355.allreduce_latency_us, mi355.mem_bw) == (100.0, 60.0, 0.8)
    assert mi355.label == "assumed" and "CDNA4" in mi355.source
    # a consumer Radeon: no AMD record covers it, so the * row, labelled assumed as before
    radeon = perf.hardware(get_gpu("AMD Radeon RX 7900 XTX"), None, "vllm").eff
    star = perf.EFFICIENCY[("vllm", "*")]
    assert (radeon.layer_us, radeon.allreduce_latency_us, radeon.mem_bw) == (star.layer_us, star.allreduce_latency_us,
                                                                             star.mem_bw)
    assert radeon.label == "assumed" and "NVIDIA GPUs only" in radeon.source
    # SGLang on MI300X: the same three terms, labelled assumed like SGLang's * row
    sgl = perf.hardware(get_gpu(MI300X), None, "sglang").eff
    assert sgl is perf.EFFICIENCY[("sglang", perf.AMD_INSTINCT)] and sgl.label == "assumed"
    assert (sgl.layer_us, sgl.allreduce_latency_us, sgl.mem_bw) == (100.0, 60.0, 0.8)
    # llama.cpp has no AMD row: its * row
    assert perf.hardware(get_gpu(MI300X), None, "llama.cpp").eff.layer_us == perf.EFFICIENCY[("llama.cpp", "*")].layer_us


def test_mi300x_tp2_decode_step_by_hand():
    """Llama-3.1-8B, bf16, TP2 on two MI300X, batch 1: the fixed part of a decode step is the step overhead plus
    32 layers × 100 µs; the communication is 2 all-reduces per layer of one token's hidden state (4096 × 2 B),
    each 60 µs + ring transfer 2 × (2−1)/2 × 8192 B / 448 GB/s."""
    c = load_config(LLAMA)
    assert (c["num_hidden_layers"], c["hidden_size"]) == (32, 4096)
    inp = EngineInput(hf_config=c, gpu=MI300X, max_model_len=8192, tensor_parallel_size=2)
    r = perf.estimate_speed(inp, prompt_len=1024, output_len=2, concurrency=1)
    assert r.decode.overhead_ms == pytest.approx(0.3 + 32 * 0.100, rel=1e-9)  # 3.5 ms
    per_allreduce_s = 60e-6 + 1 * 8192 / 448e9
    assert r.decode.comm_ms == pytest.approx(2 * 32 * per_allreduce_s * 1e3, rel=1e-9)  # 3.8412 ms
    # memory term: the weights and KV one GPU reads, at 80 % of 5.3 TB/s
    assert r.decode.memory_ms == pytest.approx((r.decode.bytes_weights + r.decode.bytes_kv) / (5300e9 * 0.8) * 1e3,
                                               rel=1e-9)
    # on an H100 the same step pays the NVIDIA row's 60 µs per layer
    r_h = perf.estimate_speed(EngineInput(hf_config=c, gpu=H100, max_model_len=8192, tensor_parallel_size=2),
                              prompt_len=1024, output_len=2, concurrency=1)
    assert r_h.decode.overhead_ms == pytest.approx(0.3 + 32 * 0.060, rel=1e-9)


@pytest.mark.django_db
def test_the_amd_prefill_warning_states_the_fitted_records_errors():
    """The sentence every AMD Instinct answer carries is recomputed here from the public MI300X records the row was
    fitted on (benchmarks/rocm_speed_fit.py): TTFT 38-88 % below the measured, tok/s at most 36 % above. If the row
    or the data change, this fails until the sentence is brought up to date."""
    import importlib.util
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "rocm_speed_fit.py"
    spec = importlib.util.spec_from_file_location("rocm_speed_fit", path)
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    ttft, tok_s = [], []
    for rec in fit.load():
        if not rec["fit"]:
            continue
        try:
            prepared = fit.prepare(rec)
        except EngineInputError:  # refused by the product (sparse attention): not scored, as the script says
            continue
        err = fit.errors(fit.predict(prepared, rec["runtime"],
                                     perf.EFFICIENCY[(rec["runtime"], perf.AMD_INSTINCT)]), rec)
        ttft += [err["ttft"]] if "ttft" in err else []
        tok_s += [err["tok_s"]] if "tok_s" in err else []
    assert len(ttft) == 9 and len(tok_s) == 6
    below, above, up = re.search(r"TTFT was from (\d+) % below to (\d+) % above.*tok/s up to (\d+) % above",
                                 perf.AMD_PREFILL_WARNING).groups()
    assert round(-100 * min(ttft)) == int(below) and round(100 * max(ttft)) == int(above)
    assert round(100 * max(tok_s)) == int(up)
    mi300x = perf.estimate_speed(EngineInput(hf_config=load_config("meta-llama__Llama-3.1-8B-Instruct.json"),
                                             gpu="MI300X", max_model_len=8192))
    assert perf.AMD_PREFILL_WARNING in mi300x.warnings
    h100 = perf.estimate_speed(EngineInput(hf_config=load_config("meta-llama__Llama-3.1-8B-Instruct.json"),
                                           gpu="H100", max_model_len=8192))
    assert perf.AMD_PREFILL_WARNING not in h100.warnings


def test_an_mi300x_answer_says_its_precision_is_for_decode_only():
    """The fitted MI300X row covers TPOT only: its precision text says so, not the NVIDIA fit's ±10 / ±30 %."""
    inp = EngineInput(hf_config=load_config("meta-llama__Llama-3.1-8B-Instruct.json"), gpu="MI300X", max_model_len=8192)
    r = perf.estimate_speed(inp)
    assert r.efficiency_label == "fitted" and r.efficiency_precision == perf.PRECISION_AMD
    assert "decode only" in perf.speed_fields(inp, None, 1024, 128, 1)["efficiency_precision"]
    h100 = perf.estimate_speed(inp.model_copy(update={"gpu": "H100"}))
    assert h100.efficiency_precision == perf.PRECISION["fitted"]


@pytest.mark.django_db
def test_the_recipe_runs_prefill_rate_read_from_their_tpot():
    """What the warning's "a fifth to a third of the FP8 datasheet rate" rests on, by hand (benchmarks/rocm_speed_fit.py
    docstring): speed-070 (Mistral-Medium-3.5 FP8, TP1 MI300X, c=32, 1024/1024, TPOT 55.2 ms) runs two 16384-token
    prefill steps per wave (vLLM's API-server max_num_batched_tokens on a >= 160 GiB GPU, engine/arg_utils.py
    get_batch_defaults), and each request rides through about one of them while decoding, so one such step takes
    1023 x 55.2 ms - 1022 x the row's 32-request decode step. Its FLOPs: 2 x 16384 tokens x the text model's matmul
    parameters (88 layers x (2 x 12288^2 + 2 x 12288 x 1024 + 3 x 12288 x 28672) + lm_head 131072 x 12288), timed
    against MI300X's 2615 dense FP8 TFLOP/s (per-tensor FP8 runs hipBLASLt torch._scaled_mm)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "rocm_speed_fit.py"
    spec = importlib.util.spec_from_file_location("rocm_speed_fit", path)
    fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit)
    rec = next(r for r in fit.load() if r["id"] == "speed-070")
    plan, _ = fit.prepare(rec)
    s = perf._setup(plan, "vllm")
    assert s.chunk == 16384 and s.hw.compute_dtype == "fp8" and s.hw.peak_flops == 2615e12
    params = 88 * (2 * 12288 ** 2 + 2 * 12288 * 1024 + 3 * 12288 * 28672) + 131072 * 12288
    assert s.target.matmul_params == pytest.approx(params, rel=1e-3)  # 123.41 G
    step = perf.step_cost(s.target, s.hw, requests=32, tokens_per_request=1, context=1024 + 512).total_ms
    prefill_step_s = (1023 * 55.2 - 1022 * step) / 1e3
    share = 2 * 16384 * params / prefill_step_s / 2615e12
    # 0.31 with the first AMD row's 50.2 ms step (layer_us 120), 0.22 with the refit row's (layer_us 100): the reading
    # leans on the row's own decode step; either way far below the 0.55 the row assumes
    assert 0.2 < share < 0.38
    assert s.hw.eff.compute == 0.55 and "a fifth to a third of the FP8 datasheet rate" in perf.AMD_PREFILL_WARNING
