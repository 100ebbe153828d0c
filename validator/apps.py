from django.apps import AppConfig


class ValidatorConfig(AppConfig):
    name = "validator"
    default_auto_field = "django.db.models.BigAutoField"
