"""llama.cpp and Ollama answers in llama.cpp's own terms: the share link carries the context as ``ctx_size`` (llama.cpp's
``-c`` / ``--ctx-size``, common/arg.cpp:1639 in llama-cpp-python 0.3.36's llama.cpp), an older link that says
``max_model_len`` still opens the same answer, and the headline counts requests by ``--parallel`` slots and ``n_ctx``
instead of vLLM's "maximum concurrency"."""
from __future__ import annotations

import math
import re
from html import unescape
from urllib.parse import parse_qsl, urlsplit

import pytest

GGUF = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"}


@pytest.fixture(autouse=True)
def _offline(db, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _permalink(html: str) -> list[tuple[str, str]]:
    """The query of the page's "Copy link" permalink, as pairs."""
    href = unescape(re.search(r'<a id="permalink" href="([^"]+)"', html).group(1))
    return parse_qsl(urlsplit(href).query)


@pytest.mark.parametrize("runtime", ["llama.cpp", "ollama"])
def test_the_share_link_names_the_context_ctx_size(client, runtime):
    """The user gives -c 10240: the link they copy says ctx_size=10240, and not max_model_len (a vLLM flag)."""
    page = client.get("/", GGUF | {"runtime": runtime, "gpu": "RTX 3090", "ctx_size": "10240", "parallel": "3"},
                      follow=True)
    assert page.status_code == 200
    address = dict(parse_qsl(urlsplit(page.redirect_chain[-1][0]).query))
    link = dict(_permalink(page.content.decode()))
    for query in (address, link):
        assert query["ctx_size"] == "10240" and "max_model_len" not in query and "context_length" not in query


@pytest.mark.parametrize("runtime", ["llama.cpp", "ollama"])
def test_an_old_max_model_len_link_opens_the_same_answer(client, runtime):
    """A link shared before the rename (max_model_len=10240) still opens: to the same figures as ctx_size=10240, at the
    new address."""
    q = GGUF | {"runtime": runtime, "gpu": "RTX 3090", "parallel": "3"}
    old = client.get("/", q | {"max_model_len": "10240"}, follow=True)
    new = client.get("/", q | {"ctx_size": "10240"}, follow=True)
    assert old.status_code == new.status_code == 200
    assert old.redirect_chain[-1][0] == new.redirect_chain[-1][0]
    api_old = client.get("/api/estimate", q | {"max_model_len": "10240"}).json()
    api_new = client.get("/api/estimate", q | {"ctx_size": "10240"}).json()
    for key in ("kv_cache_tokens", "n_ctx", "n_seq_max", "kv_cache_mib", "serve_argv", "verdict"):
        assert api_old[key] == api_new[key], key
    # the address opened is the one the page links to itself
    assert dict(_permalink(old.content.decode())) == dict(parse_qsl(urlsplit(old.redirect_chain[-1][0]).query))


def test_the_headline_counts_slots_and_n_ctx_not_maximum_concurrency(client):
    """-c 10240 -np 3: each slot gets n_ctx_seq = 10240 / 3 padded up to 256 = 3,584 cells (src/llama-context.cpp:295-296)
    and n_ctx becomes 3 x 3,584 = 10,752 (:302-305): three requests of 3,584 tokens at once, said with --parallel and
    n_ctx (--ctx-size), on the page, in its link preview and in the verdict."""
    per_slot = math.ceil(10240 / 3 / 256) * 256
    n_ctx = 3 * per_slot
    assert (per_slot, n_ctx) == (3584, 10752)
    q = GGUF | {"runtime": "llama.cpp", "gpu": "RTX 3090", "ctx_size": "10240", "parallel": "3"}
    html = client.get("/", q, follow=True).content.decode()
    headline = unescape(re.search(r'<section id="headline".*?</section>', html, re.S).group(0))
    assert "Maximum concurrency" not in headline and "Max concurrency" not in html
    assert f"Requests of {per_slot:,} tokens at once" in headline
    assert f"n_ctx {n_ctx:,} (--ctx-size) split over --parallel 3 slots" in headline
    preview = unescape(re.search(r'<meta name="description" content="([^"]*)"', html).group(1))
    assert "max concurrency" not in preview and f"requests of {per_slot:,} tokens at once" in preview
    body = client.get("/api/estimate", q).json()
    assert "concurrency at" not in body["verdict_headline"]
    assert f"3.00x requests of {per_slot:,} tokens at once" in body["verdict_headline"]


def test_a_unified_cache_says_the_slots_share_it(client):
    """-c 10240 -np 3 -kvu: n_ctx_seq = n_ctx = 10,240 (src/llama-context.cpp:292-293), one request of 10,240 at once,
    the three slots sharing the cells."""
    q = GGUF | {"runtime": "llama.cpp", "gpu": "RTX 3090", "ctx_size": "10240", "parallel": "3", "kv_unified": "true"}
    html = unescape(client.get("/", q, follow=True).content.decode())
    assert "Requests of 10,240 tokens at once: n_ctx 10,240 (--ctx-size) shared by --parallel 3 slots (-kvu)" in html


def test_ollama_says_its_own_slots(client):
    """Ollama's context is per request (num_ctx, OLLAMA_CONTEXT_LENGTH) and its runner gets num_ctx x
    OLLAMA_NUM_PARALLEL cells: 3 x 10,240 = 30,720 (llm/server.go at v0.32.15)."""
    q = GGUF | {"runtime": "ollama", "gpu": "RTX 3090", "ctx_size": "10240", "parallel": "3"}
    html = unescape(client.get("/", q, follow=True).content.decode())
    assert ("Requests of 10,240 tokens at once: OLLAMA_NUM_PARALLEL 3 slots of num_ctx 10,240, n_ctx 30,720 in all"
            in html)


def test_a_context_suggestion_links_to_one_ctx_size(client):
    """-c 65536 --fit off on a 12 GB RTX 3060 does not fit; the longest context that fits is offered (API and page) as
    ctx_size, and its link carries that one context, not the old one beside a max_model_len."""
    q = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
         "runtime": "llama.cpp", "gpu": "RTX 3060", "fit": "off", "ctx_size": "65536"}
    body = client.get("/api/estimate", q).json()
    assert body["verdict"] == "does_not_fit"
    ctx = [s for s in body["suggestions"] if set(s["params"]) == {"ctx_size"}]
    assert len(ctx) == 1 and 0 < int(ctx[0]["params"]["ctx_size"]) < 65536
    html = client.get("/", q, follow=True).content.decode()
    links = [dict(parse_qsl(urlsplit(unescape(h)).query))
             for h in re.findall(r'<a href="([^"]+)" class="suggestion">', html)]
    link = next(x for x in links if x.get("ctx_size") != "65536" and x.get("gguf_file") == q["gguf_file"]
                and x.get("fit") == "off")
    assert link["ctx_size"] == ctx[0]["params"]["ctx_size"] and "max_model_len" not in link
    assert client.get("/api/estimate", link).json()["verdict"] == "works"
