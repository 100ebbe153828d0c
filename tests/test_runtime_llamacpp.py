"""llama.cpp and Ollama behind the runtime seam: llama.cpp's flag names on every surface, its KV cache as it
logs it (hand-derived from a real config), Ollama's defaults, and honest verdicts where model buffers or
compute buffers are not known."""
from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from calculator.request import InputError, parse_request
from tests.conftest import load_config

QWEN = "Qwen/Qwen3-8B"


pytestmark = pytest.mark.usefixtures("offline_hub")


def test_kv_cache_as_llama_cpp_logs_it(client):
    """Qwen3-8B, -c 8192 -np 2 (two streams of 4,096 cells), q8_0 K and V (34 B per 32 values,
    ggml-common.h block_q8_0): per layer and cell 8 KV heads x 128 = 1,024 values -> 1,088 B;
    K = 36 layers x 8,192 cells x 1,088 B = 306 MiB, V the same: "size = 612.00 MiB"."""
    cfg = load_config("Qwen__Qwen3-8B.json")
    body = client.get("/api/estimate", {"model": QWEN, "runtime": "llama.cpp", "gpu": "RTX 4090", "ctx_size": "8192",
                                        "parallel": "2", "cache_type_k": "q8_0", "cache_type_v": "q8_0",
                                        "flash_attn": "on"}).json()
    values = cfg["num_key_value_heads"] * cfg["head_dim"]
    k_bytes = cfg["num_hidden_layers"] * 8192 * values * 34 // 32
    assert body["kv_cache_mib"] == round(2 * k_bytes / 2**20, 2) == 612.0
    assert any("(  4096 cells,  36 layers,  2/2 seqs)" in line for line in body["log_lines"])
    assert body["serve_argv"][:1] == ["llama-server"] and "-np" in body["serve_argv"]
    # no GGUF file: the model buffers are not known, and the verdict says so instead of "works"
    assert body["verdict"] == "depends" and "gguf_file" in body["verdict_condition"]


def test_ollama_defaults_by_vram(client):
    """An M2 Max with 64 GB: Metal's working set is 3/4 of it (48 GiB) >= 47 GiB, so Ollama's vram-based
    default context is 262,144 (ollama server/routes.go), one sequence, f16 cache. Qwen3-8B was trained for 40,960
    (max_position_embeddings), to which Ollama cuts num_ctx (llm/server.go:111-116 at v0.32.15): the command sets
    that, the context Ollama uses (tests/test_ollama_engine.py)."""
    body = client.get("/api/estimate", {"model": QWEN, "runtime": "ollama", "gpu": "Apple M2 Max 64GB"}).json()
    assert body["ollama"]["num_ctx"] == 262144 and body["n_seq_max"] == 1
    assert body["serve_argv"] == ["env", "OLLAMA_CONTEXT_LENGTH=40960", "OLLAMA_NUM_PARALLEL=1",
                                  "OLLAMA_KV_CACHE_TYPE=f16", "ollama", "serve"]
    # Qwen/Qwen3-8B is no GGUF repo: Ollama cannot pull it as hf.co/..., so no `ollama run` is offered, and why
    assert body["client_argv"] is None and any("hf.co/" in n for n in body["notes"])


@pytest.mark.parametrize("params,field", [
    ({"cache_type_v": "q8_0", "flash_attn": "off"}, "cache_type_v"),
    ({"cache_type_k": "q3_k"}, "cache_type_k"),
    ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype"),
    ({"tensor_parallel_size": "2"}, "tensor_parallel_size"),
    ({"gpu_memory_utilization": "0.9"}, "gpu_memory_utilization"),
    ({"gpu": "MI300X", "llamacpp_backend": "cuda"}, "llamacpp_backend"),  # AMD runs rocm / vulkan builds
    ({"gpu": "MI300X", "llamacpp_backend": "sycl"}, "llamacpp_backend"),  # SYCL is not modelled
])
def test_what_llama_cpp_refuses_or_we_do_not_model_is_named(client, params, field):
    body = client.get("/api/estimate", {"model": QWEN, "runtime": "llama.cpp", "gpu": "RTX 4090", **params}).json()
    assert body["field"] == field, body


def test_llama_cpp_flags_on_the_command_line():
    out = StringIO()
    call_command("estimate", "--model", QWEN, "--runtime", "llama.cpp", "--gpu", "RTX 4090", "--ctx-size", "4096",
                 "-np", "1", "-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on", "--format", "json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["resolved"]["cache_type_k"] == "q4_0" and data["n_ctx"] == 4096
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", QWEN, "--parallel", "2", stdout=StringIO())
    assert err.value.returncode == 2 and str(err.value).startswith("--parallel:")


def test_llama_cpp_settings_are_refused_for_vllm():
    with pytest.raises(InputError) as err:
        parse_request({"model": QWEN, "cache_type_k": "q8_0"})
    assert err.value.field == "cache_type_k" and "llama.cpp setting" in err.value.message


def test_a_kv_cache_alone_larger_than_the_card_does_not_fit_all_on_the_gpu(client):
    """Llama-3.1-70B on Ollama on an RTX 4090 at num_ctx 131072: the f16 KV cache alone is 80 layers x 131,072
    cells x 8 KV heads x 128 x 2 (K, V) x 2 B = 40,960 MiB, more than the card's 24 GiB, whatever the weights. With
    every layer pinned on the GPU (num_gpu, -ngl 99) it does not fit; left to Ollama's own placement, layers (with
    their KV cache) stay in CPU memory, so it depends on the machine's RAM, as for a GGUF that does not fit."""
    q = {"model": "meta-llama/Llama-3.1-70B-Instruct", "runtime": "ollama", "gpu": "RTX 4090", "max_model_len": "131072"}
    pinned = client.get("/api/estimate", q | {"n_gpu_layers": "99"}).json()
    assert pinned["kv_cache_mib"] == 80 * 131072 * 8 * 128 * 2 * 2 / 2**20 == 40960
    assert pinned["verdict"] == "does_not_fit" and "IQ1_S" in pinned["verdict_headline"]
    placed = client.get("/api/estimate", q).json()
    assert placed["verdict"] == "depends" and "in CPU memory" in placed["verdict_condition"]


def test_without_a_gguf_file_the_iq1_s_floor_applies_only_to_a_pinned_placement(client):
    """Llama-3.1-70B (70.6B parameters) on an RTX 4090 without -c: at IQ1_S (50 B per 256 weights, ggml-common.h
    block_iq1_s) the weights alone are ~12.8 GiB, and the 131,072-cell f16 KV cache 40 GiB. llama-server's --fit (on by
    default) lowers an unset context and keeps layers in CPU memory, so the answer depends on RAM; with --fit off every
    layer must be on the card, and it does not fit (fresh-user pass: the unpinned case said 'does not fit')."""
    q = {"model": "meta-llama/Llama-3.1-70B-Instruct", "runtime": "llama.cpp", "gpu": "RTX 4090"}
    assert client.get("/api/estimate", q).json()["verdict"] == "depends"
    off = client.get("/api/estimate", q | {"fit": "off"}).json()
    assert off["verdict"] == "does_not_fit" and "IQ1_S" in off["verdict_headline"]


def test_the_command_line_table_for_llama_cpp():
    """The table format prints what llama.cpp logs and the command (it used to fail on vLLM-only figures)."""
    out = StringIO()
    with pytest.raises(CommandError) as err:  # verdict 'depends' (no GGUF file): exit status 3
        call_command("estimate", "--model", QWEN, "--runtime", "llama.cpp", "--gpu", "RTX 4090", "--ctx-size", "8192",
                     stdout=out)
    assert err.value.returncode == 3
    text = out.getvalue()
    # 36 layers x 8192 cells x 8 KV heads x 128 x 2 B = 576 MiB for K, the same for V
    assert "llama_kv_cache: size = 1152.00 MiB (  8192 cells,  36 layers,  1/1 seqs)" in text
    # no GGUF file for a non-GGUF repo: an obvious placeholder, not a made-up file name
    assert "Command: llama-server -m '<Qwen3-8B converted to GGUF>.gguf' -c 8192" in text


def test_a_gguf_repo_without_a_chosen_file_is_served_with_hf_not_a_made_up_file(monkeypatch):
    """llama-server -hf <user>/<model>[:quant] downloads the repo's Q4_K_M (else its first file) itself."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from calculator.plan import make_plan
    from calculator.request import parse_request

    plan = make_plan(parse_request({"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "llama.cpp",
                                    "gpu": "RTX 4090", "ctx_size": "8192"}))
    assert plan.launch_argv[:3] == ["llama-server", "-hf", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"]
    assert "-m" not in plan.launch_argv and plan.launch_argv[3:5] == ["-c", "8192"]


LLAMA8B_GGUF = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"}


def test_mac_ollama_llama_8b_gets_a_definite_verdict_with_its_compute_buffers(client):
    """Llama-3.1-8B Q4_K_M on an M3 Max 36GB with Ollama, num_ctx 16384. Ollama 0.32.15 passes -b 1024 -ub 1024:
    16,384 cells are above 4,096 (server/sched.go generationBatchForContext), and its prediction (the 4.92 GB file +
    an f16 KV cache of 2 x 32 x 8 x 128 x 16384 x 2 B = 2 GiB, ~6.6 GiB) is within 75% of the Metal working set and
    leaves 768 MiB under its 80%. The Metal compute buffer is then estimated by hand from the config (vocab 128256,
    hidden 4096, flash attention auto = on): logits 128256 x 1024 x 4 B + 2 hidden states 2 x 4096 x 1024 x 4 B =
    533 MiB, with its stated error; the model buffers and the 2 GiB KV cache leave ~19 GiB, far more than that, so
    the verdict is "works", not "depends". Ollama 0.24.0's llama.cpp runner used n_ubatch min(512, num_ctx): 266.5
    MiB."""
    from calculator.engine.gpus import get_gpu, metal_working_set_bytes

    body = client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "ollama", "gpu": "Apple M3 Max 36GB",
                                                       "ctx_size": "16384"}).json()
    ws = metal_working_set_bytes(get_gpu("Apple M3 Max 36GB"))
    predicted = 4.925e9 + 2 * 32 * 8 * 128 * 16384 * 2  # the Hub page's 4.92 GB, rounded up, + Ollama's f16 KV
    assert predicted <= ws * 75 // 100 and 768 * 2**20 <= ws * 80 // 100 - predicted and 16384 <= 32768
    assert body["ollama"]["num_batch"] == 1024 and body["ollama"]["batch"]["determined"]
    assert "server/sched.go:797-915" in body["ollama"]["sources"]["num_batch"]
    assert body["compute_buffer_mib"]["MTL0"] == round((128256 * 1024 * 4 + 2 * 4096 * 1024 * 4) / 2**20, 2) == 533
    # host: the KQ mask, f16 with flash attention in 0.3.36, 16384 x 1024 x 2 B + token embeddings 4096 x 1024 x 4 B
    # + 3 x 1024 x 4 B of ids
    assert body["compute_buffer_mib"]["CPU"] == round((16384 * 1024 * 2 + 4096 * 1024 * 4 + 3 * 1024 * 4) / 2**20, 2)
    assert body["compute_buffer_error_mib"]["MTL0"] > 0
    assert body["verdict"] == "works", body.get("verdict_condition")
    assert any("compute buffer size" in line and "largest live tensors" in line for line in body["log_lines"])
    assert any(n.startswith("num_batch 1024 (-b 1024 -ub 1024 to llama-server") for n in body["notes"])
    # Ollama < 0.30: its llama.cpp runner's context has n_ubatch = min(512, num_ctx) (llm/server.go:173, llama/
    # llama.go:125-126), so the buffers are for 512 tokens; and Ollama's own graph estimate (GraphSize, llama case)
    # for the same settings, by hand; since 0.30 Ollama runs llama-server and has no such estimate
    old = client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "ollama", "gpu": "Apple M3 Max 36GB",
                                                      "ctx_size": "16384", "ollama_release": "0.24.0"}).json()
    assert old["ollama"]["num_batch"] == 512
    assert old["compute_buffer_mib"]["MTL0"] == round((128256 * 512 * 4 + 2 * 4096 * 512 * 4) / 2**20, 2) == 266.5
    assert old["ollama"]["graph_estimate_mib"] == round(4 * 512 * (1 + 4 * 4096 + 16384 * 33) / 2**20, 2)
    assert "graph_estimate_mib" not in body["ollama"]


def _custom_run(client, mib: float, **extra) -> dict:
    return client.get("/api/estimate", LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": f"custom:{mib:.2f}MiB:sm89",
                                                       "ctx_size": "16384", "fit": "off"} | extra).json()


def test_the_verdict_depends_only_when_the_memory_left_lies_within_the_estimates_error(client):
    """On a custom CUDA device sized around what llama.cpp needs, with --fit off (every layer on the GPU): left >
    estimate + 1024 MiB (--fit's target) -> works; left > estimate + error but < estimate + 1024 MiB -> depends
    (the GPU context and the backend's pool); left inside estimate +- error -> depends (the condition names the
    estimate); left < estimate - error -> does_not_fit. With --fit on (llama-server's default) the tight device keeps fewer layers
    and works (tests/test_llamacpp_fit.py)."""
    big = _custom_run(client, 80 * 1024)
    used, cb, err = big["device_used_mib"], big["compute_buffer_mib"]["CUDA0"], big["compute_buffer_error_mib"]["CUDA0"]
    assert big["verdict"] == "works" and cb > 250 and err > 0
    # left > estimate + error, but under the 1024 MiB llama.cpp's --fit keeps free per device (common/common.h:483)
    # for the GPU context and the backend's pool, which are not among its buffers: depends on them
    tight = _custom_run(client, used + cb + err + 1)
    assert tight["verdict"] == "depends" and "GPU context" in tight["verdict_condition"]
    assert f"the {err + 1:.0f} MiB the CUDA device keeps" in tight["verdict_condition"]
    assert any("common/common.h:483" in n and "common/fit.cpp:984" in n for n in tight["notes"])
    assert _custom_run(client, used + cb + 1024)["verdict"] == "works"
    assert _custom_run(client, used + cb + 1022)["verdict"] == "depends"
    mid = _custom_run(client, used + cb)
    assert mid["verdict"] == "depends" and "largest live tensors" in mid["verdict_condition"]
    low = _custom_run(client, used + cb - err - 1)
    assert low["verdict"] == "does_not_fit" and "compute buffer" in low["reason"]
    fitted = _custom_run(client, used + cb - err - 1, fit="on")
    assert fitted["verdict"] == "depends" and fitted["fit"]["status"] == "fitted"
    assert "free system RAM holds" in fitted["verdict_condition"]


def test_a_gguf_repo_without_a_file_is_planned_for_the_file_llama_server_downloads(client):
    """llama-server -hf <repo> without a quant downloads the repo's Q4_K_M file, else Q8_0, else the first
    (common/download.cpp:655-690 find_best_model): the plan is for that file, so its buffers equal the plan that
    names the file, and the command keeps -hf <repo>."""
    repo = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "llama.cpp", "gpu": "RTX 4090",
            "ctx_size": "8192"}
    implicit = client.get("/api/estimate", repo).json()
    named = client.get("/api/estimate", repo | {"gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"}).json()
    assert implicit["model_buffer_mib"] == named["model_buffer_mib"] and implicit["model_buffer_mib"]["CUDA0"] > 4000
    assert implicit["verdict"] == named["verdict"] == "works"
    assert implicit["serve_argv"][1:3] == ["-hf", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"]
    # the named file: -hf <repo> -hff <file> (common/arg.cpp:3060, :3070 in llama-cpp-python 0.3.36's llama.cpp)
    assert named["serve_argv"][1:5] == ["-hf", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "-hff",
                                        "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"]
    assert "-m" not in named["serve_argv"]
    assert any("downloads without a quant" in n for n in implicit["notes"])


@pytest.mark.parametrize("runtime,other", [("vllm", "vLLM"), ("sglang", "SGLang")])
def test_a_gguf_repository_asked_of_vllm_or_sglang_says_what_it_is(client, runtime, other):
    """bartowski/...-GGUF is in the offline GGUF catalog (calculator/data/gguf_repos.json): vLLM and SGLang get a
    message naming the runtimes that read it and the base model, not "not in the catalog"; llama.cpp answers it."""
    q = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gpu": "RTX 4090", "runtime": runtime}
    resp = client.get("/api/estimate", q)
    body = resp.json()
    assert resp.status_code == 400 and body["field"] == "model"
    assert "is a GGUF repository" in body["error"] and "--runtime llama.cpp or ollama" in body["error"]
    assert f"meta-llama/Llama-3.1-8B-Instruct with {other}" in body["error"]
    page = client.get("/", q | {"runtime": "llama.cpp"}, follow=True)
    assert page.status_code == 200
    assert client.get("/api/estimate", q | {"runtime": "llama.cpp"}).status_code == 200


@pytest.mark.parametrize("runtime,slots_name", [("llama.cpp", "-np"), ("ollama", "OLLAMA_NUM_PARALLEL")])
def test_requests_beyond_the_slots_queue_on_every_surface(client, runtime, slots_name):
    """4 closed-loop clients on 1 slot (-np 1; Ollama's OLLAMA_NUM_PARALLEL 1): one runs, three wait for the slot
    (llama-server defers the task, tools/server/server-context.cpp:2379-2389; Ollama's runner semaphore of numParallel,
    llm/llama_server.go:960 and :1536 at v0.32.15). By Little's law each waits (4 / 1 - 1) x a request's lifetime
    TTFT_1 + 127 x ITL_1 (the one-client figures), added to TTFT; ITL and tok/s stay those of one slot."""
    q = LLAMA8B_GGUF | {"runtime": runtime, "gpu": "RTX 4090", "ctx_size": "8192"}
    one = client.get("/api/estimate", q).json()
    four = client.get("/api/estimate", q | {"concurrency": "4"}).json()
    wait = 3 * (one["ttft_ms"] + 127 * one["itl_ms"])
    assert four["ttft_ms"] == pytest.approx(one["ttft_ms"] + wait, rel=1e-4) and four["ttft_ms"] > 4 * one["ttft_ms"]
    assert four["itl_ms"] == one["itl_ms"] and four["output_tokens_per_s"] == one["output_tokens_per_s"]
    assert four["speed"]["clients"] == 4 and four["speed"]["concurrency"] == 1
    assert four["speed"]["queue_ms"] == pytest.approx(wait, rel=1e-4)
    note = next(n for n in four["speed_warnings"] if "4 requests but 1 slot" in n)
    assert f"({slots_name} 1)" in note and "Little's law" in note
    page = client.get("/", q | {"concurrency": "4"}, follow=True).content.decode()
    assert "4 requests but 1 slot" in page and "Little&#x27;s law" in page
    out = StringIO()
    call_command("estimate", "--model", q["model"], "--gguf-file", q["gguf_file"], "--runtime", runtime, "--gpu",
                 "RTX 4090", "-c", "8192", "--concurrency", "4", stdout=out)
    assert f"Predicted TTFT: {four['ttft_ms']:.1f} ms" in out.getvalue() and "4 requests but 1 slot" in out.getvalue()


@pytest.mark.parametrize("runtime", ["llama.cpp", "ollama"])
@pytest.mark.parametrize("given,value,says", [
    ("ctx_size", "-1", "must be at least 0 (0: "),
    ("max_model_len", "-1", "must be at least 0 (0: "),
    ("ctx_size", "abc", "enter a whole number of tokens"),
    ("context_length", "99999999", "must be at most 16777216"),
])
def test_a_bad_context_is_named_by_the_runtimes_own_flag(client, runtime, given, value, says):
    """llama.cpp's context is -c / --ctx-size (common/arg.cpp:1639), which also sets Ollama's num_ctx here: a bad value
    is refused naming ctx_size (API, page) / --ctx-size (command line), never max_model_len, whichever alias it was
    given under; 0 is no error (below)."""
    q = {"model": QWEN, "runtime": runtime, "gpu": "RTX 4090", given: value}
    r = client.get("/api/estimate", q)
    assert r.status_code == 400 and r.json()["field"] == "ctx_size" and r.json()["error"].startswith("ctx_size: " + says)
    page = client.get("/", q)
    assert page.status_code == 400
    html = page.content.decode()
    assert 'id="errors-max_model_len"><p class="error" role="alert">' + says.replace("'", "&#x27;")[:20] in html
    flag = {"ctx_size": "--ctx-size", "max_model_len": "--max-model-len", "context_length": "--context-length"}[given]
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", QWEN, "--runtime", runtime, "--gpu", "RTX 4090", flag, value,
                     stdout=StringIO())
    assert err.value.returncode == 2 and str(err.value).startswith("--ctx-size: " + says)


def test_vllm_and_sglang_still_need_a_context_of_at_least_1(client):
    """0 is llama.cpp's and Ollama's; vLLM's --max-model-len and SGLang's --context-length start at 1."""
    for runtime, field, flag in (("vllm", "max_model_len", "--max-model-len"),
                                 ("sglang", "max_model_len", "--context-length")):
        r = client.get("/api/estimate", {"model": QWEN, "runtime": runtime, "max_model_len": "0"})
        assert r.status_code == 400 and r.json() == {"error": f"{field}: must be at least 1, got 0", "field": field}
        with pytest.raises(CommandError) as err:
            call_command("estimate", "--model", QWEN, "--runtime", runtime, "--max-model-len", "0", stdout=StringIO())
        assert str(err.value) == f"{flag}: must be at least 1, got 0"


def test_ctx_size_0_on_ollama_is_its_automatic_default(client):
    """OLLAMA_CONTEXT_LENGTH=0 is Ollama's "automatic" (envconfig/config.go:230, its default value): the VRAM-based
    default context (server/routes.go:131-132 at v0.32.15, opts.NumCtx == 0 -> s.defaultNumCtx), so ctx_size 0 is the
    answer without one: 32768 on a 24 GB RTX 4090 (>= 23 GiB)."""
    q = LLAMA8B_GGUF | {"runtime": "ollama", "gpu": "RTX 4090"}
    zero, unset = client.get("/api/estimate", q | {"ctx_size": "0"}).json(), client.get("/api/estimate", q).json()
    assert zero["ollama"]["num_ctx"] == unset["ollama"]["num_ctx"] == 32768
    assert zero["kv_cache_tokens"] == unset["kv_cache_tokens"] == 32768 and zero["verdict"] == unset["verdict"]
    assert any("OLLAMA_CONTEXT_LENGTH=0" in n for n in zero["notes"])


def test_ctx_size_0_on_llama_cpp_on_every_surface(client):
    """-c 0 with llama.cpp: the model's trained context (Llama-3.1-8B: 131072), the command keeps -c 0, and the
    page's permalink keeps it."""
    q = LLAMA8B_GGUF | {"runtime": "llama.cpp", "gpu": "RTX 4090", "ctx_size": "0"}
    body = client.get("/api/estimate", q).json()
    assert body["kv_cache_tokens"] == 131072 and body["serve_argv"][5:7] == ["-c", "0"]
    page = client.get("/", q, follow=True)
    assert page.status_code == 200 and "ctx_size=0" in page.redirect_chain[-1][0]
    assert "-c 0 -np 1" in page.content.decode()
    out = StringIO()
    call_command("estimate", "--model", q["model"], "--gguf-file", q["gguf_file"], "--runtime", "llama.cpp", "--gpu",
                 "RTX 4090", "-c", "0", "--format", "json", stdout=out)
    assert json.loads(out.getvalue())["kv_cache_tokens"] == 131072


def test_a_unified_cache_holds_one_full_length_request_not_one_per_slot(client):
    """-c 10240 -np 3 -kvu: llama.cpp gives every sequence the whole cache, n_ctx_seq = n_ctx = 10,240
    (llama-cpp-python 0.3.36 vendor/llama.cpp/src/llama-context.cpp:292-293) and each slot that n_ctx_seq
    (tools/server/server-context.cpp:1276, 4008-4012); the 3 slots share 10,240 cells, so 10,240 / 10,240 = 1.0
    request of 10,240 tokens fits at once. Without -kvu each slot has its own 10,240 / 3 = 3,413.3 -> padded to
    3,584 (:295-296, GGML_PAD 256) and n_ctx becomes 3 x 3,584 = 10,752 (:302-305): 3.0 requests of 3,584."""
    base = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
            "runtime": "llama.cpp", "gpu": "RTX 3090", "ctx_size": "10240", "parallel": "3"}
    uni = client.get("/api/estimate", base | {"kv_unified": "true"}).json()
    assert (uni["kv_cache_tokens"], uni["max_model_len"], uni["max_concurrency"]) == (10240, 10240, 1.0)
    assert uni["verdict"] == "works" and "1.00x requests of 10,240 tokens at once" in uni["verdict_headline"]
    assert "shared by --parallel 3 slots (-kvu)" in uni["verdict_headline"]
    sep = client.get("/api/estimate", base).json()
    assert (sep["kv_cache_tokens"], sep["max_model_len"], sep["max_concurrency"]) == (10752, 3584, 3.0)
    assert "shared" not in sep["verdict_headline"] and "3.00x requests of 3,584 tokens" in sep["verdict_headline"]


def test_ollama_has_one_kv_cache_type_for_k_and_v(client):
    """Ollama's OLLAMA_KV_CACHE_TYPE is both: it passes one value as --cache-type-k and --cache-type-v (ollama
    llm/llama_server.go:394-395 at v0.32.15) and set type_k and type_v from it before (llama/llama.go:139-140 at
    v0.24.0), so a different V type is refused (400 / exit 2); the same type twice is what Ollama runs."""
    base = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "ollama", "gpu": "RTX 3090"}
    r = client.get("/api/estimate", base | {"cache_type_k": "q8_0", "cache_type_v": "q4_0"})
    assert r.status_code == 400 and r.json()["field"] == "cache_type_v" and "OLLAMA_KV_CACHE_TYPE" in r.json()["error"]
    r = client.get("/api/estimate", base | {"cache_type_v": "q8_0"})  # V alone: Ollama cannot set it apart from K
    assert r.status_code == 400 and r.json()["field"] == "cache_type_v"
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", base["model"], "--runtime", "ollama", "--gpu", "RTX 3090",
                     "--cache-type-k", "q8_0", "--cache-type-v", "q4_0", stdout=StringIO())
    assert err.value.returncode == 2 and str(err.value).startswith("--cache-type-v:")
    same = client.get("/api/estimate", base | {"cache_type_k": "q8_0", "cache_type_v": "q8_0"}).json()
    assert same["resolved"]["cache_type_k"] == same["resolved"]["cache_type_v"] == "q8_0"
    assert "OLLAMA_KV_CACHE_TYPE=q8_0" in same["serve_argv"]
    # llama.cpp itself takes separate types (-ctk / -ctv)
    assert client.get("/api/estimate", base | {"runtime": "llama.cpp", "cache_type_k": "q8_0",
                                               "cache_type_v": "q4_0"}).status_code == 200


def test_ollama_refuses_kv_unified(client):
    """Ollama starts llama-server with -c num_ctx x parallel and -np parallel and never --kv-unified (ollama
    llm/llama_server.go:370-416 at v0.32.15): a request for it would change the answer (every slot sharing the cells)
    without a command that runs it, so it is refused (400 / exit 2); llama.cpp takes it."""
    base = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gpu": "RTX 3090", "parallel": "4",
            "kv_unified": "true"}
    r = client.get("/api/estimate", base | {"runtime": "ollama"})
    assert r.status_code == 400 and r.json()["field"] == "kv_unified" and "Ollama passes no" in r.json()["error"]
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", base["model"], "--runtime", "ollama", "--gpu", "RTX 3090",
                     "--parallel", "4", "--kv-unified", stdout=StringIO())
    assert err.value.returncode == 2 and str(err.value).startswith("--kv-unified:")
    ok = client.get("/api/estimate", base | {"runtime": "llama.cpp"})
    assert ok.status_code == 200 and "-kvu" in ok.json()["serve_argv"]


@pytest.mark.parametrize("name, ours", [("num_gpu", "n_gpu_layers"), ("num_ctx", "ctx_size"),
                                        ("OLLAMA_KV_CACHE_TYPE", "cache_type_k"), ("num_parallel", "parallel")])
def test_ollamas_own_names_point_at_ours(client, name, ours):
    """An Ollama user's option names (Modelfile PARAMETER / API options: num_gpu, num_ctx; variables: OLLAMA_*) are
    answered with the parameter that sets the same thing, not difflib's look-alike (num_gpu -> main_gpu)."""
    r = client.get("/api/estimate", {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "ollama",
                                     "gpu": "RTX 3090", name: "8"})
    assert r.status_code == 400 and r.json()["field"] == name
    assert f"that is Ollama's name: here it is {ours!r}" in r.json()["error"] and "main_gpu" not in r.json()["error"]


def test_ollama_partial_offload_carries_num_gpu(client):
    """n_gpu_layers 20 on Ollama is its num_gpu option (api/types.go:591 at v0.32.15), passed to llama-server as
    -ngl 20 (llm/llama_server.go:402-410); it is not a flag of `ollama run` nor a server variable, so the answer
    gives the Modelfile lines that set it (docs/modelfile.mdx: "PARAMETER <parameter> <parametervalue>")."""
    base = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
            "runtime": "ollama", "gpu": "RTX 3090", "ctx_size": "8192"}
    body = client.get("/api/estimate", base | {"n_gpu_layers": "20"}).json()
    assert body["ollama"]["num_gpu"] == 20
    assert body["ollama"]["modelfile"] == ("FROM hf.co/bartowski/Meta-Llama-3.1-8B-Instruct-GGUF:Q4_K_M\n"
                                           "PARAMETER num_ctx 8192\nPARAMETER num_gpu 20\n")
    assert any(n.startswith("num_gpu 20 (") and "ollama create" in n for n in body["notes"])
    assert "left on the CPU by num_gpu 20" in body["verdict_condition"]  # Ollama's name, not -ngl
    plain = client.get("/api/estimate", base).json()
    assert "modelfile" not in plain["ollama"] and not any(n.startswith("num_gpu 20") for n in plain["notes"])


# bartowski/Meta-Llama-3.1-8B-Instruct-GGUF's files as its Hub tree lists them (the tree pages
# calculator/data/gguf_repos.json cites): Meta-Llama-3.1-8B-Instruct-<QUANT>.gguf for these 19 quantizations
BARTOWSKI_31_QUANTS = ("IQ2_M", "Q2_K", "Q2_K_L", "IQ3_M", "IQ3_XS", "Q3_K_L", "Q3_K_M", "Q3_K_XL", "IQ4_XS", "Q4_K_L",
                       "Q4_K_M", "Q4_K_S", "Q5_K_L", "Q5_K_M", "Q5_K_S", "Q6_K", "Q6_K_L", "Q8_0", "BF16")


def test_a_gguf_file_not_in_the_repo_names_the_nearest_files_and_every_quantization(client):
    """A mistyped gguf_file gets the nearest file names (as a mistyped GPU or parameter gets its nearest) and the
    quantizations the repo has, every one of them, not the first 8 names in alphabetical order (which stopped at
    Q3_K_M and left Q4_K_M, Q8_0, BF16 unsaid)."""
    base = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "llama.cpp", "gpu": "CPU"}
    r = client.get("/api/estimate", base | {"gguf_file": "Meta-Llama-3.1-8B-Instruct-Q9_K_M.gguf"})
    assert r.status_code == 400 and r.json()["field"] == "gguf_file"
    error = r.json()["error"]
    near = re.search(r"did you mean '([^']+)'\?", error).group(1)
    assert near in {f"Meta-Llama-3.1-8B-Instruct-{q}.gguf" for q in BARTOWSKI_31_QUANTS} and "_K_M" in near
    assert "(Meta-Llama-3.1-8B-Instruct-<QUANT>.gguf)" in error
    listed = error.split("are the quantizations ", 1)[1].split(", ")
    assert sorted(listed) == sorted(BARTOWSKI_31_QUANTS)
    # the file's own quantization under another spelling: that file first
    r = client.get("/api/estimate", base | {"gguf_file": "llama-3.1-8b-instruct-q4_k_m.gguf"})
    assert "did you mean 'Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf'?" in r.json()["error"]
    # the command line: exit 2, the same sentence
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", base["model"], "--runtime", "llama.cpp", "--gpu", "CPU", "--gguf-file",
                     "Meta-Llama-3.1-8B-Instruct-Q9_K_M.gguf", stdout=StringIO(), stderr=StringIO())
    assert err.value.returncode == 2 and str(err.value) == f"--gguf-file: {error.removeprefix('gguf_file: ')}"
    # and no name near it: the quantizations alone
    r = client.get("/api/estimate", base | {"gguf_file": "zzz.gguf"})
    assert "did you mean" not in r.json()["error"] and "Q8_0" in r.json()["error"]


def test_a_draft_gguf_file_not_in_the_draft_repo_names_the_nearest(client):
    q = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "llama.cpp", "gpu": "RTX 3090",
         "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "gguf_file_draft": "Llama-3.2-1B-Instruct-Q8.gguf",
         "speculative_config": '{"method":"draft_model","model":"bartowski/Llama-3.2-1B-Instruct-GGUF",'
                               '"num_speculative_tokens":8}'}
    r = client.get("/api/estimate", q)
    assert r.status_code == 400 and r.json()["field"] == "gguf_file_draft"
    assert "did you mean 'Llama-3.2-1B-Instruct-Q8_0.gguf'?" in r.json()["error"]
