"""llama.cpp answers: a context past the model's trained length starts, with llama.cpp's own warning
(src/llama-context.cpp:327-330), and the answer says so; the speed sources under the key vLLM's answer uses."""
from __future__ import annotations

import pytest


@pytest.mark.django_db
def test_a_context_past_the_trained_length_is_said(client):
    q = {"model": "meta-llama/Llama-3.1-8B-Instruct", "runtime": "llama.cpp", "gpu": "RTX 4090",
         "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"}
    # --ctx-size 200000: llama.cpp pads the cells to a multiple of 256 (200,192), past Llama 3.1's 131,072
    over = client.get("/api/estimate", q | {"ctx_size": "200000"}).json()
    said = [n for n in over["notes"] if "possible training context overflow" in n]
    assert said and '"n_ctx_seq (200192) > n_ctx_train (131072)' in said[0]
    within = client.get("/api/estimate", q | {"ctx_size": "32768"}).json()
    assert not any("training context overflow" in n for n in within["notes"])


@pytest.mark.django_db
def test_the_llamacpp_answer_gives_its_speed_sources_under_the_same_key_as_vllm(client):
    q = {"model": "meta-llama/Llama-3.1-8B-Instruct", "runtime": "llama.cpp", "gpu": "RTX 4090",
         "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "concurrency": "3", "parallel": "1"}
    got = client.get("/api/estimate", q).json()
    src = got["speed_sources"]
    assert src == got["speed"]["sources"]
    for key in ("ttft_ms", "itl_ms", "output_tokens_per_s"):
        assert src[key]
    # 3 clients on one slot: TTFT includes the wait for it, and its source says so
    assert "ttft_ms.queue" in src and "the wait for a free slot" in src["ttft_ms"]
