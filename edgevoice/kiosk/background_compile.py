"""Compiling the knowledge (:mod:`edgevoice.kiosk.compiler`) entry by entry, resumably, and in the background.

:func:`run_compile` writes an entry's questions with the model, keeps them in the compile cache
(:mod:`edgevoice.kiosk.compiled`) at once, and goes on to the next; entries the cache holds are skipped, so a compile
cut short resumes where it stopped. Once every entry (up to :data:`MAX_ENTRIES`, in file order) has its questions,
the kiosk's matcher checks them all and the questions kept are the finished compile.

:class:`BackgroundCompile` runs it in a thread of its own, like the background embedding
(:mod:`edgevoice.kiosk.background_embedding`): only while ``idle()`` says no turn is in progress; a turn that begins
while the model writes stops it at its next token (the entry is written again later), so a visitor waits one token
at most. The kiosk answers from the knowledge as written until the compile hands over its questions. Its
:class:`CompileProgress` is what the admin status and ``edgevoice config --check`` show.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from edgevoice import data
from edgevoice.errors import LanguageModelError
from edgevoice.kiosk.compiled import CompileCache, knowledge_digest
from edgevoice.kiosk.compiler import COUNT, Generated, Generator, GeneratorPaused, Stopped, check_questions, generate
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.matching import Matcher
from edgevoice.priority import wait_idle
from edgevoice.thread_names import name_this_thread

__all__ = ["MAX_ENTRIES", "BackgroundCompile", "CompileProgress", "CompileStopped", "run_compile"]

log = logging.getLogger(__name__)

MAX_ENTRIES: int = int(data.table("kiosk/compile.toml")["max_entries"])
"""At most this many entries are compiled, the first in file order; the others are matched as written."""


CompileStopped = Stopped
"""The compile was asked to stop (its ``go_on`` said so); what was written is kept in the cache."""


@dataclass
class CompileProgress:
    """Where a compile stands: for the admin status and ``edgevoice config --check``."""

    state: str = "off"
    """off (no model to compile with), waiting (for the kiosk to be idle, or its meaning index), writing, checking,
    done, stopped, failed."""
    model: str | None = None
    entries_done: int = 0
    entries_total: int = 0
    entries_left_out: int = 0
    """Entries past :data:`MAX_ENTRIES`: matched as written."""
    written: int = 0
    kept: int = 0
    warning: str | None = None
    seconds: float | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def line(self) -> str:
        """One line for people: what the compile did or why it does not run."""
        if self.state == "off":
            return f"knowledge not compiled: {self.warning or 'no model to compile it with'}"
        text = f"knowledge compile {self.state}: {self.entries_done}/{self.entries_total} entries"
        text += f", {self.kept} of {self.written} ways of asking kept, by {self.model or 'the compile model'}"
        if self.entries_left_out:
            text += f"; {self.entries_left_out} entries past the first {MAX_ENTRIES} left as written"
        return text + (f"; {self.warning}" if self.warning else "")


def run_compile(
    entries: Sequence[Entry],
    generator: Generator,
    matcher: Callable[[], Matcher],
    cache: CompileCache,
    *,
    encoder: str = "",
    go_on: Callable[[], bool] | None = None,
    progress: CompileProgress | None = None,
    max_entries: int = MAX_ENTRIES,
    count: int = COUNT,
) -> dict[str, list[str]]:
    """The questions kept for each entry (by key): from the cache when this knowledge was compiled before, else
    written entry by entry (``go_on`` asked before each model call; False raises :class:`CompileStopped`), then
    checked with ``matcher()`` (the kiosk's, matching by meaning), kept in ``cache`` as they come."""
    progress = progress or CompileProgress()
    progress.model, progress.state = generator.identity.split("\0")[0], "writing"
    digest = knowledge_digest(entries, encoder)
    todo = list(entries[:max_entries])
    progress.entries_total, progress.entries_left_out = len(todo), max(0, len(entries) - max_entries)
    finished = cache.finished(digest)
    if finished is not None:
        progress.entries_done, progress.state = len(todo), "done"
        progress.kept = sum(len(v) for v in finished.values())
        return finished
    keys = [e.key for e in todo]
    started = time.perf_counter()
    for n, entry in enumerate(todo):
        progress.entries_done = n
        if cache.record(entry.key) is None:
            made = generate(generator, entry, count, go_on=go_on)
            cache.put(entry.key, made.questions, made.judged, keep=keys)
            progress.warning = cache.warning
            log.info(
                "knowledge compile: entry %d/%d written (%d questions), %.0f s so far",
                n + 1,
                len(todo),
                len(made.questions),
                time.perf_counter() - started,
            )
    progress.entries_done, progress.state = len(todo), "checking"
    if go_on is not None and not go_on():
        raise CompileStopped("stopped before the checks")
    ranking = matcher()
    index: dict[str, int] = {}
    for row, e in enumerate(ranking.entries):
        index.setdefault(e.key, row)
    kept: dict[str, list[str]] = {}
    progress.written = progress.kept = 0
    for entry in todo:
        record = cache.record(entry.key)
        at = index.get(entry.key)
        if record is None or at is None:
            continue
        checked = check_questions(ranking, at, Generated(*record))
        progress.written += len(record[0])
        progress.kept += len(checked.kept)
        if checked.kept:
            kept[entry.key] = checked.kept
    cache.finish(digest, kept, keep=keys)
    progress.warning = cache.warning
    progress.state, progress.seconds = "done", time.perf_counter() - started
    return kept


class BackgroundCompile:
    """Runs ``work(go_on)`` once in a thread of its own, then ``done(result)``; ``go_on`` waits while ``idle()`` is
    false and says False once :meth:`close` was called. ``busy()`` (for the generator) is true while a turn is in
    progress or a close was asked: the model stops at its next token."""

    def __init__(
        self,
        work: Callable[[Callable[[], bool]], dict[str, list[str]]],
        done: Callable[[dict[str, list[str]]], None],
        progress: CompileProgress,
        *,
        idle: Callable[[], bool] | None = None,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        self._work, self._done, self._on_end = work, done, on_end
        self.idle = idle
        self.progress = progress
        self._stop = threading.Event()
        self.finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name="knowledge-compile", daemon=True)

    def start(self) -> BackgroundCompile:
        self._thread.start()
        return self

    def busy(self) -> bool:
        return self._stop.is_set() or (self.idle is not None and not self.idle())

    def go_on(self) -> bool:
        return wait_idle(self.idle, self._stop)

    def _run(self) -> None:
        name_this_thread("ev-compile")
        try:
            while True:
                try:
                    result = self._work(self.go_on)
                    break
                except GeneratorPaused:
                    if self._stop.is_set():
                        raise CompileStopped("stopped while the model wrote") from None
            if self.progress.state == "done":
                self._done(result)
                log.info("%s", self.progress.line())
        except CompileStopped as exc:
            self.progress.state = "stopped"
            log.info("knowledge compile stopped (%s); it resumes from the compile cache at the next start", exc)
        except LanguageModelError as exc:
            if self._stop.is_set():
                self.progress.state = "stopped"
            else:
                self.progress.state, self.progress.warning = "failed", str(exc)
                log.warning("knowledge compile failed (%s): the knowledge is matched as written", exc)
        except Exception as exc:  # the kiosk keeps answering from the knowledge as written
            self.progress.state, self.progress.warning = "failed", str(exc)
            log.exception("knowledge compile failed: the knowledge is matched as written")
        finally:
            self.finished.set()
            if self._on_end is not None:
                self._on_end()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end; whether the compile was done."""
        self.finished.wait(timeout)
        return self.progress.state == "done"

    def close(self, timeout: float = 10.0) -> bool:
        """Stop at the model's next token and join; False when the thread still runs after ``timeout`` seconds."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()
