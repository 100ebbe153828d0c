#!/usr/bin/env python
"""Accuracy of the memory engine against public vLLM startup logs.

Runs the engine over every complete case in ../shared/cases/vllm_ground_truth.json that has a config,
prints predicted vs logged per case and field, and a summary against the targets:
weights within 1% for >= 95% of cases; KV cache tokens and maximum concurrency within 3% for >= 90%;
no case off by more than 10%.

    python benchmarks/memory_cases.py [--cases PATH] [--all] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calculator.engine import estimate  # noqa: E402
from calculator.crosscheck.groundtruth import DEFAULT_CASES, FIELDS, load_cases  # noqa: E402

TARGETS = {"weights_gib": (1.0, 0.95), "kv_cache_tokens": (3.0, 0.90), "max_concurrency": (3.0, 0.90)}


def err_pct(pred: float, logged: float) -> float | None:
    if logged in (None, 0):
        return None
    return (pred - logged) / abs(logged) * 100


def run(path: Path, complete_only: bool = True) -> tuple[list[dict], list[tuple[str, str]]]:
    rows, skipped = [], []
    for case in load_cases(path, complete_only=complete_only):
        if case.engine_input is None:
            skipped.append((case.id, case.skip_reason or ""))
            continue
        res = estimate(case.engine_input)
        row = {"id": case.id, "model": case.raw.get("model"), "tp": case.engine_input.tensor_parallel_size,
               "pp": case.engine_input.pipeline_parallel_size, "release": case.raw.get("vllm_version")}
        for f in FIELDS:
            logged = case.raw.get(f)
            pred = getattr(res, f)
            row[f] = {"pred": pred, "logged": logged, "err_pct": err_pct(pred, logged) if logged is not None else None}
        row["activation_peak_gib"] = {"pred": res.activation_peak_gib, "logged": case.raw.get("activation_peak_gib")}
        rows.append(row)
    return rows, skipped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--all", action="store_true", help="include incomplete cases")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows, skipped = run(args.cases, complete_only=not args.all)
    if args.json:
        print(json.dumps({"rows": rows, "skipped": skipped}, indent=1))
        return 0
    short = {"weights_gib": "weights GiB", "available_kv_cache_gib": "KV GiB", "kv_cache_tokens": "KV tokens",
             "num_gpu_blocks": "blocks", "max_concurrency": "concurrency"}
    head = f"{'case':13} {'model':42} {'tp':>2} {'pp':>2} " + " ".join(f"{short[f]:>26}" for f in FIELDS)
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = []
        for f in FIELDS:
            c = r[f]
            if c["logged"] is None:
                cells.append(f"{'-':>26}")
            else:
                e = c["err_pct"]
                cells.append(f"{c['pred']:>10} / {c['logged']:<9}{(f'{e:+.2f}%' if e is not None else ''):>6}")
        print(f"{r['id']:13} {str(r['model'])[:42]:42} {r['tp']:>2} {r['pp']:>2} " + " ".join(cells))
    print()
    print(f"{len(rows)} cases run, {len(skipped)} complete cases skipped:")
    for cid, why in skipped:
        print(f"  {cid}: {why}")
    print()
    ok_all = True
    for f in FIELDS:
        errs = [abs(r[f]["err_pct"]) for r in rows if r[f]["err_pct"] is not None]
        if not errs:
            continue
        tol, share = TARGETS.get(f, (3.0, 0.0))
        within = sum(e <= tol for e in errs) / len(errs)
        worst = max(errs)
        status = ""
        if f in TARGETS:
            good = within >= share and worst <= 10
            ok_all &= good
            status = f"target {share:.0%} within {tol}%, none > 10%: {'MET' if good else 'MISSED'}"
        print(f"{short[f]:>12}: n={len(errs):3d} mean |err| {sum(errs) / len(errs):5.2f}%  within {tol}%: "
              f"{within:6.1%}  worst {worst:6.2f}%  {status}")
    misses = [(r["id"], f, r[f]["err_pct"]) for r in rows for f in TARGETS
              if r[f]["err_pct"] is not None and abs(r[f]["err_pct"]) > TARGETS[f][0]]
    if misses:
        print("\nCases outside tolerance:")
        for cid, f, e in misses:
            print(f"  {cid} {f}: {e:+.2f}%")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
