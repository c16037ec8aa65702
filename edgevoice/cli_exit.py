"""How an ``edgevoice`` command ends: its exit status and last words, the same for every command.

An :class:`~edgevoice.errors.EdgeVoiceError` (a usage error included) ends the command with the exit status of its
code (:data:`~edgevoice.errors.ERROR_CODES`), ``edgevoice: error: [CODE] message`` on stderr and, under ``--json``,
``{"error": {...}}`` on stdout. A stdout that its reader closed (``| head -1``) ends it quietly with
:data:`~edgevoice.errors.EXIT_BROKEN_PIPE`, what a shell reports for a command SIGPIPE ended; Ctrl-C with
:data:`~edgevoice.errors.EXIT_INTERRUPTED`. The statuses are listed in docs/cli.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from edgevoice.cli_json import emit_error
from edgevoice.cli_parser import UsageError, json_requested
from edgevoice.errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EdgeVoiceError

__all__ = ["report_error", "run_command", "stdout_closed"]


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's arguments), run the command's ``handler`` and return its exit
    status; every way it can end is handled here."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            args = parser.parse_args(argv)
        except UsageError as exc:
            print(exc.usage, end="", file=sys.stderr)
            report_error(exc, json_mode=json_requested(argv))
            return exc.exit_status
        if getattr(args, "json_before_command", False):
            args.json = True  # `edgevoice --json COMMAND` as `edgevoice COMMAND --json`
        json_mode = bool(getattr(args, "json", False))
        logging.basicConfig(
            level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        try:
            status = int(args.handler(args))
        except EdgeVoiceError as exc:
            report_error(exc, json_mode=json_mode)
            return exc.exit_status
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        sys.stdout.flush()  # a reader gone is found here, not in the interpreter's last flush
        return status
    except BrokenPipeError:
        return stdout_closed()


def report_error(exc: EdgeVoiceError, *, json_mode: bool) -> None:
    """An error's last words: the JSON error object on stdout under ``--json``, the line for people on stderr."""
    if json_mode:
        emit_error(exc)
    print(f"edgevoice: error: {exc}", file=sys.stderr)


def stdout_closed() -> int:
    """Stdout's reader is gone: point stdout at /dev/null, so that nothing written later (the interpreter's last
    flush included) fails again, and return the status for it (the Python documentation's recipe for SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_BROKEN_PIPE
