"""Smart Turn v3.x end-of-turn model in our own ONNX Runtime session; features computed by edgevoice.

The model takes Whisper-style 80-bin log-mel features of the last 8 s of the turn (left-padded with silence,
waveform normalized to zero mean and unit variance first) and returns the probability that the turn is complete.
The model file is taken out of the pipecat-ai wheel at install time; pipecat is not a run-time dependency.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.engines.mel import log_mel_spectrogram
from edgevoice.engines.onnx_session import open_session
from edgevoice.errors import TurnError
from edgevoice.interfaces import FloatAudio

WINDOW_SECONDS = 8
FRAMES = WINDOW_SECONDS * SAMPLE_RATE // 160  # 800 mel frames


def smart_turn_features(turn_audio: FloatAudio) -> np.ndarray:
    """The model input ``[1, 80, 800]`` for the turn so far (16 kHz mono)."""
    n = WINDOW_SECONDS * SAMPLE_RATE
    x = np.asarray(turn_audio, dtype=np.float32)[-n:]
    if len(x) < n:
        x = np.concatenate([np.zeros(n - len(x), dtype=np.float32), x])
    x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)
    mel = log_mel_spectrogram(x, n_mels=80)[:, :FRAMES]
    return mel[None, :, :].astype(np.float32)


class SmartTurn:
    sample_rate = SAMPLE_RATE

    def __init__(self, model_path: Path, *, threads: int = 1) -> None:
        self._session = open_session(model_path, threads=threads)
        self._input = self._session.get_inputs()[0].name

    def probability_complete(self, turn_audio: FloatAudio) -> float:
        features = smart_turn_features(turn_audio)
        try:
            (logits,) = self._session.run(None, {self._input: features})
        except Exception as exc:
            raise TurnError(f"Smart Turn failed: {exc}") from exc
        return float(np.asarray(logits).reshape(-1)[0])

    def close(self) -> None:
        self._session = None
