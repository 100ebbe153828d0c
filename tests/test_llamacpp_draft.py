"""llama-server's draft model (speculative decoding): its buffers and the command, values computed by hand."""
import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("offline_hub")]

from calculator.request import parse_request

SPEC = '{"method":"draft_model","model":"bartowski/Llama-3.2-1B-Instruct-GGUF","num_speculative_tokens":8}'


def _plan(**extra):
    from calculator.plan import make_plan

    params = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
              "runtime": "llama.cpp", "gpu": "RTX 3090", "max_model_len": "8192", "speculative_config": SPEC} | extra
    return make_plan(parse_request(params), with_speed=False, with_suggestions=False)


def test_draft_buffers_and_command(settings):
    p = _plan()
    d = p.memory.draft
    assert d.gguf_file == "Llama-3.2-1B-Instruct-Q4_K_M.gguf"  # -hfd's default (download.cpp find_best_model)
    # Llama-3.2-1B config: 16 layers, 8 KV heads x 64, f16 (-ctkd default), the target's 8192 cells:
    # 16 x 8192 x 512 x 2 B x 2 (K, V) = 256 MiB
    kv = d.plan.kv_caches[0]
    assert (kv.cells, len(kv.layers), kv.total_bytes) == (8192, 16, 16 * 8192 * 512 * 2 * 2)
    # token_embd 128256 x 2048 in Q6_K (210 B per 256 values) and rope_freqs f32 [32] (llama3 rope scaling) stay
    # mapped on the CPU
    assert d.plan.buffer("model", "CPU_Mapped").bytes == 128256 * 2048 * 210 // 256 + 32 * 4
    assert p.launch_argv[-6:] == ["--spec-type", "draft-simple", "-hfd", "bartowski/Llama-3.2-1B-Instruct-GGUF",
                                  "--spec-draft-n-max", "8"]
    # the draft's device bytes are in the fit
    used, _ = d.device_bytes()
    assert p.memory.device_used_mib == pytest.approx(
        (sum(b.bytes for b in p.memory.plan.buffers if b.buft == "CUDA0" and b.kind != "compute")
         + p.memory.plan.kv_bytes + used) / 2**20, abs=0.01)


def test_draft_file_given_and_unknown_repo(settings):
    p = _plan(gguf_file_draft="Llama-3.2-1B-Instruct-Q8_0.gguf", n_gpu_layers_draft="99")
    # the target comes from the Hub (-hf repo -hff file), so the draft does too: llama.cpp reads the tag "Q8_0" off
    # "Llama-3.2-1B-Instruct-Q8_0.gguf" (common/download.cpp:482-509, "[-.]([A-Z0-9_]+)$" on the name without
    # .gguf) and -hfd repo:Q8_0 downloads the first file matching "Q8_0[.-]" (:655-677), that same file; a bare
    # "-md Llama-3.2-1B-Instruct-Q8_0.gguf" would be a local path (common/arg.cpp:4241-4244)
    assert p.launch_argv[:3] == ["llama-server", "-hf", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"]
    assert p.launch_argv[-8:] == ["--spec-type", "draft-simple", "-hfd", "bartowski/Llama-3.2-1B-Instruct-GGUF:Q8_0",
                                  "--spec-draft-n-max", "8", "-ngld", "99"]
    assert "-md" not in p.launch_argv
    q = _plan(speculative_config=SPEC.replace("bartowski/Llama-3.2-1B-Instruct-GGUF", "nobody/unknown-draft-GGUF"))
    assert q.verdict.status == "depends" and "not modelled" in q.verdict.condition


def test_ollama_refuses_draft(settings):
    from calculator.engine.errors import EngineInputError

    with pytest.raises(EngineInputError, match="Ollama's speculative decoding is not modelled"):
        _plan(runtime="ollama")


def test_draft_speed_from_the_acceptance_rate_and_the_break_even_without_one(client):
    """With a draft model the API gives the speculative speed (llama.cpp's accept = accepted / drafted, so
    AL = 1 + k x rate) and, without an acceptance, only the rate at which drafting pays; one sequence only."""
    params = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
              "runtime": "llama.cpp", "gpu": "RTX 3090", "max_model_len": "8192", "speculative_config": SPEC}
    api = client.get("/api/estimate", params | {"acceptance_rate": "0.6"}).json()
    sp = api["speed"]["spec"]
    k, al = 8, 1 + 8 * 0.6
    # a step: k single-token draft passes + the target over k + 1 tokens + the draft over the same k + 1 (llama-server
    # evaluates each target batch on the draft, server-context.cpp:3722-3736) + the assumed per-step overhead (1.0 ms)
    assert sp["step_ms"] == pytest.approx(k * sp["draft_pass_ms"] + sp["draft_reeval_ms"] + sp["verify_ms"] + 1.0,
                                          abs=1e-2)  # fields rounded to 3 decimals
    assert api["itl_ms_spec"] == pytest.approx(sp["step_ms"] / al, abs=2e-3)
    assert api["spec_speedup"] == pytest.approx(api["itl_ms"] / (sp["step_ms"] / al), rel=2e-3)
    # break-even: 1 + k x rate = step / plain decode step
    assert api["break_even_acceptance_rate"] == pytest.approx((sp["step_ms"] / sp["baseline_itl_ms"] - 1) / k, abs=1e-3)
    assert 0 < api["break_even_acceptance_rate"] < 0.6 < 1 and api["spec_speedup"] > 1

    none = client.get("/api/estimate", params).json()
    assert none["spec_speedup"] is None and none["break_even_acceptance_rate"] == api["break_even_acceptance_rate"]
    assert "acceptance" in none["acceptance_source"]
    html = client.get("/", params, follow=True).content.decode()
    assert 'id="spec-break-even"' in html

    # 4 clients on one slot (-np 1): the slot runs one at a time, so the speculative figures are the one slot's
    busy = client.get("/api/estimate", params | {"acceptance_rate": "0.6", "concurrency": "4"}).json()
    assert busy["speed_error"] is None and busy["spec_speedup"] == api["spec_speedup"]
    assert busy["speed"]["spec"]["concurrency"] == 1 and busy["speed"]["clients"] == 4


def test_draft_hub_tag_and_exact_file():
    """-hfd REPO:TAG only when llama.cpp's tag lookup picks the very file; else 0.3.36's -hfd REPO -md FILE (-md
    then names the repo's file: common/arg.cpp:4245 "will be used if --spec-draft-hf is set", :538 "an explicit
    draft file selection (e.g. -md with -hfd)", common/download.cpp:730-742 matches it by path)."""
    from calculator.runtimes.llamacpp.gguf_repos import GGUFFile, GGUFListing
    from calculator.runtimes.llamacpp.launch import launch_argv
    from calculator.runtimes.llamacpp.memory import RELEASE_LEGACY
    from calculator.runtimes.llamacpp.runtime import hf_quant_tag

    names = ["m-Q4_K_M.gguf", "m-UD-Q4_K_M.gguf", "m-Q8_0-00001-of-00002.gguf", "m.gguf"]
    listing = GGUFListing(repo_id="o/m-GGUF", revision=None, source="test",
                          files=[GGUFFile(name=n, parts=[n]) for n in names])
    assert hf_quant_tag(listing, "m-Q4_K_M.gguf") == "Q4_K_M"
    # "m-UD-Q4_K_M" also ends in Q4_K_M, but "Q4_K_M[.-]" first matches m-Q4_K_M.gguf: no tag picks it
    assert hf_quant_tag(listing, "m-UD-Q4_K_M.gguf") is None
    assert hf_quant_tag(listing, "m-Q8_0-00001-of-00002.gguf") == "Q8_0"  # the split suffix is removed first
    assert hf_quant_tag(listing, "m.gguf") is None  # no tag in the name
    argv = launch_argv(None, n_ctx=None, hf_repo="o/t-GGUF", draft_hf_repo="o/m-GGUF", draft_hf_file="m-UD-Q4_K_M.gguf")
    assert argv[-6:] == ["--spec-type", "draft-simple", "-hfd", "o/m-GGUF", "-md", "m-UD-Q4_K_M.gguf"]
    with pytest.raises(ValueError, match="draft_hf_file"):
        launch_argv(None, n_ctx=None, hf_repo="o/t-GGUF", draft_hf_repo="o/m-GGUF", draft_hf_file="m.gguf",
                    release=RELEASE_LEGACY)
