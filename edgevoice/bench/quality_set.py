"""The sample venue's questions split as the recognition and answer benchmark (:mod:`edgevoice.bench.quality`) and
the knowledge tests use them: in the knowledge, and outside it (far first, then the near misses).

Read from the sample venue (:func:`edgevoice.bench.venue.sample_venue`), so both benchmarks ask the same questions.
"""

from __future__ import annotations

from edgevoice.bench.venue import Question, sample_venue

__all__ = ["IN_KNOWLEDGE", "OUT_OF_KNOWLEDGE", "Question"]

IN_KNOWLEDGE: tuple[Question, ...] = tuple(q for q in sample_venue().questions if q.in_knowledge)
OUT_OF_KNOWLEDGE: tuple[Question, ...] = tuple(
    q for kind in ("out", "near_miss") for q in sample_venue().questions if q.kind == kind
)
"""Far from the knowledge first, then the near misses."""
