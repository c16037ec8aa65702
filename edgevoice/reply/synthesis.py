"""Synthesis on its own thread, so the language model goes on generating while a clause is synthesized and played.

The responder hands each clause over the moment the chunker cuts it; one worker thread synthesizes them in order and
queues their audio for playback. Serially, the language model stood still during every synthesis call, and a short
first clause ("Yes.") could finish playing before the next one existed: an audible gap (an output underrun). The
worker is started per reply and joined before the reply ends; a cancelled reply's remaining clauses are dropped.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _AllPut:
    """Every clause of the reply was put: the worker ends once it has spoken (or dropped) them."""


class SynthesisWorker:
    """Runs ``speak(clause)`` for every :meth:`put` clause, in order, on one thread (``edgevoice-tts``)."""

    def __init__(self, speak: Callable[[str], None], cancel: threading.Event) -> None:
        self._speak = speak
        self._cancel = cancel
        self._clauses: queue.Queue[str | _AllPut] = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="edgevoice-tts", daemon=False)
        self._thread.start()

    def put(self, clause: str) -> None:
        self._clauses.put(clause)

    def finish(self) -> None:
        """Wait until every clause put so far is synthesized and queued (or dropped: cancelled); re-raise the
        exception that stopped the worker, if any."""
        self._clauses.put(_AllPut())
        self._thread.join()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while not isinstance(clause := self._clauses.get(), _AllPut):
            if self._cancel.is_set() or self._error is not None:
                continue  # drain: the reply is over
            try:
                self._speak(clause)
            except Exception as exc:  # handed to the responder thread by finish()
                self._error = exc
