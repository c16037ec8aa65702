"""The one audio type that passes between the live loop's parts: samples with their rate and their place in the
stream they came from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.interfaces import FloatAudio


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """``samples`` (mono float32) at ``rate`` Hz, the first being sample ``start`` of its stream (the microphone's
    samples are counted from the loop's start, so a chunk says when it was heard)."""

    samples: FloatAudio
    start: int = 0
    rate: int = SAMPLE_RATE

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def end(self) -> int:
        """The stream index just past the last sample."""
        return self.start + len(self.samples)

    @property
    def start_s(self) -> float:
        return self.start / self.rate

    @property
    def end_s(self) -> float:
        return self.end / self.rate

    @property
    def seconds(self) -> float:
        return len(self.samples) / self.rate

    @staticmethod
    def join(chunks: Sequence[AudioChunk], *, start: int = 0, rate: int = SAMPLE_RATE) -> AudioChunk:
        """The chunks one after the other, starting where the first does (``start`` and ``rate`` for none). Chunks
        need not be contiguous (a turn goes on with the one before it): the result starts at the first one's start."""
        if not chunks:
            return AudioChunk(np.zeros(0, np.float32), start, rate)
        if any(c.rate != chunks[0].rate for c in chunks):
            raise ValueError(f"chunks at different rates: {sorted({c.rate for c in chunks})}")
        samples = chunks[0].samples if len(chunks) == 1 else np.concatenate([c.samples for c in chunks])
        return AudioChunk(samples, chunks[0].start, chunks[0].rate)
