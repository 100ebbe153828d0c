"""SGLang validation runs (``validator.sglang``, ``validator.bench.run_sglang_sequence``).

SGLang needs a GPU, so nothing here starts it. What is checked: the start-up log parser against every public
SGLang log of ``../shared/cases`` (its figures as the record's author extracted them), the comparison against the
calculator's plan for a public log's own configuration, sglang.bench_serving's result line in vLLM's key names
(values by hand), the launch argv, which worker can take a run, and the whole run through the web view and the real
worker with a stand-in server that prints a real SGLang start-up log (sgl-011) and a stand-in for
sglang.bench_serving (tests/fake_sglang_bench.py)."""
from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.conftest import SHARED
from validator import capabilities, runner, sglang
from validator.config import ConfigurationError, build_configuration

CASES = SHARED / "cases" / "runtime_startup_logs.json"
needs_cases = pytest.mark.skipif(not CASES.exists(), reason="../shared/cases is not beside the checkout")
HERE = Path(__file__).parent


def sglang_records() -> list[dict]:
    return json.loads(CASES.read_text())["sglang"] if CASES.exists() else []


def record(rid: str) -> dict:
    return next(r for r in sglang_records() if r["id"] == rid)


pytestmark = pytest.mark.usefixtures("offline_hub")


# the record's ``logged`` keys (the record author's names) -> the parser's; a ``_tpN`` suffix names the rank
LOGGED_AS = {
    "kv_tokens": "kv_tokens", "kv_size_gb": "kv_size_gib", "kv_size_gb_logged": "kv_size_gib",
    "k_size_gb": "k_size_gib", "v_size_gb": "v_size_gib", "k_size_gb_target": "k_size_gib",
    "v_size_gb_target": "v_size_gib", "k_size_gb_draft": "draft_k_size_gib", "v_size_gb_draft": "draft_v_size_gib",
    "swa_k_size_gb": "swa_k_size_gib", "swa_v_size_gb": "swa_v_size_gib", "full_k_size_gb": "full_k_size_gib",
    "full_v_size_gb": "full_v_size_gib", "swa_kv_pool_mem_usage_gb": "swa_kv_pool_gib",
    "avail_mem_before_load_gb": "avail_before_load_gib", "avail_mem_after_load_gb": "avail_after_load_gib",
    "weights_mem_usage_gb": "weights_gib", "weights_mem_usage_gb_per_rank": "weights_gib",
    "avail_mem_after_pool_gb": "avail_after_pool_gib", "avail_mem_after_target_pool_gb": "avail_after_pool_gib",
    "avail_mem_after_draft_pool_gb": "draft_avail_after_pool_gib",
    "avail_mem_before_cuda_graph_gb": "avail_before_cuda_graph_gib", "cuda_graph_mem_usage_gb": "cuda_graph_gib",
    "avail_mem_after_cuda_graph_gb": "avail_after_cuda_graph_gib", "available_gpu_mem_gb": "available_gpu_mem_gib",
    "max_total_num_tokens": "max_total_num_tokens", "max_running_requests": "max_running_requests",
    "context_len": "context_len", "max_mamba_cache_size": "max_mamba_cache_size",
    "mamba_conv_state_gb": "mamba_conv_state_gib", "mamba_ssm_state_gb": "mamba_ssm_state_gib",
}
# figures a record carries that are not an SGLang log line: nvidia-smi's, and a size the author computed
NOT_SGLANG_LINES = ("nvidia_smi_", "kv_size_gb_including_indexer_per_author")


@needs_cases
def test_the_start_up_parser_reads_every_figure_of_the_public_sglang_logs():
    """Each public log's quote parsed equals the figures the record's author read from it, rank by rank."""
    compared = 0
    for rec in sglang_records():
        parsed = sglang.parse_startup_log(rec["quote"])
        for key, value in rec["logged"].items():
            if key.startswith(NOT_SGLANG_LINES):
                continue
            base, _, rank = key.rpartition("_tp")
            if base and rank.isdigit():
                got = parsed["ranks"][int(rank)][LOGGED_AS[base]]
            else:
                got = parsed[LOGGED_AS[key]]
            assert got == pytest.approx(value), (rec["id"], key)
            compared += 1
    assert compared >= 90


@needs_cases
def test_rank_zero_is_preferred_and_a_draft_pool_is_the_second_pool():
    # sgl-020: the KV line only for TP5, the distributed init for TP0
    p = sglang.parse_startup_log(record("sgl-020")["quote"])
    assert p["kv_tokens"] == 2795207 and p["rank_of"]["kv_tokens"] == 5 and "dist_init_gib" not in p["rank_of"]
    # sgl-022 (Qwen3.5 + MTP draft, TP0 and TP1): target pool, then the draft's, each closed by "Memory pool end"
    p = sglang.parse_startup_log(record("sgl-022")["quote"])
    assert (p["k_size_gib"], p["draft_k_size_gib"], p["avail_after_pool_gib"], p["draft_avail_after_pool_gib"]) == \
        (3.46, 1.08, 8.40, 6.23)
    assert p["ranks"][1]["avail_after_pool_gib"] == 7.63 and "draft_k_size_gib" not in p["ranks"][1]
    # 0.4.3 logs "avail mem" before "mem usage" on the graph line; server_args= holds what SGLang resolved
    p = sglang.parse_startup_log(record("sgl-011")["quote"])
    assert (p["cuda_graph_gib"], p["avail_after_cuda_graph_gib"]) == (0.93, 0.53)
    assert p["server_args"]["mem_fraction_static"] == 0.85 and p["server_args"]["attention_backend"] == "flashinfer"


@needs_cases
def test_the_comparison_puts_the_plan_beside_the_log_of_its_own_configuration():
    """sgl-015 (Qwen3.5-9B, 2x RTX 4090, --mem-fraction-static 0.8, --context-length 262144, a source build after
    0.5.10.post1): the plan's figures beside the log's, the KV tokens within 2 % (benchmarks/sglang_cases.py:
    +1.31 %)."""
    from calculator.plan import make_plan
    from calculator.request import parse_request

    plan = make_plan(parse_request({"model": "Qwen/Qwen3.5-9B", "runtime": "sglang", "gpu": "RTX4090",
                                    "tp_size": "2", "mem_fraction_static": "0.8", "context_length": "262144",
                                    "sglang_version": "0.5.10.post1"}), with_speed=False)
    rows = {r["field"]: r for r in sglang.memory_comparison(plan.memory.to_json(),
                                                            sglang.parse_startup_log(record("sgl-015")["quote"]))}
    tokens = rows["sglang_max_total_num_tokens"]
    assert tokens["measured"] == 327310 and tokens["predicted"] == plan.memory.plan.max_total_num_tokens
    assert tokens["error_pct"] == pytest.approx((tokens["predicted"] - 327310) / 327310 * 100)
    assert abs(tokens["error_pct"]) < 2
    assert rows["sglang_max_running_requests"]["measured"] == 62
    assert rows["sglang_context_length"]["measured"] == rows["sglang_context_length"]["predicted"] == 262144
    assert rows["sglang_kv_size_gib"]["measured"] == 5.0  # K 2.50 + V 2.50 GB
    assert rows["sglang_mem_fraction_static"]["predicted"] == 0.8
    assert rows["sglang_mem_fraction_static"]["measured"] is None  # this log has no server_args= line


def test_sglang_bench_serving_result_in_vllm_bench_serve_names():
    """Three requests: TTFTs 0.1 / 0.2 / 0.3 s, ITLs [0.05, 0.05], [0.1], [], the third failed (after its first
    token) -> the successful ones' latencies 0.2 / 0.3 s; numpy's linear p95 of two values a <= b is
    a + 0.95 (b - a)."""
    line = {"duration": 1.5, "completed": 2, "total_input_tokens": 30, "total_output_tokens": 5,
            "request_throughput": 2.0, "output_throughput": 3.33, "total_throughput": 23.3,
            "mean_e2e_latency_ms": 266.7, "median_e2e_latency_ms": 300.0, "p99_e2e_latency_ms": 300.0,
            "mean_ttft_ms": 200.0, "median_ttft_ms": 200.0, "mean_tpot_ms": 75.0, "accept_length": 2.4,
            "ttfts": [0.1, 0.2, 0.3], "itls": [[0.05, 0.05], [0.1], []], "errors": ["", "", "timeout"]}
    out = sglang.from_bench_result(line)
    assert out["mean_e2el_ms"] == 266.7 and out["median_e2el_ms"] == 300.0 and out["total_token_throughput"] == 23.3
    assert out["failed"] == 1 and out["accept_length"] == 2.4 and out["mean_ttft_ms"] == 200.0
    assert out["ttfts"] == [0.1, 0.2] and out["latencies"] == pytest.approx([0.2, 0.3])
    assert out["p95_ttft_ms"] == pytest.approx((0.1 + 0.95 * 0.1) * 1000)
    assert out["p95_e2el_ms"] == pytest.approx((0.2 + 0.95 * 0.1) * 1000)


def test_the_launch_command_gets_the_address_metrics_and_log_level():
    command = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp-size", "1"]
    argv = sglang.server_argv(command, "127.0.0.1", 30001, revision="abc123")
    assert argv[:3] == [sys.executable, "-m", "sglang.launch_server"]
    assert argv[3:7] == command[3:]
    assert argv[7:] == ["--revision", "abc123", "--host", "127.0.0.1", "--port", "30001", "--enable-metrics",
                        "--log-level", "info"]
    assert sglang.server_argv(command, "h", 1, prefix=["/opt/sg/bin/python", "-m", "sglang.launch_server"])[0] \
        == "/opt/sg/bin/python"
    with pytest.raises(ValueError):
        sglang.server_argv(["python", "-m", "vllm.entrypoints.openai.api_server"], "h", 1)


def test_sglang_is_not_available_on_this_cpu_worker():
    release, why = sglang.server_available({"platform": "cpu"})
    assert release is None and ("not installed" in why or "GPU" in why)


def _worker(wid: str, platform: str, devices: list[str], runtimes: tuple[str, ...]) -> dict:
    return {"worker_id": wid, "host": wid, "heartbeat": 0,
            "hardware": {"platform": platform, "devices": [{"name": d, "memory_total_bytes": 80 * 2**30}
                                                           for d in devices]},
            "runtimes": {r: {"release": "0.5.10.post1"} for r in runtimes}}


@pytest.mark.parametrize("extra,gpus", [({}, 2), ({"dp_size": "2"}, 4), ({"dp_size": "2", "enable_dp_attention": "1"}, 2)])
def test_an_sglang_run_needs_a_gpu_worker_with_sglang_and_the_servers_gpus(extra, gpus):
    """GPUs = tp x pp, times dp unless --enable-dp-attention (sglang data_parallel_controller.py:164, 253-254)."""
    cfg = build_configuration({"model": "Qwen/Qwen3-8B", "runtime": "sglang", "gpu": "H100", "tp_size": "2", **extra})
    need = capabilities.requirement(cfg)
    assert (need["runtime"], need["platform"], need["gpus"]) == ("sglang", "cuda", gpus)
    h100 = "NVIDIA H100 80GB HBM3"
    workers = [_worker("cpu-box", "cpu", [], ("sglang", "vllm")), _worker("no-sglang", "cuda", [h100] * 4, ("vllm",)),
               _worker("small", "cuda", [h100] * (gpus - 1), ("sglang",)), _worker("good", "cuda", [h100] * gpus, ("sglang",))]
    who = capabilities.who_can_run(cfg, workers)
    assert who["workers"] == ["good"]
    reasons = dict(zip(("cpu-box", "no-sglang", "small"), (capabilities.can_take(w, need)[1] for w in workers[:3])))
    assert "no GPU" in reasons["cpu-box"] and "no sglang installed" in reasons["no-sglang"]
    assert f"not {gpus}x" in reasons["small"]
    nobody = capabilities.who_can_run(cfg, workers[:3])
    assert not nobody["ok"] and "SGLang runs are not available" in nobody["message"]


def test_an_sglang_run_with_speculation_runs_the_baseline_then_the_speculative_server():
    cfg = build_configuration({"model": "Qwen/Qwen3-8B", "runtime": "sglang", "gpu": "H100",
                               "speculative_config": '{"method":"ngram","num_speculative_tokens":3}'})
    base, spec = cfg["sglang"]["phases"]
    assert (base["name"], spec["name"]) == ("baseline", "speculative")
    assert "--speculative-algorithm" not in base["command"]
    assert spec["command"][spec["command"].index("--speculative-algorithm") + 1] == "NGRAM"
    assert base["command"][:5] == ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
    assert any("one after the other" in a for a in cfg["adjustments"])


@pytest.mark.parametrize("params,field", [({"gpu": "CPU"}, "gpu"), ({"validation_workload": "code"}, "validation_workload"),
                                          # Qwen3-8B's bf16 weights (15.3 GiB) on a 7.64 GiB RTX 4060: nothing starts
                                          ({"gpu": "RTX 4060"}, "gpu")])
def test_sglang_runs_refuse_what_they_cannot_run(params, field):
    with pytest.raises(ConfigurationError) as err:
        build_configuration({"model": "Qwen/Qwen3-8B", "runtime": "sglang", "gpu": "H100", **params})
    assert err.value.field == field
    if params.get("gpu") == "RTX 4060":
        assert "would not start" in err.value.message and "do not fit" in err.value.message


def test_an_sglang_run_never_starts_a_server_with_remote_code():
    """DeepSeek-R1 on SGLang 0.4.3.post4 loads only with --trust-remote-code (its pin does not know deepseek_v3:
    tests/test_sglang_config_types.py), which the calculator's command carries; a validation run would run the
    repository's code on the worker, so it is refused, naming the release field."""
    with pytest.raises(ConfigurationError) as err:
        build_configuration({"model": "deepseek-ai/DeepSeek-R1", "runtime": "sglang", "gpu": "H200",
                             "tensor_parallel_size": "8", "sglang_version": "0.4.3.post4"})
    assert err.value.field == "sglang_version" and "never runs a repository's code" in err.value.message


def test_the_tokenizer_is_fetched_without_code_and_a_tokenizer_that_needs_code_is_refused(tmp_path, monkeypatch):
    from calculator.crosscheck.tiny_models import write_tokenizer
    from tests.hub_server import FakeHub

    write_tokenizer(tmp_path / "tok")
    files = {p.name: p.read_bytes() for p in (tmp_path / "tok").iterdir()}
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        hub.add_repo("org/plain", {**files, "config.json": b"{}", "modeling_x.py": b"raise SystemExit"})
        path = sglang.tokenizer_files("org/plain", None, tmp_path / "plain")
        assert (path / "tokenizer.json").read_bytes() == files["tokenizer.json"]
        assert not list(path.glob("*.py"))
        code = json.loads(files["tokenizer_config.json"]) | {"auto_map": {"AutoTokenizer": ["tok.T", None]}}
        hub.add_repo("org/code", {**files, "tokenizer_config.json": json.dumps(code).encode()})
        with pytest.raises(ValueError, match="own code"):
            sglang.tokenizer_files("org/code", None, tmp_path / "code")


def _run_through_the_site(client, settings, tmp_path, monkeypatch, params: dict, bench_extra: tuple = (),
                          log_extra: str = "", status: str = "done"):
    """Submit ``params`` through the web view as a user with a 4x L4 SGLang worker recorded, shrink the profile,
    run the real worker (db_worker) with the stand-ins for SGLang's two programs, return the run."""
    from django.contrib.auth.models import Permission, User
    from django.urls import reverse

    from calculator.crosscheck.tiny_models import write_tokenizer
    from tests.hub_server import FakeHub
    from validator.models import ValidationRun

    settings.VAR_DIR = tmp_path
    log = tmp_path / "sgl-011.log"
    log.write_text(record("sgl-011")["quote"] + "\n" + log_extra)
    settings.VALIDATOR_SGLANG_COMMAND = [sys.executable, str(HERE / "fake_vllm_server.py"), "--fake-mode",
                                         "replay-serve", "--fake-log", str(log)]
    settings.VALIDATOR_SGLANG_BENCH_COMMAND = [sys.executable, str(HERE / "fake_sglang_bench.py"), *bench_extra]
    worker = _worker("gpu-worker", "cuda", ["NVIDIA L4"] * 4, ("sglang",))
    capabilities.record(worker | {"heartbeat": __import__("time").time()})
    user = User.objects.create_user("alice")
    user.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    client.force_login(user)
    r = client.post(reverse("validator:new"), params)
    assert r.status_code == 302, r.content.decode()[:2000]
    run = ValidationRun.objects.get()
    assert run.prediction["baseline"]["memory"]["max_total_num_tokens"] > 0
    profile = dict(run.configuration["profile"], input_len=48, output_len=16, num_prompts=6, repeats=3, warmups=1)
    ValidationRun.objects.filter(pk=run.pk).update(configuration={**run.configuration, "profile": profile})

    write_tokenizer(tmp_path / "tok")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        hub.add_repo("Qwen/QwQ-32B", {p.name: p.read_bytes() for p in (tmp_path / "tok").iterdir()})
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the worker's prediction reads the catalog, as the page's did
        monkeypatch.setattr(sglang, "tokenizer_files", partial(_fetch_online, sglang.tokenizer_files, hub.url))
        # the worker's hardware as NVML would report the 4x L4 the run asks for (this machine has no GPU)
        monkeypatch.setattr(runner, "detect_hardware", lambda: {**worker["hardware"], "host": "gpu-worker"})
        call_command("db_worker", batch=True, interval=0, startup_delay=False, verbosity=0)
    run.refresh_from_db()
    assert run.status == status, (run.error, run.log_tail[-3000:])
    return run


@needs_cases
@pytest.mark.django_db(transaction=True)
def test_an_sglang_run_from_the_web_view_to_the_report(client, settings, tmp_path, monkeypatch):
    """The whole path with stand-ins for SGLang's two programs: the page submits, the real worker runs
    ``run_sglang_sequence``, the server stand-in prints sgl-011's real start-up log (QwQ-32B, 4x L4, sglang
    0.4.3.post4) and serves, ``validator.bench_serve_entry --client sglang`` runs the bench stand-in per repeat.
    The report puts the calculator's plan for that configuration beside the log's own figures."""
    from django.urls import reverse

    run = _run_through_the_site(client, settings, tmp_path, monkeypatch, {
        "model": "Qwen/QwQ-32B", "runtime": "sglang", "gpu": "L4", "tp_size": "4", "sglang_version": "0.4.3.post4"})
    m = run.measured
    base = m["phases"]["baseline"]
    assert base["argv"][:2] == settings.VALIDATOR_SGLANG_COMMAND[:2]
    assert base["argv"][-3:] == ["--enable-metrics", "--log-level", "info"] and "--port" in base["argv"]
    assert base["serve_argv"][:7] == ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/QwQ-32B",
                                      "--tp-size", "4"]  # the form kept SGLang's alias tp_size
    assert base["startup"]["max_total_num_tokens"] == 46611 and base["startup"]["weights_gib"] == 15.54
    assert base["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    rows = {row["field"]: row for row in m["comparison"]}
    tokens = rows["sglang_max_total_num_tokens"]
    assert tokens["measured"] == 46611 and abs(tokens["error_pct"]) < 2.5  # benchmarks/sglang_cases.py: -1.78 %
    assert rows["sglang_mem_fraction_static"]["measured"] == 0.85
    agg = base["aggregate"]
    assert agg["completed"] == 6 and agg["failed"] == 0 and agg["total_output_tokens"] == 6 * 16
    assert rows["ttft_ms"]["measured"] == pytest.approx(agg["mean_ttft_ms"]) and rows["ttft_ms"]["predicted"] > 0
    assert len(base["repeats"]) == 3 and m["runtime"] == "sglang" and "verdict" not in m
    page = client.get(reverse("validator:detail", args=[run.pk])).content.decode()
    assert "SGLang start-up log" in page and "sglang_max_total_num_tokens" in page and "46,611" in page


@needs_cases
@pytest.mark.django_db(transaction=True)
def test_an_sglang_speculation_run_measures_the_baseline_then_the_speculative_server(client, settings, tmp_path,
                                                                                   monkeypatch):
    """ngram k=3: two servers one after the other, each benchmarked ``repeats`` times; the verdict pairs repeat i
    of each and says the phases were not interleaved; the speed rows say ngram has no typical acceptance."""
    run = _run_through_the_site(client, settings, tmp_path, monkeypatch, {
        "model": "Qwen/QwQ-32B", "runtime": "sglang", "gpu": "L4", "tp_size": "4",
        # 0.5.10.post1: on 0.5.23 (the default) its larger CUDA-graph reserve for GPUs under 35 GiB leaves QwQ-32B on
        # 4x L4 no KV pool, so there would be nothing to run
        "sglang_version": "0.5.10.post1",
        "speculative_config": '{"method":"ngram","num_speculative_tokens":3}'})
    m = run.measured
    assert m["order"] == ["baseline", "speculative"]
    base, spec = m["phases"]["baseline"], m["phases"]["speculative"]
    assert "--speculative-algorithm" not in base["argv"]
    assert spec["argv"][spec["argv"].index("--speculative-algorithm") + 1] == "NGRAM"
    assert spec["argv"][spec["argv"].index("--speculative-num-draft-tokens") + 1] == "4"
    assert len(base["repeats"]) == len(spec["repeats"]) == 3
    assert base["stopped"] and spec["stopped"]
    assert any("not interleaved" in c for c in m["verdict"]["caveats"])
    assert "--flush-cache" in base["bench_argv"] and "radix cache" in m["prompts"]
    rows = {row["field"]: row for row in m["comparison"]}
    # the speedup is paired as the verdict is: the geometric mean over repeat i of each phase of baseline TPOT /
    # speculative TPOT (not the ratio of the phases' means), with its interval
    import math

    logs = [math.log(b["bench"]["mean_tpot_ms"] / s["bench"]["mean_tpot_ms"])
            for b, s in zip(base["repeats"], spec["repeats"])]
    assert rows["spec_speedup"]["measured"] == pytest.approx(math.exp(sum(logs) / len(logs)))
    assert rows["spec_speedup"]["pairs"] == 3
    assert rows["spec_speedup"]["ci_low"] <= rows["spec_speedup"]["measured"] <= rows["spec_speedup"]["ci_high"]
    assert "one after the other" in rows["spec_speedup"]["note"]
    assert rows["spec_tpot_ms"]["predicted"] is None and "acceptance" in rows["spec_tpot_ms"]["note"]
    assert m["acceptance"]["mean_acceptance_length"] is None  # the stand-in reports none (SGLang's would)


def _fetch_online(real, endpoint, model_id, revision, dest):
    """The tokenizer step with the Hub stand-in reachable (the rest of the worker stays offline)."""
    import os

    os.environ.pop("HF_HUB_OFFLINE", None)
    try:
        return real(model_id, revision, dest)
    finally:
        os.environ["HF_HUB_OFFLINE"] = "1"


def test_sglang_0_5_23s_bench_serving_alias_is_read_through_to_its_module(monkeypatch):
    """sglang 0.5.23's sglang/bench_serving.py is a deprecated alias (``from sglang.benchmark.serving import *``,
    lines 1-22) whose flags live in sglang/benchmark/serving.py ("random-ids" at :2337, --output-details :2492,
    --flush-cache :2697, --warmup-requests :2708, read in the wheel): reading the alias alone found none of them, so a
    0.5.23 worker was never offered SGLang runs. Both files are read from the wheel here."""
    import zipfile

    from compat.fetch import default_wheel_dir

    wheel = next(iter(sorted(default_wheel_dir().glob("sglang-0.5.23-*.whl"))), None)
    if wheel is None:
        pytest.skip("sglang 0.5.23 wheel not downloaded (scripts/install)")
    with zipfile.ZipFile(wheel) as z:
        files = {m: z.read(m.replace(".", "/") + ".py").decode() for m in (sglang.BENCH_MODULE, sglang.BENCH_IMPL_MODULE)}
    monkeypatch.setattr(sglang, "module_source", lambda module: files.get(module, ""))
    assert sglang.bench_flags_missing(files[sglang.BENCH_MODULE]) == [
        "random-ids", "--warmup-requests", "--output-details", "--flush-cache"]
    assert sglang.bench_flags_missing(sglang.bench_source()) == []


def test_a_bench_client_without_random_ids_warmups_or_details_is_not_offered():
    """sglang 0.4.3.post4's bench_serving.py:1391-1394 offers ``choices=["sharegpt", "random",
    "generated-shared-prefix"]`` (its "random" downloads ShareGPT) and has neither --warmup-requests,
    --output-details nor --flush-cache; 0.5.10.post1's (bench_serving.py:1929-1946, 2061, 2238, 2243) has all four."""
    old = '''parser.add_argument(
        "--dataset-name",
        type=str,
        default="sharegpt",
        choices=["sharegpt", "random", "generated-shared-prefix"],'''
    new = old.replace('"random", ', '"random", "random-ids", ') + '''
    parser.add_argument("--output-details", action="store_true", help="Output details of benchmarking.")
    parser.add_argument(
        "--flush-cache",
        action="store_true",
        help="Flush the cache before running the benchmark",
    )
    parser.add_argument(
        "--warmup-requests",'''
    assert sglang.bench_flags_missing(old) == ["random-ids", "--warmup-requests", "--output-details", "--flush-cache"]
    assert sglang.bench_flags_missing(new) == []
    from importlib import metadata

    try:
        metadata.version("sglang")
    except metadata.PackageNotFoundError:
        assert sglang.module_source(sglang.BENCH_MODULE) == ""
        assert "sglang" not in capabilities.installed_runtimes()


def test_sglangs_acceptance_is_the_running_ratio_after_the_last_repeat():
    """SGLang exposes only the running ratio since start (scheduler.py:3082-3084): the last repeat's reading covers
    every request, the mean of the readings would weigh the early ones several times."""
    from validator.bench import _sglang_acceptance

    phase = {"repeats": [{"bench": {"accept_length": 2.0}}, {"bench": {"accept_length": 2.6}},
                         {"bench": {"accept_length": 2.8}}]}
    assert _sglang_acceptance(phase)["mean_acceptance_length"] == 2.8
    assert _sglang_acceptance({"repeats": []})["mean_acceptance_length"] is None


# sglang 0.5.8.post1 bench_serving.py:1494-1497 and 0.5.10.post1 benchmark/datasets/random.py:151-154, verbatim
SAMPLER_0_5_8 = '''            input_content = [
                (offsets[i] + i + j) % tokenizer.vocab_size
                for j in range(input_lens[i])
            ]'''
SAMPLER_0_5_10 = '''            input_content = [
                int((offsets[i] + i + j) % tokenizer.vocab_size)
                for j in range(input_lens[i])
            ]'''


def test_prompts_go_as_token_ids_only_where_the_sampler_makes_python_ints():
    """Before 0.5.9 the random-ids sampler keeps numpy's int64, which json.dumps (aiohttp's request body) refuses:
    with --tokenize-prompt every request, the warm-up first, would fail. numpy here shows the refusal."""
    import numpy as np

    offsets = np.random.randint(0, 10, size=1)
    with pytest.raises(TypeError, match="int64"):
        json.dumps({"input_ids": [(offsets[0] + 0 + j) % 10 for j in range(2)]})
    assert not sglang.sends_prompt_ids([SAMPLER_0_5_8])
    assert sglang.sends_prompt_ids(["", SAMPLER_0_5_10])


def test_the_bench_client_reads_only_the_local_tokenizer_and_sends_ids_when_it_can():
    """--model is the tokenizer directory: bench_serving's check_chat_template(args.model) (0.5.10.post1
    bench_serving.py:1813) would otherwise fetch a Hub id with trust_remote_code=True."""
    profile = {"input_len": 1000, "output_len": 24, "num_prompts": 16, "concurrency": 4, "seed": 0, "warmups": 4}
    args = sglang.bench_args("/w/tok", profile, prompt_ids=True)
    flag = {a: args[i + 1] for i, a in enumerate(args[:-1]) if a.startswith("--")}
    assert flag["--model"] == flag["--tokenizer"] == "/w/tok"
    assert (flag["--backend"], flag["--dataset-name"], flag["--random-range-ratio"]) == ("sglang", "random-ids", "1.0")
    assert (flag["--random-input-len"], flag["--random-output-len"], flag["--warmup-requests"]) == ("1000", "24", "4")
    assert "--tokenize-prompt" in args and "--disable-ignore-eos" not in args
    # the radix cache is emptied after the warm-ups (which prefilled the first prompt) and before the measured
    # requests: sglang 0.5.10.post1 bench_serving.py:1284-1286 posts /flush_cache when --flush-cache is given
    assert "--flush-cache" in args
    assert "--tokenize-prompt" not in sglang.bench_args("/w/tok", profile, prompt_ids=False)


def test_the_request_limit_is_sglangs_own():
    """By hand from sglang 0.5.10.post1: refused when input + reserved + output >= context_len
    (tokenizer_manager.py:813-815), reserved = max(topk x steps, draft tokens) for EAGLE (:243-251); output cut
    to max_req_len - input - 1 with max_req_len = min(context_len, pool) - 1 (tp_worker.py:301-304,
    scheduler.py:1612-1620); the pool is the smaller of the full and SWA pools (model_runner.py:1879-1884)."""
    plan = {"context_length": 8192, "max_total_num_tokens": 500000}
    assert sglang.request_token_limit(plan)[0] == 8190  # cut, not refused: 8191 - input - 1 output tokens
    eagle = {**plan, "speculative": {"algorithm": "EAGLE", "eagle_topk": 4, "num_steps": 3, "num_draft_tokens": 8}}
    assert sglang.request_token_limit(eagle)[0] == 8192 - 1 - 12
    chain = {**plan, "speculative": {"algorithm": "EAGLE3", "eagle_topk": 1, "num_steps": 3, "num_draft_tokens": 4}}
    assert sglang.request_token_limit(chain)[0] == 8192 - 1 - 4
    ngram = {**plan, "speculative": {"algorithm": "NGRAM", "eagle_topk": None, "num_steps": None,
                                     "num_draft_tokens": 8}}
    assert sglang.request_token_limit(ngram)[0] == 8190
    tokens, why = sglang.request_token_limit({"context_length": 8192, "max_total_num_tokens": 6000})
    assert tokens == 5998 and "pool of 6000" in why
    assert sglang.request_token_limit({**plan, "swa_max_total_num_tokens": 4000})[0] == 3998


def test_an_sglang_profile_fits_the_servers_request_limit_and_pool():
    """--context-length 8192: the field guide's 32768-token requests would each be refused; the profile takes
    8192 - 2 tokens, 256 of them output. The concurrency is what the predicted pool holds of such requests."""
    cfg = build_configuration({"model": "Qwen/Qwen3-8B", "runtime": "sglang", "gpu": "H100",
                               "context_length": "8192"})
    prof = cfg["profile"]
    assert (prof["input_len"], prof["output_len"]) == (8190 - 256, 256)
    assert any("scaled down to 8190" in a and "--context-length 8192" in a for a in cfg["adjustments"])
    # 4x L4, QwQ-32B: sgl-011's server logged a pool of 46611 tokens; one 32768-token request fits, two do not
    cfg = build_configuration({"model": "Qwen/QwQ-32B", "runtime": "sglang", "gpu": "L4", "tp_size": "4",
                               "sglang_version": "0.4.3.post4"})
    prof = cfg["profile"]
    assert prof["input_len"] + prof["output_len"] == 32768 and prof["concurrency"] == 1
    assert any("holds 1 requests of 32768 tokens" in a for a in cfg["adjustments"])


def test_a_repeat_with_a_refused_or_cut_request_is_not_a_measurement():
    """sglang.bench_serving exits 0 with a result line when requests fail after a good warm-up (its warm-up asks at
    most 32 tokens, bench_serving.py:1256, so a refusal of the longer requests passes it). The refusal's text is
    SGLang's (tokenizer_manager.py:828-832) as bench_serving records a non-200 answer (reason + ": " + body,
    :687-689)."""
    refusal = ('Bad Request: {"object":"error","message":"Requested token count exceeds the model\'s maximum context '
               'length of 32768 tokens. You requested a total of 32768 tokens: 32512 tokens from the input messages '
               'and 256 tokens for the completion."}')
    line = {"completed": 0, "errors": [refusal, refusal], "output_lens": [0, 0]}
    assert sglang.bench_failure(line, 256).startswith("2 of 2 requests failed; the first: Bad Request:")
    cut = {"completed": 2, "errors": ["", ""], "output_lens": [256, 250]}
    assert "1 of 2 requests stopped short of 256 output tokens (the fewest: 250)" in sglang.bench_failure(cut, 256)
    assert sglang.bench_failure({"completed": 2, "errors": ["", ""], "output_lens": [256, 256]}, 256) == ""


def test_the_servers_reason_for_a_refused_request():
    line = "[2026-01-01 10:00:00] [http_server] Error: The input (40961 tokens) is longer than the model's context length (40960 tokens)."
    assert sglang.last_server_error("INFO: 200 OK\n" + line + "\nINFO: 200 OK\n").startswith("The input (40961 tokens)")
    assert sglang.last_server_error("nothing\n") == ""
    assert "2 of 2 requests got no token" in sglang.bench_failure(
        {"completed": 2, "errors": ["", ""], "ttfts": [0.0, 0.0], "output_lens": [256, 256]}, 256)


@needs_cases
@pytest.mark.django_db(transaction=True)
def test_a_run_whose_requests_sglang_refused_fails_with_sglangs_reason(client, settings, tmp_path, monkeypatch):
    """The bench stand-in answers as sglang.bench_serving does when SGLang refuses each streamed request (exit 0,
    every request a "success" with no token); the server stand-in's log holds SGLang's refusal line."""
    refusal = ("Requested token count exceeds the model's maximum context length of 40960 tokens. You requested a "
               "total of 40960 tokens: 40704 tokens from the input messages and 256 tokens for the completion.")
    run = _run_through_the_site(client, settings, tmp_path, monkeypatch, {
        "model": "Qwen/QwQ-32B", "runtime": "sglang", "gpu": "L4", "tp_size": "4", "sglang_version": "0.4.3.post4"},
        bench_extra=("--fake-refused",), log_extra=f"[2026-01-01 10:00:00] [http_server] Error: {refusal}\n",
        status="failed")
    assert "6 of 6 requests got no token" in run.error and refusal in run.error


def _line(tags: str, message: str) -> str:
    """A scheduler's log line as sglang 0.5.10.post1 writes it (utils/common.py:1137, prefix scheduler.py:3535-3547)."""
    return f"[2026-01-01 10:00:00 {tags}] {message}"


def test_other_pipeline_stages_and_replicas_are_not_rank_zero():
    """Messages as model_runner.py:1247-1252, memory_pool.py:696 and model_runner_kv_cache_mixin.py:906 write them.
    Two plain DP replicas (--dp-size 2 --tp-size 2) both have a TP0; the second replica logs first here."""
    load = "Load weight end. elapsed=20.00 s, type=Qwen3ForCausalLM, avail mem={} GB, mem usage={} GB."
    kv = "KV Cache is allocated. #tokens: {}, K size: 5.00 GB, V size: 5.00 GB"
    log = "\n".join([
        _line("DP1 TP0", load.format("61.00", "15.00")), _line("DP0 TP0", load.format("60.00", "15.00")),
        _line("DP1 TP0", kv.format(100001)), _line("DP0 TP0", kv.format(100000)),
        _line("DP0 TP1", kv.format(100000)), _line("DP1 TP1", kv.format(100001)),
        _line("DP1 TP0", "Memory pool end. avail mem=11.00 GB"), _line("DP0 TP0", "Memory pool end. avail mem=10.00 GB")])
    p = sglang.parse_startup_log(log)
    assert (p["avail_after_load_gib"], p["kv_tokens"], p["avail_after_pool_gib"]) == (60.0, 100000, 10.0)
    assert "swa_kv_tokens" not in p and "draft_avail_after_pool_gib" not in p
    assert sorted(p["ranks"]) == [0, 1] and p["other_ranks"]["DP1 TP0"]["kv_tokens"] == 100001
    # --pp-size 2: the second stage holds other layers
    log = "\n".join([_line("PP1 TP0", load.format("70.00", "9.00")), _line("PP0 TP0", load.format("71.00", "8.00"))])
    p = sglang.parse_startup_log(log)
    assert p["weights_gib"] == 8.0 and p["other_ranks"]["PP1 TP0"]["weights_gib"] == 9.0
    # --enable-dp-attention --dp-size 2 --tp-size 2: one TP group, each TP rank once
    log = "\n".join([_line("DP1 TP1", kv.format(100001)), _line("DP0 TP0", kv.format(100000))])
    p = sglang.parse_startup_log(log)
    assert p["kv_tokens"] == 100000 and p["ranks"][1]["kv_tokens"] == 100001 and p["other_ranks"] == {}


def test_a_worker_with_another_covered_release_runs_that_releases_command():
    """Asked for 0.5.10.post1, run on a worker with 0.4.10.post2: the command and the profile become the
    calculator's for 0.4.10.post2, so that the server runs what the worker's prediction (for 0.4.10.post2)
    describes; the two releases' plans differ (their mem_fraction_static defaults: a GPU-memory table in 0.4.10,
    the reserved-memory formula in 0.5.x)."""
    from validator.config import predict_sglang, sglang_for_release

    cfg = build_configuration({"model": "Qwen/Qwen3-8B", "runtime": "sglang", "gpu": "H100",
                               "sglang_version": "0.5.10.post1"})
    same, note = sglang_for_release(cfg, "0.5.10.post1")
    assert same is cfg and note == ""
    other, note = sglang_for_release(cfg, "0.4.10.post2")
    assert other["sglang"]["release"] == "0.4.10.post2" and "sglang 0.4.10.post2" in note
    predicted, why = predict_sglang(other, "0.4.10.post2")
    assert why == ""
    command = other["sglang"]["phases"][0]["command"]
    mfs = float(command[command.index("--mem-fraction-static") + 1])
    assert mfs == pytest.approx(predicted["baseline"]["memory"]["mem_fraction_static"], abs=1e-4)
    asked = cfg["sglang"]["phases"][0]["command"]
    assert asked[asked.index("--mem-fraction-static") + 1] != command[command.index("--mem-fraction-static") + 1]


def test_an_sglang_server_runs_on_the_gpus_the_worker_was_matched_on():
    """A host with an H100 at NVML index 0 and four L4s: a 2x L4 run gets the first two L4s by PCI bus order."""
    hw = {"platform": "cuda", "devices": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 1},
                                          *({"index": i, "name": "NVIDIA L4", "memory_total_bytes": 1} for i in (1, 2, 3, 4))]}
    assert capabilities.visible_devices_env(hw, "L4", 2, {}) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                                                                  "CUDA_VISIBLE_DEVICES": "1,2"}
    assert capabilities.visible_devices_env(hw, "H100", 1, {}) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID",
                                                                    "CUDA_VISIBLE_DEVICES": "0"}
    assert capabilities.visible_devices_env(hw, "L4", 5, {}) == {}  # not enough: left to the operator
    assert capabilities.visible_devices_env(hw, "L4", 2, {"CUDA_VISIBLE_DEVICES": "3,4"}) == {}
    assert capabilities.visible_devices_env({"platform": "cpu"}, "L4", 1, {}) == {}
