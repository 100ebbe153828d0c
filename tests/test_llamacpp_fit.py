"""llama-server's --fit (common/fit.cpp of the llama.cpp vendored in llama-cpp-python 0.3.36): a model bigger than
the GPU is not "does not fit" when -ngl and -ts are left to llama.cpp; it keeps as many layers as leave the
--fit-target margin (1024 MiB, common/common.h:482-483) free, back to front, and MoE experts go to the CPU first.

Expected placements are computed here by hand: per-layer bytes from the Q4_K_M tensor types (llama-quant.cpp's
rules, written out below), the f16 KV cache per layer, and the device budget; the compute buffer (an estimate of
the memory plan, not of --fit) is read from the plan."""
from __future__ import annotations

import pytest

from calculator.engine.gpus import get_gpu
from calculator.runtimes.llamacpp.fit import DeviceLayers, fit_core, layout_params

MiB = 2**20
LLAMA70 = {"model": "meta-llama/Llama-3.1-70B-Instruct", "gguf_file": "Llama-3.1-70B-Instruct-Q4_K_M.gguf",
           "runtime": "llama.cpp", "gpu": "RTX 4090", "ctx_size": "8192"}


pytestmark = pytest.mark.usefixtures("offline_hub")


def _q(n_values: int, t: str) -> int:
    """GGUF bytes of n values: Q4_K 144 B / 256, Q5_K 176 B / 256, Q6_K 210 B / 256 (ggml-common.h block_q*_K)."""
    return n_values // 256 * {"Q4_K": 144, "Q5_K": 176, "Q6_K": 210}[t]


def _more_bits(i: int, n: int) -> bool:  # llama-quant.cpp use_more_bits
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _llama70_layer_bytes(i: int) -> int:
    """Layer i of Llama-3.1-70B Q4_K_M (n_embd 8192, n_ff 28672, 8 KV heads x 128): q, k, o, gate, up Q4_K; v Q6_K
    on use_more_bits layers, else Q5_K (the 70B rule lifts Q4_K to Q5_K); ffn_down Q6_K on use_more_bits layers,
    else Q4_K; two f32 norms."""
    e, ff, kv = 8192, 28672, 1024
    v = "Q6_K" if _more_bits(i, 80) else "Q5_K"
    down = "Q6_K" if _more_bits(i, 80) else "Q4_K"
    return (_q(e * e, "Q4_K") * 2 + _q(e * kv, "Q4_K") + _q(e * kv, v) + _q(e * ff, "Q4_K") * 2 + _q(ff * e, down)
            + 2 * e * 4)


def test_70b_q4_k_m_on_one_rtx_4090_keeps_what_leaves_the_margin(client):
    body = client.get("/api/estimate", LLAMA70).json()
    fit = body["fit"]
    # it starts when the machine's RAM holds what --fit leaves on the CPU (38 = 80 - 42 layers), which the request
    # does not say: the verdict depends on it
    assert body["verdict"] == "depends" and fit["status"] == "fitted"
    assert f"holds the {fit['host_memory_gib']['total']:.2f} GiB" in body["verdict_condition"]
    assert "(38 of 80 layers)" in body["verdict_condition"]
    output = _q(8192 * 128256, "Q6_K") + 8192 * 4  # output.weight Q6_K + output_norm f32
    kv_layer = 2 * 8192 * 1024 * 2  # K and V f16, 8,192 cells x 1,024 values = 32 MiB
    compute = next(b["bytes"] for b in body["buffers"] if b["kind"] == "compute" and b["buft"] == "CUDA0")
    target = get_gpu("RTX 4090").memory_bytes - 1024 * MiB

    def mem(k: int) -> int:  # k -ngl units: the output layer and layers 81-k .. 79
        layers = range(81 - k, 80)
        return output + sum(_llama70_layer_bytes(i) for i in layers) + kv_layer * len(layers) + compute

    expected = max(k for k in range(1, 82) if mem(k) <= target)
    assert expected == 43  # 42 of 80 layers + the output layer
    assert fit["n_gpu_layers"] == expected and fit["tensor_overrides"] == []
    # the fitted placement is what the buffers, the KV split and the speed use
    assert body["model_buffer_mib"]["CUDA0"] == round((mem(expected) - compute - kv_layer * 42) / MiB, 2)
    assert any("CUDA0 KV buffer size =  1344.00 MiB" in line for line in body["log_lines"])  # 42 x 32 MiB
    assert fit["host_memory_gib"]["weights"] > 18
    assert any("keeps -ngl 43 of 81" in n for n in body["notes"])
    assert any("system RAM must hold" in n for n in body["notes"])
    # the command leaves -ngl to --fit
    assert "-ngl" not in body["serve_argv"]
    # with --fit off every layer stays on the GPU and llama.cpp cannot allocate it
    off = client.get("/api/estimate", LLAMA70 | {"fit": "off"}).json()
    assert off["verdict"] == "does_not_fit" and off["fit"]["status"] == "off"
    assert off["serve_argv"][-2:] == ["--fit", "off"] or "--fit" in off["serve_argv"]
    # a larger --fit-target keeps fewer layers
    wide = client.get("/api/estimate", LLAMA70 | {"fit_target": "4096"}).json()
    t2 = get_gpu("RTX 4090").memory_bytes - 4096 * MiB
    assert wide["fit"]["n_gpu_layers"] == max(k for k in range(1, 82) if mem(k) <= t2)


def test_user_set_ngl_makes_fit_give_up(client):
    """-ngl 60 is the user's: fit.cpp:463-465 aborts, the load goes ahead with 60 layers and fails."""
    body = client.get("/api/estimate", LLAMA70 | {"n_gpu_layers": "60"}).json()
    assert body["fit"]["status"] == "aborted" and "n_gpu_layers already set by user" in body["fit"]["reason"]
    assert body["verdict"] == "does_not_fit"
    assert "-ngl" in body["serve_argv"]


def test_no_change_when_the_model_fits(client):
    """Llama-3.1-8B Q4_K_M, -c 8192 on an RTX 4090 leaves far more than 1 GiB free: step 1 returns."""
    body = client.get("/api/estimate", {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF",
                                        "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "runtime": "llama.cpp",
                                        "gpu": "RTX 4090", "ctx_size": "8192"}).json()
    assert body["fit"]["status"] == "no_change" and body["verdict"] == "works"
    assert body["fit"]["projected_free_mib"][0] >= 1024
    assert any("changes nothing" in n for n in body["notes"])
    assert "CPU_Mapped" in body["model_buffer_mib"] and body["model_buffer_mib"]["CUDA0"] > 4000


def test_moe_experts_go_to_the_cpu_first(client):
    """Qwen3-30B-A3B Q4_K_M (48 layers, 128 experts) on a 12 GB RTX 3060: the dense weights fit, so every layer's
    attention stays on the GPU (-ngl 49 of 49) and the routed experts of the *last* layers go to the CPU
    (fit.cpp:735-866). Checked with the memory plan and overrides written here: k full layers fit under
    free - 1024 MiB, k + 1 do not."""
    from calculator.runtimes.llamacpp.memory import plan
    from calculator.runtimes.llamacpp.runtime import LlamaCpp
    from calculator.request import parse_request

    q = {"model": "Qwen/Qwen3-30B-A3B", "gguf_file": "Qwen3-30B-A3B-Q4_K_M.gguf", "runtime": "llama.cpp",
         "gpu": "RTX 3060", "ctx_size": "8192"}
    body = client.get("/api/estimate", q).json()
    fit = body["fit"]
    assert body["verdict"] == "depends" and fit["status"] == "fitted" and fit["n_gpu_layers"] == 49
    pats = [o["pattern"] for o in fit["tensor_overrides"]]
    assert all(o["buffer"] == "CPU" for o in fit["tensor_overrides"])
    exps = [int(p.split("\\.")[1]) for p in pats if p.endswith("_(ch|)exps")]
    k = min(int(p.split("\\.")[1]) for p in pats)  # the first partial layer: layers 0 .. k-1 keep their experts
    assert exps == list(range(k + 1, 49)) and k > 0
    # layer k (partial) and k+1 .. 47 keep routed experts in CPU memory: the RAM that needs is the condition
    assert f"(the routed experts of {48 - k} layers)" in body["verdict_condition"]

    rt = LlamaCpp()
    req = parse_request(q)
    model = rt.load_model(req)
    meta, _ = rt.meta(req, model, q["gguf_file"])
    target = get_gpu("RTX 3060").memory_bytes - 1024 * MiB

    def used(n_full: int) -> int:
        ovr = [(rf"blk\.{i}\.ffn_(up|down|gate_up|gate)_(ch|)exps", -1) for i in range(n_full, 48)]
        p = plan(meta, n_ctx=8192, n_gpu_layers=-1, device="CUDA", tensor_overrides=ovr)
        return sum(b.bytes for b in p.buffers if b.buft == "CUDA0") + sum(c.buffers.get("CUDA0", 0)
                                                                         for c in p.kv_caches)

    assert used(k) <= target < used(k + 1)
    assert used(0) < target  # all dense weights fit: step 4 runs
    assert any("routed experts of layers" in n for n in body["notes"])


def test_fit_core_dense_by_false_position_equals_the_largest_fitting_count():
    """A synthetic device: mem(n units) = 1000 + 100 n; free 6,024 - margin 1,024 = target 5,000 -> 40 units. Two
    devices, free 6,024 and 3,024: the last (target 2,000 -> 10 units) is filled first, back to front, then the first
    (40 units): -ts 40,10, -ngl 50."""
    def measure(ngl, ts, ovr):
        if ts is None:
            return [1000 + 100 * max(ngl, 0)]
        return [1000 + 100 * int(x) for x in ts]

    r = fit_core(hp_ngl=79, hp_nex=0, free=[6024], margins=[1024], initial=[1000 + 100 * 80], measure=measure)
    assert r.status == "fitted" and r.n_gpu_layers == 40 and r.overrides == []
    r2 = fit_core(hp_ngl=79, hp_nex=0, free=[6024, 3024], margins=[1024, 1024], initial=[5000, 5000],
                  measure=measure)
    assert r2.tensor_split == [40.0, 10.0] and r2.n_gpu_layers == 50
    assert fit_core(hp_ngl=79, hp_nex=0, free=[6024], margins=[1024], initial=[4000], measure=measure).status == \
        "no_change"
    assert fit_core(hp_ngl=79, hp_nex=0, free=[6024], margins=[1024], initial=[9000], measure=measure,
                    user_ngl=True).status == "aborted"


def test_layout_params_writes_fits_overrides():
    """fit.cpp:548-586: one device, 49 units of which 20 partial, the first with ATTN overflow: layers 29 .. 48
    (48 = the output unit, whose pattern matches no tensor)."""
    ngl, ts, ovr = layout_params([DeviceLayers(n_layer=49, n_part=20, overflow_type="ATTN")], [-1], 48)
    assert ngl == 49 and ts is None and len(ovr) == 20
    assert ovr[0] == (r"blk\.29\.ffn_(gate|up|gate_up|down).*", -1)
    assert ovr[1] == (r"blk\.30\.ffn_(up|down|gate_up|gate)_(ch|)exps", -1)


def test_ollama_does_not_take_fit(client):
    r = client.get("/api/estimate", LLAMA70 | {"runtime": "ollama", "fit": "off"})
    assert r.status_code == 400 and "fit" in r.text


LLAMA8B_3060 = {"model": "meta-llama/Llama-3.1-8B-Instruct", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                "runtime": "llama.cpp", "gpu": "RTX 3060"}
KV_CELL = 32 * 2 * 8 * 128 * 2  # Llama-3.1-8B: 32 layers x K and V x 8 KV heads x 128 x f16 = 128 KiB per cell


def _device_mib(body: dict) -> float:
    """What fit.cpp measures on CUDA0: model + KV + output buffers (device_used_mib) + the compute buffer."""
    return body["device_used_mib"] + body["compute_buffer_mib"]["CUDA0"]


@pytest.mark.parametrize("parallel", [1, 2])
def test_without_a_context_fit_lowers_it_until_every_layer_stays_on_the_gpu(client, parallel):
    """-c not given (llama-server's default): fit resolves the context to n_ctx_train x n_streams (131072 per
    sequence), and when that does not fit, interpolates between the memory at --fit-ctx 4096 x n_streams and at the
    full context (common/fit.cpp:373-428), rounded down to 256 x n_streams cells. The two ends are measured here
    with --fit off at an explicit -c, i.e. by a different path than the fit port."""
    body = client.get("/api/estimate", LLAMA8B_3060 | {"parallel": str(parallel)}).json()
    assert "-c" not in body["serve_argv"]  # -c 0 would forbid the reduction (common/arg.cpp:1641-1646)
    full = client.get("/api/estimate", LLAMA8B_3060 | {"parallel": str(parallel), "fit": "off",
                                                       "ctx_size": str(131072 * parallel)}).json()
    low = client.get("/api/estimate", LLAMA8B_3060 | {"parallel": str(parallel), "fit": "off",
                                                      "ctx_size": str(4096 * parallel)}).json()
    free = get_gpu("RTX 3060").memory_bytes / MiB
    target = free - 1024
    used_full, used_min = _device_mib(full), _device_mib(low)
    assert used_full > target > used_min
    n_min, n_max, align = 4096 * parallel, 131072 * parallel, 256 * parallel
    n = n_min + int((n_max - n_min) * (target - used_min) // (used_full - used_min))
    n -= n % align
    assert body["fit"]["status"] == "context_reduced" and body["fit"]["n_ctx"] == n
    assert body["kv_cache_tokens"] == n and body["kv_cache_mib"] == n * KV_CELL / MiB
    assert body["verdict"] == "works"  # every layer on the GPU: nothing for the machine's RAM to hold
    assert _device_mib(body) <= target + 0.01


def test_an_explicit_context_is_never_lowered(client):
    """-c given: step 2 does not apply ("context size set by user", fit.cpp:451-453); fit moves layers instead."""
    body = client.get("/api/estimate", LLAMA8B_3060 | {"ctx_size": "131072"}).json()
    assert body["fit"]["status"] == "fitted" and "n_ctx" not in body["fit"]
    assert body["kv_cache_tokens"] == 131072 and body["serve_argv"][3:5] == ["-c", "131072"]
    assert body["verdict"] == "depends" and "system RAM" in body["verdict_condition"]


@pytest.mark.parametrize("parallel", [1, 2])
def test_an_explicit_c_0_is_the_models_context_and_fit_does_not_lower_it(client, parallel):
    """-c 0 is the model's trained context (common/arg.cpp:1639-1646 "0 = loaded from model"; Llama-3.1-8B's
    max_position_embeddings 131072), resolved by fit to 131072 per slot without -kvu (common/fit.cpp:266-278); given
    explicitly it sets --fit-ctx to UINT32_MAX (arg.cpp:1643-1646), so step 2 never lowers the context
    (fit.cpp:394 n_ctx_max > n_ctx_min_total fails) and fit moves layers instead: the same placement as -c 131072 x
    slots given, and the command keeps -c 0."""
    zero = client.get("/api/estimate", LLAMA8B_3060 | {"parallel": str(parallel), "ctx_size": "0"}).json()
    given = client.get("/api/estimate", LLAMA8B_3060 | {"parallel": str(parallel),
                                                        "ctx_size": str(131072 * parallel)}).json()
    unset = client.get("/api/estimate", LLAMA8B_3060 | {"parallel": str(parallel)}).json()
    assert unset["fit"]["status"] == "context_reduced"  # -c left out: fit lowers the context instead
    assert zero["fit"]["status"] == "fitted" and "n_ctx" not in zero["fit"]
    assert zero["fit"]["n_gpu_layers"] == given["fit"]["n_gpu_layers"] < 33
    assert zero["kv_cache_tokens"] == 131072 * parallel and zero["kv_cache_mib"] == 131072 * parallel * KV_CELL / MiB
    assert zero["max_model_len"] == 131072
    assert zero["serve_argv"][3:5] == ["-c", "0"] and "-c" not in unset["serve_argv"]
    assert any(n.startswith("-c 0: the model's trained context, 131,072 cells") for n in zero["notes"])
    # --fit off: nothing resolves it per slot, so llama_context's n_ctx = n_ctx_train is shared by the slots
    # (src/llama-context.cpp:133)
    off = client.get("/api/estimate", LLAMA8B_3060 | {"parallel": str(parallel), "ctx_size": "0",
                                                      "fit": "off"}).json()
    assert off["kv_cache_tokens"] == 131072 and off["max_model_len"] == 131072 // parallel


def test_ollama_from_0_30_leaves_the_placement_to_llama_servers_fit(client):
    """Ollama 0.30+ starts llama-server with -c (num_ctx x parallel) and no -ngl (llm/llama_server.go:398-405 at
    v0.32.15), so --fit places the layers exactly as for llama-server -c 8192; before 0.30 Ollama's own scheduler
    picks num_gpu and the fit port is not applied."""
    q = LLAMA70 | {"runtime": "ollama"}
    new = client.get("/api/estimate", q | {"ollama_release": "0.32.15"}).json()
    assert new["fit"]["status"] == "fitted" and new["fit"]["n_gpu_layers"] == 43
    assert any("CUDA0 KV buffer size =  1344.00 MiB" in line for line in new["log_lines"])  # 42 layers x 32 MiB
    old = client.get("/api/estimate", q | {"ollama_release": "0.21.0"}).json()
    assert old["fit"] is None and any("Ollama's scheduler picks" in n for n in old["notes"])


def test_what_does_not_fit_with_fit_off_suggests_the_changes_that_start(client):
    """--fit off with a model bigger than the GPU: the suggestions are checked through the same calculation; dropping
    --fit off starts when the machine's RAM holds what fit leaves on the CPU (the suggestion says so), and a second
    GPU holds every layer."""
    body = client.get("/api/estimate", LLAMA70 | {"fit": "off"}).json()
    assert body["verdict"] == "does_not_fit"
    by_param = {tuple(sorted(s["params"])): s["label"] for s in body["suggestions"]}
    fit_on = client.get("/api/estimate", LLAMA70).json()
    assert by_param[("fit",)].startswith("drop --fit off") and fit_on["verdict_condition"] in by_param[("fit",)]
    two = client.get("/api/estimate", LLAMA70 | {"fit": "off", "gpus": "2"}).json()
    assert ("gpus",) in by_param and two["verdict"] == "works"
    # a server that does not start has no speed: the API and the page say so instead of figures
    assert body.get("ttft_ms") is None and body["speed_error"].startswith("configuration: the server does not start")
    page = client.get("/", LLAMA70 | {"fit": "off"}, follow=True).content.decode()
    assert "the server does not start (see the verdict and what would work)" in page


def test_layers_left_on_the_cpu_need_the_machines_ram_whoever_chose_them(client):
    """-ngl 40 given (fit gives up: fit.cpp:463-465): llama-model.cpp puts layers 81 - 40 = 41 .. 79 and the output on
    the GPU, so 41 of 80 layers stay in CPU memory, and the start depends on the RAM holding them, as with --fit's own
    choice. On two GPUs every layer fits: no RAM condition for the token embeddings alone (always on the CPU)."""
    ngl = client.get("/api/estimate", LLAMA70 | {"n_gpu_layers": "40"}).json()
    assert ngl["verdict"] == "depends" and "41 of 80 layers left on the CPU by -ngl 40" in ngl["verdict_condition"]
    cpu_layers = sum(_llama70_layer_bytes(i) for i in range(41)) / 2**30
    assert f"(weights {cpu_layers + 128256 * 8192 * 144 / 256 / 2**30:.2f} GiB" in ngl["verdict_condition"]
    two = client.get("/api/estimate", LLAMA70 | {"gpus": "2"}).json()
    assert two["verdict"] == "works" and two["fit"]["status"] in ("no_change", "fitted")


def test_a_context_too_long_for_the_gpu_gets_the_longest_that_fits_as_a_suggestion(client):
    """-c 65536 --fit off on a 12 GB RTX 3060: the weights fit, the KV cache (128 KiB a cell, KV_CELL) does not.
    The longest -c keeps model buffers + KV + the compute estimate's top + --fit's 1024 MiB (the GPU context and the
    backend's pool) within the budget: cells = (budget - non-KV - compute - error - 1024 MiB) / 128 KiB, in 256-cell
    steps; the suggestion is planned again and works."""
    body = client.get("/api/estimate", LLAMA8B_3060 | {"fit": "off", "ctx_size": "65536"}).json()
    assert body["verdict"] == "does_not_fit" and body["kv_cache_mib"] == 65536 * KV_CELL / MiB
    room = (body["device_budget_mib"] - (body["device_used_mib"] - body["kv_cache_mib"])
            - body["compute_buffer_mib"]["CUDA0"] - body["compute_buffer_error_mib"]["CUDA0"] - 1024)
    cells = int(room * MiB // KV_CELL) // 256 * 256
    assert 40000 < cells < 65536
    ctx = [s for s in body["suggestions"] if set(s["params"]) == {"ctx_size"}]  # llama.cpp's name, as its permalink
    # offered rounded down to a multiple of 1,024 (verdict._fitting_context), the label naming the longest that fits
    assert len(ctx) == 1 and int(ctx[0]["params"]["ctx_size"]) == cells // 1024 * 1024
    assert f"{cells:,} fits" in ctx[0]["label"]
    again = client.get("/api/estimate", LLAMA8B_3060 | {"fit": "off", "ctx_size": ctx[0]["params"]["ctx_size"]})
    assert again.json()["verdict"] == "works"
