"""``GET /api/estimate``: the engine's result as JSON; bad input is a 400 naming the field, never a 500."""

from __future__ import annotations

import json

import pytest

from tests.conftest import load_config

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
URL = "/api/estimate"


pytestmark = pytest.mark.usefixtures("offline_hub")


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


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_another_method_is_a_json_405_even_where_csrf_is_checked(method):
    """curl -X POST with no CSRF cookie: the read-only API answers 405 in JSON, not Django's HTML CSRF page."""
    from django.test import Client

    r = getattr(Client(enforce_csrf_checks=True), method)(f"{URL}?model={LLAMA}&gpu=H100")
    assert r.status_code == 405 and r["Content-Type"] == "application/json"
    assert r["Allow"] == "GET, HEAD"
    assert "use GET with query parameters" in r.json()["error"]
    assert Client(enforce_csrf_checks=True).head(f"{URL}?model={LLAMA}&gpu=H100").status_code == 200


def test_the_validator_forms_still_need_their_csrf_token(django_user_model):
    """The API's exemption is its own: a POST form that changes something (the validator's run submission) is still
    refused without a CSRF token."""
    from django.contrib.auth.models import Permission
    from django.test import Client

    user = django_user_model.objects.create_user("u", password="p")
    user.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    r = client.post("/runs/new", {"model": LLAMA})
    assert r.status_code == 403 and b"CSRF" in r.content


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


def test_it_answers_vllm_0_34_with_memory_and_a_verdict(client):
    # Qwen3-8B on an H100 with vLLM 0.34.0: utilization 1.0 with the extensible KV cache (vllm/config/cache.py:495-501),
    # 64-token blocks (cache.py:185), 36 layers x 8 KV heads x 128 x 2 (K, V) x 2 B a token (config.json); the
    # capacity it logs first is above what it keeps after warmup (extensible_kv_cache.py:592-618 keeps a margin)
    body = _ok(client, "model=Qwen/Qwen3-8B&gpu=H100&vllm_version=0.34.0")
    assert body["vllm_version"] == "0.34.0" and body["verdict"] == "works"
    assert body["resolved"]["gpu_memory_utilization"] == 1.0 and body["block_size"] == 64
    assert body["kv_bytes_per_token"] == 36 * 8 * 128 * 2 * 2
    assert body["resolved"]["kv_cache_capacity_gib"] > body["available_kv_cache_gib"] > 0
    assert body["kv_cache_tokens"] == body["num_gpu_blocks"] * 64 and any("extensible KV cache" in w
                                                                          for w in body["warnings"])


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


# --- the key set never depends on the outcome -------------------------------------------------------------------
NGRAM4 = '{"method":"ngram","num_speculative_tokens":4}'
EAGLE3_K3 = '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B","num_speculative_tokens":3}'


def test_the_key_set_is_the_same_whether_or_not_there_is_a_speed(client):
    """Llama-3.1-8B (BF16, 16 GB of weights) with its default 131,072-token context: on an RTX 4090 (24 GB) the KV
    cache holds less than one full-length request, so it does not fit and has no speed; on an H100 it works with one.
    Both answers carry the same keys (the README's promise that the API returns exactly the keys of
    ``estimate --format json``): the speed keys are null with the reason in ``speed_error`` where there is no speed."""
    from calculator.engine import perf

    rtx = _ok(client, f"model={LLAMA}&gpu=RTX4090")
    h100 = _ok(client, f"model={LLAMA}&gpu=H100")
    custom = _ok(client, f"model={LLAMA}&gpu=custom:80GiB:sm90&max_model_len=8192")  # no bandwidth known
    ngram = client.get(URL, {"model": LLAMA, "gpu": "H100", "speculative_config": NGRAM4}).json()
    rate = _ok(client, f"model={LLAMA}&gpu=H100&request_rate=4")
    assert rtx["verdict"] == "does_not_fit" and h100["verdict"] == "works"
    assert set(rtx) == set(h100) == set(custom) == set(ngram) == set(rate)
    assert set(perf.SPEED_KEYS) | {"speed_error"} <= set(h100)
    for body in (rtx, custom):
        assert all(body[k] is None for k in perf.SPEED_KEYS) and body["speed_error"]
    assert "no memory bandwidth" in custom["speed_error"]
    assert h100["speed_error"] is None and h100["ttft_ms"] > 0 and h100["itl_ms"] > 0
    # the command line's JSON has the same keys for both outcomes
    from io import StringIO

    from django.core.management import call_command

    for gpu, api in (("RTX4090", rtx), ("H100", h100)):
        out = StringIO()
        call_command("estimate", "--model", LLAMA, "--gpu", gpu, "--format", "json", stdout=out)
        assert set(json.loads(out.getvalue())) == set(api)


@pytest.mark.parametrize("runtime,fits,does_not", [
    ("sglang", {"model": LLAMA, "gpu": "H100"}, {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "H100"}),
    ("llama.cpp", {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gpu": "RTX 3090", "max_model_len": "8192",
                   "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"},
     {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gpu": "custom:24GiB:sm86", "max_model_len": "8192",
      "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"}),
])
def test_other_runtimes_keep_their_key_set_too(client, runtime, fits, does_not):
    """SGLang: Llama-3.1-70B in BF16 (131 GiB of weights) does not start on one H100, the 8B works; llama.cpp: a GPU
    without bandwidth figures has no speed. Each runtime answers with its own speed keys, all of them either way."""
    from calculator.runtimes import get_runtime

    a = client.get(URL, fits | {"runtime": runtime}).json()
    b = client.get(URL, does_not | {"runtime": runtime}).json()
    assert a["speed_error"] is None and a["itl_ms"] > 0 and b["speed_error"]
    assert set(a) == set(b) and set(get_runtime(runtime).speed_keys) <= set(a)
    assert all(b[k] is None for k in get_runtime(runtime).speed_keys)


def test_the_readme_lists_exactly_the_keys_of_the_vllm_answer(client):
    """The README's JSON API section names every key of a vLLM answer, and no key the answer lacks."""
    import re

    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("For vLLM (GiB = 2^30 bytes) these are, in order:"):]
    section = section[:section.index("The key set depends on the runtime only")]
    listed = set(re.findall(r"`([a-z_]+)`", re.sub(r"\([^()]*\)", "", section)))
    assert listed == set(_ok(client, f"model={LLAMA}&gpu=H100"))
    assert listed == set(_ok(client, f"model={LLAMA}&gpu=RTX4090"))


def test_the_readme_lists_the_memory_keys_of_the_sglang_answer_in_order(client):
    """The README names SGLang's memory keys in the order of the answer (those before the verdict), each once."""
    import re

    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("SGLang answers carry"):]
    section = section[:section.index("and the same\nspeed keys")]
    listed = re.findall(r"`([a-z_0-9]+)`", section.replace("`server_args.py`", ""))
    keys = list(_ok(client, f"model={LLAMA}&gpu=H100&runtime=sglang"))
    assert listed == keys[:keys.index("verdict")]


def test_speed_with_speculation_says_which_server_the_figures_describe(client):
    """ngram has no public acceptance figure: without --acceptance-rate its figures are those of the server without
    drafts (the same as the request without speculation: computed here as that request), and the answer says so in
    ``speed_with_speculation: false``; with an acceptance rate, or EAGLE-3 with its public figure, they are the
    speculative server's (``true``), whose TPOT times the speedup is the plain TPOT."""
    base = {"model": LLAMA, "gpu": "H100", "concurrency": "64"}
    plain = client.get(URL, base).json()
    ngram = client.get(URL, base | {"speculative_config": NGRAM4}).json()
    assert plain["speed_with_speculation"] is False and ngram["speed_with_speculation"] is False
    assert ngram["spec_speedup"] is None and ngram["break_even_acceptance_rate"] > 0
    assert (ngram["ttft_ms"], ngram["itl_ms"], ngram["output_tokens_per_s"]) == (
        plain["ttft_ms"], plain["itl_ms"], plain["output_tokens_per_s"])
    given = client.get(URL, base | {"speculative_config": NGRAM4, "acceptance_rate": "0.5"}).json()
    assert given["speed_with_speculation"] is True
    assert given["itl_ms"] * given["spec_speedup"] == pytest.approx(plain["itl_ms"], rel=0.01)
    one = {"model": LLAMA, "gpu": "H100"}
    eagle = client.get(URL, one | {"speculative_config": EAGLE3_K3}).json()
    assert eagle["speed_with_speculation"] is True
    assert eagle["itl_ms"] * eagle["spec_speedup"] == pytest.approx(client.get(URL, one).json()["itl_ms"], rel=0.01)
    # the command line's JSON says the same
    from io import StringIO

    from django.core.management import call_command

    from tests.conftest import CONFIGS

    out = StringIO()
    call_command("estimate", "--config", str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"), "--gpu", "H100",
                 "--concurrency", "64", "--speculative-config", NGRAM4, "--format", "json", stdout=out)
    cli = json.loads(out.getvalue())
    assert cli["speed_with_speculation"] is False and cli["itl_ms"] == plain["itl_ms"]
    # and the pages say it beside the figures (vLLM's cards, SGLang's sentence); not where they are speculative
    for runtime in ("vllm", "sglang"):
        q = base | {"runtime": runtime}
        assert 'id="spec-plain"' in client.get("/", q | {"speculative_config": NGRAM4}, follow=True).content.decode()
        assert 'id="spec-plain"' not in client.get("/", q | {"speculative_config": NGRAM4, "acceptance_rate": "0.5"},
                                                   follow=True).content.decode()


def test_messages_state_the_fact_instead_of_pointing_at_the_calculators_files(client):
    """A user of the page or the API cannot open compat/README.md or calculator/engine/RELEASES.md: the messages that
    once pointed there say what those files would have told them (the covered range; why a release has no backend
    check). A runtime's own file:line citations stay (they are sources, not directions)."""
    import re

    internal = re.compile(r"README|RELEASES\.md|\b(calculator|compat)[/.][\w/.]+")
    old = _bad(client, f"model={LLAMA}&vllm_version=0.6.4")["error"]
    assert "answers vLLM 0.9.1 to 0.34.x" in old and not internal.search(old)
    # 0.9.1 is answered by 0.9.2's extracted data (tests/test_compat_legacy.py): a backend verdict, no error
    body = _ok(client, f"model={LLAMA}&gpu=H100&vllm_version=0.9.1")
    assert body["compat_error"] is None and body["verdict"] == "works"
    gguf = _bad(client, "model=bartowski/Meta-Llama-3.1-8B-Instruct-GGUF&gpu=H100")["error"]
    assert "is a GGUF repository" in gguf and not internal.search(gguf)
    page = client.get("/compat/", {"vllm_version": "0.8.5"}).content.decode()
    assert "vLLM 0.8.5 is not covered; covered: 0.9.2" in page and "compat/README.md" not in page
    # llama.cpp with a draft and no acceptance: the reason names what to give, not a module
    draft = client.get(URL, {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "llama.cpp",
                             "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "gpu": "RTX 3090",
                             "max_model_len": "8192", "speculative_config": '{"method":"draft_model","model":'
                             '"bartowski/Llama-3.2-1B-Instruct-GGUF","num_speculative_tokens":8}'}).json()
    assert "give the acceptance rate llama.cpp logs" in draft["acceptance_source"]
    assert not internal.search(draft["acceptance_source"])


@pytest.mark.parametrize("key,real", [("draft_tensor_parallel_size", True), ("suffix_decoding_max_tree_depth", True),
                                      ("drafttp", False)])
def test_a_real_vllm_speculative_setting_is_not_modelled_not_unknown(client, key, real):
    """draft_tensor_parallel_size is a field of vLLM's SpeculativeConfig (vllm/config/speculative.py:427 in 0.33.0,
    in 0.32.0's class at :387): the refusal says the calculator does not model it; a typo stays "not a setting"."""
    spec = json.dumps({"method": "eagle3", "num_speculative_tokens": 3, key: 1})
    r = client.get("/api/estimate", {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100",
                                     "speculative_config": spec})
    assert r.status_code == 400
    body = r.json()
    assert body["field"] == "speculative_config"
    assert ("this calculator does not model" in body["error"]) is real
    assert ("is not a setting vLLM takes here" in body["error"]) is (not real)


# -- the card a missing or short gpu leaves open is said, never silent -----------------------------------------
def test_without_a_gpu_the_answer_says_it_planned_for_the_default_h100(client):
    body = client.get(URL, {"model": LLAMA}).json()
    assert body["gpu"] == "NVIDIA H100 80GB HBM3"  # nvidia-smi's name of the SXM5 H100
    assert body["model_notes"][0] == ("gpu not given: planned for NVIDIA H100 80GB HBM3 (the default, gpu=H100); "
                                      "give gpu (--gpu) to plan for your device")


@pytest.mark.parametrize("gpu,picked,others", [
    # four A100s: 40 and 80 GB, SXM4 and PCIe (nvidia-smi names); "A100" is planned as the 80 GB SXM4
    ("A100", "NVIDIA A100-SXM4-80GB", ["NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"]),
    ("nvidia a100", "NVIDIA A100-SXM4-80GB", ["NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"]),
    ("A100 40GB", "NVIDIA A100-SXM4-40GB", ["NVIDIA A100-PCIE-40GB"]),
])
def test_a_name_that_fits_several_cards_says_which_it_planned_for(client, gpu, picked, others):
    body = client.get(URL, {"model": LLAMA, "gpu": gpu}).json()
    assert body["gpu"] == picked
    note = body["model_notes"][0]
    assert note.startswith(f"gpu {gpu!r} fits {len(others) + 1} cards: planned for {picked} (")
    assert note.endswith(f"name the card for another ({', '.join(others)})")


@pytest.mark.parametrize("gpu", ["NVIDIA A100-SXM4-80GB", "A100-PCIE-40GB", "RTX 4090", "custom:24GiB:sm89"])
def test_a_card_named_exactly_gets_no_such_note(client, gpu):
    notes = client.get(URL, {"model": LLAMA, "gpu": gpu}).json()["model_notes"]
    assert not any(n.startswith("gpu ") for n in notes)


def test_a_name_without_a_documented_pick_is_still_refused(client):
    body = _bad(client, f"model={LLAMA}&gpu=M3%20Max")
    assert body["field"] == "gpu" and "is ambiguous" in body["error"]
