"""One page following the display's stream: a bounded queue filled by the feed's thread and emptied by the page's
task on the server's event loop.

The feed never waits for a page: :meth:`Client.put` appends under a lock and, at most once until the page's task
wakes, asks the event loop to wake it (:data:`Waker`: ``loop.call_soon_threadsafe``), so a page that never reads
costs at most its queue, and the event loop at most one pending wake-up per page.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable

Waker = Callable[[Callable[[], None]], object]
"""Runs a callable on the page's event loop, from any thread (``loop.call_soon_threadsafe``)."""


class Client:
    """A page's queue of SSE frames (at most ``maxsize``; one more disconnects the page)."""

    def __init__(self, maxsize: int, waker: Waker) -> None:
        self.maxsize = maxsize
        self._waker = waker
        self._frames: deque[str] = deque()
        self._lock = threading.Lock()
        self._ready = asyncio.Event()
        self._wake_pending = False
        self.closed = False
        self.overflowed = False
        """Closed because it fell ``maxsize`` frames behind."""

    def put(self, frame: str) -> bool:
        """(The feed's thread; never blocks.) Queue ``frame``; False when the page is closed, or is now because it
        fell ``maxsize`` frames behind (its frames are dropped: it reconnects and starts from a fresh hello)."""
        with self._lock:
            if self.closed:
                return False
            if len(self._frames) >= self.maxsize:
                self.closed = self.overflowed = True
                self._frames.clear()
            else:
                self._frames.append(frame)
            wake, self._wake_pending = not self._wake_pending, True
            open_ = not self.closed
        if wake:
            self._wake()
        return open_

    def close(self) -> None:
        """(Any thread.) No more frames: the page's task ends its response."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            wake, self._wake_pending = not self._wake_pending, True
        if wake:
            self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # the event loop is closed: nobody is waiting
            self._waker(self._woken)

    def _woken(self) -> None:
        """(The event loop.)"""
        with self._lock:
            self._wake_pending = False
        self._ready.set()

    async def next(self, timeout: float) -> list[str] | None:
        """(The page's task.) The frames queued, waiting up to ``timeout`` seconds for one (``[]``: none came);
        None once closed."""
        if not self._frames and not self.closed:
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return []
        self._ready.clear()
        with self._lock:
            if self.closed:
                return None
            frames = list(self._frames)
            self._frames.clear()
            return frames
