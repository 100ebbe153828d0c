"""Every number on the page says where it came from: the speed cards (TTFT, time per output token, output tok/s)
link to their formula in the page's numbered sources, as the memory figures do."""
from __future__ import annotations

import html
import re

import pytest


@pytest.mark.django_db
def test_the_speed_cards_link_to_their_formulas(client):
    q = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "max_model_len": "8192", "concurrency": "4"}
    api = client.get("/api/estimate", q).json()
    page = client.get("/", q, follow=True).content.decode()
    notes = dict(re.findall(r'<li id="src-(\d+)">(.*?)</li>', page, re.S))
    for card, key in (("ttft-ms", "ttft_ms"), ("itl-ms", "itl_ms"), ("output-tok-s", "output_tokens_per_s")):
        n = re.search(rf'id="{card}">[^<]*</span><sup class="ref"><a href="#src-(\d+)"', page).group(1)
        assert html.unescape(notes[n]) == api["speed_sources"][key]
