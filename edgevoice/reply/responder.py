"""Answering one committed turn: final transcript → streamed LLM reply → clause by clause synthesis → playback ring.

Runs in the responder worker thread of the live loop. Every step checks the turn's cancel event, so barge-in stops
the language model and the synthesizer within one token or one clause. What was handed to the playback ring is
recorded clause by clause, so the history can keep only what the visitor actually heard.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from enum import Enum

import numpy as np

from edgevoice.clock import Clock
from edgevoice.errors import EdgeVoiceError
from edgevoice.events import Answered, ChatMessage, Cut, Transcript
from edgevoice.interfaces import FloatAudio, LanguageModel, Recognizer, Synthesizer
from edgevoice.kiosk.prompt import conversation
from edgevoice.reply.bounds import ReplyBounds, ReplyLimit, closed
from edgevoice.reply.chunker import ClauseChunker
from edgevoice.reply.speech_text import normalize_for_speech, speakable
from edgevoice.reply.synthesis import SynthesisWorker
from edgevoice.reply.trace import RANKED_KEPT, ReplyTrace, SpokenClause

log = logging.getLogger(__name__)

FIRST_CLAUSE_WORDS = 6
"""The first piece of a reply goes to the synthesizer after at most this many words (time to first audio)."""
HURRY_S = 1.5
"""With less reply audio than this queued for playback, the next piece is cut as early as a first one: generating
and synthesizing six words must finish before the speaker runs dry (an audible gap)."""


class Responder:
    """Turns a committed turn's audio into a spoken reply; owns the conversation history."""

    def __init__(
        self,
        recognizer: Recognizer,
        llm: LanguageModel,
        synthesizer: Synthesizer,
        prefix: list[ChatMessage],
        *,
        max_tokens: int,
        max_sentences: int,
        clock: Clock,
        max_clauses: int = ReplyBounds.max_clauses,
        max_reply_s: float = ReplyBounds.max_seconds,
        history_tokens: int = 600,
        count_tokens: Callable[[list[ChatMessage]], int] | None = None,
        asr_prompt: str = "",
        synthesis_thread: bool = False,
        conversation_timeout_s: float = 0.0,
        unsure_below: float = 0.0,
    ) -> None:
        """``synthesis_thread``: synthesize on a worker thread while the LLM goes on (the live loop, where audio
        plays as it is made); otherwise clause by clause in the caller's thread (deterministic: offline replies).
        ``conversation_timeout_s``: the history is forgotten when no exchange was added for this long (0: never).
        ``unsure_below``: a transcript whose confidence is under this is marked unsure for the grounding
        (:attr:`~edgevoice.events.ChatMessage.unsure`). Every reply is held to ``max_tokens`` pieces and as many
        characters as they may hold, ``max_clauses`` clauses and ``max_reply_s`` seconds, whatever the model does
        (:mod:`edgevoice.reply.bounds`)."""
        self.unsure_below = unsure_below
        self.asr_prompt = asr_prompt
        self.synthesis_thread = synthesis_thread
        self._llm_lock = threading.Lock()  # the language model serves one caller at a time
        self.recognizer, self.llm, self.synthesizer = recognizer, llm, synthesizer
        self.prefix = prefix
        self.history: list[ChatMessage] = []
        self._history_lock = threading.Lock()  # the listener thread withdraws an exchange while replies are made
        self.max_tokens, self.max_sentences = max_tokens, max_sentences
        self.bounds = ReplyBounds(max_tokens=max_tokens, max_clauses=max_clauses, max_seconds=max_reply_s)
        self.clock = clock
        self.history_tokens = history_tokens
        self._count_tokens = count_tokens
        self.conversation_timeout_s = conversation_timeout_s
        self._last_exchange: float | None = None

    def trim_history(self) -> None:
        """Forget the conversation when it has lapsed (:meth:`expire_history`), then drop the oldest exchanges until
        the history fits its token budget (the cached prefix is never dropped).

        A model that can cut messages out of its KV cache (``forget_messages``) keeps the rest of the history
        cached, so time to first token stays flat however long the conversation."""
        self.expire_history()
        forget = getattr(self.llm, "forget_messages", None)
        while True:
            with self._history_lock:
                if not self.history or self._history_size() <= self.history_tokens:
                    return
                dropped = self.history[:2]
                del self.history[:2]
            if forget is not None:
                forget(self.prefix, dropped)

    def forget(self, messages: Sequence[ChatMessage]) -> None:
        """The exchange the visitor went on with leaves the conversation: remove exactly these message objects (by
        identity: an equal message of another exchange stays).

        As in :meth:`trim_history`, a model that can cut messages out of its KV cache has them cut, so what follows
        them is not evaluated again; a run of them at the end of the history is left to the next prompt, which
        overwrites it from the first difference. Never waits for the model (the listener thread calls this): while
        it is busy, only the history changes."""
        gone = {id(m) for m in messages}
        cut = getattr(self.llm, "forget_messages", None)
        model_free = cut is not None and self._llm_lock.acquire(blocking=False)
        try:
            with self._history_lock:
                if model_free and cut is not None:
                    kept: list[ChatMessage] = []
                    run: list[ChatMessage] = []
                    for message in self.history:
                        if id(message) in gone:
                            run.append(message)
                            continue
                        if run:
                            cut([*self.prefix, *kept], run)
                            run = []
                        kept.append(message)
                self.history[:] = [m for m in self.history if id(m) not in gone]
        finally:
            if model_free:
                self._llm_lock.release()

    def expire_history(self) -> bool:
        """Forget the whole conversation when no exchange was added for ``conversation_timeout_s``: the next
        question is a new visitor's. The cached prefix stays in the model's cache; only the history after it goes.
        Returns whether it was forgotten."""
        last = self._last_exchange
        if not self.history or self.conversation_timeout_s <= 0 or last is None:
            return False
        if self.clock.now() - last <= self.conversation_timeout_s:
            return False
        log.info("the conversation lapsed after %.0f s without a turn: a new one begins", self.clock.now() - last)
        with self._history_lock:
            self.history.clear()
        return True

    def _history_size(self) -> int:
        if self._count_tokens is not None:
            return self._count_tokens(self.history)
        return sum(len(m.content.split()) * 2 for m in self.history)

    def respond(
        self,
        audio: FloatAudio,
        trace: ReplyTrace,
        cancel: threading.Event,
        emit: Callable[[FloatAudio], int],
    ) -> ReplyTrace:
        """Answer the turn in ``audio``; ``emit`` queues synthesized audio and returns the position after it."""
        return self.respond_to(self.recognizer.transcribe(audio, prompt=self.asr_prompt), trace, cancel, emit)

    def respond_to(
        self,
        transcript: Transcript,
        trace: ReplyTrace,
        cancel: threading.Event,
        emit: Callable[[FloatAudio], int],
        *,
        queued_s: Callable[[], float] | None = None,
    ) -> ReplyTrace:
        """Answer an already transcribed turn (the live loop transcribes while the visitor speaks).

        ``queued_s``: seconds of reply audio queued and not yet played; while it is short, pieces are cut early."""
        trace.transcript_done = self.clock.now()
        trace.transcript = transcript.text
        trace.confidence = transcript.confidence
        if transcript.is_empty or cancel.is_set():
            trace.cancelled = cancel.is_set()
            trace.done = self.clock.now()
            return trace
        with self._llm_lock:
            return self._reply(transcript, trace, cancel, emit, queued_s)

    def between_replies(self, change: Callable[[], None], timeout: float) -> bool:
        """Run ``change`` while no reply or prefill uses the language model (one in progress finishes first, with
        what it began with); False, ``change`` not run, when none ended within ``timeout`` seconds."""
        if not self._llm_lock.acquire(timeout=timeout):
            return False
        try:
            change()
            return True
        finally:
            self._llm_lock.release()

    def interrupt(self) -> None:
        """Shutting down: make the language model stop whatever it computes for another thread, at its next token
        or prefill chunk (every later call fails at once)."""
        interrupt = getattr(self.llm, "interrupt", None)
        if interrupt is not None:
            interrupt()

    def resume(self) -> None:
        """Undo :meth:`interrupt`: a new loop starts with this responder's model."""
        resume = getattr(self.llm, "resume", None)
        if resume is not None:
            resume()

    def prefill_history(self) -> bool:
        """Put the conversation so far into the KV cache while the visitor listens, so the next turn's prefill
        only has the new question left to evaluate."""
        return self._prefill(lambda: [*self.prefix, *self.history])

    def prefill_turn(self, text: str) -> bool:
        """Evaluate the prompt up to the visitor's (speculative) words ahead of time, if the model is free.

        Called while the end of the turn is being confirmed; the reply then only evaluates what differs."""
        return self._prefill(lambda: conversation(self.prefix, self.history, text))

    def _prefill(self, messages: Callable[[], list[ChatMessage]]) -> bool:
        """Prefill the model with ``messages()`` (after trimming the history) unless it is busy; never waits."""
        prefill = getattr(self.llm, "prefill", None)
        if prefill is None or not self._llm_lock.acquire(blocking=False):
            return False
        try:
            self.trim_history()
            prefill(messages())
            return True
        except EdgeVoiceError as exc:
            if exc.code != "llm_interrupted":  # shutting down: not a failure
                log.warning("prefill failed: %s", exc)
            return False
        finally:
            self._llm_lock.release()

    def _reply(
        self,
        transcript: Transcript,
        trace: ReplyTrace,
        cancel: threading.Event,
        emit: Callable[[FloatAudio], int],
        queued_s: Callable[[], float] | None,
    ) -> ReplyTrace:
        self.trim_history()
        unsure = transcript.confidence is not None and transcript.confidence < self.unsure_below
        messages = conversation(self.prefix, self.history, transcript.text, unsure=unsure)
        chunker = ClauseChunker(first_max_words=FIRST_CLAUSE_WORDS)
        limit = ReplyLimit(self.bounds, self.clock)
        sentences_spoken = 0
        stream = self.llm.stream_reply(messages, max_tokens=self.max_tokens)
        position: list[int | None] = [None]

        def speak(clause: str) -> None:
            position[0] = self._speak(clause, trace, cancel, emit, position[0])

        worker = SynthesisWorker(speak, cancel) if self.synthesis_thread else None
        say = worker.put if worker is not None else speak

        def say_all(clauses: list[str]) -> None:
            nonlocal sentences_spoken
            for clause in clauses:
                self._clause_ready(trace)
                say(clause)
                sentences_spoken += clause.rstrip().endswith((".", "!", "?"))

        cut: Cut | None = None
        try:
            stopped = False  # the sentence limit, a code block or a cancel: what is pending is not said
            for piece in stream:
                if trace.first_token is None:
                    trace.first_token = self.clock.now()
                if cancel.is_set():
                    stopped = True
                    break
                hurry = queued_s is not None and trace.first_clause is not None and queued_s() < HURRY_S
                say_all(chunker.feed(limit.feed(piece), hurry=hurry))
                if sentences_spoken >= self.max_sentences or "```" in chunker.pending or cancel.is_set():
                    stopped = True
                    break
                if limit.cut is not None:
                    break
            else:
                cut = self._model_cut()
                if cut is None:  # a stream its model cut short may end mid-word: its last word is not said
                    say_all(chunker.feed(limit.finish()))
            cut = limit.cut or cut
            if not stopped:
                tail = chunker.flush()
                if cut is not None:  # ends after its last whole word, with a full stop
                    tail = closed(tail)
                if tail and sentences_spoken < self.max_sentences and not cancel.is_set():
                    say_all([tail])
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
            if worker is not None:
                worker.finish()
        answered = getattr(self.llm, "answered_by", None)
        trace.answered_by = answered if isinstance(answered, Answered) else None
        verdict = getattr(self.llm, "last_verdict", None)
        trace.verdict = verdict.value if isinstance(verdict, Enum) else None
        grounding = getattr(self.llm, "last_grounding", None)  # a GroundedModel's: what the kiosk ranked first
        trace.ranked = tuple(e.key for e in getattr(grounding, "entries", ())[:RANKED_KEPT])
        margin = getattr(grounding, "margin", None)
        trace.margin = margin if isinstance(margin, float) else None
        trace.cancelled = cancel.is_set()
        trace.reply = " ".join(c.text for c in trace.clauses)
        if cut is not None:
            trace.cut = cut.value
            log.warning(
                "turn %d: the reply was cut by its %s bound after %d characters, %d clauses, %d pieces and %.1f s",
                trace.turn_id, cut.value, limit.chars, limit.clauses, limit.pieces, self.clock.now() - limit.started,
            )  # fmt: skip
        trace.done = self.clock.now()
        return trace

    def _model_cut(self) -> Cut | None:
        """The bound the model's own stream stopped at (a remote server's reply read to its limit, the local model's
        ``max_tokens``), if it says."""
        cut = getattr(self.llm, "last_cut", None)
        return cut if isinstance(cut, Cut) else None

    def _speak(
        self,
        clause: str,
        trace: ReplyTrace,
        cancel: threading.Event,
        emit: Callable[[FloatAudio], int],
        position: int | None,
    ) -> int | None:
        text = speakable(clause, max_sentences=self.max_sentences)
        if not text or cancel.is_set():
            return position
        start = position
        spoken: SpokenClause | None = None
        """In the trace from its first sample queued: the caption follows the playback, not the synthesis."""
        t = self.clock.now()
        for chunk in self.synthesizer.synthesize(normalize_for_speech(text)):
            trace.synthesis_s += self.clock.now() - t
            if cancel.is_set():
                break
            if trace.first_audio is None:
                trace.first_audio = self.clock.now()
            end = emit(chunk)
            if start is None:
                start = end - len(chunk)
            if trace.first_sample_queued is None:
                trace.first_sample_queued = self.clock.now()
            position = end
            if spoken is not None:
                spoken.end_sample = end
            elif end > start:
                spoken = SpokenClause(text, start, end)
                trace.clauses.append(spoken)
            t = self.clock.now()
        return position

    def _clause_ready(self, trace: ReplyTrace) -> None:
        if trace.first_clause is None:
            trace.first_clause = self.clock.now()

    def commit(self, trace: ReplyTrace, played_until: int | None) -> list[ChatMessage]:
        """Add the exchange to the history, keeping only what was played before ``played_until`` (barge-in); return
        the messages added (none for an empty transcript), which :meth:`forget` takes back.

        ``played_until`` is a playback-stream position; ``None`` means the whole reply was played.
        """
        if not trace.transcript:
            return []
        heard: list[str] = []
        for clause in trace.clauses:
            if played_until is None or clause.end_sample <= played_until:
                heard.append(clause.text)
            elif clause.start_sample < played_until:
                fraction = (played_until - clause.start_sample) / max(1, clause.end_sample - clause.start_sample)
                words = clause.text.split()
                kept = words[: int(len(words) * fraction)]
                if kept:
                    heard.append(" ".join(kept) + "...")
        added = [ChatMessage("user", trace.transcript), ChatMessage("assistant", " ".join(heard))]
        with self._history_lock:
            self.history += added
        self._last_exchange = self.clock.now()
        return added


def silence(seconds: float, rate: int) -> FloatAudio:
    return np.zeros(int(seconds * rate), dtype=np.float32)
