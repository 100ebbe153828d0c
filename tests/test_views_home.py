"""The home page: the form, the results fragment for htmx, the full page without JavaScript."""

from __future__ import annotations

import json
import re

import pytest

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


pytestmark = pytest.mark.usefixtures("offline_hub")


def test_it_shows_the_form_and_answers_the_first_example(client):
    r = client.get("/")
    assert r.status_code == 200
    assert b'id="calc-form"' in r.content and b'id="results"' in r.content
    assert b'hx-get="/"' in r.content and b'hx-push-url="true"' in r.content
    assert b'<datalist id="catalog-models">' in r.content and LLAMA.encode() in r.content
    html = r.content.decode()
    # the landing page answers the first example (Llama 3.1 8B on an RTX 4090 at 32,768 tokens) ...
    assert 'id="kv-cache-tokens"' in html and 'value="32768"' in html
    assert re.search(r'<option value="RTX4090" selected>', html)
    # ... and offers every example as a permalink
    assert html.count("data-preset=") == 5
    # Back / Forward re-render from the URL: htmx keeps no page snapshots
    config = json.loads(re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", html).group(1))
    assert config["historyCacheSize"] == 0
    # a bad value's 400 is swapped in (htmx 2 swaps no 4xx by default); every other 4xx and 5xx is still an error
    assert config["responseHandling"] == [
        {"code": "204", "swap": False}, {"code": "[23]..", "swap": True},
        {"code": "400", "swap": True, "error": False}, {"code": "[45]..", "swap": False, "error": True}]


def test_it_serves_htmx_and_no_cdn(client):
    html = client.get("/").content.decode()
    assert "/static/django_htmx/htmx-2.min.js" in html
    assert not re.search(r'<(script|img|link rel="stylesheet")[^>]*(src|href)="https?://', html)


def test_it_keeps_the_page_without_charts_small(client):
    """Page weight without charts (HTML + CSS + JS the page loads up front) stays under 200 KB."""
    from django.contrib.staticfiles import finders

    html = client.get("/").content
    assets = re.findall(rb'(?:src|href)="/static/([^"]+)"', html)
    total = len(html) + sum(len(open(finders.find(a.decode()), "rb").read()) for a in assets)
    assert b"vega.min.js" not in b" ".join(assets)  # charts load on demand
    assert total < 200_000, total


def test_it_shows_errors_by_the_field_on_the_full_page(client):
    r = client.get(f"/?model={LLAMA}&max_model_len=lots")
    assert r.status_code == 400
    html = r.content.decode()
    block = re.search(r'<div class="field-errors" id="errors-max_model_len">(.*?)</div>', html, re.S).group(1)
    assert "enter a whole number of tokens" in block
    assert 'value="lots"' in html  # nothing the user typed is lost


def test_it_returns_the_fragment_with_field_errors_out_of_band_for_htmx(client):
    r = client.get(f"/?model={LLAMA}&gpu_memory_utilization=1.5", HTTP_HX_REQUEST="true")
    assert r.status_code == 400  # as the full page answers the same query
    html = r.content.decode()
    assert "<html" not in html and 'id="calc-form"' not in html
    oob = re.search(
        r'<div class="field-errors" id="errors-gpu_memory_utilization" hx-swap-oob="true">(.*?)</div>',
        html,
        re.S,
    ).group(1)
    assert "must be at most 1" in oob
    assert r["HX-Push-Url"] == "false"  # the bad address never enters the browser's history


@pytest.mark.parametrize("query, field, given, sentence", [
    # the request model's sentences (calculator/request.py), as the full page and the API give them
    (f"model={LLAMA}&max_model_len=lots", "max_model_len", "lots", "enter a whole number of tokens"),
    (f"model={LLAMA}&gpu=H100&gpu_memory_utilization=1.5", "gpu_memory_utilization", "1.5", "must be at most 1.0"),
])
def test_a_bad_value_through_htmx_is_the_full_pages_4xx_with_the_value_and_no_push(client, query, field, given,
                                                                                     sentence):
    """The live form's request for a bad value: the same status as the full page's answer to the same query, the
    error by its field (out of band) and in the summary with the value as typed, and no address to push; the form
    itself is not in the answer, so what the user typed (and types while it is on its way) stays in the page."""
    full = client.get(f"/?{query}")
    r = client.get(f"/?{query}", HTTP_HX_REQUEST="true")
    assert full.status_code == 400 and r.status_code == full.status_code
    assert r["HX-Push-Url"] == "false"
    html = r.content.decode()
    assert 'id="calc-form"' not in html and "<html" not in html
    oob = re.search(rf'id="errors-{field}" hx-swap-oob="true">(.*?)</div>', html, re.S).group(1)
    assert sentence in oob
    summary = re.search(r'id="error-summary">(.*?)</section>', html, re.S).group(1)
    assert (f'<a href="#field-{field}"><code>{field}</code></a> = <code class="given">{given}</code>: '
            in summary) and sentence in summary
    assert f'value="{given}"' in full.content.decode()  # the full page keeps it in the form


def test_an_emptied_model_field_through_htmx_is_a_400_that_pushes_nothing(client):
    r = client.get("/?gpu=H100", HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and r["HX-Push-Url"] == "false"
    assert "give a model" in re.search(r'id="errors-model" hx-swap-oob="true">(.*?)</div>', r.content.decode(),
                                       re.S).group(1)


def test_it_clears_stale_errors_for_htmx(client):
    r = client.get(f"/?model={LLAMA}&gpu_memory_utilization=1.5", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    stale = re.search(r'id="errors-max_model_len" hx-swap-oob="true">(.*?)</div>', html, re.S).group(1)
    assert stale.strip() == ""


def test_it_shows_an_unknown_model_by_the_model_field(client):
    r = client.get("/?model=nobody/no-such-model", HTTP_HX_REQUEST="true")
    oob = re.search(r'id="errors-model" hx-swap-oob="true">(.*?)</div>', r.content.decode(), re.S).group(1)
    assert "nobody/no-such-model is neither in the database cache nor in the offline catalog" in oob


def test_it_varies_on_hx_request(client):
    assert "HX-Request" in client.get("/")["Vary"]


def test_it_boosted_requests_get_the_full_page(client):
    r = client.get(f"/?model={LLAMA}&max_model_len=lots", HTTP_HX_REQUEST="true", HTTP_HX_BOOSTED="true")
    assert b"<html" in r.content


def test_it_gives_the_full_page_when_htmx_restores_history(client):
    r = client.get(
        f"/?model={LLAMA}&max_model_len=lots", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true"
    )
    assert b"<html" in r.content


def test_it_answers_head_for_link_previews(client):
    assert client.head("/").status_code == 200


def test_it_hides_the_validate_button_until_the_validator_exists(client):
    from django.urls import NoReverseMatch, reverse

    try:
        reverse("validator:new")
    except NoReverseMatch:
        r = client.get(f"/?model={LLAMA}&max_model_len=lots")
        assert b"Validate on a GPU worker" not in r.content


# -- with results (real engine) -------------------------------------------------------------------------
CANONICAL = f"model={LLAMA}&gpu=H100&max_model_len=8192&vllm_version=0.32.0"


def test_it_redirects_a_submitted_form_to_the_canonical_permalink(client):
    r = client.get(
        f"/?model={LLAMA}&revision=&gpu=H100&tensor_parallel_size=1&max_model_len=8K"
        "&dtype=auto&gpu_memory_utilization=&speculative_method=&enforce_eager=false"
    )
    assert r.status_code == 302
    assert r["Location"] == f"/?{CANONICAL}"


def test_it_renders_the_canonical_permalink_in_full(client):
    r = client.get(f"/?{CANONICAL}")
    assert r.status_code == 200
    html = r.content.decode()
    assert "<html" in html and 'id="calc-form"' in html
    # 32 layers x 2 x 8 KV heads x 128 x 2 B (config.json of meta-llama/Llama-3.1-8B-Instruct)
    assert re.search(r'id="kv-bytes-per-token">131,072 B<', html)
    assert 'value="8192"' in html  # the form shows the configuration


def test_it_puts_the_headline_numbers_in_the_title_and_open_graph(client):
    html = client.get(f"/?{CANONICAL}").content.decode()
    tokens = re.search(r'id="kv-cache-tokens">([\d,]+)<', html).group(1)
    title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
    og = re.search(r'<meta property="og:description" content="([^"]*)"', html).group(1)
    for text in (title, og):
        assert text.startswith("Works:") and tokens in text and "max concurrency" in text and "8,192 tokens" in text
    escaped = CANONICAL.replace("&", "&amp;")
    assert f'<meta property="og:url" content="http://testserver/?{escaped}">' in html


def test_it_returns_only_the_fragment_for_htmx_and_pushes_the_canonical_url(client):
    r = client.get(f"/?model={LLAMA}&max_model_len=8192&revision=", HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    html = r.content.decode()
    assert "<html" not in html and 'id="calc-form"' not in html
    assert 'id="kv-cache-tokens"' in html and html.lstrip().startswith("<title>")
    assert r["HX-Push-Url"] == f"/?{CANONICAL}"


def test_the_fragment_and_the_page_show_the_same_numbers(client):
    full = client.get(f"/?{CANONICAL}").content.decode()
    part = client.get(f"/?{CANONICAL}", HTTP_HX_REQUEST="true").content.decode()
    for id_ in ("kv-cache-tokens", "max-concurrency", "kv-cache-gib", "num-gpu-blocks"):
        pattern = rf'id="{id_}">([^<]+)<'
        assert re.search(pattern, full).group(1) == re.search(pattern, part).group(1)


def test_it_matches_the_json_api(client):
    body = client.get(f"/api/estimate?{CANONICAL}").json()
    html = client.get(f"/?{CANONICAL}").content.decode()
    assert re.search(r'id="kv-cache-tokens">([\d,]+)<', html).group(1) == f"{body['kv_cache_tokens']:,}"
    assert (
        re.search(r'id="kv-cache-gib">([\d.]+) GiB<', html).group(1)
        == f"{body['available_kv_cache_gib']:.2f}"
    )


def test_it_shows_the_vllm_serve_command(client):
    html = client.get(f"/?{CANONICAL}&kv_cache_dtype=fp8&enforce_eager=true", follow=True).content.decode()
    command = re.search(r'<code id="serve-command">(.*?)</code>', html, re.S).group(1)
    assert command == f"vllm serve {LLAMA} --max-model-len 8192 --kv-cache-dtype fp8 --enforce-eager"


def test_it_draws_the_memory_bar_with_gib(client):
    html = client.get(f"/?{CANONICAL}").content.decode()
    for name in ("weights_gib", "activation_peak_gib", "available_kv_cache_gib", "headroom"):
        assert f'id="mem-{name}"' in html
    # Llama-3.1-8B: 8,030,261,248 params x 2 B = 14.96 GiB of weights (the engine adds small buffers)
    weights = float(re.search(r'id="mem-weights_gib">.*?<td>([\d.]+) GiB</td>', html, re.S).group(1))
    assert 14.9 < weights < 15.1


def test_it_embeds_the_concurrency_chart_spec(client):
    import json

    html = client.get(f"/?{CANONICAL}").content.decode()
    spec = json.loads(
        re.search(r'<script id="spec-concurrency" type="application/json">(.*?)</script>', html, re.S).group(
            1
        )
    )
    points = {p["max_model_len"]: p for p in spec["data"]["values"]}
    assert points[8192]["current"] is True
    assert max(points) == 131072  # the model's own limit (max_position_embeddings)
    # full attention only: doubling the context halves the full-length requests the same KV cache holds
    assert points[4096]["max_concurrency"] / points[8192]["max_concurrency"] == pytest.approx(2, rel=0.01)


def test_it_says_when_a_model_does_not_fit(client):
    html = client.get("/?model=meta-llama/Llama-3.1-70B-Instruct&gpu=L4&vllm_version=0.32.0").content.decode()
    assert 'data-verdict="does_not_fit"' in html and "Changes that make it work" in html


def test_it_compares_the_expected_concurrency(client):
    html = client.get(f"/?{CANONICAL}&concurrency=60000", follow=True).content.decode()
    assert "fewer than your 60,000" in html


def test_it_includes_the_compat_verdict(client):
    html = client.get(f"/?{CANONICAL}").content.decode()
    assert 'id="compat-verdict"' in html and "vLLM picks" in html


def test_it_shows_a_backend_that_does_not_fit_the_model(client):
    # FLASHMLA serves MLA models only (DeepSeek); Llama-3.1 uses grouped-query attention
    html = client.get(f"/?{CANONICAL}&attention_backend=FLASHMLA", follow=True).content.decode()
    summary = re.search(r'id="compat-summary">(.*?)</p>', html, re.S).group(1)
    assert "--attention-backend FLASHMLA: does not work" in " ".join(summary.split())


def test_it_predicts_speed_at_the_given_lengths(client):
    html = client.get(
        f"/?{CANONICAL}&prompt_len=2048&output_len=256&concurrency=4", follow=True
    ).content.decode()
    assert "prompt 2,048 tokens, output 256, 4 in flight" in html
    assert re.search(r'id="ttft-ms">[\d.]+ ms<', html) and re.search(r'id="itl-ms">[\d.]+ ms<', html)


def test_it_shows_the_speculative_speedup(client):
    spec = '{"method":"eagle","model":"yuhuili/EAGLE-LLaMA3-Instruct-8B","num_speculative_tokens":3}'
    html = client.get(
        f"/?{CANONICAL}&speculative_config={spec}&acceptance_rate=0.7", follow=True
    ).content.decode()
    assert 'id="spec-summary"' in html and "at acceptance rate 0.70 (accepted / drafted tokens)" in html
    assert '<script id="spec-speedup" type="application/json">' in html


def test_it_shows_a_speculative_config_error_by_the_method_field(client):
    # Llama-3.1 has no multi-token-prediction layers (config.json has no num_nextn_predict_layers)
    spec = '{"method":"mtp","num_speculative_tokens":2}'
    r = client.get(f"/?{CANONICAL}&speculative_config={spec}", HTTP_HX_REQUEST="true")
    oob = re.search(
        r'id="errors-speculative_method" hx-swap-oob="true">(.*?)</div>', r.content.decode(), re.S
    ).group(1)
    assert "mtp" in oob


def _two_sig(x: float) -> str:
    """``x`` to two significant figures, written by hand: printf's ``%#.2g`` (keeps a trailing zero: 1.0)."""
    return ("%#.2g" % x).rstrip(".")


def _three_sig(x: float) -> str:
    """``x`` (between 0.1 and 10, as speedups are) to three significant figures, half up as the page rounds (2.065 ->
    2.07), by hand with decimal arithmetic on the figure as the chart data writes it."""
    from decimal import ROUND_HALF_UP, Decimal

    d = Decimal(str(x))
    places = Decimal("0.01") if d >= 1 else Decimal("0.001")
    return str(d.quantize(places, rounding=ROUND_HALF_UP))


def _chart_data(html: str, script_id: str) -> dict:
    import json

    return json.loads(re.search(rf'<script id="{script_id}" type="application/json">(.*?)</script>', html,
                                re.S).group(1))


def _table(html: str, table_id: str) -> tuple[str, list[str], list[list[str]]]:
    """(caption, column headers, rows of [row header, cells...]) of a table, tags stripped."""
    table = re.search(rf'<table class="num" id="{table_id}">(.*?)</table>', html, re.S).group(1)
    text = lambda cell: re.sub(r"<[^>]+>", "", cell).strip()  # noqa: E731
    caption = text(re.search(r"<caption>(.*?)</caption>", table, re.S).group(1))
    head = [text(c) for c in re.findall(r'<th scope="col">(.*?)</th>', table, re.S)]
    body = re.search(r"<tbody>(.*?)</tbody>", table, re.S).group(1)
    rows = [[text(c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)]
    return caption, head, rows


@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_the_speculative_charts_have_their_data_as_tables(client, runtime):
    """Screen readers and pages without scripts get each speculative chart's data as a table under it: the speedup
    at each acceptance rate the curve is drawn at (two significant figures), and at each concurrency for each k the
    chart draws (three: a speedup of 1.03 must not read 1.0 where the answer says it pays), computed here from the
    chart's own data."""
    params = {"model": LLAMA, "gpu": "H100", "concurrency": "8", "acceptance_rate": "0.6", "runtime": runtime,
              "speculative_config": '{"method":"ngram","num_speculative_tokens":3}' if runtime == "vllm"
              else '{"method":"eagle3","num_speculative_tokens":3}'}
    if runtime == "sglang":
        del params["acceptance_rate"]  # SGLang's EAGLE-3 answers from its public acceptance figure
    html = client.get("/", params, follow=True).content.decode()

    chart = _chart_data(html, "spec-speedup-concurrency")
    line = next(layer for layer in chart["layer"] if layer.get("mark", {}).get("point"))["data"]["values"]
    ks = sorted({int(v["k"][2:]) for v in line})
    caption, head, rows = _table(html, "speedup-concurrency-table")
    # k by the runtime's own flag: vLLM's num_speculative_tokens, SGLang's --speculative-num-steps
    flag = "num_speculative_tokens" if runtime == "vllm" else "--speculative-num-steps"
    assert "three significant figures" in caption and f"one column per {flag} (k)" in caption
    assert head == ["concurrent requests"] + [f"k={k}{' (configured)' if k == 3 else ''}: speedup (×)" for k in ks]
    concurrencies = sorted({v["concurrency"] for v in line})
    assert [r[0] for r in rows] == [f"{c:,}{' (configured)' if c == 8 else ''}" for c in concurrencies]
    for row, c in zip(rows, concurrencies):
        assert row[1:] == [f"{_three_sig(v['speedup'])}×" for k in ks for v in line
                           if v["k"] == f"k={k}" and v["concurrency"] == c]
    assert re.search(r'<tr class="current"><th scope="row">8 \(configured\)</th>', html)

    if runtime == "sglang":  # SGLang's page draws the concurrency chart only
        assert 'id="speedup-table"' not in html
        return
    chart = _chart_data(html, "spec-speedup")
    curve, be, expected = (chart["layer"][i]["data"]["values"] for i in (0, 2, 3))
    caption, head, rows = _table(html, "speedup-table")
    assert head == ["acceptance rate (accepted / drafted tokens)", "speedup (×)"]
    assert rows == [[f"{v['alpha']:.2f}", f"{_two_sig(v['speedup'])}×"] for v in curve]
    assert [r[0] for r in rows] == [f"{i / 20:.2f}" for i in range(21)]  # 0.00, 0.05, ... 1.00
    assert f"expected: acceptance rate 0.60, {_two_sig(expected[0]['speedup'])}×" in caption
    assert f"break-even acceptance rate {be[0]['alpha']:.2f} (speedup 1×)" in caption
    assert "<summary>Data: ngram, k=3: speedup vs acceptance rate</summary>" in html


def test_the_gpu_picker_groups_the_catalog_by_kind_and_keeps_the_choice(client):
    # llama.cpp: vLLM gives no plan for a Mac (tests/test_vllm_apple_gpu.py)
    response = client.get("/", {"model": LLAMA, "gpu": "M3 Max 128GB", "runtime": "llama.cpp"}, follow=True)
    assert response.status_code == 200
    html = response.content.decode()
    picker = re.search(r'<select name="gpu".*?</select>', html, re.S).group(0)
    groups = re.findall(r'<optgroup label="([^"]+)">', picker)
    assert groups[:3] == ["Datacenter GPUs", "Workstation GPUs", "Consumer / gaming GPUs"]
    assert "Apple Silicon (unified memory)" in groups
    apple = re.search(r'<optgroup label="Apple Silicon \(unified memory\)">(.*?)</optgroup>', picker, re.S).group(1)
    assert re.search(r'<option value="M3 Max 128GB" selected>', apple)
    h100 = re.search(r'<optgroup label="Datacenter GPUs">(.*?)</optgroup>', picker, re.S).group(1)
    assert 'value="H100"' in h100 and 'value="H100"' not in apple


def test_the_speed_section_charts_speedup_against_concurrency_for_a_few_k(client):
    import json

    from calculator.plan import make_plan
    from calculator.request import parse_request

    params = {"model": LLAMA, "gpu": "H100", "concurrency": "8", "acceptance_rate": "0.6",
              "speculative_config": '{"method":"ngram","num_speculative_tokens":3}'}
    html = client.get("/", params, follow=True).content.decode()
    spec = json.loads(re.search(r'<script id="spec-speedup-concurrency" type="application/json">(.*?)</script>',
                                html, re.S).group(1))
    line = spec["layer"][0]["data"]["values"]
    curves = make_plan(parse_request(params)).speed.spec.speedup_vs_concurrency
    assert {v["k"] for v in line} == {f"k={k}" for k in curves} and "k=3" in {v["k"] for v in line}
    best = make_plan(parse_request(params)).speed.spec.best_num_speculative_tokens
    assert f"k={best}" in {v["k"] for v in line}  # the k the page recommends is drawn
    for k, curve in curves.items():  # the chart draws the plan's own curve, point for point
        assert [(v["concurrency"], v["speedup"]) for v in line if v["k"] == f"k={k}"] == [
            (c, round(s, 4)) for c, s in curve]
    assert spec["layer"][2]["data"]["values"] == [{"concurrency": 8}]  # the configured concurrency
    # at a high enough concurrency ngram loses on this model (the curve crosses the dashed line at 1)
    assert min(v["speedup"] for v in line if v["k"] == "k=3") < 1 < max(v["speedup"] for v in line if v["k"] == "k=3")


def test_the_page_says_serve_without_speculation_when_no_k_pays(client):
    """ngram at acceptance rate 0.3 with 256 clients loses at every k (tests/test_spec_costs.py estimates each k):
    the page's best k is 0 with what it means, not the least slow k."""
    params = {"model": LLAMA, "gpu": "H100", "concurrency": "256", "acceptance_rate": "0.3",
              "speculative_config": '{"method":"ngram","num_speculative_tokens":3}'}
    html = client.get("/", params, follow=True).content.decode()
    assert "best num_speculative_tokens here 0 (no k pays: serve without speculation)," in html


@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_the_page_says_speculation_does_not_stop_paying_up_to_the_servers_limit(client, runtime):
    """Qwen3-30B-A3B with EAGLE-3 k=3 and 128 clients on one H100: the KV cache holds fewer requests of 1,152 tokens
    than that, and speculation still pays at that many, so the page says it does not stop paying up to that limit
    (kv_cache_tokens // 1,152) and its chart marks the 128 clients at the requests the server runs."""
    params = {"model": "Qwen/Qwen3-30B-A3B", "gpu": "H100", "concurrency": "128", "runtime": runtime,
              "speculative_config": '{"method":"eagle3","num_speculative_tokens":3}'}
    api = client.get("/api/estimate", params).json()
    limit = api["kv_cache_tokens"] // 1152
    stop, pays_from = api["spec_stops_paying_above_concurrency"], api["spec_pays_from_concurrency"]
    # null, or a dip before the limit (pays alone, loses at a few clients, pays again): never a stop near the limit
    assert limit < 128 and (stop is None or stop < pays_from <= limit)
    html = client.get("/", params, follow=True).content.decode()
    assert f"does not stop paying up to the server&#x27;s limit of {limit} concurrent requests" in html
    assert (f"stops paying above {stop} concurrent requests, loses from {stop + 1} to {pays_from - 1} and pays again "
            f"from {pays_from}" in html) if stop else "stops paying above" not in html
    if runtime == "vllm":  # the vLLM page's chart table
        assert f"{limit} (running at once of the 128 configured)" in html


@pytest.mark.parametrize("spec", [None, '{"method":"mtp","num_speculative_tokens":1}'])
def test_an_mla_headline_tpot_shows_the_range_the_answer_holds_more_likely(client, spec):
    """DeepSeek-V3 on 8x H200 (vLLM): no MLA model is among the fitted runs, and the public MLA runs took 107-163 us
    per layer against the fit's 60, so the 61 layers add 61 x 47 us = 2.867 ms to 61 x 103 us = 6.283 ms per target
    pass (with MTP k=1: per verification pass, over the mean acceptance length). The headline TPOT on the page and in
    the link preview carries that range, not only the note below; the JSON keeps its keys and cites the range in
    speed_sources."""
    import html as html_lib

    from calculator.plan import make_plan
    from calculator.request import parse_request

    params = {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "tensor_parallel_size": "8"}
    if spec:
        params["speculative_config"] = spec
    speed = make_plan(parse_request(params)).speed
    best, per_pass = (speed.spec.itl_ms, speed.spec.mean_acceptance_length) if spec else (speed.itl_ms, 1.0)
    lo, hi = best + 2.867 / per_pass, best + 6.283 / per_pass
    want = f"{lo:.2g}–{hi:.2g} ms"  # two significant figures, as the page shows every speed figure
    page = client.get("/", params, follow=True).content.decode()
    likely = re.search(r'id="itl-likely">([^<]*)<', page).group(1)
    assert likely.startswith(f"a best case: {want} more likely (MLA attention")
    og = html_lib.unescape(re.search(r'<meta property="og:description" content="([^"]*)"', page).group(1))
    assert f"ms (a best case; MLA: {want} likely)" in og
    api = client.get("/api/estimate", params).json()
    cited = ("with speculation (the itl_ms given) " if spec else "TPOT without speculation ") + f"{lo:.3g}-{hi:.3g} ms"
    assert cited in api["speed_sources"]["itl_ms.mla_likely"]
    assert api["itl_ms"] == float(f"{best:.3g}")  # the key keeps the best case
