"""One warning that may repeat without limit (a flood of bad datagrams), logged as its first occurrence and then a
count per interval, so that nobody outside can fill the journal with it."""

from __future__ import annotations

import logging
import threading

from edgevoice.clock import Clock, MonotonicClock

__all__ = ["INTERVAL_S", "ThrottledWarning"]

INTERVAL_S = 60.0
"""At most one line per this many seconds for one repeated warning (the first, then a count)."""


class ThrottledWarning:
    """A warning logged once per ``interval_s``: the first call logs its message; calls until the interval has passed
    are only counted, and the count is logged with the next message logged or at :meth:`flush`. Thread-safe."""

    def __init__(
        self, logger: logging.Logger, what: str, *, interval_s: float = INTERVAL_S, clock: Clock | None = None
    ) -> None:
        self.logger, self.what, self.interval_s = logger, what, interval_s
        self.clock = clock or MonotonicClock()
        self.total = 0
        """Every call, logged or counted."""
        self._lock = threading.Lock()
        self._logged_at: float | None = None
        self._held = 0

    def warn(self, message: str, *args: object) -> None:
        with self._lock:
            self.total += 1
            now = self.clock.now()
            if self._logged_at is not None and now - self._logged_at < self.interval_s:
                self._held += 1
                return
            self._flush(now)
            self._logged_at = now
        self.logger.warning(message, *args)

    def flush(self) -> None:
        """Log the count of the calls not logged yet (at shutdown)."""
        with self._lock:
            self._flush(self.clock.now())

    def _flush(self, now: float) -> None:
        if self._held and self._logged_at is not None:
            self.logger.warning(
                "%s: %d more in the last %.0f s (one line per %.0f s at most)",
                self.what,
                self._held,
                now - self._logged_at,
                self.interval_s,
            )
        self._held = 0
