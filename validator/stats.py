"""Paired statistics and the keep / disable / inconclusive verdict of a validation run.

A run alternates baseline and speculation phases (A B A B ...) on the same seeded prompts, context and
concurrency, so repeat ``i`` of the baseline and repeat ``i`` of the speculation form a pair that saw the
same traffic and (nearly) the same machine state. For each metric the effect is the mean over pairs of
``log(speculative / baseline)``, reported as a relative change ``exp(mean) - 1`` in percent; its 95 %
confidence interval comes from ``scipy.stats.bootstrap`` (``paired=True``, BCa, fixed ``random_state``,
so the same numbers give the same interval). The Wilcoxon signed-rank test
(``scipy.stats.wilcoxon``, exact for small samples) is reported beside it.

The verdict follows the field guide's "Signal / Good sign / Stop sign" table and its benchmark sequence
("keep the feature only when the improvement persists"):

* **keep**: decode improves — output tok/s higher, its whole interval above ``+PRACTICAL_EFFECT_PCT`` —
  and no stop sign is established.
* **disable**: a stop sign is established: output tok/s lower (interval below ``-PRACTICAL_EFFECT_PCT``);
  TTFT or p95 end-to-end latency higher (interval above ``+PRACTICAL_EFFECT_PCT``); peak memory above ``MEMORY_NEAR_LIMIT`` of the limit; or acceptance below
  ``LOW_ACCEPTANCE_RATE`` without a decode gain ("low acceptance adds overhead").
* **inconclusive**: anything else; the summary states the effect and the noise (the interval's
  half-width, and the baseline's own repeat-to-repeat variation).

``PRACTICAL_EFFECT_PCT`` (5 %) and ``LOW_ACCEPTANCE_RATE`` (30 %) are product choices, not fits: a change
smaller than 5 % is within what a different prompt mix or a busy neighbour moves, and the field guide gives
no number for "low". ``MEMORY_NEAR_LIMIT`` (90 %) is the near-OOM line the previous verdict used.
"""
from __future__ import annotations

import math
import statistics
from typing import Any

CONFIDENCE = 0.95
PRACTICAL_EFFECT_PCT = 5.0
LOW_ACCEPTANCE_RATE = 0.3
MEMORY_NEAR_LIMIT = 0.9
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0
MIN_PAIRS = 3

# (key in a repeat's bench summary, label, higher is better)
METRICS: tuple[tuple[str, str, bool], ...] = (
    ("output_throughput", "output tok/s", True),
    ("cpu_ms_per_output_token", "server CPU time per output token", False),
    ("median_tpot_ms", "TPOT p50 (time per output token)", False),
    ("median_ttft_ms", "TTFT p50", False),
    ("p95_e2el_ms", "end-to-end latency p95", False),
    ("p95_itl_ms", "ITL p95", False),
    ("median_itl_ms", "ITL p50", False),
)

STOP_LOW_ACCEPTANCE = "Low acceptance adds overhead"
STOP_TTFT = "First token is slower than baseline"
STOP_DECODE = "Decode is slower than baseline"
STOP_P95 = "Worse tail latency (p95)"
STOP_MEMORY = "Near OOM: peak memory close to the limit"


def paired_change(baseline: list[float], speculative: list[float], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Relative change speculative vs baseline over paired repeats, with a bootstrap interval.

    ``baseline[i]`` and ``speculative[i]`` are one metric (any positive unit: ms, tok/s) from pair ``i``.
    Returns ``{"n", "change_pct", "ci_low_pct", "ci_high_pct", "half_width_pct", "wilcoxon_p",
    "method"}``: ``change_pct`` = ``100 * (exp(mean(log(s/b))) - 1)``; the interval is the BCa bootstrap
    interval of that mean (``scipy.stats.bootstrap``, ``paired=True``) mapped the same way; ``wilcoxon_p``
    the two-sided exact signed-rank p-value of the log-ratios (None below 2 pairs or when all are zero).
    Pairs with a missing or non-positive value are dropped. Fewer than ``MIN_PAIRS`` pairs: the interval
    is None (``method`` says so).
    """
    import numpy as np
    from scipy import stats

    pairs = [(b, s) for b, s in zip(baseline, speculative)
             if b is not None and s is not None and b > 0 and s > 0]
    n = len(pairs)
    out: dict[str, Any] = {"n": n, "change_pct": None, "ci_low_pct": None, "ci_high_pct": None,
                           "half_width_pct": None, "wilcoxon_p": None, "method": ""}
    if n == 0:
        out["method"] = "no pairs with both values"
        return out
    logs = np.array([math.log(s / b) for b, s in pairs])
    pct = lambda x: 100.0 * (math.exp(x) - 1.0)  # noqa: E731
    out["change_pct"] = pct(float(logs.mean()))
    if n < MIN_PAIRS:
        out["method"] = f"only {n} pair(s): no interval"
        return out
    if float(np.ptp(logs)) == 0.0:  # every pair moved by exactly the same factor
        lo = hi = float(logs.mean())
        out["method"] = "all pairs identical"
    else:
        b_logs = np.log(np.array([b for b, _ in pairs]))
        s_logs = np.log(np.array([s for _, s in pairs]))
        res = stats.bootstrap((b_logs, s_logs), lambda x, y, axis=-1: np.mean(y - x, axis=axis), paired=True,
                              vectorized=True, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                              method="BCa", random_state=BOOTSTRAP_SEED)
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        out["method"] = f"BCa bootstrap, {BOOTSTRAP_RESAMPLES} resamples, paired"
        if not (math.isfinite(lo) and math.isfinite(hi)):
            res = stats.bootstrap((b_logs, s_logs), lambda x, y, axis=-1: np.mean(y - x, axis=axis), paired=True,
                                  vectorized=True, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                                  method="percentile", random_state=BOOTSTRAP_SEED)
            lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
            out["method"] = f"percentile bootstrap, {BOOTSTRAP_RESAMPLES} resamples, paired (BCa undefined)"
        if np.any(logs != 0):
            out["wilcoxon_p"] = float(stats.wilcoxon(logs, method="exact" if n <= 50 else "auto").pvalue)
    out["ci_low_pct"], out["ci_high_pct"] = pct(lo), pct(hi)
    out["half_width_pct"] = (out["ci_high_pct"] - out["ci_low_pct"]) / 2
    return out


def _direction(change: dict[str, Any], higher_is_better: bool, threshold: float = PRACTICAL_EFFECT_PCT) -> str:
    """``better`` / ``worse`` when the whole interval lies beyond ``±threshold`` percent, else ``unclear``."""
    lo, hi = change.get("ci_low_pct"), change.get("ci_high_pct")
    if lo is None or hi is None:
        return "unclear"
    if lo > threshold:
        return "better" if higher_is_better else "worse"
    if hi < -threshold:
        return "worse" if higher_is_better else "better"
    return "unclear"


def baseline_noise_pct(values: list[float]) -> float | None:
    """Repeat-to-repeat variation of the baseline alone: coefficient of variation in percent."""
    vals = [v for v in values if v is not None]
    if len(vals) < 2 or not statistics.fmean(vals):
        return None
    return 100.0 * statistics.stdev(vals) / statistics.fmean(vals)


def _fmt(c: dict[str, Any]) -> str:
    if c.get("change_pct") is None:
        return "not measured"
    s = f"{c['change_pct']:+.1f} %"
    if c.get("ci_low_pct") is not None:
        s += f" (95 % CI {c['ci_low_pct']:+.1f} to {c['ci_high_pct']:+.1f} %)"
    return s


def decide(pairs: list[tuple[dict[str, Any], dict[str, Any]]], acceptance: dict[str, Any] | None,
           peak_memory_bytes: int | None, memory_limit_bytes: int | None,
           per_token_measurable: bool = True, decode_key: str = "output_throughput") -> dict[str, Any]:
    """The verdict from paired repeats.

    ``pairs``: ``[(baseline_summary, speculative_summary), ...]``, one per A/B pair, each a bench summary
    with the keys of ``METRICS`` (ms, tok/s). ``acceptance``: ``{"acceptance_rate", "mean_acceptance_length",
    ...}`` from the ``vllm:spec_decode_*`` counters, or None. ``per_token_measurable``: False when the server
    sent each request's tokens in one burst (kept in the result). TPOT and ITL are reported, never used: ITL
    is per streamed chunk (a chunk carries several tokens under speculation), and output tok/s over the same
    requests already measures decode speed (TPOT also moves with TTFT: enabling speculation changes vLLM's
    token budget per step, so prefills finish sooner and TPOT = (E2EL - TTFT) / (n - 1) grows even when every
    request ends earlier). ``decode_key``: the decode signal, ``output_throughput``; the servers' CPU time
    per output token (``cpu_ms_per_output_token``, CPU workers) is reported, not used: measured on a 2-core
    host it disagreed with the wall clock in both directions.

    Returns ``{"verdict": "keep"|"disable"|"inconclusive", "keep": bool, "headline": str, "summary": str,
    "reasons": [...], "stop_signs": [...], "differences": {key: paired_change + label/direction/
    baseline_noise_pct}, "acceptance": {...}, "memory": {...}, "pairs": n, "thresholds": {...}}``.
    """
    diffs: dict[str, dict[str, Any]] = {}
    for key, label, higher in METRICS:
        b = [p[0].get(key) for p in pairs]
        s = [p[1].get(key) for p in pairs]
        c = paired_change(b, s)
        c.update(label=label, higher_is_better=higher, direction=_direction(c, higher),
                 baseline_noise_pct=baseline_noise_pct(b),
                 used=key in (decode_key, "median_ttft_ms", "p95_e2el_ms"))
        diffs[key] = c
    tok = diffs["output_throughput"]
    dec = diffs[decode_key]
    decode_better = dec["direction"] == "better"
    stop: list[str] = []
    reasons: list[str] = []
    if dec["direction"] == "worse":
        stop.append(STOP_DECODE)
    if diffs["median_ttft_ms"]["direction"] == "worse":
        stop.append(STOP_TTFT)
    # p95 of end-to-end latency only: ITL is per streamed chunk, and with speculation a chunk carries
    # several tokens, so its percentiles are not comparable with the baseline's (reported, not used)
    if diffs["p95_e2el_ms"]["direction"] == "worse":
        stop.append(STOP_P95)
    rate = (acceptance or {}).get("acceptance_rate")
    if rate is not None and rate < LOW_ACCEPTANCE_RATE and not decode_better:
        stop.append(STOP_LOW_ACCEPTANCE)
    near_oom = bool(memory_limit_bytes and peak_memory_bytes and peak_memory_bytes > MEMORY_NEAR_LIMIT * memory_limit_bytes)
    if near_oom:
        stop.append(STOP_MEMORY)

    if stop:
        verdict = "disable"
    elif decode_better:
        verdict = "keep"
    else:
        verdict = "inconclusive"

    acc_txt = (f"acceptance {rate * 100:.0f} % (mean acceptance length "
               f"{acceptance.get('mean_acceptance_length', 0):.2f})" if rate is not None else "acceptance not measured")
    n = dec["n"]
    signal = f"{dec['label']} {_fmt(dec)}" + (f", output tok/s {_fmt(tok)}" if decode_key != "output_throughput" else "")
    if verdict == "keep":
        headline = (f"Keep speculative decoding: {signal} over {n} paired repeats, "
                    f"with no regression in TTFT, p95 latency or memory; {acc_txt}.")
    elif verdict == "disable":
        headline = f"Disable speculative decoding: {'; '.join(stop).lower()}. {signal[0].upper() + signal[1:]}; {acc_txt}."
    else:
        noise = dec.get("half_width_pct")
        headline = (f"Inconclusive: {signal} over {n} paired repeats"
                    + (f" — the noise (±{noise:.1f} %) is too large for an effect of this size" if noise is not None
                       else "") + f" to call; {acc_txt}. Run more repeats or a longer workload.")
    for key, label, _ in METRICS:
        c = diffs[key]
        if c["change_pct"] is None:
            continue
        reasons.append(f"{label}: {_fmt(c)} — {c['direction']}" + ("" if c["used"] else " (reported, not used)"))
    base_noise = tok.get("baseline_noise_pct")
    if base_noise is not None:
        reasons.append(f"baseline output tok/s varied {base_noise:.1f} % (coefficient of variation) between repeats")
    if decode_key != "output_throughput":
        reasons.append(f"decode decided on {dec['label']} (the host's wall clock is shared)")
    return {
        "verdict": verdict, "keep": verdict == "keep", "headline": headline, "summary": headline,
        "reasons": reasons, "stop_signs": stop, "differences": diffs, "pairs": n, "decode_metric": decode_key,
        "acceptance": {"acceptance_rate": rate,
                       "mean_acceptance_length": (acceptance or {}).get("mean_acceptance_length"),
                       "threshold": LOW_ACCEPTANCE_RATE},
        "memory": {"peak_bytes": peak_memory_bytes, "limit_bytes": memory_limit_bytes, "threshold": MEMORY_NEAR_LIMIT},
        "thresholds": {"practical_effect_pct": PRACTICAL_EFFECT_PCT, "confidence": CONFIDENCE,
                       "low_acceptance_rate": LOW_ACCEPTANCE_RATE, "memory_near_limit": MEMORY_NEAR_LIMIT},
    }
