"""Decode and prefill speed of llama.cpp / Ollama, from the GGUF bytes each token reads on each device: one GPU
(Apple Metal or a consumer card), layers split over several GPUs (``-sm layer`` / ``-sm row``), layers or routed
experts left on the CPU (``-ngl`` below the layer count, ``--n-cpu-moe``), and speculative decoding with a draft
model (``llama-server --model-draft``).

The roofline is ``calculator.engine.perf``'s (its public ``ModelCost``, ``Hardware``, ``step_cost`` and
``prefill_cost``); only the cost terms are llama.cpp's own, read from the GGUF tensor table (the header, or the
table derived by :mod:`.quant_rules`) and the memory plan:

* a decode step reads every weight once, on the device that holds it (its stored GGUF bytes: the K-quant / IQ
  blocks as they are), except ``token_embd`` which feeds GET_ROWS (one row per token); a tied output reads the
  embedding again as the output matmul; routed experts (``*_exps``) are read for the experts the batch touches
  (perf's ``experts_touched``); plus the KV cache of the context, on the device of its layer (the plan's cache
  types, sliding-window layers capped at the window);
* **placement** as ``llama_model::load_tensors`` does it (vendor/llama.cpp/src/llama-model.cpp:1556-1613 of
  llama-cpp-python 0.3.36): the input layer always on the CPU; with ``-ngl N`` the *last* N units (layers, then
  the output layer) go to the GPUs (``i_gpu_start = max(n_layer_all + 1 - N, 0)``, :1589), the first ones stay on
  the CPU; over several GPUs layer ``il`` goes to the first GPU whose cumulative ``--tensor-split`` share exceeds
  ``(il - i_gpu_start) / act_gpu_layers`` (:1595, the default split is each GPU's free memory, :1557-1573: equal
  for identical GPUs). ``--n-cpu-moe N`` keeps the ``ffn_{up,down,gate}_exps`` of the first N layers in CPU
  memory (common/arg.cpp:2767-2775, ``--cpu-moe`` all of them, :2760-2764);
* **layer split** (``-sm layer``, the default): the GPUs run one after the other, so a decode step is the sum of
  each device's bytes over its own bandwidth, plus one copy of the activations (``n_embd`` x 4 B F32 per token)
  at every change of device along the layers (the scheduler's split inputs, ggml-backend.cpp), over PCIe;
* **row split** (``-sm row``): every layer matmul weight is split by rows over all GPUs
  (``ggml_backend_split_buffer_type``, llama-model.cpp:1139-1162) which read their share in parallel; the main
  GPU gathers each matmul's rows, one small transfer and synchronisation per matmul (ggml-cuda.cu
  ``ggml_cuda_op_mul_mat``), timed at the efficiency's ``allreduce_latency_us``;
* **CPU part**: layers / experts in CPU memory are read at the system RAM's bandwidth (``host_bandwidth_gbps``;
  default :data:`HOST_RAM_ASSUMED_GBPS`, dual-channel DDR5-5600, **assumed**) and taken as bandwidth-bound (no CPU
  FLOP/s in the catalog); an MoE layer whose experts stay on the CPU adds two activation copies per token (to the
  CPU and back). In a **prefill** ubatch of at least 32 tokens the GPU backend runs those matmuls itself and copies
  the CPU-resident weights over PCIe each ubatch (``offload_op``: ggml-cuda.cu:5651-5655, min batch 32 at :5825),
  so the CPU bytes cost PCIe time once per ubatch;
* **Apple Silicon** (the Metal build on an Apple row, :func:`unified_gpu`): there is no separate system RAM: the
  CPU's layers are in the same unified memory (llama.cpp's CPU device is the whole RAM, ggml-cpu.cpp:365-382), read
  by the CPU cores (Metal does not compute on CPU buffers, ggml-metal.cpp:753-761) at the chip's bandwidth from the
  catalog (what the Max / Ultra CPU clusters lose against it is not modelled); Metal's op offload (ggml-metal.cpp:
  774-780, batch >= 32, ggml-metal-device.m:1285) and the activations copy within that memory: half its bandwidth
  (each byte read and written) instead of PCIe;
* prefill runs ``-ub`` (n_ubatch: llama-server's 512, or what Ollama passes) tokens per pass, compute-bound: 2
  FLOPs per weight per token plus the attention pairs;
* **CUDA matmul kernels** (the CUDA backend on an NVIDIA GPU): each GGUF weight type's matmul runs the kernel
  ggml-cuda picks for the pass's token count (:mod:`.cuda_matmul`: MMVQ up to 8 tokens; above, a quantized type runs
  MMQ, int8 tensor-core MMA from Turing, dp4a on Pascal and on Volta below 64 tokens; F16 runs cuBLAS with FP16
  accumulate, BF16 with FP32 accumulate) and its FLOPs are priced at the catalog's rate for that unit (``tops_int8``,
  ``tflops_fp16_acc16``, ``tflops_bf16``); attention stays at the BF16 / FP16 figure. The activations' quantization
  to q8_1 before each MMQ (mmq.cu:208: 4 B read + 1.125 B written per activation value; about 3.0 GB for a 512-token
  Llama-2-7B ubatch: 2-8 % of its measured pp512 time on the scoreboard's GPUs at their full bandwidth, less where they
  stay in L2) is not priced apart: it is inside the compute efficiency, as the other element-wise ops are. Other
  backends (ROCm, Vulkan, Metal) price every matmul at the BF16 / FP16 figure;
* **speculative decoding with a draft model** (common/speculative.cpp, ``common_speculative_state_draft::draft``
  :308-412): each step the draft decodes the last token and then each drafted token but the last, one token per
  pass, so ``k`` drafted tokens cost ``k`` single-token draft passes (:330, :398; drafting stops early when the
  top candidate's probability is below ``--draft-p-min``, :366, not modelled: ``k`` = ``--spec-draft-n-max``); the target
  then verifies ``k + 1`` tokens in one batch (a decode step of ``k + 1`` tokens: the weights read once, the
  FLOPs ``k + 1`` times, which is where a low-FLOP/s GPU loses); the step yields the mean acceptance length ``AL``
  (1 + the accepted drafts) from the request's acceptance rate or :mod:`calculator.engine.acceptance`.

Bandwidth and dense TFLOP/s are the GPU catalog's (``calculator/data/gpus.json``, each row with its datasheet).
The efficiency (the share of bandwidth and FLOP/s llama.cpp reaches, its per-token, per-layer and per-transfer
overheads) is perf's llama.cpp row for the plan's backend (:func:`llamacpp_efficiency`): **fitted** for Metal on
llama.cpp's public llama-bench scoreboard (ggml-org/llama.cpp discussion #4167,
calculator/runtimes/llamacpp/data/llama_bench_public.json, benchmarks/llamacpp_bench_fit.py), **assumed** for CUDA
(the same script's fit on discussion #15013 is held back: see perf's EFFICIENCY comment) and the other backends
(Vulkan, ROCm, SYCL); the CPU's RAM part uses the GPU's row. The dequantization cost of each GGUF type is inside it,
not modelled separately (the Metal fit spans F16 / Q8_0 / Q4_0; the CUDA scoreboard is Q4_0 only).
CPU-only builds are not modelled (a CPU's FLOP/s are not in the catalog).

Units: milliseconds, bytes, GB/s (10^9 B/s), tokens per second.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from calculator.runtimes.llamacpp.cuda_matmul import MMQ_TYPES, mmq_datacenter
from calculator.runtimes.llamacpp.gguf_meta import GGUFMeta
from calculator.runtimes.llamacpp.memory import (CPU, SPLIT_MODES, LlamaCppPlan, NotModelled, Placement,  # noqa: F401
                                                 override_device, placement, swa_layers, tensor_layer)

SRC = "llama-cpp-python 0.3.36 vendor/llama.cpp/"
#: How llama-server queues a request when every slot is busy: ``get_available_slot`` finds none and the task is
#: deferred (tools/server/server-context.cpp:2379-2389, "no slot is available, defer task"); a slot that finishes
#: pops the first deferred task to the front of the queue (:1283-1285 ``callback_on_release`` ->
#: server-queue.cpp:90-110 ``pop_deferred_task``). The request waits, first come first served.
LLAMA_SERVER_QUEUE_SRC = (f"{SRC}tools/server/server-context.cpp:2379-2389 (no slot is available: the task is "
                          "deferred) and :1283-1285 with server-queue.cpp:90-110 (a released slot takes the first "
                          "deferred task)")

#: System RAM bandwidth used when the request gives none: dual-channel DDR5-5600 = 2 channels x 8 B x 5600 MT/s
#: (JEDEC DDR5 data rate; https://www.jedec.org/standards-documents/docs/jesd79-5c). **Assumed**, not measured.
HOST_RAM_ASSUMED_GBPS = 89.6
HOST_RAM_ASSUMED_SOURCE = ("assumed: dual-channel DDR5-5600 system RAM, 2 x 8 B x 5600 MT/s = 89.6 GB/s "
                           "(JEDEC JESD79-5); give host_bandwidth_gbps for the real machine")
#: Activations cross devices in F32 (ggml graphs keep hidden states in F32 between ops).
ACT_BYTES_F32 = 4
#: llama.cpp offloads a CPU-resident weight's matmul to the GPU for batches of at least this many tokens
#: (ggml-cuda.cu:5825, ``GGML_OP_OFFLOAD_MIN_BATCH``, default 32).
OP_OFFLOAD_MIN_BATCH = 32
_EXPS = re.compile(r"^blk\.(\d+)\.ffn_(up|down|gate)_exps\.")
#: Said on llama.cpp CUDA answers on the datacenter tensor-core parts (compute capability 8.0, 9.0, 10.x), whose INT8
#: rate per SM and clock is 2x (GA100), 4x (GH100) or more that of the GeForce / RTX boards: on llama.cpp's public CUDA
#: scoreboard (discussion #15013, Llama 2 7B Q4_0, -fa 1) the "*" row priced at the INT8 rate predicts pp512 2.5x the
#: measured rate on the A30 (7588 vs 3069 t/s), 2.7x on an A100 80 GB (14145 vs 5286, SXM4 row; PCIe 14090) and 3.4x on
#: an H100 (37850 vs 11263, SXM5 row; PCIe 2.6x), where its median |error| on the scoreboard's 19 other GPUs is 18 %
#: (benchmarks/llamacpp_bench_fit.py; the A100 / H100 rows are not in the fit: the scoreboard does not say SXM or PCIe).
#: Measured there (2 x 6.607e9 matmul parameters x pp512), MMQ reached 7.5-12 % of these parts' INT8 peak (H100 7.5 %
#: of the SXM5 figure, A100 11 %, A30 12 %) against 19-37 % on the GeForce / RTX / L40 / P40 boards (T4 13 %)
MMQ_DATACENTER_NOTE = (
    "llama.cpp's quantized prefill (MMQ) on datacenter tensor-core GPUs (A100 / A30 / H100 class, compute capability "
    "8.0 / 9.0) reached only 7.5-12 % of their INT8 peak on the public llama-bench scoreboard (ggml-org/llama.cpp "
    "discussion #15013), against 19-37 % on GeForce and RTX boards, so their INT8 rate is divided by 2.7 here, the "
    "median shortfall of the A30, A100 and H100 runs (fitted on those three: about +-30 %; "
    "cuda_matmul.MMQ_DATACENTER_SHORTFALL)")
#: The same for Blackwell datacenter parts (10.x), which no public run covers: priced at the full INT8 rate
MMQ_BLACKWELL_NOTE = (
    "llama.cpp's quantized prefill (MMQ) on Blackwell datacenter GPUs (compute capability 10.x): no public llama-bench "
    "run covers them, and on the older datacenter parts MMQ reached only 7.5-12 % of the INT8 peak (A30 / A100 / H100, "
    "ggml-org/llama.cpp discussion #15013): the TTFT here, at the full INT8 rate, is likely optimistic")


@dataclass(frozen=True)
class KVGroup:
    """One of llama.cpp's KV caches as perf's roofline reads it (the fields of perf's attention groups):
    ``kv_bytes_per_token`` over its layers, ``flops_per_pair`` = 2 x heads x (d_k + d_v) per layer summed over
    them (QK^T and PV), ``window`` the sliding window (None: the whole context)."""

    layers: int
    flops_per_pair: float
    kv_bytes_per_token: float
    window: int | None
    fixed_tokens: int | None = None


class LlamaCppSpeed(BaseModel):
    """Predicted speed. ``itl_ms`` is the time per output token at ``concurrency`` sequences (those running at
    once: at most the server's slots); ``ttft_ms`` the prompt's prefill plus one decode step, plus ``queue_ms``,
    the mean wait for a free slot of the ``clients`` requests beyond the slots (0 when they fit; None when no TTFT
    is known); ``output_tokens_per_s`` = C x O / (TTFT + (O - 1) x ITL) of the ``concurrency`` running slots (TTFT
    without the queue wait; :func:`calculator.engine.perf.closed_loop_tokens_per_s`, the vLLM / SGLang definition;
    None without a TTFT); ``bytes_per_token`` what one decode step reads (weights + KV).
    ``devices``: per device (``CPU``, ``GPU0``...) the bytes a decode step reads there and its time (ms);
    ``transfer_ms``: the activation copies between devices per decode step; ``spec``: the speculative part
    (:class:`SpecSpeed`) when a draft model is given."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    runtime: str
    gpu: str
    prompt_len: int
    output_len: int
    concurrency: int
    mean_context: int
    ttft_ms: float | None
    itl_ms: float
    decode_step_ms: float
    output_tokens_per_s: float | None
    weight_bytes_per_token: float
    kv_bytes_per_token_step: float
    decode: object
    prefill: object | None
    efficiency_label: str
    efficiency: dict
    sources: dict[str, str]
    notes: list[str]
    devices: dict[str, dict] = {}
    transfer_ms: float = 0.0
    spec: object | None = None
    clients: int = 1
    queue_ms: float | None = 0.0

    @property
    def assumption(self) -> str:
        return f"llama.cpp efficiency {self.efficiency_label}: {self.sources.get('efficiency', '')}"


def _dev_name(d: int) -> str:
    return "CPU" if d == CPU else f"GPU{d}"


def _device_costs(meta: GGUFMeta, plan: LlamaCppPlan, pl: Placement,
                  types_out: dict | None = None) -> dict[int, object]:
    """perf ``ModelCost`` of one decode pass per device (``CPU`` or a GPU index) from the GGUF tensors placed there
    and the KV caches of the layers placed there. With row split the layer matmul weights are shared over all
    GPUs by ``pl.shares``: each GPU's cost holds its share of them. ``types_out``, when given, receives per device
    the matmul parameters by ``(ggml type, routed expert)`` (all experts' parameters, not the active share)."""
    from calculator.engine.perf import ModelCost

    n_all = meta.n_layer_all
    if not meta.tensors:
        raise NotModelled("speed needs the GGUF tensor table (give gguf_file)", field="gguf_file")
    acc: dict[int, dict] = {}

    def slot(d: int) -> dict:
        return acc.setdefault(d, {"dense": 0.0, "experts": 0.0, "dense_p": 0.0, "expert_p": 0.0, "layers": set(),
                                  "kv": []})

    tied = meta.tensor("output.weight") is None
    overrides = [(re.compile(p), dv) for p, dv in plan.tensor_overrides]
    for il in range(n_all):
        slot(pl.layers[il])["layers"].add(il)
    for t in meta.tensors:
        unit = tensor_layer(t.name, n_all, meta)
        if t.name == "token_embd.weight":
            if tied:  # the output matmul reads the embedding (the tied copy, on the output's device)
                s = slot(pl.output)
                s["dense"] += t.n_bytes
                s["dense_p"] += t.n_elements
                if types_out is not None:
                    key = (t.ggml_type, False)
                    types_out.setdefault(pl.output, {})[key] = types_out.get(pl.output, {}).get(key, 0.0) + t.n_elements
            continue
        # other non-layer tensors (rope_freqs) are created in every layer's context, TENSOR_DUPLICATED
        # (llama-model.cpp, LLM_TENSOR_ROPE_FREQS): read with the layers, counted once on the first layer's device
        d = pl.layers[0] if unit == "input" else pl.device_of(unit)
        is_exp = "_exps." in t.name
        if is_exp and isinstance(unit, int) and unit in pl.expert_cpu_layers:
            d = CPU
        if overrides and unit != "input":  # -ot, e.g. what llama-server's --fit chose (memory.override_device)
            od = override_device(t.name, overrides)
            if od is not None:
                d = od
        matrix = len(t.shape) >= 2 and t.name.endswith(".weight")
        parts = [(d, 1.0)]
        if pl.split_mode == "row" and pl.n_gpus > 1 and d != CPU and isinstance(unit, int) and matrix and not is_exp:
            parts = [(g, share) for g, share in enumerate(pl.shares)]
        for dd, share in parts:
            s = slot(dd)
            if is_exp:
                s["experts"] += t.n_bytes * share
                s["expert_p"] += (t.n_elements if t.name.endswith(".weight") else 0) * share
            else:
                s["dense"] += t.n_bytes * share
                if matrix:
                    s["dense_p"] += t.n_elements * share
            if types_out is not None and ((is_exp and t.name.endswith(".weight")) or (not is_exp and matrix)):
                per = types_out.setdefault(dd, {})
                per[(t.ggml_type, is_exp)] = per.get((t.ggml_type, is_exp), 0.0) + t.n_elements * share
    flags, n_swa, _ = swa_layers(meta)
    for c in plan.kv_caches:
        if not c.layers:
            continue
        per_layer = [(k + v) / max(1, c.cells * c.n_stream) for k, v in zip(c.per_layer_k_bytes, c.per_layer_v_bytes)]
        by_dev: dict[int, list[int]] = {}
        for i, il in enumerate(c.layers):
            # with --no-kv-offload the cache stays in CPU memory (llama-kv-cache.cpp: offload ? layer's device : CPU)
            by_dev.setdefault(pl.layers[il] if plan_offload_kqv(plan) else CPU, []).append(i)
        for d, idx in by_dev.items():
            pair = sum(2 * meta.n_head[c.layers[i]] * ((meta.head_dim_k_swa or meta.head_dim_k or 0)
                                                       if flags[c.layers[i]] else (meta.head_dim_k or 0)) * 2
                       for i in idx)
            per_token = sum(per_layer[i] for i in idx) if len(per_layer) == len(c.layers) else \
                c.total_bytes / max(1, c.cells * c.n_stream) * len(idx) / len(c.layers)
            slot(d)["kv"].append(KVGroup(layers=len(idx), flops_per_pair=pair, kv_bytes_per_token=per_token,
                                         window=n_swa if c.name == "SWA" else None))
    n_exp, topk = meta.n_expert, meta.n_expert_used
    out = {}
    for d, s in acc.items():
        active = s["expert_p"] * topk / n_exp if n_exp else 0.0
        out[d] = ModelCost(dense_bytes=s["dense"], expert_bytes=s["experts"],
                           num_experts=n_exp if s["experts"] else 0, topk=topk if s["experts"] else 0,
                           matmul_params=s["dense_p"] + active, attn=tuple(s["kv"]), state_bytes=0.0,
                           hidden=meta.n_embd, allreduce_layers=len(s["layers"]), tp=1, pp=1,
                           expert_matmul_params=active)
    return out


def plan_offload_kqv(plan: LlamaCppPlan) -> bool:
    """Whether the plan keeps the KV cache with its layer (``--no-kv-offload`` not given): a cache buffer on a
    GPU device says so; a plan with no GPU KV buffer keeps it on the CPU."""
    bufs = [dev for c in plan.kv_caches for dev in c.buffers]
    return not bufs or any(not b.startswith("CPU") for b in bufs)


def cost_terms(meta: GGUFMeta, plan: LlamaCppPlan):
    """perf ``ModelCost`` of one decode pass with every layer on the plan's one GPU (the single-device case of
    :func:`_device_costs`). Raises ``NotModelled`` when layers or the output stay on the CPU."""
    if plan.device == "CPU":
        raise NotModelled("speed on a CPU-only build is not modelled (a CPU's FLOP/s are not in the catalog)",
                          field="gpu")
    if len(plan.layers_on_gpu) < meta.n_layer_all or not plan.output_on_gpu:
        raise NotModelled("cost_terms is the all-on-one-GPU case; layers on the CPU: use speed()", field="n_gpu_layers")
    costs = _device_costs(meta, plan, placement(meta.n_layer_all, -1))
    return costs[0]


def llamacpp_efficiency(gpu, backend: str | None):
    """perf's efficiency row for llama.cpp on ``gpu`` run by ``backend`` (the plan's device: ``CUDA``, ``Metal``,
    ``Vulkan``, ``ROCm``): a measured override or a per-GPU row first, then the backend's row (``fitted`` for
    ``Metal`` on the public llama-bench scoreboard, see perf's ``backend:`` rows), else the ``*`` row (assumed)."""
    from calculator.engine.perf import get_efficiency

    return get_efficiency(gpu.name, "llama.cpp", backend=backend)


def _hardware(gpu, backend: str | None = None, efficiency=None):
    """perf ``Hardware`` for a catalog GPU run by ``backend`` with llama.cpp's efficiency row for that backend
    (:func:`llamacpp_efficiency`) or the given ``efficiency``; a GPU without TFLOP/s (Apple M3 / M4) gets infinite
    FLOP/s (decode bandwidth-bound, no TTFT)."""
    from dataclasses import replace

    from calculator.engine.perf import Hardware, hardware

    if gpu.bandwidth_gbps is None:
        raise NotModelled(f"{gpu.name}: no memory bandwidth in the catalog, so the speed is not modelled", field="gpu")
    eff = efficiency if efficiency is not None else llamacpp_efficiency(gpu, backend)
    if gpu.tflops_bf16 is None:
        return Hardware(bandwidth=gpu.bandwidth_gbps * 1e9, peak_flops=math.inf, link=1.0, eff=eff,
                        compute_dtype="not modelled", sources={
                            "bandwidth": f"{gpu.bandwidth_gbps:g} GB/s, {gpu.spec_source}",
                            "tflops": f"{gpu.name}: no published TFLOP/s; compute not modelled (decode taken as "
                                      "bandwidth-bound, no TTFT)", "efficiency": eff.source})
    hw = hardware(gpu, None, runtime="llama.cpp")
    # perf's hardware() takes the GPU's row and relabels a fit made on NVIDIA data for other vendors; llama.cpp's
    # rows are per backend (the Metal row is fitted on Apple's own table), so the backend's row is used as it is
    return replace(hw, eff=eff, sources={**hw.sources, "efficiency": eff.source})


def unified_gpu(gpu, device: str) -> bool:
    """Whether the plan's GPU shares its memory with the CPU: llama.cpp's Metal build on an Apple Silicon row (the
    CPU's layers then read the same unified memory, and copies between the devices stay in it)."""
    return device == "Metal" and getattr(gpu, "vendor", None) == "apple" and gpu.bandwidth_gbps is not None


def unified_sources(gpu) -> tuple[str, str]:
    """(the CPU part's bandwidth source, the copies' link source) on an Apple Silicon Mac."""
    bw = gpu.bandwidth_gbps
    return ((f"the Mac's unified memory, {bw:g} GB/s ({gpu.spec_source}): the CPU cores read the same memory as the "
             "GPU (no separate system RAM); the CPU clusters of Pro / Max / Ultra chips reach less than the chip's "
             "figure, which is not modelled"),
            (f"copies within the unified memory (no PCIe): each byte read and written, half of {bw:g} GB/s = "
             f"{bw / 2:g} GB/s"))


def _host_hardware(gpu_hw, host_bandwidth_gbps: float | None, default_source: str | None = None):
    """The CPU's part: system RAM bandwidth (given, or the assumed default; ``default_source`` says where a default
    other than :data:`HOST_RAM_ASSUMED_GBPS` came from), FLOP/s not modelled (bandwidth-bound), the GPU's efficiency
    row."""
    from calculator.engine.perf import Hardware

    bw = HOST_RAM_ASSUMED_GBPS if host_bandwidth_gbps is None else host_bandwidth_gbps
    if bw <= 0:
        raise ValueError(f"host_bandwidth_gbps must be > 0, not {bw}")
    src = HOST_RAM_ASSUMED_SOURCE if host_bandwidth_gbps is None else (
        default_source or f"{bw:g} GB/s system RAM (given)")
    return Hardware(bandwidth=bw * 1e9, peak_flops=math.inf, link=gpu_hw.link, eff=gpu_hw.eff,
                    compute_dtype="not modelled", sources={"host_bandwidth": src})


@dataclass
class _Pass:
    total_ms: float
    per_device: dict[int, object]
    transfer_ms: float
    overhead_ms: float
    bytes_weights: float
    bytes_kv: float
    flops: float
    bound: str


def _pass(costs: dict[int, object], pl: Placement, hws: dict[int, object], *, requests: int, tokens_per_request: int,
          context: int, link_bps: float, hidden: int, n_layer_all: int) -> _Pass:
    """One decode / verify pass: the devices in sequence (layer split), each ``step_cost`` without the step
    overhead, plus activation copies at every change of device and, with row split, one gather per split matmul;
    the step overhead once."""
    from calculator.engine.perf import step_cost

    tokens = requests * tokens_per_request
    eff = next(iter(hws.values())).eff
    per = {d: step_cost(mc, hws[d], requests=requests, tokens_per_request=tokens_per_request, context=context,
                        overhead=False) for d, mc in costs.items()}
    if pl.split_mode == "row" and pl.n_gpus > 1:
        # the GPUs read their row shares in parallel: the slowest share sets the time (per layer, so the sum over
        # layers of the per-layer max; equal shares on identical GPUs make it the max of the totals)
        gpu_ms = max(per[d].total_ms - per[d].overhead_ms for d in per if d != CPU)
        layer_ms = sum(per[d].overhead_ms for d in per if d != CPU)  # layer_us of every layer, once each
        dev_ms = gpu_ms + layer_ms + sum(per[d].total_ms for d in per if d == CPU)
    else:
        dev_ms = sum(p.total_ms for p in per.values())
    # activation copies: each change of device along input -> layers -> output (the input embedding row is
    # looked up on the CPU: llama-model.cpp:1603-1605)
    seq = pl.sequence
    hops = sum(1 for a, b in zip(seq, seq[1:]) if a != b)
    hops += 2 * sum(1 for il in pl.expert_cpu_layers if pl.layers[il] != CPU)  # experts on the CPU: there and back
    copy_s = tokens * hidden * ACT_BYTES_F32 / link_bps + eff.allreduce_latency_us * 1e-6
    xfer = hops * copy_s
    if pl.split_mode == "row" and pl.n_gpus > 1:
        n_split = sum(1 for d in pl.layers if d != CPU) * _MATMULS_PER_LAYER
        xfer += n_split * eff.allreduce_latency_us * 1e-6
    ovh_ms = eff.step_overhead_ms
    total = dev_ms + xfer * 1e3 + ovh_ms
    mem = sum(p.memory_ms for p in per.values())
    comp = sum(p.compute_ms for p in per.values())
    return _Pass(total_ms=total, per_device=per, transfer_ms=xfer * 1e3, overhead_ms=ovh_ms,
                 bytes_weights=sum(p.bytes_weights for p in per.values()),
                 bytes_kv=sum(p.bytes_kv for p in per.values()), flops=sum(p.flops for p in per.values()),
                 bound="memory" if mem >= comp else "compute")


#: matmuls per layer that a row split gathers (attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down)
_MATMULS_PER_LAYER = 7


def _decode_view(p: _Pass):
    """A perf ``StepCost``-shaped summary of a multi-device pass (what ``LlamaCppSpeed.decode`` has held)."""
    from calculator.engine.perf import StepCost

    per = list(p.per_device.values())
    return StepCost(tokens=per[0].tokens, bytes_weights=p.bytes_weights, bytes_kv=p.bytes_kv, flops=p.flops,
                    experts_touched=max(x.experts_touched for x in per),
                    memory_ms=sum(x.memory_ms for x in per), compute_ms=sum(x.compute_ms for x in per),
                    comm_ms=p.transfer_ms, overhead_ms=p.overhead_ms + sum(x.overhead_ms for x in per),
                    total_ms=p.total_ms, bound=p.bound)


@dataclass
class _Setup:
    meta: GGUFMeta
    plan: LlamaCppPlan
    pl: Placement
    costs: dict
    hws: dict
    link_bps: float
    sources: dict
    notes: list
    gpu: object = None
    mm_types: dict | None = None  # per device: {(ggml type, routed expert): matmul params}, for the CUDA rule
    cuda_cc: tuple[int, int] | None = None  # NVIDIA compute capability when the plan runs llama.cpp's CUDA backend
    _at: dict | None = None  # tokens -> (costs, real matmul params per device, paths used)


class _NoRate(Exception):
    """A matmul path whose peak rate the catalog row lacks (a custom GPU without ``int8<TOPS>``)."""


def _setup(meta: GGUFMeta, plan: LlamaCppPlan, gpu, *, n_gpus: int, split_mode: str,
           tensor_split: list[float] | None, n_cpu_moe: int, host_bandwidth_gbps: float | None,
           pcie_gbps: float | None, efficiency=None) -> _Setup:
    from calculator.engine.perf import PCIE_GEN4

    if plan.device == "CPU":
        raise NotModelled("speed on a CPU-only build is not modelled (a CPU's FLOP/s are not in the catalog)",
                          field="gpu")
    n_all = meta.n_layer_all
    same_layout = n_gpus == plan.n_gpus and split_mode == plan.split_mode
    pl = placement(n_all, plan.n_gpu_layers, n_gpus=n_gpus, tensor_split=tensor_split, split_mode=split_mode,
                   n_cpu_moe=n_cpu_moe, main_gpu=plan.main_gpu if same_layout else 0)
    on_gpu = [il for il in range(n_all) if pl.layers[il] != CPU]
    if n_gpus == 1 and (on_gpu != list(plan.layers_on_gpu) or (pl.output != CPU) != plan.output_on_gpu):
        raise NotModelled("the memory plan places layers differently from llama-model.cpp:1589-1613 as read here",
                          field="n_gpu_layers")
    if same_layout and plan.layer_devices and (list(pl.layers) != list(plan.layer_devices)
                                               or pl.output != plan.output_device):
        raise NotModelled("the memory plan and the speed model place layers differently (give the same -ts)",
                          field="tensor_split")
    mm_types: dict = {}
    costs = _device_costs(meta, plan, pl, mm_types)
    gpu_hw = _hardware(gpu, plan.device, efficiency)
    cc = gpu.capability_tuple if plan.device == "CUDA" and getattr(gpu, "vendor", None) in ("nvidia", "unknown") \
        else None
    hws = {d: gpu_hw for d in costs if d != CPU}
    notes, sources = [], dict(gpu_hw.sources)
    # an Apple Silicon Mac: the CPU's layers read the unified memory at the chip's bandwidth, copies stay in it
    unified = unified_gpu(gpu, plan.device)
    host_src = None
    if unified and host_bandwidth_gbps is None:
        host_bandwidth_gbps, host_src = gpu.bandwidth_gbps, unified_sources(gpu)[0]
    if CPU in costs and (costs[CPU].dense_bytes or costs[CPU].expert_bytes):
        hws[CPU] = _host_hardware(gpu_hw, host_bandwidth_gbps, host_src)
        sources["host_bandwidth"] = hws[CPU].sources["host_bandwidth"]
        notes.append(f"{sum(1 for d in pl.layers if d == CPU)} of {n_all} layers"
                     + (f" and the routed experts of {len(pl.expert_cpu_layers)} layers" if pl.expert_cpu_layers else "")
                     + (f" and the tensors of {len(plan.tensor_overrides)} -ot overrides (--fit)"
                        if any(d == CPU for _, d in plan.tensor_overrides) else "")
                     + (f" in CPU memory: the Mac's unified memory, read by the CPU cores at {host_bandwidth_gbps:g} "
                        "GB/s (bandwidth-bound)" if host_src else
                        " in CPU memory: read at the system RAM's bandwidth (bandwidth-bound)"))
    elif CPU in costs:
        hws[CPU] = _host_hardware(gpu_hw, host_bandwidth_gbps, host_src)
    if unified:
        sources["interconnect"] = "one Apple chip: no interconnect between GPUs"
    if unified and pcie_gbps is None:
        link = gpu.bandwidth_gbps / 2
        sources["pcie"] = unified_sources(gpu)[1] + "; activations cross devices in F32 (n_embd x 4 B per token)"
    else:
        link = PCIE_GEN4[0] if pcie_gbps is None else pcie_gbps
        sources["pcie"] = (PCIE_GEN4[1] if pcie_gbps is None else f"{pcie_gbps:g} GB/s (given)") + \
            "; activations cross devices in F32 (n_embd x 4 B per token)"
    if n_gpus > 1:
        sources["split"] = (f"-sm {pl.split_mode} over {pl.n_gpus} x {gpu.name}, shares "
                            f"{', '.join(f'{x:.3f}' for x in pl.shares)} ({SRC}src/llama-model.cpp:1556-1613)")
    cuda_cc = cc if math.isfinite(gpu_hw.peak_flops) else None
    if cuda_cc is not None and (mmq_datacenter(gpu) or cuda_cc[0] == 10) and \
            any(t in MMQ_TYPES for per in mm_types.values() for t, _ in per):
        notes.append(MMQ_DATACENTER_NOTE if mmq_datacenter(gpu) else MMQ_BLACKWELL_NOTE)
    return _Setup(meta=meta, plan=plan, pl=pl, costs=costs, hws=hws, link_bps=link * 1e9, sources=sources,
                  notes=notes, gpu=gpu, mm_types=mm_types, cuda_cc=cuda_cc, _at={})


def _costs_at(s: _Setup, tokens: int):
    """(the device costs of a pass over ``tokens`` tokens, the real matmul parameters per device, the matmul paths
    used as ``{(ggml type, expert): (MatmulPath, rate source)}``). On llama.cpp's CUDA backend each weight type's
    matmul runs the kernel :func:`.cuda_matmul.cuda_matmul_path` picks for the batch, at the catalog rate of its unit
    (:func:`.cuda_matmul.unit_rate`); the roofline prices every FLOP at the GPU's BF16 figure, so each type's
    parameters are scaled by BF16 rate / its rate (the attention FLOPs stay at BF16). Other backends: the costs as
    they are. Raises :class:`_NoRate` when a path's rate is not in the catalog."""
    from dataclasses import replace

    from calculator.runtimes.llamacpp.cuda_matmul import cuda_matmul_path, unit_rate

    if s.cuda_cc is None:
        return s.costs, None, {}
    if tokens in s._at:
        return s._at[tokens]
    ref = next(h for d, h in s.hws.items() if d != CPU).peak_flops
    n_exp, topk = s.meta.n_expert, s.meta.n_expert_used
    costs, real, used = {}, {}, {}
    for d, mc in s.costs.items():
        scaled = scaled_exp = real_p = 0.0
        for (gtype, is_exp), params in (s.mm_types or {}).get(d, {}).items():
            active = params * topk / n_exp if is_exp and n_exp else params
            path = cuda_matmul_path(gtype, s.cuda_cc, tokens, n_exp if is_exp else 0)
            rate, src = unit_rate(s.gpu, path.unit)
            if rate is None:
                raise _NoRate(src)
            used[(gtype, is_exp)] = (path, src)
            real_p += active
            scaled += active * ref / rate
            if is_exp:
                scaled_exp += active * ref / rate
        real[d] = real_p
        costs[d] = replace(mc, matmul_params=scaled, expert_matmul_params=scaled_exp) if real_p else mc
    s._at[tokens] = (costs, real, used)
    return s._at[tokens]


def _matmul_sources(s: _Setup, decode_tokens: int, prefill_tokens: int | None) -> dict[str, str]:
    """``decode.matmul`` / ``prefill.matmul`` sources on llama.cpp's CUDA backend (nothing on other backends)."""
    if s.cuda_cc is None:
        return {}
    out = {"decode.matmul": matmul_paths_source(_costs_at(s, decode_tokens)[2], decode_tokens)}
    if prefill_tokens:
        out["prefill.matmul"] = matmul_paths_source(_costs_at(s, prefill_tokens)[2], prefill_tokens)
    return out


def matmul_paths_source(used: dict, tokens: int) -> str:
    """One sentence naming, for a pass of ``tokens`` tokens, each GGUF weight type's CUDA kernel and rate."""
    groups: dict[tuple, list[str]] = {}
    for (gtype, is_exp), (path, src) in sorted(used.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        groups.setdefault((path.kernel, path.unit, src, path.source), []).append(
            gtype + (" experts" if is_exp else ""))
    parts = [f"{', '.join(types)} -> {kernel} ({unit}) at {src} [{where}]"
             for (kernel, unit, src, where), types in groups.items()]
    return f"llama.cpp CUDA matmuls of a {tokens}-token pass: " + "; ".join(parts)


def _decode(s: _Setup, requests: int, tokens_per_request: int, context: int) -> _Pass:
    """One decode / verify pass over ``requests x tokens_per_request`` tokens, each weight type's matmul at the rate
    of the kernel llama.cpp's CUDA backend runs for that batch (:func:`_costs_at`); raises ``NotModelled`` when that
    rate is not in the catalog."""
    tokens = requests * tokens_per_request
    try:
        costs, real, _ = _costs_at(s, tokens)
    except _NoRate as e:
        raise NotModelled(f"a {tokens}-token pass: {e}", field="gpu") from None
    p = _pass(costs, s.pl, s.hws, requests=requests, tokens_per_request=tokens_per_request, context=context,
              link_bps=s.link_bps, hidden=s.meta.n_embd, n_layer_all=s.meta.n_layer_all)
    if real is not None:  # report the FLOPs done, not the BF16-equivalent ones the roofline priced
        p.flops += 2 * tokens * sum(real[d] - costs[d].matmul_params for d in costs)
    return p


def _prefill(s: _Setup, prompt_len: int, n_ubatch: int):
    """Prefill: every device's ``prefill_cost`` in sequence; weights in CPU memory are copied to the first GPU
    once per ubatch of >= 32 tokens (op offload) and computed there; smaller ubatches run on the CPU
    (bandwidth-bound). None when a GPU has no FLOP/s."""
    from calculator.engine.perf import ModelCost, prefill_cost

    gpus = [d for d in s.costs if d != CPU]
    if not gpus or any(not math.isfinite(s.hws[d].peak_flops) for d in gpus):
        return None
    total = 0.0
    chunk = max(1, n_ubatch)
    try:  # every chunk size the prompt runs (the full ubatch and the rest), so a missing rate shows here
        for n in {min(chunk, prompt_len), prompt_len % chunk or min(chunk, prompt_len)}:
            _costs_at(s, n)
    except _NoRate as e:
        s.notes.append(f"TTFT not given: {e}")
        return None

    def at(d):
        return lambda n: _costs_at(s, n)[0][d]

    for d, mc in s.costs.items():
        if d == CPU:
            continue
        total += prefill_cost(mc, s.hws[d], prompt_len=prompt_len, chunk=chunk, cost_for_tokens=at(d)).total_ms
    if CPU in s.costs:
        mc = s.costs[CPU]
        n_chunks = math.ceil(prompt_len / chunk)
        if min(chunk, prompt_len) >= OP_OFFLOAD_MIN_BATCH:
            # the CPU-resident weights are streamed to the GPU each ubatch and multiplied there
            cpu_bytes = mc.dense_bytes + mc.expert_bytes
            total += n_chunks * cpu_bytes / s.link_bps * 1e3

            def as_gpu(n):
                m = _costs_at(s, n)[0][CPU]
                return ModelCost(dense_bytes=0.0, expert_bytes=0.0, num_experts=0, topk=0,
                                 matmul_params=m.matmul_params, attn=m.attn, state_bytes=0.0, hidden=m.hidden,
                                 allreduce_layers=m.allreduce_layers, tp=1, pp=1,
                                 expert_matmul_params=m.expert_matmul_params)
            total += prefill_cost(as_gpu(min(chunk, prompt_len)), s.hws[gpus[0]], prompt_len=prompt_len, chunk=chunk,
                                  cost_for_tokens=as_gpu).total_ms
        else:
            total += prefill_cost(mc, s.hws[CPU], prompt_len=prompt_len, chunk=chunk).total_ms
    return total


def slot_wait_ms(clients: int, slots: int, lifetime_ms: float) -> float:
    """The mean wait for a free slot of a closed loop of ``clients`` requests on ``slots`` busy slots, each request
    ``lifetime_ms`` in its slot: ``(C / P - 1) x lifetime`` (each cycle is its wait plus its lifetime, and P finish
    per lifetime, so C / (wait + lifetime) = P / lifetime, Little's law). 0 when the clients fit the slots."""
    return max(clients / slots - 1, 0.0) * lifetime_ms


def speed(meta: GGUFMeta, plan: LlamaCppPlan, gpu, *, prompt_len: int = 1024, output_len: int = 128,
          concurrency: int = 1, n_ubatch: int = 512, runtime_label: str = "llama.cpp", n_gpus: int = 1,
          split_mode: str = "layer", tensor_split: list[float] | None = None, n_cpu_moe: int = 0,
          host_bandwidth_gbps: float | None = None, pcie_gbps: float | None = None,
          efficiency=None, slots_name: str = "-np", queue_source: str = LLAMA_SERVER_QUEUE_SRC) -> LlamaCppSpeed:
    """TTFT, time per output token and output tok/s for ``concurrency`` sequences (at most the plan's
    ``n_seq_max`` slots decode together) with ``prompt_len`` prompt and ``output_len`` output tokens.

    ``concurrency`` is a closed loop of that many clients. With more clients ``C`` than slots ``P`` the server
    runs ``P`` at once and the rest wait for a free slot (``queue_source``: llama-server defers them,
    :data:`LLAMA_SERVER_QUEUE_SRC`; Ollama's runner admits ``OLLAMA_NUM_PARALLEL`` at a time): the slots stay
    busy, so by Little's law each request waits ``(C / P - 1) x`` its lifetime in a slot (``TTFT + (output_len -
    1) x ITL``), which is added to TTFT, as perf.estimate_speed_plan does for requests beyond vLLM's max_num_seqs;
    ITL and output tok/s are those of the ``P`` running slots. ``slots_name`` names the setting in the notes
    (``-np``, ``OLLAMA_NUM_PARALLEL``).

    ``gpu``: a catalog GPU (``calculator.engine.gpus.GPU``); ``n_gpus`` of them with ``split_mode`` (-sm
    ``layer``/``row``/``none``) and ``tensor_split`` (-ts). Layers on the CPU follow the plan's ``n_gpu_layers``;
    ``n_cpu_moe`` (--n-cpu-moe) keeps the first N layers' routed experts in CPU memory (the memory plan does not
    model that override: its buffers are unchanged). ``host_bandwidth_gbps``: system RAM bandwidth for the CPU part
    (default :data:`HOST_RAM_ASSUMED_GBPS`, assumed; on an Apple Silicon Mac's Metal plan the chip's own unified
    memory bandwidth, :func:`unified_gpu`); ``pcie_gbps``: the GPU link (default perf's PCIe Gen4 x16, assumed; on
    a Mac half the unified memory's bandwidth, a copy within it). A GPU without a TFLOP/s figure (Apple M3 / M4)
    gets the decode estimate (bandwidth-bound) and no TTFT. ``efficiency``: a perf ``Efficiency`` to use instead of
    the backend's row (:func:`llamacpp_efficiency`; the fit in benchmarks/llamacpp_bench_fit.py passes its candidates
    here). Raises ``NotModelled`` (field named) for what is not modelled and ``ValueError`` for lengths below 1 or
    bad split parameters."""
    from calculator.engine.perf import closed_loop_tokens_per_s

    for name, value in (("prompt_len", prompt_len), ("output_len", output_len), ("concurrency", concurrency)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, not {value}")
    s = _setup(meta, plan, gpu, n_gpus=n_gpus, split_mode=split_mode, tensor_split=tensor_split,
               n_cpu_moe=n_cpu_moe, host_bandwidth_gbps=host_bandwidth_gbps, pcie_gbps=pcie_gbps,
               efficiency=efficiency)
    notes = list(s.notes)
    if gpu.tflops_bf16 is None:
        notes.append("no TFLOP/s for this GPU: decode is taken as bandwidth-bound and TTFT is not given")
    conc = min(concurrency, plan.n_seq_max)
    ctx_cap = plan.n_ctx_seq or plan.n_ctx
    mean_ctx = min(prompt_len + max(1, output_len // 2), ctx_cap)
    dec = _decode(s, conc, 1, mean_ctx)
    n_setup_notes = len(s.notes)
    pre_ms = _prefill(s, min(prompt_len, ctx_cap), n_ubatch)
    notes += s.notes[n_setup_notes:]  # what the prefill found (a rate the catalog lacks)
    ttft = None if pre_ms is None else pre_ms + dec.total_ms
    itl = dec.total_ms
    eff = next(iter(s.hws.values())).eff
    sources = dict(s.sources)
    # output tok/s as the README and the vLLM / SGLang answers define it (and vllm bench serve / the validator measure
    # it): C x O over a request's lifetime in its slot, its prefill included; the P running slots' (no queue wait)
    tps = None if ttft is None else closed_loop_tokens_per_s(conc, output_len, ttft, itl)
    if tps is None:
        notes.append("output tok/s is not given: it is C x output_len / (TTFT + (output_len - 1) x ITL) and there is "
                     "no TTFT for this GPU")
    queue_ms: float | None = 0.0
    if concurrency > conc:
        # a closed loop of C clients on P busy slots: each request's cycle is its wait plus its lifetime in a slot,
        # and P finish per lifetime, so C / (wait + lifetime) = P / lifetime (Little's law)
        wait = concurrency - conc
        head = (f"{concurrency} requests but {conc} slot{'s' if conc > 1 else ''} ({slots_name} {conc}): {conc} "
                f"decode{'s' if conc == 1 else ''} at a time and the other {wait} wait for a free slot ({queue_source})")
        if ttft is None:
            queue_ms = None
            notes.append(head + f"; their mean wait, ({concurrency} / {conc} - 1) x a request's time in its slot, is "
                         "not given (no TTFT for this GPU)")
        else:
            lifetime = ttft + (output_len - 1) * itl
            queue_ms = slot_wait_ms(concurrency, conc, lifetime)
            ttft += queue_ms
            notes.append(head + f"; in a closed loop each waits ({concurrency} / {conc} - 1) x a request's "
                         f"{lifetime / 1e3:.3g} s in its slot = {queue_ms / 1e3:.3g} s on average (Little's law), "
                         f"which is in TTFT; time per output token and output tok/s are those of the {conc} running "
                         f"slot{'s' if conc > 1 else ''} (with {slots_name} {concurrency} all {concurrency} would run "
                         "at once: ask for it to see its memory and speed)")
            sources["ttft_ms.queue"] = (f"mean wait for a slot (C / P - 1) x (TTFT + (output_len - 1) x ITL), C = "
                                        f"{concurrency} clients, P = {conc} slots (closed loop, Little's law); "
                                        + queue_source)
    sources["output_tokens_per_s"] = (f"C x output_len / (TTFT + (output_len - 1) x ITL), C = {conc} running "
                                      "slot(s), TTFT without the wait for a slot (output tokens over each request's "
                                      "lifetime, prefill included, as in the vLLM / SGLang answers)")
    if pre_ms is not None:
        sources["prefill"] = (f"the prompt in passes of n_ubatch = {n_ubatch} tokens (-ub; the plan's, after "
                              "llama.cpp cuts it to -b and -c)")
    sources.update(_matmul_sources(s, conc, min(n_ubatch, prompt_len, ctx_cap) if pre_ms is not None else None))
    sources["bytes"] = (f"GGUF tensor bytes per device ({meta.source}); token_embd read as one row per token; KV "
                        "from the plan's cache types, on its layer's device")
    sources["itl_ms"] = ("one decode pass for the running slots: the devices in turn (layer split), each its GGUF bytes "
                         "and KV read per token at its bandwidth x efficiency against its FLOPs at its compute x "
                         "efficiency (perf.step_cost: see bytes, bandwidth, efficiency), + activations over the "
                         "link between devices + the row's per-step and per-layer fixed terms")
    if pre_ms is not None:
        sources["ttft_ms"] = ("the prompt's prefill (see prefill) + one decode pass (itl_ms)"
                              + (" + the wait for a free slot (ttft_ms.queue)" if "ttft_ms.queue" in sources else ""))
    devices = {_dev_name(d): {"weight_bytes": p.bytes_weights, "kv_bytes": p.bytes_kv, "ms": round(p.total_ms, 3),
                              "bandwidth_gbps": s.hws[d].bandwidth / 1e9}
               for d, p in sorted(dec.per_device.items())}
    return LlamaCppSpeed(
        runtime=runtime_label, gpu=gpu.name if n_gpus == 1 else f"{n_gpus} x {gpu.name}", prompt_len=prompt_len,
        output_len=output_len, concurrency=conc, mean_context=mean_ctx,
        ttft_ms=None if ttft is None else round(ttft, 2), itl_ms=round(itl, 3), decode_step_ms=round(itl, 3),
        output_tokens_per_s=None if tps is None else round(tps, 2), weight_bytes_per_token=dec.bytes_weights,
        kv_bytes_per_token_step=dec.bytes_kv, decode=_decode_view(dec),
        prefill=None if pre_ms is None else {"total_ms": round(pre_ms, 3), "n_ubatch": n_ubatch},
        efficiency_label=eff.label,
        efficiency={"mem_bw": eff.mem_bw, "compute": eff.compute, "step_overhead_ms": eff.step_overhead_ms,
                    "layer_us": eff.layer_us, "overlap_p": eff.overlap_p,
                    "transfer_latency_us": eff.allreduce_latency_us},
        sources=sources, notes=notes, devices=devices, transfer_ms=round(dec.transfer_ms, 4), clients=concurrency,
        queue_ms=None if queue_ms is None else round(queue_ms, 2))


#: llama-server speculates for all its generating slots at once: update_slots collects every slot that drafts and calls
#: common_speculative_draft once (tools/server/server-context.cpp:2960-3028), whose draft-simple implementation puts one
#: token per drafting sequence in each draft pass (common/speculative.cpp:308-412); each slot then adds its sampled
#: and drafted tokens to the one target batch (server-context.cpp:3077-3080, handle_last_sampled_token :474-512)
SPEC_SLOTS_SRC = (SRC + "tools/server/server-context.cpp:2960-3028 (every drafting slot, one common_speculative_draft "
                  "call), common/speculative.cpp:308-412 (each draft pass one token per drafting sequence), "
                  "server-context.cpp:3077-3080 and :474-512 (every slot's sampled + drafted tokens in one target "
                  "batch)")
#: and after the target decodes a batch the draft model evaluates the same batch (prompts included)
SPEC_REEVAL_SRC = SRC + "tools/server/server-context.cpp:3722-3736, common/speculative.cpp:262-306"


class SpecSpeed(BaseModel):
    """Speculative decoding with a draft model (``llama-server --model-draft``). ``k``: drafted tokens per step
    (``--spec-draft-n-max``); ``concurrency``: the slots drafting and verifying together; ``acceptance_length``: mean
    tokens per step and slot incl. the target's own (``None`` when neither the request nor a public figure gives
    it: then only ``break_even_rate`` is known); ``draft_pass_ms``: one draft pass of one token per slot;
    ``draft_reeval_ms``: the draft's pass over the ``k + 1`` verified tokens per slot (llama-server evaluates each
    target batch on the draft as well, :data:`SPEC_REEVAL_SRC`); ``verify_ms``: the target's pass over ``k + 1``
    tokens per slot; ``step_ms`` = k x draft + draft re-evaluation + verify + the speculative step overhead;
    ``baseline_itl_ms``: the plain decode step of as many slots; ``ttft_ms``: the prompt's prefill on the target
    and on the draft plus one plain decode step, plus the wait for a free slot of the clients beyond the slots
    (None without a TFLOP/s figure); ``itl_ms`` = step / AL;
    ``output_tokens_per_s`` = C x O / (TTFT + (O - 1) x ITL), the definition of the plain answer; ``speedup`` =
    baseline / ``itl_ms`` (time per output token without / with); ``break_even_rate``: the acceptance rate
    (accepted / drafted) at which the speedup is 1 (None: never pays)."""

    k: int
    concurrency: int = 1
    acceptance_length: float | None
    acceptance_rate: float | None
    acceptance_source: str
    draft_pass_ms: float
    draft_reeval_ms: float = 0.0
    verify_ms: float
    step_ms: float
    baseline_itl_ms: float
    ttft_ms: float | None = None
    itl_ms: float | None
    output_tokens_per_s: float | None
    speedup: float | None
    break_even_rate: float | None
    verify_bound: str
    notes: list[str]
    sources: dict[str, str]

    @property
    def break_even_acceptance_rate(self) -> float | None:
        """The break-even rate under the name the vLLM / SGLang result uses (templates read either)."""
        return self.break_even_rate


def spec_speed(meta: GGUFMeta, plan: LlamaCppPlan, draft_meta: GGUFMeta, draft_plan: LlamaCppPlan, gpu, *, k: int,
               acceptance_rate: float | None = None, acceptance_length: float | None = None,
               workload: str | None = None, temperature: float | None = None, prompt_len: int = 1024,
               output_len: int = 128, n_gpus: int = 1, split_mode: str = "layer",
               tensor_split: list[float] | None = None, n_cpu_moe: int = 0, host_bandwidth_gbps: float | None = None,
               pcie_gbps: float | None = None, concurrency: int = 1) -> SpecSpeed:
    """Speed of ``concurrency`` sequences (at most the plan's ``n_seq_max`` slots run at once, as in :func:`speed`)
    with a draft model drafting ``k`` tokens per step and slot (``--spec-draft-n-max``, the ``--spec-draft-n-min`` /
    ``--draft-p-min`` cut-offs not modelled: every step drafts ``k``).

    The draft runs on the same devices and split as the target (common/speculative.cpp:2446-2470: the draft's
    params start as a copy of the target's, ``-devd`` / ``-ngld`` override them; pinned to one device it uses
    ``-sm layer``) with its own plan (``draft_plan``, its ``-ngld``). A step (common/speculative.cpp:308-412 and
    the server's verification batch) is ``k`` single-token draft passes, one target pass over ``k + 1`` tokens, the
    draft's pass over the same ``k + 1`` tokens (llama-server evaluates every target batch on the draft too,
    :data:`SPEC_REEVAL_SRC`) and the efficiency's ``spec_step_overhead_ms``; it yields ``AL`` tokens per slot, from
    ``acceptance_rate`` (llama.cpp's ``accept`` = n_accept / n_drafted, so ``AL = 1 + k x rate``),
    ``acceptance_length``, or
    :func:`calculator.engine.acceptance.predict_acceptance` for the draft-model method (which has no public
    figure: then ``acceptance_length`` is None and only the break-even rate is given). With several slots
    llama-server drafts for all of them together and verifies them together (:data:`SPEC_SLOTS_SRC`): each draft
    pass is one token per drafting slot, the target's pass ``k + 1`` per slot. A speedup below 1 gets the vLLM /
    SGLang stop sign in ``notes`` (:func:`calculator.engine.perf.slowdown_warnings`). Raises ``NotModelled`` /
    ``ValueError`` as :func:`speed`, and ``ValueError`` for ``k < 1``."""
    from calculator.engine.acceptance import predict_acceptance
    from calculator.engine.perf import break_even_acceptance_rate, closed_loop_tokens_per_s, slowdown_warnings

    if k < 1:
        raise ValueError(f"k (--spec-draft-n-max) must be >= 1, not {k}")
    if prompt_len < 1 or output_len < 1 or concurrency < 1:
        raise ValueError("prompt_len, output_len and concurrency must be >= 1")
    kw = dict(n_gpus=n_gpus, split_mode=split_mode, tensor_split=tensor_split, host_bandwidth_gbps=host_bandwidth_gbps,
              pcie_gbps=pcie_gbps)
    tgt = _setup(meta, plan, gpu, n_cpu_moe=n_cpu_moe, **kw)
    dft = _setup(draft_meta, draft_plan, gpu, n_cpu_moe=0, **kw)
    conc = min(concurrency, plan.n_seq_max)
    ctx_cap = plan.n_ctx_seq or plan.n_ctx
    ctx = min(prompt_len + max(1, output_len // 2), ctx_cap)
    base = _decode(tgt, conc, 1, ctx)
    verify = _decode(tgt, conc, k + 1, ctx)
    draft = _decode(dft, conc, 1, min(ctx, draft_plan.n_ctx_seq or draft_plan.n_ctx))
    # the prompt runs through the target, then through the draft (llama-server evaluates every batch on both)
    pre_tgt = _prefill(tgt, min(prompt_len, ctx_cap), plan.n_ubatch)
    pre_dft = _prefill(dft, min(prompt_len, draft_plan.n_ctx_seq or draft_plan.n_ctx), draft_plan.n_ubatch)
    eff = next(iter(tgt.hws.values())).eff
    reeval = _decode(dft, conc, k + 1, min(ctx, draft_plan.n_ctx_seq or draft_plan.n_ctx))
    step = k * draft.total_ms + reeval.total_ms + verify.total_ms + eff.spec_step_overhead_ms
    acc = predict_acceptance("draft_model", k, workload=workload, temperature=temperature,
                             acceptance_rate=acceptance_rate, acceptance_length=acceptance_length)
    notes = []
    if acc is None:
        al = rate = None
        src = ("no acceptance given and no public figure for a draft model: give the "
               "acceptance rate llama.cpp logs (accept = n_accept / n_drafted)")
        notes.append("acceptance unknown: only the break-even acceptance rate is given")
    else:
        al, rate, src = acc.length, acc.rate, acc.source
        if acceptance_rate is not None:  # the shared model words it for vLLM; llama.cpp logs the same ratio
            src = ("user input (--acceptance-rate: accepted / drafted tokens, llama.cpp's accept = n_accept / "
                   "n_drafted), i.e. mean acceptance length 1 + k x rate")
    ratio = step / base.total_ms
    be = break_even_acceptance_rate(ratio, k)
    itl = None if al is None else step / al
    ttft = None if pre_tgt is None or pre_dft is None else pre_tgt + pre_dft + base.total_ms
    tps = None if itl is None or ttft is None else closed_loop_tokens_per_s(conc, output_len, ttft, itl)
    queue_ms = 0.0
    if concurrency > conc and itl is not None and ttft is not None:
        # the clients beyond the slots wait for one as in the plain answer (speed(): (C / P - 1) x a request's time in
        # its slot, Little's law), here the speculative slot time, so the two TTFTs compare like with like
        queue_ms = slot_wait_ms(concurrency, conc, ttft + (output_len - 1) * itl)
        ttft += queue_ms
    speedup = None if itl is None else base.total_ms / itl
    # the stop sign of the vLLM / SGLang answers, on the figure shown (no range: the draft model has none here)
    notes += slowdown_warnings(al, None if speedup is None else round(speedup, 4), None, None)
    if itl is not None and ttft is None:
        notes.append("speculative output tok/s is not given: it is C x output_len / (TTFT + (output_len - 1) x ITL) "
                     "and there is no TTFT for this GPU")
    sources = dict(tgt.sources)
    if tgt.cuda_cc is not None:
        sources["spec.verify.matmul"] = matmul_paths_source(_costs_at(tgt, conc * (k + 1))[2], conc * (k + 1))
    sources["spec"] = (f"{SRC}common/speculative.cpp:308-412 (k single-token draft passes per step), the target "
                       f"verifies k + 1 tokens in one pass and the draft evaluates the same k + 1 ({SPEC_REEVAL_SRC}); "
                       f"draft on the target's devices (common/speculative.cpp:2446-2470); "
                       f"spec_step_overhead_ms {eff.spec_step_overhead_ms} ({eff.label})")
    if conc > 1:
        sources["spec.slots"] = f"{conc} slots draft and verify together: {SPEC_SLOTS_SRC}"
    if queue_ms:
        sources["spec.ttft_ms.queue"] = (f"mean wait for a slot (C / P - 1) x (TTFT + (output_len - 1) x ITL) with "
                                         f"speculation, C = {concurrency} clients, P = {conc} slots: "
                                         f"{queue_ms:.0f} ms")
    sources["spec.output_tokens_per_s"] = ("C x output_len / (TTFT + (output_len - 1) x ITL with speculation), TTFT "
                                           "= the prompt's prefill on the target and on the draft (llama-server "
                                           f"evaluates every batch on both, {SPEC_REEVAL_SRC}) + one plain decode step")
    sources["draft_bytes"] = f"draft GGUF tensors ({draft_meta.source})"
    return SpecSpeed(k=k, concurrency=conc, acceptance_length=None if al is None else round(al, 4),
                     acceptance_rate=rate,
                     acceptance_source=src, draft_pass_ms=round(draft.total_ms, 3),
                     draft_reeval_ms=round(reeval.total_ms, 3), verify_ms=round(verify.total_ms, 3),
                     step_ms=round(step, 3), baseline_itl_ms=round(base.total_ms, 3),
                     ttft_ms=None if ttft is None else round(ttft, 2), itl_ms=None if itl is None else round(itl, 3),
                     output_tokens_per_s=None if tps is None else round(tps, 2),
                     speedup=None if speedup is None else round(speedup, 4),
                     break_even_rate=None if be is None else round(be, 4), verify_bound=verify.bound,
                     notes=tgt.notes + notes, sources=sources)
