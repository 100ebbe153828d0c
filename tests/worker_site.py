"""A site run as real processes, for tests that kill workers: its own database (an SQLite file, or a
PostgreSQL database of a throwaway cluster, ``PostgresCluster``), ``VAR_DIR``, ``db_worker`` processes,
and the fake vLLM server and benchmark (tests/fake_vllm_server.py, tests/fake_vllm_bench.py) as the
worker's commands (tests/crash_settings.py). Nothing here uses pytest-django's test database: the
processes must share one database, so each test gets a fresh one."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
FAKE_SERVER = str(TESTS / "fake_vllm_server.py")
FAKE_BENCH = str(TESTS / "fake_vllm_bench.py")


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(predicate, timeout_s: float, what: str, every_s: float = 0.2):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


class PostgresCluster:
    """A throwaway PostgreSQL cluster: ``initdb`` + ``pg_ctl`` in a temporary directory, listening only on
    a unix socket there (no TCP), trust authentication for the ``postgres`` role. PostgreSQL refuses to
    run as root, so as root the server runs as the ``postgres`` system user (``runuser``)."""

    def __init__(self, bindir: Path, base: Path):
        self.bindir, self.base = bindir, base
        self.data, self.sock = base / "data", base / "sock"
        self.port = 5432 + (os.getpid() % 1000) + 1
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]

    @staticmethod
    def find_bindir() -> Path | None:
        """The directory of ``initdb``/``pg_ctl``: on PATH, else Debian's /usr/lib/postgresql/<major>/bin."""
        found = shutil.which("initdb")
        if found and shutil.which("pg_ctl"):
            return Path(os.path.realpath(found)).parent
        for bindir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
            if (bindir / "initdb").exists() and (bindir / "pg_ctl").exists():
                return bindir
        return None

    def _run(self, *argv: str) -> None:
        subprocess.run([*self.as_user, *argv], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.sock.mkdir(exist_ok=True)
        if self.as_user:
            shutil.chown(self.base, "postgres")
            shutil.chown(self.sock, "postgres")
            os.chmod(self.base, 0o755)
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "--no-sync", "-E", "UTF8")
        opts = f"-c listen_addresses='' -k {self.sock} -p {self.port} -c fsync=off -c max_connections=100"
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", opts, "-w", "-t", "60",
                  "-l", str(self.base / "server.log"), "start")

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run([*self.as_user, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                            "-w", "stop"], capture_output=True, timeout=60)

    def env(self, dbname: str) -> dict[str, str]:
        return {"DB": "postgres", "DB_HOST": str(self.sock), "DB_PORT": str(self.port), "DB_USER": "postgres",
                "DB_PASSWORD": "", "DB_NAME": dbname}

    def connect(self, dbname: str = "postgres"):
        import psycopg

        return psycopg.connect(host=str(self.sock), port=self.port, user="postgres", dbname=dbname,
                               autocommit=True)

    def create_database(self, dbname: str) -> None:
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')


class Site:
    """The site's processes on one database. ``manage(...)`` runs a management command;
    ``worker()`` starts a ``db_worker``; ``run(id)`` reads a run's row; ``tasks()`` the queue's rows."""

    def __init__(self, base: Path, db_env: dict[str, str] | None = None, cluster: PostgresCluster | None = None,
                 bench_extra: list[str] | None = None, server_mode: str = "serve"):
        self.base = base
        self.var = base / "var"
        self.var.mkdir(parents=True, exist_ok=True)
        self.cluster = cluster
        self.pid_dir = base / "server-pids"  # <phase>.<pid>.pids per fake server (tests/fake_vllm_server.py)
        self.db_env = db_env or {"DB": "sqlite", "DB_NAME": str(base / "db.sqlite3")}
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DB", "DJANGO_", "VALIDATOR_"))},
            **self.db_env,
            "DJANGO_SETTINGS_MODULE": "tests.crash_settings",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "VAR_DIR": str(self.var),
            "SECRET_KEY": "worker-crash-test-key-" + "x" * 40,
            "HF_HUB_OFFLINE": "1",
            "TEST_VALIDATOR_SERVER_COMMAND": json.dumps([sys.executable, FAKE_SERVER, "--fake-mode", server_mode,
                                                         "--fake-pid-dir", str(self.pid_dir)]),
            "TEST_VALIDATOR_BENCH_COMMAND": json.dumps([sys.executable, FAKE_BENCH, *(bench_extra or [])]),
        }
        self.workers: list[subprocess.Popen] = []

    def manage(self, *args: str, timeout: float = 120) -> str:
        r = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=self.env, cwd=ROOT,
                           capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, f"manage.py {' '.join(args)}: {r.stdout}\n{r.stderr}"
        return r.stdout

    def python(self, code: str, timeout: float = 120) -> str:
        prelude = "import django; django.setup()\n"
        r = subprocess.run([sys.executable, "-c", prelude + code], env=self.env, cwd=ROOT, capture_output=True,
                           text=True, timeout=timeout)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def migrate(self) -> None:
        self.manage("migrate", "--noinput", "-v", "0")

    def submit(self, n: int = 1) -> list[str]:
        """``n`` runs of the built-in tiny Llama on the CPU (ngram speculation), enqueued."""
        code = (
            "from validator.models import ValidationRun\n"
            f"for _ in range({n}):\n"
            "    print(ValidationRun.submit({'model': 'tiny-random/llama', 'gpu': 'CPU', 'max_model_len': '256',"
            " 'speculative_config': '{\"method\": \"ngram\", \"num_speculative_tokens\": 2}'}).pk)\n"
        )
        return self.python(code).split()

    def worker(self, name: str) -> subprocess.Popen:
        log = open(self.base / f"worker-{name}.log", "ab")
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "db_worker", "--queue-name", "*", "--no-reload",
             "--interval", "0.2", "--no-startup-delay", "--worker-id", name],
            env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.workers.append(proc)
        return proc

    def server_pids(self, phase: str) -> list[tuple[int, int | None]]:
        """``(pid, child pid or None)`` of each fake server of ``phase`` ("baseline"/"speculative") started
        so far, from the pid files they write."""
        out = []
        for f in sorted(self.pid_dir.glob(f"{phase}.*.pids")):
            pids = [int(p) for p in f.read_text().split()]
            out.append((pids[0], pids[1] if len(pids) > 1 else None))
        return out

    def stop_workers(self) -> None:
        """Stop the workers (SIGTERM, then SIGKILL), and SIGKILL what fake servers and benchmarks a failed
        test may have left (their pid files; only processes that are still our fake scripts)."""
        for pid_file in (*self.pid_dir.glob("*.pids"), self.base / "bench.pid"):
            try:
                pids = [int(p) for p in pid_file.read_text().split()]
            except (OSError, ValueError):
                continue
            for pid in pids:
                try:
                    if "fake_vllm" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                        os.killpg(os.getpgid(pid), signal.SIGKILL)
                except (OSError, ProcessLookupError):
                    pass
        for w in self.workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in self.workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()

    # -- reading the database directly (cheap enough to poll) -------------------------------------------
    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        if self.cluster is not None:
            with self.cluster.connect(self.db_env["DB_NAME"]) as conn:
                return conn.execute(sql.replace("?", "%s"), params).fetchall()
        with sqlite3.connect(self.db_env["DB_NAME"], timeout=20) as conn:
            return conn.execute(sql, params).fetchall()

    def run(self, run_id: str) -> dict[str, Any]:
        cols = ["status", "stage", "error", "measured", "process_groups", "attempt", "task_result_id",
                "worker_host", "server_pgid", "heartbeat_at", "configuration"]
        key = run_id if self.cluster is not None else run_id.replace("-", "")
        rows = self._query(f"SELECT {', '.join(cols)} FROM validator_validationrun WHERE id = ?", (key,))
        assert rows, f"no run {run_id}"
        row = dict(zip(cols, rows[0]))
        for k in ("measured", "process_groups", "configuration"):
            if isinstance(row[k], str):
                row[k] = json.loads(row[k])
        return row

    def tasks(self) -> list[dict[str, Any]]:
        cols = ["id", "status", "worker_ids", "args_kwargs"]
        rows = self._query(f"SELECT {', '.join(cols)} FROM django_tasks_database_dbtaskresult")
        out = []
        for row in rows:
            d = dict(zip(cols, row))
            for k in ("worker_ids", "args_kwargs"):
                if isinstance(d[k], str):
                    d[k] = json.loads(d[k])
            out.append(d)
        return out
