"""A RoPE-scaled context (``--hf-overrides`` / SGLang's ``--json-model-override-args``) and a context above the model's
maximum (``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` / ``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1``).

The hand values come from Qwen3-8B's config.json (max_position_embeddings 40,960, no rope_scaling) and Qwen's own
YaRN setting (factor 4.0 over original_max_position_embeddings 32,768 = 131,072 tokens), with the rules read in each
release's source:

- vLLM up to 0.29: a yarn scaling derives original_max_position_embeddings x factor (vllm/config/model.py:2452-2458
  in 0.29.0); from 0.30 yarn keeps max_position_embeddings (model.py:2471-2478 in 0.30.0, :2595-2602 in 0.32.0), so
  the extension needs max_position_embeddings overridden as well. Other factors (linear) multiply max_position_embeddings
  in every release.
- SGLang: ``get_context_length`` multiplies by the factor unless the scaling has original_max_position_embeddings
  (sglang==0.5.23 sglang/srt/utils/hf_transformers/common.py:677-690).
"""
from __future__ import annotations

import json

import pytest

from calculator.engine import EngineInput, estimate
from calculator.engine.arch import parse_config
from calculator.request import InputError, parse_request
from validator.runner import server_argv

from .conftest import load_config

QWEN = "Qwen/Qwen3-8B"
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
EXTENDED = {"rope_scaling": YARN, "max_position_embeddings": 131072}

pytestmark = pytest.mark.usefixtures("offline_hub")


def _api(client, **q):
    q = {"model": QWEN, "gpu": "H100"} | {k: json.dumps(v) if isinstance(v, dict) else str(v) for k, v in q.items()}
    return client.get("/api/estimate", q)


def test_yarn_alone_keeps_40960_from_vllm_0_30_and_derives_131072_before(client):
    assert load_config("Qwen__Qwen3-8B.json")["max_position_embeddings"] == 40960
    new = _api(client, hf_overrides={"rope_scaling": YARN}, max_model_len=131072)
    assert new.status_code == 400
    assert "derived maximum length 40,960" in new.json()["error"] and "from vLLM 0.30" in new.json()["error"]
    old = _api(client, hf_overrides={"rope_scaling": YARN}, vllm_version="0.29.0")
    assert old.status_code == 200
    assert old.json()["max_model_len"] == 32768 * 4
    assert "original_max_position_embeddings 32768 x factor 4" in old.json()["sources"]["max_model_len"]


def test_yarn_with_max_position_embeddings_plans_131072_and_the_command_carries_the_overrides(client):
    got = _api(client, hf_overrides=EXTENDED)
    assert got.status_code == 200, got.content
    body = got.json()
    assert body["max_model_len"] == 131072  # the default: the derived maximum
    argv = body["serve_argv"]
    assert argv[argv.index("--hf-overrides") + 1] == json.dumps(EXTENDED, separators=(",", ":"))
    assert any("--hf-overrides" in n and "config.update" in n for n in body["model_notes"])


def test_a_linear_factor_multiplies_max_position_embeddings_in_every_release():
    cfg = {**load_config("Qwen__Qwen3-8B.json"), "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    for release in ("0.29.0", "0.32.0"):
        got = estimate(EngineInput(hf_config=cfg, gpu="H100", vllm_version=release))
        assert got.max_model_len == 40960 * 2, release


def test_the_yarn_rotary_cache_holds_original_times_factor_positions():
    # vLLM's YaRN embedding caches original_max_position_embeddings x factor positions (yarn_scaling_rope.py)
    plain = parse_config(load_config("Qwen__Qwen3-8B.json"))
    yarn = parse_config({**load_config("Qwen__Qwen3-8B.json"), **EXTENDED})
    assert plain.rope_cache_len == 40960 and yarn.rope_cache_len == 131072


def test_allow_long_max_model_len_starts_with_vllms_warning_and_the_env_in_the_command(client):
    got = _api(client, max_model_len=65536, allow_long_max_model_len="true")
    assert got.status_code == 200, got.content
    body = got.json()
    assert body["max_model_len"] == 65536
    assert any("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in w and "lead to nan" in w for w in body["warnings"])
    argv = body["serve_argv"]
    assert argv[:2] == ["env", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"] and argv[2:4] == ["vllm", "serve"]
    # the validator's worker runs the same command: the variable stays in front of its server command
    run = server_argv(argv, "/models/qwen", QWEN, "127.0.0.1", 8000, command=["python", "-m", "api"])
    assert run[:5] == ["env", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "python", "-m", "api"]
    assert "--max-model-len" in run and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" not in run[2:]


def test_sglang_reads_the_same_override_and_its_own_environment_variable(client):
    # yarn with original_max_position_embeddings: SGLang's factor is 1, so the context stays 40,960
    refused = _api(client, runtime="sglang", json_model_override_args={"rope_scaling": YARN}, max_model_len=131072)
    assert refused.status_code == 400 and "derived context length 40,960" in refused.json()["error"]
    got = _api(client, runtime="sglang", json_model_override_args=EXTENDED)
    assert got.status_code == 200, got.content
    argv = got.json()["serve_argv"]
    assert argv[argv.index("--context-length") + 1] == "131072"
    assert json.loads(argv[argv.index("--json-model-override-args") + 1]) == EXTENDED
    longer = _api(client, runtime="sglang", max_model_len=65536, allow_long_max_model_len="true")
    assert longer.status_code == 200, longer.content
    assert longer.json()["serve_argv"][:2] == ["env", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"]


@pytest.mark.parametrize("overrides, said", [
    ({"num_hidden_layers": 2}, "'num_hidden_layers' is not modelled here"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "needs \"original_max_position_embeddings\""),
    ({"rope_scaling": {"rope_type": "yarn", "facter": 4.0, "original_max_position_embeddings": 1}},
     "rope_scaling.facter"),
    ({"rope_scaling": YARN, "rope_parameters": YARN}, "give one"),
    ({}, "no key to apply"),
])
def test_overrides_not_modelled_are_refused_by_name(overrides, said):
    with pytest.raises(InputError) as err:
        parse_request({"model": QWEN, "hf_overrides": json.dumps(overrides)})
    assert err.value.field == "hf_overrides" and said in err.value.message


def test_llamacpp_refuses_the_overrides_and_a_shared_link_keeps_them():
    with pytest.raises(InputError) as err:
        parse_request({"model": QWEN, "runtime": "llama.cpp", "hf_overrides": json.dumps(EXTENDED)})
    assert "--rope-scaling" in err.value.message
    req = parse_request({"model": QWEN, "hf_overrides": json.dumps(EXTENDED), "allow_long_max_model_len": "true"})
    again = parse_request(req.to_params())
    assert again == req and again.hf_overrides.as_config() == EXTENDED



@pytest.mark.parametrize("extra", [{"hf_overrides": json.dumps(EXTENDED)}, {"allow_long_max_model_len": "true"}])
def test_a_validation_run_refuses_what_its_worker_would_not_apply(extra):
    from validator.config import ConfigurationError, build_configuration

    with pytest.raises(ConfigurationError) as err:
        build_configuration({"model": "tiny-random/llama", "gpu": "CPU", **extra})
    assert err.value.field == next(iter(extra)) and "does not apply" in err.value.message


def test_the_other_runtimes_answer_beside_it_keeps_the_context_overrides(client):
    # the side-by-side is the same request on the other runtime: the override is SGLang's --json-model-override-args,
    # and the longer-context switch each runtime's environment variable
    body = _api(client, hf_overrides=EXTENDED, max_model_len=131072).json()
    side = body["side_by_side"]
    assert side["verdict"] == "works" and json.loads(
        side["serve_argv"][side["serve_argv"].index("--json-model-override-args") + 1]) == EXTENDED
    back = _api(client, runtime="sglang", max_model_len=65536, allow_long_max_model_len="true").json()["side_by_side"]
    assert back["verdict"] == "works" and back["serve_argv"][:2] == ["env", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"]


def test_a_raised_max_position_embeddings_without_rope_scaling_is_said(client):
    body = _api(client, hf_overrides={"max_position_embeddings": 131072}, max_model_len=131072).json()
    assert body["max_model_len"] == 131072
    assert any("raised from 40,960 to 131,072 without a RoPE scaling that covers it" in n for n in body["model_notes"])
    # with YaRN factor 4 over 32,768 the scaling covers 131,072: no such note
    covered = _api(client, hf_overrides=EXTENDED).json()
    assert not any("without a RoPE scaling" in n for n in covered["model_notes"])


@pytest.mark.parametrize("overrides, near", [
    ({"rope_scalling": YARN}, "did you mean 'rope_scaling'?"),
    ({"rope_scaling": {**YARN, "factr": 4.0}}, "rope_scaling.factr: is not a RoPE key the calculator reads or carries; "
                                               "did you mean 'factor'?"),
])
def test_a_misspelt_override_key_gets_the_nearest_one(overrides, near):
    with pytest.raises(InputError) as err:
        parse_request({"model": QWEN, "hf_overrides": json.dumps(overrides)})
    assert near in err.value.message


def test_sglang_says_what_to_add_when_yarn_keeps_the_length(client):
    # SGLang's get_context_length takes factor 1 when rope_scaling has original_max_position_embeddings
    # (sglang==0.5.23 sglang/srt/utils/hf_transformers/common.py:677-690): the length needs max_position_embeddings
    refused = _api(client, runtime="sglang", hf_overrides={"rope_scaling": YARN}, max_model_len=131072)
    assert refused.status_code == 400 and '"max_position_embeddings": 131072' in refused.json()["error"]
