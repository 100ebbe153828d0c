"""``GET /api/estimate``: the engine's result as JSON; bad input is a 400 naming the field, never a 500."""
from __future__ import annotations

import pytest

from tests.conftest import load_config

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
URL = "/api/estimate"


def _bad(client, query: str) -> dict:
    r = client.get(f"{URL}?{query}")
    assert r.status_code == 400, r.content
    body = r.json()
    assert set(body) == {"error", "field"}
    return body


def test_it_needs_a_model(client):
    assert _bad(client, "gpu=H100")["field"] == "model"


def test_it_rejects_an_unknown_gpu(client):
    body = _bad(client, f"model={LLAMA}&gpu=Z9000")
    assert body["field"] == "gpu"
    assert "Z9000" in body["error"] and "NVIDIA H100 80GB HBM3" in body["error"]


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5K"])
def test_it_rejects_a_bad_max_model_len(client, value):
    assert _bad(client, f"model={LLAMA}&max_model_len={value}")["field"] == "max_model_len"


def test_it_rejects_gpu_memory_utilization_above_one(client):
    body = _bad(client, f"model={LLAMA}&gpu_memory_utilization=1.5")
    assert body["field"] == "gpu_memory_utilization"
    assert "1.0" in body["error"]


def test_it_rejects_a_model_outside_the_catalog(client):
    body = _bad(client, "model=nobody/no-such-model")
    assert body["field"] == "model" and "nobody/no-such-model" in body["error"]


def test_it_rejects_a_model_id_that_is_not_org_slash_name(client):
    assert _bad(client, "model=--trust-remote-code")["field"] == "model"


def test_it_rejects_an_unknown_parameter(client):
    body = _bad(client, f"model={LLAMA}&max_model_length=8192")
    assert body["field"] == "max_model_length"


def test_it_rejects_speculative_config_that_is_not_json(client):
    assert _bad(client, f"model={LLAMA}&speculative_config=eagle")["field"] == "speculative_method"


def test_it_needs_a_draft_model_for_eagle(client):
    body = _bad(client, f'model={LLAMA}&speculative_config={{"method":"eagle","num_speculative_tokens":3}}')
    assert body["field"] == "speculative_model"


def test_it_rejects_an_unknown_kv_cache_dtype(client):
    assert _bad(client, f"model={LLAMA}&kv_cache_dtype=int3")["field"] == "kv_cache_dtype"


def test_it_answers_get_only(client):
    assert client.post(f"{URL}?model={LLAMA}").status_code == 405
