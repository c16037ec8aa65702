"""Lexical retrieval over the knowledge entries: Okapi BM25 on normalised terms, plus a coverage score.

Terms are lower-cased words without stop words, with a light suffix stemmer (``lockers``/``locker``,
``opening``/``opens``/``open``) and a small table of words visitors use for the same thing at any venue
(``restroom``/``toilet``, ``elevator``/``lift``). A question word that appears in no entry can still match a
vocabulary word one or two letters away (``color``/``colour``), which also absorbs small recognition errors.

:meth:`BM25Index.coverage` is the share of the question's terms, weighted by how rare they are, that one entry
contains: a question about something the venue never mentions ("can I bring my dog?") covers nothing, however
its words happen to rank.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from rapidfuzz.distance import Levenshtein

from edgevoice import data
from edgevoice.kiosk.knowledge import Entry
from edgevoice.words import fold, words

__all__ = ["BM25Index", "Match", "document", "near", "terms"]

STOP_WORDS = frozenset(data.words("en/stop_words.txt"))
"""Words that say nothing about what is asked (``edgevoice/data/en/stop_words.txt``)."""

SYNONYMS: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in data.table("en/synonyms.toml").items()}
"""Concept: the words visitors use for it, compared after stemming (``edgevoice/data/en/synonyms.toml``)."""


def _stem(word: str) -> str:
    """A light suffix stripper: enough to join plurals and verb forms, never below three letters."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


_CONCEPT: dict[str, str] = {}
_PHRASES: list[tuple[str, str]] = []
for _concept, _words in SYNONYMS.items():
    for _w in _words:
        if " " in _w:
            _PHRASES.append((_w, _concept))
        else:
            _CONCEPT[_stem(_w.replace("-", ""))] = _concept
            if "-" in _w:  # a recognizer writes "step free" and "wi fi" as often as "step-free" and "wi-fi"
                _PHRASES.append((_w.replace("-", " "), _concept))


def terms(text: str) -> list[str]:
    """The normalised search terms of ``text``."""
    text = fold(text)
    for phrase, concept in _PHRASES:
        text = text.replace(phrase, f" {concept} ")
    out = []
    for word in words(text):
        if word in STOP_WORDS:
            continue
        word = word.removesuffix("'s")
        stem = _stem(word.replace("-", ""))
        out.append(_CONCEPT.get(stem, stem))
    return out


def document(entry: Entry) -> str:
    """What the words of ``entry`` are matched in: its question, answer and keywords, then each word of its asked
    questions that brings a term the entry has not yet (visitors' words, as keywords are; once, so that an entry asked
    many ways is not a longer document for BM25 than its facts make it)."""
    text = entry.search_text()
    if not entry.asked:
        return text
    have = set(terms(text))
    brought = []
    for word in " ".join(entry.asked).split():
        if new := set(terms(word)) - have:
            brought.append(word)
            have |= new
    return " ".join((text, *brought))


def near(a: str, b: str) -> bool:
    """One word starts with the other (five letters or more: ``photograph``, ``photography``), or the edit distance
    is at most 1 (words of 4-6 letters) or 2 (7 or more), with the same first letter."""
    if a[0] != b[0] or min(len(a), len(b)) < 4:
        return False
    if min(len(a), len(b)) >= 5 and (a.startswith(b) or b.startswith(a)):
        return True
    limit = 1 if min(len(a), len(b)) < 7 else 2
    if abs(len(a) - len(b)) > limit:
        return False
    return Levenshtein.distance(a, b, score_cutoff=limit) <= limit


@dataclass(frozen=True, slots=True)
class Match:
    index: int
    """Position of the entry in the indexed list."""
    score: float
    """BM25 score."""
    coverage: float
    """Share (0-1) of the question's idf-weighted terms this entry contains."""


class BM25Index:
    """Okapi BM25 (k1 = 1.2, b = 0.75) over short documents, with idf-weighted term coverage."""

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(terms(d)) for d in documents]
        self.k1, self.b = k1, b
        n = len(self.docs)
        lengths = [sum(d.values()) for d in self.docs]
        self.avg_len = sum(lengths) / max(1, n)
        postings: dict[str, list[tuple[int, int]]] = {}
        for index, doc in enumerate(self.docs):
            for term, count in doc.items():
                postings.setdefault(term, []).append((index, count))
        norm = [k1 * (1 - b + b * length / self.avg_len) for length in lengths]
        self._postings: dict[str, tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]] = {
            term: (
                np.array([i for i, _ in found], dtype=np.intp),
                np.array([f * (k1 + 1) / (f + norm[i]) for i, f in found], dtype=np.float64),
            )
            for term, found in postings.items()
        }
        """Term: the entries that contain it (ascending), and its BM25 term-frequency factor in each."""
        self.idf = {t: math.log((n - len(p) + 0.5) / (len(p) + 0.5) + 1.0) for t, p in postings.items()}
        self.unseen_idf = math.log(n / 0.5 + 1.0)
        """A word no entry contains weighs as much as the rarest possible one."""
        self._by_initial: dict[str, list[str]] = {}
        """The vocabulary by first letter, in :attr:`idf` order: :func:`near` words share their first letter."""
        for term in self.idf:
            self._by_initial.setdefault(term[:1], []).append(term)

    def nearest(self, term: str) -> str | None:
        """The first vocabulary word :func:`near` ``term`` (in order of first appearance); None: none is."""
        return next((v for v in self._by_initial.get(term[:1], ()) if near(term, v)), None)

    def query_terms(self, question: str) -> list[str]:
        """The question's terms, each replaced by the vocabulary word it nearly matches if it has no exact match."""
        out = []
        for term in dict.fromkeys(terms(question)):
            if term not in self.idf:
                term = self.nearest(term) or term
            out.append(term)
        return list(dict.fromkeys(out))

    def search(self, question: str, k: int | None = None, *, neutral: frozenset[str] = frozenset()) -> list[Match]:
        """Entries ranked by BM25 score, best first (those sharing no term left out); at most ``k``.

        ``neutral`` terms (the venue's own name, say) rank but do not count for or against coverage. Only the
        entries that contain a term of the question are looked at (an inverted index): 5,000 entries cost about
        what 50 do."""
        score, covered, total = self._scores(question, neutral)
        found = np.flatnonzero(score > 0)
        order = found[np.lexsort((found, -score[found]))]  # best first, then by position
        if k is not None:
            order = order[:k]
        return [Match(int(i), float(score[i]), float(covered[i]) / total if total else 1.0) for i in order]

    def coverage(self, question: str, *, neutral: frozenset[str] = frozenset()) -> npt.NDArray[np.float32]:
        """:attr:`Match.coverage` of every entry (0 for those that share no term), as :meth:`search` gives it."""
        score, covered, total = self._scores(question, neutral)
        out = np.where(score > 0, covered / total if total else 1.0, 0.0)
        return out.astype(np.float32)

    def _scores(
        self, question: str, neutral: frozenset[str]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]:
        """Every entry's BM25 score and idf-weighted covered terms, and the question's total weight."""
        query = self.query_terms(question)
        weight = {t: self.idf.get(t, self.unseen_idf) for t in query}
        total = sum(w for t, w in weight.items() if t not in neutral)
        score = np.zeros(len(self.docs))
        covered = np.zeros(len(self.docs))
        for t in query:
            if (found := self._postings.get(t)) is not None:
                entries, factor = found
                score[entries] += weight[t] * factor
                if t not in neutral:
                    covered[entries] += weight[t]
        return score, covered, total
