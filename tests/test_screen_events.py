"""The loop's events for a screen, told step by step on a manual clock: the listener's ``Listening`` as the
activation gate opens and closes, and the answerer's ``Transcribed`` and ``AskedAgain``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.ring import SharedRing
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.live.activation import Activation
from edgevoice.live.events import AskedAgain, Listening, ReplyFinished, Transcribed, TurnCommitted
from tests.test_loop import silence, speech
from tests.test_loop_order import SteppedAnswerer, SteppedListener

pytestmark = pytest.mark.unit


@pytest.fixture
def mic() -> Iterator[SharedRing]:
    with SharedRing.create(RATE) as ring:
        yield ring


@pytest.fixture
def spk() -> Iterator[SharedRing]:
    with SharedRing.create(22050 * 10) as ring:
        yield ring


def listening(ears: SteppedListener) -> list[bool]:
    return [e.listening for e in ears.events.drain() if isinstance(e, Listening)]


def test_push_to_talk_publishes_the_gate_opening_and_closing(mic: SharedRing) -> None:
    ears = SteppedListener(mic)
    ears.listener.activation = activation = Activation("push_to_talk")
    ears.hear(silence(0.2))
    assert listening(ears) == []
    activation.press()
    ears.hear(speech(0.5))
    assert listening(ears) == [True]
    activation.release()
    ears.hear(silence(0.1))
    assert listening(ears) == [False]


def test_a_trigger_opens_the_gate_and_its_timeout_closes_it(mic: SharedRing) -> None:
    ears = SteppedListener(mic)
    ears.listener.activation = activation = Activation("trigger", trigger_timeout_s=1.0)
    activation.trigger()
    ears.hear(silence(0.5))
    assert listening(ears) == [True]
    ears.hear(silence(1.0))  # nobody spoke
    assert listening(ears) == [False]


def test_always_mode_never_publishes_the_gate(mic: SharedRing) -> None:
    ears = SteppedListener(mic)
    ears.hear(silence(0.3), speech(1.0), silence(0.8))
    assert ears.committed() and listening(ears) == []


def test_the_transcript_is_published_before_the_reply_and_asking_again_before_its_end(spk: SharedRing) -> None:
    side = SteppedAnswerer(spk)
    side.answerer.tell(TurnCommitted(side.turn(1)))
    side.answerer.step(timeout=0.0)
    events = side.published()
    assert events[0] == Transcribed(1, "Where is the cafe?")
    assert not [e for e in events if isinstance(e, AskedAgain)]  # the fake model's verdict: none
    side.llm.last_verdict = Verdict.UNHEARD  # type: ignore[attr-defined]  # as the grounded model says it
    side.answerer.tell(TurnCommitted(side.turn(2)))
    side.answerer.step(timeout=0.0)
    kinds = [type(e) for e in side.published()]
    assert kinds[-2:] == [AskedAgain, ReplyFinished]
