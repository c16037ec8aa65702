"""A remote language model hedged with the local one: whichever model's first clause comes first is spoken.

The remote reply is read on a thread of its own (:class:`RemoteStream`). When its first clause (what the responder
would send to the voice first) is there within the hedge budget, the remote answers alone. Otherwise the local
model starts too, in the caller's thread, token by token; between tokens the remote is looked at again, and the
first of the two to finish its first clause answers while the other is cancelled. A remote that fails (refused,
stalled, an HTTP error, a stream that is not chat chunks, no text at all) stops counting at once, so the local model
answers with no wait. A remote that fails after its first clause was spoken ends the reply there.

:attr:`HedgedModel.answered_by` says who answered the last reply and, when the local model did, why
(:class:`~edgevoice.events.Answered`); the turn record carries it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from edgevoice.clock import Clock, MonotonicClock
from edgevoice.errors import LanguageModelError
from edgevoice.events import Answered, ChatMessage, Cut
from edgevoice.interfaces import LanguageModel
from edgevoice.reply.chunker import ClauseChunker

log = logging.getLogger(__name__)

REMOTE_LATE = "llm_remote_late"
"""Why the local model answered when the remote was only slower (no error)."""
JOIN_S = 5.0
"""How long closing the model waits for each remote reader thread (each ends within its stall timeout)."""


@dataclass(frozen=True)
class _Piece:
    text: str


@dataclass(frozen=True)
class _End:
    """The remote stream is over: finished (``error`` None) or failed."""

    error: LanguageModelError | None = None


class RemoteStream:
    """One remote reply, read on its own thread into a queue so the hedge can wait for it with a deadline.

    :meth:`cancel` makes the reader stop at its next piece (at the latest within the model's stall timeout) and
    wakes anyone waiting in :meth:`get`; :meth:`join` waits for the reader's end."""

    def __init__(self, model: LanguageModel, messages: Sequence[ChatMessage], max_tokens: int) -> None:
        self._model, self._messages, self._max_tokens = model, list(messages), max_tokens
        self._queue: queue.Queue[_Piece | _End] = queue.Queue()
        self._cancelled = threading.Event()
        self._end: _End | None = None  # the end, once taken: every later get returns it at once
        self.cut: Cut | None = None
        """The bound the remote's reply was cut at (its model's ``last_cut``, read on this stream's thread); set
        before the end is queued."""
        self._thread = threading.Thread(target=self._read, name="remote-llm", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        stream = self._model.stream_reply(self._messages, max_tokens=self._max_tokens)
        try:
            for text in stream:
                if self._cancelled.is_set():
                    return
                self._queue.put(_Piece(text))
            cut = getattr(self._model, "last_cut", None)
            self.cut = cut if isinstance(cut, Cut) else None
            self._queue.put(_End())
        except LanguageModelError as exc:
            self._queue.put(_End(exc))
        except Exception as exc:  # a bug in the client costs the remote this reply, not the turn
            message = f"remote model: unexpected {type(exc).__name__}: {exc}"
            error = LanguageModelError(message, code="llm_remote_failed")
            self._queue.put(_End(error))
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def get(self, timeout: float | None) -> _Piece | _End | None:
        """The next piece or the end (again, once taken: a reply shorter than its first clause has ended before it is
        spoken); None when ``timeout`` seconds pass first (0: only what is already there)."""
        if self._end is not None:
            return self._end
        try:
            if timeout is not None and timeout <= 0:
                item = self._queue.get_nowait()
            else:
                item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, _End):
            self._end = item
        return item

    def cancel(self) -> None:
        if not self._cancelled.is_set():
            self._cancelled.set()
            self._queue.put(_End(LanguageModelError("remote reply cancelled", code="llm_interrupted")))

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


class _FirstClause:
    """Collects a reply's text until its first clause is complete (as :class:`ClauseChunker` cuts it)."""

    def __init__(self, words: int) -> None:
        self._chunker = ClauseChunker(first_max_words=words)
        self.text = ""

    def feed(self, piece: str) -> bool:
        self.text += piece
        return bool(self._chunker.feed(piece))


@dataclass(frozen=True)
class _Outcome:
    ready: bool
    """The remote's first clause is complete (or its whole reply, when shorter)."""
    error: str | None = None
    """Why the remote is out of the race; None while it may still answer."""


class HedgedModel:
    """A :class:`~edgevoice.interfaces.LanguageModel` that asks ``remote`` and, when its first clause is late or it
    fails, ``local``. The KV-cache calls (``prefill``, ``count_tokens``, ``forget_messages``) are the local model's,
    so it is ready whenever it must answer."""

    def __init__(
        self,
        remote: LanguageModel,
        local: LanguageModel,
        *,
        hedge_s: float,
        first_clause_words: int = 6,
        clock: Clock | None = None,
    ) -> None:
        self.remote, self.local = remote, local
        self.hedge_s = hedge_s
        self.first_clause_words = first_clause_words
        self.clock = clock or MonotonicClock()
        self.answered_by: Answered | None = None
        """Who answered the last reply (None until one of the models has)."""
        self.last_cut: Cut | None = None
        """The bound the answering model's reply stopped at, if it did (:attr:`RemoteStream.cut`, the local
        model's ``last_cut``)."""
        self._streams: list[RemoteStream] = []
        self._interrupted = threading.Event()
        self._lock = threading.Lock()

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        self.answered_by = self.last_cut = None
        with self._lock:  # an interrupt either comes before this check or finds the new stream to cancel
            if self._interrupted.is_set():
                raise LanguageModelError("generation interrupted: the model is shutting down", code="llm_interrupted")
            self._streams = [s for s in self._streams if s.alive]
            remote = RemoteStream(self.remote, messages, max_tokens)
            self._streams.append(remote)
        try:
            yield from self._race(remote, messages, max_tokens)
        finally:
            remote.cancel()

    def _race(self, remote: RemoteStream, messages: Sequence[ChatMessage], max_tokens: int) -> Iterator[str]:
        first = _FirstClause(self.first_clause_words)
        outcome = self._await(remote, first, self.clock.now() + self.hedge_s)
        if outcome.ready:
            yield from self._remote_answers(remote, first)
            return
        if self._interrupted.is_set():
            raise LanguageModelError("generation interrupted: the model is shutting down", code="llm_interrupted")
        error = outcome.error
        local_first = _FirstClause(self.first_clause_words)
        local = self.local.stream_reply(messages, max_tokens=max_tokens)
        try:
            for piece in local:
                if local_first.feed(piece):
                    break
                if error is None:  # still in the race: has the remote's first clause come meanwhile?
                    outcome = self._await(remote, first, deadline=None)
                    if outcome.ready:
                        _close(local)
                        yield from self._remote_answers(remote, first)
                        return
                    error = outcome.error
            remote.cancel()
            self.answered_by = Answered("local", error or REMOTE_LATE)
            log.info("the local model answers (%s)", self.answered_by.remote_error)
            yield local_first.text
            yield from local
            cut = getattr(self.local, "last_cut", None)
            self.last_cut = cut if isinstance(cut, Cut) else None
        finally:
            _close(local)

    def _await(self, remote: RemoteStream, first: _FirstClause, deadline: float | None) -> _Outcome:
        """Read the remote until its first clause is complete, it fails, or ``deadline`` passes (None: take only
        what has come already)."""
        while True:
            wait = 0.0 if deadline is None else deadline - self.clock.now()
            item = remote.get(wait)
            if item is None:
                return _Outcome(False)
            if isinstance(item, _Piece):
                if first.feed(item.text):
                    return _Outcome(True)
                continue
            if item.error is not None:
                if item.error.code != "llm_interrupted":
                    log.warning("the remote model failed, the local model answers: %s", item.error)
                return _Outcome(False, item.error.code)
            if first.text.strip():
                return _Outcome(True)  # a reply shorter than a clause
            log.warning("the remote model sent no text, the local model answers")
            return _Outcome(False, "llm_remote_empty")

    def _remote_answers(self, remote: RemoteStream, first: _FirstClause) -> Iterator[str]:
        self.answered_by = Answered("remote")
        yield first.text
        while True:
            item = remote.get(None)
            if isinstance(item, _Piece):
                yield item.text
                continue
            if isinstance(item, _End) and item.error is not None and item.error.code != "llm_interrupted":
                log.warning("the remote model failed after its first clause; the reply ends there: %s", item.error)
                self.answered_by = Answered("remote", item.error.code)
            self.last_cut = remote.cut
            return

    # -- the local model's cache, and the owner's calls ------------------------------------------------------------
    def end_of_turn_model(self) -> object | None:
        """The local model's transcript judge (:meth:`LlamaCppModel.end_of_turn_model`), if it has one."""
        make = getattr(self.local, "end_of_turn_model", None)
        return make() if make is not None else None

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        prefill = getattr(self.local, "prefill", None)
        return int(prefill(messages)) if prefill is not None else 0

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        count = getattr(self.local, "count_tokens", None)
        return int(count(messages)) if count is not None else sum(2 * len(m.content.split()) for m in messages)

    def forget_messages(self, before: Sequence[ChatMessage], dropped: Sequence[ChatMessage]) -> int:
        forget = getattr(self.local, "forget_messages", None)
        return int(forget(before, dropped)) if forget is not None else 0

    def interrupt(self) -> None:
        """Shutting down: stop the local model's work and every remote reply in progress; every later reply fails
        at once until :meth:`resume`."""
        self._interrupted.set()
        for model in (self.local, self.remote):
            interrupt = getattr(model, "interrupt", None)
            if interrupt is not None:
                interrupt()
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.cancel()

    def resume(self) -> None:
        self._interrupted.clear()
        for model in (self.local, self.remote):
            resume = getattr(model, "resume", None)
            if resume is not None:
                resume()

    def close(self) -> None:
        """Cancel the remote readers, wait for them (each ends within its stall timeout), close both models."""
        with self._lock:
            streams, self._streams = self._streams, []
        for stream in streams:
            stream.cancel()
        for stream in streams:
            stream.join(JOIN_S)
        for model in (self.remote, self.local):
            close = getattr(model, "close", None)
            if close is not None:
                close()


def _close(stream: Iterator[str]) -> None:
    close = getattr(stream, "close", None)
    if close is not None:
        close()
