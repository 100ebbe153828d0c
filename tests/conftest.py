"""Shared test fixtures. ``SHARED`` is ../shared beside the checkout: real configs and public vLLM logs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CONFIGS = SHARED / "data" / "model_configs"
CASES_FILE = SHARED / "cases" / "vllm_ground_truth.json"


def load_config(filename: str) -> dict:
    """A real config.json from ../shared/data/model_configs (``Qwen__Qwen3-8B.json``)."""
    return json.loads((CONFIGS / filename).read_text())


@pytest.fixture(scope="session")
def ground_truth() -> dict:
    return json.loads(CASES_FILE.read_text())


@pytest.fixture(autouse=True)
def _fresh_cache():
    """The product has one cache (Django's, around metadata and plans): every test starts with it empty."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def offline_hub(db, monkeypatch):
    """The Hub is never contacted (``HF_HUB_OFFLINE=1``): models come from the offline catalog through the metadata
    cache, a database table, so the test has the database. A module asks for it with
    ``pytestmark = pytest.mark.usefixtures("offline_hub")``, a test by naming it. (Django's cache is emptied for
    every test by ``_fresh_cache``.)"""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def no_calibration(settings, tmp_path):
    """No validation run's calibration installed before or after the test (the speed model's measured rows and the
    receiver's throttle state reset), with the runs' files in a temporary VAR_DIR."""
    from calculator.engine import perf
    from validator import calibration

    settings.VAR_DIR = tmp_path
    perf.reset_measured_efficiency()
    calibration._state.update(checked=0.0, applied=())
    yield
    perf.reset_measured_efficiency()
    calibration._state.update(checked=0.0, applied=())


@pytest.fixture
def worker_vllm_0_32(monkeypatch):
    """The worker's installed vLLM is 0.32.0 (the release a run's calibration records and is limited to), whether
    or not vLLM's CPU build is installed where the tests run."""
    from validator import capabilities

    real = capabilities.runtime_release
    monkeypatch.setattr(capabilities, "runtime_release", lambda runtime: "0.32.0" if runtime == "vllm" else real(runtime))
