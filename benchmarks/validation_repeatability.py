"""Do repeated validation runs of one configuration agree, and do the presets show both a speedup and a
slowdown? Runs the real sequence (two vLLM CPU servers, paired interleaved A/B, ``validator.bench.run_sequence``)
``--runs`` times per preset and prints, per run: the verdict, the output tok/s change with its 95 %
interval, the guards' (TTFT p50, end-to-end p95) changes with theirs, the acceptance from vLLM's /metrics
and the wall time of the whole run (two servers started, benchmarked, stopped, scored).

    python benchmarks/validation_repeatability.py --preset repetitive-ngram-3 --runs 5
    python benchmarks/validation_repeatability.py --all --runs 1           # every preset once
    python benchmarks/validation_repeatability.py --preset repetitive-ngram-3 --unpadded --runs 1
    python benchmarks/validation_repeatability.py --preset prose-draft_model-5 --json out.json --save-measured DIR
    python benchmarks/validation_repeatability.py --rejudge DIR      # today's rule on saved measurements

Exit status 0 when, per preset, every run gave the same verdict (or all said inconclusive), every run
stayed under ``WALL_LIMIT_S`` and, with ``--all``, at least one preset was kept as faster and one disabled
as slower; 1 otherwise. Presets: ``validator.workloads.PRESETS`` (the trained pair on the CPU).
``--unpadded`` serves the trained target as trained instead of padded (``validator.workloads``: why the
runs use the padded one). Needs vLLM's CPU build. Each run takes both cores for about two minutes: on a
host shared with other work the noise is real, which is what the verdict's rule must survive.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")
WALL_LIMIT_S = 180.0  # issue 13: the CPU validation end to end stays under three minutes


def one_run(params: dict[str, str], workdir: Path) -> dict:
    """One validation run without the queue: configuration, prediction, the paired sequence."""
    from validator import runner
    from validator.bench import run_sequence
    from validator.config import build_configuration, fit_profile, predict

    t0 = time.monotonic()
    configuration = build_configuration(dict(params))
    prediction, _ = predict(configuration["engine_input"])
    fit_profile(configuration, prediction)
    options = {"wall_clock_s": 600.0, "startup_timeout_s": 300.0, "bench_timeout_s": 500.0, "stop_grace_s": 10.0,
               "phase_budget_s": 45.0}
    measured = run_sequence(configuration, prediction, workdir, lambda *a, **k: None, runner.detect_hardware(), options)
    measured["wall_s"] = round(time.monotonic() - t0, 1)
    measured["profile"] = configuration["profile"]
    return measured


def _ci(d: dict) -> str:
    if d.get("change_pct") is None:
        return "—"
    if d.get("ci_low_pct") is None:
        return f"{d['change_pct']:+.1f} %"
    return f"{d['change_pct']:+.1f} [{d['ci_low_pct']:+.1f}, {d['ci_high_pct']:+.1f}]"


def _row(key: str, run: int, v: dict, m: dict) -> str:
    diffs = v["differences"]
    acc, length = m["acceptance"]["acceptance_rate"], m["acceptance"]["mean_acceptance_length"]
    return (f"{key:<26}{run:>4}  {v['verdict']:<13}{_ci(diffs['output_throughput']):<28}"
            f"{_ci(diffs['median_ttft_ms']):<26}{_ci(diffs['p95_e2el_ms']):<26}"
            f"{'—' if acc is None else f'{acc:.3f}':>7}{'—' if length is None else f'{length:.2f}':>6}"
            f"{m.get('wall_s', 0):>8.0f}")


HEADER = (f"{'preset':<26}{'run':>4}  {'verdict':<13}{'output tok/s % [95 % CI]':<28}{'TTFT p50 %':<26}"
          f"{'E2EL p95 %':<26}{'accept':>7}{'len':>6}{'wall s':>8}")


def rejudge(folder: Path) -> int:
    """The current rule (``validator.bench.paired_verdict``) on every ``*.json`` measured dict in ``folder``."""
    from validator.bench import paired_verdict

    print(HEADER)
    for path in sorted(folder.glob("*.json")):
        m = json.loads(path.read_text())
        note = m.get("what_ran")
        v = paired_verdict(m, m.get("hardware") or {}, caveats=[note["short"]] if note else None)
        key, _, rest = path.stem.partition(".run")
        run = rest.split(".")[0]
        print(_row(key, int(run) if run.isdigit() else 0, v, m))
        print(f"    {v['headline']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import django

    django.setup()
    from validator import workloads
    from validator.stats import STOP_DECODE

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", action="append", default=[], help="preset key (repeatable)")
    ap.add_argument("--all", action="store_true", help="every preset")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--unpadded", action="store_true", help="serve the trained target as trained (not padded)")
    ap.add_argument("--json", type=Path, help="write every run's verdict and figures here")
    ap.add_argument("--save-measured", type=Path, help="write each run's whole measured dict into this folder")
    ap.add_argument("--rejudge", type=Path, help="no vLLM: apply the current rule to the measured dicts saved in "
                                                 "this folder (--save-measured) and print the table")
    args = ap.parse_args(argv)
    if args.rejudge:
        return rejudge(args.rejudge)
    if args.unpadded:
        workloads.SERVE_PADDED = False
    by_key = {p["key"]: p for p in workloads.PRESETS}
    keys = list(by_key) if args.all else (args.preset or ["repetitive-ngram-3"])
    unknown = [k for k in keys if k not in by_key]
    if unknown:
        ap.error(f"unknown preset(s) {', '.join(unknown)}; one of {', '.join(by_key)}")
    results: dict[str, list[dict]] = {}
    ok = True
    print(HEADER, flush=True)
    for key in keys:
        preset = by_key[key]
        results[key] = []
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="validation-") as d:
                m = one_run(preset["params"], Path(d))
            if args.save_measured:
                args.save_measured.mkdir(parents=True, exist_ok=True)
                name = f"{key}{'-unpadded' if args.unpadded else ''}.run{i + 1}.{int(time.time())}.json"
                (args.save_measured / name).write_text(json.dumps(m, default=str))
            v = m["verdict"]
            diffs = v["differences"]
            row = {"preset": key, "run": i + 1, "verdict": v["verdict"], "stop_signs": v["stop_signs"],
                   "unsettled": v.get("unsettled"), "wall_s": m["wall_s"], "headline": v["headline"],
                   "acceptance_rate": m["acceptance"]["acceptance_rate"],
                   "mean_acceptance_length": m["acceptance"]["mean_acceptance_length"],
                   "baseline_tok_s": m["phases"]["baseline"]["aggregate"].get("output_throughput"),
                   "speculative_tok_s": m["phases"]["speculative"]["aggregate"].get("output_throughput"),
                   "differences": {k: {x: d.get(x) for x in ("change_pct", "ci_low_pct", "ci_high_pct", "side",
                                                             "direction", "method")}
                                   for k, d in diffs.items()},
                   "profile": m["profile"], "unpadded": args.unpadded, "order": m.get("order")}
            results[key].append(row)
            print(_row(key, i + 1, v, m), flush=True)
            print(f"    {v['headline']}", flush=True)
        verdicts = [r["verdict"] for r in results[key]]
        agree = len(set(verdicts)) == 1
        slow = [r["wall_s"] for r in results[key] if r["wall_s"] > WALL_LIMIT_S]
        ok &= agree and not slow
        print(f"{key}: {'SAME verdict' if agree else 'DIFFERENT verdicts'} over {args.runs} runs: {verdicts}"
              + (f"; {len(slow)} run(s) over {WALL_LIMIT_S:.0f} s: {slow}" if slow else
                 f"; every run under {WALL_LIMIT_S:.0f} s"), flush=True)
    if args.all:
        rows = [r for rs in results.values() for r in rs]
        faster = sorted({r["preset"] for r in rows if r["verdict"] == "keep"})
        slower = sorted({r["preset"] for r in rows if STOP_DECODE in r["stop_signs"]})
        print(f"kept as faster: {faster or 'none'}; disabled as slower: {slower or 'none'}", flush=True)
        ok &= bool(faster) and bool(slower)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
