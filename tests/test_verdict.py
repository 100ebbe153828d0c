"""One verdict for the banner, the title, the API and the exit status, and suggestions that work.

The cases are the ones the redesign issue reported: a green "Fits" above a backend that does not start,
suggestions that lower ``--gpu-memory-utilization`` or repeat the parallel layout already set, and
"use a quantized checkpoint" for a model already in FP8."""
from __future__ import annotations

import re
from io import StringIO
from urllib.parse import parse_qsl

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from calculator.plan import make_plan
from calculator.request import parse_request

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
CASES = {
    # FLASH_ATTN takes an fp8 KV cache only with FA3 (SM90) or FA4: on an A100 (SM80) vLLM refuses at start-up
    # (vllm/v1/attention/backends/flash_attn.py, supports_kv_cache_dtype).
    "fp8-kv-flash-attn-a100": ({"model": LLAMA, "gpu": "A100", "max_model_len": "8192", "kv_cache_dtype": "fp8",
                                "attention_backend": "FLASH_ATTN"}, "does_not_start"),
    "gpt-oss-120b-l40s": ({"model": "openai/gpt-oss-120b", "gpu": "L40S"}, "does_not_fit"),
    "qwen3-32b-a100-40960": ({"model": "Qwen/Qwen3-32B", "gpu": "A100", "max_model_len": "40960"}, "does_not_fit"),
    "qwen3-32b-a100-pp2": ({"model": "Qwen/Qwen3-32B", "gpu": "A100", "max_model_len": "40960",
                            "pipeline_parallel_size": "2"}, "works"),
    "deepseek-v3-8xh100": ({"model": "deepseek-ai/DeepSeek-V3", "gpu": "H100", "tensor_parallel_size": "8"},
                           "does_not_fit"),
    "llama-8b-h100": ({"model": LLAMA, "gpu": "H100", "max_model_len": "8192"}, "works"),
    "llama-70b-l4": ({"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "L4"}, "does_not_fit"),
    # vLLM's worker refuses bfloat16 below compute capability 8.0 (T4 is 7.5) before it measures memory
    # (vllm/platforms/cuda.py:638-656 check_if_supports_dtype, gpu_worker.py:498 in 0.33.0)
    "llama-8b-t4-tp2-bf16": ({"model": LLAMA, "gpu": "T4", "tensor_parallel_size": "2", "dtype": "bfloat16",
                              "max_model_len": "8192"}, "does_not_start"),
    # --dtype auto on a T4 is float16 (vLLM's _resolve_auto_dtype): the same server starts
    "llama-8b-t4-tp2-auto": ({"model": LLAMA, "gpu": "T4", "tensor_parallel_size": "2", "max_model_len": "8192"},
                             "works"),
}


pytestmark = pytest.mark.usefixtures("offline_hub")


@pytest.mark.parametrize("name", CASES)
def test_the_api_and_the_page_state_the_same_verdict(client, name):
    params, expected = CASES[name]
    api = client.get("/api/estimate", params).json()
    assert api["verdict"] == expected
    page = client.get("/", params, follow=True).content.decode()
    assert f'data-verdict="{expected}"' in page
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    text = {"works": "Works", "does_not_fit": "Does not fit", "does_not_start": "Does not start"}[expected]
    assert title.startswith(text + ":")
    og = re.search(r'<meta property="og:description" content="([^"]*)"', page).group(1)
    assert og.startswith(text + ":")


def _preview(client, params) -> tuple[str, str, str]:
    """(title, description, og:description) of the page, HTML entities decoded."""
    import html

    page = client.get("/", params, follow=True).content.decode()
    title = html.unescape(re.search(r"<title>(.*?)</title>", page, re.S).group(1)).removesuffix(" — llmcalc")
    desc = html.unescape(re.search(r'<meta name="description" content="([^"]*)"', page).group(1))
    og = html.unescape(re.search(r'<meta property="og:description" content="([^"]*)"', page).group(1))
    return title, desc, og


def test_a_link_with_speculation_previews_its_speed_and_speedup(client):
    """A shared link's preview carries the headline speed (TTFT / TPOT / output tok/s at the workload, the figures
    the API gives, to the page's two significant figures) and, with EAGLE-3 k=3, the predicted speedup; the title
    stays the short verdict line. The same link without speculation previews without a speedup."""
    from calculator.templatetags.calculator_tags import duration_ms, sig

    plain_q = {"model": LLAMA, "gpu": "H100"}
    spec_q = plain_q | {"speculative_config": '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",'
                                              '"num_speculative_tokens":3}'}
    for q in (plain_q, spec_q):
        api = client.get("/api/estimate", q).json()
        title, desc, og = _preview(client, q)
        assert desc == og and og.startswith(title + ". Speed (prompt 1,024, output 128, 1 in flight): ")
        assert "Speed" not in title and "TTFT" not in title
        figures = (f"TTFT {duration_ms(api['ttft_ms'])}, TPOT {sig(api['itl_ms'])} ms, "
                   f"{sig(api['output_tokens_per_s'])} output tok/s")
        if q is plain_q:
            assert og.endswith(figures) and "specul" not in og
        else:
            assert api["speed_with_speculation"] is True
            assert og.endswith(f"{figures} with speculation (eagle3, k=3: {sig(api['spec_speedup'])}× speedup)")
    # ngram without an acceptance figure: the figures are the plain server's, and the preview says so
    _, _, og = _preview(client, plain_q | {"speculative_config": '{"method":"ngram","num_speculative_tokens":4}'})
    assert og.endswith("without speculation (ngram, k=4: no speedup predicted without an acceptance rate)")


def test_a_server_that_does_not_start_previews_its_reason_without_a_speed(client):
    title, desc, og = _preview(client, CASES["fp8-kv-flash-attn-a100"][0])
    assert title.startswith("Does not start:") and og == desc == title and "TTFT" not in og


@pytest.mark.parametrize("name", CASES)
def test_every_suggestion_applied_works_and_moves_the_right_way(client, name):
    params, _ = CASES[name]
    api = client.get("/api/estimate", params).json()
    request = parse_request(params)
    for s in api["suggestions"]:
        applied = {**params, **s["params"]}
        applied = {k: v for k, v in applied.items() if v != ""}
        assert client.get("/api/estimate", applied).json()["verdict"] == "works", s["label"]
        for key, value in s["params"].items():
            assert params.get(key) != value, f"{s['label']} repeats {key}={value}"
            if key == "gpu_memory_utilization":
                assert float(value) > api["resolved"]["gpu_memory_utilization"]
            if key in ("tensor_parallel_size", "pipeline_parallel_size"):
                assert int(value) > getattr(request, key)
            if key == "max_model_len":
                assert int(value) < api["max_model_len"]


def test_the_backend_that_does_not_start_is_not_called_fits(client):
    params, _ = CASES["fp8-kv-flash-attn-a100"]
    api = client.get("/api/estimate", params).json()
    assert api["fits"] is True  # the memory alone would fit ...
    assert api["verdict"] == "does_not_start"  # ... but vLLM refuses the backend
    labels = [s["label"] for s in api["suggestions"]]
    assert any("attention backend" in label for label in labels)


def test_fp8_deepseek_is_not_told_to_quantize_and_gets_more_nodes(client):
    api = client.get("/api/estimate", CASES["deepseek-v3-8xh100"][0]).json()
    changes = [s["params"] for s in api["suggestions"]]
    assert all("model" not in c for c in changes)
    assert {"pipeline_parallel_size": "2"} in changes  # 2 nodes of 8 H100s
    assert all(c.get("gpu_memory_utilization") is None or float(c["gpu_memory_utilization"]) > 0.92 for c in changes)


def test_pipeline_parallel_already_set_is_not_suggested_again(client):
    api = client.get("/api/estimate", {"model": "Qwen/Qwen3-32B", "gpu": "L4", "max_model_len": "8192",
                                       "pipeline_parallel_size": "2"}).json()
    for s in api["suggestions"]:
        assert s["params"].get("pipeline_parallel_size") != "2"


def test_a_suggestion_is_a_link_that_applies_it(client):
    page = client.get("/", CASES["qwen3-32b-a100-40960"][0], follow=True).content.decode()
    links = re.findall(r'<a href="/\?([^"]+)" class="suggestion">', page)
    assert links
    for query in links:
        params = dict(parse_qsl(query.replace("&amp;", "&")))
        assert client.get("/api/estimate", params).json()["verdict"] == "works"


def test_the_exit_status_follows_the_verdict():
    out = StringIO()
    call_command("estimate", "--model", LLAMA, "--gpu", "H100", "--max-model-len", "8192", stdout=out)
    assert "Verdict" in out.getvalue() and "Works" in out.getvalue()
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "L4", stdout=StringIO())
    assert err.value.returncode == 1 and str(err.value).startswith("does not fit:")


def test_a_request_longer_than_max_model_len_does_not_fit():
    plan = make_plan(parse_request({"model": LLAMA, "gpu": "H100", "max_model_len": "4096",
                                    "prompt_len": "4000", "output_len": "200"}))
    assert plan.verdict.status == "does_not_fit" and "4,200 tokens" in plan.verdict.headline


def test_a_quantized_checkpoint_of_the_same_model_is_offered_when_it_fits(client):
    """Llama-3.1-70B in BF16 (~131 GiB of weights) does not fit one H200 (~140 GiB, 0.92 of it for vLLM);
    NVIDIA's FP8 checkpoint of the same model (~66 GiB) does, and is offered after the hardware changes."""
    params = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "H200", "max_model_len": "8192"}
    api = client.get("/api/estimate", params).json()
    assert api["verdict"] == "does_not_fit"
    kinds = [s["params"] for s in api["suggestions"]]
    assert {"model": "nvidia/Llama-3.1-70B-Instruct-FP8", "revision": ""} in kinds
    assert kinds.index({"model": "nvidia/Llama-3.1-70B-Instruct-FP8", "revision": ""}) == len(kinds) - 1


def test_memory_already_in_use_stops_vllm_with_its_message(client):
    """vLLM refuses when free memory at start is below gpu_memory_utilization x total (request_memory,
    vllm/v1/worker/utils.py in 0.33.0): an H100 (79.19 GiB) with 10 GiB in use has 69.19 GiB free, below
    0.92 x 79.19 = 72.85 GiB."""
    api = client.get("/api/estimate", {"model": LLAMA, "gpu": "H100", "max_model_len": "8192",
                                       "gpu_memory_in_use_gib": "10"}).json()
    assert api["verdict"] == "does_not_start"
    assert api["verdict_headline"].startswith("Free memory on device cuda:0 (69.19/79.19 GiB) on startup is less than "
                                              "desired GPU memory utilization (0.92, 72.85 GiB)")
    labels = [s["params"] for s in api["suggestions"]]
    # a higher share cannot start; the one offered is the largest that fits in the 69.19 GiB free:
    # 69.19 / 79.19 = 0.874 -> 0.87 (0.88 x 79.19 = 69.69 GiB > 69.19)
    shares = [float(p["gpu_memory_utilization"]) for p in labels if "gpu_memory_utilization" in p]
    assert shares == [0.87]
    ok = client.get("/api/estimate", {"model": LLAMA, "gpu": "H100", "max_model_len": "8192",
                                      "gpu_memory_in_use_gib": "5"}).json()
    assert ok["verdict"] == "works"


def test_graph_capture_that_does_not_fit_outside_the_budget_stops_old_releases(client):
    """Before 0.20 the CUDA-graph pool is not budgeted: with gpu_memory_utilization 0.99 the pool must fit in
    the 1% outside it, and capture runs out of memory (calculator.engine.runtime.graph_capture_fits)."""
    old = client.get("/api/estimate", {"model": LLAMA, "gpu": "H100", "max_model_len": "8192", "vllm_version": "0.19.0",
                                       "gpu_memory_utilization": "0.99"}).json()
    assert old["verdict"] == "does_not_start" and "graph" in old["verdict_headline"].lower()
    new = client.get("/api/estimate", {"model": LLAMA, "gpu": "H100", "max_model_len": "8192", "vllm_version": "0.32.0",
                                       "gpu_memory_utilization": "0.99"}).json()
    assert new["verdict"] == "works"


def test_no_second_node_when_more_gpus_in_one_node_work(client):
    """Llama-3.1-70B in bf16 (~131 GiB of weights) fits 4 H100s of one node: the answer says so and does not also
    send the user to two nodes of 8 (a fresh user read that as "needs 16 GPUs")."""
    api = client.get("/api/estimate", {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "H100"}).json()
    changes = [s["params"] for s in api["suggestions"]]
    assert {"tensor_parallel_size": "4"} in changes
    assert not any("pipeline_parallel_size" in c for c in changes)


def test_more_gpus_in_one_node_are_offered_with_the_longest_context_they_hold(client):
    """Llama-3.1-70B BF16 on RTX 4090s: 8 GPUs in one node hold the weights but not the 131,072-token context; the
    suggestion pairs TP 8 with the longest context vLLM's plan fits there (its estimated_max_model_len, rounded down
    to 1,024), checked to work, and the 2-node layout that keeps the whole context is still offered."""
    q = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "RTX 4090"}
    api = client.get("/api/estimate", q).json()
    tp8 = client.get("/api/estimate", q | {"tensor_parallel_size": "8"}).json()
    assert tp8["verdict"] == "does_not_fit" and tp8["estimated_max_model_len"] >= 4096
    length = tp8["estimated_max_model_len"] - tp8["estimated_max_model_len"] % 1024
    changes = [s["params"] for s in api["suggestions"]]
    assert {"tensor_parallel_size": "8", "max_model_len": str(length)} in changes
    assert client.get("/api/estimate", q | {"tensor_parallel_size": "8", "max_model_len": str(length)}).json()[
        "verdict"] == "works"
    assert any("pipeline_parallel_size" in c for c in changes)


@pytest.mark.parametrize("util,warned", [("0.9", False), ("0.97", True)])
def test_a_geforce_card_left_almost_no_room_for_a_display_is_warned(util, warned):
    """RTX 4090, 23.64 GiB as torch reports it: --gpu-memory-utilization 0.97 leaves 23.64 x 0.03 = 0.71 GiB, less than
    a WSL2 desktop can take (0.55 GiB in sgx-003) plus margin; 0.9 leaves 2.36 GiB. vLLM refuses to start when free
    memory is below utilization x total (free_memory_check). An H100 at 0.97 is not warned (no display)."""
    plan = make_plan(parse_request({"model": "Qwen/Qwen3-8B", "gpu": "RTX4090", "max_model_len": "8192",
                                    "gpu_memory_utilization": util}), with_speed=False)
    notes = [w for w in plan.memory.warnings if "display" in w]
    assert bool(notes) == warned
    if warned:
        assert "leaves 0.71 GiB" in notes[0] and "--gpu-memory-in-use-gib" in notes[0]
    h100 = make_plan(parse_request({"model": "Qwen/Qwen3-8B", "gpu": "H100", "max_model_len": "8192",
                                    "gpu_memory_utilization": "0.97"}), with_speed=False)
    assert not any("display" in w for w in h100.memory.warnings)
    given = make_plan(parse_request({"model": "Qwen/Qwen3-8B", "gpu": "RTX4090", "max_model_len": "8192",
                                     "gpu_memory_utilization": util, "gpu_memory_in_use_gib": "0.5"}), with_speed=False)
    assert not any("display" in w for w in given.memory.warnings)  # the user said what is taken


def test_a_start_that_depends_on_two_things_names_both():
    """A backend that depends on a condition and a memory plan that starts on one (SGLang's pool below the context):
    the verdict names both, not only the first."""
    from types import SimpleNamespace

    from calculator.verdict import decide

    request = parse_request({"model": LLAMA, "gpu": "H100"})
    memory = SimpleNamespace(fits=True, reason=None, condition="every request stays within 17,344 tokens",
                             max_model_len=40960, kv_cache_tokens=17345, max_concurrency=0.42, request_cap=17344)
    compat = SimpleNamespace(ok=None, error=None, speculative=[], auto_conditions=["the head size is 128"],
                             requested_backend=None, auto_selected="FLASH_ATTN", backends=[])
    v = decide(request, memory, compat)
    assert v.status == "depends"
    assert v.condition == "the head size is 128; and every request stays within 17,344 tokens"


def test_a_condition_both_the_compat_report_and_the_memory_plan_carry_is_said_once(client):
    """llama.cpp without a GGUF file: its compat report and its memory plan both carry the condition on the file (which
    of llama-quantize's types fit: "a GGUF at Q8_0 or a smaller type is used"), and the headline said it twice, joined
    by "; and"; on the CPU device (no table) the older words, "the model buffers fit beside the KV cache", likewise."""
    body = client.get("/api/estimate", {"model": "Qwen/Qwen3-8B", "runtime": "llama.cpp", "gpu": "RTX 4090",
                                        "ctx_size": "8192", "parallel": "2"}).json()
    assert body["verdict"] == "depends"
    assert body["verdict_headline"].count("a GGUF at ") == 1
    assert "; and a GGUF at" not in body["verdict_headline"]
    cpu = client.get("/api/estimate", {"model": "Qwen/Qwen3-8B", "runtime": "llama.cpp", "gpu": "CPU",
                                       "ctx_size": "8192", "parallel": "2"}).json()
    assert cpu["verdict"] == "depends"
    assert cpu["verdict_headline"].count("the model buffers fit beside the KV cache") == 1
    assert "; and the model buffers" not in cpu["verdict_headline"]


def test_a_workload_longer_than_the_context_is_offered_a_context_that_holds_it(client):
    """prompt_len 100,000 + output_len 128 against --max-model-len 8192 does not fit (vLLM rejects the request); the
    KV cache of Llama-3.1-8B on an H100 holds far more than 100,128 tokens, so --max-model-len 100128 is offered (and
    kept because that request then works); beyond the model's own 131,072 nothing is offered."""
    q = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "max_model_len": "8192"}
    body = client.get("/api/estimate", q | {"prompt_len": "100000"}).json()
    assert body["verdict"] == "does_not_fit"
    assert [s["params"] for s in body["suggestions"]] == [{"max_model_len": "100128"}]
    assert client.get("/api/estimate", q | {"prompt_len": "100000", "max_model_len": "100128"}).json()["verdict"] == \
        "works"
    assert client.get("/api/estimate", q | {"prompt_len": "200000"}).json()["suggestions"] == []


def test_a_server_that_does_not_start_is_titled_with_why_not_its_capacity(client):
    """Gemma 4 on vLLM 0.15.1 (not in its registry): the page's <title> and link preview say why it does not start,
    not the KV cache tokens of a server that never comes up."""
    import html as h
    import re

    page = client.get("/", {"model": "google/gemma-4-26B-A4B", "gpu": "H100", "vllm_version": "0.15.1"},
                      follow=True).content.decode()
    title = h.unescape(re.search(r"<title>(.*?)</title>", page, re.S).group(1))
    assert title.startswith("Does not start: google/gemma-4-26B-A4B")
    assert "KV cache tokens" not in title and "not supported for now" in title


@pytest.mark.parametrize("gpu,capability", [("T4", "7.5"), ("V100", "7.0")])
def test_bfloat16_below_compute_capability_8_is_vllms_refusal_with_the_half_fix(client, gpu, capability):
    """The message is vLLM's own (the same text from 0.9.2 to 0.33.0: gpu_worker.py:404-408 in 0.9.2, cuda.py:650-655
    in 0.33.0) with the GPU's capability from the catalog; the fix it names, --dtype float16, is offered and works
    where the memory fits (TP 2 on 16 GB cards for an 8B model at 8k)."""
    params = {"model": LLAMA, "gpu": gpu, "tensor_parallel_size": "2", "dtype": "bfloat16", "max_model_len": "8192"}
    body = client.get("/api/estimate", params).json()
    assert body["verdict"] == "does_not_start"
    assert body["verdict_headline"].startswith(
        "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your ")
    assert f"GPU has compute capability {capability}. You can use float16 instead" in body["verdict_headline"]
    assert [s["params"] for s in body["suggestions"]] == [{"dtype": "float16"}]
    fixed = client.get("/api/estimate", params | {"dtype": "float16"}).json()
    assert fixed["verdict"] == "works"
    a100 = client.get("/api/estimate", params | {"gpu": "A100"}).json()
    assert a100["verdict"] == "works" and not any("Bfloat16" in r for r in a100["verdict_reasons"])


def test_more_clients_than_full_length_requests_fit_is_said_by_the_api_the_cli_and_the_page_once(client):
    """Llama-3.1-70B FP8 on 2x H100 at 32,768 tokens: the KV cache holds fewer full-length requests than 16 (vLLM's
    "Maximum concurrency for 32,768 tokens per request" line, max_concurrency). The page said so; the API and CLI
    did not. Now all three do, the page once (its verdict block), with the figure of the same answer."""
    params = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gpu": "H100", "tensor_parallel_size": "2",
              "max_model_len": "32768", "concurrency": "16", "quantization": "fp8"}
    body = client.get("/api/estimate", params).json()
    assert body["max_concurrency"] < 16
    said = [w for w in body["warnings"] if w.startswith("The KV cache holds")]
    assert said == [f"The KV cache holds {body['max_concurrency']:.2f} full-length requests (32,768 tokens each, "
                    "vLLM's \"Maximum concurrency\" line), fewer than your 16: the rest wait in the queue (or are "
                    "preempted) unless they are shorter than max_model_len"]
    out = StringIO()
    call_command("estimate", "--model", params["model"], "--gpu", "H100", "--tensor-parallel-size", "2",
                 "--max-model-len", "32768", "--concurrency", "16", "--quantization", "fp8", stdout=out)
    assert f"The KV cache holds {body['max_concurrency']:.2f} full-length requests" in out.getvalue()
    page = client.get("/", params, follow=True).content.decode()
    assert page.count("full-length requests, fewer than your 16") == 1
    fits = client.get("/api/estimate", params | {"concurrency": "4"}).json()
    assert not any(w.startswith("The KV cache holds") for w in fits["warnings"])


@pytest.mark.parametrize("release,data,own_rules", [("0.33.7", "0.33.0", False), ("0.11.0", "0.11.2", True),
                                                   ("0.33.0", None, None)])
def test_a_release_answered_by_another_patchs_data_says_so(client, release, data, own_rules):
    """The compat data is one patch per minor (compat/data: 0.33.0, 0.11.2 ...); a patch the calculator did not extract
    is answered by it, and the answer says which. 0.11.0's memory rules were read from 0.11.0 itself
    (calculator/engine/runtime.py: the patches around a switch); a patch nobody read (0.33.7) says that too."""
    body = client.get("/api/estimate", {"model": LLAMA, "gpu": "H100", "max_model_len": "8192",
                                        "vllm_version": release}).json()
    said = [w for w in body["warnings"] if w.startswith(f"vLLM {release}")]
    if data is None:
        assert said == []
        return
    assert len(said) == 1 and f"use the data extracted from {data}'s wheel" in said[0]
    assert ("its memory rules were read from its own source" in said[0]) is own_rules
    assert ("itself was not read" in said[0]) is (not own_rules)


def _half_up_two_figures(x: float) -> str:
    """``x`` (positive, >= 10) to two significant figures, half up, by hand: the unit of the second figure is
    10 ** (digits before the point - 2); a remainder of half a unit or more rounds up."""
    digits = len(str(int(x)))
    unit = 10 ** (digits - 2)
    whole, rest = divmod(x, unit)
    return f"{int(whole + (1 if rest >= unit / 2 else 0)) * unit:,}"


def test_the_page_the_preview_and_the_api_round_the_same_figure_the_same_way(client):
    """Qwen3-30B-A3B with EAGLE-3 k=3 on one H100 (the fresh user's case, at concurrency 8: the preview said 640 tok/s,
    the page 630, the API 635.0; since the wave form of TTFT, concurrency 9 sits at such a tie, 685.0): the API's
    3-significant-digit figure sits exactly at a two-figure tie, and the page and the link preview both show it
    rounded half up, from that same number."""
    import html as html_lib

    params = {"model": "Qwen/Qwen3-30B-A3B", "gpu": "H100", "concurrency": "9",
              "speculative_config": '{"method":"eagle3","num_speculative_tokens":3}'}
    api = client.get("/api/estimate", params).json()
    page = client.get("/", params, follow=True).content.decode()
    og = html_lib.unescape(re.search(r'<meta property="og:description" content="([^"]*)"', page).group(1))
    tps = api["output_tokens_per_s"]
    assert tps % 10 == 5  # at the tie between two two-figure texts (685 -> 680 or 690)
    want = _half_up_two_figures(tps)
    assert re.search(r'id="output-tok-s">([^<]*) tok/s<', page).group(1) == want
    assert f", {want} output tok/s with speculation" in og
    for key, name in (("itl_ms", "itl-ms"), ("ttft_ms", "ttft-ms")):  # the other two: the same number on both
        shown = re.search(rf'id="{name}">([^<]*) ms<', page).group(1)
        assert f"{'TPOT' if key == 'itl_ms' else 'TTFT'} {shown} ms" in og


@pytest.mark.parametrize("value,digits,want", [
    (635.0, 2, "640"), (645.0, 2, "650"),  # ties round up, never to the even figure (Python's round: 640, 640)
    (634.6, 2, "630"), (0.125, 2, "0.13"),  # 0.125 is exact in binary: round(0.125, 2) is 0.12
    (2.675, 2, "2.7"), (9.96, 2, "10"), (1234.5, 2, "1,200"), (0.01234, 2, "0.012")])
def test_two_significant_figures_round_half_up(value, digits, want):
    from calculator.templatetags.calculator_tags import sig

    assert sig(value, digits) == want


def test_the_json_figures_round_half_up_too():
    """The API's three significant digits follow the same rule: 634.5 -> 635 (Python's round(634.5) gives 634) and
    2.675 -> 2.68 (its binary expansion is 2.67499..., which round(2.675, 2) turns into 2.67)."""
    from calculator.engine import perf

    assert perf._sig(634.5) == 635.0 and round(634.5) == 634
    assert perf._sig(2.675) == 2.68 and round(2.675, 2) == 2.67
