"""The wake word on the real microWakeWord models (pymicro-wakeword): heard in speech that says it, not in speech
that does not, and in the live loop one turn after it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from edgevoice.audio.ring import SharedRing
from edgevoice.engines.wake_word import MicroWakeWord, builtin_wake_words
from edgevoice.errors import ModelMissingError
from edgevoice.live.activation import Activation, ActivationMode
from tests.test_activation_loop import feed, gated
from tests.test_loop import RATE, rings, running, silence

__all__ = ["rings"]

UTTERANCES = Path(__file__).parent.parent / "edgevoice" / "selftest" / "utterances"


def detections(detector: MicroWakeWord, audio: np.ndarray, chunk: int = 512) -> int:
    """How often the wake word is heard in ``audio`` fed as the listener feeds it."""
    return sum(detector.heard(audio[i : i + chunk]) for i in range(0, len(audio), chunk))


def test_the_package_ships_its_wake_words_and_refuses_unknown_ones() -> None:
    assert {"hey_jarvis", "okay_nabu"} <= set(builtin_wake_words())
    with pytest.raises(ModelMissingError, match="neither a built-in wake word"):
        MicroWakeWord("hey_kiosk")


def test_recorded_questions_do_not_wake_any_model() -> None:
    """The self-test's recorded questions (real voices, no wake word) wake none of the shipped models."""
    audio = np.concatenate([sf.read(path, dtype="float32")[0] for path in sorted(UTTERANCES.glob("*.flac"))])
    assert len(audio) > 10 * RATE
    for name in builtin_wake_words():
        detector = MicroWakeWord(name)
        try:
            assert detections(detector, audio) == 0, name
        finally:
            detector.close()


def test_a_spoken_wake_word_is_heard_once_and_only_by_its_model(speak: Callable[[str], np.ndarray]) -> None:
    said = np.concatenate([silence(0.5), speak("Hey Jarvis, where is the cafe?"), silence(1.0)])
    jarvis, nabu = MicroWakeWord("hey_jarvis"), MicroWakeWord("okay_nabu")
    try:
        assert detections(jarvis, said) == 1 and detections(nabu, said) == 0
        assert detections(jarvis, silence(0.5)) == 0  # nothing left over from the detection
        assert detections(jarvis, np.concatenate([speak("Where is the cafe?"), silence(1.0)])) == 0
    finally:
        jarvis.close()
        nabu.close()


def test_the_loop_answers_the_question_after_the_wake_word(
    rings: tuple[SharedRing, SharedRing], speak: Callable[[str], np.ndarray]
) -> None:
    mic, spk = rings
    loop, _, answered, done = gated(mic, spk, ActivationMode.TRIGGER)
    detector = MicroWakeWord("hey_jarvis")
    loop.listener.activation = Activation(ActivationMode.WAKE_WORD, trigger_timeout_s=3.0, wake_word=detector)
    question = speak("Where is the cafe?")
    try:
        with running(loop):
            feed(loop, np.concatenate([question, silence(1.0)]))
            assert answered == [] and not loop.listener.in_turn
            feed(loop, np.concatenate([speak("Hey Jarvis."), silence(0.3), question, silence(1.0)]))
            assert done.wait(10)
    finally:
        detector.close()
    ((_, turn),) = answered
    assert len(question) - 0.5 * RATE < len(turn.audio) < len(question) + 1.0 * RATE  # the question, not the name
