"""Follow-ups: a question that leans on the one before it ("And on Sundays?", "What about children?"), which
:meth:`~edgevoice.kiosk.grounding.Kiosk.ground_follow_up` grounds together with the visitor's previous question too.
A question is one when it starts with an opener of ``edgevoice/data/en/follow_up.toml``."""

from __future__ import annotations

from edgevoice import data
from edgevoice.words import words

__all__ = ["FOLLOW_UP_OPENERS", "follows_up"]

FOLLOW_UP_OPENERS = tuple(tuple(words(o)) for o in data.table("en/follow_up.toml")["openers"])
"""How a follow-up starts ("and", "what about"; ``edgevoice/data/en/follow_up.toml``)."""


def follows_up(question: str) -> bool:
    """Whether ``question`` leans on the one before it: it starts with a follow-up's opener ("And on Sundays?")."""
    said = words(question)
    return any(tuple(said[: len(o)]) == o for o in FOLLOW_UP_OPENERS)
