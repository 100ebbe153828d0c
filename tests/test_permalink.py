"""Permalinks: the canonical query string (only non-default values, in field order, speculative decoding
as one ``speculative_config`` JSON value) and its round trip through the form."""

from __future__ import annotations

from django.core.cache import cache

import json
from urllib.parse import parse_qsl

import pytest
from django.http import QueryDict

from calculator.web.forms import EstimateForm, tidy_query
from calculator.request import human_readable_int

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _form(query: str) -> EstimateForm:
    form = EstimateForm.from_query(QueryDict(query))
    assert form.is_valid(), form.errors
    return form


def test_it_writes_only_values_that_differ_from_defaults():
    form = _form(
        f"model={LLAMA}&revision=&gpu=H100&tensor_parallel_size=1&pipeline_parallel_size=1"
        "&max_model_len=8192&dtype=auto&kv_cache_dtype=auto&quantization=&attention_backend="
        "&gpu_memory_utilization=&vllm_version=0.32.0&speculative_method=&block_size="
    )
    assert parse_qsl(form.canonical_query()) == [
        ("model", LLAMA),
        ("gpu", "H100"),
        ("max_model_len", "8192"),
        ("vllm_version", "0.32.0"),
    ]


def test_it_keeps_the_model_id_readable():
    assert _form(f"model={LLAMA}").canonical_query().startswith("model=meta-llama/Llama-3.1-8B-Instruct&")


def test_it_orders_parameters_like_the_form():
    form = _form(
        f"enforce_eager=on&kv_cache_dtype=fp8&max_model_len=4096&gpu=A100&tensor_parallel_size=2&model={LLAMA}"
    )
    assert [k for k, _ in parse_qsl(form.canonical_query())] == [
        "model",
        "gpu",
        "tensor_parallel_size",
        "max_model_len",
        "kv_cache_dtype",
        "vllm_version",
        "enforce_eager",
    ]


def test_it_names_the_gpu_by_its_short_alias():
    assert ("gpu", "H100") in parse_qsl(_form(f"model={LLAMA}&gpu=NVIDIA+H100+80GB+HBM3").canonical_query())
    assert ("gpu", "A100-40GB") in parse_qsl(
        _form(f"model={LLAMA}&gpu=NVIDIA+A100-SXM4-40GB").canonical_query()
    )


def test_it_writes_the_default_gpu_and_release():
    params = dict(parse_qsl(_form(f"model={LLAMA}").canonical_query()))
    assert params["gpu"] == "H100" and params["vllm_version"] == "0.32.0"


def test_it_writes_speculative_decoding_as_one_json_value():
    form = _form(
        f"model={LLAMA}&speculative_method=eagle&speculative_model=yuhuili/EAGLE-LLaMA3-Instruct-8B"
        "&num_speculative_tokens=3&acceptance_rate=0.7"
    )
    params = parse_qsl(form.canonical_query())
    names = [k for k, _ in params]
    assert "speculative_method" not in names and "num_speculative_tokens" not in names
    assert json.loads(dict(params)["speculative_config"]) == {
        "method": "eagle",
        "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B",
        "num_speculative_tokens": 3,
    }
    assert dict(params)["acceptance_rate"] == "0.7"


def test_it_reads_speculative_config_back():
    first = _form(f"model={LLAMA}&speculative_method=ngram&num_speculative_tokens=4")
    again = _form(first.canonical_query())
    assert again.request.speculative_config.method == "ngram"
    assert again.request.speculative_config.num_speculative_tokens == 4
    assert again.canonical_query() == first.canonical_query()


def test_it_round_trips_every_field():
    query = (
        f"model={LLAMA}&revision=v1.0&gpu=L40S&tensor_parallel_size=2&pipeline_parallel_size=2"
        "&max_model_len=32768&concurrency=16&dtype=float16&quantization=fp8&kv_cache_dtype=fp8_e5m2"
        "&attention_backend=FLASHINFER&gpu_memory_utilization=0.85&vllm_version=0.32.0"
        "&speculative_config=%7B%22method%22%3A%22ngram%22%2C%22num_speculative_tokens%22%3A5%7D"
        "&acceptance_rate=0.6&block_size=32&max_num_batched_tokens=4096&max_num_seqs=64&enforce_eager=true"
    )
    canonical = _form(query).canonical_query()
    assert _form(canonical).canonical_query() == canonical
    # 21 fields, the three speculative ones written as one speculative_config value
    assert len(parse_qsl(canonical)) == 19


def test_it_puts_the_resolved_sha_in_place_of_the_revision():
    sha = "0e9e39f249a16976918f6564b8830bc894c89659"
    assert ("revision", sha) in parse_qsl(_form(f"model={LLAMA}").canonical_query(sha=sha))


def test_it_reads_vllm_style_token_counts():
    assert human_readable_int("32K") == 32768
    assert human_readable_int("32k") == 32000
    assert human_readable_int("25.6k") == 25600
    assert human_readable_int("8192") == 8192
    assert _form(f"model={LLAMA}&max_model_len=128K").request.max_model_len == 131072
    with pytest.raises(ValueError, match="too large"):  # a whole number, only too long: said so
        human_readable_int("9" * 20)
    with pytest.raises(ValueError, match="not a whole number"):
        human_readable_int("1.5")


def test_it_keeps_what_the_user_typed_when_the_form_has_errors():
    query = QueryDict(f"model={LLAMA}&revision=&max_model_len=abc&gpu=H100&block_size=")
    assert tidy_query(query) == "model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100&max_model_len=abc"
    # what the form submits untouched (its shown defaults) stays out of the address bar; a changed value stays in
    form = QueryDict(f"model={LLAMA}&gpu=H100&max_model_len=abc&dtype=auto&pipeline_parallel_size=1"
                     "&tensor_parallel_size=2&gpus_per_node=8&kv_cache_dtype=auto&enforce_eager=false")
    assert tidy_query(form) == ("model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100&tensor_parallel_size=2"
                                "&max_model_len=abc")


# -- a model read from the Hub (the local Hub server of tests/hub_server.py) --------------------------


@pytest.fixture
def hub(db, monkeypatch):
    from calculator import metadata
    from tests.hub_server import FakeHub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    metadata.reset_hub_state()
    cache.clear()
    with FakeHub() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server
    metadata.reset_hub_state()
    cache.clear()


def test_it_pins_the_resolved_revision_sha(client, hub):
    from tests.conftest import CONFIGS

    sha = hub.add_repo(
        "org/llama-ft", {"config.json": (CONFIGS / "meta-llama__Llama-3.1-8B.json").read_bytes()}
    )
    r = client.get("/?model=org/llama-ft&max_model_len=4096")
    assert r.status_code == 302
    assert (
        r["Location"]
        == f"/?model=org/llama-ft&revision={sha}&gpu=H100&max_model_len=4096&vllm_version=0.32.0"
    )
    page = client.get(r["Location"]).content.decode()
    assert f"--revision {sha}" in page  # the vllm serve command pins it too
    # the branch moves on: the permalink still answers for the commit it named
    hub.commit("org/llama-ft", {"config.json": (CONFIGS / "meta-llama__Llama-3.1-8B.json").read_bytes()})
    assert client.get(r["Location"]).status_code == 200


def test_it_reports_an_unknown_hub_revision_by_the_revision_field(client, hub):
    from tests.conftest import CONFIGS

    hub.add_repo("org/llama-ft", {"config.json": (CONFIGS / "meta-llama__Llama-3.1-8B.json").read_bytes()})
    r = client.get("/api/estimate?model=org/llama-ft&revision=no-such-branch")
    assert r.status_code == 400
    assert r.json()["field"] == "revision" and "no-such-branch" in r.json()["error"]
