"""Browser tests: Playwright driving Debian's Chromium (``/usr/bin/chromium``, never ``playwright
install``) against pytest-django's live server. Fill the form, watch the results change without a page
load, open the permalink in a fresh page, see a bad value's message by its field, and the same form
without JavaScript. Leaves a screenshot in ``test-artifacts/results.png``."""

from __future__ import annotations

from django.core.cache import cache

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install chromium)"
    ),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

# Playwright's sync API runs an event loop in this thread; Django's ORM calls from the live server's
# fixtures would otherwise refuse to run beside it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(autouse=True)
def _offline_hub(transactional_db, monkeypatch):
    """Models come from the offline catalog through the metadata cache (the Hub is never contacted).
    The first lookup imports transformers to count parameters (seconds): do it before the browser waits."""
    from calculator.plan import load_metadata

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache.clear()
    load_metadata(LLAMA, None)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    # Playwright's string predicates (wait_for_function) need eval, which the site's Content-Security-Policy
    # forbids; tests/test_security_browser.py checks the pages under the policy.
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def _numbers(page) -> dict[str, str]:
    return {
        sel: page.inner_text(sel) for sel in ("#kv-cache-tokens", "#max-concurrency", "#kv-bytes-per-token")
    }


def test_it_updates_results_in_place_and_the_permalink_reproduces_them(live_server, page, browser):
    page.goto(f"{live_server.url}/")
    page.evaluate("window.__noReload = 'still here'")
    page.fill("#id_model", LLAMA)
    page.fill("#id_max_model_len", "8192")
    page.wait_for_function("document.querySelector('#max-concurrency') !== null")
    page.wait_for_url("**max_model_len=8192**")
    first = _numbers(page)

    page.fill("#id_max_model_len", "32768")
    page.wait_for_url("**max_model_len=32768**")
    page.wait_for_function(
        f"document.querySelector('#max-concurrency').innerText !== {first['#max-concurrency']!r}"
    )
    second = _numbers(page)
    assert page.evaluate("window.__noReload") == "still here"  # no page load: htmx swapped the fragment
    assert second["#kv-bytes-per-token"] == first["#kv-bytes-per-token"]
    assert page.get_attribute("#permalink", "href") == page.url.removeprefix(live_server.url)
    assert "32,768" in page.title() or "32768" in page.title()

    page.wait_for_selector("[data-vega-spec='spec-concurrency'][data-rendered='1'] svg")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "results.png"), full_page=True)

    fresh = browser.new_context().new_page()
    fresh.goto(page.url)
    assert _numbers(fresh) == second
    assert fresh.input_value("#id_max_model_len") == "32768"
    fresh.context.close()


def test_it_shows_a_bad_value_by_its_field(live_server, page):
    page.goto(f"{live_server.url}/?model={LLAMA}")
    page.fill("#id_gpu_memory_utilization", "1.5")
    error = page.wait_for_selector("#errors-gpu_memory_utilization .error")
    assert "less than or equal to 1.0" in error.inner_text()
    assert page.input_value("#id_gpu_memory_utilization") == "1.5"
    page.fill("#id_gpu_memory_utilization", "0.8")
    page.wait_for_selector("#errors-gpu_memory_utilization .error", state="detached")
    page.wait_for_selector("#kv-cache-tokens")


def test_it_works_without_javascript(live_server, browser):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{live_server.url}/")
    page.fill("#id_model", LLAMA)
    page.fill("#id_max_model_len", "16K")
    page.click("button[type=submit]")
    page.wait_for_selector("#kv-cache-tokens")
    assert "max_model_len=16384" in page.url  # redirected to the canonical permalink
    assert "revision=" not in page.url
    context.close()


def test_the_estimate_button_also_updates_in_place(live_server, page):
    page.goto(f"{live_server.url}/?model={LLAMA}&max_model_len=4096")
    page.evaluate("window.__noReload = 'still here'")
    page.fill("#id_max_model_len", "2048")
    page.click("button[type=submit]")
    page.wait_for_url("**max_model_len=2048**")
    page.wait_for_selector("#curve-table tr.current >> text=2,048", state="attached")
    assert page.evaluate("window.__noReload") == "still here"
