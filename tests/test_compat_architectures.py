"""Does the chosen vLLM release know the model's class? Each release's ``ModelRegistry`` names (compat/data, read
from ``vllm/model_executor/models/registry.py`` of its CUDA wheel by compat.extract.model_architectures), what vLLM
does with a name it lacks (its Transformers-backend fallback, ``_normalize_arch``, ``_raise_for_unsupported``), and
the verdict through ``verdict_for``, ``/api/estimate``, ``manage.py estimate`` and ``check_compat``.

Every expected value was read by hand from the cited file of the wheel (``pip download vllm==X --no-deps``, or
``transformers==X``), not from this code's output.
"""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from compat import extract
from compat.architectures import check_architecture, first_release_with, pip_transformers
from compat.checks import verdict_for
from tests.conftest import CONFIGS, load_config

REG = "vllm/model_executor/models/registry.py"
QWEN35 = "Qwen__Qwen3.5-9B.json"  # architectures ["Qwen3_5ForConditionalGeneration"], model_type qwen3_5
GLM47_FLASH = "zai-org__GLM-4.7-Flash.json"  # ["Glm4MoeLiteForCausalLM"], model_type glm4_moe_lite
MLLAMA = "meta-llama__Llama-3.2-11B-Vision.json"  # ["MllamaForConditionalGeneration"]


def names(release: str) -> dict:
    return extract.load(release)["model_architectures"]


# ---------------------------------------------------------------- the registry, read from each wheel
def test_qwen3_5_arrives_in_0_17_and_qwen3_is_there_from_0_11():
    # 0.11.2 and 0.16.0 registry.py: no "Qwen3_5" anywhere; 0.17.1 registry.py:496 "Qwen3_5ForConditionalGeneration"
    # inside _MULTIMODAL_MODELS (:306, next dict _SPECULATIVE_DECODING_MODELS at :522)
    assert "Qwen3_5ForConditionalGeneration" not in names("0.11.2")
    assert "Qwen3_5ForConditionalGeneration" not in names("0.16.0")
    assert names("0.17.1")["Qwen3_5ForConditionalGeneration"] == {"dict": "_MULTIMODAL_MODELS",
                                                                  "source": f"{REG}:496"}
    assert names("0.17.1")["Qwen3_5MoeForConditionalGeneration"]["source"] == f"{REG}:500"
    # 0.11.2 registry.py:163 "Qwen3ForCausalLM" in _TEXT_GENERATION_MODELS (:57)
    assert names("0.11.2")["Qwen3ForCausalLM"] == {"dict": "_TEXT_GENERATION_MODELS", "source": f"{REG}:163"}
    assert first_release_with("Qwen3_5ForConditionalGeneration") == "0.17.1"
    # 0.9.2, the oldest covered release, has it already: registry.py:117 in _TEXT_GENERATION_MODELS (:33)
    assert names("0.9.2")["Qwen3ForCausalLM"] == {"dict": "_TEXT_GENERATION_MODELS", "source": f"{REG}:117"}
    assert first_release_with("Qwen3ForCausalLM") == "0.9.2"


def test_glm_4_7_flash_arrives_in_0_15():
    # 0.14.1 registry.py has no Glm4MoeLiteForCausalLM; 0.15.1 registry.py:115, _TEXT_GENERATION_MODELS (:69)
    assert "Glm4MoeLiteForCausalLM" not in names("0.14.1")
    assert names("0.15.1")["Glm4MoeLiteForCausalLM"] == {"dict": "_TEXT_GENERATION_MODELS", "source": f"{REG}:115"}


def test_the_dicts_of_the_registry_change_and_are_read_from_vllm_models():
    # 0.11.2 registry.py:464-472 _VLLM_MODELS spreads 7 dicts (_CROSS_ENCODER_MODELS at :227); 0.17.1 still has
    # _CROSS_ENCODER_MODELS (:275); 0.18.1 :625 spreads 10, the cross encoders split into _LATE_INTERACTION_MODELS (:270),
    # _REWARD_MODELS (:282), _TOKEN_CLASSIFICATION_MODELS (:288), _SEQUENCE_CLASSIFICATION_MODELS (:297)
    old = extract.load("0.11.2")["model_registry"]
    assert [d for d, _ in old["dicts"]] == [
        "_TEXT_GENERATION_MODELS", "_EMBEDDING_MODELS", "_CROSS_ENCODER_MODELS", "_MULTIMODAL_MODELS",
        "_SPECULATIVE_DECODING_MODELS", "_TRANSFORMERS_SUPPORTED_MODELS", "_TRANSFORMERS_BACKEND_MODELS"]
    assert dict(old["dicts"])["_CROSS_ENCODER_MODELS"] == f"{REG}:227"
    assert old["registry"] == f"{REG}:1097"  # ModelRegistry = _ModelRegistry({... _VLLM_MODELS.items()})
    assert "_CROSS_ENCODER_MODELS" in dict(extract.load("0.17.1")["model_registry"]["dicts"])
    new = dict(extract.load("0.18.1")["model_registry"]["dicts"])
    assert "_CROSS_ENCODER_MODELS" not in new and new["_LATE_INTERACTION_MODELS"] == f"{REG}:270"
    assert new["_SEQUENCE_CLASSIFICATION_MODELS"] == f"{REG}:297"


def test_how_each_release_resolves_a_name_it_lacks():
    r = extract.load("0.11.2")["model_registry"]
    # registry.py:785-788 raise ValueError(f"Model architectures {architectures} are not supported for now. ...")
    assert r["messages"]["unsupported"]["source"] == f"{REG}:785"
    assert r["messages"]["unsupported"]["message"].startswith(
        "ValueError: Model architectures {architectures} are not supported for now.")
    # :491 "MllamaForConditionalGeneration": "0.10.2" in _PREVIOUSLY_SUPPORTED_MODELS; no plugin list before 0.19
    assert r["previously_supported"]["MllamaForConditionalGeneration"] == {"until": "0.10.2", "source": f"{REG}:491"}
    assert r["messages"]["out_of_tree"] is None
    # :916-920 the first Transformers fallback (all unregistered, model_impl == "auto", convert_type none);
    # :857 if not model_module.is_backend_compatible(); vllm/config/model.py:269 model_impl = "auto"
    tf = r["transformers_fallback"]
    assert tf["fallback"][0] == f"{REG}:916"
    assert tf["compatible"] == {"test": "model_module.is_backend_compatible()", "source": f"{REG}:857"}
    assert tf["model_impl_default"] == {"value": "auto", "source": "vllm/config/model.py:269"}
    # 0.32.0 registry.py:1283-1286 adds `or transformers_model_cls._can_set_attn_implementation()`; :857 Bart's plugin
    r32 = extract.load("0.32.0")["model_registry"]
    assert r32["transformers_fallback"]["compatible"]["source"] == f"{REG}:1283"
    assert "_can_set_attn_implementation()" in r32["transformers_fallback"]["compatible"]["test"]
    assert r32["out_of_tree"]["BartForConditionalGeneration"] == {
        "plugin": "https://github.com/vllm-project/bart-plugin", "source": f"{REG}:857"}


def test_the_transformers_each_wheel_requires():
    # vllm-0.11.2.dist-info/METADATA:31, vllm-0.19.1.dist-info/METADATA:31, vllm-0.32.0.dist-info/METADATA:31
    assert extract.load("0.11.2")["requirements"]["transformers"] == {
        "value": "transformers<5,>=4.56.0", "source": "vllm-0.11.2.dist-info/METADATA:31"}
    assert extract.load("0.19.1")["requirements"]["transformers"]["value"] == \
        "transformers!=5.0.*,!=5.1.*,!=5.2.*,!=5.3.*,!=5.4.*,!=5.5.0,>=4.56.0"
    assert extract.load("0.32.0")["requirements"]["transformers"]["value"] == "transformers<5.20.0,>=5.16.1"
    # pip takes the newest release under the cap (pip index versions transformers: 4.57.6 is the last 4.x,
    # 5.19.0 the last below 5.20.0); no cap, no single answer
    assert pip_transformers("transformers<5,>=4.56.0")["release"] == "4.57.6"
    assert pip_transformers("transformers<5.20.0,>=5.16.1")["release"] == "5.19.0"
    assert pip_transformers("transformers!=5.0.*,!=5.5.0,>=4.56.0") is None


def test_0_34_caps_transformers_below_5_23_and_pip_takes_5_22_2():
    # vllm-0.34.0.dist-info/METADATA:32 Requires-Dist: transformers<5.23.0,>=5.16.1 (0.33.0: <5.21.0, same line);
    # pip index versions transformers (2026-12-02): 5.22.2 is the newest release below 5.23.0
    req = extract.load("0.34.0")["requirements"]["transformers"]
    assert req == {"value": "transformers<5.23.0,>=5.16.1", "source": "vllm-0.34.0.dist-info/METADATA:32"}
    assert pip_transformers(req["value"])["release"] == "5.22.2"
    assert pip_transformers(extract.load("0.33.0")["requirements"]["transformers"]["value"])["release"] == "5.20.2"


def test_0_34_serves_gemma_through_the_transformers_backend():
    # 0.33.0 registry.py:112 "GemmaForCausalLM": ("gemma", "GemmaForCausalLM") in _TEXT_GENERATION_MODELS;
    # 0.34.0 registry.py:787 "GemmaForCausalLM": ("transformers", "TransformersForCausalLM") in
    # _TRANSFORMERS_SUPPORTED_MODELS: still a registered name, so it starts
    assert names("0.33.0")["GemmaForCausalLM"] == {"dict": "_TEXT_GENERATION_MODELS", "source": f"{REG}:112"}
    assert names("0.34.0")["GemmaForCausalLM"] == {"dict": "_TRANSFORMERS_SUPPORTED_MODELS", "source": f"{REG}:787"}
    r = verdict_for(load_config("google__gemma-7b.json"), "H100", vllm_version="0.34.0")
    assert r.ok is True and r.architecture.status == "registered"
    assert r.architecture.registry_dict == "_TRANSFORMERS_SUPPORTED_MODELS"


def test_transformers_classes_read_from_its_wheel():
    # transformers 4.57.6: no models/qwen3_5 directory at all; models/mllama/modeling_mllama.py:1540
    # class MllamaForConditionalGeneration; 5.19.0 ships models/qwen3_5/modeling_qwen3_5.py
    old = extract.load("4.57.6", "transformers")
    assert "Qwen3_5ForConditionalGeneration" not in old["classes"] and "qwen3_5" not in old["model_types"]
    assert old["classes"]["MllamaForConditionalGeneration"] == "transformers/models/mllama/modeling_mllama.py:1540"
    new = extract.load("5.19.0", "transformers")
    assert new["classes"]["Qwen3_5ForConditionalGeneration"].startswith("transformers/models/qwen3_5/modeling_qwen3_5.py:")
    # transformers 5.19.0 models/mllama/modeling_mllama.py:1393 class MllamaForConditionalGeneration
    assert new["classes"]["MllamaForConditionalGeneration"] == "transformers/models/mllama/modeling_mllama.py:1393"


def test_every_transformers_file_records_its_wheel():
    from compat import releases

    assert releases.covered_releases("transformers") == ("4.57.6", "5.17.0", "5.19.0", "5.20.2", "5.22.2")
    for rel in releases.covered_releases("transformers"):
        d = extract.load(rel, "transformers")
        assert d["provenance"]["file"] == f"transformers-{rel}-py3-none-any.whl"
        assert len(d["provenance"]["sha256"]) == 64 and d["provenance"]["extractor_version"] == extract.EXTRACTOR_VERSION
        # configuration_auto.py:1362 in 4.57.6, :430 in 5.19.0 raise ValueError(f"The checkpoint ... model type ...")
        assert d["unknown_model_type"]["message"].startswith("ValueError: The checkpoint you are trying to load has")


# ---------------------------------------------------------------- the check
def test_qwen3_5_on_0_11_does_not_start_and_0_17_serves_it():
    r = verdict_for(load_config(QWEN35), "H100", vllm_version="0.11.2")
    assert r.ok is False and r.architecture.status == "unsupported"
    assert r.error.startswith("ValueError: Model architectures ['Qwen3_5ForConditionalGeneration'] are not supported "
                              "for now.")
    assert f"({REG}:785; vLLM registers it from 0.17.1)" in r.error
    # and the Transformers fallback cannot take it: pip installs transformers 4.57.6 for transformers<5, without the class
    assert "has no Qwen3_5ForConditionalGeneration for the Transformers-backend fallback" in r.error
    assert any("does not know model_type 'qwen3_5'" in n for n in r.notes)
    assert r.architecture.first_release == "0.17.1"
    ok = verdict_for(load_config(QWEN35), "H100", vllm_version="0.17.1")
    assert ok.ok is True and ok.error is None and ok.architecture.source == f"{REG}:496"


def test_glm_4_7_flash_on_0_14_does_not_start():
    r = verdict_for(load_config(GLM47_FLASH), "H100", vllm_version="0.14.1")
    assert r.ok is False and "Model architectures ['Glm4MoeLiteForCausalLM'] are not supported for now" in r.error
    assert r.architecture.first_release == "0.15.1"
    assert verdict_for(load_config(GLM47_FLASH), "H100", vllm_version="0.15.1").ok is True


def test_a_release_without_a_transformers_cap_depends_on_the_installed_transformers():
    # DeepSeek-V4: 0.19.1's registry has no DeepseekV4 (0.20.2 registry.py:99 has it) and 0.19.1 does not cap
    # transformers, so whether transformers' class takes the fallback (registry.py:1101, :1042) is not knowable here
    r = verdict_for(_calculator_config("deepseek-ai__DeepSeek-V4-Flash.json"), "H200", vllm_version="0.19.1")
    assert r.ok is None and r.architecture.status == "transformers_backend"
    cond = r.auto_conditions[-1]
    assert "defines DeepseekV4ForCausalLM and it supports vLLM's attention interface" in cond
    assert "transformers!=5.0.*" in cond and f"{REG}:1042" in cond and f"{REG}:1101" in cond
    assert f"\"ValueError: Model architectures ['DeepseekV4ForCausalLM'] are not supported for now." in cond
    assert r.architecture.first_release == "0.20.2"


def test_mllama_on_the_default_release_depends_on_the_transformers_backend():
    # 0.32.0 registry.py:815 MllamaForConditionalGeneration retired "0.10.2", message :1190; transformers 5.19.0 (what
    # pip installs for <5.20.0) has the class (modeling_mllama.py:1393), so the fallback may take it
    r = verdict_for(load_config(MLLAMA), "H100", vllm_version="0.32.0")
    assert r.ok is None
    cond = r.auto_conditions[-1]
    assert cond.startswith("MllamaForConditionalGeneration of transformers 5.19.0 (what pip installs for "
                           "transformers<5.20.0,>=5.16.1, transformers/models/mllama/modeling_mllama.py:1393) supports")
    assert ("\"ValueError: Model architecture MllamaForConditionalGeneration was supported in vLLM until v0.10.2, and "
            f"is not supported anymore. Please use an older version of vLLM if you want to use this model architecture."
            f"\" ({REG}:1190)") in cond
    # no later release registers it; 0.10.2 is the last that does (registry.py:271 in _MULTIMODAL_MODELS, :210)
    assert names("0.10.2")["MllamaForConditionalGeneration"] == {"dict": "_MULTIMODAL_MODELS", "source": f"{REG}:271"}
    assert r.architecture.first_release == "0.10.2"
    assert "vLLM 0.10.2 is the last covered release that registers it" in cond


def test_a_name_the_registry_normalises_is_served():
    # 0.32.0 _normalize_arch (registry.py:1297): "Qwen3ForConditionalGeneration" matches the suffix
    # "ForConditionalGeneration" (vllm/config/model.py:2324); "ForCausalLM" (:2323) replaces it -> Qwen3ForCausalLM
    cfg = {**load_config("Qwen__Qwen3-8B.json"), "architectures": ["Qwen3ForConditionalGeneration"]}
    a = check_architecture(extract.load("0.32.0"), cfg)
    assert a.ok is True and a.status == "normalized" and a.resolved == "Qwen3ForCausalLM"
    assert verdict_for(cfg, "H100", vllm_version="0.32.0").ok is True


def test_remote_code_keeps_the_fallback_open_and_plugins_are_named():
    # an auto_map AutoModel entry: _try_resolve_transformers loads the remote class (registry.py:832-844 in 0.11.2),
    # so even under transformers<5 the answer depends on that class
    cfg = {**load_config(QWEN35), "auto_map": {"AutoConfig": "x.C", "AutoModelForCausalLM": "x.M"}}
    a = check_architecture(extract.load("0.11.2"), cfg)
    assert a.ok is None and "auto_map AutoModel class" in a.condition
    # 0.32.0 registry.py:857 Bart moved to a plugin: its own message (:1199-1203) when the fallback fails
    bart = {"architectures": ["BartForConditionalGeneration"], "model_type": "bart"}
    a = check_architecture(extract.load("0.32.0"), bart)
    assert a.message == ("ValueError: Model architecture BartForConditionalGeneration is not supported in-tree anymore. "
                         "Please install the plugin at https://github.com/vllm-project/bart-plugin if you want to use "
                         "this model architecture.")


def _calculator_config(name: str) -> dict:
    from calculator.metadata.catalog import CATALOG_DIR

    return json.loads((CATALOG_DIR / name).read_text())


# ---------------------------------------------------------------- through the API and the commands
@pytest.mark.django_db
def test_api_says_does_not_start_with_vllms_words_and_offers_the_first_release(client, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = client.get("/api/estimate", {"model": "Qwen/Qwen3.5-9B", "gpu": "H100", "vllm_version": "0.11.2",
                                      "max_model_len": "8192"})
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["verdict"] == "does_not_start" and body["compat"]["ok"] is False
    assert body["verdict_headline"].startswith(
        "ValueError: Model architectures ['Qwen3_5ForConditionalGeneration'] are not supported for now.")
    assert {"vllm_version": "0.17.1"} in [s["params"] for s in body["suggestions"]]
    # a model 0.11.2 registers still works there (registry.py:163 Qwen3ForCausalLM)
    ok = client.get("/api/estimate", {"model": "Qwen/Qwen3-8B", "gpu": "H100", "vllm_version": "0.11.2",
                                       "max_model_len": "8192"}).json()
    assert ok["verdict"] == "works" and ok["compat"]["ok"] is True


def test_estimate_command_exits_1_with_the_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = str(CONFIGS / QWEN35)
    out = StringIO()
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--config", cfg, "--gpu", "H100", "--vllm-version", "0.11.2", "--max-model-len", "8192",
                     stdout=out)
    assert err.value.returncode == 1
    assert str(err.value).startswith("does not start: ValueError: Model architectures "
                                     "['Qwen3_5ForConditionalGeneration'] are not supported for now.")
    assert "--vllm-version 0.17.1" in out.getvalue()
    out = StringIO()
    call_command("estimate", "--config", cfg, "--gpu", "H100", "--vllm-version", "0.17.1", "--max-model-len", "8192",
                 stdout=out)  # exit 0: works
    assert "Verdict" in out.getvalue() and "Does not start" not in out.getvalue()


def test_check_compat_command_says_so_too():
    out = StringIO()
    with pytest.raises(CommandError) as err:
        call_command("check_compat", "--config", str(CONFIGS / GLM47_FLASH), "--gpu", "H100", "--vllm-version", "0.14.1",
                     stdout=out)
    assert err.value.returncode == 1
    assert "Model architectures ['Glm4MoeLiteForCausalLM'] are not supported for now" in out.getvalue() + str(err.value)


@pytest.mark.django_db
def test_the_page_shows_the_refusal_and_links_the_first_release(client, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    r = client.get("/", {"model": "Qwen/Qwen3.5-9B", "gpu": "H100", "vllm_version": "0.11.2", "max_model_len": "8192"},
                   follow=True)
    assert r.status_code == 200
    html = " ".join(r.content.decode().split())
    assert "Model architectures [&#x27;Qwen3_5ForConditionalGeneration&#x27;] are not supported for now" in html
    assert "--vllm-version 0.17.1" in html and "vllm_version=0.17.1" in html
