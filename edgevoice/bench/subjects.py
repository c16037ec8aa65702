"""Whether a reply keeps to its question's subject: a **wrong-entry read-out** (an entry's answer read out, directly
or instead of an echo, that is not the question's right entry) and **numbers on the wrong subject** (a value the
knowledge gives only for other entries than the question's right entry).

The right entry is :func:`~edgevoice.bench.entry_labels.right_entry`'s. A question without one (out, near_miss,
small_talk) has no entry to read out and no value to state, except in the deliberate near-miss form
(:data:`~edgevoice.kiosk.prompt.DONT_KNOW_BUT` and what the nearest entry does say), which declines first and is
counted on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edgevoice.bench.entry_labels import right_entry
from edgevoice.bench.scoring import has_fact, spoken_values, states_value
from edgevoice.bench.venue import Question
from edgevoice.errors import ConfigError
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.prompt import DONT_KNOW_BUT

__all__ = ["READ_OUT_VERDICTS", "Subjects", "told_near_miss"]

READ_OUT_VERDICTS = frozenset({Verdict.DIRECT.value, Verdict.ECHO.value})
"""The verdicts of a reply that is an entry's answer as the operator wrote it."""


def told_near_miss(reply: str) -> bool:
    """The deliberate near-miss form: the refusal, then what the nearest entry does say."""
    return reply.startswith(DONT_KNOW_BUT)


@dataclass(frozen=True)
class Subjects:
    """A venue's entries, each with the values it states, to judge replies against the right entry."""

    entries: tuple[Entry, ...]
    values: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, entries: Sequence[Entry]) -> Subjects:
        return cls(tuple(entries), tuple(tuple(spoken_values(e.line())) for e in entries))

    def right(self, question: Question) -> Entry | None:
        """The question's right entry; None without one, or where the labels do not settle it (a venue of the
        operator's own: then an entry that holds the question's facts counts as right)."""
        try:
            index = right_entry(question, self.entries)
        except ConfigError:
            return None
        return None if index is None else self.entries[index]

    def judge(self, question: Question, reply: str, by: str, read_out: Entry | None) -> dict[str, Any]:
        """The item's fields: ``read_out`` (the entry read out, by its question or text), ``wrong_entry``,
        ``told_near_miss`` and ``wrong_subject`` (the values on another entry's subject, as spoken words)."""
        right = self.right(question)
        told = told_near_miss(reply)
        wrong_entry = False
        if by in READ_OUT_VERDICTS and read_out is not None and not told:
            if right is not None:
                wrong_entry = read_out.key != right.key
            else:
                wrong_entry = not (question.facts and has_fact(read_out.line(), question.facts))
        return {
            "read_out": None if read_out is None else (read_out.question or read_out.answer[:60]),
            "wrong_entry": wrong_entry,
            "told_near_miss": told,
            "wrong_subject": [] if told else self.wrong_subject(question, reply, right),
        }

    def wrong_subject(self, question: Question, reply: str, right: Entry | None) -> list[str]:
        """The values of ``reply`` that the knowledge gives, but not for the question's right entry (for a question
        without one: every value the knowledge gives). A question whose right entry the labels do not settle is
        judged against every entry that holds its facts."""
        own: list[str] = []
        if right is not None:
            own = list(self.values[self.entries.index(right)])
        elif question.facts:
            own = [v for e, vs in zip(self.entries, self.values, strict=True) if has_fact(e.line(), question.facts)
                   for v in vs]  # fmt: skip
        known = [v for vs in self.values for v in vs]
        return [v for v in spoken_values(reply) if states_value(v, known) and not states_value(v, own)]
