"""From a valid form to what the results fragment shows: one engine call for the numbers, a few more for
the concurrency-vs-context curve, and the Vega-Lite specs of the charts.

No Django request handling here (views stay thin) and no estimation either: every number comes from
``calculator.engine.estimate``. Units: GiB = 2**30 bytes; KV bytes per token in bytes (KiB = 2**10 B).
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from functools import cached_property
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl

from calculator import engine
from calculator.engine.errors import EngineInputError
from calculator.engine.schemas import EngineInput, EstimateResult
from calculator.plan import Plan
from calculator.runtimes.base import speed_kwargs

# Concurrency-vs-context curve: these context lengths (tokens) plus the one asked for, up to the
# model's limit (the engine rejects longer ones).
CURVE_LENGTHS = tuple(2**k for k in range(10, 21))  # 1K .. 1M tokens

# Memory bar segments: (EstimateResult field, label, css class). Order = how vLLM fills the device.
SEGMENTS = (
    ("weights_gib", "Weights", "seg-weights"),
    ("draft_weights_gib", "Draft weights", "seg-draft"),
    ("activation_peak_gib", "Activation peak", "seg-activation"),
    ("cuda_graph_gib", "CUDA graphs", "seg-cudagraph"),
    ("non_torch_gib", "Non-torch", "seg-nontorch"),
    ("available_kv_cache_gib", "KV cache", "seg-kv"),
)


def cached_estimate(inp: EngineInput) -> EstimateResult:
    """``engine.estimate(inp)`` kept in Django's cache (keyed by the input's JSON, so equal inputs hit): a
    form change moves one point of the concurrency curve; the others come from here. Errors are not cached."""
    from django.core.cache import cache

    key = "estimate:" + hashlib.sha256(inp.model_dump_json().encode()).hexdigest()
    hit = cache.get(key)
    if hit is None:
        hit = engine.estimate(inp)
        cache.set(key, hit, 3600)
    return hit


@dataclass
class Footnotes:
    """Numbers each distinct source once, in order of first use."""

    sources: list[str] = field(default_factory=list)

    def ref(self, source: str | None) -> dict[str, Any] | None:
        """``{"n": footnote number, "source": text}``, or ``None`` when there is no source."""
        if not source:
            return None
        if source not in self.sources:
            self.sources.append(source)
        return {"n": self.sources.index(source) + 1, "source": source}


class _PlanPresets:
    """What both results classes offer from their ``plan`` alone."""

    plan: Plan

    @cached_property
    def mtp_profile(self):
        """The field guide's recorded MTP profile for this model (:func:`calculator.web.presets.mtp_profile`)."""
        from calculator.web.presets import mtp_profile

        return mtp_profile(self.plan)


@dataclass
class Outcome(_PlanPresets):
    """Everything the results fragment renders for one configuration."""

    model_id: str
    inp: EngineInput
    result: EstimateResult
    plan: Plan
    sha: str | None
    model_source: str
    model_notes: list[str]
    canonical_query: str
    concurrency: int | None
    acceptance_rate: float | None
    curve: list[dict[str, Any]]
    serve_argv: list[str]
    serve_command: str
    segments: list[dict[str, Any]]
    footnotes: Footnotes
    refs: dict[str, dict[str, Any] | None]
    charts: dict[str, dict[str, Any]]
    speed: Any = None  # calculator.engine.perf.SpeedResult, or None when it could not be predicted
    speed_error: str | None = None
    speed_params: dict[str, Any] = field(default_factory=dict)
    compat: Any = None  # compat.checks.CompatReport, or None while the compat app is absent
    compat_error: str | None = None
    compat_key: str = ""  # what the compat verdict depends on (its rendered HTML is cached by it)
    side_by_side: dict[str, Any] = field(default_factory=dict)  # the same request on SGLang
    release_comparison: Any = None  # calculator.release_comparison.ReleaseComparison, when compare_vllm_version is set
    bar: dict[str, Any] = field(default_factory=dict)  # memory_bar(): device / budget marks, shortfall

    @property
    def num_gpus(self) -> int:
        return self.plan.request.num_gpus

    @property
    def compared_release_params(self) -> dict[str, str]:
        """The parameters that turn this permalink into the compared release's own answer (``""`` removes one)."""
        rc = self.release_comparison
        return {"vllm_version": rc.compare_release, "compare_vllm_version": ""} if rc else {}

    @property
    def layout(self) -> str:
        """Nodes x GPUs and the TP / PP / DP split (:attr:`ServingRequest.layout`)."""
        return self.plan.request.layout

    @property
    def params(self) -> list[tuple[str, str]]:
        """The permalink's ``(name, value)`` pairs (what the "validate" button posts)."""
        return parse_qsl(self.canonical_query)

    @property
    def resolved_rows(self) -> list[tuple[str, dict[str, Any]]]:
        """``EstimateResult.resolved`` as ``(name, {"value", "source"})`` rows for the "Settings used"
        table; a plain value gets its source from ``EstimateResult.sources``."""
        rows = []
        for name, value in self.result.resolved.items():
            if isinstance(value, dict) and "value" in value:
                rows.append((name, {"value": value["value"], "source": value.get("source", "")}))
            else:
                rows.append((name, {"value": value, "source": self.result.sources.get(name, "")}))
        return rows

    @property
    def other_warnings(self) -> list[str]:
        """The memory plan's warnings but the KV-cache-concurrency one, which the verdict block says in its own
        line (``concurrency_fits``)."""
        from calculator.runtimes.vllm import KV_CONCURRENCY_PREFIX

        return [w for w in self.result.warnings if not w.startswith(KV_CONCURRENCY_PREFIX)]

    @property
    def concurrency_fits(self) -> bool | None:
        """Whether the KV cache holds ``concurrency`` full-length requests (``None`` if not asked)."""
        if self.concurrency is None:
            return None
        return self.result.max_concurrency >= self.concurrency

    @property
    def verdict(self):
        return self.plan.verdict

    def headline(self) -> str:
        """One sentence for ``<title>`` (and the start of the link preview): the verdict first."""
        r = self.result
        v = self.plan.verdict
        return (
            f"{v.text}: {self.model_id} on {self.num_gpus}× {r.gpu} (vLLM {r.vllm_version}); "
            + (_start_reason(v) if v.status == "does_not_start" else
               f"{r.kv_cache_tokens:,} KV cache tokens, max concurrency {r.max_concurrency:.2f}× at "
               f"{r.max_model_len:,} tokens")
        )

    def preview(self) -> str:
        """The page's description and Open Graph description: :meth:`headline` and the headline speed
        (:func:`speed_preview`)."""
        return preview_text(self.headline(), self.plan)

    @cached_property
    def figures(self) -> dict[str, Any] | None:
        """The speed figures as the JSON publishes them (:func:`speed_figures`), for the page."""
        return speed_figures(self.speed)

    @property
    def headline_itl_likely(self) -> tuple[float, float] | None:
        """The TPOT range more likely than the headline TPOT (:func:`headline_itl_likely`)."""
        return headline_itl_likely(self.figures)


def speed_figures(speed: Any) -> dict[str, dict[str, Any] | None] | None:
    """The TTFT / TPOT / output tok/s the page shows, the numbers the JSON answer publishes: ``{"plain": {"ttft_ms",
    "itl_ms", "output_tokens_per_s"}, "spec": {...} or None}``. A vLLM / SGLang ``SpeedResult`` publishes them to
    three significant digits (:func:`calculator.engine.perf.published_speed`); another runtime's speed (llama.cpp,
    Ollama) publishes its own figures as they are. The page's two significant figures and the link preview (which
    reads the JSON) then round the same number with the same rule (the ``sig`` filter). ``None`` without a speed."""
    if speed is None:
        return None
    from calculator.engine import perf

    if isinstance(speed, perf.SpeedResult):
        return perf.published_speed(speed)
    keys = ("ttft_ms", "itl_ms", "output_tokens_per_s")
    sp = getattr(speed, "spec", None)
    return {"plain": {k: getattr(speed, k, None) for k in keys},
            "spec": {k: getattr(sp, k, None) for k in keys} if sp is not None else None}


def headline_itl_likely(figures: dict[str, Any] | None) -> tuple[float, float] | None:
    """The TPOT range the answer holds more likely than its headline TPOT (the speculative server's where the headline
    figures are its, else the plain one's; ``itl_ms_likely``: MLA attention outside the fitted runs,
    ``calculator.engine.perf.MLA_LAYER_US``), or ``None``: the page, the command's table and the link preview show it
    beside the headline figure."""
    if not figures:
        return None
    which = figures.get("spec") or figures.get("plain") or {}
    return which.get("itl_ms_likely")


def concurrency_curve(inp: EngineInput, result: EstimateResult) -> list[dict[str, Any]]:
    """``[{"max_model_len": L, "max_concurrency": c, "kv_cache_tokens": t, "current": bool}, ...]`` for
    L in ``CURVE_LENGTHS`` up to the model's own limit (the ``max_model_len`` vLLM derives from the
    config when the flag is unset), plus the configuration's own length. Each point is a full engine
    estimate with only ``max_model_len`` changed (the activation peak and sliding-window pages depend on
    it too, so scaling one result would be wrong)."""
    points = {result.max_model_len: result}
    limit = result.max_model_len
    if inp.max_model_len is not None:
        limit = max(limit, cached_estimate(inp.model_copy(update={"max_model_len": None})).max_model_len)
    for length in CURVE_LENGTHS:
        if length in points or length > limit:
            continue
        try:
            points[length] = cached_estimate(inp.model_copy(update={"max_model_len": length}))
        except EngineInputError:
            break  # longer than the model allows
    return [
        {
            "max_model_len": length,
            "max_concurrency": round(r.max_concurrency, 3),
            "kv_cache_tokens": r.kv_cache_tokens,
            "fits": r.fits,
            "current": length == result.max_model_len,
        }
        for length, r in sorted(points.items())
    ]


def concurrency_chart(curve: list[dict[str, Any]], expected: int | None) -> dict[str, Any] | None:
    """Vega-Lite v5 spec: max concurrency (requests) vs max_model_len (tokens, log2 axis); the current
    length as a larger point, the expected concurrency as a dashed rule. Only the lengths where a request
    fits at all are drawn (a log axis has no zero); ``None`` (no chart) when fewer than two do."""
    curve = [p for p in curve if p["max_concurrency"] > 0]
    if len(curve) < 2:
        return None
    layers: list[dict[str, Any]] = [
        {
            "mark": {"type": "line", "point": True, "tooltip": True},
            "encoding": {
                "x": {
                    "field": "max_model_len",
                    "type": "quantitative",
                    "scale": {"type": "log", "base": 2},
                    "title": "max_model_len (tokens, log₂ scale)",
                },
                "y": {
                    "field": "max_concurrency",
                    "type": "quantitative",
                    "scale": {"type": "log"},
                    "title": "max concurrency (full-length requests, log scale)",
                },
                "tooltip": [
                    {"field": "max_model_len", "title": "max_model_len", "format": ","},
                    {"field": "max_concurrency", "title": "max concurrency", "format": ".2f"},
                    {"field": "kv_cache_tokens", "title": "KV cache tokens", "format": ","},
                ],
            },
        },
        {
            "transform": [{"filter": "datum.current"}],
            "mark": {"type": "point", "filled": True, "size": 120, "color": "#d62728"},
            "encoding": {
                "x": {"field": "max_model_len", "type": "quantitative"},
                "y": {"field": "max_concurrency", "type": "quantitative"},
                "tooltip": [
                    {"field": "max_model_len", "title": "this max_model_len", "format": ","},
                    {"field": "max_concurrency", "title": "max concurrency", "format": ".2f"},
                ],
            },
        },
    ]
    if expected:
        layers.append(
            {
                "data": {"values": [{"expected": expected, "label": f"your concurrency: {expected:,}"}]},
                "layer": [
                    {"mark": {"type": "rule", "strokeDash": [4, 4], "color": "#777"},
                     "encoding": {"y": {"field": "expected", "type": "quantitative"}}},
                    {"mark": {"type": "text", "align": "right", "dy": -6, "x": "width", "color": "#555"},
                     "encoding": {"y": {"field": "expected", "type": "quantitative"}, "text": {"field": "label"}}},
                ],
            }
        )
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "width": "container",
        "height": 220,
        "data": {"values": curve},
        "layer": layers,
    }


def kv_layer_chart(result: EstimateResult) -> dict[str, Any] | None:
    """Vega-Lite v5 spec: KV cache bytes per token on one GPU, one bar per layer type (KiB); ``None`` for a
    model with one layer type (a single bar says nothing the table does not)."""
    if len(result.kv_by_layer_type) < 2:
        return None
    rows = [
        {
            "layer type": f"{g.kind}{' (draft)' if g.draft else ''} ×{g.num_layers}",
            "KiB per token": round(g.bytes_per_token / 1024, 3),
        }
        for g in result.kv_by_layer_type
    ]
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "width": "container",
        "height": {"step": 28},
        "data": {"values": rows},
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {
            "y": {"field": "layer type", "type": "nominal", "title": "layer type × layers"},
            "x": {
                "field": "KiB per token",
                "type": "quantitative",
                "title": "KV cache KiB per token per GPU",
            },
        },
    }


def memory_segments(result: EstimateResult, notes: Footnotes) -> list[dict[str, Any]]:
    """The per-GPU stacked bar: one dict per non-zero part (``gib``, ``pct`` = width in the bar, ``device_pct``
    = share of the device's memory, label, css, footnote) plus the headroom left outside
    ``gpu_memory_utilization`` when the parts fit in the budget. The bar's full width is the device memory,
    or the parts' sum when they overflow it (the configuration does not fit: :func:`memory_bar` marks where
    the device ends). A negative KV cache (the parts exceed the budget) is no part of the bar."""
    parts = []
    for name, label, css in SEGMENTS:
        gib = getattr(result, name)
        if name == "cuda_graph_gib" and not result.cuda_graph_deducted:
            label += " (not deducted from KV)"
        if gib and gib > 0:
            parts.append(
                {
                    "name": name,
                    "label": label,
                    "css": css,
                    "gib": gib,
                    "ref": notes.ref(result.sources.get(name)),
                }
            )
    used = sum(p["gib"] for p in parts)
    headroom = result.total_memory_gib - result.requested_memory_gib
    if headroom > 0 and used + headroom <= result.total_memory_gib + 1e-9:
        parts.append(
            {
                "name": "headroom",
                "label": "Headroom (outside gpu_memory_utilization)",
                "css": "seg-headroom",
                "gib": headroom,
                "ref": notes.ref(result.sources.get("requested_memory_gib")),
            }
        )
    scale = max(result.total_memory_gib, sum(p["gib"] for p in parts)) or 1.0
    for p in parts:
        p["pct"] = round(100 * p["gib"] / scale, 2)
        p["device_pct"] = round(100 * p["gib"] / result.total_memory_gib, 1) if result.total_memory_gib else None
    return parts


def memory_bar(result: EstimateResult, segments: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the device and the ``gpu_memory_utilization`` budget end on the bar of :func:`memory_segments`
    (percent of the bar's width), and by how much the configuration misses (GiB, 2**30 B):

    - ``need_gib``: the sum of the bar's parts other than the headroom (weights, activation peak, CUDA
      graphs when deducted, non-torch memory, KV cache when positive); when nothing is left for the KV
      cache, the budget plus the shortfall (the engine's own total, as the verdict says it);
    - ``short_gib``: by how much weights and overheads exceed the budget (``-available_kv_cache_gib``, the
      engine's own figure) when the KV cache is not positive, else ``None``;
    - ``over_device_gib``: by how much they exceed the whole device, else ``None``.
    """
    need = sum(p["gib"] for p in segments if p["name"] != "headroom")
    scale = max(result.total_memory_gib, sum(p["gib"] for p in segments)) or 1.0
    short = -result.available_kv_cache_gib if result.available_kv_cache_gib <= 0 else None
    if short is not None:  # the engine's own total (the verdict's figure), not a sum of rounded parts
        need = result.requested_memory_gib + short
    over = need - result.total_memory_gib if need > result.total_memory_gib else None
    return {
        "need_gib": need,
        "short_gib": short,
        "over_device_gib": over,
        "device_pct": round(100 * result.total_memory_gib / scale, 2),
        "budget_pct": round(100 * result.requested_memory_gib / scale, 2),
        "over_pct": round(100 - 100 * result.total_memory_gib / scale, 2) if over else 0,
    }


def api_payload(plan: Plan, notes: Sequence[str] = ()) -> dict[str, Any]:
    """What ``GET /api/estimate`` and ``manage.py estimate --format json`` return: the runtime's memory figures
    (``EstimateResult.to_json()``), ``layout`` (nodes x GPUs, TP / PP / DP; ``num_nodes`` of ``gpus_per_node``),
    ``verdict`` (works / does_not_fit / does_not_start / depends) with
    ``verdict_reasons``, ``verdict_condition`` and ``suggestions`` ([{"label", "params"}], each checked to
    work), ``model_source``, ``revision_sha``, ``model_notes``, the ``vllm serve`` argv, the compat summary
    and the speed keys of ``calculator.engine.perf.speed_fields`` (the runtime's ``speed_keys``).

    The key set depends on the runtime only, never on the outcome: every speed key is always there, and so is
    ``speed_error``. A configuration with no speed (one that does not fit or does not start, a GPU without bandwidth
    figures...) has every speed key ``null`` and the reason in ``speed_error``; one with a speed has
    ``speed_error`` ``null``.

    ``notes``: what the surface knows beyond the request (the GPU a name left open,
    :func:`calculator.request.gpu_choice_note`), put first in ``model_notes``.
    """
    from calculator.runtimes import get_runtime

    out = plan.memory.to_json()
    v = plan.verdict
    out["verdict"] = v.status
    out["verdict_headline"] = v.headline
    out["verdict_reasons"] = v.reasons
    out["verdict_condition"] = v.condition
    out["suggestions"] = [{"label": s.label, "params": s.params} for s in v.suggestions]
    out["runtime"] = plan.runtime
    out["layout"] = plan.request.layout
    out["gpus_per_node"] = plan.request.gpus_per_node
    out["num_nodes"] = plan.request.num_nodes
    out["model_source"] = plan.model.source
    out["revision_sha"] = plan.model.sha
    out["model_notes"] = [*notes, *plan.model.notes]
    out["serve_argv"] = plan.launch_argv
    out["compat"] = None if plan.compat is None else {
        "ok": plan.compat.ok, "error": plan.compat.error, "requested_backend": plan.compat.requested_backend,
        "auto_selected": plan.compat.auto_selected, "runs_as": getattr(plan.compat, "runs_as", None),
        "conditions": plan.compat.auto_conditions}
    out["compat_error"] = plan.compat_error
    # the speed make_plan computed (or why it gave none), not a second run of the speed model; the same keys either way
    runtime = get_runtime(plan.runtime)
    out.update(dict.fromkeys(runtime.speed_keys))
    out["speed_error"] = plan.speed_error
    if plan.speed_error is None:
        try:
            out.update(runtime.speed_fields(plan.request, plan.model, plan.memory, speed=plan.speed))
        except EngineInputError as exc:
            out["speed_error"] = f"{exc.field}: {exc.message}"
    if plan.runtime in ("vllm", "sglang"):
        out["side_by_side"] = side_by_side_payload(plan)
    if plan.runtime == "vllm":
        comparison = release_comparison(plan)
        out["release_comparison"] = None if comparison is None else comparison.model_dump(mode="json")
    return out


def release_comparison(plan: Plan):
    """The request's ``compare_vllm_version`` answered (:func:`calculator.release_comparison.compare_releases`, over
    this plan and the compared release's), or ``None`` when none was asked."""
    release = plan.request.compare_vllm_version
    if plan.runtime != "vllm" or release is None:
        return None
    from calculator.plan import local_of
    from calculator.release_comparison import compare_releases

    return compare_releases(plan.request, release, local_of(plan), base_plan=plan)


def side_by_side_payload(plan: Plan) -> dict[str, Any]:
    """The page's side-by-side answer as JSON: the same request on the other serving runtime (SGLang for a vLLM
    request, vLLM for an SGLang one) at its default release: ``runtime``, ``release``, ``verdict``,
    ``kv_cache_tokens``, ``max_concurrency``, ``serve_argv``, ``permalink_query`` and the ``sentence`` naming
    the terms that make the KV capacities differ; or ``{"runtime", "error"}`` when that runtime refuses it."""
    other = "sglang" if plan.runtime == "vllm" else "vllm"
    side = sglang_side_by_side(plan) if plan.runtime == "vllm" else vllm_side_by_side(plan)
    if "plan" not in side:
        return {"runtime": other, "error": side.get("error")}
    o = side["plan"]
    return {"runtime": other, "release": o.request.release, "verdict": o.verdict.status,
            "kv_cache_tokens": o.memory.kv_cache_tokens, "max_concurrency": o.memory.max_concurrency,
            "serve_argv": o.launch_argv, "permalink_query": side["query"], "sentence": side.get("sentence")}


@dataclass
class RuntimeOutcome(_PlanPresets):
    """The results of a runtime other than vLLM (SGLang): its logged figures, with sources, the verdict
    and the launch command; the vLLM-only pictures (memory bar, curves) are not drawn."""

    plan: Plan
    canonical_query: str
    rows: list[tuple[str, Any, str]]
    launch_command: str
    sources: list[str]
    side_by_side: dict[str, Any] = field(default_factory=dict)  # the same request on vLLM (SGLang pages)

    @property
    def model_id(self) -> str:
        return self.plan.model.repo_id

    @cached_property
    def speed_params(self) -> dict[str, Any]:
        """The workload the speed figures are for (:func:`workload_params`)."""
        return workload_params(self.plan.request)

    @property
    def speed(self):
        return self.plan.speed

    @cached_property
    def figures(self) -> dict[str, Any] | None:
        """The speed figures as the JSON publishes them (:func:`speed_figures`), for the page."""
        return speed_figures(self.plan.speed)

    @property
    def headline_itl_likely(self) -> tuple[float, float] | None:
        """The TPOT range more likely than the headline TPOT (:func:`headline_itl_likely`)."""
        return headline_itl_likely(self.figures)

    @cached_property
    def speedup_concurrency_chart(self):
        """The speedup-vs-concurrency chart (one line per num_speculative_tokens) of the speculative answer, as the vLLM
        page draws it (:func:`calculator.web.charts.speedup_concurrency_chart_for`); None without one."""
        spec = getattr(self.plan.speed, "spec", None) if self.plan.speed is not None else None
        if spec is None or not getattr(spec, "speedup_vs_concurrency", None):  # llama.cpp's draft: no curves
            return None
        from calculator.web.charts import speedup_concurrency_chart_for

        return speedup_concurrency_chart_for(spec, self.plan.request.concurrency)

    @property
    def client_command(self) -> str | None:
        """Ollama: the ``ollama run hf.co/...`` half of the command (the server command is ``launch_command``)."""
        argv = getattr(self.plan.memory, "client_argv", None)
        return shlex.join(argv) if argv else None

    @property
    def gguf_listing(self):
        """llama.cpp / Ollama: the GGUF repo's files with their sizes (the picker), or None."""
        return getattr(self.plan.memory, "gguf_listing", None)

    @property
    def result(self):
        return self.plan.memory

    @property
    def verdict(self):
        return self.plan.verdict

    @property
    def num_gpus(self) -> int:
        return self.plan.request.num_gpus

    @property
    def layout(self) -> str:
        """Nodes x GPUs and the TP / PP / DP split (:attr:`ServingRequest.layout`)."""
        return self.plan.request.layout

    @property
    def params(self) -> list[tuple[str, str]]:
        return parse_qsl(self.canonical_query)

    @property
    def runtime_label(self) -> str:
        from calculator.runtimes import get_runtime

        return get_runtime(self.plan.runtime).label

    @property
    def k_flag(self) -> str:
        """The runtime's own name for the drafted tokens per step, k: SGLang's chain is ``--speculative-num-steps``
        draft passes (its ``--speculative-num-draft-tokens`` is k + 1 with topk 1), SGLang's NGRAM reads only
        ``--speculative-num-draft-tokens`` (k + 1: :func:`calculator.engine.perf.spec_knob` cites it); llama.cpp's is
        ``--spec-draft-n-max`` (common/arg.cpp:4387-4394 in 0.3.36's llama.cpp)."""
        if self.plan.runtime == "sglang":
            return self._sglang_knob()[0]
        return "--spec-draft-n-max"

    @property
    def best_k_value(self) -> int | None:
        """The speed answer's best k as :attr:`k_flag`'s value (SGLang NGRAM: k + 1 draft tokens); 0 stays 0 (no k
        pays); None without one."""
        spec = self.plan.speed.spec if self.plan.speed is not None else None
        best = getattr(spec, "best_num_speculative_tokens", None)
        if not best or self.plan.runtime != "sglang":
            return best
        return self._sglang_knob()[1](best)

    @property
    def k_columns_label(self) -> str:
        """What the speedup-by-concurrency chart's lines and table's columns are, k each: ``--speculative-num-steps (k)``;
        for SGLang's NGRAM, whose flag is k + 1, the flag and what k is to it."""
        flag = self.k_flag
        if self.plan.runtime == "sglang" and self._sglang_knob()[1](1) != 1:
            return f"k, the tokens drafted per step ({flag} k + 1)"
        return f"{flag} (k)"

    def _sglang_knob(self):
        from calculator.engine.perf import spec_knob

        spec = self.plan.request.speculative_config
        return spec_knob("sglang", spec.method if spec is not None else "")

    @property
    def release_label(self) -> str:
        """The release the answer names: Ollama's own release for Ollama (the llama.cpp rules it runs are in the
        runtime block), else the runtime's."""
        m = self.plan.memory
        return (getattr(m, "ollama", None) or {}).get("release") or m.release

    def preview(self) -> str:
        """The page's description and Open Graph description: :meth:`headline` and the headline speed."""
        return preview_text(self.headline(), self.plan)

    def headline(self) -> str:
        m = self.plan.memory
        return (f"{self.verdict.text}: {self.model_id} on {self.num_gpus}× {m.gpu} ({self.runtime_label} "
                f"{self.release_label}); "
                + (_start_reason(self.verdict) if self.verdict.status == "does_not_start" else
                   f"{m.kv_cache_tokens:,} KV cache tokens, "
                   + (getattr(m, "capacity_text", None)  # llama.cpp / Ollama: slots and n_ctx, their own terms
                      or f"max concurrency {m.max_concurrency:.2f}× at {m.max_model_len:,} tokens")))


TITLE_REASON_CHARS = 140  # of a does-not-start reason in the page's <title> and link preview


def preview_text(headline: str, plan: Plan) -> str:
    """A link preview's text: the verdict's ``headline``, then (for a configuration that works or depends on a
    condition) the headline speed :func:`speed_preview` gives, so a shared link with speculative decoding does not
    preview like one without it."""
    speed = speed_preview(plan)
    return f"{headline}. {speed}" if speed else headline


def speed_preview(plan: Plan) -> str:
    """The headline speed in one sentence: ``Speed (prompt 1,024, output 128, 1 in flight): TTFT 58 ms, TPOT 4.3 ms,
    210 output tok/s with speculation (eagle3, k=3: 1.7× speedup)``. The figures are those of the JSON answer (the
    runtime's ``speed_fields``), of the server ``speed_with_speculation`` names, and the sentence says which; with
    speculation it gives the predicted speedup, or says there is none to give (no acceptance figure). ``""`` when
    there is no speed, or the verdict is neither works nor depends (a server that does not start or a request that
    does not fit has no speed worth previewing)."""
    from calculator.runtimes import get_runtime
    from calculator.templatetags.calculator_tags import duration_ms, sig

    if plan.speed is None or plan.speed_error is not None or plan.verdict.status not in ("works", "depends"):
        return ""
    try:
        f = get_runtime(plan.runtime).speed_fields(plan.request, plan.model, plan.memory, speed=plan.speed)
    except EngineInputError:
        return ""
    if f.get("itl_ms") is None or f.get("output_tokens_per_s") is None:
        return ""
    w = workload_params(plan.request)
    who = (f"{w['burst']:,} prompts at once" if w["burst"] else
           f"{w['request_rate']:g} requests/s" if w["request_rate"] is not None else f"{w['concurrency']:,} in flight")
    likely = headline_itl_likely(speed_figures(plan.speed))  # a range held more likely than the TPOT: beside it
    tpot = f"TPOT {sig(f['itl_ms'])} ms" + (f" (a best case; MLA: {sig(likely[0])}–{sig(likely[1])} ms likely)"
                                            if likely else "")
    figures = ", ".join([*([f"TTFT {duration_ms(f['ttft_ms'])}"] if f.get("ttft_ms") is not None else []),
                         tpot, f"{sig(f['output_tokens_per_s'])} output tok/s"])
    text = f"Speed (prompt {w['prompt_len']:,}, output {w['output_len']:,}, {who}): {figures}"
    spec = plan.request.speculative_config
    if spec is None:
        return text
    shape = f"{spec.method}, k={spec.num_speculative_tokens}"
    speedup = f.get("spec_speedup")
    if speedup is None:
        return f"{text} without speculation ({shape}: no speedup predicted without an acceptance rate)"
    if f.get("speed_with_speculation"):
        return f"{text} with speculation ({shape}: {sig(speedup)}× speedup)"
    return f"{text} without speculation ({shape}: {sig(speedup)}× speedup predicted)"


def _start_reason(verdict) -> str:
    """Why the server does not start, for the title and the link preview (the page shows it whole): its first reason,
    cut to :data:`TITLE_REASON_CHARS`; the capacity figures of a server that does not start would mislead there."""
    text = (verdict.reasons or [verdict.headline])[0]
    return text if len(text) <= TITLE_REASON_CHARS else text[:TITLE_REASON_CHARS - 1].rstrip() + "…"


def workload_params(request) -> dict[str, Any]:
    """The workload the speed figures are for, as the pages name it (``templates/calculator/_workload.html``): the
    lengths, and the concurrency, the burst of ``num_prompts`` or the request rate with its prompts and the client's
    ``--max-concurrency`` (:func:`calculator.runtimes.base.speed_kwargs`), and the length spread when given."""
    from calculator.web.forms import SPEED_DEFAULTS

    params = {k: getattr(request, k) or d for k, d in SPEED_DEFAULTS.items()}
    params["acceptance_rate"] = request.acceptance_rate
    kw = speed_kwargs(request)
    params["burst"] = kw["concurrency"] if kw["arrival"] == "burst" else None  # base.speed_kwargs' burst
    params["request_rate"] = kw.get("request_rate")  # an open loop: its rate, prompts and the client's cap
    params["num_prompts"] = kw.get("num_prompts")
    params["max_concurrency"] = request.concurrency if kw.get("request_rate") is not None else None
    params["random_range_ratio"] = request.random_range_ratio  # the length spread that sets the wave share
    return params


def build_runtime(plan: Plan) -> RuntimeOutcome:
    """The results of a non-vLLM plan: each logged figure with its source."""
    from calculator.web.forms import canonical_query

    return RuntimeOutcome(plan=plan, canonical_query=canonical_query(plan.permalink_params()),
                          rows=plan.memory.rows(), launch_command=shlex.join(plan.launch_argv),
                          sources=list(plan.memory.plan.notes),
                          side_by_side=vllm_side_by_side(plan) if plan.runtime == "sglang" else {})


def _explain(sglang_plan, vllm_memory) -> str:
    from calculator.runtimes.sglang.compare import explain_vs_vllm

    m = vllm_memory
    return explain_vs_vllm(sglang_plan, vllm_kv_tokens=m.kv_cache_tokens, vllm_kv_gib=m.available_kv_cache_gib,
                           vllm_gpu_memory_utilization=m.resolved.get("gpu_memory_utilization", 0.9),
                           vllm_weights_gib=m.weights_gib, vllm_activation_gib=m.activation_peak_gib,
                           vllm_non_torch_gib=m.non_torch_gib,
                           vllm_cuda_graph_gib=m.cuda_graph_gib if m.cuda_graph_deducted else None,
                           vllm_bytes_per_token=m.kv_bytes_per_token, vllm_total_gib=m.total_memory_gib,
                           vllm_kv_cache_dtype=m.resolved.get("kv_cache_dtype"))


def _same_request_on(plan: Plan, runtime: str) -> dict[str, Any]:
    """``plan``'s model, GPUs, context, dtypes and speculative config answered by ``runtime`` at its default
    release: ``{"plan", "launch", "query"}``, or ``{"error"}`` when that runtime refuses the request."""
    from calculator.plan import local_of, make_plan
    from calculator.request import InputError, parse_request
    from calculator.web.forms import canonical_query

    r = plan.request
    params = {"model": r.model, "revision": r.revision, "runtime": runtime, "gpu": r.gpu,
              "tensor_parallel_size": r.tensor_parallel_size, "pipeline_parallel_size": r.pipeline_parallel_size,
              "max_model_len": plan.memory.max_model_len, "dtype": r.dtype, "kv_cache_dtype": r.kv_cache_dtype,
              "quantization": r.quantization, "speculative_config": r.speculative_config,
              # the context overrides: --hf-overrides is SGLang's --json-model-override-args, and each runtime's
              # environment variable for a longer context (request.allow_long_max_model_len)
              "hf_overrides": r.hf_overrides, "allow_long_max_model_len": r.allow_long_max_model_len or None,
              # the running-request cap and data-parallel replicas under the other runtime's own names (SGLang's
              # --max-running-requests / --dp-size; DP attention has no vLLM equivalent and is not carried)
              "max_num_seqs": r.max_num_seqs}
    dp = r.data_parallel_size if r.runtime == "vllm" else (1 if r.enable_dp_attention else r.dp_size)
    if dp > 1:
        params["dp_size" if runtime == "sglang" else "data_parallel_size"] = dp
    local = local_of(plan)  # the command line's --config: the other runtime reads it too
    try:
        other = make_plan(parse_request({k: v for k, v in params.items() if v is not None}), local,
                          with_speed=False, with_suggestions=False)
    except InputError as exc:
        return {"error": f"{exc.field}: {exc.message}"}
    return {"plan": other, "launch": shlex.join(other.launch_argv), "query": canonical_query(other.permalink_params())}


def vllm_side_by_side(plan: Plan) -> dict[str, Any]:
    """The same request answered by vLLM (its default release), for the SGLang page: ``{"plan"}`` and the
    sentence explaining the difference in KV tokens, or ``{"error"}`` when vLLM refuses it."""
    out = _same_request_on(plan, "vllm")
    if "plan" in out:
        out["sentence"] = _explain(plan.memory.plan, out["plan"].memory)
    return out


def sglang_side_by_side(plan: Plan) -> dict[str, Any]:
    """The same request answered by SGLang (its newest covered release), for the vLLM page: ``{"plan"}`` and
    the sentence explaining the difference in KV tokens, or ``{"error"}`` when SGLang cannot be modelled."""
    out = _same_request_on(plan, "sglang")
    if "plan" in out:
        out["sentence"] = _explain(out["plan"].memory.plan, plan.memory)
    return out


def build(plan: Plan) -> Outcome:
    """What the results fragment renders for a plan: the memory bar, the concurrency-vs-context curve, the
    charts and the footnotes (the numbers themselves all come from the plan)."""
    from calculator.web.forms import canonical_query
    from calculator.runtimes import get_runtime

    if plan.runtime != "vllm":
        return build_runtime(plan)

    request = plan.request
    result = plan.memory
    inp = get_runtime(plan.runtime).engine_input(request, plan.model)
    notes = Footnotes()
    segments = memory_segments(result, notes)
    refs = {
        key: notes.ref(result.sources.get(key))
        for key in (
            "kv_cache_tokens",
            "max_concurrency",
            "kv_bytes_per_token",
            "num_gpu_blocks",
            "max_model_len",
            "total_memory_gib",
            "requested_memory_gib",
            "available_kv_cache_gib",
        )
    }
    if plan.speed is not None:  # the speed cards' formulas (perf's sources), numbered with the memory figures'
        refs.update({f"speed_{key}": notes.ref(plan.speed.sources.get(key))
                     for key in ("ttft_ms", "itl_ms", "output_tokens_per_s")})
    curve = concurrency_curve(inp, result)
    charts = {
        name: spec
        for name, spec in (("concurrency", concurrency_chart(curve, request.concurrency)),
                           ("kv_layers", kv_layer_chart(result)))
        if spec is not None
    }
    if plan.speed is not None and plan.speed.spec is not None:
        from calculator.web.charts import speedup_chart_for, speedup_concurrency_chart_for

        charts["speedup"] = speedup_chart_for(plan.speed.spec)
        by_concurrency = speedup_concurrency_chart_for(plan.speed.spec, request.concurrency)
        if by_concurrency is not None:
            charts["speedup_concurrency"] = by_concurrency
    params = workload_params(request)
    return Outcome(
        model_id=plan.model.repo_id,
        inp=inp,
        result=result,
        plan=plan,
        sha=plan.model.sha,
        model_source=plan.model.source,
        model_notes=list(plan.model.notes),
        canonical_query=canonical_query(plan.permalink_params()),
        concurrency=request.concurrency,
        acceptance_rate=request.acceptance_rate,
        curve=curve,
        serve_argv=plan.launch_argv,
        serve_command=shlex.join(plan.launch_argv),
        segments=segments,
        footnotes=notes,
        refs=refs,
        charts=charts,
        speed=plan.speed,
        speed_error=plan.speed_error,
        speed_params=params,
        compat=plan.compat,
        compat_error=plan.compat_error,
        compat_key=hashlib.sha256(repr(_compat_key(plan)).encode()).hexdigest(),
        side_by_side=sglang_side_by_side(plan),
        release_comparison=release_comparison(plan),
        bar=memory_bar(result, segments),
    )


def _compat_key(plan: Plan) -> tuple:
    """What the compat verdict reads (not ``max_model_len``, the parallel sizes or the workload)."""
    r = plan.request
    spec = r.speculative_config.model_dump_json() if r.speculative_config else None
    return ("compat", plan.model.repo_id, plan.model.sha, plan.model.source, r.gpu, r.dtype, r.kv_cache_dtype,
            r.block_size, r.attention_backend, spec, r.release)
