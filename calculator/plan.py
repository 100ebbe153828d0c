"""The pipeline every surface calls: request -> model -> runtime memory plan -> compat -> verdict -> speed.

``make_plan(request)`` is the one place a :class:`~calculator.request.ServingRequest` is answered. The
page, the fragment, the JSON API, ``manage.py estimate`` / ``check_compat`` / ``validate`` and the
validator all read the :class:`Plan` it returns, so they cannot disagree. Plans are kept in Django's
cache (keyed by the request; a plan depends only on it and on the model's pinned metadata), the one
cache of the web path.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from calculator.engine.errors import EngineInputError
from calculator.request import ServingRequest, merge_params, parse_request, runtime_params
from calculator.runtimes import LoadedModel, get_runtime
from calculator.verdict import Verdict, decide, suggest

PLAN_CACHE_S = 3600
METADATA_CACHE_S = 60


class Plan(BaseModel):
    """Everything known about one request. ``memory`` is the runtime's start-up memory plan per GPU
    (:class:`calculator.engine.EstimateResult` for vLLM), ``compat`` its compatibility report (or ``None``
    with ``compat_error`` saying why), ``speed`` the speed prediction (or ``speed_error``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    request: ServingRequest
    runtime: str
    model: LoadedModel
    memory: Any
    compat: Any = None
    compat_error: str | None = None
    speed: Any = None
    speed_error: str | None = None
    launch_argv: list[str]
    verdict: Verdict

    @property
    def model_id(self) -> str:
        return self.model.repo_id

    def permalink_params(self) -> dict[str, str]:
        """The request's non-default parameters with the model's Hub spelling and resolved sha."""
        params = self.request.to_params()
        params["model"] = self.model.repo_id
        if self.model.sha:
            params = {k: (self.model.sha if k == "revision" else v) for k, v in params.items()}
            if "revision" not in params:
                params = _insert_after(params, "model", "revision", self.model.sha)
        return params


def _insert_after(params: dict[str, str], after: str, key: str, value: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in params.items():
        out[k] = v
        if k == after:
            out[key] = value
    return out


# --- models -------------------------------------------------------------------------------------------
def load_metadata(model_id: str, revision: str | None, field: str = "model"):
    """The metadata layer's answer for a Hub id (database cache -> Hub pinned to a sha -> offline catalog,
    :func:`calculator.metadata.load_model`), kept ``METADATA_CACHE_S`` seconds in Django's cache. Without
    a migrated database the offline catalog answers alone.

    Raises:
        EngineInputError: on ``field`` (``revision`` for an unknown revision) with the metadata layer's
            sentence: unknown model, gated repo, Hub down and no copy.
    """
    from django.core.cache import cache
    from django.db import DatabaseError

    from calculator.metadata import catalog
    from calculator.metadata import MetadataError, RevisionNotFoundError, load_model

    key = "meta:" + hashlib.sha256(f"{model_id}\0{revision}".encode()).hexdigest()
    hit = cache.get(key)
    if hit is not None:
        return hit
    try:
        # count_params=False: never build a model on torch's meta device while answering a request (a Hub
        # repo without safetensors headers is counted from its config by the engine, with a note)
        meta = load_model(model_id, revision, count_params=False)
    except RevisionNotFoundError as exc:
        raise EngineInputError("revision" if field == "model" else field, exc.message) from None
    except MetadataError as exc:
        cli = getattr(exc, "cli_message", None)
        if cli:  # the way out differs by surface: the page's model field, the command's --model / --config
            from calculator.request import WordedPerSurface

            page = exc.message
            if field != "model":  # the draft: its own field on the page, the model of --speculative-config
                page = page.replace("the model field", "the speculative_model field")
                cli = cli.replace("(--model)", "(the model of --speculative-config)").replace(
                    "as --model", "as the model of --speculative-config")
            raise WordedPerSurface(field, page, cli) from None
        raise EngineInputError(field, exc.message) from None
    except DatabaseError:
        meta = catalog.catalog_lookup(model_id)
        if meta is None:
            hint = catalog.did_you_mean(model_id)
            raise EngineInputError(field, f"{model_id!r} is not in the offline catalog" + (f"; {hint} Or, if you meant"
                                   f" {model_id!r}:" if hint else " and") + " the metadata cache is not set up: run "
                                   "`python manage.py migrate` (scripts/start does) to look it up on the Hub") from None
        meta.notes.append("metadata cache unavailable (database not migrated): answered from the offline catalog")
    cache.set(key, meta, METADATA_CACHE_S)
    return meta


def _from_meta(meta) -> LoadedModel:
    return LoadedModel(repo_id=meta.repo_id, config=meta.config, source=meta.source, sha=meta.sha,
                       quant_config=meta.quant_config, weights=meta.weights, notes=tuple(meta.notes))


#: where each runtime sets ``--hf-overrides`` / ``--json-model-override-args`` on the loaded config
HF_OVERRIDES_SOURCE = {
    "vllm": ("vLLM sets each key on the loaded config as given: a flat value through config.update "
             "(vllm/transformers_utils/config.py:926-928 in 0.32.0), a dict value by setattr after loading "
             "(vllm/config/model.py:544-559, :680-681), so a rope_scaling given replaces the config's"),
    "sglang": ("SGLang sets each key on the loaded config; a rope_scaling / rope_parameters dict is merged into the "
               "config's (sglang==0.5.23 sglang/srt/utils/hf_transformers/config.py:405-424)"),
}


def apply_hf_overrides(model: LoadedModel, request: ServingRequest) -> LoadedModel:
    """``model`` with ``request.hf_overrides`` set on its config as the runtime sets them on load
    (:data:`HF_OVERRIDES_SOURCE`), and a note saying so; ``model`` itself when the request has none.

    The keys are the context ones :class:`calculator.request.HfOverrides` allows (RoPE scaling,
    ``max_position_embeddings``); the memory rules then derive the context from the result (vLLM:
    ``_get_and_verify_max_len``, per release; SGLang: ``get_context_length``).

    The request refuses the setting for llama.cpp and Ollama (``request.SERVER_ONLY``).

    Raises:
        EngineInputError: (field ``hf_overrides``) a model whose config keeps its language model's keys in a
            ``text_config`` (the runtimes set the keys on the top-level config; a nested override is not modelled).
    """
    overrides = request.hf_overrides
    if overrides is None:
        return model
    if isinstance(model.config.get("text_config"), dict):
        raise EngineInputError("hf_overrides", f"{model.repo_id}'s config keeps its language model's settings in "
                               "text_config, where a top-level override does not reach; overriding them there is "
                               "not modelled")
    given = overrides.as_config()
    config = dict(model.config)
    for key, value in given.items():
        if request.runtime == "sglang" and isinstance(value, dict) and isinstance(config.get(key), dict):
            value = {**config[key], **value}
        config[key] = value
    if "rope_parameters" in given:  # transformers 5's name; the engine reads rope_scaling (the same setting)
        config["rope_scaling"] = config["rope_parameters"]
    notes = [f"config.json with {'--json-model-override-args' if request.runtime == 'sglang' else '--hf-overrides'} "
             f"{json.dumps(given, separators=(', ', ': '))} applied: {HF_OVERRIDES_SOURCE[request.runtime]}"]
    trained, raised = model.config.get("max_position_embeddings"), given.get("max_position_embeddings")
    rope = config.get("rope_scaling") if isinstance(config.get("rope_scaling"), dict) else {}
    covered = (rope.get("factor") or 0) * (rope.get("original_max_position_embeddings") or trained or 0)
    if isinstance(trained, int) and raised and raised > trained and covered < raised:
        notes.append(f"max_position_embeddings raised from {trained:,} to {raised:,} without a RoPE scaling that "
                     f"covers it (factor x original length: {covered:,.0f}): the runtime takes the length, but "
                     f"positions past the {trained:,} the model was configured for are outside what it was trained on "
                     "(the risk VLLM_ALLOW_LONG_MAX_MODEL_LEN warns of: with RoPE, wrong outputs or NaN)")
    return LoadedModel(**{**model.__dict__, "config": config, "notes": (*model.notes, *notes)})


def load(request: ServingRequest, local: dict[str, Any] | None = None) -> LoadedModel:
    """The model and draft a request names. ``local`` (command line only): ``{"config": dict, "source": str,
    "quant_config": dict | None}`` for a ``config.json`` given by path instead of a Hub id.

    Raises:
        EngineInputError: unknown model or draft (fields ``model``, ``revision``, ``speculative_config.model``).
    """
    if local is not None:
        model = LoadedModel(repo_id=request.model, config=local["config"], source=local["source"],
                            quant_config=local.get("quant_config"))
    else:
        _refuse_gguf_repo(request)
        model = _from_meta(load_metadata(request.model, request.revision))
    model = apply_hf_overrides(model, request)
    spec = request.speculative_config
    if spec is not None and spec.model and local is not None and local.get("draft_config"):
        draft = LoadedModel(repo_id=spec.model, config=local["draft_config"], source="draft config.json file")
        model = LoadedModel(**{**model.__dict__, "draft": draft})
    elif spec is not None and spec.model:
        try:
            draft = _from_meta(load_metadata(spec.model, None, field="speculative_config.model"))
        except EngineInputError:
            if spec.method not in ("eagle", "eagle3"):
                raise
            # EAGLE heads are one target-shaped decoder layer (perf.synthetic_eagle_head cites the shape);
            # when the head's own config cannot be read, that shape is assumed, and the answer says so.
            from calculator.engine.perf import synthetic_eagle_head

            draft = LoadedModel(repo_id=spec.model, config=synthetic_eagle_head(model.config, spec.method),
                                source=f"assumed: one {spec.method} decoder layer shaped like {model.repo_id}",
                                notes=(f"{spec.model}'s config.json could not be read (not in the offline catalog, Hub "
                                       "unreachable): its size is assumed to be one decoder layer shaped like the "
                                       "target, as the public EAGLE heads are",))
            model = LoadedModel(**{**model.__dict__, "notes": (*model.notes, *draft.notes)})
        model = LoadedModel(**{**model.__dict__, "draft": draft})
    return model


def local_of(plan: Plan) -> dict[str, Any] | None:
    """The ``local`` model (:func:`load`) a plan was made from: the command line's ``--config`` files, read back
    from the plan's model (its config, quantization file and draft config), so a second answer of the same request
    (another runtime, another release) reads them too; ``None`` for a Hub or catalog model."""
    m = plan.model
    if not m.source.startswith("config.json file"):
        return None
    return {"config": m.config, "source": m.source, "quant_config": m.quant_config,
            **({"draft_config": m.draft.config} if m.draft is not None else {})}


def _refuse_gguf_repo(request: ServingRequest) -> None:
    """A GGUF repository of the offline GGUF catalog asked of vLLM or SGLang: say what it is and which runtime
    reads it, instead of "not in the catalog". Raises ``EngineInputError("model")``."""
    if request.runtime not in ("vllm", "sglang"):
        return
    from calculator.runtimes.llamacpp.gguf_repos import catalog_entry

    entry = catalog_entry(request.model)
    if entry is None:
        return
    base = entry["config"].removesuffix(".json").replace("__", "/", 1)
    raise EngineInputError("model", f"{entry['repo_id']} is a GGUF repository (.gguf files only, as the "
                                    "calculator's catalog of GGUF repositories lists it): vLLM and SGLang are answered here for "
                                    "safetensors checkpoints (vLLM's GGUF loading is experimental and not modelled). "
                                    f"Use --runtime llama.cpp or ollama for it, or {base} with "
                                    f"{'vLLM' if request.runtime == 'vllm' else 'SGLang'}")


def quantized_variants(model_id: str) -> list[str]:
    """Catalog checkpoints of the same model in another precision (``…-FP8``, ``…-AWQ``, ``…-GPTQ-Int4``,
    ``…-NVFP4``...), most compact last; the model's own name is matched without org and suffix."""
    from calculator.metadata import catalog

    base = _base_name(model_id)
    out = []
    for repo in catalog.catalog_models():
        if repo.lower() != model_id.lower() and _base_name(repo) == base and repo.lower() != base:
            out.append(repo)
    order = ("fp8", "int8", "w8a8", "awq", "gptq", "int4", "w4a16", "nvfp4", "fp4")
    return sorted(out, key=lambda r: next((i for i, tag in enumerate(order) if tag in r.lower()), len(order)))


QUANT_TAGS = ("-fp8-dynamic", "-fp8", "-awq", "-gptq-int4", "-gptq-int8", "-gptq", "-int4", "-int8", "-w8a8",
              "-w4a16", "-nvfp4", "-fp4", "-quantized.w4a16", "-quantized.w8a8")


def _base_name(repo: str) -> str:
    name = repo.split("/")[-1].lower()
    changed = True
    while changed:
        changed = False
        for tag in QUANT_TAGS:
            if name.endswith(tag):
                name, changed = name[: -len(tag)], True
    return name


def with_known_draft_head(request: ServingRequest) -> tuple[ServingRequest, str | None]:
    """EAGLE / EAGLE-3 without a named head: the public head catalogued for the target
    (:func:`calculator.engine.acceptance.known_draft_head`, with its source), or a refusal naming the field.
    Returns the request with ``speculative_config.model`` filled and a note saying so."""
    spec = request.speculative_config
    if spec is None or spec.method not in ("eagle", "eagle3") or spec.model:
        return request, None
    from calculator.engine.acceptance import known_draft_head

    known = known_draft_head(request.model, spec.method)
    if known is None:
        raise EngineInputError("speculative_config", f"no public {spec.method} head is known for {request.model}: "
                               "give speculative_config.model (the head's Hugging Face id)")
    head, source = known
    changed = request.replace(speculative_config={**spec.model_dump(exclude_none=True), "model": head})
    needs = ("SGLang needs --speculative-draft-model-path for EAGLE" if request.runtime == "sglang"
             else f"vLLM refuses {spec.method} without a draft model")
    return changed, (f"speculative_config.model not given: {needs}, so the answer and the command use {head}, the "
                     f"public {spec.method} head for {request.model} ({source})")


# --- the pipeline -------------------------------------------------------------------------------------
#: the runtimes a "not modelled" refusal is checked against (:func:`_runtime_that_models`), with their flag value
_OTHER_RUNTIMES = {"vllm": ("sglang", "SGLang"), "sglang": ("vllm", "vLLM")}


def _runtime_that_models(request: ServingRequest, model: LoadedModel, exc: EngineInputError) -> str | None:
    """Where the runtime asked refuses the model as not modelled (a layer shape it does not size), the sentence naming
    the other server runtime whose memory plan does size it (at its default release, same GPU and tensor parallel
    size), or ``None``. GLM-5's DeepSeek sparse attention is modelled for SGLang, not for vLLM."""
    if exc.field != "model" or not exc.message.startswith("not modelled") or request.runtime not in _OTHER_RUNTIMES:
        return None
    name, label = _OTHER_RUNTIMES[request.runtime]
    try:
        other = parse_request({"model": request.model, "gpu": request.gpu, "runtime": name,
                               "tensor_parallel_size": str(request.tensor_parallel_size)})
        get_runtime(name).memory(other, model)
    except Exception:  # noqa: BLE001 - any refusal there means no pointer, never an error here
        return None
    return f"{label}'s answer models it: ask with runtime {name} (--runtime {name})"


def make_plan(request: ServingRequest, local: dict[str, Any] | None = None, *, with_speed: bool = True,
              with_suggestions: bool = True) -> Plan:
    """Answer a request: load the model, then the runtime's memory plan, compat check, verdict (with
    suggestions that work when it does not), launch command and speed.

    Raises:
        EngineInputError: the request cannot be answered (unknown model, a value the engine refuses, a
            configuration outside what the calculator models); ``field`` names the input.
    """
    from django.core.cache import cache

    key = None
    if local is None:
        key = "plan:" + hashlib.sha256(f"{request.model_dump_json()}|{with_speed}|{with_suggestions}".encode()).hexdigest()
        hit = cache.get(key)
        if hit is not None:
            return hit
    runtime = get_runtime(request.runtime)
    check = getattr(runtime, "check_speculative", None)
    if check is not None and request.speculative_config is not None:
        check(request.speculative_config)  # a runtime that refuses the method does so before its draft is loaded
    request, head_note = with_known_draft_head(request)
    model = getattr(runtime, "load_model", load)(request, local)  # a runtime may load more (GGUF-only repos)
    # (read in 0.32.0's source; earlier releases are not claimed)
    alias = (getattr(request.speculative_config, "vllm_method", None)
             if request.runtime == "vllm" and request.release == "0.32.0" else None)
    if alias:  # a per-architecture MTP name: vLLM runs it as mtp and says so in its log
        head_note = "; ".join(filter(None, [head_note, (
            f"method {alias}: vLLM runs it as mtp and logs \"method `{alias}` is deprecated and replaced with mtp\" "
            "(vllm/config/speculative.py:1141-1145 in 0.32.0); the command keeps the name given")]))
    if head_note:
        model = LoadedModel(**{**model.__dict__, "notes": (*model.notes, head_note)})
    try:
        memory = runtime.memory(request, model)
    except EngineInputError as exc:
        other = _runtime_that_models(request, model, exc)
        if other is None:
            raise
        raise EngineInputError(exc.field, f"{exc.message}. {other}") from None
    compat = compat_error = None
    try:
        compat = runtime.compat(request, model, memory)
    except EngineInputError as exc:
        compat_error = f"{exc.field}: {exc.message}"
    startup = getattr(runtime, "startup_errors", None)
    verdict = decide(request, memory, compat, startup(request, model, memory) if startup else [], compat_error)
    if verdict.status != "works" and with_suggestions:
        def evaluate(params: dict[str, str]) -> Plan | None:
            try:
                changed = parse_request(merge_params(request.to_params(), params))
                return make_plan(changed, local, with_speed=False, with_suggestions=False)
            except EngineInputError:
                return None

        found = suggest(request, memory, compat, evaluate, quantized_variants if local is None else (lambda _m: []))
        # the parameters as the permalink they apply to names them (llama.cpp's context: ctx_size)
        verdict.suggestions = [s.model_copy(update={"params": runtime_params(s.params, s.params.get("runtime")
                                                                             or request.runtime)}) for s in found]
    speed = speed_error = None
    if with_speed and verdict.status == "does_not_start":
        # the runtime refuses the combination at start-up (attention backend, release, method): no server to time
        from calculator.engine.perf import NO_SERVER

        speed_error = f"configuration: {NO_SERVER}"
    elif with_speed:
        try:
            speed = runtime.speed(request, model, memory)
        except EngineInputError as exc:
            from calculator.request import runtime_named

            speed_error = str(runtime_named(exc, request.runtime))
    plan = Plan(request=request, runtime=runtime.name, model=model, memory=memory, compat=compat,
                compat_error=compat_error, speed=speed, speed_error=speed_error,
                launch_argv=runtime.launch_argv(request, model), verdict=verdict)
    if key is not None:
        cache.set(key, plan, PLAN_CACHE_S)
    return plan
