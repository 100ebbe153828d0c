"""The validator's speed report on vLLM's CPU build: the acceptance length as measured (not rounded), vLLM's own
latency from /metrics, requests whose stream arrived in one burst, and calibration from such a run.

Real values: the counters and per-request latencies are those of a README validation run on the 2-core development
host (run 04084b71, vLLM 0.32.0 CPU build, tiny-random/llama, ngram k=3: its text report showed a measured mean
acceptance length of "3" where its own summary line said 2.78), the latency medians those benchmarks/
cpu_speed_check.py measured there."""
from __future__ import annotations

import pytest

from calculator.engine import perf
from validator import bench, calibration, report, runner
from validator.config import build_configuration
from validator.models import ValidationRun

# Per-repeat /metrics deltas of the speculative phase of run 04084b71 (8 repeats): drafts, drafted, accepted tokens
REAL_SPEC_REPEATS = [(214, 599, 385)] + [(216, 605, 385)] * 7
HOST = {"platform": "cpu", "cpu_model": "test CPU", "cpu_count": 2, "memory_total_bytes": 2**34}


@pytest.fixture(autouse=True)
def _clean(no_calibration, worker_vllm_0_32):
    """Every test here starts and ends with no run's calibration installed, on a worker with vLLM 0.32.0
    (tests/conftest.py)."""


def _spec_repeats():
    return [{"bench": {"mean_tpot_ms": 2.0, "output_throughput": 1000.0},
             "spec_decode": {"num_drafts": d, "num_draft_tokens": t, "num_accepted_tokens": a,
                             "acceptance_rate": a / t, "mean_acceptance_length": 1 + a / d,
                             "per_position": [0.7, 0.56, 0.5]}} for d, t, a in REAL_SPEC_REPEATS]


@pytest.mark.django_db
def test_the_text_report_shows_the_measured_acceptance_length_with_its_decimals():
    """1 + 3080 accepted / 1726 drafts = 2.784: the table printed it as "3" (every row in tokens was formatted
    as a whole count, like kv_cache_tokens)."""
    cfg = build_configuration({"model": "tiny-random/llama", "gpu": "CPU", "max_model_len": "1024",
                               "speculative_config": '{"method":"ngram","num_speculative_tokens":3}'})
    spec_agg = bench.aggregate(_spec_repeats())
    assert (spec_agg["spec_decode"]["num_drafts"], spec_agg["spec_decode"]["num_accepted_tokens"]) == (1726, 3080)
    base = {"aggregate": {"mean_ttft_ms": 145.0, "median_ttft_ms": 132.4, "median_e2el_ms": 202.5,
                          "mean_tpot_ms": 1.98, "output_throughput": 873.9}}
    rows = bench.speed_comparison(cfg, base, {"aggregate": spec_agg})
    row = next(r for r in rows if r["field"] == "mean_acceptance_length")
    assert row["measured"] == pytest.approx(1 + 3080 / 1726)
    rows.insert(0, {"field": "kv_cache_tokens", "unit": "tokens", "predicted": 1048576.0, "measured": 1048576,
                    "error": 0.0, "error_pct": 0.0, "note": ""})
    run = ValidationRun(configuration=cfg, status="done",
                        measured={"comparison": rows, "phases": {"speculative": {"aggregate": spec_agg}}})
    text = report.format_text(report.summary(run))
    line = next(x for x in text.splitlines() if x.startswith("mean_acceptance_length"))
    assert "2.78" in line.split() and "3" not in line.split()
    assert "1,048,576" in next(x for x in text.splitlines() if x.startswith("kv_cache_tokens"))
    assert "mean acceptance length 2.78" in text  # the phase line agrees with the table


def _histogram(name: str, total_s: float, count: int) -> str:
    # vLLM's exposition of one histogram (prometheus_client: _bucket, _count, _sum, labels engine / model_name)
    labels = 'engine="0",model_name="tiny-random/llama"'
    return (f"# HELP vllm:{name} x\n# TYPE vllm:{name} histogram\n"
            f'vllm:{name}_bucket{{{labels},le="0.001"}} 0.0\nvllm:{name}_bucket{{{labels},le="+Inf"}} {count}.0\n'
            f"vllm:{name}_count{{{labels}}} {count}.0\nvllm:{name}_sum{{{labels}}} {total_s}\n")


def test_vllms_own_latency_comes_from_its_histogram_deltas():
    """Mean over one benchmark = (sum after - sum before) / (count after - count before): 16 requests, 752
    inter-token gaps (16 x 47)."""
    before = runner.parse_metrics(_histogram("time_to_first_token_seconds", 0.5, 20)
                                  + _histogram("inter_token_latency_seconds", 2.0, 940))
    after = runner.parse_metrics(_histogram("time_to_first_token_seconds", 0.5 + 16 * 0.0071, 36)
                                 + _histogram("inter_token_latency_seconds", 2.0 + 752 * 0.00195, 1692))
    got = runner.engine_latency(before, after)
    assert got["engine_ttft_ms"] == pytest.approx(7.1) and got["engine_itl_ms"] == pytest.approx(1.95)
    assert "engine_e2e_ms" not in got  # no such histogram in this exposition
    assert runner.engine_latency({}, {}) == {}  # a server without vLLM's histograms (SGLang, a stand-in)


def test_requests_whose_stream_came_in_one_burst_are_counted():
    """Repeat 4 of 8 of the README run's baseline (per-request TTFT and end-to-end latency, ms): 8 of its 16
    requests came in one burst (TTFT >= 80 % of the latency). Its medians (82.0 ms TTFT, 118.9 ms end to end) passed
    the old median rule, so its client TPOT (a mixture of steady and ~0 ms streams) was compared and calibrated on."""
    ttfts = [45.176, 29.49, 47.124, 34.34, 119.898, 119.972, 120.159, 120.338, 16.846, 19.881, 19.875, 19.872,
             117.579, 117.515, 117.684, 116.968]
    e2els = [211.112, 210.863, 211.041, 198.31, 120.023, 120.09, 120.278, 120.449, 116.039, 116.12, 116.303, 116.582,
             117.687, 117.625, 117.803, 117.094]
    assert bench.burst_share(ttfts, e2els) == 8 / 16
    summary = bench._summary({"ttfts": [t / 1e3 for t in ttfts], "latencies": [e / 1e3 for e in e2els],
                              "median_ttft_ms": 82.046, "median_e2el_ms": 118.913})
    assert summary["burst_share"] == 0.5
    assert not bench.per_token_measurable(summary)
    assert bench.per_token_measurable({k: v for k, v in summary.items() if k != "burst_share"})  # the old rule
    assert bench.burst_share([], []) is None


@pytest.mark.django_db
def test_a_bursty_run_compares_and_calibrates_on_vllms_own_inter_token_latency():
    """The README profile as benchmarks/cpu_speed_check.py measured it (tiny-random/llama, 128/48, concurrency 4,
    medians of 5 runs): 69 % of the requests in one burst, client TPOT 0.66 ms against vLLM's own inter-token
    latency 2.11 ms. The report says so and calibration takes vLLM's figure (the client's 0.66 ms would have cut the
    fixed step cost to a third), leaving TTFT alone."""
    cfg = build_configuration({"model": "tiny-random/llama", "gpu": "CPU", "max_model_len": "1024"})
    agg = {"mean_ttft_ms": 119.2, "median_ttft_ms": 97.0, "median_e2el_ms": 150.0, "mean_tpot_ms": 0.66,
           "output_throughput": 1156.9, "burst_share": 0.69, "engine_ttft_ms": 12.96, "engine_itl_ms": 2.11}
    rows = {r["field"]: r for r in bench.speed_comparison(cfg, {"aggregate": agg}, None)}
    assert rows["tpot_ms"]["measured"] is None and "69% of the requests" in rows["tpot_ms"]["note"]
    assert rows["engine_itl_ms"]["measured"] == 2.11
    assert rows["engine_itl_ms"]["predicted"] == rows["tpot_ms"]["predicted"]
    assert rows["ttft_ms"]["measured"] == 119.2 and "own mean TTFT (/metrics): 13.0 ms" in rows["ttft_ms"]["note"]
    c = calibration.from_run(cfg, {"aggregate": agg}, HOST)
    assert c["measured_tpot_ms"] == 2.11 and c["measured_ttft_ms"] is None
    assert c["tpot_after_ms"] == pytest.approx(2.11, rel=0.01)
    assert "/metrics" in c["tpot_source"] and c["ttft_source"].startswith("not calibrated")


@pytest.mark.django_db
def test_calibration_puts_what_ttft_still_differs_by_into_the_api_servers_part():
    """A run whose stream was steady (no bursts): TPOT from the client, and the TTFT the fitted decode terms leave
    unexplained goes into ttft_fixed_ms, so the calibrated row reproduces both."""
    cfg = build_configuration({"model": "tiny-random/llama", "gpu": "CPU", "max_model_len": "1024"})
    agg = {"mean_ttft_ms": 60.0, "median_ttft_ms": 55.0, "median_e2el_ms": 160.0, "mean_tpot_ms": 2.4,
           "burst_share": 0.0, "engine_itl_ms": 2.4}
    c = calibration.from_run(cfg, {"aggregate": agg}, HOST)
    assert c["tpot_after_ms"] == pytest.approx(2.4, rel=0.01)
    assert c["ttft_after_ms"] == pytest.approx(60.0, rel=0.01)
    assert c["efficiency"]["ttft_fixed_ms"] > perf.EFFICIENCY[("vllm", "CPU")].ttft_fixed_ms


@pytest.mark.django_db
def test_the_next_runs_prediction_uses_the_calibration_and_says_so():
    """README's second validation (after the first finished): its speed prediction is the calibrated one, and the
    report names the run it came from."""
    from django.utils import timezone

    from calculator.engine.schemas import EngineInput

    cfg = build_configuration({"model": "tiny-random/llama", "gpu": "CPU", "max_model_len": "1024"})
    assert bench.speed_basis(cfg)["label"] == "assumed"
    agg = {"mean_ttft_ms": 119.2, "median_ttft_ms": 97.0, "median_e2el_ms": 150.0, "mean_tpot_ms": 0.66,
           "burst_share": 0.69, "engine_itl_ms": 3.3}
    first = ValidationRun.objects.create(configuration=cfg, status="done", finished_at=timezone.now(),
                                         measured={"calibration": calibration.from_run(cfg, {"aggregate": agg}, HOST)})
    calibration.apply_latest(force=True)
    basis = bench.speed_basis(cfg)
    assert basis["label"] == "calibrated" and basis["source"].startswith(f"calibrated from run {str(first.pk)[:8]}")
    assert "(vLLM /metrics) 3.30 ms" in basis["source"] and "TTFT not calibrated" in basis["source"]
    p = cfg["profile"]
    fields = perf.speed_fields(EngineInput(**cfg["engine_input"]), None, prompt_len=p["input_len"],
                               output_len=p["output_len"], concurrency=p["concurrency"])
    assert fields["itl_ms"] == pytest.approx(3.3, rel=0.01)
    second = ValidationRun(configuration=cfg, status="done", measured={"speed_model": basis, "comparison": [
        {"field": "tpot_ms", "unit": "ms", "predicted": fields["itl_ms"], "measured": None, "error": None,
         "error_pct": None, "note": ""}]})
    text = report.format_text(report.summary(second))
    assert f"speed prediction: calibrated from run {str(first.pk)[:8]}" in text


@pytest.mark.django_db
def test_the_run_page_says_which_run_calibrated_its_speed_prediction(client):
    from django.utils import timezone

    cfg = build_configuration({"model": "tiny-random/llama", "gpu": "CPU", "max_model_len": "1024"})
    agg = {"mean_ttft_ms": 149.9, "median_ttft_ms": 132.3, "median_e2el_ms": 189.8, "mean_tpot_ms": 0.9,
           "burst_share": 0.52, "engine_ttft_ms": 35.6, "engine_itl_ms": 2.85}
    first = ValidationRun.objects.create(configuration=cfg, status="done", finished_at=timezone.now(),
                                         measured={"calibration": calibration.from_run(cfg, {"aggregate": agg}, HOST)})
    calibration.apply_latest(force=True)
    rows = bench.speed_comparison(cfg, {"aggregate": agg}, None)
    second = ValidationRun.objects.create(configuration=cfg, status="done", finished_at=timezone.now(),
                                          measured={"speed_model": bench.speed_basis(cfg), "comparison": rows})
    html = " ".join(client.get(second.get_absolute_url()).content.decode().split())
    assert f"Speed prediction: calibrated from run {str(first.pk)[:8]} (" in html
    assert 'data-field="engine_itl_ms"' in html and "52% of the requests" in html
    first_html = " ".join(client.get(first.get_absolute_url()).content.decode().split())
    assert "TTFT not calibrated: 52% of the requests" in first_html
