"""A part's inbox of events with two lanes: control events (:data:`~edgevoice.live.events.CONTROL`) overtake the
data waiting in it, so a shutdown is never stuck behind a queued turn. Nothing ends it with ``None``: a part stops
when it takes a :class:`~edgevoice.live.events.Shutdown`."""

from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

from edgevoice.live.events import is_control

T = TypeVar("T")


class Mailbox(Generic[T]):
    """Unbounded (a part's inbox holds what the listener committed: a few turns at most), thread-safe."""

    def __init__(self) -> None:
        self._control: deque[T] = deque()
        self._data: deque[T] = deque()
        self._changed = threading.Condition()
        self._unfinished = 0

    def put(self, item: T) -> None:
        with self._changed:
            (self._control if is_control(item) else self._data).append(item)
            self._unfinished += 1
            self._changed.notify_all()

    def get(self, timeout: float | None = None) -> T | None:
        """The oldest control event, else the oldest data; None when nothing came within ``timeout`` seconds. Each item
        taken is unfinished until :meth:`task_done`."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._control or self._data, timeout):
                return None
            return self._control.popleft() if self._control else self._data.popleft()

    def task_done(self) -> None:
        with self._changed:
            self._unfinished -= 1
            self._changed.notify_all()

    @property
    def unfinished(self) -> int:
        """Items put and not yet done with: queued, or taken and still being handled."""
        return self._unfinished

    def holds(self, kinds: type | tuple[type, ...]) -> bool:
        """Whether a data item of ``kinds`` waits."""
        with self._changed:
            return any(isinstance(item, kinds) for item in self._data)

    def queued(self) -> int:
        with self._changed:
            return len(self._control) + len(self._data)
