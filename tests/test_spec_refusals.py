"""Speculative-decoding refusals in the order and words of the runtime that stops: SGLang 0.4.3.post4's NEXTN without
a draft path (its draft worker's model config is built from that path), and vLLM 0.10.0's ``method: mtp`` (its
SpeculativeMethod names only ``deepseek_mtp``), which vLLM parses before any attention backend is selected."""
from __future__ import annotations

import json
import zipfile

import pytest

from compat.fetch import default_wheel_dir, find_wheel

WHEELS = default_wheel_dir()
R1 = {"model": "deepseek-ai/DeepSeek-R1", "gpu": "H200", "runtime": "sglang", "sglang_version": "0.4.3.post4",
      "tensor_parallel_size": "8"}
NEXTN_FLAGS = {"speculative_algorithm": "NEXTN", "speculative_num_steps": "3", "speculative_eagle_topk": "1",
               "speculative_num_draft_tokens": "4"}
V3_MTP = {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "tensor_parallel_size": "8", "vllm_version": "0.10.0",
          "speculative_config": json.dumps({"method": "mtp", "num_speculative_tokens": 3})}


pytestmark = pytest.mark.usefixtures("offline_hub")


def _line(whl, path: str, n: int) -> str:
    return zipfile.ZipFile(whl).read(path).decode().splitlines()[n - 1]


def test_the_cited_sglang_lines_say_what_the_refusal_says():
    """Read by hand in the wheels, each line checked back here."""
    old = sorted(WHEELS.glob("sglang-0.4.3.post4-*.whl"))
    new = sorted(WHEELS.glob("sglang-0.4.10.post2-*.whl"))
    if not old or not new:
        pytest.skip(f"SGLang 0.4.3.post4 / 0.4.10.post2 wheels not in {WHEELS}")
    sa = "sglang/srt/server_args.py"
    assert _line(old[0], sa, 274).strip() == 'if self.speculative_algorithm == "NEXTN":'
    assert _line(old[0], sa, 276).strip() == 'self.speculative_algorithm = "EAGLE"'
    tw = "sglang/srt/managers/tp_worker.py"
    assert _line(old[0], tw, 60).strip() == "self.model_config = ModelConfig("
    assert _line(old[0], tw, 64).strip() == "else server_args.speculative_draft_model_path"
    nx = "sglang/srt/models/deepseek_nextn.py"
    assert _line(old[0], nx, 159).strip() == 'assert num_nextn_layers == 1, "Only 1 nextn layer is supportted"'
    assert _line(old[0], nx, 160).strip() == "assert num_nextn_layers == self.config.num_hidden_layers"
    assert "speculative_draft_model_path" not in "\n".join(
        zipfile.ZipFile(old[0]).read(sa).decode().splitlines()[270:300])  # 0.4.3.post4 never fills it
    assert _line(new[0], sa, 550).strip() == 'if model_arch in ["DeepseekV3ForCausalLM", "Glm4MoeForCausalLM"]:'
    assert _line(new[0], sa, 552).strip() == "if self.speculative_draft_model_path is None:"
    assert _line(new[0], sa, 553).strip() == "self.speculative_draft_model_path = self.model_path"


def test_nextn_without_a_draft_path_does_not_start_on_0_4_3_post4(client):
    body = client.get("/api/estimate", {**R1, **NEXTN_FLAGS}).json()
    assert body["verdict"] == "does_not_start", body["verdict_headline"]
    head = body["verdict_headline"]
    assert "sglang/srt/managers/tp_worker.py:60-64" in head and "deepseek_nextn.py:159-160" in head
    assert "--speculative-draft-model-path" in head and "--sglang-version 0.4.10.post2" in head
    assert "sglang==0.4.10.post2 sglang/srt/server_args.py:549-553" in head
    # the release that fills the path itself is offered, checked through the pipeline
    assert {"sglang_version": "0.4.10.post2"} in [s["params"] for s in body["suggestions"]]
    after = client.get("/api/estimate", {**R1, **NEXTN_FLAGS, "sglang_version": "0.4.10.post2"}).json()
    assert after["verdict"] != "does_not_start" or "tp_worker.py:60-64" not in after["verdict_headline"]


def test_nextn_with_a_draft_path_carries_it_in_the_command(client):
    body = client.get("/api/estimate", {**R1, **NEXTN_FLAGS,
                                        "speculative_draft_model_path": "lmsys/DeepSeek-R1-NextN"}).json()
    assert "tp_worker.py:60-64" not in body["verdict_headline"]
    argv = body["serve_argv"]
    assert argv[argv.index("--speculative-draft-model-path") + 1] == "lmsys/DeepSeek-R1-NextN"
    # NEXTN is EAGLE in 0.4.3.post4 (server_args.py:274-276): the command says the algorithm it runs
    assert argv[argv.index("--speculative-algorithm") + 1] in ("EAGLE", "NEXTN")


def test_a_method_vllm_0_10_0_lacks_is_the_headline_and_its_own_name_is_offered(client):
    body = client.get("/api/estimate", V3_MTP).json()
    assert body["verdict"] == "does_not_start"
    # vllm==0.10.0 vllm/config.py:2594-2595: SpeculativeMethod = Literal[..., "deepseek_mtp"], no "mtp"
    assert body["verdict_headline"] == "speculative decoding: speculative method 'mtp' does not exist in vLLM 0.10.0"
    assert not any("no attention backend" in r for r in body["verdict_reasons"])  # FlashMLA takes DeepSeek-V3
    fixed = {"method": "deepseek_mtp", "num_speculative_tokens": 3}
    assert [json.loads(s["params"]["speculative_config"]) for s in body["suggestions"]
            if "speculative_config" in s["params"]] == [fixed]
    again = client.get("/api/estimate", {**V3_MTP, "speculative_config": json.dumps(fixed)}).json()
    assert again["verdict"] == "works", again["verdict_headline"]


def test_the_cited_vllm_order_is_in_the_0_10_0_wheel():
    whl = find_wheel(WHEELS, "0.10.0")
    if whl is None:
        pytest.skip(f"vllm 0.10.0 wheel not in {WHEELS}")
    au = "vllm/engine/arg_utils.py"
    assert _line(whl, au, 1004).strip() == "model_config = self.create_model_config()"
    assert _line(whl, au, 1183).strip() == "speculative_config = self.create_speculative_config("
    assert _line(whl, au, 1277).strip() == "config = VllmConfig("
    assert _line(whl, "vllm/config.py", 2594).startswith("SpeculativeMethod = Literal[")
    assert '"deepseek_mtp"]' in _line(whl, "vllm/config.py", 2595)


def test_a_backend_refusal_still_heads_the_verdict_without_speculation():
    """decide(): a report that fails on its backend alone keeps the backend's reason."""
    from types import SimpleNamespace

    from calculator.verdict import decide

    memory = SimpleNamespace(fits=True, reason=None, max_model_len=4096, kv_cache_tokens=1, max_concurrency=1.0,
                             condition=None)
    compat = SimpleNamespace(ok=False, error=None, speculative=[], requested_backend=None, auto_selected=None,
                             backends=[], auto_conditions=[], release="0.10.0", gpu="X")
    v = decide(SimpleNamespace(runtime="vllm", prompt_len=None, output_len=None), memory, compat)
    assert v.headline == "no attention backend of vLLM 0.10.0 accepts this configuration on X"


def test_eagle3_on_0_4_3_post4_names_both_spellings_and_the_release_that_takes_it(client):
    """sglang==0.4.3.post4 server_args.py:749 choices=["EAGLE", "NEXTN"]; 0.4.10.post2 :1329 adds EAGLE3."""
    old = sorted(WHEELS.glob("sglang-0.4.3.post4-*.whl"))
    new = sorted(WHEELS.glob("sglang-0.4.10.post2-*.whl"))
    if old and new:
        assert _line(old[0], "sglang/srt/server_args.py", 749).strip() == 'choices=["EAGLE", "NEXTN"],'
        assert _line(new[0], "sglang/srt/server_args.py", 1329).strip() == 'choices=["EAGLE", "EAGLE3", "NEXTN"],'
    r = client.get("/api/estimate", {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H200", "runtime": "sglang",
                                     "sglang_version": "0.4.3.post4", "speculative_algorithm": "EAGLE3",
                                     "speculative_num_steps": "3",
                                     "speculative_draft_model_path": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"})
    assert r.status_code == 400
    msg = r.json()["error"]
    assert "--speculative-algorithm EAGLE3" in msg and "speculative_config method eagle3" in msg
    assert "--sglang-version 0.4.10.post2" in msg


def test_an_architecture_the_release_lacks_does_not_start_and_offers_the_release_that_has_it(client):
    """gpt-oss-20b's GptOssForCausalLM: no EntryClass in sglang==0.4.3.post4 sglang/srt/models (no gpt_oss.py), one
    from 0.5.3 (sglang/srt/models/gpt_oss.py EntryClass = GptOssForCausalLM), checked in the wheels below."""
    for release, present in (("0.4.3.post4", False), ("0.4.10.post2", False), ("0.5.3", True)):
        whl = sorted(WHEELS.glob(f"sglang-{release}-*.whl"))
        if whl:
            names = zipfile.ZipFile(whl[0]).namelist()
            assert ("sglang/srt/models/gpt_oss.py" in names) is present, release
            if present:
                src = zipfile.ZipFile(whl[0]).read("sglang/srt/models/gpt_oss.py").decode()
                assert "EntryClass = GptOssForCausalLM" in src
    r = client.get("/api/estimate", {"model": "openai/gpt-oss-20b", "gpu": "H200", "runtime": "sglang",
                                     "sglang_version": "0.4.3.post4"})
    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["verdict"] == "does_not_start"
    assert body["verdict_headline"].startswith("GptOssForCausalLM is not a model class of SGLang 0.4.3.post4")
    assert [s["params"] for s in body["suggestions"]][:1] == [{"sglang_version": "0.5.3"}]
    assert body["runtime_release"] == "0.5.3"  # the figures shown are 0.5.3's, and the notes say so
    assert any("the figures are SGLang 0.5.3's" in n for n in body["notes"])
    assert client.get("/api/estimate", {"model": "openai/gpt-oss-20b", "gpu": "H200", "runtime": "sglang",
                                        "sglang_version": "0.5.3"}).json()["verdict"] == "works"


def test_the_page_and_the_command_line_answer_the_missing_architecture(client):
    q = {"model": "openai/gpt-oss-20b", "gpu": "H200", "runtime": "sglang", "sglang_version": "0.4.3.post4"}
    r = client.get("/", q, follow=True)
    assert r.status_code == 200
    page = r.content.decode()
    assert "GptOssForCausalLM is not a model class of SGLang 0.4.3.post4" in page and "0.5.3" in page
    from io import StringIO

    from django.core.management import call_command

    from calculator.cli import Verdict

    out = StringIO()
    with pytest.raises(Verdict) as e:
        call_command("estimate", "--runtime", "sglang", "--sglang-version", "0.4.3.post4", "--model",
                     "openai/gpt-oss-20b", "--gpu", "H200", stdout=out)
    assert e.value.returncode == 1  # does not start, not bad input (2)
    assert "--sglang-version 0.5.3" in out.getvalue()
