"""``python manage.py sync_compat --source PATH [--release X]`` and ``--diff OLD NEW``."""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from compat import diff, extract


class Command(BaseCommand):
    help = ("Extract vLLM's attention-backend compatibility rules from its source (a wheel, an installed "
            "vllm package, or a tree containing vllm/) into compat/data/vllm-<release>.json; or show "
            "the differences between two extracted releases (--diff OLD NEW).")

    def add_arguments(self, parser):
        parser.add_argument("--source", help="vLLM wheel (.whl), installed vllm package dir, or source tree")
        parser.add_argument("--release", help="release name to record (default: read from the source)")
        parser.add_argument("--output", help="write here instead of compat/data/vllm-<release>.json")
        parser.add_argument("--check", action="store_true",
                            help="do not write; exit 1 if the committed data file differs from the source")
        parser.add_argument("--diff", nargs=2, metavar=("OLD", "NEW"), help="compare two extracted releases")
        parser.add_argument("--format", choices=["text", "json"], default="text")

    def handle(self, *args, **opts):
        if opts["diff"]:
            try:
                old, new = (extract.load(r) for r in opts["diff"])
            except FileNotFoundError as e:
                raise CommandError(str(e), returncode=2) from None
            d = diff.diff_releases(old, new)
            self.stdout.write(json.dumps(d, indent=1) if opts["format"] == "json" else diff.format_diff(d))
            return
        if not opts["source"]:
            raise CommandError("give --source PATH (or --diff OLD NEW)", returncode=2)
        try:
            data = extract.extract(opts["source"], opts["release"])
        except extract.SourceError as e:
            raise CommandError(str(e), returncode=2) from None
        text = extract.dump(data)
        path = Path(opts["output"]) if opts["output"] else extract.data_path(data["release"])
        if opts["check"]:
            current = path.read_text() if path.is_file() else ""
            if current != text:
                raise CommandError(f"{path} differs from what the extractor produces for {opts['source']}",
                                   returncode=1)
            self.stdout.write(f"{path} is up to date")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        ok = sum(1 for b in data["backends"] if b.get("declared"))
        self.stdout.write(f"wrote {path}: vLLM {data['release']}, {ok} backends "
                          f"({len(data['backends']) - ok} registry names without a class in this source), "
                          f"platforms {', '.join(data['platforms'])}")
