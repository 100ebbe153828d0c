"""Workers say what they can run (validator.capabilities): matching a configuration to live workers."""
from __future__ import annotations

import time

import pytest

from validator import capabilities


def worker(wid, hw, runtimes=("vllm",)):
    return {"worker_id": wid, "host": wid, "heartbeat": time.time(), "hardware": hw,
            "runtimes": {r: {"release": "0.32.0", "distribution": r} for r in runtimes}}


H100x2 = {"platform": "cuda", "devices": [{"index": i, "name": "NVIDIA H100 80GB HBM3",
                                           "memory_total_bytes": 85_520_809_984} for i in range(2)]}
CPU = {"platform": "cpu", "cpu_model": "AMD EPYC", "cpu_count": 2, "memory_total_bytes": 2**34}


def cfg(gpu, tp=1):
    return {"platform": "cpu" if gpu == "CPU" else "cuda", "engine_input": {"gpu": gpu, "tensor_parallel_size": tp}}


def test_a_gpu_configuration_needs_a_worker_with_enough_of_that_gpu():
    gpu_box, cpu_box = worker("gpu-box", H100x2), worker("cpu-box", CPU)
    assert capabilities.who_can_run(cfg("H100", 2), [cpu_box, gpu_box])["workers"] == ["gpu-box"]
    no = capabilities.who_can_run(cfg("H100", 4), [cpu_box, gpu_box])
    assert not no["ok"] and "4x NVIDIA H100 80GB HBM3" in no["message"]
    assert "cpu-box has no GPU" in no["message"] and "gpu-box has 2x NVIDIA H100" in no["message"]
    a100 = capabilities.who_can_run(cfg("A100-80GB"), [gpu_box])
    assert not a100["ok"] and "A100" in a100["message"]


def test_a_cpu_configuration_needs_a_cpu_worker_with_vllm():
    assert capabilities.who_can_run(cfg("CPU"), [worker("cpu-box", CPU)])["ok"]
    bare = capabilities.who_can_run(cfg("CPU"), [worker("cpu-box", CPU, runtimes=())])
    assert not bare["ok"] and "no vllm installed" in bare["message"]
    assert "no validation worker is running" in capabilities.who_can_run(cfg("CPU"), [])["message"]


@pytest.mark.django_db
def test_records_go_stale_without_a_heartbeat(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    info = capabilities.describe("w1")
    assert info["hardware"]["platform"] in ("cpu", "cuda") and "vllm" in info["runtimes"]
    capabilities.record(info)
    assert [w["worker_id"] for w in capabilities.live_workers()] == ["w1"]
    assert capabilities.live_workers(now=time.time() + capabilities.STALE_AFTER_S + 1) == []
    capabilities.forget("w1")
    assert capabilities.live_workers() == []


def test_two_workers_on_one_host_missing_the_same_hardware_say_it_once():
    # two worker processes on one CPU machine (the README's start and a second one): the reason is one sentence
    a, b = worker("vm", CPU), worker("vm", CPU)
    b["worker_id"] = "vm-2"
    no = capabilities.who_can_run(cfg("H100"), [a, b])
    assert not no["ok"] and no["message"].count("vm has no GPU") == 1
