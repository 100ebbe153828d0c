"""From the calculator's parameters to a run configuration and the prediction made at submission.

``build_configuration(params)`` resolves the model (built-in tiny model, an offline ``config.json`` from
``calculator/data/model_configs``), applies what the target platform forces (on the CPU build: float32,
``VLLM_CPU_KVCACHE_SPACE``, eager mode, a tiny stand-in for models that cannot run here) and picks the
benchmark profile. Every adjustment is recorded as a sentence in ``configuration["adjustments"]``.
``predict(engine_input)`` calls the memory engine, ``calculator.engine.estimate``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from pydantic import BaseModel, ConfigDict

from calculator.metadata import builtin as tiny_models
from calculator.request import InputError, ServingRequest, parse_request

from . import workloads

GiB = 2**30
CONFIG_DIR = Path(__file__).resolve().parent.parent / "calculator" / "data" / "model_configs"

# EngineInput fields a validation request may set (names as the calculator's query parameters).
INT_FIELDS = ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "block_size",
              "max_num_seqs", "max_num_batched_tokens")
STR_FIELDS = ("dtype", "kv_cache_dtype", "quantization", "attention_backend")

# The field guide's recorded profile (working_context = 32768, concurrency = 4).
GPU_PROFILE = {"working_context": 32768, "concurrency": 4, "output_len": 256, "num_prompts": 16,
               "repeats": 2, "seed": 0, "warmups": 4}
# On the CPU build with a tiny model: the same sequence, scaled down to finish in about two minutes.
# Repeats are A/B pairs (validator.stats): 5 pairs (GPU) give an exact Wilcoxon p of 1/16, 8 (CPU) 1/128.
# max_repeats: more pairs, one at a time, while the intervals are neither settled nor tight (validator.stats
# stop_rule) and the run's time allows (validator.bench_serve_entry.PairSchedule).
GPU_PROFILE["repeats"] = 5
GPU_PROFILE["max_repeats"] = 12
# 8 pairs of 16 prompts x 48 output tokens: about 95 s of benchmarking on two cores for the trained pair, a
# whole run (two servers started, benchmarked, scored) about 2-2.5 minutes. 12 prompts saved ~25 s but widened
# the interval of the p95 latency change (median half-width 17 % against 13 % over the runs measured), which
# then decided too many verdicts by noise.
CPU_PROFILE = {"working_context": 176, "concurrency": 4, "output_len": 48, "num_prompts": 16,
               "repeats": 8, "seed": 0, "warmups": 4,
               # no extra pair that would end more than 140 s after the run started: a CPU run stays under three
               # minutes (issue 13; benchmarks/validation_repeatability.py WALL_LIMIT_S) even when the servers took
               # a minute and a half to start on a busy host
               "max_repeats": 12, "pairs_budget_s": 140.0}
CPU_MAX_MODEL_LEN = 1024
DEFAULT_CPU_SPEC = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}


WORKLOAD_PARAM = "validation_workload"  # the form's workload set (validator.workloads.WORKLOADS)

# A bad validation request is the calculator's input error (``field`` + ``message``), one type everywhere.
ConfigurationError = InputError


class Profile(BaseModel):
    """The benchmark sequence of a run (``vllm bench serve`` random prompts): ``input_len + output_len`` is the
    working context; ``repeats`` per phase; ``concurrency`` requests in flight."""

    model_config = ConfigDict(extra="forbid")

    working_context: int
    concurrency: int
    output_len: int
    num_prompts: int
    repeats: int
    seed: int
    warmups: int
    input_len: int = 0
    max_repeats: int | None = None  # pairs at most (None: repeats); validator.stats.stop_rule
    pairs_budget_s: float | None = None  # no pair beyond ``repeats`` ends later than this after the run started


class RunConfiguration(BaseModel):
    """What a validation run runs, stored on the run (``ValidationRun.configuration``) and read back through
    this model. ``request`` is the calculator's request as submitted (its permalink parameters);
    ``engine_input`` is the engine input for the model that actually runs (``hf_config`` = the exact config
    vLLM loads); every change the platform forces is a sentence in ``adjustments``."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, str]
    request: dict[str, str]
    model_id: str
    run_model: str
    revision: str | None
    model_source: str
    architecture: str
    platform: str
    engine_input: dict[str, Any]
    spec_config: dict[str, Any] | None
    acceptance_rate: float | None
    profile: Profile
    adjustments: list[str]
    workload: str = "random"
    runtime: str = "vllm"
    llamacpp: dict[str, Any] | None = None
    sglang: dict[str, Any] | None = None


def offline_config(model_id: str) -> dict[str, Any] | None:
    """``config.json`` of ``org/name`` from the shipped catalog (``org__name.json``), or None."""
    path = CONFIG_DIR / (model_id.replace("/", "__") + ".json")
    if "/" in model_id and path.is_file() and ".." not in model_id:
        return json.loads(path.read_text())
    return None


def resolve_model(model_id: str, revision: str | None) -> dict[str, Any]:
    """``{"config", "source", "sha", "weights", "quant_config"}`` for a Hub model id.

    Uses the calculator's metadata layer (``calculator.metadata.load_model``: database cache, Hub pinned
    to a sha, offline catalog) when it is installed, else the shipped offline catalog alone.
    Raises ``ConfigurationError("model", ...)`` when the model cannot be found."""
    try:
        from calculator.metadata import MetadataError, load_model
    except ImportError:
        load_model = None
    if load_model is not None:
        try:
            meta = load_model(model_id, revision)
        except MetadataError as e:
            if getattr(e, "cli_message", None):  # worded per surface: the page's field, the command's flags
                from calculator.request import WordedPerSurface

                raise WordedPerSurface(getattr(e, "field", "model"), e.message, e.cli_message) from None
            raise ConfigurationError(getattr(e, "field", "model"), e.message) from None
        return {"config": meta.config, "source": meta.source, "sha": meta.sha,
                "weights": meta.weights.model_dump() if meta.weights is not None else None,
                "quant_config": meta.quant_config}
    config = offline_config(model_id)
    if config is None:
        raise ConfigurationError("model", f"unknown model {model_id!r}: not built in and not in the offline "
                                          "catalog (calculator/data/model_configs)")
    return {"config": config, "source": "offline catalog config.json", "sha": None, "weights": None,
            "quant_config": None}


def target_platform(gpu: str) -> str:
    """``cpu`` for the CPU row of the GPU catalog, ``cuda`` otherwise."""
    from calculator.engine.gpus import get_gpu

    return "cpu" if get_gpu(gpu).is_cpu else "cuda"


def build_configuration(params: dict[str, Any]) -> dict[str, Any]:
    """The run's configuration from the calculator's parameters (strings or typed values).

    Returns ``{"params", "model_id", "revision", "model_source", "architecture", "platform",
    "engine_input", "spec_config", "profile", "adjustments"}``; ``engine_input`` is a dict that
    validates as ``EngineInput`` (its ``hf_config`` is the exact config vLLM will load).
    Raises ``ConfigurationError`` for an unknown model, a model with no runnable stand-in, or bad values.
    """
    # the page's release comparison is a view of two answers: a run validates the request's own release
    params = {k: v for k, v in params.items() if v not in (None, "") and k != "compare_vllm_version"}
    params.setdefault("gpu", "CPU")
    workload = str(params.pop(WORKLOAD_PARAM, "") or "")
    if workload and workload not in workloads.WORKLOADS:
        raise ConfigurationError(WORKLOAD_PARAM, f"unknown workload set {workload!r}; one of "
                                                 f"{', '.join(workloads.WORKLOADS)}")
    request = parse_request(params)  # the calculator's checks: bounds, choices, speculative allow-list
    if request.request_rate is not None:
        # the runs are closed loops (--request-rate inf with --max-concurrency, validator/bench.py): a rate would be
        # dropped silently
        raise ConfigurationError("request_rate", "a validation run benchmarks a closed loop of concurrency requests "
                                 "(vllm bench serve --request-rate inf --max-concurrency C); it does not run a request "
                                 "rate: drop request_rate (the calculator predicts it), give concurrency")
    for name, given in (("hf_overrides", request.hf_overrides is not None),
                        ("allow_long_max_model_len", request.allow_long_max_model_len)):
        if given:  # the worker's commands and stand-in configs are built without them: the run would not be the one
            raise ConfigurationError(name, f"a validation run does not apply {name} yet (the worker starts the "
                                     "runtime without it, so the run would not be the configuration predicted): "
                                     "validate without it")
    if request.runtime == "sglang":
        return build_sglang_configuration(request, params, workload)
    if request.runtime != "vllm":
        if request.runtime != "llama.cpp":
            why = {"ollama": "Ollama runs are not built; the llama.cpp answer for the same GGUF can be validated "
                             "(runtime llama.cpp)"}.get(request.runtime, "")
            raise ConfigurationError("runtime", f"validation runs start vLLM, SGLang or llama.cpp, not "
                                     f"{request.runtime}" + (f": {why}" if why else ""))
        return build_llamacpp_configuration(request, params, workload)
    model_id = request.model
    revision = request.revision
    gpu = request.gpu
    platform = target_platform(gpu)
    adjustments: list[str] = []

    inp: dict[str, Any] = {"gpu": "CPU" if platform == "cpu" else gpu}
    for key in (*INT_FIELDS, *STR_FIELDS, "gpu_memory_utilization"):
        value = getattr(request, key)
        if value is not None and value != ServingRequest.model_fields[key].default:
            inp[key] = value
    if request.enforce_eager:
        inp["enforce_eager"] = True
    spec = request.speculative_config.model_dump(exclude_none=True) if request.speculative_config else None
    acceptance_rate = request.acceptance_rate

    # -- the model -------------------------------------------------------------------------------
    run_model = model_id
    if workloads.is_pair_model(model_id):
        hf_config = workloads.pair_config(model_id)
        source = ("trained draft/target pair shipped in validator/pair (python -m validator.train_pair, seed "
                  "0; not random weights)")
        revision = None
    elif tiny_models.is_builtin(model_id):
        # its committed config.json: the worker writes the weights when it runs (validator.bench.model_path_for),
        # not the page that only asks whether it could (importing torch and writing takes seconds)
        hf_config = tiny_models.builtin_config(model_id)
        source = "built-in tiny random model (written on the worker at its first run)"
    else:
        meta = resolve_model(model_id, revision)
        hf_config, source = meta["config"], meta["source"]
        if meta["sha"]:
            revision = meta["sha"]  # the run uses the exact commit the prediction was made for
        if platform == "cpu":
            arch = (hf_config.get("architectures") or ["?"])[0]
            stand_in = tiny_models.ARCHITECTURE_STAND_INS.get(arch)
            if stand_in is None:
                raise ConfigurationError("model", f"{model_id} ({arch}) cannot run on the CPU worker and there is "
                                                  "no tiny stand-in for that architecture yet (only Llama-shaped)")
            hf_config = tiny_models.builtin_config(stand_in)
            run_model = stand_in
            source = f"tiny random stand-in {stand_in} for {arch}"
            adjustments.append(f"{model_id} cannot be downloaded or run on this CPU worker; the run uses "
                               f"{stand_in}, a tiny random-weight model of the same architecture ({arch}), "
                               "and the prediction is made for that model")
            revision = None
        else:
            for key in ("weights", "quant_config"):
                if meta[key] is not None:
                    inp[key] = meta[key]
    inp["hf_config"] = hf_config
    inp["model_label"] = run_model
    inp["model_source"] = source

    # -- what the platform forces ------------------------------------------------------------------
    profile = dict(CPU_PROFILE if platform == "cpu" else GPU_PROFILE)
    if platform == "cpu":
        kv_gib = int(getattr(settings, "VALIDATOR_CPU_KVCACHE_GIB", 1))
        inp["kv_cache_memory_bytes"] = kv_gib * GiB
        adjustments.append(f"CPU build: KV cache space VLLM_CPU_KVCACHE_SPACE={kv_gib} (GiB), so the engine "
                           f"is given kv_cache_memory_bytes = {kv_gib} GiB")
        if inp.get("dtype", "auto") not in ("auto", "float32"):
            adjustments.append(f"CPU build: dtype {inp['dtype']} replaced by float32 (bfloat16 kills the "
                               "worker with SIGILL on CPUs without AVX512-BF16)")
        inp["dtype"] = "float32"
        if inp.get("kv_cache_dtype", "auto") != "auto":
            adjustments.append(f"CPU build: kv_cache_dtype {inp['kv_cache_dtype']} replaced by auto")
            inp["kv_cache_dtype"] = "auto"
        for key in ("tensor_parallel_size", "pipeline_parallel_size"):
            if inp.get(key, 1) != 1:
                adjustments.append(f"CPU worker: {key} {inp[key]} replaced by 1")
                inp[key] = 1
        inp.pop("attention_backend", None)
        inp.pop("gpu_memory_utilization", None)
        inp["enforce_eager"] = True  # skips the CPU build's torch.compile warm-up (~30 s on two cores)
        limit = min(CPU_MAX_MODEL_LEN, int(hf_config.get("max_position_embeddings", CPU_MAX_MODEL_LEN)))
        if inp.get("max_model_len", limit) > limit:
            adjustments.append(f"CPU worker: max_model_len {inp['max_model_len']} scaled down to {limit}")
        inp["max_model_len"] = min(inp.get("max_model_len", limit), limit)
        pair_draft = (spec is not None and spec.get("method") == "draft_model"
                      and workloads.is_pair_model(spec.get("model")) and workloads.is_pair_model(run_model))
        if pair_draft:
            inp["draft_hf_config"] = workloads.pair_config(spec["model"])
        elif spec is None or spec.get("method") != "ngram":
            if spec is not None:
                adjustments.append(f"CPU worker: speculative method {spec.get('method')} replaced by ngram "
                                   f"(the CPU worker runs a draft model only for the trained pair: "
                                   f"{workloads.PAIR_TARGET} with {workloads.PAIR_DRAFT})")
            spec = dict(DEFAULT_CPU_SPEC)
    elif spec is None:
        spec = dict(DEFAULT_CPU_SPEC)
        adjustments.append("no speculative method chosen: the speculation phase uses ngram")

    # -- benchmark profile: the working context and concurrency, scaled to what the model holds ------
    max_len = inp.get("max_model_len") or int(hf_config.get("max_position_embeddings", 32768))
    context = min(profile["working_context"], max_len)
    if context < profile["working_context"]:
        adjustments.append(f"working context {profile['working_context']} scaled down to {context} tokens "
                           "(max_model_len)")
    profile["output_len"] = min(profile["output_len"], max(1, context // 2))
    profile["input_len"] = context - profile["output_len"]
    concurrency = int(request.concurrency or profile["concurrency"])
    if inp.get("max_num_seqs") and concurrency > inp["max_num_seqs"]:
        concurrency = inp["max_num_seqs"]
    profile["concurrency"] = max(1, min(concurrency, 64))
    profile["num_prompts"] = max(profile["num_prompts"], 4 * profile["concurrency"]) if platform != "cpu" \
        else max(profile["num_prompts"], 2 * profile["concurrency"])
    if not workload:
        workload = "code" if workloads.is_pair_model(run_model) else "random"
    if workload != "random" and not (workloads.is_pair_model(run_model) or tiny_models.is_builtin(run_model)):
        raise ConfigurationError(WORKLOAD_PARAM, f"workload set {workload!r} needs a model whose tokenizer the "
                                                 "worker has locally (the trained pair or a built-in model); "
                                                 "use 'random'")
    if workload != "random" and not workloads.is_pair_model(run_model):
        adjustments.append(f"workload {workload!r} on random weights: acceptance says nothing about real text")
    return RunConfiguration(**{
        "workload": workload,
        "params": {**{k: str(v) for k, v in params.items()}, WORKLOAD_PARAM: workload},
        "request": request.to_params(),
        "model_id": model_id,
        "run_model": run_model,
        "revision": revision,
        "model_source": source,
        "architecture": (hf_config.get("architectures") or ["?"])[0],
        "platform": platform,
        "engine_input": inp,
        "spec_config": spec,
        "acceptance_rate": acceptance_rate,
        "profile": profile,
        "adjustments": adjustments,
    }).model_dump()


def predict(engine_input: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``(EstimateResult.to_json(), "")`` from ``calculator.engine.estimate``, or ``({}, reason)``.

    The prediction is made for the configuration as submitted (with its speculative config, if any)."""
    try:
        from calculator.engine import estimate
        from calculator.engine.schemas import EngineInput
    except ImportError as e:
        return {}, f"the memory engine is not available in this build ({e})"
    try:
        return estimate(EngineInput(**engine_input)).to_json(), ""
    except Exception as e:  # noqa: BLE001 - EngineInputError or a validation error: shown, never a 500
        return {}, f"the engine could not predict this configuration: {e}"


def fit_profile(configuration: dict[str, Any], prediction: dict[str, Any]) -> None:
    """Scale the benchmark's concurrency down to what the predicted KV cache holds at the working
    context (``max_concurrency`` is per ``max_model_len`` request, so it is rescaled to the context)."""
    max_conc = prediction.get("max_concurrency")
    max_len = prediction.get("max_model_len")
    profile = configuration["profile"]
    if not max_conc or not max_len:
        return
    context = profile["input_len"] + profile["output_len"]
    fits = int(max_conc * max_len / max(1, context))
    if 1 <= fits < profile["concurrency"]:
        configuration["adjustments"].append(
            f"concurrency {profile['concurrency']} scaled down to {fits}: the predicted KV cache holds "
            f"{fits} requests of {context} tokens")
        profile["concurrency"] = fits


# llama_cpp.server serves one request at a time (one sequence, n_seq_max = 1; llama_cpp/server/app.py holds a
# lock per request), so the benchmark sends one at a time: more would measure the queue, not llama.cpp.
LLAMACPP_PROFILE = {"working_context": 176, "concurrency": 1, "output_len": 48, "num_prompts": 8,
                    "repeats": 3, "seed": 0, "warmups": 1}


def build_llamacpp_configuration(request: ServingRequest, params: dict[str, Any], workload: str) -> dict[str, Any]:
    """A llama.cpp run on the CPU worker (``validator.llamacpp``): the built-in tiny Llama (or its stand-in for a
    Llama-shaped model) as a tiny GGUF written on the worker, served by ``python -m llama_cpp.server``.
    ``configuration["llamacpp"]``: ``settings`` (``n_ctx``, ``flash_attn``), ``command`` (the llama-server
    command the calculator shows for them), ``gguf_note``. Settings the server cannot take are replaced, each
    with a sentence in ``adjustments``. Raises ``ConfigurationError`` for a GPU, or a model with no stand-in."""
    from calculator.runtimes.llamacpp.launch import launch_argv

    from .llamacpp import DRAFT_NOTE

    if target_platform(request.gpu) != "cpu":
        raise ConfigurationError("gpu", "llama.cpp validation runs use the CPU worker (llama-cpp-python's CPU "
                                        "build); choose the CPU")
    if workload and workload != "random":
        raise ConfigurationError(WORKLOAD_PARAM, "llama.cpp runs use the random workload set (the zero-weight "
                                                 "GGUF's output says nothing about text)")
    adjustments: list[str] = []
    model_id, revision = request.model, request.revision
    if tiny_models.is_builtin(model_id):
        run_model, source = model_id, "built-in tiny model (its shapes and tokenizer)"
    else:
        # the llama.cpp runtime's own model loading, as the page's answer made it: a GGUF-only repo answers from the
        # offline GGUF catalog (its base model's config) or the GGUF header, not only from the model catalog
        from calculator.runtimes import get_runtime

        config = get_runtime("llama.cpp").load_model(request).config
        arch = (config.get("architectures") or ["?"])[0]
        run_model = tiny_models.ARCHITECTURE_STAND_INS.get(arch)
        if run_model is None:
            raise ConfigurationError("model", f"{model_id} ({arch}) has no tiny stand-in for a llama.cpp run on the "
                                              "CPU worker (only Llama-shaped)")
        source = f"tiny stand-in {run_model} for {arch}"
        adjustments.append(f"{model_id} cannot run on this CPU worker; the run serves a tiny GGUF of {run_model}'s "
                           f"shapes ({arch}), and the prediction is made for that GGUF")
    hf_config = tiny_models.builtin_config(run_model)
    if hf_config.get("architectures", ["?"])[0] != "LlamaForCausalLM":
        raise ConfigurationError("model", f"llama.cpp runs serve a tiny Llama GGUF; {run_model} is not Llama-shaped")
    limit = min(CPU_MAX_MODEL_LEN, int(hf_config.get("max_position_embeddings", CPU_MAX_MODEL_LEN)))
    n_ctx = min(request.max_model_len or limit, limit)
    if request.max_model_len and request.max_model_len > limit:
        adjustments.append(f"CPU worker: context (--ctx-size) {request.max_model_len} scaled down to {limit}")
    elif request.max_model_len == 0 and limit < int(hf_config.get("max_position_embeddings", limit)):
        adjustments.append(f"CPU worker: context -c 0 (the model's {int(hf_config['max_position_embeddings'])}) "
                           f"scaled down to {limit}")
    flash = request.flash_attn or "auto"
    if flash == "auto":
        adjustments.append("flash_attn auto run as off: llama_cpp.server's --flash_attn is on/off only "
                           "(llama-cpp-python maps it to LLAMA_FLASH_ATTN_TYPE_ENABLED / _DISABLED)")
        flash = "off"
    ignored = [f"{name} {value}" for name, value, runs in (
        ("parallel", request.parallel, request.parallel in (None, 1)),
        ("cache_type_k", request.cache_type_k, request.cache_type_k in (None, "f16")),
        ("cache_type_v", request.cache_type_v, request.cache_type_v in (None, "f16")),
        ("kv_unified", request.kv_unified, not request.kv_unified),
        ("swa_full", request.swa_full, not request.swa_full)) if not runs]
    if ignored:
        adjustments.append(f"{', '.join(ignored)} not run: the validator's llama_cpp.server runs one sequence with "
                           "an f16 cache (the run's settings are n_ctx and flash_attn only)")
    if request.speculative_config is not None:
        adjustments.append(DRAFT_NOTE)
    profile = dict(LLAMACPP_PROFILE)
    if request.concurrency and request.concurrency > 1:
        adjustments.append(f"concurrency {request.concurrency} run as 1: llama_cpp.server serves one request at a time")
    context = min(profile["working_context"], n_ctx)
    profile["output_len"] = min(profile["output_len"], max(1, context // 2))
    profile["input_len"] = context - profile["output_len"]
    settings = {"n_ctx": n_ctx, "flash_attn": flash}
    gguf_note = (f"tiny GGUF written on the worker like the llama.cpp cross-check's (llama, F16 zero weights) with "
                 f"{run_model}'s shapes and byte-level BPE tokenizer; greedy decoding of zero logits repeats token 0")
    inp = {"gpu": "CPU", "hf_config": hf_config, "model_label": run_model, "model_source": source,
           "max_model_len": n_ctx}
    return RunConfiguration(**{
        "workload": "random", "runtime": "llama.cpp",
        "params": {**{k: str(v) for k, v in params.items()}, WORKLOAD_PARAM: "random"},
        "request": request.to_params(), "model_id": model_id, "run_model": run_model, "revision": None,
        "model_source": source, "architecture": "LlamaForCausalLM", "platform": "cpu", "engine_input": inp,
        "spec_config": None, "acceptance_rate": None, "profile": profile, "adjustments": adjustments,
        "llamacpp": {"settings": settings, "gguf_note": gguf_note,
                     "command": launch_argv(f"{run_model.split('/')[-1]}.gguf", n_ctx=n_ctx, flash_attn=flash,
                                            n_gpu_layers=0)},
    }).model_dump()


def sglang_gpus(request: ServingRequest) -> int:
    """GPUs one SGLang server takes: ``tp x pp`` per data-parallel replica, ``dp`` replicas unless
    ``--enable-dp-attention`` puts the DP groups inside the TP group (sglang 0.5.10.post1
    srt/managers/data_parallel_controller.py:164 and :253-254: each DP rank starts ``tp_size x pp_size`` GPUs
    further on)."""
    per_replica = request.tensor_parallel_size * request.pipeline_parallel_size
    return per_replica if request.enable_dp_attention else per_replica * request.dp_size


def build_sglang_configuration(request: ServingRequest, params: dict[str, Any], workload: str) -> dict[str, Any]:
    """An SGLang run on a GPU worker with SGLang installed (``validator.sglang``): the model as asked (no
    stand-in), started with the launch command the calculator shows (``calculator.plan.make_plan``), benchmarked
    by ``sglang.bench_serving`` on random token ids at the field guide's profile: working context 32768 scaled
    down to what SGLang takes in one request (``validator.sglang.request_token_limit``, every phase's server),
    concurrency 4 capped at ``max_running_requests`` and at the requests the smallest KV pool holds whole.

    ``configuration["sglang"]``: ``phases`` (``[{"name", "command", "request"}]``: the baseline, and with
    speculation the speculative command; SGLang reserves most of the GPU, ``--mem-fraction-static``, so the two
    run one after the other, never side by side), ``gpus``, ``release`` (the SGLang release predicted).
    Raises ``ConfigurationError`` for the CPU, a workload other than ``random`` or a request the calculator
    cannot answer."""
    from calculator.engine.errors import EngineInputError
    from calculator.plan import make_plan

    if target_platform(request.gpu) == "cpu":
        raise ConfigurationError("gpu", "SGLang runs need a GPU worker with SGLang installed (the calculator models "
                                        "SGLang's CUDA / ROCm memory rules only); choose a GPU")
    if workload and workload != "random":
        raise ConfigurationError(WORKLOAD_PARAM, "SGLang runs use random token ids (sglang.bench_serving "
                                                 "--dataset-name random-ids); use 'random'")
    try:
        plan = make_plan(request, with_speed=False, with_suggestions=False)
    except EngineInputError as e:
        raise ConfigurationError(e.field, e.message) from e
    from .sglang import request_token_limit

    adjustments: list[str] = []
    memory = plan.memory
    profile = dict(GPU_PROFILE)
    profile.pop("max_repeats", None)  # SGLang's phases run one after the other, each its fixed repeats
    base = base_plan = None
    plans = [memory.plan]
    if request.speculative_config is not None:
        base = request.model_copy(update={"speculative_config": None, "speculative_eagle_topk": None,
                                          "speculative_num_draft_tokens": None, "acceptance_rate": None,
                                          "acceptance_length": None})
        try:
            base_plan = make_plan(base, with_speed=False, with_suggestions=False)
        except EngineInputError as e:
            raise ConfigurationError(e.field, e.message) from e
        plans.append(base_plan.memory.plan)
    if "--trust-remote-code" in plan.launch_argv:
        # the release loads the config only through the repository's own class (the verdict's condition): a
        # validation run would execute that code on the worker, which this site never does
        raise ConfigurationError("sglang_version", "this SGLang release loads the model's config only with "
                                 "--trust-remote-code (the verdict's condition), and a validation run never runs a "
                                 "repository's code; choose a release whose transformers knows the model type (the "
                                 "calculator's suggestions name it)")
    for p in plans:
        if p.does_not_start or p.max_total_num_tokens <= 0:
            raise ConfigurationError("gpu", "SGLang would not start with this configuration, so there is nothing to "
                                            f"benchmark: {p.does_not_start or 'its KV pool is empty'} (the calculator's "
                                            "verdict; see its suggestions)")
    # every request must fit each phase's server whole (validator.sglang.request_token_limit): SGLang refuses a
    # request of context_len tokens and cuts one longer than its pool, so the field guide's working context at the
    # model's own context length would have failed every request
    limit, why = min(request_token_limit(p.model_dump()) for p in plans)
    context = min(profile["working_context"], limit)
    if context < profile["working_context"]:
        adjustments.append(f"working context {profile['working_context']} scaled down to {context} tokens: {why}")
    if context < 2:
        raise ConfigurationError("max_model_len", f"SGLang would take no request of 2 tokens here ({why})")
    profile["output_len"] = min(profile["output_len"], max(1, context // 2))
    profile["input_len"] = context - profile["output_len"]
    concurrency = int(request.concurrency or profile["concurrency"])
    cap = max(1, memory.plan.max_running_requests)
    if concurrency > cap:
        adjustments.append(f"concurrency {concurrency} run as {cap}: SGLang's max_running_requests")
    # as for vLLM (fit_profile): no more requests at once than the smallest KV pool holds whole, so that the
    # benchmark measures the configuration, not a queue
    pool = min(p.max_total_num_tokens for p in plans)
    fits = max(1, pool // context)
    if fits < min(concurrency, cap):
        adjustments.append(f"concurrency {min(concurrency, cap)} run as {fits}: SGLang's KV pool of {pool} tokens "
                           f"holds {fits} requests of {context} tokens")
    profile["concurrency"] = max(1, min(concurrency, cap, fits, 64))
    profile["num_prompts"] = max(profile["num_prompts"], 4 * profile["concurrency"])
    phases = []
    if base is not None:
        phases.append({"name": "baseline", "command": base_plan.launch_argv, "request": base.to_params()})
        phases.append({"name": "speculative", "command": plan.launch_argv, "request": request.to_params()})
        adjustments.append("SGLang reserves --mem-fraction-static of each GPU, so the baseline and the speculative "
                           "server run one after the other (not side by side, not interleaved as vLLM's runs are)")
    else:
        phases.append({"name": "baseline", "command": plan.launch_argv, "request": request.to_params()})
    model = plan.model
    inp = {"gpu": request.gpu, "model_label": model.repo_id, "model_source": model.source,
           "tensor_parallel_size": request.tensor_parallel_size}
    return RunConfiguration(**{
        "workload": "random", "runtime": "sglang",
        "params": {**{k: str(v) for k, v in params.items()}, WORKLOAD_PARAM: "random"},
        "request": request.to_params(), "model_id": model.repo_id, "run_model": model.repo_id,
        "revision": model.sha or request.revision, "model_source": model.source,
        "architecture": (model.config.get("architectures") or ["?"])[0], "platform": "cuda",
        "engine_input": inp,
        "spec_config": request.speculative_config.model_dump(exclude_none=True) if request.speculative_config else None,
        "acceptance_rate": request.acceptance_rate, "profile": profile, "adjustments": adjustments,
        "sglang": {"phases": phases, "gpus": sglang_gpus(request), "release": memory.release},
    }).model_dump()


def sglang_for_release(configuration: dict[str, Any], release: str) -> tuple[dict[str, Any], str]:
    """``(configuration, note)``: an SGLang run's configuration rebuilt for ``release`` (the worker's SGLang, one the
    calculator covers) when it was built for another: each phase's launch command and the profile are the
    calculator's for that release (its defaults differ: ``--mem-fraction-static``, ``--chunked-prefill-size``,
    ``--cuda-graph-max-bs``, the attention backends it knows), so the server runs what the worker's prediction
    (``predict_sglang(configuration, release)``) describes. ``note`` says so, or why the request's own command is
    kept (the calculator cannot plan it for ``release``); ``(configuration, "")`` when nothing changes."""
    asked = configuration["sglang"]["release"]
    if release == asked:
        return configuration, ""
    try:
        rebuilt = build_configuration({**configuration["params"], "sglang_version": release})
    except ConfigurationError as e:
        return configuration, (f"the worker runs sglang {release}, for which the calculator cannot plan this ({e}): "
                               f"the command is the one planned for sglang {asked}")
    note = (f"the worker runs sglang {release}: the launch commands and the profile are the calculator's for "
            f"{release}, not for {asked} as shown when the run was asked")
    return {**configuration, "profile": rebuilt["profile"], "sglang": rebuilt["sglang"],
            "adjustments": [*configuration.get("adjustments", []), note]}, note


def predict_sglang(configuration: dict[str, Any], release: str | None = None) -> tuple[dict[str, Any], str]:
    """``({phase: {"memory": SGLangMemory.to_json(), "speed": speed fields or None, "speed_error"}}, "")`` for
    each phase of an SGLang run at its profile (prompt / output length, concurrency), for ``release`` (the worker's
    SGLang when the calculator covers it) or the release asked; ``({}, reason)`` when the calculator cannot."""
    from calculator.engine.errors import EngineInputError
    from calculator.plan import make_plan

    profile = configuration["profile"]
    out: dict[str, Any] = {}
    try:
        for phase in configuration["sglang"]["phases"]:
            params = {**phase["request"], "prompt_len": str(profile["input_len"]),
                      "output_len": str(profile["output_len"]), "concurrency": str(profile["concurrency"]),
                      # SGLang's bench_serving --random-range-ratio 1 with ignore_eos: every length fixed, so the
                      # requests return in waves (vllm bench serve's ratio 0, perf.wave_share)
                      "random_range_ratio": "0"}
            if release:
                params["sglang_version"] = release
            # speed once: the fields (speed_fields raises what runtime.speed would, e.g. a workload over the context)
            plan = make_plan(parse_request(params), with_speed=False, with_suggestions=False)
            fields, error = None, ""
            try:
                from calculator.runtimes import get_runtime

                fields = get_runtime("sglang").speed_fields(plan.request, plan.model, plan.memory)
            except EngineInputError as e:
                error = str(e)
            out[phase["name"]] = {"memory": plan.memory.to_json(), "speed": fields, "speed_error": error,
                                  "release": plan.memory.release}
    except (EngineInputError, InputError) as e:
        return {}, f"the calculator could not predict this SGLang configuration: {e}"
    return out, ""
