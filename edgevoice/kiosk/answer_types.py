"""What kind of answer a question asks for, and whether an entry's answer has one.

A question about an entry's subject can ask something the entry does not say: "how much is a coffee in the
restaurant?" is close in meaning to "is there a restaurant?" (its answer: where it is and when it opens), and so is
"how many lockers are there?" to "where can I leave my coat or bag?". Question answering systems have long checked
the *expected answer type* (TREC's QA track, Moldovan et al. 2000): a "how much" question wants an amount of money, a
"how many" question a number, a "how long" question a duration, "who built the tower?" a person.
:func:`asked_type` reads the type off the question's wording (only the few unambiguous ones: "who" asks a person
only with a verb of making, finding or running, or a role such as "the director"; "who can help?" is answered by a
place, and "where" is left alone); :func:`has_type` looks for an answer of that type in a text (a person: a role
word, a title before a name, or "by" before a name). The words these are built from are in
``edgevoice/data/en/answer_types.toml``. The kiosk (:mod:`edgevoice.kiosk.grounding`) gives a question
whose best entry has no answer of the asked type no answer from that entry.
"""

from __future__ import annotations

import re
from enum import Enum

from edgevoice import data
from edgevoice.words import words

__all__ = ["AnswerType", "asked_type", "has_type", "lacks_asked", "without_yes_no"]


class AnswerType(Enum):
    MONEY = "money"
    COUNT = "count"
    DURATION = "duration"
    CLOCK = "clock"
    PERSON = "person"


_WORDS = data.table("en/answer_types.toml")


def _alternatives(key: str) -> str:
    """The words of ``key`` in the answer types' data file as regex alternatives ("artist(s)": "artists?")."""
    return "|".join(re.escape(w.removesuffix("(s)")) + ("s?" if w.endswith("(s)") else "") for w in _WORDS[key])


_NUMBER_WORDS = _alternatives("number_words")
_COUNT = rf"(?:\d+(?:[.,]\d+)*|{_NUMBER_WORDS})"
_NUMBER = rf"(?:{_COUNT}|an?|half)"

_ROLES = _alternatives("roles")
_MADE = rf"(?:{_alternatives('made_stems')})(?:ed|d|s|es)?|{_alternatives('made_forms')}"
"""Verbs of making, finding or running something, in any tense ("painted", "paints", "drew")."""
_TITLES = _alternatives("titles")

_ASKS: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    (
        AnswerType.MONEY,
        re.compile(
            r"\bhow much (?:is|are|does|do|will|would|for|to)\b|\bwhat (?:does|do|will) .+ cost\b|"
            r"\bwhat(?:'s| is) the (?:price|cost|fee)\b|\bhow expensive\b"
        ),
    ),
    (AnswerType.COUNT, re.compile(r"\bhow many\b")),
    (AnswerType.DURATION, re.compile(r"\bhow long\b")),
    (AnswerType.CLOCK, re.compile(r"\bwhat time\b|\bat what time\b|\bhow (?:late|early)\b")),
    (
        AnswerType.PERSON,
        re.compile(
            rf"\bwho(?:'s| is| was| were| has| had)? (?:(?:first|originally|actually|really) )?(?:{_MADE})\b|"
            rf"\bwho(?:'s| is| was| were) (?:the|your|its|their) (?:\w+ )?(?:{_ROLES})\b"
        ),
    ),
)

_HAS: dict[AnswerType, re.Pattern[str]] = {
    AnswerType.MONEY: re.compile(
        rf"[€$£]\s?\d|\d\s?[€$£]|\b{_NUMBER}\s+(?:{_alternatives('money_units')})\b|"
        rf"\b(?:{_alternatives('money_words')})\b",
        re.IGNORECASE,
    ),
    AnswerType.COUNT: re.compile(rf"\b{_COUNT}\b", re.IGNORECASE),
    AnswerType.DURATION: re.compile(
        rf"\b{_NUMBER}\s+(?:(?:and a half|or so)\s+)?(?:{_alternatives('duration_units')})\b|"
        rf"\b(?:{_alternatives('duration_words')})\b",
        re.IGNORECASE,
    ),
    AnswerType.CLOCK: re.compile(
        r"\b\d{1,2}(?:[:.]\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.|o'clock|h)\b|\b\d{1,2}:\d{2}\b|\bnoon\b|\bmidnight\b|"
        r"\bo'clock\b|\bbefore closing\b|\bafter opening\b|\buntil\b|\bfrom\b.*\bto\b",
        re.IGNORECASE,
    ),
    # Case matters here: a name is capitalised ("painted by Anna Berg", "Captain Hendrik Vos", "Dr. Lee").
    AnswerType.PERSON: re.compile(
        rf"\b(?i:{_ROLES})\b|\b(?:{_TITLES})\.? [A-Z]|"
        r"\b(?i:by) (?:the )?[A-Z][a-z]"
    ),
}


def asked_type(question: str) -> AnswerType | None:
    """The kind of answer ``question`` asks for, when its wording says so plainly; None otherwise."""
    text = " ".join(words(question))
    for kind, pattern in _ASKS:
        if pattern.search(text):
            return kind
    return None


def has_type(text: str, kind: AnswerType) -> bool:
    """Whether ``text`` holds an answer of kind ``kind`` (an amount of money, a number, a duration, a time, a
    person)."""
    return _HAS[kind].search(text) is not None


def lacks_asked(question: str, answer: str, answers: str = "") -> bool:
    """``question`` asks for a kind of answer that ``answer`` does not have ("how much is a coffee in the
    restaurant?", "the restaurant is on the top floor, open from 10 am to 5 pm"). ``answers``: the question the operator
    wrote ``answer`` for; one asking the same kind vouches for it ("who painted the panorama? Anna Berg.": a bare
    name is no pattern's)."""
    kind = asked_type(question)
    return kind is not None and asked_type(answers) is not kind and not has_type(answer, kind)


_YES_NO = re.compile(rf"^\s*(?:{_alternatives('yes_no')})\b[\s,.!;:-]*", re.IGNORECASE)


def without_yes_no(answer: str) -> str:
    """``answer`` without the "yes" or "no" that opens it ("Yes, the free network ..." is "The free network ..."):
    what it says, without agreeing or disagreeing with what was asked."""
    rest = _YES_NO.sub("", answer, count=1)
    return rest[:1].upper() + rest[1:] if rest else answer
