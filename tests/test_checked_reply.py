"""When a checked reply's words go out: clause by clause (the default) or sentence by sentence, never an unsupported
value either way (:meth:`edgevoice.kiosk.grounded_model.GroundedModel.stream_reply`), with a fake model that streams
its reply a token at a time."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import pytest

from edgevoice.bench.scoring import is_dont_know
from edgevoice.config.load import config_from_dict
from edgevoice.data import sample_knowledge, sample_persona
from edgevoice.errors import ConfigError
from edgevoice.events import ChatMessage
from edgevoice.kiosk.grounded_model import GroundedModel
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.prompt import DONT_KNOW, conversation

QUESTION = "How tall is the whale skeleton?"
"""Covered only partly (the knowledge says where the skeleton is, not how tall): its replies are checked."""


class TokenLlm:
    """Streams its reply in the pieces a tokenizer makes of it (a word with its space, digits and marks apart), and
    counts the pieces it has given."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.given = 0

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        for token in re.findall(r" ?[A-Za-z']+| ?\d|[^\sA-Za-z\d]| ", self.reply):
            self.given += 1
            yield token


@pytest.fixture(scope="module", params=["clause", "sentence"])
def kiosk(request: pytest.FixtureRequest) -> Kiosk:
    return Kiosk(sample_persona(), sample_knowledge(), reply_check=request.param)


def _pieces(grounded: GroundedModel, question: str = QUESTION) -> list[tuple[str, int]]:
    """The non-empty pieces spoken, each with how many tokens the model had given when it went out."""
    llm = grounded.llm
    assert isinstance(llm, TokenLlm)
    out = []
    for piece in grounded.stream_reply(conversation(grounded.kiosk.prefix, [], question), max_tokens=60):  # type: ignore[attr-defined]
        if piece:
            out.append((piece, llm.given))
    return out


def test_the_question_goes_to_the_model(kiosk: Kiosk) -> None:
    grounding = kiosk.ground(QUESTION)
    assert grounding.known and grounding.direct is None and grounding.coverage < 1.0


def test_the_first_clause_goes_out_before_the_model_has_finished_its_sentence(kiosk: Kiosk) -> None:
    reply = "The whale skeleton hangs in the whale hall, on the first floor, near the lifts."
    grounded = kiosk.grounded(TokenLlm(reply))
    pieces = _pieces(grounded)
    assert "".join(p for p, _ in pieces) == reply and grounded.last_verdict is Verdict.MODEL
    first, given = pieces[0]
    if kiosk.reply_check == "clause":
        assert first == "The whale skeleton hangs in the whale hall,"
        assert given == len(re.findall(r"[A-Za-z']+|,", first))  # not one token more than the clause
        assert [p for p, _ in pieces[1:]] == [" on the first floor,", " near the lifts."]
    else:
        assert pieces == [(reply, grounded.llm.given)]  # type: ignore[attr-defined]


INVENTED = (
    "The whale skeleton is in the whale hall, it is 25 metres long, and very old.",
    "The whale skeleton, 25 metres long, is in the whale hall.",
    "It is 25 metres long, in the whale hall.",
    "It is in the whale hall on the first floor. It is 25 metres long, and 120 years old.",
    "It is in the whale hall, on the first floor. Its skull weighs 3,500 kilograms.",
    "It is on the first floor, and it weighs 9.5 tonnes.",
)
"""Replies with an invented value, in the first clause, a later one or a later sentence."""


@pytest.mark.parametrize("reply", INVENTED)
def test_no_part_with_an_invented_value_is_spoken(kiosk: Kiosk, reply: str) -> None:
    grounded = kiosk.grounded(TokenLlm(reply))
    pieces = [p for p, _ in _pieces(grounded)]
    said = "".join(pieces)
    assert grounded.last_verdict is Verdict.UNSUPPORTED
    for number in ("25", "120", "3", "500", "9", "5"):
        assert number not in re.findall(r"\d+", said)
    if pieces[-1].strip() == DONT_KNOW:  # the first sentence failed: the refusal follows what of it was said
        pieces = pieces[:-1]
    assert reply.startswith("".join(pieces))
    for n in range(1, len(pieces) + 1):  # all that had been said at each moment kept to the knowledge
        assert kiosk.check.supported("".join(pieces[:n]), QUESTION, kiosk.ground(QUESTION).entries)


@pytest.mark.parametrize("reply", [*INVENTED, "It is in the whale hall, on the first floor. It is old, and it is big."])
def test_a_reply_declines_with_either_unit_alike(reply: str) -> None:
    # what the quality benchmark scores: a refusal with one unit is a refusal with the other, and the clauses only
    # add to what the sentences said
    said = {}
    for unit in ("clause", "sentence"):
        grounded = Kiosk(sample_persona(), sample_knowledge(), reply_check=unit).grounded(TokenLlm(reply))
        said[unit] = "".join(p for p, _ in _pieces(grounded))
    assert is_dont_know(said["clause"]) == is_dont_know(said["sentence"])
    if not is_dont_know(said["sentence"]):
        assert said["clause"].startswith(said["sentence"])


def test_clauses_speak_the_supported_start_of_a_sentence_the_sentence_check_drops() -> None:
    reply = "It is in the whale hall, on the first floor, and it is 25 metres long."
    said = {}
    for unit in ("clause", "sentence"):
        grounded = Kiosk(sample_persona(), sample_knowledge(), reply_check=unit).grounded(TokenLlm(reply))
        said[unit] = "".join(p for p, _ in _pieces(grounded))
        assert grounded.last_verdict is Verdict.UNSUPPORTED
    # the first sentence failed: both decline, the clauses after saying what of it is supported
    assert said == {"clause": f"It is in the whale hall, on the first floor, {DONT_KNOW}", "sentence": DONT_KNOW}
    second = "It is in the whale hall. It is on the first floor, and it is 25 metres long."
    for unit, after in (("clause", " It is on the first floor,"), ("sentence", "")):
        grounded = Kiosk(sample_persona(), sample_knowledge(), reply_check=unit).grounded(TokenLlm(second))
        assert "".join(p for p, _ in _pieces(grounded)) == "It is in the whale hall." + after


def test_a_mark_after_a_digit_waits_for_the_next_token(kiosk: Kiosk) -> None:
    # "9." could become "9.75": the part is checked with the whole number ("9" alone is the students' price)
    checked = Kiosk(sample_persona(), sample_knowledge(), reply_check=kiosk.reply_check, direct_answers=False)
    question = "What does a ticket cost for a student?"
    evidence = checked.ground(question).entries
    assert checked.check.supported("A ticket for students costs 9.", question, evidence)
    grounded = checked.grounded(TokenLlm("A ticket for students costs 9.75 euros."))
    said = "".join(p for p, _ in _pieces(grounded, question))
    assert said == DONT_KNOW, said
    assert grounded.last_verdict is Verdict.UNSUPPORTED


def test_a_first_sentence_that_may_still_echo_the_question_is_held_whole(kiosk: Kiosk) -> None:
    question = "Is photography allowed?"
    echo = kiosk.grounded(TokenLlm("Yes, photography is allowed. Enjoy your visit."))
    assert [p for p, _ in _pieces(echo, question)] == ["Yes, without flash."]  # "Yes," never went out alone
    assert echo.last_verdict is Verdict.ECHO
    informed = kiosk.grounded(TokenLlm("Yes, photography is allowed, without flash."))
    pieces = [p for p, _ in _pieces(informed, question)]
    assert "".join(pieces) == "Yes, photography is allowed, without flash." and informed.last_verdict is Verdict.MODEL


def test_the_reply_check_unit_is_validated() -> None:
    assert config_from_dict({}).kiosk.reply_check == "clause"
    assert config_from_dict({"kiosk": {"reply_check": "sentence"}}).kiosk.reply_check == "sentence"
    assert Kiosk.from_config(config_from_dict({"kiosk": {"reply_check": "sentence"}})).reply_check == "sentence"
    with pytest.raises(ConfigError, match=r"kiosk\.reply_check"):
        config_from_dict({"kiosk": {"reply_check": "word"}})


def test_every_reply_is_checked_so_no_coverage_knob_is_left(caplog: pytest.LogCaptureFixture) -> None:
    # a config that still sets the old threshold under which replies were checked loads (an upgraded kiosk starts),
    # and the log says the key is ignored and why
    config = config_from_dict({"kiosk": {"verify_below": 0.8, "reply_check": "sentence"}})
    assert config.kiosk.reply_check == "sentence" and not hasattr(config.kiosk, "verify_below")
    assert "kiosk.verify_below is no longer used" in caplog.text and "every reply" in caplog.text
    with pytest.raises(ConfigError, match=r"kiosk\.verify_belo: unknown key"):
        config_from_dict({"kiosk": {"verify_belo": 0.8}})
