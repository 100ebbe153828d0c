"""The SGLang releases this package models, and where each rule lives in each release's source.

Every line number below was read from the release's wheel (``pip download sglang==X --no-deps``),
paths relative to the wheel root (``sglang/srt/...``). A release not in :data:`COVERED` is refused by
name (:func:`check_release`): the memory defaults changed several times (a TP table up to 0.4.3, a
GPU-memory table in 0.4.10, a "reserved memory" formula since 0.5.x (sgl-project/sglang PR #10975),
piecewise CUDA graphs counted in 0.5.10), so a neighbouring release is not a safe stand-in.

Release families (what changes between them):

- ``0.4.3.post4``: ``mem_fraction_static`` by TP size only; no paging; ``ReqToTokenPool`` has
  ``max_num_reqs + 1`` rows; EAGLE adds draft/verify headroom to the shared pool.
- ``0.4.10.post2``: ``mem_fraction_static = round((gpu_mem - reserved) / gpu_mem, 3)`` with ``reserved``
  from a GPU-memory table; page alignment; hybrid SWA pool for sliding-window models.
- ``0.5.3``: reserved memory from chunked-prefill size and CUDA-graph batch size; DeepSeek NSA
  (V3.2) forces ``mem_fraction_static = 0.8``, page 64, DP attention, fp8 KV on SM100.
- ``0.5.3.post1``: PR #11309: the NSA indexer cache counted in the per-token cell; the 0.8 removed.
- ``0.5.7`` / ``0.5.8.post1``: KV-cache mixin file; ``aiter`` x0.85 for long contexts; Mamba pools
  split by ``mamba_full_memory_ratio``; no draft headroom in the shared pool.
- ``0.5.9``: as 0.5.8.post1 for memory (gpt-oss keeps the SWA pool with speculative decoding); first
  release with Kimi-K2.5 (``KimiK25ForConditionalGeneration``).
- ``0.5.10.post1``: piecewise CUDA graphs on by default (counted in the reserve); EAGLE reserve 4 GiB.
- ``0.5.23``: server arguments resolved by ``sglang/srt/arg_groups`` hooks and the pool sized by
  ``mem_cache/kv_cache_configurator.py`` + ``model_executor/pool_configurator.py``. Below 35 GiB chunked prefill
  4096 and decode CUDA-graph batch 48 (160 at TP >= 4); the decode batch capped at ``--max-running-requests``;
  the reserve counts the decode graph only when it is on and the breakable prefill graph (the piecewise one's
  successor, on by default on CUDA, also with speculative decoding and DP attention; 8 MiB per captured size, 1.5
  GiB for MLA, MLA capture up to 8192 tokens); no speculative reserve: the draft's weights load before the target's
  pool is sized and EAGLE / MTP / STANDALONE drafts' KV is charged in the target's per-token cell; a multimodal
  model keeps 100 MiB of the KV budget; speculative decoding keeps the overlap scheduler on a GPU (spec v2 is the only
  EAGLE worker; up to 0.5.10.post1 speculation turns it off: :func:`spec_overlap`); ``--max-running-requests`` is no longer capped at 2048-4096 (only at half
  the pool); ``ReqToTokenPool`` has one padding row more; ROCm keeps rotary caches in float32. Hybrid SWA
  (``HybridSWAPoolConfigurator``: gpt-oss, Llama 4, MiMo-V2(-Flash), Gemma 4): the budget divided by full-layer rows +
  ``swa_full_tokens_ratio`` x sliding-layer rows (and an EAGLE draft's layers on the full side), then swa = full x
  0.8, the SWA pool checked against the window. Hybrid GDN
  (``_handle_max_mamba_cache``): the Mamba pool solved with its padding slot (K = (budget - per_req) // per_req,
  K + 1 slots taken), and 5 state slots per running request (the Mamba extra buffer is on by default); on SM100
  trtllm_mha with 64-token pages. DeepSeek DSA (V3.2, GLM-5; CUDA SM90 / SM100): page 64, KV fp8 from SM100 and bf16
  below, the pool's own rows counted in the cell (656-byte scaled fp8 rows on Hopper with an fp8 KV, else the raw 576
  elements: trtllm on Blackwell) + the indexer's 132 B per layer. Refused there (not modelled): the other hybrid SWA
  models (Step3.5, DeepSeek-V4, Inkling, Laguna, ...), a hybrid SWA model with the radix cache off and a request cap
  (``SWARequestCapPoolConfigurator``), speculative decoding and a disabled radix cache on GDN models, the other DSA
  models (Mistral Large 3, LongCat, HYV4, ...), DSA on ROCm or other compute capabilities, Qwen3-VL's large-Hopper
  serving defaults.
"""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from calculator.engine.errors import EngineInputError

#: Covered releases, oldest first.
COVERED: tuple[str, ...] = ("0.4.3.post4", "0.4.10.post2", "0.5.3", "0.5.3.post1", "0.5.7", "0.5.8.post1",
                            "0.5.9", "0.5.10.post1", "0.5.23")

#: The release answered when none is named: the newest covered (what SGLang users run today). It refuses DeepSeek DSA
#: on ROCm, Qwen3-VL's large-Hopper serving defaults and gpt-oss's request-capped SWA pool, which 0.5.10.post1
#: answers; those refusals name ``--sglang-version 0.5.10.post1``.
DEFAULT = "0.5.23"

_SA = "sglang/srt/server_args.py"
_MR = "sglang/srt/model_executor/model_runner.py"
_MX = "sglang/srt/model_executor/model_runner_kv_cache_mixin.py"
_TW = "sglang/srt/managers/tp_worker.py"
_MP = "sglang/srt/mem_cache/memory_pool.py"
_UT_OLD = "sglang/srt/utils.py"
_UT_NEW = "sglang/srt/utils/common.py"
_HF_OLD = "sglang/srt/hf_transformers_utils.py"
_HF_NEW = "sglang/srt/utils/hf_transformers_utils.py"
_MC = "sglang/srt/configs/model_config.py"
_ROPE = "sglang/srt/layers/rotary_embedding.py"
_DS = "sglang/srt/models/deepseek_v2.py"
_Q3M = "sglang/srt/models/qwen3_moe.py"
_UQ = "sglang/srt/layers/quantization/unquant.py"
_Q3VL = "sglang/srt/models/qwen3_vl.py"
_K25 = "sglang/srt/models/kimi_k25.py"
_WNA16 = "sglang/srt/layers/quantization/compressed_tensors/schemes/compressed_tensors_wNa16_moe.py"
_Q35 = "sglang/srt/models/qwen3_5.py"
_MX4 = "sglang/srt/layers/quantization/mxfp4.py"
# 0.5.23: ServerArgs' resolution moved into sglang/srt/arg_groups (one hook module per concern) and the KV pool sizing
# into the KV-cache configurator and the pool configurators
_AG = "sglang/srt/arg_groups"
_MEM = f"{_AG}/memory_hook.py"
_CG = f"{_AG}/cuda_graph_hook.py"
_SPH = f"{_AG}/speculative_hook.py"
_KVC = "sglang/srt/mem_cache/kv_cache_configurator.py"
_PC = "sglang/srt/model_executor/pool_configurator.py"

# Rules of the weights estimate (weights.py), per release: the rotary cache dtype rule, DeepSeek MLA's
# replicated q_a_proj, the Qwen3-VL vision MLP over the attention-TP group, Kimi-K2.5's replicated MoonViT MLP,
# the ROCm WNA16 MoE g_idx tensors, Qwen3-MoE's cached parameter dict and the aiter expert shuffle.
_WEIGHT_LINES: dict[str, dict[str, tuple[str, int]]] = {
    "0.4.3.post4": {"rope_cache": (_ROPE, 84), "mla_q_a": (_DS, 253)},
    "0.4.10.post2": {"rope_cache": (_ROPE, 101), "mla_q_a": (_DS, 776)},
    "0.5.3": {"rope_cache": (_ROPE, 109), "mla_q_a": (_DS, 1041), "params_dict_cache": (_Q3M, 820),
              "aiter_moe_shuffle": (_UQ, 217), "qwen3_vl_vision": (_Q3VL, 66)},
    "0.5.3.post1": {"rope_cache": (_ROPE, 109), "mla_q_a": (_DS, 1041), "params_dict_cache": (_Q3M, 820),
                    "aiter_moe_shuffle": (_UQ, 217), "qwen3_vl_vision": (_Q3VL, 66)},
    "0.5.7": {"rope_cache": (_ROPE, 115), "mla_q_a": (_DS, 1328), "params_dict_cache": (_Q3M, 1028),
              "aiter_moe_shuffle": (_UQ, 220), "qwen3_vl_vision": (_Q3VL, 88)},
    "0.5.8.post1": {"rope_cache": (_ROPE, 115), "mla_q_a": (_DS, 1127), "params_dict_cache": (_Q3M, 1036),
                    "aiter_moe_shuffle": (_UQ, 220), "qwen3_vl_vision": (_Q3VL, 92)},
    "0.5.9": {"rope_cache": (_ROPE, 123), "mla_q_a": (_DS, 1122), "params_dict_cache": (_Q3M, 1045),
              "aiter_moe_shuffle": (_UQ, 232), "qwen3_vl_vision": (_Q3VL, 93), "kimi_vision": (_K25, 120),
              "wna16_g_idx": (_WNA16, 175), "qwen3_5_gate": (_Q35, 476)},
    "0.5.10.post1": {"rope_cache": ("sglang/srt/layers/rotary_embedding/base.py", 73), "mla_q_a": (_DS, 1143),
                     "qwen3_vl_vision": (_Q3VL, 106), "kimi_vision": (_K25, 126), "wna16_g_idx": (_WNA16, 175),
                     "qwen3_5_gate": (_Q35, 686)},
    # rope_cache: from 0.5.23 the cache stays float32 on ROCm too (the cast at :120 runs on neither CUDA nor HIP,
    # :119); rope_yarn_npu: DeepseekScalingRotaryEmbedding builds cos/sin_cached_total on NPU only
    "0.5.23": {"rope_cache": ("sglang/srt/layers/rotary_embedding/base.py", 119),
               "rope_yarn_npu": ("sglang/srt/layers/rotary_embedding/rope_variant.py", 417),
               "mla_q_a": (_DS, 2070), "qwen3_vl_vision": (_Q3VL, 158), "kimi_vision": (_K25, 110),
               "wna16_g_idx": (_WNA16, 219),
               "wna16_triton_sm100": ("sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py", 927),
               "qwen3_5_gate": (_Q35, 1335)},
}

# gpt-oss MXFP4 MoE on Hopper with triton_kernels (weights.gptoss_mxfp4_sm90_bytes): the backend default
# (gptoss_tk_backend), the intermediate-size padding of Mxfp4MoEMethod.create_weights (gptoss_tk_pad), the fp32 biases
# (gptoss_tk_bias), the swizzle (gptoss_tk_swizzle) and the deletion of the unswizzled weights only (gptoss_tk_del: the
# w13/w2 scale Parameters stay); 0.5.23: the Hopper scale padding to round_up(K, 128) / 32 columns (gptoss_tk_scale_pad)
_GPTOSS_TK_LINES = {
    "0.5.3": (318, 581, 557, 84, (_SA, 777)), "0.5.3.post1": (318, 581, 557, 84, (_SA, 820)),
    "0.5.7": (313, 576, 552, 92, (_SA, 1205)), "0.5.8.post1": (299, 562, 538, 94, (_SA, 1313)),
    "0.5.9": (353, 702, 678, 136, (_SA, 1395)), "0.5.10.post1": (368, 717, 693, 134, (_SA, 1750)),
    "0.5.23": (549, 1074, 1049, 244, ("sglang/srt/arg_groups/model_overrides/gpt_oss.py", 117)),
}
for _rel, (_pad, _del, _bias, _swz, _be) in _GPTOSS_TK_LINES.items():
    _WEIGHT_LINES[_rel].update({"gptoss_tk_pad": (_MX4, _pad), "gptoss_tk_del": (_MX4, _del),
                                "gptoss_tk_bias": (_MX4, _bias), "gptoss_tk_swizzle": (_MX4, _swz),
                                "gptoss_tk_backend": _be})
_WEIGHT_LINES["0.5.23"]["gptoss_tk_scale_pad"] = (_MX4, 220)

# (file, line) per rule per release. Keys:
#  mfs_default      the default mem_fraction_static block
#  mfs_reserved     reserved-memory formula (0.4.10+)
#  gpu_tables       chunked_prefill_size / cuda_graph_max_bs by GPU memory
#  dp_chunked       chunked_prefill_size divided under DP attention
#  vlm_adjust       adjust_mem_fraction_for_vlm
#  aiter            mem_fraction_static *= 0.85 for aiter with context_len > 8192
#  nsa              DeepSeek NSA block of ServerArgs (0.5.3/0.5.3.post1/0.5.7: its enable_dp_attention line; from
#                   0.5.8.post1 the block's first line: no DP attention forced there, only page and KV dtype)
#  nsa_page         NSA page size (64; from 0.5.8.post1: 1 on ROCm, 64 on CUDA)
#  nsa_archs        is_deepseek_nsa: the architectures treated as NSA/DSA (configs/model_config.py)
#  profile          profile_max_num_token: rest = post_load - pre_load * (1 - mfs)
#  cell             bytes per token (MHA / MLA / NSA indexer)
#  max_num_reqs     min(max(tokens / context_len * 512, 2048), 4096)
#  page_align       max_total_num_tokens // page_size * page_size
#  max_running      max_running_requests = min(tokens // 2 or flag, pool rows)
#  spec_headroom    EAGLE draft/verify headroom added to the shared pool (<= 0.5.3.post1)
#  spec_defaults    auto_choose_speculative_params / class defaults
#  spec_max_running max_running_requests default for EAGLE
#  swa_split        hybrid SWA split by swa_full_tokens_ratio
#  mamba_split      Mamba state vs KV split by mamba_full_memory_ratio
#  mamba_ratio      MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO
#  context_len      get_context_length
#  context_over     --context-length above the derived one: the ValueError (0.4.10.post2: the env default True that
#                   lets it through with a warning)
#  free_mem         get_available_gpu_memory (torch.cuda.mem_get_info)
#  gpu_capacity     nvidia-smi / rocminfo total memory that the defaults read
#  pre_load         free memory measured before loading ("Load weight begin")
#  nsa_pool         NSATokenToKVPool layout (656-byte fp8 rows, indexer 128+4 bytes per token per layer); from 0.5.7
#                   where the fp8 row (override_kv_cache_dim) is computed
#  piecewise        piecewise CUDA graph reserve (0.5.10)
#  kv_log           the "KV Cache is allocated" log line
#  max_prefill_tokens  the 16384 default; req_to_token  ReqToTokenPool (int32 rows of context_len + 4)
#  pool_end         the "Memory pool end. avail mem" log line
#  kv_auto          --kv-cache-dtype auto: the model dtype; from 0.5.3 fp8 when the loaded quantization class has
#                   kv_cache_quant_algo FP8 (which class and which attribute: kv_dtype.py, keys below)
#  gemma_swa_off    Gemma 2/3 -> disable_hybrid_swa_memory (0.4.10: Gemma 2 only)
#  gptoss_swa_off   gpt-oss -> disable_hybrid_swa_memory (always up to 0.5.7; trtllm_mha / speculative in 0.5.8)
#  ngram_max_running  NGRAM: max_running_requests = 48 when not given (0.5.3+, the NGRAM block of server_args)
#  hybrid_swa_on    0.5.10: is_hybrid_swa_model (gpt-oss, MiMo-V2-Flash, Step3.5, Llama 4) unless disabled
_LINES: dict[str, dict[str, tuple[str, int]]] = {
    "0.4.3.post4": {
        "context_over": (_MC, 92),
        "kv_auto": (_MR, 641),
        "max_prefill_tokens": (_SA, 70), "req_to_token": (_MP, 46), "pool_end": (_MR, 766),
        "mfs_default": (_SA, 204), "gpu_tables": (_SA, 217), "dp_chunked": (_SA, 265),
        "profile": (_MR, 629), "cell": (_MR, 616), "max_num_reqs": (_MR, 659), "max_running": (_TW, 109),
        "spec_headroom": (_MR, 679), "spec_defaults": (_SA, 130), "spec_max_running": (_SA, 280),
        "context_len": (_HF_OLD, 100), "free_mem": (_UT_OLD, 174), "gpu_capacity": (_UT_OLD, 892),
        "pre_load": (_MR, 299), "kv_log": (_MP, 211),
    },
    "0.4.10.post2": {
        "context_over": (_MC, 164),
        "kv_auto": (_MR, 1080),
        "max_prefill_tokens": (_SA, 82), "req_to_token": (_MP, 47), "pool_end": (_MR, 1304),
        "gemma_swa_off": (_SA, 1943),
        "mfs_default": (_SA, 310), "mfs_reserved": (_SA, 324), "gpu_tables": (_SA, 362), "dp_chunked": (_SA, 463),
        "vlm_adjust": (_SA, 2045), "profile": (_MR, 986), "cell": (_MR, 973), "max_num_reqs": (_MR, 1100),
        "page_align": (_MR, 1147), "max_running": (_TW, 127), "spec_headroom": (_MR, 1120),
        "spec_defaults": (_SA, 2202), "spec_max_running": (_SA, 536), "swa_split": (_MR, 1058),
        "context_len": (_HF_OLD, 187), "gpu_capacity": (_UT_OLD, 1425), "pre_load": (_MR, 574), "kv_log": (_MP, 211),
    },
    "0.5.3": {
        "context_over": (_MC, 276),
        "ngram_max_running": (_SA, 1133),
        "kv_auto": (_MR, 1397),
        "max_prefill_tokens": (_SA, 191), "req_to_token": (_MP, 61), "pool_end": (_MR, 1724),
        "gemma_swa_off": (_SA, 804), "gptoss_swa_off": (_SA, 781),
        "mfs_default": (_SA, 638), "mfs_reserved": (_SA, 639), "gpu_tables": (_SA, 566), "dp_chunked": (_SA, 957),
        "vlm_adjust": (_SA, 683), "nsa": (_SA, 816), "nsa_page": (_SA, 820), "nsa_archs": (_MC, 52), "nsa_mfs": (_SA, 823), "profile": (_MR, 1288),
        "cell": (_MR, 1274), "max_num_reqs": (_MR, 1432), "page_align": (_MR, 1478), "max_running": (_TW, 144),
        "spec_headroom": (_MR, 1451), "spec_defaults": (_SA, 3301), "spec_max_running": (_SA, 1060),
        "swa_split": (_MR, 1374), "context_len": (_HF_NEW, 291), "pre_load": (_MR, 698),
        "nsa_pool": (_MP, 1054), "kv_log": (_MP, 362), "gdn_layers": (_MR, 1270),
    },
    "0.5.3.post1": {
        "context_over": (_MC, 282),
        "ngram_max_running": (_SA, 1173),
        "kv_auto": (_MR, 1421),
        "max_prefill_tokens": (_SA, 207), "req_to_token": (_MP, 64), "pool_end": (_MR, 1738),
        "gemma_swa_off": (_SA, 847), "gptoss_swa_off": (_SA, 824),
        "mfs_default": (_SA, 673), "mfs_reserved": (_SA, 674), "gpu_tables": (_SA, 601), "dp_chunked": (_SA, 997),
        "vlm_adjust": (_SA, 718), "nsa": (_SA, 859), "nsa_page": (_SA, 863), "nsa_archs": (_MC, 52), "profile": (_MR, 1302), "cell": (_MR, 1277),
        "nsa_indexer": (_MR, 1283), "max_num_reqs": (_MR, 1456), "page_align": (_MR, 1502),
        "max_running": (_TW, 139), "spec_headroom": (_MR, 1475), "spec_defaults": (_SA, 3368),
        "spec_max_running": (_SA, 1100), "swa_split": (_MR, 1398), "context_len": (_HF_NEW, 293),
        "pre_load": (_MR, 701), "nsa_pool": (_MP, 1302), "kv_log": (_MP, 379),
    },
    "0.5.7": {
        "context_over": (_MC, 349),
        "ngram_max_running": (_SA, 2097),
        "kv_auto": (_MR, 1528),
        "max_prefill_tokens": (_SA, 301), "req_to_token": (_MP, 78), "pool_end": (_MX, 660),
        "gemma_swa_off": (_SA, 1278), "gptoss_swa_off": (_SA, 1214),
        "mfs_default": (_SA, 909), "mfs_reserved": (_SA, 911), "gpu_tables": (_SA, 827), "dp_chunked": (_SA, 1809),
        "vlm_adjust": (_SA, 957), "aiter": (_SA, 1660), "nsa": (_SA, 1035), "nsa_page": (_SA, 1058), "nsa_archs": (_MC, 53), "nsa_pool": (_MP, 1836), "profile": (_MX, 137),
        "cell": (_MX, 49), "max_num_reqs": (_MX, 279), "page_align": (_MX, 325), "max_running": (_MR, 524),
        "spec_headroom": (_MX, 311), "spec_defaults": (_SA, 5151), "spec_max_running": (_SA, 1995),
        "mamba_split": (_MX, 183), "mamba_ratio": (_MX, 39), "context_len": (_HF_NEW, 393),
        "pre_load": (_MR, 780), "swa_split": (_MX, 247), "piecewise": (_SA, 945), "kv_log": (_MP, 562),
        "nsa_indexer": (_MX, 75),
    },
    "0.5.8.post1": {
        "context_over": (_MC, 357),
        "ngram_max_running": (_SA, 2238),
        "kv_auto": (_MR, 1546),
        "max_prefill_tokens": (_SA, 316), "req_to_token": (_MP, 117), "pool_end": (_MX, 647),
        "gemma_swa_off": (_SA, 1385), "gptoss_swa_off": (_SA, 1283), "gptoss_swa_off_spec": (_SA, 1290),
        "mfs_default": (_SA, 988), "mfs_reserved": (_SA, 990), "gpu_tables": (_SA, 903), "dp_chunked": (_SA, 1937),
        "vlm_adjust": (_SA, 1037), "vlm_formula": (_SA, 5160), "aiter": (_SA, 1788), "nsa": (_SA, 1110), "nsa_page": (_SA, 1151), "nsa_archs": (_MC, 54), "nsa_pool": (_MP, 1699),
        "profile": (_MX, 138), "cell": (_MX, 47), "nsa_indexer": (_MX, 73), "kv_log": (_MP, 605), "max_num_reqs": (_MX, 258), "page_align": (_MX, 310),
        "max_running": (_MR, 558), "spec_headroom": (_MX, 296), "spec_defaults": (_SA, 5425),
        "spec_max_running": (_SA, 2135), "mamba_split": (_MX, 188), "mamba_ratio": (_MX, 37),
        "context_len": (_HF_NEW, 396), "pre_load": (_MR, 779), "swa_split": (_MX, 228),
        "gptoss_swa": (_SA, 1283), "piecewise": (_SA, 1012),
    },
    "0.5.9": {
        "context_over": (_MC, 382),
        "ngram_max_running": (_SA, 2468),
        "kv_auto": (_MR, 1670),
        "max_prefill_tokens": (_SA, 330), "req_to_token": (_MP, 126), "pool_end": (_MX, 745),
        "gemma_swa_off": (_SA, 1487), "gptoss_swa_off": (_SA, 1359),
        "mfs_default": (_SA, 1020), "mfs_reserved": (_SA, 1022), "gpu_tables": (_SA, 935), "dp_chunked": (_SA, 2117),
        "vlm_adjust": (_SA, 1069), "vlm_formula": (_SA, 5483), "aiter": (_SA, 1926), "nsa": (_SA, 1205), "nsa_page": (_SA, 1251), "nsa_archs": (_MC, 54), "nsa_pool": (_MX, 212),
        "profile": (_MX, 143), "cell": (_MX, 47), "nsa_indexer": (_MX, 73), "kv_log": (_MP, 652),
        "max_num_reqs": (_MX, 345), "page_align": (_MX, 389), "max_running": (_MR, 593), "spec_headroom": (_MX, 412),
        "spec_defaults": (_SA, 5741), "spec_max_running": (_SA, 2363), "mamba_split": (_MX, 194),
        "mamba_ratio": (_MX, 37), "context_len": (_HF_NEW, 453), "pre_load": (_MR, 828), "swa_split": (_MX, 273),
        "piecewise": (_SA, 1044),
    },
    "0.5.10.post1": {
        "context_over": (_MC, 402),
        "ngram_max_running": (_SA, 3099),
        "kv_auto": (_MR, 1903),
        "max_prefill_tokens": (_SA, 349), "req_to_token": (_MP, 126), "pool_end": (_MX, 906),
        "gemma_swa_off": (_SA, 1877), "hybrid_swa_archs": (_MC, 1438), "hybrid_swa_on": (_MC, 363),
        "mfs_default": (_SA, 1281), "mfs_reserved": (_SA, 1283), "gpu_tables": (_SA, 1165),
        "dp_chunked": (_SA, 2641), "vlm_adjust": (_SA, 1334), "vlm_formula": (_SA, 6396), "aiter": (_SA, 2417),
        "nsa": (_SA, 1515), "nsa_page": (_SA, 1576), "nsa_archs": (_MC, 55), "nsa_pool": (_MX, 240), "nsa_kv_dtype": (_SA, 1430), "profile": (_MX, 171), "cell": (_MX, 75),
        "nsa_indexer": (_MX, 99), "max_num_reqs": (_MX, 844), "page_align": (_MX, 826),
        "spec_defaults": (_SA, 6711), "spec_max_running": (_SA, 2994), "mamba_split": (_MX, 222),
        "mamba_ratio": (_MX, 64), "context_len": (_HF_NEW, 689), "pre_load": (_MR, 1075), "swa_split": (_MX, 313),
        "piecewise": (_SA, 1306), "piecewise_off": (_SA, 1078), "piecewise_tokens": (_SA, 1397),
        "piecewise_max_tokens": (_SA, 1254),
        "kv_log": (_MP, 696), "spec_reserve": (_SA, 1319),
    },
    # 0.5.23 (keys as above; new ones: decode_bs_cap the decode CUDA-graph batch capped at --max-running-requests,
    # graph_reserve reserve_for_graph_mb, piecewise_default the breakable prefill graph's default (on with CUDA only),
    # piecewise_mm / piecewise_dsv3_trtllm / piecewise_torch_native the cases turning it off, mm_reserve the 100 MiB a
    # multimodal model keeps from the KV budget, mm_archs the multimodal architectures, mm_disabled the
    # architectures SGLang serves text-only by default, spec_cell the EAGLE / STANDALONE draft's KV in the target's
    # cell, spec_draft_first the draft worker made (weights loaded) before the target's pool, req_to_token_pad the
    # padding row, req_to_token_extra its row width, post_capture the post-capture sizing (off by default),
    # hybrid_swa_archs is_hybrid_swa_model, dsa_archs is_deepseek_dsa, qwen3_vl_hopper the large-Hopper Qwen3-VL
    # serving defaults, max_num_reqs_flag the --max-running-requests branch of resolve_max_num_reqs)
    "0.5.23": {
        "context_over": (_MC, 1314),
        "ngram_max_running": (_SPH, 1298),
        "kv_auto": ("sglang/srt/mem_cache/kv_cache_dtype.py", 49),
        "max_prefill_tokens": (f"{_AG}/fields/schedule.py", 81), "req_to_token": (_MP, 376),
        "req_to_token_pad": (_MP, 402), "req_to_token_extra": ("sglang/srt/mem_cache/allocation_sizing.py", 105),
        "pool_end": (_KVC, 499),
        "gemma_swa_off": (f"{_AG}/model_overrides/gemma2_gemma3.py", 26),
        "hybrid_swa_archs": (_MC, 2651), "dsa_archs": (_MC, 191),
        "mfs_default": (_MEM, 281), "mfs_reserved": (_MEM, 309), "gpu_tables": (_MEM, 89),
        "decode_bs_cap": (_MEM, 188), "graph_reserve": (_MEM, 357),
        "dp_chunked": (f"{_AG}/parallel_hook.py", 331), "dp_prefill_graph": (f"{_AG}/parallel_hook.py", 351),
        "vlm_adjust": (_MEM, 332), "vlm_formula": (_MEM, 417),
        "mm_reserve": (_KVC, 210), "mm_archs": (_MC, 2391), "mm_disabled": (_MC, 692),
        "aiter": (f"{_AG}/attention_hook.py", 268),
        "profile": (_KVC, 3038), "cell": (_PC, 492), "mla_cell": (_KVC, 3419),
        "max_num_reqs": (_KVC, 3123), "max_num_reqs_flag": (_KVC, 3129), "page_align": (_PC, 646),
        "spec_defaults": (_SPH, 1430), "spec_max_running": (_SPH, 1090), "spec_cell": (_PC, 311),
        "spec_draft_first": ("sglang/srt/managers/scheduler.py", 1133),
        "context_len": ("sglang/srt/utils/hf_transformers/common.py", 677),
        "pre_load": (_MR, 1262),
        "piecewise": (_MEM, 386), "piecewise_mla": (_MEM, 389), "piecewise_default": (
            "sglang/srt/model_executor/cuda_graph_config.py", 123),
        "piecewise_off": (_CG, 170), "piecewise_mm": (_CG, 231), "piecewise_dsv3_trtllm": (_CG, 279),
        "piecewise_torch_native": (f"{_AG}/attention_hook.py", 124),
        "piecewise_tokens": (_CG, 480), "piecewise_max_tokens": (_MEM, 236), "piecewise_llama2": (_MEM, 260),
        "post_capture": ("sglang/srt/environ.py", 640),
        "qwen3_vl_hopper": (f"{_AG}/model_overrides/qwen3_vl.py", 20),
        "kv_log": (_MP, 2088), "page_default": (f"{_AG}/overrides.py", 1362),
        # hybrid SWA (gpt-oss): HybridSWAPoolConfigurator
        "swa_layer_ids": (_MC, 2712), "swa_configurator": (_PC, 1723), "swa_request_cap": (_PC, 987),
        "swa_cell": (_PC, 801), "swa_draft_layers": (_PC, 755), "swa_tokens": (_PC, 915), "swa_split": (_PC, 881),
        "swa_validate": (_PC, 210), "swa_ratio_default": (f"{_AG}/fields/schedule.py", 160),
        # hybrid GDN (Qwen3-Next / Qwen3.5): _handle_max_mamba_cache and resolve_max_num_reqs
        "mamba_ratio_default": (f"{_AG}/fields/schedule.py", 225), "mamba_split": (_KVC, 3354),
        "mamba_size": (_KVC, 3383), "mamba_pad": (_KVC, 3406), "mamba_too_small": (_KVC, 3392),
        "mamba_ratio": (_KVC, 3137), "mamba_ratio_base": (_KVC, 227),
        "mamba_tracking": ("sglang/srt/mem_cache/allocation_sizing.py", 19),
        "mamba_extra_buffer": (f"{_AG}/overrides.py", 483), "mamba_no_reqs": (_KVC, 3152),
        # DeepSeek DSA (V3.2, GLM-5): page 64 x index_kpool, the KV dtype and backends by compute capability, the pool's
        # rows (calculate_mla_kv_cache_dim) and the indexer in the cell, an MTP draft's share
        "nsa_page": (f"{_AG}/model_overrides/deepseek_v2.py", 171), "nsa_kv_dtype": (f"{_AG}/overrides.py", 534),
        "dsa_backends": (f"{_AG}/overrides.py", 716), "nsa_pool": (_KVC, 3472), "nsa_indexer": (_PC, 569),
        "dsa_draft_cell": (_PC, 296), "dsa_skip_topk": (_MC, 488),
        "dsa_glm_sm12": (f"{_AG}/overrides.py", 637),
    },
}


# --kv-cache-dtype auto and the checkpoint's KV scheme (kv_dtype.py), per release:
#  q_detect        ModelConfig._parse_quant_hf_config: config.json's quantization_config, else compression_config, else
#                  hf_quant_config.json
#  q_file          how hf_quant_config.json becomes a quant_method ({"quant_method": "modelopt"} up to 0.5.3, then
#                  _parse_modelopt_quant_config: modelopt_fp4 / modelopt_fp8 by quant_algo)
#  q_cfg_rewrite   config.json's ModelOpt quantization_config rewritten the same way (0.5.9: without quant_method;
#                  from 0.5.10.post1 also with quant_method "modelopt")
#  q_verify        _verify_quantization: each method's override_quantization_method, then --quantization against it
#  q_compat        compatible_quantization_methods (the --quantization values accepted for another checkpoint method)
#  q_unknown       "Unknown quantization method" (a quant_method no class is registered for)
#  q_alias_fp8     the QUANTIZATION_METHODS entry of ModelOptFp8Config ("modelopt"; 0.5.3.post1 "modelopt_fp8" only)
#  mo_override     _modelopt_override_quantization_method: --quantization modelopt -> modelopt_fp8 / modelopt_fp4
#  mo_fp8_cfg / mo_fp4_cfg   ModelOptFp8Config / ModelOptFp4Config.from_config
#  mo_fp8_flat_kv / mo_fp4_flat_kv     their KV algorithm in config.json's flat format (kv_cache_scheme, ...)
#  mo_fp8_nested_kv / mo_fp4_nested_kv  ... in hf_quant_config.json's nested "quantization" (kv_cache_quant_algo)
#  mo_fp8_algo / mo_fp4_algo  the quant_algo check that raises ValueError
#  mo_fp8_kv_attr / mo_fp4_kv_attr     the attribute the KV algorithm is stored in (ModelOptFp8Config:
#                  kv_cache_quant_method up to 0.5.3.post1, which auto does not read; ModelOptQuantConfig's
#                  kv_cache_quant_algo from 0.5.7)
#  ct_kv_attr / ct_kv_scheme   0.5.23: CompressedTensorsConfig.kv_cache_quant_algo (FP8 for a static per-tensor float8
#                  kv_cache_scheme)
#  fp8_kv_attr     0.5.23: Fp8Config reads kv_cache_quant_algo from its config
#  nsa_kv_dtype    DeepSeek DSA: the KV dtype ServerArgs sets (0.5.3: fp8_e4m3 from SM100 whatever was asked; 0.5.7 on:
#                  auto -> fp8_e4m3 from SM100, bfloat16 below); nsa_kv_assert: bf16 / fp8_e4m3 only
_MOQ = "sglang/srt/layers/quantization/modelopt_quant.py"
_QI = "sglang/srt/layers/quantization/__init__.py"
_QB = "sglang/srt/layers/quantization/base_config.py"
_CKPT_KV_LINES: dict[str, dict[str, tuple[str, int]]] = {
    "0.4.10.post2": {"q_detect": (_MC, 361), "q_file": (_MC, 389), "q_verify": (_MC, 442), "q_compat": (_MC, 423),
                     "q_unknown": (_MC, 469), "q_alias_fp8": (_QI, 77), "mo_fp8_cfg": (_MOQ, 102),
                     "mo_fp8_algo": (_MOQ, 110), "mo_fp8_kv_attr": (_MOQ, 77), "mo_fp4_cfg": (_MOQ, 483),
                     "mo_fp4_algo": (_MOQ, 485), "mo_fp4_kv_attr": (_MOQ, 462)},
    "0.5.3": {"q_detect": (_MC, 469), "q_file": (_MC, 525), "q_verify": (_MC, 580), "q_compat": (_MC, 561),
              "q_unknown": (_MC, 607), "q_alias_fp8": (_QI, 75), "mo_fp8_cfg": (_MOQ, 143),
              "mo_fp8_flat_kv": (_MOQ, 147), "mo_fp8_nested_kv": (_MOQ, 162), "mo_fp8_algo": (_MOQ, 173),
              "mo_fp8_kv_attr": (_MOQ, 107), "mo_fp4_cfg": (_MOQ, 593), "mo_fp4_flat_kv": (_MOQ, 598),
              "mo_fp4_nested_kv": (_MOQ, 618), "mo_fp4_algo": (_MOQ, 629), "mo_fp4_kv_attr": (_MOQ, 527),
              "nsa_kv_dtype": (_SA, 830)},
    "0.5.3.post1": {"q_detect": (_MC, 475), "q_file": (_MC, 517), "q_verify": (_MC, 585), "q_compat": (_MC, 566),
                    "q_unknown": (_MC, 612), "q_alias_fp8": (_QI, 75), "mo_fp8_cfg": (_MOQ, 143),
                    "mo_fp8_flat_kv": (_MOQ, 147), "mo_fp8_nested_kv": (_MOQ, 162), "mo_fp8_algo": (_MOQ, 173),
                    "mo_fp8_kv_attr": (_MOQ, 107), "mo_fp4_cfg": (_MOQ, 593), "mo_fp4_flat_kv": (_MOQ, 598),
                    "mo_fp4_nested_kv": (_MOQ, 618), "mo_fp4_algo": (_MOQ, 629), "mo_fp4_kv_attr": (_MOQ, 527),
                    "nsa_kv_dtype": (_SA, 870)},
    "0.5.7": {"q_detect": (_MC, 566), "q_file": (_MC, 633), "q_verify": (_MC, 765), "q_compat": (_MC, 745),
              "q_unknown": (_MC, 810), "q_alias_fp8": (_QI, 53), "mo_override": (_QB, 177),
              "mo_fp8_cfg": (_MOQ, 259), "mo_fp8_flat_kv": (_MOQ, 263), "mo_fp8_nested_kv": (_MOQ, 278),
              "mo_fp8_algo": (_MOQ, 289), "mo_fp8_kv_attr": (_MOQ, 175), "mo_fp4_cfg": (_MOQ, 944),
              "mo_fp4_flat_kv": (_MOQ, 949), "mo_fp4_nested_kv": (_MOQ, 988), "mo_fp4_algo": (_MOQ, 999),
              "mo_fp4_kv_attr": (_MOQ, 175), "nsa_kv_dtype": (_SA, 1065), "nsa_kv_assert": (_SA, 1072)},
    "0.5.8.post1": {"q_detect": (_MC, 584), "q_file": (_MC, 680), "q_verify": (_MC, 825), "q_compat": (_MC, 794),
                    "q_unknown": (_MC, 879), "q_alias_fp8": (_QI, 56), "mo_override": (_QB, 173),
                    "mo_fp8_cfg": (_MOQ, 259), "mo_fp8_flat_kv": (_MOQ, 263), "mo_fp8_nested_kv": (_MOQ, 278),
                    "mo_fp8_algo": (_MOQ, 289), "mo_fp8_kv_attr": (_MOQ, 175), "mo_fp4_cfg": (_MOQ, 943),
                    "mo_fp4_flat_kv": (_MOQ, 948), "mo_fp4_nested_kv": (_MOQ, 987), "mo_fp4_algo": (_MOQ, 998),
                    "mo_fp4_kv_attr": (_MOQ, 175), "nsa_kv_dtype": (_SA, 1165), "nsa_kv_assert": (_SA, 1172)},
    "0.5.9": {"q_detect": (_MC, 647), "q_file": (_MC, 754), "q_cfg_rewrite": (_MC, 653), "q_verify": (_MC, 908),
              "q_compat": (_MC, 874), "q_unknown": (_MC, 962), "q_alias_fp8": (_QI, 57), "mo_override": (_QB, 173),
              "mo_fp8_cfg": (_MOQ, 430), "mo_fp8_flat_kv": (_MOQ, 434), "mo_fp8_nested_kv": (_MOQ, 449),
              "mo_fp8_algo": (_MOQ, 460), "mo_fp8_kv_attr": (_MOQ, 277), "mo_fp4_cfg": (_MOQ, 1002),
              "mo_fp4_flat_kv": (_MOQ, 1006), "mo_fp4_nested_kv": (_MOQ, 1042), "mo_fp4_algo": (_MOQ, 1053),
              "mo_fp4_kv_attr": (_MOQ, 277), "nsa_kv_dtype": (_SA, 1142), "nsa_kv_assert": (_SA, 1149)},
    "0.5.10.post1": {"q_detect": (_MC, 693), "q_file": (_MC, 805), "q_cfg_rewrite": (_MC, 699), "q_verify": (_MC, 993),
                     "q_compat": (_MC, 958), "q_unknown": (_MC, 1047), "q_alias_fp8": (_QI, 58),
                     "mo_override": (_QB, 173), "mo_fp8_cfg": (_MOQ, 445), "mo_fp8_flat_kv": (_MOQ, 449),
                     "mo_fp8_nested_kv": (_MOQ, 464), "mo_fp8_algo": (_MOQ, 475), "mo_fp8_kv_attr": (_MOQ, 292),
                     "mo_fp4_cfg": (_MOQ, 1194), "mo_fp4_flat_kv": (_MOQ, 1198), "mo_fp4_nested_kv": (_MOQ, 1234),
                     "mo_fp4_algo": (_MOQ, 1245), "mo_fp4_kv_attr": (_MOQ, 292), "nsa_kv_assert": (_SA, 1440)},
    "0.5.23": {"q_detect": (_MC, 1727), "q_file": (_MC, 1838), "q_cfg_rewrite": (_MC, 1733), "q_verify": (_MC, 2097),
               "q_compat": (_MC, 2042), "q_unknown": (_MC, 2153), "q_alias_fp8": (_QI, 68), "mo_override": (_QB, 242),
               "mo_fp8_cfg": (_MOQ, 478), "mo_fp8_flat_kv": (_MOQ, 482), "mo_fp8_nested_kv": (_MOQ, 499),
               "mo_fp8_algo": (_MOQ, 510), "mo_fp8_kv_attr": (_MOQ, 326), "mo_fp4_cfg": (_MOQ, 1616),
               "mo_fp4_flat_kv": (_MOQ, 1620), "mo_fp4_nested_kv": (_MOQ, 1662), "mo_fp4_algo": (_MOQ, 1673),
               "mo_fp4_kv_attr": (_MOQ, 326),
               "ct_kv_attr": ("sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py", 143),
               "ct_kv_scheme": ("sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py", 1276),
               "fp8_kv_attr": ("sglang/srt/layers/quantization/fp8.py", 366)},
}
for _rel, _extra in _CKPT_KV_LINES.items():
    _LINES[_rel].update(_extra)


# The overlap scheduler under speculative decoding (EAGLE / EAGLE3 / NEXTN-MTP / STANDALONE), per release:
#  spec_overlap_off  the line of the speculative block that sets disable_overlap_schedule = True (up to 0.5.10.post1:
#                    from 0.5.7 the else branch of "spec v2", whose env SGLANG_ENABLE_SPEC_V2 defaults to False)
#  spec_v2_env       that env default (0.5.7 on)
#  spec_v2_mimo / spec_v2_step3p5  multi-layer EAGLE of MiMo-V2-Flash / Step-3.5 sets SGLANG_ENABLE_SPEC_V2 (overlap on)
#  spec_overlap_cpu  0.5.23: _disable_overlap_schedule_for_cpu, the only place the EAGLE family turns it off (device
#                    cpu); spec_overlap_on  the EAGLE-family handler calling it (overlap stays on with CUDA / ROCm)
_ENV = "sglang/srt/environ.py"
_SPEC_OVERLAP_LINES: dict[str, dict[str, tuple[str, int]]] = {
    "0.4.3.post4": {"spec_overlap_off": (_SA, 281)},
    "0.4.10.post2": {"spec_overlap_off": (_SA, 537)},
    "0.5.3": {"spec_overlap_off": (_SA, 1061)},
    "0.5.3.post1": {"spec_overlap_off": (_SA, 1101)},
    "0.5.7": {"spec_overlap_off": (_SA, 2016), "spec_v2_env": (_ENV, 362), "spec_v2_mimo": (_SA, 1222)},
    "0.5.8.post1": {"spec_overlap_off": (_SA, 2156), "spec_v2_env": (_ENV, 390), "spec_v2_mimo": (_SA, 1329)},
    "0.5.9": {"spec_overlap_off": (_SA, 2384), "spec_v2_env": (_ENV, 414), "spec_v2_mimo": (_SA, 1411),
              "spec_v2_step3p5": (_SA, 1432)},
    "0.5.10.post1": {"spec_overlap_off": (_SA, 3015), "spec_v2_env": (_ENV, 442), "spec_v2_mimo": (_SA, 1800),
                     "spec_v2_step3p5": (_SA, 1821)},
    "0.5.23": {"spec_overlap_cpu": (_SPH, 66), "spec_overlap_on": (_SPH, 1096)},
}
for _rel, _extra in _SPEC_OVERLAP_LINES.items():
    _LINES[_rel].update(_extra)


# Under DP attention, the input embedding (VocabParallelEmbedding) of each model family, per release: the line that says
# how it is split (weights.py dp_embedding_split). "enable_tp=not is_dp_attention_enabled()" (or the
# global_server_args_dict form): whole on every rank; "use_attn_tp_group=is_dp_attention_enabled()" /
# "**get_embedding_tp_kwargs()": split over the attention-TP group; a bare VocabParallelEmbedding(...): over the TP group
_EMB_FILES = {"deepseek": _DS, "qwen2": "sglang/srt/models/qwen2.py", "qwen2_moe": "sglang/srt/models/qwen2_moe.py",
              "glm4_moe": "sglang/srt/models/glm4_moe.py", "gpt_oss": "sglang/srt/models/gpt_oss.py",
              "qwen3_next": "sglang/srt/models/qwen3_next.py", "llama": "sglang/srt/models/llama.py",
              "mixtral": "sglang/srt/models/mixtral.py", "minimax_m2": "sglang/srt/models/minimax_m2.py"}
_EMB_LINES: dict[str, dict[str, int]] = {
    "0.4.3.post4": {"deepseek": 1013, "qwen2": 247, "qwen2_moe": 334, "llama": 273, "mixtral": 260},
    "0.4.10.post2": {"deepseek": 1986, "qwen2": 270, "qwen2_moe": 417, "glm4_moe": 734, "llama": 283, "mixtral": 279},
    "0.5.3": {"deepseek": 2595, "qwen2": 276, "qwen2_moe": 529, "glm4_moe": 717, "gpt_oss": 499, "qwen3_next": 820,
              "llama": 291, "mixtral": 277},
    "0.5.3.post1": {"deepseek": 2595, "qwen2": 276, "qwen2_moe": 529, "glm4_moe": 717, "gpt_oss": 499,
                    "qwen3_next": 820, "llama": 291, "mixtral": 275},
    "0.5.7": {"deepseek": 3042, "qwen2": 280, "qwen2_moe": 565, "glm4_moe": 888, "gpt_oss": 493, "qwen3_next": 798,
              "llama": 291, "mixtral": 274, "minimax_m2": 643},
    "0.5.8.post1": {"deepseek": 2523, "qwen2": 280, "qwen2_moe": 573, "glm4_moe": 898, "gpt_oss": 502,
                    "qwen3_next": 812, "llama": 330, "mixtral": 274, "minimax_m2": 830},
    "0.5.9": {"deepseek": 2534, "qwen2": 281, "qwen2_moe": 577, "glm4_moe": 900, "gpt_oss": 519, "qwen3_next": 822,
              "llama": 334, "mixtral": 274, "minimax_m2": 847},
    "0.5.10.post1": {"deepseek": 1865, "qwen2": 281, "qwen2_moe": 599, "glm4_moe": 1004, "gpt_oss": 578,
                     "qwen3_next": 783, "llama": 339, "mixtral": 274, "minimax_m2": 851},
    "0.5.23": {"deepseek": 2946, "qwen2": 374, "qwen2_moe": 1118, "glm4_moe": 883, "gpt_oss": 662, "qwen3_next": 926,
               "llama": 432, "mixtral": 290, "minimax_m2": 932},
}
for _rel, _fams in _EMB_LINES.items():
    _WEIGHT_LINES[_rel].update({f"embed_{f}": (_EMB_FILES[f], n) for f, n in _fams.items()})

# Multimodal or not (configs/model_config.py): mm_archs the multimodal_model_archs list, mm_disabled the architectures
# served text-only unless --enable-multimodal (mm_disabled_models), mm_subconfig 0.5.10's "has a text / vision / audio
# sub-config" test (0.5.23: a text sub-config only, mm_is_multimodal the test, mm_lm_only language_model_only);
# gemma3_vision the SiglipVisionModel Gemma3ForConditionalGeneration builds whatever the mode
# (models/gemma3_mm.py); piecewise_mm 0.5.10's "multimodal model: no piecewise CUDA graph"
_MM_LINES: dict[str, dict[str, int]] = {
    "0.4.10.post2": {"mm_archs": 624, "mm_disabled": 112, "gemma3_vision": 168},
    "0.5.3": {"mm_archs": 780, "mm_disabled": 123, "gemma3_vision": 168},
    "0.5.3.post1": {"mm_archs": 817, "mm_disabled": 127, "gemma3_vision": 180},
    "0.5.7": {"mm_archs": 1050, "mm_disabled": 143, "gemma3_vision": 180},
    "0.5.8.post1": {"mm_archs": 1119, "mm_disabled": 143, "gemma3_vision": 180},
    "0.5.9": {"mm_archs": 1211, "mm_disabled": 144, "gemma3_vision": 181},
    "0.5.10.post1": {"mm_archs": 1296, "mm_disabled": 156, "mm_subconfig": 183, "gemma3_vision": 181},
    "0.5.23": {"gemma3_vision": 185, "mm_subconfig": 809, "mm_is_multimodal": 820, "mm_lm_only": 674},
}
for _rel, _keys in _MM_LINES.items():
    _WEIGHT_LINES[_rel].update({k: ("sglang/srt/models/gemma3_mm.py" if k == "gemma3_vision" else _MC, n)
                                for k, n in _keys.items()})
_WEIGHT_LINES["0.5.10.post1"]["piecewise_mm"] = (_SA, 1110)
# 0.5.23: the text sub-config get_hf_text_config returns (has_multimodal_subconfig compares it with the config)
_WEIGHT_LINES["0.5.23"]["hf_text_config"] = ("sglang/srt/utils/hf_transformers/common.py", 582)
# gemma3_rope: the rope_scaling Gemma 3's global-attention layers pass to get_rope (models/gemma3_causal.py): the
# config's (linear x8 for the 4B-27B checkpoints) up to 0.5.9, {"rope_type": "default"} from 0.5.10.post1
for _rel, _n in {"0.4.10.post2": 182, "0.5.3": 181, "0.5.3.post1": 181, "0.5.7": 181, "0.5.8.post1": 181, "0.5.9": 180,
                 "0.5.10.post1": 202, "0.5.23": 216}.items():
    _WEIGHT_LINES[_rel]["gemma3_rope"] = ("sglang/srt/models/gemma3_causal.py", _n)

# The NEXTN (MTP) draft of DeepSeek-V3 / R1 (models/deepseek_nextn.py): nextn_eh_proj the nn.Linear eh_proj (model dtype,
# whole on every rank), nextn_decoder the DeepseekV2DecoderLayer built with the checkpoint's quant_config,
# nextn_modelopt_off the ModelOpt NVFP4 override (quant_config = None, from 0.4.10.post2); glm_nextn_* the same lines of
# models/glm4_moe_nextn.py; spec_share_embed set_embed_and_head: the draft's own embedding and lm_head are freed and the
# target's shared (speculative/eagle_worker.py; eagle_worker_v2.py in 0.5.23)
_DSN = "sglang/srt/models/deepseek_nextn.py"
_GLN = "sglang/srt/models/glm4_moe_nextn.py"
_EW = "sglang/srt/speculative/eagle_worker.py"
_NEXTN_LINES: dict[str, dict[str, tuple[str, int]]] = {
    "0.4.3.post4": {"nextn_eh_proj": (_DSN, 66), "nextn_decoder": (_DSN, 71), "spec_share_embed": (_EW, 95)},
    "0.4.10.post2": {"nextn_eh_proj": (_DSN, 66), "nextn_decoder": (_DSN, 71), "nextn_modelopt_off": (_DSN, 48),
                     "glm_nextn_eh_proj": (_GLN, 66), "glm_nextn_modelopt_off": (_GLN, 48),
                     "spec_share_embed": (_EW, 157)},
    "0.5.3": {"nextn_eh_proj": (_DSN, 70), "nextn_decoder": (_DSN, 76), "nextn_modelopt_off": (_DSN, 52),
              "glm_nextn_eh_proj": (_GLN, 67), "glm_nextn_modelopt_off": (_GLN, 49), "spec_share_embed": (_EW, 169)},
    "0.5.3.post1": {"nextn_eh_proj": (_DSN, 70), "nextn_decoder": (_DSN, 76), "nextn_modelopt_off": (_DSN, 52),
                    "glm_nextn_eh_proj": (_GLN, 67), "glm_nextn_modelopt_off": (_GLN, 49),
                    "spec_share_embed": (_EW, 169)},
    "0.5.7": {"nextn_eh_proj": (_DSN, 99), "nextn_decoder": (_DSN, 117), "nextn_modelopt_off": (_DSN, 81),
              "glm_nextn_eh_proj": (_GLN, 68), "glm_nextn_modelopt_off": (_GLN, 50), "spec_share_embed": (_EW, 180)},
    "0.5.8.post1": {"nextn_eh_proj": (_DSN, 96), "nextn_decoder": (_DSN, 114), "nextn_modelopt_off": (_DSN, 78),
                    "glm_nextn_eh_proj": (_GLN, 68), "glm_nextn_modelopt_off": (_GLN, 50),
                    "spec_share_embed": (_EW, 179)},
    "0.5.9": {"nextn_eh_proj": (_DSN, 97), "nextn_decoder": (_DSN, 115), "nextn_modelopt_off": (_DSN, 79),
              "glm_nextn_eh_proj": (_GLN, 68), "glm_nextn_modelopt_off": (_GLN, 50), "spec_share_embed": (_EW, 183)},
    "0.5.10.post1": {"nextn_eh_proj": (_DSN, 102), "nextn_decoder": (_DSN, 128), "nextn_modelopt_off": (_DSN, 84),
                     "glm_nextn_eh_proj": (_GLN, 70), "glm_nextn_modelopt_off": (_GLN, 52),
                     "spec_share_embed": (_EW, 184)},
    "0.5.23": {"nextn_eh_proj": (_DSN, 102), "nextn_decoder": (_DSN, 130), "nextn_modelopt_off": (_DSN, 75),
               "glm_nextn_eh_proj": (_GLN, 70), "glm_nextn_modelopt_off": (_GLN, 52),
               "spec_share_embed": ("sglang/srt/speculative/eagle_worker_v2.py", 378)},
}
# nextn_w_kc: post_load_weights(is_nextn=True) builds the NextN layer's absorbed w_kc / w_vc from kv_b_proj, as for the
# target's layers
_DWL = "sglang/srt/models/deepseek_common/deepseek_weight_loader.py"
for _rel, _where in {"0.4.3.post4": (_DSN, 297), "0.4.10.post2": (_DS, 2151), "0.5.3": (_DS, 2892),
                     "0.5.3.post1": (_DS, 2892), "0.5.7": (_DS, 3442), "0.5.8.post1": (_DWL, 384), "0.5.9": (_DWL, 417),
                     "0.5.10.post1": (_DWL, 416), "0.5.23": (_DWL, 603)}.items():
    _NEXTN_LINES[_rel]["nextn_w_kc"] = _where
for _rel, _n in {"0.4.10.post2": 71, "0.5.3": 72, "0.5.3.post1": 72, "0.5.7": 73, "0.5.8.post1": 73, "0.5.9": 73,
                 "0.5.10.post1": 75, "0.5.23": 76}.items():
    _NEXTN_LINES[_rel]["glm_nextn_decoder"] = (_GLN, _n)
# The DSA lightning indexer every DSA attention layer builds (DeepSeek-V3.2, GLM-5), all of it ReplicatedLinear or a
# norm, whole on every rank: idx_wq_b / idx_wk the q_lora -> heads x head_dim and hidden -> head_dim linears with the
# layer's quant_config, idx_weights_proj hidden -> heads (model dtype up to 0.5.3.post1, float32 in 0.5.7, bfloat16 on
# CUDA and float32 elsewhere from 0.5.8.post1, bfloat16 in 0.5.23), idx_k_norm the key LayerNorm (weight and bias,
# float32); 0.5.23: idx_fusion wk and weights_proj fused into one bfloat16 wk_weights_proj (idx_fused) on CUDA when the
# indexer's rope is interleaved (idx_neox: is_neox_style = not config.indexer_rope_interleave), idx_k_norm_rms an
# RMSNorm key norm for index_k_norm_type "rms", idx_layer which layers build one (the NextN layer always)
_NSA_IDX = "sglang/srt/layers/attention/nsa/nsa_indexer.py"
_DSA_IDX = "sglang/srt/layers/attention/dsa/dsa_indexer.py"
_DSA_INDEXER_LINES: dict[str, dict[str, tuple[str, int]]] = {
    "0.5.3": {"idx_wq_b": (_NSA_IDX, 133), "idx_wk": (_NSA_IDX, 140), "idx_weights_proj": (_NSA_IDX, 149),
              "idx_k_norm": (_NSA_IDX, 92)},
    "0.5.3.post1": {"idx_wq_b": (_NSA_IDX, 133), "idx_wk": (_NSA_IDX, 140), "idx_weights_proj": (_NSA_IDX, 149),
                    "idx_k_norm": (_NSA_IDX, 92)},
    "0.5.7": {"idx_wq_b": (_NSA_IDX, 135), "idx_wk": (_NSA_IDX, 143), "idx_weights_proj": (_NSA_IDX, 155),
              "idx_k_norm": (_NSA_IDX, 158)},
    "0.5.8.post1": {"idx_wq_b": (_NSA_IDX, 170), "idx_wk": (_NSA_IDX, 178), "idx_weights_proj": (_NSA_IDX, 189),
                    "idx_k_norm": (_NSA_IDX, 192)},
    "0.5.9": {"idx_wq_b": (_NSA_IDX, 181), "idx_wk": (_NSA_IDX, 189), "idx_weights_proj": (_NSA_IDX, 200),
              "idx_k_norm": (_NSA_IDX, 203)},
    "0.5.10.post1": {"idx_wq_b": (_NSA_IDX, 193), "idx_wk": (_NSA_IDX, 201), "idx_weights_proj": (_NSA_IDX, 212),
                     "idx_k_norm": (_NSA_IDX, 215)},
    "0.5.23": {"idx_wq_b": (_DSA_IDX, 344), "idx_wk": (_DSA_IDX, 361), "idx_weights_proj": (_DSA_IDX, 372),
               "idx_k_norm": (_DSA_IDX, 381), "idx_k_norm_rms": (_DSA_IDX, 376), "idx_fusion": (_DSA_IDX, 310),
               "idx_fused": (_DSA_IDX, 353), "idx_neox": (_DS, 2118), "idx_layer": (_DS, 2117)},
}
# The indexer's rotary embedding against the MLA attention's (weights.dsa_indexer_rope_bytes): idx_rope_neox the
# indexer's is_neox_style, mla_rope_neox the attention's, rope_key get_rope's cache key (one module per key)
_RF = "sglang/srt/layers/rotary_embedding/factory.py"
for _rel, (_idx, _mla, _key) in {
        "0.5.3": ((_NSA_IDX, 161), (_DS, 1124), (_ROPE, 1704)),
        "0.5.3.post1": ((_NSA_IDX, 161), (_DS, 1124), (_ROPE, 1704)),
        "0.5.7": ((_NSA_IDX, 165), (_DS, 1411), (_ROPE, 2534)),
        "0.5.8.post1": ((_NSA_IDX, 199), (_DS, 1210), (_ROPE, 2559)),
        "0.5.9": ((_DS, 1158), (_DS, 1201), (_ROPE, 3376)),
        "0.5.10.post1": ((_DS, 1181), (_DS, 1244), (_RF, 95)),
        "0.5.23": ((_DS, 2118), (_DS, 2166), (_RF, 158))}.items():
    _DSA_INDEXER_LINES[_rel].update({"idx_rope_neox": _idx, "mla_rope_neox": _mla, "rope_key": _key})
# The NEXTN draft of a DSA model: nextn_dsa_draft the draft class's DSA test (is_deepseek_nsa / is_deepseek_dsa: from
# 0.5.7 it lists DeepseekV3ForCausalLMNextN, so the draft layer builds an indexer and its pool keeps index-K rows; up to
# 0.5.3.post1 it lists only the targets, so the draft is plain MLA), nextn_dsa_rename the draft's architecture rewrite
# to DeepseekV3ForCausalLMNextN (configs/model_config.py _config_draft_model; GLM-5 too from 0.5.9, its own
# GlmMoeDsaForCausalLMNextN(DeepseekV3ForCausalLMNextN) in 0.5.23: glm_dsa_nextn_rename, glm_dsa_nextn_cls),
# v32_config_load the DeepSeek-V3.2 config loaded as DeepseekV3ForCausalLM (utils/hf_transformers_utils.py
# _load_deepseek_v32_model, up to 0.5.10.post1)
_HFU = "sglang/srt/utils/hf_transformers_utils.py"
_NEXTN_DSA_LINES: dict[str, dict[str, tuple[str, int]]] = {
    "0.5.3": {"nextn_dsa_draft": (_MC, 56), "nextn_dsa_rename": (_MC, 224), "v32_config_load": (_HFU, 143)},
    "0.5.3.post1": {"nextn_dsa_draft": (_MC, 56), "nextn_dsa_rename": (_MC, 230), "v32_config_load": (_HFU, 145)},
    "0.5.7": {"nextn_dsa_draft": (_MC, 60), "nextn_dsa_rename": (_MC, 270), "v32_config_load": (_HFU, 179)},
    "0.5.8.post1": {"nextn_dsa_draft": (_MC, 61), "nextn_dsa_rename": (_MC, 273), "v32_config_load": (_HFU, 182)},
    "0.5.9": {"nextn_dsa_draft": (_MC, 61), "nextn_dsa_rename": (_MC, 279), "v32_config_load": (_HFU, 194),
              "glm_dsa_nextn_rename": (_MC, 277)},
    "0.5.10.post1": {"nextn_dsa_draft": (_MC, 72), "nextn_dsa_rename": (_MC, 299), "v32_config_load": (_HFU, 274),
                     "glm_dsa_nextn_rename": (_MC, 297)},
    "0.5.23": {"nextn_dsa_draft": (_MC, 197), "nextn_dsa_rename": (_MC, 1036), "glm_dsa_nextn_rename": (_MC, 1039),
               "glm_dsa_nextn_cls": ("sglang/srt/models/glm4_moe.py", 1288)},
}
# GLM-4.7-Flash (Glm4MoeLiteForCausalLM, MLA): glm_lite_nextn_rename its draft's architecture rewrite. 0.5.8.post1 to
# 0.5.10.post1 rewrite it to Glm4MoeForCausalLMNextN, GLM-4.5's GQA draft: glm_gqa_attn its Glm4MoeDecoderLayer's
# Glm4MoeAttention, glm_gqa_head_dim head_dim = getattr(config, "head_dim", ...), glm_gqa_qkv the QKVParallelLinear,
# glm_gqa_rope its get_rope (default is_neox_style, so not the target MLA's cache), glm_gate_bias the router's float32
# e_score_correction_bias, glm_experts the FusedMoE with the shared expert fused in; the draft's ModelConfig is not MLA
# (mc_mla_list does not name Glm4MoeForCausalLMNextN; mc_head_dim the head_dim it reads), so its pool is an
# MHATokenToKVPool (draft_mha_pool). 0.5.23 rewrites it to its own MLA class (models/glm4_moe_lite_nextn.py):
# glm_lite_nextn_eh_proj / _decoder / _modelopt_off as for DeepSeek's, glm_lite_nextn_w_kc its post_load_weights
_G4 = "sglang/srt/models/glm4_moe.py"
_GLITE_NEXTN = "sglang/srt/models/glm4_moe_lite_nextn.py"
_GLM_LITE_NEXTN_LINES: dict[str, dict[str, tuple[str, int]]] = {
    "0.5.8.post1": {"glm_lite_nextn_rename": (_MC, 279), "glm_gqa_attn": (_G4, 694), "glm_gqa_head_dim": (_G4, 685),
                    "glm_gqa_qkv": (_G4, 213), "glm_gqa_rope": (_G4, 236), "glm_gate_bias": (_G4, 326),
                    "glm_experts": (_G4, 374), "mc_mla_list": (_MC, 387), "mc_head_dim": (_MC, 370),
                    "draft_mha_pool": (_MX, 567), "mla_rope_neox": (_DS, 1210)},
    "0.5.9": {"glm_lite_nextn_rename": (_MC, 285), "glm_gqa_attn": (_G4, 696), "glm_gqa_head_dim": (_G4, 687),
              "glm_gqa_qkv": (_G4, 214), "glm_gqa_rope": (_G4, 237), "glm_gate_bias": (_G4, 327),
              "glm_experts": (_G4, 375), "mc_mla_list": (_MC, 422), "mc_head_dim": (_MC, 395),
              "draft_mha_pool": (_MX, 665), "mla_rope_neox": (_DS, 1201)},
    "0.5.10.post1": {"glm_lite_nextn_rename": (_MC, 305), "glm_gqa_attn": (_G4, 800), "glm_gqa_head_dim": (_G4, 791),
                     "glm_gqa_qkv": (_G4, 229), "glm_gqa_rope": (_G4, 252), "glm_gate_bias": (_G4, 364),
                     "glm_experts": (_G4, 417), "mc_mla_list": (_MC, 442), "mc_head_dim": (_MC, 415),
                     "draft_mha_pool": (_MX, 701), "mla_rope_neox": (_DS, 1244)},
    "0.5.23": {"glm_lite_nextn_rename": (_MC, 1069), "glm_lite_nextn_eh_proj": (_GLITE_NEXTN, 74),
               "glm_lite_nextn_decoder": (_GLITE_NEXTN, 77), "glm_lite_nextn_modelopt_off": (_GLITE_NEXTN, 60),
               "glm_lite_nextn_w_kc": ("sglang/srt/models/glm4_moe_lite.py", 1081)},
}
for _rel, _rules in _GLM_LITE_NEXTN_LINES.items():
    _NEXTN_LINES[_rel].update(_rules)
for _rel, _rules in _DSA_INDEXER_LINES.items():
    _NEXTN_LINES[_rel].update(_rules)
for _rel, _rules in _NEXTN_DSA_LINES.items():
    _NEXTN_LINES[_rel].update(_rules)

for _rel, _rules in _NEXTN_LINES.items():
    _WEIGHT_LINES[_rel].update(_rules)


# dp_off: _handle_data_parallelism, run after the model-specific adjustments: dp_size 1 turns enable_dp_attention off
# again (the DeepSeek NSA block's forced DP attention of 0.5.3 to 0.5.7 included)
for _rel, _n in {"0.5.3": 950, "0.5.3.post1": 990, "0.5.7": 1802}.items():
    _WEIGHT_LINES[_rel]["dp_off"] = (_SA, _n)

# Hybrid sliding-window pools of Llama 4, MiMo-V2 and Gemma 4 (and gpt-oss's geometry): swa_layers_* the branch of
# get_hybrid_layer_ids that splits the layers, swa_rows the full / SWA per-token rows (full_per_token, swa_per_token),
# swa_window_* where the model runner's sliding_window_size comes from (gpt-oss / Gemma 4: the model's
# get_attention_sliding_window_size; MiMo-V2: the config's sliding_window_size; Llama 4: attention_chunk_size),
# gemma4_shapes the flattening of Gemma 4's per-layer heads into full / swa_*, llama4_text_only the Llama 4 vision model
# and projector not built unless --enable-multimodal, llama4_backend the Llama 4 default backend, llama4_backends the
# assert on the ones it accepts, gemma4_backend / gemma4_backends the same for Gemma 4, mimo_backend MiMo-V2's fa4 on
# SM100, swa_ratio_default / swa_ratio_check --swa-full-tokens-ratio's default and its range check
_LU = "sglang/srt/model_executor/model_runner_components/load_model_utils.py"
_SWA_LINES: dict[str, dict[str, tuple[str, int]]] = {
    "0.5.10.post1": {"swa_layers_llama4": (_MC, 1456), "swa_layers_gptoss": (_MC, 1463), "swa_layers_mimo": (_MC, 1471),
                     "swa_rows": (_MX, 338), "swa_window_gptoss": ("sglang/srt/models/gpt_oss.py", 121),
                     "swa_window_config": (_MR, 1231), "swa_window_chunk": (_MR, 1233),
                     "llama4_text_only": ("sglang/srt/models/mllama4.py", 447), "llama4_backend": (_SA, 1837),
                     "llama4_backends": (_SA, 1851), "swa_ratio_default": (_SA, 360),
                     "swa_ratio_check": (_SA, 3418)},
    "0.5.23": {"swa_layers_llama4": (_MC, 2705), "swa_layers_gptoss": (_MC, 2712), "swa_layers_mimo": (_MC, 2723),
               "swa_layers_gemma4": (_MC, 2754), "swa_rows": (_PC, 705),
               "swa_window_gptoss": ("sglang/srt/models/gpt_oss.py", 131), "swa_window_config": (_LU, 149),
               "swa_window_chunk": (_LU, 152), "swa_window_gemma4": ("sglang/srt/models/gemma4_mm.py", 314),
               "gemma4_shapes": ("sglang/srt/utils/hf_transformers/config.py", 115),
               "llama4_text_only": ("sglang/srt/models/mllama4.py", 468),
               "llama4_backend": (f"{_AG}/model_overrides/llama4.py", 23),
               "llama4_backends": (f"{_AG}/model_hook.py", 622),
               "gemma4_backend": (f"{_AG}/model_overrides/gemma4.py", 30),
               "gemma4_backends": (f"{_AG}/model_hook.py", 646),
               "mimo_backend": (f"{_AG}/model_overrides/mimo_v2.py", 27),
               "swa_ratio_check": (f"{_AG}/kv_cache_hook.py", 427)},
}
for _rel, _rules in _SWA_LINES.items():
    _WEIGHT_LINES[_rel].update(_rules)


for _rel, _rules in _WEIGHT_LINES.items():
    _LINES[_rel].update(_rules)


def check_release(release: str) -> str:
    """Return ``release`` if covered.

    Raises:
        EngineInputError(field="release"): the release is not one this package has read.
    """
    if release not in COVERED:
        raise EngineInputError(
            "release",
            f"SGLang {release!r} is not modelled; covered releases: {', '.join(COVERED)}. Its memory defaults "
            "may differ (they changed in 0.4.10, 0.5.x, 0.5.3.post1, 0.5.10 and 0.5.23), so no other release stands in.")
    return release


def at_least(release: str, other: str) -> bool:
    """``release`` is ``other`` or newer (both covered)."""
    return COVERED.index(release) >= COVERED.index(other)


def cite(release: str, key: str) -> str:
    """``sglang==X sglang/srt/<file>:<line>`` for a rule of a covered release.

    Raises:
        KeyError: the rule does not exist in that release (a programming error, not user input).
    """
    path, line = _LINES[release][key]
    return f"sglang=={release} {path}:{line}"


def has_rule(release: str, key: str) -> bool:
    return key in _LINES[release]


def spec_overlap(release: str, architecture: str | None) -> tuple[bool, str]:
    """Whether the release runs EAGLE-family speculative decoding (EAGLE, EAGLE3, NEXTN / MTP, STANDALONE) under its
    overlap scheduler on a GPU (the host schedules the next step while the GPU runs this one), and the source lines.

    Up to 0.5.10.post1 the speculative block of ``server_args.py`` sets ``disable_overlap_schedule = True`` unless
    "spec v2" is on (from 0.5.7; its env ``SGLANG_ENABLE_SPEC_V2`` defaults to False), which multi-layer EAGLE of
    MiMo-V2-Flash (0.5.7 on) and Step-3.5 (0.5.9 on) turns on. In 0.5.23 the EAGLE family has only the spec-v2 worker
    and turns the overlap off on the CPU device only (``arg_groups/speculative_hook.py``)."""
    check_release(release)
    if has_rule(release, "spec_overlap_on"):
        return True, (f"{cite(release, 'spec_overlap_on')} (its EAGLE-family handler turns it off only on the CPU device: "
                      f"{cite(release, 'spec_overlap_cpu')})")
    arch = architecture or ""
    for key, name in (("spec_v2_mimo", "MiMoV2FlashForCausalLM"), ("spec_v2_step3p5", "Step3p5ForCausalLM")):
        if name in arch and has_rule(release, key):
            return True, f"{cite(release, key)} (multi-layer EAGLE of {name} turns spec v2 on)"
    why = cite(release, "spec_overlap_off")
    if has_rule(release, "spec_v2_env"):
        why += f" (spec v2 off by default: {cite(release, 'spec_v2_env')})"
    return False, why


@cache
def architectures(release: str) -> frozenset[str]:
    """Model classes (``architectures[0]`` values) the release registers: the ``EntryClass`` names of its
    ``sglang/srt/models/*.py``, extracted by ``data/extract_architectures.py`` into ``data/architectures.json``."""
    data = json.loads((Path(__file__).resolve().parent / "data" / "architectures.json").read_text())
    return frozenset(data["releases"][check_release(release)])


@cache
@cache
def multimodal_lists(release: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """``(multimodal_model_archs, mm_disabled_models)`` of the release's ``configs/model_config.py`` (the
    ``mm_archs`` / ``mm_disabled`` lines), extracted by ``data/extract_architectures.py`` into
    ``data/architectures.json``; ``None`` for a release without them (0.4.3.post4)."""
    data = json.loads((Path(__file__).resolve().parent / "data" / "architectures.json").read_text())
    mm = data.get("multimodal", {}).get(check_release(release))
    if not mm:
        return None
    return frozenset(mm["archs"]), frozenset(mm["text_only"])
