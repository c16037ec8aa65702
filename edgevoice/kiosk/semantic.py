"""Semantic matching: how close a visitor's question is in meaning to each knowledge entry.

A lexical score cannot see that "am I allowed to take pictures?" asks "can I take photos?", or that "do you have a
yearly membership?" asks about the annual pass. A sentence encoder can (all-MiniLM-L6-v2 by default, run by
:mod:`edgevoice.engines.minilm`): each entry is embedded once when the kiosk is built (in the background for a large
knowledge: :mod:`edgevoice.kiosk.background_embedding`), as its question, its question with the answer, its answer,
and each other way visitors ask it (:attr:`Entry.asked <edgevoice.kiosk.knowledge.Entry.asked>`: the operator's
review, the compiled knowledge); a question costs one forward pass, and its similarity to an entry is the largest of
its cosines with the entry's questions (its own and the asked ones) and its question with the answer. The near-miss
reference is the entry's question closest to the visitor's: how close *that* question is to the answer (an asked
question is a question, never an answer). The entries' vectors can be kept on disk between starts
(:class:`~edgevoice.kiosk.embedding_cache.EmbeddingCache`): only new or changed entries are embedded again. The
similarities to every entry are one matrix product per question (under a millisecond for 5,000 entries).

The venue's own name is replaced by "here" on both sides before embedding: "who is the director of the gallery?"
would otherwise sit close to every entry that names the gallery (the lexical side treats the name as neutral too).

:class:`~edgevoice.kiosk.matching.Matcher` combines these similarities with the lexical coverage; the thresholds
are there.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from edgevoice.kiosk.embedding_cache import EmbeddingCache
from edgevoice.kiosk.knowledge import Entry

__all__ = ["Embedder", "SemanticIndex", "venue_name_pattern"]

Floats = npt.NDArray[np.float32]


class Embedder(Protocol):
    """A sentence encoder: one L2-normalised vector per text (dot product = cosine similarity)."""

    def embed(self, texts: Sequence[str]) -> Floats: ...


def venue_name_pattern(names: Sequence[str]) -> re.Pattern[str] | None:
    """The venue's names (``Northside Art Gallery``) and the kind of place each ends with (``gallery``), with an
    optional "the" before and "'s" after, for replacement by a neutral word."""
    phrases: dict[str, None] = {}
    for name in names:
        words = name.split()
        if len(words) < 2:
            continue  # the assistant's own name ("Ada") or a one-word name: too likely to be an ordinary word
        phrases[name.lower()] = None
        phrases[words[-1].lower()] = None
    if not phrases:
        return None
    alternatives = "|".join(re.escape(p) for p in sorted(phrases, key=len, reverse=True))
    return re.compile(rf"\b(?:the\s+)?(?:{alternatives})(?:'s)?\b", re.IGNORECASE)


class SemanticIndex:
    """The knowledge entries' embeddings, and the similarity of a question to each entry."""

    def __init__(
        self,
        embedder: Embedder,
        entries: Sequence[Entry],
        *,
        venue_names: Sequence[str] = (),
        cache_size: int = 16,
        stored: EmbeddingCache | None = None,
        vectors: Floats | None = None,
    ) -> None:
        """``cache_size``: the embeddings of this many recent questions are kept (a question is grounded both when
        its reply is prepared and when it is given). ``stored``: the entries' vectors kept on disk (None: every
        entry is embedded here). ``vectors``: the embeddings of :meth:`texts` made already (in the background:
        :mod:`edgevoice.kiosk.background_embedding`); nothing is embedded here then."""
        self.embedder = embedder
        self._neutral = venue_name_pattern(venue_names)
        n = len(entries)
        if vectors is not None:
            pass
        elif not entries:
            vectors = np.zeros((0, 1), np.float32)
        elif stored is not None:
            vectors = stored.embed(embedder, self.texts(entries, venue_names))
        else:
            vectors = embedder.embed(self.texts(entries, venue_names))
        self._vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.questions = self._vectors[:n]
        """Each entry's question (its answer when it has none), embedded."""
        self.with_answers = self._vectors[n : 2 * n]
        """Each entry's question, answer and keywords, embedded."""
        self.answers = self._vectors[2 * n : 3 * n]
        """Each entry's answer alone, embedded."""
        self.asked = self._vectors[3 * n :]
        """Each entry's other ways of asking (:attr:`Entry.asked <edgevoice.kiosk.knowledge.Entry.asked>`), embedded,
        entry after entry."""
        self.asked_entry = np.array([i for i, e in enumerate(entries) for _ in e.asked], dtype=np.intp)
        """The entry of each row of :attr:`asked`."""
        self.own_relevance = np.sum(self.questions * self.answers, axis=1)
        """How close each entry's answer is to its own question (1.0 for an entry without a question)."""
        self.asked_relevance = np.sum(self.asked * self.answers[self.asked_entry], axis=1)
        """How close each asked question's entry's answer is to it."""
        self._cache: OrderedDict[str, Floats] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @staticmethod
    def texts(entries: Sequence[Entry], venue_names: Sequence[str] = ()) -> list[str]:
        """What is embedded for the entries, in the order of the index's rows: each entry's question (its answer when
        it has none), its question with the answer and keywords, its answer, then the asked questions of every entry
        in turn; the venue's names made neutral."""
        pattern = venue_name_pattern(venue_names)
        texts = [e.question or e.answer for e in entries] + [e.search_text() for e in entries]
        texts += [e.answer for e in entries]
        texts += [a for e in entries for a in e.asked]
        return [pattern.sub("here", t) for t in texts] if pattern is not None else texts

    def neutral(self, text: str) -> str:
        return self._neutral.sub("here", text) if self._neutral is not None else text

    def embed_question(self, question: str) -> Floats:
        key = " ".join(question.split())
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        vector = self.embedder.embed([self.neutral(key)])[0]
        with self._lock:
            self._cache[key] = vector
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vector

    def similarities(self, question: str) -> tuple[Floats, Floats]:
        """Per entry: the question's cosine with the entry (the largest with its own question, its asked questions
        and its question with the answer), and its relevance to the entry's answer: its cosine with the answer less
        that of the entry's question closest to it (its own or an asked one; 0 or more: the answer fits it at least
        as well as a question the entry is known to answer)."""
        vector = self.embed_question(question)
        n = len(self.questions)
        # one product for the four kinds of text; einsum rather than BLAS: a matrix-vector product this small gains
        # nothing from BLAS threads, and they wait for busy cores (68 ms instead of 0.6 ms at 5,000 entries on two
        # loaded cores)
        cosines = np.einsum("ij,j->i", self._vectors, vector)
        closest, reference = cosines[:n], self.own_relevance
        if len(self.asked_entry):
            closest, reference = self._closest_asked(cosines[:n], cosines[3 * n :])
        similarity = np.maximum(closest, cosines[n : 2 * n])
        return similarity, cosines[2 * n : 3 * n] - reference

    def _closest_asked(self, own: Floats, asked: Floats) -> tuple[Floats, Floats]:
        """Per entry: the cosine of its question closest to the visitor's (its own or an asked one), and how close
        that question is to the entry's answer."""
        closest = own.copy()
        np.maximum.at(closest, self.asked_entry, asked)
        wins = np.flatnonzero((asked >= closest[self.asked_entry]) & (asked > own[self.asked_entry]))
        reference = self.own_relevance.copy()
        reference[self.asked_entry[wins]] = self.asked_relevance[wins]
        return closest, reference
