"""What kind of answer a question asks for, and whether an entry's answer has one.

A question about an entry's subject can ask something the entry does not say: "how much is a coffee in the cafe?"
is close in meaning to "is there a cafe?" (its answer: where the cafe is and when it opens), and so is "how many
lockers are there?" to "where can I leave my coat or bag?". Question answering systems have long checked the
*expected answer type* (TREC's QA track, Moldovan et al. 2000): a "how much" question wants an amount of money, a
"how many" question a number, a "how long" question a duration, "who discovered the wreck?" a person.
:func:`asked_type` reads the type off the question's wording (only the few unambiguous ones: "who" asks a person
only with a verb of making, finding or running, or a role such as "the director"; "who can help?" is answered by a
place, and "where" is left alone); :func:`has_type` looks for an answer of that type in a text (a person: a role
word, a title before a name, or "by" before a name). The kiosk (:mod:`edgevoice.kiosk.grounding`) gives a question
whose best entry has no answer of the asked type no answer from that entry.
"""

from __future__ import annotations

import re
from enum import Enum

from edgevoice.words import words

__all__ = ["AnswerType", "asked_type", "has_type", "lacks_asked"]


class AnswerType(Enum):
    MONEY = "money"
    COUNT = "count"
    DURATION = "duration"
    CLOCK = "clock"
    PERSON = "person"


_NUMBER_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|"
    r"eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|a dozen|dozens|"
    r"several|a few|a couple"
)
_COUNT = rf"(?:\d+(?:[.,]\d+)*|{_NUMBER_WORDS})"
_NUMBER = rf"(?:{_COUNT}|an?|half)"

_ROLES = (
    r"artists?|painters?|sculptors?|photographers?|architects?|designers?|builders?|founders?|owners?|directors?|"
    r"curators?|captains?|authors?|writers?|creators?|makers?|inventors?|discoverers?|explorers?|donors?|"
    r"collectors?|patrons?|managers?|chairman|chairwoman|president|mayor|king|queen"
)
_MADE = (  # verbs of making, finding or running something, in any tense ("painted", "paints", "drew")
    r"(?:paint|design|found|discover|invent|sculpt|photograph|direct|own|start|establish|collect|restore|fund|"
    r"build|make|write|create|carve|compose|donate|excavate|raise|draw)(?:ed|d|s|es)?|"
    r"built|made|wrote|written|drew|drawn|ran|runs|sank|sunk|paid for"
)

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
        rf"[€$£]\s?\d|\d\s?[€$£]|\b{_NUMBER}\s+(?:euros?|eur|dollars?|usd|pounds?|gbp|cents?|pence)\b|\bfree\b|"
        r"\bno charge\b|\bnothing\b|\bincluded\b",
        re.IGNORECASE,
    ),
    AnswerType.COUNT: re.compile(rf"\b{_COUNT}\b", re.IGNORECASE),
    AnswerType.DURATION: re.compile(
        rf"\b{_NUMBER}\s+(?:(?:and a half|or so)\s+)?"
        r"(?:seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)\b|"
        r"\buntil\b|\btill\b|\ball day\b|\bovernight\b|\bquarter of an hour\b",
        re.IGNORECASE,
    ),
    AnswerType.CLOCK: re.compile(
        r"\b\d{1,2}(?:[:.]\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.|o'clock|h)\b|\b\d{1,2}:\d{2}\b|\bnoon\b|\bmidnight\b|"
        r"\bo'clock\b|\bbefore closing\b|\bafter opening\b|\buntil\b|\bfrom\b.*\bto\b",
        re.IGNORECASE,
    ),
    # Case matters here: a name is capitalised ("painted by Anna Berg", "Captain Hendrik Vos", "Dr. Lee").
    AnswerType.PERSON: re.compile(
        rf"\b(?i:{_ROLES})\b|\b(?:Mr|Mrs|Ms|Dr|Sir|Dame|Lady|Lord|Prof|Professor|Captain|Saint|St)\.? [A-Z]|"
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
    """``question`` asks for a kind of answer that ``answer`` does not have ("how much is a coffee in the cafe?",
    "the Lighthouse Cafe is on the top floor, open from 10 am to 5 pm"). ``answers``: the question the operator
    wrote ``answer`` for; one asking the same kind vouches for it ("who painted the panorama? Anna Berg.": a bare
    name is no pattern's)."""
    kind = asked_type(question)
    return kind is not None and asked_type(answers) is not kind and not has_type(answer, kind)
