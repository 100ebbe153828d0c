"""Compatibility verdicts: will this attention backend / GPU / dtype / KV-cache dtype / release work?

Plain Python (no Django). The rules are not restated here: each verdict comes from evaluating the
release's own ``AttentionBackend.validate_configuration`` (``vllm/v1/attention/backend.py:276`` in
0.32) and the platform's priority function (``vllm/platforms/cuda.py:83``) as stored by
:mod:`compat.extract`, with :mod:`compat.interp`. What this module adds is the model side (the
``AttentionSelectorConfig`` fields vLLM derives from a model, ``vllm/v1/attention/selector.py``), the
platform loop (``get_valid_backends``: the first backend in priority order with no reasons wins,
``vllm/platforms/cuda.py:375-415``), explicit run-time assumptions, fixes, and the speculative-decoding
constraints.

Public API::

    features_from_hf_config(config: dict) -> ModelFeatures
    check(CheckRequest) -> CompatReport
    verdict_for(hf_config: dict, gpu: str, *, dtype="auto", kv_cache_dtype="auto", block_size=None,
                attention_backend=None, speculative_config=None, vllm_version=None) -> CompatReport
"""
from __future__ import annotations

import re

from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field

from . import extract, interp, releases
from .architectures import ArchitectureCheck, check_architecture

DEFAULT_RELEASE = "0.32.0"

# Models whose multimodal positions use bidirectional (PrefixLM) attention when multimodal inputs are on:
# vllm/transformers_utils/model_arch_config_convertor.py:377 (0.32) ``MM_PREFIX_LM_MODELS``.
MM_PREFIX_LM_MODELS = ("bagel", "gemma3", "molmo2", "moondream3", "paligemma")

# Facts vLLM only learns at run time (which kernels the installed wheel has, config overrides). Each is
# keyed by the condition text the evaluator produces and is reported with every verdict that used it.
# Anything not covered here stays a visible condition (ok=None) instead of a guess.
RUNTIME_ASSUMPTIONS: dict[str, list[tuple[str, Any, str]]] = {
    # platform -> [(condition text, value or callable(capability) -> value, why)]
    "cuda": [
        ("envs.VLLM_BATCH_INVARIANT", False, "VLLM_BATCH_INVARIANT unset (default off)"),
        ("_flashmla_C_AVAILABLE", True, "stock vLLM CUDA wheel builds the FlashMLA extension (SM90/SM100)"),
        ("_flashmla_extension_C_AVAILABLE", True, "stock vLLM CUDA wheel builds the FlashMLA extension"),
        ("_is_fa_version_supported(3)", lambda cap: cap.major == 9,
         "stock vLLM CUDA wheel: vllm_flash_attn ships FA3 for SM90 only"),
        ("_is_fa_version_supported(4)", lambda cap: cap.major == 10,
         "stock vLLM CUDA wheel: FA4 (CuTe DSL) only on SM100-family"),
        ("is_fa_version_supported(3)", lambda cap: cap.major == 9,  # spelling in 0.19's fa_utils
         "stock vLLM CUDA wheel: vllm_flash_attn ships FA3 for SM90 only"),
        ("is_fa_version_supported(4)", lambda cap: cap.major == 10,
         "stock vLLM CUDA wheel: FA4 (CuTe DSL) only on SM100-family"),
        ("get_current_vllm_config_or_none() is not None", False,
         "no --attention-config override of flash_attn_version"),
        # 0.11/0.12 get_flash_attn_version reads the env var (vllm/attention/utils/fa_utils.py:45 in 0.11.2;
        # default None, vllm/envs.py:538)
        ("envs.VLLM_FLASH_ATTN_VERSION is not None", False, "VLLM_FLASH_ATTN_VERSION unset (default None)"),
        ("get_current_vllm_config_or_none() is None", True,
         "no --attention-config override of flash_attn_version"),
    ],
    "rocm": [
        ("envs.VLLM_BATCH_INVARIANT", False, "VLLM_BATCH_INVARIANT unset (default off)"),
        ("rocm_aiter_ops.is_mla_enabled()", False, "VLLM_ROCM_USE_AITER unset (default 0)"),
        ("rocm_aiter_ops.is_mha_enabled()", False, "VLLM_ROCM_USE_AITER unset (default 0)"),
        ("rocm_aiter_ops.is_rdna_aiter_enabled()", False, "VLLM_ROCM_USE_AITER unset (default 0)"),
        # RocmPlatform.get_attn_backend_cls before ROCm had a priority list (vllm/platforms/rocm.py:192 in
        # 0.13.0) reads these env vars; defaults from vllm/envs.py (0.13.0 lines 560, 929, 959, 978)
        ("rocm_aiter_ops.is_triton_unified_attn_enabled()", False, "VLLM_ROCM_USE_AITER unset (default 0)"),
        ("envs.VLLM_ROCM_USE_AITER", False, "VLLM_ROCM_USE_AITER unset (default False)"),
        ("envs.VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION", False,
         "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION unset (default False)"),
        ("envs.VLLM_ROCM_USE_AITER_MHA", True, "VLLM_ROCM_USE_AITER_MHA unset (default True)"),
        ("envs.VLLM_ROCM_USE_AITER_MHA is not False", True, "VLLM_ROCM_USE_AITER_MHA unset (default True)"),
        ("envs.VLLM_V1_USE_PREFILL_DECODE_ATTENTION", False,
         "VLLM_V1_USE_PREFILL_DECODE_ATTENTION unset (default False)"),
        ("is_aiter_found_and_supported()", False, "aiter package not assumed installed"),
        ("get_current_vllm_config_or_none() is not None", False, "no config overrides"),
    ],
    "cpu": [
        ("platform.machine()", "x86_64", "an x86_64 host"),
        ("envs.VLLM_BATCH_INVARIANT", False, "VLLM_BATCH_INVARIANT unset (default off)"),
        ("torch.cpu._is_amx_tile_supported()", False, "CPU without AMX tiles (no Sapphire Rapids+ assumed)"),
    ],
    "xpu": [("envs.VLLM_BATCH_INVARIANT", False, "VLLM_BATCH_INVARIANT unset (default off)")],
}


class ModelFeatures(BaseModel):
    """What vLLM's attention selector needs to know about a model (``AttentionSelectorConfig``,
    ``vllm/v1/attention/selector.py`` 0.32) plus what the speculative checks need.

    ``head_size``: per-head size of what the KV cache stores; for MLA the latent ``kv_lora_rank +
    qk_rope_head_dim`` (576 for DeepSeek-V3), which is what MLA backends' ``get_supported_head_sizes``
    lists. ``model_dtype``: the config's dtype name (``bfloat16``).
    """

    model_type: str = ""
    head_size: int
    num_attention_heads: int | None = None
    num_kv_heads: int | None = None
    use_mla: bool = False
    use_sparse: bool = False
    has_sink: bool = False
    has_sliding_window: bool = False
    model_dtype: str = "bfloat16"
    is_multimodal: bool = False
    use_mm_prefix: bool = False
    attn_type: str = "decoder"
    mtp_layers: int = 0
    mtp_n_predict: int | None = None  # the MTP draft's n_predict (calculator.engine.mtp.mtp_head)
    architecture: str = ""
    # one head size per decoder layer where layers differ (Gemma 4: sliding head_dim, full global_head_dim), as
    # vLLM's model_arch_config has them; empty: every layer has ``head_size``
    layer_head_sizes: list[int] = Field(default_factory=list)
    vocab_size: int | None = None
    hidden_size: int | None = None
    notes: list[str] = Field(default_factory=list)


class SpeculativeConfig(BaseModel):
    """``--speculative-config`` as vLLM takes it; ``draft_config`` is the draft model's config.json dict."""

    method: str | None = None
    model: str | None = None
    num_speculative_tokens: int | None = None
    draft_config: dict | None = None


class CheckRequest(BaseModel):
    features: ModelFeatures
    gpu: str
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    attention_backend: str | None = None  # None or "auto": let vLLM choose
    speculative: SpeculativeConfig | None = None
    vllm_version: str = DEFAULT_RELEASE
    tensor_parallel_size: int = 1
    hf_config: dict | None = None  # the model's config.json; answers rules that read hf_text_config
    quant_config: dict | None = None  # a separate quantization file (ModelOpt's hf_quant_config.json)
    quantization: str | None = None  # --quantization


class Condition(BaseModel):
    """One run-time outcome: ``when`` lists (condition, assumed value) pairs; ``reasons`` what fails then."""

    when: list[tuple[str, Any]]
    reasons: list[str]


class BackendVerdict(BaseModel):
    name: str
    ok: bool | None  # None: depends on a run-time condition (see ``conditions``)
    reasons: list[str]
    fixes: list[str] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    priority: int | None = None  # position in the platform's auto order (0 = first), None if not listed
    source: str | None = None  # file:line of the backend class
    missing: bool = False
    not_modelled: bool = False  # requested, and the calculator does not model it on this platform (``reasons`` say why)


class SpecIssue(BaseModel):
    ok: bool
    reason: str
    fix: str = ""
    source: str | None = None
    # a covered release that accepts what this one refuses (the EAGLE-3 target allowlist), and why, for the
    # verdict's --vllm-version suggestion
    release: str | None = None
    release_why: str = ""


class CompatReport(BaseModel):
    runtime: str = "vllm"
    release: str
    platform: str
    gpu: str
    compute_capability: str | None
    dtype: str
    kv_cache_dtype: str
    block_size: int | None
    requested_backend: str | None
    auto_selected: str | None
    auto_conditions: list[str] = Field(default_factory=list)
    auto_source: str | None = None
    ok: bool | None  # the configuration as requested (explicit backend, or auto) works
    error: str | None = None  # what vLLM would raise at startup
    # ``error`` comes from building the model config (architecture, quantization), which vLLM does before it parses
    # --speculative-config (vllm==0.10.0 vllm/engine/arg_utils.py:1004, :1183): the verdict orders its reasons so
    error_before_speculative: bool = False
    backends: list[BackendVerdict]
    speculative: list[SpecIssue] = Field(default_factory=list)
    assumptions: list[str] = Field(default_factory=list)
    features: ModelFeatures
    # file:line of each model-specific rule that decided (the model's verify_and_update_config, FA4 support,
    # get_flash_attn_version), with what it did
    sources: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    layer_backends: dict[str, str] = Field(default_factory=dict)  # head size -> backend, when chosen per size
    flash_attn_versions: dict[str, int | None] = Field(default_factory=dict)  # head size -> FA version (FLASH_ATTN)
    model_forced_backend: str | None = None  # --attention-backend set by the model's verify_and_update_config
    # does the release's ModelRegistry know the config's architectures (compat.architectures); None without a config
    architecture: ArchitectureCheck | None = None
    # the requested --attention-backend is one the calculator does not model (why); ``ok`` is then None, never a
    # claimed start-up failure
    not_modelled: str | None = None
    # vLLM refuses the quantization method on this GPU (:func:`min_capability_issue`): ``{"method", "min_capability",
    # "capability", "release"}`` (``release``: a covered release whose minimum for the method the GPU meets, or None),
    # for the verdict's suggestions
    quantization_needs: dict | None = None
    # the quantization method's own minimum is met, an override's that may claim the checkpoint is not (not modelled)
    quantization_note: str | None = None

    def to_json(self) -> dict:
        return self.model_dump(mode="json")


class CompatInputError(ValueError):
    """Bad input (unknown GPU, release, backend, dtype...); ``field`` names the offending input."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


# ------------------------------------------------------------------ model features
def _text_config(config: dict) -> dict:
    tc = config.get("text_config")
    if isinstance(tc, dict):
        merged = {k: v for k, v in config.items() if k != "text_config"}
        merged.update(tc)
        return merged
    return config


def features_from_hf_config(config: dict) -> ModelFeatures:
    """Read the attention-relevant features of a HF ``config.json`` dict.

    * text models nested in ``text_config`` (Gemma 3, Llama 4, Mistral 3) are read from there;
    * ``head_size``: MLA ``kv_lora_rank + qk_rope_head_dim`` (vLLM's MLA head size,
      ``model_arch_config_convertor``), else explicit ``head_dim``, else ``hidden_size //
      num_attention_heads``;
    * ``has_sink``: gpt-oss (``model_type == "gpt_oss"``: learned attention sinks in every layer);
    * ``has_sliding_window``: a ``sliding_window`` value (unless ``use_sliding_window`` is false, as in
      Qwen2) or ``layer_types`` naming ``sliding_attention``;
    * ``mtp_layers``: the MTP layers vLLM builds for method mtp (``calculator.engine.mtp.mtp_head``: the
      family's key, ``num_nextn_predict_layers`` or ``mtp_num_hidden_layers``, vllm/config/speculative.py:661-1073);
    * ``model_dtype``: ``torch_dtype`` / ``dtype`` (default bfloat16).

    Raises:
        CompatInputError: the config has no usable head size.
    """
    if not isinstance(config, dict):
        raise CompatInputError("config", "config must be a JSON object (a config.json)")
    c = _text_config(config)
    model_type = str(c.get("model_type") or config.get("model_type") or "")
    notes = []
    use_mla = bool(c.get("kv_lora_rank")) and c.get("qk_rope_head_dim") is not None
    heads = c.get("num_attention_heads")
    if use_mla:
        head_size = int(c["kv_lora_rank"]) + int(c["qk_rope_head_dim"])
        notes.append(f"MLA: head size = kv_lora_rank {c['kv_lora_rank']} + qk_rope_head_dim "
                     f"{c['qk_rope_head_dim']} = {head_size}")
    elif c.get("head_dim"):
        head_size = int(c["head_dim"])
    elif c.get("hidden_size") and heads:
        head_size = int(c["hidden_size"]) // int(heads)
    else:
        raise CompatInputError("config", "config has neither head_dim nor hidden_size/num_attention_heads")
    use_sparse = bool(c.get("index_topk")) and use_mla  # DeepSeek-V3.2 style sparse MLA indexer
    layer_types = c.get("layer_types") or []
    sliding = ("sliding_attention" in layer_types) or (
        c.get("sliding_window") not in (None, 0) and c.get("use_sliding_window", True) is not False)
    is_mm = "vision_config" in config or "audio_config" in config
    dtype = str(c.get("torch_dtype") or c.get("dtype") or config.get("torch_dtype") or "bfloat16")
    mm_prefix = is_mm and (bool(config.get("is_mm_prefix_lm")) or
                           str(config.get("model_type", "")) in MM_PREFIX_LM_MODELS)
    archs = config.get("architectures") or c.get("architectures") or [""]
    layer_heads = _layer_head_sizes(config, model_type)
    if layer_heads:
        notes.append("head size per layer type: " + ", ".join(
            f"{h}" for h in sorted(set(layer_heads))) + " (from the config's layer shapes)")
    return ModelFeatures(
        model_type=model_type, head_size=head_size, num_attention_heads=heads,
        num_kv_heads=c.get("num_key_value_heads", heads), use_mla=use_mla, use_sparse=use_sparse,
        has_sink=model_type == "gpt_oss", has_sliding_window=bool(sliding), model_dtype=dtype,
        is_multimodal=is_mm, use_mm_prefix=mm_prefix, mtp_layers=_mtp_layers(config), mtp_n_predict=_mtp_n_predict(config),
        architecture=str(archs[0] if isinstance(archs, list) and archs else archs), layer_head_sizes=layer_heads,
        vocab_size=c.get("vocab_size"), hidden_size=c.get("hidden_size"), notes=notes)


def _layer_head_sizes(config: dict, model_type: str) -> list[int]:
    """Per-layer head sizes for models whose layers differ (Gemma 4), from the memory engine's layer shapes
    (:func:`calculator.engine.arch.parse_config`, ``LayerDesc.head_dim``); ``[]`` when all layers share one.

    Raises:
        CompatInputError: on ``config`` when the engine refuses the layer shapes (its message).
    """
    from calculator.engine.arch import GEMMA4_TYPES, parse_config
    from calculator.engine.errors import EngineInputError

    if model_type not in GEMMA4_TYPES:
        return []
    try:
        arch = parse_config(config)
    except EngineInputError as e:
        raise CompatInputError("config", str(e)) from None
    sizes = [la.head_dim or arch.head_dim for la in arch.layers]
    return sizes if len(set(sizes)) > 1 else []


# ------------------------------------------------------------------ platform / gpu
#: where vLLM 0.32.0 picks its platform: the built-in plugins are tpu, cuda, rocm, xpu and cpu, none for Apple's GPU
#: (Metal / MPS), and on macOS the CPU plugin answers (``sys.platform.startswith("darwin")``)
APPLE_PLATFORM_SOURCE = ("vllm/platforms/__init__.py:174-229 cpu_platform_plugin (macOS at :191-198), "
                         ":231-237 builtin_platform_plugins, vLLM 0.32.0")


def apple_gpu_refusal(gpu) -> str | None:
    """The sentence refusing an Apple GPU (a catalog Mac or a ``custom:...:apple``): vLLM has no Metal / MPS platform,
    on macOS it runs on the CPU (:data:`APPLE_PLATFORM_SOURCE`), so no GPU plan (utilization, CUDA graphs, speed) is
    given; it points to llama.cpp / Ollama, which the calculator answers on Macs. ``None`` for any other device. The
    calculator's vLLM answer (:mod:`calculator.runtimes.vllm`) and :func:`verdict_for` (``check_compat``, the
    /compat/ page) refuse a Mac with it."""
    if gpu.vendor != "apple":
        return None
    return (f"{gpu.name}: vLLM has no Apple GPU (Metal / MPS) backend: on macOS it runs on the CPU platform "
            f"({APPLE_PLATFORM_SOURCE}), so there is no GPU plan to give. For a Mac use llama.cpp or Ollama "
            "(runtime llama.cpp / ollama, --runtime llama.cpp), which run on Metal; vLLM's CPU build is answered "
            "with gpu CPU")


def platform_of(gpu) -> str:
    return {"nvidia": "cuda", "amd": "rocm", "cpu": "cpu", "intel": "xpu"}.get(gpu.vendor, gpu.vendor)


def _capability(gpu) -> interp.Capability | None:
    t = gpu.capability_tuple
    if t is not None:
        return interp.Capability(*t)
    if gpu.compute_capability and gpu.compute_capability.startswith("gfx"):
        # ROCm reports gfx942 as capability 9.4, gfx950 as 9.5 (torch.cuda.get_device_capability on ROCm)
        digits = gpu.compute_capability[3:]
        return interp.Capability(int(digits[:-2] or digits[0]), int(digits[-2:-1] or 0))
    return None


def _resolve_dtype(dtype: str, features: ModelFeatures, platform: str, cap) -> str:
    """``--dtype auto``: the config dtype, but float32 checkpoints run in bf16 (fp16 before SM80) on GPUs
    (vllm/config/model.py ``_resolve_auto_dtype``); the CPU keeps the config's dtype."""
    alias = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
    if dtype and dtype != "auto":
        return alias.get(dtype, dtype)
    d = alias.get(features.model_dtype, features.model_dtype)
    if d == "float32" and platform in ("cuda", "rocm"):
        return "bfloat16" if (cap is None or (cap.major, cap.minor) >= (8, 0)) else "float16"
    return d


# ------------------------------------------------------------------ evaluation helpers
# Why vllm/platforms/rocm.py's GPU-architecture flags (``_ON_GFX942 = "gfx942" in _GCN_ARCH``, rocm.py:217-232 in
# 0.32.0) are all False on an NVIDIA GPU: ``_GCN_ARCH = _get_gcn_arch()`` (rocm.py:215) asks amdsmi, which is absent
# there, then falls back to ``torch.cuda.get_device_properties("cuda").gcnArchName`` (rocm.py:200-209), which a CUDA
# build of torch fills with the device's name ("NVIDIA H100 80GB HBM3": torch/csrc/cuda/Module.cpp, "HIP-only
# property; reuse name attribute for CUDA builds"), so no "gfx..." substring test holds. A ROCm backend's own rules
# (``get_cdna_version() > 2``, rocm_aiter_fa.py:854-860) are then decided, never shown as AMD conditions.
_ROCM_FLAGS_ON_CUDA = ("an NVIDIA GPU: vllm/platforms/rocm.py's _GCN_ARCH is torch's gcnArchName, the device name on "
                       "a CUDA build of torch, so no gfx architecture flag holds (rocm.py:200-232 in 0.32.0)")


@lru_cache(maxsize=None)
def _rocm_arch_flags(release: str) -> tuple[str, ...]:
    """The ``_ON_<ARCH>`` module flags of ``vllm/platforms/rocm.py`` that the release's stored ROCm functions read
    (``on_gfx942()`` returns ``_ON_GFX942``, rocm.py:346 in 0.32.0)."""
    data = extract.load(release)
    names: set[str] = set()
    for fn in data.get("functions", {}).values():
        if fn.get("module") == "vllm.platforms.rocm":
            names.update(re.findall(r"\b_ON_[A-Z0-9_]+\b", fn.get("src", "")))
    return tuple(sorted(names))


def _assumptions(platform: str, cap, data: dict | None = None) -> tuple[dict, dict]:
    values, why = {}, {}
    for text, value, reason in RUNTIME_ASSUMPTIONS.get(platform, []):
        values[text] = value(cap) if callable(value) else value
        why[text] = reason
    if platform == "cuda" and data is not None:
        for text in _rocm_arch_flags(data["release"]):
            values[text], why[text] = False, _ROCM_FLAGS_ON_CUDA
    fa4 = (data or {}).get("flash_attn", {}).get("4")
    if platform == "cuda" and fa4 is not None and cap is not None:
        # the release's own _is_fa4_supported and whether its wheel ships FA4 (compat/extract.py flash_attn_support)
        ok = fa4["available"] and cap.as_version_str() in fa4["capabilities"]
        reason = (f"FA4 {'runs' if ok else 'does not run'} on compute capability {cap.as_version_str()} in this "
                  f"release: _is_fa4_supported accepts {', '.join(fa4['capabilities']) or 'nothing'} "
                  f"({fa4['source']}); {fa4['why']}")
        for text in ("_is_fa_version_supported(4)", "is_fa_version_supported(4)"):
            values[text], why[text] = ok, reason
    return values, why


def runtime_constant(data: dict, name: str) -> tuple[dict, list[dict]] | None:
    """``(module entry, bindings)`` of a module-level name the extractor left undecided because the module rebinds it
    in a branch (``modules[...]["runtime_constants"]``, :func:`compat.extract.module_bindings`); None otherwise."""
    for mod in (data.get("modules") or {}).values():
        found = (mod.get("runtime_constants") or {}).get(name)
        if found:
            return mod, found
    return None


def runtime_constant_bindings(data: dict, name: str) -> str | None:
    """Where and under what the module binds a flag it sets while vLLM imports it, with the release's lines:
    ``False (vllm/v1/attention/backends/fa_utils.py:20); True (vllm/v1/attention/backends/fa_utils.py:54) if
    current_platform.is_rocm() (:38) and try (:46) raises nothing before :54 (imports aiter.ops.triton.mha.
    flash_attn_varlen_func (:48), flash_attn.flash_attn_varlen_func (:52))`` for ``_ROCM_FLASH_ATTN_AVAILABLE`` in
    0.32.0 (the ``(:N)`` lines are in the same file). None when ``name`` is not such a flag."""
    found = runtime_constant(data, name)
    if found is None:
        return None
    mod, bindings = found
    parts = []
    for b in bindings:
        # an elif is said by the test that holds: ``not (is_cuda())`` and ``not (is_xpu())`` before ``is_rocm()``
        # are implied by it on a platform that is ROCm
        under = [u for u in b["under"] if not (u.startswith("not (") and any(not x.startswith("not (")
                                                                           for x in b["under"]))]
        parts.append(f"{b['src']} ({mod['file']}:{b['line']})" + (f" if {' and '.join(under)}" if under else ""))
    return "; ".join(parts)


def describe_runtime_constant(data: dict, name: str) -> str | None:
    """One sentence for a verdict's sources: ``NAME is not a constant: vLLM sets it while importing its module:
    <runtime_constant_bindings>``. None when ``name`` is not such a flag."""
    how = runtime_constant_bindings(data, name)
    return None if how is None else f"{name} is not a constant: vLLM sets it while importing its module: {how}"


def _leaves(result) -> list[tuple[tuple, Any]]:
    return result.leaves() if isinstance(result, interp.Fork) else [((), result)]


def _selector_kwargs(f: ModelFeatures, dtype: str, kv: str, block_size, cap) -> dict:
    return dict(head_size=f.head_size, dtype=dtype, kv_cache_dtype=kv, block_size=block_size,
                use_mla=f.use_mla, has_sink=f.has_sink, use_sparse=f.use_sparse, use_mm_prefix=f.use_mm_prefix,
                use_per_head_quant_scales=False, device_capability=cap, attn_type=f.attn_type,
                has_sliding_window=f.has_sliding_window, use_non_causal=False, use_batch_invariant=False,
                use_kv_connector=False, use_pcp=False, use_adaptive_verification=False, use_dcp=False,
                use_rswa=False)


def _vllm_config(req: "CheckRequest", dtype: str, kv: str):
    """The parts of ``get_current_vllm_config()`` that backend rules read, for this configuration."""
    text = _text_config(req.hf_config) if req.hf_config else None
    # is_diffusion / is_mm_prefix_lm / rswa_window: read by get_flash_attn_version (fa_utils.py:151, :249 in 0.32)
    model = {"hf_text_config": text, "hf_config": req.hf_config, "dtype": dtype, "is_diffusion": False,
             "is_mm_prefix_lm": req.features.use_mm_prefix, "rswa_window": None} if text else None
    return interp._Namespace({
        "model_config": model,
        "parallel_config": {"prefill_context_parallel_size": 1, "decode_context_parallel_size": 1,
                            "tensor_parallel_size": req.tensor_parallel_size},
        "attention_config": {"flash_attn_version": None, "use_non_causal": False, "backend": None},
        "cache_config": {"cache_dtype": kv, "block_size": req.block_size or 16,
                         "user_specified_block_size": req.block_size is not None},
        "speculative_config": None,
    })


def _model_config_rule(data: dict, req: "CheckRequest", f: ModelFeatures, plat: interp.Platform, kv: str,
                       requested: str | None, assume: dict, used: set) -> dict | None:
    """Evaluate the model's ``verify_and_update_config`` (``MODELS_CONFIG_MAP[architecture]``, stored by
    :func:`compat.extract.model_configs`) as vLLM runs it before choosing attention backends: it may force
    ``--attention-backend`` or set the FlashAttention version.

    Returns ``None`` when the release has no rule for the architecture, else ``{"backend": name or None,
    "flash_attn_version": int or None, "source": file:line, "map": file:line, "conditions": [...]}``.
    """
    entry = data.get("model_configs", {}).get(f.architecture)
    if entry is None or not req.hf_config:
        return None
    text = _text_config(req.hf_config)
    sizes = f.layer_head_sizes or [f.head_size] * int(text.get("num_hidden_layers") or 1)
    arch_cfg = interp._Namespace({"total_num_hidden_layers": len(sizes),
                                  "_items": [interp._Namespace({"head_size": h}) for h in sizes]})
    vcfg = interp._Namespace({
        "model_config": {"hf_text_config": text, "hf_config": req.hf_config, "model_arch_config": None},
        "attention_config": {"flash_attn_version": None, "backend": interp.BackendRef(requested) if requested
                             else None},
        "cache_config": {"cache_dtype": kv}})
    vcfg.model_config._set("model_arch_config", arch_cfg)

    def run(ev):
        ev.call_method(entry["class"], "verify_and_update_config", vcfg)
        used.update(ev.used)
        backend = vcfg.attention_config.backend
        return (backend.name if isinstance(backend, interp.BackendRef) else backend,
                vcfg.attention_config.flash_attn_version)

    try:
        result = interp.evaluate(run, data, plat, assume)
    except interp.NotEvaluable as e:
        return {"backend": None, "flash_attn_version": None, "source": entry["source"], "map": entry["map"],
                "conditions": [f"rule not evaluable ({e})"]}
    leaves = _leaves(result)
    backend, version = leaves[0][1] if not isinstance(leaves[0][1], interp.Raised) else (None, None)
    conds = [f"{c}={v}" for path, _ in leaves[1:] for c, v in path] if len(leaves) > 1 else []
    return {"backend": backend, "flash_attn_version": version, "source": entry["source"], "map": entry["map"],
            "conditions": conds}


def _flash_attn_version(data: dict, plat, head_size: int, assume: dict, used: set, vcfg) -> Any:
    """``get_flash_attn_version(head_size=...)`` of the release (``vllm/v1/attention/backends/fa_utils.py``)
    for one layer's head size; ``(version or None, file:line)``."""
    q = next((k for k in data.get("functions", {}) if k.endswith("fa_utils.get_flash_attn_version")), None)
    if q is None:
        return None, None
    fn = data["functions"][q]

    def run(ev):
        out = ev.call_function(q, head_size=head_size)
        used.update(ev.used)
        return out

    try:
        r = interp.evaluate(run, data, plat, assume, vcfg)
    except interp.NotEvaluable:
        return None, f"{fn['file']}:{fn['line']}"
    # a fork on a runtime fact (``_is_fa_version_supported(2)`` on Ampere / Ada) whose branches all give the same
    # version answers that version whichever way the fact goes
    values = {v for _, v in _leaves(r)}
    if len(values) == 1 and isinstance(next(iter(values)), int):
        return next(iter(values)), f"{fn['file']}:{fn['line']}"
    return None, f"{fn['file']}:{fn['line']}"


def _validate(data, backend: dict, plat: interp.Platform, kwargs: dict, assume: dict, used: set, vcfg=None):
    cls_q = backend["class"]

    def run(ev: interp.Evaluator):
        out = ev.call_method(cls_q, "validate_configuration", **kwargs)
        used.update(k for k in ev.used)
        return out

    try:
        return interp.evaluate(run, data, plat, assume, vcfg)
    except interp.NotEvaluable as e:
        return interp.Fork(f"rule not evaluable ({e})", [], ["could not evaluate rule"])


def priority_order(data: dict, platform: str, features: ModelFeatures, kv: str, cap, assume: dict,
                   used: set, head_size: int | None = None) -> tuple[Any, str | None]:
    """The platform's auto order: evaluates ``_get_backend_priorities`` (CUDA, ROCm) from the release.

    Returns (list of backend names, or a Fork of lists; source file:line)."""
    p = data["platforms"].get(platform)
    if not p or p["kind"] != "priority_list":
        return None, (p or {}).get("source")
    plat = interp.Platform(platform, cap)
    kwargs = dict(use_mla=features.use_mla, device_capability=cap, num_heads=features.num_attention_heads,
                  kv_cache_dtype=kv, use_non_causal=False,
                  head_size=features.head_size if head_size is None else head_size,
                  use_mm_prefix=features.use_mm_prefix, use_sparse=features.use_sparse, use_kv_connector=False)

    def run(ev):
        out = ev.call_function(p["function"], **kwargs)
        used.update(ev.used)
        return [b.name for b in out]

    return interp.evaluate(run, data, plat, assume), p["source"]


def _direct_selection(data, platform, features, dtype, kv, block_size, cap, requested, assume, used):
    """CPU / XPU (and ROCm before its priority list): evaluate the platform's ``get_attn_backend_cls``
    itself (it returns one backend).

    The arguments go by name: ``(selected_backend, attn_selector_config, num_heads)`` from 0.13
    (``vllm/platforms/cpu.py:127`` in 0.13.0), one parameter per selector field before that
    (``head_size, dtype, kv_cache_dtype, block_size, use_mla, has_sink, use_sparse, attn_type``,
    ``vllm/platforms/cpu.py:126`` in 0.11.2); the evaluator drops the names a release does not take."""
    p = data["platforms"][platform]
    plat = interp.Platform(platform, cap)
    fields = {k: v for k, v in _selector_kwargs(features, dtype, kv, block_size, cap).items()
              if k != "device_capability"}
    cfg = interp._Namespace(fields)

    def run(ev):
        out = ev.call_method(p["class"], p["method"], interp.BackendRef(requested) if requested else None,
                             attn_selector_config=cfg, num_heads=features.num_attention_heads, **fields)
        used.update(ev.used)
        if isinstance(out, interp.BackendRef):
            return out.name
        if isinstance(out, str):  # a class path returned directly (XPU MLA): its registry name via get_name()
            named = next((b["name"] for b in data["backends"] if b["path"] == out), None)
            if named is None and out in data["classes"]:
                named = ev.call_method(out, "get_name")
            return named or out.rsplit(".", 1)[-1]
        return out

    return interp.evaluate(run, data, plat, assume), p["source"]


# ------------------------------------------------------------------ fixes
def _fixes(name: str, reasons: list[str], req: CheckRequest, verdicts: dict, release: str, data: dict,
           kv: str, dtype: str) -> list[str]:
    fixes = []
    working = [n for n, v in verdicts.items() if v.ok is True and n != name]
    for r in reasons:
        if r.startswith("kv_cache_dtype"):
            alts = [n for n in working if kv in _declared_list(data, n, "kv_cache_dtypes")]
            declared = _declared_list(data, name, "kv_cache_dtypes")
            others = (f"use {' or '.join(alts[:3])}, or " if alts else "") + "--kv-cache-dtype auto"
            if kv in declared:  # declared, refused by a device or kernel condition: name that, not the list
                why = next((x for x in reasons if not x.startswith("kv_cache_dtype")), "")
                fixes.append(f"{name} takes --kv-cache-dtype {kv} only under conditions this GPU does not meet"
                             + (f" ({why})" if why else "") + f": {others}")
            else:
                fixes.append(f"{name} accepts only {'/'.join(x for x in declared if x != 'auto') or 'auto'} KV "
                             f"cache in {release}: {others}")
        elif r.startswith("compute capability"):
            caps = (_declared(data, name).get("compute_capability") or {}).get("value") or []
            fixes.append(f"{name} needs compute capability {', '.join(caps) or 'not available'}: "
                         + (f"use {' or '.join(working[:3])}" if working else "use another GPU"))
        elif r.startswith("head_size"):
            hs = _declared_list(data, name, "head_sizes")
            layer = re.search(r"head size (\d+) layers", r)  # a per-layer reason names the layers' head size
            fixes.append(f"{name} kernels lack head size {layer.group(1) if layer else req.features.head_size}"
                         + (f" (has {hs})" if hs else "") + (f": use {' or '.join(working[:3])}" if working else ""))
        elif r.startswith("block_size"):
            bs = _declared_list(data, name, "kernel_block_sizes")
            fixes.append(f"{name} needs --block-size in {bs}, or leave --block-size unset")
        elif r.startswith("dtype"):
            fixes.append(f"{name} supports --dtype {'/'.join(_declared_list(data, name, 'model_dtypes'))}")
        elif r in ("MLA not supported", "non-MLA not supported"):
            fixes.append(f"{name} is {'not ' if r.startswith('MLA') else ''}an MLA backend: "
                         + (f"use {' or '.join(working[:3])}" if working else "choose a backend of the other kind"))
        elif "sink" in r:
            fixes.append("attention sinks (gpt-oss) need a backend with sinks: "
                         + (" or ".join(working[:3]) if working else "none on this GPU"))
        elif r.startswith("sliding window"):
            fixes.append("sliding-window layers need a backend with sliding window: "
                         + (" or ".join(working[:3]) if working else "none on this GPU"))
        elif working and not any(f"use {working[0]}" in f for f in fixes):
            fixes.append(f"use {' or '.join(working[:3])}")
    return list(dict.fromkeys(fixes))


def _declared(data: dict, name: str) -> dict:
    for b in data["backends"]:
        if b["name"] == name:
            return b.get("declared") or {}
    return {}


def _declared_list(data: dict, name: str, key: str) -> list:
    v = (_declared(data, name).get(key) or {}).get("value")
    return v if isinstance(v, list) else []


# ------------------------------------------------------------------ speculative decoding
def _mtp_layers(config: dict) -> int:
    from calculator.engine.mtp import MtpHead, mtp_head

    head = mtp_head(config)
    return head.layers if isinstance(head, MtpHead) else 0


def _mtp_n_predict(config: dict) -> int | None:
    from calculator.engine.mtp import MtpHead, mtp_head

    head = mtp_head(config)
    return head.n_predict if isinstance(head, MtpHead) else None


def eagle3_allows(method: str, model_type: str, data: dict) -> bool | None:
    """Does the release's EAGLE-3 target allowlist (``speculative.eagle3_targets``, :func:`compat.extract.eagle3_targets`)
    let ``method`` run on a target of ``model_type``? vLLM tests whether any listed name is a substring of the
    target's ``hf_text_config.model_type``. None: the release has no such check for ``method``."""
    e3 = (data.get("speculative") or {}).get("eagle3_targets")
    if not e3 or method not in e3.get("methods", []):
        return None
    return any(t in model_type for t in e3.get("values", []))


def eagle3_target_issues(method: str, model_type: str, data: dict, hf_config: dict | None = None) -> list[SpecIssue]:
    """``SpeculativeConfig``'s EAGLE-3 target check of the release: ``ValueError("Eagle3 is only supported for
    ['llama', 'qwen'] models. ...")`` when no listed name is in the target's ``hf_text_config.model_type``
    (vllm/config.py:2906-2910 in 0.9.2, llama only; vllm/config/speculative.py:621-632 in 0.11.2; gone from 0.22.1).
    The refusal names the covered release to use instead (the first later one that accepts the target, else the
    last earlier one; from 0.22.1 one whose model class for ``hf_config`` implements ``SupportsEagle3``, see
    :func:`eagle3_interface_issues`); a model whose ``model_type`` is unknown is said to be unchecked."""
    allowed = eagle3_allows(method, model_type, data)
    if allowed is None:
        return []
    e3 = data["speculative"]["eagle3_targets"]
    release = data["release"]
    where = f"{e3['check']} ({release})"
    if not model_type:
        return [SpecIssue(ok=True, reason=f"vLLM {release} runs {method!r} only on targets whose model_type "
                          f"contains one of {e3['values']}; the model's model_type is unknown, so this is not "
                          "checked", source=where)]
    if allowed:
        return []
    targets = str(e3["values"])
    message = (e3.get("message") or "{method} is only supported for {targets} models. Got "
               "self.target_model_config.hf_text_config.model_type={model_type}")
    reason = message.format(method=method, targets=targets, model_type=repr(model_type))
    key = releases.version_key(release)
    having = [r for r in releases.covered_releases()
              if _eagle3_release_accepts(method, model_type, hf_config, extract.load(r), need_interface=False)]
    later = [r for r in having if releases.version_key(r) > key]
    fix_release = later[0] if later else (having[-1] if having else None)
    why = ""
    if fix_release:
        which = "first" if later else "last"
        has_list = eagle3_allows(method, model_type, extract.load(fix_release)) is not None
        why = (f"the {which} release covered here whose {method} target list accepts {model_type!r}" if has_list
               else f"the {which} release covered here without vLLM's {method} target list"
               + (" whose model class for the target implements SupportsEagle3"
                  if "eagle3_interface" in extract.load(fix_release) and method == "eagle3" else ""))
    fix = (f"--vllm-version {fix_release} ({why})" if fix_release
           else f"a target whose model_type contains one of {targets}")
    return [SpecIssue(ok=False, reason=reason, fix=fix, source=where, release=fix_release, release_why=why)]


def eagle3_interface_implemented(data: dict, arch: ArchitectureCheck | None) -> tuple[bool | None, str | None]:
    """Does the model class vLLM builds for the target implement ``SupportsEagle3`` in this release
    (``eagle3_interface`` of the data, :func:`compat.extract.eagle3_interface`)? Returns ``(answer, name)``: the
    registry name looked up (the registered or normalised architecture; for the Transformers-backend fallback its
    ``Transformers*ForCausalLM`` classes, which must all implement it) and True / False, or None when the release has
    no such data, the architecture does not resolve to a class (not registered, not checked) or the extractor could
    not follow the class."""
    e3 = data.get("eagle3_interface")
    if not e3 or arch is None or arch.status not in ("registered", "normalized", "transformers_backend"):
        return None, None
    if arch.status == "transformers_backend":
        backend = [a for a in data.get("model_architectures") or {}
                   if a.startswith("Transformers") and a.endswith("ForCausalLM")]
        if not backend or any(a in e3["unresolved"] for a in backend):
            return None, "the Transformers backend"
        return all(a in e3["architectures"] for a in backend), "the Transformers backend"
    name = arch.resolved
    if not name or name in e3["unresolved"]:
        return None, name
    return name in e3["architectures"], name


def _eagle3_release_accepts(method: str, model_type: str, hf_config: dict | None, data: dict, *,
                            need_interface: bool) -> bool:
    """Would ``data``'s release run ``method`` on this target as far as the calculator models it: its target allowlist
    (where it has one) does not refuse the model type, and (``eagle3`` on a release with ``eagle3_interface``) the
    model class implements ``SupportsEagle3``. ``need_interface``: only releases with that data count (an earlier
    release's model runner makes the same class check after its allowlist, which is not read)."""
    if method not in ((data.get("speculative") or {}).get("methods") or [method]):
        return False
    if eagle3_allows(method, model_type, data) is False:
        return False
    if method != "eagle3" or "eagle3_interface" not in data:
        return not need_interface
    if hf_config is None:
        return False
    arch = check_architecture(data, hf_config)
    return arch.ok is True and eagle3_interface_implemented(data, arch)[0] is True


def eagle3_interface_issues(method: str, spec: SpeculativeConfig, arch: ArchitectureCheck | None, data: dict,
                            model_type: str = "", hf_config: dict | None = None) -> list[SpecIssue]:
    """The model runner's EAGLE-3 target check of a release without a target allowlist (0.22.1 onwards): once the
    target is loaded, ``if not supports_eagle3(model): raise RuntimeError("Model does not support EAGLE3 interface
    ...")`` (V1 model runner: vllm/v1/worker/gpu_model_runner.py:5208-5212 in 0.22.1, when the head uses auxiliary
    hidden states; V2 model runner: vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py:18-19; 0.34.0 has only the
    V2 runner), read per release into ``eagle3_interface``.

    A target whose class does not implement ``SupportsEagle3`` is refused in vLLM's words (both runners' where the
    release has both: which one vLLM picks is not modelled, both refuse), naming the covered release to use instead
    (the first later release with this check whose class for the target implements it, else the last earlier one),
    or saying none does. A head whose ``eagle_config.use_aux_hidden_state`` is false is one the V1 runner does not
    check (and 0.34.0's V2 runner, ``Eagle3SpeculatorConfig.uses_aux_hidden_states``): not modelled, said so. A class
    the extractor could not follow is said to be unchecked."""
    e3 = data.get("eagle3_interface")
    if method != "eagle3" or not e3 or arch is None or arch.ok is False:
        return []
    release = data["release"]
    implemented, name = eagle3_interface_implemented(data, arch)
    checks = e3["checks"]
    where = f"{checks[0]['source']} ({release})"
    if implemented is None:
        if name is None:
            return []
        return [SpecIssue(ok=True, reason=f"vLLM {release}'s model runner runs eagle3 only on a target whose model "
                          f"class implements SupportsEagle3 ({e3['interface']}); whether {name}'s does is not read "
                          "from the source here, so this is not checked", source=where)]
    if implemented:
        return []
    draft = spec.draft_config or {}
    eagle_config = draft.get("eagle_config") if isinstance(draft.get("eagle_config"), dict) else {}
    if eagle_config.get("use_aux_hidden_state", True) is False:
        return [SpecIssue(ok=True, reason=f"not modelled: {name}'s model class does not implement SupportsEagle3 "
                          f"({e3['interface']}); the head's eagle_config.use_aux_hidden_state is false, for which "
                          f"vLLM {release}'s V1 model runner skips its check ({checks[0]['source']}), and whether the "
                          "runner vLLM picks checks it is not modelled here", source=where)]
    runner = {"v1": "V1 model runner", "v2": "V2 model runner"}
    said = f"{checks[0]['message']} ({runner[checks[0]['runner']]}, {checks[0]['source']}"
    said += "".join(f"; the {runner[c['runner']]}: \"{c['message']}\", {c['source']}" for c in checks[1:]) + ")"
    entry = (data.get("model_architectures") or {}).get(name or "", {}).get("source")
    reason = (f"{said}: the model class of {name}" + (f" ({entry})" if entry else "")
              + f" does not implement SupportsEagle3 ({e3['interface']}), which vLLM {release} requires of an "
              "EAGLE-3 target when it loads the model")
    key = releases.version_key(release)
    having = [r for r in releases.covered_releases() if r != release and
              _eagle3_release_accepts(method, model_type, hf_config, extract.load(r), need_interface=True)]
    later = [r for r in having if releases.version_key(r) > key]
    fix_release = later[0] if later else (having[-1] if having else None)
    if fix_release:
        why = (f"the {'first' if later else 'last'} release covered here whose model class for "
               f"{', '.join(arch.architectures) or name} implements SupportsEagle3")
        return [SpecIssue(ok=False, reason=reason, fix=f"--vllm-version {fix_release} ({why})", source=where,
                          release=fix_release, release_why=why)]
    checked = [r for r in releases.covered_releases() if "eagle3_interface" in extract.load(r)]
    fix = (f"no covered release with this check ({checked[0]} to {checked[-1]}) has a model class for "
           f"{', '.join(arch.architectures) or name} that implements SupportsEagle3: use a target whose class does, "
           "or another speculative method")
    return [SpecIssue(ok=False, reason=reason, fix=fix, source=where)]


def speculative_issues(spec: SpeculativeConfig | None, features: ModelFeatures, data: dict,
                       hf_config: dict | None = None, arch: ArchitectureCheck | None = None) -> list[SpecIssue]:
    """Constraints of ``--speculative-config`` (vllm/config/speculative.py of the release; from 0.22.1 the model
    runner's EAGLE-3 target class check, which needs the target's ``hf_config`` and its registry answer ``arch``)."""
    if spec is None or not (spec.method or spec.model):
        return []
    s = data.get("speculative", {})
    methods = s.get("methods", [])
    out: list[SpecIssue] = []
    method = spec.method or "draft_model"
    if methods and method not in methods:
        out.append(SpecIssue(ok=False, reason=f"speculative method {method!r} does not exist in vLLM "
                             f"{data['release']}", fix=f"use one of {', '.join(methods)}", source=s.get("source")))
    out += eagle3_target_issues(method, features.model_type, data, hf_config)
    out += eagle3_interface_issues(method, spec, arch, data, features.model_type, hf_config)
    mtp_like = method == "mtp" or method in s.get("mtp_model_types", [])
    if mtp_like and features.mtp_layers <= 0:
        out.append(SpecIssue(
            ok=False, reason=f"method {method!r} needs MTP layers, but the model's config has no "
            "MTP head vLLM runs (num_nextn_predict_layers / mtp_num_hidden_layers by family)", fix="use an EAGLE/EAGLE-3 draft (method 'eagle3' with a draft model) or "
            "'ngram'", source=s.get("mtp_layers_key_source")))
    n, k = features.mtp_n_predict, spec.num_speculative_tokens
    if mtp_like and features.mtp_layers > 0 and n and k and k > n and k % n:
        from calculator.engine.mtp import n_predict_refusal, n_predict_rule

        where = n_predict_rule(data["release"])
        out.append(SpecIssue(ok=False, reason=n_predict_refusal(k, n, data["release"]),
                             fix=f"num_speculative_tokens {n} or a multiple of {n}",
                             source=f"{where} ({data['release']})" if where else None))
    d = spec.draft_config
    if d and method not in ("ngram", "suffix", "mtp") and not mtp_like:
        dt = _text_config(d)
        dvocab = dt.get("draft_vocab_size") or dt.get("vocab_size")
        if features.vocab_size and dt.get("vocab_size") and dt["vocab_size"] != features.vocab_size \
                and not dt.get("draft_vocab_size"):
            out.append(SpecIssue(
                ok=False, reason=f"draft vocabulary ({dt['vocab_size']}) differs from the target's "
                f"({features.vocab_size}); drafted token ids would not mean the same tokens",
                fix="use a draft trained for this target (same tokenizer)",
                source=s.get("heterogeneous_vocab_source")))
        elif dvocab and features.vocab_size and dvocab > features.vocab_size:
            out.append(SpecIssue(ok=False, reason=f"draft_vocab_size {dvocab} exceeds target vocab "
                                 f"{features.vocab_size}", fix="use a draft trained for this target"))
        if method in ("eagle", "eagle3") and features.hidden_size and dt.get("hidden_size") \
                and dt["hidden_size"] != features.hidden_size and not dt.get("target_hidden_size"):
            out.append(SpecIssue(
                ok=False, reason=f"EAGLE draft hidden size {dt['hidden_size']} != target hidden size "
                f"{features.hidden_size}: the draft consumes the target's hidden states",
                fix="use the EAGLE head trained for this target model"))
    if not out:
        out.append(SpecIssue(ok=True, reason=f"speculative method {method!r} is available in {data['release']}",
                             source=s.get("source")))
    return out


# ------------------------------------------------------------------ quantization
def checkpoint_quant_method(hf_config: dict | None) -> str | None:
    """The ``quant_method`` vLLM reads from a checkpoint's ``config.json`` (``quantization_config``, else
    ``compression_config``; lower case, ``compressed_tensors`` spelled ``compressed-tensors``), as
    ``ModelConfig._verify_quantization`` does (``vllm/config/__init__.py:1095-1118``, ``:1150-1160`` in 0.10.2)."""
    if not isinstance(hf_config, dict):
        return None
    cfg = hf_config.get("quantization_config") or hf_config.get("compression_config")
    if not isinstance(cfg, dict):
        tc = hf_config.get("text_config")
        cfg = (tc.get("quantization_config") if isinstance(tc, dict) else None)
    if not isinstance(cfg, dict) or not cfg.get("quant_method"):
        return None
    return str(cfg["quant_method"]).lower().replace("compressed_tensors", "compressed-tensors")


# ModelOpt's quant_algo -> the method its override returns (ModelOptFp8Config / ModelOptNvFp4Config /
# ModelOptMxFp8Config / ModelOptMixedPrecisionConfig.override_quantization_method, modelopt.py:449 / :772 / :1205 /
# :1627 in 0.32.0)
_MODELOPT_ALGOS = (("MIXED", "modelopt_mixed"), ("MXFP8", "modelopt_mxfp8"), ("FP4", "modelopt_fp4"),
                   ("FP8", "modelopt"))


def resolved_quant_method(hf_config: dict | None, quant_config: dict | None, flag: str | None) -> str | None:
    """The quantization method name vLLM checks the GPU against, before overrides: the checkpoint's ``quant_method``
    (:func:`checkpoint_quant_method`), else a separate quantization file's (a ModelOpt ``hf_quant_config.json`` names
    none: its ``quant_algo`` picks the ModelOpt method, ``_MODELOPT_ALGOS``), else ``--quantization`` (an
    unquantized checkpoint quantized at load, ``--quantization fp8``). None: not quantized, or not recognised."""
    method = checkpoint_quant_method(hf_config)
    if method:
        return method
    qc = quant_config if isinstance(quant_config, dict) else {}
    if qc.get("quant_method"):
        return str(qc["quant_method"]).lower().replace("compressed_tensors", "compressed-tensors")
    inner = qc.get("quantization") if isinstance(qc.get("quantization"), dict) else qc
    producer = qc.get("producer").get("name") if isinstance(qc.get("producer"), dict) else None
    algo = str(inner.get("quant_algo") or "").upper()
    if algo and (producer == "modelopt" or "quantization" in qc):
        return next((m for key, m in _MODELOPT_ALGOS if key in algo), None)
    f = (flag or "").lower()
    return f if f and f not in ("none", "auto") else None


def quantization_issue(data: dict, hf_config: dict | None) -> str | None:
    """vLLM's refusal of the checkpoint's quantization method when the release does not know it: ``ValueError:
    Unknown quantization method: mxfp4. Must be one of [...]`` (``vllm/config/__init__.py:1211`` in 0.10.2), with the
    first covered release that lists it. Only a method some covered release lists is refused (a name no release
    knows may still be claimed by another method's ``override_quantization_method``); None otherwise, or when the
    release's data has no ``quantization`` section."""
    method = checkpoint_quant_method(hf_config)
    q = data.get("quantization") or {}
    if method is None or not q.get("methods") or method in q["methods"] or not q.get("unknown"):
        return None
    listing = [r for r in releases.covered_releases()
               if method in ((extract.load(r).get("quantization") or {}).get("methods") or [])]
    if not listing:
        return None
    key = releases.version_key(data["release"])
    later = [r for r in listing if releases.version_key(r) > key]
    where = (f"vLLM lists {method} from {later[0]}" if later else
             f"vLLM {listing[-1]} is the last covered release that lists {method}")
    msg = (q["unknown"]["message"].replace("{self.quantization}", method)
           .replace("{supported_quantization}", f"<the {len(q['methods'])} methods of vLLM {data['release']}: "
                                                f"{q['source']}>"))
    return f"{msg} ({q['unknown']['source']}; {where})"


def _claimants(methods: dict, method: str, flag: str | None) -> list[str]:
    """``method`` and every method whose own ``override_quantization_method`` names it (``_verify_quantization`` asks
    those before it keeps the checkpoint's name: ``gptq`` -> ``gptq_marlin``, gpt-oss's ``mxfp4`` ->
    ``gpt_oss_mxfp4``), less those that claim only when ``--quantization`` names them (``requires_flag``) and those
    that claim only on another platform than CUDA (``platforms``: IPEX on CPU / XPU)."""
    out = [method]
    for n, e in sorted(methods.items()):
        o = e.get("override") or {}
        if n != method and method in (o.get("mentions") or []) and (not o.get("requires_flag") or
                                                                     o["requires_flag"] == flag) \
                and (not o.get("platforms") or "cuda" in o["platforms"]):
            out.append(n)
    return out


def min_capability_issue(data: dict, method: str | None, gpu, platform: str, flag: str | None = None,
                         model_type: str | None = None) -> tuple[bool | None, str, dict | None] | None:
    """vLLM's start-up check of the quantization method against the GPU (``VllmConfig._get_quantization_config``:
    ``ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. Current
    capability: 75.``, ``vllm/config/vllm.py:900-906`` in 0.32.0; ``vllm/config.py`` in 0.9 / 0.10.0), with each
    method's ``get_min_capability()`` as the release's own source states it (extracted:
    ``quantization.min_capability``), compared with ``DeviceCapability.to_int()`` (major * 10 + minor).

    Every method that may claim the checkpoint (:func:`_claimants`; ``flag`` is ``--quantization``) is a candidate;
    the message names the one whose override compares with the config's ``model_type`` when there is one.
    Returns ``(False, message, needs)`` when every candidate's minimum exceeds the GPU's capability (``needs``:
    :attr:`CompatReport.quantization_needs`), ``(None, condition, None)`` when the method's own minimum exceeds it but
    another candidate's does not or is not a literal (which override claims the checkpoint is not evaluated here),
    ``(True, note, None)`` when the method's own passes and only an override's (which tests the GPU itself) does not,
    None when every candidate passes, or nothing
    is known (no method, a release without the extracted rule, a method the map lacks). NVIDIA GPUs only: ROCm reports
    its own capability and keeps its own quantization rules (``RocmPlatform.supported_quantization``), not modelled."""
    mc = (data.get("quantization") or {}).get("min_capability")
    if not method or not mc or platform != "cuda" or method not in mc["methods"]:
        return None
    t = gpu.capability_tuple
    if t is None:
        return None
    cc = t[0] * 10 + t[1]
    methods = mc["methods"]
    names = [n for n in _claimants(methods, method, flag) if n in methods]
    refused = [n for n in names if isinstance(methods[n].get("value"), int) and methods[n]["value"] > cc]
    if not refused:
        return None
    check, rel = mc["check"], data["release"]

    def said(n: str) -> str:
        return (check["message"].split(": ", 1)[1].replace("{model_config.quantization}", n)
                .replace("{quant_config.get_min_capability()}", str(methods[n]["value"]))
                .replace("{capability}", str(cc)))

    def where(n: str) -> str:
        e = methods[n]
        return f"{e['class']}.get_min_capability(), {e['source']}" + (
            f", inherited from {e['inherited_from']}" if e.get("inherited_from") else "")

    if len(refused) == len(names):
        # the name vLLM reports: an override that names the checkpoint's model type claims it (gpt-oss's mxfp4 is
        # gpt_oss_mxfp4 from 0.20.2, mxfp4.py:144-146 in 0.32.0), else the checkpoint's own method
        n = next((m for m in refused if m != method and model_type and
                  model_type in (methods[m].get("override") or {}).get("model_types", [])), method)
        def why(m: str) -> str:
            if m == method:
                return f"; the checkpoint's own {m} needs {methods[m]['value']} too ({where(m)})"
            return (f"; {m}, when {methods[m]['class']}.override_quantization_method ({methods[m]['override']['source']}) "
                    f"claims the checkpoint, needs {methods[m]['value']} too ({where(m)})")

        others = "".join(why(m) for m in refused if m != n)
        claimed = (f"; {n}'s override_quantization_method ({methods[n]['override']['source']}) claims this "
                   f"{model_type} checkpoint's {method}" if n != method else "")
        return False, f"{said(n)} ({check['source']}; {where(n)}{claimed}; vLLM {rel}{others})", {
            "method": method, "min_capability": max(methods[m]["value"] for m in refused), "capability": cc,
            "release": _release_meeting(method, cc, rel, flag)}
    needs = ", ".join(f"{n} needs {methods[n]['value']} ({where(n)})" for n in refused)
    if method not in refused and isinstance(methods[method].get("value"), int):
        # the checkpoint's own method runs here; an override that needs more (gptq_marlin, awq_marlin) tests the GPU
        # in its own override_quantization_method (query_marlin_supported_quant_types returns nothing below 80,
        # utils/marlin_utils.py:51-52 in 0.13.0), which is not evaluated here: said, not a condition
        return True, (f"vLLM {rel} checks {method} against the GPU ({where(method)}: {methods[method]['value']} <= "
                      f"{cc}); not modelled: whether an override that needs more claims the checkpoint on this GPU "
                      f"({needs}; each override_quantization_method's own test of the GPU is not evaluated)"), None
    other = ", ".join(f"{n} ({methods[n]['value'] if isinstance(methods[n].get('value'), int) else 'not read'})"
                      for n in names if n not in refused)
    return None, (f"which quantization method vLLM {rel} settles on for this checkpoint: {needs}, more than this GPU's "
                  f"capability {cc} ({check['source']} refuses it), but {other} may claim it instead "
                  "(override_quantization_method, not evaluated here)"), None


def _release_meeting(method: str, cc: int, release: str, flag: str | None) -> str | None:
    """The first later covered release where ``method`` and every method that may claim it (:func:`_claimants`) have a
    ``get_min_capability()`` of at most ``cc``, else the last earlier one; None when no covered release has one."""
    good = []
    for r in releases.covered_releases():
        ms = (((extract.load(r).get("quantization") or {}).get("min_capability")) or {}).get("methods") or {}
        if method not in ms:
            continue
        vals = [ms[n].get("value") for n in _claimants(ms, method, flag) if n in ms]
        if all(isinstance(v, int) and v <= cc for v in vals):
            good.append(r)
    key = releases.version_key(release)
    later = [r for r in good if releases.version_key(r) > key]
    return later[0] if later else ([r for r in good if releases.version_key(r) < key] or [None])[-1]


def with_registry_fact(message: str, arch: ArchitectureCheck, release: str) -> str:
    """``message`` (vLLM's refusal of the checkpoint's quantization) plus, when the release's model registry lacks
    the model's class as well, that fact and the first covered release that registers it."""
    if arch.status in ("registered", "not_checked") or not arch.architectures:
        return message
    name = arch.architectures[0]
    first = ""
    if arch.first_release:
        later = releases.version_key(arch.first_release) > releases.version_key(release)
        first = (f" (vLLM registers it from {arch.first_release})" if later else
                 f" (vLLM {arch.first_release} is the last covered release that registers it)")
    return f"{message}; and vLLM {release}'s model registry has no {name}{first}"


def fold_architecture(arch: ArchitectureCheck | None, ok: bool | None, error: str | None, notes: list[str],
                      auto_conditions: list[str], sources: list, quant: str | None, release: str, alone: str,
                      repeat_same: bool = True) -> tuple[bool | None, str | None, list[str], list[str], list]:
    """The report's ``(ok, error, notes, auto_conditions, sources)`` with the model-registry check ``arch`` folded in:
    vLLM resolves the model class when it builds the model config, before the other checks, so a class it cannot
    build stops it first (the other checks' error kept as a note, ``"{alone}: {error}"``; not when it is the same
    message and ``repeat_same`` is false), a condition joins ``auto_conditions``, an unregistered class's notes and
    sources are added, and a quantization refusal gains the registry's fact (:func:`with_registry_fact`)."""
    if arch is None:
        return ok, error, notes, auto_conditions, sources
    if arch.ok is False:
        if error and (repeat_same or error != arch.message):
            notes = [*notes, f"{alone}: {error}"]
        ok, error = False, arch.message
    elif arch.ok is None:
        auto_conditions = [*auto_conditions, arch.condition]
        ok = None if ok is True else ok
    if arch.status != "registered":
        notes = [*notes, *arch.notes]
        sources = [*sources, *arch.sources]
    if quant is not None and error == quant:
        error = with_registry_fact(quant, arch, release)
    return ok, error, notes, auto_conditions, sources


# ------------------------------------------------------------------ main check
def load_release(release: str | None) -> dict:
    """The extracted data of a covered vLLM release (``None``: :data:`DEFAULT_RELEASE`).

    Raises:
        CompatInputError: on ``vllm_version`` when the release is not one of
            :func:`compat.releases.covered_releases` ("vLLM 0.6.4 is not covered; covered: ...").
    """
    rel = release or DEFAULT_RELEASE
    if not releases.is_covered(rel):
        raise CompatInputError("vllm_version", releases.not_covered_message(rel))
    return extract.load(rel)


def unknown_backend_message(name: str, release: str, names) -> str:
    """Why ``--attention-backend name`` is refused on a release whose ``AttentionBackendEnum`` lacks it: vLLM itself
    refuses the name when it parses its flags (``AttentionConfig.validate_backend_before``,
    ``vllm/config/attention.py:181-193``, looks it up in the enum, whose metaclass raises ``ValueError: Unknown
    attention backend: 'X'. Valid options are: ...``, ``vllm/v1/attention/backends/registry.py:21-31``, both in
    0.32.0), before any model is loaded; the covered releases that have the name are named."""
    having = [r for r in releases.covered_releases() if name in releases.attention_backends(r)]
    return (f"unknown attention backend {name!r} in vLLM {release}: vLLM refuses it when it parses "
            f"--attention-backend (in 0.32.0: \"ValueError: Unknown attention backend: '{name}'. Valid options are: "
            "...\", vllm/v1/attention/backends/registry.py:21-31, from vllm/config/attention.py:181-193)"
            + (f"; {name} is a backend of vLLM {_span(having)}" if having else "")
            + f"; valid: {', '.join(sorted(names))}")


def _span(rels: list[str]) -> str:
    """``0.30.0 to 0.34.0`` for consecutive covered releases, else the list."""
    covered = list(releases.covered_releases())
    idx = [covered.index(r) for r in rels]
    if len(idx) > 1 and idx == list(range(idx[0], idx[-1] + 1)):
        return f"{rels[0]} to {rels[-1]}"
    return ", ".join(rels)


_MLA_FIELD_REASON = re.compile(r"qk_nope_head_dim|qk_rope_head_dim|kv_lora_rank|index_topk|sparse MLA|FlashInfer with SM90 MLA|FlashInfer's sparse MLA")


def check(req: CheckRequest) -> CompatReport:
    """Verdict for every attention backend of the GPU's platform, plus the one vLLM picks on auto.

    Mirrors ``Platform.get_attn_backend_cls`` (``vllm/platforms/cuda.py:418`` in 0.32): an explicit
    ``--attention-backend`` is validated alone and is an error if it has reasons; otherwise the backends
    are tried in the platform's priority order and the first without reasons is used.

    Raises:
        CompatInputError: unknown GPU, release, backend name or KV-cache dtype.
    """
    from calculator.engine.errors import EngineInputError
    from calculator.engine.gpus import get_gpu

    try:
        gpu = get_gpu(req.gpu)
    except EngineInputError as e:
        raise CompatInputError("gpu", str(e)) from None
    data = load_release(req.vllm_version)
    release = data["release"]
    platform = platform_of(gpu)
    apple = apple_gpu_refusal(gpu)
    if apple is not None:
        raise CompatInputError("gpu", apple)
    if platform not in data["platforms"]:
        raise CompatInputError("gpu", f"vLLM {release} has no attention selector for platform {platform}")
    cap = _capability(gpu)
    f = req.features
    dtype = _resolve_dtype(req.dtype, f, platform, cap)
    kv = req.kv_cache_dtype or "auto"
    known_kv = data["cache_dtypes"]["values"]
    if known_kv and kv not in known_kv:
        raise CompatInputError("kv_cache_dtype", f"--kv-cache-dtype {kv!r} is not a CacheDType of vLLM {release}; "
                               f"valid: {', '.join(known_kv)}")
    if (data.get("provenance") or {}).get("layout") == "legacy":
        # 0.9 / 0.10: if-chains and constructors instead of per-backend rules (compat/legacy.py)
        from .legacy import check_legacy

        return check_legacy(req, data, gpu, platform, cap, f, dtype, kv)
    model_kv_note = None
    if f.use_sparse:
        # DeepSeek-V3.2's model config rewrites the KV dtype before the backend is chosen (fp8 -> fp8_ds_mla in
        # 0.11-0.17): calculator/engine/layers.py sparse_mla_model_kv_dtype, shared with the memory engine
        from calculator.engine.layers import sparse_mla_model_kv_dtype
        from calculator.engine.runtime import parse_version

        kv_model, why_kv = sparse_mla_model_kv_dtype(parse_version(release), kv)
        if why_kv and kv_model != kv:
            model_kv_note = f"--kv-cache-dtype {kv} becomes {kv_model} for DeepSeek sparse attention ({why_kv})"
            kv = kv_model
    requested = None if req.attention_backend in (None, "", "auto") else req.attention_backend.upper()
    names = {b["name"]: b for b in data["backends"]}
    if requested and requested not in names:
        raise CompatInputError("attention_backend", unknown_backend_message(requested, release, names))

    assume, why = _assumptions(platform, cap, data)
    used: set = set()
    plat = interp.Platform(platform, cap)
    sources: list[str] = []
    notes: list[str] = []
    rule = _model_config_rule(data, req, f, plat, kv, requested, assume, used)
    forced = None
    vcfg = _vllm_config(req, dtype, kv)
    if rule is not None:
        what = []
        if rule["flash_attn_version"] is not None:
            vcfg.attention_config._set("flash_attn_version", rule["flash_attn_version"])
            what.append(f"sets flash_attn_version={rule['flash_attn_version']}")
        if rule["backend"] is not None and not requested:
            forced = rule["backend"]
            what.append(f"forces --attention-backend {forced}")
        sources.append(f"{rule['source']} {f.architecture} -> verify_and_update_config (MODELS_CONFIG_MAP "
                       f"{rule['map']}): " + (", ".join(what) or "changes nothing for this configuration"))
        if rule["conditions"]:
            notes.append("the model's config rule depends on: " + ", ".join(rule["conditions"]))
    head_sizes = sorted(set(f.layer_head_sizes)) or [f.head_size]
    if len(head_sizes) > 1:
        notes.append(f"layers have head sizes {', '.join(map(str, head_sizes))}: vLLM chooses and validates the "
                     "backend per layer (each Attention layer calls the selector with its head size)")
    per_hs = {hs: _backends_for_head_size(data, platform, f, dtype, kv, req, cap, plat, assume, used, vcfg,
                                          requested, hs) for hs in head_sizes}
    verdicts = _combine(per_hs)
    main_order = per_hs[head_sizes[0]][1]
    order_leaves = per_hs[head_sizes[0]][2]
    order_source = per_hs[head_sizes[0]][3]
    for v in verdicts.values():
        if v.ok is False:
            v.fixes = _fixes(v.name, v.reasons, req, verdicts, release, data, kv, dtype)
    effective = requested or forced
    auto, auto_conditions, error = None, [], None
    p = data["platforms"][platform]
    layer_backends: dict[str, str] = {}
    if forced and p["kind"] == "priority_list":
        v = verdicts[forced]
        if v.ok is True:
            auto = forced
        elif v.ok is None:
            auto_conditions.append(f"{forced} (forced by the model's config rule) is valid if "
                                   + "; ".join(" and ".join(f"{c}={val}" for c, val in x.when)
                                               for x in v.conditions if not x.reasons))
        else:
            error = f"Selected backend {forced} is not valid for this configuration. Reason: {v.reasons}"
    elif p["kind"] == "priority_list":
        for hs in head_sizes:
            pick, conds = _first_valid(per_hs[hs][1], per_hs[hs][0])
            auto_conditions += [c for c in conds if c not in auto_conditions]
            if pick:
                layer_backends[str(hs)] = pick
        if len(per_hs[head_sizes[0]][2]) > 1:
            auto_conditions.append("the priority order itself depends on: "
                                   + ", ".join(sorted({c for path, _ in order_leaves for c, _ in path})))
        if len(layer_backends) == len(head_sizes) and len(set(layer_backends.values())) == 1:
            auto = next(iter(layer_backends.values()))
        elif len(layer_backends) == len(head_sizes):
            auto = layer_backends[str(f.head_size)] if str(f.head_size) in layer_backends else \
                layer_backends[str(head_sizes[0])]
            notes.append("backend per head size: " + ", ".join(f"{k}: {b}" for k, b in layer_backends.items()))
        elif not auto_conditions:
            missing = [str(hs) for hs in head_sizes if str(hs) not in layer_backends]
            error = (f"No valid attention backend found for {platform} with this configuration"
                     + (f" (head size {', '.join(missing)})" if len(head_sizes) > 1 else ""))
    else:
        sel, _ = _direct_selection(data, platform, f, dtype, kv, req.block_size, cap, forced, assume, used)
        sel_leaves = _leaves(sel)
        first = sel_leaves[0][1]
        if isinstance(first, interp.Raised):
            error = f"{first.kind}: {first.message}"
        else:
            auto = first
        if len(sel_leaves) > 1:
            auto_conditions.append("depends on: " + ", ".join(sorted({c for path, _ in sel_leaves for c, _ in path})))
    fa_versions: dict[str, int | None] = {}
    chosen = effective or auto
    if platform == "cuda" and chosen == "FLASH_ATTN":
        fa_src = None
        for hs in head_sizes:
            fa_versions[str(hs)], fa_src = _flash_attn_version(data, plat, hs, assume, used, vcfg)
        if fa_src and any(v is not None for v in fa_versions.values()):
            sources.append(f"{fa_src} get_flash_attn_version: " + ", ".join(
                f"FA{v} for head size {hs}" for hs, v in fa_versions.items()))
    if "_is_fa_version_supported(4)" in used or "is_fa_version_supported(4)" in used:
        fa4 = data.get("flash_attn", {}).get("4")
        if fa4:
            sources.append(f"{fa4['source']} _is_fa4_supported: FA4 on compute capability "
                           f"{', '.join(fa4['capabilities']) or 'none'} ({fa4['why']})")
    return _finish(req, data, release, platform, gpu, cap, dtype, kv, requested, f, verdicts, auto,
                   auto_conditions, order_source or p.get("source"), error, assume, why, used, model_kv_note,
                   sources, notes, layer_backends, fa_versions, forced)


def _first_valid(order: list, verdicts: dict) -> tuple[str | None, list[str]]:
    """``get_valid_backends`` (``vllm/platforms/cuda.py:375-415`` in 0.32): the first backend of the priority
    order with no reasons; conditions of earlier backends that might win instead."""
    conds = []
    for name in order:
        v = verdicts[name]
        if v.ok is True:
            return name, conds
        if v.missing:
            conds.append(f"{name} comes earlier in vLLM's order but is not modelled "
                         f"({v.reasons[0]}); vLLM picks it instead if it accepts this configuration")
        if v.ok is None:
            conds.append(f"{name} would be chosen if "
                         + " and ".join(f"{c}={val}" for c, val in
                                        next(x.when for x in v.conditions if not x.reasons)))
    return None, conds


def collapse_conditions(conds: list[Condition]) -> list[Condition]:
    """``conds`` (the leaves of one rule's decision tree) with every pair that differs only by one condition's value,
    ``True`` on one and ``False`` on the other, and has the same outcome merged into one leaf without that condition,
    until none is left: each condition still listed changes the outcome somewhere. ``[]`` when one outcome remains
    (the run-time conditions change nothing: ``FLASH_ATTN`` refuses gpt-oss's sinks on an A100 whether or not
    ``_is_fa_version_supported(2)``). Exact repeats are dropped; the order of first appearance is kept."""
    leaves: list[tuple[list[tuple[str, Any]], list[str]]] = []
    for c in conds:
        leaf = (list(c.when), list(c.reasons))
        if leaf not in leaves:
            leaves.append(leaf)
    merged = True
    while merged and len(leaves) > 1:
        merged = False
        for i, (wi, ri) in enumerate(leaves):
            for j in range(i + 1, len(leaves)):
                wj, rj = leaves[j]
                if ri != rj or len(wi) != len(wj):
                    continue
                only_i = [p for p in wi if p not in wj]
                only_j = [p for p in wj if p not in wi]
                if (len(only_i) == len(only_j) == 1 and only_i[0][0] == only_j[0][0]
                        and isinstance(only_i[0][1], bool) and isinstance(only_j[0][1], bool)):
                    leaves[i] = ([p for p in wi if p != only_i[0]], ri)
                    del leaves[j]
                    if leaves[i] in leaves[:i] + leaves[i + 1:]:
                        del leaves[i]
                    merged = True
                    break
            if merged:
                break
    if len({tuple(r) for _, r in leaves}) == 1:
        return []
    return [Condition(when=w, reasons=r) for w, r in leaves]


def _combine(per_hs: dict) -> dict[str, BackendVerdict]:
    """One verdict per backend over every layer head size: it fails if it fails for any."""
    sizes = list(per_hs)
    if len(sizes) == 1:
        return per_hs[sizes[0]][0]
    out = {}
    for name in per_hs[sizes[0]][0]:
        vs = {hs: per_hs[hs][0][name] for hs in sizes if name in per_hs[hs][0]}
        first = vs[sizes[0]]
        oks = [v.ok for v in vs.values()]
        ok = False if False in oks else (None if None in oks else True)
        reasons = []
        for hs, v in vs.items():
            if v.ok is not True:
                reasons += [f"{r} (head size {hs} layers)" for r in v.reasons]
        out[name] = first.model_copy(update={
            "ok": ok, "reasons": list(dict.fromkeys(reasons)),
            "conditions": list({c.model_dump_json(): c for v in vs.values() for c in v.conditions}.values())})
    return out


def _backends_for_head_size(data, platform, f, dtype, kv, req, cap, plat, assume, used, vcfg, requested, hs):
    """Verdicts of every backend for the layers of one head size; ``(verdicts, order, order leaves,
    order source)``."""
    kwargs = {**_selector_kwargs(f, dtype, kv, req.block_size, cap), "head_size": hs}
    order, order_source = priority_order(data, platform, f, kv, cap, assume, used, head_size=hs)
    order_leaves = _leaves(order) if order is not None else []
    main_order = order_leaves[0][1] if order_leaves else []
    listed = list(dict.fromkeys(data["platforms"][platform]["backends"]))
    candidates = list(dict.fromkeys(list(main_order) + sorted(listed)))
    if requested and requested not in candidates:
        candidates.append(requested)
    names = {b["name"]: b for b in data["backends"]}
    verdicts: dict[str, BackendVerdict] = {}
    for name in candidates:
        b = names.get(name)
        if b is None or b.get("class") is None:
            why = (b or {}).get("missing") or "class not found in this release's source"
            verdicts[name] = BackendVerdict(name=name, ok=False, missing=True, reasons=[
                f"backend not modelled: {why} ({data.get('extracted_from')})"])
            continue
        result = _validate(data, b, plat, kwargs, assume, used, vcfg)
        leaves = _leaves(result)
        if not f.use_mla and any("non-MLA not supported" in (r if isinstance(r, list) else [str(r)])
                                 for _, r in leaves):
            # An MLA backend for a model without MLA: vLLM's MLA-specific checks read config fields the
            # model does not have (qk_nope_head_dim, kv_lora_rank, index_topk), so their messages and
            # conditions are meaningless here; "non-MLA not supported" already decides.
            leaves = [([], [r for r in (leaves[0][1] if isinstance(leaves[0][1], list) else [str(leaves[0][1])])
                            if not _MLA_FIELD_REASON.search(r)])]
        conds = [Condition(when=list(p), reasons=list(r) if isinstance(r, list) else [str(r)]) for p, r in leaves]
        oks = {not c.reasons for c in conds}
        ok = oks.pop() if len(oks) == 1 else None
        reasons = conds[0].reasons if ok is False else sorted({r for c in conds for r in c.reasons})
        verdicts[name] = BackendVerdict(
            name=name, ok=ok, reasons=reasons, conditions=collapse_conditions(conds),
            priority=main_order.index(name) if name in main_order else None, source=b.get("source"))
    return verdicts, main_order, order_leaves, order_source


def _finish(req, data, release, platform, gpu, cap, dtype, kv, requested, f, verdicts, auto, auto_conditions,
            auto_source, error, assume, why, used, model_kv_note, sources, notes, layer_backends, fa_versions,
            forced) -> "CompatReport":
    p = data["platforms"][platform]
    not_modelled = None
    if requested:
        v = verdicts[requested]
        ok = v.ok
        if p["kind"] == "direct":
            sel, _ = _direct_selection(data, platform, f, dtype, kv, req.block_size, cap, requested, assume, used)
            chosen = _leaves(sel)[0][1]
            if isinstance(chosen, interp.Raised):
                ok, error = False, f"{chosen.kind}: {chosen.message}"
            elif chosen != requested:
                ok, error = False, f"{platform} ignores --attention-backend {requested} and uses {chosen}"
        else:
            ok, error, not_modelled, more = _explicit_on_priority_platform(data, platform, requested, v, sources)
            auto_conditions = [*auto_conditions, *more, *([not_modelled] if not_modelled else [])]
    else:
        ok = True if auto else (None if auto_conditions else False)
        if error:
            ok = False
        chosen_v = verdicts.get(auto) if auto else None
        if p["kind"] == "direct" and chosen_v is not None and chosen_v.ok is False and not error:
            # The direct selectors (CPU, XPU, ROCm before 0.18) return a backend without running its
            # validate_configuration; its own rules still reject this configuration, as an explicit
            # --attention-backend would (same verdict as the requested branch above).
            ok = False
            error = (f"{platform} selects {auto} without checking it, but {auto} does not support this "
                     f"configuration: {'; '.join(chosen_v.reasons)}")
    # vLLM resolves the model class when it builds the model config, before any attention backend is chosen:
    # an architecture it cannot build stops it first, whatever the backends say (folded in below)
    arch = check_architecture(data, req.hf_config) if req.hf_config else None
    spec = speculative_issues(req.speculative, f, data, req.hf_config, arch)
    if any(not s.ok for s in spec):
        ok = False
    quant = quantization_issue(data, req.hf_config)
    quant_needs = quant_note = None
    if quant is not None:
        # ModelConfig refuses the checkpoint's quantization before any attention backend is chosen
        if error:
            notes = [*notes, f"the attention backend check alone: {error}"]
        ok, error = False, quant
    else:
        mincap = min_capability_issue(data, resolved_quant_method(req.hf_config, req.quant_config, req.quantization),
                                      gpu, platform, (req.quantization or "").lower() or None,
                                      (req.hf_config or {}).get("model_type"))
        if mincap is not None and mincap[0] is False:
            # VllmConfig builds the quantization config (and checks the GPU) before any attention backend is chosen
            if error:
                notes = [*notes, f"the attention backend check alone: {error}"]
            ok, error = False, mincap[1]
            quant, quant_needs = error, mincap[2]
        elif mincap is not None and mincap[0] is None:
            auto_conditions = [*auto_conditions, mincap[1]]
            ok = None if ok is True else ok
        elif mincap is not None:
            notes, quant_note = [*notes, mincap[1]], mincap[1]
    ok, error, notes, auto_conditions, sources = fold_architecture(
        arch, ok, error, notes, auto_conditions, sources, quant, release, "the attention backend check alone")
    # a module flag the rules read that vLLM sets while importing the module (a branch rebinds it): each condition on it
    # is stated with the lines that set it
    sources = [*sources, *(d for t in sorted(x for x in used if isinstance(x, str))
                           if (d := describe_runtime_constant(data, t)) and d not in sources)]
    ordered = sorted(verdicts.values(), key=lambda v: (v.priority is None, v.priority or 0, v.name))
    return CompatReport(
        release=release, platform=platform, gpu=gpu.name, compute_capability=gpu.compute_capability,
        dtype=dtype, kv_cache_dtype=kv, block_size=req.block_size, requested_backend=requested,
        auto_selected=auto, auto_conditions=auto_conditions, auto_source=auto_source,
        ok=ok, error=error, backends=ordered, speculative=spec,
        error_before_speculative=error is not None and (error == quant or (arch is not None and arch.ok is False)),
        assumptions=[f"{t} = {assume[t]} ({why[t]})" for t in sorted(used) if t in why]
        + ([model_kv_note] if model_kv_note else []),
        features=f, sources=sources, notes=notes, layer_backends=layer_backends, flash_attn_versions=fa_versions,
        model_forced_backend=forced, architecture=arch, not_modelled=not_modelled,
        quantization_needs={**quant_needs, "from_flag": resolved_quant_method(req.hf_config, req.quant_config, None)
                            is None} if quant_needs else None, quantization_note=quant_note)


def _explicit_on_priority_platform(data: dict, platform: str, requested: str, v: BackendVerdict,
                                   sources: list[str]) -> tuple[bool | None, str | None, str | None, list[str]]:
    """``(ok, error, not modelled, conditions)`` of an explicit ``--attention-backend`` on CUDA / ROCm; updates ``v``.

    Both platforms validate a selected backend by its class's own ``validate_configuration`` alone, whether or not
    their priority lists name it (``vllm/platforms/cuda.py:428-446``, ``vllm/platforms/rocm.py:731-774``, 0.32.0):
    reasons are vLLM's ``ValueError: Selected backend ... is not valid for this configuration. Reason: [...]``
    (cuda.py:440-444, rocm.py:771-774). What the calculator does not model is said as such, never as that error:

    * a backend whose class the release builds in a way the extractor cannot read (``TRITON_FLASH_ATTN``, made at
      import by ``create_composite_attention_backend``);
    * a backend no selector of this platform lists (``ROCM_ATTN`` or ``CPU_ATTN`` on an NVIDIA GPU, ``FLASHINFER`` on
      ROCm) whose class's rules do not refuse it: vLLM takes it, and whether its kernels are in this platform's build
      is not read from the source. One case is modelled: ``FLASH_ATTN`` on ROCm runs the upstream ``flash-attn``
      package's kernel, which ``fa_utils.py`` imports only if installed (``_ROCM_FLASH_ATTN_AVAILABLE``,
      ``vllm/v1/attention/backends/fa_utils.py:38-62``, read through ``is_flash_attn_varlen_func_available``,
      ``fa_utils.py:348-377`` in 0.32.0; ``flash_attn.py:48`` imports the kernel only then), so the verdict depends on
      that package.
    """
    b = next((x for x in data["backends"] if x["name"] == requested), {})
    rel = data["release"]
    if v.missing:
        why = b.get("missing") or "its class is not in this release's source"
        msg = (f"--attention-backend {requested} is a backend of vLLM {rel}"
               + (f" ({b['registry']})" if b.get("registry") else "")
               + f" that the calculator does not model ({why}): whether vLLM accepts it for this configuration is not "
               "checked here")
        v.reasons, v.fixes, v.conditions, v.ok, v.not_modelled = [f"not modelled: {why}"], [], [], None, True
        return None, None, msg, []
    listed = requested in data["platforms"][platform].get("backends", [])
    if v.ok is False:
        error = f"Selected backend {requested} is not valid for this configuration. Reason: {v.reasons}"
        return False, error, None, []
    if listed:
        return v.ok, None, None, []
    selector = {"cuda": "vllm/platforms/cuda.py:428-446 in 0.32.0",
                "rocm": "vllm/platforms/rocm.py:731-774 in 0.32.0"}[platform]
    where = ", ".join(b.get("platforms") or []) or "no platform's selector"
    fa_q = "vllm.v1.attention.backends.fa_utils.is_flash_attn_varlen_func_available"
    if platform == "rocm" and requested == "FLASH_ATTN" and fa_q in data.get("functions", {}):
        fn = data["functions"][fa_q]
        flag = "_ROCM_FLASH_ATTN_AVAILABLE"
        # The module starts the flag False (fa_utils.py:20 in 0.32.0) and sets it True in its ROCm import block when
        # the upstream package imports (:54): the extractor stores it as a run-time flag, not a constant. Here its
        # rules accepted the configuration without reading it (no sinks): the kernel import is what it decides.
        how = runtime_constant_bindings(data, flag)
        if how is not None and flag in fn["src"] and not v.conditions:
            cond = (f"{flag} (the upstream flash-attn package is installed: {how}; "
                    f"is_flash_attn_varlen_func_available, {fn['file']}:{fn['line']}, returns it, and flash_attn.py "
                    "imports the FlashAttention kernel only then)")
            v.ok, v.conditions = None, [
                Condition(when=[(flag, True)], reasons=[]),
                Condition(when=[(flag, False)], reasons=[
                    "ROCm platform requires upstream flash-attn to be installed (no FlashAttention kernel: the "
                    "first attention call fails)"])]
            v.reasons = list(v.conditions[1].reasons)
            sources.append(f"{selector}: an explicit --attention-backend is validated by its class "
                           f"alone; FLASH_ATTN is not in ROCm's priority list ({data['platforms'][platform]['source']})"
                           " but its rules accept this configuration")
            return None, None, None, [cond]
    msg = (f"--attention-backend {requested}: vLLM {rel} validates an explicit backend by its class's own rules "
           f"({selector}), which accept this configuration, but no {platform} selector lists {requested} (listed for: "
           f"{where}); whether its kernels are built for and run on {platform} is not modelled here")
    v.ok, v.reasons, v.conditions, v.fixes, v.not_modelled = \
        None, [f"not modelled: not a {platform} backend (listed for: {where})"], [], [], True
    return None, None, msg, []



def verdict_for(hf_config: dict, gpu: str, *, dtype: str = "auto", kv_cache_dtype: str = "auto",
                block_size: int | None = None, attention_backend: str | None = None,
                speculative_config: dict | None = None, vllm_version: str | None = None,
                quant_config: dict | None = None, quantization: str | None = None) -> CompatReport:
    """One call for the calculator's results page: HF config dict + the form's choices -> report.

    ``speculative_config``: ``{"method", "model", "num_speculative_tokens", "draft_config"}`` (all
    optional). ``quant_config``: a separate quantization file (ModelOpt's ``hf_quant_config.json``);
    ``quantization``: ``--quantization`` (both decide the method vLLM checks against the GPU). Render with
    ``{% include "compat/_verdict.html" with verdict=report %}``.

    Raises:
        CompatInputError: bad GPU / release / backend / dtype (``.field``, ``.message``).
    """
    spec = SpeculativeConfig(**speculative_config) if speculative_config else None
    return check(CheckRequest(features=features_from_hf_config(hf_config), hf_config=hf_config, gpu=gpu,
                              dtype=dtype or "auto",
                              kv_cache_dtype=kv_cache_dtype or "auto", block_size=block_size,
                              attention_backend=attention_backend, speculative=spec,
                              vllm_version=vllm_version or DEFAULT_RELEASE, quant_config=quant_config,
                              quantization=quantization))
