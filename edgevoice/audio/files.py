"""Reading, converting and writing audio files. Mono float32 in [-1, 1] is the in-memory format everywhere."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import numpy.typing as npt
import soundfile
import soxr

from edgevoice import ownership
from edgevoice.errors import AudioInputError

FloatAudio = npt.NDArray[np.float32]
log = logging.getLogger(__name__)

MIN_FILE_RATE = 1000
MAX_FILE_RATE = 384_000
"""Sample rates ``read_audio`` accepts: below or above them the header is wrong (resampling 1 Hz to 16 kHz would
multiply the file sixteen-thousand-fold)."""

MAX_FILE_SECONDS = 300.0
"""How much of a file ``read_audio`` decodes by default: a recorded question with silence around it fits easily."""

_BLOCK_SAMPLES = 1 << 20
"""Samples (all channels together) decoded at a time: memory stays bounded whatever the file holds."""


def read_audio(path: Path | str, *, rate: int, max_seconds: float = MAX_FILE_SECONDS) -> FloatAudio:
    """Read any WAV (or other libsndfile format), mix to mono, resample to ``rate`` and sanitize.

    Only the first ``max_seconds`` are decoded, block by block (a longer file is cut, with a warning), and a header
    whose sample rate is outside [MIN_FILE_RATE, MAX_FILE_RATE] is refused, so no file can make the memory grow
    past ``max_seconds`` of audio. NaN and infinite samples become silence and the result is clipped to [-1, 1], so
    a damaged file cannot poison the models downstream.
    """
    path = Path(path)
    if not path.is_file():
        raise AudioInputError(f"{path}: no such file", code="audio_missing")
    try:
        with soundfile.SoundFile(str(path)) as fh:
            file_rate, channels = int(fh.samplerate), max(1, int(fh.channels))
            if not MIN_FILE_RATE <= file_rate <= MAX_FILE_RATE:
                raise AudioInputError(
                    f"{path}: its header says {file_rate} Hz; audio files must be {MIN_FILE_RATE}-{MAX_FILE_RATE} Hz",
                    code="audio_rate",
                )
            limit = int(max_seconds * file_rate)
            block = max(1, _BLOCK_SAMPLES // channels)
            resampler = soxr.ResampleStream(file_rate, rate, 1, dtype="float32", quality="HQ")
            pieces: list[FloatAudio] = []
            taken = 0
            while taken < limit:
                data = fh.read(min(block, limit - taken), dtype="float32", always_2d=True)
                if not len(data):
                    break
                taken += len(data)
                pieces.append(_resample_block(resampler, data, file_rate, rate, last=False))
            pieces.append(_resample_block(resampler, np.zeros((0, channels), np.float32), file_rate, rate, last=True))
            cut = fh.frames > taken and taken >= limit
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        raise AudioInputError(f"{path}: not a readable audio file ({exc})", code="audio_unreadable") from exc
    if cut:
        log.warning("%s: only its first %.0f s are used (the limit for an audio file)", path, max_seconds)
    audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    return np.clip(audio, -1.0, 1.0)


def _resample_block(
    resampler: soxr.ResampleStream, data: npt.NDArray[np.float32], from_rate: int, to_rate: int, *, last: bool
) -> FloatAudio:
    mono = np.nan_to_num(data.mean(axis=1), nan=0.0, posinf=0.0, neginf=0.0).astype(np.float32, copy=False)
    if from_rate == to_rate:
        return mono
    return np.asarray(resampler.resample_chunk(mono, last=last), dtype=np.float32)


def to_model_rate(audio: npt.NDArray[np.floating], from_rate: int, to_rate: int) -> FloatAudio:
    """Mono float audio resampled with soxr (high quality), NaN/inf removed, clipped to [-1, 1]."""
    mono = np.nan_to_num(np.asarray(audio, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    if from_rate != to_rate and len(mono):
        mono = soxr.resample(mono, from_rate, to_rate, quality="HQ").astype(np.float32, copy=False)
    return np.clip(mono, -1.0, 1.0)


def check_output_path(path: Path | str, *, key: str = "--out") -> None:
    """Refuse, before any work is done, a path a WAV cannot be written to or must not replace
    (:func:`edgevoice.ownership.check_output_path`)."""
    ownership.check_output_path(path, key=key, kind=ownership.WAV)


def write_wav(path: Path | str, audio: FloatAudio, rate: int) -> None:
    """Write mono 16-bit PCM WAV."""
    soundfile.write(str(path), np.clip(audio, -1.0, 1.0), rate, subtype="PCM_16", format="WAV")
