"""The runtime seam: what each serving runtime contributes, behind one small interface.

``get_runtime(request.runtime)`` returns the runtime that answers a :class:`~calculator.request.
ServingRequest`: its releases and defaults, memory plan, compatibility check, launch command and speed
efficiencies (see :class:`~calculator.runtimes.base.Runtime`). vLLM is :mod:`calculator.runtimes.vllm`.
Adding a runtime = one package here implementing ``Runtime`` plus one line in ``RUNTIMES``.
"""
from __future__ import annotations

from calculator.engine.errors import EngineInputError

from .base import LoadedModel, Runtime

_REGISTRY: dict[str, str] = {
    "vllm": "calculator.runtimes.vllm:VLLM",
    "sglang": "calculator.runtimes.sglang.runtime:SGLang",
    "llama.cpp": "calculator.runtimes.llamacpp.runtime:LlamaCpp",
    "ollama": "calculator.runtimes.llamacpp.runtime:Ollama",
}


def get_runtime(name: str) -> Runtime:
    """The runtime named ``name`` (``vllm``, ``sglang``, ``llama.cpp``, ``ollama``).

    Raises:
        EngineInputError: on ``runtime`` for a name with no package.
    """
    import importlib

    target = _REGISTRY.get(name)
    if target is None:
        raise EngineInputError("runtime", f"unknown runtime {name!r}; this calculator answers {', '.join(_REGISTRY)}")
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)()


__all__ = ["get_runtime", "Runtime", "LoadedModel"]
