"""Typed, frozen values passed between stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

import numpy as np
import numpy.typing as npt

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str
    unsure: bool = False
    """A visitor's question the recognizer was unsure it heard right (its confidence under ``[asr]
    unsure_below``): the gate asks for it again rather than refuse it. Never sent to a model."""


@dataclass(frozen=True, slots=True)
class Answered:
    """Which language model answered a reply: "remote" (a server, :mod:`edgevoice.reply.hedge`) or "local", and what
    kept the remote from answering (an error code such as ``llm_remote_unreachable``, or ``llm_remote_late``); for
    a remote answer, the error that cut it short, if one did."""

    source: Literal["remote", "local"]
    remote_error: str | None = None


def answered_record(answered: Answered | None) -> dict[str, str | None]:
    """The turn records' ``llm`` ("remote", "local" or None: no model asked) and ``llm_remote_error``."""
    if answered is None:
        return {"llm": None, "llm_remote_error": None}
    return {"llm": answered.source, "llm_remote_error": answered.remote_error}


class Cut(StrEnum):
    """Which bound on a model's reply ended it before the model did (:mod:`edgevoice.reply.bounds`); the turn record's
    ``cut``."""

    CHARS = "chars"
    CLAUSES = "clauses"
    SECONDS = "seconds"
    TOKENS = "tokens"


CHARS_PER_TOKEN = 8
"""A reply of ``[llm] max_tokens`` tokens may hold at most this many characters a token: English text averages
about four, so the bound never shortens a reply the model's own token limit allows, but stops a server that ignores
``max_tokens`` or sends its reply in one giant piece."""


def reply_chars(max_tokens: int) -> int:
    """The most characters of one reply read from a model asked for at most ``max_tokens`` tokens."""
    return max_tokens * CHARS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class Segment:
    """A span of speech, in samples at ``sample_rate`` from the start of the stream."""

    start: int
    end: int
    sample_rate: int

    @property
    def start_s(self) -> float:
        return self.start / self.sample_rate

    @property
    def end_s(self) -> float:
        return self.end / self.sample_rate


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    no_speech_prob: float = 0.0
    filtered: str | None = None
    """Why the raw text was discarded (a known phantom phrase, high no-speech probability), or None."""
    confidence: float | None = None
    """How sure the recognizer is of the words: the geometric mean of its text tokens' probabilities (0 to 1);
    None when it does not say (a typed question, a fake)."""

    @property
    def is_empty(self) -> bool:
        return not self.text.strip()


@dataclass(frozen=True, slots=True)
class StageTime:
    stage: str
    ms: float


@dataclass(frozen=True, slots=True)
class ConverseResult:
    """What ``edgevoice converse`` produced for one recorded utterance."""

    transcript: str
    reply: str
    audio: npt.NDArray[np.float32] = field(repr=False)
    sample_rate: int
    stages: tuple[StageTime, ...]
    speech: tuple[Segment, ...] = ()
    no_speech: bool = False
    answered_by: Answered | None = None
    """Which language model answered (None: none was asked)."""

    def stage_ms(self) -> dict[str, float]:
        return {s.stage: round(s.ms, 1) for s in self.stages}

    def to_json(self) -> dict[str, object]:
        return {
            "transcript": self.transcript,
            "reply": self.reply,
            "no_speech": self.no_speech,
            "speech": [[round(s.start_s, 3), round(s.end_s, 3)] for s in self.speech],
            "reply_seconds": round(len(self.audio) / self.sample_rate, 3) if self.sample_rate else 0.0,
            "stages": self.stage_ms(),
        } | answered_record(self.answered_by)
