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
    # it reads the words only: the recognizer's capitals and question mark change nothing
    assert judge.probability_complete("Where can I find?") == judge.probability_complete("where can i find")


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
