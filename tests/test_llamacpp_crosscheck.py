"""The llama.cpp oracle: every tiny-GGUF case's KV cache, model and output buffers as llama.cpp logs them
must equal memory.plan() at the log's precision. Needs llama-cpp-python==0.3.36 (optional group
'llamacpp'); skipped, saying so, without it. The log parser is tested on a public log line always."""
from __future__ import annotations

import pytest

pytest.importorskip("gguf")

from calculator.runtimes.llamacpp.crosscheck import CASES, have_llama_cpp, parse_log, run_cases


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


@pytest.mark.slow
@pytest.mark.skipif(not have_llama_cpp(), reason="llama_cpp not installed: pip install 'llama-cpp-python==0.3.36'")
def test_every_case_is_exact():
    results = run_cases(CASES)
    bad = [(r["case"], r["status"], [f for f in r["figures"] if f["status"] != "exact"] or r.get("log_tail"))
           for r in results if r["status"] != "exact"]
    assert not bad, bad
