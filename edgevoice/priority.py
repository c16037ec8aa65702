"""CPU priority of the compute threads (``[audio] compute_nice``, off by default).

Raising the *nice* value of the threads that compute (the responder and the recognition worker) asks the kernel to
run the audio threads first whenever they wake. Linux keeps a nice value per thread and new threads inherit it, so
the engines' own worker threads, started from those threads (llama.cpp's and whisper.cpp's thread pools, ONNX
Runtime run inline), run at the same lower priority. Raising nice needs no privilege.

Why it is off by default: the compute threads also run Python between the engines' calls (the token loop, the
chunker), holding the GIL, and the audio callbacks need the GIL too. A low-priority thread that holds the GIL when
other work takes the processor keeps it, and every audio callback waits behind it: priority inversion, heard as
gaps in a reply when another process keeps the box busy. Raise it only where the audio path does not share the GIL
with the compute threads.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)


def lower_this_thread(nice: int) -> int | None:
    """Raise the calling thread's nice value by ``nice`` (0: leave it); returns the new value, None if the system
    does not support per-thread priorities."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return None
    tid = threading.get_native_id()
    try:
        value = min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice)
        os.setpriority(os.PRIO_PROCESS, tid, value)
    except OSError as exc:  # a sandbox may forbid it: the loop still works, only less promptly under load
        log.warning("cannot lower the priority of thread %s: %s", threading.current_thread().name, exc)
        return None
    return value
