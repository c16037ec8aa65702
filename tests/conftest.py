"""Shared fixtures. Tests marked ``models`` use the real default models installed by ``scripts/setup``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from edgevoice.audio.files import to_model_rate
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


_CONTRACTIONS = {"'s": " is", "'re": " are", "n't": " not", "'m": " am", "'ll": " will", "'ve": " have"}


def words(text: str) -> list[str]:
    """Lower-case words without punctuation, numbers spelled out, contractions expanded: for comparing transcripts."""
    from edgevoice.reply.speech_text import normalize_for_speech

    text = normalize_for_speech(text).lower().replace("-", " ").replace("’", "'")
    for short, long in _CONTRACTIONS.items():
        text = text.replace(short, long)
    return re.findall(r"[a-z']+", text)


def heard_share(reference: str, hypothesis: str) -> float:
    """Share of the reference's words found, in order, in the hypothesis (longest common subsequence): what was
    said and came through, with words the recognizer added (a looped tail on a recording) not counted against it."""
    ref, hyp = words(reference), words(hypothesis)
    row = [0] * (len(hyp) + 1)
    for r in ref:
        prev = 0
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], prev + 1 if r == h else max(row[j], row[j - 1])
    return row[-1] / max(1, len(ref))


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate (Levenshtein distance over words / reference length)."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1] / max(1, len(ref))
