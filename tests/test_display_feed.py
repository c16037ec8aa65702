"""The display feed's states and exchange, from the loop's events one at a time on a manual clock (no server, no
threads): what a page is told, what it would be told on connecting, and when the words are forgotten."""

from __future__ import annotations

import asyncio
import json

import pytest

from edgevoice.clock import ManualClock
from edgevoice.display.feed import DisplayFeed, DisplayFull
from edgevoice.display.server import example_questions
from edgevoice.live.events import (
    AskedAgain,
    BargeIn,
    ClauseStarted,
    Fallback,
    FallbackReason,
    Listening,
    Partial,
    ReplyFinished,
    ReplyStarted,
    SpeechStarted,
    TurnCommitted,
)
from edgevoice.reply.trace import ReplyTrace
from tests.test_display_stream import turn

pytestmark = pytest.mark.unit


class Page:
    """A page attached to ``feed`` without a server: its frames read back as messages."""

    def __init__(self, feed: DisplayFeed) -> None:
        self.client, hello = feed.attach(lambda wake: wake())
        self.hello = json.loads(hello.split("data: ", 1)[1])

    def messages(self) -> list[dict[str, object]]:
        frames = asyncio.run(self.client.next(0.0)) or []
        return [json.loads(frame.split("data: ", 1)[1]) for frame in frames]


def feed(mode: str = "always", **kw: object) -> tuple[DisplayFeed, ManualClock, Page]:
    clock = ManualClock()
    f = DisplayFeed(None, mode=mode, clock=clock, clear_after_s=20.0, **kw)  # type: ignore[arg-type]
    return f, clock, Page(f)


def states(messages: list[dict[str, object]]) -> list[object]:
    return [m["state"] for m in messages if m["type"] == "state"]


def test_push_to_talk_is_idle_until_pressed_and_a_release_without_speech_goes_back() -> None:
    f, _clock, page = feed("push_to_talk")
    assert page.hello["state"] == "idle" and page.hello["mode"] == "push_to_talk"
    f.handle(Listening(True))
    f.handle(SpeechStarted(1, 0.0))
    f.handle(Listening(False))  # released without speech: the listener drops the turn
    assert states(page.messages()) == ["listening", "hearing", "idle"]


def test_asked_again_stays_after_the_end_until_the_visitor_speaks() -> None:
    f, _clock, page = feed()
    for event in (SpeechStarted(2, 0.0), TurnCommitted(turn(2)), ReplyStarted(2), AskedAgain(2)):
        f.handle(event)
    f.handle(ReplyFinished(ReplyTrace(2, committed=0.0), turn(2)))
    messages = page.messages()
    assert states(messages) == ["hearing", "thinking", "speaking", "asked_again"]
    assert messages[-1] == {"v": 1, "type": "end", "turn": 2}
    f.handle(SpeechStarted(3, 0.0))
    assert states(page.messages()) == ["hearing"]


def test_a_barge_in_is_told_and_the_next_turn_replaces_the_exchange() -> None:
    f, _clock, page = feed()
    for event in (SpeechStarted(4, 0.0), TurnCommitted(turn(4)), ReplyStarted(4), ClauseStarted(4, 0, "The cafe.")):
        f.handle(event)
    f.handle(BargeIn(4))
    f.handle(SpeechStarted(5, 0.0))
    f.handle(ReplyFinished(ReplyTrace(4, committed=0.0), turn(4)))  # the cut reply ends after the new turn began
    messages = page.messages()
    assert {"v": 1, "type": "barge_in", "turn": 4} in messages
    assert not [m for m in messages if m["type"] == "end"]  # turn 5 is on screen: turn 4's end changes nothing
    assert f.exchange == {"turn": 5, "transcript": "", "clauses": [], "current": -1}


def test_a_failed_reply_shows_the_error_state() -> None:
    f, _clock, page = feed()
    f.handle(SpeechStarted(1, 0.0))
    f.handle(Fallback(1, FallbackReason.ERROR))
    f.handle(Fallback(1, FallbackReason.LATE))  # late: still speaking, the phrase plays
    assert states(page.messages()) == ["hearing", "error"]


def test_words_are_forgotten_clear_after_s_after_the_end_or_after_they_stopped_coming() -> None:
    f, clock, page = feed()
    f.handle(SpeechStarted(1, 0.0))
    f.handle(Partial(1, "where is"))  # and then nothing: a turn dropped, a dead microphone
    clock.advance(19.0)
    f.tick()
    assert f.exchange is not None
    clock.advance(1.0)
    f.tick()
    assert f.exchange is None and page.messages()[-2:] == [
        {"v": 1, "type": "clear"},
        {"v": 1, "type": "state", "state": "listening"},
    ]
    f.handle(SpeechStarted(2, 0.0))
    f.handle(TurnCommitted(turn(2)))
    clock.advance(60.0)  # a reply in progress is never cleared under the visitor's eyes
    f.tick()
    assert f.exchange is not None
    f.handle(ReplyFinished(ReplyTrace(2, committed=0.0), turn(2)))
    clock.advance(20.0)
    f.tick()
    assert f.exchange is None


def test_max_clients_refuses_the_next_page() -> None:
    f, _clock, _page = feed(max_clients=2)
    Page(f)
    with pytest.raises(DisplayFull) as refused:
        Page(f)
    assert refused.value.code == "display_full" and f.refused == 1


def test_a_page_that_falls_behind_is_disconnected_not_waited_for() -> None:
    f, _clock, page = feed(client_queue=4)
    for i in range(5):
        f.handle(Partial(1, f"word {i}"))
    assert f.clients == 0 and f.disconnected == 1
    assert asyncio.run(page.client.next(0.0)) is None  # its stream ends; the browser reconnects to a fresh hello


def test_the_examples_are_the_knowledges_first_distinct_questions() -> None:
    questions = ["Where is the cafe?", "Opening hours", "where is  the cafe?", "Is there Wi-Fi?", "Parking?"]
    assert example_questions(questions, 2) == ["Where is the cafe?", "Is there Wi-Fi?"]
    assert example_questions(questions, 0) == []


def test_a_day_of_exchanges_keeps_the_feeds_memory_flat() -> None:
    """Thousands of exchanges through a feed with a page that reads them: what the feed holds does not grow."""
    import gc
    import tracemalloc

    f, clock, page = feed()

    def exchanges(first: int, count: int) -> None:
        for n in range(first, first + count):
            f.handle(SpeechStarted(n, 0.0))
            f.handle(Partial(n, "where is the cafe " * 10))
            f.handle(TurnCommitted(turn(n)))
            f.handle(ReplyStarted(n))
            for i in range(3):
                f.handle(ClauseStarted(n, i, "The cafe is upstairs, next to the window. " * 3))
            f.handle(ReplyFinished(ReplyTrace(n, committed=0.0), turn(n)))
            page.messages()
            clock.advance(30.0)
            f.tick()

    exchanges(1, 1000)  # warm-up: caches, interned strings
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.take_snapshot()
        exchanges(1001, 3000)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    mine = [tracemalloc.Filter(True, "*/edgevoice/display/*")]  # other tests' threads may still be allocating
    grown = sum(s.size_diff for s in after.filter_traces(mine).compare_to(before.filter_traces(mine), "filename"))
    # an exchange kept (its words, its messages) would be over 1 KB each, 3 MB in all; the allocator's own noise is
    # a few tens of KB whatever the count
    assert grown < 256 * 1024, grown
    assert f.exchange is None and f.clients == 1
