"""Reading, converting and writing audio files. Mono float32 in [-1, 1] is the in-memory format everywhere."""

from __future__ import annotations

import logging
import os
import struct
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

_HEADER_BYTES = 1 << 16
"""How much of a WAV is read to check its header (the chunks before ``data``: ``fmt``, ``LIST``, ``bext``...)."""
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
    check_wav_header(path)
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


def check_wav_header(path: Path) -> None:
    """Refuse a file that says it is a WAV (``RIFF``, ``WAVE``) but whose header cannot describe audio: no or a cut
    ``fmt`` chunk, 0 channels, a rate of 0 Hz, 0 bits a sample, no ``data`` chunk. libsndfile refuses these too, but
    with a message that can read "No such file or directory". Other files are left to libsndfile."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEADER_BYTES)
            size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise AudioInputError(f"{path}: cannot read it ({exc.strerror})", code="audio_unreadable") from exc
    if not head.startswith(b"RIFF") or head[8:12] != b"WAVE":
        return
    problem = _wav_header_problem(head, size)
    if problem:
        raise AudioInputError(f"{path}: a bad WAV header: {problem}", code="audio_bad_header")


def _wav_header_problem(head: bytes, size: int) -> str:
    """What is wrong with a RIFF/WAVE header's first bytes (``head``) of a ``size``-byte file; "" when nothing."""
    offset, fmt = 12, False
    while offset + 8 <= len(head):
        chunk, length = head[offset : offset + 4], int.from_bytes(head[offset + 4 : offset + 8], "little")
        body = offset + 8
        if chunk == b"fmt ":
            if length < 16 or body + 16 > len(head):
                return f"its fmt chunk is cut short ({max(0, min(length, len(head) - body))} of 16 bytes)"
            _format, channels, rate, _byte_rate, _align, bits = struct.unpack_from("<HHIIHH", head, body)
            if channels == 0:
                return "it says 0 channels"
            if rate == 0:
                return "it says a sample rate of 0 Hz"
            if bits == 0:
                return "it says 0 bits a sample"
            fmt = True
        elif chunk == b"data":
            return "" if fmt else "no fmt chunk before its data"
        offset = body + length + (length & 1)
    if len(head) < size:
        return ""  # chunks beyond what was read: libsndfile judges the rest
    return f"no data chunk in its {size} bytes" if fmt else f"no fmt chunk in its {size} bytes"


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
