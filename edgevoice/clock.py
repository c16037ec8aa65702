"""Time as the stages see it: passed in, never read from the wall inside stage logic."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale."""


class MonotonicClock:
    def now(self) -> float:
        return time.perf_counter()


class ManualClock:
    """A clock that only moves when told to: for tests and simulated runs."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds
