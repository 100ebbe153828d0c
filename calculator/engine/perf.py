"""Speed predictions: a roofline model of vLLM's (and SGLang's, TensorRT-LLM's, llama.cpp's) prefill
and decode steps on one GPU, and what speculative decoding buys or costs. No Django.

Units: times in ms (internally seconds), bytes in B, bandwidth in GB/s (10^9 B/s), FLOP/s in TFLOP/s
(10^12). Everything is per GPU of a tensor-parallel group; pipeline stages run in series. The inputs come
through one adapter, :func:`plan_from_engine` (EngineInput + EstimateResult -> :class:`Plan`).

The model (each term carries its source in ``SpeedResult.sources``):

* **Decode step** (one token for each of ``B`` running requests, or ``k+1`` tokens each when verifying
  drafts)::

      bytes   = dense weights/tp + routed experts/tp × E_touched/E + B × KV bytes read at context c
      flops   = 2 × matmul params/tp × T + Σ_attention layers 2 × heads/tp × (d_qk + d_v) × ctx × T
      mem     = bytes / (bandwidth × eff_bw);  comp = flops / (peak × eff_compute)
      t_step  = (mem^p + comp^p)^(1/p) + all-reduce + overhead + layers × layer_us

  ``T`` tokens in the step; ``p = overlap_p`` (0 means the ideal ``max``; vLLM's fit is ``p = 1``: at
  decode batch sizes the GEMMs do not hide their compute behind the weight stream). ``E_touched = E ×
  (1 − (1 − topk/E)^T)``: each token routes to ``topk`` distinct experts of ``E`` (uniform routing), so
  one token touches exactly ``topk`` and a large batch (or a ``B × (k+1)``-token verification) nearly
  all. KV read per request: full attention and MLA the whole context, sliding windows ``min(c, W)``,
  chunked local attention ``min(c, chunk)``, Mamba/linear-attention layers their state (read + write).
* **Prefill** (TTFT): the prompt in chunks of ``max_num_batched_tokens`` (vLLM's chunked prefill), each
  chunk the same memory/compute combination with ``flops = 2 × matmul params × chunk + attention over the
  causal prefix``; plus the API server's fixed ``ttft_fixed_ms``.
* **Tensor parallel**: 2 all-reduces per layer (after attention and after the MLP, vLLM's
  ``RowParallelLinear``), ring cost ``2(tp−1)/tp × T × hidden × 2 B / link + latency`` each.
* **Concurrency** (a closed loop of ``C`` requests as ``vllm bench serve --max-concurrency C``): each
  request sees about ``C−1`` other prefills during its decode; a prefill rides in decode steps (chunked
  prefill) and stalls the decodes only by what the mixed steps cost beyond plain ones (its compute and KV
  traffic combined with the step's, its all-reduces), so ``TPOT = t_step(C, c̄) + (C−1) × stall / (O − 1)``
  with ``c̄ = P + O/2``.
  TTFT blends the steady state ``t_prefill × (1 + ρ/2)`` (``ρ`` the chance another prefill is running)
  with a wave (``C`` prompts arriving together, each waiting for the scheduler step that finishes it:
  :func:`wave_ttft_ms`) by the wave share (:func:`wave_share`: 1 for fixed lengths, whose requests finish and
  return together, else the fitted blend); a burst (``--request-rate inf`` without a cap) is all wave.
  ``output tok/s = C × O / (TTFT + (O−1) × TPOT)``. Concurrency is capped by ``max_num_seqs``, by the
  KV cache (``kv_cache_tokens / (P + O)``) and, for vLLM, by the prefill token budget: running requests are
  scheduled first and waiting prompts get what is left of ``max_num_batched_tokens`` ``B``, so a full budget
  keeps ``B × (O−1) / (P+O−1)`` requests decoding (``pp × B`` with pipeline parallelism, one budget per micro-batch
  in flight; :func:`prefill_budget_cap`); the rest queue and their mean
  wait (Little's law) is in TTFT.
* **Speculative decoding** (:func:`spec_step`): per step ``k`` drafter passes (each its roofline time +
  a fixed per-pass cost) or CPU matching (ngram, suffix), one target pass over ``B × (k+1)`` tokens, the
  rejection sampler's extra traffic, and the runtime's fixed and per-request host cost per speculative
  step. ``AL`` tokens come out per step (incl. the bonus token; :mod:`calculator.engine.acceptance`
  models it by method, k, position, workload, temperature). ``TPOT_spec = t_spec_step / AL`` (+ the same
  prefill stalls); speedup ``= TPOT_base / TPOT_spec`` with a low/high range; the break-even acceptance
  solves ``AL(α, k) = t_spec_step / t_step`` and is above 0 for every method (each has a cost).

Efficiency rows (:data:`EFFICIENCY`) say whether they are ``assumed``, ``fitted`` (once per runtime on
the public data they name, never per case) or ``calibrated`` by a validation run
(:func:`efficiency_from_measurement`, :func:`apply_measured_efficiency`).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from .arch import STATE_KINDS, LayerKind, ModelArch, parse_config
from .dtypes import dtype_bytes
from .errors import EngineInputError
from .figures import round_sig
from .gpus import GPU, get_gpu
from .memory import estimate, resolve_dtype
from .schemas import EngineInput, EstimateResult
from .acceptance import Acceptance, known_draft_head, normalize_workload, predict_acceptance
from .weights import QuantScheme, mtp_layer_bytes_per_weight, resolve_quant, round_up, weights_per_gpu
from .layers import indexer_bytes_per_token

TYPICAL_FILE = Path(__file__).resolve().parent.parent / "data" / "spec_decode_typical.json"
# SGLang's triton decode kernel splits the KV into triton_attention_num_kv_splits = 8 parts (server_args.py:558 in
# sglang 0.5.7; the heuristic keeps the maximum at batch 1, triton_backend.py get_num_kv_splits) and walks each in
# BLOCK_N = 32-token tiles (triton_ops/decode_attention.py _fwd_kernel_stage1)
TRITON_KV_SPLITS = 8
TRITON_BLOCK_N = 32


def triton_decode_iterations(context: int) -> int:
    """Sequential tiles one split of the triton decode kernel walks at ``context`` tokens:
    ``ceil(ceil(context / TRITON_KV_SPLITS) / TRITON_BLOCK_N)``."""
    return math.ceil(math.ceil(max(0, context) / TRITON_KV_SPLITS) / TRITON_BLOCK_N)


ACT_BYTES = 2  # bf16/fp16 activations on the wire (all-reduce) — vLLM keeps activations in the model dtype


# --------------------------------------------------------------------------------------------------------
# The one adapter from the memory engine's types: everything below reads a Plan, never EngineInput or
# EstimateResult, so a typed plan can replace them by changing this function alone.
# --------------------------------------------------------------------------------------------------------
@dataclass
class Plan:
    """What the speed model needs of a configuration.

    ``hf_config``/``draft_hf_config``: config.json dicts; ``resolved``: the memory engine's resolved
    engine arguments (``dtype``, ``kv_cache_dtype``, ``max_num_seqs``, ``max_num_batched_tokens``);
    ``kv_by_layer_type``: its KV bytes per token by layer type (``LayerKV`` rows, ``draft`` flagged);
    ``spec_method``/``spec_k``: ``--speculative-config`` method and ``num_speculative_tokens``.
    """

    model: str
    hf_config: dict
    draft_hf_config: dict | None
    gpu: str
    dtype: str
    quant_config: dict | None
    quantization: str | None
    tp: int
    pp: int
    enforce_eager: bool
    spec_method: str | None
    spec_k: int
    resolved: dict
    kv_by_layer_type: list
    fits: bool
    max_model_len: int
    kv_cache_tokens: int
    max_concurrency: float
    draft_note: str | None = None
    spec_head: str | None = None  # the draft head the user named (speculative_config.model); None: the catalogued one
    dp: int = 1  # data-parallel replicas, each with its own scheduler and KV cache (the clients spread over them)
    dp_lockstep: bool = False  # the replicas step through the MoE layers together (vLLM DP with MoE, DP attention)
    # the runtime's count of the kernels a decoder layer launches per decode step (SGLang:
    # calculator/runtimes/sglang/kernels.py), priced at the row's kernel_us; None: the row's layer_us per layer
    layer_kernels: float | None = None
    triton_layers: int = 0  # layers whose decode attention walks the triton split-KV loop (SGLang triton backend)
    kernels_note: str | None = None
    fit_condition: str | None = None  # EstimateResult.fit_condition: it fits only at the low end of an overhead
    # SGLang's CUDA graphs: prefill passes of up to prefill_graph_max_tokens tokens replay piecewise graphs, launching
    # only graph_split_ops_per_layer ops per layer eagerly (0: every prefill pass is eager); decode batches above
    # decode_graph_max_bs requests run eagerly (--cuda-graph-max-bs; None: always graphed)
    prefill_graph_max_tokens: int = 0
    graph_split_ops_per_layer: float = 0.0
    decode_graph_max_bs: int | None = None
    # what a calibration from a validation run must match to apply (CalibrationScope): the runtime release the
    # configuration is for, and the attention backend asked for (None: the release's default)
    release: str | None = None
    attention_backend: str | None = None
    gpus_per_node: int = 8  # a tensor-parallel group over more GPUs spans nodes (cross_node_link)


def plan_from_engine(inp: EngineInput, est: EstimateResult | None = None) -> Plan:
    """The :class:`Plan` of an engine input and its memory estimate (computed when ``None``).

    EAGLE / EAGLE-3 without a head config: the public head catalogued for the target
    (:func:`~calculator.engine.acceptance.known_draft_head`) is costed as one target-shaped layer
    (:func:`synthetic_eagle_head`, the memory estimate is redone with it) and ``draft_note`` says so.

    Raises:
        EngineInputError: on ``speculative_config`` when no head is given and none is catalogued.
    """
    spec = inp.speculative_config
    draft_note = None
    if spec is not None and spec.method in ("eagle", "eagle3") and not inp.draft_hf_config:
        head = known_draft_head(inp.model_label, spec.method)
        if head is None:
            raise EngineInputError("speculative_config", f"method {spec.method} needs \"model\": no public "
                                   f"{spec.method} head is catalogued for {inp.model_label}")
        inp = inp.model_copy(update={"draft_hf_config": synthetic_eagle_head(inp.hf_config, spec.method)})
        est = None
        draft_note = (f"no head given: the public head for this target is {head[0]} ({head[1]}); it is costed as "
                      "one decoder layer of the target's shape (synthetic_eagle_head), its own config not read")
    est = est or estimate(inp)
    return Plan(draft_note=draft_note, spec_head=(spec.model if spec is not None else None), model=est.model, hf_config=inp.hf_config, draft_hf_config=inp.draft_hf_config, gpu=inp.gpu,
                dtype=inp.dtype, quant_config=inp.quant_config, quantization=inp.quantization,
                tp=inp.tensor_parallel_size, pp=inp.pipeline_parallel_size, enforce_eager=inp.enforce_eager,
                spec_method=spec.method if spec else None, spec_k=spec.num_speculative_tokens if spec else 0,
                resolved=dict(est.resolved), kv_by_layer_type=list(est.kv_by_layer_type), fits=est.fits,
                fit_condition=est.fit_condition,
                max_model_len=est.max_model_len, kv_cache_tokens=est.kv_cache_tokens,
                max_concurrency=est.max_concurrency, dp=inp.data_parallel_size,
                release=inp.vllm_version, attention_backend=inp.attention_backend, gpus_per_node=inp.gpus_per_node,
                # vLLM's DP ranks of an MoE model run the expert layers together (dummy batches keep idle ranks in step)
                dp_lockstep=inp.data_parallel_size > 1 and bool(parse_config(inp.hf_config).num_experts))

# --------------------------------------------------------------------------------------------------------
# GPU-to-GPU links for tensor parallelism (unidirectional GB/s per GPU). A table here rather than in
# gpus.json so the catalog stays the lead's; the lookup falls back by vendor and architecture.
# --------------------------------------------------------------------------------------------------------
INTERCONNECT_GBPS: dict[str, tuple[float, str]] = {
    "NVIDIA H100 80GB HBM3": (450, "NVLink 4: 900 GB/s bidirectional per GPU (NVIDIA H100 datasheet, SXM5)"),
    "NVIDIA H200": (450, "NVLink 4: 900 GB/s bidirectional per GPU (NVIDIA H200 datasheet)"),
    "NVIDIA H100 NVL": (300, "NVLink bridge: 600 GB/s bidirectional (NVIDIA H100 NVL datasheet)"),
    "NVIDIA H100 PCIe": (50, "PCIe Gen5 x16: 64 GB/s per direction, ~50 effective (assumed)"),
    "NVIDIA B200": (900, "NVLink 5: 1.8 TB/s bidirectional per GPU (NVIDIA HGX B200 datasheet)"),
    "NVIDIA GB200": (900, "NVLink 5: 1.8 TB/s bidirectional per GPU (NVIDIA GB200 NVL72 datasheet)"),
    "NVIDIA A100-SXM4-80GB": (300, "NVLink 3: 600 GB/s bidirectional per GPU (NVIDIA A100 datasheet)"),
    "NVIDIA A100-SXM4-40GB": (300, "NVLink 3: 600 GB/s bidirectional per GPU (NVIDIA A100 datasheet)"),
    "Tesla V100-SXM2-32GB": (150, "NVLink 2: 300 GB/s bidirectional per GPU (NVIDIA V100 datasheet)"),
    "Tesla T4": (12, "PCIe Gen3 x16: 16 GB/s per direction, ~12 effective (assumed)"),
    "NVIDIA GeForce RTX 5090": (50, "PCIe Gen5 x16, ~50 GB/s effective (assumed)"),
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": (50, "PCIe Gen5 x16, ~50 GB/s effective (assumed)"),
    "AMD Instinct MI300X": (448, "Infinity Fabric: 896 GB/s aggregate peer bandwidth per GPU (AMD MI300X datasheet)"),
    "AMD Instinct MI325X": (448, "Infinity Fabric: 896 GB/s aggregate peer bandwidth per GPU (AMD MI325X datasheet)"),
    "AMD Instinct MI355X": (538, "Infinity Fabric: 1075 GB/s aggregate peer bandwidth per GPU (AMD MI355X datasheet)"),
    "CPU": (50, "shared memory between NUMA nodes, order of magnitude (assumed)"),
}
PCIE_GEN4 = (25.0, "PCIe Gen4 x16: 32 GB/s per direction, ~25 effective (assumed)")


def interconnect(gpu: GPU) -> tuple[float, str]:
    """``(GB/s per direction, source)`` of the link tensor-parallel all-reduces run over."""
    return INTERCONNECT_GBPS.get(gpu.name, PCIE_GEN4)


# A tensor-parallel group larger than one machine all-reduces over the network between nodes: vLLM's custom all-reduce
# is off for a group that spans nodes without multi-node NVLink (vllm 0.32 distributed/device_communicators/
# custom_all_reduce.py:204-205 same_node, :234-239 "Custom collectives are disabled because this multi-node group does
# not have MNNVL-capable GPUs on every rank"), so NCCL runs it, and a ring's slowest hop is a node's network port.
# Per GPU, assumed from the reference nodes' datasheets: DGX H100 / DGX B200 and MI300X platforms carry one 400 Gb/s
# port per GPU (ConnectX-7 NDR), DGX A100 one 200 Gb/s port per GPU (ConnectX-6 HDR); latency of a small NCCL
# all-reduce across two nodes over InfiniBand, assumed (order of magnitude of nccl-tests, not measured here).
CROSS_NODE_GBPS_400G = (50.0, "InfiniBand NDR 400 Gb/s per GPU (DGX H100 / DGX B200 datasheets: 8x ConnectX-7 "
                              "400 Gb/s), ~50 GB/s per direction (assumed: the node's ports, not measured)")
CROSS_NODE_GBPS_200G = (25.0, "InfiniBand HDR 200 Gb/s per GPU (DGX A100 datasheet: 8x ConnectX-6 200 Gb/s), "
                              "~25 GB/s per direction (assumed: the node's ports, not measured)")
CROSS_NODE_ALLREDUCE_US = 30.0
MNNVL_GPUS = ("NVIDIA GB200",)  # NVLink spans the rack (NVL72): no network hop between its nodes


def spans_nodes(plan: "Plan", gpu: GPU) -> bool:
    """Whether the plan's tensor-parallel group is larger than one node (``plan.gpus_per_node``) and its nodes have
    no NVLink between them (:data:`MNNVL_GPUS`), so its all-reduces cross the network."""
    return plan.tp > plan.gpus_per_node and gpu.name not in MNNVL_GPUS and not gpu.is_cpu


def cross_node_link(gpu: GPU) -> tuple[float, str]:
    """``(GB/s per direction, source)`` of the network hop a tensor-parallel group spanning nodes all-reduces over
    (see the comment above): 400 Gb/s per GPU on Hopper, Blackwell and AMD Instinct nodes, 200 Gb/s on older ones."""
    new = gpu.vendor == "amd" or (gpu.capability_tuple is not None and gpu.capability_tuple >= (9, 0))
    return CROSS_NODE_GBPS_400G if new else CROSS_NODE_GBPS_200G


# --------------------------------------------------------------------------------------------------------
# Efficiency factors (fraction of the datasheet figure a runtime reaches) per runtime and GPU.
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Efficiency:
    """How close a runtime gets to the datasheet on one GPU.

    ``mem_bw``: share of the memory bandwidth a decode step reaches; ``compute``: share of the dense
    TFLOP/s (MFU) in large GEMMs; ``step_overhead_ms``: fixed cost per engine step (scheduler, sampler,
    launch; CUDA graphs keep it small); ``allreduce_latency_us``: latency of one small all-reduce;
    ``draft_step_overhead_ms``: fixed cost of one drafter forward pass beyond its roofline time (graph
    launch, argmax sampling, position/slot updates: the loop of ``vllm/v1/spec_decode/eagle.py``
    ``propose``, SGLang's ``eagle_worker.py`` ``draft_forward``); ``spec_step_overhead_ms``: fixed cost a
    speculative step adds to a plain one (drafter input preparation, rejection-sampler launch, the
    accepted-count sync: ``vllm/v1/worker/gpu_model_runner.py`` ``propose_draft_token_ids``,
    ``vllm/v1/sample/rejection_sampler.py``); ``spec_cpu_ms_per_request``: host time per running request
    per speculative step that the speculative path does not hide behind the GPU while a plain step does
    (SGLang turns its overlap scheduler off when speculating, ``server_args.py``
    ``disable_overlap_schedule = True``; vLLM prepares the drafter's inputs between the target pass and
    the draft passes); ``layer_us``: fixed time per layer per forward pass that no roofline term covers
    (the small kernels of a layer: norms, rotary, activation, routing, each a few µs even under CUDA
    graphs); ``overlap_p``: how memory and compute time combine, ``(mem^p + comp^p)^(1/p)`` (0: the ideal
    roofline ``max``; 1: no overlap at all); ``wave_share``: the share of a closed loop's requests that
    arrive in a wave with the others (fixed-length requests finish and return together) rather than
    spread out; ``ttft_fixed_ms``: the API server's part of TTFT (tokenization, scheduling, the first
    streamed chunk); ``moe_compute``: share of the dense TFLOP/s the routed-expert GEMMs reach (vLLM's
    ``fused_moe`` kernels group a few tokens per expert; ``None``: same as ``compute``); ``kernel_us``: when set,
    a layer's fixed time is ``kernels x kernel_us`` with the kernels the runtime counts for the model
    (:attr:`Plan.layer_kernels`) instead of ``layer_us``; ``triton_iter_us``: the latency of one tile of the
    triton decode kernel's split-KV loop, per layer that runs it (:attr:`Plan.triton_layers`);
    ``prefill_launch_us``: host time per counted kernel of a pass run eagerly (no CUDA graph: SGLang's prefill before
    0.5.10, the split ops of a piecewise-graphed one, decode batches above --cuda-graph-max-bs), which the pass takes
    when it exceeds the GPU time; ``prefill_graph_kernel_us``: the same floor per kernel a piecewise CUDA graph replays
    (SGLang 0.5.10's prefill); ``prefill_launch_dense_us`` / ``prefill_graph_kernel_dense_us``: both for a model
    without experts (``None``: as an MoE model); ``mixed_prefill``: prompts ride in the decode steps (vLLM's
    chunked prefill) rather than in passes of their own that pause decoding (SGLang without
    ``--enable-mixed-chunk``); ``label``: ``assumed`` (a typical figure), ``fitted``
    (fitted per runtime on the public data named in ``source``) or ``calibrated`` (a validation run).
    """

    mem_bw: float
    compute: float
    step_overhead_ms: float
    allreduce_latency_us: float
    source: str
    draft_step_overhead_ms: float = 0.3
    spec_step_overhead_ms: float = 0.5
    spec_cpu_ms_per_request: float = 0.0
    layer_us: float = 0.0
    overlap_p: float = 0.0
    wave_share: float = 1.0
    ttft_fixed_ms: float = 0.0
    moe_compute: float | None = None
    kernel_us: float | None = None
    triton_iter_us: float = 0.0
    prefill_launch_us: float = 0.0
    prefill_graph_kernel_us: float = 0.0
    prefill_launch_dense_us: float | None = None
    prefill_graph_kernel_dense_us: float | None = None
    mixed_prefill: bool = True
    label: str = "assumed"


_ASSUMED = ("assumed (typical of vLLM with CUDA graphs on datacenter GPUs: ~70-80% of HBM bandwidth in "
            "decode, ~50-60% MFU in prefill); refine with a validation run")
_VLLM_FIT = (
    "fitted once for vLLM on GPUs (grid search over mem_bw, compute, moe_compute, layer_us, overlap_p, "
    "wave_share, ttft_fixed_ms; one set for every GPU, never per case) on the 17 complete vLLM records of "
    "../shared/cases/serving_speed_benchmarks.json with a shipped config and a catalog GPU (gpt-oss-120b on "
    "H100 TP2-8, Mistral-7B on RTX 4090, Qwen3-32B on H100/A100, Qwen3-30B-A3B and Llama-3.1-8B): median "
    "|error| TPOT 5 %, output tok/s 6 %, TTFT below saturation 10 % (benchmarks/speed_cases.py); wave_share "
    "refit to 0.2 (from 0.3) on them when the wave came to be priced per scheduler step (wave_ttft_ms), which keeps "
    "the TTFT median over every shared record at 18 %, and used only where a run's lengths spread or are not given "
    "(wave_share). The "
    "three speculative terms (0.5 ms per drafter pass, 1.0 ms per step, 0.1 ms per running request) fitted "
    "once (grid search) on vLLM's public speculative records: the EAGLE-3 paper's vLLM table "
    "(https://arxiv.org/abs/2503.01840 Table 5, EAGLE / EAGLE-3 on Llama-3.1-8B, batch 2-56; the source "
    "names both an A100 and an RTX 3090, both readings used) and the batch-1 runs of vllm-project/vllm PRs "
    "29334 and 24343 (sd-bench-025..027): 15/15 win/lose calls, median |error| 6 %; refine with a "
    "validation run")
_SGLANG_FIT = (
    "per-layer time priced per kernel: the kernels calculator/runtimes/sglang/kernels.py counts for the model (from "
    "SGLang 0.5.7's model code and default attention backend / MoE runner / all-reduce fusion) x kernel_us 4.7 (9.0 "
    "before Hopper), + 5.8 us per triton split-KV tile per layer on the triton backend; prompts run as prefill passes "
    "of their own (no mixed chunk by default) launched eagerly, 90 us per counted kernel when that exceeds the GPU "
    "time (28 us for a model without experts, from its three public runs; from 0.5.10 a piecewise-graphed pass keeps "
    "50 us per graphed kernel of an MoE model, none of a dense one, from SGLang PRs 13094 and 13466: "
    "perf.SGLANG_PREFILL_GRAPH_KERNEL_US). These four fitted once on the concurrency-1 runs of benchmarks/data/sglang_speed_public.json (public SGLang "
    "cookbook pages, 5 models on B200, Llama-3.1-70B on A100) and the shared DeepSeek-R1 B200 runs (benchmarks/"
    "sglang_speed_fit.py --kernels: 3.7-5.6 us per kernel over the B200 models, 4.6-5.1 leaving any one model out); "
    "on all 28 cookbook runs (1-100 clients) the median |error| is TPOT 10 %, output tok/s 13 %, TTFT 28 %. The "
    "bandwidth and compute shares, step overhead and all-reduce latency are vLLM's fit carried over. Speculative terms: "
    "draft_step_overhead_ms 0.2 assumed (SGLang replays the whole multi-step draft loop as one CUDA graph, "
    "python/sglang/srt/speculative/eagle_draft_cuda_graph_runner.py, so a pass costs only its ~15 small kernels: "
    "one decoder layer and the top-k select); spec_step_overhead_ms 2.0 and spec_cpu_ms_per_request 0.12 fitted "
    "once for the runtime (grid search, never per case) on the EAGLE-3 paper's SGLang v0.4.4 table, "
    "https://arxiv.org/abs/2503.01840 Table 3 (EAGLE and EAGLE-3 chains of 3, Llama-3.1-8B, H100, batch 2-64, "
    "lengths not stated so run at the CLI defaults 1024 in / 128 out) with the acceptance model of "
    "acceptance.py: 8/8 win/lose calls, mean |error| 10 %. Their form follows the source: with EAGLE the "
    "overlap scheduler is off (python/sglang/srt/server_args.py: EAGLE/EAGLE3 set disable_overlap_schedule = "
    "True), so the host time a plain step hides is exposed, and each step syncs (accept_index.tolist()) and "
    "walks every request's accepted tokens in Python (python/sglang/srt/speculative/eagle_utils.py "
    "EagleVerifyInput.verify, req.check_finished()) before the draft-extend pass "
    "(eagle_worker.py forward_draft_extend_after_decode)")
_LLAMACPP_FIT = (
    "fitted once for llama.cpp on {backend} (grid search over mem_bw, compute, layer_us, overlap_p; one set for the "
    "backend, never per chip) on llama.cpp's public llama-bench scoreboard {url}: {rows}, as listed in "
    "calculator/runtimes/llamacpp/data/llama_bench_public.json, predicted through calculator/runtimes/llamacpp/"
    "speed.py; median |error| assumed row -> fitted, leave-one-chip-out: {err} (benchmarks/llamacpp_bench_fit.py). "
    "The data have one model depth (32 layers), so the fixed time per pass is carried by layer_us with "
    "step_overhead_ms 0; speculative terms are the assumed row's")
_VLLM_CPU_MEASURED = (
    "measured on one machine only: the 2-core development host (/proc/cpuinfo: \"Intel(R) Xeon(R) Processor\", model "
    "167, AVX-512 and AMX; 2 cores, 24 GiB; shared with other work, load average 2-7 during the runs), vLLM 0.32.0 CPU "
    "build as the validator serves it (float32, --enforce-eager, VLLM_CPU_KVCACHE_SPACE=1), by benchmarks/"
    "cpu_speed_check.py (data benchmarks/data/cpu_speed_dev_2core.json: tiny-random/llama, the same model with 8 "
    "layers, the trained pair's padded target; 1 and 4 clients, 128-512 in, 48-192 out; medians of 10 runs). From "
    "vLLM's own inter-token latency (/metrics): 1.5 ms per engine step (scheduler, input preparation, sampler, output "
    "in Python; no CUDA graphs) and 260 us per layer per pass (eager PyTorch / oneDNN ops); from the padded target's "
    "decode step and prefill: mem_bw 0.11 and compute 0.055 of the catalog CPU's placeholder 100 GB/s and 2 TFLOP/s "
    "(~11 GB/s and ~110 GFLOP/s float32 here); ttft_fixed_ms 20: the client's TTFT beyond the predicted prefill at "
    "one client (11-34 ms by model: the API server, tokenization, the stream). Another CPU (cores, memory channels, "
    "ISA) differs: assumed there, refine with a validation run. Not modelled, seen here: with a step of a few ms "
    "(the tiny models) up to 90 % of the requests' streams reached the client in one burst at their end, their TTFT "
    "being the whole request (the validator counts them and compares vLLM's own latency); at 4 clients the "
    "padded target's TTFT was 59-70 % above the prediction while the wave term had the mean request wait for half "
    "the wave's work; priced per scheduler step (a wave's prompts ride in one prefill step, so each waits for all of "
    "it: wave_ttft_ms) it is 3-7 % below. The speculative terms are assumed")
AMD_INSTINCT = "vendor:amd-instinct"  # the key of the rows for AMD Instinct (datacenter) GPUs under ROCm
AMD_FITTED_ARCHITECTURES = ("CDNA3",)  # the architectures the AMD rows' public records ran on (MI300X)
_AMD_FIT = (
    "fitted once for AMD Instinct CDNA3 under ROCm, one set for vLLM and SGLang (grid search over layer_us, "
    "allreduce_latency_us, mem_bw on TPOT; never per case; benchmarks/rocm_speed_fit.py) on every public MI300X serving "
    "record the product models: vLLM speed-070/071/072 of ../shared/cases/serving_speed_benchmarks.json "
    "(https://github.com/vllm-project/recipes/blob/8959cf64189c71d36e11c6a30335f923f261b1f7/models/mistralai/"
    "Mistral-Medium-3.5-128B.yaml, FP8 TP1/4/8, c=32, 1024/1024) and SGLang sx-015/016/017 of "
    "benchmarks/data/serving_extra_public.json (https://github.com/sgl-project/sglang/pull/31044, MiniMax-M2.7 FP8 "
    "TP2/TP4, c=1/16/64, 1000/1000). Median |error| of TPOT, tok/s, TTFT: the NVIDIA-fitted row 42 / 132 / 68 %, "
    "this row 3 / 33 / 61 % in sample, 19 / 29 / 65 % leave-one-source-out (the terms swing by source: layer_us 60-140, "
    "allreduce_latency_us 30-60, mem_bw 0.5-0.8; SGLang MiniMax at c=16/64 stays 15-21 % too fast). Three more MI300X "
    "runs are scored since SGLang's Llama 4 pool is modelled (sgl-pub-037/038/039 of benchmarks/data/"
    "sglang_speed_public.json, sgl-cookbook Llama 4, Llama-4-Scout BF16 TP8, c=1/16/100): this row's TPOT is 53 / 43 % "
    "too slow at 1 / 16 clients and 27 % too fast at 100 (a median 15 % over all nine). Refitted on the nine the grid "
    "moves to layer_us 60, mem_bw 0.5 (in sample 5 %, leave-one-source-out 33 %, worse than the six's 19 %), whose "
    "32-request decode step alone outlasts the recipe runs' measured TPOT, leaving no time for the prefill their TTFT "
    "shows, so the row keeps the six-run fit. TTFT of the "
    "c=32 / 100-prompt vLLM runs and the tok/s they report (a 4-request tail after three waves of 32) are not "
    "explained by these terms (a wave of 32 prompts in two 16384-token steps, ~5 s each at TP1: the hipBLASLt per-tensor "
    "FP8 GEMMs at ~0.31 of the FP8 datasheet rate; a lower compute term alone, fitted on TPOT + TTFT, runs to the "
    "grid's edges, trading against layer_us: benchmarks/rocm_speed_fit.py --with-compute). "
    "Why the terms differ from NVIDIA's: vLLM on ROCm runs without AITER unless asked "
    "(vllm/envs.py VLLM_ROCM_USE_AITER default False: ROCM_ATTN / Triton attention, unfused small kernels; "
    "vllm/platforms/rocm.py _get_backend_priorities; the recipe runs set VLLM_ROCM_USE_AITER=1, which leaves this "
    "per-tensor FP8 checkpoint on ROCmFP8ScaledMMLinearKernel, torch._scaled_mm, and ROCM_ATTN first), its custom all-reduce over XGMI with QuickReduce opt-in "
    "(VLLM_ROCM_QUICK_REDUCE_QUANTIZATION default NONE); SGLang leaves AITER's MoE / GEMM paths off (sglang/srt/environ.py "
    "SGLANG_USE_AITER False) while its ROCm attention backend is aiter for MHA and triton for most MLA head counts "
    "(calculator/runtimes/sglang/compat.py default_backend), with its 1-stage custom all-reduce. compute, moe_compute, "
    "overlap_p, wave_share, ttft_fixed_ms, step_overhead_ms and the speculative terms are the runtime's * row's "
    "(not fitted on AMD data)")
# What the AMD rows leave unexplained on the records they were fitted on (benchmarks/rocm_speed_fit.py, recomputed by
# tests/test_rocm_efficiency.py): said on every AMD Instinct answer
AMD_PREFILL_WARNING = (
    "AMD Instinct: only the decode terms come from public data (fitted on 6 MI300X runs; on the 9 the product scores, "
    "benchmarks/rocm_speed_fit.py, TPOT is a median 15 % off and up to 53 %; other Instinct generations borrow them); "
    "on those runs the predicted TTFT was from 98 % below to 9 % above the measured one and the output tok/s up to "
    "49 % above (the prefill ran at a fifth to a third of "
    "the FP8 datasheet rate and shortened far less than 1/TP with tensor parallelism, 5.7 s at TP1 to 2.5 s at TP8, "
    "which the speed model does not capture): read TTFT and tok/s as best cases until a validation run on this hardware refines them")
# SGLang's TTFT with more than one client is not modelled to a useful precision: on the public runs with 4-100 clients
# that the product answers below saturation (benchmarks/sglang_speed_fit.py --load-ttft, recomputed by
# tests/test_runtime_sglang.py) the measured mean TTFT ranged from a sixth to eleven times the prediction, in both
# directions on the same model and GPU (GLM-4.7-Flash on B200, 3,750-token prompts: 11.0x at 16 clients, 1.2x at 64).
# Said on every SGLang answer with more than one client running
SGLANG_LOAD_TTFT_WARNING = (
    "SGLang TTFT with several clients is not calibrated: on 28 public sglang.bench_serving runs with 4-100 clients the "
    "measured mean TTFT was 0.17-11.0 times this model's figure (median error 31 %; benchmarks/sglang_speed_fit.py "
    "--load-ttft). The first wave of prompts, the spread of prompt lengths (bench_serving's --random-range-ratio), "
    "warm-up and the host's speed move it more than the GPU does; read the TTFT as the steady single-prompt figure, "
    "not a bound, and measure yours (TPOT and tok/s are not affected by this note)")
# SGLang's per-kernel terms (benchmarks/sglang_speed_fit.py --kernels, on the concurrency-1 cookbook runs: measured TPOT
# minus the roofline, divided by the kernels calculator/runtimes/sglang/kernels.py counts): 3.7-5.6 us per kernel on
# B200 over 5 models (median 4.7; 4.6-5.1 leaving any one model out), 9.0 on A100 (one model); 5.8 us per triton
# split-KV tile (GLM-4.7-Flash, the one source on that backend); 90 us per kernel launched by an eager prefill (TTFT at
# concurrency 1 minus ttft_fixed_ms 20, over the layers x kernels: median of 11 runs, 42-246 us)
SGLANG_KERNEL_US = 4.7
SGLANG_KERNEL_US_PRE_SM90 = 9.0
SGLANG_TRITON_ITER_US = 5.8
SGLANG_PREFILL_LAUNCH_US = 90.0
# The 90 us per kernel above comes from MoE models (every fitted run but the GPU-bound Llama-3.1-70B on A100). The
# eager prefill of a dense model took far less per counted kernel: 28 us (the median of its three public runs: Qwen3-8B
# BF16 16 us and FP8 65 us on one H100, benchmarks/data/sglang_speed_public.json sgl-pub-043/045 at 4 clients;
# Llama-3.1-8B FP8 TP8 28 us at one client, sglang PR 13094's eager run, 30.0 ms = 20 + 32 x 11 x 28 us), so a model
# without experts takes SGLANG_PREFILL_LAUNCH_DENSE_US. A prefill pass replayed from SGLang's piecewise CUDA graphs
# (0.5.10's default) keeps its split ops at the eager cost and prices the graphed kernels at
# SGLANG_PREFILL_GRAPH_KERNEL_US (MoE) / _DENSE_US: for the dense model the graphs removed the whole launch time (PR
# 13094's piecewise run at one client: 19.7 ms, under the 20 ms API part), so 0; for an MoE model they did not: Kimi-K2's
# piecewise runs (PR 13466, one and two clients, 95 / 132 ms) are predicted 113 / 125 ms with 50 us (97 / 107 with 40,
# 128 / 143 with 60; 69 / 73 with 0), the only public piecewise MoE runs the product answers.
# benchmarks/sglang_piecewise_check.py prints all of it (--graph-us, --dense-us: what-ifs)
SGLANG_PREFILL_GRAPH_KERNEL_US = 50.0
SGLANG_PREFILL_LAUNCH_DENSE_US = 28.0
SGLANG_PREFILL_GRAPH_KERNEL_DENSE_US = 0.0
NVIDIA_PRE_SM90 = "nvidia:pre-sm90"  # the key of the rows for NVIDIA GPUs before Hopper (Ampere, Ada, older)
EFFICIENCY: dict[tuple[str, str], Efficiency] = {
    ("vllm", "*"): Efficiency(mem_bw=0.9, compute=0.55, moe_compute=0.35, step_overhead_ms=0.3,
                              allreduce_latency_us=10.0, layer_us=60.0, overlap_p=1.0, wave_share=0.2,
                              ttft_fixed_ms=20.0,
                              draft_step_overhead_ms=0.5, spec_step_overhead_ms=1.0, spec_cpu_ms_per_request=0.1,
                              label="fitted", source=_VLLM_FIT),
    # measured on the 2-core development host only (the source says what on); labelled assumed: another CPU differs
    ("vllm", "CPU"): Efficiency(mem_bw=0.11, compute=0.055, step_overhead_ms=1.5, layer_us=260.0, ttft_fixed_ms=20.0,
                                allreduce_latency_us=50.0, source=_VLLM_CPU_MEASURED, draft_step_overhead_ms=2.0,
                                spec_step_overhead_ms=2.0),
    ("sglang", "*"): Efficiency(mem_bw=0.9, compute=0.55, step_overhead_ms=0.3, allreduce_latency_us=10.0,
                                layer_us=60.0, overlap_p=1.0, wave_share=0.2, ttft_fixed_ms=20.0, moe_compute=0.35,
                                kernel_us=SGLANG_KERNEL_US, triton_iter_us=SGLANG_TRITON_ITER_US,
                                prefill_launch_us=SGLANG_PREFILL_LAUNCH_US,
                                prefill_graph_kernel_us=SGLANG_PREFILL_GRAPH_KERNEL_US,
                                prefill_launch_dense_us=SGLANG_PREFILL_LAUNCH_DENSE_US,
                                prefill_graph_kernel_dense_us=SGLANG_PREFILL_GRAPH_KERNEL_DENSE_US, mixed_prefill=False,
                                source=_SGLANG_FIT,
                                draft_step_overhead_ms=0.2, spec_step_overhead_ms=2.0, spec_cpu_ms_per_request=0.12,
                                # the per-kernel, triton-tile and eager-prefill terms and the speculative terms are
                                # fitted on public SGLang runs, the bandwidth / compute shares are vLLM's (the source
                                # says which)
                                label="fitted"),
    ("tensorrt-llm", "*"): Efficiency(mem_bw=0.9, compute=0.6, step_overhead_ms=0.2, allreduce_latency_us=8.0,
                                      layer_us=40.0, overlap_p=1.0, wave_share=0.2, ttft_fixed_ms=20.0,
                                      source="assumed: vLLM's fitted form with a compiled engine's smaller per-layer "
                                             "and per-step costs (CUDA graphs, custom all-reduce); no public data "
                                             "fitted"),
    ("llama.cpp", "*"): Efficiency(mem_bw=0.75, compute=0.35, step_overhead_ms=1.0, allreduce_latency_us=50.0,
                                   layer_us=30.0, overlap_p=1.0, wave_share=0.2, ttft_fixed_ms=20.0,
                                   source="assumed for llama.cpp on CUDA, ROCm, Vulkan and the CPU (ggml graphs, no "
                                          "vLLM-style batching kernels), in vLLM's fitted form; no public data fitted "
                                          "(Metal has its own fitted row). On llama.cpp's public CUDA scoreboard "
                                          "(https://github.com/ggml-org/llama.cpp/discussions/15013, 20 NVIDIA GPUs, "
                                          "Llama 2 7B Q4_0, quantized prefill priced at the INT8 rate of llama.cpp's "
                                          "MMQ kernels) its median |error| is tg128 22 %, pp512 19 % "
                                          "(benchmarks/llamacpp_bench_fit.py)",
                                   draft_step_overhead_ms=1.0, spec_step_overhead_ms=1.0),
    # llama.cpp per backend (speed.llamacpp_efficiency looks up "backend:<plan device>"); the other backends (Vulkan,
    # ROCm, SYCL, CPU) keep the assumed "*" row
    ("llama.cpp", "backend:Metal"): Efficiency(
        mem_bw=0.92, compute=0.70, step_overhead_ms=0.0, allreduce_latency_us=50.0, layer_us=167.5, overlap_p=2.0,
        wave_share=0.2, ttft_fixed_ms=20.0, draft_step_overhead_ms=1.0, spec_step_overhead_ms=1.0, label="fitted",
        source=_LLAMACPP_FIT.format(
            backend="Metal", url="https://github.com/ggml-org/llama.cpp/discussions/4167",
            rows="57 tg128 rows (20 Apple chips, M1 to M4, Llama 2 7B F16 / Q8_0 / Q4_0) and 35 pp512 rows (the 12 chips "
                 "with catalog TFLOP/s)",
            err="tg128 12.8 % -> 3.2 %, pp512 50.2 % -> 4.3 %")),
    # CUDA keeps the assumed "*" row. Its matmuls are priced per kernel (calculator/runtimes/llamacpp/cuda_matmul.py: a
    # quantized weight in a prefill ubatch runs MMQ, int8 on the tensor cores, at the catalog's tops_int8). The CUDA
    # fit of the same script (benchmarks/llamacpp_bench_fit.py on discussion #15013's 20 GPUs, Q4_0, -fa 1: mem_bw 0.79,
    # compute 0.28, layer_us 12.5, overlap_p 1) is not used: leave-one-GPU-out its pp512 median |error| is 18.6 %, no
    # better than the assumed row's 18.6 % (tg128 6.9 % against 22.2 %; with the A30's MMQ rate divided by
    # cuda_matmul.MMQ_DATACENTER_SHORTFALL the assumed row is at 16.6 %, the refit at 17.2 %), and on the public K-quant records of
    # benchmarks/llamacpp_cases.py it moves the decode median from 13.6 % to 15.6 % and the speculative speedup's from
    # 6.4 % to 9.5 %. Before the INT8 rate (prefill at the BF16 figure, which GeForce boards run at half their FP16 rate
    # and a quarter of their INT8 one) the assumed row's pp512 was 56.3 % off on the 19 GPUs then mapped, and the fit
    # (compute 0.86) stayed 38.5 % off leave-one-GPU-out and moved the decode median to 25.7 %.
}
# AMD Instinct under ROCm (get_efficiency looks the class up through efficiency_class; hardware() labels it assumed on
# the architectures the data do not cover): the runtime's * row with the three terms the MI300X records fitted
EFFICIENCY[("vllm", AMD_INSTINCT)] = replace(EFFICIENCY[("vllm", "*")], layer_us=100.0, allreduce_latency_us=60.0,
                                             mem_bw=0.8, label="fitted", source=_AMD_FIT)
# SGLang's row takes the same three terms but stays labelled assumed: the rest of its base terms are vLLM's carried over
# (its per-kernel time was fitted on NVIDIA only, so the AMD row keeps whole-layer layer_us), and its Llama-4-Scout MI300X
# runs stay 43-53 % too slow at 1-16 clients (TPOT)
EFFICIENCY[("sglang", AMD_INSTINCT)] = replace(
    EFFICIENCY[("sglang", "*")], layer_us=100.0, allreduce_latency_us=60.0, mem_bw=0.8, label="assumed",
    kernel_us=None,  # the MI300X fit priced whole layers (layer_us); the eager prefill and separate prefill passes stay
    source=f"{_AMD_FIT}. Labelled assumed for SGLang: its other base terms are vLLM's carried over and its "
           f"Llama-4-Scout MI300X runs stay 43-53 % too slow at 1-16 clients (TPOT); SGLang's own terms (the per-layer "
           f"kernel time excepted): {_SGLANG_FIT}")
# SGLang before Hopper: the same row with the kernel time the A100 runs took (the only pre-SM90 SGLang data)
EFFICIENCY[("sglang", NVIDIA_PRE_SM90)] = replace(EFFICIENCY[("sglang", "*")], kernel_us=SGLANG_KERNEL_US_PRE_SM90)
RUNTIMES = ("vllm", "sglang", "tensorrt-llm", "llama.cpp")
# What each label means for the figures, as the page and the CLI say it. "fitted": vLLM's row is within a median
# 6-10 % (TPOT, tok/s) of the records it was fitted on, and 31 % (TPOT) / 26 % (tok/s) off on 8 other public vLLM
# runs on NVIDIA GPUs (benchmarks/data/serving_extra_public.json sx-001..007, sx-010: benchmarks/speed_cases.py);
# TTFT is less certain (24 % on the fitted records, +58 % on the one other run below saturation).
# MLA models (DeepSeek V2/V3/R1, Kimi K2, GLM-4.7-Flash...) are outside every fitted row's data. At concurrency 1 the
# public SGLang runs of MLA models (benchmarks/data/sglang_speed_public.json sgl-pub-018/029, shared speed-037: GLM-4.7-
# Flash on B200, Kimi-K2.5 on H200, DeepSeek-R1-0528 on B200, the shortest prompts) spent 107-163 us per layer beyond the
# model's weight, KV and all-reduce time, where SGLang's GQA runs spent 41-106 (measured TPOT minus perf.step_cost's
# memory and all-reduce time, divided by the layers)
MLA_FIT_WARNING = (
    "MLA attention: no MLA model (DeepSeek V3/R1, Kimi K2, GLM-4.7-Flash) is among the public runs the efficiency was "
    "fitted on; on public SGLang runs of MLA models each layer took 107-163 us beyond its weight and KV traffic, "
    "against the {layer_us:g} us this fit carries, so read the decode times as a best case")
#: Why there is no speed for a configuration whose server does not start (the verdict says why and what would work);
#: every runtime refuses with it, field ``configuration``.
NO_SERVER = "the server does not start (see the verdict and what would work), so there is no speed to predict"
MLA_LAYER_US = (107.0, 163.0)  # per-layer time beyond weights / KV / all-reduce on SGLang's public MLA runs (above)
PRECISION_AMD = ("fitted on 6 public MI300X runs for decode only: TPOT about ±20 % (up to 53 % off on 9), TTFT and "
                 "tok/s not (see the "
                 "AMD Instinct note)")
PRECISION = {"fitted": "fitted once per runtime on public benchmarks: about ±10 % on the runs it was fitted on, "
                       "±30 % on other public runs (TTFT less certain)",
             "assumed": "assumed, not calibrated: ±30 % or more",
             "calibrated": "calibrated by a validation run"}
_MEASURED: dict[tuple[str, str], Efficiency] = {}

# --------------------------------------------------------------------------------------------------------
# Calibrations from validation runs, each limited to what it measured
# --------------------------------------------------------------------------------------------------------
#: The kernel path a calibration records and an estimate must match: the compute dtype, the quantization method,
#: the KV cache dtype (each as resolved), the attention backend asked for ("default": the release's own choice)
#: and eager mode (CUDA graphs on a GPU; torch.compile on vLLM's CPU build, vllm/platforms/cpu.py:350-380 in 0.32.0).
KERNEL_PATH_KEYS = ("dtype", "quantization", "kv_cache_dtype", "attention_backend", "enforce_eager")


def _release_key(release: str | None) -> str | None:
    """A release as calibrations compare it: its public version (``0.32.0+cpu`` is ``0.32.0``)."""
    return None if release is None else str(release).split("+", 1)[0].strip()


@dataclass(frozen=True)
class CalibrationScope:
    """What one calibration measured, beyond its (runtime, GPU row) key: the runtime ``release`` it ran and its
    ``kernel_path`` (:data:`KERNEL_PATH_KEYS`, as ``((key, value), ...)``; ``None`` when the run recorded none: such
    a calibration is limited to its GPU, runtime and release only)."""

    release: str
    kernel_path: tuple[tuple[str, Any], ...] | None = None

    @classmethod
    def of(cls, release: str, kernel_path: dict[str, Any] | None) -> "CalibrationScope":
        """The scope of a calibration recorded as ``release`` and a ``kernel_path`` dict."""
        path = None if kernel_path is None else tuple((k, kernel_path.get(k)) for k in KERNEL_PATH_KEYS)
        return cls(_release_key(release) or "", path)

    def mismatch(self, release: str | None, kernel_path: dict[str, Any] | None) -> str | None:
        """Why an estimate for ``release`` and ``kernel_path`` is outside this scope (the first difference, in
        words), or None when the calibration applies to it."""
        if _release_key(release) != self.release:
            return f"it measured release {self.release}, this estimate is for {release or 'no release'}"
        for key, value in self.kernel_path or ():
            other = (kernel_path or {}).get(key)
            if other != value:
                return f"it measured {key.replace('_', ' ')} {value}, this estimate has {other}"
        return None

    def describe(self) -> str:
        """The scope in words: ``0.32.0; float32, eager, default attention, KV cache float32`` (the release first)."""
        path = dict(self.kernel_path or ())
        if not path:
            return f"{self.release}; kernel path not recorded"
        quant = f", {path['quantization']}" if path.get("quantization") else ""
        return (f"{self.release}; {path.get('dtype')}{quant}, "
                f"{'eager' if path.get('enforce_eager') else 'graphs / compiled'}, "
                f"{path.get('attention_backend')} attention, KV cache {path.get('kv_cache_dtype')}")


#: Calibrations installed from validation runs: per (runtime, GPU row), ``(scope, efficiency, name)`` — ``name``
#: says which run it came from ("run 1a2b3c4d, 3 days old"). An estimate takes the one whose scope matches.
_CALIBRATED: dict[tuple[str, str], list[tuple[CalibrationScope, "Efficiency", str]]] = {}


def install_calibration(gpu_name: str, efficiency: "Efficiency", scope: CalibrationScope, runtime: str = "vllm",
                        name: str = "") -> None:
    """Use ``efficiency`` for later estimates on this GPU row and runtime whose release and kernel path are within
    ``scope`` (one per scope: a later install for the same scope replaces it). ``name``: the run it came from."""
    key = (runtime, get_gpu(gpu_name).name)
    rows = [row for row in _CALIBRATED.get(key, []) if row[0] != scope]
    _CALIBRATED[key] = [*rows, (scope, efficiency, name)]


def clear_calibrations() -> None:
    """Forget every installed calibration (tests)."""
    _CALIBRATED.clear()


def set_calibrations(rows: list[tuple[str, "Efficiency", CalibrationScope, str, str]]) -> None:
    """Install exactly these calibrations, ``(gpu_name, efficiency, scope, runtime, name)`` each, in place of the
    ones installed (one swap: a concurrent estimate sees the old set or the new one, never none)."""
    global _CALIBRATED
    new: dict[tuple[str, str], list[tuple[CalibrationScope, Efficiency, str]]] = {}
    for gpu_name, efficiency, scope, runtime, name in rows:
        key = (runtime, get_gpu(gpu_name).name)
        new[key] = [*(r for r in new.get(key, []) if r[0] != scope), (scope, efficiency, name)]
    _CALIBRATED = new


def installed_calibrations() -> dict[tuple[str, str], list[tuple[CalibrationScope, "Efficiency", str]]]:
    """The calibrations installed, per (runtime, GPU row) (a copy)."""
    return {k: list(v) for k, v in _CALIBRATED.items()}


def kernel_path(dtype: str | None, quant: "QuantScheme | None", kv_cache_dtype: str | None,
                attention_backend: str | None, enforce_eager: bool) -> dict[str, Any]:
    """The kernel path of a configuration (:data:`KERNEL_PATH_KEYS`), from its resolved dtype, quantization and KV
    cache dtype, the attention backend asked for and eager mode."""
    return {"dtype": dtype, "quantization": quant.name if quant else None, "kv_cache_dtype": kv_cache_dtype,
            "attention_backend": attention_backend or "default", "enforce_eager": bool(enforce_eager)}


def efficiency_class(gpu: GPU) -> str | None:
    """The GPU-class key of :data:`EFFICIENCY` that ``gpu`` falls back to before the runtime's ``*`` row:
    :data:`AMD_INSTINCT` for an AMD Instinct (``vendor amd``, kind ``datacenter``: ROCm's HIP graphs, custom
    all-reduce over XGMI and Triton / AITER kernels); :data:`NVIDIA_PRE_SM90` for an NVIDIA GPU before Hopper
    (only SGLang has such a row: its kernels took longer on A100); else ``None`` (Hopper and later, the CPU, Apple
    and the consumer / workstation Radeon cards, which no AMD record covers, keep the ``*`` row)."""
    if gpu.vendor == "amd" and gpu.kind == "datacenter":
        return AMD_INSTINCT
    cap = gpu.capability_tuple
    if gpu.vendor == "nvidia" and cap is not None and cap < (9, 0):
        return NVIDIA_PRE_SM90
    return None


def get_efficiency(gpu_name: str, runtime: str = "vllm", backend: str | None = None,
                   gpu_class: str | None = None, scope: tuple[str | None, dict[str, Any]] | None = None
                   ) -> Efficiency:
    """The efficiency for ``(runtime, gpu)``: a measured override first (:func:`apply_measured_efficiency`), then
    a calibration from a validation run whose :class:`CalibrationScope` matches ``scope`` (``(release,
    kernel_path)`` of the estimate; without it no calibration applies, since what it measured cannot be checked),
    then the table row for the GPU, then the runtime's row for the ``backend`` (key ``"backend:<name>"``, e.g.
    llama.cpp's ``backend:Metal``) when the table has one, then the runtime's row for the GPU class (``gpu_class``
    from :func:`efficiency_class`, looked up from the catalog name when not given; e.g. ``vendor:amd-instinct``),
    then the runtime's ``*`` row. When a calibration exists for the row but measured something else, the row
    returned says so in its ``source`` (which run, and the first difference)."""
    if (runtime, "*") not in EFFICIENCY:
        raise EngineInputError("runtime", f"unknown runtime {runtime!r}; one of {', '.join(RUNTIMES)}")
    if (runtime, gpu_name) in _MEASURED:
        return _MEASURED[(runtime, gpu_name)]
    calibrated = _CALIBRATED.get((runtime, gpu_name), [])
    misses = []
    for cal_scope, eff, name in calibrated:
        why = cal_scope.mismatch(*scope) if scope is not None else "the estimate's release is not known"
        if why is None:
            return eff
        misses.append(f"{name or 'a run'}'s calibration for this GPU not applied: {why}")
    row = _table_efficiency(gpu_name, runtime, backend, gpu_class)
    if not misses:
        return row
    more = f"; {len(misses) - 2} more calibration(s) of this GPU measured something else" if len(misses) > 2 else ""
    return replace(row, source=f"{row.source}; " + "; ".join(misses[:2]) + more)


def _table_efficiency(gpu_name: str, runtime: str, backend: str | None, gpu_class: str | None) -> Efficiency:
    """:func:`get_efficiency` from the table alone (no measurement, no calibration)."""
    if (runtime, gpu_name) in EFFICIENCY:
        return EFFICIENCY[(runtime, gpu_name)]
    if backend is not None and (runtime, f"backend:{backend}") in EFFICIENCY:
        return EFFICIENCY[(runtime, f"backend:{backend}")]
    if gpu_class is None:
        try:
            gpu_class = efficiency_class(get_gpu(gpu_name))
        except EngineInputError:  # not a catalog name (a custom GPU): no class
            gpu_class = None
    if gpu_class is not None and (runtime, gpu_class) in EFFICIENCY:
        return EFFICIENCY[(runtime, gpu_class)]
    return EFFICIENCY[(runtime, "*")]


def apply_measured_efficiency(gpu_name: str, efficiency: Efficiency, runtime: str = "vllm") -> None:
    """Use ``efficiency`` (from :func:`efficiency_from_measurement`) for later predictions on this GPU."""
    _MEASURED[(runtime, get_gpu(gpu_name).name)] = efficiency


def reset_measured_efficiency() -> None:
    """Forget every measured override and every installed calibration (tests, or a fresh validator session)."""
    _MEASURED.clear()
    clear_calibrations()


def efficiency_from_measurement(result: SpeedResult, *, measured_itl_ms: float | None = None,
                                measured_ttft_ms: float | None = None, source: str) -> Efficiency:
    """Refine the efficiency behind ``result`` from a measured run at the same inputs.

    The decode step's bound term (bandwidth when memory-bound, compute when compute-bound) is scaled so
    that the step's memory/compute combination equals the measured pure step time (TPOT less the fixed
    overhead, per-layer time, all-reduce and prefill stalls); the compute efficiency likewise from TTFT when prefill is compute-bound. Use the
    measurement at concurrency 1 without speculation for the cleanest signal (``vllm bench serve``
    ``Mean TPOT``/``Mean TTFT``). Factors are clamped to (0.05, 1].
    """
    eff = Efficiency(**{k: v for k, v in result.efficiency.items() if k not in ("source", "label")}, source=source,
                     label="calibrated")
    s = result.decode
    if measured_itl_ms:
        fixed = s.overhead_ms + s.comm_ms + (result.itl_ms - result.decode_step_ms)
        meas = measured_itl_ms - fixed
        bound, other = (s.memory_ms, s.compute_ms) if s.bound == "memory" else (s.compute_ms, s.memory_ms)
        # the bound term that makes (bound'^p + other^p)^(1/p) equal the measured core time (p = 0: max)
        q = eff.overlap_p
        need = meas if not q else ((meas ** q - other ** q) ** (1 / q) if meas > other else 0.0)
        if bound > 0 and need > 0:
            if s.bound == "memory":
                eff = replace(eff, mem_bw=_clamp(eff.mem_bw * bound / need))
            else:
                eff = replace(eff, compute=_clamp(eff.compute * bound / need))
    p = result.prefill
    if measured_ttft_ms and p.bound == "compute":
        pred, meas = p.compute_ms, measured_ttft_ms - (result.ttft_ms - p.compute_ms)
        if pred > 0 and meas > 0:
            eff = replace(eff, compute=_clamp(eff.compute * pred / meas))
    return eff


def _clamp(x: float) -> float:
    return min(1.0, max(0.05, x))


CALIBRATION_TOLERANCE = 0.01  # a calibrated TPOT within 1 % of the measurement it came from
CALIBRATION_ROUNDS = 8


def calibrate(inp: EngineInput, *, measured_itl_ms: float, measured_ttft_ms: float | None = None,
              source: str, runtime: str = "vllm", **speed_kwargs: Any
              ) -> tuple[Efficiency, SpeedResult, SpeedResult]:
    """The efficiency that makes the speed model reproduce a measured TPOT (and TTFT) at ``inp``.

    First :func:`efficiency_from_measurement` rescales the roofline's bound term (bandwidth or compute)
    and the prefill compute. When the measurement lies where that term cannot take it (a small model whose
    step is mostly the fixed per-step and per-layer cost: vLLM's CPU build, a tiny model on a GPU), or when
    the new prefill compute moved the prefill stalls inside TPOT, the fixed costs (``step_overhead_ms`` and
    ``layer_us``, one factor for both, within ×0.05 to ×20) are solved so that the predicted TPOT equals
    the measured one within :data:`CALIBRATION_TOLERANCE` (a few rounds of a secant on the residual).

    Args:
        inp: the configuration the measurement ran (no speculation: the baseline phase).
        measured_itl_ms, measured_ttft_ms: ``vllm bench serve``'s mean TPOT and mean TTFT (ms).
        source: where the measurement comes from (kept in the efficiency's ``source``).
        runtime: the efficiency row's runtime.
        speed_kwargs: ``prompt_len``, ``output_len``, ``concurrency`` of the measured run.

    Returns:
        ``(efficiency, before, after)``: the calibrated row and the predictions before and after it.
        Nothing is installed: :func:`apply_measured_efficiency` does that.

    Raises:
        EngineInputError: as :func:`estimate_speed`.
    """
    gpu = get_gpu(inp.gpu).name
    key = (runtime, gpu)
    previous = _MEASURED.get(key)
    try:
        before = estimate_speed(inp, None, runtime=runtime, **speed_kwargs)
        eff = efficiency_from_measurement(before, measured_itl_ms=measured_itl_ms, measured_ttft_ms=measured_ttft_ms,
                                          source=source)
        base_ovh, base_layer = eff.step_overhead_ms, eff.layer_us
        factor = 1.0
        _MEASURED[key] = eff
        after = estimate_speed(inp, None, runtime=runtime, **speed_kwargs)
        for _ in range(CALIBRATION_ROUNDS):
            residual = measured_itl_ms - after.itl_ms
            fixed = after.decode.overhead_ms
            if abs(residual) <= CALIBRATION_TOLERANCE * measured_itl_ms or fixed <= 0:
                break
            # the fixed costs enter TPOT once per step: move them by the residual
            factor = min(20.0, max(0.05, factor * (fixed + residual) / fixed))
            eff = replace(eff, step_overhead_ms=base_ovh * factor, layer_us=base_layer * factor)
            _MEASURED[key] = eff
            after = estimate_speed(inp, None, runtime=runtime, **speed_kwargs)
    finally:
        if previous is None:
            _MEASURED.pop(key, None)
        else:
            _MEASURED[key] = previous
    return eff, before, after


# --------------------------------------------------------------------------------------------------------
# Speculative decoding: acceptance length, break-even
# --------------------------------------------------------------------------------------------------------
def acceptance_length(alpha: float, k: int) -> float:
    """Expected tokens per step with ``k`` drafted tokens, each accepted with probability ``alpha`` given
    the previous one was: ``1 + α + … + α^k = (1 − α^(k+1)) / (1 − α)`` (Leviathan et al. 2023, eq. 1);
    includes the bonus token, like vLLM's "Mean acceptance length"."""
    if not 0 <= alpha <= 1:
        raise EngineInputError("acceptance_rate", f"must be between 0 and 1, got {alpha}")
    if alpha >= 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def acceptance_length_from_per_position(rates: list[float]) -> float:
    """vLLM's mean acceptance length from its per-position rates: ``1 + Σ_i rate_i``.

    vLLM's ``per_position[i] = accepted_at_pos_i / num_drafts`` is already the unconditional probability
    that position ``i`` was accepted, and ``mean_acceptance_length = 1 + accepted / num_drafts``
    (vllm/v1/spec_decode/metrics.py, 0.32), so the two agree by construction."""
    return 1 + sum(rates)


def alpha_from_acceptance_length(mean_length: float, k: int) -> float:
    """The per-token rate ``α`` that gives ``mean_length`` with ``k`` drafts (inverse of
    :func:`acceptance_length`, by bisection). vLLM's logged "Avg Draft acceptance rate" is a different
    figure, ``(AL − 1) / k``; convert through this function."""
    if mean_length <= 1:
        return 0.0
    if mean_length >= k + 1:
        return 1.0
    return _bisect(lambda a: acceptance_length(a, k) - mean_length, 0.0, 1.0)


def break_even_acceptance_rate(cost_ratio: float, k: int) -> float | None:
    """The acceptance rate (accepted / drafted tokens, vLLM's "Avg Draft acceptance rate") at which
    speculation breaks even: ``AL = 1 + k × rate = cost_ratio``, ``cost_ratio`` = time of one speculative
    step over one plain decode step, so ``rate = (cost_ratio − 1) / k``. ``0.0`` when speculation pays
    even when nothing is accepted; ``None`` when it never pays (cost at or above ``k+1`` steps)."""
    if cost_ratio <= 1:
        return 0.0
    if cost_ratio >= k + 1:
        return None
    return (cost_ratio - 1) / k


def _bisect(f, lo: float, hi: float, iters: int = 60) -> float:
    """Root of an increasing ``f`` on ``[lo, hi]``."""
    for _ in range(iters):
        mid = (lo + hi) / 2
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


class TypicalFigure(BaseModel):
    """One public acceptance figure (``calculator/data/spec_decode_typical.json``)."""

    case_id: str
    source_url: str
    method: str
    workload: str
    target_model: str
    draft_model: str | None = None
    num_speculative_tokens: int
    mean_acceptance_length: float
    per_position_acceptance_rate: list[float] | None = None
    temperature: float | None = None
    default: bool = False
    label: str = "public figure"
    note: str = ""

    @property
    def alpha(self) -> float:
        """The per-token rate that reproduces this figure's acceptance length at its ``k``."""
        return alpha_from_acceptance_length(self.mean_acceptance_length, self.num_speculative_tokens)


@lru_cache(maxsize=1)
def typical_figures() -> tuple[TypicalFigure, ...]:
    """Every public acceptance figure shipped with the app."""
    return tuple(TypicalFigure(**row) for row in json.loads(TYPICAL_FILE.read_text())["figures"])


def typical_figure(method: str, workload: str | None = None) -> TypicalFigure | None:
    """The public figure for ``method``: the first whose workload contains ``workload``, else the one
    marked default; ``None`` when no representative public figure exists for the method (ngram's only
    figure is a toy repetitive completion, used only when asked for with ``workload="repetitive"``)."""
    rows = [f for f in typical_figures() if f.method == method]
    if workload:
        hit = [f for f in rows if workload.lower() in f.workload.lower()]
        if hit:
            return hit[0]
    return next((f for f in rows if f.default), None)


# --------------------------------------------------------------------------------------------------------
# Roofline terms
# --------------------------------------------------------------------------------------------------------
class StepCost(BaseModel):
    """One forward pass on one GPU. ``bytes_weights`` and ``bytes_kv`` are read from HBM; ``flops`` the
    matmul + attention work; the ``*_ms`` the roofline terms; ``total_ms = max(memory, compute) + comm +
    overhead``; ``bound`` names the larger of memory/compute."""

    tokens: int
    bytes_weights: float
    bytes_kv: float
    flops: float
    experts_touched: float = 0.0
    memory_ms: float
    compute_ms: float
    comm_ms: float
    overhead_ms: float
    total_ms: float
    bound: str


@dataclass(frozen=True)
class _AttnGroup:
    layers: int
    flops_per_pair: float  # per GPU, per (query, key) pair, summed over these layers
    kv_bytes_per_token: float  # per GPU, summed over these layers
    window: int | None  # tokens read per request: min(c, window); None = whole context
    fixed_tokens: int | None = None  # cross-attention: encoder tokens regardless of context


@dataclass(frozen=True)
class ModelCost:
    """What one forward pass of a model costs on one GPU of its tensor-parallel group, before time.

    ``dense_bytes``: weights read every step (all but the embedding lookup and the routed experts);
    ``expert_bytes``: all routed experts on this GPU; ``matmul_params``: parameters multiplied per token
    on this GPU; ``state_bytes``: Mamba/linear-attention state per request (read and written per step).
    """

    dense_bytes: float
    expert_bytes: float
    num_experts: int
    topk: int
    matmul_params: float
    attn: tuple[_AttnGroup, ...]
    state_bytes: float
    hidden: int
    allreduce_layers: int
    tp: int
    pp: int
    expert_matmul_params: float = 0.0  # of matmul_params: routed-expert parameters multiplied per token
    layer_kernels: float = 0.0  # kernels per layer per decode step, counted by the runtime (0: not counted)
    triton_layers: int = 0  # layers whose decode attention walks the triton split-KV loop
    prefill_graph_max_tokens: int = 0  # prefill passes up to this many tokens replay piecewise CUDA graphs
    graph_split_ops_per_layer: float = 0.0  # ops per layer such a pass still launches eagerly
    decode_graph_max_bs: int | None = None  # decode batches above this many requests run eagerly

    def pass_launch_s(self, eff: "Efficiency", tokens: int) -> float:
        """The per-kernel floor of one eager or piecewise-graphed pass over ``tokens`` tokens (seconds): every counted
        kernel at ``prefill_launch_us`` when the pass runs eagerly; when it replays a piecewise graph, the graph's
        split ops (attention, the all-reduces) at ``prefill_launch_us`` and the other kernels at
        ``prefill_graph_kernel_us``; a model without experts at ``prefill_launch_dense_us`` /
        ``prefill_graph_kernel_dense_us`` where the row sets them; 0 when the row or the runtime gives no such cost."""
        if not eff.prefill_launch_us or not self.layer_kernels:
            return 0.0
        eager, graphed = self.prefill_kernel_us(eff)
        if 0 < tokens <= self.prefill_graph_max_tokens:
            split = min(self.graph_split_ops_per_layer, self.layer_kernels)
            per_layer_us = split * eager + (self.layer_kernels - split) * graphed
        else:
            per_layer_us = self.layer_kernels * eager
        return self.allreduce_layers * per_layer_us * 1e-6

    def dense_prefill(self, eff: "Efficiency") -> bool:
        """Whether the row's dense-model prefill terms apply: a model without experts, on a row that sets them."""
        return not self.num_experts and eff.prefill_launch_dense_us is not None

    def prefill_kernel_us(self, eff: "Efficiency") -> tuple[float, float]:
        """``(eager, graphed)`` µs per counted kernel of a prefill pass for this model on the row
        (:meth:`pass_launch_s`)."""
        if not self.dense_prefill(eff):
            return eff.prefill_launch_us, eff.prefill_graph_kernel_us
        return eff.prefill_launch_dense_us, (eff.prefill_graph_kernel_dense_us
                                             if eff.prefill_graph_kernel_dense_us is not None
                                             else eff.prefill_graph_kernel_us)

    def layer_fixed_s(self, eff: "Efficiency", context: int = 0) -> float:
        """Seconds per forward pass that no roofline term covers: ``layers x layer_kernels x kernel_us`` (+ the
        triton split-KV tiles at ``context``, :func:`triton_decode_iterations`)
        when the row prices kernels and the runtime counted them, else ``layers x layer_us``."""
        if eff.kernel_us is None or not self.layer_kernels:
            return self.allreduce_layers * eff.layer_us * 1e-6
        t = self.allreduce_layers * self.layer_kernels * eff.kernel_us
        if self.triton_layers and eff.triton_iter_us:
            t += self.triton_layers * triton_decode_iterations(context) * eff.triton_iter_us
        return t * 1e-6

    def experts_touched(self, tokens: int) -> float:
        """Expected distinct routed experts per MoE layer for ``tokens`` tokens, each routed to ``topk``
        distinct experts of ``E`` uniformly: ``E × (1 − (1 − topk/E)^tokens)``."""
        if not self.num_experts:
            return 0.0
        return self.num_experts * (1 - (1 - self.topk / self.num_experts) ** tokens)

    def weight_bytes(self, tokens: int) -> float:
        if not self.num_experts:
            return self.dense_bytes
        return self.dense_bytes + self.expert_bytes * self.experts_touched(tokens) / self.num_experts

    def kv_bytes(self, context: int) -> float:
        """KV bytes one request reads per step at ``context`` tokens."""
        total = 2 * self.state_bytes
        for g in self.attn:
            tokens = g.fixed_tokens if g.fixed_tokens is not None else \
                (min(context, g.window) if g.window else context)
            total += g.kv_bytes_per_token * tokens
        return total

    def attention_flops(self, context: int, tokens_per_request: int) -> float:
        """Attention FLOPs of ``tokens_per_request`` new tokens at the end of ``context``."""
        total = 0.0
        for g in self.attn:
            if g.fixed_tokens is not None:
                pairs = tokens_per_request * g.fixed_tokens
            else:
                pairs = _pairs(context, g.window) - _pairs(context - tokens_per_request, g.window)
            total += g.flops_per_pair * pairs
        return total


def _pairs(n: int, window: int | None) -> float:
    """Causal (query, key) pairs of the first ``n`` tokens: ``Σ_{t=1..n} min(t, W)``."""
    if n <= 0:
        return 0.0
    if window is None or n <= window:
        return n * (n + 1) / 2
    return window * (window + 1) / 2 + (n - window) * window


# A KV spec's kind -> the layer kinds it sizes: the same vocabulary (LayerKind), Mamba-family layers
# sharing the ``mamba`` spec.
_KIND_TO_LAYERS = {LayerKind.FULL: (LayerKind.FULL,), LayerKind.MLA: (LayerKind.MLA,),
                   LayerKind.SLIDING: (LayerKind.SLIDING,), LayerKind.CHUNKED: (LayerKind.CHUNKED,),
                   LayerKind.CROSS: (LayerKind.CROSS,),
                   "mamba": STATE_KINDS}  # Mamba-1/2, gated delta-net, KDA: all MambaSpec


def _lin_bytes(dtype: str, quant: QuantScheme | None) -> float:
    return quant.bits / 8 + quant.scale_bytes_per_weight if quant else dtype_bytes(dtype)


def model_cost(arch: ModelArch, est: Plan, *, dtype: str, quant: QuantScheme | None, tp: int,
               pp: int, draft: bool = False) -> ModelCost:
    """The per-GPU cost terms of the target model (``draft=False``) or of a draft model parsed into
    ``arch`` (``draft=True``: its KV entries in ``est`` are the ``draft`` ones).

    Weights: :func:`weights_per_gpu` (the memory engine's sharding rules) for the whole model with
    ``pp = 1`` — pipeline stages run one after another, so a token's step reads every stage's weights —
    less the rotary cache, the vision tower, and the embedding table when ``lm_head`` is separate (an
    embedding lookup reads a few rows). Routed experts are split out by recounting without them.
    KV: the memory engine's per-token bytes by layer type, scaled from the first stage to all layers.
    """
    b = dtype_bytes(dtype)
    w = weights_per_gpu(arch, dtype, quant, tp, 1)
    p = arch.params
    embed = 0 if arch.tie_word_embeddings else round_up(arch.vocab_size, 64) * arch.hidden_size * b / tp
    total = w.bytes_per_gpu - w.rope_cache_bytes - embed - p.vision * b
    expert_bytes = 0.0
    if p.experts:
        no_experts = arch.model_copy(update={"params": p.model_copy(update={"experts": 0, "active_experts": 0})})
        expert_bytes = total - (weights_per_gpu(no_experts, dtype, quant, tp, 1).bytes_per_gpu
                                - w.rope_cache_bytes - embed - p.vision * b)
    dense = total - expert_bytes
    lm = arch.vocab_size * arch.hidden_size if arch.tie_word_embeddings else 0
    matmul = (p.active - p.embed - p.vision - p.norms + lm) / tp

    # attention FLOPs per pair: 2 (QK^T) + 2 (PV) per head and dim: 2 × heads × (d_qk + d_v)
    if arch.kv_lora_rank:
        d_sum = arch.mla_nope_v_dim + (arch.qk_rope_head_dim or 0)
    else:
        d_sum = 2 * arch.head_dim
    heads = arch.num_attention_heads / tp
    per_layer_pair = 2 * heads * d_sum
    counts: dict[str, int] = {}
    windows: dict[str, int | None] = {}
    for la in arch.layers:
        counts[la.kind] = counts.get(la.kind, 0) + 1
        if la.kind == LayerKind.SLIDING:
            windows[LayerKind.SLIDING] = max(windows.get(LayerKind.SLIDING) or 0, la.sliding_window or 0) or None
        elif la.kind == LayerKind.CHUNKED:
            windows[LayerKind.CHUNKED] = la.chunk_size
    groups: list[_AttnGroup] = []
    state = 0.0
    # DeepSeek sparse attention (V3.2): the memory engine lists each such layer's lightning-indexer key cache as a
    # second MLA spec (memory.py, role "indexer"), so an MLA entry counts those layers twice
    n_indexer = 0 if draft else sum(1 for la in arch.layers if la.kind == LayerKind.MLA and la.indexer)
    for entry in est.kv_by_layer_type:
        if entry.draft != draft:
            continue
        kinds = _KIND_TO_LAYERS.get(entry.kind, ())
        n_all = sum(counts.get(k, 0) for k in kinds) or entry.num_layers
        sparse = entry.kind == LayerKind.MLA and n_indexer > 0 and bool(arch.index_topk and arch.index_head_dim)
        n_specs = n_all + (n_indexer if sparse else 0)  # KV specs of every stage, the entry lists its stage's
        scale = n_specs / entry.num_layers if entry.num_layers else 1.0
        if entry.kind == "mamba":
            state += entry.state_bytes_per_request * scale
            continue
        kind = kinds[0] if kinds else LayerKind.FULL
        kv_per_token = entry.bytes_per_token * scale
        window = windows.get(kind)
        if sparse:
            # each query attends to the index_topk tokens its lightning indexer picks, so the latent cache is read
            # (and attended) for those only: a window of index_topk; the indexer scores every cached token with
            # index_n_heads x index_head_dim logits over its own key cache (no V), its heads replicated on every
            # TP rank (vLLM Indexer: wq_b ReplicatedLinear, topk_tokens = index_topk, deepseek_v2.py:680-725 in
            # 0.32.0)
            idx_per_token = indexer_bytes_per_token(arch.index_head_dim)[0] * n_indexer
            groups.append(_AttnGroup(layers=n_indexer, flops_per_pair=2 * arch.index_n_heads * arch.index_head_dim
                                     * n_indexer, kv_bytes_per_token=idx_per_token, window=None))
            kv_per_token -= idx_per_token
            window = arch.index_topk
            # the sparse MLA backends attend over the top-k in the absorbed (MQA) form: QK over the latent and rope
            # (kv_lora_rank + qk_rope_head_dim), PV over the latent (kv_lora_rank), per query head
            # (v1/attention/backends/mla/flashmla_sparse.py forward_mqa, 0.32.0). Costed so for every token, a
            # simplification: in 0.32.0 a prefill whose longest sequence is <= index_topk runs dense MHA instead
            # (model_executor/layers/attention/sparse_mla_attention.py _use_dense_mha_prefill, mla_attention.py
            # forward), FLASHMLA_SPARSE / FLASHINFER_MLA_SPARSE switch long query chunks to masked MHA at some TP sizes
            # (mla_attention.py _MASKED_MHA_THRESHOLDS), and FlashMLA's bf16 sparse kernel pads the query heads to a
            # multiple of 64 (flashmla_sparse.py prefill_padding); none of these is modelled
            pair = 2 * heads * (2 * arch.kv_lora_rank + (arch.qk_rope_head_dim or 0))
        else:
            pair = per_layer_pair
        groups.append(_AttnGroup(layers=n_all, flops_per_pair=pair * n_all,
                                 kv_bytes_per_token=kv_per_token, window=window,
                                 fixed_tokens=arch.encoder_tokens if kind == LayerKind.CROSS else None))
    if draft and not groups:  # a draft whose KV the engine did not list (MTP shares none): count from arch
        kv_b = dtype_bytes(est.resolved.get("kv_cache_dtype", dtype), "kv_cache_dtype")
        per_tok = (arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)) * kv_b if arch.kv_lora_rank else \
            2 * max(1, arch.num_kv_heads // tp) * arch.head_dim * kv_b
        n = len(arch.attention_layers)
        groups.append(_AttnGroup(layers=n, flops_per_pair=per_layer_pair * n, kv_bytes_per_token=per_tok * n,
                                 window=None))
    return ModelCost(dense_bytes=dense, expert_bytes=expert_bytes, num_experts=arch.num_experts,
                     topk=arch.num_experts_per_tok, matmul_params=matmul, attn=tuple(groups), state_bytes=state,
                     hidden=arch.hidden_size, allreduce_layers=arch.num_layers, tp=tp, pp=pp,
                     expert_matmul_params=p.active_experts / tp)


@dataclass(frozen=True)
class Hardware:
    """The figures a step is timed against: bytes/s, FLOP/s, link bytes/s and the efficiency."""

    bandwidth: float  # B/s
    peak_flops: float  # FLOP/s for the compute dtype
    link: float  # B/s per direction
    eff: Efficiency
    compute_dtype: str
    sources: dict[str, str]


def hardware(gpu: GPU, quant: QuantScheme | None, runtime: str = "vllm",
             scope: tuple[str | None, dict[str, Any]] | None = None) -> Hardware:
    """Datasheet figures for ``gpu``: FP8 TFLOP/s when weights and activations are FP8 (vLLM's FP8
    W8A8 path needs compute capability 8.9+; on older GPUs FP8 weights run weight-only through Marlin in
    bf16), else the bf16/fp16 figure. Weight-only int4/int8 schemes compute in bf16. NVFP4 (ModelOpt W4A4) on
    NVIDIA compute capability 10.0+ runs FP4 tensor-core GEMMs: vLLM 0.32 tries its W4A4 kernels first (FlashInfer
    CuteDSL / CUTLASS, B12x, vLLM's CUTLASS: model_executor/kernels/linear/__init__.py:574-581, CUTLASS's
    ``cutlass_scaled_mm_supports_fp4``), with Marlin's weight-only W4A16 as the fallback on older GPUs (bf16
    compute); the FP4 figure is the catalog's ``tflops_fp4``, or FP8's where the catalog has none (a lower bound).
    Every matmul is priced at that rate, also the layers a checkpoint keeps in bf16. ``scope``: the estimate's
    ``(release, kernel_path)``, which a calibration must match to apply (:func:`get_efficiency`)."""
    if gpu.bandwidth_gbps is None or gpu.tflops_bf16 is None:
        raise EngineInputError("gpu", f"{gpu.name}: no memory bandwidth or BF16 TFLOP/s known, so the speed "
                                      "is not modelled (a custom GPU can give them as :bw<GB/s>:bf16<TFLOP/s>)")
    fp8 = bool(quant and (quant.name == "fp8" or ("float" in quant.name and quant.bits == 8)))
    cap = gpu.capability_tuple
    use_fp8 = fp8 and gpu.tflops_fp8 is not None and (cap is None or cap >= (8, 9)) and not gpu.is_cpu
    use_fp4 = (bool(quant and quant.name == "nvfp4") and gpu.vendor == "nvidia" and cap is not None
               and cap >= (10, 0) and (gpu.tflops_fp4 or gpu.tflops_fp8) is not None)
    link, link_src = interconnect(gpu)
    gpu_class = efficiency_class(gpu)
    eff = get_efficiency(gpu.name, runtime, gpu_class=gpu_class, scope=scope)
    if gpu_class == AMD_INSTINCT and eff.label != "calibrated" and \
            _table_efficiency(gpu.name, runtime, None, gpu_class) is EFFICIENCY.get((runtime, AMD_INSTINCT)):
        if eff.label == "fitted" and gpu.architecture not in AMD_FITTED_ARCHITECTURES:
            eff = replace(eff, label="assumed", source=f"{eff.source}; fitted on AMD Instinct "
                          f"{'/'.join(AMD_FITTED_ARCHITECTURES)} only, assumed for {gpu.name} ({gpu.architecture})")
    elif eff.label == "fitted" and gpu.vendor != "nvidia":  # the public data behind the fits is NVIDIA's
        eff = replace(eff, label="assumed", source=f"{eff.source}; fitted on NVIDIA GPUs only, assumed for {gpu.name}")
    tflops = gpu.tflops_fp8 if use_fp8 else gpu.tflops_bf16
    tflops_src = f"{tflops:g} dense TFLOP/s {'FP8' if use_fp8 else 'BF16/FP16'}, {gpu.spec_source}"
    if use_fp4:
        tflops = gpu.tflops_fp4 or gpu.tflops_fp8
        tflops_src = (f"{tflops:g} dense TFLOP/s FP4 (NVFP4 W4A4 GEMMs), {gpu.fp4_source}" if gpu.tflops_fp4 else
                      f"{tflops:g} dense TFLOP/s FP8 for NVFP4 W4A4 GEMMs: the catalog has no FP4 figure for this GPU, "
                      f"so FP8's (a lower bound), {gpu.spec_source}")
    return Hardware(bandwidth=gpu.bandwidth_gbps * 1e9, peak_flops=tflops * 1e12, link=link * 1e9, eff=eff,
                    compute_dtype="fp4" if use_fp4 else "fp8" if use_fp8 else "bf16/fp16",
                    sources={"bandwidth": f"{gpu.bandwidth_gbps:g} GB/s, {gpu.spec_source}",
                             "tflops": tflops_src,
                             "interconnect": f"{link:g} GB/s: {link_src}",
                             "efficiency": eff.source})


def _comm_seconds(mc: ModelCost, hw: Hardware, tokens: int, launches: int = 1) -> float:
    """2 all-reduces per layer over ``tp`` GPUs (ring: 2(tp−1)/tp × bytes / link + latency), plus one
    point-to-point send of the hidden states per pipeline-stage boundary."""
    t = 0.0
    if mc.tp > 1:
        msg = tokens * mc.hidden * ACT_BYTES
        per = hw.eff.allreduce_latency_us * 1e-6 * launches + 2 * (mc.tp - 1) / mc.tp * msg / hw.link
        t += 2 * mc.allreduce_layers * per
    if mc.pp > 1:
        t += (mc.pp - 1) * (hw.eff.allreduce_latency_us * 1e-6 * launches + tokens * mc.hidden * ACT_BYTES / hw.link)
    return t


def step_cost(mc: ModelCost, hw: Hardware, *, requests: int, tokens_per_request: int, context: int,
              overhead: bool = True) -> StepCost:
    """One decode (``tokens_per_request = 1``) or verification (``k + 1``) step of ``requests`` requests
    whose context (including the new tokens) is ``context`` tokens."""
    tokens = requests * tokens_per_request
    wbytes = mc.weight_bytes(tokens)
    kvbytes = requests * mc.kv_bytes(context)
    flops = 2 * mc.matmul_params * tokens + requests * mc.attention_flops(context, tokens_per_request)
    mem = (wbytes + kvbytes) / (hw.bandwidth * hw.eff.mem_bw)
    comp = _compute_seconds(mc, hw, flops, tokens)
    comm = _comm_seconds(mc, hw, tokens)
    ovh = (hw.eff.step_overhead_ms * 1e-3 if overhead else 0.0) + mc.layer_fixed_s(hw.eff, context)
    eager = mc.pass_launch_s(hw.eff, 0) if mc.decode_graph_max_bs is not None and requests > mc.decode_graph_max_bs \
        else 0.0
    if eager:
        # above --cuda-graph-max-bs SGLang runs the decode batch eagerly (cuda_graph_runner.py can_run): the host
        # launches every kernel, and the step takes the longer of that and the GPU work (launch time assumed equal
        # to the eager prefill's, perf.SGLANG_PREFILL_LAUNCH_US)
        ovh += max(0.0, eager - (_core(mem, comp, hw.eff) + comm + ovh))
    return StepCost(tokens=tokens, bytes_weights=wbytes, bytes_kv=kvbytes, flops=flops,
                    experts_touched=mc.experts_touched(tokens), memory_ms=mem * 1e3, compute_ms=comp * 1e3,
                    comm_ms=comm * 1e3, overhead_ms=ovh * 1e3, total_ms=(_core(mem, comp, hw.eff) + comm + ovh) * 1e3,
                    bound="memory" if mem >= comp else "compute")


def _compute_seconds(mc: ModelCost, hw: Hardware, flops: float, tokens: int) -> float:
    """``flops`` of a pass over ``tokens`` tokens at the compute efficiency, the routed-expert share of them
    (``2 × expert_matmul_params × tokens``) at ``moe_compute`` when the row sets it."""
    eff = hw.eff
    if not mc.expert_matmul_params or eff.moe_compute is None:
        return flops / (hw.peak_flops * eff.compute)
    moe = 2 * mc.expert_matmul_params * tokens
    return (flops - moe) / (hw.peak_flops * eff.compute) + moe / (hw.peak_flops * eff.moe_compute)


def _core(mem: float, comp: float, eff: Efficiency) -> float:
    """Memory and compute time of one pass combined: ``max`` (ideal overlap) or the ``overlap_p``-norm."""
    if not eff.overlap_p:
        return max(mem, comp)
    p = eff.overlap_p
    return (mem ** p + comp ** p) ** (1 / p)


PREFILL_GROUPS = 256  # at most this many evaluations per prefill, whatever prompt_len / chunk is


def prefill_cost(mc: ModelCost, hw: Hardware, *, prompt_len: int, chunk: int,
                 cost_for_tokens: Callable[[int], ModelCost] | None = None) -> StepCost:
    """The prompt's prefill in chunks of ``chunk`` tokens (``max_num_batched_tokens``), each chunk a
    ``max(memory, compute)`` step reading the weights once and writing its KV. ``cost_for_tokens(n)``, when given,
    is the ``ModelCost`` of a chunk of ``n`` tokens (a runtime whose kernels, and so its FLOP rate, change with the
    batch: llama.cpp's CUDA matmuls); else ``mc`` for every chunk.

    Bounded work for any input: the full chunks are summed in at most :data:`PREFILL_GROUPS` groups of equal
    chunks, each group as ``count x`` the chunk at the group's mean end position. The per-chunk terms are
    linear in the chunk's end (KV read, attention FLOPs ``∝ n × end``), so the sum is exact where no sliding
    window caps them; the last partial chunk is evaluated on its own."""
    mem = comp = comm = 0.0
    wbytes = kvbytes = flops = 0.0
    full, rest = divmod(prompt_len, chunk)
    pieces: list[tuple[int, float, int]] = []  # (tokens in the chunk, its end position, how many such chunks)
    groups = min(full, PREFILL_GROUPS)
    done = 0
    for gi in range(groups):
        count = full // groups + (1 if gi < full % groups else 0)
        pieces.append((chunk, chunk * (2 * done + count + 1) / 2, count))
        done += count
    if rest:
        pieces.append((rest, prompt_len, 1))
    for n, end, count in pieces:
        mcn = cost_for_tokens(n) if cost_for_tokens is not None else mc
        wb = mcn.weight_bytes(n)
        kvb = mcn.kv_bytes(int(round(end)))  # the chunk reads the prefix and writes its own KV: ~ one pass over it
        fl = 2 * mcn.matmul_params * n + mcn.attention_flops(int(round(end)), n)
        m, c = (wb + kvb) / (hw.bandwidth * hw.eff.mem_bw), _compute_seconds(mcn, hw, fl, n)
        mem += m * count
        comp += c * count
        wbytes, kvbytes, flops = wbytes + wb * count, kvbytes + kvb * count, flops + fl * count
        comm += _comm_seconds(mc, hw, n) * count
    n_chunks = full + (1 if rest else 0)
    gpu = _core(mem, comp, hw.eff) + comm
    if hw.eff.prefill_launch_us and mc.layer_kernels:
        # an eager prefill pass (SGLang replays CUDA graphs for DECODE / TARGET_VERIFY / IDLE batches only,
        # model_executor/forward_batch_info.py:156-160 ForwardMode.is_cuda_graph in sglang 0.5.7, and
        # enable_piecewise_cuda_graph defaults to False, server_args.py:548): the host launches every kernel, and
        # the pass takes the longer of the GPU work and the launches. From 0.5.10 passes of up to
        # piecewise_cuda_graph_max_tokens replay piecewise graphs and launch only the split ops (ModelCost.pass_launch_s)
        launch = full * mc.pass_launch_s(hw.eff, chunk) + (mc.pass_launch_s(hw.eff, rest) if rest else 0.0)
        ovh = n_chunks * hw.eff.step_overhead_ms * 1e-3 + max(0.0, launch - gpu)
    else:
        ovh = n_chunks * (hw.eff.step_overhead_ms * 1e-3 + mc.layer_fixed_s(hw.eff))
    return StepCost(tokens=prompt_len, bytes_weights=wbytes, bytes_kv=kvbytes, flops=flops,
                    experts_touched=mc.experts_touched(min(chunk, prompt_len)), memory_ms=mem * 1e3,
                    compute_ms=comp * 1e3, comm_ms=comm * 1e3, overhead_ms=ovh * 1e3,
                    total_ms=(gpu + ovh) * 1e3,
                    bound="memory" if mem >= comp else "compute")


# --------------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------------
class CurvePoint(BaseModel):
    """One point of a curve: ``x`` is the context (tokens) or the concurrency."""

    x: int
    ttft_ms: float
    itl_ms: float
    output_tokens_per_s: float
    itl_ms_spec: float | None = None
    output_tokens_per_s_spec: float | None = None
    bound: str


class SpecResult(BaseModel):
    """Speed with speculative decoding. ``acceptance_rate`` and ``break_even_acceptance_rate`` are accepted /
    drafted tokens (vLLM's "Avg Draft acceptance rate": ``AL = 1 + k × rate``); ``speedup_curve`` is
    ``[(rate, speedup)]``; ``itl_ms`` is the time per output token (TPOT)."""

    method: str
    num_speculative_tokens: int
    acceptance_rate: float | None
    acceptance_rate_source: str
    mean_acceptance_length: float | None
    mean_acceptance_length_low: float | None = None
    mean_acceptance_length_high: float | None = None
    per_position_acceptance: list[float] | None = None
    draft_ms: float
    step: SpecStep
    verify: StepCost
    ttft_ms: float
    itl_ms: float | None
    itl_ms_likely: tuple[float, float] | None = None  # as SpeedResult.itl_ms_likely, for the speculative server
    output_tokens_per_s: float | None
    speedup: float | None
    speedup_low: float | None = None
    speedup_high: float | None = None
    slowdown: str | None = None
    best_num_speculative_tokens: int | None = None
    mean_in_flight: float | None = None  # an open loop: the speculative server's requests in flight (Little's law)
    stops_paying_above_concurrency: int | None = None
    pays_from_concurrency: int | None = None
    # the most requests the speculative server runs at once (the end of the speedup-vs-concurrency curve) and what
    # limits it (:func:`spec_concurrency_limit`); None without curves (no acceptance figure)
    concurrency_limit: int | None = None
    concurrency_limit_reason: str | None = None
    speedup_vs_concurrency: dict[int, list[tuple[int, float]]] = {}
    verify_compute_bound_tokens: float | None = None
    break_even_acceptance_rate: float | None
    cost_ratio: float
    speedup_curve: list[tuple[float, float]]
    typical: TypicalFigure | None = None

    @property
    def paying_text(self) -> str:
        """:func:`paying_text` of this prediction (where it pays along concurrency)."""
        return paying_text(self.stops_paying_above_concurrency, self.pays_from_concurrency, self.concurrency_limit,
                           self.concurrency_limit_reason)


class SpeedResult(BaseModel):
    """Predicted speed of one configuration. ``ttft_ms``/``itl_ms``/``output_tokens_per_s`` are without
    speculation; ``spec`` holds the figures with it. ``itl_ms`` is the mean time per output token (what
    ``vllm bench serve`` prints as TPOT; its "ITL" equals it without speculation). ``sources`` gives the
    origin of each figure, ``warnings`` the field guide's stop signs that apply."""

    model: str
    gpu: str
    prompt_len: int
    output_len: int
    concurrency: int
    effective_concurrency: int
    mean_context: int
    request_rate: float | None = None  # requests/s of an open loop (Poisson arrivals), None for a closed loop / burst
    mean_in_flight: float | None = None  # an open loop's mean requests in flight (Little's law), None otherwise
    saturated: bool | None = None  # an open loop whose rate exceeds what the server completes
    ttft_ms: float
    itl_ms: float
    # a range the answer holds more likely than ``itl_ms`` (its best case), shown beside it: MLA attention outside the
    # fitted runs (perf.MLA_LAYER_US); None where the fit covers the model
    itl_ms_likely: tuple[float, float] | None = None
    decode_step_ms: float
    output_tokens_per_s: float
    decode: StepCost
    prefill: StepCost
    compute_dtype: str
    runtime: str = "vllm"
    efficiency_label: str = "assumed"
    efficiency_precision: str = PRECISION["assumed"]
    efficiency: dict[str, Any]
    spec: SpecResult | None = None
    vs_context: list[CurvePoint] = []
    vs_concurrency: list[CurvePoint] = []
    sources: dict[str, str] = {}
    warnings: list[str] = []


@dataclass
class _Setup:
    plan: Plan
    arch: ModelArch
    gpu: GPU
    hw: Hardware
    target: ModelCost
    draft: ModelCost | None
    chunk: int
    max_seqs: int
    runtime: str
    tree: tuple[int, int] | None = None  # (speculative_num_steps, speculative_eagle_topk) when topk > 1


def _setup(plan: Plan, runtime: str) -> _Setup:
    gpu = get_gpu(plan.gpu)
    arch = parse_config(plan.hf_config)
    dtype = plan.resolved.get("dtype") or resolve_dtype(plan.dtype, arch, gpu)[0]
    quant = resolve_quant(arch, plan.quant_config, plan.quantization)
    hw = hardware(gpu, quant, runtime, scope=plan_scope(plan, dtype, quant))
    if spans_nodes(plan, gpu):
        link, link_src = cross_node_link(gpu)
        hw = replace(hw, link=link * 1e9,
                     eff=replace(hw.eff, allreduce_latency_us=max(hw.eff.allreduce_latency_us, CROSS_NODE_ALLREDUCE_US)),
                     sources={**hw.sources, "interconnect": (
                         f"{link:g} GB/s: tensor parallel over {plan.tp} GPUs spans nodes of {plan.gpus_per_node}, so "
                         f"each all-reduce crosses the network (NCCL; vLLM's custom all-reduce is off across nodes): "
                         f"{link_src}; {CROSS_NODE_ALLREDUCE_US:g} us per all-reduce at least (assumed)")})
    target = model_cost(arch, plan, dtype=dtype, quant=quant, tp=plan.tp, pp=plan.pp)
    if plan.layer_kernels:
        target = replace(target, layer_kernels=plan.layer_kernels, triton_layers=plan.triton_layers,
                         prefill_graph_max_tokens=plan.prefill_graph_max_tokens,
                         graph_split_ops_per_layer=plan.graph_split_ops_per_layer,
                         decode_graph_max_bs=plan.decode_graph_max_bs)
    draft = _draft_cost(plan, arch, dtype, quant, plan.tp)
    chunk = int(plan.resolved.get("max_num_batched_tokens") or 8192)
    max_seqs = int(plan.resolved.get("max_num_seqs") or 256)
    return _Setup(plan, arch, gpu, hw, target, draft, chunk, max_seqs, runtime)


def plan_scope(plan: Plan, dtype: str, quant: QuantScheme | None) -> tuple[str | None, dict[str, Any]] | None:
    """``(release, kernel_path)`` of a plan (what a calibration must match); None when the plan names no release
    (no calibration can be checked against it)."""
    if plan.release is None:
        return None
    return plan.release, kernel_path(dtype, quant, plan.resolved.get("kv_cache_dtype"), plan.attention_backend,
                                     plan.enforce_eager)


def calibration_scope(inp: EngineInput) -> tuple[str, dict[str, Any]]:
    """``(release, kernel_path)`` of an engine input, as an estimate of it resolves them (:func:`plan_scope`): what a
    validation run of ``inp`` records with its calibration."""
    plan = plan_from_engine(inp)
    arch = parse_config(plan.hf_config)
    dtype = plan.resolved.get("dtype") or resolve_dtype(plan.dtype, arch, get_gpu(plan.gpu))[0]
    scope = plan_scope(plan, dtype, resolve_quant(arch, plan.quant_config, plan.quantization))
    assert scope is not None  # an engine input always names its release
    return scope


def _draft_cost(plan: Plan, arch: ModelArch, dtype: str, quant: QuantScheme | None,
                tp: int) -> ModelCost | None:
    """One drafting forward pass.

    ngram / suffix: proposed on the CPU from the prompt and output (vllm/v1/spec_decode/ngram_proposer.py,
    suffix_decoding.py): no GPU pass. draft_model: the draft model's own decode step (its weights, its KV).
    eagle / eagle3: the head's layer(s) plus ``fc`` (2h→h for EAGLE, 3h→h for EAGLE-3) plus an
    ``lm_head`` over ``draft_vocab_size`` (EAGLE-3) or the target's vocabulary (EAGLE shares the
    target's). mtp: one MTP module of the target (a decoder layer, ``eh_proj`` 2h→h) plus the shared
    ``lm_head``. vLLM runs ``k`` such passes per step (vllm/v1/spec_decode/eagle.py ``propose``).
    """
    method = plan.spec_method
    if method is None or method in ("ngram", "suffix"):
        return None
    b = dtype_bytes(dtype)
    if method == "mtp":
        if not arch.mtp_layers:
            return None
        # the MTP layer's linears as the memory estimate stores them (the checkpoint's quantization unless it keeps
        # the MTP layer unquantized, weights.mtp_layer_bytes_per_weight)
        lin = mtp_layer_bytes_per_weight(arch, dtype, quant)
        h = arch.hidden_size
        per_module = arch.params.mtp / arch.mtp_layers
        routed = arch.num_experts * 3 * h * arch.moe_intermediate_size if arch.num_experts else 0
        lm_head = round_up(arch.vocab_size, 64) * h * b / tp
        kv_b = dtype_bytes(plan.resolved.get("kv_cache_dtype", dtype), "kv_cache_dtype")
        per_tok = ((arch.kv_lora_rank + (arch.qk_rope_head_dim or 0)) if arch.kv_lora_rank
                   else 2 * max(1, arch.num_kv_heads // tp) * arch.head_dim) * kv_b
        d_sum = arch.mla_nope_v_dim + (arch.qk_rope_head_dim or 0) if arch.kv_lora_rank else 2 * arch.head_dim
        pair = 2 * arch.num_attention_heads / tp * d_sum
        active = per_module - routed + (routed * arch.num_experts_per_tok / arch.num_experts if routed else 0)
        return ModelCost(dense_bytes=(per_module - routed) * lin / tp + lm_head, expert_bytes=routed * lin / tp,
                         num_experts=arch.num_experts, topk=arch.num_experts_per_tok,
                         matmul_params=(active + arch.vocab_size * h) / tp,
                         attn=(_AttnGroup(layers=1, flops_per_pair=pair, kv_bytes_per_token=per_tok, window=None),),
                         state_bytes=0.0, hidden=h, allreduce_layers=1, tp=tp, pp=1)
    cfg = plan.draft_hf_config
    if not cfg:
        if method not in ("eagle", "eagle3"):
            return None
        cfg = synthetic_eagle_head(plan.hf_config, method)
    darch = parse_config(cfg)
    dtp = tp if darch.num_attention_heads % tp == 0 else 1
    mc = model_cost(darch, plan, dtype=dtype, quant=None, tp=dtp, pp=1, draft=True)
    if method in ("eagle", "eagle3"):
        h = darch.hidden_size
        draft_vocab = cfg.get("draft_vocab_size") or darch.vocab_size
        own_lm = round_up(darch.vocab_size, 64) * h * b / dtp if not darch.tie_word_embeddings else 0
        fc = (3 if method == "eagle3" else 2) * h * h
        extra_qkv = h * (darch.num_attention_heads + 2 * darch.num_kv_heads) * darch.head_dim \
            if method == "eagle3" else 0  # EAGLE-3's first layer takes [embed; hidden] (2h) into q/k/v
        lm = round_up(draft_vocab, 64) * h * b / dtp
        extra = (fc + extra_qkv) * b / dtp
        mc = replace(mc, dense_bytes=mc.dense_bytes - own_lm + lm + extra,
                     matmul_params=mc.matmul_params + (fc + extra_qkv + draft_vocab * h - darch.vocab_size * h) / dtp)
    return mc


EAGLE3_DRAFT_VOCAB = 32000  # draft_vocab_size of the public EAGLE-3 heads (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B)


def synthetic_eagle_head(target_config: dict, method: str) -> dict:
    """A config.json for an EAGLE / EAGLE-3 head shaped like the public ones when the head's own config is
    not given: one ``LlamaForCausalLM`` decoder layer with the target's hidden size, heads, KV heads and
    dense ``intermediate_size`` (EAGLE heads are one target-shaped layer: SafeAILab/EAGLE
    ``eagle/model/cnets.py``; yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's config), the target's vocabulary, and
    for EAGLE-3 a 32,000-token draft vocabulary. Text configs nested under ``text_config`` are read."""
    t = target_config.get("text_config") or target_config
    h = t["hidden_size"]
    heads = t["num_attention_heads"]
    inter = t.get("intermediate_size") or t.get("moe_intermediate_size") or 4 * h
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": h,
           "num_attention_heads": heads, "num_key_value_heads": t.get("num_key_value_heads") or heads,
           "head_dim": t.get("head_dim") or h // heads, "intermediate_size": inter, "num_hidden_layers": 1,
           "vocab_size": t["vocab_size"], "tie_word_embeddings": False, "hidden_act": "silu",
           "max_position_embeddings": t.get("max_position_embeddings") or 8192, "rms_norm_eps": 1e-5}
    if method == "eagle3":
        cfg["draft_vocab_size"] = min(EAGLE3_DRAFT_VOCAB, t["vocab_size"])
    return cfg


def _sig(x: float | None, digits: int = 3) -> float | None:
    """``x`` to ``digits`` significant digits (honest precision for a model good to a few per cent), half up on its
    decimal as every surface rounds (:func:`calculator.engine.figures.round_sig`)."""
    return round_sig(x, digits)


def _round(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


def _validate(prompt_len: int, output_len: int, concurrency: int, acceptance_rate: float | None) -> None:
    for field, value in (("prompt_len", prompt_len), ("output_len", output_len), ("concurrency", concurrency)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise EngineInputError(field, f"must be a positive integer, got {value!r}")
    if acceptance_rate is not None and not 0 <= acceptance_rate <= 1:
        raise EngineInputError("acceptance_rate", f"must be between 0 and 1 (per drafted token), got {acceptance_rate}")


@dataclass
class _Point:
    ttft: float
    tpot: float
    step: StepCost
    prefill: StepCost
    tps: float
    stall: float


def closed_loop_tokens_per_s(concurrency: int, output_len: int, ttft_ms: float, tpot_ms: float) -> float:
    """Output tok/s of ``concurrency`` requests running at once in a closed loop, as the README defines it and
    ``vllm bench serve`` measures it (output tokens over each request's whole lifetime, its prefill included):
    ``C x O / (TTFT + (O - 1) x TPOT)``, times in ms. The one definition the vLLM, SGLang and llama.cpp / Ollama
    answers share."""
    return concurrency * output_len / ((ttft_ms + (output_len - 1) * tpot_ms) / 1e3)


def _at(s: _Setup, prompt_len: int, output_len: int, conc: int, step_ms: float | None = None,
        step: StepCost | None = None) -> _Point:
    """TTFT, TPOT and output tok/s for ``conc`` requests in flight (see the module docstring)."""
    ctx = prompt_len + output_len // 2
    step = step or step_cost(s.target, s.hw, requests=conc, tokens_per_request=1, context=ctx)
    step_ms = step.total_ms if step_ms is None else step_ms
    pre = prefill_cost(s.target, s.hw, prompt_len=prompt_len, chunk=s.chunk)
    n_chunks = math.ceil(prompt_len / s.chunk)
    # a prefill rides in decode steps (chunked prefill): it adds its compute and its KV traffic to steps that
    # stream the weights anyway, i.e. what the memory/compute combination of the mixed steps costs beyond
    # the plain ones (ideal roofline: nothing until the step turns compute-bound; no overlap: all its compute)
    kv_ms = pre.bytes_kv / (s.hw.bandwidth * s.hw.eff.mem_bw) * 1e3
    mixed = _core(n_chunks * step.memory_ms + kv_ms, n_chunks * step.compute_ms + pre.compute_ms, s.hw.eff)
    stall = max(0.0, mixed - n_chunks * _core(step.memory_ms, step.compute_ms, s.hw.eff) + pre.comm_ms)
    # with output_len 1 there is no decode phase (vllm bench serve reports no TPOT): the plain step, no stall share
    tpot = step_ms + (conc - 1) * stall / (output_len - 1) if output_len > 1 else step_ms
    if not s.hw.eff.mixed_prefill and output_len > 1 and conc > 1:
        tpot = step_ms + _separate_prefill_stall(s, pre, prompt_len, (conc - 1) / (output_len - 1))
    lifetime = pre.total_ms + (output_len - 1) * tpot
    rho = min(1.0, (conc - 1) * pre.total_ms / lifetime) if lifetime > 0 else 0.0
    ttft = pre.total_ms * (1 + rho / 2)
    tps = closed_loop_tokens_per_s(conc, output_len, ttft, tpot)
    return _Point(ttft=ttft, tpot=tpot, step=step, prefill=pre, tps=tps, stall=stall)


def wave_ttft_ms(s: _Setup, pre: StepCost, conc: int, prompt_len: int) -> float:
    """Mean TTFT (ms, without the API server's ``ttft_fixed_ms``) of ``conc`` prompts of ``prompt_len`` tokens that
    arrive together. The scheduler serves them first come, first served in steps of at most ``max_num_batched_tokens``
    (``s.chunk``) tokens, a prompt longer than what is left of a step going on in the next (vLLM 0.32
    v1/core/sched/scheduler.py:899-912 waiting requests while ``token_budget > 0``, :1169 ``num_new_tokens =
    min(num_new_tokens, request_token_budget)``, :657-716 a partly prefilled request first in the next step);
    a request's first token is sampled at the end of the step that holds its prompt's last token, so prompt ``i``
    (0-based) waits for steps ``1 .. ceil((i + 1) x P / B)``. A step of ``n`` prompt tokens takes ``max(n / P x``
    one prompt's compute, the weights read once) + the step overhead + ``n / P x`` one prompt's all-reduces (the
    roofline of :func:`prefill_cost`, per token). Decode tokens of the wave's finished prompts riding in its
    later steps are not counted (a few per step beside thousands of prompt tokens). One step (``C x P <= B``):
    every prompt waits for the whole of it."""
    hw = s.hw
    total = conc * prompt_len
    read_ms = s.target.weight_bytes(s.chunk) / (hw.bandwidth * hw.eff.mem_bw) * 1e3
    ends: list[float] = []
    t = 0.0
    for j in range(math.ceil(total / s.chunk)):
        share = min(s.chunk, total - j * s.chunk) / prompt_len  # prompts' worth of tokens in step j
        t += max(share * pre.compute_ms, read_ms) + hw.eff.step_overhead_ms + share * pre.comm_ms
        ends.append(t)
    return sum(ends[math.ceil((i + 1) * prompt_len / s.chunk) - 1] for i in range(conc)) / conc


def wave_share(eff: Efficiency, random_range_ratio: float | None) -> tuple[float, str]:
    """The share of a closed loop's requests that arrive in a wave (``conc`` prompts at once), and why.

    ``vllm bench serve --request-rate inf --max-concurrency C`` starts ``C`` requests at once (its first wave). With
    fixed lengths (``--random-range-ratio 0``, its default: vllm 0.32 benchmarks/datasets/datasets.py:570
    ``DEFAULT_RANGE_RATIO = 0.0``; lengths drawn from ``[L(1 - r), L(1 + r)]``, :1917) every request of a wave
    finishes within a few decode steps of the others (their prefills ended a few steps apart, their decodes are the
    same length), so the next ``C`` return together: every request is in a wave (share 1), as in the validator's
    runs (``--ignore-eos``, fixed lengths). Public check: vLLM PR 23151's Qwen3-30B-A3B run (fixed 2048 / 1024,
    10 clients, 100 prompts, H100) logged mean / median / P99 TTFT 267 / 300 / 455 ms, one, two and three prefill
    steps of 8192 tokens (four, four and two prompts) of ~150 ms each.

    Spread lengths (``r`` above 0) or a run that does not say (None): the fitted ``eff.wave_share``. Only the first
    wave (``C`` of ``num_prompts``) then surely arrives together, but the public spread runs (InferenceX, lengths in
    ``[0.8 L, L]``, 10 x C prompts) logged TTFTs two to three times that first-wave share and a steady arrival
    give, so the share is the row's blend fitted on them, not ``C / num_prompts``."""
    if random_range_ratio == 0:
        return 1.0, ("--random-range-ratio 0: fixed lengths, so the requests of a wave finish together and the next "
                     "wave returns at once")
    said = ("the length spread is not given (--random-range-ratio)" if random_range_ratio is None else
            f"--random-range-ratio {random_range_ratio:g}: the lengths spread, so later waves break up")
    return eff.wave_share, f"{said}; the {eff.label} blend {eff.wave_share:g} of public runs with spread lengths"


def _separate_prefill_stall(s: _Setup, pre: StepCost, prompt_len: int, arrivals: float) -> float:
    """Milliseconds of prefill per decode step when prompts run in passes of their own (SGLang 0.5.7: the scheduler
    runs a prefill batch first whenever requests wait, managers/scheduler.py:1833-1835 ``get_next_batch_to_run``
    "Run prefill first if possible", and mixes none into decode steps unless ``--enable-mixed-chunk``,
    server_args.py:541 ``enable_mixed_chunk = False``).

    ``arrivals``: prompts arriving per decode step, ``(C - 1) / (output_len - 1)`` in a closed loop of C requests.
    Taken as Poisson: a step is followed by a prefill pass with chance ``1 - exp(-arrivals)``, which batches the
    ``arrivals / chance`` prompts that came; a pass of n prompts takes ``max(n x the GPU time of one prompt, the
    host's kernel launches)`` (:func:`prefill_cost`'s eager pass) + the step overhead."""
    eff = s.hw.eff
    chance = 1 - math.exp(-arrivals)
    if chance <= 0:
        return 0.0
    n = arrivals / chance
    gpu_one = pre.total_ms - pre.overhead_ms
    passes = max(1, math.ceil(n * prompt_len / s.chunk))
    launch = passes * s.target.pass_launch_s(eff, min(s.chunk, math.ceil(n * prompt_len))) * 1e3
    return chance * (max(n * gpu_one, launch) + passes * eff.step_overhead_ms)


# --------------------------------------------------------------------------------------------------------
# Speculative decoding: the costs of one speculative step
# --------------------------------------------------------------------------------------------------------
# CPU-side proposers (assumed, order of magnitude of a compiled scan; not measured here):
NGRAM_CPU_US_PER_REQUEST = 5.0  # fixed per request per step
NGRAM_CPU_NS_PER_TOKEN = 2.0  # KMP scan of the request's tokens, per token per step
# vLLM runs the scan over requests in a numba prange with max(1, (os.cpu_count() // 2) // tp) threads
# (vllm/v1/spec_decode/ngram_proposer.py NgramProposer.__init__ / batch_propose). The host's core count is not an
# input, so 8 threads are assumed (a 16-thread host at TP 1; GPU servers usually have more, which only lowers it).
NGRAM_CPU_THREADS = 8
NGRAM_CPU_PARALLEL_US = 20.0  # entering and leaving the numba parallel region once per step (assumed)
SUFFIX_CPU_US_PER_REQUEST = 20.0  # suffix-tree match + incremental update per request per step
LOGITS_BYTES = 4  # fp32 logits / probabilities in the rejection sampler


class SpecStep(BaseModel):
    """One speculative step for ``requests`` requests with ``k`` drafts each (ms unless named).

    ``draft_gpu_ms``: ``k`` drafter forward passes through the roofline (its weights, its KV, its own
    all-reduces at the draft's tensor-parallel size); ``draft_overhead_ms``: ``k`` × the runtime's fixed
    cost per drafter pass; ``proposer_cpu_ms``: ngram / suffix matching on the CPU, serial with the GPU
    step; ``verify``: the target over ``requests × (k+1)`` tokens (roofline, MoE experts touched by all
    of them, all-reduces over ``(k+1)×`` the activations); ``rejection_ms``: the rejection sampler's
    extra traffic over ``requests × k × vocab`` fp32 probabilities; ``spec_overhead_ms``: the runtime's
    fixed extra per speculative step; ``total_ms`` their sum."""

    k: int
    draft_gpu_ms: float
    draft_overhead_ms: float
    proposer_cpu_ms: float
    verify: StepCost
    rejection_ms: float
    spec_overhead_ms: float
    total_ms: float


def spec_step(s: _Setup, method: str, *, requests: int, context: int, k: int, overhead_scale: float = 1.0) -> SpecStep:
    """The cost of one speculative step (see :class:`SpecStep`); ``overhead_scale`` multiplies the fixed
    and CPU terms (the range uses 0.5 and 1.5 of them).

    Sources: drafter loop ``vllm/v1/spec_decode/eagle.py:219`` ``propose`` (one pass over the new tokens,
    then ``k − 1`` single-token passes, :411, argmax per pass, piecewise CUDA graphs); ngram
    ``vllm/v1/spec_decode/ngram_proposer.py`` (``batch_propose``: a numba ``prange`` over the requests on
    ``max(1, (cpu_count // 2) // tp)`` threads, :data:`NGRAM_CPU_THREADS` assumed) and
    suffix decoding (Arctic Inference suffix trees) run on the CPU between GPU steps; verification of
    ``k+1`` tokens per request in one target pass and rejection sampling over target/draft
    probabilities ``vllm/v1/sample/rejection_sampler.py`` (Leviathan et al. 2023, Chen et al. 2023).
    """
    eff = s.hw.eff
    tree = s.tree
    # a tree (SGLang --speculative-eagle-topk > 1): k = --speculative-num-draft-tokens tokens per request are
    # verified (the root included); the drafter runs --speculative-num-steps passes of topk tokens per request
    verify_tokens = k if tree else k + 1
    verify = step_cost(s.target, s.hw, requests=requests, tokens_per_request=verify_tokens, context=context)
    draft_gpu = draft_ovh = cpu = 0.0
    if method in ("ngram", "suffix"):
        if method == "ngram":
            threads = max(1, min(max(1, NGRAM_CPU_THREADS // s.plan.tp), requests))
            cpu = (math.ceil(requests / threads) * (NGRAM_CPU_US_PER_REQUEST + NGRAM_CPU_NS_PER_TOKEN * 1e-3 * context)
                   + (NGRAM_CPU_PARALLEL_US if threads > 1 else 0.0)) * 1e-3
        else:
            cpu = requests * SUFFIX_CPU_US_PER_REQUEST * 1e-3
    elif s.draft is not None:
        passes, per_pass = (tree[0], tree[1]) if tree else (k, 1)
        one = step_cost(s.draft, s.hw, requests=requests, tokens_per_request=per_pass, context=context,
                        overhead=False)
        draft_gpu = passes * one.total_ms
        draft_ovh = passes * eff.draft_step_overhead_ms
    vocab = s.arch.vocab_size or 0
    rej = 2 * requests * (verify_tokens - 1) * vocab * LOGITS_BYTES / (s.hw.bandwidth * eff.mem_bw) * 1e3
    fixed = eff.spec_step_overhead_ms + requests * eff.spec_cpu_ms_per_request
    total = verify.total_ms + draft_gpu + rej + overhead_scale * (draft_ovh + cpu + fixed)
    return SpecStep(k=k, draft_gpu_ms=draft_gpu, draft_overhead_ms=draft_ovh * overhead_scale,
                    proposer_cpu_ms=cpu * overhead_scale, verify=verify, rejection_ms=rej,
                    spec_overhead_ms=fixed * overhead_scale, total_ms=total)


def prefill_budget_cap(s: _Setup, prompt_len: int, output_len: int, *, spec_k: int = 0,
                       acceptance_length: float = 1.0) -> int | None:
    """How many requests can be decoding at once when every step is full: vLLM's scheduler serves the running
    requests first (one token each) and gives waiting prompts only what is left of the per-step budget
    ``B = max_num_batched_tokens`` (vllm/v1/core/sched/scheduler.py ``Scheduler.schedule``: ``token_budget =
    self.max_num_scheduled_tokens``, "First, schedule the RUNNING requests", "Next, schedule the WAITING
    requests" while ``token_budget > 0``). A request needs ``P + O - 1`` scheduled tokens (its prompt, then one
    per decode step after the first token), so a full budget completes ``B / (P + O - 1)`` requests per step and,
    by Little's law, keeps ``B x (O - 1) / (P + O - 1)`` of them decoding. More clients than that wait for their
    prefill: the steps stay full, TPOT is the full step's and the wait is in TTFT.

    With pipeline parallelism vLLM keeps ``pp`` micro-batches in flight, each scheduled with its own budget
    (vllm/config/vllm.py ``max_concurrent_batches`` = pipeline_parallel_size, v1/engine/core.py
    ``step_with_batch_queue``), so one pass through all stages (this model's step) schedules ``pp x B`` tokens.

    With speculation (``spec_k`` drafts, mean acceptance length ``acceptance_length``) a decoding request is
    scheduled ``1 + spec_k`` tokens per step (``num_tokens_with_spec``) for ``S = (O - 1) / AL`` steps, so a full
    budget keeps ``B x S / (P + S x (1 + spec_k))`` decoding (fewer than without drafts).

    ``None`` (no cap) for other runtimes (SGLang runs prefill batches ahead of decode batches, its own caps are
    ``max_running_requests`` and the KV pool) and for ``output_len`` 1. Unit: requests, at least 1."""
    if s.runtime != "vllm" or output_len < 2 or not s.chunk:
        return None
    budget = s.chunk * max(1, s.plan.pp)
    steps = (output_len - 1) / max(1.0, acceptance_length)
    return max(1, int(budget * steps // (prompt_len + steps * (1 + spec_k))))


#: The largest concurrency the speedup-vs-concurrency curve is drawn to (a grid bound, not a server's): beyond it the
#: answer says it still pays "up to the largest concurrency modelled".
MAX_MODELLED_CONCURRENCY = 1024


def spec_concurrency_limit(s: _Setup, prompt_len: int, output_len: int, *, kv_cap: int, seqs_flag: str,
                           spec_k: int, acceptance_length: float) -> tuple[int, str]:
    """``(limit, reason)``: the most requests the speculative server runs at once, the caps
    :func:`estimate_speed_plan` applies to its running requests, for the speculative plan: ``max_num_seqs`` (SGLang's
    ``--max-running-requests`` as the speculative server runs it), the requests of ``prompt_len + output_len`` tokens
    its KV cache holds (``kv_cap``, from the speculative plan's KV cache), for vLLM the decoding requests a full
    prefill token budget sustains when each takes ``1 + spec_k`` tokens per step (:func:`prefill_budget_cap` with the
    drafts), and the grid's :data:`MAX_MODELLED_CONCURRENCY`. ``reason`` names the one that binds (the first of equal
    ones), in the runtime's flag names. The speedup-vs-concurrency curve and the concurrency where speculation stops
    (or starts) paying stay within it: a server cannot run more requests at once than this, whatever the clients."""
    caps = {"max_num_seqs": s.max_seqs, "kv": max(1, kv_cap)}
    budget = prefill_budget_cap(s, prompt_len, output_len, spec_k=spec_k, acceptance_length=acceptance_length)
    if budget is not None:
        caps["budget"] = budget
    caps["grid"] = MAX_MODELLED_CONCURRENCY
    order = ("max_num_seqs", "kv", "budget", "grid")
    binding = min(caps, key=lambda c: (caps[c], order.index(c)))
    total = prompt_len + output_len
    reason = {
        "max_num_seqs": f"{seqs_flag} {s.max_seqs}",
        "kv": f"the KV cache: {s.plan.kv_cache_tokens or 0:,} tokens hold {caps['kv']} requests of {total:,} tokens",
        "budget": (f"the prefill token budget: with {spec_k} drafts each decoding request takes up to {spec_k + 1} of "
                   f"the {s.chunk:,} tokens per step (--max-num-batched-tokens"
                   + (f", in each of {s.plan.pp} pipeline micro-batches" if s.plan.pp > 1 else "")
                   + f"), so a full budget keeps {caps.get('budget')} decoding at mean acceptance length "
                   f"{acceptance_length:.2f}"),
        "grid": f"the largest concurrency modelled ({MAX_MODELLED_CONCURRENCY})",
    }[binding]
    return max(1, caps[binding]), reason


def stops_paying(curve: list[tuple[int, float]]) -> tuple[int | None, int | None]:
    """``(stops paying above, pays from)`` of a speedup-vs-concurrency curve ``[(concurrency, speedup)]``
    sorted by concurrency, read from its first two crossings of 1 (the curve of :func:`estimate_speed_plan` ends at
    the server's limit, :func:`spec_concurrency_limit`).

    ``stops paying above``: the last concurrency of a paying stretch (speedup >= 1) that a losing one follows; ``0``
    when it pays nowhere on the curve; ``None`` when no paying stretch ends before the end of the curve ("does not stop
    paying up to the server's limit"). ``pays from``: the first concurrency of a paying stretch that a losing one
    precedes; else ``None``. Their order tells the shape: only ``stops`` (pays, then loses), only ``pays from`` (loses,
    then pays: an MoE target, whose plain step at low concurrency reads few experts and whose verification of
    ``B x (k+1)`` tokens many, so the gain can rise with concurrency), ``stops < pays from`` (a dip: pays, loses
    between them, pays again) and ``pays from < stops`` (pays only between them). A third crossing is not reported
    (the first two are where the answer changes for the user)."""
    if not curve:
        return None, None
    if all(v < 1 for _, v in curve):
        return 0, None
    crossings = []
    for (c0, v0), (c1, v1) in zip(curve, curve[1:]):
        if v0 >= 1 > v1:
            crossings.append(("stop", c0))
        elif v0 < 1 <= v1:
            crossings.append(("from", c1))
    first_two = dict(crossings[:2])  # each kind at most once among two alternating crossings
    return first_two.get("stop"), first_two.get("from")


def paying_text(stop: int | None, pays_from: int | None, limit: int | None = None,
                limit_reason: str | None = None) -> str:
    """Where speculation pays along concurrency, as one clause for the page and the command line, from
    :func:`stops_paying`'s two numbers (their shapes: pays then loses, loses then pays, a dip, a hump) and the server's
    limit the curve ends at (:func:`spec_concurrency_limit`); ``""`` when there is nothing to say (no curve)."""
    upto = f" up to the server's limit of {limit}" if limit else ""
    to_limit = (f"does not stop paying up to the server's limit of {limit} concurrent requests"
                + (f" ({limit_reason})" if limit_reason else "")) if limit else ""
    if stop == 0:
        return f"pays at no concurrency{upto}"
    if stop and pays_from and stop < pays_from:
        return (f"stops paying above {stop} concurrent requests, loses from {stop + 1} to {pays_from - 1} and pays "
                f"again from {pays_from}" + (f": it {to_limit}" if to_limit else ""))
    if stop and pays_from:
        return f"pays only from {pays_from} to {stop} concurrent requests"
    if stop:
        return f"stops paying above {stop} concurrent requests"
    if pays_from:
        return f"pays only from {pays_from} concurrent requests" + (f": it {to_limit}" if to_limit else "")
    return to_limit


def verify_compute_bound_tokens(s: _Setup) -> float:
    """Tokens per target pass above which verification turns compute-bound (decode, short context):
    ``weight bytes × (peak × eff_c) / (bandwidth × eff_m) / (2 × matmul params)`` — the GPU's
    FLOP/byte ratio times bytes per multiplied parameter / 2 FLOP (dense weights; MoE touches more)."""
    mc, hw = s.target, s.hw
    ridge = (hw.peak_flops * hw.eff.compute) / (hw.bandwidth * hw.eff.mem_bw)
    return ridge * mc.dense_bytes / (2 * mc.matmul_params) if not mc.num_experts else \
        ridge * (mc.dense_bytes + mc.expert_bytes) / (2 * mc.matmul_params)


DEFAULT_NUM_PROMPTS = 1000  # vllm bench serve's --num-prompts default (vllm/benchmarks/datasets/datasets.py:70 in 0.32)


@dataclass
class _OpenLoop:
    """An open loop of Poisson arrivals at ``rate`` requests/s over ``prompts`` prompts (:func:`_open_loop`):
    ``running`` requests run at once (the closed-loop point it is timed at), ``in_flight`` is their mean (Little's
    law), ``saturated`` when the rate exceeds what ``max_running`` requests complete, ``client_cap`` the
    ``--max-concurrency`` (the prompts when none), ``server_cap`` what the server runs at once."""

    rate: float
    prompts: int
    running: int
    in_flight: float
    saturated: bool
    client_cap: int
    server_cap: int
    max_running: int
    cap_text: str = ""  # what limits the server's running requests, in the runtime's words
    busy_wait_ms: float = 0.0  # a Poisson arrival's mean wait for the step in progress (and, vLLM, the one it rides)
    ride: float = 1.5  # that wait in mean steps when the server is busy: 1.5 (vLLM, mixed prefill) or 0.5 (SGLang)

    def tokens_per_s(self, lifetime_ms: float, output_len: int) -> float:
        """Output tok/s as vllm bench serve reports it, all output tokens over the run's duration: the last prompt is
        sent at ``(N - 1) / R`` s, or, when the run is saturated and the server completes only ``mu = running /
        lifetime`` requests/s, it starts at ``(N - 1) / mu``; it ends one lifetime later (vllm/benchmarks/serve.py
        ``benchmark_duration``)."""
        life = lifetime_ms / 1e3
        mu = self.running / life
        # below saturation (or with every prompt in flight at once) the prompts go out at the rate
        pace = min(self.rate, mu) if self.saturated else self.rate
        return self.prompts * output_len / ((self.prompts - 1) / pace + life)

    def apply(self, base: "_Point", output_len: int, warnings: list[str], sources: dict[str, str]) -> float:
        """Set ``base.tps`` (and, saturated with the queue on the server, ``base.ttft``) for the open loop; return the
        mean server-side queue wait added to TTFT (ms), say what binds in ``warnings`` and how in ``sources``."""
        lifetime = base.ttft + (output_len - 1) * base.tpot
        base.tps = self.tokens_per_s(lifetime, output_len)
        mu = self.running / (lifetime / 1e3)
        queue_ms = 0.0
        sources["open_loop"] = (
            f"Poisson arrivals at {self.rate:g} requests/s (vllm bench serve --request-rate, burstiness 1: exponential "
            f"gaps, vllm/benchmarks/serve.py get_request) over {self.prompts:,} prompts: the requests in flight, L = R x "
            "request lifetime (Little's law), found where the lifetime at L running requests gives back L; TTFT and "
            "TPOT are the steady ones at that many (no wave: arrivals come one by one); output tok/s = N x output_len / "
            "((N - 1) / min(R, mu) + lifetime), mu = the requests/s the running requests complete")
        if not self.saturated:
            return 0.0
        cap = self.cap_text or "the server's limit"
        if self.client_cap <= self.server_cap:
            warnings.append(
                f"{self.rate:g} requests/s is more than the server completes with {self.max_running} requests in flight "
                f"(--max-concurrency {self.client_cap}): about {mu:.3g} requests/s. The rest wait in the client, which "
                "vllm bench serve leaves out of TTFT (it times a request from when it is sent, vllm/benchmarks/serve.py "
                "limited_request_func), so TTFT stays the steady one while the run takes longer: output tok/s is what "
                f"{self.max_running} running requests sustain")
            return 0.0
        # the queue grows on the server while prompts arrive: prompt i arrives at i / R and starts at about i / mu
        wait_s = (self.prompts - 1) / 2 * (1 / mu - 1 / self.rate)
        if self.client_cap < self.prompts:  # --max-concurrency bounds the server's queue: Little's law
            wait_s = min(wait_s, (self.client_cap / self.max_running - 1) * lifetime / 1e3)
        queue_ms = wait_s * 1e3
        base.ttft += queue_ms
        warnings.append(
            f"saturated: {self.rate:g} requests/s is more than the server completes, about {mu:.3g} requests/s with "
            f"{self.max_running} requests running at once ({cap}); the queue grows while prompts arrive, so the mean "
            f"TTFT includes a wait of {wait_s:.3g} s that grows with --num-prompts ({self.prompts:,} here): lower the "
            "rate, or add replicas / GPUs")
        sources["ttft_ms.queue"] = ("saturated open loop: prompt i arrives at i / R and starts at about i / mu, a mean "
                                    "wait of (N - 1) / 2 x (1 / mu - 1 / R)" + (
                                        ", at most (C / M - 1) x lifetime with --max-concurrency C (Little's law)"
                                        if self.client_cap < self.prompts else ""))
        return queue_ms


def _open_loop(s: _Setup, prompt_len: int, output_len: int, rate: float, prompts: int, *, client_cap: int,
               server_cap: int, cap_text: str = "", point: Callable[[int], _Point] | None = None) -> _OpenLoop:
    """The operating point of Poisson arrivals at ``rate`` requests/s: the smallest ``n`` running requests (1 ..
    ``min(client_cap, server_cap)``: the client's ``--max-concurrency`` and what the server runs at once) whose
    request lifetime ``T(n)`` (the steady TTFT + ``(output_len - 1) x TPOT`` of :func:`_at` at ``n``, + the API
    server's ``ttft_fixed_ms``) holds ``rate x T(n) <= n`` in flight (Little's law; ``T`` grows with ``n``, so a
    bisection finds it); saturated when even that many do not, unless that many are the whole run (``prompts``: all
    of them fit at once and none queues). ``in_flight`` is ``rate x T(n)``. Unit: requests.
    ``cap_text`` names what limits the server, in the runtime's words (for the saturation note); ``point``: the
    timing at ``n`` running requests (default :func:`_at`, the plain server; the speculative server passes its own)."""
    fixed = s.hw.eff.ttft_fixed_ms
    point = point or (lambda n: _at(s, prompt_len, output_len, n))
    ride = 1.5 if s.hw.eff.mixed_prefill else 0.5

    timings: dict[int, tuple[float, float]] = {}

    def timing(n: int) -> tuple[float, float]:
        """``(lifetime s, busy wait ms)`` at ``n`` running requests: a Poisson arrival finds the server busy with
        chance min(1, L) (arrivals see time averages; L = R x lifetime) and waits half the step in progress, then
        (vLLM) the step its prompt rides in: ride x the mean step (TPOT)."""
        if n not in timings:
            p = point(n)
            life = (p.ttft + fixed + (output_len - 1) * p.tpot) / 1e3
            busy = min(1.0, rate * life) * ride * p.tpot
            timings[n] = (life + busy / 1e3, busy)
        return timings[n]

    top = max(1, min(client_cap, server_cap))
    if rate * timing(top)[0] > top:
        # every prompt of the run in flight at once (no client cap below it, room for all on the server): nothing
        # queues, the rate only spreads their arrival
        whole = top >= prompts
        return _OpenLoop(rate=rate, prompts=prompts, running=top, in_flight=float(top), saturated=not whole,
                         client_cap=client_cap, server_cap=server_cap, max_running=top, cap_text=cap_text,
                         busy_wait_ms=timing(top)[1], ride=ride)
    lo, hi = 1, top
    while lo < hi:
        mid = (lo + hi) // 2
        if rate * timing(mid)[0] <= mid:
            hi = mid
        else:
            lo = mid + 1
    life, busy = timing(lo)
    return _OpenLoop(rate=rate, prompts=prompts, running=lo, in_flight=rate * life, saturated=False,
                     client_cap=client_cap, server_cap=server_cap, max_running=top, cap_text=cap_text,
                     busy_wait_ms=busy, ride=ride)


def estimate_speed(inp: EngineInput, est: EstimateResult | None = None, *, prompt_len: int = 1024,
                   output_len: int = 128, concurrency: int = 1, acceptance_rate: float | None = None,
                   temperature: float | None = None, workload: str | None = None,
                   acceptance_length: float | None = None, runtime: str = "vllm",
                   arrival: str = "closed", speculative_num_steps: int | None = None,
                   speculative_eagle_topk: int = 1, request_rate: float | None = None,
                   num_prompts: int | None = None, random_range_ratio: float | None = None) -> SpeedResult:
    """Predict TTFT, TPOT and output tok/s of ``inp`` (with its ``--speculative-config`` if any).

    Args:
        inp: the engine input (model config, GPU, TP/PP, dtype, quantization, speculative config).
        est: its :func:`~calculator.engine.estimate` result (computed when ``None``): supplies the
            resolved dtype, KV bytes per token by layer type, ``max_num_seqs``/``max_num_batched_tokens``
            and the KV cache capacity.
        prompt_len, output_len: tokens per request (``vllm bench serve --random-input-len/--random-output-len``).
        concurrency: requests in flight (``--max-concurrency``).
        acceptance_rate: accepted / drafted tokens (0-1), vLLM's "Avg Draft acceptance rate" and the
            validator's ``acceptance_rate``: ``AL = 1 + k × rate``; overrides the acceptance model.
        acceptance_length: mean acceptance length at this k (incl. the bonus token); overrides it too.
        temperature: sampling temperature of the traffic (lowers the modelled acceptance).
        workload: ``chat``, ``code``, ``reasoning``, ``creative``, ``summarization`` (or an alias).
        runtime: ``vllm`` (default), ``sglang``, ``tensorrt-llm``, ``llama.cpp``: picks the efficiency row.
        arrival: ``closed`` (a closed loop of ``concurrency`` clients, ``vllm bench serve --max-concurrency``)
            or ``burst`` (``concurrency`` requests released at once, ``--request-rate inf`` without a cap).
            Requests beyond what the engine runs at once (``max_num_seqs``, the KV cache) queue: their mean
            wait, ``(C/M − 1) × lifetime`` (closed, Little's law) or half of it (burst), is added to TTFT.
        speculative_num_steps, speculative_eagle_topk: SGLang's tree drafting (topk > 1): the drafter runs
            ``num_steps`` passes of ``topk`` tokens per request and the target verifies
            ``num_speculative_tokens`` (SGLang's ``--speculative-num-draft-tokens``) per request. The
            acceptance model is for chains: give the tree's measured acceptance length.
        request_rate: requests/s of an open loop (``vllm bench serve --request-rate R``, Poisson arrivals) over
            ``num_prompts`` prompts (default 1000), ``concurrency`` its ``--max-concurrency``: see
            :func:`estimate_speed_plan` and :func:`_open_loop`.
        random_range_ratio: vllm bench serve's ``--random-range-ratio`` (0 to < 1): lengths drawn from
            ``[L(1 - r), L(1 + r)]``. 0 (fixed lengths) keeps a closed loop in waves; above 0 or None (not said)
            TTFT blends the wave and the steady figure by the fitted ``wave_share``: :func:`wave_share`.

    Raises:
        EngineInputError: non-positive lengths/concurrency, α outside [0, 1], an acceptance length outside
        [1, k+1], an unknown workload or runtime, or any error of :func:`~calculator.engine.estimate`.
    """
    return estimate_speed_plan(plan_from_engine(inp, est), prompt_len=prompt_len, output_len=output_len,
                               concurrency=concurrency, acceptance_rate=acceptance_rate, temperature=temperature,
                               workload=workload, acceptance_length=acceptance_length, runtime=runtime,
                               arrival=arrival, speculative_num_steps=speculative_num_steps,
                               speculative_eagle_topk=speculative_eagle_topk, request_rate=request_rate,
                               num_prompts=num_prompts, random_range_ratio=random_range_ratio)


def estimate_speed_plan(plan: Plan, *, prompt_len: int = 1024, output_len: int = 128, concurrency: int = 1,
                        acceptance_rate: float | None = None, temperature: float | None = None,
                        workload: str | None = None, acceptance_length: float | None = None,
                        runtime: str = "vllm", arrival: str = "closed", speculative_num_steps: int | None = None,
                        speculative_eagle_topk: int = 1, request_rate: float | None = None,
                        num_prompts: int | None = None, random_range_ratio: float | None = None) -> SpeedResult:
    """:func:`estimate_speed` on a :class:`Plan`. With ``plan.dp`` data-parallel replicas the clients spread over
    them (each its own scheduler and KV cache: vLLM's DP engine cores, SGLang's --dp-size): one replica is modelled
    at ``ceil(C / dp)`` clients and the output tok/s is that of the ``min(dp, C)`` busy replicas together; a request
    rate is split alike (``R / dp`` requests/s and ``ceil(N / dp)`` prompts per replica).

    ``request_rate`` (requests/s, finite; ``arrival`` is then ``poisson``): an open loop, ``vllm bench serve
    --request-rate R`` (Poisson arrivals, burstiness 1) over ``num_prompts`` prompts (default 1000, vllm bench
    serve's ``DEFAULT_NUM_PROMPTS``), with ``concurrency`` as its ``--max-concurrency`` (the client's cap; at most
    ``num_prompts``). See :func:`_open_loop`."""
    _validate(prompt_len, output_len, concurrency, acceptance_rate)
    if request_rate is not None:
        if isinstance(request_rate, bool) or not isinstance(request_rate, (int, float)) \
                or not 0 < request_rate < float("inf"):
            raise EngineInputError("request_rate", f"must be a positive number of requests per second, got "
                                   f"{request_rate!r} (an unlimited rate, --request-rate inf, is num_prompts "
                                   "without a request rate)")
        if arrival != "closed":
            raise EngineInputError("arrival", "a request rate is its own arrival process (Poisson): give no arrival")
        arrival = "poisson"
    if num_prompts is not None and (isinstance(num_prompts, bool) or not isinstance(num_prompts, int)
                                    or num_prompts < 1):
        raise EngineInputError("num_prompts", f"must be a positive integer, got {num_prompts!r}")
    if random_range_ratio is not None and (isinstance(random_range_ratio, bool)
                                           or not isinstance(random_range_ratio, (int, float))
                                           or not 0 <= random_range_ratio < 1):
        raise EngineInputError("random_range_ratio", "must be a number from 0 to below 1 (vllm bench serve's "
                               f"--random-range-ratio), got {random_range_ratio!r}")
    if plan.dp > 1:
        rate_kw = {} if request_rate is None else {"request_rate": request_rate / plan.dp,
                                                   "num_prompts": math.ceil((num_prompts or DEFAULT_NUM_PROMPTS)
                                                                            / plan.dp)}
        return _replicas(plan, prompt_len=prompt_len, output_len=output_len, concurrency=concurrency,
                         acceptance_rate=acceptance_rate, temperature=temperature, workload=workload,
                         acceptance_length=acceptance_length, runtime=runtime,
                         arrival="closed" if arrival == "poisson" else arrival,
                         speculative_num_steps=speculative_num_steps, speculative_eagle_topk=speculative_eagle_topk,
                         random_range_ratio=random_range_ratio, **rate_kw)
    if arrival not in ("closed", "burst", "poisson"):
        raise EngineInputError("arrival", f"must be 'closed' or 'burst', got {arrival!r}")
    if temperature is not None and not (isinstance(temperature, (int, float)) and 0 <= temperature <= 10):
        raise EngineInputError("temperature", f"must be a number from 0 to 10, got {temperature!r}")
    normalize_workload(workload)
    s = _setup(plan, runtime)
    if speculative_eagle_topk > 1:
        if not speculative_num_steps or speculative_num_steps < 1:
            raise EngineInputError("speculative_num_steps", "a tree (speculative_eagle_topk > 1) needs the number of "
                                   "draft steps")
        s.tree = (speculative_num_steps, speculative_eagle_topk)
    hw = s.hw
    warnings: list[str] = []
    if spans_nodes(plan, s.gpu):
        warnings.append(f"tensor parallel over {plan.tp} GPUs spans nodes of {plan.gpus_per_node}: every layer's "
                        "all-reduces cross the network between them (an assumed 400 / 200 Gb/s port per GPU, NCCL), "
                        "which the figures include; tensor parallel inside a node and pipeline parallel across "
                        "nodes is usually faster")
    sources: dict[str, str] = {f"hardware.{k}": v for k, v in hw.sources.items()}

    if not plan.fits and plan.fit_condition:
        raise EngineInputError("configuration", "not predicted: at the overheads as fitted the KV cache does not hold "
                               "one request, so whether there is a server to time depends on the condition the verdict "
                               "names")
    if not plan.fits:
        # no server to time: the speed of one that does not start is not a number to show (the verdict says why and
        # what would start)
        raise EngineInputError("configuration", NO_SERVER)
    if output_len == 1:
        warnings.append("output_len 1: there is no decode phase, so no TPOT (vllm bench serve reports none); the time per "
                        "output token shown is one decode step at this batch, for reference")
    if plan.spec_method is None and (workload is not None or temperature is not None):
        warnings.append("the workload / temperature given is not used: they set the speculative acceptance, and there "
                        "is no speculative_config, so these are the plain decoding figures")
    if plan.spec_method is None and (acceptance_rate is not None or acceptance_length is not None):
        warnings.append("the acceptance given is not used: there is no speculative_config, so these are the plain "
                        "decoding figures (give a speculative_config to predict a speedup)")
    total_len = prompt_len + output_len
    if total_len > plan.max_model_len:  # a workload the user gave is refused before this (base.workload_fits)
        warnings.append(f"prompt_len + output_len = {total_len} (the default workload) exceeds max_model_len "
                        f"{plan.max_model_len}: the server would refuse such requests; give --prompt-len / "
                        "--output-len that fit")
    kv_cap = int(plan.kv_cache_tokens // total_len) if plan.kv_cache_tokens else int(plan.max_concurrency)
    budget_cap = prefill_budget_cap(s, prompt_len, output_len)
    caps = {"max_num_seqs": s.max_seqs, "kv": kv_cap if kv_cap > 0 else 1}
    if budget_cap is not None:
        caps["budget"] = budget_cap
    conc = max(1, min(concurrency, *caps.values()))
    # the cap that binds (the first of equal ones) and the runtime's flag for max_num_seqs, for the texts below
    binding = min(caps, key=lambda c: (caps[c], ("max_num_seqs", "kv", "budget").index(c)))
    seqs_flag = {"sglang": "--max-running-requests", "llama.cpp": "--parallel"}.get(runtime, "--max-num-seqs")
    open_loop = None
    if arrival == "poisson":
        n_prompts = num_prompts or DEFAULT_NUM_PROMPTS
        cap_text = {"max_num_seqs": f"{seqs_flag} {s.max_seqs}",
                    "kv": f"the KV cache ({plan.kv_cache_tokens or 0:,} tokens hold {kv_cap} requests of {total_len} "
                          "tokens)",
                    "budget": f"the prefill token budget (--max-num-batched-tokens {s.chunk:,})"}[binding]
        open_loop = _open_loop(s, prompt_len, output_len, request_rate, n_prompts,
                               client_cap=min(concurrency, n_prompts), server_cap=max(1, min(caps.values())),
                               cap_text=cap_text)
        conc = open_loop.running
    elif conc < concurrency:
        why = {"max_num_seqs": f"{seqs_flag} {s.max_seqs}",
               "kv": f"the KV cache ({plan.kv_cache_tokens:,} tokens hold {kv_cap} requests of {total_len} tokens)",
               "budget": (f"the prefill token budget: vLLM schedules the running requests first and gives waiting "
                          f"prompts what is left of max_num_batched_tokens ({s.chunk:,} tokens per step"
                          + (f", in each of the {plan.pp} pipeline micro-batches in flight" if plan.pp > 1 else "")
                          + f"), and {budget_cap} decoding requests with {prompt_len:,}-token prompts and "
                          f"{output_len:,}-token outputs fill it ({s.chunk:,}"
                          + (f" x {plan.pp}" if plan.pp > 1 else "")
                          + " x (output_len - 1) / (prompt_len + output_len - 1)); a larger "
                          f"--max-num-batched-tokens admits more, at a longer step")}[binding]
        warnings.append(f"only {conc} of {concurrency} requests run at once, limited by {why}; the rest queue "
                        "(their mean wait is in TTFT)")
    sources["effective_concurrency"] = (
        "min(concurrency, max_num_seqs, kv_cache_tokens // (prompt_len + output_len), and for vLLM the decoding "
        "requests a full prefill token budget sustains, max_num_batched_tokens x pipeline_parallel_size x (output_len - "
        "1) / (prompt_len + output_len - 1): vllm/v1/core/sched/scheduler.py Scheduler.schedule serves the RUNNING "
        "requests first, then the WAITING ones from the token_budget left; with PP, max_concurrent_batches = pp "
        "micro-batches are in flight, each with its own budget: vllm/config/vllm.py, v1/engine/core.py "
        "step_with_batch_queue)")

    ctx = prompt_len + output_len // 2
    base = _at(s, prompt_len, output_len, conc)
    wave_arrival = arrival
    if open_loop is not None:
        if open_loop.saturated and open_loop.client_cap <= open_loop.server_cap:
            # the client's --max-concurrency holds the rest back and releases one as one finishes: a closed loop of
            # that many, as the benchmark then runs it (waves included)
            wave_arrival = "closed"
        else:
            # a Poisson arrival finds the server busy with chance min(1, L) (L in flight: arrivals see time averages)
            # and waits for the step in progress (half a step on average), then rides in the next one: vLLM schedules
            # a waiting prompt at the start of a step, with the running requests' decode in it (v1/core/sched/
            # scheduler.py), so that step lasts a decode step more; SGLang runs it as a prefill batch of its own after
            # the decode batch in progress (scheduler.py get_next_batch_to_run)
            # a step lasts a TPOT on average (each yields one token per running request; the prompts it carries
            # lengthen it, which TPOT includes)
            base.ttft += open_loop.busy_wait_ms
            sources["ttft_ms.open_loop"] = (
                f"a Poisson arrival finds the server busy with chance min(1, L) and then waits {open_loop.ride:g} x the "
                f"mean step, the TPOT: {open_loop.busy_wait_ms:.3g} ms here; half the step in progress"
                + (", then the step its prompt rides in (vLLM mixes it into the running requests' decode step)"
                   if hw.eff.mixed_prefill else " (SGLang then runs the prompt as a prefill batch of its own)"))
    steady_ttft = base.ttft
    if conc > 1:
        # burst: the first wave's prompts arrive together; a closed loop's first wave does too, and with fixed
        # lengths its later ones (wave_share). The scheduler packs a wave's prompts into steps of the token budget,
        # each request's first token at the end of the step that holds its prompt's last token (wave_ttft_ms)
        wave = max(steady_ttft, wave_ttft_ms(s, base.prefill, conc, prompt_len))
        # Poisson arrivals come one by one: no wave
        if wave_arrival == "burst":
            share, share_why = 1.0, "a burst: every request is in the wave"
        elif wave_arrival == "poisson":
            share, share_why = 0.0, "Poisson arrivals come one by one: no wave"
        else:
            share, share_why = wave_share(hw.eff, random_range_ratio)
        base.ttft = share * wave + (1 - share) * steady_ttft
        sources["ttft_ms.wave"] = (f"wave of {conc} prompts: mean TTFT {wave:.3g} ms without the API server's part "
                                   f"(steady {steady_ttft:.3g} ms); share of the requests in waves {share:.3g}: "
                                   f"{share_why}")
    base.ttft += hw.eff.ttft_fixed_ms
    base.tps = closed_loop_tokens_per_s(conc, output_len, base.ttft, base.tpot)
    queue_ms = 0.0
    if open_loop is not None:
        queue_ms = open_loop.apply(base, output_len, warnings, sources)
    elif concurrency > conc:
        lifetime = base.ttft + (output_len - 1) * base.tpot
        q = concurrency / conc - 1
        queue_ms = (q / 2 if arrival == "burst" else q) * lifetime
        base.ttft += queue_ms
        sources["ttft_ms.queue"] = ("mean queue wait (C/M - 1) x request lifetime (closed loop, Little's law) or half "
                                    "of it (burst of C requests), M = requests running at once")
    sources.update({
        "decode_step_ms": ("memory = weights + KV bytes / (bandwidth x eff), compute = FLOPs / (peak x eff) (routed "
                           "experts at moe_compute), combined as (mem^p + comp^p)^(1/p) (p = overlap_p; 0 = max) + TP "
                           "all-reduces + step overhead + layers x layer_us (or, where the runtime counts each layer's "
                           "kernels, layers x kernels x kernel_us: see decode.kernels), at the mean context prompt_len + "
                           "output_len/2"),
        "itl_ms": ("TPOT = decode step + (C-1) x prefill stall / (output_len - 1) (closed loop of C requests); the stall "
                   "is what a prompt's chunks add to the decode steps they ride in"),
        "ttft_ms": ("chunked prefill x (1 + rho/2) (rho = chance another prefill is running), blended by the wave "
                    "share (ttft_ms.wave) with a wave of C prompts arriving together, each waiting for the step that "
                    "finishes its prompt, + the API server's ttft_fixed_ms"),
        "output_tokens_per_s": "C x output_len / (TTFT + (output_len - 1) x TPOT)",
        "efficiency_label": f"{hw.eff.label}: {hw.eff.source}",
    })
    if s.target.layer_kernels and hw.eff.kernel_us is not None:
        sources["decode.kernels"] = (f"{plan.kernels_note}; x {hw.eff.kernel_us:g} us per kernel"
                                     + (f", + {hw.eff.triton_iter_us:g} us per triton split-KV tile per layer"
                                        if s.target.triton_layers and hw.eff.triton_iter_us else ""))
    if hw.eff.prefill_launch_us and s.target.layer_kernels:
        mc = s.target
        dense = mc.dense_prefill(hw.eff)
        eager_us, graphed_us = mc.prefill_kernel_us(hw.eff)
        graphed = (f"{graphed_us:g} us each (a dense model: its public before/after runs lost the whole launch time)"
                   if dense else f"{graphed_us:g} us each (an MoE model: fitted on Kimi-K2's public piecewise runs)")
        sources["prefill.launch"] = (
            f"an eager prefill pass takes at least layers x kernels x {eager_us:g} us "
            + ("(a model without experts: its three public runs)" if dense else
               "(fitted on SGLang 0.5.6-0.5.7 runs of MoE models, which graph only decode, target-verify and idle "
               "batches)")
            + (f"; here passes of up to {mc.prefill_graph_max_tokens:,} tokens replay piecewise CUDA graphs (on by "
               f"default from SGLang 0.5.10) and launch only {mc.graph_split_ops_per_layer:g} split op(s) per layer "
               "eagerly (attention, the all-reduces: the registered split ops), each assumed at the eager cost; the "
               f"graphed kernels take {graphed} (perf.SGLANG_PREFILL_GRAPH_KERNEL_US)"
               if mc.prefill_graph_max_tokens else "")
            + (f"; decode batches above {mc.decode_graph_max_bs} requests (--cuda-graph-max-bs) run eagerly at that "
               "launch cost (assumed)" if mc.decode_graph_max_bs is not None else ""))
    if not hw.eff.mixed_prefill:
        sources["itl_ms"] = ("TPOT = decode step + the prefill passes that pause it: a step is followed by one with chance "
                             "1 - exp(-a), a = (C-1) / (output_len - 1) prompts arriving per step, which batches a / "
                             "chance prompts (SGLang runs waiting prompts as their own batch, no mixed chunk by default)")
    if s.target.num_experts:
        sources["decode.experts_touched"] = ("E x (1 - (1 - topk/E)^tokens): uniform routing, topk distinct experts "
                                             "per token")
    if hw.eff.label == "assumed":
        warnings.append(f"efficiency on {s.gpu.name} with {runtime} is assumed, not calibrated: treat the times as "
                        "+/-30 % or more until a validation run on this hardware refines them")
    amd = efficiency_class(s.gpu) == AMD_INSTINCT
    if amd and hw.eff.label != "calibrated":
        warnings.append(AMD_PREFILL_WARNING)
    if runtime == "sglang" and conc > 1 and hw.eff.label != "calibrated":
        warnings.append(SGLANG_LOAD_TTFT_WARNING)
    precision = (PRECISION_AMD if amd and hw.eff.label == "fitted"
                 else PRECISION.get(hw.eff.label, PRECISION["assumed"]))
    mla_extra = None  # (low, high) ms more per target pass with the public MLA runs' per-layer time
    # no MLA model among the runs vLLM's row was fitted on (SGLang's kernel terms were fitted with DeepSeek-R1 and
    # GLM-4.7-Flash among them)
    if s.arch.kv_lora_rank and hw.eff.label == "fitted" and hw.eff.kernel_us is None:
        warnings.append(MLA_FIT_WARNING.format(layer_us=hw.eff.layer_us))
        # the fitted precision does not hold outside the fitted data: a best case, with the TPOT the public MLA runs'
        # per-layer time would give (the layers x (107..163 - layer_us) us more per step)
        lo, hi = (s.target.allreduce_layers * max(0.0, u - hw.eff.layer_us) * 1e-3 for u in MLA_LAYER_US)
        mla_extra = (lo, hi)
        precision = (f"a best case for MLA attention (outside the fitted runs): with the {MLA_LAYER_US[0]:g}-"
                     f"{MLA_LAYER_US[1]:g} us per layer SGLang's "
                     f"public MLA runs took, the TPOT without speculation would be {base.tpot + lo:.3g}-"
                     f"{base.tpot + hi:.3g} ms, not {base.tpot:.3g} (see the note)")

    spec_result = None
    acc = None
    if plan.spec_method is not None:
        spec_result, acc = _speculation(s, plan.spec_method, plan.spec_k, prompt_len, output_len, conc, ctx, base,
                                        acceptance_rate, acceptance_length, workload, temperature, warnings, sources,
                                        queue_ms=queue_ms, kv_cap=caps["kv"], seqs_flag=seqs_flag)
        if open_loop is not None and spec_result is not None and spec_result.itl_ms is not None:
            if not open_loop.saturated:
                _spec_open_loop(s, open_loop, spec_result, acc, base, prompt_len, output_len, ctx, warnings, sources)
            # the same arrivals served by the speculative server: its shorter request lifetime completes the run sooner
            # only where the plain one could not keep up with the rate
            life = spec_result.ttft_ms - queue_ms + (output_len - 1) * spec_result.itl_ms
            spec_result.output_tokens_per_s = round(open_loop.tokens_per_s(life, output_len), 1)
        if budget_cap is not None:
            # the drafts take budget too: the speculative run is budget-bound from fewer clients than the plain one
            al = spec_result.mean_acceptance_length if spec_result is not None else None
            spec_cap = prefill_budget_cap(s, prompt_len, output_len, spec_k=plan.spec_k,
                                          acceptance_length=al or 1.0)
            if spec_cap is not None and spec_cap < conc:
                at = (f"(mean acceptance length {al:.2f})" if al else
                      "at most (the acceptance is unknown: the more drafts are accepted, the fewer)")
                warnings.append("speculation at a full prefill token budget is not modelled: each decoding request then "
                                f"takes up to {plan.spec_k + 1} of the budget's tokens per step (its drafts and the bonus "
                                f"token), so about {spec_cap} requests decode at once with it {at} where {conc} do "
                                f"without it; the speculative figures compare both at the same {conc} running requests "
                                "and are optimistic")

    itl_likely = None
    if mla_extra is not None:
        # the range the product holds more likely than its best case: the headline shows it (page, command, preview)
        lo, hi = mla_extra
        itl_likely = (round(base.tpot + lo, 3), round(base.tpot + hi, 3))
        text = (f"TPOT without speculation {_sig(itl_likely[0])}-{_sig(itl_likely[1])} ms more likely than the "
                f"best case {_sig(base.tpot)}: the {s.target.allreduce_layers} layers at the {MLA_LAYER_US[0]:g}-"
                f"{MLA_LAYER_US[1]:g} us per layer SGLang's public MLA runs took instead of the fitted "
                f"{hw.eff.layer_us:g} us, +{lo:.3g} to +{hi:.3g} ms per target pass (perf.MLA_LAYER_US)")
        if spec_result is not None and spec_result.itl_ms is not None and spec_result.mean_acceptance_length:
            al = spec_result.mean_acceptance_length
            spec_result.itl_ms_likely = (round(spec_result.itl_ms + lo / al, 3), round(spec_result.itl_ms + hi / al, 3))
            text += (f"; with speculation (the itl_ms given) {_sig(spec_result.itl_ms_likely[0])}-"
                     f"{_sig(spec_result.itl_ms_likely[1])} ms, not {_sig(spec_result.itl_ms)}: the same time more per "
                     f"verification pass, which yields {al:.2f} tokens (the mean acceptance length; the drafter's own "
                     "passes as modelled)")
        sources["itl_ms.mla_likely"] = text

    vs_context = []
    contexts = sorted({c for c in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288,
                                   1048576) if c <= plan.max_model_len} | {min(ctx, plan.max_model_len)})
    k = plan.spec_k
    for c in contexts:
        st = step_cost(s.target, hw, requests=conc, tokens_per_request=1, context=c)
        pre = prefill_cost(s.target, hw, prompt_len=c, chunk=s.chunk)
        point = CurvePoint(x=c, ttft_ms=round(pre.total_ms, 3), itl_ms=round(st.total_ms, 3),
                           output_tokens_per_s=round(conc / (st.total_ms / 1e3), 1), bound=st.bound)
        if spec_result and spec_result.mean_acceptance_length:
            sp = spec_step(s, plan.spec_method, requests=conc, context=c, k=k)
            point.itl_ms_spec = round(sp.total_ms / spec_result.mean_acceptance_length, 3)
            point.output_tokens_per_s_spec = round(conc / (point.itl_ms_spec / 1e3), 1)
        vs_context.append(point)
    vs_conc = []
    limit = max(1, min(caps.values()))
    for c in sorted({c for c in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) if c <= limit} | {conc}):
        pt = _at(s, prompt_len, output_len, c)
        point = CurvePoint(x=c, ttft_ms=round(pt.ttft, 3), itl_ms=round(pt.tpot, 3),
                           output_tokens_per_s=round(pt.tps, 1), bound=pt.step.bound)
        if spec_result and spec_result.mean_acceptance_length:
            sp = spec_step(s, plan.spec_method, requests=c, context=ctx, k=k)
            spt = _at(s, prompt_len, output_len, c, step_ms=sp.total_ms / spec_result.mean_acceptance_length)
            point.itl_ms_spec = round(spt.tpot, 3)
            point.output_tokens_per_s_spec = round(spt.tps, 1)
        vs_conc.append(point)

    return SpeedResult(
        model=plan.model, gpu=s.gpu.name, prompt_len=prompt_len, output_len=output_len, concurrency=concurrency,
        effective_concurrency=conc, mean_context=ctx, request_rate=request_rate,
        mean_in_flight=None if open_loop is None else round(open_loop.in_flight, 2),
        saturated=None if open_loop is None else open_loop.saturated,
        ttft_ms=round(base.ttft, 3), itl_ms=round(base.tpot, 3), itl_ms_likely=itl_likely,
        decode_step_ms=round(base.step.total_ms, 3), output_tokens_per_s=round(base.tps, 1), decode=base.step,
        prefill=base.prefill, compute_dtype=hw.compute_dtype, runtime=runtime, efficiency_label=hw.eff.label,
        efficiency_precision=precision,
        efficiency={k: v for k, v in asdict(hw.eff).items()}, spec=spec_result, vs_context=vs_context,
        vs_concurrency=vs_conc, sources=sources, warnings=warnings)


def _spec_open_loop(s: _Setup, plain: _OpenLoop, spec: "SpecResult", acc: Acceptance | None, base: _Point,
                    prompt_len: int, output_len: int, ctx: int, warnings: list[str], sources: dict[str, str]) -> None:
    """The speculative server under the same Poisson arrivals as the plain one (``plain``, not saturated): its requests
    live shorter, so fewer are in flight (Little's law, solved by :func:`_open_loop` with the speculative timing) and
    its TPOT, TTFT and speedup are those at that many running requests, against the plain server at its own
    (``base``, at ``plain.running``). Updates ``spec`` in place (``itl_ms``, ``ttft_ms``, ``speedup`` and its range,
    ``mean_in_flight``, and the slowdown stop signs in ``warnings``); the queue-free TTFT keeps the drafter's prefill
    the closed-loop figure carries."""
    al = spec.mean_acceptance_length
    method, k = spec.method, spec.num_speculative_tokens

    def at(n: int, length: float = al, scale: float = 1.0) -> _Point:
        return _spec_speedup(s, method, k, length, prompt_len, output_len, n, ctx, overhead_scale=scale)[3]

    loop = _open_loop(s, prompt_len, output_len, plain.rate, plain.prompts, client_cap=plain.client_cap,
                      server_cap=plain.server_cap, cap_text=plain.cap_text, point=at)
    spec.mean_in_flight = round(loop.in_flight, 2)
    sources["spec.open_loop"] = (
        "the speculative server under the same arrivals: L = R x its request lifetime (Little's law), its TPOT and "
        "TTFT at that many running requests; the speedup compares it with the plain server at the plain L")
    if loop.running == plain.running:
        return
    pt = at(loop.running)
    # the drafter's prefill of the prompt (the closed-loop TTFT's part beyond the plain server's) is kept
    draft_prefill = spec.ttft_ms - base.ttft
    spec.ttft_ms = round(pt.ttft + s.hw.eff.ttft_fixed_ms + loop.busy_wait_ms + draft_prefill, 3)
    spec.itl_ms = round(pt.tpot, 3)
    spec.speedup = round(base.tpot / pt.tpot, 3)
    if acc is not None and spec.speedup_low is not None and spec.speedup_high is not None:
        spec.speedup_low = round(base.tpot / at(loop.running, acc.low, 1.5).tpot, 3)
        spec.speedup_high = round(base.tpot / at(loop.running, acc.high, 0.5).tpot, 3)
    spec.slowdown = slowdown_level(spec.speedup, spec.speedup_low)
    warnings[:] = [w for w in warnings if not w.startswith(SLOWDOWN_PREFIXES)] + slowdown_warnings(
        al, spec.speedup, spec.speedup_low, spec.speedup_high)


def _replicas(plan: Plan, *, concurrency: int, **kw: Any) -> SpeedResult:
    """``plan.dp`` replicas sharing ``concurrency`` clients (see :func:`estimate_speed_plan`): ``C mod dp`` replicas
    serve ``C // dp + 1`` clients and the others ``C // dp``; TTFT, TPOT and the curves are those of the busiest
    replica, the output tok/s the sum of every replica's own."""
    dp = plan.dp
    low, extra = divmod(concurrency, dp)
    one = replace(plan, dp=1)
    res = estimate_speed_plan(one, concurrency=low + 1 if extra else low, **kw)
    rest = estimate_speed_plan(one, concurrency=low, **kw) if extra and low else None

    def total(busy: float | None, other: float | None) -> float | None:
        if busy is None:
            return None
        n_busy = extra if extra else dp
        return round(busy * n_busy + (other or 0.0) * ((dp - extra) if rest is not None else 0), 1)

    res.concurrency = concurrency
    if res.request_rate is not None:  # an open loop: the whole rate, and the requests in flight on every replica
        res.request_rate = round(res.request_rate * dp, 6)
        res.mean_in_flight = round((res.mean_in_flight or 0.0) * dp, 2)
    res.output_tokens_per_s = total(res.output_tokens_per_s, rest.output_tokens_per_s if rest else None)
    if res.spec is not None:
        res.spec.output_tokens_per_s = total(res.spec.output_tokens_per_s,
                                             rest.spec.output_tokens_per_s if rest and rest.spec else None)
    split = (f"{extra} of them at {low + 1} clients" + (f" and {dp - extra} at {low}" if low else "")
             if extra else f"each at {low} clients")
    res.sources["data_parallel"] = (f"{dp} data-parallel replicas, each with its own scheduler and KV cache, share "
                                    f"{concurrency} clients: {split}; output tok/s is the sum of the replicas' own; "
                                    "TTFT, TPOT and the curves are the busiest replica's")
    if plan.dp_lockstep:
        res.warnings.append("data-parallel ranks that step together (vLLM's DP with MoE layers, SGLang's DP attention) "
                            "are modelled here as independent replicas; the lockstep is not modelled, so these figures "
                            "are a best case")
    return res


SLOWDOWN_PREFIXES = ("stop sign: at acceptance length", "speculation may be slower than plain decoding")


def slowdown_level(speedup: float | None, lo: float | None) -> str | None:
    """``likely`` (the speedup is below 1), ``possible`` (only the low end of its range is) or ``unlikely``; None
    without a speedup."""
    if speedup is None:
        return None
    return "likely" if speedup < 1 else ("possible" if lo is not None and lo < 1 else "unlikely")


def slowdown_warnings(al: float | None, speedup: float | None, lo: float | None, hi: float | None) -> list[str]:
    """The field guide's slowdown stop sign for a speedup and its range (none when the low end is at least 1); the
    warnings start with one of :data:`SLOWDOWN_PREFIXES` (a caller that rescales the speedup replaces them). The
    figures are those the answer shows (rounded to 3 places first, as ``SpecResult`` holds them), so the stop sign
    never reads 0.55x beside an answer of 0.56x. Without a range (``lo`` / ``hi`` None: llama.cpp's draft model,
    which has none) the stop sign gives the speedup alone."""
    speedup, lo, hi = (_round(x, 3) for x in (speedup, lo, hi))
    if speedup is not None and speedup < 1:
        span = f", range {lo:.2f}-{hi:.2f}" if lo is not None and hi is not None else ""
        return [f"stop sign: at acceptance length {al:.2f} speculation is predicted slower than plain decoding "
                f"(speedup {speedup:.2f}x{span}); the drafting and verification cost more than the "
                "accepted tokens repay"]
    if speedup is not None and lo is not None and lo < 1:
        return [f"speculation may be slower than plain decoding: the low end of the range is {lo:.2f}x"]
    return []


def spec_knob(runtime: str, method: str) -> tuple[str, Callable[[int], int]]:
    """The runtime's own flag that sets the calculator's drafted tokens per step ``k``, and ``k`` as that flag's value:
    vLLM's ``num_speculative_tokens`` (k); SGLang's ``--speculative-num-steps`` (k, the chain's depth), except NGRAM,
    which reads only ``--speculative-num-draft-tokens`` (the root and its k proposals: k + 1; SGLang's NGRAM block
    defaults it to 12 and derives the steps from it, sglang/srt/arg_groups/speculative_hook.py:1314-1330 in 0.5.23,
    sglang/srt/server_args.py:3107-3112 in 0.5.10.post1; calculator/request.py sglang_speculative_config maps it)."""
    if runtime == "sglang" and method == "ngram":
        return "--speculative-num-draft-tokens", lambda j: j + 1
    if runtime == "sglang":
        return "--speculative-num-steps", lambda j: j
    return "num_speculative_tokens", lambda j: j


def _spec_speedup(s: _Setup, method: str, k: int, al: float, prompt_len: int, output_len: int, conc: int,
                  ctx: int, overhead_scale: float = 1.0) -> tuple[float, SpecStep, _Point, _Point]:
    """``(speedup, spec step, base point, spec point)`` at ``conc`` requests: TPOT without / with."""
    base = _at(s, prompt_len, output_len, conc)
    sp = spec_step(s, method, requests=conc, context=ctx, k=k, overhead_scale=overhead_scale)
    spt = _at(s, prompt_len, output_len, conc, step_ms=sp.total_ms / al, step=base.step)
    return base.tpot / spt.tpot, sp, base, spt


def _speculation(s: _Setup, method: str, k: int, prompt_len: int, output_len: int, conc: int, ctx: int,
                 base: _Point, acceptance_rate: float | None, acceptance_length_in: float | None,
                 workload: str | None, temperature: float | None, warnings: list[str],
                 sources: dict[str, str], queue_ms: float = 0.0, kv_cap: int | None = None,
                 seqs_flag: str = "--max-num-seqs") -> tuple[SpecResult, Acceptance | None]:
    """Speculation at ``conc`` running requests; ``queue_ms``: the plain run's mean queue wait in ``base.ttft`` (clients
    beyond ``conc``), which the throughput of the running requests excludes and which shrinks with the request
    lifetime (Little's law). ``kv_cap``: the requests the (speculative) plan's KV cache holds, ``seqs_flag``: the
    runtime's flag for max_num_seqs; with them the speedup-vs-concurrency curve ends at the speculative server's
    limit (:func:`spec_concurrency_limit`)."""
    sp = spec_step(s, method, requests=conc, context=ctx, k=k)
    cost_ratio = sp.total_ms / base.step.total_ms
    # a tree (SGLang topk > 1) accepts at most num_steps + 1 tokens per step: acceptance is that of its depth
    # (and at most num_draft_tokens - 1 drafted tokens besides the root: a narrow selection caps it too)
    depth = min(s.tree[0], k - 1) if s.tree else k
    be = break_even_acceptance_rate(cost_ratio, depth)
    acc = predict_acceptance(method, depth, workload=workload, temperature=temperature,
                             acceptance_rate=acceptance_rate, acceptance_length=acceptance_length_in,
                             target=s.plan.model, runtime=s.runtime, head=s.plan.spec_head)
    if s.tree and acc is not None and acc.label != "user input":
        warnings.append(f"SGLang draft tree ({s.tree[0]} steps x topk {s.tree[1]}, {k} draft tokens): the acceptance is "
                        f"the public figure of a chain as deep as the tree ({depth} tokens), about a lower bound (the "
                        "tree also verifies the runners-up); give --acceptance-length as SGLang logs it for this tree")
    typical = typical_figure(method, workload if normalize_workload(workload) == "repetitive" else None) \
        if acc is not None and acc.label != "user input" else None
    if acc is None:
        alpha_src = f"no public acceptance figure for {method}" + (f" on {workload}" if workload else "") + \
            ": give --acceptance-rate or --acceptance-length"
        warnings.append(f"no public acceptance figure for method {method}" + (f" on {workload}" if workload else "") +
                        "; give --acceptance-rate or --acceptance-length to predict the speedup (the break-even "
                        "rate is still shown)")
    else:
        alpha_src = acc.source
        warnings.extend(acc.notes)
    sources["acceptance_rate"] = alpha_src
    sources["mean_acceptance_length"] = ("1 + sum_i prod_{j<=i} a_j, a_j = alpha_1 x decay^(j-1) "
                                         "(calculator/engine/acceptance.py; Leviathan et al. 2023 when decay = 1)")
    sources["spec_step"] = (
        "verify: target pass over C x (k+1) tokens (roofline; MoE experts touched by all of them; all-reduces of "
        "(k+1)x the activations) + " + {
            "ngram": "ngram matching on the CPU (vllm/v1/spec_decode/ngram_proposer.py batch_propose: numba prange "
                     f"over the requests on max(1, (cpu_count // 2) // tp) threads, {NGRAM_CPU_THREADS} assumed), "
                     f"assumed {NGRAM_CPU_US_PER_REQUEST} us + {NGRAM_CPU_NS_PER_TOKEN} ns/token per request",
            "suffix": f"suffix-tree matching on the CPU, assumed {SUFFIX_CPU_US_PER_REQUEST} us per request",
            "draft_model": "k decode steps of the draft model (its weights, KV, all-reduces) + k x fixed pass cost",
            "eagle": "k passes of the EAGLE head (1 layer + fc 2h->h + target lm_head) + k x fixed pass cost",
            "eagle3": "k passes of the EAGLE-3 head (1 layer + fc 3h->h + draft-vocab lm_head) + k x fixed pass cost",
            "mtp": "k passes of one MTP module (+ shared lm_head) + k x fixed pass cost",
        }.get(method, "drafter passes") + " + rejection sampling (2 x C x k x vocab fp32) + the runtime's fixed "
        "per-speculative-step cost (vllm/v1/spec_decode/eagle.py:219, vllm/v1/sample/rejection_sampler.py)")
    sources["break_even_acceptance_rate"] = ("accepted / drafted tokens at which 1 + k x rate = t_spec_step / t_step "
                                             "(vLLM's 'Avg Draft acceptance rate')")
    if s.plan.draft_note:
        sources["draft"] = s.plan.draft_note
        warnings.append(s.plan.draft_note)
    sources["spec_speedup_range"] = ("low: acceptance low end and 1.5x the fixed/CPU costs; high: acceptance high end "
                                     "and 0.5x them")

    al = acc.length if acc is not None else None
    alpha = acc.rate if acc is not None else None
    itl = tps = speedup = lo = hi = None
    best_k = stop_conc = pays_from = None
    curves: dict[int, list[tuple[int, float]]] = {}
    spec_ttft = base.ttft - queue_ms  # the queue wait is added back below, scaled to the speculative lifetime
    if s.draft is not None:  # the draft model / EAGLE / MTP head runs over the prompt once too
        spec_ttft += prefill_cost(s.draft, s.hw, prompt_len=prompt_len, chunk=s.chunk).total_ms
    limit = limit_reason = None
    if acc is not None:
        limit, limit_reason = spec_concurrency_limit(
            s, prompt_len, output_len, kv_cap=kv_cap if kv_cap is not None else s.max_seqs, seqs_flag=seqs_flag,
            spec_k=k, acceptance_length=acc.length)
        # the curve ends at the server's limit: a concurrency it cannot run at once is no point of it (the requested
        # one is drawn when the server runs it)
        grid = sorted({c for c in (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
                       if c <= limit} | {limit} | ({conc} if conc <= limit else set()))
    if acc is not None:
        speedup, _, _, pt = _spec_speedup(s, method, k, al, prompt_len, output_len, conc, ctx)
        itl = pt.tpot
        tps = closed_loop_tokens_per_s(conc, output_len, spec_ttft, itl)
        if queue_ms:  # the clients beyond conc wait (C/M - 1) speculative lifetimes instead of plain ones
            base_life = base.ttft - queue_ms + (output_len - 1) * base.tpot
            spec_ttft += queue_ms * (spec_ttft + (output_len - 1) * itl) / base_life
        al_lo, al_hi = acc.low, acc.high
        lo = _spec_speedup(s, method, k, al_lo, prompt_len, output_len, conc, ctx, overhead_scale=1.5)[0]
        hi = _spec_speedup(s, method, k, al_hi, prompt_len, output_len, conc, ctx, overhead_scale=0.5)[0]
        if s.tree is None:  # chains: search k; a tree's shape is the user's (SGLang's three flags)
            best = []
            for kk in range(1, max(8, k) + 1):
                best.append((_spec_speedup(s, method, kk, acc.length_at(kk), prompt_len, output_len, conc, ctx)[0],
                             kk))
            best_k = max(best)[1]
            # no k pays: the fastest number of speculative tokens is none (the least slow k is not a recommendation)
            best_k = 0 if max(best)[0] < 1 else best_k
        for kk in sorted({1, 2, 3, 5, k, best_k} - {None, 0}) if s.tree is None else [k]:  # the best k is drawn too
            al_k = acc.length_at(kk) if kk != k else al
            curves[kk] = [(c, round(_spec_speedup(s, method, kk, al_k, prompt_len, output_len, c, ctx)[0], 4))
                          for c in grid]
        stop_conc, pays_from = stops_paying(curves[k])
        # the grid only brackets the crossing: find the concurrency itself (the last that pays / the first that pays)
        # between the grid points around it, so the answer does not move with the concurrency the user asked about
        pays = lambda c: _spec_speedup(s, method, k, al, prompt_len, output_len, c, ctx)[0] >= 1  # noqa: E731
        points = [c for c, _ in curves[k]]
        if stop_conc:  # pays at stop_conc (its rounded speedup may read 1.0 while it loses), loses at the next point
            a, b = stop_conc, points[points.index(stop_conc) + 1]
            if not pays(a):
                a = points[points.index(stop_conc) - 1] if points.index(stop_conc) else 0
            while b - a > 1:
                mid = (a + b) // 2
                a, b = (mid, b) if pays(mid) else (a, mid)
            stop_conc = a
        if pays_from and pays_from > 1:  # loses at the grid point before, pays at pays_from
            a, b = points[points.index(pays_from) - 1], pays_from
            while b - a > 1:
                mid = (a + b) // 2
                a, b = (a, mid) if pays(mid) else (mid, b)
            pays_from = b
    else:
        spec_ttft += queue_ms  # no acceptance figure: no speculative lifetime to scale the wait by
    curve = []  # speedup against the acceptance rate (accepted / drafted): AL = 1 + k x rate
    for i in range(0, 21):
        a = i / 20
        sp_tpot = sp.total_ms / (1 + k * a) + (base.tpot - base.step.total_ms)
        curve.append((a, round(base.tpot / sp_tpot, 4)))

    slowdown = slowdown_level(speedup, lo)
    # the field guide's stop signs
    warnings.extend(slowdown_warnings(al, speedup, lo, hi))
    if be is None:
        warnings.append("stop sign: speculation cannot pay at this concurrency even if every drafted token is "
                        "accepted (drafting + verification cost more than k+1 plain steps)")
    shape = f"with the tree ({k} draft tokens)" if s.tree else f"with k={k}"
    if limit is not None:
        sources["spec_stops_paying_above_concurrency"] = (
            "perf.stops_paying on the speedup-vs-concurrency curve (TPOT without / with speculation at the same running "
            "requests, the same acceptance, at 1, 2, 4, 8, ... concurrent requests), which ends at the most requests the "
            "speculative server runs at once, min(max_num_seqs, KV-cache requests, "
            + ("the prefill token budget with the drafts, " if s.runtime == "vllm" else "")
            + f"{MAX_MODELLED_CONCURRENCY} modelled) = {limit} here ({limit_reason}); the crossing is bisected between "
            "the grid points around it. A number: the last concurrency of a paying stretch that a losing one follows; "
            "0: it pays at none up to the limit; null: no paying stretch ends before the limit (it does not stop "
            "paying up to the server's limit)")
        sources["spec_pays_from_concurrency"] = (
            "perf.stops_paying on the same curve: the first concurrency of a paying stretch that a losing one precedes "
            f"(bisected between grid points), within the server's limit of {limit}; null when none does. Both set: "
            "below spec_stops_paying_above_concurrency it is a dip (pays, loses between them, pays again), above it "
            "a hump (pays only between them)")
    moe_why = (" (an MoE target: a plain step at low concurrency reads few experts, the verification many)"
               if s.target.num_experts else "")
    if stop_conc and pays_from and stop_conc < pays_from:  # a dip
        warnings.append(f"{shape} speculation stops paying above {stop_conc} concurrent requests, loses from "
                        f"{stop_conc + 1} to {pays_from - 1} and pays again from {pays_from}{moe_why}"
                        + (f"; it does not stop paying up to the server's limit of {limit} concurrent requests "
                           f"({limit_reason})" if limit is not None else ""))
    elif stop_conc and pays_from:  # a hump
        warnings.append(f"{shape} speculation loses below {pays_from} concurrent requests, pays from {pays_from} to "
                        f"{stop_conc} and stops paying above {stop_conc}{moe_why}")
    elif stop_conc is not None:
        warnings.append(f"{shape} speculation stops paying above {stop_conc} concurrent requests" if stop_conc
                        else f"{shape} speculation does not pay at any concurrency up to the server's limit of "
                        f"{limit} running requests ({limit_reason})")
    if stop_conc is None and limit is not None:
        warnings.append(f"{shape} speculation does not stop paying up to the server's limit of {limit} concurrent "
                        f"requests ({limit_reason}): more clients queue rather than run, so "
                        "spec_stops_paying_above_concurrency is null")
    if pays_from is not None and not stop_conc:
        warnings.append(f"{shape} speculation loses below {pays_from} concurrent requests and pays from there{moe_why}")
    knob, as_knob = spec_knob(s.runtime, method)
    if best_k == 0:
        warnings.append(f"no {knob} from {as_knob(1)} to {as_knob(max(8, k))} pays at concurrency {conc}: serving "
                        "without speculation is predicted faster (best num_speculative_tokens 0)")
    elif best_k is not None and best_k != k:
        warnings.append(f"{knob} {as_knob(best_k)} is predicted faster than {as_knob(k)} at concurrency {conc}")
    if sp.verify.bound == "compute" or base.step.bound == "compute":
        warnings.append(f"at concurrency {conc} the verification pass ({conc} x {k + 1} tokens) is compute-bound "
                        f"(it turns so above ~{verify_compute_bound_tokens(s):.0f} tokens on this "
                        f"{'CPU' if s.gpu.is_cpu else 'GPU'}): verifying k+1 "
                        "tokens costs about k+1 times a step, so speculation helps less (or hurts) at large batches")
    if s.target.num_experts and sp.verify.experts_touched > base.step.experts_touched * 1.2:
        warnings.append(f"MoE target: verifying {conc} x {k + 1} tokens touches {sp.verify.experts_touched:.0f} experts "
                        f"per layer against {base.step.experts_touched:.0f} for a plain step, so the verification "
                        "reads more weights and speculation gains less")
    if temperature is not None and temperature > 0.7:
        warnings.append(f"temperature {temperature} is high: drafts are rejected more often than in the public "
                        "figures (mostly temperature 0)")
    if acc is None or acc.label != "user input":  # a measured acceptance needs no reminder to measure it
        wl = normalize_workload(workload)
        warnings.append("acceptance falls on creative open-ended writing, hard reasoning and high-temperature "
                        "sampling; it is highest on code, boilerplate and formal prose: measure on your own traffic"
                        if wl is None else
                        f"the acceptance for '{wl}' comes from public benchmark prompts of that class (see the "
                        "acceptance source); your own traffic may differ: measure it")
    if spec_ttft > base.ttft * 1.10:
        warnings.append(f"stop sign: TTFT rises from {base.ttft:.1f} to {spec_ttft:.1f} ms (the drafter processes the "
                        "prompt too)")

    res = SpecResult(method=method, num_speculative_tokens=k, acceptance_rate=_round(alpha, 4),
                     acceptance_rate_source=alpha_src, mean_acceptance_length=_round(al, 3),
                     mean_acceptance_length_low=_round(acc.low if acc else None, 3),
                     mean_acceptance_length_high=_round(acc.high if acc else None, 3),
                     per_position_acceptance=[round(r, 4) for r in acc.rates] if acc else None,
                     draft_ms=round(sp.draft_gpu_ms + sp.draft_overhead_ms + sp.proposer_cpu_ms, 3), step=sp,
                     verify=sp.verify, ttft_ms=round(spec_ttft, 3), itl_ms=_round(itl, 3),
                     output_tokens_per_s=_round(tps, 1), speedup=_round(speedup, 3), speedup_low=_round(lo, 3),
                     speedup_high=_round(hi, 3), slowdown=slowdown, best_num_speculative_tokens=best_k,
                     stops_paying_above_concurrency=stop_conc, pays_from_concurrency=pays_from,
                     concurrency_limit=limit, concurrency_limit_reason=limit_reason,
                     speedup_vs_concurrency=curves,
                     verify_compute_bound_tokens=round(verify_compute_bound_tokens(s), 1),
                     break_even_acceptance_rate=_round(be, 4), cost_ratio=round(cost_ratio, 4),
                     speedup_curve=curve, typical=typical)
    return res, acc


def speed_fields(engine_input: EngineInput, estimate_result: EstimateResult | None, prompt_len: int,
                 output_len: int, concurrency: int, acceptance_rate: float | None = None, *,
                 workload: str | None = None, temperature: float | None = None,
                 acceptance_length: float | None = None, runtime: str = "vllm",
                 arrival: str = "closed", plan: Plan | None = None, speculative_num_steps: int | None = None,
                 speculative_eagle_topk: int = 1, request_rate: float | None = None,
                 num_prompts: int | None = None, random_range_ratio: float | None = None) -> dict[str, Any]:
    """The speed keys ``estimate --format json`` and ``/api/estimate`` merge into their JSON (``arrival``: as
    :func:`estimate_speed`; ``plan``: a :class:`Plan` to use instead of the memory engine's, e.g. with another
    runtime's KV capacity; ``speculative_num_steps`` / ``speculative_eagle_topk``: SGLang's draft tree, as
    :func:`estimate_speed`).

    Every key of :data:`SPEED_KEYS` is always there, ``null`` where it does not apply (the speculative keys without
    speculation, the open-loop keys without a request rate), so the answer's key set never depends on the outcome.

    ``ttft_ms``, ``itl_ms`` (mean time per output token, vllm bench serve's TPOT) and
    ``output_tokens_per_s`` (three significant digits: the fitted efficiency is good to ~5-15 %, an
    assumed one to ~30 %) describe one server, the one ``speed_with_speculation`` names: ``true``, the server with
    its ``--speculative-config`` (an acceptance figure is known or given); ``false``, the server without drafts,
    either because no speculation is set or because no acceptance figure is known for its method (``ngram`` without
    ``--acceptance-rate``: then ``spec_speedup`` is ``null`` and the break-even rate is the answer).
    ``efficiency_label`` says whether the efficiency behind them is ``assumed``, ``fitted`` or
    ``calibrated``. With speculation also ``acceptance_rate`` (accepted / drafted, vLLM's "Avg Draft acceptance
    rate"; its origin in ``speed_sources``), ``mean_acceptance_length``, ``spec_speedup`` (TPOT without /
    with) with ``spec_speedup_low``/``spec_speedup_high``, ``spec_slowdown`` (``likely``/``possible``/
    ``unlikely``), ``best_num_speculative_tokens`` at this concurrency (``0`` when no k from 1 to 8 pays there: serve
    without speculation; ``null`` for a tree, whose shape is the user's), ``spec_stops_paying_above_concurrency``
    (``0``: pays at no concurrency; ``null``: still pays at the most requests the speculative server runs at once,
    :func:`spec_concurrency_limit`, which a warning names; never a concurrency above that limit, for vLLM and SGLang
    alike), ``spec_pays_from_concurrency`` (set when it loses at concurrency 1 but pays higher up, as MoE targets can,
    within the same limit)
    and ``break_even_acceptance_rate`` (accepted / drafted tokens, as vLLM logs its "Avg Draft acceptance
    rate"); ``speed_sources`` and ``speed_warnings``. With ``request_rate`` (an open loop, :func:`estimate_speed`)
    also ``request_rate`` (requests/s), ``mean_in_flight`` (requests, Little's law) and ``saturated``.

    Raises:
        EngineInputError: see :func:`estimate_speed`.
    """
    r = estimate_speed_plan(plan if plan is not None else plan_from_engine(engine_input, estimate_result),
                            prompt_len=prompt_len, output_len=output_len, concurrency=concurrency,
                            acceptance_rate=acceptance_rate, workload=workload, temperature=temperature,
                            acceptance_length=acceptance_length, runtime=runtime, arrival=arrival,
                            speculative_num_steps=speculative_num_steps, speculative_eagle_topk=speculative_eagle_topk,
                            request_rate=request_rate, num_prompts=num_prompts,
                            random_range_ratio=random_range_ratio)
    return result_fields(r)


#: The speed keys of the JSON answer (:func:`result_fields`, vLLM and SGLang), each always present: ``null`` where it
#: does not apply, and every one of them ``null`` (with ``speed_error`` saying why) when there is no speed.
SPEED_KEYS = ("ttft_ms", "itl_ms", "output_tokens_per_s", "speed_with_speculation", "efficiency_label",
              "efficiency_precision", "request_rate", "mean_in_flight", "saturated", "acceptance_rate",
              "mean_acceptance_length", "spec_speedup", "spec_speedup_low", "spec_speedup_high", "spec_slowdown",
              "best_num_speculative_tokens", "spec_stops_paying_above_concurrency", "spec_pays_from_concurrency",
              "break_even_acceptance_rate", "speed_sources", "speed_warnings")


#: The significant digits of the JSON answer's ``ttft_ms``, ``itl_ms`` and ``output_tokens_per_s``.
PUBLISHED_DIGITS = 3


def published_speed(r: SpeedResult) -> dict[str, dict[str, float | None] | None]:
    """The TTFT / TPOT / output tok/s of a :class:`SpeedResult` as the answer publishes them (:data:`PUBLISHED_DIGITS`
    significant digits, :func:`calculator.engine.figures.round_sig`): ``{"plain": {"ttft_ms", "itl_ms",
    "output_tokens_per_s"}, "spec": {...} or None}`` (``spec``: the speculative server's, where its TPOT is predicted).
    The JSON's three keys are one of the two (:func:`result_fields`); the page shows both from here and the link
    preview from the JSON, so all three start from the same number and round it the same way."""
    keys = ("ttft_ms", "itl_ms", "output_tokens_per_s")

    def likely(x: tuple[float, float] | None) -> tuple[float, float] | None:
        return None if x is None else (round_sig(x[0], PUBLISHED_DIGITS), round_sig(x[1], PUBLISHED_DIGITS))

    plain = {k: round_sig(getattr(r, k), PUBLISHED_DIGITS) for k in keys}
    sp = r.spec
    spec = ({k: round_sig(getattr(sp, k), PUBLISHED_DIGITS) for k in keys}
            if sp is not None and sp.itl_ms is not None else None)
    plain["itl_ms_likely"] = likely(r.itl_ms_likely)
    if spec is not None:
        spec["itl_ms_likely"] = likely(sp.itl_ms_likely)
    return {"plain": plain, "spec": spec}


def result_fields(r: SpeedResult) -> dict[str, Any]:
    """The JSON speed keys of a :class:`SpeedResult`: every key of :data:`SPEED_KEYS` (see :func:`speed_fields`)."""
    out: dict[str, Any] = dict.fromkeys(SPEED_KEYS)
    figures = published_speed(r)
    headline = ("ttft_ms", "itl_ms", "output_tokens_per_s")  # the range is in speed_sources (itl_ms.mla_likely)
    out.update({k: figures["plain"][k] for k in headline}, speed_with_speculation=False, efficiency_label=r.efficiency_label,
               efficiency_precision=r.efficiency_precision)
    if r.request_rate is not None:
        out.update(request_rate=r.request_rate, mean_in_flight=r.mean_in_flight, saturated=r.saturated)
    if r.spec is not None:
        sp = r.spec
        # the three figures describe one server: the speculative one where its TPOT is predicted (an acceptance figure
        # is known or given), else the server without drafts (its TTFT alone would mix the two)
        if figures["spec"] is not None:
            out.update({k: figures["spec"][k] for k in headline})
            if sp.mean_in_flight is not None:  # an open loop: the speculative server's own Little's law
                out["mean_in_flight"] = sp.mean_in_flight
            out["speed_with_speculation"] = True
        out.update(acceptance_rate=None if sp.acceptance_rate is None else round(sp.acceptance_rate, 4),
                   mean_acceptance_length=sp.mean_acceptance_length, spec_speedup=sp.speedup,
                   spec_speedup_low=sp.speedup_low, spec_speedup_high=sp.speedup_high, spec_slowdown=sp.slowdown,
                   best_num_speculative_tokens=sp.best_num_speculative_tokens,
                   spec_stops_paying_above_concurrency=sp.stops_paying_above_concurrency,
                   spec_pays_from_concurrency=sp.pays_from_concurrency,
                   break_even_acceptance_rate=sp.break_even_acceptance_rate)
    out["speed_sources"] = r.sources
    out["speed_warnings"] = r.warnings
    return out


SpecResult.model_rebuild()
SpeedResult.model_rebuild()
