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

from rapidfuzz.distance import Levenshtein

from edgevoice import data
from edgevoice.words import fold, words

__all__ = ["BM25Index", "Match", "near", "terms"]

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
        self.avg_len = sum(sum(d.values()) for d in self.docs) / max(1, n)
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        self.idf = {t: math.log((n - c + 0.5) / (c + 0.5) + 1.0) for t, c in df.items()}
        self.unseen_idf = math.log(n / 0.5 + 1.0)
        """A word no entry contains weighs as much as the rarest possible one."""

    def query_terms(self, question: str) -> list[str]:
        """The question's terms, each replaced by the vocabulary word it nearly matches if it has no exact match."""
        out = []
        for term in dict.fromkeys(terms(question)):
            if term not in self.idf:
                term = next((v for v in self.idf if near(term, v)), term)
            out.append(term)
        return list(dict.fromkeys(out))

    def search(self, question: str, k: int | None = None, *, neutral: frozenset[str] = frozenset()) -> list[Match]:
        """Entries ranked by BM25 score, best first (those sharing no term left out); at most ``k``.

        ``neutral`` terms (the venue's own name, say) rank but do not count for or against coverage."""
        query = self.query_terms(question)
        weight = {t: self.idf.get(t, self.unseen_idf) for t in query}
        total = sum(w for t, w in weight.items() if t not in neutral)
        matches = []
        for index, doc in enumerate(self.docs):
            length = sum(doc.values())
            score = covered = 0.0
            for t in query:
                f = doc.get(t, 0)
                if f:
                    norm = f + self.k1 * (1 - self.b + self.b * length / self.avg_len)
                    score += weight[t] * f * (self.k1 + 1) / norm
                    covered += weight[t] if t not in neutral else 0.0
            if score > 0:
                matches.append(Match(index, score, covered / total if total else 1.0))
        matches.sort(key=lambda m: (-m.score, m.index))
        return matches[:k] if k is not None else matches
