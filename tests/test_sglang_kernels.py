"""SGLang's per-layer decode time as kernels x kernel_us: the counts of calculator/runtimes/sglang/kernels.py worked
out by hand from the module's rules and the configs, the triton split-KV tiles, the eager prefill pass and the prefill
passes that pause decoding (perf._separate_prefill_stall)."""
from __future__ import annotations

import math

import pytest

from calculator.engine import perf
from calculator.engine.arch import parse_config
from calculator.engine.gpus import get_gpu
from calculator.plan import make_plan
from calculator.request import parse_request
from calculator.runtimes import get_runtime
from calculator.runtimes.sglang.kernels import decode_kernels
from tests.conftest import load_config


pytestmark = pytest.mark.usefixtures("offline_hub")


def _count(model: str, gpu: str, tp: int, backend: str):
    cfg = load_config(model.replace("/", "__") + ".json")
    return decode_kernels(parse_config(cfg), backend=backend, capability=get_gpu(gpu).capability_tuple, tp=tp,
                          quant_config=cfg.get("quantization_config"), gpu_name=get_gpu(gpu).name)


def test_deepseek_r1_on_b200_tp8_counts_the_fused_paths():
    # all-reduce fusion (DeepseekV3, SM100, TP 8): no norm kernels; MLA with q_lora_rank: 10 kernels on trtllm_mla;
    # block FP8: +3 quantizations in attention. 58 of 61 layers are MoE (first_k_dense_replace 3): the fused
    # flashinfer_trtllm runner (4) + shared experts (4), +1 +2 quantizations; 3 dense MLPs (3), +2 quantizations
    k = _count("deepseek-ai/DeepSeek-R1", "B200", 8, "trtllm_mla")
    assert k.parts["norms"] == 0 and k.parts["attention"] == 10
    assert k.parts["ffn"] == pytest.approx((58 * 8 + 3 * 3) / 61)
    assert k.parts["fp8_quant"] == pytest.approx((61 * 3 + 58 * 3 + 3 * 2) / 61)
    assert k.per_layer == pytest.approx(10 + 473 / 61 + 363 / 61)  # 23.70
    assert k.triton_layers == 0


def test_a_dense_llama_on_a100_has_no_fusion():
    # Llama is not in the all-reduce fusion list (and A100 is SM80): 2 norms + qkv, rotary, cache store, attention,
    # o_proj + gate_up, act, down
    k = _count("meta-llama/Llama-3.1-70B", "A100", 8, "flashinfer")
    assert k.per_layer == 10 and k.parts == {"attention": 5, "ffn": 3, "norms": 2, "fp8_quant": 0}


def test_qwen3_moe_bf16_counts_qk_norm_the_triton_chain_and_fa3_combine():
    # Qwen3MoeForCausalLM: fused all-reduce on SM90/SM100; attention 5 + q/k norms 2; BF16 experts: Triton chain 7
    assert _count("Qwen/Qwen3-235B-A22B", "B200", 8, "trtllm_mha").per_layer == 14
    assert _count("Qwen/Qwen3-235B-A22B", "H100", 8, "fa3").per_layer == 15  # FA3's split-KV combine
    assert _count("Qwen/Qwen3-235B-A22B", "H20", 8, "fa3").per_layer == 17  # H20: no all-reduce fusion, 2 norms
    assert _count("Qwen/Qwen3-235B-A22B", "H100", 1, "fa3").per_layer == 17  # TP 1: no all-reduce to fuse into


def test_glm_4_7_flash_on_the_triton_backend_counts_its_tiles():
    # TP 1: 2 norms; MLA with q_lora_rank on triton: 10 + the reduce stage; 46 MoE layers (first_k_dense_replace 1):
    # Triton chain 7 + shared experts 4, one dense MLP 3
    k = _count("zai-org/GLM-4.7-Flash", "B200", 1, "triton")
    assert k.per_layer == pytest.approx(2 + 11 + (46 * 11 + 3) / 47)
    assert k.triton_layers == 47
    # ceil(ceil(ctx / 8 splits) / 32-token tiles)
    assert [perf.triton_decode_iterations(c) for c in (821, 2833, 4405, 256, 257)] == [4, 12, 18, 1, 2]


def _sglang_plan(model: str, gpu: str, tp: int, concurrency: int, prompt: int, output: int,
                 release: str = "0.5.7", **extra: str):
    req = parse_request({"model": model, "runtime": "sglang", "gpu": gpu, "tensor_parallel_size": str(tp),
                         "concurrency": str(concurrency), "prompt_len": str(prompt), "output_len": str(output),
                         "sglang_version": release, **extra})
    p = make_plan(req, None, with_speed=False, with_suggestions=False)
    return get_runtime("sglang")._speed_plan(req, p.model, p.memory)


def test_gpt_oss_decode_step_prices_nine_kernels_per_layer():
    # gpt-oss on B200 TP8: 9 kernels per layer (attention 5 on trtllm_mha, fused mxfp4 MoE 4, norms in the all-reduce)
    plan = _sglang_plan("openai/gpt-oss-120b", "B200", 8, 1, 332, 213)
    assert plan.layer_kernels == 9 and "trtllm_mha" in plan.kernels_note
    s = perf._setup(plan, "sglang")
    step = perf.step_cost(s.target, s.hw, requests=1, tokens_per_request=1, context=438)
    assert step.overhead_ms == pytest.approx(0.3 + 36 * 9 * 4.7e-3)  # step overhead + 36 layers x 9 x 4.7 us


def test_an_eager_prefill_takes_its_kernel_launches_when_they_exceed_the_gpu_time():
    # SGLang 0.5.7 (the release of the fitted runs) replays no graph for a prefill
    plan = _sglang_plan("openai/gpt-oss-120b", "B200", 8, 1, 332, 213)
    assert plan.prefill_graph_max_tokens == 0
    res = perf.estimate_speed_plan(plan, runtime="sglang", prompt_len=332, output_len=213, concurrency=1)
    launch_ms = 36 * 9 * 90e-3  # 29.16 ms of launches for one pass of 36 layers x 9 kernels
    gpu_ms = res.prefill.total_ms - res.prefill.overhead_ms
    assert gpu_ms < launch_ms
    assert res.prefill.total_ms == pytest.approx(launch_ms + 0.3, abs=1e-3)  # + one step overhead
    assert res.ttft_ms == pytest.approx(launch_ms + 0.3 + 20.0, abs=2e-3)  # + ttft_fixed_ms, no other prefill at c=1
    assert "prefill.launch" in res.sources and "decode.kernels" in res.sources


def test_prefill_passes_pause_decoding_with_poisson_batching():
    # 100 clients, 192-token outputs: a = 99 / 191 prompts arrive per decode step; a step is followed by a prefill
    # pass with chance 1 - exp(-a) batching a / chance prompts, each pass max(n x GPU time, 29.16 ms launches) + 0.3
    plan = _sglang_plan("openai/gpt-oss-120b", "B200", 8, 100, 297, 192)
    res = perf.estimate_speed_plan(plan, runtime="sglang", prompt_len=297, output_len=192, concurrency=100)
    a = 99 / 191
    chance = 1 - math.exp(-a)
    gpu_one = res.prefill.total_ms - res.prefill.overhead_ms
    stall = chance * (max(a / chance * gpu_one, 36 * 9 * 90e-3) + 0.3)
    assert stall == pytest.approx(0.4045 * 29.46, rel=2e-3)  # launch-bound: about 11.9 ms per decode step
    assert res.itl_ms == pytest.approx(res.decode.total_ms + stall, abs=2e-3)
    # vLLM mixes the prompts into the decode steps instead: no such pause
    assert perf.EFFICIENCY[("vllm", "*")].mixed_prefill and not perf.EFFICIENCY[("sglang", "*")].mixed_prefill


def test_from_0_5_10_a_short_prefill_replays_piecewise_graphs_and_launches_only_its_split_ops():
    # 0.5.10.post1: piecewise CUDA graphs on by default, up to the chunked prefill size (not an MLA model); with TP 8
    # each layer launches attention and its two all-reduces eagerly (90 us each) and replays its other 6 counted
    # kernels at 50 us each: 36 layers x (3 x 90 + 6 x 50) us = 20.52 ms, against 29.16 ms eager
    plan = _sglang_plan("openai/gpt-oss-120b", "B200", 8, 1, 332, 213, release="0.5.10.post1")
    assert plan.graph_split_ops_per_layer == 3 and plan.prefill_graph_max_tokens >= 332 and plan.layer_kernels == 9
    res = perf.estimate_speed_plan(plan, runtime="sglang", prompt_len=332, output_len=213, concurrency=1)
    gpu_ms = res.prefill.total_ms - res.prefill.overhead_ms
    assert gpu_ms < 20.52
    assert res.prefill.total_ms == pytest.approx(36 * (3 * 90 + 6 * 50) * 1e-3 + 0.3, abs=1e-3)
    assert "piecewise" in res.sources["prefill.launch"] and "50 us each" in res.sources["prefill.launch"]
    # an MLA model's passes are graphed up to 2048 tokens only (server_args.py: "to avoid the performance regression")
    r1 = _sglang_plan("deepseek-ai/DeepSeek-R1", "B200", 8, 1, 1000, 100, release="0.5.10.post1")
    assert r1.prefill_graph_max_tokens == 2048
    # speculative decoding turns them off (_handle_piecewise_cuda_graph)
    spec = _sglang_plan("deepseek-ai/DeepSeek-R1", "B200", 8, 1, 1000, 100, release="0.5.10.post1",
                        speculative_config='{"method":"mtp","num_speculative_tokens":3}')
    assert spec.prefill_graph_max_tokens == 0


def test_decode_batches_above_cuda_graph_max_bs_run_eagerly():
    # --cuda-graph-max-bs 4 with 8 running requests: the step takes the longer of its GPU time and the host's
    # launches of every kernel, 36 layers x 9 kernels x 90 us = 29.16 ms
    plan = _sglang_plan("openai/gpt-oss-120b", "B200", 8, 8, 332, 213, cuda_graph_max_bs="4")
    assert plan.decode_graph_max_bs == 4
    s = perf._setup(plan, "sglang")
    graphed = perf.step_cost(s.target, s.hw, requests=4, tokens_per_request=1, context=438)
    eager = perf.step_cost(s.target, s.hw, requests=8, tokens_per_request=1, context=438)
    assert graphed.total_ms < 29.16 and eager.total_ms == pytest.approx(29.16, abs=1e-6)



def test_a_dense_model_launches_its_eager_prefill_at_28_us_a_kernel_and_graphs_remove_it():
    """A model without experts: 28 us per counted kernel eagerly (perf.SGLANG_PREFILL_LAUNCH_DENSE_US, its three public
    runs), and from 0.5.10 only the split ops at that cost, the graphed kernels at 0 (sglang PR 13094's piecewise run
    lost its whole launch time). Llama-3.1-8B on one H100, 64-token prompt (a few ms of GPU work): 32 layers x
    kernels x 28 us eagerly; 32 x 1 split op (attention; no all-reduce at TP 1) x 28 us with the graphs, under the
    GPU time, so the pass is the GPU time."""
    eager = _sglang_plan("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 1, 64, 128, release="0.5.9")
    k = eager.layer_kernels
    res = perf.estimate_speed_plan(eager, runtime="sglang", prompt_len=64, output_len=128, concurrency=1)
    gpu_ms = res.prefill.total_ms - res.prefill.overhead_ms
    assert gpu_ms < 32 * k * 28e-3
    assert res.prefill.total_ms == pytest.approx(32 * k * 28e-3 + 0.3, abs=1e-3)
    assert "28 us (a model without experts" in res.sources["prefill.launch"]
    graphed = _sglang_plan("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 1, 64, 128, release="0.5.10.post1")
    assert graphed.graph_split_ops_per_layer == 1 and graphed.prefill_graph_max_tokens >= 64
    res = perf.estimate_speed_plan(graphed, runtime="sglang", prompt_len=64, output_len=128, concurrency=1)
    gpu_ms = res.prefill.total_ms - res.prefill.overhead_ms
    assert 32 * 1 * 28e-3 < gpu_ms and res.prefill.total_ms == pytest.approx(gpu_ms + 0.3, abs=1e-6)
