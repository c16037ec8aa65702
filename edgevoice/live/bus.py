"""The live loop's event bus: whoever follows the conversation subscribes to the loop's events
(:mod:`edgevoice.live.events`) without reaching into its parts, and without ever slowing them down.

Back-pressure rules (docs/events.md):

1. :meth:`EventBus.publish` never blocks and never runs a subscriber's code on the publishing thread (the listener,
   the answerer, the recognition worker): it appends the event to each subscriber's own bounded queue and returns.
2. A subscriber that falls behind loses the *oldest data* events in its queue, counted in
   :attr:`Subscription.dropped`; control events (:data:`~edgevoice.live.events.CONTROL`) are dropped only when the
   queue holds nothing else. The loop never waits for a subscriber.
3. A subscriber with a handler gets its own thread, which delivers its events in order; a handler that raises is
   logged and keeps its subscription. A subscriber without one reads its queue itself (:meth:`Subscription.get`:
   an event stream to a page, a test).
4. At most ``max_subscribers`` at once; one more is refused (``bus_full``) rather than let memory grow.

``inline`` subscriptions are the loop's own bookkeeping (the errors it counts): called on the publishing thread,
so they must be quick and never block. Nothing outside :mod:`edgevoice.live` subscribes inline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from edgevoice.errors import EdgeVoiceError
from edgevoice.live.events import LoopEvent, is_control
from edgevoice.log_throttle import ThrottledWarning
from edgevoice.thread_names import name_this_thread

log = logging.getLogger(__name__)

QUEUE_EVENTS = 256
"""Events a subscriber may fall behind by before its oldest are dropped: a minute of a busy conversation (about a
partial transcript a second, a few events a clause)."""
MAX_SUBSCRIBERS = 64

Handler = Callable[[LoopEvent], None]


class Subscription:
    """One subscriber's bounded queue of events (and the thread that hands them to its handler, if it has one)."""

    def __init__(self, bus: EventBus, name: str, maxsize: int, handler: Handler | None) -> None:
        self.name, self.maxsize, self.handler = name, maxsize, handler
        self.dropped = 0
        """Events dropped because this subscriber fell behind."""
        self.delivered = 0
        self._bus = bus
        self._events: deque[LoopEvent] = deque()
        self._changed = threading.Condition()
        self._closed = False
        self._busy = False
        self._failures = ThrottledWarning(log, f"event subscriber {name} failed")
        self._thread: threading.Thread | None = None
        if handler is not None:
            self._thread = threading.Thread(target=self._deliver, name=f"edgevoice-bus-{name}", daemon=True)
            self._thread.start()

    def put(self, event: LoopEvent) -> None:
        """(The publishing thread.) Never blocks: a full queue loses its oldest data event instead."""
        with self._changed:
            if self._closed:
                return
            if len(self._events) >= self.maxsize:
                self._drop_one()
            self._events.append(event)
            self._changed.notify_all()

    def _drop_one(self) -> None:
        """(Holding the lock.) The oldest data event goes; the oldest event when all are control events."""
        for i, queued in enumerate(self._events):
            if not is_control(queued):
                del self._events[i]
                break
        else:
            self._events.popleft()
        self.dropped += 1

    def get(self, timeout: float | None = None) -> LoopEvent | None:
        """The next event, waiting up to ``timeout`` seconds for one; None when none came or the subscription closed."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._events or self._closed, timeout):
                return None
            if not self._events:
                return None
            self.delivered += 1
            return self._events.popleft()

    def drain(self) -> list[LoopEvent]:
        """Every event queued now, without waiting."""
        with self._changed:
            events, self._events = list(self._events), deque()
            self.delivered += len(events)
            return events

    def pending(self) -> int:
        with self._changed:
            return len(self._events) + (1 if self._busy else 0)

    def wait_idle(self, timeout: float) -> bool:
        """Until every event queued so far was handed to the handler (for a clean stop, and tests)."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._events and not self._busy, timeout)

    def _deliver(self) -> None:
        name_this_thread(f"ev-bus-{self.name}"[:15])
        assert self.handler is not None
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._events or self._closed)
                if not self._events:
                    return  # closed and delivered
                event = self._events.popleft()
                self._busy = True
            try:
                self.handler(event)
            except Exception as exc:  # a failing subscriber loses this event, not its subscription
                self._failures.warn("event subscriber %s failed on %s: %s", self.name, type(event).__name__, exc)
            finally:
                with self._changed:
                    self._busy = False
                    self.delivered += 1
                    self._changed.notify_all()

    def close(self, timeout: float = 1.0) -> None:
        """Unsubscribe: no more events are queued; those queued are still handed over (within ``timeout``)."""
        self._bus._remove(self)
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventBus:
    """Fans the loop's events out to its subscribers (the rules are in this module's docstring)."""

    def __init__(self, *, max_subscribers: int = MAX_SUBSCRIBERS) -> None:
        self.max_subscribers = max_subscribers
        self._subscriptions: tuple[Subscription, ...] = ()
        self._inline: tuple[Handler, ...] = ()
        self._lock = threading.Lock()
        self._inline_failures = ThrottledWarning(log, "inline event handler failed")

    def publish(self, event: LoopEvent) -> None:
        for handler in self._inline:
            try:
                handler(event)
            except Exception as exc:  # the loop's own bookkeeping must not cost the loop
                self._inline_failures.warn("inline event handler failed: %s", exc)
        for subscription in self._subscriptions:  # a snapshot: subscribing never blocks the publisher
            subscription.put(event)

    def subscribe(
        self, handler: Handler | None = None, *, name: str = "subscriber", maxsize: int = QUEUE_EVENTS
    ) -> Subscription:
        """A new subscription to every event published from now on: with a ``handler``, called on the
        subscription's own thread; without, read with :meth:`Subscription.get`. Raises ``bus_full`` past
        ``max_subscribers``."""
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        with self._lock:
            if len(self._subscriptions) >= self.max_subscribers:
                raise EdgeVoiceError(
                    f"{self.max_subscribers} subscribers follow the loop already; {name!r} was refused", code="bus_full"
                )
            subscription = Subscription(self, name, maxsize, handler)
            self._subscriptions = (*self._subscriptions, subscription)
        return subscription

    def subscribe_inline(self, handler: Handler) -> None:
        """(The loop's own bookkeeping only.) ``handler`` is called on the publishing thread: quick, never blocking."""
        with self._lock:
            self._inline = (*self._inline, handler)

    def _remove(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscriptions = tuple(s for s in self._subscriptions if s is not subscription)

    def wait_delivered(self, timeout: float) -> bool:
        """Until every subscriber with a handler has handled what was published so far (within ``timeout`` seconds
        in all): a caller that saw the loop fall idle then reads what its subscribers recorded."""
        deadline = time.monotonic() + timeout
        return all(
            s.wait_idle(max(0.0, deadline - time.monotonic())) for s in self._subscriptions if s.handler is not None
        )

    @property
    def subscribers(self) -> int:
        return len(self._subscriptions)

    def close(self, timeout: float = 1.0) -> None:
        """End every subscription, each after delivering what it has queued (``timeout`` each)."""
        for subscription in self._subscriptions:
            subscription.close(timeout)
