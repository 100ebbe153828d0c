"""A stand-in for ``validator.bench_serve_entry`` in the worker tests (VALIDATOR_BENCH_COMMAND).

Takes the same arguments as the real entry point (``--repeats N --combined-output OUT
--wait-ready-timeout S [--target NAME=URL ...] [--pgid NAME=PGID ...] -- <vllm bench serve args>``) and
does what it does, with plain HTTP in place of vLLM's benchmark:

- waits for every target's ``/health`` (exit 3 with the same message when one is not ready in time);
- runs rounds alternating over the targets in the order given (A B A B ...), as many as the real entry's
  ``PairSchedule`` asks for (``--repeats``, ``--max-repeats``, ``--deadline``); each repeat
  sends ``--num-prompts`` streamed ``POST <target><--endpoint>`` requests (``--max-concurrency`` at a
  time; the payload ``vllm bench serve``'s ``openai-comp`` request function sends), after warm-up requests
  sent before the repeat's ``/metrics`` are read, as the real entry sends them (``--num-warmups`` before a
  target's first repeat, ``REWARM`` before each later one); every call's prompts (warm-ups
  included) are drawn through the real entry's ``UniquePrompts`` (a word is a token), so no prompt reaches
  a server twice;
- scrapes ``/metrics`` before and after each repeat (``validator.runner.scrape_metrics``) and, with
  ``--pgid``, measures the target's server CPU seconds (``validator.bench_serve_entry.group_cpu_seconds``);
- writes each repeat's result (``vllm bench serve``'s result keys, figures measured from the responses:
  TTFT at the first streamed chunk, ITL between chunks, TPOT = (latency - TTFT) / (output tokens - 1))
  to ``--result-dir``/``repeat<r>-<name>.json`` and rewrites ``--combined-output`` after every repeat:
  ``[{"repeat", "result", "metrics_before", "metrics_after", "phase", "pair", "position", "server_cpu_s"}]``.

Fake-only options (before ``--``): ``--fake-log F`` appends the ``--combined-output`` path (it names the
run) to F when the benchmark starts; ``--fake-hang-after N`` makes the benchmark, once N repeats are
written, ignore SIGTERM, write its pid to ``--fake-pid-file`` and never finish (a benchmark a crashed
worker leaves in the middle of a repeat).
"""
import argparse
import json
import os
import random
import signal
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from validator.bench_serve_entry import (REWARM, PairSchedule, UniquePrompts, finish, group_cpu_seconds,
                                         repeat_entry, save_combined)
from validator.runner import http_status, scrape_metrics

argv = sys.argv[1:]
i = argv.index("--") if "--" in argv else len(argv)
own = argparse.ArgumentParser(prog="bench_serve_entry")
own.add_argument("--repeats", type=int, default=1)
own.add_argument("--max-repeats", type=int, default=0)
own.add_argument("--deadline", type=float, default=0.0)
own.add_argument("--prefix-block-tokens", type=int, default=16)
own.add_argument("--combined-output", type=Path, required=True)
own.add_argument("--wait-ready-timeout", type=float, default=0.0)
own.add_argument("--target", action="append", default=[])
own.add_argument("--pgid", action="append", default=[])
own.add_argument("--fake-hang-after", type=int, default=-1)
own.add_argument("--fake-pid-file", default="")
own.add_argument("--fake-log", default="")
opts = own.parse_args(argv[:i])

bench = argparse.ArgumentParser(prog="vllm bench serve")
bench.add_argument("--backend", default="vllm")
bench.add_argument("--base-url", required=True)
bench.add_argument("--endpoint", default="/v1/completions")
bench.add_argument("--model", required=True)
bench.add_argument("--served-model-name")
bench.add_argument("--tokenizer")
bench.add_argument("--dataset-name", default="random")
bench.add_argument("--dataset-path")
bench.add_argument("--random-input-len", type=int, default=1024)
bench.add_argument("--random-output-len", type=int, default=128)
bench.add_argument("--custom-output-len", type=int, default=256)
bench.add_argument("--skip-chat-template", action="store_true")
bench.add_argument("--seed", type=int, default=0)
bench.add_argument("--num-prompts", type=int, default=1000)
bench.add_argument("--max-concurrency", type=int)
bench.add_argument("--num-warmups", type=int, default=0)
bench.add_argument("--request-rate", default="inf")
bench.add_argument("--ignore-eos", action="store_true")
bench.add_argument("--temperature", type=float)
bench.add_argument("--percentile-metrics", default="ttft,tpot,itl")
bench.add_argument("--metric-percentiles", default="99")
bench.add_argument("--save-result", action="store_true")
bench.add_argument("--save-detailed", action="store_true")
bench.add_argument("--result-dir", default=".")
bench.add_argument("--disable-tqdm", action="store_true")
args = bench.parse_args(argv[i + 1:])

targets = [tuple(t.split("=", 1)) for t in opts.target] or [("", args.base_url)]
end = time.monotonic() + opts.wait_ready_timeout
for _, base_url in targets:
    while http_status(base_url + "/health") != 200:
        if time.monotonic() > end:
            print(f"server at {base_url} not ready after {opts.wait_ready_timeout:.0f} s", file=sys.stderr)
            sys.exit(3)
        time.sleep(0.2)

if opts.fake_log:
    with open(opts.fake_log, "a") as f:
        f.write(f"{opts.combined_output}\n")

# the prompt pool: the custom dataset's prompts (shuffled with the seed, as vLLM's custom dataset does), or seeded
# random words as long as --random-input-len
if args.dataset_name == "custom":
    with open(args.dataset_path, encoding="utf-8") as f:
        pool = [json.loads(line)["prompt"] for line in f if line.strip()]
    output_len = args.custom_output_len
else:
    pool = None
    output_len = args.random_output_len


def sample(seed: int, n: int) -> list[str]:
    """One draw of ``n`` prompts with ``seed`` (what ``vllm bench serve``'s ``get_samples`` returns)."""
    rng = random.Random(seed)
    if pool is not None:
        shuffled = list(pool)
        rng.shuffle(shuffled)
        return shuffled[:n]
    return [" ".join(f"w{rng.randrange(1000)}" for _ in range(args.random_input_len)) for _ in range(n)]


registry = UniquePrompts(opts.prefix_block_tokens - 1, str.split)


def request(base_url: str, prompt: str) -> dict:
    """One streamed completion, timed as vllm/benchmarks/lib/endpoint_request_func.py times it."""
    payload = {"model": args.served_model_name or args.model, "prompt": prompt, "repetition_penalty": 1.0,
               "max_tokens": output_len, "logprobs": None, "stream": True,
               "stream_options": {"include_usage": True}, "ignore_eos": args.ignore_eos}
    if args.temperature is not None:
        payload["temperature"] = args.temperature
    req = urllib.request.Request(base_url + args.endpoint, data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    out = {"success": False, "ttft": 0.0, "itl": [], "latency": 0.0, "output_tokens": 0, "text": "", "error": ""}
    st = last = time.perf_counter()
    out["start_time"] = st
    try:
        with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310 - the fake server on localhost
            for line in r:
                line = line.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                data = json.loads(line.removeprefix("data: "))
                if data.get("choices"):
                    now = time.perf_counter()
                    if not out["success"]:
                        out["success"], out["ttft"] = True, now - st
                    else:
                        out["itl"].append(now - last)
                    last = now
                    out["text"] += data["choices"][0].get("text") or ""
                elif data.get("usage"):
                    out["output_tokens"] = data["usage"]["completion_tokens"]
        out["latency"] = time.perf_counter() - st
    except OSError as e:
        out["error"] = str(e)
    return out


def warm_up(name: str, base_url: str, warmups: int) -> None:
    """The warm-up requests before a repeat (their own prompts, new to the server)."""
    if warmups:
        warm = registry.draw(name, lambda seed: sample(seed, warmups), warmups, args.seed, prompt_of=str)
        with ThreadPoolExecutor(args.max_concurrency or warmups) as workers:
            list(workers.map(lambda p: request(base_url, p), warm))


def run_benchmark(name: str, base_url: str) -> dict:
    """One ``vllm bench serve`` run against ``base_url``: its result dict (the keys ``vllm bench serve``
    saves with ``--save-result --save-detailed``, vllm/benchmarks/serve.py)."""
    conc = args.max_concurrency or args.num_prompts
    prompts = registry.draw(name, lambda seed: sample(seed, args.num_prompts), args.num_prompts, args.seed,
                            prompt_of=str)
    with ThreadPoolExecutor(conc) as workers:
        t0 = time.perf_counter()
        outputs = list(workers.map(lambda p: request(base_url, p), prompts))
        duration = time.perf_counter() - t0
    ok = [o for o in outputs if o["success"]]
    total_out = sum(o["output_tokens"] for o in ok)
    result = {"duration": duration, "completed": len(ok), "failed": len(outputs) - len(ok),
              "total_input_tokens": sum(len(p.split()) for p in prompts), "total_output_tokens": total_out,
              "request_throughput": len(ok) / duration, "request_goodput": None,
              "output_throughput": total_out / duration,
              "total_token_throughput": (total_out + sum(len(p.split()) for p in prompts)) / duration,
              "input_lens": [len(p.split()) for p in prompts], "output_lens": [o["output_tokens"] for o in outputs],
              "ttfts": [o["ttft"] for o in outputs], "itls": [o["itl"] for o in outputs],
              "latencies": [o["latency"] for o in outputs], "start_times": [o["start_time"] for o in outputs],
              "generated_texts": [o["text"] for o in outputs], "errors": [o["error"] for o in outputs],
              "max_output_tokens_per_s": total_out / duration, "max_concurrent_requests": conc}
    values = {"ttft": [o["ttft"] for o in ok], "e2el": [o["latency"] for o in ok],
              "tpot": [(o["latency"] - o["ttft"]) / (o["output_tokens"] - 1) for o in ok if o["output_tokens"] > 1],
              "itl": [x for o in ok for x in o["itl"]]}
    percentiles = [float(p) for p in args.metric_percentiles.split(",")]
    for metric in args.percentile_metrics.split(","):
        v = values[metric] or [0]
        result[f"mean_{metric}_ms"] = float(np.mean(v)) * 1000
        result[f"median_{metric}_ms"] = float(np.median(v)) * 1000
        result[f"std_{metric}_ms"] = float(np.std(v)) * 1000
        for p in percentiles:
            result[f"p{int(p) if int(p) == p else p}_{metric}_ms"] = float(np.percentile(v, p)) * 1000
    result.update(backend=args.backend, model_id=args.model, tokenizer_id=args.tokenizer,
                  num_prompts=args.num_prompts, request_rate=args.request_rate, max_concurrency=args.max_concurrency)
    return result


pgids = {name: int(pg) for name, pg in (p.split("=", 1) for p in opts.pgid)}
combined, warmed = [], set()
schedule = PairSchedule([n for n, _ in targets], opts.repeats, opts.max_repeats or None, opts.deadline or None)
r = 0
while schedule.more(combined, time.monotonic(), time.time()):
    for name, base_url in targets:
        if len(combined) == opts.fake_hang_after:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            Path(opts.fake_pid_file).write_text(str(os.getpid()))
            time.sleep(600)
            sys.exit(0)
        warmups = min(REWARM, args.num_warmups) if name in warmed else args.num_warmups
        warmed.add(name)
        warm_up(name, base_url, warmups)
        filename = f"repeat{r}{'-' + name if name else ''}.json"
        before = scrape_metrics(base_url)
        cpu0 = group_cpu_seconds(pgids[name]) if name in pgids else None
        result = run_benchmark(name, base_url)
        cpu1 = group_cpu_seconds(pgids[name]) if name in pgids else None
        after = scrape_metrics(base_url)
        if args.save_result:
            Path(args.result_dir).mkdir(parents=True, exist_ok=True)
            (Path(args.result_dir) / filename).write_text(json.dumps(result))
            result = json.loads((Path(args.result_dir) / filename).read_text())
        combined.append(repeat_entry(r, name, targets.index((name, base_url)), result, before, after, cpu0, cpu1))
        save_combined(opts.combined_output, combined)
    r += 1
if combined:
    finish(combined, schedule, registry)
    save_combined(opts.combined_output, combined)
