"""The loop's event bus and a part's two-lane inbox: a slow or failing subscriber never blocks the publisher, drops
its oldest data first, and the number of subscribers is bounded; control events overtake data in an inbox."""

from __future__ import annotations

import threading

import pytest

from edgevoice.errors import EdgeVoiceError
from edgevoice.live.bus import EventBus
from edgevoice.live.events import BargeIn, LoopEvent, Partial, Shutdown, Withdrawn
from edgevoice.live.mailbox import Mailbox

pytestmark = pytest.mark.unit


def test_every_subscriber_gets_every_event_in_order() -> None:
    bus = EventBus()
    got: list[LoopEvent] = []
    with bus.subscribe(got.append, name="a") as handled, bus.subscribe(name="b") as pulled:
        events = [Partial(1, "where"), Partial(1, "where is"), BargeIn(1)]
        for event in events:
            bus.publish(event)
        assert handled.wait_idle(5)
        assert got == events
        assert pulled.drain() == events


def test_a_stuck_subscriber_never_blocks_the_publisher_and_loses_its_oldest_data_first() -> None:
    bus = EventBus()
    entered, release = threading.Event(), threading.Event()
    seen: list[LoopEvent] = []

    def stuck(event: LoopEvent) -> None:
        entered.set()
        release.wait(10)
        seen.append(event)

    with bus.subscribe(stuck, name="stuck", maxsize=4) as slow, bus.subscribe(name="fast") as fast:
        bus.publish(Partial(1, "first"))
        assert entered.wait(5)  # the handler holds it, and is stuck
        bus.publish(BargeIn(1))
        for i in range(10):  # returns at once although the handler is stuck
            bus.publish(Partial(1, f"p{i}"))
        assert slow.dropped == 7  # of the 11 queued after the first, 4 are kept
        assert len(fast.drain()) == 12  # another subscriber loses nothing
        release.set()
        assert slow.wait_idle(5)
    # the control event stayed although it was older than the data kept
    assert seen == [Partial(1, "first"), BargeIn(1), Partial(1, "p7"), Partial(1, "p8"), Partial(1, "p9")]


def test_a_queue_of_control_events_only_loses_its_oldest() -> None:
    bus = EventBus()
    with bus.subscribe(name="pull", maxsize=2) as sub:
        for turn in (1, 2, 3):
            bus.publish(BargeIn(turn))
        assert sub.drain() == [BargeIn(2), BargeIn(3)] and sub.dropped == 1


def test_a_failing_subscriber_keeps_its_subscription() -> None:
    bus = EventBus()
    got: list[LoopEvent] = []

    def fails_once(event: LoopEvent) -> None:
        if not got:
            got.append(event)
            raise RuntimeError("a bug in a subscriber")
        got.append(event)

    with bus.subscribe(fails_once, name="buggy") as sub:
        bus.publish(Partial(1, "a"))
        bus.publish(Partial(1, "b"))
        assert sub.wait_idle(5)
    assert got == [Partial(1, "a"), Partial(1, "b")]


def test_subscribers_are_bounded_and_a_closed_one_frees_its_place() -> None:
    bus = EventBus(max_subscribers=2)
    first = bus.subscribe(name="one")
    bus.subscribe(name="two")
    with pytest.raises(EdgeVoiceError) as refused:
        bus.subscribe(name="three")
    assert refused.value.code == "bus_full" and "'three'" in refused.value.message
    first.close()
    bus.publish(Partial(1, "x"))
    assert first.drain() == []  # closed: nothing more is queued for it
    bus.subscribe(name="three").close()
    assert bus.subscribers == 1


def test_get_waits_for_an_event_or_returns_none() -> None:
    bus = EventBus()
    sub = bus.subscribe(name="pull")
    assert sub.get(timeout=0.0) is None
    bus.publish(Partial(2, "hi"))
    assert sub.get(timeout=0.0) == Partial(2, "hi")
    sub.close()
    assert sub.get(timeout=None) is None  # closed: never waits


def test_control_events_overtake_data_in_an_inbox_and_nothing_ends_it_with_none() -> None:
    inbox: Mailbox[object] = Mailbox()
    inbox.put(Partial(1, "turn one"))
    inbox.put(Partial(2, "turn two"))
    inbox.put(Withdrawn(1))
    inbox.put(Shutdown())
    assert inbox.unfinished == 4
    order = [inbox.get(timeout=0.0) for _ in range(4)]
    assert order == [Withdrawn(1), Shutdown(), Partial(1, "turn one"), Partial(2, "turn two")]
    assert inbox.get(timeout=0.0) is None  # empty: a timeout, not an item
    for _ in order:
        inbox.task_done()
    assert inbox.unfinished == 0
