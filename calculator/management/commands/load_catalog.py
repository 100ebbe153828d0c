"""``python manage.py load_catalog``: load the offline model catalog into the metadata cache."""
from __future__ import annotations

from django.core.management.base import BaseCommand

from calculator.metadata import load_catalog


class Command(BaseCommand):
    help = (
        "Load the offline model catalog (calculator/data/model_configs, SOURCES.md) into the model metadata "
        "cache, with the parameter counts committed in calculator/data/catalog_weights.json."
    )

    def handle(self, *args, **options):
        count = load_catalog()
        self.stdout.write(f"Loaded {count} offline-catalog models into the metadata cache.")
