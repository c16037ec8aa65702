"""Which turns go to the review inbox, the trace's ranked entries and margin they are read from, and the bus subscriber
that keeps them without slowing the loop or writing what was said to the journal."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from edgevoice.app import build_kiosk
from edgevoice.clock import ManualClock
from edgevoice.config.load import config_from_dict
from edgevoice.converse import Assistant
from edgevoice.interfaces import Engines
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.knowledge import parse_knowledge
from edgevoice.kiosk.prompt import ASK_AGAIN, DONT_KNOW
from edgevoice.live.bus import EventBus
from edgevoice.live.events import ReplyFinished, Transcribed
from edgevoice.live.review_inbox import ReviewCollector, review_reason
from edgevoice.reply.trace import ReplyTrace
from edgevoice.review.store import Ranked, ReviewStore
from tests.admin_fakes import answer
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth, FakeVad
from tests.test_semantic import FAKE_KNOWLEDGE, SAMPLE_PERSONA, ConceptEmbedder

FACTS = "What time do you open? We open at nine in the morning.\nIs there a cloakroom? Yes, by the entrance.\n"


def trace(verdict: str | None, reply: str = "We open at nine.", margin: float | None = 0.5, **kw: object) -> ReplyTrace:
    t = ReplyTrace(1, committed=0.0, transcript="when do you open", reply=reply, verdict=verdict, margin=margin)
    for name, value in kw.items():
        setattr(t, name, value)
    return t


@pytest.mark.parametrize(
    ("made", "reason"),
    [
        (trace("gate", DONT_KNOW), "refused"),
        (trace("unsupported", DONT_KNOW), "refused"),
        (trace("model", DONT_KNOW), "refused"),  # the model declined by itself
        (trace("model", "Please ask at the cloakroom."), "refused"),  # ... and named a place the knowledge gives
        (trace("direct", "Please ask at the cloakroom.", margin=0.5), None),  # the operator's own answer
        (trace("unheard", ASK_AGAIN), "asked_again"),
        (trace("model", margin=0.01), "low_margin"),
        (trace("direct", margin=0.01), "low_margin"),
        (trace("model", margin=0.5), None),
        (trace("model", margin=None), None),  # matched by words only: no margin to judge
        (trace("small talk", "Hello! How can I help?", margin=0.0), None),
        (trace("gate", DONT_KNOW, fallback="error"), None),  # a fault, not the knowledge
        (trace("gate", DONT_KNOW, transcript=" "), None),
        (trace(None, DONT_KNOW), None),  # no grounding
    ],
)
def test_what_goes_to_the_inbox(made: ReplyTrace, reason: str | None) -> None:
    assert review_reason(made, low_margin=0.08) == reason


def fake_assistant(config_kiosk: dict[str, object], *, embedder: object = None) -> Assistant:
    clock = ManualClock()
    config = config_from_dict({"kiosk": {"mend_misheard": False, **config_kiosk}})
    engines = Engines(
        vad=FakeVad(),
        recognizer=FakeRecognizer("", clock),
        llm=FakeLlm("We open at nine.", clock),
        synthesizer=FakeSynth(clock),
    )
    return Assistant(config, engines, kiosk=build_kiosk(config, embedder=embedder), clock=clock)  # type: ignore[arg-type]


def test_the_trace_names_the_entries_ranked_first() -> None:
    assistant = fake_assistant({"knowledge": FACTS, "semantic": False})
    entries = parse_knowledge(FACTS)
    answered = answer(assistant, "What time do you open?")
    assert answered.verdict == "direct"
    assert answered.ranked[0] == entries[0].key and len(answered.ranked) <= 3
    assert answered.margin is None  # by words only
    refused = answer(assistant, "Where can I park my bicycle?", turn=2)
    assert refused.verdict == "gate" and refused.reply == DONT_KNOW


def test_the_margin_is_the_lead_of_the_best_entry_by_meaning() -> None:
    kiosk = Kiosk(SAMPLE_PERSONA, FAKE_KNOWLEDGE, embedder=ConceptEmbedder())
    clear = kiosk.ground("Is a snapshot OK?")  # the photo entry's concept alone: similarity 1 against 0
    assert clear.margin == pytest.approx(1.0, abs=0.26)  # plus a quarter of the word coverage's difference
    both = kiosk.ground("Where can I take a snapshot?")  # as close to both entries
    assert both.margin is not None and 0.0 <= both.margin < clear.margin - 0.5
    assert Kiosk(SAMPLE_PERSONA, FAKE_KNOWLEDGE).ground("Is a snapshot OK?").margin is None


def test_the_reply_trace_carries_the_margin() -> None:
    assistant = fake_assistant({"knowledge": FAKE_KNOWLEDGE, "semantic": True}, embedder=ConceptEmbedder())
    traced = answer(assistant, "Where can I take a snapshot?")
    assert traced.margin is not None and traced.margin < 0.5
    assert traced.ranked and set(traced.ranked) <= {e.key for e in parse_knowledge(FAKE_KNOWLEDGE)}


def finished(text: str, verdict: str, reply: str, ranked: tuple[str, ...], turn_id: int = 1) -> ReplyFinished:
    made = ReplyTrace(turn_id, committed=0.0, transcript=text, reply=reply, verdict=verdict, ranked=ranked)
    return ReplyFinished(made, None)  # type: ignore[arg-type]  # the subscriber reads the trace only


def test_the_subscriber_keeps_refused_turns_and_logs_no_words(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    entries = parse_knowledge(FACTS)
    store = ReviewStore(tmp_path, keep_days=14, max_items=500)
    bus = EventBus()
    collector = ReviewCollector(store, lambda: entries, low_margin=0.08)
    bus.subscribe(collector, name="review")
    ranked = (entries[1].key, "feedbeefcafe", entries[0].key)  # one key no longer in the knowledge
    with caplog.at_level(logging.DEBUG):
        bus.publish(Transcribed(1, "Is there a cash point? My number is 0612345678"))
        bus.publish(finished("Is there a cash point? My number is 0612345678", "gate", DONT_KNOW, ranked))
        bus.publish(finished("What time do you open?", "direct", "We open at nine.", ranked[:1], turn_id=2))
        assert bus.wait_delivered(10)
    (item,) = store.items()
    assert item.question == "Is there a cash point? My number is [number]" and item.reason == "refused"
    assert item.ranked == (
        Ranked(entries[1].key, "Is there a cloakroom?"),
        Ranked(entries[0].key, "What time do you open?"),
    )
    assert item.reply == DONT_KNOW and collector.kept == 1
    assert "cash point" not in caplog.text and "0612345678" not in caplog.text
    bus.close()
    store.close()


def test_a_full_disk_costs_the_inbox_an_item_not_the_loop(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    entries = parse_knowledge(FACTS)
    store = ReviewStore(tmp_path, keep_days=14, max_items=500)
    store.add("Is there a cash point?", reason="refused", verdict="gate", reply=DONT_KNOW, ranked=[], margin=None)
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")  # the file can grow no more: SQLITE_FULL, as a full disk
    bus = EventBus()
    subscription = bus.subscribe(ReviewCollector(store, lambda: entries, low_margin=0.08), name="review")
    long = "Where can I leave a parcel for my sister who works here? " * 40  # more than the free room of a page
    with caplog.at_level(logging.WARNING):
        for turn in range(3):
            bus.publish(finished(f"{long} {turn}", "gate", DONT_KNOW, (), turn_id=turn))
        assert bus.wait_delivered(10)
    assert subscription.delivered == 3 and [i.question for i in store.items()] == ["Is there a cash point?"]
    assert "event subscriber review failed" in caplog.text and "parcel" not in caplog.text
    bus.close()
    store.close()
