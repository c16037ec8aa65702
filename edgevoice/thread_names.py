"""Kernel names for the appliance's own threads, so that ``top -H``, ``/proc/<pid>/task`` and ``edgevoice bench
--idle`` tell them apart: Python before 3.14 leaves every thread it starts named after the process."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from typing import Any

_PR_SET_NAME = 15
NAME_BYTES = 15
"""The kernel keeps 15 bytes of a thread's name (16 with the terminating zero); longer names are cut."""


@functools.cache
def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def name_this_thread(name: str) -> bool:
    """Give the calling thread the kernel name ``name`` (cut to :data:`NAME_BYTES`); False where the system has no
    per-thread names. Cheap and lock-free: may be called from an audio callback."""
    prctl = _prctl()
    if prctl is None:
        return False
    return bool(prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:NAME_BYTES]), 0, 0, 0) == 0)
