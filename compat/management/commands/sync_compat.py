"""``python manage.py sync_compat --release X`` (pip fetches vLLM X's wheel), ``--source PATH [--release X]``,
``--check`` and ``--diff OLD NEW``. See compat/README.md, "Adding the next vLLM release"."""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from compat import diff, extract, fetch


class Command(BaseCommand):
    help = ("Extract vLLM's attention-backend compatibility rules from its source into "
            "compat/data/vllm-<release>.json: --release X alone downloads the vllm==X wheel with pip "
            "(--no-deps) and reads it; --source reads a wheel, an installed vllm package or a tree "
            "containing vllm/. --check compares with the committed file; --diff OLD NEW shows the "
            "differences between two extracted releases.")

    def add_arguments(self, parser):
        parser.add_argument("--source", help="vLLM wheel (.whl), installed vllm package dir, or source tree")
        parser.add_argument("--release", help="without --source: the vLLM release to download with pip and "
                            "extract (e.g. 0.33.0); with --source: the release name to record "
                            "(default: read from the source)")
        parser.add_argument("--wheel-dir", help="where pip puts (and this command reuses) wheels "
                            "(default $LLMCALC_WHEEL_DIR or ~/.cache/llmcalc/wheels)")
        parser.add_argument("--package", choices=fetch.PACKAGES, default="vllm",
                            help="PyPI package to download with --release (default vllm, the CUDA wheel; transformers: "
                            "the model classes and types of the transformers release a vLLM wheel pins, "
                            "compat/data/transformers-<release>.json)")
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
        source, release = opts["source"], opts["release"]
        if not source and not release:
            raise CommandError("give --release X (downloads vllm==X with pip), --source PATH, or --diff OLD NEW",
                               returncode=2)
        if not source:
            try:
                source = fetch.fetch_wheel(release, Path(opts["wheel_dir"]) if opts["wheel_dir"] else None,
                                           opts["package"])
            except ValueError as e:
                raise CommandError(f"--release: {e}", returncode=2) from None
            except fetch.FetchError as e:
                raise CommandError(str(e), returncode=2) from None
            self.stderr.write(f"using {source}")
        is_transformers = opts["package"] == "transformers" or Path(source).name.startswith("transformers-")
        try:
            data = extract.extract_transformers(source) if is_transformers else extract.extract(source, release)
        except extract.SourceError as e:
            raise CommandError(str(e), returncode=2) from None
        text = extract.dump(data)
        path = Path(opts["output"]) if opts["output"] else extract.data_path(data["release"], data["runtime"])
        if opts["check"]:
            current = path.read_text() if path.is_file() else ""
            if current != text:
                raise CommandError(f"{path} differs from what the extractor produces for {source}",
                                   returncode=1)
            self.stdout.write(f"{path} is up to date")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if is_transformers:
            self.stdout.write(f"wrote {path}: transformers {data['release']}, {len(data['model_types'])} model types, "
                              f"{len(data['classes'])} model classes")
            return
        ok = sum(1 for b in data["backends"] if b.get("declared"))
        self.stdout.write(f"wrote {path}: vLLM {data['release']}, {ok} backends "
                          f"({len(data['backends']) - ok} registry names without a class in this source), "
                          f"platforms {', '.join(data['platforms'])}")
