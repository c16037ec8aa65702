"""CPU priority of the compute threads, so the audio path keeps the processor when two cores are saturated.

whisper.cpp, llama.cpp and Piper together keep both cores of a small box busy during a reply; the capture callback
and the listener then wait for the processor behind them. Raising the *nice* value of the threads that compute
(the responder and the recognition worker) lets the kernel run the audio threads first whenever they wake. Linux
keeps a nice value per thread and new threads inherit it, so the engines' own worker threads, started from those
threads (llama.cpp's and whisper.cpp's thread pools, ONNX Runtime run inline with one intra-op thread), run at the
same lower priority. Raising nice needs no privilege, so this works for the unprivileged service user.
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
