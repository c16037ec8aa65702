"""Captions follow the playback: :class:`ClauseStarted` is published when a clause's first sample is played, never
when it is synthesized or queued (a stepped playback position, no threads)."""

from __future__ import annotations

import math

import pytest

from edgevoice.live.captions import DRAIN_S, ClauseCues
from edgevoice.live.events import ClauseStarted, LoopEvent
from edgevoice.reply.trace import ReplyTrace, SpokenClause

pytestmark = pytest.mark.unit


class Stepped:
    """The output callback's count of samples played, moved by the test."""

    def __init__(self) -> None:
        self.played = 0


def following(start: int = 1000) -> tuple[ClauseCues, Stepped, list[LoopEvent], ReplyTrace]:
    playback, published = Stepped(), []
    cues = ClauseCues(lambda: playback.played, published.append)
    trace = ReplyTrace(7, committed=0.0)
    trace.stream_start = start
    cues.follow(7, trace)
    return cues, playback, published, trace


def test_each_clause_is_announced_once_its_first_sample_is_played() -> None:
    cues, playback, published, trace = following(start=1000)
    trace.clauses.append(SpokenClause("The cafe is upstairs.", 0, 500))
    trace.clauses.append(SpokenClause("It opens at ten.", 500, 900))
    cues.audible(7)
    playback.played = 1000  # the reply's sample 0 not played yet
    assert cues.poll() == 0 and published == []
    playback.played = 1001
    assert cues.poll() == 1 and published == [ClauseStarted(7, 0, "The cafe is upstairs.")]
    playback.played = 1500  # the second clause's first sample is the 1501st
    assert cues.poll() == 0
    playback.played = 1501
    assert cues.poll() == 1 and published[-1] == ClauseStarted(7, 1, "It opens at ten.")
    playback.played = 5000
    assert cues.poll() == 0 and len(published) == 2  # each once


def test_a_clause_queued_after_its_start_was_passed_is_announced_at_the_next_look() -> None:
    cues, playback, published, trace = following(start=0)
    cues.audible(7)
    playback.played = 300
    assert cues.poll() == 0  # nothing in the trace yet
    trace.clauses.append(SpokenClause("Upstairs.", 0, 400))
    assert cues.poll() == 1 and published == [ClauseStarted(7, 0, "Upstairs.")]


def test_nothing_is_announced_before_the_reply_is_announced_audible() -> None:
    cues, playback, _published, trace = following(start=0)
    trace.clauses.append(SpokenClause("Upstairs.", 0, 400))
    playback.played = 100  # played, but ReplyStarted is not published yet: the caption waits for it
    assert cues.poll() == 0
    cues.audible(8)  # another turn's
    assert cues.poll() == 0
    cues.audible(7)
    assert cues.poll() == 1


def test_a_reply_played_out_announces_the_rest_and_a_cut_one_only_what_was_heard() -> None:
    cues, playback, published, trace = following(start=0)
    trace.clauses += [SpokenClause("One.", 0, 100), SpokenClause("Two.", 100, 150)]
    cues.audible(7)
    playback.played = 120  # the ring is empty but the count lags a buffer behind: all was played
    cues.finish(played_out=True)
    assert [e.index for e in published if isinstance(e, ClauseStarted)] == [0, 1]
    cues2, playback2, published2, trace2 = following(start=0)
    trace2.clauses += [SpokenClause("One.", 0, 100), SpokenClause("Two.", 100, 150)]
    cues2.audible(7)
    playback2.played = 50  # a barge-in flushed the rest
    cues2.finish(played_out=False)
    assert published2 == [ClauseStarted(7, 0, "One.")]
    playback2.played = 1000
    assert cues2.poll() == 0  # forgotten once finished


def test_a_clause_is_announced_when_the_speaker_plays_its_first_sample_not_when_it_is_handed_over() -> None:
    """The device plays what it was handed after its buffer (tens of ms, half a second under load seen): a caption
    cued on the samples handed over came that much before its sound."""
    handed, heard, published = Stepped(), Stepped(), []
    cues = ClauseCues(lambda: handed.played, published.append, heard=lambda: heard.played)
    trace = ReplyTrace(7, committed=0.0)
    trace.stream_start = 1000
    trace.clauses += [SpokenClause("One.", 0, 500), SpokenClause("Two.", 500, 900)]
    cues.follow(7, trace)
    cues.audible(7)
    handed.played, heard.played = 1900, 1000  # all of it in the device's buffer, none played yet
    assert cues.poll() == 0 and published == []
    heard.played = 1001
    assert cues.poll() == 1 and published == [ClauseStarted(7, 0, "One.")]
    heard.played = 1500
    assert cues.poll() == 0
    heard.played = 1501
    assert cues.poll() == 1 and published[-1] == ClauseStarted(7, 1, "Two.")


class Draining:
    """The speaker's position, a little further at each look: (what it was at each publish)."""

    def __init__(self, positions: list[int]) -> None:
        self.positions, self.looks = positions, 0
        self.at_publish: list[tuple[int, int]] = []

    def heard(self) -> int:
        position = self.positions[min(self.looks, len(self.positions) - 1)]
        self.looks += 1
        return position

    def publish(self, event: LoopEvent) -> None:
        assert isinstance(event, ClauseStarted)
        self.at_publish.append((event.index, self.positions[min(self.looks, len(self.positions) - 1) - 1]))


def draining(positions: list[int], handed: int) -> tuple[ClauseCues, Draining]:
    speaker = Draining(positions)
    cues = ClauseCues(lambda: handed, speaker.publish, heard=speaker.heard, poll_s=0.0)
    trace = ReplyTrace(7, committed=0.0)
    trace.stream_start = 1000
    trace.clauses += [SpokenClause("One.", 0, 500), SpokenClause("Two.", 500, 900)]
    cues.follow(7, trace)
    cues.audible(7)
    return cues, speaker


def test_the_clauses_still_in_the_device_when_a_reply_ends_are_announced_as_the_speaker_reaches_them() -> None:
    # the ring ran dry (all of the reply handed over) while the second clause waits in the device's buffer
    cues, speaker = draining([1200, 1300, 1450, 1500, 1501, 1700, 1900], handed=1900)
    assert cues.poll() == 1
    cues.finish(played_out=True)
    assert speaker.at_publish == [(0, 1200), (1, 1501)]  # not at 1300, when the reply's end was reached
    assert speaker.looks == 5  # and no longer than that


def test_after_a_cut_only_the_clauses_handed_over_before_it_are_announced_as_they_are_played() -> None:
    # a barge-in flushed the ring at 1600: the second clause's first 100 samples were in the device, and are heard
    cues, speaker = draining([1400, 1450, 1500, 1501, 1600], handed=1600)
    cues.finish(played_out=False)
    assert speaker.at_publish == [(0, 1400), (1, 1501)]
    cut, speaker = draining([1400, 1450, 1480, 1480], handed=1480)  # the cut fell in the first clause
    cut.finish(played_out=False)
    assert speaker.at_publish == [(0, 1400)] and speaker.looks == 1


def test_a_speaker_that_stopped_delays_the_end_of_a_reply_a_bounded_time() -> None:
    cues, speaker = draining([1200], handed=1900)
    assert cues.poll() == 1
    cues.finish(played_out=True)  # the device never plays the rest: its captions come at the end, as before
    assert [index for index, _ in speaker.at_publish] == [0, 1]
    assert speaker.looks == 1 + math.ceil(DRAIN_S / 0.001)


def test_the_thread_ends_on_close_while_idle() -> None:
    import threading

    cues = ClauseCues(lambda: 0, lambda _e: None)
    thread = threading.Thread(target=cues.run)
    thread.start()
    cues.close()
    thread.join(5)
    assert not thread.is_alive()


def test_a_clause_is_in_the_trace_from_its_first_sample_queued_not_from_the_end_of_its_synthesis() -> None:
    """A long clause is synthesized in pieces: its caption must follow its first piece, not wait for its last."""
    import threading
    from collections.abc import Iterator

    import numpy as np

    from edgevoice.clock import ManualClock
    from edgevoice.config import Config
    from edgevoice.events import Transcript
    from edgevoice.kiosk.prompt import prefix_messages
    from edgevoice.reply.responder import Responder
    from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth

    class PiecesSynth(FakeSynth):
        def synthesize(self, text: str) -> Iterator[np.ndarray]:
            for _ in range(3):
                yield np.full(100, 0.1, dtype=np.float32)

    clock = ManualClock()
    responder = Responder(
        FakeRecognizer("", clock, seconds=0.0),
        FakeLlm("The cafe is upstairs.", clock, per_token=0.0),
        PiecesSynth(clock),
        prefix_messages("You are a test.", "The cafe is upstairs."),
        max_tokens=60,
        max_sentences=Config().kiosk.max_sentences,
        clock=clock,
    )
    trace = ReplyTrace(1, committed=0.0)
    written: list[int] = []
    listed: list[int] = []

    def emit(audio: np.ndarray) -> int:
        listed.append(len(trace.clauses))  # what a caption poller would see while this piece is queued
        written.append(len(audio))
        return sum(written)

    responder.respond_to(Transcript("Where is the cafe?"), trace, threading.Event(), emit)
    assert listed == [0, 1, 1]  # listed once its first piece was queued
    assert [(c.text, c.start_sample, c.end_sample) for c in trace.clauses] == [("The cafe is upstairs.", 0, 300)]
