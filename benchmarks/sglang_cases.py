#!/usr/bin/env python
"""SGLang start-up memory plan vs public SGLang logs.

For every record of ``../shared/cases/runtime_startup_logs.json`` key ``sglang`` marked complete, runs
:func:`calculator.runtimes.sglang.plan` and prints predicted vs logged figures, in two modes:

- ``config``: everything from the model's config.json, the GPU catalog, SGLang's rules and the start-up
  overhead of :mod:`calculator.runtimes.sglang.startup` (medians of public start-up logs, none of them a record
  here); weights estimated from the config (:mod:`calculator.runtimes.sglang.weights`). What the product can say
  before a run.
- ``config-loo``: the same without the public logs that share a source (author and machine) with the record
  (``related_records`` in ``data/startup_overhead.json``); equal to ``config`` for the others.
- ``logged-T``: the log's free memory before loading (``Load weight begin. avail mem``) as input, the
  weights estimated from the config: checks the weights estimate alone.
- ``logged-mem``: the same, but with the two memory figures SGLang measures and logs before sizing the
  pool (``Load weight begin. avail mem`` = free memory before loading, and the weights ``mem usage``)
  taken from that record's log as inputs. This checks SGLang's own rules (defaults, fraction, cell size,
  paging, Mamba split) apart from the two numbers the source cannot give.

Summary against the target: KV tokens within 2% for >= 90% of complete records, none beyond 10%.
Records that are not complete are listed with the reason. Nothing here is fitted per record: the
mapping below only names each record's config file, GPU and release (with the reason for each choice).

    python benchmarks/sglang_cases.py [--cases PATH] [--json]

``--cases benchmarks/data/sglang_extra_logs.json`` scores more public logs collected to play the held-back set
(records ``sgx-*``; their mapping is below with the shared ones). Records the product refuses (a release no covered
one stands in for) print ``n/a`` with the reason and are left out of the summary counts.
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
from calculator.runtimes.sglang.memory import startup_overhead_gib

SHARED = next((p for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared", Path("/work/shared"))
               if (p / "cases").is_dir()), ROOT.parent / "shared")
CASES = SHARED / "cases" / "runtime_startup_logs.json"
CONFIGS = SHARED / "data" / "model_configs"
# the CLI's offline catalog holds configs the shared folder does not (Qwen3-8B's is in both)
CATALOG_CONFIGS = ROOT / "calculator" / "data" / "model_configs"
GIB = 1 << 30
TARGET_PCT, TARGET_SHARE, LIMIT_PCT = 2.0, 0.90, 10.0

# The V3.2-Exp config is not among the shared configs: it is DeepSeek-V3's with the architecture and the
# three indexer keys of deepseek-ai/DeepSeek-V3.2-Exp's published config.json (index_head_dim 128,
# index_n_heads 64, index_topk 2048); SGLang's is_deepseek_nsa keys on the architecture and index_topk.
V32_OVERLAY = {"architectures": ["DeepseekV32ForCausalLM"], "index_head_dim": 128, "index_n_heads": 64,
               "index_topk": 2048}

# Per record: config file (+ overlay), GPU, release and why. GPUs outside the catalog are built from
# the record's own logged total memory; ``capacity_from_log_mib`` names the record's nvidia-smi total of a
# catalog GPU (the catalog holds torch's total, SGLang's defaults read nvidia-smi's).
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
                "why_release": "SGL_VERSION 0.4.3.post4 in the Dockerfile on the same page",
                "why_note": "weights are the log's 15.54 GiB (parameters + float32 RoPE cache + caching-allocator "
                            "rounding). The public logs (data/startup_overhead.json) have no L4: the context part is "
                            "the line through the NVIDIA logs by resident threads at 58 SMs x 1536 (0.20 GiB), the "
                            "distributed init the median of the two 4-rank PCIe logs (0.10, 0.39) 0.245: 0.44 GiB where "
                            "this log took 0.40. The pool is 2.8 GiB of 21.6, so every 0.1 GiB is 3.0% of the tokens: "
                            "the plan says so and asks for the logged free memory"},
    "sgl-015": {"config": "Qwen__Qwen3.5-9B.json", "gpu": "RTX4090", "release": "0.5.10.post1",
                "why_release": "source build 0.0.0.dev11582 dated 2026-04-14; 0.5.10.post1 (2026-04-08) is the "
                               "last release before it (assumption)",
                "why_note": "weights within 0.05 GiB of the log (vision tower split by TP, gated query, RoPE cache); "
                            "start-up overhead 0.63 GiB from public logs (context line by resident threads at 128 SMs x "
                            "1536, 0.37 + 2x RTX 4090 distributed init 0.26 of sglang#16920) against the log's 0.71"},
    "sgl-025": {"config": "Qwen__Qwen3-0.6B.json", "gpu": "RTX 5080", "capacity_from_log_mib": "nvidia_smi_total_mib",
                "release": "0.4.10.post2",
                "why_release": "version not given; log dated 2025-08-08; 0.4.10.post2 (2025-08-03) is the last "
                               "release before it (assumption)"},
    "sgl-006": {"config": "Qwen__Qwen3-30B-A3B.json", "overlay": {"num_hidden_layers": 5}, "gpu": "MI355X",
                "release": "0.5.7",
                "why_release": "rocm/sgl-dev:v0.5.7 image; the record's model keeps 5 layers of Qwen3-30B-A3B"},
    "sgl-003": {"config": "moonshotai__Kimi-K2.5.json", "gpu": "MI355X", "release": "0.5.9",
                "why_release": "rocm/sgl-dev:v0.5.8.post1-...-20260218 image: main of 2026-02-18, which runs "
                               "KimiK25ForConditionalGeneration; 0.5.8.post1 has no such class, 0.5.9 (2026-02-23) is "
                               "the first release that does, with the same memory rules as 0.5.8.post1"},
    # --- benchmarks/data/sglang_extra_logs.json (more public logs, collected to play the held-back set) ---------------
    # Releases outside the covered list are mapped to the covered release whose memory rules they share, checked by
    # diffing the two wheels (profile_max_num_token, init_memory_pool, the mem_fraction_static default block);
    # ``cli`` holds launch_server flags that the record's quoted command line passes and that change memory.
    "sgx-001": {"config": "meta-llama__Llama-3.1-8B-Instruct.json", "gpu": "H100", "release": "0.4.3.post4",
                "why_release": "docs build of 2025-01-23 = 0.4.1.post7 (2025-01-20); its profile_max_num_token is "
                               "identical to 0.4.3.post4's, so is the mem_fraction_static TP table (server_args.py:187-197 "
                               "of 0.4.1.post7); init_memory_pool differs only in the EAGLE headroom (no speculative "
                               "decoding here)"},
    "sgx-002": {"config": "meta-llama__Llama-3.1-8B-Instruct.json", "gpu": "H100", "release": "0.4.3.post4",
                "why_release": "main of 2025-03-25, after 0.4.4.post1 (2025-03-14): 0.4.4.post1's profile_max_num_token "
                               "and mem_fraction_static TP table (server_args.py:204-214) are 0.4.3.post4's; it adds only "
                               "the page alignment (page 1 here). --attention-backend fa3 does not change the pool in this "
                               "release family (no backend term in profile_max_num_token)"},
    "sgx-003": {"config": "Qwen__Qwen2.5-7B.json", "gpu": "RTX3090", "release": "0.4.3.post4",
                "why_release": "image of 2025-02-04 = 0.4.2.post1/post2: profile_max_num_token and the mem_fraction_static "
                               "TP table (server_args.py:191-201 of 0.4.2.post2) are 0.4.3.post4's",
                "why_note": "DeepSeek-R1-Distill-Qwen-7B's config.json is not in the catalogs; it is Qwen2.5-Math-7B's "
                            "architecture, with Qwen2.5-7B's dimensions (28 layers, 4 KV heads of 128, hidden 3584, "
                            "intermediate 18944, vocab 152064, untied, max_position_embeddings 131072 - the log's "
                            "context_len); only rope_theta differs (10000), which changes no memory"},
    "sgx-004": {"config": "Qwen__Qwen3-235B-A22B-FP8.json", "gpu": "H100", "release": "0.4.10.post2",
                "why_release": "issue of 2025-07-22 (0.4.9.post2/post3); 0.4.10.post2 (2025-07-31) is the first covered "
                               "release after it. 0.4.9.post3's profile_max_num_token is identical to 0.4.10.post2's and "
                               "its init_memory_pool differs only in the draft worker's layer count; "
                               "--mem-fraction-static 0.93 is passed, so the default table does not matter"},
    "sgx-005": {"config": "Qwen__Qwen3-14B.json", "gpu": "RTX4090", "capacity_from_log_mib": "nvidia_smi_total_mib",
                "release": "0.5.10.post1",
                "why_release": "source build at commit ebaf86d4, notes of 2026-06-14; 0.5.10.post1 (2026-04-08) is the "
                               "last covered release before it (assumption)"},
    "sgx-006": {"config": "zai-org__GLM-5-FP8.json", "gpu": "MI355X", "release": "0.5.9",
                "cli": {"kv_cache_dtype": "fp8_e4m3", "attention_backend": "triton"},
                "why_release": "rocm/sgl-dev:v0.5.8.post1-...-20260218 image (main of 2026-02-18) runs "
                               "GlmMoeDsaForCausalLM, which 0.5.8.post1 does not register; 0.5.9 (2026-02-23) is the first "
                               "release that does (as for sgl-003, same author and image)",
                "why_note": "not a blind test of the start-up overhead: the same page gives row pub-mi355x8 of "
                            "data/startup_overhead.json"},
    "sgx-007": {"config": "Qwen__Qwen3-8B.json", "gpu": "B200", "release": "0.5.10.post1",
                "why_release": "log of 2026-04-27 from main; 0.5.10.post1 (2026-04-08) is the last covered release before "
                               "it (assumption)"},
    "sgx-008": {"config": "google__gemma-3-4b-it.json", "gpu": "H200", "release": "0.4.3.post4",
                "why_release": "main of 2025-03-27 = 0.4.4.post2 (released that day): its profile_max_num_token and "
                               "mem_fraction_static TP table (server_args.py:218-228) are 0.4.3.post4's, but "
                               "Gemma3ForConditionalGeneration is not a class of 0.4.3.post4 and 0.4.10.post2 pools Gemma "
                               "3's sliding-window layers apart, so no covered release models this log: the product "
                               "refuses it (expected)"},
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


MODES = ("config", "config-loo", "logged-T", "logged-mem")


def run(path: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    """Every complete record in four modes: ``config`` (nothing from the log), ``config-loo`` (the same without
    the start-up logs related to the record's source),
    ``logged-T`` (the log's free memory before loading, weights estimated: checks the weights estimate alone)
    and ``logged-mem`` (both logged figures: checks SGLang's rules alone)."""
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
        cfg_path = CONFIGS / m["config"]
        if not cfg_path.exists():
            cfg_path = CATALOG_CONFIGS / m["config"]
        cfg = json.loads(cfg_path.read_text())
        cfg.update(m.get("overlay", {}))
        gpu = gpu_of(rec, m)
        flags = flags_of(rec)
        flags.update(m.get("cli", {}))
        if m.get("capacity_from_log_mib"):
            # nvidia-smi's memory.total of the card (what ServerArgs reads for its defaults): a property of the
            # GPU the record names, not a measurement of the run
            flags["gpu_memory_capacity_mib"] = rec["logged"][m["capacity_from_log_mib"]]
        want = rec["logged"]["kv_tokens"]
        row = {"id": rid, "model": rec["model"], "gpu": gpu.name, "release": m["release"], "logged_tokens": want,
               "why_release": m["why_release"], "why_miss": m.get("why_miss"), "why_note": m.get("why_note")}
        inputs = logged_inputs(rec)
        world = flags.get("tp_size", 1)
        try:
            oh_loo = startup_overhead_gib(gpu, world, exclude_record=rid)[0]
            loo_inputs: dict | None = {"free_memory_before_load_gib": gpu.memory_gib - oh_loo}
        except EngineInputError as e:
            loo_inputs = {"error": str(e)}  # no public log of this kind left
        for mode, extra in (("config", {}), ("config-loo", loo_inputs),
                            ("logged-T", {k: v for k, v in inputs.items() if k == "free_memory_before_load_gib"}),
                            ("logged-mem", inputs)):
            if extra and "error" in extra:
                row[mode] = {"error": "no public start-up log of this kind without this record's source: " + extra["error"]}
                continue
            if mode != "config" and not extra:
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
                         "pct_per_0_1_gib": p.tokens_pct_per_0_1_gib_overhead,
                         "inputs": sorted(extra), "other": other_fields(rec, p)}
        row["logged_T"] = inputs.get("free_memory_before_load_gib")
        row["logged_W"] = inputs["weights_bytes"] / GIB if "weights_bytes" in inputs else None
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
        if mode is None:
            b = best(row)
            r = b[1] if b else None
        else:
            r = row.get(mode)
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
    print(f"{'id':8} {'model':30} {'release':12} {'logged':>10} | " + " | ".join(f"{m:>10} {'err%':>6}" for m in MODES))
    for row in rows:
        def cell(mode, row=row):
            r = row.get(mode)
            if r is None:
                return f"{'-':>10} {'':>6}"
            if "error" in r:
                return f"{'n/a':>10} {'':>6}"
            return f"{r['tokens']:>10} {r['err_pct']:>+6.2f}"
        print(f"{row['id']:8} {row['model'][:30]:30} {row['release']:12} {row['logged_tokens']:>10} | "
              + " | ".join(cell(m) for m in MODES))
        c = row.get("config") or {}
        if "tokens" in c:
            lt = f"{row['logged_T']:.2f}" if row["logged_T"] is not None else "not logged"
            lw = f"{row['logged_W']:.2f}" if row["logged_W"] is not None else "not logged"
            sens = f"; {c['pct_per_0_1_gib']:.1f}% of tokens per 0.1 GiB of start-up overhead" \
                if c.get("pct_per_0_1_gib") else ""
            print(f"         config: free before load {c['free_before_load_gib']:.2f} GiB (log {lt}), weights "
                  f"{c['weights_gib']:.2f} GiB (log {lw}), mem_fraction_static {c['mfs']:.4f}{sens}")
        for mode in MODES:
            r = row.get(mode)
            if r and "error" in r:
                print(f"         {mode}: {r['error']}")
        b = best(row)
        if b:
            print("         " + ", ".join(f"{n} {pv} (log {lv})" for n, pv, lv in b[1]["other"]))
        if row.get("why_miss"):
            print(f"         why: {row['why_miss']}")
        if row.get("why_note"):
            print(f"         note: {row['why_note']}")
    print("\nrelease per record:")
    for row in rows:
        print(f"  {row['id']}: {row['release']} -- {row['why_release']}")
    print("\nskipped:")
    for rid, why in skipped:
        print(f"  {rid}: {why}")
    print("\nsummary (KV tokens, complete records):")
    print(f"  config only (catalog GPU, start-up overhead of public logs, weights estimate): {summary(rows, 'config')}")
    print(f"  config, without the start-up logs related to the record's source:          {summary(rows, 'config-loo')}")
    print(f"  logged-T (the log's free-before-load, weights estimated):             {summary(rows, 'logged-T')}")
    print(f"  logged-mem (the record's free-before-load and weights as inputs):       {summary(rows, 'logged-mem')}")
    print(f"  best available per record (logged-mem where logged, else config):       {summary(rows, None)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
