"""SGLang behind the runtime seam: the same request model, SGLang's own flag names, its logged figures on
the API, the command line and the page, and the vLLM page's side-by-side answer."""
from __future__ import annotations

import html
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


def test_sglang_names_are_aliases_of_the_shared_settings():
    r = parse_request({"model": QWEN, "runtime": "sglang", "context_length": "32768", "tp_size": "2"})
    assert (r.max_model_len, r.tensor_parallel_size, r.release) == (32768, 2, "0.5.23")
    with pytest.raises(InputError) as err:
        parse_request({"model": QWEN, "context_length": "4096", "max_model_len": "8192"})
    assert err.value.field == "context_length"


@pytest.mark.parametrize("params,field", [
    ({"runtime": "sglang", "gpu_memory_utilization": "0.9"}, "gpu_memory_utilization"),
    ({"runtime": "sglang", "vllm_version": "0.32.0"}, "vllm_version"),
    ({"mem_fraction_static": "0.8"}, "mem_fraction_static"),
    ({"runtime": "sglang", "sglang_version": "0.3.0"}, "sglang_version"),
    ({"runtime": "sglang", "attention_backend": "FLASH_ATTN"}, "attention_backend"),
])
def test_each_runtime_refuses_the_other_ones_settings(client, params, field):
    with pytest.raises(InputError) as err:
        parse_request({"model": QWEN, **params})
    assert err.value.field == field
    assert client.get("/api/estimate", {"model": QWEN, **params}).json()["field"] == field


def test_the_api_reports_what_sglang_logs(client):
    """Qwen3-8B on one H100, bf16: SGLang's cell is layers x 2 (K, V) x KV heads x head_dim x 2 B per token
    (``MHATokenToKVPool``), 36 x 2 x 8 x 128 x 2 = 147,456 B."""
    cfg = load_config("Qwen__Qwen3-8B.json")
    body = client.get("/api/estimate", {"model": QWEN, "runtime": "sglang", "gpu": "H100",
                                        "context_length": "32768"}).json()
    assert body["kv_bytes_per_token"] == cfg["num_hidden_layers"] * 2 * cfg["num_key_value_heads"] * \
        cfg["head_dim"] * 2 == 147456
    assert body["runtime"] == "sglang" and body["verdict"] == "works"
    assert body["max_total_num_tokens"] == body["kv_cache_tokens"] > 0
    assert body["max_model_len"] == 32768
    assert body["serve_argv"][:5] == ["python", "-m", "sglang.launch_server", "--model-path", QWEN]
    assert "--context-length" in body["serve_argv"] and body["itl_ms"] > 0


def test_the_command_line_takes_sglang_flags():
    out = StringIO()
    call_command("estimate", "--model", QWEN, "--runtime", "sglang", "--gpu", "H100", "--context-length", "8192",
                 "--mem-fraction-static", "0.7", "--format", "json", stdout=out)
    data = json.loads(out.getvalue())
    assert data["mem_fraction_static"] == 0.7 and data["max_model_len"] == 8192
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", QWEN, "--runtime", "sglang", "--gpu-memory-utilization", "0.9",
                     stdout=StringIO())
    assert err.value.returncode == 2 and str(err.value).startswith("--gpu-memory-utilization:")


def test_the_page_answers_sglang_and_the_vllm_page_shows_it_beside(client):
    page = client.get("/", {"model": QWEN, "runtime": "sglang", "gpu": "H100", "context_length": "32768"},
                      follow=True).content.decode()
    assert re.search(r"<title>Works: Qwen/Qwen3-8B on 1× NVIDIA H100 80GB HBM3 \(SGLang 0\.5\.23\)", page)
    assert "max_total_num_tokens" in page and "sglang.launch_server" in page
    vllm = client.get("/", {"model": QWEN, "gpu": "H100", "max_model_len": "32768"}, follow=True).content.decode()
    assert 'id="side-by-side"' in vllm and "SGLang keeps" in vllm and "while vLLM takes 0.92" in vllm


def test_the_sglang_page_shows_vllm_beside_for_the_issue_example(client):
    """vllm-project/vllm#21348's SGLang launch (Qwen3-235B-A22B-FP8, --tp 4 --mem-fraction-static 0.93, 4x H100)
    on the SGLang page: the same request on vLLM sits beside it, and the sentence says the fraction was passed,
    that both keep bf16 KV at 1 KV head x (128 + 128) x 94 layers x 2 B = 48,128 B per token per GPU, and what
    vLLM subtracts from its budget."""
    page = client.get("/", {"model": "Qwen/Qwen3-235B-A22B-FP8", "runtime": "sglang", "sglang_version": "0.4.10.post2",
                            "gpu": "H100", "tensor_parallel_size": "4", "mem_fraction_static": "0.93"}, follow=True).content.decode()
    assert 'id="side-by-side"' in page and 'id="vllm-tokens"' in page and "vllm serve" in page
    why = re.search(r'<p id="side-by-side-why">(.*?)</p>', page, re.DOTALL).group(1)
    assert "0.930 (as passed with --mem-fraction-static)" in why
    assert "both store bf16 KV at 48,128 B per token per GPU" in why
    assert "subtracts the profiled activation peak" in why


def test_a_configuration_sglang_cannot_start_is_a_verdict_not_bad_input(client):
    """Qwen3-235B-A22B-FP8 on 4x L4 (22 GiB each): its FP8 weights alone are ~235e9 x 1 B / 4 ranks ~ 55 GiB per
    rank, more than an L4 holds. SGLang fails while loading them: the answer is does_not_fit (200, exit 1 on the
    CLI), not a 400 as if a flag were wrong. A tiny --mem-fraction-static leaves no KV pool: does_not_fit too."""
    q = {"model": "Qwen/Qwen3-235B-A22B-FP8", "gpu": "L4", "runtime": "sglang", "tp_size": "4"}
    r = client.get("/api/estimate", q)
    assert r.status_code == 200, r.content
    body = r.json()
    w, free = body["weights_gib"], body["free_before_load_gib"]
    assert w > 50 > 22 > free
    assert body["verdict"] == "does_not_fit" and f"({w:.2f} GiB per rank) do not fit" in body["reason"]
    assert body["kv_cache_tokens"] == 0
    small = client.get("/api/estimate", {"model": "Qwen/Qwen3-8B", "gpu": "L4", "runtime": "sglang",
                                         "mem_fraction_static": "0.3"}).json()
    # 0.5.23's words (kv_cache_configurator.py:3050); 0.5.10.post1 raised "Not enough memory"
    assert small["verdict"] == "does_not_fit" and "leave no GPU memory for the KV cache" in small["reason"]
    out = StringIO()
    with pytest.raises(CommandError) as exit_:  # calculator.cli.Verdict: the exit status follows the verdict
        call_command("estimate", "--model", "Qwen/Qwen3-235B-A22B-FP8", "--gpu", "L4", "--runtime", "sglang",
                     "--tp-size", "4", stdout=out)
    assert exit_.value.returncode == 1 and "Does not fit" in out.getvalue()


def test_the_page_takes_sglangs_own_flag_names_as_the_api_does(client):
    """tp_size (SGLang's --tp-size) on the page: the form's shown default of tensor_parallel_size must not make it
    look like two different values for one setting; the permalink names the shared field."""
    q = {"model": "Qwen/Qwen3-235B-A22B-FP8", "gpu": "H100", "runtime": "sglang", "tp_size": "4"}
    r = client.get("/", q, follow=True)
    assert r.status_code == 200 and "tensor_parallel_size=4" in r.redirect_chain[-1][0]
    assert client.get("/api/estimate", q).json()["tp_size"] == 4
    clash = client.get("/", q | {"tensor_parallel_size": "2"})
    assert clash.status_code == 400 and "under another name" in clash.content.decode()


LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE3_K3 = '{"method":"eagle3","num_speculative_tokens":3}'


def _estimate(*args):
    out = StringIO()
    call_command("estimate", "--model", LLAMA8, "--runtime", "sglang", "--gpu", "H100", "--concurrency", "2",
                 "--speculative-config", EAGLE3_K3, *args, "--format", "json", stdout=out)
    return json.loads(out.getvalue())


def test_sglang_tree_flags_reach_the_launch_command_the_memory_plan_and_the_speed_model():
    """--speculative-num-steps 3 (speculative_config's num_speculative_tokens) --speculative-eagle-topk 4
    --speculative-num-draft-tokens 6: SGLang's own flags go into the plan and the command; the target verifies 6
    tokens per request where the chain of 3 verifies 4, with the same 3 drafter passes, so at the same acceptance
    length the tree is slower per step and its speedup lower (both on one attention backend: by default SGLang gives a
    tree flashinfer on Hopper, where a chain gets fa3, whose split-KV combine is one kernel more per layer)."""
    tree = _estimate("--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "6", "--acceptance-length",
                     "2.4", "--attention-backend", "flashinfer")
    chain = _estimate("--acceptance-length", "2.4", "--attention-backend", "flashinfer")
    assert (tree["speculative"]["num_steps"], tree["speculative"]["eagle_topk"],
            tree["speculative"]["num_draft_tokens"]) == (3, 4, 6)
    assert (chain["speculative"]["eagle_topk"], chain["speculative"]["num_draft_tokens"]) == (1, 4)
    argv = tree["serve_argv"]
    assert argv[argv.index("--speculative-eagle-topk") + 1] == "4"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "6"
    assert tree["mean_acceptance_length"] == chain["mean_acceptance_length"] == 2.4
    assert tree["spec_speedup"] < chain["spec_speedup"]
    assert tree["best_num_speculative_tokens"] is None  # the tree's shape is the user's; a chain's k is searched


def test_sglang_tree_without_a_measured_acceptance_takes_its_depths_figure_and_says_so():
    """A tree of depth 3 accepts at most 4 tokens per step whatever its width, so without a measured figure the
    acceptance is the chain of 3's (the public figure), with a warning; 5.0 tokens per step is refused as input."""
    tree = _estimate("--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "6")
    chain = _estimate()
    assert tree["mean_acceptance_length"] == chain["mean_acceptance_length"] <= 4
    assert any("SGLang draft tree (3 steps x topk 4, 6 draft tokens)" in w for w in tree["speed_warnings"])
    with pytest.raises(CommandError, match="at most num_speculative_tokens \\+ 1 = 4 tokens"):
        _estimate("--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "6", "--acceptance-length", "5")


@pytest.mark.parametrize("params,field,words", [
    ({"runtime": "sglang", "speculative_eagle_topk": "4", "speculative_num_draft_tokens": "6"},
     "speculative_eagle_topk", "needs a speculative_config"),
    ({"runtime": "sglang", "speculative_config": EAGLE3_K3, "speculative_eagle_topk": "4"},
     "speculative_num_draft_tokens", "needs --speculative-num-draft-tokens"),
    # 3 steps x topk 4: 4 + 2 x 16 = 36 candidates, so at most 37 draft tokens with the root
    ({"runtime": "sglang", "speculative_config": EAGLE3_K3, "speculative_eagle_topk": "4",
      "speculative_num_draft_tokens": "38"}, "speculative_num_draft_tokens", "at most 37 draft tokens"),
    ({"runtime": "sglang", "speculative_config": '{"method":"ngram","num_speculative_tokens":3}',
      "speculative_eagle_topk": "2", "speculative_num_draft_tokens": "4"}, "speculative_eagle_topk", "method eagle"),
    ({"speculative_config": EAGLE3_K3, "speculative_eagle_topk": "4"}, "speculative_eagle_topk", "SGLang setting"),
])
def test_sglang_tree_flags_are_checked_as_sglang_checks_them(client, params, field, words):
    with pytest.raises(InputError) as err:
        parse_request({"model": LLAMA8, **params})
    assert err.value.field == field and words in err.value.message
    resp = client.get("/api/estimate", {"model": LLAMA8, **params})
    assert resp.status_code == 400 and resp.json()["field"] == field


def test_sglang_tree_at_the_candidate_bound_is_accepted():
    r = parse_request({"model": LLAMA8, "runtime": "sglang", "speculative_config": EAGLE3_K3,
                       "speculative_eagle_topk": "4", "speculative_num_draft_tokens": "37"})
    assert (r.speculative_eagle_topk, r.speculative_num_draft_tokens) == (4, 37)


def test_the_page_takes_sglangs_tree_flags_keeps_them_in_the_link_and_says_what_is_missing(client):
    q = {"model": LLAMA8, "runtime": "sglang", "gpu": "H100", "speculative_config": EAGLE3_K3,
         "speculative_eagle_topk": "4", "speculative_num_draft_tokens": "6", "concurrency": "2"}
    r = client.get("/", q, follow=True)
    html = r.content.decode()
    assert r.status_code == 200 and "speculative_eagle_topk=4" in r.redirect_chain[-1][0]
    assert "--speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 6</code>" in html
    missing = client.get("/", {k: v for k, v in q.items() if k != "speculative_num_draft_tokens"})
    text = missing.content.decode()
    assert missing.status_code == 400 and "needs --speculative-num-draft-tokens" in text
    assert 'value="4"' in text  # what the user typed stays in the form


def test_the_command_line_table_prints_sglang_speculation_without_a_traceback():
    """The plain-text table reads the speed model's JSON keys (speed_fields): with speculation the times printed
    are the speculative ones and the line names the speedup and where the acceptance came from."""
    out = StringIO()
    call_command("estimate", "--model", LLAMA8, "--runtime", "sglang", "--gpu", "H100", "--concurrency", "2",
                 "--speculative-config", EAGLE3_K3, "--acceptance-rate", "0.7", stdout=out)
    text = out.getvalue()
    data = _estimate("--acceptance-rate", "0.7")
    assert "With speculative decoding (the times above): speedup" in text
    assert "mean acceptance length 3.10" in text  # 1 + 3 x 0.7, the user's rate
    assert data["mean_acceptance_length"] == pytest.approx(1 + 3 * 0.7)


@pytest.mark.parametrize("runtime,release", [("sglang", "sglang_version"), ("llama.cpp", "llamacpp_release"),
                                             ("ollama", "ollama_release")])
def test_switching_runtime_on_the_page_from_a_vllm_permalink_drops_the_vllm_release(client, runtime, release):
    """A vLLM permalink names vllm_version; picking another runtime in the menu submits it with the new runtime.
    The page answers for the new runtime (the API, a program's input, still refuses the mix, with the right hint)."""
    q = {"model": "Qwen/QwQ-32B", "gpu": "L4", "tensor_parallel_size": "4", "max_model_len": "32768",
         "vllm_version": "0.32.0", "runtime": runtime}
    if runtime != "sglang":
        q.pop("tensor_parallel_size")
    r = client.get("/", q, follow=True)
    assert r.status_code == 200, r.content.decode()[:300]
    final = r.redirect_chain[-1][0]
    assert "vllm_version" not in final and f"{release}=" in final
    api = client.get("/api/estimate", q)
    assert api.status_code == 400 and api.json()["field"] == "vllm_version"
    assert ("llamacpp_release" if runtime != "sglang" else "sglang_version") in api.json()["error"]


def test_every_number_of_sglangs_json_says_where_it_came_from(client):
    """Each numeric key of the SGLang answer has a sources entry (the speed keys have speed_sources; the layout's
    node count is the request's); a --context-length the user gave is labelled as theirs, with the model's own."""
    body = client.get("/api/estimate", {"model": QWEN, "runtime": "sglang", "gpu": "H100",
                                        "context_length": "32768"}).json()
    numeric = [k for k, v in body.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    speed = {"ttft_ms", "itl_ms", "output_tokens_per_s"}
    assert speed <= set(numeric) and set(body["speed_sources"])
    missing = [k for k in numeric if k not in body["sources"] and k not in speed | {"gpus_per_node", "num_nodes"}]
    assert missing == []
    cfg = load_config("Qwen__Qwen3-8B.json")
    assert body["sources"]["context_length"].startswith("input: --context-length as given; the model's own is "
                                                       f"{cfg['max_position_embeddings']:,}")
    assert body["kv_pool_gib"] == pytest.approx(body["max_total_num_tokens"] * body["cell_size_bytes"] / 2**30,
                                                abs=1e-3)


def test_acceptance_without_speculation_is_said_unused_and_given_with_it_is_reported(client):
    """Without a speculative_config the acceptance has nothing to act on (the validator's form takes one for the
    speculation it picks itself, so it is not refused): the answer says it is not used."""
    q = {"model": LLAMA8, "gpu": "H100", "acceptance_rate": "0.7"}
    plain = client.get("/api/estimate", q).json()
    assert plain["spec_speedup"] is None and plain["speed_with_speculation"] is False
    assert any("acceptance given is not used" in w for w in plain["speed_warnings"])
    body = client.get("/api/estimate", q | {"speculative_config": EAGLE3_K3}).json()
    assert body["acceptance_rate"] == 0.7 and body["mean_acceptance_length"] == pytest.approx(1 + 3 * 0.7)


def test_the_api_carries_the_side_by_side_answer_of_the_page(client):
    """vLLM's JSON names SGLang's answer for the same request (and the reverse): the tokens are what the other
    runtime's own answer says, and the sentence explains the difference."""
    q = {"model": "Qwen/Qwen3-235B-A22B-FP8", "gpu": "H100", "tensor_parallel_size": "4", "max_model_len": "32768"}
    vllm = client.get("/api/estimate", q).json()
    sglang = client.get("/api/estimate", q | {"runtime": "sglang"}).json()
    side = vllm["side_by_side"]
    assert side["runtime"] == "sglang" and side["kv_cache_tokens"] == sglang["max_total_num_tokens"]
    assert side["serve_argv"] == sglang["serve_argv"] and "SGLang keeps" in side["sentence"]
    back = sglang["side_by_side"]
    assert back["runtime"] == "vllm" and back["kv_cache_tokens"] == vllm["kv_cache_tokens"]
    assert back["sentence"] == side["sentence"]
    llama = client.get("/api/estimate", {"model": QWEN, "gpu": "RTX 4090", "runtime": "llama.cpp"}).json()
    assert "side_by_side" not in llama


def test_sglang_command_writes_fp8_kv_by_sglangs_own_name(client):
    """SGLang's --kv-cache-dtype takes auto, fp8_e5m2, fp8_e4m3, bf16 ... (server_args.py), not vLLM's 'fp8': the
    command writes what was sized (fp8_e4m3), on the SGLang answer and in a vLLM answer's side_by_side."""
    q = {"model": QWEN, "gpu": "H100", "kv_cache_dtype": "fp8", "context_length": "32768"}
    argv = client.get("/api/estimate", q | {"runtime": "sglang"}).json()["serve_argv"]
    assert argv[argv.index("--kv-cache-dtype") + 1] == "fp8_e4m3" and "fp8" not in argv
    side = client.get("/api/estimate", q).json()["side_by_side"]["serve_argv"]
    assert side[side.index("--kv-cache-dtype") + 1] == "fp8_e4m3"


def test_a_narrow_tree_caps_the_acceptance_at_its_draft_tokens():
    """topk 4, 3 steps, but only 2 draft tokens (the root and one): at most 2 tokens per step, so the chain-of-one
    figure is used (not the chain of 3), and a measured length above 2 has no speed figure."""
    narrow = _estimate("--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "2")
    one = _estimate_k(1)
    assert narrow["mean_acceptance_length"] == one["mean_acceptance_length"] <= 2
    bad = _estimate("--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "2", "--acceptance-length",
                    "2.4")
    assert "between 1 and k+1 = 2" in bad["speed_error"]


def _estimate_k(k):
    out = StringIO()
    call_command("estimate", "--model", LLAMA8, "--runtime", "sglang", "--gpu", "H100", "--concurrency", "2",
                 "--speculative-config", json.dumps({"method": "eagle3", "num_speculative_tokens": k}),
                 "--format", "json", stdout=out)
    return json.loads(out.getvalue())


def test_a_workload_longer_than_the_context_names_the_runtime_that_refuses_it(client):
    body = client.get("/api/estimate", {"model": QWEN, "gpu": "H100", "runtime": "sglang", "prompt_len": "8100",
                                        "context_length": "8192"}).json()
    assert body["verdict"] == "does_not_fit"
    assert body["verdict_headline"].endswith("longer than --context-length 8,192: SGLang rejects it")


def test_switching_runtime_drops_the_settings_only_the_runtime_left_takes(client):
    """A vLLM permalink with --gpu-memory-utilization and --max-num-seqs, switched to SGLang in the menu: the page
    answers for SGLang without the vLLM-only setting (SGLang's own is --mem-fraction-static) and keeps max_num_seqs,
    which SGLang takes as --max-running-requests."""
    q = {"model": QWEN, "gpu": "H100", "max_model_len": "8192", "vllm_version": "0.32.0",
         "gpu_memory_utilization": "0.85", "max_num_seqs": "64", "runtime": "sglang"}
    r = client.get("/", q)  # answered in place, with the "Not applied" notice for the vLLM setting
    final = html.unescape(re.search(r'<link rel="canonical" href="([^"]*)">', r.content.decode()).group(1))
    assert r.status_code == 200 and "runtime=sglang" in final
    assert "Not applied: gpu_memory_utilization=0.85" in html.unescape(r.content.decode())
    assert "gpu_memory_utilization" not in final and "max_num_seqs=64" in final


@pytest.mark.parametrize("release", ["0.5.3", "0.5.10.post1"])
def test_sglang_ngram_is_launched_and_capped_as_sglang_does(client, release):
    """SGLang's NGRAM block of server_args (0.5.3: line 1133; 0.5.10.post1: 3099) sets max_running_requests = 48
    when it is not given and defaults --speculative-num-draft-tokens to 12; the calculator's chain of 3 proposals
    is written as --speculative-num-draft-tokens 4 (the root and 3), so the command runs what was modelled."""
    body = client.get("/api/estimate", {"model": QWEN, "gpu": "H100", "runtime": "sglang", "sglang_version": release,
                                        "speculative_config": '{"method":"ngram","num_speculative_tokens":3}'}).json()
    argv = body["serve_argv"]
    assert argv[argv.index("--speculative-algorithm") + 1] == "NGRAM"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4" and "--speculative-eagle-topk" not in argv
    assert body["max_running_requests"] == 48


def test_the_sglang_speed_warning_states_the_error_on_the_public_sglang_runs():
    """The sentence in SPEED_WARNING is recomputed here from benchmarks/data/sglang_speed_public.json through the
    product's SGLang speed path (benchmarks/sglang_speed_fit.py, the current row): if the speed model changes, the
    sentence must change with it."""
    import statistics

    from benchmarks import sglang_speed_fit as fit
    from calculator.engine import perf
    from calculator.runtimes.sglang.runtime import SPEED_WARNING

    errs = []
    for r in fit.load():
        if not r.get("fit"):
            continue
        errs.append(fit.errors(fit.predict(fit.prepare(r), perf.EFFICIENCY[fit.KEY]), r))
    assert len(errs) == 28
    tpot = [e["tpot"] for e in errs if "tpot" in e]
    tok = [e["tok_s"] for e in errs if "tok_s" in e]
    ttft = [e["ttft"] for e in errs if "ttft" in e]
    med = (f"the median |error| is TPOT {statistics.median(abs(x) for x in tpot) * 100:.1f} %, output tok/s "
           f"{statistics.median(abs(x) for x in tok) * 100:.1f} %, TTFT {statistics.median(abs(x) for x in ttft) * 100:.1f} %")
    assert med.replace(" ", "") in SPEED_WARNING.replace(" ", ""), med
    said = (f"TPOT below the measured one in {sum(x < 0 for x in tpot)} of {len(tpot)} (median "
            f"{statistics.median(tpot) * 100:.0f} %), output tok/s above it in {sum(x > 0 for x in tok)} of {len(tok)} "
            f"(median +{statistics.median(tok) * 100:.0f} %), TTFT below it in {sum(x < 0 for x in ttft)} of "
            f"{len(ttft)} (median {statistics.median(ttft) * 100:.0f} %)")
    assert said.replace(" ", "") in SPEED_WARNING.replace(" ", ""), said


def test_sglang_answers_with_several_clients_say_their_ttft_is_not_calibrated(client):
    """The figures of perf.SGLANG_LOAD_TTFT_WARNING are recomputed from the public runs with more than one client
    (benchmarks/sglang_speed_fit.py --load-ttft: measured / predicted mean TTFT through the product's SGLang path);
    the note is on an SGLang answer with several clients and on no answer with one, nor on vLLM's."""
    import re
    import statistics

    from benchmarks import sglang_speed_fit as fit
    from calculator.engine import perf

    out = fit.load_ttft()
    v = sorted(out["ratios"].values())
    n, c_lo, c_hi, lo, hi, med = re.search(r"on (\d+) public .* with (\d+)-(\d+) clients .* was ([\d.]+)-([\d.]+) times .*"
                                           r"median error (\d+) %", perf.SGLANG_LOAD_TTFT_WARNING).groups()
    assert int(n) == len(v) and (int(c_lo), int(c_hi)) == out["concurrency"]
    assert f"{v[0]:.2f}" == lo and f"{v[-1]:.1f}" == hi
    assert round(100 * statistics.median(abs(1 / x - 1) for x in v)) == int(med)
    assert v[0] < 0.5 and v[-1] > 2  # both directions: not a bias a factor could fix
    q = {"model": QWEN, "gpu": "H100", "runtime": "sglang"}
    warned = lambda p: perf.SGLANG_LOAD_TTFT_WARNING in client.get("/api/estimate", p).json()["speed_warnings"]  # noqa
    assert warned(q | {"concurrency": "16"}) and not warned(q | {"concurrency": "1"})
    assert not warned(q | {"runtime": "vllm", "concurrency": "16"})


def test_the_sglang_page_shows_how_far_its_speed_figures_were_off(client):
    from calculator.runtimes.sglang.runtime import SPEED_WARNING

    html = client.get("/", {"model": QWEN, "runtime": "sglang", "gpu": "H100"}, follow=True).content.decode()
    assert 'id="speed-warnings"' in html and "Against 28 public SGLang cookbook runs" in html
    assert html.count("Against 28 public SGLang cookbook runs") == 1 and SPEED_WARNING.startswith("SGLang speed")


def test_speculations_cap_of_48_running_requests_is_lifted_in_the_command_and_said(client):
    """SGLang resets max_running_requests to 48 for speculative decoding when it is not given: with 64 clients the
    command passes --max-running-requests 64 so the speculative server runs them all, as the plain one does, and the
    answer says so and what the default would do; a value the user gives is kept (and written)."""
    q = {"model": LLAMA8, "gpu": "H100", "runtime": "sglang", "context_length": "8192", "concurrency": "64"}
    spec = client.get("/api/estimate", q | {"speculative_config": EAGLE3_K3}).json()
    assert spec["max_running_requests"] == 64
    argv = spec["serve_argv"]
    assert argv[argv.index("--max-running-requests") + 1] == "64"
    assert any("resets --max-running-requests to 48" in w and "16 of them would queue" in w
               for w in spec["speed_warnings"])
    below = client.get("/api/estimate", q | {"concurrency": "32", "speculative_config": EAGLE3_K3}).json()
    assert below["max_running_requests"] == 48 and "--max-running-requests" not in below["serve_argv"]
    given = client.get("/api/estimate", q | {"speculative_config": EAGLE3_K3, "max_running_requests": "40"}).json()
    assert given["max_running_requests"] == 40 and not any("resets" in w for w in given["speed_warnings"])
    argv = given["serve_argv"]
    assert argv[argv.index("--max-running-requests") + 1] == "40"


def test_speculation_without_piecewise_prefill_graphs_is_set_against_the_plain_server_with_them(client):
    """From 0.5.10 SGLang turns the piecewise prefill graphs off for speculative decoding: the speedup's baseline is
    the plain server, which keeps them (TPOT plain / TPOT with speculation at the same running requests); 0.5.9 has
    no piecewise graphs, so nothing changes there. (128-token prompts: an eager pass is launch-bound, 32 layers x
    the counted kernels x 28 us (a dense model) against a few ms of GPU work; at 1,024 tokens the GPU work covers the
    launches and the two servers give the same figures, with no note.)"""
    q = {"model": LLAMA8, "gpu": "H100", "runtime": "sglang", "context_length": "8192", "concurrency": "4",
         "prompt_len": "128", "sglang_version": "0.5.10.post1"}
    plain = client.get("/api/estimate", q).json()
    spec = client.get("/api/estimate", q | {"speculative_config": EAGLE3_K3}).json()
    note = next(w for w in spec["speed_warnings"] if w.startswith("against the plain server as deployed"))
    assert "piecewise prefill CUDA graphs off" in note and "TPOT plain / TPOT with speculation" in note
    assert spec["spec_speedup"] == pytest.approx(plain["itl_ms"] / spec["itl_ms"], rel=1e-2)
    old = client.get("/api/estimate", q | {"speculative_config": EAGLE3_K3, "sglang_version": "0.5.9"}).json()
    assert not any(w.startswith("against the plain server") for w in old["speed_warnings"])
    same = client.get("/api/estimate", q | {"speculative_config": EAGLE3_K3, "prompt_len": "1024"}).json()
    assert not any(w.startswith("against the plain server") for w in same["speed_warnings"])
    # 0.5.23 keeps its (breakable) prefill graphs with speculative decoding too: one server, no note
    new = client.get("/api/estimate", q | {"speculative_config": EAGLE3_K3, "sglang_version": "0.5.23"}).json()
    assert not any(w.startswith("against the plain server") for w in new["speed_warnings"])


def test_max_num_seqs_is_sglangs_max_running_requests_and_not_llamacpps():
    r = parse_request({"model": QWEN, "runtime": "sglang", "max_running_requests": "96"})
    assert r.max_num_seqs == 96
    with pytest.raises(InputError) as err:
        parse_request({"model": QWEN, "runtime": "llama.cpp", "max_num_seqs": "4"})
    assert err.value.field == "max_num_seqs" and "--parallel" in err.value.message


def test_eagle3_is_refused_on_the_release_that_did_not_have_it(client):
    """sglang 0.4.3.post4's --speculative-algorithm takes EAGLE or NEXTN only (server_args.py:749); 0.4.10.post2
    has EAGLE3."""
    q = {"model": LLAMA8, "gpu": "H100", "runtime": "sglang", "speculative_config": EAGLE3_K3}
    r = client.get("/api/estimate", q | {"sglang_version": "0.4.3.post4"})
    assert r.status_code == 400 and r.json()["field"] == "speculative_config" and "EAGLE or NEXTN" in r.json()["error"]
    assert client.get("/api/estimate", q | {"sglang_version": "0.4.10.post2"}).status_code == 200


def test_an_acceptance_length_beyond_k_plus_one_is_bad_input(client):
    r = client.get("/api/estimate", {"model": LLAMA8, "gpu": "H100", "speculative_config": EAGLE3_K3,
                                     "acceptance_length": "10"})
    assert r.status_code == 400 and r.json()["field"] == "acceptance_length"


def test_sglang_settings_that_vllms_checks_would_refuse_keep_their_speed_answer(client):
    """--max-running-requests above vLLM's max_num_batched_tokens is SGLang's own cap (no such vLLM rule applies);
    more running requests than --cuda-graph-max-bs are said to decode eagerly."""
    q = {"model": LLAMA8, "gpu": "H100", "runtime": "sglang", "context_length": "8192"}
    body = client.get("/api/estimate", q | {"max_running_requests": "10000", "concurrency": "16"}).json()
    assert body["speed_error"] is None and body["itl_ms"] > 0
    eager = client.get("/api/estimate", q | {"cuda_graph_max_bs": "8", "concurrency": "32"}).json()
    assert any("more than --cuda-graph-max-bs 8" in w for w in eager["speed_warnings"])


def test_dp_attention_runs_on_the_tp_gpus_and_llamacpp_names_no_circular_equivalent(client):
    """With --enable-dp-attention SGLang's dp groups live inside the tp ranks: tp x pp GPUs, not times dp."""
    r = parse_request({"model": QWEN, "runtime": "sglang", "tensor_parallel_size": "8", "dp_size": "8",
                       "enable_dp_attention": "true"})
    assert r.num_gpus == 8 and "with DP attention 8 inside the TP ranks" in r.layout
    assert parse_request({"model": QWEN, "runtime": "sglang", "tensor_parallel_size": "8", "dp_size": "2"}).num_gpus == 16
    for name in ("dp_size", "data_parallel_size"):
        with pytest.raises(InputError) as err:
            parse_request({"model": QWEN, "runtime": "llama.cpp", name: "2"})
        assert "one llama-server per set of devices" in err.value.message


def test_side_by_side_carries_the_running_cap_and_the_replicas(client):
    """The other runtime's answer takes the running-request cap and the data-parallel replicas under its own flags."""
    body = client.get("/api/estimate", {"model": QWEN, "gpu": "H100", "max_model_len": "8192", "max_num_seqs": "16",
                                        "data_parallel_size": "2"}).json()
    argv = body["side_by_side"]["serve_argv"]
    assert argv[argv.index("--max-running-requests") + 1] == "16" and argv[argv.index("--dp-size") + 1] == "2"
    back = client.get("/api/estimate", {"model": QWEN, "gpu": "H100", "runtime": "sglang", "context_length": "8192",
                                        "max_running_requests": "16", "dp_size": "2"}).json()
    argv = back["side_by_side"]["serve_argv"]
    assert argv[argv.index("--max-num-seqs") + 1] == "16" and argv[argv.index("--data-parallel-size") + 1] == "2"


def test_a_context_length_above_the_models_names_sglangs_flag_and_variable(client):
    """The API answers 400 on the field; the command line names SGLang's own flag (--context-length, not vLLM's
    --max-model-len) and exits 2."""
    r = client.get("/api/estimate", {"model": QWEN, "gpu": "H100", "runtime": "sglang", "context_length": "999999"})
    assert r.status_code == 400
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", QWEN, "--runtime", "sglang", "--gpu", "H100", "--context-length", "999999",
                     stdout=StringIO())
    assert err.value.returncode == 2
    assert str(err.value).startswith("--context-length: ") and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in str(err.value)


def test_the_running_request_cap_is_named_by_sglangs_flag(client):
    """16 clients against --max-running-requests 2: 2 run, the warning names SGLang's flag (vLLM's --max-num-seqs is
    the same field)."""
    body = client.get("/api/estimate", {"model": QWEN, "gpu": "H100", "runtime": "sglang", "max_num_seqs": "2",
                                        "concurrency": "16"}).json()
    cap = [w for w in body["speed_warnings"] if w.startswith("only 2 of 16 requests run at once")]
    assert cap and "limited by --max-running-requests 2" in cap[0]


def test_without_an_acceptance_figure_the_three_figures_are_one_servers(client):
    """ngram has no public acceptance figure: the speculative TPOT is not predicted, so TTFT, TPOT and tok/s are all
    the plain server's (0.5.10.post1: the one that keeps its piecewise prefill graphs), never the speculative server's
    TTFT beside the plain server's TPOT."""
    q = {"model": QWEN, "gpu": "H100", "runtime": "sglang", "concurrency": "4"}
    plain = client.get("/api/estimate", q).json()
    spec = client.get("/api/estimate", {**q, "speculative_config": '{"method": "ngram", "num_speculative_tokens": 3}'}).json()
    assert spec["spec_speedup"] is None
    assert (spec["ttft_ms"], spec["itl_ms"], spec["output_tokens_per_s"]) == \
        (plain["ttft_ms"], plain["itl_ms"], plain["output_tokens_per_s"])


def test_sglang_0_4_10_speed_takes_a_context_above_the_models(client):
    """0.4.10.post2 runs a --context-length above the model's own (its SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN
    defaults to True): the speed is predicted, not refused with vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN rule."""
    body = client.get("/api/estimate", {"model": QWEN, "gpu": "H100", "runtime": "sglang", "sglang_version": "0.4.10.post2",
                                        "context_length": "65536"}).json()
    assert body.get("speed_error") is None and body["ttft_ms"] > 0
    assert any("above the model's derived 40,960" in n for n in body["notes"])


def test_a_method_sglang_lacks_is_refused_there_and_named_on_the_vllm_page(client):
    """Suffix decoding is vLLM's (Arctic Inference); SGLang's --speculative-algorithm has no such choice
    (server_args.py: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM). The SGLang answer is a 400 naming its methods; the vLLM
    answer stands, its side-by-side says why SGLang has none; the page renders."""
    spec = '{"method": "suffix", "num_speculative_tokens": 3}'
    q = {"model": QWEN, "gpu": "H100", "speculative_config": spec}
    r = client.get("/api/estimate", {**q, "runtime": "sglang"})
    assert r.status_code == 400 and "SGLang has no 'suffix' speculative decoding" in r.content.decode()
    body = client.get("/api/estimate", q).json()
    assert body["side_by_side"]["runtime"] == "sglang" and "no 'suffix'" in body["side_by_side"]["error"]
    assert client.get("/", q, follow=True).status_code == 200
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", QWEN, "--runtime", "sglang", "--gpu", "H100", "--speculative-config", spec,
                     stdout=StringIO())
    assert err.value.returncode == 2


def test_the_slowdown_stop_sign_says_the_speedup_the_answer_gives(client):
    """0.5.10 compares the speculative server with the plain one as deployed (piecewise prefill graphs on): the
    speedup is rescaled there, and the stop sign must quote the rescaled figures, not the ones before."""
    body = client.get("/api/estimate", {
        "model": "Qwen/Qwen3-30B-A3B", "gpu": "H100", "runtime": "sglang", "max_model_len": "8192",
        "speculative_config": '{"method": "eagle3", "num_speculative_tokens": 6}', "speculative_eagle_topk": "10",
        "speculative_num_draft_tokens": "32"}).json()
    sp, lo, hi = body["spec_speedup"], body["spec_speedup_low"], body["spec_speedup_high"]
    assert sp < 1
    signs = [w for w in body["speed_warnings"] if w.startswith("stop sign: at acceptance length")]
    assert len(signs) == 1 and f"(speedup {sp:.2f}x, range {lo:.2f}-{hi:.2f})" in signs[0]


def test_a_prompt_beyond_sglangs_request_cap_has_no_speed(client):
    """Qwen3-32B on one H100: SGLang's pool is smaller than the 40,960 context, so it caps each request at
    max_total_num_tokens - 1 (tp_worker.py max_req_len) and rejects a 30,000 + 128 token request: no speed for it; a
    1,024-token prompt under the cap keeps its speed."""
    q = {"model": "Qwen/Qwen3-32B", "gpu": "H100", "runtime": "sglang", "concurrency": "4"}
    body = client.get("/api/estimate", {**q, "prompt_len": "30000"}).json()
    cap = body["kv_cache_tokens"] - 1
    assert cap < 30128 and body.get("ttft_ms") is None
    assert body["speed_error"].startswith("prompt_len: prompt_len + output_len = 30,128 tokens exceeds SGLang's request "
                                          "cap") and f"{cap:,}" in body["speed_error"]
    assert client.get("/api/estimate", q).json()["ttft_ms"] > 0


def test_the_sglang_page_gives_the_speculative_servers_ttft_beside_its_tpot(client):
    """The SGLang page's speed line: the plain server's three figures, then the speculative server's three (its TTFT
    too, which the API's ttft_ms is), not the speculative TPOT beside the plain TTFT alone."""
    q = {"model": "deepseek-ai/DeepSeek-V3", "runtime": "sglang", "gpu": "H200", "tensor_parallel_size": "8",
         "max_model_len": "32768", "speculative_config": '{"method": "mtp", "num_speculative_tokens": 1}'}
    body = client.get("/api/estimate", q).json()
    page = client.get("/", q, follow=True).content.decode()
    spec_ttft = re.search(r'id="spec-ttft-ms">([^<]+)<', page).group(1)
    assert body["ttft_ms"] == pytest.approx(float(spec_ttft.split()[0]) * (1000 if spec_ttft.endswith(" s") else 1),
                                            rel=0.05)


def test_the_best_k_is_named_by_the_runtimes_knob(client):
    """k = 1 with EAGLE-3 on Llama-3.1-8B at one client: a deeper chain pays more; SGLang's answer names its
    --speculative-num-steps, vLLM's its num_speculative_tokens."""
    q = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100",
         "speculative_config": '{"method": "eagle3", "num_speculative_tokens": 1}'}
    sg = client.get("/api/estimate", {**q, "runtime": "sglang"}).json()
    vl = client.get("/api/estimate", q).json()
    assert any(w.startswith(f"--speculative-num-steps {sg['best_num_speculative_tokens']} is predicted faster than 1")
               for w in sg["speed_warnings"])
    assert any(w.startswith(f"num_speculative_tokens {vl['best_num_speculative_tokens']} is predicted faster than 1")
               for w in vl["speed_warnings"])


def test_a_pool_smaller_than_the_context_is_a_condition_not_a_failure(client):
    """Qwen3-32B on one H100 at its 40,960 context: SGLang's pool holds fewer tokens, and SGLang starts anyway, capping
    each request at the pool less one (tp_worker.py max_req_len), unlike vLLM, which refuses to start. The verdict
    depends on the requests staying within the cap (exit 3), names it, suggests the context that removes the
    condition, and a workload beyond the cap does not fit."""
    q = {"model": "Qwen/Qwen3-32B", "gpu": "H100", "runtime": "sglang"}
    body = client.get("/api/estimate", q).json()
    cap = body["kv_cache_tokens"] - 1
    assert body["verdict"] == "depends" and cap < 40960
    assert body["verdict_headline"].startswith(f"works if every request (prompt + output) stays within {cap:,} tokens")
    ctx = [s for s in body["suggestions"] if s["label"].startswith("--context-length ")]
    assert ctx and int(ctx[0]["params"]["max_model_len"]) <= cap + 1
    over = client.get("/api/estimate", {**q, "prompt_len": "30000"}).json()
    assert over["verdict"] == "does_not_fit" and f"SGLang's request cap (the KV pool less one token) {cap:,}" in \
        over["verdict_headline"]


def test_sglang_0_5_23_is_answered_when_named_and_refuses_what_it_does_not_model(client):
    """0.5.23 is covered by name (the default stays 0.5.10.post1): the page answers it and its launch command uses
    0.5.23's flag names; gpt-oss and Llama 4 (their hybrid SWA pools) are answered, DeepSeek-V4 (a compressed hybrid
    SWA pool of its own, not modelled) is a 400 naming the release, never a 0.5.10 rule."""
    q = {"model": QWEN, "runtime": "sglang", "gpu": "H100", "context_length": "32768", "sglang_version": "0.5.23"}
    page = client.get("/", q, follow=True).content.decode()
    assert re.search(r"<title>Works: Qwen/Qwen3-8B on 1× NVIDIA H100 80GB HBM3 \(SGLang 0\.5\.23\)", page)
    body = client.get("/api/estimate", q).json()
    assert "--cuda-graph-max-bs-decode" in body["serve_argv"] and body.get("speed_error") is None
    r = client.get("/api/estimate", q | {"model": "openai/gpt-oss-20b"})
    assert r.status_code == 200 and r.json()["swa_max_total_num_tokens"] > 0
    r = client.get("/api/estimate", q | {"model": "meta-llama/Llama-4-Scout-17B-16E-Instruct", "gpu": "H200",
                                         "tensor_parallel_size": "4"})
    assert r.status_code == 200 and r.json()["swa_max_total_num_tokens"] > 0
    r = client.get("/api/estimate", q | {"model": "deepseek-ai/DeepSeek-V4-Flash", "gpu": "H200",
                                         "tensor_parallel_size": "8"})
    assert r.status_code == 400 and "SGLang 0.5.23" in r.content.decode()


def test_a_pool_that_does_not_fit_suggests_sglangs_own_remedy_with_the_context_it_then_holds(client):
    """gpt-oss-120b on one H100: its weights leave SGLang 0.5.23 no KV pool at the default --mem-fraction-static, and
    SGLang's error says to raise it; a higher share starts with a pool below the model's context, so the suggestion
    pairs the share with the context that pool holds, and that request works."""
    q = {"model": "openai/gpt-oss-120b", "runtime": "sglang", "gpu": "H100"}
    body = client.get("/api/estimate", q).json()
    assert body["verdict"] == "does_not_fit" and body["mem_fraction_static"] < 0.88
    (s,) = [s for s in body["suggestions"] if "mem_fraction_static" in s["params"]]
    assert s["label"].startswith(f"--mem-fraction-static {s['params']['mem_fraction_static']} with --context-length ")
    again = client.get("/api/estimate", q | s["params"]).json()
    assert again["verdict"] == "works" and again["max_model_len"] == int(s["params"]["max_model_len"])
    assert again["max_total_num_tokens"] > again["max_model_len"]


def test_a_dp_attention_pool_is_said_to_be_one_ranks_of_several(client):
    """With --enable-dp-attention each of the dp_size ranks runs its own scheduler and KV pool (what SGLang logs is one
    rank's): the headline says so and gives the total, dp x the rank's tokens."""
    q = {"model": "deepseek-ai/DeepSeek-R1", "runtime": "sglang", "gpu": "H200", "tp_size": "8", "dp_size": "8",
         "enable_dp_attention": "true"}
    body = client.get("/api/estimate", q).json()
    tokens, ctx = body["max_total_num_tokens"], body["context_length"]
    assert body["verdict"] == "works"
    assert body["verdict_headline"].endswith(f"per DP-attention rank (8 ranks, each with its own pool and scheduler: "
                                             f"{8 * tokens:,} tokens, {8 * tokens / ctx:.2f}x in all)")
    plain = client.get("/api/estimate", {k: v for k, v in q.items() if k not in ("dp_size", "enable_dp_attention")})
    assert "DP-attention" not in plain.json()["verdict_headline"]


def test_the_sglang_page_gives_speculations_range_best_k_and_its_chart_as_the_vllm_page_does(client):
    q = {"model": LLAMA8, "gpu": "H100", "runtime": "sglang", "concurrency": "8", "speculative_config": EAGLE3_K3}
    body = client.get("/api/estimate", q).json()
    page = client.get("/", q, follow=True).content.decode()
    assert f'<span id="spec-best-k">{body["best_num_speculative_tokens"]}</span>' in page
    assert '<span id="spec-range">(' in page and f"slowdown {body['spec_slowdown']})" in page
    assert 'data-vega-spec="spec-speedup-concurrency"' in page and 'id="spec-speedup-concurrency"' in page


def test_glm47_flash_nextn_on_a_release_with_a_gqa_draft_predicts_no_speedup_without_a_measured_acceptance(client):
    """SGLang 0.5.8.post1-0.5.10.post1 build GLM-4.7-Flash's NEXTN draft as GLM-4.5's GQA layer
    (Glm4MoeForCausalLMNextN, sglang==0.5.10.post1 configs/model_config.py:301-305; models/glm4_moe_nextn.py imports
    Glm4MoeDecoderLayer), which the checkpoint's MLA attention weights do not fit: DeepSeek-V3's MTP acceptance does
    not stand for it, so the speed is refused by name unless the acceptance is given; 0.5.23 builds the MLA draft."""
    q = {"model": "zai-org/GLM-4.7-Flash", "gpu": "H200", "runtime": "sglang", "speculative_algorithm": "NEXTN",
         "speculative_num_steps": "3"}
    old = client.get("/api/estimate", q | {"sglang_version": "0.5.10.post1"}).json()
    assert old["verdict"] == "works" and old.get("spec_speedup") is None
    assert old["speed_error"].startswith("speculative_config: SGLang 0.5.10.post1 builds GLM-4.7-Flash's NEXTN draft "
                                         "as GLM-4.5's GQA layer")
    given = client.get("/api/estimate", q | {"sglang_version": "0.5.10.post1", "acceptance_length": "1.3"}).json()
    assert given["spec_speedup"] is not None and given["mean_acceptance_length"] == 1.3
    new = client.get("/api/estimate", q).json()
    assert new["spec_speedup"] is not None and new.get("speed_error") is None


def test_a_backend_sglang_refuses_on_the_gpu_is_a_does_not_start_verdict_not_bad_input(client):
    """--attention-backend fa3 on a T4 (SM75): SGLang 0.5.23 stops at start-up (attention_registry.py:244, "FlashAttention
    v3 Backend requires SM>=80 and SM<=90"), which is the verdict's to say, as vLLM's backend refusals are; the answer
    keeps the memory figures and offers to let SGLang pick, and there is no speed for a server that does not start.
    It was a 400 on attention_backend."""
    q = {"model": "Qwen/Qwen3-0.6B", "gpu": "T4", "runtime": "sglang", "attention_backend": "fa3",
         "context_length": "4096"}
    r = client.get("/api/estimate", q)
    assert r.status_code == 200
    body = r.json()
    assert body["verdict"] == "does_not_start"
    assert "FlashAttention v3 Backend requires SM>=80 and SM<=90" in body["verdict_headline"]
    assert "attention_registry.py:244" in body["verdict_headline"]
    assert [s["params"] for s in body["suggestions"]] == [{"attention_backend": ""}]
    assert body["suggestions"][0]["label"].startswith("let SGLang pick the attention backend")
    assert body.get("ttft_ms") is None


def _floats(value, path=""):
    """``(dotted path, float)`` for every float in a JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _floats(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _floats(v, f"{path}[{i}]")
    elif isinstance(value, float):
        yield path, value


def _at(value, path):
    for part in re.findall(r"[^.\[\]]+", path):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


@pytest.mark.parametrize("query", [
    {"model": LLAMA8, "gpu": "H100"},
    {"model": LLAMA8, "gpu": "H100", "speculative_config": EAGLE3_K3, "request_rate": "3"},  # the draft's GiB
    {"model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpu": "H200", "tp_size": "4"},  # the Mamba pool's
    {"model": "openai/gpt-oss-120b", "gpu": "H200"},  # the sliding-window pool's
    {"model": "Qwen/Qwen3-30B-A3B", "gpu": "MI300X"},
])
def test_sglangs_json_gives_its_gib_to_two_decimals_as_the_vllm_answer_does(client, query):
    """The SGLang answer's GiB figures are SGLang's ``:.2f`` log figures, as vLLM's answer gives vLLM's: each is the
    plan's own figure rounded to two decimals (no other change), and no float anywhere in the answer carries binary
    noise (0.30000000000000004, 63.723515625000005) or 15 digits."""
    from calculator.plan import make_plan

    body = client.get("/api/estimate", {**query, "runtime": "sglang"}).json()
    assert body["runtime"] == "sglang" and "error" not in body
    vllm = client.get("/api/estimate", query).json()
    for answer in (body, vllm):
        for path, v in _floats(answer):
            assert v == round(v, 6), path
    plan = make_plan(parse_request({**query, "runtime": "sglang"})).memory.plan.model_dump(mode="json")
    gib = [(path, v) for path, v in _floats(body) if path.rsplit(".", 1)[-1].endswith("_gib")]
    assert {"weights_gib", "kv_size_gib", "free_after_pool_gib"} <= {p for p, _ in gib}
    for path, v in gib:
        raw = _at(plan, path)
        assert v == round(raw, 2) and abs(v - raw) <= 0.005 + 1e-9, path
    vllm_gib = [(path, v) for path, v in _floats(vllm) if path.endswith("_gib")]
    assert vllm_gib and all(v == round(v, 2) for _, v in vllm_gib)  # the rule the vLLM answer follows


def test_sglangs_json_kv_sizes_by_hand_and_the_command_line_prints_the_same():
    """Llama-3.1-8B on SGLang: 32 layers x 8 KV heads x head_dim 128 x bf16, K and V each 32 x 8 x 128 x 2 =
    65,536 B per token; SGLang logs "K size: {k_size / GB:.2f} GB" (sglang==0.5.23 mem_cache/memory_pool.py:2089)."""
    out = StringIO()
    call_command("estimate", "--model", LLAMA8, "--runtime", "sglang", "--gpu", "H100", "--format", "json", stdout=out)
    cli = json.loads(out.getvalue())
    assert cli["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    tokens = cli["max_total_num_tokens"]
    assert cli["k_size_gib"] == cli["v_size_gib"] == round(tokens * 65536 / 2**30, 2)
    assert cli["kv_size_gib"] == round(tokens * 2 * 65536 / 2**30, 2)
    assert all(v == round(v, 6) for _, v in _floats(cli))


@pytest.mark.parametrize("release,overlap", [("0.5.23", True), ("0.5.10.post1", False), ("0.5.9", False),
                                             ("0.4.10.post2", False)])
def test_whether_speculation_runs_under_the_overlap_scheduler_is_the_releases_and_said(release, overlap):
    """The SGLang row's speculative host-time terms were fitted on v0.4.4, where EAGLE turns the overlap scheduler
    off. Up to 0.5.10.post1 every release still does (server_args.py: ``self.disable_overlap_schedule = True`` in the
    EAGLE block, 0.4.3.post4:281 ... 0.5.10.post1:3015, spec v2 off by default, environ.py:442); 0.5.23 keeps it on
    outside the CPU (arg_groups/speculative_hook.py:66-78, called from the EAGLE-family handler at :1096), which the
    model does not price: the answer says so."""
    data = _estimate("--acceptance-length", "2.4", "--sglang-version", release)
    said = [w for w in data["speed_warnings"] if "overlap scheduler" in w]
    where = data["speed_sources"]["speculative.overlap_schedule"]
    if overlap:
        assert len(said) == 1 and "speculative_hook.py:1096" in said[0] and "may be shorter" in said[0]
        assert where.startswith("on: sglang==0.5.23 sglang/srt/arg_groups/speculative_hook.py:1096")
    else:
        assert said == []
        assert where.startswith("off (sglang==" + release + " sglang/srt/server_args.py:")


def test_multi_layer_eagle_models_turn_spec_v2_on_before_0_5_23():
    """MiMo-V2-Flash's multi-layer EAGLE sets SGLANG_ENABLE_SPEC_V2 (server_args.py:1411 in 0.5.9), so its
    speculation keeps the overlap scheduler where other models lose it; Step-3.5 likewise from 0.5.9 (:1432)."""
    from calculator.runtimes.sglang.releases import spec_overlap

    assert spec_overlap("0.5.9", "MiMoV2FlashForCausalLM") == (
        True, "sglang==0.5.9 sglang/srt/server_args.py:1411 (multi-layer EAGLE of MiMoV2FlashForCausalLM turns spec "
              "v2 on)")
    assert spec_overlap("0.5.9", "Step3p5ForCausalLM")[0] is True
    assert spec_overlap("0.5.8.post1", "Step3p5ForCausalLM")[0] is False  # no Step-3.5 branch before 0.5.9
    assert spec_overlap("0.5.9", "LlamaForCausalLM") == (
        False, "sglang==0.5.9 sglang/srt/server_args.py:2384 (spec v2 off by default: sglang==0.5.9 "
               "sglang/srt/environ.py:414)")


def test_the_draft_share_of_the_pool_is_shown_beside_the_pool(client):
    """EAGLE-3 on Llama-3.1-8B, SGLang 0.5.23: the cell of 135,168 B per token is the target's 32 layers x 8 KV heads x
    (128 + 128) x 2 B = 131,072 B plus the draft layer's 4,096 B (pool_configurator.py:311: the draft's KV charged in
    the target's cell), which the KV size SGLang logs leaves out; the page and the command's table show the draft's
    share, its KV and its weights (they were in the JSON only)."""
    data = _estimate("--acceptance-length", "2.4")
    assert data["cell_size_bytes"] == 32 * 8 * 256 * 2 + 8 * 256 * 2 == 135_168
    assert data["speculative"]["draft_cell_size_bytes"] == 4096
    out = StringIO()
    call_command("estimate", "--model", LLAMA8, "--runtime", "sglang", "--gpu", "H100", "--speculative-config",
                 EAGLE3_K3, stdout=out)
    text = out.getvalue()
    assert "  of which the draft's KV per token (B): 4096  (source: sglang==0.5.23" in text
    assert f"Draft KV per rank (GiB): {data['speculative']['draft_kv_gib']}" in text
    assert f"Draft weights per rank (GiB): {data['speculative']['draft_weights_gib']}" in text
    page = client.get("/", {"model": LLAMA8, "runtime": "sglang", "gpu": "H100", "speculative_config": EAGLE3_K3},
                      follow=True).content.decode()
    assert "of which the draft&#x27;s KV per token" in page or "of which the draft's KV per token" in page


# --- SGLang EAGLE / EAGLE-3 on an MoE target at TP > 1 (issue #12): public runs slower than predicted, cause not modelled
MOE_TP_RUNS = "benchmarks/data/spec_extra_public.json"


def _moe_tp_runs() -> list[dict]:
    """The public SGLang EAGLE-3 runs on an MoE target at TP > 1 in the issue-#12 file (selected by the record's own
    fields: runtime, target, TP; the target's experts read from its config.json)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    recs = json.loads((root / MOE_TP_RUNS).read_text())["records"]
    experts = {}
    out = []
    for r in recs:
        if r["runtime"] != "SGLang" or (r.get("tensor_parallel_size") or 1) < 2:
            continue
        name = r["target_model"].replace("/", "__") + ".json"
        if name not in experts:
            try:
                experts[name] = load_config(name).get("num_experts") or 0
            except FileNotFoundError:
                experts[name] = 0
        if experts[name] and r["method"] in ("eagle", "eagle3"):
            out.append(r)
    return out


def test_the_moe_tp_eagle_warning_states_the_public_runs():
    """Every figure of SGLANG_MOE_TP_EAGLE_WARNING recomputed from the public records (not from the speed model):
    the speedup is spec / plain tok/s as the sources give it; a speculative step over a plain one is
    plain tok/s x acceptance length / spec tok/s (tokens per step at the same concurrency)."""
    from calculator.runtimes.sglang.runtime import SGLANG_MOE_TP_EAGLE_WARNING as w

    runs = _moe_tp_runs()
    assert len(runs) == 9 and {r["target_model"] for r in runs} == {"Qwen/Qwen3-30B-A3B"}
    assert sorted({r["tensor_parallel_size"] for r in runs}) == [2, 4] and "at TP 2 and TP 4" in w
    assert "SpecForge issue 339" in w and "AngelSlim issue 163" in w
    assert {r["source_url"].rsplit("/", 3)[1] + "#" + r["source_url"].rsplit("/", 1)[1] for r in runs} == \
        {"SpecForge#339", "AngelSlim#163"}
    low = [r["spec_value"] / r["baseline_value"] for r in runs if r["concurrency_or_batch"] <= 32]
    high = [r["spec_value"] / r["baseline_value"] for r in runs if r["concurrency_or_batch"] > 32]
    conc = sorted(r["concurrency_or_batch"] for r in runs)
    assert f"ran at {min(low):.2f}-{max(low):.2f}x plain decoding with {conc[0]}-32 concurrent requests" in w
    assert max(low) < 1  # every run at 1-32 requests lost
    assert len(high) == 1 and f"({high[0]:.2f}x at {conc[-1]})" in w
    al = sorted(r["acceptance_length"] for r in runs)
    assert f"acceptance lengths {al[0]:g}-{al[-1]:g}" in w
    drafts = sorted(int(re.search(r"num-draft-tokens (\d+)", r["tree"]).group(1)) for r in runs)
    assert f"trees of {drafts[0]}-{drafts[-1]} draft tokens" in w
    ratio = sorted(r["baseline_value"] * r["acceptance_length"] / r["spec_value"] for r in runs)
    assert f"a speculative step taking {ratio[0]:.1f}-{ratio[-1]:.1f}x a plain one" in w


def test_the_moe_tp_eagle_warning_counts_the_gains_the_model_predicts():
    """The warning's "predicts a gain in N of the 9" is the speed model's own call on those runs
    (benchmarks/spec_cases.py, given each run's measured acceptance length): if the model changes, the sentence must."""
    from benchmarks.spec_cases import predict
    from calculator.runtimes.sglang.runtime import SGLANG_MOE_TP_EAGLE_WARNING

    runs = _moe_tp_runs()
    calls = [predict(r)[0] for r in runs]
    assert None not in calls
    assert f"predicts a gain in {sum(1 for p in calls if p >= 1)} of the {len(runs)} runs" in \
        SGLANG_MOE_TP_EAGLE_WARNING


@pytest.mark.parametrize("method,tp,experts,warned", [
    ("eagle3", 4, 128, True), ("eagle", 2, 8, True), ("eagle3", 1, 128, False), ("eagle3", 4, 0, False),
    ("mtp", 8, 256, False), ("ngram", 4, 128, False), (None, 4, 128, False)])
def test_which_sglang_answers_carry_the_moe_tp_eagle_warning(method, tp, experts, warned):
    from calculator.runtimes.sglang.runtime import moe_tp_eagle_warned

    assert moe_tp_eagle_warned(method, tp, experts) is warned


def _spec_answer(model: str, tp: int, runtime: str = "sglang", *extra: str) -> dict:
    out = StringIO()
    call_command("estimate", "--model", model, "--runtime", runtime, "--gpu", "H100", "-tp", str(tp),
                 "--speculative-config", '{"method":"eagle3","num_speculative_tokens":3}', *extra,
                 "--acceptance-length", "2.017", "--format", "json", stdout=out)
    return json.loads(out.getvalue())


def test_qwen3_moe_tp4_eagle3_on_sglang_says_public_runs_were_slower():
    """sd-extra-013 as a user asks it (Qwen3-30B-A3B, H100 TP4, EAGLE-3 steps 3 topk 3 num_draft 4, measured acceptance
    length 2.017): the model's speedup stays a best case, but the answer carries the warning and a slowdown of at least
    "possible" (the public run measured 0.78x). The same at TP1, a dense target at TP4, or on vLLM: no such warning."""
    from calculator.runtimes.sglang.runtime import SGLANG_MOE_TP_EAGLE_WARNING

    tree = ("--speculative-eagle-topk", "3", "--speculative-num-draft-tokens", "4")
    moe = _spec_answer("Qwen/Qwen3-30B-A3B", 4, "sglang", *tree)
    assert SGLANG_MOE_TP_EAGLE_WARNING in moe["speed_warnings"]
    assert moe["spec_slowdown"] in ("possible", "likely") and "speculative.moe_tp" in moe["speed_sources"]
    assert SGLANG_MOE_TP_EAGLE_WARNING not in _spec_answer("Qwen/Qwen3-30B-A3B", 1, "sglang", *tree)["speed_warnings"]
    assert SGLANG_MOE_TP_EAGLE_WARNING not in _spec_answer(LLAMA8, 4, "sglang", *tree)["speed_warnings"]
    assert SGLANG_MOE_TP_EAGLE_WARNING not in _spec_answer("Qwen/Qwen3-30B-A3B", 4, "vllm")["speed_warnings"]


def test_the_sglang_page_names_k_by_sglangs_own_flag(client):
    """SGLang's chain of k drafted tokens is --speculative-num-steps k (with --speculative-num-draft-tokens k + 1): the
    page's best-k line and the speedup table say that flag, not vLLM's num_speculative_tokens."""
    q = {"runtime": "sglang", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "max_model_len": "8192",
         "concurrency": "4", "speculative_algorithm": "EAGLE3",
         "speculative_draft_model_path": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "speculative_num_steps": "3",
         "speculative_eagle_topk": "1", "speculative_num_draft_tokens": "4"}
    page = client.get("/", q, follow=True).content.decode()
    assert "best --speculative-num-steps here" in page and "best num_speculative_tokens" not in page
    assert 'id="speedup-concurrency-table"' in page and "one column per --speculative-num-steps (k)" in page


def test_ngram_names_its_draft_tokens_flag_not_the_steps(client):
    """SGLang's NGRAM reads --speculative-num-draft-tokens (the root and the k proposals, k + 1; its NGRAM block
    sets only that one, default 12, and derives the steps from it: sglang==0.5.23
    sglang/srt/arg_groups/speculative_hook.py:1314-1330, 0.5.10.post1 server_args.py:3107-3112). The best-k
    warnings and the page name that flag with its value, never --speculative-num-steps, which NGRAM does not take."""
    q = {"model": LLAMA8, "gpu": "H100", "runtime": "sglang", "speculative_algorithm": "NGRAM",
         "speculative_num_draft_tokens": "4", "acceptance_rate": "0.3"}
    alone = client.get("/api/estimate", q | {"concurrency": "1"}).json()
    best = alone["best_num_speculative_tokens"]
    assert best and best != 3  # a deeper chain than the 3 proposals of 4 draft tokens pays alone
    assert f"--speculative-num-draft-tokens {best + 1} is predicted faster than 4 at concurrency 1" in alone["speed_warnings"]
    page = client.get("/", q | {"concurrency": "1"}, follow=True).content.decode()
    assert f'best --speculative-num-draft-tokens here <span id="spec-best-k">{best + 1}</span>' in page
    crowded = client.get("/api/estimate", q | {"concurrency": "64"}).json()
    assert crowded["best_num_speculative_tokens"] == 0
    # k from 1 to 8 searched (perf: max(8, k)), that is 2 to 9 draft tokens
    assert ("no --speculative-num-draft-tokens from 2 to 9 pays at concurrency 64: serving without speculation is "
            "predicted faster (best num_speculative_tokens 0)") in crowded["speed_warnings"]
    for body in (alone, crowded):
        assert not any("--speculative-num-steps" in w for w in body["speed_warnings"])
    speed = re.search(r'<section id="speed">.*?</section>', page, re.S).group(0)
    assert "--speculative-num-steps" not in speed and "--speculative-num-draft-tokens k + 1" in speed
