"""The knowledge file as the admin page edits it: checked before it is written, written atomically, the previous
version kept beside it as ``<name>.bak`` and put back when the kiosk cannot load the new one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from edgevoice.errors import ConfigError
from edgevoice.kiosk.knowledge import MAX_KNOWLEDGE_BYTES, parse_knowledge


@dataclass(frozen=True)
class Saved:
    """A knowledge file written and loaded: how many entries it has, the warnings, how long the reload took."""

    entries: int
    warnings: tuple[str, ...]
    reload_ms: float


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_and_reload(path: Path, text: str, reload: Callable[[], object], clock: Callable[[], float]) -> Saved:
    """Check ``text``, keep the current file as ``.bak``, write ``text`` and ``reload`` the kiosk from it.

    Nothing is written when ``text`` is invalid; when ``reload`` fails the previous file is put back (and stays the
    kiosk's). Errors are :class:`ConfigError` naming the file and, for a text that does not parse, the line."""
    source = f"kiosk.knowledge_file = {str(path)!r}"
    count, warnings = check_text(text.replace("\r\n", "\n"), source)
    try:
        previous = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read it ({exc.strerror})") from None
    try:
        write_atomically(backup_path(path), previous)
        write_atomically(path, text.replace("\r\n", "\n").encode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{source}: cannot write it ({exc.strerror}); see docs/admin.md") from None
    t0 = clock()
    try:
        reload()
    except Exception:
        write_atomically(path, previous)  # the kiosk still answers from the previous file: keep them the same
        raise
    return Saved(count, tuple(warnings), (clock() - t0) * 1000)
