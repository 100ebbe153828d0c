from django.apps import AppConfig


class ValidatorConfig(AppConfig):
    name = "validator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Calibrations from finished runs feed the speed model in every process (validator.calibration).
        from django.core.signals import request_started

        from . import calibration

        request_started.connect(_apply_calibrations, dispatch_uid="validator-calibration")
        del calibration


def _apply_calibrations(sender, **kwargs) -> None:
    from . import calibration

    calibration.apply_latest()
