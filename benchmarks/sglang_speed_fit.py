#!/usr/bin/env python3
"""Fit SGLang's base efficiency terms (perf ``EFFICIENCY[("sglang", "*")]``) on public SGLang serving records.

usage: python benchmarks/sglang_speed_fit.py [--json | --kernels [--hopper] | --load-ttft]

Data: benchmarks/data/sglang_speed_public.json, public ``sglang.bench_serving`` results that are not in
../shared/cases/serving_speed_benchmarks.json (sgl-cookbook pages, each record with its URL and quote). Each
record runs through the product's SGLang path (the request as ``manage.py estimate --runtime sglang`` builds it,
SGLang's own KV pool / max_running_requests / chunked_prefill_size from ``SGLang._speed_plan``, then
``perf.estimate_speed_plan(..., runtime="sglang")``) at the record's observed mean input / output lengths and its
``--max-concurrency``.

The default mode is a grid search over the terms vLLM's fit used (``mem_bw``, ``compute``, ``moe_compute``,
``overlap_p``, ``wave_share``, ``ttft_fixed_ms``), one set for every GPU, never per record; the other terms
(step overhead, all-reduce latency, the speculative terms) stay the current row's. The objective is the sum of
the median |error| of TPOT, output tok/s and TTFT over the records with ``fit: true``. Leave-one-source-out refits
without each source (one cookbook page) and predicts its records. Records with ``fit: false`` (another kernel path
or vendor) are printed as checks and never fitted.

Result (2026-12, 28 records, 5 sources), first form: vLLM's row carried over was off by median |error| TPOT
29.8 %, tok/s 51.8 %, TTFT 64.6 %, nearly always too fast, and the grid over the terms above swung by source
(leave-one-source-out 44.9 / 32.3 / 39.6 %): one ``layer_us`` for every model does not fit SGLang (41 us per layer
for gpt-oss up to 117 for DeepSeek-R1 on B200).

``--kernels`` (the form perf's row uses now): the per-layer time is ``kernels x kernel_us`` with the kernels
calculator/runtimes/sglang/kernels.py counts from SGLang's model code and default backends, plus the triton
backend's split-KV tiles; prefill runs as eager passes of its own. It prints, per concurrency-1 run, the time per
counted kernel (3.7-5.6 us on B200 over 5 models, median 4.7, 4.6-5.1 leaving any one model out; 9.0 on A100), the
triton tile time (5.8 us, one model) and the eager launch time per kernel (median 91 us). With those terms the 28
runs at 1-100 clients are off by median |error| TPOT 10.0 %, tok/s 13.0 %, TTFT 28.6 % (the default mode prints
them as "current row (in sample)"; its grid no longer varies ``layer_us``, which the kernel form replaces); the
higher-concurrency runs were not used to fit anything. The default mode's grid over the other terms on top of the
kernel form (2026-12, 1080 points) ends at mem_bw 0.6, compute 0.85, moe_compute 0.2, ttft_fixed_ms 40: in sample
9.8 / 8.1 / 24.3 %, leave-one-source-out 12.6 / 11.9 / 33.6 %, no better held out than the current row in sample, so
the row keeps vLLM's bandwidth and compute shares.

``--kernels --hopper`` prints the same per-kernel figure for the ``hopper_check`` records (sgl-pub-040..049: NVIDIA
H100 / H200 runs, never fitted; the runs at up to 4 clients, from the step of that many requests) and the current row's
error on each. Result: MiniMax-M2.5 on 8x H100 (TP8 EP8, costed with MiniMax-M2.7's config, c=1) 4.84 us,
Qwen3-8B on 1x H100 (c=4, ShareGPT) 3.61-3.63 us (BF16 and FP8 with the triton backend): median 3.62 us over the three
checkpoints, 4.23 us over the two architectures, against the row's 4.7; the 4 Gemma 4 runs on H200 are refused by the
product (not modelled).

``--load-ttft`` prints, for every record with more than one client that the product answers below saturation, the
measured mean TTFT over the predicted one (the product's row as it ships) and their range: the figures of
perf.SGLANG_LOAD_TTFT_WARNING, which every SGLang answer with more than one client carries (recomputed by
tests/test_runtime_sglang.py).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")

import django  # noqa: E402

django.setup()

from calculator.engine import EngineInputError, perf  # noqa: E402
from calculator.plan import make_plan  # noqa: E402
from calculator.request import parse_request  # noqa: E402
from calculator.runtimes import get_runtime  # noqa: E402
from benchmarks._fit import grid_fit, grid_points  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "sglang_speed_public.json"
KEY = ("sglang", "*")
# a first grid (mem_bw 0.7-1.0, compute 0.4-0.7, moe_compute 0.2-0.5, layer_us 20-100, wave_share 0-1, ttft_fixed_ms
# 10-60) ended on its edges (mem_bw 0.7, compute 0.7, moe_compute 0.2, ttft_fixed_ms 60); this one extends past them
GRID = {"mem_bw": (0.5, 0.6, 0.7, 0.8, 0.9), "compute": (0.55, 0.7, 0.85), "moe_compute": (0.1, 0.2, 0.35),
        "overlap_p": (1.0, 2.0),
        "wave_share": (0.3, 0.6, 1.0), "ttft_fixed_ms": (20.0, 40.0, 60.0, 90.0)}
METRICS = (("tpot", "mean_tpot_ms"), ("tok_s", "output_tok_s"), ("ttft", "mean_ttft_ms"))


def load() -> list[dict]:
    return json.loads(DATA.read_text())["records"]


# --hopper only: a model the offline catalog lacks, costed with a catalog config of the same architecture. MiniMax-M2.5
# (sgl-pub-040..042): calculator/data/model_configs/nvidia__MiniMax-M2.5-NVFP4.json (M2.5's config with NVFP4 weights)
# and MiniMaxAI__MiniMax-M2.7.json differ in no shape field (only max_position_embeddings and the quantization block,
# which is FP8 block-wise in M2.7 as in the MiniMax-M2.5 FP8 checkpoint the cookbook serves)
STAND_IN = {"MiniMaxAI/MiniMax-M2.5": "MiniMaxAI/MiniMax-M2.7"}


def covered_releases(version: str | None) -> list[str | None]:
    """The SGLang releases the product models that may stand for a record's ``version``, best first: the same
    release, else the newest covered one before it (0.5.6.post1 -> 0.5.3.post1: like the record's release, no
    piecewise prefill graphs), then the newer ones (for a configuration the older one does not model); [None] (the
    product's default) when the record names no version."""
    from packaging.version import InvalidVersion, Version

    from calculator.runtimes.sglang.releases import COVERED
    try:
        v = Version(str(version))
    except (InvalidVersion, TypeError):
        return [None]
    older = sorted((c for c in COVERED if Version(c) <= v), key=Version, reverse=True)
    return older[:1] + sorted((c for c in COVERED if Version(c) > v), key=Version) or [None]


def prepare(r: dict, stand_in: bool = False):
    """``(plan, kwargs)`` of the product's SGLang speed path for record ``r`` (``stand_in``: cost a model of
    ``STAND_IN`` with its stand-in's config; ``--ep N`` in the launch flags is passed as ``ep_size``)."""
    flags = (r.get("launch_flags") or "").split()
    extra = {"attention_backend": flags[flags.index("--attention-backend") + 1]} if "--attention-backend" in flags else {}
    for ep in ("--ep", "--ep-size"):
        if ep in flags:
            extra["ep_size"] = flags[flags.index(ep) + 1]
    model = STAND_IN.get(r["model"], r["model"]) if stand_in else r["model"]
    # the record's own release where the product models it (prefill graphs differ by release), else the nearest
    # covered one that models the configuration
    for i, release in enumerate(candidates := covered_releases(r.get("version"))):
        req = parse_request({"model": model, "runtime": "sglang", "gpu": r["gpu"],
                             "tensor_parallel_size": str(r["tensor_parallel_size"]),
                             "concurrency": str(r["concurrency"]), "prompt_len": str(r["input_len"]),
                             "output_len": str(r["output_len"]), **extra,
                             **({"sglang_version": release} if release else {})})
        try:
            p = make_plan(req, None, with_speed=False, with_suggestions=False)
            break
        except EngineInputError as exc:
            if i == len(candidates) - 1:  # the release refuses the model (its class, a pool it does not size)
                raise
    rt = get_runtime("sglang")
    return rt._speed_plan(req, p.model, p.memory), {**rt._tree(req), **rt.speed_kwargs(req)}


def predict(prepared, eff) -> dict[str, float]:
    plan, kw = prepared
    old = perf.EFFICIENCY[KEY]
    perf.EFFICIENCY[KEY] = eff
    try:
        res = perf.estimate_speed_plan(plan, runtime="sglang", **kw)
    finally:
        perf.EFFICIENCY[KEY] = old
    return {"tpot": res.itl_ms, "tok_s": res.output_tokens_per_s, "ttft": res.ttft_ms,
            "saturated": res.effective_concurrency < kw["concurrency"]}


def errors(pred: dict, r: dict) -> dict[str, float]:
    m = r["metrics"]
    out = {k: (pred[k] - m[mk]) / m[mk] for k, mk in METRICS}
    if pred["saturated"]:
        out.pop("ttft")  # TTFT is scored below saturation only, as benchmarks/speed_cases.py does
    return out


def medians(errs: list[dict]) -> dict[str, float]:
    return {k: statistics.median(abs(e[k]) for e in errs if k in e) for k, _ in METRICS
            if any(k in e for e in errs)}


def cost(errs: list[dict]) -> float:
    return sum(medians(errs).values())


SHARED = Path(__file__).resolve().parents[2] / "shared" / "cases" / "serving_speed_benchmarks.json"
# the shared DeepSeek-R1-0528 B200 runs at concurrency 1 (SGLang cookbook DeepSeek-R1.md), at their observed mean
# lengths (total input / output tokens over 10 requests): (input, output)
SHARED_C1 = {"speed-037": (610, 421), "speed-040": (610, 4445)}


def kernel_fit() -> int:
    """The per-kernel terms of perf's SGLang row from the concurrency-1 runs: per record, measured TPOT minus the
    step without any per-layer time, divided by the layers x counted kernels (the triton tiles taken out at the
    fitted tile time), and measured TTFT minus ttft_fixed_ms, divided by the kernels an eager prefill launches."""
    recs = [r for r in load() if r["concurrency"] == 1 and r["fit"]]
    if SHARED.exists():
        shared = {r["id"]: r for r in json.loads(SHARED.read_text())["records"]}
        for sid, (i, o) in SHARED_C1.items():
            s = shared[sid]
            recs.append({"id": sid, "model": s["model"], "gpu": s["gpu"], "tensor_parallel_size": 8, "concurrency": 1,
                         "input_len": i, "output_len": o, "metrics": s["metrics"], "fit": True})
    row = perf.EFFICIENCY[KEY]
    per_kernel: dict[tuple[str, str], list[float]] = {}
    launch: list[float] = []
    triton: list[tuple[int, float]] = []
    for r in recs:
        plan, _ = prepare(r)
        s = perf._setup(plan, "sglang")
        bare = replace(s.hw, eff=replace(s.hw.eff, kernel_us=0.0, triton_iter_us=0.0, prefill_launch_us=0.0))
        ctx = r["input_len"] + r["output_len"] // 2
        step = perf.step_cost(s.target, bare, requests=1, tokens_per_request=1, context=ctx)
        kernels = s.target.allreduce_layers * s.target.layer_kernels
        tiles = s.target.triton_layers * perf.triton_decode_iterations(ctx)
        resid_us = (r["metrics"]["mean_tpot_ms"] - step.total_ms) * 1e3 - tiles * row.triton_iter_us
        pre = perf.prefill_cost(s.target, bare, prompt_len=r["input_len"], chunk=s.chunk)
        ttft = r["metrics"]["mean_ttft_ms"]
        per_kernel.setdefault((r["gpu"], r["model"]), []).append(resid_us / kernels)
        if s.target.triton_layers and "GLM" in r["model"]:
            triton.append((tiles, resid_us + tiles * row.triton_iter_us))
        if pre.total_ms < ttft - row.ttft_fixed_ms:  # launch-bound (not the A100 4k prompt, whose roofline is above)
            launch.append((ttft - row.ttft_fixed_ms) * 1e3 / kernels)
        print(f"{r['id']:11} {r['model'][:32]:32} {r['gpu'][-5:]} layers {s.target.allreduce_layers:3} kernels/layer "
              f"{s.target.layer_kernels:4.1f} triton tiles {tiles:4}: {resid_us / kernels:5.2f} us per kernel; "
              f"TTFT {ttft:6.1f} ms, roofline prefill {pre.total_ms:6.1f} ms")
    tri = [(t, u) for t, u in triton if t]
    if len(tri) > 1:  # the tile time: slope of the per-layer time over the tiles, runs of one model on the triton backend
        mt, mu = statistics.mean(t for t, _ in tri), statistics.mean(u for _, u in tri)
        slope = sum((t - mt) * (u - mu) for t, u in tri) / sum((t - mt) ** 2 for t, _ in tri)
        print(f"triton split-KV tile: {slope:.2f} us (slope over {len(tri)} runs of one model; row: {row.triton_iter_us:g})")
    b200 = {m: statistics.median(v) for (g, m), v in per_kernel.items() if "B200" in g}
    print(f"\nB200 per kernel, median per model: " + ", ".join(f"{m.split('/')[-1]} {v:.2f}" for m, v in b200.items()))
    print(f"  median over models {statistics.median(b200.values()):.2f} us (row: {row.kernel_us:g}); leaving one model "
          f"out: {min(statistics.median([v for n, v in b200.items() if n != m]) for m in b200):.2f}-"
          f"{max(statistics.median([v for n, v in b200.items() if n != m]) for m in b200):.2f}")
    for (g, m), v in per_kernel.items():
        if "A100" in g:
            print(f"A100 per kernel ({m}): {statistics.median(v):.2f} us (row: "
                  f"{perf.EFFICIENCY[('sglang', perf.NVIDIA_PRE_SM90)].kernel_us:g})")
    print(f"eager prefill launch per kernel: median {statistics.median(launch):.0f} us over {len(launch)} runs "
          f"({min(launch):.0f}-{max(launch):.0f}; row: {row.prefill_launch_us:g})")
    return 0


def hopper_check() -> int:
    """``--kernels --hopper``: the same per-kernel figure as :func:`kernel_fit` for the ``hopper_check`` records (NVIDIA
    H100 / H200, never fitted), at their own client count (the step of ``concurrency`` requests: runs at up to 4
    clients, where a decode step still reads the weights once), and the current row's TPOT / tok/s / TTFT error for
    every hopper record the product costs. Prints; fits nothing."""
    per_kernel: dict[str, list[float]] = {}
    for r in (r for r in load() if r.get("hopper_check")):
        stand = f" (costed as {STAND_IN[r['model']]})" if r["model"] in STAND_IN else ""
        try:
            prepared = prepare(r, stand_in=True)
        except EngineInputError as exc:
            print(f"{r['id']} {r['model'][:30]:30} {r['gpu'][-5:]} c={r['concurrency']:<3}: refused by the product "
                  f"({exc.field}: {exc.message[:90]})")
            continue
        plan, _ = prepared
        s = perf._setup(plan, "sglang")
        n = r["concurrency"]
        pred = predict(prepared, perf.EFFICIENCY[KEY])
        err = errors(pred, r)
        cells = ", ".join(f"{k} {v:+.0%}" for k, v in err.items())
        line = (f"{r['id']} {r['model'][:30]:30} {r['gpu'][-5:]} tp{r['tensor_parallel_size']} c={n:<3} "
                f"{r['input_len']:>4}/{r['output_len']:<4}{stand}: current row {cells}")
        if n <= 4:
            bare = replace(s.hw, eff=replace(s.hw.eff, kernel_us=0.0, triton_iter_us=0.0, prefill_launch_us=0.0))
            ctx = r["input_len"] + r["output_len"] // 2
            step = perf.step_cost(s.target, bare, requests=n, tokens_per_request=1, context=ctx)
            kernels = s.target.allreduce_layers * s.target.layer_kernels
            tiles = s.target.triton_layers * perf.triton_decode_iterations(ctx)
            resid_us = (r["metrics"]["mean_tpot_ms"] - step.total_ms) * 1e3 - tiles * s.hw.eff.triton_iter_us
            per_kernel.setdefault(r["model"], []).append(resid_us / kernels)
            tpot = r["metrics"]["mean_tpot_ms"]
            line += (f"; layers {s.target.allreduce_layers} x kernels/layer {s.target.layer_kernels:.1f}, "
                     f"roofline step {step.total_ms:.2f} ms vs TPOT {tpot:.2f}: {resid_us / kernels:.2f} us per kernel")
        print(line)
    if per_kernel:
        meds = {m: statistics.median(v) for m, v in per_kernel.items()}
        print("\nHopper per kernel (runs at <= 4 clients), median per model: "
              + ", ".join(f"{m.split('/')[-1]} {v:.2f}" for m, v in meds.items())
              + f"; median over models {statistics.median(meds.values()):.2f} us (row used for these GPUs: "
              f"{s.hw.eff.kernel_us:g}; B200 fit: {perf.EFFICIENCY[KEY].kernel_us:g})")
    return 0


def load_ttft() -> dict:
    """``{"ratios": {id: measured / predicted mean TTFT}, "concurrency": (lo, hi)}`` over the records with more than
    one client that the product answers below saturation, with the row as it ships."""
    ratios, concs = {}, []
    for r in load():
        if r["concurrency"] < 2:
            continue
        try:
            pred = predict(prepare(r), perf.EFFICIENCY[KEY])
        except EngineInputError:  # refused by the product: not scored
            continue
        if pred["saturated"]:
            continue
        ratios[r["id"]] = r["metrics"]["mean_ttft_ms"] / pred["ttft"]
        concs.append(r["concurrency"])
    return {"ratios": ratios, "concurrency": (min(concs), max(concs))}


def main(argv: list[str]) -> int:
    if "--load-ttft" in argv:
        out = load_ttft()
        for rid, x in out["ratios"].items():
            print(f"{rid}: measured / predicted mean TTFT {x:.2f}")
        v = sorted(out["ratios"].values())
        print(f"{len(v)} runs at {out['concurrency'][0]}-{out['concurrency'][1]} clients: measured / predicted "
              f"{v[0]:.2f}-{v[-1]:.2f}, median |error| {statistics.median(abs(1 / x - 1) for x in v):.0%}")
        return 0
    if "--hopper" in argv:
        return hopper_check()
    if "--kernels" in argv:
        return kernel_fit()
    recs = load()
    base = perf.EFFICIENCY[KEY]
    prepared, refused = {}, {}
    for r in recs:
        try:
            prepared[r["id"]] = prepare(r)
        except EngineInputError as exc:  # the product refuses the configuration: not scored, said below
            refused[r["id"]] = f"{exc.field}: {exc.message}"
    recs = [r for r in recs if r["id"] in prepared]
    fit = [r for r in recs if r["fit"]]
    points = grid_points(GRID)
    best, by_source = grid_fit(fit, points, lambda r, pt: errors(predict(prepared[r["id"]], replace(base, **pt)), r),
                               cost)
    fitted = replace(base, **points[best])
    preds = {r["id"]: (predict(prepared[r["id"]], base), predict(prepared[r["id"]], fitted)) for r in recs}
    before = {r["id"]: errors(preds[r["id"]][0], r) for r in recs}
    after = {r["id"]: errors(preds[r["id"]][1], r) for r in recs}
    sources = sorted(by_source)
    held = [e for v in by_source.values() for e in v["errors"]]
    loso = {s: {"params": v["params"], "median": medians(v["errors"])} for s, v in by_source.items()}
    summary = {"grid_points": len(points), "fitted": points[best],
               "before": medians([before[r["id"]] for r in fit]), "after": medians([after[r["id"]] for r in fit]),
               "loso": medians(held), "loso_by_source": loso,
               "checks_before": medians([before[r["id"]] for r in recs if not r["fit"]]),
               "checks_after": medians([after[r["id"]] for r in recs if not r["fit"]])}
    if "--json" in argv:
        print(json.dumps(summary, indent=1))
        return 0
    for r in recs:
        pb, pa = preds[r["id"]]
        m = r["metrics"]
        cells = []
        for k, mk in METRICS:
            sat = " sat" if pa["saturated"] else ""
            cells.append(f"{k} {m[mk]:8.1f}: {pb[k]:8.1f} ({(pb[k] - m[mk]) / m[mk]:+4.0%}) -> "
                         f"{pa[k]:8.1f} ({(pa[k] - m[mk]) / m[mk]:+4.0%}){sat if k == 'ttft' else ''}")
        print(f"{r['id']} {'fit  ' if r['fit'] else 'check'} {r['model'][:26]:26} {r['gpu'][-11:]:11} "
              f"tp{r['tensor_parallel_size']} {r['input_len']:>4}/{r['output_len']:<4} c={r['concurrency']:<3} "
              + "; ".join(cells))
    pct = lambda d: ", ".join(f"{k} {v:.1%}" for k, v in d.items())  # noqa: E731
    print(f"\n{len(fit)} fitted records from {len(sources)} sources, {len(points)} grid points; fitted {points[best]}")
    print(f"median |error| current row (in sample): {pct(summary['before'])}")
    print(f"median |error| grid's best (in sample): {pct(summary['after'])}")
    print(f"median |error| leave-one-source-out:    {pct(summary['loso'])}")
    for s, v in loso.items():
        print(f"  without {s}: {v['params']} -> its records {pct(v['median'])}")
    for rid, why in refused.items():
        print(f"{rid}: refused by the product, not scored ({why[:100]})")
    print(f"checks (not fitted), assumed -> fitted: {pct(summary['checks_before'])} -> {pct(summary['checks_after'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
