"""Layer shapes beyond plain attention and Mamba, sized as vLLM sizes them (calculator/engine/layers.py): Gemma 4's
global layers, DeepSeek-V3.2's sparse MLA (fp8_ds_mla and the indexer's key cache) and Kimi Linear's KDA state.

Every expected value is worked out here by hand from the real config (its keys quoted in each test) and the
rule of the vLLM source named beside it; one Kimi Linear case is a public vLLM log (shared case gh-014).

Configs: google/gemma-4-26B-A4B, nvidia/Gemma-4-31B-IT-NVFP4 and deepseek-ai/DeepSeek-V3.2 from the offline
catalog (calculator/data/model_configs, SOURCES.md rows 68, 69, 72); moonshotai/Kimi-Linear-48B-A3B-Instruct
verbatim from a public model report quoting its config.json and weight list (public file id 62691149540; the
same config in a second copy, file id 54667546636), saved as tests/data/.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from calculator.engine import EngineInput, EngineInputError, estimate
from calculator.engine.arch import parse_config

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "calculator" / "data" / "model_configs"
GiB = 2**30


def catalog(name: str) -> dict:
    return json.loads((CATALOG / name).read_text())


GEMMA4_26B = "google__gemma-4-26B-A4B.json"
GEMMA4_31B = "nvidia__Gemma-4-31B-IT-NVFP4.json"
DSV32 = "deepseek-ai__DeepSeek-V3.2.json"


def kimi() -> dict:
    return json.loads((ROOT / "tests" / "data" / "moonshotai__Kimi-Linear-48B-A3B-Instruct.json").read_text())


# --- parameter counts -------------------------------------------------------------------------------------------

def test_gemma4_and_kimi_linear_parameter_counts():
    """Counted from config.json alone, against independent counts: transformers 5.19 on the meta device
    (Gemma4ForCausalLM built from text_config: 25,233,141,760 for 26B-A4B, 30,697,345,280 for 31B; the k_eq_v
    global layers have no v_proj, the MoE layers a dense MLP beside 128 experts) and the published weight list
    of Kimi-Linear-48B-A3B-Instruct (49,122,681,728 parameters in its 20 safetensors files)."""
    g26 = parse_config(catalog(GEMMA4_26B)).params
    assert g26.total - g26.vision == 25_233_141_760
    g31 = parse_config(catalog(GEMMA4_31B)).params
    assert g31.total - g31.vision == 30_697_345_280
    assert parse_config(kimi()).params.total == 49_122_681_728


# --- Gemma 4 ----------------------------------------------------------------------------------------------------

def test_gemma4_global_layers_have_their_own_heads():
    """google/gemma-4-26B-A4B text_config: 30 layers, every 6th full_attention (5 global, 25 sliding); head_dim 256,
    num_key_value_heads 8; global_head_dim 512, num_global_key_value_heads 2 with attention_k_eq_v; bf16.

    vLLM (gemma4.py:439-460 in 0.19, per_layer_config in 0.32) gives the global layers 2 KV heads of 512:
    per token, sliding 25 x 8 x 256 x 2 (K, V) x 2 B = 204,800 B, global 5 x 2 x 512 x 2 x 2 B = 20,480 B.
    16-token pages: sliding 16 x 8 x 512 x 2 = 131,072 B, global 65,536 B -> the global layers' block size doubles
    to 32 (unify_kv_cache_spec_page_size). Groups: 5 sliding groups of 5 layers + 1 global group (5 of each
    kind), so a block of the pool is 5 x 131,072 = 655,360 B; 20 GiB -> 32,768 blocks.
    One 131,072-token request in 0.32 (A100: 2,048 batched tokens, async scheduling reserves 2 batches):
    sliding groups cdiv(min(1023 + 2 x 2048, 131072), 16) + 1 = 321 blocks each, the global group
    cdiv(131072, 32) = 4,096; total 5 x 321 + 4,096 = 5,701 blocks."""
    r = estimate(EngineInput(hf_config=catalog(GEMMA4_26B), gpu="A100-80GB", vllm_version="0.32.0",
                             max_model_len=131072, max_num_batched_tokens=2048, kv_cache_memory_bytes=20 * GiB))
    assert r.kv_bytes_per_token == 25 * 8 * 256 * 2 * 2 + 5 * 2 * 512 * 2 * 2 == 225_280
    by_kind = {e.kind: e for e in r.kv_by_layer_type}
    assert (by_kind["sliding_window"].num_layers, by_kind["full_attention"].num_layers) == (25, 5)
    assert by_kind["full_attention"].detail.startswith("2 KV heads x 512")
    blocks = 20 * GiB // (5 * 131_072)
    assert r.num_gpu_blocks == blocks == 32_768
    per_request = 5 * (math.ceil((1023 + 2 * 2048) / 16) + 1) + 131072 // 32
    assert per_request == 5_701
    assert r.kv_cache_tokens == int(blocks / per_request * 131072)


def test_gemma4_31b_bytes_per_token_and_tp():
    """nvidia/Gemma-4-31B-IT-NVFP4 text_config: 60 layers (50 sliding, 10 global), 16 KV heads of 256 sliding,
    4 of 512 global (num_global_key_value_heads, attention_k_eq_v). Per token in bf16: 50 x 16 x 256 x 4 B +
    10 x 4 x 512 x 4 B = 819,200 + 81,920 = 901,120 B. At TP 8: sliding 16 / 8 = 2 heads a rank; the 4 global
    KV heads are replicated to 1 a rank (8 % 4 == 0): 50 x 2 x 256 x 4 + 10 x 1 x 512 x 4 = 122,880 B."""
    cfg = catalog(GEMMA4_31B)
    # the checkpoint's kv_cache_scheme makes auto fp8 (tests/test_checkpoint_kv_dtype.py): bf16 asked for here
    one = estimate(EngineInput(hf_config=cfg, gpu="H100", vllm_version="0.19.0", max_model_len=32768,
                               kv_cache_memory_bytes=10 * GiB, kv_cache_dtype="bfloat16"))
    assert one.kv_bytes_per_token == 901_120
    eight = estimate(EngineInput(hf_config=cfg, gpu="H100", vllm_version="0.19.0", max_model_len=32768,
                                 tensor_parallel_size=8, kv_cache_memory_bytes=10 * GiB, kv_cache_dtype="bfloat16"))
    assert eight.kv_bytes_per_token == 122_880


def test_gemma4_kv_shared_layers_keep_no_cache():
    """Gemma 4's last num_kv_shared_layers layers read an earlier layer's cache (kv_sharing_target_layer_name) and
    vLLM gives them no KV spec (gpu_model_runner.py:7161-7173 in 0.32). The 31B config with its last 12 layers
    shared: 48 layers keep a cache (40 sliding, 8 global): 40 x 16 x 256 x 4 + 8 x 4 x 512 x 4 = 720,896 B/token."""
    cfg = catalog(GEMMA4_31B)
    cfg["text_config"] = {**cfg["text_config"], "num_kv_shared_layers": 12}
    r = estimate(EngineInput(hf_config=cfg, gpu="H100", vllm_version="0.32.0", max_model_len=32768,
                             kv_cache_memory_bytes=10 * GiB, kv_cache_dtype="bfloat16"))
    assert r.kv_bytes_per_token == 40 * 16 * 256 * 4 + 8 * 4 * 512 * 4 == 720_896


def test_gemma4_on_a_release_without_it_is_still_sized():
    """Gemma 4 is in vLLM's model registry from 0.19.0 (registry.py:114, :385); 0.18.1 lacks the architecture, which
    is the verdict's to say (vLLM stops at start-up: tests/test_arch_verdict.py). The layers are sized from the config
    all the same: 25 sliding layers x 8 KV heads x 256 x 2 (K, V) x 2 B + 5 global x 2 x 512 x 2 x 2 B = 225,280 B
    per token, and the memory plan's sources say the release lacks the class."""
    r = estimate(EngineInput(hf_config=catalog(GEMMA4_26B), gpu="H100", vllm_version="0.18.1", max_model_len=8192,
                             kv_cache_memory_bytes=20 * GiB))
    assert r.kv_bytes_per_token == 25 * 8 * 256 * 2 * 2 + 5 * 2 * 512 * 2 * 2 == 225_280
    assert r.sources["architecture"].startswith("Gemma4ForConditionalGeneration is not in vLLM 0.18.1's registry "
                                                "(it is from 0.19.0: vllm/model_executor/models/registry.py:385")


def test_gemma4_without_global_head_dim_is_refused():
    """Without global_head_dim the global layers' head size depends on the installed transformers (vLLM 0.19 falls
    back to head_dim, transformers >= 5.6 to 512): refused, not guessed."""
    cfg = catalog(GEMMA4_26B)
    cfg["text_config"] = {k: v for k, v in cfg["text_config"].items() if k != "global_head_dim"}
    with pytest.raises(EngineInputError) as err:
        estimate(EngineInput(hf_config=cfg, gpu="H100", max_model_len=8192))
    assert err.value.field == "config.global_head_dim" and "transformers" in err.value.message


# --- DeepSeek-V3.2 sparse MLA -----------------------------------------------------------------------------------

def _v32(**kw):
    base = dict(hf_config=catalog(DSV32), gpu="H200", tensor_parallel_size=8, max_model_len=32768,
                kv_cache_memory_bytes=40 * GiB)
    return estimate(EngineInput(**{**base, **kw}))


@pytest.mark.parametrize("release,gpu,kv,backend,latent_bytes,fmt", [
    # 0.11.0: the model config turns auto and fp8 into fp8_ds_mla (models/config.py:403-424)
    ("0.11.0", "H200", "auto", "FLASHMLA_SPARSE", 656, "fp8_ds_mla"),
    # 0.11.1-0.17: only fp8 becomes fp8_ds_mla; auto is the bf16 latent, 576 x 2 B
    ("0.13.0", "H200", "auto", "FLASHMLA_SPARSE", 1152, "bfloat16"),
    ("0.13.0", "H200", "fp8", "FLASHMLA_SPARSE", 656, "fp8_ds_mla"),
    # 0.19+: FLASHMLA_SPARSE converts fp8 (mla_attention.py); on SM100 an fp8 cache picks FLASHINFER_MLA_SPARSE
    # first (cuda.py:63), which keeps standard fp8: 576 x 1 B
    ("0.32.0", "H200", "fp8", "FLASHMLA_SPARSE", 656, "fp8_ds_mla"),
    ("0.32.0", "B200", "fp8", "FLASHINFER_MLA_SPARSE", 576, "fp8"),
    # 0.25+: SM90 tries FLASH_ATTN_MLA_SPARSE first for a bf16 cache
    ("0.32.0", "H200", "auto", "FLASH_ATTN_MLA_SPARSE", 1152, "bfloat16"),
])
def test_sparse_mla_cache_format_per_release(release, gpu, kv, backend, latent_bytes, fmt):
    """deepseek-ai/DeepSeek-V3.2: 61 layers, kv_lora_rank 512 + qk_rope_head_dim 64 = a 576-wide latent, and in
    every layer the lightning indexer's keys: index_head_dim 128 fp8 + one float32 scale per 128 = 132 B
    (DeepseekV32IndexerCache, deepseek_v2.py:731-736). fp8_ds_mla packs 512 fp8 NoPE values, 4 float32 scales and
    64 bf16 RoPE values: 512 + 16 + 128 = 656 B. Per token: 61 x (latent + 132) B, replicated on every TP rank.
    Block size 64 on CUDA (the indexer's backend takes only 64)."""
    r = _v32(vllm_version=release, gpu=gpu, kv_cache_dtype=kv)
    assert 512 + 4 * 4 + 64 * 2 == 656
    assert r.resolved["attention_backend"] == backend
    assert r.resolved["kv_cache_format"] == fmt
    assert r.block_size == 64
    assert r.kv_bytes_per_token == 61 * (latent_bytes + 132)
    # one group of 122 specs (61 latent + 61 indexer pages): a block holds 64 tokens of every layer
    per_block = 64 * 61 * (latent_bytes + 132)
    blocks = 40 * GiB // per_block
    assert r.num_gpu_blocks == blocks
    per_request = 32768 // 64
    if tuple(map(int, release.split("."))) >= (0, 20, 1):  # int(concurrency x max_model_len) from 0.20.1
        assert r.kv_cache_tokens == int(blocks / per_request * 32768)
    else:  # num_blocks // groups x block_size before (one group here)
        assert r.kv_cache_tokens == blocks // 1 * 64


def test_sparse_mla_with_mtp_adds_the_draft_layers_indexer():
    """With --speculative-config method mtp, the MTP layer (num_nextn_predict_layers 1) is a full DeepSeek decoder
    layer: its latent and indexer caches join the pool, 62 x (656 + 132) B per token with fp8 on H200."""
    r = _v32(vllm_version="0.32.0", kv_cache_dtype="fp8",
             speculative_config={"method": "mtp", "num_speculative_tokens": 1})
    assert r.kv_bytes_per_token == 62 * (656 + 132)


def test_sparse_mla_indexer_weights_are_whole_on_every_rank():
    """vLLM builds the indexer replicated (ReplicatedLinear / disable_tp, deepseek_v2.py:703-720 in 0.32): at TP 8
    every GPU holds all 61 layers' indexers. Per layer: wq_b 1,536 x (64 heads x 128) fp8 with one float32 scale
    per 128 x 128 block, wk 7,168 x 128 and weights_proj 7,168 x 64 unquantized bf16 (fused since 0.20), k_norm
    2 x 128 float32. Against the same config without index_topk (no indexer), the weights grow by 61 x that."""
    cfg = catalog(DSV32)
    plain = {k: v for k, v in cfg.items() if not k.startswith("index_")}
    per_layer = 1536 * 64 * 128 * (1 + 4 / (128 * 128)) + 7168 * 128 * 2 + 7168 * 64 * 2 + 2 * 128 * 4
    with_indexer = _v32(vllm_version="0.32.0")
    without = estimate(EngineInput(hf_config=plain, gpu="H200", tensor_parallel_size=8, max_model_len=32768,
                                   kv_cache_memory_bytes=40 * GiB))
    assert with_indexer.weights_gib - without.weights_gib == pytest.approx(61 * per_layer / GiB, abs=0.011)


@pytest.mark.parametrize("kw,field,words", [
    (dict(vllm_version="0.10.2"), "vllm_version", "are not supported for now"),
    (dict(gpu="CPU", tensor_parallel_size=1), "gpu", "Sparse Attention is not supported on CPU."),
    (dict(gpu="A100-80GB"), "gpu", "no sparse MLA backend"),
    (dict(vllm_version="0.32.0", block_size=32), "block_size", "only --block-size 64"),
    # ROCm has its own sparse backend, ROCM_AITER_MLA_SPARSE (platforms/rocm.py:485-486 in 0.32): not sized, said so
    (dict(gpu="MI300X"), "gpu", "not modelled: vLLM runs DeepSeek sparse attention on ROCm with ROCM_AITER_MLA_SPARSE"),
])
def test_sparse_mla_refusals_carry_vllms_reason(kw, field, words):
    """DeepseekV32ForCausalLM is in the registry from 0.11.0 (registry.py:73); the CPU build refuses sparse
    attention (platforms/cpu.py:150 in 0.32: the message is vLLM's); Ampere has no sparse MLA backend; from 0.18 the
    indexer's backend takes only 64-token blocks (indexer.py:284-285 in 0.32)."""
    with pytest.raises(EngineInputError) as err:
        _v32(**kw)
    assert err.value.field == field and words in err.value.message


def test_sparse_mla_block_size_forced_before_018():
    """Before 0.18 the CUDA platform forces FLASHMLA_SPARSE's block size to 64 whatever --block-size says
    (platforms/cuda.py:229-233 in 0.11.1)."""
    r = _v32(vllm_version="0.13.0", block_size=16)
    assert r.block_size == 64


@pytest.mark.parametrize("release", ["0.13.0", "0.17.1", "0.19.0", "0.22.1", "0.25.1", "0.32.0", "0.33.0", "0.34.0"])
@pytest.mark.parametrize("gpu", ["H200", "B200"])
@pytest.mark.parametrize("kv", ["auto", "fp8"])
def test_sparse_backend_agrees_with_the_compat_check(release, gpu, kv, db):
    """The memory engine and the compatibility check (compat/checks.py, from each release's extracted backend
    data) pick the same sparse MLA backend for DeepSeek-V3.2 at TP 1 (heads per rank 128)."""
    from compat.checks import verdict_for

    r = _v32(vllm_version=release, gpu=gpu, kv_cache_dtype=kv, tensor_parallel_size=1, kv_cache_memory_bytes=GiB)
    report = verdict_for(catalog(DSV32), gpu, dtype="bfloat16", kv_cache_dtype=kv, vllm_version=release)
    assert report.ok is True
    assert r.resolved["attention_backend"] == report.auto_selected


# --- Kimi Linear (KDA) -------------------------------------------------------------------------------------------

def test_kimi_linear_public_log_gh014():
    """vllm-project/vllm issue 28228 (shared case gh-014): Kimi-Linear-48B-A3B (AWQ) on 2 x RTX 3090, TP 2,
    --max-model-len 120000, prefix caching on. The log's line numbers (kv_cache_utils.py:979, :1229, :1234) are
    those of vLLM 0.11.1. Logged: "Available KV cache memory: 2.30 GiB", "Add 1 padding layers, may waste at most
    5.00%", "GPU KV cache size: 75,840 tokens", "Maximum concurrency for 120,000 tokens per request: 2.48x".

    By hand, config linear_attn_config: 32 KDA heads of 128, short_conv_kernel_size 4; 20 KDA and 7 MLA layers.
    KDA state a rank (mamba_utils.py kda_state_shape/dtype, 0.11.1): 3 conv states of 3 x 4096/2 bf16 values =
    36,864 B + recurrent 16 x 128 x 128 float32 = 1,048,576 B -> 1,085,440 B. MLA: 576 x 2 = 1,152 B per token.
    The hybrid block (models/config.py:342-349 in 0.11.1, MLA alignment 64): 64 x cdiv(1,085,440, 64 x 1,152) =
    960 tokens, page 1,105,920 B. Groups: 7 MLA layers set the group size; 20 KDA layers -> 3 groups (7, 7, 6:
    one padding layer, 1/20 = 5%). A block of the pool: 7 x 1,105,920 = 7,741,440 B. A request: cdiv(120000, 960)
    = 125 MLA blocks + 1 state page per KDA group (no mamba_cache_mode before 0.15) = 128.
    2.30 GiB -> 319 blocks; the log's 0.11 formula logs 319 // 4 groups x 960 = 75,840 tokens (exact) and
    319 / 128 = 2.49x (the log rounds its 2.30 GiB: 318 blocks give the logged 2.48x and the same 75,840)."""
    r = estimate(EngineInput(hf_config=kimi(), gpu="RTX 3090", tensor_parallel_size=2, vllm_version="0.11.1",
                             max_model_len=120000, kv_cache_memory_bytes=int(2.30 * GiB)))
    state = 3 * 4096 // 2 * 3 * 2 + 16 * 128 * 128 * 4
    assert state == 1_085_440
    assert r.block_size == 64 * math.ceil(state / (64 * 1152)) == 960
    kda = next(e for e in r.kv_by_layer_type if e.kind == "mamba")
    assert kda.num_layers == 20 and kda.page_size_bytes == 960 * 1152
    blocks = int(2.30 * GiB) // (7 * 960 * 1152)
    assert r.num_gpu_blocks == blocks == 319
    assert r.kv_cache_tokens == blocks // 4 * 960 == 75_840
    assert r.max_concurrency == round(319 / 128, 2) == 2.49
    assert round(318 / 128, 2) == 2.48  # the logged figure: 2.30 GiB as logged is rounded to 2 decimals
    assert blocks / (math.ceil(120000 / 960) + 3) == pytest.approx(r.max_concurrency, abs=0.005)


def test_kimi_linear_032_state_and_alignment():
    """vLLM 0.32 on H100, TP 2: one conv state of 3 x 4096/2 channels over k - 1 = 3 positions in bf16
    (3 x 2048 x 3 x 2 B = 36,864 B, the bytes of 0.11's three conv states) + the float32 recurrent state
    16 x 128 x 128 x 4 B: 1,085,440 B per KDA layer (mamba_utils.py:304-327). The MLA hybrid block
    (platforms/interface.py:1061-1083): alignment max(block, 128) = 128, 128 x cdiv(1,085,440, 128 x 1,152) =
    1,024 tokens. Prefix caching is on by default from 0.28, so a KDA group holds 2 state pages a request
    (mamba_cache_mode align): 128 MLA blocks + 3 groups x 2."""
    r = estimate(EngineInput(hf_config=kimi(), gpu="H100", tensor_parallel_size=2, vllm_version="0.32.0",
                             max_model_len=131072, kv_cache_memory_bytes=4 * GiB))
    kda = next(e for e in r.kv_by_layer_type if e.kind == "mamba")
    assert kda.state_bytes_per_request == 20 * (3 * 2048 * 3 * 2 + 16 * 128 * 128 * 4)
    assert r.block_size == 128 * math.ceil(1_085_440 / (128 * 1152)) == 1024
    assert r.resolved["mamba_cache_mode"] == "align"
    blocks = 4 * GiB // (7 * 1024 * 1152)
    assert r.num_gpu_blocks == blocks
    per_request = math.ceil(131072 / 1024) + 3 * 2
    assert r.kv_cache_tokens == int(blocks / per_request * 131072)


@pytest.mark.parametrize("kw,field,words", [
    (dict(vllm_version="0.11.0"), "vllm_version", "are not supported for now"),
    (dict(gpu="CPU", tensor_parallel_size=1), "gpu", "No module named 'cutlass'"),
    (dict(tensor_parallel_size=3), "tensor_parallel_size", "divisible"),
])
def test_kimi_linear_refusals(kw, field, words):
    """KimiLinearForCausalLM is registered from 0.11.1 (registry.py:122); KDA needs a GPU; its 32 heads must split
    over TP."""
    base = dict(hf_config=kimi(), gpu="H100", tensor_parallel_size=2, max_model_len=8192)
    with pytest.raises(EngineInputError) as err:
        estimate(EngineInput(**{**base, **kw}))
    assert err.value.field == field and words in err.value.message
