"""The queue's side of a validation run: one django-tasks ``@task`` taking the run id only.

The worker is django-tasks-db's ``manage.py db_worker``. django-tasks-db never touches a RUNNING row
after ``claim`` (no heartbeat), so our ``ValidationRun`` carries ``heartbeat_at`` and
``sweep_stale_runs()`` — run by every task at its start and by ``manage.py sweep_validation_runs`` —
recovers runs whose worker stopped responding: it kills the run's recorded process groups (vLLM's server
and the benchmark) when they are on this host, removes ``VAR_DIR/runs/<id>``, keeps the benchmark repeats
that had finished (each is saved as it ends), and re-queues the run once if nothing had been started yet, else
fails it with the reason.
"""
from __future__ import annotations

import logging
import shutil
import socket
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, TypeVar

from django.conf import settings
from django.db import OperationalError, close_old_connections
from django.utils import timezone
from django_tasks import task

from . import runner
from .models import ValidationRun

log = logging.getLogger(__name__)
T = TypeVar("T")

STALE_REASON = "worker stopped responding (no heartbeat for {s:.0f} s)"
MAX_REQUEUES = 1  # a crashed run that had started nothing is re-queued this many times, then failed


def setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def retry_locked(fn: Callable[[], T], attempts: int | None = None, delay_s: float = 0.5) -> T:
    """Call ``fn``; on "database is locked" / "table is locked" retry with a growing delay.

    SQLite already waits ``OPTIONS.timeout`` seconds for a lock; this covers locks that outlast it
    and SQLite's shared-cache ``SQLITE_LOCKED``, which does not wait at all. Other errors propagate."""
    attempts = attempts or int(setting("VALIDATOR_DB_RETRIES", 20))
    for i in range(attempts):
        try:
            return fn()
        except OperationalError as e:
            if "locked" not in str(e) or i == attempts - 1:
                raise
            close_old_connections()
            time.sleep(min(delay_s * (1.5 ** i), 5.0))
    raise AssertionError("unreachable")


def sweep_stale_runs(older_than_s: float | None = None) -> list[str]:
    """Recover STARTING/RUNNING runs whose heartbeat is older than ``older_than_s`` (default
    ``VALIDATOR_STALE_AFTER_S`` = 120 s); see ``recover_crashed_run``. Also enqueues runs that were
    saved but never enqueued. Returns the ids of the runs it failed or re-queued."""
    older_than_s = float(older_than_s if older_than_s is not None else setting("VALIDATOR_STALE_AFTER_S", 120))
    swept = []
    for run in ValidationRun.objects.stale(older_than_s):
        if recover_crashed_run(run, STALE_REASON.format(s=older_than_s)):
            swept.append(str(run.pk))
    reap_orphaned_groups()
    # A run saved but never enqueued (the process died between commit and enqueue): enqueue it now.
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    for run in ValidationRun.objects.filter(status=ValidationRun.Status.QUEUED, task_result_id="", created__lt=cutoff):
        result = run_validation.enqueue(str(run.pk))
        ValidationRun.objects.filter(pk=run.pk, task_result_id="").update(task_result_id=str(result.id))
        log.warning("validation run %s was never enqueued; enqueued it now", run.pk)
    return swept


def reap_orphaned_groups(within_s: float = 86400.0) -> int:
    """Kill the process groups on this host of runs that another host's sweep failed (in the last
    ``within_s`` seconds) while their groups were still recorded as running; mark them stopped.
    Returns how many groups it killed."""
    host = socket.gethostname()
    since = timezone.now() - timedelta(seconds=within_s)
    killed = 0
    for run in ValidationRun.objects.filter(status=ValidationRun.Status.FAILED, finished_at__gte=since,
                                            worker_host=host).exclude(process_groups=[]):
        mine = [g for g in run.process_groups if g.get("host") == host and not g.get("stopped")]
        if not mine:
            continue
        for g in mine:
            result = runner.kill_recorded_group(g, grace_s=5.0)
            killed += result in ("terminated", "killed")
            log.warning("validation run %s: orphaned %s process group %s: %s", run.pk, g.get("role"), g["pgid"], result)
        ValidationRun.objects.filter(pk=run.pk).update(
            process_groups=[{**g, "stopped": g.get("stopped") or g.get("host") == host} for g in run.process_groups])
        shutil.rmtree(Path(settings.VAR_DIR) / "runs" / str(run.pk), ignore_errors=True)
    return killed


def _recorded_groups(run: ValidationRun) -> list[dict[str, Any]]:
    """The run's child process groups not known to be stopped (``runner.group_record`` dicts), plus the
    server group of a row written before groups were recorded (``server_pgid`` only)."""
    groups = [g for g in run.process_groups or [] if not g.get("stopped")]
    if run.server_pgid and not any(g["pgid"] == run.server_pgid for g in groups):
        groups.append({"role": "server", "phase": "", "pgid": run.server_pgid, "host": run.worker_host,
                       "leader_start": None})
    return groups


def kept_repeats(run: ValidationRun) -> str:
    """What a crashed run had measured and saved (``validator.bench.run_sequence`` saves each benchmark
    repeat as it finishes), as a phrase: ``"3 of 16 benchmark repeats (2 baseline, 1 speculative; 1
    complete A/B pair)"``; ``""`` when no repeat had finished."""
    phases = (run.measured or {}).get("phases", {})
    counts = {name: len(ph.get("repeats") or []) for name, ph in phases.items()}
    total = sum(counts.values())
    if not total:
        return ""
    pairs = {name: {r.get("pair") for r in ph.get("repeats") or []} for name, ph in phases.items()}
    complete = len(set.intersection(*pairs.values())) if len(pairs) > 1 else 0
    planned = (run.configuration or {}).get("profile", {}).get("repeats")
    of = f" of {2 * planned}" if planned else ""
    per_phase = ", ".join(f"{n} {name}" for name, n in counts.items())
    return (f"{total}{of} benchmark repeat{'s' if total > 1 else ''} ({per_phase}; "
            f"{complete} complete A/B pair{'' if complete == 1 else 's'})")


def recover_crashed_run(run: ValidationRun, reason: str) -> str | None:
    """One stale run (its worker died, or stopped heartbeating): claim it with a conditional UPDATE (so
    a worker that is alive after all, or a second sweeper, cannot both win), then

    - kill its recorded process groups on this host (server and benchmark; ``runner.kill_recorded_group``
      leaves a pgid that now belongs to another process alone),
    - remove ``VAR_DIR/runs/<id>`` when the run was on this host,
    - mark the queue's task result failed,
    - nothing started yet (no child process recorded, no phase finished) and not re-queued before:
      re-queue it as a new ``attempt`` (the old worker's writes are then refused) and enqueue it;
      otherwise fail it with ``reason``, keeping the benchmark repeats that finished (saved as each
      ended; ``kept_repeats`` names them in the error).

    Returns ``"requeued"``, ``"failed"``, or None when the run was not claimed."""
    from django_tasks_db.models import DBTaskResult

    host = socket.gethostname()
    groups = _recorded_groups(run)
    kept = kept_repeats(run)
    started_something = bool(run.process_groups or run.server_pgid or kept)
    old_task, worker_host = run.task_result_id, run.worker_host
    if not started_something and run.attempt < MAX_REQUEUES:
        if not run.requeue(reason, seen_heartbeat=run.heartbeat_at):
            return None
        outcome = "requeued"
    else:
        error = f"{reason}; the run was marked failed"
        if kept:
            error += f". Kept what finished: {kept}"
        elif not started_something:
            error += f" (it had already been re-queued {run.attempt} time(s) after a crash)"
        if not run.fail(error):
            return None
        outcome = "failed"
    for g in groups:
        result = runner.kill_recorded_group(g, grace_s=5.0)
        log.warning("validation run %s: %s process group %s (%s): %s", run.pk, g.get("role"), g["pgid"],
                    g.get("host"), result)
    if outcome == "failed" and run.process_groups:
        # groups on another host stay unstopped: that host's sweep reaps them (reap_orphaned_groups)
        ValidationRun.objects.filter(pk=run.pk).update(
            process_groups=[{**g, "stopped": g.get("stopped") or g.get("host") == host} for g in run.process_groups],
            server_pgid=None)
    if worker_host in ("", host):
        shutil.rmtree(Path(settings.VAR_DIR) / "runs" / str(run.pk), ignore_errors=True)
    if old_task:
        DBTaskResult.objects.filter(pk=old_task, status__in=["RUNNING", "READY"]).update(
            status="FAILED", finished_at=timezone.now(), exception_class_path="validator.tasks.WorkerStopped",
            traceback=reason)
    if outcome == "requeued":
        result = run_validation.enqueue(str(run.pk))
        ValidationRun.objects.filter(pk=run.pk, task_result_id="").update(task_result_id=str(result.id))
    log.warning("validation run %s %s: %s", run.pk, outcome, reason)
    return outcome


class _Reporter:
    """Heartbeat + stage/progress/log tail, written at most every ``VALIDATOR_HEARTBEAT_S`` seconds.
    Raises ``runner.Cancelled`` once the row was made terminal by someone else (cancel, sweep)."""

    def __init__(self, run: ValidationRun):
        self.run = run
        self.every = float(setting("VALIDATOR_HEARTBEAT_S", 2.0))
        self.last = 0.0
        self.status = ValidationRun.Status.STARTING

    def __call__(self, stage: str, progress: float, log_tail: str | None = None, **fields: Any) -> None:
        now = time.monotonic()
        if now - self.last < self.every and not fields:
            return
        self.last = now
        if "benchmarking" in stage or "done" in stage:  # STARTING until the first server answers
            self.status = ValidationRun.Status.RUNNING
        try:
            alive = retry_locked(lambda: self.run.heartbeat(stage=stage, progress=progress, status=self.status,
                                                            log_tail=log_tail, **fields), attempts=3)
        except OperationalError:
            log.warning("validation run %s: heartbeat skipped, database locked", self.run.pk)
            return
        if not alive:
            if not self.run.refresh_fenced():
                raise runner.Cancelled("the sweep re-queued the run (this worker was presumed dead); stopping")
            raise runner.Cancelled(f"the run was {self.run.status} while running: {self.run.error}")


def execute(run: ValidationRun) -> None:
    """Run ``run`` here (the worker's body; also what ``validate --wait --inline`` calls)."""
    hardware = runner.detect_hardware()
    if not run.start(worker_host=socket.gethostname(), hardware=hardware):
        log.info("validation run %s is %s; not started", run.pk, run.status)
        return
    cfg = run.configuration
    if cfg.get("platform") == "cuda" and hardware["platform"] != "cuda":
        run.fail("this run targets a GPU but the worker found none (NVML); start the worker on a GPU machine")
        return
    workdir = Path(settings.VAR_DIR) / "runs" / str(run.pk)
    reporter = _Reporter(run)

    def on_server(pgid: int | None) -> None:
        retry_locked(lambda: run.heartbeat(server_pgid=pgid))

    groups: list[dict[str, Any]] = []

    def on_process(role: str, phase: str, pgid: int | None) -> None:
        """Record each child process group on the row as it starts; mark it stopped once it is."""
        if pgid is not None:
            groups.append(runner.group_record(role, phase, pgid))
        else:
            for g in groups:
                if g["role"] == role and g["phase"] == phase:
                    g["stopped"] = True
        retry_locked(lambda: run.heartbeat(process_groups=[dict(g) for g in groups]))

    def on_phase(measured: dict[str, Any]) -> None:
        """Save the repeats measured so far: a crash after this keeps them."""
        retry_locked(lambda: run.heartbeat(measured=measured))

    options = {
        "wall_clock_s": float(setting("VALIDATOR_RUN_TIMEOUT_S", 900)),
        "startup_timeout_s": float(setting("VALIDATOR_STARTUP_TIMEOUT_S", 300)),
        "bench_timeout_s": float(setting("VALIDATOR_BENCH_TIMEOUT_S", 600)),
        "server_command": setting("VALIDATOR_SERVER_COMMAND", None),
        "bench_command": setting("VALIDATOR_BENCH_COMMAND", None),
        "stop_grace_s": float(setting("VALIDATOR_STOP_GRACE_S", 10)),
        "phase_budget_s": 45.0 if cfg.get("platform") == "cpu" else 300.0,
        "on_server": on_server,
        "on_process": on_process,
        "on_phase": on_phase,
    }
    from .bench import run_llamacpp_sequence, run_sequence, run_sglang_sequence

    try:
        if cfg.get("runtime") == "llama.cpp":
            options["llamacpp_command"] = setting("VALIDATOR_LLAMACPP_COMMAND", None)
            measured = run_llamacpp_sequence(cfg, workdir, reporter, hardware, options)
            log_tail = runner.tail(workdir / "baseline-server.log")
        elif cfg.get("runtime") == "sglang":
            options["sglang_command"] = setting("VALIDATOR_SGLANG_COMMAND", None)
            options["sglang_bench_command"] = setting("VALIDATOR_SGLANG_BENCH_COMMAND", None)
            measured = run_sglang_sequence(cfg, workdir, reporter, hardware, options)
            last = cfg["sglang"]["phases"][-1]["name"]
            log_tail = runner.tail(workdir / f"{last}-server.log")
        else:
            measured = run_sequence(cfg, run.prediction or {}, workdir, reporter, hardware, options)
            log_tail = runner.tail(workdir / "speculative-server.log")
        retry_locked(lambda: run.finish(measured, log_tail=log_tail))
    except runner.RunnerError as e:
        retry_locked(lambda: run.fail(str(e), measured=e.measured, log_tail=e.log_tail or None))
    except Exception as e:  # noqa: BLE001 - anything else still ends the run in a clear state
        log.exception("validation run %s crashed", run.pk)
        retry_locked(lambda: run.fail(f"internal error in the worker: {type(e).__name__}: {e}"))
        raise
    except BaseException as e:  # SystemExit/KeyboardInterrupt: db_worker got a second SIGTERM/SIGINT
        retry_locked(lambda: run.fail(f"the worker was stopped during the run ({type(e).__name__}); "
                                      "the vLLM process group was killed"))
        raise
    finally:
        # logs live on in the run's log_tail; set VALIDATOR_KEEP_WORKDIR to keep the files. A worker whose
        # run was re-queued meanwhile leaves the directory to the new attempt.
        if not setting("VALIDATOR_KEEP_WORKDIR", False) and _still_ours(run):
            shutil.rmtree(workdir, ignore_errors=True)


def _still_ours(run: ValidationRun) -> bool:
    try:
        return retry_locked(run.refresh_fenced, attempts=3)
    except OperationalError:
        return True


@task()
def run_validation(run_id: str) -> str:
    """Process one ``ValidationRun`` (by id): sweep stale runs, then baseline + speculation. Returns
    the run's final status."""
    retry_locked(sweep_stale_runs)
    try:
        run = ValidationRun.objects.get(pk=run_id)
    except ValidationRun.DoesNotExist:
        return "missing"
    execute(run)
    run.refresh_from_db()
    return run.status
