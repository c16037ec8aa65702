"""What a recognizer refuses to decode: audio that is not mono, not finite, too short, digitally silent or white-like
noise. Whisper invents words on silence and noise; no recognizer needs to run its encoder on them."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from edgevoice.audio import SAMPLE_RATE
from edgevoice.errors import RecognizerError
from edgevoice.events import Transcript

MIN_SECONDS = 0.1
SILENCE_PEAK = 1e-4  # about -80 dBFS: digital silence, not worth an encoder pass
NOISE_FLATNESS = 0.35  # white noise measures ~0.5; speech <= 0.2 even at 0 dB SNR in white noise


def screen_audio(
    audio: npt.NDArray[np.float32], noise_flatness: float | None
) -> tuple[npt.NDArray[np.float32], Transcript | None]:
    """The audio as contiguous float32, and the empty transcript to return instead of decoding it (None: decode it);
    raises on audio that is not mono or not finite. ``noise_flatness``: above it, the audio is noise (None: no
    noise gate)."""
    samples = np.ascontiguousarray(audio, dtype=np.float32)
    if samples.ndim != 1:
        raise RecognizerError(f"expected mono audio (1-D), got shape {samples.shape}")
    if samples.size < MIN_SECONDS * SAMPLE_RATE:
        return samples, Transcript(text="", filtered="too_short" if samples.size else None)
    if not np.all(np.isfinite(samples)):
        raise RecognizerError("audio contains NaN or infinite samples")
    if float(np.max(np.abs(samples))) < SILENCE_PEAK:
        return samples, Transcript(text="", no_speech_prob=1.0, filtered="silence")
    if noise_flatness is not None and spectral_flatness(samples) > noise_flatness:
        return samples, Transcript(text="", no_speech_prob=1.0, filtered="noise")
    return samples, None


def spectral_flatness(audio: npt.NDArray[np.float32], percentile: float = 10.0) -> float:
    """Low-percentile spectral flatness (100 Hz - 4 kHz, 25 ms frames) of the audible frames of 16 kHz audio.

    Near 0.5 for white noise; speech has harmonic frames far below that, so the low percentile stays small
    whenever anyone speaks, even in loud noise.
    """
    if audio.size < 400:
        return 0.0
    frames = np.lib.stride_tricks.sliding_window_view(audio.astype(np.float64), 400)[::160]
    power = np.abs(np.fft.rfft(frames * np.hanning(400), axis=1)) ** 2
    freqs = np.fft.rfftfreq(400, 1.0 / SAMPLE_RATE)
    power = power[:, (freqs >= 100.0) & (freqs <= 4000.0)] + 1e-20
    energy = power.mean(axis=1)
    audible = energy > energy.max() * 1e-3
    flatness = np.exp(np.log(power[audible]).mean(axis=1)) / energy[audible]
    return float(np.percentile(flatness, percentile))
