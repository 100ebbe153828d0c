"""A run records the host's load, a CPU run on an overloaded host does not install its calibration (the report says
why; ``manage.py calibrations --restore`` installs it), and the stop rule's widths are labelled as what they are,
not as the verdict's interval.

Hand-computed figures: a load average of 8.5 on 2 CPUs is 4.25 per CPU (above the 1.5 limit); 0.5 on 2 is 0.25.
Eight pairs whose output tok/s log-ratios are 0.2 x 4 and 0.0 x 4: mean 0.1, sd sqrt(8 x 0.01 / 7) = 0.10690;
t(0.975, 7) = 2.36462, chi2(0.05, 7) = 2.16735 (tables); the stop rule's pessimistic half-width is
t x sd x sqrt(7 / 2.16735) / sqrt(8) = 0.16062, exp(0.16062) - 1 = 17.4 %, where the t interval with the observed
spread is 9.3 % wide each side."""
from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import pytest

from validator import calibration, report, runner, stats


# -- the host's load -------------------------------------------------------------------------------------------------
def test_a_cpu_run_on_a_host_at_load_8_5_on_2_cpus_is_overloaded():
    load = runner.host_load([8.5, 8.4, 8.0], [9.1, 8.6, 8.1], "cpu", cpu_count=2)
    assert load["per_cpu_before"] == 4.25 and load["limit"] == 1.5 and load["overloaded"] is True
    assert load["before"] == [8.5, 8.4, 8.0] and load["after"] == [9.1, 8.6, 8.1] and load["cpu_count"] == 2
    assert "8.50 before the run, 9.10 after it" in load["text"] and "on 2 CPUs: 4.25 per CPU" in load["text"]
    assert "overloaded" in load["text"]


def test_an_idle_host_a_gpu_run_and_no_load_average():
    idle = runner.host_load([0.5, 0.4, 0.3], [2.9, 1.2, 0.5], "cpu", cpu_count=2)
    assert idle["per_cpu_before"] == 0.25 and idle["overloaded"] is False and "not overloaded" in idle["text"]
    # the figure after the run holds the run's own servers: 2.9 / 2 = 1.45 per CPU, reported but not judged
    assert "2.90 after it (which includes the run's own servers)" in idle["text"]
    gpu = runner.host_load([8.5, 8.4, 8.0], None, "cuda", cpu_count=2)
    assert gpu["overloaded"] is None and "not judged" in gpu["text"]
    none = runner.host_load(None, None, "cpu", cpu_count=2)
    assert none["overloaded"] is None and "not recorded" in none["text"]


def test_other_work_during_the_run_overloads_the_host_above_a_quarter_of_its_cpu_time():
    # 100 s of run on 2 CPUs = 200 CPU-seconds; other work took 60 of them: 30 % (> 25 %), 40 of them: 20 %
    busy = {"wall_s": 100.0, "host_busy_s": 250.0, "run_cpu_s": 190.0, "other_cpu_s": 60.0, "other_share": 0.3}
    load = runner.host_load([0.5, 0.4, 0.3], None, "cpu", cpu_count=2, during=busy)
    assert load["overloaded"] is True and load["other_share_limit"] == 0.25 and load["during"] == busy
    assert "other work used 60.0 s of CPU time during the run's 100.0 s (30% of the host)" in load["text"]
    assert "(30% of the host) — other work took 30% of the host during it, above 25%: the host was overloaded" in \
        load["text"] and "above 1.5" not in load["text"]
    calm = dict(busy, other_cpu_s=40.0, other_share=0.2)
    ok = runner.host_load([0.5, 0.4, 0.3], None, "cpu", cpu_count=2, during=calm)
    assert ok["overloaded"] is False and "at most 1.5 and 25%: not overloaded" in ok["text"]
    both = runner.host_load([8.5, 8.4, 8.0], None, "cpu", cpu_count=2, during=busy)
    assert "— above 1.5, and other work took 30% of the host during it" in both["text"]
    # a GPU run reports it, unjudged
    assert runner.host_load([0.5, 0.4, 0.3], None, "cuda", cpu_count=2, during=busy)["overloaded"] is None


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_cpu_watch_counts_the_tracked_groups_as_the_run_and_the_rest_as_other_work():
    import multiprocessing
    import psutil

    ctx = multiprocessing.get_context("fork")
    watch = runner.CpuWatch(interval_s=0.1).start()
    seen = []
    track = watch.track(lambda role, phase, pgid: seen.append((role, phase, pgid)))
    mine = ctx.Process(target=lambda: (os.setpgid(0, 0), _spin(0.6)))
    other = ctx.Process(target=lambda: (os.setpgid(0, 0), _spin(0.6)))
    mine.start()
    time.sleep(0.05)
    track("server", "baseline", mine.pid)  # its own process group: pgid == pid
    other.start()
    own_cpu = {}
    while mine.is_alive():
        try:
            t = psutil.Process(mine.pid).cpu_times()
            own_cpu["last"] = t.user + t.system
        except psutil.Error:
            pass
        time.sleep(0.05)
    mine.join(), other.join()
    track("server", "baseline", None)
    got = watch.stop()
    assert seen == [("server", "baseline", mine.pid), ("server", "baseline", None)]
    # the tracked child spun 0.6 s of CPU: the watch counted it as the run's (its last read at most 0.1 s early)
    assert got["run_cpu_s"] >= own_cpu["last"] - 0.15 >= 0.35
    # the untracked one is other work (and so is anything else the host ran meanwhile: at least its 0.6 s)
    assert got["other_cpu_s"] >= 0.6 - 0.15
    assert got["other_share"] == pytest.approx(got["other_cpu_s"] / (got["wall_s"] * os.cpu_count()), abs=0.02)
    assert watch._thread is not None and not watch._thread.is_alive()


def test_load_sample_reads_os_getloadavg(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (8.523, 8.4, 8.0))
    assert runner.load_sample() == [8.52, 8.4, 8.0]

    def no_load():
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", no_load)
    assert runner.load_sample() is None


def test_only_an_overloaded_hosts_calibration_is_held():
    cal = {"efficiency": {"bandwidth": 0.1}, "gpu": "CPU"}
    assert calibration.hold_if_overloaded(cal, runner.host_load([0.5, 0.5, 0.5], None, "cpu", 2)) is cal
    assert calibration.hold_if_overloaded(cal, runner.host_load([8.5, 8.5, 8.5], None, "cuda", 2)) is cal
    assert calibration.hold_if_overloaded({"skipped": "x"}, runner.host_load([8.5, 8, 8], None, "cpu", 2)) == \
        {"skipped": "x"}
    held = calibration.hold_if_overloaded(cal, runner.host_load([8.5, 8.4, 8.0], None, "cpu", 2))
    assert held["dropped"]["automatic"] is True and held["dropped"]["by"] == "the validator"
    assert "4.25 per CPU" in held["dropped"]["reason"] and "dropped" not in cal


# -- a whole run through the worker (stand-ins for vLLM's server and benchmark) --------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("load1, installed", [(8.5, False), (0.5, True)])
def test_a_loaded_host_does_not_install_its_calibration_an_idle_one_does(settings, tmp_path, client, monkeypatch,
                                                                         no_calibration, worker_vllm_0_32,
                                                                         load1, installed):
    from django.core.management import call_command

    from validator.models import ValidationRun

    here = Path(__file__).parent
    settings.VAR_DIR = tmp_path
    settings.VALIDATOR_SERVER_COMMAND = [sys.executable, str(here / "fake_vllm_server.py"), "--fake-mode", "serve",
                                         "--fake-itl-ms", "2.5"]  # vLLM's own ITL: the stand-in's streams are bursts
    settings.VALIDATOR_BENCH_COMMAND = [sys.executable, str(here / "fake_vllm_bench.py")]
    monkeypatch.setattr(os, "getloadavg", lambda: (load1, load1, load1))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    # judged here on the load before the run: whatever else this host runs during the test is not the case's
    monkeypatch.setattr(runner, "OVERLOAD_OTHER_SHARE", 1.01)
    run = ValidationRun.submit({"model": "tiny-random/llama", "gpu": "CPU"})
    profile = dict(run.configuration["profile"], output_len=8, num_prompts=4, repeats=3, max_repeats=3, warmups=1,
                   concurrency=2, input_len=40)
    ValidationRun.objects.filter(pk=run.pk).update(configuration={**run.configuration, "profile": profile})
    call_command("db_worker", batch=True, interval=0, startup_delay=False, verbosity=0)
    run.refresh_from_db()
    assert run.status == "done", run.error
    load = run.measured["host_load"]
    assert load["before"] == [load1] * 3 and load["cpu_count"] == 2
    assert load["per_cpu_before"] == load1 / 2 and load["overloaded"] is (not installed)
    assert load["during"]["wall_s"] > 0 and "during the run" in load["text"]  # the CPU watch ran with it
    c = run.measured["calibration"]
    assert "efficiency" in c and c["measured_tpot_ms"] == pytest.approx(2.5), c  # the stand-in's ITL
    applied = calibration.apply_latest(force=True)
    short = str(run.pk)[:8]
    assert any(a.startswith(f"calibrated from run {short}") for a in applied) is installed

    s = report.summary(run)
    text = report.format_text(s)
    assert f"{load1:.2f} before the run" in text and "on 2 CPUs" in text
    html = " ".join(client.get(run.get_absolute_url()).content.decode().split())
    assert 'id="host-load"' in html and f"{load1:.2f} before the run" in html
    if installed:
        assert "NOT INSTALLED" not in text and 'id="calibration-held"' not in html
        return
    assert f"{load1 / 2:.2f} per CPU before the run" in c["dropped"]["reason"]
    assert "— above 1.5: the host was overloaded" in c["dropped"]["reason"]
    assert "NOT INSTALLED" in text and f"manage.py calibrations --restore {short}" in text
    assert 'id="calibration-held"' in html and f"manage.py calibrations --restore {short}" in html
    assert "Overloaded host:" in html
    # the user wants it anyway: restore installs it
    call_command("calibrations", "--restore", short, stdout=open(os.devnull, "w"))
    applied = calibration.apply_latest(force=True)
    assert any(a.startswith(f"calibrated from run {short}") for a in applied)


# -- one interval, one width ------------------------------------------------------------------------------------------
def _pairs(tok_logs: list[float]) -> list[tuple[dict, dict]]:
    """Pairs whose output tok/s ratios are exp(log) and whose latency guards do not change."""
    out = []
    for x in tok_logs:
        b = {"output_throughput": 100.0, "median_ttft_ms": 50.0, "p95_e2el_ms": 400.0}
        s = {**b, "output_throughput": 100.0 * math.exp(x)}
        out.append((b, s))
    return out


def test_the_stop_rules_width_is_labelled_as_its_own_not_the_verdicts():
    pairs = _pairs([0.2, 0.0] * 4)
    rule = stats.stop_rule(pairs, 8, 12)
    assert rule["stop"] is False
    assert rule["why"] == stats.STILL_WIDE + "output tok/s ±17.4 % (tight: at most ±2.5 %)"
    assert "pessimistic" in rule["why"] and "bootstrap intervals, which decide, are in the table" in rule["why"]
    # the verdict's interval is another quantity (the paired bootstrap of the same mean, +10.5 %: exp(0.1) - 1)
    tok = stats.paired_change([b["output_throughput"] for b, _ in pairs], [s["output_throughput"] for _, s in pairs])
    assert tok["change_pct"] == pytest.approx(100 * math.expm1(0.1))
    assert tok["ci_high_pct"] - tok["ci_low_pct"] < 2 * 17.4


def test_a_stored_runs_old_still_wide_text_is_labelled_in_its_report():
    """Run 45f68447 said "still wide: output tok/s ±63.4 %" above a table whose tok/s interval was -12.2 to
    +33.8 %: its report now says which width that was."""
    old = {"pairs": 8, "why": "the run's time for more pairs would end during another pair (14 s each); still wide: "
                              "output tok/s ±63.4 %, TTFT p50 ±460.5 %"}
    got = report.pairs_stop(old)
    assert got["why"] == ("the run's time for more pairs would end during another pair (14 s each); "
                          + stats.STILL_WIDE + "output tok/s ±63.4 %, TTFT p50 ±460.5 %")
    assert report.pairs_stop(got) == got and report.pairs_stop(None) is None
