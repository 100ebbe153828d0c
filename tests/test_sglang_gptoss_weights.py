"""gpt-oss MXFP4 weights on one Hopper rank as SGLang keeps them (triton_kernel MoE runner), computed by hand from the
config and each release's mxfp4.py + the triton_kernels its sgl-kernel ships; and an attention-backend refusal listed
once in the verdict."""
import json
import zipfile
from pathlib import Path

import pytest

from calculator.runtimes.sglang import releases as R
from calculator.runtimes.sglang.weights import estimate

CONFIGS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "model_configs"
if not CONFIGS.exists():
    CONFIGS = Path("/work/shared/data/model_configs")


def _cfg(name):
    return json.loads((CONFIGS / f"openai__{name}.json").read_text())


# By hand, gpt-oss-120b (H = I = 2880, 128 experts, 36 layers, 64 q / 8 kv heads of 64, vocab 201088), TP 1, SM90:
# per layer, experts (E = 128):
#   0.5.3-0.5.10.post1: w13 128*5760*1440 = 1,061,683,200; w2 128*2880*1440 = 530,841,600 (no padding: 5760, 2880 are
#     multiples of 16, 1440 of 32); swizzled scales 128*5888*90 = 67,829,760 + 128*3072*90 = 35,389,440; kept scales
#     128*5760*90 = 66,355,200 + 128*2880*90 = 33,177,600; fp32 biases 128*5760*4 + 128*2880*4 = 4,423,680
#     -> 1,799,700,480 B
#   0.5.23: w13 128*1472*5888 = 1,109,393,408; w2 128*1472*3072 = 578,813,952; swizzled scales 128*5888*92 =
#     69,337,088 + 128*3072*92 = 36,175,872; kept 99,532,800; biases 4,423,680 -> 1,897,676,800 B
#   attention: qkv 5120*2880*2 + bias 5120*2; o 2880*4096*2 + bias 2880*2; sinks 64*2 = 53,100,288 B
#   router 128*2880*2 + 128*2 = 737,536; norms 2*2880*2 = 11,520
# embed = lm_head = 201088*2880*2 = 1,158,266,880 each; final norm 5,760; rope 131072*64*4 = 33,554,432
_NON_EXPERT_120B = 36 * (53_100_288 + 737_536 + 11_520) + 2 * 1_158_266_880 + 5_760 + 33_554_432
HAND_120B = {"0.5.3": 36 * 1_799_700_480 + _NON_EXPERT_120B, "0.5.9": 36 * 1_799_700_480 + _NON_EXPERT_120B,
             "0.5.10.post1": 36 * 1_799_700_480 + _NON_EXPERT_120B, "0.5.23": 36 * 1_897_676_800 + _NON_EXPERT_120B}
# gpt-oss-20b: 32 experts, 24 layers, the same widths: experts per layer are a quarter of the 120b's
_NON_EXPERT_20B = 24 * (53_100_288 + (32 * 2880 + 32) * 2 + 11_520) + 2 * 1_158_266_880 + 5_760 + 33_554_432
HAND_20B = {"0.5.3": 24 * 1_799_700_480 // 4 + _NON_EXPERT_20B, "0.5.23": 24 * 1_897_676_800 // 4 + _NON_EXPERT_20B}


def _est(name, release, tp=1, sm=9):
    return estimate(_cfg(name), release=release, is_hip=False, model_dtype="bfloat16", quantization=None, tp=tp,
                    attn_tp=tp, sm_major=sm)


@pytest.mark.parametrize("release", sorted(HAND_120B))
def test_gpt_oss_120b_h100_weights_are_the_hand_sum(release):
    assert _est("gpt-oss-120b", release).total == pytest.approx(HAND_120B[release], abs=1)


@pytest.mark.parametrize("release", sorted(HAND_20B))
def test_gpt_oss_20b_h100_weights_are_the_hand_sum(release):
    assert _est("gpt-oss-20b", release).total == pytest.approx(HAND_20B[release], abs=1)


def test_gpt_oss_120b_tp2_pads_the_intermediate_by_release():
    """TP 2: I = 1440; 0.5.9 keeps 1440 (a multiple of 32), 0.5.10.post1 pads it to 1472 (64): w13 128*2944*1440 vs
    128*2880*1440, w2 128*2880*736 (720 -> 736 columns) vs 128*2880*736, swizzled scales 128*3072*90 both, w2 scale
    128*3072*46 vs 128*3072*46, kept 128*2*I*90 + 128*2880*(I/32), biases 128*2*I*4 + 128*2880*4."""
    def layer(i, w13, w2s_cols):
        return (w13 + 128 * 2880 * 736 + 128 * 3072 * 90 + 128 * 3072 * w2s_cols
                + 128 * 2 * i * 90 + 128 * 2880 * (i // 32) + 128 * 2 * i * 4 + 128 * 2880 * 4)
    d = _est("gpt-oss-120b", "0.5.10.post1", tp=2).total - _est("gpt-oss-120b", "0.5.9", tp=2).total
    assert d == 36 * (layer(1472, 128 * 2944 * 1440, 46) - layer(1440, 128 * 2880 * 1440, 46))


def test_other_gpus_keep_the_count_and_say_so():
    est = _est("gpt-oss-120b", "0.5.23", sm=8)
    assert not any(t.name == "mxfp4_moe_sm90" for t in est.terms)
    assert any("Hopper (SM90, CUDA) only" in n for n in est.notes)


_GPTOSS_CITED = {
    "gptoss_tk_pad": "intermediate_size_per_partition_after_pad = round_up(",
    "gptoss_tk_del": "del layer.w13_weight",
    "gptoss_tk_bias": "w13_weight_bias = layer.w13_weight_bias.to(torch.float32)",
    "gptoss_tk_swizzle": "def _swizzle_mxfp4(",
    "gptoss_tk_backend": 'moe_runner_backend"] = "triton_kernel"',
}


@pytest.mark.parametrize("release", R.COVERED[2:])
def test_gpt_oss_cited_lines_say_it(release):
    from tests.test_sglang_memory import wheel_of

    wheel = wheel_of(release)
    if not wheel.exists():
        pytest.skip(f"{wheel} not downloaded")
    with zipfile.ZipFile(wheel) as z:
        for rule, text in _GPTOSS_CITED.items():
            path, line = R._WEIGHT_LINES[release][rule]
            got = z.read(path).decode().splitlines()[line - 1]
            if rule == "gptoss_tk_backend" and release != "0.5.23":
                text = 'self.moe_runner_backend = "triton_kernel"'
            assert text in got, (release, rule, got)
        if release == "0.5.23":
            path, line = R._WEIGHT_LINES[release]["gptoss_tk_scale_pad"]
            assert "def _pad_hopper_mxfp4_scale" in z.read(path).decode().splitlines()[line - 1]


@pytest.mark.django_db
def test_an_attention_backend_refusal_is_listed_once():
    """flashmla on an A100 for a non-MLA model: the compat reason and the plan's "--attention-backend flashmla does not
    start: <the same reason>" are one refusal."""
    from calculator.plan import make_plan
    from calculator.request import parse_request

    req = parse_request({"model": "Qwen/Qwen3-8B", "runtime": "sglang", "gpu": "A100", "attention_backend": "flashmla"})
    v = make_plan(req).verdict
    assert v.status == "does_not_start"
    assert len(v.reasons) == 1, v.reasons
    assert "FlashMLA" in v.reasons[0]
