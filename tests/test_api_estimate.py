"""``GET /api/estimate``: the engine's result as JSON; bad input is a 400 naming the field, never a 500."""

from __future__ import annotations

import json

from django.core.cache import cache

import pytest

from tests.conftest import load_config

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
URL = "/api/estimate"


@pytest.fixture(autouse=True)
def _offline_hub(db, monkeypatch):
    """Models come from the offline catalog through the metadata cache; the Hub is never contacted."""

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache.clear()


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
    assert "Z9000" in body["error"] and "closest known: " in body["error"] and "custom:" in body["error"]


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5K"])
def test_it_rejects_a_bad_max_model_len(client, value):
    assert _bad(client, f"model={LLAMA}&max_model_len={value}")["field"] == "max_model_len"


def test_it_rejects_gpu_memory_utilization_above_one(client):
    body = _bad(client, f"model={LLAMA}&gpu_memory_utilization=1.5")
    assert body["field"] == "gpu_memory_utilization"
    assert "must be at most 1.0, got 1.5" in body["error"]


def test_it_rejects_a_model_outside_the_catalog(client):
    body = _bad(client, "model=nobody/no-such-model")
    assert body["field"] == "model" and "nobody/no-such-model" in body["error"]


def test_it_rejects_a_model_id_that_is_not_org_slash_name(client):
    assert _bad(client, "model=--trust-remote-code")["field"] == "model"


def test_it_rejects_an_unknown_parameter(client):
    body = _bad(client, f"model={LLAMA}&max_model_length=8192")
    assert body["field"] == "max_model_length"


def test_it_rejects_speculative_config_that_is_not_json(client):
    assert _bad(client, f"model={LLAMA}&speculative_config=eagle")["field"] == "speculative_config"


def test_it_needs_a_draft_model_for_eagle_when_no_public_head_is_known(client):
    body = _bad(client, 'model=Qwen/Qwen3-8B&speculative_config={"method":"eagle","num_speculative_tokens":3}')
    assert body["field"] == "speculative_config" and "no public eagle head is known" in body["error"]


def test_eagle3_without_a_head_uses_the_known_public_head(client):
    body = _ok(client, f'model={LLAMA}&speculative_config={{"method":"eagle3","num_speculative_tokens":3}}')
    spec = json.loads(body["serve_argv"][body["serve_argv"].index("--speculative-config") + 1])
    assert spec["model"] and "EAGLE3" in spec["model"].upper()
    assert any("public eagle3 head" in n and "vLLM refuses eagle3 without a draft model" in n for n in body["model_notes"])
    # SGLang's words on SGLang (server_args.py:3028-3043 in 0.5.10.post1 fills the draft path only for MTP models)
    body = _ok(client, f'model={LLAMA}&runtime=sglang&speculative_config={{"method":"eagle3","num_speculative_tokens":3}}')
    notes = [n for n in body["model_notes"] if "public eagle3 head" in n]
    assert notes and "SGLang needs --speculative-draft-model-path" in notes[0] and "vLLM" not in notes[0]


def test_it_rejects_an_unknown_kv_cache_dtype(client):
    assert _bad(client, f"model={LLAMA}&kv_cache_dtype=int3")["field"] == "kv_cache_dtype"


def test_it_answers_get_only(client):
    assert client.post(f"{URL}?model={LLAMA}").status_code == 405


# -- numbers (through the real engine), each checked against a hand computation from config.json ------


def _ok(client, query: str) -> dict:
    r = client.get(f"{URL}?{query}")
    assert r.status_code == 200, r.content
    return r.json()


def test_it_returns_the_kv_bytes_per_token_of_llama_3_1_8b(client):
    cfg = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    # 32 layers x (K and V) x 8 KV heads x head size 4096/32 = 128 x 2 bytes (bfloat16)
    assert (
        cfg["num_hidden_layers"],
        cfg["num_key_value_heads"],
        cfg["hidden_size"] // cfg["num_attention_heads"],
    ) == (32, 8, 128)
    body = _ok(client, f"model={LLAMA}&max_model_len=8192")
    assert body["kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 2 == 131072
    assert body["max_model_len"] == 8192
    assert body["model"] == LLAMA and body["gpu"] == "NVIDIA H100 80GB HBM3"


def test_it_shards_kv_heads_over_tensor_parallel_gpus_and_halves_fp8(client):
    # TP=2: 4 of the 8 KV heads per GPU; fp8 KV cache: 1 byte per element
    body = _ok(client, f"model={LLAMA}&tensor_parallel_size=2&kv_cache_dtype=fp8")
    assert body["kv_bytes_per_token"] == 32 * 2 * (8 // 2) * 128 * 1 == 32768


def test_it_answers_what_estimate_format_json_prints(client):
    import io
    import json

    from django.core.management import call_command

    out = io.StringIO()
    call_command(
        "estimate",
        "--model",
        LLAMA,
        "--gpu",
        "A100",
        "--max-model-len",
        "16384",
        "--kv-cache-dtype",
        "fp8",
        "--concurrency",
        "4",
        "--format",
        "json",
        stdout=out,
    )
    cli = json.loads(out.getvalue())
    api = _ok(client, f"model={LLAMA}&gpu=A100&max_model_len=16K&kv_cache_dtype=fp8&concurrency=4")
    assert set(api) == set(cli)
    for key in (
        "kv_cache_tokens",
        "num_gpu_blocks",
        "max_concurrency",
        "weights_gib",
        "available_kv_cache_gib",
        "kv_bytes_per_token",
        "ttft_ms",
        "itl_ms",
        "output_tokens_per_s",
        "resolved",
        "model_source",
    ):
        assert api[key] == cli[key], key


def test_it_reports_mla_as_one_latent_per_layer(client):
    cfg = load_config("deepseek-ai__DeepSeek-V2-Lite.json")
    # MLA caches kv_lora_rank + qk_rope_head_dim values per layer (no separate V), bfloat16
    per_token = cfg["num_hidden_layers"] * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * 2
    body = _ok(client, "model=deepseek-ai/DeepSeek-V2-Lite&max_model_len=8192")
    assert per_token == 27 * 576 * 2 == 31104
    assert body["kv_bytes_per_token"] == per_token
    assert [g["kind"] for g in body["kv_by_layer_type"]] == ["mla"]


def test_it_says_a_model_does_not_fit_with_200(client):
    # Llama-3.1-70B in bfloat16 is about 70.6e9 params x 2 B = 131 GiB; an L4 has 22 GiB
    body = _ok(client, "model=meta-llama/Llama-3.1-70B-Instruct&gpu=L4")
    assert body["fits"] is False and body["kv_cache_tokens"] == 0
    assert body["reason"] and body["verdict"] == "does_not_fit" and body["suggestions"]
    assert body["weights_gib"] > 120


def test_it_reads_the_speculative_config_json(client):
    body = _ok(
        client,
        f'model={LLAMA}&speculative_config={{"method":"eagle","model":"yuhuili/EAGLE-LLaMA3-Instruct-8B","num_speculative_tokens":3}}',
    )
    draft = load_config("yuhuili__EAGLE-LLaMA3-Instruct-8B.json")
    # the EAGLE head's own KV cache: its layers x 2 x KV heads x 128 x 2 B, added per token
    draft_layers = draft["num_hidden_layers"]
    assert body["draft_weights_gib"] > 0
    assert body["kv_bytes_per_token"] == 131072 + draft_layers * 2 * draft["num_key_value_heads"] * 128 * 2


def test_it_passes_engine_errors_through_as_400(client):
    body = _bad(client, f"model={LLAMA}&block_size=7")
    assert body["field"] == "block_size"


@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_a_server_that_does_not_start_has_no_speed(client, runtime):
    """Llama-3.1-70B in BF16 on one H100: its weights (70.6e9 x 2 B = 131 GiB) exceed the 80 GB card, so neither vLLM
    nor SGLang starts (no KV cache at all); the answer gives the verdict and no TTFT / TPOT / tok/s of a server that
    does not exist (a fresh user got 434 s of TTFT for 'what it would do if it did')."""
    body = client.get("/api/estimate", {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "H100",
                                        "runtime": runtime, "concurrency": "64"}).json()
    assert body["verdict"] == "does_not_fit"
    assert body.get("ttft_ms") is None and body.get("itl_ms") is None
    assert body["speed_error"] == ("configuration: the server does not start (see the verdict and what would work), so "
                                   "there is no speed to predict")


def test_a_refused_attention_backend_has_no_speed(client):
    """FLASHMLA on a GQA model (Qwen3-8B): vLLM refuses the backend at start-up, so the verdict is does_not_start and
    the answer has no TTFT / TPOT / tok/s, only the speed_error pointing at it (the page and the CLI alike)."""
    q = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "max_model_len": "4096", "attention_backend": "FLASHMLA"}
    body = client.get("/api/estimate", q).json()
    assert body["verdict"] == "does_not_start"
    assert body.get("ttft_ms") is None and body["speed_error"].startswith("configuration: the server does not start")
    page = client.get("/", q, follow=True).content.decode()
    assert 'id="ttft-ms"' not in page and "the server does not start (see the verdict" in page


def test_a_per_architecture_mtp_name_says_vllm_runs_it_as_mtp(client):
    """vLLM 0.32 rewrites deepseek_mtp (and the other per-architecture names) to mtp with a deprecation line in its log
    (vllm/config/speculative.py:1141-1145); the answer says so and keeps the given name in the command."""
    body = client.get("/api/estimate", {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "tensor_parallel_size": "8",
                                        "max_model_len": "32768",
                                        "speculative_config": '{"method": "deepseek_mtp", "num_speculative_tokens": 1}'}
                      ).json()
    assert any("is deprecated and replaced with mtp" in n for n in body["model_notes"])
    spec = json.loads(body["serve_argv"][body["serve_argv"].index("--speculative-config") + 1])
    assert spec["method"] == "deepseek_mtp"
