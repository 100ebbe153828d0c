#!/usr/bin/env python3
"""SGLang piecewise-CUDA-graph prefill: the product's eager vs piecewise TTFT against public before/after runs.

usage: python benchmarks/sglang_piecewise_check.py [--json]

Data: benchmarks/data/sglang_piecewise_public.json, ``sglang.bench_serving`` tables from the SGLang PRs that enabled
piecewise CUDA graphs per model (Oct-Dec 2025, opt-in then via ``--enable-piecewise-cuda-graph``), each record with its
URL and the table row quoted. ``graph: "eager"`` rows ran prefill eagerly, as SGLang <= 0.5.9 does by default;
``graph: "piecewise"`` rows replayed piecewise graphs, as 0.5.10 does by default.

Each record the product can answer (a config in the shared folder or the offline catalog, a GPU in the catalog) runs
through ``manage.py estimate --runtime sglang --format json`` at the record's input / output length and
``--max-concurrency``: ``--sglang-version 0.5.7`` for eager rows (prefill eager: perf.SGLANG_PREFILL_LAUNCH_US per
counted kernel), ``0.5.10.post1`` for piecewise rows (only ``graph_split_ops_per_layer`` ops per layer at that rate).
For piecewise rows the script checks the product's own plan turned piecewise graphs on and the prompt fits under
``piecewise_cuda_graph_max_tokens``; a row where it does not is reported, not scored.

Nothing here is fitted. The mapping below names, per PR, the config used and why; where the product lacks the exact
checkpoint a stand-in of the same shapes and bytes per weight is used and flagged ``proxy``. Rows whose PR does not
state the GPU use ``gpu_assumed`` (its basis is in the data file's ``gpu_note``).

Printed: per row predicted vs measured TTFT / TPOT / output tok/s; per (PR, concurrency) pair with both graphs the
after/before TTFT ratio measured vs predicted, and the TTFT saved per layer; a summary (median |error| of eager and
piecewise TTFT, median after/before ratio measured and predicted). ``--launch-us X`` reruns the rows with the eager
launch time per kernel replaced in this process only (a what-if for the coordinator; no calculator code changes).

The product now prices an eager prefill kernel at 90 us for an MoE model and 28 us for a dense one
(perf.SGLANG_PREFILL_LAUNCH_DENSE_US, the median of three public dense runs), and a piecewise-graphed pass's kernels
at 50 us (MoE, perf.SGLANG_PREFILL_GRAPH_KERNEL_US) / 0 (dense), split ops at the eager cost. With them (Dec 2026):
Llama-8B proxy c=1 eager 30.2 vs 30.0 ms, piecewise 25.1 vs 19.7; Kimi-K2 piecewise c=1 / c=2 113 / 125 vs 95 / 132;
after/before median 0.856 predicted vs 0.807 measured; piecewise TTFT median |error| 36 % (the Llama proxy at 4-32
clients 44-66 % low: its TTFT grows with the clients far more than the model's); TPOT median |error| eager 59 %,
piecewise 29 % (216 % / 60 % with 90 us for every model). ``--graph-us`` and ``--dense-us`` are what-ifs.

Before that term (2026, 11 rows answered, GPU assumed H200 for all: no PR states it): the one clean before/after set (#13094,
Llama-3.1-8B FP8 TP8, c=1/4/16/32) measured TTFT after/before median 0.807 (0.656 at c=1), the product 0.579 (0.556):
the product removes 0.72 ms per layer at c=1, the run saved 0.32. Across PRs (same author and host family, other
checkpoints) DeepSeek-R1-INT8 eager 115.0 ms vs Kimi-K2-0905 piecewise 95.2 ms: ~0.33 ms per layer saved, the product
1.7. With ``--launch-us 40`` both savings match (Llama 0.29 ms/layer; DeepSeek-class 172->87.5 eager vs 68.9
piecewise, 19 ms vs 20 measured).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.core.management.base import CommandError  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "sglang_piecewise_public.json"
RELEASE = {"eager": "0.5.7", "piecewise": "0.5.10.post1"}

# Per PR: the product's model id, extra CLI flags, whether it is a stand-in, and why.
MAPPING: dict[int, dict] = {
    13094: dict(model="meta-llama/Llama-3.1-8B-Instruct", layers=32,
                flags=["--quantization", "fp8", "--kv-cache-dtype", "bfloat16", "--attention-backend", "fa3"],
                proxy=True,
                why="nvidia/Llama-3.1-8B-Instruct-FP8 (modelopt, FP8 per-tensor) is not in the catalog; the BF16 "
                    "config with --quantization fp8 (online FP8 per-tensor) has the same shapes and weight bytes"),
    13466: dict(model="moonshotai/Kimi-K2-Instruct", layers=61, flags=[], proxy=False,
                why="Kimi-K2-Instruct-0905 has Kimi-K2-Instruct's architecture and shapes (only the context length "
                    "differs, which a 1024-token prompt does not reach)"),
    14918: dict(model="deepseek-ai/DeepSeek-R1", layers=61, flags=[], proxy=True,
                why="meituan/DeepSeek-R1-Channel-INT8 (--quantization w8a8_int8) is refused by the product; DeepSeek-R1's "
                    "block-FP8 checkpoint has the same shapes and 1 byte per weight, but other GEMM kernels"),
}
SKIP = {13622: "no grok-2 config in the shared folder or the catalog",
        11845: "tensor-parallel size and concurrency not stated in the PR comment"}


def estimate(rec: dict, m: dict) -> dict:
    """One ``manage.py estimate`` call for ``rec`` (JSON answer as a dict)."""
    argv = ["estimate", "--model", m["model"], "--runtime", "sglang", "--sglang-version", RELEASE[rec["graph"]],
            "--gpu", rec["gpu"] or rec["gpu_assumed"], "--tensor-parallel-size", str(rec["tp"]),
            "--concurrency", str(rec["concurrency"]), "--prompt-len", str(rec["input_len"]),
            "--output-len", str(rec["output_len"]), "--format", "json", *m["flags"]]
    out = io.StringIO()
    call_command(*argv, stdout=out)
    return json.loads(out.getvalue())


def pct(pred: float | None, meas: float | None) -> float | None:
    return None if pred is None or not meas else 100.0 * (pred - meas) / meas


def fmt(x, spec=".1f", width=7) -> str:
    sign, spec = ("+", spec[1:]) if spec.startswith("+") else ("", spec)
    return f"{'n/a':>{width}}" if x is None else f"{x:>{sign}{width}{spec}}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--launch-us", type=float, default=None,
                    help="what-if, in this process only: SGLang's eager prefill launch time per counted kernel "
                         "(perf.SGLANG_PREFILL_LAUNCH_US, 90 us) replaced by this value")
    ap.add_argument("--graph-us", type=float, default=None,
                    help="what-if, in this process only: the time per counted kernel of a prefill pass replayed "
                         "from a piecewise graph (perf.SGLANG_PREFILL_GRAPH_KERNEL_US) replaced by this value")
    ap.add_argument("--dense-us", type=float, nargs=2, default=None, metavar=("EAGER", "GRAPHED"),
                    help="what-if: the eager and graphed per-kernel times of a dense (no-expert) model")
    args = ap.parse_args()
    if args.dense_us is not None:
        from dataclasses import replace

        from calculator.engine import perf

        key = ("sglang", "*")
        perf.EFFICIENCY[key] = replace(perf.EFFICIENCY[key], prefill_launch_dense_us=args.dense_us[0],
                                       prefill_graph_kernel_dense_us=args.dense_us[1])
        print(f"WHAT-IF: dense prefill_launch_dense_us = {args.dense_us[0]:g}, graphed {args.dense_us[1]:g}\n")
    if args.graph_us is not None:
        from dataclasses import replace

        from calculator.engine import perf

        key = ("sglang", "*")
        perf.EFFICIENCY[key] = replace(perf.EFFICIENCY[key], prefill_graph_kernel_us=args.graph_us)
        print(f"WHAT-IF: prefill_graph_kernel_us = {args.graph_us:g} us\n")
    if args.launch_us is not None:
        from dataclasses import replace

        from calculator.engine import perf

        key = ("sglang", "*")
        perf.EFFICIENCY[key] = replace(perf.EFFICIENCY[key], prefill_launch_us=args.launch_us)
        print(f"WHAT-IF: prefill_launch_us = {args.launch_us:g} us (the product's row says "
              f"{perf.SGLANG_PREFILL_LAUNCH_US:g})\n")
    data = json.loads(DATA.read_text())
    rows = []
    for rec in data["records"]:
        m = MAPPING.get(rec["pr"])
        row = dict(id=rec["id"], pr=rec["pr"], graph=rec["graph"], c=rec["concurrency"], gpu=rec["gpu"] or
                   (f"{rec['gpu_assumed']}?" if rec["gpu_assumed"] else None),
                   meas_ttft=rec["mean_ttft_ms"], meas_tpot=rec["mean_tpot_ms"], meas_tok=rec["output_throughput"])
        if m is None:
            row["skip"] = SKIP.get(rec["pr"], "no mapping")
            rows.append(row)
            continue
        try:
            d = estimate(rec, m)
        except (CommandError, SystemExit) as e:
            row["skip"] = f"product refused: {e}"
            rows.append(row)
            continue
        pcg, pcg_max = d.get("piecewise_cuda_graph"), d.get("piecewise_cuda_graph_max_tokens") or 0
        if rec["graph"] == "piecewise" and not (pcg and rec["input_len"] <= pcg_max):
            row["skip"] = f"product's 0.5.10.post1 plan: piecewise {pcg}, max tokens {pcg_max}"
        if rec["graph"] == "eager" and pcg:
            row["skip"] = "product's 0.5.7 plan has piecewise graphs on"
        row.update(proxy=m["proxy"], layers=m["layers"], pred_ttft=d.get("ttft_ms"), pred_tpot=d.get("itl_ms"),
                   pred_tok=d.get("output_tokens_per_s"), verdict=d.get("verdict"), pcg_max=pcg_max,
                   release=RELEASE[rec["graph"]])
        row["err_ttft"] = pct(row["pred_ttft"], row["meas_ttft"])
        row["err_tpot"] = pct(row["pred_tpot"], row["meas_tpot"])
        row["err_tok"] = pct(row["pred_tok"], row["meas_tok"])
        rows.append(row)

    if args.json:
        print(json.dumps(rows, indent=1))
        return 0

    print("Per row (TTFT / TPOT ms, output tok/s; err = predicted vs measured; ? = GPU assumed, not stated; "
          "* = proxy config)")
    print(f"{'id':<22} {'rel':<12} {'gpu':<6} {'c':>3} {'TTFT meas':>9} {'pred':>7} {'err%':>7} "
          f"{'TPOT meas':>9} {'pred':>6} {'err%':>7} {'tok/s meas':>10} {'pred':>7} {'err%':>7}")
    for r in rows:
        if "pred_ttft" not in r:
            print(f"{r['id']:<22} {'':<12} {str(r['gpu']):<6} {fmt(r['c'], 'd', 3)} {fmt(r['meas_ttft'], '.1f', 9)}"
                  f"  -- not answered: {r['skip']}")
            continue
        tag = r["id"] + ("*" if r["proxy"] else "")
        print(f"{tag:<22} {r['release']:<12} {str(r['gpu']):<6} {r['c']:>3} {fmt(r['meas_ttft'], '.1f', 9)} "
              f"{fmt(r['pred_ttft'])} {fmt(r['err_ttft'], '+.1f')} {fmt(r['meas_tpot'], '.2f', 9)} "
              f"{fmt(r['pred_tpot'], '.2f', 6)} {fmt(r['err_tpot'], '+.1f')} {fmt(r['meas_tok'], '.1f', 10)} "
              f"{fmt(r['pred_tok'])} {fmt(r['err_tok'], '+.1f')}" + (f"  [{r['skip']}]" if r.get("skip") else ""))

    scored = [r for r in rows if "pred_ttft" in r and not r.get("skip")]
    pairs = {}
    for r in scored:
        pairs.setdefault((r["pr"], r["c"]), {})[r["graph"]] = r
    print("\nBefore/after pairs (same PR and concurrency): TTFT after/before, and TTFT saved per layer (ms)")
    print(f"{'PR':>6} {'c':>3} {'meas ratio':>10} {'pred ratio':>10} {'meas saved/layer':>16} {'pred saved/layer':>16}")
    ratios_m, ratios_p = [], []
    for (pr, c), g in sorted(pairs.items()):
        if "eager" not in g or "piecewise" not in g:
            continue
        e, p = g["eager"], g["piecewise"]
        rm, rp = p["meas_ttft"] / e["meas_ttft"], p["pred_ttft"] / e["pred_ttft"]
        ratios_m.append(rm)
        ratios_p.append(rp)
        print(f"{pr:>6} {c:>3} {rm:>10.3f} {rp:>10.3f} {(e['meas_ttft'] - p['meas_ttft']) / e['layers']:>16.3f} "
              f"{(e['pred_ttft'] - p['pred_ttft']) / e['layers']:>16.3f}")

    def med_abs(graph: str, key: str = "err_ttft") -> str:
        v = [abs(r[key]) for r in scored if r["graph"] == graph and r.get(key) is not None]
        return f"{statistics.median(v):.1f} % (n={len(v)})" if v else "n/a"

    def med_abs_c1(graph: str) -> str:
        v = [abs(r["err_ttft"]) for r in scored if r["graph"] == graph and r["c"] == 1]
        return f"{statistics.median(v):.1f} % (n={len(v)})" if v else "n/a"

    print("\nSummary")
    print(f"  median |TTFT error| eager rows (0.5.7):            {med_abs('eager')}; at c=1 {med_abs_c1('eager')}")
    print(f"  median |TTFT error| piecewise rows (0.5.10.post1): {med_abs('piecewise')}; at c=1 {med_abs_c1('piecewise')}")
    print(f"  median |TPOT error| eager / piecewise:             {med_abs('eager', 'err_tpot')} / {med_abs('piecewise', 'err_tpot')}")
    if ratios_m:
        print(f"  median TTFT ratio after/before: measured {statistics.median(ratios_m):.3f}, "
              f"predicted {statistics.median(ratios_p):.3f} (pairs={len(ratios_m)})")
    c1 = {r["id"]: r for r in scored if r["c"] == 1}
    print("  c=1 rows: " + "; ".join(f"{k} meas {v['meas_ttft']:.1f} pred {v['pred_ttft']:.1f}" for k, v in c1.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
