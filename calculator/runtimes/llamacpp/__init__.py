"""llama.cpp / Ollama on GGUF: header reader, tensor types from llama.cpp's quantization rules, start-up memory
plan, GGUF file listings, speed, launch commands (no Django, no torch)."""
from calculator.runtimes.llamacpp.gguf_meta import (
    GGUFError,
    GGUFMeta,
    GGUFTensor,
    meta_from_hf_config,
    read_gguf,
    read_gguf_from_hub,
)
from calculator.runtimes.llamacpp.gguf_repos import GGUFFile, GGUFListing, list_gguf_files
from calculator.runtimes.llamacpp.launch import launch_argv, ollama_config, ollama_run_argv, ollama_serve_argv
from calculator.runtimes.llamacpp.memory import (
    KV_CACHE_TYPES,
    RELEASES,
    LlamaCppPlan,
    NotModelled,
    ollama_defaults,
    plan,
)
from calculator.runtimes.llamacpp.quant_rules import FTYPES, derive_meta, ftype_from_filename, tensor_types

__all__ = [
    "FTYPES",
    "GGUFFile",
    "GGUFListing",
    "derive_meta",
    "ftype_from_filename",
    "list_gguf_files",
    "ollama_run_argv",
    "ollama_serve_argv",
    "tensor_types",
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
