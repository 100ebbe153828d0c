#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "llmcalc.settings")
    from django.core.management import execute_from_command_line
    from django.db.utils import OperationalError, ProgrammingError

    try:
        execute_from_command_line(sys.argv)
    except (OperationalError, ProgrammingError) as exc:
        # a database without its tables (SQLite: "no such table", PostgreSQL: "relation ... does not exist"): say how
        # to set it up instead of a traceback (scripts/start migrates on its own)
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "no such table" not in text and "does not exist" not in text:
            raise
        sys.stderr.write(f"manage.py: the database is not set up ({text}): run `python manage.py migrate` first "
                         "(scripts/start does it)\n")
        sys.exit(2)


if __name__ == "__main__":
    main()
