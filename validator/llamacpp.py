"""llama.cpp as the validator's second runtime on the CPU: llama-cpp-python's OpenAI-compatible server.

Plain Python (no Django). What a llama.cpp run needs beyond vLLM's machinery (``validator.runner``:
process groups, deadline, sweep; ``validator.bench``: the serving benchmark):

* ``server_available()``: whether ``python -m llama_cpp.server`` can start here (llama-cpp-python and its
  ``[server]`` extra importable) and llama-cpp-python's release;
* ``write_run_gguf(tokenizer_dir, config, path)``: the GGUF the run serves, written like the cross-check's
  (``calculator.runtimes.llamacpp.crosscheck.write_tiny_gguf``: a llama of the built-in model's shapes, zero
  weights) with the built-in model's byte-level BPE vocabulary and merges, so that the benchmark's prompts
  (made with that tokenizer) tokenize in llama.cpp;
* ``server_argv(...)``: the ``python -m llama_cpp.server`` argv (llama-cpp-python's own flag names);
* ``parse_startup_log(text)``: what llama.cpp logged (the cross-check's ``parse_log``) plus the CPU features
  of the ggml-cpu build (its ``CPU : SSE3 = 1 | ...`` system-info line), which decide its repacked buffer;
* ``predict(gguf_path, settings, cpu_features)``: ``calculator.runtimes.llamacpp.memory.plan`` for the GGUF;
* ``memory_comparison(plan, logged)``: the report's predicted-vs-measured rows (KV cache, model buffers,
  compute buffer with the plan's stated error), from the cross-check's ``compare``;
* ``speed_comparison(...)``: ``calculator.runtimes.llamacpp.speed.speed`` on the catalog's CPU row against the
  benchmark's mean TTFT / TPOT / output tok/s.

Speculative decoding: llama-cpp-python 0.3.36's server takes ``--draft_model prompt-lookup-decoding`` only
(llama_cpp/server/settings.py ``draft_model``: "One of (prompt-lookup-decoding)"); a GGUF draft model needs
llama.cpp's ``llama-server --model-draft``, which this site does not build. So a llama.cpp run measures the
baseline only (``DRAFT_NOTE``).
"""
from __future__ import annotations

import importlib.util
import json
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

MiB = 2**20
SERVER_MODULE = "llama_cpp.server"
SERVER_COMMAND = [sys.executable, "-m", SERVER_MODULE]
#: llama_cpp.server has no /health (llama_cpp/server/app.py routes): ready once it lists its model
HEALTH_PATH = "/v1/models"
#: modules ``python -m llama_cpp.server`` imports (llama-cpp-python's ``[server]`` extra, setup metadata)
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings", "yaml")
INSTALL_HINT = "pip install 'llama-cpp-python[server]==0.3.36'"
DRAFT_NOTE = ("draft-model runs need llama.cpp's llama-server (--model-draft), which this site does not build: "
              "llama-cpp-python's server offers prompt-lookup decoding only (--draft_model "
              "prompt-lookup-decoding), so a llama.cpp run measures the baseline, without speculative decoding")
CPU_INFO_RE = re.compile(r"^CPU : (.*AVX.*|.*NEON.*)$", re.M)


def server_available() -> tuple[str | None, str]:
    """``(release, "")`` when ``python -m llama_cpp.server`` can start here (llama-cpp-python installed and
    every module of its ``[server]`` extra importable), else ``(None, reason)``."""
    try:
        release = metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return None, f"llama-cpp-python is not installed ({INSTALL_HINT})"
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        return None, f"llama-cpp-python {release} lacks its server extra ({', '.join(missing)}; {INSTALL_HINT})"
    return release, ""


def tokenizer_vocab(tokenizer_dir: Path) -> tuple[list[str], list[str], int, int]:
    """``(tokens in id order, merges as "a b", bos id, eos id)`` of a byte-level BPE ``tokenizer.json`` (the
    built-in models' tokenizer, ``calculator.crosscheck.tiny_models.write_tokenizer``) and its
    ``tokenizer_config.json``. Raises ``ValueError`` for a tokenizer that is not BPE or has gaps in its ids."""
    tok = json.loads((Path(tokenizer_dir) / "tokenizer.json").read_text())
    model = tok["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"tokenizer {tokenizer_dir} is {model.get('type')}, not BPE")
    vocab = dict(model["vocab"])
    for added in tok.get("added_tokens", []):
        vocab.setdefault(added["content"], added["id"])
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise ValueError(f"tokenizer {tokenizer_dir} has gaps in its token ids")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    cfg_path = Path(tokenizer_dir) / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    bos = vocab.get(cfg.get("bos_token") or "<s>", 1)
    eos = vocab.get(cfg.get("eos_token") or "</s>", 2)
    return [t for t, _ in by_id], merges, bos, eos


def gguf_shape(hf_config: dict[str, Any]) -> dict[str, Any]:
    """``write_tiny_gguf`` arguments of a Llama ``config.json``: layers, widths, heads, context."""
    heads = hf_config["num_attention_heads"]
    return {"n_layer": hf_config["num_hidden_layers"], "n_embd": hf_config["hidden_size"], "n_head": heads,
            "n_head_kv": hf_config.get("num_key_value_heads", heads),
            "head_dim": hf_config.get("head_dim") or hf_config["hidden_size"] // heads,
            "n_ff": hf_config["intermediate_size"], "n_ctx_train": hf_config.get("max_position_embeddings", 2048),
            "tied": bool(hf_config.get("tie_word_embeddings", False))}


def write_run_gguf(tokenizer_dir: Path, hf_config: dict[str, Any], path: Path) -> Path:
    """The GGUF a llama.cpp run serves: ``write_tiny_gguf("llama", ...)`` with ``hf_config``'s shapes, F16 zero
    weights and the tokenizer's vocabulary (its length is the GGUF's ``n_vocab``). Every token is typed normal,
    so the greedy token of the zero-logit model (id 0, ``<pad>``) streams as text that the benchmark's
    tokenizer counts as one token each."""
    from calculator.runtimes.llamacpp.crosscheck import write_tiny_gguf

    path.parent.mkdir(parents=True, exist_ok=True)
    return write_tiny_gguf(path, "llama", vocab=tokenizer_vocab(tokenizer_dir), **gguf_shape(hf_config))


def server_argv(gguf_path: str, alias: str, host: str, port: int, settings: dict[str, Any],
                command: list[str] | None = None) -> list[str]:
    """``python -m llama_cpp.server`` argv (llama-cpp-python's flags, ``llama_cpp/server/settings.py``).
    ``settings``: ``n_ctx``, ``flash_attn`` (``"on"``/``"off"``: the server's flag is a bool, so llama.cpp's
    ``auto`` cannot be asked for), optional ``type_k``/``type_v`` (ggml type ids), ``n_threads``.
    ``--interrupt_requests False``: by default a new request interrupts a streaming one, which would cut
    the benchmark's concurrent requests short."""
    argv = [*(command or SERVER_COMMAND), "--model", gguf_path, "--model_alias", alias,
            "--n_ctx", str(settings["n_ctx"]), "--n_gpu_layers", "0",
            "--flash_attn", "True" if settings.get("flash_attn") == "on" else "False",
            "--interrupt_requests", "False", "--seed", "0"]
    for key in ("type_k", "type_v", "n_threads", "n_batch", "n_ubatch"):
        if settings.get(key) is not None:
            argv += [f"--{key}", str(settings[key])]
    return [*argv, "--host", host, "--port", str(port)]


def parse_startup_log(text: str) -> dict[str, Any]:
    """What llama.cpp logged at start-up: the cross-check's ``parse_log`` (``kv``: each
    ``llama_kv_cache: size = ...`` line; ``model_buffers`` / ``output_buffers`` / ``compute_buffers``: MiB per
    buffer type; ``kv_buffers``) plus ``cpu_features`` (the ggml-cpu features of its ``CPU : ...`` system-info
    line, as ``memory.CPU_FEATURES`` names), ``n_ctx`` / ``n_seq_max`` / ``flash_attn`` from its context lines."""
    from calculator.runtimes.llamacpp.crosscheck import cpu_features_from_sysinfo, parse_log

    found: dict[str, Any] = parse_log(text)
    m = CPU_INFO_RE.search(text)
    found["cpu_info"] = m.group(1).strip() if m else None
    found["cpu_features"] = sorted(cpu_features_from_sysinfo("SYSINFO: " + m.group(1))) if m else None
    for key in ("n_ctx", "n_seq_max"):
        m2 = re.search(rf"llama_context: {key} += (\d+)", text)
        if m2:
            found[key] = int(m2.group(1))
    m3 = re.search(r"llama_context: flash_attn += (\w+)", text)
    if m3:
        found["flash_attn"] = m3.group(1)
    return found


def predict(gguf_path: Path, settings: dict[str, Any], cpu_features: list[str] | None):
    """``(meta, plan)``: the GGUF's metadata (``gguf_meta.read_gguf``) and ``memory.plan`` for it on a CPU build
    (``device="CPU"``, ``n_gpu_layers=0``) with the run's settings and the build's CPU features."""
    from calculator.runtimes.llamacpp.gguf_meta import read_gguf
    from calculator.runtimes.llamacpp.memory import plan

    meta = read_gguf(gguf_path)
    return meta, plan(meta, n_ctx=settings["n_ctx"], flash_attn=settings.get("flash_attn", "off"),
                      device="CPU", n_gpu_layers=0,
                      cpu_features=frozenset(cpu_features) if cpu_features is not None else None)


def _row(field: str, unit: str, p: float | None, m: float | None, note: str = "") -> dict[str, Any]:
    row: dict[str, Any] = {"field": field, "unit": unit, "predicted": p, "measured": m, "error": None,
                           "error_pct": None, "note": note}
    if p is not None and m is not None:
        row["error"] = round(p - m, 4)
        row["error_pct"] = (p - m) / m * 100 if m else (0.0 if p == m else None)
    return row


def memory_comparison(predicted_plan, logged: dict[str, Any]) -> list[dict[str, Any]]:
    """Predicted vs logged, from the cross-check's ``compare`` (MiB at the log's 2 decimals): per KV cache its
    size (``kv_cache_mib``), per buffer type the model buffer (``model_buffer_mib[<buft>]``) and the compute
    buffer (an estimate: the note gives its stated error and whether the logged figure lies within it)."""
    from calculator.runtimes.llamacpp.crosscheck import Case, compare

    result = compare(Case(name="validation run", arch="llama", n_ctx=predicted_plan.n_ctx), predicted_plan, logged)
    rows = []
    for r in result["figures"]:
        fig = r["figure"]
        if fig.endswith(" size_mib"):
            name = fig.rsplit(" ", 1)[0]
            field = "kv_cache_mib" if name == "kv" else f"kv_cache_mib[{name}]"
        elif fig.endswith(" model buffer MiB"):
            field = f"model_buffer_mib[{fig.split(' ', 1)[0]}]"
        elif fig.endswith(" compute buffer MiB (estimate)"):
            field = f"compute_buffer_mib[{fig.split(' ', 1)[0]}]"
        elif fig.endswith(" output buffer MiB"):
            field = f"output_buffer_mib[{fig.split(' ', 1)[0]}]"
        else:
            continue  # cells, layers, K / V halves: covered by the cache's size
        note = "exact" if r["status"] == "exact" else r["status"]
        if "error_mib" in r:
            note = f"estimate, stated error ±{r['error_mib']:.2f} MiB: {r['status']}"
        rows.append(_row(field, "MiB", r["predicted"], r["logged"], note))
    if not logged.get("kv"):
        rows.append(_row("kv_cache_mib", "MiB", None, None, "llama.cpp logged no llama_kv_cache line"))
    return rows


def speed_comparison(meta, predicted_plan, profile: dict[str, Any], aggregate: dict[str, Any],
                     concurrency: int) -> list[dict[str, Any]]:
    """``calculator.runtimes.llamacpp.speed.speed`` on the catalog's CPU row at the benchmark's prompt / output
    lengths and concurrency against the measured mean TTFT, mean TPOT and output tok/s. Both tok/s are output tokens
    over the requests' whole lifetimes, prefill included: the benchmark's ``output_throughput`` (total output tokens /
    duration) and the prediction's C x O / (TTFT + (O - 1) x TPOT) (:func:`calculator.engine.perf.
    closed_loop_tokens_per_s`)."""
    from calculator.engine.gpus import get_gpu
    from calculator.runtimes.llamacpp.speed import speed

    from .bench import _mean_of, per_token_measurable

    measurable = per_token_measurable(aggregate)
    burst = "not measurable: the server sent each request's tokens in one burst (TTFT ~ end-to-end latency)"
    measured = {"ttft_ms": _mean_of(aggregate, "ttft"), "tpot_ms": _mean_of(aggregate, "tpot") if measurable else None,
                "output_tokens_per_s": aggregate.get("output_throughput")}
    units = {"ttft_ms": "ms", "tpot_ms": "ms", "output_tokens_per_s": "tok/s"}
    try:
        s = speed(meta, predicted_plan, get_gpu("CPU"), prompt_len=profile["input_len"],
                  output_len=profile["output_len"], concurrency=concurrency)
    except Exception as e:  # noqa: BLE001 - the speed model's own "not modelled": shown, never a crash of the run
        return [_row(k, units[k], None, v, f"not predicted: {e}" if v is not None or k != "tpot_ms" else burst)
                for k, v in measured.items()]
    predicted = {"ttft_ms": s.ttft_ms, "tpot_ms": s.itl_ms, "output_tokens_per_s": s.output_tokens_per_s}
    return [_row(k, units[k], predicted[k], v, s.assumption if v is not None or k != "tpot_ms" else burst)
            for k, v in measured.items()]
