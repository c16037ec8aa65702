"""Compiling the kiosk's knowledge with the strongest model the box has: ahead of time for a file (``edgevoice
knowledge compile FILE``), and in the background of ``edgevoice run`` (:class:`KnowledgeCompile`).

What a compile is and which questions it keeps: :mod:`edgevoice.kiosk.compiler`; the cache that makes it resumable
and lets the next start use it at once: :mod:`edgevoice.kiosk.compiled`; the loop and its thread:
:mod:`edgevoice.kiosk.background_compile`. docs/knowledge.md, "Compiled ways of asking", is the operator's guide.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from edgevoice.app_engines import open_compiler
from edgevoice.config import Config
from edgevoice.errors import ConfigError, ModelError
from edgevoice.kiosk.background_compile import MAX_ENTRIES, BackgroundCompile, CompileProgress, run_compile
from edgevoice.kiosk.compiled import CompileCache, knowledge_digest
from edgevoice.kiosk.compiler import COMPILE_MODEL, PROMPT_VERSION
from edgevoice.kiosk.embedding_cache import encoder_identity
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.matching import Matcher
from edgevoice.models.store import ModelStore
from edgevoice.paths import default_cache_dir

__all__ = [
    "KnowledgeCompile",
    "compile_cache_dir",
    "compile_note",
    "finished_compile",
    "generator_identity",
]

log = logging.getLogger(__name__)


def compile_cache_dir() -> Path:
    """Where compiles are kept: ``compiled/`` in the cache directory beside the embeddings
    (:func:`~edgevoice.paths.default_cache_dir`)."""
    return default_cache_dir() / "compiled"


def generator_identity(config: Config, store: ModelStore) -> str | None:
    """The identity :func:`~edgevoice.app_engines.open_compiler` would give its model, without loading it; None: no
    model to compile with."""
    try:
        path = store.path(COMPILE_MODEL)
    except ModelError:  # not installed, or not the file it should be: the next in line compiles
        path = None
    if path is not None:
        checked = store.handed_out.get(path)
        return f"{COMPILE_MODEL}\0{checked[1].sha256 if checked is not None else ''}"
    if config.llm.backend == "openai":
        return f"{config.llm.model or 'LAN model'} at {config.llm.base_url}\0"
    return None


def finished_compile(
    config: Config, store: ModelStore, entries: Sequence[Entry], encoder: str
) -> dict[str, list[str]] | None:
    """The finished compile of ``entries`` in the cache (checked with the sentence encoder ``encoder``), if any."""
    identity = generator_identity(config, store)
    if identity is None:
        return None
    cache = CompileCache(compile_cache_dir(), identity, PROMPT_VERSION)
    return cache.finished(knowledge_digest(entries[:MAX_ENTRIES], encoder))


def compile_note(config: Config, store: ModelStore, entries: Sequence[Entry]) -> str:
    """One line for ``edgevoice config --check``: the model that compiles the knowledge and how many of its entries
    it has written ways of asking for, or why it is not compiled (not an error)."""
    identity = generator_identity(config, store)
    if identity is None:
        return (
            f"the knowledge is not compiled: no model to compile it with (install {COMPILE_MODEL}, or set [llm] "
            'backend = "openai"); it is matched as written'
        )
    cache = CompileCache(compile_cache_dir(), identity, PROMPT_VERSION)
    todo = entries[:MAX_ENTRIES]
    done = sum(cache.record(e.key) is not None for e in todo)
    if not config.kiosk.compile and done < len(todo):
        return f"the knowledge is not compiled ([kiosk] compile = false): {done}/{len(todo)} entries written"
    left = (
        f"; {len(entries) - len(todo)} entries past the first {MAX_ENTRIES} are matched as written"
        if (len(entries) > len(todo))
        else ""
    )
    return (
        f"knowledge compile by {identity.split(chr(0))[0]}: {done}/{len(todo)} entries written (in {cache.path}); "
        f"the rest is compiled in the background by edgevoice run, or now by: edgevoice knowledge compile FILE{left}"
        if done < len(todo)
        else f"knowledge compile by {identity.split(chr(0))[0]}: {done}/{len(todo)} entries written{left}"
    )


class KnowledgeCompile:
    """The background compile of the running kiosk's knowledge: started for each kiosk built from new knowledge
    (:meth:`start`), its questions handed to ``use`` once checked; :attr:`progress` for the status page."""

    def __init__(
        self,
        config: Config,
        store: ModelStore,
        use: Callable[[Kiosk, dict[str, list[str]]], None],
        *,
        idle: Callable[[], bool] | None = None,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.config, self.store, self._use, self.idle = config, store, use, idle
        self.max_entries = max_entries
        self.progress = CompileProgress()
        self._running: BackgroundCompile | None = None
        self._lock = threading.Lock()

    def start(self, kiosk: Kiosk) -> None:
        """Compile ``kiosk``'s knowledge in a thread of its own (stopping a compile of earlier knowledge): at once from
        the cache when it was compiled before; nothing (the state "off", with the reason) when no model can compile
        it or the kiosk has no sentence encoder for the checks. Nothing here waits for a model or a file's hash."""
        self.close()
        progress = CompileProgress(state="waiting")
        entries = kiosk.source_entries
        holder: list[BackgroundCompile] = []
        encoder = encoder_identity(kiosk.embedder) if kiosk.embedder is not None else None

        def work(go_on: Callable[[], bool]) -> dict[str, list[str]]:
            identity = generator_identity(self.config, self.store)
            if identity is None or encoder is None:
                progress.state = "off"
                progress.warning = (
                    f'no model to compile it with (install {COMPILE_MODEL}, or set [llm] backend = "openai")'
                    if identity is None
                    else "semantic matching is off, and the compile's checks rank with it"
                )
                log.info("%s", progress.line())
                return {}
            progress.model = identity.split("\0")[0]
            cache = CompileCache(compile_cache_dir(), identity, PROMPT_VERSION)
            finished = cache.finished(knowledge_digest(entries[: self.max_entries], encoder))
            if finished is not None:  # compiled before: no model loaded
                progress.state, progress.kept = "done", sum(len(v) for v in finished.values())
                progress.entries_done = progress.entries_total = min(len(entries), self.max_entries)
                return finished
            if not self.config.kiosk.compile:
                progress.state, progress.warning = "off", "turned off ([kiosk] compile = false)"
                log.info("%s", progress.line())
                return {}
            generator = open_compiler(self.config, self.store, busy=holder[0].busy)
            if generator is None:
                raise ConfigError("the compile model went away")
            try:
                return run_compile(
                    entries,
                    generator,
                    lambda: _meaning(kiosk),
                    cache,
                    encoder=encoder,
                    go_on=go_on,
                    progress=progress,
                    max_entries=self.max_entries,
                )
            finally:
                generator.close()

        running = BackgroundCompile(work, lambda kept: self._use(kiosk, kept), progress, idle=self.idle)
        holder.append(running)
        with self._lock:
            self.progress, self._running = progress, running
        running.start()

    def close(self, timeout: float = 10.0) -> bool:
        """Stop the compile in progress, if any (what it wrote is kept) and join it."""
        with self._lock:
            running, self._running = self._running, None
        return running.close(timeout) if running is not None else True


def _meaning(kiosk: Kiosk) -> Matcher:
    """The kiosk's matcher once it matches by meaning (its background embedding waited for)."""
    kiosk.wait_semantic()
    return kiosk.matcher


def compile_file(
    config: Config, store: ModelStore, kiosk: Kiosk, *, max_entries: int = MAX_ENTRIES, fresh: bool = False
) -> tuple[dict[str, list[str]], CompileProgress]:
    """Compile ``kiosk``'s knowledge now (resuming from the cache): the questions kept per entry key, and the
    progress made. ``fresh``: forget the finished compile (the checks run again; the model's work is kept)."""
    generator = open_compiler(config, store)
    if generator is None:
        raise ConfigError(
            f"no model to compile the knowledge with: install {COMPILE_MODEL} (edgevoice models install "
            f'{COMPILE_MODEL}) or set [llm] backend = "openai"',
            code="compile_no_model",
        )
    progress = CompileProgress()
    cache = CompileCache(compile_cache_dir(), generator.identity, PROMPT_VERSION)
    encoder = encoder_identity(kiosk.embedder) or ""
    if fresh:
        cache.forget(knowledge_digest(kiosk.source_entries[:max_entries], encoder))
    try:
        kept = run_compile(
            kiosk.source_entries,
            generator,
            lambda: _meaning(kiosk),
            cache,
            encoder=encoder,
            progress=progress,
            max_entries=max_entries,
        )
    finally:
        generator.close()
    return kept, progress
