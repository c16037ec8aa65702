"""The turn's assembly on its own: fed frames and a speech probability by hand (no VAD, no listener, no thread), on a
manual clock; what it tells the answerer and publishes is asserted, in order.

The listener that drives it (activation, barge-in) is tested in tests/test_loop_order.py and tests/test_loop.py."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.chunk import AudioChunk
from edgevoice.clock import ManualClock
from edgevoice.listen.endpointing import Endpointer, EndpointingConfig, TurnEnd, TurnEndReason
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.listen.turn import Turn
from edgevoice.live.answering import AnswererEvent
from edgevoice.live.events import LoopEvent, SpeechStarted, TurnCommitted, Withdrawn
from edgevoice.live.turn_assembly import FRAME, TurnAssembly
from edgevoice.reply.speculation import SpeculativeReplies
from tests.fakes import FakeRecognizer
from tests.test_loop import CompleteTurn

pytestmark = pytest.mark.unit

SPEECH, QUIET = 0.9, 0.02


@dataclass
class Reply:
    replying: bool = False
    reply_uncut: bool = False

    def transcript(self, turn_id: int) -> str | None:
        return None


class Stepped:
    """A turn assembly on fake engines, fed frame by frame (the recognition jobs done between two frames)."""

    def __init__(self, endpoint: EndpointingConfig | None = None, *, may_rejoin: bool = True) -> None:
        self.clock = ManualClock()
        self.told: list[AnswererEvent] = []
        self.published: list[LoopEvent] = []
        self.at = 0
        self.asr = StreamingTranscriber(
            FakeRecognizer("Where is the cafe?", self.clock, seconds=0.0),
            on_speculation=lambda spec: self.speculation.on_decoded(spec),
        )
        self.speculation = SpeculativeReplies(
            enabled=False, submit=lambda _reply: None, busy=lambda: False, prefill=lambda _text: None
        )
        self.assembly = TurnAssembly(
            turn_model=CompleteTurn(),
            endpointer=Endpointer(endpoint or EndpointingConfig()),
            asr=self.asr,
            speculation=self.speculation,
            reply=Reply(),
            tell=self.told.append,
            publish=self.published.append,
            played=lambda: 0,
            clock=self.clock,
            may_rejoin=lambda: may_rejoin,
        )

    def frame(self) -> AudioChunk:
        chunk = AudioChunk(np.zeros(FRAME, np.float32), self.at)
        self.at = chunk.end
        self.clock.advance(FRAME / RATE)
        return chunk

    def hear(self, seconds: float, probability: float) -> None:
        for _ in range(round(seconds * RATE / FRAME)):
            frame = self.frame()
            if self.assembly.held:
                self.assembly.hear_held(probability, self.at)
            else:
                self.assembly.act(self.assembly.hear(frame, probability), self.at)
            self.asr.run_queued()

    def committed(self) -> list[Turn]:
        return [e.turn for e in self.told if isinstance(e, TurnCommitted)]


def test_a_turn_starts_at_its_speech_and_is_committed_after_its_pause_with_its_preroll() -> None:
    ears = Stepped()
    ears.hear(1.0, QUIET)
    onset = ears.at
    ears.hear(1.0, SPEECH)
    assert ears.told == [] and ears.assembly.in_turn
    (started,) = ears.published
    assert isinstance(started, SpeechStarted) and started.turn_id == 1 and started.t == pytest.approx(onset / RATE)
    ears.hear(0.4, QUIET)
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.COMPLETE and not ears.assembly.in_turn
    assert onset - 0.35 * RATE < turn.audio.start < onset  # the preroll: a little of what came before the speech
    assert onset + RATE < turn.audio.end == int(turn.committed_t * RATE) <= ears.at  # its end: the commit
    assert [type(e) for e in ears.published] == [SpeechStarted, TurnCommitted]


def test_after_a_restart_nothing_heard_before_is_part_of_the_turn() -> None:
    ears = Stepped()
    ears.hear(1.0, QUIET)
    restarted = ears.at
    ears.assembly.restart(restarted)
    ears.hear(1.0, SPEECH)
    ears.hear(0.4, QUIET)
    (turn,) = ears.committed()
    assert turn.audio.start == restarted


@pytest.mark.parametrize("may_rejoin", [True, False])
def test_speech_right_after_a_commit_goes_on_with_it_only_where_the_listener_allows(may_rejoin: bool) -> None:
    ears = Stepped(may_rejoin=may_rejoin)
    ears.hear(0.3, QUIET)
    ears.hear(1.0, SPEECH)
    ears.hear(0.4, QUIET)
    ears.hear(0.5, SPEECH)
    assert (Withdrawn(1) in ears.told) is may_rejoin
    ears.hear(0.4, QUIET)
    assert [t.continues for t in ears.committed()] == [None, 1 if may_rejoin else None]


def test_a_turn_cut_at_max_turn_s_is_held_and_committed_at_the_visitors_pause() -> None:
    ears = Stepped(EndpointingConfig(max_turn_s=2.0))
    ears.hear(0.3, QUIET)
    ears.hear(3.0, SPEECH)  # a monologue: cut at 2 s, the rest neither kept nor a new turn
    assert ears.told == [] and ears.assembly.held and ears.assembly.in_turn
    ears.hear(0.4, QUIET)
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.MAX_LENGTH and not ears.assembly.in_turn
    assert turn.committed_t == pytest.approx(ears.at / RATE, abs=0.2)  # at the pause, not at the cut
    assert turn.audio.end < int(2.4 * RATE)  # the cut turn's audio ends at the cut


def test_a_failure_drops_the_open_turn_but_a_held_one_still_waits_for_its_pause() -> None:
    ears = Stepped(EndpointingConfig(max_turn_s=2.0))
    ears.hear(1.0, SPEECH)
    ears.assembly.drop(ears.at)
    assert not ears.assembly.in_turn
    ears.hear(0.4, QUIET)
    assert ears.told == []
    ears.hear(3.0, SPEECH)
    ears.assembly.drop(ears.at)
    assert ears.assembly.held  # a failure in the frame after the cut costs that frame only
    ears.hear(0.4, QUIET)
    assert [t.reason for t in ears.committed()] == [TurnEndReason.MAX_LENGTH]


def test_a_push_to_talk_turn_keeps_max_turn_s_of_audio_and_ends_when_it_is_told() -> None:
    ears = Stepped(EndpointingConfig(max_turn_s=2.0))
    ears.frame()
    pressed = ears.at
    ears.assembly.press(pressed)
    assert [type(e) for e in ears.published] == [SpeechStarted] and ears.assembly.turn_open
    kept = 0
    for _ in range(round(3.0 * RATE / FRAME)):  # held for 3 s: the turn keeps 2 s of it
        frame = ears.frame()
        if ears.assembly.has_room():
            ears.assembly.keep(frame)
            kept += 1
        ears.assembly.partial()
        ears.asr.run_queued()
    assert ears.assembly.kept == kept * FRAME >= 2.0 * RATE > (kept - 1) * FRAME
    unheard = ears.at - pressed - ears.assembly.kept
    ears.assembly.end(TurnEnd(ears.at / RATE, 1.0, TurnEndReason.RELEASED, pressed / RATE), ears.at, unheard=unheard)
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.RELEASED and turn.audio.start == pressed and len(turn.audio) == kept * FRAME


def test_an_abandoned_push_to_talk_turn_is_never_told() -> None:
    ears = Stepped()
    ears.assembly.press(ears.at)
    ears.assembly.keep(ears.frame())
    ears.assembly.abandon()
    assert not ears.assembly.in_turn and ears.told == []
