"""The live loop on the real engines with a stand-in output device, for the tests that feed its microphone ring
directly (bad input, soak): the loop `edgevoice run` runs, without PortAudio."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from edgevoice.app import build_assistant, load_turn_model
from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.ring import SharedRing
from edgevoice.config import Config
from edgevoice.converse import Assistant
from edgevoice.interfaces import Engines
from edgevoice.live.assistant import speak_once
from edgevoice.live.events import ReplyFinished
from edgevoice.live.loop import LoopOptions, Turn, VoiceLoop
from edgevoice.memory import settle
from edgevoice.reply.trace import ReplyTrace


@contextmanager
def running_loop(
    config: Config,
    engines: Engines,
    on_trace: Callable[[ReplyTrace, Turn], None],
    *,
    speed: float = 1.0,
    played: list[np.ndarray] | None = None,
) -> Iterator[tuple[VoiceLoop, Assistant]]:
    """A started :class:`VoiceLoop` and its assistant (prompt prefix warmed up, as `edgevoice run` does before it
    listens). The output device takes 10 ms of reply every 10 ms times ``speed``; ``played`` collects what it
    took. The reply budget is 30 s: the machine is shared with other tests, only real failures fall back here."""
    assistant = build_assistant(config, engines, live=True)
    assistant.warm_up()
    turn_model = load_turn_model(config)
    rate = engines.synthesizer.sample_rate
    with SharedRing.create(RATE * 40) as mic, SharedRing.create(rate * 60) as spk:
        loop = VoiceLoop(
            mic=mic,
            speaker=spk,
            vad=engines.vad,
            turn_model=turn_model,
            responder=assistant.responder,
            endpoint=config.endpointing,
            options=LoopOptions(
                vad_threshold=config.vad.threshold,
                fallback_audio=speak_once(engines, config.kiosk.fallback_phrase),
                fallback_text=config.kiosk.fallback_phrase,
                reply_budget_s=30.0,
            ),
        )
        loop.bus.subscribe(
            lambda event: on_trace(event.trace, event.turn) if isinstance(event, ReplyFinished) else None,
            name="test-traces",
        )
        stop = threading.Event()

        def device() -> None:  # the output callback
            buf = np.zeros(int(rate * 0.01 * speed), dtype=np.float32)
            while not stop.is_set():
                n = loop.playback.read_into(buf)
                if played is not None:
                    played.append(buf[:n].copy())
                stop.wait(0.01)  # the device's period

        player = threading.Thread(target=device)
        settle()  # as `edgevoice run` does once it has started up
        try:
            with loop:
                player.start()
                yield loop, assistant
        finally:
            stop.set()
            if player.is_alive():
                player.join()
            turn_model.close()
