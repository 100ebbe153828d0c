"""A tensor-parallel group larger than one machine (gpus_per_node) all-reduces over the network between nodes
(perf.spans_nodes, perf.cross_node_link): vLLM's custom all-reduce is off across nodes (vllm 0.32
distributed/device_communicators/custom_all_reduce.py:204-205, :234-239), so NCCL runs it over the node's port."""
from __future__ import annotations

import pytest

from calculator.engine import EngineInput, perf

from .conftest import load_config

H100 = "NVIDIA H100 80GB HBM3"


def test_a_tensor_parallel_group_larger_than_a_node_all_reduces_over_the_network():
    """Llama-3.1-70B (80 layers, hidden 8192) at TP16 on A100-SXM4-40GB nodes of 8: each decode step's 2 x 80
    all-reduces of one token's hidden state (8192 x 2 B) run over a 200 Gb/s HDR port per GPU (25 GB/s, DGX A100)
    at 30 us each, where TP8 inside the node runs them over NVLink 3 (300 GB/s) at the row's 10 us."""
    cfg = load_config("meta-llama__Llama-3.1-70B-Instruct.json")
    msg = 8192 * 2

    def comm_ms(tp: int, per_node: int, link_gbs: float, latency_us: float) -> float:
        return 2 * 80 * (latency_us * 1e-6 + 2 * (tp - 1) / tp * msg / (link_gbs * 1e9)) * 1e3

    inp = EngineInput(hf_config=cfg, gpu="NVIDIA A100-SXM4-40GB", max_model_len=16384, tensor_parallel_size=16)
    r16 = perf.estimate_speed(inp)
    assert r16.decode.comm_ms == pytest.approx(comm_ms(16, 8, 25, 30), rel=1e-6)
    assert any(w.startswith("tensor parallel over 16 GPUs spans nodes of 8") for w in r16.warnings)
    assert "spans nodes of 8" in r16.sources["hardware.interconnect"]
    r8 = perf.estimate_speed(inp.model_copy(update={"tensor_parallel_size": 8}))
    assert r8.decode.comm_ms == pytest.approx(comm_ms(8, 8, 300, 10), rel=1e-6)
    assert not any("spans nodes" in w for w in r8.warnings)
    # the same TP8 over two 4-GPU machines: the network, and slower than inside one node
    r8x2 = perf.estimate_speed(inp.model_copy(update={"tensor_parallel_size": 8, "gpus_per_node": 4}))
    assert r8x2.decode.comm_ms == pytest.approx(comm_ms(8, 4, 25, 30), rel=1e-6)
    assert r8x2.itl_ms > r8.itl_ms
    # an H100 node's port is 400 Gb/s NDR (DGX H100: 8x ConnectX-7)
    h = perf.estimate_speed(inp.model_copy(update={"gpu": H100, "tensor_parallel_size": 16}))
    assert h.decode.comm_ms == pytest.approx(comm_ms(16, 8, 50, 30), rel=1e-6)


@pytest.mark.django_db
def test_gpus_per_node_reaches_the_speed_of_the_api(client):
    q = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "A100-SXM4-40GB", "max_model_len": "16384",
         "tensor_parallel_size": "8"}
    one = client.get("/api/estimate", q).json()
    two = client.get("/api/estimate", q | {"gpus_per_node": "4"}).json()
    assert two["itl_ms"] > one["itl_ms"] and "spans nodes of 4" in two["speed_sources"]["hardware.interconnect"]
