"""Waiting, with a time limit, for a state the code under test offers no event for: a shared ring's fill level, the
loop being idle, a model's progress, a container's state. Where the code offers an event, a queue or a record to wait
on, tests wait on that instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(probe: Callable[[], T | None], timeout: float, interval: float = 0.005) -> T | None:
    """``probe()`` every ``interval`` s until it returns something true (returned), or None after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(interval, left))
