"""Synthesis beside the language model: the LLM goes on while a clause is synthesized; order, cancel, errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

from edgevoice.clock import ManualClock
from edgevoice.events import ChatMessage
from edgevoice.kiosk.prompt import prefix_messages
from edgevoice.reply.responder import Responder
from edgevoice.reply.synthesis import SynthesisWorker
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeRecognizer

WAIT = 10.0


class GatedSynth:
    """Holds the first clause's synthesis until released; records what it synthesized."""

    sample_rate = 22050

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.texts: list[str] = []

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        self.texts.append(text)
        self.started.set()
        assert self.release.wait(WAIT)
        yield np.full(100 * len(self.texts), len(self.texts), dtype=np.float32)


class WatchedLlm:
    """Streams its words; after the first sentence it waits until the synthesizer is busy with it, then records
    how many words it produced while that synthesis was still held."""

    def __init__(self, reply: str, synth: GatedSynth) -> None:
        self.reply, self.synth = reply, synth
        self.words_during_first_synthesis = 0

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        try:
            for word in self.reply.split(" "):
                if self.synth.started.is_set() and not self.synth.release.is_set():
                    self.words_during_first_synthesis += 1
                yield word + " "
                if word.endswith("."):
                    assert self.synth.started.wait(WAIT)
        finally:  # the reply is complete (or the responder stopped reading after its last sentence)
            self.synth.release.set()


def responder(llm: object, synth: GatedSynth) -> Responder:
    clock = ManualClock()
    return Responder(
        FakeRecognizer("Where is the cafe?", clock, seconds=0.0),  # type: ignore[arg-type]
        llm,  # type: ignore[arg-type]
        synth,
        prefix_messages("You are a test.", "The cafe is upstairs."),
        max_tokens=60,
        max_sentences=2,
        clock=clock,
        synthesis_thread=True,
    )


def test_the_language_model_goes_on_while_a_clause_is_synthesized_and_audio_stays_in_order() -> None:
    synth = GatedSynth()
    llm = WatchedLlm("Yes. The cafe is upstairs next to the window.", synth)
    played: list[np.ndarray] = []

    def emit(chunk: np.ndarray) -> int:
        played.append(chunk)
        return sum(len(c) for c in played)

    trace = responder(llm, synth).respond(
        np.zeros(16000, np.float32), ReplyTrace(1, committed=0.0), threading.Event(), emit
    )
    assert llm.words_during_first_synthesis > 0  # generation did not wait for the first synthesis
    assert synth.texts == ["Yes.", "The cafe is upstairs next to the window."]
    assert [float(c[0]) for c in played] == [1.0, 2.0]
    assert [(c.start_sample, c.end_sample) for c in trace.clauses] == [(0, 100), (100, 300)]
    assert trace.reply == "Yes. The cafe is upstairs next to the window."


def test_a_cancelled_reply_drops_the_clauses_still_waiting() -> None:
    cancel = threading.Event()
    spoken: list[str] = []

    def speak(clause: str) -> None:
        spoken.append(clause)
        cancel.set()  # the visitor interrupts during the first clause

    worker = SynthesisWorker(speak, cancel)
    for clause in ("one", "two", "three"):
        worker.put(clause)
    worker.finish()
    assert spoken == ["one"]


def test_an_error_in_synthesis_reaches_the_responder_thread() -> None:
    def speak(clause: str) -> None:
        raise RuntimeError(f"voice broke on {clause!r}")

    worker = SynthesisWorker(speak, threading.Event())
    worker.put("hello")
    worker.put("again")
    with pytest.raises(RuntimeError, match="hello"):
        worker.finish()
