"""Tensor types derived from llama.cpp's quantization rules (calculator/runtimes/llamacpp/quant_rules.py), the
GGUF file picker (gguf_repos.py, offline catalog and the Hub's file tree through tests/hub_server.py), the speed
model (speed.py) and the Ollama command.

Expected values are computed here by hand from the config and ggml's block sizes (Q6_K: 210 B per 256 values,
Q4_K: 144, Q8_0: 34 per 32), or taken from public logs and the Hub's own file listings. The exact per-tensor
agreement with llama.cpp's llama_model_quantize is the oracle's job (crosscheck.QUANT_CASES, slow)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("gguf")

from calculator.runtimes.llamacpp.memory import NotModelled, plan
from calculator.runtimes.llamacpp.quant_rules import derive_meta, ftype_from_filename, tensor_types
from tests.conftest import load_config

MiB = 2**20
LLAMA_3B = "meta-llama__Llama-3.2-3B.json"


def test_q4_k_m_layer_pattern_by_hand():
    """Q4_K_M on a 28-layer model: attn_v and ffn_down are Q6_K where use_more_bits holds: the first 28/8 = 3
    layers, the last from 7*28/8 = 24 on, and every third layer in between ((i - 3) % 3 == 2: 5, 8, ..., 23);
    every other layer matrix is Q4_K; the tied embedding is quantized as the output, Q6_K."""
    _, table, _ = tensor_types(load_config(LLAMA_3B), "Q4_K_M")
    types = {n: t for n, _, t in table}
    more = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27}
    for i in range(28):
        want = "Q6_K" if i in more else "Q4_K"
        assert types[f"blk.{i}.attn_v.weight"] == want and types[f"blk.{i}.ffn_down.weight"] == want, i
        assert types[f"blk.{i}.attn_q.weight"] == types[f"blk.{i}.ffn_up.weight"] == "Q4_K"
        assert types[f"blk.{i}.attn_norm.weight"] == "F32"
    assert types["token_embd.weight"] == "Q6_K" and "output.weight" not in types
    assert types["rope_freqs.weight"] == "F32"  # llama3 rope scaling writes rope_freqs


def test_public_metal_log_lcpp_027_is_reproduced():
    """Ollama 0.21 / llama.cpp on an M2, llama3.2:3b Q4_K_M, all 29 layers on Metal, mmap: the log prints
    'CPU_Mapped model buffer size = 308.23 MiB' and 'Metal_Mapped model buffer size = 1918.35 MiB'. By hand: the
    token embedding (input layer, always on the CPU) is 128256 x 3072 values in Q6_K = 394002432 / 256 x 210 B."""
    meta = derive_meta(load_config(LLAMA_3B), "Q4_K_M")
    assert meta.tensor("token_embd.weight").n_bytes == 128256 * 3072 // 256 * 210
    p = plan(meta, n_ctx=4096, device="Metal")
    got = {b.buft: round(b.bytes / MiB, 2) for b in p.buffers if b.kind == "model"}
    assert got == {"CPU_Mapped": 308.23, "MTL0_Mapped": 1918.35}
    assert "derived from llama.cpp's quantization rules for Q4_K_M" in meta.source


def test_derived_sizes_match_the_hub_listing():
    """The Hub page of bartowski/Meta-Llama-3.1-8B-Instruct-GGUF lists Q8_0 at 8.54 GB and Q4_K_M at 4.92 GB
    (decimal, rounded; the file adds its header, a few MB of tokenizer). The derived tensor data must be just
    below: Q8_0 is every matrix at 34 B / 32 values plus F32 norms, by hand 8.53 GB."""
    cfg = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    for ftype, listed in (("Q8_0", 8.54), ("Q4_K_M", 4.92)):
        size = derive_meta(cfg, ftype, has_imatrix=True).file_sizes[0] / 1e9
        assert listed - 0.02 < size < listed, (ftype, size)
    # Q8_0 by hand: 32 layers x (q 4096x4096 + k,v 4096x1024 x2 + o 4096x4096 + 3 x 4096x14336) + embed + output
    mats = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 2 * 128256 * 4096
    norms = (32 * 2 + 1) * 4096 * 4 + 64 * 4  # attn/ffn norms, output_norm, rope_freqs (head_dim/2 = 64 floats)
    q8 = derive_meta(cfg, "Q8_0")
    assert sum(t.n_bytes for t in q8.tensors) == mats // 32 * 34 + norms


@pytest.mark.parametrize("name,ftype", [
    ("Llama-3.2-3B-Instruct-Q4_K_M.gguf", "Q4_K_M"), ("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf", "Q4_K_M"),
    ("model.IQ4_XS.gguf", "IQ4_XS"), ("Meta-Llama-3.1-8B-Instruct-bf16.gguf", "BF16"), ("x-Q8_0.gguf", "Q8_0"),
])
def test_file_type_from_the_name(name, ftype):
    assert ftype_from_filename(name) == ftype


@pytest.mark.parametrize("name,why", [
    ("GLM-4.6-UD-TQ1_0.gguf", "Unsloth Dynamic"), ("Llama-3.2-3B-Instruct-Q4_K_L.gguf", "hand-chosen"),
    ("model.gguf", "states no llama.cpp file type"),
])
def test_hand_mixed_or_unnamed_files_are_refused(name, why):
    with pytest.raises(NotModelled, match=why):
        ftype_from_filename(name)


def test_architecture_outside_the_table_is_refused():
    with pytest.raises(NotModelled, match="model_type"):
        derive_meta({"model_type": "mamba", "num_hidden_layers": 2}, "Q4_K_M")


def test_moe_with_eight_experts_takes_q8_0_attention():
    """llama-quant.cpp:599-609: with exactly 8 experts attn_k and attn_v are Q8_0 at any k-quant (Mixtral)."""
    _, table, _ = tensor_types(load_config("mistralai__Mixtral-8x7B-Instruct-v0.1.json"), "Q4_K_M")
    types = {n: t for n, _, t in table}
    assert types["blk.0.attn_k.weight"] == types["blk.31.attn_v.weight"] == "Q8_0"
    assert types["blk.0.ffn_down_exps.weight"] == "Q6_K"  # layer 0 < 32/8: use_more_bits
    assert types["blk.0.ffn_gate_inp.weight"] == "F32"  # the router is never quantized


# ---------------------------------------------------------------- the picker


def test_offline_catalog_lists_files_with_sizes(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from calculator.runtimes.llamacpp.gguf_repos import list_gguf_files

    listing = list_gguf_files("bartowski/Llama-3.2-3B-Instruct-GGUF")
    q4 = listing.file("Llama-3.2-3B-Instruct-Q4_K_M.gguf")
    assert q4.listed_gb == 2.02 and q4.ftype == "Q4_K_M" and 2.0e9 < q4.derived_bytes < 2.02e9
    assert listing.default_for_ollama().name == q4.name
    assert "hand-chosen" in listing.file("Llama-3.2-3B-Instruct-Q4_K_L.gguf").ftype_note
    assert "offline GGUF catalog" in listing.source
    assert list_gguf_files("nobody/unknown-GGUF") is None


def test_hub_tree_groups_split_files(monkeypatch):
    from calculator.runtimes.llamacpp.gguf_repos import list_gguf_files
    from tests.hub_server import FakeHub

    files = {"README.md": b"x", "m-Q8_0-00001-of-00002.gguf": b"G1", "m-Q8_0-00002-of-00002.gguf": b"G2",
             "m-Q4_K_M.gguf": b"G3", "mmproj-F16.gguf": b"P"}
    with FakeHub() as hub:
        hub.add_repo("org/m-GGUF", files)
        hub.repos["org/m-GGUF"].sizes.update({"m-Q8_0-00001-of-00002.gguf": 5_000_000_000,
                                               "m-Q8_0-00002-of-00002.gguf": 3_000_000_000,
                                               "m-Q4_K_M.gguf": 4_900_000_000})
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        listing = list_gguf_files("org/m-GGUF")
        assert hub.count("GET", "/tree/") == 1
    names = {f.name: f for f in listing.files}
    assert set(names) == {"m-Q8_0-00001-of-00002.gguf", "m-Q4_K_M.gguf"}
    assert names["m-Q8_0-00001-of-00002.gguf"].parts == ["m-Q8_0-00001-of-00002.gguf", "m-Q8_0-00002-of-00002.gguf"]
    assert names["m-Q8_0-00001-of-00002.gguf"].size_bytes == 8_000_000_000
    assert listing.projectors == ["mmproj-F16.gguf"]
    assert "Hub file tree" in listing.source


# ---------------------------------------------------------------- Ollama command, speed


def test_ollama_command_names_the_hub_repo_and_the_server_settings():
    from calculator.runtimes.llamacpp.launch import ollama_run_argv, ollama_serve_argv

    assert ollama_run_argv("bartowski/Llama-3.2-3B-Instruct-GGUF", "Llama-3.2-3B-Instruct-IQ4_XS.gguf") == \
        ["ollama", "run", "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:IQ4_XS"]
    assert ollama_serve_argv(num_ctx=8192, num_parallel=2, kv_cache_type="q8_0", flash_attention=True) == \
        ["env", "OLLAMA_CONTEXT_LENGTH=8192", "OLLAMA_NUM_PARALLEL=2", "OLLAMA_KV_CACHE_TYPE=q8_0",
         "OLLAMA_FLASH_ATTENTION=1", "ollama", "serve"]


def test_decode_reads_the_device_buffer_once_per_token():
    """All layers on Metal: a decode step reads the Metal mapped range once (token_embd's lookup is one row, but
    the tied output matmul reads the whole table), i.e. 1918.35 MiB for llama3.2:3b Q4_K_M, plus the KV cache
    of the context: 28 layers x 8 heads x 128 x 2 (K, V) x 2 B = 112 KiB per token."""
    from calculator.engine.gpus import get_gpu
    from calculator.runtimes.llamacpp.speed import speed

    meta = derive_meta(load_config(LLAMA_3B), "Q4_K_M")
    p = plan(meta, n_ctx=4096, device="Metal")
    s = speed(meta, p, get_gpu("Apple M2 Max 64GB"), prompt_len=1000, output_len=200)
    metal = next(b.bytes for b in p.buffers if b.buft == "MTL0_Mapped")
    assert round(s.weight_bytes_per_token / MiB, 2) == 1918.35 == round(metal / MiB, 2)
    assert s.mean_context == 1100 and s.kv_bytes_per_token_step == 1100 * 28 * 8 * 128 * 2 * 2
    # bandwidth-bound: at 400 GB/s nothing can beat bytes / bandwidth
    floor_ms = (s.weight_bytes_per_token + s.kv_bytes_per_token_step) / 400e9 * 1e3
    assert s.itl_ms > floor_ms and s.decode.bound == "memory" and s.efficiency_label == "fitted"
    assert s.ttft_ms is not None and s.ttft_ms > s.itl_ms


# ---------------------------------------------------------------- the whole path (Django test client)


def test_mac_user_picks_a_gguf_file_a_context_and_ollama(client, offline_hub):
    """Done-when of issue #14: a Mac (M2, 8 GB), Ollama, a GGUF repo, 8,192 tokens: the page lists the repo's files
    with sizes; picking Q4_K_M gives the fit, the KV cache (28 layers x 8,192 cells x 8 heads x 128 x 2 x 2 B =
    896 MiB), the backend (Metal, flash attention auto), a speed estimate and the command to run."""
    base = {"model": "bartowski/Llama-3.2-3B-Instruct-GGUF", "runtime": "ollama", "gpu": "Apple M2 8GB",
            "max_model_len": "8192"}
    page = client.get("/", base, follow=True)
    assert page.status_code == 200, page.status_code
    html = page.content.decode()
    assert 'id="gguf-files"' in html and "Llama-3.2-3B-Instruct-IQ4_XS.gguf" in html and "1.83 GB" in html
    body = client.get("/api/estimate", {**base, "gguf_file": "Llama-3.2-3B-Instruct-Q4_K_M.gguf"}).json()
    assert body["verdict"] in ("works", "depends"), body
    assert body["kv_cache_mib"] == 28 * 8192 * 8 * 128 * 2 * 2 / MiB == 896
    assert body["model_buffer_mib"] == {"CPU_Mapped": 308.23, "MTL0_Mapped": 1918.35}
    assert body["weights_source"].startswith("derived from llama.cpp's quantization rules for Q4_K_M")
    assert body["compat"]["auto_selected"] == "Metal"
    assert body["itl_ms"] > 0 and body["output_tokens_per_s"] > 0 and body["ttft_ms"] > 0
    assert body["serve_argv"] == ["env", "OLLAMA_CONTEXT_LENGTH=8192", "OLLAMA_NUM_PARALLEL=1",
                                  "OLLAMA_KV_CACHE_TYPE=f16", "ollama", "serve"]
    assert body["client_argv"] == ["ollama", "run", "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M"]
    page = client.get("/", {**base, "gguf_file": "Llama-3.2-3B-Instruct-Q4_K_M.gguf"}, follow=True).content.decode()
    for part in ('id="verdict"', 'id="speed"', 'id="itl-ms"', 'id="run-command"',
                 "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M", "OLLAMA_CONTEXT_LENGTH=8192", "Metal backend"):
        assert part in page, part


def test_a_file_not_in_the_repo_is_refused(client, offline_hub):
    body = client.get("/api/estimate", {"model": "bartowski/Llama-3.2-3B-Instruct-GGUF", "runtime": "llama.cpp",
                                        "gpu": "RTX 3060", "gguf_file": "nope-Q4_K_M.gguf"})
    assert body.status_code == 400 and body.json()["field"] == "gguf_file"


def test_gguf_only_repo_read_from_the_hub(client, db, monkeypatch, tmp_path):
    """A GGUF repo without config.json, not in the catalog: the architecture and every tensor come from the
    header (ranged reads); the weights are 'read from the GGUF header'."""
    from calculator.runtimes.llamacpp.crosscheck import write_tiny_gguf
    from tests.hub_server import FakeHub

    from calculator import metadata

    path = write_tiny_gguf(tmp_path / "tiny-Q8_0.gguf", "llama", n_layer=2, n_embd=128, head_dim=32,
                           weight_type="Q8_0")
    metadata.reset_hub_state()  # an earlier test's unreachable Hub must not keep this one from the local Hub
    with FakeHub() as hub:
        hub.add_repo("org/tiny-GGUF", {"tiny-Q8_0.gguf": path.read_bytes()})
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        body = client.get("/api/estimate", {"model": "org/tiny-GGUF", "runtime": "llama.cpp", "gpu": "RTX 3060",
                                            "gguf_file": "tiny-Q8_0.gguf", "ctx_size": "1024"}).json()
    assert "weights_source" in body and body["weights_source"].startswith("read from the GGUF header"), body
    assert [f["name"] for f in body["gguf_files"]["files"]] == ["tiny-Q8_0.gguf"]
    # KV by hand: 2 layers x 1024 cells x 2 heads x 32 x 2 (K, V) x 2 B = 0.5 MiB
    assert body["kv_cache_mib"] == 0.5
