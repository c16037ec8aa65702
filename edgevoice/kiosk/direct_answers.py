"""The direct answers: the rules by which one entry's answer is read out as the operator wrote it, without the model.
The :class:`~edgevoice.kiosk.matching.Matcher` applies them to the questions its gate lets through.

* **By words** (:func:`lexical_direct`): the entry contains every word of the question, was written for them, and no
  other entry rivals it.
* **Said again** (:func:`said_again`): the question is one of an entry's questions (its own or one visitors were seen
  to ask: :attr:`Entry.asked <edgevoice.kiosk.knowledge.Entry.asked>`) said again, in other words.
* **By meaning** (:func:`semantic_direct`): the entry is clearly the closest in meaning, and its answer fits the
  question at least as well as the question it was written for (a paraphrase asks what the answer says; a near miss
  asks something else about the same thing).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.retrieval import BM25Index, Match, terms

__all__ = ["clearly_best", "lexical_direct", "said_again", "semantic_direct"]

DIRECT_COVERAGE = 0.999
"""A direct answer needs an entry that contains every (idf-weighted) word of the question."""
DIRECT_MARGIN = 1.5
"""... and a BM25 score this many times that of any other entry that contains them all."""
DIRECT_QUESTION_SHARE = 0.4
"""... and whose own question (or keywords) holds this idf-weighted share of the question's words."""
SEMANTIC_DIRECT = 0.45
"""A direct answer by meaning: the entry is at least this close to the question, ..."""
SEMANTIC_DIRECT_MARGIN = 0.15
"""... no other entry comes within this of it, ..."""
SEMANTIC_DIRECT_RELEVANCE = 0.0
"""... and its answer is at least this much closer to the question than to the entry's own question (a paraphrase
asks what the answer says; a near miss asks something else about the same thing)."""
SEMANTIC_SAME = 0.92
"""A question at least this close in meaning to one of an entry's questions (its own or one visitors were seen to ask
it: :attr:`Entry.asked <edgevoice.kiosk.knowledge.Entry.asked>`) is that question said again: it gets that entry's
answer directly, ..."""
SEMANTIC_SAME_MARGIN = 0.05
"""... when no other entry comes within this of it."""


def clearly_best(
    entries: Sequence[Entry],
    order: Sequence[int],
    similarity: np.ndarray,
    relevance: np.ndarray,
    *,
    least: float,
    margin: float,
    fits: float,
) -> str | None:
    """The answer of the best-ranked entry (``order[0]``) when it is at least ``least`` close in meaning, no other
    entry comes within ``margin`` of it, and its relevance (its answer's closeness to the question, less its own
    question's) is at least ``fits``; None otherwise."""
    best = order[0]
    runner_up = max((float(similarity[i]) for i in order[1:]), default=-1.0)
    if similarity[best] < least or similarity[best] - runner_up < margin:
        return None
    return entries[best].answer if relevance[best] >= fits else None


def said_again(
    entries: Sequence[Entry],
    order: Sequence[int],
    similarity: np.ndarray,
    relevance: np.ndarray,
    *,
    unanswered: float,
) -> str | None:
    """The answer of the entry one of whose questions (its own or an asked one) the question says again
    (:data:`SEMANTIC_SAME`), when no other entry comes near and it is no near miss (its relevance at least
    ``unanswered``: "is X free?" may sit as close to "where is X?" as a rewording does)."""
    if not order or not entries[order[0]].answer:
        return None
    return clearly_best(
        entries, order, similarity, relevance, least=SEMANTIC_SAME, margin=SEMANTIC_SAME_MARGIN, fits=unanswered
    )


def semantic_direct(
    entries: Sequence[Entry], order: Sequence[int], similarity: np.ndarray, relevance: np.ndarray
) -> str | None:
    """The answer of the entry closest in meaning, when it is close, no other entry comes near, and its answer
    fits the question at least as well as the question it was written for."""
    if not order or not entries[order[0]].question:
        return None
    return clearly_best(
        entries,
        order,
        similarity,
        relevance,
        least=SEMANTIC_DIRECT,
        margin=SEMANTIC_DIRECT_MARGIN,
        fits=SEMANTIC_DIRECT_RELEVANCE,
    )


def lexical_direct(
    question: str,
    matches: Sequence[Match],
    entries: Sequence[Entry],
    index: BM25Index,
    entry_terms: Sequence[frozenset[str]],
    neutral: frozenset[str],
) -> str | None:
    """The best entry's answer when it contains every word of the question as said (``entry_terms``, its asked
    questions' included: no near spellings; ``neutral`` words aside), has a question of its own that shares the
    question's main words (so its answer was written as a reply to this kind of question, not merely mentions them),
    and clearly outranks every other entry that covers it all. ``matches``: the entries ranked by ``index``."""
    if not matches or matches[0].coverage < DIRECT_COVERAGE:
        return None
    best = entries[matches[0].index]
    if not best.question or not best.answer:
        return None
    asked = set(terms(question)) - neutral
    if not asked <= entry_terms[matches[0].index]:
        return None  # covered only through a near spelling of one of its words
    weight = {t: index.idf.get(t, index.unseen_idf) for t in asked}
    own = set(terms(" ".join((best.question, *best.keywords, *best.asked))))
    if sum(w for t, w in weight.items() if t in own) < DIRECT_QUESTION_SHARE * sum(weight.values()):
        return None  # the words are in its answer only: it mentions them, it was not written for them
    rivals = [m for m in matches[1:] if m.coverage >= DIRECT_COVERAGE]
    if rivals and rivals[0].score * DIRECT_MARGIN > matches[0].score:
        return None  # two entries answer it about equally well: let the model choose and phrase
    return best.answer
