"""The live loop's activation on its real threads: the live assistant's gate, and a real `edgevoice trigger` process
opening a turn through the trigger socket. What each mode hears and when its turns end is stepped on a manual clock
in tests/test_activation_order.py; :func:`gated` and :func:`feed` serve tests/test_wake_word.py too."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from edgevoice.app_engines import open_wake_word
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import ManualClock
from edgevoice.config import Config
from edgevoice.config.load import config_from_dict
from edgevoice.interfaces import Engines
from edgevoice.kiosk.prompt import prefix_messages
from edgevoice.listen.turn import Turn
from edgevoice.live.activation import Activation, ActivationMode
from edgevoice.live.activation_inputs import TriggerSocket
from edgevoice.live.assistant import LiveAssistant
from edgevoice.live.loop import VoiceLoop
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace
from tests.fakes import FakeLlm, FakeRecognizer, FakeSynth
from tests.test_loop import RATE, CompleteTurn, EnergyVad, make_loop, rings, running, silence, speech
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


def test_the_live_assistant_owns_the_gate_its_config_names() -> None:
    """``LiveAssistant.activation`` is the listener's gate (the admin page calls it), with the wake-word model in
    wake_word mode. Threads: closing it ends every thread it started."""
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
    with LiveAssistant(config, engines, CompleteTurn(), responder, wake_word=open_wake_word(config)) as live:
        assert live.loop.listener.activation is live.activation is live.loop.activation
        assert live.activation.mode is ActivationMode.WAKE_WORD and live.activation.trigger_timeout_s == 3.0
        assert live.wake_word is not None and live.wake_word.phrase == "Hey Jarvis"
        assert live.activation.trigger() and not live.activation.release()
    assert live.threads_stopped


def test_edgevoice_trigger_opens_a_turn_of_the_running_loop(
    rings: tuple[SharedRing, SharedRing], tmp_path: Path
) -> None:
    """The whole path: a real `edgevoice trigger` process → the trigger socket → the gate → one turn answered.
    Threads: the socket's thread hands the trigger to the running listener's thread, between two of its frames."""
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
