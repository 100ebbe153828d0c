"""``manage.py calibrations``: list the speed-model calibrations stored with validation runs (what each measured,
its age, whether it applies), and drop or restore them (``validator.calibration``)."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("List the calibrations validation runs stored (run, runtime, GPU, release and kernel path, age, state); "
            "--drop RUN / --drop-all / --restore RUN change which apply.")

    def add_arguments(self, parser):
        parser.add_argument("--drop", metavar="RUN", action="append", default=[],
                            help="a run id or its first characters (as estimates name it): its calibration applies "
                                 "no more (repeatable)")
        parser.add_argument("--drop-all", action="store_true",
                            help="drop every calibration (with --gpu / --release: those only)")
        parser.add_argument("--restore", metavar="RUN", action="append", default=[],
                            help="undo --drop for this run (repeatable)")
        parser.add_argument("--gpu", help="with --drop-all: only calibrations of this GPU row (e.g. CPU, H100)")
        parser.add_argument("--release", help="with --drop-all: only calibrations measured on this runtime release")
        parser.add_argument("--reason", default="", help="why, kept with the dropped calibration")

    def handle(self, *args, drop, drop_all, restore, gpu, release, reason, **o):
        from validator import calibration

        if (gpu or release) and not drop_all:
            raise CommandError("--gpu / --release: only with --drop-all", returncode=2)
        by = "manage.py calibrations"
        runs = calibration.calibrated_runs(limit=5000)
        if gpu:
            from calculator.engine import perf

            try:
                gpu = perf.get_gpu(gpu).name
            except Exception as e:  # noqa: BLE001 - the catalog's own message
                raise CommandError(f"--gpu: {getattr(e, 'message', e)}", returncode=2) from None
        for ref in drop:
            run = _find(runs, ref)
            if calibration.drop(run, by=by, reason=reason):
                self.stdout.write(f"dropped the calibration of run {str(run.pk)[:8]}")
            else:
                self.stdout.write(f"run {str(run.pk)[:8]}: its calibration was dropped already")
        if drop_all:
            n = 0
            for run in runs:
                c = run.measured["calibration"]
                if gpu and c.get("gpu") != gpu:
                    continue
                if release and str(c.get("release") or "").split("+")[0] != release:
                    continue
                n += calibration.drop(run, by=by, reason=reason)
            self.stdout.write(f"dropped {n} calibration(s)")
        for ref in restore:
            run = _find(runs, ref)
            if calibration.restore(run):
                self.stdout.write(f"restored the calibration of run {str(run.pk)[:8]}")
            else:
                self.stdout.write(f"run {str(run.pk)[:8]}: its calibration was not dropped")
        rows = calibration.states(calibration.calibrated_runs(limit=5000))
        if not rows:
            self.stdout.write("no validation run has stored a calibration")
            return
        self.stdout.write(f"{'run':<10}{'runtime':<9}{'GPU':<24}{'age':<14}{'state':<36}measured (release; kernel path)")
        for r in rows:
            self.stdout.write(f"{str(r['run'].pk)[:8]:<10}{r['runtime']:<9}{r['gpu'][:23]:<24}{r['age']:<14}"
                              f"{r['state']:<36}{r['scope']}")


def _find(runs: list, ref: str):
    """The run among ``runs`` whose id starts with ``ref`` (dashes optional); a clear error (exit 2) otherwise."""
    key = ref.strip().lower().replace("-", "")
    if len(key) < 4:
        raise CommandError(f"--drop/--restore: {ref!r}: give at least 4 characters of the run id", returncode=2)
    found = [run for run in runs if str(run.pk).replace("-", "").startswith(key)]
    if not found:
        raise CommandError(f"no validation run with a calibration has an id starting {ref!r} "
                           "(manage.py calibrations lists them)", returncode=2)
    if len(found) > 1:
        raise CommandError(f"{ref!r} names {len(found)} runs ({', '.join(str(r.pk)[:8] for r in found)}): give more "
                           "of the id", returncode=2)
    return found[0]
