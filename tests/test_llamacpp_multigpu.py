"""llama.cpp on several identical CUDA GPUs (-sm layer, the default; -sm none with -mg): which device holds each
layer, its KV cache, the output layer and the compute buffers, as read from llama.cpp's source
(vendor/llama.cpp/src/llama-model.cpp:1556-1614 of llama-cpp-python 0.3.36), computed here by hand from
Llama-3.1-8B's config. The CPU oracle cannot run several GPUs, so these are source-derived, not log-checked."""
from __future__ import annotations

import pytest

from calculator.runtimes.llamacpp.launch import launch_argv
from calculator.runtimes.llamacpp.memory import CPU, NotModelled, placement, plan
from calculator.runtimes.llamacpp.quant_rules import derive_meta
from tests.conftest import load_config

MiB = 2**20
LLAMA8B_GGUF = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"}

# Llama-3.1-8B Q4_K_M by hand (ggml block sizes: Q4_K 144 B / 256 values, Q6_K 210 B / 256 values; F32 norms):
# attn_q 4096x4096 Q4_K, attn_k / attn_v 1024x4096 Q4_K, attn_output 4096x4096 Q4_K, ffn_gate / ffn_up / ffn_down
# 14336x4096 Q4_K, two 4096-value F32 norms. llama-quant.cpp's Q4_K_M gives attn_v and ffn_down Q6_K on the layers
# of use_more_bits(i, 32): i < 4, i >= 28, (i - 4) % 3 == 2 -> 0-3, 6, 9, 12, 15, 18, 21, 24, 27, 28-31.
Q4K, Q6K = 144 / 256, 210 / 256
LAYER = int(2 * 4096 * 4096 * Q4K + 2 * 1024 * 4096 * Q4K + 3 * 14336 * 4096 * Q4K + 2 * 4096 * 4)
MORE_BITS_EXTRA = int(1024 * 4096 * (Q6K - Q4K) + 14336 * 4096 * (Q6K - Q4K))
MORE_BITS = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}
OUTPUT = int(128256 * 4096 * Q6K) + 4096 * 4  # output.weight Q6_K + output_norm F32
KV_PER_LAYER_PER_CELL = 8 * 128 * 2 * 2  # 8 KV heads x 128, K and V, f16


def _meta():
    return derive_meta(load_config("meta-llama__Llama-3.1-8B-Instruct.json"), "Q4_K_M", source="test")


def test_32_layers_on_two_equal_gpus_split_17_15_with_the_output_on_the_last():
    """act_gpu_layers = 33 units (32 layers + output), split points 0.5 / 1.0: unit il goes to the first point above
    il / 33 (std::upper_bound, llama-model.cpp:1595), so il <= 16 -> GPU0 (17 layers), 17..31 and the output
    (32 / 33) -> GPU1. Not 16/16: the output layer counts as a unit."""
    pl = placement(32, -1, n_gpus=2)
    assert pl.layers == tuple([0] * 17 + [1] * 15) and pl.output == 1
    # 4 GPUs: il / 33 < 0.25 -> il <= 8 (9 layers), < 0.5 -> 9..16 (8), < 0.75 -> 17..24 (8), the rest 25..31 (7)
    pl = placement(32, -1, n_gpus=4)
    assert [pl.layers.count(g) for g in range(4)] == [9, 8, 8, 7] and pl.output == 3
    # -ts 3,1: point 0.75 -> il / 33 < 0.75 -> il <= 24 on GPU0; -sm none -mg 1: everything on GPU1
    assert placement(32, -1, n_gpus=2, tensor_split=[3, 1]).layers.count(0) == 25
    pl = placement(32, -1, n_gpus=2, split_mode="none", main_gpu=1)
    assert set(pl.layers) == {1} and pl.output == 1
    # -ngl 20 over 2 GPUs: i_gpu_start = 33 - 20 = 13; units 13..32 over 2 GPUs: (il - 13) / 20 < 0.5 -> 13..22
    pl = placement(32, 20, n_gpus=2)
    assert pl.layers == tuple([CPU] * 13 + [0] * 10 + [1] * 9) and pl.output == 1


def test_per_device_buffers_of_llama_8b_q4_k_m_on_two_gpus_by_hand():
    """-c 8192 on 2 CUDA GPUs: model buffers CUDA0 = layers 0..16, CUDA1 = layers 17..31 + the output layer; KV per
    device = its layers x 8192 cells x 4096 B; token_embd stays in CPU_Mapped; pipeline parallelism on (every layer
    offloaded, -sm layer, llama-context.cpp:430-457)."""
    p = plan(_meta(), n_ctx=8192, n_gpus=2)
    model = {b.buft: b.bytes for b in p.buffers if b.kind == "model"}
    gpu0 = 17 * LAYER + sum(MORE_BITS_EXTRA for il in range(17) if il in MORE_BITS)
    gpu1 = 15 * LAYER + sum(MORE_BITS_EXTRA for il in range(17, 32) if il in MORE_BITS) + OUTPUT
    assert model["CUDA0"] == gpu0 and round(gpu0 / MiB, 2) == 2113.28
    assert model["CUDA1"] == gpu1 and round(gpu1 / MiB, 2) == 2290.21
    kv = p.kv_caches[0].buffers
    assert kv == {"CUDA0": 17 * 8192 * KV_PER_LAYER_PER_CELL, "CUDA1": 15 * 8192 * KV_PER_LAYER_PER_CELL}
    assert kv["CUDA0"] == 544 * MiB and kv["CUDA1"] == 480 * MiB
    assert p.layer_devices == [0] * 17 + [1] * 15 and p.output_device == 1 and p.pipeline_parallel
    assert "llama_kv_cache:      CUDA1 KV buffer size =   480.00 MiB" in p.log_lines()
    # the compute buffer of CUDA1 (the output layer's device), by hand: logits 128256 x 512 x 4 B + 2 hidden states
    # (2 x 4096 x 512 x 4 B) = 266.5 MiB peak, + the hidden state copied in from CUDA0 (8 MiB), + 3 more pipeline
    # copies of the split inputs: the f16 KQ mask 8192 x 512 x 2 B, the hidden state and the positions (512 x 4 B)
    cb = next(b for b in p.buffers if b.kind == "compute" and b.buft == "CUDA1")
    hidden = 4096 * 512 * 4
    expect = 128256 * 512 * 4 + 2 * hidden + hidden + 3 * (8192 * 512 * 2 + hidden + 512 * 4)
    assert cb.bytes == expect and cb.error_bytes > 3 * (8192 * 512 * 2 + hidden)
    # one GPU: the same total model bytes in one CUDA0 buffer, no pipeline parallelism
    one = plan(_meta(), n_ctx=8192)
    assert next(b.bytes for b in one.buffers if b.buft == "CUDA0" and b.kind == "model") == gpu0 + gpu1
    assert not one.pipeline_parallel


def test_row_and_tensor_split_and_several_metal_devices_are_refused_by_name():
    with pytest.raises(NotModelled) as e:
        plan(_meta(), n_ctx=4096, n_gpus=2, split_mode="row")
    assert e.value.field == "split_mode"
    with pytest.raises(NotModelled):
        plan(_meta(), n_ctx=4096, n_gpus=2, split_mode="tensor")
    with pytest.raises(NotModelled) as e:
        plan(_meta(), n_ctx=4096, n_gpus=2, device="Metal")
    assert e.value.field == "n_gpus"
    with pytest.raises(ValueError):
        placement(32, -1, n_gpus=2, split_mode="none", main_gpu=2)


def test_the_command_pins_the_gpus_and_passes_the_split_flags():
    argv = launch_argv("m.gguf", n_ctx=8192, n_gpus=2, tensor_split="3,1")
    assert argv[-4:] == ["-dev", "CUDA0,CUDA1", "-ts", "3,1"]
    argv = launch_argv("m.gguf", n_ctx=8192, n_gpus=4, split_mode="none", main_gpu=2)
    assert argv[-6:] == ["-dev", "CUDA0,CUDA1,CUDA2,CUDA3", "-sm", "none", "-mg", "2"]
    assert "-dev" not in launch_argv("m.gguf", n_ctx=8192)


def test_a_device_that_overflows_while_the_total_fits_is_named(client, offline_hub):
    """2 x 16 GiB, -c 131072, -ts 4,1: il / 33 < 0.8 -> 27 layers on CUDA0, whose KV alone is 27 x 131072 x 4096 B
    = 13,824 MiB, and with 27 layers of weights (>= 27 x LAYER B = 3,160 MiB) above its 16,384 MiB; CUDA1 holds 5
    layers and the output. The whole (16 GiB KV + 4.3 GiB weights) is within 2 x 16 GiB: the reason names CUDA0."""
    body = client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": "custom:16384MiB:sm89",
                                                       "ctx_size": "131072", "gpus": "2",
                                                       "tensor_split": "4,1"}).json()
    assert body["verdict"] == "does_not_fit", body
    assert body["reason"].startswith("CUDA0 overflows") and "tensor-split" in body["reason"]
    dev = body["devices"]
    assert dev["CUDA0"]["layers"] == 27 and dev["CUDA0"]["kv_buffer_mib"] == 27 * 131072 * 4096 / MiB == 13824
    assert dev["CUDA0"]["model_buffer_mib"] >= 27 * LAYER / MiB and dev["CUDA0"]["fits"] is False
    assert dev["CUDA1"]["layers"] == 5 and dev["CUDA1"]["output_layer"] and dev["CUDA1"]["fits"] is True
    assert body["serve_argv"][-4:] == ["-dev", "CUDA0,CUDA1", "-ts", "4,1"]
    assert any("not checked against a" in n for n in body["notes"])
    # the default (equal) split spreads it: 17 / 15 layers, both fit
    even = client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": "custom:16384MiB:sm89",
                                                       "ctx_size": "131072", "gpus": "2"}).json()
    assert even["verdict"] == "works", even
    assert even["devices"]["CUDA0"]["kv_buffer_mib"] == 17 * 512 and even["devices"]["CUDA1"]["kv_buffer_mib"] == 15 * 512
    # the answer counts both GPUs (it said "1x" and "1 node x 1 GPU" before)
    assert even["layout"] == "1 machine x 2 GPUs, --split-mode layer (layers split evenly)"
    page = client.get("/", LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": "RTX 3090", "gpus": "2"}, follow=True)
    assert "on 2× NVIDIA GeForce RTX 3090" in page.content.decode()


@pytest.mark.parametrize("params,field", [
    ({"runtime": "llama.cpp", "gpus": "2", "split_mode": "row"}, "split_mode"),
    ({"runtime": "llama.cpp", "gpus": "2", "tensor_split": "1,1,1"}, "tensor_split"),
    ({"runtime": "llama.cpp", "gpus": "2", "main_gpu": "2"}, "main_gpu"),
    ({"runtime": "ollama", "gpus": "2"}, "gpus"),
    ({"runtime": "vllm", "gpus": "2", "gguf_file": None}, "gpus"),
])
def test_what_is_not_modelled_or_wrong_is_refused_naming_the_field(client, offline_hub, params, field):
    query = {k: v for k, v in (LLAMA8B_GGUF | {"gpu": "RTX 3090"} | params).items() if v is not None}
    r = client.get("/api/estimate", query)
    assert r.status_code == 400 and r.json()["field"] == field
