"""The chain on recorded speech: VAD → ASR → LLM (streamed) → TTS, every stage timed.

Used by ``edgevoice converse``; the live loop reuses the same engines and text handling.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from edgevoice.chunker import SentenceChunker
from edgevoice.clock import Clock, MonotonicClock, StageTimer
from edgevoice.config import Config
from edgevoice.events import ChatMessage, ConverseResult, Segment, StageTime
from edgevoice.interfaces import FloatAudio, LanguageModel, Recognizer, Synthesizer
from edgevoice.kiosk.prompt import conversation, prefix_messages
from edgevoice.speech_text import normalize_for_speech, speakable
from edgevoice.vad import speech_segments

log = logging.getLogger(__name__)

ASR_RATE = 16000


@dataclass
class Engines:
    """The loaded engines, each behind its interface. ``close()`` releases them all."""

    vad: object  # SileroVad-like: reset(), probabilities(audio) -> array, frame_samples, sample_rate
    recognizer: Recognizer
    llm: LanguageModel
    synthesizer: Synthesizer
    extra: list[object] = field(default_factory=list)

    def close(self) -> None:
        for engine in (self.vad, self.recognizer, self.llm, self.synthesizer, *self.extra):
            close = getattr(engine, "close", None)
            if close is not None:
                close()


class Assistant:
    """One kiosk assistant: a cached prompt prefix, a conversation history and the engines."""

    def __init__(self, config: Config, engines: Engines, *, clock: Clock | None = None) -> None:
        self.config = config
        self.engines = engines
        self.clock = clock or MonotonicClock()
        self.prefix = prefix_messages(
            config.kiosk.persona, config.knowledge_text(), max_sentences=config.kiosk.max_sentences
        )
        self.history: list[ChatMessage] = []

    def warm_up(self) -> None:
        """Evaluate the cached prompt prefix and run each engine once, so the first visitor waits for nothing."""
        prefill = getattr(self.engines.llm, "prefill", None)
        if prefill is not None:
            prefill(self.prefix)
        self.engines.recognizer.transcribe(np.zeros(ASR_RATE, dtype=np.float32))
        for _ in self.engines.synthesizer.synthesize("Hello."):
            pass

    # -- stages -------------------------------------------------------------------------------------------------
    def find_speech(self, audio: FloatAudio) -> list[Segment]:
        vad = self.engines.vad
        vad.reset()  # type: ignore[attr-defined]
        probs = vad.probabilities(audio)  # type: ignore[attr-defined]
        c = self.config.vad
        return speech_segments(
            probs,
            frame_samples=vad.frame_samples,  # type: ignore[attr-defined]
            sample_rate=ASR_RATE,
            threshold=c.threshold,
            min_speech_ms=c.min_speech_ms,
            min_silence_ms=c.min_silence_ms,
            pad_ms=c.pad_ms,
            total_samples=len(audio),
        )

    def reply_sentences(self, user_text: str, timer: StageTimer) -> Iterator[str]:
        """Stream the language model's reply, yielding each speakable sentence as soon as it is complete.

        At most ``kiosk.max_sentences`` sentences are spoken; generation stops there, or at the first code block.
        The history records what was spoken, not what was generated.
        """
        messages = conversation(self.prefix, self.history, user_text)
        chunker = SentenceChunker()
        spoken: list[str] = []
        limit = self.config.kiosk.max_sentences
        start = timer.now()
        first = True
        stream = self.engines.llm.stream_reply(messages, max_tokens=self.config.llm.max_tokens)
        try:
            for piece in stream:
                if first:
                    timer.record("llm_first_token", timer.now() - start)
                    first = False
                for sentence in chunker.feed(piece):
                    text = speakable(sentence, max_sentences=1)
                    if text and len(spoken) < limit:
                        spoken.append(text)
                        timer.record("llm", timer.now() - start)
                        yield text
                        start = timer.now()
                if len(spoken) >= limit or "```" in chunker.pending:
                    break
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if len(spoken) < limit:
            tail = speakable(chunker.flush(), max_sentences=limit - len(spoken))
            if tail:
                spoken.append(tail)
                timer.record("llm", timer.now() - start)
                yield tail
        self.history += [ChatMessage("user", user_text), ChatMessage("assistant", " ".join(spoken))]

    def converse(self, audio: FloatAudio) -> ConverseResult:
        """Answer one recorded utterance (16 kHz mono float32)."""
        timer = StageTimer(self.clock)
        t = timer.now()
        segments = self.find_speech(audio)
        timer.since("vad", t)
        rate = self.engines.synthesizer.sample_rate
        if not segments:
            return self._result(timer, "", "", [], rate, segments, no_speech=True)
        start, end = segments[0].start, segments[-1].end
        end = min(end, start + int(self.config.asr.max_seconds * ASR_RATE))
        t = timer.now()
        transcript = self.engines.recognizer.transcribe(audio[start:end], prompt=self.config.asr.initial_prompt)
        timer.since("asr", t)
        if transcript.is_empty:
            log.info("no speech recognised (%s)", transcript.filtered or "empty transcript")
            return self._result(timer, "", "", [], rate, segments, no_speech=True)
        answer_start = timer.now()
        chunks: list[FloatAudio] = []
        sentences: list[str] = []
        for sentence in self.reply_sentences(transcript.text, timer):
            sentences.append(sentence)
            t = timer.now()
            for chunk in self.engines.synthesizer.synthesize(normalize_for_speech(sentence)):
                if not chunks:
                    timer.record("first_audio", timer.now() - answer_start)
                chunks.append(chunk)
            timer.since("tts", t)
        return self._result(timer, transcript.text, " ".join(sentences), chunks, rate, segments)

    def _result(
        self,
        timer: StageTimer,
        transcript: str,
        reply: str,
        chunks: list[FloatAudio],
        rate: int,
        segments: list[Segment],
        *,
        no_speech: bool = False,
    ) -> ConverseResult:
        timer.record("total", timer.now() - timer.t0)
        audio = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
        stages = tuple(StageTime(name, seconds * 1000.0) for name, seconds in timer.times.items())
        return ConverseResult(
            transcript=transcript,
            reply=reply,
            audio=audio,
            sample_rate=rate,
            stages=stages,
            speech=tuple(segments),
            no_speech=no_speech,
        )
