"""Text said on the kiosk at another's request (Home Assistant, through the Wyoming server): published on the loop's
bus, spoken by the loop between turns, cut by a visitor who speaks over it, never part of the conversation; at most a
few wait; a Wyoming request waits for the loop to be between turns. The live loop runs on its real threads with
fake engines (tests/test_loop.py's harness)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import numpy as np
from wyoming.audio import AudioChunk, AudioStart
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from edgevoice.audio.ring import SharedRing
from edgevoice.clock import ManualClock
from edgevoice.config import Config, WyomingConfig
from edgevoice.interfaces import Engines
from edgevoice.live.bus import EventBus
from edgevoice.live.events import Announced, BargeIn, LoopEvent, SpeakRequested
from edgevoice.wyoming_server.kiosk_speaker import KioskSpeaker
from edgevoice.wyoming_server.service import start_wyoming
from tests.fakes import FakeRecognizer, FakeVad
from tests.test_loop import SlowSynth, make_loop, rings, running, silence, speech

__all__ = ["rings"]  # the fixture

TEXT = "The museum closes in fifteen minutes."


def follow(bus: EventBus) -> tuple[list[LoopEvent], threading.Event]:
    seen: list[LoopEvent] = []
    done = threading.Event()

    def on(event: LoopEvent) -> None:
        seen.append(event)
        if isinstance(event, Announced):
            done.set()

    bus.subscribe(on, name="test-announced")
    return seen, done


def test_a_text_published_on_the_bus_is_spoken_between_turns(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, responder, _, _ = make_loop(mic, spk, "unused")
    seen, done = follow(loop.bus)
    with running(loop) as player:
        loop.bus.publish(SpeakRequested("r1", TEXT))
        assert done.wait(10)
    assert [e for e in seen if isinstance(e, Announced)] == [Announced("r1", True)]
    assert responder.synthesizer.texts == [TEXT]  # type: ignore[attr-defined]
    assert np.concatenate(player.played).max() > 0.05  # it was heard
    assert responder.history == []  # not part of the conversation


def test_a_visitor_who_speaks_over_it_cuts_it_short(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    loop, _, _, turn_done = make_loop(mic, spk, "The cafe is upstairs.", SlowSynth(ManualClock()))
    seen, done = follow(loop.bus)
    with running(loop) as player:
        loop.bus.publish(SpeakRequested("r1", TEXT))
        assert player.wait_played(0.5)
        mic.write(np.concatenate([silence(0.3), speech(1.0), silence(0.6)]))
        assert done.wait(10)
        assert turn_done.wait(10)  # and the visitor's turn is answered after it
    assert Announced("r1", False) in seen
    assert any(isinstance(e, BargeIn) for e in seen)
    assert loop.playback.flushed_samples > 0  # the rest of it was flushed, never played


def test_at_most_a_few_texts_wait_to_be_said() -> None:
    bus = EventBus()
    speaker = KioskSpeaker(bus, max_waiting=2)
    taken = bus.subscribe(name="test-loop")
    first, second = speaker.offer("one"), speaker.offer("two")
    assert first and second and speaker.offer("three") is None
    assert [e.text for e in taken.drain() if isinstance(e, SpeakRequested)] == ["one", "two"]
    bus.publish(Announced(first, True))
    assert bus.wait_delivered(5)
    assert speaker.offer("three") is not None  # one was said: room for another
    speaker.close()


def test_the_voice_kiosk_speaks_through_the_loop_and_returns_at_once(rings: tuple[SharedRing, SharedRing]) -> None:
    """The Wyoming server, the bus and the loop together: the client gets a tenth of a second of silence back at once,
    and the kiosk says the text."""
    mic, spk = rings
    loop, responder, _, _ = make_loop(mic, spk, "unused")
    seen, done = follow(loop.bus)
    clock = ManualClock()
    engines = Engines(FakeVad(), FakeRecognizer("", clock), None, responder.synthesizer)  # type: ignore[arg-type]
    config = replace(Config(), wyoming=WyomingConfig(listen="tcp://127.0.0.1:0", max_text_chars=100))

    async def ask(port: int) -> tuple[list[str], AudioStart, int, Error]:
        async with AsyncTcpClient("127.0.0.1", port) as c:
            await c.write_event(Describe().event())
            info = await c.read_event()
            assert info is not None
            voices = [v.name for v in Info.from_event(info).tts[0].voices]
            await c.write_event(Synthesize(text=TEXT, voice=SynthesizeVoice(name="kiosk")).event())
            start = await c.read_event()
            chunk = await c.read_event()
            await c.read_event()  # audio-stop
            await c.write_event(Synthesize(text="x" * 101, voice=SynthesizeVoice(name="kiosk")).event())
            refused = await c.read_event()
            assert start is not None and chunk is not None and refused is not None
            return (
                voices,
                AudioStart.from_event(start),
                len(AudioChunk.from_event(chunk).audio),
                Error.from_event(refused),
            )

    with running(loop):
        service = start_wyoming(config, engines, voice_config=None, bus=loop.bus, idle=loop.idle)
        assert service is not None
        try:
            voices, start, size, refused = asyncio.run(ask(service.server.address[1]))  # type: ignore[index]
            assert done.wait(10)
        finally:
            service.close()
    assert voices == [config.models.tts, "kiosk"]
    assert (start.rate, start.width, start.channels) == (22050, 2, 1) and size == 2205 * 2
    assert Announced(next(e.request_id for e in seen if isinstance(e, SpeakRequested)), True) in seen
    assert responder.synthesizer.texts == [TEXT]  # type: ignore[attr-defined]
    assert refused.code == "wyoming_too_long"


def test_a_wyoming_request_waits_for_the_kiosk_to_be_between_turns() -> None:
    """The engine desk runs a request only once the loop is idle (a visitor's turn first), or after ``idle_wait_s``."""
    from edgevoice.wyoming_server.engine_desk import EngineDesk

    clock = ManualClock()
    recognizer = FakeRecognizer("Where is the cafe?", clock, seconds=0.0)
    between_turns, asked = threading.Event(), threading.Event()

    def idle() -> bool:
        asked.set()
        return between_turns.is_set()

    desk = EngineDesk(recognizer, SlowSynth(clock), idle=idle, idle_wait_s=60.0)

    async def go() -> str:
        job = asyncio.ensure_future(desk.transcribe(np.zeros(16000, dtype=np.float32)))
        assert await asyncio.to_thread(asked.wait, 10)  # the request is waiting for the loop
        assert recognizer.heard == []  # and has not touched the engine
        between_turns.set()
        return (await job).text

    try:
        assert asyncio.run(go()) == "Where is the cafe?"
    finally:
        desk.close()
    impatient = EngineDesk(recognizer, SlowSynth(clock), idle=lambda: False, idle_wait_s=0.1)
    try:  # a loop never idle holds a request up to idle_wait_s only
        assert asyncio.run(impatient.transcribe(np.zeros(16000, dtype=np.float32))).text == "Where is the cafe?"
    finally:
        impatient.close()
