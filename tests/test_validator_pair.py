"""The trained draft/target pair on this machine's CPU (vLLM 0.32's CPU build): acceptance measured from
vLLM's /metrics is real — between 0.2 and 0.95 — and differs by workload; a run stays under three minutes.
Slow: each run starts two vLLM servers (about 100 s on two cores)."""
from __future__ import annotations

import importlib.util
import json
import time

import pytest

from validator import workloads

needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                                reason="the worker extra (vLLM's CPU build) is not installed")


def test_the_pair_is_committed_small_and_a_llama_pair():
    target, draft = (workloads.pair_config(m) for m in (workloads.PAIR_TARGET, workloads.PAIR_DRAFT))
    assert target["architectures"] == draft["architectures"] == ["LlamaForCausalLM"]
    assert target["vocab_size"] == draft["vocab_size"]
    size = sum(p.stat().st_size for p in workloads.PAIR_DIR.rglob("*") if p.is_file())
    assert size < 8 * 2**20
    manifest = json.loads((workloads.PAIR_DIR / "MANIFEST.json").read_text())
    assert manifest["seed"] == 0
    # the draft is much smaller than the target
    assert manifest["models"]["draft"]["parameters"] * 10 < manifest["models"]["target"]["parameters"]


@needs_vllm
@pytest.mark.slow
@pytest.mark.django_db
def test_draft_model_acceptance_on_the_trained_pair_differs_by_workload(settings, tmp_path):
    from validator import runner
    from validator.bench import run_sequence
    from validator.config import build_configuration, fit_profile, predict

    settings.VAR_DIR = tmp_path
    rates = {}
    verdicts = {}
    for workload in ("code", "prose"):
        params = {"model": workloads.PAIR_TARGET, "gpu": "CPU", "validation_workload": workload,
                  "speculative_config": json.dumps({"method": "draft_model", "model": workloads.PAIR_DRAFT,
                                                    "num_speculative_tokens": 3})}
        configuration = build_configuration(params)
        prediction, _ = predict(configuration["engine_input"])
        fit_profile(configuration, prediction)
        t0 = time.monotonic()
        m = run_sequence(configuration, prediction, tmp_path / workload, lambda *a, **k: None,
                         runner.detect_hardware(), {"wall_clock_s": 600.0, "startup_timeout_s": 300.0,
                                                    "bench_timeout_s": 500.0, "stop_grace_s": 10.0})
        # wall time (the "under 3 minutes") is measured by benchmarks/validation_repeatability.py, not
        # asserted here: a loaded CI host must not fail a correctness test on time
        print(f"{workload}: run_sequence {time.monotonic() - t0:.0f} s")
        acc = m["acceptance"]
        assert acc["num_drafts"] > 0
        assert acc["acceptance_rate"] == pytest.approx(acc["num_accepted_tokens"] / acc["num_draft_tokens"])
        assert 0.2 <= acc["acceptance_rate"] <= 0.95, (workload, acc)
        assert m["verdict"]["verdict"] in ("keep", "disable", "inconclusive")
        # the run JSON (what `validate --format json` prints): the verdict, every difference's interval, the
        # acceptance from /metrics, and what ran (the padded target), said in the verdict too
        from validator import report
        from validator.models import ValidationRun

        run = ValidationRun.objects.create(configuration=configuration, status="done", measured=m)
        out = json.loads(json.dumps(report.summary(run)))
        assert out["verdict"]["verdict"] == m["verdict"]["verdict"]
        for d in out["differences"]:
            assert d["ci_low_pct"] is not None and d["ci_high_pct"] is not None, d["key"]
        assert out["acceptance"]["acceptance_rate"] == acc["acceptance_rate"]
        assert out["acceptance"]["mean_acceptance_length"] == pytest.approx(1 + acc["num_accepted_tokens"] / acc["num_drafts"])
        note = workloads.served_target_note(workloads.PAIR_TARGET)
        assert out["what_ran"]["what"] == note["what"] and m["verdict"]["headline"].endswith(note["short"])
        rates[workload] = acc["acceptance_rate"]
        verdicts[workload] = m["verdict"]["headline"]
    print(rates, verdicts)
    # the draft learnt code only: the target accepts more of its proposals on code than on prose
    assert rates["code"] > rates["prose"] + 0.05, rates


def test_the_parameter_counts_the_run_page_states_are_those_the_training_counted():
    """llama_parameters (from config.json) against the counts train_pair.py took from the models themselves
    (sum of numel over model.parameters(), in MANIFEST.json)."""
    manifest = json.loads((workloads.PAIR_DIR / "MANIFEST.json").read_text())
    for name, model_id in (("target", workloads.PAIR_TARGET), ("draft", workloads.PAIR_DRAFT)):
        cfg = json.loads((workloads.PAIR_MODELS[model_id] / "config.json").read_text())
        assert workloads.llama_parameters(cfg) == manifest["models"][name]["parameters"]
    note = workloads.served_target_note(workloads.PAIR_TARGET)
    assert note["trained_parameters"] == manifest["models"]["target"]["parameters"]
    assert workloads.served_target_note(workloads.PAIR_DRAFT) is None
    assert workloads.served_target_note("tiny-random/llama") is None


@pytest.mark.django_db
def test_the_run_page_and_the_presets_say_plainly_that_the_target_is_padded(client):
    from validator.models import ValidationRun
    from validator import stats

    note = workloads.served_target_note(workloads.PAIR_TARGET)
    pairs = [({"output_throughput": 100.0 + i, "median_ttft_ms": 400.0, "p95_e2el_ms": 1500.0},
              {"output_throughput": 150.0 + i, "median_ttft_ms": 300.0, "p95_e2el_ms": 1200.0}) for i in range(8)]
    v = stats.decide(pairs, {"acceptance_rate": 0.6, "mean_acceptance_length": 2.8}, 2**30, 64 * 2**30,
                     caveats=[note["short"]])
    run = ValidationRun.objects.create(
        configuration={"model_id": workloads.PAIR_TARGET, "run_model": workloads.PAIR_TARGET, "platform": "cpu",
                       "params": {"model": workloads.PAIR_TARGET}, "profile": {"repeats": 8}},
        status="done", measured={"verdict": v, "what_ran": note, "workload": "code"})
    import html as htmlmod

    html = htmlmod.unescape(" ".join(client.get(run.get_absolute_url()).content.decode().split()))
    verdict = html[html.index('id="verdict"'):html.index("<strong>Status:</strong>")]
    assert "Verdict: KEEP" in verdict and note["short"] in verdict  # in the verdict itself
    assert 'id="what-ran"' in verdict and "The target that ran is padded." in verdict
    assert f"{note['served_parameters'] / 1e6:.1f} M float32 parameters" in verdict and "Why: unpadded" in verdict
    html = client.get("/runs/presets").content.decode()
    assert 'id="what-ran"' in html and "The target that ran is padded." in html


def test_the_widened_target_computes_what_was_trained(tmp_path):
    """Zero down_proj columns add nothing: the served (padded) target's logits equal the trained target's,
    and it has the parameter count the run page states."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaForCausalLM

    wide = workloads.served_target(tmp_path)
    small = LlamaForCausalLM.from_pretrained(str(workloads.PAIR_MODELS[workloads.PAIR_TARGET]), dtype=torch.float32)
    big = LlamaForCausalLM.from_pretrained(str(wide), dtype=torch.float32)
    assert big.config.intermediate_size == workloads.SERVED_INTERMEDIATE > small.config.intermediate_size
    ids = torch.tensor([[1, 70, 80, 90, 100, 110, 120, 130]])
    with torch.no_grad():
        a, b = small(ids).logits, big(ids).logits
    assert torch.allclose(a, b, atol=1e-4)
    assert torch.equal(a.argmax(-1), b.argmax(-1))
    assert sum(p.numel() for p in big.parameters()) == workloads.served_target_note(workloads.PAIR_TARGET)["served_parameters"]
