"""One request model: what a user asks the calculator, parsed once for every surface.

``ServingRequest`` is the single description of a configuration (model + revision, runtime and its
release, GPU and parallel layout, context, concurrency, dtypes, quantization, backend, speculative
decoding, speed workload). The page's form, the JSON API, the three commands (``estimate``,
``check_compat``, ``validate``) and the validator all build it with :func:`parse_request` from raw
strings, so they accept and refuse the same values with the same sentence, and errors are one type,
:class:`InputError` (``field`` + ``message``; a 400 on the web, exit code 2 on the command line).

Choices come from data: GPUs from the catalog (``calculator/data/gpus.json``), releases and attention
backends from the compatibility data extracted from each release (``compat/data``), quantization methods
from vLLM's own list. Field names are the runtime's flags in snake_case (vLLM's ``--max-model-len`` is
``max_model_len``); ``None`` means "the release's default", which the runtime resolves and reports with
its source.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import get_gpu
from calculator.engine.schemas import DType, KVCacheDType, MtpNameMixin, SpecMethod
from calculator.engine.weights import VLLM_QUANTIZATION_METHODS

# One input error type for every surface (the engine's, which names the field).
InputError = EngineInputError


#: What a context of 0 means to the runtimes that take it (:meth:`ServingRequest._context_floor`).
CTX_ZERO = {"llama.cpp": "the model's trained context, as llama.cpp's -c 0",
            "ollama": "Ollama's automatic default, as OLLAMA_CONTEXT_LENGTH=0"}
#: A request parameter each runtime names by its own flag when refusing it: llama.cpp's -c / --ctx-size, which
#: Ollama's context (OLLAMA_CONTEXT_LENGTH, num_ctx) is set by here as well.
RUNTIME_PARAM_NAMES = {"llama.cpp": {"max_model_len": "ctx_size"}, "ollama": {"max_model_len": "ctx_size"}}


def runtime_named(exc: EngineInputError, runtime: Any) -> EngineInputError:
    """``exc`` naming the ``runtime``'s own parameter where it has one (:data:`RUNTIME_PARAM_NAMES`:
    ``max_model_len`` -> ``ctx_size`` for llama.cpp and Ollama; ``max_model_len.x`` -> ``ctx_size.x``); the same
    exception, its field renamed in place (the command line prints it as ``--ctx-size``, the API's ``field`` is
    ``ctx_size``). ``runtime``: the request's runtime or the raw text given (anything else leaves it as it is)."""
    names = RUNTIME_PARAM_NAMES.get(str(runtime or "").strip(), {})
    head, dot, rest = exc.field.partition(".")
    if head in names:
        exc.field = names[head] + dot + rest
        exc.args = (f"{exc.field}: {exc.message}",)
    return exc


class WordedPerSurface(InputError):
    """An :class:`InputError` whose sentence names other settings, worded for each surface: ``message`` names them
    as the page and the API spell their parameters (``speculative_config``), ``cli_message`` as the command line
    spells its flags (``--speculative-config '...'``); :func:`calculator.cli.command_error` prints the latter."""

    def __init__(self, field: str, message: str, cli_message: str):
        super().__init__(field, message)
        self.cli_message = cli_message

RuntimeName = Literal["vllm", "sglang", "llama.cpp", "ollama"]

DEFAULT_GPU = "H100"
# Hub repo ids: "org/name" (huggingface_hub's validate_repo_id rules; also keeps a leading "-" out of argv).
HUB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
REVISION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,127}")
MAX_TOKENS = 2**24  # 16M tokens: above every published context length (Llama 4 Scout: 10M)
MAX_GPUS_PER_DIM = 256
# GPUs in one machine when the user does not say: an HGX / DGX node (8 GPUs on NVLink/NVSwitch).
DEFAULT_GPUS_PER_NODE = 8
MAX_STRING = 200
# Drafted tokens per step a request may ask for (speculative_config's num_speculative_tokens). With runtime=sglang the
# same number is SGLang's --speculative-num-steps (the draft depth; runtimes/sglang/runtime.py _spec), so the bound
# is the same for both runtimes; an SGLang tree's size is --speculative-num-draft-tokens (up to 256 here). The
# engine's SpeculativeConfig takes up to 64 because engine-level callers (benchmarks/spec_cases.py) pass a tree's
# draft tokens there with the tree's steps beside it.
MAX_SPECULATIVE_TOKENS = 16


# --- data-derived choices -------------------------------------------------------------------------
# The release answered when none is asked: the one this product checks end to end (the validation worker
# and the cross-check run vLLM 0.32.0's CPU build), not merely the newest covered.
DEFAULT_RELEASE = "0.32.0"


@lru_cache(maxsize=1)
def covered_releases() -> tuple[str, ...]:
    """The vLLM releases the page offers, oldest first: those with compatibility data extracted from the
    release's own wheel (:func:`compat.releases.covered_releases`, the latest patch of each minor). The API and
    the commands take any release the memory rules cover (:func:`release_supported`)."""
    from compat.releases import covered_releases as compat_releases

    from calculator.engine.runtime import supports_release

    return tuple(r for r in compat_releases("vllm") if supports_release(r))


def release_supported(text: str) -> bool:
    """Whether the memory rules cover this vLLM release (0.9.1 to 0.34.x, :mod:`calculator.engine.runtime`)."""
    from calculator.engine.runtime import supports_release

    return bool(re.fullmatch(r"\d+\.\d+\.\d+(\.\d+)?", text or "")) and supports_release(text)


def compat_release(release: str) -> str | None:
    """The compatibility data answering ``release``: its own extraction, else the extracted patch of the same
    minor (backends and their rules change between minors, not patches: 0.9.2's data answers 0.9.1); ``None`` when
    the minor has none."""
    covered = covered_releases()
    if release in covered:
        return release
    minor = release.split(".")[:2]
    same = [r for r in covered if r.split(".")[:2] == minor]
    return same[-1] if same else None


def default_release() -> str:
    """:data:`DEFAULT_RELEASE` when covered, else the newest covered release."""
    covered = covered_releases()
    return DEFAULT_RELEASE if DEFAULT_RELEASE in covered else covered[-1]


@lru_cache(maxsize=64)
def attention_backends(release: str) -> tuple[str, ...]:
    """``--attention-backend`` values of a release (its ``AttentionBackendEnum``, from the compat data of
    :func:`compat_release`); empty when no data answers it."""
    from compat.releases import attention_backends as compat_backends

    data = compat_release(release)
    return compat_backends(data, "vllm") if data else ()


def _no_backend_flag(release: str) -> str:
    """Why ``attention_backend`` is refused for a release that takes none: 0.9 / 0.10 have no
    ``--attention-backend`` (only the ``VLLM_ATTENTION_BACKEND`` environment variable), or no data answers it."""
    from compat import extract

    data = compat_release(release)
    sel = (extract.load(data).get("selection") or {}) if data else {}
    if sel:
        return (f"vLLM {release} has no --attention-backend: it picks the backend itself, or takes one from the "
                f"{sel['env']} environment variable ({sel['env_source']} of vLLM {data}), which the calculator does "
                "not set; leave attention_backend to vLLM")
    return f"no compatibility data answers vLLM {release}: leave attention_backend to vLLM"


def _release_error(value: str, field: str = "vllm_version") -> InputError:
    """The refusal of a vLLM release the memory rules do not cover, on ``field`` (``vllm_version``, or
    ``compare_vllm_version`` with the same sentence)."""
    from calculator.engine.runtime import ReleaseRules

    oldest, newest = ReleaseRules.covered_releases
    return InputError(field, f"vLLM {value} is not covered: this calculator answers vLLM {oldest} to {newest} "
                      "(each with the rules read from that release's source)")


# --- the request -----------------------------------------------------------------------------------
def _meta(flag: str, help: str, group: str = "serving", **extra: Any) -> dict[str, Any]:
    return {"flag": flag, "help": help, "group": group, **extra}


class SpeculativeRequest(MtpNameMixin, BaseModel):
    """``--speculative-config`` as a user may give it: an allow-list of vLLM's keys, nothing else. vLLM's
    per-architecture MTP names (``qwen3_next_mtp``...) are taken and run as ``mtp``, the name kept for the command
    (:class:`calculator.engine.schemas.MtpNameMixin`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: SpecMethod
    vllm_method: str | None = Field(None, exclude=True, repr=False)
    model: str | None = Field(None, max_length=MAX_STRING)
    num_speculative_tokens: int = Field(ge=1, le=MAX_SPECULATIVE_TOKENS)
    prompt_lookup_max: int | None = Field(None, ge=1, le=64)
    prompt_lookup_min: int | None = Field(None, ge=1, le=64)

    @field_validator("model")
    @classmethod
    def _hub_id(cls, v: str | None) -> str | None:
        if v is not None and not HUB_ID_RE.fullmatch(v):
            raise ValueError("the draft model is a Hugging Face id of the form org/name")
        return v

    @model_validator(mode="after")
    def _needs(self) -> SpeculativeRequest:
        if self.method == "draft_model" and not self.model:
            raise ValueError("method draft_model needs \"model\": the draft's Hugging Face id")
        if self.method not in ("draft_model", "eagle", "eagle3") and self.model:
            raise ValueError(f"method {self.method} takes no draft \"model\"")
        if self.method not in ("ngram",) and (self.prompt_lookup_max or self.prompt_lookup_min):
            raise ValueError("prompt_lookup_max/min are ngram settings")
        return self


#: RoPE scaling types (``rope_type``, or the older ``type``) whose context rule the calculator models: vLLM's
#: (vllm/config/model.py ``_get_and_verify_max_len``, :2595-2605 in 0.32.0) and SGLang's (``get_context_length``,
#: sglang/srt/utils/hf_transformers/common.py:677-690 in 0.5.23) read only the type, ``factor`` and
#: ``original_max_position_embeddings``; "su" is vLLM's old name of longrope.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "su", "llama3")


class RopeScalingOverride(BaseModel):
    """``rope_scaling`` (transformers 5: ``rope_parameters``) as an override gives it. The keys the context rules
    read are checked; the other keys RoPE takes (YaRN's ``beta_fast`` / ``beta_slow`` / ``mscale``, llama3's
    frequency factors, ``rope_theta``) are carried as numbers; anything else is refused, so a misspelt ``factor``
    is not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    rope_type: Literal[ROPE_TYPES] = Field(alias="type")  # type: ignore[valid-type]
    factor: float | None = Field(None, gt=0, le=1024)
    original_max_position_embeddings: int | None = Field(None, ge=1, le=MAX_TOKENS)
    rope_theta: float | None = Field(None, gt=0)
    beta_fast: float | None = None
    beta_slow: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    partial_rotary_factor: float | None = Field(None, gt=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _type_key(cls, data: Any) -> Any:
        """``type`` (transformers 4's older key) and ``rope_type`` are one key: both given must agree."""
        if isinstance(data, dict) and "type" in data and "rope_type" in data:
            if data["type"] != data["rope_type"]:
                raise ValueError(f"type {data['type']!r} and rope_type {data['rope_type']!r} disagree; give rope_type")
            data = {k: v for k, v in data.items() if k != "type"}
        return data

    @model_validator(mode="after")
    def _needs(self) -> RopeScalingOverride:
        if self.rope_type not in ("default",) and self.factor is None:
            raise ValueError(f"rope_type {self.rope_type} needs \"factor\"")
        if self.rope_type == "yarn" and self.original_max_position_embeddings is None:
            # vLLM before 0.30 derives the context from it (vllm/config/model.py:2458 in 0.29.0:
            # rp["original_max_position_embeddings"], a KeyError without it)
            raise ValueError("rope_type yarn needs \"original_max_position_embeddings\" (the context the model was "
                             "trained at, e.g. 32768 for Qwen3)")
        return self


#: the keys of ``--hf-overrides`` the calculator applies (:func:`calculator.plan.apply_hf_overrides`)
HF_OVERRIDE_KEYS = ("rope_scaling", "rope_parameters", "max_position_embeddings")


class HfOverrides(BaseModel):
    """vLLM's ``--hf-overrides`` (SGLang: ``--json-model-override-args``): keys set on the model's config on load.
    Only the context keys are modelled, RoPE scaling and ``max_position_embeddings`` (a YaRN context extension
    such as Qwen3's 131,072 tokens); any other key is refused as not modelled, never ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rope_scaling: RopeScalingOverride | None = None
    rope_parameters: RopeScalingOverride | None = None
    max_position_embeddings: int | None = Field(None, ge=1, le=MAX_TOKENS)

    @model_validator(mode="before")
    @classmethod
    def _known(cls, data: Any) -> Any:
        if isinstance(data, dict):
            other = [k for k in data if k not in HF_OVERRIDE_KEYS]
            if other:
                near = nearest_choice(other[0], list(HF_OVERRIDE_KEYS))
                raise ValueError(f"{other[0]!r} is not modelled here" + (f" (did you mean {near!r}?)" if near else "")
                                 + f": the calculator applies {', '.join(HF_OVERRIDE_KEYS)} (a RoPE-scaled context); "
                                 "plan without the other keys")
            if data.get("rope_scaling") is not None and data.get("rope_parameters") is not None:
                raise ValueError("rope_scaling and rope_parameters are one setting (transformers 5 renamed it); give one")
            if not any(data.get(k) is not None for k in HF_OVERRIDE_KEYS):
                raise ValueError("no key to apply: give rope_scaling and / or max_position_embeddings")
        return data

    def as_config(self) -> dict[str, Any]:
        """The overrides as config.json keys (``rope_scaling`` under the name it was given)."""
        return self.model_dump(exclude_none=True, by_alias=False)


class ServingRequest(BaseModel):
    """What a user asks. Every field is a runtime flag (snake_case) or a workload setting; ``None`` is the
    release's default. Bounds follow real hardware and models, so every computation it drives is bounded.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(max_length=MAX_STRING, json_schema_extra=_meta(
        "--model", "Hugging Face model id (org/name)", "model", aliases=("model_path",)))
    revision: str | None = Field(None, max_length=128, json_schema_extra=_meta(
        "--revision", "branch, tag or commit sha (default: main)", "model"))
    runtime: RuntimeName = Field("vllm", json_schema_extra=_meta("--runtime", "serving runtime", "model"))
    gpu: str = Field(DEFAULT_GPU, max_length=MAX_STRING, json_schema_extra=_meta(
        "--gpu", "device as nvidia-smi names it (NVIDIA H100 80GB HBM3) or an alias (H100)", "hardware"))
    gpu_memory_gib: float | None = Field(None, gt=0, le=4096, json_schema_extra=_meta(
        "--gpu-memory-gib", "memory the driver reports, when it differs from the catalog (vGPU, MIG)", "hardware"))
    pp_layer_partition: str | None = Field(None, max_length=400, pattern=r"^\d{1,4}(,\d{1,4}){0,63}$",
                                           json_schema_extra=_meta(
        "--pp-layer-partition", "vLLM: layers per pipeline stage, as VLLM_PP_LAYER_PARTITION (e.g. 17,15)", "hardware"))
    gpu_memory_in_use_gib: float | None = Field(None, ge=0, le=4096, json_schema_extra=_meta(
        "--gpu-memory-in-use-gib", "vLLM: memory already taken on each GPU at start (other processes, a second "
        "instance)", "hardware"))
    tensor_parallel_size: int = Field(1, ge=1, le=MAX_GPUS_PER_DIM, json_schema_extra=_meta(
        "--tensor-parallel-size", "GPUs per tensor-parallel group (SGLang: --tp-size)", "hardware", short="-tp",
        alias="tp_size"))
    data_parallel_size: int = Field(1, ge=1, le=MAX_GPUS_PER_DIM, json_schema_extra=_meta(
        "--data-parallel-size", "vLLM: data-parallel replicas (MoE layers span tp x dp ranks)", "hardware",
        short="-dp"))
    enable_expert_parallel: bool = Field(False, json_schema_extra=_meta(
        "--enable-expert-parallel", "vLLM: whole experts split over the tp x dp ranks", "hardware"))
    pipeline_parallel_size: int = Field(1, ge=1, le=64, json_schema_extra=_meta(
        "--pipeline-parallel-size", "pipeline stages (SGLang: --pp-size)", "hardware", short="-pp",
        alias="pp_size"))
    gpus_per_node: int = Field(DEFAULT_GPUS_PER_NODE, ge=1, le=64, json_schema_extra=_meta(
        "--gpus-per-node", "GPUs in one machine (default 8, an HGX/DGX node): suggestions keep tensor parallel "
        "inside a node and add nodes for pipeline stages; the page shows the layout in nodes", "hardware"))
    # 0 only for llama.cpp / Ollama (-c 0 = the model's trained context; OLLAMA_CONTEXT_LENGTH=0 = automatic):
    # vLLM and SGLang take 1 and up (_context_floor)
    max_model_len: int | None = Field(None, ge=0, le=MAX_TOKENS, json_schema_extra=_meta(
        "--max-model-len", "context length in tokens (32k = 32,000; 32K = 32,768; SGLang: --context-length; "
        "llama.cpp: --ctx-size, -c, 0 = the model's trained context; Ollama: OLLAMA_CONTEXT_LENGTH, 0 = its "
        "default)", tokens=True, alias="context_length", aliases=("ctx_size",), short="-c"))
    hf_overrides: HfOverrides | None = Field(None, json_schema_extra=_meta(
        "--hf-overrides", 'JSON set on config.json on load (SGLang: --json-model-override-args); modelled: '
        'rope_scaling and max_position_embeddings, e.g. {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, '
        '"original_max_position_embeddings": 32768}, "max_position_embeddings": 131072}', "advanced",
        aliases=("json_model_override_args",)))
    allow_long_max_model_len: bool = Field(False, json_schema_extra=_meta(
        "--allow-long-max-model-len", "a --max-model-len above the model's maximum starts anyway, as "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (SGLang: SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1); with RoPE, positions "
        "beyond the maximum give NaN", "advanced"))
    concurrency: int | None = Field(None, ge=1, le=65536, json_schema_extra=_meta(
        "--concurrency", "expected concurrent requests (speed: requests in flight)", "workload"))
    num_prompts: int | None = Field(None, ge=1, le=100000, json_schema_extra=_meta(
        "--num-prompts", "speed: requests of a vllm bench serve run; without --concurrency (its --max-concurrency) "
        "they all arrive at once (--request-rate inf) and queue", "workload"))
    request_rate: float | None = Field(None, gt=0, le=1_000_000, json_schema_extra=_meta(
        "--request-rate", "speed: requests per second arriving as a Poisson process (vllm bench serve --request-rate "
        "R) over --num-prompts prompts (default 1000); --concurrency is then its --max-concurrency", "workload"))
    random_range_ratio: float | None = Field(None, ge=0, lt=1, json_schema_extra=_meta(
        "--random-range-ratio", "speed: vllm bench serve's length spread, lengths drawn from [L(1-r), L(1+r)]: 0 (its "
        "default) = every request exactly --prompt-len / --output-len, so a closed loop's requests finish together and "
        "return in waves; above 0 or unset: TTFT blends that wave with the steady figure by a share fitted on public "
        "runs with spread lengths", "workload"))
    prompt_len: int | None = Field(None, ge=1, le=MAX_TOKENS, json_schema_extra=_meta(
        "--prompt-len", "prompt tokens per request (speed; default 1024)", "workload", tokens=True))
    output_len: int | None = Field(None, ge=1, le=MAX_TOKENS, json_schema_extra=_meta(
        "--output-len", "output tokens per request (speed; default 128)", "workload", tokens=True))
    dtype: DType = Field("auto", json_schema_extra=_meta("--dtype", "model dtype"))
    quantization: str | None = Field(None, max_length=40, json_schema_extra=_meta(
        "--quantization", "runtime quantization (fp8); a quantized checkpoint's own is read from it", short="-q"))
    kv_cache_dtype: KVCacheDType = Field("auto", json_schema_extra=_meta("--kv-cache-dtype", "KV cache dtype"))
    attention_backend: str | None = Field(None, max_length=40, json_schema_extra=_meta(
        "--attention-backend", "attention backend (default: the one vLLM picks)"))
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, json_schema_extra=_meta(
        "--gpu-memory-utilization", "share of GPU memory vLLM may use (default: the release's)"))
    vllm_version: str | None = Field(None, max_length=32, json_schema_extra=_meta(
        "--vllm-version", "vLLM release (default: 0.32.0, the release checked end to end)", "model"))
    # not a serving flag: the same request answered for a second release, and what differs
    # (calculator.release_comparison); only ``manage.py estimate`` takes the flag (add_request_arguments' exclude)
    compare_vllm_version: str | None = Field(None, max_length=32, json_schema_extra=_meta(
        "--compare-vllm-version", "vLLM release to compare with: the same request answered for it too, and what "
        "differs listed with where each difference comes from (vLLM only)", "model"))
    speculative_config: SpeculativeRequest | None = Field(None, json_schema_extra=_meta(
        "--speculative-config", 'JSON, e.g. {"method": "ngram", "num_speculative_tokens": 3}', "speculative"))
    acceptance_rate: float | None = Field(None, ge=0, le=1, json_schema_extra=_meta(
        "--acceptance-rate", "speculative decoding: accepted / drafted tokens, as vLLM logs it (speed only)",
        "speculative"))
    acceptance_length: float | None = Field(None, ge=1, le=17, json_schema_extra=_meta(
        "--acceptance-length", "speculative decoding: mean tokens per verification step, 1 + accepted per draft "
        "(speed only)", "speculative"))
    workload: str | None = Field(None, max_length=40, json_schema_extra=_meta(
        "--workload", "kind of traffic (chat, code, reasoning, creative, summarization, random, repetitive): picks "
        "the typical acceptance figure (speed only)", "workload"))
    temperature: float | None = Field(None, ge=0, le=2, json_schema_extra=_meta(
        "--temperature", "sampling temperature of the traffic (speed only)", "workload"))
    # -- SGLang's own settings (runtime=sglang), with SGLang's flag names -----------------------------
    sglang_version: str | None = Field(None, max_length=32, json_schema_extra=_meta(
        "--sglang-version", "SGLang release (default: 0.5.23, the newest covered)", "sglang"))
    mem_fraction_static: float | None = Field(None, gt=0, lt=1, json_schema_extra=_meta(
        "--mem-fraction-static", "SGLang: share of memory for weights + KV cache (default: SGLang's rule)", "sglang"))
    chunked_prefill_size: int | None = Field(None, ge=1, le=2**20, json_schema_extra=_meta(
        "--chunked-prefill-size", "SGLang: tokens per prefill chunk", "sglang"))
    # 0.5.23 names it --cuda-graph-max-bs-decode (sglang==0.5.23 sglang/srt/arg_groups/fields/exec_.py:629)
    cuda_graph_max_bs: int | None = Field(None, ge=1, le=4096, json_schema_extra=_meta(
        "--cuda-graph-max-bs", "SGLang: largest (decode) CUDA-graph batch", "sglang",
        aliases=("cuda_graph_max_bs_decode",)))
    page_size: int | None = Field(None, ge=1, le=1024, json_schema_extra=_meta(
        "--page-size", "SGLang: KV pool page size in tokens", "sglang"))
    dp_size: int = Field(1, ge=1, le=MAX_GPUS_PER_DIM, json_schema_extra=_meta(
        "--dp-size", "SGLang: data-parallel replicas", "sglang"))
    ep_size: int = Field(1, ge=1, le=MAX_GPUS_PER_DIM, json_schema_extra=_meta(
        "--ep-size", "SGLang: expert-parallel size (1 or tp_size)", "sglang"))
    enable_dp_attention: bool = Field(False, json_schema_extra=_meta(
        "--enable-dp-attention", "SGLang: data-parallel attention", "sglang"))
    trust_remote_code: bool = Field(False, json_schema_extra=_meta(
        "--trust-remote-code", "SGLang: load the repository's own config class (a release whose transformers does not "
        "know the model type needs it)", "sglang"))
    speculative_eagle_topk: int | None = Field(None, ge=1, le=16, json_schema_extra=_meta(
        "--speculative-eagle-topk", "SGLang: draft tree branching (1 = a chain); the tree's depth is "
        "speculative_config's num_speculative_tokens (--speculative-num-steps)", "sglang"))
    speculative_num_draft_tokens: int | None = Field(None, ge=2, le=256, json_schema_extra=_meta(
        "--speculative-num-draft-tokens", "SGLang: tokens of the draft tree the target verifies per step (the "
        "root included; num_steps + 1 for a chain)", "sglang"))
    # -- llama.cpp / Ollama settings (runtime=llama.cpp or ollama), with llama.cpp's flag names ----------
    llamacpp_backend: Literal["cuda", "rocm", "vulkan", "metal", "cpu", "sycl"] | None = Field(
        None, json_schema_extra=_meta(
            "--llamacpp-backend", "llama.cpp: the build's GPU backend (cuda, rocm, vulkan, metal, cpu; sycl is not "
            "modelled); default by vendor: NVIDIA cuda, AMD rocm, Intel vulkan, Apple metal", "llama.cpp"))
    gguf_file: str | None = Field(None, max_length=200, json_schema_extra=_meta(
        "--gguf-file", "llama.cpp: the .gguf file in the model's repo (weights exact per file)", "llama.cpp"))
    llamacpp_release: str | None = Field(None, max_length=80, json_schema_extra=_meta(
        "--llamacpp-release", "llama.cpp rules (default: the llama.cpp vendored in llama-cpp-python 0.3.36)",
        "llama.cpp"))
    ollama_release: str | None = Field(None, max_length=20, json_schema_extra=_meta(
        "--ollama-release", "Ollama: its release (0.19.0 .. 0.24.0, 0.30.0 .. 0.33.x; default 0.32.15), which decides "
        "the engine: its own Go engine for some architectures before 0.30, llama-server since", "llama.cpp"))
    parallel: int | None = Field(None, ge=1, le=256, json_schema_extra=_meta(
        "--parallel", "llama.cpp: sequences (slots), -np; Ollama: OLLAMA_NUM_PARALLEL", "llama.cpp", short="-np"))
    cache_type_k: str | None = Field(None, max_length=10, json_schema_extra=_meta(
        "--cache-type-k", "llama.cpp: K cache type (f16, bf16, q8_0, q4_0 ...), -ctk", "llama.cpp", short="-ctk"))
    cache_type_v: str | None = Field(None, max_length=10, json_schema_extra=_meta(
        "--cache-type-v", "llama.cpp: V cache type (quantized V needs flash attention), -ctv", "llama.cpp",
        short="-ctv"))
    flash_attn: Literal["auto", "on", "off"] | None = Field(None, json_schema_extra=_meta(
        "--flash-attn", "llama.cpp: flash attention, -fa (default auto)", "llama.cpp", short="-fa"))
    n_gpu_layers: int | None = Field(None, ge=-1, le=10000, json_schema_extra=_meta(
        "--n-gpu-layers", "llama.cpp: layers offloaded to the GPU, -ngl (-1: all)", "llama.cpp", short="-ngl"))
    fit: Literal["on", "off"] | None = Field(None, json_schema_extra=_meta(
        "--fit", "llama.cpp: llama-server's --fit, which moves layers (MoE: experts first) to the CPU when -ngl and "
        "-ts are not given and a GPU would keep less than --fit-target free (default on)", "llama.cpp"))
    fit_target: int | None = Field(None, ge=0, le=1048576, json_schema_extra=_meta(
        "--fit-target", "llama.cpp: MiB --fit leaves free on each GPU, -fitt (default 1024)", "llama.cpp"))
    gguf_file_draft: str | None = Field(None, max_length=200, json_schema_extra=_meta(
        "--gguf-file-draft", "llama.cpp: the .gguf file in the draft model's repo (speculative_config's model), "
        "given to llama-server as -md", "llama.cpp"))
    n_gpu_layers_draft: int | None = Field(None, ge=-1, le=10000, json_schema_extra=_meta(
        "--n-gpu-layers-draft", "llama.cpp: draft model layers offloaded to the GPU, -ngld (default: all)",
        "llama.cpp", short="-ngld"))
    gpus: int = Field(1, ge=1, le=16, json_schema_extra=_meta(
        "--gpus", "llama.cpp: identical GPUs llama.cpp uses (it takes every visible one; the command pins them with "
        "--device CUDA0,CUDA1,...); layers are split over them by --split-mode", "llama.cpp"))
    split_mode: Literal["none", "layer", "row", "tensor"] | None = Field(None, json_schema_extra=_meta(
        "--split-mode", "llama.cpp: how layers go over several GPUs, -sm (layer: default; none: only --main-gpu; "
        "row, tensor: not modelled)", "llama.cpp", short="-sm"))
    tensor_split: str | None = Field(None, max_length=120, pattern=r"^\d{1,6}(\.\d{1,6})?(,\d{1,6}(\.\d{1,6})?){0,15}$",
                                     json_schema_extra=_meta(
        "--tensor-split", "llama.cpp: share of the layers per GPU, -ts (e.g. 3,1; default: each GPU's free memory, "
        "equal for identical GPUs)", "llama.cpp", short="-ts"))
    main_gpu: int | None = Field(None, ge=0, le=15, json_schema_extra=_meta(
        "--main-gpu", "llama.cpp: the GPU used with --split-mode none, -mg (default 0)", "llama.cpp", short="-mg"))
    kv_unified: bool = Field(False, json_schema_extra=_meta(
        "--kv-unified", "llama.cpp: one KV cache shared by all sequences, -kvu", "llama.cpp"))
    swa_full: bool = Field(False, json_schema_extra=_meta(
        "--swa-full", "llama.cpp: full-size cache for sliding-window layers", "llama.cpp"))
    block_size: int | None = Field(None, ge=1, le=4096, json_schema_extra=_meta(
        "--block-size", "KV cache block size in tokens", "advanced"))
    max_num_batched_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS, json_schema_extra=_meta(
        "--max-num-batched-tokens", "tokens per scheduler step", "advanced", tokens=True))
    max_num_seqs: int | None = Field(None, ge=1, le=65536, json_schema_extra=_meta(
        "--max-num-seqs", "sequences per scheduler step (SGLang: --max-running-requests)", "advanced",
        alias="max_running_requests"))
    enforce_eager: bool = Field(False, json_schema_extra=_meta("--enforce-eager", "no CUDA graphs", "advanced"))
    kv_cache_memory_bytes: int | None = Field(None, ge=0, le=2**50, json_schema_extra=_meta(
        "--kv-cache-memory-bytes", "fixed KV cache size in bytes (skips the budget rule)", "advanced"))

    # -- field checks that read data ----------------------------------------------------------------
    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        v = v.strip()
        if not HUB_ID_RE.fullmatch(v):
            from calculator.metadata.catalog import did_you_mean

            hint = did_you_mean(v) if len(v) <= 200 else ""  # "Llama-3.1-8B-Instruct" without its organisation
            raise ValueError("enter a Hugging Face model id of the form org/name" + (f"; {hint}" if hint else ""))
        return v

    @field_validator("revision")
    @classmethod
    def _revision(cls, v: str | None) -> str | None:
        if v is not None and not REVISION_RE.fullmatch(v):
            raise ValueError("a revision is a branch, tag or commit sha (letters, digits, . _ / -)")
        return v

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, v: str) -> str:
        gpu = get_gpu(v)  # raises InputError("gpu", ...) naming close matches
        return gpu_key(gpu)

    @field_validator("quantization")
    @classmethod
    def _quantization(cls, v: str | None) -> str | None:
        if v is not None and v not in VLLM_QUANTIZATION_METHODS:
            raise ValueError(f"unknown quantization method {v!r}; vLLM's are {', '.join(VLLM_QUANTIZATION_METHODS)}")
        return v

    @field_validator("workload")
    @classmethod
    def _workload(cls, v: str | None) -> str | None:
        from calculator.engine.acceptance import normalize_workload

        return normalize_workload(v)  # raises InputError("workload", ...) listing the classes

    @field_validator("block_size")
    @classmethod
    def _block(cls, v: int | None) -> int | None:
        if v is not None and v % 16 and v not in (1, 8):
            raise ValueError(f"vLLM block sizes are 1, 8 or multiples of 16, got {v}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _sglang_steps(cls, data: Any) -> Any:
        """With runtime=sglang, num_speculative_tokens is SGLang's --speculative-num-steps: a larger value than
        :data:`MAX_SPECULATIVE_TOKENS` is most likely a tree's --speculative-num-draft-tokens, so the refusal says
        which of SGLang's three flags takes what (their help texts, sglang/srt/server_args.py:4788-4805 in
        0.5.10.post1; a chain's draft tokens are reset to num_steps + 1, :3074-3081)."""
        if not isinstance(data, dict) or str(data.get("runtime") or "").strip().lower() != "sglang":
            return data
        spec = data.get("speculative_config")
        k = spec.get("num_speculative_tokens") if isinstance(spec, dict) else getattr(spec, "num_speculative_tokens",
                                                                                     None)
        if isinstance(k, int) and not isinstance(k, bool) and k > MAX_SPECULATIVE_TOKENS:
            raise InputError("speculative_config", (
                f"num_speculative_tokens: must be at most {MAX_SPECULATIVE_TOKENS}, got {k}. With runtime=sglang it is "
                "SGLang's --speculative-num-steps (draft passes per step, the depth of the draft tree); the tree's "
                "width is --speculative-eagle-topk and the tokens the target verifies per step are "
                "--speculative-num-draft-tokens (the root included, up to 256 here). If "
                f"{k} is the tree's draft tokens, give num_speculative_tokens = the steps and --speculative-num-draft-"
                f"tokens {k} with --speculative-eagle-topk; e.g. SGLang's --speculative-num-steps 5 "
                "--speculative-eagle-topk 8 --speculative-num-draft-tokens 64 is {\"num_speculative_tokens\": 5} with "
                "--speculative-eagle-topk 8 --speculative-num-draft-tokens 64"))
        return data

    @model_validator(mode="before")
    @classmethod
    def _context_floor(cls, data: Any) -> Any:
        """The smallest context each runtime takes: llama.cpp's ``-c 0`` is the model's trained context
        (common/arg.cpp:1639-1646 "0 = loaded from model", src/llama-context.cpp:133) and Ollama's
        ``OLLAMA_CONTEXT_LENGTH=0`` its automatic default (envconfig/config.go:230, server/routes.go:131-132 at
        v0.32.15), so both take 0 and up; vLLM and SGLang 1 and up. (The field is renamed to the runtime's own
        parameter, ``ctx_size``, by :func:`runtime_named`.)"""
        if not isinstance(data, dict):
            return data
        v = data.get("max_model_len")
        if not isinstance(v, int) or isinstance(v, bool):
            return data
        if str(data.get("runtime") or "vllm").strip() in ("llama.cpp", "ollama"):
            if v < 0:
                raise InputError("max_model_len", f"must be at least 0 (0: {CTX_ZERO[data['runtime'].strip()]}), "
                                 f"got {v}")
        elif v < 1:
            raise InputError("max_model_len", f"must be at least 1, got {v}")
        return data

    @model_validator(mode="before")
    @classmethod
    def _runtime_fields(cls, data: Any) -> Any:
        """Settings of the other runtime are refused (named with this runtime's equivalent), and the
        runtime's release defaults are filled in, so a request always names its release."""
        if not isinstance(data, dict):
            return data
        runtime = data.get("runtime", "vllm")
        if runtime not in get_args(RuntimeName):
            return data  # the Literal check reports it
        given = {k for k, v in data.items() if v not in (None, "")}
        family = "llama.cpp" if runtime in ("llama.cpp", "ollama") else runtime
        for owner, fields in RUNTIME_ONLY.items():
            if family in owner.split("/"):
                continue
            for name, other in fields.items():
                if name in given and data[name] != ServingRequest.model_fields[name].default:
                    if name == "compare_vllm_version":  # not a setting with an equivalent: a view of vLLM's answers
                        own = {"sglang": "sglang_version", "llama.cpp": "llamacpp_release (Ollama: ollama_release)"}
                        raise InputError(name, f"the release comparison (compare_vllm_version) is only for vLLM "
                                         f"(runtime=vllm); with runtime={runtime} ask each {own[family]} on its own")
                    label = {"vllm": "vLLM", "sglang": "SGLang", "vllm/sglang": "vLLM / SGLang"}.get(owner, owner)
                    raise InputError(name, f"{name} is a {label} setting; with runtime={runtime} use "
                                     f"{RUNTIME_EQUIVALENT.get((family, name), other)}")
        data = dict(data)
        if runtime == "vllm":
            data.setdefault("vllm_version", None)
            data["vllm_version"] = data["vllm_version"] or default_release()
        elif runtime == "sglang":
            from calculator.runtimes.sglang.releases import DEFAULT

            data["sglang_version"] = data.get("sglang_version") or DEFAULT
        else:
            from calculator.runtimes.llamacpp.memory import RELEASES

            data["llamacpp_release"] = data.get("llamacpp_release") or RELEASES[0]
            if runtime == "ollama":
                from calculator.runtimes.llamacpp.ollama import DEFAULT_OLLAMA_RELEASE

                data["ollama_release"] = data.get("ollama_release") or DEFAULT_OLLAMA_RELEASE
            elif data.get("ollama_release") not in (None, ""):
                raise InputError("ollama_release", "ollama_release is an Ollama setting; with runtime=llama.cpp use "
                                 "llamacpp_release")
        return data

    @model_validator(mode="after")
    def _release_and_backend(self) -> ServingRequest:
        if self.acceptance_rate is not None and self.acceptance_length is not None:
            raise InputError("acceptance_length", "give acceptance_rate or acceptance_length, not both")
        spec = self.speculative_config
        if spec is not None and self.acceptance_length is not None and \
                self.acceptance_length > spec.num_speculative_tokens + 1:
            raise InputError("acceptance_length", f"{self.acceptance_length:g} is more than a step can accept: at most "
                             f"num_speculative_tokens + 1 = {spec.num_speculative_tokens + 1} tokens (the drafts and "
                             "the bonus token)")
        if self.runtime in ("llama.cpp", "ollama"):
            from calculator.runtimes.llamacpp.memory import KV_CACHE_TYPES, RELEASES

            if self.llamacpp_release not in RELEASES:
                raise InputError("llamacpp_release", f"{self.llamacpp_release!r} is not modelled; llama.cpp rules: "
                                 f"{'; '.join(RELEASES)}")
            if self.runtime == "ollama":
                from calculator.runtimes.llamacpp.ollama import ollama_rule

                try:
                    ollama_rule(self.ollama_release)
                except ValueError as exc:
                    raise InputError("ollama_release", str(exc).removeprefix("ollama_release: ")) from None
            for name in ("cache_type_k", "cache_type_v"):
                value = getattr(self, name)
                if value is not None and value not in KV_CACHE_TYPES:
                    raise InputError(name, f"llama.cpp cache types are {', '.join(KV_CACHE_TYPES)}, not {value!r}")
            if self.gguf_file is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,190}\.gguf", self.gguf_file):
                raise InputError("gguf_file", "a .gguf file name in the repo (letters, digits, . _ / -)")
            if self.gguf_file_draft is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,190}\.gguf",
                                                                     self.gguf_file_draft):
                raise InputError("gguf_file_draft", "a .gguf file name in the draft's repo (letters, digits, . _ / -)")
            if (self.gguf_file_draft is not None or self.n_gpu_layers_draft is not None) and not (
                    self.speculative_config is not None and self.speculative_config.method == "draft_model"):
                raise InputError("gguf_file_draft" if self.gguf_file_draft is not None else "n_gpu_layers_draft",
                                 "only with a draft model (speculative_config method draft_model)")
            if self.runtime == "ollama" and self.cache_type_v is not None and self.cache_type_v != self.cache_type_k:
                # one OLLAMA_KV_CACHE_TYPE for both: llm/llama_server.go:394-395 at v0.32.15 passes it as
                # --cache-type-k and --cache-type-v; llama/llama.go:139-140 at v0.24.0 sets type_k and type_v from it
                raise InputError("cache_type_v", "Ollama has one KV cache type for K and V (OLLAMA_KV_CACHE_TYPE): "
                                 "give it as cache_type_k (--cache-type-k), without a different cache_type_v")
            if self.runtime == "ollama" and self.kv_unified:
                # Ollama starts llama-server with -c num_ctx x parallel and -np parallel, never --kv-unified
                # (llm/llama_server.go:370-416 at v0.32.15): each slot keeps its own num_ctx cells
                raise InputError("kv_unified", "llama-server's flag; Ollama passes no --kv-unified (each of its "
                                 "OLLAMA_NUM_PARALLEL slots keeps its own num_ctx cells)")
            if self.runtime == "ollama" and (self.fit is not None or self.fit_target is not None):
                raise InputError("fit" if self.fit is not None else "fit_target", "--fit is llama-server's flag; Ollama passes "
                                 "none (since 0.30 llama-server's default, on, places the layers; before, its scheduler "
                                 "picked num_gpu)")
            if self.attention_backend is not None:
                raise InputError("attention_backend", "llama.cpp picks its backend by build (CUDA, Metal, Vulkan, "
                                 "CPU); use flash_attn")
            for name, instead in (("kv_cache_dtype", "cache_type_k / cache_type_v"), ("dtype", "the GGUF file's "
                                  "tensor types"), ("quantization", "a GGUF file of that quantization (gguf_file)")):
                if getattr(self, name) not in (None, "auto"):
                    raise InputError(name, f"{name} is not a llama.cpp setting; use {instead}")
            if self.tensor_parallel_size * self.pipeline_parallel_size * self.dp_size > 1:
                raise InputError("tensor_parallel_size", "llama.cpp has no tensor-parallel size: give the GPU count as "
                                 "gpus (--gpus N; layers split by --split-mode / --tensor-split)")
            if self.tensor_split is not None and len(self.tensor_split.split(",")) > self.gpus:
                raise InputError("tensor_split", f"{len(self.tensor_split.split(','))} shares for {self.gpus} GPU(s) "
                                 "(gpus): one share per GPU at most")
            if self.main_gpu is not None and self.main_gpu >= self.gpus:
                raise InputError("main_gpu", f"GPU {self.main_gpu} of {self.gpus} (gpus): the GPUs are 0.."
                                 f"{self.gpus - 1}")
            return self
        if self.runtime == "sglang":
            from calculator.runtimes.sglang.compat import CHOICES
            from calculator.runtimes.sglang.releases import COVERED

            if self.sglang_version not in COVERED:
                raise InputError("sglang_version", f"SGLang {self.sglang_version} is not covered: this calculator "
                                 f"answers SGLang {', '.join(COVERED)}")
            choices = CHOICES.get(self.sglang_version, ((), ""))[0]
            if self.attention_backend is not None and self.attention_backend not in choices:
                raise InputError("attention_backend", f"{self.attention_backend!r} is not an attention backend of SGLang "
                                 f"{self.sglang_version}; its backends: {', '.join(choices)}")
            self._sglang_tree()
            return self
        if not release_supported(self.vllm_version):
            raise _release_error(self.vllm_version)
        if self.compare_vllm_version is not None and not release_supported(self.compare_vllm_version):
            raise _release_error(self.compare_vllm_version, "compare_vllm_version")
        if self.attention_backend is not None:
            release = self.release
            if not attention_backends(release):
                raise InputError("attention_backend", _no_backend_flag(release))
            if self.attention_backend not in attention_backends(release):
                raise InputError("attention_backend", f"{self.attention_backend!r} is not an attention backend of "
                                 f"vLLM {release}; its backends: {', '.join(attention_backends(release))}")
        return self

    def _sglang_tree(self) -> None:
        """SGLang's draft tree flags, checked as SGLang checks them (sglang 0.5.10.post1): they shape the EAGLE
        worker's drafting (EAGLE, EAGLE3, NEXTN, STANDALONE), so they need a speculative_config of those methods;
        topk > 1 needs --speculative-num-draft-tokens (server_args.py:3054-3081 only fills it for topk = 1), and
        the tree offers ``topk + (num_steps - 1) x topk^2`` scored candidates, of which ``num_draft_tokens - 1``
        are kept (speculative/eagle_utils.py:27 ``torch.topk(score_list, num_draft_token - 1)``)."""
        topk, ndraft = self.speculative_eagle_topk, self.speculative_num_draft_tokens
        if topk is None and ndraft is None:
            return
        name = "speculative_eagle_topk" if topk is not None else "speculative_num_draft_tokens"
        spec = self.speculative_config
        if spec is None or spec.method not in ("eagle", "eagle3", "mtp", "draft_model"):
            raise InputError(name, "SGLang's draft tree needs a speculative_config with method eagle, eagle3, mtp or "
                             "draft_model (its num_speculative_tokens is --speculative-num-steps)")
        steps = spec.num_speculative_tokens
        if topk is not None and topk > 1:
            if ndraft is None:
                raise InputError("speculative_num_draft_tokens", "with --speculative-eagle-topk > 1 SGLang needs "
                                 "--speculative-num-draft-tokens (it only fills it in for a chain, num_steps + 1)")
            most = topk + (steps - 1) * topk * topk + 1
            if ndraft > most:
                raise InputError("speculative_num_draft_tokens", f"a tree of {steps} steps x topk {topk} has "
                                 f"{most - 1} candidate tokens, so at most {most} draft tokens (the root included); "
                                 "SGLang fails in torch.topk beyond that (speculative/eagle_utils.py:27)")

    # -- derived ------------------------------------------------------------------------------------
    @property
    def release(self) -> str:
        """The runtime release the answer is for (the runtime's default when none was asked)."""
        if self.runtime == "sglang":
            return self.sglang_version
        if self.runtime in ("llama.cpp", "ollama"):
            return self.llamacpp_release
        return self.vllm_version

    @property
    def num_gpus(self) -> int:
        if self.runtime in ("llama.cpp", "ollama"):
            return self.gpus  # llama.cpp splits layers over the GPUs it is given (--gpus), no TP / PP sizes
        # SGLang's --enable-dp-attention splits the tp ranks into dp attention groups: tp x pp GPUs in all
        # (python/sglang/srt/server_args.py: dp_size must divide tp_size with DP attention)
        dp = (self.data_parallel_size if self.runtime == "vllm"
              else 1 if self.enable_dp_attention else self.dp_size)
        return self.tensor_parallel_size * self.pipeline_parallel_size * dp

    @property
    def num_nodes(self) -> int:
        """Machines the GPUs take, ``ceil(num_gpus / gpus_per_node)``."""
        return -(-self.num_gpus // self.gpus_per_node)

    @property
    def layout(self) -> str:
        """The parallel layout in words: nodes x GPUs and the TP / PP / DP split, e.g.
        ``2 nodes x 8 GPUs = 16 GPUs (TP 8 x PP 2 x DP 1)``; says when tensor parallel crosses nodes."""
        if self.runtime in ("llama.cpp", "ollama"):
            g = self.gpus
            return ("1 GPU" if g == 1 else
                    f"1 machine x {g} GPUs, --split-mode {self.split_mode or 'layer'}"
                    + (f" --tensor-split {self.tensor_split}" if self.tensor_split else " (layers split evenly)"))
        dp = self.data_parallel_size if self.runtime == "vllm" else self.dp_size
        n, g = self.num_nodes, self.num_gpus
        per_node = min(g, self.gpus_per_node)
        text = (f"{n} node{'s' if n > 1 else ''} x {per_node} GPU{'s' if per_node > 1 else ''} = {g} "
                f"GPU{'s' if g > 1 else ''} (TP {self.tensor_parallel_size} x PP {self.pipeline_parallel_size} "
                + (f"with DP attention {dp} inside the TP ranks)" if self.runtime == "sglang" and self.enable_dp_attention
                   else f"x DP {dp})"))
        if g % self.gpus_per_node and n > 1:
            text += f"; the last node uses {g - (n - 1) * self.gpus_per_node} of its {self.gpus_per_node} GPUs"
        if self.tensor_parallel_size > self.gpus_per_node:
            text += "; tensor parallel spans nodes (all-reduce over the network every layer)"
        return text

    def replace(self, **changes: Any) -> ServingRequest:
        """A validated copy with ``changes`` applied (raises :class:`InputError` like :func:`parse_request`)."""
        return parse_request(merge_params(self.to_params(), {k: _raw(v) for k, v in changes.items()}))

    def to_params(self) -> dict[str, str]:
        """The request as raw strings, only what differs from the defaults, in field order (the permalink's
        query; ``speculative_config`` as compact JSON; ``gpu`` and ``vllm_version`` always written, since
        the defaults depend on them). A field is named as the runtime names it where it has its own name
        (:data:`RUNTIME_PARAM_NAMES`: llama.cpp's and Ollama's context is ``ctx_size``, llama.cpp's ``-c`` /
        ``--ctx-size``); :func:`parse_request` reads every name back, and an older permalink's ``max_model_len``
        still opens the same answer. Merge other parameters into it with :func:`merge_params`."""
        out: dict[str, str] = {}
        for name, info in ServingRequest.model_fields.items():
            value = getattr(self, name)
            if name not in ("gpu", "vllm_version", "sglang_version", "llamacpp_release", "ollama_release") and value == info.default:
                continue
            if value is None:
                continue
            out[name] = _raw(value)
        return runtime_params(out, self.runtime)


# Settings one runtime takes and the other does not: name -> the other runtime's equivalent.
VLLM_ONLY = {
    "vllm_version": "sglang_version", "gpu_memory_utilization": "mem_fraction_static",
    "block_size": "page_size", "max_num_batched_tokens": "chunked_prefill_size",
    # SGLang's eager mode (--disable-cuda-graph) is not a request field: its plan and speed are SGLang's default,
    # CUDA graphs on, so the refusal names no flag the calculator would refuse in turn
    "enforce_eager": "nothing (SGLang's --disable-cuda-graph, its eager mode, is not modelled here: SGLang is planned "
                     "with its CUDA graphs on, its default)",
    "kv_cache_memory_bytes": "mem_fraction_static", "gpu_memory_gib": "the catalog GPU",
    "gpu_memory_in_use_gib": "nothing (not modelled for this runtime)",
    "data_parallel_size": "dp_size", "enable_expert_parallel": "ep_size",
    "pp_layer_partition": "nothing (not modelled for this runtime)",
    "compare_vllm_version": "nothing (the release comparison is only for vLLM)",
}
SGLANG_ONLY = {
    "sglang_version": "vllm_version", "mem_fraction_static": "gpu_memory_utilization", "chunked_prefill_size":
    "max_num_batched_tokens", "cuda_graph_max_bs": "vLLM's compilation config (not an input here)",
    "page_size": "block_size", "dp_size": "data_parallel_size",
    "ep_size": "enable_expert_parallel", "enable_dp_attention": "nothing in vLLM",
    "trust_remote_code": "nothing (vLLM's config check is not modelled here)",
    "speculative_eagle_topk": "a chain of num_speculative_tokens (vLLM drafts no trees here)",
    "speculative_num_draft_tokens": "num_speculative_tokens (a chain verifies num_speculative_tokens + 1)",
}


LLAMACPP_ONLY = {
    "gguf_file": "the model's safetensors", "llamacpp_release": "the runtime's own release",
    "ollama_release": "the runtime's own release",
    "parallel": "concurrency (and max_num_seqs / max_running_requests)", "cache_type_k": "kv_cache_dtype",
    "cache_type_v": "kv_cache_dtype", "flash_attn": "attention_backend", "n_gpu_layers": "more GPUs (TP)",
    "gguf_file_draft": "speculative_config's model (safetensors)", "n_gpu_layers_draft": "nothing (the draft runs on "
    "the target's GPUs)",
    "kv_unified": "nothing (vLLM and SGLang pool the cache)", "swa_full": "nothing (sized by the runtime)",
    "fit": "nothing (the runtime sizes its KV cache to the memory left)", "fit_target": "gpu_memory_utilization",
    "gpus": "tensor_parallel_size / pipeline_parallel_size", "split_mode": "tensor_parallel_size / "
    "pipeline_parallel_size", "tensor_split": "pp_layer_partition", "main_gpu": "nothing (every GPU is used)",
    "llamacpp_backend": "nothing (the runtime's own CUDA / ROCm build for the GPU)",
}
# vLLM's and SGLang's (the same setting under each one's own flag), not llama.cpp's
SERVER_ONLY = {"max_num_seqs": "parallel (llama-server --parallel: the slots that decode at once)",
               "hf_overrides": "nothing: a GGUF carries its own context keys, and llama.cpp's --rope-scaling / "
               "--rope-scale / --yarn-orig-ctx are not modelled here",
               "allow_long_max_model_len": "nothing: llama.cpp takes a --ctx-size above the trained context and "
               "only warns"}
# owner (runtime families joined by "/") -> its settings
RUNTIME_ONLY = {"vllm": VLLM_ONLY, "sglang": SGLANG_ONLY, "llama.cpp": LLAMACPP_ONLY, "vllm/sglang": SERVER_ONLY}
# (runtime in use, foreign setting) -> that runtime's own name for it
RUNTIME_EQUIVALENT = {("llama.cpp", "gpu_memory_utilization"): "the device's memory (llama.cpp takes what it needs)",
                      ("llama.cpp", "kv_cache_dtype"): "cache_type_k / cache_type_v",
                      ("llama.cpp", "block_size"): "nothing (llama.cpp pads the context itself)",
                      ("llama.cpp", "mem_fraction_static"): "the device's memory",
                      ("llama.cpp", "speculative_eagle_topk"): "a draft model's chain (llama-server --spec-draft-n-max; no "
                                                                "trees)",
                      ("llama.cpp", "speculative_num_draft_tokens"): "speculative_config's num_speculative_tokens "
                                                                      "(llama-server --spec-draft-n-max)",
                      ("llama.cpp", "enforce_eager"): "nothing (not modelled for this runtime)",
                      # the other server runtime's name would be refused in turn (a refusal names only what the
                      # runtime in use takes, or nothing)
                      **dict.fromkeys((("llama.cpp", "max_num_batched_tokens"), ("llama.cpp", "chunked_prefill_size")),
                                      "nothing (llama-server's --batch-size / --ubatch-size are not inputs here: "
                                      "llama.cpp's defaults, or the batch Ollama picks, are planned)"),
                      ("llama.cpp", "kv_cache_memory_bytes"): "ctx_size (llama.cpp sizes its KV cache by the context)",
                      ("llama.cpp", "page_size"): "nothing (llama.cpp pads the context itself)",
                      **dict.fromkeys((("llama.cpp", "ep_size"), ("llama.cpp", "enable_expert_parallel")),
                                      "nothing (llama.cpp has no expert parallelism: --split-mode layer places whole "
                                      "layers on each GPU)"),
                      ("sglang", "fit_target"): "mem_fraction_static",
                      ("sglang", "tensor_split"): "nothing (not modelled for this runtime)",
                      ("llama.cpp", "vllm_version"): "llamacpp_release (Ollama: ollama_release)",
                      ("llama.cpp", "sglang_version"): "llamacpp_release (Ollama: ollama_release)",
                      ("llama.cpp", "data_parallel_size"): "nothing (one llama-server per set of devices; run several "
                                                            "servers for replicas)",
                      ("llama.cpp", "dp_size"): "nothing (one llama-server per set of devices; run several servers for "
                                                "replicas)"}


def _raw(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, BaseModel):
        return json.dumps(value.model_dump(exclude_none=True), separators=(",", ":"))
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def gpu_key(gpu) -> str:
    """The short name a permalink uses for a device: its first alias (``H100``), else its name."""
    return gpu.aliases[0] if gpu.aliases else gpu.name


# --- parsing raw input -----------------------------------------------------------------------------
FIELDS = tuple(ServingRequest.model_fields)
SPLIT_SPEC_FIELDS = ("speculative_method", "speculative_model", "num_speculative_tokens")
# SGLang's own speculative flags (sglang==0.5.10.post1 sglang/srt/server_args.py:4760-4793 add_cli_args), taken with
# runtime=sglang and combined into the one speculative_config the engine takes (:func:`_sglang_speculative`); SGLang's
# --speculative-eagle-topk and --speculative-num-draft-tokens are request fields of their own.
SGLANG_SPEC_FLAGS = ("speculative_algorithm", "speculative_num_steps", "speculative_draft_model_path")
# --speculative-algorithm choices (server_args.py:4762)
SGLANG_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
# the product's method SGLang runs for each (calculator/runtimes/sglang/runtime.py writes them back): NEXTN is EAGLE
# in SGLang (server_args.py:2983-2984), drafting with the target's own MTP layers when no draft path is given
# (:3028-3043 sets the draft path to the model path for DeepSeek V3 / GLM-4.5 / ...), which is the product's mtp
SGLANG_METHODS = {"EAGLE3": "eagle3", "STANDALONE": "draft_model", "NGRAM": "ngram"}
# NGRAM's draft tokens when --speculative-num-draft-tokens is not given (server_args.py:3108)
SGLANG_NGRAM_DRAFT_TOKENS = 12
# SGLang 0.5.23's --attn-dp-size N: the old --dp-size N --enable-dp-attention (sglang==0.5.23
# sglang/srt/arg_groups/fields/parallel.py:81, :192-193; arg_groups/parallel_hook.py:39)
SGLANG_ATTN_DP = "attn_dp_size"
KNOWN_PARAMS = (*FIELDS, *SPLIT_SPEC_FIELDS, *SGLANG_SPEC_FLAGS, SGLANG_ATTN_DP)
TOKEN_FIELDS = tuple(n for n, f in ServingRequest.model_fields.items()
                     if (f.json_schema_extra or {}).get("tokens"))
TRUE, FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")
# SGLang's names of shared settings: --context-length, --tp-size, --pp-size
ALIASES = {a: n for n, f in ServingRequest.model_fields.items()
           for a in ((f.json_schema_extra or {}).get("alias"), *(f.json_schema_extra or {}).get("aliases", ())) if a}
ALIASES["speculative_draft_model"] = "speculative_draft_model_path"  # SGLang's second spelling (server_args.py:4766)


def merge_params(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` (a request's parameters, :meth:`ServingRequest.to_params`) with ``changes`` applied, a change
    replacing the base's value of the same setting under any of its names: ``max_model_len=4096`` replaces a llama.cpp
    permalink's ``ctx_size=8192`` (one setting, :data:`ALIASES`) instead of standing beside it as a second value.
    ``""`` in ``changes`` is kept (it reads as "the default" to :func:`parse_request`)."""
    changed = {ALIASES.get(k, k) for k in changes}
    out = {k: v for k, v in base.items() if ALIASES.get(k, k) not in changed}
    out.update(changes)
    return out


def runtime_params(params: Mapping[str, Any], runtime: str) -> dict[str, Any]:
    """``params`` (request field names) with each field named as ``runtime`` names it (:data:`RUNTIME_PARAM_NAMES`:
    ``max_model_len`` -> ``ctx_size`` for llama.cpp and Ollama), as its permalink names them."""
    own = RUNTIME_PARAM_NAMES.get(str(runtime or ""), {})
    return {own.get(k, k): v for k, v in params.items()}


# the short flags (-tp, -pp, -c, -ngl...) without their dash -> the parameter they set
SHORT_FLAGS = {(f.json_schema_extra or {})["short"].lstrip("-"): n for n, f in ServingRequest.model_fields.items()
               if (f.json_schema_extra or {}).get("short")}


def nearest_choice(given, choices: list[str]) -> str | None:
    """The choice a mistyped value most likely meant: the one equal to it once case and punctuation are dropped
    (``llamacpp``, ``LLAMA_CPP`` -> ``llama.cpp``), else the closest by ``difflib`` (cutoff 0.6); None when none
    is near or ``given`` is not a string."""
    import difflib

    if not isinstance(given, str) or not choices:
        return None
    squash = (lambda v: re.sub(r"[^a-z0-9]", "", v.lower()))
    same = [c for c in choices if squash(c) == squash(given)]
    if same:
        return same[0]
    near = difflib.get_close_matches(given.strip().lower(), choices, n=1, cutoff=0.6)
    return near[0] if near else None


#: Ollama's option and variable names (its Modelfile PARAMETERs and API "options", api/types.go; OLLAMA_* variables)
#: -> the parameter that sets the same thing here, so an Ollama user is pointed at it, not at a look-alike name
OLLAMA_NAMES = {"num_gpu": "n_gpu_layers", "num_ctx": "ctx_size", "num_parallel": "parallel",
                "ollama_num_parallel": "parallel", "ollama_context_length": "ctx_size",
                "kv_cache_type": "cache_type_k", "ollama_kv_cache_type": "cache_type_k",
                "ollama_flash_attention": "flash_attn"}


def ollama_equivalent(name: str) -> str | None:
    """Our parameter for one of Ollama's own names (:data:`OLLAMA_NAMES`; ``num_gpu``, ``--num-gpu``,
    ``OLLAMA_KV_CACHE_TYPE`` -> ``n_gpu_layers`` ...), else None: the API and the CLI each name it in their terms."""
    return OLLAMA_NAMES.get(str(name).strip().lstrip("-").replace("-", "_").lower())


def unknown_parameter(name: str, known: tuple[str, ...] | None = None) -> InputError:
    """The refusal of a parameter no surface takes, naming the nearest known one (``difflib``, over the parameters
    and their aliases; ``--max-model-len`` and ``Max_Model_Len`` are matched as ``max_model_len``; a short flag's
    name, ``tp``, as the parameter it sets, ``tensor_parallel_size``). ``known``: the
    parameters of a page with its own (the compatibility pages), named in full when none is near."""
    import difflib

    shown = str(name)[:60]
    names = known if known is not None else (*KNOWN_PARAMS, *ALIASES)
    key = shown.strip().lstrip("-").replace("-", "_").lower()
    near = [key] if key in names else difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    if known is None and key not in names and key in SHORT_FLAGS:  # tp=2: the command line's -tp
        near = [SHORT_FLAGS[key]]
    ours = ollama_equivalent(key) if known is None else None
    if ours:  # num_gpu=20: Ollama's name of -ngl
        return InputError(shown, f"unknown parameter {shown!r}; that is Ollama's name: here it is {ours!r} "
                                 f"(--{ours.replace('_', '-')}), which the Ollama command and Modelfile set for you")
    hint = (f"did you mean {near[0]!r}?" if near else
            "no parameter has a name close to it (the parameters are the flags of manage.py estimate --help, "
            "in snake_case)" if known is None else
            f"no parameter has a name close to it (this page takes {', '.join(known)})")
    return InputError(shown, f"unknown parameter {shown!r}; {hint}")


def human_readable_int(value: str) -> int:
    """``"32k"`` -> 32000, ``"32K"`` -> 32768, ``"8192"`` -> 8192, as vLLM parses ``--max-model-len``
    (``human_readable_int``, vllm/utils/argparse_utils.py:29 in 0.32). Raises ``ValueError``."""
    value = value.strip().replace("_", "").replace(",", "")
    match = re.fullmatch(r"(\d{1,12}(?:\.\d{1,6})?)([kKmMgG])", value)
    if not match:
        if re.fullmatch(r"[+-]?\d{19,}", value):
            raise ValueError("too large (at most 18 digits)")
        if not re.fullmatch(r"[+-]?\d{1,18}", value):
            raise ValueError("not a whole number")
        return int(value)
    number, suffix = match.groups()
    if suffix.islower():
        return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9}[suffix])
    if "." in number:
        raise ValueError(f"decimals are not allowed with binary suffixes; did you mean {number}{suffix.lower()}?")
    return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30}[suffix]


def _text(name: str, value: Any) -> str | None:
    """A raw value as clean text (``None`` when empty); refuses what cannot be shown back safely."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
        if value is None:
            return None
    text = str(value)
    if len(text) > 4096:
        raise InputError(name, "the value is too long")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(name, "the value is not valid text (unpaired surrogate)") from None
    if "\x00" in text:
        raise InputError(name, "the value contains a NUL character")
    text = text.strip()
    return text or None


def _kind(name: str) -> type:
    """The scalar type of a request field (``int``, ``float``, ``bool`` or ``str``)."""
    field = ServingRequest.model_fields.get(name)
    if field is None:  # the split speculative fields and SGLang's speculative flags
        return int if name in ("num_speculative_tokens", "speculative_num_steps") else str
    args = [a for a in (get_args(field.annotation) or (field.annotation,)) if a is not type(None)]
    for kind in (bool, int, float):
        if kind in args:
            return kind
    return str


def _number(name: str, text: str) -> int | float:
    if name in TOKEN_FIELDS:
        try:
            return human_readable_int(text)
        except ValueError as exc:
            raise InputError(name, f"enter a whole number of tokens, e.g. 8192, 32k or 32K ({exc})") from None
    if _kind(name) is float:
        try:
            number = float(text)
        except ValueError:
            raise InputError(name, f"enter a number, got {text!r}") from None
        if not math.isfinite(number):
            if name == "request_rate" and number > 0:
                head = "an unlimited rate (vllm bench serve's default, --request-rate inf) sends every prompt at once: "
                raise WordedPerSurface(name, head + "give num_prompts without request_rate (and concurrency for its "
                                       "--max-concurrency)", cli_message=head + "give --num-prompts without "
                                       "--request-rate (and --concurrency for its --max-concurrency)")
            raise InputError(name, f"enter a finite number, got {text!r}")
        return number
    if re.fullmatch(r"\+?\d{19,}", text):  # a whole number too long to be any setting: say the field's bound
        field = ServingRequest.model_fields.get(name)
        most = next((m.le for m in (field.metadata if field else []) if getattr(m, "le", None) is not None), None)
        shown = text if len(text) <= 24 else text[:24] + "..."
        raise InputError(name, f"must be at most {most}, got {shown}" if most is not None
                         else f"too large, got {shown}")
    if not re.fullmatch(r"[+-]?\d{1,18}", text):
        raise InputError(name, f"enter a whole number, got {text!r}")
    return int(text)


def _speculative(raw: dict[str, str | None]) -> dict[str, Any] | None:
    text = raw.pop("speculative_config", None)
    split = {k: raw.pop(k, None) for k in SPLIT_SPEC_FIELDS}
    if text and any(split.values()):
        raise InputError("speculative_config", "give speculative_config or the speculative_method / "
                         "speculative_model / num_speculative_tokens fields, not both")
    if text:
        return _json_object("speculative_config", text, '{"method": "ngram", "num_speculative_tokens": 3}')
    if not any(split.values()):
        return None
    if not split["speculative_method"]:
        raise InputError("speculative_method", "pick a speculative decoding method (or clear the draft fields)")
    spec: dict[str, Any] = {"method": split["speculative_method"]}
    if split["speculative_model"]:
        spec["model"] = split["speculative_model"]
    if not split["num_speculative_tokens"]:
        raise InputError("num_speculative_tokens", f"set the number of speculative tokens for {spec['method']}")
    spec["num_speculative_tokens"] = _number("num_speculative_tokens", split["num_speculative_tokens"])
    return spec


def _json_object(field: str, text: str, example: str) -> dict[str, Any]:
    """``text`` (a parameter given as JSON: ``speculative_config``, ``hf_overrides``) as a dict, at most 1000
    characters.

    Raises:
        InputError: on ``field``: too long, not JSON, or JSON but not an object (the message shows ``example``).
    """
    if len(text) > 1000:
        raise InputError(field, "the JSON is too long (1000 characters at most)")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(field, f"not a JSON object: {str(exc)[:120]}") from None
    if not isinstance(value, dict):
        raise InputError(field, f"expected a JSON object such as {example}")
    return value


def _hf_overrides(raw: dict[str, str | None]) -> dict[str, Any] | None:
    """``hf_overrides`` as given (a JSON object, as vLLM's ``--hf-overrides`` takes it), taken out of ``raw``."""
    text = raw.pop("hf_overrides", None)
    if not text:
        return None
    return _json_object("hf_overrides", text, '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, '
                        '"original_max_position_embeddings": 32768}}')


def _sglang_flags_text(flags: Mapping[str, Any]) -> str:
    """``--speculative-algorithm EAGLE3 --speculative-num-steps 3``: the SGLang flags given, as SGLang spells them."""
    return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in flags.items() if v not in (None, ""))


def _spec_text(spec: Mapping[str, Any]) -> str:
    return json.dumps(dict(spec), separators=(", ", ": "))


def sglang_speculative_config(algorithm: str | None, num_steps: Any = None, draft_model_path: str | None = None,
                              num_draft_tokens: Any = None) -> dict[str, Any]:
    """SGLang's ``--speculative-algorithm`` / ``--speculative-num-steps`` / ``--speculative-draft-model-path`` as
    the one ``speculative_config`` the engine takes (``{"method", "model", "num_speculative_tokens"}``), mapped as
    sglang==0.5.10.post1 ``server_args.py`` runs them:

    - EAGLE3 -> eagle3, STANDALONE -> draft_model (both need the draft path), each with num_speculative_tokens =
      --speculative-num-steps (the draft depth; runtimes/sglang/runtime.py writes it back as --speculative-num-steps).
    - NEXTN is EAGLE (server_args.py:2983-2984): with a draft path it is eagle with that model; without one SGLang
      drafts with the target's own MTP layers (it sets the draft path to the model path for the MTP architectures,
      :3028-3043), which is the product's mtp (written back as NEXTN). EAGLE without a draft path is the same.
    - NGRAM -> ngram: it drafts --speculative-num-draft-tokens tokens from the prompt (12 when not given,
      :3108; ngram_worker.py:42 reads only that), the root included, so num_speculative_tokens = draft tokens - 1
      (the runtime writes k + 1 back); it takes no draft path and no --speculative-num-steps.

    ``num_steps`` / ``num_draft_tokens``: raw text or int. Without --speculative-num-steps SGLang picks the steps,
    top-k and draft tokens by architecture (``auto_choose_speculative_params``, :6711-6745); the request needs them
    given, so that is refused with the value SGLang would pick for most models.

    Raises:
        InputError: naming the SGLang flag (``speculative_algorithm``, ``speculative_num_steps``,
            ``speculative_draft_model_path``, ``speculative_num_draft_tokens``).
    """
    if not algorithm:
        raise InputError("speculative_algorithm", "--speculative-num-steps and --speculative-draft-model-path go with "
                         f"--speculative-algorithm ({', '.join(SGLANG_ALGORITHMS)}), or give speculative_config")
    algo = str(algorithm).strip().upper()
    if algo not in SGLANG_ALGORITHMS:
        raise InputError("speculative_algorithm", f"must be one of {', '.join(SGLANG_ALGORITHMS)} (SGLang's choices, "
                         f"server_args.py:4762), got {str(algorithm)[:40]!r}")
    path = str(draft_model_path).strip() if draft_model_path not in (None, "") else None
    if path is not None and not HUB_ID_RE.fullmatch(path):
        raise InputError("speculative_draft_model_path", "the draft model is a Hugging Face id of the form org/name "
                         f"(a local folder is not read here), got {path[:60]!r}")

    def count(name: str, value: Any, low: int, high: int) -> int:
        n = value if isinstance(value, int) and not isinstance(value, bool) else _number(name, str(value).strip())
        if not low <= n <= high:
            raise InputError(name, f"must be between {low} and {high} here, got {n}")
        return n

    if algo == "NGRAM":
        if path is not None:
            raise InputError("speculative_draft_model_path", "NGRAM drafts from the prompt and takes no draft model")
        if num_steps not in (None, ""):
            raise InputError("speculative_num_steps", "NGRAM does not read --speculative-num-steps (ngram_worker.py:42 "
                             "drafts --speculative-num-draft-tokens tokens, the root included; 12 when not given)")
        ndraft = (count("speculative_num_draft_tokens", num_draft_tokens, 2, MAX_SPECULATIVE_TOKENS + 1)
                  if num_draft_tokens not in (None, "") else SGLANG_NGRAM_DRAFT_TOKENS)
        return {"method": "ngram", "num_speculative_tokens": ndraft - 1}
    if num_steps in (None, ""):
        raise InputError("speculative_num_steps", f"give --speculative-num-steps with {algo}: without it SGLang picks "
                         "the steps, --speculative-eagle-topk and --speculative-num-draft-tokens by architecture "
                         "(auto_choose_speculative_params, server_args.py:6711; 3 steps, top-k 1, 4 draft tokens for "
                         "most models, 5 / 4 / 8 for Llama), which this calculator does not guess")
    steps = count("speculative_num_steps", num_steps, 1, MAX_SPECULATIVE_TOKENS)
    if algo in ("EAGLE", "NEXTN"):
        return ({"method": "eagle", "model": path, "num_speculative_tokens": steps} if path
                else {"method": "mtp", "num_speculative_tokens": steps})
    if path is None:
        raise InputError("speculative_draft_model_path", f"{algo} needs --speculative-draft-model-path (the draft "
                         "model's Hugging Face id)")
    return {"method": SGLANG_METHODS[algo], "model": path, "num_speculative_tokens": steps}


# the SGLang --speculative-algorithm of each product method (as calculator/runtimes/sglang/runtime.py writes it)
_SGLANG_ALGORITHM_OF = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE",
                        "ngram": "NGRAM"}


def _attn_dp(raw: dict[str, str | None]) -> None:
    """SGLang 0.5.23's ``--attn-dp-size N`` in ``raw`` (popped) as ``dp_size`` N with ``enable_dp_attention`` (what the
    launch command writes for them); beside a ``dp_size`` or ``enable_dp_attention`` that says otherwise, refused."""
    text = raw.pop(SGLANG_ATTN_DP, None)
    if text in (None, ""):
        return
    try:
        n = int(str(text).strip())
    except ValueError:
        n = 0
    if n < 1:
        raise InputError(SGLANG_ATTN_DP, f"expected a whole number of at least 1, got {text!r}")
    if n == 1:
        return  # attention DP over one rank is none (SGLang turns it off at dp_size 1)
    if raw.get("dp_size") not in (None, "") and str(raw["dp_size"]) != str(n):
        raise InputError(SGLANG_ATTN_DP, "attn_dp_size is dp_size with enable_dp_attention; give one of them")
    if raw.get("enable_dp_attention") not in (None, "") and str(raw["enable_dp_attention"]).lower() not in TRUE:
        raise InputError(SGLANG_ATTN_DP, "attn_dp_size turns DP attention on; enable_dp_attention says off")
    raw["dp_size"], raw["enable_dp_attention"] = str(n), "true"


def _sglang_speculative(raw: dict[str, str | None], spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """SGLang's speculative flags in ``raw`` (popped) combined with the ``speculative_config`` already read
    (``spec``): with runtime=sglang they are aliases (:func:`sglang_speculative_config`); given beside a
    speculative_config they must say the same (each flag not given is read from it), else both are named; with
    another runtime they are refused naming that runtime's setting (``speculative_config`` on the page and the API,
    ``--speculative-config`` on the command line: :class:`WordedPerSurface`)."""
    flags = {k: raw.pop(k, None) for k in SGLANG_SPEC_FLAGS}
    given = {k: v for k, v in flags.items() if v not in (None, "")}
    if not given:
        return spec
    runtime = (raw.get("runtime") or "vllm").strip()
    if runtime != "sglang":
        try:
            example = _spec_text(sglang_speculative_config(
                flags["speculative_algorithm"] or "EAGLE3", flags["speculative_num_steps"] or 3,
                flags["speculative_draft_model_path"] or "org/draft-model", raw.get("speculative_num_draft_tokens")))
        except InputError:
            example = '{"method": "eagle3", "model": "org/draft-model", "num_speculative_tokens": 3}'
        name = next(iter(given))
        theirs = ("vLLM's is --speculative-config" if runtime == "vllm" else
                  f"with runtime={runtime[:20]} give --speculative-config")
        raise WordedPerSurface(name, f"{name} is an SGLang setting; with runtime={runtime[:20]} use speculative_config "
                               f"{example}", cli_message=f"this is an SGLang flag; {theirs} '{example}'")
    ndraft = None
    if spec is None:
        algo, steps, path = flags["speculative_algorithm"], flags["speculative_num_steps"], \
            flags["speculative_draft_model_path"]
    else:  # each flag not given is the speculative_config's
        method = str(spec.get("method") or "")
        algo = flags["speculative_algorithm"] or _SGLANG_ALGORITHM_OF.get(method)
        steps = flags["speculative_num_steps"]
        if steps is None and method != "ngram" and (algo or "").upper() != "NGRAM":
            steps = spec.get("num_speculative_tokens")
        path = flags["speculative_draft_model_path"] or spec.get("model")
        if (algo or "").upper() == "NGRAM" and raw.get("speculative_num_draft_tokens") is None and \
                isinstance(spec.get("num_speculative_tokens"), int):
            ndraft = spec["num_speculative_tokens"] + 1
    algo_upper = str(algo or "").strip().upper()
    if algo_upper == "NGRAM":  # NGRAM's draft tokens are its num_speculative_tokens + 1 (the field is consumed)
        ndraft = raw.pop("speculative_num_draft_tokens", None) or ndraft
    try:
        ours = sglang_speculative_config(algo, steps, path, ndraft)
    except InputError as exc:
        if spec is None:
            raise
        raise InputError("speculative_config", f"speculative_config {_spec_text(spec)} and the SGLang flags "
                         f"{_sglang_flags_text(given)} do not describe one setting ({exc.field}: {exc.message}); "
                         "give one of them") from None
    if spec is not None:
        theirs = {k: spec.get(k) for k in ("method", "model", "num_speculative_tokens")}
        if {k: v for k, v in theirs.items() if v is not None} != {k: v for k, v in ours.items() if v is not None}:
            raise InputError("speculative_config", f"speculative_config {_spec_text(spec)} and the SGLang flags "
                             f"{_sglang_flags_text(given)} disagree (those flags are {_spec_text(ours)}); give one "
                             "of them, or the same setting in both")
        return {**spec, **ours}
    return ours


_SENTENCES = {
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be greater than {gt}",
    "string_too_long": "is too long ({max_length} characters at most)",
    "extra_forbidden": "is not a setting vLLM takes here",
    "missing": "is required",
}


def _first_error(exc: ValidationError, context: Mapping[str, Any] | None = None) -> InputError:
    """The first pydantic error as one sentence naming the field (an :class:`InputError` raised inside a
    validator is passed through as it is). ``context``: the request's other values (``runtime``, ``vllm_version``),
    for the sentences that depend on them."""
    err = exc.errors()[0]
    ctx = err.get("ctx") or {}
    if isinstance(ctx.get("error"), InputError):
        return ctx["error"]
    loc = [str(p) for p in err.get("loc", ())]
    field = loc[0] if loc else "input"
    where = ".".join(loc[1:])
    kind = err.get("type", "")
    if kind in _SENTENCES:
        msg = _SENTENCES[kind].format(**ctx)
        if kind != "missing" and "input" in err and not isinstance(err["input"], (dict, list)):
            msg += f", got {err['input']!r}"
    else:
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        if kind == "literal_error":
            expected = str(ctx.get("expected") or "").strip()
            msg = (f"must be one of {expected}, got {err.get('input')!r}" if expected
                   else f"{msg}, got {err.get('input')!r}")
            near = nearest_choice(err.get("input"), re.findall(r"'([^']*)'", expected))
            if near is not None:
                msg += f"; did you mean {near!r}?"
            if field == "kv_cache_dtype" and str(err.get("input")) in _vllm_kv_cache_dtypes():
                msg = (f"{err.get('input')!r} is a --kv-cache-dtype vLLM {default_release()} accepts, but this calculator "
                       f"does not model its cache layout; modelled: {', '.join(get_args(KVCacheDType))}")
            if field == "speculative_config" and where == "method":
                msg += (" (or one of vLLM's per-architecture MTP names, run as mtp: deepseek_mtp, glm4_moe_mtp, "
                        "qwen3_next_mtp, qwen3_5_mtp, ...)")
                unmodelled = _unmodelled_vllm_method(err.get("input"), context or {})
                if unmodelled is not None:
                    sentence, replaces = unmodelled
                    msg = sentence if replaces else msg + sentence
    if field == "speculative_config" and kind == "extra_forbidden" and where in VLLM_SPECULATIVE_FIELDS:
        msg = ("is a setting of vLLM's speculative_config (SpeculativeConfig, vllm/config/speculative.py:387 in 0.32.0) "
               "that this calculator does not model; leave it out for the answer with vLLM's default for it")
    if field == "hf_overrides" and kind == "extra_forbidden" and where.startswith(("rope_scaling.", "rope_parameters.")):
        key = where.split(".")[-1]
        near = nearest_choice(key, [*RopeScalingOverride.model_fields, "type"])
        msg = ("is not a RoPE key the calculator reads or carries" + (f"; did you mean {near!r}?" if near else "")
               + f", got {err.get('input')!r}")
    if field in ("speculative_config", "hf_overrides") and where:
        msg = f"{where}: {msg}"
    return InputError(field, msg)


#: the user-settable fields of vLLM's SpeculativeConfig in the default release (vllm/config/speculative.py:387-2004 in
#: 0.32.0; the config objects vLLM fills itself, target_/draft_model_config, _parallel_config, draft_load_config, left
#: out): a key of these that SpeculativeRequest does not take is a real setting the calculator does not model, not a typo
VLLM_SPECULATIVE_FIELDS = frozenset((
    "enforce_eager", "num_speculative_tokens", "model", "method", "draft_tensor_parallel_size", "tensor_parallel_size",
    "quantization", "moe_backend", "attention_backend", "kv_cache_dtype", "max_model_len", "revision", "code_revision",
    "index_share_for_mtp_iteration", "disable_padded_drafter_batch", "disable_eagle_block_drop",
    "use_local_argmax_reduction", "use_heterogeneous_vocab", "prompt_lookup_max", "prompt_lookup_min",
    "parallel_drafting", "num_speculative_tokens_per_batch_size", "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob",
    "rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length",
    "enable_adaptive_verification", "draft_sample_method", "dspark_draft_topk"))


def _unmodelled_vllm_method(method: Any, context: Mapping[str, Any]) -> tuple[str, bool] | None:
    """The refusal of a ``speculative_config`` method that vLLM takes but the calculator does not model (``medusa``,
    ``mlp_speculator``, ``ngram_gpu``, ``dflash``, ``custom_class``...: vLLM's ``SpeculativeMethod`` literal,
    vllm/config/speculative.py:73-83 in 0.32.0, read per release into its compat data, ``speculative.methods``),
    for a vLLM request (``context``'s ``runtime``) of the release asked (``vllm_version``, else the default);
    Returns ``(sentence, replaces)``: ``replaces`` True for the whole refusal, False for a clause to append (a
    method of the default release that the release asked no longer or not yet takes); ``None`` otherwise (the plain
    "must be one of" is then right)."""
    runtime = str(context.get("runtime") or "vllm")
    if runtime != "vllm" or not isinstance(method, str):
        return None
    release = str(context.get("vllm_version") or "") or default_release()
    data_release = compat_release(release) if release_supported(release) else None
    if data_release is None:
        return None
    spec = _vllm_speculative(data_release)
    if method in spec.get("methods", ()):
        return (f"{method!r} is a speculative method vLLM {release} takes (SpeculativeMethod, {_cited(spec, data_release)}), "
                f"but this calculator does not model it (its draft's memory and speed); modelled: "
                f"{', '.join(get_args(SpecMethod))} (and vLLM's per-architecture MTP names, run as mtp)"), True
    default = default_release()
    if data_release != default and method in _vllm_speculative(default).get("methods", ()):
        return (f"; vLLM {release} does not take {method!r} either (its SpeculativeMethod, "
                f"{_cited(spec, data_release)}), vLLM {default} does"), False
    return None


def _vllm_speculative(release: str) -> dict[str, Any]:
    """The ``speculative`` section of a release's compat data (``methods``, ``source``); empty without data."""
    from compat import checks

    try:
        return checks.load_release(release).get("speculative") or {}
    except Exception:  # noqa: BLE001 - no compat data: the plain refusal is still right
        return {}


def _cited(spec: Mapping[str, Any], release: str) -> str:
    return f"{spec['source']} in {release}" if spec.get("source") else f"vLLM {release}"


@lru_cache(maxsize=1)
def _vllm_kv_cache_dtypes() -> frozenset[str]:
    """Every ``--kv-cache-dtype`` value of the default release (its compat data, ``cache_dtypes``)."""
    from compat import checks

    try:
        return frozenset(checks.load_release(default_release())["cache_dtypes"]["values"])
    except Exception:  # noqa: BLE001 - no compat data: the plain refusal is still right
        return frozenset()


def repeated_parameter(data: Mapping[str, Any]) -> InputError | None:
    """The error for a parameter given twice with different values (``?gpu=H100&gpu=A100``) in a query or form
    (a ``QueryDict``: any mapping with ``lists()``), else ``None``. Django's ``QueryDict`` would silently keep
    the last value; the same value repeated is harmless and accepted."""
    lists = getattr(data, "lists", None)
    if not callable(lists):
        return None
    for name, values in lists():
        given = list(dict.fromkeys(str(v) for v in values if v not in (None, "")))
        if len(given) > 1:
            shown = ", ".join(repr(v[:40]) for v in given[:3])
            return InputError(str(name)[:60], f"given {len(given)} different values ({shown}); give it once")
    return None


def gpu_choice_note(data: Mapping[str, Any]) -> str | None:
    """The sentence saying which card an answer is for when the raw parameters ``data`` (a query, a command's
    options) did not name one exactly, so the choice is never silent: no ``gpu`` (:data:`DEFAULT_GPU`), or a name the
    GPU catalog documents as fitting several cards with a default pick (:func:`calculator.engine.gpus.documented_choice`:
    ``A100`` is the 80 GB SXM4 of four A100s; names without a documented pick, ``M3 Max``, are refused instead).
    ``None`` when the card is named exactly (or the name is refused: the request says so)."""
    from calculator.engine.gpus import documented_choice

    raw = data.get("gpu")
    if raw in (None, ""):
        gpu = get_gpu(DEFAULT_GPU)
        return (f"gpu not given: planned for {gpu.name} (the default, gpu={DEFAULT_GPU}); give gpu (--gpu) to plan "
                "for your device")
    entry = documented_choice(str(raw))
    if entry is None:
        return None
    others = [c for c in entry.candidates if c != entry.choice]
    return (f"gpu {str(raw).strip()!r} fits {len(entry.candidates)} cards: planned for {entry.choice} ({entry.why}); "
            f"name the card for another ({', '.join(others)})")


def parse_request(data: Mapping[str, Any]) -> ServingRequest:
    """Raw parameters (query string, form data, ``vars(argparse_namespace)``, a stored run) -> request.

    Accepts the permalink's ``speculative_config`` JSON or the form's split ``speculative_method`` /
    ``speculative_model`` / ``num_speculative_tokens``, and with runtime=sglang SGLang's own
    ``speculative_algorithm`` / ``speculative_num_steps`` / ``speculative_draft_model_path``
    (:func:`sglang_speculative_config`); empty values mean "default"; token counts take vLLM's ``32k`` / ``32K``.

    Raises:
        InputError: the first problem, naming the parameter (an unknown one with the nearest known name,
            :func:`unknown_parameter`; with runtime llama.cpp or ollama the context as ``ctx_size``,
            :func:`runtime_named`).
    """
    try:
        return _parse_request(data)
    except InputError as exc:
        raise runtime_named(exc, data.get("runtime")) from None


def _parse_request(data: Mapping[str, Any]) -> ServingRequest:
    """:func:`parse_request` before its errors are named by the runtime's own parameters."""
    repeated = repeated_parameter(data)
    if repeated is not None:
        raise repeated
    raw: dict[str, str | None] = {}
    for name, value in data.items():
        if name in ALIASES:
            target = ALIASES[name]
            if data.get(target) not in (None, "") and value not in (None, "") and str(data[target]) != str(value):
                raise InputError(name, f"{name} is {target} under another name; give one of them")
            if value in (None, ""):
                continue
            name = target
        if name not in KNOWN_PARAMS:
            raise unknown_parameter(name)
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (dict, BaseModel)):
            value = _raw(value)
        raw[name] = _text(name, value)
    _attn_dp(raw)
    split_given = {k for k in SPLIT_SPEC_FIELDS if raw.get(k) not in (None, "")}
    spec = _speculative(raw)
    spec = _sglang_speculative(raw, spec)
    overrides = _hf_overrides(raw)
    values: dict[str, Any] = {}
    for name, text in raw.items():
        if text is None:
            continue
        kind = _kind(name)
        if kind is bool:
            low = text.lower()
            if low not in TRUE + FALSE:
                raise InputError(name, f"expected true or false, got {text!r}")
            values[name] = low in TRUE
        elif kind in (int, float):
            values[name] = _number(name, text)
        elif name == "attention_backend" and text.lower() == "auto":
            continue
        elif name == "quantization" and text.lower() in ("none", "auto"):
            continue
        else:
            values[name] = text
    if spec is not None:
        values["speculative_config"] = spec
    if overrides is not None:
        values["hf_overrides"] = overrides
    if "model" not in values:
        raise InputError("model", "give a model: a Hugging Face id of the form org/name")
    try:
        return ServingRequest(**values)
    except ValidationError as exc:
        raise _split_named(_first_error(exc, values), split_given) from None
    except InputError as exc:
        raise _split_named(exc, split_given) from None


#: the key of ``speculative_config`` each of the form's split parameters gives (:data:`SPLIT_SPEC_FIELDS`)
SPLIT_SPEC_KEYS = {"method": "speculative_method", "model": "speculative_model",
                   "num_speculative_tokens": "num_speculative_tokens"}


def _split_named(exc: InputError, given: set[str]) -> InputError:
    """``exc`` naming the split parameter given (``speculative_method`` / ``speculative_model`` /
    ``num_speculative_tokens``, :data:`SPLIT_SPEC_FIELDS`) instead of ``speculative_config``, which the request did
    not give: ``speculative_config`` with ``num_speculative_tokens: must be at most 16`` becomes
    ``num_speculative_tokens`` with ``must be at most 16``; a draft ``model`` the method needs or does not take is
    ``speculative_model``. The same exception, renamed in place (as :func:`runtime_named` does)."""
    if exc.field != "speculative_config" or not given:
        return exc
    key, sep, rest = exc.message.partition(": ")
    if sep and SPLIT_SPEC_KEYS.get(key) in given:
        exc.field, exc.message = SPLIT_SPEC_KEYS[key], rest
    elif '"model"' in exc.message:  # SpeculativeRequest._needs: the method needs a draft model, or takes none
        exc.field = "speculative_model"
    else:
        return exc
    exc.args = (f"{exc.field}: {exc.message}",)
    return exc


# --- command line ----------------------------------------------------------------------------------
class _Once(argparse.Action):
    """Stores a flag's value; a second, different value for the same setting (the flag repeated, or given again
    under an alias, ``--max-model-len`` and ``--context-length``) is refused, as the page and the API refuse two
    values for one parameter (:func:`repeated_parameter`). The parser is built per command run, so the values seen
    live on the action."""

    def _same(self, a: str, b: str) -> bool:
        """Two spellings of one value are one value: token counts as the request reads them (8K = 8192), other
        values case-insensitively (h100 = H100)."""
        field = ServingRequest.model_fields.get(self.dest)
        meta = (field.json_schema_extra or {}) if field is not None else {}
        if meta.get("tokens"):
            try:
                return human_readable_int(a) == human_readable_int(b)
            except ValueError:
                pass
        return a.strip().casefold() == b.strip().casefold()

    def __call__(self, parser, namespace, values, option_string=None):
        seen = self.__dict__.setdefault("_seen", None)
        if seen is not None and not self._same(seen[1], values):
            raise argparse.ArgumentError(self, f"given 2 different values ({seen[0]} {seen[1]}, {option_string} "
                                               f"{values}): give one")
        self._seen = (option_string, values)
        setattr(namespace, self.dest, values)


# request fields that are views of the answer rather than settings of one server: only ``manage.py estimate`` takes
# them (``check_compat`` and ``validate`` answer one release's start-up)
ESTIMATE_ONLY = ("compare_vllm_version",)


def add_request_arguments(parser: argparse.ArgumentParser, *, model_required: bool = False,
                          exclude: tuple[str, ...] = ESTIMATE_ONLY) -> None:
    """Declare every request field as a flag (vLLM's names), derived from :class:`ServingRequest`, except
    ``exclude`` (by default :data:`ESTIMATE_ONLY`; ``estimate`` passes ``()``).

    Values stay strings: :func:`parse_request` checks them, so the commands refuse exactly what the page
    and the API refuse, with the same sentence. ``--config PATH`` / ``--quant-config PATH`` give a local
    ``config.json`` instead of a Hub model."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, info in ServingRequest.model_fields.items():
        if name in exclude:
            continue
        meta = info.json_schema_extra or {}
        group = groups.setdefault(meta["group"], parser.add_argument_group(meta["group"]))
        flags = [meta["flag"], *([meta["short"]] if meta.get("short") else []),
                 *("--" + a.replace("_", "-") for a in (meta.get("alias"), *meta.get("aliases", ())) if a)]
        if _kind(name) is bool:
            group.add_argument(*flags, action="store_true", default=None, help=meta["help"])
            continue
        choices = _choice_help(name)
        group.add_argument(*flags, dest=name, default=None, action=_Once,
                           metavar=name.upper() if not choices else None,
                           help=meta["help"] + (f" ({choices})" if choices else ""),
                           required=model_required and name == "model")
    sglang = groups.setdefault("sglang", parser.add_argument_group("sglang"))
    for name, flags, help in (
            ("speculative_algorithm", ["--speculative-algorithm"], "SGLang: EAGLE, EAGLE3, NEXTN, STANDALONE or NGRAM; "
             "with --speculative-num-steps and --speculative-draft-model-path it is speculative_config (EAGLE3 -> "
             "eagle3, STANDALONE -> draft_model, NGRAM -> ngram, EAGLE / NEXTN -> eagle with a draft path, mtp "
             "without)"),
            ("speculative_num_steps", ["--speculative-num-steps"], "SGLang: draft passes per step (speculative_config's "
             "num_speculative_tokens)"),
            ("speculative_draft_model_path", ["--speculative-draft-model-path", "--speculative-draft-model"],
             "SGLang: the draft model's Hugging Face id (speculative_config's model)"),
            (SGLANG_ATTN_DP, ["--attn-dp-size"], "SGLang 0.5.23: attention data-parallel size (--dp-size N "
             "--enable-dp-attention)")):
        sglang.add_argument(*flags, dest=name, default=None, action=_Once, metavar=name.upper(), help=help)
    local = parser.add_argument_group("local files")
    local.add_argument("--config", help="path to a config.json (instead of a Hub model)")
    local.add_argument("--quant-config", help="path to a separate quantization file (hf_quant_config.json ...)")
    local.add_argument("--draft-config", help="with --config: path to the draft model's config.json (instead of "
                       "looking up speculative_config's model)")


def _choice_help(name: str) -> str:
    annotation = ServingRequest.model_fields[name].annotation
    args = [a for a in get_args(annotation) if a is not type(None)]
    literal = next((a for a in args if get_args(a)), annotation)
    values = get_args(literal)
    if values and all(isinstance(v, str) for v in values):
        return "one of " + ", ".join(values)
    return ""


def local_model_id(path: str) -> str:
    """The model id of a local ``config.json``: ``Org/Name`` for the catalog's ``Org__Name.json`` naming,
    else ``local/<file stem>``."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".json")
    if "__" in stem:
        org, _, name = stem.partition("__")
        candidate = f"{org}/{name}"
        if HUB_ID_RE.fullmatch(candidate):
            return candidate
    stem = re.sub(r"[^A-Za-z0-9_.-]", "-", stem).lstrip("-._") or "config"
    return f"local/{stem[:90]}"


def request_from_options(opts: Mapping[str, Any]) -> ServingRequest:
    """:func:`parse_request` over parsed command-line options (``vars(args)`` or Django's ``options``);
    options that are not request fields (``--format``, ``--config``...) are left out. With ``--config``
    and no ``--model``, the request is named ``local/<file stem>``."""
    data = {k: v for k, v in opts.items() if (k in KNOWN_PARAMS or k in ALIASES) and v is not None}
    if opts.get("config") and not data.get("model"):
        data["model"] = local_model_id(str(opts["config"]))
    return parse_request(data)
