"""Fuzz the page, the results fragment and the API with random and hostile requests (issue 17's measure).

    python benchmarks/fuzz_requests.py [--requests 10000] [--seed 0]

Sends the requests through Django's test client (the full middleware stack, DEBUG off) with the offline
catalog, and prints the count per status, every response >= 500 (with its query), and the slowest times.
Target: 0 responses >= 500, none slower than 1 s on an idle machine."""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B", "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-120b",
          "Qwen/Qwen3-30B-A3B", "google/gemma-3-27b-it", "Qwen/Qwen3-Next-80B-A3B-Instruct", "nobody/nothing",
          "--trust-remote-code", "a" * 300, "tiny-random/llama", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF",
          "google/gemma-4-26B-A4B", "meta-llama/Llama-3.1-70B-Instruct"]
VALUES = ["1", "0", "-1", "8192", "32k", "32K", "1e400k", "16M", "1.5K", "nan", "inf", "9" * 40, "", " ", "abc",
          "0.5", "1.01", "true", "auto", "fp8", "bfloat16", "H100", "A100", "CPU", "RTX 4090", "custom:24GiB",
          "Apple M2 Max 64GB", "FLASH_ATTN", "FLASHMLA", "q8_0", "on", "vllm", "sglang", "llama.cpp", "ollama",
          "0.32.0", "0.19.0", "0.6.4", "[" * 1300, '{"method":"ngram","num_speculative_tokens":3}',
          '{"method":"eagle3","num_speculative_tokens":3}', '{"method":"mtp","num_speculative_tokens":1}',
          '{"method":"draft_model","model":"x/y","num_speculative_tokens":1000}', "%ED%A0%80",
          "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "Llama-3.2-1B-Instruct-Q8_0.gguf", "../../etc/passwd.gguf",
          '{"method":"draft_model","model":"bartowski/Llama-3.2-1B-Instruct-GGUF","num_speculative_tokens":8}',
          "off", "0.21.0", "0.30.0", "0.32.15", "RTX 3060", "Llama-3.1-70B-Instruct-Q4_K_M.gguf",
          "gemma-4-26B-A4B-it-Q4_K_M.gguf", "4096", '{"method":"suffix","num_speculative_tokens":3}',
          '{"method":"eagle3","num_speculative_tokens":3,"model":"nobody/head"}', "EAGLE3", "NEXTN", "NGRAM",
          '{"method":"qwen3_next_mtp","num_speculative_tokens":1}', "0.4.10.post2", "0.5.10.post1", "10", "64"]


def random_query(rng: random.Random, keys: list[str]) -> dict[str, str]:
    q = {"model": rng.choice(MODELS)}
    for _ in range(rng.randint(0, 6)):
        q[rng.choice(keys)] = rng.choice(VALUES) if rng.random() < 0.9 else "".join(
            chr(rng.randint(32, 0x2FFF)) for _ in range(rng.randint(0, 12)))
    return q


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from calculator.request import ALIASES, KNOWN_PARAMS

    call_command("migrate", verbosity=0)
    keys = [*KNOWN_PARAMS, *ALIASES, "bogus"]
    rng = random.Random(args.seed)
    client = Client(HTTP_HOST="localhost")
    statuses: Counter = Counter()
    errors, times = [], []
    for i in range(args.requests):
        q = random_query(rng, keys)
        path = ["/api/estimate", "/", "/"][i % 3]
        headers = {"HTTP_HX_REQUEST": "true"} if i % 3 == 2 else {}
        t0 = time.monotonic()
        r = client.get(path, q, **headers)
        dt = time.monotonic() - t0
        statuses[r.status_code] += 1
        times.append((dt, path, q))
        if r.status_code >= 500:
            errors.append((r.status_code, path, q))
    times.sort(key=lambda t: -t[0])
    print(f"requests {args.requests}: " + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())))
    print(f"responses >= 500: {len(errors)}")
    for status, path, q in errors[:20]:
        print(f"  {status} {path} {json.dumps(q)[:300]}")
    print(f"slowest: {times[0][0]:.3f} s; over 1 s: {sum(1 for t in times if t[0] > 1)}")
    for dt, path, q in times[:5]:
        print(f"  {dt:.3f} s {path} {json.dumps(q)[:200]}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
