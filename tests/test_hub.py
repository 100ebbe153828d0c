"""calculator.metadata.hub against a local server that speaks the Hub's API (tests/hub_server.py).

Checkpoints are real safetensors files written with the ``safetensors`` package, laid out as a Llama
decoder (Llama-3.1's tensor names) scaled down to vocab 256, hidden 64, intermediate 128, 4 heads,
2 KV heads, head_dim 16, 2 layers, untied lm_head. Expected counts are worked out by hand below.
"""
from __future__ import annotations

import json
import time

import pytest
import torch
from safetensors.torch import save

from calculator.metadata.hub import (
    GatedRepoError,
    HubClient,
    HubUnavailableError,
    InvalidModelIdError,
    InvalidTokenError,
    NoConfigError,
    RepoNotFoundError,
    RevisionNotFoundError,
    validate_model_id,
)
from tests.conftest import CONFIGS, load_config
from tests.hub_server import FakeHub

V, H, I, NH, NKV, D, L = 256, 64, 128, 4, 2, 16, 2
# By hand: embed 256*64 = 16384, lm_head 16384, final norm 64.
# Per layer: q 64*64 = 4096, k 32*64 = 2048, v 2048, o 4096 (= 12288); gate/up/down 3*128*64 = 24576;
# two norms 128. Linear weights per layer 36864; all per layer 36992.
BF16_PARAMS_ALL_BF16 = 16384 + 16384 + 64 + 2 * 36992  # 106816
LINEAR_PARAMS = 2 * 36864  # 73728
LINEARS = 7 * 2  # q, k, v, o, gate, up, down in 2 layers


def llama_tensors(linear_dtype=torch.bfloat16, *, fp8_scales=False, layers=range(L), head=True) -> dict:
    """Llama decoder tensors; ``fp8_scales`` adds ModelOpt's per-tensor F32 ``weight_scale`` and
    ``input_scale`` (shape ``[]``) to every linear."""
    t: dict[str, torch.Tensor] = {}
    if head:
        t["model.embed_tokens.weight"] = torch.zeros(V, H, dtype=torch.bfloat16)
        t["lm_head.weight"] = torch.zeros(V, H, dtype=torch.bfloat16)
        t["model.norm.weight"] = torch.zeros(H, dtype=torch.bfloat16)
    shapes = {
        "self_attn.q_proj": (NH * D, H), "self_attn.k_proj": (NKV * D, H), "self_attn.v_proj": (NKV * D, H),
        "self_attn.o_proj": (H, NH * D), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H), "mlp.down_proj": (H, I),
    }
    for i in layers:
        p = f"model.layers.{i}."
        for name, shape in shapes.items():
            t[p + name + ".weight"] = torch.zeros(*shape, dtype=linear_dtype)
            if fp8_scales:
                t[p + name + ".weight_scale"] = torch.ones((), dtype=torch.float32)
                t[p + name + ".input_scale"] = torch.ones((), dtype=torch.float32)
        t[p + "input_layernorm.weight"] = torch.zeros(H, dtype=torch.bfloat16)
        t[p + "post_attention_layernorm.weight"] = torch.zeros(H, dtype=torch.bfloat16)
    return t


def config_bytes(filename: str) -> bytes:
    return (CONFIGS / filename).read_bytes()


@pytest.fixture
def hub():
    with FakeHub(tokens={"hf_granted": {"meta-llama/Llama-3.1-8B", "org/private"}, "hf_other": set()}) as server:
        yield server


def client(hub: FakeHub, token: str | None = None, timeout: float = 5.0) -> HubClient:
    return HubClient(endpoint=hub.url, token=token or "", timeout=timeout)


def test_single_file_checkpoint_is_summed_per_dtype_in_three_requests(hub):
    sha = hub.add_repo("meta-llama/Llama-3.1-8B", {
        "config.json": config_bytes("meta-llama__Llama-3.1-8B.json"),
        "model.safetensors": save(llama_tensors()),
        "README.md": b"# card",
    })
    meta = client(hub).lookup("meta-llama/Llama-3.1-8B", count_params=False)

    assert meta.sha == sha and meta.revision == "main"
    assert meta.config == load_config("meta-llama__Llama-3.1-8B.json")
    assert meta.source == f"Hugging Face Hub meta-llama/Llama-3.1-8B @ {sha[:7]}"
    assert meta.weights.params_by_dtype == {"BF16": 106816}
    assert meta.weights.bytes_by_dtype == {"BF16": 2 * 106816}
    assert meta.weights.source.startswith(f"safetensors headers of meta-llama/Llama-3.1-8B @ {sha[:7]}")
    assert meta.quant_config is None and not meta.remote_code and not meta.multimodal
    # model info, config.json, one ranged read of the safetensors header (< 100 kB)
    assert hub.requests == [
        ("GET", "/api/models/meta-llama/Llama-3.1-8B/revision/main"),
        ("GET", f"/meta-llama/Llama-3.1-8B/resolve/{sha}/config.json"),
        ("GET", f"/meta-llama/Llama-3.1-8B/resolve/{sha}/model.safetensors"),
    ]


def test_sharded_checkpoint_reads_every_shard_named_by_the_index(hub):
    shard1 = llama_tensors(layers=[0], head=False)
    shard2 = llama_tensors(layers=[1])
    index = {"metadata": {"total_size": 2 * 106816},
             "weight_map": {**{k: "model-00001-of-00002.safetensors" for k in shard1},
                            **{k: "model-00002-of-00002.safetensors" for k in shard2}}}
    sha = hub.add_repo("Qwen/Qwen2.5-7B-Instruct", {
        "config.json": config_bytes("Qwen__Qwen2.5-7B-Instruct.json"),
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": save(shard1),
        "model-00002-of-00002.safetensors": save(shard2),
    })
    meta = client(hub).lookup("Qwen/Qwen2.5-7B-Instruct", count_params=False)

    assert meta.weights.params_by_dtype == {"BF16": 106816}
    assert meta.weights.bytes_by_dtype == {"BF16": 213632}
    assert "(2 files)" in meta.weights.source
    assert hub.count("GET", f"/resolve/{sha}/model-0000") == 2
    assert len(hub.requests) == 5  # info, config, index, 2 shard headers


def test_fp8_checkpoint_with_separate_hf_quant_config(hub):
    quant = (CONFIGS / "extra" / "nvidia__Llama-3.1-70B-Instruct-FP8__hf_quant_config.json").read_bytes()
    hub.add_repo("nvidia/Llama-3.1-70B-Instruct-FP8", {
        "config.json": config_bytes("nvidia__Llama-3.1-70B-Instruct-FP8.json"),
        "hf_quant_config.json": quant,
        "model.safetensors": save(llama_tensors(torch.float8_e4m3fn, fp8_scales=True)),
    })
    meta = client(hub).lookup("nvidia/Llama-3.1-70B-Instruct-FP8")

    assert meta.quant_config == json.loads(quant)
    assert meta.quant_config["quantization"]["quant_algo"] == "FP8"
    assert meta.quant_config_file == "hf_quant_config.json"
    assert any("hf_quant_config.json" in n for n in meta.notes)
    # FP8 linears: 73728 elements, 1 byte each. Scales: 2 per linear x 14 linears = 28 F32 scalars.
    # BF16: embed 16384 + lm_head 16384 + norm 64 + 4 layer norms x 64 = 33088 elements.
    assert meta.weights.params_by_dtype == {"F8_E4M3": 73728, "F32": 28, "BF16": 33088}
    assert meta.weights.bytes_by_dtype == {"F8_E4M3": 73728, "F32": 112, "BF16": 66176}


def test_gated_repo_without_token_is_a_clear_error(hub):
    hub.add_repo("meta-llama/Llama-3.1-8B", {"config.json": config_bytes("meta-llama__Llama-3.1-8B.json")},
                 gated=True)
    with pytest.raises(GatedRepoError) as err:
        client(hub).lookup("meta-llama/Llama-3.1-8B")
    assert err.value.has_token is False
    assert "is gated" in err.value.message and "HF_TOKEN" in err.value.message
    assert err.value.field == "model"
    assert hub.count("GET", "/resolve/") == 1  # the 401 came from the file, as on the Hub


def test_gated_repo_with_a_token_not_granted_access_is_403(hub):
    hub.add_repo("meta-llama/Llama-3.1-8B", {"config.json": config_bytes("meta-llama__Llama-3.1-8B.json")},
                 gated=True)
    with pytest.raises(GatedRepoError) as err:
        client(hub, token="hf_other").lookup("meta-llama/Llama-3.1-8B")
    assert err.value.has_token is True
    assert "has not been granted access" in err.value.message


def test_gated_repo_with_a_granted_token_is_read(hub):
    hub.add_repo("meta-llama/Llama-3.1-8B", {"config.json": config_bytes("meta-llama__Llama-3.1-8B.json")},
                 gated=True)
    meta = client(hub, token="hf_granted").lookup("meta-llama/Llama-3.1-8B", count_params=False)
    assert meta.gated and meta.config["num_key_value_heads"] == 8
    assert "gated" in meta.notes[0]


def test_wrong_token_is_reported_as_such(hub):
    hub.add_repo("Qwen/Qwen3-8B", {"config.json": config_bytes("Qwen__Qwen3-8B.json")})
    with pytest.raises(InvalidTokenError) as err:
        client(hub, token="hf_typo").lookup("Qwen/Qwen3-8B")
    assert "rejected the token in HF_TOKEN" in err.value.message


def test_missing_repo_and_private_repo_without_token_are_not_found(hub):
    hub.add_repo("org/private", {"config.json": config_bytes("Qwen__Qwen3-8B.json")}, private=True)
    for repo_id in ("org/does-not-exist", "org/private"):
        with pytest.raises(RepoNotFoundError) as err:
            client(hub).lookup(repo_id)
        assert repo_id in err.value.message and "HF_TOKEN" in err.value.message
    assert client(hub, token="hf_granted").lookup("org/private", count_params=False).config["hidden_size"] == 4096


def test_unknown_revision(hub):
    hub.add_repo("Qwen/Qwen3-8B", {"config.json": config_bytes("Qwen__Qwen3-8B.json")})
    with pytest.raises(RevisionNotFoundError) as err:
        client(hub).lookup("Qwen/Qwen3-8B", "v9")
    assert "'v9'" in err.value.message


@pytest.mark.parametrize("text", ["llama", "a/b/c", "org/na me", "", "org/..", "-org/name"])
def test_malformed_model_ids_are_rejected_before_any_request(text):
    with pytest.raises(InvalidModelIdError):
        validate_model_id(text)


def test_hub_urls_are_accepted_as_ids():
    assert validate_model_id(" https://huggingface.co/Qwen/Qwen3-8B/ ") == "Qwen/Qwen3-8B"


def test_gguf_only_repo_says_so(hub):
    hub.add_repo("unsloth/Mistral-Small-24B-Instruct-2501-GGUF-only", {
        "README.md": b"# GGUF",
        "Mistral-Small-24B-Instruct-2501-Q4_K_M.gguf": b"GGUF\x03\x00\x00\x00",
        "Mistral-Small-24B-Instruct-2501-Q8_0.gguf": b"GGUF\x03\x00\x00\x00",
    })
    with pytest.raises(NoConfigError) as err:
        client(hub).lookup("unsloth/Mistral-Small-24B-Instruct-2501-GGUF-only")
    assert "GGUF-only" in err.value.message
    assert "Mistral-Small-24B-Instruct-2501-Q4_K_M.gguf" in err.value.message
    assert err.value.gguf_files == ["Mistral-Small-24B-Instruct-2501-Q4_K_M.gguf",
                                    "Mistral-Small-24B-Instruct-2501-Q8_0.gguf"]
    assert hub.count("GET", "/resolve/") == 0  # decided from the file list alone
    # the way out in each surface's words: the page's model field; the command line's --model / --config
    assert err.value.message.endswith("in the model field.") and "--" not in err.value.message
    assert "as --model, or give its config.json to manage.py estimate or check_compat with --config PATH." in \
        err.value.cli_message


def test_repo_without_config_and_without_gguf(hub):
    hub.add_repo("org/bin-only", {"pytorch_model.bin": b"\x80\x02"})
    with pytest.raises(NoConfigError) as err:
        client(hub).lookup("org/bin-only")
    assert "no config.json" in err.value.message and "GGUF" not in err.value.message
    # no upload on the page: its way out is the model field; the command line's is --config
    assert err.value.message.endswith("Enter the Hub id of a model with a config.json in the model field.")
    assert "upload" not in err.value.message and "--config" not in err.value.message
    assert err.value.cli_message.endswith("or give a config.json to manage.py estimate or check_compat with "
                                          "--config PATH.")


def test_remote_code_repo_is_read_but_never_executed(hub):
    # Phi-3-mini's config (SOURCES.md row 19) carries auto_map to the repo's configuration/modeling files.
    hub.add_repo("microsoft/Phi-3-mini-4k-instruct", {
        "config.json": config_bytes("microsoft__Phi-3-mini-4k-instruct.json"),
        "configuration_phi3.py": b"raise SystemExit('remote code must never run')\n",
        "modeling_phi3.py": b"raise SystemExit('remote code must never run')\n",
    })
    meta = client(hub).lookup("microsoft/Phi-3-mini-4k-instruct")

    assert meta.remote_code
    note = next(n for n in meta.notes if n.startswith("Remote code"))
    assert "not executed" in note and "hidden_size" in note and "num_key_value_heads" in note
    # transformers' built-in Phi3ForCausalLM counts 3,821,079,552 parameters, the figure SOURCES.md row 19
    # computed independently from the same config.
    assert meta.weights.params_by_dtype == {"BF16": 3_821_079_552}
    assert "auto_map code was ignored" in meta.weights.source
    assert hub.count("GET", ".py") == 0


def test_remote_code_architecture_unknown_to_transformers_states_assumptions(hub):
    config = load_config("microsoft__phi-2.json")
    config.pop("num_key_value_heads", None)
    config.update(architectures=["PhiCustomForCausalLM"], model_type="phi",
                  auto_map={"AutoModelForCausalLM": "modeling_custom.PhiCustomForCausalLM"})
    hub.add_repo("org/phi-custom", {"config.json": json.dumps(config).encode(), "modeling_custom.py": b""})
    meta = client(hub).lookup("org/phi-custom")

    assert meta.weights is None
    assert any("has no class PhiCustomForCausalLM" in n for n in meta.notes)
    note = next(n for n in meta.notes if n.startswith("Remote code"))
    assert "missing: num_key_value_heads" in note
    assert "assumed num_key_value_heads = num_attention_heads" in note


def test_multimodal_config_reads_text_config_and_counts_the_vision_tower(hub):
    hub.add_repo("mistralai/Mistral-Small-3.1-24B-Instruct-2503", {
        "config.json": config_bytes("mistralai__Mistral-Small-3.1-24B-Instruct-2503.json")})
    meta = client(hub).lookup("mistralai/Mistral-Small-3.1-24B-Instruct-2503")

    assert meta.multimodal
    assert any("text_config" in n and "'mistral'" in n for n in meta.notes)
    # SOURCES.md row 39: text tower 23,572,403,200 (untied lm_head); plus Pixtral's vision tower
    # 403,305,472 and the projector 35,652,608 that vLLM also loads.
    assert meta.weights.params_by_dtype == {"BF16": 23_572_403_200 + 403_305_472 + 35_652_608}
    assert meta.weights.source.startswith("parameters counted on the meta device")


def test_quantized_config_without_headers_is_left_to_the_engine(hub):
    hub.add_repo("Qwen/Qwen3-30B-A3B-FP8", {"config.json": config_bytes("Qwen__Qwen3-30B-A3B-FP8.json")})
    meta = client(hub).lookup("Qwen/Qwen3-30B-A3B-FP8")
    assert meta.weights is None
    assert "quantized (fp8)" in meta.notes[-1]


def test_a_slow_hub_times_out(hub):
    hub.add_repo("Qwen/Qwen3-8B", {"config.json": config_bytes("Qwen__Qwen3-8B.json")}, delay_s=1.5)
    start = time.monotonic()
    with pytest.raises(HubUnavailableError) as err:
        client(hub, timeout=0.3).lookup("Qwen/Qwen3-8B")
    assert time.monotonic() - start < 1.4
    assert "did not answer within 0.3 s" in err.value.message


def test_rate_limit_is_reported_as_unavailable(hub):
    hub.add_repo("Qwen/Qwen3-8B", {"config.json": config_bytes("Qwen__Qwen3-8B.json")}, status=429)
    with pytest.raises(HubUnavailableError) as err:
        client(hub).lookup("Qwen/Qwen3-8B")
    assert "429" in err.value.message


def test_endpoint_and_token_come_from_the_environment(hub, monkeypatch):
    hub.add_repo("meta-llama/Llama-3.1-8B", {"config.json": config_bytes("meta-llama__Llama-3.1-8B.json")},
                 gated=True)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", "hf_granted")
    meta = HubClient(timeout=5).lookup("meta-llama/Llama-3.1-8B", count_params=False)
    assert meta.config["rope_scaling"]["rope_type"] == "llama3"
    assert len(hub.requests) == 2


def test_an_index_naming_more_shards_than_the_cap_is_not_read_shard_by_shard(hub):
    """A repo anyone can publish: an index naming 2,000 shards would cost 2,001 Hub requests for one user
    request. Beyond MAX_SHARDS the headers are not read: the engine counts from the config, and a note says so."""
    from calculator.metadata.hub import MAX_SHARDS

    index = {"weight_map": {f"model.layers.{i}.w": f"model-{i:05d}-of-02000.safetensors" for i in range(2000)}}
    hub.add_repo("evil/many-shards", {
        "config.json": config_bytes("Qwen__Qwen2.5-7B-Instruct.json"),
        "model.safetensors.index.json": json.dumps(index).encode(),
    })
    meta = client(hub).lookup("evil/many-shards", count_params=False)
    assert meta.weights is None
    assert any(f"2,000 shards, more than the {MAX_SHARDS}" in n for n in meta.notes)
    assert len(hub.requests) == 3  # info, config, index: no shard header read


def test_an_index_whose_weight_map_is_a_list_is_a_note_not_a_500(hub):
    hub.add_repo("evil/list-map", {
        "config.json": config_bytes("Qwen__Qwen2.5-7B-Instruct.json"),
        "model.safetensors.index.json": json.dumps({"weight_map": ["a", "b"]}).encode(),
    })
    meta = client(hub).lookup("evil/list-map", count_params=False)
    assert meta.weights is None and any("no weight_map object" in n for n in meta.notes)


def test_an_mla_config_with_remote_code_is_not_said_to_miss_or_assume_a_head_dim():
    """DeepSeek-R1's config.json (auto_map: remote code) has no head_dim, and needs none: MLA's head sizes are
    qk_nope_head_dim / qk_rope_head_dim / v_head_dim (hidden / heads = 56 would be wrong); a dtype-less config's note
    names what each runtime does with float32."""
    from calculator.metadata.hub import describe_config

    notes, remote, _ = describe_config(load_config("deepseek-ai__DeepSeek-R1.json"))
    (note,) = [n for n in notes if n.startswith("Remote code")]
    assert remote and "head_dim" not in note
    llama = {k: v for k, v in load_config("meta-llama__Llama-3.1-8B-Instruct.json").items()
             if k not in ("torch_dtype", "dtype", "head_dim")}
    notes, _, _ = describe_config({**llama, "auto_map": {"AutoModel": "x.Y"}})
    assert any("assumed head_dim = hidden_size / num_attention_heads" in n for n in notes)
    assert any("vLLM loads such weights as bfloat16, SGLang as float16" in n for n in notes)
