"""The /compat/ matrix page and the verdict page (fragment ``compat/_verdict.html``)."""
from __future__ import annotations

from django.template.loader import render_to_string

from compat.checks import verdict_for
from tests.conftest import load_config


def test_it_shows_the_default_matrix(client):
    r = client.get("/compat/")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'id="matrix-gpus"' in html and 'id="matrix-kv"' in html and 'id="matrix-declared"' in html
    # cells link to their verdict with reasons; backend names link to the vLLM source at the release tag
    assert "/compat/verdict/?model=meta-llama%2FLlama-3.1-8B-Instruct" in html
    assert "https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/attention/backends/flash_attn.py#L" in html


def test_it_filters_by_release_platform_model_and_kv_dtype(client):
    r = client.get("/compat/", {"vllm_version": "0.19.0", "platform": "cuda",
                                "model": "deepseek-ai/DeepSeek-V3", "kv_cache_dtype": "fp8"})
    assert r.status_code == 200
    html = r.content.decode()
    assert "vLLM 0.19.0, cuda" in html and "head size 576" in html


def test_it_answers_400_for_an_unknown_platform(client):
    r = client.get("/compat/", {"platform": "tpu"})
    assert r.status_code == 400


def test_the_verdict_page_shows_reasons_and_fixes(client):
    r = client.get("/compat/verdict/", {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H100", "kv_cache_dtype": "fp8",
                                        "attention_backend": "FLASH_ATTN_MLA"})
    assert r.status_code == 200
    html = r.content.decode()
    assert 'id="compat-verdict"' in html and "kv_cache_dtype not supported" in html
    assert "fix: FLASH_ATTN_MLA accepts only" in html


def test_the_verdict_page_keeps_bad_input_with_a_400(client):
    r = client.get("/compat/verdict/", {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H900"})
    assert r.status_code == 400
    assert "unknown GPU" in r.content.decode() and 'value="H900"' in r.content.decode()


def test_the_fragment_renders_for_the_calculator_results():
    report = verdict_for(load_config("meta-llama__Llama-3.1-8B-Instruct.json"), "B200")
    html = render_to_string("compat/_verdict.html", {"verdict": report})
    assert "vLLM picks <strong>FLASHINFER</strong>" in html  # cuda.py:158 SM100 order


def test_the_matrix_shows_what_changed_since_the_previous_release(client):
    # the previous covered release is 0.31.0; ULTRAQUANT is new in 0.32.0 (registry.py:155 there, absent in 0.31.0)
    html = client.get("/compat/", {"vllm_version": "0.32.0"}).content.decode()
    assert 'id="release-diff"' in html and "0.31.0" in html and "ULTRAQUANT" in html


def test_a_release_without_data_is_refused_by_name_and_a_patch_takes_its_minors_data(client):
    # 0.8.x has no compat data (the oldest covered release is 0.9.2, compat/README.md): the page names the release
    # and the covered ones instead of Django's "not one of the available choices"
    r = client.get("/compat/", {"vllm_version": "0.8.5"})
    assert r.status_code == 400
    html = r.content.decode()
    assert "vLLM 0.8.5 is not covered; covered: 0.9.2, 0.10.0" in html and "not one of the available choices" not in html
    # 0.9.1 takes 0.9.2's data; 0.10.1.1 (four parts) its own
    r = client.get("/compat/", {"vllm_version": "0.9.1"})
    assert r.status_code == 200 and "vLLM 0.9.2, cuda" in r.content.decode()
    r = client.get("/compat/", {"vllm_version": "0.10.1.1"})
    assert r.status_code == 200 and "vLLM 0.10.1.1, cuda" in r.content.decode()
    # 0.32.1 has no extraction of its own; 0.32.0's data answers it, as on the calculator
    r = client.get("/compat/", {"vllm_version": "0.32.1"})
    assert r.status_code == 200 and "vLLM 0.32.0, cuda" in r.content.decode()
    r = client.get("/compat/verdict/", {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100",
                                        "vllm_version": "banana"})
    assert r.status_code == 400 and "is not a vLLM release" in r.content.decode()


def _not_applied(r) -> list[str]:
    import html
    import re

    section = re.search(r'<section id="not-applied".*?</section>', r.content.decode(), re.S)
    return re.findall(r"<p[^>]*>(.*?)</p>", html.unescape(section.group(0))) if section else []


def test_an_unknown_parameter_is_left_out_and_said_naming_the_nearest_one(client):
    """As on the calculator's page (README, "How a request flows"): the page answers without it, and shows each
    left-out param=value with the sentence naming the nearest parameter this page takes."""
    r = client.get("/compat/", {"model": "deepseek-ai/DeepSeek-V3", "kv_cache_dtyp": "fp8", "tensor_parallel_size": "8"})
    assert r.status_code == 200 and "head size 576" in r.content.decode()  # answered, at the default KV dtype
    assert "--kv-cache-dtype auto" in r.content.decode()
    assert _not_applied(r) == [
        "Not applied: kv_cache_dtyp=fp8 (kv_cache_dtyp: unknown parameter 'kv_cache_dtyp'; did you mean "
        "'kv_cache_dtype'?)",
        "Not applied: tensor_parallel_size=8 (tensor_parallel_size: unknown parameter 'tensor_parallel_size'; no "
        "parameter has a name close to it (this page takes model, gpu, vllm_version, platform, kv_cache_dtype, "
        "block_size))"]
    v = client.get("/compat/verdict/", {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100",
                                        "attention_backed": "FLASH_ATTN"})
    assert v.status_code == 200 and 'id="compat-summary"' in v.content.decode()
    assert _not_applied(v) == ["Not applied: attention_backed=FLASH_ATTN (attention_backed: unknown parameter "
                               "'attention_backed'; did you mean 'attention_backend'?)"]
    # the page's own parameters (and empty ones) say nothing
    assert _not_applied(client.get("/compat/", {"model": "deepseek-ai/DeepSeek-V3", "kv_cache_dtype": "fp8",
                                                "block_size": "", "foo": ""})) == []
