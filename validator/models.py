"""``ValidationRun``: our own row for one validation run, next to the queue's ``DBTaskResult``.

The pattern is NetBox's ``core.Job`` (``netbox/core/models/jobs.py``): the row is saved before the task
is enqueued, so nothing a user submitted is lost; state changes only through methods (``start``,
``heartbeat``, ``set_stage``, ``finish``, ``fail``, ``cancel``), each writing only its fields with
``save(update_fields=...)`` or a conditional ``UPDATE`` where a worker and a sweep could race.

``attempt`` is a fencing token: the sweep re-queues a crashed run by raising it, and every write of the
worker that ran the earlier attempt (heartbeat, finish, fail) is then refused, so a worker that was only
presumed dead stops instead of overwriting the new attempt.
"""
from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models, transaction
from django.urls import reverse
from django.utils import timezone

LOG_TAIL_CHARS = 20_000


class RunLimitReached(Exception):
    """The user already has ``limit`` runs queued or running (``ValidationRun.submit``)."""

    def __init__(self, limit: int):
        super().__init__(f"you already have {limit} validation run(s) queued or running; wait for one to finish")
        self.limit = limit


class ValidationRunQuerySet(models.QuerySet):
    def active(self) -> ValidationRunQuerySet:
        return self.exclude(status__in=ValidationRun.TERMINAL)

    def stale(self, older_than_s: float) -> ValidationRunQuerySet:
        """STARTING/RUNNING runs whose last heartbeat (or start) is older than ``older_than_s`` seconds."""
        cutoff = timezone.now() - timedelta(seconds=older_than_s)
        alive = [ValidationRun.Status.STARTING, ValidationRun.Status.RUNNING]
        return self.filter(status__in=alive).filter(
            models.Q(heartbeat_at__lt=cutoff) | models.Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
        )


class ValidationRun(models.Model):
    """One validation run: configuration, the prediction made at submission, progress and results.

    ``configuration`` (JSON): ``params`` (the calculator permalink's query parameters as submitted),
    ``model_id``, ``revision``, ``engine_input`` (the ``EngineInput`` dict the prediction was made
    from) and ``profile`` (benchmark sizes: input/output tokens, concurrency, prompts, repeats, seed).
    ``prediction``: ``EstimateResult.to_json()`` at submission (``{}`` when the engine could not
    predict; ``prediction_error`` says why). ``measured``: the report written by ``validator.bench``.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        STARTING = "starting", "starting"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    TERMINAL = frozenset({Status.DONE, Status.FAILED, Status.CANCELLED})

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    configuration = models.JSONField(default=dict)
    prediction = models.JSONField(default=dict, blank=True)
    prediction_error = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    stage = models.CharField(max_length=200, blank=True)
    progress = models.FloatField(default=0.0, help_text="0..1")
    created = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker_host = models.CharField(max_length=255, blank=True)
    server_pgid = models.IntegerField(null=True, blank=True, help_text="process group of the vLLM server")
    process_groups = models.JSONField(
        default=list, blank=True,
        help_text="live child process groups: [{role, phase, pgid, host, leader_start}] (runner.group_record)")
    attempt = models.PositiveSmallIntegerField(
        default=0, help_text="times the run was re-queued after its worker crashed (fences the old worker)")
    hardware = models.JSONField(default=dict, blank=True)
    measured = models.JSONField(default=dict, blank=True)
    log_tail = models.TextField(blank=True)
    error = models.TextField(blank=True)
    task_result_id = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="validation_runs"
    )

    objects = ValidationRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="validator_run_status_hb")]

    def __str__(self) -> str:
        return f"{self.model_id} ({self.status}) {self.pk}"

    # -- read accessors -------------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        return self.configuration.get("model_id", "?")

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    def get_absolute_url(self) -> str:
        return reverse("validator:detail", args=[self.pk])

    # -- creation -------------------------------------------------------------------------------------
    @classmethod
    def submit(cls, params: dict[str, Any], user=None, limit: int | None = None) -> ValidationRun:
        """Build the configuration from the calculator's parameters, predict, save, enqueue.

        Raises ``validator.config.ConfigurationError`` (with ``field``) for a request that cannot run, and
        ``RunLimitReached`` when ``limit`` is given and ``user`` already has that many active runs. The
        count and the insert happen in one transaction that first locks the user's row
        (``select_for_update``: PostgreSQL row lock; on SQLite the settings' ``BEGIN IMMEDIATE`` takes the
        database's write lock), so concurrent submissions by one user cannot pass the limit together.
        The row is committed before the task is enqueued (``transaction.on_commit``)."""
        from .config import build_configuration, fit_profile, predict

        configuration = build_configuration(params)
        if configuration.get("runtime") == "llama.cpp":
            # made on the worker: the plan needs the GGUF it writes and the CPU features its llama.cpp build has
            prediction, prediction_error = {}, ""
        elif configuration.get("runtime") == "sglang":
            # for the release asked; the worker predicts again for the SGLang release it has (validator.bench)
            from .config import predict_sglang

            prediction, prediction_error = predict_sglang(configuration)
        else:
            prediction, prediction_error = predict(configuration["engine_input"])
            fit_profile(configuration, prediction)
        owner = user if getattr(user, "is_authenticated", False) else None
        with transaction.atomic():
            if owner is not None and limit is not None:
                get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
                if cls.objects.active().filter(created_by=owner).count() >= limit:
                    raise RunLimitReached(limit)
            run = cls.objects.create(configuration=configuration, prediction=prediction,
                                     prediction_error=prediction_error, created_by=owner)
            run.enqueue()
        return run

    def enqueue(self) -> None:
        """Enqueue the worker task once the row is committed (NetBox ``Job.enqueue`` pattern).

        The row must already be saved. ``task_result_id`` is written by the callback."""
        from .tasks import run_validation

        run_id = str(self.pk)

        def _enqueue() -> None:
            result = run_validation.enqueue(run_id)
            self.task_result_id = str(result.id)
            ValidationRun.objects.filter(pk=run_id).update(task_result_id=self.task_result_id)

        transaction.on_commit(_enqueue)

    # -- transitions ----------------------------------------------------------------------------------
    def start(self, worker_host: str, hardware: dict[str, Any] | None = None) -> bool:
        """QUEUED -> STARTING, atomically. Returns False when the run was not QUEUED (cancelled, or
        already claimed), in which case the caller must not run it."""
        now = timezone.now()
        n = ValidationRun.objects.filter(pk=self.pk, status=self.Status.QUEUED).update(
            status=self.Status.STARTING, started_at=now, heartbeat_at=now, worker_host=worker_host,
            hardware=hardware or {}, stage="starting", progress=0.0,
        )
        if n:
            self.refresh_from_db()
        return bool(n)

    def heartbeat(self, stage: str | None = None, progress: float | None = None,
                  status: str | None = None, log_tail: str | None = None, **fields: Any) -> bool:
        """Record that the worker is alive (and optionally its stage/progress/log tail).

        A conditional UPDATE on a non-terminal status: returns False when the run was meanwhile
        cancelled or failed by the sweep, which tells the worker to stop."""
        values: dict[str, Any] = {"heartbeat_at": timezone.now(), **fields}
        if stage is not None:
            values["stage"] = stage[:200]
        if progress is not None:
            values["progress"] = max(0.0, min(1.0, progress))
        if status is not None:
            values["status"] = status
        if log_tail is not None:
            values["log_tail"] = log_tail[-LOG_TAIL_CHARS:]
        n = ValidationRun.objects.filter(pk=self.pk, attempt=self.attempt).exclude(status__in=self.TERMINAL).update(**values)
        for key, value in values.items():
            setattr(self, key, value)
        return bool(n)

    def requeue(self, reason: str, seen_heartbeat) -> bool:
        """A crashed STARTING/RUNNING run back to QUEUED as a new ``attempt`` (the sweep's recovery when
        nothing was measured yet). Conditional on the status and on ``seen_heartbeat`` (the heartbeat the
        sweep judged stale), so a worker that heartbeats meanwhile keeps its run. Clears what belonged to
        the crashed attempt; the caller kills its process groups and enqueues a new task."""
        alive = [self.Status.STARTING, self.Status.RUNNING]
        values: dict[str, Any] = {
            "status": self.Status.QUEUED, "attempt": self.attempt + 1, "stage": f"re-queued: {reason}"[:200],
            "progress": 0.0, "started_at": None, "heartbeat_at": None, "worker_host": "", "server_pgid": None,
            "process_groups": [], "task_result_id": "", "log_tail": "",
        }
        n = ValidationRun.objects.filter(pk=self.pk, attempt=self.attempt, status__in=alive,
                                         heartbeat_at=seen_heartbeat).update(**values)
        if n:
            for key, value in values.items():
                setattr(self, key, value)
        return bool(n)

    def finish(self, measured: dict[str, Any], log_tail: str | None = None) -> bool:
        """-> DONE with the measured report. No effect (returns False) on an already terminal run."""
        return self._terminate(self.Status.DONE, measured=measured, log_tail=log_tail)

    def fail(self, error: str, measured: dict[str, Any] | None = None, log_tail: str | None = None) -> bool:
        """-> FAILED with ``error`` (one or a few sentences). Keeps whatever was measured so far."""
        return self._terminate(self.Status.FAILED, error=error, measured=measured, log_tail=log_tail)

    def cancel(self, reason: str = "cancelled by the user") -> bool:
        """-> CANCELLED. A queued run is never started; a running one stops at its next heartbeat."""
        return self._terminate(self.Status.CANCELLED, error=reason)

    def _terminate(self, status: str, error: str = "", measured: dict | None = None,
                   log_tail: str | None = None) -> bool:
        assert status in self.TERMINAL, status
        values: dict[str, Any] = {"status": status, "finished_at": timezone.now(), "stage": str(status)}
        if status == self.Status.DONE:
            values["progress"] = 1.0
        if error:
            values["error"] = error
        if measured is not None:
            values["measured"] = measured
        if log_tail is not None:
            values["log_tail"] = log_tail[-LOG_TAIL_CHARS:]
        n = ValidationRun.objects.filter(pk=self.pk, attempt=self.attempt).exclude(status__in=self.TERMINAL).update(**values)
        if n:
            for key, value in values.items():
                setattr(self, key, value)
        else:
            self.refresh_fenced()
        return bool(n)

    def refresh_fenced(self) -> bool:
        """``refresh_from_db`` that keeps this instance's ``attempt``, so that a worker whose run was
        re-queued stays fenced off after reading the row. Returns whether the row is still this attempt."""
        attempt = self.attempt
        self.refresh_from_db()
        current, self.attempt = self.attempt, attempt
        return current == attempt
