"""Shared helpers of the speed benchmark scripts: configs, GPU names, runtimes of the public records."""
from __future__ import annotations

import json
import re
from pathlib import Path

CONFIGS = Path(__file__).resolve().parents[1].parent.parent / "shared" / "data" / "model_configs"
if not CONFIGS.exists():
    CONFIGS = Path("/work/shared/data/model_configs")
RUNTIMES = {"vLLM": "vllm", "SGLang": "sglang", "llama.cpp": "llama.cpp", "TensorRT-LLM": "tensorrt-llm"}
# record spellings the GPU catalog does not list (the catalog is the lead's; reported, not edited)
GPU_SPELLINGS = {"nvidia h100 sxm": "H100", "nvidia h100 80gb sxm": "H100", "nvidia h100 80gb": "H100",
                 "nvidia a100 sxm 80gb": "A100-80GB", "nvidia geforce rtx 4090 24gb": "RTX4090",
                 "nvidia h100 nvl 94gb": "H100-NVL", "nvidia a100": "A100-80GB", "nvidia h100": "H100"}
# heads whose config.json is not shipped, mapped to a shipped head of identical shapes (the cost model
# reads only shapes): EAGLE for Llama-3.1-8B has the layout of the Llama-3-8B one (1 layer, h 4096, vocab 128256)
# DeepSeek-R1-0528 is a post-training update of DeepSeek-R1 on the same network (DeepseekV3ForCausalLM: 61 layers, hidden
# 7168, 128 MLA heads with kv_lora_rank 512 / qk_rope_head_dim 64, 256 routed experts, FP8 block-quantized checkpoint):
# SGLang's cookbook lists it in the DeepSeek-R1 family with one launch for both (sgl-project/sgl-cookbook
# data/models/src/v0.5.6/deepseek-r1.yaml), and kernels written against its config.json use R1's MLA shapes
# (kv_lora_rank 512, qk_rope_head_dim 64, 256 experts)
CONFIG_TWINS = {"yuhuili/EAGLE-LLaMA3.1-Instruct-8B": "yuhuili/EAGLE-LLaMA3-Instruct-8B",
                "deepseek-ai/DeepSeek-R1-0528": "deepseek-ai/DeepSeek-R1"}


def config_for(model_id: str | None) -> dict | None:
    """The shared config.json of ``model_id`` (text after a space or '(' is dropped), else the offline
    catalog's, or None."""
    if not model_id:
        return None
    mid = re.split(r"[ (]", model_id.strip())[0]
    mid = CONFIG_TWINS.get(mid, mid)
    f = CONFIGS / (mid.replace("/", "__") + ".json")
    if f.exists():
        return json.loads(f.read_text())
    # the product's offline catalog, as the team's scorer reaches it through `estimate --model`
    from calculator.metadata.catalog import CATALOG_DIR, _find

    hit = _find(mid)
    return json.loads((CATALOG_DIR / hit[0]).read_text()) if hit else None


def gpu_for(name: str | None) -> str | None:
    """A catalog name for the record's GPU text, or None when not stated / unknown."""
    from calculator.engine.gpus import get_gpu
    from calculator.engine.errors import EngineInputError

    if not name or "not stated" in name.lower():
        return None
    g = re.sub(r"\s*\(.*?\)", "", name).strip()
    g = GPU_SPELLINGS.get(g.lower(), g)
    try:
        return get_gpu(g).name
    except EngineInputError:
        return None


def range_ratio(r: dict) -> float | None:
    """The run's length spread as vllm bench serve's ``--random-range-ratio`` (lengths in ``[L(1-r), L(1+r)]``), read
    from what the record says of its client, or None where it does not say (perf.wave_share then blends).

    - InferenceX's harness passes ``--random-range-ratio 0.8`` to its fork of vLLM's old benchmark_serving.py, whose
      lengths are drawn from ``[0.8 L, L]`` (InferenceX README, "Benchmark Client Configuration"): a spread, +-0.1 of
      0.9 L in vllm bench serve's form.
    - SGLang's bench_serving draws random lengths from ``[max(1, L x r), L]`` with ``r`` = 0.0 by default
      (python/sglang/bench_serving.py ``--random-range-ratio``): spread unless the quote passes 1.
    - vllm bench serve / benchmark_serving.py default to 0.0 (vllm 0.32 benchmarks/datasets/datasets.py:570): fixed
      lengths unless the quote passes another ratio."""
    q = (r.get("quote") or "") + " " + (r.get("notes") or "")
    ds = (r.get("dataset") or "").lower()
    if "inferencex" in ds:
        return 0.1
    if not ds.startswith("random"):
        return None
    if r.get("runtime") == "SGLang":
        return 0.0 if "--random-range-ratio 1" in q else 0.5
    return 0.0 if "range-ratio" not in q and "range_ratio" not in q else None


def estimate(inp, runtime: str, **kw):
    """``perf.estimate_speed`` as the product's runtime path runs it: for SGLang with the per-layer kernel count its
    ``_speed_plan`` adds (calculator/runtimes/sglang/kernels.py, at the attention backend SGLang's default
    release picks for this GPU and model), with eager prefill passes as the releases of the public records ran them
    (before 0.5.10; from 0.5.10 SGLang replays piecewise prefill graphs, which the product's default release, see
    calculator/runtimes/sglang/releases.DEFAULT, prices per perf.SGLANG_PREFILL_GRAPH_KERNEL_US)."""
    from calculator.engine import perf
    from calculator.engine.gpus import get_gpu

    if runtime != "sglang":
        return perf.estimate_speed(inp, runtime=runtime, **kw)
    from calculator.runtimes.sglang.compat import default_backend
    from calculator.runtimes.sglang.kernels import with_kernel_count
    from calculator.runtimes.sglang.releases import DEFAULT

    gpu, tp = get_gpu(inp.gpu), inp.tensor_parallel_size
    plan = with_kernel_count(perf.plan_from_engine(inp), config=inp.hf_config, gpu=gpu, tp=tp,
                             backend=default_backend(DEFAULT, gpu, inp.hf_config, tp_size=tp).backend,
                             quant_config=inp.hf_config.get("quantization_config"))
    return perf.estimate_speed_plan(plan, runtime=runtime, **kw)
