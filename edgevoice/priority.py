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

Background work yields to the turns instead: an engine's steps inside :func:`background`, a thread's own steps
through :func:`wait_idle`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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


_background = threading.local()


@contextmanager
def background(yield_to: Callable[[], bool]) -> Iterator[None]:
    """Work the calling thread does inside this block is ahead-of-time work off the critical path: an engine that
    works in steps (the language model's prefill) takes small ones and stops between two of them once ``yield_to()``
    is true (:func:`should_yield`)."""
    _background.yield_to = yield_to
    try:
        yield
    finally:
        _background.yield_to = None


IDLE_POLL_S = 0.1
"""How often background work waiting for the appliance to be idle looks again (seconds)."""


def wait_idle(idle: Callable[[], bool] | None, stop: threading.Event) -> bool:
    """Wait while ``idle()`` says a turn is in progress (None: never), looking every :data:`IDLE_POLL_S`; False once
    ``stop`` is set. Background work (embedding, compile, presynthesis, model recheck) calls it between its steps."""
    while idle is not None and not idle():
        if stop.wait(IDLE_POLL_S):
            return False
    return not stop.is_set()


def in_background() -> bool:
    """Whether the calling thread is inside :func:`background`."""
    return getattr(_background, "yield_to", None) is not None


def should_yield() -> bool:
    """Whether the calling thread's background work should stop now: the critical path needs the cores."""
    yield_to = getattr(_background, "yield_to", None)
    return yield_to is not None and bool(yield_to())
