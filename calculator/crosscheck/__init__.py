"""Cross-check the memory engine against vLLM itself, on vLLM's CPU build, with tiny random-weight models.

During engine start-up vLLM sizes the KV cache with the same specs, grouping and block logic as on a GPU.
With ``VLLM_CPU_KVCACHE_SPACE=1`` the KV memory is exactly 1 GiB (``vllm/platforms/cpu.py:323-327``), so
the line ``CPU KV cache size: N tokens, Maximum concurrency for M tokens per request: X``
(``vllm/v1/core/kv_cache_utils.py:2300-2334``) depends only on the layer specs, their grouping and the
block size — an exact oracle for :mod:`calculator.engine.kv`.

For each :class:`Case` (a family from :mod:`calculator.crosscheck.tiny_models` and a variation: another
``max_model_len``, an fp8 KV cache, a speculative config) :func:`run_case`:

1. writes (or reuses) the tiny checkpoint under ``var/tiny-models/<family>``;
2. asks the engine: ``estimate(EngineInput(hf_config=config.json, gpu="CPU", kv_cache_memory_bytes=2**30,
   dtype="float32", ...))``;
3. starts ``python -m calculator.crosscheck.runner`` (``vllm.LLM(...)``) in its own process group, reads
   its output until the capacity line appears (or the process dies, or ``timeout`` s pass), then kills the
   whole process group; the log is kept in ``var/crosscheck-logs/``.

A case where vLLM refuses the model at start-up is reported with vLLM's own error line, not hidden.
"""
from __future__ import annotations

import json
import math
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .tiny_models import MODEL_DIR, ROOT, read_config, write_tiny_model

LOG_DIR = ROOT / "var" / "crosscheck-logs"
KV_SPACE_GIB = 1
# `vllm serve`'s CPU default (vllm/engine/arg_utils.py:2975-2983); the LLM class would take 4096.
MAX_NUM_BATCHED_TOKENS = 2048
# "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"
# (vllm/v1/core/kv_cache_utils.py:2327 in 0.32)
CAPACITY_RE = re.compile(r"(?P<device>[A-Z]+(?: \+ host)?) KV cache size: (?P<tokens>[\d,]+) tokens, "
                         r"Maximum concurrency for (?P<max_len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x")
# "Using %s backend." (vllm/platforms/cpu.py:163,175: MLA backends only; non-MLA is always CPU_ATTN)
BACKEND_RE = re.compile(r"Using (?P<backend>[A-Z0-9_]+) backend\.")
# An exception line of a Python traceback: "ValueError: ..." / "NotImplementedError: ..."
ERROR_RE = re.compile(r"(?:^|\s)(?P<err>[A-Za-z_.]*(?:Error|Exception): .+)$")


@dataclass(frozen=True)
class Case:
    """One cross-check: a tiny model family and how vLLM is started.

    ``speculative``: vLLM's ``speculative_config`` dict; a ``model`` value naming a tiny family
    (``draft-llama``) is replaced by that family's directory. ``note``: what the case checks.
    """

    family: str
    variation: str = "default"
    max_model_len: int = 1024
    dtype: str = "float32"
    kv_cache_dtype: str = "auto"
    attention_backend: str | None = None
    speculative: dict[str, Any] | None = None
    # "dummy": vLLM fills random weights instead of reading the checkpoint (the KV capacity does not
    # depend on weight values); used where transformers cannot write a layer vLLM loads (MTP modules).
    load_format: str = "auto"
    note: str = ""
    # False: left out of the CI test set to keep it under 5 minutes (the command still runs it).
    ci: bool = True

    @property
    def name(self) -> str:
        return f"{self.family}/{self.variation}"


_MLA = "CPU_MLA"  # the default AMX_MLA backend refuses float32 weights; the reference CPU_MLA takes them
CASES: list[Case] = [
    Case("llama", note="dense GQA (4 heads over 2 KV heads, head_dim 32)"),
    Case("llama", "max_model_len=2048", max_model_len=2048, ci=False),
    Case("llama", "kv_cache_dtype=fp8", kv_cache_dtype="fp8"),
    Case("llama", "spec=ngram", speculative={"method": "ngram", "num_speculative_tokens": 3,
                                              "prompt_lookup_max": 3, "prompt_lookup_min": 2}, ci=False),
    Case("llama", "spec=draft_model", speculative={"method": "draft_model", "model": "draft-llama",
                                                    "num_speculative_tokens": 2}),
    Case("llama", "spec=eagle", speculative={"method": "eagle", "model": "eagle-llama",
                                              "num_speculative_tokens": 2}),
    Case("llama-mha", note="multi-head attention (KV heads = heads, head size hidden/heads)"),
    Case("qwen3", note="explicit head_dim 64 != hidden/heads, q/k norm"),
    Case("gemma2", note="sliding window 64 on alternate layers"),
    Case("gemma2", "max_model_len=4096", max_model_len=4096,
         note="window + in-flight tokens (63 + 2048) < max_model_len: the sliding layers need fewer blocks"),
    Case("gemma3", note="5 sliding : 1 global (6 layers)"),
    Case("gemma3", "max_model_len=4096", max_model_len=4096, ci=False),
    Case("gemma4", note="Gemma 4: 5 sliding layers (4 KV heads x 32) : 1 global layer with its own head size 64 and "
         "1 KV head (global_head_dim, num_global_key_value_heads): half the page, so twice the block size"),
    Case("gemma4", "max_model_len=4096", max_model_len=4096, ci=False),
    Case("gemma4-kv-shared", note="Gemma 4 with num_kv_shared_layers=4: the last 4 of 10 layers keep no cache"),
    Case("deepseek-v32", attention_backend=_MLA, load_format="dummy",
         note="DeepSeek-V3.2 sparse MLA: the CPU build refuses it (the engine too, with vLLM's reason)"),
    Case("kimi-linear", load_format="dummy", ci=False,
         note="Kimi Linear (KDA + MLA): the CPU build cannot import it (the engine refuses KDA on the CPU)"),
    Case("gpt-oss", note="attention sinks, alternating sliding window, MoE"),
    Case("mixtral", note="MoE, full attention"),
    Case("qwen3-moe", note="MoE, full attention"),
    Case("deepseek-v2", attention_backend=_MLA, note="MLA kv_lora_rank 64 + rope 16, no q_lora"),
    Case("deepseek-v3", attention_backend=_MLA, note="MLA with q_lora_rank"),
    Case("deepseek-v3-mtp", attention_backend=_MLA, note="MLA + 1 MTP layer in config, no speculation", ci=False),
    # The draft picks its own backend: vLLM never inherits --attention-backend for it
    # (vllm/v1/spec_decode/llm_base_proposer.py:1282-1290, 0.32), so on an AMX host it would get AMX_MLA
    # (vllm/platforms/cpu.py:150-163), whose weight packing refuses float32 ("expect weight to be bfloat16,
    # float16, int8, fp8_e4m3 or uint8", amx_mla.py:303). The speculative config's own attention_backend
    # (vllm/config/speculative.py:424) keeps CPU_MLA on every host: the case runs the same everywhere.
    Case("deepseek-v3-mtp", "spec=mtp", attention_backend=_MLA, load_format="dummy",
         speculative={"method": "mtp", "num_speculative_tokens": 1, "attention_backend": _MLA},
         note="MTP draft layer shares the KV pool; transformers saves no MTP weights, so dummy weights"),
    # The draft's VllmConfig is rebuilt with the speculative config's attention backend, which re-runs the CPU
    # platform's check_and_update_config on the shared cache config (llm_base_proposer.py:1285-1290,
    # config/vllm.py:1991): with none given, an AMX host takes the AMX_MLA branch and sets block_size 128
    # (platforms/cpu.py:250-290), a host without AMX keeps CPU_MLA's 16. Pinned, it is 16 everywhere; the
    # non-MLA head itself still gets CPU_ATTN (cpu.py:176-178).
    Case("deepseek-v3", "spec=eagle3", attention_backend=_MLA, load_format="dummy",
         speculative={"method": "eagle3", "model": "eagle3-llama", "num_speculative_tokens": 2,
                      "attention_backend": _MLA},
         note="MLA target + non-MLA EAGLE-3 head (GQA 2 x 32): 5,120 B and 8,192 B pages in one "
              "UniformTypeKVCacheSpecs group (kv_cache_utils.py:2189). Sizing only: after logging its capacity "
              "the CPU build stops binding kernels, \"No common block size for 16 (CPU_MLA: [16]; CPU_ATTN: "
              "[MultipleOf(32)])\" (select_common_block_size, v1/worker/utils.py:515)"),
    Case("qwen3-next", note="gated delta-net + full attention every 2nd layer"),
    Case("qwen3-next", "kv_cache_dtype=fp8", kv_cache_dtype="fp8",
         note="fp8 attention pages are 4x smaller than the float32 GDN state: attention block size raised"),
    Case("qwen3-next", "spec=ngram", speculative={"method": "ngram", "num_speculative_tokens": 2,
                                                   "prompt_lookup_max": 3, "prompt_lookup_min": 2},
         note="ngram adds no KV layers but a state page per speculative token and 2 conv columns"),
    Case("granite4-hybrid", note="Mamba-2 + 1 attention layer in 4 (GraniteMoeHybrid)"),
    Case("granite4-hybrid", "dtype=bfloat16", dtype="bfloat16",
         note="bf16 conv state, float32 SSM state (CPU rule), bf16 attention pages"),
    Case("bamba", note="Mamba-2 + 1 attention layer in 4"),
    Case("jamba", note="Mamba-1 + attention every 2nd layer"),
    Case("nemotron-h", note="Mamba-2 / MLP / attention pattern M-M*"),
    Case("nemotron-h", "dtype=bfloat16", dtype="bfloat16", note="float32 SSM state (Nemotron-H default)", ci=False),
]


def find_cases(family: str = "all", variation: str | None = None) -> list[Case]:
    """The cases of ``family`` (``all`` for every family), optionally one ``variation``.

    Raises:
        ValueError: no case matches (the message lists the known families / variations).
    """
    out = [c for c in CASES if family in ("all", c.family) and (variation is None or c.variation == variation)]
    if not out:
        fams = sorted({c.family for c in CASES})
        vars_ = sorted({c.variation for c in CASES if family in ("all", c.family)})
        raise ValueError(f"no cross-check case for family={family!r} variation={variation!r}; "
                         f"families: {', '.join(fams)}; variations: {', '.join(vars_) or '-'}")
    return out


@dataclass
class VllmRun:
    """What one vLLM start-up logged. ``tokens``/``concurrency`` are None when no capacity line appeared."""

    tokens: int | None = None
    concurrency: float | None = None
    logged_max_model_len: int | None = None
    backend: str | None = None
    error: str | None = None
    seconds: float = 0.0
    log_path: str = ""
    timed_out: bool = False


def parse_capacity_line(line: str) -> tuple[int, int, float] | None:
    """``(tokens, max_model_len, max_concurrency)`` from vLLM's capacity line, or None.

    >>> parse_capacity_line("CPU KV cache size: 524,288 tokens, Maximum concurrency for 1,024 tokens "
    ...                     "per request: 512.00x")
    (524288, 1024, 512.0)
    """
    m = CAPACITY_RE.search(line)
    if not m:
        return None
    return int(m["tokens"].replace(",", "")), int(m["max_len"].replace(",", "")), float(m["conc"])


def _error_reason(lines: list[str]) -> str | None:
    """The last exception line of the child's output (vLLM's refusal), with the line before it when it
    is a message continuation."""
    for i in range(len(lines) - 1, -1, -1):
        m = ERROR_RE.search(lines[i].strip())
        if m and "Traceback" not in lines[i]:
            err = m["err"].strip()
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if nxt.startswith((" ", "\t")) and nxt.strip():  # pydantic puts the message on the next line
                err += " " + nxt.strip()
            return err[:500]
    tail = [ln.strip() for ln in lines if ln.strip()][-3:]
    return " | ".join(tail)[:500] if tail else None


def vllm_kwargs(case: Case, model_dir: Path) -> dict[str, Any]:
    """The ``vllm.LLM`` keyword arguments of a case (float32, eager, 1 in-flight batch on the CPU)."""
    kw: dict[str, Any] = dict(model=str(model_dir), dtype=case.dtype, max_model_len=case.max_model_len,
                              enforce_eager=True, seed=0, max_num_seqs=16,
                              max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
                              # one process: the capacity is the same, the start-up 3x faster on 2 cores
                              distributed_executor_backend="uni")
    if case.load_format != "auto":
        kw["load_format"] = case.load_format
    if case.kv_cache_dtype != "auto":
        kw["kv_cache_dtype"] = case.kv_cache_dtype
    if case.attention_backend:
        kw["attention_backend"] = case.attention_backend
    if case.speculative:
        spec = dict(case.speculative)
        if spec.get("model"):
            spec["model"] = str(write_tiny_model(spec["model"]))
        kw["speculative_config"] = spec
    return kw


def run_vllm(case: Case, model_dir: Path, timeout: float = 120.0) -> VllmRun:
    """Start vLLM's engine for ``case`` in a subprocess (argv list, own process group) and return what it
    logged. The process group is killed once the capacity line appears, the process exits, or ``timeout``
    seconds pass — nothing is left running."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{case.family}--{re.sub(r'[^A-Za-z0-9_.=-]', '_', case.variation)}.log"
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=str(KV_SPACE_GIB), PYTHONUNBUFFERED="1",
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               # engine core in this process (with the "uni" executor): one vLLM import instead of three
               VLLM_ENABLE_V1_MULTIPROCESSING="0")
    argv = [sys.executable, "-m", "calculator.crosscheck.runner", json.dumps(vllm_kwargs(case, model_dir))]
    run = VllmRun(log_path=str(log_path))
    lines: list[str] = []
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=str(ROOT), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
    q: queue.Queue[str | None] = queue.Queue()

    def _reader() -> None:
        assert proc.stdout is not None
        for ln in proc.stdout:
            q.put(ln)
        q.put(None)

    threading.Thread(target=_reader, daemon=True).start()
    try:
        while True:
            left = timeout - (time.monotonic() - start)
            if left <= 0:
                run.timed_out = True
                break
            try:
                line = q.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                break
            lines.append(line)
            if run.backend is None and (m := BACKEND_RE.search(line)):
                run.backend = m["backend"]
            parsed = parse_capacity_line(line)
            if parsed:
                run.tokens, run.logged_max_model_len, run.concurrency = parsed
                break
    finally:
        _kill_group(proc)
        run.seconds = round(time.monotonic() - start, 1)
        log_path.write_text("".join(lines))
    if run.tokens is None:
        run.error = ("timed out after %.0f s without a capacity line" % timeout) if run.timed_out else \
            (_error_reason(lines) or f"vLLM exited with code {proc.returncode} before logging its capacity")
    elif run.backend is None:
        run.backend = "CPU_ATTN"  # the CPU platform's only non-MLA backend; it logs no line for it
    return run


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the child's process group (EngineCore and workers included), SIGKILL what is left after 5 s."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = None
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if pgid is not None:
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=wait)
            if pgid is not None and sig == signal.SIGTERM:
                # the leader exited; make sure no engine/worker child of the group survives it
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            break
        except subprocess.TimeoutExpired:
            continue


def predict(case: Case, model_dir: Path):
    """The engine's prediction for the same start-up (``EstimateResult``). The draft's config travels as
    ``draft_hf_config``; vLLM's ``speculative_config`` keys become a :class:`SpeculativeConfig`."""
    from calculator.engine import estimate
    from calculator.engine.memory import host_has_avx512_bf16
    from calculator.engine.schemas import EngineInput, SpeculativeConfig

    spec = None
    draft_cfg = None
    if case.speculative:
        s = dict(case.speculative)
        if s.get("model"):
            draft_cfg = read_config(write_tiny_model(s["model"]))
        spec = SpeculativeConfig(**s)
    inp = EngineInput(hf_config=read_config(model_dir), gpu="CPU", kv_cache_memory_bytes=KV_SPACE_GIB * 2**30,
                      max_model_len=case.max_model_len, dtype=case.dtype, kv_cache_dtype=case.kv_cache_dtype,
                      enforce_eager=True, max_num_seqs=16, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
                      speculative_config=spec, draft_hf_config=draft_cfg,
                      attention_backend=case.attention_backend, model_label=f"tiny {case.family}",
                      cpu_avx512_bf16=host_has_avx512_bf16())  # vLLM runs on this same CPU
    return estimate(inp)


@dataclass
class CaseResult:
    """One row of the cross-check report.

    ``status``: ``exact``; ``within_one_block`` (|difference| ≤ ``one_block_tokens``, the tokens one
    more block adds: ``max_model_len / blocks_per_request``); ``differs``; ``refused`` (vLLM logged no
    capacity line; ``reason`` is its error); ``engine_error`` (the engine raised; ``reason``).
    """

    family: str
    variation: str
    predicted_tokens: int | None
    predicted_blocks: int | None
    predicted_block_size: int | None
    vllm_tokens: int | None
    vllm_concurrency: float | None
    predicted_concurrency: float | None
    difference: int | None
    one_block_tokens: int | None
    status: str
    backend: str | None
    reason: str | None = None
    note: str = ""
    seconds: float = 0.0
    log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_case(case: Case, timeout: float = 120.0) -> CaseResult:
    """Write the tiny model, predict, start vLLM, compare. Never raises for a refused model or an engine
    error (those are results); raises only for harness faults (the model cannot be written)."""
    model_dir = write_tiny_model(case.family)
    pred = None
    engine_err = None
    try:
        pred = predict(case, model_dir)
    except Exception as exc:  # an engine bug is a finding of the cross-check, reported per case
        engine_err = f"{type(exc).__name__}: {exc}"
    run = run_vllm(case, model_dir, timeout=timeout)
    p_tokens = pred.kv_cache_tokens if pred else None
    one_block = None
    if pred and pred.num_gpu_blocks and pred.max_concurrency:
        per_request = pred.num_gpu_blocks / pred.max_concurrency
        one_block = math.ceil(pred.max_model_len / per_request) if per_request else None
    diff = p_tokens - run.tokens if (p_tokens is not None and run.tokens is not None) else None
    if run.tokens is None:
        status, reason = "refused", run.error
    elif pred is None:
        status, reason = "engine_error", engine_err
    elif diff == 0:
        status, reason = "exact", None
    elif one_block is not None and abs(diff) <= one_block:
        status, reason = "within_one_block", None
    else:
        status, reason = "differs", None
    if engine_err and status == "refused":
        reason = f"{reason}; engine: {engine_err}"
    return CaseResult(
        family=case.family, variation=case.variation, predicted_tokens=p_tokens,
        predicted_blocks=pred.num_gpu_blocks if pred else None,
        predicted_block_size=pred.block_size if pred else None, vllm_tokens=run.tokens,
        vllm_concurrency=run.concurrency, predicted_concurrency=pred.max_concurrency if pred else None,
        difference=diff, one_block_tokens=one_block, status=status, backend=run.backend, reason=reason,
        note=case.note, seconds=run.seconds, log=os.path.relpath(run.log_path, ROOT),
        extra={"kv_bytes_per_token": pred.kv_bytes_per_token if pred else None,
               "groups": [lk.model_dump() for lk in pred.kv_by_layer_type] if pred else None},
    )


__all__ = ["CASES", "Case", "CaseResult", "MODEL_DIR", "VllmRun", "find_cases", "parse_capacity_line", "predict",
           "run_case", "run_vllm"]
