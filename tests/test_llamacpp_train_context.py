"""A llama.cpp context past the model's trained length starts, with llama.cpp's own warning (src/llama-context.cpp:
327-330): the answer says so instead of planning it silently."""
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
