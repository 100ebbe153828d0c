from __future__ import annotations

from django.contrib import admin

from calculator.models import HubRevision, ModelMetadataCache


@admin.register(ModelMetadataCache)
class ModelMetadataCacheAdmin(admin.ModelAdmin):
    list_display = ("repo_id", "sha", "origin", "revision", "source", "fetched_at")
    list_filter = ("origin", "gated", "remote_code", "multimodal")
    search_fields = ("repo_id", "sha", "source")
    readonly_fields = ("fetched_at",)


@admin.register(HubRevision)
class HubRevisionAdmin(admin.ModelAdmin):
    list_display = ("repo_id", "revision", "sha", "resolved_at")
    search_fields = ("repo_id", "revision", "sha")
