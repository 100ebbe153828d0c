"""Which runtime releases the compatibility data covers: a small pure API over ``compat/data/``.

A release is covered when ``compat/data/<runtime>-<release>.json`` exists (written by
``manage.py sync_compat`` from that release's own wheel; see ``compat/README.md``). Nothing here
imports Django or the runtime; the request model and the forms take their release and backend choices
from these functions instead of hard-coded lists.

Public API::

    covered_releases(runtime="vllm") -> tuple[str, ...]      # oldest first
    is_covered(release, runtime="vllm") -> bool
    attention_backends(release, runtime="vllm") -> tuple[str, ...]
    not_covered_message(release, runtime="vllm") -> str
    NotCoveredError (LookupError)
"""
from __future__ import annotations

from . import extract

RUNTIME_LABELS = {"vllm": "vLLM"}


class NotCoveredError(LookupError):
    """The release has no compatibility data; ``str(e)`` is :func:`not_covered_message`."""

    def __str__(self) -> str:
        return self.args[0] if self.args else ""


def version_key(release: str) -> tuple[int, ...]:
    """Sort key of a release name: ``"0.9.2"`` -> ``(0, 9, 2)``, so 0.9.2 < 0.10.2 < 0.33.0.

    Data files are named by plain ``X.Y.Z`` releases; a part that is not a number sorts as 0.
    """
    return tuple(int(p) if p.isdigit() else 0 for p in release.split("."))


def covered_releases(runtime: str = "vllm") -> tuple[str, ...]:
    """Releases of ``runtime`` with committed compatibility data, oldest first (by version, not text)."""
    names = {p.name[len(runtime) + 1:-len(".json")] for p in extract.DATA_DIR.glob(f"{runtime}-*.json")}
    return tuple(sorted(names, key=version_key))


def is_covered(release: str, runtime: str = "vllm") -> bool:
    """True when ``release`` (exact name, e.g. ``"0.33.0"``) has committed data for ``runtime``."""
    return isinstance(release, str) and release in covered_releases(runtime)


def not_covered_message(release: str, runtime: str = "vllm") -> str:
    """``"vLLM 0.6.4 is not covered; covered: 0.9.2, 0.10.0, ..., 0.33.0"`` (every covered release)."""
    label = RUNTIME_LABELS.get(runtime, runtime)
    covered = covered_releases(runtime)
    return (f"{label} {release} is not covered; covered: {', '.join(covered)}" if covered
            else f"{label} {release} is not covered; no {label} release has compatibility data")


def attention_backends(release: str, runtime: str = "vllm") -> tuple[str, ...]:
    """The ``AttentionBackendEnum`` member names of ``release``, in the enum's source order.

    These are the values ``--attention-backend`` accepts in that release (members with an empty class
    path, such as ``CUSTOM``, are not backends and are left out by the extractor). Each name's
    ``file:line`` is in the data file (``backends[i]["registry"]``); a member whose class is not in the
    wheel still appears here (its verdict says so). Empty for 0.9 / 0.10: they have no ``--attention-backend``
    (the data's ``selection`` says what they read instead).

    Raises:
        NotCoveredError: ``release`` is not covered (message: :func:`not_covered_message`).
    """
    if not is_covered(release, runtime):
        raise NotCoveredError(not_covered_message(release, runtime))
    data = extract.load(release, runtime)
    if data.get("selection", {}).get("flag", "--attention-backend") is None:
        return ()
    return tuple(b["name"] for b in data["backends"])
