"""Where a knowledge file may be read from: a regular file outside the system's directories.

Every fact may be read out to a visitor, so ``knowledge_file = "/etc/shadow"`` is refused before a byte is read; the
text's own checks (binary, giant entries, words) are :mod:`edgevoice.kiosk.knowledge_guard`'s. The directories are in
``edgevoice/data/kiosk/knowledge_limits.toml``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from edgevoice import data
from edgevoice.errors import ConfigError

__all__ = ["ALLOWED_DIRS", "SYSTEM_DIRS", "check_knowledge_path", "decode_knowledge", "open_knowledge_file"]

_LIMITS = data.table("kiosk/knowledge_limits.toml")
SYSTEM_DIRS: tuple[Path, ...] = tuple(Path(p) for p in _LIMITS["system_dirs"])
"""Directories whose files are the system's: a knowledge file there is refused."""
ALLOWED_DIRS: tuple[Path, ...] = tuple(Path(p) for p in _LIMITS["allowed_dirs"])
"""... unless it lies under one of these (the service's configuration directory)."""


def check_knowledge_path(path: Path) -> None:
    """Refuse a knowledge file under a system directory (:data:`SYSTEM_DIRS`, symlinks followed) that is not under
    an allowed one (:data:`ALLOWED_DIRS`); :class:`ConfigError` coded ``knowledge_system_file``."""
    resolved = Path(os.path.realpath(path))
    if any(resolved.is_relative_to(d) for d in ALLOWED_DIRS):
        return
    system = next((d for d in SYSTEM_DIRS if resolved.is_relative_to(d)), None)
    if system is not None:
        where = "it is" if resolved == Path(os.path.abspath(path)) else f"it leads to {resolved},"
        raise ConfigError(
            f"kiosk.knowledge_file = {str(path)!r}: {where} under {system}, a system directory: no venue's knowledge "
            f"(every fact may be read out to a visitor); keep the knowledge in {ALLOWED_DIRS[0]}/ or a directory of "
            "the venue's own (see docs/knowledge.md)",
            code="knowledge_system_file",
        )


def open_knowledge_file(path: Path) -> BinaryIO:
    """``path`` opened for reading once :func:`check_knowledge_path` allows it and it is a regular file (a FIFO is
    opened without waiting for a writer, then refused): :class:`ConfigError` coded ``knowledge_not_a_file`` names
    what it is instead. ``OSError`` when it cannot be opened."""
    check_knowledge_path(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
            raise ConfigError(
                f"kiosk.knowledge_file = {str(path)!r}: is {kind}, not a regular file of text",
                code="knowledge_not_a_file",
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def decode_knowledge(data: bytes, source: str, *, hint: str = "save it as UTF-8") -> str:
    """``data`` as UTF-8 text; :class:`ConfigError` coded ``knowledge_not_utf8`` naming ``source``, the line and the
    byte offset of the first byte that is not (never a replacement character), and ``hint``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{source}: line {line} is not UTF-8 text (byte {exc.start}: {data[exc.start : exc.end]!r}); {hint}",
            code="knowledge_not_utf8",
        ) from None
