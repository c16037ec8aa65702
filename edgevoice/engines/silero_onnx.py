"""Silero VAD (v5/v6 ONNX) in an ONNX Runtime session of our own; no torch, no silero-vad import."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.engines.onnx_session import open_session
from edgevoice.errors import VadError
from edgevoice.interfaces import FloatAudio

_CONTEXT = {16000: 64, 8000: 32}
_FRAME = {16000: 512, 8000: 256}


class SileroVad:
    """Speech probability per 32 ms frame (512 samples at 16 kHz), carrying the model's recurrent state."""

    def __init__(self, model_path: Path, *, sample_rate: int = SAMPLE_RATE, threads: int = 1) -> None:
        if sample_rate not in _FRAME:
            raise VadError(f"Silero VAD runs at 8000 or 16000 Hz, not {sample_rate}", code="vad_rate")
        self._session = open_session(model_path, threads=threads)
        self.sample_rate = sample_rate
        self.frame_samples = _FRAME[sample_rate]
        self._context_samples = _CONTEXT[sample_rate]
        self._sr = np.array(sample_rate, dtype=np.int64)
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, self._context_samples), dtype=np.float32)

    def probability(self, frame: FloatAudio) -> float:
        if frame.shape != (self.frame_samples,):
            raise VadError(f"frame must hold {self.frame_samples} samples, got shape {frame.shape}", code="vad_frame")
        x = np.concatenate([self._context, frame.astype(np.float32, copy=False)[None, :]], axis=1)
        try:
            out, self._state = self._session.run(None, {"input": x, "state": self._state, "sr": self._sr})
        except Exception as exc:
            raise VadError(f"Silero VAD failed: {exc}") from exc
        self._context = x[:, -self._context_samples :]
        return float(out[0, 0])

    def probabilities(self, audio: FloatAudio) -> np.ndarray:
        """Probabilities of every whole frame of ``audio`` (a trailing partial frame is zero-padded)."""
        n = self.frame_samples
        frames = -(-len(audio) // n)
        padded = np.zeros(frames * n, dtype=np.float32)
        padded[: len(audio)] = audio
        return np.array([self.probability(padded[i * n : (i + 1) * n]) for i in range(frames)], dtype=np.float32)

    def close(self) -> None:
        self._session = None
