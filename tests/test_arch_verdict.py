"""A release whose model registry lacks the architecture is a verdict, not an input error, on every surface.

vLLM resolves the model class from ``architectures`` before it sizes anything (``_ModelRegistry.inspect_model_cls``);
an unregistered class stops it with ``ValueError: Model architectures [...] are not supported for now``. When the
calculator can size the model's layers from its config, the answer is ``does_not_start`` in those words, with the
memory figures and ``--vllm-version <first release that has it>`` offered (as for Qwen3.5 on 0.11.2,
tests/test_compat_architectures.py). When it cannot size them (a layer it does not model at all, or one whose rules
start with the release that added the model), the refusal stays an input error and says the registry's answer too.

Expected values: the registry facts are the rows of ``calculator.engine.layers.SHAPE_RULES`` (Gemma4ForCausalLM
registry.py:114 and Gemma4ForConditionalGeneration :385 in 0.19.0, absent in 0.18.1; KimiLinearForCausalLM :122 in
0.11.1, absent in 0.11.0; DeepseekV32ForCausalLM :73 in 0.11.0, absent in 0.10.2), read from each wheel; KV bytes
per token are worked out by hand from the catalog config (google/gemma-4-26B-A4B, calculator/data/model_configs).
"""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from calculator.engine.errors import EngineInputError
from calculator.engine.layers import SHAPE_RULES, registry_gap
from calculator.engine.runtime import parse_version
from calculator.plan import make_plan
from calculator.request import covered_releases, parse_request
from compat import extract

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "calculator" / "data" / "model_configs"
GEMMA4 = "google/gemma-4-26B-A4B"  # architectures ["Gemma4ForConditionalGeneration"]
WORDS = "ValueError: Model architectures ['Gemma4ForConditionalGeneration'] are not supported for now"
# text_config: 25 sliding layers x 8 KV heads x 256, 5 global x 2 KV heads x 512, K and V, bf16
GEMMA4_KV_BYTES = 25 * 8 * 256 * 2 * 2 + 5 * 2 * 512 * 2 * 2  # 225,280 B per token
pytestmark = pytest.mark.django_db  # the catalog model is looked up through the metadata cache


def catalog(name: str) -> dict:
    return json.loads((CATALOG / name).read_text())


def plan(local: dict | None = None, **params):
    return make_plan(parse_request({"model": "x/local" if local else GEMMA4, "gpu": "H100", **params}),
                     {"config": local, "source": "test config"} if local else None, with_speed=False)


# ---------------------------------------------------------------- two readings of the registry agree
def test_the_engine_rows_agree_with_every_releases_compat_data():
    """The layer rules' registry rows (read per patch) and the compat data (each release's registry.py, extracted by
    compat.extract.model_architectures) are two readings of the same file: on every covered release a row's class is
    registered exactly when the row says so."""
    names = sorted({r.rule.split(":", 1)[1] for r in SHAPE_RULES if r.rule.startswith("arch:")})
    assert names == ["DeepseekV32ForCausalLM", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration",
                     "KimiLinearForCausalLM"]
    for rel in covered_releases():
        registered = extract.load(rel)["model_architectures"]
        for name in names:
            assert (registry_gap(name, parse_version(rel)) is None) == (name in registered), (name, rel)


# ---------------------------------------------------------------- the layers are known: a verdict with figures
@pytest.mark.parametrize("release", ["0.11.2", "0.15.1", "0.18.1"])
def test_gemma4_before_0_19_does_not_start_with_its_figures_and_the_release_that_has_it(release):
    p = plan(vllm_version=release, max_model_len="8192")
    assert p.verdict.status == "does_not_start"
    assert p.verdict.headline.startswith(WORDS + ".")
    assert p.compat.ok is False and p.compat.architecture.first_release == "0.19.0"
    assert {"vllm_version": "0.19.0"} in [s.params for s in p.verdict.suggestions]
    assert p.memory.kv_bytes_per_token == GEMMA4_KV_BYTES
    assert "Gemma4ForConditionalGeneration is not in vLLM" in p.memory.sources["architecture"]


def test_gemma4_on_0_19_works_with_the_same_layers():
    p = plan(vllm_version="0.19.0", max_model_len="8192")
    assert p.verdict.status == "works" and p.memory.kv_bytes_per_token == GEMMA4_KV_BYTES


def test_api_answers_200_with_the_verdict(client, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = client.get("/api/estimate", {"model": GEMMA4, "gpu": "H100", "vllm_version": "0.15.1", "max_model_len": "8192"})
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["verdict"] == "does_not_start" and body["compat"]["ok"] is False
    assert body["verdict_headline"].startswith(WORDS + ".")
    assert {"vllm_version": "0.19.0"} in [s["params"] for s in body["suggestions"]]
    assert body["kv_bytes_per_token"] == GEMMA4_KV_BYTES


def test_estimate_command_exits_1_and_offers_0_19():
    out = StringIO()
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", GEMMA4, "--gpu", "H100", "--vllm-version", "0.15.1", "--max-model-len",
                     "8192", stdout=out)
    assert err.value.returncode == 1
    assert str(err.value).startswith("does not start: " + WORDS + ".")
    assert "--vllm-version 0.19.0" in out.getvalue()
    assert "KV cache size" in out.getvalue()  # the memory figures are shown with the verdict


def test_check_compat_command_exits_1():
    out = StringIO()
    with pytest.raises(CommandError) as err:
        call_command("check_compat", "--model", GEMMA4, "--gpu", "H100", "--vllm-version", "0.15.1", stdout=out)
    assert err.value.returncode == 1
    assert WORDS in out.getvalue() + str(err.value)


def test_the_page_shows_the_verdict_and_links_0_19(client, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = client.get("/", {"model": GEMMA4, "gpu": "H100", "vllm_version": "0.15.1", "max_model_len": "8192"},
                   follow=True)
    assert r.status_code == 200
    html = " ".join(r.content.decode().split())
    assert "Model architectures [&#x27;Gemma4ForConditionalGeneration&#x27;] are not supported for now" in html
    assert "--vllm-version 0.19.0" in html and "vllm_version=0.19.0" in html


def test_an_older_release_with_an_uncapped_transformers_depends_on_the_transformers_backend():
    """0.10.2 lacks Gemma4ForCausalLM (its compat data: registry.py has no Gemma4; SHAPE_RULES row from 0.19.0) but,
    unlike 0.18.1, does not cap transformers (vllm-0.10.2.dist-info/METADATA:32 ``transformers>=4.55.2``), and with
    --model-impl auto it tries the Transformers backend first (registry.py:651, _try_resolve_transformers :539): the
    verdict depends on the installed transformers, naming 0.19.0. A Gemma 4 text model whose global layers are shaped
    like its sliding ones (8 KV heads of 256, K and V kept) groups in 0.10.2's KV cache manager (one page size), so its
    figures exist: 30 layers x 8 x 256 x 2 x 2 B = 245,760 B per token."""
    cfg = {**catalog("google__gemma-4-26B-A4B.json")["text_config"], "architectures": ["Gemma4ForCausalLM"],
           "global_head_dim": 256, "num_global_key_value_heads": 8, "attention_k_eq_v": False}
    p = plan(cfg, vllm_version="0.10.2", max_model_len="8192")
    assert p.verdict.status == "depends"
    assert "transformers>=4.55.2, vllm-0.10.2.dist-info/METADATA:32" in p.verdict.condition
    assert "vLLM 0.10.2 does not register Gemma4ForCausalLM; vLLM registers it from 0.19.0" in p.verdict.condition
    assert p.memory.kv_bytes_per_token == 30 * 8 * 256 * 2 * 2 == 245_760
    assert plan(cfg, vllm_version="0.19.0", max_model_len="8192").verdict.status == "works"


def test_another_patch_of_a_covered_minor_takes_the_row_of_its_own_release():
    """0.11.0 is answered by 0.11.2's compat data, whose registry has KimiLinearForCausalLM (registered from 0.11.1):
    check_compat used to say it works; the row read in 0.11.0 says vLLM stops."""
    cfg = str(ROOT / "tests" / "data" / "moonshotai__Kimi-Linear-48B-A3B-Instruct.json")
    out = StringIO()
    with pytest.raises(CommandError) as err:
        call_command("check_compat", "--config", cfg, "--gpu", "H100", "--vllm-version", "0.11.0", stdout=out)
    assert err.value.returncode == 1
    assert "Model architectures ['KimiLinearForCausalLM'] are not supported for now" in str(err.value)
    call_command("check_compat", "--config", cfg, "--gpu", "H100", "--vllm-version", "0.11.1", stdout=StringIO())


# ---------------------------------------------------------------- the layers cannot be sized: the refusal stays
def test_layers_whose_rules_start_with_the_model_stay_refused_naming_the_release():
    """DeepSeek-V3.2 on 0.10.2 and Kimi Linear on 0.11.0: vLLM lacks the class, and the calculator's sparse MLA / KDA
    rules start with the release that added it, so there are no figures to show: an input error on vllm_version in
    vLLM's words, naming the release to ask."""
    with pytest.raises(EngineInputError) as err:
        plan(catalog("deepseek-ai__DeepSeek-V3.2.json"), vllm_version="0.10.2", tensor_parallel_size="8", gpu="H200")
    assert err.value.field == "vllm_version"
    assert "\"ValueError: Model architectures ['DeepseekV32ForCausalLM'] are not supported for now" in err.value.message
    assert "not modelled on this release" in err.value.message and "--vllm-version 0.11.0" in err.value.message
    assert "model registry stops it" not in err.value.message  # said once
    kimi = json.loads((ROOT / "tests" / "data" / "moonshotai__Kimi-Linear-48B-A3B-Instruct.json").read_text())
    with pytest.raises(EngineInputError) as err:
        plan(kimi, vllm_version="0.11.0", max_model_len="8192")
    assert err.value.field == "vllm_version"
    assert "\"ValueError: Model architectures ['KimiLinearForCausalLM'] are not supported for now" in err.value.message
    assert "--vllm-version 0.11.1" in err.value.message


def test_a_layer_not_modelled_stays_not_modelled_and_adds_the_registrys_answer():
    """GLM-5 (GlmMoeDsaForCausalLM with index_topk) is not modelled on any release; where the release's registry lacks
    the class (0.11.2, registry.py:785 raise), the refusal says that too; where it has it, only the refusal."""
    glm5 = catalog("zai-org__GLM-5.json")
    with pytest.raises(EngineInputError) as old:
        plan(glm5, vllm_version="0.11.2", tensor_parallel_size="8", gpu="H200")
    assert old.value.field == "model" and old.value.message.startswith("not modelled: config.json has index_topk")
    assert ("vLLM 0.11.2's model registry stops it at start-up before anything is sized: ValueError: Model "
            "architectures ['GlmMoeDsaForCausalLM'] are not supported for now.") in old.value.message
    with pytest.raises(EngineInputError) as new:
        plan(glm5, vllm_version="0.33.0", tensor_parallel_size="8", gpu="H200")
    assert new.value.message.startswith("not modelled") and "model registry" not in new.value.message


def test_a_layer_vllm_does_not_model_names_the_runtime_that_does(client):
    """GLM-5's DeepSeek sparse attention is refused on vLLM (not modelled) but SGLang's DSA pools size it
    (tests/test_sglang_memory.py): the refusal names SGLang and how to ask, and SGLang's answer is a verdict with
    figures, not a refusal."""
    params = {"model": "zai-org/GLM-5", "gpu": "H200", "tensor_parallel_size": "8"}
    vllm = client.get("/api/estimate", params)
    assert vllm.status_code == 400 and vllm.json()["field"] == "model"
    assert vllm.json()["error"].startswith("model: not modelled: config.json has index_topk")
    assert vllm.json()["error"].endswith("SGLang's answer models it: ask with runtime sglang (--runtime sglang)")
    sglang = client.get("/api/estimate", {**params, "runtime": "sglang"})
    assert sglang.status_code == 200 and sglang.json()["weights_gib"] > 0
