"""End to end on this machine's CPU: a logged-in user submits through the web view, the real worker
(django-tasks-db's db_worker) runs vLLM 0.32's CPU build on the built-in tiny Llama — baseline and
ngram speculation side by side, paired and interleaved — and the report holds the measured figures.
Under three minutes on two cores."""
from __future__ import annotations

import json
import time
from functools import partial

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.urls import reverse

from validator import report
from validator.models import ValidationRun

pytest.importorskip("vllm", reason="the worker extra (vLLM's CPU build) is not installed")
run_worker = partial(call_command, "db_worker", batch=True, interval=0, startup_delay=False, verbosity=0)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_cpu_validation_run_from_the_web_view_to_the_report(client):
    from validator import capabilities

    capabilities.record(capabilities.describe("e2e-cpu-worker"))  # this machine: the worker below
    t0 = time.monotonic()
    user = User.objects.create_user("alice")
    user.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
    client.force_login(user)
    r = client.post(reverse("validator:new"), {"model": "tiny-random/llama", "gpu": "CPU",
                                               "max_model_len": "1024", "concurrency": "4"})
    assert r.status_code == 302
    run = ValidationRun.objects.get()

    run_worker()

    run.refresh_from_db()
    assert run.status == ValidationRun.Status.DONE, (run.error, run.log_tail[-3000:])
    assert time.monotonic() - t0 < 180, "the CPU validation must stay under three minutes end to end"
    m = run.measured
    profile = run.configuration["profile"]
    # the profile's pairs, then more while the intervals are wide, within the profile's budget (validator.stats
    # stop_rule, bench_serve_entry.PairSchedule); the run says how many and why
    pairs = m["pairs_stop"]["pairs"]
    assert profile["repeats"] <= pairs <= profile["max_repeats"] and m["pairs_stop"]["why"]
    # interleaved: A B A B ...
    assert m["order"] == ["baseline", "speculative"] * pairs
    base, spec = m["phases"]["baseline"], m["phases"]["speculative"]
    assert "--speculative-config" not in base["argv"] and "--speculative-config" in spec["argv"]
    for phase in (base, spec):
        assert len(phase["repeats"]) == pairs
        agg = phase["aggregate"]
        assert agg["completed"] == run.configuration["profile"]["num_prompts"] and agg["failed"] == 0
        for key in ("p50_ttft_ms", "p95_ttft_ms", "p50_itl_ms", "p95_itl_ms", "p95_e2el_ms", "p50_tpot_ms"):
            assert agg[key] is not None and agg[key] >= 0, key
        assert agg["p95_ttft_ms"] > 0 and agg["output_throughput"] > 0
        # the KV cache alone is 1 GiB of the server's resident memory
        assert phase["peak_memory_bytes"] > 2**30
        # every prompt was new to its server: vLLM's own prefix-cache counters found nothing cached over the measured
        # requests (before, the second repeat's prompts were the first's, and the warm-ups sent a repeat's first ones)
        assert phase["prefix_cache"]["query_tokens"] >= pairs * profile["num_prompts"] * profile["input_len"]
        assert phase["prefix_cache"]["hit_tokens"] == 0
    acc = spec["aggregate"]["spec_decode"]
    assert acc["num_drafts"] > 0 and 0 <= acc["acceptance_rate"] <= 1
    assert acc["mean_acceptance_length"] == pytest.approx(1 + acc["num_accepted_tokens"] / acc["num_drafts"])
    assert len(acc["per_position"]) == run.configuration["spec_config"]["num_speculative_tokens"]
    assert base["aggregate"].get("spec_decode") is None

    # vLLM's logged KV cache size against the tiny config, computed here by hand: CPU block size 128
    # (vllm/platforms/cpu.py), float32 (4 B), K and V, VLLM_CPU_KVCACHE_SPACE=1 GiB.
    hf = run.configuration["engine_input"]["hf_config"]
    head_dim = hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
    per_block = hf["num_hidden_layers"] * 2 * hf["num_key_value_heads"] * head_dim * 4 * 128
    expected_tokens = (2**30 // per_block) * 128
    logged = base["startup"]
    assert logged["kv_cache_tokens"] == pytest.approx(expected_tokens, rel=0.01)
    assert logged["available_kv_cache_gib"] == 1.0 and logged["max_model_len"] == 1024
    assert logged["max_concurrency"] == pytest.approx(expected_tokens / 1024, rel=0.01)
    rows = {row["field"]: row for row in m["comparison"]}
    assert rows["kv_cache_tokens"]["measured"] == logged["kv_cache_tokens"]
    if run.prediction:  # the lead's engine is merged: its prediction must match vLLM's log within 1 %
        assert rows["kv_cache_tokens"]["predicted"] == pytest.approx(logged["kv_cache_tokens"], rel=0.01)
        assert abs(rows["kv_cache_tokens"]["error_pct"]) <= 1.0
    else:
        assert "engine" in run.prediction_error

    v = m["verdict"]
    assert v["verdict"] in ("keep", "disable", "inconclusive") and v["headline"]
    assert v["keep"] == (v["verdict"] == "keep")
    assert bool(v["stop_signs"]) if v["verdict"] == "disable" else v["verdict"] == "inconclusive" or not v["stop_signs"]
    tok = v["differences"]["output_throughput"]
    assert tok["n"] == pairs and tok["ci_low_pct"] <= tok["change_pct"] <= tok["ci_high_pct"]
    assert m["acceptance"]["acceptance_rate"] == acc["acceptance_rate"]

    # the page: polling stopped, the report and chart specs rendered
    status = client.get(reverse("validator:status", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert status.status_code == 286
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'hx-trigger="load delay:500ms' not in page
    assert 'data-field="kv_cache_tokens"' in page and f"<td>{logged['kv_cache_tokens']:,}</td>" in page
    assert page.index('id="verdict"') < page.index('data-field="kv_cache_tokens"')  # the verdict comes first
    assert "Verdict" in page and 'id="chart-spec-latency"' in page and 'id="chart-spec-acceptance"' in page
    s = report.summary(run)
    assert json.loads(json.dumps(s))["phases"]["speculative"]["spec_decode"]["acceptance_rate"] == acc["acceptance_rate"]
    assert "TTFT" in report.format_text(s)
    assert "new to the server it went to" in m["prompts"] and 'id="run-prompts"' in page
