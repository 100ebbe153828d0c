#!/usr/bin/env python
"""Fit llama.cpp's efficiency once per backend (Metal, CUDA) on llama.cpp's public llama-bench scoreboards, and
print how well the product's speed path predicts them before (perf's assumed ``llama.cpp`` row) and after.

Data: calculator/runtimes/llamacpp/data/llama_bench_public.json (Llama 2 7B F16 / Q8_0 / Q4_0, pp512 and tg128,
ggml-org/llama.cpp discussions #4167 (Apple M-series, Metal) and #15013 (NVIDIA, CUDA)), every row mapped to a
catalog GPU or skipped with its reason.

Predictions are the product's own (:func:`calculator.runtimes.llamacpp.speed.speed`): the GGUF tensor table
llama-quantize writes for Llama-2-7B at each type (``quant_rules.derive_meta``), the memory plan with llama-bench's
context (``n_ctx`` = 512 for pp512, 128 for tg128, one sequence, f16 KV, ``-fa`` as the row states), all layers on
the GPU; tg128 = 1000 / the decode step at the mean context of the 128 tokens (``prompt_len`` 1), pp512 = 512 /
the prefill of one 512-token ubatch. On CUDA speed() prices each weight type's matmul at the rate of the kernel
llama.cpp runs for the batch (calculator/runtimes/llamacpp/cuda_matmul.py): the Q4_0 prefill runs MMQ at the catalog's
INT8 rate (``tops_int8``: tensor-core INT8 MMA from Turing, dp4a on the P40).

The fit is a grid search over perf ``Efficiency``'s terms ``mem_bw``, ``compute``, ``layer_us`` and ``overlap_p``
(``step_overhead_ms`` held at 0: with one model depth in the data only the sum step overhead + 32 x layer_us is
identified, and the per-layer form is kept because ggml's per-token work grows with the graph), one set per backend (never per row or chip), minimising the mean |log(pred /
measured)| of tg128 plus that of pp512 (pp512 only on GPUs with catalog TFLOP/s). Every row's time is linear in
``1/mem_bw``, ``1/compute``, the step overhead and the per-layer time, so each row's coefficients are read once
from speed() with probe efficiencies and the grid is evaluated on them; the fitted row is then re-run through
speed() to check. The leave-one-chip-out error refits without each chip (table row) and predicts its rows.
CUDA is fitted on the flash-attention-on scoreboard (``-fa 1``; llama.cpp's default ``--flash-attn auto`` turns
it on for CUDA); the ``-fa 0`` rows are printed as a check.

    python benchmarks/llamacpp_bench_fit.py [--json]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from calculator.engine.gpus import get_gpu  # noqa: E402
from calculator.engine.perf import EFFICIENCY, Efficiency  # noqa: E402
from calculator.runtimes.llamacpp.memory import plan  # noqa: E402
from calculator.runtimes.llamacpp.quant_rules import derive_meta  # noqa: E402
from calculator.runtimes.llamacpp.speed import speed  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "calculator" / "runtimes" / "llamacpp" / "data" / "llama_bench_public.json"
CONFIG = ROOT / "calculator" / "data" / "model_configs" / "meta-llama__Llama-2-7b-hf.json"

GRID = {
    "mem_bw": np.round(np.arange(0.40, 1.0001, 0.01), 3),
    "compute": np.round(np.arange(0.10, 1.6001, 0.02), 3),
    # one model depth (32 layers) in the data: a per-step and a per-layer time cannot be told apart, only
    # step_overhead_ms + 32 x layer_us is; the fixed time is carried by layer_us (ggml's per-token work is per graph
    # node, so it grows with the layer count) and the step overhead is held at 0
    "step_overhead_ms": [0.0],
    "layer_us": [float(x) for x in np.arange(0.0, 200.01, 2.5)],
    "overlap_p": [0.0, 1.0, 2.0, 4.0],
}
ASSUMED = EFFICIENCY[("llama.cpp", "*")]
_META: dict = {}


def meta_for(quant: str):
    if quant not in _META:
        _META[quant] = derive_meta(json.loads(CONFIG.read_text()), quant)
    return _META[quant]


def predict(row: dict, eff: Efficiency) -> tuple[float, float | None]:
    """(tg128 t/s, pp512 t/s or None) for ``row`` through speed() with ``eff``."""
    meta = meta_for(row["quant"])
    gpu = get_gpu(row["gpu"])
    fa = {None: "auto", 0: "off", 1: "on"}[row.get("flash_attn")]
    p_tg = plan(meta, n_ctx=128, device=row["backend"], flash_attn=fa)
    tg = speed(meta, p_tg, gpu, prompt_len=1, output_len=128, efficiency=eff)
    p_pp = plan(meta, n_ctx=512, device=row["backend"], flash_attn=fa)
    pp = speed(meta, p_pp, gpu, prompt_len=512, output_len=1, n_ubatch=512, efficiency=eff)
    pp_ts = None if pp.prefill is None else 512 / (pp.prefill["total_ms"] / 1e3)
    return 1000.0 / tg.itl_ms, pp_ts


def _probe(row: dict) -> dict:
    """Coefficients of the decode step and the prefill (ms): mem (at mem_bw 1), comp (at compute 1), per unit of
    step overhead (ms), per µs of layer time, and the constant rest (transfers), read from speed()."""
    base = Efficiency(mem_bw=1.0, compute=1.0, step_overhead_ms=0.0, allreduce_latency_us=ASSUMED.allreduce_latency_us,
                      layer_us=0.0, overlap_p=1.0, source="probe")
    meta = meta_for(row["quant"])
    gpu = get_gpu(row["gpu"])
    fa = {None: "auto", 0: "off", 1: "on"}[row.get("flash_attn")]
    p_tg = plan(meta, n_ctx=128, device=row["backend"], flash_attn=fa)
    p_pp = plan(meta, n_ctx=512, device=row["backend"], flash_attn=fa)

    def times(eff):
        tg = speed(meta, p_tg, gpu, prompt_len=1, output_len=128, efficiency=eff)
        pp = speed(meta, p_pp, gpu, prompt_len=512, output_len=1, n_ubatch=512, efficiency=eff)
        # ms without rounding: the decode view's total and the prefill's (rounded to 1e-3 ms by speed())
        return tg.decode.total_ms, (None if pp.prefill is None else pp.prefill["total_ms"])

    t0 = times(base)
    tm = times(replace(base, mem_bw=0.5))
    tc = times(replace(base, compute=0.5))
    to = times(replace(base, step_overhead_ms=1.0))
    tl = times(replace(base, layer_us=1.0))
    out = {}
    for i, key in enumerate(("tg", "pp")):
        if t0[i] is None:
            out[key] = None
            continue
        mem = tm[i] - t0[i]
        comp = tc[i] - t0[i]
        out[key] = {"mem": mem, "comp": comp, "ovh": to[i] - t0[i], "layer": tl[i] - t0[i],
                    "rest": t0[i] - mem - comp}
    return out


def _time(c: dict, m, cu, o, lu, p):
    """ms from the coefficients (numpy-broadcast over m, cu)."""
    mem = c["mem"] / m
    comp = c["comp"] / cu
    if p == 0:
        core = np.maximum(mem, comp)
    elif p == 1:
        core = mem + comp
    else:
        core = (mem ** p + comp ** p) ** (1 / p)
    return core + c["rest"] + c["ovh"] * o + c["layer"] * lu


def _log_err_grid(rows, coefs, chips):
    """Per chip, the sum over its rows of |log(pred/meas)| for tg and for pp, over the whole grid; and counts."""
    M, C = np.meshgrid(GRID["mem_bw"], GRID["compute"], indexing="ij")
    combos = [(o, lu, p) for o in GRID["step_overhead_ms"] for lu in GRID["layer_us"] for p in GRID["overlap_p"]]
    shape = (len(combos),) + M.shape
    tg_sum = {ch: np.zeros(shape, dtype=np.float32) for ch in chips}
    pp_sum = {ch: np.zeros(shape, dtype=np.float32) for ch in chips}
    n_tg = {ch: 0 for ch in chips}
    n_pp = {ch: 0 for ch in chips}
    for r, c in zip(rows, coefs):
        ch = r["chip"]
        n_tg[ch] += 1
        for k, (o, lu, p) in enumerate(combos):
            tg_sum[ch][k] += np.abs(np.log((1000.0 / _time(c["tg"], M, C, o, lu, p)) / r["tg128"]))
        if c["pp"] is not None and r.get("pp512"):
            n_pp[ch] += 1
            for k, (o, lu, p) in enumerate(combos):
                pp_sum[ch][k] += np.abs(np.log((512e3 / _time(c["pp"], M, C, o, lu, p)) / r["pp512"]))
    return combos, tg_sum, pp_sum, n_tg, n_pp


def _argmin(combos, tg_sum, pp_sum, n_tg, n_pp, leave_out=None):
    chips = [ch for ch in tg_sum if ch != leave_out]
    ntg = sum(n_tg[ch] for ch in chips)
    npp = sum(n_pp[ch] for ch in chips)
    loss = sum(tg_sum[ch] for ch in chips) / max(1, ntg)
    if npp:
        loss = loss + sum(pp_sum[ch] for ch in chips) / npp
    k, i, j = np.unravel_index(int(np.argmin(loss)), loss.shape)
    o, lu, p = combos[k]
    return {"mem_bw": float(GRID["mem_bw"][i]), "compute": float(GRID["compute"][j]), "step_overhead_ms": o,
            "layer_us": lu, "overlap_p": p}, float(loss[k, i, j])


def _eff(params: dict, source: str = "candidate") -> Efficiency:
    return replace(ASSUMED, source=source, label="fitted", **params)


def _errs(rows, coefs, params_for_row):
    """Signed % errors of tg and pp per row, with the parameters ``params_for_row(row)``."""
    out = []
    for r, c in zip(rows, coefs):
        prm = params_for_row(r)
        tg = 1000.0 / float(_time(c["tg"], prm["mem_bw"], prm["compute"], prm["step_overhead_ms"], prm["layer_us"],
                                  prm["overlap_p"]))
        pp = None
        if c["pp"] is not None:
            pp = 512e3 / float(_time(c["pp"], prm["mem_bw"], prm["compute"], prm["step_overhead_ms"], prm["layer_us"],
                                     prm["overlap_p"]))
        out.append({"tg_pred": tg, "tg_err": (tg - r["tg128"]) / r["tg128"] * 100,
                    "pp_pred": pp, "pp_err": None if pp is None or not r.get("pp512")
                    else (pp - r["pp512"]) / r["pp512"] * 100})
    return out


def _med(xs):
    xs = [abs(x) for x in xs if x is not None]
    return round(statistics.median(xs), 1) if xs else None


def fit_backend(rows: list[dict]) -> dict:
    coefs = [_probe(r) for r in rows]
    chips = sorted({r["chip"] for r in rows})
    combos, tg_sum, pp_sum, n_tg, n_pp = _log_err_grid(rows, coefs, chips)
    best, loss = _argmin(combos, tg_sum, pp_sum, n_tg, n_pp)
    loco = {ch: _argmin(combos, tg_sum, pp_sum, n_tg, n_pp, leave_out=ch)[0] for ch in chips}
    assumed = {k: getattr(ASSUMED, k) for k in ("mem_bw", "compute", "step_overhead_ms", "layer_us", "overlap_p")}
    before = _errs(rows, coefs, lambda r: assumed)
    after = _errs(rows, coefs, lambda r: best)
    held = _errs(rows, coefs, lambda r: loco[r["chip"]])
    # the fitted row through speed() itself, to check the linear read-out
    check = [predict(r, _eff(best)) for r in rows]
    worst = max(abs(a["tg_pred"] - c[0]) / c[0] for a, c in zip(after, check))
    return {"params": best, "loss": round(loss, 4), "chips": len(chips),
            "rows_tg": len(rows), "rows_pp": sum(1 for r, c in zip(rows, coefs) if c["pp"] is not None and r.get("pp512")),
            "before": {"tg": _med(e["tg_err"] for e in before), "pp": _med(e["pp_err"] for e in before)},
            "after": {"tg": _med(e["tg_err"] for e in after), "pp": _med(e["pp_err"] for e in after)},
            "loco": {"tg": _med(e["tg_err"] for e in held), "pp": _med(e["pp_err"] for e in held)},
            "speed_check_max_rel_diff": worst,
            "table": [{**{k: r[k] for k in ("chip", "gpu", "quant", "tg128", "pp512")}, "flash_attn": r.get("flash_attn"),
                       "tg_before": round(b["tg_pred"], 2), "tg_after": round(a["tg_pred"], 2),
                       "tg_loco_err": round(h["tg_err"], 1),
                       "pp_before": None if b["pp_pred"] is None else round(b["pp_pred"], 1),
                       "pp_after": None if a["pp_pred"] is None else round(a["pp_pred"], 1),
                       "pp_loco_err": None if h["pp_err"] is None else round(h["pp_err"], 1)}
                      for r, b, a, h in zip(rows, before, after, held)]}


def load_rows(backend: str, flash_attn=None) -> list[dict]:
    doc = json.loads(DATA.read_text())
    rows = []
    for r in doc["rows"]:
        if r["backend"] != backend or r.get("skip") or r.get("tg128") is None:
            continue
        if flash_attn is not None and r.get("flash_attn") != flash_attn:
            continue
        rows.append({**r, "chip": r["table_name"]})
    return rows


def check_rows(rows: list[dict], params: dict) -> dict:
    """Median |error| of rows not in the fit (the CUDA -fa 0 scoreboard) at the fitted and the assumed rows."""
    coefs = [_probe(r) for r in rows]
    assumed = {k: getattr(ASSUMED, k) for k in ("mem_bw", "compute", "step_overhead_ms", "layer_us", "overlap_p")}
    b = _errs(rows, coefs, lambda r: assumed)
    a = _errs(rows, coefs, lambda r: params)
    return {"rows": len(rows), "before": {"tg": _med(e["tg_err"] for e in b), "pp": _med(e["pp_err"] for e in b)},
            "after": {"tg": _med(e["tg_err"] for e in a), "pp": _med(e["pp_err"] for e in a)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = {"Metal": fit_backend(load_rows("Metal")), "CUDA": fit_backend(load_rows("CUDA", flash_attn=1))}
    res["CUDA"]["fa0_check"] = check_rows(load_rows("CUDA", flash_attn=0), res["CUDA"]["params"])
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    for be, r in res.items():
        print(f"\n{be}: {r['chips']} chips, {r['rows_tg']} tg128 rows, {r['rows_pp']} pp512 rows; fitted {r['params']}")
        print(f"{'chip':28} {'gpu':36} {'quant':5} {'tg128':>7} {'before':>7} {'after':>7} {'loco%':>6} "
              f"{'pp512':>8} {'before':>8} {'after':>8} {'loco%':>6}")
        for t in r["table"]:
            print(f"{t['chip'][:28]:28} {t['gpu'][:36]:36} {t['quant']:5} {t['tg128']:>7} {t['tg_before']:>7} "
                  f"{t['tg_after']:>7} {t['tg_loco_err']:>6} {str(t['pp512']):>8} {str(t['pp_before']):>8} "
                  f"{str(t['pp_after']):>8} {str(t['pp_loco_err']):>6}")
        print(f"median |error| tg128: assumed row {r['before']['tg']} %, fitted (in sample) {r['after']['tg']} %, "
              f"leave-one-chip-out {r['loco']['tg']} %")
        print(f"median |error| pp512: assumed row {r['before']['pp']} %, fitted (in sample) {r['after']['pp']} %, "
              f"leave-one-chip-out {r['loco']['pp']} %")
        print(f"speed() at the fitted row vs the linear read-out: max rel. diff {r['speed_check_max_rel_diff']:.2e}")
        if "fa0_check" in r:
            c = r["fa0_check"]
            print(f"check on the -fa 0 scoreboard ({c['rows']} rows, not fitted): tg128 {c['before']['tg']} % -> "
                  f"{c['after']['tg']} %, pp512 {c['before']['pp']} % -> {c['after']['pp']} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
