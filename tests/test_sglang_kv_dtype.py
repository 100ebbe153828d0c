"""What SGLang's ``--kv-cache-dtype auto`` stores the KV cache in for a quantized checkpoint, per release
(calculator/runtimes/sglang/kv_dtype.py), with the bytes per token computed by hand from each config.

Every expectation below is read from the release's own source (the wheel; lines in releases._CKPT_KV_LINES):

- 0.4.3.post4 / 0.4.10.post2: ``auto`` is the model dtype (model_runner.py:641 / :1080);
- 0.5.3 / 0.5.3.post1: the runner reads ``quant_config.kv_cache_quant_algo`` (model_runner.py:1397 / :1421), but
  ``ModelOptFp8Config`` stores the checkpoint's KV algorithm as ``kv_cache_quant_method`` (modelopt_quant.py:107):
  a ModelOpt FP8 checkpoint keeps a bf16 KV cache; ``ModelOptFp4Config`` stores ``kv_cache_quant_algo`` (:527);
- 0.5.7 on: both store ``ModelOptQuantConfig.kv_cache_quant_algo`` (modelopt_quant.py:175 in 0.5.7);
- 0.5.3 / 0.4.10.post2 load an NVFP4 hf_quant_config.json with ModelOptFp8Config ("modelopt"), which raises unless
  ``--quantization modelopt_fp4``;
- the model class must keep ``self.quant_config`` (Qwen3.5 does not in 0.5.9: qwen3_5.py);
- 0.5.23 adds compressed-tensors' static per-tensor FP8 ``kv_cache_scheme`` (compressed_tensors.py:143).
"""
from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path

import pytest

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import get_gpu
from calculator.runtimes.sglang import releases as R
from calculator.runtimes.sglang.data.extract_quant_config_holders import holders
from calculator.runtimes.sglang.kv_dtype import checkpoint_kv, quant_config_holder
from calculator.runtimes.sglang.memory import plan
from calculator.runtimes.sglang.releases import COVERED
from tests.conftest import CONFIGS, load_config

CATALOG = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"
WHEELS = Path("/work/wheels")
GIB = 1 << 30


def _catalog(name: str) -> tuple[dict, dict | None]:
    extra = CATALOG / "extra" / f"{name}__hf_quant_config.json"
    return (json.loads((CATALOG / f"{name}.json").read_text()),
            json.loads(extra.read_text()) if extra.exists() else None)


def _mha_cell(layers: int, kv_heads: int, head_dim: int, tp: int, elem: int) -> int:
    """MHATokenToKVPool's bytes per token on one rank: K and V of max(1, kv_heads // tp) heads per layer."""
    return max(1, kv_heads // tp) * 2 * head_dim * layers * elem


# ---------------------------------------------------------------------------------------------------------
# nvidia/Llama-3.1-70B-Instruct-FP8 (../shared/data): hf_quant_config.json {"quantization": {"quant_algo": "FP8",
# "kv_cache_quant_algo": "FP8"}}; no quantization_config in config.json. 80 layers, 8 KV heads of 128, TP 4.

_LLAMA_BF16 = _mha_cell(80, 8, 128, 4, 2)  # 2 x 2 x 128 x 80 x 2 = 81,920 B
_LLAMA_FP8 = _mha_cell(80, 8, 128, 4, 1)   # 40,960 B


@pytest.mark.parametrize("release,dtype,cell", [
    ("0.4.3.post4", "bfloat16", _LLAMA_BF16),   # auto is the model dtype (model_runner.py:641)
    ("0.4.10.post2", "bfloat16", _LLAMA_BF16),  # model_runner.py:1080
    ("0.5.3", "bfloat16", _LLAMA_BF16),         # ModelOptFp8Config keeps kv_cache_quant_method (modelopt_quant.py:107)
    ("0.5.3.post1", "bfloat16", _LLAMA_BF16),   # the same (modelopt_fp8 from hf_quant_config.json, model_config.py:517)
    ("0.5.7", "fp8_e4m3", _LLAMA_FP8),          # ModelOptQuantConfig.kv_cache_quant_algo (modelopt_quant.py:175)
    ("0.5.8.post1", "fp8_e4m3", _LLAMA_FP8),
    ("0.5.9", "fp8_e4m3", _LLAMA_FP8),
    ("0.5.10.post1", "fp8_e4m3", _LLAMA_FP8),
    ("0.5.23", "fp8_e4m3", _LLAMA_FP8),         # mem_cache/kv_cache_dtype.py:49
])
def test_llama_3_1_70b_fp8_kv_bytes_per_token_per_release(release, dtype, cell):
    cfg = load_config("nvidia__Llama-3.1-70B-Instruct-FP8.json")
    qc = json.loads((CONFIGS / "extra" / "nvidia__Llama-3.1-70B-Instruct-FP8__hf_quant_config.json").read_text())
    p = plan(cfg, gpu=get_gpu("H100"), release=release, tp_size=4, quant_config=qc, free_memory_before_load_gib=78.0,
             weights_bytes=17 * GIB)
    assert (p.kv_cache_dtype, p.cell_size_bytes) == (dtype, cell)
    assert p.does_not_start is None
    src = p.source_of("kv_cache_dtype").source
    assert R.cite(release, "kv_auto") in src
    ignored = [n for n in p.notes if "declares an FP8 KV cache" in n]
    if dtype == "bfloat16":
        # the user is told the checkpoint's FP8 KV is not used on this release, and why
        assert len(ignored) == 1 and "stays in bfloat16" in ignored[0] and "--kv-cache-dtype fp8_e4m3" in ignored[0]
        if release in ("0.5.3", "0.5.3.post1"):
            assert "kv_cache_quant_method" in ignored[0] and "modelopt_quant.py:107" in ignored[0]
    else:
        assert not ignored and "modelopt_quant.py" in src and "llama.py" in src  # the class and the holder


def test_explicit_kv_cache_dtype_is_kept_whatever_the_checkpoint_declares():
    cfg = load_config("nvidia__Llama-3.1-70B-Instruct-FP8.json")
    qc = json.loads((CONFIGS / "extra" / "nvidia__Llama-3.1-70B-Instruct-FP8__hf_quant_config.json").read_text())
    for release, kv, cell in (("0.5.3", "fp8_e4m3", _LLAMA_FP8), ("0.5.23", "bfloat16", _LLAMA_BF16)):
        p = plan(cfg, gpu=get_gpu("H100"), release=release, tp_size=4, quant_config=qc, kv_cache_dtype=kv)
        assert (p.kv_cache_dtype, p.cell_size_bytes) == (kv, cell)
        assert p.source_of("kv_cache_dtype").kind == "input"


# ---------------------------------------------------------------------------------------------------------
# nvidia/Qwen3-32B-NVFP4 (offline catalog): hf_quant_config.json only, quant_algo NVFP4, kv_cache_quant_algo FP8.
# 64 layers, 8 KV heads of 128; TP 8 on B200: one head per rank.

_Q32_BF16 = _mha_cell(64, 8, 128, 8, 2)  # 32,768 B
_Q32_FP8 = _mha_cell(64, 8, 128, 8, 1)   # 16,384 B


def test_nvfp4_hf_quant_config_per_release():
    cfg, qc = _catalog("nvidia__Qwen3-32B-NVFP4")
    kw = {"gpu": get_gpu("B200"), "tp_size": 8, "quant_config": qc}
    # 0.4.10.post2 and 0.5.3 map hf_quant_config.json to "modelopt" (model_config.py:389 / :525), i.e.
    # ModelOptFp8Config, which raises on NVFP4 (modelopt_quant.py:110 / :173): SGLang does not start
    for release, line in (("0.4.10.post2", "modelopt_quant.py:110"), ("0.5.3", "modelopt_quant.py:173")):
        p = plan(cfg, release=release, **kw)
        assert p.does_not_start is not None and line in p.does_not_start
        assert "--quantization modelopt_fp4" in p.does_not_start
    # with --quantization modelopt_fp4 (compatible with "modelopt", model_config.py:561): 0.4.10.post2 keeps bf16 KV
    # (its runner reads no quant config), 0.5.3 reads ModelOptFp4Config.kv_cache_quant_algo FP8 (modelopt_quant.py:618)
    old = plan(cfg, release="0.4.10.post2", quantization="modelopt_fp4", **kw)
    assert (old.does_not_start, old.kv_cache_dtype, old.cell_size_bytes) == (None, "bfloat16", _Q32_BF16)
    new = plan(cfg, release="0.5.3", quantization="modelopt_fp4", **kw)
    assert (new.does_not_start, new.kv_cache_dtype, new.cell_size_bytes) == (None, "fp8_e4m3", _Q32_FP8)
    # from 0.5.3.post1 hf_quant_config.json's NVFP4 selects modelopt_fp4 itself (model_config.py:517 and on)
    for release in COVERED[3:]:
        p = plan(cfg, release=release, **kw)
        assert (p.does_not_start, p.kv_cache_dtype, p.cell_size_bytes) == (None, "fp8_e4m3", _Q32_FP8), release
        assert "ModelOptFp4Config" in p.source_of("kv_cache_dtype").source


def test_flat_modelopt_fp8_reads_only_kv_cache_scheme_until_0_5_23():
    """config.json's flat ModelOpt block: ModelOptFp8Config reads kv_cache_scheme only (modelopt_quant.py:263 in 0.5.7,
    :449 in 0.5.10.post1); 0.5.23 falls back to kv_cache_quant_algo when there is no scheme (:490). A flat block with
    only kv_cache_quant_algo "FP8" keeps bf16 KV up to 0.5.10.post1. 0.5.3.post1 registers no "modelopt" method
    (quantization/__init__.py:75): SGLang stops with "Unknown quantization method" (model_config.py:612); 0.4.10.post2's
    ModelOptFp8Config needs the nested block (modelopt_quant.py:102)."""
    cfg = load_config("nvidia__Llama-3.1-70B-Instruct-FP8.json")
    by_key = {**cfg, "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8",
                                             "kv_cache_quant_algo": "FP8"}}
    by_scheme = {**cfg, "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8",
                                                "kv_cache_scheme": {"num_bits": 8, "type": "float",
                                                                    "dynamic": False}}}
    kw = {"gpu": get_gpu("H100"), "tp_size": 4}
    expect_key = {"0.5.3": _LLAMA_BF16, "0.5.7": _LLAMA_BF16, "0.5.8.post1": _LLAMA_BF16, "0.5.9": _LLAMA_BF16,
                  "0.5.10.post1": _LLAMA_BF16, "0.5.23": _LLAMA_FP8}
    expect_scheme = {"0.5.3": _LLAMA_BF16, "0.5.7": _LLAMA_FP8, "0.5.8.post1": _LLAMA_FP8, "0.5.9": _LLAMA_FP8,
                     "0.5.10.post1": _LLAMA_FP8, "0.5.23": _LLAMA_FP8}
    for release in expect_key:
        a, b = plan(by_key, release=release, **kw), plan(by_scheme, release=release, **kw)
        assert (a.does_not_start, a.cell_size_bytes) == (None, expect_key[release]), release
        assert (b.does_not_start, b.cell_size_bytes) == (None, expect_scheme[release]), release
    refused = plan(by_scheme, release="0.5.3.post1", **kw)
    assert "Unknown quantization method: modelopt" in refused.does_not_start
    assert "model_config.py:612" in refused.does_not_start
    old = plan(by_scheme, release="0.4.10.post2", **kw)
    assert "modelopt_quant.py:102" in old.does_not_start



@pytest.mark.parametrize("quantization,algo,cls,line", [
    (None, "FP8", "ModelOptFp8Config", "modelopt_quant.py:102"),
    ("modelopt_fp4", "NVFP4", "ModelOptFp4Config", "modelopt_quant.py:483"),
])
def test_0_4_10_post2_modelopt_needs_the_nested_block(quantization, algo, cls, line):
    """0.4.10.post2: both ModelOpt classes' from_config call ``cls.get_from_keys(config, ["quantization"])``
    (modelopt_quant.py:102 in ModelOptFp8Config, :483 in ModelOptFp4Config), which raises ``ValueError(f"Cannot find
    any of {keys} in the model's quantization config.")`` (base_config.py:170) when config.json's flat block has no
    nested ``quantization`` dict: SGLang does not start, whichever class reads it."""
    cfg = load_config("nvidia__Llama-3.1-70B-Instruct-FP8.json")
    flat = {**cfg, "quantization_config": {"quant_method": "modelopt", "quant_algo": algo}}
    p = plan(flat, release="0.4.10.post2", gpu=get_gpu("H100"), tp_size=4,
             **({"quantization": quantization} if quantization else {}))
    assert p.does_not_start is not None
    assert f"{cls} needs hf_quant_config.json's nested 'quantization' block" in p.does_not_start
    assert "Cannot find any of ['quantization'] in the model's quantization config" in p.does_not_start
    assert f"sglang==0.4.10.post2 sglang/srt/layers/quantization/{line}" in p.does_not_start

def test_qwen3_5_nvfp4_kv_follows_the_model_class_holding_quant_config():
    """nvidia/Qwen3.5-397B-A17B-NVFP4: config.json quantization_config {quant_method modelopt, quant_algo NVFP4,
    kv_cache_scheme float 8}. 15 full-attention layers of 60 (full_attention_interval 4), 2 KV heads of 256, TP 8:
    one head per rank, 1 x 2 x 256 x 15 = 7,680 elements per token.

    - 0.5.9: Qwen3_5MoeForConditionalGeneration (qwen3_5.py) and Qwen3VLForConditionalGeneration set no
      self.quant_config, so getattr(self.model, "quant_config", None) is None (model_runner.py:1670): bf16, 15,360 B;
      and config.json's quant_method "modelopt" selects ModelOptFp8Config (renamed only without a quant_method,
      model_config.py:653), so it starts only with --quantization modelopt_fp4 (said in a note);
    - 0.5.10.post1: renamed modelopt_fp4 (model_config.py:699), the class keeps quant_config (qwen3_vl.py:1076):
      fp8, 7,680 B; 0.5.23 the same (qwen3_vl.py:1324)."""
    cfg, qc = _catalog("nvidia__Qwen3.5-397B-A17B-NVFP4")
    kw = {"gpu": get_gpu("B200"), "tp_size": 8, "quant_config": qc}
    cell = 1 * 2 * 256 * 15
    p = plan(cfg, release="0.5.9", **kw)
    assert (p.kv_cache_dtype, p.cell_size_bytes) == ("bfloat16", cell * 2)
    note = next(n for n in p.notes if "declares an FP8 KV cache" in n)
    assert "Qwen3_5MoeForConditionalGeneration keeps no self.quant_config" in note
    assert "--quantization modelopt_fp4" in note
    assert quant_config_holder("0.5.9", "Qwen3_5MoeForConditionalGeneration")[0] == "none"
    for release, at in (("0.5.10.post1", "qwen3_vl.py:1076"), ("0.5.23", "qwen3_vl.py:1324")):
        p = plan(cfg, release=release, **kw)
        assert (p.kv_cache_dtype, p.cell_size_bytes) == ("fp8_e4m3", cell), release
        assert at in p.source_of("kv_cache_dtype").source
        assert not [n for n in p.notes if "declares an FP8 KV cache" in n]


def test_compressed_tensors_kv_scheme_counts_from_0_5_23_only():
    """CompressedTensorsConfig.kv_cache_quant_algo exists from 0.5.23 (compressed_tensors.py:143): FP8 for a static,
    symmetric, per-tensor float8 kv_cache_scheme (:1276); a dynamic or per-token one is ignored. Up to 0.5.10.post1 the
    class has no such attribute: bf16. Qwen3-8B (36 layers, 8 KV heads of 128), one GPU."""
    cfg = load_config("Qwen__Qwen3-8B.json")
    scheme = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
    ct = {"quant_method": "compressed-tensors", "format": "float-quantized", "kv_cache_scheme": scheme,
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                                           "strategy": "channel"}}}}
    with_ct = {**cfg, "quantization_config": ct}
    bf16, fp8 = _mha_cell(36, 8, 128, 1, 2), _mha_cell(36, 8, 128, 1, 1)
    assert plan(with_ct, gpu=get_gpu("H100"), release="0.5.23").cell_size_bytes == fp8
    old = plan(with_ct, gpu=get_gpu("H100"), release="0.5.10.post1")
    assert old.cell_size_bytes == bf16
    assert any("CompressedTensorsConfig has no kv_cache_quant_algo" in n for n in old.notes)
    dynamic = copy.deepcopy(with_ct)
    dynamic["quantization_config"]["kv_cache_scheme"]["strategy"] = "token"
    assert plan(dynamic, gpu=get_gpu("H100"), release="0.5.23").cell_size_bytes == bf16


def test_dsa_kv_dtype_is_set_by_server_args_whatever_the_checkpoint():
    """DeepSeek-V3.2-NVFP4 declares kv_cache_quant_algo FP8 (hf_quant_config.json), but DSA's ServerArgs decides:
    0.5.7 to 0.5.10.post1 turn auto into bfloat16 below SM100 (server_args.py:1065 in 0.5.7, :1430 in 0.5.10.post1)
    and fp8_e4m3 from SM100; an explicit bf16 is kept from 0.5.7 (only auto is replaced), fp8_e5m2 is refused by the
    assert (:1072 in 0.5.7). 0.5.3 forces fp8_e4m3 from SM100 whatever is asked (:830)."""
    v32 = json.loads((CATALOG / "deepseek-ai__DeepSeek-V3.2.json").read_text())
    _, qc = _catalog("nvidia__DeepSeek-V3.2-NVFP4")
    assert v32["kv_lora_rank"] == 512 and qc["quantization"]["kv_cache_quant_algo"] == "FP8"
    h = plan(v32, gpu=get_gpu("H200"), release="0.5.10.post1", tp_size=8, quant_config=qc)
    assert h.kv_cache_dtype == "bfloat16" and "server_args.py:1430" in h.source_of("kv_cache_dtype").source
    # bf16 rows (512 + 64) x 2 B + the indexer's 128 + 4 B, 61 layers (every rank whole under DP attention)
    assert h.cell_size_bytes == ((512 + 64) * 2 + 128 + 4) * 61
    b = plan(v32, gpu=get_gpu("B200"), release="0.5.7", tp_size=8, kv_cache_dtype="bf16")
    assert b.kv_cache_dtype == "bfloat16" and b.source_of("kv_cache_dtype").kind == "input"
    with pytest.raises(EngineInputError) as err:
        plan(v32, gpu=get_gpu("B200"), release="0.5.7", tp_size=8, kv_cache_dtype="fp8_e5m2")
    assert err.value.field == "kv_cache_dtype" and "server_args.py:1072" in err.value.message
    forced = plan(v32, gpu=get_gpu("B200"), release="0.5.3", tp_size=8, kv_cache_dtype="bfloat16")
    assert forced.kv_cache_dtype == "fp8_e4m3" and "server_args.py:830" in forced.source_of("kv_cache_dtype").source


def test_paths_not_followed_are_refused_by_name():
    cfg = load_config("nvidia__Llama-3.1-70B-Instruct-FP8.json")
    qc = json.loads((CONFIGS / "extra" / "nvidia__Llama-3.1-70B-Instruct-FP8__hf_quant_config.json").read_text())
    # ModelOpt on ROCm: petit_nvfp4 or a ROCm refusal, not followed
    with pytest.raises(EngineInputError) as err:
        plan(cfg, gpu=get_gpu("MI300X"), release="0.5.7", tp_size=4, quant_config=qc)
    assert err.value.field == "quant_config" and "ROCm" in err.value.message
    # an explicit KV dtype does not depend on it
    assert plan(cfg, gpu=get_gpu("MI300X"), release="0.5.7", tp_size=4, quant_config=qc,
                kv_cache_dtype="fp8_e4m3").cell_size_bytes == _LLAMA_FP8
    # an FP8 KV declared only inside text_config: SGLang's detection reads the top-level quantization_config
    nested = {**cfg, "text_config": {"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8",
                                                             "kv_cache_quant_algo": "FP8"}}}
    with pytest.raises(EngineInputError):
        checkpoint_kv("0.5.23", nested, None, None, is_hip=False, model_dtype="bfloat16")


def test_the_quantization_flag_against_the_checkpoint():
    """0.5.3: --quantization gptq on a ModelOpt checkpoint ("modelopt") does not match and is not compatible
    (model_config.py:561): ValueError. From 0.5.7 the checkpoint's own override wins first (modelopt_fp4 from
    hf_quant_config.json, base_config.py:173 in 0.5.10.post1), whatever the flag said."""
    cfg, qc = _catalog("nvidia__Qwen3-32B-NVFP4")
    got = checkpoint_kv("0.5.3", cfg, qc, "gptq", is_hip=False, model_dtype="bfloat16")
    assert got.refusal and "does not match" in got.refusal and "model_config.py:561" in got.refusal
    new = checkpoint_kv("0.5.10.post1", cfg, qc, "gptq", is_hip=False, model_dtype="bfloat16")
    assert (new.refusal, new.quant_method, new.kv_cache_dtype) == (None, "modelopt_fp4", "fp8_e4m3")


def test_the_api_says_the_kv_cache_stays_bf16_on_0_5_3(client, db, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    q = {"model": "nvidia/Llama-3.1-70B-Instruct-FP8", "runtime": "sglang", "gpu": "H100", "tp_size": "4",
         "context_length": "8192"}
    old = client.get("/api/estimate", {**q, "sglang_version": "0.5.3"}).json()
    new = client.get("/api/estimate", {**q, "sglang_version": "0.5.7"}).json()
    assert (old["kv_bytes_per_token"], new["kv_bytes_per_token"]) == (_LLAMA_BF16, _LLAMA_FP8)
    assert "declares an FP8 KV cache" in json.dumps(old) and "declares an FP8 KV cache" not in json.dumps(new)


# ---------------------------------------------------------------------------------------------------------
# The data read from the wheels (skipped without them: pip download sglang==X --no-deps -d /work/wheels)

def _wheel(release: str) -> Path:
    found = sorted(WHEELS.glob(f"sglang-{release}-*.whl"))
    return found[0] if found else WHEELS / f"sglang-{release}-py3-none-any.whl"


@pytest.mark.parametrize("release", COVERED)
def test_quant_config_holders_match_the_wheel(release):
    wheel = _wheel(release)
    if not wheel.exists():
        pytest.skip(f"{wheel} not downloaded")
    stored = json.loads((Path(R.__file__).parent / "data" / "quant_config_holders.json").read_text())
    with zipfile.ZipFile(wheel) as z:
        assert holders(z) == stored["releases"][release]
        for arch, (status, where) in stored["releases"][release].items():
            if status == "holds":
                path, line = where.rsplit(":", 1)
                assert "self.quant_config = quant_config" in z.read(path).decode("utf-8-sig").splitlines()[
                    int(line) - 1], (arch, where)


# ---------------------------------------------------------------------------------------------------------
# The DSA indexer's rotary cache (weights.dsa_indexer_rope_bytes): get_rope keeps one module per key, and the indexer
# passes the MLA attention's sizes, so it costs memory only when its is_neox_style differs.

@pytest.mark.parametrize("release,expected", [
    ("0.5.3", 0),              # both is_neox_style False (nsa_indexer.py:161, deepseek_v2.py:1124): shared
    ("0.5.3.post1", 0),
    # indexer True (nsa_indexer.py:165), attention False (deepseek_v2.py:1411): a second DeepseekScalingRotaryEmbedding,
    # cos_sin_cache 163,840 positions (4,096 x factor 40) x 64 x 4 B + cos/sin_cached_total 2 x 163,840 x 64 x 4 B
    ("0.5.7", 3 * 163840 * 64 * 4),
    ("0.5.8.post1", 3 * 163840 * 64 * 4),
    # not indexer_rope_interleave (absent: neox) vs not rope_interleave (absent: True -> not neox)
    ("0.5.9", 3 * 163840 * 64 * 4),
    ("0.5.10.post1", 3 * 163840 * 64 * 4),
    ("0.5.23", 163840 * 64 * 4),  # cos_sin_cache only on CUDA (cos/sin_cached_total on NPU)
])
def test_deepseek_v32_indexer_rope_cache_per_release(release, expected):
    v32 = json.loads((CATALOG / "deepseek-ai__DeepSeek-V3.2.json").read_text())
    p = plan(v32, gpu=get_gpu("H200"), release=release, tp_size=8)
    got = {s.field: s for s in p.sources}.get("weights.nsa_indexer_rope")
    if expected == 0:
        assert got is None
    else:
        assert round(float(got.value) * GIB) == pytest.approx(expected, abs=GIB * 1e-4)
        assert R.cite(release, "idx_rope_neox") in got.source and R.cite(release, "rope_key") in got.source


def test_glm5_indexer_shares_the_attention_rope():
    """GLM-5 sets rope_interleave and indexer_rope_interleave true: both is_neox_style False, one cache."""
    glm = json.loads((CATALOG / "zai-org__GLM-5.json").read_text())
    assert glm["rope_interleave"] is True and glm["indexer_rope_interleave"] is True
    for release in ("0.5.9", "0.5.10.post1", "0.5.23"):
        p = plan(glm, gpu=get_gpu("H200"), release=release, tp_size=8)
        assert "weights.nsa_indexer_rope" not in {s.field for s in p.sources}


def test_a_config_the_release_cannot_load_is_a_start_refusal_with_the_flag_that_loads_it(client, db, monkeypatch):
    """nvidia/Qwen3-32B-NVFP4 on 0.5.3 without --quantization: ModelOptFp8Config raises on NVFP4
    (modelopt_quant.py:173): the verdict is does_not_start (said once) and --quantization modelopt_fp4 is offered;
    with it, SGLang starts and stores the KV cache in fp8 (quantization.kv_cache_quant_algo FP8): one B200,
    8 heads x 256 x 64 layers x 1 B = 131,072 B per token."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    q = {"model": "nvidia/Qwen3-32B-NVFP4", "runtime": "sglang", "gpu": "B200", "sglang_version": "0.5.3",
         "context_length": "8192"}
    body = client.get("/api/estimate", q).json()
    assert body["verdict"] == "does_not_start" and "modelopt_quant.py:173" in body["verdict_headline"]
    assert len(body["verdict_reasons"]) == 1
    assert {"quantization": "modelopt_fp4"} in [s["params"] for s in body["suggestions"]]
    fixed = client.get("/api/estimate", {**q, "quantization": "modelopt_fp4"}).json()
    assert fixed["verdict"] == "works" and fixed["kv_bytes_per_token"] == 8 * 256 * 64 * 1
    assert "--quantization" in fixed["serve_argv"]
