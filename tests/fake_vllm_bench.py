"""A stand-in for ``validator.bench_serve_entry`` in the worker-crash test (VALIDATOR_BENCH_COMMAND).

Takes the same arguments (``--repeats N --combined-output OUT -- <vllm bench serve args>``). Waits for
the server's ``/health``, then writes a one-repeat result whose figures are what the arguments ask for
(``--num-prompts`` requests of ``--random-output-len`` tokens). With ``--fake-hang-phase P`` (given
before ``--``) the benchmark of phase P (its ``--combined-output`` file is ``P-bench.json``) ignores
SIGTERM, writes its pid to ``--fake-pid-file`` and never finishes: a benchmark a crashed worker leaves.
``--fake-log F`` appends the ``--combined-output`` path (which names the run and the phase) to F.
"""
import argparse
import json
import os
import signal
import sys
import time
import urllib.request

argv = sys.argv[1:]
i = argv.index("--")
own = argparse.ArgumentParser()
own.add_argument("--repeats", type=int, default=1)
own.add_argument("--combined-output", required=True)
own.add_argument("--wait-ready-timeout", type=float, default=60)
own.add_argument("--fake-hang-phase", default="")
own.add_argument("--fake-pid-file", default="")
own.add_argument("--fake-log", default="")
opts = own.parse_args(argv[:i])
bench = argparse.ArgumentParser()
bench.add_argument("--base-url")
bench.add_argument("--num-prompts", type=int)
bench.add_argument("--random-output-len", type=int)
args, _ = bench.parse_known_args(argv[i + 1:])

end = time.monotonic() + opts.wait_ready_timeout
while True:
    try:
        with urllib.request.urlopen(args.base_url + "/health", timeout=2) as r:
            if r.status == 200:
                break
    except OSError:
        pass
    if time.monotonic() > end:
        sys.exit(3)
    time.sleep(0.2)

if opts.fake_log:
    with open(opts.fake_log, "a") as f:
        f.write(opts.combined_output + "\n")
phase = os.path.basename(opts.combined_output).removesuffix("-bench.json")
if opts.fake_hang_phase and phase == opts.fake_hang_phase:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(opts.fake_pid_file, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
    sys.exit(0)

n, out = args.num_prompts, args.random_output_len
result = {"duration": 1.0, "completed": n, "failed": 0, "total_input_tokens": 0, "total_output_tokens": n * out,
          "output_throughput": float(n * out), "median_ttft_ms": 10.0, "p50_ttft_ms": 10.0, "p95_ttft_ms": 12.0,
          "p99_ttft_ms": 13.0, "median_e2el_ms": 100.0, "p50_e2el_ms": 100.0, "p95_e2el_ms": 110.0,
          "p99_e2el_ms": 120.0, "ttfts": [0.01] * n, "latencies": [0.1] * n}
with open(opts.combined_output, "w") as f:
    json.dump([{"repeat": 0, "result": result, "metrics_before": {}, "metrics_after": {}}], f)
