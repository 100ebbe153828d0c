"""SGLang as a validation runtime: ``python -m sglang.launch_server`` and ``python -m sglang.bench_serving`` on a
GPU worker that has SGLang installed.

Plain Python (no Django). What an SGLang run needs beyond vLLM's machinery (``validator.runner``: process groups,
deadline, sweep; ``validator.bench``: the repeats and their folding):

* ``server_available(hardware)``: whether this worker can start SGLang (the ``sglang`` distribution installed and a
  GPU: the covered releases' memory rules are CUDA's / ROCm's, and SGLang's CPU backend is not modelled);
* ``server_argv(command, host, port)``: the calculator's launch command (``calculator.runtimes.sglang.launch``,
  SGLang's own flag names) with the address and ``--enable-metrics`` / ``--log-level info`` (without ``info``
  SGLang logs none of the lines the comparison reads);
* ``parse_startup_log(text)``: what SGLang logged, per rank, from the lines its source writes (0.5.10.post1:
  ``model_executor/model_runner.py:1075`` "Load weight begin", ``:1247`` "Load weight end",
  ``mem_cache/memory_pool.py:311/321`` "Mamba Cache is allocated", ``:696/702`` "KV Cache is allocated",
  ``model_executor/model_runner_kv_cache_mixin.py:906`` "Memory pool end", ``model_runner.py:2460`` "Capture
  cuda graph end", ``managers/scheduler.py:691`` "max_total_num_tokens=..."); SGLang's "GB" is 2^30 bytes;
* ``bench_args(...)``: ``sglang.bench_serving``'s flags for the run's profile (random token ids: no dataset
  download; ``--output-details`` for the per-request TTFTs and ITLs);
* ``from_bench_result(result)``: ``sglang.bench_serving``'s result line in ``vllm bench serve``'s key names, so one
  summary (``validator.bench._summary``) reads both;
* ``memory_comparison(plan, logged)`` / ``speed_comparison(...)``: the report's predicted-vs-measured rows.

The benchmark client loads its tokenizer with ``trust_remote_code=True`` (sglang/benchmark/utils.py:63, 0.5.10.post1).
This site never runs a repository's code, so the run hands it a directory holding only the tokenizer's data files
(``tokenizer_files``): no ``.py`` file is fetched, and a tokenizer that needs one (``auto_map``) is refused.
"""
from __future__ import annotations

import json
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

SERVER_MODULE = "sglang.launch_server"
BENCH_MODULE = "sglang.bench_serving"
#: sglang/srt/entrypoints/http_server.py:476 ``@app.get("/health")``
HEALTH_PATH = "/health"
def _install_hint() -> str:
    from calculator.runtimes.sglang.releases import COVERED, DEFAULT

    return f"pip install sglang=={DEFAULT}, or another release the calculator covers: {', '.join(COVERED)}"


INSTALL_HINT = _install_hint()
#: the tokenizer's data files (never code): what ``AutoTokenizer.from_pretrained`` reads for a fast or
#: sentencepiece tokenizer
TOKENIZER_PATTERNS = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                      "*.tiktoken", "vocab.json", "vocab.txt", "merges.txt", "added_tokens.json", "config.json",
                      "generation_config.json", "chat_template.jinja")


def server_available(hardware: dict[str, Any]) -> tuple[str | None, str]:
    """``(release, "")`` when this worker can start SGLang, else ``(None, reason)``: the ``sglang`` distribution
    installed with its launch and benchmark modules, and a GPU in ``hardware``
    (``validator.runner.detect_hardware``)."""
    try:
        release = metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return None, f"SGLang is not installed on this worker ({INSTALL_HINT})"
    for module in (SERVER_MODULE, BENCH_MODULE):
        if not module_source(module):
            return None, f"sglang {release} has no {module} module"
    missing = bench_flags_missing(bench_source())
    if missing:
        return None, (f"sglang {release}'s {BENCH_MODULE} lacks {', '.join(missing)} (as 0.4.3.post4's does; "
                      "0.4.10.post2 and later have them): install a later release")
    if hardware.get("platform") != "cuda" or not hardware.get("devices"):
        return None, ("SGLang runs need a GPU worker: NVML sees no GPU here (the worker detects NVIDIA GPUs only; an "
                      "AMD GPU is not detected yet), and SGLang's CPU backend is not modelled")
    return release, ""


#: what ``bench_args`` needs of sglang.bench_serving; 0.4.3.post4's has none of these (its "random" dataset
#: downloads ShareGPT, bench_serving.py:699-701), 0.4.10.post2's (--flush-cache at bench_serving.py:1958), 0.5.3's,
#: 0.5.9's and 0.5.10.post1's (--flush-cache at bench_serving.py:2238) have all
BENCH_NEEDS = ('"random-ids"', '"--warmup-requests"', '"--output-details"', '"--flush-cache"')


def module_source(module: str) -> str:
    """The installed ``sglang`` distribution's source of ``module`` (located through its metadata: importing sglang
    takes seconds and needs its GPU dependencies); "" when it is not there."""
    try:
        return Path(metadata.distribution("sglang").locate_file(module.replace(".", "/") + ".py")).read_text()
    except (metadata.PackageNotFoundError, OSError):
        return ""


#: 0.5.23's ``sglang.bench_serving`` is a deprecated alias that star-imports ``sglang.benchmark.serving`` and calls its
#: ``cli_main`` (sglang==0.5.23 sglang/bench_serving.py:1-22): the flags are read where they are defined
BENCH_IMPL_MODULE = "sglang.benchmark.serving"


def bench_source() -> str:
    """The source text of the installed ``sglang.bench_serving`` with, where it is 0.5.23's alias, the module it
    re-exports (:data:`BENCH_IMPL_MODULE`); "" when neither is installed."""
    text = module_source(BENCH_MODULE)
    if f"from {BENCH_IMPL_MODULE} import" in text:
        text += "\n" + module_source(BENCH_IMPL_MODULE)
    return text


def bench_flags_missing(source: str) -> list[str]:
    """The ``BENCH_NEEDS`` an ``sglang.bench_serving`` source text does not define (its argparse choices and flags)."""
    return [need.strip('"') for need in BENCH_NEEDS if need not in source]


def server_argv(command: list[str], host: str, port: int, prefix: list[str] | None = None,
                revision: str | None = None) -> list[str]:
    """The argv the worker starts: ``command`` (``[python, -m, sglang.launch_server, --model-path, ...]`` as the
    calculator shows it) with this interpreter (or ``prefix`` in place of ``python -m sglang.launch_server``),
    ``--revision`` when the prediction was made for a commit, ``--host`` / ``--port``, ``--enable-metrics`` (the
    Prometheus ``/metrics`` the benchmark scrapes) and ``--log-level info``. Raises ``ValueError`` for a command
    that is not SGLang's launch command."""
    if command[1:3] != ["-m", SERVER_MODULE]:
        raise ValueError(f"not an SGLang launch command: {command[:3]}")
    argv = [*(prefix or [sys.executable, "-m", SERVER_MODULE]), *command[3:]]
    if revision and "--revision" not in argv:
        argv += ["--revision", revision]
    return [*argv, "--host", host, "--port", str(port), "--enable-metrics", "--log-level", "info"]


# ---------------------------------------------------------------------------------------------------------------
# the start-up log
# ---------------------------------------------------------------------------------------------------------------
# a scheduler process's prefix (managers/scheduler.py:3535-3554, 0.5.10.post1): "[<time> DP1 PP0 TP3 EP3] ", each tag
# only when that size is above 1 (DP when there is a data-parallel rank)
_PREFIX = re.compile(r"^\[([^\]]*)\]")
_TAG = re.compile(r"\b(DP|PP|TP)(\d+)\b")
_NUM = r"(-?\d+(?:\.\d+)?)"
_LINES: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    ("load_begin", re.compile(rf"Load weight begin\. avail mem={_NUM} GB"), ("avail_before_load_gib",)),
    ("load_end", re.compile(rf"Load weight end\..*?avail mem={_NUM} GB, mem usage={_NUM} GB"),
     ("avail_after_load_gib", "weights_gib")),
    ("dist", re.compile(rf"Init torch distributed ends\..*?mem usage={_NUM} GB"), ("dist_init_gib",)),
    ("mamba", re.compile(rf"Mamba Cache is allocated\. max_mamba_cache_size: (\d+), conv_state size: {_NUM} ?GB, "
                         rf"ssm_state size: {_NUM} ?GB"),
     ("max_mamba_cache_size", "mamba_conv_state_gib", "mamba_ssm_state_gib")),
    ("swa_pool", re.compile(rf"SWAKVPool mem usage: {_NUM} GB"), ("swa_kv_pool_gib",)),
    ("graph_begin", re.compile(rf"Capture [\w ]*?graph begin\..*?avail mem={_NUM} GB"),
     ("avail_before_cuda_graph_gib",)),
)
# managers/scheduler.py:691: "max_total_num_tokens=N, chunked_prefill_size=N, max_prefill_tokens=N,
# max_running_requests=N, context_len=N, available_gpu_mem=X GB" (0.4.3 ends at context_len); each read on its own
_SCHED = re.compile(r"\bmax_total_num_tokens=\d")
_SCHED_KEYS = {key: re.compile(rf"\b{name}={_NUM}") for key, name in (
    ("max_total_num_tokens", "max_total_num_tokens"), ("chunked_prefill_size", "chunked_prefill_size"),
    ("max_prefill_tokens", "max_prefill_tokens"), ("max_running_requests", "max_running_requests"),
    ("context_len", "context_len"), ("available_gpu_mem_gib", "available_(?:gpu|cpu)_mem"))}
_KV = re.compile(rf"KV Cache is allocated\.(?: dtype: ([\w.]+),)? #tokens: (\d+), "
                 rf"(?:K size: {_NUM} GB, V size: {_NUM} GB|KV size: {_NUM} GB)")
_POOL_END = re.compile(rf"Memory pool end\. avail mem={_NUM} GB")
# 0.4.x: "Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB."; 0.5.x: the two
# figures the other way round (model_runner.py:2460)
_GRAPH_END = re.compile(r"Capture [\w ]*?graph end\.")
_GRAPH_MEM = re.compile(rf"mem usage={_NUM} GB")
_GRAPH_AVAIL = re.compile(rf"avail mem={_NUM} GB")
_SERVER_ARGS = re.compile(r"server_args=ServerArgs\((.*)\)")
_ARG = re.compile(r"(\w+)=('[^']*'|[^,()]+)")
SERVER_ARG_KEYS = ("mem_fraction_static", "chunked_prefill_size", "max_prefill_tokens", "context_length",
                   "page_size", "cuda_graph_max_bs", "attention_backend", "kv_cache_dtype", "tp_size", "dp_size",
                   "ep_size", "max_running_requests", "max_total_tokens")


def _value(text: str) -> Any:
    text = text.strip()
    if text.startswith("'"):
        return text.strip("'")
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _kv_fields(lines: list[tuple], pool: str) -> dict[str, Any]:
    """One pool's ``KV Cache is allocated`` lines: one line (MHA: K and V sizes; MLA / NSA: one KV size), or two
    for a sliding-window model (SGLang's SWAKVPool allocates its SWA pool first, then the full one)."""
    out: dict[str, Any] = {}
    names = [""] if len(lines) == 1 else ["swa_", "full_"]
    for name, (dtype, tokens, k, v, kv) in zip(names, lines):
        key = f"{pool}{name}"
        out[f"{key}kv_tokens"] = int(tokens)
        if dtype:
            out[f"{key}kv_dtype"] = dtype
        if k is not None:
            out[f"{key}k_size_gib"], out[f"{key}v_size_gib"] = float(k), float(v)
        if kv is not None:
            out[f"{key}kv_size_gib"] = float(kv)
    if len(lines) == 2:  # the full-attention pool's tokens are the model's max_total_num_tokens
        out[f"{pool}kv_tokens"] = out[f"{pool}full_kv_tokens"]
    return out


def parse_startup_log(text: str) -> dict[str, Any]:
    """What SGLang logged at start-up.

    Returns the figures of rank 0 (a line without a ``TPn`` tag counts as rank 0; a figure rank 0 did not log
    comes from the lowest rank that did, named in ``rank_of``) and ``ranks`` (``{TP rank: figures}``) of the first
    pipeline stage and data-parallel replica; ``other_ranks`` (``{"DP1 TP0" / "PP1 TP0": figures}``) holds the
    other stages (their own layers) and replicas, never mixed into rank 0's. Figures, all
    per rank, sizes in GiB (SGLang's "GB" is 2^30 bytes): ``avail_before_load_gib``, ``weights_gib`` (Load weight
    end's mem usage), ``avail_after_load_gib``, ``kv_tokens`` / ``k_size_gib`` / ``v_size_gib`` (or ``kv_size_gib``
    for MLA; ``swa_*`` / ``full_*`` for a sliding-window model), ``avail_after_pool_gib``, ``draft_*`` for the
    second pool an EAGLE / MTP / standalone draft allocates, Mamba's ``max_mamba_cache_size`` and state sizes,
    ``cuda_graph_gib``, ``max_total_num_tokens``, ``chunked_prefill_size``, ``max_running_requests``,
    ``context_len``, ``available_gpu_mem_gib``; ``server_args`` (``SERVER_ARG_KEYS`` of the ``server_args=`` line:
    what SGLang resolved). Absent keys were not logged."""
    lines = text.splitlines()
    tags = []
    for line in lines:
        m = _PREFIX.match(line)
        tags.append({k: int(v) for k, v in _TAG.findall(m.group(1))} if m else {})
    # plain data parallelism (no --enable-dp-attention) starts whole replicas, each with its TP ranks from 0
    # (data_parallel_controller.py:229-273): the same TP rank under two DP ranks. With DP attention the DP ranks
    # split one TP group (:379-408), each TP rank once.
    dp_of: dict[int, set[int]] = {}
    for t in tags:
        if "DP" in t:
            dp_of.setdefault(t.get("TP", 0), set()).add(t["DP"])
    replicas = any(len(d) > 1 for d in dp_of.values())
    ranks: dict[Any, dict[str, Any]] = {}
    kv_lines: dict[Any, list[list[tuple]]] = {}
    pool_ends: dict[Any, list[float]] = {}
    server_args: dict[str, Any] = {}
    for line, tag in zip(lines, tags):
        rank: Any = tag.get("TP", 0)
        if tag.get("PP", 0) or (replicas and tag.get("DP", 0)):
            # another pipeline stage (other layers) or another replica: kept apart, named by its tags
            rank = " ".join(f"{k}{tag[k]}" for k in ("DP", "PP", "TP") if k in tag)
        figures = ranks.setdefault(rank, {})
        if (sa := _SERVER_ARGS.search(line)) and not server_args:
            server_args = {k: _value(v) for k, v in _ARG.findall(sa.group(1)) if k in SERVER_ARG_KEYS}
            continue
        if kv := _KV.search(line):
            pools = kv_lines.setdefault(rank, [[]])
            pools[-1].append(kv.groups())
            continue
        if end := _POOL_END.search(line):
            pool_ends.setdefault(rank, []).append(float(end.group(1)))
            kv_lines.setdefault(rank, [[]]).append([])
            continue
        if _SCHED.search(line) and "self.max_total_num_tokens" not in line:
            for key, pattern in _SCHED_KEYS.items():
                if found := pattern.search(line):
                    figures.setdefault(key, _value(found.group(1)))
            continue
        if _GRAPH_END.search(line):
            if g := _GRAPH_MEM.search(line):
                figures.setdefault("cuda_graph_gib", float(g.group(1)))
            if g := _GRAPH_AVAIL.search(line):
                figures.setdefault("avail_after_cuda_graph_gib", float(g.group(1)))
            continue
        for _name, pattern, keys in _LINES:
            if found := pattern.search(line):
                for key, raw in zip(keys, found.groups()):
                    figures.setdefault(key, _value(raw))
    for rank, pools in kv_lines.items():
        pools = [p for p in pools if p]
        for i, lines in enumerate(pools[:2]):
            ranks[rank].update(_kv_fields(lines, "" if i == 0 else "draft_"))
    for rank, ends in pool_ends.items():
        ranks[rank]["avail_after_pool_gib"] = ends[0]
        if len(ends) > 1:
            ranks[rank]["draft_avail_after_pool_gib"] = ends[1]
    others = {r: f for r, f in sorted((r, f) for r, f in ranks.items() if isinstance(r, str)) if f}
    ranks = {r: f for r, f in sorted((r, f) for r, f in ranks.items() if isinstance(r, int)) if f}
    merged: dict[str, Any] = {}
    rank_of: dict[str, int] = {}
    for rank, figures in ranks.items():
        for key, value in figures.items():
            if key not in merged:
                merged[key] = value
                if rank != 0:
                    rank_of[key] = rank
    return {**merged, "rank_of": rank_of, "ranks": ranks, "other_ranks": others, "server_args": server_args}


# ---------------------------------------------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------------------------------------------
def request_token_limit(plan: dict[str, Any]) -> tuple[int, str]:
    """``(tokens, why)``: the most prompt + output tokens one request may have on the server ``plan`` describes
    (``SGLangMemory.to_json()`` or the ``SGLangPlan`` fields: ``context_length``, ``max_total_num_tokens``,
    ``swa_max_total_num_tokens``, ``speculative``) with SGLang neither refusing it nor cutting its output short,
    from sglang 0.5.10.post1 (0.4.10.post2's rules are the same without the reserved tokens, so this holds there):

    * managers/tokenizer_manager.py:790-830: refused when ``input + reserved + max_new_tokens >= context_len``,
      ``reserved`` = ``max(eagle_topk x num_steps, num_draft_tokens)`` for EAGLE / EAGLE3 (NEXTN is EAGLE,
      server_args.py:2983-2984), else 0 (:243-251);
    * managers/tp_worker.py:301-305: ``max_req_len = min(context_len - 1, max_token_pool_size - 1)``, the pool the
      smaller of the full and sliding-window pools (model_executor/model_runner.py:1879-1884); scheduler.py:1612-1620
      cuts ``max_new_tokens`` to ``max_req_len - input - 1``, so ``input + output <= min(context_len, pool) - 2``;
      managers/utils.py:126-141 aborts a prompt of ``max_req_len - 5`` tokens or more (never binding once the
      output is 5 tokens or more).

    Raises ``KeyError`` for a plan without ``context_length`` / ``max_total_num_tokens``."""
    context = int(plan["context_length"])
    pool = int(plan["max_total_num_tokens"])
    if plan.get("swa_max_total_num_tokens"):
        pool = min(pool, int(plan["swa_max_total_num_tokens"]))
    spec = plan.get("speculative") or {}
    if not isinstance(spec, dict):
        spec = spec.model_dump()
    reserved = 0
    if spec.get("algorithm") in ("EAGLE", "EAGLE3", "NEXTN", "MTP"):
        reserved = max((spec.get("eagle_topk") or 0) * (spec.get("num_steps") or 0), spec.get("num_draft_tokens") or 0)
    by_refusal, by_cut = context - 1 - reserved, min(context, pool) - 2
    if by_refusal < by_cut:
        return by_refusal, (f"SGLang's --context-length {context} less 1 and the {reserved} tokens it reserves "
                            "for drafts (it refuses a longer request)")
    if pool < context:
        return by_cut, f"SGLang's KV pool of {pool} tokens less 2 (it cuts the output of a longer request)"
    return by_cut, f"SGLang's --context-length {context} less 2 (it cuts the output of a longer request)"


#: sglang.bench_serving's random-ids sampler builds each prompt as ``(offsets[i] + i + j) % vocab_size`` with numpy
#: integers; sent as ids (``--tokenize-prompt``) they must be Python ints for aiohttp's ``json.dumps``. 0.4.10.post2
#: (bench_serving.py:1097-1100), 0.5.3 (:1229-1232) to 0.5.8.post1 (:1494-1497) keep numpy's int64, so every request
#: fails ("Object of type int64 is not JSON serializable") and the warm-up raises; 0.5.9 (bench_serving.py:1631)
#: and 0.5.10.post1 (benchmark/datasets/random.py:151-154) wrap it in ``int(...)``.
_IDS_AS_INTS = re.compile(r"int\(\s*\(offsets\[i\] \+ i \+ j\) % tokenizer\.vocab_size\s*\)")
#: where the random-ids sampler lives: its own module since 0.5.10 (sglang/benchmark/datasets/random.py), before
#: that bench_serving.py
SAMPLER_MODULES = ("sglang.benchmark.datasets.random", BENCH_MODULE)


def sends_prompt_ids(sources: list[str]) -> bool:
    """Whether the ``sglang.bench_serving`` whose source texts are ``sources`` (``SAMPLER_MODULES``) can send its
    random-ids prompts as token ids (``--tokenize-prompt``): only when its sampler makes Python ints
    (``_IDS_AS_INTS``)."""
    return any(_IDS_AS_INTS.search(text) for text in sources)


def bench_args(tokenizer_dir: str, profile: dict[str, Any], prompt_ids: bool) -> list[str]:
    """``python -m sglang.bench_serving`` flags (0.5.10.post1 ``bench_serving.py:1902-2252``; 0.4.10.post2's has each)
    for the run's profile: SGLang's native ``/generate`` client (``--backend sglang``: bench_serving.py:1748-1751),
    random token ids of ``input_len`` / ``output_len`` (``--dataset-name random-ids``, no ShareGPT download;
    ``--random-range-ratio 1``: ``randint(full_len, full_len + 1)``, benchmark/datasets/common.py:60-64), all
    requests at once capped at the profile's concurrency, the profile's seed, the per-request TTFTs and ITLs
    (``--output-details``), the profile's warm-up requests (each the first prompt with at most 32 output tokens,
    bench_serving.py:1251-1256) and then ``--flush-cache``: ``POST /flush_cache`` empties SGLang's radix cache
    before the measured requests (bench_serving.py:1284-1286; http_server.py:718-733), so the first prompt, which
    the warm-ups just prefilled, is not measured from the cache (``bench_serve_entry`` also gives each repeat its
    own ``--seed``: new prompts every repeat). ``ignore_eos`` is on unless ``--disable-ignore-eos``
    (bench_serving.py:612): every request produces ``output_len`` tokens, as in vLLM's runs.

    ``--model`` is the tokenizer directory too: bench_serving loads ``AutoTokenizer.from_pretrained(args.model,
    trust_remote_code=True)`` only to look for a chat template (``check_chat_template``, bench_serving.py:1639-1642,
    called at :1813), which for a Hub id would fetch the repository's main revision and may run its code; the
    ``/generate`` payload carries no model name (:607-620), so nothing else reads it.

    ``prompt_ids`` (``sends_prompt_ids``): send the prompts as token ids (``--tokenize-prompt``), so the server sees
    exactly ``input_len`` tokens. Without it the ids are decoded to text (benchmark/datasets/random.py:155-156) and the
    server tokenizes that text again: the prompt length is near ``input_len``, not equal to it.
    ``validator.bench_serve_entry --client sglang`` adds ``--base-url`` and each repeat's ``--output-file``."""
    return ["--backend", "sglang", "--model", tokenizer_dir, "--tokenizer", tokenizer_dir,
            "--dataset-name", "random-ids", "--random-input-len", str(profile["input_len"]),
            "--random-output-len", str(profile["output_len"]), "--random-range-ratio", "1.0",
            "--num-prompts", str(profile["num_prompts"]), "--max-concurrency", str(profile["concurrency"]),
            "--request-rate", "inf", "--seed", str(profile["seed"]), "--warmup-requests",
            str(max(1, int(profile.get("warmups", 1)))), "--flush-cache", "--output-details", "--disable-tqdm",
            *(["--tokenize-prompt"] if prompt_ids else [])]


#: ``sglang.bench_serving`` result keys (bench_serving.py:1549-1596) -> ``vllm bench serve``'s
_RENAMED = {"mean_e2e_latency_ms": "mean_e2el_ms", "median_e2e_latency_ms": "median_e2el_ms",
            "p99_e2e_latency_ms": "p99_e2el_ms", "total_throughput": "total_token_throughput"}
_SAME = ("duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
         "output_throughput", "max_output_tokens_per_s", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
         "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p95_itl_ms", "p99_itl_ms")


def from_bench_result(result: dict[str, Any]) -> dict[str, Any]:
    """One ``sglang.bench_serving`` JSON line (with ``--output-details``) as ``vllm bench serve``'s result dict:
    the shared keys as they are, e2e latency and total throughput renamed (``_RENAMED``), ``failed`` = requests
    with an error, ``ttfts`` (seconds, as both tools write them) and ``latencies`` = each request's TTFT plus its
    inter-token latencies (the time to its last token; sglang.bench_serving keeps no per-request latency list),
    ``p95_ttft_ms`` / ``p95_e2el_ms`` from those lists, and ``accept_length`` (SGLang's ``avg_spec_accept_length``
    from ``/server_info``; None without speculation)."""
    out = {k: result.get(k) for k in _SAME}
    out.update({new: result.get(old) for old, new in _RENAMED.items()})
    errors = result.get("errors") or []
    out["failed"] = sum(1 for e in errors if e)
    # a failed request keeps TTFT 0 and no ITLs (bench_serving.py:93-104): the lists are the successful requests'
    ok = [i for i in range(len(result.get("ttfts") or [])) if not (i < len(errors) and errors[i])]
    ttfts = [result["ttfts"][i] for i in ok]
    itls = [result["itls"][i] for i in ok] if len(result.get("itls") or []) == len(result.get("ttfts") or []) else []
    out["ttfts"] = ttfts
    out["latencies"] = [t + sum(i or []) for t, i in zip(ttfts, itls)] if len(itls) == len(ttfts) else []
    # p95s sglang.bench_serving does not print (it has p99 for TTFT / TPOT / E2E, p95 for ITL only), from the
    # per-request lists as vllm bench serve computes its percentiles (numpy.percentile, linear)
    import numpy as np

    for key, values in (("p95_ttft_ms", ttfts), ("p95_e2el_ms", out["latencies"])):
        if values:
            out[key] = float(np.percentile(values, 95)) * 1000
    out["accept_length"] = result.get("accept_length")
    return out


def bench_failure(result: dict[str, Any], output_len: int) -> str:
    """A sentence when one ``sglang.bench_serving`` result line (with ``--output-details``) is not a measurement of
    ``output_len``-token requests, else "". bench_serving exits 0 when requests fail after a good warm-up (it counts
    only the successful ones, bench_serving.py:980-1009, and only warns when all failed, :1011-1016), so the line is
    checked here: a request with an error (``errors``: a non-200 answer as "reason: body", bench_serving.py:689-692,
    or a traceback); a "successful" one that got no token (``ttfts`` 0): SGLang answers a streamed request it refuses
    (context length, srt/managers/tokenizer_manager.py:790-830) with HTTP 200 and one ``{"error": ...}`` chunk
    (srt/entrypoints/http_server.py:666-676; 0.4.10.post2 :350-362), which bench_serving skips, counting the request
    as a success of the requested length (bench_serving.py:637-688) — the reason is only in the server's log
    (``last_server_error``); or a successful one that stopped short of ``output_len`` tokens (``output_lens``,
    SGLang's ``completion_tokens``: with ``ignore_eos`` only a cut ``max_new_tokens``, scheduler.py:1612-1620,
    stops it early)."""
    all_errors = result.get("errors") or []
    errors = [e for e in all_errors if e]
    total = len(all_errors)
    if errors:
        first = errors[0].strip().splitlines()[-1][:400]
        return f"{len(errors)} of {total} requests failed; the first: {first}"
    silent = [t for t in result.get("ttfts") or [] if not t]
    if silent:
        return (f"{len(silent)} of {len(result.get('ttfts') or [])} requests got no token: SGLang refused them (it "
                "answers a refused streamed request with HTTP 200 and an error chunk, which sglang.bench_serving "
                "counts as a success)")
    lens = result.get("output_lens") or []
    short = [n for n in lens if n < output_len]
    if short:
        return (f"{len(short)} of {len(lens)} requests stopped short of {output_len} output tokens (the fewest: "
                f"{min(short)}): the server cut their max_new_tokens")
    if not result.get("completed"):
        return "no request completed"
    return ""


_HTTP_ERROR = re.compile(r"\[http_server\] Error: (.*)")


def last_server_error(log_text: str) -> str:
    """The last ``[http_server] Error: ...`` of an SGLang server log (http_server.py:674 and :690 log every request
    it refuses), "" when there is none."""
    found = _HTTP_ERROR.findall(log_text)
    return found[-1].strip()[:500] if found else ""


def read_bench_output(path: Path) -> dict[str, Any]:
    """The last line of ``sglang.bench_serving``'s ``--output-file`` (it appends one JSON line per run).
    Raises ``ValueError`` when the file has no result line (the benchmark printed "Error running benchmark")."""
    lines = [ln for ln in Path(path).read_text().splitlines() if ln.strip()]
    if not lines:
        raise ValueError(f"{path} has no result line")
    return json.loads(lines[-1])


def tokenizer_files(model_id: str, revision: str | None, dest: Path) -> Path:
    """The tokenizer's data files of ``model_id`` at ``revision`` in ``dest`` (``huggingface_hub.snapshot_download``
    with ``TOKENIZER_PATTERNS``: never a ``.py`` file). Raises ``ValueError`` when the tokenizer needs the
    repository's code (``auto_map`` in tokenizer_config.json): this site never runs it, or when no tokenizer
    file is there; the Hub's own errors (``huggingface_hub.errors``) as they come. Endpoint and token:
    ``HF_ENDPOINT`` / ``HF_TOKEN`` as they are now."""
    import os

    from huggingface_hub import constants as hf_constants
    from huggingface_hub import snapshot_download

    from calculator.metadata.hub import env_offline

    hf_constants.HF_HUB_OFFLINE = env_offline()  # read now, as calculator.metadata.hub does
    path = Path(snapshot_download(model_id, revision=revision, allow_patterns=list(TOKENIZER_PATTERNS),
                                  local_dir=str(dest), endpoint=os.environ.get("HF_ENDPOINT") or None,
                                  token=os.environ.get("HF_TOKEN") or None))
    cfg = path / "tokenizer_config.json"
    if cfg.exists() and "auto_map" in json.loads(cfg.read_text()):
        raise ValueError(f"{model_id}'s tokenizer needs the repository's own code (auto_map in "
                         "tokenizer_config.json); this site never runs a repository's code (trust_remote_code)")
    if not (path / "tokenizer.json").exists() and not (path / "tokenizer.model").exists() \
            and not list(path.glob("*.tiktoken")) and not (path / "vocab.json").exists():
        raise ValueError(f"{model_id} has no tokenizer files ({', '.join(TOKENIZER_PATTERNS[:4])}, ...)")
    return path


# ---------------------------------------------------------------------------------------------------------------
# predicted vs measured
# ---------------------------------------------------------------------------------------------------------------
#: (plan key, logged key, unit): what SGLang's plan predicts and its log shows, per rank
MEMORY_FIELDS = (
    ("free_before_load_gib", "avail_before_load_gib", "GiB"),
    ("weights_gib", "weights_gib", "GiB"),
    ("max_total_num_tokens", "max_total_num_tokens", "tokens"),
    ("k_size_gib", "k_size_gib", "GiB"),
    ("v_size_gib", "v_size_gib", "GiB"),
    ("kv_size_gib", "kv_size_gib", "GiB"),
    ("free_after_pool_gib", "avail_after_pool_gib", "GiB"),
    ("max_running_requests", "max_running_requests", "requests"),
    ("context_length", "context_len", "tokens"),
    ("chunked_prefill_size", "chunked_prefill_size", "tokens"),
    ("mem_fraction_static", "mem_fraction_static", "fraction"),
)


def memory_comparison(plan: dict[str, Any], logged: dict[str, Any]) -> list[dict[str, Any]]:
    """Predicted (``SGLangMemory.to_json()``: the plan per rank) vs logged (``parse_startup_log``) for each of
    ``MEMORY_FIELDS``; ``max_total_num_tokens`` falls back to the KV line's ``#tokens`` when the scheduler line
    was not logged, ``mem_fraction_static`` is the ``server_args=`` line's. A MHA pool's ``kv_size_gib`` is
    K + V. Rows only where either side has a figure. ``error_pct`` relative to the measured value."""
    from .bench import _row  # the report's row, as vLLM's runs build it

    logged = {**logged, **{k: v for k, v in (logged.get("server_args") or {}).items()
                           if k == "mem_fraction_static"}}
    if logged.get("max_total_num_tokens") is None and logged.get("kv_tokens") is not None:
        logged["max_total_num_tokens"] = logged["kv_tokens"]
    if logged.get("kv_size_gib") is None and logged.get("k_size_gib") is not None:
        logged["kv_size_gib"] = round(logged["k_size_gib"] + logged["v_size_gib"], 2)
    rows = []
    for key, log_key, unit in MEMORY_FIELDS:
        p, m = plan.get(key), logged.get(log_key)
        if p is None and m is None:
            continue
        note = "" if m is not None else "not in the log (SGLang logs it at --log-level info)"
        rank = (logged.get("rank_of") or {}).get(log_key)
        if rank is not None:
            note = f"rank TP{rank}'s figure (rank 0 did not log it)"
        rows.append(_row(f"sglang_{key}", unit, p, m, note))
    return rows


def speed_comparison(predicted: dict[str, Any] | None, why_not: str, aggregate: dict[str, Any],
                     speculative: bool) -> list[dict[str, Any]]:
    """The calculator's SGLang speed fields at the run's profile (``predicted``: ``ttft_ms``, ``itl_ms`` = TPOT,
    ``output_tokens_per_s``, ``mean_acceptance_length``) against the benchmark's means over the repeats, or one
    row saying why there is no prediction (``why_not``). With speculation, SGLang's own acceptance length
    (``aggregate["accept_length"]``: ``avg_spec_accept_length`` after the last repeat, ``validator.bench``)."""
    from .bench import _row

    if predicted is None:
        return [_row("ttft_ms", "ms", None, aggregate.get("mean_ttft_ms"), f"speed model could not predict: {why_not}")]
    rows = [_row("ttft_ms", "ms", predicted.get("ttft_ms"), aggregate.get("mean_ttft_ms"), "mean TTFT"),
            _row("tpot_ms", "ms", predicted.get("itl_ms"), aggregate.get("mean_tpot_ms"), "mean TPOT"),
            _row("output_tokens_per_s", "tok/s", predicted.get("output_tokens_per_s"),
                 aggregate.get("output_throughput"))]
    if speculative:
        rows.append(_row("mean_acceptance_length", "tokens", predicted.get("mean_acceptance_length"),
                         aggregate.get("accept_length"), "SGLang's avg_spec_accept_length (/server_info)"))
    return rows
