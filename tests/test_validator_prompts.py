"""Every request's prompt is new to the server it goes to, so that no TTFT is measured from vLLM's prefix cache
(validator.bench_serve_entry.UniquePrompts), and a run measures as many A/B pairs as its intervals need, within its
budget (PairSchedule).

The prefix cache here is modelled from vLLM 0.32's source, apart from the code under test: a block's key chains its
parent's (vllm/v1/core/kv_cache_utils.py:695-725 ``hash_block_tokens``), a request is served from its leading full
blocks already cached, at most ``num_tokens - 1`` tokens (vllm/v1/core/kv_cache_manager.py:288-299), and the
server's tokenizer puts a BOS token first. vLLM's random dataset is modelled as its source builds it: offsets drawn
``rng.integers(0, vocab_size, n)`` (vllm/benchmarks/datasets/utils.py:96-98) and prompt ``i`` the tokens
``(offset_i + i + arange(input_len)) % vocab`` (datasets.py:631-660), seeded by ``--seed`` (datasets.py:2325-2339).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from validator import bench
from validator.bench_serve_entry import (REWARM, PairSchedule, UniquePrompts, finish, key_tokens, repeat_seed,
                                         unique_get_samples)

BLOCK = 16  # the smallest block vLLM uses by default on a GPU


class PrefixCache:
    """vLLM's automatic prefix caching as its counters see it (module docstring): ``send(tokens)`` returns the
    prompt tokens served from the cache; ``bos``: the server's tokenizer puts a BOS token first."""

    def __init__(self, block: int = BLOCK, bos: bool = True) -> None:
        self.block, self.bos, self.blocks = block, bos, set()

    def send(self, tokens: list[int]) -> int:
        tokens = [-1, *tokens] if self.bos else list(tokens)
        keys, parent = [], None
        for i in range(len(tokens) // self.block):
            parent = (parent, tuple(tokens[i * self.block:(i + 1) * self.block]))
            keys.append(parent)
        hit = 0
        for key in keys:
            if key not in self.blocks or hit + self.block > len(tokens) - 1:
                break
            hit += self.block
        self.blocks.update(keys)
        return hit


def random_dataset(seed: int, n: int, input_len: int, vocab: int) -> list[list[int]]:
    """vLLM's random dataset (module docstring), as token ids."""
    offsets = np.random.default_rng(seed).integers(0, vocab, size=n)
    return [[int(t) for t in (offsets[i] + i + np.arange(input_len)) % vocab] for i in range(n)]


def run_calls(repeats: int, warmups: int) -> list[tuple[int, str]]:
    """The benchmark calls one server gets in a run, as validator.bench_serve_entry makes them: the profile's
    warm-ups before its first repeat, ``REWARM`` before each later one; ``(prompts, "warm-up" | "repeat")``."""
    calls = []
    for r in range(repeats):
        calls.append((warmups if r == 0 else REWARM, "warm-up"))
        calls.append((16, "repeat"))
    return [(n, kind) for n, kind in calls if n]


def test_the_same_seed_in_every_repeat_served_the_prompts_from_the_cache():
    """What the validator did before: every call with the profile's ``--seed``. The warm-ups prefilled the first
    prompts of each repeat, and from the second repeat on every prompt came back whole from the cache — all but the
    last block of each 1024-token prompt (the field guide's 32k prompts: all but 16 of 32,512 tokens)."""
    cache, hits, queried = PrefixCache(), [], []
    for n, kind in run_calls(repeats=3, warmups=4):
        h = sum(cache.send(p) for p in random_dataset(0, n, 1024, 128_000))
        if kind == "repeat":
            hits.append(h)
            queried.append(n * 1025)
    assert hits[0] == 4 * 1024  # the 4 warmed prompts: 1025 tokens with the BOS, capped at 1024, whole blocks
    assert hits[1] == hits[2] == 16 * 1024 and hits[1] / queried[1] > 0.99


@pytest.mark.parametrize("vocab", [512, 128_000])  # a tiny model's vocabulary (few distinct starts) and a real one's
def test_every_prompt_is_new_to_its_server_and_a_pair_sends_the_same_prompts(vocab):
    """Two servers (a pair's baseline and speculation), 12 repeats with their warm-ups: the registry draws each
    call's prompts with its own seed and replaces any whose first block repeats an earlier one; nothing any server
    is sent comes from its cache, and both servers get the same prompts call by call."""
    registry = UniquePrompts(BLOCK - 1, lambda p: p)
    sent = {"baseline": [], "speculative": []}
    caches = {name: PrefixCache() for name in sent}
    for n, _ in run_calls(repeats=12, warmups=4):
        for name in sent:
            got = registry.draw(name, lambda seed, n=n: random_dataset(seed, n, 128, vocab), n, seed=0,
                                prompt_of=lambda p: p)
            assert len(got) == n
            assert sum(caches[name].send(p) for p in got) == 0
            sent[name].append(got)
    assert sent["baseline"] == sent["speculative"]
    firsts = [tuple(p[:BLOCK - 1]) for call in sent["baseline"] for p in call]
    assert len(set(firsts)) == len(firsts) == 12 * 16 + 4 + 11 * REWARM == bench.prompts_needed(
        {"num_prompts": 16, "repeats": 8, "max_repeats": 12, "warmups": 4})
    assert sum(registry.draws["baseline"]) > len(registry.draws["baseline"]) or vocab > 512  # small vocab: redraws


def test_a_dataset_with_too_few_distinct_prompts_is_a_clear_error():
    registry = UniquePrompts(4, str.split)
    pool = [f"p{i} a b c d" for i in range(20)]
    registry.draw("baseline", lambda seed: pool[:16], 16, seed=0, prompt_of=str)
    with pytest.raises(RuntimeError, match="could not draw 16 prompts new to baseline .* too few distinct prompts"):
        registry.draw("baseline", lambda seed: pool, 16, seed=0, prompt_of=str)


def test_vllms_get_samples_is_drawn_through_the_registry_with_each_calls_own_seed():
    """``unique_get_samples`` wraps vllm bench serve's ``get_samples(args, tokenizer)``: it asks with another seed per
    call (and per redraw), keeps the requests new to the target and numbers them ``<--request-id-prefix><i>``."""
    from dataclasses import dataclass
    from types import SimpleNamespace

    @dataclass
    class Req:  # vllm.benchmarks.datasets.SampleRequest's fields the wrapper touches
        prompt: str
        prompt_len: int
        request_id: str | None = None

    seeds = []

    def get_samples(args, tokenizer):
        seeds.append(args.seed)
        return [Req(" ".join(map(str, p)), 64, f"x{i}") for i, p in enumerate(random_dataset(args.seed, args.num_prompts,
                                                                                             64, 512))]
    registry = UniquePrompts(BLOCK - 1, str.split)
    state = {"target": "baseline"}
    wrapped = unique_get_samples(get_samples, registry, state)
    args = SimpleNamespace(seed=7, num_prompts=8, request_id_prefix="bench-1-")
    first = wrapped(args, None)
    second = wrapped(args, None)
    assert [r.request_id for r in second] == [f"bench-1-{i}" for i in range(8)]
    assert not {r.prompt for r in first} & {r.prompt for r in second}
    assert seeds[0] == 7 and seeds[1] == 8 and args.seed == 7  # each call its own seed; the caller's args untouched


def test_the_key_stays_inside_the_first_block_the_server_fills():
    class Tok:
        def num_special_tokens_to_add(self):
            return 1  # a BOS

    assert key_tokens(Tok(), 16) == 15
    assert key_tokens(object(), 16) == 15  # no such method: one BOS assumed
    assert key_tokens(Tok(), 1) == 1
    assert bench.block_tokens({"engine_input": {}}) == 16
    assert bench.block_tokens({"engine_input": {"block_size": 8}}) == 8
    assert bench.block_tokens({"engine_input": {"block_size": 128}}) == 16


def test_each_sglang_repeat_draws_its_own_prompts():
    rest = ["--dataset-name", "random-ids", "--seed", "5", "--flush-cache"]
    assert repeat_seed(rest, 0) == rest
    assert repeat_seed(rest, 3)[3] == "8" and rest[3] == "5"
    assert repeat_seed(["--x"], 2) == ["--x"]


# -- how many pairs ------------------------------------------------------------------------------------------------
def _entries(pairs, start=0):
    out = []
    for i, (b, s) in enumerate(pairs):
        out += [{"repeat": start + i, "pair": start + i, "phase": "baseline", "result": b},
                {"repeat": start + i, "pair": start + i, "phase": "speculative", "result": s}]
    return out


def _pair(b, s):
    return ({"output_throughput": b, "median_ttft_ms": 400.0, "p95_e2el_ms": 1500.0},
            {"output_throughput": s, "median_ttft_ms": 360.0, "p95_e2el_ms": 1200.0})


WIDE = [_pair(100, x) for x in (104, 99, 113, 98, 108, 100, 109, 99, 111, 97, 106, 101)]


def test_the_schedule_runs_the_profiles_pairs_then_more_while_wide_until_the_most_allowed():
    sched = PairSchedule(["baseline", "speculative"], 8, 10)
    for n in range(8):
        assert sched.more(_entries(WIDE[:n]), now=float(n))
    assert sched.more(_entries(WIDE[:8]), now=8.0) and sched.more(_entries(WIDE[:9]), now=9.0)
    assert not sched.more(_entries(WIDE[:10]), now=10.0)
    assert sched.stop["pairs"] == 10 and sched.stop["why"].startswith("the most pairs this profile allows (10)")
    one = PairSchedule(["baseline"], 3, 10)  # one target (llama.cpp): exactly its repeats
    assert one.more([], 0.0) and not one.more([{"repeat": r, "result": {}} for r in range(3)], 1.0)
    assert one.stop == {"pairs": 3, "why": "the profile's 3 pairs"}


def test_the_schedule_starts_no_extra_pair_its_deadline_cannot_hold():
    sched = PairSchedule(["baseline", "speculative"], 8, 12, deadline=1000.0)
    assert sched.more([], now=0.0, wall=900.0)
    assert sched.more(_entries(WIDE[:8]), now=80.0, wall=980.0)  # 10 s a pair: the 9th ends at 990
    assert not sched.more(_entries(WIDE[:9]), now=95.0, wall=995.0)  # 10.6 s a pair: the 10th would end past 1000
    assert "time for more pairs would end" in sched.stop["why"] and "still wide" in sched.stop["why"]
    late = PairSchedule(["baseline", "speculative"], 8, 12, deadline=1000.0)
    late.more([], now=0.0, wall=2000.0)
    assert all(late.more(_entries(WIDE[:n]), now=float(n), wall=2000.0 + n) for n in range(8))  # the profile's pairs
    assert not late.more(_entries(WIDE[:8]), now=8.0, wall=2008.0)


def test_the_last_entry_says_why_the_benchmark_stopped_and_how_its_prompts_were_drawn():
    sched = PairSchedule(["baseline", "speculative"], 8, 8)
    entries = _entries(WIDE[:8])
    assert not sched.more(entries, 1.0)
    registry = UniquePrompts(15, str.split)
    registry.draw("baseline", lambda seed: ["a b"], 1, 0, prompt_of=str)
    finish(entries, sched, registry)
    assert entries[-1]["stop"]["pairs"] == 8
    assert entries[-1]["prompts"] == {"unique_per_server": True, "key_tokens": 15, "sent": {"baseline": 1},
                                      "draws": {"baseline": [1]}}


# -- a run through the worker (stand-ins for vLLM's server and benchmark) ------------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("workload", ["random", "code"])
def test_a_run_sends_every_prompt_once_per_server_and_its_report_says_so(settings, tmp_path, client, workload):
    """The stand-in server keeps vLLM's prefix cache and counters (tests/fake_vllm_server.py): over the measured
    requests of every repeat, nothing came from the cache; the run says how its prompts were drawn and why it
    stopped where it did."""
    from django.core.management import call_command

    from validator.models import ValidationRun

    here = Path(__file__).parent
    settings.VAR_DIR = tmp_path
    settings.VALIDATOR_KEEP_WORKDIR = True
    settings.VALIDATOR_SERVER_COMMAND = [sys.executable, str(here / "fake_vllm_server.py"), "--fake-mode", "serve"]
    settings.VALIDATOR_BENCH_COMMAND = [sys.executable, str(here / "fake_vllm_bench.py")]
    params = {"model": "tiny-random/llama", "gpu": "CPU"}
    if workload == "code":
        params = {"model": "trained-pair/llama-target", "gpu": "CPU", "validation_workload": "code"}
    run = ValidationRun.submit(params)
    profile = dict(run.configuration["profile"], output_len=8, num_prompts=4, repeats=3, max_repeats=4, warmups=2,
                   concurrency=2)
    profile["input_len"] = 40
    ValidationRun.objects.filter(pk=run.pk).update(configuration={**run.configuration, "profile": profile})
    call_command("db_worker", batch=True, interval=0, startup_delay=False, verbosity=0)
    run.refresh_from_db()
    assert run.status == "done", run.error
    m = run.measured
    for name in ("baseline", "speculative"):
        ph = m["phases"][name]
        assert 3 <= len(ph["repeats"]) <= 4
        assert ph["prefix_cache"]["hit_tokens"] == 0
        if workload == "random":  # the stand-in's random prompts are 40 words (tokens) each, plus a BOS
            assert ph["prefix_cache"]["query_tokens"] == len(ph["repeats"]) * 4 * (40 + 1)
        assert ph["prefix_cache"]["query_tokens"] > 0
    n = len(m["phases"]["baseline"]["repeats"])
    assert m["pairs_stop"]["pairs"] == n and m["pairs_stop"]["why"]
    sent = m["prompt_draws"]["sent"]
    assert sent == {"baseline": n * 4 + 2 + (n - 1) * REWARM, "speculative": n * 4 + 2 + (n - 1) * REWARM}
    assert "new to the server it went to" in m["prompts"] and "0 of" in m["prompts"]
    html = " ".join(client.get(run.get_absolute_url()).content.decode().split())
    assert 'id="run-prompts"' in html and 'id="pairs-stop"' in html
    if workload == "code":  # the dataset holds enough distinct prompts for the most pairs the profile allows
        path = tmp_path / "runs" / str(run.pk) / "code.jsonl"
        prompts = [json.loads(line)["prompt"] for line in path.read_text().splitlines()]
        assert len(set(prompts)) == len(prompts) == bench.dataset_pool_size(profile) > bench.prompts_needed(profile)


@pytest.mark.slow
def test_vllms_own_random_dataset_through_the_registry():
    """vllm bench serve's get_samples (vLLM 0.32 CPU build) with the built-in tiny model's 512-token vocabulary: the
    drawn prompts, tokenized as the server tokenizes them, never share a first block within a run. (Its byte-level
    tokenizer adds no BOS and folds vLLM's random token runs into repeating patterns: two draws of one run shared a
    first block of 16 tokens, and the registry replaced the second.)"""
    pytest.importorskip("vllm", reason="the worker extra (vLLM's CPU build) is not installed")
    from vllm.benchmarks.datasets import get_samples
    from vllm.benchmarks.serve import add_cli_args
    from vllm.tokenizers import get_tokenizer
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from calculator.metadata import builtin
    from validator.bench_serve_entry import token_encoder

    path = str(builtin.ensure_builtin("tiny-random/llama")[0])
    tok = get_tokenizer(path)
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    args = parser.parse_args(["--model", path, "--tokenizer", path, "--dataset-name", "random", "--random-input-len",
                              "128", "--random-output-len", "8", "--num-prompts", "16", "--seed", "0"])
    registry = UniquePrompts(key_tokens(tok, BLOCK), token_encoder(tok))
    wrapped = unique_get_samples(get_samples, registry, {"target": "baseline"})
    cache = PrefixCache(bos=tok.num_special_tokens_to_add() > 0)
    for _ in range(12):
        reqs = wrapped(args, tok)
        assert len(reqs) == 16
        assert sum(cache.send(tok.encode(r.prompt, add_special_tokens=False)) for r in reqs) == 0
    assert max(registry.draws["baseline"]) > 1  # a draw repeated an earlier first block and was replaced
