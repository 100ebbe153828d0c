#!/usr/bin/env python
"""SGLang start-up memory plan vs public SGLang logs.

For every record of ``../shared/cases/runtime_startup_logs.json`` key ``sglang`` marked complete, runs
:func:`calculator.runtimes.sglang.plan` and prints predicted vs logged figures, in two modes:

- ``config``: everything from the model's config.json, the GPU catalog, SGLang's rules and the
  labelled fit for start-up overhead; weights from the parameter count. What the product can say before
  a run.
- ``logged-mem``: the same, but with the two memory figures SGLang measures and logs before sizing the
  pool (``Load weight begin. avail mem`` = free memory before loading, and the weights ``mem usage``)
  taken from that record's log as inputs. This checks SGLang's own rules (defaults, fraction, cell size,
  paging, Mamba split) apart from the two numbers the source cannot give.

Summary against the target: KV tokens within 2% for >= 90% of complete records, none beyond 10%.
Records that are not complete are listed with the reason. Nothing here is fitted per record: the
mapping below only names each record's config file, GPU and release (with the reason for each choice).

    python benchmarks/sglang_cases.py [--cases PATH] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import GPU, get_gpu
from calculator.runtimes.sglang import plan

SHARED = next((p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared", Path("/work/shared"))
               if (p / "cases").is_dir()), ROOT.parent / "shared")
CASES = SHARED / "cases" / "runtime_startup_logs.json"
CONFIGS = SHARED / "data" / "model_configs"
GIB = 1 << 30
TARGET_PCT, TARGET_SHARE, LIMIT_PCT = 2.0, 0.90, 10.0

# The V3.2-Exp config is not among the shared configs: it is DeepSeek-V3's with the architecture and the
# three indexer keys of deepseek-ai/DeepSeek-V3.2-Exp's published config.json (index_head_dim 128,
# index_n_heads 64, index_topk 2048); SGLang's is_deepseek_nsa keys on the architecture and index_topk.
V32_OVERLAY = {"architectures": ["DeepseekV32ForCausalLM"], "index_head_dim": 128, "index_n_heads": 64,
               "index_topk": 2048}

# Per record: config file (+ overlay), GPU, release and why. GPUs outside the catalog are built from
# the record's own logged total memory.
MAPPING: dict[str, dict] = {
    "sgl-004": {"config": "deepseek-ai__DeepSeek-V3.json", "overlay": V32_OVERLAY, "gpu": "B200",
                "release": "0.5.3.post1",
                "why_release": "main + PR #11309 (Oct 2025); 0.5.3.post1 (2025-10-09) is the first release with "
                               "the indexer in profile_max_num_token and without the fixed 0.8"},
    "sgl-005": {"config": "deepseek-ai__DeepSeek-V3.json", "overlay": V32_OVERLAY, "gpu": "B200",
                "release": "0.5.3",
                "why_release": "main before PR #11309 (2025-10-07); 0.5.3 (2025-10-06) has the fixed "
                               "mem_fraction_static 0.8 for NSA the PR text describes"},
    "sgl-011": {"config": "Qwen__QwQ-32B.json", "gpu": "L4", "release": "0.4.3.post4",
                "why_release": "SGL_VERSION 0.4.3.post4 in the Dockerfile on the same page"},
    "sgl-015": {"config": "Qwen__Qwen3.5-9B.json", "gpu": "RTX4090", "release": "0.5.10.post1",
                "why_release": "source build 0.0.0.dev11582 dated 2026-04-14; 0.5.10.post1 (2026-04-08) is the "
                               "last release before it (assumption)"},
    "sgl-025": {"config": "Qwen__Qwen3-0.6B.json", "gpu": None, "gpu_from_log_mib": "nvidia_smi_total_mib",
                "gpu_name": "NVIDIA GeForce RTX 5080", "compute_capability": "12.0", "release": "0.4.10.post2",
                "why_release": "version not given; log dated 2025-08-08; 0.4.10.post2 (2025-08-03) is the last "
                               "release before it (assumption)"},
    "sgl-006": {"config": "Qwen__Qwen3-30B-A3B.json", "overlay": {"num_hidden_layers": 5}, "gpu": "MI355X",
                "release": "0.5.7",
                "why_release": "rocm/sgl-dev:v0.5.7 image; the record's model keeps 5 layers of Qwen3-30B-A3B"},
    "sgl-003": {"config": "moonshotai__Kimi-K2.5.json", "gpu": "MI355X", "release": "0.5.9",
                "why_release": "rocm/sgl-dev:v0.5.8.post1-...-20260218 image: main of 2026-02-18, which runs "
                               "KimiK25ForConditionalGeneration; 0.5.8.post1 has no such class, 0.5.9 (2026-02-23) is "
                               "the first release that does, with the same memory rules as 0.5.8.post1"},
}


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def flags_of(rec: dict) -> dict:
    f = rec.get("flags", {})
    out = {"tp_size": int(_num(f.get("tp")) or 1)}
    if _num(f.get("dp")):
        out["dp_size"] = int(f["dp"])
    if f.get("enable_dp_attention") is True:
        out["enable_dp_attention"] = True
    if _num(f.get("mem_fraction_static")) and "auto" not in str(f.get("mem_fraction_static_source", "")) \
            and "hardcoded" not in str(f.get("mem_fraction_static_source", "")):
        out["mem_fraction_static"] = float(f["mem_fraction_static"])
    if _num(f.get("context_length")):
        out["context_length"] = int(f["context_length"])
    if f.get("disable_cuda_graph") is True:
        out["disable_cuda_graph"] = True
    return out


def logged_inputs(rec: dict) -> dict:
    """The two memory figures SGLang logs before sizing the pool, when the record has them."""
    lg = rec["logged"]
    w = _num(lg.get("weights_mem_usage_gb_per_rank")) or _num(lg.get("weights_mem_usage_gb"))
    before = _num(lg.get("avail_mem_before_load_gb"))
    after = _num(lg.get("avail_mem_after_load_gb"))
    if before is None and after is not None and w is not None:
        before = after + w  # 'Load weight end. avail mem=X, mem usage=W' -> free before = X + W
    out = {}
    if w is not None:
        out["weights_bytes"] = int(w * GIB)
    if before is not None:
        out["free_memory_before_load_gib"] = before
    return out


def other_fields(rec: dict, p) -> list[tuple[str, object, object]]:
    """(field, predicted, logged) for the other figures the record logs."""
    lg, fl = rec["logged"], rec.get("flags", {})
    pairs = [
        ("mem_fraction_static", p.mem_fraction_static, fl.get("mem_fraction_static")),
        ("k_size_gb", p.k_size_gib, lg.get("k_size_gb")),
        ("kv_size_gb", p.kv_size_gib, lg.get("kv_size_gb", lg.get("kv_size_gb_logged"))),
        ("max_running_requests", p.max_running_requests, lg.get("max_running_requests")),
        ("context_len", p.context_length, lg.get("context_len")),
        ("chunked_prefill_size", p.chunked_prefill_size, fl.get("chunked_prefill_size")),
        ("cuda_graph_max_bs", p.cuda_graph_max_bs, fl.get("cuda_graph_max_bs")),
        ("attention_backend", p.attention_backend, fl.get("attention_backend")),
        ("max_mamba_cache_size", p.mamba.max_mamba_cache_size if p.mamba else None, lg.get("max_mamba_cache_size")),
        ("mamba_ssm_state_gb", p.mamba.ssm_state_gib if p.mamba else None, lg.get("mamba_ssm_state_gb")),
        ("avail_mem_after_pool_gb", p.free_after_pool_gib, lg.get("avail_mem_after_pool_gb")),
    ]
    out = []
    for name, pred, logged in pairs:
        if isinstance(logged, str) and name == "attention_backend":
            logged = logged.split(" ")[0]
        if _num(logged) is None and not (name == "attention_backend" and isinstance(logged, str)):
            continue
        out.append((name, round(pred, 3) if isinstance(pred, float) else pred, logged))
    return out


def gpu_of(rec: dict, m: dict) -> GPU:
    if m.get("gpu"):
        return get_gpu(m["gpu"])
    mib = rec["logged"][m["gpu_from_log_mib"]]
    return GPU(name=m["gpu_name"], vendor="nvidia", architecture="from log", compute_capability=m["compute_capability"],
               memory_gib=mib / 1024, memory_source=f"record {rec['id']}: nvidia-smi total {mib} MiB",
               bandwidth_gbps=0, tflops_bf16=0, tflops_fp8=None, spec_source="not needed", kind="custom")


def run(path: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    data = json.loads(path.read_text())
    rows, skipped = [], []
    for rec in data["sglang"]:
        rid = rec["id"]
        if not rec.get("complete"):
            skipped.append((rid, "incomplete record: " + (rec.get("notes") or "")[:140]))
            continue
        m = MAPPING.get(rid)
        if m is None:
            skipped.append((rid, "no config / GPU / release mapping for this record"))
            continue
        cfg = json.loads((CONFIGS / m["config"]).read_text())
        cfg.update(m.get("overlay", {}))
        gpu = gpu_of(rec, m)
        flags = flags_of(rec)
        want = rec["logged"]["kv_tokens"]
        row = {"id": rid, "model": rec["model"], "gpu": gpu.name, "release": m["release"], "logged_tokens": want,
               "why_release": m["why_release"]}
        inputs = logged_inputs(rec)
        for mode, extra in (("config", {}), ("logged-mem", inputs)):
            if mode == "logged-mem" and not extra:
                row[mode] = None
                continue
            try:
                p = plan(cfg, gpu=gpu, release=m["release"], **flags, **extra)
            except EngineInputError as e:
                row[mode] = {"error": str(e)}
                continue
            row[mode] = {"tokens": p.max_total_num_tokens, "err_pct": (p.max_total_num_tokens - want) / want * 100,
                         "mfs": p.mem_fraction_static, "free_before_load_gib": p.free_before_load_gib,
                         "weights_gib": p.weights_gib, "cell": p.cell_size_bytes, "kv_size_gib": p.kv_size_gib,
                         "max_running_requests": p.max_running_requests,
                         "inputs": sorted(extra), "other": other_fields(rec, p)}
        rows.append(row)
    return rows, skipped


def best(row: dict) -> tuple[str, dict] | None:
    for mode in ("logged-mem", "config"):
        r = row.get(mode)
        if r and "tokens" in r:
            return mode, r
    return None


def summary(rows: list[dict], mode: str | None) -> str:
    errs = []
    for row in rows:
        r = best(row) if mode is None else (row.get(mode), )
        if mode is None:
            r = r[1] if r else None
        else:
            r = r[0]
        if r and "tokens" in r:
            errs.append(abs(r["err_pct"]))
    if not errs:
        return "no records"
    within = sum(e <= TARGET_PCT for e in errs)
    beyond = sum(e > LIMIT_PCT for e in errs)
    ok = within / len(errs) >= TARGET_SHARE and beyond == 0
    return (f"{within}/{len(errs)} within {TARGET_PCT}% ({within / len(errs):.0%}, target {TARGET_SHARE:.0%}), "
            f"{beyond} beyond {LIMIT_PCT}%, max {max(errs):.2f}% -> {'MET' if ok else 'NOT MET'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows, skipped = run(args.cases)
    if args.json:
        print(json.dumps({"rows": rows, "skipped": skipped}, indent=1, default=str))
        return 0
    print(f"{'id':8} {'model':34} {'release':12} {'logged':>10} | {'config':>10} {'err%':>7} | "
          f"{'logged-mem':>10} {'err%':>7}  mfs / free-before / weights")
    for row in rows:
        def cell(mode, row=row):
            r = row.get(mode)
            if r is None:
                return f"{'-':>10} {'':>7}"
            if "error" in r:
                return f"{'refused':>10} {'':>7}"
            return f"{r['tokens']:>10} {r['err_pct']:>+7.2f}"
        b = best(row)
        extra = (f"{b[1]['mfs']:.4f} / {b[1]['free_before_load_gib']:.2f} / {b[1]['weights_gib']:.2f} GiB"
                 if b else "")
        print(f"{row['id']:8} {row['model'][:34]:34} {row['release']:12} {row['logged_tokens']:>10} | "
              f"{cell('config')} | {cell('logged-mem')}  {extra}")
        for mode in ("config", "logged-mem"):
            r = row.get(mode)
            if r and "error" in r:
                print(f"         {mode}: {r['error']}")
        if b:
            print("         " + ", ".join(f"{n} {pv} (log {lv})" for n, pv, lv in b[1]["other"]))
    print("\nrelease per record:")
    for row in rows:
        print(f"  {row['id']}: {row['release']} -- {row['why_release']}")
    print("\nskipped:")
    for rid, why in skipped:
        print(f"  {rid}: {why}")
    print("\nsummary (KV tokens, complete records):")
    print(f"  config only (catalog GPU, overhead fit, weights from parameter count): {summary(rows, 'config')}")
    print(f"  logged-mem (the record's free-before-load and weights as inputs):       {summary(rows, 'logged-mem')}")
    print(f"  best available per record (logged-mem where logged, else config):       {summary(rows, None)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
