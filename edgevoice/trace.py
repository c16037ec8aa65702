"""One turn's latency, stage by stage: the marks of a turn on one clock, and what is derived from them. Pure.

Every mark is a time on the :func:`time.perf_counter` scale (the scale of :class:`edgevoice.clock.MonotonicClock`
and of the audio streams' device times, see :mod:`edgevoice.audio.streams`):

====================  ===========================================================================================
``speech_end``        the true end of the visitor's speech: the capture (ADC) time of the last voiced sample, found
                      in the turn's audio by its level (:func:`speech_end_index`), not the VAD's decision
``endpoint_audio``    the capture time of the last sample the endpointer had heard when it committed the turn
``endpoint``          when the endpointer committed the turn (the listener's clock)
``transcript``        the final transcript is ready
``first_token``       the language model's first token
``first_clause``      the first clause handed to the synthesizer
``first_audio``       the synthesizer's first audio
``first_queued``      that audio queued in the playback ring
``first_handed``      the reply's first sample handed to the output device (the output callback that took it)
``first_played``      the time it is played (PortAudio's output time: DAC time)
====================  ===========================================================================================

The stages are the gaps between consecutive marks (:data:`STAGES`), so they add up to the voice-to-voice latency
(end of speech → first sample played) exactly, and each millisecond belongs to one stage.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from edgevoice.interfaces import FloatAudio

MARKS = (
    "speech_end",
    "endpoint_audio",
    "endpoint",
    "transcript",
    "first_token",
    "first_clause",
    "first_audio",
    "first_queued",
    "first_handed",
    "first_played",
)

STAGES: tuple[tuple[str, str, str], ...] = (
    # (stage, from mark, to mark)
    ("endpointing", "speech_end", "endpoint_audio"),  # silence heard until the endpointer commits (VAD lag too)
    ("capture", "endpoint_audio", "endpoint"),  # device input latency, echo cancellation, listener lag
    ("recognition", "endpoint", "transcript"),
    ("first_token", "transcript", "first_token"),
    ("first_clause", "first_token", "first_clause"),
    ("synthesis", "first_clause", "first_audio"),
    ("queue", "first_audio", "first_handed"),  # playback ring until the output callback takes the first sample
    ("output", "first_handed", "first_played"),  # the output device's buffer (PortAudio output latency)
)
STAGE_NAMES = tuple(name for name, _, _ in STAGES)
TOTAL = "voice_to_voice"


@dataclass(frozen=True)
class TurnTimeline:
    """The marks of one turn (see the module doc); None where the turn never got there (no speech, cancelled)."""

    turn_id: int
    speech_end: float | None = None
    endpoint_audio: float | None = None
    endpoint: float | None = None
    transcript: float | None = None
    first_token: float | None = None
    first_clause: float | None = None
    first_audio: float | None = None
    first_queued: float | None = None
    first_handed: float | None = None
    first_played: float | None = None
    clauses_played: tuple[float | None, ...] = ()
    """Each clause's first sample played (DAC time), in order: the first is ``first_played``."""

    def stages(self) -> dict[str, float]:
        """Seconds per stage, for the stages whose both marks are known."""
        out: dict[str, float] = {}
        for name, start, end in STAGES:
            a, b = getattr(self, start), getattr(self, end)
            if a is not None and b is not None:
                out[name] = b - a
        return out

    def voice_to_voice(self) -> float | None:
        """End of the visitor's speech → the reply's first sample played (seconds)."""
        if self.speech_end is None or self.first_played is None:
            return None
        return self.first_played - self.speech_end

    def relative_ms(self) -> dict[str, float | None]:
        """Every mark in milliseconds after ``speech_end`` (the waterfall's rows)."""
        origin = self.speech_end
        marks = asdict(self)
        return {
            mark: None if origin is None or marks[mark] is None else round((marks[mark] - origin) * 1000, 1)
            for mark in MARKS
        }

    def record(self) -> dict[str, object]:
        """The structured part of a turn's log record: stage durations, voice-to-voice, marks (all ms)."""
        total = self.voice_to_voice()
        return {
            "stages_ms": {k: round(v * 1000, 1) for k, v in self.stages().items()},
            "voice_to_voice_ms": None if total is None else round(total * 1000, 1),
            "marks_ms": self.relative_ms(),
        }


def speech_end_index(audio: FloatAudio, rate: int, *, hop_ms: float = 10.0, below_peak_db: float = 35.0) -> int | None:
    """The sample index just after the last voiced 10 ms frame of ``audio``, found by level: the last frame within
    ``below_peak_db`` of the loudest frames (their 95th percentile) and clearly above the floor (its 10th percentile
    + 10 dB). None when nothing stands out (silence, steady noise)."""
    hop = max(1, round(rate * hop_ms / 1000))
    n = len(audio) // hop
    if n == 0:
        return None
    frames = np.asarray(audio[: n * hop], dtype=np.float64).reshape(n, hop)
    levels = 10 * np.log10(np.mean(frames * frames, axis=1) + 1e-12)
    peak, floor = float(np.percentile(levels, 95)), float(np.percentile(levels, 10))
    if peak - floor < 15.0:
        return None
    threshold = max(peak - below_peak_db, floor + 10.0)
    voiced = np.flatnonzero(levels > threshold)
    return int(voiced[-1] + 1) * hop if len(voiced) else None


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (linear interpolation), None for no values."""
    return float(np.percentile(values, q)) if values else None
