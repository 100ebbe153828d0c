"""The batch size Ollama passes to its runner, the slots it forces, and its out-of-memory retry, per release.

The expected values are worked out by hand from the Go source (ollama/ollama, server/sched.go
``automaticGenerationBatch`` and its helpers, the same text from v0.30.0 to v0.33.0-rc2):

* start: 2048 above 32,768 cells, 1024 above 4,096, else 512 (``generationBatchForContext``);
* keep 2048 while ``predicted <= available x 60 / 100`` and ``2 GiB <= available x 80 / 100 - predicted``; 1024
  while ``predicted <= available x 75 / 100`` and ``768 MiB <= available x 80 / 100 - predicted``; else 512;
* flash attention disabled on a CUDA device: 512, or 256 above 4,096 cells on a CUDA GPU of at most 8 GiB.

Before 0.30 the runner gets ``BatchSize = min(num_batch 512, num_ctx)`` (llm/server.go:173) and makes its llama.cpp
context with ``n_batch = BatchSize x parallel, n_ubatch = BatchSize`` (llama/llama.go:125-126).

When a mirror of github.com/ollama/ollama is on this machine (``LLMCALC_OLLAMA_GIT``, default
/work/.mirror/ollama+ollama/repo) the cited lines are read back from every covered tag."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from calculator.runtimes.llamacpp import ollama as og
from calculator.runtimes.llamacpp.gguf_meta import meta_from_hf_config
from tests.conftest import load_config

MiB, GiB = 2**20, 2**30


@pytest.mark.parametrize("cells, start", [(1, 512), (4096, 512), (4097, 1024), (32768, 1024), (32769, 2048),
                                          (262144, 2048)])
def test_the_batch_starts_from_the_cells(cells, start):
    # generationBatchForContext: effectiveCtx > 32768 -> 2048, > 4096 -> 1024, else 512
    assert og.batch_for_context(cells) == start
    # with nothing predicted (or no free memory figure) every batch "fits": the start is kept
    assert og.automatic_batch(cells, 0, 24 * GiB, fa_disabled=False, cuda=True, cuda_memory=24 * GiB) == start
    assert og.automatic_batch(cells, 10 * GiB, 0, fa_disabled=False, cuda=False, cuda_memory=0) == start


@pytest.mark.parametrize("predicted_gib, available_gib, want", [
    # 24 GiB free: 60% = 14.4, 75% = 18, 80% = 19.2 GiB
    (14.0, 24, 2048),  # 14 <= 14.4 and 19.2 - 14 = 5.2 >= 2
    (14.5, 24, 1024),  # 14.5 > 14.4; 14.5 <= 18 and 19.2 - 14.5 = 4.7 >= 0.75
    (18.1, 24, 512),  # 18.1 > 18
    # 8 GiB free: 60% = 4.8, 75% = 6, 80% = 6.4: 2048's surcharge binds before its headroom
    (4.5, 8, 1024),  # 4.5 <= 4.8 but 6.4 - 4.5 = 1.9 < 2; 1024: 4.5 <= 6 and 1.9 >= 0.75
    (5.7, 8, 512),  # 5.7 <= 6 but 6.4 - 5.7 = 0.7 < 0.75
])
def test_the_headroom_lowers_the_batch(predicted_gib, available_gib, want):
    got = og.automatic_batch(65536, int(predicted_gib * GiB), available_gib * GiB, fa_disabled=False, cuda=True,
                             cuda_memory=available_gib * GiB)
    assert got == want


def test_the_percentages_are_go_integer_arithmetic():
    """``available*60/100`` on uint64 bytes rounds down: with 1000 GiB + 1 B free, 60% is 600 GiB exactly, so a
    prediction one byte above it loses 2048 (the surcharge is not what binds at this size)."""
    available = 1000 * GiB + 1
    assert og.batch_fits(2048, 600 * GiB, available)
    assert not og.batch_fits(2048, 600 * GiB + 1, available)
    # the least free memory for each batch, from the two inequalities
    p = 10 * GiB
    need_2048 = max(-(-100 * p // 60), -(-100 * (p + 2 * GiB) // 80))
    need_1024 = max(-(-100 * p // 75), -(-100 * (p + 768 * MiB) // 80))
    assert og.min_free_for_batch(2048, p) == need_2048 and og.min_free_for_batch(1024, p) == need_1024
    for b, need in ((2048, need_2048), (1024, need_1024)):
        assert og.batch_fits(b, p, need) and not og.batch_fits(b, p, need - 1)


@pytest.mark.parametrize("cells, memory_gib, want", [(8192, 7.64, 256), (4096, 7.64, 512), (8192, 11.64, 512),
                                                     (65536, 80, 512)])
def test_flash_attention_off_on_cuda(cells, memory_gib, want):
    """constrainedCUDAWithoutFlashAttention: above 4,096 cells on a CUDA GPU of at most 8 GiB -> 256; otherwise 512,
    whatever the headroom."""
    mem = int(memory_gib * GiB)
    assert og.automatic_batch(cells, GiB, mem, fa_disabled=True, cuda=True, cuda_memory=mem) == want
    # not on CUDA: flash attention off changes nothing
    assert og.automatic_batch(cells, GiB, mem, fa_disabled=True, cuda=False, cuda_memory=0) == \
        og.automatic_batch(cells, GiB, mem, fa_disabled=False, cuda=False, cuda_memory=0)


@pytest.mark.parametrize("cc, release, supported", [
    ("6.1", "0.31.1", False), ("6.1", "0.31.2", True),  # ml/device.go: ComputeMajor < 7, from v0.31.2 < 6
    ("7.0", "0.30.0", True), ("7.2", "0.32.15", False), ("7.5", "0.32.15", True), ("5.2", "0.32.15", False),
])
def test_flash_attention_support_by_compute_capability(cc, release, supported):
    assert og.flash_attention_supported("CUDA", cc, release) is supported
    assert og.flash_attention_supported("ROCm", None, release) is True
    assert og.flash_attention_supported("Metal", None, release) is True


def test_predicted_kv_is_ollamas_f16_formula():
    """PredictServerVRAM's KV part for Llama-3.1-8B at 16,384 cells: 2 x 32 layers x 8 KV heads x (4096 / 32) x
    16384 x 2 B = 2 GiB."""
    meta = meta_from_hf_config(load_config("meta-llama__Llama-3.1-8B-Instruct.json"), source="t")
    assert og.predicted_kv_bytes(meta, 16384) == 2 * 32 * 8 * 128 * 16384 * 2 == 2 * GiB


def _batch(release="0.32.15", *, embedding=False, num_ctx=16384, num_parallel=1, device="CUDA", cc="8.9",
           fa_env=None, available=int(23.64 * GiB), predicted=(7 * GiB, 7 * GiB)):
    return og.ollama_batch(release, embedding=embedding, num_ctx=num_ctx, num_parallel=num_parallel, device=device,
                           compute_capability=cc, fa_env=fa_env, available=available, predicted=predicted)


def test_before_0_30_the_runner_gets_512_cut_to_the_context():
    b = _batch("0.21.0", num_ctx=16384, num_parallel=2)
    assert (b.num_batch, b.n_batch, b.n_ubatch) == (512, 1024, 512)  # n_batch = BatchSize x parallel
    assert "llm/server.go:173-175" in b.source and "llama/llama.go:125-126" in b.source
    assert _batch("0.24.0", num_ctx=300).n_ubatch == 300  # min(512, num_ctx)
    e = _batch("0.21.0", embedding=True, num_ctx=8192)
    assert (e.num_batch, e.n_ubatch) == (8192, 8192)  # an embedding model: BatchSize = num_ctx


def test_from_0_30_the_choice_is_passed_as_b_and_ub():
    b = _batch()  # 16,384 cells -> 1024; 7 <= 0.75 x 23.64 and 0.8 x 23.64 - 7 >= 0.75
    assert (b.num_batch, b.n_batch, b.n_ubatch, b.determined) == (1024, 1024, 1024, True)
    assert "server/sched.go:797-915" in b.source and "llm/llama_server.go:581-594" in b.source
    assert b.thresholds == {1024: og.min_free_for_batch(1024, 7 * GiB)}
    # the same rule at v0.30.0, cited at its own lines
    assert "server/sched.go:797-915" in _batch("0.30.0").source and ":808-926" in _batch("0.31.0").source
    e = _batch(embedding=True, num_ctx=4096)
    assert (e.num_batch, e.rule) == (2048, "embedding default")  # min(2048, num_ctx x slots)


def test_a_file_size_range_that_straddles_a_threshold_is_said_not_to_be_determined():
    """65,536 cells on 23.64 GiB: 2048 needs the prediction <= 60% = 14.18 GiB. A prediction known only as 14 ..
    15 GiB gives 2048 at one end and 1024 at the other: the plan takes 2048 (the larger buffers) and says so."""
    b = _batch(num_ctx=65536, predicted=(14 * GiB, 15 * GiB))
    assert (b.num_batch, b.low, b.determined) == (2048, 1024, False) and "not modelled exactly" in b.why
    # an unknown file size with free memory: anything from 512 up
    u = _batch(num_ctx=65536, predicted=(8 * GiB, None))
    assert (u.num_batch, u.low, u.determined) == (2048, 512, False)
    # the CPU (no GPU, no free-memory figure): the start stands whatever the file
    c = _batch(num_ctx=65536, device="CPU", cc=None, available=0, predicted=(8 * GiB, None))
    assert (c.num_batch, c.determined) == (2048, True)


def test_cuda_without_flash_attention():
    assert _batch(fa_env=False, num_ctx=8192, available=int(7.64 * GiB)).num_batch == 256
    assert _batch(fa_env=False, num_ctx=8192).num_batch == 512
    # a Tesla P40 (compute 6.1): flash attention unsupported before v0.31.2, so 512; from v0.31.2 the automatic rule
    assert _batch("0.31.1", cc="6.1").num_batch == 512
    assert _batch("0.31.2", cc="6.1").num_batch == 1024


@pytest.mark.parametrize("arch, release, requested, want", [
    ("qwen3vl", "0.32.15", 4, 1), ("qwen35", "0.32.15", 2, 1), ("lfm2", "0.21.0", 4, 1), ("mllama", "0.30.0", 8, 1),
    ("nemotron_h_omni", "0.21.0", 4, 4), ("nemotron_h_omni", "0.22.0", 4, 1),  # in the list from v0.22.0
    ("llama", "0.32.15", 4, 4), ("qwen3", "0.32.15", 3, 3),
])
def test_families_ollama_loads_with_one_slot(arch, release, requested, want):
    n, why = og.ollama_num_parallel(arch, embedding=False, requested=requested, release=release)
    assert n == want and (("server/sched.go:" in why) if want == 1 else why == "")


def test_embedding_models_get_one_slot():
    n, why = og.ollama_num_parallel("bert", embedding=True, requested=4, release="0.32.15")
    assert n == 1 and "pooling_type" in why


@pytest.mark.parametrize("release, num_ctx, auto, want", [
    ("0.32.15", 131072, True, 32768), ("0.32.15", 32768, True, 4096), ("0.30.0", 8192, True, 4096),
    ("0.32.15", 4096, True, None), ("0.32.15", 131072, False, None), ("0.24.0", 131072, True, None),
])
def test_the_out_of_memory_retry(release, num_ctx, auto, want):
    """reduceAutoNumCtxForLoadOOM: only an automatic context, lowered by nextLowerAutoNumCtx (> 32768 -> 32768,
    > 4096 -> 4096); there is no such retry before 0.30."""
    r = og.oom_retry(release, num_ctx=num_ctx, num_ctx_auto=auto)
    assert (r and r["num_ctx"]) == (want or None)


# ---------------------------------------------------------------- the cited lines, read back from the tags

OLLAMA_GIT = Path(os.environ.get("LLMCALC_OLLAMA_GIT", "/work/.mirror/ollama+ollama/repo"))

#: key -> (first line of the cited range, last line or None for "}")
MARKERS = {
    "sched.parallel": ("numParallel := max(int(envconfig.NumParallel()), 1)", "numParallel = 1"),
    "types.NumBatch": ("NumBatch:        512,", None),
    "server.numbatch": ("opts.NumBatch = min(opts.NumBatch, opts.NumCtx)", "loadRequest := LoadRequest{"),
    "server.embedding": ("_, isEmbedding :=", "}"),
    "llama.ctxparams": ("params.n_batch = C.uint(batchSize * numSeqMax)", "params.n_ubatch = C.uint(batchSize)"),
    "llamarunner.ctx": ("llama.NewContextParams(", None),
    "images.pooling": ("pooling_type", None),
    "sched.load_batch": ("predictedCtx := effectiveLlamaServerContext(", "launchOpts.NumBatch = req.opts.NumBatch"),
    "sched.rule": ("const (", "}"),
    "sched.oom_call": ("if !req.oomRetryAttempted && llm.IsOutOfMemory(err) {", "reducing automatic context"),
    "sched.oom_func": ("func (req *LlmRequest) reduceAutoNumCtxForLoadOOM", "}"),
    "sched.next_ctx": ("func nextLowerAutoNumCtx", "}"),
    "sched.avail_load": ("func availableMemoryForLoad", "}"),
    "sched.avail_place": ("func availableMemoryForPlacement", "}"),
    "sched.effective": ("func effectiveLlamaServerContext", "}"),
    "sched.completion": ("completion := req.model.CheckCapabilities(model.CapabilityCompletion) == nil", None),
    "ls.batchargs": ("func appendBatchArgs", "}"),
    "ls.fa": ("func LlamaServerFlashAttention", "}"),
    "ls.fa_args": ("func appendFlashAttentionArgs", "}"),
    "ls.predict": ("func PredictServerVRAM", "}"),
    "ls.emb_default": ("func DefaultEmbeddingNumBatchForContext", "}"),
    "ls.emb_size": ("func embeddingBatchSize", "}"),
    "ls.argv": ('"-c", strconv.Itoa(launch.opts.NumCtx * launch.numParallel)', "params = appendBatchArgs("),
    "routes.auto": ("func usesAutomaticNumBatch", "}"),
    "routes.auto_ctx": ("func usesAutomaticNumCtx", "}"),
    "routes.numBatchAuto": ("numBatchAuto := usesAutomaticNumBatch", None),
    "device.fa": ("func FlashAttentionSupported", "}"),
    "server.cut": ("trainCtx := f.KV().ContextLength()", "}"),
}
#: what the rule's text says, in every tag from v0.30.0 (the figures the tests above use)
RULE_TEXT = ("llamaServerGenerationBatchDefault     = 512", "llamaServerGenerationBatchConstrained = 256",
             "llamaServerGenerationBatchMedium      = 1024", "llamaServerGenerationBatchLarge       = 2048",
             "llamaServerGenerationBatchMediumHeadroomPercent = 75",
             "llamaServerGenerationBatchLargeHeadroomPercent  = 60", "case effectiveCtx > 32768:",
             "case effectiveCtx > 4096:", "threshold := availableMemory * 80 / 100", "return 2 * format.GibiByte",
             "return 768 * format.MebiByte", "return memory > 0 && memory <= 8*format.GibiByte",
             "if effectiveCtx <= 4096 {")


def _norm(text: str) -> str:
    return " ".join(text.split())


def _tags() -> list[str]:
    out = subprocess.run(["git", "-C", str(OLLAMA_GIT), "tag"], capture_output=True, text=True, check=True).stdout
    tags = [t for t in out.split() if re.fullmatch(r"v0\.(19|2[0-4]|3[0-3])\.\d+", t) or
            re.fullmatch(r"v0\.33\.\d+-rc\d+", t)]
    return tags


@pytest.mark.skipif(not (OLLAMA_GIT / "HEAD").exists(), reason="no mirror of github.com/ollama/ollama here "
                    "(LLMCALC_OLLAMA_GIT)")
def test_the_cited_lines_say_what_the_rules_read():
    cache: dict[tuple[str, str], list[str]] = {}

    def show(tag: str, path: str) -> list[str]:
        if (tag, path) not in cache:
            cache[tag, path] = subprocess.run(["git", "-C", str(OLLAMA_GIT), "show", f"{tag}:{path}"],
                                              capture_output=True, text=True, check=True).stdout.split("\n")
        return cache[tag, path]

    checked = 0
    for tag in _tags():
        release = tag.lstrip("v")
        row = og.ollama_lines(release)
        assert tag in row.tags or og.parse_release(release) > row.first, (tag, row.tags)
        for key, text in row.lines.items():
            first, last = MARKERS[key]
            lines = show(tag, og._LINE_FILES[key.split(".")[0]])
            a, _, b = text.partition("-")
            a, b = int(a), int(b or a)
            assert _norm(first) in _norm(lines[a - 1]), (tag, key, lines[a - 1])
            if last is not None:
                assert (lines[b - 1].strip() == "}") if last == "}" else _norm(last) in _norm(lines[b - 1]), \
                    (tag, key, lines[b - 1])
            checked += 1
        s = show(tag, "server/sched.go")
        fam = next(x for x in s if 'slices.Contains([]string{"mllama"' in x)
        want = og.ONE_SLOT_FAMILIES_0_22 if og.parse_release(release) >= (0, 22, 0) else og.ONE_SLOT_FAMILIES_0_19
        assert re.findall(r'"([^"]+)"', fam.split("}")[0]) == list(want), tag
        if og.parse_release(release) >= (0, 30, 0):
            a, b = (int(x) for x in row.lines["sched.rule"].split("-"))
            body = "\n".join(s[a - 1:b])
            assert all(_norm(t) in _norm(body) for t in RULE_TEXT), tag
            dev = show(tag, "ml/device.go")
            a, b = (int(x) for x in row.lines["device.fa"].split("-"))
            floor = 6 if og.parse_release(release) >= (0, 31, 2) else 7
            assert f"gpu.ComputeMajor < {floor} ||" in "\n".join(dev[a - 1:b]), tag
            ls = show(tag, "llm/llama_server.go")
            a, b = (int(x) for x in row.lines["ls.batchargs"].split("-"))
            assert 'params = append(params, "-b", strconv.Itoa(opts.NumBatch), "-ub", strconv.Itoa(opts.NumBatch))' \
                in "\n".join(ls[a - 1:b]), tag
    assert checked > 500


# ---------------------------------------------------------------- the plan follows the batch Ollama picks

LLAMA8B_GGUF = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                "runtime": "ollama", "gpu": "RTX 4090"}
#: Llama-3.1-8B: vocab 128256, hidden 4096; Ollama's prediction is the file (the Hub page's 4.92 GB, to 10 MB) + an f16
#: KV cache of 2 x 32 layers x 8 KV heads x (4096 / 32) x cells x 2 B; an RTX 4090 is 23.64 GiB (the catalog)
RTX4090 = round(23.64 * GiB)


def _predicted(cells: int) -> tuple[float, float]:
    kv = 2 * 32 * 8 * 128 * cells * 2
    return 4.915e9 + kv, 4.925e9 + kv


def _logits_and_hidden(ubatch: int) -> float:
    """The Llama-3.1-8B compute buffer on the GPU with flash attention: logits 128256 x T x 4 B + 2 hidden states
    2 x 4096 x T x 4 B, in MiB."""
    return round((128256 * ubatch * 4 + 2 * 4096 * ubatch * 4) / MiB, 2)


def test_ollama_0_32_15_picks_2048_for_65536_cells_on_an_rtx_4090(client, offline_hub):
    """65,536 cells > 32,768: start at 2048. The prediction is at most 4.925 GB + 8 GiB = 13.52 GB, within 60% of
    23.64 GiB (15.23 GB), and 80% of it (20.31 GB) minus the prediction is 6.79 GB >= 2 GiB: 2048 stays. Ollama
    passes -b 2048 -ub 2048, so llama.cpp reserves its graph for 2048 tokens: 128256 x 2048 x 4 + 2 x 4096 x 2048 x 4
    B = 1066 MiB on CUDA0 (512 tokens would be 266.5)."""
    lo, hi = _predicted(65536)
    assert 65536 > 32768 and hi <= RTX4090 * 60 // 100 and 2 * GiB <= RTX4090 * 80 // 100 - hi
    body = client.get("/api/estimate", LLAMA8B_GGUF | {"ctx_size": "65536"}).json()
    assert body["ollama"]["num_batch"] == 2048 and body["ollama"]["batch"]["n_ubatch"] == 2048
    assert body["compute_buffer_mib"]["CUDA0"] == _logits_and_hidden(2048) == 1066
    # the answer says where it comes from: the sources (JSON), a row (page, text) and a note
    src = body["ollama"]["sources"]["num_batch"]
    assert "picks 2048" in src and "server/sched.go:797-915" in src and "llm/llama_server.go:581-594" in src
    assert "23.64 GiB" in src and "idle GPU" in src
    assert any(n.startswith("num_batch 2048 (-b 2048 -ub 2048 to llama-server") for n in body["notes"])
    # the prefill runs in passes of 2048 tokens
    assert "n_ubatch = 2048" in body["speed"]["sources"]["prefill"]
    page = client.get("/", LLAMA8B_GGUF | {"ctx_size": "65536"}, follow=True).content.decode()
    assert "Ollama num_batch" in page and "-b 2048 -ub 2048" in page


def test_the_headroom_brings_2048_down_to_1024_and_512(client, offline_hub):
    """98,304 cells start at 2048, but the prediction (>= 4.915 GB + 12 GiB = 17.80 GB) is above 60% of 23.64 GiB
    (15.23 GB); it is within 75% (19.04 GB) and 80% (20.31 GB) minus at most 17.81 GB leaves 2.49 GB >= 768 MiB:
    1024. At 131,072 cells the prediction (>= 22.09 GB) is above 80%: 512."""
    lo, hi = _predicted(98304)
    assert lo > RTX4090 * 60 // 100 and hi <= RTX4090 * 75 // 100 and 768 * MiB <= RTX4090 * 80 // 100 - hi
    body = client.get("/api/estimate", LLAMA8B_GGUF | {"ctx_size": "98304"}).json()
    assert body["ollama"]["num_batch"] == 1024 and body["compute_buffer_mib"]["CUDA0"] == _logits_and_hidden(1024)
    assert _predicted(131072)[0] > RTX4090 * 80 // 100
    body = client.get("/api/estimate", LLAMA8B_GGUF | {"ctx_size": "131072"}).json()
    assert body["ollama"]["num_batch"] == 512 and body["compute_buffer_mib"]["CUDA0"] == _logits_and_hidden(512)


def test_256_without_flash_attention_on_an_8_gib_cuda_gpu(client, offline_hub):
    """OLLAMA_FLASH_ATTENTION=0 (flash_attn off) on an RTX 4060 (7.64 GiB <= 8 GiB) with 8,192 cells (> 4,096): 256
    (constrainedCUDAWithoutFlashAttention). Llama-3.2-1B (hidden 2048, 32 heads) then reserves on CUDA0 the
    attention scores f32 8192 x 256 x 32 x 4 B = 256 MiB + the f32 mask 8192 x 256 x 4 B = 8 MiB + 6 hidden-sized
    tensors 6 x 2048 x 256 x 4 B = 12 MiB = 276 MiB."""
    body = client.get("/api/estimate", {"model": "bartowski/Llama-3.2-1B-Instruct-GGUF", "runtime": "ollama",
                                        "gguf_file": "Llama-3.2-1B-Instruct-Q8_0.gguf", "gpu": "RTX 4060",
                                        "flash_attn": "off", "ctx_size": "8192"}).json()
    assert body["ollama"]["num_batch"] == 256 and "OLLAMA_FLASH_ATTENTION=0" in body["ollama"]["sources"]["num_batch"]
    assert body["compute_buffer_mib"]["CUDA0"] == round((8192 * 256 * 32 * 4 + 8192 * 256 * 4 + 6 * 2048 * 256 * 4)
                                                        / MiB, 2) == 276


def test_before_0_30_and_on_the_cpu(client, offline_hub):
    """Ollama 0.24.0's llama.cpp runner: n_ubatch min(512, num_ctx), n_batch that x the slots. On the CPU (no GPU:
    no free-memory figure, the headroom check passes) 0.32.15 keeps the start, 2048 for 65,536 cells."""
    old = client.get("/api/estimate", LLAMA8B_GGUF | {"ctx_size": "65536", "ollama_release": "0.24.0",
                                                      "parallel": "2"}).json()
    assert (old["ollama"]["num_batch"], old["ollama"]["batch"]["n_batch"]) == (512, 1024)
    assert old["compute_buffer_mib"]["CUDA0"] == _logits_and_hidden(512)
    assert "llm/server.go:173-175" in old["ollama"]["sources"]["num_batch"]
    cpu = client.get("/api/estimate", LLAMA8B_GGUF | {"ctx_size": "65536", "gpu": "CPU"}).json()
    assert cpu["ollama"]["num_batch"] == 2048 and cpu["compute_buffer_mib"]["CPU"] == _logits_and_hidden(2048)
    assert "no GPU" in cpu["ollama"]["sources"]["num_batch"]


def test_an_unknown_file_size_is_said_and_the_buffers_are_an_upper_bound(client, offline_hub):
    """A repo without GGUF files (Qwen/Qwen3-8B): no model file size, so Ollama's prediction is known only from
    below; 32,768 cells (the RTX 4090's default context, >= 23 GiB) start at 1024, which holds at the KV cache
    alone (2 x 36 x 8 x 128 x 32768 x 2 B = 4.5 GiB), and a large enough file would give 512: the plan takes 1024
    and says the choice is not modelled exactly."""
    body = client.get("/api/estimate", {"model": "Qwen/Qwen3-8B", "runtime": "ollama", "gpu": "RTX 4090"}).json()
    b = body["ollama"]["batch"]
    assert (b["num_batch"], b["num_batch_low"], b["determined"]) == (1024, 512, False)
    assert "not modelled exactly" in body["ollama"]["sources"]["num_batch"]
    assert b["predicted_vram_gib"] == [round(2 * 36 * 8 * 128 * 32768 * 2 / GiB, 2), None]


@pytest.mark.parametrize("release, fa, num_batch", [("0.31.1", "off", 512), ("0.31.2", "auto", 1024)])
def test_a_pascal_gpu_without_flash_attention_before_0_31_2(client, offline_hub, release, fa, num_batch):
    """A Tesla P40 (compute 6.1): ml.FlashAttentionSupported wants CUDA compute >= 7 up to v0.31.1 and >= 6 from
    v0.31.2, so Ollama 0.31.1 passes --flash-attn off (llm/llama_server.go appendFlashAttentionArgs) and, flash
    attention disabled on CUDA, num_batch 512; 0.31.2 passes --flash-attn auto and the automatic rule gives 1024 for
    16,384 cells (a ~6.6 GiB prediction is well within 75% of 23.75 GiB)."""
    body = client.get("/api/estimate", LLAMA8B_GGUF | {"gpu": "Tesla P40", "ctx_size": "16384",
                                                       "ollama_release": release}).json()
    assert body["ollama"]["flash_attention"] == body["resolved"]["flash_attn"] == fa  # the plan's -fa
    assert body["ollama"]["num_batch"] == num_batch
    assert "ml/device.go:571-600" in body["ollama"]["sources"]["flash_attention"]
    if fa == "off":
        assert any(n.startswith("flash attention off: OLLAMA_FLASH_ATTENTION unset") for n in body["notes"])


@pytest.fixture
def _as_qwen3vl(monkeypatch):
    """The plan's GGUF metadata reads general.architecture = qwen3vl (a Qwen3-VL GGUF's text model has Qwen3's
    attention; llama.cpp lays out its KV cache as a plain one, memory.PLAIN_ARCHS)."""
    from calculator.runtimes.llamacpp.runtime import LlamaCpp

    real = LlamaCpp.meta

    def meta(self, *a, **kw):
        m, src = real(self, *a, **kw)
        return m.model_copy(update={"architecture": "qwen3vl"}), src

    monkeypatch.setattr(LlamaCpp, "meta", meta)


@pytest.mark.parametrize("release", ["0.32.15", "0.21.0"])
def test_a_one_slot_family_is_planned_with_one_slot(client, offline_hub, _as_qwen3vl, release):
    """OLLAMA_NUM_PARALLEL 4 with a qwen3vl model: Ollama loads it with one slot (server/sched.go:497-508 at v0.32.15,
    :412-422 at v0.21.0), so the KV cache holds num_ctx x 1 cells: 36 layers x 8192 x 8 KV heads x 128 x 2 (K, V) x
    2 B = 1152 MiB (Qwen3-8B's shapes), and the answer says why."""
    body = client.get("/api/estimate", {"model": "Qwen/Qwen3-8B", "runtime": "ollama", "gpu": "RTX 4090",
                                        "ctx_size": "8192", "parallel": "4", "ollama_release": release}).json()
    o = body["ollama"]
    assert (o["num_parallel"], o["num_parallel_requested"]) == (1, 4)
    assert "server/sched.go:" + ("497-508" if release == "0.32.15" else "412-422") in o["sources"]["num_parallel"]
    assert any(n.startswith("1 slot, not the 4 asked") for n in body["notes"])
    if release == "0.32.15":  # llama-server (before 0.30 qwen3vl runs on Ollama's own engine, not transcribed)
        assert body["n_seq_max"] == 1 and body["kv_cache_mib"] == 36 * 8192 * 8 * 128 * 2 * 2 / MiB == 1152
        assert "OLLAMA_NUM_PARALLEL=1" in body["serve_argv"]


def test_the_oom_retry_is_noted_where_it_applies(client, offline_hub):
    """An RTX 4090 (23.64 GiB >= 23) gets Ollama's automatic num_ctx 32,768. Were the load to fail out of memory,
    Ollama 0.32.15 would retry once with num_ctx nextLowerAutoNumCtx(32768) = 4096 (32,768 is not above 32,768) and
    pick the batch again: 4,096 cells -> 512. Llama-3.1-70B without a GGUF file only "depends" here, so the answer
    says so; a plan that simply fits carries it in the JSON only; a context given (OLLAMA_CONTEXT_LENGTH set) has no
    such retry."""
    body = client.get("/api/estimate", {"model": "meta-llama/Llama-3.1-70B-Instruct", "runtime": "ollama",
                                        "gpu": "RTX 4090"}).json()
    assert body["ollama"]["num_ctx"] == 32768 and body["verdict"] != "works"
    r = body["ollama"]["oom_retry"]
    assert (r["num_ctx"], r["num_batch"]) == (4096, 512) and "server/sched.go:757-783" in r["source"]
    assert any(n.startswith("if llama-server fails to load out of memory, Ollama 0.32.15 retries once with its "
                            "automatic context lowered to num_ctx 4,096") for n in body["notes"])
    fits = client.get("/api/estimate", LLAMA8B_GGUF).json()
    assert fits["verdict"] == "works" and fits["ollama"]["oom_retry"]["num_ctx"] == 4096
    assert not any("retries once" in n for n in fits["notes"])
    given = client.get("/api/estimate", LLAMA8B_GGUF | {"ctx_size": "32768"}).json()
    assert given["ollama"]["oom_retry"] is None
    old = client.get("/api/estimate", LLAMA8B_GGUF | {"ollama_release": "0.24.0"}).json()
    assert old["ollama"]["oom_retry"] is None  # no such retry before 0.30
