"""Numbers written as words, read as digits for the reply check (:mod:`edgevoice.kiosk.number_words`), and the check
that compares them alike in a reply and in the knowledge."""

from __future__ import annotations

import pytest

from edgevoice.kiosk.knowledge import parse_knowledge
from edgevoice.kiosk.number_words import as_digits
from edgevoice.kiosk.reply_check import ReplyCheck, values
from edgevoice.kiosk.retrieval import BM25Index


@pytest.mark.parametrize(
    ("said", "read"),
    [
        ("It costs ten euros.", "It costs 10 euros."),
        ("Two hundred people fit in the hall.", "200 people fit in the hall."),
        ("one thousand two hundred", "1200"),
        ("twenty-five euros", "25 euros"),
        ("Come at eleven o'clock.", "Come at 11 o'clock."),
        ("It opens at twenty past nine.", "It opens at 9:20."),
        ("from half past seven", "from 7:30"),
        ("It closes at a quarter to ten.", "It closes at 9:45."),
        ("ten minutes to nine", "8:50"),
        ("quarter past 10", "10:15"),
        ("Up to twenty-five minutes past eight.", "Up to 8:25."),
        # a span of hours is no clock phrase: "from ten to twelve" is not 11:50
        ("Open from ten to twelve.", "Open from 10 to 12."),
        # a lone "one" or "two" is rarely a value: "the nearest one", "one of the best"
        ("The nearest one is across the street.", "The nearest one is across the street."),
        ("Half an hour before closing.", "Half an hour before closing."),
        # digits and out-of-range clock phrases stay as they were
        ("The hotel was built in 1985, at 9:30.", "The hotel was built in 1985, at 9:30."),
        ("70 past 30", "70 past 30"),
    ],
)
def test_numbers_in_words_are_read_as_digits(said: str, read: str) -> None:
    assert as_digits(said) == read
    assert as_digits(read) == read  # the same text read twice is read the same


def test_values_in_words_are_values() -> None:
    assert values("Tickets are ten euros.") == ["10"]
    assert values("It opens at twenty past nine.") == ["9:20"]
    assert values("Come at eleven o'clock.") == ["11"]
    assert values("It is 10 am.") == values("It is ten am.") == ["10"]


KNOWLEDGE = """\
How long does a new passport take? About four weeks, or three working days for an express passport.
How much is a passport? 70 euros for adults, 37.50 euros for anyone under 24.
When does the office open? At 8:30 on weekdays.
Are there meeting rooms? Yes, three meeting rooms on the first floor, each for up to 40 people.
How much is a museum ticket? 14 euros, or 7 for children.
"""


@pytest.fixture(scope="module")
def check() -> tuple[ReplyCheck, list]:  # type: ignore[type-arg]
    entries = parse_knowledge(KNOWLEDGE)
    return ReplyCheck(BM25Index([e.search_text() for e in entries]), frozenset()), entries


@pytest.mark.parametrize(
    ("question", "reply", "supported"),
    [
        # the knowledge's words support the reply's digits, and its digits the reply's words
        ("How long does a new passport take?", "It takes about 4 weeks.", True),
        ("How long does a new passport take?", "About four weeks.", True),
        ("How much is a passport?", "A passport costs seventy euros for adults.", True),
        ("When does the office open?", "It opens at half past eight on weekdays.", True),
        # an invented value in words is a value like any other
        ("How long does a new passport take?", "It takes about six weeks.", False),
        ("How much is a passport?", "A passport costs ninety euros for adults.", False),
        ("When does the office open?", "It opens at a quarter to nine on weekdays.", False),
        ("How much is a passport?", "The office was built in nineteen eighty-five.", False),
        # a number the knowledge gives, counting what it counts with another number
        ("Are there meeting rooms?", "3 people fit in a meeting room.", False),
        ("Are there meeting rooms?", "Up to forty people fit in a meeting room.", True),
        ("Are there meeting rooms?", "There are three meeting rooms, on the first floor.", True),
        ("How much is a museum ticket?", "Children pay 7 euros.", True),  # "7 for children": 7 counts nothing
    ],
)
def test_the_check_compares_numbers_however_written(
    check: tuple[ReplyCheck, list],  # type: ignore[type-arg]
    question: str,
    reply: str,
    supported: bool,
) -> None:
    rc, entries = check
    best = sorted(entries, key=lambda e: e.question != question)  # the entry asked about first, as retrieved
    assert rc.supported(reply, question, best) is supported
