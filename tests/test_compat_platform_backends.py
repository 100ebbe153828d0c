"""An explicit ``--attention-backend`` that the GPU's platform does not offer, one the calculator does not model, and
one the release does not have: each is answered as vLLM 0.32.0 answers it, or said to be not modelled, never a
start-up failure vLLM would not raise and never another platform's run-time conditions.

What vLLM 0.32.0 does (its source, as installed in ``.venv`` and extracted into ``compat/data/vllm-0.32.0.json``):

* CUDA and ROCm validate a selected backend by its class's ``validate_configuration`` alone, whether their priority
  lists name it or not (``vllm/platforms/cuda.py:428-446``, ``vllm/platforms/rocm.py:731-774``); a reason becomes
  ``ValueError: Selected backend ... is not valid for this configuration. Reason: [...]`` (cuda.py:440-444).
* ROCM_AITER_FA's ``supports_compute_capability`` is ``get_cdna_version() > 2`` (``rocm_aiter_fa.py:854-860``);
  ``get_cdna_version`` is 0 unless a ``_ON_GFX*`` flag holds (``rocm.py:362-371``), and those flags test ``_GCN_ARCH``
  for "gfx..." (``rocm.py:215-232``), which on an NVIDIA GPU is torch's ``gcnArchName``, the device name on a CUDA
  build (``rocm.py:200-209``; torch/csrc/cuda/Module.cpp). So on an H100 the class answers "compute capability not
  supported" (``vllm/v1/attention/backend.py:325-326``).
* ROCm's priority list has no FLASH_ATTN (``rocm.py:478-516``), yet FLASH_ATTN's own rules accept a bf16 Llama on
  gfx942 (capability 9.4 >= 8.0, ``flash_attn.py:453-454``); its kernel on ROCm is the upstream flash-attn package,
  imported only if installed (``fa_utils.py:20``, ``:38-62``; ``is_flash_attn_varlen_func_available``,
  ``fa_utils.py:348-377``; ``flash_attn.py:48``).
* TRITON_FLASH_ATTN is a member of 0.32.0's enum (``registry.py:52``) whose class is built at import
  (``triton_flash_attn.py:56``), which the extractor does not read.
* A name the enum lacks is refused while the flags are parsed: ``AttentionConfig.validate_backend_before``
  (``vllm/config/attention.py:181-193``) -> ``ValueError: Unknown attention backend: 'X'. Valid options are: ...``
  (``registry.py:21-31``).
"""
from __future__ import annotations

import json
import re

import pytest

from compat.checks import CompatInputError, verdict_for
from tests.conftest import load_config

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
Q = {"model": LLAMA, "max_model_len": "8192", "vllm_version": "0.32.0"}


def _verdict(gpu, backend, release="0.32.0"):
    return verdict_for(load_config("meta-llama__Llama-3.1-8B-Instruct.json"), gpu, attention_backend=backend,
                       vllm_version=release)


def _row(report, name):
    return next(b for b in report.backends if b.name == name)


def _summary(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", re.search(r'id="compat-summary">(.*?)</p>', html, re.S).group(1)).split())


def test_a_rocm_backend_on_an_nvidia_gpu_is_refused_with_vllms_reason_and_no_amd_condition():
    r = _verdict("H100", "ROCM_AITER_FA")
    assert r.ok is False and r.not_modelled is None
    assert r.error == ("Selected backend ROCM_AITER_FA is not valid for this configuration. "
                       "Reason: ['compute capability not supported']")
    row = _row(r, "ROCM_AITER_FA")
    assert row.ok is False and row.reasons == ["compute capability not supported"] and row.conditions == []
    dumped = json.dumps(r.to_json())
    assert "_ON_GFX" not in dumped.replace('"_ON_GFX', "")  # never a condition: only named in the assumptions
    assert not any("_ON_" in c for c in r.auto_conditions)
    assert any("gcnArchName" in a and "_ON_GFX942" in a for a in r.assumptions)


@pytest.mark.parametrize("backend,listed_for", [("ROCM_ATTN", "rocm"), ("CPU_ATTN", "cpu")])
def test_another_platforms_backend_whose_rules_pass_is_not_claimed_to_work(backend, listed_for):
    # RocmAttentionBackend / CPUAttentionBackend raise no reason for a bf16 Llama on SM90, so cuda.py:428-446 would
    # take them; whether their kernels exist in the CUDA build is not read from the source: not modelled, not "works"
    r = _verdict("H100", backend)
    assert r.ok is None and r.error is None and r.not_modelled
    assert f"listed for: {listed_for}" in r.not_modelled and "vllm/platforms/cuda.py:428-446" in r.not_modelled
    row = _row(r, backend)
    assert row.ok is None and row.not_modelled and row.conditions == []


def test_a_cuda_backend_on_rocm_never_shows_cuda_conditions():
    # FLASHMLA on MI300X with DeepSeek-V3: its rules read _flashmla_C_AVAILABLE, a fact of the CUDA build
    r = verdict_for(load_config("deepseek-ai__DeepSeek-V3.json"), "MI300X", attention_backend="FLASHMLA",
                    vllm_version="0.32.0")
    row = _row(r, "FLASHMLA")
    assert r.ok is None and r.not_modelled and row.conditions == []
    assert not any("flashmla" in c.lower() for c in r.auto_conditions if c != r.not_modelled)


def test_a_backend_the_calculator_does_not_model_is_not_a_startup_failure(client):
    r = _verdict("H100", "TRITON_FLASH_ATTN")
    assert r.ok is None and r.error is None
    assert "vllm/v1/attention/backends/registry.py:52" in r.not_modelled
    assert "create_composite_attention_backend" in r.not_modelled and "does not model" in r.not_modelled
    html = client.get("/compat/verdict/", {"model": LLAMA, "gpu": "H100",
                                           "attention_backend": "TRITON_FLASH_ATTN"}).content.decode()
    assert "vLLM would stop at startup" not in html
    assert _summary(html).startswith("--attention-backend TRITON_FLASH_ATTN: not modelled here")


def test_flash_attn_on_rocm_depends_on_the_upstream_flash_attn_package():
    r = _verdict("MI300X", "FLASH_ATTN")
    assert r.auto_selected == "ROCM_ATTN"  # rocm.py:503-504: ROCM_ATTN first in the list (no KV connector)
    assert r.ok is None and r.error is None and r.not_modelled is None
    assert len(r.auto_conditions) == 1 and r.auto_conditions[0].startswith("_ROCM_FLASH_ATTN_AVAILABLE")
    assert "vllm/v1/attention/backends/fa_utils.py:20" in r.auto_conditions[0]
    assert "vllm/v1/attention/backends/fa_utils.py:348" in r.auto_conditions[0]
    row = _row(r, "FLASH_ATTN")
    assert row.priority is None  # not in ROCm's priority list
    assert [c.when for c in row.conditions] == [[("_ROCM_FLASH_ATTN_AVAILABLE", True)],
                                                [("_ROCM_FLASH_ATTN_AVAILABLE", False)]]
    assert row.conditions[0].reasons == [] and row.conditions[1].reasons


def test_a_name_the_release_lacks_is_refused_with_vllms_message(client):
    with pytest.raises(CompatInputError) as e:
        _verdict("H100", "TRITON_FLASH_ATTN", release="0.14.1")
    assert e.value.field == "attention_backend"
    assert "Unknown attention backend: 'TRITON_FLASH_ATTN'" in e.value.message
    assert "vllm/v1/attention/backends/registry.py:21-31" in e.value.message
    assert "is a backend of vLLM" in e.value.message and "0.32.0" in e.value.message
    r = client.get("/compat/verdict/", {"model": LLAMA, "gpu": "H100", "attention_backend": "TRITON_FLASH_ATTN",
                                        "vllm_version": "0.14.1"})
    assert r.status_code == 400 and "Unknown attention backend: &#x27;TRITON_FLASH_ATTN&#x27;" in r.content.decode()


@pytest.mark.parametrize("gpu,backend,status,headline", [
    ("H100", "ROCM_AITER_FA", "does_not_start", "ROCM_AITER_FA does not work"),
    ("H100", "TRITON_FLASH_ATTN", "depends", "TRITON_FLASH_ATTN not modelled here"),
    ("MI300X", "FLASH_ATTN", "depends", "FLASH_ATTN depends on run-time conditions"),
])
def test_the_estimate_page_and_api_agree_with_the_compat_page(db, monkeypatch, client, gpu, backend, status, headline):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # models from the offline catalog, as in test_api_estimate.py
    q = {**Q, "gpu": gpu, "attention_backend": backend}
    body = client.get("/api/estimate", q).json()
    assert body["verdict"] == status
    page = client.get("/", q, follow=True).content.decode()
    head = " ".join(re.search(r'id="compat-headline">(.*?)</summary>', page, re.S).group(1).split())
    assert head.startswith(f"Attention backend: {headline}")
    compat = client.get("/compat/verdict/", {"model": LLAMA, "gpu": gpu, "attention_backend": backend,
                                             "vllm_version": "0.32.0"}).content.decode()
    assert _summary(page) == _summary(compat)
    if gpu == "H100":  # no AMD condition on an NVIDIA GPU (ROCm's own rows keep theirs on MI300X)
        assert "_ON_GFX" not in re.sub(r"<details><summary>Run-time assumptions.*?</details>", "", page, flags=re.S)


def test_gpt_oss_on_mi300x_flash_attn_is_refused_whether_or_not_flash_attn_is_installed():
    # vllm==0.32.0, read by hand: vllm/v1/attention/backends/fa_utils.py:20 `_ROCM_FLASH_ATTN_AVAILABLE = False`, :54
    # `= True` inside `elif current_platform.is_rocm():` (:38) / `try:` (:46) after `from flash_attn import
    # flash_attn_varlen_func` (:52): a run-time flag, not the constant False. FlashAttentionBackend.supports_sink
    # (flash_attn.py:447-450) returns False when the flag is False, else flash_attn_supports_sinks() (fa_utils.py:319-322)
    # = get_flash_attn_version() in (3, 4), and get_flash_attn_version returns None on ROCm (fa_utils.py:85-87). So
    # gpt-oss's sinks are refused on both sides of the condition: vLLM's ValueError either way.
    r = verdict_for(load_config("openai__gpt-oss-20b.json"), "MI300X", attention_backend="FLASH_ATTN",
                    vllm_version="0.32.0")
    assert r.features.has_sink
    assert r.ok is False and r.not_modelled is None
    assert r.error == ("Selected backend FLASH_ATTN is not valid for this configuration. "
                       "Reason: ['attention sinks not supported']")
    row = _row(r, "FLASH_ATTN")
    # the same refusal on both sides: the condition changes nothing, so it is not listed as one (check_compat's "if"
    # lines, the /compat/ page), only the refusal
    assert row.ok is False and row.reasons == ["attention sinks not supported"] and row.conditions == []
    # the condition is stated with the lines that set the flag
    said = next(s for s in r.sources if s.startswith("_ROCM_FLASH_ATTN_AVAILABLE is not a constant"))
    assert "False (vllm/v1/attention/backends/fa_utils.py:20)" in said
    assert "True (vllm/v1/attention/backends/fa_utils.py:54) if current_platform.is_rocm() (:38)" in said
    assert "flash_attn.flash_attn_varlen_func (:52)" in said


def test_the_rocm_flash_attn_flag_is_never_read_as_its_first_value():
    # every covered release that has the flag (0.16.0 onwards) rebinds it in its ROCm import block
    from compat import extract
    from compat.releases import covered_releases

    having = []
    for release in covered_releases():
        for name, mod in extract.load(release)["modules"].items():
            assert "_ROCM_FLASH_ATTN_AVAILABLE" not in mod["constants"], (release, name)
            if "_ROCM_FLASH_ATTN_AVAILABLE" in mod.get("runtime_constants", {}):
                having.append(release)
    assert having[0] == "0.16.0" and having[-1] == covered_releases()[-1]
