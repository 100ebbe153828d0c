"""``manage.py validate``: enqueue a validation run from the command line (flags as ``estimate``).

With ``--wait`` it waits for the run to finish and prints its report (text, or ``--format json``). If no
worker has started the run after ``--inline-after`` seconds (default 10; 0 = at once), the command runs
it itself, in this process; a worker that picks the queued task later finds the run started and skips it.
A run no live worker can take (``validator.capabilities``; with ``--wait`` this process counts as one) is
refused up front with the worker hardware it needs. ``--validation-workload`` picks the prompts
(random, code, prose, repetitive; ``validator.workloads``).
Exit codes: 0 done, 1 the run failed, was cancelled or no worker can run it, 2 bad input.
"""
from __future__ import annotations

import json
import time

from django.core.management.base import BaseCommand, CommandError

from validator import capabilities, report
from validator.config import WORKLOAD_PARAM, build_configuration
from validator.workloads import WORKLOADS
from calculator.cli import OneLineErrors, command_error
from calculator.request import KNOWN_PARAMS, InputError, add_request_arguments
from validator.models import ValidationRun
from validator.tasks import execute


def _seconds(text: str) -> float:
    """``--inline-after``: a finite number of seconds, 0 or more (argparse turns the error into exit 2)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds, 0 or more, got {text!r}")
    return value


class Command(OneLineErrors, BaseCommand):
    help = "Validate a configuration with a real vLLM run (baseline, then speculative decoding)."

    def add_arguments(self, parser):
        add_request_arguments(parser)
        parser.add_argument("--wait", action="store_true", help="wait for the run and print its report")
        parser.add_argument("--inline-after", type=_seconds, default=10.0,
                            help="with --wait: run it here if no worker started it after this many seconds")
        parser.add_argument("--format", choices=("text", "json"), default="text")
        parser.add_argument("--validation-workload", choices=tuple(WORKLOADS), default=None,
                            help="prompts of the run: " + "; ".join(f"{k}: {v}" for k, v in WORKLOADS.items()))

    def handle(self, *args, **o):
        """The request is parsed as ``estimate`` parses it (``--gpu`` defaults to CPU here: the worker's)."""
        if o.get("config"):
            raise CommandError("config: a validation run needs a model the worker can load (--model)", returncode=2)
        params = {k: v for k, v in o.items() if k in KNOWN_PARAMS and v is not None}
        params.setdefault("gpu", "CPU")
        if o.get("validation_workload"):
            params[WORKLOAD_PARAM] = o["validation_workload"]
        beat = capabilities.Heartbeat(f"validate-cli-{capabilities.socket.gethostname()}-{capabilities.os.getpid()}") \
            if o["wait"] else None
        try:
            try:
                workers = capabilities.live_workers() + ([beat.info] if beat else [])
                who = capabilities.who_can_run(build_configuration(dict(params)), workers)
                if not who["ok"]:
                    raise CommandError(who["message"], returncode=1)
                run = ValidationRun.submit(params)
            except InputError as e:
                raise command_error(e) from None
            if beat:
                beat.start()  # this process may run it (--inline-after)
            self._follow(run, o)
        finally:
            if beat:
                beat.stop()

    def _follow(self, run, o):
        if not o["wait"]:
            out = {"id": str(run.pk), "status": run.status, "url": run.get_absolute_url()}
            self.stdout.write(json.dumps(out) if o["format"] == "json" else
                              f"queued validation run {run.pk} ({run.get_absolute_url()}); "
                              "start a worker with: python manage.py validator_worker")
            return
        t0 = time.monotonic()
        while True:
            run.refresh_from_db()
            if run.is_terminal:
                break
            if run.status == ValidationRun.Status.QUEUED and time.monotonic() - t0 >= o["inline_after"]:
                self.stderr.write(f"no worker started run {run.pk}; running it in this process")
                execute(run)
                continue
            time.sleep(1.0)
        s = report.summary(run)
        self.stdout.write(json.dumps(s, indent=2) if o["format"] == "json" else report.format_text(s))
        if run.status != ValidationRun.Status.DONE:
            raise CommandError(f"run {run.status}: {run.error}", returncode=1)
