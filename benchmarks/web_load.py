"""Load generator for the calculator's two hot endpoints, on loopback.

Sends a bounded number of requests (default 2,000 per endpoint, 8 at a time, threads + http.client)
to the results fragment (``GET /?...`` with ``HX-Request: true``, what htmx sends on every form change)
and to the JSON API (``GET /api/estimate?...``), both for a catalog model, after a short warm-up.
Prints requests/s and p50/p95/p99 latency in milliseconds. Target: p95 < 30 ms.

    python benchmarks/web_load.py                      # starts scripts/start on a free port, stops it after
    python benchmarks/web_load.py --url http://127.0.0.1:8000   # against a running server

With no ``--url`` the server is the README's production one (``scripts/start``: gunicorn with
``WEB_CONCURRENCY`` workers); set ``VENV`` if the virtualenv is not ``.venv``.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
QUERY = urlencode({"model": MODEL, "gpu": "H100", "max_model_len": 8192, "vllm_version": "0.32.0"}, safe="/")
VARYING = urlencode({"model": MODEL, "gpu": "H100", "vllm_version": "0.32.0"}, safe="/")
# (label, path for request i, headers). The first two repeat one configuration (the cached case the
# target is for); the third changes max_model_len on every request, as a user typing does (every
# request misses the per-process caches for its own point).
ENDPOINTS = (
    ("results fragment (HX-Request)", lambda i: f"/?{QUERY}", {"HX-Request": "true"}),
    ("JSON API /api/estimate", lambda i: f"/api/estimate?{QUERY}", {}),
    (
        "fragment, new max_model_len each",
        lambda i: f"/?{VARYING}&max_model_len={4096 + i}",
        {"HX-Request": "true"},
    ),
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(host: str, port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection(host, port, timeout=2)
            conn.request("GET", "/api/estimate?" + QUERY)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"server on {host}:{port} not ready after {timeout:.0f} s")


def run(host: str, port: int, path_for, headers: dict[str, str], total: int, concurrency: int):
    """Send ``total`` GETs with ``concurrency`` threads; returns (latencies in s, wall s, errors)."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    counter = iter(range(total))

    def worker() -> None:
        conn = http.client.HTTPConnection(host, port, timeout=30)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            path = path_for(i)
            start = time.perf_counter()
            try:
                conn.request("GET", path, headers=headers)
                resp = conn.getresponse()
                resp.read()
                status, will_close = resp.status, resp.will_close
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=30)
                with lock:
                    errors.append(repr(exc))
                continue
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                if status != 200:
                    errors.append(f"HTTP {status}")
            if will_close:  # gunicorn's sync workers close after each response
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, time.perf_counter() - t0, errors


def pct(sorted_values: list[float], q: float) -> float:
    return (
        statistics.quantiles(sorted_values, n=100, method="inclusive")[q - 1]
        if len(sorted_values) > 1
        else sorted_values[0]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running server (default: start scripts/start on a free port)")
    parser.add_argument("--requests", type=int, default=2000, help="requests per endpoint (default 2000)")
    parser.add_argument("--concurrency", type=int, default=8, help="parallel connections (default 8)")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured requests per endpoint first")
    args = parser.parse_args()

    server = None
    if args.url:
        parts = urlsplit(args.url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
    else:
        host, port = "127.0.0.1", free_port()
        env = {**os.environ, "PORT": str(port)}
        server = subprocess.Popen(
            [str(ROOT / "scripts" / "start")],
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        wait_ready(host, port)
        workers = os.environ.get("WEB_CONCURRENCY", "2") if server else "?"
        print(
            f"server http://{host}:{port} (gunicorn workers: {workers}), model {MODEL}, "
            f"{args.requests} requests per endpoint at concurrency {args.concurrency}\n"
        )
        print(f"{'endpoint':34} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>7}")
        worst_p95 = 0.0
        for n, (label, path_for, headers) in enumerate(ENDPOINTS):
            warm = (
                (lambda i: path_for(-1 - i)) if n == 2 else path_for
            )  # warm-up must not pre-fill the misses
            run(host, port, warm, headers, args.warmup, args.concurrency)
            lat, wall, errors = run(host, port, path_for, headers, args.requests, args.concurrency)
            lat.sort()
            p50, p95, p99 = (pct(lat, q) * 1000 for q in (50, 95, 99))
            if n < 2:
                worst_p95 = max(worst_p95, p95)
            print(f"{label:34} {len(lat) / wall:8.1f} {p50:8.1f} {p95:8.1f} {p99:8.1f} {len(errors):7d}")
            if errors:
                print(f"  first error: {errors[0]}")
        print(
            f"\ntarget p95 < 30 ms (repeated configuration): {'met' if worst_p95 < 30 else 'NOT met'} "
            f"(worst p95 {worst_p95:.1f} ms); CPUs: {os.cpu_count()}, load generator on the same machine"
        )
        return 0
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
