"""Pydantic models in and out of the memory engine.

Names follow vLLM's engine arguments (``vllm serve --help``): a field here is the flag without the
leading dashes, in snake_case. ``None`` means "the release's default", which the engine resolves and
reports in ``EstimateResult.resolved`` with the source of each default.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from .mtp import MTP_METHOD_NAMES

SpecMethod = Literal["ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp"]


def normalise_mtp_method(data: Any) -> Any:
    """A ``--speculative-config`` dict whose ``method`` is one of vLLM's per-architecture MTP names
    (``qwen3_next_mtp``, ``deepseek_mtp``... :data:`calculator.engine.mtp.MTP_METHOD_NAMES`) becomes ``method: mtp``
    with the name kept in ``vllm_method``, as vLLM does ("method `%s` is deprecated and replaced with mtp",
    vllm/config/speculative.py:1141-1145 in 0.32). ``vllm_method`` is not a key a user may give."""
    if isinstance(data, dict):
        if "vllm_method" in data:
            raise ValueError("vllm_method is not a key of vLLM's --speculative-config")
        if data.get("method") in MTP_METHOD_NAMES:
            data = {**data, "method": "mtp", "vllm_method": data["method"]}
    return data


class MtpNameMixin:
    """``method`` as vLLM runs it (``mtp``) and ``vllm_name``, the name the user gave (written back in every dump,
    so the launch command and the permalink keep ``qwen3_next_mtp``)."""

    @model_validator(mode="before")
    @classmethod
    def _mtp_name(cls, data: Any) -> Any:
        return normalise_mtp_method(data)

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        out = handler(self)
        if isinstance(out, dict) and getattr(self, "vllm_method", None):
            out["method"] = self.vllm_method
        return out

    @property
    def vllm_name(self) -> str:
        """The method name as the user gave it (``mtp`` or a per-architecture alias such as ``qwen3_5_mtp``)."""
        return getattr(self, "vllm_method", None) or self.method
DType = Literal["auto", "bfloat16", "float16", "float32"]
KVCacheDType = Literal["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]


class SpeculativeConfig(MtpNameMixin, BaseModel):
    """``--speculative-config`` as vLLM takes it (JSON). Extra keys (``prompt_lookup_max``...) are kept. A
    per-architecture MTP name is run as ``mtp`` (:class:`MtpNameMixin`)."""

    model_config = ConfigDict(extra="allow")

    method: SpecMethod
    vllm_method: str | None = Field(None, exclude=True, repr=False)
    model: str | None = None
    num_speculative_tokens: int = Field(ge=1, le=64)


class CheckpointWeights(BaseModel):
    """What the checkpoint stores, read from safetensors headers (or counted on the meta device).

    ``bytes_by_dtype`` maps a safetensors dtype (``BF16``, ``F8_E4M3``, ``I32``...) to the bytes of all
    tensors of that dtype; ``params_by_dtype`` the element counts. ``source`` says where they came from,
    e.g. ``safetensors headers of meta-llama/Llama-3.1-8B @ 0e9e39f``.
    """

    bytes_by_dtype: dict[str, int] = {}
    params_by_dtype: dict[str, int] = {}
    source: str


class EngineInput(BaseModel):
    """Everything the memory engine needs. ``hf_config`` is the model's ``config.json`` as a dict."""

    model_config = ConfigDict(extra="forbid")

    hf_config: dict[str, Any]
    quant_config: dict[str, Any] | None = None
    weights: CheckpointWeights | None = None
    model_label: str = "config.json"
    model_source: str = "config.json given by the user"
    draft_hf_config: dict[str, Any] | None = None
    draft_weights: CheckpointWeights | None = None

    gpu: str = "NVIDIA H100 80GB HBM3"
    # The memory the driver reports, when it differs from the catalog (vGPU, MIG slice, another driver).
    gpu_memory_gib: float | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    # GPUs in one machine (speed only: a tensor-parallel group larger than a node all-reduces over the network)
    gpus_per_node: int = Field(8, ge=1)
    # --data-parallel-size / --enable-expert-parallel: MoE layers span tp x dp ranks (figures stay per GPU)
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    dtype: DType = "auto"
    quantization: str | None = None
    kv_cache_dtype: KVCacheDType = "auto"
    block_size: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enforce_eager: bool = False
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a max_model_len above the derived maximum starts, with vLLM's warning
    allow_long_max_model_len: bool = False
    vllm_version: str = "0.32.0"
    speculative_config: SpeculativeConfig | None = None
    attention_backend: str | None = None
    # --kv-cache-memory-bytes (and VLLM_CPU_KVCACHE_SPACE on the CPU build): skips the budget rule.
    kv_cache_memory_bytes: int | None = None
    # Memory other processes hold on the GPU when vLLM starts (--gpu-memory-in-use-gib); only vLLM 0.34's extensible
    # KV cache, sized from the memory it measures free, depends on it. None: nothing else on the GPU.
    gpu_memory_in_use_gib: float | None = Field(None, ge=0)
    # CPU build only: whether the host CPU has AVX-512 BF16 (vLLM then keeps the SSM state in float32);
    # None = this machine's CPU.
    cpu_avx512_bf16: bool | None = None
    # VLLM_PP_LAYER_PARTITION: layers per pipeline stage, e.g. "17,15" (None: vLLM's own split)
    pp_layer_partition: str | None = None


class LayerKV(BaseModel):
    """KV cache of one layer type on one GPU. ``bytes_per_token`` is summed over the layers of the type
    (for Mamba/linear-attention state: the per-request state, reported in ``state_bytes_per_request``)."""

    kind: str  # full_attention | sliding_window | chunked_local | mla | mamba | cross_attention
    num_layers: int
    block_size: int
    page_size_bytes: int  # one block of one layer
    bytes_per_token: int
    state_bytes_per_request: int = 0
    detail: str = ""
    draft: bool = False


class EstimateResult(BaseModel):
    """Per-GPU prediction of what vLLM logs at startup. GiB are 2**30 bytes.

    ``sources`` maps each field name to where its value comes from (a config key, a vLLM file:line,
    a fit to public logs, user input).
    """

    model: str
    gpu: str
    vllm_version: str
    total_memory_gib: float
    requested_memory_gib: float
    weights_gib: float
    draft_weights_gib: float
    activation_peak_gib: float
    non_torch_gib: float
    cuda_graph_gib: float
    cuda_graph_deducted: bool
    available_kv_cache_gib: float
    kv_cache_tokens: int
    num_gpu_blocks: int
    max_concurrency: float
    max_model_len: int
    block_size: int
    kv_bytes_per_token: int
    kv_by_layer_type: list[LayerKV]
    draft_kv_bytes_per_token: int
    fits: bool
    reason: str | None = None
    estimated_max_model_len: int | None = None
    #: set when the plan does not fit with the overheads as fitted but would at the low end of one the public logs do
    #: not pin down for this GPU (non-torch memory at tp > 1): the verdict then depends on it, ``reason`` says why
    #: the figures as shown do not fit
    fit_condition: str | None = None
    warnings: list[str] = []
    resolved: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def to_json(self) -> dict[str, Any]:
        """The dict ``estimate --format json`` and ``/api/estimate`` return."""
        return self.model_dump(mode="json")
