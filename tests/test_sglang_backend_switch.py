"""SGLang's fa3 -> triton switch with an fp8_e5m2 KV cache, FlashMLA's GPUs, and every flag of a generated SGLang
command read back by ``estimate`` to the same plan.

Expected values from SGLang's source: each release with an fa3 choice switches fa3 to triton when
``--kv-cache-dtype fp8_e5m2`` is given ("FlashAttention3 only supports fp8_e4m3 if using FP8; Setting attention
backend to triton.", a warning: 0.4.10.post2 model_runner.py:460-468, 0.5.3 :569-577, 0.5.3.post1 :572-580,
0.5.7 server_args.py:1640-1645, 0.5.8.post1 :1772-1777, 0.5.9 :1910-1915, 0.5.10.post1 :2397-2402, 0.5.23
arg_groups/overrides.py:1262-1269), after the default pick and before the backend is built; 0.4.3.post4 has no fa3
(server_args.py:716 choices flashinfer, triton, torch_native). FlashMLA: no GPU check in SGLang
(attention_registry.py create_flashmla_backend), sgl-kernel builds it for sm_90a / sm_100a only
(sgl-kernel/cmake/flashmla.cmake).
"""
from __future__ import annotations

import json
import zipfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from calculator.engine.gpus import get_gpu
from calculator.request import parse_request
from calculator.runtimes.sglang.compat import check_backend, default_backend
from calculator.runtimes.sglang.releases import COVERED
from tests.conftest import load_config
from tests.test_sglang_memory import wheel_of

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
WARNING = "FlashAttention3 only supports fp8_e4m3 if using FP8"


pytestmark = pytest.mark.usefixtures("offline_hub")


def _cited_block(source: str) -> str:
    """The lines around a ``sglang==X path:line`` citation, read from the release's wheel (skips when absent)."""
    release, _, where = source.partition(" ")
    release = release.removeprefix("sglang==")
    path, _, line = where.partition(":")
    wheel = wheel_of(release)
    if not wheel.exists():
        pytest.skip(f"sglang {release} wheel not downloaded")
    lines = zipfile.ZipFile(wheel).read(path).decode().splitlines()
    n = int(line.split()[0].rstrip(")"))
    return "\n".join(lines[n - 6:n + 7])


@pytest.mark.parametrize("release", [r for r in COVERED if r != "0.4.3.post4"])
def test_fa3_with_fp8_e5m2_runs_triton_in_every_release_and_cites_the_switch(release):
    llama = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    v = check_backend(release, get_gpu("H100"), llama, "fa3", kv_cache_dtype="fp8_e5m2")
    assert (v.verdict, v.backend, v.runs_as) == ("adjusted", "fa3", "triton")
    block = _cited_block(v.reasons[0].source)
    assert WARNING in block and '"triton"' in block and "fp8_e5m2" in block
    # the pick with no backend passed is fa3 on Hopper, then switched the same way
    assert default_backend(release, get_gpu("H100"), llama, kv_cache_dtype="fp8_e5m2").backend == "triton"
    # fp8_e4m3 keeps fa3
    assert check_backend(release, get_gpu("H100"), llama, "fa3", kv_cache_dtype="fp8_e4m3").runs_as is None


def test_fa3_is_no_choice_of_0_4_3_post4():
    from calculator.engine.errors import EngineInputError
    with pytest.raises(EngineInputError):
        check_backend("0.4.3.post4", get_gpu("H100"), load_config("meta-llama__Llama-3.1-8B-Instruct.json"), "fa3",
                      kv_cache_dtype="fp8_e5m2")


def test_the_switch_comes_before_fa3s_gpu_check():
    # fa3 refuses MLA below SM90 (attention_registry), but the backend built is triton: DeepSeek-V2-Lite on A100 starts
    ds = load_config("deepseek-ai__DeepSeek-V2-Lite.json")
    assert check_backend("0.5.23", get_gpu("A100"), ds, "fa3").verdict == "no"
    v = check_backend("0.5.23", get_gpu("A100"), ds, "fa3", kv_cache_dtype="fp8_e5m2")
    assert v.verdict == "adjusted" and v.runs_as == "triton"


def _estimate(*flags: str) -> dict:
    out = StringIO()
    call_command("estimate", *flags, "--format", "json", stdout=out)
    return json.loads(out.getvalue())


def test_estimate_shows_and_launches_the_backend_sglang_runs():
    body = _estimate("--runtime", "sglang", "--model", LLAMA, "--gpu", "H100", "--attention-backend", "fa3",
                     "--kv-cache-dtype", "fp8_e5m2")
    argv = body["serve_argv"]
    assert argv[argv.index("--attention-backend") + 1] == "triton"
    assert body["compat"]["requested_backend"] == "fa3" and body["compat"]["runs_as"] == "triton"


@pytest.mark.parametrize("gpu,verdict", [("A100", "no"), ("V100", "no"), ("H100", "adjusted"), ("B200", "adjusted")])
@pytest.mark.parametrize("release", ["0.5.9", "0.5.23"])
def test_flashmla_needs_sm90_or_sm100(gpu, verdict, release):
    v = check_backend(release, get_gpu(gpu), load_config("deepseek-ai__DeepSeek-V3.json"), "flashmla", page_size=1)
    assert v.verdict == verdict
    if verdict == "no":
        assert any("SM90" in r.text and "flashmla.cmake" in r.source for r in v.reasons)
        assert not any("page_size" in r.text for r in v.reasons)  # the refusal, not the page it would have set
    else:
        assert v.page_size == 64


# --- every flag of a generated SGLang command is read back to the same plan -----------------------------------------
CASES = [
    ("0.5.23", [LLAMA, "H100", "1"], []),
    ("0.5.23", [LLAMA, "H100", "1"], ["--attention-backend", "fa3", "--kv-cache-dtype", "fp8_e5m2"]),
    ("0.5.23", ["deepseek-ai/DeepSeek-V3", "H200", "8"], ["--dp-size", "8", "--enable-dp-attention"]),
    ("0.5.10.post1", ["Qwen/Qwen3-8B", "A100", "1"], ["--kv-cache-dtype", "fp8_e4m3"]),
    ("0.5.9", ["deepseek-ai/DeepSeek-V3", "H200", "8"], ["--dp-size", "8", "--enable-dp-attention"]),
    ("0.4.10.post2", [LLAMA, "A100", "2"], ["--page-size", "16"]),
    ("0.5.23", ["Qwen/Qwen3-8B", "H100", "1"], ["--trust-remote-code"]),
]


@pytest.mark.parametrize("release,base,extra", CASES)
def test_every_generated_flag_is_accepted_back_with_the_same_meaning(release, base, extra):
    model, gpu, tp = base
    first = _estimate("--runtime", "sglang", "--sglang-version", release, "--model", model, "--gpu", gpu,
                      "--tp-size", tp, *extra)
    argv = first["serve_argv"]
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    flags = argv[3:]
    again = _estimate("--runtime", "sglang", "--sglang-version", release, "--gpu", gpu, *flags)
    assert again["serve_argv"] == argv
    for key in ("kv_cache_tokens", "max_concurrency", "verdict"):
        assert again[key] == first[key], key
    # the API reads the same names
    params = {"runtime": "sglang", "sglang_version": release, "gpu": gpu}
    i = 0
    while i < len(flags):
        name = flags[i][2:].replace("-", "_")
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            params[name], i = flags[i + 1], i + 2
        else:
            params[name], i = "true", i + 1
    assert parse_request(params) == parse_request({"runtime": "sglang", "sglang_version": release, "gpu": gpu,
                                                   "model": model, "tensor_parallel_size": tp,
                                                   **{k: v for k, v in params.items() if k not in (
                                                       "model_path", "tp_size", "attn_dp_size",
                                                       "cuda_graph_max_bs_decode", "context_length",
                                                       "max_running_requests")},
                                                   **({"cuda_graph_max_bs": params["cuda_graph_max_bs_decode"]}
                                                      if "cuda_graph_max_bs_decode" in params else {}),
                                                   **({"dp_size": params["attn_dp_size"], "enable_dp_attention": "true"}
                                                      if "attn_dp_size" in params else {}),
                                                   "max_model_len": params["context_length"]})


# --- below SM75: SGLang stops whatever the backend -------------------------------------------------------------------
@pytest.mark.parametrize("release", COVERED)
def test_v100_is_refused_by_every_release_with_its_line(release):
    from calculator.runtimes.sglang.compat import below_sm75
    why = below_sm75(release, get_gpu("V100"))
    assert why is not None and "SM70" in why.text
    assert 'raise RuntimeError("SGLang only supports sm75 and above.")' in _cited_block(why.source)
    # T4 (SM75) passes the check (ModelRunner only switches it to float16), so does an AMD GPU
    assert below_sm75(release, get_gpu("T4")) is None and below_sm75(release, get_gpu("MI300X")) is None
    llama = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    assert check_backend(release, get_gpu("V100"), llama, "flashinfer").verdict == "no"


def test_v100_verdict_on_the_cli_and_with_the_default_backend():
    for extra in ((), ("--attention-backend", "flashinfer")):
        body = _estimate("--runtime", "sglang", "--model", LLAMA, "--gpu", "V100", *extra)
        assert body["verdict"] == "does_not_start"
        assert body["verdict_headline"].startswith("SGLang only supports sm75 and above")
        assert not any("--attention-backend" in r for r in body["verdict_reasons"])


def test_trust_remote_code_in_the_command_is_read_back_as_the_condition_met():
    """DeepSeek-R1 (deepseek_v3 with auto_map AutoConfig) on 0.4.3.post4 loads only through the repository's class
    (tests/test_sglang_config_types.py): the command carries --trust-remote-code and the verdict depends on it; fed
    back, the same pool and command, and the condition is met (works)."""
    base = ("--runtime", "sglang", "--sglang-version", "0.4.3.post4", "--gpu", "H200")
    first = _estimate(*base, "--model", "deepseek-ai/DeepSeek-R1", "--tp-size", "8")
    argv = first["serve_argv"]
    assert first["verdict"] == "depends" and argv.count("--trust-remote-code") == 1
    again = _estimate(*base, *argv[3:])
    assert again["serve_argv"] == argv and again["kv_cache_tokens"] == first["kv_cache_tokens"]
    assert again["verdict"] == "works"
