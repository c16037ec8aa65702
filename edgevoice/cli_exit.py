"""How an ``edgevoice`` command ends: its exit status and last words, the same for every command.

An :class:`~edgevoice.errors.EdgeVoiceError` ends the command with the exit status of its code
(:data:`~edgevoice.errors.ERROR_CODES`), ``edgevoice: error: [CODE] message`` on stderr and, under ``--json``,
``{"error": {...}}`` on stdout; Ctrl-C with :data:`~edgevoice.errors.EXIT_INTERRUPTED`. The statuses are listed in
docs/cli.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from edgevoice.cli_json import emit_error
from edgevoice.errors import EXIT_INTERRUPTED, EdgeVoiceError

__all__ = ["report_error", "run_command"]


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's arguments), run the command's ``handler`` and return its exit
    status; every way it can end is handled here."""
    args = parser.parse_args(argv)
    json_mode = bool(getattr(args, "json", False))
    logging.basicConfig(
        level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.handler(args))
    except EdgeVoiceError as exc:
        report_error(exc, json_mode=json_mode)
        return exc.exit_status
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def report_error(exc: EdgeVoiceError, *, json_mode: bool) -> None:
    """An error's last words: the JSON error object on stdout under ``--json``, the line for people on stderr."""
    if json_mode:
        emit_error(exc)
    print(f"edgevoice: error: {exc}", file=sys.stderr)
