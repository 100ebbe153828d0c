"""Browser tests: Playwright driving Debian's Chromium (``/usr/bin/chromium``, never ``playwright
install``) against pytest-django's live server. Fill the form, watch the results change without a page
load, open the permalink in a fresh page, see a bad value's message by its field, and the same form
without JavaScript. Leaves a screenshot in ``test-artifacts/results.png``."""

from __future__ import annotations

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
def _llama_loaded(transactional_db, offline_hub):
    """Llama's metadata in the cache, committed for the live server (offline: ``offline_hub``). The first lookup
    imports transformers to count parameters (seconds): do it before the browser waits."""
    from calculator.plan import load_metadata

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
    good = page.url
    page.fill("#id_gpu_memory_utilization", "1.5")
    error = page.wait_for_selector("#errors-gpu_memory_utilization .error")  # the 400 is swapped in
    assert "must be at most 1.0" in error.inner_text()  # the request model's sentence
    assert "1.5" in page.inner_text("#error-summary") and not page.query_selector("#request-error")
    assert page.input_value("#id_gpu_memory_utilization") == "1.5"
    assert page.url == good  # the bad address is not pushed
    page.fill("#id_gpu_memory_utilization", "0.8")
    page.wait_for_selector("#errors-gpu_memory_utilization .error", state="detached")
    page.wait_for_selector("#kv-cache-tokens")
    page.wait_for_url("**gpu_memory_utilization=0.8**")  # a good value pushes its permalink again


def test_a_left_out_parameter_is_said_and_the_address_bar_shows_the_permalink(live_server, page):
    page.goto(f"{live_server.url}/?model={LLAMA}&gpu=H100&max_model_length=4096")
    assert "Not applied: max_model_length=4096" in page.inner_text("#not-applied")
    page.wait_for_function("!location.search.includes('max_model_length')")
    assert page.url.endswith(page.get_attribute("#not-applied", "data-permalink"))


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


# --- issue 16: the page a serving engineer keeps open ------------------------------------------------------
def _sized(browser, width, height):
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(20_000)
    return page


def test_back_and_forward_restore_the_form_and_the_results_together(live_server, page):
    """The issue's steps: H100 -> A100 -> max_model_len 16384 -> fp8 KV, then Back / Forward."""
    page.goto(f"{live_server.url}/?model={LLAMA}&gpu=H100&vllm_version=0.32.0")
    page.select_option("#id_gpu", "A100")
    page.wait_for_url("**gpu=A100**")
    page.fill("#id_max_model_len", "16384")
    page.wait_for_url("**max_model_len=16384**")
    page.wait_for_selector("#curve-table tr.current >> text=16,384", state="attached")
    at_16k = _numbers(page)
    page.select_option("#id_kv_cache_dtype", "fp8")
    page.wait_for_url("**kv_cache_dtype=fp8**")
    page.wait_for_function(
        f"document.querySelector('#kv-bytes-per-token').innerText !== {at_16k['#kv-bytes-per-token']!r}")
    with_fp8 = _numbers(page)

    page.go_back()
    page.wait_for_function("!location.search.includes('kv_cache_dtype')")
    page.wait_for_function("document.querySelector('#id_kv_cache_dtype').value === 'auto'")
    page.wait_for_function(
        f"document.querySelector('#kv-bytes-per-token').innerText === {at_16k['#kv-bytes-per-token']!r}")
    assert page.input_value("#id_gpu") == "A100" and page.input_value("#id_max_model_len") == "16384"
    assert _numbers(page) == at_16k

    page.go_forward()
    page.wait_for_function("location.search.includes('kv_cache_dtype=fp8')")
    page.wait_for_function("document.querySelector('#id_kv_cache_dtype').value === 'fp8'")
    page.wait_for_function(
        f"document.querySelector('#kv-bytes-per-token').innerText === {with_fp8['#kv-bytes-per-token']!r}")
    assert page.input_value("#id_max_model_len") == "16384"

    # after Back, the next edit starts from the restored form: nothing of the user's settings is dropped
    page.go_back()
    page.wait_for_function("document.querySelector('#id_kv_cache_dtype').value === 'auto'")
    page.fill("#id_concurrency", "3")
    page.wait_for_url("**concurrency=3**")
    assert "gpu=A100" in page.url and "max_model_len=16384" in page.url and "kv_cache_dtype" not in page.url
    page.wait_for_selector("[data-vega-spec='spec-concurrency'][data-rendered='1'] svg")  # charts redrawn


def test_an_example_answers_without_typing_and_draws_the_overflow(live_server, page):
    page.goto(f"{live_server.url}/")
    assert page.inner_text("#verdict-status") == "Works"  # the landing page already answers an example
    page.click("[data-preset='70b-on-24gb']")
    page.wait_for_url("**Llama-3.1-70B-Instruct**")
    assert page.get_attribute("#verdict", "data-verdict") == "does_not_fit"
    assert page.input_value("#id_model") == "meta-llama/Llama-3.1-70B-Instruct"
    bar = page.locator(".membar").bounding_box()
    device = page.locator("#membar-device").bounding_box()
    over = page.locator("#membar-over").bounding_box()
    # the GPU ends well inside the bar (24 GB of 134 GiB needed); the hatched overflow runs to the bar's end
    assert bar["x"] < device["x"] < bar["x"] + 0.25 * bar["width"]
    assert over["x"] == pytest.approx(device["x"], abs=2) and over["x"] + over["width"] == pytest.approx(
        bar["x"] + bar["width"], abs=2)
    assert "short by" in page.inner_text("#kv-cache-gib")


def test_on_a_phone_the_verdict_comes_first_and_stays_in_view(live_server, browser):
    page = _sized(browser, 390, 844)
    page.goto(f"{live_server.url}/")
    for sel in ("#verdict", "#kv-cache-tokens", "#max-concurrency"):
        box = page.locator(sel).bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= 844, sel  # inside the first viewport
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
    # editing the form further down: the verdict bar at the bottom follows the answer
    page.locator("#id_max_model_len").scroll_into_view_if_needed()
    page.fill("#id_max_model_len", "131072")
    page.wait_for_url("**max_model_len=131072**")
    pin = page.locator("#verdict-pin")
    pin.wait_for(state="visible")
    assert "131,072" in pin.inner_text()
    box = pin.bounding_box()
    assert box["y"] + box["height"] == pytest.approx(844, abs=1)
    page.context.close()


def test_on_a_desktop_results_sit_beside_the_common_fields(live_server, browser):
    page = _sized(browser, 1366, 900)
    page.goto(f"{live_server.url}/")
    form = page.locator("#id_model").bounding_box()
    verdict = page.locator("#verdict").bounding_box()
    assert verdict["x"] > form["x"] + form["width"]  # beside, not below
    for sel in ("#id_model", "#id_gpu", "#id_tensor_parallel_size", "#id_max_model_len", "#id_concurrency",
                "#id_dtype", "#id_kv_cache_dtype", "#verdict", "#kv-cache-tokens"):
        box = page.locator(sel).bounding_box()
        assert box["y"] + box["height"] <= 900, sel
    page.context.close()


def test_the_compat_page_starts_from_the_calculators_state(live_server, page):
    page.goto(f"{live_server.url}/?model=Qwen/Qwen3-30B-A3B&gpu=H100&kv_cache_dtype=fp8&vllm_version=0.32.0")
    page.wait_for_function("document.querySelector('.site-nav a[href^=\"/compat/\"]').href.includes('Qwen')")
    page.click(".site-nav >> text=Compatibility matrix")
    page.wait_for_url("**/compat/?**")
    assert page.input_value("#id_model") == "Qwen/Qwen3-30B-A3B"
    assert page.input_value("#id_gpu") == "H100" and page.input_value("#id_kv_cache_dtype") == "fp8"
    assert "Qwen/Qwen3-30B-A3B" in page.inner_text("main p >> nth=1")
    # the question from the issue, with pickers only: does FLASHINFER take an fp8 KV cache on an A100?
    page.select_option("#id_gpu", "A100")
    page.click("#matrix-form button[type=submit]")
    page.wait_for_url("**gpu=A100**")
    assert page.inner_text("#matrix-kv >> xpath=preceding::h2[1]").endswith(" on A100")
    assert "on A100" in page.inner_text("#matrix-kv >> xpath=preceding::h2[1]")
    cell = page.locator("#matrix-kv tr:has(th:text-is('FLASHINFER')) td").nth(
        page.locator("#matrix-kv tr >> nth=0").locator("th").all_inner_texts().index("fp8") - 1)
    assert cell.inner_text().strip() in ("ok", "no", "depends")
    cell.locator("a").click()
    page.wait_for_url("**/compat/verdict/**")
    assert page.input_value("#id_attention_backend") == "FLASHINFER" and page.input_value("#id_gpu") == "A100"
    page.wait_for_selector("#compat-summary")


def test_switching_the_runtime_shows_its_settings_group_and_keeps_what_was_typed(live_server, page):
    """vLLM -> SGLang opens SGLang's settings group without a reload; -> llama.cpp hides it (its value is not sent:
    no "Not applied" note) and opens llama.cpp's; back to SGLang shows the value typed before; Back shows llama.cpp's
    group again."""
    sglang = "details[data-runtimes='sglang']"
    llamacpp = "details[data-runtimes='llama.cpp ollama']"
    page.goto(f"{live_server.url}/?model={LLAMA}&gpu=H100")
    page.evaluate("window.__noReload = 'still here'")
    assert not page.is_visible(sglang) and not page.is_visible(llamacpp)

    page.select_option("#id_runtime", "sglang")
    page.wait_for_url("**runtime=sglang**")
    assert page.is_visible(sglang) and page.get_attribute(sglang, "open") is not None
    assert not page.is_visible(llamacpp)
    page.fill("#id_mem_fraction_static", "0.8")
    page.wait_for_url("**mem_fraction_static=0.8**")

    page.select_option("#id_runtime", "llama.cpp")
    page.wait_for_url("**runtime=llama.cpp**")
    page.wait_for_selector("#kv-cache-tokens")
    assert not page.is_visible(sglang)
    assert page.is_visible(llamacpp) and page.get_attribute(llamacpp, "open") is not None
    assert "mem_fraction_static" not in page.url and "Not applied" not in page.inner_text("#results")

    page.select_option("#id_runtime", "sglang")
    page.wait_for_url("**runtime=sglang**mem_fraction_static=0.8**")
    assert page.is_visible(sglang) and page.input_value("#id_mem_fraction_static") == "0.8"
    assert not page.is_visible(llamacpp)
    assert page.evaluate("window.__noReload") == "still here"

    page.go_back()  # htmx renders the llama.cpp page again from its URL: the same groups show
    page.wait_for_function("document.querySelector('#id_runtime').value === 'llama.cpp'")
    page.wait_for_selector(sglang, state="hidden")
    assert page.is_visible(llamacpp)


def test_the_speculative_charts_draw_and_their_data_opens_without_javascript(live_server, page, browser):
    """Both speculative charts draw (their layers carry the names the data tables read), and a page without scripts
    opens each chart's data table from its summary."""
    query = (f"/?model={LLAMA}&gpu=H100&concurrency=8&acceptance_rate=0.6"
             "&speculative_config=%7B%22method%22%3A%22ngram%22%2C%22num_speculative_tokens%22%3A3%7D")
    page.goto(f"{live_server.url}{query}")
    for chart in ("spec-speedup", "spec-speedup-concurrency"):
        page.wait_for_selector(f"[data-vega-spec='{chart}'][data-rendered='1'] svg")
    assert not page.is_visible("#speedup-table")

    context = browser.new_context(java_script_enabled=False)
    try:
        plain = context.new_page()
        plain.goto(f"{live_server.url}{query}")
        for table in ("#speedup-table", "#speedup-concurrency-table"):
            assert not plain.is_visible(table)
            plain.click(f"details:has({table}) > summary")
            assert plain.is_visible(table)
        assert plain.inner_text("#speedup-concurrency-table tr.current th") == "8 (configured)"
    finally:
        context.close()
