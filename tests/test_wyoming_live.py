"""The Wyoming server inside a real ``edgevoice run`` (in the private PulseAudio room, with no echo in it): the
``wyoming`` package's client transcribes a spoken clip on the running kiosk's recognizer, and asks the voice
``kiosk`` to say a text, which comes out of the kiosk's speaker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize, SynthesizeVoice

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.pulse import PulseServer
from edgevoice.interfaces import Engines
from edgevoice.selftest import measure
from edgevoice.selftest.appliance import ApplianceProcess
from tests.conftest import heard_share, wer
from tests.display_stand_in import free_port
from tests.test_faults import appliance

pytestmark = [pytest.mark.models, pytest.mark.audio, pytest.mark.slow]

QUESTION = "Where is the whale skeleton?"
ANNOUNCEMENT = "The museum closes in fifteen minutes. Please make your way to the exit."


@contextmanager
def quiet_room(pulse: PulseServer, store, tmp_path: Path, config: str) -> Iterator[ApplianceProcess]:  # type: ignore[no-untyped-def]
    """``edgevoice run`` in the room without an echo (tests/test_faults.py adds one): the echo canceller's first
    seconds of the kiosk's voice can cut what it says by its own echo (edgevoice/audio/capture.py, NearEndGate),
    which is the canceller's matter, not this test's."""
    with appliance(pulse, store, tmp_path, config=config, echo=False) as process:
        yield process


async def connected(port: int, timeout: float = 60.0) -> AsyncTcpClient:
    """A client of the server, once it listens (a moment after the kiosk's ``ready``: its services start then)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            client = AsyncTcpClient("127.0.0.1", port, read_timeout=60)
            await client.connect()
            await client.disconnect()
            return AsyncTcpClient("127.0.0.1", port, read_timeout=60)  # listening: connected by ``async with``
        except ConnectionRefusedError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


def test_home_assistant_transcribes_on_the_kiosk_and_makes_it_speak(  # type: ignore[no-untyped-def]
    pulse: PulseServer, store, tmp_path: Path, speak: Callable[[str], np.ndarray], engines: Engines
) -> None:
    clip = (np.clip(speak(QUESTION), -1, 1) * 32767).astype("<i2").tobytes()  # made before the kiosk runs
    port = free_port()

    async def home_assistant() -> tuple[list[str], str]:
        async with await connected(port) as c:
            await c.write_event(Describe().event())
            info = await c.read_event()
            assert info is not None
            voices = [v.name for v in Info.from_event(info).tts[0].voices]
            await c.write_event(Transcribe(language="en").event())
            await c.write_event(AudioStart(rate=RATE, width=2, channels=1).event())
            await c.write_event(AudioChunk(rate=RATE, width=2, channels=1, audio=clip).event())
            await c.write_event(AudioStop().event())
            transcript = await c.read_event()
            assert transcript is not None and Transcript.is_type(transcript.type), transcript
            await c.write_event(Synthesize(text=ANNOUNCEMENT, voice=SynthesizeVoice(name="kiosk")).event())
            while (event := await c.read_event()) is not None and not AudioStop.is_type(event.type):
                pass
            return voices, Transcript.from_event(transcript).text

    config = f'[wyoming]\nlisten = "tcp://127.0.0.1:{port}"\n'
    with quiet_room(pulse, store, tmp_path, config) as app:
        spk_rec = pulse.record("spk.monitor", rate=RATE)
        spk_rec.wait_started()
        voices, text = asyncio.run(home_assistant())
        announced = app.next("announced", timeout=60)
        spk_rec.wait_more(0.8)
        spk = spk_rec.stop()
        app.stop()
        assert app.proc.returncode == 0, app.stderr_tail()
    assert "kiosk" in voices
    assert wer(QUESTION, text) <= 0.2, text
    assert announced["played"] is True, (announced, app.seen)
    said = measure.spans(spk, RATE, threshold=0.02, gap_s=1.5)
    assert said, "nothing came out of the kiosk's speaker"
    heard = engines.recognizer.transcribe(spk[said[0][0] : said[-1][1]]).text
    assert heard_share(ANNOUNCEMENT, heard) >= 0.65, heard
