"""The validator on PostgreSQL with several workers (README "Validation runs": ``DB=postgres``).

A throwaway cluster (``initdb`` + ``pg_ctl``, a unix socket in a temporary directory, no TCP; as root the
server runs as the ``postgres`` system user) serves these tests:

- the validator's own tests (queue, faults, views, units) pass against it (pytest-django's test database);
- two ``db_worker`` processes on one queue take each run exactly once (``SELECT ... FOR UPDATE SKIP
  LOCKED`` in django-tasks-db, then our conditional ``start``);
- a worker SIGKILLed mid-run is recovered: its processes killed, the finished phase kept, the run failed
  with the reason;
- four concurrent POSTs by one user make 2 runs against a limit of 2 (row lock on the user).

Needs Debian's ``postgresql`` package (``apt-get install -y postgresql``) and ``psycopg[binary]``;
skipped with that reason otherwise.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from worker_scenarios import (  # noqa: E402
    HANG_AFTER,
    four_concurrent_posts_respect_the_limit,
    kill_a_worker_mid_run,
    two_workers_take_each_run_once,
)
from worker_site import ROOT, PostgresCluster, Site  # noqa: E402

BINDIR = PostgresCluster.find_bindir()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(BINDIR is None, reason="PostgreSQL binaries (initdb, pg_ctl) not found: "
                                              "apt-get install -y postgresql"),
]
psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'psycopg[binary]')")


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() == 0 and not (shutil.which("runuser") and _user_exists("postgres")):
        pytest.skip("running as root, and no 'postgres' user or runuser to start PostgreSQL as")
    base = Path(tempfile.mkdtemp(prefix="llmcalc-pg-"))  # not under pytest's 0700 root-only tmp dirs
    pg = PostgresCluster(BINDIR, base)
    try:
        pg.start()
    except subprocess.CalledProcessError as e:
        log = base / "server.log"
        pytest.fail(f"could not start PostgreSQL: {e.stderr.decode(errors='replace')}"
                    f"{log.read_text() if log.exists() else ''}")
    yield pg
    pg.stop()
    shutil.rmtree(base, ignore_errors=True)


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


@pytest.fixture
def pg_site(cluster, tmp_path):
    """A site on a fresh, migrated database of the cluster."""
    def make(**kw) -> Site:
        dbname = f"llmcalc_{uuid.uuid4().hex[:12]}"
        cluster.create_database(dbname)
        site = Site(tmp_path, db_env=cluster.env(dbname), cluster=cluster, **kw)
        site.migrate()
        return site

    sites: list[Site] = []
    yield lambda **kw: sites.append(make(**kw)) or sites[-1]
    for s in sites:
        s.stop_workers()


def test_the_validator_tests_pass_on_postgresql(cluster):
    env = {**os.environ, **cluster.env("llmcalc"), "SECRET_KEY": "pg-test-key-" + "y" * 40}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow",
         "tests/test_validator_faults.py", "tests/test_validator_views.py", "tests/test_validator_units.py",
         "tests/test_validator_cli.py", "tests/test_security.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    check = subprocess.run([sys.executable, "-c", "import django; django.setup(); from django.db import connection;"
                            " print(connection.vendor)"], cwd=ROOT, env={**env, "DJANGO_SETTINGS_MODULE":
                                                                          "llmcalc.settings"},
                           capture_output=True, text=True, timeout=60)
    assert check.stdout.strip() == "postgresql"  # the settings did switch to it


def test_two_workers_on_one_queue_take_each_run_once(pg_site, tmp_path):
    site = pg_site(bench_extra=["--fake-log", str(tmp_path / "bench-starts.log")])
    two_workers_take_each_run_once(site, n=6)


def test_a_killed_workers_run_is_recovered(pg_site, tmp_path):
    site = pg_site(server_mode="stubborn",
                   bench_extra=["--fake-hang-after", str(HANG_AFTER), "--fake-pid-file", str(tmp_path / "bench.pid")])
    kill_a_worker_mid_run(site, second_worker=True)


def test_four_concurrent_posts_cannot_pass_the_limit(pg_site):
    four_concurrent_posts_respect_the_limit(pg_site())
