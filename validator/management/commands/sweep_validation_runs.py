"""``manage.py sweep_validation_runs``: fail runs whose worker stopped sending heartbeats.

Each task also sweeps at its start; run this from cron (or a systemd timer) when workers can all die
at once. ``--older-than`` defaults to ``VALIDATOR_STALE_AFTER_S``.
"""
from __future__ import annotations

from django.core.management.base import BaseCommand

from validator.tasks import sweep_stale_runs


class Command(BaseCommand):
    help = "Mark validation runs with a stale heartbeat as failed ('worker stopped responding')."

    def add_arguments(self, parser):
        parser.add_argument("--older-than", type=float, default=None, help="seconds without a heartbeat")

    def handle(self, *args, **o):
        ids = sweep_stale_runs(o["older_than"])
        self.stdout.write(f"{len(ids)} stale run(s) marked failed" + (": " + ", ".join(ids) if ids else ""))
