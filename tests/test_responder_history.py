"""The conversation history the responder owns: what an exchange adds, and taking back the one the visitor went on
with (the live loop's withdraw), the model's KV cache kept in step."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from edgevoice.clock import ManualClock
from edgevoice.events import ChatMessage, Transcript
from edgevoice.kiosk.prompt import prefix_messages
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth

PREFIX = prefix_messages("You are a test.", "The cafe is upstairs.")


class CuttingLlm(FakeLlm):
    """A model that can cut messages out of its KV cache, as the llama.cpp adapter can; records each cut."""

    def __init__(self, reply: str, clock: ManualClock) -> None:
        super().__init__(reply, clock, per_token=0.0)
        self.cuts: list[tuple[list[ChatMessage], list[ChatMessage]]] = []

    def forget_messages(self, before: Sequence[ChatMessage], dropped: Sequence[ChatMessage]) -> int:
        self.cuts.append((list(before), list(dropped)))
        return len(dropped)


def make() -> tuple[Responder, ManualClock, CuttingLlm]:
    clock = ManualClock()
    llm = CuttingLlm("It is upstairs.", clock)
    responder = Responder(
        FakeRecognizer("", clock, seconds=0.0), llm, FakeSynth(clock), PREFIX, max_tokens=20, max_sentences=2,
        clock=clock, history_tokens=10_000,
    )  # fmt: skip
    return responder, clock, llm


def exchange(responder: Responder, clock: ManualClock, text: str) -> list[ChatMessage]:
    trace = ReplyTrace(1, committed=clock.now())
    responder.respond_to(Transcript(text), trace, threading.Event(), lambda audio: len(audio))
    return responder.commit(trace, None)


def test_commit_returns_the_history_s_own_messages_it_added() -> None:
    responder, clock, _ = make()
    first = exchange(responder, clock, "Where is the cafe?")
    second = exchange(responder, clock, "And the shop?")
    assert [(m.role, m.content) for m in second] == [("user", "And the shop?"), ("assistant", "It is upstairs.")]
    assert all(a is b for a, b in zip(responder.history, [*first, *second], strict=True))


def test_commit_of_an_empty_transcript_adds_nothing_and_returns_nothing() -> None:
    responder, clock, _ = make()
    assert responder.commit(ReplyTrace(1, committed=clock.now()), None) == []
    assert responder.history == []


def test_forget_removes_exactly_those_messages_and_not_an_equal_exchange() -> None:
    responder, clock, _ = make()
    first = exchange(responder, clock, "Yes.")
    second = exchange(responder, clock, "Yes.")  # the same words twice: equal messages, other objects
    assert first == second
    responder.forget(second)
    assert len(responder.history) == 2 and all(a is b for a, b in zip(responder.history, first, strict=True))
    responder.forget(second)  # taken back already: nothing more goes
    assert len(responder.history) == 2


def test_forget_cuts_a_middle_exchange_out_of_the_kv_cache_but_leaves_the_last_to_the_next_prompt() -> None:
    responder, clock, llm = make()
    first = exchange(responder, clock, "Where is the cafe?")
    middle = exchange(responder, clock, "And the shop?")
    last = exchange(responder, clock, "Is there a lift?")
    responder.forget(middle)
    assert llm.cuts == [([*PREFIX, *first], middle)]  # what follows it stays cached, shifted back
    responder.forget(last)
    assert len(llm.cuts) == 1  # nothing follows: the next prompt overwrites it from the first difference
    assert responder.history == first
    exchange(responder, clock, "Thanks.")
    assert [m.content for m in llm.prompts[-1][len(PREFIX) :]] == ["Where is the cafe?", "It is upstairs.", "Thanks."]


def test_forget_never_waits_for_a_busy_model_and_still_takes_the_exchange_back() -> None:
    responder, clock, llm = make()
    first = exchange(responder, clock, "Where is the cafe?")
    exchange(responder, clock, "And the shop?")
    # the model is busy with a reply (its lock held) while the listener takes the first exchange back
    assert responder.between_replies(lambda: responder.forget(first), timeout=1.0)
    assert llm.cuts == []
    assert [m.content for m in responder.history] == ["And the shop?", "It is upstairs."]
