"""When the kiosk's actions are written and what it says for them: the notification is decided and written to the
outbox as soon as the reply is queued and playing (:class:`ReplyQueued`), not when the turn is finished, once per
turn; the staff call placed for a visitor not understood is said to them, in the configuration's words."""

from __future__ import annotations

import threading

import numpy as np

from edgevoice.audio.ring import SharedRing
from edgevoice.clock import ManualClock
from edgevoice.config import ActionsConfig
from edgevoice.kiosk.knowledge import Entry
from edgevoice.live.actions import ActionTaker
from edgevoice.live.events import (
    ActionTaken,
    LoopEvent,
    ReplyFinished,
    ReplyQueued,
    SpeakRequested,
)
from tests.test_actions import decider, trace
from tests.test_loop import SlowSynth, make_loop, rings, running, silence, speech

__all__ = ["rings"]  # the fixture

ENTRY = Entry("I need help?", "A colleague is on the way.", action="staff_call")


class Outbox:
    def __init__(self) -> None:
        self.queued: list[tuple[str, str, int]] = []

    def queue(self, action: str, reason: str, *, entry: str, turn_id: int) -> str:
        self.queued.append((action, reason, turn_id))
        return f"m{len(self.queued)}"


class _Turn:
    turn_id = 1


def test_an_action_is_written_when_its_reply_is_queued_and_only_once() -> None:
    outbox, published = Outbox(), list[LoopEvent]()
    taker = ActionTaker(decider(), outbox, lambda: [ENTRY], published.append)
    t = trace("direct", ranked=(ENTRY.key,), reply=ENTRY.answer)
    taker(ReplyQueued(t, _Turn()))  # type: ignore[arg-type]
    assert outbox.queued == [("staff_call", "asked", 1)]  # on disk while the confirmation plays
    taker(ReplyFinished(t, _Turn()))  # type: ignore[arg-type]
    assert outbox.queued == [("staff_call", "asked", 1)]  # not twice
    assert published == [ActionTaken("staff_call", "asked", "m1", 1)]


def test_a_turn_finished_without_a_queued_reply_is_still_decided() -> None:
    """A turn whose reply queued no audio (cut before it) counts for the visitor not understood all the same."""
    outbox, published = Outbox(), list[LoopEvent]()
    taker = ActionTaker(decider(), outbox, lambda: [], published.append)
    for turn_id in (1, 2, 3):
        t = trace("gate", at=turn_id)
        t.turn_id = turn_id

        class Turn:
            pass

        Turn.turn_id = turn_id  # type: ignore[attr-defined]
        taker(ReplyFinished(t, Turn()))  # type: ignore[arg-type]
    assert outbox.queued == [("staff_call", "not_understood", 3)]


def test_the_staff_call_for_a_visitor_not_understood_is_said_after_it_is_written() -> None:
    said = ActionsConfig().not_understood_reply
    assert said  # spoken by default: the visitor hears that help comes
    outbox, published = Outbox(), list[LoopEvent]()
    taker = ActionTaker(decider(), outbox, lambda: [], published.append, not_understood_reply=said)
    for at in (0.0, 5.0, 10.0):
        taker(ReplyQueued(trace("unheard", at=at), _Turn()))  # type: ignore[arg-type]
    assert outbox.queued == [("staff_call", "not_understood", 1)]
    taken, request = published
    assert isinstance(taken, ActionTaken) and isinstance(request, SpeakRequested) and request.text == said
    silent = ActionTaker(decider(), Outbox(), lambda: [], (quiet := list[LoopEvent]()).append)
    for at in (0.0, 5.0, 10.0):
        silent(ReplyQueued(trace("gate", at=at), _Turn()))  # type: ignore[arg-type]
    assert [type(e) for e in quiet] == [ActionTaken]  # not_understood_reply = "": nothing said


def test_the_loop_publishes_the_queued_reply_while_it_still_plays(rings: tuple[SharedRing, SharedRing]) -> None:
    """On the loop's real threads: ReplyQueued comes before ReplyFinished, with the reply's audio still waiting in
    the speaker's ring (published on the answerer's thread: the test's inline handler reads the ring then)."""
    mic, spk = rings
    loop, _, _, done = make_loop(mic, spk, "The cafe is upstairs.", SlowSynth(ManualClock()))
    order: list[tuple[str, int]] = []
    seen = threading.Event()

    def on(event: LoopEvent) -> None:
        if isinstance(event, ReplyQueued):
            order.append(("queued", spk.available()))
            seen.set()
        elif isinstance(event, ReplyFinished):
            order.append(("finished", spk.available()))

    loop.bus.subscribe_inline(on)
    with running(loop):
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.6)]))
        assert done.wait(10) and seen.is_set()
    (queued, waiting), (finished, _) = order
    assert (queued, finished) == ("queued", "finished")
    assert waiting > 22050  # more than a second of the reply still to play
