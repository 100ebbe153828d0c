"""A worker killed mid-run, with the real ``db_worker`` and sweep command as processes on an SQLite file
(the same scenarios run on PostgreSQL in tests/test_validator_postgres.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worker_scenarios import (  # noqa: E402
    HANG_AFTER,
    four_concurrent_posts_respect_the_limit,
    kill_a_worker_mid_run,
    two_workers_take_each_run_once,
)
from worker_site import Site  # noqa: E402


def sqlite_site(tmp_path: Path, **kw) -> Site:
    site = Site(tmp_path, **kw)
    site.migrate()
    return site


@pytest.mark.slow
def test_a_killed_worker_leaves_no_process_and_keeps_the_finished_phase(tmp_path):
    site = sqlite_site(tmp_path, server_mode="stubborn",
                       bench_extra=["--fake-hang-after", str(HANG_AFTER), "--fake-pid-file", str(tmp_path / "bench.pid")])
    try:
        kill_a_worker_mid_run(site)
    finally:
        site.stop_workers()


@pytest.mark.slow
def test_two_workers_on_sqlite_take_each_run_once(tmp_path):
    site = sqlite_site(tmp_path, bench_extra=["--fake-log", str(tmp_path / "bench-starts.log")])
    two_workers_take_each_run_once(site, n=4)


def test_four_concurrent_posts_on_an_sqlite_file_cannot_pass_the_limit(tmp_path):
    four_concurrent_posts_respect_the_limit(sqlite_site(tmp_path))
