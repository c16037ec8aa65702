"""The live loop in push-to-talk, trigger and wake-word mode, with fake engines and in-memory rings: what is heard,
when a turn ends, a press over a reply, and a real `edgevoice trigger` process opening a turn. The key is pressed
and released between two writes to the microphone ring, once the listener has read what came before (the listener
applies an event at its next frame)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from edgevoice.audio.ring import SharedRing
from edgevoice.clock import ManualClock
from edgevoice.config import Config
from edgevoice.config.load import config_from_dict
from edgevoice.interfaces import Engines
from edgevoice.kiosk.prompt import prefix_messages
from edgevoice.listen.endpointing import EndpointingConfig, TurnEndReason
from edgevoice.listen.turn import Turn
from edgevoice.live.activation import Activation, ActivationMode
from edgevoice.live.activation_inputs import TriggerSocket
from edgevoice.live.assistant import LiveAssistant
from edgevoice.live.loop import VoiceLoop
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth
from tests.test_loop import RATE, CompleteTurn, EnergyVad, SlowSynth, make_loop, rings, running, silence, speech
from tests.waiting import poll

__all__ = ["rings"]  # the fixture, shared with test_loop

FRAME = 512


def gated(
    mic: SharedRing, spk: SharedRing, mode: ActivationMode, *, reply: str = "Upstairs.", **kwargs: object
) -> tuple[VoiceLoop, Activation, list[tuple[ReplyTrace, Turn]], threading.Event]:
    """A loop from test_loop's :func:`make_loop` with an activation gate in ``mode``; its turns are kept."""
    answered: list[tuple[ReplyTrace, Turn]] = []
    loop, _, _, done = make_loop(mic, spk, reply, answered=answered, **kwargs)  # type: ignore[arg-type]
    activation = loop.listener.activation = Activation(mode, trigger_timeout_s=1.0)
    return loop, activation, answered, done


def feed(loop: VoiceLoop, audio: np.ndarray) -> None:
    """Write ``audio``, cut to whole frames, to the microphone and wait until the listener has read all of it."""
    audio = audio[: len(audio) // FRAME * FRAME]
    target = loop.samples_in + len(audio)
    loop.mic.write(audio)
    assert poll(lambda: loop.samples_in >= target, 10), "the listener did not read the microphone"


class CountingVad:
    """Energy VAD that counts the frames it judged."""

    sample_rate, frame_samples = RATE, FRAME

    def __init__(self) -> None:
        self.frames = 0

    def reset(self) -> None:
        pass

    def probability(self, frame: np.ndarray) -> float:
        self.frames += 1
        return 0.9 if np.abs(frame).max() > 0.05 else 0.02


def test_push_to_talk_hears_nothing_while_the_key_is_up(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, _, answered, _ = gated(mic, spk, ActivationMode.PUSH_TO_TALK)
    vad = loop.listener.vad = CountingVad()
    with running(loop):
        feed(loop, np.concatenate([silence(0.3), speech(1.5), silence(1.5)]))
        assert loop.idle()
    assert answered == [] and vad.frames == 0  # not even the VAD heard it
    assert loop.listener.turn_model.calls == 0  # type: ignore[attr-defined]


def test_push_to_talk_commits_on_release_in_the_middle_of_speech(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, activation, answered, done = gated(mic, spk, ActivationMode.PUSH_TO_TALK)
    with running(loop):
        feed(loop, speech(1.0))  # before the press: not part of the turn
        assert activation.press()
        feed(loop, speech(1.2))  # held: speech with no pause at all
        assert activation.release()
        feed(loop, speech(0.5))  # still speaking after the release: the turn is already over
        assert done.wait(10)
    ((trace, turn),) = answered
    assert turn.reason is TurnEndReason.RELEASED and trace.transcript == "Where is the cafe?"
    # the turn is the frames read while the key was held: from the frame after the press to the release
    held = int(1.2 * RATE) // FRAME * FRAME
    assert len(turn.audio) == held
    assert turn.audio.start == int(1.0 * RATE) // FRAME * FRAME
    assert turn.committed_t == pytest.approx((turn.audio.start + held + FRAME) / RATE)
    assert loop.listener.turn_model.calls == 0  # type: ignore[attr-defined]  # Smart Turn is not asked: the key decides


def test_a_long_pause_while_the_key_is_held_does_not_end_the_turn(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, activation, answered, done = gated(mic, spk, ActivationMode.PUSH_TO_TALK)
    assert loop.listener.endpointer.config.incomplete_max_silence_ms < 2500
    with running(loop):
        activation.press()
        feed(loop, np.concatenate([speech(0.6), silence(2.5), speech(0.6)]))
        assert answered == [] and loop.listener.in_turn
        activation.release()
        feed(loop, silence(0.1))
        assert done.wait(10)
    ((_, turn),) = answered
    assert turn.reason is TurnEndReason.RELEASED
    assert len(turn.audio) == int(3.7 * RATE) // FRAME * FRAME  # both phrases and the pause between them
    assert turn.speech_end_t == pytest.approx(len(turn.audio) / RATE, abs=FRAME / RATE)


def test_a_turn_held_past_max_turn_s_keeps_its_start_and_ends_on_release(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, activation, answered, done = gated(
        mic, spk, ActivationMode.PUSH_TO_TALK, endpoint=EndpointingConfig(max_turn_s=2.0)
    )
    with running(loop):
        feed(loop, silence(0.5))
        activation.press()
        feed(loop, speech(3.0))
        assert answered == []  # still held: nothing is committed at max_turn_s
        activation.release()
        feed(loop, silence(0.1))
        assert done.wait(10)
    ((_, turn),) = answered
    assert turn.reason is TurnEndReason.RELEASED
    assert len(turn.audio) == 63 * FRAME  # the frames up to 2 s, then nothing more
    assert turn.audio.start == 15 * FRAME  # the press's frame, whatever was left out after the cap


def test_a_release_without_speech_gives_no_turn_and_the_next_press_works(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, activation, answered, done = gated(mic, spk, ActivationMode.PUSH_TO_TALK)
    with running(loop):
        activation.press()
        feed(loop, silence(0.8))
        activation.release()
        feed(loop, silence(0.1))
        assert not loop.listener.in_turn and answered == []
        activation.press()
        feed(loop, speech(0.8))
        activation.release()
        feed(loop, silence(0.1))
        assert done.wait(10)
    assert len(answered) == 1 and answered[0][1].turn_id == 2


def test_a_press_while_the_kiosk_speaks_interrupts_the_reply(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    reply = "The cafe is upstairs next to the big window. It opens at ten every day."
    loop, activation, answered, done = gated(
        mic, spk, ActivationMode.PUSH_TO_TALK, reply=reply, synth=SlowSynth(ManualClock())
    )
    with running(loop) as player:
        activation.press()
        feed(loop, speech(1.0))
        activation.release()
        feed(loop, silence(0.1))
        assert player.wait_played(0.5)
        mic.write(speech(1.0))  # speaking over the reply with the key up is not heard: no barge-in
        assert not done.wait(0.3) and loop.barge_ins == 0
        activation.press()
        feed(loop, silence(0.1))
        assert done.wait(10)
        assert loop.barge_ins == 1 and loop.listener.in_turn  # the press opened the next turn
    assert answered[0][0].cancelled


def test_trigger_mode_ignores_speech_before_the_trigger_and_answers_one_turn(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    mic, spk = rings
    loop, activation, answered, done = gated(mic, spk, ActivationMode.TRIGGER)
    with running(loop):
        feed(loop, np.concatenate([speech(1.0), silence(0.6)]))
        assert not loop.listener.in_turn and answered == []
        assert activation.trigger()
        feed(loop, np.concatenate([silence(0.2), speech(1.0), silence(0.6)]))  # ends on silence, as always
        assert done.wait(10)
        done.clear()
        feed(loop, np.concatenate([speech(1.0), silence(0.6)]))  # one trigger, one turn
        assert not loop.listener.in_turn
    ((_, turn),) = answered
    assert turn.reason is TurnEndReason.COMPLETE
    assert turn.audio.start >= int(1.6 * RATE)  # nothing from before the trigger


def test_a_trigger_nobody_answers_closes_after_its_timeout(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, activation, answered, done = gated(mic, spk, ActivationMode.TRIGGER)
    with running(loop):
        activation.trigger()
        feed(loop, silence(1.2))  # trigger_timeout_s = 1
        feed(loop, np.concatenate([speech(1.0), silence(0.6)]))
        assert not loop.listener.in_turn and answered == []
        activation.press()  # a key press is a trigger in this mode
        feed(loop, np.concatenate([silence(0.5), speech(1.0), silence(0.6)]))  # within the timeout: heard
        assert done.wait(10)
    assert len(answered) == 1


def test_always_mode_takes_no_activation_events(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, activation, answered, done = gated(mic, spk, ActivationMode.ALWAYS)
    assert not activation.press() and not activation.trigger() and not activation.release()
    with running(loop):
        feed(loop, np.concatenate([speech(1.0), silence(0.6)]))
        assert done.wait(10)
    assert answered[0][1].reason is TurnEndReason.COMPLETE


class LoudClickWakeWord:
    """Stands in for the wake-word model: "hears" it in a frame of full-scale samples."""

    def __init__(self) -> None:
        self.frames = self.resets = 0

    def heard(self, audio: np.ndarray) -> bool:
        self.frames += 1
        return bool(np.abs(audio).max() > 0.95)

    def reset(self) -> None:
        self.resets += 1


def test_wake_word_mode_listens_for_one_turn_after_the_wake_word(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, _, answered, done = gated(mic, spk, ActivationMode.TRIGGER)
    detector = LoudClickWakeWord()
    loop.listener.activation = Activation(ActivationMode.WAKE_WORD, trigger_timeout_s=1.0, wake_word=detector)
    wake = np.full(FRAME, 0.99, np.float32)
    with running(loop):
        feed(loop, np.concatenate([speech(1.0), silence(0.6)]))
        assert not loop.listener.in_turn and detector.frames > 0
        feed(loop, np.concatenate([wake, silence(0.2), speech(1.0), silence(0.6)]))
        assert done.wait(10)
        heard = detector.frames
        feed(loop, np.concatenate([silence(0.3), speech(1.0), silence(0.6)]))  # no wake word: not listened to
        assert detector.frames > heard  # the detector listens again once the turn is over
    assert len(answered) == 1 and detector.resets == 1
    assert answered[0][1].audio.start > int(1.6 * RATE)


def test_the_live_assistant_owns_the_gate_its_config_names() -> None:
    """``LiveAssistant.activation`` is the listener's gate (the admin page calls it), with the wake-word model in
    wake_word mode; closing it ends every thread."""
    config = config_from_dict(
        {"audio": {"echo_cancellation": False}, "activation": {"mode": "wake_word", "trigger_timeout_s": 3}}
    )
    clock = ManualClock()
    engines = Engines(EnergyVad(), FakeRecognizer("Hi.", clock), FakeLlm("Yes.", clock), FakeSynth(clock))
    responder = Responder(
        engines.recognizer,
        engines.llm,
        engines.synthesizer,
        prefix_messages("You are a test.", "The cafe is upstairs."),
        max_tokens=60,
        max_sentences=Config().kiosk.max_sentences,
        clock=clock,
    )
    with LiveAssistant(config, engines, CompleteTurn(), responder) as live:
        assert live.loop.listener.activation is live.activation is live.loop.activation
        assert live.activation.mode is ActivationMode.WAKE_WORD and live.activation.trigger_timeout_s == 3.0
        assert live.wake_word is not None and live.wake_word.phrase == "Hey Jarvis"
        assert live.activation.trigger() and not live.activation.release()
    assert live.threads_stopped


def test_edgevoice_trigger_opens_a_turn_of_the_running_loop(
    rings: tuple[SharedRing, SharedRing], tmp_path: Path
) -> None:
    """The whole path: a real `edgevoice trigger` process → the trigger socket → the gate → one turn answered."""
    mic, spk = rings
    loop, activation, answered, done = gated(mic, spk, ActivationMode.TRIGGER)
    path = str(tmp_path / "activation.sock")
    sock = TriggerSocket(activation, path)
    sock.start()
    try:
        with running(loop):
            feed(loop, np.concatenate([speech(1.0), silence(0.6)]))
            assert answered == []
            sent = subprocess.run(
                [sys.executable, "-m", "edgevoice", "trigger", "--socket", path], capture_output=True, timeout=60
            )
            assert sent.returncode == 0, sent.stderr
            assert poll(lambda: activation.counts["trigger"] == 1, 5)
            feed(loop, np.concatenate([silence(0.2), speech(1.0), silence(0.6)]))
            assert done.wait(10)
    finally:
        assert sock.close(2)
    assert len(answered) == 1 and answered[0][1].audio.start >= int(1.6 * RATE) // FRAME * FRAME
