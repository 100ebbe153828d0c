"""vLLM behind the runtime seam: the memory engine (:mod:`calculator.engine`), the compatibility rules
extracted from each release (:mod:`compat`), ``vllm serve`` and the speed model.

Releases: those with compatibility data extracted from their wheel (``compat/data``); the memory rules
of each are in :mod:`calculator.engine.runtime`.
"""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from calculator.engine import EngineInput, EngineInputError, EstimateResult, SpeculativeConfig, estimate
from calculator.runtimes.base import LoadedModel, speed_kwargs, workload_fits
from calculator.runtimes.vllm.serve import serve_argv
# vLLM has no Apple GPU platform: compat's sentence (check_compat and the /compat/ page say it too)
from compat.checks import APPLE_PLATFORM_SOURCE, apple_gpu_refusal  # noqa: F401

#: below this many GiB outside --gpu-memory-utilization a GeForce card's display may stop vLLM (VLLM.memory)
DISPLAY_HEADROOM_GIB = 1.0


def registry_gap(request, model: LoadedModel):
    """The :class:`calculator.engine.layers.RegistryGap` of the model on ``request.release`` (the registry rows read in
    each release's own ``registry.py``, exact to the patch), or None. The architecture is the config's first
    ``architectures`` name, as the memory engine reads it."""
    from calculator.engine.layers import registry_gap as gap_of
    from calculator.engine.runtime import parse_version

    c = model.config or {}
    text = c.get("text_config") if isinstance(c.get("text_config"), dict) else {}
    archs = c.get("architectures") or text.get("architectures") or []
    if isinstance(archs, str):
        archs = [archs]
    return gap_of(str(archs[0]), parse_version(request.release)) if archs else None


def registry_refusal(request, model: LoadedModel) -> str | None:
    """vLLM's refusal (its words, with the first release that registers the class) when ``request.release`` does not
    build the model's class: the compat data answering the release (:func:`compat.architectures.check_architecture`,
    ``ok`` False); for a patch answered by another patch's data that registers the class, :func:`registry_gap` (exact
    to the patch). None when it builds it, or may through its Transformers backend, or no data answers the release."""
    from compat import extract
    from compat.architectures import check_architecture

    from calculator.request import compat_release

    data_release = compat_release(request.release)
    if data_release is None or not model.config:
        gap = registry_gap(request, model)
        return gap.message if gap is not None else None
    arch = check_architecture(extract.load(data_release), model.config)
    if data_release != request.release and arch.status in ("registered", "normalized"):
        # the data of another patch registers it; the row read in this very release may not
        gap = registry_gap(request, model)
        if gap is not None:
            return gap.message
    return arch.message if arch.ok is False else None


def v0_fallback(request, model: LoadedModel) -> tuple[str, str] | None:
    """``(field, message)`` when ``request.release`` is a 0.9 / 0.10 release that runs this configuration on its V0
    engine (``EngineArgs._is_v1_supported_oracle``, :func:`compat.legacy.v0_fallback`): the memory engine models the
    V1 engine only, so no figures are given. None otherwise."""
    from compat.legacy import v0_fallback as fallback_of

    from calculator.request import compat_release

    data_release = compat_release(request.release)
    if data_release is None or not model.config:
        return None
    spec = (request.speculative_config.model_dump(exclude_none=True)
            if request.speculative_config is not None else None)
    if spec:
        spec = {k: v for k, v in spec.items() if k in ("method", "model", "num_speculative_tokens")}
    return fallback_of(model.config, request.gpu, data_release, request.kv_cache_dtype, spec)


def _with_registry_gap(report, gap, data_release: str):
    """``report`` (from the compat data of ``data_release``) with the registry's refusal of ``gap``: ``ok`` False,
    vLLM's words as the error, and the first release that registers the class (:attr:`ArchitectureCheck.first_release`,
    which the verdict offers)."""
    from compat.architectures import ArchitectureCheck

    note = (f"the compatibility data of vLLM {data_release} answers {gap.release} for the attention backends; its "
            f"registry lists {gap.architecture}, but {gap.release}'s own does not ({gap.architecture} is from "
            f"{gap.first_release}: {gap.source})")
    arch = ArchitectureCheck(architectures=report.architecture.architectures, status="unsupported", ok=False,
                             source=gap.source, message=gap.message, first_release=gap.first_release,
                             sources=[gap.source], notes=[note])
    notes = [*report.notes, note] + ([f"the attention backend check alone: {report.error}"] if report.error else [])
    return report.model_copy(update={"ok": False, "error": gap.message, "architecture": arch, "notes": notes})


#: releases whose memory rules were read from their own wheel beside the one patch per minor the compat data is
#: extracted from (calculator/engine/runtime.py's module docstring: the patches around a switch)
MEMORY_RULES_ALSO_READ = ("0.9.0", "0.9.1", "0.11.0", "0.11.1", "0.20.0", "0.20.1")

KV_CONCURRENCY_PREFIX = "The KV cache holds "


def kv_concurrency_warning(max_concurrency: float, concurrency: int | None, max_model_len: int) -> str | None:
    """The warning when the KV cache holds fewer full-length requests (``max_model_len`` tokens each; vLLM's
    "Maximum concurrency for N tokens per request" line) than the ``concurrency`` asked, or ``None`` (not asked, or
    they fit). Shorter requests may all run: the speed answer says how many of the workload's run at once."""
    if not concurrency or max_concurrency >= concurrency:
        return None
    return (f"{KV_CONCURRENCY_PREFIX}{max_concurrency:.2f} full-length requests ({max_model_len:,} tokens each, vLLM's "
            f"\"Maximum concurrency\" line), fewer than your {concurrency:,}: the rest wait in the queue (or are "
            "preempted) unless they are shorter than max_model_len")


#: where vLLM's worker refuses bfloat16 below compute capability 8.0, per release read (the message is the same in all)
BF16_CHECK_SOURCE = ("vllm/v1/worker/gpu_worker.py:391-408 _check_if_gpu_supports_dtype, called at :135 (0.9.2); "
                     "vllm/platforms/cuda.py:564-581 check_if_supports_dtype, called from vllm/v1/worker/gpu_worker.py:170 "
                     "init_device (0.10.2); cuda.py:426-444, gpu_worker.py:211 (0.14.1); cuda.py:638-656, "
                     "gpu_worker.py:498 (0.33.0)")


def bf16_refusal(gpu, dtype: str | None) -> str | None:
    """vLLM's start-up refusal of ``--dtype bfloat16`` on a GPU below compute capability 8.0 (T4, V100: the worker
    checks the model dtype against the device before it measures memory, :data:`BF16_CHECK_SOURCE`), in vLLM's
    words, or ``None``. ``dtype`` is the resolved one (``--dtype auto`` already became float16 there, as vLLM's
    ``_resolve_auto_dtype`` does). Only GPUs with a numeric capability below 8.0 are refused (every AMD Instinct
    the catalog has reports 9.x under ROCm, whose platform has the same check)."""
    from calculator.engine.memory import supports_bf16

    if dtype not in ("bfloat16", "bf16") or supports_bf16(gpu):
        return None
    cap = gpu.capability_tuple
    return (f"Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {gpu.name} GPU has "
            f"compute capability {cap[0]}.{cap[1]}. You can use float16 instead by explicitly setting the `dtype` "
            f"flag in CLI, for example: --dtype=half. ({BF16_CHECK_SOURCE})")


EAGER_SPEED_WARNING = (
    "--enforce-eager: the speed figures assume CUDA graphs, as vLLM runs by default: the efficiency they use is fitted "
    "on public vLLM runs served that way (none of ../shared/cases/serving_speed_benchmarks.json's records sets "
    "--enforce-eager; calculator/engine/perf.py's vLLM row). Eager mode launches every kernel of every decode step "
    "from Python instead of replaying a graph, which is slower, most at small batches, and is not modelled: read the "
    "TPOT and tok/s as a best case (a validation run with --enforce-eager calibrates them)")


def eager_speed_warning(request, gpu, efficiency_label: str) -> str | None:
    """:data:`EAGER_SPEED_WARNING` when ``request`` asks ``--enforce-eager`` on a GPU and the speed's efficiency is
    not a calibration (a calibration applies only to runs of its own kernel path, eager mode included:
    :data:`calculator.engine.perf.KERNEL_PATH_KEYS`, so a calibrated eager estimate was measured eager). ``None``
    otherwise, and on vLLM's CPU build, whose row was fitted on --enforce-eager runs."""
    if not request.enforce_eager or gpu.is_cpu or efficiency_label == "calibrated":
        return None
    return EAGER_SPEED_WARNING


class VLLM:
    """vLLM (V1 engine)."""

    name = "vllm"
    label = "vLLM"

    def releases(self) -> tuple[str, ...]:
        from calculator.request import covered_releases

        return covered_releases()

    def default_release(self) -> str:
        return self.releases()[-1]

    # -- memory --------------------------------------------------------------------------------------
    def engine_input(self, request, model: LoadedModel) -> EngineInput:
        """The memory engine's input for ``request`` on ``model``.

        Raises:
            EngineInputError: a value the engine's schema refuses (named by field).
        """
        spec = None
        if request.speculative_config is not None:
            spec = SpeculativeConfig(**request.speculative_config.model_dump(exclude_none=True))
        draft = model.draft
        try:
            return EngineInput(
                hf_config=model.config, quant_config=model.quant_config, weights=model.weights,
                model_label=model.repo_id, model_source=model.source,
                draft_hf_config=draft.config if draft else None, draft_weights=draft.weights if draft else None,
                gpu=request.gpu, gpu_memory_gib=request.gpu_memory_gib,
                tensor_parallel_size=request.tensor_parallel_size, gpus_per_node=request.gpus_per_node,
                pipeline_parallel_size=request.pipeline_parallel_size, max_model_len=request.max_model_len,
                gpu_memory_utilization=request.gpu_memory_utilization, dtype=request.dtype,
                quantization=request.quantization, kv_cache_dtype=request.kv_cache_dtype,
                block_size=request.block_size, max_num_seqs=request.max_num_seqs,
                max_num_batched_tokens=request.max_num_batched_tokens, enforce_eager=request.enforce_eager,
                allow_long_max_model_len=request.allow_long_max_model_len,
                vllm_version=request.release, speculative_config=spec,
                attention_backend=request.attention_backend, kv_cache_memory_bytes=request.kv_cache_memory_bytes,
                pp_layer_partition=request.pp_layer_partition, data_parallel_size=request.data_parallel_size,
                enable_expert_parallel=request.enable_expert_parallel,
                gpu_memory_in_use_gib=request.gpu_memory_in_use_gib,
            )
        except ValidationError as exc:
            err = exc.errors()[0]
            raise EngineInputError(str(err["loc"][0]) if err.get("loc") else "model", err["msg"]) from None

    def memory(self, request, model: LoadedModel) -> EstimateResult:
        """What vLLM logs at start-up, per GPU (:func:`calculator.engine.estimate`), with a warning when a GeForce
        card would have to be all but empty: vLLM refuses to start when free memory is below
        ``--gpu-memory-utilization`` x total (:func:`calculator.engine.runtime.free_memory_check`; not 0.34 with its
        extensible KV cache, which skips that check), and a card that drives a display has some taken (0.55 GiB under
        a WSL2 desktop in the public SGLang log benchmarks/data/sglang_extra_logs.json sgx-003).

        A release whose model registry lacks the class is sized all the same (its rules applied to the layers; the
        verdict says vLLM stops, :meth:`compat`). A 0.9 / 0.10 configuration that vLLM runs on its V0 engine is
        refused (:func:`v0_fallback`): the engine models the V1 engine only. Where the engine refuses the model (a layer it does not model, or
        one no rule of this release sizes), the refusal stays and adds the registry's answer
        (:func:`registry_refusal`) when the release lacks the class: vLLM would stop there first.

        An Apple GPU is refused (:func:`apple_gpu_refusal`): vLLM has no Metal backend.

        Raises:
            EngineInputError: the engine's refusal (:func:`calculator.engine.estimate`), a V0-engine configuration
                (:func:`v0_fallback`), or an Apple GPU (field ``gpu``), named by field.
        """
        from calculator.engine.gpus import get_gpu

        apple = apple_gpu_refusal(get_gpu(request.gpu))
        if apple is not None:
            raise EngineInputError("gpu", apple)
        fallback = v0_fallback(request, model)
        if fallback is not None:
            raise EngineInputError(*fallback)
        try:
            result = estimate(self.engine_input(request, model))
        except EngineInputError as exc:
            stop = registry_refusal(request, model)
            if stop is None or stop in exc.message:
                raise
            # no memory plan (a layer not modelled, or not on this release): the refusal stays, and says that vLLM
            # would not get that far, its model registry stops it first
            raise EngineInputError(exc.field, f"{exc.message}; and vLLM {request.release}'s model registry stops it "
                                   f"at start-up before anything is sized: {stop}") from None
        from calculator.engine.gpus import get_gpu
        from calculator.engine.runtime import ReleaseRules

        from calculator.request import compat_release

        short = kv_concurrency_warning(result.max_concurrency, request.concurrency, result.max_model_len)
        if short is not None:
            result.warnings.append(short)
        data = compat_release(request.release)
        if data is not None and data != request.release:  # never a silent stand-in
            checks = (f"its attention-backend, quantization and model-registry checks use the data extracted from "
                      f"{data}'s wheel (one patch per minor: backends change between minors)")
            result.warnings.append(
                f"vLLM {request.release}: {checks}; its memory rules were read from its own source"
                if request.release in MEMORY_RULES_ALSO_READ else
                f"vLLM {request.release} itself was not read: {checks}, and its memory rules are those of "
                f"{'.'.join(request.release.split('.')[:2])}.x")
        gpu = get_gpu(request.gpu)
        if (gpu.kind == "consumer" and request.gpu_memory_in_use_gib is None and request.kv_cache_memory_bytes is None
                and not result.resolved.get("extensible_kv_cache")):  # 0.34's extensible KV cache skips the check
            rules = ReleaseRules.for_version(request.release)
            total = int((request.gpu_memory_gib or gpu.memory_gib) * 2**30)
            u = result.resolved.get("gpu_memory_utilization") or rules.default_gpu_memory_utilization
            spare = (total - rules.requested_memory(total, u)) / 2**30
            if spare < DISPLAY_HEADROOM_GIB:
                result.warnings.append(
                    f"--gpu-memory-utilization {u} leaves {spare:.2f} GiB of this {gpu.name} to anything else: if the "
                    "card also drives a display (a desktop, or Windows under WSL2; 0.55 GiB in a public WSL2 log), "
                    "vLLM refuses to start (\"Free memory on device ... is less than desired GPU memory "
                    "utilization\"). Give what is taken as --gpu-memory-in-use-gib, or lower the utilization.")
        return result

    def startup_errors(self, request, model: LoadedModel, memory: EstimateResult) -> list[str]:
        """vLLM's start-up refusals outside the memory plan, with its own message: bfloat16 on a GPU below compute
        capability 8.0 (:func:`bf16_refusal`, the worker's first check of its device); free memory below
        ``gpu_memory_utilization x total`` when memory is already in use (``free_memory_check``), and a
        CUDA-graph capture that needs more than the memory outside the budget in releases that do not budget
        it (``graph_capture_fits``; both in :mod:`calculator.engine.runtime`, cited there); and, for a release
        without compatibility data (no :meth:`compat` report), the model registry's refusal of a class the release
        lacks (:func:`registry_gap`), which comes first."""
        from calculator.engine.gpus import get_gpu
        from calculator.engine.runtime import ReleaseRules, free_memory_check, graph_capture_fits
        from calculator.request import compat_release

        # the model registry stops vLLM first; a release with compatibility data says so in its report (compat)
        gap = registry_gap(request, model) if compat_release(request.release) is None else None
        first = [gap.message] if gap is not None else []
        gpu = get_gpu(request.gpu)
        refused = bf16_refusal(gpu, memory.resolved.get("dtype"))
        if refused is not None:  # the worker's device setup, before the memory is measured
            first.append(refused)
        if gpu.is_cpu or request.kv_cache_memory_bytes is not None:
            return first
        rules = ReleaseRules.for_version(request.release)
        total = int((request.gpu_memory_gib or gpu.memory_gib) * 2**30)
        in_use = int((request.gpu_memory_in_use_gib or 0) * 2**30)
        if in_use > total:
            from calculator.engine.errors import EngineInputError

            raise EngineInputError("gpu_memory_in_use_gib", f"{request.gpu_memory_in_use_gib:g} GiB in use is more than "
                                   f"the GPU has ({total / 2**30:.2f} GiB on {gpu.name}); give what other processes "
                                   "take on it, as nvidia-smi shows")
        u = memory.resolved.get("gpu_memory_utilization") or rules.default_gpu_memory_utilization
        errors = first
        ok, message = free_memory_check(rules, total, in_use, u,
                                        extensible=bool(memory.resolved.get("extensible_kv_cache")))
        if not ok:
            errors.append(message)
        ok, reason = graph_capture_fits(rules, int(memory.cuda_graph_gib * 2**30), total,
                                        rules.requested_memory(total, u), in_use)
        if not ok:
            errors.append(reason)
        return errors

    # -- compatibility -------------------------------------------------------------------------------
    def compat(self, request, model: LoadedModel, memory: EstimateResult | None):
        """The model class / backend / GPU / dtype / KV dtype / release verdict (:func:`compat.checks.verdict_for`),
        for the dtype the memory engine resolved (one resolution of ``--dtype auto`` for both). The config's
        ``architectures`` are checked against the release's ``ModelRegistry`` first (:mod:`compat.architectures`:
        an unregistered class is ``ok`` False with vLLM's message, or None when its Transformers backend could
        take it). When another patch's data answers the release (0.11.0 by 0.11.2's) and that data's registry has the
        class, the registry rows read in the release itself (:func:`registry_gap`) overrule it.

        Raises:
            EngineInputError: no compatibility data answers the release, or a value the rules refuse (by field).
        """
        from compat.checks import CompatInputError, verdict_for

        from calculator.request import compat_release

        data_release = compat_release(request.release)
        if data_release is None:
            from calculator.request import covered_releases

            first = ".".join(covered_releases()[0].split(".")[:2])  # the oldest minor with extracted backends
            raise EngineInputError("vllm_version", f"no compatibility data answers vLLM {request.release}: the backend "
                                   "check is read from each release's own wheel, and releases before "
                                   f"{first} are not extracted; the check covers vLLM {first}.x and later")

        spec = None
        if request.speculative_config is not None:
            spec = {**request.speculative_config.model_dump(exclude_none=True),
                    "draft_config": model.draft.config if model.draft else None}
        dtype = memory.resolved.get("dtype", request.dtype) if memory is not None else request.dtype
        kv_cache_dtype = request.kv_cache_dtype
        if (kv_cache_dtype == "auto" and memory is not None
                and str(memory.sources.get("kv_cache_dtype", "")).startswith("auto: the checkpoint's")):
            # vLLM resolves auto from a ModelOpt checkpoint's KV scheme before it picks a backend
            # (memory.checkpoint_kv_cache_dtype): the backend check sees what the engine allocates
            kv_cache_dtype = memory.resolved["kv_cache_dtype"]
        try:
            report = verdict_for(model.config, request.gpu, dtype=dtype, kv_cache_dtype=kv_cache_dtype,
                                 block_size=request.block_size, attention_backend=request.attention_backend,
                                 speculative_config=spec, vllm_version=data_release,
                                 quant_config=model.quant_config, quantization=request.quantization)
        except CompatInputError as exc:
            raise EngineInputError(exc.field, exc.message) from None
        if report.quantization_note and memory is not None and report.quantization_note not in memory.warnings:
            # said with the answer on every surface, not only in the page's backend section
            memory.warnings.append(report.quantization_note)
        gap = registry_gap(request, model) if data_release != request.release else None
        if gap is not None and report.architecture is not None and report.architecture.status in ("registered",
                                                                                                  "normalized"):
            # the data of another patch of the minor answers this release; the registry row read in this very
            # release (calculator.engine.layers.SHAPE_RULES) says it lacks the class: vLLM stops there first
            report = _with_registry_gap(report, gap, data_release)
        return report

    # -- launch --------------------------------------------------------------------------------------
    def launch_argv(self, request, model: LoadedModel) -> list[str]:
        """``["vllm", "serve", model, "--flag", "value", ...]`` (:func:`.serve.serve_argv`), the revision pinned
        to the resolved sha when the Hub gave one. An argv list, never a shell string."""
        return serve_argv(self.engine_input(request, model), model.repo_id, model.sha or request.revision,
                          request.hf_overrides.as_config() if request.hf_overrides else None)

    # -- speed ---------------------------------------------------------------------------------------
    def speed_kwargs(self, request) -> dict[str, Any]:
        """The speed model's workload: ``vllm bench serve --dataset-name random`` defaults (1024 in, 128 out,
        1 in flight) where the request leaves them empty."""
        return speed_kwargs(request)

    def speed(self, request, model: LoadedModel, memory: EstimateResult):
        """TTFT / ITL / tok/s and speculative decoding (:func:`calculator.engine.perf.estimate_speed`), with
        :func:`eager_speed_warning` when ``--enforce-eager`` is asked (the figures assume CUDA graphs)."""
        from calculator.engine import perf
        from calculator.engine.gpus import get_gpu

        workload_fits(request, memory.max_model_len)
        result = perf.estimate_speed(self.engine_input(request, model), memory, **self.speed_kwargs(request))
        eager = eager_speed_warning(request, get_gpu(request.gpu), result.efficiency_label)
        if eager is not None:
            result.warnings.append(eager)
        return result

    @property
    def speed_keys(self) -> tuple[str, ...]:
        """The speed keys of the JSON answer, each always present (:data:`calculator.engine.perf.SPEED_KEYS`)."""
        from calculator.engine.perf import SPEED_KEYS

        return SPEED_KEYS

    def speed_fields(self, request, model: LoadedModel, memory: EstimateResult, speed=None) -> dict[str, Any]:
        """The speed keys of the JSON answer (:func:`calculator.engine.perf.speed_fields`); from ``speed`` (this
        request's :meth:`speed`, already computed) when given."""
        from calculator.engine import perf

        if speed is not None:
            return perf.result_fields(speed)
        workload_fits(request, memory.max_model_len)
        kw = self.speed_kwargs(request)
        fields = perf.speed_fields(self.engine_input(request, model), memory, kw["prompt_len"], kw["output_len"],
                                 kw["concurrency"], kw["acceptance_rate"], workload=kw["workload"],
                                 temperature=kw["temperature"], acceptance_length=kw["acceptance_length"],
                                 arrival=kw["arrival"], request_rate=kw.get("request_rate"),
                                 num_prompts=kw.get("num_prompts"), random_range_ratio=kw["random_range_ratio"])
        from calculator.engine.gpus import get_gpu

        eager = eager_speed_warning(request, get_gpu(request.gpu), fields.get("efficiency_label") or "assumed")
        if eager is not None and fields.get("speed_warnings") is not None:
            fields["speed_warnings"] = [*fields["speed_warnings"], eager]
        return fields
