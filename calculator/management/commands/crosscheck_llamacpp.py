"""``python manage.py crosscheck_llamacpp``: compare ``calculator.runtimes.llamacpp.memory.plan`` with what
llama.cpp (llama-cpp-python 0.3.36, CPU build) logs for tiny GGUFs of several architectures; see
:mod:`calculator.runtimes.llamacpp.crosscheck`. Exit code 0 when every case ran (differences are reported per
case as ``status``), 1 when llama_cpp is missing or a case failed to load, 2 on bad arguments.
"""
from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from calculator.runtimes.llamacpp.crosscheck import CASES, LlamaCppMissing, run_cases


class Command(BaseCommand):
    help = "Cross-check the llama.cpp memory plan against llama.cpp's own start-up log (tiny GGUFs, CPU)."

    def add_arguments(self, parser):
        parser.add_argument("--case", action="append", default=None,
                            help=f"case name (repeatable); default all: {', '.join(c.name for c in CASES)}")
        parser.add_argument("--format", choices=["table", "json"], default="table")
        parser.add_argument("--python", default=sys.executable, help="interpreter that has llama_cpp")

    def handle(self, *args, **opts):
        cases = CASES
        if opts["case"]:
            known = {c.name: c for c in CASES}
            unknown = [n for n in opts["case"] if n not in known]
            if unknown:
                raise CommandError(f"--case: unknown {', '.join(unknown)}", returncode=2)
            cases = [known[n] for n in opts["case"]]
        try:
            results = run_cases(cases, python=opts["python"])
        except LlamaCppMissing as exc:
            raise CommandError(str(exc), returncode=1) from exc
        if opts["format"] == "json":
            self.stdout.write(json.dumps(results, indent=2))
        else:
            for r in results:
                self.stdout.write(f"{r['case']:28} {r['status']}")
                for f in r["figures"]:
                    if f["status"] != "exact":
                        self.stdout.write(f"    {f['figure']:36} predicted {f['predicted']} logged {f['logged']}"
                                          f"  ({f['status']})")
        if any(r["status"] == "load failed" for r in results):
            raise CommandError("a case failed to load in llama.cpp (see log_tail)", returncode=1)
