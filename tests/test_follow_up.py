"""Follow-ups ("And on Thursdays?") grounded with the visitor's previous question
(:meth:`edgevoice.kiosk.grounding.Kiosk.ground_follow_up`), on the sample venue by words alone."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from edgevoice.data import sample_knowledge, sample_persona
from edgevoice.events import ChatMessage
from edgevoice.kiosk.follow_up import follows_up
from edgevoice.kiosk.grounded_model import previous_question
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.prompt import conversation

HOURS = "When is the museum open?"


class AskedLlm:
    """Says ``reply`` and remembers that it was asked."""

    def __init__(self, reply: str = "I don't know that.") -> None:
        self.reply, self.asked = reply, 0

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        self.asked += 1
        yield self.reply


@pytest.fixture(scope="module")
def kiosk() -> Kiosk:
    return Kiosk(sample_persona(), sample_knowledge())


def hours(kiosk: Kiosk) -> str:
    (answer,) = [e.answer for e in kiosk.entries if e.question == HOURS]
    assert "Thursdays until 9 pm" in answer
    return answer


@pytest.mark.parametrize("question", ["And on Thursdays?", "what about students?", "And how much for children?"])
def test_a_question_that_starts_like_a_follow_up_is_one(question: str) -> None:
    assert follows_up(question)


@pytest.mark.parametrize("question", ["Is there a cafe?", "Android phones, can I charge one?", "How much is it?"])
def test_a_question_that_stands_alone_is_no_follow_up(question: str) -> None:
    assert not follows_up(question)


def test_a_follow_up_is_answered_from_the_entry_its_previous_question_found(kiosk: Kiosk) -> None:
    assert kiosk.ground("And on Thursdays?").direct is None  # alone, nothing to read out
    assert kiosk.ground_follow_up("And on Thursdays?", HOURS).direct == hours(kiosk)
    assert kiosk.ground_follow_up("And on Thursdays?", None).direct is None


def test_a_follow_up_about_something_the_entry_does_not_say_is_not_answered_with_it(kiosk: Kiosk) -> None:
    for question in ("And is there a playground?", "And can I bring my dog?"):
        alone = kiosk.ground(question)
        after = kiosk.ground_follow_up(question, HOURS)
        assert after.direct is None and (after.known, after.entries) == (alone.known, alone.entries), question


def test_a_question_answered_alone_keeps_its_own_answer(kiosk: Kiosk) -> None:
    cafe = kiosk.ground("And is there a cafe?")
    assert cafe.direct is not None and "Cafe" in cafe.direct
    assert kiosk.ground_follow_up("And is there a cafe?", HOURS) == cafe


def test_the_grounded_model_takes_the_previous_question_from_the_conversation_not_its_examples(kiosk: Kiosk) -> None:
    llm = AskedLlm()
    grounded = kiosk.grounded(llm)
    history = [ChatMessage("user", HOURS), ChatMessage("assistant", hours(kiosk))]
    reply = "".join(grounded.stream_reply(conversation(kiosk.prefix, history, "And on Thursdays?"), max_tokens=60))
    assert reply == hours(kiosk) and grounded.last_verdict is Verdict.DIRECT and llm.asked == 0
    # a conversation's first question has no previous one, whatever the prefix's example turns ask
    first = "".join(grounded.stream_reply(conversation(kiosk.prefix, [], "And on Thursdays?"), max_tokens=60))
    assert first != hours(kiosk) and grounded.last_verdict is not Verdict.DIRECT


def test_the_previous_question_is_the_visitors_never_an_example_turns(kiosk: Kiosk) -> None:
    assert any(m.role == "user" for m in kiosk.prefix)  # the examples ask questions of their own
    assert previous_question(kiosk.prefix, kiosk.prefix) is None
    history = [ChatMessage("user", HOURS), ChatMessage("assistant", "Ten to six.")]
    assert previous_question([*kiosk.prefix, *history], kiosk.prefix) == HOURS
    assert previous_question(history, []) == HOURS


def test_an_answer_read_out_without_its_yes_still_names_its_entry() -> None:
    matcher = Kiosk("", "Is there a lift? Yes, next to the toilets on every floor.\n").matcher
    assert matcher.answers_with("Next to the toilets on every floor.", "And a lift on every floor?")
    assert not matcher.answers_with("Next to the toilets on every floor.", "And a ramp?")
