"""Whether a reply keeps to its question's subject (issue 33): the entry a reply reads out, as the kiosk records it,
and the venue benchmark's wrong-entry read-outs and numbers on the wrong subject."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from edgevoice.bench.quality_report import format_venues
from edgevoice.bench.subjects import Subjects
from edgevoice.bench.venue import Question, Venue
from edgevoice.bench.venue_quality import answer_venue, summarize
from edgevoice.data import sample_knowledge, sample_persona
from edgevoice.events import ChatMessage, Transcript
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.knowledge import Entry, parse_knowledge
from edgevoice.kiosk.prompt import DONT_KNOW_BUT, conversation


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
