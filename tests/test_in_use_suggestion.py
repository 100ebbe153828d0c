"""``--gpu-memory-in-use-gib`` beyond what vLLM's default share leaves: vLLM refuses to start ("Free memory on device
... is less than desired GPU memory utilization ... Decrease GPU memory utilization", vllm/v1/worker/utils.py:761-770
in 0.32.0), and the answer offers the largest --gpu-memory-utilization that fits beside the memory in use, planned
again before it is offered."""
from __future__ import annotations

import math
import zipfile

import pytest

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
H100_TOTAL_GIB = 79.19  # an H100 80GB HBM3's total memory as a public vLLM 0.19.0 log gives it (../shared/cases llmd-001)


pytestmark = pytest.mark.usefixtures("offline_hub")


def _get(client, **params) -> dict:
    r = client.get("/api/estimate", {"model": LLAMA, "gpu": "H100", "max_model_len": "8192", **params})
    assert r.status_code == 200, r.content
    return r.json()


def test_the_largest_share_beside_40_gib_in_use_is_offered_and_works(client):
    body = _get(client, gpu_memory_in_use_gib="40")
    assert body["verdict"] == "does_not_start"
    assert "Decrease GPU memory utilization" in body["verdict_reasons"][0]
    # by hand: free = 79.19 - 40 = 39.19 GiB; 39.19 / 79.19 = 0.4949 -> 0.49 in hundredths (0.50 x 79.19 = 39.6 > 39.19)
    free = H100_TOTAL_GIB - 40
    expected = math.floor(free / H100_TOTAL_GIB * 100) / 100
    assert expected == 0.49 and 0.50 * H100_TOTAL_GIB > free
    offered = [s for s in body["suggestions"] if "gpu_memory_utilization" in s["params"]]
    assert offered and offered[0]["params"] == {"gpu_memory_utilization": "0.49"}
    assert "beside the 40 GiB in use" in offered[0]["label"] and "utils.py:761-770" in offered[0]["label"]
    assert _get(client, gpu_memory_in_use_gib="40", gpu_memory_utilization="0.49")["verdict"] == "works"
    assert _get(client, gpu_memory_in_use_gib="40", gpu_memory_utilization="0.5")["verdict"] == "does_not_start"


def test_no_share_is_offered_when_the_weights_do_not_fit_beside_what_is_in_use(client):
    # 72 GiB in use leaves 7.19 GiB: under the 8B model's 14.99 GiB of bf16 weights at any share
    body = _get(client, gpu_memory_in_use_gib="72")
    assert body["verdict"] != "works"
    assert not any(set(s["params"]) == {"gpu_memory_utilization"} for s in body["suggestions"])


def test_the_cited_lines_are_in_the_0_32_0_wheel():
    from compat import fetch

    from calculator.engine.runtime import FREE_MEMORY_CHECK_SOURCE

    whl = fetch.find_wheel(fetch.default_wheel_dir(), "0.32.0")
    if whl is None:
        pytest.skip(f"vllm 0.32.0 wheel not in {fetch.default_wheel_dir()}")
    z = zipfile.ZipFile(whl)
    utils = z.read("vllm/v1/worker/utils.py").decode().splitlines()
    worker = z.read("vllm/v1/worker/gpu_worker.py").decode().splitlines()
    assert "vllm/v1/worker/utils.py:724-726" in FREE_MEMORY_CHECK_SOURCE
    assert "requested_memory = math.ceil(" in utils[723] and "gpu_memory_utilization" in utils[724]
    assert utils[760].strip() == "if init_snapshot.free_memory < requested_memory:"
    assert "Decrease GPU memory" in "\n".join(utils[760:770])
    assert "request_memory(" in worker[534]
