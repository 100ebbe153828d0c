#!/usr/bin/env python3
"""Predicted vs measured TTFT, TPOT and output tok/s for every complete record of
/work/shared/cases/serving_speed_benchmarks.json, and a summary (median |error| per metric).

usage: python benchmarks/speed_cases.py [CASES.json] [--verbose]

A record is usable when it is complete, its model config is shipped in shared/data/model_configs, its GPU
is in the catalog and its runtime has an efficiency row. ``vllm bench serve --request-rate inf`` without
``--max-concurrency`` releases all ``num_prompts`` requests at once: such records run as a burst of
``num_prompts`` (queueing at saturation); a finite ``--request-rate`` as an open loop of Poisson arrivals over
``num_prompts``; the others as a closed loop of ``concurrency`` requests, at the length spread the record states
(``_cases.range_ratio``: fixed lengths keep a closed loop in waves).
TTFT is scored only below saturation (every request admitted at once), as the issue asks. Nothing is
fitted per record.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")

from benchmarks._cases import RUNTIMES, config_for, estimate, gpu_for, range_ratio  # noqa: E402
from calculator.engine import EngineInput, EngineInputError  # noqa: E402
from calculator.engine import perf  # noqa: E402


def measured(r: dict) -> dict[str, float]:
    m = r.get("metrics") or {}
    n = r.get("num_gpus") or r.get("tensor_parallel_size") or 1
    out = {}
    tpot = m.get("mean_tpot_ms") or m.get("tpot_ms_stat_unspecified") or m.get("mean_itl_ms")
    if tpot:
        out["tpot"] = tpot
    tps = m.get("output_tok_s") or (m["output_tok_s_per_gpu"] * n if m.get("output_tok_s_per_gpu") else None)
    if tps:
        out["tok_s"] = tps
    ttft = m.get("mean_ttft_ms") or m.get("ttft_ms_stat_unspecified") or m.get("median_ttft_ms")
    if ttft:
        out["ttft"] = ttft
    if not out and m.get("per_request_decode_tok_s_approx"):
        out["tpot"] = 1000 / m["per_request_decode_tok_s_approx"]
    return out


def predict(r: dict) -> tuple[dict | None, str]:
    rt = RUNTIMES.get(r.get("runtime"))
    if rt is None:
        return None, f"runtime {r.get('runtime')} not modelled"
    if not r.get("complete"):
        return None, "incomplete record"
    cfg = config_for(r.get("model"))
    if cfg is None:
        return None, "model config not shipped"
    gpu = gpu_for(r.get("gpu"))
    if gpu is None:
        return None, "gpu not stated or not in the catalog"
    tp = r.get("tensor_parallel_size") or 1
    if (r.get("data_parallel_size") or 1) > 1:
        return None, "data parallel not modelled"
    quant = (r.get("quant") or "").lower()
    conc, burst, rate = r.get("concurrency"), False, None
    if conc is None:
        if r.get("request_rate") == "inf" and r.get("num_prompts"):
            conc, burst = r["num_prompts"], True
        elif isinstance(r.get("request_rate"), (int, float)) and r.get("num_prompts"):
            conc, rate = r["num_prompts"], float(r["request_rate"])  # an open loop (Poisson arrivals)
        else:
            return None, "request-rate run without its rate and prompt count"
    inp = EngineInput(hf_config=cfg, gpu=gpu, tensor_parallel_size=tp,
                      quantization="fp8" if quant == "fp8" and "quantization_config" not in cfg else None,
                      max_model_len=min(cfg.get("max_position_embeddings") or 32768,
                                        max(8192, 2 * (r["input_len"] + r["output_len"]))))
    try:
        res = estimate(inp, rt, prompt_len=r["input_len"], output_len=r["output_len"], concurrency=conc,
                       arrival="burst" if burst else "closed", random_range_ratio=range_ratio(r),
                       **({"request_rate": rate, "num_prompts": r["num_prompts"]} if rate else {}))
    except EngineInputError as exc:
        return None, f"refused: {exc.field}: {exc.message[:60]}"
    saturated = bool(res.saturated) if rate else res.effective_concurrency < conc
    return {"tpot": res.itl_ms, "tok_s": res.output_tokens_per_s, "ttft": res.ttft_ms, "saturated": saturated,
            "conc": res.effective_concurrency, "label": res.efficiency_label}, ""


def main(argv: list[str]) -> int:
    path = next((a for a in argv[1:] if not a.startswith("--")), "/work/shared/cases/serving_speed_benchmarks.json")
    recs = json.loads(Path(path).read_text())["records"]
    errs: dict[str, list[float]] = {"tpot": [], "tok_s": [], "ttft": []}
    skipped: dict[str, int] = {}
    n = 0
    for r in recs:
        p, why = predict(r)
        if p is None:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        m = measured(r)
        if not m:
            skipped["no comparable metric"] = skipped.get("no comparable metric", 0) + 1
            continue
        n += 1
        parts = []
        for key in ("tpot", "tok_s", "ttft"):
            if key not in m:
                continue
            e = (p[key] - m[key]) / m[key]
            scored = not (key == "ttft" and p["saturated"])
            if scored:
                errs[key].append(e)
            parts.append(f"{key} {p[key]:9.1f} vs {m[key]:9.1f} ({e:+.0%}{'' if scored else ', saturated: not scored'})")
        print(f"{r['id']:10} {r['runtime']:6} {r['model'][:30]:30} {r['gpu'][:20]:20} tp{r.get('tensor_parallel_size')} "
              f"c={r.get('concurrency') or r.get('num_prompts')}->{p['conc']}: " + "; ".join(parts))
    for why, k in sorted(skipped.items(), key=lambda x: -x[1]):
        print(f"  skipped {k}: {why}")
    med = {k: statistics.median(abs(e) for e in v) for k, v in errs.items() if v}
    print(f"serving cases {len(recs)}: usable {n}; median |error| " +
          ", ".join(f"{k} {v:.0%} (n={len(errs[k])})" for k, v in med.items()))
    ok = n >= 1 and med.get("tpot", 9) <= 0.2 and med.get("tok_s", 9) <= 0.2 and med.get("ttft", 9) <= 0.3
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
