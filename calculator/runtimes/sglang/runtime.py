"""SGLang behind the runtime seam (:class:`calculator.runtimes.base.Runtime`).

The request's shared settings map to SGLang's flags: ``max_model_len`` is ``--context-length``,
``tensor_parallel_size`` ``--tp-size``, ``pipeline_parallel_size`` ``--pp-size``; the speculative config maps
to ``--speculative-algorithm`` (eagle -> EAGLE, eagle3 -> EAGLE3, mtp -> NEXTN, draft_model -> STANDALONE,
ngram -> NGRAM) with a chain of ``num_speculative_tokens`` steps (``--speculative-num-steps k
--speculative-eagle-topk 1 --speculative-num-draft-tokens k+1``). SGLang's own settings are request fields
of their own (``mem_fraction_static``, ``chunked_prefill_size``, ``cuda_graph_max_bs``, ``page_size``,
``dp_size``, ``ep_size``, ``enable_dp_attention``).
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import get_gpu
from calculator.runtimes.base import CompatSummary, LoadedModel, speed_kwargs, workload_fits

from . import compat as sg_compat
from .config_types import check_config, loaded_by
from .launch import launch_argv
from .kernels import with_kernel_count
from .memory import SGLangPlan, plan, spec_max_running
from .releases import COVERED, DEFAULT, spec_overlap

_ALGORITHM = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "draft_model": "STANDALONE", "ngram": "NGRAM"}


SGLANG_ROWS = (
    ("max_total_num_tokens", "KV cache tokens (max_total_num_tokens)"),
    ("cell_size_bytes", "KV bytes per token per rank (B)"),
    ("kv_size_gib", "KV size (GB as SGLang logs it)"),
    ("k_size_gib", "K size (GB)"),
    ("v_size_gib", "V size (GB)"),
    ("weights_gib", "Weights per rank (Load weight end, GiB)"),
    ("mem_fraction_static", "mem_fraction_static"),
    ("free_before_load_gib", "Free memory before loading (GiB)"),
    ("context_length", "context_length"),
    ("page_size", "page_size"),
    ("chunked_prefill_size", "chunked_prefill_size"),
    ("cuda_graph_max_bs", "cuda_graph_max_bs"),
    ("max_running_requests", "max_running_requests"),
    ("attention_backend", "attention backend"),
)
#: the speculative draft's rows (``SGLangPlan.speculative``), beside the pool they share or add to
SGLANG_DRAFT_ROWS = (
    ("draft_cell_size_bytes", "  of which the draft's KV per token (B)"),
    ("draft_kv_gib", "Draft KV per rank (GiB)"),
    ("draft_weights_gib", "Draft weights per rank (GiB)"),
)


def gib_as_logged(value: Any) -> Any:
    """``value`` (a JSON dict / list) with every float under a key ending in ``_gib`` rounded to two decimals: SGLang
    prints its GB figures with ``:.2f`` ("Load weight end. ... avail mem=..., mem usage=... GB",
    sglang==0.5.23 model_executor/model_runner.py:1372-1378; "KV Cache is allocated. #tokens: ..., K size: ... GB,
    V size: ... GB" / "KV size: ... GB", mem_cache/memory_pool.py:2087-2090 and :2095-2097; "Mamba Cache is
    allocated" with its conv_state / ssm_state sizes, :983-987), and the vLLM answer's GiB are
    ``round(bytes / 2**30, 2)`` as vLLM logs them
    (calculator/engine/memory.py ``_gib``). Only the JSON is rounded; the plan keeps its figures."""
    if isinstance(value, dict):
        return {k: round(v, 2) if k.endswith("_gib") and isinstance(v, float) else gib_as_logged(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [gib_as_logged(v) for v in value]
    return value


class SGLangMemory(BaseModel):
    """SGLang's plan with the fields the verdict reads (``fits``, ``reason``, ``kv_cache_tokens``,
    ``max_concurrency``, ``max_model_len``, ``resolved``); ``plan`` holds every logged figure."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    plan: SGLangPlan
    fits: bool
    reason: str | None = None
    condition: str | None = None  # SGLang starts, on this condition (a pool smaller than one --context-length request)
    request_cap: int | None = None  # the longest request SGLang takes (max_req_len + 1) when the pool binds before the context
    kv_cache_tokens: int
    max_concurrency: float
    max_model_len: int
    estimated_max_model_len: int | None = None
    resolved: dict[str, Any]
    gpu: str
    vllm_version: str = ""  # the page's header names the runtime release through ``release``
    release: str
    # the pool is one DP-attention rank's (each rank keeps its own): said in the verdict's headline
    pool_scope: str | None = None

    def rows(self) -> list[tuple[str, Any, str]]:
        """``(label, value, source)`` rows of what SGLang logs, for the page."""
        p = self.plan
        cited = {s.field: f"{s.kind}: {s.source}" for s in p.sources}
        rows = [(label, getattr(p, key), cited.get(key, "")) for key, label in SGLANG_ROWS
                if getattr(p, key, None) is not None]
        spec = p.speculative
        if spec is not None:
            # the draft's share: its KV rides in the cell above (0.5.23) or a pool of its own, its weights load first
            for key, label in SGLANG_DRAFT_ROWS:
                value = getattr(spec, key, None)
                if value is not None:
                    why = cited.get(f"speculative.{key}") or (cited.get("cell_size_bytes.draft", "")
                                                               if key == "draft_cell_size_bytes" else "")
                    rows.insert(2 if key == "draft_cell_size_bytes" else len(rows), (label, value, why))
        return rows

    def to_json(self) -> dict[str, Any]:
        """What SGLang logs, per rank: ``max_total_num_tokens``, ``kv_bytes_per_token`` (cell size), K and V
        sizes, ``max_running_requests``, ``mem_fraction_static`` ... with ``sources``. Every ``*_gib`` figure (the
        plan's, its Mamba pool's, its draft's, its sliding-window pool's) to two decimals, as SGLang prints them
        (:func:`gib_as_logged`) and as the vLLM answer gives its own GiB."""
        p = self.plan
        out = gib_as_logged(p.model_dump(mode="json"))
        out.update(kv_bytes_per_token=p.cell_size_bytes, kv_cache_tokens=self.kv_cache_tokens, fits=self.fits,
                   reason=self.reason, max_concurrency=self.max_concurrency, max_model_len=self.max_model_len,
                   resolved=self.resolved, runtime_release=self.release, gpu=self.gpu)
        out["sources"] = {s.field: f"{s.kind}: {s.source}" for s in p.sources}
        # the runtime-neutral keys every runtime's JSON has, named by SGLang's own figures
        out["sources"].update({
            "kv_bytes_per_token": "= cell_size_bytes (SGLang's per-token KV cell on one rank)",
            "kv_cache_tokens": "= max_total_num_tokens (SGLang's 'KV Cache is allocated. #tokens')",
            "max_model_len": "= context_length",
            "max_concurrency": "max_total_num_tokens / context_length: requests of the full context the pool holds",
            **{k: f"input (SGLang --{k.replace('_', '-')}; default 1)" for k in ("tp_size", "dp_size", "ep_size",
                                                                                  "pp_size")},
            "attention_tp_size": "tp_size / dp_size with --enable-dp-attention, else tp_size (SGLang's attention TP "
                                 "group)",
        })
        return out


#: What the SGLang speed figures are and how far off they were where public SGLang runs exist: the current row
#: against the 28 sgl-cookbook bench_serving runs of benchmarks/data/sglang_speed_public.json, each at its own
#: release (benchmarks/sglang_speed_fit.py "current row" column; tests/test_runtime_sglang.py recomputes the figures).
SPEED_WARNING = (
    "SGLang speed: a decode layer costs the kernels it launches (counted from "
    "SGLang's model code and default backends) at a per-kernel time fitted on public SGLang runs (on AMD Instinct the "
    "MI300X fit's whole-layer time stands in for it), prompts run as "
    "prefill passes of their own that pause decoding, launched eagerly up to 0.5.9 (fitted) and through piecewise CUDA "
    "graphs from 0.5.10 (the graphed kernels keep 50 us each for an MoE model, fitted on Kimi-K2's public piecewise "
    "runs, and none for a dense one, as SGLang's one public before/after pair lost its whole launch time; "
    "benchmarks/sglang_piecewise_check.py: those runs' TTFT comes out 19-28 % over at one client and 44-66 % under at "
    "4-32 clients), and the bandwidth / "
    "compute shares "
    "are vLLM's fit carried over. Against 28 public SGLang cookbook runs (B200, A100, each at its own release; benchmarks/sglang_speed_fit.py) the "
    "median "
    "|error| is TPOT 10.0 %, output tok/s 13.0 %, TTFT 27.5 %: TPOT below the measured one in 19 of 28 (median -6 %), "
    "output tok/s above it in 22 of 28 (median +10 %), TTFT below it in 17 of 28 (median -7 %). Not modelled: the "
    "triton MLA backend at 16-64 clients (GLM-4.7-Flash: predicted TPOT 16-44 % below the measured one) and Kimi-K2.5 "
    "on H200 (SGLang 0.5.6, before its model file: up to 91 % below). The eager-prefill time per kernel is 90 us for an MoE "
    "model (its cookbook runs) and 28 us for a dense one, the median of three public dense runs that took 16-65 us "
    "(Qwen3-8B BF16 / FP8 on one H100 at 4 clients, benchmarks/data/sglang_speed_public.json sgl-pub-043/045: TTFT "
    "+24 % / -37 %; Llama-3.1-8B FP8 TP8, sglang PR 13094: +1 %)")


#: SGLang's EAGLE / EAGLE-3 with an MoE target at TP > 1, as public runs measured it: benchmarks/data/
#: spec_extra_public.json sd-extra-009..017 (Qwen3-30B-A3B on H100, SpecForge issue 339 at TP 2 and AngelSlim issue 163
#: at TP 4, EAGLE-3 chains and trees, acceptance length measured; tests/test_runtime_sglang.py recomputes the figures
#: from that file). Given those lengths the speed model predicts a gain in 6 of the 9 (benchmarks/spec_cases.py on that
#: file; with --split: the speculative step predicted 11-36 % shorter than measured in 6 of them). What SGLang
#: 0.5.7's source adds to a speculative step on such a target that the model leaves out is far smaller than that gap:
#: - the target-verify pass replays a CUDA graph at every batch up to --cuda-graph-max-bs, as decode does
#:   (model_executor/cuda_graph_runner.py:280-290 captures TARGET_VERIFY with num_draft_tokens per request, :373-437);
#: - the fused-MoE kernel looks up the same tuned H100 tables (configs/triton_3_2_0 E=128 N=192 / N=384) in decode and
#:   verification (layers/moe/fused_moe_triton/fused_moe_triton_config.py:38-135, 203-240), BLOCK_SIZE_M 16 up to 128
#:   tokens: memory-bound there, its cost is the experts read, which the model counts (perf.ModelCost.experts_touched);
#: - the EAGLE-3 head (models/llama_eagle3.py: one layer, a replicated fc, a vocab-parallel draft lm_head) runs its
#:   passes in CUDA graphs too (speculative/eagle_draft_cuda_graph_runner.py, eagle_draft_extend_cuda_graph_runner.py),
#:   a few all-reduces each at the target's TP; the three captured target layers are a clone each
#:   (layers/communicator.py:370-379);
#: - the overlap scheduler is off (server_args.py:2016) and each step syncs the host (speculative/eagle_worker.py:501,
#:   eagle_info.py:390-440), which the fitted host terms price; at TP > 1 the scheduler's two request broadcasts per
#:   loop (managers/scheduler.py:1239-1258) are exposed too, a fraction of a millisecond;
#: - with topk > 1 SGLang serves with flashinfer instead of fa3 on Hopper (server_args.py:1527-1533), which the
#:   product's backend choice already follows.
#: So the cause is not modelled, and the answer says so rather than carrying a term fitted to these runs.
SGLANG_MOE_TP_EAGLE_WARNING = (
    "SGLang EAGLE / EAGLE-3 with an MoE target at TP > 1 ran slower on public runs than this model predicts: "
    "Qwen3-30B-A3B on H100 at TP 2 and TP 4 (SpecForge issue 339, AngelSlim issue 163; EAGLE-3 chains and trees of "
    "4-60 draft tokens at measured acceptance lengths 1.86-3.2) ran at 0.72-0.99x plain decoding with 1-32 "
    "concurrent requests (1.06x at 64), a speculative step taking 2.1-4.0x a plain one, where the model given the same "
    "acceptance predicts a gain in 6 of the 9 runs. What SGLang's source adds to such a step (the target-verify CUDA "
    "graph, the tuned fused-MoE kernel, the draft head's passes and all-reduces at the target's TP, the overlap "
    "scheduler turned off) accounts for far less, so the cause is not modelled: read the speedup as a best case and "
    "measure before enabling speculation on such a deployment")
#: The speculative methods the warning covers: SGLang's EAGLE worker with a draft head (NEXTN / MTP runs the same
#: worker, but the public runs are all EAGLE-3 heads, so MTP is not covered)
MOE_TP_EAGLE_METHODS = ("eagle", "eagle3")


def moe_tp_eagle_warned(method: str | None, tp: int, num_experts: int) -> bool:
    """Whether an SGLang speculative answer carries :data:`SGLANG_MOE_TP_EAGLE_WARNING`: an EAGLE / EAGLE-3 draft head
    (``method``) on a target with routed experts (``num_experts`` > 0) at tensor parallelism ``tp`` > 1."""
    return method in MOE_TP_EAGLE_METHODS and tp > 1 and num_experts > 0


def swa_layer_kv(p: SGLangPlan) -> list:
    """The per-layer-type KV rows (:class:`~calculator.engine.schemas.LayerKV`, one rank) of a hybrid
    sliding-window plan: the full sub-pool's and the SWA one's (``chunked_local`` for Llama 4's chunked layers,
    ``sliding_window`` otherwise), bytes per token summed over each kind's layers, as SGLang sizes them
    (``HybridSWAPool.full_bytes_per_token`` / ``swa_bytes_per_token``)."""
    from calculator.engine.schemas import LayerKV

    g = p.swa_pool
    swa_kind = "chunked_local" if g.architecture.startswith("Llama4") else "sliding_window"
    return [LayerKV(kind="full_attention", num_layers=g.full_layers, block_size=p.page_size,
                    page_size_bytes=g.full_bytes_per_token * p.page_size,
                    bytes_per_token=g.full_bytes_per_token * g.full_layers,
                    detail=f"SGLang SWAKVPool full sub-pool: {g.full_kv_heads} KV heads x ({g.head_dim} + "
                           f"{g.v_head_dim})"),
            LayerKV(kind=swa_kind, num_layers=g.swa_layers, block_size=p.page_size,
                    page_size_bytes=g.swa_bytes_per_token * p.page_size,
                    bytes_per_token=g.swa_bytes_per_token * g.swa_layers,
                    detail=f"SGLang SWAKVPool SWA sub-pool: {g.swa_kv_heads} KV heads x ({g.swa_head_dim} + "
                           f"{g.swa_v_head_dim}), window {g.sliding_window_size}")]


def _swa_speed_base(request, model: LoadedModel, p: SGLangPlan, perf):
    """The speed model's plan of a hybrid SWA model the vLLM engine does not size, from SGLang's own plan alone
    (its KV rows go in by :func:`swa_layer_kv`; pool size, running requests and chunk by ``_speed_plan``)."""
    return perf.Plan(model=model.repo_id, hf_config=model.config, draft_hf_config=None, gpu=request.gpu,
                     dtype=request.dtype, quant_config=model.quant_config, quantization=request.quantization,
                     tp=request.tensor_parallel_size, pp=request.pipeline_parallel_size, enforce_eager=False,
                     gpus_per_node=request.gpus_per_node, spec_method=None, spec_k=0,
                     resolved={"kv_cache_dtype": p.kv_cache_dtype}, kv_by_layer_type=[],
                     fits=True, max_model_len=p.context_length, kv_cache_tokens=p.max_total_num_tokens,
                     max_concurrency=0.0)


class SGLangCompat(CompatSummary):
    """:class:`CompatSummary` with ``release_suggestions``: ``(release, why)`` of the covered releases that load the
    model's config out of the box when this one does not (nearest newer first), offered as ``--sglang-version``."""

    release_suggestions: list[tuple[str, str]] = []
    # ``(value, why)`` of a --quantization that loads the checkpoint when the asked one does not (kv_dtype.py)
    quantization_suggestions: list[tuple[str, str]] = []


def _with_config_check(summary: CompatSummary, request, model: LoadedModel) -> CompatSummary:
    """``summary`` with the config check of :func:`.config_types.check_config` folded in: a condition (a newer
    transformers over the release's pin, or --trust-remote-code) makes ``ok`` None (depends) and joins
    ``auto_conditions``; a config no way loads makes it False with the error; either carries the releases that load it
    out of the box."""
    check = check_config(request.release, model.config)
    if check is None or check.loads:
        return summary
    out = SGLangCompat(**summary.model_dump(),
                       release_suggestions=[(r, f"model type {check.model_type}: {loaded_by(r, check.model_type)[0]}")
                                            for r in check.releases])
    if check.error:
        out.ok = False
        out.error = "; ".join(filter(None, [check.error, summary.error]))
        out.reasons = [*summary.reasons, check.error]
    elif check.remote_class and getattr(request, "trust_remote_code", False):
        # the condition is met: --trust-remote-code loads the repository's own class (what the command carries)
        out.reasons = [*summary.reasons, f"--trust-remote-code given, so the condition holds: {check.condition}"]
    else:
        if out.ok is True:
            out.ok = None
        if out.ok is None:
            out.auto_conditions = [*summary.auto_conditions, check.condition]
        out.reasons = [*summary.reasons, check.condition]
    return out


#: the first covered release whose ServerArgs sets --speculative-draft-model-path to the model path for NEXTN on
#: DeepSeek V3 / R1 (and GLM-4.5) when it is not given (sglang==0.4.10.post2 sglang/srt/server_args.py:549-553)
NEXTN_AUTO_DRAFT_PATH = "0.4.10.post2"


def nextn_without_draft_path(request) -> str | None:
    """SGLang's own start-up failure for NEXTN (speculative_config method mtp) without a draft path in a release that
    does not fill the path itself, or ``None``. sglang==0.4.3.post4 turns NEXTN into EAGLE (server_args.py:274-276)
    and its draft worker builds its ModelConfig from ``server_args.speculative_draft_model_path``
    (managers/tp_worker.py:60-64): None there fails before any weight loads; the draft must be a separate one-layer
    NextN checkpoint, since DeepseekV3ForCausalLMNextN.load_weights asserts num_nextn_predict_layers == 1 ==
    num_hidden_layers (models/deepseek_nextn.py:159-160), which the full model's config is not. From 0.4.10.post2 SGLang
    sets the path to the model path itself (server_args.py:549-553)."""
    from .releases import at_least

    spec = request.speculative_config
    if spec is None or spec.method != "mtp" or at_least(request.release, NEXTN_AUTO_DRAFT_PATH):
        return None
    return (f"SGLang {request.release} runs NEXTN as EAGLE (sglang=={request.release} sglang/srt/server_args.py:274-276) "
            "and builds the draft worker's model config from --speculative-draft-model-path "
            "(sglang/srt/managers/tp_worker.py:60-64), which is not given: the draft worker fails at start-up. Its "
            "NextN draft is a separate one-layer NextN checkpoint (DeepseekV3ForCausalLMNextN asserts "
            "num_nextn_predict_layers == 1 == num_hidden_layers, sglang/srt/models/deepseek_nextn.py:159-160), not the "
            "model itself: give that checkpoint as --speculative-draft-model-path (speculative_config "
            "{\"method\": \"eagle\", \"model\": <the NextN checkpoint>}), or --sglang-version "
            f"{NEXTN_AUTO_DRAFT_PATH} or later, which sets the draft path to the model path itself "
            f"(sglang=={NEXTN_AUTO_DRAFT_PATH} sglang/srt/server_args.py:549-553)")


class SGLang:
    """SGLang (``python -m sglang.launch_server``)."""

    name = "sglang"
    label = "SGLang"

    def releases(self) -> tuple[str, ...]:
        return COVERED

    def default_release(self) -> str:
        return DEFAULT

    def _spec(self, request) -> dict[str, Any]:
        spec = request.speculative_config
        if spec is None:
            return {}
        k = spec.num_speculative_tokens
        topk = request.speculative_eagle_topk or 1
        # a chain verifies num_steps + 1 tokens (SGLang resets num_draft_tokens so for topk 1, server_args.py:3074)
        ndraft = request.speculative_num_draft_tokens or k + 1  # the memory plan applies (and notes) that reset
        if spec.method not in _ALGORITHM:
            # server_args.py --speculative-algorithm choices (0.5.10.post1: EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM);
            # the memory plan refuses the ones a release lacks
            raise EngineInputError("speculative_config", f"SGLang has no {spec.method!r} speculative decoding: its "
                                   "--speculative-algorithm takes EAGLE (method eagle), EAGLE3 (eagle3), NEXTN (mtp), "
                                   "STANDALONE (draft_model) and NGRAM (ngram) (server_args.py)")
        return {"speculative_algorithm": _ALGORITHM[spec.method], "speculative_num_steps": k,
                "speculative_eagle_topk": topk, "speculative_num_draft_tokens": ndraft}

    @staticmethod
    def _max_running(request) -> int | None:
        """``--max-running-requests`` for the plan and the command: the user's; else, with speculative decoding and
        more clients per data-parallel replica than SGLang's speculative default lets run (48; 32 in 0.4.3.post4:
        server_args.py resets max_running_requests for EAGLE / NEXTN / NGRAM when it is not given), that many clients,
        so the speculative server runs them all as the plain one does and the speedup compares the two at equal
        running requests, as public speculative benchmarks do (the speed answer says so, and what the default
        would do)."""
        if request.max_num_seqs is not None or request.speculative_config is None:
            return request.max_num_seqs
        if request.request_rate is not None and request.concurrency is None:
            return None  # an open loop: how many run at once follows from the rate, not a client count to lift to
        if request.speculative_config.method not in ("eagle", "eagle3", "mtp", "ngram"):
            return None
        default = spec_max_running(request.release)
        per_replica = -(-speed_kwargs(request)["concurrency"] // max(1, request.dp_size or 1))
        return per_replica if per_replica > default else None

    def memory(self, request, model: LoadedModel) -> SGLangMemory:
        """SGLang's start-up memory plan per rank (:func:`.memory.plan`), and whether one ``--context-length``
        request fits its pool (SGLang raises "Not enough memory" when the pool is empty)."""
        gpu = get_gpu(request.gpu)
        running = self._max_running(request)
        try:
            p = plan(model.config, gpu=gpu, release=request.release, tp_size=request.tensor_parallel_size,
                     dp_size=request.dp_size, enable_dp_attention=request.enable_dp_attention, ep_size=request.ep_size,
                     pp_size=request.pipeline_parallel_size, mem_fraction_static=request.mem_fraction_static,
                     context_length=request.max_model_len, kv_cache_dtype=request.kv_cache_dtype,
                     max_running_requests=running,
                     max_running_requests_why=None if request.max_num_seqs is not None or running is None
                     else "the clients per replica, passed because they are more than SGLang's speculative default",
                     dtype=request.dtype, quantization=request.quantization, page_size=request.page_size,
                     chunked_prefill_size=request.chunked_prefill_size, cuda_graph_max_bs=request.cuda_graph_max_bs,
                     draft_hf_config=model.draft.config if model.draft else None,
                     quant_config=model.quant_config, attention_backend=request.attention_backend,
                     model_path=getattr(model, "repo_id", None),
                     allow_longer_context=request.allow_long_max_model_len, **self._spec(request))
        except EngineInputError as exc:
            loads = (self._releases_that_load(request, model) if exc.field == "config.architectures"
                     and "is not a model class of SGLang" in exc.message else [])
            other = None
            if loads:
                # the release has no model class for the architecture: SGLang stops there (a does_not_start, compat
                # says why); the figures are those of the nearest release that loads it, said in the plan's notes
                try:
                    other = self.memory(request.model_copy(update={"sglang_version": loads[0]}), model)
                except EngineInputError:
                    other = None  # that release refuses it too: the refusal of the release asked stands
            if other is not None:
                other.plan.notes.append(f"{exc.message}: SGLang {request.release} does not start with this model; "
                                        f"the figures are SGLang {loads[0]}'s, the nearest covered release that "
                                        "registers it")
                return other
            field = {"release": "sglang_version", "tp_size": "tensor_parallel_size", "pp_size": "pipeline_parallel_size",
                     "context_length": "max_model_len", "speculative_algorithm": "speculative_config"}.get(exc.field,
                                                                                                          exc.field)
            raise EngineInputError(field, exc.message) from None
        tokens = p.max_total_num_tokens
        fits = tokens > 0
        reason = condition = None
        if p.does_not_start is not None:
            fits, reason = False, p.does_not_start
        elif tokens <= 0:
            reason = ("Not enough memory: SGLang's KV pool would be empty; increase --mem-fraction-static "
                      "(SGLang raises this at start-up)")
        elif tokens < p.context_length:
            # SGLang starts with it (unlike vLLM, which refuses a KV cache smaller than max_model_len) and rejects the
            # longer requests: the verdict depends on the requests staying within the cap
            condition = (f"every request (prompt + output) stays within {tokens - 1:,} tokens: SGLang's KV pool holds "
                         f"{tokens:,} tokens, fewer than one request of --context-length {p.context_length:,}, so "
                         f"SGLang starts but caps each request there and rejects longer ones (max_req_len = "
                         f"min(context_len - 1, max_total_num_tokens - 1), sglang=={p.release} "
                         "sglang/srt/managers/tp_worker.py)")
        dp = p.dp_size if p.enable_dp_attention and (p.dp_size or 1) > 1 else 1
        scope = (f"per DP-attention rank ({dp} ranks, each with its own pool and scheduler: {dp * tokens:,} tokens, "
                 f"{dp * tokens / p.context_length:.2f}x in all)" if dp > 1 and p.context_length else None)
        return SGLangMemory(plan=p, fits=fits, reason=reason, condition=condition, kv_cache_tokens=tokens,
                            pool_scope=scope,
                            request_cap=tokens - 1 if condition else None,
                            max_concurrency=round(tokens / p.context_length, 2) if p.context_length else 0.0,
                            max_model_len=p.context_length, estimated_max_model_len=tokens if 0 < tokens < p.context_length
                            else None, gpu=gpu.name, release=p.release,
                            resolved={"mem_fraction_static": p.mem_fraction_static, "page_size": p.page_size,
                                      "chunked_prefill_size": p.chunked_prefill_size,
                                      "cuda_graph_max_bs": p.cuda_graph_max_bs, "context_length": p.context_length,
                                      "kv_cache_dtype": p.kv_cache_dtype, "attention_backend": p.attention_backend,
                                      "max_running_requests": p.max_running_requests})

    @staticmethod
    def _releases_that_load(request, model: LoadedModel) -> list[str]:
        """The covered releases whose ``sglang/srt/models`` register the config's ``architectures[0]`` when
        ``request.release`` does not (nearest newer first, then older, nearest first); empty when it does or none
        does (:func:`.releases.architectures`)."""
        from .releases import architectures

        archs = (model.config or {}).get("architectures") or [None] if isinstance(model.config, dict) else [None]
        arch = archs[0]
        if not isinstance(arch, str) or arch in architectures(request.release):
            return []
        here = COVERED.index(request.release)
        loads = [i for i, r in enumerate(COVERED) if arch in architectures(r)]
        return [COVERED[i] for i in loads if i > here] + [COVERED[i] for i in reversed(loads) if i < here]

    def compat(self, request, model: LoadedModel, memory) -> CompatSummary:
        """The attention backend SGLang picks, or whether the one asked for runs (:mod:`.compat`), whether the
        release loads the model's config with the transformers it pins (:func:`.config_types.check_config`), and
        whether it loads the checkpoint's quantization config (the memory plan's ``quantization_refusal``, with the
        ``--quantization`` that does as a suggestion)."""
        loads = self._releases_that_load(request, model)
        if loads:
            arch = model.config["architectures"][0]
            why = (f"{arch} is not a model class of SGLang {request.release} (no EntryClass of that name in its "
                   "sglang/srt/models): it does not start with this model")
            return SGLangCompat(release=request.release, gpu=get_gpu(request.gpu).name, ok=False, error=why,
                                reasons=[why], release_suggestions=[(r, f"it registers {arch}") for r in loads[:2]])
        out = _with_config_check(self._backend_compat(request, model), request, model)
        nextn = nextn_without_draft_path(request)
        if nextn is not None:
            out = SGLangCompat(**out.model_dump())
            out.ok = False
            out.error = "; ".join(filter(None, [nextn, out.error]))
            out.reasons = [*out.reasons, nextn]
        p = getattr(memory, "plan", None)
        if p is not None and p.quantization_refusal:
            # SGLang stops while reading the checkpoint's quantization config: a start-up refusal
            out = SGLangCompat(**out.model_dump())
            out.ok = False
            out.error = "; ".join(filter(None, [p.quantization_refusal, out.error]))
            out.reasons = [*out.reasons, p.quantization_refusal]
            if p.quantization_fix and p.quantization_fix != (request.quantization or ""):
                out.quantization_suggestions = [(p.quantization_fix, "the quantization class that loads this "
                                                 "checkpoint's config")]
        return out

    def _backend_compat(self, request, model: LoadedModel) -> CompatSummary:
        gpu = get_gpu(request.gpu)
        spec = self._spec(request)
        kw = {"tp_size": request.tensor_parallel_size, "speculative_algorithm": spec.get("speculative_algorithm"),
              "speculative_eagle_topk": spec.get("speculative_eagle_topk")}
        choice = sg_compat.default_backend(request.release, gpu, model.config, kv_cache_dtype=request.kv_cache_dtype,
                                           **kw)
        if request.attention_backend is None:
            old_gpu = sg_compat.below_sm75(request.release, gpu)
            if old_gpu is not None:  # SGLang stops before any backend is built
                why = f"{old_gpu.text} ({old_gpu.source})"
                return CompatSummary(release=request.release, gpu=gpu.name, ok=False, auto_selected=choice.backend,
                                     error=why, reasons=[why])
            return CompatSummary(release=request.release, gpu=gpu.name, ok=True, auto_selected=choice.backend,
                           reasons=[f"{choice.reason} ({choice.source})"])
        v = sg_compat.check_backend(request.release, gpu, model.config, request.attention_backend,
                                    kv_cache_dtype=request.kv_cache_dtype, page_size=request.page_size, **kw)
        reasons = [f"{getattr(r, 'text', r)} ({getattr(r, 'source', '')})" for r in v.reasons]
        ok = {"works": True, "adjusted": True, "no": False, "depends": None}[v.verdict]
        return CompatSummary(release=request.release, gpu=gpu.name, ok=ok, requested_backend=request.attention_backend,
                       auto_selected=choice.backend, runs_as=v.runs_as, error="; ".join(reasons) if ok is False else None,
                       auto_conditions=reasons if ok is None else [], reasons=reasons)

    def launch_argv(self, request, model: LoadedModel) -> list[str]:
        """``python -m sglang.launch_server --model-path ... --tp-size ...`` with SGLang's resolved defaults
        pinned, so the command reproduces the plan."""
        p = self.memory(request, model).plan
        spec = request.speculative_config
        # a release that loads the config only through the repository's own class is started with
        # --trust-remote-code: the verdict's condition says so (depends), and the command is the one it describes
        check = check_config(request.release, model.config)
        return launch_argv(p, model.repo_id, draft_model_path=spec.model if spec else None,
                           kv_cache_dtype=request.kv_cache_dtype if request.kv_cache_dtype != "auto" else None,
                           quantization=request.quantization, max_running_requests=self._max_running(request),
                           trust_remote_code=bool(check and not check.loads and check.remote_class)
                           or bool(getattr(request, "trust_remote_code", False)),
                           model_override_args=request.hf_overrides.as_config() if request.hf_overrides else None,
                           allow_longer_context=request.allow_long_max_model_len)

    def speed_kwargs(self, request) -> dict[str, Any]:
        return speed_kwargs(request)

    def _speed_input(self, request, model: LoadedModel):
        """The speed model reads the model's shapes through the memory engine's input: the same request as a
        vLLM one (same model, GPU, TP, dtypes); the speed model's SGLang efficiencies and SGLang's chain of
        ``num_speculative_tokens`` steps are applied by ``runtime="sglang"``."""
        from calculator.request import default_release
        from calculator.runtimes.vllm import VLLM

        # SGLang's own running-request cap and chunk go into the plan from its memory plan (_speed_plan), so vLLM's
        # scheduler checks of them (max_num_batched_tokens >= max_num_seqs) do not apply
        as_vllm = request.model_copy(update={"runtime": "vllm", "vllm_version": default_release(),
                                             "attention_backend": None, "block_size": None, "max_num_seqs": None})
        return VLLM().engine_input(as_vllm, model)

    def _speed_plan(self, request, model: LoadedModel, memory: SGLangMemory | None):
        """The speed model's :class:`~calculator.engine.perf.Plan`: the model's shapes from the memory engine
        (:meth:`_speed_input`), SGLang's own capacities from its plan: ``max_total_num_tokens`` as the KV cache
        the requests queue against, ``max_running_requests`` as the batch cap, ``chunked_prefill_size`` as the
        prefill chunk, its context length and whether it starts."""
        from dataclasses import replace

        from calculator.engine import perf

        if memory is None:
            memory = self.memory(request, model)
        p = memory.plan
        try:
            base = perf.plan_from_engine(self._speed_input(request, model))
        except EngineInputError as exc:
            # the context length goes into the plan from SGLang's memory plan below, which applied SGLang's own rule
            # for one above the model's (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN), not vLLM's
            if exc.field == "max_model_len" and request.max_model_len is not None:
                base = perf.plan_from_engine(self._speed_input(request.model_copy(update={"max_model_len": None}),
                                                               model))
            elif exc.field == "model" and p.swa_pool is not None and request.speculative_config is None:
                # the vLLM engine does not size this hybrid SWA model's KV (MiMo-V2's own SWA heads and V width):
                # SGLang's plan has every figure the speed model reads from it
                base = _swa_speed_base(request, model, p, perf)
            else:
                raise
        if p.swa_pool is not None:
            # SGLang's own KV rows per layer type (its SWAKVPool sub-pools); the speed model reads the SWA / chunked
            # layers' min(context, window) tokens, the window from the config's layer kinds
            base = replace(base, kv_by_layer_type=swa_layer_kv(p))
        spec = self._spec(request)
        if spec.get("speculative_eagle_topk", 1) > 1:  # a tree: the target verifies num_draft_tokens per request
            base = replace(base, spec_k=spec["speculative_num_draft_tokens"])
        # SGLang starts with a pool smaller than one --context-length request (it caps each request at the pool,
        # tp_worker.py max_req_len), so the speed stands there; not when it does not start (an empty pool, a start-up
        # error)
        starts = p.max_total_num_tokens > 0 and p.does_not_start is None
        base = replace(base, fits=starts, kv_cache_tokens=p.max_total_num_tokens, max_model_len=p.context_length,
                       max_concurrency=memory.max_concurrency,
                       resolved={**base.resolved, "max_num_seqs": max(1, p.max_running_requests),
                                 "max_num_batched_tokens": p.chunked_prefill_size})
        # --dp-size launches that many schedulers (data_parallel_controller); with --enable-dp-attention they share the
        # MoE layers and step through them together
        # the plan's dp_size: SGLang may override the flag (0.4.3.post4 sets dp_size = tp_size with DP attention)
        base = replace(base, decode_graph_max_bs=p.cuda_graph_max_bs, dp=max(1, p.dp_size or 1),
                       dp_lockstep=bool(p.enable_dp_attention) and max(1, p.dp_size or 1) > 1,
                       # piecewise graphs split at the registered split ops: attention (layers/radix_attention.py
                       # unified_attention_with_output) and, with TP, the two all-reduces of a layer
                       # (distributed/parallel_state.py inplace_all_reduce), sglang 0.5.10.post1
                       prefill_graph_max_tokens=p.piecewise_cuda_graph_max_tokens,
                       graph_split_ops_per_layer=(1 + (2 if request.tensor_parallel_size > 1 else 0))
                       if p.piecewise_cuda_graph else 0.0)
        return with_kernel_count(base, config=model.config, gpu=get_gpu(request.gpu), tp=request.tensor_parallel_size,
                                 backend=p.attention_backend or "", quant_config=model.quant_config)

    def speed(self, request, model: LoadedModel, memory):
        """TTFT / ITL / tok/s with SGLang's efficiencies (:func:`calculator.engine.perf.estimate_speed_plan`,
        ``runtime="sglang"``) on SGLang's own KV pool, running-request cap and prefill chunk (:meth:`_speed_plan`),
        with :data:`SPEED_WARNING` (how far these terms were off on public SGLang runs)."""
        from calculator.engine import perf

        memory = memory or self.memory(request, model)
        plan = self._speed_plan(request, model, memory)
        # a pool smaller than the context caps each request first (memory.request_cap, SGLang's max_req_len)
        if memory.request_cap is not None:
            workload_fits(request, memory.request_cap, f"SGLang's request cap (max_req_len = max_total_num_tokens - 1, "
                                                       f"the KV pool of {memory.kv_cache_tokens:,} tokens)")
        workload_fits(request, plan.max_model_len, "SGLang's --context-length")
        mismatched = memory.plan.draft_mismatch  # the plan's own finding (memory.py, said in its notes)
        if mismatched and request.acceptance_rate is None and request.acceptance_length is None:
            raise EngineInputError("speculative_config", f"{mismatched}, which the checkpoint's MLA attention weights do "
                                   "not fit: no public acceptance figure stands for such a "
                                   "draft, so the speculative speed is not predicted; give --acceptance-length as SGLang "
                                   "logs it (accept len), or --sglang-version 0.5.23, which builds the MLA draft")
        result = perf.estimate_speed_plan(plan, runtime="sglang", **self._tree(request), **self.speed_kwargs(request))
        if request.speculative_config is not None:
            lifted = self._max_running(request) if request.max_num_seqs is None else None
            if lifted is not None:
                default = spec_max_running(request.release)
                result.warnings.append(
                    f"SGLang resets --max-running-requests to {default} for speculative decoding when it is not given "
                    f"(server_args.py); the command passes --max-running-requests {lifted} so the speculative server "
                    f"runs all {lifted} clients per replica at once, as the plain server does, and the speedup "
                    f"compares the two at equal running requests; without the flag {lifted - default} of them would "
                    "queue (their wait in TTFT)")
            self._against_plain_server(request, model, memory, result)
            self._spec_overlap_note(request, model, result)
            self._spec_moe_tp_note(request, model, result)
        if plan.decode_graph_max_bs is not None and result.effective_concurrency > plan.decode_graph_max_bs:
            result.warnings.append(f"{result.effective_concurrency} requests decode at once, more than --cuda-graph-max-bs "
                                   f"{plan.decode_graph_max_bs}: SGLang runs such batches without CUDA graphs (eager), "
                                   "priced at the eager prefill's launch time per kernel (assumed)")
        result.warnings.append(SPEED_WARNING)
        return result

    @staticmethod
    def _spec_moe_tp_note(request, model: LoadedModel, result) -> None:
        """Add :data:`SGLANG_MOE_TP_EAGLE_WARNING` to an EAGLE / EAGLE-3 answer on an MoE target at TP > 1
        (:func:`moe_tp_eagle_warned`), and raise its ``slowdown`` from ``unlikely`` to ``possible``: public runs of such
        deployments were slower than plain decoding where the model predicts a gain, for a cause it does not model."""
        from calculator.engine.arch import parse_config

        spec = request.speculative_config
        if spec is None or result.spec is None:
            return
        if not moe_tp_eagle_warned(spec.method, request.tensor_parallel_size, parse_config(model.config).num_experts):
            return
        result.warnings.append(SGLANG_MOE_TP_EAGLE_WARNING)
        result.sources["speculative.moe_tp"] = (
            "not modelled: public SGLang EAGLE-3 runs on an MoE target at TP 2 / 4 were slower than predicted "
            "(benchmarks/data/spec_extra_public.json sd-extra-009..017); calculator/runtimes/sglang/runtime.py "
            "SGLANG_MOE_TP_EAGLE_WARNING says what SGLang 0.5.7's source was checked for")
        if result.spec.slowdown == "unlikely":
            result.spec.slowdown = "possible"

    @staticmethod
    def _spec_overlap_note(request, model: LoadedModel, result) -> None:
        """Say whether the release runs the EAGLE family under its overlap scheduler (:func:`.releases.spec_overlap`):
        the speculative host-time terms (``spec_step_overhead_ms``, ``spec_cpu_ms_per_request`` of the SGLang row) were
        fitted on SGLang v0.4.4, where speculation turns that scheduler off. Where the release keeps it on (0.5.23 on a
        GPU), the hidden share of that host time is not modelled: a warning says the speculative step may be shorter
        than shown; elsewhere the source says the case is the fitted one. NGRAM keeps its own CPU-proposer terms."""
        from calculator.engine import perf

        if request.speculative_config is None or request.speculative_config.method == "ngram" or result.spec is None:
            return
        archs = model.config.get("architectures") or [None]
        on, where = spec_overlap(request.release, archs[0])
        eff = perf.get_efficiency(get_gpu(request.gpu).name, "sglang")
        terms = (f"{eff.spec_step_overhead_ms:g} ms per speculative step + {eff.spec_cpu_ms_per_request:g} ms per "
                 "running request")
        if on:
            result.warnings.append(
                f"SGLang {request.release} runs speculative decoding under its overlap scheduler ({where}): the host "
                f"schedules the next step while the GPU runs this one. The speculative host-time terms here ({terms}) "
                "were fitted on SGLang v0.4.4 with that scheduler off, and how much of them it hides is not modelled: "
                "the speculative step may be shorter, and the speedup higher, than shown (releases up to 0.5.10.post1 "
                "turn it off, as fitted)")
            result.sources["speculative.overlap_schedule"] = f"on: {where}; host-time terms as fitted with it off"
        else:
            result.sources["speculative.overlap_schedule"] = (
                f"off ({where}): the host time of each step is exposed, as in the SGLang v0.4.4 runs the terms "
                f"({terms}) were fitted on")

    def _against_plain_server(self, request, model: LoadedModel, memory, result) -> None:
        """Set the speculative answer against the plain server as a user would deploy it (the same request without
        ``--speculative-config``) where speculation changes the server itself: from 0.5.10 SGLang turns the piecewise
        prefill CUDA graphs off for speculative decoding (server_args.py ``_handle_piecewise_cuda_graph``), so the
        speculative server's prompts launch eagerly where the plain server's replay graphs. The figures "without
        speculation" become the plain server's and the speedup TPOT plain / TPOT speculative (its range scaled
        alike), with a note; a TTFT that rises more than 10 % gets the stop sign. (Speculation's cap on running
        requests is lifted in the command, :meth:`_max_running`, so both run as many requests at once.)"""
        from calculator.engine import perf

        plain_req = request.model_copy(update={"speculative_config": None, "speculative_eagle_topk": None,
                                               "speculative_num_draft_tokens": None, "acceptance_rate": None,
                                               "acceptance_length": None})
        plain_mem = self.memory(plain_req, model)
        spec_mem = memory or self.memory(request, model)
        if not (plain_mem.plan.piecewise_cuda_graph and not spec_mem.plan.piecewise_cuda_graph):
            return
        plain = perf.estimate_speed_plan(self._speed_plan(plain_req, model, plain_mem), runtime="sglang",
                                         **self.speed_kwargs(plain_req))
        spec = result.spec
        before = (result.ttft_ms, result.output_tokens_per_s, result.itl_ms)
        if all(abs(a - b) <= 0.005 * max(abs(b), 1e-9) for a, b in
               zip((plain.ttft_ms, plain.output_tokens_per_s, plain.itl_ms), before)):
            return  # the graphs change nothing here (prompts of one pass, launch-bound or not): no note to make
        result.ttft_ms, result.itl_ms, result.output_tokens_per_s = plain.ttft_ms, plain.itl_ms, plain.output_tokens_per_s
        note = ("against the plain server as deployed: speculative decoding turns SGLang's piecewise prefill CUDA "
                "graphs off (server_args.py _handle_piecewise_cuda_graph), so its prompts launch eagerly where the "
                f"plain server's replay graphs. The plain server: {plain.output_tokens_per_s:,.0f} output tok/s, TPOT "
                f"{plain.itl_ms:,.1f} ms, TTFT {plain.ttft_ms:,.0f} ms (the speculative server's own run without "
                f"drafts: {before[1]:,.0f} tok/s, TTFT {before[0]:,.0f} ms)")
        if spec is not None and spec.itl_ms and spec.speedup:
            # the speedup against the speculative server's own base, rescaled to the plain server's TPOT (exactly plain
            # TPOT / speculative TPOT, without the rounding of either)
            new = spec.speedup * plain.itl_ms / before[2]
            factor = new / spec.speedup
            spec.speedup = round(new, 3)
            spec.speedup_low = round(spec.speedup_low * factor, 3) if spec.speedup_low is not None else None
            spec.speedup_high = round(spec.speedup_high * factor, 3) if spec.speedup_high is not None else None
            spec.slowdown = perf.slowdown_level(spec.speedup, spec.speedup_low)
            # the slowdown stop sign says the rescaled figures (it was written against the speculative server's own base)
            result.warnings[:] = [w for w in result.warnings if not w.startswith(perf.SLOWDOWN_PREFIXES)]
            result.warnings.extend(perf.slowdown_warnings(spec.mean_acceptance_length, spec.speedup, spec.speedup_low,
                                                          spec.speedup_high))
            note += "; the speedup is TPOT plain / TPOT with speculation"
            if spec.ttft_ms > plain.ttft_ms * 1.10:
                result.warnings.append(f"stop sign: TTFT rises from {plain.ttft_ms:.1f} ms on the plain server to "
                                       f"{spec.ttft_ms:.1f} ms with speculation")
        result.warnings.append(note)

    def _tree(self, request) -> dict[str, Any]:
        """The speed model's tree arguments: SGLang's --speculative-num-steps and --speculative-eagle-topk."""
        spec = self._spec(request)
        return {"speculative_num_steps": spec.get("speculative_num_steps"),
                "speculative_eagle_topk": spec.get("speculative_eagle_topk") or 1}

    @property
    def speed_keys(self) -> tuple[str, ...]:
        """The speed keys of the JSON answer, each always present (:data:`calculator.engine.perf.SPEED_KEYS`)."""
        from calculator.engine.perf import SPEED_KEYS

        return SPEED_KEYS

    def speed_fields(self, request, model: LoadedModel, memory, speed=None) -> dict[str, Any]:
        """The speed keys of the JSON answer, from ``speed`` (this request's :meth:`speed`) when given."""
        from calculator.engine import perf

        return perf.result_fields(speed if speed is not None else self.speed(request, model, memory))
