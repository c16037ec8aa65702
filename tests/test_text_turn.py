"""The words' end-of-turn verdict (:mod:`edgevoice.engines.text_turn`) on the real language model."""

from __future__ import annotations

import pytest

from edgevoice.config import Config
from edgevoice.engines.text_turn import MEASURED_THRESHOLD
from edgevoice.interfaces import Engines
from edgevoice.listen.endpointing import EndpointingConfig
from edgevoice.live.loop import text_end_of_turn

ON = EndpointingConfig(text_incomplete_below=MEASURED_THRESHOLD)


@pytest.mark.models
def test_half_a_question_does_not_end_a_sentence_and_the_whole_one_does(engines: Engines) -> None:
    judge = text_end_of_turn(engines.llm, ON)
    assert judge is not None
    below = MEASURED_THRESHOLD
    for half, whole in [
        ("Where can I find?", "Where can I find the shipwreck gallery?"),
        ("Are there guided tours in", "Are there guided tours in English?"),
        ("How much is a", "How much is a ticket?"),
    ]:
        assert judge.probability_complete(half) < below <= judge.probability_complete(whole), (half, whole)
    assert judge.probability_complete("") == judge.probability_complete("?!") == 1.0  # no words: the sound decides
    # it reads the words only: the recognizer's capitals and question mark change nothing (the second is read from
    # the cache the first left, its last token decoded again: the same up to rounding)
    assert judge.probability_complete("Where can I find?") == pytest.approx(
        judge.probability_complete("where can i find"), rel=0.1
    )


@pytest.mark.models
def test_a_transcript_that_goes_on_from_the_last_one_judged_costs_its_new_words_only(engines: Engines) -> None:
    """The partial transcripts read ahead leave the verdict at the pause its last few tokens to decode, and the
    verdict is the one a fresh judge gives."""
    judge = text_end_of_turn(engines.llm, ON)
    assert judge is not None
    whole = "how much is a ticket for a student"
    judge.probability_complete("something else entirely")
    fresh = judge.probability_complete(whole)
    judge.probability_complete("how much is a")
    decoded, reused = judge.tokens_decoded, judge.tokens_reused
    ahead = judge.probability_complete(whole)
    assert judge.tokens_reused - reused == 4  # "how much is a"
    assert judge.tokens_decoded - decoded == 4  # " ticket for a student"
    assert ahead == pytest.approx(fresh, rel=0.1)
    # a transcript that changed its first words is read again from there
    judge.probability_complete("how many tickets")
    assert judge.tokens_reused - reused == 4 + 1  # "how", and nothing after it


@pytest.mark.models
def test_the_verdict_does_not_touch_the_reply_models_cache(engines: Engines) -> None:
    """Its own llama.cpp context: what the reply's context holds stays as it was."""
    judge = text_end_of_turn(engines.llm, ON)
    assert judge is not None
    before = engines.llm.cached_tokens  # type: ignore[attr-defined]
    judge.probability_complete("Where is the whale skeleton")
    assert engines.llm.cached_tokens == before  # type: ignore[attr-defined]


def test_it_is_off_at_zero_and_without_a_local_model() -> None:
    class Remote:
        pass

    class Local:
        def end_of_turn_model(self) -> str:
            return "judge"

    assert text_end_of_turn(Remote(), ON) is None
    assert text_end_of_turn(Local(), ON) == "judge"
    assert text_end_of_turn(Local(), EndpointingConfig(text_incomplete_below=0.0)) is None
    # on by default, at the threshold measured for the default model (scripts/text_turn_eval.py)
    assert Config().endpointing.text_incomplete_below == MEASURED_THRESHOLD
