"""vLLM's per-release rules (calculator/engine/runtime.py RULES), each checked on both sides of the release
where it changes. The expected values are read from the releases' wheels (``pip download vllm==X --no-deps``);
each test names the file:line it was read from."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from calculator.engine import EngineInput, EngineInputError, estimate
from calculator.engine.runtime import (OLDEST_COVERED, RULE_NAMES, RULES, ReleaseRules, extensible_kv_budget,
                                       free_memory_check, graph_capture_fits, rule_rows)
from tests.conftest import load_config

GiB = 2**30


def R(v: str) -> ReleaseRules:
    return ReleaseRules.for_version(v)


# --- the table ----------------------------------------------------------------------------------------------
def test_every_rule_starts_at_the_oldest_release_and_rows_are_in_release_order():
    for name in RULE_NAMES:
        rows = rule_rows(name)
        assert rows[0].since == OLDEST_COVERED, name
        assert [r.since for r in rows] == sorted({r.since for r in rows}), name
    for r in RULES:  # every row cites a file:line in a named release
        assert re.search(r"\.py:\d+.*\(0\.\d+\.\d+", r.source), r


# --- which releases are modelled ----------------------------------------------------------------------------
def test_covered_releases():
    # 0.9.0 sizes the KV cache as total x u minus every allocation on the device, other processes' included
    # (vllm/v1/worker/gpu_worker.py:179-213, 0.9.0); 0.9.1 switches to requested - this process's non-KV
    # memory (gpu_worker.py:202-219, 0.9.1), which is what the engine models.
    assert not ReleaseRules.is_supported("0.9.0")
    assert ReleaseRules.is_supported("0.9.1")
    assert ReleaseRules.is_supported("0.33.4") and ReleaseRules.is_supported("0.34.0")
    assert ReleaseRules.is_supported("0.34.2")
    assert not ReleaseRules.is_supported("0.35.0")
    assert ReleaseRules.covered_releases == ("0.9.1", "0.34.x")


@pytest.mark.parametrize("version", ["0.8.5.post1", "0.9.0", "0.35.0"])
def test_estimate_refuses_releases_outside_the_range_by_name(version):
    with pytest.raises(EngineInputError) as err:
        estimate(EngineInput(hf_config=load_config("Qwen__Qwen3-8B.json"), vllm_version=version))
    assert err.value.field == "vllm_version"
    assert version.split(".post")[0] in err.value.message and "0.9.1 to 0.34.x" in err.value.message


# --- budget -------------------------------------------------------------------------------------------------
def test_default_gpu_memory_utilization():
    # vllm/config/cache.py:41 (0.19.1) default=0.9; vllm/config/cache.py:66 (0.20.0) default=0.92
    assert R("0.19.1").default_gpu_memory_utilization == 0.9
    assert R("0.20.0").default_gpu_memory_utilization == 0.92
    assert R("0.9.1").default_gpu_memory_utilization == 0.9  # vllm/config.py:1464 (0.9.1)


@pytest.mark.parametrize("version", ["0.20.0", "0.33.0", "0.34.0"])
def test_default_utilization_without_the_extensible_kv_cache_stays_0_92(version):
    # vllm/config/cache.py:215 (0.33.0) default=0.92; 0.34.0: :186 DEFAULT_GPU_MEMORY_UTILIZATION = 0.92, used by
    # resolved_gpu_memory_utilization (:495-501) when enable_extensible_kv_cache is off
    assert R(version).default_gpu_memory_utilization == 0.92
    assert R(version).default_utilization(extensible=False) == 0.92


def test_the_extensible_kv_cache_arrives_in_0_34():
    # 0.34.0 vllm/config/vllm.py:3201-3207 _resolve_extensible_kv_cache: unsupported off CUDA / ROCm and with
    # kv_cache_memory_bytes; :3252-3254 on where supported when unset. cache.py:495-501: utilization 1.0 with it.
    assert R("0.34.0").extensible_kv_cache("nvidia") and R("0.34.0").extensible_kv_cache("amd")
    assert not R("0.34.0").extensible_kv_cache("cpu") and not R("0.34.0").extensible_kv_cache("intel")
    assert not R("0.34.0").extensible_kv_cache("nvidia", kv_cache_memory_bytes=20 * GiB)
    assert R("0.34.0").default_utilization(extensible=True) == 1.0
    # no vllm/v1/worker/extensible_kv_cache.py in 0.33.0
    assert not R("0.33.0").extensible_kv_cache("nvidia")
    assert R("0.33.0").default_utilization(extensible=True) == 0.92


def test_extensible_kv_budget_by_hand():
    """measure_kv_cache_bytes (vllm/v1/worker/extensible_kv_cache.py:592-618 in 0.34.0), margin floor 1 GiB (3 GiB on
    ROCm) and fraction 0.75 (:64-65): available = min(requested - non_kv, headroom - margin) - peak, headroom =
    total - in use at start - non_kv."""
    kw = dict(total_bytes=80 * GiB, requested_bytes=80 * GiB, in_use_bytes=GiB // 2, non_kv_bytes=20 * GiB)
    # peak 2 GiB: margin max(1, 1.5) = 1.5; min(60, 80 - 0.5 - 20 - 1.5 = 58) - 2 = 56 GiB
    assert extensible_kv_budget(transient_peak_bytes=2 * GiB, **kw) == 56 * GiB
    # ROCm: margin max(3, 1.5) = 3; min(60, 56.5) - 2 = 54.5 GiB
    assert extensible_kv_budget(transient_peak_bytes=2 * GiB, rocm=True, **kw) == int(54.5 * GiB)
    # a small peak: the 1 GiB floor; min(60, 58.5) - 0.5 = 58 GiB
    assert extensible_kv_budget(transient_peak_bytes=GiB // 2, **kw) == 58 * GiB
    # an explicit utilization of 0.7 caps it: requested 56 GiB; min(36, 58) - 2 = 34 GiB
    capped = {**kw, "requested_bytes": 56 * GiB}
    assert extensible_kv_budget(transient_peak_bytes=2 * GiB, **capped) == 34 * GiB
    # never negative
    assert extensible_kv_budget(transient_peak_bytes=70 * GiB, **kw) == 0


def test_estimate_sizes_the_extensible_kv_cache_from_its_parts():
    """Qwen3-8B on an H100 at 0.34.0: the KV memory follows measure_kv_cache_bytes (extensible_kv_cache.py:592-618)
    from the estimate's own parts, with utilization 1.0 (cache.py:495-501), the in-use-at-start fit (0.61 GiB, public
    H100 logs 'Free memory on device: 78.57/79.18 GiB on startup') and 64-token blocks (cache.py:185); 36 layers x 8
    KV heads x 128 x 2 (K, V) x 2 B = 147,456 B a token (config.json)."""
    r = estimate(EngineInput(hf_config=load_config("Qwen__Qwen3-8B.json"), gpu="NVIDIA H100 80GB HBM3",
                             vllm_version="0.34.0"))
    assert r.resolved["gpu_memory_utilization"] == 1.0 and r.resolved["extensible_kv_cache"] is True
    assert r.requested_memory_gib == r.total_memory_gib and r.block_size == 64
    assert r.kv_bytes_per_token == 36 * 8 * 128 * 2 * 2
    non_kv = r.weights_gib + r.non_torch_gib + r.cuda_graph_gib
    peak = r.activation_peak_gib + r.cuda_graph_gib
    expected = min(r.requested_memory_gib - non_kv, r.total_memory_gib - 0.61 - non_kv - max(1, 0.75 * peak)) - peak
    assert r.available_kv_cache_gib == pytest.approx(expected, abs=0.03)
    capacity = r.requested_memory_gib - r.weights_gib - r.activation_peak_gib - r.non_torch_gib - r.cuda_graph_gib
    assert r.resolved["kv_cache_capacity_gib"] == pytest.approx(capacity, abs=0.03)
    assert r.num_gpu_blocks == int(r.available_kv_cache_gib * GiB) // (64 * 147_456) or \
        abs(r.num_gpu_blocks - r.available_kv_cache_gib * GiB / (64 * 147_456)) < 2
    # other processes' memory (--gpu-memory-in-use-gib) is measured too: 4 GiB less KV
    busy = estimate(EngineInput(hf_config=load_config("Qwen__Qwen3-8B.json"), gpu="NVIDIA H100 80GB HBM3",
                                vllm_version="0.34.0", gpu_memory_in_use_gib=4))
    assert busy.available_kv_cache_gib == pytest.approx(r.available_kv_cache_gib - 4, abs=0.02)
    # --kv-cache-memory-bytes turns it off (vllm/config/vllm.py:3203-3207): the given size, 0.92 default
    fixed = estimate(EngineInput(hf_config=load_config("Qwen__Qwen3-8B.json"), gpu="NVIDIA H100 80GB HBM3",
                                 vllm_version="0.34.0", kv_cache_memory_bytes=20 * GiB))
    assert fixed.resolved["extensible_kv_cache"] is False and fixed.available_kv_cache_gib == 20.0
    assert fixed.resolved["gpu_memory_utilization"] == 0.92


def test_requested_memory_is_rounded_up_from_0_14():
    total = 85_520_809_984  # an H100 80GB HBM3 as torch reports it (79.65 GiB)
    # vllm/v1/worker/gpu_worker.py:241 (0.13.0): total * u, a float
    assert R("0.13.0").requested_memory(total, 0.9) == pytest.approx(76_968_728_985.6)
    # vllm/v1/worker/utils.py:258 (0.14.1): math.ceil(total * u)
    assert R("0.14.1").requested_memory(total, 0.9) == 76_968_728_986


def test_free_memory_check_message_names_the_device_from_0_14():
    total, in_use = 80 * GiB, 10 * GiB  # 70 GiB free, 72 GiB requested at 0.9
    # vllm/v1/worker/gpu_worker.py:245-255 (0.13.0)
    ok, msg = free_memory_check(R("0.13.0"), total, in_use, 0.9)
    assert not ok
    assert msg == ("Free memory on device (70.0/80.0 GiB) on startup is less than desired GPU memory "
                   "utilization (0.9, 72.0 GiB). Decrease GPU memory utilization or reduce GPU memory used "
                   "by other processes.")
    # vllm/v1/worker/utils.py:263-271 (0.14.1)
    ok, msg = free_memory_check(R("0.14.1"), total, in_use, 0.9)
    assert msg.startswith("Free memory on device cuda:0 (70.0/80.0 GiB) on startup is less than")
    # exactly the requested memory free: accepted
    assert free_memory_check(R("0.14.1"), total, 8 * GiB, 0.9) == (True, None)


def test_the_extensible_kv_cache_skips_the_free_memory_check_in_0_34():
    total, in_use = 80 * GiB, 10 * GiB
    # vllm/v1/worker/utils.py:783-797 (0.34.0): "init_snapshot.free_memory < requested_memory and not
    # cache_config.enable_extensible_kv_cache" -> ValueError; with the extensible KV cache no check
    assert free_memory_check(R("0.34.0"), total, in_use, 0.9, extensible=True) == (True, None)
    ok, msg = free_memory_check(R("0.34.0"), total, in_use, 0.9)
    assert not ok and msg.startswith("Free memory on device cuda:0 (70.0/80.0 GiB) on startup is less than")
    # 0.33.0 has no extensible KV cache: the check stands (utils.py:761-770)
    assert not free_memory_check(R("0.33.0"), total, in_use, 0.9, extensible=True)[0]


def test_free_memory_check_matches_the_installed_vllm():
    """The message of vLLM's own ``request_memory`` (vllm/v1/worker/utils.py:716-771, the installed 0.32)."""
    utils = pytest.importorskip("vllm.v1.worker.utils")
    import vllm
    total, in_use, u = 85_520_809_984, 9_000_000_000, 0.92
    snap = SimpleNamespace(total_memory=total, free_memory=total - in_use, device_="cuda:0")
    with pytest.raises(ValueError) as err:
        utils.request_memory(snap, SimpleNamespace(gpu_memory_utilization=u))
    ok, msg = free_memory_check(R(vllm.__version__), total, in_use, u)
    assert not ok and msg == str(err.value)


# --- CUDA graphs --------------------------------------------------------------------------------------------
def test_cuda_graph_memory_by_release():
    # capture_model() after the KV cache is sized, nothing reserved: gpu_worker.py:407, :530 (0.17.1)
    assert R("0.17.1").cuda_graph_memory == "not budgeted"
    # profile_cudagraph_memory() runs, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to "0":
    # gpu_worker.py:397-416, envs.py:1636 (0.18.1); envs.py:1655 (0.19.1)
    assert R("0.18.1").cuda_graph_memory == R("0.19.1").cuda_graph_memory == "estimated, not deducted"
    assert not R("0.19.1").cuda_graph_memory_deducted
    # envs.py:1725 (0.20.0) defaults to "1"; gpu_worker.py:424 (0.20.0) subtracts it
    assert R("0.20.0").cuda_graph_memory_deducted


def test_graph_capture_must_fit_outside_the_budget_before_0_20():
    total = 80 * GiB
    requested = R("0.19.1").requested_memory(total, 0.9)  # 72 GiB: 8 GiB outside the budget
    fits, reason = graph_capture_fits(R("0.19.1"), int(8.5 * GiB), total, requested)
    assert not fits and "8.50 GiB" in reason and "8.00 GiB" in reason and "--enforce-eager" in reason
    assert graph_capture_fits(R("0.19.1"), int(7.5 * GiB), total, requested) == (True, None)
    # another process holding 1 GiB leaves 7 GiB
    assert not graph_capture_fits(R("0.19.1"), int(7.5 * GiB), total, requested, memory_in_use_bytes=GiB)[0]
    # --enforce-eager: no graphs
    assert graph_capture_fits(R("0.10.2"), 0, total, requested) == (True, None)
    # from 0.20.0 the estimate comes out of the KV budget, inside the requested memory
    assert graph_capture_fits(R("0.20.0"), int(8.5 * GiB), total, requested) == (True, None)


# --- capacity log -------------------------------------------------------------------------------------------
def test_kv_cache_tokens_log_formula_switches_at_0_20_1():
    # num_blocks // len(kv_cache_groups) * min_block_size: kv_cache_utils.py:1694-1698 (0.20.0)
    assert R("0.20.0").legacy_token_formula
    # int(max_concurrency * max_model_len): kv_cache_utils.py:1706 (0.20.1)
    assert not R("0.20.1").legacy_token_formula
    assert R("0.9.1").legacy_token_formula  # kv_cache_utils.py:713, :867-868 (0.9.1)


# --- profile run --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version,flashinfer", [
    ("0.11.0", True),   # topk_topp_sampler.py:46 (0.11.0): "VLLM_USE_FLASHINFER_SAMPLER is not False"
    ("0.11.1", False),  # topk_topp_sampler.py:34 (0.11.1): "if envs.VLLM_USE_FLASHINFER_SAMPLER:"
    ("0.20.2", False),  # envs.py:717-721 (0.20.2): unset -> None
    ("0.21.0", True),   # envs.py:726-733 (0.21.0): unset -> True
])
def test_sampler_warm_up_sorts_the_logits_only_where_flashinfer_is_opt_in(version, flashinfer):
    assert R(version).flashinfer_sampler_default is flashinfer
    assert R(version).heavy_sampler_profile is (not flashinfer)


def test_estimate_uses_the_light_sampler_profile_again_from_0_21():
    cfg = load_config("meta-llama__Llama-3.1-8B-Instruct.json")
    a = estimate(EngineInput(hf_config=cfg, gpu="NVIDIA H100 80GB HBM3", vllm_version="0.20.2",
                             gpu_memory_utilization=0.9))
    b = estimate(EngineInput(hf_config=cfg, gpu="NVIDIA H100 80GB HBM3", vllm_version="0.21.0",
                             gpu_memory_utilization=0.9))
    assert b.activation_peak_gib < a.activation_peak_gib
    assert b.available_kv_cache_gib > a.available_kv_cache_gib


# --- KV specs -----------------------------------------------------------------------------------------------
def test_v2_model_runner_default():
    # VLLM_USE_V2_MODEL_RUNNER defaults to "0": envs.py:1711-1712 (0.21.0)
    assert not R("0.21.0").uses_v2_model_runner(("Qwen3ForCausalLM",))
    # DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES = {"Qwen3ForCausalLM"}, not MoE:
    # config/vllm.py:69, :518-533 (0.22.1)
    assert R("0.22.1").uses_v2_model_runner(("Qwen3ForCausalLM",))
    assert not R("0.22.1").uses_v2_model_runner(("LlamaForCausalLM",))
    # listed or not MoE, never hybrid: config/vllm.py:557-574 (0.25.1)
    assert R("0.25.1").uses_v2_model_runner(("LlamaForCausalLM",))
    assert not R("0.25.1").uses_v2_model_runner(("MixtralForCausalLM",), is_moe=True)
    assert not R("0.26.0").uses_v2_model_runner(("Qwen2MoeForCausalLM",), is_moe=True, is_hybrid=True)
    # every model: config/vllm.py:645-676 (0.29.0)
    assert R("0.29.0").uses_v2_model_runner(("MixtralForCausalLM",), is_moe=True)
    # the only GPU model runner: gpu_worker.py:579-587 (0.34.0) builds vllm/v1/worker/gpu/model_runner.py's
    assert R("0.34.0").value("v2_model_runner_default") == "only"
    assert R("0.34.0").uses_v2_model_runner(("Qwen2MoeForCausalLM",), is_moe=True, is_hybrid=True)


def test_sliding_window_reserves_in_flight_batches_from_0_26():
    # sliding_window - 1 + max_num_batched_tokens: kv_cache_interface.py:561 (0.25.1)
    assert R("0.25.1").max_concurrent_batches(1, False) == 1
    assert R("0.25.1").max_concurrent_batches(2, False) == 1
    # max_in_flight_tokens = max_concurrent_batches * max_num_batched_tokens: kv_cache_interface.py:523,
    # config/vllm.py:512-532 (0.26.0): async scheduling -> 2 at pp=1; V2 -> pp + 1; V1 with pp > 1 -> pp
    assert R("0.26.0").max_concurrent_batches(1, False) == 2
    assert R("0.26.0").max_concurrent_batches(2, False, architectures=("LlamaForCausalLM",)) == 3
    mixtral = dict(architectures=("MixtralForCausalLM",), is_moe=True)
    assert R("0.26.0").max_concurrent_batches(2, False, **mixtral) == 2
    # CPU: async scheduling off (platforms/cpu.py:144, 0.26.0) -> pp
    assert R("0.26.0").max_concurrent_batches(1, True) == 1
    # 0.34.0 config/vllm.py:560-566: async scheduling -> pp + 1, whatever the model (no V1 runner left)
    assert R("0.34.0").max_concurrent_batches(1, False) == 2
    assert R("0.34.0").max_concurrent_batches(2, False, **mixtral) == 3
    assert R("0.34.0").max_concurrent_batches(1, True) == 1  # platforms/cpu.py:347 (0.34.0)


def test_mamba_cache_mode_and_hybrid_prefix_caching():
    # prefix caching off by default for hybrids: arg_utils.py:2519-2522 (0.26.0; same in 0.27.1)
    assert R("0.27.1").mamba_cache_mode() == "none"
    # on from 0.28: config/model.py:2072-2074, models/config.py:602-604 (0.28.0) -> "align"
    assert R("0.28.0").mamba_cache_mode() == "align"
    # no mamba_cache_mode before 0.15; align exists from vllm/config/cache.py:127 (0.15.1)
    assert R("0.14.1").mamba_cache_mode(prefix_caching=True) == "none"
    assert R("0.15.1").mamba_cache_mode(prefix_caching=True) == "align"


def test_estimate_resolves_the_mamba_mode_of_the_release():
    cfg = load_config("Qwen__Qwen3-Next-80B-A3B-Instruct.json")
    kw = dict(hf_config=cfg, gpu="NVIDIA H200", tensor_parallel_size=2, max_model_len=32768)
    assert estimate(EngineInput(vllm_version="0.27.1", **kw)).resolved["mamba_cache_mode"] == "none"
    assert estimate(EngineInput(vllm_version="0.28.0", **kw)).resolved["mamba_cache_mode"] == "align"


# --- defaults of vllm serve ---------------------------------------------------------------------------------
def test_batch_defaults():
    # >= 160 GiB tier: vllm/engine/arg_utils.py:2582-2601 (0.28.0), absent in 0.27.1
    assert R("0.27.1").batch_defaults(178.36, "NVIDIA B200", False) == (8192, 1024)
    assert R("0.28.0").batch_defaults(178.36, "NVIDIA B200", False) == (16384, 1024)
    # GB10 (capability 12.1) excluded from the 70 GiB tier: arg_utils.py:2963, :2983-2986 (0.33.0)
    assert R("0.32.0").batch_defaults(119.7, "NVIDIA GB10", False, capability=(12, 1)) == (8192, 1024)
    assert R("0.33.0").batch_defaults(119.7, "NVIDIA GB10", False, capability=(12, 1)) == (2048, 256)
    # unchanged in 0.34.0: arg_utils.py:3000, :3010-3043 (the same tiers), CPU :3066-3074
    assert R("0.34.0").batch_defaults(119.7, "NVIDIA GB10", False, capability=(12, 1)) == (2048, 256)
    assert R("0.34.0").batch_defaults(178.36, "NVIDIA B200", False) == (16384, 1024)
    assert R("0.34.0").batch_defaults(79.19, "NVIDIA H100 80GB HBM3", False) == (8192, 1024)
    assert R("0.34.0").batch_defaults(64, "CPU", True, world_size=2) == (4096, 256)
    # A100 stays on the small tier: arg_utils.py:1554 (0.9.1)
    assert R("0.9.1").batch_defaults(79.15, "NVIDIA A100-SXM4-80GB", False) == (2048, 256)
    # CPU: 2048 * ws / 128 * ws from arg_utils.py:1621-1630 (0.10.0); no CPU branch in 0.9.1
    assert R("0.10.0").batch_defaults(64, "CPU", True, world_size=2) == (4096, 256)
    with pytest.raises(EngineInputError):
        R("0.9.1").batch_defaults(64, "CPU", True)


@pytest.mark.parametrize("version,capability,qk_nope,kv_fp8,expected", [
    ("0.17.1", (9, 0), 128, False, 64),    # FLASHMLA forced: platforms/cuda.py:214-262 (0.17.1)
    ("0.18.1", (9, 0), 128, False, 16),    # backend preference: platforms/interface.py:427 (0.18.1)
    ("0.18.1", (9, 0), 128, True, 64),     # FLASHMLA first for an fp8 KV cache on Hopper (0.32 order)
    ("0.10.0", (10, 0), 128, False, 16),   # Blackwell: no default MLA backend (platforms/cuda.py:155-161)
    ("0.10.2", (10, 0), 128, False, 128),  # CUTLASS_MLA forced on Blackwell (platforms/cuda.py:152-179)
    ("0.15.1", (10, 0), 128, False, 64),   # FLASHINFER_MLA when qk_nope_head_dim == 128 (cuda.py:186-230)
    ("0.15.1", (10, 0), 64, False, 128),   # else CUTLASS_MLA (cuda.py:186-230, 0.15.1)
    ("0.15.1", (8, 0), 128, False, 16),    # A100: no FlashMLA, default 16
    ("0.33.0", (10, 0), 128, False, 32),   # FLASHINFER_MLA [32, 64] (mla/flashinfer_mla.py:205), default 16
    ("0.34.0", (10, 0), 128, False, 64),   # default 64 (cache.py:185), which FLASHINFER_MLA takes
    ("0.34.0", (9, 0), 128, False, 64),    # FLASH_ATTN_MLA MultipleOf(16) (mla/flashattn_mla.py:50) keeps 64
    ("0.34.0", (8, 0), 128, False, 64),    # TRITON_MLA MultipleOf(16) (mla/triton_mla.py:127) keeps 64
])
def test_mla_default_block_size(version, capability, qk_nope, kv_fp8, expected):
    bs, _ = R(version).default_block_size(False, True, capability, kv_fp8, None, qk_nope)
    assert bs == expected


@pytest.mark.parametrize("version,backend,rocm,expected", [
    ("0.33.0", None, False, 16),            # CacheConfig.DEFAULT_BLOCK_SIZE 16: vllm/config/cache.py:185 (0.33.0)
    ("0.34.0", None, False, 64),            # 64: vllm/config/cache.py:185 (0.34.0), FLASH_ATTN MultipleOf(16)
    ("0.34.0", "FLASHINFER", False, 64),    # flashinfer.py:587-606 (0.34.0): [16, 32, 64] at least
    ("0.34.0", "TRITON_ATTN", False, 64),   # triton_attn.py:339-340 (0.34.0): MultipleOf(16)
    ("0.34.0", None, True, 16),             # ROCM_ATTN first (rocm.py:559-562), prefers 16 (rocm_attn.py:167-172)
    ("0.34.0", "ROCM_AITER_FA", True, 16),  # kernel blocks [16, 32] (rocm_aiter_fa.py:873-874): the smallest
    ("0.34.0", "ROCM_AITER_UNIFIED_ATTN", True, 64),  # rocm_aiter_unified_attn.py:78-79 returns 64
    ("0.33.0", None, True, 16),
])
def test_default_block_size_becomes_64_in_0_34(version, backend, rocm, expected):
    bs, why = R(version).default_block_size(False, False, (9, 0), False, backend, rocm=rocm)
    assert bs == expected


def test_cutlass_mla_keeps_128_in_0_34():
    # mla/cutlass_mla.py:50 (0.34.0) get_supported_kernel_block_sizes -> [128]: 64 is not taken, the smallest is 128
    assert R("0.34.0").default_block_size(False, True, (10, 0), False, "CUTLASS_MLA")[0] == 128


def test_estimate_uses_the_release_block_size_for_mla():
    cfg = load_config("deepseek-ai__DeepSeek-V2-Lite.json")
    kw = dict(hf_config=cfg, gpu="NVIDIA H100 80GB HBM3", max_model_len=8192)
    assert estimate(EngineInput(vllm_version="0.17.1", **kw)).block_size == 64
    assert estimate(EngineInput(vllm_version="0.19.0", **kw)).block_size == 16


def test_memory_snapshot_moves_after_distributed_init_in_0_11():
    # gpu_worker.py:175 before :193 (0.10.2); :169 before :182 (0.11.0)
    assert R("0.10.2").value("snapshot_after_distributed_init") is False
    assert R("0.11.0").value("snapshot_after_distributed_init") is True


def test_releases_md_lists_every_rule_row():
    from pathlib import Path

    import calculator.engine.runtime as runtime
    text = (Path(runtime.__file__).parent / "RELEASES.md").read_text()
    for r in RULES:
        assert f"| `{r.rule}` | {'.'.join(map(str, r.since))} |" in text, r


def test_default_flashinfer_sampler_falls_back_on_unsupported_gpus():
    # FlashInferBackend.supports_compute_capability: 7.5-12.1 in flashinfer.py:409-412 (0.21.0),
    # 8.0-12.1 in flashinfer.py:426-434 (0.24.0); outside, topk_topp_sampler.py:39-65 (0.21.0) uses the
    # PyTorch-native sampler, which sorts the logits
    assert R("0.21.0").sampler_sorts_logits((7, 0))       # V100
    assert not R("0.21.0").sampler_sorts_logits((7, 5))   # T4
    assert R("0.24.0").sampler_sorts_logits((7, 5))
    assert not R("0.24.0").sampler_sorts_logits((9, 0))
    assert not R("0.24.0").sampler_sorts_logits((7, 0), uses_v2=True)  # gpu/model_runner.py:576-580 (0.22.1)
    assert R("0.19.0").sampler_sorts_logits((9, 0))       # opt-in: always the native sampler


def test_cpu_default_block_size():
    # 128 if intel_extension_for_pytorch else 16: platforms/cpu.py:148 (0.11.0); 128: cpu.py:185 (0.11.1)
    bs, why = R("0.11.0").default_block_size(True, False, None, False, None)
    assert bs == 128 and "intel_extension_for_pytorch" in why
    assert R("0.11.1").default_block_size(True, False, None, False, None) == (128, "CPU default (vLLM 0.11.1 "
                                                                                "platforms/cpu.py)")
    # MLA forced to 16 on the CPU: platforms/cpu.py:137-147 (0.28.0); no MLA case in 0.27.1
    assert R("0.27.1").default_block_size(True, True, None, False, None)[0] == 128
    assert R("0.28.0").default_block_size(True, True, None, False, None)[0] == 16
