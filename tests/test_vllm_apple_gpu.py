"""vLLM on an Apple GPU: vLLM has no Metal / MPS platform (on macOS it picks its CPU platform), so the calculator
gives no GPU plan for it and points to llama.cpp / Ollama, as SGLang's answer refuses a Mac, on every surface."""
from __future__ import annotations

import zipfile
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
MAC = "Apple M3 Max 128GB"


pytestmark = pytest.mark.usefixtures("offline_hub")


@pytest.mark.parametrize("gpu", [MAC, "M2 Max 96GB", "custom:64GiB:apple"])
def test_the_api_refuses_vllm_on_an_apple_gpu_as_it_refuses_sglang(client, gpu):
    body = client.get("/api/estimate", {"model": LLAMA, "gpu": gpu}).json()
    assert body["field"] == "gpu"
    assert "no Apple GPU (Metal / MPS) backend" in body["error"]
    assert "runtime llama.cpp / ollama" in body["error"]
    # the same surface answer SGLang gives a Mac: a 400 naming the gpu, no plan
    sglang = client.get("/api/estimate", {"model": LLAMA, "gpu": gpu, "runtime": "sglang"})
    vllm = client.get("/api/estimate", {"model": LLAMA, "gpu": gpu})
    assert sglang.status_code == vllm.status_code == 400
    assert sglang.json()["field"] == "gpu"


def test_the_page_and_the_command_refuse_it_too(client):
    page = client.get("/", {"model": LLAMA, "gpu": MAC})
    assert page.status_code == 400 and "no Apple GPU (Metal / MPS) backend" in page.content.decode()
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", LLAMA, "--gpu", MAC, stdout=StringIO(), stderr=StringIO())
    assert err.value.returncode == 2 and str(err.value).startswith("--gpu: Apple M3 Max 128GB: vLLM has no Apple GPU")


def test_llama_cpp_and_other_vllm_devices_still_answer(client):
    assert client.get("/api/estimate", {"model": LLAMA, "gpu": MAC, "runtime": "llama.cpp"}).status_code == 200
    for gpu in ("H100", "MI300X", "Intel Data Center GPU Max 1550", "cpu"):  # CUDA, ROCm, XPU, CPU platforms
        assert client.get("/api/estimate", {"model": LLAMA, "gpu": gpu}).status_code == 200, gpu


def test_the_cited_lines_are_in_the_0_32_0_wheel():
    """vLLM 0.32.0's built-in platform plugins have no Apple GPU, and on macOS the CPU plugin answers."""
    from compat import fetch

    from calculator.runtimes.vllm import APPLE_PLATFORM_SOURCE

    whl = fetch.find_wheel(fetch.default_wheel_dir(), "0.32.0")
    if whl is None:
        pytest.skip(f"vllm 0.32.0 wheel not in {fetch.default_wheel_dir()}")
    lines = zipfile.ZipFile(whl).read("vllm/platforms/__init__.py").decode().splitlines()
    assert APPLE_PLATFORM_SOURCE.startswith("vllm/platforms/__init__.py:174-229")
    assert lines[173].startswith("def cpu_platform_plugin()")
    assert 'is_cpu = sys.platform.startswith("darwin")' in "\n".join(lines[190:198])
    plugins = "\n".join(lines[230:237])
    assert plugins.startswith("builtin_platform_plugins = {")
    assert [k for k in ("tpu", "cuda", "rocm", "xpu", "cpu", "mps", "metal") if f'"{k}":' in plugins] == [
        "tpu", "cuda", "rocm", "xpu", "cpu"]
