"""Freed memory handed back to the system between turns.

glibc keeps memory that the process has freed, for the next allocation, and returns it to the system only from the
top of a heap and only past a threshold. The engines free large buffers every turn (the voice's tensors, the
recognizer's mel frames, the reply's audio), so pages that nobody uses stay resident and the process's RSS creeps up
in steps (``docs/decisions.md``, the soak). ``malloc_trim(0)`` walks every arena's free chunks and gives their whole
pages back with ``madvise``; it is called once a turn is over, on the responder's thread, when no turn waits.
"""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Callable
from functools import cache

log = logging.getLogger(__name__)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``; None with another C library (musl has none)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_memory() -> float | None:
    """Give the pages of freed memory back to the system; returns the seconds it took, None where the C library
    cannot (nothing is done then). ctypes releases the GIL for the call; an allocation in another thread waits
    only while the trim holds that thread's arena."""
    trim = _malloc_trim()
    if trim is None:
        return None
    t0 = time.perf_counter()
    trim(0)
    return time.perf_counter() - t0
