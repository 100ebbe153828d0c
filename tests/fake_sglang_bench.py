"""A stand-in for ``python -m sglang.bench_serving`` in the SGLang run test (``--client-command`` of
``validator.bench_serve_entry --client sglang``): SGLang cannot run on this site (no GPU).

Takes the flags ``validator.sglang.bench_args`` passes (others are ignored), sends ``--num-prompts`` streamed
completions (``--max-concurrency`` at a time, after ``--warmup-requests``) to ``<--base-url>/v1/completions`` of
``tests/fake_vllm_server.py``, and appends one JSON line to ``--output-file`` with the keys of sglang 0.5.10.post1's
result (bench_serving.py:1549-1596; with ``--output-details`` also ``ttfts`` / ``itls`` / ``output_lens`` /
``errors``, :1620-1627). TTFT at the first streamed chunk, ITL between chunks, TPOT = (latency - TTFT) /
(output tokens - 1), as bench_serving.py computes them. ``accept_length`` is null (no speculation).
"""
import argparse
import json
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--base-url", required=True)
p.add_argument("--model", required=True)
p.add_argument("--random-input-len", type=int, required=True)
p.add_argument("--random-output-len", type=int, required=True)
p.add_argument("--num-prompts", type=int, required=True)
p.add_argument("--max-concurrency", type=int, required=True)
p.add_argument("--warmup-requests", type=int, default=1)
p.add_argument("--output-file", required=True)
p.add_argument("--output-details", action="store_true")
p.add_argument("--flush-cache", action="store_true")
p.add_argument("--seed", type=int, default=0)
# the stand-in's own: answer as sglang.bench_serving does when SGLang refuses every streamed request (HTTP 200, one
# error chunk: a "success" with TTFT 0, no ITLs, the requested length; bench_serving.py:637-688)
p.add_argument("--fake-refused", action="store_true")
args, _ = p.parse_known_args()


def one(prompt: str) -> dict:
    if args.fake_refused:
        return {"ttft": 0.0, "itl": [], "latency": 0.001, "output_len": args.random_output_len, "error": ""}
    # no model name, as SGLang's /generate payload (bench_serving.py:607-620); --model is the tokenizer directory
    payload = {"prompt": prompt, "max_tokens": args.random_output_len, "stream": True,
               "stream_options": {"include_usage": True}, "ignore_eos": True}
    req = urllib.request.Request(args.base_url + "/v1/completions", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    out = {"ttft": 0.0, "itl": [], "latency": 0.0, "output_len": 0, "error": ""}
    st = last = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310 - the fake server on localhost
            for line in r:
                line = line.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                data = json.loads(line.removeprefix("data: "))
                if data.get("choices"):
                    now = time.perf_counter()
                    if not out["ttft"]:
                        out["ttft"] = now - st
                    else:
                        out["itl"].append(now - last)
                    last = now
                elif data.get("usage"):
                    out["output_len"] = data["usage"]["completion_tokens"]
        out["latency"] = time.perf_counter() - st
    except OSError as e:
        out["error"] = str(e)
    return out


prompts = [" ".join(f"w{(i * 7 + j) % 1000}" for j in range(args.random_input_len)) for i in range(args.num_prompts)]
for prompt in prompts[:args.warmup_requests]:
    one(prompt)
t0 = time.perf_counter()
with ThreadPoolExecutor(args.max_concurrency) as pool:
    outs = list(pool.map(one, prompts))
duration = time.perf_counter() - t0
ok = [o for o in outs if not o["error"]]
ttft = [o["ttft"] * 1000 for o in ok]
e2e = [o["latency"] * 1000 for o in ok]
tpot = [(o["latency"] - o["ttft"]) / (o["output_len"] - 1) * 1000 for o in ok if o["output_len"] > 1]
itl = [x * 1000 for o in ok for x in o["itl"]]
total_out = sum(o["output_len"] for o in ok)
result = {
    "backend": "sglang", "dataset_name": "random-ids", "request_rate": float("inf"),
    "max_concurrency": args.max_concurrency, "random_input_len": args.random_input_len,
    "random_output_len": args.random_output_len, "server_info": None, "duration": duration, "completed": len(ok),
    "total_input_tokens": args.random_input_len * len(ok), "total_output_tokens": total_out,
    "request_throughput": len(ok) / duration, "input_throughput": args.random_input_len * len(ok) / duration,
    "output_throughput": total_out / duration, "total_throughput": (args.random_input_len * len(ok) + total_out) / duration,
    "mean_e2e_latency_ms": float(np.mean(e2e)), "median_e2e_latency_ms": float(np.median(e2e)),
    "p99_e2e_latency_ms": float(np.percentile(e2e, 99)), "mean_ttft_ms": float(np.mean(ttft)),
    "median_ttft_ms": float(np.median(ttft)), "p99_ttft_ms": float(np.percentile(ttft, 99)),
    "mean_tpot_ms": float(np.mean(tpot)) if tpot else 0.0, "median_tpot_ms": float(np.median(tpot)) if tpot else 0.0,
    "p99_tpot_ms": float(np.percentile(tpot, 99)) if tpot else 0.0, "mean_itl_ms": float(np.mean(itl)) if itl else 0.0,
    "median_itl_ms": float(np.median(itl)) if itl else 0.0, "p95_itl_ms": float(np.percentile(itl, 95)) if itl else 0.0,
    "p99_itl_ms": float(np.percentile(itl, 99)) if itl else 0.0, "concurrency": float(np.sum(e2e) / (duration * 1000)),
    "accept_length": None,
}
if args.output_details:
    result |= {"input_lens": [args.random_input_len] * len(outs), "output_lens": [o["output_len"] for o in outs],
               "ttfts": [o["ttft"] for o in outs], "itls": [o["itl"] for o in outs],
               "errors": [o["error"] for o in outs]}
with open(args.output_file, "a") as f:
    f.write(json.dumps(result) + "\n")
sys.exit(0 if ok else 1)
