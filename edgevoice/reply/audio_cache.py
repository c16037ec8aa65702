"""Reply audio synthesized ahead of time: the knowledge's answers, the refusal and the fallback phrase.

Most turns are answered with words known before any visitor speaks (a direct answer is an entry's own answer, a
question the knowledge does not cover gets the refusal). Their audio is made once, in the background after start-up
(:mod:`edgevoice.reply.presynthesis`), and kept here, so the reply plays the moment its turn is committed instead
of after a synthesis call. :class:`CachedSynthesizer` sits in front of the voice: the responder asks it for every
clause as usual, and a clause made ahead of time comes from memory. Entries are keyed by the voice (its model's
checksum and its synthesis settings) and the exact text the voice reads, so a changed voice or setting never plays
stale audio. Memory is bounded by the seconds of audio kept (least recently used first out).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator

import numpy as np

from edgevoice.clock import ManualClock
from edgevoice.interfaces import FloatAudio, Synthesizer
from edgevoice.reply.bounds import ReplyBounds, ReplyLimit, closed
from edgevoice.reply.chunker import ClauseChunker
from edgevoice.reply.responder import FIRST_CLAUSE_WORDS
from edgevoice.reply.speech_text import normalize_for_speech, speakable

__all__ = ["CachedSynthesizer", "ReplyAudioCache", "spoken_pieces"]


def spoken_pieces(reply: str, *, max_sentences: int, bounds: ReplyBounds | None = None) -> list[str]:
    """The texts the voice is asked for when ``reply`` comes whole from the language model's side (a direct answer,
    the refusal): held to ``bounds``, cut into clauses and made speakable exactly as
    :class:`~edgevoice.reply.responder.Responder` does with a reply that arrives in one piece. A piece cut otherwise
    is only a cache miss: it is synthesized then."""
    limit = ReplyLimit(bounds or ReplyBounds(), ManualClock())  # a whole reply: no time passes while it is read
    text = limit.feed(reply)
    text += limit.finish()
    chunker = ClauseChunker(first_max_words=FIRST_CLAUSE_WORDS)
    clauses, sentences = [], 0
    for clause in chunker.feed(text):
        clauses.append(clause)
        sentences += clause.rstrip().endswith((".", "!", "?"))
    tail = chunker.flush()
    if limit.cut is not None:
        tail = closed(tail)
    if sentences < max_sentences and tail:
        clauses.append(tail)
    texts = (speakable(clause, max_sentences=max_sentences) for clause in clauses)
    return [normalize_for_speech(text) for text in texts if text]


class ReplyAudioCache:
    """Synthesized audio by (voice, text), at most ``max_seconds`` of it in all (least recently used first out).

    Thread-safe. Stored audio is read-only: a reply that plays it (or is cut off while it plays) cannot change it."""

    def __init__(self, max_seconds: float, sample_rate: int) -> None:
        self.max_samples = int(max_seconds * sample_rate)
        self.sample_rate = sample_rate
        self._entries: OrderedDict[tuple[str, str], tuple[FloatAudio, ...]] = OrderedDict()
        self._samples = 0
        self._lock = threading.Lock()
        self.evictions = 0

    def get(self, voice: str, text: str) -> tuple[FloatAudio, ...] | None:
        """The audio of ``text`` in ``voice`` (one array per sentence, as the voice yields it), None if absent."""
        with self._lock:
            chunks = self._entries.get((voice, text))
            if chunks is not None:
                self._entries.move_to_end((voice, text))
            return chunks

    def __contains__(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._entries

    def put(self, voice: str, text: str, chunks: Iterable[FloatAudio], *, evict: bool = True) -> bool:
        """Keep a copy of ``chunks`` as the audio of ``text`` in ``voice``, dropping the least recently used entries
        to stay within the bound (``evict``; else nothing is dropped); False (nothing kept) when it does not fit."""
        frozen = tuple(_frozen(chunk) for chunk in chunks)
        size = sum(len(c) for c in frozen)
        if size > self.max_samples:
            return False
        with self._lock:
            old = self._entries.pop((voice, text), None)
            if old is not None:
                self._samples -= sum(len(c) for c in old)
            if not evict and self._samples + size > self.max_samples:
                if old is not None:
                    self._entries[(voice, text)] = old
                    self._samples += sum(len(c) for c in old)
                return False
            while self._entries and self._samples + size > self.max_samples:
                _, dropped = self._entries.popitem(last=False)
                self._samples -= sum(len(c) for c in dropped)
                self.evictions += 1
            self._entries[(voice, text)] = frozen
            self._samples += size
        return True

    @property
    def seconds(self) -> float:
        """Seconds of audio kept."""
        return self._samples / self.sample_rate

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(c.nbytes for chunks in self._entries.values() for c in chunks)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


def _frozen(chunk: FloatAudio) -> FloatAudio:
    copy = np.array(chunk, dtype=np.float32, copy=True)
    copy.flags.writeable = False
    return copy


class CachedSynthesizer:
    """A :class:`~edgevoice.interfaces.Synthesizer` that plays a text's audio from ``cache`` when it was made ahead
    of time (:meth:`remember`), else asks ``voice``. ``voice_id`` names the voice and its settings (see
    :func:`edgevoice.models.configured.voice_id`): the cache's key beside the text."""

    def __init__(self, voice: Synthesizer, cache: ReplyAudioCache, voice_id: str) -> None:
        self.voice, self.cache, self.voice_id = voice, cache, voice_id
        self.sample_rate = voice.sample_rate
        self.hits = 0
        self.misses = 0

    def synthesize(self, text: str) -> Iterator[FloatAudio]:
        chunks = self.cache.get(self.voice_id, text)
        if chunks is None:
            self.misses += 1
            yield from self.voice.synthesize(text)
            return
        self.hits += 1
        yield from chunks

    def cached(self, text: str) -> bool:
        return (self.voice_id, text) in self.cache

    def remember(self, text: str, stop: threading.Event | None = None) -> tuple[FloatAudio, ...] | None:
        """Synthesize ``text`` with the voice (never from the cache) and keep its audio unless the cache is full;
        returns it. Stopped between two sentences by ``stop``: nothing is kept (None), so the cache never holds
        part of a text."""
        chunks = []
        for chunk in self.voice.synthesize(text):
            if stop is not None and stop.is_set():
                return None
            chunks.append(chunk)
        self.cache.put(self.voice_id, text, chunks, evict=False)
        return tuple(chunks)

    def close(self) -> None:
        close = getattr(self.voice, "close", None)
        if close is not None:
            close()

    def __getattr__(self, name: str) -> object:
        if name in ("voice", "cache", "voice_id") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.voice, name)
