"""llama.cpp / Ollama on GGUF: header reader, start-up memory plan, launch commands (no Django, no torch)."""
from calculator.runtimes.llamacpp.gguf_meta import (
    GGUFError,
    GGUFMeta,
    GGUFTensor,
    meta_from_hf_config,
    read_gguf,
    read_gguf_from_hub,
)
from calculator.runtimes.llamacpp.launch import launch_argv, ollama_config
from calculator.runtimes.llamacpp.memory import (
    KV_CACHE_TYPES,
    RELEASES,
    LlamaCppPlan,
    NotModelled,
    ollama_defaults,
    plan,
)

__all__ = [
    "KV_CACHE_TYPES",
    "RELEASES",
    "GGUFError",
    "GGUFMeta",
    "GGUFTensor",
    "LlamaCppPlan",
    "NotModelled",
    "launch_argv",
    "meta_from_hf_config",
    "ollama_config",
    "ollama_defaults",
    "plan",
    "read_gguf",
    "read_gguf_from_hub",
]
