"""Gemma 4 on llama.cpp: the GGUF metadata llama.cpp's converter writes for the real configs in the catalog, the KV
cache llama.cpp allocates for them (computed here by hand from config.json), the tensor table llama-quantize writes,
and the oracle cases (tiny Gemma 4 GGUFs loaded by llama-cpp-python 0.3.36)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("gguf")

from calculator.runtimes.llamacpp.gguf_meta import meta_from_hf_config
from calculator.runtimes.llamacpp.memory import MiB, NotModelled, plan
from calculator.runtimes.llamacpp.quant_rules import derive_meta, tensor_types

CONFIGS = Path(__file__).resolve().parents[1] / "calculator" / "data" / "model_configs"


def _cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def test_26b_a4b_metadata_from_the_config():
    """google/gemma-4-26B-A4B text_config: 30 layers, layer_types 5 sliding + 1 full (x5), head_dim 256 /
    global_head_dim 512, num_key_value_heads 8 / num_global_key_value_heads 2, sliding_window 1024, 128 experts top 8."""
    m = meta_from_hf_config(_cfg("google__gemma-4-26B-A4B"))
    assert m.architecture == "gemma4" and m.n_layer_all == 30
    assert m.sliding_window_pattern == ([True] * 5 + [False]) * 5
    assert (m.head_dim_k, m.head_dim_v, m.head_dim_k_swa, m.head_dim_v_swa) == (512, 512, 256, 256)
    assert m.n_head_kv == ([8] * 5 + [2]) * 5 and m.n_head == [16] * 30
    assert (m.sliding_window, m.shared_kv_layers, m.n_expert, m.n_expert_used) == (1024, 0, 128, 8)


@pytest.mark.parametrize("name, full, swa", [
    # 26B-A4B at -c 16384: 5 full layers x 2 KV heads x 512 x 2 B x 16384 cells (K, and the same for V);
    # 25 sliding layers x 8 x 256 x 2 B x 1536 cells (n_swa 1024 + n_ubatch 512, padded to 256)
    ("google__gemma-4-26B-A4B", (5, 16384, 5 * 2 * 512 * 2 * 16384), (25, 1536, 25 * 8 * 256 * 2 * 1536)),
    # 31B (text_config shared with google/gemma-4-31B-it): 10 full x 4 x 512, 50 sliding x 16 x 256
    ("nvidia__Gemma-4-31B-IT-NVFP4", (10, 16384, 10 * 4 * 512 * 2 * 16384), (50, 1536, 50 * 16 * 256 * 2 * 1536)),
])
def test_kv_cache_by_hand(name, full, swa):
    p = plan(meta_from_hf_config(_cfg(name)), n_ctx=16384, device="Metal")
    got = [(len(c.layers), c.cells, c.k_bytes) for c in p.kv_caches]
    assert got == [full, swa]
    assert all(c.v_bytes == c.k_bytes for c in p.kv_caches)  # K = V layers still cache V (Vcur = Kcur)
    if name.startswith("google"):
        assert [c.total_bytes / MiB for c in p.kv_caches] == [320.0, 300.0]


def test_kv_cache_parallel_and_swa_full():
    """-np 4 (per-sequence streams, n_ctx 16384 -> 4096 cells each) and --swa-full on the 26B-A4B."""
    m = meta_from_hf_config(_cfg("google__gemma-4-26B-A4B"))
    p = plan(m, n_ctx=16384, n_seq_max=4, device="Metal")
    # each stream: non-SWA 4096 cells, SWA pad(min(4096, 1024 + 512), 256) = 1536 cells; 4 streams
    assert [(c.cells, c.n_stream) for c in p.kv_caches] == [(4096, 4), (1536, 4)]
    assert p.kv_caches[0].k_bytes == 5 * 2 * 512 * 2 * 4096 * 4
    full = plan(m, n_ctx=16384, swa_full=True, device="Metal")
    assert full.kv_caches[1].cells == 16384


def test_26b_a4b_tensor_table_and_types():
    """The tensors of the converted 26B-A4B: 3 global (token_embd, output_norm, rope_freqs) + per layer 13 common
    + attn_v on the 25 sliding layers only (attention_k_eq_v) + 8 MoE tensors = 658; tied (no output.weight)."""
    arch, table, _ = tensor_types(_cfg("google__gemma-4-26B-A4B"), "Q4_K_M")
    names = {n: (ne, t) for n, ne, t in table}
    assert arch == "gemma4" and len(table) == 3 + 30 * 13 + 25 + 30 * 8 and "output.weight" not in names
    assert "blk.5.attn_v.weight" not in names and names["blk.4.attn_v.weight"][0] == [2816, 8 * 256]
    assert names["blk.5.attn_k.weight"][0] == [2816, 2 * 512] and names["rope_freqs.weight"] == ([256], "F32")
    assert names["blk.0.ffn_gate_up_exps.weight"] == ([2816, 2 * 704, 128], "Q4_K")
    # Q4_K_M ffn_down: use_more_bits(i, 30) -> Q6_K for layer 0, Q4_K for layer 3; a row of 704 (or 2112) is no
    # whole number of 256-blocks, so Q6_K falls back to Q8_0 and Q4_K to Q5_0 (tensor_type_fallback)
    assert names["blk.0.ffn_down_exps.weight"][1] == "Q8_0" and names["blk.3.ffn_down_exps.weight"][1] == "Q5_0"
    assert names["blk.0.ffn_down.weight"][1] == "Q8_0" and names["blk.3.ffn_down.weight"][1] == "Q5_0"
    # tied embeddings take the output's type (Q6_K); the router stays F32
    assert names["token_embd.weight"][1] == "Q6_K" and names["blk.0.ffn_gate_inp.weight"][1] == "F32"


def test_26b_a4b_q8_0_bytes_by_hand():
    """Q8_0: every matrix 34 B per 32 values, vectors and the router F32, summed from the config's numbers."""
    E, V, L, ff, ffe, X = 2816, 262144, 30, 2112, 704, 128
    mats = E * V
    f32 = E + 256  # output_norm, rope_freqs
    for il in range(L):
        swa = il % 6 != 5
        hd, kv = (256, 8) if swa else (512, 2)
        mats += E * 16 * hd * 2 + E * kv * hd * (2 if swa else 1) + 3 * E * ff + E * 2 * ffe * X + ffe * E * X
        f32 += 4 * E + 2 * hd + 1 + E * X + E + X + 3 * E  # norms, q/k norms, layer scale, router, its scales
    m = derive_meta(_cfg("google__gemma-4-26B-A4B"), "Q8_0")
    assert m.total_tensor_bytes == mats // 32 * 34 + 4 * f32


def test_e_models_with_shared_kv_are_refused_for_weights_but_not_for_kv():
    cfg = _cfg("google__gemma-4-26B-A4B")
    cfg["text_config"] = cfg["text_config"] | {"num_kv_shared_layers": 10, "hidden_size_per_layer_input": 256,
                                               "enable_moe_block": False}
    with pytest.raises(NotModelled, match="shared-KV layers"):
        derive_meta(cfg, "Q8_0")
    p = plan(meta_from_hf_config(cfg), n_ctx=8192, device="CPU")
    # layers 20..29 keep no cache: 3 full (5, 11, 17) and 17 sliding cached layers
    assert [len(c.layers) for c in p.kv_caches] == [3, 17]


def test_oracle_has_gemma4_cases():
    from calculator.runtimes.llamacpp.crosscheck import CASES, QuantCase

    g4 = [c for c in CASES if c.arch == "gemma4"]
    assert {c.ftype for c in g4 if isinstance(c, QuantCase)} >= {"Q4_K_M", "Q8_0"}
    assert any(c.model.get("n_expert") for c in g4 if isinstance(c, QuantCase))
    assert any(c.model.get("n_embd_per_layer") and c.model.get("shared_kv_layers") for c in g4)


@pytest.mark.slow
def test_gemma4_oracle_cases_pass():
    from calculator.runtimes.llamacpp.crosscheck import CASES, PASSING, have_llama_cpp, run_cases

    if not have_llama_cpp():
        pytest.skip("llama_cpp not installed: pip install 'llama-cpp-python==0.3.36'")
    results = run_cases([c for c in CASES if c.arch == "gemma4"])
    bad = [(r["case"], r["status"], r.get("log_tail")) for r in results if r["status"] not in PASSING]
    assert not bad, bad


def test_26b_a4b_host_part_places_rope_freqs_with_its_layer():
    """Gemma 4's rope_freqs has no blk. prefix but llama.cpp creates it with the first full-attention layer
    (src/models/gemma4.cpp:95-99; tensor_layer with meta), so with every layer on the GPU the system RAM --fit and
    the speed model count holds token_embd alone (the input layer, always on the CPU), not rope_freqs too."""
    from calculator.runtimes.llamacpp.fit import host_bytes

    m = derive_meta(_cfg("google__gemma-4-26B-A4B"), "Q8_0")
    p = plan(m, n_ctx=4096, device="CUDA")
    assert all(d != -1 for d in p.layer_devices)
    assert host_bytes(m, p)["weights"] == m.tensor("token_embd.weight").n_bytes
