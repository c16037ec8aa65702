"""The Wyoming server (docs/wyoming.md) on a loopback port, driven by the ``wyoming`` package's own client, as Home
Assistant drives it: ``describe``, a real spoken clip transcribed, a text synthesized, and every bound (audio, text,
an event's size, the number of clients), a client that leaves mid-stream."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize

from edgevoice.audio import SAMPLE_RATE
from edgevoice.config import Config, WyomingConfig
from edgevoice.interfaces import Engines
from edgevoice.models.configured import piper_files
from edgevoice.wyoming_server.service import WyomingService, start_wyoming
from tests.conftest import wer

QUESTION = "Where is the cafeteria, please?"


def served(engines: Engines, store, **settings) -> WyomingService:  # type: ignore[no-untyped-def]
    config = replace(Config(), wyoming=WyomingConfig(listen="tcp://127.0.0.1:0", **settings))
    _, voice_json = piper_files(store, config.models.tts)
    service = start_wyoming(config, engines, voice_config=voice_json, bus=None, idle=lambda: True)
    assert service is not None
    return service


@pytest.fixture
def server(engines: Engines, store) -> Iterator[WyomingService]:  # type: ignore[no-untyped-def]
    service = served(engines, store)
    yield service
    service.close()


def client(service: WyomingService) -> AsyncTcpClient:
    host, port = service.server.address  # type: ignore[misc]
    return AsyncTcpClient(host, port, read_timeout=60)


def pcm(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


async def transcribe(c: AsyncTcpClient, data: bytes, rate: int = SAMPLE_RATE) -> Event | None:
    await c.write_event(Transcribe(language="en").event())
    await c.write_event(AudioStart(rate=rate, width=2, channels=1).event())
    for start in range(0, len(data), 3200):
        await c.write_event(AudioChunk(rate=rate, width=2, channels=1, audio=data[start : start + 3200]).event())
    await c.write_event(AudioStop().event())
    return await c.read_event()


async def synthesized(c: AsyncTcpClient) -> tuple[AudioStart, bytes]:
    start = await c.read_event()
    assert start is not None and AudioStart.is_type(start.type), start
    audio = bytearray()
    while (event := await c.read_event()) is not None and AudioChunk.is_type(event.type):
        chunk = AudioChunk.from_event(event)
        assert (chunk.rate, chunk.width, chunk.channels) == (22050, 2, 1)
        audio += chunk.audio
    assert event is not None and AudioStop.is_type(event.type)
    return AudioStart.from_event(start), bytes(audio)


def test_describe_names_the_recognizer_and_the_voice_with_their_languages(server: WyomingService) -> None:
    async def go() -> Info:
        async with client(server) as c:
            await c.write_event(Describe().event())
            event = await c.read_event()
            assert event is not None and Info.is_type(event.type)
            return Info.from_event(event)

    info = asyncio.run(go())
    (asr,) = info.asr
    assert [m.name for m in asr.models] == ["whisper-tiny.en"] and asr.models[0].languages == ["en"]
    (tts,) = info.tts
    assert [v.name for v in tts.voices] == ["piper-en_US-joe-medium"]  # no bus: nothing is said on the kiosk
    assert tts.voices[0].languages == ["en_US"]
    assert asr.installed and tts.installed


def test_a_spoken_question_is_transcribed(server: WyomingService, speak) -> None:  # type: ignore[no-untyped-def]
    audio = speak(QUESTION)

    async def go() -> Event | None:
        async with client(server) as c:
            return await transcribe(c, pcm(audio))

    event = asyncio.run(go())
    assert event is not None and Transcript.is_type(event.type), event
    transcript = Transcript.from_event(event)
    assert wer(QUESTION, transcript.text) <= 0.2, transcript.text
    assert transcript.language == "en"


def test_audio_at_another_rate_is_resampled_before_it_is_transcribed(server: WyomingService, speak) -> None:  # type: ignore[no-untyped-def]
    from edgevoice.audio.files import to_model_rate

    audio = to_model_rate(speak(QUESTION), SAMPLE_RATE, 22050)

    async def go() -> Event | None:
        async with client(server) as c:
            return await transcribe(c, pcm(audio), rate=22050)

    event = asyncio.run(go())
    assert event is not None and wer(QUESTION, Transcript.from_event(event).text) <= 0.2


def test_a_text_is_synthesized_into_audible_speech(server: WyomingService) -> None:
    async def go() -> tuple[AudioStart, bytes]:
        async with client(server) as c:
            await c.write_event(Synthesize(text="The cafeteria is on the first floor.").event())
            return await synthesized(c)

    start, data = asyncio.run(go())
    assert (start.rate, start.width, start.channels) == (22050, 2, 1)
    samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768
    assert 1.0 < len(samples) / 22050 < 6.0
    assert np.sqrt(np.mean(samples**2)) > 0.02  # speech, not silence


def test_oversize_audio_and_text_are_refused_with_a_clear_error(engines: Engines, store) -> None:  # type: ignore[no-untyped-def]
    service = served(engines, store, max_audio_s=1.0, max_text_chars=20)

    async def go() -> tuple[Event | None, Event | None, Event | None]:
        async with client(service) as c:
            long = await transcribe(c, pcm(np.zeros(SAMPLE_RATE * 2, dtype=np.float32)))
            closed = await c.read_event()
        async with client(service) as c:
            await c.write_event(Synthesize(text="This text is much longer than twenty characters.").event())
            text = await c.read_event()
        return long, closed, text

    try:
        long, closed, text = asyncio.run(go())
    finally:
        service.close()
    assert long is not None and Error.from_event(long).code == "wyoming_too_long"
    assert "wyoming.max_audio_s = 1 s" in Error.from_event(long).text
    assert closed is None  # the connection was closed after the error
    assert text is not None and Error.from_event(text).code == "wyoming_too_long"
    assert "wyoming.max_text_chars = 20" in Error.from_event(text).text


def raw(service: WyomingService, data: bytes) -> dict[str, object]:
    """What the server answers a peer that sends ``data`` on a plain socket (the error event's data)."""
    host, port = service.server.address  # type: ignore[misc]
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(data)
        answer = s.makefile("rb")
        header = json.loads(answer.readline())
        body = answer.read(header["data_length"])
    assert header["type"] == "error"
    return dict(json.loads(body))


def test_an_event_announcing_a_huge_payload_is_refused_before_it_is_read(server: WyomingService) -> None:
    """The ``wyoming`` package's reader would wait for any length a peer announces: the server refuses first."""
    huge = json.dumps({"type": "audio-chunk", "data": {"rate": 16000, "width": 2, "channels": 1}})
    error = raw(server, (huge[:-1] + ', "payload_length": 4000000000}\n').encode())
    assert error["code"] == "wyoming_too_large" and "payload_length" in str(error["text"])
    error = raw(server, b'{"type": "describe", "data": {"x": "' + b"a" * 100_000 + b'"}}\n')
    assert error["code"] == "wyoming_too_large" and "header line" in str(error["text"])


def test_a_client_past_max_clients_is_told_busy(engines: Engines, store) -> None:  # type: ignore[no-untyped-def]
    service = served(engines, store, max_clients=1)

    async def go() -> tuple[Event | None, Event | None]:
        async with client(service) as first:
            await first.write_event(Describe().event())
            assert await first.read_event() is not None  # the first is being served
            async with client(service) as second:
                refused = await second.read_event()
        # the first left: room again, once the server has read its end (polled: the client's close and the
        # server's noticing it are not one step)
        deadline = asyncio.get_running_loop().time() + 10.0
        while True:
            async with client(service) as third:
                await third.write_event(Describe().event())
                answer = await third.read_event()
            if answer is None or not Error.is_type(answer.type) or asyncio.get_running_loop().time() > deadline:
                return refused, answer
            await asyncio.sleep(0.05)

    try:
        refused, served_later = asyncio.run(go())
    finally:
        service.close()
    assert refused is not None and Error.from_event(refused).code == "wyoming_busy"
    assert "wyoming.max_clients" in Error.from_event(refused).text
    assert served_later is not None and Info.is_type(served_later.type)


def test_a_client_that_leaves_mid_stream_does_not_hurt_the_next(server: WyomingService, speak) -> None:  # type: ignore[no-untyped-def]
    audio = pcm(speak(QUESTION))
    host, port = server.server.address  # type: ignore[misc]

    async def go() -> Event | None:
        async with client(server) as c:  # leaves after half the audio
            await c.write_event(AudioStart(rate=SAMPLE_RATE, width=2, channels=1).event())
            await c.write_event(AudioChunk(rate=SAMPLE_RATE, width=2, channels=1, audio=audio[:16000]).event())
        with socket.create_connection((host, port)) as s:  # leaves in the middle of a chunk's payload
            s.sendall(b'{"type": "audio-chunk", "data": {"rate": 16000, "width": 2, "channels": 1}, ')
            s.sendall(b'"payload_length": 32000}\n' + audio[:100])
        async with client(server) as c:
            return await transcribe(c, audio)

    event = asyncio.run(go())
    assert event is not None and wer(QUESTION, Transcript.from_event(event).text) <= 0.2


def test_the_server_is_off_unless_listen_is_set() -> None:
    nothing = Engines(None, None, None, None)  # type: ignore[arg-type]  (never reached)
    assert start_wyoming(Config(), nothing, voice_config=None, bus=None, idle=lambda: True) is None


@pytest.mark.parametrize(
    ("listen", "ok"),
    [
        ("tcp://127.0.0.1:10700", True),
        ("tcp://0.0.0.0:10700", True),
        ("tcp://[::1]:10700", True),
        ("unix:///run/edgevoice/wyoming.sock", True),
        ("127.0.0.1:10700", False),
        ("tcp://127.0.0.1", False),
        ("tcp://127.0.0.1:70000", False),
        ("http://127.0.0.1:10700", False),
    ],
)
def test_listen_is_checked_at_load(listen: str, ok: bool) -> None:
    from edgevoice.config.load import config_from_dict
    from edgevoice.errors import ConfigError

    if ok:
        assert config_from_dict({"wyoming": {"listen": listen}}).wyoming.listen == listen
    else:
        with pytest.raises(ConfigError, match=r"wyoming\.listen"):
            config_from_dict({"wyoming": {"listen": listen}})


def test_config_check_warns_of_a_server_open_to_the_lan() -> None:
    from edgevoice.config_check import check_config

    def warned(listen: str) -> list[str]:
        config = replace(Config(), wyoming=WyomingConfig(listen=listen))
        return [w for w in check_config(config, devices=False).warnings if w.startswith("wyoming.listen")]

    (warning,) = warned("tcp://0.0.0.0:10700")
    assert "no authentication" in warning and "make the kiosk speak" in warning
    assert warned("tcp://127.0.0.1:10700") == [] and warned("unix:///run/edgevoice/wyoming.sock") == []
