"""The phantom filter decides from evidence: a "thank you" with speech in its audio is kept, the same words on a turn
with little or no speech are dropped. Synthetic audio and a scripted decoder here; the real recognizer on a spoken
"Thank you." and on silence and noise at the end (models tier)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.engines.speech_evidence import SPEECH_MS, speech_evidence
from edgevoice.engines.whispercpp import DEFAULT_PHANTOM_PHRASES, SAID_PHANTOM_PHRASES, WhisperCppRecognizer


def _syllables(seconds: float, level: float = 0.1, rate_hz: float = 4.0) -> np.ndarray:
    """Voiced speech-like sound: a 140 Hz harmonic series whose loudness rises and falls ``rate_hz`` times a
    second (syllables), RMS about ``level`` / 2."""
    t = np.arange(int(seconds * RATE)) / RATE
    voiced = sum(np.sin(2 * np.pi * 140 * k * t) / k for k in range(1, 12))
    envelope = np.clip(np.sin(np.pi * rate_hz * t), 0.0, None) ** 0.5
    return (level * voiced * envelope / np.max(np.abs(voiced))).astype(np.float32)


def _pink(n: int, rms: float, seed: int = 0) -> np.ndarray:
    spectrum = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
    spectrum[1:] /= np.sqrt(np.arange(1, spectrum.size))
    noise = np.fft.irfft(spectrum, n)
    return (noise * rms / np.sqrt(np.mean(noise**2))).astype(np.float32)


def _padded(audio: np.ndarray, seconds: float = 0.3) -> np.ndarray:
    pad = np.zeros(int(seconds * RATE), dtype=np.float32)
    return np.concatenate([pad, audio, pad])


def test_said_words_hold_speech_and_noise_silence_hum_and_clicks_do_not() -> None:
    said = _padded(_syllables(0.6))
    assert speech_evidence(said).spoken and speech_evidence(said).speech_ms >= 300
    noisy = said + _pink(said.size, float(np.sqrt(np.mean(said**2))) / np.sqrt(10.0))  # 10 dB SNR
    assert speech_evidence(noisy).spoken
    assert speech_evidence(_syllables(0.6)).spoken  # cut tight, no quiet around it: still speech
    t = np.arange(RATE) / RATE
    for name, audio in {
        "silence": np.zeros(RATE, dtype=np.float32),
        "loud pink noise": _pink(2 * RATE, 0.1),
        "quiet pink noise": _pink(2 * RATE, 0.003),
        "hum": (0.1 * np.sin(2 * np.pi * 50 * t)).astype(np.float32),
        "two clicks": np.where(np.arange(RATE) % 8000 < 40, 0.5, 0.0).astype(np.float32) + _pink(RATE, 0.001),
        "a whisper far below speaking level": _padded(_syllables(0.6, level=0.001)),
        "a short knock": _padded(_syllables(0.1)),
    }.items():
        evidence = speech_evidence(audio)
        assert not evidence.spoken and evidence.speech_ms < SPEECH_MS, (name, evidence)


def test_the_loudest_frame_is_reported() -> None:
    assert speech_evidence(np.zeros(RATE, dtype=np.float32)).level_dbfs == -100.0
    assert speech_evidence(np.full(RATE, 0.5, dtype=np.float32)).level_dbfs == pytest.approx(-6.0, abs=0.1)
    assert speech_evidence(np.zeros(100, dtype=np.float32)).speech_ms == 0  # shorter than a frame


def test_the_phrases_visitors_say_are_phantoms_only_without_speech() -> None:
    assert {"thank you", "thanks", "bye"} <= SAID_PHANTOM_PHRASES <= DEFAULT_PHANTOM_PHRASES
    assert "thanks for watching" in DEFAULT_PHANTOM_PHRASES - SAID_PHANTOM_PHRASES


class _Scripted(WhisperCppRecognizer):
    """The adapter's own filters around a decoder that always hears ``text`` (no model loaded)."""

    def __init__(self, text: str) -> None:  # the real __init__ loads a model file
        self.text = text
        self.threads, self.audio_ctx, self.language, self.initial_prompt = 1, 0, "en", ""
        self.no_speech_threshold, self.noise_flatness = 0.6, 0.35
        self.phantom_phrases, self.said_phrases = DEFAULT_PHANTOM_PHRASES, SAID_PHANTOM_PHRASES
        self.hparams = type("Hparams", (), {"n_audio_ctx": 1500})()
        self._ctx = None

    def _decode(
        self, samples: np.ndarray, ctx_size: int, prompt: str, max_tokens: int
    ) -> tuple[str | None, int, float | None]:
        return self.text, 3, 0.9


@pytest.mark.parametrize("text", ["Thank you.", "Thanks!", "Bye-bye."])
def test_a_said_thank_you_is_kept_and_the_same_words_on_little_speech_are_dropped(text: str) -> None:
    rec = _Scripted(text)
    assert rec.transcribe(_padded(_syllables(0.6))).text == text
    dropped = rec.transcribe(_padded(_syllables(0.1)))  # a knock: too little speech for words
    assert dropped.text == "" and dropped.filtered is not None and dropped.filtered.startswith("phrase:")
    assert rec.transcribe(_padded(_syllables(0.6, level=0.001))).text == ""  # far below speaking level


def test_phantoms_no_visitor_says_are_dropped_whatever_the_audio() -> None:
    for text in ("Thanks for watching!", "You", "Subtitles by the Amara.org community", "[BLANK_AUDIO]"):
        assert _Scripted(text).transcribe(_padded(_syllables(0.8))).text == "", text


# --- the real recognizer (models tier) ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recognizer(store) -> Iterator[WhisperCppRecognizer]:  # type: ignore[no-untyped-def]
    from edgevoice.config import Config
    from edgevoice.models.configured import resolve

    rec = WhisperCppRecognizer(Path(resolve(store, "asr", Config().models.asr)), threads=2)
    yield rec
    rec.close()


@pytest.mark.slow
def test_the_real_recognizer_keeps_a_spoken_thank_you_and_drops_it_without_speech(
    recognizer: WhisperCppRecognizer, speak: Callable[[str], np.ndarray]
) -> None:
    said = _padded(speak("Thank you."))
    assert recognizer.transcribe(said).text.lower().startswith("thank you")
    noisy = said + _pink(said.size, float(np.sqrt(np.mean(said**2))) / np.sqrt(10.0), seed=2)  # 10 dB SNR
    assert recognizer.transcribe(noisy).text.lower().startswith("thank you")
    # the same words, heard far below speaking level: what Whisper makes of a distant murmur is not a visitor's
    faint = recognizer.transcribe((said * 0.01).astype(np.float32))
    assert faint.text == ""
    assert faint.filtered is not None
    for audio in (np.zeros(2 * RATE, dtype=np.float32), _pink(2 * RATE, 0.05, seed=3)):
        assert recognizer.transcribe(audio).text == ""
