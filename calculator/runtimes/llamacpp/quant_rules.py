"""Each tensor's ggml type in a GGUF file, derived from the Transformers ``config.json`` and the file type
(Q4_K_M, Q5_K_S, Q8_0, IQ4_XS, ...) the way llama.cpp's ``llama-quantize`` decides it, when the GGUF header
itself cannot be read (the Hub is unreachable, or no file was named).

llama.cpp picks every tensor's type deterministically from the file type, the tensor's role and layer, and a
few hyper-parameters (``llama_tensor_get_type``). This module ports that rule and the file layout
``llama-quantize`` writes, so the model buffers llama.cpp logs follow from the config:

* the tensors and shapes: what llama.cpp's converter writes for the architecture (``conversion/*.py``) and its
  loader expects (``src/models/<arch>.cpp`` ``load_arch_tensors``): :func:`hf_tensor_table`;
* the type of each: :func:`tensor_types` (``src/llama-quant.cpp``, cited per rule below);
* the layout: tensors in ``llama_model_loader::weights_map`` order (non-layer tensors by name, then ``blk.N``
  by layer and name; ``src/llama-model-loader.h:54-65,126``), each padded to the 32-byte GGUF alignment
  (``src/llama-quant.cpp:1368``, ``ggml/src/gguf.cpp:1445``): :func:`derive_meta`.

Every line cited is from the llama.cpp vendored in llama-cpp-python 0.3.36 (``vendor/llama.cpp/...``).
Files quantized by older builds follow the rules of their build; where those changed since, the derived
types differ (the public files in ``benchmarks/llamacpp_cases.py`` are checked against their logs).
"Unsloth Dynamic" (``UD-``) and other hand-mixed files choose per-tensor types outside these rules and are
refused by name (:class:`~calculator.runtimes.llamacpp.memory.NotModelled`).

Units: bytes; shapes are ggml order (``ne[0]`` = row length first).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from calculator.runtimes.llamacpp.gguf_meta import GGUFMeta, GGUFTensor, meta_from_hf_config
from calculator.runtimes.llamacpp.memory import NotModelled

SRC = "llama-cpp-python 0.3.36 vendor/llama.cpp/"
QUANT = SRC + "src/llama-quant.cpp"

#: llama.h ``enum llama_ftype`` (include/llama.h:118-159) -> (id, default ggml type of
#: ``llama_ftype_get_default_type``, src/llama-quant.cpp:881-924). The name is how GGUF repos name their files.
FTYPES: dict[str, tuple[int, str]] = {
    "F32": (0, "F32"), "F16": (1, "F16"), "Q4_0": (2, "Q4_0"), "Q4_1": (3, "Q4_1"), "Q8_0": (7, "Q8_0"),
    "Q5_0": (8, "Q5_0"), "Q5_1": (9, "Q5_1"), "Q2_K": (10, "Q2_K"), "Q3_K_S": (11, "Q3_K"),
    "Q3_K_M": (12, "Q3_K"), "Q3_K_L": (13, "Q3_K"), "Q4_K_S": (14, "Q4_K"), "Q4_K_M": (15, "Q4_K"),
    "Q5_K_S": (16, "Q5_K"), "Q5_K_M": (17, "Q5_K"), "Q6_K": (18, "Q6_K"), "IQ2_XXS": (19, "IQ2_XXS"),
    "IQ2_XS": (20, "IQ2_XS"), "Q2_K_S": (21, "Q2_K"), "IQ3_XS": (22, "IQ3_S"), "IQ3_XXS": (23, "IQ3_XXS"),
    "IQ1_S": (24, "IQ1_S"), "IQ4_NL": (25, "IQ4_NL"), "IQ3_S": (26, "IQ3_S"), "IQ3_M": (27, "IQ3_S"),
    "IQ2_S": (28, "IQ2_XS"), "IQ2_M": (29, "IQ2_S"), "IQ4_XS": (30, "IQ4_XS"), "IQ1_M": (31, "IQ1_M"),
    "BF16": (32, "BF16"), "TQ1_0": (36, "TQ1_0"), "TQ2_0": (37, "TQ2_0"), "MXFP4_MOE": (38, "MXFP4"),
}
FTYPE_BY_ID = {v[0]: k for k, v in FTYPES.items()}

#: File types whose rules read ``qs.has_imatrix`` (src/llama-quant.cpp:579, 627, 651, 653): a file made
#: with an importance matrix differs from one without in a few tensors.
IMATRIX_SENSITIVE = {"IQ3_XXS", "IQ4_NL", "IQ4_XS", "Q4_0", "Q5_0"}
#: File types llama-quantize refuses without an importance matrix (``tensor_requires_imatrix``,
#: src/llama-quant.cpp:852-877: IQ1/IQ2/IQ3_XXS targets, Q2_K inside a Q2_K_S file).
IMATRIX_REQUIRED = {"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "IQ3_XXS", "Q2_K_S"}

_FTYPE_NAME_RE = re.compile(
    r"(?:^|[-_.])(" + "|".join(sorted((re.escape(k) for k in FTYPES), key=len, reverse=True)) + r")(?=[-_.]|$)",
    re.IGNORECASE)


def ftype_from_filename(filename: str) -> str:
    """The llama.cpp file type a GGUF file name states (``Llama-3.2-3B-Instruct-Q4_K_M.gguf`` -> ``Q4_K_M``).

    Raises ``NotModelled`` (field ``gguf_file``) for names that state none, or a mix that is not one of
    llama.cpp's file types: Unsloth Dynamic (``UD-...``), ``_L`` / ``_XL`` variants (Q8_0 embeddings / output
    chosen by hand: ``--token-embedding-type`` / ``--output-tensor-type``), split shards without a type."""
    base = filename.rsplit("/", 1)[-1]
    stem = re.sub(r"-\d{5}-of-\d{5}\.gguf$", "", base, flags=re.IGNORECASE)
    stem = re.sub(r"\.gguf$", "", stem, flags=re.IGNORECASE)
    if re.search(r"(?:^|[-_.])UD[-_]", stem, re.IGNORECASE):
        raise NotModelled(f"{base}: an Unsloth Dynamic ('UD-') file chooses each tensor's type by hand, outside "
                          "llama.cpp's quantization rules; its model buffers need the GGUF header (the Hub)",
                          field="gguf_file")
    hand = re.search(r"(?:^|[-_.])((?:I?Q\d_[A-Z0-9]+?)_(?:L|XL|XXL))(?=[-_.]|$)", stem, re.IGNORECASE)
    if hand and hand.group(1).upper() not in FTYPES:
        raise NotModelled(f"{base}: '{hand.group(1)}' is a mix with hand-chosen embedding / output types "
                          "(--token-embedding-type / --output-tensor-type), not one of llama.cpp's file types; "
                          "its model buffers need the GGUF header (the Hub)", field="gguf_file")
    matches = _FTYPE_NAME_RE.findall(stem)
    if not matches:
        raise NotModelled(f"{base}: the name states no llama.cpp file type (Q4_K_M, Q8_0, IQ4_XS, ...); its model "
                          "buffers need the GGUF header (the Hub)", field="gguf_file")
    return matches[-1].upper()


# ---------------------------------------------------------------- the tensor table from a config

#: Gemma 3's converter drops the padding rows of the embedding (conversion/gemma.py:160-172: rows past the
#: tokenizer's size): Gemma 3's tokenizer.model has 262,144 pieces (llama.cpp prints ``n_vocab = 262144`` for
#: every Gemma 3 GGUF) where config.json says 262,208.
GEMMA3_TOKENIZER_SIZE = 262144

#: HF model_type -> llama.cpp architecture for which the tensor table is modelled.
TABLE_ARCHS = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
               "qwen3_moe": "qwen3moe", "gemma2": "gemma2", "gemma3": "gemma3", "gemma3_text": "gemma3",
               "gemma4": "gemma4", "gemma4_text": "gemma4"}

CONV = SRC + "conversion/"


def _gemma4_table(config: dict[str, Any], cfg: dict[str, Any]) -> tuple[list[tuple[str, list[int], str]], int, int]:
    """``(tensors, n_expert, n_vocab)`` of a Gemma 4 GGUF as convert_hf_to_gguf.py writes it from the checkpoint
    and src/models/gemma4.cpp ``load_arch_tensors`` (:36-155) loads it. Per layer ``il`` (head size ``hd`` =
    ``head_dim`` on sliding layers, ``global_head_dim`` on full ones; ``n_kv`` = ``num_key_value_heads`` /
    ``num_global_key_value_heads``):

    * ``attn_norm``, ``attn_q`` [n_embd, n_head x hd], ``attn_k`` [n_embd, n_kv x hd] + ``attn_k_norm`` [hd],
      ``attn_v`` [n_embd, n_kv x hd] except on full layers with ``attention_k_eq_v`` (HF ``v_proj`` is None there,
      modeling_gemma4.py Gemma4TextAttention; gemma4.cpp:82 loads it TENSOR_NOT_REQUIRED), ``attn_output``,
      ``attn_q_norm`` [hd], ``post_attention_norm``, ``layer_output_scale`` [1] (HF ``layer_scalar``,
      conversion/gemma.py:792-793); v_norm has no weight (``with_scale=False``);
    * the dense MLP (every layer, the MoE layers' shared expert): ``ffn_norm``, ``ffn_gate`` / ``ffn_up``
      [n_embd, n_ff(il)], ``ffn_down``, ``post_ffw_norm``; n_ff doubles on the shared-KV layers with
      ``use_double_wide_mlp`` (conversion/gemma.py:707-713);
    * MoE (``enable_moe_block``): ``ffn_gate_inp`` [n_embd, n_expert] (router.proj, F32: conversion/base.py:1091),
      ``ffn_gate_inp.scale`` [n_embd] (router.scale, :800-803), ``ffn_gate_up_exps`` [n_embd, 2 x n_ff_exp, n_expert]
      (HF keeps gate and up fused: tensor_mapping.py:617-620), ``ffn_down_exps`` [n_ff_exp, n_embd, n_expert],
      ``ffn_down_exps.scale`` [n_expert] (per_expert_scale, :804-808), ``pre_ffw_norm_2``, ``post_ffw_norm_1`` /
      ``_2``;
    * per-layer embeddings (``hidden_size_per_layer_input`` = P > 0): ``inp_gate`` [n_embd, P], ``proj`` [P, n_embd],
      ``post_norm``; and once ``per_layer_token_embd`` [P x n_layer, n_vocab], ``per_layer_model_proj``
      [n_embd, P x n_layer], ``per_layer_proj_norm`` [P];
    * once: ``token_embd``, ``output_norm``, ``rope_freqs`` [global_head_dim / 2] (generate_extra_tensors,
      conversion/gemma.py:740-762), ``output`` only without tied embeddings.

    Shared-KV layers (``num_kv_shared_layers`` > 0, the E2B / E4B models) are refused: the HF model has no k / v
    projections there, but the released checkpoints may carry them (transformers lists them in
    ``_keys_to_ignore_on_load_unexpected``), and the converter copies whatever the checkpoint holds, so the tensor
    table cannot be told from config.json alone. Raises ``NotModelled``."""
    try:
        n_layer = int(cfg["num_hidden_layers"])
        n_embd = int(cfg["hidden_size"])
        n_head = int(cfg["num_attention_heads"])
        hd_swa = int(cfg["head_dim"])
        hd_full = int(cfg.get("global_head_dim") or hd_swa)
        kv_swa = int(cfg["num_key_value_heads"])
        kv_full = int(cfg.get("num_global_key_value_heads") or kv_swa)
        n_ff = int(cfg["intermediate_size"])
        n_vocab = int(cfg["vocab_size"])
        swa = [t == "sliding_attention" for t in cfg["layer_types"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise NotModelled(f"config.json lacks {exc} needed to lay out the Gemma 4 GGUF tensors", field="model") from None
    n_shared = int(cfg.get("num_kv_shared_layers") or 0)
    if n_shared:
        raise NotModelled(f"Gemma 4 with {n_shared} shared-KV layers (E2B / E4B): whether the checkpoint carries k / v "
                          "projections for those layers (the HF model ignores them on load) decides the GGUF's tensors, "
                          "which config.json does not say; give the GGUF file (its header) for the model buffers",
                          field="gguf_file")
    k_eq_v = bool(cfg.get("attention_k_eq_v"))
    moe = bool(cfg.get("enable_moe_block")) and int(cfg.get("num_experts") or 0) > 0
    n_expert = int(cfg["num_experts"]) if moe else 0
    n_ff_exp = int(cfg.get("moe_intermediate_size") or cfg.get("expert_intermediate_size") or 0) if moe else 0
    ple = int(cfg.get("hidden_size_per_layer_input") or 0)
    tied = bool(config.get("tie_word_embeddings", cfg.get("tie_word_embeddings", True)))
    F32, F16 = "F32", "F16"
    t: list[tuple[str, list[int], str]] = [("token_embd.weight", [n_embd, n_vocab], F16),
                                           ("output_norm.weight", [n_embd], F32),
                                           ("rope_freqs.weight", [hd_full // 2], F32)]
    if not tied:
        t.append(("output.weight", [n_embd, n_vocab], F16))
    if ple:
        t += [("per_layer_token_embd.weight", [ple * n_layer, int(cfg.get("vocab_size_per_layer_input") or n_vocab)],
               F16), ("per_layer_model_proj.weight", [n_embd, ple * n_layer], F16),
              ("per_layer_proj_norm.weight", [ple], F32)]
    for i in range(n_layer):
        p = f"blk.{i}."
        hd = hd_swa if swa[i] else hd_full
        kv = (kv_swa if swa[i] else kv_full) * hd
        t += [(p + "attn_norm.weight", [n_embd], F32), (p + "attn_q.weight", [n_embd, n_head * hd], F16),
              (p + "attn_k.weight", [n_embd, kv], F16), (p + "attn_k_norm.weight", [hd], F32),
              (p + "attn_output.weight", [n_head * hd, n_embd], F16), (p + "attn_q_norm.weight", [hd], F32),
              (p + "post_attention_norm.weight", [n_embd], F32), (p + "layer_output_scale.weight", [1], F32),
              (p + "ffn_norm.weight", [n_embd], F32), (p + "ffn_gate.weight", [n_embd, n_ff], F16),
              (p + "ffn_up.weight", [n_embd, n_ff], F16), (p + "ffn_down.weight", [n_ff, n_embd], F16),
              (p + "post_ffw_norm.weight", [n_embd], F32)]
        if not (k_eq_v and not swa[i]):
            t.append((p + "attn_v.weight", [n_embd, kv], F16))
        if moe:
            t += [(p + "ffn_gate_inp.weight", [n_embd, n_expert], F32), (p + "ffn_gate_inp.scale", [n_embd], F32),
                  (p + "ffn_gate_up_exps.weight", [n_embd, 2 * n_ff_exp, n_expert], F16),
                  (p + "ffn_down_exps.weight", [n_ff_exp, n_embd, n_expert], F16),
                  (p + "ffn_down_exps.scale", [n_expert], F32), (p + "pre_ffw_norm_2.weight", [n_embd], F32),
                  (p + "post_ffw_norm_1.weight", [n_embd], F32), (p + "post_ffw_norm_2.weight", [n_embd], F32)]
        if ple:
            t += [(p + "inp_gate.weight", [n_embd, ple], F16), (p + "proj.weight", [ple, n_embd], F16),
                  (p + "post_norm.weight", [n_embd], F32)]
    return t, n_expert, n_vocab


class _Hp:
    """The hyper-parameters ``llama_tensor_get_type`` reads (``qs.model.hparams``, ``qs.model.type``)."""

    def __init__(self, arch: str, n_layer: int, n_head: int, n_head_kv: int, n_expert: int, is_70b: bool):
        self.arch, self.n_layer, self.n_expert, self.is_70b = arch, n_layer, n_expert, is_70b
        self.n_gqa = n_head // n_head_kv if n_head_kv else 0  # llama_hparams::n_gqa (layer 0)


def hf_tensor_table(config: dict[str, Any]) -> tuple[str, list[tuple[str, list[int], str]], _Hp, int]:
    """``(arch, [(name, ne, converter type)], hparams, n_vocab)``: the tensors llama.cpp's converter writes for
    a Transformers config, as the loader reads them (shapes from ``src/models/<arch>.cpp`` load_arch_tensors:
    llama.cpp:34-86, qwen2.cpp, qwen3.cpp, qwen3moe.cpp, gemma2.cpp, gemma3.cpp). The converter type is
    ``F32`` for 1-D tensors, norms, biases and the MoE router (conversion/base.py:1083-1121), else ``F16``
    (the source a file is quantized from; it does not change a quantized type). Raises ``NotModelled``."""
    cfg = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    model_type = cfg.get("model_type") or config.get("model_type") or ""
    arch = TABLE_ARCHS.get(model_type)
    if arch is None:
        raise NotModelled(f"model_type {model_type!r}: deriving GGUF tensor types from the config is modelled for "
                          f"{', '.join(sorted(set(TABLE_ARCHS)))}; give the GGUF file (its header) instead",
                          field="gguf_file")
    try:
        n_layer = int(cfg["num_hidden_layers"])
        n_embd = int(cfg["hidden_size"])
        n_head = int(cfg["num_attention_heads"])
        n_kv = int(cfg.get("num_key_value_heads") or n_head)
        hd = int(cfg.get("head_dim") or n_embd // n_head)
        n_ff = int(cfg.get("intermediate_size") or 0)
        n_vocab = int(cfg["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise NotModelled(f"config.json lacks {exc} needed to lay out the GGUF tensors", field="model") from None
    if arch == "gemma4":
        t4, n_expert4, n_vocab = _gemma4_table(config, cfg)
        # hparams.n_gqa() of layer 0 (llama-hparams.cpp), the model type is never 70B (gemma4.cpp:27-33)
        kv0 = int(cfg["num_key_value_heads"]) if cfg["layer_types"][0] == "sliding_attention" else \
            int(cfg.get("num_global_key_value_heads") or cfg["num_key_value_heads"])
        return arch, t4, _Hp(arch, n_layer, n_head, kv0, n_expert4, False), n_vocab
    if arch == "gemma3" and n_vocab == 262208:
        n_vocab = GEMMA3_TOKENIZER_SIZE
    tied = bool(config.get("tie_word_embeddings", cfg.get("tie_word_embeddings", arch in ("gemma2", "gemma3"))))
    if arch in ("gemma2", "gemma3"):
        tied = True  # gemma2.cpp / gemma3.cpp: output = token_embd (the converter writes no output.weight)
    n_expert = int(cfg.get("num_local_experts") or cfg.get("num_experts") or 0) if arch in ("llama", "qwen3moe") else 0
    n_ff_exp = int(cfg.get("moe_intermediate_size") or n_ff) if n_expert else 0

    F32, F16 = "F32", "F16"
    t: list[tuple[str, list[int], str]] = [("token_embd.weight", [n_embd, n_vocab], F16),
                                           ("output_norm.weight", [n_embd], F32)]
    if not tied:
        t.append(("output.weight", [n_embd, n_vocab], F16))
    rope = config.get("rope_parameters") or config.get("rope_scaling") or cfg.get("rope_scaling") or {}
    rope = rope.get("full_attention", rope) if isinstance(rope, dict) else {}
    if arch == "llama" and str(rope.get("rope_type") or rope.get("type") or "").lower() == "llama3":
        # conversion/llama.py:298-326 (generate_extra_tensors) writes rope_freqs for llama3 rope scaling
        t.append(("rope_freqs.weight", [hd // 2], F32))
    q, kv = n_head * hd, n_kv * hd
    for i in range(n_layer):
        p = f"blk.{i}."
        t += [(p + "attn_norm.weight", [n_embd], F32), (p + "attn_q.weight", [n_embd, q], F16),
              (p + "attn_k.weight", [n_embd, kv], F16), (p + "attn_v.weight", [n_embd, kv], F16),
              (p + "attn_output.weight", [q, n_embd], F16), (p + "ffn_norm.weight", [n_embd], F32)]
        if arch == "qwen2":
            t += [(p + "attn_q.bias", [q], F32), (p + "attn_k.bias", [kv], F32), (p + "attn_v.bias", [kv], F32)]
        if arch in ("qwen3", "qwen3moe", "gemma3"):
            t += [(p + "attn_q_norm.weight", [hd], F32), (p + "attn_k_norm.weight", [hd], F32)]
        if arch in ("gemma2", "gemma3"):
            t += [(p + "post_attention_norm.weight", [n_embd], F32), (p + "post_ffw_norm.weight", [n_embd], F32)]
        if n_expert:
            t += [(p + "ffn_gate_inp.weight", [n_embd, n_expert], F32),
                  (p + "ffn_gate_exps.weight", [n_embd, n_ff_exp, n_expert], F16),
                  (p + "ffn_up_exps.weight", [n_embd, n_ff_exp, n_expert], F16),
                  (p + "ffn_down_exps.weight", [n_ff_exp, n_embd, n_expert], F16)]
        else:
            t += [(p + "ffn_gate.weight", [n_embd, n_ff], F16), (p + "ffn_up.weight", [n_embd, n_ff], F16),
                  (p + "ffn_down.weight", [n_ff, n_embd], F16)]
    # model type 70B (models/llama.cpp:28, models/qwen2.cpp:14): 80 layers (llama: and GQA)
    is_70b = n_layer == 80 and ((arch == "llama" and n_head != n_kv and not n_expert) or arch == "qwen2")
    return arch, t, _Hp(arch, n_layer, n_head, n_kv, n_expert, is_70b), n_vocab


# ---------------------------------------------------------------- llama_tensor_get_type


def _category(name: str) -> str:
    """tensor_get_category (src/llama-quant.cpp:119-155): substring matches in this order."""
    if name == "output.weight":
        return "OUTPUT"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "TOKEN_EMBD"
    for key, cat in (("attn_qkv.weight", "ATTENTION_QKV"), ("attn_kv_b.weight", "ATTENTION_KV_B"),
                     ("attn_v.weight", "ATTENTION_V"), ("attn_k.weight", "ATTENTION_K"),
                     ("attn_q.weight", "ATTENTION_Q"), ("attn_output.weight", "ATTENTION_OUTPUT"),
                     ("ffn_up", "FFN_UP"), ("ffn_gate", "FFN_GATE"), ("ffn_down", "FFN_DOWN")):
        if key in name:
            return cat
    return "OTHER"


def _is_attn_v(cat: str) -> bool:
    return cat in ("ATTENTION_V", "ATTENTION_QKV", "ATTENTION_KV_B")  # category_is_attn_v (:158-162)


def allows_quantization(name: str, ne: list[int]) -> bool:
    """tensor_allows_quantization (src/llama-quant.cpp:287-385) for the tensors :func:`hf_tensor_table` writes:
    2-D or 3-D, name ending in ``weight``, not a norm, not the MoE router (``ffn_gate_inp``)."""
    if len(ne) < 2:
        return False
    return name.endswith("weight") and "_norm.weight" not in name and "ffn_gate_inp.weight" not in name \
        and "altup" not in name and "laurel" not in name and "per_layer_model_proj" not in name


@lru_cache(maxsize=None)
def _quant_size(type_name: str) -> tuple[int, int, int]:
    """``(block size, bytes per block, type id)`` of a ggml type (gguf-py's GGML_QUANT_SIZES)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    t = GGMLQuantizationType[type_name]
    block, size = GGML_QUANT_SIZES[t]
    return block, size, int(t)


def _block(type_name: str) -> int:
    return _quant_size(type_name)[0]


def _fallback(name: str, ne0: int, target: str) -> tuple[str, bool]:
    """tensor_type_fallback (src/llama-quant.cpp:390-443): a row that is no whole number of the type's blocks
    falls back to a 32-block type, then to F16. Returns (type, fell back)."""
    if ne0 % _block(target) == 0:
        return target, False
    table = {"IQ1_S": "IQ4_NL", "IQ1_M": "IQ4_NL", "IQ2_XXS": "IQ4_NL", "IQ2_XS": "IQ4_NL", "IQ2_S": "IQ4_NL",
             "IQ3_XXS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ4_XS": "IQ4_NL", "Q2_K": "Q4_0", "Q3_K": "Q4_0",
             "TQ1_0": "Q4_0", "TQ2_0": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
    out = table.get(target, target)
    if ne0 % _block(out) != 0:
        out = "F16"
    return out, True


def _use_more_bits(i: int, n: int) -> bool:
    """src/llama-quant.cpp:452-454."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


class _State:
    """quantize_state_impl counters (src/llama-quant.cpp:166-200, init_quantize_state_counters :927-941)."""

    def __init__(self, names: list[str], hp: _Hp, has_imatrix: bool):
        self.n_attention_wv = sum(1 for n in names if _is_attn_v(_category(n)))
        self.has_tied_embeddings = "output.weight" not in names
        self.n_ffn_down = self.n_ffn_gate = self.n_ffn_up = hp.n_layer
        self.i_attention_wv = self.i_ffn_down = self.i_ffn_gate = self.i_ffn_up = 0
        self.has_imatrix = has_imatrix


def _get_type_impl(qs: _State, hp: _Hp, new: str, name: str, ne: list[int], ftype: str, cat: str) -> str:
    """llama_tensor_get_type_impl (src/llama-quant.cpp:446-714), line by line for the architectures modelled
    here (the Falcon, GLM5-next and BailingMoE3 branches do not apply to them)."""
    IQ2_GROUP = ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M")
    n_expert = max(1, hp.n_expert)

    def layer_info(counter: int, n_layer: int) -> tuple[int, int]:  # :456-470
        if n_expert > 1:
            m = re.match(r"blk\.(\d+)\.", name)
            if not m:
                raise NotModelled(f"cannot determine the layer of tensor {name}", field="model")
            return int(m.group(1)), n_layer
        return counter, n_layer

    if cat == "OUTPUT" or (qs.has_tied_embeddings and cat == "TOKEN_EMBD"):  # :490-511
        nx = ne[0]
        if ftype == "MXFP4_MOE":
            return "Q8_0"
        if nx % _block(new) != 0:
            return "Q8_0"
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M"):
            return "Q5_K"
        return new if new == "Q8_0" else "Q6_K"
    if ftype == "MXFP4_MOE":  # :512-524
        return "MXFP4" if len(ne) > 2 and ne[2] > 1 else "Q8_0"
    if cat == "TOKEN_EMBD":  # :525-543
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
            return "Q2_K"
        if ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
            return "IQ3_S"
        if ftype in ("TQ1_0", "TQ2_0"):
            return "Q4_K"
        return new
    if ftype in IQ2_GROUP:  # :544-566
        if _is_attn_v(cat):
            if hp.n_gqa >= 4 or hp.n_expert >= 4:
                new = "Q4_K"
            else:
                new = "IQ3_S" if ftype in ("IQ2_S", "IQ2_M") else "Q2_K"
            qs.i_attention_wv += 1
        elif hp.n_expert == 8 and cat == "ATTENTION_K":
            new = "Q4_K"
        elif cat == "FFN_DOWN":
            if qs.i_ffn_down < qs.n_ffn_down // 8:
                new = "IQ3_S" if ftype in ("IQ2_S", "IQ2_M") else "Q2_K"
            qs.i_ffn_down += 1
        elif cat == "ATTENTION_OUTPUT":
            if hp.n_expert == 8:
                new = "Q5_K"
            elif ftype in ("IQ1_S", "IQ1_M"):
                new = "IQ2_XXS"
            elif ftype in ("IQ2_S", "IQ2_M"):
                new = "IQ3_S"
        return new
    if _is_attn_v(cat):  # :567-603
        gqa4 = hp.n_gqa >= 4
        if ftype == "Q2_K":
            new = "Q4_K" if gqa4 else "Q3_K"
        elif ftype == "Q2_K_S" and gqa4:
            new = "Q4_K"
        elif ftype == "IQ3_XXS":
            new = "Q4_K" if gqa4 else ("IQ3_S" if not qs.has_imatrix else "IQ3_XXS")
        elif ftype in ("IQ3_XS", "IQ3_S") and gqa4:
            new = "Q4_K"
        elif ftype == "IQ3_M":
            new = "Q4_K"
        elif ftype == "Q3_K_M":
            new = "Q5_K" if qs.i_attention_wv < 2 else "Q4_K"
        elif ftype == "Q3_K_L":
            new = "Q5_K"
        elif ftype in ("IQ4_NL", "IQ4_XS") and gqa4:
            new = "Q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(qs.i_attention_wv, qs.n_attention_wv):
            new = "Q6_K"
        elif ftype == "Q4_K_S" and qs.i_attention_wv < 4:
            new = "Q5_K"
        if hp.is_70b and new in ("Q3_K", "Q4_K"):  # :593-598
            new = "Q5_K"
        if hp.n_expert == 8:  # :599-603
            new = "Q8_0"
        qs.i_attention_wv += 1
        return new
    if cat == "ATTENTION_K":  # :604-615
        if hp.n_expert == 8:
            return "Q8_0"
        if ftype == "IQ3_XS":
            return "IQ3_XXS"
        if ftype == "IQ3_XXS":
            return "IQ2_S"
        return new
    if cat == "ATTENTION_Q":  # :616-623
        if ftype == "IQ3_XS":
            return "IQ3_XXS"
        if ftype == "IQ3_XXS":
            return "IQ2_S"
        return new
    if cat == "FFN_DOWN":  # :624-666
        i, n = layer_info(qs.i_ffn_down, qs.n_ffn_down)
        if ftype == "Q2_K":
            new = "Q3_K"
        elif ftype == "Q2_K_S":
            if i < n // 8:
                new = "Q4_K"
        elif ftype == "IQ3_XXS" and not qs.has_imatrix:
            new = "Q4_K" if i < n // 8 else "Q3_K"
        elif ftype == "Q3_K_M":
            new = "Q5_K" if i < n // 16 else "Q4_K"  # arch != FALCON: always Q4_K past n/16
        elif ftype == "IQ3_M" and (i < n // 8 or (hp.n_expert == 8 and _use_more_bits(i, n))):
            new = "Q4_K"
        elif ftype == "Q3_K_L":
            new = "Q5_K"
        elif ftype == "Q4_K_M":
            if _use_more_bits(i, n):
                new = "Q6_K"
        elif i < n // 8 and ftype in ("IQ4_NL", "IQ4_XS") and not qs.has_imatrix:
            new = "Q5_K"
        elif ftype == "Q5_K_M" and _use_more_bits(i, n):
            new = "Q6_K"
        elif ftype == "Q4_K_S" and i < n // 8:
            new = "Q5_K"
        elif ftype in ("Q4_0", "Q5_0") and qs.has_imatrix and i < n // 8:
            new = "Q4_1" if ftype == "Q4_0" else "Q5_1"
        qs.i_ffn_down += 1
        return new
    if cat == "ATTENTION_OUTPUT":  # :667-687
        if hp.n_expert == 8:
            if ftype in ("Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S",
                         "IQ3_M", "IQ4_XS"):
                new = "Q5_K"
        else:
            new = {"Q2_K": "Q3_K", "IQ3_XXS": "IQ3_S", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K",
                   "IQ3_M": "Q4_K"}.get(ftype, new)
        return new
    if cat == "ATTENTION_QKV":  # :688-694
        if ftype in ("Q3_K_M", "Q3_K_L", "IQ3_M"):
            return "Q4_K"
        return {"Q4_K_M": "Q5_K", "Q5_K_M": "Q6_K"}.get(ftype, new)
    if cat in ("FFN_GATE", "FFN_UP"):  # :695-711
        counter = qs.i_ffn_gate if cat == "FFN_GATE" else qs.i_ffn_up
        i, n = layer_info(counter, qs.n_ffn_gate)
        if ftype == "IQ3_XS" and n // 8 <= i < 7 * n // 8:
            new = "IQ3_XXS"
        if cat == "FFN_GATE":
            qs.i_ffn_gate += 1
        else:
            qs.i_ffn_up += 1
        return new
    return new


def weights_map_order(names: list[str]) -> list[str]:
    """``weight_name_comparer`` (src/llama-model-loader.h:54-65): by the ``blk.%d.`` layer (-1 when none),
    then by name."""
    def key(n: str):
        m = re.match(r"blk\.(\d+)\.", n)
        return (int(m.group(1)) if m else -1, n)
    return sorted(names, key=key)


def tensor_types(config: dict[str, Any], ftype: str, *, has_imatrix: bool | None = None
                 ) -> tuple[str, list[tuple[str, list[int], str]], list[str]]:
    """``(arch, [(name, ne, ggml type)] in file order, notes)``: the GGUF ``llama-quantize`` writes for ``config``
    at file type ``ftype`` (a key of ``FTYPES``), from an F16/BF16 conversion.

    ``has_imatrix``: whether the file was quantized with an importance matrix (``--imatrix``); ``None`` = the
    rule's own requirement (IMATRIX_REQUIRED types need one, others are taken without, and a note says so where
    it changes a type). Raises ``NotModelled`` (field ``gguf_file``) for an unknown file type and for
    architectures :func:`hf_tensor_table` does not lay out."""
    ftype = ftype.upper()
    if ftype not in FTYPES:
        raise NotModelled(f"file type {ftype!r}: llama.cpp's are {', '.join(FTYPES)}", field="gguf_file")
    arch, table, hp, _ = hf_tensor_table(config)
    notes: list[str] = []
    if has_imatrix is None:
        has_imatrix = ftype in IMATRIX_REQUIRED
        if ftype in IMATRIX_SENSITIVE:
            notes.append(f"{ftype}: taken as quantized without an importance matrix; with one (--imatrix) a few "
                         "tensors differ (src/llama-quant.cpp:579,627,651,653)")
    default = FTYPES[ftype][1]
    order = weights_map_order([n for n, _, _ in table])
    by_name = {n: (ne, src) for n, ne, src in table}
    qs = _State(order, hp, has_imatrix)
    quantized = default not in ("F32", "F16", "BF16")  # ggml_is_quantized(default_type) (:747)
    out, fell = [], 0
    for name in order:
        ne, src = by_name[name]
        if not allows_quantization(name, ne):
            out.append((name, ne, src))  # keeps the converter's type (:717-720)
            continue
        new = default
        if quantized:
            new = _get_type_impl(qs, hp, new, name, ne, ftype, _category(name))
            new, f = _fallback(name, ne[0], new)
            fell += f
        out.append((name, ne, new))
    if fell:
        notes.append(f"{fell} tensors have rows that are no whole number of their type's blocks and fall back to a "
                     "smaller-block type (tensor_type_fallback, src/llama-quant.cpp:390-443)")
    return arch, out, notes


def _nbytes(type_name: str, ne: list[int]) -> int:
    block, size, _ = _quant_size(type_name)
    n = 1
    for d in ne:
        n *= d
    return n // block * size


def derive_meta(config: dict[str, Any], ftype: str, *, source: str = "config.json",
                has_imatrix: bool | None = None, filename: str | None = None) -> GGUFMeta:
    """A :class:`GGUFMeta` with the tensor table ``llama-quantize`` writes for ``config`` at ``ftype``: the
    attention metadata of :func:`meta_from_hf_config`, every tensor's derived type and shape, and its offset in
    the file (weights_map order, each tensor padded to 32 bytes: src/llama-quant.cpp:1368, gguf.cpp:1445).
    ``source`` says "derived from llama.cpp's quantization rules for <ftype>". Raises ``NotModelled``."""
    arch, table, notes = tensor_types(config, ftype, has_imatrix=has_imatrix)
    base = meta_from_hf_config(config, source=source)
    tensors, offset = [], 0
    for name, ne, t in table:
        nbytes = _nbytes(t, ne)
        n_el = 1
        for d in ne:
            n_el *= d
        tensors.append(GGUFTensor(name=name, ggml_type=t, type_id=_quant_size(t)[2], shape=list(ne),
                                  n_elements=n_el, n_bytes=nbytes, offset=offset, file_index=0))
        offset += (nbytes + 31) // 32 * 32
    n_vocab = next(ne[1] for n, ne, _ in table if n == "token_embd.weight")
    label = (f"derived from llama.cpp's quantization rules for {ftype.upper()} ({QUANT}:446-714, "
             f"llama_tensor_get_type) and {source}")
    if filename:
        label += f"; file {filename} (its header was not read)"
    return base.model_copy(update={
        "source": label, "files": [filename or f"<derived {ftype.upper()}>"], "file_sizes": [offset],
        "file_type": FTYPES[ftype.upper()][0], "n_vocab": n_vocab, "tensors": tensors, "data_offsets": [0],
        "kv": {"derived.notes": "; ".join(notes)} if notes else {},
    })
