"""The chain on recorded speech: VAD → ASR → LLM (streamed) → TTS, every stage timed.

Used by ``edgevoice converse``; the live loop reuses the same engines and text handling.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.clock import Clock, MonotonicClock
from edgevoice.config import Config
from edgevoice.errors import EdgeVoiceError
from edgevoice.events import ChatMessage, ConverseResult, StageTime
from edgevoice.interfaces import Engines, FloatAudio
from edgevoice.kiosk.background_compile import CompileProgress
from edgevoice.kiosk.grounded_model import GroundedModel
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.listen.vad import find_speech, utterance_span
from edgevoice.memory import resettle
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace

log = logging.getLogger(__name__)


class KnowledgeCompiler(Protocol):
    """What compiles the kiosk's knowledge in the background (:class:`edgevoice.knowledge_compile.KnowledgeCompile`)."""

    progress: CompileProgress

    def start(self, kiosk: Kiosk) -> None: ...

    def close(self, timeout: float = ...) -> bool: ...


class Assistant:
    """One kiosk assistant on recorded speech: the engines, the cached prompt prefix and a conversation history."""

    def __init__(
        self,
        config: Config,
        engines: Engines,
        *,
        kiosk: Kiosk,
        clock: Clock | None = None,
        live: bool = False,
        idle: Callable[[], bool] | None = None,
    ) -> None:
        """``kiosk``: the venue's knowledge, cached prefix, grounding gate and recognizer vocabulary
        (:func:`edgevoice.app.build_assistant` builds it from the config with ``idle``). ``live``: the replies are
        played as they are made (synthesis then runs beside the language model).
        ``idle``: when a large knowledge may be embedded in the background (no turn in progress; None: at once);
        :meth:`close` stops it."""
        self.config = config
        self.engines = engines
        self.clock = clock or MonotonicClock()
        self._idle = idle
        self.kiosk = kiosk
        self.prefix = self.kiosk.prefix
        count = getattr(engines.llm, "count_tokens", None)
        self.responder = Responder(
            engines.recognizer,
            self.kiosk.grounded(engines.llm),
            engines.synthesizer,
            self.prefix,
            max_tokens=config.llm.max_tokens,
            max_sentences=config.kiosk.max_sentences,
            max_clauses=config.kiosk.max_clauses,
            max_reply_s=config.kiosk.max_reply_s,
            clock=self.clock,
            count_tokens=count,
            asr_prompt=self.kiosk.asr_prompt(config.asr.initial_prompt),
            synthesis_thread=live,
            conversation_timeout_s=config.kiosk.conversation_timeout_s,
            unsure_below=config.asr.unsure_below,
        )
        self._turns = itertools.count(1)
        self.compiler: KnowledgeCompiler | None = None
        """Compiles each new knowledge in the background and hands its questions to :meth:`use_compiled`; None:
        the knowledge is matched as written (:meth:`compile_knowledge` sets it)."""
        self._kiosk_lock = threading.Lock()
        self.prefix_warmed = ""
        """How :meth:`warm_up` found the prompt prefix (:meth:`warm_prefix`); empty before it ran."""

    @property
    def history(self) -> list[ChatMessage]:
        return self.responder.history

    def reload_knowledge(self, timeout: float = 10.0) -> Kiosk:
        """Build the kiosk again from the configured knowledge (its file read anew) and put it in place between two
        replies: a reply in progress finishes with the knowledge it began with, the next one has the new. The
        sentence encoder and phonemizer already loaded are reused, and entries already embedded come from the
        embedding cache. Invalid knowledge raises :class:`~edgevoice.errors.ConfigError` (naming the file and line)
        and the kiosk stays as it was; so it does when no reply ended within ``timeout`` seconds (an error coded
        ``kiosk_busy``). The previous kiosk's background embedding, if any, is stopped (what it embedded is kept)."""
        with self._kiosk_lock:
            old = self.kiosk
            kiosk = Kiosk.from_config(self.config, embedder=old.embedder, phonemize=old.phonemize, idle=self._idle)
            self._swap_in(kiosk, timeout)
        log.info("knowledge reloaded: %d entries", len(kiosk.entries))
        if self.compiler is not None:
            self.compiler.start(kiosk)
        return kiosk

    def compile_knowledge(self, compiler: KnowledgeCompiler) -> None:
        """Compile the knowledge with ``compiler`` now and after every reload; its questions come to
        :meth:`use_compiled`."""
        self.compiler = compiler
        compiler.start(self.kiosk)

    def use_compiled(self, source: Kiosk, compiled: Mapping[str, Sequence[str]], timeout: float = 60.0) -> None:
        """Put in place, between two replies, a kiosk built from ``source``'s knowledge with the questions a compile
        kept (:mod:`edgevoice.kiosk.compiled`): their embeddings are made here, once. Nothing when the knowledge was
        reloaded meanwhile (the compile of the new one follows) or no question was kept."""
        if not compiled:
            return
        with self._kiosk_lock:
            if self.kiosk is not source:
                return
            kiosk = Kiosk.from_config(
                self.config, embedder=source.embedder, phonemize=source.phonemize, idle=self._idle, asked=compiled
            )
            if [e.key for e in kiosk.source_entries] != [e.key for e in source.source_entries]:
                kiosk.close()
                log.info("the knowledge file changed during its compile: it is used once reloaded and compiled")
                return
            self._swap_in(kiosk, timeout)
        log.info(
            "compiled knowledge in use: %d ways of asking added to %d entries",
            sum(len(v) for v in compiled.values()),
            len(compiled),
        )

    def _swap_in(self, kiosk: Kiosk, timeout: float) -> None:
        """Put ``kiosk`` in place between two replies and close the one it replaces."""
        old = self.kiosk

        def swap() -> None:
            self.kiosk, self.prefix = kiosk, kiosk.prefix
            if isinstance(self.responder.llm, GroundedModel):
                self.responder.llm.kiosk = kiosk
            self.responder.prefix = kiosk.prefix
            self.responder.asr_prompt = kiosk.asr_prompt(self.config.asr.initial_prompt)

        if not self.responder.between_replies(swap, timeout):
            kiosk.close()
            raise EdgeVoiceError(
                f"no reply ended within {timeout:.0f} s; the knowledge was not reloaded", code="kiosk_busy"
            )
        old.close()
        resettle()  # the old kiosk was frozen with the start-up objects: unfrozen, it can go

    def close(self, timeout: float = 5.0) -> None:
        """Stop the knowledge's compile and the kiosk's background embedding, if any, and join them
        (:meth:`Kiosk.close`)."""
        if self.compiler is not None:
            self.compiler.close(timeout)
        self.kiosk.close(timeout)

    def warm_up(self) -> dict[str, float]:
        """Have the cached prompt prefix in the model (:meth:`warm_prefix`) and run each engine once, so the first
        visitor waits for nothing; return the seconds of each step (``prefix``, ``asr``, ``tts``)."""
        clock = self.clock
        t = clock.now()
        self.prefix_warmed = self.warm_prefix()
        steps = {"prefix": clock.now() - t}
        self.engines.recognizer.transcribe(np.zeros(SAMPLE_RATE, dtype=np.float32))
        steps["asr"] = clock.now() - t - sum(steps.values())
        for _ in self.engines.synthesizer.synthesize("Hello."):
            pass
        steps["tts"] = clock.now() - t - sum(steps.values())
        return steps

    def warm_prefix(self) -> str:
        """The cached prompt prefix in the model's KV cache: ``"restored"`` from the copy an earlier start kept,
        ``"evaluated"``, ``"cached"`` already, or ``"none"`` for a model without a cache."""
        llm = self.engines.llm
        warm = getattr(llm, "warm_prefix", None)
        if warm is not None:
            return str(warm(self.prefix))
        prefill = getattr(llm, "prefill", None)
        if prefill is None:
            return "none"
        prefill(self.prefix)
        return "evaluated"

    def converse(self, audio: FloatAudio) -> ConverseResult:
        """Answer one recorded utterance (16 kHz mono float32), every stage timed."""
        t0 = self.clock.now()
        segments = find_speech(self.engines.vad, audio, self.config.vad, sample_rate=SAMPLE_RATE)  # type: ignore[arg-type]
        t_vad = self.clock.now()
        stages = {"vad": t_vad - t0}
        rate = self.engines.synthesizer.sample_rate
        chunks: list[FloatAudio] = []
        trace = ReplyTrace(next(self._turns), committed=t_vad)
        if (span := utterance_span(segments, int(self.config.asr.max_seconds * SAMPLE_RATE))) is not None:
            start, end = span

            def emit(chunk: FloatAudio) -> int:
                chunks.append(chunk)
                return sum(len(c) for c in chunks)

            self.responder.respond(audio[start:end], trace, threading.Event(), emit)
            self.responder.commit(trace, None)
        no_speech = not trace.transcript
        if no_speech:
            log.info("no speech recognised")
        else:
            stages |= trace_stages(trace)
        stages["total"] = self.clock.now() - t0
        return ConverseResult(
            transcript=trace.transcript,
            reply=trace.reply,
            audio=np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32),
            sample_rate=rate,
            stages=tuple(StageTime(name, seconds * 1000.0) for name, seconds in stages.items()),
            speech=tuple(segments),
            no_speech=no_speech,
            answered_by=trace.answered_by,
        )


def trace_stages(trace: ReplyTrace) -> dict[str, float]:
    """Stage durations (s) of one reply: recognition, LLM first token, first audio, LLM and synthesis totals."""
    out: dict[str, float] = {}
    if trace.transcript_done is not None:
        out["asr"] = trace.transcript_done - trace.committed
        if trace.first_token is not None:
            out["llm_first_token"] = trace.first_token - trace.transcript_done
        if trace.first_audio is not None:
            out["first_audio"] = trace.first_audio - trace.transcript_done
        if trace.done is not None:
            began = trace.reply_began if trace.reply_began is not None else trace.transcript_done
            out["llm"] = trace.done - began - trace.synthesis_s
            out["tts"] = trace.synthesis_s
    return out
