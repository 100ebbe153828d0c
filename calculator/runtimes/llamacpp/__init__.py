"""llama.cpp / Ollama on GGUF: header reader, start-up memory plan, launch commands (no Django, no torch)."""
from calculator.runtimes.llamacpp.gguf_meta import GGUFError, GGUFMeta, GGUFTensor, read_gguf, read_gguf_from_hub
from calculator.runtimes.llamacpp.launch import launch_argv, ollama_config
from calculator.runtimes.llamacpp.memory import (
    KV_CACHE_TYPES,
    LlamaCppPlan,
    NotModelled,
    ollama_defaults,
    plan,
)

__all__ = [
    "GGUFError", "GGUFMeta", "GGUFTensor", "read_gguf", "read_gguf_from_hub", "launch_argv", "ollama_config",
    "KV_CACHE_TYPES", "LlamaCppPlan", "NotModelled", "ollama_defaults", "plan",
]
