"""``load_model``: model metadata from the database cache, the Hugging Face Hub, or the offline catalog.

Order, for ``load_model("ORG/NAME", revision)`` (``revision`` defaults to ``main``):

1. A commit sha already in the cache is answered from it: a sha names immutable files, so it is never
   re-fetched. A branch or tag name is answered from the cache while its ``HubRevision`` row is younger than
   ``settings.HUB_BRANCH_TTL_S`` seconds.
2. Otherwise the Hub resolves the name to a sha (one request). If that sha is cached, it is answered from
   the cache; else config.json, the quantization file and the safetensors headers are fetched
   (``calculator.metadata.hub``) and stored.
3. When the Hub cannot be used (``HF_HUB_OFFLINE=1``, timeout, rate limit, 5xx, unreachable), the answer
   comes from the cache (the sha the name last resolved to, however old), then from the offline catalog;
   a note says which and why. After a connection failure or timeout the Hub is not tried again for
   ``settings.HUB_RETRY_AFTER_S`` seconds (default 60), so an offline server does not wait on every lookup.
4. A gated repo read without ``HF_TOKEN`` falls back to the catalog's copy when there is one (with a note);
   every other Hub answer that is the user's to fix raises a ``MetadataError`` with a ``.message``.
"""
from __future__ import annotations

import json
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from calculator.metadata import builtin as builtin_models
from calculator.metadata.catalog import catalog_lookup, catalog_models, catalog_repo_id, did_you_mean
from calculator.engine.schemas import CheckpointWeights
from calculator.metadata.hub import (
    COMMIT_SHA,
    DEFAULT_REVISION,
    GatedRepoError,
    HubClient,
    HubUnavailableError,
    InvalidModelIdError,
    MetadataError,
    ModelMetadata,
    NoConfigError,
    RepoNotFoundError,
    RevisionNotFoundError,
    validate_model_id,
)
from calculator.metadata.hub import env_offline
from calculator.models import HubRevision, ModelMetadataCache

__all__ = [
    "load_model",
    "catalog_models",
    "load_catalog",
    "MetadataError",
    "InvalidModelIdError",
    "RepoNotFoundError",
    "RevisionNotFoundError",
    "GatedRepoError",
    "NoConfigError",
    "HubUnavailableError",
    "ModelMetadata",
]

_hub_down_until = 0.0  # time.monotonic() before which the Hub is not tried (after a timeout / no route)
_hub_down_reason = ""


def reset_hub_state() -> None:
    """Forget a remembered Hub outage (tests, or an admin who fixed the network)."""
    global _hub_down_until, _hub_down_reason
    _hub_down_until, _hub_down_reason = 0.0, ""


def load_model(
    model_id: str,
    revision: str | None = None,
    *,
    count_params: bool = True,
    client: HubClient | None = None,
) -> ModelMetadata:
    """Metadata for Hub id ``model_id`` at ``revision`` (branch, tag or sha; ``None`` = ``main``).

    ``count_params``: without safetensors headers, count parameters on torch's meta device (imports
    transformers; a few seconds the first time in a process). ``client``: a ``HubClient`` (tests,
    benchmarks); by default one for ``HF_ENDPOINT`` / ``HF_TOKEN`` with ``settings.HUB_TIMEOUT_S``.

    Raises a ``MetadataError`` subclass (``.message`` for the user, ``.field == "model"``):
    ``InvalidModelIdError``, ``RepoNotFoundError``, ``RevisionNotFoundError``, ``GatedRepoError``,
    ``InvalidTokenError``, ``NoConfigError``, ``BadConfigError``, and ``HubUnavailableError`` only when
    neither the cache nor the catalog has the model.
    """
    global _hub_down_until, _hub_down_reason
    repo_id = validate_model_id(model_id)
    if builtin_models.is_builtin(repo_id):
        # the committed config of the built-in model: no weights are written to answer it (the validator
        # writes them when it runs the model)
        config = builtin_models.builtin_config(repo_id)
        dirname = builtin_models.BUILTIN_MODELS[repo_id][0]
        return ModelMetadata(repo_id=repo_id, origin="builtin", config=config, fetched_at=timezone.now(),
                             source=f"built-in tiny random-weight model ({dirname}, written locally when run)",
                             notes=[f"{repo_id} is built in: a seeded random-weight model written under var/models on "
                                    "first run, so validation runs need nothing from the Hub"])
    rev = (revision or "").strip() or DEFAULT_REVISION
    is_sha = bool(COMMIT_SHA.fullmatch(rev))
    pointer = None

    if is_sha:
        row = _row(repo_id, rev)
        if row is not None:
            return _from_row(row, rev, f"From the database cache: commit {rev[:7]} fetched {_when(row.fetched_at)}.")
    else:
        pointer = HubRevision.objects.filter(repo_id=repo_id, revision=rev).first()
        if pointer is not None and timezone.now() - pointer.resolved_at < _ttl():
            row = _row(repo_id, pointer.sha)
            if row is not None:
                return _from_row(row, rev, (
                    f"From the database cache: {rev!r} pointed to {pointer.sha[:7]} at "
                    f"{_when(pointer.resolved_at)} (re-resolved after {settings.HUB_BRANCH_TTL_S} s)."))

    if env_offline():
        return _fallback(repo_id, rev, pointer, "HF_HUB_OFFLINE=1: the Hub was not contacted.", count_params)
    if time.monotonic() < _hub_down_until:
        return _fallback(repo_id, rev, pointer, f"{_hub_down_reason} (not retried for "
                         f"{_retry_after():g} s)", count_params)

    client = client or HubClient(timeout=settings.HUB_TIMEOUT_S)
    try:
        info = client.resolve(repo_id, rev)
        if not is_sha:
            HubRevision.objects.update_or_create(
                repo_id=repo_id, revision=rev, defaults={"sha": info.sha, "resolved_at": timezone.now()})
        row = _row(repo_id, info.sha)
        if row is not None:
            return _from_row(row, rev, (
                f"From the database cache: {rev!r} still resolves to {info.sha[:7]}, fetched "
                f"{_when(row.fetched_at)}; a commit is never re-fetched."))
        meta = client.fetch(info, count_params=count_params)
    except RepoNotFoundError as exc:  # a typo: the nearest catalog ids, as a mistyped GPU or flag gets
        hint = did_you_mean(repo_id)
        if not hint:
            raise
        raise RepoNotFoundError(f"{exc.message} Or {hint}") from None
    except HubUnavailableError as exc:
        if "did not answer" in exc.message or "cannot be reached" in exc.message:
            _hub_down_until, _hub_down_reason = time.monotonic() + _retry_after(), exc.message
        return _fallback(repo_id, rev, pointer, exc.message, count_params)
    except GatedRepoError as exc:
        if exc.has_token:
            raise
        meta = _catalog(repo_id, count_params)
        if meta is None:
            raise
        return _with(meta, rev, f"{exc.message} Meanwhile the answer uses the offline catalog's copy.")
    _store(meta)
    return meta


def load_catalog() -> int:
    """Load every offline-catalog model into the cache (``manage.py load_catalog``), with the committed
    meta-device counts (no torch import); returns how many."""
    for repo_id in catalog_models():
        meta = catalog_lookup(repo_id)
        _store(meta)
    return len(catalog_models())


# ------------------------------------------------------------------------------------------ helpers


def _ttl() -> timedelta:
    return timedelta(seconds=settings.HUB_BRANCH_TTL_S)


def _retry_after() -> float:
    return float(getattr(settings, "HUB_RETRY_AFTER_S", 60))  # llmcalc/settings.py


def _when(moment) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _row(repo_id: str, sha: str) -> ModelMetadataCache | None:
    return ModelMetadataCache.objects.filter(repo_id=repo_id, sha=sha).first()


def _fallback(repo_id: str, rev: str, pointer: HubRevision | None, reason: str, count_params: bool) -> ModelMetadata:
    """Cache (the sha ``rev`` last resolved to), then the offline catalog; else ``HubUnavailableError``."""
    if pointer is not None:
        row = _row(repo_id, pointer.sha)
        if row is not None:
            return _from_row(row, rev, (
                f"{reason} Using the database cache: {rev!r} pointed to {pointer.sha[:7]} at "
                f"{_when(pointer.resolved_at)}; it may have moved since."))
    meta = _catalog(repo_id, count_params)
    if meta is not None:
        note = f"{reason} Using the offline catalog."
        if rev != DEFAULT_REVISION:
            note += f" The catalog copy is not known to be revision {rev!r}."
        return _with(meta, rev, note)
    # the way out in each surface's words: the page's model field (the API's model parameter), the command's flags
    page = "pick a catalog model in the model field (it suggests them as you type)"
    cli = ("pick a catalog model (--model), or give its config.json to manage.py estimate or check_compat with "
           "--config PATH")
    hint = did_you_mean(repo_id)
    if hint:  # a typo of a catalog id: name it, as a mistyped GPU or flag gets
        head = f"{reason} {repo_id} is neither in the database cache nor in the offline catalog; {hint} Otherwise "
        raise HubUnavailableError(head + page + ".", cli_message=head + cli + ".")
    sample = ", ".join(catalog_models()[:3])
    head = (f"{reason} {repo_id} is neither in the database cache nor in the offline catalog "
            f"({len(catalog_models())} models, e.g. {sample}): ")
    raise HubUnavailableError(head + page + ".", cli_message=head + cli + ".")


def _catalog(repo_id: str, count_params: bool) -> ModelMetadata | None:
    """The catalog's answer, through its cache row. Its weights are the committed meta-device counts
    (``catalog.catalog_weights``) either way, so the catalog and the cache give the same numbers;
    ``count_params`` only matters for Hub repos without safetensors headers."""
    canonical = catalog_repo_id(repo_id)
    if canonical is None:
        return None
    row = _row(canonical, "")
    if row is not None:
        return _from_row(row, DEFAULT_REVISION, None)
    meta = catalog_lookup(canonical)
    _store(meta)
    return meta


def _with(meta: ModelMetadata, rev: str, note: str | None) -> ModelMetadata:
    notes = ([note] if note else []) + meta.notes
    return meta.model_copy(update={"revision": rev, "notes": notes})


def _from_row(row: ModelMetadataCache, rev: str, note: str | None) -> ModelMetadata:
    meta = ModelMetadata(
        repo_id=row.repo_id,
        revision=rev,
        sha=row.sha or None,
        origin=row.origin,
        config=row.config,
        quant_config=row.quant_config,
        quant_config_file=row.quant_config_file or None,
        weights=CheckpointWeights.model_validate(row.weights) if row.weights else None,
        source=row.source,
        notes=list(row.notes),
        fetched_at=row.fetched_at,
        gated=row.gated,
        remote_code=row.remote_code,
        multimodal=row.multimodal,
    )
    return _with(meta, rev, note)


def _store(meta: ModelMetadata) -> ModelMetadataCache:
    row, _ = ModelMetadataCache.objects.update_or_create(
        repo_id=meta.repo_id,
        sha=meta.sha or "",
        defaults={
            "origin": meta.origin,
            "revision": meta.revision if meta.origin == "hub" else "",
            "config_text": json.dumps(meta.config),
            "quant_config_text": json.dumps(meta.quant_config) if meta.quant_config is not None else "",
            "quant_config_file": meta.quant_config_file or "",
            "weights": meta.weights.model_dump() if meta.weights else None,
            "source": meta.source,
            "notes": meta.notes,
            "gated": meta.gated,
            "remote_code": meta.remote_code,
            "multimodal": meta.multimodal,
            "fetched_at": meta.fetched_at,
        },
    )
    return row
