from __future__ import annotations

from django.contrib import admin

from .models import ValidationRun


@admin.register(ValidationRun)
class ValidationRunAdmin(admin.ModelAdmin):
    list_display = ("id", "model_label", "status", "stage", "progress", "created", "finished_at",
                    "worker_host", "created_by")
    list_filter = ("status", "worker_host")
    search_fields = ("id", "configuration__model_id", "error")
    date_hierarchy = "created"
    readonly_fields = [f.name for f in ValidationRun._meta.fields]
    actions = ["cancel_runs"]

    @admin.display(description="model")
    def model_label(self, obj: ValidationRun) -> str:
        return obj.model_id

    @admin.action(description="Cancel the selected runs")
    def cancel_runs(self, request, queryset):
        n = sum(run.cancel("cancelled by an administrator") for run in queryset)
        self.message_user(request, f"{n} run(s) cancelled.")
