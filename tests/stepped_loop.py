"""The live loop's parts driven step by step on a manual clock, for the ordering tests (tests/test_*_order.py): the
listener fed frame by frame with the recognition jobs done between two frames, the answerer handling one event at a
time into a speaker that plays at once. No thread of the loop's runs, nothing sleeps, nothing reads the wall clock."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.chunk import AudioChunk
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import ManualClock
from edgevoice.config import Config
from edgevoice.interfaces import EndOfTurn, TextEndOfTurn, VoiceActivity
from edgevoice.kiosk.prompt import prefix_messages
from edgevoice.listen.endpointing import Endpointer, EndpointingConfig, TurnEndReason
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.listen.turn import Turn
from edgevoice.live.activation import Activation
from edgevoice.live.answering import Answerer, AnswererEvent
from edgevoice.live.bus import EventBus, Subscription
from edgevoice.live.events import BargeIn, LoopEvent, Partial, ReplyBegun, TurnCommitted
from edgevoice.live.listener import FRAME, Listener
from edgevoice.reply.responder import Responder
from edgevoice.reply.speculation import SpeculativeReplies
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth

__all__ = ["FRAME", "RATE", "mic", "spk"]

E = TypeVar("E", bound=LoopEvent)


class EnergyVad:
    sample_rate = RATE
    frame_samples = 512

    def reset(self) -> None:
        pass

    def probability(self, frame: np.ndarray) -> float:
        return 0.9 if np.abs(frame).max() > 0.05 else 0.02


class CompleteTurn:
    sample_rate = RATE

    def __init__(self) -> None:
        self.calls = 0

    def probability_complete(self, audio: np.ndarray) -> float:
        self.calls += 1
        return 0.9


def speech(seconds: float) -> np.ndarray:
    return (0.3 * np.sin(np.arange(int(seconds * RATE)) / 3.0)).astype(np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.float32)


FALLBACK = np.full(2205, -0.2, dtype=np.float32)
"""Stands in for the synthesized fallback phrase: a level no fake reply has."""


@dataclass
class ReplySide:
    """The reply side as the listener sees it: what the test says it is doing, and what the listener told it."""

    told: list[AnswererEvent] = field(default_factory=list)
    replying: bool = False
    reply_uncut: bool = False
    replying_to: int = 0
    transcripts: dict[int, str] = field(default_factory=dict)
    ticks: int = 0

    def tell(self, event: AnswererEvent) -> None:
        self.told.append(event)
        if isinstance(event, BargeIn):
            self.reply_uncut = False  # as the answerer's: the reply is cut at once

    def transcript(self, turn_id: int) -> str | None:
        return self.transcripts.get(turn_id)

    def tick(self) -> None:
        self.ticks += 1


class SteppedListener:
    """A listener on fake engines, fed by hand: :meth:`hear` feeds whole frames and does the recognition jobs they
    queued before the next frame (as an idle worker would). ``words``: the words' end-of-turn judge (with
    ``endpoint.text_incomplete_below``); the other keywords replace the fake engines."""

    def __init__(
        self,
        mic: SharedRing,
        *,
        speculative: bool = False,
        endpoint: EndpointingConfig | None = None,
        words: TextEndOfTurn | None = None,
        activation: Activation | None = None,
        recognizer: Any = None,
        vad: VoiceActivity | None = None,
        turn_model: EndOfTurn | None = None,
    ):
        endpoint = endpoint or EndpointingConfig()
        self.clock = ManualClock()
        self.reply = ReplySide()
        self.bus = EventBus()
        self.events: Subscription = self.bus.subscribe(name="test", maxsize=10_000)
        self.played = 0
        self.prefilled: list[str] = []
        self.in_jobs = False
        """True while the recognition jobs run (what the recognition worker would do)."""
        self._rest = np.zeros(0, np.float32)
        self.recognizer: Any = recognizer or FakeRecognizer("Where is the cafe?", self.clock, seconds=0.0)
        self.asr = StreamingTranscriber(
            self.recognizer,
            on_partial=self._on_partial,
            on_speculation=lambda spec: self.speculation.on_decoded(spec),
        )
        self.speculation = SpeculativeReplies(
            enabled=speculative,
            submit=lambda reply: self.reply.tell(ReplyBegun(reply)),
            busy=lambda: False,
            prefill=self.prefilled.append,
            words=words,
            incomplete_below=endpoint.text_incomplete_below,
        )
        self.smart_turn = CompleteTurn()
        """The end-of-turn model unless ``turn_model`` is given."""
        self.listener = Listener(
            mic=mic,
            vad=vad or EnergyVad(),
            turn_model=turn_model or self.smart_turn,
            endpointer=Endpointer(endpoint),
            asr=self.asr,
            speculation=self.speculation,
            reply=self.reply,
            tell=self.reply.tell,
            publish=self.bus.publish,
            played=lambda: self.played,
            gate=None,
            clock=self.clock,
            activation=activation,
        )

    def _on_partial(self, turn_id: int, text: str) -> None:
        """As the loop's: published, and read ahead by the words' judge."""
        self.bus.publish(Partial(turn_id, text))
        self.speculation.on_partial(text)

    def hear(self, *parts: np.ndarray) -> None:
        """Feed the parts' whole frames; what is left of the last one is fed with the next call's."""
        audio = np.concatenate([self._rest, *parts])
        whole = len(audio) // FRAME * FRAME
        self._rest = audio[whole:]
        for i in range(0, whole, FRAME):
            self.listener.feed(AudioChunk(audio[i : i + FRAME], self.listener.samples_in))
            self.in_jobs = True
            self.asr.run_queued()
            self.in_jobs = False
            self.clock.advance(FRAME / RATE)

    def committed(self) -> list[Turn]:
        return [e.turn for e in self.reply.told if isinstance(e, TurnCommitted)]

    def published(self, kind: type[E]) -> list[E]:
        return [e for e in self.events.drain() if isinstance(e, kind)]

    def finish(self, turn: Turn) -> str:
        """The committed turn's whole transcript, as the answerer takes it (its tail decoded only if need be)."""
        assert turn.tail is not None
        return self.asr.finish(turn.tail.samples, turn_id=turn.turn_id, speculation_valid=turn.speculation_valid).text


@pytest.fixture
def mic() -> Iterator[SharedRing]:
    with SharedRing.create(RATE) as ring:  # never read: the tests feed the listener themselves
        yield ring


# -- the answerer, one event at a time ---------------------------------------------------------------------------------
class InstantSpeaker:
    """A speaker ring whose device plays everything the moment it is written (the answerer never waits for it)."""

    def __init__(self, ring: SharedRing) -> None:
        self.ring = ring
        self.audio: list[np.ndarray] = []

    @property
    def written(self) -> int:
        return sum(map(len, self.audio))

    def played(self) -> np.ndarray:
        """Everything written, in order."""
        return np.concatenate([np.zeros(0, np.float32), *self.audio])

    def write(self, audio: np.ndarray) -> int:
        self.audio.append(np.array(audio, np.float32))
        return len(audio)

    def free(self) -> int:
        return self.ring.capacity

    def available(self) -> int:
        return 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.ring, name)


class SteppedAnswerer:
    """The answerer on fake engines, stepped by hand (:meth:`Answerer.step`), into an :class:`InstantSpeaker`."""

    def __init__(
        self,
        ring: SharedRing,
        *,
        budget_s: float | None = None,
        llm: FakeLlm | None = None,
        synth: FakeSynth | None = None,
    ) -> None:
        self.clock = ManualClock()
        self.llm = llm or FakeLlm("The cafe is upstairs.", self.clock, per_token=0.0)
        self.responder = Responder(
            FakeRecognizer("Where is the cafe?", self.clock, seconds=0.0),
            self.llm,
            synth or FakeSynth(self.clock),
            prefix_messages("You are a test.", "The cafe is upstairs."),
            max_tokens=60,
            max_sentences=Config().kiosk.max_sentences,
            clock=self.clock,
        )
        self.bus = EventBus()
        self.events = self.bus.subscribe(name="test", maxsize=10_000)
        self.speaker = InstantSpeaker(ring)
        self.answerer = Answerer(
            responder=self.responder,
            asr=StreamingTranscriber(self.responder.recognizer),
            speaker=self.speaker,  # type: ignore[arg-type]
            playback=PlaybackControl(ring),
            gate=None,
            clock=self.clock,
            publish=self.bus.publish,
            fallback_audio=FALLBACK,
            fallback_text="Sorry?",
            budget_s=budget_s,
        )

    def turn(self, turn_id: int) -> Turn:
        audio = AudioChunk(speech(1.0), start=turn_id * RATE * 10)
        return Turn(turn_id, audio, audio.end_s, audio.end_s, self.clock.now(), TurnEndReason.COMPLETE, audio)

    def published(self) -> list[LoopEvent]:
        return self.events.drain()


@pytest.fixture
def spk() -> Iterator[SharedRing]:
    with SharedRing.create(22050 * 10) as ring:
        yield ring
