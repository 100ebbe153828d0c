"""The interface a serving runtime implements (vLLM today; SGLang and llama.cpp next).

A runtime turns a :class:`~calculator.request.ServingRequest` plus the model's metadata into:

- ``memory(request, model)``: the start-up memory plan per GPU, as the runtime logs it (weights, KV
  cache memory and tokens, concurrency), each figure with its source;
- ``compat(request, model, memory)``: whether the backend / GPU / dtype / KV dtype / release combination
  starts, with the runtime's own reasons (``None`` where the runtime has no such check);
- ``launch_argv(request, model)``: the command that reproduces the configuration, as an argv list;
- ``speed(request, model, memory)``: TTFT / ITL / throughput and speculative decoding;
- ``releases()`` / ``default_release()``: which releases it answers, each with its own rules.

The verdict (:mod:`calculator.verdict`) and the page read only these results, so a new runtime is one
package implementing this protocol and one line in ``calculator.runtimes._REGISTRY``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel


@dataclass(frozen=True)
class LoadedModel:
    """The model (and draft) a request names, as the metadata layer found them.

    ``meta`` is a :class:`calculator.metadata.hub.ModelMetadata` (Hub / cache / catalog / built-in) or ``None`` for
    a local ``config.json`` given on the command line, in which case ``config`` holds it.
    """

    repo_id: str
    config: dict[str, Any]
    source: str
    sha: str | None = None
    quant_config: dict[str, Any] | None = None
    weights: Any = None  # calculator.engine.schemas.CheckpointWeights
    notes: tuple[str, ...] = ()
    draft: LoadedModel | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class CompatSummary(BaseModel):
    """A runtime's start-up answer in the shape the verdict reads (``ok``: True / False / None = depends),
    for runtimes without vLLM's full per-backend report."""

    release: str
    gpu: str
    ok: bool | None
    error: str | None = None
    requested_backend: str | None = None
    auto_selected: str | None = None
    #: the backend the runtime runs instead of ``requested_backend`` when it replaces it at start-up (SGLang: fa3 with
    #: an fp8_e5m2 KV cache runs triton), else None
    runs_as: str | None = None
    auto_conditions: list[str] = []
    speculative: list = []
    backends: list = []
    reasons: list[str] = []


def speed_kwargs(request) -> dict[str, Any]:
    """The speed model's workload from a request: ``vllm bench serve --dataset-name random`` defaults
    (1024 in, 128 out, 1 in flight) where the request leaves them empty. ``num_prompts`` without
    ``concurrency`` is vllm bench serve's ``--request-rate inf`` without ``--max-concurrency``: all of them
    arrive at once (``arrival="burst"``, ``concurrency`` = ``num_prompts``), and so do they when ``--max-concurrency``
    is at least ``num_prompts`` (its semaphore never holds one back); with a smaller ``concurrency`` the run is a
    closed loop of that many in flight (``arrival="closed"``). With ``request_rate`` (``--request-rate R``) the keys
    ``request_rate`` and ``num_prompts`` (default 1000) are added and ``concurrency`` is the client's
    ``--max-concurrency`` (at most ``num_prompts``): an open loop of Poisson arrivals (perf.estimate_speed_plan).
    ``random_range_ratio`` (vllm bench serve's ``--random-range-ratio``, None when not given) sets the share of a
    closed loop's requests arriving in waves (perf.wave_share)."""
    common = {"prompt_len": request.prompt_len or 1024, "output_len": request.output_len or 128,
              "acceptance_rate": request.acceptance_rate, "acceptance_length": request.acceptance_length,
              "temperature": request.temperature, "workload": request.workload,
              "random_range_ratio": request.random_range_ratio}
    if request.request_rate is not None:
        # vllm bench serve --request-rate R: Poisson arrivals over num_prompts prompts, concurrency its --max-concurrency
        from calculator.engine.perf import DEFAULT_NUM_PROMPTS

        n = request.num_prompts or DEFAULT_NUM_PROMPTS
        return {**common, "concurrency": min(request.concurrency or n, n), "arrival": "closed",
                "request_rate": request.request_rate, "num_prompts": n}
    burst = request.num_prompts is not None and (request.concurrency is None
                                                 or request.concurrency >= request.num_prompts)
    return {**common, "concurrency": request.num_prompts if burst else (request.concurrency or 1),
            "arrival": "burst" if burst else "closed"}


def given_workload_over(request, max_model_len: int) -> int | None:
    """``prompt_len + output_len`` (tokens) of a workload the user gave (``prompt_len`` or ``output_len``; the other
    at its :func:`speed_kwargs` default) when it is longer than ``max_model_len``, else None (no workload given, or
    it fits). The verdict and :func:`workload_fits` both read it."""
    if not (request.prompt_len or request.output_len):
        return None
    kw = speed_kwargs(request)
    total = kw["prompt_len"] + kw["output_len"]
    return total if total > max_model_len else None


def workload_fits(request, max_model_len: int, flag: str = "--max-model-len") -> None:
    """Refuse a speed prediction for a workload the user gave (``prompt_len`` or ``output_len``; the other at
    its default) that is longer than the context: vLLM's OpenAI server answers every request whose prompt +
    ``max_tokens`` exceed ``max_model_len`` with "This model's maximum context length is ..." (SGLang likewise
    beyond its context length), so there is no speed to predict. The default workload is not refused (the speed
    model warns instead). Raises ``EngineInputError("prompt_len")``."""
    total = given_workload_over(request, max_model_len) if max_model_len else None
    if total is not None:
        from calculator.engine.errors import EngineInputError

        raise EngineInputError("prompt_len", f"prompt_len + output_len = {total:,} tokens exceeds {flag} "
                                             f"{max_model_len:,}: the server refuses every such request, so there "
                                             "is no speed to predict; shorten them or raise the context")


class Runtime(Protocol):
    """What a serving runtime contributes. Implementations are stateless."""

    name: str
    label: str

    def releases(self) -> tuple[str, ...]: ...

    def default_release(self) -> str: ...

    def memory(self, request, model: LoadedModel): ...

    def compat(self, request, model: LoadedModel, memory) -> Any | None: ...

    def launch_argv(self, request, model: LoadedModel) -> list[str]: ...

    def speed(self, request, model: LoadedModel, memory): ...

    #: every key ``speed_fields`` can return: the JSON answer carries each one always (``null`` where it does not
    #: apply or there is no speed), so its key set never depends on the outcome
    speed_keys: tuple[str, ...]
