"""The knowledge file as the admin page edits it: checked before it is written, written atomically, the previous
version kept beside it as ``<name>.bak`` and put back when the kiosk cannot load the new one.

One save at a time (:data:`SAVING`): a save's "previous version" is then the one the kiosk has loaded, so that what
is on disk and what the kiosk answers from agree after every save, whichever of several at once fails. A save made
from what an operator read names that version by its SHA-256 (:func:`content_sha256`) and is refused when the file no
longer has it: of two operators saving edits of the same version, the second is told to reload, and loses nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgevoice.atomic_write import atomic_write
from edgevoice.config.knowledge_path import check_knowledge_path, decode_knowledge
from edgevoice.errors import ConfigError
from edgevoice.kiosk.knowledge import MAX_KNOWLEDGE_BYTES, parse_knowledge
from edgevoice.ownership import TEXT, check_file

SAVING = threading.Lock()
"""Held by :func:`save_and_reload` from reading the previous file until the kiosk has loaded the new one (or the
previous one is back)."""


@dataclass(frozen=True)
class Saved:
    """A knowledge file written and loaded: how many entries it has, the warnings, how long the reload took."""

    entries: int
    warnings: tuple[str, ...]
    reload_ms: float


def content_sha256(data: bytes) -> str:
    """The SHA-256 of a knowledge file's bytes, in hex: the version a save expects to replace."""
    return hashlib.sha256(data).hexdigest()


def read_for_edit(path: Path) -> tuple[str, str]:
    """The knowledge file's text and the :func:`content_sha256` of its bytes, read at once: what an edit
    (:mod:`edgevoice.kiosk.knowledge_edit`) starts from, and the version its save names (``expected_sha256``)."""
    source = f"kiosk.knowledge_file = {str(path)!r}"
    check_knowledge_path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read it ({exc.strerror})") from None
    return decode_knowledge(data, source), content_sha256(data)


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def decode_text(data: bytes, source: str) -> str:
    """``data`` as UTF-8 text, refused as the command line refuses such a file (:func:`decode_knowledge`)."""
    return decode_knowledge(data, source, hint="nothing was written (save it as UTF-8)")


def check_text(text: str, source: str) -> tuple[int, list[str]]:
    """The number of entries in ``text`` and its warnings; :class:`ConfigError` (naming ``source`` and the line) when
    it cannot be read as knowledge."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_KNOWLEDGE_BYTES:
        raise ConfigError(f"{source}: more than {MAX_KNOWLEDGE_BYTES:,} bytes")
    warnings: list[str] = []
    return len(parse_knowledge(text, source=source, warnings=warnings)), warnings


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename (a reader sees the old file or the new, never a part), its
    mode kept."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    atomic_write(path, data, mode=mode, fsync=True)


def save_and_reload(
    path: Path,
    text: str,
    reload: Callable[[], object],
    clock: Callable[[], float],
    *,
    expected_sha256: str | None = None,
) -> Saved:
    """Check ``text``, keep the current file as ``.bak``, write ``text`` and ``reload`` the kiosk from it; one save
    at a time in this process (:data:`SAVING`).

    With ``expected_sha256`` (the :func:`content_sha256` of the file the change was made to), nothing is written
    when the file on disk is no longer that version: a :class:`ConfigError` coded ``knowledge_changed_meanwhile``.

    Nothing is written when ``text`` is invalid; when ``reload`` fails the previous file and its ``.bak`` are put
    back (and the previous file stays the kiosk's). Errors are :class:`ConfigError` naming the file and, for a text
    that does not parse, the line."""
    source = f"kiosk.knowledge_file = {str(path)!r}"
    check_knowledge_path(path)  # never write over a system file, whatever the config names
    text = text.replace("\r\n", "\n")
    count, warnings = check_text(text, source)
    with SAVING:
        try:
            previous = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read it ({exc.strerror})") from None
        if expected_sha256 is not None and content_sha256(previous) != expected_sha256.lower():
            raise ConfigError(
                f"{source}: the file was changed meanwhile (another save, or an edit by hand), so nothing was "
                "written: reload the knowledge and make the change again",
                code="knowledge_changed_meanwhile",
            )
        backup = backup_path(path)
        check_file(f"{source} (its backup)", backup, TEXT)  # a directory or a binary file there is not ours
        try:
            previous_backup: bytes | None = backup.read_bytes()
        except FileNotFoundError:
            previous_backup = None
        except OSError as exc:
            raise ConfigError(f"{source}: cannot read {backup.name} ({exc.strerror})") from None
        try:
            write_atomically(backup, previous)
            write_atomically(path, text.encode("utf-8"))  # replaced in one rename, or not at all
        except OSError as exc:
            with contextlib.suppress(OSError):
                _put_back_backup(backup, previous_backup)
            raise ConfigError(f"{source}: cannot write it ({exc.strerror}); see docs/admin.md") from None
        t0 = clock()
        try:
            reload()
        except BaseException as exc:
            try:  # the kiosk still answers from the previous file: the file must say the same
                write_atomically(path, previous)
                _put_back_backup(backup, previous_backup)
            except OSError as put:
                raise ConfigError(
                    f"{source}: the kiosk could not load the new text and the previous file could not be written "
                    f"back ({put.strerror}): the kiosk answers from the previous version, the file holds the new "
                    f"one, {backup.name} the previous one",
                    code="knowledge_not_restored",
                ) from exc
            raise
        return Saved(count, tuple(warnings), (clock() - t0) * 1000)


def _put_back_backup(backup: Path, previous_backup: bytes | None) -> None:
    """The ``.bak`` as it was before a save that did not happen."""
    if previous_backup is None:
        with contextlib.suppress(FileNotFoundError):
            backup.unlink()
    else:
        write_atomically(backup, previous_backup)
