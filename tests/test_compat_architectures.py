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
from compat.architectures import _admits, attention_support, check_architecture, first_release_with, pip_transformers
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


# ---------------------------------------------------------------- is the class the fallback finds compatible?
QWEN3_NEXT = "Qwen__Qwen3-Next-80B-A3B-Instruct.json"  # ["Qwen3NextForCausalLM"], model_type qwen3_next
MU = "transformers/modeling_utils.py"
GPT_NEO = {"architectures": ["GPTNeoForCausalLM"], "model_type": "gpt_neo"}  # EleutherAI/gpt-neo-*'s config.json


def test_transformers_says_whether_each_class_supports_the_attention_backend():
    """Read by hand in each transformers wheel (unzip -p transformers-X-py3-none-any.whl ...):
    ``PreTrainedModel._supports_attention_backend = False`` at modeling_utils.py:1980 (4.57.6), ``: bool = False``
    at :1148 (5.17.0), :1145 (5.19.0), :1143 (5.20.2, 5.22.2); ``is_backend_compatible`` returns it at :5823 (4.57.6),
    :4728 (5.19.0). ``class Qwen3NextPreTrainedModel(PreTrainedModel)`` (modeling_qwen3_next.py:952 in 4.57.6, :929 in
    5.19.0) sets no ``_supports_attention_backend``; ``MllamaPreTrainedModel`` sets it True (modeling_mllama.py:771
    in 4.57.6, :778 in 5.19.0)."""
    defaults = {"4.57.6": 1980, "5.17.0": 1148, "5.19.0": 1145, "5.20.2": 1143, "5.22.2": 1143}
    for rel, line in defaults.items():
        tf = extract.load(rel, "transformers")
        assert tf["attention_interface"]["is_backend_compatible"]["default"] == {"value": False,
                                                                                 "source": f"{MU}:{line}"}
        assert attention_support(tf, "Qwen3NextForCausalLM")["backend"] == [False, f"{MU}:{line}"], rel
    old, new = extract.load("4.57.6", "transformers"), extract.load("5.19.0", "transformers")
    assert old["attention_interface"]["is_backend_compatible"]["source"] == f"{MU}:5823"
    assert new["attention_interface"]["is_backend_compatible"]["source"] == f"{MU}:4728"
    assert attention_support(old, "MllamaForConditionalGeneration")["backend"] == [
        True, "transformers/models/mllama/modeling_mllama.py:771"]
    assert attention_support(new, "MllamaForConditionalGeneration")["backend"] == [
        True, "transformers/models/mllama/modeling_mllama.py:778"]
    # a class transformers does not export has no answer (and data without the keys has none either)
    assert attention_support(new, "NoSuchForCausalLM") is None
    assert attention_support({k: v for k, v in new.items() if k != "supports_attention_backend"},
                             "MllamaForConditionalGeneration") is None


def test_can_set_attn_implementation_is_read_from_the_modeling_file():
    """``_can_set_attn_implementation`` (modeling_utils.py:1912 in 5.19.0) searches the module's text for
    ``^class \\w*Attention\\w*\\(nn\\.Module\\):`` and then wants ``ALL_ATTENTION_FUNCTIONS.get_interface(``; 4.57.6
    (:2731) wants ``eager_attention_forward`` and ``ALL_ATTENTION_FUNCTIONS[self.config._attn_implementation]``.
    modeling_gpt_neo.py: ``class GPTNeoSelfAttention(nn.Module)`` at :146 (4.57.6) / :51 (5.19.0), neither needle;
    modeling_qwen3_next.py 5.19.0: ``class Qwen3NextAttention(nn.Module)`` :229, ``get_interface(`` at :284."""
    old, new = extract.load("4.57.6", "transformers"), extract.load("5.19.0", "transformers")
    h = new["attention_interface"]["can_set_attn_implementation"]
    assert h["source"] == f"{MU}:1912" and h["requires"] == ["ALL_ATTENTION_FUNCTIONS.get_interface("]
    assert h["attention_class"] == r"^class \w*Attention\w*\(nn\.Module\):" and h["multiline"] is True
    h_old = old["attention_interface"]["can_set_attn_implementation"]
    assert h_old["source"] == f"{MU}:2731" and h_old["multiline"] is False
    assert h_old["requires"] == ["eager_attention_forward", "ALL_ATTENTION_FUNCTIONS[self.config._attn_implementation]"]
    gpt_neo = "transformers/models/gpt_neo/modeling_gpt_neo.py"
    assert attention_support(new, "GPTNeoForCausalLM") == {"backend": [False, f"{MU}:1145"],
                                                           "can_set": [False, f"{gpt_neo}:51"]}
    assert attention_support(old, "GPTNeoForCausalLM") == {"backend": [False, f"{MU}:1980"],
                                                           "can_set": [False, f"{gpt_neo}:146"]}
    assert attention_support(new, "Qwen3NextForCausalLM")["can_set"] == [
        True, "transformers/models/qwen3_next/modeling_qwen3_next.py:284"]


def test_qwen3_next_on_0_10_1_says_plainly_that_no_covered_transformers_takes_it():
    """vLLM 0.10.1 registers no Qwen3NextForCausalLM (0.10.2 does) and requires ``transformers>=4.55.0``
    (vllm-0.10.1.dist-info/METADATA:31, no cap). registry.py:567 ``if not model_module.is_backend_compatible():``,
    :569 ``return None`` unless --model-impl transformers, :571 raises "... is not compatible with vLLM."; then
    ``_raise_for_unsupported`` raises at :497. Every covered transformers release defines the class and leaves
    ``_supports_attention_backend`` at PreTrainedModel's False, so with any of them vLLM stops; the verdict still
    depends, on a transformers release not read here."""
    r = verdict_for(load_config(QWEN3_NEXT), "H100", vllm_version="0.10.1")
    assert r.ok is None and r.architecture.status == "transformers_backend"
    cond = r.architecture.condition
    assert cond.startswith("the installed transformers is a release not read here whose Qwen3NextForCausalLM passes "
                           "vLLM's Transformers-backend test `model_module.is_backend_compatible()` "
                           f"({REG}:567): none of the 5 covered transformers releases that vLLM 0.10.1's "
                           "transformers>=4.55.0 (vllm-0.10.1.dist-info/METADATA:31, no upper bound: pip installs the "
                           "newest release on the day) admits and that define Qwen3NextForCausalLM passes it (4.57.6: "
                           f"`_supports_attention_backend` False ({MU}:1980); 5.17.0: `_supports_attention_backend` False "
                           f"({MU}:1148); 5.19.0: `_supports_attention_backend` False ({MU}:1145); 5.20.2: "
                           f"`_supports_attention_backend` False ({MU}:1143); 5.22.2: `_supports_attention_backend` "
                           f"False ({MU}:1143)).")
    assert f"`_try_resolve_transformers` then returns None ({REG}:567-571)" in cond
    assert (f"stops: \"ValueError: Model architectures ['Qwen3NextForCausalLM'] are not supported for now. "
            f"Supported architectures: <the 191 names of vLLM 0.10.1's registry>\" ({REG}:497)") in cond
    assert r.architecture.first_release == "0.10.2"
    assert any(n.startswith("not a does-not-start: transformers>=4.55.0 has no upper bound") for n in r.notes)


def test_gpt_neo_on_0_32_does_not_start_the_pinned_transformers_refuses_it():
    """vLLM 0.32.0 caps transformers<5.20.0 (METADATA:31): pip installs 5.19.0, whose GPTNeoForCausalLM
    (modeling_gpt_neo.py:518) fails both halves of registry.py:1283-1286 (``is_backend_compatible() or
    _can_set_attn_implementation()``): PreTrainedModel's False (modeling_utils.py:1145) and an attention class without
    the interface (:51). Under --model-impl auto :1287-1288 return None, so ``_raise_for_unsupported`` raises (:1205);
    :1290 is the --model-impl transformers error."""
    a = check_architecture(extract.load("0.32.0"), GPT_NEO)
    assert a.ok is False and a.status == "unsupported" and a.source == f"{REG}:1205"
    assert a.message.startswith("ValueError: Model architectures ['GPTNeoForCausalLM'] are not supported for now. "
                                "Supported architectures: ")
    assert (f"({REG}:1205; no covered vLLM release registers it); the transformers pip installs with vLLM 0.32.0 "
            "(5.19.0, the newest under transformers<5.20.0,>=5.16.1, vllm-0.32.0.dist-info/METADATA:31) defines "
            "GPTNeoForCausalLM (transformers/models/gpt_neo/modeling_gpt_neo.py:518) but fails the Transformers-backend "
            "test `transformers_model_cls.is_backend_compatible() or transformers_model_cls._can_set_attn_implementation()`"
            f" ({REG}:1283): `_supports_attention_backend` is False for it in transformers 5.19.0 ({MU}:1145) and "
            "`_can_set_attn_implementation()` is False (its module's attention class at "
            "transformers/models/gpt_neo/modeling_gpt_neo.py:51 does not call the attention interface); with "
            f"--model-impl auto `_try_resolve_transformers` then returns None ({REG}:1283-1290)") in a.message
    assert any("\"ValueError: The Transformers implementation of 'GPTNeoForCausalLM' is not compatible with vLLM.\" "
               f"({REG}:1290)" in n for n in a.notes)


def test_mpt_on_0_32_stops_with_the_retired_message():
    """0.32.0 registry.py:848 ``"MptForCausalLM": "0.28.0"`` in _PREVIOUSLY_SUPPORTED_MODELS; transformers 5.19.0
    modeling_mpt.py: MptPreTrainedModel sets no _supports_attention_backend and ``class MptAttention(nn.Module)``
    has no ``get_interface(``: the fallback refuses it and _raise_for_unsupported says so (:1190)."""
    a = check_architecture(extract.load("0.32.0"), {"architectures": ["MptForCausalLM"], "model_type": "mpt"})
    assert a.ok is False
    assert a.message.startswith("ValueError: Model architecture MptForCausalLM was supported in vLLM until v0.28.0, "
                                f"and is not supported anymore. Please use an older version of vLLM if you want to use "
                                f"this model architecture. ({REG}:1190;")
    # modeling_mpt.py:368 class MptForCausalLM(MptPreTrainedModel, ...); :65 class MptAttention(nn.Module)
    assert ("defines MptForCausalLM (transformers/models/mpt/modeling_mpt.py:368)" in a.message
            and f"transformers 5.19.0 ({MU}:1145)" in a.message
            and "attention class at transformers/models/mpt/modeling_mpt.py:65" in a.message)


def test_a_backend_compatible_class_stays_a_condition():
    # Mllama on 0.32.0: 5.19.0's class passes (modeling_mllama.py:778 _supports_attention_backend = True), the
    # verdict still depends (the backend has to build the model), with the same condition as before
    r = verdict_for(load_config(MLLAMA), "H100", vllm_version="0.32.0")
    assert r.ok is None and r.architecture.status == "transformers_backend"
    assert ("transformers/models/mllama/modeling_mllama.py:778 _supports_attention_backend = True for "
            "MllamaForConditionalGeneration (transformers 5.19.0)") in r.architecture.sources


def test_an_uncapped_release_from_0_30_asks_both_tests():
    """vLLM 0.30.0 requires transformers>=5.10.4 (no cap, so 4.57.6 does not count) and accepts
    ``is_backend_compatible() or _can_set_attn_implementation()``; GPTNeoForCausalLM (modeling_gpt_neo.py:518 in
    5.17.0 to 5.22.2) fails both in every covered 5.x: the default False and ``class GPTNeoSelfAttention(nn.Module)``
    at :51 with no ``ALL_ATTENTION_FUNCTIONS.get_interface(`` in the file."""
    a = check_architecture(extract.load("0.30.0"), GPT_NEO)
    assert a.ok is None and a.status == "transformers_backend"
    assert "none of the 4 covered transformers releases that vLLM 0.30.0's transformers>=5.10.4" in a.condition
    assert ("5.22.2: `_supports_attention_backend` False (transformers/modeling_utils.py:1143), "
            "`_can_set_attn_implementation()` False (attention class at "
            "transformers/models/gpt_neo/modeling_gpt_neo.py:51))") in a.condition
    assert "4.57.6" not in a.condition


def test_the_requirement_decides_which_covered_transformers_count():
    # vllm-0.29.0.dist-info/METADATA:32 transformers>=5.10.4 leaves 4.57.6 out; 0.19.1's != clauses leave 5.17.0 in
    assert not _admits("transformers>=5.10.4", "4.57.6") and _admits("transformers>=5.10.4", "5.17.0")
    req = "transformers!=5.0.*,!=5.1.*,!=5.2.*,!=5.3.*,!=5.4.*,!=5.5.0,>=4.56.0"
    assert _admits(req, "5.17.0") and _admits(req, "4.57.6") and not _admits(req, "5.4.1") and not _admits(req, "5.5")
    assert not _admits("transformers<5,>=4.56.0", "5.17.0") and _admits("transformers<5,>=4.56.0", "4.57.6")


def test_estimate_command_says_depends_for_qwen3_next_on_0_10_1(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = StringIO()
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--config", str(CONFIGS / QWEN3_NEXT), "--gpu", "H100", "--tensor-parallel-size", "4",
                     "--vllm-version", "0.10.1", stdout=out)
    assert err.value.returncode == 3
    assert "Depends: works if the installed transformers is a release not read here whose Qwen3NextForCausalLM" in \
        out.getvalue()
    assert "none of the 5 covered transformers releases that vLLM 0.10.1's transformers>=4.55.0" in out.getvalue()


_MU_SRC = '''import re
import sys
from torch import nn


class PreTrainedModel(nn.Module):
    _supports_attention_backend: bool = False

    @classmethod
    def _can_set_attn_implementation(cls) -> bool:
        code = open(sys.modules[cls.__module__].__file__).read()
        if re.search(r"^class \\w*Attention\\w*\\(nn\\.Module\\):", code, re.MULTILINE):
            can_set = "ALL_ATTENTION_FUNCTIONS.get_interface(" in code
        else:
            can_set = True
        return can_set

    @classmethod
    def is_backend_compatible(cls):
        return cls._supports_attention_backend
'''
_LAYERS_SRC = '''from .modeling_utils import PreTrainedModel


class GenericHead(PreTrainedModel):
    pass
'''
_BAR_SRC = '''from torch import nn
from ...modeling_utils import PreTrainedModel


class BarSelfAttention(nn.Module):
    pass


class BarPreTrainedModel(PreTrainedModel):
    _supports_attention_backend = False


class BarForCausalLM(BarPreTrainedModel):
    pass


__all__ = ["BarForCausalLM", "BarPreTrainedModel"]
'''
_FOO_SRC = '''from torch import nn
from ...modeling_utils import PreTrainedModel
from ...modeling_layers import GenericHead
from ..bar.modeling_bar import BarPreTrainedModel


class FooAttention(nn.Module):
    def forward(self):
        return ALL_ATTENTION_FUNCTIONS.get_interface("sdpa")


class FooPreTrainedModel(PreTrainedModel):
    _supports_attention_backend = True


class FooForCausalLM(FooPreTrainedModel):
    pass


class FooForSequenceClassification(GenericHead, FooPreTrainedModel):
    pass


class FooFromBar(BarPreTrainedModel):
    pass


class FooFromNowhere(NotDefinedAnywhere):
    pass


class FooHelper:
    pass


class FooMtp(FooPreTrainedModel):
    @classmethod
    def _can_set_attn_implementation(cls):
        return False


__all__ = ["FooForCausalLM", "FooForSequenceClassification", "FooFromBar", "FooFromNowhere", "FooHelper", "FooMtp"]
'''


def test_the_extractor_follows_bases_in_pythons_order(tmp_path):
    """A made-up transformers wheel whose answers are worked out by hand from the text above: C3 puts
    FooPreTrainedModel (True, modeling_foo.py:13) before PreTrainedModel (False, modeling_utils.py:7) for
    FooForSequenceClassification(GenericHead, FooPreTrainedModel), where a depth-first walk would find the default
    through GenericHead first; FooFromBar takes BarPreTrainedModel's False (modeling_bar.py:10) but the heuristic reads
    its own module (modeling_foo.py: get_interface( at :9); BarForCausalLM's module has an attention class (:5) without
    the interface; FooMtp's override (its def at :38) returns the constant False; an unknown base or no
    PreTrainedModel: no answer."""
    import zipfile

    whl = tmp_path / "transformers-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("transformers/__init__.py", "")
        z.writestr("transformers/models/auto/configuration_auto.py",
                   'from collections import OrderedDict\nCONFIG_MAPPING_NAMES = OrderedDict([("foo", "FooConfig")])\n')
        z.writestr("transformers/modeling_utils.py", _MU_SRC)
        z.writestr("transformers/modeling_layers.py", _LAYERS_SRC)
        z.writestr("transformers/models/bar/modeling_bar.py", _BAR_SRC)
        z.writestr("transformers/models/foo/modeling_foo.py", _FOO_SRC)
    d = extract.extract_transformers(whl)
    foo, bar = "transformers/models/foo/modeling_foo.py", "transformers/models/bar/modeling_bar.py"
    assert d["attention_interface"]["is_backend_compatible"] == {
        "source": f"{MU}:19", "returns": "cls._supports_attention_backend",
        "default": {"value": False, "source": f"{MU}:7"}}
    assert d["attention_interface"]["can_set_attn_implementation"] == {
        "source": f"{MU}:10", "attention_class": r"^class \w*Attention\w*\(nn\.Module\):", "multiline": True,
        "requires": ["ALL_ATTENTION_FUNCTIONS.get_interface("], "without_attention_class": True}
    assert d["supports_attention_backend"] == {
        "true": {f"{foo}:13": ["FooForCausalLM", "FooForSequenceClassification", "FooMtp"]},
        "false": {f"{bar}:10": ["BarForCausalLM", "BarPreTrainedModel", "FooFromBar"]}}
    assert d["can_set_attn_implementation"] == {"files": {bar: [False, f"{bar}:5"], foo: [True, f"{foo}:9"]},
                                                "overrides": {"FooMtp": [False, f"{foo}:38"]}}
    assert attention_support(d, "FooFromBar") == {"backend": [False, f"{bar}:10"], "can_set": [True, f"{foo}:9"]}
    assert attention_support(d, "FooMtp")["can_set"] == [False, f"{foo}:38"]
    assert attention_support(d, "FooFromNowhere") == {"backend": [None, None], "can_set": [None, None]}
