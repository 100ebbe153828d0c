"""NVFP4 (ModelOpt W4A4) checkpoints run FP4 tensor-core GEMMs on Blackwell (compute capability 10.0+): vLLM 0.32
tries its W4A4 kernels first and falls back to Marlin's weight-only W4A16 (bf16 compute) on older GPUs
(model_executor/kernels/linear/__init__.py:574-581). The peak is the datasheet's dense FP4 figure."""
from __future__ import annotations

import pytest

from calculator.engine import perf
from calculator.engine.gpus import get_gpu
from calculator.engine.weights import QuantScheme


NVFP4 = QuantScheme(name="nvfp4", bits=4, scale_bytes_per_weight=1 / 16, source="test: ModelOpt NVFP4")


def test_nvfp4_on_blackwell_runs_at_the_fp4_figure_and_on_hopper_at_bf16():
    # RTX PRO 6000 Blackwell: "4 PFLOPS FP4 AI" with sparsity -> 2,000 dense
    pro = perf.hardware(get_gpu("RTX PRO 6000"), NVFP4)
    assert pro.peak_flops == 2000e12 and pro.compute_dtype == "fp4" and "FP4" in pro.sources["tflops"]
    # B200: DGX B200's 144 PFLOPS FP4 (sparse, 8 GPUs) -> 9,000 dense per GPU
    assert perf.hardware(get_gpu("B200"), NVFP4).peak_flops == 9000e12
    # H100 (9.0): no FP4 tensor cores, Marlin W4A16 -> the BF16 figure
    h100 = perf.hardware(get_gpu("H100"), NVFP4)
    assert h100.compute_dtype == "bf16/fp16" and h100.peak_flops == get_gpu("H100").tflops_bf16 * 1e12
    # a Blackwell GPU without an FP4 figure in the catalog: FP8's, said to be a lower bound
    b300 = get_gpu("B300")
    assert b300.tflops_fp4 is None
    hw = perf.hardware(b300, NVFP4)
    assert hw.peak_flops == b300.tflops_fp8 * 1e12 and "a lower bound" in hw.sources["tflops"]


def test_fp8_checkpoints_keep_the_fp8_figure_on_blackwell():
    fp8 = QuantScheme(name="fp8", bits=8, source="test: fp8")
    assert perf.hardware(get_gpu("B200"), fp8).peak_flops == pytest.approx(4500e12)


@pytest.mark.django_db
def test_an_nvfp4_checkpoint_reaches_the_fp4_rate_through_the_api(client):
    q = {"model": "nvidia/Gemma-4-26B-A4B-NVFP4", "gpu": "RTX PRO 6000", "max_model_len": "8192"}
    blackwell = client.get("/api/estimate", q).json()
    assert blackwell["speed_sources"]["hardware.tflops"].startswith("2000 dense TFLOP/s FP4 (NVFP4 W4A4 GEMMs)")
    hopper = client.get("/api/estimate", q | {"gpu": "H100"}).json()
    assert "BF16/FP16" in hopper["speed_sources"]["hardware.tflops"]
