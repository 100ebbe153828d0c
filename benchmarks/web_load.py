"""Load generator for the calculator's two hot endpoints, on loopback.

Sends a bounded number of requests (default 2,000 per endpoint, 8 at a time, threads + http.client)
to the results fragment (``GET /?...`` with ``HX-Request: true``, what htmx sends on every form change)
and to the JSON API (``GET /api/estimate?...``), both for a catalog model, after a short warm-up.
Prints requests/s and p50/p95/p99 latency in milliseconds. Target: p95 < 30 ms.

Then every page of the site, warm (after one unmeasured request each), one request at a time: the server's
own time (the ``Server-Timing: app;dur=`` header, ``calculator/web/timing.py``) and the client's, p50 and max
in milliseconds. Target: every page well under 100 ms (``--page-requests`` per page, default 20).

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


PAGES = (
    ("landing page /", "/", {}),
    ("example: 8B on RTX 4090", "/?model=meta-llama/Llama-3.1-8B-Instruct&gpu=RTX4090&max_model_len=32768"
                                "&vllm_version=0.32.0", {}),
    ("example: 70B does not fit", "/?model=meta-llama/Llama-3.1-70B-Instruct&gpu=RTX4090&vllm_version=0.32.0", {}),
    ("example: DeepSeek-V3 MTP", "/?model=deepseek-ai/DeepSeek-V3&gpu=H200&tensor_parallel_size=8&max_model_len=32768"
                                 "&concurrency=4&vllm_version=0.32.0&speculative_config=%7B%22method%22:%22mtp%22,"
                                 "%22num_speculative_tokens%22:1%7D", {}),
    ("results fragment (HX-Request)", f"/?{QUERY}", {"HX-Request": "true"}),
    ("history restore (Back)", f"/?{QUERY}", {"HX-Request": "true", "HX-History-Restore-Request": "true"}),
    ("JSON API", f"/api/estimate?{QUERY}", {}),
    ("/compat/ (default)", "/compat/", {}),
    ("/compat/ from the calculator", "/compat/?model=Qwen/Qwen3-30B-A3B&gpu=H100&kv_cache_dtype=fp8"
                                     "&vllm_version=0.32.0", {}),
    ("/compat/verdict/", "/compat/verdict/?model=meta-llama/Llama-3.1-8B-Instruct&gpu=A100&kv_cache_dtype=fp8"
                         "&attention_backend=FLASHINFER", {}),
    ("/runs/", "/runs/", {}),
    ("404 page", "/no/such/page?model=meta-llama/Llama-3.1-8B-Instruct", {}),
    ("414 page", "/?model=meta-llama/Llama-3.1-8B-Instruct&junk=" + "x" * 9000, {}),
)


WARM = 4  # unmeasured requests per page (more than the default 2 gunicorn workers)


def page_times(host: str, port: int, path: str, headers: dict[str, str], n: int):
    """``n`` sequential GETs of ``path`` after ``WARM`` unmeasured ones (each gunicorn worker fills its own
    per-process caches): (server ms list, client ms list, statuses)."""
    server, client, statuses = [], [], set()
    for i in range(n + WARM):
        conn = http.client.HTTPConnection(host, port, timeout=60)
        start = time.perf_counter()
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        resp.read()
        elapsed = (time.perf_counter() - start) * 1000
        conn.close()
        if i < WARM:
            continue  # warm-up: fills the caches this page reads
        statuses.add(resp.status)
        client.append(elapsed)
        timing = resp.getheader("Server-Timing") or ""
        if "dur=" in timing:
            server.append(float(timing.split("dur=")[1].split(",")[0]))
    return server, client, statuses


def print_pages(host: str, port: int, n: int) -> float:
    """The per-page table; returns the worst server p50 (ms)."""
    print(f"\n{'page (warm, sequential)':34} {'status':>6} {'server p50':>10} {'server max':>10} "
          f"{'client p50':>10} {'client max':>10}")
    worst = 0.0
    for label, path, headers in PAGES:
        server, client, statuses = page_times(host, port, path, headers, n)
        sp50 = statistics.median(server) if server else float("nan")
        worst = max(worst, sp50) if server else worst
        print(f"{label:34} {'/'.join(map(str, sorted(statuses))):>6} {sp50:10.1f} "
              f"{max(server) if server else float('nan'):10.1f} {statistics.median(client):10.1f} {max(client):10.1f}")
    return worst


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
    parser.add_argument("--page-requests", type=int, default=20, help="sequential requests per page (default 20)")
    parser.add_argument("--pages-only", action="store_true", help="only the per-page server times")
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
        worst_page = print_pages(host, port, args.page_requests)
        print(f"\ntarget: every page's server time well under 100 ms warm: "
              f"{'met' if worst_page < 50 else 'NOT met'} (worst server p50 {worst_page:.1f} ms)\n")
        if args.pages_only:
            return 0
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
