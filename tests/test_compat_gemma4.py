"""Gemma 4's heterogeneous head sizes (sliding head_dim 256, full-attention global_head_dim 512) in the compat
check: the model's own ``Gemma4Config.verify_and_update_config`` (read from each wheel, evaluated) and a backend
choice per layer head size. Expected values come from reading vLLM's source, cited per assertion."""
import pytest

from calculator.engine.layers import check_architecture, registry_gap
from compat import checks, matrix


@pytest.fixture(scope="module")
def cfg():
    return matrix.load_model_config("google/gemma-4-26B-A4B")


def test_layer_head_sizes_come_from_the_engine(cfg):
    f = checks.features_from_hf_config(cfg)
    # text_config: head_dim 256 (sliding), global_head_dim 512 (full_attention layers)
    assert sorted(set(f.layer_head_sizes)) == [256, 512]
    assert f.layer_head_sizes.count(512) == cfg["text_config"]["layer_types"].count("full_attention")


def test_a100_fa4_unsupported_forces_triton(cfg):
    # 0.32 config.py:262 ``is_fa_version_supported(4)`` False on SM80 (flash_attn_interface.py:72 accepts 9.x, 10.x,
    # 11.x) -> config.py:284-285 sets attention_config.backend = TRITON_ATTN
    r = checks.verdict_for(cfg, "A100-80GB", vllm_version="0.32.0")
    assert r.ok is True and r.auto_selected == "TRITON_ATTN" and r.model_forced_backend == "TRITON_ATTN"
    assert any(s.startswith("vllm/model_executor/models/config.py:231 ") and "TRITON_ATTN" in s for s in r.sources)
    assert any(s.startswith("vllm/vllm_flash_attn/flash_attn_interface.py:72 ") for s in r.sources)


def test_h100_uses_flash_attn_fa4_for_all_layers(cfg):
    # config.py:278 flash_attn_version = 4 (SM90 FA4 supported, bf16 cache); FLASH_ATTN first on SM90 (cuda.py)
    r = checks.verdict_for(cfg, "H100", vllm_version="0.32.0")
    assert r.ok is True and r.auto_selected == "FLASH_ATTN" and r.model_forced_backend is None
    assert r.flash_attn_versions == {"256": 4, "512": 4}
    assert any("config.py:231" in s and "flash_attn_version=4" in s for s in r.sources)


def test_h100_fp8_uses_per_layer_fa3_fa4(cfg):
    # config.py:268-270 SM90 + fp8 cache: no override; get_flash_attn_version prefers FA3 on SM90 and upgrades
    # head_size > 256 to FA4 (fa_utils.py:74, upgrade at :143-160 in 0.32)
    r = checks.verdict_for(cfg, "H100", kv_cache_dtype="fp8", vllm_version="0.32.0")
    assert r.ok is True and r.auto_selected == "FLASH_ATTN"
    assert r.flash_attn_versions == {"256": 3, "512": 4}
    assert any(s.startswith("vllm/v1/attention/backends/fa_utils.py:74 ") for s in r.sources)


def test_b200_follows_the_sm100_order(cfg):
    # config.py:278 sets FA version 4 but forces no backend; on SM100 cuda.py:159-166 lists FLASHINFER first and
    # flashinfer.py:566-568 takes head sizes 64, 128, 256, 512, so both layer kinds get FLASHINFER
    r = checks.verdict_for(cfg, "B200", vllm_version="0.32.0")
    assert r.ok is True and r.auto_selected == "FLASHINFER"
    assert r.layer_backends == {"256": "FLASHINFER", "512": "FLASHINFER"}


def test_requested_flash_attn_on_a100_is_refused_for_head_512(cfg):
    # flash_attn.py:423-430 (0.32): head_size > 256 needs FA4, which SM80 does not have
    r = checks.verdict_for(cfg, "A100-80GB", attention_backend="FLASH_ATTN", vllm_version="0.32.0")
    assert r.ok is False and r.model_forced_backend is None
    assert "head_size not supported (head size 512 layers)" in r.error


def test_019_forces_triton_when_heads_differ_above_256(cfg):
    # 0.19.0 config.py:63-103: head_dim != global_head_dim and max > 256 and no backend -> TRITON_ATTN, any GPU
    r = checks.verdict_for(cfg, "H100", vllm_version="0.19.0")
    assert r.auto_selected == "TRITON_ATTN" and r.model_forced_backend == "TRITON_ATTN"
    assert any(s.startswith("vllm/model_executor/models/config.py:63 ") for s in r.sources)


def test_release_before_gemma4_lacks_the_model():
    # registry.py:385 (0.19.0) Gemma4ForConditionalGeneration; absent in 0.18.1: a gap the verdict reports, not a refusal
    gap = registry_gap("Gemma4ForConditionalGeneration", (0, 18, 1))
    assert gap is not None and (gap.release, gap.first_release) == ("0.18.1", "0.19.0")
    assert gap.message.startswith("ValueError: Model architectures ['Gemma4ForConditionalGeneration'] are not "
                                  "supported for now")
    assert registry_gap("Gemma4ForConditionalGeneration", (0, 19, 0)) is None
    assert check_architecture("Gemma4ForConditionalGeneration", (0, 18, 1))[0].startswith(
        "Gemma4ForConditionalGeneration is not in vLLM 0.18.1's registry")


@pytest.mark.django_db
def test_the_answer_names_the_models_rule_and_the_right_head_size(cfg, client):
    """The fix names the layers that fail (512, not the config's head_dim 256); the page and the command say the
    model's rule chose the backend, not the platform's priority order (a fresh user read the two as a contradiction)."""
    from django.core.management import call_command
    import io

    r = checks.verdict_for(cfg, "A100-80GB", vllm_version="0.32.0")
    fa = next(b for b in r.backends if b.name == "FLASH_ATTN")
    assert any("head size 512" in x for x in fa.reasons) and any("lack head size 512" in f for f in fa.fixes)
    html = " ".join(client.get("/", {"model": "google/gemma-4-26B-A4B", "gpu": "A100-80GB", "max_model_len": "32768"},
                               follow=True).content.decode().split())
    assert "vLLM picks <strong>TRITON_ATTN</strong>: the model's own rule sets it" in html
    out = io.StringIO()
    call_command("check_compat", "--model", "google/gemma-4-26B-A4B", "--gpu", "A100-80GB", stdout=out)
    assert "auto: TRITON_ATTN  (set by the model's own rule" in out.getvalue()


def test_h100_fp8_head_512_needs_a_block_size_divisible_by_64_from_0_34(cfg):
    # 0.34.0 vllm/v1/attention/backends/flash_attn.py:474-481 supports_combination: SM90, a quantized KV cache,
    # head_size 512 and block_size % 64 != 0 -> "SM90 d512 FP8 KV requires a block size divisible by 64"
    # (not in 0.33.0's supports_combination)
    msg = "SM90 d512 FP8 KV requires a block size divisible by 64"
    old = checks.verdict_for(cfg, "H100", kv_cache_dtype="fp8", block_size=16, attention_backend="FLASH_ATTN",
                             vllm_version="0.33.0")
    assert not any(msg in r for b in old.backends if b.name == "FLASH_ATTN" for r in b.reasons)
    new = checks.verdict_for(cfg, "H100", kv_cache_dtype="fp8", block_size=16, attention_backend="FLASH_ATTN",
                             vllm_version="0.34.0")
    assert new.ok is False and f"{msg} (head size 512 layers)" in new.error
    ok = checks.verdict_for(cfg, "H100", kv_cache_dtype="fp8", block_size=64, attention_backend="FLASH_ATTN",
                            vllm_version="0.34.0")
    assert ok.ok is True and ok.flash_attn_versions == {"256": 3, "512": 4}
