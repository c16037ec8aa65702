"""Whisper's log-mel front end in numpy (no torch, no librosa).

Identical in definition to openai-whisper's ``whisper.audio.log_mel_spectrogram``: a centred STFT (n_fft 400,
hop 160, periodic Hann window, reflect padding) of 16 kHz audio, the power of each bin, a Slaney-style mel
filterbank (librosa's ``filters.mel(sr=16000, n_fft=400, n_mels=...)``, computed here rather than read from
``mel_filters.npz``), ``log10`` clamped at 1e-10, a dynamic range of 8 (in log10 units) below the maximum, then
``(x + 4) / 4``. The last STFT frame is dropped, as openai does, so ``n`` samples give ``n // 160`` frames.

The Smart Turn end-of-turn model takes the same features.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

from edgevoice.audio import SAMPLE_RATE

__all__ = ["HOP_LENGTH", "N_FFT", "SAMPLE_RATE", "log_mel_spectrogram", "mel_filters"]

N_FFT = 400
HOP_LENGTH = 160

_F_SP = 200.0 / 3.0  # Slaney mel scale: linear below 1 kHz ...
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = np.log(6.4) / 27.0  # ... logarithmic above


def _hz_to_mel(hz: float) -> float:
    if hz < _MIN_LOG_HZ:
        return hz / _F_SP
    return _MIN_LOG_MEL + float(np.log(hz / _MIN_LOG_HZ)) / _LOGSTEP


def _mel_to_hz(mels: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    linear = _F_SP * mels
    log = _MIN_LOG_HZ * np.exp(_LOGSTEP * (mels - _MIN_LOG_MEL))
    return np.where(mels >= _MIN_LOG_MEL, log, linear)


@lru_cache(maxsize=4)
def _filters(n_mels: int) -> npt.NDArray[np.float32]:
    fft_freqs = np.fft.rfftfreq(N_FFT, d=1.0 / SAMPLE_RATE)
    mel_points = np.linspace(_hz_to_mel(0.0), _hz_to_mel(SAMPLE_RATE / 2), n_mels + 2)
    hz_points = _mel_to_hz(mel_points)
    widths = np.diff(hz_points)
    ramps = hz_points[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper)).astype(np.float32)
    enorm = 2.0 / (hz_points[2:] - hz_points[:-2])  # Slaney normalisation: constant energy per band
    weights *= enorm[:, None]
    weights.setflags(write=False)
    return weights


def mel_filters(n_mels: int = 80) -> npt.NDArray[np.float32]:
    """The ``[n_mels, 201]`` float32 Slaney mel filterbank Whisper uses (80 or 128 bands)."""
    if n_mels <= 0:
        raise ValueError(f"n_mels must be positive, got {n_mels}")
    return _filters(n_mels).copy()


@lru_cache(maxsize=1)
def _hann() -> npt.NDArray[np.float64]:
    n = np.arange(N_FFT)
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * n / N_FFT)  # periodic, as torch.hann_window


def log_mel_spectrogram(audio16k: npt.NDArray[np.floating], n_mels: int = 80) -> npt.NDArray[np.float32]:
    """Whisper log-mel features ``[n_mels, len(audio16k) // 160]`` of mono audio at 16 kHz in [-1, 1]."""
    audio = np.asarray(audio16k, dtype=np.float64)
    if audio.ndim != 1:
        raise ValueError(f"expected mono audio (1-D), got shape {audio.shape}")
    pad = N_FFT // 2
    if audio.size <= pad:
        raise ValueError(f"need more than {pad} samples for a reflect-padded STFT, got {audio.size}")
    padded = np.pad(audio, pad, mode="reflect")
    n_frames = 1 + (padded.size - N_FFT) // HOP_LENGTH
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP_LENGTH][:n_frames]
    spectrum = np.fft.rfft(frames * _hann(), axis=-1)
    power = (spectrum.real**2 + spectrum.imag**2)[:-1].T  # [201, frames - 1]
    mel = _filters(n_mels).astype(np.float64) @ power
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)
