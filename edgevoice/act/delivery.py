"""Delivery of the outbox's rows to where they go (:class:`Sink`: a webhook, an MQTT broker, the journal), by one
background thread (:class:`Delivery`): at least once, with exponential back-off and jitter between tries, a row older
than the configured age marked failed, and a jump of the wall clock (NTP setting a Raspberry Pi's clock after boot)
neither expiring rows nor holding them back."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from edgevoice.act.outbox import Outbox, Row
from edgevoice.thread_names import name_this_thread

__all__ = ["Clocks", "Delivery", "DeliveryFailed", "JournalSink", "Sink", "SystemClocks", "backoff_s"]

log = logging.getLogger(__name__)

JUMP_S = 5.0
"""A change of the wall clock against the monotonic one larger than this is a jump (not drift)."""
FIRST_RETRY_S = 1.0


class DeliveryFailed(Exception):
    """One try failed; ``permanent``: the receiver refused the message (another try would fare no better)."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class Sink(Protocol):
    """Where one kind of notification goes: :meth:`send` returns once the receiver has it, else raises
    :class:`DeliveryFailed`."""

    def send(self, row: Row) -> None: ...

    def close(self) -> None: ...


class Clocks(Protocol):
    """The wall clock (what a message's age is counted in, across restarts) and the monotonic one (to notice the
    first jump)."""

    def wall(self) -> float: ...

    def monotonic(self) -> float: ...


class SystemClocks:
    def wall(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


def backoff_s(attempts: int, retry_max_s: float, rand: Callable[[], float]) -> float:
    """The wait before try ``attempts + 1``: 1 s doubled each failed try up to ``retry_max_s``, of which a random
    half or more ("equal jitter"), so that kiosks that lost the same receiver do not all come back at once."""
    ceiling = min(retry_max_s, FIRST_RETRY_S * 2.0 ** min(attempts, 30))
    return ceiling / 2 + rand() * ceiling / 2


class Delivery:
    """Delivers the outbox's rows to ``sinks`` (by name) on its own thread (:meth:`start`), or one pass at a time
    (:meth:`run_once`, the tests). :meth:`wake` after a row is added; :meth:`close` stops it within ``timeout``."""

    def __init__(
        self,
        outbox: Outbox,
        sinks: Mapping[str, Sink],
        *,
        max_age_s: float,
        retry_max_s: float,
        clocks: Clocks | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.outbox, self.sinks = outbox, dict(sinks)
        self.max_age_s, self.retry_max_s = max_age_s, retry_max_s
        self.clocks = clocks or SystemClocks()
        self.rand = rand
        self._offset = self.clocks.wall() - self.clocks.monotonic()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="edgevoice-outbox", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def run_once(self) -> int:
        """One pass: a clock jump made good, old rows expired, every row due tried once; how many were delivered."""
        offset = self.clocks.wall() - self.clocks.monotonic()
        if abs(offset - self._offset) > JUMP_S:
            log.warning(
                "outbox: the wall clock jumped by %+.0f s; waiting notifications keep their age", offset - self._offset
            )
            self.outbox.shift(offset - self._offset)
        self._offset = offset
        now = self.clocks.wall()
        expired = self.outbox.expire(now, self.max_age_s)
        if expired:
            log.warning("outbox: %d notification(s) not delivered in %.0f s marked failed", expired, self.max_age_s)
        delivered = 0
        for row in self.outbox.due(now):
            if self._stop.is_set():
                break
            sink = self.sinks.get(row.sink)
            if sink is None:
                self.outbox.fail(row, f"no {row.sink} configured now")
                continue
            try:
                sink.send(row)
            except DeliveryFailed as exc:
                if exc.permanent:
                    log.warning("outbox: %s refused notification %s: %s", row.sink, row.id, exc)
                    self.outbox.fail(row, str(exc))
                else:
                    wait = backoff_s(row.attempts, self.retry_max_s, self.rand)
                    log.info(
                        "outbox: %s try %d of %s failed (%s); again in %.0f s",
                        row.sink,
                        row.attempts + 1,
                        row.id,
                        exc,
                        wait,
                    )
                    self.outbox.retry(row, self.clocks.wall() + wait, str(exc))
            else:
                self.outbox.delivered(row)
                delivered += 1
        return delivered

    def _run(self) -> None:
        name_this_thread("ev-outbox")
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as exc:  # a broken disk or sink costs this pass, not the service
                log.error("outbox: delivery pass failed: %s", exc)
            due = self.outbox.next_due() if not self._stop.is_set() else None
            wait = 60.0 if due is None else min(60.0, max(0.05, due - self.clocks.wall()))
            self._wake.wait(wait)
            self._wake.clear()

    def close(self, timeout: float = 2.0) -> None:
        """Stop delivering (what waits stays in the outbox for the next run) and close the sinks."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for sink in self.sinks.values():
            sink.close()


class JournalSink:
    """The journal: one log line for each notification, its action, reason and id (never the visitor's words)."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log

    def send(self, row: Row) -> None:
        self.log(f"action {row.action}: notification {row.id}")

    def close(self) -> None:
        pass
