"""``manage.py validate``: enqueue a validation run from the command line (flags as ``estimate``).

With ``--wait`` it waits for the run to finish and prints its report (text, or ``--format json``). If no
worker has started the run after ``--inline-after`` seconds (default 10; 0 = at once), the command runs
it itself, in this process; a worker that picks the queued task later finds the run started and skips it.
Exit codes: 0 done, 1 the run failed or was cancelled, 2 bad input.
"""
from __future__ import annotations

import json
import time

from django.core.management.base import BaseCommand, CommandError

from validator import report
from validator.config import ConfigurationError
from validator.models import ValidationRun
from validator.tasks import execute


class Command(BaseCommand):
    help = "Validate a configuration with a real vLLM run (baseline, then speculative decoding)."

    def add_arguments(self, parser):
        parser.add_argument("--model", required=True, help="org/name from the catalog, or tiny-random/llama")
        parser.add_argument("--revision")
        parser.add_argument("--gpu", default="CPU", help="GPU name from the catalog, or CPU (default)")
        for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--max-model-len", "--block-size",
                     "--max-num-seqs", "--max-num-batched-tokens", "--concurrency"):
            parser.add_argument(flag, type=int)
        parser.add_argument("--gpu-memory-utilization", type=float)
        parser.add_argument("--dtype")
        parser.add_argument("--quantization")
        parser.add_argument("--kv-cache-dtype")
        parser.add_argument("--attention-backend")
        parser.add_argument("--enforce-eager", action="store_true")
        parser.add_argument("--vllm-version", default="0.32.0", help="only 0.32.0 runs on this worker")
        parser.add_argument("--speculative-config", help='JSON, e.g. \'{"method":"ngram","num_speculative_tokens":3}\'')
        parser.add_argument("--wait", action="store_true", help="wait for the run and print its report")
        parser.add_argument("--inline-after", type=float, default=10.0,
                            help="with --wait: run it here if no worker started it after this many seconds")
        parser.add_argument("--format", choices=("text", "json"), default="text")

    def handle(self, *args, **o):
        if o["vllm_version"] != "0.32.0":
            raise CommandError("--vllm-version: the worker runs vLLM 0.32.0 only", returncode=2)
        keys = ("model", "revision", "gpu", "tensor_parallel_size", "pipeline_parallel_size", "max_model_len",
                "block_size", "max_num_seqs", "max_num_batched_tokens", "concurrency", "gpu_memory_utilization",
                "dtype", "quantization", "kv_cache_dtype", "attention_backend", "speculative_config")
        params = {k: o[k] for k in keys if o.get(k) not in (None, "")}
        if o["enforce_eager"]:
            params["enforce_eager"] = "1"
        try:
            run = ValidationRun.submit(params)
        except ConfigurationError as e:
            raise CommandError(f"--{e.field.replace('_', '-')}: {e.message}", returncode=2) from None
        if not o["wait"]:
            out = {"id": str(run.pk), "status": run.status, "url": run.get_absolute_url()}
            self.stdout.write(json.dumps(out) if o["format"] == "json" else
                              f"queued validation run {run.pk} ({run.get_absolute_url()}); "
                              "start a worker with: python manage.py db_worker")
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
