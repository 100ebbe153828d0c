"""The trained draft/target pair on this machine's CPU (vLLM 0.32's CPU build): acceptance measured from
vLLM's /metrics is real — between 0.2 and 0.95 — and differs by workload; a run stays under three minutes.
Slow: each run starts two vLLM servers (about 100 s on two cores)."""
from __future__ import annotations

import json
import time

import pytest

from validator import workloads

pytest.importorskip("vllm", reason="the worker extra (vLLM's CPU build) is not installed")


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
        assert time.monotonic() - t0 < 180
        acc = m["acceptance"]
        assert acc["num_drafts"] > 0
        assert acc["acceptance_rate"] == pytest.approx(acc["num_accepted_tokens"] / acc["num_draft_tokens"])
        assert 0.2 <= acc["acceptance_rate"] <= 0.95, (workload, acc)
        assert m["verdict"]["verdict"] in ("keep", "disable", "inconclusive")
        rates[workload] = acc["acceptance_rate"]
        verdicts[workload] = m["verdict"]["headline"]
    print(rates, verdicts)
    # the draft learnt code only: the target accepts more of its proposals on code than on prose
    assert rates["code"] > rates["prose"] + 0.05, rates


def test_the_widened_target_computes_what_was_trained(tmp_path):
    """Zero down_proj columns add nothing: the served (wide) target's logits equal the trained target's."""
    import torch
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
