"""What ``--json`` means on every ``edgevoice`` command: one JSON document on stdout and nothing else there.

A command's result is one JSON object on one line (``run --json``: one object per line, one per event). Whatever is
for people (tables, progress, warnings) goes to stderr. A command that fails, a usage error included, prints
``{"error": {"code": ..., "message": ...}}`` instead (the code is the stable :class:`~edgevoice.errors.EdgeVoiceError`
code; a configuration's errors add ``key`` and, several at once, ``errors``) and exits with its code's status, as
without ``--json``. The shapes are listed in docs/cli.md.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from edgevoice.errors import EdgeVoiceError

__all__ = ["emit", "emit_error", "human"]


def emit(document: dict[str, Any]) -> None:
    """Print a command's JSON result on stdout (one line)."""
    print(json.dumps(document, default=str), flush=True)


def emit_error(exc: EdgeVoiceError) -> None:
    """The JSON result of a command that failed."""
    emit({"error": exc.as_json()})


def human(text: str, *, json_mode: bool) -> None:
    """Print text for people: on stdout normally, on stderr when stdout carries JSON."""
    print(text, file=sys.stderr if json_mode else sys.stdout, flush=json_mode)
