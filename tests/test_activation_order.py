"""Push-to-talk, trigger and wake-word mode, stepped frame by frame on a manual clock (tests/stepped_loop.py): what
is heard, when a turn ends, a press over a reply. The key is pressed and released between two frames; the listener
takes the event with its next frame. The threads, the trigger socket and a real `edgevoice trigger` process are
tested in tests/test_activation_loop.py."""

from __future__ import annotations

import numpy as np
import pytest

from edgevoice.audio.ring import SharedRing
from edgevoice.listen.endpointing import EndpointingConfig, TurnEndReason
from edgevoice.live.activation import Activation, ActivationMode
from edgevoice.live.events import BargeIn
from tests.stepped_loop import FRAME, RATE, EnergyVad, SteppedListener, mic, silence, speech

__all__ = ["mic"]  # the fixture

pytestmark = pytest.mark.unit


def gated(mic: SharedRing, mode: ActivationMode, **kwargs: object) -> tuple[SteppedListener, Activation]:
    """A stepped listener behind an activation gate in ``mode`` (a trigger waits 1 s for speech)."""
    activation = Activation(mode, trigger_timeout_s=1.0)
    return SteppedListener(mic, activation=activation, **kwargs), activation  # type: ignore[arg-type]


def feed(ears: SteppedListener, *parts: np.ndarray) -> None:
    """The parts, cut to whole frames (so that a press falls between two frames)."""
    audio = np.concatenate(parts)
    ears.hear(audio[: len(audio) // FRAME * FRAME])


class CountingVad(EnergyVad):
    """Energy VAD that counts the frames it judged."""

    def __init__(self) -> None:
        self.frames = 0

    def probability(self, frame: np.ndarray) -> float:
        self.frames += 1
        return super().probability(frame)


def test_push_to_talk_hears_nothing_while_the_key_is_up(mic: SharedRing) -> None:
    vad = CountingVad()
    ears, _ = gated(mic, ActivationMode.PUSH_TO_TALK, vad=vad)
    feed(ears, silence(0.3), speech(1.5), silence(1.5))
    assert ears.reply.told == [] and ears.events.drain() == [] and not ears.listener.in_turn
    assert vad.frames == 0 and ears.smart_turn.calls == 0  # not even the VAD heard it


def test_push_to_talk_commits_on_release_in_the_middle_of_speech(mic: SharedRing) -> None:
    ears, activation = gated(mic, ActivationMode.PUSH_TO_TALK)
    feed(ears, speech(1.0))  # before the press: not part of the turn
    assert activation.press()
    feed(ears, speech(1.2))  # held: speech with no pause at all
    assert ears.reply.told == []
    assert activation.release()
    feed(ears, speech(0.5))  # still speaking after the release: the turn is already over
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.RELEASED and ears.finish(turn) == "Where is the cafe?"
    # the turn is the frames read while the key was held: from the frame after the press to the release
    held = int(1.2 * RATE) // FRAME * FRAME
    assert len(turn.audio) == held
    assert turn.audio.start == int(1.0 * RATE) // FRAME * FRAME
    assert turn.committed_t == pytest.approx((turn.audio.start + held + FRAME) / RATE)
    assert ears.smart_turn.calls == 0  # Smart Turn is not asked: the key decides


def test_a_long_pause_while_the_key_is_held_does_not_end_the_turn(mic: SharedRing) -> None:
    ears, activation = gated(mic, ActivationMode.PUSH_TO_TALK)
    assert EndpointingConfig().incomplete_max_silence_ms < 2500
    activation.press()
    feed(ears, speech(0.6), silence(2.5), speech(0.6))
    assert ears.reply.told == [] and ears.listener.in_turn
    activation.release()
    feed(ears, silence(0.1))
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.RELEASED
    assert len(turn.audio) == int(3.7 * RATE) // FRAME * FRAME  # both phrases and the pause between them
    assert turn.speech_end_t == pytest.approx(len(turn.audio) / RATE, abs=FRAME / RATE)


def test_a_turn_held_past_max_turn_s_keeps_its_start_and_ends_on_release(mic: SharedRing) -> None:
    ears, activation = gated(mic, ActivationMode.PUSH_TO_TALK, endpoint=EndpointingConfig(max_turn_s=2.0))
    feed(ears, silence(0.5))
    activation.press()
    feed(ears, speech(3.0))
    assert ears.reply.told == []  # still held: nothing is committed at max_turn_s
    activation.release()
    feed(ears, silence(0.1))
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.RELEASED
    assert len(turn.audio) == 63 * FRAME  # the frames up to 2 s, then nothing more
    assert turn.audio.start == 15 * FRAME  # the press's frame, whatever was left out after the cap


def test_a_release_without_speech_gives_no_turn_and_the_next_press_works(mic: SharedRing) -> None:
    ears, activation = gated(mic, ActivationMode.PUSH_TO_TALK)
    activation.press()
    feed(ears, silence(0.8))
    activation.release()
    feed(ears, silence(0.1))
    assert not ears.listener.in_turn and ears.reply.told == []
    activation.press()
    feed(ears, speech(0.8))
    activation.release()
    feed(ears, silence(0.1))
    assert [t.turn_id for t in ears.committed()] == [2]


def test_a_press_while_the_kiosk_speaks_interrupts_the_reply(mic: SharedRing) -> None:
    ears, activation = gated(mic, ActivationMode.PUSH_TO_TALK)
    activation.press()
    feed(ears, speech(1.0))
    activation.release()
    feed(ears, silence(0.1))
    assert len(ears.committed()) == 1
    ears.reply.replying, ears.reply.reply_uncut, ears.reply.replying_to = True, True, 1  # its reply plays
    feed(ears, speech(1.0))  # speaking over the reply with the key up is not heard: no barge-in
    assert len(ears.reply.told) == 1
    activation.press()
    feed(ears, silence(0.1))
    assert ears.reply.told[1:] == [BargeIn(1)]  # told once, at the press
    assert ears.listener.in_turn  # the press opened the next turn


def test_trigger_mode_ignores_speech_before_the_trigger_and_answers_one_turn(mic: SharedRing) -> None:
    ears, activation = gated(mic, ActivationMode.TRIGGER)
    feed(ears, speech(1.0), silence(0.6))
    assert not ears.listener.in_turn and ears.reply.told == []
    assert activation.trigger()
    feed(ears, silence(0.2), speech(1.0), silence(0.6))  # ends on silence, as always
    assert len(ears.committed()) == 1
    feed(ears, speech(1.0), silence(0.6))  # one trigger, one turn
    assert not ears.listener.in_turn
    (turn,) = ears.committed()
    assert turn.reason is TurnEndReason.COMPLETE
    assert turn.audio.start >= int(1.6 * RATE)  # nothing from before the trigger


def test_a_trigger_nobody_answers_closes_after_its_timeout(mic: SharedRing) -> None:
    ears, activation = gated(mic, ActivationMode.TRIGGER)
    activation.trigger()
    feed(ears, silence(1.2))  # trigger_timeout_s = 1
    feed(ears, speech(1.0), silence(0.6))
    assert not ears.listener.in_turn and ears.reply.told == []
    activation.press()  # a key press is a trigger in this mode
    feed(ears, silence(0.5), speech(1.0), silence(0.6))  # within the timeout: heard
    assert len(ears.committed()) == 1


def test_always_mode_takes_no_activation_events(mic: SharedRing) -> None:
    ears, activation = gated(mic, ActivationMode.ALWAYS)
    assert not activation.press() and not activation.trigger() and not activation.release()
    feed(ears, speech(1.0), silence(0.6))
    assert [t.reason for t in ears.committed()] == [TurnEndReason.COMPLETE]


class LoudClickWakeWord:
    """Stands in for the wake-word model: "hears" it in a frame of full-scale samples."""

    def __init__(self) -> None:
        self.frames = self.resets = 0

    def heard(self, audio: np.ndarray) -> bool:
        self.frames += 1
        return bool(np.abs(audio).max() > 0.95)

    def reset(self) -> None:
        self.resets += 1


def test_wake_word_mode_listens_for_one_turn_after_the_wake_word(mic: SharedRing) -> None:
    detector = LoudClickWakeWord()
    activation = Activation(ActivationMode.WAKE_WORD, trigger_timeout_s=1.0, wake_word=detector)
    ears = SteppedListener(mic, activation=activation)
    wake = np.full(FRAME, 0.99, np.float32)
    feed(ears, speech(1.0), silence(0.6))
    assert not ears.listener.in_turn and detector.frames > 0
    feed(ears, wake, silence(0.2), speech(1.0), silence(0.6))
    assert len(ears.committed()) == 1
    heard = detector.frames
    feed(ears, silence(0.3), speech(1.0), silence(0.6))  # no wake word: not listened to
    assert detector.frames > heard  # the detector listens again once the turn is over
    (turn,) = ears.committed()
    assert detector.resets == 1 and turn.audio.start > int(1.6 * RATE)
