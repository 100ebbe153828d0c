"""Which engine Ollama runs a GGUF model on, per release, and the memory of its own Go engine.

The engine choice is asserted against the architecture lists of ollama's fs/ggml/ggml.go ``OllamaEngineRequired``
at each tag (read from the source, not from this product's code) and commit 9db4bdbad (0.30.0: llama-server for every
GGML model). The Go engine's figures are derived by hand from gemma-3-4b-it's config and checked against the public
Ollama 0.21.0 log lcpp-026 (Apple M2, gemma3 4B Q4_K_M, num_ctx 4096): ``kv cache device=Metal size="254.0 MiB"``
and ``model weights device=CPU size="525.0 MiB"``."""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from calculator.request import InputError, parse_request
from calculator.runtimes.llamacpp import ollama as og
from calculator.runtimes.llamacpp.gguf_meta import meta_from_hf_config
from calculator.runtimes.llamacpp.quant_rules import derive_meta
from tests.conftest import load_config

MiB = 2**20
LCPP_026 = next(r for r in json.loads(Path("/work/shared/cases/runtime_startup_logs.json").read_text())["llamacpp"]
                if r["id"] == "lcpp-026") if Path("/work/shared/cases/runtime_startup_logs.json").exists() else None


@pytest.mark.parametrize("arch, release, engine", [
    # in OllamaEngineRequired from v0.19.0 (fs/ggml/ggml.go:277-301)
    ("gemma3", "0.19.0", "ollama"), ("gemma3", "0.21.0", "ollama"), ("gpt-oss", "0.24.0", "ollama"),
    ("qwen3", "0.22.1", "ollama"), ("mistral3", "0.20.7", "ollama"),
    # gemma4 joins the list in v0.20.0; laguna and nemotron_h_omni in v0.22.0
    ("gemma4", "0.19.0", "llama.cpp"), ("gemma4", "0.20.0", "ollama"),
    ("laguna", "0.21.2", "llama.cpp"), ("laguna", "0.22.0", "ollama"),
    # never in the list: Ollama's llama.cpp runner
    ("llama", "0.21.0", "llama.cpp"), ("qwen2", "0.24.0", "llama.cpp"), ("gemma2", "0.21.0", "llama.cpp"),
    # since 0.30.0 every GGML model runs on llama-server (llm/server.go:106-120 at v0.30.0)
    ("gemma3", "0.30.0", "llama.cpp"), ("gpt-oss", "0.32.15", "llama.cpp"), ("qwen3", "0.33.0-rc2", "llama.cpp"),
])
def test_engine_per_architecture_and_release(arch, release, engine):
    e = og.ollama_engine(arch, release)
    assert e.engine == engine
    assert e.runner == ("ollamarunner" if engine == "ollama" else
                        "llama-server" if og.parse_release(release) >= (0, 30, 0) else "llamarunner")
    assert "fs/ggml/ggml.go" in e.source or "llm/server.go:106-120" in e.source


@pytest.mark.parametrize("release", ["0.18.3", "0.26.0", "0.29.9", "0.34.0", "latest", "1.0"])
def test_releases_not_modelled_are_refused_by_name(release):
    with pytest.raises(ValueError, match="ollama_release"):
        og.ollama_rule(release)


def _gemma3_4b(quant: str | None = None):
    cfg = load_config("google__gemma-3-4b-it.json")
    return derive_meta(cfg, quant, source="t") if quant else meta_from_hf_config(cfg, source="t")


def test_gemma3_kv_cache_as_lcpp_026_logs_it():
    """gemma-3-4b-it: 34 layers, 4 KV heads x 256, sliding window 1024; every 6th layer global (5 layers), 29 sliding.
    num_ctx 4096, 1 slot, batch 512: global cells 4096; sliding cells 1 x 1024 + 512 = 1536 (a multiple of 256);
    per cell and layer K + V = 2 x 4 x 256 x 2 B = 4096 B -> (5 x 4096 + 29 x 1536) x 4096 B = 254.0 MiB."""
    tc = load_config("google__gemma-3-4b-it.json")["text_config"]
    per_cell = 2 * tc["num_key_value_heads"] * tc["head_dim"] * 2
    n_global = tc["num_hidden_layers"] // 6
    want = (n_global * 4096 + (tc["num_hidden_layers"] - n_global) * (tc["sliding_window"] + 512)) * per_cell
    kv = og.engine_kv(_gemma3_4b(), num_ctx=4096, num_parallel=1, num_batch=512)
    assert kv["bytes"] == want
    assert [(c["name"], c["cells"], len(c["layers"])) for c in kv["caches"]] == [("full", 4096, 5), ("SWA", 1536, 29)]
    line = og.log_lines(weights=None, kv=kv, gpu_name="Metal")[0]
    assert line == 'msg="kv cache" device=Metal size="254.0 MiB"'
    if LCPP_026 is not None:
        assert 'msg="kv cache" device=Metal size="254.0 MiB"' in LCPP_026["quote"]


def test_gemma3_cpu_weights_are_the_token_embedding_as_lcpp_026_logs_them():
    """The Go engine keeps token_embd on the CPU as input weights (ml/backend/ggml/ggml.go:308-312); gemma3 ties
    its output to it, so llama-quantize gives it the output type, Q6_K (210 B per 256 values). The GGUF holds the
    tokenizer's 262,144 pieces (llama.cpp logs n_vocab = 262144; config.json's vocab_size 262,208 is padded):
    262144 x 2560 / 256 x 210 B = 525.0 MiB, as lcpp-026 logs ("model weights" device=CPU size="525.0 MiB")."""
    tc = load_config("google__gemma-3-4b-it.json")["text_config"]
    w = og.engine_weights(_gemma3_4b("Q4_K_M"), "Metal")
    assert w["CPU"] == 262144 * tc["hidden_size"] // 256 * 210
    assert og.human_bytes2(w["CPU"]) == "525.0 MiB"
    # the tied output copy is on the GPU too, so the GPU holds more than the CPU's embedding
    assert w["Metal"] > w["CPU"]


def test_sliding_window_cache_rules():
    """causal.go Init: with 2 slots the window memory is max(1024, 1024 + 1) = 1025 -> 2 x 1025 + 512 = 2562 -> 2816
    cells (a multiple of 256); with num_ctx <= the window the sliding cache is a full one."""
    m = _gemma3_4b()
    two = og.engine_kv(m, num_ctx=8192, num_parallel=2)
    assert {c["name"]: c["cells"] for c in two["caches"]} == {"full": 16384, "SWA": 2816}
    small = og.engine_kv(m, num_ctx=1024)
    assert {c["name"]: c["cells"] for c in small["caches"]} == {"full": 1024, "SWA": 1024}


def test_gpt_oss_swa_memory_cache():
    """gpt-oss: NewSWAMemCache(128, 4096) on the even layers: at num_ctx 8192 the sliding cells are 4096 + 512 =
    4608; at num_ctx 4096 the memory (4096) reaches the capacity and the cache is a full one (4096 cells)."""
    m = meta_from_hf_config(load_config("openai__gpt-oss-20b.json"), source="t")
    big = og.engine_kv(m, num_ctx=8192)
    assert {c["name"]: (c["cells"], len(c["layers"])) for c in big["caches"]} == {"full": (8192, 12), "SWA": (4608, 12)}
    assert {c["name"]: c["cells"] for c in og.engine_kv(m, num_ctx=4096)["caches"]} == {"full": 4096, "SWA": 4096}


def test_quantized_cache_only_with_flash_attention():
    """llm/server.go:256-270: the Go engine takes OLLAMA_KV_CACHE_TYPE q8_0 / q4_0 only with flash attention;
    q8_0 = 34 B per 32 values: 254 MiB x 34 / 64."""
    m = _gemma3_4b()
    assert og.engine_kv(m, num_ctx=4096, kv_cache_type="q8_0", flash_attention=False)["type"] == "f16"
    q8 = og.engine_kv(m, num_ctx=4096, kv_cache_type="q8_0", flash_attention=True)
    assert q8["type"] == "q8_0" and q8["bytes"] == 254 * MiB * 34 // 64
    assert og.engine_kv(m, num_ctx=4096, kv_cache_type="bf16")["type"] == "f16"


def test_architecture_without_a_transcribed_cache_is_not_modelled():
    m = meta_from_hf_config(load_config("meta-llama__Llama-3.2-3B.json"), source="t")
    assert og.engine_kv(m, num_ctx=4096) is None


def test_api_says_the_engine_and_does_not_print_llama_cpp_compute_for_the_go_engine(client, offline_hub):
    q = {"model": "google/gemma-3-4b-it", "runtime": "ollama", "gpu": "Apple M3 Max 64GB", "ctx_size": "4096"}
    old = client.get("/api/estimate", q | {"ollama_release": "0.21.0"}).json()
    assert old["ollama"]["engine"]["engine"] == "ollama" and old["ollama"]["engine"]["rule"] == "Ollama 0.20.4 .. 0.21.2"
    assert old["kv_cache_mib"] == 254.0
    assert old["compute_buffer_mib"] == {"Metal": None} and "not modelled" in old["compute_buffer_source"]
    assert old["log_lines"] == ['msg="kv cache" device=Metal size="254.0 MiB"']
    assert old["verdict"] == "depends"
    new = client.get("/api/estimate", q).json()  # default release: llama-server's buffers
    assert new["ollama"]["engine"]["runner"] == "llama-server" and new["ollama"]["release"] == "0.32.15"
    assert any(line.startswith("sched_reserve:") for line in new["log_lines"])


def test_ollama_release_is_checked_and_ollama_only():
    base = {"model": "google/gemma-3-4b-it", "gpu": "Apple M3 Max 64GB"}
    assert parse_request(base | {"runtime": "ollama"}).ollama_release == og.DEFAULT_OLLAMA_RELEASE
    with pytest.raises(InputError) as e:
        parse_request(base | {"runtime": "ollama", "ollama_release": "0.27.0"})
    assert e.value.field == "ollama_release"
    with pytest.raises(InputError) as e:
        parse_request(base | {"runtime": "llama.cpp", "ollama_release": "0.21.0"})
    assert e.value.field == "ollama_release"
    with pytest.raises(InputError) as e:
        parse_request(base | {"runtime": "vllm", "ollama_release": "0.21.0"})
    assert e.value.field == "ollama_release"


def test_page_names_the_engine(client, offline_hub):
    q = {"model": "google/gemma-3-4b-it", "runtime": "ollama", "gpu": "Apple M3 Max 64GB", "ctx_size": "4096",
         "ollama_release": "0.21.0"}
    html = client.get("/", q, follow=True).content.decode()
    assert 'id="ollama-engine">(its own Go engine, rule Ollama 0.20.4 .. 0.21.2)' in html
    assert "msg=&quot;kv cache&quot; device=Metal size=&quot;254.0 MiB&quot;" in html
    assert "compute graph (Metal)" in html and "sched_reserve" not in html
    # the answer is named by Ollama's release, not by the llama.cpp rule set behind it
    assert "on 1× Apple M3 Max 64GB (Ollama 0.21.0);" in html and "Reproduce it with Ollama 0.21.0" in html


@pytest.mark.parametrize("release", ["0.32.15", "0.21.0"])
def test_num_ctx_is_cut_to_the_training_context(client, offline_hub, release):
    """llm/server.go:166-171 (v0.21.0) / :111-116 (v0.32.15) NewLlamaServer: "requested context size too large for
    model", if opts.NumCtx > trainCtx { opts.NumCtx = trainCtx }, before the runner is asked for num_ctx x parallel
    cells. Qwen3-8B (max_position_embeddings 40960) on a 64 GB M3 Max: the VRAM default 262144 -> 40960 cells. The
    command sets OLLAMA_CONTEXT_LENGTH=40960 (what Ollama uses), and every surface says why the KV cache is smaller
    than the 262144 the setting would read as."""
    train = load_config("Qwen__Qwen3-8B.json")["max_position_embeddings"]
    q = {"model": "Qwen/Qwen3-8B", "runtime": "ollama", "gpu": "Apple M3 Max 64GB", "ollama_release": release}
    body = client.get("/api/estimate", q).json()
    assert body["ollama"]["num_ctx"] == 262144 and body["ollama"]["kv_size"] == train == 40960
    assert body["kv_cache_tokens"] == 40960 and "OLLAMA_CONTEXT_LENGTH=40960" in body["serve_argv"]
    cut = "is more than the model's training context, 40,960: Ollama cuts it"
    assert any(cut in n and "llm/server.go:166-171" in n for n in body["notes"])
    page = client.get("/", q, follow=True).content.decode()
    assert "OLLAMA_CONTEXT_LENGTH=40960 OLLAMA_NUM_PARALLEL=1" in page and cut.replace("'", "&#x27;") in page
    out = StringIO()
    with pytest.raises(CommandError) as err:  # verdict depends (no GGUF file): exit 3, after the table
        call_command("estimate", "--model", "Qwen/Qwen3-8B", "--runtime", "ollama", "--gpu", "Apple M3 Max 64GB",
                     "--ollama-release", release, stdout=out)
    text = out.getvalue()
    assert err.value.returncode == 3 and "Command: env OLLAMA_CONTEXT_LENGTH=40960 " in text and cut in text


def test_a_num_ctx_given_above_the_training_context_with_slots(client, offline_hub):
    """num_ctx 50000 given, OLLAMA_NUM_PARALLEL 2: cut to 40960 per slot, so 2 x 40960 = 81920 cells."""
    body = client.get("/api/estimate", {"model": "Qwen/Qwen3-8B", "runtime": "ollama", "gpu": "RTX 4090",
                                        "ctx_size": "50000", "parallel": "2"}).json()
    assert body["kv_cache_tokens"] == 2 * 40960 and body["ollama"]["num_ctx"] == 50000
    assert body["serve_argv"][1:3] == ["OLLAMA_CONTEXT_LENGTH=40960", "OLLAMA_NUM_PARALLEL=2"]
    assert any("num_ctx 50,000 (as given)" in n and "81,920 cells (40,960 x OLLAMA_NUM_PARALLEL 2)" in n
               for n in body["notes"])


def test_a_draft_model_on_ollama_is_refused_by_name_before_the_draft_is_loaded(client, offline_hub):
    """The draft repo here is not loadable offline as a model (a GGUF repo): the refusal must be Ollama's, not a
    failure to load the draft."""
    spec = '{"method":"draft_model","model":"bartowski/Llama-3.2-1B-Instruct-GGUF","num_speculative_tokens":8}'
    r = client.get("/api/estimate", {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "ollama",
                                     "gpu": "RTX 4090", "speculative_config": spec})
    assert r.status_code == 400 and r.json()["field"] == "speculative_config"
    assert "Ollama's speculative decoding is not modelled" in r.json()["error"]
    assert "from 0.32.7 it runs only MTP or DFlash drafts" in r.json()["error"]  # llm/llama_server.go:802-824


def test_before_0_30_a_model_bigger_than_the_gpu_depends_on_ollamas_own_layout(client, offline_hub):
    """Ollama 0.19-0.24 does not refuse a model bigger than the GPU: its runner measures a layout and offloads fewer
    layers (llm/server.go createLayout / assignLayers), which is not modelled: the answer depends on it, says so, and
    keeps the all-on-GPU overflow as the reason why; since 0.30 llama-server's --fit gives the layer count."""
    q = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gguf_file": "Llama-3.1-70B-Instruct-Q4_K_M.gguf",
         "runtime": "ollama", "gpu": "RTX 4090", "ctx_size": "8192"}
    old = client.get("/api/estimate", q | {"ollama_release": "0.21.0"}).json()
    assert old["verdict"] == "depends" and "createLayout" in old["verdict_condition"]
    assert "more than its 23.64 GiB" in old["verdict_condition"]
    new = client.get("/api/estimate", q).json()
    assert new["fit"]["n_gpu_layers"] == 43 and "createLayout" not in (new.get("verdict_condition") or "")
