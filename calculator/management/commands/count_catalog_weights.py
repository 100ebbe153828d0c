"""``python manage.py count_catalog_weights``: count the offline catalog's parameters on torch's meta device
and write ``calculator/data/catalog_weights.json`` (run after adding a config; needs the worker extra)."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from calculator.metadata.catalog import WEIGHTS_FILE, count_catalog_weights


class Command(BaseCommand):
    help = "Count the offline catalog's parameters on the meta device into calculator/data/catalog_weights.json."

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")

    def handle(self, *args, check: bool = False, **options):
        data = count_catalog_weights()
        text = json.dumps(data, indent=1, sort_keys=True) + "\n"
        if check:
            if not WEIGHTS_FILE.is_file() or WEIGHTS_FILE.read_text() != text:
                self.stderr.write(f"{WEIGHTS_FILE} is out of date: run manage.py count_catalog_weights")
                raise SystemExit(1)
            self.stdout.write("catalog_weights.json is up to date")
            return
        WEIGHTS_FILE.write_text(text)
        counted = sum(1 for m in data["models"].values() if m["weights"])
        self.stdout.write(f"wrote {WEIGHTS_FILE}: {counted} of {len(data['models'])} configs counted")
