"""The same request answered for a second vLLM release, and what differs ("I run 0.32, what changes with 0.34?").

:func:`compare_releases` asks the one planner (:func:`calculator.plan.make_plan`) twice, once per release, and lists
the differences between the two answers: the verdict and its reasons, the attention backend vLLM picks, the KV block
size, ``--gpu-memory-utilization`` and the other resolved defaults, every memory figure of the start-up log (weights,
activation peak, CUDA graphs, available KV cache memory, KV cache tokens, GPU blocks, maximum concurrency at
``max_model_len``), the warnings, the speculative config's verdict, the predicted speed and the ``vllm serve``
command. Each difference carries where it comes from: the ``sources`` entry of each release's memory plan (a vLLM
file:line of that release, or a fit), the compatibility report's selector line, the speculative check's line. Only
differences are listed; two identical answers say :data:`NO_DIFFERENCE` (the calculator's model of the two releases
agrees; vLLM changes the calculator does not model are not claimed either way).

No Django here: the surfaces (``manage.py estimate --compare-vllm-version``, ``/api/estimate?compare_vllm_version=``,
the page's field next to the release selector) only render :class:`ReleaseComparison`.
"""
from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import BaseModel

from calculator.engine.errors import EngineInputError

NO_DIFFERENCE = "no difference in what the calculator models"
PARAM = "compare_vllm_version"


class ReleaseDifference(BaseModel):
    """One thing the two answers differ in. ``before`` is the request's release's value, ``after`` the compared
    release's (``None`` for an item only one side has: ``change`` ``added`` / ``removed``); ``delta`` is ``after -
    before`` for numbers; ``text`` the line the surfaces show; ``source`` where each side's value comes from."""

    key: str
    label: str
    change: Literal["changed", "added", "removed"]
    before: Any = None
    after: Any = None
    delta: float | None = None
    text: str
    source: str


class ReleaseComparison(BaseModel):
    """The answer of :func:`compare_releases`: ``release`` (the request's) against ``compare_release``,
    ``differences`` in the order of a start-up log (verdict first), ``summary`` one line (:data:`NO_DIFFERENCE`
    when the list is empty), ``other_error`` when the compared release refuses the request (the refusal is then the
    one difference), and ``compare_params``: the compared release's request as permalink parameters."""

    runtime: Literal["vllm"] = "vllm"
    release: str
    compare_release: str
    differences: list[ReleaseDifference]
    summary: str
    other_error: str | None = None
    compare_params: dict[str, str]

    @property
    def same(self) -> bool:
        return not self.differences


# (key, label, unit) of the memory plan's figures, in the order vLLM logs them (EstimateResult fields)
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("total_memory_gib", "GPU memory as the driver reports it", "GiB"),
    ("requested_memory_gib", "memory budget (total x --gpu-memory-utilization)", "GiB"),
    ("weights_gib", "weights per GPU ('Model loading took')", "GiB"),
    ("draft_weights_gib", "draft model weights per GPU", "GiB"),
    ("activation_peak_gib", "activation peak (profiling run)", "GiB"),
    ("non_torch_gib", "non-torch memory", "GiB"),
    ("cuda_graph_gib", "CUDA graph memory", "GiB"),
    ("cuda_graph_deducted", "CUDA graph memory deducted from the KV budget", ""),
    ("available_kv_cache_gib", "available KV cache memory", "GiB"),
    ("kv_bytes_per_token", "KV bytes per token (this GPU)", "B"),
    ("draft_kv_bytes_per_token", "draft KV bytes per token (this GPU)", "B"),
    ("block_size", "KV cache block size", "tokens"),
    ("kv_cache_tokens", "KV cache tokens ('GPU KV cache size')", "tokens"),
    ("num_gpu_blocks", "GPU KV cache blocks", "blocks"),
    ("max_model_len", "max_model_len", "tokens"),
    ("max_concurrency", "maximum concurrency at max_model_len", "x"),
    ("estimated_max_model_len", "longest max_model_len that fits", "tokens"),
)
# the resolved settings (EstimateResult.resolved) that are not figures above, with their labels
RESOLVED: dict[str, tuple[str, str]] = {
    "gpu_memory_utilization": ("--gpu-memory-utilization", ""),
    "extensible_kv_cache": ("extensible KV cache (KV cache sized after warmup)", ""),
    "kv_cache_capacity_gib": ("KV cache capacity logged before warmup ('Available KV cache memory')", "GiB"),
    "in_use_at_start_gib": ("memory in use at start (CUDA context)", "GiB"),
    "dtype": ("--dtype (resolved)", ""),
    "kv_cache_dtype": ("--kv-cache-dtype (resolved)", ""),
    "max_num_batched_tokens": ("--max-num-batched-tokens", "tokens"),
    "max_num_seqs": ("--max-num-seqs", ""),
}
# the speed keys compared (perf.result_fields), with their labels and units
SPEED: tuple[tuple[str, str, str], ...] = (
    ("ttft_ms", "predicted TTFT", "ms"),
    ("itl_ms", "predicted time per output token", "ms"),
    ("output_tokens_per_s", "predicted output throughput", "tok/s"),
    ("spec_speedup", "predicted speedup from speculative decoding", "x"),
)


def compare_releases(request, compare_release: str, local: dict[str, Any] | None = None, *,
                     base_plan=None) -> ReleaseComparison:
    """The request answered for its own vLLM release and for ``compare_release``, and what differs.

    Args:
        request: a vLLM :class:`~calculator.request.ServingRequest` (its ``compare_vllm_version`` is ignored here).
        compare_release: the other vLLM release (checked as ``vllm_version`` is checked).
        local: the command line's ``--config`` model (:func:`calculator.plan.load`), else ``None``.
        base_plan: the request's own plan when the caller already made it (the same ``make_plan`` answer).

    Raises:
        EngineInputError: the request's own release cannot answer it (the surfaces' usual refusal), the runtime is
            not vLLM, or ``compare_release`` is not a covered release (field ``compare_vllm_version``, vLLM's
            ``--vllm-version`` sentence). A compared release that refuses the request otherwise is a difference.
    """
    from calculator.plan import make_plan
    from calculator.request import InputError, _release_error, parse_request, release_supported

    if request.runtime != "vllm":
        raise InputError(PARAM, f"the release comparison (compare_vllm_version) is only for vLLM (runtime=vllm), "
                                f"not runtime={request.runtime}")
    if not release_supported(compare_release):
        raise _release_error(compare_release, PARAM)
    base = base_plan if base_plan is not None else make_plan(request, local)
    params = {k: v for k, v in request.to_params().items() if k != PARAM}
    params["vllm_version"] = compare_release
    a, b = request.vllm_version, compare_release
    try:
        other_request = parse_request(params)
        other = make_plan(other_request, local, with_suggestions=False)
    except EngineInputError as exc:
        why = f"{exc.field}: {exc.message}"
        diff = ReleaseDifference(key="answer", label="the calculator's answer", change="changed", before="answered",
                                 after=why, text=f"vLLM {b} refuses this request: {why}",
                                 source=f"the request check and memory plan of vLLM {b} (the refusal says which rule)")
        return ReleaseComparison(release=a, compare_release=b, differences=[diff], other_error=why,
                                 summary=f"vLLM {a} -> {b}: vLLM {b} is not answered for this request",
                                 compare_params=params)
    diffs = [*_verdict(base, other, a, b), *_backend(base, other, a, b), *_speculative(base, other, a, b),
             *_memory(base, other, a, b), *_warnings(base, other, a, b), *_speed(base, other, a, b),
             *_command(base, other, a, b)]
    n = len(diffs)
    summary = (f"vLLM {a} -> {b}: " + (NO_DIFFERENCE if not n else f"{n} difference{'s' if n > 1 else ''} in what the "
                                       "calculator models"))
    return ReleaseComparison(release=a, compare_release=b, differences=diffs, summary=summary,
                             compare_params=params)


# --- the parts -------------------------------------------------------------------------------------------
def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        text = f"{value:,}"
    elif isinstance(value, float):
        text = (f"{value:,.2f}" if unit in ("GiB", "ms", "x", "tok/s") else f"{value:.1f}" if value.is_integer()
                else f"{value:g}")
    else:
        return str(value)
    return f"{text}x" if unit == "x" else f"{text} {unit}" if unit else text


def _source(a: str, b: str, src_a: str | None, src_b: str | None, fallback: str) -> str:
    """Where each side's value comes from: one sentence when both releases cite the same, else each release's."""
    src_a, src_b = src_a or fallback, src_b or fallback
    return f"both: {src_a}" if src_a == src_b else f"vLLM {a}: {src_a} | vLLM {b}: {src_b}"


def _changed(key: str, label: str, before: Any, after: Any, unit: str, source: str) -> ReleaseDifference:
    delta = None
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (before, after))
    if numbers:
        delta = after - before
        delta = round(delta, 4) if isinstance(delta, float) else delta
    text = f"{label}: {_fmt(before, unit)} -> {_fmt(after, unit)}"
    if numbers and delta:
        text += f" ({'+' if delta > 0 else '-'}{_fmt(abs(delta), unit)})"
    return ReleaseDifference(key=key, label=label, change="changed", before=before, after=after, delta=delta,
                             text=text, source=source)


def _listed(key: str, label: str, before: list[str], after: list[str], source_a: str,
            source_b: str) -> list[ReleaseDifference]:
    """Items of a list (verdict reasons, warnings) only one release's answer has: removed, then added."""
    out = [ReleaseDifference(key=key, label=label, change="removed", before=item, text=f"{label} removed: {item}",
                             source=source_a) for item in before if item not in after]
    out += [ReleaseDifference(key=key, label=label, change="added", after=item, text=f"{label} added: {item}",
                              source=source_b) for item in after if item not in before]
    return out


def _verdict(p, q, a: str, b: str) -> list[ReleaseDifference]:
    src = (f"the verdict of each release's answer (calculator/verdict.py decide: memory plan, vLLM {a} / {b} "
           "compatibility check, start-up checks)")
    out = []
    if p.verdict.status != q.verdict.status:
        d = _changed("verdict", "verdict", p.verdict.status, q.verdict.status, "", src)
        d.text = f"verdict: {p.verdict.text} -> {q.verdict.text} ({q.verdict.headline})"
        out.append(d)
    out += _listed("verdict_reason", "verdict reason", p.verdict.reasons, q.verdict.reasons,
                   f"vLLM {a}'s verdict (calculator/verdict.py)", f"vLLM {b}'s verdict (calculator/verdict.py)")
    if p.verdict.condition != q.verdict.condition:
        out.append(_changed("verdict_condition", "the condition the verdict depends on", p.verdict.condition,
                            q.verdict.condition, "", src))
    return out


def _backend_of(plan) -> tuple[str | None, str | None]:
    c = plan.compat
    if c is None:
        return None, None
    if c.requested_backend:
        runs = getattr(c, "runs_as", None)
        return c.requested_backend + (f" (runs as {runs})" if runs else " (requested)"), None
    return c.auto_selected, c.auto_source


def _backend_class(plan, name: str | None) -> str | None:
    """The class a backend name stands for in the plan's compat data (0.9 / 0.10 name backends by class,
    ``FlashAttentionBackend``, later releases by enum member, ``FLASH_ATTN``: the same kernel either way)."""
    if name is None or plan.compat is None:
        return name
    from compat import extract

    try:
        backends = extract.load(plan.compat.release).get("backends") or []
    except FileNotFoundError:
        return name
    base = name.split(" ", 1)[0]
    for entry in backends:
        if base in (entry.get("name"), entry.get("enum_name")) and entry.get("class"):
            return entry["class"].rsplit(".", 1)[-1] + name[len(base):]
    return name


def _backend(p, q, a: str, b: str) -> list[ReleaseDifference]:
    (name_a, src_a), (name_b, src_b) = _backend_of(p), _backend_of(q)
    out = []
    if _backend_class(p, name_a) != _backend_class(q, name_b):
        source = _source(a, b, src_a and f"the platform's backend priority, {src_a} (vLLM {a})",
                         src_b and f"the platform's backend priority, {src_b} (vLLM {b})",
                         "the compatibility data extracted from the release's wheel (compat/data)")
        out.append(_changed("attention_backend", "attention backend", name_a, name_b, "", source))
    if p.compat_error != q.compat_error:
        out.append(_changed("compat_error", "compatibility check not made", p.compat_error, q.compat_error, "",
                            "the compatibility data of each release (compat/data)"))
    return out


def _spec_verdict(plan) -> tuple[str | None, list[tuple[str, str | None]]]:
    issues = getattr(plan.compat, "speculative", None) or []
    refused = [(i.reason, i.source) for i in issues if not i.ok]
    return ("refused" if refused else "accepted"), refused


def _speculative(p, q, a: str, b: str) -> list[ReleaseDifference]:
    spec = p.request.speculative_config
    if spec is None or p.compat is None or q.compat is None:
        return []
    (st_a, ref_a), (st_b, ref_b) = _spec_verdict(p), _spec_verdict(q)
    label = f"speculative config ({spec.method})"
    out = []
    if st_a != st_b:
        srcs = "; ".join(s for _, s in (ref_a or ref_b) if s) or "vllm/config/speculative.py of each release"
        out.append(_changed("speculative", label, st_a, st_b, "", f"the speculative checks of each release: {srcs}"))
    reasons_a, reasons_b = [r for r, _ in ref_a], [r for r, _ in ref_b]
    src_a = "; ".join(s for _, s in ref_a if s) or f"vLLM {a}'s speculative checks"
    src_b = "; ".join(s for _, s in ref_b if s) or f"vLLM {b}'s speculative checks"
    out += _listed("speculative_reason", f"{label} refusal", reasons_a, reasons_b, src_a, src_b)
    return out


def _memory(p, q, a: str, b: str) -> list[ReleaseDifference]:
    """The resolved settings (the release's defaults first: --gpu-memory-utilization, the extensible KV cache), then
    the start-up log's figures (not when either release does not start: it never reaches the log that has them)."""
    m, n = p.memory, q.memory
    fallback = "the calculator's memory plan of the release (calculator/engine)"
    out = _resolved(p, q, a, b)
    if p.verdict.status == "does_not_start" or q.verdict.status == "does_not_start":
        return out
    for key, label, unit in FIGURES:
        x, y = getattr(m, key), getattr(n, key)
        if x == y:
            continue
        if key == "max_concurrency":
            label = f"maximum concurrency at max_model_len {n.max_model_len:,} tokens"
        src_key = {"cuda_graph_deducted": "cuda_graph_gib", "estimated_max_model_len": "max_model_len"}.get(key, key)
        out.append(_changed(key, label, x, y, unit, _source(a, b, m.sources.get(src_key), n.sources.get(src_key),
                                                             fallback)))
    return out


# where a resolved setting's value comes from when the plan's sources have no entry of that name
RESOLVED_SOURCE = {"kv_cache_capacity_gib": "available_kv_cache_gib"}


def _resolved(p, q, a: str, b: str) -> list[ReleaseDifference]:
    m, n = p.memory, q.memory
    out = []
    given = p.request.gpu_memory_utilization is not None
    for key, (label, unit) in RESOLVED.items():
        x, y = m.resolved.get(key), n.resolved.get(key)
        if x == y:
            continue
        if key == "gpu_memory_utilization" and not given:
            label = "--gpu-memory-utilization (the release's default)"
        src_key = RESOLVED_SOURCE.get(key, key)
        src = _source(a, b, m.sources.get(src_key) if x is not None else None,
                      n.sources.get(src_key) if y is not None else None,
                      "not in this release's answer" if (x is None or y is None) else
                      "the release's rules (calculator/engine/runtime.py, RELEASES.md)")
        d = _changed(key, label, x, y, unit, src)
        if x is None or y is None:  # a setting only one release resolves (the extensible KV cache's figures)
            d.change = "added" if x is None else "removed"
        out.append(d)
    return out


def _warnings(p, q, a: str, b: str) -> list[ReleaseDifference]:
    return _listed("warning", "warning", list(p.memory.warnings), list(q.memory.warnings),
                   f"vLLM {a}'s memory plan (its release rules, calculator/engine/runtime.py)",
                   f"vLLM {b}'s memory plan (its release rules, calculator/engine/runtime.py)")


def _speed_of(plan) -> dict[str, Any]:
    if plan.speed is None:
        return {}
    from calculator.runtimes import get_runtime

    try:
        return get_runtime(plan.runtime).speed_fields(plan.request, plan.model, plan.memory, speed=plan.speed)
    except EngineInputError:
        return {}


def _speed(p, q, a: str, b: str) -> list[ReleaseDifference]:
    if p.verdict.status == "does_not_start" or q.verdict.status == "does_not_start":
        return []  # no server to time on one side: the verdict says why
    s, t = _speed_of(p), _speed_of(q)
    out = []
    for key, label, unit in SPEED:
        x, y = s.get(key), t.get(key)
        if x is None and y is None or (x is not None and y is not None and round(x, 2) == round(y, 2)):
            continue
        srcs_a, srcs_b = (s.get("speed_sources") or {}), (t.get("speed_sources") or {})
        out.append(_changed(key, label, x if x is None else round(x, 2), y if y is None else round(y, 2), unit,
                            _source(a, b, srcs_a.get(key), srcs_b.get(key),
                                    "the speed model over the release's memory plan (calculator/engine/perf.py)")))
    if p.speed_error != q.speed_error:
        out.append(_changed("speed_error", "why there is no speed prediction", p.speed_error, q.speed_error, "",
                            "the speed model (calculator/engine/perf.py)"))
    return out


def _command(p, q, a: str, b: str) -> list[ReleaseDifference]:
    if p.launch_argv == q.launch_argv:
        return []
    return [_changed("serve_argv", "vllm serve command", shlex.join(p.launch_argv), shlex.join(q.launch_argv), "",
                     "the command each release's answer reproduces (calculator/runtimes/vllm/serve.py)")]


def render_text(comparison: ReleaseComparison) -> str:
    """The comparison as the command line prints it: a heading, the summary, one line per difference with its
    source below it."""
    lines = [f"Release comparison: vLLM {comparison.release} -> {comparison.compare_release}",
             f"  {comparison.summary}"]
    for d in comparison.differences:
        lines += [f"  - {d.text}", f"      from: {d.source}"]
    return "\n".join(lines)
