"""Whether a reply keeps to its question's subject (issue 33): the entry a reply reads out, as the kiosk records it,
and the venue benchmark's wrong-entry read-outs and numbers on the wrong subject."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from edgevoice.bench.quality_report import format_venues
from edgevoice.bench.subjects import Subjects
from edgevoice.bench.venue import Question, Venue, load_venue
from edgevoice.bench.venue_quality import answer_venue, summarize
from edgevoice.data import sample_knowledge, sample_persona
from edgevoice.events import ChatMessage, Transcript
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.knowledge import Entry, parse_knowledge
from edgevoice.kiosk.prompt import DONT_KNOW, DONT_KNOW_BUT, conversation

ROOT = Path(__file__).resolve().parents[1]


class Says:
    """A language model that streams one set reply word by word."""

    def __init__(self, reply: str) -> None:
        self.reply = reply

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        yield from re.findall(r"\S+\s*", self.reply)


def _reply(kiosk: Kiosk, llm: Says, question: str) -> tuple[str, object]:
    grounded = kiosk.grounded(llm)  # type: ignore[arg-type]
    reply = "".join(grounded.stream_reply(conversation(kiosk.prefix, [], question), max_tokens=60))
    return reply, grounded


def test_a_direct_answer_and_the_answer_said_instead_of_an_echo_name_the_entry_they_read() -> None:
    kiosk = Kiosk(sample_persona(), sample_knowledge())
    grounding = kiosk.ground("Where is the shipwreck gallery?")
    assert grounding.direct is not None and grounding.direct_entry is not None
    assert grounding.direct_entry.question == "Where is the shipwreck gallery?"
    assert grounding.direct == grounding.direct_entry.answer
    reply, grounded = _reply(kiosk, Says("Never."), "Where is the shipwreck gallery?")
    assert grounded.last_verdict is Verdict.DIRECT  # type: ignore[attr-defined]
    assert grounded.last_read_out == grounding.direct_entry and reply == grounding.direct  # type: ignore[attr-defined]

    asking = Kiosk(sample_persona(), sample_knowledge(), direct_answers=False)
    reply, echoed = _reply(asking, Says("Yes, photography is allowed."), "Is photography allowed?")
    assert echoed.last_verdict is Verdict.ECHO  # type: ignore[attr-defined]
    assert echoed.last_read_out.question == "Can I take photos?" and reply == "Yes, without flash."  # type: ignore[attr-defined]
    reply, modelled = _reply(asking, Says("The shop is at the exit on the ground floor."), "Is there a shop?")
    assert modelled.last_verdict is Verdict.MODEL and modelled.last_read_out is None  # type: ignore[attr-defined]


ENTRIES = parse_knowledge(sample_knowledge())
PARKING = Question("park", "How much is the Quay Street car park?", (("3 euros",),), entry="Is there parking?")
TAXI = Question("taxi", "How much is a taxi to the station?", kind="out")
HELLO = Question("hi", "Hello!", kind="small_talk", small_talk="greeting")


def _entry(question: str) -> Entry:
    return next(e for e in ENTRIES if e.question == question)


def test_a_read_out_of_another_entry_is_wrong_whatever_it_says() -> None:
    subjects = Subjects.of(ENTRIES)
    audio, parking = _entry("Is there an audio guide?"), _entry("Is there parking?")
    # the audio guide's answer holds "3 euros" too: a right fact, but not about parking
    assert subjects.judge(PARKING, audio.answer, "direct", audio)["wrong_entry"]
    assert subjects.judge(PARKING, audio.answer, "echo", audio)["wrong_entry"]
    assert not subjects.judge(PARKING, parking.answer, "direct", parking)["wrong_entry"]
    assert not subjects.judge(PARKING, audio.answer, "model", None)["wrong_entry"]  # the model's words: no read-out
    assert subjects.judge(TAXI, parking.answer, "direct", parking)["wrong_entry"]  # no entry answers it
    told = f"{DONT_KNOW_BUT} {parking.answer}"
    judged = subjects.judge(TAXI, told, "gate", None)
    assert judged["told_near_miss"] and not judged["wrong_entry"] and judged["wrong_subject"] == []


def test_a_number_the_knowledge_gives_for_another_subject_is_counted() -> None:
    subjects = Subjects.of(ENTRIES)
    assert subjects.judge(TAXI, "The taxi costs 3 euros per hour.", "model", None)["wrong_subject"] == ["three"]
    assert subjects.judge(PARKING, "It costs 3 euros per hour.", "model", None)["wrong_subject"] == []
    wrong = subjects.judge(PARKING, "Parking costs 14 euros, or 3 euros an hour.", "model", None)
    assert wrong["wrong_subject"] == ["fourteen"]  # the adults' ticket price, moved to parking
    assert subjects.judge(TAXI, "A taxi costs 27 euros.", "model", None)["wrong_subject"] == []  # invented instead
    assert subjects.judge(HELLO, "Hello! How can I help?", "small talk", None)["wrong_subject"] == []


def test_the_venue_rows_and_table_count_wrong_entries_and_subjects() -> None:
    audio = _entry("Is there an audio guide?")
    venue = Venue("museum", sample_knowledge(), sample_persona(), (PARKING, TAXI))
    replies = {PARKING.text: (audio.answer, "direct", audio), TAXI.text: ("The taxi costs 3 euros.", "model", None)}

    def ask(heard: tuple[Transcript, ...]) -> list[tuple[str, str]]:
        return [replies[t.text][:2] for t in heard]

    def read_outs(heard: tuple[Transcript, ...]) -> list[Entry | None]:
        return [replies[t.text][2] for t in heard]

    texts = {q.id: Transcript(q.text) for q in venue.questions}
    items = answer_venue(venue, venue.questions, "written", "", texts, ask, read_outs)
    by_id = {i["id"]: i for i in items}
    assert by_id["park"]["read_out"] == "Is there an audio guide?" and by_id["park"]["wrong_entry"]
    assert by_id["park"]["right"]  # the fact is there: only the entry says it was read from the wrong subject
    assert by_id["taxi"]["wrong_subject"] == ["three"] and not by_id["taxi"]["wrong_entry"]
    row = summarize(items)
    assert (row["wrong_entry"], row["wrong_subject"], row["told_near_miss"]) == (1, 1, 0)
    report = {"voices": [], "conditions": [], "models": {"asr": "a", "llm": "b"}, "seconds": 1.0,
              "rows": [{"venue": "museum", "split": "dev", "input": "written", "voice": "written", **row}]}  # fmt: skip
    table = format_venues(report)
    assert "wrong entry" in table and "wrong subj" in table


def test_a_question_is_about_an_entry_when_the_entry_has_every_word_it_names() -> None:
    library = load_venue(ROOT / "venues/library")
    kiosk = Kiosk(library.persona, library.knowledge)
    printing = next(e for e in kiosk.entries if e.question == "Can I print or photocopy?")
    assert kiosk.check.about("Can I print in the copy corner?", printing, None)
    assert kiosk.check.about("How much does it cost to photocopy a page?", printing, None)  # asking words name nothing
    # a near miss: about the copy corner, but it asks what the entry does not say
    assert not kiosk.check.about("Can I scan documents in the copy corner?", printing, 0.9)
    # a paraphrase shares no word: its meaning decides
    assert kiosk.check.about("I need a paper version of my boarding pass", printing, 0.5)
    assert not kiosk.check.about("I need a paper version of my boarding pass", printing, 0.3)
    assert not kiosk.check.about("I need a paper version of my boarding pass", printing, None)


def test_an_echo_is_replaced_by_the_best_entry_only_when_the_question_is_about_it() -> None:
    kiosk = Kiosk(sample_persona(), sample_knowledge(), direct_answers=False)
    reply, echoed = _reply(kiosk, Says("The whale skeleton is there."), "Where is the whale skeleton?")
    assert reply == "In the whale hall on the first floor." and echoed.last_read_out is not None  # type: ignore[attr-defined]
    reply, declined = _reply(kiosk, Says("Yes, the whale skeleton is real bone."), "Is the whale skeleton real bone?")
    assert reply == DONT_KNOW and declined.last_verdict is Verdict.ECHO  # type: ignore[attr-defined]
    assert declined.last_read_out is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("question", "supported"),
    [
        ("When is the cafe open?", True),
        ("Is the cafe open on Sundays?", True),  # one word the entry lacks is let through
        ("Is the cafe open on public holidays?", False),  # the weekday hours, moved to holidays
    ],
)
def test_a_number_is_supported_only_for_the_subject_the_evidence_gives_it_for(question: str, supported: bool) -> None:
    kiosk = Kiosk(sample_persona(), sample_knowledge())
    evidence = kiosk.ground(question).entries
    assert kiosk.check.supported("The cafe is open from 10 am to 5 pm.", question, evidence) is supported


@pytest.mark.models
def test_a_near_miss_is_no_longer_read_out_with_the_real_encoder() -> None:
    from edgevoice.app import build_kiosk
    from edgevoice.bench.venue_quality import venue_config
    from edgevoice.config import Config

    library = load_venue(ROOT / "venues/library")
    kiosk = build_kiosk(venue_config(Config(), library))
    assert kiosk.semantic is not None
    near_miss = kiosk.ground("Can I scan documents in the copy corner?")  # read out as the printing entry before
    assert near_miss.direct is None and near_miss.direct_entry is None
    right = kiosk.ground("Where can I return books?")
    assert right.direct_entry is not None and right.direct_entry.question == "Where can I return books?"


OFFICE = """
[[qa]]
question = "How do I get to the airport?"
answer = "The airport shuttle leaves every hour and costs 12 euros per person. A taxi takes about 25 minutes."

[[qa]]
question = "Can we get married here?"
answer = "Yes, civil weddings take place in the Mirror Hall on the second floor; book six weeks ahead."

[[qa]]
question = "Certificate of residence"
answer = "10 euros, printed at once at any counter."

[[qa]]
question = "Where is my room?"
answer = "The first digit of your room number is the floor: room 412 is on the fourth floor."

[[qa]]
question = "Where can I park?"
answer = "In the car park under the square: 2 euros per hour."
"""


def _office() -> tuple[Kiosk, dict[str, Entry]]:
    kiosk = Kiosk("You are Ada, the front desk assistant.", OFFICE)
    return kiosk, {e.question: e for e in kiosk.entries}


@pytest.mark.parametrize(
    ("question", "topic", "about"),
    [
        # it shares one word and names another of the venue's things: the certificate is not the wedding's
        ("How much is a marriage certificate?", "Certificate of residence", False),
        ("How much is a certificate of residence?", "Certificate of residence", True),
        # every word is the entry's, but the price it gives is the shuttle's, not the taxi's
        ("How much does a taxi to the airport cost?", "How do I get to the airport?", False),
        ("How much is the airport shuttle?", "How do I get to the airport?", True),
        ("How long does a taxi to the airport take?", "How do I get to the airport?", True),
    ],
)
def test_an_entry_is_read_out_only_to_a_question_about_it(question: str, topic: str, about: bool) -> None:
    kiosk, entries = _office()
    assert kiosk.check.about(question, entries[topic], None) is about
    grounding = kiosk.ground(question)
    if not about:  # never read out, whatever ranks first
        assert grounding.direct_entry is None or grounding.direct_entry.question != topic


@pytest.mark.parametrize(
    ("question", "reply", "supported"),
    [
        ("How much is a taxi to the station?", "The taxi costs 2 euros per hour.", False),  # the parking price
        ("How much is parking?", "Parking costs 2 euros per hour.", True),
        ("How much is parking?", "It is 2 euros per hour.", True),
        ("How much is a marriage certificate?", "10 euros, printed at once at any counter.", False),
        ("How much is a certificate of residence?", "10 euros, printed at once at any counter.", True),
        ("How many floors does the building have?", "The building has 4 floors.", False),  # "the fourth floor"
        ("Which floor is room 412 on?", "Room 412 is on the fourth floor.", True),
    ],
)
def test_a_number_is_supported_only_where_the_evidence_gives_it_for_that_subject(
    question: str, reply: str, supported: bool
) -> None:
    kiosk, _ = _office()
    assert kiosk.check.supported(reply, question, kiosk.entries) is supported


TRAVEL = """
[[qa]]
question = "How do I get to the airport?"
answer = "The airport shuttle leaves every hour and costs 12 euros per person. A taxi takes about 25 minutes."

[[qa]]
question = "Can I rent a bicycle?"
answer = "City bikes cost 25 euros a day at the front desk."
"""


@pytest.mark.parametrize(
    ("question", "reply", "supported"),
    [
        # the taxi's 25 is minutes; the 25 euros are the bikes': no sentence gives the taxi 25 euros
        ("How much does a taxi to the airport cost?", "A taxi to the airport costs 25 euros.", False),
        ("How long does a taxi to the airport take?", "A taxi takes about 25 minutes.", True),
        ("How long does the taxi take?", "About 25 minutes.", True),
        ("How long does a taxi to the airport take?", "About 25 hours.", False),
        ("How much is a city bike?", "City bikes cost 25 euros a day.", True),
        ("How much is the airport shuttle?", "The shuttle costs 12 euros per person.", True),
    ],
)
def test_a_number_keeps_the_unit_the_evidence_gives_it_in(question: str, reply: str, supported: bool) -> None:
    kiosk = Kiosk("You are Ada, the front desk assistant.", TRAVEL)
    assert kiosk.check.supported(reply, question, kiosk.entries) is supported
