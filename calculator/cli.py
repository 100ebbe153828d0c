"""What the commands (``estimate``, ``check_compat``, ``validate``) share: one argument parser derived from
:class:`~calculator.request.ServingRequest` (:func:`calculator.request.add_request_arguments`), local
``--config`` files, and one error path (an :class:`~calculator.request.InputError` is a
``CommandError`` with exit code 2 naming the flag).
"""
from __future__ import annotations

import argparse
import difflib
import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from calculator.request import InputError, ServingRequest, request_from_options

MAX_CONFIG_BYTES = 4 * 2**20  # a config.json is a few kB; 4 MiB bounds what a path can make us read


def read_json(path: str, field: str) -> dict[str, Any]:
    """A JSON object from a regular file of at most ``MAX_CONFIG_BYTES``.

    Raises:
        InputError: missing, not a regular file (``/dev/zero``), too large, not JSON, not an object.
    """
    p = Path(path)
    try:
        if not p.is_file():
            raise InputError(field, f"no such file: {path}")
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise InputError(field, f"{path} is larger than {MAX_CONFIG_BYTES // 2**20} MiB; not a config.json")
        data = json.loads(p.read_text())
    except InputError:
        raise
    except (OSError, ValueError, RecursionError) as exc:
        raise InputError(field, f"cannot read {path} as JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise InputError(field, f"{path} is not a JSON object")
    return data


def local_model(opts: dict[str, Any]) -> dict[str, Any] | None:
    """``--config PATH`` (with ``--quant-config PATH``, ``--draft-config PATH``) as the pipeline's ``local``
    model, or ``None`` for a Hub model."""
    if not opts.get("config"):
        for name in ("quant_config", "draft_config"):
            if opts.get(name):
                raise InputError(name, f"--{name.replace('_', '-')} goes with --config")
        return None
    return {"config": read_json(opts["config"], "config"), "source": f"config.json file {opts['config']}",
            "quant_config": read_json(opts["quant_config"], "quant_config") if opts.get("quant_config") else None,
            "draft_config": read_json(opts["draft_config"], "draft_config") if opts.get("draft_config") else None}


def request_from_command(opts: dict[str, Any]) -> tuple[ServingRequest, dict[str, Any] | None]:
    """``(request, local model)`` from a command's options; exit code 2 with the flag's name on bad input."""
    try:
        return request_from_options(opts), local_model(opts)
    except InputError as exc:
        raise command_error(exc, opts.get("runtime")) from None


def command_error(exc: InputError, runtime: str | None = None) -> CommandError:
    """The one way a command reports bad input: ``--flag-name: sentence`` (the sentence the page and the API
    show for the same value; a sentence that names other settings in the command line's words where it has them,
    :class:`calculator.request.WordedPerSurface`), exit code 2. The flag is the ``runtime``'s own where it names the
    field otherwise (:func:`calculator.request.runtime_named`: llama.cpp's and Ollama's ``--ctx-size`` for
    ``max_model_len``; :data:`calculator.verdict.FLAG_NAMES`: SGLang's ``--context-length``...)."""
    from calculator.request import runtime_named
    from calculator.verdict import FLAG_NAMES

    head, _, rest = runtime_named(exc, runtime).field.partition(".")
    flag = FLAG_NAMES.get(runtime or "", {}).get(head, "--" + head.replace("_", "-"))
    message = getattr(exc, "cli_message", None) or exc.message
    return CommandError(f"{flag}: {rest + ': ' if rest else ''}{message}", returncode=2)


def one_line_error(parser: argparse.ArgumentParser, message: str) -> str:
    """argparse's error as one line; an unknown flag names the nearest known one (``difflib`` over the parser's
    flags; ``--max_model_len`` is matched as ``--max-model-len``). A short flag written with two dashes (``--tp``
    for ``-tp``) names the flag in both spellings: ``did you mean --tensor-parallel-size (-tp)?``."""
    if not message.startswith("unrecognized arguments: "):
        return message
    words = message.removeprefix("unrecognized arguments: ").split()
    word = next((w for w in words if w.startswith("-")), words[0] if words else "")
    flag = word.split("=", 1)[0]
    if not flag.startswith("-"):
        return f"unexpected value {word[:60]!r} (flags take their value after them: --flag VALUE)"
    known = [o[2:] for o in parser._option_string_actions if o.startswith("--")]
    short = {o[1:].lower(): a for o, a in parser._option_string_actions.items() if not o.startswith("--")}
    key = flag.lstrip("-").replace("_", "-").lower()
    near = [key] if key in known else difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    others = sum(1 for w in words if w.startswith("-")) - 1
    more = f" (and {others} more unrecognized flag{'s' if others > 1 else ''})" if others > 0 else ""
    if key in short and key not in known:  # --tp: the short flag -tp with two dashes
        action = short[key]
        long = next((o for o in action.option_strings if o.startswith("--")), None)
        names = [o for o in action.option_strings if not o.startswith("--")]
        hint = f"did you mean {long} ({', '.join(names)})?" if long else f"did you mean {names[0]}?"
        return f"unrecognized flag {flag[:60]}{more}; {hint}"
    from calculator.request import ollama_equivalent

    ollama = ollama_equivalent(key)
    if ollama and f"--{ollama.replace('_', '-')}" in parser._option_string_actions:  # --num-gpu: Ollama's num_gpu
        return (f"unrecognized flag {flag[:60]}{more}; that is Ollama's name: here it is --{ollama.replace('_', '-')}, "
                "which the Ollama command and Modelfile set for you")
    hint = f"did you mean --{near[0]}?" if near else f"manage.py {parser.prog.split()[-1]} --help lists the flags"
    return f"unrecognized flag {flag[:60]}{more}; {hint}"


class OneLineErrors:
    """A command mix-in: argparse's errors (an unknown flag, a missing value, a bad choice) are one line and exit
    code 2, not the usage dump: on the command line ``<prog>: error: <line>`` on stderr; from ``call_command`` a
    ``CommandError`` with ``returncode`` 2 (Django's CommandParser would raise one with code 1). A flag is matched
    whole, never by its prefix (argparse's ``allow_abbrev`` off): ``--speculative-num-step`` is an unknown flag that
    names ``--speculative-num-steps``, not that flag silently."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.allow_abbrev = False

        def error(message: str):
            line = one_line_error(parser, message)
            if parser.called_from_command_line:
                parser.exit(2, f"{parser.prog}: error: {line}\n")
            raise CommandError(line, returncode=2)

        parser.error = error
        return parser


def internal_error(exc: BaseException) -> CommandError:
    """An unexpected fault as a one-line message with a reference (the traceback goes to the log), exit 1."""
    import logging
    import uuid

    ref = uuid.uuid4().hex[:12]
    logging.getLogger("calculator").error("internal error %s", ref, exc_info=exc)
    return CommandError(f"internal error (reference {ref}): {type(exc).__name__}; please report it", returncode=1)


class Verdict(CommandError):
    """A command's exit status that follows the verdict (1 does not fit / does not start, 3 depends) after the
    answer was printed: not an error, so Django prints it as ``Verdict: <status>: <headline>``."""


def verdict_exit(status: str, headline: str, code: int) -> Verdict:
    return Verdict(f"{status.replace('_', ' ')}: {headline}", returncode=code)
