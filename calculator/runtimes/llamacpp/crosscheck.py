"""Oracle: tiny GGUFs written with ``gguf.GGUFWriter``, loaded by llama.cpp (llama-cpp-python, CPU build) in a
subprocess; the ``llama_kv_cache: size = ...``, ``KV buffer size`` and ``model buffer size`` lines it logs are
compared with ``memory.plan()`` exactly, and its ``CPU compute buffer size`` line with the plan's compute-buffer
estimate within the estimate's stated error (``memory.compute_buffers``; on this CPU build every buffer lives on
the CPU, so the single-device peak is checked, not the GPU / host split of a GPU build).

``QuantCase`` rows also quantize the tiny F16 model with llama.cpp's own ``llama_model_quantize`` to a file type
(Q4_K_M, Q3_K_M, IQ4_XS, MXFP4_MOE, ...) and require :func:`.quant_rules.derive_meta`, which knows only the
equivalent Transformers config and the file type, to give every tensor the type llama.cpp wrote (and the same
file order), and the model buffers llama.cpp logs when it loads the quantized file.

``write_tiny_gguf`` lays out a model with the tensor names and shapes llama.cpp's loader requires for the
architecture (src/models/<arch>.cpp ``load_arch_tensors``) and a GPT-2 style vocabulary (tokens + one merge).
``run_cases()`` needs ``llama_cpp`` importable (``pip install llama-cpp-python==0.3.36``, optional group
``llamacpp``); without it ``LlamaCppMissing`` is raised.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from calculator.runtimes.llamacpp.gguf_meta import read_gguf
from calculator.runtimes.llamacpp.memory import MiB, plan
from calculator.runtimes.llamacpp.quant_rules import FTYPES, derive_meta

TYPE_IDS = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "iq4_nl": 20, "bf16": 30}


class LlamaCppMissing(RuntimeError):
    pass


def write_tiny_gguf(path: str | Path, arch: str, *, n_layer: int = 4, n_embd: int = 64, n_head: int = 4,
                    n_head_kv: int = 2, head_dim: int = 16, n_ff: int = 128, n_vocab: int = 256,
                    n_ctx_train: int = 4096, sliding_window: int | None = None, n_expert: int = 0,
                    n_expert_used: int = 0, n_ff_exp: int = 32, weight_type: str = "F16",
                    tied: bool = False, swa_pattern: list[bool] | None = None, head_dim_swa: int | None = None,
                    shared_kv_layers: int = 0, vocab: tuple[list[str], list[str], int, int] | None = None,
                    n_head_kv_full: int | None = None, k_eq_v: bool = False, n_embd_per_layer: int = 0,
                    layer_out_scale: bool = False) -> Path:
    """Write a loadable tiny model. ``arch``: llama, qwen3, qwen3moe, gemma3, gpt-oss, gemma4 (``swa_pattern``,
    ``head_dim_swa``, ``shared_kv_layers``; ``n_head_kv_full``: KV heads of the full-attention layers, written as
    a per-layer head_count_kv array; ``k_eq_v``: no attn_v on full layers; ``n_embd_per_layer``: per-layer
    embeddings; ``layer_out_scale``: blk.N.layer_output_scale; ``n_expert``: the router, its scale, fused
    ffn_gate_up_exps, ffn_down_exps and its scale, the three extra norms, as conversion/gemma.py writes Gemma 4's
    MoE). Weights are zero blocks of ``weight_type`` (any ggml type name)
    for matrices and F32 for norms. ``vocab``: ``(tokens in id order, merges "a b", bos id, eos id)`` of a
    byte-level BPE tokenizer to use instead of the built-in placeholder vocabulary (then ``n_vocab`` is
    ``len(tokens)``); every token is typed normal either way."""
    import logging

    import gguf

    logging.getLogger("gguf.gguf_writer").setLevel(logging.WARNING)
    path = Path(path)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    w.add_context_length(n_ctx_train)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    if arch == "gemma4" and n_head_kv_full is not None:
        w.add_head_count_kv([n_head_kv if flag else n_head_kv_full for flag in swa_pattern])
    else:
        w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(1 if weight_type == "F16" else 0 if weight_type == "F32" else 7)
    if sliding_window:
        w.add_sliding_window(sliding_window)
    if swa_pattern is not None:
        w.add_sliding_window_pattern(swa_pattern)
    if head_dim_swa is not None:
        w.add_key_length_swa(head_dim_swa)
        w.add_value_length_swa(head_dim_swa)
    if arch == "gemma4":
        w.add_shared_kv_layers(shared_kv_layers)
        w.add_embedding_length_per_layer_input(n_embd_per_layer)
    if n_expert:
        w.add_expert_count(n_expert)
        w.add_expert_used_count(n_expert_used)
        w.add_expert_feed_forward_length(n_ff_exp)
    # GPT-2 style vocabulary: byte-ish tokens and one merge (the team's note: llama.cpp loads it).
    tokens, merges, bos, eos = vocab or ([f"t{i}" for i in range(n_vocab - 3)] + ["a", "b", "ab"], ["a b"], 0, 1)
    n_vocab = len(tokens)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * n_vocab)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)

    qt = getattr(gguf.GGMLQuantizationType, weight_type)

    def mat(name, rows, cols, *extra):
        # numpy shape is (extra..., rows, cols): GGUF stores ne0 = cols first
        arr = np.zeros((*extra, rows, cols), dtype=np.float32)
        if weight_type == "F16":
            w.add_tensor(name, arr.astype(np.float16))
        elif weight_type == "F32":
            w.add_tensor(name, arr)
        else:
            # zero blocks of the quantized type (a zero scale decodes to zeros): rows of cols/block blocks
            block, size = gguf.GGML_QUANT_SIZES[qt]
            data = np.zeros((*extra, rows, cols // block * size), dtype=np.uint8)
            w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qt)

    def vec(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    mat("token_embd.weight", n_vocab, n_embd)
    vec("output_norm.weight", n_embd)
    if not tied:
        mat("output.weight", n_vocab, n_embd)
    if arch == "gpt-oss":
        # src/models/openai-moe.cpp load_arch_tensors: biases, attention sinks, MoE experts with biases
        for i in range(n_layer):
            p = f"blk.{i}."
            vec(p + "attn_norm.weight", n_embd)
            vec(p + "post_attention_norm.weight", n_embd)
            mat(p + "attn_q.weight", n_head * head_dim, n_embd)
            mat(p + "attn_k.weight", n_head_kv * head_dim, n_embd)
            mat(p + "attn_v.weight", n_head_kv * head_dim, n_embd)
            mat(p + "attn_output.weight", n_embd, n_head * head_dim)
            vec(p + "attn_output.bias", n_embd)
            vec(p + "attn_sinks.weight", n_head)
            w.add_tensor(p + "ffn_gate_inp.weight", np.zeros((n_expert, n_embd), dtype=np.float32))
            vec(p + "ffn_gate_inp.bias", n_expert)
            mat(p + "ffn_gate_exps.weight", n_ff_exp, n_embd, n_expert)
            mat(p + "ffn_up_exps.weight", n_ff_exp, n_embd, n_expert)
            mat(p + "ffn_down_exps.weight", n_embd, n_ff_exp, n_expert)
            w.add_tensor(p + "ffn_gate_exps.bias", np.zeros((n_expert, n_ff_exp), dtype=np.float32))
            w.add_tensor(p + "ffn_up_exps.bias", np.zeros((n_expert, n_ff_exp), dtype=np.float32))
            w.add_tensor(p + "ffn_down_exps.bias", np.zeros((n_expert, n_embd), dtype=np.float32))
        n_layer = 0  # the generic layer loop below is skipped
    if arch == "gemma4":
        # src/models/gemma4.cpp load_arch_tensors (:36-155); layers past n_layer - shared_kv_layers have no K
        # (they reuse an earlier layer's cache)
        assert swa_pattern is not None and head_dim_swa is not None
        if n_embd_per_layer:
            mat("per_layer_token_embd.weight", n_vocab, n_embd_per_layer * n_layer)
            mat("per_layer_model_proj.weight", n_embd_per_layer * n_layer, n_embd)
            vec("per_layer_proj_norm.weight", n_embd_per_layer)
        rope_done = False
        for i in range(n_layer):
            p = f"blk.{i}."
            hd = head_dim_swa if swa_pattern[i] else head_dim
            kv = n_head_kv if (swa_pattern[i] or n_head_kv_full is None) else n_head_kv_full
            has_kv = i < n_layer - shared_kv_layers
            vec(p + "attn_norm.weight", n_embd)
            mat(p + "attn_q.weight", n_head * hd, n_embd)
            if has_kv:
                mat(p + "attn_k.weight", kv * hd, n_embd)
                if not (k_eq_v and not swa_pattern[i]):
                    mat(p + "attn_v.weight", kv * hd, n_embd)
                vec(p + "attn_k_norm.weight", hd)
            mat(p + "attn_output.weight", n_embd, n_head * hd)
            vec(p + "attn_q_norm.weight", hd)
            vec(p + "post_attention_norm.weight", n_embd)
            if layer_out_scale:
                vec(p + "layer_output_scale.weight", 1)
            if not swa_pattern[i] and not rope_done:
                vec("rope_freqs.weight", hd // 2)
                rope_done = True
            vec(p + "ffn_norm.weight", n_embd)
            mat(p + "ffn_gate.weight", n_ff, n_embd)
            mat(p + "ffn_up.weight", n_ff, n_embd)
            mat(p + "ffn_down.weight", n_embd, n_ff)
            vec(p + "post_ffw_norm.weight", n_embd)
            if n_expert:
                w.add_tensor(p + "ffn_gate_inp.weight", np.zeros((n_expert, n_embd), dtype=np.float32))
                vec(p + "ffn_gate_inp.scale", n_embd)
                mat(p + "ffn_gate_up_exps.weight", 2 * n_ff_exp, n_embd, n_expert)
                mat(p + "ffn_down_exps.weight", n_embd, n_ff_exp, n_expert)
                vec(p + "ffn_down_exps.scale", n_expert)
                vec(p + "pre_ffw_norm_2.weight", n_embd)
                vec(p + "post_ffw_norm_1.weight", n_embd)
                vec(p + "post_ffw_norm_2.weight", n_embd)
            if n_embd_per_layer:
                mat(p + "inp_gate.weight", n_embd_per_layer, n_embd)
                mat(p + "proj.weight", n_embd, n_embd_per_layer)
                vec(p + "post_norm.weight", n_embd)
        n_layer = 0
    for i in range(n_layer):
        p = f"blk.{i}."
        vec(p + "attn_norm.weight", n_embd)
        mat(p + "attn_q.weight", n_head * head_dim, n_embd)
        mat(p + "attn_k.weight", n_head_kv * head_dim, n_embd)
        mat(p + "attn_v.weight", n_head_kv * head_dim, n_embd)
        mat(p + "attn_output.weight", n_embd, n_head * head_dim)
        if arch in ("qwen3", "qwen3moe", "gemma3"):
            vec(p + "attn_q_norm.weight", head_dim)
            vec(p + "attn_k_norm.weight", head_dim)
        if arch == "gemma3":
            vec(p + "post_attention_norm.weight", n_embd)
            vec(p + "post_ffw_norm.weight", n_embd)
        vec(p + "ffn_norm.weight", n_embd)
        if n_expert:
            w.add_tensor(p + "ffn_gate_inp.weight", np.zeros((n_expert, n_embd), dtype=np.float32))
            mat(p + "ffn_gate_exps.weight", n_ff_exp, n_embd, n_expert)
            mat(p + "ffn_up_exps.weight", n_ff_exp, n_embd, n_expert)
            mat(p + "ffn_down_exps.weight", n_embd, n_ff_exp, n_expert)
        else:
            mat(p + "ffn_gate.weight", n_ff, n_embd)
            mat(p + "ffn_up.weight", n_ff, n_embd)
            mat(p + "ffn_down.weight", n_embd, n_ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


class Case(BaseModel):
    name: str
    arch: str
    model: dict = {}
    n_ctx: int
    n_seq_max: int = 1
    kv_unified: bool = False
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: str = "auto"
    swa_full: bool = False
    n_ubatch: int = 512
    use_mmap: bool = True


#: The cases the oracle runs: four architectures (dense llama / qwen3, MoE qwen3moe, gemma3 with a sliding
#: window), padding, per-sequence vs unified caches, quantized K/V, --swa-full.
CASES = [
    Case(name="llama-ctx1000", arch="llama", n_ctx=1000),
    Case(name="llama-np3-split", arch="llama", n_ctx=5000, n_seq_max=3),
    Case(name="llama-np3-unified", arch="llama", n_ctx=5000, n_seq_max=3, kv_unified=True),
    Case(name="llama-q8_0-fa", arch="llama", model={"head_dim": 32, "n_embd": 128}, n_ctx=2048, type_k="q8_0",
         type_v="q8_0", flash_attn="on"),
    Case(name="llama-q4_0-k-fa-off", arch="llama", n_ctx=2048, type_k="q4_0", type_v="f16", flash_attn="off"),
    Case(name="llama-q8_0-weights", arch="llama", model={"weight_type": "Q8_0", "n_embd": 128, "head_dim": 32},
         n_ctx=512),
    Case(name="llama-f32-tied", arch="llama", model={"weight_type": "F32", "tied": True}, n_ctx=256),
    Case(name="qwen3-tied", arch="qwen3", model={"tied": True, "head_dim": 32}, n_ctx=3000),
    Case(name="qwen3moe", arch="qwen3moe", model={"n_expert": 8, "n_expert_used": 2, "head_dim": 32}, n_ctx=4096,
         type_k="q5_1", type_v="iq4_nl", flash_attn="on"),
    Case(name="gemma3-swa", arch="gemma3", model={"n_layer": 8, "sliding_window": 128}, n_ctx=4096),
    Case(name="gemma3-swa-np2-unified", arch="gemma3", model={"n_layer": 8, "sliding_window": 128}, n_ctx=8192,
         n_seq_max=2, kv_unified=True),
    Case(name="gemma3-swa-np2-split", arch="gemma3", model={"n_layer": 8, "sliding_window": 128}, n_ctx=8192,
         n_seq_max=2),
    Case(name="gemma3-ub1024-fa-off", arch="gemma3", model={"n_layer": 8, "sliding_window": 300}, n_ctx=6000,
         n_ubatch=1024, flash_attn="off"),
    Case(name="llama-no-mmap", arch="llama", model={"weight_type": "Q8_0", "n_embd": 128, "head_dim": 32},
         n_ctx=512, use_mmap=False),
    Case(name="llama-q4_0-weights-repack", arch="llama", model={"weight_type": "Q4_0", "n_embd": 128,
                                                               "head_dim": 32}, n_ctx=512),
    Case(name="llama-q4_k-weights-repack", arch="llama", model={"weight_type": "Q4_K", "n_embd": 256, "n_ff": 256,
                                                               "head_dim": 64}, n_ctx=512),
    Case(name="qwen3moe-iq4_nl-experts", arch="qwen3moe", model={"n_expert": 8, "n_expert_used": 2, "head_dim": 32,
                                                                "weight_type": "IQ4_NL"}, n_ctx=1024),
    Case(name="llama-ctx0-train", arch="llama", model={"n_ctx_train": 3000}, n_ctx=0),
    Case(name="gpt-oss-swa-np4-unified", arch="gpt-oss",
         model={"n_layer": 6, "sliding_window": 128, "n_expert": 4, "n_expert_used": 2, "head_dim": 32},
         n_ctx=4096, n_seq_max=4, kv_unified=True),
    Case(name="gpt-oss-swa-q8_0", arch="gpt-oss",
         model={"n_layer": 6, "sliding_window": 128, "n_expert": 4, "n_expert_used": 2, "head_dim": 32,
                "weight_type": "MXFP4"},
         n_ctx=3000, type_k="q8_0", type_v="q8_0", flash_attn="on"),
    Case(name="gemma4-shared-kv", arch="gemma4",
         model={"n_layer": 8, "sliding_window": 128, "head_dim": 64, "head_dim_swa": 32, "shared_kv_layers": 2,
                "swa_pattern": [True, True, True, True, True, False, True, False]},
         n_ctx=4096),
    Case(name="gemma4-shared-kv-fa-off", arch="gemma4",
         model={"n_layer": 8, "sliding_window": 128, "head_dim": 64, "head_dim_swa": 32, "shared_kv_layers": 2,
                "swa_pattern": [True, True, True, True, True, False, True, False]},
         n_ctx=4096, flash_attn="off"),
    Case(name="gemma3-swa-full", arch="gemma3", model={"n_layer": 8, "sliding_window": 128}, n_ctx=4096,
         swa_full=True),
]

class QuantCase(Case):
    """A tiny F16 model quantized by llama.cpp to ``ftype``; checked per tensor type and per model buffer."""

    ftype: str


def tiny_hf_config(arch: str, model: dict) -> dict:
    """The Transformers ``config.json`` a :func:`write_tiny_gguf` model corresponds to (what a user would give
    the calculator): the same layer count, widths, heads, vocabulary, experts and tying."""
    d = {"n_layer": 4, "n_embd": 64, "n_head": 4, "n_head_kv": 2, "head_dim": 16, "n_ff": 128, "n_vocab": 256,
         "n_ctx_train": 4096, "n_expert": 0, "n_expert_used": 0, "n_ff_exp": 32, "tied": False} | model
    cfg = {"model_type": {"llama": "llama", "qwen3": "qwen3", "qwen3moe": "qwen3_moe", "gemma3": "gemma3_text",
                          "gemma4": "gemma4_text"}[arch],
           "num_hidden_layers": d["n_layer"], "hidden_size": d["n_embd"], "num_attention_heads": d["n_head"],
           "num_key_value_heads": d["n_head_kv"], "head_dim": d["head_dim"], "intermediate_size": d["n_ff"],
           "vocab_size": d["n_vocab"], "tie_word_embeddings": d["tied"], "max_position_embeddings": d["n_ctx_train"]}
    if d["n_expert"]:
        cfg |= {"num_experts": d["n_expert"], "num_experts_per_tok": d["n_expert_used"],
                "moe_intermediate_size": d["n_ff_exp"]}
    if arch == "gemma3" and d.get("sliding_window"):
        cfg["sliding_window"] = d["sliding_window"]
    if arch == "gemma4":
        # the Gemma 4 text_config keys conversion/gemma.py reads (:670-738): head_dim is the sliding layers',
        # global_head_dim the full layers' (write_tiny_gguf's head_dim / head_dim_swa)
        cfg |= {"model_type": "gemma4_text", "head_dim": d["head_dim_swa"], "global_head_dim": d["head_dim"],
                "layer_types": ["sliding_attention" if f else "full_attention" for f in d["swa_pattern"]],
                "sliding_window": d["sliding_window"], "num_kv_shared_layers": d.get("shared_kv_layers", 0),
                "attention_k_eq_v": d.get("k_eq_v", False), "hidden_size_per_layer_input": d.get("n_embd_per_layer", 0),
                "enable_moe_block": bool(d["n_expert"]), "tie_word_embeddings": d["tied"]}
        if d.get("n_head_kv_full") is not None:
            cfg["num_global_key_value_heads"] = d["n_head_kv_full"]
        if d["n_expert"]:
            cfg |= {"top_k_experts": d["n_expert_used"]}
    return cfg


_DENSE16 = {"n_layer": 16, "n_embd": 256, "n_head": 4, "n_head_kv": 1, "head_dim": 64, "n_ff": 512, "n_vocab": 512}
_MOE8 = {"n_layer": 8, "n_embd": 256, "n_head": 4, "n_head_kv": 2, "head_dim": 64, "n_ff": 512, "n_vocab": 512,
         "n_expert": 8, "n_expert_used": 2, "n_ff_exp": 256}
_TIED = {"n_layer": 8, "n_embd": 256, "n_head": 4, "n_head_kv": 4, "head_dim": 64, "n_ff": 320, "n_vocab": 512,
         "tied": True}

#: Quantization cases: a 16-layer GQA-4 llama (use_more_bits layer pattern, n_gqa >= 4 rules), an 8-expert MoE
#: (the n_expert == 8 rules, MXFP4_MOE), a tied qwen3 whose ffn rows (320) are no whole number of 256-blocks
#: (tensor_type_fallback) and a tied gemma3 with a sliding window.
QUANT_CASES = [
    QuantCase(name="quant-llama-Q4_K_M", arch="llama", model=_DENSE16, ftype="Q4_K_M", n_ctx=512),
    QuantCase(name="quant-llama-Q3_K_M", arch="llama", model=_DENSE16, ftype="Q3_K_M", n_ctx=512),
    QuantCase(name="quant-llama-Q5_K_S", arch="llama", model=_DENSE16, ftype="Q5_K_S", n_ctx=512),
    QuantCase(name="quant-llama-IQ4_XS", arch="llama", model=_DENSE16, ftype="IQ4_XS", n_ctx=512),
    QuantCase(name="quant-llama-Q2_K", arch="llama", model=_DENSE16, ftype="Q2_K", n_ctx=512),
    QuantCase(name="quant-llama-Q4_0-no-mmap", arch="llama", model=_DENSE16, ftype="Q4_0", n_ctx=512,
              use_mmap=False),
    QuantCase(name="quant-qwen3moe-Q4_K_M", arch="qwen3moe", model=_MOE8, ftype="Q4_K_M", n_ctx=512),
    QuantCase(name="quant-qwen3moe-IQ3_M", arch="qwen3moe", model=_MOE8, ftype="IQ3_M", n_ctx=512),
    QuantCase(name="quant-qwen3moe-MXFP4_MOE", arch="qwen3moe", model=_MOE8, ftype="MXFP4_MOE", n_ctx=512),
    QuantCase(name="quant-qwen3-tied-Q6_K-fallback", arch="qwen3", model=_TIED, ftype="Q6_K", n_ctx=512),
    QuantCase(name="quant-qwen3-tied-Q4_K_M-fallback", arch="qwen3", model=_TIED, ftype="Q4_K_M", n_ctx=512),
    QuantCase(name="quant-gemma3-Q8_0", arch="gemma3", model=_TIED | {"n_ff": 512, "n_head_kv": 2,
                                                                     "sliding_window": 128}, ftype="Q8_0", n_ctx=512),
]
#: Gemma 4 scaled down from google/gemma-4-26B-A4B (calculator/data/model_configs): 5 sliding + 1 full layer,
#: sliding head 32 with 2 KV heads, full head 64 with 1 KV head and K = V (no attn_v), tied embeddings, a dense MLP
#: of 192 (no whole number of 256-blocks, like 2112) beside 16 experts of 64 (like 704), layer_output_scale.
_G4_MOE = {"n_layer": 6, "n_embd": 256, "n_head": 4, "n_head_kv": 2, "n_head_kv_full": 1, "head_dim": 64,
           "head_dim_swa": 32, "n_ff": 192, "n_vocab": 512, "n_expert": 16, "n_expert_used": 2, "n_ff_exp": 64,
           "sliding_window": 128, "swa_pattern": [True] * 5 + [False], "k_eq_v": True, "tied": True,
           "layer_out_scale": True}
#: the dense shape (google/gemma-4-31B-it scaled down): 12 layers, no experts, MLP of 512
_G4_DENSE = _G4_MOE | {"n_layer": 12, "swa_pattern": ([True] * 5 + [False]) * 2, "n_expert": 0, "n_expert_used": 0,
                       "n_ff": 512}
QUANT_CASES += [
    QuantCase(name="quant-gemma4-moe-Q4_K_M", arch="gemma4", model=_G4_MOE, ftype="Q4_K_M", n_ctx=4096),
    QuantCase(name="quant-gemma4-moe-Q8_0", arch="gemma4", model=_G4_MOE, ftype="Q8_0", n_ctx=2048, n_seq_max=2),
    QuantCase(name="quant-gemma4-dense-Q4_K_M", arch="gemma4", model=_G4_DENSE, ftype="Q4_K_M", n_ctx=4096,
              flash_attn="off"),
    QuantCase(name="quant-gemma4-dense-Q6_K", arch="gemma4", model=_G4_DENSE, ftype="Q6_K", n_ctx=1000,
              type_k="q8_0", type_v="q8_0", flash_attn="on"),
]
CASES += QUANT_CASES

#: Gemma 4 E-style (E2B / E4B shapes scaled down): per-layer embeddings and shared-KV layers, written directly
#: (the config path refuses shared-KV layers: quant_rules._gemma4_table).
GEMMA4_CASES = [
    Case(name="gemma4-moe-swa-full", arch="gemma4", model=_G4_MOE, n_ctx=4096, swa_full=True),
    # llama.cpp's reuse rule wants the last two cached layers to be sliding then full (llama-model.cpp:2780-2789:
    # a shared layer reads layer n_layer_kv_from_start - 2 if sliding, - 1 if full), as in E2B / E4B
    Case(name="gemma4-ple-shared-kv", arch="gemma4",
         model={"n_layer": 8, "sliding_window": 128, "head_dim": 64, "head_dim_swa": 32, "shared_kv_layers": 3,
                "swa_pattern": [True, True, True, True, False, True, True, False], "n_embd_per_layer": 16,
                "tied": True, "layer_out_scale": True}, n_ctx=8192, n_seq_max=2),
]
CASES += GEMMA4_CASES

_V32K = {"n_vocab": 32000}
#: Compute-buffer cases: realistic proportions (a 32000-token vocabulary makes the logits the peak, as in real
#: models), n_ctx / n_ubatch / flash attention / --parallel / sliding window / MoE, and tiny-vocabulary models where
#: the KQ mask and KQ matrix are the peak. Every case above is compared for its compute buffer too.
COMPUTE_CASES = [
    Case(name="cb-llama-v32k-c1024-fa", arch="llama", model=_V32K, n_ctx=1024, flash_attn="on"),
    Case(name="cb-llama-v32k-c4096-fa", arch="llama", model=_V32K, n_ctx=4096, flash_attn="on"),
    Case(name="cb-llama-v32k-c4096-fa-off", arch="llama", model=_V32K, n_ctx=4096, flash_attn="off"),
    Case(name="cb-llama-v32k-c16384-fa-off", arch="llama", model=_V32K, n_ctx=16384, flash_attn="off"),
    Case(name="cb-llama-v32k-ub256", arch="llama", model=_V32K, n_ctx=4096, flash_attn="on", n_ubatch=256),
    Case(name="cb-llama-v32k-ub1024-fa-off", arch="llama", model=_V32K, n_ctx=4096, flash_attn="off",
         n_ubatch=1024),
    Case(name="cb-llama-v32k-e512", arch="llama",
         model=_V32K | {"n_embd": 512, "n_head": 8, "head_dim": 64, "n_ff": 1024}, n_ctx=4096, flash_attn="on"),
    Case(name="cb-llama-v64k-c8192", arch="llama", model={"n_vocab": 65536, "n_embd": 256, "n_head": 8,
                                                          "head_dim": 32}, n_ctx=8192, flash_attn="on"),
    Case(name="cb-llama-v32k-np2-fa-off", arch="llama", model=_V32K, n_ctx=8192, n_seq_max=2, flash_attn="off"),
    Case(name="cb-qwen3moe-v32k-c8192-fa-off", arch="qwen3moe",
         model=_V32K | {"n_expert": 8, "n_expert_used": 2, "head_dim": 32}, n_ctx=8192, flash_attn="off"),
    Case(name="cb-gemma3-v32k-c8192-fa-off", arch="gemma3", model=_V32K | {"n_layer": 8, "sliding_window": 128},
         n_ctx=8192, flash_attn="off"),
    Case(name="cb-gpt-oss-v32k", arch="gpt-oss", model=_V32K | {"n_layer": 6, "sliding_window": 128, "n_expert": 4,
                                                               "n_expert_used": 2, "head_dim": 32},
         n_ctx=4096, flash_attn="on"),
    Case(name="cb-llama-v256-c4096-fa", arch="llama", n_ctx=4096, flash_attn="on"),
    Case(name="cb-llama-v256-c16384-fa", arch="llama", n_ctx=16384, flash_attn="on"),
    Case(name="cb-llama-v256-c4096-fa-off", arch="llama", n_ctx=4096, flash_attn="off"),
    Case(name="cb-llama-v256-ub128", arch="llama", n_ctx=1000, flash_attn="on", n_ubatch=128),
]
CASES += COMPUTE_CASES

_QUANTIZE = r"""
import sys, llama_cpp
p = llama_cpp.llama_model_quantize_default_params()
p.ftype = int(sys.argv[3])
p.nthread = 1
sys.exit(llama_cpp.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), p))
"""


def run_quant_case(case: QuantCase, workdir: Path, python: str = sys.executable, timeout: float = 300) -> dict:
    """Quantize the tiny model with llama.cpp, compare every tensor's type and the file order with
    :func:`derive_meta`, then load the file and compare its logged buffers with the plan of the derived meta."""
    src = write_tiny_gguf(workdir / f"{case.name}-f16.gguf", case.arch, **case.model)
    out = workdir / f"{case.name}.gguf"
    proc = subprocess.run([python, "-c", _QUANTIZE, str(src), str(out), str(FTYPES[case.ftype][0])],
                          capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode or not out.is_file():
        return {"case": case.name, "status": "load failed", "log_tail": (proc.stdout + proc.stderr)[-2000:],
                "figures": []}
    actual = read_gguf(out)
    derived = derive_meta(tiny_hf_config(case.arch, case.model), case.ftype, source="tiny config")
    got = [(t.name, t.ggml_type) for t in actual.tensors]
    want = [(t.name, t.ggml_type) for t in derived.tensors]
    rows = [{"figure": "tensor order (weights_map)", "predicted": len(want),
             "logged": len(got), "status": "exact" if [n for n, _ in got] == [n for n, _ in want] else "differs"}]
    wanted = dict(want)
    wrong = [f"{n}: {t} (derived {wanted.get(n)})" for n, t in got if wanted.get(n) != t]
    rows.append({"figure": "tensor types", "predicted": "; ".join(wrong[:5]) or f"{len(want)} types",
                 "logged": f"{len(got)} types", "status": "exact" if not wrong else f"diff {len(wrong)} tensors"})
    span = max(t.offset + t.n_bytes for t in actual.tensors) - min(t.offset for t in actual.tensors)
    dspan = max(t.offset + t.n_bytes for t in derived.tensors)
    rows.append({"figure": "tensor data bytes", "predicted": dspan, "logged": span,
                 "status": "exact" if dspan == span else f"diff {span - dspan:+d}"})
    proc = subprocess.run([python, "-c", _RUNNER, json.dumps(_args(case, out))], capture_output=True,
                          text=True, timeout=timeout, check=False)
    log = proc.stdout + proc.stderr
    if "LOADED_OK" not in log:
        return {"case": case.name, "status": "load failed", "log_tail": log[-2000:], "figures": rows}
    predicted = plan(derived, n_ctx=case.n_ctx, n_seq_max=case.n_seq_max, kv_unified=case.kv_unified,
                     cache_type_k=case.type_k, cache_type_v=case.type_v, flash_attn=case.flash_attn,
                     swa_full=case.swa_full, n_ubatch=case.n_ubatch, device="CPU", n_gpu_layers=0,
                     use_mmap=case.use_mmap, cpu_features=cpu_features_from_sysinfo(log))
    result = compare(case, predicted, parse_log(log))
    result["figures"] = rows + result["figures"]
    if any(r["status"] != "exact" for r in rows):
        result["status"] = "differs"
    return result


_RUNNER = r"""
import json, sys
import llama_cpp
args = json.loads(sys.argv[1])
llama_cpp.llama_backend_init()
mp = llama_cpp.llama_model_default_params()
mp.n_gpu_layers = 0
mp.load_mode = -1 if args["use_mmap"] else 0  # llama.h llama_load_mode: AUTO (mmap) or NONE (--no-mmap)
model = llama_cpp.llama_model_load_from_file(args["path"].encode(), mp)
if not model:
    sys.exit("model load failed")
cp = llama_cpp.llama_context_default_params()
cp.n_ctx = args["n_ctx"]
cp.n_batch = args["n_batch"]
cp.n_ubatch = args["n_ubatch"]
cp.n_seq_max = args["n_seq_max"]
cp.kv_unified = args["kv_unified"]
cp.swa_full = args["swa_full"]
cp.flash_attn_type = {"on": 1, "off": 0, "auto": -1}[args["flash_attn"]]  # llama.h llama_flash_attn_type
cp.type_k = args["type_k_id"]
cp.type_v = args["type_v_id"]
ctx = llama_cpp.llama_init_from_model(model, cp)
if not ctx:
    sys.exit("context creation failed")
print("SYSINFO: " + llama_cpp.llama_print_system_info().decode(), file=sys.stderr, flush=True)
print("LOADED_OK", file=sys.stderr, flush=True)
"""

KV_RE = re.compile(r"llama_kv_cache: size = +([\d.]+) MiB \( *(\d+) cells, +(\d+) layers, +(\d+)/ *(\d+) seqs\), "
                   r"K \((\w+)\): +([\d.]+) MiB, V \((\w+)\): +([\d.]+) MiB")
MODEL_BUF_RE = re.compile(r"load_tensors: +(\S+) model buffer size = +([\d.]+) MiB")
KV_BUF_RE = re.compile(r"llama_kv_cache: +(\S+) KV buffer size = +([\d.]+) MiB")
OUT_BUF_RE = re.compile(r"(\S+) +output buffer size = +([\d.]+) MiB")
COMPUTE_BUF_RE = re.compile(r"(\S+) compute buffer size = +([\d.]+) MiB")


def parse_log(text: str) -> dict:
    """The figures llama.cpp logged: KV caches in order, model / KV / output buffers (MiB as printed)."""
    return {
        "kv": [{"size_mib": float(m[0]), "cells": int(m[1]), "layers": int(m[2]), "seqs": int(m[3]),
                "streams": int(m[4]), "type_k": m[5], "k_mib": float(m[6]), "type_v": m[7], "v_mib": float(m[8])}
               for m in KV_RE.findall(text)],
        "model_buffers": {m[0]: float(m[1]) for m in MODEL_BUF_RE.findall(text)},
        "kv_buffers": [(m[0], float(m[1])) for m in KV_BUF_RE.findall(text)],
        "output_buffers": {m[0]: float(m[1]) for m in OUT_BUF_RE.findall(text)},
        "compute_buffers": {m[0]: float(m[1]) for m in COMPUTE_BUF_RE.findall(text)},
    }


def _args(case: Case, path: Path) -> dict:
    return {"path": str(path), "n_ctx": case.n_ctx, "n_seq_max": case.n_seq_max, "kv_unified": case.kv_unified,
            "type_k": case.type_k, "type_v": case.type_v, "flash_attn": case.flash_attn,
            "swa_full": case.swa_full, "n_ubatch": case.n_ubatch, "n_batch": 2048, "use_mmap": case.use_mmap,
            "type_k_id": TYPE_IDS[case.type_k], "type_v_id": TYPE_IDS[case.type_v]}


def have_llama_cpp(python: str = sys.executable) -> bool:
    return subprocess.run([python, "-c", "import llama_cpp"], capture_output=True, check=False).returncode == 0


WITHIN = "within stated error"
EXACT_COMPUTE_WITHIN = "exact; compute buffer within stated error"
#: case statuses that pass: every figure llama.cpp logs exactly is exact, every estimate within its stated error
PASSING = ("exact", EXACT_COMPUTE_WITHIN)


def compare(case: Case, predicted, logged: dict) -> dict:
    """Per-figure comparison at the log's precision (MiB with 2 decimals): exact when the prediction printed
    with ``%.2f`` equals the logged text. Compute buffers are estimates (``memory.compute_buffers``): their rows
    carry ``error_mib`` and ``diff_pct`` and pass as ``"within stated error"`` when the logged figure lies within
    the stated error, never as exact. On the CPU build every buffer lives on the CPU, so the oracle checks the
    single-device peak (the ``CPU`` buffer of a ``device="CPU"`` plan), not the GPU / host split."""
    rows = []
    for i, cache in enumerate(predicted.kv_caches):
        got = logged["kv"][i] if i < len(logged["kv"]) else None
        want = {"size_mib": round(cache.total_bytes / MiB, 2), "cells": cache.cells, "layers": len(cache.layers),
                "seqs": cache.n_seq_max, "streams": cache.n_stream, "k_mib": round(cache.k_bytes / MiB, 2),
                "v_mib": round(cache.v_bytes / MiB, 2)}
        for key, value in want.items():
            rows.append({"figure": f"{cache.name} {key}", "predicted": value,
                         "logged": None if got is None else got[key]})
    for b in predicted.buffers:
        if b.kind == "model" and b.bytes is not None:
            rows.append({"figure": f"{b.buft} model buffer MiB", "predicted": round(b.bytes / MiB, 2),
                         "logged": logged["model_buffers"].get(b.buft)})
        if b.kind == "output" and b.bytes is not None:
            rows.append({"figure": f"{b.buft} output buffer MiB", "predicted": round(b.bytes / MiB, 2),
                         "logged": logged["output_buffers"].get(b.buft)})
        if b.kind == "compute" and b.bytes is not None:
            # an estimate (memory.compute_buffers): checked against its stated error, never called exact
            rows.append({"figure": f"{b.buft} compute buffer MiB (estimate)", "predicted": round(b.bytes / MiB, 2),
                         "logged": logged.get("compute_buffers", {}).get(b.buft),
                         "error_mib": round(b.error_bytes / MiB, 2)})
    predicted_bufts = {b.buft for b in predicted.buffers if b.kind == "model"}
    for buft, mib in logged["model_buffers"].items():  # a buffer llama.cpp made that the plan does not know
        if buft not in predicted_bufts:
            rows.append({"figure": f"{buft} model buffer MiB", "predicted": None, "logged": mib})
    if len(logged["kv"]) != len(predicted.kv_caches):
        rows.append({"figure": "number of KV caches", "predicted": len(predicted.kv_caches),
                     "logged": len(logged["kv"])})
    for r in rows:
        if r["predicted"] is None:
            r["status"] = "not predicted"
            continue
        if "error_mib" in r and r["logged"] is not None:
            d = r["logged"] - r["predicted"]
            r["diff_pct"] = round(d / r["logged"] * 100, 2) if r["logged"] else None
            # the logged figure is rounded to 0.01 MiB, so half of that is allowed on top of the stated error
            r["status"] = (WITHIN if abs(d) <= r["error_mib"] + 0.005 else
                           f"outside stated error: diff {d:+.2f} MiB (+- {r['error_mib']})")
            continue
        r["status"] = "exact" if r["logged"] == r["predicted"] else (
            "missing" if r["logged"] is None else f"diff {r['logged'] - r['predicted']:+g}")
    if all(r["status"] == "exact" for r in rows):
        status = "exact"
    elif all(r["status"] in ("exact", WITHIN) for r in rows):
        status = EXACT_COMPUTE_WITHIN  # every exact figure exact, the compute-buffer estimate within its error
    else:
        status = "differs"
    return {"case": case.name, "status": status, "figures": rows}


#: llama_print_system_info() names -> memory.CPU_FEATURES (ggml-cpu's "AVX2 = 1 | ..." line)
SYSINFO_FEATURES = {"AVX2": "avx2", "AVX512": "avx512", "NEON": "neon", "DOTPROD": "dotprod",
                    "MATMUL_INT8": "i8mm", "AMX_INT8": "amx_int8"}


def cpu_features_from_sysinfo(text: str) -> frozenset:
    """The ggml-cpu build's features from the ``llama_print_system_info()`` line in a log."""
    m = re.search(r"SYSINFO: (.*)", text)
    line = m.group(1) if m else ""
    return frozenset(f for key, f in SYSINFO_FEATURES.items() if re.search(rf"\b{key} = 1\b", line))


def run_case(case: Case, workdir: Path, python: str = sys.executable, timeout: float = 300) -> dict:
    if isinstance(case, QuantCase):
        return run_quant_case(case, workdir, python, timeout)
    path = write_tiny_gguf(workdir / f"{case.name}.gguf", case.arch, **case.model)
    meta = read_gguf(path)
    proc = subprocess.run([python, "-c", _RUNNER, json.dumps(_args(case, path))], capture_output=True,
                          text=True, timeout=timeout, check=False)
    log = proc.stdout + proc.stderr
    if "LOADED_OK" not in log:
        return {"case": case.name, "status": "load failed", "log_tail": log[-2000:], "figures": []}
    predicted = plan(meta, n_ctx=case.n_ctx, n_seq_max=case.n_seq_max, kv_unified=case.kv_unified,
                     cache_type_k=case.type_k, cache_type_v=case.type_v, flash_attn=case.flash_attn,
                     swa_full=case.swa_full, n_ubatch=case.n_ubatch, device="CPU", n_gpu_layers=0,
                     use_mmap=case.use_mmap, cpu_features=cpu_features_from_sysinfo(log))
    return compare(case, predicted, parse_log(log))


def run_cases(cases=None, python: str = sys.executable) -> list[dict]:
    """Run every case; raises ``LlamaCppMissing`` when ``python`` cannot import llama_cpp."""
    if not have_llama_cpp(python):
        raise LlamaCppMissing("llama_cpp is not importable: pip install 'llama-cpp-python==0.3.36' "
                              "(optional dependency group 'llamacpp')")
    with tempfile.TemporaryDirectory() as tmp:
        return [run_case(c, Path(tmp), python) for c in (cases or CASES)]
