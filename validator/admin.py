from __future__ import annotations

import threading

from django.contrib import admin

from .models import ValidationRun

_listing = threading.local()  # the calibrations that apply, looked up once per changelist page


@admin.register(ValidationRun)
class ValidationRunAdmin(admin.ModelAdmin):
    list_display = ("id", "model_label", "status", "stage", "progress", "created", "finished_at",
                    "worker_host", "created_by", "calibration_state")
    list_filter = ("status", "worker_host")
    search_fields = ("id", "configuration__model_id", "error")
    date_hierarchy = "created"
    readonly_fields = [f.name for f in ValidationRun._meta.fields]
    actions = ["cancel_runs", "drop_calibrations", "restore_calibrations"]

    def changelist_view(self, request, extra_context=None):
        from . import calibration

        _listing.latest = calibration.latest_ids()
        try:
            return super().changelist_view(request, extra_context)
        finally:
            _listing.latest = None

    @admin.display(description="model")
    def model_label(self, obj: ValidationRun) -> str:
        return obj.model_id

    @admin.display(description="calibration")
    def calibration_state(self, obj: ValidationRun) -> str:
        """What the run's calibration measured and whether it applies (validator.calibration.states)."""
        from . import calibration

        c = (obj.measured or {}).get("calibration") or {}
        if "efficiency" not in c or obj.status != ValidationRun.Status.DONE:
            return "—"
        row = calibration.states([obj], getattr(_listing, "latest", None))[0]
        return f"{row['state']} ({row['gpu']}, vLLM {row['scope']}; {row['age']})"

    @admin.action(description="Cancel the selected runs")
    def cancel_runs(self, request, queryset):
        n = sum(run.cancel("cancelled by an administrator") for run in queryset)
        self.message_user(request, f"{n} run(s) cancelled.")

    @admin.action(description="Drop the selected runs' calibrations (estimates stop using them)")
    def drop_calibrations(self, request, queryset):
        from . import calibration

        n = sum(calibration.drop(run, by=f"admin {request.user.get_username()}", reason="dropped in the admin")
                for run in queryset)
        self.message_user(request, f"{n} calibration(s) dropped; every process stops using them within "
                                   f"{calibration.REFRESH_S:.0f} s.")

    @admin.action(description="Restore the selected runs' dropped calibrations")
    def restore_calibrations(self, request, queryset):
        from . import calibration

        n = sum(calibration.restore(run) for run in queryset)
        self.message_user(request, f"{n} calibration(s) restored.")
