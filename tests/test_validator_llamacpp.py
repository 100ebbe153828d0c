"""llama.cpp as the validator's second runtime: argv, start-up log parsing (a log llama_cpp.server wrote on this
machine, tests/data/llamacpp_server_startup.log), the plan against that log, configuration and capability gating."""
from __future__ import annotations

from pathlib import Path

import pytest

from validator import capabilities, llamacpp
from validator.config import ConfigurationError, build_configuration

LOG = (Path(__file__).parent / "data" / "llamacpp_server_startup.log").read_text()
MiB = 2**20


def test_server_argv_uses_llama_cpp_python_flags():
    argv = llamacpp.server_argv("/m/model.gguf", "tiny-random/llama", "127.0.0.1", 8123,
                                {"n_ctx": 1024, "flash_attn": "off"}, command=["py", "-m", "llama_cpp.server"])
    assert argv == ["py", "-m", "llama_cpp.server", "--model", "/m/model.gguf", "--model_alias", "tiny-random/llama",
                    "--n_ctx", "1024", "--n_gpu_layers", "0", "--flash_attn", "False", "--interrupt_requests",
                    "False", "--seed", "0", "--host", "127.0.0.1", "--port", "8123"]
    on = llamacpp.server_argv("m.gguf", "a", "h", 1, {"n_ctx": 512, "flash_attn": "on"})
    assert on[on.index("--flash_attn") + 1] == "True"


def test_parse_startup_log_of_a_real_server():
    found = llamacpp.parse_startup_log(LOG)
    # tiny-random/llama's shapes: 2 layers, 2 KV heads x head_dim 32, f16 K and V, n_ctx 1024
    kv_bytes = 2 * 1024 * (2 * 32) * 2 * 2
    [kv] = found["kv"]
    assert (kv["cells"], kv["layers"], kv["seqs"], kv["type_k"], kv["type_v"]) == (1024, 2, 1, "f16", "f16")
    assert kv["size_mib"] == round(kv_bytes / MiB, 2) == 0.5
    assert set(found["model_buffers"]) == {"AMX", "CPU_Mapped"}
    assert found["compute_buffers"]["CPU"] > 0
    assert (found["n_ctx"], found["n_seq_max"], found["flash_attn"]) == (1024, 1, "disabled")
    assert {"avx2", "avx512", "amx_int8"} <= set(found["cpu_features"])


def test_the_plan_equals_the_logged_buffers(tmp_path):
    """The GGUF the run wrote is deterministic (the built-in tokenizer, zero weights): re-written here, its plan
    with the logged CPU features gives the KV cache and model buffers exactly, the compute buffer within error."""
    from calculator.crosscheck.tiny_models import write_tokenizer
    from calculator.metadata import builtin

    cfg = builtin.builtin_config("tiny-random/llama")
    write_tokenizer(tmp_path, cfg["vocab_size"])
    gguf = llamacpp.write_run_gguf(tmp_path, cfg, tmp_path / "model.gguf")
    logged = llamacpp.parse_startup_log(LOG)
    _, plan = llamacpp.predict(gguf, {"n_ctx": 1024, "flash_attn": "off"}, logged["cpu_features"])
    rows = {r["field"]: r for r in llamacpp.memory_comparison(plan, logged)}
    for field in ("kv_cache_mib", "model_buffer_mib[AMX]", "model_buffer_mib[CPU_Mapped]"):
        assert rows[field]["predicted"] == rows[field]["measured"], rows[field]
        assert rows[field]["note"] == "exact"
    assert "within stated error" in rows["compute_buffer_mib[CPU]"]["note"]


def test_installed_runtimes_list_llama_cpp_only_when_its_server_can_start(monkeypatch):
    monkeypatch.setattr(llamacpp, "server_available", lambda: (None, "llama-cpp-python is not installed"))
    assert "llama.cpp" not in capabilities.installed_runtimes()
    monkeypatch.setattr(llamacpp, "server_available", lambda: ("0.3.36", ""))
    assert capabilities.installed_runtimes()["llama.cpp"] == {"release": "0.3.36", "distribution": "llama-cpp-python"}


def test_server_available_names_the_missing_server_extra(monkeypatch):
    import importlib.util

    from importlib import metadata

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda m: None if m == "starlette_context" else real(m))
    # llama-cpp-python itself present (the default install has no llama.cpp: pretend 0.3.36 is there)
    real_version = metadata.version
    monkeypatch.setattr(metadata, "version",
                        lambda name: "0.3.36" if name == "llama-cpp-python" else real_version(name))
    release, why = llamacpp.server_available()
    assert release is None and "starlette_context" in why and "llama-cpp-python[server]" in why
    assert why.startswith("llama-cpp-python 0.3.36 lacks its server extra")
    # and without the package at all, the message says so
    monkeypatch.setattr(metadata, "version", lambda name: (_ for _ in ()).throw(metadata.PackageNotFoundError(name)))
    release, why = llamacpp.server_available()
    assert release is None and why.startswith("llama-cpp-python is not installed")


def _worker(runtimes):
    return {"worker_id": "w", "host": "h", "hardware": {"platform": "cpu"}, "runtimes": runtimes}


def test_who_can_run_a_llama_cpp_run():
    cfg = build_configuration({"model": "tiny-random/llama", "runtime": "llama.cpp", "gpu": "CPU"})
    vllm_only = capabilities.who_can_run(cfg, [_worker({"vllm": {"release": "0.32.0"}})])
    assert not vllm_only["ok"] and "llama.cpp" in vllm_only["message"]
    assert not capabilities.who_can_run(cfg, [])["ok"]
    assert capabilities.who_can_run(cfg, [_worker({"llama.cpp": {"release": "0.3.36"}})])["ok"]
    # a vLLM run is not offered to a worker that has llama.cpp only
    vcfg = build_configuration({"model": "tiny-random/llama", "gpu": "CPU"})
    assert not capabilities.who_can_run(vcfg, [_worker({"llama.cpp": {"release": "0.3.36"}})])["ok"]


def test_llama_cpp_configuration_runs_no_draft_model_and_says_why():
    cfg = build_configuration({"model": "tiny-random/llama", "runtime": "llama.cpp", "gpu": "CPU",
                               "speculative_config": '{"method": "ngram", "num_speculative_tokens": 3}'})
    assert cfg["runtime"] == "llama.cpp" and cfg["spec_config"] is None
    assert llamacpp.DRAFT_NOTE in cfg["adjustments"]
    assert cfg["llamacpp"]["settings"] == {"n_ctx": 1024, "flash_attn": "off"}
    assert cfg["llamacpp"]["command"][0] == "llama-server"
    assert cfg["profile"]["concurrency"] == 1


def test_llama_cpp_runs_need_the_cpu():
    with pytest.raises(ConfigurationError) as e:
        build_configuration({"model": "tiny-random/llama", "runtime": "llama.cpp", "gpu": "H100"})
    assert e.value.field == "gpu"


def test_a_gguf_repo_of_the_offline_gguf_catalog_is_validated_with_its_stand_in(offline_hub):
    """bartowski/Meta-Llama-3.1-8B-Instruct-GGUF has no config.json: the page answers it from the offline GGUF
    catalog (calculator/data/gguf_repos.json names its base model, meta-llama/Llama-3.1-8B-Instruct, a
    LlamaForCausalLM). The validation offer must read the model the same way: the reason it is not offered is the
    missing llama.cpp worker, as for a built-in model, not "neither in the database cache nor in the offline
    catalog"."""
    from validator.templatetags.validator_tags import validation_offer

    params = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "llama.cpp", "gpu": "CPU",
              "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"}
    cfg = build_configuration(params)
    assert cfg["runtime"] == "llama.cpp" and cfg["run_model"] == "tiny-random/llama"
    assert "LlamaForCausalLM" in cfg["model_source"]
    offer = validation_offer(list(params.items()))
    builtin = validation_offer([("model", "tiny-random/llama"), ("runtime", "llama.cpp"), ("gpu", "CPU")])
    assert "neither in the database cache" not in offer["message"]
    assert offer["message"] == builtin["message"] and "llama-cpp-python" in offer["message"]
