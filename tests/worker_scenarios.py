"""Scenarios with real worker processes, run on SQLite (tests/test_worker_crash.py) and on PostgreSQL
(tests/test_validator_postgres.py). Each takes a ``worker_site.Site`` whose database is migrated."""
from __future__ import annotations

import collections
import os
import signal
import time
from pathlib import Path

from worker_site import Site, alive, wait_for


def kill_a_worker_mid_run(site: Site, second_worker: bool = False) -> None:
    """The baseline phase has finished, the speculative phase's server and benchmark are running (both
    ignore SIGTERM, so the parent-death signal alone does not end them), and the worker is SIGKILLed.
    The sweep must leave no process of the run alive, keep the baseline phase, remove the run's
    directory, and fail the run with the reason. ``second_worker``: another worker on the queue from the
    moment the run is claimed; it must neither take the run nor be disturbed by the sweep."""
    [run_id] = site.submit(1)
    worker = site.worker("doomed")

    def hanging() -> dict | None:
        r = site.run(run_id)
        spec_bench = [g for g in r["process_groups"] if g["role"] == "bench" and g["phase"] == "speculative"
                      and not g.get("stopped")]
        return r if "baseline" in r["measured"].get("phases", {}) and spec_bench else None

    if second_worker:
        wait_for(lambda: site.run(run_id)["status"] != "queued", 60, "the first worker to claim the run")
        survivor = site.worker("survivor")
    before = wait_for(hanging, 180, "the baseline phase to be saved and the speculative benchmark to run")
    assert before["status"] == "running"
    workdir = site.var / "runs" / run_id
    assert workdir.is_dir()
    # the benchmark writes its pid once the speculative server answers /health, which the server does
    # after writing its own pids (before that, server.pids may still be the baseline server's)
    bench = int(wait_for(lambda: (site.base / "bench.pid").exists() and (site.base / "bench.pid").read_text(),
                         30, "the benchmark's pid"))
    server, server_child = (int(p) for p in (site.base / "server.pids").read_text().split())
    recorded = {g["pgid"]: g for g in before["process_groups"] if not g.get("stopped")}
    assert set(recorded) == {server, bench}, (recorded, server, bench)  # both groups are on the row
    assert {g["role"] for g in recorded.values()} == {"server", "bench"}

    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    time.sleep(1.0)  # PR_SET_PDEATHSIG has sent SIGTERM; these ignore it
    assert alive(server) and alive(server_child) and alive(bench)
    wait_for(lambda: time.time() - _heartbeat_s(site.run(run_id)) > 1.5, 30, "the heartbeat to go stale")

    out = site.manage("sweep_validation_runs", "--older-than", "1")
    assert f"1 stale run(s) marked failed: {run_id}" in out
    wait_for(lambda: not any(alive(p) for p in (server, server_child, bench)), 15, "the run's processes to end")
    after = site.run(run_id)
    assert after["status"] == "failed"
    assert "worker stopped responding (no heartbeat for 1 s)" in after["error"]
    assert "Kept what finished: the baseline phase" in after["error"]
    assert set(after["measured"]["phases"]) == {"baseline"}
    assert after["measured"]["phases"]["baseline"] == before["measured"]["phases"]["baseline"]
    assert not workdir.exists()
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
    once by one worker, both workers took runs, and each run's two benchmarks ran exactly once."""
    ids = site.submit(n)
    site.worker("w1")
    site.worker("w2")
    try:
        wait_for(lambda: all(site.run(i)["status"] in ("done", "failed") for i in ids), 60 + 30 * n,
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
    assert starts == collections.Counter({f"{i}/{phase}-bench.json": 1 for i in ids
                                          for phase in ("baseline", "speculative")})


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
