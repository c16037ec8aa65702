"""Finding speech in recorded audio: segments from per-frame speech probabilities (pure logic, no clock), and the
one run of a voice activity detector over a recording that the chain on recorded speech and the benchmark share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy.typing as npt

from edgevoice.events import Segment
from edgevoice.interfaces import FloatAudio

__all__ = ["RecordingVad", "SegmentSettings", "find_speech", "speech_segments", "utterance_span"]


class SegmentSettings(Protocol):
    """How speech is cut into segments (``[vad]``, :class:`edgevoice.config.VadConfig`)."""

    @property
    def threshold(self) -> float: ...
    @property
    def min_speech_ms(self) -> int: ...
    @property
    def min_silence_ms(self) -> int: ...
    @property
    def pad_ms(self) -> int: ...


class RecordingVad(Protocol):
    """A voice activity detector that scores a whole recording (the Silero adapter)."""

    frame_samples: int

    def reset(self) -> None: ...

    def probabilities(self, audio: FloatAudio) -> npt.NDArray[Any]:
        """Speech probability of each whole frame of ``audio``."""
        ...


def speech_segments(
    probabilities: Sequence[float] | npt.NDArray[Any],
    *,
    frame_samples: int,
    sample_rate: int,
    threshold: float = 0.5,
    min_speech_ms: int = 200,
    min_silence_ms: int = 400,
    pad_ms: int = 150,
    total_samples: int | None = None,
) -> list[Segment]:
    """Speech segments with hysteresis (on at ``threshold``, off below ``threshold - 0.15``).

    Segments shorter than ``min_speech_ms`` are dropped; gaps shorter than ``min_silence_ms`` are bridged; each
    segment is padded by ``pad_ms`` on both sides, clamped to the audio.
    """
    off = max(threshold - 0.15, 0.01)
    frame_ms = 1000.0 * frame_samples / sample_rate
    min_speech = max(1, round(min_speech_ms / frame_ms))
    min_silence = max(1, round(min_silence_ms / frame_ms))
    spans: list[tuple[int, int]] = []
    start: int | None = None
    last_speech = -1
    for i, p in enumerate(probabilities):
        if start is None:
            if p >= threshold:
                start, last_speech = i, i
        elif p >= off:
            last_speech = i
        elif i - last_speech >= min_silence:
            spans.append((start, last_speech + 1))
            start = None
    if start is not None:
        spans.append((start, last_speech + 1))
    total = total_samples if total_samples is not None else len(probabilities) * frame_samples
    pad = int(pad_ms * sample_rate / 1000)
    return [
        Segment(max(0, a * frame_samples - pad), min(total, b * frame_samples + pad), sample_rate)
        for a, b in spans
        if b - a >= min_speech
    ]


def find_speech(vad: RecordingVad, audio: FloatAudio, config: SegmentSettings, *, sample_rate: int) -> list[Segment]:
    """The speech segments of a recording at ``sample_rate`` (:func:`speech_segments` with ``config``'s threshold,
    durations and padding), ``vad`` reset first so that no earlier audio weighs on it."""
    vad.reset()
    return speech_segments(
        vad.probabilities(audio),
        frame_samples=vad.frame_samples,
        sample_rate=sample_rate,
        threshold=config.threshold,
        min_speech_ms=config.min_speech_ms,
        min_silence_ms=config.min_silence_ms,
        pad_ms=config.pad_ms,
        total_samples=len(audio),
    )


def utterance_span(segments: Sequence[Segment], max_samples: int) -> tuple[int, int] | None:
    """The samples that hold a recording's one utterance: from the first segment's start to the last's end, cut
    to ``max_samples``; None without speech."""
    if not segments:
        return None
    start = segments[0].start
    return start, min(segments[-1].end, start + max_samples)
