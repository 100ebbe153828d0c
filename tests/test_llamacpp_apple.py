"""llama.cpp and Ollama on Apple Silicon: the Metal device and the CPU share one unified memory.

From llama.cpp's source (llama-cpp-python 0.3.36, vendor/llama.cpp): the Metal device's memory is
``recommendedMaxWorkingSetSize`` (ggml-metal-device.m:1501-1511), the CPU device's the whole physical RAM
(ggml-cpu.cpp:365-382), and ``--fit`` fits only the Metal device, sending the layers that do not fit to the CPU
buffer type (common/fit.cpp:332-371, :576-577, :654-658) -- the same memory. So the whole plan must fit what a model
can use of the Mac: max(the working set, the memory less the 4 GiB ggml-org's LlamaBarn keeps for macOS and other
apps), and layers on the CPU read that memory at the chip's own bandwidth, not a PC's DDR5.

Expected figures are computed here by hand: Llama-3.1-8B's weights from its config at Q8_0 (34 B per 32 values,
ggml-common.h block_q8_0) against the 8.54 GB the Hub lists for the file, the f16 KV cache from the attention shape,
the working set as 2/3 of unified memory (the catalog's documented macOS default)."""
from __future__ import annotations

import pytest

from calculator.engine.gpus import get_gpu
from tests.conftest import load_config

GiB, MiB = 2**30, 2**20
REPO = "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"
Q8 = {"model": REPO, "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf", "runtime": "llama.cpp"}


pytestmark = pytest.mark.usefixtures("offline_hub")


def _q8_weights() -> int:
    """Llama-3.1-8B at Q8_0 by hand: every matrix (q, k, v, o, gate, up, down per layer; token_embd and output) at
    34 B per 32 values, the norms f32, rope_freqs (n_rot / 2 f32)."""
    c = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    e, ff, n, v = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    kv = c["num_key_value_heads"] * (e // c["num_attention_heads"])
    matrices = n * (2 * e * e + 2 * e * kv + 3 * e * ff) + 2 * v * e
    return matrices * 34 // 32 + (2 * n + 1) * e * 4 + (e // c["num_attention_heads"]) // 2 * 4


def _kv(ctx: int) -> int:
    """f16 K and V: 2 x layers x cells x KV heads x head size x 2 B."""
    c = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    head = c["hidden_size"] // c["num_attention_heads"]
    return 2 * c["num_hidden_layers"] * ctx * c["num_key_value_heads"] * head * 2


def test_q8_0_8b_does_not_fit_an_8gb_mac(client):
    """The fresh-user case: Llama-3.1-8B Q8_0 with --ctx-size 8192 on an 8 GB M1. --fit keeps only the output layer
    on Metal and leaves every layer in CPU memory, which on a Mac is the same 8 GiB: the weights (7.95 GiB by hand,
    inside the 8.54 GB file the Hub lists) and the 1 GiB KV cache alone are 8.95 GiB, more than the whole machine,
    let alone the 5.33 GiB a model can use of it. Not "depends on free system RAM"."""
    weights, kv = _q8_weights(), _kv(8192)
    assert kv == GiB  # 2 x 32 x 8192 x 8 x 128 x 2 B
    assert 8.54e9 - 10e6 < weights < 8.54e9  # the listed file: the tensor data and a few MB of header
    assert (weights + kv) / GiB == pytest.approx(8.947, abs=1e-3) and weights + kv > 8 * GiB
    body = client.get("/api/estimate", Q8 | {"gpu": "M1 8GB", "ctx_size": "8192"}).json()
    u = body["unified_memory"]
    assert body["verdict"] == "does_not_fit"
    assert u["status"] == "does_not_fit" and u["ram_gib"] == 8.0
    assert u["parts_gib"]["weights"] == round(weights / GiB, 2) and u["parts_gib"]["kv"] == 1.0
    assert u["total_gib"] >= round((weights + kv) / GiB, 2)
    # what a model can use: max(2/3 x 8 GiB working set, 8 - 4 GiB) = 5.33 GiB
    assert u["usable_gib"] == round(max(8 * GiB * 2 / 3, 4 * GiB) / GiB, 2) == 5.33
    assert "more than the whole 8.00 GiB" in body["reason"] and "system RAM" not in body["reason"]
    assert body["verdict_condition"] is None
    assert body["fit"]["status"] == "fitted" and body["fit"]["n_gpu_layers"] == 1  # the output layer only
    # the product's suggestion: the largest smaller quant of the same repo that fits (Q3_K_M, 4.02 GB: 3.74 GiB +
    # the 1 GiB KV cache + ~0.4 GiB compute < 5.33); with this file nothing fits (a q8_0 KV cache saves 0.5 GiB, a
    # shorter context at most the 1 GiB of KV: the weights alone are 7.95 GiB)
    assert [s["params"] for s in body["suggestions"]] == [{"gguf_file": "Meta-Llama-3.1-8B-Instruct-Q3_K_M.gguf"}]


def test_a_smaller_quant_fits_the_8gb_mac_with_layers_on_the_cpu(client):
    """Q3_K_M (4.02 GB listed, 3.74 GiB) at 8192: more than Metal's 5.33 GiB working set less --fit's 1 GiB margin
    once the KV cache and compute buffers are on it, so --fit leaves layers in CPU memory; the whole (weights once:
    the Metal buffer is a view of the same mmap'd file) fits the 5.33 GiB. The CPU's layers are read at the M1's own
    68.25 GB/s, the copies between the devices stay in the unified memory."""
    body = client.get("/api/estimate", Q8 | {"gguf_file": "Meta-Llama-3.1-8B-Instruct-Q3_K_M.gguf", "gpu": "M1 8GB",
                                             "ctx_size": "8192"}).json()
    u = body["unified_memory"]
    assert body["verdict"] == "works" and u["status"] == "fits"
    assert u["parts_gib"]["weights"] == pytest.approx(4.02e9 / GiB, abs=0.01) and u["parts_gib"]["kv"] == 1.0
    assert u["total_gib"] + u["error_mib"] / 1024 <= u["usable_gib"] == 5.33
    assert body["fit"]["status"] == "fitted" and body["fit"]["n_gpu_layers"] < 33
    assert body["verdict_condition"] is None  # the Mac's memory is known: no "free system RAM" condition
    assert body["output_tokens_per_s"] > 0
    src = body["speed"]["sources"]
    assert "68.25 GB/s" in src["host_bandwidth"] and "DDR5" not in src["host_bandwidth"]
    assert "no PCIe" in src["pcie"]


def test_fits_the_macs_memory_but_not_metals_working_set(client):
    """Q8_0 at 16384 on a 16 GB M1: weights 7.95 GiB + 2 GiB KV + compute > the working set (2/3 of 16 GiB = 10.67 GiB)
    less --fit's 1024 MiB margin, so --fit moves layers to the CPU buffer type (fit.cpp:654-658); they stay in the
    same memory, and the whole fits the 12 GiB a model can use (16 GiB - the 4 GiB macOS keeps, more than the working
    set here): it works, its CPU layers read at the M1's bandwidth."""
    weights, kv = _q8_weights(), _kv(16384)
    working_set = 16 * GiB * 2 / 3
    body = client.get("/api/estimate", Q8 | {"gpu": "M1 16GB", "ctx_size": "16384"}).json()
    u = body["unified_memory"]
    compute = u["parts_gib"]["compute"] * GiB
    assert weights + kv + compute > working_set - 1024 * MiB  # not all on Metal
    assert weights + kv + compute < 12 * GiB  # within 16 - 4 GiB
    assert u["usable_gib"] == 12.0 and u["working_set_gib"] == round(working_set / GiB, 2)
    assert u["total_gib"] == pytest.approx((weights + kv + compute) / GiB, abs=0.02)
    assert body["verdict"] == "works" and u["status"] == "fits" and body["verdict_condition"] is None
    assert body["fit"]["status"] == "fitted" and body["fit"]["n_gpu_layers"] < 33
    assert any(line.startswith("llama_kv_cache:        CPU KV buffer size") for line in body["log_lines"])
    assert body["speed"]["sources"]["host_bandwidth"].startswith("the Mac's unified memory, 68.25 GB/s")
    # twice the context: 4 GiB of KV, 12.35 GiB in all: within the 16 GiB but past what macOS leaves a model
    long = client.get("/api/estimate", Q8 | {"gpu": "M1 16GB", "ctx_size": "32768"}).json()
    assert long["verdict"] == "does_not_fit" and long["unified_memory"]["total_gib"] > 12.0
    assert (weights + _kv(32768)) / GiB < 16 and "of the 4.00 GiB they keep" in long["reason"]
    # ... and the suggestions: a q8_0 KV cache (half the 4 GiB) or the longest context that fits the 12 GiB
    params = [s["params"] for s in long["suggestions"]]
    assert {"cache_type_k": "q8_0", "cache_type_v": "q8_0"} in params
    ctx = next(int(p["ctx_size"]) for p in params if "ctx_size" in p)
    assert 16384 < ctx < 32768 and ctx % 1024 == 0


def test_everything_on_metal_is_unchanged(client):
    """A model inside the working set is placed all on Metal (--fit changes nothing) and works: the whole is what
    Metal holds plus the CPU's input embedding share and buffers, within the working set."""
    body = client.get("/api/estimate", Q8 | {"gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "gpu": "M1 16GB",
                                             "ctx_size": "8192"}).json()
    assert body["verdict"] == "works" and body["fit"]["status"] == "no_change"
    assert body["unified_memory"]["status"] == "fits"
    assert body["unified_memory"]["total_gib"] < get_gpu("M1 16GB").metal_working_set_gib


@pytest.mark.parametrize("release", ["0.32.15", "0.21.0"])
def test_ollama_on_the_8gb_mac(client, release):
    """Ollama does not save it either: from 0.30 llama-server's --fit places the layers and Ollama's scheduler
    checks the free memory only to evict other models (server/sched.go:543-570 at v0.32.15); before, its scheduler
    moves what does not fit Metal's working set to the CPU and on macOS checks no system memory (llm/server.go:1054-1068
    at v0.21.0). The Mac's memory is the limit: does not fit, with the smaller quant that does."""
    body = client.get("/api/estimate", Q8 | {"runtime": "ollama", "gpu": "M1 8GB", "ctx_size": "8192",
                                             "ollama_release": release}).json()
    assert body["verdict"] == "does_not_fit" and body["unified_memory"]["status"] == "does_not_fit"
    assert f"Ollama {release} would still start it" in body["reason"]
    assert "machine's RAM must hold" not in body["reason"] and body["verdict_condition"] is None
    assert body["suggestions"] and all("gguf_file" in s["params"] for s in body["suggestions"])


def test_ollama_before_0_30_on_a_mac_depends_only_on_its_layout(client):
    """Ollama 0.21.0 with Q8_0 at 24576 on a 16 GB M1: every layer on Metal (7.95 GiB + 3 GiB of KV cache) does not
    fit the 10.67 GiB working set, so its scheduler offloads fewer (not modelled); the rest stays in the same unified
    memory, which holds the whole (under 12 GiB)."""
    assert _q8_weights() + _kv(24576) > 16 * GiB * 2 / 3
    body = client.get("/api/estimate", Q8 | {"runtime": "ollama", "gpu": "M1 16GB", "ctx_size": "24576",
                                             "ollama_release": "0.21.0"}).json()
    assert body["verdict"] == "depends" and body["unified_memory"]["status"] == "fits"
    assert "the same unified memory, which holds the whole" in body["verdict_condition"]
    assert "machine's RAM must hold" not in body["verdict_condition"]


def test_a_pc_still_depends_on_its_unknown_ram(client):
    """On a PC the CPU's memory is separate and not an input: the same Q8_0 spilling from an 8 GB card stays
    "depends" on it, and no unified-memory figure is given."""
    body = client.get("/api/estimate", Q8 | {"gpu": "RTX 4060 Ti 8GB", "ctx_size": "8192"}).json()
    assert body["unified_memory"] is None
    assert body["verdict"] == "depends" and "free system RAM" in body["verdict_condition"]
