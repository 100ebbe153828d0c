"""A stand-in for vLLM's server in the validator's fault tests (given as VALIDATOR_SERVER_COMMAND).

Takes vLLM's flags (ignored, except --host/--port, --served-model-name and --speculative-config) plus:
  --fake-mode refuse   print an argparse-style error and exit 2, as vLLM does for an unknown flag
  --fake-mode hang     ignore SIGTERM, start a child in the same process group, never answer /health
  --fake-mode serve    answer /health, /metrics and /v1/completions until killed
  --fake-mode stubborn like serve, but it and a child in its process group ignore SIGTERM (only SIGKILL
                       to the group ends them; the parent-death signal alone does not)
  --fake-mode replay   print the file --fake-log (a real vLLM start-up log) and exit 1
  --fake-mode replay-serve  print the file --fake-log (a real start-up log: vLLM's or SGLang's), then serve
  --fake-pid-file P    write "<pid> <child pid>" to P
  --fake-pid-dir D     write "<pid> <child pid>" to D/<phase>.<pid>.pids, phase "speculative" when started
                       with --speculative-config, else "baseline" (two servers of one run side by side)
  --fake-itl-ms X      also expose vLLM's ``vllm:inter_token_latency_seconds`` histogram (``_sum`` / ``_count``), each
                       request of n output tokens observing n - 1 gaps of X ms (the engine's step as vLLM times it)

``POST /v1/completions`` answers as vLLM's OpenAI server does for ``vllm bench serve`` (``"stream": true``,
``stream_options.include_usage``): server-sent events, the first token in its own chunk, the other
``max_tokens - 1`` tokens in a second chunk (a burst, as a tiny model on a CPU sends them), then a usage
chunk and ``data: [DONE]``. ``/metrics`` is Prometheus text with vLLM's counter names:
``vllm:request_success_total`` and ``vllm:generation_tokens_total``, and on a server started with
``--speculative-config`` (``num_speculative_tokens`` = k) the speculative-decoding counters
(vllm/v1/spec_decode/metrics.py) of a made-up, fixed acceptance: each request of n output tokens makes
``n // 2`` drafts of k tokens, of which exactly the first is accepted. It also keeps vLLM's automatic prefix cache
as vLLM 0.32 does (``PrefixCache``: full blocks of ``BLOCK`` tokens, a word being a token after a BOS token) and
exposes its ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` counters (prompt tokens).
"""
import argparse
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time

p = argparse.ArgumentParser(add_help=False)
p.add_argument("--fake-mode", default="serve")
p.add_argument("--fake-pid-file")
p.add_argument("--fake-pid-dir")
p.add_argument("--fake-log")
p.add_argument("--fake-itl-ms", type=float, default=None)
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--port", type=int, default=8000)
p.add_argument("--served-model-name", default="")
p.add_argument("--speculative-config", default="")
p.add_argument("--model-path", default="")  # SGLang's flag: SGLang serves the model under its path by default
args, rest = p.parse_known_args()
args.served_model_name = args.served_model_name or args.model_path

if args.fake_mode == "refuse":
    print("usage: api_server.py [-h] ...", file=sys.stderr)
    print(f"api_server.py: error: unrecognized arguments: {' '.join(r for r in rest if r.startswith('--no-such'))}",
          file=sys.stderr)
    sys.exit(2)

if args.fake_mode in ("replay", "replay-serve"):
    with open(args.fake_log) as f:
        sys.stdout.write(f.read())
    sys.stdout.flush()
    if args.fake_mode == "replay":
        sys.exit(1)

child = None
if args.fake_mode in ("hang", "stubborn"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
pids = f"{os.getpid()} {child.pid if child else ''}"
if args.fake_pid_file:
    with open(args.fake_pid_file, "w") as f:
        f.write(pids)
if args.fake_pid_dir:
    phase = "speculative" if args.speculative_config else "baseline"
    path = os.path.join(args.fake_pid_dir, f"{phase}.{os.getpid()}.pids")
    os.makedirs(args.fake_pid_dir, exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(pids)
    os.replace(path + ".tmp", path)
print("INFO fake server starting", flush=True)
if args.fake_mode == "hang":
    time.sleep(600)
    sys.exit(0)

K = int(json.loads(args.speculative_config).get("num_speculative_tokens", 1)) if args.speculative_config else 0
counters = {"requests": 0, "tokens": 0, "drafts": 0, "prefix_queries": 0, "prefix_hits": 0, "itl_n": 0}
lock = threading.Lock()
BLOCK = 16


class PrefixCache:
    """vLLM 0.32's automatic prefix caching, as the counters see it: a block's key chains its parent's
    (vllm/v1/core/kv_cache_utils.py:695-725 ``hash_block_tokens``); a request is served from the leading full blocks
    already cached, at most ``num_tokens - 1`` tokens (vllm/v1/core/kv_cache_manager.py:288-299); its full blocks
    are cached once computed. Nothing is evicted (the stand-in's cache is unbounded)."""

    def __init__(self) -> None:
        self.blocks: set = set()

    def lookup_and_store(self, tokens: list) -> int:
        keys, parent = [], None
        for i in range(len(tokens) // BLOCK):
            parent = (parent, tuple(tokens[i * BLOCK:(i + 1) * BLOCK]))
            keys.append(parent)
        hit = 0
        for key in keys:
            if key not in self.blocks or hit + BLOCK > len(tokens) - 1:
                break
            hit += BLOCK
        self.blocks.update(keys)
        return hit


cache = PrefixCache()


def metrics_text() -> str:
    labels = f'engine="0",model_name="{args.served_model_name}"'
    with lock:
        c = dict(counters)
    lines = ["# TYPE vllm:request_success counter", f'vllm:request_success_total{{{labels},finished_reason="length"}} '
             f'{c["requests"]}', "# TYPE vllm:generation_tokens counter", f"vllm:generation_tokens_total{{{labels}}} "
             f'{c["tokens"]}', "# TYPE vllm:prefix_cache_queries counter",
             f"vllm:prefix_cache_queries_total{{{labels}}} {c['prefix_queries']}",
             "# TYPE vllm:prefix_cache_hits counter", f"vllm:prefix_cache_hits_total{{{labels}}} {c['prefix_hits']}"]
    if args.fake_itl_ms is not None:
        lines += ["# TYPE vllm:inter_token_latency_seconds histogram",
                  f"vllm:inter_token_latency_seconds_sum{{{labels}}} {c['itl_n'] * args.fake_itl_ms / 1e3}",
                  f"vllm:inter_token_latency_seconds_count{{{labels}}} {c['itl_n']}"]
    if K:
        lines += ["# TYPE vllm:spec_decode_num_drafts counter", f"vllm:spec_decode_num_drafts_total{{{labels}}} {c['drafts']}",
                  "# TYPE vllm:spec_decode_num_draft_tokens counter",
                  f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {c['drafts'] * K}",
                  "# TYPE vllm:spec_decode_num_accepted_tokens counter",
                  f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {c['drafts']}",
                  "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter"]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} '
                  f'{c["drafts"] if i == 0 else 0}' for i in range(K)]
    return "\n".join(lines) + "\n"


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/metrics":
            body = metrics_text().encode()
        else:
            body = b"ok"
        self.send_response(200 if self.path in ("/health", "/metrics") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        # no "model": the served one (vLLM's completions take it as optional; SGLang's /generate has none)
        if self.path != "/v1/completions" or payload.get("model", args.served_model_name) != args.served_model_name:
            body = json.dumps({"error": {"message": f"The model `{payload.get('model')}` does not exist.",
                                         "code": 404}}).encode()
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        n = int(payload.get("max_tokens") or 16)
        words = ["<bos>", *str(payload.get("prompt", "")).split()]
        prompt_tokens = len(words) - 1
        with lock:
            counters["prefix_queries"] += len(words)
            counters["prefix_hits"] += cache.lookup_and_store(words)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def event(data) -> None:
            self.wfile.write(b"data: " + (data if isinstance(data, bytes) else json.dumps(data).encode()) + b"\n\n")
            self.wfile.flush()

        head = {"id": "cmpl-fake", "object": "text_completion", "model": args.served_model_name}
        event({**head, "choices": [{"index": 0, "text": " tok", "finish_reason": None}]})
        if n > 1:
            event({**head, "choices": [{"index": 0, "text": " tok" * (n - 1), "finish_reason": "length"}]})
        with lock:
            counters["requests"] += 1
            counters["tokens"] += n
            counters["itl_n"] += max(0, n - 1)
            counters["drafts"] += n // 2 if K else 0
        if (payload.get("stream_options") or {}).get("include_usage"):
            event({**head, "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                                                    "total_tokens": prompt_tokens + n}})
        event(b"[DONE]")

    def log_message(self, *a):
        pass


http.server.ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
