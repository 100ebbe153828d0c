"""``manage.py sweep_validation_runs``: recover runs whose worker stopped sending heartbeats.

Each task also sweeps at its start; run this from cron (or a systemd timer) when workers can all die
at once. ``--older-than`` defaults to ``VALIDATOR_STALE_AFTER_S``. For each stale run it kills the run's
recorded process groups on this host, removes ``VAR_DIR/runs/<id>``, keeps the phases that finished,
and re-queues the run once if nothing had started, else marks it failed with the reason
(``validator.tasks.recover_crashed_run``).
"""
from __future__ import annotations

from django.core.management.base import BaseCommand

from validator.models import ValidationRun
from validator.tasks import sweep_stale_runs


class Command(BaseCommand):
    help = ("Recover validation runs with a stale heartbeat: kill their processes, keep finished phases, "
            "re-queue once if nothing had started, else mark them failed ('worker stopped responding').")

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=float, default=None, help="seconds without a heartbeat")

    def handle(self, *args, **o):
        ids = sweep_stale_runs(o["older_than"])
        status = {str(pk): s for pk, s in ValidationRun.objects.filter(pk__in=ids).values_list("pk", "status")}
        failed = [i for i in ids if status.get(i) != ValidationRun.Status.QUEUED]
        requeued = [i for i in ids if status.get(i) == ValidationRun.Status.QUEUED]
        self.stdout.write(f"{len(failed)} stale run(s) marked failed" + (": " + ", ".join(failed) if failed else ""))
        self.stdout.write(f"{len(requeued)} stale run(s) re-queued" + (": " + ", ".join(requeued) if requeued else ""))
