"""The home page: the form, the results fragment for htmx, the full page without JavaScript."""
from __future__ import annotations

import re

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def test_it_shows_the_form(client):
    r = client.get("/")
    assert r.status_code == 200
    assert b'id="calc-form"' in r.content and b'id="results"' in r.content
    assert b'hx-get="/"' in r.content and b'hx-push-url="true"' in r.content
    assert b'<datalist id="catalog-models">' in r.content and LLAMA.encode() in r.content
    assert b'id="kv-cache-tokens"' not in r.content


def test_it_serves_htmx_and_no_cdn(client):
    html = client.get("/").content.decode()
    assert "/static/django_htmx/htmx-2.min.js" in html
    assert not re.search(r'(src|href)="https?://', html)


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
    assert "Enter a whole number of tokens" in block
    assert 'value="lots"' in html  # nothing the user typed is lost


def test_it_returns_the_fragment_with_field_errors_out_of_band_for_htmx(client):
    r = client.get(f"/?model={LLAMA}&gpu_memory_utilization=1.5", HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    html = r.content.decode()
    assert "<html" not in html and 'id="calc-form"' not in html
    oob = re.search(r'<div class="field-errors" id="errors-gpu_memory_utilization" hx-swap-oob="true">(.*?)</div>',
                    html, re.S).group(1)
    assert "less than or equal to 1.0" in oob
    assert r["HX-Push-Url"] == f"/?model={LLAMA}&gpu_memory_utilization=1.5"


def test_it_clears_stale_errors_for_htmx(client):
    r = client.get(f"/?model={LLAMA}&gpu_memory_utilization=1.5", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    stale = re.search(r'id="errors-max_model_len" hx-swap-oob="true">(.*?)</div>', html, re.S).group(1)
    assert stale.strip() == ""


def test_it_shows_an_unknown_model_by_the_model_field(client):
    r = client.get("/?model=nobody/no-such-model", HTTP_HX_REQUEST="true")
    oob = re.search(r'id="errors-model" hx-swap-oob="true">(.*?)</div>', r.content.decode(), re.S).group(1)
    assert "not in the offline catalog" in oob


def test_it_varies_on_hx_request(client):
    assert "HX-Request" in client.get("/")["Vary"]


def test_it_boosted_requests_get_the_full_page(client):
    r = client.get(f"/?model={LLAMA}&max_model_len=lots", HTTP_HX_REQUEST="true", HTTP_HX_BOOSTED="true")
    assert b"<html" in r.content


def test_it_hides_the_validate_button_until_the_validator_exists(client):
    from django.urls import NoReverseMatch, reverse

    try:
        reverse("validator:new")
    except NoReverseMatch:
        r = client.get(f"/?model={LLAMA}&max_model_len=lots")
        assert b"Validate on a GPU worker" not in r.content
