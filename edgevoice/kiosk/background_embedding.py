"""Embedding a large knowledge in the background: the kiosk answers by its words at once, by meaning once done.

A first start on 5,000 entries embeds 15,000 texts: minutes on two cores, 18 on a busy box, all before the first
answer had the kiosk waited for them. The :class:`~edgevoice.kiosk.matching.Matcher` waits only when few texts are
missing from the embedding cache (:data:`EMBED_NOW_TEXTS`); otherwise :class:`BackgroundEmbedding` makes the
semantic index in a thread of its own while the kiosk matches questions by their words (as it does when no encoder
is installed), then hands it over, and the kiosk matches by meaning from the next question on (logged). The thread

* embeds :data:`CHUNK` texts at a time (then phonemizes the venue's words 200 at a time), and only while
  ``idle()`` says no turn is in progress, so a turn that begins waits on it for one chunk at most;
* runs at the priority of the rest (:data:`EMBEDDING_NICE`): the encoder is a Python loop of small numpy products
  and holds the GIL between them, and a thread put to sleep holding it would hold up the audio callbacks
  (:mod:`edgevoice.priority`);
* keeps what it embedded in the embedding cache as it goes (:mod:`edgevoice.kiosk.embedding_cache`: every 20 s and
  when stopped), so that a restart resumes where this start stopped;
* stops between two chunks when :meth:`BackgroundEmbedding.close` asks, which joins it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from edgevoice import data
from edgevoice.kiosk.embedding_cache import EmbeddingStopped
from edgevoice.priority import lower_this_thread, wait_idle
from edgevoice.thread_names import name_this_thread

__all__ = ["CHUNK", "EMBEDDING_NICE", "EMBED_NOW_TEXTS", "BackgroundEmbedding"]

log = logging.getLogger(__name__)

EMBED_NOW_TEXTS: int = data.table("kiosk/knowledge_limits.toml")["embed_now_texts"]
"""At most this many texts missing from the embedding cache are embedded before the kiosk is ready (a few seconds
on two cores); more are embedded in the background (``edgevoice/data/kiosk/knowledge_limits.toml``)."""
CHUNK = 8
"""Texts embedded between two looks at ``idle`` and at :meth:`BackgroundEmbedding.close`: one batch of the encoder
(about 0.3 s on two cores), what a turn that begins may wait on."""
EMBEDDING_NICE = 0
"""How much lower the background embedding runs than the rest (nice): not at all. It holds the GIL between its numpy
products, and a thread at a lower priority put to sleep while holding it would keep the audio callbacks waiting
(priority inversion, as for the compute threads of :mod:`edgevoice.priority`); it runs between turns only."""

T = TypeVar("T")


class BackgroundEmbedding(Generic[T]):
    """Runs ``work(go_on)`` once in a thread of its own, then ``done(result)``. ``work`` asks ``go_on()`` before
    each chunk: it waits while ``idle()`` is false and says False once :meth:`close` was called (``work`` then stops,
    raising :class:`~edgevoice.kiosk.embedding_cache.EmbeddingStopped`)."""

    def __init__(
        self,
        work: Callable[[Callable[[], bool]], T],
        done: Callable[[T], None],
        *,
        idle: Callable[[], bool] | None = None,
        nice: int = EMBEDDING_NICE,
    ) -> None:
        self._work, self._done = work, done
        self.idle = idle
        """Whether the appliance is idle now (no turn open, queued or playing); None: always."""
        self.nice = nice
        self._stop = threading.Event()
        self.finished = threading.Event()
        """Set when the thread has ended: the work done and handed over, stopped, or failed."""
        self.completed = False
        """Whether ``done`` was called with the finished work."""
        self.seconds: float | None = None
        """How long the work took (waits for idle included), once completed."""
        self._thread = threading.Thread(target=self._run, name="knowledge-embedding", daemon=True)

    def start(self) -> BackgroundEmbedding[T]:
        self._thread.start()
        return self

    def go_on(self) -> bool:
        """Wait while the appliance is busy; False once :meth:`close` was called."""
        return wait_idle(self.idle, self._stop)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end (at most ``timeout`` seconds); whether the work was completed and handed over."""
        self.finished.wait(timeout)
        return self.completed

    def _run(self) -> None:
        name_this_thread("ev-embedding")
        lower_this_thread(self.nice)
        started = time.perf_counter()
        try:
            result = self._work(self.go_on)
            self.seconds = time.perf_counter() - started
            self._done(result)
            self.completed = True
        except EmbeddingStopped as exc:
            log.info("knowledge embedding stopped (%s); it resumes from the embedding cache at the next start", exc)
        except Exception:  # the kiosk keeps matching by words: worse answers, never none
            log.exception("knowledge embedding failed: questions are matched by their words only")
        finally:
            self.finished.set()

    def close(self, timeout: float = 5.0) -> bool:
        """Stop between two chunks (a chunk in the encoder finishes first, what is embedded is kept) and join;
        False when the thread is still running after ``timeout`` seconds (it is a daemon: the exit ends it)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("knowledge embedding did not stop within %.0f s", timeout)
            return False
        return True
