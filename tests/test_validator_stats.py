"""Paired statistics and the keep / disable / inconclusive verdict (validator.stats, validator.bench)."""
import math

import pytest

from validator import bench, stats


def test_paired_change_is_the_geometric_mean_ratio_with_an_interval_around_it():
    b = [100.0, 110.0, 95.0, 105.0, 102.0, 98.0]
    s = [140.0, 150.0, 137.0, 149.0, 141.0, 139.0]
    c = stats.paired_change(b, s)
    # by hand: exp(mean(log(s/b))) - 1
    expected = 100 * (math.exp(sum(math.log(y / x) for x, y in zip(b, s)) / 6) - 1)
    assert c["change_pct"] == pytest.approx(expected)
    assert c["n"] == 6
    ratios = [100 * (y / x - 1) for x, y in zip(b, s)]
    assert min(ratios) <= c["ci_low_pct"] < c["change_pct"] < c["ci_high_pct"] <= max(ratios)
    # six pairs all the same sign: the exact two-sided signed-rank p is 2 / 2**6
    assert c["wilcoxon_p"] == pytest.approx(2 / 64)
    # the same numbers give the same interval (fixed bootstrap seed)
    assert stats.paired_change(b, s) == c


def test_paired_change_without_enough_pairs_has_no_interval():
    c = stats.paired_change([10.0, None], [12.0, 13.0])
    assert c["n"] == 1 and c["ci_low_pct"] is None and c["change_pct"] == pytest.approx(20.0)


def _pairs(base_tok, spec_tok, base_ttft=50.0, spec_ttft=50.0, base_p95=500.0, spec_p95=500.0):
    return [({"output_throughput": bt, "median_ttft_ms": base_ttft * (1 + i / 100), "p95_e2el_ms": base_p95},
             {"output_throughput": st, "median_ttft_ms": spec_ttft * (1 + i / 100), "p95_e2el_ms": spec_p95})
            for i, (bt, st) in enumerate(zip(base_tok, spec_tok))]


BASE = [100.0, 104.0, 98.0, 101.0, 99.0, 103.0]
GOOD = {"acceptance_rate": 0.7, "mean_acceptance_length": 3.1}


def test_a_clear_speedup_is_kept():
    v = stats.decide(_pairs(BASE, [150.0, 157.0, 149.0, 150.0, 151.0, 152.0]), GOOD, 2**30, 16 * 2**30)
    assert v["verdict"] == "keep" and v["keep"] and v["stop_signs"] == []
    assert v["headline"].startswith("Keep speculative decoding")
    assert v["differences"]["output_throughput"]["ci_low_pct"] > stats.PRACTICAL_EFFECT_PCT


def test_a_change_inside_the_noise_is_inconclusive_and_says_so():
    v = stats.decide(_pairs(BASE, [104.0, 99.0, 103.0, 98.0, 103.0, 100.0]), GOOD, 2**30, 16 * 2**30)
    assert v["verdict"] == "inconclusive"
    assert "noise" in v["headline"]


def test_a_clear_slowdown_with_low_acceptance_is_disabled_naming_the_stop_signs():
    low = {"acceptance_rate": 0.1, "mean_acceptance_length": 1.3}
    v = stats.decide(_pairs(BASE, [70.0, 72.0, 69.0, 71.0, 70.0, 73.0]), low, 2**30, 16 * 2**30)
    assert v["verdict"] == "disable"
    assert stats.STOP_DECODE in v["stop_signs"] and stats.STOP_LOW_ACCEPTANCE in v["stop_signs"]


def test_a_speedup_that_costs_first_token_time_or_memory_is_disabled():
    faster = [150.0, 157.0, 149.0, 150.0, 151.0, 152.0]
    v = stats.decide(_pairs(BASE, faster, spec_ttft=80.0), GOOD, 2**30, 16 * 2**30)
    assert v["verdict"] == "disable" and v["stop_signs"] == [stats.STOP_TTFT]
    v = stats.decide(_pairs(BASE, faster), GOOD, 15 * 2**30, 16 * 2**30)
    assert v["verdict"] == "disable" and v["stop_signs"] == [stats.STOP_MEMORY]


def test_paired_verdict_pairs_repeat_i_of_each_phase():
    """The run's phases hold the repeats in pair order; a tiny CPU model streams each request in one burst
    (TTFT ~ E2EL), so TPOT is reported but not used."""
    def phase(toks, spec=None):
        reps = [{"bench": {"output_throughput": t, "median_ttft_ms": 180.0, "median_e2el_ms": 181.0,
                           "median_tpot_ms": 0.003, "p95_e2el_ms": 190.0}, "spec_decode": spec} for t in toks]
        return {"repeats": reps, "aggregate": bench.aggregate(reps), "peak_memory_bytes": 2**30}
    sd = {"num_drafts": 10, "num_draft_tokens": 30, "num_accepted_tokens": 21, "per_position": [0.8, 0.7, 0.6]}
    measured = {"phases": {"baseline": phase(BASE), "speculative": phase([t * 1.5 for t in BASE], sd)}}
    v = bench.paired_verdict(measured, {"platform": "cpu", "memory_total_bytes": 64 * 2**30})
    assert v["verdict"] == "keep"
    assert v["differences"]["output_throughput"]["change_pct"] == pytest.approx(50.0)
    assert v["differences"]["median_tpot_ms"]["used"] is False
    assert v["acceptance"]["acceptance_rate"] == pytest.approx(0.7)
