"""The reply budget (``ReplyOutput``) on a manual clock: the fallback phrase for a turn whose reply is late, also
when the responder could not even begin it (still busy ending a dropped speculative reply stuck in an engine)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest

from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import ManualClock
from edgevoice.reply.output import ReplyOutput
from edgevoice.reply.trace import ReplyTrace

PHRASE = np.full(300, -0.2, np.float32)


@pytest.fixture
def output() -> Iterator[tuple[ReplyOutput, ManualClock, list[tuple[int, str]]]]:
    clock, events = ManualClock(100.0), []
    with SharedRing.create(4000) as ring:
        out = ReplyOutput(
            ring,
            PlaybackControl(ring),
            threading.Event(),
            threading.Event(),
            clock,
            fallback_audio=PHRASE,
            fallback_text="Sorry?",
            budget_s=1.0,
            on_fallback=lambda event: events.append((event.turn_id, event.reason)),
        )
        yield out, clock, events


def test_a_turn_the_responder_cannot_begin_gets_the_phrase_within_the_budget(
    output: tuple[ReplyOutput, ManualClock, list[tuple[int, str]]],
) -> None:
    out, clock, events = output
    out.committed(7, clock.now())
    clock.advance(0.9)
    out.check_budget()
    assert events == [] and out.speaker.available() == 0
    clock.advance(0.2)
    out.check_budget()
    assert events == [(7, "late")] and out.speaker.available() == len(PHRASE)
    assert out.cancel.is_set()  # whatever the busy responder computes is not this turn's reply
    out.check_budget()
    assert out.speaker.available() == len(PHRASE)  # once

    # the responder, free at last, begins the turn: it finds the phrase playing and takes over its marks
    out.cancel.clear()
    trace = ReplyTrace(7, committed=100.0)
    reply = out.begin(7, 100.0, trace)
    assert reply.fallback == "late" and reply.trace is trace
    assert trace.first_sample_queued == pytest.approx(101.1) and trace.stream_start == 0
    assert [(c.text, c.start_sample, c.end_sample) for c in trace.clauses] == [("Sorry?", 0, len(PHRASE))]
    assert out.emit(np.ones(50, np.float32)) == len(PHRASE)  # a late reply's audio cannot follow the phrase
    out.cancel.set()
    out.end()


def test_a_reply_begun_in_time_is_left_alone_and_late_replies_are_checked_from_the_commit(
    output: tuple[ReplyOutput, ManualClock, list[tuple[int, str]]],
) -> None:
    out, clock, events = output
    out.committed(1, clock.now())
    clock.advance(0.5)
    reply = out.begin(1, 100.0, ReplyTrace(1, committed=100.0))
    assert reply.fallback is None
    clock.advance(0.4)
    out.check_budget()
    assert events == []
    clock.advance(0.2)  # 1.1 s after the commit and still no audio
    out.check_budget()
    assert events == [(1, "late")] and reply.fallback == "late"


def test_a_turn_committed_while_a_reply_plays_out_waits_for_it_before_its_budget_runs(
    output: tuple[ReplyOutput, ManualClock, list[tuple[int, str]]],
) -> None:
    out, clock, events = output
    out.committed(1, clock.now())
    out.begin(1, 100.0, ReplyTrace(1, committed=100.0))
    out.emit(np.ones(100, np.float32))
    out.committed(2, clock.now())  # the visitor spoke again (a barge-in) while reply 1 was still in the ring
    clock.advance(3.0)
    out.check_budget()
    assert events == []  # reply 1 speaks
    out.end()
    clock.advance(0.5)
    out.check_budget()
    assert events == []  # turn 2's budget runs from the end of reply 1
    clock.advance(0.6)
    out.check_budget()
    assert events == [(2, "late")]
