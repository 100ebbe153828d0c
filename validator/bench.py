"""The validation sequence: baseline, then speculative decoding, same prompts, context and concurrency.

``run_sequence(configuration, workdir, reporter, ...)`` starts vLLM once per phase (``validator.runner``),
reads its startup log, runs vLLM's serving benchmark ``repeats`` times on a seeded random prompt set,
takes the speculative-decoding counters from ``/metrics`` before and after each repeat, samples peak
memory, and returns the measured dict. ``verdict(phases)`` applies the field guide's benchmark rule:
keep speculation only when ITL and output tok/s improve beyond the run-to-run spread and neither TTFT
nor p95 regress nor memory approaches the limit; it names the stop signs that fired.
``compare(prediction, startup)`` scores the prediction field by field.
"""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Protocol

from calculator.metadata import builtin as tiny_models

from . import runner
from .runner import Deadline, MemorySampler, RunnerError, ServerProcess

GiB = 2**30
PERCENTILE_METRICS = ("ttft", "tpot", "itl", "e2el")

# Stop signs (field guide "Signal / Good sign / Stop sign" table).
STOP_LOW_ACCEPTANCE = "Low acceptance adds overhead"
STOP_TTFT = "First token is slower than baseline"
STOP_DECODE = "Decode (ITL / output tok/s) does not improve beyond the run-to-run spread"
STOP_P95 = "Worse tail latency (p95)"
STOP_MEMORY = "Near OOM: peak memory close to the limit"
LOW_ACCEPTANCE_RATE = 0.3       # drafted tokens accepted below 30 %
MEMORY_NEAR_LIMIT = 0.9         # peak above 90 % of the device (or host) memory


class Reporter(Protocol):
    def __call__(self, stage: str, progress: float, log_tail: str | None = None, **fields: Any) -> None: ...


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    """The figures we keep from one ``vllm bench serve`` result (ms, tok/s, per-request arrays)."""
    out: dict[str, Any] = {k: result.get(k) for k in (
        "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
        "request_throughput", "output_throughput", "total_token_throughput", "max_output_tokens_per_s")}
    for m in PERCENTILE_METRICS:
        for stat in ("mean", "median", "p50", "p95", "p99"):
            key = f"{stat}_{m}_ms"
            if key in result:
                out[key] = result[key]
    out["ttfts_ms"] = [round(x * 1000, 3) for x in result.get("ttfts") or []]
    out["e2els_ms"] = [round(x * 1000, 3) for x in result.get("latencies") or []]
    return out


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


def run_phase(name: str, serve: list[str], configuration: dict[str, Any], model_path: str, workdir: Path,
              deadline: Deadline, tick: Callable[[str, str], None], options: dict[str, Any]) -> dict[str, Any]:
    """One phase: start the server, read its startup log, benchmark ``repeats`` times, stop it."""
    platform = configuration["platform"]
    host = "127.0.0.1"
    port = runner.free_port(host)
    argv = runner.server_argv(serve, model_path, configuration["run_model"], host, port,
                              command=options.get("server_command"), cpu=platform == "cpu")
    env = dict(os.environ)
    kv_bytes = configuration["engine_input"].get("kv_cache_memory_bytes")
    if platform == "cpu" and kv_bytes:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_bytes // GiB)
    log_path = workdir / f"{name}-server.log"
    server = ServerProcess(argv, log_path, env, host, port)
    phase: dict[str, Any] = {"name": name, "serve_argv": serve, "argv": argv,
                             "env": {k: env[k] for k in ("VLLM_CPU_KVCACHE_SPACE",) if k in env}}
    # every child process group is recorded on the run as it starts (the sweep kills what a crashed
    # worker left) and unrecorded once stopped: options["on_process"](role, phase, pgid | None)
    on_process = options.get("on_process") or (lambda role, phase, pgid: None)
    server.start()
    on_process("server", name, server.pgid)
    options.setdefault("on_server", lambda pgid: None)(server.pgid)
    memory = MemorySampler(platform, server.pgid)
    profile = {**configuration["profile"], "wait_ready_timeout_s": options["startup_timeout_s"]}
    combined = workdir / f"{name}-bench.json"
    bench_cmd = runner.bench_argv(server.base_url, configuration["run_model"], model_path, profile,
                                  workdir / f"{name}-results", combined, command=options.get("bench_command"))
    try:
        bench = runner.BenchProcess(bench_cmd, workdir / f"{name}-bench.log", combined)
    except BaseException:
        server.stop(options.get("stop_grace_s", 10.0))
        on_process("server", name, None)
        raise
    on_process("bench", name, bench.proc.pid)

    state = {"what": "starting vLLM"}

    def sample() -> None:
        memory.sample()
        bench.check_alive()
        tick(state["what"], server.log_tail(4000))

    try:
        phase["startup_s"] = round(server.wait_healthy(options["startup_timeout_s"], deadline, sample), 2)
        phase["startup"] = runner.parse_startup_log(server.log_text())
        state["what"] = (f"benchmarking ({profile['repeats']} x {profile['num_prompts']} prompts, "
                         f"concurrency {profile['concurrency']})")
        raw = bench.wait(deadline, sample, options["bench_timeout_s"])
        phase["repeats"] = [{"bench": _summary(r["result"]),
                             "spec_decode": runner.spec_decode_delta(r["metrics_before"], r["metrics_after"])}
                            for r in raw]
        phase["aggregate"] = aggregate(phase["repeats"])
        memory.sample()
        phase["peak_memory_bytes"] = memory.peak_bytes
        phase["peak_memory_method"] = memory.method
    except RunnerError as e:
        if not e.log_tail:
            e.log_tail = server.log_tail()
        raise
    finally:
        bench.stop()
        on_process("bench", name, None)
        phase["stopped"] = server.stop(options.get("stop_grace_s", 10.0))
        on_process("server", name, None)
        options["on_server"](None)
    return phase


def memory_limit_bytes(hardware: dict[str, Any]) -> int | None:
    if hardware.get("platform") == "cuda":
        return sum(d["memory_total_bytes"] for d in hardware.get("devices", [])) or None
    return hardware.get("memory_total_bytes")


BURST_TTFT_SHARE = 0.8


def per_token_measurable(agg: dict[str, Any]) -> bool:
    """Whether TPOT/ITL mean anything for a phase. When the server sends a request's tokens in one burst
    (a tiny model on the CPU finishes before the first chunk is flushed), TTFT is most of the end-to-end
    latency and vllm bench serve's TPOT ``(latency - ttft) / (output_len - 1)`` collapses to ~0: then
    only output tok/s measures decode speed."""
    ttft, e2el = agg.get("median_ttft_ms"), agg.get("median_e2el_ms")
    if ttft is None or not e2el:
        return agg.get("median_tpot_ms") is not None
    return ttft < BURST_TTFT_SHARE * e2el


def verdict(baseline: dict[str, Any], speculative: dict[str, Any], hardware: dict[str, Any]) -> dict[str, Any]:
    """Keep speculation only when ITL (per token: TPOT) and output tok/s improve beyond the run-to-run
    spread and neither
    TTFT nor p95 (ITL and E2EL) regress nor peak memory passes 90 % of the limit (field guide,
    "Benchmark sequence"). Spread = the larger of the two phases' (max - min) over repeats.

    Returns ``{"keep": bool, "stop_signs": [...], "checks": {name: {...}}, "summary": str}``."""
    b, s = baseline["aggregate"], speculative["aggregate"]

    def delta(key: str, lower_is_better: bool) -> dict[str, Any]:
        bv, sv = b.get(key), s.get(key)
        noise = max(b.get(f"spread_{key}", 0.0) or 0.0, s.get(f"spread_{key}", 0.0) or 0.0)
        if bv is None or sv is None:
            return {"baseline": bv, "speculative": sv, "spread": noise, "improved": False, "regressed": False}
        gain = (bv - sv) if lower_is_better else (sv - bv)
        return {"baseline": bv, "speculative": sv, "spread": noise, "change_pct": (sv - bv) / bv * 100 if bv else None,
                "improved": gain > noise, "regressed": -gain > noise}

    checks = {
        "itl": delta("median_itl_ms", True),
        "tpot": delta("median_tpot_ms", True),
        "output_tok_s": delta("output_throughput", False),
        "ttft": delta("median_ttft_ms", True),
        "p95_itl": delta("p95_itl_ms", True),
        "p95_e2el": delta("p95_e2el_ms", True),
    }
    stop: list[str] = []
    acc = s.get("spec_decode") or {}
    checks["acceptance"] = {"acceptance_rate": acc.get("acceptance_rate"),
                            "mean_acceptance_length": acc.get("mean_acceptance_length"),
                            "threshold": LOW_ACCEPTANCE_RATE}
    if not acc or acc.get("acceptance_rate", 0.0) < LOW_ACCEPTANCE_RATE:
        stop.append(STOP_LOW_ACCEPTANCE)
    if checks["ttft"]["regressed"]:
        stop.append(STOP_TTFT)
    # Decode latency per token: TPOT. vLLM's ITL is per streamed chunk, and a chunk carries several
    # tokens when drafts are accepted (or when the server batches its output), so ITL alone misleads.
    measurable = per_token_measurable(b) and per_token_measurable(s)
    checks["tpot"]["measurable"] = checks["itl"]["measurable"] = measurable
    if measurable:
        decode_ok = checks["tpot"]["improved"] and checks["output_tok_s"]["improved"]
    else:
        # tokens arrived in one burst: TPOT/ITL are ~0 and say nothing; output tok/s alone decides
        decode_ok = checks["output_tok_s"]["improved"]
    if not decode_ok:
        stop.append(STOP_DECODE)
    if (measurable and checks["p95_itl"]["regressed"]) or checks["p95_e2el"]["regressed"]:
        stop.append(STOP_P95)
    limit = memory_limit_bytes(hardware)
    peak = max(baseline.get("peak_memory_bytes", 0), speculative.get("peak_memory_bytes", 0))
    checks["memory"] = {"peak_bytes": peak, "limit_bytes": limit, "threshold": MEMORY_NEAR_LIMIT}
    if limit and peak > MEMORY_NEAR_LIMIT * limit:
        stop.append(STOP_MEMORY)
    keep = decode_ok and STOP_TTFT not in stop and STOP_P95 not in stop and STOP_MEMORY not in stop
    summary = ("keep speculative decoding: decode improved beyond the run-to-run spread with no regression"
               if keep else "do not keep speculative decoding: " + "; ".join(stop))
    return {"keep": keep, "stop_signs": stop, "checks": checks, "summary": summary,
            "not_evaluated": ["Only short prompts become faster (one context length was measured)"]}


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
    kw = dict(prompt_len=profile["input_len"], output_len=profile["output_len"], concurrency=profile["concurrency"])
    base_input = {k: v for k, v in configuration["engine_input"].items() if k != "speculative_config"}
    b = baseline.get("aggregate", {})
    rows = []
    try:
        pb = speed_fields(EngineInput(**base_input), None, **kw)
    except Exception as e:  # noqa: BLE001 - shown in the report, never a crash of the run
        return [_row("ttft_ms", "ms", None, None, f"speed model could not predict: {e}")]
    burst = "not measurable: the server sent each request's tokens in one burst (TTFT ~ end-to-end latency)"
    rows += [_row("ttft_ms", "ms", pb["ttft_ms"], b.get("median_ttft_ms")),
             _row("tpot_ms", "ms", pb["itl_ms"], b.get("median_tpot_ms") if per_token_measurable(b) else None,
                  "" if per_token_measurable(b) else burst),
             _row("output_tokens_per_s", "tok/s", pb["output_tokens_per_s"], b.get("output_throughput"))]
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
        if measurable:
            measured_speedup = (b.get("median_tpot_ms") / s_["median_tpot_ms"]
                                if b.get("median_tpot_ms") and s_.get("median_tpot_ms") else None)
        else:  # closed loop at a fixed concurrency: the output tok/s ratio is the decode speedup
            measured_speedup = (s_["output_throughput"] / b["output_throughput"]
                                if b.get("output_throughput") and s_.get("output_throughput") else None)
        no_figure = "no typical acceptance figure for this method: give acceptance_rate to predict it"
        rows += [_row("spec_tpot_ms", "ms", ps["itl_ms"] if ps.get("spec_speedup") else None,
                      s_.get("median_tpot_ms") if per_token_measurable(s_) else None,
                      (burst if not per_token_measurable(s_) else "") or ("" if ps.get("spec_speedup") else no_figure)),
                 _row("mean_acceptance_length", "tokens", ps.get("mean_acceptance_length"),
                      acc.get("mean_acceptance_length"), "" if ps.get("mean_acceptance_length") else no_figure),
                 _row("spec_speedup", "x", ps.get("spec_speedup"), measured_speedup,
                      "" if ps.get("spec_speedup") else no_figure)]
    return rows


def run_sequence(configuration: dict[str, Any], prediction: dict[str, Any], workdir: Path,
                 reporter: Reporter, hardware: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """Baseline then speculation (``configuration["spec_config"]``), each ``profile["repeats"]`` times.

    ``options``: ``wall_clock_s`` (whole run), ``startup_timeout_s``, ``bench_timeout_s``,
    ``server_command``/``bench_command`` (argv prefixes replacing vLLM's), ``on_server(pgid|None)``,
    ``on_process(role, phase, pgid|None)`` (each child process group as it starts and stops) and
    ``on_phase(measured)`` (after each finished phase, to persist it).
    Raises ``RunnerError`` (``RunTimeout``, ``Cancelled``) with the log tail; the server's process group
    is always killed before returning or raising."""
    deadline = Deadline(options["wall_clock_s"])
    workdir.mkdir(parents=True, exist_ok=True)
    model_id = configuration["run_model"]
    if tiny_models.is_builtin(model_id):
        model_path = str(tiny_models.ensure_builtin(model_id)[0])
    else:
        model_path = model_id
    base_input = {k: v for k, v in configuration["engine_input"].items() if k != "speculative_config"}
    # the command as the calculator shows it (model id); server_argv swaps in the local path
    serve_base = runner.serve_argv(base_input, model_id, configuration.get("revision"))
    spec_input = {**base_input, "speculative_config": configuration["spec_config"]}
    serve_spec = runner.serve_argv(spec_input, model_id, configuration.get("revision"))
    measured: dict[str, Any] = {"phases": {}, "hardware": hardware}
    plan = [("baseline", serve_base, 0.0, 0.5), ("speculative", serve_spec, 0.5, 1.0)]
    t_start = time.monotonic()
    for name, serve, p0, p1 in plan:
        t_phase = time.monotonic()

        def tick(what: str, log_tail: str, name=name, p0=p0, p1=p1, t_phase=t_phase) -> None:
            # progress within a phase grows with elapsed time against a rough per-phase budget
            frac = min(0.95, (time.monotonic() - t_phase) / max(1.0, options.get("phase_budget_s", 60.0)))
            reporter(f"{name}: {what}", p0 + (p1 - p0) * frac, log_tail)

        reporter(f"{name}: starting vLLM", p0)
        try:
            measured["phases"][name] = run_phase(name, serve, configuration, model_path, workdir, deadline,
                                                 tick, options)
        except RunnerError as e:
            e.measured = measured  # what the earlier phases measured is kept on the failed run
            raise
        options.get("on_phase", lambda m: None)(measured)  # persisted now: a crash later keeps this phase
        reporter(f"{name}: done", p1)
    baseline, speculative = measured["phases"]["baseline"], measured["phases"]["speculative"]
    measured["comparison"] = compare(prediction, baseline.get("startup", {}))
    measured["comparison"] += speed_comparison(configuration, baseline, speculative)
    measured["verdict"] = verdict(baseline, speculative, hardware)
    measured["elapsed_s"] = round(time.monotonic() - t_start, 1)
    return measured
