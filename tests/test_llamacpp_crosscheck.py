"""The llama.cpp oracle: every tiny-GGUF case's KV cache, model and output buffers as llama.cpp logs them
must equal memory.plan() at the log's precision, and its CPU compute buffer must lie within the compute-buffer
estimate's stated error (an estimate, never reported as exact). Needs llama-cpp-python==0.3.36 (optional group
'llamacpp'); skipped, saying so, without it. The log parser is tested on a public log line always."""
from __future__ import annotations

import pytest

pytest.importorskip("gguf")

from calculator.runtimes.llamacpp.crosscheck import (
    CASES,
    COMPUTE_CASES,
    PASSING,
    WITHIN,
    Case,
    compare,
    have_llama_cpp,
    parse_log,
    run_cases,
)


def test_parse_log_reads_the_public_lines():
    # lcpp-019 (llama.cpp b8680, gemma-4-E4B) as quoted in /work/shared/cases/runtime_startup_logs.json
    text = """load_tensors:   CPU_Mapped model buffer size =   680.00 MiB
load_tensors:  MTL0_Mapped model buffer size =  7798.32 MiB
llama_context:        CPU  output buffer size =     1.00 MiB
llama_kv_cache:       MTL0 KV buffer size =  1024.00 MiB
llama_kv_cache: size = 1024.00 MiB ( 65536 cells,   4 layers,  1/1 seqs), K (f16):  512.00 MiB, V (f16):  512.00 MiB
llama_kv_cache: size =   40.00 MiB (  1024 cells,  20 layers,  1/1 seqs), K (f16):   20.00 MiB, V (f16):   20.00 MiB
"""
    got = parse_log(text)
    assert got["model_buffers"] == {"CPU_Mapped": 680.0, "MTL0_Mapped": 7798.32}
    assert got["output_buffers"] == {"CPU": 1.0}
    assert [(k["cells"], k["layers"], k["k_mib"]) for k in got["kv"]] == [(65536, 4, 512.0), (1024, 20, 20.0)]
    compute = parse_log("sched_reserve:       MTL0 compute buffer size =   517.50 MiB\n"
                        "sched_reserve:        CPU compute buffer size =   140.02 MiB\n")["compute_buffers"]
    assert compute == {"MTL0": 517.5, "CPU": 140.02}


@pytest.mark.slow
@pytest.mark.skipif(not have_llama_cpp(), reason="llama_cpp not installed: pip install 'llama-cpp-python==0.3.36'")
def test_every_case_is_exact():
    results = run_cases(CASES)
    bad = [(r["case"], r["status"], [f for f in r["figures"] if f["status"] not in ("exact", WITHIN)]
            or r.get("log_tail")) for r in results if r["status"] not in PASSING]
    assert not bad, bad
    # every case was compared for its compute buffer (one CPU row each), none of them called exact
    compute = [f for r in results for f in r["figures"] if "compute buffer" in f["figure"]]
    assert len(compute) == len(results) and all(f["status"] == WITHIN for f in compute)


def test_compute_rows_are_checked_against_the_stated_error(tmp_path):
    """compare() on a tiny plan with two made-up logged values: inside the stated error it passes as an estimate,
    outside it fails; a case with only exact figures and a compute row is never plain "exact"."""
    from calculator.runtimes.llamacpp.crosscheck import write_tiny_gguf
    from calculator.runtimes.llamacpp.gguf_meta import read_gguf
    from calculator.runtimes.llamacpp.memory import plan

    m = read_gguf(write_tiny_gguf(tmp_path / "m.gguf", "llama", n_vocab=32000))
    p = plan(m, n_ctx=4096, device="CPU", flash_attn="on", n_gpu_layers=0)
    cb = p.buffer("compute", "CPU")
    est = round(cb.bytes / 2**20, 2)  # 62.75 MiB by hand: 32000 x 512 x 4 B + 2 x 64 x 512 x 4 B
    assert est == 62.75
    case = Case(name="t", arch="llama", n_ctx=4096, flash_attn="on")
    ok = compare(case, p, {"kv": [], "model_buffers": {}, "output_buffers": {}, "compute_buffers": {"CPU": est + 1}})
    row = next(f for f in ok["figures"] if "compute" in f["figure"])
    assert row["status"] == WITHIN and row["error_mib"] == round(cb.error_bytes / 2**20, 2)
    far = compare(case, p, {"kv": [], "model_buffers": {}, "output_buffers": {},
                            "compute_buffers": {"CPU": est + cb.error_bytes / 2**20 + 0.5}})
    assert next(f for f in far["figures"] if "compute" in f["figure"])["status"].startswith("outside")


def test_compute_cases_cover_the_settings():
    names = {c.name for c in COMPUTE_CASES}
    assert {c.flash_attn for c in COMPUTE_CASES} == {"on", "off"} and {c.n_ubatch for c in COMPUTE_CASES} >= {128, 256,
                                                                                                            512, 1024}
    assert {c.arch for c in COMPUTE_CASES} >= {"llama", "qwen3moe", "gemma3", "gpt-oss"} and len(names) == len(COMPUTE_CASES)
