"""Shared fixtures. Tests marked ``models`` use the real default models installed by ``scripts/setup``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from edgevoice.audio import to_model_rate
from edgevoice.config import Config
from edgevoice.pipeline import ASR_RATE, Engines


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
def speak(engines: Engines) -> Callable[[str], np.ndarray]:
    """Speech for a text, made by the default voice, at 16 kHz."""
    from edgevoice.speech_text import normalize_for_speech

    def make(text: str) -> np.ndarray:
        tts = engines.synthesizer
        audio = np.concatenate(list(tts.synthesize(normalize_for_speech(text))))
        return to_model_rate(audio, tts.sample_rate, ASR_RATE)

    return make


def words(text: str) -> list[str]:
    """Lower-case words without punctuation, numbers spelled out: for comparing transcripts."""
    from edgevoice.speech_text import normalize_for_speech

    return re.findall(r"[a-z']+", normalize_for_speech(text).lower().replace("-", " "))


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate (Levenshtein distance over words / reference length)."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1] / max(1, len(ref))
