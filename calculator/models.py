"""Database cache of model metadata (``calculator.metadata``).

``ModelMetadataCache`` holds what was fetched for one (repo id, commit sha): a sha names immutable files,
so such a row is never re-fetched. Offline-catalog copies are rows with an empty ``sha`` and
``origin = "catalog"``. ``HubRevision`` maps a branch or tag name to the sha it resolved to, and when;
``calculator.metadata`` re-resolves it after ``settings.HUB_BRANCH_TTL_S`` seconds.

``config`` and ``quant_config`` are stored as JSON text, not ``JSONField``: real configs contain
``Infinity`` (Nemotron-H), which SQLite's ``JSON_VALID`` and PostgreSQL's ``jsonb`` reject.
"""
from __future__ import annotations

import json
from typing import Any

from django.db import models


class ModelMetadataCache(models.Model):
    ORIGIN_HUB = "hub"
    ORIGIN_CATALOG = "catalog"
    ORIGIN_CHOICES = [(ORIGIN_HUB, "Hugging Face Hub"), (ORIGIN_CATALOG, "offline catalog")]

    repo_id = models.CharField(max_length=200, help_text="Hub id ORG/NAME")
    sha = models.CharField(max_length=40, blank=True, help_text="commit sha; empty for catalog copies")
    origin = models.CharField(max_length=10, choices=ORIGIN_CHOICES, default=ORIGIN_HUB)
    revision = models.CharField(max_length=200, blank=True, help_text="revision first requested for this sha")
    config_text = models.TextField(help_text="config.json as JSON text")
    quant_config_text = models.TextField(blank=True, help_text="separate quantization file, JSON text")
    quant_config_file = models.CharField(max_length=100, blank=True)
    weights = models.JSONField(null=True, blank=True, help_text="CheckpointWeights as JSON")
    source = models.CharField(max_length=300)
    notes = models.JSONField(default=list, blank=True)
    gated = models.BooleanField(default=False)
    remote_code = models.BooleanField(default=False)
    multimodal = models.BooleanField(default=False)
    fetched_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo_id", "sha"], name="metadata_cache_repo_sha")]
        ordering = ["repo_id", "-fetched_at"]
        verbose_name = "model metadata (cached)"
        verbose_name_plural = "model metadata (cached)"

    def __str__(self) -> str:
        return f"{self.repo_id} @ {self.sha[:7] or 'catalog'}"

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.config_text)

    @property
    def quant_config(self) -> dict[str, Any] | None:
        return json.loads(self.quant_config_text) if self.quant_config_text else None


class HubRevision(models.Model):
    """A branch or tag name (``main``, ``v1.0``, ``refs/pr/3``) and the commit sha it pointed to at
    ``resolved_at``."""

    repo_id = models.CharField(max_length=200)
    revision = models.CharField(max_length=200)
    sha = models.CharField(max_length=40)
    resolved_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["repo_id", "revision"], name="hub_revision_repo_rev")]
        ordering = ["repo_id", "revision"]

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.revision} -> {self.sha[:7]}"
