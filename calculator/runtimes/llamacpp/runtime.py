"""llama.cpp (``llama-server``) and Ollama behind the runtime seam (:class:`calculator.runtimes.base.Runtime`).

The model's shapes come from its GGUF header (``gguf_file``, read with ranged requests) when given: then the
model buffers are exact per file. Without one, the attention shapes come from ``config.json`` as llama.cpp's
converter writes them (:func:`.gguf_meta.meta_from_hf_config`), so the KV cache is exact but the model
buffers are not modelled, and the verdict says so (``depends``). Compute buffers are not modelled either.

Ollama: its defaults (``num_ctx`` by VRAM, ``OLLAMA_NUM_PARALLEL``, ``OLLAMA_KV_CACHE_TYPE``, flash attention)
from :func:`.memory.ollama_defaults`; llama.cpp is asked for ``num_ctx x parallel`` cells.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import GPU, get_gpu, metal_working_set_bytes
from calculator.runtimes.base import CompatSummary, LoadedModel, speed_kwargs

from .gguf_meta import GGUFError, meta_from_hf_config, read_gguf_from_hub
from .launch import launch_argv, ollama_config
from .memory import MiB, LlamaCppPlan, NotModelled, ollama_defaults, plan

GiB = 2**30


def device_of(gpu: GPU) -> str:
    """llama.cpp's backend for a catalog device: Metal on Apple, CUDA on NVIDIA, CPU for the CPU row; AMD
    and Intel GPUs are refused (ROCm / Vulkan / SYCL buffers are not modelled)."""
    if gpu.is_cpu:
        return "CPU"
    if gpu.vendor == "apple":
        return "Metal"
    if gpu.vendor == "nvidia" or (gpu.kind == "custom" and gpu.vendor in (None, "", "nvidia")):
        return "CUDA"
    raise EngineInputError("gpu", f"llama.cpp on {gpu.vendor} GPUs (ROCm, Vulkan, SYCL buffers) is not modelled; "
                           "NVIDIA (CUDA), Apple (Metal) and CPU are")


def budget_bytes(gpu: GPU) -> tuple[int, str]:
    """What llama.cpp may allocate on the device: Metal's ``recommendedMaxWorkingSetSize`` on a Mac, else the
    device memory."""
    if gpu.vendor == "apple":
        return metal_working_set_bytes(gpu), "Metal recommendedMaxWorkingSetSize (calculator.engine.gpus)"
    return gpu.memory_bytes, gpu.memory_source


class LlamaCppMemory(BaseModel):
    """llama.cpp's plan with the fields the verdict reads; ``plan`` holds every logged buffer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    plan: LlamaCppPlan
    fits: bool
    reason: str | None = None
    condition: str | None = None
    kv_cache_tokens: int
    max_concurrency: float
    max_model_len: int
    estimated_max_model_len: int | None = None
    resolved: dict[str, Any]
    gpu: str
    release: str
    device_budget_mib: float
    device_used_mib: float | None
    kv_cache_mib: float
    model_buffer_mib: dict[str, float | None]
    ollama: dict[str, Any] | None = None

    def rows(self) -> list[tuple[str, Any, str]]:
        """``(label, value, source)`` rows of what llama.cpp logs, for the page."""
        p = self.plan
        rows: list[tuple[str, Any, str]] = [(line, "", "predicted log line") for line in p.log_lines()]
        for b in p.buffers:
            if b.bytes is None:
                rows.append((f"{b.kind} buffer ({b.buft})", "not modelled", b.note or b.source))
        if not any(b.kind == "model" for b in p.buffers):
            rows.append(("model buffers", "not modelled", "no GGUF file given: the tensor table is needed"))
        rows.append(("device budget (MiB)", round(self.device_budget_mib, 2), "catalog / Metal working set"))
        return rows

    def to_json(self) -> dict[str, Any]:
        """What llama.cpp logs, per device: ``kv_cache_mib``, ``model_buffer_mib``, ``compute_buffer_mib``
        (``None``: not modelled), the ``llama_kv_cache`` / buffer log lines, with sources."""
        p = self.plan
        out = {"runtime_release": self.release, "gpu": self.gpu, "fits": self.fits, "reason": self.reason,
               "kv_cache_mib": round(self.kv_cache_mib, 2), "model_buffer_mib": self.model_buffer_mib,
               "compute_buffer_mib": None, "kv_cache_tokens": self.kv_cache_tokens, "n_ctx": p.n_ctx,
               "n_seq_max": p.n_seq_max, "max_model_len": self.max_model_len, "max_concurrency": self.max_concurrency,
               "device_budget_mib": round(self.device_budget_mib, 2), "device_used_mib": self.device_used_mib,
               "log_lines": p.log_lines(), "kv_caches": [c.model_dump() for c in p.kv_caches],
               "buffers": [b.model_dump() for b in p.buffers], "notes": p.notes, "resolved": self.resolved,
               "ollama": self.ollama,
               "sources": {c.name: c.source for c in p.kv_caches} | {f"{b.kind} {b.buft}": b.source for b in p.buffers}}
        return out


class LlamaCpp:
    """llama.cpp's ``llama-server``."""

    name = "llama.cpp"
    label = "llama.cpp"

    def releases(self) -> tuple[str, ...]:
        from .memory import RELEASES

        return RELEASES

    def default_release(self) -> str:
        return self.releases()[0]

    # -- model ---------------------------------------------------------------------------------------
    def meta(self, request, model: LoadedModel):
        """The GGUF header of ``gguf_file`` (Hub, ranged reads) or the config-derived attention metadata."""
        if request.gguf_file:
            try:
                return read_gguf_from_hub(model.repo_id, request.gguf_file, model.sha or request.revision)
            except GGUFError as exc:
                raise EngineInputError("gguf_file", str(exc)) from None
            except Exception as exc:  # the metadata layer's errors carry a sentence
                raise EngineInputError("gguf_file", getattr(exc, "message", str(exc))[:300]) from None
        try:
            return meta_from_hf_config(model.config, source=model.source)
        except GGUFError as exc:
            raise EngineInputError("model", str(exc)) from None

    def settings(self, request, gpu: GPU) -> dict[str, Any]:
        """``n_ctx``, ``n_seq_max``, cache types, flash attention: the request's, else llama-server's defaults
        (``-c`` the model's training context, ``-np 1``, f16, auto), for Ollama its defaults."""
        out = {"n_ctx": request.max_model_len or 0, "n_seq_max": request.parallel or 1,
               "cache_type_k": request.cache_type_k or "f16", "cache_type_v": request.cache_type_v or "f16",
               "flash_attn": request.flash_attn or "auto", "ollama": None}
        return out

    def memory(self, request, model: LoadedModel) -> LlamaCppMemory:
        gpu = get_gpu(request.gpu)
        device = device_of(gpu)
        meta = self.meta(request, model)
        st = self.settings(request, gpu)
        try:
            p = plan(meta, n_ctx=st["n_ctx"], n_seq_max=st["n_seq_max"], kv_unified=request.kv_unified,
                     cache_type_k=st["cache_type_k"], cache_type_v=st["cache_type_v"], flash_attn=st["flash_attn"],
                     n_gpu_layers=request.n_gpu_layers if request.n_gpu_layers is not None else -1,
                     swa_full=request.swa_full, device=device, release=request.release)
        except NotModelled as exc:
            raise EngineInputError(exc.field, f"not modelled: {exc}") from None
        except ValueError as exc:
            text = str(exc)
            field = text.split(":")[0].split(" ")[0] if ":" in text else "model"
            field = field if field.isidentifier() else "model"
            raise EngineInputError(field, text.removeprefix(f"{field}:").strip()) from None
        budget, _ = budget_bytes(gpu)
        kv = p.kv_bytes
        dev_buffers = [b for b in p.buffers if b.buft not in ("CPU", "CPU_Mapped", "CPU_REPACK")]
        unknown = [b for b in dev_buffers if b.bytes is None and b.kind != "compute"] or ([] if meta.tensors else ["model"])
        model_mib = {b.buft: (round(b.bytes / MiB, 2) if b.bytes is not None else None)
                     for b in p.buffers if b.kind == "model"}
        used = None if unknown else sum(b.bytes for b in dev_buffers if b.bytes) + (kv if device != "CPU" else 0)
        cells = p.n_ctx
        fits, reason, condition = True, None, None
        if used is None and device != "CPU":
            # Without the GGUF's tensor table the model buffers are unknown, but not unbounded below: no GGUF type
            # stores fewer than IQ1_S's 1.5625 bits per weight (ggml-common.h block_iq1_s: 50 B per 256 weights).
            try:
                from calculator.engine.arch import parse_config

                params = parse_config(model.config).params.total
            except EngineInputError:
                params = 0
            n_gpu = request.n_gpu_layers
            on_gpu = 1.0 if n_gpu in (None, -1) else min(1.0, max(n_gpu, 0) / max(meta.n_layer_all, 1))
            floor = int(params * on_gpu * 50 / 256) + kv
            if floor > budget:
                fits = False
                reason = (f"even at the smallest GGUF type (IQ1_S, 1.5625 bits per weight) the offloaded weights and the "
                          f"{kv / GiB:.2f} GiB KV cache need at least {floor / GiB:.2f} GiB on the {device} device, "
                          f"more than its {budget / GiB:.2f} GiB")
        if not fits:
            pass  # the floor above already decided it
        elif used is not None and used > budget:
            fits = False
            reason = (f"llama.cpp would allocate {used / GiB:.2f} GiB on the {device} device (model buffers + KV cache, "
                      f"compute buffers not counted), more than its {budget / GiB:.2f} GiB")
        elif used is None:
            condition = ("the model buffers fit beside the KV cache: give gguf_file (the .gguf file) for exact model "
                         "buffers; compute buffers are not modelled")
        else:
            condition = (f"llama.cpp's compute buffers (not modelled) fit in the {(budget - used) / GiB:.2f} GiB left on "
                         "the device")
        return LlamaCppMemory(plan=p, fits=fits, reason=reason, condition=condition, kv_cache_tokens=cells,
                              max_concurrency=float(p.n_seq_max), max_model_len=p.n_ctx_seq, gpu=gpu.name,
                              release=request.release, device_budget_mib=budget / MiB,
                              device_used_mib=None if used is None else round(used / MiB, 2),
                              kv_cache_mib=kv / MiB, model_buffer_mib=model_mib, ollama=st["ollama"],
                              resolved={"n_ctx": p.n_ctx, "n_seq_max": p.n_seq_max, "kv_unified": p.kv_unified,
                                        "flash_attn": p.flash_attn, "device": device,
                                        "cache_type_k": st["cache_type_k"], "cache_type_v": st["cache_type_v"]})

    def compat(self, request, model: LoadedModel, memory) -> CompatSummary:
        """llama.cpp starts when its plan does (quantized V without flash attention, cache types and the
        device are checked by :func:`.memory.plan`); what is left is the condition the memory plan states."""
        cond = [memory.condition] if memory is not None and memory.fits and memory.condition else []
        return CompatSummary(release=request.release, gpu=request.gpu, ok=None if cond else True, auto_conditions=cond,
                       auto_selected=memory.resolved.get("device") if memory is not None else None)

    def launch_argv(self, request, model: LoadedModel) -> list[str]:
        """``llama-server -m <gguf> -c ... -np ... -fa ... -ctk ... -ctv ...`` (an argv list)."""
        mem = self.memory(request, model)
        path = request.gguf_file or f"{model.repo_id.split('/')[-1]}.gguf"
        spec = request.speculative_config
        return launch_argv(path, n_ctx=mem.plan.n_ctx_requested, n_parallel=mem.plan.n_seq_max,
                           flash_attn=mem.plan.flash_attn, cache_type_k=mem.resolved["cache_type_k"],
                           cache_type_v=mem.resolved["cache_type_v"], n_gpu_layers=request.n_gpu_layers,
                           kv_unified=request.kv_unified, swa_full=request.swa_full,
                           draft_model_path=spec.model if spec and spec.method == "draft_model" else None)

    def speed_kwargs(self, request) -> dict[str, Any]:
        return speed_kwargs(request)

    def speed(self, request, model: LoadedModel, memory):
        raise EngineInputError("runtime", "speed predictions for llama.cpp are not modelled yet (the KV cache, "
                               "model buffers and the command are)")

    def speed_fields(self, request, model: LoadedModel, memory) -> dict[str, Any]:
        return self.speed(request, model, memory)


class Ollama(LlamaCpp):
    """Ollama (its llama.cpp runner) with Ollama's defaults."""

    name = "ollama"
    label = "Ollama"

    def settings(self, request, gpu: GPU) -> dict[str, Any]:
        budget, _ = budget_bytes(gpu)
        d = ollama_defaults(total_vram_gib=budget / GiB, num_ctx=request.max_model_len, num_parallel=request.parallel,
                            kv_cache_type=request.cache_type_k,
                            flash_attention=None if request.flash_attn in (None, "auto") else request.flash_attn == "on")
        return {"n_ctx": d.kv_size, "n_seq_max": d.num_parallel, "cache_type_k": d.kv_cache_type,
                "cache_type_v": request.cache_type_v or d.kv_cache_type, "flash_attn": d.flash_attention,
                "ollama": d.model_dump()}

    def launch_argv(self, request, model: LoadedModel) -> list[str]:
        """``ollama run <model>`` with the Modelfile / environment that reproduce the plan (the environment as
        ``env NAME=value`` words, an argv list)."""
        mem = self.memory(request, model)
        d = mem.ollama
        cfg = ollama_config(model.repo_id, num_ctx=d["num_ctx"], num_parallel=d["num_parallel"],
                            kv_cache_type=d["kv_cache_type"])
        env = [f"{k}={v}" for k, v in (cfg.get("env") or {}).items()] if isinstance(cfg, dict) else []
        return ["env", *env, "ollama", "run", model.repo_id]
