"""An open loop of Poisson arrivals (``vllm bench serve --request-rate R``): the requests in flight by Little's law,
the run's output tok/s as vllm bench serve measures it, the queue at saturation on the server and in the client."""
from __future__ import annotations

import pytest

from calculator.engine import EngineInput, EngineInputError, perf
from tests.conftest import load_config


def _inp():
    return EngineInput(hf_config=load_config("meta-llama__Llama-3.1-8B-Instruct.json"), gpu="H100",
                       max_model_len=8192)


def test_a_low_rate_runs_one_request_at_a_time_and_sends_the_run_at_the_rate():
    """At 0.2 requests/s a 1024 + 128 token request (~1 s) is alone: TTFT and TPOT are the single request's; by
    Little's law 0.2 x its lifetime are in flight; vllm bench serve's output tok/s is N x 128 over the run, the last
    of N prompts sent at (N - 1) / 0.2 s and done one lifetime later."""
    one = perf.estimate_speed(_inp(), concurrency=1)
    r = perf.estimate_speed(_inp(), concurrency=1000, request_rate=0.2)
    assert (r.effective_concurrency, r.saturated, r.request_rate) == (1, False, 0.2)
    assert r.itl_ms == one.itl_ms
    # a Poisson arrival finds the server busy (another request in flight) with chance L = 0.2 x lifetime, then waits
    # half the step in progress and the step its prompt rides in: 1.5 TPOT
    alone_s = (one.ttft_ms + 127 * one.itl_ms) / 1e3
    busy = 0.2 * alone_s
    assert r.ttft_ms == pytest.approx(one.ttft_ms + busy * 1.5 * one.itl_ms, abs=0.002)
    life_s = (r.ttft_ms + 127 * r.itl_ms) / 1e3
    assert r.mean_in_flight == pytest.approx(0.2 * life_s, abs=0.005)
    assert r.output_tokens_per_s == pytest.approx(1000 * 128 / (999 / 0.2 + life_s), abs=0.06)
    few = perf.estimate_speed(_inp(), concurrency=1000, request_rate=0.2, num_prompts=10)
    assert few.output_tokens_per_s == pytest.approx(10 * 128 / (9 / 0.2 + life_s), abs=0.06)


def test_the_requests_in_flight_satisfy_littles_law_below_saturation():
    """At 10 requests/s the mean in flight is R x lifetime at the running count the model settles on (the smallest
    whole number of requests that holds it), and the figures are that closed-loop point's without a wave."""
    r = perf.estimate_speed(_inp(), concurrency=1000, request_rate=10.0)
    assert not r.saturated
    life_s = (r.ttft_ms + 127 * r.itl_ms) / 1e3
    assert r.mean_in_flight == pytest.approx(10.0 * life_s, rel=1e-3)
    assert r.effective_concurrency - 1 < r.mean_in_flight <= r.effective_concurrency
    slower = perf.estimate_speed(_inp(), concurrency=1000, request_rate=15.0)
    assert slower.mean_in_flight > r.mean_in_flight and slower.itl_ms > r.itl_ms


def test_the_speculative_server_has_its_own_requests_in_flight():
    """Under the same Poisson arrivals the speculative server's requests live shorter, so fewer are in flight (Little's
    law again, on its own TPOT and TTFT), and its TPOT is the one at that many running requests: the same as a closed
    loop of that many (estimated separately here); the speedup compares it with the plain server at the plain
    figure."""
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}
    inp = EngineInput(hf_config=load_config("meta-llama__Llama-3.1-8B-Instruct.json"), gpu="H100",
                      max_model_len=8192, speculative_config=spec)
    rate = 15.0
    plain = perf.estimate_speed(_inp(), concurrency=1000, request_rate=rate)
    r = perf.estimate_speed(inp, concurrency=1000, request_rate=rate, acceptance_rate=0.6)
    assert not plain.saturated and r.mean_in_flight == plain.mean_in_flight  # the plain server's L is kept
    sp = r.spec
    life_s = (sp.ttft_ms + 127 * sp.itl_ms) / 1e3
    assert sp.mean_in_flight == pytest.approx(rate * life_s, rel=2e-3)
    assert sp.mean_in_flight < plain.mean_in_flight
    n = -int(-sp.mean_in_flight // 1)  # the whole number of running requests that holds it
    closed = perf.estimate_speed(inp, concurrency=n, acceptance_rate=0.6).spec
    assert sp.itl_ms == pytest.approx(closed.itl_ms, rel=1e-3)
    assert sp.speedup == pytest.approx(plain.itl_ms / sp.itl_ms, rel=2e-3)
    fields = perf.result_fields(r)
    assert fields["mean_in_flight"] == sp.mean_in_flight and fields["itl_ms"] == pytest.approx(sp.itl_ms, rel=1e-2)


def test_a_saturated_server_queues_a_wait_that_grows_with_the_prompts():
    """Above what the server completes (mu = M running / lifetime), prompt i arrives at i / R and starts at i / mu:
    the mean TTFT grows by (N - 1) / 2 x (1 / mu - 1 / R). Two runs of 501 and 1001 prompts give mu from their TTFT
    difference; the same mu is M / lifetime of the steady point and sets the run's output tok/s."""
    rate, o = 60.0, 128
    a = perf.estimate_speed(_inp(), concurrency=501, num_prompts=501, request_rate=rate)
    b = perf.estimate_speed(_inp(), concurrency=1001, num_prompts=1001, request_rate=rate)
    assert a.saturated and b.saturated and a.effective_concurrency == b.effective_concurrency
    inv_mu = (b.ttft_ms - a.ttft_ms) / 1e3 / 250 + 1 / rate
    steady_ttft_ms = b.ttft_ms - 500 * (inv_mu - 1 / rate) * 1e3
    life_s = (steady_ttft_ms + (o - 1) * b.itl_ms) / 1e3
    assert 1 / inv_mu == pytest.approx(b.effective_concurrency / life_s, rel=2e-3)
    assert b.output_tokens_per_s == pytest.approx(1001 * o / (1000 * inv_mu + life_s), rel=2e-3)
    assert any(w.startswith("saturated: 60 requests/s") for w in b.warnings)


def test_a_client_cap_holds_the_queue_in_the_client_out_of_ttft():
    """With --max-concurrency 16 below the server's limit the rest wait in vllm bench serve's semaphore, which it
    leaves out of TTFT and which releases one as one finishes: the run is the closed loop of 16 (same TTFT and TPOT),
    its output tok/s what 16 running requests sustain, 16 / lifetime requests/s."""
    r = perf.estimate_speed(_inp(), concurrency=16, request_rate=200.0)
    closed = perf.estimate_speed(_inp(), concurrency=16)
    assert r.saturated and r.effective_concurrency == 16 and r.itl_ms == closed.itl_ms
    assert r.ttft_ms == closed.ttft_ms
    life_s = (r.ttft_ms + 127 * r.itl_ms) / 1e3
    assert r.output_tokens_per_s == pytest.approx(1000 * 128 / (999 * life_s / 16 + life_s), rel=1e-3)
    assert any("wait in the client" in w for w in r.warnings)


@pytest.mark.parametrize("rate", [0, -1.0, float("inf"), True])
def test_a_rate_that_is_not_positive_and_finite_is_refused(rate):
    with pytest.raises(EngineInputError) as err:
        perf.estimate_speed(_inp(), request_rate=rate)
    assert err.value.field == "request_rate"


@pytest.mark.django_db
def test_the_rate_reaches_the_api_the_command_line_and_the_page(client):
    from io import StringIO

    from django.core.management import call_command

    q = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "request_rate": "5", "num_prompts": "200"}
    body = client.get("/api/estimate", q).json()
    assert (body["request_rate"], body["saturated"]) == (5.0, False) and 4 < body["mean_in_flight"] < 8
    out = StringIO()
    call_command("estimate", "--model", q["model"], "--gpu", "H100", "--request-rate", "5", "--num-prompts", "200",
                 stdout=out)
    assert "5 requests/s, Poisson arrivals (--request-rate), 200 prompts" in out.getvalue()
    page = client.get("/", q, follow=True).content.decode()
    assert 'id="open-loop"' in page and "200 prompts" in page
    llama = client.get("/api/estimate", {"model": q["model"], "runtime": "llama.cpp", "gpu": "RTX 4090",
                                          "request_rate": "5"}).json()
    assert llama["speed_error"].startswith("request_rate: a request rate (Poisson arrivals) is modelled for vLLM and "
                                           "SGLang")


def test_a_run_whose_prompts_all_fit_at_once_does_not_queue():
    """50 requests/s over only 100 prompts, no --max-concurrency, room for ~396 on the server: all 100 can be in flight
    at once, so nothing waits (neither in the client nor on the server) and the run is not called saturated; the
    figures are those of 100 running requests without a wave."""
    r = perf.estimate_speed(_inp(), concurrency=100, num_prompts=100, request_rate=50.0)
    assert r.effective_concurrency == 100 and r.saturated is False
    assert not any("wait in the client" in w or w.startswith("saturated") for w in r.warnings)
    closed = perf.estimate_speed(_inp(), concurrency=100)
    assert r.itl_ms == closed.itl_ms and r.ttft_ms < closed.ttft_ms


@pytest.mark.django_db
def test_a_validation_run_refuses_a_request_rate_it_would_not_run():
    """The validator benchmarks closed loops (vllm bench serve --request-rate inf --max-concurrency C): a rate given
    to `validate` was dropped silently; it is refused by name (exit 2) while the calculator predicts it."""
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as err:
        call_command("validate", "--model", "tiny-random/llama", "--gpu", "CPU", "--max-model-len", "1024",
                     "--request-rate", "5", stdout=StringIO())
    assert str(err.value).startswith("--request-rate: a validation run benchmarks a closed loop")
    out = StringIO()
    call_command("estimate", "--model", "tiny-random/llama", "--gpu", "CPU", "--max-model-len", "1024",
                 "--request-rate", "5", "--format", "json", stdout=out)
    assert '"request_rate": 5.0' in out.getvalue()


@pytest.mark.django_db
def test_the_sglang_page_says_the_workload_its_speed_is_for(client):
    """The SGLang (and llama.cpp) answer's speed section names its workload as the vLLM page does: a request rate
    with its prompts and the requests in flight, or the concurrency."""
    q = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100", "runtime": "sglang"}
    page = client.get("/", q | {"request_rate": "20"}, HTTP_HX_REQUEST="true").content.decode()
    head = page[page.index('id="speed-workload"'):][:600]
    assert "prompt 1,024 tokens, output 128" in head and "20.0 requests/s, Poisson arrivals (--request-rate), 1,000 " \
        "prompts" in head and "in flight on average" in head
    closed = client.get("/", q | {"concurrency": "8"}, HTTP_HX_REQUEST="true").content.decode()
    assert "8 in flight" in closed[closed.index('id="speed-workload"'):][:400]
