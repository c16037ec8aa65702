"""The operating system's side of the shared rings (:mod:`edgevoice.audio.ring`): a POSIX shared-memory block
attached without Python's resource tracker, and the 8-byte atomic loads and stores a CPU that reorders memory needs
(``libatomic``)."""

from __future__ import annotations

import ctypes
import mmap
import os
import platform
from typing import Any

from edgevoice.errors import EdgeVoiceError

__all__ = ["UntrackedBlock", "libatomic"]


def libatomic() -> tuple[Any, Any]:
    """``__atomic_load_8`` and ``__atomic_store_8``, called with the GIL held (PyDLL)."""
    try:
        lib = ctypes.PyDLL("libatomic.so.1")
    except OSError as exc:
        raise EdgeVoiceError(
            f"this CPU ({platform.machine()}) reorders memory and libatomic.so.1 is missing: install libatomic1",
            code="ring_no_atomics",
        ) from exc
    load, store = getattr(lib, "__atomic_load_8"), getattr(lib, "__atomic_store_8")
    load.argtypes, load.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_uint64
    store.argtypes, store.restype = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int], None
    return load, store


class UntrackedBlock:
    """An attached POSIX shared-memory block the resource tracker never hears of (``track=False`` in 3.13)."""

    def __init__(self, name: str) -> None:
        import _posixshmem  # what SharedMemory itself uses on POSIX

        self.name = name
        try:
            fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
        except FileNotFoundError as exc:
            raise EdgeVoiceError(f"no shared memory named {name!r}", code="ring_missing") from exc
        try:
            self._mmap = mmap.mmap(fd, os.fstat(fd).st_size)
        finally:
            os.close(fd)
        self.buf = memoryview(self._mmap)

    def close(self) -> None:
        self.buf.release()
        self._mmap.close()
