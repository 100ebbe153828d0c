"""calculator.runtimes.llamacpp.memory against sizes worked out by hand from real configs
(/work/shared/data/model_configs via tests.conftest.CONFIGS) and against public llama.cpp / Ollama logs
(/work/shared/cases/runtime_startup_logs.json, quoted per test).

Rules used by hand (llama.cpp in llama-cpp-python 0.3.36): cells = n_ctx rounded up to 256 (per sequence
when the cache is not unified); per layer K bytes = cells x n_kv_heads x head_dim x bytes per value (f16 2,
q8_0 34/32, q4_0 18/32), times streams; SWA cache = pad256(min(cells, n_swa x (unified ? seqs : 1) + ubatch)).
"""
from __future__ import annotations

import json

import pytest

pytest.importorskip("gguf")

from calculator.runtimes.llamacpp import launch_argv, ollama_config, ollama_defaults, plan
from calculator.runtimes.llamacpp.crosscheck import write_tiny_gguf
from calculator.runtimes.llamacpp.gguf_meta import meta_from_hf_config, read_gguf
from calculator.runtimes.llamacpp.memory import (
    COMPUTE_ERR_ABS,
    COMPUTE_ERR_REL,
    KV_CACHE_TYPES,
    RELEASE_LEGACY,
    NotModelled,
    ggml_row_bytes,
    ollama_graph_size,
)
from tests.conftest import CONFIGS

MiB = 2 ** 20


def meta(name: str):
    return meta_from_hf_config(json.loads((CONFIGS / name).read_text()))


def test_block_sizes_match_ggml_and_the_gguf_package():
    import gguf

    # block_q8_0: f16 d + 32 x int8; block_q4_0: f16 d + 16 B of nibbles; q4_1 adds f16 m; q5_0 adds 4 B of
    # high bits; q5_1 both; iq4_nl like q4_0
    by_hand = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 2 + 32), "q4_0": (32, 2 + 16),
               "q4_1": (32, 2 + 2 + 16), "iq4_nl": (32, 2 + 16), "q5_0": (32, 2 + 4 + 16),
               "q5_1": (32, 2 + 2 + 4 + 16)}
    assert KV_CACHE_TYPES == by_hand
    for name, sizes in by_hand.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name.upper()]] == sizes
    assert ggml_row_bytes("q8_0", 1024) == 1088
    with pytest.raises(ValueError):
        ggml_row_bytes("q8_0", 48)


def test_llama_3_2_3b_matches_the_ollama_log():
    # lcpp-027: "llama_kv_cache: size = 448.00 MiB (4096 cells, 28 layers, 1/1 seqs), K (f16): 224.00 MiB"
    # by hand: 28 layers x 4096 cells x 8 kv heads x 128 x 2 B = 234,881,024 B = 224 MiB for K, same for V
    p = plan(meta("meta-llama__Llama-3.2-3B.json"), n_ctx=4096, device="Metal")
    (kv,) = p.kv_caches
    assert (kv.cells, len(kv.layers), kv.k_bytes, kv.v_bytes) == (4096, 28, 234_881_024, 234_881_024)
    assert kv.log_line() == ("llama_kv_cache: size =  448.00 MiB (  4096 cells,  28 layers,  1/1 seqs), "
                             "K (f16):  224.00 MiB, V (f16):  224.00 MiB")


def test_q8_0_and_q4_0_cache_bytes():
    m = meta("meta-llama__Llama-3.1-8B.json")  # 32 layers, 8 kv heads x 128 = 1024 per token
    p = plan(m, n_ctx=8192, cache_type_k="q8_0", cache_type_v="q4_0", flash_attn="on")
    (kv,) = p.kv_caches
    assert kv.k_bytes == 32 * 8192 * (1024 // 32 * 34)  # 285,212,672
    assert kv.v_bytes == 32 * 8192 * (1024 // 32 * 18)  # 150,994,944
    with pytest.raises(ValueError, match="flash attention"):
        plan(m, n_ctx=8192, cache_type_v="q8_0", flash_attn="off")
    assert plan(m, n_ctx=8192, cache_type_k="q8_0", flash_attn="off").kv_caches[0].k_bytes == kv.k_bytes


def test_context_padding_and_sequences():
    m = meta("meta-llama__Llama-3.2-1B.json")  # 16 layers, 8 x 64 = 512 per token
    p = plan(m, n_ctx=1000)
    assert (p.n_ctx, p.kv_caches[0].cells) == (1024, 1024)
    # 5000 -> 5120; per sequence 5120 // 3 = 1706 -> 1792; n_ctx becomes 3 x 1792 = 5376
    p = plan(m, n_ctx=5000, n_seq_max=3)
    assert (p.n_ctx, p.n_ctx_seq, p.n_stream, p.kv_caches[0].cells) == (5376, 1792, 3, 1792)
    assert p.kv_caches[0].k_bytes == 16 * 1792 * 512 * 2 * 3
    u = plan(m, n_ctx=5000, n_seq_max=3, kv_unified=True)
    assert (u.n_ctx, u.n_stream, u.kv_caches[0].cells) == (5120, 1, 5120)
    assert plan(m, n_ctx=0).n_ctx == 131072  # -c 0: the model's context_length


def test_legacy_padding_matches_the_vulkan_log():
    # lcpp-014 (mid-2025 build): n_ctx 70000 -> 70016 cells, 48 layers, K (f16) 3282.00 MiB.
    # by hand: GGML_PAD(70000, 32) = 70016 (no flash attention); 48 x 70016 x 4 kv heads x 128 x 2 B
    p = plan(meta("Qwen__Qwen3-30B-A3B.json"), n_ctx=70000, flash_attn="off", release=RELEASE_LEGACY)
    assert p.kv_caches[0].cells == 70016 and p.kv_caches[0].k_bytes == 48 * 70016 * 512 * 2
    assert round(p.kv_caches[0].k_bytes / MiB, 2) == 3282.00
    assert plan(meta("Qwen__Qwen3-30B-A3B.json"), n_ctx=70000).kv_caches[0].cells == 70144  # 0.3.36: pad 256


def test_gemma3_sliding_window_matches_ollamas_254_mib():
    # lcpp-026: gemma3:4b, 4096 ctx, Ollama "kv cache" device=Metal size="254.0 MiB".
    # by hand: 34 layers, every 6th (5, 11, 17, 23, 29) global = 5 layers x 4096 cells; 29 SWA layers x
    # pad256(1024 + 512) = 1536 cells; 4 kv heads x 256 = 1024 values per token, K + V f16:
    # 5 x 4096 x 1024 x 4 = 80 MiB, 29 x 1536 x 1024 x 4 = 174 MiB
    p = plan(meta("google__gemma-3-4b-it.json"), n_ctx=4096)
    full, swa = p.kv_caches
    assert full.layers == [5, 11, 17, 23, 29] and full.cells == 4096
    assert len(swa.layers) == 29 and swa.cells == 1536
    assert p.kv_bytes == 254 * MiB
    f = plan(meta("google__gemma-3-4b-it.json"), n_ctx=4096, swa_full=True)
    assert f.kv_caches[1].cells == 4096


def test_gpt_oss_unified_four_slots_matches_the_sycl_log():
    # lcpp-016: "size = 96.00 MiB (4096 cells, 12 layers, 4/1 seqs)" and SWA "24.00 MiB (1024 cells, 12 layers)"
    # by hand: 8 kv heads x 64 = 512; 12 x 4096 x 512 x 2 B x 2 = 96 MiB; SWA pad256(128 x 4 + 512) = 1024
    p = plan(meta("openai__gpt-oss-20b.json"), n_ctx=4096, n_seq_max=4, kv_unified=True)
    full, swa = p.kv_caches
    assert (full.cells, len(full.layers), full.total_bytes) == (4096, 12, 96 * MiB)
    assert (swa.cells, len(swa.layers), swa.total_bytes) == (1024, 12, 24 * MiB)
    assert "4/1 seqs" in full.log_line()
    # not unified: each of the 4 streams holds n_ctx / 4 = 1024 cells; SWA min(1024, 128 + 512) -> 768
    s = plan(meta("openai__gpt-oss-20b.json"), n_ctx=4096, n_seq_max=4)
    assert (s.kv_caches[0].cells, s.kv_caches[0].n_stream, s.kv_caches[1].cells) == (1024, 4, 768)


def test_partial_offload_places_layers_and_buffers(tmp_path):
    m = read_gguf(write_tiny_gguf(tmp_path / "m.gguf", "llama", n_layer=4, weight_type="Q8_0"))
    # -ngl 2 of 4 layers (+ output): i_gpu_start = 4 + 1 - 2 = 3 -> layer 3 and the output on the GPU
    # head size 16 has no ggml-cuda flash-attention kernel (fattn.cu:569-623): -fa auto resolves to disabled there
    assert plan(m, n_ctx=512, n_gpu_layers=2, device="CUDA").fa_enabled is False
    p = plan(m, n_ctx=512, n_gpu_layers=2, device="CUDA", flash_attn="on")
    assert p.layers_on_gpu == [3] and p.output_on_gpu
    kv = p.kv_caches[0]
    per_layer = 512 * 32 * 2  # cells x (2 kv heads x 16) x f16, K only
    assert kv.buffers == {"CPU": 3 * 2 * per_layer, "CUDA0": 2 * per_layer}
    cuda = p.buffer("model", "CUDA0").bytes
    # CUDA: each Q8_0 matrix gets one extra padded row of 512 - 64 = 448 values (14 blocks x 34 B), then 128-B
    # alignment; F32 norms just align. Layer 3: q(64 rows) k(32) v(32) o(64) gate(128) up(128) down(64 rows of
    # ne0=128: 384 extra values = 12 blocks); output.weight 256 rows x 64; norms 64 x 4 B.
    def q8(rows, ne0):
        size = rows * ne0 // 32 * 34 + (512 - ne0 % 512) // 32 * 34
        return (size + 127) // 128 * 128
    expected = (q8(64, 64) + q8(32, 64) * 2 + q8(64, 64) + q8(128, 64) * 2 + q8(64, 128)
                + 2 * 256 + q8(256, 64) + 256)
    assert cuda == expected
    cpu = p.buffer("model", "CPU_Mapped").bytes
    assert cpu > 0
    # compute buffers under partial offload: an estimate, labelled, and said to be unchecked for the split. By hand
    # (n_ubatch = n_ctx = 512 tokens, -fa on): layer 3's FFN phase is the peak on CUDA0: the f16 mask
    # 512 x 512 x 2 B + 3 FFN activations 3 x 128 x 512 x 4 B + 2 hidden states 2 x 64 x 512 x 4 B, plus the hidden
    # state copied in from the CPU layers (64 x 512 x 4 B).
    cb = p.buffer("compute", "CUDA0")
    assert cb.bytes == 512 * 512 * 2 + 3 * 128 * 512 * 4 + 2 * 64 * 512 * 4 + 64 * 512 * 4
    assert "largest live tensors" in cb.note and "partial offload" in cb.note and cb.error_bytes > 0


def test_cpu_mapped_buffer_is_the_file_range(tmp_path):
    path = write_tiny_gguf(tmp_path / "m.gguf", "llama", n_layer=2)
    m = read_gguf(path)
    p = plan(m, n_ctx=512, device="CPU")
    # one CPU_Mapped buffer from the first tensor's data to the end of the last one = file size - data start
    # (the writer pads each tensor to 32 B, and the last one ends the file)
    assert p.buffer("model", "CPU_Mapped").bytes == path.stat().st_size - m.data_offsets[0]


def test_not_modelled_and_bad_input():
    m = meta("meta-llama__Llama-3.2-1B.json")
    with pytest.raises(ValueError, match="cache_type_k"):
        plan(m, n_ctx=512, cache_type_k="q2_k")
    with pytest.raises(ValueError, match="n_seq_max"):
        plan(m, n_ctx=512, n_seq_max=0)
    with pytest.raises(NotModelled) as e:
        plan(m, n_ctx=512, release="b1234")
    assert e.value.field == "release"
    nemo = meta("meta-llama__Llama-3.2-1B.json").model_copy(update={"architecture": "mamba2"})
    with pytest.raises(NotModelled):
        plan(nemo, n_ctx=512)


def test_ollama_defaults_and_launch():
    d = ollama_defaults(total_vram_gib=5.3)  # lcpp-026: total_vram="5.3 GiB" default_num_ctx=4096
    assert (d.num_ctx, d.num_parallel, d.kv_cache_type, d.flash_attention, d.kv_size) == (4096, 1, "f16", "auto", 4096)
    # server/routes.go tiers are 23 / 47 GiB (not the docs' 24 / 48): a public engine log reads
    # "23.5 GiB -> 32768", "102.2 GiB -> 262144", "11.8 GiB -> 4096"
    assert ollama_defaults(total_vram_gib=23.5).num_ctx == 32768
    assert ollama_defaults(total_vram_gib=102.2).num_ctx == 262144
    assert ollama_defaults(total_vram_gib=11.8).num_ctx == 4096
    assert ollama_defaults(total_vram_gib=24, n_gpus=2).num_ctx == 262144  # summed over GPUs
    assert ollama_defaults(total_vram_gib=24, gpu_overhead_gib=2).num_ctx == 4096  # 22 GiB after the overhead
    assert ollama_defaults(total_vram_gib=80, num_ctx=32768, num_parallel=32).kv_size == 1048576
    with pytest.raises(ValueError, match="OLLAMA_KV_CACHE_TYPE"):
        ollama_defaults(total_vram_gib=8, kv_cache_type="q3")
    assert launch_argv("m.gguf", n_ctx=8192, n_parallel=2, flash_attn="on", cache_type_k="q8_0",
                       cache_type_v="q8_0", n_gpu_layers=99, draft_model_path="d.gguf") == [
        "llama-server", "-m", "m.gguf", "-c", "8192", "-np", "2", "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0",
        "-ngl", "99", "--spec-type", "draft-simple", "-md", "d.gguf"]  # 0.3.36: the spec type defaults to none
    cfg = ollama_config("llama3.2:3b", num_ctx=8192, num_parallel=2, kv_cache_type="q8_0", flash_attention=True)
    assert cfg["modelfile"] == "FROM llama3.2:3b\nPARAMETER num_ctx 8192\n"
    assert cfg["env"] == {"OLLAMA_NUM_PARALLEL": "2", "OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_FLASH_ATTENTION": "1"}
    with pytest.raises(ValueError, match="-np"):
        launch_argv("m.gguf", n_ctx=8192, n_parallel=0)
    # -c left out (None: llama-server's default, which --fit may lower) vs an explicit -c 0 (which it may not,
    # common/arg.cpp:1641-1646)
    assert "-c" not in launch_argv("m.gguf", n_ctx=None)
    assert launch_argv("m.gguf", n_ctx=0)[3:5] == ["-c", "0"]


def test_tied_embeddings_on_metal_match_the_cpu_mapped_log_line():
    # lcpp-027 (Llama 3.2 3B Q4_K_M on Metal, all 29/29 layers offloaded): "CPU_Mapped model buffer size =
    # 308.23 MiB". The input layer (token_embd) always stays on the CPU; in Q4_K_M files of tied-embedding
    # models it is Q6_K (210 B per 256 values): 128256 x 3072 / 256 x 210 = 323,205,120 B = 308.23 MiB.
    # The tied output duplicates token_embd into the GPU's mapped range, which therefore spans the file.
    from calculator.runtimes.llamacpp.gguf_meta import GGUFTensor

    m = meta("meta-llama__Llama-3.2-3B.json")
    emb = 128256 * 3072 // 256 * 210
    tensors = [GGUFTensor(name="token_embd.weight", ggml_type="Q6_K", type_id=14, shape=[3072, 128256],
                          n_elements=3072 * 128256, n_bytes=emb, offset=1000)]
    off = 1000 + emb
    for il in range(28):
        tensors.append(GGUFTensor(name=f"blk.{il}.attn_norm.weight", ggml_type="F32", type_id=0, shape=[3072],
                                  n_elements=3072, n_bytes=3072 * 4, offset=off))
        off += 3072 * 4
    tensors.append(GGUFTensor(name="output_norm.weight", ggml_type="F32", type_id=0, shape=[3072],
                              n_elements=3072, n_bytes=3072 * 4, offset=off))
    m = m.model_copy(update={"tensors": tensors})
    p = plan(m, n_ctx=4096, device="Metal")
    assert p.buffer("model", "CPU_Mapped").bytes == emb
    assert round(emb / MiB, 2) == 308.23
    assert p.buffer("model", "MTL0_Mapped").bytes == off + 3072 * 4 - 1000  # token_embd .. output_norm
    # -ngl counts the output layer first (llama-model.cpp:1589-1614): -ngl 28 of 28 layers + output gives
    # i_gpu_start = 29 - 28 = 1, so the output and layers 1..27 go to the GPU and layer 0 stays on the CPU
    q = plan(m, n_ctx=4096, device="Metal", n_gpu_layers=28)
    assert q.output_on_gpu and q.layers_on_gpu == list(range(1, 28))
    assert q.buffer("model", "CPU_Mapped").bytes == emb + 3072 * 4  # token_embd and layer 0's norm, adjacent
    # -ngl 0: everything in one CPU_Mapped range, no GPU buffer, KV on the CPU
    z = plan(m, n_ctx=4096, device="Metal", n_gpu_layers=0)
    assert z.buffer("model", "MTL0_Mapped") is None and not z.layers_on_gpu and not z.output_on_gpu
    assert z.buffer("model", "CPU_Mapped").bytes == off + 3072 * 4 - 1000
    assert z.kv_caches[0].buffers == {"CPU": 448 * MiB}


def test_quantized_cache_block_must_divide_the_head_size_with_flash_attention(tmp_path):
    # llama-context.cpp:3851-3870: with flash attention not disabled, q8_0 (blocks of 32) cannot cache a head
    # of 16 values; llama.cpp logs "K cache type q8_0 with block size 32 does not divide n_embd_head_k=16"
    m = read_gguf(write_tiny_gguf(tmp_path / "m.gguf", "llama", head_dim=16))
    with pytest.raises(ValueError, match="cache_type_k"):
        plan(m, n_ctx=512, cache_type_k="q8_0", flash_attn="auto")
    # without flash attention only whole rows count: 2 kv heads x 16 = 32 values = one q8_0 block per row
    assert plan(m, n_ctx=512, cache_type_k="q8_0", flash_attn="off").kv_caches[0].k_bytes == 4 * 512 * 34


def test_cpu_repack_takes_the_q4_0_matrices_on_avx2(tmp_path):
    # repack.cpp:4974-4979: Q4_0 with AVX2 and ne[1] % 8 == 0 -> CPU_REPACK; token_embd feeds GET_ROWS and
    # stays mapped. Q4_0 = 18 B per 32 values. Layer matrices (ne0 x ne1): q 128x128, k 128x64, v 128x64,
    # o 128x128, gate 128x128, up 128x128, down 128x128; output 128x256.
    m = read_gguf(write_tiny_gguf(tmp_path / "m.gguf", "llama", n_layer=2, n_embd=128, head_dim=32,
                                  weight_type="Q4_0"))
    q4 = lambda ne0, ne1: ne0 // 32 * 18 * ne1
    layer = q4(128, 128) * 5 + q4(128, 64) * 2
    p = plan(m, n_ctx=512, device="CPU", cpu_features={"avx2"})
    assert p.buffer("model", "CPU_REPACK").bytes == 2 * layer + q4(128, 256)
    # without the feature set nothing is repacked, and the plan says it assumed so
    u = plan(m, n_ctx=512, device="CPU")
    assert u.buffer("model", "CPU_REPACK") is None and any("CPU_REPACK" in n for n in u.notes)
    # with a CUDA device the host buffer type comes first: no repacking (llama-model.cpp:1099-1107)
    c = plan(m, n_ctx=512, device="CUDA", n_gpu_layers=0, cpu_features={"avx2"})
    assert c.buffer("model", "CPU_REPACK") is None and c.buffer("model", "CPU_Mapped") is not None
    assert plan(m, n_ctx=512, device="CUDA", n_gpu_layers=0, use_mmap=False).buffer("model", "CUDA_Host")


def test_sysinfo_features():
    from calculator.runtimes.llamacpp.crosscheck import cpu_features_from_sysinfo

    line = "SYSINFO: CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 0 | F16C = 1 | REPACK = 1 |"
    assert cpu_features_from_sysinfo(line) == {"avx2"}
    assert cpu_features_from_sysinfo("SYSINFO: CPU : NEON = 1 | DOTPROD = 1 | MATMUL_INT8 = 1 |") == {
        "neon", "dotprod", "i8mm"}


def test_mla_cache_with_and_without_v():
    # DeepSeek-V3 as llama.cpp's converter writes it (conversion/deepseek.py:326, 349-353): one KV head of
    # key_length 512 + 64 = 576 and value_length 512. q4_0 = 18 B per 32 values, 16384 cells, 61 layers.
    from calculator.runtimes.llamacpp.memory import RELEASE_PRE_VLESS

    m = meta("deepseek-ai__DeepSeek-V3.json")
    assert (m.n_head_kv[0], m.head_dim_k, m.head_dim_v, m.key_length_mla) == (1, 576, 512, 192)
    k = 61 * 16384 * (576 // 32 * 18)  # 323,813,376 B
    v = 61 * 16384 * (512 // 32 * 18)  # 287,834,112 B
    now = plan(m, n_ctx=16384, cache_type_k="q4_0", cache_type_v="q4_0", flash_attn="on")
    assert (now.kv_caches[0].k_bytes, now.kv_caches[0].v_bytes) == (k, 0)  # V-less since PR #19067
    old = plan(m, n_ctx=16384, cache_type_k="q4_0", cache_type_v="q4_0", flash_attn="on", release=RELEASE_PRE_VLESS)
    assert (old.kv_caches[0].k_bytes, old.kv_caches[0].v_bytes) == (k, v)
    # lcpp-024 (b7522): per-device "context" columns 76 + 57 + 57 + 392 = 582 MiB, each truncated to whole MiB
    assert 582 <= old.kv_bytes / MiB < 582 + 4


# ---------------------------------------------------------------- compute buffers (estimates with a stated error)


def test_compute_buffers_llama_3_2_3b_on_metal_against_the_public_log():
    """lcpp-027 (Ollama 0.21's llama.cpp runner, llama3.2:3b, -c 4096, n_ubatch 512, FA auto -> enabled, 29/29
    layers on Metal) logged "Metal compute buffer size = 256.50 MiB" and "CPU compute buffer size = 14.01 MiB".
    By hand from the config (vocab 128256, hidden 3072): the GPU peak is the output layer: logits f32
    128256 x 512 x 4 B = 250.5 MiB + 2 hidden states 2 x 3072 x 512 x 4 B = 12 MiB; the host holds the graph inputs:
    the f32 KQ mask 4096 x 512 x 4 B = 8 MiB, the token embeddings 3072 x 512 x 4 B = 6 MiB and tokens / positions /
    output ids 3 x 512 x 4 B. (That build predates PR #23764, which creates the mask f16 with flash attention:
    kq_mask_f16=False; with 0.3.36 the host mask is half: 4096 x 512 x 2 B.)"""
    p = plan(meta("meta-llama__Llama-3.2-3B.json"), n_ctx=4096, device="Metal", kq_mask_f16=False)
    gpu, host = p.buffer("compute", "MTL0"), p.buffer("compute", "CPU")
    assert gpu.bytes == 128256 * 512 * 4 + 2 * 3072 * 512 * 4
    assert host.bytes == 4096 * 512 * 4 + 3072 * 512 * 4 + 3 * 512 * 4
    assert round(host.bytes / MiB, 2) == 14.01  # as logged
    assert abs(gpu.bytes / MiB - 256.50) <= gpu.error_bytes / MiB  # 262.5 vs 256.5: within the stated error
    assert gpu.error_bytes == int(COMPUTE_ERR_REL * gpu.bytes) + COMPUTE_ERR_ABS
    assert "estimated from the reserved graph's largest live tensors" in gpu.note
    assert any("compute buffer size =   262.50 MiB" in line for line in p.log_lines())
    new = plan(meta("meta-llama__Llama-3.2-3B.json"), n_ctx=4096, device="Metal")  # 0.3.36: f16 mask
    assert new.buffer("compute", "CPU").bytes == 4096 * 512 * 2 + 3072 * 512 * 4 + 3 * 512 * 4
    assert new.buffer("compute", "MTL0").bytes == gpu.bytes


def test_compute_buffer_without_flash_attention_is_the_kq_matrix():
    """lcpp-014 (legacy build, Qwen3-30B-A3B, -c 70000 -> 70016 cells, FA off, Vulkan) failed to allocate a Vulkan0
    compute buffer of 4757131264 B. By hand: KQ f32 70016 x 512 x 32 heads x 4 B + the f32 mask 70016 x 512 x 4 B +
    6 hidden states 6 x 2048 x 512 x 4 B = 4757127168 B, 4 KiB short of the log."""
    p = plan(meta("Qwen__Qwen3-30B-A3B.json"), n_ctx=70000, flash_attn="off", release=RELEASE_LEGACY, device="Vulkan")
    cb = p.buffer("compute", "Vulkan0")
    assert cb.bytes == 70016 * 512 * 32 * 4 + 70016 * 512 * 4 + 6 * 2048 * 512 * 4 == 4757127168
    assert abs(cb.bytes - 4757131264) <= cb.error_bytes


def test_compute_buffer_on_a_cpu_build_is_one_buffer_and_kv_offload_off_is_not_modelled(tmp_path):
    m = read_gguf(write_tiny_gguf(tmp_path / "m.gguf", "llama", n_vocab=32000))
    p = plan(m, n_ctx=4096, device="CPU", flash_attn="on")
    [cb] = [b for b in p.buffers if b.kind == "compute"]
    # the logits 32000 x 512 x 4 B + 2 hidden states 2 x 64 x 512 x 4 B (llama-cpp-python 0.3.36 logs 62.75 MiB)
    assert (cb.buft, cb.bytes) == ("CPU", 32000 * 512 * 4 + 2 * 64 * 512 * 4)
    q = plan(m, n_ctx=4096, device="CUDA", offload_kqv=False)
    assert q.buffer("compute", "CUDA0").bytes is None and "not modelled" in q.buffer("compute", "CUDA0").note


def test_ollama_graph_size_is_ollamas_formula():
    """Ollama < 0.30 (fs/ggml/ggml.go GraphSize, llama case): fullOffload = max(4 x batch x (1 + 4 x embedding +
    context x (1 + heads)), 4 x batch x (embedding + vocab)); on Metal the partial graph equals it. llama3.2:3b,
    num_ctx 4096: max(4 x 512 x (1 + 12288 + 4096 x 25), 4 x 512 x (3072 + 128256)) = 256.5 MiB, the figure Ollama
    logged (lcpp-027 'compute graph device=Metal size="256.5 MiB"'). Llama-3.1-8B at 16384: the attention term
    4 x 512 x (1 + 16384 + 16384 x 33) wins."""
    g = ollama_graph_size(meta("meta-llama__Llama-3.2-3B.json"), num_ctx=4096, metal=True)
    assert g["reserved_bytes"] == 4 * 512 * (3072 + 128256) and g["reserved_bytes"] / MiB == 256.5
    g8 = ollama_graph_size(meta("meta-llama__Llama-3.1-8B-Instruct.json"), num_ctx=16384, metal=True)
    assert g8["reserved_bytes"] == 4 * 512 * (1 + 4 * 4096 + 16384 * 33)


def test_launch_argv_takes_a_hub_repo_instead_of_a_file():
    """-hf REPO (llama-server picks the file) or -hf REPO -hff FILE (the file named) replace -m FILE
    (common/arg.cpp:3060, :3070 in llama-cpp-python 0.3.36's llama.cpp); neither a file nor a repo is refused."""
    from calculator.runtimes.llamacpp.launch import launch_argv

    named = launch_argv("m-Q4_K_M.gguf", n_ctx=None, hf_repo="org/m-GGUF")
    assert named[:5] == ["llama-server", "-hf", "org/m-GGUF", "-hff", "m-Q4_K_M.gguf"] and "-m" not in named
    picked = launch_argv(None, n_ctx=8192, hf_repo="org/m-GGUF")
    assert picked[:5] == ["llama-server", "-hf", "org/m-GGUF", "-c", "8192"]
    assert launch_argv("m.gguf", n_ctx=None)[:3] == ["llama-server", "-m", "m.gguf"]
    with pytest.raises(ValueError, match="model_path: required"):
        launch_argv(None, n_ctx=None)
