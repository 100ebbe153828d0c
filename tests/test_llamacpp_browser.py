"""The Mac + Ollama + GGUF path in a real browser (Playwright driving Debian's Chromium, as tests/test_browser.py):
open a GGUF repo for Ollama on an 8 GB M2 at 8,192 tokens, pick the Q4_K_M file from the page's file list, and
see the verdict, the KV cache, the Metal backend, a speed estimate and both halves of the Ollama command."""
from __future__ import annotations

import pytest

from tests.test_browser import CHROMIUM, browser  # noqa: F401 - the same Chromium, launched once per module

REPO = "bartowski/Llama-3.2-3B-Instruct-GGUF"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's Chromium is not installed (apt-get install chromium)"),
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("offline_hub"),
]


def test_mac_user_picks_a_gguf_file_for_ollama(live_server, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{live_server.url}/?model={REPO}&runtime=ollama&gpu=Apple+M2+8GB&max_model_len=8192")
        page.wait_for_selector("#gguf-files")
        page.click("#gguf-files a.gguf-file >> text=Llama-3.2-3B-Instruct-Q4_K_M.gguf")
        page.wait_for_url("**gguf_file=Llama-3.2-3B-Instruct-Q4_K_M.gguf**")
        page.wait_for_selector("#run-command")
        assert page.inner_text("#run-command") == f"ollama run hf.co/{REPO}:Q4_K_M"
        assert "OLLAMA_CONTEXT_LENGTH=8192" in page.inner_text("#serve-command")
        assert page.get_attribute("#verdict", "data-verdict") in ("works", "depends")
        assert "896.00 MiB" in page.inner_text("#logged")  # 28 layers x 8192 cells x 2 KiB (K and V, f16)
        assert "Metal backend" in page.inner_text("#compat")
        assert float(page.inner_text("#output-tok-s")) > 0
    finally:
        context.close()
