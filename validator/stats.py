"""Paired statistics and the keep / disable / inconclusive verdict of a validation run.

**Design.** A run alternates baseline and speculation phases (A B A B ...) on the same seeded prompts,
context and concurrency, so repeat ``i`` of the baseline and repeat ``i`` of the speculation form a pair
that saw the same traffic and (nearly) the same machine state (a paired design: the machine's drift, which
moved the baseline alone by 50 % between two runs of the same configuration, cancels within a pair).

**Effects and intervals.** Every effect is a ratio speculative / baseline of one repeat's figure (output
tok/s, TTFT p50, end-to-end latency p95, as ``vllm bench serve`` reports them for that repeat): the mean over
pairs of ``log(speculative / baseline)``, reported as a change ``exp(mean) - 1`` in percent. Its 95 %
confidence interval is the bias-corrected and accelerated (BCa) bootstrap interval of that mean from
``scipy.stats.bootstrap`` (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 14; scipy's
``_bca_interval`` follows its eq. 14.9-14.15), resampling pairs (``paired=True``), ``BOOTSTRAP_RESAMPLES``
resamples with a fixed ``random_state`` so the same numbers always give the same interval. The exact
Wilcoxon signed-rank p-value of the log-ratios (``scipy.stats.wilcoxon``) is reported beside it. The tail
is compared pair by pair too (one repeat's p95 against its pair's): measured on the 2-core host, pooling
every request of a phase before taking the p95 gave a wider interval in four runs of five, because a busy
neighbour slows both halves of a pair together and the pairing cancels it.

**The decision rule: an interval counts only when it excludes the threshold.** Each signal has one
threshold, and its interval is read three ways: wholly above it, wholly below it, or straddling it (testing
with confidence intervals: a one-sided test at 2.5 % on each side; CPMP *Points to consider on switching
between superiority and non-inferiority*, EMEA 2000; Wellek, *Testing Statistical Hypotheses of Equivalence
and Noninferiority*, 2010, ch. 2):

* output tok/s (the decode signal, field guide "ITL and output tok/s: decode improves"), threshold
  ``+GAIN_MARGIN_PCT``: above = a gain worth keeping (superiority by the margin); below = slower, or a gain
  too small to be worth keeping ("keep the feature only when the improvement persists"); straddling =
  unsettled;
* TTFT p50 and end-to-end latency p95 (the guards; field guide "first token is slower than baseline",
  "worse tail latency"), threshold ``+GUARD_LIMIT_PCT``: below = within the limit (non-inferiority
  established); above = a regression, the field guide's stop sign; straddling = unsettled;
* peak memory above ``MEMORY_NEAR_LIMIT`` of the worker's memory ("near OOM"): one measurement, no interval.

Verdict:

* **keep** — the output tok/s interval wholly above ``+GAIN_MARGIN_PCT`` and every latency interval wholly
  below ``+GUARD_LIMIT_PCT``, memory not near the limit;
* **disable** — the output tok/s interval wholly below no change ("slower"), or wholly between no change and
  ``+GAIN_MARGIN_PCT`` (a real gain too small to keep), or near OOM;
* **inconclusive** — anything else, named: an interval contains its threshold (the summary gives the
  effect, the noise — the interval's half-width — and about how many pairs would settle an effect of that
  size), a tok/s interval below the margin that contains no change (no gain worth keeping is shown, but no
  slowdown either), or a gain that comes with an established latency regression (a trade-off: keep it only
  within your SLO).

**An interval that contains no change never decides.** A keep needs the tok/s interval wholly above
``+GAIN_MARGIN_PCT`` (so above no change too); a disable from tok/s needs it wholly on one side of no change.
Two README-identical runs of one speculative configuration on a loaded host once read 0.87x (inconclusive)
and 1.98x (keep): a speedup interval that contains 1 is what such noise gives, and it reads "inconclusive"
with its interval, never keep or disable.

Why this is repeatable by construction: ``keep`` needs the tok/s interval wholly above the margin and
``disable`` needs it wholly below the *same* margin (and clear of no change), so for two runs to disagree (one keep, one disable) one
of the two intervals must miss the true effect — each does so on that side with probability 2.5 % —
whatever the true effect is; an effect near a threshold gives ``inconclusive`` instead of a coin flip. A
latency guard moves a run between keep and inconclusive only, never to disable. (With 8 pairs a bootstrap
interval is somewhat narrower than its nominal 95 % — Efron & Tibshirani §14.3 — so the miss rate is a few
percent rather than 2.5 %; a flip still takes an interval that misses the true effect, not an estimate that
wobbles across a threshold.) The previous rule disabled on a p95 interval above 5 % and kept otherwise, so
a p95 that sat at 5 % flipped keep / disable.

What the rule needs from the measurement: intervals narrower than the thresholds. On the 2-core host the
p95 interval was about ±14 % wide until each repeat got a warm-up request (``validator.bench_serve_entry``:
the server idle during the other phase's repeat answered its first requests a second late); with it,
about ±5 %.

Acceptance (from vLLM's ``/metrics``) explains the verdict — low acceptance is named as the reason for a
slowdown ("low acceptance adds overhead") — but decides nothing on its own: its cost is what output tok/s
measures. TPOT, ITL and the servers' CPU time per token are reported, not used (see ``decide``).

**How many pairs: until the intervals are tight or the budget ends** (``stop_rule``). A run measures the
profile's pairs (``repeats``) and then, when its profile allows more (``max_repeats``), one more pair at a
time while its time budget lasts, stopping as soon as either

* the outcome is settled at the *interim* boundary: Student-t intervals of the log-ratios at
  ``INTERIM_CONFIDENCE`` (99.9 %) already decide keep or disable as the rule above does (the Haybittle-Peto
  boundary: Haybittle, *Br J Radiol* 44:793, 1971; Peto et al., *Br J Cancer* 34:585, 1976 — interim looks
  at p < 0.001 leave the final test at about its nominal level, so looking after every pair does not let
  noise decide), or
* every deciding interval (tok/s, TTFT p50, end-to-end p95; the 95 % t interval) is tight: its half-width at
  most half the distance of its threshold from no change (``TARGET_HALF_WIDTH_PCT``), even with the spread at
  the pessimistic end of its own 95 % interval (``assured_half_width_pct``: with the observed spread, the runs
  whose few pairs happened to agree stopped early and erred far more often). The width depends on the spread
  of the pairs, not on where the estimate lies, so this stop favours neither side of a threshold.

Otherwise it stops at ``max_repeats`` or when the next pair would overrun the budget, and the verdict is the
rule above on every pair measured: an interval still too wide says "inconclusive" with the interval.

Thresholds are product choices, not fits: ``GAIN_MARGIN_PCT`` (5 %) — a change smaller than this is within
what a different prompt mix moves, and speculation costs memory and a second model, so a gain must be
worth it; ``GUARD_LIMIT_PCT`` (10 %) — a tolerance for a user-visible regression of first-token or tail
latency (the field guide: "no user-visible regression", "within the SLO"; it gives no number);
``MEMORY_NEAR_LIMIT`` (90 %); ``LOW_ACCEPTANCE_RATE`` (30 %), the field guide gives no number for "low".
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Callable

CONFIDENCE = 0.95
GAIN_MARGIN_PCT = 5.0
GUARD_LIMIT_PCT = 10.0
LOW_ACCEPTANCE_RATE = 0.3
MEMORY_NEAR_LIMIT = 0.9
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0
MIN_PAIRS = 3
INTERIM_CONFIDENCE = 0.999  # the early-stopping boundary (module docstring: how many pairs)
# An interval this tight (half-width, percentage points) settles its signal whatever its side: half the distance
# of the role's threshold from no change.
# How stop_rule's "why" names the width it stops on: not the verdict's interval (the paired bootstrap interval of
# ``paired_change``, the report's table) but the pessimistic t half-width of ``assured_half_width_pct``, which is
# wider (the spread at the upper end of its own 95 % interval). Reports of runs stored before this label say
# "still wide: " alone; ``validator.report.pairs_stop`` rewrites that to this.
STILL_WIDE = ("still wide at the stop rule's pessimistic half-width (95 % t interval with the pairs' spread at the "
              "upper end of its own 95 % interval; the verdict's 95 % bootstrap intervals, which decide, are in the "
              "table): ")
TARGET_HALF_WIDTH_PCT = {"decides": GAIN_MARGIN_PCT / 2, "guard": GUARD_LIMIT_PCT / 2}

# (key in a repeat's bench summary, label, higher is better, role)
# role: "decides" (the decode signal), "guard" (a stop sign when beyond its limit), "reported"
METRICS: tuple[tuple[str, str, bool, str], ...] = (
    ("output_throughput", "output tok/s", True, "decides"),
    ("median_ttft_ms", "TTFT p50", False, "guard"),
    ("p95_e2el_ms", "end-to-end latency p95", False, "guard"),
    ("cpu_ms_per_output_token", "server CPU time per output token", False, "reported"),
    ("median_tpot_ms", "TPOT p50 (time per output token)", False, "reported"),
    ("p95_itl_ms", "ITL p95", False, "reported"),
    ("median_itl_ms", "ITL p50", False, "reported"),
)

STOP_LOW_ACCEPTANCE = "Low acceptance adds overhead"
STOP_TTFT = "First token is slower than baseline"
STOP_DECODE = "Decode is slower than baseline"
STOP_NO_GAIN = "Decode does not improve enough to keep"
STOP_P95 = "Worse tail latency (p95)"
STOP_MEMORY = "Near OOM: peak memory close to the limit"
GUARD_STOP = {"median_ttft_ms": STOP_TTFT, "p95_e2el_ms": STOP_P95}


def _pct(x: float) -> float:
    return 100.0 * (math.exp(x) - 1.0)


def _log1p_pct(p: float) -> float:
    return math.log1p(p / 100.0)


def _interval(data: tuple, statistic: Callable, confidence: float, vectorized: bool) -> tuple[float, float, str]:
    """BCa bootstrap interval of ``statistic`` over paired ``data`` (scipy.stats.bootstrap); the percentile
    interval where BCa is undefined (a degenerate jackknife)."""
    import numpy as np
    from scipy import stats

    kw = dict(paired=True, vectorized=vectorized, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
              random_state=np.random.default_rng(BOOTSTRAP_SEED))
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap(data, statistic, method="BCa", **kw)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if math.isfinite(lo) and math.isfinite(hi):
        return lo, hi, f"BCa bootstrap, {BOOTSTRAP_RESAMPLES} resamples of the pairs"
    kw["random_state"] = np.random.default_rng(BOOTSTRAP_SEED)
    res = stats.bootstrap(data, statistic, method="percentile", **kw)
    return (float(res.confidence_interval.low), float(res.confidence_interval.high),
            f"percentile bootstrap, {BOOTSTRAP_RESAMPLES} resamples of the pairs (BCa undefined)")


def _empty(n: int, method: str) -> dict[str, Any]:
    return {"n": n, "change_pct": None, "ci_low_pct": None, "ci_high_pct": None, "half_width_pct": None,
            "wilcoxon_p": None, "method": method}


def _finish(out: dict[str, Any], lo: float, hi: float) -> dict[str, Any]:
    out["ci_low_pct"], out["ci_high_pct"] = _pct(lo), _pct(hi)
    out["half_width_pct"] = (out["ci_high_pct"] - out["ci_low_pct"]) / 2
    return out


def paired_change(baseline: list[float], speculative: list[float], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Relative change speculative vs baseline over paired repeats, with a bootstrap interval.

    ``baseline[i]`` and ``speculative[i]`` are one metric (any positive unit: ms, tok/s) from pair ``i``.
    Returns ``{"n", "change_pct", "ci_low_pct", "ci_high_pct", "half_width_pct", "wilcoxon_p", "method"}``
    (percent): ``change_pct`` = ``100 * (exp(mean(log(s/b))) - 1)``; the interval is the BCa bootstrap
    interval of that mean (``scipy.stats.bootstrap``, ``paired=True``) mapped the same way; ``wilcoxon_p``
    the two-sided exact signed-rank p-value of the log-ratios (None below 2 pairs or when all are zero).
    Pairs with a missing or non-positive value are dropped. Fewer than ``MIN_PAIRS`` pairs: no interval
    (``method`` says so).
    """
    import numpy as np
    from scipy import stats

    pairs = [(b, s) for b, s in zip(baseline, speculative)
             if b is not None and s is not None and b > 0 and s > 0]
    n = len(pairs)
    if n == 0:
        return _empty(0, "no pairs with both values")
    logs = np.array([math.log(s / b) for b, s in pairs])
    out = _empty(n, "")
    out["change_pct"] = _pct(float(logs.mean()))
    if n < MIN_PAIRS:
        out["method"] = f"only {n} pair(s): no interval"
        return out
    if float(np.ptp(logs)) == 0.0:  # every pair moved by exactly the same factor
        out["method"] = "all pairs identical"
        return _finish(out, float(logs.mean()), float(logs.mean()))
    b_logs = np.log(np.array([b for b, _ in pairs]))
    s_logs = np.log(np.array([s for _, s in pairs]))
    lo, hi, out["method"] = _interval((b_logs, s_logs), lambda x, y, axis=-1: np.mean(y - x, axis=axis),
                                      confidence, vectorized=True)
    out["wilcoxon_p"] = float(stats.wilcoxon(logs, method="exact" if n <= 50 else "auto").pvalue)
    return _finish(out, lo, hi)


def side(change: dict[str, Any], threshold_pct: float) -> str:
    """Where the interval lies with respect to ``threshold_pct``: ``above`` (its low end is above),
    ``below`` (its high end is below), ``straddles`` (it contains the threshold) or ``no interval``."""
    lo, hi = change.get("ci_low_pct"), change.get("ci_high_pct")
    if lo is None or hi is None:
        return "no interval"
    if lo > threshold_pct:
        return "above"
    if hi < threshold_pct:
        return "below"
    return "straddles"


def _direction(change: dict[str, Any], higher_is_better: bool) -> str:
    """``better`` / ``worse`` when the whole interval lies on one side of no change, else ``unclear``."""
    s = side(change, 0.0)
    if s == "above":
        return "better" if higher_is_better else "worse"
    if s == "below":
        return "worse" if higher_is_better else "better"
    return "unclear"


def baseline_noise_pct(values: list[float]) -> float | None:
    """Repeat-to-repeat variation of the baseline alone: coefficient of variation in percent."""
    vals = [v for v in values if v is not None]
    if len(vals) < 2 or not statistics.fmean(vals):
        return None
    return 100.0 * statistics.stdev(vals) / statistics.fmean(vals)


def pairs_needed(change: dict[str, Any], threshold_pct: float) -> int | None:
    """About how many pairs would put the interval clear of ``threshold_pct`` if the effect stayed the same
    size: the half-width shrinks as ``1 / sqrt(n)``, so ``n * (half_width / |effect - threshold|)^2``
    (in log units). None when there is no interval or the effect sits on the threshold."""
    c, lo, hi, n = change.get("change_pct"), change.get("ci_low_pct"), change.get("ci_high_pct"), change.get("n")
    if None in (c, lo, hi) or not n:
        return None
    dist = abs(_log1p_pct(c) - _log1p_pct(threshold_pct))
    half = (_log1p_pct(hi) - _log1p_pct(lo)) / 2
    if dist < 1e-3:
        return None
    return max(n + 1, math.ceil(n * (half / dist) ** 2))


def _fmt(c: dict[str, Any]) -> str:
    if c.get("change_pct") is None:
        return "not measured"
    s = f"{c['change_pct']:+.1f} %"
    if c.get("ci_low_pct") is not None:
        s += f" (95 % CI {c['ci_low_pct']:+.1f} to {c['ci_high_pct']:+.1f} %)"
    return s


def _finding(key: str, c: dict[str, Any]) -> str:
    """One plain sentence on what a used signal's interval established."""
    t, s, label = c["threshold_pct"], c["side"], c["label"]
    if s == "no interval":
        return f"{label}: {_fmt(c)} — no interval ({c['method']}), so it settles nothing"
    if c["role"] == "decides":
        if s == "above":
            return f"{label}: {_fmt(c)} — a gain: the whole interval is above the +{t:g} % margin"
        if s == "below":
            if c["ci_high_pct"] < 0:
                return f"{label}: {_fmt(c)} — slower: the whole interval is below no change"
            if c["ci_low_pct"] > 0:
                return (f"{label}: {_fmt(c)} — no gain worth keeping: the whole interval lies between no change "
                        f"and the +{t:g} % margin")
            return (f"{label}: {_fmt(c)} — below the +{t:g} % margin but the interval contains no change: neither a "
                    "gain nor a slowdown is established")
        return f"{label}: {_fmt(c)} — unsettled: the interval contains the +{t:g} % margin"
    if s == "below":
        return f"{label}: {_fmt(c)} — within the +{t:g} % limit"
    if s == "above":
        return f"{label}: {_fmt(c)} — a regression (stop sign): the whole interval is above the +{t:g} % limit"
    return f"{label}: {_fmt(c)} — unsettled: the interval contains the +{t:g} % limit"


def tok_outcome(tok: dict[str, Any]) -> str:
    """What the output tok/s interval establishes: ``gain`` (wholly above the margin), ``slower`` (wholly below
    no change), ``small gain`` (wholly between no change and the margin), ``no change shown`` (below the margin
    but containing no change: it decides nothing), ``unsettled`` (contains the margin) or ``no interval``."""
    s = tok.get("side") or side(tok, GAIN_MARGIN_PCT)
    if s == "above":
        return "gain"
    if s == "below":
        if tok["ci_high_pct"] < 0:
            return "slower"
        return "small gain" if tok["ci_low_pct"] > 0 else "no change shown"
    return "unsettled" if s == "straddles" else "no interval"


def rule_text() -> str:
    """The decision rule in one sentence, with the thresholds in force."""
    return (f"keep when the 95 % interval of the output tok/s change lies wholly above +{GAIN_MARGIN_PCT:g} % and "
            f"those of TTFT p50 and end-to-end p95 wholly below +{GUARD_LIMIT_PCT:g} %; disable when the tok/s "
            f"interval lies wholly below no change, or wholly between no change and +{GAIN_MARGIN_PCT:g} %, or peak "
            f"memory is above {MEMORY_NEAR_LIMIT:.0%} of the limit; otherwise inconclusive — an interval that "
            "contains no change never decides")


def decide(pairs: list[tuple[dict[str, Any], dict[str, Any]]], acceptance: dict[str, Any] | None,
           peak_memory_bytes: int | None, memory_limit_bytes: int | None,
           per_token_measurable: bool = True, caveats: list[str] | None = None) -> dict[str, Any]:
    """The verdict from paired repeats (the rule in the module docstring).

    ``pairs``: ``[(baseline_summary, speculative_summary), ...]``, one per A/B pair, each a bench summary
    with the keys of ``METRICS`` (ms, tok/s: vllm bench serve's figures for that repeat).
    ``acceptance``: ``{"acceptance_rate", "mean_acceptance_length", ...}`` from the ``vllm:spec_decode_*``
    counters, or None. ``per_token_measurable``: False when the server sent each request's tokens in one
    burst (kept in the result). ``caveats``: sentences the verdict must carry about what ran (appended to
    the headline).

    TPOT and ITL are reported, never used: ITL is per streamed chunk (a chunk carries several tokens under
    speculation), and output tok/s over the same requests already measures decode speed (TPOT also moves
    with TTFT: enabling speculation changes vLLM's token budget per step, so prefills finish sooner and
    TPOT = (E2EL - TTFT) / (n - 1) grows even when every request ends earlier). The servers' CPU time per
    output token is reported, not used: measured on a 2-core host it disagreed with the wall clock in both
    directions.

    Returns ``{"verdict": "keep"|"disable"|"inconclusive", "keep", "headline", "summary", "reasons",
    "stop_signs", "unsettled", "differences": {key: change + label/role/threshold_pct/side/finding/
    direction/used/baseline_noise_pct}, "acceptance", "memory", "pairs", "thresholds", "rule", "caveats"}``.
    """
    diffs: dict[str, dict[str, Any]] = {}
    for key, label, higher, role in METRICS:
        b = [p[0].get(key) for p in pairs]
        s = [p[1].get(key) for p in pairs]
        c = paired_change(b, s)
        threshold = GAIN_MARGIN_PCT if role == "decides" else GUARD_LIMIT_PCT if role == "guard" else None
        c.update(key=key, label=label, higher_is_better=higher, role=role, used=role != "reported",
                 threshold_pct=threshold, direction=_direction(c, higher), baseline_noise_pct=baseline_noise_pct(b))
        if threshold is not None:
            c["side"] = side(c, threshold)
            c["finding"] = _finding(key, c)
        diffs[key] = c
    tok = diffs["output_throughput"]
    guards = [diffs[k] for k, _, _, role in METRICS if role == "guard"]

    outcome = tok_outcome(tok)
    stop: list[str] = []  # the field guide's stop signs, each established by an interval (or a measurement)
    if outcome in ("slower", "small gain"):
        stop.append(STOP_DECODE if outcome == "slower" else STOP_NO_GAIN)
    regressions = [g for g in guards if g["side"] == "above"]
    stop += [GUARD_STOP[g["key"]] for g in regressions]
    near_oom = bool(memory_limit_bytes and peak_memory_bytes and peak_memory_bytes > MEMORY_NEAR_LIMIT * memory_limit_bytes)
    if near_oom:
        stop.append(STOP_MEMORY)
    rate = (acceptance or {}).get("acceptance_rate")
    low_acc = rate is not None and rate < LOW_ACCEPTANCE_RATE
    if outcome in ("slower", "small gain") or near_oom:
        verdict = "disable"
        if low_acc and outcome in ("slower", "small gain"):
            stop.append(STOP_LOW_ACCEPTANCE)  # the reason for the slowdown, not a decision on its own
    elif outcome == "gain" and all(g["side"] == "below" for g in guards):
        verdict = "keep"
    else:
        verdict = "inconclusive"
    unsettled = [d for d in (tok, *guards) if d["side"] in ("straddles", "no interval")
                 or (d is tok and outcome == "no change shown")]

    acc_txt = (f"acceptance {rate * 100:.0f} % (mean acceptance length "
               f"{(acceptance or {}).get('mean_acceptance_length') or 0:.2f}, vLLM /metrics)"
               if rate is not None else "acceptance not measured")
    n = tok["n"]

    def regression_txt(g: dict[str, Any]) -> str:
        return (f"{GUARD_STOP[g['key']].lower()} — {g['label']} {_fmt(g)}, the whole interval above the "
                f"+{GUARD_LIMIT_PCT:g} % limit")

    def unsettled_txt(u: dict[str, Any]) -> str:
        t = u["threshold_pct"]
        kind = "margin" if u["role"] == "decides" else "limit"
        if u["side"] == "no interval":
            return f"{u['label']} {_fmt(u)} has no interval ({u['method']})"
        if u is tok and outcome == "no change shown":  # below the margin, but containing no change
            need = pairs_needed(u, 0.0)
            return (f"{u['label']} {_fmt(u)} lies below the +{t:g} % margin — no gain worth keeping — but contains "
                    f"no change, so it shows neither a speedup nor a slowdown (an interval that contains no change "
                    "decides nothing)" + (f"; about {need} pairs would settle an effect of this size" if need else ""))
        need = pairs_needed(u, t)
        return (f"{u['label']} {_fmt(u)} contains the +{t:g} % {kind}: the noise (±{u['half_width_pct']:.1f} %) is "
                f"larger than the effect's distance from it ({abs(u['change_pct'] - t):.1f} points)"
                + (f"; about {need} pairs would settle an effect of this size" if need else ""))

    if verdict == "keep":
        limits = ", ".join(f"{g['label']} {g['change_pct']:+.1f} % (CI up to {g['ci_high_pct']:+.1f} %)" for g in guards)
        headline = (f"Keep speculative decoding: output tok/s {_fmt(tok)} over {n} paired repeats — the whole "
                    f"interval is above the +{GAIN_MARGIN_PCT:g} % margin — and every latency interval lies below "
                    f"+{GUARD_LIMIT_PCT:g} % ({limits}); {acc_txt}.")
    elif verdict == "disable":
        why: list[str] = []
        if STOP_DECODE in stop:
            why.append(f"it is slower — output tok/s {_fmt(tok)} over {n} paired repeats, the whole interval "
                       "below no change")
        elif STOP_NO_GAIN in stop:
            why.append(f"no gain worth keeping — output tok/s {_fmt(tok)} over {n} paired repeats, the whole "
                       f"interval between no change and the +{GAIN_MARGIN_PCT:g} % margin")
        why += [regression_txt(g) for g in regressions]
        if near_oom:
            why.append(f"near OOM — peak memory {peak_memory_bytes / 2**30:.2f} GiB of {memory_limit_bytes / 2**30:.2f} GiB")
        if outcome not in ("slower", "small gain"):
            why.append(f"output tok/s {_fmt(tok)}")
        headline = (f"Disable speculative decoding: {'; '.join(why)}; {acc_txt}"
                    + (" — low acceptance adds overhead" if STOP_LOW_ACCEPTANCE in stop else "") + ".")
    elif outcome == "gain" and regressions:  # a gain and a latency regression: a trade-off
        headline = (f"Inconclusive over {n} paired repeats: speculative decoding is faster — output tok/s "
                    f"{_fmt(tok)}, the whole interval above the +{GAIN_MARGIN_PCT:g} % margin — but "
                    f"{'; '.join(regression_txt(g) for g in regressions)}. A trade-off the field guide calls a stop "
                    f"sign: keep it only if that latency stays within your SLO; {acc_txt}.")
    else:
        lead = f"output tok/s {_fmt(tok)} is a gain, but " if outcome == "gain" else ""
        headline = (f"Inconclusive over {n} paired repeats: {lead}{'; '.join(unsettled_txt(u) for u in unsettled)}"
                    + "".join(f"; {regression_txt(g)}" for g in regressions) + f"; {acc_txt}"
                    + (" (low: low acceptance adds overhead)" if low_acc else "")
                    + ". Neither keep nor disable is established; run more repeats or a longer workload.")
    for c in caveats or []:
        headline += f" {c}"

    reasons = [diffs[k]["finding"] for k, _, _, role in METRICS if role != "reported"]
    for key, label, _, role in METRICS:
        c = diffs[key]
        if role == "reported" and c["change_pct"] is not None:
            reasons.append(f"{label}: {_fmt(c)} (reported, not used)")
    base_noise = tok.get("baseline_noise_pct")
    if base_noise is not None:
        reasons.append(f"baseline output tok/s varied {base_noise:.1f} % (coefficient of variation) between repeats")
    return {
        "verdict": verdict, "keep": verdict == "keep", "headline": headline, "summary": headline,
        "reasons": reasons, "stop_signs": stop, "unsettled": [u["key"] for u in unsettled],
        "differences": diffs, "pairs": n, "decode_metric": "output_throughput", "tok_outcome": outcome,
        "per_token_measurable": per_token_measurable, "caveats": list(caveats or []),
        "acceptance": {"acceptance_rate": rate,
                       "mean_acceptance_length": (acceptance or {}).get("mean_acceptance_length"),
                       "threshold": LOW_ACCEPTANCE_RATE},
        "memory": {"peak_bytes": peak_memory_bytes, "limit_bytes": memory_limit_bytes, "threshold": MEMORY_NEAR_LIMIT},
        "thresholds": {"gain_margin_pct": GAIN_MARGIN_PCT, "guard_limit_pct": GUARD_LIMIT_PCT,
                       "confidence": CONFIDENCE, "low_acceptance_rate": LOW_ACCEPTANCE_RATE,
                       "memory_near_limit": MEMORY_NEAR_LIMIT},
        "rule": rule_text(),
    }


def t_interval(baseline: list[float], speculative: list[float], confidence: float) -> dict[str, Any]:
    """The Student-t interval of the mean log-ratio ``log(speculative / baseline)`` over the pairs, mapped to a
    change in percent like ``paired_change`` (``{"n", "change_pct", "ci_low_pct", "ci_high_pct"}``); the interim
    boundary of ``stop_rule`` (a t interval is wider than the bootstrap's with few pairs: the conservative side).
    Pairs with a missing or non-positive value are dropped; fewer than ``MIN_PAIRS``: no interval."""
    import numpy as np
    from scipy import stats as sst

    logs = np.array([math.log(s / b) for b, s in zip(baseline, speculative)
                     if b is not None and s is not None and b > 0 and s > 0])
    n = len(logs)
    out: dict[str, Any] = {"n": n, "change_pct": _pct(float(logs.mean())) if n else None,
                           "ci_low_pct": None, "ci_high_pct": None}
    if n < MIN_PAIRS:
        return out
    half = float(sst.t.ppf(1 - (1 - confidence) / 2, n - 1)) * float(logs.std(ddof=1)) / math.sqrt(n)
    out["ci_low_pct"], out["ci_high_pct"] = _pct(float(logs.mean()) - half), _pct(float(logs.mean()) + half)
    return out


def assured_half_width_pct(baseline: list[float], speculative: list[float]) -> float | None:
    """The half-width (percent, ``100 * (exp(h) - 1)`` of the log half-width ``h``) of the 95 % t interval of the
    mean log-ratio, with the spread at the upper end of its own 95 % interval (``sd * sqrt((n - 1) /
    chi2_0.05(n - 1))``): the width ``stop_rule`` calls tight. Taking the observed spread instead stops the runs
    whose few pairs happened to agree, and their intervals then miss the effect far more often than 5 %
    (tests/test_validator_stats.py: 28 of 87 such runs at the margin). None below ``MIN_PAIRS``."""
    import numpy as np
    from scipy import stats as sst

    logs = np.array([math.log(s / b) for b, s in zip(baseline, speculative)
                     if b is not None and s is not None and b > 0 and s > 0])
    n = len(logs)
    if n < MIN_PAIRS:
        return None
    sd_high = float(logs.std(ddof=1)) * math.sqrt((n - 1) / float(sst.chi2.ppf(1 - CONFIDENCE, n - 1)))
    half = float(sst.t.ppf(1 - (1 - CONFIDENCE) / 2, n - 1)) * sd_high / math.sqrt(n)
    return 100.0 * math.expm1(half)


def _deciding() -> list[tuple[str, str]]:
    """``(key, role)`` of the signals a verdict stands on: output tok/s and the latency guards."""
    return [(key, role) for key, _, _, role in METRICS if role in ("decides", "guard")]


def interim_outcome(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> str | None:
    """``keep`` or ``disable`` when the rule of ``decide`` already holds with the interim intervals
    (``t_interval`` at ``INTERIM_CONFIDENCE``), else None. Memory is not looked at: the benchmark client that
    asks does not see it, and the run's own verdict still applies the near-OOM rule."""
    sides: dict[str, dict[str, Any]] = {}
    for key, role in _deciding():
        c = t_interval([p[0].get(key) for p in pairs], [p[1].get(key) for p in pairs], INTERIM_CONFIDENCE)
        c["side"] = side(c, GAIN_MARGIN_PCT if role == "decides" else GUARD_LIMIT_PCT)
        sides[key] = c
    outcome = tok_outcome(sides["output_throughput"])
    if outcome in ("slower", "small gain"):
        return "disable"
    if outcome == "gain" and all(sides[k]["side"] == "below" for k, role in _deciding() if role == "guard"):
        return "keep"
    return None


def stop_rule(pairs: list[tuple[dict[str, Any], dict[str, Any]]], min_pairs: int, max_pairs: int) -> dict[str, Any]:
    """Whether a run that has measured ``pairs`` (``[(baseline_summary, speculative_summary), ...]``, the keys of
    ``METRICS``) needs another pair: ``{"stop": bool, "why": str, "pairs": n}`` (the module docstring, "How many
    pairs"). Never stops below ``min_pairs``; always stops at ``max_pairs``; in between it stops when
    ``interim_outcome`` decides or when every deciding interval is tight (``TARGET_HALF_WIDTH_PCT`` against
    ``assured_half_width_pct``, which depends on the spread of the pairs alone, not on where the estimate lies: no
    bootstrap in the loop, and no side favoured). The time budget is the caller's
    (``validator.bench_serve_entry.PairSchedule``)."""
    n = len(pairs)
    if n < min_pairs:
        return {"stop": False, "why": f"{n} of at least {min_pairs} pairs", "pairs": n}
    early = interim_outcome(pairs)
    if early is not None:
        return {"stop": True, "pairs": n,
                "why": f"settled ({early}) at the interim boundary: the {INTERIM_CONFIDENCE:.1%} intervals already "
                       "decide"}
    wide = []
    for key, role in _deciding():
        half = assured_half_width_pct([p[0].get(key) for p in pairs], [p[1].get(key) for p in pairs])
        if half is None or half > TARGET_HALF_WIDTH_PCT[role]:
            label = next(lbl for k, lbl, _, _ in METRICS if k == key)
            wide.append(f"{label} ±{half:.1f} % (tight: at most ±{TARGET_HALF_WIDTH_PCT[role]:g} %)"
                        if half is not None else f"{label} (no interval)")
    if not wide:
        return {"stop": True, "pairs": n, "why": "every deciding interval is tight (half-width at most "
                + ", ".join(f"{v:g} %" for v in TARGET_HALF_WIDTH_PCT.values()) + " for tok/s, the guards, "
                "even at the pessimistic end of the spread)"}
    if n >= max_pairs:
        return {"stop": True, "pairs": n, "why": f"the most pairs this profile allows ({max_pairs}); "
                + STILL_WIDE + ", ".join(wide)}
    return {"stop": False, "pairs": n, "why": STILL_WIDE + ", ".join(wide)}
