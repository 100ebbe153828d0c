"""Scenarios with real worker processes, run on SQLite (tests/test_worker_crash.py) and on PostgreSQL
(tests/test_validator_postgres.py). Each takes a ``worker_site.Site`` whose database is migrated."""
from __future__ import annotations

import collections
import os
import signal
import time
from pathlib import Path

from worker_site import Site, alive, wait_for


HANG_AFTER = 2  # the fake benchmark hangs once this many repeats are written: the first A/B pair


def kill_a_worker_mid_run(site: Site, second_worker: bool = False) -> None:
    """Both servers run side by side and the paired benchmark has finished its first A/B pair (baseline
    repeat 0, speculative repeat 0, saved on the row as each ended); it is in the middle of the next repeat
    (``--fake-hang-after 2``), and the worker is SIGKILLed. The two servers, a child of each, and the
    benchmark all ignore SIGTERM, so the parent-death signal alone does not end them. The sweep must leave
    no process of the run alive, keep the finished repeats, remove the run's directory, and fail the run
    with the reason. ``second_worker``: another worker on the queue from the moment the run is claimed;
    it must neither take the run nor be disturbed by the sweep."""
    [run_id] = site.submit(1)
    worker = site.worker("doomed")

    def hanging() -> dict | None:
        r = site.run(run_id)
        live = [g for g in r["process_groups"] if not g.get("stopped")]
        finished = sum(len(ph.get("repeats") or []) for ph in r["measured"].get("phases", {}).values())
        return r if finished == HANG_AFTER and len(live) == 3 else None

    if second_worker:
        wait_for(lambda: site.run(run_id)["status"] != "queued", 120, "the first worker to claim the run")
        survivor = site.worker("survivor")
    before = wait_for(hanging, 240, "the first A/B pair to be saved while the benchmark runs")
    assert before["status"] == "running"
    workdir = site.var / "runs" / run_id
    assert workdir.is_dir()
    phases = before["measured"]["phases"]
    assert [(r["pair"], len(r["bench"]["e2els_ms"])) for ph in ("baseline", "speculative")
            for r in phases[ph]["repeats"]] == [(0, before["configuration"]["profile"]["num_prompts"])] * 2
    assert before["measured"]["order"] == ["baseline", "speculative"]
    # the benchmark writes its pid once it is in its third repeat, long after both servers wrote theirs
    bench = int(wait_for(lambda: (site.base / "bench.pid").exists() and (site.base / "bench.pid").read_text(),
                         60, "the benchmark's pid"))
    [(base_server, base_child)] = site.server_pids("baseline")
    [(spec_server, spec_child)] = site.server_pids("speculative")
    recorded = {g["pgid"]: (g["role"], g["phase"]) for g in before["process_groups"] if not g.get("stopped")}
    assert recorded == {base_server: ("server", "baseline"), spec_server: ("server", "speculative"),
                        bench: ("bench", "paired")}  # every child process group is on the row
    processes = (base_server, base_child, spec_server, spec_child, bench)

    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    time.sleep(1.0)  # PR_SET_PDEATHSIG has sent SIGTERM; these ignore it
    assert all(alive(p) for p in processes)
    wait_for(lambda: time.time() - _heartbeat_s(site.run(run_id)) > 1.5, 30, "the heartbeat to go stale")

    out = site.manage("sweep_validation_runs", "--older-than", "1")
    assert f"1 stale run(s) marked failed: {run_id}" in out
    wait_for(lambda: not any(alive(p) for p in processes), 30, "the run's processes to end")
    after = site.run(run_id)
    assert after["status"] == "failed"
    assert "worker stopped responding (no heartbeat for 1 s)" in after["error"]
    planned = 2 * before["configuration"]["profile"]["repeats"]
    assert (f"Kept what finished: 2 of {planned} benchmark repeats (1 baseline, 1 speculative; "
            "1 complete A/B pair)") in after["error"]
    assert after["measured"]["phases"] == before["measured"]["phases"]  # the finished pair, as saved
    assert not workdir.exists()
    assert all(g.get("stopped") for g in after["process_groups"])
    assert [t["status"] for t in site.tasks() if _uuid(t["id"]) == _uuid(after["task_result_id"])] == ["FAILED"]
    assert "0 stale run(s) marked failed" in site.manage("sweep_validation_runs", "--older-than", "1")
    if second_worker:
        assert survivor.poll() is None
        assert [t["worker_ids"] for t in site.tasks()] == [["doomed"]]


def _uuid(value) -> str:
    return str(value).replace("-", "")  # SQLite stores UUIDs as 32 hex digits


def _heartbeat_s(row: dict) -> float:
    hb = row["heartbeat_at"]
    if isinstance(hb, str):  # SQLite: "2026-12-01 05:11:24.123456"
        from datetime import datetime, timezone

        hb = datetime.fromisoformat(hb).replace(tzinfo=timezone.utc)
    return hb.timestamp()


def two_workers_take_each_run_once(site: Site, n: int = 6) -> None:
    """``n`` runs, two ``db_worker`` processes on one queue: every run is done, by exactly one task claimed
    once by one worker, both workers took runs, each run's paired benchmark ran exactly once, and it
    alternated A B A B between the run's two servers (real HTTP: only the speculative server's
    ``/metrics`` has speculative-decoding counters)."""
    ids = site.submit(n)
    site.worker("w1")
    site.worker("w2")
    try:
        wait_for(lambda: all(site.run(i)["status"] in ("done", "failed") for i in ids), 120 + 60 * n,
                 f"{n} runs to finish")
    finally:
        site.stop_workers()
    runs = {i: site.run(i) for i in ids}
    assert {i: r["status"] for i, r in runs.items()} == {i: "done" for i in ids}, {i: r["error"] for i, r in runs.items()}
    assert all(r["attempt"] == 0 for r in runs.values())
    tasks = site.tasks()
    assert sorted(t["args_kwargs"]["args"][0] for t in tasks) == sorted(ids)  # one task per run
    assert all(t["status"] == "SUCCESSFUL" and len(t["worker_ids"]) == 1 for t in tasks)  # claimed once
    assert {t["worker_ids"][0] for t in tasks} == {"w1", "w2"}
    starts = collections.Counter(Path(line).parent.name + "/" + Path(line).name
                                 for line in (site.base / "bench-starts.log").read_text().split())
    assert starts == collections.Counter({f"{i}/bench.json": 1 for i in ids})
    for r in runs.values():
        profile, m = r["configuration"]["profile"], r["measured"]
        # the profile's pairs, then more while the intervals are wide, within its budget (bench_serve_entry
        # PairSchedule, validator.stats.stop_rule): the run says how many and why
        pairs = m["pairs_stop"]["pairs"]
        assert profile["repeats"] <= pairs <= profile["max_repeats"] and m["pairs_stop"]["why"]
        assert m["order"] == ["baseline", "speculative"] * pairs
        for phase in ("baseline", "speculative"):
            reps = m["phases"][phase]["repeats"]
            assert [x["pair"] for x in reps] == list(range(pairs))
            assert all(x["bench"]["completed"] == profile["num_prompts"] for x in reps)
            assert all((x["spec_decode"] is not None) == (phase == "speculative") for x in reps)


CONCURRENT_POSTS = """
import json, threading
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from calculator.metadata import builtin as builtin_models
from validator.models import ValidationRun
import transformers

user = User.objects.create_user("eve")
user.user_permissions.add(Permission.objects.get(codename="add_validationrun"))
builtin_models.ensure_builtin("tiny-random/llama")  # built before the race, as is transformers' lazy import
assert transformers.LlamaConfig
from validator import capabilities
capabilities.record(capabilities.describe("test-cpu-worker"))  # this machine as the live worker runs need
barrier = threading.Barrier(4)
codes = []

def post():
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    barrier.wait()
    try:
        codes.append(client.post("/runs/new", {"model": "tiny-random/llama", "gpu": "CPU",
                                               "max_model_len": "256"}).status_code)
    finally:
        connection.close()

threads = [threading.Thread(target=post) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join(120)
print(json.dumps({"codes": sorted(codes), "runs": ValidationRun.objects.filter(created_by=user).count()}))
"""


def four_concurrent_posts_respect_the_limit(site: Site) -> None:
    """One user, four simultaneous POSTs (a thread and a database connection each), a limit of 2:
    exactly 2 runs, the other two requests answered 429."""
    import json

    site.env["VALIDATOR_MAX_ACTIVE_RUNS_PER_USER"] = "2"
    out = json.loads(site.python(CONCURRENT_POSTS, timeout=300).strip().splitlines()[-1])
    assert out == {"codes": [302, 302, 429, 429], "runs": 2}, out
