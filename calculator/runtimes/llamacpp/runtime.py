"""llama.cpp (``llama-server``) and Ollama behind the runtime seam (:class:`calculator.runtimes.base.Runtime`).

The model's shapes come from its GGUF header (``gguf_file``, read with ranged requests) when given and the Hub
can be reached: then the model buffers are exact per file ("read from the GGUF header"). When the header cannot
be read (the Hub is unreachable or ``HF_HUB_OFFLINE``), each tensor's type is derived from the config and the
file type the name states, as llama-quantize picks it (:mod:`.quant_rules`: "derived from llama.cpp's
quantization rules for <ftype>"). Without a file, the attention shapes come from ``config.json`` as llama.cpp's
converter writes them (:func:`.gguf_meta.meta_from_hf_config`), so the KV cache is exact but the file's model buffers
are not known, and the verdict says so (``depends``): its condition names the largest of llama-quantize's file types
that fits every layer on the GPU (:meth:`LlamaCpp._gguf_types`, :mod:`.gguf_types`: each type's tensor table derived
from the quantization rules and planned with the request's settings). Compute buffers are estimated from the
reserved graph's largest live tensors (:func:`.memory.compute_buffers`), with a stated error: the verdict is
``works`` / ``does_not_fit`` when the memory left after the model buffers and KV cache is clear of that error,
``depends`` only when it lies within it.

A GGUF-only repo (no config.json) is answered with the base model's config from the offline GGUF catalog
(:mod:`.gguf_repos`) or, with the Hub, from the GGUF header itself; its ``.gguf`` files (sizes, split files
grouped) are listed for the picker (``LlamaCppMemory.gguf_listing``).

Several identical CUDA GPUs (``gpus``, ``split_mode`` -sm, ``tensor_split`` -ts, ``main_gpu`` -mg): the plan places
each layer, its KV cache and the output layer on a device by llama.cpp's rule (:func:`.memory.placement`) and the
verdict checks each device (CUDA0, CUDA1, ...) against its own budget, naming the one that overflows. The per-device
split is read from llama.cpp's source, not checked against a multi-GPU log (the CPU oracle runs one device); -sm row
/ tensor and Ollama on several GPUs are refused as not modelled.

Ollama: its defaults (``num_ctx`` by VRAM, ``OLLAMA_NUM_PARALLEL``, ``OLLAMA_KV_CACHE_TYPE``, flash attention)
from :func:`.memory.ollama_defaults`; llama.cpp is asked for ``num_ctx x parallel`` cells, with the batch Ollama
passes to its runner (:func:`.ollama.ollama_batch`: from 0.30 ``-b N -ub N`` with N its scheduler's choice by context
and free memory), which the compute buffers and the prefill speed follow.

Apple Silicon (the Metal build on an Apple row): the Metal device's budget is its working set, and what ``--fit`` or
``-ngl`` leaves on the CPU is in the same unified memory, so the whole plan is checked against the Mac's memory
(:mod:`.unified`, ``LlamaCppMemory.unified_memory``) instead of a condition on a separate system RAM.
"""
from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from calculator.engine.errors import EngineInputError
from calculator.engine.gpus import GPU, get_gpu, metal_working_set_bytes
from calculator.runtimes.base import CompatSummary, LoadedModel, speed_kwargs

from .gguf_meta import HF_TO_GGUF_ARCH, GGUFError, GGUFMeta, meta_from_hf_config, read_gguf_from_hub
from .gguf_repos import GGUFListing, catalog_config, catalog_entry, list_gguf_files
from .launch import launch_argv, ollama_config, ollama_run_argv, ollama_serve_argv
from .ollama import OLLAMA_CTX_CUT_SRC, OLLAMA_QUEUE_SRC, ollama_engine, ollama_rule
from .unified import LLAMA_SERVER_STARTS, is_unified, unified_memory
from .memory import (OLLAMA_GRAPH_SRC, RELEASE_0_3_36, RELEASE_LEGACY, SRC, Buffer, MiB, LlamaCppPlan, NotModelled,
                     _buft_name, ollama_defaults, ollama_graph_size, plan)

GiB = 2**30


#: ``llamacpp_backend`` (the llama.cpp build's GPU backend, in llama.cpp's terms) -> the plan's device kind.
BACKENDS = {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "metal": "Metal", "cpu": "CPU"}
#: The build each vendor's GPU gets when ``llamacpp_backend`` is not given: NVIDIA cuda, AMD rocm (the HIP build,
#: ggml/src/ggml-hip), Intel vulkan (llama.cpp's Intel builds are SYCL or Vulkan; SYCL is not modelled), Apple metal.
DEFAULT_BACKEND = {"nvidia": "cuda", "amd": "rocm", "intel": "vulkan", "apple": "metal"}
#: Which builds run on which vendor's GPUs: CUDA on NVIDIA, HIP on AMD, Metal on Apple, Vulkan on all three
#: discrete vendors (not on Apple: MoltenVK is not modelled).
BACKEND_VENDORS = {"cuda": ("nvidia",), "rocm": ("amd",), "metal": ("apple",), "vulkan": ("nvidia", "amd", "intel")}


def device_of(gpu: GPU, backend: str | None = None) -> str:
    """llama.cpp's backend for a catalog device and the build's ``backend`` (``llamacpp_backend``: cuda, rocm,
    vulkan, metal, cpu; None = by vendor, ``DEFAULT_BACKEND``: NVIDIA cuda, AMD rocm, Intel vulkan, Apple metal; the
    CPU row is "CPU"). Returns the plan's device kind ("CUDA", "ROCm", "Vulkan", "Metal", "CPU"). Raises
    ``EngineInputError`` (field ``llamacpp_backend``) for a build that does not run on that GPU, SYCL (not modelled)
    and a GPU of an unknown vendor."""
    if backend == "sycl":
        raise EngineInputError("llamacpp_backend", "llama.cpp's SYCL build (ggml-sycl, Intel oneAPI) is not modelled: "
                               "its buffers, alignment and flash-attention rules differ from the modelled backends; "
                               "Intel GPUs are modelled with the Vulkan build (llamacpp_backend vulkan)")
    if backend is not None and backend not in BACKENDS:
        raise EngineInputError("llamacpp_backend", f"one of {', '.join(BACKENDS)}, not {backend!r}")
    if gpu.is_cpu:
        if backend not in (None, "cpu"):
            raise EngineInputError("llamacpp_backend", f"the CPU device runs llama.cpp's CPU backend, not {backend}")
        return "CPU"
    if backend == "cpu":
        raise EngineInputError("llamacpp_backend", f"a CPU-only build on {gpu.name} leaves the GPU unused: pick the "
                               "CPU device for a CPU-only llama.cpp")
    vendor = gpu.vendor or ""
    if gpu.kind == "custom" and vendor in ("", "nvidia"):
        vendor = "nvidia"
    if backend is None:
        backend = DEFAULT_BACKEND.get(vendor)
        if backend is None:
            raise EngineInputError("gpu", f"llama.cpp on {gpu.vendor or 'unknown'} GPUs is not modelled; NVIDIA "
                                   "(CUDA, Vulkan), AMD (ROCm, Vulkan), Intel (Vulkan), Apple (Metal) and CPU are")
    if vendor not in BACKEND_VENDORS[backend]:
        raise EngineInputError("llamacpp_backend", f"llama.cpp's {backend} build does not run on {gpu.name} "
                               f"({vendor or 'unknown vendor'}); its builds for it: "
                               f"{', '.join(b for b, v in BACKEND_VENDORS.items() if vendor in v) or 'none modelled'}")
    return BACKENDS[backend]


def budget_bytes(gpu: GPU) -> tuple[int, str]:
    """What llama.cpp may allocate on the device: Metal's ``recommendedMaxWorkingSetSize`` on a Mac, else the
    device memory."""
    if gpu.vendor == "apple":
        return metal_working_set_bytes(gpu), "Metal recommendedMaxWorkingSetSize (calculator.engine.gpus)"
    return gpu.memory_bytes, gpu.memory_source


#: Where llama-server 0.3.36 (vendored llama.cpp) makes the draft model's buffers: the draft is loaded and given its
#: own context after the target's (tools/server/server-context.cpp:1000-1004, 1101-1131,
#: common/speculative.cpp:2446-2481 common_base_params_to_speculative: -devd / -ngld / -ctkd / -ctvd, default f16
#: cache types; n_outputs_max = n_parallel; :2527-2557 the context: n_ctx = llama_n_ctx(ctx_tgt) :2530, n_seq_max =
#: n_parallel via common_context_params_to_llama common/common.cpp:1633-1634).
DRAFT_SRC = (SRC + "tools/server/server-context.cpp:1000-1004,1101-1131; common/speculative.cpp:2446-2481,2527-2557; "
             "common/common.cpp:1633-1663")

#: -hfd <repo> without a quant takes the repo's Q4_K_M file, else Q8_0, else the first model file
#: (common/download.cpp:655-690 find_best_model).
HFD_DEFAULT_SRC = SRC + "common/download.cpp:655-690 find_best_model"


#: How the speed notes name an efficiency label (perf.Efficiency.label).
EFFICIENCY_WORDS = {"fitted": "fitted once per backend on public llama-bench tables",
                    "calibrated": "calibrated by a validation run"}

#: The memory plan's parameter names -> the request fields (and flags) a user gives them by.
PLAN_FIELDS = {"n_gpus": "gpus", "n_ctx": "max_model_len", "n_seq_max": "parallel", "n_gpu_layers": "n_gpu_layers"}


def hf_default_file(listing: GGUFListing):
    """The file ``llama-server -hf <repo>`` / ``-hfd <repo>`` downloads without a quant: the first whose name
    matches ``Q4_K_M[.-]``, else ``Q8_0[.-]`` (case-insensitive; of a split file its first part), else the first
    model file (:data:`HFD_DEFAULT_SRC`). ``listing.files`` must not be empty."""
    for tag in ("Q4_K_M", "Q8_0"):
        pick = next((f for f in listing.files if re.search(tag + r"[.-]", f.name, re.IGNORECASE)), None)
        if pick is not None:
            return pick
    return listing.files[0]


def hf_quant_tag(listing: GGUFListing, name: str) -> str | None:
    """The ``QUANT`` of ``-hf REPO:QUANT`` / ``-hfd REPO:QUANT`` that makes llama-server download the file ``name``
    of ``listing``, or None when none does. The tag is the one llama.cpp reads off a file name
    (common/download.cpp:482-509 get_gguf_split_info: ``.gguf`` and a ``-0000N-of-0000M`` suffix removed, then
    ``[-.]([A-Z0-9_]+)$``, upper-cased), and it is kept only when the tag lookup (common/download.cpp:655-677
    find_best_model: the first file, split parts past the first skipped, whose name matches ``TAG[.-]``
    case-insensitively) picks that same file from the listing."""
    tag = name_tag(name)
    if tag is None:
        return None
    pick = next((f for f in listing.files if re.search(re.escape(tag) + r"[.-]", f.name, re.IGNORECASE)), None)
    return tag if pick is not None and pick.name == name else None


def name_tag(name: str) -> str | None:
    """The tag llama.cpp reads off a GGUF file name (common/download.cpp:482-509 get_gguf_split_info: ``.gguf`` and a
    ``-0000N-of-0000M`` suffix removed, then ``[-.]([A-Z0-9_]+)$``, upper-cased): ``Q4_K_M`` of
    ``Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf``; None when the name ends in none."""
    m = re.match(r"^(.+)-([0-9]{5})-of-([0-9]{5})$", re.sub(r"\.gguf$", "", name, flags=re.IGNORECASE), re.IGNORECASE)
    prefix = m.group(1) if m else re.sub(r"\.gguf$", "", name, flags=re.IGNORECASE)
    t = re.search(r"[-.]([A-Z0-9_]+)$", prefix, re.IGNORECASE)
    return t.group(1).upper() if t is not None else None


def not_a_file(listing: GGUFListing, name: str) -> str:
    """Why ``name`` (a ``gguf_file`` / ``gguf_file_draft``) is refused when ``listing`` has no such file: the nearest
    file names (the file of the same quantization tag under another spelling, else ``difflib``'s closest, as a
    mistyped GPU or parameter gets), then the quantizations the repo has, by their tags (:func:`name_tag`), lowest
    bit width first, rather than a sample of the names."""
    import difflib

    names = [f.name for f in listing.files]
    given = name.rsplit("/", 1)[-1]
    tag = name_tag(given)
    near = [n for n in names if tag is not None and name_tag(n) == tag]
    if not near:
        lower = {n.rsplit("/", 1)[-1].lower(): n for n in names}
        near = [lower[n] for n in difflib.get_close_matches(given.lower(), list(lower), n=3, cutoff=0.6)]
    hint = ""
    if near:
        also = f" (also close: {', '.join(repr(n) for n in near[1:3])})" if near[1:] else ""
        hint = f"; did you mean {near[0]!r}?{also}"
    tags = sorted({t for t in map(name_tag, names) if t is not None},
                  key=lambda t: (int(re.search(r"\d+", t).group()) if re.search(r"\d+", t) else 99, t))
    untagged = [n for n in names if name_tag(n) is None]
    stems = {n[:-len(f"{name_tag(n)}.gguf")] for n in names if name_tag(n) is not None and n.lower().endswith(
        f"{name_tag(n)}.gguf".lower())}
    pattern = f" ({next(iter(stems))}<QUANT>.gguf)" if len(stems) == 1 and len(tags) > 1 else ""
    has = (f"its {len(names)} file{'s' if len(names) != 1 else ''}{pattern} are the quantizations {', '.join(tags)}"
           if tags else f"its {len(names)} file{'s' if len(names) != 1 else ''}")
    if untagged:
        has += f"{' and ' if tags else ': '}{', '.join(untagged[:5])}{' ...' if len(untagged) > 5 else ''}"
    return f"{name} is not a GGUF file of {listing.repo_id} ({listing.source}){hint}; {has}"


#: How llama.cpp 0.3.36 sizes each slot's context: with -kvu every sequence may use the whole cache, n_ctx_seq =
#: n_ctx (src/llama-context.cpp:292-293), else n_ctx / n_seq_max padded to 256 (:295-296); each server slot gets
#: n_ctx_seq tokens (tools/server/server-context.cpp:1276 slot.n_ctx = n_ctx_slot(), :4008-4012 llama_n_ctx_seq).
SLOT_CTX_SRC = SRC + "src/llama-context.cpp:292-296; tools/server/server-context.cpp:1276,4008-4012"


def _max_concurrency(p: LlamaCppPlan) -> float:
    """How many requests of the per-slot context (``n_ctx_seq``) the cache holds at once: ``n_ctx / n_ctx_seq``
    (:data:`SLOT_CTX_SRC`): ``n_seq_max`` separate streams without -kvu, 1.0 with it (the slots share n_ctx cells
    and one request may fill them all)."""
    return p.n_ctx / p.n_ctx_seq


def _pool_scope(p: LlamaCppPlan) -> str | None:
    """The verdict's words on a unified cache shared by several slots (None otherwise); the plan's notes get the
    rule with its source (once)."""
    if not p.kv_unified or p.n_seq_max < 2:
        return None
    note = (f"-kvu: the {p.n_seq_max} slots share one cache of {p.n_ctx:,} cells and each may use up to "
            f"{p.n_ctx_seq:,} of them, so {p.n_ctx:,} tokens in flight in all ({SLOT_CTX_SRC}); without -kvu each slot "
            f"would get its own n_ctx / {p.n_seq_max}")
    if note not in p.notes:
        p.notes.append(note)
    return f"(-kvu: {p.n_seq_max} slots share the {p.n_ctx:,} cells)"


#: What a discrete GPU must keep free beside llama.cpp's buffers: the process's GPU context and the backend's memory
#: pool (ggml-cuda's ggml_cuda_pool, ggml/src/ggml-cuda/common.cuh:1198, which grows while the server runs) are not
#: among the buffers llama.cpp logs; ``llama_memory_breakdown_print`` reports them as "unaccounted" (total - free -
#: self, common/fit.cpp:984; 3945 MiB on the RTX 4090 of tools/fit-params/README.md:53). The runtime's own answer to
#: how much to keep is ``--fit``'s target, 1024 MiB per device (common/common.h:483; llama-cpp-python 0.3.36's
#: vendored llama.cpp), which every plan ``--fit`` makes keeps; below it the plan starts only if they fit in the rest.
GPU_HEADROOM_MIB = 1024
GPU_HEADROOM_SRC = (SRC + "common/common.h:483 (fit_params_target 1024 MiB); common/fit.cpp:984 (unaccounted = total - "
                    "free - self); ggml/src/ggml-cuda/common.cuh:1198 (ggml_cuda_pool)")


def headroom_condition(device: str, spare: int) -> str | None:
    """The condition a discrete GPU's ``spare`` bytes (its budget less every buffer llama.cpp makes there, compute
    buffer included) put on the verdict: None from :data:`GPU_HEADROOM_MIB` up, and on the CPU / Metal (Metal's
    budget is already the working set macOS grants, :func:`budget_bytes`); else "works if" the rest holds the GPU
    context and the backend's pool, which llama.cpp does not count among its buffers."""
    if device in ("CPU", "Metal") or spare >= (GPU_HEADROOM_MIB - 0.5) * MiB:
        return None
    return (f"the {max(spare, 0) / MiB:.0f} MiB the {device} device keeps beside llama.cpp's buffers hold what they do "
            "not count: the process's GPU context and the backend's memory pool, which grows while it serves "
            "(llama_memory_breakdown_print's 'unaccounted' column, 3945 MiB on the RTX 4090 of llama.cpp's "
            f"tools/fit-params README); llama.cpp's own --fit keeps {GPU_HEADROOM_MIB} MiB free per device for them "
            "(--fit-target)")


def on_device(buft: str) -> bool:
    """Whether a llama.cpp buffer type lives in the GPU's memory: not the CPU's own types (``CPU``, ``CPU_Mapped``,
    ``CPU_REPACK``) and not a GPU backend's pinned *host* buffer (``CUDA_Host``, ``Vulkan_Host``: page-locked system
    memory, ggml-cuda.cu ggml_backend_cuda_host_buffer_type)."""
    return buft not in ("CPU", "CPU_Mapped", "CPU_REPACK") and not buft.endswith("_Host")


class DraftMemory(BaseModel):
    """The draft model of ``--speculative-config {"method": "draft_model", ...}`` as llama-server allocates it: its
    own model buffers, KV cache (the target's ``n_ctx`` and ``n_seq_max``, f16 unless -ctkd/-ctvd), output and
    compute buffers (``plan``). ``plan`` is None when the draft's memory is not modelled (``not_modelled`` says
    why); ``gguf_file`` None means llama-server is told ``-hfd <repo>`` and picks the file itself."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    repo_id: str
    gguf_file: str | None = None
    hf_tag: str | None = None  # the QUANT of `-hfd repo:QUANT` that downloads gguf_file (:func:`hf_quant_tag`)
    plan: LlamaCppPlan | None = None
    meta: Any = None
    weights_source: str = ""
    not_modelled: str | None = None
    notes: list[str] = []
    source: str = DRAFT_SRC

    def device_bytes(self) -> tuple[int, Buffer | None]:
        """(bytes on the device before compute: model + output buffers and the KV cache on the device, the draft's
        device compute buffer or None). Host buffers (:func:`on_device`) are not counted, as for the target."""
        p = self.plan
        used = sum(b.bytes or 0 for b in p.buffers if on_device(b.buft) and b.kind != "compute")
        used += sum(n for c in p.kv_caches for dev, n in c.buffers.items() if dev != "CPU")
        compute = next((b for b in p.buffers if b.kind == "compute" and on_device(b.buft)), None)
        return used, compute

    def to_json(self) -> dict[str, Any]:
        p = self.plan
        out: dict[str, Any] = {"repo_id": self.repo_id, "gguf_file": self.gguf_file, "weights_source": self.weights_source,
                               "not_modelled": self.not_modelled, "notes": self.notes, "source": self.source}
        if p is not None:
            out |= {"kv_cache_mib": round(p.kv_bytes / MiB, 2), "n_ctx": p.n_ctx, "n_seq_max": p.n_seq_max,
                    "model_buffer_mib": {b.buft: (round(b.bytes / MiB, 2) if b.bytes is not None else None)
                                         for b in p.buffers if b.kind == "model"},
                    "compute_buffer_mib": {b.buft: (round(b.bytes / MiB, 2) if b.bytes is not None else None)
                                           for b in p.buffers if b.kind == "compute"},
                    "compute_buffer_error_mib": {b.buft: round(b.error_bytes / MiB, 2) for b in p.buffers
                                                 if b.kind == "compute" and b.error_bytes is not None},
                    "log_lines": p.log_lines(), "kv_caches": [c.model_dump() for c in p.kv_caches],
                    "buffers": [b.model_dump() for b in p.buffers]}
        return out


class GGUFTypes(BaseModel):
    """Which of llama-quantize's file types fit, for a model asked without a GGUF file (:mod:`.gguf_types`): one
    :class:`.gguf_types.TypeRow` per type, largest first, every layer on the GPU with the request's settings. ``rows``
    is None when the table is not modelled (``not_modelled`` says why). ``condition`` is the verdict's words (None
    when the request itself puts only some layers on the GPU: the table is then beside the point of the verdict)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    rows: list[Any] | None = None
    not_modelled: str | None = None
    condition: str | None = None
    device: str = ""  # the device(s) the table checks, in words ("CUDA0", "CUDA0 and CUDA1")
    n_ctx: int | None = None
    notes: list[str] = []

    @property
    def source(self) -> str:
        """Where the table's tensor types come from (:data:`.gguf_types.TYPES_SRC`)."""
        from .gguf_types import TYPES_SRC

        return TYPES_SRC

    @property
    def largest_that_fits(self) -> str | None:
        """The largest type that fits for sure (None: none does)."""
        return next((r.ftype for r in self.rows or [] if r.fits is True), None)

    def to_json(self) -> dict[str, Any]:
        """The API's ``gguf_types``: ``types`` (per type, largest first: :meth:`.gguf_types.TypeRow.to_json`),
        ``largest_that_fits``, ``fitting`` (every type that fits), ``device``, ``n_gpu_layers`` (-1: all), ``n_ctx``
        (the cells planned), ``not_modelled`` (why there is no table, else null), ``notes`` and the sources
        (``source``: the quantization rules, ``types_source``: llama-quantize's list, ``imatrix_source``)."""
        from .gguf_types import IMATRIX_SRC, LISTED_SRC, TYPES_SRC

        return {"types": None if self.rows is None else [r.to_json() for r in self.rows],
                "largest_that_fits": self.largest_that_fits,
                "fitting": [r.ftype for r in self.rows or [] if r.fits is True], "device": self.device,
                "n_gpu_layers": -1, "n_ctx": self.n_ctx, "not_modelled": self.not_modelled, "notes": self.notes,
                "source": TYPES_SRC, "types_source": LISTED_SRC, "imatrix_source": IMATRIX_SRC}

    def status_text(self, row) -> str:
        """A type's answer in words: ``fits``, ``does not fit: <why>`` or ``depends: <why>``."""
        return {True: "fits", False: "does not fit", None: "depends"}[row.fits] + (f": {row.why}" if row.why else "")

    def cli_rows(self) -> list[tuple[str, Any, str]]:
        """``(label, value, source)`` rows for the command line's table: a heading, then one row per type."""
        from .gguf_types import TYPES_SRC

        if self.rows is None:
            return [("GGUF file types", "not modelled", self.not_modelled or "")] if self.not_modelled else []
        out = [(f"GGUF file types (no file given; every layer on {self.device})", "", TYPES_SRC)]
        for r in self.rows:
            imx = f"; needs an importance matrix ({', '.join(r.imatrix)})" if r.imatrix else ""
            out.append((f"  {r.ftype}", f"{r.device_model / GiB:.2f} GiB of model buffers on {self.device}, file "
                        f"{r.file_bytes / GiB:.2f} GiB: {self.status_text(r)}{imx}", ""))
        return out


class LlamaCppMemory(BaseModel):
    """llama.cpp's plan with the fields the verdict reads; ``plan`` holds every logged buffer."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    plan: LlamaCppPlan
    fits: bool
    reason: str | None = None
    condition: str | None = None
    kv_cache_tokens: int
    max_concurrency: float
    pool_scope: str | None = None  # the verdict's words on a shared (-kvu) cache (:func:`_pool_scope`)
    max_model_len: int
    estimated_max_model_len: int | None = None
    resolved: dict[str, Any]
    gpu: str
    release: str
    device_budget_mib: float
    device_budget_source: str = ""
    device_used_mib: float | None
    kv_cache_mib: float
    model_buffer_mib: dict[str, float | None]
    ollama: dict[str, Any] | None = None
    weights_source: str = ""  # "read from the GGUF header" / "derived from llama.cpp's quantization rules for X"
    gguf_file: str | None = None  # the file the plan is for (the request's, or Ollama's default Q4_K_M)
    gguf_listing: Any = None  # GGUFListing of the repo's .gguf files (the picker), when it is a GGUF repo
    meta: Any = None  # the GGUFMeta the plan was made from (the speed model reads its tensors)
    client_argv: list[str] | None = None  # Ollama: the `ollama run` half of the command
    draft: DraftMemory | None = None  # the speculative draft model's buffers (llama-server -md / -hfd)
    devices: dict[str, dict[str, Any]] | None = None  # several GPUs: per device (CUDA0, ...) buffers, budget, fits
    fit: dict[str, Any] | None = None  # llama-server's --fit: what it does with this request (fit.fit_for_request)
    # Apple Silicon: the whole plan (Metal + CPU buffers) against the Mac's unified memory (unified.unified_memory)
    unified_memory: dict[str, Any] | None = None
    # Ollama's own Go engine (Ollama 0.19 .. 0.24 for some architectures): what it allocates and logs instead of
    # llama.cpp's buffers (``Ollama._go_engine``): {"device", "weights", "kv", "log_lines", "compute", "notes"}
    go_engine: dict[str, Any] | None = None
    # no GGUF file: which of llama-quantize's file types fit, every layer on the GPU (:meth:`LlamaCpp._gguf_types`)
    gguf_types: GGUFTypes | None = None

    def _slots(self) -> str:
        """The slots in the runtime's own terms: llama.cpp's context ``n_ctx`` (``--ctx-size``) split over its
        ``--parallel`` slots, or shared by them with ``-kvu`` (:data:`SLOT_CTX_SRC`); Ollama's ``OLLAMA_NUM_PARALLEL``
        slots of ``num_ctx`` each (it starts its runner with num_ctx x the slots)."""
        p = self.plan
        n = p.n_seq_max
        if self.ollama is not None:
            return (f"OLLAMA_NUM_PARALLEL {n} slot{'s' if n != 1 else ''} of num_ctx {self.max_model_len:,}"
                    + (f", n_ctx {p.n_ctx:,} in all" if n > 1 else ""))
        ctx = f"n_ctx {p.n_ctx:,} (--ctx-size)"
        if n == 1:
            return f"{ctx} in --parallel 1 slot"
        if p.kv_unified:
            return f"{ctx} shared by --parallel {n} slots (-kvu)"
        return f"{ctx} split over --parallel {n} slots"

    @property
    def capacity_label(self) -> str:
        """The page's headline figure (``max_concurrency``) in llama.cpp's terms: ``Requests of 3,584 tokens at once:
        n_ctx 10,752 (--ctx-size) split over --parallel 3 slots``, not vLLM's "maximum concurrency"."""
        return f"Requests of {self.max_model_len:,} tokens at once: {self._slots()}"

    @property
    def capacity_text(self) -> str:
        """The verdict's and the link preview's words for ``max_concurrency`` (:attr:`capacity_label` with its
        value): ``3.00x requests of 3,584 tokens at once: n_ctx 10,752 (--ctx-size) split over --parallel 3 slots``."""
        return f"{self.max_concurrency:.2f}x requests of {self.max_model_len:,} tokens at once: {self._slots()}"

    @property
    def capacity_short(self) -> str:
        """The pinned verdict's few words: ``3 slots x 3,584 tokens`` (``3 slots share 10,240 tokens`` with -kvu)."""
        n = self.plan.n_seq_max
        if n > 1 and self.plan.kv_unified:
            return f"{n} slots share {self.plan.n_ctx:,} tokens"
        return f"{n} slot{'s' if n != 1 else ''} × {self.max_model_len:,} tokens"

    def log_lines(self) -> list[str]:
        """The predicted start-up lines: llama.cpp's, or Ollama's own engine's (``msg="kv cache" ...``)."""
        return self.go_engine["log_lines"] if self.go_engine is not None else self.plan.log_lines()

    def _engine_rows(self) -> list[tuple[str, Any, str]]:
        eng = (self.ollama or {}).get("engine")
        if not eng:
            return []
        rows = [("Ollama engine", f"{eng['runner']} ({eng['engine']}) in Ollama {eng['release']}: {eng['why']}",
                 f"{eng['rule']}: {eng['source']}")]
        b = self.ollama.get("batch")
        if self.ollama["num_parallel"] < self.ollama.get("num_parallel_requested", 0):
            rows.append(("Ollama slots (OLLAMA_NUM_PARALLEL)", f"{self.ollama['num_parallel']} (asked "
                         f"{self.ollama['num_parallel_requested']})", self.ollama["sources"]["num_parallel"]))
        if b is not None:
            rows.append(("Ollama num_batch", f"{b['num_batch']}" + ("" if b["determined"] else
                                                                    f" (at most; {b['num_batch_low']} at least)")
                         + (f": -b {b['n_batch']} -ub {b['n_ubatch']}" if eng["runner"] == "llama-server" else
                            f": n_batch {b['n_batch']}, n_ubatch {b['n_ubatch']}"), self.ollama["sources"]["num_batch"]))
        return rows

    def _go_rows(self) -> list[tuple[str, Any, str]]:
        g = self.go_engine
        rows = self._engine_rows() + [(line, "", "predicted log line (Ollama's own engine, ml/device.go "
                                       "BackendMemory.Log)") for line in g["log_lines"]]
        if g["kv"] is not None:
            rows += [(f"kv cache: {c['name']} layers", f"{len(c['layers'])} layers x {c['cells']} cells "
                      f"({g['kv']['type']})", g["kv"]["source"] if i == 0 else "as above")
                     for i, c in enumerate(g["kv"]["caches"])]
        else:
            rows.append(("kv cache", "not modelled", g["kv_why"]))
        if g["weights"] is None:
            rows.append(("model weights", "not modelled", g["weights_why"]))
        rows.append((f"compute graph ({g['device']})", "not modelled", g["compute"]))
        rows.append(("device budget (MiB)", round(self.device_budget_mib, 2), self.device_budget_source))
        return rows

    def rows(self) -> list[tuple[str, Any, str]]:
        """``(label, value, source)`` rows of what llama.cpp logs, for the page."""
        if self.go_engine is not None:
            return self._go_rows()
        p = self.plan
        rows: list[tuple[str, Any, str]] = self._engine_rows()
        rows += [(line, "", "predicted log line") for line in p.log_lines()]
        for b in p.buffers:
            if b.bytes is None:
                rows.append((f"{b.kind} buffer ({b.buft})", "not modelled", b.note or b.source))

        d = self.draft
        if d is not None:
            if d.plan is None:
                rows.append((f"draft model {d.repo_id}", "not modelled", d.not_modelled or ""))
            else:
                rows += [(f"draft: {line}", "", f"predicted log line of the draft's context ({d.repo_id}/{d.gguf_file})")
                         for line in d.plan.log_lines()]
                if d.weights_source:
                    rows.append(("draft tensor types", d.gguf_file or "", d.weights_source))
        if not any(b.kind == "model" for b in p.buffers):
            t = self.gguf_types
            rows.append(("model buffers", "not modelled", "no GGUF file given: the tensor table is needed" + (
                "; for each of llama-quantize's file types: the GGUF file types table" if t is not None and t.rows
                else "")))
        elif self.weights_source:
            rows.append(("tensor types", self.gguf_file or "", self.weights_source))
        rows.append(("device budget (MiB)", round(self.device_budget_mib, 2), self.device_budget_source))
        f = self.fit
        if f is not None and f.get("n_ctx") is not None:
            rows.append(("llama-server --fit: context (cells)", f"{f['n_ctx']:,} (lowered from {f['n_ctx_from']:,}: -c "
                         "not given)", f"common/fit.cpp:373-428; {f['source']}; {f['free_assumption']}"))
        if f is not None and f.get("status") == "fitted":
            rows.append(("llama-server --fit: -ngl", f"{f['n_gpu_layers']} of {f['n_gpu_layers_of']}"
                         + (f", {len(f['tensor_overrides'])} tensor overrides (-ot)" if f["tensor_overrides"] else ""),
                         f"{f['source']}; {f['free_assumption']}"))
            if self.unified_memory is None:
                rows.append(("system RAM for the CPU part (GiB)", f["host_memory_gib"]["total"],
                             "weights + KV cache + compute + logits left in CPU memory by --fit"))
        u = self.unified_memory
        if u is not None and u["total"] is not None:
            pt = u["parts"]
            rows.append(("unified memory in all (GiB)", f"{u['total'] / GiB:.2f} (+- {u['error'] / MiB:.0f} MiB): "
                         f"weights {pt['weights'] / GiB:.2f} + KV {pt['kv'] / GiB:.2f} + compute "
                         f"{pt['compute'] / GiB:.2f}"
                         + (f" + draft {pt['draft'] / GiB:.2f}" if pt["draft"] else "")
                         + f"; the Metal device holds {u['metal'] / GiB:.2f}, the CPU adds {u['cpu'] / GiB:.2f}",
                         "everything llama.cpp allocates on the Metal device and the CPU, from the same memory; the "
                         "mmap'd weights counted once (the Metal buffer is a view of the file's range)"))
            rows.append(("unified memory a model can use (GiB)", round(u["usable"] / GiB, 2),
                         f"{u['usable_rule']}: max(Metal working set {u['working_set'] / GiB:.2f}, "
                         f"{u['ram'] / GiB:.2f} - 4 GiB kept for macOS and other apps); {u['source']}"))
        for dev, d in (self.devices or {}).items():
            fit = {True: "fits", False: "does not fit", None: "depends"}[d["fits"]]
            rows.append((f"{dev}: {d['layers']} layers{' + output' if d['output_layer'] else ''}",
                         f"model {d['model_buffer_mib']} + KV {d['kv_buffer_mib']} + compute ~{d['compute_buffer_mib']}"
                         f" (+- {d['compute_buffer_error_mib']}) MiB of {d['budget_mib']} MiB: {fit}",
                         "per-device split from llama.cpp's source (llama-model.cpp:1556-1614), not checked against a "
                         "multi-GPU log"))
        return rows

    def to_json(self) -> dict[str, Any]:
        """What llama.cpp logs, per device: ``kv_cache_mib``, ``model_buffer_mib``, ``compute_buffer_mib``
        (``None``: not modelled), the ``llama_kv_cache`` / buffer log lines, with sources; without a GGUF file
        ``gguf_types`` (:meth:`GGUFTypes.to_json`: which of llama-quantize's types fit), else null."""
        p = self.plan
        out = {"runtime_release": self.release, "gpu": self.gpu, "fits": self.fits, "reason": self.reason,
               "kv_cache_mib": round(self.kv_cache_mib, 2), "model_buffer_mib": self.model_buffer_mib,
               "compute_buffer_mib": {b.buft: (round(b.bytes / MiB, 2) if b.bytes is not None else None)
                                      for b in p.buffers if b.kind == "compute"},
               "compute_buffer_error_mib": {b.buft: round(b.error_bytes / MiB, 2) for b in p.buffers
                                            if b.kind == "compute" and b.error_bytes is not None},
               "compute_buffer_source": ("estimated from the reserved graph's largest live tensors "
                                         "(buffers[].terms, .error_bytes)"),
               "kv_cache_tokens": self.kv_cache_tokens, "n_ctx": p.n_ctx,
               "n_seq_max": p.n_seq_max, "max_model_len": self.max_model_len, "max_concurrency": self.max_concurrency,
               "device_budget_mib": round(self.device_budget_mib, 2), "device_used_mib": self.device_used_mib,
               "log_lines": p.log_lines(), "kv_caches": [c.model_dump() for c in p.kv_caches],
               "buffers": [b.model_dump() for b in p.buffers], "notes": p.notes, "resolved": self.resolved,
               "ollama": self.ollama, "gguf_file": self.gguf_file, "weights_source": self.weights_source,
               "client_argv": self.client_argv, "draft": None if self.draft is None else self.draft.to_json(),
               "devices": self.devices, "fit": self.fit,
               "unified_memory": None if self.unified_memory is None else _unified_json(self.unified_memory),
               "gguf_types": None if self.gguf_types is None else self.gguf_types.to_json(),
               "gguf_files": None if self.gguf_listing is None else {
                   "source": self.gguf_listing.source,
                   "files": [{"name": f.name, "parts": f.parts, "size_bytes": f.size_bytes, "listed_gb": f.listed_gb,
                              "ftype": f.ftype, "derived_bytes": f.derived_bytes, "ftype_note": f.ftype_note}
                             for f in self.gguf_listing.files],
                   "projectors": self.gguf_listing.projectors},
               "sources": {c.name: c.source for c in p.kv_caches} | {f"{b.kind} {b.buft}": b.source for b in p.buffers}}
        g = self.go_engine
        if g is not None:  # Ollama's own engine: its figures, not llama.cpp's buffers
            w = g["weights"]
            out |= {"kv_cache_mib": None if g["kv"] is None else round(g["kv"]["bytes"] / MiB, 2),
                    "model_buffer_mib": None if w is None else {k: round(w[k] / MiB, 2) for k in (g["device"], "CPU")},
                    "compute_buffer_mib": {g["device"]: None}, "compute_buffer_error_mib": {},
                    "compute_buffer_source": g["compute"], "log_lines": g["log_lines"],
                    "kv_caches": None if g["kv"] is None else g["kv"]["caches"], "buffers": [],
                    "ollama_engine_memory": {k: v for k, v in g.items() if k != "log_lines"},
                    "sources": {"engine": self.ollama["engine"]["source"],
                                "kv cache": g["kv"]["source"] if g["kv"] else g["kv_why"],
                                "model weights": w["source"] if w else g["weights_why"],
                                "compute graph": g["compute"]}}
        if self.draft is not None:
            out["sources"]["draft"] = self.draft.source
            if self.draft.plan is not None:
                out["sources"] |= {f"draft {c.name}": c.source for c in self.draft.plan.kv_caches}
                out["sources"] |= {f"draft {b.kind} {b.buft}": b.source for b in self.draft.plan.buffers}
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
    def load_model(self, request, local: dict[str, Any] | None = None) -> LoadedModel:
        """:func:`calculator.plan.load`, and for a GGUF-only repo (no ``config.json``) the base model's architecture:
        the offline GGUF catalog's config (:mod:`.gguf_repos`), else, with the Hub and a ``gguf_file``, a config
        built from the file's GGUF header (:func:`config_from_gguf`). Raises the metadata layer's
        ``EngineInputError`` when neither applies."""
        from calculator.plan import load

        try:
            return load(request, local)
        except EngineInputError as exc:
            if local is not None or exc.field != "model":
                raise
            original = exc
        sha = None
        if hub_usable():
            try:
                from calculator.metadata.hub import HubClient

                sha = HubClient().resolve(request.model, request.revision).sha
            except Exception:  # the metadata layer already said what is wrong with the repo
                sha = None
        entry = catalog_entry(request.model)
        if entry is not None:
            return LoadedModel(
                repo_id=entry["repo_id"], config=catalog_config(entry), sha=sha,
                source=(f"offline GGUF catalog: {entry['repo_id']} holds GGUF files of {entry['base_model']}, whose "
                        f"architecture is {entry['config']} (calculator/data/gguf_repos.json)"),
                notes=tuple(n for n in (entry.get("config_note"),) if n), extra={"hub_reachable": sha is not None})
        if sha is not None and request.gguf_file:
            try:
                meta = read_gguf_from_hub(request.model, request.gguf_file, sha)
            except Exception:
                raise original from None
            return LoadedModel(repo_id=request.model, config=config_from_gguf(meta), sha=sha, source=meta.source,
                               notes=("no config.json in this GGUF repo: the architecture is read from the GGUF "
                                      "header",), extra={"hub_reachable": True, "gguf_meta": meta})
        raise original

    def listing(self, request, model: LoadedModel) -> GGUFListing | None:
        """The repo's ``.gguf`` files (the picker) when it is a GGUF repo: in the offline GGUF catalog, or a name
        containing "GGUF" (the Hub's file tree is asked then). ``None`` otherwise or when nothing answers."""
        if catalog_entry(model.repo_id) is None and "gguf" not in model.repo_id.lower():
            return None
        try:
            return list_gguf_files(model.repo_id, model.sha or request.revision, use_hub=hub_usable(model))
        except Exception:  # a definite Hub error about the repo was already reported by the metadata layer
            return None

    def gguf_choice(self, request, listing: GGUFListing | None) -> tuple[str | None, str | None]:
        """(the GGUF file the plan is for, a note). llama.cpp: the request's ``gguf_file``; a name not among the
        listed files is refused. Without one, in a GGUF repo whose files are listed: the file ``llama-server -hf
        <repo>`` downloads without a quant (:func:`hf_default_file`), which the command then names by the repo."""
        if request.gguf_file and listing is not None and listing.files and listing.file(request.gguf_file) is None:
            raise EngineInputError("gguf_file", not_a_file(listing, request.gguf_file))
        if not request.gguf_file and listing is not None and listing.files:
            pick = hf_default_file(listing)
            return pick.name, (f"gguf_file: {pick.name}, the file `llama-server -hf {listing.repo_id}` downloads "
                               f"without a quant ({HFD_DEFAULT_SRC}; {listing.source}); give gguf_file for another")
        return request.gguf_file, None

    def meta(self, request, model: LoadedModel, gguf_file: str | None = None,
             listing: GGUFListing | None = None) -> tuple[GGUFMeta, str]:
        """``(GGUFMeta, how its tensor types are known)``. With a GGUF file: its header (Hub, ranged reads),
        "read from the GGUF header"; when the header cannot be read (``HF_HUB_OFFLINE``, the Hub unreachable), the
        tensor table llama-quantize writes for the config and the file type the name states, "derived from
        llama.cpp's quantization rules for <ftype>" (:func:`.quant_rules.derive_meta`). Without one: the
        config-derived attention metadata (no tensor table)."""
        from calculator.metadata.hub import HubUnavailableError, MetadataError

        from .quant_rules import derive_meta, ftype_from_filename

        if gguf_file:
            why = "HF_HUB_OFFLINE is set or the Hub is unreachable"
            if model.extra.get("gguf_meta") is not None and gguf_file == request.gguf_file:
                m = model.extra["gguf_meta"]
                return m, f"read from the GGUF header ({m.source})"
            if hub_usable(model):
                try:
                    m = read_gguf_from_hub(model.repo_id, gguf_file, model.sha or request.revision)
                    return m, f"read from the GGUF header ({m.source})"
                except GGUFError as exc:
                    raise EngineInputError("gguf_file", str(exc)) from None
                except HubUnavailableError as exc:
                    why = exc.message
                except MetadataError as exc:
                    raise EngineInputError("gguf_file", exc.message[:300]) from None
            entry = catalog_entry(model.repo_id)
            try:
                ftype = ftype_from_filename(gguf_file)
                m = derive_meta(model.config, ftype, source=model.source, filename=gguf_file,
                                has_imatrix=entry.get("imatrix") if entry and ftype not in ("F16", "BF16", "F32")
                                else None)
            except NotModelled as exc:
                raise EngineInputError(exc.field, f"not modelled: {exc} (the header could not be read: {why})") from None
            return m, (f"derived from llama.cpp's quantization rules for {ftype} (the GGUF header was not read: "
                       f"{why}; src/llama-quant.cpp llama_tensor_get_type)")
        try:
            return meta_from_hf_config(model.config, source=model.source), ""
        except GGUFError as exc:
            raise EngineInputError("model", str(exc)) from None

    def plan_kwargs(self, request, st: dict[str, Any], device: str) -> dict[str, Any]:
        """:func:`.memory.plan`'s keyword arguments for ``request`` with the settings ``st`` (:meth:`settings`)."""
        return dict(n_ctx=st["n_ctx"], n_seq_max=st["n_seq_max"], kv_unified=request.kv_unified,
                    cache_type_k=st["cache_type_k"], cache_type_v=st["cache_type_v"], flash_attn=st["flash_attn"],
                    n_gpu_layers=request.n_gpu_layers if request.n_gpu_layers is not None else -1,
                    swa_full=request.swa_full, device=device, release=request.release, **self.multi_gpu(request),
                    **{k: st[k] for k in ("n_batch", "n_ubatch") if k in st})

    def settings(self, request, gpu: GPU, meta: GGUFMeta | None = None, *, listing: GGUFListing | None = None,
                 gguf_file: str | None = None) -> dict[str, Any]:
        """``n_ctx``, ``n_seq_max``, cache types, flash attention: the request's, else llama-server's defaults
        (``-c`` the model's training context, ``-np 1``, f16, auto, and -b 2048 -ub 512: no ``n_batch`` /
        ``n_ubatch`` key), for Ollama its defaults (``listing`` / ``gguf_file``: the file Ollama's scheduler
        reads the size of)."""
        out = {"n_ctx": request.max_model_len or 0, "n_seq_max": request.parallel or 1,
               "cache_type_k": request.cache_type_k or "f16", "cache_type_v": request.cache_type_v or "f16",
               "flash_attn": request.flash_attn or "auto", "ollama": None}
        return out

    def memory(self, request, model: LoadedModel) -> LlamaCppMemory:
        """The start-up plan (cached on ``model`` per request: the command and the speed reuse it)."""
        return self._memory(request, model)

    def _compute_memory(self, request, model: LoadedModel) -> LlamaCppMemory:
        spec = request.speculative_config
        if spec is not None:
            self.check_speculative(spec)
        gpu = get_gpu(request.gpu)
        device = device_of(gpu, request.llamacpp_backend)
        listing = self.listing(request, model)
        gguf_file, choice_note = self.gguf_choice(request, listing)
        meta, weights_source = self.meta(request, model, gguf_file, listing)
        st = self.settings(request, gpu, meta, listing=listing, gguf_file=gguf_file)
        plan_kw = self.plan_kwargs(request, st, device)
        fit_info, draft = None, None
        try:
            p = plan(meta, **plan_kw)
            if self.runs_llama_server_fit(request):  # llama-server's --fit places the layers
                if self.name == "llama.cpp":
                    draft = self._draft(request, p, st, device) if spec is not None and request.gpus == 1 else None
                p, fit_info = self._fit(request, meta, p, plan_kw, gpu, draft)
                st = dict(st, fit=fit_info)
        except NotModelled as exc:
            raise EngineInputError(PLAN_FIELDS.get(exc.field, exc.field), f"not modelled: {exc}") from None
        except ValueError as exc:
            text = str(exc)
            field = text.split(":")[0].split(" ")[0] if ":" in text else "model"
            field = field if field.isidentifier() else "model"
            raise EngineInputError(PLAN_FIELDS.get(field, field), text.removeprefix(f"{field}:").strip()) from None
        if choice_note:
            p.notes.append(choice_note)
        if self.name == "llama.cpp" and request.max_model_len == 0:
            slots = ("" if p.n_seq_max == 1 else
                     f"; {p.n_ctx:,} cells for the {p.n_seq_max} slots: " + (
                         "--fit resolves the context to the model's for each slot before measuring, "
                         "common/fit.cpp:266-278" if p.n_ctx_seq >= meta.n_ctx_train else
                         "the model's context shared among them"))
            p.notes.append(f"-c 0: the model's trained context, {meta.n_ctx_train:,} cells (common/arg.cpp:1639-1646 "
                           "\"0 = loaded from model\", src/llama-context.cpp:133)" + slots + "; given explicitly, it "
                           "also keeps --fit from lowering the context to fit the device (fit_params_min_ctx = "
                           "UINT32_MAX, common/arg.cpp:1643-1646, common/fit.cpp:393-394): leave -c out to let it")
        if meta.n_ctx_train and p.n_ctx_seq > meta.n_ctx_train:
            p.notes.append(f"{p.n_ctx_seq:,} cells per sequence is more than the {meta.n_ctx_train:,} the model was "
                           f"trained for: llama.cpp starts, and logs \"n_ctx_seq ({p.n_ctx_seq}) > n_ctx_train "
                           f"({meta.n_ctx_train}) -- possible training context overflow\" (src/llama-context.cpp:327-330 "
                           "in llama-cpp-python 0.3.36's llama.cpp); past its trained length the output may degrade "
                           "unless the model is run with RoPE scaling it supports (--rope-scaling, --yarn-orig-ctx)")
        if self.name == "llama.cpp" and request.parallel is None:
            p.notes.append("-np 1 is pinned in the command: without -np llama-server runs 4 slots sharing one unified "
                           "KV cache (-np -1 = auto, tools/server/server.cpp:156-161): four requests at once sharing "
                           "the context")
        if device != "CPU":
            given = request.llamacpp_backend is not None
            p.notes.append(f"llama.cpp build: {device} ({'llamacpp_backend' if given else 'the default build for ' + (gpu.vendor or 'this') + ' GPUs; llamacpp_backend picks another'}); "
                           "its devices are named " + _buft_name(device, 0) + ", ... in the logs and in -dev")
        if self.name == "ollama" and not self.runs_llama_server_fit(request):  # Ollama's scheduler picks num_gpu
            given = request.n_gpu_layers not in (None, -1)
            p.notes[:] = [(f"num_gpu {request.n_gpu_layers} given: Ollama's scheduler offloads that many layers, as "
                           "the plan does" if given else
                           "Ollama's scheduler picks how many layers go to the GPU (num_gpu) from its own memory "
                           "estimate and may offload fewer than all; the plan assumes all on the device")
                          if n.startswith("llama-server's --fit") else n for n in p.notes]
        client = self.client_argv(request, model, gguf_file, listing)
        if self.name == "ollama" and client is None:
            p.notes.append(f"Ollama pulls a Hub model as a GGUF repo (`ollama run hf.co/{{user}}/{{repo}}:{{quant}}`, "
                           f"https://huggingface.co/docs/hub/ollama); {model.repo_id} lists no GGUF files: pick a GGUF "
                           "repo of this model to get the `ollama run` command")
        if meta.kv.get("derived.notes"):
            p.notes.append(meta.kv["derived.notes"])
        if weights_source:
            p.notes.append(f"tensor types {weights_source}")
        budget, budget_source = budget_bytes(gpu)
        if p.n_gpus > 1 and p.split_mode != "none":
            if spec is not None:
                raise EngineInputError("speculative_config", "not modelled: a draft model with several GPUs (-devd / "
                                       "the draft's own split); give gpus 1 for a draft model")
            types = None if meta.tensors else self._gguf_types(request, model, gpu, device, budget, None, p,
                                                               meta.n_layer_all)
            return self._multi_gpu_memory(request, p, gpu, device, budget, budget_source, meta, weights_source,
                                          gguf_file, listing, st, client, types)
        kv = p.kv_bytes
        dev_buffers = [b for b in p.buffers if on_device(b.buft)]
        unknown = [b for b in dev_buffers if b.bytes is None and b.kind != "compute"] or ([] if meta.tensors else ["model"])
        model_mib = {b.buft: (round(b.bytes / MiB, 2) if b.bytes is not None else None)
                     for b in p.buffers if b.kind == "model"}
        used = None if unknown else (sum(b.bytes for b in dev_buffers if b.bytes and b.kind != "compute")
                                     + (kv if device != "CPU" else 0))
        if used is not None and device != "CPU" and len(p.layers_on_gpu) < meta.n_layer_all:
            # layers on the CPU keep their KV cache there (llama-kv-cache.cpp:214-221): count the device's KV buffers
            used += sum(n for c in p.kv_caches for d, n in c.buffers.items() if on_device(d)) - kv
        compute = next((b for b in dev_buffers if b.kind == "compute"), None)
        if draft is None and spec is not None:
            draft = self._draft(request, p, st, device)
        if draft is not None and draft.plan is not None and device != "CPU":
            d_used, d_compute = draft.device_bytes()
            if used is not None:
                used += d_used
            if compute is not None and compute.bytes is not None and d_compute is not None and d_compute.bytes is not None:
                # each context keeps its own scheduler and compute buffers (llama_init_from_model per context)
                compute = Buffer(kind="compute", buft=compute.buft, bytes=compute.bytes + d_compute.bytes,
                                 error_bytes=(compute.error_bytes or 0) + (d_compute.error_bytes or 0),
                                 source=compute.source, note="target + draft compute buffers")
            elif d_compute is not None:
                compute = d_compute if compute is None else Buffer(
                    kind="compute", buft=compute.buft, bytes=None, source=compute.source,
                    note=compute.note or d_compute.note)
        types = None if meta.tensors else self._gguf_types(request, model, gpu, device, budget, draft, p,
                                                           meta.n_layer_all)
        cells = p.n_ctx
        fits, reason, condition = True, None, None
        # llama-server's --fit (on by default, llama.cpp only) and Ollama's own layer placement move layers to the CPU
        # when -ngl / -ts (Ollama: num_gpu) are not given, so only a pinned placement can fail for want of GPU memory
        pinned = (request.n_gpu_layers is not None or (self.name == "llama.cpp" and (
            request.fit == "off" or bool(request.tensor_split))))
        if used is None and device != "CPU" and pinned:
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
                      f"before its compute buffer), more than its {budget / GiB:.2f} GiB")
        elif used is None and types is not None and types.condition:
            condition = types.condition  # which of llama-quantize's types fit (gguf_types)
        elif used is None:
            condition = ("the model buffers fit beside the KV cache: give gguf_file (the .gguf file) for exact model "
                         "buffers" + ("" if compute is None or compute.bytes is None else
                                      f"; llama.cpp's compute buffer is {_cb_text(compute)}")
                         + ("" if pinned else "; where they do not, "
                            + ("llama-server's --fit (on by default) first lowers an unset context, then keeps layers"
                               if self.name == "llama.cpp" else "Ollama keeps layers")
                            + " in CPU memory, which the machine's RAM must hold"))
        elif compute is None or compute.bytes is None:
            if device != "CPU":
                why = compute.note if compute is not None else "no compute buffer on the device"
                condition = (f"llama.cpp's compute buffer ({why}) fits in the {(budget - used) / GiB:.2f} GiB left on "
                             "the device")
        else:
            left = budget - used
            if compute.bytes + compute.error_bytes <= left:
                condition = headroom_condition(device, left - compute.bytes)  # fits; unless too little is left beside
                if condition:
                    p.notes.append(f"less than {GPU_HEADROOM_MIB} MiB left beside llama.cpp's buffers: {GPU_HEADROOM_SRC}")
            elif compute.bytes - compute.error_bytes > left:
                fits = False
                reason = (f"llama.cpp would allocate {used / GiB:.2f} GiB on the {device} device (model buffers + KV "
                          f"cache) plus a compute buffer of {_cb_text(compute)}, more than the "
                          f"{budget / GiB:.2f} GiB budget ({left / MiB:.0f} MiB left for the compute buffer)")
            else:
                condition = (f"llama.cpp's compute buffer ({_cb_text(compute)}) fits in the {left / MiB:.0f} MiB left "
                             "on the device: the remaining memory lies within the estimate's stated error")
        if draft is not None:
            p.notes.extend(draft.notes)
            if draft.plan is None and fits:
                why = f"the draft model {draft.repo_id} also fits: its memory is not modelled ({draft.not_modelled})"
                condition = why if not condition else f"{condition}; and {why}"
            elif draft.plan is not None and fits and used is not None:
                p.notes.append(f"draft model {draft.repo_id} ({draft.gguf_file}): {draft.device_bytes()[0] / MiB:.2f} "
                               f"MiB of model / output buffers and KV cache on the {device} device, counted in the fit")
        if st["ollama"] is not None and not self.runs_llama_server_fit(request):  # GraphSize: Ollama before 0.30
            self._ollama_graph(meta, p, st["ollama"], device=device, used=used, budget=budget, fits=fits)
        if fits and fit_info and fit_info.get("condition"):
            condition = f"{condition}; and {fit_info['condition']}" if condition else fit_info["condition"]
        unified = None
        if is_unified(gpu, device) and used is not None:
            # a Mac: the Metal buffers and the CPU's come from one memory, which the whole plan must fit
            extra, extra_err = 0, 0
            if draft is not None and draft.plan is not None:
                d = unified_memory(draft.meta, draft.plan, ram=gpu.memory_bytes, working_set=budget, device_bytes=0)
                extra, extra_err = d["total"] or 0, d["error"] or 0
            known = compute is not None and compute.bytes is not None
            unified = unified_memory(meta, p, ram=gpu.memory_bytes, working_set=budget,
                                     device_bytes=used + (compute.bytes if known else 0),
                                     extra_bytes=extra, extra_error=extra_err, starts=self.unified_starts(request))
            if fits and unified["status"] == "does_not_fit":
                fits, reason, condition = False, unified["text"], None
            elif fits and unified["status"] == "within_error":
                condition = f"{condition}; and {unified['text']}" if condition else unified["text"]
            if unified["status"] == "fits":
                p.notes.append(f"Apple unified memory: {unified['text']}")
        n_cpu = meta.n_layer_all - len(p.layers_on_gpu)
        if fits and n_cpu > 0 and device not in ("CPU", "Metal") and not (fit_info and fit_info.get("status") == "fitted"):
            # -ngl given (or fit gave up): the layers it leaves on the CPU need the machine's RAM, as --fit's do
            from .fit import host_bytes

            host = host_bytes(meta, p)
            ram = (f"the machine's free system RAM holds the {host['total'] / GiB:.2f} GiB the {n_cpu} of "
                   f"{meta.n_layer_all} layers left on the CPU by {'num_gpu' if self.name == 'ollama' else '-ngl'} "
                   f"{request.n_gpu_layers} need (weights "
                   f"{host['weights'] / GiB:.2f} GiB, KV cache {host['kv'] / GiB:.2f} GiB)")
            condition = f"{condition}; and {ram}" if condition else ram
        return LlamaCppMemory(plan=p, fits=fits, reason=reason, condition=condition, kv_cache_tokens=cells, fit=fit_info,
                              unified_memory=unified,
                              estimated_max_model_len=_unified_context(p, unified) or _device_context(
                                  p, device=device, budget=budget, used=used, compute=compute, fits=fits,
                                  unified=unified, all_on_device=len(p.layers_on_gpu) >= meta.n_layer_all),
                              max_concurrency=_max_concurrency(p), pool_scope=_pool_scope(p),
                              max_model_len=p.n_ctx_seq, gpu=gpu.name,
                              release=request.release, device_budget_mib=budget / MiB, device_budget_source=budget_source,
                              device_used_mib=None if used is None else round(used / MiB, 2),
                              kv_cache_mib=kv / MiB, model_buffer_mib=model_mib, ollama=st["ollama"],
                              weights_source=weights_source, gguf_file=gguf_file, gguf_listing=listing, meta=meta,
                              client_argv=client, draft=draft, gguf_types=types,
                              resolved={"n_ctx": p.n_ctx, "n_seq_max": p.n_seq_max, "kv_unified": p.kv_unified,
                                        "flash_attn": p.flash_attn, "device": device,
                                        "cache_type_k": st["cache_type_k"], "cache_type_v": st["cache_type_v"]})

    def multi_gpu(self, request) -> dict[str, Any]:
        """The plan's multi-GPU inputs from the request: ``n_gpus`` (gpus / --gpus), ``split_mode`` (-sm, default
        layer), ``tensor_split`` (-ts as floats, None = llama.cpp's default), ``main_gpu`` (-mg, default 0)."""
        ts = None if request.tensor_split is None else [float(x) for x in request.tensor_split.split(",")]
        return {"n_gpus": request.gpus, "split_mode": request.split_mode or "layer", "tensor_split": ts,
                "main_gpu": request.main_gpu or 0}

    def _multi_gpu_memory(self, request, p: LlamaCppPlan, gpu: GPU, device: str, budget: int, budget_source: str,
                          meta: GGUFMeta, weights_source: str, gguf_file, listing, st, client,
                          types: GGUFTypes | None = None) -> LlamaCppMemory:
        """The verdict over several GPUs: each device (CUDA0, CUDA1, ...) against its own budget (identical GPUs:
        the same budget each). Per device: its model buffer, the KV buffers of its layers, its compute buffer
        (an estimate with a stated error); host buffers (CPU, CPU_Mapped, CUDA_Host) are not device memory. The
        verdict is ``does_not_fit`` naming the first device that overflows, ``depends`` when a device's room lies
        within its compute estimate's error or its model buffer is unknown (no GGUF file)."""
        gpus = sorted({d for d in [*p.layer_devices, p.output_device] if d >= 0})
        names = [_buft_name(device, g) for g in gpus]
        kv_dev = {n: sum(c.buffers.get(n, 0) for c in p.kv_caches) for n in names}
        model_dev = {n: next((b.bytes for b in p.buffers if b.kind == "model" and b.buft == n), 0) for n in names}
        if not meta.tensors:
            model_dev = {n: None for n in names}
        comp_dev = {n: next((b for b in p.buffers if b.kind == "compute" and b.buft == n), None) for n in names}
        per_device: dict[str, dict[str, Any]] = {}
        fits, reason, conditions = True, None, []
        for n in names:
            m, kv, cb = model_dev[n], kv_dev[n], comp_dev[n]
            used = None if m is None else m + kv
            row = {"layers": sum(1 for d in p.layer_devices if d >= 0 and _buft_name(device, d) == n),
                   "output_layer": p.output_device >= 0 and _buft_name(device, p.output_device) == n,
                   "model_buffer_mib": None if m is None else round(m / MiB, 2), "kv_buffer_mib": round(kv / MiB, 2),
                   "compute_buffer_mib": None if cb is None or cb.bytes is None else round(cb.bytes / MiB, 2),
                   "compute_buffer_error_mib": None if cb is None or cb.error_bytes is None else
                   round(cb.error_bytes / MiB, 2),
                   "used_mib": None if used is None else round(used / MiB, 2), "budget_mib": round(budget / MiB, 2)}
            per_device[n] = row
            if used is None:
                row["fits"] = None
                conditions.append(f"{n}: its model buffer ({row['layers']} layers) fits beside its "
                                  f"{kv / GiB:.2f} GiB KV cache (give gguf_file for exact model buffers)")
                continue
            left = budget - used
            if used > budget:
                row["fits"] = False
            elif cb is None or cb.bytes is None:
                row["fits"] = None
                conditions.append(f"{n}: its compute buffer ({cb.note if cb is not None else 'not modelled'}) fits "
                                  f"in the {left / MiB:.0f} MiB left")
                continue
            elif cb.bytes + cb.error_bytes <= left:
                row["fits"] = True
                room = headroom_condition(n, left - cb.bytes)
                if room:
                    row["fits"] = None
                    conditions.append(f"{n}: {room}")
                    if not any(GPU_HEADROOM_SRC in note for note in p.notes):
                        p.notes.append(f"less than {GPU_HEADROOM_MIB} MiB left beside llama.cpp's buffers: "
                                       f"{GPU_HEADROOM_SRC}")
                    continue
            elif cb.bytes - cb.error_bytes > left:
                row["fits"] = False
            else:
                row["fits"] = None
                conditions.append(f"{n}: its compute buffer ({_cb_text(cb)}) fits in the {left / MiB:.0f} MiB left: "
                                  "the remaining memory lies within the estimate's stated error")
                continue
            if row["fits"] is False and fits:
                fits = False
                what = ("model buffers + KV cache" if used > budget else
                        f"model buffers + KV cache, plus a compute buffer of {_cb_text(cb)}")
                reason = (f"{n} overflows: llama.cpp would allocate {used / GiB:.2f} GiB there ({what}; "
                          f"{row['layers']} layers{' and the output layer' if row['output_layer'] else ''}), more "
                          f"than its {budget / GiB:.2f} GiB")
        if not fits:
            total = sum((r["used_mib"] or 0) for r in per_device.values()) * MiB
            if total <= budget * len(names):
                reason += (f"; the {len(names)} GPUs hold {total / GiB:.2f} GiB of model buffers and KV cache in "
                           f"all, within their {len(names)} x {budget / GiB:.2f} GiB: give a --tensor-split that "
                           "moves layers off this device (llama-server's --fit, on by default, does so itself "
                           "only when -ngl and -ts are not given)")
        if types is not None and types.condition:  # which of llama-quantize's types fit, in place of each device's
            conditions = [types.condition] + [c for c in conditions if "give gguf_file for exact" not in c]
        if st.get("fit") and st["fit"].get("condition"):
            conditions.append(st["fit"]["condition"])
        condition = "; ".join(conditions) if fits and conditions else None
        model_mib = {b.buft: (round(b.bytes / MiB, 2) if b.bytes is not None else None)
                     for b in p.buffers if b.kind == "model"}
        used_all = None if any(r["used_mib"] is None for r in per_device.values()) else \
            round(sum(r["used_mib"] for r in per_device.values()), 2)
        return LlamaCppMemory(plan=p, fits=fits, reason=reason, condition=condition, kv_cache_tokens=p.n_ctx,
                              fit=st.get("fit"),
                              max_concurrency=_max_concurrency(p), pool_scope=_pool_scope(p),
                              max_model_len=p.n_ctx_seq, gpu=gpu.name,
                              release=request.release, device_budget_mib=budget / MiB,
                              device_budget_source=f"each of the {p.n_gpus} GPUs: {budget_source}",
                              device_used_mib=used_all, kv_cache_mib=p.kv_bytes / MiB, model_buffer_mib=model_mib,
                              ollama=st["ollama"], weights_source=weights_source, gguf_file=gguf_file,
                              gguf_listing=listing, meta=meta, client_argv=client, draft=None, devices=per_device,
                              gguf_types=types,
                              resolved={"n_ctx": p.n_ctx, "n_seq_max": p.n_seq_max, "kv_unified": p.kv_unified,
                                        "flash_attn": p.flash_attn, "device": device, "n_gpus": p.n_gpus,
                                        "split_mode": p.split_mode, "tensor_split": p.tensor_split,
                                        "cache_type_k": st["cache_type_k"], "cache_type_v": st["cache_type_v"]})

    def _gguf_types(self, request, model: LoadedModel, gpu: GPU, device: str, budget: int,
                    draft: DraftMemory | None, p: LlamaCppPlan, n_layer_all: int) -> GGUFTypes:
        """No GGUF file given: each of llama-quantize's file types (:data:`.gguf_types.LISTED`) as llama-quantize would
        write it from the config (:func:`.quant_rules.derive_meta`), planned with this request's settings (Ollama's
        batch per file, :meth:`settings`) and every layer on the GPU(s), each device checked as the verdict checks a
        real GGUF (:func:`.gguf_types.check_device`; a Mac's whole unified memory too; a draft model's device buffers
        counted). Not modelled on a CPU-only build (no memory budget is checked there), beside a draft model whose
        memory is not modelled, and for architectures whose GGUF tensor table is not derived."""
        from .gguf_types import DeviceCheck, check_device, device_names, table

        out = GGUFTypes(n_ctx=p.n_ctx)
        if device == "CPU":
            out.not_modelled = ("a CPU-only build: the plan checks no memory budget on the CPU (the machine's RAM is "
                                "not an input), so no file type is checked against one")
            return out
        if draft is not None and draft.plan is None:
            out.not_modelled = f"the draft model's memory is not modelled ({draft.not_modelled})"
            return out
        d_used, d_compute = draft.device_bytes() if draft is not None else (0, None)
        unified = is_unified(gpu, device)
        d_uni = (unified_memory(draft.meta, draft.plan, ram=gpu.memory_bytes, working_set=budget, device_bytes=0)
                 if unified and draft is not None else None)

        def plan_kw(meta_t: GGUFMeta) -> dict[str, Any]:
            kw = self.plan_kwargs(request, self.settings(request, gpu, meta_t), device)
            kw["n_gpu_layers"] = -1
            return kw

        def check(p: LlamaCppPlan, meta_t: GGUFMeta):
            if p.n_gpus > 1 and p.split_mode != "none":
                devs = []
                for n in device_names(p):
                    m = next((b.bytes for b in p.buffers if b.kind == "model" and b.buft == n), 0) or 0
                    kv = sum(c.buffers.get(n, 0) for c in p.kv_caches)
                    cb = next((b for b in p.buffers if b.kind == "compute" and b.buft == n), None)
                    devs.append(check_device(DeviceCheck(n, m, kv, cb, budget), headroom_mib=GPU_HEADROOM_MIB,
                                             discrete=True))
                return devs, None
            dev_buffers = [b for b in p.buffers if on_device(b.buft)]
            m = sum(b.bytes or 0 for b in dev_buffers if b.kind == "model")
            kv = p.kv_bytes + sum(b.bytes or 0 for b in dev_buffers if b.kind not in ("model", "compute")) + d_used
            cb = next((b for b in dev_buffers if b.kind == "compute"), None)
            if cb is not None and cb.bytes is not None and d_compute is not None and d_compute.bytes is not None:
                cb = Buffer(kind="compute", buft=cb.buft, bytes=cb.bytes + d_compute.bytes,
                            error_bytes=(cb.error_bytes or 0) + (d_compute.error_bytes or 0), source=cb.source)
            names = device_names(p)
            d = check_device(DeviceCheck(names[0] if names else _buft_name(device, 0), m, kv, cb, budget),
                             headroom_mib=GPU_HEADROOM_MIB, discrete=device not in ("CPU", "Metal"))
            u = None
            if unified and cb is not None and cb.bytes is not None:
                u = unified_memory(meta_t, p, ram=gpu.memory_bytes, working_set=budget, device_bytes=m + kv + cb.bytes,
                                   extra_bytes=(d_uni or {}).get("total") or 0,
                                   extra_error=(d_uni or {}).get("error") or 0, starts=self.unified_starts(request))
            return [d], u

        try:
            out.rows = table(model.config, plan_kw=plan_kw, check=check)
        except (NotModelled, EngineInputError, ValueError) as exc:
            out.not_modelled = f"{getattr(exc, 'message', None) or exc}"
            return out
        if not out.rows:
            out.rows, out.not_modelled = None, "no file type derived"
            return out
        out.device = " and ".join(d.name for d in out.rows[0].devices)
        if request.max_model_len is None and self.name == "llama.cpp" and request.fit != "off":
            out.notes.append("-c is not given: the table is at the model's full context; llama-server's --fit (on by "
                             "default) first lowers the context, down to 4096 cells, for a file that does not fit at "
                             "it (common/fit.cpp:373-428): give --ctx-size for the context you want")
        n_gpu = request.n_gpu_layers
        if n_gpu not in (None, -1) and n_gpu <= n_layer_all:
            out.notes.append(f"the table puts every layer on the GPU; this request gives -ngl {n_gpu}, so the verdict "
                             "does not rest on it")
            return out
        out.condition = self._types_condition(request, out)
        return out

    def _types_condition(self, request, t: GGUFTypes) -> str:
        """The verdict's condition from the type table: the largest type that fits ("a GGUF at IQ2_XS or a smaller
        type"), what the next larger one needs, whether the type needs an importance matrix; or, when none fits
        every layer on the GPU, that layers then stay in CPU memory (llama-server's --fit, -ngl, or Ollama)."""
        from .gguf_types import imatrix_text, summary

        s = summary(t.rows)
        derived_words = ("model buffers derived from llama.cpp's quantization rules for the file llama-quantize writes "
                         "from this config, src/llama-quant.cpp:446-714; give gguf_file for a file's own buffers")

        def needs(r) -> str:
            bad = next((d for d in r.devices if d.fits is False), None) or next(
                (d for d in r.devices if d.fits is None), r.devices[0])
            if r.fits is False and bad.room is not None and bad.compute is not None and bad.compute.bytes is not None:
                keep = ("" if t.device.startswith(("MTL", "CPU")) else
                        f", and the {GPU_HEADROOM_MIB} MiB llama.cpp's --fit keeps free")
                return (f"{r.ftype} needs {bad.model / GiB:.2f} GiB of model buffers on {bad.name} against "
                        f"{max(bad.room, 0) / GiB:.2f} GiB free for them (beside the {bad.kv / GiB:.2f} GiB KV cache, "
                        f"the compute buffer of {_cb_text(bad.compute)}{keep})")
            return f"{r.ftype} {'does not fit' if r.fits is False else 'depends'}: {r.why}"

        best = s["best"]
        if best is not None:
            head = (f"a GGUF at {best.ftype} or a smaller type is used" if s["smaller_all_fit"] else
                    f"a GGUF at {', '.join(r.ftype for r in s['fitting'])} is used")
            cond = f"{head} (with every layer on {t.device}; {derived_words})"
            if s["above"] is not None:
                cond += f"; {needs(s['above'])}"
            imx = imatrix_text(best)
            return cond + (f"; and {imx}" if imx else "")
        if s["tight"]:
            r = s["tight"][0]
            return f"a GGUF at {r.ftype} is used and {r.why} (with every layer on {t.device}; {derived_words})"
        smallest = t.rows[-1]
        if self.name == "ollama":
            then = ("Ollama then keeps some layers in CPU memory (its llama-server's --fit from 0.30, its scheduler "
                    "before), which the machine's RAM must hold")
        elif request.fit == "off" or request.release == RELEASE_LEGACY:
            then = "give -ngl N to keep some layers in CPU memory, which the machine's RAM must hold"
        else:
            then = ("llama-server's --fit (on by default) then keeps some layers in CPU memory, which the machine's RAM "
                    "must hold (give gguf_file for the placement it picks)")
        return (f"the layers that do not fit stay in CPU memory: no llama-quantize file type fits every layer on "
                f"{t.device} ({needs(smallest)}; {derived_words}); {then}")

    def runs_llama_server_fit(self, request) -> bool:
        """Whether llama-server's ``--fit`` places the layers: llama-server does unless ``--fit off`` (handled by
        :func:`.fit.fit_for_request`); Ollama only from 0.30 (:meth:`Ollama.runs_llama_server_fit`)."""
        return True

    def unified_starts(self, request) -> str:
        """On a Mac whose memory the plan overflows: why the server starts all the same (the verdict's words)."""
        return LLAMA_SERVER_STARTS

    def _fit(self, request, meta: GGUFMeta, p: LlamaCppPlan, plan_kw: dict[str, Any], gpu: GPU,
             draft: DraftMemory | None) -> tuple[LlamaCppPlan, dict[str, Any] | None]:
        """llama-server's ``--fit`` on the plan (:func:`.fit.fit_for_request`): the plan to use (the fitted placement
        when fit changes it) and the ``fit`` JSON (with ``condition`` when the verdict depends on the build). The
        plan's generic "--fit" note is replaced by what fit does; each device's free memory is its budget
        (:func:`budget_bytes`, an idle GPU); a draft model's device bytes are added to every measurement."""
        from .fit import fit_for_request

        budget, budget_source = budget_bytes(gpu)
        extra = 0
        if draft is not None and draft.plan is not None and p.device != "CPU":
            d_used, d_compute = draft.device_bytes()
            extra = d_used + (d_compute.bytes or 0 if d_compute is not None else 0)
        user_ts = request.tensor_split is not None and any(float(x) for x in request.tensor_split.split(","))
        fitted, info, notes, condition = fit_for_request(
            meta, p, plan_kw, fit=request.fit, fit_target=request.fit_target, ctx_zero=request.max_model_len == 0,
            user_ngl=request.n_gpu_layers not in (None, -1), user_ts=user_ts, release=request.release,
            free_bytes=budget, free_source=budget_source, extra_bytes=extra,
            unified_ram=gpu.memory_bytes if is_unified(gpu, p.device) else None)
        fitted.notes[:] = [n for n in fitted.notes if not n.startswith("llama-server's --fit")] + notes
        if info is not None and condition:
            info["condition"] = condition
        return fitted, info

    def check_speculative(self, spec) -> None:
        """llama-server speculates with a draft model (``-md`` / ``-hfd``, ``--spec-type draft-simple``); the other
        methods (n-gram lookup, EAGLE-3, MTP: ``--spec-type ngram-* / draft-eagle3 / draft-mtp``) are not modelled
        here: refused by name rather than ignored."""
        if spec.method != "draft_model":
            raise EngineInputError("speculative_config", f"speculative method {spec.method!r} with llama.cpp is not "
                                   "modelled; the draft_model method (llama-server -md / -hfd) is")

    def _draft(self, request, p: LlamaCppPlan, st: dict[str, Any], device: str) -> DraftMemory:
        """The draft model's plan (:class:`DraftMemory`): its GGUF file is ``gguf_file_draft``, else the file
        ``-hfd <repo>`` downloads (Q4_K_M, else Q8_0, else the first: :data:`HFD_DEFAULT_SRC`) when the repo's files
        are listed. Its context as llama-server 0.3.36 makes it (:data:`DRAFT_SRC`): ``n_ctx`` = the target's
        (padded) n_ctx, ``n_seq_max`` = --parallel, the same -kvu / --swa-full / -fa / -b / -ub, K and V cache f16
        (-ctkd / -ctvd default), ``-ngld`` (default -1, every layer, as the target's default here), the target's
        device (-devd default), ``n_outputs_max`` = n_parallel. Anything that cannot be resolved leaves ``plan``
        None with the reason."""
        spec = request.speculative_config
        repo = spec.model
        out = DraftMemory(repo_id=repo, gguf_file=request.gguf_file_draft)
        if request.release != RELEASE_0_3_36:
            out.not_modelled = (f"the draft's context is modelled for {RELEASE_0_3_36} only (older llama-server builds "
                                "sized it from --ctx-size-draft / per slot)")
            return out
        dreq = request.model_copy(update={"model": repo, "revision": "main", "gguf_file": request.gguf_file_draft,
                                          "speculative_config": None, "gguf_file_draft": None})
        try:
            dmodel = LlamaCpp.load_model(self, dreq)
        except EngineInputError as exc:
            out.not_modelled = f"draft {repo}: {exc}"[:300]
            return out
        listing = LlamaCpp.listing(self, dreq, dmodel)
        gguf_file = request.gguf_file_draft
        if gguf_file and listing is not None and listing.files and listing.file(gguf_file) is None:
            raise EngineInputError("gguf_file_draft", not_a_file(listing, gguf_file))
        if gguf_file and listing is not None and listing.files:
            out.hf_tag = hf_quant_tag(listing, listing.file(gguf_file).name)
        if not gguf_file:
            if listing is None or not listing.files:
                out.not_modelled = (f"no GGUF file of {repo} is known: give gguf_file_draft (the draft's .gguf file)")
                return out
            gguf_file = hf_default_file(listing).name
            out.notes.append(f"draft gguf_file: {gguf_file}, the file `-hfd {repo}` downloads without a quant "
                             f"({HFD_DEFAULT_SRC}; {listing.source})")
        out.gguf_file = gguf_file
        try:
            dmeta, wsrc = LlamaCpp.meta(self, dreq.model_copy(update={"gguf_file": gguf_file}), dmodel, gguf_file,
                                        listing)
        except EngineInputError as exc:
            out.not_modelled = f"draft {repo}/{gguf_file}: {exc}"[:300]
            return out
        try:
            dp = plan(dmeta, n_ctx=p.n_ctx, n_seq_max=p.n_seq_max, kv_unified=request.kv_unified,
                      cache_type_k="f16", cache_type_v="f16", flash_attn=st["flash_attn"],
                      n_gpu_layers=request.n_gpu_layers_draft if request.n_gpu_layers_draft is not None else -1,
                      swa_full=request.swa_full, device=device, release=request.release, n_outputs_max=p.n_seq_max)
        except (NotModelled, ValueError) as exc:
            out.not_modelled = f"draft {repo}/{gguf_file}: {exc}"[:300]
            return out
        dp.notes = [n for n in dp.notes if "--fit" not in n]
        out.plan, out.meta, out.weights_source = dp, dmeta, wsrc
        out.notes.append(f"draft context: n_ctx {dp.n_ctx} (the target's, {SRC}common/speculative.cpp:2530), "
                         f"{dp.n_seq_max} seq(s), K/V f16 (-ctkd/-ctvd default), n_outputs_max {p.n_seq_max}: its "
                         "compute buffer reserves that many logits rows (the stated error was measured with n_outputs "
                         "= n_ubatch)")
        if wsrc:
            out.notes.append(f"draft tensor types {wsrc}")
        return out

    @staticmethod
    def _ollama_graph(meta: GGUFMeta, p: LlamaCppPlan, d: dict[str, Any], *, device: str, used: int | None,
                      budget: int, fits: bool) -> None:
        """Ollama's own compute-graph estimate (releases before 0.30.0, :func:`.memory.ollama_graph_size`) into the
        ``ollama`` dict (``graph_estimate_mib``, before 0.30 the figure its scheduler reserved per GPU to place
        layers), with a note when it would not fit beside the model buffers and KV cache although llama.cpp's own
        compute buffer does: those releases then offload fewer layers. Since 0.30.0 Ollama runs llama-server and
        reads the buffers llama.cpp logs (llm/llama_server.go memoryParsingWriter), i.e. the compute buffer above."""
        g = ollama_graph_size(meta, num_ctx=d["num_ctx"], num_parallel=d["num_parallel"],
                              kv_cache_type=d["kv_cache_type"], num_batch=d.get("num_batch", 512),
                              metal=device == "Metal")
        d["graph_estimate_mib"] = None if g is None else round(g["reserved_bytes"] / MiB, 2)
        d["graph_estimate_source"] = (OLLAMA_GRAPH_SRC if g is not None else
                                      f"not transcribed for architecture {meta.architecture!r} ({OLLAMA_GRAPH_SRC})")
        if g is not None and used is not None and fits and device != "CPU" and used + g["reserved_bytes"] > budget:
            p.notes.append(f"Ollama before 0.30 reserved its own graph estimate of {g['reserved_bytes'] / MiB:.1f} MiB "
                           f"per GPU (fs/ggml/ggml.go GraphSize), more than the {(budget - used) / MiB:.0f} MiB left: "
                           "those releases offload fewer layers to the GPU than llama.cpp's own buffers need.")

    def compat(self, request, model: LoadedModel, memory) -> CompatSummary:
        """llama.cpp starts when its plan does (quantized V without flash attention, cache types and the
        device are checked by :func:`.memory.plan`); what is left is the condition the memory plan states. The
        reasons name the backend, flash attention and the cache types."""
        cond = [memory.condition] if memory is not None and memory.fits and memory.condition else []
        reasons = []
        if memory is not None:
            r = memory.resolved
            fa = memory.plan.flash_attn
            p = memory.plan
            fa_text = {"on": "flash attention on (-fa on)", "off": "flash attention off (-fa off)",
                       "auto": ("flash attention auto: llama.cpp enables it when the backend runs the FLASH_ATTN_EXT op "
                                "for this head size and cache types (src/llama-context.cpp:506-560 resolve_fused_ops; "
                                "it then logs 'Flash Attention enabled')")}[fa]
            if fa != "off" and p.fa_supported is not None:
                if fa == "auto" and p.fa_enabled is False:
                    fa_text = f"flash attention auto resolves to disabled on {r['device']}: {p.fa_reason}"
                elif fa == "auto" and p.fa_enabled:
                    fa_text = f"flash attention auto resolves to enabled on {r['device']}: {p.fa_reason}"
                elif not p.fa_supported:
                    fa_text = (f"flash attention on (-fa on), but {r['device']} cannot run it: {p.fa_reason}; the "
                               "scheduler runs it on the CPU")
            reasons.append(f"{r['device']} backend ({memory.gpu}); {fa_text}; K cache {r['cache_type_k']}, V cache "
                           f"{r['cache_type_v']}")
        return CompatSummary(release=request.release, gpu=request.gpu, ok=None if cond else True, auto_conditions=cond,
                             auto_selected=memory.resolved.get("device") if memory is not None else None,
                             reasons=reasons)

    def _memory(self, request, model: LoadedModel) -> LlamaCppMemory:
        """``memory`` once per (request, model): the launch command and the speed reuse it (no second Hub read)."""
        key = ("llamacpp-memory", self.name, request.model_dump_json())
        hit = model.extra.get(key)
        if hit is None:
            hit = model.extra[key] = self._compute_memory(request, model)
        return hit

    def launch_argv(self, request, model: LoadedModel) -> list[str]:
        """``llama-server -m <gguf> -c ... -np ... -fa ... -ctk ... -ctv ...`` (an argv list); for a Hub GGUF repo
        ``-hf <repo>`` (the file llama-server picks) or ``-hf <repo> -hff <file>`` (the file named) instead of ``-m``."""
        mem = self._memory(request, model)
        listing = getattr(mem, "gguf_listing", None)
        if listing is not None and listing.files and not request.gguf_file:
            path = None  # no file named in a GGUF repo: llama-server -hf downloads the one the plan is for
        elif mem.gguf_file:
            path = mem.gguf_file
        else:  # not a GGUF repo: the user converts it first; an obvious placeholder, never a made-up file name
            path = f"<{model.repo_id.split('/')[-1]} converted to GGUF>.gguf"
        spec = request.speculative_config
        draft = {}
        hub_target = listing is not None and listing.files and (path is None or mem.gguf_file)
        if spec is not None and spec.method == "draft_model":
            # the draft's file given: -md FILE beside a local target (-m), but beside a Hub target (-hf) the draft
            # comes from the Hub too: -hfd <repo>:<QUANT> when that tag picks the file, else (0.3.36) -hfd <repo>
            # -md FILE (-md then names the repo's file, launch.launch_argv); no file given: -hfd <repo> (llama-server
            # downloads Q4_K_M / Q8_0 / the first file). The drafted tokens per step as --spec-draft-n-max
            fname, where = request.gguf_file_draft, {}
            tag = mem.draft.hf_tag if mem.draft is not None else None
            if not fname:
                where = {"draft_hf_repo": spec.model}
            elif not hub_target:
                where = {"draft_model_path": fname}
            elif tag:
                where = {"draft_hf_repo": f"{spec.model}:{tag}"}
            elif request.release == RELEASE_0_3_36:
                where = {"draft_hf_repo": spec.model, "draft_hf_file": fname}
            else:  # an older build: -md is a local path there; the draft must be downloaded first
                where = {"draft_model_path": fname}
            draft = {**where, "draft_max": spec.num_speculative_tokens,
                     "n_gpu_layers_draft": request.n_gpu_layers_draft, "release": request.release}
        kw = dict(n_ctx=request.max_model_len, n_parallel=mem.plan.n_seq_max, flash_attn=mem.plan.flash_attn,
                  cache_type_k=mem.resolved["cache_type_k"], cache_type_v=mem.resolved["cache_type_v"],
                  n_gpu_layers=request.n_gpu_layers, kv_unified=request.kv_unified, swa_full=request.swa_full,
                  fit=getattr(request, "fit", None), fit_target=getattr(request, "fit_target", None),
                  n_gpus=request.gpus, split_mode=request.split_mode, tensor_split=request.tensor_split,
                  main_gpu=request.main_gpu, gpu_backend=_buft_name(mem.resolved["device"], 0).rstrip("0"), **draft)
        if hub_target:
            # a Hub GGUF repo: llama-server -hf <repo> downloads the file the plan is for (-hff <file> when one is
            # named, else the one it picks), where a bare -m <file> needs it downloaded first
            return launch_argv(path, hf_repo=listing.repo_id, **kw)
        return launch_argv(path, **kw)

    def client_argv(self, request, model: LoadedModel, gguf_file: str | None, listing) -> list[str] | None:
        """llama-server is one command; Ollama adds the ``ollama run`` half (:meth:`Ollama.client_argv`)."""
        return None

    def speed_kwargs(self, request) -> dict[str, Any]:
        return speed_kwargs(request)

    def speed(self, request, model: LoadedModel, memory):
        """Decode / prefill speed from the GGUF bytes on each device (:func:`.speed.speed`), and with a draft
        model (``--speculative-config {"method": "draft_model", ...}``) the speculative step
        (:func:`.speed.spec_speed`, on ``.spec``); the efficiency is assumed (perf.py's llama.cpp row). Raises
        ``EngineInputError`` for what is not modelled (no tensor table, a GPU without bandwidth, a draft whose
        memory plan could not be made)."""
        from .speed import spec_speed
        from .speed import speed as llama_speed

        memory = memory or self._memory(request, model)
        if memory.fits is False:  # no server to time (the verdict says why and what would start)
            from calculator.engine.perf import NO_SERVER

            raise EngineInputError("configuration", NO_SERVER)
        kw = self.speed_kwargs(request)
        # Ollama's slots are OLLAMA_NUM_PARALLEL (its runner's --parallel)
        slots = "Ollama serves OLLAMA_NUM_PARALLEL slots" if request.runtime == "ollama" else \
            "llama.cpp serves its --parallel slots"
        if kw.get("request_rate") is not None:
            raise EngineInputError("request_rate", "a request rate (Poisson arrivals) is modelled for vLLM and SGLang; "
                                   f"{slots}: give concurrency instead")
        if kw["arrival"] == "burst":
            raise EngineInputError("num_prompts", "a burst of requests arriving at once is modelled for vLLM and "
                                   f"SGLang; {slots}: give concurrency instead")
        if kw["random_range_ratio"] is not None:
            raise EngineInputError("random_range_ratio", "the length spread (waves of prompts arriving together) is "
                                   f"modelled for vLLM and SGLang; {slots}, each prompt waiting for a free one: leave "
                                   "random_range_ratio out")
        if memory.meta is None or not memory.meta.tensors:
            raise EngineInputError("gguf_file", "the speed needs the GGUF file's tensors: give gguf_file (the .gguf "
                                   "file) to get a speed estimate")
        spec = request.speculative_config
        draft = memory.draft
        if spec is not None and (draft is None or draft.plan is None or draft.meta is None or not draft.meta.tensors):
            why = (draft.not_modelled if draft is not None and draft.not_modelled else "the draft's GGUF tensors are "
                   "not known")
            raise EngineInputError("speculative_config", f"the speculative speed needs the draft model's GGUF "
                                   f"file: {why}")
        gpu = get_gpu(request.gpu)
        try:
            mg = memory.plan
            multi = {} if mg.n_gpus == 1 or mg.split_mode == "none" else dict(
                n_gpus=mg.n_gpus, split_mode=mg.split_mode, tensor_split=mg.tensor_split)
            base = llama_speed(memory.meta, memory.plan, gpu, prompt_len=kw["prompt_len"], output_len=kw["output_len"],
                               concurrency=kw["concurrency"], n_ubatch=memory.plan.n_ubatch,
                               runtime_label=self.label, **multi,
                               **self.queue_words())
            if spec is not None:
                base.spec = spec_speed(memory.meta, memory.plan, draft.meta, draft.plan, gpu,
                                       k=spec.num_speculative_tokens, acceptance_rate=kw["acceptance_rate"],
                                       acceptance_length=kw["acceptance_length"], workload=kw["workload"],
                                       temperature=kw["temperature"], prompt_len=kw["prompt_len"],
                                       output_len=kw["output_len"], concurrency=kw["concurrency"])
                # the page shows the speed's notes: the speculative ones (the slowdown stop sign) join them
                base.notes += [n for n in base.spec.notes if n not in base.notes]
            return base
        except NotModelled as exc:
            raise EngineInputError(exc.field, f"not modelled: {exc}") from None
        except ValueError as exc:
            raise EngineInputError("prompt_len", str(exc)) from None

    def queue_words(self) -> dict[str, str]:
        """How this server queues requests beyond its slots, for :func:`.speed.speed`: the setting that sets the slots
        and the source of the queue (llama-server defers a task until a slot is free)."""
        from .speed import LLAMA_SERVER_QUEUE_SRC

        return {"slots_name": "-np", "queue_source": LLAMA_SERVER_QUEUE_SRC}

    #: the speed keys of the JSON answer (:meth:`speed_fields`), each always present (``null`` where it does not apply)
    speed_keys = ("ttft_ms", "itl_ms", "output_tokens_per_s", "speed_with_speculation", "speed", "speed_warnings",
                  "spec_speedup", "mean_acceptance_length", "acceptance_rate", "acceptance_source",
                  "break_even_acceptance_rate", "itl_ms_spec", "output_tokens_per_s_spec", "speed_sources")

    def speed_fields(self, request, model: LoadedModel, memory, speed=None) -> dict[str, Any]:
        """The API's speed keys (every one of :attr:`speed_keys`, ``null`` where it does not apply): ``ttft_ms``,
        ``itl_ms``, ``output_tokens_per_s`` of the server without drafts (``speed_with_speculation`` is ``false``:
        llama.cpp's speculative figures have keys of their own) and what they rest on; with a
        draft model also ``spec_speedup``, ``mean_acceptance_length``, ``acceptance_rate`` (llama.cpp's
        ``accept`` = accepted / drafted) and its source, ``break_even_acceptance_rate``, and ``itl_ms_spec`` /
        ``output_tokens_per_s_spec`` with speculation (``None`` where no acceptance is known: then the break-even
        rate is the answer). From ``speed`` (this request's :meth:`speed`, already computed) when given."""
        s = speed if speed is not None else self.speed(request, model, memory)
        words = EFFICIENCY_WORDS.get(s.efficiency_label, "not fitted to measurements")
        out = dict.fromkeys(self.speed_keys)
        out |= {"ttft_ms": s.ttft_ms, "itl_ms": s.itl_ms, "output_tokens_per_s": s.output_tokens_per_s,
                "speed_with_speculation": False,
                "speed": {"prompt_len": s.prompt_len, "output_len": s.output_len, "concurrency": s.concurrency,
                          "clients": s.clients, "queue_ms": s.queue_ms,
                          "mean_context": s.mean_context, "decode_step_ms": s.decode_step_ms,
                          "weight_bytes_per_token": s.weight_bytes_per_token,
                          "kv_bytes_per_token_step": s.kv_bytes_per_token_step, "efficiency_label": s.efficiency_label,
                          "efficiency": s.efficiency, "sources": s.sources, "notes": s.notes},
                "speed_sources": s.sources,  # the key the vLLM and SGLang answers give them under
                "speed_warnings": [f"{self.label} speed: efficiency {s.efficiency_label} ({words}); decode "
                                   "bandwidth-bound over the GGUF bytes read per token", *s.notes]}
        sp = s.spec
        if sp is not None:
            out.update(spec_speedup=sp.speedup, mean_acceptance_length=sp.acceptance_length,
                       acceptance_rate=sp.acceptance_rate, acceptance_source=sp.acceptance_source,
                       break_even_acceptance_rate=sp.break_even_rate, itl_ms_spec=sp.itl_ms,
                       output_tokens_per_s_spec=sp.output_tokens_per_s)
            out["speed"]["spec"] = sp.model_dump()
            out["speed_warnings"] += [n for n in sp.notes if n not in s.notes]
        return out


class Ollama(LlamaCpp):
    """Ollama (its llama.cpp runner) with Ollama's defaults."""

    name = "ollama"
    label = "Ollama"

    def queue_words(self) -> dict[str, str]:
        """Ollama admits ``OLLAMA_NUM_PARALLEL`` requests into its runner at once: a semaphore of ``numParallel``
        that each completion acquires, so the rest block until one finishes (before 0.30 its own runners; since 0.30
        the llama-server it starts with ``-np numParallel``, whose slots are the same)."""
        return {"slots_name": "OLLAMA_NUM_PARALLEL", "queue_source": OLLAMA_QUEUE_SRC}

    def multi_gpu(self, request) -> dict[str, Any]:
        """Ollama on several GPUs is not modelled: its scheduler (ollama server/sched.go) picks the GPUs and the
        layers per GPU from its own memory estimate, not llama.cpp's free-memory split."""
        if request.gpus > 1 or request.split_mode or request.tensor_split or request.main_gpu:
            field = "gpus" if request.gpus > 1 else ("split_mode" if request.split_mode else
                                                     "tensor_split" if request.tensor_split else "main_gpu")
            raise EngineInputError(field, "not modelled: Ollama on several GPUs (its scheduler, server/sched.go, picks "
                                   "the GPUs and the layers per GPU from its own memory estimate); use --runtime "
                                   "llama.cpp for llama.cpp's split, or one GPU")
        return {}

    def settings(self, request, gpu: GPU, meta: GGUFMeta | None = None, *, listing: GGUFListing | None = None,
                 gguf_file: str | None = None) -> dict[str, Any]:
        """Ollama's defaults (:func:`.memory.ollama_defaults`); the cells the runner is asked for (``kv_size``) use
        ``num_ctx`` cut to the model's training context, as Ollama does before asking for ``num_ctx x parallel``
        (:data:`OLLAMA_CTX_CUT_SRC`); ``num_ctx`` stays the setting (given, or Ollama's default)."""
        budget, _ = budget_bytes(gpu)
        # OLLAMA_CONTEXT_LENGTH=0 is Ollama's "automatic" (its default, envconfig/config.go:230), the VRAM-based
        # default context (server/routes.go:131-132 at v0.32.15: opts.NumCtx == 0 -> s.defaultNumCtx)
        d = ollama_defaults(total_vram_gib=budget / GiB, num_ctx=request.max_model_len or None,
                            num_parallel=request.parallel,
                            kv_cache_type=request.cache_type_k,
                            flash_attention=None if request.flash_attn in (None, "auto") else request.flash_attn == "on")
        asked = d.num_parallel
        if meta is not None:  # embedding models and some families get one slot (server/sched.go load)
            from .ollama import is_embedding, ollama_num_parallel

            n, why = ollama_num_parallel(meta.architecture, embedding=is_embedding(meta), requested=asked,
                                         release=request.ollama_release)
            if n != asked:
                d = d.model_copy(update={"num_parallel": n, "kv_size": d.num_ctx * n, "sources": d.sources | {
                    "num_parallel": f"OLLAMA_NUM_PARALLEL {asked}, but one slot: {why}"}})
        train = meta.n_ctx_train if meta is not None else 0
        if train and d.num_ctx > train:
            # num_ctx stays the setting (what OLLAMA_CONTEXT_LENGTH reproduces); the runner gets the cut one
            d = d.model_copy(update={"kv_size": train * d.num_parallel,
                                     "sources": d.sources | {"kv_size": f"num_ctx {d.num_ctx} cut to the model's "
                                                             f"training context {train} x num_parallel "
                                                             f"{d.num_parallel} ({OLLAMA_CTX_CUT_SRC})"}})
        out = {"n_ctx": d.kv_size, "n_seq_max": d.num_parallel, "cache_type_k": d.kv_cache_type,
               "cache_type_v": request.cache_type_v or d.kv_cache_type, "flash_attn": d.flash_attention,
               "ollama": d.model_dump() | {"num_parallel_requested": asked}}
        if ollama_rule(request.ollama_release).engine_required is None:
            self._flash_attention(request, gpu, out)
        if meta is not None:
            self._batch(request, gpu, meta, out, listing, gguf_file)
        return out

    def _flash_attention(self, request, gpu: GPU, st: dict[str, Any]) -> None:
        """Ollama 0.30+ passes ``--flash-attn on|off|auto`` to llama-server (llm/llama_server.go
        appendFlashAttentionArgs / LlamaServerFlashAttention): OLLAMA_FLASH_ATTENTION when set (the command sets it
        on for a quantized KV cache, :meth:`fa_env`), else ``off`` when a GPU does not support it
        (ml.FlashAttentionSupported: CUDA below compute 7.0 before 0.31.2, below 6.0 from it, or 7.2), else
        ``auto``. Into ``st["flash_attn"]`` (the plan's -fa) and the ``ollama`` dict with its source."""
        from . import ollama as og

        d, rel = st["ollama"], request.ollama_release
        env = self.fa_env(request, d["kv_cache_type"])
        device = device_of(gpu, request.llamacpp_backend)
        src = og.cite(rel, "ls.fa", "ls.fa_args", "device.fa")
        if env is not None:
            fa = "on" if env else "off"
            why = (f"OLLAMA_FLASH_ATTENTION={int(env)}" + ("" if request.flash_attn in ("on", "off") else
                                                        f" (the command sets it: a {d['kv_cache_type']} KV cache "
                                                        "needs flash attention)") + f": --flash-attn {fa}")
        else:
            ok = og.flash_attention_supported(device, gpu.compute_capability, rel)
            fa = "off" if ok is False else "auto"
            why = ("OLLAMA_FLASH_ATTENTION unset and " + (
                f"Ollama {rel} takes this GPU (compute {gpu.compute_capability}) for one without flash attention: "
                "--flash-attn off" if ok is False else
                "this GPU's compute capability not known: taken as supported, --flash-attn auto" if ok is None else
                "every GPU supports it: --flash-attn auto, which llama.cpp resolves per model and backend"))
        d["flash_attention"] = st["flash_attn"] = fa
        d["sources"]["flash_attention"] = f"{why} ({src})"

    @staticmethod
    def fa_env(request, kv_cache_type: str) -> bool | None:
        """``OLLAMA_FLASH_ATTENTION`` as the command sets it (:meth:`launch_argv`): the request's on / off, on for
        a quantized KV cache left on auto (it needs flash attention), else unset (None)."""
        fa = None if request.flash_attn in (None, "auto") else request.flash_attn == "on"
        if kv_cache_type not in ("f16", "f32", "bf16") and fa is None:
            fa = True
        return fa

    @staticmethod
    def file_bytes(meta: GGUFMeta, listing: GGUFListing | None, gguf_file: str | None) -> tuple[int, int | None, str]:
        """The size of the model file Ollama's scheduler stats (``PredictServerVRAM``: ``os.Stat(modelPath)``), as
        ``(low, high, why a range)``: exact from the Hub's listing or a read header; within the Hub page's rounding
        (10 MB) offline; else at least the tensor data (``high`` None). A split GGUF: not modelled (which blob Ollama
        stats), at least nothing."""
        f = listing.file(gguf_file) if listing is not None and gguf_file else None
        if (f is not None and len(f.parts) > 1) or len(meta.files) > 1:
            return 0, None, ("a split GGUF: the size Ollama's prediction reads (os.Stat of its model blob) is not "
                             "modelled")
        if f is not None and f.size_bytes:
            return f.size_bytes, f.size_bytes, ""
        header_read = bool(meta.data_offsets) and meta.data_offsets[0] > 0 and bool(meta.file_sizes)
        if header_read:
            return meta.file_sizes[0], meta.file_sizes[0], ""
        data = meta.file_sizes[0] if meta.file_sizes else sum(t.n_bytes for t in meta.tensors)
        if f is not None and f.listed_gb:
            lo, hi = max(data, int((f.listed_gb - 0.005) * 1e9)), int((f.listed_gb + 0.005) * 1e9)
            return lo, max(lo, hi), (f"the file's size is known as the Hub page lists it, {f.listed_gb:g} GB, to "
                                     "10 MB")
        return data, None, ("the model file's size is not known" + (" (at least its tensor data)" if data else ""))

    def _batch(self, request, gpu: GPU, meta: GGUFMeta, st: dict[str, Any], listing, gguf_file) -> None:
        """The batch Ollama passes to its runner (:func:`.ollama.ollama_batch`) into ``st`` (``n_batch``,
        ``n_ubatch`` for the plan) and the ``ollama`` dict (``num_batch``, ``batch``, ``sources["num_batch"]``). The
        scheduler's free memory is taken as the device's whole budget (an idle GPU, as the --fit model takes it);
        on a Mac Ollama takes the smaller of that and the system's free memory, which is not modelled."""
        from . import ollama as og

        d = st["ollama"]
        rel = request.ollama_release
        device = device_of(gpu, request.llamacpp_backend)
        budget, _ = budget_bytes(gpu)
        available = 0 if device == "CPU" else budget
        lo, hi, why = self.file_bytes(meta, listing, gguf_file)
        kv = og.predicted_kv_bytes(meta, d["kv_size"])
        b = og.ollama_batch(rel, embedding=og.is_embedding(meta), num_ctx=d["kv_size"] // d["num_parallel"],
                            num_parallel=d["num_parallel"], device=device, compute_capability=gpu.compute_capability,
                            fa_env=self.fa_env(request, d["kv_cache_type"]), available=available,
                            predicted=(lo + kv, None if hi is None else hi + kv), file_note=why)
        free = ""
        if b.rule == "automatic" and available and device == "Metal":
            free = (f"; the free memory Ollama's scheduler sees is taken as the Metal working set, {budget / GiB:.2f} "
                    "GiB (an idle Mac); Ollama takes the smaller of it and the system's free memory ("
                    + og.cite_lines(rel, "sched.avail_load") + "), which is not modelled: less never gives a larger "
                    "batch")
        elif b.rule == "automatic" and available:
            free = (f"; the free memory Ollama's scheduler sees is taken as the GPU's {budget / GiB:.2f} GiB (an idle "
                    "GPU, as the --fit model takes it; a display or other processes leave less, and less never gives "
                    "a larger batch)")
        d["num_batch"] = b.num_batch
        d["batch"] = b.to_json()
        d["sources"]["num_batch"] = f"{b.why}{free} ({b.source})"
        st["n_batch"], st["n_ubatch"] = b.n_batch, b.n_ubatch
        # an automatic context (OLLAMA_CONTEXT_LENGTH unset / 0): a load that fails out of memory is retried once
        # with it lowered, and the batch picked again for it
        retry = og.oom_retry(rel, num_ctx=d["kv_size"] // d["num_parallel"],
                             num_ctx_auto=request.max_model_len in (None, 0))
        if retry is not None:
            kv2 = og.predicted_kv_bytes(meta, retry["num_ctx"] * d["num_parallel"])
            b2 = og.ollama_batch(rel, embedding=og.is_embedding(meta), num_ctx=retry["num_ctx"],
                                 num_parallel=d["num_parallel"], device=device,
                                 compute_capability=gpu.compute_capability,
                                 fa_env=self.fa_env(request, d["kv_cache_type"]), available=available,
                                 predicted=(lo + kv2, None if hi is None else hi + kv2), file_note=why)
            retry |= {"num_batch": b2.num_batch, "num_batch_determined": b2.determined}
        d["oom_retry"] = retry

    def _compute_memory(self, request, model: LoadedModel) -> LlamaCppMemory:
        """llama.cpp's plan with Ollama's defaults, then the engine the Ollama release runs this architecture on
        (:func:`.ollama.ollama_engine`, into ``ollama["engine"]``): on llama.cpp's runner or llama-server the plan
        stands; on Ollama's own Go engine (0.19 .. 0.24) its own KV cache and model weights replace llama.cpp's
        buffers and its compute graph is said not to be modelled (:meth:`_go_engine`)."""
        mem = super()._compute_memory(request, model)
        if not request.max_model_len:  # the context Ollama chose, said where the answer shows it
            unset = ("OLLAMA_CONTEXT_LENGTH unset" if request.max_model_len is None else
                     "ctx_size 0: OLLAMA_CONTEXT_LENGTH=0, Ollama's automatic context (envconfig/config.go:230; "
                     "server/routes.go:131-132 at v0.32.15, opts.NumCtx == 0 -> the default)")
            mem.plan.notes.append(f"num_ctx {mem.ollama['num_ctx']:,} ({unset}): Ollama's default "
                                  f"from the GPU memory, {mem.ollama['sources']['num_ctx']}")
        d = mem.ollama
        if d["kv_size"] < d["num_ctx"] * d["num_parallel"]:  # cut to the training context (settings)
            used = d["kv_size"] // d["num_parallel"]
            mem.plan.notes.append(
                f"num_ctx {d['num_ctx']:,} ({'as given' if request.max_model_len else 'its default here'}) is more "
                f"than the model's training context, {used:,}: Ollama cuts it to that before it starts the runner "
                f"(\"requested context size too large for model\": if opts.NumCtx > trainCtx {{ opts.NumCtx = trainCtx "
                f"}}, {OLLAMA_CTX_CUT_SRC}), so the KV cache holds {d['kv_size']:,} cells"
                + (f" ({used:,} x OLLAMA_NUM_PARALLEL {d['num_parallel']})" if d["num_parallel"] > 1 else "")
                + f" and the command sets OLLAMA_CONTEXT_LENGTH={used}, the context Ollama uses")
        if d["num_parallel"] < d["num_parallel_requested"]:
            mem.plan.notes.append(f"{d['num_parallel']} slot, not the {d['num_parallel_requested']} asked: "
                                  f"{d['sources']['num_parallel']}; the KV cache, the speed and the command "
                                  f"(OLLAMA_NUM_PARALLEL={d['num_parallel']}) are for that")
        arch = mem.meta.architecture if mem.meta is not None else mem.plan.architecture
        try:
            rule = ollama_rule(request.ollama_release)
        except ValueError as exc:
            raise EngineInputError("ollama_release", str(exc).removeprefix("ollama_release: ")) from None
        eng = ollama_engine(arch, request.ollama_release)
        mem.ollama["release"] = request.ollama_release
        mem.ollama["engine"] = eng.to_json()
        if eng.runner == "llama-server" and d["flash_attention"] != (request.flash_attn or "auto"):
            mem.plan.notes.append(f"flash attention {d['flash_attention']}: {d['sources']['flash_attention']}")
        if "num_batch" in d:
            p, b = mem.plan, d["batch"]
            head = (f"-b {b['n_batch']} -ub {b['n_ubatch']} to llama-server" if eng.runner == "llama-server" else
                    f"n_batch {b['n_batch']}, n_ubatch {b['n_ubatch']} in its llama.cpp runner's context"
                    if eng.engine == "llama.cpp" else f"BatchSize {b['num_batch']} to its own Go engine")
            what = ("the compute buffers" + (" and the SWA cache" if len(p.kv_caches) > 1 else "") +
                    f" and the prefill passes are for n_ubatch {p.n_ubatch}" if eng.engine == "llama.cpp" else
                    "a sliding-window cache of its holds that many cells more; its compute graph is not modelled")
            mem.plan.notes.append(f"num_batch {d['num_batch']} ({head}; {what}): {d['sources']['num_batch']}")
        if eng.runner == "llama-server":  # GraphSize, the pre-0.30 scheduler's estimate, is gone (9db4bdbad)
            mem.plan.notes[:] = [n for n in mem.plan.notes if not n.startswith("Ollama before 0.30")]
        if eng.engine == "ollama":
            self._go_engine(request, mem, rule)
        u = mem.unified_memory
        if mem.fits is False and not self.runs_llama_server_fit(request) and request.n_gpu_layers in (None, -1) \
                and mem.resolved.get("device") != "CPU" and u is not None and u["status"] == "does_not_fit":
            # a Mac: moving layers to the CPU keeps them in the same memory, which the whole does not fit
            mem.reason = u["text"]
        elif mem.fits is False and not self.runs_llama_server_fit(request) and request.n_gpu_layers in (None, -1) \
                and mem.resolved.get("device") != "CPU":
            # before 0.30 Ollama's scheduler offloads only the layers its own estimate fits (num_gpu): it does not
            # refuse the model, and how many layers it keeps is not modelled here
            why = mem.reason
            mem.fits, mem.reason = True, None
            ram = ("which the machine's RAM must hold" if u is None or u["total"] is None else
                   f"on a Mac the same unified memory, which holds the whole ({u['text']})")
            mem.condition = (f"Ollama {request.ollama_release}'s scheduler puts fewer layers on the GPU (the layout its "
                             "runner measures, llm/server.go createLayout / buildLayout / assignLayers at v0.21.0: not "
                             f"modelled here) and runs the rest from CPU memory, {ram}; with every layer on the GPU: "
                             + why)
            mem.plan.notes.append("the buffers and the speed shown are for every layer on the GPU, which does not fit: "
                                  "Ollama before 0.30 runs with fewer and is slower; since 0.30 llama-server's --fit "
                                  "places the layers (--ollama-release 0.30.0 or later models that)")
        if request.n_gpu_layers not in (None, -1):
            self._num_gpu(request, mem, llama_server=self.runs_llama_server_fit(request))
        self._oom_retry_note(mem)
        return mem

    @staticmethod
    def _num_gpu(request, mem: LlamaCppMemory, *, llama_server: bool) -> None:
        """The layers on the GPU the request gives (``n_gpu_layers``) are Ollama's ``num_gpu`` option (api/types.go:591
        at v0.32.15, ``json:"num_gpu"``), which Ollama passes to llama-server as ``-ngl N`` (llm/llama_server.go:402-410
        at v0.32.15; without it no -ngl and --fit places the layers; before 0.30 its scheduler assigns that many layers,
        llm/server.go:1006, 1078-1101 assignLayers at v0.21.0). It is a model option, neither an ``ollama run``
        flag nor a server variable: ``mem.ollama["modelfile"]`` carries it as ``PARAMETER num_gpu N`` (Modelfile
        parameters are the API's options, api/types.go:1274 FormatParams) and a note says how to use it."""
        d = mem.ollama
        n = request.n_gpu_layers
        source = (mem.client_argv[-1] if mem.client_argv else
                  f"<{mem.gguf_file or 'the model'}>")
        conf = ollama_config(source, num_ctx=d["kv_size"] // d["num_parallel"], num_parallel=d["num_parallel"],
                             kv_cache_type=d["kv_cache_type"], num_gpu=n)
        d["num_gpu"] = n
        d["modelfile"] = conf["modelfile"]
        mem.plan.notes.append(
            f"num_gpu {n} (Ollama's name for the layers on the GPU, -ngl {n}: "
            + ("llm/llama_server.go:402-410 at v0.32.15 passes it to llama-server" if llama_server else
               "its scheduler assigns that many, llm/server.go:1006, 1078-1101 assignLayers at v0.21.0")
            + "; api/types.go:591 num_gpu) is a model option, not a flag of `ollama run` or a variable of `ollama serve`: "
            "put it in a Modelfile (" + conf["modelfile"].strip().replace("\n", " / ") + "), then `ollama create "
            f"NAME -f Modelfile` and `ollama run NAME`, or send \"options\": {{\"num_gpu\": {n}}} with each API "
            "request; without it Ollama places the layers itself")

    @staticmethod
    def _go_engine(request, mem: LlamaCppMemory, rule) -> None:
        """Ollama's own Go engine (:mod:`.ollama`): the KV cache by its kvcache rules (:func:`.ollama.engine_kv`),
        the model weights per device by its ggml backend's placement with every layer on the GPU
        (:func:`.ollama.engine_weights`), its log lines, and the fit on those; the compute graph is not modelled
        (:data:`.ollama.COMPUTE_NOT_MODELLED`), so a fit is conditional on it."""
        from . import ollama as og

        meta, d, p = mem.meta, mem.ollama, mem.plan
        device_kind = mem.resolved["device"]
        gpu_name = "CPU" if device_kind == "CPU" else og.ollama_device_name(_buft_name(device_kind, 0))
        requested = None if request.flash_attn in (None, "auto") else request.flash_attn == "on"
        fa, fa_why = og.engine_flash_attention(meta, rule, requested)
        kv = og.engine_kv(meta, num_ctx=d["num_ctx"], num_parallel=d["num_parallel"], kv_cache_type=d["kv_cache_type"],
                          flash_attention=fa, num_batch=d.get("num_batch", 512))
        kv_why = "" if kv is not None else (
            f"not modelled: the Go engine's cache layout of {meta.architecture!r} is not transcribed (transcribed: "
            "gemma3, gpt-oss, qwen3, qwen3moe, mistral3)")
        n_gpu = request.n_gpu_layers
        all_on_gpu = n_gpu in (None, -1) or n_gpu > meta.n_layer_all
        weights, weights_why = None, ""
        if device_kind == "CPU":
            weights_why = "not modelled: Ollama's own engine on the CPU only"
        elif not all_on_gpu:
            weights_why = "not modelled: Ollama's own engine with only some layers on the GPU (its scheduler's choice)"
        elif not meta.tensors:
            weights_why = "not modelled: no tensor table (give gguf_file)"
        else:
            weights = og.engine_weights(meta, gpu_name)
        notes = [f"Ollama {d['release']} runs {meta.architecture!r} on its own Go engine ({rule.label}); its KV cache, "
                 "weights and compute graph are its own, not llama.cpp's buffers. A separate projector file (mmproj) "
                 "makes those releases fall back to the llama.cpp runner (llm/server.go:149-156).",
                 f"flash attention {'on' if fa else 'off'} in Ollama's engine: {fa_why} ({og.FA_SRC})"]
        if kv is not None and kv["type_note"]:
            notes.append(kv["type_note"])
        if weights is not None and weights.get("note"):
            notes.append(weights["note"])
        mem.go_engine = {"device": gpu_name, "weights": weights, "weights_why": weights_why, "kv": kv, "kv_why": kv_why,
                         "flash_attention": fa, "compute": og.COMPUTE_NOT_MODELLED,
                         "log_lines": og.log_lines(weights=weights, kv=kv, gpu_name=gpu_name)}
        p.notes[:] = notes + [n for n in p.notes if not n.startswith("llama.cpp build:")]
        if mem.gguf_types is not None:  # the table is llama.cpp's buffers, which this engine does not make
            mem.gguf_types = GGUFTypes(not_modelled=f"Ollama {d['release']} runs {meta.architecture!r} on its own Go "
                                       "engine, whose weights, KV cache and compute graph are its own: the per-type "
                                       "table is llama.cpp's buffers")
        if kv is not None:
            mem.kv_cache_mib = kv["bytes"] / MiB
            full = next((c for c in kv["caches"] if c["name"] == "full"), kv["caches"][0])
            mem.kv_cache_tokens = full["cells"]
            mem.max_model_len = kv["capacity"]
            mem.resolved.update(cache_type_k=kv["type"], cache_type_v=kv["type"])
        mem.resolved["flash_attn"] = "on" if fa else "off"
        mem.model_buffer_mib = ({} if weights is None else
                                {gpu_name: round(weights[gpu_name] / MiB, 2), "CPU": round(weights["CPU"] / MiB, 2)})
        budget = int(mem.device_budget_mib * MiB)
        used = None
        if kv is not None and weights is not None:
            used = weights[gpu_name] + kv["bytes"]
        mem.device_used_mib = None if used is None else round(used / MiB, 2)
        if device_kind == "CPU":
            mem.fits, mem.reason = True, None
            mem.condition = "Ollama's own engine on the CPU: its memory is not modelled beyond the KV cache"
        elif used is not None and used > budget:
            mem.fits, mem.condition = False, None
            mem.reason = (f"Ollama's own engine would allocate {used / GiB:.2f} GiB on {gpu_name} (model weights + KV "
                          f"cache, before its compute graph), more than its {budget / GiB:.2f} GiB")
        elif used is not None:
            mem.fits, mem.reason = True, None
            mem.condition = (f"Ollama's compute graph (not modelled: its own engine) fits in the {(budget - used) / MiB:.0f}"
                             f" MiB left on {gpu_name}")
        else:
            mem.fits, mem.reason = True, None
            mem.condition = (f"the model weights and KV cache of Ollama's own engine ({weights_why or kv_why}) and its "
                             "compute graph (not modelled) fit on the device")
        u = mem.unified_memory
        if u is not None:
            # a Mac: the Go engine's own weights (every tensor of the file once) and KV cache, wherever its scheduler
            # puts them, are a floor of what the unified memory must hold (its compute graph is not modelled)
            floor = sum(t.n_bytes for t in meta.tensors) + (kv["bytes"] if kv is not None else 0)
            mem.unified_memory = u = dict(u, parts=None, metal=None, cpu=None, error=0, total=floor if meta.tensors
                                          else None)
            if not meta.tensors or floor <= u["usable"]:
                u["status"] = "not_modelled"
                u["text"] = ("Ollama's own engine: its compute graph is not modelled, so the whole Mac's share is not "
                             "either")
            else:
                u["status"] = "does_not_fit"
                u["text"] = (f"Ollama's own engine would hold {floor / GiB:.2f} GiB of model weights"
                             + (" and KV cache" if kv is not None else "") + " (before its compute graph) wherever its "
                             f"scheduler puts the layers, more than the {u['usable'] / GiB:.2f} GiB a model can use of "
                             f"this Mac's {u['ram'] / GiB:.2f} GiB of unified memory, which the CPU and the GPU share ("
                             f"{u['usable_rule']}). {Ollama.unified_starts_text(request)}")

    @staticmethod
    def _oom_retry_note(mem: LlamaCppMemory) -> None:
        """Where Ollama 0.30+ would retry a load that fails out of memory (an automatic context above 4,096,
        :func:`.ollama.oom_retry`) and the plan does not simply fit: a note with the context and batch of the
        retry, and that the command's OLLAMA_CONTEXT_LENGTH turns the retry off."""
        r = (mem.ollama or {}).get("oom_retry")
        if r is None or (mem.fits and not mem.condition):
            return
        nb = f"{r['num_batch']}" + ("" if r["num_batch_determined"] else " at most")
        mem.plan.notes.append(
            f"if llama-server fails to load out of memory, Ollama {mem.ollama['release']} retries once with its "
            f"automatic context lowered to num_ctx {r['num_ctx']:,} and num_batch picked again ({nb}) ({r['source']}); "
            "the plan is for the first load. The command sets OLLAMA_CONTEXT_LENGTH, which makes the context not "
            "automatic and so turns this retry off: leave it unset to keep it")

    def unified_starts(self, request) -> str:
        """:meth:`unified_starts_text` (the verdict's words for a Mac that cannot hold the model)."""
        return self.unified_starts_text(request)

    @staticmethod
    def unified_starts_text(request) -> str:
        """Ollama on a Mac starts a model its Mac cannot hold. Since 0.30: llama-server's --fit places it, and
        Ollama's scheduler compares its prediction with the free memory only to evict other loaded models
        (server/sched.go:543-570 at v0.32.15, b7871fc0d); for a Metal partial offload it also turns mmap off
        (sched.go:1158-1175 ``metal_partial_offload``, llm/llama_server.go:634-636 ``--load-mode none``) when its
        prediction exceeds the free memory, so the CPU's weights are read into memory rather than mapped. Before
        0.30: its scheduler moves the layers that do not fit Metal's working set (the device total Ollama reads,
        recommendedMaxWorkingSetSize: ml/backend/ggml/ggml/src/ggml-metal/ggml-metal-device.m:919-927 at v0.21.0,
        57653b8e4) to the CPU and on macOS checks no system memory ("Darwin has fully dynamic swap",
        llm/server.go:1054-1068 at v0.21.0), loading everything on the CPU when the GPU's share exceeds the whole
        RAM."""
        if ollama_rule(request.ollama_release).engine_required is None:
            return (f"Ollama {request.ollama_release} would still start it: llama-server's --fit fits only the Metal "
                    "device (common/fit.cpp:332-371), and Ollama's scheduler compares its prediction with the free "
                    "memory only to evict other models (server/sched.go:543-570 at v0.32.15) and, when the prediction "
                    "exceeds it, turns mmap off for such a partial offload (sched.go:1158-1175, --load-mode none: the "
                    "CPU's weights are then read into memory, not mapped)")
        return (f"Ollama {request.ollama_release} would still start it: its scheduler puts what does not fit Metal's "
                "working set on the CPU and on macOS checks no system memory (\"Darwin has fully dynamic swap\", "
                "llm/server.go:1054-1068 at v0.21.0)")

    def runs_llama_server_fit(self, request) -> bool:
        """Ollama 0.30+ starts llama-server with ``-c num_ctx x parallel -np parallel`` and no ``-ngl`` unless num_gpu
        is set ("Default behavior: let llama-server auto-detect", llm/llama_server.go:398-405 at v0.32.15; no
        ``--fit`` flag; LLAMA_ARG_FIT_TARGET only pads for a projector, :690-720), so llama-server's --fit places
        the layers; before 0.30 Ollama's own scheduler picks num_gpu."""
        return ollama_rule(request.ollama_release).engine_required is None

    def check_speculative(self, spec) -> None:
        """Not modelled for Ollama, refused by name: up to v0.32.6 Ollama has no speculative decoding (no draft-model
        option in its API, Modelfile or server: ollama/ollama#5800; PR #8134 closed unmerged); from v0.32.7 its
        llama.cpp runner gets a draft only as an MTP or DFlash one (``appendDraftArgs``, llm/llama_server.go:802-824 at
        v0.32.15: ``--spec-type draft-mtp`` / ``draft-dflash`` with ``--spec-draft-n-max`` when the draft's num_predict
        is set; absent up to v0.32.6), neither of which is the draft_model method (``--spec-type draft-simple``)."""
        raise EngineInputError("speculative_config", "Ollama's speculative decoding is not modelled: up to 0.32.6 "
                               "Ollama has none (https://github.com/ollama/ollama/issues/5800), and from 0.32.7 it runs "
                               "only MTP or DFlash drafts (llm/llama_server.go:802-824 appendDraftArgs at v0.32.15: "
                               "--spec-type draft-mtp / draft-dflash), not a separate draft model; use --runtime "
                               "llama.cpp (llama-server -md) for a draft model")

    def gguf_choice(self, request, listing: GGUFListing | None) -> tuple[str | None, str | None]:
        """Ollama pulls ``hf.co/{repo}`` without a tag as the repo's Q4_K_M file (https://huggingface.co/docs/hub/
        ollama: "By default, the Q4_K_M quantization scheme is used"), so without ``gguf_file`` the plan is for
        that file (without a Q4_K_M file Ollama picks "one reasonable quant type": not modelled, no file)."""
        if request.gguf_file or listing is None or not listing.files:
            return super().gguf_choice(request, listing)
        default = listing.default_for_ollama()
        if default is None:
            return None, None
        return default.name, (f"gguf_file: {default.name}, the Q4_K_M file `ollama run hf.co/{listing.repo_id}` pulls "
                              "by default (https://huggingface.co/docs/hub/ollama)")

    def client_argv(self, request, model: LoadedModel, gguf_file: str | None, listing) -> list[str] | None:
        """``ollama run hf.co/{user}/{repo}:{quant}`` for a GGUF repo on the Hub (:func:`.launch.ollama_run_argv`);
        None for a repo without GGUF files (Ollama cannot pull it from the Hub; the page says so)."""
        if listing is None or not listing.files:
            return None
        return ollama_run_argv(listing.repo_id, gguf_file)

    def launch_argv(self, request, model: LoadedModel) -> list[str]:
        """The Ollama server with the environment that reproduces the plan: ``env OLLAMA_CONTEXT_LENGTH=N (the
        context Ollama uses: num_ctx, cut to the model's training context as Ollama cuts it)
        OLLAMA_NUM_PARALLEL=... OLLAMA_KV_CACHE_TYPE=... [OLLAMA_FLASH_ATTENTION=1|0] ollama serve`` (an argv
        list; these are server settings, read by ``ollama serve``); the model is then run with
        ``LlamaCppMemory.client_argv``."""
        mem = self._memory(request, model)
        d = mem.ollama
        # a quantized cache needs flash attention: the command says so instead of relying on auto (fa_env)
        fa = self.fa_env(request, d["kv_cache_type"])
        # the context Ollama uses: num_ctx cut to the model's training context (OLLAMA_CTX_CUT_SRC), which is what
        # the plan is for; the setting above it would start the same runner but read as a larger KV cache
        return ollama_serve_argv(num_ctx=d["kv_size"] // d["num_parallel"], num_parallel=d["num_parallel"],
                                 kv_cache_type=d["kv_cache_type"], flash_attention=fa)


def _unified_json(u: dict[str, Any]) -> dict[str, Any]:
    """The API's ``unified_memory``: the whole Mac's share of the plan in GiB (``total_gib`` +- ``error_mib``, its
    ``parts_gib``; ``metal_gib`` what the Metal device holds, ``cpu_gib`` what the CPU adds), what a model can use
    of it (``usable_gib``, ``usable_rule``) and the figures that is made of (``ram_gib``, ``working_set_gib``,
    ``os_floor_gib``), the ``status`` and its sentence, and the sources."""
    g = (lambda b: None if b is None else round(b / GiB, 2))
    return {"status": u["status"], "total_gib": g(u["total"]), "metal_gib": g(u["metal"]), "cpu_gib": g(u["cpu"]),
            "parts_gib": None if u["parts"] is None else {k: g(v) for k, v in u["parts"].items()},
            "error_mib": None if u["error"] is None else round(u["error"] / MiB, 2), "usable_gib": g(u["usable"]),
            "usable_rule": u["usable_rule"], "ram_gib": g(u["ram"]), "working_set_gib": g(u["working_set"]),
            "os_floor_gib": g(u["os_floor"]), "text": u["text"], "source": u["source"]}


def _unified_context(p: LlamaCppPlan, u: dict[str, Any] | None) -> int | None:
    """When the Mac's memory is what a one-slot plan (-np 1) overflows: the --ctx-size at which its total would fit,
    the KV cache shrunk linearly with the cells and the compute estimate's error kept (a candidate for the
    suggestions, which plan it again and offer it only if it works). None otherwise, with several slots, or when
    even no KV cache would fit."""
    if u is None or u["status"] != "does_not_fit" or not p.n_ctx or not p.kv_bytes or p.n_seq_max != 1:
        return None
    room = u["usable"] - (u["total"] - p.kv_bytes) - u["error"]
    cells = int(room // (p.kv_bytes / p.n_ctx)) if room > 0 else 0
    return cells if 0 < cells < p.n_ctx_seq else None


def _device_context(p: LlamaCppPlan, *, device: str, budget: int, used: int | None, compute, fits: bool,
                    unified: dict[str, Any] | None, all_on_device: bool) -> int | None:
    """When a discrete GPU's memory is what a one-slot plan (-np 1, every layer's KV cache on the device) overflows:
    the --ctx-size at which model buffers + KV cache + the compute estimate's top + :data:`GPU_HEADROOM_MIB` fit the
    budget, the KV cache shrunk linearly with the cells (a candidate for the suggestions, which plan it again and
    offer it only if it works: the compute buffer also shrinks a little with the context). None otherwise."""
    if (fits or unified is not None or device in ("CPU", "Metal") or used is None or compute is None
            or compute.bytes is None or not p.n_ctx or not p.kv_bytes or p.n_seq_max != 1 or not all_on_device):
        return None
    room = budget - (used - p.kv_bytes) - compute.bytes - (compute.error_bytes or 0) - GPU_HEADROOM_MIB * MiB
    cells = int(room // (p.kv_bytes / p.n_ctx)) // 256 * 256 if room > 0 else 0
    return cells if 0 < cells < p.n_ctx_seq else None


def _cb_text(b) -> str:
    """A compute-buffer estimate in words: ``"~262.50 MiB +- 8.88 MiB, estimated from ..."``."""
    from .memory import COMPUTE_LABEL

    return f"~{b.bytes / MiB:.2f} MiB +- {b.error_bytes / MiB:.2f} MiB, {COMPUTE_LABEL}"


def hub_usable(model: LoadedModel | None = None) -> bool:
    """Whether to ask the Hub now: not ``HF_HUB_OFFLINE``, not inside the metadata layer's back-off after a
    failed call (``calculator.metadata.cache``, when loaded), and -- for a model -- its metadata came from the Hub
    (a sha) or the Hub answered for it."""
    import sys
    import time

    from calculator.metadata.hub import env_offline

    if env_offline():
        return False
    cache = sys.modules.get("calculator.metadata.cache")
    if cache is not None and time.monotonic() < getattr(cache, "_hub_down_until", 0.0):
        return False
    if model is not None:
        return bool(model.sha) or bool(model.extra.get("hub_reachable"))
    return True


#: GGUF ``general.architecture`` -> a Transformers ``model_type`` that :func:`.gguf_meta.meta_from_hf_config` and
#: the engine read (the inverse of HF_TO_GGUF_ARCH; Mistral checkpoints convert as ``llama``).
GGUF_TO_HF_TYPE = {v: k for k, v in reversed(list(HF_TO_GGUF_ARCH.items()))}


def config_from_gguf(meta: GGUFMeta) -> dict[str, Any]:
    """A Transformers-style config of a GGUF-only repo's model, from its header: the values the calculator reads
    (layers, widths, heads, head size, vocabulary, context, experts, sliding window). Raises
    ``EngineInputError`` for an architecture without a Transformers model_type here."""
    model_type = GGUF_TO_HF_TYPE.get(meta.architecture)
    if model_type is None:
        raise EngineInputError("model", f"GGUF architecture {meta.architecture!r} is not modelled without its "
                               "config.json")
    ffn = next((t.shape[1] for t in meta.tensors if t.name == "blk.0.ffn_up.weight"), None)
    cfg: dict[str, Any] = {
        "model_type": model_type, "architectures": [f"{meta.architecture} (from the GGUF header)"],
        "num_hidden_layers": meta.n_layer_all, "hidden_size": meta.n_embd,
        "num_attention_heads": meta.n_head[0] if meta.n_head else 0,
        "num_key_value_heads": meta.n_head_kv[0] if meta.n_head_kv else 0, "head_dim": meta.head_dim_k,
        "vocab_size": meta.n_vocab, "max_position_embeddings": meta.n_ctx_train,
        "tie_word_embeddings": meta.tensor("output.weight") is None,
    }
    if ffn:
        cfg["intermediate_size"] = ffn
    if meta.sliding_window:
        cfg["sliding_window"] = meta.sliding_window
    if meta.n_expert:
        cfg |= {"num_experts": meta.n_expert, "num_experts_per_tok": meta.n_expert_used}
    return cfg
