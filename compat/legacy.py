"""Compatibility verdicts for vLLM 0.9 and 0.10 (data layout ``legacy``), from each release's own source.

These releases have no per-backend ``validate_configuration``. What decides whether a configuration starts, in the
order vLLM runs it, and how each is answered here (each from the release's data file, with its file:line):

1. ``EngineArgs._is_v1_supported_oracle`` (``vllm/engine/arg_utils.py:1431`` in 0.10.2): a branch that does not
   hold falls back to the V0 engine, which the calculator does not model (its figures are the V1 engine's), or
   raises (``draft_model`` speculative decoding). Each branch is evaluated (:func:`oracle_branches`); a branch that
   reads only flags the calculator's ``vllm serve`` never sets is not taken (those flags are at vLLM's defaults).
2. The platform's ``get_attn_backend_cls(selected_backend, head_size, dtype, kv_cache_dtype, block_size, use_v1,
   use_mla[, has_sink])`` (``vllm/platforms/cuda.py:226`` in 0.10.2) picks the backend with if-chains and returns
   its class path (or raises). ``selected_backend`` is None: there is no ``--attention-backend`` before 0.11, only
   the ``VLLM_ATTENTION_BACKEND`` environment variable, which the calculator does not set.
3. The chosen backend's implementation checks each layer when it is built (``Impl.__init__``: head size, KV-cache
   dtype, sinks, sliding window, soft cap; ``vllm/v1/attention/backends/flash_attn.py:369-420`` in 0.10.2); it is
   evaluated once per distinct layer (head size, sliding window) with ``assert`` statements checked.

A run-time fact that decides (an optional package such as FlashInfer, a kernel build) stays a visible condition;
anything the evaluator cannot follow is reported as not modelled, never assumed.

Public API::

    check_legacy(req, data, gpu, platform, cap, dtype, kv) -> CompatReport
"""
from __future__ import annotations

from typing import Any, Callable

from . import interp
from .architectures import check_architecture

#: the EngineArgs fields (``vllm serve`` flags) the calculator's answer depends on and sets in an oracle branch's
#: ``self``; a branch that reads any other field tests a flag the calculator's ``vllm serve`` never writes (so it is
#: at vLLM's default: ``--load-format``, ``--preemption-mode``, ``--distributed-executor-backend`` ...) and is not
#: taken. The pipeline-parallel branch (``vllm/engine/arg_utils.py:1537`` in 0.10.2) reads
#: ``distributed_executor_backend`` as well: with the default executor it is not taken either.
MODELLED_FLAGS = {"kv_cache_dtype", "speculative_config"}

#: run-time facts of 0.9 / 0.10 beyond the environment variables' defaults (which come from the release's own
#: ``vllm/envs.py``, ``env_defaults`` in the data file) and :data:`compat.checks.RUNTIME_ASSUMPTIONS`
LEGACY_ASSUMPTIONS: dict[str, list[tuple[str, Any, str]]] = {
    "all": [
        ("threading.current_thread() != threading.main_thread()", False,
         "vllm serve builds the engine in its main thread"),
    ],
    "cuda": [
        ("is_fa_version_supported(2)", lambda cap: cap.major >= 8,
         "stock vLLM CUDA wheel: vllm_flash_attn ships FA2 for SM80 and newer"),
        ("_flashmla_C_AVAILABLE", True, "stock vLLM CUDA wheel builds the FlashMLA extension (SM90)"),
    ],
}


def _assume(data: dict, platform: str, cap) -> tuple[dict, dict]:
    """Run-time facts for one evaluation: :data:`compat.checks.RUNTIME_ASSUMPTIONS` of the platform, every
    environment variable the rules read at its default (``envs.X`` and ``envs.is_set('X')`` False, each with its
    ``vllm/envs.py`` line), and :data:`LEGACY_ASSUMPTIONS`."""
    from .checks import _assumptions

    values, why = _assumptions(platform, cap, data)
    for name, d in (data.get("env_defaults") or {}).items():
        values[f"envs.{name}"] = d["value"]
        why[f"envs.{name}"] = f"{name} unset (default {d['value']!r}, {d['source']})"
        values[f"envs.is_set('{name}')"] = False
        why[f"envs.is_set('{name}')"] = f"{name} unset ({d['source']})"
    for text, value, reason in LEGACY_ASSUMPTIONS["all"] + LEGACY_ASSUMPTIONS.get(platform, []):
        values[text] = value(cap) if callable(value) else value
        why[text] = reason
    return values, why


def _text_config(config: dict) -> dict:
    tc = config.get("text_config")
    if isinstance(tc, dict):
        return {**{k: v for k, v in config.items() if k != "text_config"}, **tc}
    return config


def layer_kinds(f, hf_config: dict | None) -> list[dict]:
    """The distinct attention layers vLLM builds for the model: ``{"head_size", "sliding_window"}`` (a window on
    sliding-window layers, None on full ones), as ``Attention(...)`` passes them to the implementation."""
    text = _text_config(hf_config or {})
    window = text.get("sliding_window") if f.has_sliding_window else None
    types = text.get("layer_types") or []
    sizes = f.layer_head_sizes or [f.head_size]
    kinds = []
    for i, hs in enumerate(sizes):
        if types and i < len(types):
            w = window if types[i] == "sliding_attention" else None
        elif window and types:
            w = None
        else:
            w = window
        kinds.append({"head_size": hs, "sliding_window": w})
    if window and not types and f.model_type in ("gemma2", "gemma3", "gemma3_text", "cohere2"):
        # interleaved local / global layers without a layer_types list: both kinds exist
        kinds += [{"head_size": k["head_size"], "sliding_window": None} for k in kinds]
    out: list[dict] = []
    for k in kinds:
        if k not in out:
            out.append(k)
    return out


def _impl_kwargs(f, hf_config: dict | None, kind: dict, kv: str, tp: int) -> dict:
    """The arguments ``Attention.__init__`` gives the implementation (``vllm/attention/layer.py`` of the release)."""
    text = _text_config(hf_config or {})
    heads = f.num_attention_heads or 1
    kv_heads = 1 if f.use_mla else (f.num_kv_heads or heads)
    per_rank = max(1, heads // tp)
    kw: dict[str, Any] = {
        "num_heads": per_rank, "head_size": kind["head_size"], "scale": float(kind["head_size"]) ** -0.5,
        "num_kv_heads": max(1, kv_heads // tp), "alibi_slopes": None, "sliding_window": kind["sliding_window"],
        "kv_cache_dtype": kv, "logits_soft_cap": text.get("attn_logit_softcapping") or None,
        "attn_type": "decoder", "kv_sharing_target_layer_name": None,
        "blocksparse_params": None,  # 0.9: Attention passes it positionally (vllm/attention/layer.py:140 in 0.9.2)
    }
    if f.has_sink:
        # gpt-oss: one learned sink per head of the rank (GptOssAttention.sinks, vllm/model_executor/models/gpt_oss.py),
        # passed through Attention's extra_impl_args (vllm/attention/layer.py:182 in 0.10.2)
        kw["sinks"] = interp._Namespace({"shape": (per_rank,)})
    if f.use_mla:
        nope, rope = text.get("qk_nope_head_dim"), text.get("qk_rope_head_dim")
        kw.update({"q_lora_rank": text.get("q_lora_rank"), "kv_lora_rank": text.get("kv_lora_rank"),
                   "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
                   "qk_head_dim": (nope or 0) + (rope or 0), "v_head_dim": text.get("v_head_dim"),
                   "kv_b_proj": interp.Unknown("kv_b_proj")})
    return kw


def _backend(data: dict, path: str) -> dict | None:
    return next((b for b in data["backends"] if b["path"] == path), None)


def _raise_source(data: dict, backend: dict, message: str) -> str:
    """file:line of the ``raise`` / ``assert`` of the backend's constructor that gave ``message`` (else the
    implementation class's)."""
    import re

    for c in backend.get("impl_checks", []):
        template = c["raises"].split(": ", 1)[-1] if "raises" in c else c.get("message", c["asserts"])
        parts = re.split(r"(\{[^}]*\})", template)  # literal text at even indices, {placeholders} at odd ones
        pattern = "".join(".*?" if i % 2 else re.escape(part) for i, part in enumerate(parts))
        if re.fullmatch(pattern, message, re.S):
            return c["source"]
    impl = data["classes"].get(backend.get("impl") or "", {})
    return f"{impl['file']}:{impl['line']}" if impl else backend["source"]


def _leaves(result) -> list[tuple[tuple, Any]]:
    return result.leaves() if isinstance(result, interp.Fork) else [((), result)]


def _evaluate(data: dict, platform: str, cap, assume: dict, used: set,
              call: Callable[[interp.Evaluator], Any]) -> list[tuple[tuple, Any]]:
    """Run ``call(ev)`` (one call into the stored source) with the platform's ``current_platform`` at capability
    ``cap``, forking on every undecided run-time condition: leaves ``(conditions, what it returns or Raised)``, or
    one ``Unknown`` leaf when the rule is not evaluable. What each completed call read goes into ``used``."""
    plat = interp.Platform(platform, cap, cls_q=data["platforms"][platform]["class"])

    def run(ev):
        out = call(ev)
        used.update(ev.used)
        return out

    try:
        return _leaves(interp.evaluate(run, data, plat, assume))
    except interp.NotEvaluable as e:
        return [((), interp.Unknown(f"rule not evaluable ({e})"))]


def select(data: dict, platform: str, f, dtype: str, kv: str, block_size: int, cap, kind: dict, assume: dict,
           used: set) -> list[tuple[tuple, Any]]:
    """``get_attn_backend_cls`` of the platform for one layer kind: leaves ``(conditions, class path or Raised)``."""
    p = data["platforms"][platform]

    def call(ev):
        return ev.call_method(p["class"], p["method"], None, head_size=kind["head_size"], dtype=dtype,
                              kv_cache_dtype=kv, block_size=block_size, use_v1=True, use_mla=f.use_mla,
                              has_sink=f.has_sink)

    return _evaluate(data, platform, cap, assume, used, call)


def build_impl(data: dict, platform: str, backend: dict, kwargs: dict, cap, assume: dict,
               used: set) -> list[tuple[tuple, Any]]:
    """The backend implementation's constructor for one layer: leaves ``(conditions, None or Raised)``."""
    if not backend.get("impl"):
        return [((), interp.Unknown(f"{backend['name']}: no get_impl_cls() read in this release"))]

    def call(ev):
        interp.construct(ev, backend["impl"], **kwargs)

    return _evaluate(data, platform, cap, assume, used, call)


def _feature_words(feature: str | None, f, platform: str) -> str:
    """The oracle branch's ``feature_name`` as vLLM logs it: a literal as written, the values it formats put in."""
    text = feature or "this configuration"
    if text.startswith(("'", '"')):
        return text[1:-1]
    if text == "model_config.architectures":
        return f"[{f.architecture!r}]"
    if "device" in text:
        return f"the {platform} platform"
    return text


def oracle_branches(data: dict, platform: str, f, req, kv: str, cap, assume: dict, used: set,
                    v0_only: bool) -> tuple[list[str], list[str], list[str]]:
    """``EngineArgs._is_v1_supported_oracle`` branch by branch: ``(errors, V0 fallbacks, conditions)``, each in
    vLLM's words with the branch's file:line; a fall-back comes with the request field it is about
    (``(message, field)``)."""
    oracle = data.get("v1_oracle") or {}
    p = data["platforms"][platform]
    plat = interp.Platform(platform, cap, cls_q=p["class"])
    text = _text_config(req.hf_config or {})
    window = text.get("sliding_window") if f.has_sliding_window else None
    spec = req.speculative
    self_ns = interp._Namespace({"kv_cache_dtype": kv, "pipeline_parallel_size": 1})
    # EngineArgs.speculative_config is the --speculative-config dict (its .get() is called): kept a plain dict
    self_ns._set("speculative_config", {"method": spec.method, "model": spec.model}
                 if spec is not None and (spec.method or spec.model) else None)
    hybrid = f.architecture in (oracle.get("inner_state") or {})
    model_ns = interp._Namespace({
        "use_mla": f.use_mla, "is_v1_compatible": not v0_only, "architectures": [f.architecture],
        "has_inner_state": hybrid, "is_hybrid": hybrid, "is_multimodal_model": f.is_multimodal,
        "get_sliding_window": lambda: window, "runner_type": "generate", "is_encoder_decoder": False,
        "is_attention_free": False})
    errors, fallbacks, conditions = [], [], []
    for b in oracle.get("branches", []):
        flags = {r.split(".", 1)[1] for r in b["reads"] if r.startswith("self.")}
        if flags - MODELLED_FLAGS:
            continue  # a flag the calculator's vllm serve leaves at vLLM's default

        def run(ev, b=b):
            out = ev.call_function(b["function"], self_ns, model_ns)
            used.update(ev.used)
            return out

        try:
            leaves = _leaves(interp.evaluate(run, data, plat, assume))
        except interp.NotEvaluable as e:
            conditions.append(f"vLLM's V1-engine check at {b['source']} ({b['feature']}) is not modelled ({e})")
            continue
        what = _feature_words(b["feature"], f, platform)
        for path, r in leaves:
            when = " and ".join(f"{c}={v}" for c, v in path)
            if isinstance(r, interp.Raised):
                msg = f"{r.kind}: {r.message} ({b['source']})"
                (conditions if path else errors).append(f"{msg} when {when}" if path else msg)
            elif r is False or isinstance(r, interp.Unknown):
                fb = (f"vLLM {data['release']} runs the V0 engine here ({what} is not supported by its V1 engine: "
                      f"EngineArgs._is_v1_supported_oracle, {b['source']}); the calculator models the V1 engine only, "
                      "so it does not model this configuration")
                if path:
                    conditions.append(f"{fb} when {when}")
                else:
                    fallbacks.append((fb, next((fld for key, fld in _FALLBACK_FIELDS if key in (b["feature"] or "")),
                                               "vllm_version")))
    return list(dict.fromkeys(errors)), list(dict.fromkeys(fallbacks)), list(dict.fromkeys(conditions))


#: which request field a V1-oracle branch is about, by its feature name (the field a V0 fall-back is refused on)
_FALLBACK_FIELDS = (("--kv-cache-dtype", "kv_cache_dtype"), ("Compute Capability", "gpu"), ("device", "gpu"),
                    ("sliding window (CPU", "gpu"), ("architectures", "model"), ("Mamba", "model"),
                    ("Speculative", "speculative_config"), ("Engine in background", "vllm_version"))


def v0_fallback(hf_config: dict, gpu_name: str, release: str, kv_cache_dtype: str = "auto",
                speculative: dict | None = None) -> tuple[str, str] | None:
    """``(field, message)`` when ``release`` (a 0.9 / 0.10 data file) certainly runs this configuration on its V0
    engine (:func:`oracle_branches`), which the calculator does not model; None otherwise (or for a later release).
    The memory plan refuses such a request on that field rather than give the V1 engine's figures."""
    from calculator.engine.gpus import get_gpu

    from . import extract
    from .checks import CheckRequest, SpeculativeConfig, _capability, features_from_hf_config, platform_of

    data = extract.load(release)
    if (data.get("provenance") or {}).get("layout") != "legacy" or not data.get("v1_oracle"):
        return None
    gpu = get_gpu(gpu_name)
    platform, cap = platform_of(gpu), _capability(gpu)
    f = features_from_hf_config(hf_config)
    req = CheckRequest(features=f, hf_config=hf_config, gpu=gpu_name, kv_cache_dtype=kv_cache_dtype,
                       vllm_version=release, speculative=SpeculativeConfig(**speculative) if speculative else None)
    assume, _ = _assume(data, platform, cap)
    v0_only = f.architecture in (data["v1_oracle"].get("v0_only") or {})
    _, fallbacks, _ = oracle_branches(data, platform, f, req, kv_cache_dtype, cap, assume, set(), v0_only)
    if not fallbacks:
        return None
    message, field = fallbacks[0]
    return field, message.replace("so it does not model this configuration",
                                  "so it gives no figures for this configuration")


def check_legacy(req, data: dict, gpu, platform: str, cap, f, dtype: str, kv: str):
    """The :class:`compat.checks.CompatReport` of a 0.9 / 0.10 release (see the module docstring).

    Raises:
        CompatInputError: an explicit attention backend (these releases take none on the command line).
    """
    from .checks import (BackendVerdict, CompatInputError, CompatReport, fold_architecture, quantization_issue,
                         speculative_issues)

    release = data["release"]
    sel = data.get("selection") or {}
    if req.attention_backend not in (None, "", "auto"):
        raise CompatInputError("attention_backend", (
            f"vLLM {release} has no --attention-backend: it picks the backend itself, or takes one from the "
            f"{sel.get('env', 'VLLM_ATTENTION_BACKEND')} environment variable ({sel.get('env_source')}), which the "
            "calculator does not set; leave attention_backend to vLLM"))
    assume, why = _assume(data, platform, cap)
    used: set = set()
    sources: list[str] = []
    notes: list[str] = []
    block_size = req.block_size
    if block_size is None:
        # the platform's check_and_update_config sets the cache block size before any layer asks for a backend; the
        # memory engine's rows of this release say what it sets (calculator/engine/RELEASES.md)
        from calculator.engine.runtime import ReleaseRules

        rules = ReleaseRules.for_version(release)
        text = _text_config(req.hf_config or {})
        if f.use_mla or platform == "cpu":
            block_size, block_why = rules.default_block_size(
                platform == "cpu", f.use_mla, (cap.major, cap.minor) if cap else None, kv.startswith("fp8"), None,
                text.get("qk_nope_head_dim"))
        else:
            block_size, block_why = rules.value("default_block_size"), rules.rule("default_block_size").source
        sources.append(f"block size {block_size} as the platform sets it before the backend is chosen: {block_why}")
    p = data["platforms"][platform]
    v0_only = f.architecture in ((data.get("v1_oracle") or {}).get("v0_only") or {})
    errors, fallbacks, conditions = oracle_branches(data, platform, f, req, kv, cap, assume, used, v0_only)
    if v0_only:
        src = data["v1_oracle"]["v0_only"][f.architecture]
        sources.append(f"{src} {f.architecture} implements SupportsV0Only in vLLM {release}")
    chosen: dict[str, dict] = {}  # backend name -> backend entry
    picks: dict[str, list[str]] = {}  # backend name -> the conditions it is picked under ("" always)
    # a certain fall-back to V0 means no V1 backend is built: their checks do not apply
    kinds = [] if fallbacks or errors else layer_kinds(f, req.hf_config)
    for kind in kinds:
        label = f"head size {kind['head_size']}" + (f", sliding window {kind['sliding_window']}"
                                                     if kind["sliding_window"] else "")
        # one outcome per way the selection can go: (conditions, backend name or None, failure or None,
        # run-time conditions of the implementation's constructor)
        outcomes: list[tuple[str, str | None, str | None, list[str]]] = []
        for path, out in select(data, platform, f, dtype, kv, block_size, cap, kind, assume, used):
            when = " and ".join(f"{c}={v}" for c, v in path)
            if isinstance(out, interp.Raised):
                outcomes.append((when, None, f"{out.kind}: {out.message} ({p['source']} get_attn_backend_cls)", []))
                continue
            b = _backend(data, out) if isinstance(out, str) else None
            if b is None:
                outcomes.append((when, None, None, [f"the backend vLLM {release} picks for {label} is not modelled "
                                                    f"({out})"]))
                continue
            chosen[b["name"]] = b
            picks.setdefault(b["name"], []).append(when)
            kw = _impl_kwargs(f, req.hf_config, kind, kv, req.tensor_parallel_size)
            leaves = build_impl(data, platform, b, kw, cap, {**assume, **dict(path)}, used)
            failures = []
            for _ipath, res in leaves:
                if isinstance(res, interp.Raised):
                    failures.append(f"{res.kind}: {res.message} ({b['name']} for {label}: "
                                    f"{_raise_source(data, b, res.message)})")
            if failures and len(failures) == len(leaves):
                # the constructor fails whichever way its own run-time facts go
                outcomes.append((when, b["name"], failures[0], []))
                continue
            conds = []
            for ipath, res in leaves:
                iwhen = " and ".join(f"{c}={v}" for c, v in ipath)
                if isinstance(res, interp.Raised):
                    conds.append(f"{res.kind}: {res.message} ({b['name']} for {label}: "
                                 f"{_raise_source(data, b, res.message)}) when {iwhen}")
                elif isinstance(res, interp.Unknown):
                    conds.append(f"{b['name']} for {label}: {res.text}" + (f" when {iwhen}" if iwhen else ""))
            outcomes.append((when, b["name"], None, conds))
        failed = [o for o in outcomes if o[2]]
        if failed and len(failed) == len(outcomes):
            errors.append(failed[0][2])  # vLLM stops whichever backend the run time gives it
        else:
            conditions += [f"{msg} when {when}" for when, _, msg, _ in failed]
        for when, _, _, conds in outcomes:
            conditions += [c + (f" (if {when})" if when else "") for c in conds]
    auto = next((n for n, whens in picks.items() if "" in whens), next(iter(picks), None))
    if len(picks) > 1:
        notes.append("vLLM's choice depends on the run time: " + "; ".join(
            f"{n} when {' or '.join(w for w in whens if w) or 'otherwise'}" for n, whens in picks.items()))
    sources.append(f"{p['source']} get_attn_backend_cls picks the backend ({sel.get('env')} unset: "
                   f"{sel.get('env_source')}); each backend's Impl.__init__ checks the layers")
    verdicts = []
    for name in p["backends"]:
        b = next((x for x in data["backends"] if x["name"] == name), None)
        if name in chosen:
            bad = [e for e in errors if f"({name} for " in e]
            verdicts.append(BackendVerdict(name=name, ok=not bad, reasons=bad, source=b["source"] if b else None,
                                           priority=0))
        else:
            verdicts.append(BackendVerdict(name=name, ok=None, source=b["source"] if b else None, reasons=[
                f"not chosen by vLLM {release} here; only {sel.get('env')} ({sel.get('env_source')}) picks another, "
                "and the calculator does not set it"]))
    spec = speculative_issues(req.speculative, f, data, req.hf_config)
    error = errors[0] if errors else None
    ok: bool | None = not errors
    quant = quantization_issue(data, req.hf_config)
    if quant is not None:
        error, ok = (quant if error is None else error), False
        errors = [quant, *errors]
    if any(not s.ok for s in spec):
        ok = False
    auto_conditions = conditions + [m for m, _ in fallbacks]
    if ok and auto_conditions:
        ok = None
    arch = check_architecture(data, req.hf_config) if req.hf_config else None
    ok, error, notes, auto_conditions, sources = fold_architecture(
        arch, ok, error, notes, auto_conditions, sources, quant, release, "the other checks alone", repeat_same=False)
    if ok is False and error is None:
        error = next((e for e in errors), None)
    if len(errors) > 1:
        notes.append("vLLM would also stop on: " + "; ".join(e for e in errors if e != error))
    assumptions = [f"{t} = {assume[t]} ({why[t]})" for t in sorted(used) if t in why]
    if sel.get("use_v1_source"):
        assumptions.append(f"the V1 engine (VLLM_USE_V1 default 1, {sel['use_v1_source']}), unless "
                           f"{(data.get('v1_oracle') or {}).get('source', 'the V1 oracle')} falls back to V0")
    return CompatReport(
        release=release, platform=platform, gpu=gpu.name, compute_capability=gpu.compute_capability, dtype=dtype,
        kv_cache_dtype=kv, block_size=req.block_size, requested_backend=None, auto_selected=auto,
        auto_conditions=auto_conditions, auto_source=p["source"], ok=ok, error=error if ok is False else None,
        error_before_speculative=ok is False and error is not None and (error == quant or (
            arch is not None and arch.ok is False)),
        backends=sorted(verdicts, key=lambda v: (v.priority is None, v.name)), speculative=spec,
        assumptions=assumptions, features=f, sources=sources, notes=list(dict.fromkeys(notes)), architecture=arch)
