"""The validation sequence: baseline and speculative decoding, paired and interleaved on identical traffic.

``run_sequence(configuration, workdir, reporter, ...)`` starts two vLLM servers side by side, one without
and one with the speculative config (``validator.runner``), reads their startup logs, runs vLLM's serving
benchmark alternately against each (A B A B ...) ``repeats`` times on the same seeded prompt set,
takes the speculative-decoding counters from ``/metrics`` before and after each repeat, samples peak
memory, and returns the measured dict. ``paired_verdict`` decides keep / disable / inconclusive from the
paired repeats (``validator.stats``).
``compare(prediction, startup)`` scores the prediction field by field.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from calculator.metadata import builtin as tiny_models

from . import runner, stats, workloads
from .runner import Deadline, MemorySampler, RunnerError, ServerProcess

GiB = 2**30
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")
BURST_TTFT_SHARE = 0.8  # a request whose first chunk came at or after 80 % of its latency streamed in one burst
# More than this share of requests streamed in one burst: the client's mean TPOT and TTFT are not the engine's
BURST_LIMIT = 0.1


class Reporter(Protocol):
    def __call__(self, stage: str, progress: float, log_tail: str | None = None, **fields: Any) -> None: ...


def _summary(result: dict[str, Any], server_cpu_s: float | None = None) -> dict[str, Any]:
    """The figures we keep from one ``vllm bench serve`` result (ms, tok/s, per-request arrays); with
    ``server_cpu_s`` (the server's CPU seconds over the repeat) also ``cpu_ms_per_output_token``."""
    out: dict[str, Any] = {k: result.get(k) for k in (
        "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
        "request_throughput", "output_throughput", "total_token_throughput", "max_output_tokens_per_s")}
    for m in PERCENTILE_METRICS:
        for stat in ("mean", "median", "p50", "p95", "p99"):
            key = f"{stat}_{m}_ms"
            if key in result:
                out[key] = result[key]
    if server_cpu_s is not None and result.get("total_output_tokens"):
        out["server_cpu_s"] = server_cpu_s
        out["cpu_ms_per_output_token"] = server_cpu_s * 1000 / result["total_output_tokens"]
    if result.get("accept_length") is not None:  # SGLang's avg_spec_accept_length (validator.sglang)
        out["accept_length"] = result["accept_length"]
    out["ttfts_ms"] = [round(x * 1000, 3) for x in result.get("ttfts") or []]
    out["e2els_ms"] = [round(x * 1000, 3) for x in result.get("latencies") or []]
    share = burst_share(out["ttfts_ms"], out["e2els_ms"])
    if share is not None:
        out["burst_share"] = share
    return out


def burst_share(ttfts_ms: list[float], e2els_ms: list[float]) -> float | None:
    """The share of requests whose first streamed chunk came at or after ``BURST_TTFT_SHARE`` of their end-to-end
    latency: their tokens reached the client in one burst, so their TTFT is most of the request and their TPOT
    ~0. ``None`` without per-request figures."""
    pairs = [(t, e) for t, e in zip(ttfts_ms, e2els_ms) if e]
    if not pairs:
        return None
    return sum(1 for t, e in pairs if t >= BURST_TTFT_SHARE * e) / len(pairs)


def _mean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def _spread(values: list[float]) -> float:
    values = [v for v in values if v is not None]
    return max(values) - min(values) if len(values) > 1 else 0.0


def aggregate(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean over repeats of each scalar figure, plus ``spread_<key>`` (max - min over repeats)."""
    keys = [k for k, v in repeats[0]["bench"].items() if isinstance(v, (int, float))] if repeats else []
    agg: dict[str, Any] = {}
    for k in keys:
        vals = [r["bench"].get(k) for r in repeats]
        agg[k] = _mean(vals)
        agg[f"spread_{k}"] = _spread(vals)
    specs = [r["spec_decode"] for r in repeats if r.get("spec_decode")]
    if specs and sum(s["num_drafts"] for s in specs):
        drafts = sum(s["num_drafts"] for s in specs)
        drafted = sum(s["num_draft_tokens"] for s in specs)
        accepted = sum(s["num_accepted_tokens"] for s in specs)
        npos = max(len(s["per_position"]) for s in specs)
        per_pos = [sum(s["per_position"][i] * s["num_drafts"] for s in specs if i < len(s["per_position"])) / drafts
                   for i in range(npos)]
        agg["spec_decode"] = {"num_drafts": drafts, "num_draft_tokens": drafted, "num_accepted_tokens": accepted,
                              "acceptance_rate": accepted / drafted if drafted else 0.0,
                              "mean_acceptance_length": 1 + accepted / drafts, "per_position": per_pos}
    return agg


def memory_limit_bytes(hardware: dict[str, Any]) -> int | None:
    if hardware.get("platform") == "cuda":
        return sum(d["memory_total_bytes"] for d in hardware.get("devices", [])) or None
    return hardware.get("memory_total_bytes")


def per_token_measurable(agg: dict[str, Any]) -> bool:
    """Whether TPOT/ITL mean anything for a phase. When the server sends a request's tokens in one burst
    (a tiny model on vLLM's CPU build: the streamed chunks reach the client late, often all at the request's
    end), TTFT is most of the end-to-end latency and vllm bench serve's TPOT ``(latency - ttft) / (output_len - 1)``
    collapses to ~0: then only output tok/s and vLLM's own inter-token latency (``engine_itl_ms``) measure decode
    speed. With per-request figures: measurable when at most ``BURST_LIMIT`` of the requests (mean over the
    repeats) came in one burst (``burst_share``); without them, when the median TTFT is under ``BURST_TTFT_SHARE``
    of the median end-to-end latency."""
    if agg.get("burst_share") is not None:
        return agg["burst_share"] <= BURST_LIMIT
    ttft, e2el = agg.get("median_ttft_ms"), agg.get("median_e2el_ms")
    if ttft is None or not e2el:
        return agg.get("median_tpot_ms") is not None
    return ttft < BURST_TTFT_SHARE * e2el


# (field, unit, how to compare) — every startup figure the engine predicts and vLLM logs.
COMPARED_FIELDS = (
    ("weights_gib", "GiB"),
    ("available_kv_cache_gib", "GiB"),
    ("kv_cache_tokens", "tokens"),
    ("max_concurrency", "x"),
    ("cuda_graph_gib", "GiB"),
)


def compare(prediction: dict[str, Any], startup: dict[str, Any]) -> list[dict[str, Any]]:
    """Predicted vs measured for each field in ``COMPARED_FIELDS``: ``{"field", "unit", "predicted",
    "measured", "error", "error_pct", "note"}``; ``error`` = predicted - measured, ``error_pct`` relative
    to the measured value. ``measured`` is None where this vLLM build does not log the field."""
    rows = []
    for field_name, unit in COMPARED_FIELDS:
        p, m = prediction.get(field_name), startup.get(field_name)
        row: dict[str, Any] = {"field": field_name, "unit": unit, "predicted": p, "measured": m,
                               "error": None, "error_pct": None, "note": ""}
        if p is not None and m is not None:
            row["error"] = p - m
            row["error_pct"] = (p - m) / m * 100 if m else (0.0 if p == m else None)
        elif m is None and startup.get("kv_device") == "CPU" and field_name in ("weights_gib", "cuda_graph_gib"):
            row["note"] = "not logged by vLLM's CPU build" if field_name == "weights_gib" else "no CUDA graphs on the CPU"
        elif p is None:
            row["note"] = "not predicted"
        rows.append(row)
    return rows


def _row(field_name: str, unit: str, p: float | None, m: float | None, note: str = "") -> dict[str, Any]:
    row: dict[str, Any] = {"field": field_name, "unit": unit, "predicted": p, "measured": m, "error": None,
                           "error_pct": None, "note": note}
    if p is not None and m is not None:
        row["error"] = p - m
        row["error_pct"] = (p - m) / m * 100 if m else None
    elif p is None and not note:
        row["note"] = "not predicted"
    return row


def speed_comparison(configuration: dict[str, Any], baseline: dict[str, Any],
                     speculative: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Predicted vs measured speed (``calculator.engine.perf``, roofline with assumed efficiencies) at the
    profile the run used: TTFT, time per output token (perf's ``itl_ms`` is vllm bench serve's TPOT: with
    speculation several tokens arrive per chunk, so raw ITL is not comparable), output tok/s, and with
    speculation the mean acceptance length and the speedup (baseline TPOT / speculative TPOT)."""
    try:
        from calculator.engine.perf import speed_fields
        from calculator.engine.schemas import EngineInput
    except ImportError as e:  # pragma: no cover - the engine ships with the app
        return [_row("ttft_ms", "ms", None, None, f"speed model unavailable ({e})")]
    profile = configuration["profile"]
    # the run's outputs are all output_len long (--ignore-eos, fixed --random-output-len / --custom-output-len), so its
    # requests return in waves: random_range_ratio 0 (perf.wave_share)
    kw = dict(prompt_len=profile["input_len"], output_len=profile["output_len"], concurrency=profile["concurrency"],
              random_range_ratio=0.0)
    base_input = {k: v for k, v in configuration["engine_input"].items() if k != "speculative_config"}
    b = baseline.get("aggregate", {})
    rows = []
    try:
        pb = speed_fields(EngineInput(**base_input), None, **kw)
    except Exception as e:  # noqa: BLE001 - shown in the report, never a crash of the run
        return [_row("ttft_ms", "ms", None, None, f"speed model could not predict: {e}")]
    burst = "not measurable: the server sent each request's tokens in one burst (TTFT ~ end-to-end latency)"
    bursts = b.get("burst_share")
    if not per_token_measurable(b) and bursts is not None:
        burst = (f"not measurable: {bursts:.0%} of the requests' streams reached the client in one burst (their TTFT "
                 "~ their end-to-end latency, TPOT ~ 0); vLLM's own inter-token latency is the row engine_itl_ms")
    ttft_note = "mean TTFT (what the model predicts)"
    tps_note = ""
    if bursts:  # any request in one burst: its TTFT was the whole request, which no term of the speed model is
        late = (f"{bursts:.0%} of the requests' streams reached the client in one burst at their end (seen on vLLM's "
                "CPU build with a step of a few ms: the streamed chunks arrive late and together; not modelled)")
        ttft_note += f"; {late}" + (f"; vLLM's own mean TTFT (/metrics): {b['engine_ttft_ms']:.1f} ms"
                                    if b.get("engine_ttft_ms") is not None else "")
        tps_note = f"the client's rate, which the late bursts lower ({bursts:.0%} of the requests); not modelled"
    rows += [_row("ttft_ms", "ms", pb["ttft_ms"], _mean_of(b, "ttft"), ttft_note),
             _row("tpot_ms", "ms", pb["itl_ms"], _mean_of(b, "tpot") if per_token_measurable(b) else None,
                  "mean TPOT (what the model predicts and calibration uses)" if per_token_measurable(b) else burst)]
    if b.get("engine_itl_ms") is not None:
        rows.append(_row("engine_itl_ms", "ms", pb["itl_ms"], b["engine_itl_ms"],
                         "vLLM's own mean inter-token latency (/metrics vllm:inter_token_latency_seconds: the engine "
                         "core's step to step, no HTTP stream), against the predicted TPOT"
                         + ("; calibration uses it" if not per_token_measurable(b) else "")))
    rows.append(_row("output_tokens_per_s", "tok/s", pb["output_tokens_per_s"], b.get("output_throughput"), tps_note))
    spec = configuration.get("spec_config")
    if speculative and spec:
        s_ = speculative.get("aggregate", {})
        try:
            ps = speed_fields(EngineInput(**{**base_input, "speculative_config": spec}), None,
                              acceptance_rate=configuration.get("acceptance_rate"), **kw)
        except Exception as e:  # noqa: BLE001
            return rows + [_row("spec_tpot_ms", "ms", None, None, f"speed model could not predict: {e}")]
        acc = s_.get("spec_decode") or {}
        measurable = per_token_measurable(b) and per_token_measurable(s_)
        paired = paired_speedup(baseline, speculative, measurable)
        if paired is not None:
            measured_speedup = paired["speedup"]
        elif measurable:
            measured_speedup = (_mean_of(b, "tpot") / _mean_of(s_, "tpot")
                                if _mean_of(b, "tpot") and _mean_of(s_, "tpot") else None)
        else:  # closed loop at a fixed concurrency: the output tok/s ratio is the decode speedup
            measured_speedup = (s_["output_throughput"] / b["output_throughput"]
                                if b.get("output_throughput") and s_.get("output_throughput") else None)
        no_figure = "no typical acceptance figure for this method: give acceptance_rate to predict it"
        rows += [_row("spec_tpot_ms", "ms", ps["itl_ms"] if ps.get("spec_speedup") else None,
                      _mean_of(s_, "tpot") if per_token_measurable(s_) else None,
                      (burst if not per_token_measurable(s_) else "") or ("" if ps.get("spec_speedup") else no_figure)),
                 _row("mean_acceptance_length", "tokens", ps.get("mean_acceptance_length"),
                      acc.get("mean_acceptance_length"), "" if ps.get("mean_acceptance_length") else no_figure),
                 _row("spec_speedup", "x", ps.get("spec_speedup"), measured_speedup,
                      "; ".join(n for n in ("" if ps.get("spec_speedup") else no_figure,
                                            paired["note"] if paired else "") if n))]
        if paired is not None:
            rows[-1].update(ci_low=paired["ci_low"], ci_high=paired["ci_high"], pairs=paired["pairs"])
    return rows


def paired_speedup(baseline: dict[str, Any], speculative: dict[str, Any], measurable: bool) -> dict[str, Any] | None:
    """The measured speedup as the verdict measures it: over the pairs (repeat ``i`` of each phase), the geometric
    mean of baseline TPOT / speculative TPOT when TPOT is measurable, else of speculative / baseline output tok/s
    (closed loop at a fixed concurrency), with its 95 % bootstrap interval (``validator.stats.paired_change``).
    ``{"speedup", "ci_low", "ci_high", "pairs", "note"}`` (x), or None without repeats in both phases. A ratio of
    the phases' means instead lets one slow repeat on a loaded host move it anywhere (0.87x in one run, 1.98x in
    an identical one) and has no interval; this one says when its interval contains 1."""
    pairs = list(zip(baseline.get("repeats") or [], speculative.get("repeats") or []))
    if not pairs:
        return None
    if measurable:  # speedup = b / s: paired_change's "speculative" is the baseline TPOT
        c = stats.paired_change([s["bench"].get("mean_tpot_ms") for _, s in pairs],
                                [b["bench"].get("mean_tpot_ms") for b, _ in pairs])
        what = "baseline / speculative mean TPOT"
    else:
        c = stats.paired_change([b["bench"].get("output_throughput") for b, _ in pairs],
                                [s["bench"].get("output_throughput") for _, s in pairs])
        what = "speculative / baseline output tok/s"
    if c["change_pct"] is None:
        return None
    x = 1 + c["change_pct"] / 100
    lo = None if c["ci_low_pct"] is None else 1 + c["ci_low_pct"] / 100
    hi = None if c["ci_high_pct"] is None else 1 + c["ci_high_pct"] / 100
    note = f"paired: geometric mean of {what} over {c['n']} pairs"
    if lo is not None:
        note += f", 95 % CI {lo:.2f}-{hi:.2f}x"
        if lo <= 1 <= hi:
            note += " (contains 1: neither a speedup nor a slowdown is established)"
    else:
        note += f" ({c['method']})"
    return {"speedup": x, "ci_low": lo, "ci_high": hi, "pairs": c["n"], "note": note}


def speed_basis(configuration: dict[str, Any], runtime: str = "vllm") -> dict[str, Any] | None:
    """The efficiency row the speed prediction of ``configuration`` uses (``calculator.engine.perf``, for its
    release and kernel path: a calibration applies only within its scope): ``label`` (``assumed``, ``fitted`` or
    ``calibrated``), ``source`` (for a calibrated row "calibrated from run <id> ...") and ``precision``; ``None``
    when the speed model has no row for the GPU."""
    try:
        from calculator.engine import perf
        from calculator.engine.schemas import EngineInput

        inp = EngineInput(**{k: v for k, v in configuration["engine_input"].items() if k != "speculative_config"})
        gpu = perf.get_gpu(inp.gpu)
        eff = perf.hardware(gpu, None, runtime, scope=perf.calibration_scope(inp)).eff
    except Exception:  # noqa: BLE001 - the comparison rows say why there is no prediction
        return None
    return {"label": eff.label, "source": eff.source, "gpu": gpu.name, "runtime": runtime,
            "precision": perf.PRECISION.get(eff.label, perf.PRECISION["assumed"])}


def _mean_of(agg: dict[str, Any], metric: str) -> float | None:
    """vllm bench serve's mean of ``metric`` (``ttft``, ``tpot``): the statistic the speed model predicts and
    calibration uses, so the report shows one measured figure for each; the median only when no mean was
    recorded."""
    v = agg.get(f"mean_{metric}_ms")
    return v if v is not None else agg.get(f"median_{metric}_ms")


def _local_spec(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The speculative config vLLM is started with: a trained-pair draft id becomes its local directory."""
    if spec and spec.get("model") and workloads.is_pair_model(spec["model"]):
        return {**spec, "model": str(workloads.pair_path(spec["model"]))}
    return spec


def _with_local_draft(argv: list[str], spec: dict[str, Any] | None) -> list[str]:
    local = _local_spec(spec)
    if local is spec or "--speculative-config" not in argv:
        return argv
    argv = list(argv)
    i = argv.index("--speculative-config")
    argv[i + 1] = json.dumps(local, separators=(",", ":"))
    return argv


def block_tokens(configuration: dict[str, Any]) -> int:
    """The KV block the run's prompts must differ within (``UniquePrompts``): 16 tokens, the smallest block vLLM
    picks by default on a GPU, or the run's ``--block-size`` when it is smaller (a larger block only makes the
    check stricter than it needs to be)."""
    return min(16, int(configuration["engine_input"].get("block_size") or 16))


def model_path_for(model_id: str) -> str:
    """Local directory vLLM loads for a built-in or trained-pair id; the id itself otherwise."""
    if workloads.is_pair_model(model_id):
        return str(workloads.pair_path(model_id))
    if tiny_models.is_builtin(model_id):
        return str(tiny_models.ensure_builtin(model_id)[0])
    return model_id


STOP_MARGIN_S = 30.0  # the run's time kept after the last pair: stopping the servers, scoring


def prompts_needed(profile: dict[str, Any]) -> int:
    """Prompts one server is sent in a run at most: ``num_prompts`` per repeat for ``max_repeats`` repeats (the
    profile's ``repeats`` when it allows no more), the first repeat's warm-ups and the later ones'
    (``validator.bench_serve_entry.REWARM``). Every one is new to its server (``UniquePrompts``), so a text
    workload's dataset holds at least this many distinct prompts."""
    from .bench_serve_entry import REWARM

    pairs = max(int(profile.get("repeats", 1)), int(profile.get("max_repeats") or 0))
    return int(profile["num_prompts"]) * pairs + int(profile.get("warmups", 0)) + REWARM * (pairs - 1)


def dataset_pool_size(profile: dict[str, Any]) -> int:
    """Prompts a text workload's dataset file holds: half again ``prompts_needed``, so that draws of new prompts
    (vLLM's custom dataset shuffled with another seed) find them quickly up to the run's last repeat."""
    return prompts_needed(profile) * 3 // 2 + int(profile["num_prompts"])


def paired_bench_argv(targets: list[tuple[str, str]], served_model_name: str, tokenizer: str,
                      profile: dict[str, Any], workload: str, dataset_path: Path | None, result_dir: Path,
                      combined_output: Path, command: list[str] | None = None,
                      pgids: dict[str, int] | None = None, backend: str = "vllm",
                      own_flags: list[str] | None = None, deadline: float | None = None,
                      block_tokens: int = 16) -> list[str]:
    """argv for ``validator.bench_serve_entry`` alternating pairs between the ``targets`` (``[(phase, base_url),
    ...]``): ``profile["repeats"]`` pairs at least, up to ``profile["max_repeats"]`` while the intervals ask for
    more and ``deadline`` (Unix time) allows (``PairSchedule``); the workload's
    dataset flags (``validator.workloads.dataset_args``), greedy, ``--ignore-eos`` so every request produces
    ``output_len`` tokens, the profile's ``--seed``, from which each benchmark call draws its own prompts, every
    one new to its server and the same for both targets of a pair (``UniquePrompts``; ``block_tokens``: the
    servers' smallest KV block). ``backend``: vllm bench serve's request function (``vllm`` and ``openai`` are
    both its OpenAI completions client); ``own_flags``: more of ``bench_serve_entry``'s own flags
    (``--health-path``, ``--no-metrics``)."""
    more = []
    if profile.get("max_repeats") and len(targets) > 1:
        more += ["--max-repeats", str(profile["max_repeats"])]
        if deadline:
            more += ["--deadline", f"{deadline:.0f}"]
    return [
        *(command or runner.BENCH_COMMAND),
        "--repeats", str(profile.get("repeats", 1)), *more, "--prefix-block-tokens", str(block_tokens),
        "--combined-output", str(combined_output),
        "--wait-ready-timeout", str(int(profile.get("wait_ready_timeout_s", 600))),
        *[a for name, url in targets for a in ("--target", f"{name}={url}")],
        *[a for name, pg in (pgids or {}).items() for a in ("--pgid", f"{name}={pg}")], *(own_flags or []), "--",
        "--backend", backend, "--base-url", targets[0][1], "--endpoint", "/v1/completions",
        "--model", served_model_name, "--served-model-name", served_model_name, "--tokenizer", tokenizer,
        *workloads.dataset_args(workload, profile, dataset_path), "--seed", str(profile["seed"]),
        "--num-prompts", str(profile["num_prompts"]), "--max-concurrency", str(profile["concurrency"]),
        "--num-warmups", str(profile.get("warmups", 0)),
        "--request-rate", "inf", "--ignore-eos", "--temperature", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95,99",
        "--save-result", "--save-detailed", "--result-dir", str(result_dir), "--disable-tqdm",
    ]


def paired_verdict(measured: dict[str, Any], hardware: dict[str, Any],
                   caveats: list[str] | None = None) -> dict[str, Any]:
    """``validator.stats.decide`` on the run's pairs (repeat ``i`` of each phase), the speculation
    phase's acceptance and the peak memory of both phases; ``caveats``: what the verdict must say about
    the model that ran (``validator.workloads.verdict_caveats``)."""
    b, s = measured["phases"]["baseline"], measured["phases"]["speculative"]
    pairs = [(rb["bench"], rs["bench"]) for rb, rs in zip(b.get("repeats", []), s.get("repeats", []))]
    measurable = per_token_measurable(b.get("aggregate", {})) and per_token_measurable(s.get("aggregate", {}))
    peak = max(b.get("peak_memory_bytes") or 0, s.get("peak_memory_bytes") or 0)
    if hardware.get("platform") == "cpu":
        peak = (b.get("peak_memory_bytes") or 0) + (s.get("peak_memory_bytes") or 0)  # both servers were up
    v = stats.decide(pairs, s.get("aggregate", {}).get("spec_decode"), peak or None,
                     memory_limit_bytes(hardware), per_token_measurable=measurable, caveats=caveats)
    v["not_evaluated"] = ["Only short prompts become faster (one context length was measured)"]
    return v


def _fold_repeats(measured: dict[str, Any], raw: list[dict[str, Any]], samplers: dict[str, MemorySampler]) -> None:
    """Put the benchmark's finished repeats (``validator.bench_serve_entry``'s entries, in the order they
    ran) into ``measured``: ``order`` and, per phase, ``repeats`` (pair, summary with the repeat's prefix-cache
    counters, acceptance), their ``aggregate``, the prefix-cache hits over them and the peak memory sampled so
    far; the benchmark's ``stop`` (why it ran that many pairs) and ``prompts`` (how they were drawn) when it
    wrote them."""
    if not raw:
        return
    measured["order"] = [r.get("phase") for r in raw]
    for name, sampler in samplers.items():
        ph = measured["phases"][name]
        ph["repeats"] = [{"pair": r.get("pair"),
                          "bench": {**_summary(r["result"], r.get("server_cpu_s")),
                                    **runner.engine_latency(r["metrics_before"], r["metrics_after"]),
                                    **runner.prefix_cache_delta(r["metrics_before"], r["metrics_after"])},
                          "spec_decode": runner.spec_decode_delta(r["metrics_before"], r["metrics_after"])}
                         for r in raw if r.get("phase") == name]
        ph["aggregate"] = aggregate(ph["repeats"])
        ph["prefix_cache"] = prefix_cache_summary(ph["repeats"])
        ph["peak_memory_bytes"] = sampler.peak_bytes
        ph["peak_memory_method"] = sampler.method
    if raw[-1].get("stop"):
        measured["pairs_stop"] = raw[-1]["stop"]
    if raw[-1].get("prompts"):
        measured["prompt_draws"] = raw[-1]["prompts"]


def prefix_cache_summary(repeats: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The prefix-cache counters over a phase's measured repeats (``vllm:prefix_cache_queries`` / ``_hits``, prompt
    tokens looked up and found cached, warm-ups left out): ``{"query_tokens", "hit_tokens", "hit_share"}``; None
    when the server exposed none (SGLang, llama.cpp, a stand-in)."""
    rows = [r["bench"] for r in repeats if r["bench"].get("prefix_cache_query_tokens") is not None]
    if not rows:
        return None
    q = sum(r["prefix_cache_query_tokens"] for r in rows)
    h = sum(r["prefix_cache_hit_tokens"] for r in rows)
    return {"query_tokens": q, "hit_tokens": h, "hit_share": h / q if q else 0.0}


def prompts_note(measured: dict[str, Any], workload: str) -> str:
    """The run report's sentence on the prompts (README "Validation runs": each is new to its server) and what the
    servers' prefix-cache counters saw."""
    draws = measured.get("prompt_draws") or {}
    sent = draws.get("sent") or {}
    text = ("every request's prompt was new to the server it went to: each benchmark call (warm-ups too) drew its "
            "own prompts" + (" from vLLM's random dataset with its own --seed" if workload == "random" else
                             f" from the {workload} dataset") +
            (f", none repeating the first {draws['key_tokens']} tokens of an earlier one" if draws.get("key_tokens")
             else "") +
            "; both servers of a pair got the same prompts (separate servers, separate caches). Prefix caching "
            "stayed on as configured: the prompts, not a flag, keep TTFT a full prefill")
    if sent:
        text += " (" + ", ".join(f"{n} prompts to {t}" for t, n in sent.items()) + ")"
    hits = {name: ph.get("prefix_cache") for name, ph in (measured.get("phases") or {}).items()
            if ph.get("prefix_cache")}
    if hits:
        text += ". vLLM /metrics over the measured requests: " + ", ".join(
            f"{name} {h['hit_tokens']:,} of {h['query_tokens']:,} prompt tokens from the prefix cache"
            for name, h in hits.items())
        if any(h["hit_tokens"] for h in hits.values()):
            text += (" — cached tokens were not prefilled, so TTFT is lower than a prefill of the whole prompt "
                     "(shared text such as a chat template's, or a block the prompts have in common)")
    return text + "."


def acceptance_summary(speculative: dict[str, Any]) -> dict[str, Any]:
    """The run's acceptance from the speculation phase's ``/metrics`` counter deltas (``aggregate``):
    ``acceptance_rate`` = accepted / drafted tokens, ``mean_acceptance_length`` = 1 + accepted / drafts,
    the three counts, and ``source``. All None when the server exposed no speculative-decoding counters."""
    acc = speculative.get("aggregate", {}).get("spec_decode") or {}
    out = {k: acc.get(k) for k in ("acceptance_rate", "mean_acceptance_length", "num_drafts", "num_draft_tokens",
                                   "num_accepted_tokens")}
    out["source"] = ("vLLM /metrics: vllm:spec_decode_num_accepted_tokens / num_draft_tokens / num_drafts counter "
                     "deltas over the speculation repeats")
    return out


def _keep_finished(measured: dict[str, Any], bench: "runner.BenchProcess", samplers: dict[str, MemorySampler],
                   options: dict[str, Any], persisted: dict[str, int]) -> None:
    """Save the repeats the benchmark has finished so far (``on_phase``), when it has finished another one since
    the last call (``persisted["repeats"]``): a crash later keeps them."""
    raw = bench.finished()
    if len(raw) > persisted["repeats"]:
        persisted["repeats"] = len(raw)
        _fold_repeats(measured, raw, samplers)
        options.get("on_phase", lambda m: None)(measured)


def _failed(e: RunnerError, measured: dict[str, Any], bench: "runner.BenchProcess | None",
            samplers: dict[str, MemorySampler], servers: dict[str, ServerProcess]) -> None:
    """A run step failed: keep the repeats that finished (a timeout or a failed repeat), the servers' last log
    lines when the error has none, and the measurements on the error."""
    if bench is not None and samplers:
        _fold_repeats(measured, bench.finished(), samplers)
    if not e.log_tail:
        e.log_tail = "\n".join(s.log_tail(3000) for s in servers.values())
    e.measured = measured


def _stop(measured: dict[str, Any], bench: "runner.BenchProcess | None", servers: dict[str, ServerProcess],
          on_process: Callable[..., None], options: dict[str, Any]) -> None:
    """Stop the benchmark and every server (their process groups), recording each as gone."""
    if bench is not None:
        bench.stop()
        on_process("bench", "paired", None)
    for name, server in servers.items():
        measured["phases"][name]["stopped"] = server.stop(options.get("stop_grace_s", 10.0))
        on_process("server", name, None)
    options.get("on_server", lambda pgid: None)(None)


def run_sequence(configuration: dict[str, Any], prediction: dict[str, Any], workdir: Path,
                 reporter: Reporter, hardware: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """Paired, interleaved A/B: the baseline and the speculation server run side by side and the
    benchmark alternates between them (A B A B ...), ``profile["repeats"]``
    pairs on the same seeded prompts, context and concurrency (``configuration["workload"]``).

    ``options``: ``wall_clock_s`` (whole run), ``startup_timeout_s``, ``bench_timeout_s``,
    ``server_command``/``bench_command`` (argv prefixes replacing vLLM's), ``on_server(pgid|None)``,
    ``on_process(role, phase, pgid|None)`` (each child process group as it starts and stops: the two
    servers as ``("server", "baseline"|"speculative")``, the benchmark as ``("bench", "paired")``) and
    ``on_phase(measured)`` (each time the benchmark has finished another repeat, with the repeats so far,
    and once it has finished them all: a crash keeps the finished repeats).
    Returns the measured dict: ``phases`` (``baseline``/``speculative``: startup, repeats, aggregate,
    peak memory), ``order``, ``comparison``, ``verdict`` (``validator.stats.decide``), ``acceptance``,
    ``calibration``. Raises ``RunnerError`` (``RunTimeout``, ``Cancelled``) with the log tail; both
    servers' process groups are always killed before returning or raising."""
    deadline = Deadline(options["wall_clock_s"])
    run_wall0 = time.time()
    load_before = runner.load_sample()  # before the servers: what else the host is doing (runner.host_load)
    platform = configuration["platform"]
    on_process = options.get("on_process") or (lambda role, phase, pgid: None)
    workdir.mkdir(parents=True, exist_ok=True)
    model_id = configuration["run_model"]
    model_path = model_path_for(model_id)
    profile = {**configuration["profile"], "wait_ready_timeout_s": options["startup_timeout_s"]}
    workload = configuration.get("workload") or "random"
    base_input = {k: v for k, v in configuration["engine_input"].items() if k != "speculative_config"}
    # the command as the calculator shows it (model id); server_argv swaps in the local path
    serve_base = runner.serve_argv(base_input, model_id, configuration.get("revision"))
    spec_input = {**base_input, "speculative_config": configuration["spec_config"]}
    serve_spec = runner.serve_argv(spec_input, model_id, configuration.get("revision"))
    measured: dict[str, Any] = {"phases": {}, "hardware": hardware, "workload": workload,
                                "design": "paired, interleaved A/B (A B A B ...) on identical traffic"}
    env = dict(os.environ)
    # vLLM's engine sockets (ipc://$VLLM_RPC_BASE_PATH/<uuid>, vllm/utils/network_utils.py get_open_zmq_ipc_path) go in
    # a directory of this run, removed after it, not in /tmp where every run left a few behind
    rpc_dir = tempfile.mkdtemp(prefix="llmcalc-rpc-")
    env["VLLM_RPC_BASE_PATH"] = rpc_dir
    kv_bytes = configuration["engine_input"].get("kv_cache_memory_bytes")
    if platform == "cpu" and kv_bytes:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_bytes // GiB)
    if platform == "cuda":  # the GPUs the worker was matched on (validator.capabilities.can_take)
        from . import capabilities

        inp = configuration["engine_input"]
        env.update(capabilities.visible_devices_env(
            hardware, inp.get("gpu", ""),
            int(inp.get("tensor_parallel_size", 1) or 1) * int(inp.get("pipeline_parallel_size", 1) or 1), os.environ))
    host = "127.0.0.1"
    servers: dict[str, ServerProcess] = {}
    samplers: dict[str, MemorySampler] = {}
    t_start = time.monotonic()
    bench = None
    pgids: list[int] = []
    # a CPU run also watches what other work takes from the host while it lasts (its timings are the CPUs')
    watch = runner.CpuWatch().start() if platform == "cpu" else None
    if watch is not None:
        on_process = watch.track(on_process)
    try:
        for name, serve in (("baseline", serve_base), ("speculative", serve_spec)):
            port = runner.free_port(host)
            argv = runner.server_argv(serve, model_path, model_id, host, port,
                                      command=options.get("server_command"), cpu=platform == "cpu")
            argv = _with_local_draft(argv, configuration.get("spec_config"))
            server = ServerProcess(argv, workdir / f"{name}-server.log", env, host, port)
            measured["phases"][name] = {"name": name, "serve_argv": serve, "argv": argv,
                                        "env": {k: env[k] for k in ("VLLM_CPU_KVCACHE_SPACE", "CUDA_DEVICE_ORDER",
                                                                    "CUDA_VISIBLE_DEVICES") if k in env}}
            server.start()
            servers[name] = server
            on_process("server", name, server.pgid)
            pgids.append(server.pgid)
            options.setdefault("on_server", lambda pgid: None)(server.pgid)
            samplers[name] = MemorySampler(platform, server.pgid)
        dataset = None
        if workload in workloads.TEXT_WORKLOADS:
            dataset = workloads.write_dataset(workload, model_path, profile["input_len"], dataset_pool_size(profile),
                                              profile["seed"], workdir / f"{workload}.jsonl")
        combined = workdir / "bench.json"
        targets = [(n, servers[n].base_url) for n in ("baseline", "speculative")]
        # no extra pair past the run's wall clock or the bench's timeout (less the time to stop and score), nor past
        # the profile's budget for the whole run (pairs_budget_s: the CPU's three minutes)
        bench_end = time.time() + min(deadline.left, options["bench_timeout_s"]) - STOP_MARGIN_S
        if profile.get("pairs_budget_s"):
            bench_end = min(bench_end, run_wall0 + profile["pairs_budget_s"])
        bench_cmd = paired_bench_argv(targets, model_id, model_path, profile, workload, dataset,
                                      workdir / "results", combined, command=options.get("bench_command"),
                                      pgids={n: s.pgid for n, s in servers.items()} if platform == "cpu" else None,
                                      deadline=bench_end, block_tokens=block_tokens(configuration))
        bench = runner.BenchProcess(bench_cmd, workdir / "bench.log", combined)
        on_process("bench", "paired", bench.proc.pid)
        measured["bench_argv"] = bench_cmd
        state = {"what": "starting vLLM (baseline and speculation side by side)", "p": 0.0}
        budget = max(1.0, 2 * options.get("phase_budget_s", 60.0))

        persisted = {"repeats": 0}

        def sample() -> None:
            for m in samplers.values():
                m.sample()
            bench.check_alive()
            _keep_finished(measured, bench, samplers, options, persisted)
            frac = min(0.95, (time.monotonic() - t_start) / budget)
            reporter(state["what"], frac, servers["speculative"].log_tail(4000))

        for name, server in servers.items():
            measured["phases"][name]["startup_s"] = round(
                server.wait_healthy(options["startup_timeout_s"], deadline, sample), 2)
            measured["phases"][name]["startup"] = runner.parse_startup_log(server.log_text())
        upto = (f" (up to {profile['max_repeats']} while the intervals are wide)"
                if (profile.get("max_repeats") or 0) > profile["repeats"] else "")
        state["what"] = (f"benchmarking: {profile['repeats']} pairs{upto} x {profile['num_prompts']} prompts "
                         f"({workload}), concurrency {profile['concurrency']}, A/B interleaved")
        raw = bench.wait(deadline, sample, options["bench_timeout_s"])
        for m in samplers.values():
            m.sample()
        _fold_repeats(measured, raw, samplers)
        options.get("on_phase", lambda m: None)(measured)  # persisted now: a crash later keeps the measurements
    except RunnerError as e:
        _failed(e, measured, bench, samplers, servers)
        raise
    finally:
        _stop(measured, bench, servers, on_process, options)
        shutil.rmtree(rpc_dir, ignore_errors=True)
        during = watch.stop() if watch is not None else None
    measured["host_load"] = runner.host_load(load_before, runner.load_sample(), platform, during=during)
    reporter("scoring", 0.98)
    baseline, speculative = measured["phases"]["baseline"], measured["phases"]["speculative"]
    from . import calibration

    # the speed prediction uses the newest calibration of this runtime and GPU row from an earlier run, as the
    # site's pages do (validator.apps installs it per request; a worker or `validate --wait` serves no requests)
    calibration.apply_latest(force=True)
    measured["speed_model"] = speed_basis(configuration)
    measured["comparison"] = compare(prediction, baseline.get("startup", {}))
    measured["comparison"] += speed_comparison(configuration, baseline, speculative)
    what_ran = workloads.served_target_note(model_id)
    if what_ran:
        measured["what_ran"] = what_ran
    measured["verdict"] = paired_verdict(measured, hardware, caveats=[what_ran["short"]] if what_ran else None)
    measured["acceptance"] = acceptance_summary(speculative)
    measured["prompts"] = prompts_note(measured, workload)
    measured["calibration"] = calibration.hold_if_overloaded(calibration.from_run(configuration, baseline, hardware),
                                                             measured["host_load"])
    from . import capabilities

    measured["worker"] = {"host": hardware.get("host"), "hardware": capabilities.hardware_label(hardware),
                          "runtimes": capabilities.installed_runtimes()}
    measured["elapsed_s"] = round(time.monotonic() - t_start, 1)
    return measured


def run_llamacpp_sequence(configuration: dict[str, Any], workdir: Path, reporter: Reporter,
                          hardware: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """A llama.cpp run on the CPU: write the run's GGUF (``validator.llamacpp.write_run_gguf``), start
    ``python -m llama_cpp.server`` as a child process group (``runner.ServerProcess``: same process group,
    start-up timeout, deadline and sweep records as vLLM's servers), wait until it lists its model, read its
    start-up log, predict the memory plan for the GGUF with the CPU features the build logged
    (``calculator.runtimes.llamacpp.memory.plan``) and compare it with the log; then run vLLM's serving
    benchmark against it (``--backend openai``: its OpenAI completions client; ``--no-metrics``: the server
    has no ``/metrics``) ``profile["repeats"]`` times, and compare the mean TTFT / TPOT / output tok/s with
    ``calculator.runtimes.llamacpp.speed.speed``. Baseline only: ``validator.llamacpp.DRAFT_NOTE``.

    ``options`` as ``run_sequence``'s. Returns the measured dict (``phases.baseline``, ``comparison``,
    ``prediction``, ``runtime``, ``worker``, no verdict: there is no A/B). Raises ``RunnerError`` with the
    log tail; the server's and the benchmark's process groups are always killed before returning or raising."""
    from . import capabilities, llamacpp

    release, why = llamacpp.server_available()
    if release is None:
        raise RunnerError(f"llama.cpp runs are not available on this worker: {why}")
    deadline = Deadline(options["wall_clock_s"])
    load_before = runner.load_sample()
    on_process = options.get("on_process") or (lambda role, phase, pgid: None)
    workdir.mkdir(parents=True, exist_ok=True)
    model_id = configuration["run_model"]
    lc = configuration["llamacpp"]
    profile = {**configuration["profile"], "wait_ready_timeout_s": options["startup_timeout_s"]}
    workload = configuration.get("workload") or "random"
    reporter("writing the GGUF", 0.01)
    tokenizer_dir = model_path_for(model_id)
    gguf = llamacpp.write_run_gguf(Path(tokenizer_dir), configuration["engine_input"]["hf_config"],
                                   workdir / "model.gguf")
    host = "127.0.0.1"
    port = runner.free_port(host)
    argv = llamacpp.server_argv(str(gguf), model_id, host, port, lc["settings"], command=options.get("llamacpp_command"))
    server = ServerProcess(argv, workdir / "baseline-server.log", dict(os.environ), host, port,
                           health_path=llamacpp.HEALTH_PATH, name="llama.cpp")
    phase: dict[str, Any] = {"name": "baseline", "serve_argv": lc.get("command") or [], "argv": argv, "env": {}}
    measured: dict[str, Any] = {"phases": {"baseline": phase}, "hardware": hardware, "workload": workload,
                                "runtime": "llama.cpp", "runtime_release": f"llama-cpp-python {release}",
                                "design": "one llama_cpp.server (baseline only: no speculative phase)",
                                "gguf": {"what": lc["gguf_note"]}}
    t_start = time.monotonic()
    bench = None
    servers = {"baseline": server}
    samplers: dict[str, MemorySampler] = {}
    watch = runner.CpuWatch().start()  # what other work takes from the host while the run lasts
    on_process = watch.track(on_process)
    try:
        server.start()
        on_process("server", "baseline", server.pgid)
        options.setdefault("on_server", lambda pgid: None)(server.pgid)
        sampler = samplers["baseline"] = MemorySampler("cpu", server.pgid, server="llama.cpp")
        dataset = None
        if workload in workloads.TEXT_WORKLOADS:
            dataset = workloads.write_dataset(workload, tokenizer_dir, profile["input_len"], dataset_pool_size(profile),
                                              profile["seed"], workdir / f"{workload}.jsonl")
        combined = workdir / "bench.json"
        bench_cmd = paired_bench_argv([("baseline", server.base_url)], model_id, tokenizer_dir, profile, workload,
                                      dataset, workdir / "results", combined, command=options.get("bench_command"),
                                      pgids={"baseline": server.pgid}, backend="openai",
                                      own_flags=["--health-path", llamacpp.HEALTH_PATH, "--no-metrics",
                                                 "--no-request-id"])
        bench = runner.BenchProcess(bench_cmd, workdir / "bench.log", combined)
        on_process("bench", "paired", bench.proc.pid)
        measured["bench_argv"] = bench_cmd
        state = {"what": "starting llama.cpp (llama_cpp.server)"}
        budget = max(1.0, options.get("phase_budget_s", 60.0))
        persisted = {"repeats": 0}

        def sample() -> None:
            sampler.sample()
            bench.check_alive()
            _keep_finished(measured, bench, samplers, options, persisted)
            reporter(state["what"], min(0.95, (time.monotonic() - t_start) / budget), server.log_tail(4000))

        phase["startup_s"] = round(server.wait_healthy(options["startup_timeout_s"], deadline, sample), 2)
        logged = llamacpp.parse_startup_log(server.log_text())
        phase["startup"] = logged
        state["what"] = (f"benchmarking: {profile['repeats']} repeats x {profile['num_prompts']} prompts "
                         f"({workload}), concurrency {profile['concurrency']}")
        raw = bench.wait(deadline, sample, options["bench_timeout_s"])
        sampler.sample()
        _fold_repeats(measured, raw, samplers)
        options.get("on_phase", lambda m: None)(measured)
    except RunnerError as e:
        _failed(e, measured, bench, samplers, servers)
        raise
    finally:
        _stop(measured, bench, servers, on_process, options)
        during = watch.stop()
    measured["host_load"] = runner.host_load(load_before, runner.load_sample(), "cpu", during=during)
    reporter("scoring", 0.98)
    meta, plan = llamacpp.predict(gguf, lc["settings"], logged.get("cpu_features"))
    measured["prediction"] = {"kv_cache_mib": round(plan.kv_bytes / llamacpp.MiB, 2), "log_lines": plan.log_lines(),
                              "cpu_features": logged.get("cpu_features"),
                              "source": "calculator.runtimes.llamacpp.memory.plan for the run's GGUF (device CPU, "
                                        "n_gpu_layers 0) with the CPU features llama.cpp's build logged"}
    measured["comparison"] = llamacpp.memory_comparison(plan, logged)
    measured["comparison"] += llamacpp.speed_comparison(meta, plan, configuration["profile"],
                                                        phase.get("aggregate", {}), configuration["profile"]["concurrency"])
    measured["worker"] = {"host": hardware.get("host"), "hardware": capabilities.hardware_label(hardware),
                          "runtimes": capabilities.installed_runtimes()}
    measured["elapsed_s"] = round(time.monotonic() - t_start, 1)
    return measured


def _sglang_acceptance(speculative: dict[str, Any]) -> dict[str, Any]:
    """SGLang's acceptance length: ``avg_spec_accept_length`` of ``/server_info`` as sglang.bench_serving read it
    after the last repeat. SGLang keeps it as a running ratio since the server started, accepted tokens plus one per
    request and step over request-steps (0.5.10.post1 managers/scheduler.py:3082-3084,
    observability/scheduler_metrics_mixin.py:181-182): the same definition as vLLM's 1 + accepted / drafts, over
    the warm-ups and every repeat (per-repeat counts are not exposed)."""
    repeats = speculative.get("repeats") or []
    length = repeats[-1]["bench"].get("accept_length") if repeats else None
    return {"mean_acceptance_length": length, "acceptance_rate": None, "num_drafts": None, "num_draft_tokens": None,
            "num_accepted_tokens": None,
            "source": "SGLang /server_info internal_states avg_spec_accept_length after the last repeat (a running "
                      "ratio since the server started: warm-ups and all repeats)"}


def run_sglang_sequence(configuration: dict[str, Any], workdir: Path, reporter: Reporter,
                        hardware: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """An SGLang run on a GPU worker (``validator.sglang``): fetch the tokenizer's data files, then per phase of
    ``configuration["sglang"]["phases"]`` (the baseline; with speculation also the speculative server, one after
    the other: each reserves ``--mem-fraction-static`` of the GPUs) start ``python -m sglang.launch_server`` with
    the calculator's command as a child process group (``runner.ServerProcess``), read its start-up log
    (``validator.sglang.parse_startup_log``), run ``sglang.bench_serving`` ``profile["repeats"]`` times through
    ``validator.bench_serve_entry --client sglang``, stop it. Then predict each phase for the worker's SGLang
    release (``validator.config.predict_sglang``) and compare: the baseline's start-up figures
    (``validator.sglang.memory_comparison``), each phase's mean TTFT / TPOT / output tok/s, and with speculation
    the acceptance length, the TPOT speedup and a verdict (``paired_verdict`` on repeat ``i`` of each phase).

    ``options`` as ``run_sequence``'s, plus ``sglang_command`` (argv prefix in place of ``python -m
    sglang.launch_server``; when given, the worker's own SGLang is not required) and ``sglang_bench_command``
    (in place of ``python -m sglang.bench_serving``). Raises ``RunnerError`` with the log tail; every process
    group is killed before returning or raising."""
    from calculator.runtimes.sglang.releases import COVERED

    from . import capabilities
    from . import sglang as sg
    from .config import predict_sglang, sglang_for_release

    release = None
    if options.get("sglang_command") is None:
        release, why = sg.server_available(hardware)
        if release is None:
            raise RunnerError(f"SGLang runs are not available on this worker: {why}")
    covered = release if release in COVERED else None
    command_note = ""
    if covered:  # the command the worker's prediction describes (validator.config.sglang_for_release)
        configuration, command_note = sglang_for_release(configuration, covered)
    deadline = Deadline(options["wall_clock_s"])
    load_before = runner.load_sample()
    on_process = options.get("on_process") or (lambda role, phase, pgid: None)
    workdir.mkdir(parents=True, exist_ok=True)
    model_id = configuration["run_model"]
    revision = configuration.get("revision")
    profile = {**configuration["profile"], "wait_ready_timeout_s": options["startup_timeout_s"]}
    reporter("fetching the tokenizer's data files", 0.01)
    try:
        tokenizer = sg.tokenizer_files(model_id, revision, workdir / "tokenizer")
    except Exception as e:  # noqa: BLE001 - the Hub's errors, a tokenizer that needs code: the run's error
        raise RunnerError(f"the benchmark's tokenizer could not be prepared: {e}") from e
    # the prompts as token ids when the worker's own sglang.bench_serving can send them (validator.sglang.bench_args);
    # a separate bench command (VALIDATOR_SGLANG_BENCH_COMMAND) is not inspected: text, which every release sends
    prompt_ids = not options.get("sglang_bench_command") and sg.sends_prompt_ids(
        [sg.module_source(m) for m in sg.SAMPLER_MODULES])
    measured: dict[str, Any] = {
        "phases": {}, "hardware": hardware, "workload": "random", "runtime": "sglang",
        "prompt_tokens": ("exact: random token ids sent as ids (sglang.bench_serving --tokenize-prompt)" if prompt_ids
                          else "approximate: random token ids decoded to text, which the server tokenizes again "
                               "(this sglang.bench_serving cannot send ids: before 0.5.9 its ids are numpy integers)"),
        "runtime_release": f"sglang {release}" if release else "sglang (the worker's VALIDATOR_SGLANG_COMMAND)",
        "prompts": ("every request's prompt was new to the server: each repeat drew its own random token ids "
                    "(--seed plus the repeat's index; repeat r of either phase the same), and sglang.bench_serving "
                    "--flush-cache emptied SGLang's radix cache after the warm-ups, which send the repeat's first "
                    "prompt. The radix cache stayed on as configured: the prompts, not a flag, keep TTFT a full "
                    "prefill."),
        "design": ("one SGLang server per phase, one after the other (baseline, then speculative decoding), "
                   "sglang.bench_serving on the same seeded random token ids"
                   if len(configuration["sglang"]["phases"]) > 1 else
                   "one SGLang server as configured, sglang.bench_serving on seeded random token ids")}
    t_start = time.monotonic()
    host = "127.0.0.1"
    phases = configuration["sglang"]["phases"]
    # the GPUs the worker was matched on (validator.capabilities.can_take), not whichever CUDA lists first
    gpu_env = capabilities.visible_devices_env(hardware, configuration["engine_input"].get("gpu", ""),
                                               int(configuration["sglang"].get("gpus", 1)), os.environ)
    budget = max(1.0, options.get("phase_budget_s", 300.0))
    for n, spec_phase in enumerate(phases):
        name = spec_phase["name"]
        port = runner.free_port(host)
        argv = sg.server_argv(spec_phase["command"], host, port, prefix=options.get("sglang_command"),
                              revision=revision)
        server = ServerProcess(argv, workdir / f"{name}-server.log", {**os.environ, **gpu_env}, host, port,
                               health_path=sg.HEALTH_PATH, name="SGLang")
        phase: dict[str, Any] = {"name": name, "serve_argv": spec_phase["command"], "argv": argv, "env": gpu_env}
        measured["phases"][name] = phase
        combined = workdir / f"bench-{name}.json"
        own = ["--client", "sglang", "--health-path", sg.HEALTH_PATH]
        if options.get("sglang_bench_command"):
            own += ["--client-command", json.dumps(options["sglang_bench_command"])]
        bench_cmd = [*(options.get("bench_command") or runner.BENCH_COMMAND),
                     "--repeats", str(profile["repeats"]), "--combined-output", str(combined),
                     "--wait-ready-timeout", str(int(profile["wait_ready_timeout_s"])),
                     "--target", f"{name}={server.base_url}", *own, "--",
                     *sg.bench_args(str(tokenizer), profile, prompt_ids)]
        bench = None
        samplers: dict[str, MemorySampler] = {}
        servers = {name: server}
        try:
            server.start()
            on_process("server", name, server.pgid)
            options.setdefault("on_server", lambda pgid: None)(server.pgid)
            sampler = samplers[name] = MemorySampler("cuda", server.pgid, server="SGLang")
            bench = runner.BenchProcess(bench_cmd, workdir / f"bench-{name}.log", combined)
            on_process("bench", name, bench.proc.pid)
            phase["bench_argv"] = bench_cmd
            state = {"what": f"starting SGLang ({name}, {n + 1} of {len(phases)})"}
            persisted = {"repeats": 0}

            def sample(sampler=sampler, bench=bench, server=server, samplers=samplers, persisted=persisted,
                       state=state, n=n) -> None:
                sampler.sample()
                bench.check_alive()
                _keep_finished(measured, bench, samplers, options, persisted)
                frac = (n + min(0.95, (time.monotonic() - t_start) / budget / len(phases))) / len(phases)
                reporter(state["what"], min(0.95, frac), server.log_tail(4000))

            phase["startup_s"] = round(server.wait_healthy(options["startup_timeout_s"], deadline, sample), 2)
            phase["startup"] = sg.parse_startup_log(server.log_text())
            state["what"] = (f"benchmarking {name}: {profile['repeats']} repeats x {profile['num_prompts']} prompts, "
                             f"concurrency {profile['concurrency']}")
            raw = bench.wait(deadline, sample, options["bench_timeout_s"])
            sampler.sample()
            _fold_repeats(measured, raw, samplers)
            options.get("on_phase", lambda m: None)(measured)
        except RunnerError as e:
            # a request SGLang refused: the reason is in the server's log only (validator.sglang.bench_failure)
            if bench is not None and (why := sg.last_server_error(server.log_text())):
                e.args = (f"{e.args[0]}; SGLang's log: {why}", *e.args[1:])
            _failed(e, measured, bench, samplers, servers)
            raise
        finally:
            if bench is not None:
                bench.stop()
                on_process("bench", name, None)
            phase["stopped"] = server.stop(options.get("stop_grace_s", 10.0))
            on_process("server", name, None)
            options.get("on_server", lambda pgid: None)(None)
    measured["order"] = [p["name"] for p in phases]
    measured["host_load"] = runner.host_load(load_before, runner.load_sample(), "cuda")
    reporter("scoring", 0.98)
    if command_note:
        measured["command_note"] = command_note
    predicted, why = predict_sglang(configuration, covered)
    measured["prediction"] = predicted
    if release and not covered:
        measured["prediction_note"] = (f"the worker runs sglang {release}, which the calculator does not cover: "
                                       f"the prediction is for {configuration['sglang']['release']}")
    base = measured["phases"]["baseline"]
    pb = predicted.get("baseline") or {}
    rows = sg.memory_comparison(pb.get("memory") or {}, base.get("startup", {})) if pb else []
    b_agg = base.get("aggregate", {})
    rows += sg.speed_comparison(pb.get("speed"), pb.get("speed_error") or why, b_agg, speculative=False)
    if "speculative" in measured["phases"]:
        s_agg = measured["phases"]["speculative"].get("aggregate", {})
        ps = predicted.get("speculative") or {}
        measured["acceptance"] = _sglang_acceptance(measured["phases"]["speculative"])
        spec_rows = sg.speed_comparison(ps.get("speed"), ps.get("speed_error") or why,
                                        {**s_agg, "accept_length": measured["acceptance"]["mean_acceptance_length"]},
                                        speculative=True)
        for row in spec_rows:
            row["field"] = "spec_" + row["field"] if not row["field"].startswith("mean_acceptance") else row["field"]
        speed = ps.get("speed") or {}
        if not speed.get("spec_speedup"):
            for row in spec_rows:
                if row["field"] in ("spec_tpot_ms", "spec_output_tokens_per_s", "mean_acceptance_length"):
                    row.update(predicted=None, error=None, error_pct=None,
                               note="no typical acceptance figure for this method: give acceptance_rate to predict it")
        paired = paired_speedup(base, measured["phases"]["speculative"], True)
        measured_speedup = (paired["speedup"] if paired else b_agg["mean_tpot_ms"] / s_agg["mean_tpot_ms"]
                            if b_agg.get("mean_tpot_ms") and s_agg.get("mean_tpot_ms") else None)
        spec_rows.append(_row("spec_speedup", "x", speed.get("spec_speedup"), measured_speedup, "; ".join(
            n for n in ("" if speed.get("spec_speedup") else "no typical acceptance figure for this method",
                        paired["note"] + " (the phases ran one after the other)" if paired else "") if n)))
        if paired:
            spec_rows[-1].update(ci_low=paired["ci_low"], ci_high=paired["ci_high"], pairs=paired["pairs"])
        rows += spec_rows
        measured["verdict"] = paired_verdict(measured, hardware, caveats=[
            "the two phases ran one after the other (SGLang reserves most of the GPU), not interleaved",
            "random token ids: drafting is harder than on real text, so the acceptance is a lower bound"])
    measured["comparison"] = rows
    measured["worker"] = {"host": hardware.get("host"), "hardware": capabilities.hardware_label(hardware),
                          "runtimes": capabilities.installed_runtimes()}
    measured["elapsed_s"] = round(time.monotonic() - t_start, 1)
    return measured
