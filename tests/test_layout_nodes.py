"""GPUs per node: the layout in nodes (request.layout, on the page and in the API) and the suggestions that add
GPUs (TP inside a node, PP across nodes of ``gpus_per_node``), with 8 (an HGX/DGX node) when not given."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from calculator.request import InputError, parse_request
from calculator.verdict import candidates

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize("params,layout", [
    ({}, "1 node x 1 GPU = 1 GPU (TP 1 x PP 1 x DP 1)"),
    ({"tensor_parallel_size": "8", "pipeline_parallel_size": "2"}, "2 nodes x 8 GPUs = 16 GPUs (TP 8 x PP 2 x DP 1)"),
    ({"tensor_parallel_size": "4", "pipeline_parallel_size": "2", "gpus_per_node": "4"},
     "2 nodes x 4 GPUs = 8 GPUs (TP 4 x PP 2 x DP 1)"),
    ({"tensor_parallel_size": "2", "data_parallel_size": "3", "gpus_per_node": "4"},
     "2 nodes x 4 GPUs = 6 GPUs (TP 2 x PP 1 x DP 3); the last node uses 2 of its 4 GPUs"),
    ({"tensor_parallel_size": "8", "gpus_per_node": "4"},
     "2 nodes x 4 GPUs = 8 GPUs (TP 8 x PP 1 x DP 1); tensor parallel spans nodes (all-reduce over the network "
     "every layer)"),
])
def test_the_layout_in_nodes(params, layout):
    request = parse_request({"model": LLAMA, **params})
    assert request.gpus_per_node == int(params.get("gpus_per_node", 8))
    assert request.layout == layout


def test_gpus_per_node_is_bounded():
    with pytest.raises(InputError) as err:
        parse_request({"model": LLAMA, "gpus_per_node": "0"})
    assert err.value.field == "gpus_per_node"


def _labels(**params):
    request = parse_request({"model": "deepseek-ai/DeepSeek-V3", "gpu": "H100", **params})
    memory = SimpleNamespace(fits=False, resolved={"gpu_memory_utilization": 0.98, "kv_cache_dtype": "fp8"},
                             estimated_max_model_len=None, max_model_len=8192, gpu="NVIDIA H100 80GB HBM3")
    return [(c.label, c.params) for c in candidates(request, memory, None, lambda _: []) if c.kind == "hardware"]


def test_suggestions_use_nodes_of_8_by_default():
    got = _labels(tensor_parallel_size="2")
    assert ("--tensor-parallel-size 8 (8 GPUs)", {"tensor_parallel_size": "8"}) in got
    assert ("--tensor-parallel-size 8 --pipeline-parallel-size 2 (2 nodes of 8 GPUs)",
            {"pipeline_parallel_size": "2", "tensor_parallel_size": "8"}) in got


def test_suggestions_follow_gpus_per_node():
    """With 4 GPUs a node, tensor parallel stops at 4 and pipeline stages fill whole 4-GPU nodes."""
    got = _labels(tensor_parallel_size="2", gpus_per_node="4")
    assert [label for label, _ in got if "pipeline" not in label] == ["--tensor-parallel-size 4 (4 GPUs)"]
    assert ("--tensor-parallel-size 4 --pipeline-parallel-size 2 (2 nodes of 4 GPUs)",
            {"pipeline_parallel_size": "2", "tensor_parallel_size": "4"}) in got


def test_the_page_and_the_api_show_the_layout(client, offline_hub):
    params = {"model": LLAMA, "gpu": "H100", "tensor_parallel_size": "4", "pipeline_parallel_size": "2",
              "gpus_per_node": "4", "max_model_len": "8192"}
    api = client.get("/api/estimate", params).json()
    assert api["layout"] == "2 nodes x 4 GPUs = 8 GPUs (TP 4 x PP 2 x DP 1)"
    assert (api["num_nodes"], api["gpus_per_node"]) == (2, 4)
    page = client.get("/", params, follow=True).content.decode()
    assert 'id="layout">Layout: 2 nodes x 4 GPUs = 8 GPUs (TP 4 x PP 2 x DP 1)</p>' in page
    assert not any("gpus-per-node" in a or "gpus_per_node" in a for a in api["serve_argv"])  # not a vLLM flag
