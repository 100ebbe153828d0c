"""Screenshots of the site's main states at a desktop (1366x900) and a phone (390x844) size, for review.

    python benchmarks/screenshots.py                      # starts scripts/start on a free port, stops it after
    python benchmarks/screenshots.py --url http://127.0.0.1:8000 --out test-artifacts/screenshots

Drives Debian's Chromium (``/usr/bin/chromium``) with Playwright (never ``playwright install``). Writes
``<state>-<size>.png`` (the first viewport, what a user sees without scrolling) and ``<state>-<size>-full.png``
(the whole page) into ``--out`` (default ``test-artifacts/screenshots``), and prints each file.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))
from web_load import ROOT, free_port, wait_ready  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
SIZES = {"desktop": (1366, 900), "phone": (390, 844)}
LONG = "/?model=meta-llama/Llama-3.1-8B-Instruct&junk=" + "x" * 9000


def states() -> list[tuple[str, str]]:
    """``(name, path)`` of the states to capture: the landing page, every example, a bad value, the
    compatibility matrix (from the calculator's state), the runs list, the error pages."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from calculator.web.presets import PRESETS

    out = [("landing", "/")]
    out += [(f"preset-{p.slug}", f"/?{p.query}") for p in PRESETS]
    out += [
        ("bad-value", "/?model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100&gpu_memory_utilization=1.5"),
        ("compat", "/compat/?model=" + quote("Qwen/Qwen3-30B-A3B", safe="/") + "&gpu=A100&kv_cache_dtype=fp8"),
        ("compat-verdict", "/compat/verdict/?model=meta-llama/Llama-3.1-8B-Instruct&gpu=A100&kv_cache_dtype=fp8"
                           "&attention_backend=FLASHINFER"),
        ("runs", "/runs/"),
        ("not-found", "/no/such/page?model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100"),
        ("too-long", LONG),
    ]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running server (default: start scripts/start on a free port)")
    parser.add_argument("--out", default=str(ROOT / "test-artifacts" / "screenshots"))
    parser.add_argument("--only", default="", help="only the states whose name contains this")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = None
    if args.url:
        base = args.url.rstrip("/")
    else:
        port = free_port()
        server = subprocess.Popen([str(ROOT / "scripts" / "start")], cwd=ROOT, env={**os.environ, "PORT": str(port)},
                                  start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        wait_ready("127.0.0.1", port)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
            for size, (w, h) in SIZES.items():
                context = browser.new_context(viewport={"width": w, "height": h}, device_scale_factor=1,
                                              is_mobile=size == "phone", has_touch=size == "phone")
                page = context.new_page()
                for name, path in states():
                    if args.only not in name:
                        continue
                    page.goto(base + path)
                    page.wait_for_load_state("networkidle")
                    try:  # charts are drawn after the page loads
                        page.wait_for_function("[...document.querySelectorAll('[data-vega-spec]')]"
                                               ".every(e => e.dataset.rendered || e.querySelector('svg'))",
                                               timeout=5000)
                    except Exception:
                        pass
                    for suffix, full in (("", False), ("-full", True)):
                        file = out / f"{name}-{size}{suffix}.png"
                        page.screenshot(path=str(file), full_page=full)
                        print(file)
                context.close()
            browser.close()
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
