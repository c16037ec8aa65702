"""Recognition across turns: a turn finished after the next has begun, and a turn that carries the words of the one
it goes on with."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from edgevoice.clock import ManualClock
from edgevoice.events import Transcript
from edgevoice.listen.streaming_asr import StreamingTranscriber
from tests.fakes import FakeRecognizer


class LengthRecognizer(FakeRecognizer):
    """Says how many tenths of a second it heard, so each decode's audio shows in the transcript."""

    def __init__(self) -> None:
        super().__init__("", ManualClock(), seconds=0.0)

    def transcribe(self, audio: np.ndarray, *, prompt: str = "") -> Transcript:
        self.heard.append(len(audio))
        return Transcript(f"heard{round(len(audio) / 1600)}")


def audio(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * 16000), np.float32)


@pytest.fixture
def asr() -> Iterator[StreamingTranscriber]:
    transcriber = StreamingTranscriber(LengthRecognizer())
    transcriber.start()
    yield transcriber
    assert transcriber.close()


def test_a_turn_finished_after_the_next_one_began_keeps_its_own_segments(asr: StreamingTranscriber) -> None:
    asr.start_turn(1)
    asr.commit_segment(audio(0.5))  # a pause inside turn 1
    asr.start_turn(2)  # the visitor speaks again before the responder took turn 1
    asr.commit_segment(audio(0.7))
    assert asr.finish(audio(0.3), turn_id=1).text == "heard5 heard3"
    assert asr.finish(audio(0.2), turn_id=2).text == "heard7 heard2"


def test_a_turn_carries_the_words_of_the_turn_it_goes_on_with(asr: StreamingTranscriber) -> None:
    asr.start_turn(3, carried="Where is the cafe")
    assert asr.finish(audio(0.4), turn_id=3).text == "Where is the cafe heard4"
    assert asr.recognizer.heard == [6400]  # type: ignore[attr-defined]  # the carried words were not decoded again


class SureRecognizer(FakeRecognizer):
    """Hears "part" with the confidence queued for each decode."""

    def __init__(self, *confidence: float) -> None:
        super().__init__("", ManualClock(), seconds=0.0)
        self.confidence = list(confidence)

    def transcribe(self, audio: np.ndarray, *, prompt: str = "") -> Transcript:
        return Transcript("part", confidence=self.confidence.pop(0))


def test_a_turn_is_as_sure_as_its_least_sure_part() -> None:
    asr = StreamingTranscriber(SureRecognizer(0.9, 0.4, 0.8))
    asr.start()
    try:
        asr.start_turn(1)
        asr.commit_segment(audio(0.5))
        asr.commit_segment(audio(0.5))
        heard = asr.finish(audio(0.3), turn_id=1)
        assert (heard.text, heard.confidence) == ("part part part", 0.4)
    finally:
        assert asr.close()


def test_words_carried_from_the_turn_before_count_for_nothing() -> None:
    asr = StreamingTranscriber(SureRecognizer(0.7))
    asr.start()
    try:
        asr.start_turn(2, carried="Where is the")
        assert asr.finish(audio(0.3), turn_id=2).confidence == 0.7
    finally:
        assert asr.close()
