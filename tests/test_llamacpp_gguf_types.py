"""A safetensors model asked with llama.cpp / Ollama (no GGUF file): which of llama-quantize's file types fit the
device with every layer on it. Model buffers are checked against sums made here by hand from the config (Q8_0: 34 B
per 32 weights, ggml-common.h block_q8_0) or from the derived tensor table summed with gguf-py's block sizes, the KV
cache by hand, the fit by the rule the README states (model + KV + compute buffer + the 1024 MiB llama.cpp's --fit
keeps free within the device's budget)."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.conftest import load_config

pytestmark = pytest.mark.usefixtures("offline_hub")

L70 = "meta-llama/Llama-3.1-70B-Instruct"
L1B = "meta-llama/Llama-3.2-1B-Instruct"
MiB = 2**20
GiB = 2**30


def _q(model: str, **kw) -> dict:
    return {"model": model, "runtime": "llama.cpp", "gpu": "RTX 4090", "ctx_size": "8192", **kw}


def _cuda_bytes(ggml_type: str, ne: list[int]) -> int:
    """A tensor's bytes in a CUDA buffer, from gguf-py's block sizes: rows of ne[0] / block blocks, padded to the
    buffer's 128-byte alignment (the tensors here have rows a multiple of 512 values: no extra padding row)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, size = GGML_QUANT_SIZES[GGMLQuantizationType[ggml_type]]
    n = 1
    for d in ne:
        n *= d
    if ggml_type not in ("F32", "F16", "BF16"):
        assert ne[0] % 512 == 0
    return (n // block * size + 127) // 128 * 128


def _on_gpu_sum(config: dict, ftype: str) -> int:
    """Every tensor of the derived table but token_embd (the input layer stays on the CPU, llama-model.cpp:1603-1605)
    on CUDA0, plus a tied model's output layer: token_embd again, at its own type."""
    from calculator.runtimes.llamacpp.quant_rules import tensor_types

    _, table, _ = tensor_types(config, ftype)
    names = {n for n, _, _ in table}
    total = sum(_cuda_bytes(t, ne) for n, ne, t in table if n != "token_embd.weight")
    if "output.weight" not in names:
        total += next(_cuda_bytes(t, ne) for n, ne, t in table if n == "token_embd.weight")
    return total


def test_70b_on_a_4090_names_the_largest_type_that_fits(client):
    """Llama-3.1-70B, -c 8192 on an RTX 4090 (24,207.36 MiB). KV cache: 80 layers x 8,192 cells x 8 KV heads x 128 x
    2 B x (K, V) = 2,560 MiB. Q8_0 by hand: per layer q 8192^2 + k, v 8192 x 1024 + o 8192^2 + gate, up, down
    3 x 8192 x 28672 = 855,638,016 weights x 34 / 32 B, plus two norms of 8,192 f32; the output layer 8192 x 128,256
    weights at Q8_0 and its norm: 73,850,847,232 B = 70,429.66 MiB on CUDA0. Every other type: its derived table
    summed here. A type fits when model + KV + compute buffer + 1024 MiB <= the budget; Q4_K_M (39,979 MiB) does not,
    IQ2_XS (19,826 MiB) does, IQ2_M (22,564 MiB) does not, so the verdict names IQ2_XS and what IQ2_M needs."""
    body = client.get("/api/estimate", _q(L70)).json()
    cfg = load_config("meta-llama__Llama-3.1-70B-Instruct.json")
    assert body["verdict"] == "depends"
    assert body["kv_cache_mib"] == 80 * 8192 * 8 * 128 * 2 * 2 / MiB == 2560
    budget = body["device_budget_mib"] * MiB
    assert body["device_budget_mib"] == 24207.36
    compute = body["compute_buffer_mib"]["CUDA0"] * MiB
    err = body["compute_buffer_error_mib"]["CUDA0"] * MiB
    g = body["gguf_types"]
    rows = {r["type"]: r for r in g["types"]}
    per_layer = (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672) * 34 // 32 + 2 * 8192 * 4
    q8 = 80 * per_layer + 8192 * 128256 * 34 // 32 + 8192 * 4
    assert q8 == 73_850_847_232
    assert rows["Q8_0"]["device_model_buffer_mib"] == pytest.approx(q8 / MiB, abs=0.01)
    expected = {}
    for t, r in rows.items():
        model = _on_gpu_sum(cfg, t)
        assert r["device_model_buffer_mib"] == pytest.approx(model / MiB, abs=0.01), t
        spare = budget - model - 2560 * MiB - compute
        assert abs(spare - 1024 * MiB) > MiB  # clear of the headroom's rounding
        expected[t] = True if spare >= 1024 * MiB and spare >= err else (False if spare < -err else None)
        assert r["fits"] is expected[t], t
    assert rows["Q4_K_M"]["device_model_buffer_mib"] == pytest.approx(39979.48, abs=0.01) and not expected["Q4_K_M"]
    assert rows["IQ2_XS"]["device_model_buffer_mib"] == pytest.approx(19826.41, abs=0.01) and expected["IQ2_XS"]
    fitting = sorted((t for t in rows if expected[t]), key=lambda t: -rows[t]["device_model_buffer_mib"])
    assert g["largest_that_fits"] == fitting[0] == "IQ2_XS" and g["fitting"] == fitting
    assert [r["type"] for r in g["types"]] == sorted(rows, key=lambda t: -rows[t]["device_model_buffer_mib"])
    # the condition: the largest that fits, what the next larger one needs against what is left for model buffers
    room = (budget - 2560 * MiB - compute - 1024 * MiB) / GiB
    head = body["verdict_headline"]
    assert head.startswith("works if a GGUF at IQ2_XS or a smaller type is used")
    assert f"IQ2_M needs {rows['IQ2_M']['device_model_buffer_mib'] * MiB / GiB:.2f} GiB of model buffers on CUDA0 " \
           f"against {room:.2f} GiB free for them" in head
    assert "src/llama-quant.cpp:446-714" in head and "gguf_file" in head
    # IQ2_XS tensors are made only with an importance matrix (tensor_requires_imatrix); Q4_K_M needs none
    assert rows["IQ2_XS"]["needs_imatrix"] == ["IQ2_XS"] and rows["Q4_K_M"]["needs_imatrix"] == []
    assert "IQ2_XS file is made with an importance matrix" in head and "src/llama-quant.cpp:856-877" in head
    assert "llama-quant.cpp:446-714" in g["source"] and "quantize.cpp:34-75" in g["types_source"]


def test_a_small_model_fits_at_q8_0(client):
    """Llama-3.2-1B (tied embeddings), -c 8192 on an RTX 4090. Q8_0 by hand: 16 layers of (2 x 2048^2 + 2 x 2048 x 512 +
    3 x 2048 x 8192) weights x 34 / 32 B + two norms of 2,048 f32, the output layer's copy of token_embd (2048 x
    128,256 at Q8_0: a tied output takes Q8_0 in a Q8_0 file) and the output norm: 1,313,251,328 B = 1,252.41 MiB, far
    within the card: every type fits, and the verdict says Q8_0 or smaller."""
    body = client.get("/api/estimate", _q(L1B)).json()
    g = body["gguf_types"]
    rows = {r["type"]: r for r in g["types"]}
    per_layer = (2 * 2048 * 2048 + 2 * 2048 * 512 + 3 * 2048 * 8192) * 34 // 32 + 2 * 2048 * 4
    q8 = 16 * per_layer + 2048 * 128256 * 34 // 32 + 2048 * 4
    assert q8 == 1_313_251_328
    assert rows["Q8_0"]["device_model_buffer_mib"] == pytest.approx(q8 / MiB, abs=0.01)
    # the catalog's config of the Instruct model differs from the base model's only in eos_token_id
    assert rows["Q8_0"]["device_model_buffer_mib"] == pytest.approx(_on_gpu_sum(load_config(
        "meta-llama__Llama-3.2-1B.json"), "Q8_0") / MiB, abs=0.01)
    assert rows["Q8_0"]["fits"] is True and all(r["fits"] is True for r in g["types"])
    assert g["largest_that_fits"] == "Q8_0" and g["types"][0]["type"] == "Q8_0"
    assert body["verdict"] == "depends"
    assert body["verdict_headline"].startswith("works if a GGUF at Q8_0 or a smaller type is used")


def test_when_no_type_fits_every_layer_the_condition_says_layers_stay_on_the_cpu(client):
    """70B at -c 32768: the KV cache alone is 10 GiB, and even IQ1_S's 13.96 GiB of model buffers leave less than the
    compute buffer and 1024 MiB; the floor (1.5625 bits per weight) does not rule it out, so the verdict depends on
    keeping layers in CPU memory, which llama-server's --fit does by default."""
    body = client.get("/api/estimate", _q(L70, ctx_size="32768")).json()
    g = body["gguf_types"]
    assert g["largest_that_fits"] is None and all(r["fits"] is False for r in g["types"])
    assert body["verdict"] == "depends"
    head = body["verdict_headline"]
    assert "no llama-quantize file type fits every layer on CUDA0" in head and "IQ1_S needs" in head
    assert "--fit" in head
    off = client.get("/api/estimate", _q(L70, ctx_size="32768", fit="off")).json()
    assert "give -ngl N" in off["verdict_headline"]


def test_the_per_type_figures_are_the_full_plan_of_each_file():
    """The table composes one plan's KV cache and compute buffers with each type's model buffers (cached): for an MoE
    model and a dense one, with slots, a quantized cache and flash attention off, each row equals memory.plan run on
    that type's derived file."""
    from calculator.runtimes.llamacpp.gguf_types import LISTED, DeviceCheck, check_device, table
    from calculator.runtimes.llamacpp.memory import plan
    from calculator.runtimes.llamacpp.quant_rules import derive_meta

    for name, kw in (("Qwen__Qwen3-30B-A3B.json", dict(n_ctx=16384, n_seq_max=2, cache_type_k="q8_0",
                                                        cache_type_v="q8_0", flash_attn="on")),
                     ("meta-llama__Llama-3.1-8B-Instruct.json", dict(n_ctx=4096, flash_attn="off"))):
        cfg = load_config(name)
        kw = dict(kw, device="CUDA", n_gpu_layers=-1)
        seen = {}

        def check(p, meta, _seen=seen):
            _seen[meta.file_type] = p
            m = sum(b.bytes for b in p.buffers if b.kind == "model" and b.buft == "CUDA0")
            cb = next(b for b in p.buffers if b.kind == "compute" and b.buft == "CUDA0")
            return [check_device(DeviceCheck("CUDA0", m, p.kv_bytes, cb, 24 * GiB), headroom_mib=1024,
                                 discrete=True)], None

        rows = table(cfg, plan_kw=lambda meta, kw=kw: kw, check=check)
        assert {r.ftype for r in rows} == set(LISTED)
        from calculator.runtimes.llamacpp.quant_rules import FTYPES

        for r in rows:
            full = plan(derive_meta(cfg, r.ftype), **kw)
            composed = seen[FTYPES[r.ftype][0]]
            assert [b.model_dump() for b in composed.buffers] == [b.model_dump() for b in full.buffers], r.ftype
            assert composed.kv_caches == full.kv_caches


def test_the_answer_carries_the_table_on_every_surface(client):
    """The JSON key is there for every llama.cpp answer (null with a GGUF file: its own buffers are known), the
    command line's table lists each type, the page shows the table."""
    body = client.get("/api/estimate", _q(L70)).json()
    gguf = client.get("/api/estimate", {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "runtime": "llama.cpp",
                                        "gpu": "RTX 3090", "ctx_size": "8192",
                                        "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"}).json()
    assert set(body) == set(gguf) and gguf["gguf_types"] is None and body["gguf_types"]["types"]
    out = StringIO()
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", L70, "--runtime", "llama.cpp", "--gpu", "RTX 4090", "--ctx-size", "8192",
                     stdout=out)
    assert err.value.returncode == 3
    text = out.getvalue()
    assert "GGUF file types (no file given; every layer on CUDA0)" in text
    assert "  IQ2_XS: 19.36 GiB of model buffers on CUDA0, file 19.68 GiB: fits" in text
    assert "  Q4_K_M: 39.04 GiB of model buffers on CUDA0, file 39.59 GiB: does not fit" in text
    js = StringIO()
    call_command("estimate", "--model", L70, "--runtime", "llama.cpp", "--gpu", "RTX 4090", "--ctx-size", "8192",
                 "--format", "json", stdout=js)
    assert json.loads(js.getvalue())["gguf_types"] == body["gguf_types"]
    page = client.get("/", _q(L70), follow=True).content.decode()
    assert 'id="gguf-types"' in page and 'data-type="IQ2_XS"' in page and 'class="gguf-type fits-yes"' in page


def test_ollama_gets_the_same_model_buffers(client):
    """Ollama runs the same files: at num_ctx 8192 its table has llama.cpp's model buffers per type."""
    ll = client.get("/api/estimate", _q(L70)).json()["gguf_types"]
    ol = client.get("/api/estimate", {"model": L70, "runtime": "ollama", "gpu": "RTX 4090",
                                      "max_model_len": "8192"}).json()["gguf_types"]
    assert [(r["type"], r["device_model_buffer_mib"]) for r in ol["types"]] == \
        [(r["type"], r["device_model_buffer_mib"]) for r in ll["types"]]


def test_where_the_table_is_not_modelled_it_says_why(client):
    """A CPU-only build checks no memory budget; an architecture whose GGUF tensor table is not derived names itself;
    with -ngl below every layer the table stays, but the verdict does not rest on it."""
    cpu = client.get("/api/estimate", _q(L70, gpu="CPU")).json()["gguf_types"]
    assert cpu["types"] is None and "CPU-only build" in cpu["not_modelled"]
    ds = client.get("/api/estimate", {"model": "deepseek-ai/DeepSeek-V3", "runtime": "llama.cpp", "gpu": "H100",
                                      "ctx_size": "8192"}).json()["gguf_types"]
    assert ds["types"] is None and "deepseek_v3" in ds["not_modelled"]
    ngl = client.get("/api/estimate", _q(L70, n_gpu_layers="40")).json()
    assert ngl["gguf_types"]["types"] and "-ngl 40" in ngl["gguf_types"]["notes"][0]
    assert "a GGUF at" not in ngl["verdict_headline"]
