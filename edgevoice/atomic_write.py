"""Replacing a file in one rename: a reader sees the old file or the new one, never a part of it.

The new content goes to a temporary file beside the target (same directory, so the same file system), which then
replaces the target with :func:`os.replace`; when writing fails, the temporary file is removed and the target is left
as it was. :func:`replacing` is the mechanism for writers that need a path (``soundfile``) or stream (``np.savez``);
:func:`atomic_write` is the common case of bytes or text in hand.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["atomic_write", "fsync_path", "replacing"]


@contextlib.contextmanager
def replacing(
    path: Path, *, mode: int | None = None, fsync: bool = False, prefix: str | None = None, suffix: str = ""
) -> Iterator[Path]:
    """A new, empty temporary file beside ``path`` for the block to write; it replaces ``path`` when the block ends,
    and is removed instead when the block (or the replacing) raises.

    ``mode``: the file's permission bits (default: 0o600, as :func:`tempfile.mkstemp` makes it). ``fsync``: flush the
    content to the disk before the rename, so that a power cut leaves the old file or the whole new one. ``prefix``
    and ``suffix`` name the temporary file (default: ``.NAME.`` and a random part: hidden, and never the target)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}." if prefix is None else prefix, suffix=suffix, dir=path.parent)
    tmp = Path(name)
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        yield tmp
        if fsync:
            fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write(
    path: Path,
    data: bytes | str,
    *,
    mode: int | None = None,
    fsync: bool = False,
    check: Callable[[Path], object] | None = None,
) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) in one rename (:func:`replacing`, which documents
    ``mode`` and ``fsync``). ``check`` is called with the written temporary file before it replaces anything: what
    it raises leaves ``path`` as it was."""
    with replacing(path, mode=mode, fsync=fsync) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
        if check is not None:
            check(tmp)


def fsync_path(path: Path) -> None:
    """Flush a file's content, or a directory's entries (a rename in it), to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
