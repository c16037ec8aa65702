"""Making the known replies' audio in the background after start-up (``[tts] presynthesize``).

The knowledge's answers and the refusal are cut into the pieces the responder will ask the voice for
(:func:`~edgevoice.reply.audio_cache.spoken_pieces`) and synthesized one by one into the reply audio cache
(:class:`~edgevoice.reply.audio_cache.CachedSynthesizer`). The work never competes with a visitor: it runs only
while the appliance is idle (no turn open, queued or playing), on a thread of lower CPU priority, and the first
visitor never waits for it (a piece not made yet is synthesized when asked, as without the cache). Each piece is
also kept on disk (:class:`DiskAudio`), named by its voice and text, so a restart reads it back instead of making
it again.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edgevoice import paths
from edgevoice.atomic_write import replacing
from edgevoice.interfaces import FloatAudio
from edgevoice.kiosk.prompt import ASK_AGAIN, DONT_KNOW, DONT_KNOW_BUT
from edgevoice.priority import lower_this_thread, wait_idle
from edgevoice.reply.audio_cache import CachedSynthesizer, spoken_pieces
from edgevoice.reply.bounds import ReplyBounds

if TYPE_CHECKING:
    from edgevoice.kiosk.grounding import Kiosk

__all__ = ["DiskAudio", "Presynthesis", "default_cache_dir", "disk_audio", "known_replies"]

log = logging.getLogger(__name__)

PRESYNTHESIS_NICE = 10
"""How much lower the background synthesis runs than the rest (nice). Unlike the compute threads' (see
:mod:`edgevoice.priority`), this thread holds the GIL hardly at all (the voice model runs in ONNX Runtime, which
releases it), so lowering it cannot hold up the audio callbacks, and it yields to a turn that begins meanwhile."""

_NAME = re.compile(r"^[0-9a-f]{64}\.npz$")


def default_cache_dir() -> Path:
    """``replies/`` in the project's cache directory (:func:`edgevoice.paths.default_cache_dir`: the service's
    ``$CACHE_DIRECTORY``, else ``$XDG_CACHE_HOME/edgevoice``)."""
    return paths.default_cache_dir() / "replies"


def known_replies(kiosk: Kiosk) -> list[str]:
    """The replies known before any visitor speaks, the most frequent first: the refusal and a near miss's opening,
    then each entry's answer (a direct answer, or what replaces a reply that echoes the question)."""
    return [DONT_KNOW, DONT_KNOW_BUT, ASK_AGAIN, *(entry.answer for entry in kiosk.entries if entry.answer)]


def disk_audio(setting: str, voice_id: str) -> DiskAudio | None:
    """Where ``[tts] presynthesized_dir`` keeps the pieces of voice ``voice_id``; None: "none" (memory only)."""
    if setting.strip().lower() == "none":
        return None
    return DiskAudio(Path(setting).expanduser() if setting else default_cache_dir(), voice_id)


class DiskAudio:
    """Synthesized pieces on disk, one ``.npz`` file each (its sentences' arrays), named by the sha256 of the voice
    and the text. Unreadable or unwritable files cost only the time to synthesize again."""

    def __init__(self, directory: Path, voice_id: str) -> None:
        self.directory, self.voice_id = directory, voice_id
        self.writable = True

    def name(self, text: str) -> str:
        return hashlib.sha256(f"{self.voice_id}\n{text}".encode()).hexdigest() + ".npz"

    def load(self, text: str) -> list[FloatAudio] | None:
        path = self.directory / self.name(text)
        try:
            with np.load(path, allow_pickle=False) as data:
                return [np.asarray(data[f"arr_{i}"], dtype=np.float32) for i in range(len(data.files))]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError) as exc:
            log.warning("presynthesized audio %s unreadable (%s): made again", path, exc)
            return None

    def save(self, text: str, chunks: Sequence[FloatAudio]) -> None:
        """Write atomically (another appliance may read the same directory)."""
        if not self.writable:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with (
                replacing(self.directory / self.name(text), prefix=".", suffix=".npz.tmp") as tmp,
                tmp.open("wb") as fh,
            ):
                np.savez(fh, *chunks)
        except OSError as exc:
            self.writable = False
            log.warning("cannot keep presynthesized audio in %s (%s): memory only", self.directory, exc)

    def prune(self, keep: Iterable[str]) -> int:
        """Delete the pieces of texts no longer known (a changed knowledge or voice); returns how many."""
        names = {self.name(text) for text in keep}
        removed = 0
        try:
            for path in self.directory.iterdir():
                if _NAME.match(path.name) and path.name not in names:
                    path.unlink(missing_ok=True)
                    removed += 1
        except OSError as exc:
            log.info("presynthesized audio not pruned: %s", exc)
        return removed


class Presynthesis:
    """Makes ``replies``' audio into ``synthesizer``'s cache on a thread of its own (``edgevoice-presynth``), from
    :meth:`start` until done or :meth:`close`."""

    def __init__(
        self,
        synthesizer: CachedSynthesizer,
        replies: Iterable[str],
        *,
        max_sentences: int,
        bounds: ReplyBounds | None = None,
        disk: DiskAudio | None = None,
        idle: Callable[[], bool] | None = None,
        nice: int = PRESYNTHESIS_NICE,
    ) -> None:
        """``idle``: synthesize only while it is true (the appliance has no turn in progress). ``bounds``: the
        responder's (:attr:`~edgevoice.reply.responder.Responder.bounds`); an answer longer than they allow is made
        only as far as it would be spoken."""
        self.synthesizer, self.disk, self.idle, self.nice = synthesizer, disk, idle, nice
        pieces: dict[str, None] = {}
        for reply in replies:
            pieces.update(dict.fromkeys(spoken_pieces(reply, max_sentences=max_sentences, bounds=bounds)))
        self.pieces = list(pieces)
        """Every distinct text the voice will be asked for, in the order given (the most needed first)."""
        self.from_disk = 0
        self.synthesized = 0
        self.full = False
        """The cache reached its bound before every piece was in it."""
        self.finished = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="edgevoice-presynth", daemon=True)

    def start(self) -> Presynthesis:
        self._thread.start()
        return self

    def run(self) -> None:
        """Make every piece in the calling thread (what the thread runs; tests and benchmarks call it directly):
        first what the disk holds (a restart: fractions of a second), then the rest with the voice, in order."""
        missing = []
        for text in self.pieces:
            if self._stop.is_set():
                return
            chunks = self.disk.load(text) if self.disk is not None and not self.synthesizer.cached(text) else None
            if chunks is None:
                missing.append(text)
                continue
            self.from_disk += 1
            if not self._keep(text, chunks):
                return
        for text in missing:
            if self.synthesizer.cached(text):
                continue
            if not self._wait_idle() or (made := self.synthesizer.remember(text, self._stop)) is None:
                return
            self.synthesized += 1
            if self.disk is not None:
                self.disk.save(text, made)
            if not self.synthesizer.cached(text) and not self._keep(text, made):
                return
        if self.disk is not None:
            self.disk.prune(self.pieces)

    def _keep(self, text: str, chunks: Sequence[FloatAudio]) -> bool:
        """Into the cache; False (and :attr:`full`) when it is full."""
        cache = self.synthesizer.cache
        if cache.put(self.synthesizer.voice_id, text, chunks, evict=False):
            return True
        self.full = True
        log.info("presynthesis: the cache is full (%.0f s) after %d pieces", cache.seconds, len(cache))
        return False

    def _wait_idle(self) -> bool:
        return wait_idle(self.idle, self._stop)

    def _run(self) -> None:
        lower_this_thread(self.nice)
        try:
            self.run()
            log.info(
                "presynthesis: %d pieces (%d read from disk, %d synthesized), %.0f s of audio",
                len(self.pieces),
                self.from_disk,
                self.synthesized,
                self.synthesizer.cache.seconds,
            )
        except Exception as exc:  # the replies are then synthesized when asked, as without the cache
            log.error("presynthesis failed: %s", exc)
        finally:
            self.finished.set()

    def close(self, timeout: float = 2.0) -> None:
        """Stop between two sentences and join (a sentence in the voice model finishes first)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
