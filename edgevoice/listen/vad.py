"""Finding speech in recorded audio from per-frame speech probabilities. Pure logic: no engine, no clock."""

from __future__ import annotations

from collections.abc import Sequence

from edgevoice.events import Segment


def speech_segments(
    probabilities: Sequence[float],
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
