"""How much speech a turn's audio holds, from its energy: the evidence that decides whether a transcript such as
"Thank you." was said or made up by Whisper on silence or noise.

A 20 ms frame counts as speech when it is at speaking level (above an absolute floor) and stands out of the turn's
own background (its quietest frames) by a margin: steady noise and hum never do, however loud, and a click lasts a
frame or two. A real "thank you" holds a few hundred milliseconds of such frames, clean or in noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgevoice.audio import SAMPLE_RATE

__all__ = ["SPEECH_MS", "SpeechEvidence", "speech_evidence"]

FRAME_MS = 20
SPEAKING_LEVEL_DBFS = -55.0
"""A frame quieter than this (RMS, dB relative to full scale) is no speech, whatever its background."""
ABOVE_BACKGROUND_DB = 6.0
"""... and one less than this above the turn's background (its 10th-percentile frame) neither."""
BACKGROUND_PERCENTILE = 10.0
SPEECH_MS = 200
"""A turn with at least this much speech (frames that pass both) was spoken: its words are kept even when they are
ones Whisper also makes up ("Thank you.")."""


@dataclass(frozen=True, slots=True)
class SpeechEvidence:
    """What the energy of a turn's audio says about speech in it."""

    speech_ms: int
    """Time in frames at speaking level and above the turn's background."""
    level_dbfs: float
    """The loudest frame's RMS in dB relative to full scale (-100 for silence)."""

    @property
    def spoken(self) -> bool:
        """Enough speech for words to have been said (:data:`SPEECH_MS`)."""
        return self.speech_ms >= SPEECH_MS


def speech_evidence(audio: npt.NDArray[np.float32], sample_rate: int = SAMPLE_RATE) -> SpeechEvidence:
    """The speech evidence of mono float audio (see the module's doc)."""
    frame = sample_rate * FRAME_MS // 1000
    n = audio.size // frame
    if n == 0:
        return SpeechEvidence(0, -100.0)
    frames = np.asarray(audio[: n * frame], dtype=np.float64).reshape(n, frame)
    level = 10.0 * np.log10(np.maximum(np.mean(frames**2, axis=1), 1e-10))  # floor: -100 dBFS
    background = float(np.percentile(level, BACKGROUND_PERCENTILE))
    speech = (level >= SPEAKING_LEVEL_DBFS) & (level >= background + ABOVE_BACKGROUND_DB)
    return SpeechEvidence(int(speech.sum()) * FRAME_MS, round(float(level.max()), 1))
