"""vLLM's non-torch memory at tensor_parallel_size > 1 off the GPU its fit comes from.

The 2.1 GiB (calculator.engine.runtime.NON_TORCH_GIB_TP) is fit to the llm-d planner's vLLM 0.19 logs, every one an
"NVIDIA H100 80GB HBM3" over NVLink; an A100 40GB at tp = 4 logged 0.34 GiB (vLLM 0.8.3, shared case gh-008,
https://github.com/vllm-project/vllm/issues/16570). Elsewhere the answer says the figure is unknown, and a plan that
fits only at the low end is `depends`, not `does_not_fit`.

Hand computation (Llama-3.1-8B: 32 layers, 8 KV heads, head 128, bf16): at tp = 2 each GPU holds 4 KV heads, so a token
takes 32 x 2 (K, V) x 4 x 128 x 2 B = 65,536 B, and 16,384 tokens take exactly 1 GiB; the low end frees
2.10 - 0.34 = 1.76 GiB per GPU for the KV cache.
"""
from __future__ import annotations

import pytest

from calculator.engine.gpus import GIB

pytestmark = pytest.mark.django_db

LLAMA8B = {"model": "meta-llama/Llama-3.1-8B-Instruct", "tensor_parallel_size": "2", "max_model_len": "16384"}
SLACK_GIB = (int(2.1 * GIB) - int(0.34 * GIB)) / GIB


def _get(client, **extra) -> dict:
    resp = client.get("/api/estimate", LLAMA8B | extra)
    assert resp.status_code == 200, resp.content
    return resp.json()


def test_a_plan_that_fits_only_at_the_low_end_depends_on_it(client):
    body = _get(client, gpu="RTX 3060")
    assert body["kv_bytes_per_token"] == 32 * 2 * 4 * 128 * 2 == 65536
    assert body["non_torch_gib"] == 2.1 and body["fits"] is False
    need_gib = 16384 * 65536 / GIB
    assert need_gib == 1.0
    # as fitted the KV cache is short of one request; 1.76 GiB more per GPU covers it
    assert body["available_kv_cache_gib"] < need_gib <= body["available_kv_cache_gib"] + SLACK_GIB
    assert body["verdict"] == "depends" and body["verdict_condition"] == body["fit_condition"]
    assert "0.34 GiB on an A100 40GB" in body["fit_condition"] and "1.76 GiB more per GPU" in body["fit_condition"]
    assert body["itl_ms"] is None and "depends on the condition the verdict names" in body["speed_error"]


def test_a_plan_short_even_at_the_low_end_does_not_fit(client):
    # 131,072 tokens need 8 GiB of KV per GPU: far beyond the 12 GiB card's room at either figure
    body = _get(client, gpu="RTX 3060", max_model_len="131072")
    assert body["available_kv_cache_gib"] + SLACK_GIB < 131072 * 65536 / GIB
    assert body["verdict"] == "does_not_fit" and body["fit_condition"] is None


def test_a_plan_that_fits_says_the_figure_is_unknown_for_this_gpu(client):
    body = _get(client, gpu="RTX 4090")
    assert body["verdict"] == "works" and body["fit_condition"] is None
    assert any("no public log covers the NVIDIA GeForce RTX 4090" in w and "1.76 GiB more per GPU" in w
               for w in body["warnings"])


def test_the_gpu_of_the_fit_keeps_it_without_a_warning(client):
    body = _get(client, gpu="H100")
    assert body["gpu"] == "NVIDIA H100 80GB HBM3" and body["non_torch_gib"] == 2.1
    assert not any("non-torch" in w for w in body["warnings"]) and body["fit_condition"] is None
