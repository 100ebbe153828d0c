"""MTP heads as vLLM sees them (issue 12, items 4 and 5): which models have one and how many layers
(vllm/config/speculative.py:661-1073 in 0.32, calculator.engine.mtp), vLLM's per-architecture method names,
the MTP layers' weights and KV, and the page's one-click recorded profile for the model on the page.

Expected values are computed by hand from the configs (calculator/data/model_configs)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import parse_qsl

import pytest

from calculator.engine.arch import parse_config
from calculator.engine.mtp import MTP_METHOD_NAMES, MtpHead, NoMtpHead, mtp_head
from calculator.request import InputError, parse_request

CONFIGS = Path(__file__).resolve().parents[1] / "calculator" / "data" / "model_configs"
COMPAT = Path(__file__).resolve().parents[1] / "compat" / "data"


def cfg(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


# --- which models have an MTP head ------------------------------------------------------------------------------
def test_qwen3_5_mtp_layers_come_from_text_config_mtp_num_hidden_layers():
    c = cfg("Qwen__Qwen3.5-35B-A3B.json")
    assert c["text_config"]["mtp_num_hidden_layers"] == 1 and "num_nextn_predict_layers" not in c["text_config"]
    head = mtp_head(c)
    assert isinstance(head, MtpHead)
    assert (head.layers, head.n_predict, head.draft_type) == (1, 1, "qwen3_5_mtp")
    assert head.key == "text_config.mtp_num_hidden_layers"
    assert parse_config(c).mtp_layers == 1


def test_nemotron_3_5_transcribe_maps_to_its_own_mtp_draft_from_0_34():
    # 0.34.0 vllm/config/speculative.py:994-1010: architectures[0] Nemotron3_5TranscribeForConditionalGeneration ->
    # the text config becomes the draft, model_type "nemotron3_5_transcribe_mtp", n_predict =
    # text_config.num_nextn_predict_layers (a hand-made config: no such checkpoint in the catalog)
    c = {"architectures": ["Nemotron3_5TranscribeForConditionalGeneration"], "model_type": "nemotron3_5_transcribe",
         "text_config": {"model_type": "nemotron_h", "num_nextn_predict_layers": 2}}
    head = mtp_head(c)
    assert isinstance(head, MtpHead)
    assert (head.layers, head.n_predict, head.draft_type) == (2, 2, "nemotron3_5_transcribe_mtp")
    assert head.key == "text_config.num_nextn_predict_layers" and "994-1010 (0.34.0)" in head.source
    none = mtp_head({**c, "text_config": {"model_type": "nemotron_h", "num_nextn_predict_layers": 0}})
    assert isinstance(none, NoMtpHead) and "num_nextn_predict_layers is 0" in none.reason


def test_qwen3_next_has_one_mtp_layer_by_the_model_files_default():
    # Qwen's config has neither num_nextn_predict_layers nor mtp_num_hidden_layers: vLLM maps qwen3_next to
    # qwen3_next_mtp with n_predict None and Qwen3NextMultiTokenPredictor builds getattr(..., 1) = 1 layer
    c = cfg("Qwen__Qwen3-Next-80B-A3B-Instruct.json")
    assert "num_nextn_predict_layers" not in c and "mtp_num_hidden_layers" not in c
    head = mtp_head(c)
    assert isinstance(head, MtpHead)
    assert (head.layers, head.n_predict, head.draft_type) == (1, None, "qwen3_next_mtp")
    assert "qwen3_next_mtp.py:63" in head.source


def test_qwen3_next_mtp_layer_weights_by_hand():
    """One full-attention decoder layer + fc + three norms (qwen3_next_mtp.py:47-112), from the config:
    hidden 2048, 16 heads x 256 (gated query: q_proj 2 x 16 x 256 out), 2 KV heads, q/k norm 256 each;
    512 experts of 3 x 2048 x 512, router 2048 x 512, shared expert 3 x 2048 x 512 + its gate 2048; two layer
    norms; fc 2 x 2048 x 2048; norm, pre_fc_norm_hidden, pre_fc_norm_embedding."""
    h = 2048
    attn = h * 2 * 16 * 256 + 2 * h * 2 * 256 + 16 * 256 * h + 2 * 256
    moe = 512 * 3 * h * 512 + h * 512 + 3 * h * 512 + h
    expected = attn + moe + 2 * h + 2 * h * h + 3 * h
    assert expected == 1_650_471_424
    assert parse_config(cfg("Qwen__Qwen3-Next-80B-A3B-Instruct.json")).params.mtp == expected


def test_dense_qwen3_5_mtp_layer_uses_the_dense_mlp():
    c = cfg("Qwen__Qwen3.5-9B.json")
    t = c["text_config"]
    h, heads, hd, kvh, inter = (t["hidden_size"], t["num_attention_heads"], t["head_dim"], t["num_key_value_heads"],
                                t["intermediate_size"])
    attn = h * 2 * heads * hd + 2 * h * kvh * hd + heads * hd * h + 2 * hd
    expected = attn + 3 * h * inter + 2 * h + 2 * h * h + 3 * h
    assert parse_config(c).params.mtp == expected


def test_deepseek_v3_keeps_num_nextn_predict_layers():
    head = mtp_head(cfg("deepseek-ai__DeepSeek-V3.json"))
    assert isinstance(head, MtpHead) and (head.layers, head.draft_type) == (1, "deepseek_mtp")


def test_a_model_without_mtp_is_refused_with_vllms_reason():
    head = mtp_head(cfg("meta-llama__Llama-3.1-8B-Instruct.json"))
    assert isinstance(head, NoMtpHead) and "Unsupported speculative method: 'mtp'" in head.reason


@pytest.mark.usefixtures("offline_hub")
def test_mtp_on_a_model_without_a_head_is_refused_with_the_reason():
    from calculator.engine.errors import EngineInputError

    with pytest.raises((InputError, EngineInputError)) as e:
        _plan("meta-llama/Llama-3.1-8B-Instruct", '{"method":"mtp","num_speculative_tokens":1}')
    assert e.value.field == "speculative_config"
    assert "Unsupported speculative method: 'mtp'" in e.value.message


def test_a_deepseek_style_config_with_zero_mtp_layers_has_none():
    c = {**cfg("deepseek-ai__DeepSeek-V3.json"), "num_nextn_predict_layers": 0}
    head = mtp_head(c)
    assert isinstance(head, NoMtpHead) and "num_nextn_predict_layers is 0" in head.reason


def test_the_method_names_are_every_covered_releases_mtp_model_types():
    names = set()
    for f in COMPAT.glob("vllm-*.json"):
        names |= set(json.loads(f.read_text())["speculative"]["mtp_model_types"])
    assert names - {"mtp"} == set(MTP_METHOD_NAMES)


# --- the request, the plan and the launch command ----------------------------------------------------------------
def _plan(model: str, spec: str, **extra: str):
    from calculator.plan import make_plan

    return make_plan(parse_request({"model": model, "gpu": "H200", "tensor_parallel_size": "2",
                                    "speculative_config": spec, **extra}))


@pytest.mark.usefixtures("offline_hub")
def test_a_vllm_method_name_is_accepted_run_as_mtp_and_kept_in_the_command():
    plan = _plan("Qwen/Qwen3-Next-80B-A3B-Instruct", '{"method":"qwen3_next_mtp","num_speculative_tokens":2}')
    spec = plan.request.speculative_config
    assert spec.method == "mtp" and spec.vllm_name == "qwen3_next_mtp"
    i = plan.launch_argv.index("--speculative-config")
    assert json.loads(plan.launch_argv[i + 1]) == {"method": "qwen3_next_mtp", "num_speculative_tokens": 2}
    # the permalink keeps the name too
    assert json.loads(plan.request.to_params()["speculative_config"])["method"] == "qwen3_next_mtp"
    # draft weights: the MTP layer's 1,650,471,424 parameters (above) in bf16 over TP 2
    assert plan.memory.draft_weights_gib == pytest.approx(1_650_471_424 * 2 / 2 / 2**30, abs=0.006)


def test_the_qwen3_next_mtp_layer_caches_kv_as_a_full_attention_layer():
    """The MTP layer is built with layer_type="full_attention" (qwen3_next_mtp.py:88-95), not as the target's first
    (linear-attention) layer: 2 KV heads over TP 2 = 1 head per GPU x head_dim 256 x (K, V) x 2 B = 1,024 B per
    token, beside the target's 12 full-attention layers (48 / full_attention_interval 4) x 1,024 = 12,288 B."""
    from calculator.engine import estimate
    from calculator.engine.schemas import EngineInput, SpeculativeConfig

    c = cfg("Qwen__Qwen3-Next-80B-A3B-Instruct.json")
    per_layer = (c["num_key_value_heads"] // 2) * c["head_dim"] * 2 * 2
    n_full = c["num_hidden_layers"] // c["full_attention_interval"]
    base = estimate(EngineInput(hf_config=c, gpu="H200", tensor_parallel_size=2, max_model_len=32768))
    spec = estimate(EngineInput(hf_config=c, gpu="H200", tensor_parallel_size=2, max_model_len=32768,
                                speculative_config=SpeculativeConfig(method="qwen3_next_mtp",
                                                                     num_speculative_tokens=1)))
    assert base.kv_bytes_per_token == n_full * per_layer == 12_288
    assert spec.kv_bytes_per_token == (n_full + 1) * per_layer
    draft = [g for g in spec.kv_by_layer_type if g.draft]
    assert [(g.kind, g.num_layers, g.bytes_per_token) for g in draft] == [("full_attention", 1, 1024)]


@pytest.mark.usefixtures("offline_hub")
def test_qwen3_5_mtp_plan_works_and_sizes_the_draft():
    plan = _plan("Qwen/Qwen3.5-35B-A3B", '{"method":"mtp","num_speculative_tokens":1}')
    t = cfg("Qwen__Qwen3.5-35B-A3B.json")["text_config"]
    h, heads, hd, kvh = t["hidden_size"], t["num_attention_heads"], t["head_dim"], t["num_key_value_heads"]
    ne, mi, si = t["num_experts"], t["moe_intermediate_size"], t["shared_expert_intermediate_size"]
    params = (h * 2 * heads * hd + 2 * h * kvh * hd + heads * hd * h + 2 * hd      # gated-query attention + q/k norm
              + ne * 3 * h * mi + h * ne + 3 * h * si + h                            # experts, router, shared + gate
              + 2 * h + 2 * h * h + 3 * h)                                           # layer norms, fc, three norms
    assert plan.memory.draft_weights_gib == pytest.approx(params * 2 / 2 / 2**30, abs=0.006)
    assert plan.verdict.status == "works"


def test_a_name_that_is_not_vllms_is_refused_naming_the_per_architecture_names():
    with pytest.raises(InputError) as e:
        parse_request({"model": "Qwen/Qwen3.5-35B-A3B",
                       "speculative_config": '{"method":"qwen9_mtp","num_speculative_tokens":1}'})
    assert e.value.field == "speculative_config" and "qwen3_next_mtp" in e.value.message


def test_vllm_method_is_not_a_key_a_user_gives():
    with pytest.raises(InputError):
        parse_request({"model": "Qwen/Qwen3.5-35B-A3B",
                       "speculative_config": '{"method":"mtp","vllm_method":"x","num_speculative_tokens":1}'})


# --- the page's recorded profile ----------------------------------------------------------------------------------
def _profile(client, query: str):
    html = client.get("/?" + query, HTTP_HX_REQUEST="true").content.decode()
    return re.search(r'<p id="mtp-profile".*?</p>', html, re.S)


@pytest.mark.usefixtures("offline_hub")
def test_the_profile_is_one_click_for_a_model_with_an_mtp_head(client):
    m = _profile(client, "model=Qwen/Qwen3.5-35B-A3B&gpu=H200&tensor_parallel_size=2&runtime=vllm")
    assert m is not None
    href = re.search(r'href="/\?([^"]+)"', m.group(0)).group(1)
    q = dict(parse_qsl(href.replace("&amp;", "&")))
    # the user's model, GPU and TP; the validator's GPU profile: 32,768 context, 32,512 in + 256 out, 4 in flight
    assert q["model"] == "Qwen/Qwen3.5-35B-A3B" and q["gpu"] == "H200" and q["tensor_parallel_size"] == "2"
    assert (q["max_model_len"], q["prompt_len"], q["output_len"], q["concurrency"]) == ("32768", "32512", "256", "4")
    assert json.loads(q["speculative_config"]) == {"method": "mtp", "num_speculative_tokens": 1}
    # one click: the link's page answers with the MTP speed at those lengths
    html = client.get("/?" + href.replace("&amp;", "&"), HTTP_HX_REQUEST="true").content.decode()
    assert 'id="spec-summary"' in html and "prompt 32,512 tokens, output 256, 4 in flight" in html


@pytest.mark.usefixtures("offline_hub")
@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_the_profile_link_follows_the_speed_cards_and_says_it_is_another_configuration(client, runtime):
    """The cards are this page's workload (prompt 1,024, output 128, 1 in flight); the profile is 32,512 in + 256 out,
    4 in flight: the link comes after the TTFT / ITL / tok/s figures and is labelled as another configuration."""
    page = client.get(f"/?model=Qwen/Qwen3.5-35B-A3B&gpu=H200&tensor_parallel_size=2&runtime={runtime}",
                      HTTP_HX_REQUEST="true").content.decode()
    link = page.index('id="mtp-profile"')
    for figure in ('id="ttft-ms"', 'id="itl-ms"', 'id="output-tok-s"'):
        assert page.index(figure) < link, figure
    assert "Another configuration (not the figures above):" in _profile(
        client, f"model=Qwen/Qwen3.5-35B-A3B&gpu=H200&tensor_parallel_size=2&runtime={runtime}").group(0)


@pytest.mark.usefixtures("offline_hub")
def test_the_profile_keeps_the_runtime(client):
    m = _profile(client, "model=zai-org/GLM-4.7-Flash&gpu=H200&tensor_parallel_size=2&runtime=sglang")
    assert m is not None
    q = dict(parse_qsl(re.search(r'href="/\?([^"]+)"', m.group(0)).group(1).replace("&amp;", "&")))
    assert q["runtime"] == "sglang" and q["tensor_parallel_size"] == "2"
    assert json.loads(q["speculative_config"]) == {"method": "mtp", "num_speculative_tokens": 1}


@pytest.mark.usefixtures("offline_hub")
def test_the_profile_says_why_when_the_runtime_does_not_model_it(client):
    # SGLang's draft on a hybrid gated-delta-net model is refused as not modelled (runtimes/sglang/memory.py)
    m = _profile(client, "model=Qwen/Qwen3-Next-80B-A3B-Instruct&gpu=H200&tensor_parallel_size=4&runtime=sglang")
    assert m is not None and "href=" not in m.group(0) and "not modelled" in m.group(0)


@pytest.mark.usefixtures("offline_hub")
def test_the_profiles_reason_on_sglang_is_in_sglangs_terms(client):
    """Llama 3.1 8B's config.json has no num_nextn_predict_layers: on SGLang the profile is --speculative-algorithm
    NEXTN --speculative-num-steps 1 and SGLang's refusal is given, not vLLM's draft map; on vLLM, vLLM's."""
    m = _profile(client, "model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100&runtime=sglang")
    assert m is not None and "href=" not in m.group(0)
    text = html.unescape(m.group(0))
    assert ("(the profile (--speculative-algorithm NEXTN --speculative-num-steps 1) does not apply here: "
            "LlamaForCausalLM has no MTP (NEXTN) layers in config.json (num_nextn_predict_layers))") in text
    assert "vLLM" not in text and "speculative_config" not in text and "Unsupported speculative method" not in text
    # a hybrid GDN model: the refusal named by SGLang's flags, not the page's speculative_config field
    text = html.unescape(_profile(client, "model=Qwen/Qwen3-Next-80B-A3B-Instruct&gpu=H200&tensor_parallel_size=4"
                                          "&runtime=sglang").group(0))
    assert "--speculative-algorithm NEXTN --speculative-num-steps 1) does not apply here: Mamba" in text
    assert "speculative_config" not in text
    text = html.unescape(_profile(client, "model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100&runtime=vllm").group(0))
    assert "vLLM maps no MTP draft for model_type 'llama'" in text and "NEXTN" not in text


@pytest.mark.usefixtures("offline_hub")
def test_the_profile_is_disabled_with_the_reason_for_a_model_without_mtp(client):
    m = _profile(client, "model=meta-llama/Llama-3.1-8B-Instruct&gpu=H100")
    assert m is not None and "href=" not in m.group(0) and 'aria-disabled="true"' in m.group(0)
    assert "Unsupported speculative method: &#x27;mtp&#x27;" in m.group(0)


@pytest.mark.usefixtures("offline_hub")
def test_the_form_shows_a_per_architecture_name_from_the_permalink(client):
    q = ("model=Qwen/Qwen3-Next-80B-A3B-Instruct&gpu=H200&tensor_parallel_size=2"
         "&speculative_config=%7B%22method%22%3A%22qwen3_next_mtp%22%2C%22num_speculative_tokens%22%3A1%7D")
    html = client.get("/?" + q, follow=True).content.decode()
    assert '<option value="qwen3_next_mtp" selected>' in html
    assert "--speculative-config" in html and "qwen3_next_mtp" in html.split("--speculative-config", 1)[1][:200]


@pytest.mark.parametrize("k,refused", [(1, False), (2, False), (3, True), (4, False), (5, True)])
def test_num_speculative_tokens_above_n_predict_must_be_a_multiple_of_it(k, refused):
    """vLLM reuses the n_predict MTP modules in turn and raises at start-up when num_speculative_tokens > n_predict is
    not a multiple of it (vllm/config/speculative.py:419-427 in 0.11.2, :1493-1501 in 0.32.0: ``num_speculative_tokens
    :3 must be divisible by n_predict=2``). A DeepSeek-V3 config with num_nextn_predict_layers 2 has n_predict 2 (the
    deepseek_mtp override, speculative.py:679-695): k = 1, 2, 4 start; 3 and 5 do not."""
    from calculator.engine import estimate
    from calculator.engine.errors import EngineInputError
    from calculator.engine.schemas import EngineInput, SpeculativeConfig

    c = {**cfg("deepseek-ai__DeepSeek-V3.json"), "num_nextn_predict_layers": 2}
    assert mtp_head(c).n_predict == 2
    inp = EngineInput(hf_config=c, gpu="H200", tensor_parallel_size=8, max_model_len=8192,
                      speculative_config=SpeculativeConfig(method="mtp", num_speculative_tokens=k))
    if not refused:
        assert estimate(inp).max_model_len == 8192
        return
    with pytest.raises(EngineInputError) as e:
        estimate(inp)
    assert e.value.field == "speculative_config.num_speculative_tokens"
    assert e.value.message.startswith("must be divisible by n_predict=2")
    assert f'"num_speculative_tokens:{k} must be divisible by n_predict=2"' in e.value.message  # vLLM's words


def test_deepseek_r1_mtp_layer_is_stored_at_the_checkpoints_fp8_and_its_eh_proj_whole_in_bf16():
    """DeepSeek-R1's MTP module (deepseek_mtp.py in 0.32) on 8 GPUs, by hand from config.json:

    - decoder layer built with the checkpoint's quant_config (block FP8: 1 B + a float32 scale per 128 x 128 block):
      MLA 187,107,328 (q_a 7168x1536, its norm 1536, q_b 1536x128x192, kv_a 7168x576, its norm 512, kv_b
      512x128x256, o 128x128x7168) + 257 experts' MLPs 3x7168x2048 = 11,318,329,344, split over TP 8, except
      MLA's q_a / kv_a (7168 x (1536 + 512 + 64)), whole on every rank;
    - eh_proj: nn.Linear(2 x 7168, 7168) in bf16, whole on every rank: 102,760,448 x 2 B;
    - enorm, hnorm and the layer's two norms (4 x 7168) and the router gate (7168 x 256) in bf16, whole."""
    from calculator.engine import estimate
    from calculator.engine.schemas import EngineInput, SpeculativeConfig

    c = cfg("deepseek-ai__DeepSeek-R1.json")
    fp8 = 1 + 4 / (128 * 128)
    mla = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    assert mla == 187_107_328
    experts = 257 * 3 * 7168 * 2048
    rep = 7168 * (1536 + 512 + 64)
    body = (mla + experts) * fp8 / 8 + rep * fp8 * (1 - 1 / 8)
    expected = body + 2 * 7168 * 7168 * 2 + (4 * 7168 + 7168 * 256) * 2
    from calculator.engine.weights import mtp_draft_weights, resolve_quant

    arch = parse_config(c)
    got, why = mtp_draft_weights(arch, "bfloat16", resolve_quant(arch, c["quantization_config"], None), 8)
    assert got == pytest.approx(expected, rel=1e-6)
    assert "checkpoint quantization (fp8)" in why and "nn.Linear: model dtype, whole on every rank" in why
    est = estimate(EngineInput(hf_config=c, gpu="H200", tensor_parallel_size=8, max_model_len=8192,
                               speculative_config=SpeculativeConfig(method="mtp", num_speculative_tokens=1)))
    assert est.draft_weights_gib == round(expected / 2**30, 2) == 1.55  # bf16 throughout would be 2.70 GiB


def test_a_checkpoint_that_keeps_its_mtp_layer_unquantized_sizes_it_at_the_model_dtype():
    """nvidia/Qwen3.5-122B-A10B-NVFP4 lists ``mtp*`` in its ignore list (config.json), and Qwen3.5's fc gets no
    quant_config under ModelOpt NVFP4 (qwen3_5_mtp.py:92-106 in 0.32): its MTP draft weighs what the BF16
    checkpoint's does, while the target's weights are about a third."""
    from calculator.engine.weights import mtp_draft_weights, resolve_quant

    nv, bf = cfg("nvidia__Qwen3.5-122B-A10B-NVFP4.json"), cfg("Qwen__Qwen3.5-122B-A10B.json")
    a_nv, a_bf = parse_config(nv), parse_config(bf)
    q = resolve_quant(a_nv, nv.get("quantization_config") or nv["text_config"].get("quantization_config"), None)
    assert q is not None and q.bits == 4
    got, why = mtp_draft_weights(a_nv, "bfloat16", q, 4)
    assert got == mtp_draft_weights(a_bf, "bfloat16", None, 4)[0]
    assert "keeps the MTP layer unquantized" in why


def test_the_speed_model_reads_the_mtp_layer_at_the_bytes_the_memory_estimate_stores():
    """The MTP draft pass reads its layer's weights at what the checkpoint stores: FP8 for DeepSeek-R1 (1 B + block
    scales: half of bf16's 2 B), bf16 for an NVFP4 checkpoint that keeps ``mtp*`` unquantized (not FP4's 0.5625 B)."""
    from calculator.engine.weights import mtp_layer_bytes_per_weight, resolve_quant

    r1 = cfg("deepseek-ai__DeepSeek-R1.json")
    a = parse_config(r1)
    assert mtp_layer_bytes_per_weight(a, "bfloat16", resolve_quant(a, r1["quantization_config"], None)) == \
        pytest.approx(1 + 4 / 128 ** 2)
    nv = cfg("nvidia__Qwen3.5-122B-A10B-NVFP4.json")
    a = parse_config(nv)
    q = resolve_quant(a, nv.get("quantization_config") or nv["text_config"].get("quantization_config"), None)
    assert q.bits == 4 and mtp_layer_bytes_per_weight(a, "bfloat16", q) == 2


@pytest.mark.usefixtures("offline_hub")
def test_the_mtp_layers_not_loaded_note_only_when_the_method_is_not_mtp(client):
    """DeepSeek-V3's config stores one MTP layer (num_nextn_predict_layers: 1). Without speculative decoding vLLM skips
    it, and the answer says so; with method mtp it is the draft (draft_weights_gib), so "vLLM loads them only with
    speculative method mtp" would contradict the request and is not shown, on the API and on the page."""
    base = {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "tensor_parallel_size": "8"}
    note = "1 MTP layer(s) stored in the checkpoint; vLLM loads them only with speculative method mtp"
    plain = client.get("/api/estimate", base).json()
    assert note in plain["warnings"] and plain["draft_weights_gib"] == 0
    mtp = client.get("/api/estimate", {**base, "speculative_config": '{"method":"mtp","num_speculative_tokens":1}'})
    assert mtp.status_code == 200 and mtp.json()["draft_weights_gib"] > 0
    assert not any("loads them only" in w for w in mtp.json()["warnings"])
    page = client.get("/", {**base, "speculative_config": '{"method":"mtp","num_speculative_tokens":1}'},
                      follow=True).content.decode()
    assert "loads them only" not in page and 'id="spec-summary"' in page
    # another method keeps it: the MTP layers stay unloaded beside an ngram draft
    ngram = client.get("/api/estimate", {**base, "speculative_config": '{"method":"ngram","num_speculative_tokens":3}'})
    assert note in ngram.json()["warnings"]


@pytest.mark.usefixtures("offline_hub")
@pytest.mark.parametrize("runtime", ["llama.cpp", "ollama"])
def test_no_mtp_profile_on_llama_cpp_or_ollama(client, runtime):
    """The field guide's MTP profile is a vLLM / SGLang benchmark (method MTP, working context 32,768, concurrency 4);
    a llama.cpp or Ollama page shows no "MTP profile unavailable" line (before, every such page did)."""
    html = client.get(f"/?model=Qwen/Qwen3-8B&gpu=H200&runtime={runtime}", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="verdict"' in html
    assert 'id="mtp-profile"' not in html and "MTP profile" not in html
    gguf = client.get(f"/?model=bartowski/Meta-Llama-3.1-8B-Instruct-GGUF&gguf_file=Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"
                      f"&gpu=RTX+3090&runtime={runtime}", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="verdict"' in gguf and "MTP profile" not in gguf
