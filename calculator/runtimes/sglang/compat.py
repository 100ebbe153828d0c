"""SGLang attention backends: which one SGLang picks by default, and whether a chosen one can run, by GPU
architecture (compute capability / ROCm), model features (MLA, DeepSeek NSA, sliding window, hybrid
linear attention), KV-cache dtype and release.

Small explicit tables, every rule cited ``sglang==X path:line`` (read from the release's wheel). A "no"
comes with the reason SGLang gives (its error or warning text) and where; a backend whose hardware limit
SGLang does not check itself (the kernel library does) is answered ``depends`` with the reason.
Covered releases: :data:`.releases.COVERED`; others are refused by name.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import GPU

from .releases import at_least, check_release

_SA = "sglang/srt/server_args.py"
_MR = "sglang/srt/model_executor/model_runner.py"
_REG = "sglang/srt/layers/attention/attention_registry.py"
# SGLang itself does not check the GPU for flashmla (attention_registry create_flashmla_backend); its kernel library
# sgl-kernel builds FlashMLA for -gencode compute_90a / compute_100a only ("The FlashMLA kernels only work on hopper")
_FLASHMLA_ARCHS = (9, 10)
_FLASHMLA_BUILD = "sgl-project/sglang sgl-kernel/cmake/flashmla.cmake (FLASHMLA_CUDA_FLAGS: sm_90a, sm_100a)"

#: ``--attention-backend`` choices per release (the argparse ``choices`` / ATTENTION_BACKEND_CHOICES).
CHOICES: dict[str, tuple[tuple[str, ...], str]] = {
    "0.4.3.post4": (("flashinfer", "triton", "torch_native"), f"{_SA}:716"),
    "0.4.10.post2": (("aiter", "cutlass_mla", "fa3", "flashinfer", "flashmla", "intel_amx", "torch_native", "ascend",
                      "triton", "trtllm_mla"), f"{_SA}:1259"),
}
_V5 = ("triton", "torch_native", "flex_attention", "nsa", "cutlass_mla", "fa3", "fa4", "flashinfer", "flashmla",
       "trtllm_mla", "trtllm_mha", "dual_chunk_flash_attn", "aiter", "wave", "intel_amx", "ascend")
CHOICES.update({
    "0.5.3": (_V5, f"{_SA}:89"), "0.5.3.post1": (_V5, f"{_SA}:89"),
    "0.5.7": (_V5 + ("intel_xpu",), f"{_SA}:117"), "0.5.8.post1": (_V5 + ("intel_xpu",), f"{_SA}:119"),
    "0.5.9": (_V5 + ("intel_xpu",), f"{_SA}:122"), "0.5.10.post1": (_V5 + ("intel_xpu",), f"{_SA}:127"),
    # 0.5.23: cutlass_mla and dual_chunk_flash_attn are gone; dsa (nsa its old name), qsa, dsv4, cutedsl_mla, hpc_ops, ...
    "0.5.23": (("triton", "torch_native", "flex_attention", "dsa", "nsa", "qsa", "dsv4", "compressed", "fa3", "fa4",
                "flashinfer", "llada2_cfg_flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "tokenspeed_mla",
                "trtllm_mha", "hpc_ops", "minicpm_flashattn", "minicpm_flashinfer", "aiter", "wave", "intel_amx",
                "ascend", "intel_xpu"), "sglang/srt/arg_groups/choices.py:69"),
})

# Line numbers of the checks, per release (None: the check does not exist in that release).
_L: dict[str, dict[str, int | None]] = {
    "0.4.10.post2": {"default": 381, "fa3_reg": None, "trtllm_mla_sm": 431, "flashmla_page": 411,
                     "cutlass_page": 420, "trtllm_mha": None, "fa3_e5m2": 465, "trtllm_mla_kv": None,
                     "fa3_default_list": 2313},
    "0.5.3": {"default": 506, "fa3_reg": 122, "trtllm_mla_sm": 900, "trtllm_mla_kv": 911, "trtllm_mha": 921,
              "flashmla_page": 877, "cutlass_page": 886, "fa3_e5m2": 570, "mla_only_reg": 42, "mha_only_reg": 150,
              "nsa": 812, "gptoss": 734, "fa3_default_list": 2456},
    "0.5.3.post1": {"default": 509, "fa3_reg": 129, "trtllm_mla_sm": 940, "trtllm_mla_kv": 951, "trtllm_mha": 961,
                    "flashmla_page": 917, "cutlass_page": 926, "fa3_e5m2": 573, "mla_only_reg": 49,
                    "mha_only_reg": 154, "nsa": 855, "gptoss": 769, "fa3_default_list": 2474},
    "0.5.7": {"deepseek_sm100": 1110, "gdn_sm100": 1396, "default": 1513, "fa3_reg": 133, "trtllm_mla_sm": 1610, "trtllm_mla_kv": 1621, "trtllm_mha": 1631,
              "flashmla_page": 1587, "cutlass_page": 1596, "fa3_e5m2": 1642, "fa4": 1649, "mla_only_reg": 51,
              "mha_only_reg": 158, "nsa": 1031, "gptoss": 1163, "fa3_default_list": 2694},
    "0.5.8.post1": {"deepseek_sm100": 1209, "gdn_sm100": 1509, "default": 1646, "fa3_reg": 133, "trtllm_mla_sm": 1742, "trtllm_mla_kv": 1753,
                    "trtllm_mha": 1763, "flashmla_page": 1719, "cutlass_page": 1728, "fa3_e5m2": 1774, "fa4": 1781,
                    "mla_only_reg": 51, "mha_only_reg": 158, "nsa": 1112, "gptoss": 1257, "fa3_default_list": 2881},
    "0.5.9": {"deepseek_sm100": 1285, "gdn_sm100": 1604, "default": 1784, "fa3_reg": 133, "trtllm_mla_sm": 1880, "trtllm_mla_kv": 1891, "trtllm_mha": 1901,
              "flashmla_page": 1857, "cutlass_page": 1866, "fa3_e5m2": 1912, "fa4": 1919, "mla_only_reg": 51,
              "mha_only_reg": 158, "nsa": 1212, "gptoss": 1333, "fa3_default_list": 2996},
    "0.5.10.post1": {"deepseek_sm100": 1610, "gdn_sm100": 1982, "default": 2219, "fa3_reg": 133, "trtllm_mla_sm": 2348, "trtllm_mla_kv": 2359,
                     "trtllm_mha": 2375, "trtllm_mha_decode": 2388, "flashmla_page": 2325, "cutlass_page": 2334,
                     "fa3_e5m2": 2399, "fa4": 2410, "mla_only_reg": 51, "mha_only_reg": 158, "nsa": 1537,
                     "gptoss": 1697, "fa3_default_list": 2676},
    # 0.5.23: the checks left server_args.py for the arg_groups hooks, the override registry and the model overrides;
    # each entry names its file
    "0.5.23": {"default": ("sglang/srt/arg_groups/model_override_base.py", 277), "fa3_reg": (_REG, 244),
               "mla_only_reg": (_REG, 97), "mha_only_reg": (_REG, 280),
               "trtllm_mla_sm": ("sglang/srt/arg_groups/overrides.py", 1212),
               "trtllm_mla_kv": ("sglang/srt/arg_groups/overrides.py", 1216),
               "trtllm_mla_page": ("sglang/srt/arg_groups/overrides.py", 1161),
               "trtllm_mha": ("sglang/srt/arg_groups/attention_hook.py", 204),
               "trtllm_mha_decode": ("sglang/srt/arg_groups/attention_hook.py", 226),
               "trtllm_mha_sm120_fp8": ("sglang/srt/arg_groups/attention_hook.py", 209),
               "trtllm_mha_page": ("sglang/srt/arg_groups/overrides.py", 1185),
               "flashmla_page": ("sglang/srt/arg_groups/overrides.py", 1152), "cutlass_page": None,
               "fa3_e5m2": ("sglang/srt/arg_groups/overrides.py", 1266),
               "fa4": ("sglang/srt/arg_groups/overrides.py", 1294),
               "nsa": ("sglang/srt/arg_groups/model_overrides/deepseek_v2.py", 103),
               "gptoss": ("sglang/srt/arg_groups/model_overrides/gpt_oss.py", 29),
               "deepseek_sm100": ("sglang/srt/arg_groups/model_overrides/deepseek_v2.py", 185),
               "gdn_sm100": ("sglang/srt/arg_groups/model_overrides/qwen3_5.py", 28),
               "fa3_default_list": None},
}

# sglang==0.5.23 configs/model_config.py:191 is_deepseek_dsa (with index_topk set): the dsa backend's models
_DSA_ARCHS_0523 = ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "DeepseekV3ForCausalLMNextN",
                   "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration", "GlmMoeDsaForCausalLM",
                   "GlmMoeDsaForCausalLMNextN", "Glm5NextForConditionalGenerationNextN", "Glm5NextForConditionalGeneration",
                   "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN", "Dots3NoteForCausalLM",
                   "Dots3NoteForCausalLMNextN", "HYV4ForCausalLM", "HYV4ForCausalLMNextN")
# sglang==0.5.23 arg_groups/model_overrides/deepseek_v2.py:37-50: the family whose non-DSA members get trtllm_mla on SM100
_DEEPSEEK_FAMILY_0523 = ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM",
                         "PixtralForConditionalGeneration", "Glm5NextForConditionalGeneration", "HYV4ForCausalLM",
                         "HYV4ForCausalLMNextN", "LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN",
                         "Dots3NoteForCausalLM")
# sglang==0.5.23 arg_groups/model_overrides/qwen3_5.py:17-23 (the _qwen3_5_hybrid_overrides list, less the InternS2 ones)
# and the text-only Qwen3.5 classes the generic rule gives trtllm_mha on SM100
_GDN_SM100_0523 = ("Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
                   "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM")
# sglang==0.5.23 configs/model_config.py:88 SWA_SINK_ARCHS: models with attention sinks (flashinfer cannot run them)
_SINK_ARCHS_0523 = ("GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM", "IQuestQ1ForCausalLM",
                    "IQuestQ1MTP")

# Llama 4 and Gemma 4: the backends their model-specific blocks accept (an assert at start-up otherwise), and the line;
# Llama 4's own default (trtllm_mha on SM100, fa3 on SM90, aiter on ROCm, else triton) from 0.5.7
_LLAMA4_ACCEPTS: dict[str, tuple[tuple[str, ...], str]] = {
    "0.4.10.post2": (("fa3",), f"{_SA}:1937"),
    "0.5.3": (("fa3", "aiter", "triton"), f"{_SA}:787"),
    "0.5.3.post1": (("fa3", "aiter", "triton"), f"{_SA}:830"),
    "0.5.7": (("fa3", "aiter", "triton", "trtllm_mha", "intel_xpu"), f"{_SA}:1253"),
    "0.5.8.post1": (("fa3", "aiter", "triton", "trtllm_mha", "intel_xpu"), f"{_SA}:1360"),
    "0.5.9": (("fa3", "aiter", "triton", "trtllm_mha", "intel_xpu"), f"{_SA}:1462"),
    "0.5.10.post1": (("fa3", "aiter", "triton", "ascend", "trtllm_mha", "intel_xpu"), f"{_SA}:1851"),
    "0.5.23": (("fa3", "aiter", "triton", "ascend", "trtllm_mha", "intel_xpu"),
               "sglang/srt/arg_groups/model_hook.py:622"),
}
_LLAMA4_DEFAULT = {"0.5.7": f"{_SA}:1239", "0.5.8.post1": f"{_SA}:1346", "0.5.9": f"{_SA}:1448",
                   "0.5.10.post1": f"{_SA}:1837", "0.5.23": "sglang/srt/arg_groups/model_overrides/llama4.py:23"}
_GEMMA4_ARCHS = ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM", "Gemma4UnifiedForConditionalGeneration")
_GEMMA4_ACCEPTS = (("trtllm_mha", "triton", "fa4", "ascend", "intel_xpu", "intel_amx", "aiter"),
                   "sglang/srt/arg_groups/model_hook.py:646")


def _llama4_default(release: str, f: dict[str, Any], hip: bool, major: int | None) -> BackendChoice | None:
    """Llama 4's own pick when no backend is given (server_args.py's Llama4 block from 0.5.7; 0.5.23
    arg_groups/model_overrides/llama4.py): trtllm_mha on SM100, fa3 on SM90, aiter on ROCm, else triton."""
    if not f["arch"].startswith("Llama4") or release not in _LLAMA4_DEFAULT:
        return None
    b = "trtllm_mha" if major == 10 else "fa3" if major == 9 else "aiter" if hip else "triton"
    return BackendChoice(backend=b, reason="Llama 4: trtllm_mha on SM100, fa3 on SM90, aiter on ROCm, else triton",
                         source=f"sglang=={release} {_LLAMA4_DEFAULT[release]}")


_FA3_DEFAULT = {
    "0.4.10.post2": {"Qwen2ForCausalLM", "Llama4ForConditionalGeneration", "LlamaForCausalLM", "Gemma2ForCausalLM",
                     "Gemma3ForConditionalGeneration", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
                     "Glm4MoeForCausalLM", "Step3VLForConditionalGeneration"},
}
_FA3_DEFAULT["0.5.3"] = _FA3_DEFAULT["0.4.10.post2"] | {"Glm4vMoeForConditionalGeneration"}
_FA3_DEFAULT["0.5.3.post1"] = _FA3_DEFAULT["0.5.3"]
_FA3_DEFAULT["0.5.7"] = _FA3_DEFAULT["0.5.3"] | {"Olmo2ForCausalLM", "Qwen3VLForConditionalGeneration",
                                                 "Qwen3VLMoeForConditionalGeneration", "Glm4vForConditionalGeneration"}
_FA3_DEFAULT["0.5.8.post1"] = _FA3_DEFAULT["0.5.7"] | {"MixtralForCausalLM", "MiMoV2FlashForCausalLM"}
# From 0.5.8.post1 on the Hopper MHA default no longer consults this list (fa3 for every MHA model).


class BackendChoice(BaseModel):
    """The backend SGLang picks when ``--attention-backend`` is not passed."""

    backend: str
    reason: str
    source: str


class Reason(BaseModel):
    text: str
    source: str


class BackendVerdict(BaseModel):
    """``works``: SGLang accepts it as is; ``adjusted``: SGLang changes a setting (page size, or the
    backend itself) and runs; ``no``: SGLang refuses; ``depends``: SGLang does not check, the kernel
    library decides (reason given)."""

    backend: str
    verdict: Literal["works", "adjusted", "no", "depends"]
    reasons: list[Reason] = []
    page_size: int | None = None
    is_default: bool = False
    #: the backend SGLang runs when it replaces the one asked for (``fa3`` with ``--kv-cache-dtype fp8_e5m2`` ->
    #: ``triton``), else None
    runs_as: str | None = None


# ModelRunner on CUDA: "if capability[0] < 8: ... float16; if capability[1] < 5: raise RuntimeError('SGLang only supports
# sm75 and above.')" (a V100, SM70, stops whatever the backend), per release
_SM75_LINE = {"0.4.3.post4": (_MR, 335), "0.4.10.post2": (_MR, 620), "0.5.3": (_MR, 745), "0.5.3.post1": (_MR, 748),
              "0.5.7": (_MR, 823), "0.5.8.post1": (_MR, 822), "0.5.9": (_MR, 913), "0.5.10.post1": (_MR, 1089),
              "0.5.23": ("sglang/srt/model_executor/model_runner_components/load_model_utils.py", 91)}


def below_sm75(release: str, gpu: GPU) -> Reason | None:
    """SGLang's start-up refusal of an NVIDIA GPU below SM75 (capability major < 8 and minor < 5: V100's SM70, P100's
    SM60), whatever the attention backend, with its line; None when it starts (SM75 and up, ROCm, unknown capability)."""
    release = check_release(release)
    sm = _sm(gpu)
    if _hip(gpu) or sm is None or not (sm[0] < 8 and sm[1] < 5):
        return None
    path, line = _SM75_LINE[release]
    return Reason(text=f"SGLang only supports sm75 and above (a RuntimeError at start-up; this GPU is SM{sm[0]}{sm[1]})",
                  source=f"sglang=={release} {path}:{line}")


def fa3_e5m2_switch(release: str, backend: str | None, kv_cache_dtype: str | None) -> Reason | None:
    """SGLang's switch of ``fa3`` to ``triton`` when ``--kv-cache-dtype fp8_e5m2`` is passed ("FlashAttention3 only
    supports fp8_e4m3 if using FP8; Setting attention backend to triton.", a warning, and it starts): the reason, or
    None when it does not apply. Every release with an fa3 choice has it (0.4.10.post2 to 0.5.3.post1 in
    ModelRunner.model_specific_adjustment, 0.5.7 to 0.5.10.post1 in ServerArgs, 0.5.23 in the override registry's
    ``_attention_backend_fa3_fp8_fallback``), after the default backend is picked and before the backend is built,
    so a default fa3 switches too and fa3's own GPU check never runs; 0.4.3.post4 has no fa3 choice."""
    release = check_release(release)
    if backend != "fa3" or kv_cache_dtype != "fp8_e5m2" or not _L.get(release, {}).get("fa3_e5m2"):
        return None
    return Reason(text="FlashAttention3 only supports fp8_e4m3 if using FP8; SGLang sets the attention backend to "
                  "triton (a warning at start-up) and runs triton", source=_c(release, "fa3_e5m2",
                                                                              _MR if not at_least(release, "0.5.7")
                                                                              else _SA))


def _features(hf_config: dict[str, Any]) -> dict[str, Any]:
    c = hf_config
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(hf_config.get(key), dict):
            c = hf_config[key]
    arch = (hf_config.get("architectures") or ["?"])[0]
    mla = bool(c.get("kv_lora_rank"))
    head_dim = c.get("head_dim")
    return {
        "arch": arch, "mla": mla,
        "nsa": mla and arch in ("DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM") and c.get("index_topk") is not None,
        "dsa": arch in _DSA_ARCHS_0523 and c.get("index_topk") is not None,
        # ModelConfig.has_asymmetric_kv / has_attention_sinks (0.5.23)
        "asymmetric_kv": not mla and head_dim is not None and c.get("v_head_dim") not in (None, head_dim),
        "sinks": arch in _SINK_ARCHS_0523 or bool(c.get("learnable_sink")),
        "kv_heads": c.get("num_key_value_heads") or c.get("num_attention_heads") or 0,
        "sliding_window": bool(c.get("sliding_window")) and c.get("use_sliding_window") is not False,
        "hybrid_linear": bool(c.get("linear_num_value_heads") or c.get("layers_block_type")
                              or c.get("hybrid_override_pattern")),
    }


def _hip(gpu: GPU) -> bool:
    return gpu.vendor.lower() == "amd"


def _sm(gpu: GPU) -> tuple[int, int] | None:
    return gpu.capability_tuple


def _c(release: str, key: str, path: str = _SA) -> str:
    line = _L[release].get(key)
    if line is None:
        raise KeyError(key)
    if isinstance(line, tuple):  # 0.5.23: the entry names its own file
        path, line = line
    return f"sglang=={release} {path}:{line}"


# The architectures SGLang's model-specific adjustments give trtllm_mla on SM100 (0.5.7+; KimiK25 from 0.5.9)
_DEEPSEEK_SM100_ARCHS = ("DeepseekV3ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration")


def default_backend(release: str, gpu: GPU, hf_config: dict[str, Any], *, tp_size: int = 1,
                    speculative_algorithm: str | None = None, speculative_eagle_topk: int | None = None,
                    kv_cache_dtype: str = "auto") -> BackendChoice:
    """The attention backend SGLang ``release`` runs on ``gpu`` for this model when none is passed: its pick
    (:func:`_picked_backend`), then, with ``--kv-cache-dtype fp8_e5m2``, fa3 switched to triton (:func:`fa3_e5m2_switch`,
    which SGLang applies after the pick)."""
    choice = _picked_backend(release, gpu, hf_config, tp_size=tp_size, speculative_algorithm=speculative_algorithm,
                             speculative_eagle_topk=speculative_eagle_topk)
    switch = fa3_e5m2_switch(release, choice.backend, kv_cache_dtype)
    if switch is None:
        return choice
    return BackendChoice(backend="triton", reason=f"{choice.reason}: fa3 ({choice.source}), then {switch.text}",
                         source=switch.source)


def _picked_backend(release: str, gpu: GPU, hf_config: dict[str, Any], *, tp_size: int = 1,
                    speculative_algorithm: str | None = None, speculative_eagle_topk: int | None = None) -> BackendChoice:
    """The attention backend SGLang ``release`` picks on ``gpu`` for this model when none is passed.

    Assumes CUDA >= 12.3 on Hopper (``is_hopper_with_cuda_12_3``) and flashinfer installed on CUDA (a
    dependency of the CUDA wheels). Model-specific picks come first (DeepSeek NSA -> ``nsa``, gpt-oss ->
    ``trtllm_mha``/``fa3``/``triton``), then the generic MHA / MLA rules.
    """
    release = check_release(release)
    f = _features(hf_config)
    hip, sm = _hip(gpu), _sm(gpu)
    major = sm[0] if sm else None
    spec_ok = speculative_algorithm is None or (speculative_eagle_topk or 1) == 1
    if release == "0.4.3.post4":
        b = "triton" if hip else "flashinfer"
        return BackendChoice(backend=b, reason="flashinfer if installed, else triton",
                             source=f"sglang=={release} {_SA}:241")
    if at_least(release, "0.5.23"):
        return _default_backend_0523(release, f, hip, major, tp_size, speculative_algorithm, speculative_eagle_topk)
    if f["nsa"] and at_least(release, "0.5.3"):
        return BackendChoice(backend="nsa", reason="DeepSeek NSA models get the nsa backend",
                             source=_c(release, "nsa"))
    llama4 = _llama4_default(release, f, hip, major)
    if llama4 is not None:
        return llama4
    if f["arch"] == "GptOssForCausalLM" and at_least(release, "0.5.3"):
        if major == 10:
            b = "trtllm_mha"
        elif major == 9:
            b = "fa3"
        elif hip and release == "0.5.10.post1":
            b = "aiter"
        else:
            b = "triton"
        return BackendChoice(backend=b, reason="gpt-oss: trtllm_mha on SM100, fa3 on SM90, else triton",
                             source=_c(release, "gptoss"))
    if (f["mla"] and major == 10 and _L[release].get("deepseek_sm100")
            and f["arch"] in _DEEPSEEK_SM100_ARCHS + (("KimiK25ForConditionalGeneration",)
                                                      if at_least(release, "0.5.9") else ())):
        # _handle_model_specific_adjustments: DeepSeek V3/R1/V3.1 (and the architectures listed with it) on SM100
        # get trtllm_mla when no backend is given; trtllm_mla then takes page_size 32 or 64 (64 by default)
        return BackendChoice(backend="trtllm_mla", reason=f"{f['arch']} on SM100: SGLang's model-specific default",
                             source=_c(release, "deepseek_sm100"))
    where = _c(release, "default", _MR if not at_least(release, "0.5.7") else _SA)
    if f["hybrid_linear"] and major == 10 and _L[release].get("gdn_sm100"):
        return BackendChoice(backend="triton", reason="hybrid GDN model (Qwen3-Next / Qwen3.5) on SM100: triton for the "
                             "full-attention layers", source=_c(release, "gdn_sm100"))
    if not f["mla"]:
        fa3_arch = at_least(release, "0.5.8.post1") or f["arch"] in _FA3_DEFAULT[release]
        if major == 9 and not hip and spec_ok and fa3_arch:
            return BackendChoice(backend="fa3", reason="MHA on Hopper (CUDA >= 12.3)"
                                 + ("" if at_least(release, "0.5.8.post1") else f", {f['arch']} in the FA3 default list"),
                                 source=where)
        if major == 10 and at_least(release, "0.5.7") and spec_ok:
            return BackendChoice(backend="trtllm_mha", reason="MHA on SM100 (B200/GB200)", source=where)
        if hip:
            return BackendChoice(backend="aiter", reason="MHA on ROCm", source=where)
        return BackendChoice(backend="flashinfer", reason="MHA elsewhere: flashinfer (installed with the CUDA wheel)",
                             source=where)
    return _default_mla_backend(f, hip, major, tp_size, where)


def _default_mla_backend(f: dict[str, Any], hip: bool, major: int | None, tp_size: int, where: str) -> BackendChoice:
    """The generic MLA rule every covered release ends with: fa3 on Hopper, flashinfer on SM100, aiter on ROCm with 16 or
    128 heads per rank, else triton."""
    if major == 9 and not hip:
        return BackendChoice(backend="fa3", reason="MLA on Hopper", source=where)
    if major == 10:
        return BackendChoice(backend="flashinfer", reason="MLA on SM100", source=where)
    if hip:
        heads = max(1, f["kv_heads"] // tp_size)
        if heads in (16, 128):
            return BackendChoice(backend="aiter", reason=f"MLA on ROCm with {heads} heads per rank (aiter: 16 or 128)",
                                 source=where)
        return BackendChoice(backend="triton", reason=f"MLA on ROCm with {heads} heads per rank (aiter needs 16 or 128)",
                             source=where)
    return BackendChoice(backend="triton", reason="MLA elsewhere", source=where)


def _default_backend_0523(release: str, f: dict[str, Any], hip: bool, major: int | None, tp_size: int,
                          speculative_algorithm: str | None, speculative_eagle_topk: int | None) -> BackendChoice:
    """SGLang 0.5.23: the model overrides first (DSA -> dsa, gpt-oss, the DeepSeek family on SM100, Qwen3.5 / Qwen3-Next
    on SM100), then ``get_default_attn_backend`` (arg_groups/model_override_base.py:277-353)."""
    where = _c(release, "default")
    topk_one = speculative_algorithm is None or (speculative_eagle_topk or 1) == 1
    if f["dsa"]:
        return BackendChoice(backend="dsa", reason="DeepSeek DSA models get the dsa backend", source=_c(release, "nsa"))
    if f["arch"] == "GptOssForCausalLM":
        b = "trtllm_mha" if major == 10 else "fa3" if major == 9 else "aiter" if hip else "triton"
        return BackendChoice(backend=b, reason="gpt-oss: trtllm_mha on SM100, fa3 on SM90, aiter on ROCm, else triton",
                             source=_c(release, "gptoss"))
    llama4 = _llama4_default(release, f, hip, major)
    if llama4 is not None:
        return llama4
    if f["arch"] in _GEMMA4_ARCHS:
        return BackendChoice(backend="trtllm_mha" if major == 10 else "triton",
                             reason="Gemma 4: trtllm_mha on SM100, else triton",
                             source=f"sglang=={release} sglang/srt/arg_groups/model_overrides/gemma4.py:30")
    if f["arch"] in ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM") and major == 10:
        return BackendChoice(backend="fa4", reason="MiMo-V2 on SM100: fa4",
                             source=f"sglang=={release} sglang/srt/arg_groups/model_overrides/mimo_v2.py:27")
    if f["mla"] and major == 10 and f["arch"] in _DEEPSEEK_FAMILY_0523:
        return BackendChoice(backend="trtllm_mla", reason=f"{f['arch']} on SM100: SGLang's model-specific default",
                             source=_c(release, "deepseek_sm100"))
    if f["hybrid_linear"] and major == 10:
        # _qwen3_5_hybrid_overrides: trtllm_mha (pages of 64) unless the radix cache runs without the Mamba extra buffer
        # and without speculative decoding; the extra buffer is what the radix cache takes by default (overrides.py:483,
        # the overlap scheduler and the triton linear-attention backend being the defaults), so trtllm_mha whenever
        # get_default_attn_backend gives it (EAGLE topk 1). The Qwen3.5 text-only classes are not in that override's
        # list and get the generic rule, trtllm_mha as well. Other hybrids (NemotronH, ...) have overrides of their own.
        if f["arch"] in _GDN_SM100_0523 and topk_one and (speculative_algorithm is None
                                                          or speculative_eagle_topk is not None):
            return BackendChoice(backend="trtllm_mha", reason="hybrid GDN on SM100 with the Mamba extra buffer (on by "
                                 "default): trtllm_mha, page_size 64", source=_c(release, "gdn_sm100"))
        raise EngineInputError("attention_backend", f"SGLang {release}'s default backend for this hybrid "
                               "linear-attention model on SM100 (triton or trtllm_mha by the Mamba cache strategy and "
                               "the EAGLE topk, "
                               f"{_c(release, 'gdn_sm100')}) is not modelled; pass --attention-backend")
    if not f["mla"]:
        if major == 9 and not hip and topk_one:
            return BackendChoice(backend="fa3", reason="MHA on Hopper (CUDA >= 12.3)", source=where)
        # SM100: only when the EAGLE topk is known by then (given, or no speculative decoding)
        if major == 10 and topk_one and (speculative_algorithm is None or speculative_eagle_topk is not None):
            if f["asymmetric_kv"]:
                return BackendChoice(backend="fa4", reason="MHA on SM100 with K and V of different widths", source=where)
            return BackendChoice(backend="trtllm_mha", reason="MHA on SM100 (B200/GB200)", source=where)
        if hip:
            return BackendChoice(backend="aiter", reason="MHA on ROCm", source=where)
        if f["sinks"]:
            return BackendChoice(backend="triton", reason="MHA with attention sinks (flashinfer has none)", source=where)
        return BackendChoice(backend="flashinfer", reason="MHA elsewhere: flashinfer (installed with the CUDA wheel)",
                             source=where)
    return _default_mla_backend(f, hip, major, tp_size, where)


def check_backend(release: str, gpu: GPU, hf_config: dict[str, Any], backend: str, *, kv_cache_dtype: str = "auto",
                  page_size: int | None = None, tp_size: int = 1, speculative_algorithm: str | None = None,
                  speculative_eagle_topk: int | None = None) -> BackendVerdict:
    """Whether SGLang ``release`` runs ``--attention-backend backend`` on ``gpu`` for this model.

    Raises:
        EngineInputError(field="attention_backend"): the name is not a choice of that release.
    """
    release = check_release(release)
    choices, where = CHOICES[release]
    if backend not in choices:
        raise EngineInputError("attention_backend", f"{backend!r} is not an --attention-backend choice of SGLang "
                               f"{release} ({', '.join(choices)}; sglang=={release} {where})")
    f = _features(hf_config)
    hip, sm = _hip(gpu), _sm(gpu)
    major = sm[0] if sm else None
    reasons: list[Reason] = []
    verdict = "works"
    page = page_size
    asked = backend
    old_gpu = below_sm75(release, gpu)
    if old_gpu is not None:
        verdict = "no"
        reasons.append(old_gpu)
    switch = fa3_e5m2_switch(release, backend, kv_cache_dtype)
    if switch is not None:
        # the model-specific asserts (Llama 4, Gemma 4) read the backend as given; the kernel checks the one built
        verdict = "adjusted" if verdict == "works" else verdict
        reasons.append(switch)
        backend = "triton"

    def no(text: str, src: str) -> None:
        nonlocal verdict
        verdict = "no"
        reasons.append(Reason(text=text, source=src))

    def adjust(text: str, src: str) -> None:
        nonlocal verdict
        if verdict == "works":
            verdict = "adjusted"
        reasons.append(Reason(text=text, source=src))

    def depends(text: str, src: str) -> None:
        nonlocal verdict
        if verdict in ("works", "adjusted"):
            verdict = "depends"
        reasons.append(Reason(text=text, source=src))

    cuda_only = {"flashinfer", "fa3", "fa4", "trtllm_mha", "trtllm_mla", "flashmla", "cutlass_mla", "nsa",
                 "cutedsl_mla", "tokenspeed_mla", "hpc_ops"}
    if hip and backend in cuda_only:
        no(f"{backend} is a CUDA (NVIDIA) kernel library; not built for ROCm", f"sglang=={release} {_REG}")
    if not hip and backend in ("aiter", "wave"):
        no(f"{backend} is an AMD ROCm backend", f"sglang=={release} {_REG}")
    if release == "0.4.3.post4":
        if f["mla"] and backend == "torch_native":
            depends("MLA with torch_native is not a tested path in 0.4.3", f"sglang=={release} {_MR}:612")
        return BackendVerdict(backend=backend, verdict=verdict, reasons=reasons, page_size=page or 1,
                              is_default=default_backend(release, gpu, hf_config).backend == backend)
    if f["arch"].startswith("Llama4") and release in _LLAMA4_ACCEPTS and asked not in _LLAMA4_ACCEPTS[release][0]:
        no(f"{', '.join(_LLAMA4_ACCEPTS[release][0])} is required for Llama4 model (an assert at start-up)",
           f"sglang=={release} {_LLAMA4_ACCEPTS[release][1]}")
    if f["arch"] in _GEMMA4_ARCHS and asked not in _GEMMA4_ACCEPTS[0]:
        no(f"Gemma4 only supports {', '.join(_GEMMA4_ACCEPTS[0])} (an assert at start-up)",
           f"sglang=={release} {_GEMMA4_ACCEPTS[1]}")
    if at_least(release, "0.5.23"):
        page = _check_0523(release, f, backend, hip, sm, kv_cache_dtype, page, speculative_algorithm,
                           speculative_eagle_topk, tp_size, no, adjust, depends)
        dflt = default_backend(release, gpu, hf_config, tp_size=tp_size, speculative_algorithm=speculative_algorithm,
                               speculative_eagle_topk=speculative_eagle_topk)
        return BackendVerdict(backend=asked, verdict=verdict, reasons=reasons, page_size=page or 1,
                              is_default=dflt.backend == asked, runs_as=backend if backend != asked else None)
    L = _L[release]
    where = _c(release, "default", _MR if not at_least(release, "0.5.7") else _SA)
    if backend == "nsa" and not f["nsa"]:
        no("the nsa backend is for DeepSeek NSA (V3.2) models", _c(release, "nsa") if L.get("nsa") else where)
    if f["nsa"] and backend not in ("nsa",):
        depends("DeepSeek NSA normally runs on the nsa backend (SGLang sets it when none is given)",
                _c(release, "nsa") if L.get("nsa") else where)
    if backend == "fa3" and not hip:
        if L.get("fa3_reg") and not (major == 9 or (major == 8 and not f["mla"])):
            no("FlashAttention v3 Backend requires SM>=80 and SM<=90 (SM8x only without MLA)",
               _c(release, "fa3_reg", _REG))
    if backend == "fa4":
        if release == "0.5.7" and L.get("fa4"):
            no("FA4 backend is only supported for prefill (--prefill-attention-backend fa4)", _c(release, "fa4"))
        elif L.get("fa4") and not f["mla"]:
            page = 128
            adjust("FA4 backend only supports page size 128 for non-MLA models; page_size set to 128", _c(release, "fa4"))
        depends("FA4 kernels target Blackwell/Hopper; SGLang does not check the GPU itself", f"sglang=={release} {_REG}")
    if backend == "trtllm_mha":
        if f["mla"] and L.get("mha_only_reg"):
            no("trtllm_mha backend can only be used with non-MLA models", _c(release, "mha_only_reg", _REG))
        if L.get("trtllm_mha"):
            ok = major == 10 or (release == "0.5.10.post1" and major in (9, 10, 12))
            if not ok:
                no("TRTLLM MHA backend is only supported on Blackwell (SM100)"
                   + (" for prefill; decode also SM90/SM120" if release == "0.5.10.post1" else ""),
                   _c(release, "trtllm_mha"))
            elif release == "0.5.10.post1" and major != 10:
                depends("trtllm_mha prefill needs SM100; on SM90/SM120 only as --decode-attention-backend",
                        _c(release, "trtllm_mha_decode"))
            if page not in (16, 32, 64):
                page = 64
                adjust("TensorRT-LLM MHA only supports page_size 16, 32 or 64; page_size set to 64", _c(release, "trtllm_mha"))
        if speculative_algorithm and (speculative_eagle_topk or 1) > 1:
            no("trtllm_mha backend only supports topk = 1 for speculative decoding", f"sglang=={release} {_SA}")
    if backend == "trtllm_mla":
        if not f["mla"] and L.get("mla_only_reg"):
            no("trtllm_mla backend can only be used with MLA models", _c(release, "mla_only_reg", _REG))
        if L.get("trtllm_mla_sm"):
            sm12 = at_least(release, "0.5.9")
            ok = major == 10 or (sm12 and major == 12)
            if not ok:
                no("TRTLLM MLA backend is only supported on Blackwell GPUs (SM100" + ("/SM12x" if sm12 else "") + ")",
                   _c(release, "trtllm_mla_sm"))
            kv_ok = ("fp8_e4m3", "auto") + (("fp4_e2m1", "bf16") if at_least(release, "0.5.7") else ())
            if L.get("trtllm_mla_kv") and kv_cache_dtype not in kv_ok:
                no(f"TensorRT-LLM MLA backend only supports kv-cache-dtype {', '.join(kv_ok)}", _c(release, "trtllm_mla_kv"))
            if page not in (32, 64):
                page = 64
                adjust("TensorRT-LLM MLA only supports page_size 32 or 64; page_size set to 64", _c(release, "trtllm_mla_sm"))
    if backend in ("flashmla", "cutlass_mla"):
        if not f["mla"]:
            no(f"{backend} is an MLA kernel; this model has no MLA (kv_lora_rank)", f"sglang=={release} {_REG}")
        if backend == "flashmla" and not hip and major not in _FLASHMLA_ARCHS:
            no(f"FlashMLA's kernels are built for SM90 (Hopper) and SM100 (Blackwell) only; this GPU is SM{major}x and "
               "SGLang does not check it, so the kernel fails at the first forward", _FLASHMLA_BUILD)
        key = "flashmla_page" if backend == "flashmla" else "cutlass_page"
        want = 64 if backend == "flashmla" else 128
        if page != want and L.get(key) and verdict != "no":  # a refusal says why it stops, not the page it would set
            page = want
            adjust(f"{backend} only supports a page_size of {want}; page_size set to {want}", _c(release, key))
        if backend == "cutlass_mla":
            depends("cutlass_mla kernels are built for Blackwell; SGLang does not check the GPU itself",
                    f"sglang=={release} {_REG}")
    if backend == "aiter" and f["mla"] and hip:
        heads = max(1, f["kv_heads"] // tp_size)
        if heads not in (16, 128):
            depends(f"aiter MLA supports 16 or 128 heads per rank; this model has {heads} (SGLang's default picks triton)",
                    _c(release, "default", _MR if not at_least(release, "0.5.7") else _SA))
    dflt = default_backend(release, gpu, hf_config, tp_size=tp_size, speculative_algorithm=speculative_algorithm,
                           speculative_eagle_topk=speculative_eagle_topk)
    return BackendVerdict(backend=asked, verdict=verdict, reasons=reasons, page_size=page or 1,
                          is_default=dflt.backend == asked, runs_as=backend if backend != asked else None)


# 0.5.23 choices this module has no rules for (model- or kernel-specific): answered "depends", left out of the table
_MODEL_SPECIFIC_0523 = ("qsa", "dsv4", "compressed", "llada2_cfg_flashinfer", "minicpm_flashattn", "minicpm_flashinfer",
                        "hpc_ops", "cutedsl_mla", "tokenspeed_mla")


def _check_0523(release, f, backend, hip, sm, kv_cache_dtype, page, speculative_algorithm, speculative_eagle_topk,
                tp_size, no, adjust, depends) -> int | None:
    """The checks of SGLang 0.5.23 (each cited): returns the page size it ends with."""
    major = sm[0] if sm else None
    if backend in _MODEL_SPECIFIC_0523:
        depends(f"{backend} is a model-specific or kernel-specific backend of SGLang {release}; its checks are not "
                "modelled here", f"sglang=={release} {_REG}")
    if backend in ("nsa", "dsa") and not f["dsa"]:
        no(f"the {backend} backend is for DeepSeek DSA models (V3.2, GLM-5)", _c(release, "nsa"))
    if f["dsa"] and backend not in ("nsa", "dsa"):
        depends("DeepSeek DSA normally runs on the dsa backend (SGLang sets it when none is given)", _c(release, "nsa"))
    if backend == "fa3" and not hip:
        if not (major == 9 or (major == 8 and not f["mla"])):
            no("FlashAttention v3 Backend requires SM>=80 and SM<=90 (SM8x only without MLA)", _c(release, "fa3_reg"))
    if backend == "fa4":
        if not f["mla"] and major == 10 and (speculative_eagle_topk or 0) <= 1:
            page = 128
            adjust("FA4 backend only supports page size 128 for non-MLA models on SM100; page_size set to 128",
                   _c(release, "fa4"))
        depends("FA4 kernels target Blackwell/Hopper; SGLang does not check the GPU itself", f"sglang=={release} {_REG}")
    if backend == "trtllm_mha":
        if f["mla"]:
            no("trtllm_mha backend can only be used with non-MLA models", _c(release, "mha_only_reg"))
        if major not in (9, 10, 12):
            no("TRTLLM MHA backend requires Hopper (SM90), Blackwell (SM100) or SM120 GPUs", _c(release, "trtllm_mha"))
        elif major == 12 and kv_cache_dtype == "fp8_e4m3":
            no("TRTLLM FMHAv2 prefill on SM120 does not support fp8_e4m3 KV cache", _c(release, "trtllm_mha_sm120_fp8"))
        if page not in (16, 32, 64, 128):
            page = 64
            adjust("TensorRT-LLM MHA only supports page_size 16, 32, 64 or 128; page_size set to 64",
                   _c(release, "trtllm_mha_page"))
        if speculative_algorithm and (speculative_eagle_topk or 1) > 1:
            no("trtllm_mha backend only supports topk = 1 for speculative decoding",
               f"sglang=={release} sglang/srt/arg_groups/speculative_hook.py:1179")
    if backend == "trtllm_mla":
        if not f["mla"]:
            no("trtllm_mla backend can only be used with MLA models", _c(release, "mla_only_reg"))
        if major not in (10, 11, 12):
            no("TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x)", _c(release, "trtllm_mla_sm"))
        if kv_cache_dtype not in ("fp8_e4m3", "bf16", "auto"):
            no("TensorRT-LLM MLA backend only supports kv-cache-dtype fp8_e4m3, bf16 or auto", _c(release, "trtllm_mla_kv"))
        if page not in (32, 64):
            page = 64
            adjust("TensorRT-LLM MLA only supports page_size 32 or 64; page_size set to 64", _c(release, "trtllm_mla_page"))
    if backend == "flashmla":
        if not f["mla"]:
            no("flashmla is an MLA kernel; this model has no MLA (kv_lora_rank)", f"sglang=={release} {_REG}")
        if not hip and major not in _FLASHMLA_ARCHS:
            no(f"FlashMLA's kernels are built for SM90 (Hopper) and SM100 (Blackwell) only; this GPU is SM{major}x and "
               "SGLang does not check it, so the kernel fails at the first forward", _FLASHMLA_BUILD)
        if page != 64 and major in _FLASHMLA_ARCHS + (None,):  # a refusal says why it stops, not the page it sets
            page = 64
            adjust("FlashMLA only supports a page_size of 64; page_size set to 64", _c(release, "flashmla_page"))
    if backend == "aiter" and f["mla"] and hip:
        heads = max(1, f["kv_heads"] // tp_size)
        if heads not in (16, 128):
            depends(f"aiter MLA supports 16 or 128 heads per rank; this model has {heads} (SGLang's default picks triton)",
                    _c(release, "default"))
    return page


def backends_table(release: str, gpu: GPU, hf_config: dict[str, Any], **kw: Any) -> list[BackendVerdict]:
    """:func:`check_backend` for every choice of the release (same keyword arguments)."""
    return [check_backend(release, gpu, hf_config, b, **kw) for b in CHOICES[check_release(release)][0]
            if b not in ("intel_amx", "ascend", "intel_xpu") + _MODEL_SPECIFIC_0523]
