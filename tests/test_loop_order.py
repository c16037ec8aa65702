"""The live loop's ordering, part by part, on a manual clock: the listener fed frame by frame (the recognition jobs
done between two frames), the answerer handling one event at a time. No threads of the loop's, no sleeps, no
wall-clock bounds: what these tests assert is what was told, published and answered, in which order.

The harness is tests/stepped_loop.py. The real threads are tested in tests/test_loop.py (the threading itself: two
threads, the output device, close)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from edgevoice.audio.ring import SharedRing
from edgevoice.clock import ManualClock
from edgevoice.events import Transcript
from edgevoice.listen.endpointing import EndpointingConfig, TurnEndReason
from edgevoice.listen.turn import Turn
from edgevoice.live.events import (
    BargeIn,
    ClauseStarted,
    Fallback,
    FallbackReason,
    Partial,
    ReplyBegun,
    ReplyFinished,
    ReplyQueued,
    ReplyStarted,
    Shutdown,
    SpeechStarted,
    StageFailed,
    Transcribed,
    TurnCommitted,
    Withdrawn,
)
from edgevoice.reply.speculation import SpeculativeReply
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth
from tests.stepped_loop import (
    FALLBACK,
    FRAME,
    RATE,
    EnergyVad,
    SteppedAnswerer,
    SteppedListener,
    mic,
    silence,
    speech,
    spk,
)

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
    assert [type(e) for e in events] == [Transcribed, ReplyStarted, ReplyQueued, ClauseStarted, ReplyFinished]
    assert events[3] == ClauseStarted(1, 0, "The cafe is upstairs.")  # played at once by the instant speaker
    finished = events[4]
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


def test_silence_gives_no_turn_and_asks_nothing(mic: SharedRing) -> None:
    ears = SteppedListener(mic)
    ears.hear(silence(2.0))
    assert ears.reply.told == [] and ears.events.drain() == []
    assert ears.smart_turn.calls == 0 and ears.recognizer.heard == []


def voiced(seconds: float, level: float) -> np.ndarray:
    """Speech to the fake VAD at ``level``, which :class:`PartsRecognizer` tells apart."""
    return (level * np.sign(np.sin(np.arange(1, int(seconds * RATE) + 1) / 3.0))).astype(np.float32)


class PartsRecognizer(FakeRecognizer):
    """Hears the first part of a question in audio at level 0.3 and its rest at 0.2."""

    PARTS = ((0.3, "Where is the cafe"), (0.2, "on the first floor?"))

    def __init__(self) -> None:
        super().__init__("", ManualClock(), seconds=0.0)

    def transcribe(self, audio: np.ndarray, *, prompt: str = "") -> Transcript:
        self.heard.append(len(audio))
        levels = np.round(np.abs(audio), 3)
        return Transcript(" ".join(text for level, text in self.PARTS if np.any(levels == level)))


@pytest.mark.parametrize(
    ("rejoin_ms", "heard_s", "rejoined"),
    [(1000, 0.0, True), (0, 0.0, False), (1000, 0.6, False)],
    ids=["goes on", "rejoin off", "after hearing the reply"],
)
def test_speech_over_the_reply_right_after_a_commit_goes_on_with_that_turn_and_the_whole_is_recognized(
    mic: SharedRing, rejoin_ms: int, heard_s: float, rejoined: bool
) -> None:
    recognizer = PartsRecognizer()
    ears = SteppedListener(mic, endpoint=EndpointingConfig(rejoin_ms=rejoin_ms), recognizer=recognizer)
    # half a question and a pause long enough to end the turn
    ears.hear(silence(0.3), voiced(1.0, 0.3), silence(0.4))
    (first,) = ears.committed()
    # the answerer recognizes it and its reply plays, uncut; the visitor hears ``heard_s`` of it, then goes on
    ears.reply.transcripts[1] = ears.finish(first)
    assert ears.reply.transcripts[1] == "Where is the cafe"
    ears.reply.replying, ears.reply.reply_uncut, ears.reply.replying_to = True, True, 1
    ears.played = 1
    ears.hear(silence(heard_s), voiced(1.0, 0.2))
    barge_in = ears.reply.told.index(BargeIn(1))  # the reply is cut at once, as the visitor speaks over it
    ears.reply.replying = ears.reply.reply_uncut = False
    ears.hear(silence(0.4))
    second = ears.committed()[1]
    if rejoined:
        # withdrawn after the barge-in (the reply cut by the visitor, not playing on), before the second commit
        assert barge_in < ears.reply.told.index(Withdrawn(1)) < ears.reply.told.index(TurnCommitted(second))
        assert second.continues == 1 and len(second.audio) / RATE > 2.0  # both parts and the pause between them
        assert ears.finish(second) == "Where is the cafe on the first floor?"
        # only the new part was decoded again: the first part's words were carried
        assert max(recognizer.heard[1:]) / RATE < 1.4
    else:  # a question of its own: the rest alone
        assert Withdrawn(1) not in ears.reply.told and second.continues is None
        assert ears.finish(second) == "on the first floor?"


def test_a_turn_cut_at_max_turn_s_is_committed_once_the_visitor_pauses(mic: SharedRing) -> None:
    ears = SteppedListener(mic, endpoint=EndpointingConfig(max_turn_s=2.0))
    ears.hear(silence(0.3), speech(2.6))
    assert ears.reply.told == [] and ears.listener.in_turn  # cut, and held while the visitor goes on
    ears.hear(silence(0.6))
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.MAX_LENGTH
    # speech from frame 9 (0.288 s), confirmed in frame 12, is cut 2 s after its onset, in frame 71: the turn keeps
    # the preroll (the 10 frames up to the confirmation) and what came until the cut, not the speech that went on
    assert (turn.audio.start, len(turn.audio)) == (3 * 512, (72 - 3) * 512)
    # speech ends in frame 90; six silent frames (192 ms) later, at the end of frame 96, the turn is committed
    assert turn.committed_t == pytest.approx(97 * 512 / RATE)


class VadBrokenAt(EnergyVad):
    """Raises an unexpected error on its ``n``-th frame (and, with ``speech``, on the first frame of speech)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def probability(self, frame: np.ndarray) -> float:
        self.n -= 1
        if self.n == 0:
            raise RuntimeError("vad exploded")
        return super().probability(frame)


class BrokenOnceVad(EnergyVad):
    def __init__(self) -> None:
        self.failed = False

    def probability(self, frame: np.ndarray) -> float:
        if not self.failed and np.abs(frame).max() > 0.05:
            self.failed = True
            raise RuntimeError("vad exploded")
        return super().probability(frame)


@pytest.mark.parametrize(
    ("vad", "committed"), [(BrokenOnceVad, [1]), (lambda: VadBrokenAt(20), [2])], ids=["at its onset", "mid-turn"]
)
def test_an_unexpected_listener_error_does_not_leave_the_kiosk_deaf(
    mic: SharedRing, vad: Callable[[], EnergyVad], committed: list[int]
) -> None:
    """The error costs its frame; one in the middle of a turn drops that turn, and the speech that goes on after
    it is a turn of its own."""
    ears = SteppedListener(mic, vad=vad())
    ears.hear(silence(0.3), speech(1.0), silence(0.4))  # speech in frames 9 to 40
    (failed,) = ears.published(StageFailed)
    assert failed.error.code == "stage_unexpected"
    assert [t.turn_id for t in ears.committed()] == committed


def test_a_listener_error_while_a_cut_turn_waits_still_commits_it(mic: SharedRing) -> None:
    ears = SteppedListener(mic, vad=VadBrokenAt(80), endpoint=EndpointingConfig(max_turn_s=2.0))
    ears.hear(silence(0.3), speech(2.6), silence(0.6))  # cut in frame 71, the error in frame 80, speech until 90
    assert [e.error.code for e in ears.published(StageFailed)] == ["stage_unexpected"]
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.MAX_LENGTH


# -- the answerer: failures and the reply begun early ------------------------------------------------------------------
class FlakyLlm(FakeLlm):
    """Raises an unexpected error on its first reply, then works."""

    def stream_reply(self, messages, *, max_tokens):  # type: ignore[no-untyped-def]
        if not self.prompts:
            self.prompts.append(list(messages))
            raise RuntimeError("engine crashed")
        yield from super().stream_reply(messages, max_tokens=max_tokens)


def test_a_crashing_stage_gets_the_fallback_phrase_and_the_next_turn_works(spk: SharedRing) -> None:
    side = SteppedAnswerer(spk, llm=FlakyLlm("It is upstairs.", ManualClock(), per_token=0.0))
    side.answerer.tell(TurnCommitted(side.turn(1)))
    side.answerer.step(timeout=0.0)
    events = side.published()
    assert [type(e) for e in events] == [Transcribed, StageFailed, Fallback, ClauseStarted, ReplyFinished]
    assert isinstance(events[1], StageFailed) and "engine crashed" in str(events[1].error)
    assert events[2] == Fallback(1, FallbackReason.ERROR)
    assert events[3] == ClauseStarted(1, 0, "Sorry?")  # the phrase heard is captioned too
    side.answerer.tell(TurnCommitted(side.turn(2)))
    side.answerer.step(timeout=0.0)
    traces = [e.trace for e in [*events, *side.published()] if isinstance(e, ReplyFinished)]
    assert [t.reply for t in traces] == ["Sorry?", "It is upstairs."]
    assert [t.fallback for t in traces] == ["error", None] and traces[0].error == "stage_unexpected"
    assert not traces[0].cancelled  # a failure, not a barge-in
    audio = side.speaker.played()
    assert np.sum(np.isclose(audio, -0.2)) == len(FALLBACK)  # the whole phrase, once
    assert np.flatnonzero(np.isclose(audio, -0.2))[-1] < np.flatnonzero(np.isclose(audio, 0.1))[0]  # before turn 2
    # the failed turn left no trace in the conversation
    assert [m.content for m in side.responder.history] == ["Where is the cafe?", "It is upstairs."]


def begun_early(side: SteppedAnswerer, turn: Turn) -> SpeculativeReply:
    """A reply begun for ``turn``'s pause (as the recognition worker begins it), told to the answerer."""
    reply = SpeculativeReply(turn.turn_id, 1, "Where is the cafe?", ReplyTrace(turn.turn_id, committed=0.0))
    side.answerer.tell(ReplyBegun(reply))
    return reply


def test_a_reply_begun_early_and_adopted_is_the_one_heard_generated_once(spk: SharedRing) -> None:
    side = SteppedAnswerer(spk)
    turn = side.turn(1)
    reply = begun_early(side, turn)
    reply.adopt(turn)  # the listener adopts it at the commit: the turn is not queued again
    side.answerer.tell(TurnCommitted(turn, adopted=True))
    assert side.answerer.step(timeout=0.0)
    events = side.published()
    assert [type(e) for e in events] == [Transcribed, ReplyStarted, ReplyQueued, ClauseStarted, ReplyFinished]
    finished = events[4]
    assert isinstance(finished, ReplyFinished)
    trace = finished.trace
    assert trace.speculative_reply and trace.reply == "The cafe is upstairs."
    assert len(side.llm.prompts) == 1 and not side.answerer.busy  # generated once, before the commit
    assert trace.first_token is not None and trace.first_token >= trace.committed  # settled at the commit
    assert [m.content for m in side.responder.history] == ["Where is the cafe?", trace.reply]
    assert np.sum(np.isclose(side.speaker.played(), 0.1)) == sum(c.end_sample - c.start_sample for c in trace.clauses)


class DroppedAfterItsFirstClause(FakeSynth):
    """Drops the reply begun early (as the listener does when the visitor goes on) once its first clause's audio is
    made, and held."""

    def __init__(self) -> None:
        super().__init__(ManualClock())
        self.reply: SpeculativeReply | None = None

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        yield from super().synthesize(text)
        assert self.reply is not None
        self.reply.drop()


def test_a_reply_begun_early_and_dropped_is_never_heard(spk: SharedRing) -> None:
    synth = DroppedAfterItsFirstClause()
    side = SteppedAnswerer(spk, synth=synth)
    synth.reply = begun_early(side, side.turn(1))
    assert side.answerer.step(timeout=0.0)  # waits for the listener's decision, then ends the dropped reply
    assert synth.reply.held is not None and synth.reply.held.position > 0  # audio was made...
    assert side.published() == [] and side.speaker.written == 0  # ... and none of it heard
    assert side.responder.history == [] and not side.answerer.busy


def test_the_json_lines_of_the_loops_events_keep_their_shape() -> None:
    from edgevoice.live.cli import event_record
    from edgevoice.live.events import BargeIn, ReplyStarted

    assert event_record(Partial(2, "where is")) == {"event": "partial", "turn": 2, "text": "where is"}
    assert event_record(Partial(2, "")) == {"event": "partial", "turn": 2}
    assert event_record(ReplyStarted(3)) == {"event": "speaking", "turn": 3}
    assert event_record(BargeIn(3)) == {"event": "barge_in", "turn": 3}
    assert event_record(Fallback(4, FallbackReason.LATE)) == {"event": "fallback", "turn": 4, "text": "late"}
    from edgevoice.live.events import AskedAgain, Listening

    for event in (Transcribed(3, "hi"), ClauseStarted(3, 0, "Hello."), AskedAgain(3), Listening(True)):
        assert event_record(event) is None  # the screen's events: no line of their own in `run --json`
