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


class StageTimer:
    """Records named spans and marks against a :class:`Clock`."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.t0 = clock.now()
        self.times: dict[str, float] = {}

    def now(self) -> float:
        return self._clock.now()

    def record(self, stage: str, seconds: float) -> None:
        self.times[stage] = self.times.get(stage, 0.0) + seconds

    def since(self, stage: str, start: float) -> float:
        elapsed = self._clock.now() - start
        self.record(stage, elapsed)
        return elapsed
