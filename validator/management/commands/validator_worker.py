"""``manage.py validator_worker [db_worker options]``: django-tasks-db's ``db_worker`` plus a capability
record (``validator.capabilities``): hardware, installed runtimes and a heartbeat every few seconds, so the
site offers validation only for configurations some live worker can run."""
from __future__ import annotations

from django.core.management import call_command
from django.core.management.base import BaseCommand

from validator import capabilities


class Command(BaseCommand):
    help = "Run the validation worker (db_worker) and publish what it can run."

    def add_arguments(self, parser):
        parser.add_argument("--worker-id", default=None, help="unique id (default host-pid); also given to db_worker")
        parser.add_argument("--queue-name", default=None)
        parser.add_argument("--batch", action="store_true", help="db_worker --batch: exit when the queue is empty")
        parser.add_argument("--no-reload", action="store_true", help="accepted for db_worker compatibility")

    def handle(self, *args, **o):
        beat = capabilities.Heartbeat(o["worker_id"]).start()
        info = beat.info
        self.stderr.write(f"worker {info['worker_id']}: {capabilities.hardware_label(info['hardware'])}; runtimes "
                          + (", ".join(f"{r} {v['release']}" for r, v in info["runtimes"].items()) or "none"))
        kwargs = {"worker_id": info["worker_id"], "reload": False}
        if o["queue_name"]:
            kwargs["queue_name"] = o["queue_name"]
        if o["batch"]:
            kwargs["batch"] = True
        try:
            call_command("db_worker", **kwargs)
        finally:
            beat.stop()
