"""``--enforce-eager`` on a GPU: the speed model's vLLM efficiency is fitted on runs with vLLM's default CUDA graphs
(no public record sets --enforce-eager), so an eager answer says its speed figures assume graphs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
SHARED = Path(__file__).resolve().parents[2] / "shared"


pytestmark = pytest.mark.usefixtures("offline_hub", "no_calibration")


def _warnings(client, **params) -> list[str]:
    body = client.get("/api/estimate", {"model": LLAMA, "gpu": "H100", "max_model_len": "8192", **params}).json()
    assert body["speed_error"] is None
    return body["speed_warnings"]


def test_an_eager_answer_on_a_gpu_says_the_speed_assumes_cuda_graphs(client):
    eager = [w for w in _warnings(client, enforce_eager="true") if w.startswith("--enforce-eager:")]
    assert len(eager) == 1
    assert "assume CUDA graphs" in eager[0] and "not modelled" in eager[0]
    assert not any(w.startswith("--enforce-eager:") for w in _warnings(client))


def test_the_page_shows_it_too(client):
    page = client.get("/", {"model": LLAMA, "gpu": "H100", "max_model_len": "8192", "enforce_eager": "true"},
                      follow=True)
    assert page.status_code == 200 and "--enforce-eager: the speed figures assume CUDA graphs" in page.content.decode()


def test_vllms_cpu_build_gets_no_such_warning(client):
    """The CPU row was fitted on --enforce-eager runs (the validator serves the CPU build eager)."""
    body = client.get("/api/estimate", {"model": "tiny-random/llama", "gpu": "cpu", "max_model_len": "512",
                                        "enforce_eager": "true"}).json()
    assert not any(w.startswith("--enforce-eager:") for w in body.get("speed_warnings") or [])


def test_an_eager_calibration_is_measured_eager_so_it_needs_no_warning():
    from calculator.engine import perf
    from calculator.plan import make_plan
    from calculator.request import parse_request
    from calculator.runtimes import get_runtime

    request = parse_request({"model": LLAMA, "gpu": "H100", "max_model_len": "8192", "enforce_eager": "true"})
    plan = make_plan(request)
    release, path = perf.calibration_scope(get_runtime("vllm").engine_input(request, plan.model))
    assert path["enforce_eager"] is True  # the scope a validation run of this request records
    from dataclasses import replace

    measured = replace(perf.get_efficiency("H100"), label="calibrated", source="a validation run with --enforce-eager")
    perf.install_calibration("H100", measured, perf.CalibrationScope.of(release, path))
    speed = get_runtime("vllm").speed(request, plan.model, plan.memory)
    assert speed.efficiency_label == "calibrated"
    assert not any(w.startswith("--enforce-eager:") for w in speed.warnings)


def test_no_public_run_the_vllm_row_is_fitted_on_sets_enforce_eager():
    """The warning's claim, read from the public records themselves."""
    path = SHARED / "cases" / "serving_speed_benchmarks.json"
    if not path.exists():
        pytest.skip(f"{path} not present")
    records = [r for r in json.loads(path.read_text())["records"] if r.get("runtime") == "vLLM"]
    assert records
    assert not any("eager" in json.dumps(r).lower() for r in records)
