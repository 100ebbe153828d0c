"""``scripts/start`` (README "Start the site"): a taken port is said before anything starts, with the port
and how to choose another; a web server that fails later takes the validation worker down with it. Each
test runs the real script in its own session (``start_new_session``) with the test's virtualenv as
``VENV`` (so it does not install) and a throwaway ``VAR_DIR``, then checks that no process of that
session is left."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
START = ROOT / "scripts" / "start"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The caller's environment with the database/static/key settings of this checkout dropped, so the
    script uses ``tmp_path/var`` for all of them, and this virtualenv (``VENV``: no install)."""
    drop = {"DB", "DB_NAME", "STATIC_ROOT", "SECRET_KEY_FILE", "DJANGO_SETTINGS_MODULE", "GUNICORN_CMD_ARGS"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "VENV": sys.prefix, "VAR_DIR": str(tmp_path / "var"), "WEB_CONCURRENCY": "1", **extra}


def _alive_in_session(sid: int) -> list[str]:
    """Processes (not zombies) whose session id is ``sid``, as 'pid command' strings (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{stat.parent.name} {cmd.strip()}")
        except (OSError, IndexError, ValueError):
            continue  # exited while we looked
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _run_start(env: dict[str, str], timeout_s: float) -> tuple[int, str, str, list[str]]:
    """Run scripts/start to its end; returns (exit status, stdout, stderr, processes of its session left
    2 s after it ended). Whatever is left is killed afterwards, so a failing test leaves nothing behind."""
    proc = subprocess.Popen([str(START)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        deadline = time.monotonic() + 2.0
        left = _alive_in_session(proc.pid)
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = _alive_in_session(proc.pid)
        return proc.returncode, out, err, left
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


@pytest.fixture
def busy_port():
    """A port on 127.0.0.1 held by a listening socket, as another server would hold it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def test_a_taken_port_is_named_with_how_to_choose_another_before_anything_starts(tmp_path, busy_port):
    status, out, err, left = _run_start(_env(tmp_path, PORT=str(busy_port)), timeout_s=60)
    assert status == 1, (out, err)
    assert f"llmcalc: port {busy_port} on 127.0.0.1 is already in use" in err
    assert f"start on another port: PORT={busy_port + 1} scripts/start" in err
    assert "llmcalc: http://" not in out  # never claims to be ready
    assert left == []
    # It stopped before the secret key, the database or any process: nothing was written.
    assert not (tmp_path / "var" / "secret_key").exists() and not (tmp_path / "var" / "db.sqlite3").exists()


@pytest.mark.parametrize("port", ["abc", "0", "65536", "8000x"])
def test_a_port_that_is_not_a_port_number_is_refused_with_exit_2(tmp_path, port):
    status, out, err, left = _run_start(_env(tmp_path, PORT=port), timeout_s=60)
    assert status == 2, (out, err)
    assert f"llmcalc: PORT={port} is not a TCP port number (1-65535)" in err
    assert left == []


@pytest.mark.parametrize("workers", ["two", "0", "-1"])
def test_a_worker_count_that_is_not_a_number_is_refused_with_exit_2(tmp_path, workers):
    # gunicorn itself would die on it with a traceback (config.py: int(os.environ.get("WEB_CONCURRENCY", 1))).
    status, out, err, left = _run_start(_env(tmp_path, PORT=str(_free_port()), WEB_CONCURRENCY=workers),
                                        timeout_s=60)
    assert status == 2, (out, err)
    assert f"llmcalc: WEB_CONCURRENCY={workers} is not a number of gunicorn workers (1-999)" in err
    assert "Traceback" not in err and left == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_a_web_server_that_fails_after_start_takes_the_worker_down(tmp_path):
    # gunicorn's own --env reaches only gunicorn: its workers cannot import the settings, so the master
    # halts with WORKER_BOOT_ERROR = 3 (gunicorn/arbiter.py) after it has started listening.
    port = _free_port()
    env = _env(tmp_path, PORT=str(port), GUNICORN_CMD_ARGS="--env DJANGO_SETTINGS_MODULE=no_such_settings_module")
    status, out, err, left = _run_start(env, timeout_s=240)
    ready = re.search(rf"llmcalc: http://127\.0\.0\.1:{port}/ \(web pid (\d+), worker pid (\d+);", out)
    assert ready, (out, err)
    assert status == 3, (out, err)
    assert "llmcalc: the web server (gunicorn) exited with status 3; stopping the validation worker" in err
    assert left == []  # the worker (pid in the ready line) included
    assert not _alive(int(ready.group(2)))


@pytest.mark.slow
def test_a_web_server_that_exits_before_listening_is_reported_and_no_worker_starts(tmp_path):
    port = _free_port()
    status, out, err, left = _run_start(_env(tmp_path, PORT=str(port), GUNICORN_CMD_ARGS="--workers two"),
                                        timeout_s=240)
    assert status == 2, (out, err)  # gunicorn's argparse: "argument -w/--workers: invalid int value: 'two'"
    assert "invalid int value: 'two'" in err
    assert f"llmcalc: the web server (gunicorn) exited with status 2 before listening on 127.0.0.1:{port}" in err
    assert "llmcalc: http://" not in out and "Starting worker" not in err  # db_worker's first line
    assert left == []
