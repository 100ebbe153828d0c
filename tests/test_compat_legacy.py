"""vLLM 0.9 and 0.10 (compat data layout ``legacy``): the facts extracted from the wheels, and the verdicts they give.

Every expected value below was read by hand from the release's CUDA wheel (``pip download vllm==X --no-deps``; the
file:line is in each comment), not from our own output. The wheel itself is only needed by the last test, which
checks those lines in the wheel and skips when it is not in ``$LLMCALC_WHEEL_DIR``.
"""
from __future__ import annotations

import zipfile
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from calculator.plan import make_plan
from calculator.request import InputError, parse_request
from compat import extract, fetch, releases
from compat.checks import CompatInputError, verdict_for
from tests.conftest import load_config

LLAMA = "meta-llama__Llama-3.1-8B-Instruct.json"
GPT_OSS = "openai__gpt-oss-20b.json"
GEMMA2 = "google__gemma-2-9b-it.json"
MLLAMA = "meta-llama__Llama-3.2-11B-Vision.json"
REG = "vllm/model_executor/models/registry.py"


def verdict(model: str, gpu: str, release: str, **kw):
    return verdict_for(load_config(model), gpu, vllm_version=release, **kw)


def plan(model: str, release: str, gpu: str = "H100", **params):
    return make_plan(parse_request({"model": model, "gpu": gpu, "vllm_version": release, **params}), with_speed=False)


# ---------------------------------------------------------------- what the extractor read from 0.10.0
def test_the_0_10_0_data_holds_what_its_wheel_says():
    d = extract.load("0.10.0")
    assert d["provenance"]["layout"] == "legacy" and d["validate_configuration"] is None
    # vllm/platforms/interface.py:41 `class _Backend(enum.Enum):`, first member FLASH_ATTN (:42); no
    # --attention-backend: VLLM_ATTENTION_BACKEND (vllm/envs.py:417), VLLM_USE_V1 defaults to 1 (:650)
    assert d["selection"]["enum"] == "vllm/platforms/interface.py:41" and d["selection"]["enum_members"][0] == "FLASH_ATTN"
    assert d["selection"]["flag"] is None and d["selection"]["env_source"] == "vllm/envs.py:417"
    assert d["selection"]["use_v1_source"] == "vllm/envs.py:650"
    assert d["env_defaults"]["VLLM_USE_V1"] == {"value": True, "source": "vllm/envs.py:650"}
    # vllm/config.py:1609 CacheDType = Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]; :2594-2595
    # SpeculativeMethod = Literal["ngram", "eagle", "eagle3", "medusa", "mlp_speculator", "draft_model", "deepseek_mtp"]
    assert d["cache_dtypes"] == {"values": ["auto", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"],
                                 "source": "vllm/config.py:1609"}
    assert d["speculative"]["methods"] == sorted(["ngram", "eagle", "eagle3", "medusa", "mlp_speculator",
                                                  "draft_model", "deepseek_mtp"])
    assert d["speculative"]["source"] == "vllm/config.py:2594"
    # vllm/platforms/cuda.py:195 `def get_attn_backend_cls(cls, selected_backend, head_size, dtype, kv_cache_dtype,
    # block_size, use_v1, use_mla)`: the V1 paths return FlashInferBackend, FlexAttentionBackend, TritonAttentionBackend,
    # FlashAttentionBackend (:237-240) and the MLA ones (CutlassMLA, TritonMLA, FlashMLA)
    cuda = d["platforms"]["cuda"]
    assert (cuda["kind"], cuda["source"]) == ("direct", "vllm/platforms/cuda.py:195")
    assert {"FlashAttentionBackend", "FlashInferBackend", "FlexAttentionBackend", "TritonAttentionBackend",
            "FlashMLABackend", "TritonMLABackend", "CutlassMLABackend"} <= set(cuda["backends"])
    # vllm/v1/attention/backends/flash_attn.py:48-49 get_supported_head_sizes -> [32, 64, 96, 128, 160, 192, 224, 256]
    fa = next(b for b in d["backends"] if b["name"] == "FlashAttentionBackend")
    assert fa["declared"]["head_sizes"] == {"value": [32, 64, 96, 128, 160, 192, 224, 256],
                                            "source": "vllm/v1/attention/backends/flash_attn.py:48"}
    assert fa["enum_name"] == "FLASH_ATTN_VLLM_V1" and fa["optional_imports"] == []
    # vllm/v1/attention/backends/flashinfer.py imports flashinfer at the top, which only the optional extra installs
    fi = next(b for b in d["backends"] if b["name"] == "FlashInferBackend")
    assert [o["package"] for o in fi["optional_imports"]] == ["flashinfer"]
    # vllm/model_executor/layers/quantization/__init__.py:9-40: 30 methods, no mxfp4; vllm/config.py:1078 raises
    # "Unknown quantization method: ..."
    q = d["quantization"]
    assert len(q["methods"]) == 30 and "mxfp4" not in q["methods"] and q["methods"][:2] == ["aqlm", "awq"]
    assert q["source"] == "vllm/model_executor/layers/quantization/__init__.py:9"
    assert q["unknown"]["source"] == "vllm/config.py:1078"
    # registry.py: no GptOssForCausalLM; :280 _PREVIOUSLY_SUPPORTED_MODELS = {"Phi3SmallForCausalLM": "0.9.2"}, its
    # message raised by get_model_architecture (vllm/model_executor/model_loader/utils.py:267)
    assert "GptOssForCausalLM" not in d["model_architectures"]
    reg = d["model_registry"]
    assert reg["previously_supported"] == {"Phi3SmallForCausalLM": {"until": "0.9.2", "source": f"{REG}:280"}}
    assert reg["messages"]["previously_supported"]["source"] == "vllm/model_executor/model_loader/utils.py:267"
    # the Transformers fallback lives in the loader: get_model_architecture :273 (model_impl TRANSFORMERS, or AUTO
    # and vllm_not_supported), resolve_transformers_arch :172, is_backend_compatible() :218; model_impl defaults to
    # ModelImpl.AUTO.value (vllm/config.py:418); no _normalize_arch suffixes before 0.10.1
    tf = reg["transformers_fallback"]
    assert tf["fallback"] == ["vllm/model_executor/model_loader/utils.py:273"]
    assert tf["resolve"] == "vllm/model_executor/model_loader/utils.py:172"
    assert tf["compatible"]["source"] == "vllm/model_executor/model_loader/utils.py:218"
    assert tf["model_impl_default"] == {"value": "auto", "source": "vllm/config.py:418"}
    assert tf["stops_with_own_errors"] is True and reg["normalize"] is None
    # vllm-0.10.0.dist-info/METADATA:31 Requires-Dist: transformers>=4.53.2 (no cap)
    assert d["requirements"]["transformers"] == {"value": "transformers>=4.53.2",
                                                 "source": "vllm-0.10.0.dist-info/METADATA:31"}
    # vllm/engine/arg_utils.py:1296 _is_v1_supported_oracle; :1347-1351 "Compute Capability < 8.0" and :1355-1361
    # "--kv-cache-dtype" fall back to V0; mllama.py:1259 MllamaForConditionalGeneration(..., SupportsV0Only)
    oracle = d["v1_oracle"]
    assert oracle["source"] == "vllm/engine/arg_utils.py:1296"
    by_feature = {b["feature"]: b["source"] for b in oracle["branches"]}
    assert by_feature["'Compute Capability < 8.0'"] == "vllm/engine/arg_utils.py:1347"
    assert by_feature["'--kv-cache-dtype'"] == "vllm/engine/arg_utils.py:1355"
    assert oracle["v0_only"]["MllamaForConditionalGeneration"] == "vllm/model_executor/models/mllama.py:1259"


def test_gpt_oss_is_registered_from_0_10_1():
    # 0.10.1 registry.py:76 "GptOssForCausalLM": ("gpt_oss", ...); quantization/__init__.py:39 "mxfp4";
    # 0.10.0 has neither (registry.py, quantization/__init__.py:9-40)
    assert extract.load("0.10.1")["model_architectures"]["GptOssForCausalLM"]["source"] == f"{REG}:76"
    assert "mxfp4" in extract.load("0.10.1")["quantization"]["methods"]
    assert releases.covered_releases()[:5] == ("0.9.2", "0.10.0", "0.10.1", "0.10.1.1", "0.10.2")


# ---------------------------------------------------------------- verdicts
@pytest.mark.django_db  # the catalog model is looked up through the metadata cache
def test_gpt_oss_on_0_10_0_does_not_start_and_names_0_10_1():
    """openai/gpt-oss-20b (quantization_config.quant_method "mxfp4") on 0.10.0: ModelConfig refuses the method
    (vllm/config.py:1078) before the model class is resolved, since no override_quantization_method of 0.10.0 claims
    it (they key on quant_method awq / gptq / modelopt or on checkpoint_format marlin / bitblas:
    layers/quantization/marlin.py:94-110, awq_marlin.py:107, bitblas.py:145, ipex_quant.py:102-112, modelopt.py:79-92,
    moe_wna16.py:105); the registry has no GptOssForCausalLM either (and vLLM would try the Transformers backend,
    model_loader/utils.py:273). The first release with both, 0.10.1, is offered, and it works there."""
    p = plan("openai/gpt-oss-20b", "0.10.0")
    assert p.verdict.status == "does_not_start"
    assert p.verdict.headline.startswith("ValueError: Unknown quantization method: mxfp4. Must be one of <the 30 "
                                         "methods of vLLM 0.10.0")
    assert "vLLM lists mxfp4 from 0.10.1" in p.verdict.headline
    assert p.verdict.headline.endswith("and vLLM 0.10.0's model registry has no GptOssForCausalLM (vLLM registers it "
                                       "from 0.10.1)")
    assert {"vllm_version": "0.10.1"} in [s.params for s in p.verdict.suggestions]
    # 0.9.1 and 0.9.2 (answered by 0.9.2's data) the same; 0.10.1 starts it with FlashAttention 3 (sinks need FA3,
    # vllm/v1/attention/backends/flash_attn.py: assert self.vllm_flash_attn_version == 3; Hopper has it)
    for rel in ("0.9.1", "0.9.2"):
        assert plan("openai/gpt-oss-20b", rel).verdict.status == "does_not_start"
    ok = plan("openai/gpt-oss-20b", "0.10.1")
    assert ok.verdict.status == "works" and ok.compat.auto_selected == "FlashAttentionBackend"


@pytest.mark.django_db
def test_a_model_0_10_registers_gets_the_same_kind_of_answer_as_on_0_11_2():
    for rel in ("0.9.2", "0.10.0", "0.10.1.1", "0.10.2", "0.11.2"):
        p = plan("meta-llama/Llama-3.1-8B-Instruct", rel)
        assert p.verdict.status == "works", rel
    # 0.10.2 vllm/platforms/cuda.py:354-364: FlashAttention is the default on SM 8.0+ when it takes the head size
    assert verdict(LLAMA, "H100", "0.10.2").auto_selected == "FlashAttentionBackend"


@pytest.mark.django_db
def test_pre_ampere_gpus_leave_the_v1_engine_until_0_10_2():
    # 0.10.0 vllm/engine/arg_utils.py:1347-1351: CUDA compute capability < 8.0 falls back to V0 -> not modelled
    r = verdict(LLAMA, "T4", "0.10.0")
    assert r.ok is None and r.auto_selected is None
    assert r.auto_conditions == [
        "vLLM 0.10.0 runs the V0 engine here (Compute Capability < 8.0 is not supported by its V1 engine: "
        "EngineArgs._is_v1_supported_oracle, vllm/engine/arg_utils.py:1347); the calculator models the V1 engine "
        "only, so it does not model this configuration"]
    # no figures either: the memory engine models the V1 engine, so the estimate refuses the GPU (exit 2)
    with pytest.raises(CommandError) as e:
        call_command("estimate", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "T4", "--vllm-version",
                     "0.10.0", stdout=StringIO(), stderr=StringIO())
    assert e.value.returncode == 2 and str(e.value).startswith("--gpu: vLLM 0.10.0 runs the V0 engine here")
    # 0.10.2 has no such branch; vllm/platforms/cuda.py:366-369: FlexAttention is the default for older GPUs
    r = verdict(LLAMA, "T4", "0.10.2")
    assert r.ok is True and r.auto_selected == "FlexAttentionBackend"
    # ... whose implementation refuses sliding windows (flex_attention.py:643-645 in 0.10.2): Gemma 2 does not start
    g = verdict(GEMMA2, "T4", "0.10.2")
    assert g.ok is False
    assert g.error == ("NotImplementedError: FlexAttention does not support sliding window yet. (FlexAttentionBackend "
                       "for head size 256, sliding window 4096: vllm/v1/attention/backends/flex_attention.py:645)")


def test_attention_sinks_pick_triton_off_hopper():
    # 0.10.1 vllm/platforms/cuda.py: `if has_sink and not cls.is_device_capability(90)`: TRITON_ATTN_VLLM_V1
    assert verdict(GPT_OSS, "A100", "0.10.1").auto_selected == "TritonAttentionBackend"
    assert verdict(GPT_OSS, "H100", "0.10.1").auto_selected == "FlashAttentionBackend"


def test_fp8_kv_cache_off_hopper_falls_back_to_v0():
    # 0.10.2 vllm/engine/arg_utils.py:1465-1471 asks CudaPlatformBase.is_kv_cache_dtype_supported (cuda.py:522):
    # FLASH_ATTN_VLLM_V1 with fp8 needs flash_attn_supports_fp8() (attention/utils/fa_utils.py:66: FA3 on SM90)
    a100 = verdict(LLAMA, "A100", "0.10.2", kv_cache_dtype="fp8")
    assert a100.ok is None and "vllm/engine/arg_utils.py:1465" in a100.auto_conditions[0]
    assert "V0 engine" in a100.auto_conditions[0]
    assert verdict(LLAMA, "H100", "0.10.2", kv_cache_dtype="fp8").ok is True


def test_a_v0_only_model_is_not_modelled():
    # 0.10.2 vllm/model_executor/models/mllama.py: MllamaForConditionalGeneration implements SupportsV0Only, so
    # arg_utils.py:1480-1483 falls back to V0
    r = verdict(MLLAMA, "H100", "0.10.2")
    assert r.ok is None and "vllm/engine/arg_utils.py:1480" in r.auto_conditions[0]


def test_flashinfer_is_optional_so_blackwell_names_both_backends():
    # 0.10.2 vllm/platforms/cuda.py:335-346: FlashInfer first on SM 10.0 if it imports; flashinfer-python is only the
    # "flashinfer" extra (vllm-0.10.2.dist-info/METADATA:98-99), else FlashAttention (:355-364)
    r = verdict(LLAMA, "B200", "0.10.2")
    assert r.ok is True and r.auto_selected == "FlashInferBackend"
    assert "FlashAttentionBackend when import flashinfer=False" in r.notes[0]


def test_speculative_decoding_in_0_10():
    # 0.10.2 vllm/config/__init__.py:1882-1884: no generic "mtp" method yet; vllm/engine/arg_utils.py:1495-1500 raises
    # NotImplementedError for draft_model speculative decoding
    mtp = verdict(LLAMA, "H100", "0.10.2", speculative_config={"method": "mtp", "num_speculative_tokens": 1})
    assert mtp.ok is False and mtp.speculative[0].reason == "speculative method 'mtp' does not exist in vLLM 0.10.2"
    draft = verdict(LLAMA, "H100", "0.10.2", speculative_config={"method": "draft_model", "num_speculative_tokens": 3,
                                                                 "model": "meta-llama/Llama-3.2-1B-Instruct"})
    assert draft.ok is False and draft.error.startswith(
        "NotImplementedError: Speculative decoding with draft model is not supported yet.")
    assert draft.error.endswith("(vllm/engine/arg_utils.py:1495)")


def test_no_attention_backend_flag_before_0_11():
    with pytest.raises(CompatInputError) as e:
        verdict(LLAMA, "H100", "0.10.2", attention_backend="FLASH_ATTN")
    assert e.value.field == "attention_backend" and "VLLM_ATTENTION_BACKEND environment variable" in e.value.message
    with pytest.raises(InputError) as e:
        parse_request({"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "vllm_version": "0.10.1.1",
                       "attention_backend": "FLASH_ATTN"})
    assert e.value.field == "attention_backend"
    assert "vLLM 0.10.1.1 has no --attention-backend" in e.value.message and "vllm/envs.py:" in e.value.message


# ---------------------------------------------------------------- against the wheel itself
def test_the_cited_lines_are_in_the_0_10_0_wheel():
    whl = fetch.find_wheel(fetch.default_wheel_dir(), "0.10.0")
    if whl is None:
        pytest.skip(f"vllm 0.10.0 wheel not in {fetch.default_wheel_dir()}")
    d = extract.load("0.10.0")

    def line(loc: str) -> str:
        path, n = loc.rsplit(":", 1)
        return zipfile.ZipFile(whl).read(path).decode().splitlines()[int(n) - 1]

    assert line(d["selection"]["enum"]).startswith("class _Backend(")
    assert line(d["platforms"]["cuda"]["source"]).strip().startswith("def get_attn_backend_cls(")
    assert line(d["quantization"]["source"]).startswith("QuantizationMethods = Literal[")
    assert "raise ValueError(" in line(d["quantization"]["unknown"]["source"])
    assert line(d["model_registry"]["previously_supported"]["Phi3SmallForCausalLM"]["source"]).startswith(
        "_PREVIOUSLY_SUPPORTED_MODELS")
    for b in d["v1_oracle"]["branches"]:
        assert line(b["source"]).strip().startswith("if ")
    assert extract.data_path("0.10.0").read_text() == extract.dump(extract.extract(whl))


# ---------------------------------------------------------------- the surfaces
@pytest.mark.django_db
def test_the_api_and_pages_answer_0_10(client, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    body = client.get("/api/estimate", {"model": "openai/gpt-oss-20b", "gpu": "H100", "vllm_version": "0.10.0"}).json()
    assert body["verdict"] == "does_not_start" and body["compat"]["ok"] is False
    assert {"vllm_version": "0.10.1"} in [s["params"] for s in body["suggestions"]]
    # no --attention-backend in 0.10: a 400 naming the environment variable, not a 500 or a silent default
    r = client.get("/api/estimate", {"model": "openai/gpt-oss-20b", "gpu": "H100", "vllm_version": "0.10.1",
                                     "attention_backend": "FLASH_ATTN"})
    assert r.status_code == 400 and r.json()["field"] == "attention_backend"
    assert "VLLM_ATTENTION_BACKEND" in r.json()["error"]
    for q in ({"vllm_version": "0.10.2", "model": "openai/gpt-oss-20b"}, {"vllm_version": "0.9.2", "platform": "rocm"},
              {"vllm_version": "0.10.0", "platform": "cpu"}):
        assert client.get("/compat/", q).status_code == 200, q
    r = client.get("/compat/verdict/", {"model": "openai/gpt-oss-20b", "gpu": "H100", "vllm_version": "0.10.0"})
    assert r.status_code == 200 and "Unknown quantization method: mxfp4" in r.content.decode()
