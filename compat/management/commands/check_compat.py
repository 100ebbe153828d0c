"""``python manage.py check_compat --config config.json --gpu H100 [--attention-backend NAME|auto]``."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from calculator.cli import OneLineErrors, command_error, request_from_command, verdict_exit
from calculator.plan import load
from calculator.request import InputError, add_request_arguments
from calculator.runtimes import get_runtime
from calculator.runtimes.base import CompatSummary
from calculator.verdict import EXIT_STATUS


#: A compat report's ``ok`` in words, and as a verdict status.
OK_WORDS = {True: "works", False: "does not start", None: "depends"}
OK_STATUS = {True: "works", False: "does_not_start", None: "depends"}
#: A requested backend the calculator does not model (``CompatReport.not_modelled``: a member whose class the extractor
#: cannot read, or another platform's backend whose rules accept the configuration): said as the page says it, "not
#: modelled", never "depends" on conditions it does not list. Its exit status is 3, as for ``depends``: the verdict of
#: ``estimate`` and the API for the same configuration is ``depends`` with this sentence as its condition, and 3 is the
#: status that means "the calculator cannot say it works"; 1 would claim a start-up failure vLLM may not raise.
NOT_MODELLED_WORDS = "not modelled here"
NOT_MODELLED_STATUS = "not_modelled"
NOT_MODELLED_EXIT = EXIT_STATUS["depends"]


class Command(OneLineErrors, BaseCommand):
    help = ("Will this attention backend / GPU / dtype / KV-cache dtype / vLLM release work? Prints a verdict "
            "for every backend of the GPU's platform and the one vLLM picks on auto (rules read from the "
            "release's own source by sync_compat).")

    def add_arguments(self, parser):
        add_request_arguments(parser)
        parser.add_argument("--format", choices=["table", "json"], default="table")

    def handle(self, *args, **opts):
        """The request is parsed as ``estimate`` parses it; the dtype is the one the memory engine resolves
        (when the engine can size the model; else the compat rules resolve ``auto`` themselves). Exit status:
        0 works, 1 does not start, 3 depends or a requested backend not modelled (``Verdict: not modelled: ...``),
        2 bad input (also with ``--format json``, whose report has ``ok`` and ``not_modelled``)."""
        request, local = request_from_command(opts)
        runtime = get_runtime(request.runtime)
        try:
            model = getattr(runtime, "load_model", load)(request, local)  # as make_plan loads (GGUF-only repos)
            try:
                memory = runtime.memory(request, model)
            except InputError:
                memory = None
            report = runtime.compat(request, model, memory)
        except InputError as exc:
            raise command_error(exc) from None
        if isinstance(report, CompatSummary):  # SGLang, llama.cpp, Ollama: the runtime's own start-up answer
            return self._summary(report, runtime.label, opts["format"])
        if opts["format"] == "json":
            self.stdout.write(json.dumps(report.to_json(), indent=1))
            return self._exit(report, "see the answer above")
        w = self.stdout.write
        w(f"vLLM {report.release} on {report.gpu} (platform {report.platform}, compute capability "
          f"{report.compute_capability or '-'}), dtype {report.dtype}, kv_cache_dtype {report.kv_cache_dtype}, "
          f"block_size {report.block_size or 'auto'}")
        f = report.features
        w(f"model: head_size {f.head_size}, MLA {f.use_mla}, sparse {f.use_sparse}, sinks {f.has_sink}, "
          f"sliding window {f.has_sliding_window}, mm_prefix {f.use_mm_prefix}")
        w("")
        w(f"{'prio':>4}  {'backend':<28} {'verdict':<8} reasons / fixes")
        for b in report.backends:
            verdict = {True: "ok", False: "NO", None: "depends"}[b.ok]
            prio = "-" if b.priority is None else str(b.priority)
            detail = "; ".join(b.reasons) if b.reasons else ""
            w(f"{prio:>4}  {b.name:<28} {verdict:<8} {detail}")
            for fix in b.fixes:
                w(f"{'':>4}  {'':<28} {'':<8} fix: {fix}")
            for c in b.conditions:
                when = " and ".join(f"{k}={v}" for k, v in c.when)
                w(f"{'':>4}  {'':<28} {'':<8} if {when}: {'ok' if not c.reasons else '; '.join(c.reasons)}")
        w("")
        if report.model_forced_backend:
            auto = (f"auto: {report.auto_selected or 'none'}  (set by the model's own rule, before the priority "
                    "order)")
        else:
            auto = f"auto: {report.auto_selected or 'none'}  (order from {report.auto_source})"
        why = [f"  FlashAttention for head size {hs}: "
               + (f"FA{v}" if v else "not evaluated from the release's source")
               for hs, v in report.flash_attn_versions.items()]
        why += [f"  rule: {src}" for src in report.sources] + [f"  note: {n}" for n in report.notes]
        self._verdict_lines(report, "vLLM", auto, why, reasons=[])
        for s in report.speculative:
            w(f"speculative: {'ok' if s.ok else 'NO'}: {s.reason}" + (f" (fix: {s.fix})" if s.fix else "")
              + (f" [{s.source}]" if s.source else ""))
        for a in report.assumptions:
            w(f"assumed: {a}")
        return self._exit(report)

    def _summary(self, report: CompatSummary, label: str, fmt: str) -> None:
        """A runtime without vLLM's per-backend table: its release, the backend it picks and the one asked for, the
        verdict and the reasons (the same answer ``estimate`` shows for it)."""
        # the exit line stands alone: "depends: works if <the conditions>" (as estimate's verdict says it), never a
        # pointer to lines that may not be there (--format json prints none of them to stderr)
        pointer = ("works if " + "; and ".join(report.auto_conditions) if report.auto_conditions else
                   "; ".join(report.reasons) or f"{label} {report.release} on {report.gpu}")
        if fmt == "json":
            self.stdout.write(json.dumps(report.model_dump(), indent=1))
            return self._exit(report, pointer)
        self.stdout.write(f"{label} {report.release} on {report.gpu}")
        auto = f"auto: {report.auto_selected}" if report.auto_selected else None
        if report.requested_backend:  # the reasons are the requested backend's
            self._verdict_lines(report, label, auto, [], report.reasons)
        else:  # the reasons are why the runtime picks what it picks
            self._verdict_lines(report, label, auto, [f"  {r}" for r in report.reasons], [])
        return self._exit(report, pointer)

    def _verdict_lines(self, report, label: str, auto: str | None, why: list[str], reasons: list[str]) -> None:
        """How every runtime's answer ends (vLLM after its table, the others after their first line), each text
        once, in this order: ``auto`` (the backend the runtime picks on its own) and ``why`` (its explanation
        lines), the conditions of that answer (``note:``), the requested backend's verdict with its ``reasons``,
        and the startup error unless those reasons already say it (SGLang's error is its reasons joined)."""
        said: set[str] = set()

        def say(line: str) -> None:
            if line.strip() not in said:
                said.add(line.strip())
                self.stdout.write(line)

        for line in ([auto] if auto else []) + why:
            say(line)
        shown = {w.strip() for w in why}
        for c in report.auto_conditions:
            # (a not-modelled sentence is the verdict's own headline, said once there)
            # SGLang's 'depends' reasons are also its conditions: said once, as reasons (or as the pick's explanation)
            if c not in reasons and c.strip() not in shown and c != getattr(report, "not_modelled", None):
                say(f"  note: {c}")
        if report.requested_backend:
            words = NOT_MODELLED_WORDS if getattr(report, "not_modelled", None) else OK_WORDS[report.ok]
            say(f"requested: {report.requested_backend} -> {words}")
        for r in reasons:
            say(f"  {r}")
        if report.error and report.error not in reasons and report.error != "; ".join(reasons):
            say(f"{label} would fail at startup: {report.error}")

    def _exit(self, report, pointer: str = "see the table above") -> None:
        """Exit status 1 (does not start) or 3 (depends) with the startup error as headline, else ``pointer``; a
        requested backend the calculator does not model exits 3 as ``Verdict: not modelled: <why>``."""
        if getattr(report, "not_modelled", None):
            raise verdict_exit(NOT_MODELLED_STATUS, report.not_modelled, NOT_MODELLED_EXIT)
        status = OK_STATUS[report.ok]
        if EXIT_STATUS[status]:
            raise verdict_exit(status, report.error or pointer, EXIT_STATUS[status])
