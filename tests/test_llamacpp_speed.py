"""llama.cpp speed beyond one GPU: placement of layers (llama-model.cpp:1556-1613), partial offload to the CPU,
layer and row split over several GPUs, --n-cpu-moe, and speculative decoding with a draft model. Expected values
are computed here by hand from the GGUF tensor table (bytes per layer), the datasheet bandwidths and the
efficiency row's figures, independently of the code's per-device bookkeeping."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from calculator.engine.gpus import get_gpu
from calculator.engine.perf import get_efficiency
from calculator.runtimes.llamacpp.memory import plan
from calculator.runtimes.llamacpp.quant_rules import derive_meta
from calculator.runtimes.llamacpp.speed import (CPU, HOST_RAM_ASSUMED_GBPS, placement, spec_speed, speed)
from tests.conftest import load_config as _shared_config

CATALOG = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"


def load_config(name: str) -> dict:
    """A config from the shared data, else the shipped catalog (Llama-3.2-1B-Instruct is only there)."""
    try:
        return _shared_config(name)
    except FileNotFoundError:
        return json.loads((CATALOG / name).read_text())

LLAMA_3B = "meta-llama__Llama-3.2-3B.json"
BLK = re.compile(r"^blk\.(\d+)\.")
# the plans below name their backend, whose llama.cpp row speed() uses (perf's "backend:Metal"; CUDA: the "*" row)
EFF = get_efficiency("NVIDIA GeForce RTX 3060", "llama.cpp", backend="CUDA")
EFF_METAL = get_efficiency("Apple M3 24GB", "llama.cpp", backend="Metal")
PCIE = 25e9  # perf.PCIE_GEN4, the assumed default link


def layer_bytes(meta, pred):
    return sum(t.n_bytes for t in meta.tensors if (m := BLK.match(t.name)) and pred(int(m.group(1))))


def test_placement_follows_the_split_points():
    """-ts 35,37,28 over 64 layers with -ngl 99: split points 0.35, 0.72, 1.0 over act = 65 units; layer il goes to
    the first point above il / 65: il < 22.75 -> GPU0 (0..22), il < 46.8 -> GPU1 (23..46), the rest and the output
    (64 / 65 = 0.985) -> GPU2."""
    pl = placement(64, 99, n_gpus=3, tensor_split=[35, 37, 28])
    assert pl.layers == tuple([0] * 23 + [1] * 24 + [2] * 17) and pl.output == 2
    # -ngl 10 of 28 layers: i_gpu_start = 28 + 1 - 10 = 19, so layers 19..27 and the output on the GPU
    pl = placement(28, 10)
    assert pl.layers == tuple([CPU] * 19 + [0] * 9) and pl.output == 0
    # -ts 1 over 2 GPUs: common/arg.cpp:2845-2851 fills the missing shares with 0, so every unit goes to GPU0
    pl = placement(28, -1, n_gpus=2, tensor_split=[1.0])
    assert set(pl.layers) == {0} and pl.output == 0
    with pytest.raises(ValueError):
        placement(28, -1, n_gpus=2, tensor_split=[1.0, 1.0, 1.0])


def test_partial_offload_decode_ms_by_hand():
    """llama3.2:3b Q4_K_M on an M3 (no TFLOP/s: bandwidth-bound), -ngl 10: layers 0..18 stay in CPU memory, which on
    a Mac is the same unified memory (llama.cpp's CPU device is the whole RAM, ggml-cpu.cpp:365-382): the CPU cores
    read them at the M3's own 100 GB/s, not a PC's DDR5; layers 19..27, the output norm and the tied output
    (token_embd's table) at the same bandwidth on the GPU, each with its KV (8 heads x 128 x 2 B x K,V = 4096 B per
    token per layer); one activation copy (3072 x 4 B) where the layers move to the GPU, within the unified memory
    (read and written: half of 100 GB/s); 28 x layer_us; the step overhead."""
    meta = derive_meta(load_config(LLAMA_3B), "Q4_K_M")
    gpu = get_gpu("Apple M3 24GB")
    assert gpu.bandwidth_gbps == 100.0  # Apple's M3 figure (catalog)
    p = plan(meta, n_ctx=4096, device="Metal", n_gpu_layers=10)
    s = speed(meta, p, gpu, prompt_len=1000, output_len=200)
    ctx = 1100
    cpu = layer_bytes(meta, lambda il: il < 19) + 19 * 4096 * ctx
    out = sum(t.n_bytes for t in meta.tensors if t.name in ("output_norm.weight", "token_embd.weight"))
    gpu_b = layer_bytes(meta, lambda il: il >= 19) + out + 9 * 4096 * ctx
    ms = (cpu / (100e9 * EFF_METAL.mem_bw) + gpu_b / (100e9 * EFF_METAL.mem_bw)
          + 28 * EFF_METAL.layer_us * 1e-6 + EFF_METAL.step_overhead_ms * 1e-3
          # one copy: the input lookup and layers 0..18 are on the CPU, the move to the GPU at layer 19
          + 3072 * 4 / 50e9 + EFF_METAL.allreduce_latency_us * 1e-6) * 1e3
    assert s.itl_ms == pytest.approx(ms, rel=1e-3)
    assert s.devices["CPU"]["bandwidth_gbps"] == 100.0 and "unified memory" in s.sources["host_bandwidth"]
    assert "DDR5" not in s.sources["host_bandwidth"] and "no PCIe" in s.sources["pcie"]
    # a bandwidth given by the user replaces the chip's for the CPU part: only the CPU term changes
    s2 = speed(meta, p, gpu, prompt_len=1000, output_len=200, host_bandwidth_gbps=120.0)
    delta = cpu / (EFF_METAL.mem_bw * 1e9) * (1 / 100.0 - 1 / 120.0) * 1e3
    assert s.itl_ms - s2.itl_ms == pytest.approx(delta, rel=1e-3)


def test_partial_offload_on_a_pc_reads_the_cpu_layers_at_the_assumed_ddr5():
    """The same -ngl 10 on an RTX 3060 (CUDA): the CPU's layers are in the PC's own system RAM, read at the assumed
    dual-channel DDR5-5600 (2 x 8 B x 5600 MT/s = 89.6 GB/s) unless given; the activation copy crosses PCIe."""
    meta = derive_meta(load_config(LLAMA_3B), "Q4_K_M")
    gpu = get_gpu("RTX 3060")
    p = plan(meta, n_ctx=4096, device="CUDA", n_gpu_layers=10)
    s = speed(meta, p, gpu, prompt_len=1000, output_len=200)
    assert s.devices["CPU"]["bandwidth_gbps"] == HOST_RAM_ASSUMED_GBPS == 2 * 8 * 5600 / 1000
    assert "assumed" in s.sources["host_bandwidth"] and "PCIe" in s.sources["pcie"]
    cpu = layer_bytes(meta, lambda il: il < 19) + 19 * 4096 * 1100
    s2 = speed(meta, p, gpu, prompt_len=1000, output_len=200, host_bandwidth_gbps=120.0)
    assert s.itl_ms - s2.itl_ms == pytest.approx(cpu / (EFF.mem_bw * 1e9) * (1 / 89.6 - 1 / 120.0) * 1e3, rel=1e-3)


def test_layer_split_over_two_gpus_adds_one_copy():
    """-sm layer over 2 identical GPUs reads the same bytes at the same bandwidth, one GPU after the other: the
    step is the single-GPU step plus one activation copy (n_embd x 4 B over PCIe plus the transfer latency)."""
    meta = derive_meta(load_config(LLAMA_3B), "Q4_K_M")
    p = plan(meta, n_ctx=4096, device="CUDA")
    one = speed(meta, p, get_gpu("RTX 3060"), prompt_len=500, output_len=100)
    two = speed(meta, p, get_gpu("RTX 3060"), prompt_len=500, output_len=100, n_gpus=2)
    hop_ms = (3072 * 4 / PCIE + EFF.allreduce_latency_us * 1e-6) * 1e3
    assert two.itl_ms - one.itl_ms == pytest.approx(hop_ms, abs=2e-3)
    assert set(two.devices) == {"GPU0", "GPU1"}


@pytest.mark.parametrize("slots,clients", [(1, 4), (2, 5), (3, 3)])
def test_requests_beyond_the_slots_wait_for_one_and_the_wait_is_in_ttft(slots, clients):
    """-np P slots and C > P closed-loop clients: llama-server defers a task while no slot is free
    (tools/server/server-context.cpp:2379-2389) and a released slot takes the first deferred one (:1283-1285,
    server-queue.cpp:90-110). The P slots stay busy, so each request cycles through its wait W and its lifetime L in a
    slot, and C / (W + L) = P / L (Little's law): W = (C / P - 1) x L, L = TTFT_P + (output_len - 1) x ITL_P (the
    figures of P requests running at once). ITL and output tok/s are those of the P running slots."""
    meta = derive_meta(load_config(LLAMA_3B), "Q4_K_M")
    p = plan(meta, n_ctx=4096 * slots, n_seq_max=slots, device="CUDA")
    gpu = get_gpu("RTX 3060")
    running = speed(meta, p, gpu, prompt_len=500, output_len=100, concurrency=slots)
    s = speed(meta, p, gpu, prompt_len=500, output_len=100, concurrency=clients)
    lifetime = running.ttft_ms + 99 * running.itl_ms
    wait = (clients / slots - 1) * lifetime
    # (the figures compared are rounded: TTFT to 0.01 ms, ITL to 0.001 ms)
    assert s.ttft_ms == pytest.approx(running.ttft_ms + wait, rel=1e-4)
    assert s.queue_ms == pytest.approx(wait, rel=1e-4) and s.clients == clients and s.concurrency == slots
    # output tok/s: the P running slots' C x O / (TTFT + (O - 1) x ITL), their TTFT without the wait (the README's
    # definition, as vLLM's)
    assert s.itl_ms == running.itl_ms and s.output_tokens_per_s == running.output_tokens_per_s == pytest.approx(
        slots * 100 / ((running.ttft_ms + 99 * running.itl_ms) / 1e3), rel=1e-4)
    if clients > slots:
        assert any(f"{clients} requests but {slots} slot" in n and "server-context.cpp:2379-2389" in n for n in s.notes)
        assert "ttft_ms.queue" in s.sources
    else:
        assert s.queue_ms == 0 and not any("requests but" in n for n in s.notes)


def test_row_split_shares_the_matrices():
    """-sm row over 2 GPUs: each GPU holds half of every layer matrix; GPU1 holds nothing else (layer placement
    with equal shares over 29 units puts layers il / 29 < 0.5, 0..14, on GPU0 and 15..27 plus the output on GPU1,
    whose norms, KV and the output stay there)."""
    meta = derive_meta(load_config(LLAMA_3B), "Q4_K_M")
    p = plan(meta, n_ctx=4096, device="CUDA")
    s = speed(meta, p, get_gpu("RTX 3060"), prompt_len=500, output_len=100, n_gpus=2, split_mode="row")
    mats = sum(t.n_bytes for t in meta.tensors if BLK.match(t.name) and len(t.shape) >= 2)
    norms_hi = sum(t.n_bytes for t in meta.tensors if (m := BLK.match(t.name)) and len(t.shape) < 2
                   and int(m.group(1)) >= 15)
    out = sum(t.n_bytes for t in meta.tensors if t.name in ("output_norm.weight", "token_embd.weight"))
    assert s.devices["GPU1"]["weight_bytes"] == pytest.approx(mats / 2 + norms_hi + out)
    # the row gathers: 28 layers x 7 matmuls x the transfer latency at least
    assert s.transfer_ms >= 28 * 7 * EFF.allreduce_latency_us * 1e-3


def test_n_cpu_moe_moves_the_first_layers_experts():
    """--n-cpu-moe 10 on Qwen3-30B-A3B Q4_K_M: the CPU reads the routed experts of layers 0..9 that one token
    touches, 8 of 128 per layer."""
    meta = derive_meta(load_config("Qwen__Qwen3-30B-A3B.json"), "Q4_K_M")
    p = plan(meta, n_ctx=4096, device="CUDA")
    s = speed(meta, p, get_gpu("RTX 4090"), prompt_len=500, output_len=100, n_cpu_moe=10)
    exps = sum(t.n_bytes for t in meta.tensors if (m := BLK.match(t.name)) and "_exps." in t.name
               and int(m.group(1)) < 10)
    assert s.devices["CPU"]["weight_bytes"] == pytest.approx(exps * 8 / 128, rel=1e-9)
    assert s.devices["CPU"]["kv_bytes"] == 0


def test_draft_model_speedup_from_the_logged_acceptance():
    """sd-bench-074's setup (Llama-3.1-8B Q8_0 + Llama-3.2-1B Q8_0 on an RTX 3060, n_draft 5, accept 72.055 %):
    AL = 1 + 5 x 0.72055 = 4.60275; a step is 5 single-token draft passes (each the draft's own decode step), the
    target's pass over 6 tokens, the draft's pass over the same 6 tokens (llama-server evaluates each target batch on
    the draft too, server-context.cpp:3722-3736) and the speculative overhead."""
    meta = derive_meta(load_config("meta-llama__Llama-3.1-8B-Instruct.json"), "Q8_0")
    dmeta = derive_meta(load_config("meta-llama__Llama-3.2-1B-Instruct.json"), "Q8_0")
    p = plan(meta, n_ctx=4096, flash_attn="on", device="CUDA")
    dp = plan(dmeta, n_ctx=4096, flash_attn="on", device="CUDA")
    gpu = get_gpu("RTX 3060")
    sp = spec_speed(meta, p, dmeta, dp, gpu, k=5, acceptance_rate=0.72055, prompt_len=14, output_len=898)
    assert sp.acceptance_length == pytest.approx(4.60275, abs=1e-4)
    alone = speed(dmeta, dp, gpu, prompt_len=14, output_len=898)
    assert sp.draft_pass_ms == pytest.approx(alone.itl_ms, abs=1e-3)
    # the draft's pass over 6 tokens costs what the draft model's own verify pass of k = 5 costs
    assert sp.draft_reeval_ms == pytest.approx(spec_speed(dmeta, dp, dmeta, dp, gpu, k=5, prompt_len=14,
                                                          output_len=898).verify_ms, abs=1e-3)
    assert sp.draft_pass_ms < sp.draft_reeval_ms < 6 * sp.draft_pass_ms
    step = 5 * sp.draft_pass_ms + sp.draft_reeval_ms + sp.verify_ms + EFF.spec_step_overhead_ms
    assert sp.speedup == pytest.approx(4.60275 * sp.baseline_itl_ms / step, rel=1e-3)
    # the verify pass reads the target's weights once: more than one decode step, far less than six
    assert sp.baseline_itl_ms < sp.verify_ms < 6 * sp.baseline_itl_ms
    # without an acceptance figure only the break-even rate is known: (step / base - 1) / k
    nb = spec_speed(meta, p, dmeta, dp, gpu, k=5, prompt_len=14, output_len=898)
    assert nb.speedup is None and nb.break_even_rate == pytest.approx((step / sp.baseline_itl_ms - 1) / 5, rel=1e-3)


BENCH = Path(__file__).resolve().parent.parent / "calculator" / "runtimes" / "llamacpp" / "data" / "llama_bench_public.json"


def test_fitted_metal_tg128_by_hand_against_the_public_table():
    """ggml-org/llama.cpp discussion #4167, M3 Pro (18 GPU cores, 150 GB/s), Llama 2 7B Q4_0: tg128 = 30.74 t/s. By
    hand: a decode step reads every GGUF tensor once except token_embd (one row) and the f16 KV of 32 layers x 2 x
    4096 x 2 B at the mean context of the 128 tokens (1 + 64), at 150 GB/s x the fitted Metal share; plus 32 x the
    fitted per-layer time and one activation copy to the GPU (4096 x 4 B over the assumed PCIe link, plus the
    transfer latency). The M3 Pro has no catalog TFLOP/s, so no compute term. The result is within the fit's
    leave-one-chip-out median error (3.2 %) of the table."""
    meta = derive_meta(load_config("meta-llama__Llama-2-7b-hf.json"), "Q4_0")
    gpu = get_gpu("Apple M3 Pro 36GB")
    eff = EFF_METAL
    assert eff.label == "fitted" and "discussions/4167" in eff.source
    s = speed(meta, plan(meta, n_ctx=128, device="Metal"), gpu, prompt_len=1, output_len=128)
    embd = meta.tensor("token_embd.weight")
    weights = sum(t.n_bytes for t in meta.tensors if t.name != "token_embd.weight") + embd.n_bytes / embd.shape[1]
    kv = 32 * 2 * 4096 * 2 * 65
    ms = ((weights + kv) / (150e9 * eff.mem_bw) + 32 * eff.layer_us * 1e-6
          + 4096 * 4 / PCIE + eff.allreduce_latency_us * 1e-6) * 1e3 + eff.step_overhead_ms
    assert s.itl_ms == pytest.approx(ms, rel=1e-3)
    assert 1000 / ms == pytest.approx(30.74, rel=0.032)


def test_backend_rows_fitted_for_metal_assumed_elsewhere():
    """llama.cpp answers on Metal use the row fitted on the public scoreboard (its source names the discussion, the
    rows and the error); CUDA (its fit is held back: see perf.EFFICIENCY), Vulkan and ROCm keep the assumed row."""
    meta = derive_meta(load_config(LLAMA_3B), "Q4_K_M")
    for device, gpu, label, url in (("Metal", "Apple M2 Max 32GB", "fitted", "discussions/4167"),
                                    ("CUDA", "RTX 4090", "assumed", None),
                                    ("Vulkan", "RTX 4090", "assumed", None), ("ROCm", "RTX 4090", "assumed", None)):
        s = speed(meta, plan(meta, n_ctx=4096, device=device), get_gpu(gpu), prompt_len=500, output_len=100)
        assert s.efficiency_label == label, device
        if url:
            assert url in s.sources["efficiency"] and "leave-one-chip-out" in s.sources["efficiency"]


def test_public_bench_rows_name_catalog_gpus():
    """Every row of the llama-bench data file used by the fit names a catalog GPU (as the catalog spells it) and
    carries its source; skipped rows say why."""
    doc = json.loads(BENCH.read_text())
    assert {r["backend"] for r in doc["rows"]} == {"Metal", "CUDA"}
    for r in doc["rows"]:
        assert r["source"] in (doc["sources"]["Metal"]["url"], doc["sources"]["CUDA"]["url"])
        if r.get("skip"):
            assert r["gpu"] is None and r["skip"]
        else:
            assert get_gpu(r["gpu"]).name == r["gpu"] and r["tg128"] > 0
