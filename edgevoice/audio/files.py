"""Reading, converting and writing audio files. Mono float32 in [-1, 1] is the in-memory format everywhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import soundfile
import soxr

from edgevoice.errors import AudioInputError

FloatAudio = npt.NDArray[np.float32]


def read_audio(path: Path | str, *, rate: int) -> FloatAudio:
    """Read any WAV (or other libsndfile format), mix to mono, resample to ``rate`` and sanitize.

    NaN and infinite samples become silence and the result is clipped to [-1, 1], so a damaged file cannot poison
    the models downstream.
    """
    path = Path(path)
    if not path.is_file():
        raise AudioInputError(f"{path}: no such file", code="audio_missing")
    try:
        data, file_rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise AudioInputError(f"{path}: not a readable audio file ({exc})", code="audio_unreadable") from exc
    return to_model_rate(data.mean(axis=1), file_rate, rate)


def to_model_rate(audio: npt.NDArray[np.floating], from_rate: int, to_rate: int) -> FloatAudio:
    """Mono float audio resampled with soxr (high quality), NaN/inf removed, clipped to [-1, 1]."""
    mono = np.nan_to_num(np.asarray(audio, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    if from_rate != to_rate and len(mono):
        mono = soxr.resample(mono, from_rate, to_rate, quality="HQ").astype(np.float32, copy=False)
    return np.clip(mono, -1.0, 1.0)


def write_wav(path: Path | str, audio: FloatAudio, rate: int) -> None:
    """Write mono 16-bit PCM WAV."""
    soundfile.write(str(path), np.clip(audio, -1.0, 1.0), rate, subtype="PCM_16", format="WAV")
