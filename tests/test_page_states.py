"""The page a serving engineer keeps open (issue 16), server side: the examples, the honest memory bar and
charts, the compat page's pickers and cache, the runs list, the run page's verdict, the error pages.
The browser side (Back/Forward, the phone layout) is in ``test_browser.py``."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from urllib.parse import parse_qsl

import pytest

from calculator.request import InputError, parse_request
from calculator.web.presets import PRESETS

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
BIG_ON_SMALL = "/?model=meta-llama/Llama-3.1-70B-Instruct&gpu=RTX4090&vllm_version=0.32.0"


pytestmark = pytest.mark.usefixtures("offline_hub")


# --- examples -------------------------------------------------------------------------------------------
def test_every_example_is_a_canonical_permalink_with_the_expected_verdict(client):
    expected = {"70b-on-24gb": "does_not_fit"}
    for p in PRESETS:
        r = client.get(f"/?{p.query}")
        assert r.status_code == 200, p.slug  # canonical: no redirect
        verdict = re.search(r'data-verdict="(\w+)"', r.content.decode()).group(1)
        assert verdict == expected.get(p.slug, "works"), p.slug


def test_the_examples_are_the_ones_the_issue_names(client):
    by_slug = {p.slug: dict(parse_qsl(p.query)) for p in PRESETS}
    assert by_slug["8b-4090-32k"]["max_model_len"] == "32768" and by_slug["8b-4090-32k"]["gpu"] == "RTX4090"
    assert by_slug["moe-h100-fp8kv"]["kv_cache_dtype"] == "fp8"
    assert by_slug["deepseek-v3-8xh200"]["tensor_parallel_size"] == "8"
    mtp = by_slug["mtp-profile"]
    # the field guide's profile: method = MTP, working_context = 32768, concurrency = 4
    assert json.loads(mtp["speculative_config"])["method"] == "mtp"
    assert mtp["max_model_len"] == "32768" and mtp["concurrency"] == "4"


def test_a_permalink_shows_the_parallel_sizes_the_empty_form_shows(client):
    html = client.get(f"/?model={LLAMA}&gpu=H100&vllm_version=0.32.0").content.decode()
    assert 'name="tensor_parallel_size" value="1"' in html and 'name="pipeline_parallel_size" value="1"' in html


def test_a_query_without_a_model_says_so_by_the_model_field(client):
    r = client.get("/?gpu=H100", HTTP_HX_REQUEST="true")
    oob = re.search(r'id="errors-model" hx-swap-oob="true">(.*?)</div>', r.content.decode(), re.S).group(1)
    assert "give a model" in oob


# --- honest pictures ---------------------------------------------------------------------------------------
def test_a_configuration_that_does_not_fit_draws_past_the_gpu_and_says_by_how_much(client):
    api = client.get("/api/estimate?" + BIG_ON_SMALL[2:]).json()
    need = api["weights_gib"] + api["activation_peak_gib"] + api["non_torch_gib"] + (
        api["cuda_graph_gib"] if api["cuda_graph_deducted"] else 0)
    total, budget = api["total_memory_gib"], api["requested_memory_gib"]
    assert need > total  # 70B in bf16 (131 GiB of weights) on a 24 GB card
    html = client.get(BIG_ON_SMALL).content.decode()
    short = " ".join(re.search(r'id="memory-short">(.*?)</p>', html, re.S).group(1).split())
    # the figures are each rounded to 0.01 GiB by the API: sums agree to the rounding of four parts
    said = [float(x.replace(",", "")) for x in re.findall(r"([\d,]+\.\d\d) GiB", short)]
    assert said[0] == pytest.approx(need, abs=0.03)  # need
    # the verdict names what fails first: the weights alone exceed the card, so vLLM dies loading them (load_model)
    headline = re.search(r'id="verdict-headline">.*?CUDA out of memory while loading the weights: they take '
                         r'([\d,.]+) GiB per GPU, more than the ([\d.]+) GiB', html, re.S).groups()
    assert headline == (f"{api['weights_gib']:,.2f}", f"{total:g}")
    assert said[1] == pytest.approx(need - budget, abs=0.03) and said[2] == pytest.approx(budget, abs=0.005)
    assert said[3] == pytest.approx(need - total, abs=0.03) and said[4] == pytest.approx(total, abs=0.005)
    # the GPU ends where its memory ends on a bar scaled to what is needed; the rest is marked overflow
    device = float(re.search(r'id="membar-device" style="left: ([\d.]+)%', html).group(1))
    assert device == pytest.approx(100 * total / need, abs=0.01)
    assert re.search(r'id="membar-over" style="left: ([\d.]+)%', html)
    # no negative memory anywhere
    assert not re.search(r"-\d[\d.,]* GiB", html)
    assert f"none: short by {said[1]:,.2f} GiB" in html


def test_a_configuration_that_fits_keeps_the_bar_inside_the_gpu(client):
    html = client.get(f"/?{PRESETS[0].query}").content.decode()
    assert 'id="membar-over"' not in html and 'id="memory-short"' not in html
    widths = [float(w) for w in re.findall(r'class="seg [^"]+" style="width: ([\d.]+)%', html)]
    assert sum(widths) == pytest.approx(100, abs=0.05)  # the parts plus the headroom fill the device


def test_no_curve_is_drawn_when_nothing_fits(client):
    html = client.get(BIG_ON_SMALL).content.decode()
    assert 'id="spec-concurrency"' not in html and 'id="no-curve"' in html


def test_a_uniform_model_gets_no_single_bar_chart_but_a_mixed_one_does(client):
    html = client.get(f"/?{PRESETS[0].query}").content.decode()
    assert 'id="spec-kv-layers"' not in html and 'id="kv-layers"' in html  # the table stays
    # gemma-2 alternates sliding-window and full-attention layers: two layer types, a chart
    html = client.get("/?model=google/gemma-2-9b-it&gpu=H100&vllm_version=0.32.0", follow=True).content.decode()
    spec = json.loads(re.search(r'<script id="spec-kv-layers" type="application/json">(.*?)</script>', html,
                                re.S).group(1))
    assert len(spec["data"]["values"]) == 2 and spec["encoding"]["x"]["title"] == "KV cache KiB per token per GPU"


def test_every_chart_has_titled_axes(client):
    html = client.get(f"/?{PRESETS[3].query}").content.decode()  # the MTP example: concurrency + speedup
    specs = re.findall(r'<script id="spec-[\w-]+" type="application/json">(.*?)</script>', html, re.S)
    assert len(specs) >= 2
    for raw in specs:
        spec = json.loads(raw)
        layers = spec.get("layer", [spec])
        x, y = layers[0]["encoding"]["x"], layers[0]["encoding"]["y"]
        assert x.get("title") and y.get("title")


def test_speed_is_shown_to_two_significant_figures(client):
    from calculator.templatetags.calculator_tags import sig

    assert [sig(v) for v in (1234.5, 12.345, 0.01234, 9.96, 156.7)] == ["1,200", "12", "0.012", "10", "160"]
    html = client.get(f"/?{PRESETS[0].query}").content.decode()
    for key in ("ttft-ms", "itl-ms", "output-tok-s"):
        value = re.search(rf'id="{key}">([\d,.]+) ', html).group(1).replace(",", "").replace(".", "")
        assert len(value.strip("0")) <= 2, (key, value)


# --- compat page ---------------------------------------------------------------------------------------------
def test_the_calculator_links_to_the_compat_page_with_its_state(client):
    html = client.get(f"/?{PRESETS[1].query}").content.decode()
    href = re.search(r'id="compat-link" href="([^"]+)"', html).group(1).replace("&amp;", "&")
    assert dict(parse_qsl(href.split("?", 1)[1])) == {
        "model": "Qwen/Qwen3-30B-A3B", "gpu": "H100", "kv_cache_dtype": "fp8", "vllm_version": "0.32.0"}
    page = client.get(href).content.decode()
    assert 'name="model" value="Qwen/Qwen3-30B-A3B"' in page
    assert re.search(r'<select name="gpu"[^>]*>.*?<option value="H100" selected>', page, re.S)
    assert "Model <strong>Qwen/Qwen3-30B-A3B</strong>" in page  # describes the model the picker shows


def test_the_empty_compat_page_shows_the_model_it_describes(client):
    page = client.get("/compat/").content.decode()
    assert f'name="model" value="{LLAMA}"' in page and f"Model <strong>{LLAMA}</strong>" in page
    assert re.search(r'<select name="vllm_version"[^>]*>.*?<option value="0.32.0" selected>', page, re.S)
    assert "{% extends" not in page and 'class="site-header"' in page  # the site's layout


def test_a_fix_never_lists_as_accepted_the_kv_dtype_that_fails(client):
    # FLASH_ATTN declares fp8 but takes it only with FA3 (SM90) or FA4: an A100 (SM80) fails on fp8
    page = client.get("/compat/verdict/", {"model": LLAMA, "gpu": "A100", "kv_cache_dtype": "fp8",
                                           "attention_backend": "FLASHINFER"}).content.decode()
    row = re.search(r'<tr id="backend-FLASH_ATTN".*?</tr>', page, re.S).group(0)
    assert "kv_cache_dtype not supported" in row
    fixes = re.findall(r"<li>fix: (.*?)</li>", row, re.S)
    assert fixes and not any("accepts only" in f and "fp8" in f for f in fixes)
    assert any("--kv-cache-dtype fp8 only under conditions" in f for f in fixes)


def test_the_compat_page_is_served_from_the_cache(client, monkeypatch):
    from compat import checks, matrix

    first = client.get("/compat/", {"model": LLAMA, "gpu": "A100"}).content

    def not_again(*a, **k):
        raise AssertionError("computed again")

    monkeypatch.setattr(matrix, "build_matrix", not_again)
    monkeypatch.setattr(checks, "verdict_for", not_again)
    again = client.get("/compat/", {"model": LLAMA, "gpu": "A100"})
    assert again.status_code == 200 and again.content.count(b"<td class=\"v-") == first.count(b"<td class=\"v-") > 0


def test_an_unknown_gpu_is_kept_in_the_picker(client):
    r = client.get("/compat/verdict/", {"model": LLAMA, "gpu": "H900"})
    assert r.status_code == 400 and '<option value="H900" selected>' in r.content.decode()


# --- runs ------------------------------------------------------------------------------------------------------
def _run(user=None, **fields):
    from validator.models import ValidationRun

    configuration = {"model_id": LLAMA, "params": {"model": LLAMA, "gpu": "H100"}}
    return ValidationRun.objects.create(configuration=configuration, created_by=user, **fields)


def test_runs_lists_yours_and_recent_ones(client):
    from django.contrib.auth.models import User

    alice, bob = User.objects.create_user("alice"), User.objects.create_user("bob")
    mine = _run(alice, status="done", measured={"verdict": {"keep": True, "summary": "ITL 1.8x better"}})
    theirs = _run(bob, status="failed", error="vLLM exited 1")
    html = client.get("/runs/").content.decode()
    assert str(mine.pk) in html and str(theirs.pk) in html and 'id="my-runs"' not in html
    client.force_login(alice)
    html = client.get("/runs/").content.decode()
    my_table = re.search(r'id="my-runs".*?</table>', html, re.S).group(0)
    others = re.search(r'id="recent-runs".*?</table>', html, re.S).group(0)
    assert str(mine.pk) in my_table and "keep: ITL 1.8x better" in my_table and str(theirs.pk) in others


def test_the_run_page_leads_with_the_verdict(client):
    run = _run(status="done", stage="done", measured={"verdict": {"keep": False, "summary": "no ITL gain",
                                                                  "stop_signs": ["TTFT regressed"]}})
    html = client.get(run.get_absolute_url()).content.decode()
    assert html.index('id="run-verdict"') < html.index("<strong>Status:</strong>")
    assert "Drop it: no ITL gain" in html and "Stop sign: TTFT regressed" in html
    assert "done · done" not in " ".join(html.split())


# --- error pages ----------------------------------------------------------------------------------------------
def test_a_404_keeps_the_calculator_parameters(client):
    r = client.get(f"/no/such/page?model={LLAMA}&gpu=H100&utm=x")
    assert r.status_code == 404
    html = r.content.decode()
    assert 'class="site-header"' in html
    link = re.search(r'id="kept-link" href="([^"]+)"', html).group(1).replace("&amp;", "&")
    assert link == f"/?model={LLAMA}&gpu=H100"


def test_a_too_long_address_gets_a_414_that_keeps_the_parameters(client):
    r = client.get(f"/?model={LLAMA}&gpu=H100&junk=" + "x" * 9000)
    assert r.status_code == 414
    html = r.content.decode()
    assert "reads up to 8190" in html and f"/?model={LLAMA}&amp;gpu=H100" in html


def test_a_500_keeps_the_parameters(client, monkeypatch):
    import calculator.web.views as views

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(views, "make_plan", boom)
    client.raise_request_exception = False
    r = client.get(f"/?model={LLAMA}&gpu=H100&vllm_version=0.32.0")
    assert r.status_code == 500
    assert f"/?model={LLAMA}&amp;gpu=H100&amp;vllm_version=0.32.0" in r.content.decode()


def test_gunicorn_lets_long_request_lines_reach_the_414_page():
    from pathlib import Path

    start = (Path(__file__).resolve().parent.parent / "scripts" / "start").read_text()
    assert "--limit-request-line 0" in start


def test_a_bad_value_is_named_at_the_top_of_the_results(client):
    # on a phone the results come first: the summary names the field and links to it
    r = client.get(f"/?model={LLAMA}&gpu=H100&gpu_memory_utilization=1.5", HTTP_HX_REQUEST="true")
    summary = re.search(r'id="error-summary">(.*?)</section>', r.content.decode(), re.S).group(1)
    assert '<a href="#field-gpu_memory_utilization">' in summary and "must be at most 1.0, got 1.5" in summary


def test_a_long_ttft_reads_in_seconds():
    """A burst's queueing TTFT (minutes) reads in seconds; short ones stay in ms, both to two figures."""
    from calculator.templatetags.calculator_tags import duration_ms

    assert [duration_ms(v) for v in (63.2, 9_960, 10_000, 190_000.0, 1_234_567)] == [
        "63 ms", "10,000 ms", "10 s", "190 s", "1,200 s"]


# --- the runtime settings groups the page's script shows and hides ------------------------------------------
class _Groups(HTMLParser):
    """Each field box (``id="field-NAME"``) with the ``data-runtimes`` of the ``<details>`` around it (None: no
    such attribute), and the runtime menu's option values."""

    def __init__(self):
        super().__init__()
        self.stack: list[str | None] = []  # data-runtimes of the open <details> elements
        self.field_group: dict[str, str | None] = {}
        self.runtime_options: list[str] = []
        self._in_runtime_menu = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "details":
            self.stack.append(a.get("data-runtimes"))
        elif tag == "div" and (a.get("id") or "").startswith("field-") and self.stack:
            self.field_group[a["id"].removeprefix("field-")] = self.stack[-1]
        elif tag == "select" and a.get("id") == "id_runtime":
            self._in_runtime_menu = True
        elif tag == "option" and self._in_runtime_menu:
            self.runtime_options.append(a["value"])

    def handle_endtag(self, tag):
        if tag == "details":
            self.stack.pop()
        elif tag == "select":
            self._in_runtime_menu = False


def _refused_as_other_runtimes(name: str, runtime: str) -> bool:
    """Whether the API refuses a (non-default) value of ``name`` with ``runtime`` as another runtime's setting (a
    number or a switch; the refusal comes before the value's own checks)."""
    refused = False
    for value in ("2", "true"):
        try:
            parse_request({"model": "org/name", "runtime": runtime, name: value})
        except InputError as exc:
            refused |= exc.field == name and f"setting; with runtime={runtime} use" in exc.message
    return refused


@pytest.mark.parametrize("runtime", ["vllm", "sglang", "llama.cpp", "ollama"])
def test_a_runtime_group_is_marked_with_the_runtimes_that_read_its_settings(client, runtime):
    """static/js/calculator.js hides a ``<details data-runtimes="...">`` group (and leaves its fields out of the
    request) when the runtime menu names a runtime not in the list, and opens it when it names one in it. So each
    setting in such a group is one the API refuses for every runtime left out of the list (hiding it drops nothing
    the answer reads), and one the API takes for a runtime in the list; the list's names are the menu's values."""
    r = client.get(f"/?model={LLAMA}&runtime={runtime}", follow=True)
    parser = _Groups()
    parser.feed(r.content.decode())
    assert set(parser.runtime_options) == {"vllm", "sglang", "llama.cpp", "ollama"}
    marked = {n: g.split() for n, g in parser.field_group.items() if g is not None}
    assert {"mem_fraction_static", "page_size", "speculative_eagle_topk", "gguf_file", "split_mode",
            "ollama_release"} <= set(marked)
    for name, runtimes in marked.items():
        assert set(runtimes) <= set(parser.runtime_options), name
        for other in set(parser.runtime_options) - set(runtimes):
            assert _refused_as_other_runtimes(name, other), (name, other)
        assert not all(_refused_as_other_runtimes(name, r) for r in runtimes), name
    # the settings every runtime reads (the workload's) are in a group no runtime hides
    unmarked = {n for n, g in parser.field_group.items() if g is None}
    assert {"num_prompts", "request_rate", "workload", "temperature"} <= unmarked
    # the chosen runtime's group is the open one (nothing else is set)
    opened = re.findall(r'<details class="advanced" data-runtimes="([^"]+)"( open)?>', r.content.decode())
    assert len(opened) == 2 and all(bool(o) == (runtime in g.split()) for g, o in opened)
