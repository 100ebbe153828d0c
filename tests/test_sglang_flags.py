"""SGLang's own speculative flags on every surface, unknown parameters and flags named by their nearest known one,
the page telling what it left out, and whose value SGLang's ``max_running_requests`` is.

Expected values are SGLang's (sglang==0.5.10.post1 ``sglang/srt/server_args.py``): --speculative-algorithm choices
EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM (:4762); NEXTN is run as EAGLE (:2983-2984) with the target's own MTP layers
when no draft path is given (:3028-3043); with --speculative-eagle-topk 1 the draft tokens are num_steps + 1
(:3074-3081); NGRAM drafts 12 tokens when --speculative-num-draft-tokens is not given (:3108); without
--max-running-requests SGLang resets it to 48 for EAGLE / EAGLE3 / STANDALONE (:2993-2994) and NGRAM (:3098-3099).
"""
from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from io import StringIO
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from calculator.request import InputError, parse_request

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
DRAFT = "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"
SG = {"model": LLAMA, "runtime": "sglang", "gpu": "H100"}
EAGLE3_FLAGS = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": "3", "speculative_draft_model_path": DRAFT}
EAGLE3_CONFIG = json.dumps({"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 3})


pytestmark = pytest.mark.usefixtures("offline_hub")


def _flags(params: dict[str, str]) -> list[str]:
    return [a for k, v in params.items() for a in ("--" + k.replace("_", "-"), v)]


def _estimate(params: dict[str, str]) -> dict:
    out = StringIO()
    call_command("estimate", *_flags(params), "--format", "json", stdout=out)
    return json.loads(out.getvalue())


def _refusal(params: dict[str, str]) -> InputError:
    with pytest.raises(InputError) as err:
        parse_request(params)
    return err.value


# --- A. SGLang's flags are aliases of speculative_config ------------------------------------------------------------
@pytest.mark.parametrize("flags,config", [
    (EAGLE3_FLAGS, {"method": "eagle3", "model": DRAFT, "num_speculative_tokens": 3}),
    ({"speculative_algorithm": "STANDALONE", "speculative_num_steps": "4", "speculative_draft_model": "meta-llama/"
      "Llama-3.2-1B-Instruct"}, {"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct",
                                 "num_speculative_tokens": 4}),
    # NEXTN is EAGLE in SGLang: with a draft path an EAGLE draft, without one the model's own MTP layers
    ({"speculative_algorithm": "NEXTN", "speculative_num_steps": "2"}, {"method": "mtp", "num_speculative_tokens": 2}),
    ({"speculative_algorithm": "EAGLE", "speculative_num_steps": "2"}, {"method": "mtp", "num_speculative_tokens": 2}),
    ({"speculative_algorithm": "NEXTN", "speculative_num_steps": "2", "speculative_draft_model_path": "a/b"},
     {"method": "eagle", "model": "a/b", "num_speculative_tokens": 2}),
    # NGRAM: 12 draft tokens by default, the root included, so 11 proposals; --speculative-num-draft-tokens 8: 7
    ({"speculative_algorithm": "NGRAM"}, {"method": "ngram", "num_speculative_tokens": 11}),
    ({"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": "8"},
     {"method": "ngram", "num_speculative_tokens": 7}),
])
def test_sglangs_speculative_flags_are_the_one_speculative_config(flags, config):
    assert parse_request({**SG, **flags}) == parse_request({**SG, "speculative_config": json.dumps(config)})


def test_the_flags_reach_the_plan_and_the_command_on_the_api_and_the_cli(client):
    api = client.get("/api/estimate", {**SG, **EAGLE3_FLAGS})
    assert api.status_code == 200, api.content
    body = api.json()
    assert body == client.get("/api/estimate", {**SG, "speculative_config": EAGLE3_CONFIG}).json()
    # a chain (topk 1): the target verifies num_steps + 1 = 4 tokens
    assert (body["speculative"]["num_steps"], body["speculative"]["eagle_topk"],
            body["speculative"]["num_draft_tokens"]) == (3, 1, 4)
    argv = body["serve_argv"]
    for flag, value in (("--speculative-algorithm", "EAGLE3"), ("--speculative-num-steps", "3"),
                        ("--speculative-draft-model-path", DRAFT), ("--speculative-num-draft-tokens", "4")):
        assert argv[argv.index(flag) + 1] == value
    cli = _estimate({**SG, **EAGLE3_FLAGS})
    assert cli["serve_argv"] == argv


def test_ngram_by_sglangs_flag_writes_sglangs_default_draft_tokens_back():
    argv = _estimate({**SG, "speculative_algorithm": "NGRAM"})["serve_argv"]
    assert argv[argv.index("--speculative-algorithm") + 1] == "NGRAM"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "12"


def test_the_flags_and_an_agreeing_speculative_config_together_are_one_setting(client):
    both = {**SG, "speculative_config": EAGLE3_CONFIG, "speculative_num_steps": "3"}
    assert parse_request(both) == parse_request({**SG, "speculative_config": EAGLE3_CONFIG})
    # NEXTN with a draft path is EAGLE with it
    eagle = json.dumps({"method": "eagle", "model": "a/b", "num_speculative_tokens": 2})
    assert parse_request({**SG, "speculative_config": eagle, "speculative_algorithm": "NEXTN"}).speculative_config \
        .method == "eagle"


@pytest.mark.parametrize("extra,flags_text", [
    ({"speculative_num_steps": "4"}, "--speculative-num-steps 4"),
    ({"speculative_algorithm": "EAGLE"}, "--speculative-algorithm EAGLE"),
    ({"speculative_draft_model_path": "other/draft"}, "--speculative-draft-model-path other/draft"),
])
def test_disagreeing_flags_and_speculative_config_name_both(client, extra, flags_text):
    params = {**SG, "speculative_config": EAGLE3_CONFIG, **extra}
    err = _refusal(params)
    assert err.field == "speculative_config"
    assert err.message.startswith(f'speculative_config {{"method": "eagle3", "model": "{DRAFT}", '
                                  f'"num_speculative_tokens": 3}} and the SGLang flags {flags_text} disagree')
    api = client.get("/api/estimate", params)
    assert api.status_code == 400 and api.json() == {"error": f"speculative_config: {err.message}",
                                                     "field": "speculative_config"}
    with pytest.raises(CommandError) as cli:
        _estimate(params)
    assert cli.value.returncode == 2 and str(cli.value) == f"--speculative-config: {err.message}"


@pytest.mark.parametrize("flags,field,says", [
    ({"speculative_num_steps": "3"}, "speculative_algorithm", "go with --speculative-algorithm (EAGLE, EAGLE3, NEXTN, "
                                                              "STANDALONE, NGRAM)"),
    ({"speculative_algorithm": "MEDUSA", "speculative_num_steps": "3"}, "speculative_algorithm",
     "must be one of EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM"),
    ({"speculative_algorithm": "EAGLE3", "speculative_num_steps": "3"}, "speculative_draft_model_path",
     "EAGLE3 needs --speculative-draft-model-path"),
    ({"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": DRAFT}, "speculative_num_steps",
     "give --speculative-num-steps with EAGLE3"),
    ({"speculative_algorithm": "NGRAM", "speculative_num_steps": "3"}, "speculative_num_steps",
     "NGRAM does not read --speculative-num-steps"),
    ({"speculative_algorithm": "EAGLE3", "speculative_num_steps": "0", "speculative_draft_model_path": DRAFT},
     "speculative_num_steps", "must be between 1 and 16 here, got 0"),
])
def test_incomplete_sglang_flags_are_refused_by_the_flag(client, flags, field, says):
    err = _refusal({**SG, **flags})
    assert err.field == field and says in err.message
    api = client.get("/api/estimate", {**SG, **flags})
    assert api.status_code == 400 and api.json()["field"] == field


def test_with_vllm_the_sglang_flags_are_refused_naming_vllms_setting_as_each_surface_spells_it(client):
    """The API and the page name parameters (speculative_algorithm, speculative_config=JSON), the command line its
    flags (--speculative-algorithm, --speculative-config 'JSON')."""
    params = {"model": LLAMA, **EAGLE3_FLAGS}
    spec = f'{{"method": "eagle3", "model": "{DRAFT}", "num_speculative_tokens": 3}}'
    err = _refusal(params)
    assert err.field == "speculative_algorithm"
    assert err.message == f"speculative_algorithm is an SGLang setting; with runtime=vllm use speculative_config {spec}"
    api = client.get("/api/estimate", params)
    assert api.status_code == 400 and api.json() == {"error": f"speculative_algorithm: {err.message}",
                                                     "field": "speculative_algorithm"}
    assert "--" not in api.json()["error"]
    with pytest.raises(CommandError) as cli:
        _estimate(params)
    assert cli.value.returncode == 2
    assert str(cli.value) == f"--speculative-algorithm: this is an SGLang flag; vLLM's is --speculative-config '{spec}'"
    with pytest.raises(CommandError) as cli:
        _estimate({"model": LLAMA, "speculative_num_steps": "3"})
    assert cli.value.returncode == 2
    assert str(cli.value).startswith("--speculative-num-steps: this is an SGLang flag; vLLM's is --speculative-config '")
    # the page leaves it out with the API's sentence
    page = html.unescape(client.get("/", params, follow=True).content.decode())
    notice = re.search(r'<section id="not-applied".*?</section>', page, re.S).group(0)
    assert ("Not applied: speculative_algorithm=EAGLE3 (speculative_algorithm: speculative_algorithm is an SGLang "
            "setting; with runtime=vllm use speculative_config {") in notice
    assert "--speculative" not in notice
    # and vLLM's own setting with SGLang, as before
    assert "use mem_fraction_static" in _refusal({**SG, "gpu_memory_utilization": "0.5"}).message


# --- unknown parameters and flags -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,near", [("max_model_length", "max_model_len"), ("speculative_num_step",
                                       "speculative_num_steps"), ("max-model-len", "max_model_len"),
                                       ("tensor_paralel_size", "tensor_parallel_size")])
def test_an_unknown_api_parameter_names_the_nearest_known_one(client, name, near):
    api = client.get("/api/estimate", {"model": LLAMA, name: "4096"})
    assert api.status_code == 400
    assert api.json() == {"error": f"{name}: unknown parameter {name!r}; did you mean {near!r}?", "field": name}


def test_a_short_flags_name_as_a_parameter_names_the_parameter_it_sets(client):
    """``tp=2``: the command line's ``-tp`` is ``tensor_parallel_size`` on the page and the API."""
    body = client.get("/api/estimate", {"model": LLAMA, "tp": "2"}).json()
    assert body == {"error": "tp: unknown parameter 'tp'; did you mean 'tensor_parallel_size'?", "field": "tp"}


def test_an_unknown_api_parameter_with_no_near_name_does_not_list_every_parameter(client):
    body = client.get("/api/estimate", {"model": LLAMA, "foo": "1"}).json()
    assert body["field"] == "foo" and body["error"].startswith("foo: unknown parameter 'foo'; no parameter has a name")
    assert "kv_cache_dtype" not in body["error"] and len(body["error"]) < 200


@pytest.mark.parametrize("argv,line", [
    (["--speculative-num-stepz", "3"], "unrecognized flag --speculative-num-stepz; did you mean --speculative-num-steps?"),
    (["--max_model_len", "4096"], "unrecognized flag --max_model_len; did you mean --max-model-len?"),
    (["--max-model-length", "4096", "--bar"],
     "unrecognized flag --max-model-length (and 1 more unrecognized flag); did you mean --max-model-len?"),
    (["--foo", "1"], "unrecognized flag --foo; manage.py estimate --help lists the flags"),
    # a prefix of a flag is not that flag (argparse's abbreviations are off): SGLang and vLLM take flags whole
    (["--speculative-num-step", "3"], "unrecognized flag --speculative-num-step; did you mean --speculative-num-steps?"),
    (["--max-model", "4096"], "unrecognized flag --max-model; did you mean --max-model-len?"),
    # a short flag written with two dashes (the calculator takes -tp and -ngl as vLLM and llama.cpp do): both spellings
    (["--tp", "2"], "unrecognized flag --tp; did you mean --tensor-parallel-size (-tp)?"),
    (["--ngl", "99"], "unrecognized flag --ngl; did you mean --n-gpu-layers (-ngl)?"),
    # Ollama's option names (num_gpu is -ngl, not --main-gpu, which difflib would offer)
    (["--num-gpu", "20"], "unrecognized flag --num-gpu; that is Ollama's name: here it is --n-gpu-layers, which the "
                          "Ollama command and Modelfile set for you"),
    (["--num_ctx", "8192"], "unrecognized flag --num_ctx; that is Ollama's name: here it is --ctx-size, which the "
                            "Ollama command and Modelfile set for you"),
])
def test_an_unknown_cli_flag_exits_2_with_one_line_naming_the_nearest(argv, line):
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", LLAMA, *argv, stdout=StringIO(), stderr=StringIO())
    assert err.value.returncode == 2
    assert str(err.value) == line


def test_on_the_command_line_an_unknown_flag_is_one_line_on_stderr_and_exit_2():
    run = subprocess.run([sys.executable, "manage.py", "estimate", "--model", LLAMA, "--speculative-num-stepz", "3"],
                         capture_output=True, text=True, timeout=120, env={"HF_HUB_OFFLINE": "1",
                                                                           "PATH": "/usr/bin:/bin"})
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == ("manage.py estimate: error: unrecognized flag --speculative-num-stepz; did you mean "
                          "--speculative-num-steps?\n")


# --- B. the page says what it did not apply ----------------------------------------------------------------------------
@pytest.mark.parametrize("extra", [
    {"max_model_length": "4096"},
    {"runtime": "sglang", "gpu_memory_utilization": "0.5"},
    {"foo": "1"},
    {"speculative_num_steps": "3"},
])
def test_the_page_shows_each_parameter_it_left_out_with_the_apis_sentence(client, extra):
    query = {"model": "Qwen/Qwen3-8B", "gpu": "H100", **extra}
    api_error = client.get("/api/estimate", query).json()["error"]
    (name, value), = ((k, v) for k, v in extra.items() if k != "runtime")
    r = client.get("/", query)
    # answered in this response (no redirect: nothing has to carry the notice to a next request)
    assert r.status_code == 200
    page = r.content.decode()
    notice = re.search(r'<section id="not-applied".*?</section>', page, re.S)
    assert notice is not None
    text = html.unescape(notice.group(0))
    assert f"Not applied: {name}={value} ({api_error})" in text
    assert f"{name}={value}" in text.split("Your address as given: ")[1]  # the request as the user gave it
    # the permalink answers what was applied (the script puts it in the address bar) and has no notice
    permalink = html.unescape(re.search(r'data-permalink="([^"]*)"', notice.group(0)).group(1))
    assert f"{name}=" not in permalink and f'<link rel="canonical" href="http://testserver{html.escape(permalink)}">' \
        in page
    assert b'id="not-applied"' not in client.get(permalink).content


def test_the_not_applied_notice_needs_no_cookie(client):
    """A client that keeps no cookies (a link preview, ``curl``, a first visit with cookies off) sees the notice: it is
    rendered from the request, on the full page and in the htmx fragment, and no session or messages cookie carries
    it."""
    from django.conf import settings
    from django.test import Client

    query = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "max_model_length": "4096"}
    sentence = client.get("/api/estimate", query).json()["error"]
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        bare = Client()  # a fresh client each time: no cookie from an earlier answer
        r = bare.get("/", query, **headers)
        assert r.status_code == 200
        # nothing carries the notice to a next request (the page's CSRF cookie is all it sets)
        assert not {settings.SESSION_COOKIE_NAME, "messages"} & set(r.cookies)
        notice = re.search(r'<section id="not-applied".*?</section>', r.content.decode(), re.S)
        assert notice is not None
        assert f"Not applied: max_model_length=4096 ({sentence})" in html.unescape(notice.group(0))


def test_the_page_takes_sglangs_flags_into_the_permalinks_speculative_config(client):
    r = client.get("/", {**SG, **EAGLE3_FLAGS}, follow=True)
    assert r.status_code == 200 and b'id="not-applied"' not in r.content
    permalink = r.redirect_chain[-1][0]
    assert "speculative_algorithm" not in permalink and "speculative_config=" in permalink
    assert parse_request(dict(parse_qsl(urlsplit(permalink).query))) == parse_request({**SG, **EAGLE3_FLAGS})


def test_an_untouched_release_picker_of_another_runtime_is_not_reported(client):
    """The form submits every runtime's release picker; switching to SGLang leaves vLLM's default release behind,
    which is not something the user asked for. Another release is."""
    base = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "runtime": "sglang"}
    from calculator.request import default_release

    assert b'id="not-applied"' not in client.get("/", {**base, "vllm_version": default_release()}, follow=True).content
    r = client.get("/", {**base, "vllm_version": "0.19.0"}, follow=True)
    assert "Not applied: vllm_version=0.19.0 (vllm_version: vllm_version is a vLLM setting; with runtime=sglang use " \
           "sglang_version)" in html.unescape(r.content.decode())


# --- C. whose value max_running_requests is ----------------------------------------------------------------------------
SPEC_DEFAULT = 48  # sglang==0.5.10.post1 server_args.py:2993-2994, for EAGLE / EAGLE3 / NEXTN / STANDALONE


def _mrr(params: dict[str, str]) -> tuple[int, str]:
    body = _estimate({**SG, "speculative_config": EAGLE3_CONFIG, **params})
    return body["max_running_requests"], body["sources"]["max_running_requests"]


def test_the_speculative_default_is_labelled_sglangs_not_the_users():
    value, source = _mrr({})
    assert value == SPEC_DEFAULT
    assert source.startswith(f"source: SGLang's speculative default {SPEC_DEFAULT}: --max-running-requests was not "
                             "given, so SGLang resets it to 48 for EAGLE3 (sglang==0.5.23 "
                             "sglang/srt/arg_groups/speculative_hook.py:1090)")  # the default release's line
    assert "as given" not in source


def test_the_users_max_running_requests_is_labelled_as_given():
    value, source = _mrr({"max_running_requests": "20"})
    assert value == 20 and source.startswith("input: --max-running-requests 20 as given, capped by the request slots")


def test_the_commands_lifted_value_is_labelled_the_commands():
    # 64 clients on one replica: more than SGLang's 48, so the command passes --max-running-requests 64
    value, source = _mrr({"concurrency": "64"})
    assert value == 64
    assert source.startswith("source: the command's --max-running-requests 64: the clients per replica, passed because "
                             "they are more than SGLang's speculative default (48, sglang==0.5.23 "
                             "sglang/srt/arg_groups/speculative_hook.py:1090)")


def test_ngrams_default_cites_the_ngram_block():
    body = _estimate({**SG, "speculative_algorithm": "NGRAM"})
    assert body["max_running_requests"] == 48
    assert "resets it to 48 for NGRAM (sglang==0.5.23 sglang/srt/arg_groups/speculative_hook.py:1298)" in \
        body["sources"]["max_running_requests"]
    old = _estimate({**SG, "speculative_algorithm": "NGRAM", "sglang_version": "0.5.10.post1"})
    assert "resets it to 48 for NGRAM (sglang==0.5.10.post1 sglang/srt/server_args.py:3099)" in \
        old["sources"]["max_running_requests"]


def test_a_live_edit_that_leaves_a_setting_out_says_so_in_the_fragment(client):
    """The runtime menu switched to SGLang with vLLM's --gpu-memory-utilization still set: the fragment answers SGLang
    and says the setting was not applied (the form keeps the switch working instead of refusing it)."""
    r = client.get("/", {"model": "Qwen/Qwen3-8B", "gpu": "H100", "runtime": "sglang", "gpu_memory_utilization": "0.5"},
                   HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and b'id="verdict"' in r.content
    text = html.unescape(r.content.decode())
    assert "Not applied: gpu_memory_utilization=0.5 (gpu_memory_utilization: gpu_memory_utilization is a vLLM " \
           "setting; with runtime=sglang use mem_fraction_static)" in text
    assert "gpu_memory_utilization" not in r["HX-Push-Url"]


def _suggested(message: str) -> list[str]:
    """The settings a "use ..." refusal tells the user to give: the parameters and flags it names outside its
    parentheses (the parentheses explain; "nothing" names none)."""
    use = message.split("; with runtime=", 1)[1].split(" use ", 1)[1]
    depth, bare = 0, []
    for ch in use:
        depth += ch == "("
        if depth == 0:
            bare.append(ch)
        depth -= ch == ")"
    return re.findall(r"--[a-z][a-z0-9-]+|\b[a-z]+(?:_[a-z]+)+\b", "".join(bare))


@pytest.mark.parametrize("runtime", ["sglang", "llama.cpp", "ollama"])
def test_enforce_eager_elsewhere_names_no_flag_the_calculator_refuses(runtime):
    """vLLM's --enforce-eager with another runtime is refused; the sentence must not send the user to a setting the
    calculator then refuses too (SGLang's --disable-cuda-graph is not an input here: the SGLang plan keeps its CUDA
    graphs on, SGLang's default)."""
    with pytest.raises(InputError) as refused:
        parse_request(SG | {"runtime": runtime, "enforce_eager": "true"})
    assert refused.value.field == "enforce_eager" and "is a vLLM setting" in refused.value.message
    assert _suggested(refused.value.message) == []
    if runtime == "sglang":
        assert "--disable-cuda-graph" in refused.value.message and "not modelled" in refused.value.message
    else:
        assert "SGLang" not in refused.value.message
    # and it is indeed not taken: neither the API's parameter nor SGLang's command-line flag
    with pytest.raises(InputError) as unknown:
        parse_request(SG | {"runtime": runtime, "disable_cuda_graph": "true"})
    assert unknown.value.message.startswith("unknown parameter 'disable_cuda_graph'")
    with pytest.raises(CommandError) as flag:
        call_command("estimate", "--model", LLAMA, "--runtime", runtime, "--disable-cuda-graph", stdout=StringIO(),
                     stderr=StringIO())
    assert flag.value.returncode == 2


def test_no_refusal_of_another_runtimes_setting_names_a_setting_the_calculator_refuses():
    """Every "X is a <runtime> setting; with runtime=R use Y" sentence: each parameter or flag Y names (outside its
    explanations in parentheses) is one the calculator takes with runtime R."""
    from calculator.request import RUNTIME_ONLY

    for runtime in ("vllm", "sglang", "llama.cpp", "ollama"):
        for fields in RUNTIME_ONLY.values():
            for name in fields:
                message = None
                for value in ("true", "2", "0.5", "q8_0", "0.5.3"):
                    try:
                        parse_request({"model": LLAMA, "runtime": runtime, name: value})
                        break
                    except InputError as exc:
                        if "setting; with runtime=" in exc.message:
                            message = exc.message
                            break
                if message is None:
                    continue
                for named in _suggested(message):
                    param = named.lstrip("-").replace("-", "_")
                    try:
                        parse_request({"model": LLAMA, "runtime": runtime, param: "1"})
                    except InputError as exc:
                        assert not exc.message.startswith("unknown parameter"), (runtime, name, message)
                        assert "setting; with runtime=" not in exc.message, (runtime, name, message, exc.message)
