"""Fast tests of the validator's pieces against real vLLM output (public logs in ../shared, vLLM 0.32
CPU lines captured on this machine) and hand-computed values."""
from __future__ import annotations

import json
import math

import pytest

from tests.conftest import CASES_FILE
from validator import bench, runner
from validator.config import ConfigurationError, build_configuration

# Lines vLLM 0.32.0 (CPU build) printed on this machine for the tiny Llama (2 layers, 2 KV heads, head_dim 32).
CPU_LOG = """\
(Worker pid=9442) INFO 11-29 14:46:07 [cpu_worker.py:260] Explicitly set (1.0/8.09) GiB for KV cache on node 0.
(EngineCore pid=9404) INFO 11-29 14:46:07 [kv_cache_utils.py:2327] CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 1,024 tokens per request: 1024.00x
"""


def memory_cases_with_excerpt():
    cases = json.loads(CASES_FILE.read_text())["memory_cases"]
    return [c for c in cases if c.get("log_excerpt") and "KV cache size" in c["log_excerpt"]]


def test_it_parses_the_cpu_startup_lines():
    found = runner.parse_startup_log(CPU_LOG)
    assert found["kv_device"] == "CPU"
    assert found["kv_cache_tokens"] == 1_048_576
    assert found["max_model_len"] == 1024
    assert found["max_concurrency"] == 1024.0
    assert found["available_kv_cache_gib"] == 1.0
    assert found["attention_backend"] == "CPU_ATTN"
    assert "weights_gib" not in found


@pytest.mark.parametrize("case", memory_cases_with_excerpt(), ids=lambda c: c["id"])
def test_it_parses_public_gpu_logs(case):
    found = runner.parse_startup_log(case["log_excerpt"])
    assert found["kv_cache_tokens"] == case["kv_cache_tokens"]
    for key in ("weights_gib", "available_kv_cache_gib", "max_concurrency"):
        if key in found and case.get(key) is not None:
            assert found[key] == pytest.approx(case[key], abs=0.011), key


def test_it_computes_acceptance_from_metric_deltas():
    # sd-001 (vllm PR 24127): ngram k=5, "Accepted: 262 tokens, Drafted: 295 tokens", mean acceptance length
    # 5.44 -> 262 / 4.44 = 59 drafts; per position 0.983, 0.949, 0.915, 0.881, 0.712 -> 58, 56, 54, 52, 42.
    labels = 'engine="0",model_name="m"'

    def text(drafts, drafted, accepted, per_pos):
        lines = ["# TYPE vllm:spec_decode_num_drafts counter", f"vllm:spec_decode_num_drafts_total{{{labels}}} {drafts}",
                 "# TYPE vllm:spec_decode_num_draft_tokens counter",
                 f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {drafted}",
                 "# TYPE vllm:spec_decode_num_accepted_tokens counter",
                 f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {accepted}",
                 "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter"]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {n}'
                  for i, n in enumerate(per_pos)]
        return "\n".join(lines) + "\n"

    before = runner.parse_metrics(text(10, 50, 40, [9, 9, 8, 8, 6]))
    after = runner.parse_metrics(text(69, 345, 302, [67, 65, 62, 60, 48]))
    d = runner.spec_decode_delta(before, after)
    assert (d["num_drafts"], d["num_draft_tokens"], d["num_accepted_tokens"]) == (59, 295, 262)
    assert round(d["acceptance_rate"], 3) == 0.888
    assert round(d["mean_acceptance_length"], 2) == 5.44
    assert [round(p, 3) for p in d["per_position"]] == [0.983, 0.949, 0.915, 0.881, 0.712]


def test_it_reports_no_acceptance_without_spec_counters():
    assert runner.spec_decode_delta({}, runner.parse_metrics("# TYPE vllm:num_preemptions counter\n"
                                                             'vllm:num_preemptions_total{engine="0"} 0\n')) is None


def test_it_builds_an_argv_list_never_a_shell_string():
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    serve = runner.serve_argv({"max_model_len": 1024, "dtype": "float32", "kv_cache_dtype": "auto",
                               "kv_cache_memory_bytes": 2**30, "enforce_eager": True,
                               "speculative_config": spec}, "org/model; rm -rf /")
    assert serve[:3] == ["vllm", "serve", "org/model; rm -rf /"]
    assert serve[serve.index("--speculative-config") + 1] == '{"method":"ngram","num_speculative_tokens":3}'
    assert "--kv-cache-dtype" not in serve  # the default is left out
    argv = runner.server_argv(serve, "/models/x", "org/model; rm -rf /", "127.0.0.1", 8123, cpu=True)
    assert argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert "--kv-cache-memory-bytes" not in argv  # VLLM_CPU_KVCACHE_SPACE carries it on the CPU build
    assert argv[argv.index("--model") + 1] == "/models/x"
    assert argv[argv.index("--served-model-name") + 1] == "org/model; rm -rf /"


@pytest.mark.django_db
def test_it_configures_the_cpu_run_for_the_tiny_llama(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    cfg = build_configuration({"model": "tiny-random/llama", "gpu": "CPU", "max_model_len": "4096",
                               "dtype": "bfloat16", "concurrency": "4"})
    inp = cfg["engine_input"]
    assert inp["gpu"] == "CPU" and inp["kv_cache_memory_bytes"] == 2**30 and inp["dtype"] == "float32"
    assert inp["max_model_len"] == 1024  # scaled down, and said so
    assert any("bfloat16" in a for a in cfg["adjustments"])
    assert cfg["spec_config"]["method"] == "ngram"
    p = cfg["profile"]
    assert p["input_len"] + p["output_len"] <= inp["max_model_len"] and p["concurrency"] == 4
    hf = inp["hf_config"]
    assert hf["architectures"] == ["LlamaForCausalLM"] and hf["torch_dtype" if "torch_dtype" in hf else "dtype"] == "float32"


@pytest.mark.django_db
def test_it_uses_a_tiny_stand_in_for_a_hub_llama_on_the_cpu(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    cfg = build_configuration({"model": "meta-llama/Llama-3.1-8B", "gpu": "CPU"})
    assert cfg["run_model"] == "tiny-random/llama" and cfg["architecture"] == "LlamaForCausalLM"
    assert any("meta-llama/Llama-3.1-8B" in a and "LlamaForCausalLM" in a for a in cfg["adjustments"])


@pytest.mark.django_db
@pytest.mark.parametrize("params,field", [
    ({"model": "nobody/nothing"}, "model"),
    ({"model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpu": "CPU"}, "model"),
    ({"model": "tiny-random/llama", "speculative_config": "{not json"}, "speculative_config"),
    ({"model": "tiny-random/llama", "max_num_seqs": "0"}, "max_num_seqs"),
])
def test_it_rejects_requests_it_cannot_run(params, field, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    with pytest.raises(ConfigurationError) as e:
        build_configuration(params)
    assert e.value.field == field


def test_compare_scores_each_predicted_field():
    rows = {r["field"]: r for r in bench.compare({"kv_cache_tokens": 1_040_000, "available_kv_cache_gib": 1.0},
                                                 runner.parse_startup_log(CPU_LOG))}
    assert rows["kv_cache_tokens"]["error"] == 1_040_000 - 1_048_576
    assert math.isclose(rows["kv_cache_tokens"]["error_pct"], -8576 / 1_048_576 * 100)
    assert rows["available_kv_cache_gib"]["error_pct"] == 0.0
    assert rows["weights_gib"]["measured"] is None and "CPU" in rows["weights_gib"]["note"]


def test_fit_profile_scales_concurrency_to_the_predicted_kv_cache():
    from validator.config import fit_profile

    cfg = {"profile": {"input_len": 32512, "output_len": 256, "concurrency": 4}, "adjustments": []}
    # 2.5 requests of 32,768 tokens fit: 81,920 tokens of KV cache / 32,768 per request -> 2
    fit_profile(cfg, {"max_concurrency": 0.625, "max_model_len": 131072})
    assert cfg["profile"]["concurrency"] == 2 and "scaled down to 2" in cfg["adjustments"][0]
    fit_profile(cfg, {})  # no prediction: unchanged
    assert cfg["profile"]["concurrency"] == 2


@pytest.mark.django_db
def test_the_engine_input_validates_against_the_engine_schema(settings, tmp_path):
    from calculator.engine.schemas import EngineInput

    settings.VAR_DIR = tmp_path
    for params in ({"model": "tiny-random/llama", "gpu": "CPU"},
                   {"model": "Qwen/Qwen3-8B", "gpu": "H100", "max_model_len": "40960", "kv_cache_dtype": "fp8"}):
        cfg = build_configuration(params)
        inp = EngineInput(**cfg["engine_input"])
        assert inp.hf_config == cfg["engine_input"]["hf_config"]
    # the GPU profile: the field guide's working context 32768 at concurrency 4
    assert cfg["platform"] == "cuda" and cfg["profile"]["input_len"] + cfg["profile"]["output_len"] == 32768
    assert cfg["profile"]["concurrency"] == 4 and inp.kv_cache_dtype == "fp8" and inp.kv_cache_memory_bytes is None


@pytest.mark.django_db
def test_the_report_compares_predicted_and_measured_speed(settings, tmp_path):
    """Speed rows use the profile the run used; TPOT is compared with perf's itl_ms (vllm bench serve's
    TPOT), the speedup with baseline TPOT / speculative TPOT; acceptance from the measured counters."""
    from calculator.engine.perf import speed_fields
    from calculator.engine.schemas import EngineInput
    from validator.bench import speed_comparison

    settings.VAR_DIR = tmp_path
    cfg = build_configuration({"model": "tiny-random/llama", "gpu": "CPU", "max_model_len": "1024",
                               "acceptance_rate": "0.5"})
    # means differ from medians: the report compares the mean (what the model predicts and calibration uses)
    baseline = {"aggregate": {"median_ttft_ms": 40.0, "median_tpot_ms": 20.0, "output_throughput": 150.0,
                              "mean_ttft_ms": 44.0, "mean_tpot_ms": 22.0}}
    spec = {"aggregate": {"median_ttft_ms": 45.0, "median_tpot_ms": 16.0, "output_throughput": 180.0,
                          "mean_ttft_ms": 47.0, "mean_tpot_ms": 17.6, "spec_decode": {"mean_acceptance_length": 1.6}}}
    rows = {r["field"]: r for r in speed_comparison(cfg, baseline, spec)}
    p = cfg["profile"]
    base_in = {k: v for k, v in cfg["engine_input"].items() if k != "speculative_config"}
    expected = speed_fields(EngineInput(**base_in), None, prompt_len=p["input_len"], output_len=p["output_len"],
                            concurrency=p["concurrency"])
    assert rows["tpot_ms"]["predicted"] == expected["itl_ms"] and rows["tpot_ms"]["measured"] == 22.0
    assert rows["tpot_ms"]["error"] == pytest.approx(expected["itl_ms"] - 22.0)
    assert rows["ttft_ms"]["measured"] == 44.0
    assert rows["spec_speedup"]["measured"] == pytest.approx(22.0 / 17.6)
    # acceptance rate 0.5 = accepted / drafted tokens (vLLM's, as the runner measures it): length = 1 + k x 0.5
    k = cfg["spec_config"]["num_speculative_tokens"]
    assert rows["mean_acceptance_length"]["predicted"] == pytest.approx(1 + k * 0.5, abs=1e-6)
    assert rows["mean_acceptance_length"]["measured"] == 1.6




def test_the_validation_form_keeps_a_runtimes_alias_it_checked():
    """``ctx_size`` (llama.cpp) and ``tp_size`` (SGLang) are checked by the form as the calculator checks them; the run
    must get them too (they used to be dropped, so the run silently used the defaults)."""
    from validator.forms import ValidationRequestForm

    form = ValidationRequestForm({"model": "tiny-random/llama", "runtime": "llama.cpp", "gpu": "CPU", "ctx_size": "512"})
    assert form.is_valid(), form.errors
    assert form.params()["ctx_size"] == "512"
    from validator.config import build_configuration

    assert build_configuration(form.params())["llamacpp"]["settings"]["n_ctx"] == 512
