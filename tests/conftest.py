"""Shared fixtures. Tests marked ``models`` use the real default models installed by ``scripts/setup``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
from rapidfuzz.distance import LCSseq

from edgevoice.audio.files import to_model_rate
from edgevoice.bench.scoring import word_error_rate as wer  # noqa: F401  (the tests' word error rate)
from edgevoice.bench.scoring import words
from edgevoice.config import Config
from edgevoice.converse import ASR_RATE
from edgevoice.interfaces import Engines
from tests.conftest_audio import pulse  # noqa: F401  (fixture)


@pytest.fixture(scope="session")
def store():  # type: ignore[no-untyped-def]
    from edgevoice.models.store import ModelStore

    return ModelStore()


@pytest.fixture(scope="session")
def engines(store) -> Iterator[Engines]:  # type: ignore[no-untyped-def]
    from edgevoice.engines.factory import load_engines

    loaded, _ = load_engines(Config(), store)
    yield loaded
    loaded.close()


@pytest.fixture(scope="session")
def speak(store) -> Callable[[str], np.ndarray]:  # type: ignore[no-untyped-def]
    """Speech for a text at 16 kHz, made by the default voice without its sampling noise, so every test run hears
    exactly the same audio."""
    from edgevoice.engines.factory import piper_files
    from edgevoice.engines.piper_onnx import PiperSynthesizer
    from edgevoice.reply.speech_text import normalize_for_speech

    tts = PiperSynthesizer(*piper_files(store, Config().models.tts), noise_scale=0.0, noise_w=0.0)

    def make(text: str) -> np.ndarray:
        audio = np.concatenate(list(tts.synthesize(normalize_for_speech(text))))
        return to_model_rate(audio, tts.sample_rate, ASR_RATE)

    return make


def heard_share(reference: str, hypothesis: str) -> float:
    """Share of the reference's words found, in order, in the hypothesis (longest common subsequence): what was
    said and came through, with words the recognizer added (a looped tail on a recording) not counted against it."""
    ref = words(reference)
    return LCSseq.similarity(ref, words(hypothesis)) / max(1, len(ref))
