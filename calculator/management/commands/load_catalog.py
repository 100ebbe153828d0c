"""``python manage.py load_catalog``: load the offline model catalog into the metadata cache."""
from __future__ import annotations

from django.core.management.base import BaseCommand

from calculator.metadata import load_catalog


class Command(BaseCommand):
    help = (
        "Load the offline model catalog (calculator/data/model_configs, SOURCES.md) into the model metadata "
        "cache, counting each model's parameters on torch's meta device unless --no-count-params."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-count-params",
            action="store_true",
            help="skip the meta-device parameter count (no transformers import; the engine counts instead)",
        )

    def handle(self, *args, no_count_params: bool = False, **options):
        count = load_catalog(count_params=not no_count_params)
        self.stdout.write(f"Loaded {count} offline-catalog models into the metadata cache.")
