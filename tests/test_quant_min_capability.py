"""vLLM refuses a quantization method on a GPU below the method's minimum compute capability.

``VllmConfig._get_quantization_config`` (``vllm/config/vllm.py:900-906`` in 0.32.0) raises ``ValueError: The
quantization method {name} is not supported for the current GPU. Minimum capability: {x}. Current capability: {y}.``
with ``x`` the method's ``get_min_capability()`` and ``y`` ``major * 10 + minor``. Every number below was read by hand
in the releases' wheels (``pip download vllm==X --no-deps``), not taken from the calculator:

* ``Fp8Config.get_min_capability`` returns 80 in 0.13.0 (``quantization/fp8.py:255-256``) and 75 in 0.14.1
  (``fp8.py:152-153``) and 0.32.0 (``fp8.py:146-147``: the FP8 Marlin weight-only kernel runs from 7.5,
  ``utils/marlin_utils_fp8.py:30-31``);
* ``Mxfp4Config``: 80 in 0.26.0 (``mxfp4.py:56-57``) and 0.32.0 (``mxfp4.py:71-72``), inherited by
  ``GptOssMxfp4Config``;
* ``ModelOptFp8Config``: 89 in 0.26.0 (``modelopt.py:412-413``), 80 from 0.27.1 (``modelopt.py:407-408``) and in
  0.32.0 (``modelopt.py:445-446``);
* the GPUs (``calculator/data/gpus.json``): T4 7.5 -> 75, V100 7.0 -> 70, A100 8.0 -> 80, L4 8.9 -> 89.
"""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from compat import extract

URL = "/api/estimate"


pytestmark = pytest.mark.usefixtures("offline_hub")


def _api(client, query: str) -> dict:
    r = client.get(f"{URL}?{query}")
    assert r.status_code == 200, r.content
    return r.json()


def _message(method: str, least: int, current: int) -> str:
    return (f"The quantization method {method} is not supported for the current GPU. Minimum capability: {least}. "
            f"Current capability: {current}.")


@pytest.mark.parametrize("release, method, value, source", [
    ("0.13.0", "fp8", 80, "vllm/model_executor/layers/quantization/fp8.py:255"),
    ("0.14.1", "fp8", 75, "vllm/model_executor/layers/quantization/fp8.py:152"),
    ("0.32.0", "fp8", 75, "vllm/model_executor/layers/quantization/fp8.py:146"),
    ("0.32.0", "mxfp4", 80, "vllm/model_executor/layers/quantization/mxfp4.py:71"),
    ("0.26.0", "modelopt", 89, "vllm/model_executor/layers/quantization/modelopt.py:412"),
    ("0.27.1", "modelopt", 80, "vllm/model_executor/layers/quantization/modelopt.py:407"),
    ("0.32.0", "modelopt", 80, "vllm/model_executor/layers/quantization/modelopt.py:445"),
])
def test_the_extracted_minimum_is_the_one_the_source_states(release, method, value, source):
    mc = extract.load(release)["quantization"]["min_capability"]
    assert mc["methods"][method]["value"] == value and mc["methods"][method]["source"] == source


def test_the_check_and_the_overrides_are_read_with_their_lines():
    mc = extract.load("0.32.0")["quantization"]["min_capability"]
    assert mc["check"]["source"] == "vllm/config/vllm.py:901"  # the raise; the if is at :900
    gpt_oss = mc["methods"]["gpt_oss_mxfp4"]
    assert gpt_oss["value"] == 80 and gpt_oss["inherited_from"] == "Mxfp4Config"  # class GptOssMxfp4Config(Mxfp4Config)
    assert "mxfp4" in gpt_oss["override"]["mentions"]  # mxfp4.py:129-146 claims gpt-oss's "mxfp4" checkpoints
    assert gpt_oss["override"]["model_types"] == ["gpt_oss"]  # if model_type != "gpt_oss": return None (:144-145)
    # HummingConfig claims a checkpoint only under --quantization humming (humming.py:179-191)
    assert mc["methods"]["humming"]["override"]["requires_flag"] == "humming"


def test_fp8_checkpoint_on_t4_does_not_start_before_0_14_and_starts_from_0_14_1(client):
    """Qwen3-8B-FP8 (quant_method fp8): 80 > 75 in 0.13.0; 75 <= 75 from 0.14.1 (FP8 Marlin)."""
    old = _api(client, "model=Qwen/Qwen3-8B-FP8&gpu=T4&max_model_len=8192&vllm_version=0.13.0")
    assert old["verdict"] == "does_not_start"
    assert old["verdict_headline"].startswith(_message("fp8", 80, 75))
    assert {"vllm_version": "0.14.1"} in [s["params"] for s in old["suggestions"]]
    assert old["ttft_ms"] is None and old["speed_error"]
    new = _api(client, "model=Qwen/Qwen3-8B-FP8&gpu=T4&max_model_len=8192&vllm_version=0.32.0")
    assert "is not supported for the current GPU" not in json.dumps(new)


def test_fp8_on_a100_passes_the_check_in_0_13_0():
    """80 <= 80: the check passes on A100 (the weights then run on FP8 Marlin, weight-only)."""
    out = StringIO()
    call_command("estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100", "--quantization", "fp8",
                 "--max-model-len", "8192", "--vllm-version", "0.13.0", "--format", "json", stdout=out)
    assert json.loads(out.getvalue())["verdict"] == "works"


def test_runtime_fp8_on_t4_exits_1_with_vllms_message_in_0_13_0():
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "T4", "--quantization", "fp8",
                     "--max-model-len", "8192", "--vllm-version", "0.13.0", stdout=StringIO(), stderr=StringIO())
    assert err.value.returncode == 1
    out = StringIO()
    call_command("estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "T4", "--quantization", "fp8",
                 "--max-model-len", "8192", "--vllm-version", "0.13.0", "--format", "json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["verdict"] == "does_not_start" and data["verdict_headline"].startswith(_message("fp8", 80, 75))


@pytest.mark.parametrize("release, name", [("0.19.1", "mxfp4"), ("0.26.0", "gpt_oss_mxfp4"),
                                           ("0.32.0", "gpt_oss_mxfp4")])
def test_gpt_oss_mxfp4_on_v100_does_not_start(client, release, name):
    """mxfp4 needs 80 (mxfp4.py:50-51 in 0.19.1, :71-72 in 0.32.0); V100 is 70; no covered release accepts it there.
    From 0.20.2 GptOssMxfp4Config (mxfp4.py:104, ``if model_type != "gpt_oss": return None`` at :132) claims gpt-oss's
    mxfp4 checkpoint, so vLLM names gpt_oss_mxfp4 (inheriting Mxfp4Config's 80); 0.19.1's map has no such name."""
    data = _api(client, f"model=openai/gpt-oss-20b&gpu=V100&max_model_len=8192&vllm_version={release}")
    assert data["verdict"] == "does_not_start"
    assert data["verdict_headline"].startswith(_message(name, 80, 70))
    gpus = [s["params"]["gpu"] for s in data["suggestions"] if "gpu" in s["params"]]
    assert gpus and all(g in ("L4", "A100", "L40S", "H100") for g in gpus)
    assert not any("vllm_version" in s["params"] for s in data["suggestions"])


def test_modelopt_fp8_on_v100_does_not_start_and_on_a100_from_0_27_1(client):
    """nvidia/Llama-3.1-70B-Instruct-FP8 (hf_quant_config.json, quant_algo FP8 -> modelopt)."""
    q = "model=nvidia/Llama-3.1-70B-Instruct-FP8&tensor_parallel_size=4&max_model_len=8192"
    v100 = _api(client, f"{q}&gpu=V100")
    assert v100["verdict"] == "does_not_start" and v100["verdict_headline"].startswith(_message("modelopt", 80, 70))
    a100_old = _api(client, f"{q}&gpu=A100&vllm_version=0.26.0")
    assert a100_old["verdict"] == "does_not_start"
    assert a100_old["verdict_headline"].startswith(_message("modelopt", 89, 80))
    assert {"vllm_version": "0.27.1"} in [s["params"] for s in a100_old["suggestions"]]
    a100 = _api(client, f"{q}&gpu=A100&vllm_version=0.32.0")
    assert "is not supported for the current GPU" not in json.dumps(a100)


def test_rocm_is_not_judged_by_the_cuda_minimum(client):
    """ROCm keeps its own quantization rules (not modelled): no CUDA minimum-capability refusal on MI300X."""
    data = _api(client, "model=openai/gpt-oss-20b&gpu=MI300X&max_model_len=8192")
    assert "is not supported for the current GPU" not in json.dumps(data)


def test_the_page_shows_vllms_refusal_and_a_gpu_that_starts(client):
    r = client.get("/", {"model": "openai/gpt-oss-20b", "gpu": "V100", "max_model_len": "8192"}, follow=True)
    assert r.status_code == 200
    html = " ".join(r.content.decode().split())
    assert _message("gpt_oss_mxfp4", 80, 70) in html
    assert "gpu=L4" in html or "gpu=A100" in html
