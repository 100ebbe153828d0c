"""Tiny random-weight checkpoints of each architecture family, for the cross-check against vLLM's CPU build.

Each writer keeps what sizes the KV cache in that family — the layer pattern (sliding/global, attention/
Mamba, MLA, MTP), GQA grouping, explicit head sizes, MLA ranks, Mamba/linear-attention state shapes, MoE
routing — and shrinks everything else (4 layers, hidden 64-128, vocab 512). A model is built from the
transformers config class with ``AutoModelForCausalLM.from_config`` (seeded, float32) and saved with
``save_pretrained``, next to a byte-level BPE ``tokenizer.json`` trained on a few lines of text.

Nothing here downloads anything or runs remote code. Models are cached under ``var/tiny-models/<family>``:
a directory with a ``config.json`` and ``.complete`` marker is reused as is.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MODEL_DIR = ROOT / "var" / "tiny-models"
VOCAB = 512
# Families written as config.json only (vLLM's own config keys, not a transformers class): started with
# load_format="dummy", since the KV cache does not depend on the weights.
_CONFIG_ONLY = "config.json only"
_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "KV cache blocks hold keys and values for every token of a request.",
    "Sliding window attention keeps only the last tokens; global layers keep them all.",
    "Mamba layers keep one state per request, independent of the context length.",
    "Multi-head latent attention caches a compressed latent and a rotary key.",
    "Speculative decoding proposes tokens with a draft model and verifies them.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
] * 20

# Common tiny sizes: 4 layers, 4 query heads of 32 over 2 KV heads (GQA 2:1), vocab 512.
_BASE: dict[str, Any] = dict(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                             tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _llama() -> tuple[str, dict]:
    return "LlamaConfig", dict(_BASE, head_dim=32)


def _llama_mha() -> tuple[str, dict]:
    # MHA: KV heads = query heads, head size from hidden / heads (no head_dim key).
    cfg = dict(_BASE, num_key_value_heads=4)
    return "LlamaConfig", cfg


def _qwen3() -> tuple[str, dict]:
    # Qwen3: explicit head_dim (64) larger than hidden/heads (32), q/k RMSNorm, tied embeddings.
    return "Qwen3Config", dict(_BASE, head_dim=64, tie_word_embeddings=True, use_sliding_window=False)


def _gemma2() -> tuple[str, dict]:
    # Gemma 2: sliding window on alternate layers (even layers slide in vLLM's gemma2.py).
    return "Gemma2Config", dict(_BASE, head_dim=32, sliding_window=64, query_pre_attn_scalar=32,
                                tie_word_embeddings=True)


def _gemma3() -> tuple[str, dict]:
    # Gemma 3 (text-only Gemma3ForCausalLM): 5 sliding layers then 1 global; 6 layers so one is global.
    return "Gemma3TextConfig", dict(_BASE, num_hidden_layers=6, head_dim=32, sliding_window=64,
                                    query_pre_attn_scalar=32, tie_word_embeddings=True)


def _gemma4(kv_shared: int = 0) -> tuple[str, dict]:
    # Gemma 4 (text-only Gemma4ForCausalLM): 5 sliding layers of 4 KV heads x 32 then 1 global layer with its
    # own head size (global_head_dim 64) and KV heads (num_global_key_value_heads 1, attention_k_eq_v): twice
    # the head size, a quarter of the KV heads, so half the page, as in the published configs
    # (google/gemma-4-31B: 16 x 256 sliding, 4 x 512 global). ``kv_shared``: the last layers reuse an earlier
    # layer's cache (num_kv_shared_layers, the E2B/E4B configs).
    layers = 6 + kv_shared
    types = (["sliding_attention"] * 5 + ["full_attention"]) * (layers // 6) + \
        ["sliding_attention"] * (layers % 6)
    if kv_shared:
        types[-1] = "full_attention"
    return "Gemma4TextConfig", dict(_BASE, num_hidden_layers=layers, num_key_value_heads=4, head_dim=32,
                                    global_head_dim=64, num_global_key_value_heads=1, attention_k_eq_v=True,
                                    sliding_window=64, hidden_size_per_layer_input=0, layer_types=types,
                                    num_kv_shared_layers=kv_shared, tie_word_embeddings=True)


def _gpt_oss() -> tuple[str, dict]:
    # gpt-oss: attention sinks, alternating sliding (128) / full layers, 4 experts top-2.
    return "GptOssConfig", dict(_BASE, head_dim=32, sliding_window=64, num_local_experts=4,
                                num_experts_per_tok=2, intermediate_size=128)


def _mixtral() -> tuple[str, dict]:
    return "MixtralConfig", dict(_BASE, head_dim=32, num_local_experts=4, num_experts_per_tok=2,
                                 sliding_window=None)


def _qwen3_moe() -> tuple[str, dict]:
    return "Qwen3MoeConfig", dict(_BASE, head_dim=32, num_experts=4, num_experts_per_tok=2,
                                  moe_intermediate_size=64, decoder_sparse_step=1, mlp_only_layers=[],
                                  use_sliding_window=False)


def _deepseek_v2() -> tuple[str, dict]:
    # MLA: kv_lora_rank 64 + rope 16 = one latent "head" of 80; MoE after the first dense layer.
    cfg = dict(_BASE, num_key_value_heads=4, kv_lora_rank=64, q_lora_rank=None, qk_rope_head_dim=16,
               qk_nope_head_dim=32, v_head_dim=32, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
               moe_intermediate_size=64, first_k_dense_replace=1, n_group=1, topk_group=1)
    return "DeepseekV2Config", cfg


def _deepseek_v3(mtp: int = 0) -> tuple[str, dict]:
    cfg = dict(_BASE, num_key_value_heads=4, kv_lora_rank=64, q_lora_rank=32, qk_rope_head_dim=16,
               qk_nope_head_dim=32, v_head_dim=32, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
               moe_intermediate_size=64, first_k_dense_replace=1, n_group=1, topk_group=1,
               topk_method="noaux_tc", scoring_func="sigmoid")
    if mtp:
        cfg["num_nextn_predict_layers"] = mtp
    return "DeepseekV3Config", cfg


def _qwen3_next() -> tuple[str, dict]:
    # Gated delta-net layers with full attention every second layer; MoE MLPs.
    cfg = dict(_BASE, head_dim=32, full_attention_interval=2, linear_num_key_heads=2, linear_num_value_heads=4,
               linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4, num_experts=4,
               num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=64,
               decoder_sparse_step=1, mlp_only_layers=[],
               layer_types=["linear_attention", "full_attention"] * 2)
    return "Qwen3NextConfig", cfg


def _granite_hybrid() -> tuple[str, dict]:
    # Granite 4 (GraniteMoeHybrid): Mamba-2 layers with one attention layer in four.
    # d_state 64: in bfloat16 the state (float32 SSM on the CPU) outgrows a 128-token attention page, so
    # vLLM raises the attention block size (platforms/interface.py _align_hybrid_block_size).
    cfg = dict(_BASE, num_hidden_layers=4, layer_types=["mamba", "mamba", "attention", "mamba"],
               mamba_n_heads=4, mamba_d_head=32, mamba_n_groups=1, mamba_d_state=64, mamba_d_conv=4,
               mamba_expand=1, num_local_experts=0, shared_intermediate_size=256, position_embedding_type="rope")
    return "GraniteMoeHybridConfig", cfg


def _bamba() -> tuple[str, dict]:
    cfg = dict(_BASE, attn_layer_indices=[2], mamba_n_heads=4, mamba_d_head=32, mamba_n_groups=1,
               mamba_d_state=16, mamba_d_conv=4, mamba_expand=1)
    return "BambaConfig", cfg


def _nemotron_h() -> tuple[str, dict]:
    cfg = dict(_BASE, hybrid_override_pattern="M-M*", mamba_num_heads=4, mamba_head_dim=32, n_groups=1,
               ssm_state_size=64, conv_kernel=4, head_dim=32, expand=1)
    return "NemotronHConfig", cfg


def _jamba() -> tuple[str, dict]:
    # Jamba: Mamba-1 layers with attention at layer 1 and 3 (period 2, offset 1), dense MLPs.
    cfg = dict(_BASE, attn_layer_period=2, attn_layer_offset=1, num_experts=1, expert_layer_period=2,
               expert_layer_offset=1, mamba_d_state=16, mamba_d_conv=4, mamba_expand=1, mamba_dt_rank=8,
               use_mamba_kernels=False)
    return "JambaConfig", cfg


def _deepseek_v32() -> tuple[str, dict]:
    # DeepSeek-V3.2: the tiny DeepSeek-V3 with the lightning indexer's keys (index_topk, index_head_dim 128,
    # index_n_heads). Config only: vLLM starts it with dummy weights (load_format="dummy").
    cfg = dict(_deepseek_v3()[1], index_topk=64, index_head_dim=128, index_n_heads=4,
               architectures=["DeepseekV32ForCausalLM"], model_type="deepseek_v32", torch_dtype="float32",
               rope_theta=10000, hidden_act="silu", rms_norm_eps=1e-6)
    return _CONFIG_ONLY, cfg


def _kimi_linear() -> tuple[str, dict]:
    # Kimi Linear: KDA layers 1-3 and one MLA layer (4), 1-based as in moonshotai/Kimi-Linear-48B-A3B-Instruct;
    # MoE after the first dense layer. Config only (vLLM's KimiLinearConfig keys; dummy weights).
    cfg = dict(_BASE, architectures=["KimiLinearForCausalLM"], model_type="kimi_linear", torch_dtype="float32",
               num_key_value_heads=4, head_dim=32, kv_lora_rank=64, q_lora_rank=None, qk_nope_head_dim=32,
               qk_rope_head_dim=16, v_head_dim=32, mla_use_nope=True, num_experts=4, num_experts_per_token=2,
               num_shared_experts=1, moe_intermediate_size=64, first_k_dense_replace=1, moe_layer_freq=1,
               moe_renormalize=True, moe_router_activation_func="sigmoid", num_expert_group=1, topk_group=1,
               use_grouped_topk=True, routed_scaling_factor=2.446, rms_norm_eps=1e-5, rope_theta=10000.0,
               model_max_length=4096, num_nextn_predict_layers=0,
               linear_attn_config={"full_attn_layers": [4], "kda_layers": [1, 2, 3], "head_dim": 32, "num_heads": 4,
                                   "short_conv_kernel_size": 4})
    return _CONFIG_ONLY, cfg


def _eagle_llama() -> tuple[str, dict]:
    # An EAGLE-1 head for the tiny Llama: one decoder layer + fc (2·hidden → hidden); written in the EAGLE
    # checkpoint layout by _write_eagle (vllm/model_executor/models/llama_eagle.py).
    return "LlamaConfig", dict(_BASE, num_hidden_layers=1, head_dim=32)


def _eagle3_llama() -> tuple[str, dict]:
    # An EAGLE-3 head (LlamaForCausalLMEagle3 -> vllm/model_executor/models/llama_eagle3.py) shaped like
    # thoughtworks/GLM-4.7-Flash-Eagle3: one Llama layer with plain GQA attention (2 KV heads x 32), the
    # target's hidden size, for an MLA target. Config only (vLLM's keys; dummy weights).
    cfg = dict(_BASE, architectures=["LlamaForCausalLMEagle3"], model_type="llama", torch_dtype="float32",
               num_hidden_layers=1, head_dim=32, draft_vocab_size=VOCAB, hidden_act="silu", rms_norm_eps=1e-5,
               rope_theta=10000.0, attention_bias=False)
    return _CONFIG_ONLY, cfg


def _draft_llama() -> tuple[str, dict]:
    # A 2-layer draft Llama sharing the target's vocabulary (draft_model speculation).
    return "LlamaConfig", dict(_BASE, num_hidden_layers=2, head_dim=32)


FAMILIES: dict[str, Callable[[], tuple[str, dict]]] = {
    "llama": _llama,
    "llama-mha": _llama_mha,
    "qwen3": _qwen3,
    "gemma2": _gemma2,
    "gemma3": _gemma3,
    "gemma4": _gemma4,
    "gemma4-kv-shared": lambda: _gemma4(kv_shared=4),
    "gpt-oss": _gpt_oss,
    "mixtral": _mixtral,
    "qwen3-moe": _qwen3_moe,
    "deepseek-v2": _deepseek_v2,
    "deepseek-v3": _deepseek_v3,
    "deepseek-v3-mtp": lambda: _deepseek_v3(mtp=1),
    "qwen3-next": _qwen3_next,
    "granite4-hybrid": _granite_hybrid,
    "bamba": _bamba,
    "nemotron-h": _nemotron_h,
    "jamba": _jamba,
    "deepseek-v32": _deepseek_v32,
    "kimi-linear": _kimi_linear,
    "draft-llama": _draft_llama,
    "eagle-llama": _eagle_llama,
    "eagle3-llama": _eagle3_llama,
}


_EAGLE_FAMILIES = {"eagle-llama"}


def _write_eagle(model, config, path: Path) -> None:
    """Save ``model`` in the EAGLE-1 head layout vLLM's ``EagleLlamaForCausalLM`` loads
    (``vllm/model_executor/models/llama_eagle.py:63-143,187-196``): base-model names without ``model.``,
    no ``lm_head`` (shared with the target), no final norm, no input norm on layer 0, plus
    ``fc.weight`` of shape ``(hidden, 2·hidden)``."""
    import torch
    from safetensors.torch import save_file

    state = {k.removeprefix("model."): v.contiguous() for k, v in model.state_dict().items()
             if not k.startswith("lm_head") and k not in ("model.norm.weight", "model.layers.0.input_layernorm.weight")}
    h = config.hidden_size
    state["fc.weight"] = torch.randn(h, 2 * h, dtype=torch.float32) * 0.02
    save_file(state, str(path / "model.safetensors"), metadata={"format": "pt"})
    config.architectures = ["LlamaForCausalLM"]  # vLLM maps it to EagleLlamaForCausalLM for method eagle
    config.save_pretrained(str(path))


def write_tokenizer(path: Path, vocab_size: int = VOCAB) -> None:
    """A byte-level BPE tokenizer of at most ``vocab_size`` entries (specials ``<pad>`` ``<s>`` ``</s>``
    ``<unk>`` at ids 0-3), saved as tokenizer.json + tokenizer_config.json. BPE stops when the corpus runs
    out of merges, so the tokenizer may be smaller than the model's embedding (as with padded vocabularies)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>")
    fast.save_pretrained(str(path))


def tiny_config(family: str) -> tuple[str, dict]:
    """``(transformers config class name, kwargs)`` of a family's tiny model.

    Raises:
        KeyError: unknown family (see ``FAMILIES``).
    """
    return FAMILIES[family]()


def write_tiny_model(family: str, root: Path | None = None, force: bool = False) -> Path:
    """Write (or reuse) the tiny checkpoint of ``family`` and return its directory.

    The weights are float32, drawn with ``torch.manual_seed(0)``; the tokenizer is shared by all families.

    Raises:
        KeyError: unknown family.
        Exception: whatever transformers raises when it cannot build the family's model class; the
        directory is then left without its ``.complete`` marker.
    """
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    path = (root or MODEL_DIR) / family
    if (path / ".complete").exists() and not force:
        return path
    path.mkdir(parents=True, exist_ok=True)
    cls_name, kwargs = tiny_config(family)
    if cls_name == _CONFIG_ONLY:
        (path / "config.json").write_text(json.dumps(kwargs, indent=2))
        write_tokenizer(path)
        (path / ".complete").write_text("ok\n")
        return path
    config = getattr(transformers, cls_name)(**kwargs)
    config.dtype = "float32"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    if family in _EAGLE_FAMILIES:
        _write_eagle(model, config, path)
    else:
        model.save_pretrained(str(path), safe_serialization=True)
    write_tokenizer(path)
    # Keep the model's own config.json (as vLLM reads it), but make sure dtype is recorded.
    cfg_path = path / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.setdefault("torch_dtype", "float32")
    if cls_name == "Gemma4TextConfig" and "per_layer_config" in cfg:
        # transformers >= 5.6 writes the global layers' overrides as per_layer_config; the published Gemma 4
        # configs carry global_head_dim / num_global_key_value_heads, which it still reads (and vLLM with it)
        del cfg["per_layer_config"]
        cfg.update(global_head_dim=kwargs["global_head_dim"],
                   num_global_key_value_heads=kwargs["num_global_key_value_heads"])
    cfg_path.write_text(json.dumps(cfg, indent=2))
    (path / ".complete").write_text("ok\n")
    return path


def read_config(path: Path) -> dict:
    """The ``config.json`` of a written tiny model as a dict (what the engine and vLLM both read)."""
    return json.loads((Path(path) / "config.json").read_text())
