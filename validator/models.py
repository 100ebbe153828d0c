"""``ValidationRun``: our own row for one validation run, next to the queue's ``DBTaskResult``.

The pattern is NetBox's ``core.Job`` (``netbox/core/models/jobs.py``): the row is saved before the task
is enqueued, so nothing a user submitted is lost; state changes only through methods (``start``,
``heartbeat``, ``set_stage``, ``finish``, ``fail``, ``cancel``), each writing only its fields with
``save(update_fields=...)`` or a conditional ``UPDATE`` where a worker and a sweep could race.
"""
from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.urls import reverse
from django.utils import timezone

LOG_TAIL_CHARS = 20_000


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
    def submit(cls, params: dict[str, Any], user=None) -> ValidationRun:
        """Build the configuration from the calculator's parameters, predict, save, enqueue.

        Raises ``validator.config.ConfigurationError`` (with ``field``) for a request that cannot run.
        The row is committed before the task is enqueued (``transaction.on_commit``)."""
        from .config import build_configuration, fit_profile, predict

        configuration = build_configuration(params)
        prediction, prediction_error = predict(configuration["engine_input"])
        fit_profile(configuration, prediction)
        with transaction.atomic():
            run = cls.objects.create(configuration=configuration, prediction=prediction,
                                     prediction_error=prediction_error,
                                     created_by=user if getattr(user, "is_authenticated", False) else None)
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
        n = ValidationRun.objects.filter(pk=self.pk).exclude(status__in=self.TERMINAL).update(**values)
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
        n = ValidationRun.objects.filter(pk=self.pk).exclude(status__in=self.TERMINAL).update(**values)
        if n:
            for key, value in values.items():
                setattr(self, key, value)
        else:
            self.refresh_from_db()
        return bool(n)
