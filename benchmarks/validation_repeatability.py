"""Do repeated validation runs of one configuration agree? Runs the real sequence (two vLLM CPU servers,
paired interleaved A/B, ``validator.bench.run_sequence``) ``--runs`` times per preset and prints each
run's verdict, the output tok/s change with its 95 % interval, the acceptance and the wall time.

    python benchmarks/validation_repeatability.py --preset repetitive-ngram-3 --runs 5
    python benchmarks/validation_repeatability.py --all --runs 1          # every preset once
    python benchmarks/validation_repeatability.py --preset prose-draft_model-5 --json out.json

Exit status 0 when, per preset, every run gave the same verdict (or all said inconclusive); 1 otherwise.
Presets: ``validator.workloads.PRESETS`` (the trained pair on the CPU). Needs vLLM's CPU build.
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


def one_run(params: dict[str, str], workdir: Path) -> dict:
    """One validation run without the queue: configuration, prediction, the paired sequence."""
    from validator import runner
    from validator.bench import run_sequence
    from validator.config import build_configuration, fit_profile, predict

    configuration = build_configuration(dict(params))
    prediction, _ = predict(configuration["engine_input"])
    fit_profile(configuration, prediction)
    options = {"wall_clock_s": 600.0, "startup_timeout_s": 300.0, "bench_timeout_s": 500.0, "stop_grace_s": 10.0,
               "phase_budget_s": 45.0}
    t0 = time.monotonic()
    measured = run_sequence(configuration, prediction, workdir, lambda *a, **k: None, runner.detect_hardware(), options)
    measured["wall_s"] = round(time.monotonic() - t0, 1)
    return measured


def main(argv: list[str] | None = None) -> int:
    import django

    django.setup()
    from validator.workloads import PRESETS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", action="append", default=[], help="preset key (repeatable)")
    ap.add_argument("--all", action="store_true", help="every preset")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path, help="write every run's verdict and figures here")
    args = ap.parse_args(argv)
    by_key = {p["key"]: p for p in PRESETS}
    keys = list(by_key) if args.all else (args.preset or ["repetitive-ngram-3"])
    results: dict[str, list[dict]] = {}
    ok = True
    for key in keys:
        preset = by_key[key]
        results[key] = []
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="validation-") as d:
                m = one_run(preset["params"], Path(d))
            v = m["verdict"]
            tok = v["differences"]["output_throughput"]
            row = {"preset": key, "run": i + 1, "verdict": v["verdict"], "tok_s_change_pct": tok["change_pct"],
                   "ci_low_pct": tok["ci_low_pct"], "ci_high_pct": tok["ci_high_pct"],
                   "acceptance_rate": m["acceptance"]["acceptance_rate"],
                   "mean_acceptance_length": m["acceptance"]["mean_acceptance_length"],
                   "baseline_tok_s": m["phases"]["baseline"]["aggregate"].get("output_throughput"),
                   "speculative_tok_s": m["phases"]["speculative"]["aggregate"].get("output_throughput"),
                   "stop_signs": v["stop_signs"], "wall_s": m["wall_s"], "headline": v["headline"],
                   "differences": {k: {x: d[x] for x in ("change_pct", "ci_low_pct", "ci_high_pct", "direction")}
                                   for k, d in v["differences"].items()},
                   "order": m.get("order"),
                   "per_repeat": {ph: [(r["bench"].get("output_throughput"), r["bench"].get("median_ttft_ms"),
                                        r["bench"].get("median_e2el_ms")) for r in m["phases"][ph]["repeats"]]
                                  for ph in ("baseline", "speculative")}}
            results[key].append(row)
            acc = row["acceptance_rate"]
            print(f"{key:<24} run {i + 1}: {row['verdict']:<12} tok/s {row['tok_s_change_pct']:+6.1f} % "
                  f"[{row['ci_low_pct']:+.1f}, {row['ci_high_pct']:+.1f}]  acceptance "
                  f"{'—' if acc is None else f'{acc:.3f}'}  "
                  f"({row['baseline_tok_s']:.0f} -> {row['speculative_tok_s']:.0f} tok/s)  {row['wall_s']:.0f} s",
                  flush=True)
        verdicts = {r["verdict"] for r in results[key]}
        agree = len(verdicts) == 1
        ok &= agree
        print(f"{key}: {'SAME verdict' if agree else 'DIFFERENT verdicts'} over {args.runs} runs: {sorted(verdicts)}",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
