"""Small fake engines for fast tests of the pipeline logic (the real engines are tested on the real models)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from edgevoice.clock import ManualClock
from edgevoice.events import ChatMessage, Transcript


class FakeVad:
    """Speech wherever the signal is louder than a threshold."""

    sample_rate = 16000
    frame_samples = 512

    def reset(self) -> None:
        pass

    def probabilities(self, audio: np.ndarray) -> np.ndarray:
        n = len(audio) // self.frame_samples
        frames = audio[: n * self.frame_samples].reshape(n, self.frame_samples)
        return (np.abs(frames).max(axis=1) > 0.05).astype(np.float32)


class FakeRecognizer:
    sample_rate = 16000

    def __init__(self, text: str, clock: ManualClock, seconds: float = 0.2) -> None:
        self.text, self.clock, self.seconds = text, clock, seconds
        self.heard: list[int] = []

    def transcribe(self, audio: np.ndarray, *, prompt: str = "") -> Transcript:
        self.heard.append(len(audio))
        self.clock.advance(self.seconds)
        return Transcript(self.text)


class FakeLlm:
    def __init__(self, reply: str, clock: ManualClock, per_token: float = 0.05) -> None:
        self.reply, self.clock, self.per_token = reply, clock, per_token
        self.prompts: list[list[ChatMessage]] = []
        self.tokens_given = 0

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        self.prompts.append(list(messages))
        for word in self.reply.split(" ")[:max_tokens]:
            self.clock.advance(self.per_token)
            self.tokens_given += 1
            yield word + " "


class FakeSynth:
    sample_rate = 22050

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.texts: list[str] = []

    def synthesize(self, text: str) -> Iterator[np.ndarray]:
        self.texts.append(text)
        self.clock.advance(0.03)
        yield np.full(len(text) * 100, 0.1, dtype=np.float32)


def concept_vectors(concepts: dict[str, tuple[str, ...]], texts: Sequence[str]) -> np.ndarray:
    """A fake sentence encoder's vectors: per text, the normalised sum of the ``concepts`` whose words it contains (a
    last axis when none): cosine 1 between texts about the same things, 0 between texts about different things."""
    out = np.zeros((len(texts), len(concepts) + 1), dtype=np.float32)
    for row, text in enumerate(texts):
        for axis, words in enumerate(concepts.values()):
            out[row, axis] = sum(word in text.lower() for word in words)
        out[row, -1] = 0.0 if out[row].any() else 1.0
    return out / np.linalg.norm(out, axis=1, keepdims=True)
