"""llama.cpp's AMD and Intel builds: ROCm (ggml-cuda compiled with HIP, devices "ROCm<N>", ggml/include/ggml-cuda.h:10-11)
and Vulkan (ggml-vulkan, "Vulkan<N>"), chosen with ``llamacpp_backend`` (default by vendor: NVIDIA cuda, AMD rocm,
Intel vulkan, Apple metal); SYCL refused by name. Values by hand from Llama-3.1-8B's config (Q4_K_M tensor types as in
tests/test_llamacpp_multigpu.py): KV per layer and cell 8 KV heads x 128 x (K + V) x 2 B = 4096 B."""
from __future__ import annotations

import pytest

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import get_gpu
from calculator.runtimes.llamacpp.memory import fa_support, plan
from calculator.runtimes.llamacpp.runtime import device_of
from tests.test_llamacpp_multigpu import LAYER, LLAMA8B_GGUF, MORE_BITS, MORE_BITS_EXTRA, OUTPUT, _meta

MiB = 2**20
ALL_LAYERS = 32 * LAYER + len(MORE_BITS) * MORE_BITS_EXTRA + OUTPUT  # 4403.49 MiB: every layer and the output


def test_default_backend_per_vendor_and_the_builds_each_gpu_runs():
    assert device_of(get_gpu("RTX 4090")) == "CUDA"
    assert device_of(get_gpu("AMD Radeon RX 7900 XTX")) == "ROCm"
    assert device_of(get_gpu("Intel Arc A770")) == "Vulkan"
    assert device_of(get_gpu("AMD Radeon RX 7900 XTX"), "vulkan") == "Vulkan"
    assert device_of(get_gpu("RTX 4090"), "vulkan") == "Vulkan"
    for gpu, backend in (("AMD Radeon RX 7900 XTX", "cuda"), ("RTX 4090", "rocm"), ("Intel Arc A770", "rocm"),
                         ("Intel Arc A770", "sycl"), ("RTX 4090", "cpu")):
        with pytest.raises(EngineInputError) as e:
            device_of(get_gpu(gpu), backend)
        assert e.value.field == "llamacpp_backend"
    with pytest.raises(EngineInputError, match="SYCL"):
        device_of(get_gpu("Intel Arc A770"), "sycl")


def test_rx_7900_xtx_rocm_buffers_by_hand(client, offline_hub):
    """-c 8192 on one RX 7900 XTX (ROCm): KV 32 x 8192 x 4096 B = 1024 MiB in ROCm0; the model buffer is the CUDA
    rule (alignment 128, no row padding: 4096 and 14336 are multiples of 512) = every layer + output = 4403.49 MiB;
    token_embd 128256 x 4096 Q4_K = 281.81 MiB mapped on the CPU; the logits 128256 x 4 B in ROCm_Host."""
    body = client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": "AMD Radeon RX 7900 XTX",
                                                       "ctx_size": "8192"}).json()
    assert body["verdict"] == "works", body
    assert body["kv_cache_mib"] == 32 * 8192 * 4096 / MiB == 1024
    assert body["model_buffer_mib"]["ROCm0"] == round(ALL_LAYERS / MiB, 2) == 4403.49
    assert body["model_buffer_mib"]["CPU_Mapped"] == round(128256 * 4096 * 144 / 256 / MiB, 2)
    assert body["kv_caches"][0]["buffers"] == {"ROCm0": 32 * 8192 * 4096}
    assert any(b["buft"] == "ROCm_Host" and b["kind"] == "output" and b["bytes"] == 128256 * 4 for b in body["buffers"])
    assert "ROCm0 compute buffer size" in "\n".join(body["log_lines"])
    assert body["serve_argv"][:5] == ["llama-server", "-hf", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "-hff",
                                      "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"]


def test_two_rx_7900_xtx_split_17_15_and_the_command_names_rocm_devices(client, offline_hub):
    body = client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": "AMD Radeon RX 7900 XTX",
                                                       "ctx_size": "8192", "gpus": "2"}).json()
    dev = body["devices"]
    assert set(dev) == {"ROCm0", "ROCm1"}
    assert dev["ROCm0"]["kv_buffer_mib"] == 17 * 8192 * 4096 / MiB == 544
    assert dev["ROCm1"]["kv_buffer_mib"] == 15 * 8192 * 4096 / MiB == 480 and dev["ROCm1"]["output_layer"]
    assert body["serve_argv"][-2:] == ["-dev", "ROCm0,ROCm1"]
    # ggml-cuda's device caps (async, events) are the HIP build's too: pipeline parallelism as on CUDA
    assert plan(_meta(), n_ctx=8192, n_gpus=2, device="ROCm").pipeline_parallel


def test_arc_a770_vulkan_buffers_by_hand(client, offline_hub):
    """Intel Arc A770 (16 GiB), default build vulkan: KV 1024 MiB in Vulkan0, logits in Vulkan_Host, model buffer
    Vulkan0 = the same tensor bytes (ggml-vulkan's alloc size is ggml_nbytes; no quantized row padding)."""
    body = client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": "Intel Arc A770",
                                                       "ctx_size": "8192"}).json()
    assert body["verdict"] == "works", body
    assert body["kv_caches"][0]["buffers"] == {"Vulkan0": 32 * 8192 * 4096}
    assert body["model_buffer_mib"]["Vulkan0"] == round(ALL_LAYERS / MiB, 2)
    assert any(b["buft"] == "Vulkan_Host" and b["kind"] == "output" for b in body["buffers"])
    two = client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": "Intel Arc A770",
                                                      "ctx_size": "8192", "gpus": "2"}).json()
    assert two["serve_argv"][-2:] == ["-dev", "Vulkan0,Vulkan1"]
    assert two["devices"]["Vulkan0"]["kv_buffer_mib"] == 544


def test_sycl_and_a_wrong_build_are_refused_naming_the_field(client, offline_hub):
    for gpu, backend in (("Intel Arc A770", "sycl"), ("AMD Radeon RX 7900 XTX", "cuda")):
        r = client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": gpu, "llamacpp_backend": backend})
        assert r.status_code == 400 and r.json()["field"] == "llamacpp_backend", r.content


def test_flash_attention_per_backend_from_supports_op():
    """ggml-cuda (and so ROCm) has no iq4_nl flash-attention kernel (fattn.cu:525-539), ggml-vulkan has
    (ggml-vulkan.cpp:15471-15486): with -fa auto and K iq4_nl the ROCm build resolves it to disabled, Vulkan to
    enabled. Head size 128 runs on both; 72 with V 64 on neither ggml-cuda kernel; Vulkan needs multiples of 8."""
    assert fa_support("ROCm", {(128, 128)}, "f16", "f16")[0] is True
    assert fa_support("ROCm", {(128, 128)}, "iq4_nl", "f16")[0] is False
    assert fa_support("Vulkan", {(128, 128)}, "iq4_nl", "f16")[0] is True
    assert fa_support("CUDA", {(72, 64)}, "f16", "f16")[0] is False
    assert fa_support("Vulkan", {(72, 64)}, "f16", "f16")[0] is True
    assert fa_support("Vulkan", {(100, 100)}, "f16", "f16")[0] is False
    assert fa_support("Vulkan", {(128, 128)}, "bf16", "f16")[0] is False
    rocm = plan(_meta(), n_ctx=8192, device="ROCm", cache_type_k="iq4_nl")
    vk = plan(_meta(), n_ctx=8192, device="Vulkan", cache_type_k="iq4_nl")
    assert rocm.fa_enabled is False and vk.fa_enabled is True
    assert rocm.kv_bytes == vk.kv_bytes  # the cache is made before -fa auto is resolved
    # without flash attention the ROCm0 compute buffer holds the f32 KQ [8192 x 512 x 32] = 512 MiB
    cb = next(b for b in rocm.buffers if b.kind == "compute" and b.buft == "ROCm0")
    assert cb.bytes >= 8192 * 512 * 32 * 4


@pytest.mark.parametrize("gpu, backend, host", [("RTX 3090", None, "CUDA_Host"),
                                                ("AMD Radeon RX 7900 XTX", None, "ROCm_Host"),
                                                ("Intel Arc A770", None, "Vulkan_Host"),
                                                ("RTX 3090", "vulkan", "Vulkan_Host")])
def test_the_host_compute_buffer_has_the_gpu_backends_host_type(client, offline_hub, gpu, backend, host):
    """With a GPU the CPU backend's compute buffer is allocated in the first device's host buffer type
    (llama-cpp-python 0.3.36 vendor/llama.cpp/src/llama-context.cpp:408-421 "use the host buffer of the first
    device CPU") and logged under its name (:740-742 ggml_backend_buft_name): GGML_CUDA_NAME "_Host" (ggml-cuda.cu:1258;
    "ROCm" in the HIP build, ggml-cuda.h:10-11), GGML_VK_NAME "_Host" (ggml-vulkan.cpp:13061). A public SYCL log
    shows the same pattern: "SYCL_Host compute buffer size = 87.14 MiB" (llama.cpp issue #17643, lcpp-016 in
    /work/shared/cases/runtime_startup_logs.json). Metal has no host type (ggml-metal.cpp:822): "CPU" stays."""
    params = LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": gpu, "ctx_size": "8192"}
    if backend:
        params["llamacpp_backend"] = backend
    body = client.get("/api/estimate", params).json()
    assert host in body["compute_buffer_mib"] and "CPU" not in body["compute_buffer_mib"]
    lines = "\n".join(body["log_lines"])
    assert f"{host} compute buffer size" in lines and " CPU compute buffer size" not in lines


def test_metal_host_compute_buffer_stays_cpu():
    """Metal: the CPU backend's compute buffer is the plain CPU type (no host buffer type, ggml-metal.cpp:822), as
    the public Metal log in test_llamacpp_memory logs it ("CPU compute buffer size = 14.01 MiB")."""
    p = plan(_meta(), n_ctx=8192, device="Metal")
    assert {b.buft for b in p.buffers if b.kind == "compute"} == {"MTL0", "CPU"}
