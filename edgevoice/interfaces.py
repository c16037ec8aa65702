"""The narrow interfaces between the pipeline and the engines.

The pipeline only ever talks to these protocols; each engine (ONNX Runtime, whisper.cpp, llama.cpp) lives in one
adapter module under :mod:`edgevoice.engines`. A fake for a unit test is a ten-line class.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from edgevoice.events import ChatMessage, Transcript

FloatAudio = npt.NDArray[np.float32]


@runtime_checkable
class VoiceActivity(Protocol):
    """Frame-wise speech probability (Silero VAD)."""

    sample_rate: int
    frame_samples: int

    def reset(self) -> None:
        """Forget the recurrent state: call at the start of every new stream."""

    def probability(self, frame: FloatAudio) -> float:
        """Speech probability of one frame of exactly ``frame_samples`` samples at ``sample_rate``."""


@runtime_checkable
class EndOfTurn(Protocol):
    """Probability that the speaker has finished the turn (Smart Turn)."""

    sample_rate: int

    def probability_complete(self, turn_audio: FloatAudio) -> float:
        """Probability in [0, 1] that ``turn_audio`` (the turn so far, mono float32) is a complete turn."""


class TextEndOfTurn(Protocol):
    """Probability that the words said so far end the visitor's sentence (:mod:`edgevoice.engines.text_turn`)."""

    def probability_complete(self, text: str) -> float:
        """Probability in [0, 1] that the sentence is over after ``text`` (the turn's transcript so far)."""


@runtime_checkable
class Recognizer(Protocol):
    """Speech to text (whisper.cpp)."""

    sample_rate: int

    def transcribe(self, audio: FloatAudio, *, prompt: str = "") -> Transcript:
        """Transcribe mono float32 audio at ``sample_rate``."""


@runtime_checkable
class LanguageModel(Protocol):
    """A chat model that streams its reply (llama.cpp)."""

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        """Yield the reply as text pieces, as the model produces them."""


@runtime_checkable
class Synthesizer(Protocol):
    """Text to speech (Piper voice in ONNX Runtime)."""

    sample_rate: int

    def synthesize(self, text: str) -> Iterator[FloatAudio]:
        """Yield mono float32 audio at ``sample_rate``, one chunk per sentence or clause, as soon as each is ready."""


@dataclass
class Engines:
    """The loaded engines, each behind its interface. ``close()`` releases them all."""

    vad: VoiceActivity
    recognizer: Recognizer
    llm: LanguageModel
    synthesizer: Synthesizer
    extra: list[object] = field(default_factory=list)

    def close(self) -> None:
        for engine in (self.vad, self.recognizer, self.llm, self.synthesizer, *self.extra):
            close = getattr(engine, "close", None)
            if close is not None:
                close()
