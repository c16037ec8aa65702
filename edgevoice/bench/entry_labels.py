"""Which knowledge entry answers a benchmark question: the label a scripted operator attaches a miss to, and the
entry a direct read-out must be to be right.

A question's ``entry`` key in ``questions.toml`` (an entry's question, or the start of its text) names it outright;
otherwise it is the entry whose text holds a spelling of every one of the question's fact groups, when exactly one
does. A question without facts (out, near_miss, small_talk) has no entry.
"""

from __future__ import annotations

from collections.abc import Sequence

from edgevoice.bench.scoring import has_fact
from edgevoice.bench.venue import Question
from edgevoice.errors import ConfigError
from edgevoice.kiosk.knowledge import Entry

__all__ = ["right_entry"]


def right_entry(question: Question, entries: Sequence[Entry]) -> int | None:
    """The index in ``entries`` of the entry that answers ``question``; None for a question outside the knowledge.
    A ConfigError when the label names no entry, or the facts fit none or several and no label settles it."""
    if question.entry:
        named = [i for i, e in enumerate(entries) if _names(question.entry, e)]
        if len(named) != 1:
            found = "no entry" if not named else f"{len(named)} entries"
            raise ConfigError(f"question {question.id}: entry {question.entry!r} names {found}")
        return named[0]
    if not question.facts:
        return None
    fits = [i for i, e in enumerate(entries) if has_fact(e.line(), question.facts)]
    if len(fits) != 1:
        found = "no entry" if not fits else f"{len(fits)} entries"
        raise ConfigError(f'question {question.id}: its facts fit {found}; name one with entry = "..."')
    return fits[0]


def _names(label: str, entry: Entry) -> bool:
    label = label.strip().casefold()
    return entry.question.strip().casefold() == label or entry.line().casefold().startswith(label)
