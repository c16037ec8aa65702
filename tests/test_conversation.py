"""A conversation lapses after ``[kiosk] conversation_timeout_s`` without a turn: the next visitor starts anew."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from edgevoice.app import build_assistant
from edgevoice.clock import ManualClock
from edgevoice.config import Config
from edgevoice.events import Transcript
from edgevoice.interfaces import Engines
from edgevoice.kiosk.prompt import prefix_messages
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth, FakeVad

PREFIX = prefix_messages("You are a test.", "The cafe is upstairs.")


def ask(responder: Responder, clock: ManualClock, text: str) -> None:
    trace = ReplyTrace(1, committed=clock.now())
    responder.respond_to(Transcript(text), trace, threading.Event(), lambda audio: len(audio))
    responder.commit(trace, None)


def make(timeout: float) -> tuple[Responder, FakeLlm, ManualClock]:
    clock = ManualClock()
    llm = FakeLlm("It is upstairs.", clock, per_token=0.0)
    responder = Responder(
        FakeRecognizer("", clock, seconds=0.0), llm, FakeSynth(clock), PREFIX, max_tokens=20, max_sentences=2,
        clock=clock, conversation_timeout_s=timeout,
    )  # fmt: skip
    return responder, llm, clock


def test_a_question_after_the_timeout_reaches_the_model_without_the_last_visitors_words() -> None:
    responder, llm, clock = make(60.0)
    ask(responder, clock, "Where is the cafe?")
    clock.advance(59.0)
    ask(responder, clock, "And the shop?")  # within the timeout: one conversation
    assert [m.content for m in llm.prompts[-1][len(PREFIX) :]] == [
        "Where is the cafe?",
        "It is upstairs.",
        "And the shop?",
    ]
    clock.advance(61.0)
    ask(responder, clock, "Is there a lift?")  # counted from the last exchange, not the first
    assert [m.content for m in llm.prompts[-1][len(PREFIX) :]] == ["Is there a lift?"]
    assert [m.content for m in responder.history] == ["Is there a lift?", "It is upstairs."]


@pytest.mark.parametrize("timeout", [0.0, 3600.0])
def test_without_a_timeout_or_within_it_the_conversation_goes_on(timeout: float) -> None:
    responder, llm, clock = make(timeout)
    ask(responder, clock, "Where is the cafe?")
    clock.advance(600.0)
    assert not responder.expire_history()
    ask(responder, clock, "And the shop?")
    assert len(llm.prompts[-1]) == len(PREFIX) + 3


def test_the_assistant_forgets_after_the_configured_timeout() -> None:
    clock = ManualClock()
    llm = FakeLlm("The shop is at the exit.", clock, per_token=0.0)
    engines = Engines(vad=FakeVad(), recognizer=FakeRecognizer("", clock), llm=llm, synthesizer=FakeSynth(clock))
    config = Config()
    assistant = build_assistant(
        replace(config, kiosk=replace(config.kiosk, conversation_timeout_s=30.0)), engines, clock=clock
    )
    ask(assistant.responder, clock, "Is there a shop?")
    clock.advance(31.0)
    assert assistant.responder.expire_history() and assistant.history == []
