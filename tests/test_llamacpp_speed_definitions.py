"""llama.cpp / Ollama speed answers on the same definitions as the vLLM / SGLang ones: output tok/s is
C x O / (TTFT + (O - 1) x TPOT) (the README's and vllm bench serve's, which the validator measures), speculation with
several slots is predicted (llama-server drafts and verifies every slot together), and a speculative slowdown gets
the vLLM / SGLang stop sign. Expected values are computed here by hand from the answer's own TTFT / ITL / step parts
and the acceptance rate, or from the draft model's speed answered on its own."""
from __future__ import annotations

import pytest

from calculator.engine.perf import SLOWDOWN_PREFIXES, closed_loop_tokens_per_s

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("offline_hub")]

SPEC = '{"method":"draft_model","model":"bartowski/Llama-3.2-1B-Instruct-GGUF","num_speculative_tokens":8}'
Q = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
     "runtime": "llama.cpp", "gpu": "RTX 3090", "max_model_len": "8192"}
DRAFT = {"model": "bartowski/Llama-3.2-1B-Instruct-GGUF", "gguf_file": "Llama-3.2-1B-Instruct-Q4_K_M.gguf",
         "runtime": "llama.cpp", "gpu": "RTX 3090", "max_model_len": "8192"}


def test_the_one_tokens_per_s_definition_by_hand():
    """4 requests, 128 output tokens, TTFT 100 ms, TPOT 10 ms: 4 x 128 / (0.1 + 127 x 0.01 s) = 512 / 1.37."""
    assert closed_loop_tokens_per_s(4, 128, 100.0, 10.0) == pytest.approx(373.7226277, rel=1e-9)
    assert closed_loop_tokens_per_s(1, 1, 250.0, 7.0) == pytest.approx(4.0, rel=1e-12)  # one token: 1 / 0.25 s


@pytest.mark.parametrize("extra", [{}, {"concurrency": "4", "parallel": "4"}])
def test_llamacpp_output_tokens_per_s_includes_the_prefill(client, extra):
    """The API's output tok/s is C x O / (TTFT + (O - 1) x ITL) over the answer's own TTFT and ITL (default
    workload: 1024 in, 128 out), not C x 1000 / ITL, which leaves the prefill out and so cannot be set against the
    benchmark's output_throughput (total output tokens / duration)."""
    body = client.get("/api/estimate", Q | extra).json()
    c = int(extra.get("concurrency", 1))
    assert body["speed"]["concurrency"] == c and body["speed"]["queue_ms"] == 0
    by_hand = c * 128 / ((body["ttft_ms"] + 127 * body["itl_ms"]) / 1e3)
    assert body["output_tokens_per_s"] == pytest.approx(by_hand, rel=1e-4)
    assert body["output_tokens_per_s"] < c * 1000 / body["itl_ms"]  # the prefill is in the denominator
    assert "TTFT + (output_len - 1) x ITL" in body["speed"]["sources"]["output_tokens_per_s"]


def test_ollama_output_tokens_per_s_same_definition(client):
    body = client.get("/api/estimate", Q | {"runtime": "ollama", "ctx_size": "8192"}).json()
    assert body["output_tokens_per_s"] == pytest.approx(
        128 / ((body["ttft_ms"] + 127 * body["itl_ms"]) / 1e3), rel=1e-4)


def test_speculation_with_four_slots_is_predicted(client):
    """-np 4 and 4 clients with a draft model (k = 8, llama.cpp's accept 0.6, so AL = 1 + 8 x 0.6 = 5.8 per slot):
    llama-server collects every drafting slot and drafts them in one common_speculative_draft call, one token per
    slot in each draft pass (server-context.cpp:2960-3028, speculative.cpp:308-412), then verifies every slot's
    sampled + drafted tokens in one target batch, which the draft evaluates too. So a draft pass is the draft
    model's own decode step at 4 sequences (its speed answered on its own, -np 4, 4 clients), and
    step = 8 x draft + draft re-evaluation + verify + 1.0 ms (the assumed per-step overhead)."""
    q = Q | {"speculative_config": SPEC, "acceptance_rate": "0.6", "parallel": "4", "concurrency": "4"}
    body = client.get("/api/estimate", q).json()
    assert body["speed_error"] is None and isinstance(body["speed_warnings"], list)
    sp = body["speed"]["spec"]
    assert sp["concurrency"] == 4 and body["mean_acceptance_length"] == pytest.approx(5.8, abs=1e-4)
    alone = client.get("/api/estimate", DRAFT | {"parallel": "4", "concurrency": "4"}).json()
    assert sp["draft_pass_ms"] == pytest.approx(alone["itl_ms"], abs=1e-3)
    step = 8 * sp["draft_pass_ms"] + sp["draft_reeval_ms"] + sp["verify_ms"] + 1.0
    assert sp["step_ms"] == pytest.approx(step, abs=1e-2)
    # the plain figures beside it are the same 4 slots' without drafts
    assert sp["baseline_itl_ms"] == pytest.approx(body["itl_ms"], abs=1e-3)
    assert body["itl_ms_spec"] == pytest.approx(step / 5.8, abs=2e-3)
    assert body["spec_speedup"] == pytest.approx(body["itl_ms"] / (step / 5.8), rel=2e-3)
    assert body["break_even_acceptance_rate"] == pytest.approx((step / body["itl_ms"] - 1) / 8, abs=1e-3)
    # output tok/s with speculation on the same definition, its TTFT the prompt on the target and on the draft
    assert sp["ttft_ms"] > body["ttft_ms"]
    assert body["output_tokens_per_s_spec"] == pytest.approx(
        4 * 128 / ((sp["ttft_ms"] + 127 * body["itl_ms_spec"]) / 1e3), rel=1e-3)
    assert "server-context.cpp:2960-3028" in sp["sources"]["spec.slots"]
    # four slots verify 4 x 9 tokens: a dearer pass than one slot's 9, so drafting pays less than at one slot
    one = client.get("/api/estimate", Q | {"speculative_config": SPEC, "acceptance_rate": "0.6"}).json()
    assert one["speed"]["spec"]["verify_ms"] < sp["verify_ms"] and one["spec_speedup"] > body["spec_speedup"]


def test_speculative_slowdown_gets_the_stop_sign(client):
    """accept 0.05 with k = 8: AL = 1 + 8 x 0.05 = 1.4 tokens for a step of 8 draft passes, a draft re-evaluation
    and a 9-token verification: slower than plain decoding. The answer says so in the words of the vLLM / SGLang stop
    sign (perf.slowdown_warnings), with the speedup shown (no range: the draft model has none) on the API, the CLI's
    warnings and the page; a paying acceptance (0.6) gets none."""
    q = Q | {"speculative_config": SPEC, "acceptance_rate": "0.05"}
    body = client.get("/api/estimate", q).json()
    sp = body["speed"]["spec"]
    speedup = body["itl_ms"] / (sp["step_ms"] / 1.4)
    assert speedup < 1 and body["spec_speedup"] == pytest.approx(speedup, rel=2e-3)
    stop = [w for w in body["speed_warnings"] if w.startswith(SLOWDOWN_PREFIXES)]
    assert stop == [f"stop sign: at acceptance length 1.40 speculation is predicted slower than plain decoding "
                    f"(speedup {speedup:.2f}x); the drafting and verification cost more than the accepted tokens repay"]
    html = client.get("/", q, follow=True).content.decode()
    assert "stop sign: at acceptance length 1.40" in html
    paying = client.get("/api/estimate", q | {"acceptance_rate": "0.6"}).json()
    assert paying["spec_speedup"] > 1 and not any(w.startswith(SLOWDOWN_PREFIXES) for w in paying["speed_warnings"])


def test_cli_speculation_with_slots(capsys):
    """The CLI answers the same request (-np 4, 4 clients, a draft) with a speed, exit 0."""
    import json

    from django.core.management import call_command

    call_command("estimate", "--model", Q["model"], "--gguf-file", Q["gguf_file"], "--runtime", "llama.cpp",
                 "--gpu", "RTX 3090", "--max-model-len", "8192", "--speculative-config", SPEC, "--parallel", "4",
                 "--concurrency", "4", "--acceptance-rate", "0.05", "--format", "json")
    body = json.loads(capsys.readouterr().out)
    assert body["speed_error"] is None and body["spec_speedup"] < 1
    assert any(w.startswith("stop sign: at acceptance length 1.40") for w in body["speed_warnings"])


def test_clients_beyond_the_slots_wait_for_one_with_speculation_too(client):
    """8 clients on -np 4 with a draft model: the 4 beyond the slots wait (8 / 4 - 1) x a request's speculative time
    in its slot (Little's law, as the plain answer's wait), so the speculative TTFT includes it like the plain one,
    and output tok/s (the 4 running slots') = 8 x 128 / (TTFT + 127 x ITL) with the clients and the waiting TTFT."""
    q = Q | {"speculative_config": SPEC, "acceptance_rate": "0.6", "parallel": "4"}
    four = client.get("/api/estimate", q | {"concurrency": "4"}).json()
    eight = client.get("/api/estimate", q | {"concurrency": "8"}).json()
    s4, s8 = four["speed"]["spec"], eight["speed"]["spec"]
    assert s8["concurrency"] == 4 and s8["itl_ms"] == pytest.approx(s4["itl_ms"], abs=1e-3)
    in_slot = s4["ttft_ms"] + 127 * s4["itl_ms"]
    assert s8["ttft_ms"] == pytest.approx(s4["ttft_ms"] + (8 / 4 - 1) * in_slot, rel=1e-3)
    assert eight["output_tokens_per_s_spec"] == pytest.approx(
        8 * 128 / ((s8["ttft_ms"] + 127 * s8["itl_ms"]) / 1e3), rel=2e-3)
    # the plain answer waits the same way: both TTFTs include the wait
    assert eight["ttft_ms"] > four["ttft_ms"] and s8["ttft_ms"] > s4["ttft_ms"]
