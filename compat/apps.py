from django.apps import AppConfig


class CompatConfig(AppConfig):
    name = "compat"
    default_auto_field = "django.db.models.BigAutoField"
