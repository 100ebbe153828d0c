"""SGLang's config loading by release: the transformers each wheel pins, the config classes SGLang registers, and the
verdict when a checkpoint's model_type is known to neither (calculator/runtimes/sglang/config_types.py,
data/config_types.json)."""
from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from calculator.runtimes.sglang.config_types import _data, check_config, loaded_by, transformers_pin
from calculator.runtimes.sglang.releases import COVERED
from compat.fetch import default_wheel_dir
from tests.conftest import load_config

WHEELS = default_wheel_dir()  # $LLMCALC_WHEEL_DIR or ~/.cache/llmcalc/wheels (.ci/run downloads the SGLang wheels)
CATALOG = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"  # the offline catalog
# GLM-4.7-Flash (model_type glm4_moe_lite). Checked by hand in the wheels (unzip -p transformers-V-py3-none-any.whl
# transformers/models/auto/configuration_auto.py | grep '"glm4_moe_lite"'): absent from 4.57.1 (SGLang 0.5.7-0.5.9's
# pin) and 4.57.6, present in 5.0.0 (line 176) and 5.3.0 (SGLang 0.5.10.post1's pin).
GLM_FLASH = {"model": "zai-org/GLM-4.7-Flash", "gpu": "H200", "runtime": "sglang"}
UNKNOWN = "but Transformers does not recognize this architecture"


pytestmark = pytest.mark.usefixtures("offline_hub")


def test_glm_4_7_flash_on_0_5_9_depends_on_a_newer_transformers_and_offers_0_5_10(client):
    body = client.get("/api/estimate", {**GLM_FLASH, "sglang_version": "0.5.9"}).json()
    assert body["verdict"] == "depends", body
    cond = body["verdict_condition"]
    assert cond.startswith("transformers >= 5.0.0 is installed over SGLang 0.5.9's pin transformers==4.57.1")
    assert f"model type `glm4_moe_lite` {UNKNOWN}" in cond
    assert "sglang-0.5.9.dist-info/METADATA:270" in cond  # Requires-Dist: transformers==4.57.1
    assert "4.57.6 does not" in cond and "--sglang-version 0.5.10.post1" in cond
    assert body["compat"]["ok"] is None and body["compat"]["conditions"] == [cond]
    # the suggestion is the release whose pin knows the type, checked through the pipeline (it works there)
    assert [s["params"] for s in body["suggestions"]] == [{"sglang_version": "0.5.10.post1"}]
    assert "transformers==5.3.0" in body["suggestions"][0]["label"]
    for release in ("0.5.10.post1", "0.5.23"):
        after = client.get("/api/estimate", {**GLM_FLASH, "sglang_version": release}).json()
        assert after["verdict"] == "works", (release, after["verdict_condition"])


def test_the_types_sglang_loads_itself_are_not_flagged():
    """DeepSeek-V3.2 (deepseek_v32): no transformers up to 5.3.0 knows it; SGLang 0.5.3-0.5.10.post1 catch the error and
    read it as deepseek_v3 (_load_deepseek_v32_model), 0.5.23 registers an alias class. Kimi-K2.5 (kimi_k25) and Qwen3.5
    (qwen3_5): SGLang 0.5.9 registers KimiK25Config and Qwen3_5Config over transformers 4.57.1, which has neither."""
    v32 = json.loads((CATALOG / "deepseek-ai__DeepSeek-V3.2.json").read_text())
    assert v32["model_type"] == "deepseek_v32"
    for release in ("0.5.3", "0.5.9", "0.5.10.post1", "0.5.23"):
        got = check_config(release, v32)
        assert got.loads and got.condition is None and got.error is None, release
    assert "hf_transformers_utils.py:319" in check_config("0.5.9", v32).source
    assert "catches transformers' error" in check_config("0.5.9", v32).source
    assert "registers its own config class" in check_config("0.5.23", v32).source
    for name in ("moonshotai__Kimi-K2.5.json", "Qwen__Qwen3.5-9B.json"):
        cfg = load_config(name)
        got = check_config("0.5.9", cfg)
        assert got.loads and "registers its own config class" in got.source, name
        assert cfg["model_type"] not in _data()["transformers"]["4.57.1"]["model_types"]


def test_a_config_with_its_own_class_depends_on_trust_remote_code():
    """DeepSeek-V3 (deepseek_v3, auto_map AutoConfig configuration_deepseek.DeepseekV3Config) on SGLang 0.4.3.post4:
    its pin transformers 4.48.3 does not know deepseek_v3 (4.50.3 neither; 4.51.0 does, configuration_auto.py, checked
    by hand as above), so AutoConfig needs --trust-remote-code (SGLang's default is False) or a newer transformers."""
    got = check_config("0.4.3.post4", load_config("deepseek-ai__DeepSeek-V3.json"))
    assert not got.loads and got.error is None
    assert got.condition.startswith("SGLang is started with --trust-remote-code (sglang==0.4.3.post4 "
                                    "sglang/srt/server_args.py:49, default False)")
    assert "or transformers >= 4.51.0 is installed over SGLang 0.4.3.post4's pin transformers==4.48.3" in got.condition
    assert "contains custom code which must be executed to correctly load the model" in got.condition
    assert got.releases[0] == "0.4.10.post2"  # pins transformers 4.54.1
    assert check_config("0.4.10.post2", load_config("deepseek-ai__DeepSeek-V3.json")).loads


def test_the_command_carries_trust_remote_code_where_the_condition_asks_for_it(client):
    """The launch command is the one the verdict describes: DeepSeek-R1 (deepseek_v3, auto_map AutoConfig) on SGLang
    0.4.3.post4 loads only through the repository's config class (test above), so the command starts SGLang with
    --trust-remote-code; on 0.4.10.post2, whose pin knows deepseek_v3, the flag is not there."""
    params = {"model": "deepseek-ai/DeepSeek-R1", "gpu": "H200", "runtime": "sglang", "tensor_parallel_size": "8"}
    old = client.get("/api/estimate", {**params, "sglang_version": "0.4.3.post4"}).json()
    assert old["verdict"] == "depends" and "--trust-remote-code" in old["verdict_condition"]
    assert old["serve_argv"].count("--trust-remote-code") == 1
    new = client.get("/api/estimate", {**params, "sglang_version": "0.4.10.post2"}).json()
    assert "--trust-remote-code" not in new["serve_argv"]


def test_a_type_nothing_loads_does_not_start_and_says_why():
    cfg = {**load_config("Qwen__Qwen3-8B.json"), "model_type": "qwen3_not_a_type"}
    got = check_config("0.5.9", cfg)
    assert not got.loads and got.condition is None
    assert got.error.startswith("SGLang 0.5.9 cannot load this config")
    assert "model type `qwen3_not_a_type` " + UNKNOWN in got.error
    assert f"no transformers release from 4.48.3 to {_data()['transformers_read']['to']} knows it" in got.error
    assert got.releases == []
    assert check_config("0.5.9", {"architectures": ["Qwen3ForCausalLM"]}) is None  # no model_type: not checked


def test_the_quoted_errors_are_the_ones_transformers_raises(tmp_path):
    """The installed transformers (the venv's) raises the two errors the conditions quote, and, when it is 5.19.0
    (SGLang 0.5.23's pin), knows exactly the types extracted for that pin."""
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if transformers.__version__ in _data()["transformers"]:
        assert set(CONFIG_MAPPING_NAMES) == set(_data()["transformers"][transformers.__version__]["model_types"])
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_not_a_type"}))
    with pytest.raises(ValueError) as err:
        AutoConfig.from_pretrained(str(tmp_path), trust_remote_code=False)
    quoted = re.search(r'ValueError "([^"]+)"', check_config("0.5.9", {"model_type": "qwen3_not_a_type"}).error)
    assert quoted.group(1) in str(err.value)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_not_a_type",
                                                      "auto_map": {"AutoConfig": "configuration_x.XConfig"}}))
    with pytest.raises(ValueError) as err:
        AutoConfig.from_pretrained(str(tmp_path), trust_remote_code=False)
    cond = check_config("0.5.9", {"model_type": "qwen3_not_a_type", "auto_map": {"AutoConfig": "configuration_x.X"}})
    assert re.search(r'ValueError "The repository \.\.\. ([^"]+)"', cond.condition).group(1) in str(err.value)


def test_the_extracted_pins_and_registries_are_the_wheels():
    """Each release's pin is its wheel's METADATA line; a registry entry's line names the class; deepseek_v32's catch
    is the line that tests the error text."""
    for release in COVERED:
        version, source = transformers_pin(release)
        wheel = sorted(WHEELS.glob(f"sglang-{release}-*.whl"))
        if not wheel:
            continue
        with zipfile.ZipFile(wheel[0]) as z:
            path, line = source.split(" ", 1)[1].rsplit(":", 1)
            assert z.read(path).decode().splitlines()[int(line) - 1].startswith(f"Requires-Dist: transformers=={version}")
            rel = _data()["sglang"][release]
            for model_type, where in rel["registry"].items():
                p, n = where.rsplit(":", 1)
                text = z.read(p).decode().splitlines()[int(n) - 1]
                assert re.search(r"Config|register|_CONFIG_REGISTRY", text) or model_type in text, (release, model_type, text)
            for model_type, where in rel["caught"].items():
                p, n = where.rsplit(":", 1)
                assert f'"{model_type}" in str(e)' in z.read(p).decode().splitlines()[int(n) - 1]
    assert transformers_pin("0.5.9")[0] == "4.57.1" and transformers_pin("0.5.10.post1")[0] == "5.3.0"
    assert transformers_pin("0.5.23")[0] == "5.19.0"
    assert loaded_by("0.5.9", "glm4_moe_lite") is None
    assert loaded_by("0.5.10.post1", "glm4_moe_lite")[0] == "its pin transformers==5.3.0 knows it"
