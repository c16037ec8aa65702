"""The quality benchmark's questions about the sample venue, read from
``edgevoice/data/sample_venue/quality_questions.toml``.

Questions in the knowledge say which facts a right answer must contain (each group: any one of its spellings; every
group needed); questions outside it must get an honest "I don't know". Half of those outside it are near misses that
share words with the knowledge: the hard case, where the language model itself must decline. The gate is tuned on
the separate development questions in ``tests/test_knowledge.py``, never on these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgevoice import data

__all__ = ["IN_KNOWLEDGE", "OUT_OF_KNOWLEDGE", "Question"]

QUESTIONS_FILE = "sample_venue/quality_questions.toml"


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    facts: tuple[tuple[str, ...], ...] = ()
    """Empty: not in the knowledge, the right answer is "I don't know"."""

    @property
    def in_knowledge(self) -> bool:
        return bool(self.facts)


def _questions(rows: list[dict[str, Any]]) -> tuple[Question, ...]:
    return tuple(Question(r["id"], r["text"], tuple(tuple(group) for group in r.get("facts", ()))) for r in rows)


IN_KNOWLEDGE: tuple[Question, ...] = _questions(data.table(QUESTIONS_FILE)["in_knowledge"])
OUT_OF_KNOWLEDGE: tuple[Question, ...] = _questions(data.table(QUESTIONS_FILE)["out_of_knowledge"])
"""Far from the knowledge first, then the near misses."""
