"""llama-server's draft model (speculative decoding): its buffers and the command, values computed by hand."""
import pytest

pytestmark = pytest.mark.django_db

from calculator.request import parse_request

SPEC = '{"method":"draft_model","model":"bartowski/Llama-3.2-1B-Instruct-GGUF","num_speculative_tokens":8}'


def _plan(**extra):
    from calculator.plan import make_plan

    params = {"model": "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "gguf_file": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
              "runtime": "llama.cpp", "gpu": "RTX 3090", "max_model_len": "8192", "speculative_config": SPEC} | extra
    return make_plan(parse_request(params), with_speed=False, with_suggestions=False)


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


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
        (sum(b.bytes for b in p.memory.plan.buffers if b.buft in ("CUDA0", "CUDA_Host") and b.kind != "compute")
         + p.memory.plan.kv_bytes + used) / 2**20, abs=0.01)


def test_draft_file_given_and_unknown_repo(settings):
    p = _plan(gguf_file_draft="Llama-3.2-1B-Instruct-Q8_0.gguf", n_gpu_layers_draft="99")
    assert p.launch_argv[-8:] == ["--spec-type", "draft-simple", "-md", "Llama-3.2-1B-Instruct-Q8_0.gguf",
                                  "--spec-draft-n-max", "8", "-ngld", "99"]
    q = _plan(speculative_config=SPEC.replace("bartowski/Llama-3.2-1B-Instruct-GGUF", "nobody/unknown-draft-GGUF"))
    assert q.verdict.status == "depends" and "not modelled" in q.verdict.condition


def test_ollama_refuses_draft(settings):
    from calculator.engine.errors import EngineInputError

    with pytest.raises(EngineInputError, match="Ollama has no speculative decoding"):
        _plan(runtime="ollama")
