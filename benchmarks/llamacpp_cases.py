#!/usr/bin/env python
"""Accuracy of calculator.runtimes.llamacpp.memory.plan against the public llama.cpp / Ollama start-up logs in
/work/shared/cases/runtime_startup_logs.json (key "llamacpp").

Each complete record is mapped to its inputs here by reading the record's own quote (model, -c, -np, cache
types, flash attention, build); the model's attention shape comes from the Transformers config in
/work/shared/data/model_configs (as llama.cpp's converter writes it: gguf_meta.meta_from_hf_config). The
Hub is unreachable, so the GGUF files' headers cannot be read: model buffers are *derived from llama.cpp's
quantization rules* for the file type the record names (quant_rules.derive_meta: each tensor's type as
llama-quantize picks it, the file layout, then memory.plan's split between CPU_Mapped and the GPU buffer).
Files whose types were chosen by hand (Unsloth Dynamic "UD-" quants) cannot be derived and are listed as
skipped with that reason. Target: KV cache within 1% and model buffers within 2% for 90% of the figures
compared.

Three more tables:

* compute buffers: memory.compute_buffers (an estimate with a stated error) against every record whose log has a
  compute-buffer figure, per device, with the error; and Ollama's own graph estimate (GraphSize, Ollama < 0.30)
  where Ollama logged it;

* speed: the baseline (no speculation) decode rates of llama.cpp in /work/shared/cases/spec_decode_benchmarks.json
  against calculator.runtimes.llamacpp.speed (decode bandwidth-bound over the GGUF bytes per device, layer / row
  split over several GPUs; the efficiency is perf's assumed llama.cpp row, not fitted to these), then the
  speculative speedup with a draft model (spec_speed: k draft passes + a k+1-token verify; acceptance from the
  record, else only the break-even acceptance rate), with a summary (win/lose calls right, median |error|);
  records whose model, quant or drafting method is not modelled are listed as skipped with the reason;
* sizes: the .gguf sizes the Hub pages list for the offline GGUF catalog (calculator/data/gguf_repos.json)
  against the tensor data derived from llama.cpp's quantization rules (the file adds its header, a few MB).

    python benchmarks/llamacpp_cases.py [--cases PATH] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calculator.runtimes.llamacpp.gguf_meta import meta_from_hf_config
from calculator.runtimes.llamacpp.quant_rules import derive_meta, ftype_from_filename
from calculator.runtimes.llamacpp.memory import (
    RELEASE_0_3_36,
    RELEASE_LEGACY,
    RELEASE_PRE_VLESS,
    NotModelled,
    plan,
)

DEFAULT_CASES = Path("/work/shared/cases/runtime_startup_logs.json")
CONFIGS = Path("/work/shared/data/model_configs")
MiB = 2 ** 20

#: id -> (config file, plan kwargs, {logged key: predicted figure}). Inputs as the record's quote states them.
INPUTS = {
    # Ollama llama runner, llama3.2:3b: llama_kv_cache size = 448.00 MiB (4096 cells, 28 layers)
    "lcpp-027": ("meta-llama__Llama-3.2-3B.json", dict(n_ctx=4096, device="Metal"),
                 {"kv_size_mib": "kv_total", "k_size_mib": "k", "v_size_mib": "v", "kv_cells": "cells",
                  "kv_layers": "layers", "output_buffer_cpu_mib": "output"}),
    # mid-2025 master (llama_kv_cache_unified era), FA not shown; 70000 -> 70016 cells means pad 32 = FA off.
    # The config is Qwen3-30B-A3B's (the Thinking-2507 checkpoint shares its attention shape).
    "lcpp-014": ("Qwen__Qwen3-30B-A3B.json", dict(n_ctx=70000, flash_attn="off", release=RELEASE_LEGACY,
                                                  device="Vulkan"),
                 {"kv_size_mib": "kv_total", "k_size_mib": "k", "v_size_mib": "v",
                  "output_buffer_vulkan_host_mib": "output"}),
    # late-2025 master, gpt-oss-20b, -np 4 unified ("4/1 seqs"), 4096 cells, SWA 1024 cells
    "lcpp-016": ("openai__gpt-oss-20b.json", dict(n_ctx=4096, n_seq_max=4, kv_unified=True),
                 {"kv_size_mib": "kv_nonswa", "k_size_mib": "k_nonswa", "v_size_mib": "v_nonswa",
                  "swa_kv_size_mib": "kv_swa", "swa_k_size_mib": "k_swa", "swa_v_size_mib": "v_swa"}),
}

# Multi-GPU --fit runs (llama.cpp b7522, 4 x 20 GiB CUDA): the per-device split comes from --fit and free
# memory (not modelled), but llama_memory_breakdown_print's "context" column is each device's share of the
# KV cache, so their sum is the whole cache. Each column is printed as whole MiB (truncated), so the sum may
# be short by up to one MiB per device.
CONTEXT_SUM = "sum of per-device context MiB"
INPUTS.update({
    # DeepSeek-V3.1-Terminus (config: DeepSeek-V3, same attention); MLA with a V cache before PR #19067
    "lcpp-024": ("deepseek-ai__DeepSeek-V3.json",
                 dict(n_ctx=16384, cache_type_k="q4_0", cache_type_v="q4_0", flash_attn="on",
                      release=RELEASE_PRE_VLESS), {CONTEXT_SUM: "kv_total"}),
    # GLM-4.6 (config: GLM-4.7, the same Glm4MoeForCausalLM attention values per SOURCES.md #27): -c 65536 -np 4
    "lcpp-020": ("zai-org__GLM-4.7.json",
                 dict(n_ctx=65536, n_seq_max=4, cache_type_k="q4_0", cache_type_v="q4_0", flash_attn="on"),
                 {CONTEXT_SUM: "kv_total"}),
    # Qwen3-VL-235B-A22B (config: Qwen3-235B-A22B; the VL model's text tower has the same 94 layers x 4 KV
    # heads x 128): -c 65536 -np 4
    "lcpp-021": ("Qwen__Qwen3-235B-A22B.json",
                 dict(n_ctx=65536, n_seq_max=4, cache_type_k="q4_0", cache_type_v="q4_0", flash_attn="on"),
                 {CONTEXT_SUM: "kv_total"}),
})

#: Model buffers: id -> (file type or GGUF file name (its type is read from the name), plan kwargs override,
#: {logged key: predicted model buffer}). The buffers are derived (no header), see the module docstring.
MODEL_BUFFERS = {
    # llama3.2:3b, "file type = Q4_K - Medium", 29/29 layers on Metal, mmap (UseMmap:true): token_embd stays on
    # the CPU (llama-model.cpp: the input layer is always on the CPU), the tied output copy is on Metal, so the
    # Metal mapped range spans the whole file. Older Metal builds name the buffer "Metal_Mapped" (now MTL0_Mapped).
    "lcpp-027": ("Q4_K_M", {}, {"model_buffer_cpu_mapped_mib": "CPU_Mapped",
                                "model_buffer_metal_mapped_mib": "MTL0_Mapped"}),
    # Unsloth Dynamic quants: per-tensor types chosen by hand (refused by ftype_from_filename with the reason)
    "lcpp-024": ("DeepSeek-V3.1-Terminus-UD-TQ1_0.gguf", {}, {}),
    "lcpp-020": ("GLM-4.6-UD-TQ1_0.gguf", {}, {}),
    "lcpp-021": ("Qwen3-VL-235B-A22B-Instruct-UD-IQ1_M-00001-of-00002.gguf", {}, {}),
}

#: Records Ollama ran on its own Go engine (Ollama 0.19 .. 0.24 for the architectures of OllamaEngineRequired): their
#: figures come from calculator/runtimes/llamacpp/ollama.py (Ollama's kvcache / ggml backend rules), not llama.cpp's.
#: id -> (config, Ollama release, engine_kv kwargs, {logged key: "kv" | "weights_cpu"}, file type for the weights).
OLLAMA_ENGINE_INPUTS = {
    # Ollama 0.21.0, gemma3:4b Q4_K_M, KvSize 4096, Parallel 1, BatchSize 512, FA enabled, 35/35 layers on Metal.
    # "model weights device=CPU" is the token embedding (the Go engine's input weights; tied, so quantized as the
    # output, Q6_K). The Metal figure (3.1 GiB) includes the vision tower Ollama ships in the same blob, which the
    # text config does not describe: not compared.
    "lcpp-026": ("google__gemma-3-4b-it.json", "0.21.0", dict(num_ctx=4096, num_parallel=1, num_batch=512),
                 {"kv_cache_metal_mib": "kv", "weights_cpu_mib": "weights_cpu"}, "Q4_K_M"),
}

SKIP = {
    "lcpp-019": "gemma-4-E4B: no config.json offline and no GGUF header (per-layer KV sharing and head sizes "
                "come from the GGUF: attention.shared_kv_layers, key_length_swa)",
}

TARGETS = {"kv": (1.0, 0.90), "model_buffer": (2.0, 0.90), "output_buffer": (2.0, 0.90)}


def figures(p) -> dict:
    out = {"kv_total": p.kv_bytes / MiB}
    outputs = [b for b in p.buffers if b.kind == "output" and b.bytes is not None]
    if outputs:
        out["output"] = outputs[0].bytes / MiB
    if len(p.kv_caches) == 1:
        c = p.kv_caches[0]
        out.update(k=c.k_bytes / MiB, v=c.v_bytes / MiB, cells=c.cells, layers=len(c.layers))
    else:
        full, swa = p.kv_caches
        out.update(kv_nonswa=full.total_bytes / MiB, k_nonswa=full.k_bytes / MiB, v_nonswa=full.v_bytes / MiB,
                   kv_swa=swa.total_bytes / MiB, k_swa=swa.k_bytes / MiB, v_swa=swa.v_bytes / MiB)
    return out


def run(path: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    data = json.loads(path.read_text())
    rows, skipped = [], []
    for rec in data["llamacpp"]:
        rid = rec["id"]
        if not rec.get("complete"):
            skipped.append((rid, "record not complete (model, flags or KV figure missing in the source)"))
            continue
        if rid in SKIP:
            skipped.append((rid, SKIP[rid]))
            continue
        if rid in OLLAMA_ENGINE_INPUTS:
            o_rows, why = ollama_engine_rows(rid, rec)
            rows += o_rows
            if why:
                skipped.append((rid, why))
            continue
        if rid not in INPUTS:
            skipped.append((rid, "no input mapping for this record"))
            continue
        cfg, kwargs, wanted = INPUTS[rid]
        try:
            p = plan(meta_from_hf_config(json.loads((CONFIGS / cfg).read_text()), source=cfg), **kwargs)
        except NotModelled as exc:
            skipped.append((rid, f"not modelled: {exc}"))
            continue
        got = figures(p)
        for key, fig in wanted.items():
            if key == CONTEXT_SUM:
                logged = sum(v for k, v in rec["logged"].items() if k.endswith("_context_mib"))
            else:
                logged = rec["logged"][key]
            pred = got[fig]
            err = (pred - logged) / logged * 100 if logged else None
            kind = "output_buffer" if fig == "output" else "kv"
            rows.append({"id": rid, "figure": key, "kind": kind, "predicted": round(pred, 2), "logged": logged,
                         "err_pct": None if err is None else round(err, 3),
                         "release": kwargs.get("release", RELEASE_0_3_36)})
        model_rows, why = model_buffer_rows(rid, rec, cfg, kwargs)
        rows += model_rows
        if why:
            skipped.append((rid, why))
    return rows, skipped


def ollama_engine_rows(rid: str, rec: dict) -> tuple[list[dict], str | None]:
    """Predicted vs logged figures of a record Ollama ran on its own Go engine (:mod:`calculator.runtimes.llamacpp.
    ollama`): the KV cache by its kvcache rules, the CPU model weights by its ggml backend's placement (derived from
    llama.cpp's quantization rules for the file type); the figures not compared, with why."""
    from calculator.runtimes.llamacpp import ollama as og

    cfg, release, kw, wanted, ftype = OLLAMA_ENGINE_INPUTS[rid]
    config = json.loads((CONFIGS / cfg).read_text())
    meta = derive_meta(config, ftype, source=cfg)
    eng = og.ollama_engine(meta.architecture, release)
    if eng.engine != "ollama":
        return [], f"Ollama {release} runs {meta.architecture} on {eng.runner}, not its own engine"
    kv = og.engine_kv(meta, **kw)
    weights = og.engine_weights(meta, "Metal")
    got = {"kv": None if kv is None else kv["bytes"] / MiB, "weights_cpu": None if weights is None else weights["CPU"] / MiB}
    rows = []
    for key, fig in wanted.items():
        logged, pred = rec["logged"][key], got[fig]
        if pred is None:
            continue
        rows.append({"id": rid, "figure": key, "kind": "kv" if fig == "kv" else "model_buffer",
                     "predicted": round(pred, 2), "logged": logged, "err_pct": round((pred - logged) / logged * 100, 3),
                     "release": f"Ollama {release} own engine ({eng.rule}; logged with one decimal)"})
    return rows, ("weights_metal_gib not compared: Ollama's blob carries the vision tower too; compute graph: see "
                  "the compute table")


def model_buffer_rows(rid: str, rec: dict, cfg: str, kwargs: dict) -> tuple[list[dict], str | None]:
    """Predicted vs logged model buffers for one record, derived from llama.cpp's quantization rules; or the
    reason none are compared."""
    logged_keys = [k for k in rec["logged"] if "model" in k or "weights" in k]
    if rid not in MODEL_BUFFERS:
        return [], ("model buffers: none logged" if not logged_keys else
                    "model buffers: no mapping for this record")
    ftype, extra, wanted = MODEL_BUFFERS[rid]
    try:
        if ftype.lower().endswith(".gguf"):
            ftype = ftype_from_filename(ftype)
        meta = derive_meta(json.loads((CONFIGS / cfg).read_text()), ftype, source=cfg)
        p = plan(meta, **(kwargs | extra))
    except NotModelled as exc:
        return [], f"model buffers not derivable: {exc}"
    got = {b.buft: b.bytes / MiB for b in p.buffers if b.kind == "model" and b.bytes is not None}
    rows = []
    for key, buft in wanted.items():
        logged = rec["logged"][key]
        pred = got.get(buft)
        if pred is None:
            continue
        rows.append({"id": rid, "figure": key, "kind": "model_buffer", "predicted": round(pred, 2),
                     "logged": logged, "err_pct": round((pred - logged) / logged * 100, 3),
                     "release": f"derived: llama.cpp rules for {ftype}"})
    left = [k for k in logged_keys if k not in wanted and not k.startswith("ollama_est")]
    why = None
    if left:
        why = (f"model buffers {', '.join(left)} not compared: " +
               "not modelled")
    return rows, why


#: Compute buffers (memory.compute_buffers, an estimate with a stated error): id -> (config, plan kwargs,
#: {logged key: buffer type}). Every record whose log has a compute-buffer figure is listed, compared or skipped
#: with the reason. The FFN width needs a tensor table: derived from llama.cpp's quantization rules (the shapes do
#: not depend on the file type).
COMPUTE_INPUTS = {
    # Ollama 0.21's llama.cpp runner, llama3.2:3b, n_ctx 4096, n_ubatch 512, FA auto -> enabled, 29/29 layers on Metal
    # (April 2026: a build before PR #23764, so an f32 KQ mask cast to f16: kq_mask_f16=False)
    "lcpp-027": ("meta-llama__Llama-3.2-3B.json", dict(n_ctx=4096, device="Metal", kq_mask_f16=False),
                 {"compute_buffer_metal_mib": "MTL0", "compute_buffer_cpu_mib": "CPU"}),
    # gpt-oss with 12 SWA layers (24 layers: gpt-oss-20b), n_ctx 4096, SWA cache 768 cells, FA auto -> enabled, Metal
    # (late-Nov 2025 master: before PR #23764)
    "lcpp-011": ("openai__gpt-oss-20b.json", dict(n_ctx=4096, device="Metal", kq_mask_f16=False),
                 {"compute_buffer_metal_mib": "MTL0", "compute_buffer_cpu_mib": "CPU"}),
    # legacy build, FA off (70016 cells = pad 32), Vulkan: the compute buffer it failed to allocate, in bytes
    "lcpp-014": ("Qwen__Qwen3-30B-A3B.json", dict(n_ctx=70000, flash_attn="off", release=RELEASE_LEGACY,
                                                  device="Vulkan"),
                 {"failed_compute_buffer_bytes": "Vulkan0"}),
}
#: Ollama's own graph estimate (fs/ggml/ggml.go GraphSize, Ollama < 0.30) against the figure Ollama logged.
OLLAMA_GRAPH_INPUTS = {
    "lcpp-027": ("meta-llama__Llama-3.2-3B.json", dict(num_ctx=4096, metal=True), "ollama_est_compute_graph_metal_mib"),
}
COMPUTE_SKIP = {
    "lcpp-019": "gemma-4-E4B: no config.json offline and no GGUF header (per-layer embeddings, shared KV)",
    "lcpp-016": "SYCL backend; flash attention state not in the excerpt; graph splits = 50 (layers left on the CPU)",
    "lcpp-015": "two different GPUs with pipeline parallelism (n_copies=4), a 2024 build; model not named and its "
                "config not offline",
    "lcpp-018": "a 2024 Ollama ROCm build on two GPUs: its allocator and n_ubatch (512 = n_batch then) predate the "
                "modelled compute graph; the model's exact quant is not in the excerpt",
    "lcpp-026": ("Ollama 0.21.0 ran gemma3 on its own Go engine (OllamaEngineRequired, fs/ggml/ggml.go:277-302 at "
                 "v0.21.0): its compute graph is the one its Go model code reserves (runner/ollamarunner/runner.go:"
                 "1069-1169, ml/backend/ggml/ggml.go:845-861), not llama.cpp's, and is not modelled"),
    "lcpp-007": "2023 allocator; model not named",
    "lcpp-024": "four GPUs with --fit (the split --fit chose and its tensor overrides are not modelled)",
    "lcpp-020": "four GPUs with --fit (the split --fit chose and its tensor overrides are not modelled)",
    "lcpp-021": "four GPUs with --fit (the split --fit chose and its tensor overrides are not modelled)",
}


def compute_rows(path: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    """Predicted vs logged compute buffers per device, with the estimate's stated error, and Ollama's graph
    estimate where Ollama logged one."""
    from calculator.runtimes.llamacpp.memory import ollama_graph_size

    rows, skipped = [], []
    for rec in json.loads(path.read_text())["llamacpp"]:
        rid = rec["id"]
        keys = [k for k in rec["logged"] if "compute" in k]
        if not keys:
            continue
        if rid in COMPUTE_SKIP or rid not in COMPUTE_INPUTS:
            skipped.append((rid, COMPUTE_SKIP.get(rid, "no input mapping for this record")))
            continue
        cfg, kwargs, wanted = COMPUTE_INPUTS[rid]
        config = json.loads((CONFIGS / cfg).read_text())
        try:
            meta = derive_meta(config, "Q4_K_M", source=cfg)
        except NotModelled:
            meta = meta_from_hf_config(config, source=cfg)
        p = plan(meta, **kwargs)
        got = {b.buft: b for b in p.buffers if b.kind == "compute" and b.bytes is not None}
        for key, buft in wanted.items():
            b = got.get(buft)
            logged = rec["logged"][key] / (MiB if key.endswith("_bytes") else 1)
            if b is None:
                skipped.append((rid, f"{key}: no {buft} compute buffer predicted"))
                continue
            pred, err = b.bytes / MiB, b.error_bytes / MiB
            rows.append({"id": rid, "figure": key, "kind": "compute_buffer", "predicted": round(pred, 2),
                         "logged": round(logged, 2), "err_pct": round((pred - logged) / logged * 100, 3),
                         "stated_error_mib": round(err, 2), "within": abs(pred - logged) <= err + 0.005,
                         "release": kwargs.get("release", RELEASE_0_3_36)})
    for rid, (cfg, kw, key) in OLLAMA_GRAPH_INPUTS.items():
        rec = next(r for r in json.loads(path.read_text())["llamacpp"] if r["id"] == rid)
        g = ollama_graph_size(meta_from_hf_config(json.loads((CONFIGS / cfg).read_text()), source=cfg), **kw)
        logged = rec["logged"][key]
        rows.append({"id": rid, "figure": key, "kind": "ollama_graph", "predicted": round(g["reserved_bytes"] / MiB, 2),
                     "logged": logged, "err_pct": round((g["reserved_bytes"] / MiB - logged) / logged * 100, 3),
                     "stated_error_mib": 0.05, "within": abs(g["reserved_bytes"] / MiB - logged) <= 0.05,
                     "release": "Ollama < 0.30 GraphSize (logged with one decimal)"})
    return rows, skipped


#: Several GPUs: the KV buffer of each device (llama_kv_cache_init "<dev> KV buffer size", or the "context" column of
#: llama_memory_breakdown_print) against memory.plan(n_gpus=...), which places each layer's cache on its layer's
#: device by llama-model.cpp:1556-1614. id -> (config, plan kwargs, {logged key: plan device index}, why comparable).
MULTI_GPU_INPUTS = {
    # Ollama 0.1.29-era ROCm runner (Mar 2024, before Ollama passed its own --tensor-split), 2 x RX 7900 XTX (equal
    # free memory assumed: llama.cpp's default split), 33/33 layers; the model is identified from the quote (32
    # layers, KV 2000 MiB for 16000 cells = 32 x 1024 values x 2 x 2 B: 8 KV heads x 128; 30.02 GiB at 5.52 BPW;
    # general.name "cognitivecomputations": dolphin-mixtral 8x7B). 2024 build: legacy padding, flash attention off.
    "lcpp-018": ("mistralai__Mixtral-8x7B-Instruct-v0.1.json",
                 dict(n_ctx=16000, flash_attn="off", release=RELEASE_LEGACY, n_gpus=2, device="ROCm"),
                 {"kv_buffer_rocm0_mib": 0, "kv_buffer_rocm1_mib": 1},
                 "2 identical GPUs, default split (no -ts, no --fit in 2024)"),
}
MULTI_GPU_SKIP = {
    "lcpp-015": "RTX 4070 Ti + RTX 3090 Ti: not identical, the default split follows each card's free memory (not "
                "logged); model not named and its config not offline. The logged KV per device (1536 / 3584 MiB = 12 "
                "and 28 layers x 128 MiB) is whole layers per device, as the rule places it",
    "lcpp-020": "--fit on (b7522): fit set -ts / moved tensors itself (common/fit.cpp, not modelled); only the sum of "
                "the per-device context column is comparable (table above: exact)",
    "lcpp-021": "--fit on (b7522), as lcpp-020; the sum is compared above (exact); the per-device columns 864 / 900 / "
                "864 / 756 MiB are 24 / 25 / 24 / 21 whole layers of 36 MiB, the equal split would give 24 / 24 / 24 "
                "/ 22",
    "lcpp-024": "--fit on (b7522), as lcpp-020; the sum is compared above",
}


def multi_gpu_rows(path: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    """Per-device KV buffers on several GPUs (memory.plan with n_gpus), and why the other multi-GPU records are not
    comparable per device."""
    recs = {r["id"]: r for r in json.loads(path.read_text())["llamacpp"]}
    rows, skipped = [], []
    for rid, (cfg, kwargs, wanted, why) in MULTI_GPU_INPUTS.items():
        p = plan(meta_from_hf_config(json.loads((CONFIGS / cfg).read_text()), source=cfg), **kwargs)
        for key, dev in wanted.items():
            pred = sum(c.buffers.get(f"{kwargs.get('device', 'CUDA')}{dev}", 0) for c in p.kv_caches) / MiB
            logged = recs[rid]["logged"][key]
            layers = sum(1 for d in p.layer_devices if d == dev)
            rows.append({"id": rid, "figure": key, "kind": "kv_per_device", "predicted": round(pred, 2),
                         "logged": logged, "err_pct": round((pred - logged) / logged * 100, 3), "layers": layers,
                         "note": why})
    for rid, why in MULTI_GPU_SKIP.items():
        skipped.append((rid, why))
    return rows, skipped


SPEC_CASES = Path("/work/shared/cases/spec_decode_benchmarks.json")
CATALOG_CONFIGS = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"

#: Qwen2.5-Coder-0.5B-Instruct's config.json (https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct/blob/main/config.json,
#: the shape shared by the Qwen2.5-0.5B family): not in the offline catalog, the Hub is unreachable here, so its
#: published values are written out. Only the draft of sd-bench-071..073 uses it.
QWEN25_CODER_05B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
    "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}

#: speed records: id -> inputs as the record states them. ``target``/``draft``: (config, GGUF file type); ``gpu``,
#: ``n_gpus``, ``split_mode``; ``n_ctx``; ``prompt``/``output`` tokens; ``k`` (--draft-max / n_draft);
#: ``rate``: llama.cpp's logged accept (n_accept / n_drafted) when the record gives it.
_PR10455 = dict(target=("Qwen__Qwen2.5-32B.json", "Q4_K_M"), draft=(QWEN25_CODER_05B, "Q4_K_M"), n_ctx=10240,
                prompt=2000, output=1000, k=16, rate=None)
SPEED_INPUTS = {
    # llama-cli, llama3.1:8b-instruct-q8_0 (Ollama's Q8_0 blob), -ngl 33 (all), RTX 3060 12GB: 14 prompt
    # tokens, 898 generated, "eval time ... 32.49 tokens per second"; llama-speculative -md llama3.2:1b-instruct-q8_0
    # -ngld 17 (16 layers + output: all of the draft), n_draft 5, accept 72.055 %
    "sd-bench-074": dict(target=("meta-llama__Llama-3.1-8B-Instruct.json", "Q8_0"),
                         draft=("meta-llama__Llama-3.2-1B-Instruct.json", "Q8_0"), gpu="RTX 3060", n_gpus=1,
                         split_mode="layer", n_ctx=4096, prompt=14, output=898, k=5, rate=0.72055),
    # llama-server -m Qwen2.5-Coder-32B-Instruct-Q4_K_M.gguf -md Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf -ngl 99
    # -ngld 99 -fa -c 10240 --draft-max 16 (Qwen2.5-32B's config: the Coder model has the same shapes); prompt and
    # output lengths not stated: a code file of a few thousand tokens, taken as 2000 in / 1000 out (stated
    # assumption); acceptance not stated
    "sd-bench-073": dict(_PR10455, gpu="RTX 3090", n_gpus=1, split_mode="layer"),
    "sd-bench-071": dict(_PR10455, gpu="Tesla P40", n_gpus=1, split_mode="layer"),
    # the same command on 3 x P40 with -sm row (equal shares: llama.cpp's default split by free memory)
    "sd-bench-072": dict(_PR10455, gpu="Tesla P40", n_gpus=3, split_mode="row"),
}

#: records not modelled, with the reason (read from the record)
SPEED_SKIP = {
    "sd-bench-076": "Qwen3.6-35B-A3B (qwen3_5_moe: gated delta-net + attention hybrid): its GGUF tensor types cannot "
                    "be derived from the config (quant_rules covers llama/qwen2/qwen3/qwen3_moe/gemma/mixtral) and the "
                    "Hub header is unreachable; the quant and the -ngl / --n-cpu-moe split are not stated either; MTP "
                    "drafting (a NextN layer) is not modelled",
    "sd-bench-077": "as sd-bench-076",
    "sd-bench-078": "Qwen3.6-27B (qwen3_5 hybrid): GGUF tensor types not derivable from the config, header "
                    "unreachable; MTP drafting not modelled. (The R9700 is in the GPU catalog now.)",
    "sd-bench-079": "as sd-bench-078",
    "sd-bench-081": "Qwen3.8-27B UD-Q4_K_XL: an Unsloth Dynamic quant (per-tensor types chosen by hand) of a model "
                    "with no config here; MTP drafting not modelled",
    "sd-bench-075": "GPU not stated; EAGLE-3 drafting not modelled for llama.cpp",
}


def _load_config(cfg):
    if isinstance(cfg, dict):
        return cfg
    return json.loads(((CONFIGS / cfg) if (CONFIGS / cfg).exists() else (CATALOG_CONFIGS / cfg)).read_text())


def speed_rows(path: Path = SPEC_CASES) -> tuple[list[dict], list[dict], list[tuple[str, str]]]:
    """Predicted vs measured baseline decode tok/s, and predicted vs measured speculative speedup, for the
    llama.cpp records of the speculative-decoding set. Returns (baseline rows, speculative rows, skipped)."""
    from calculator.engine.gpus import get_gpu
    from calculator.runtimes.llamacpp.speed import spec_speed, speed

    rows, srows, skipped = [], [], []
    seen_base = set()
    for rec in json.loads(path.read_text())["records"]:
        if rec.get("runtime") != "llama.cpp" or rec.get("metric") != "output_tok_s":
            continue
        rid = rec["id"]
        if rid not in SPEED_INPUTS:
            why = SPEED_SKIP.get(rid, "no input mapping")
            skipped.append((rid, f"not modelled: {rec['gpu']}; {rec.get('dtype_or_quant')}: {why}"))
            continue
        inp = SPEED_INPUTS[rid]
        cfg, ftype = inp["target"]
        meta = derive_meta(_load_config(cfg), ftype)
        gpu = get_gpu(inp["gpu"])
        p = plan(meta, n_ctx=inp["n_ctx"], flash_attn="on", device="CUDA")
        kw = dict(n_gpus=inp["n_gpus"], split_mode=inp["split_mode"])
        s = speed(meta, p, gpu, prompt_len=inp["prompt"], output_len=inp["output"], **kw)
        measured = rec["baseline_value"]
        label = s.gpu + ("" if inp["n_gpus"] == 1 else f" -sm {inp['split_mode']}")
        key = (label, ftype, measured)
        if key not in seen_base:
            seen_base.add(key)
            # the records are decode rates (tokens over the decode time, no prefill): 1000 / ITL, not the answer's
            # output tok/s (C x O / (TTFT + (O - 1) x ITL))
            decode = round(1000.0 / s.itl_ms, 2)
            rows.append({"id": rid, "gpu": label, "file": ftype, "predicted_tok_s": decode,
                         "measured_tok_s": measured,
                         "err_pct": round((decode - measured) / measured * 100, 1)})
        dcfg, dtype = inp["draft"]
        dmeta = derive_meta(_load_config(dcfg), dtype, source=dcfg if isinstance(dcfg, str) else
                            "Qwen2.5-Coder-0.5B-Instruct config.json (published values)")
        dp = plan(dmeta, n_ctx=inp["n_ctx"], flash_attn="on", device="CUDA")
        sp = spec_speed(meta, p, dmeta, dp, gpu, k=inp["k"], acceptance_rate=inp["rate"], prompt_len=inp["prompt"],
                        output_len=inp["output"], **kw)
        ms = rec["speedup"]
        srows.append({"id": rid, "gpu": label, "k": inp["k"], "acceptance_rate": inp["rate"],
                      "acceptance_length": sp.acceptance_length, "draft_pass_ms": sp.draft_pass_ms,
                      "verify_ms": sp.verify_ms, "baseline_ms": sp.baseline_itl_ms,
                      "predicted_speedup": sp.speedup, "measured_speedup": ms,
                      "break_even_rate": sp.break_even_rate,
                      "win_right": None if sp.speedup is None else (sp.speedup > 1) == (ms > 1),
                      "err_pct": None if sp.speedup is None else round((sp.speedup - ms) / ms * 100, 1)})
    return rows, srows, skipped


def speed_summary(rows: list[dict], srows: list[dict]) -> dict:
    """Median |error| of the baseline tok/s; win/lose calls right and median |error| of the speedups predicted."""
    import statistics

    base = [abs(r["err_pct"]) for r in rows]
    called = [r for r in srows if r["predicted_speedup"] is not None]
    return {"baseline_n": len(base), "baseline_median_abs_err_pct": statistics.median(base) if base else None,
            "spec_n": len(srows), "spec_called": len(called),
            "spec_win_lose_right": sum(1 for r in called if r["win_right"]),
            "spec_median_abs_err_pct": statistics.median(abs(r["err_pct"]) for r in called) if called else None}


def size_rows() -> list[dict]:
    """Hub-listed GGUF file sizes vs the derived tensor data, for the offline GGUF catalog."""
    from calculator.runtimes.llamacpp.gguf_repos import list_gguf_files
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    out = []
    catalog = json.loads((Path(__file__).resolve().parent.parent / "calculator" / "data" / "gguf_repos.json").read_text())
    for repo in catalog["repos"]:
        for f in list_gguf_files(repo, use_hub=False).files:
            if f.derived_bytes is None or f.listed_gb is None:
                continue
            out.append({"repo": repo, "file": f.name, "listed_gb": f.listed_gb,
                        "derived_gb": round(f.derived_bytes / 1e9, 3),
                        "diff_pct": round((f.listed_gb - f.derived_bytes / 1e9) / f.listed_gb * 100, 2)})
    return out


def summary(rows: list[dict]) -> dict:
    out = {}
    for kind, (tol, share) in TARGETS.items():
        sel = [r for r in rows if r["kind"] == kind and r["err_pct"] is not None]
        ok = sum(1 for r in sel if abs(r["err_pct"]) <= tol)
        out[kind] = {"n": len(sel), "within": ok, "tolerance_pct": tol, "target_share": share,
                     "met": bool(sel) and ok / len(sel) >= share}
    return out


def compute_summary(rows: list[dict]) -> dict:
    out = {}
    for kind in ("compute_buffer", "ollama_graph"):
        sel = [r for r in rows if r["kind"] == kind]
        out[kind] = {"n": len(sel), "within": sum(1 for r in sel if r["within"]),
                     "max_abs_err_pct": max((abs(r["err_pct"]) for r in sel), default=None)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows, skipped = run(args.cases)
    summ = summary(rows)
    crows, cskipped = compute_rows(args.cases)
    brows, sprows, sskipped = speed_rows()
    ssum = speed_summary(brows, sprows)
    zrows = size_rows()
    mrows, mskipped = multi_gpu_rows(args.cases)
    if args.json:
        print(json.dumps({"rows": rows, "skipped": skipped, "summary": summ, "multi_gpu": mrows,
                          "multi_gpu_skipped": mskipped, "compute": crows,
                          "compute_skipped": cskipped, "compute_summary": compute_summary(crows), "speed": brows,
                          "spec": sprows, "speed_skipped": sskipped, "speed_summary": ssum, "sizes": zrows},
                         indent=2))
        return 0
    print(f"{'id':10} {'figure':32} {'predicted':>12} {'logged':>12} {'err %':>8}")
    for r in rows:
        print(f"{r['id']:10} {r['figure']:32} {r['predicted']:>12} {r['logged']:>12} {r['err_pct']:>8}")
    print("\nskipped:")
    for rid, why in skipped:
        print(f"  {rid}: {why}")
    print("\nsummary:")
    for kind, s in summ.items():
        print(f"  {kind}: {s['within']}/{s['n']} within {s['tolerance_pct']}% "
              f"(target {s['target_share']:.0%}) -> {'met' if s['met'] else 'NOT met / no data'}")
    print("\nseveral GPUs: KV buffer per device (layers placed by llama-model.cpp:1556-1614; the CPU oracle has one "
          "device, so this split is checked only here):")
    print(f"{'id':10} {'figure':24} {'layers':>6} {'predicted':>10} {'logged':>10} {'err %':>8}  inputs")
    for r in mrows:
        print(f"{r['id']:10} {r['figure']:24} {r['layers']:>6} {r['predicted']:>10} {r['logged']:>10} "
              f"{r['err_pct']:>8}  {r['note']}")
    for rid, why in mskipped:
        print(f"  not comparable per device {rid}: {why}")
    print("\ncompute buffers (estimated from the reserved graph's largest live tensors; stated error per row):")
    print(f"{'id':10} {'figure':36} {'predicted':>10} {'logged':>10} {'err %':>8} {'+- MiB':>7}  within")
    for r in crows:
        print(f"{r['id']:10} {r['figure']:36} {r['predicted']:>10} {r['logged']:>10} {r['err_pct']:>8} "
              f"{r['stated_error_mib']:>7}  {'yes' if r['within'] else 'NO'}")
    for rid, why in cskipped:
        print(f"  skipped {rid}: {why}")
    for kind, cs in compute_summary(crows).items():
        print(f"  {kind}: {cs['within']}/{cs['n']} within the stated error, |err| max {cs['max_abs_err_pct']}%")

    print("\nspeed (baseline decode; efficiency: the backend's row of perf.EFFICIENCY, assumed for CUDA, fitted for Metal):")
    print(f"{'id':14} {'gpu':34} {'file':8} {'predicted':>10} {'measured':>10} {'err %':>7}")
    for r in brows:
        print(f"{r['id']:14} {r['gpu']:34} {r['file']:8} {r['predicted_tok_s']:>10} {r['measured_tok_s']:>10} "
              f"{r['err_pct']:>7}")
    print("\nspeculative decoding with a draft model (speedup over the same setup without it):")
    print(f"{'id':14} {'gpu':34} {'k':>3} {'rate':>7} {'AL':>6} {'draft ms':>9} {'verify ms':>10} {'base ms':>8} "
          f"{'pred x':>7} {'meas x':>7} {'err %':>7} {'break-even rate':>16}")
    for r in sprows:
        print(f"{r['id']:14} {r['gpu']:34} {r['k']:>3} {str(r['acceptance_rate']):>7} {str(r['acceptance_length']):>6} "
              f"{r['draft_pass_ms']:>9} {r['verify_ms']:>10} {r['baseline_ms']:>8} {str(r['predicted_speedup']):>7} "
              f"{r['measured_speedup']:>7} {str(r['err_pct']):>7} {str(r['break_even_rate']):>16}")
    for rid, why in sskipped:
        print(f"  skipped {rid}: {why}")
    print(f"  summary: baseline {ssum['baseline_n']} records, median |error| {ssum['baseline_median_abs_err_pct']} %; "
          f"speculative {ssum['spec_n']} records, speedup predicted for {ssum['spec_called']} (the others state no "
          f"acceptance: break-even rate only), win/lose right {ssum['spec_win_lose_right']}/{ssum['spec_called']}, "
          f"median |error| {ssum['spec_median_abs_err_pct']} %")
    print("\nGGUF sizes: Hub listing vs tensor data derived from llama.cpp's quantization rules:")
    for r in zrows:
        print(f"  {r['file']:48} listed {r['listed_gb']:>6} GB  derived {r['derived_gb']:>7} GB  ({r['diff_pct']:+.2f}%)")
    if zrows:
        print(f"  {len(zrows)} files, |diff| max {max(abs(r['diff_pct']) for r in zrows):.2f}% (the header's few MB "
              "and the page's rounding)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
