"""The Content-Security-Policy in a real browser (Debian's Chromium through Playwright): the calculator
page and a run page draw their Vega charts and htmx swaps fragments with ``script-src 'self'`` and no
CSP violation. Only ``wait_for_selector`` is used: Playwright's string predicates need eval, which the
policy forbids."""
from __future__ import annotations

import os

import pytest

from tests.test_browser import ARGS, CHROMIUM, LLAMA  # noqa: F401 - same browser set-up

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(autouse=True)
def _llama_loaded(transactional_db, offline_hub):
    """As tests/test_browser.py: Llama from the offline catalog into the metadata cache before the browser."""
    from calculator.plan import load_metadata

    load_metadata(LLAMA, None)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def watched_page(browser):
    """A page whose CSP violations (Chromium logs each as a console error "Refused to ... because it
    violates the following Content Security Policy directive") and uncaught script errors are collected
    in ``page.problems``. Other console errors (htmx's own warnings) are not this test's concern."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(20_000)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text)
            if m.type == "error" and "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.problems = problems
    yield page
    context.close()


def test_the_calculator_draws_its_charts_under_the_policy(live_server, watched_page):
    page = watched_page
    response = page.goto(f"{live_server.url}/?model={LLAMA}&max_model_len=8192")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector("[data-vega-spec='spec-concurrency'][data-rendered='1'] svg")
    page.fill("#id_max_model_len", "4096")  # an htmx swap, then the charts again
    page.wait_for_url("**max_model_len=4096**")
    page.wait_for_selector("[data-vega-spec='spec-concurrency'][data-rendered='1'] svg")
    assert page.problems == []


def test_a_run_page_draws_its_charts_under_the_policy(live_server, watched_page):
    from validator.models import ValidationRun

    def phase(base: float) -> dict:
        agg = {f"{p}_{m}_ms": base * k * (i + 1) for i, m in enumerate(("ttft", "tpot", "itl", "e2el"))
               for p, k in (("p50", 1.0), ("p95", 1.5), ("p99", 2.0))}
        bench = {"ttfts_ms": [base, base * 1.2, base * 0.9], "e2els_ms": [base * 10, base * 11, base * 12]}
        return {"aggregate": {**agg, "output_throughput": 300.0 / base,
                              "spec_decode": {"acceptance_rate": 0.6, "mean_acceptance_length": 2.8,
                                              "per_position": [0.8, 0.6, 0.4], "num_drafts": 10}},
                "repeats": [{"bench": bench}], "serve_argv": ["vllm", "serve", "tiny-random/llama"], "argv": []}

    run = ValidationRun.objects.create(configuration={"model_id": "tiny-random/llama", "profile": {"repeats": 1}},
                                       status="done", measured={"phases": {"baseline": phase(10.0),
                                                                           "speculative": phase(8.0)}})
    page = watched_page
    page.goto(f"{live_server.url}{run.get_absolute_url()}")
    for name in ("latency", "distribution", "acceptance"):
        page.wait_for_selector(f"#chart-{name} svg, #chart-{name} canvas")
    assert page.problems == []
