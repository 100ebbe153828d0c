"""One verdict per configuration, and the changes that make a failing one work.

``decide`` combines the three things that decide whether a configuration serves: memory (the runtime's
memory plan: do the weights fit, does one ``max_model_len`` request fit in the KV cache), the start-up
compatibility check (backend / GPU / dtype / KV dtype / release, with the runtime's own reasons), and the
request length (``prompt_len + output_len`` against ``max_model_len``). The result is one of

- ``works``: it starts and serves the request;
- ``does_not_start``: the runtime refuses the combination at start-up (compat);
- ``does_not_fit``: it starts only with less context or more memory (memory, request length);
- ``depends``: it works under a condition the calculator cannot see (e.g. an optional kernel package),
  stated in ``condition``.

The same verdict is the page's banner and title, the link preview, the API's ``verdict`` key and the
command's exit status. ``suggest`` searches candidate changes through the same pipeline and keeps only
those whose own verdict is ``works``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

Status = Literal["works", "does_not_fit", "does_not_start", "depends"]
STATUS_TEXT = {
    "works": "Works",
    "does_not_fit": "Does not fit",
    "does_not_start": "Does not start",
    "depends": "Depends",
}
# CLI exit status of ``estimate`` / ``check_compat`` (2 is bad input).
EXIT_STATUS = {"works": 0, "does_not_fit": 1, "does_not_start": 1, "depends": 3}


class Suggestion(BaseModel):
    """A change that makes the configuration work: ``params`` are the query parameters to set (``""``
    removes one); applying them gives ``works`` (checked through the pipeline before it is offered)."""

    label: str
    params: dict[str, str]
    kind: str  # settings | context | hardware | model | offload (llama.cpp: layers to the CPU; may depend on RAM)


class Verdict(BaseModel):
    status: Status
    headline: str
    reasons: list[str] = []
    condition: str | None = None
    suggestions: list[Suggestion] = []

    @property
    def ok(self) -> bool:
        return self.status == "works"

    @property
    def text(self) -> str:
        return STATUS_TEXT[self.status]

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self.status]


def decide(request, memory, compat, startup_errors: list[str] | None = None,
           compat_error: str | None = None) -> Verdict:
    """The verdict of one configuration.

    Args:
        request: the :class:`~calculator.request.ServingRequest`.
        memory: the runtime's memory plan (``fits``, ``reason``, ``max_model_len``...).
        compat: the runtime's compatibility report (``ok`` True / False / None = depends, ``error``,
            ``speculative`` issues) or ``None`` when the runtime has no such check.
        startup_errors: the runtime's other start-up refusals (memory already in use, CUDA-graph capture
            that does not fit), each in the runtime's words.
        compat_error: why the compatibility check could not be made (the verdict then depends on it).
    """
    start_reasons: list[str] = list(startup_errors or [])
    condition = None
    if compat is not None:
        # in the order the runtime stops: vLLM builds the model config (architecture, quantization) first, then parses
        # --speculative-config, and only then do its workers select attention backends (vllm==0.10.0
        # vllm/engine/arg_utils.py:1004 create_model_config, :1183 create_speculative_config, :1277 VllmConfig)
        spec_reasons = [f"speculative decoding: {issue.reason}" for issue in getattr(compat, "speculative", []) or []
                        if not issue.ok]
        if compat.ok is False and compat.error and getattr(compat, "error_before_speculative", False):
            start_reasons += [compat.error, *spec_reasons]
        elif compat.ok is False and (compat.error or not spec_reasons or _backend_failed(compat)):
            start_reasons += [*spec_reasons, compat.error or _backend_reason(compat)]
        else:  # the speculative config alone stops it: no backend is to blame
            start_reasons += spec_reasons
        if compat.ok is None:
            condition = "; ".join(compat.auto_conditions) or _backend_reason(compat)
    if condition is None and compat is None and compat_error:
        condition = f"the attention backend starts (not checked: {compat_error})"
    if getattr(memory, "condition", None) and memory.fits:  # both hold when the start depends on each
        # (a runtime whose compat report already carries the memory condition says it once)
        if condition is None:
            condition = memory.condition
        elif memory.condition not in condition:
            condition = f"{condition}; and {memory.condition}"
    fit_reasons: list[str] = []
    # a start-up refusal the plan carries too (SGLang's plan says "--attention-backend X does not start: <the compat
    # reason>"): the same refusal, listed once
    fit_condition = getattr(memory, "fit_condition", None)
    if not memory.fits and fit_condition:
        # vLLM: it fits only at the low end of an overhead the public logs do not pin down for this GPU
        condition = fit_condition if condition is None else f"{condition}; and {fit_condition}"
    elif not memory.fits and not any(r and r in (memory.reason or "") for r in start_reasons):
        fit_reasons.append(memory.reason or "the configuration does not fit in GPU memory")
    from calculator.runtimes.base import given_workload_over

    cap = getattr(memory, "request_cap", None)  # SGLang: a pool smaller than the context caps each request
    limit = cap if cap is not None and cap < memory.max_model_len else memory.max_model_len
    total = given_workload_over(request, limit)  # a workload given; the other length at its default
    if total is not None:
        who, flag = {"sglang": ("SGLang", "--context-length"), "llama.cpp": ("llama-server", "the context"),
                     "ollama": ("Ollama", "num_ctx")}.get(request.runtime, ("vLLM", "max_model_len"))
        if limit != memory.max_model_len:
            flag = "SGLang's request cap (the KV pool less one token)"
        fit_reasons.append(f"a request of prompt_len + output_len = {total:,} tokens is longer than {flag} "
                           f"{limit:,}: {who} rejects it")
    if start_reasons:
        return Verdict(status="does_not_start", headline=start_reasons[0], reasons=start_reasons + fit_reasons)
    if fit_reasons:
        return Verdict(status="does_not_fit", headline=fit_reasons[0], reasons=fit_reasons)
    if condition is not None:
        return Verdict(status="depends", headline=f"works if {condition}", condition=condition)
    # llama.cpp / Ollama say it in their own terms (slots of --parallel, n_ctx): capacity_text
    capacity = getattr(memory, "capacity_text", None)
    if capacity is None:
        scope = getattr(memory, "pool_scope", None)
        capacity = (f"{memory.max_concurrency:.2f}x concurrency at {memory.max_model_len:,} tokens"
                    + (f" {scope}" if scope else ""))
    return Verdict(status="works", headline=f"starts with {memory.kv_cache_tokens:,} KV cache tokens, {capacity}")


def _backend_failed(compat) -> bool:
    """Whether the attention backend check itself refuses (no backend chosen, or the chosen / requested one
    refuses), as opposed to a report that is ``ok=False`` only for its speculative issues."""
    name = compat.requested_backend or compat.auto_selected
    if name is None:
        return True
    return any(b.name == name and b.ok is False for b in getattr(compat, "backends", []) or [])


def _backend_reason(compat) -> str:
    name = compat.requested_backend or compat.auto_selected
    for b in compat.backends:
        if b.name == name and b.reasons:
            return f"{name}: {'; '.join(b.reasons)}"
    return f"no attention backend of vLLM {compat.release} accepts this configuration on {compat.gpu}"


# --- suggestions --------------------------------------------------------------------------------------
UTILIZATIONS = (0.95, 0.98)
SGLANG_MEM_FRACTIONS = (0.88, 0.92)
# A request field's flag in each runtime's own words (the default is vLLM's --field-name).
FLAG_NAMES = {"sglang": {"max_model_len": "--context-length", "tensor_parallel_size": "--tp-size"},
              "llama.cpp": {"max_model_len": "--ctx-size"}, "ollama": {"max_model_len": "num_ctx"}}
MAX_SUGGESTIONS = 4


def candidates(request, memory, compat, quantized_variants: Callable[[str], list[str]]) -> list[Suggestion]:
    """Candidate changes, smallest first: settings that keep the hardware and model (backend, KV dtype,
    ``--gpu-memory-utilization``), then context, then more GPUs (TP inside a node, then PP across nodes of
    ``gpus_per_node`` GPUs, 8 by default), then a
    quantized checkpoint of the same model. Each moves one setting in the direction that helps and never
    repeats a value already set; the caller keeps those that work."""
    out: list[Suggestion] = []
    compat_failed = compat is not None and compat.ok is not True
    flag = FLAG_NAMES.get(request.runtime, {})

    def name(field: str) -> str:
        return flag.get(field, "--" + field.replace("_", "-"))

    arch = getattr(compat, "architecture", None)  # vLLM: the release's model registry lacks the model's class
    if compat_failed and arch is not None and arch.ok is not True and arch.first_release:
        from compat.releases import version_key

        which = "first" if version_key(arch.first_release) > version_key(request.release) else "last"
        out.append(Suggestion(label=f"--vllm-version {arch.first_release} (the {which} release covered here whose model "
                                    f"registry has {arch.architectures[0]})",
                              params={"vllm_version": arch.first_release}, kind="settings"))
    for issue in getattr(compat, "speculative", None) or []:
        # vLLM: the release's EAGLE-3 target allowlist refuses the model; a covered release whose list accepts it
        if not issue.ok and getattr(issue, "release", None):
            out.append(Suggestion(label=f"--vllm-version {issue.release} ({issue.release_why})",
                                  params={"vllm_version": issue.release}, kind="settings"))
    out += _speculative_method_candidates(request, compat)
    need = getattr(compat, "quantization_needs", None)
    if compat_failed and need:
        out += _min_capability_candidates(request, need)
    for release, why in getattr(compat, "release_suggestions", None) or []:
        # SGLang: a release whose pinned transformers (or own config class) loads the model's config
        out.append(Suggestion(label=f"--sglang-version {release} ({why})", params={"sglang_version": release},
                              kind="settings"))
    for value, why in getattr(compat, "quantization_suggestions", None) or []:
        # SGLang: the --quantization its release needs to load the checkpoint's quantization config
        out.append(Suggestion(label=f"--quantization {value} ({why})", params={"quantization": value},
                              kind="settings"))
    if compat_failed and request.attention_backend:
        picker = {"sglang": "SGLang"}.get(request.runtime, "vLLM")
        out.append(Suggestion(label=f"let {picker} pick the attention backend (drop --attention-backend)",
                              params={"attention_backend": ""}, kind="settings"))
        for b in compat.backends:
            if b.ok and b.name != request.attention_backend:
                out.append(Suggestion(label=f"--attention-backend {b.name}", params={"attention_backend": b.name},
                                      kind="settings"))
    if request.runtime == "vllm" and memory.resolved.get("dtype") in ("bfloat16", "bf16") and not _bf16_gpu(request):
        # vLLM refuses bfloat16 below compute capability 8.0 and names --dtype=half itself
        # (calculator.runtimes.vllm.bf16_refusal): offered only where that refusal applies
        out.append(Suggestion(label="--dtype float16 (vLLM refuses bfloat16 below compute capability 8.0 and says to "
                                    "use half)", params={"dtype": "float16"}, kind="settings"))
    if compat_failed and request.kv_cache_dtype != "auto":
        out.append(Suggestion(label="--kv-cache-dtype auto (the model dtype)", params={"kv_cache_dtype": "auto"},
                              kind="settings"))
    if not memory.fits and request.runtime in ("llama.cpp", "ollama"):
        out += _llamacpp_candidates(request, memory)
    beside = _utilization_beside_in_use(request, memory)
    if beside is not None:
        out.append(beside)
    from calculator.runtimes.base import given_workload_over

    over = given_workload_over(request, memory.max_model_len) if memory.max_model_len else None
    if over is not None:  # the user's prompt + output is longer than the context: a context that holds it
        out.append(Suggestion(label=f"{name('max_model_len')} {over:,} (holds prompt_len + output_len)",
                              params={"max_model_len": str(over)}, kind="context"))
    # SGLang with a pool smaller than one --context-length request starts (it caps each request): the same changes that
    # make the pool hold a full request make it work without that condition
    pool_capped = getattr(memory, "request_cap", None) is not None
    if not memory.fits or compat_failed or pool_capped:
        used = memory.resolved.get("gpu_memory_utilization") or 0
        if request.kv_cache_memory_bytes is None and request.runtime == "vllm":
            for u in UTILIZATIONS:
                if u > used + 1e-9:
                    out.append(Suggestion(label=f"--gpu-memory-utilization {u}", params={"gpu_memory_utilization": str(u)},
                                          kind="settings"))
        if request.runtime == "sglang" and request.mem_fraction_static is None:
            # SGLang's own "Not enough memory" error says to raise --mem-fraction-static (its default keeps a reserve
            # for activations and CUDA graphs, which a higher share narrows, as vLLM's higher utilizations do)
            mfs = memory.resolved.get("mem_fraction_static") or 0
            for f in SGLANG_MEM_FRACTIONS:
                if f > mfs + 1e-9:
                    out.append(Suggestion(label=f"--mem-fraction-static {f}", params={"mem_fraction_static": str(f)},
                                          kind="settings"))
        if request.runtime in ("vllm", "sglang") and request.kv_cache_dtype in ("auto", "bfloat16", "float16") and \
                memory.resolved.get("kv_cache_dtype") not in ("fp8", "fp8_e4m3", "fp8_e5m2"):
            out.append(Suggestion(label="--kv-cache-dtype fp8 (half the KV bytes per token)",
                                  params={"kv_cache_dtype": "fp8"}, kind="settings"))
        est = memory.estimated_max_model_len
        if est and est < memory.max_model_len:
            length, why = _fitting_context(est, "the longest that fits")
            out.append(Suggestion(label=f"{name('max_model_len')} {length:,} ({why})",
                                  params={"max_model_len": str(length)}, kind="context"))
        tp, pp = request.tensor_parallel_size, request.pipeline_parallel_size
        node = request.gpus_per_node  # GPUs in one machine (8 unless the user says otherwise)
        multi_gpu = request.runtime in ("vllm", "sglang") and not getattr(memory, "gpu", "").lower().endswith("cpu") \
            and request.gpu.upper() != "CPU"
        for t in ((2, 4, 8, 16, 32, 64) if multi_gpu else ()):
            if t > tp and t * pp <= node:  # tensor parallel stays inside a node
                out.append(Suggestion(label=f"{name('tensor_parallel_size')} {t} ({t * pp} GPUs)",
                                      params={"tensor_parallel_size": str(t)}, kind="hardware"))
        for p in ((2, 4) if multi_gpu and request.runtime == "vllm" else ()):  # SGLang's PP is not modelled
            if p > pp:
                t = max(tp, node)  # a full node per stage, pipeline stages across nodes
                change = {"pipeline_parallel_size": str(p)}
                if t != tp:
                    change["tensor_parallel_size"] = str(t)
                nodes = -(-t * p // node)
                out.append(Suggestion(label=f"{name('tensor_parallel_size')} {t} {name('pipeline_parallel_size')} {p} "
                                      f"({nodes} nodes of {node} GPUs)", params=change, kind="hardware"))
        from calculator.plan import QUANT_TAGS

        for repo in quantized_variants(request.model):
            # the catalog's other precisions of the model include its unquantized checkpoint (Qwen/Qwen3-8B for
            # Qwen3-8B-FP8), offered when vLLM refuses the quantization on this GPU
            tagged = any(repo.lower().endswith(t) for t in QUANT_TAGS)
            out.append(Suggestion(label=f"the {'quantized' if tagged else 'unquantized'} checkpoint {repo}",
                                  params={"model": repo, "revision": ""}, kind="model"))
    return out


# GPUs offered when vLLM refuses a quantization method below its minimum compute capability, cheapest first
# (catalog aliases: calculator/data/gpus.json)
CAPABLE_GPUS = ("L4", "A100", "L40S", "H100")


def _min_capability_candidates(request, need: dict) -> list[Suggestion]:
    """vLLM refuses the quantization method on this GPU (``compat.checks.min_capability_issue``): serve the
    checkpoint unquantized where ``--quantization`` asked for the method, a covered release whose minimum for it
    this GPU meets, or a GPU of the catalog that meets it."""
    from calculator.engine.gpus import get_gpu

    method, least = need["method"], need["min_capability"]
    out = []
    if need.get("from_flag"):
        out.append(Suggestion(label=f"drop --quantization {method} (serve the checkpoint in its own dtype)",
                              params={"quantization": ""}, kind="settings"))
    if need.get("release"):
        out.append(Suggestion(label=f"--vllm-version {need['release']} (its minimum compute capability for {method} is "
                                    "met by this GPU)", params={"vllm_version": need["release"]}, kind="settings"))
    for alias in CAPABLE_GPUS:
        t = get_gpu(alias).capability_tuple
        if t is not None and t[0] * 10 + t[1] >= least:
            out.append(Suggestion(label=f"--gpu {alias} (compute capability {t[0]}.{t[1]}; vLLM needs {least // 10}."
                                        f"{least % 10} for {method})", params={"gpu": alias}, kind="hardware"))
    return out


def _utilization_beside_in_use(request, memory) -> Suggestion | None:
    """vLLM with ``--gpu-memory-in-use-gib`` whose free memory is below the requested share (vLLM's start-up refusal,
    :func:`calculator.engine.runtime.free_memory_check`): the largest ``--gpu-memory-utilization`` that fits beside
    the memory in use (:func:`calculator.engine.runtime.largest_utilization_beside`, its source in
    :data:`calculator.engine.runtime.FREE_MEMORY_CHECK_SOURCE`), as vLLM's message says
    ("Decrease GPU memory utilization"). ``None`` when the check passes, or the release skips it (0.34's extensible KV
    cache), or no share fits."""
    if request.runtime != "vllm" or not request.gpu_memory_in_use_gib or request.kv_cache_memory_bytes is not None:
        return None
    from calculator.engine.gpus import get_gpu
    from calculator.engine.runtime import ReleaseRules, free_memory_check, largest_utilization_beside

    gpu = get_gpu(request.gpu)
    if gpu.is_cpu:
        return None
    rules = ReleaseRules.for_version(request.release)
    total = int((request.gpu_memory_gib or gpu.memory_gib) * 2**30)
    in_use = int(request.gpu_memory_in_use_gib * 2**30)
    used = memory.resolved.get("gpu_memory_utilization") or rules.default_gpu_memory_utilization
    ok, _ = free_memory_check(rules, total, in_use, used, extensible=bool(memory.resolved.get("extensible_kv_cache")))
    u = None if ok else largest_utilization_beside(rules, total, in_use)
    if u is None or u >= used:
        return None
    return Suggestion(label=f"--gpu-memory-utilization {u} (the largest share that fits beside the "
                            f"{request.gpu_memory_in_use_gib:g} GiB in use: vLLM refuses to start when the free memory is "
                            "below utilization x total, vllm/v1/worker/utils.py:761-770 in 0.32.0)",
                      params={"gpu_memory_utilization": str(u)}, kind="settings")


def _bf16_gpu(request) -> bool:
    """Whether the request's GPU runs bfloat16 (:func:`calculator.engine.memory.supports_bf16`)."""
    from calculator.engine.gpus import get_gpu
    from calculator.engine.memory import supports_bf16

    return supports_bf16(get_gpu(request.gpu))


def _speculative_method_candidates(request, compat) -> list[Suggestion]:
    """vLLM: ``method: mtp`` in a release whose ``SpeculativeMethod`` has no ``mtp`` (before 0.11: only the
    per-architecture names, ``deepseek_mtp``... vllm==0.10.0 vllm/config.py:2594-2595): the same
    ``--speculative-config`` with each MTP name the release takes (from its compat data), the caller keeping the first
    whose own verdict works."""
    spec = request.speculative_config
    if request.runtime != "vllm" or spec is None or spec.vllm_name != "mtp" or compat is None:
        return []
    if not any(not i.ok and "does not exist" in i.reason for i in getattr(compat, "speculative", []) or []):
        return []
    from compat.checks import load_release

    try:
        methods = load_release(request.release).get("speculative", {}).get("methods", [])
    except Exception:  # noqa: BLE001 - no compat data: no method to offer
        return []
    out = []
    for m in methods:
        if m.endswith("_mtp"):
            changed = {**spec.model_dump(exclude_none=True), "method": m}
            text = json.dumps(changed, separators=(",", ":"))
            out.append(Suggestion(label=f"--speculative-config '{text}' (vLLM {request.release} names the MTP "
                                        f"method {m}; 'mtp' came in a later release)",
                                  params={"speculative_config": text}, kind="settings"))
    return out


def _llamacpp_candidates(request, memory) -> list[Suggestion]:
    """llama.cpp / Ollama changes that keep the model and the machine: let llama-server's --fit place the layers
    (drop --fit off, or a -ngl it cannot hold; the fitted placement may then depend on the machine's RAM), a
    quantized KV cache (q8_0: half of f16's bytes, needs flash attention, which -fa auto turns on where the backend
    can), and one more GPU of the same kind."""
    out: list[Suggestion] = []
    if request.runtime == "llama.cpp" and request.fit == "off" and request.n_gpu_layers in (None, -1):
        out.append(Suggestion(label="drop --fit off: llama-server's --fit moves what does not fit to the CPU",
                              params={"fit": ""}, kind="offload"))
    if request.n_gpu_layers not in (None, -1):
        out.append(Suggestion(label=("drop --n-gpu-layers: llama-server's --fit picks how many fit"
                                     if request.runtime == "llama.cpp" else "drop num_gpu: Ollama then places the layers to fit"),
                              params={"n_gpu_layers": ""}, kind="offload"))
    types = (memory.resolved or {}).get("cache_type_k"), (memory.resolved or {}).get("cache_type_v")
    if types == ("f16", "f16"):
        flag = "--cache-type-k q8_0 --cache-type-v q8_0" if request.runtime == "llama.cpp" else \
            "OLLAMA_KV_CACHE_TYPE=q8_0"
        out.append(Suggestion(label=f"{flag} (half the KV cache's bytes)",
                              params={"cache_type_k": "q8_0", "cache_type_v": "q8_0"}, kind="settings"))
    if request.runtime == "llama.cpp" and request.gpu.upper() != "CPU" and request.gpus < 8:
        out.append(Suggestion(label=f"--gpus {request.gpus * 2} (the layers split over them, -sm layer)",
                              params={"gpus": str(request.gpus * 2)}, kind="hardware"))
    out += _smaller_gguf_files(request, memory)
    return out


#: How many smaller .gguf files of the repo are tried as suggestions (each is planned again).
SMALLER_GGUF_TRIED = 6


def _gguf_size(f) -> float | None:
    """A listed .gguf file's size in bytes: the Hub's, else the size its page lists, else the size derived from
    llama.cpp's quantization rules; None when none is known."""
    if f.size_bytes is not None:
        return float(f.size_bytes)
    if f.listed_gb is not None:
        return f.listed_gb * 1e9
    return None if f.derived_bytes is None else float(f.derived_bytes)


def _smaller_gguf_files(request, memory) -> list[Suggestion]:
    """The repo's smaller .gguf files (a lower quant of the same model), largest first, at most
    :data:`SMALLER_GGUF_TRIED`: the caller plans each and offers the first that works. When the plan says by how much
    it overflows (a Mac's unified memory: ``unified_memory``), the files are those at least that much smaller."""
    listing, current = getattr(memory, "gguf_listing", None), getattr(memory, "gguf_file", None)
    if listing is None or not current or listing.file(current) is None:
        return []
    size = _gguf_size(listing.file(current))
    if size is None:
        return []
    limit = size
    u = getattr(memory, "unified_memory", None)
    if u and u.get("status") == "does_not_fit" and u.get("total") is not None:
        limit = size - (u["total"] - u["usable"])
    smaller = sorted(((s, f) for f in listing.files if f.name != current and (s := _gguf_size(f)) is not None
                      and s < size and s <= limit), key=lambda x: -x[0])
    return [Suggestion(label=f"a smaller quant of the same model: {f.name} ({f.size_label})",
                       params={"gguf_file": f.name}, kind="model") for _, f in smaller[:SMALLER_GGUF_TRIED]]


def suggest(request, memory, compat, evaluate: Callable[[dict[str, str]], Any | None],
            quantized_variants: Callable[[str], list[str]]) -> list[Suggestion]:
    """The candidates (:func:`candidates`) whose configuration works (an ``offload`` one also when it depends only on
    a condition, which its label then states), at most ``MAX_SUGGESTIONS``, one per
    setting, and no pipeline across nodes once more GPUs inside one node work with the whole context:
    ``evaluate(params)`` returns the plan (its ``verdict`` and ``memory``) of the request with ``params`` applied, or
    ``None`` when the changed request is itself invalid. More GPUs inside one node that hold the weights but not the
    whole context are offered with the longest context that fits there (both settings), checked the same way."""
    found: list[Suggestion] = []
    seen_fields: set[frozenset[str]] = set()
    for cand in candidates(request, memory, compat, quantized_variants):
        key = frozenset(cand.params)
        if key in seen_fields:
            continue
        if "pipeline_parallel_size" in cand.params and any(f.kind == "hardware" and set(f.params) ==
                                                             {"tensor_parallel_size"} for f in found):
            continue  # more GPUs inside one node already work: no second node to suggest
        result = evaluate(cand.params)
        verdict = result.verdict if result is not None else None
        if verdict is not None and verdict.status == "depends" and cand.kind == "offload" and verdict.condition:
            # layers on the CPU start when the machine's RAM holds them, which the request does not say
            cand = cand.model_copy(update={"label": f"{cand.label} (works if {verdict.condition})"})
        elif (verdict is not None and verdict.status == "depends" and set(cand.params) == {"mem_fraction_static"}
              and getattr(result.memory, "request_cap", None)):
            # SGLang starts with the larger share but caps each request below --context-length: offer the share with
            # the context its pool holds
            length, why = _fitting_context(result.memory.request_cap, "what its pool holds")
            if length < 4096:
                continue
            flag = FLAG_NAMES.get(request.runtime, {}).get("max_model_len", "--context-length")
            pair = Suggestion(label=f"{cand.label} with {flag} {length:,} ({why})",
                              params={**cand.params, "max_model_len": str(length)}, kind="settings")
            again = evaluate(pair.params)
            if again is None or again.verdict.status != "works" or frozenset(pair.params) in seen_fields:
                continue
            cand, key = pair, frozenset(pair.params)
        elif verdict is not None and verdict.status == "does_not_fit" and set(cand.params) == {"tensor_parallel_size"}:
            pair = _shorter_context(request, cand, result.memory)
            if pair is None or frozenset(pair.params) in seen_fields:
                continue
            again = evaluate(pair.params)
            if again is None or again.verdict.status != "works":
                continue
            cand, key = pair, frozenset(pair.params)
        elif verdict is None or verdict.status != "works":
            continue
        found.append(cand)
        seen_fields.add(key)
        if len(found) >= MAX_SUGGESTIONS:
            break
    return found


def _fitting_context(est: int, exact: str) -> tuple[int, str]:
    """The context a suggestion offers for ``est`` fitting tokens: rounded down to 1,024 from 2,048 up, with the
    words saying so (``exact`` when nothing was rounded)."""
    length = est - est % 1024 if est >= 2048 else est
    return length, (f"{est:,} fits; rounded down to a multiple of 1,024" if length != est else exact)


def _shorter_context(request, cand: Suggestion, memory) -> Suggestion | None:
    """``cand`` (more GPUs) with the longest context its memory plan fits (``estimated_max_model_len``, rounded down to
    1,024 tokens as the context candidate is, :func:`_fitting_context`), when that is shorter than asked and at least
    4,096 tokens."""
    est, asked = getattr(memory, "estimated_max_model_len", None), getattr(memory, "max_model_len", None)
    if not est or not asked or est < 4096 or est >= asked:
        return None
    length, why = _fitting_context(est, "the longest context that fits there")
    flag = FLAG_NAMES.get(request.runtime, {}).get("max_model_len", "--max-model-len")
    return Suggestion(label=f"{cand.label} with {flag} {length:,} ({why})",
                      params={**cand.params, "max_model_len": str(length)}, kind="hardware")
