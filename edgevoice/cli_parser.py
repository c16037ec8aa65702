"""The argument parser of every ``edgevoice`` command: ``-v`` and ``--json`` anywhere on the line, and a usage error
raised as an :class:`~edgevoice.errors.EdgeVoiceError` (code ``usage``) instead of printed, so that under ``--json``
it is one JSON object like every other failure (:mod:`edgevoice.cli_exit`)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from edgevoice.errors import EdgeVoiceError

__all__ = ["CommandParser", "UsageError", "json_requested"]

VERBOSE_HELP = "log progress to stderr (before or after the command's name)"


class UsageError(EdgeVoiceError):
    """The command line is not one the command takes; ``usage`` is the command's usage line."""

    code = "usage"

    def __init__(self, message: str, *, usage: str) -> None:
        super().__init__(message)
        self.usage = usage


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors raise :class:`UsageError`, and which takes ``-v``/``--verbose`` on every
    command of the tree (the subcommands' parsers are of this class too: ``add_subparsers`` makes them so).

    ``-v`` is stored only where it is given (its default is suppressed), so a command's parser does not reset the
    ``-v`` given before the command's name; read it as ``getattr(args, "verbose", False)``."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, usage=self.format_usage())


def json_requested(argv: Sequence[str]) -> bool:
    """Whether ``--json`` is on the command line, wherever it is (before ``--``, after which everything is an
    operand): what a usage error, found before the line is understood, goes by."""
    for arg in argv:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False
