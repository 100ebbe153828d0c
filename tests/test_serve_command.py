"""``serve_argv``: the ``vllm serve`` argv that reproduces a configuration (vLLM 0.32 flag names)."""

from __future__ import annotations

import json
import shlex

from calculator.engine.schemas import EngineInput, SpeculativeConfig
from calculator.runtimes.vllm.serve import serve_argv, serve_command
from tests.conftest import load_config

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def _inp(**kw) -> EngineInput:
    return EngineInput(hf_config=load_config("meta-llama__Llama-3.1-8B-Instruct.json"), **kw)


def test_it_leaves_release_defaults_to_vllm():
    assert serve_argv(_inp(), LLAMA) == ["vllm", "serve", LLAMA]


def test_it_writes_each_flag_the_user_set():
    argv = serve_argv(
        _inp(
            tensor_parallel_size=2,
            pipeline_parallel_size=2,
            max_model_len=8192,
            gpu_memory_utilization=0.85,
            dtype="float16",
            quantization="fp8",
            kv_cache_dtype="fp8",
            block_size=32,
            max_num_seqs=64,
            max_num_batched_tokens=4096,
            attention_backend="FLASHINFER",
            enforce_eager=True,
        ),
        LLAMA,
        revision="abc123",
    )
    assert argv == [
        "vllm",
        "serve",
        LLAMA,
        "--revision",
        "abc123",
        "--tensor-parallel-size",
        "2",
        "--pipeline-parallel-size",
        "2",
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        "0.85",
        "--dtype",
        "float16",
        "--quantization",
        "fp8",
        "--kv-cache-dtype",
        "fp8",
        "--block-size",
        "32",
        "--max-num-seqs",
        "64",
        "--max-num-batched-tokens",
        "4096",
        "--attention-backend",
        "FLASHINFER",
        "--enforce-eager",
    ]


def test_it_passes_speculative_config_as_json():
    spec = SpeculativeConfig(
        method="eagle3", model="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", num_speculative_tokens=3
    )
    argv = serve_argv(_inp(speculative_config=spec), LLAMA)
    assert argv[-2] == "--speculative-config"
    assert json.loads(argv[-1]) == {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 3,
    }


def test_it_quotes_the_json_for_a_shell():
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=5)
    command = serve_command(_inp(speculative_config=spec), LLAMA)
    assert shlex.split(command) == serve_argv(_inp(speculative_config=spec), LLAMA)
    assert command.endswith("""--speculative-config '{"method":"ngram","num_speculative_tokens":5}'""")


def test_it_parses_with_vllms_own_argument_parser():
    """Every flag we write is one ``vllm serve`` accepts (its parser, vLLM 0.32 CPU build)."""
    import pytest

    pytest.importorskip("vllm")
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=5)
    argv = serve_argv(
        _inp(
            tensor_parallel_size=2,
            max_model_len=8192,
            gpu_memory_utilization=0.85,
            kv_cache_dtype="fp8",
            block_size=32,
            max_num_seqs=64,
            max_num_batched_tokens=4096,
            attention_backend="FLASHINFER",
            enforce_eager=True,
            speculative_config=spec,
        ),
        LLAMA,
        revision="abc123",
    )
    parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
    args = parser.parse_args(["--model", argv[2], *argv[3:]])
    assert (args.model, args.revision, args.tensor_parallel_size, args.max_model_len) == (
        LLAMA,
        "abc123",
        2,
        8192,
    )
    assert (args.gpu_memory_utilization, args.kv_cache_dtype, args.block_size) == (0.85, "fp8", 32)
    assert (args.max_num_seqs, args.max_num_batched_tokens, args.enforce_eager) == (64, 4096, True)
    assert args.speculative_config == {"method": "ngram", "num_speculative_tokens": 5}
    assert str(args.attention_backend).endswith("FLASHINFER")
