"""The live loop's ordering, part by part, on a manual clock: the listener fed frame by frame (the recognition jobs
done between two frames), the answerer handling one event at a time. No threads of the loop's, no sleeps, no
wall-clock bounds: what these tests assert is what was told, published and answered, in which order.

The harness is tests/stepped_loop.py. The real threads are tested in tests/test_loop.py (the threading itself: two
threads, the output device, close)."""

from __future__ import annotations

import pytest

from edgevoice.audio.ring import SharedRing
from edgevoice.listen.endpointing import TurnEndReason
from edgevoice.live.events import (
    BargeIn,
    Fallback,
    FallbackReason,
    Partial,
    ReplyBegun,
    ReplyFinished,
    ReplyStarted,
    Shutdown,
    SpeechStarted,
    TurnCommitted,
    Withdrawn,
)
from tests.stepped_loop import FRAME, RATE, SteppedAnswerer, SteppedListener, mic, silence, speech, spk

__all__ = ["mic", "spk"]  # the fixtures

pytestmark = pytest.mark.unit


def test_a_turn_is_told_once_committed_after_its_pause(mic: SharedRing) -> None:
    ears = SteppedListener(mic)
    ears.hear(silence(0.5), speech(1.0))
    assert ears.reply.told == []  # nothing while the visitor speaks
    ears.hear(silence(0.4))
    (event,) = ears.reply.told
    assert isinstance(event, TurnCommitted) and not event.adopted
    turn = event.turn
    assert (turn.turn_id, turn.reason, turn.speculation_valid) == (1, TurnEndReason.COMPLETE, True)
    # the turn's audio is its place in the microphone stream: the preroll before the speech, up to the commit
    assert turn.audio.end == int(turn.committed_t * RATE) and turn.audio.start < int(0.5 * RATE)
    assert turn.tail is not None and turn.tail.end == turn.audio.end
    published = [type(e) for e in ears.events.drain()]
    assert published == [SpeechStarted, Partial, TurnCommitted]  # a partial transcript after a second of speech
    assert ears.reply.ticks == ears.listener.samples_in // FRAME  # the reply budget's clock, every frame


def test_speech_over_a_reply_is_a_barge_in_after_two_loud_frames(mic: SharedRing) -> None:
    ears = SteppedListener(mic)
    ears.reply.replying, ears.reply.replying_to = True, 7
    ears.hear(silence(0.2), speech(FRAME / RATE))
    assert ears.reply.told == []  # one loud frame may be a knock
    ears.hear(speech(FRAME / RATE))
    assert ears.reply.told == [BargeIn(7)]  # told with the turn whose reply plays


def test_speech_right_after_a_commit_goes_on_with_that_turn(mic: SharedRing) -> None:
    ears = SteppedListener(mic)
    ears.hear(silence(0.3), speech(1.0), silence(0.4))
    (first,) = ears.committed()
    ears.reply.transcripts[1] = "Where is the"
    ears.hear(silence(0.1), speech(0.8))
    assert ears.reply.told[1:] == [Withdrawn(1)]  # at the new speech's onset, before anything else
    ears.hear(silence(0.4))
    second = ears.committed()[1]
    assert second.continues == 1 and second.turn_id == 2
    assert len(second.audio) > len(first.audio) + 0.8 * RATE  # both turns and what came between them
    assert second.audio.end == int(second.committed_t * RATE)
    assert Withdrawn(1) in ears.events.drain()


def test_speech_after_the_reply_was_heard_is_a_turn_of_its_own(mic: SharedRing) -> None:
    ears = SteppedListener(mic)
    ears.hear(silence(0.3), speech(1.0), silence(0.4))
    ears.played = 22050  # the reply plays from here on: a second of it is heard before the visitor speaks
    ears.hear(silence(0.1))
    ears.played = 2 * 22050
    ears.hear(silence(0.6), speech(0.8), silence(0.4))
    assert not any(isinstance(e, Withdrawn) for e in ears.reply.told)
    assert [t.continues for t in ears.committed()] == [None, None]


def test_a_reply_begun_at_the_pause_is_adopted_when_the_turn_ends(mic: SharedRing) -> None:
    ears = SteppedListener(mic, speculative=True)
    ears.hear(silence(0.3), speech(1.0), silence(2 * FRAME / RATE))
    (begun,) = ears.reply.told  # the visitor just fell silent: the reply begins, its audio held
    assert isinstance(begun, ReplyBegun) and not begun.reply.decided
    ears.hear(silence(0.4))
    assert len(ears.reply.told) == 2
    committed = ears.reply.told[1]
    assert isinstance(committed, TurnCommitted) and committed.adopted  # the answerer does not queue it again
    assert begun.reply.wait_decision(0.0) is committed.turn
    assert ears.speculation.counts == {"started": 1, "adopted": 1, "dropped": 0}


def test_a_reply_begun_at_a_pause_is_dropped_when_the_visitor_goes_on(mic: SharedRing) -> None:
    ears = SteppedListener(mic, speculative=True)
    ears.hear(silence(0.3), speech(1.0), silence(0.1))
    (begun,) = ears.reply.told
    assert isinstance(begun, ReplyBegun)
    ears.hear(speech(0.5))  # the visitor goes on before the pause is long enough
    assert begun.reply.decided and begun.reply.wait_decision(0.0) is None  # dropped: nothing of it is heard
    ears.hear(silence(0.4))
    kinds = [type(e) for e in ears.reply.told]
    assert kinds == [ReplyBegun, ReplyBegun, TurnCommitted]  # the second pause's reply answers the whole turn
    last = ears.reply.told[2]
    assert isinstance(last, TurnCommitted) and last.adopted and last.turn_id == 1


def test_a_committed_turn_is_answered_and_published_in_order(spk: SharedRing) -> None:
    side = SteppedAnswerer(spk)
    side.answerer.tell(TurnCommitted(side.turn(1)))
    assert side.answerer.busy and side.published() == []  # queued: nothing happens until its thread takes it
    assert side.answerer.step(timeout=0.0)
    events = side.published()
    assert [type(e) for e in events] == [ReplyStarted, ReplyFinished]
    finished = events[1]
    assert isinstance(finished, ReplyFinished) and finished.trace.reply == "The cafe is upstairs."
    assert [m.content for m in side.responder.history] == ["Where is the cafe?", "The cafe is upstairs."]
    assert side.speaker.written > 0 and not side.answerer.busy


def test_the_shutdown_overtakes_the_turns_waiting_for_their_reply(spk: SharedRing) -> None:
    side = SteppedAnswerer(spk)
    side.answerer.tell(TurnCommitted(side.turn(1)))
    side.answerer.tell(TurnCommitted(side.turn(2)))
    side.answerer.tell(Shutdown())
    assert side.answerer.step(timeout=0.0) is False  # the first thing taken, though told last
    assert side.llm.prompts == [] and side.published() == []


def test_a_turn_withdrawn_before_its_reply_gets_none_and_the_next_is_answered(spk: SharedRing) -> None:
    side = SteppedAnswerer(spk)
    side.answerer.tell(TurnCommitted(side.turn(1)))
    side.answerer.tell(Withdrawn(1))  # the visitor went on before the answerer got to it
    side.answerer.tell(TurnCommitted(side.turn(2)))
    assert side.answerer.step(timeout=0.0) and side.published() == []
    assert side.llm.prompts == [] and side.responder.history == []
    assert side.answerer.step(timeout=0.0)
    assert [e.turn_id for e in side.published() if isinstance(e, ReplyFinished)] == [2]


def test_an_exchange_withdrawn_after_its_reply_leaves_the_conversation(spk: SharedRing) -> None:
    side = SteppedAnswerer(spk)
    side.answerer.tell(TurnCommitted(side.turn(1)))
    side.answerer.step(timeout=0.0)
    earlier = list(side.responder.history)
    side.answerer.tell(TurnCommitted(side.turn(2)))
    side.answerer.step(timeout=0.0)
    assert len(side.responder.history) == 4
    side.answerer.tell(Withdrawn(2))
    assert side.responder.history == earlier  # turn 2's exchange went, turn 1's stays
    side.answerer.tell(Withdrawn(1))  # an older turn: not the last exchange any more, nothing is taken
    assert side.responder.history == earlier


def test_a_turn_with_no_reply_within_its_budget_gets_the_fallback_on_the_listeners_tick(spk: SharedRing) -> None:
    side = SteppedAnswerer(spk, budget_s=0.3)
    side.answerer.tell(TurnCommitted(side.turn(1)))  # the answerer's thread is stuck elsewhere: nobody takes it
    side.clock.advance(0.29)
    side.answerer.tick()
    assert side.published() == []
    side.clock.advance(0.02)
    side.answerer.tick()
    assert side.published() == [Fallback(1, FallbackReason.LATE)]
    assert side.speaker.written == 2205  # the phrase, queued by the tick itself
