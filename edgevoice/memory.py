"""Memory handed back between turns: the turn's reference cycles collected, and freed pages given back to the system.

Two things made the process's RSS climb over a long conversation (``docs/decisions/``, the soak):

- **Reference cycles**: llama-cpp-python makes a new ctypes array type for each buffer it allocates (tokenizing
  makes a ``llama_token * n_ctx`` array each time, detokenizing a ``c_char * 32`` one), and a type is always in a
  reference cycle, so they wait for Python's full collection, which comes every few tens of turns: RSS rose about
  1.8 MB a turn and fell back at each. :func:`release_freed_memory` collects after every turn. A full collection of
  the loaded engines' objects takes about 40 ms with the GIL held, so :func:`settle` freezes what start-up made
  (``gc.freeze``) once the engines are warm: the collection after a turn then looks only at what came since, about
  1 ms.
- **Freed pages**: glibc keeps memory the process has freed, for the next allocation, and returns only the top of a
  heap. ``malloc_trim(0)`` gives back every whole free page.
"""

from __future__ import annotations

import ctypes
import gc
import time
from collections.abc import Callable
from functools import cache


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


def settle() -> float:
    """Collect everything unreachable and freeze the rest, so later collections skip it. Call once the engines are
    loaded and warmed up, and again when long-lived objects were replaced (a knowledge reload): what was frozen is
    unfrozen first, so the old ones can go. Returns the seconds it took (a full collection: tens of ms)."""
    t0 = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t0


def resettle() -> float | None:
    """:func:`settle` again, in a process that settled before (a knowledge reload in ``edgevoice run``); None,
    doing nothing, in one that never did."""
    return settle() if gc.get_freeze_count() else None


def release_freed_memory() -> float:
    """Collect the reference cycles made since :func:`settle` and give the pages of freed memory back to the system
    (glibc only; elsewhere the collection alone). Returns the seconds it took. ctypes releases the GIL for the trim;
    an allocation in another thread waits only while the trim holds that thread's arena."""
    t0 = time.perf_counter()
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    return time.perf_counter() - t0
