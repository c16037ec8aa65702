"""One Wyoming client's connection (:class:`ClientHandler`): ``describe``, a transcription (``transcribe`` then
``audio-start``, ``audio-chunk``s, ``audio-stop``), a synthesis (``synthesize``), and text said on the kiosk (the
voice ``kiosk``). Every size is bounded; a request past a bound is answered with an ``error`` event and the
connection closed. Nothing else is served: no action, no configuration."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.tts import Synthesize

from edgevoice.audio.files import to_model_rate
from edgevoice.config.wyoming import WyomingConfig
from edgevoice.errors import EdgeVoiceError
from edgevoice.wyoming_server.engine_desk import EngineDesk
from edgevoice.wyoming_server.protocol import Limits, Refused, close_lingering, read_event, refusal

__all__ = ["KIOSK_VOICE", "ClientHandler", "Served"]

log = logging.getLogger(__name__)

KIOSK_VOICE = "kiosk"
"""The voice whose syntheses are said on the kiosk's speaker rather than sent back."""
SAMPLES_PER_CHUNK = 4096
"""Samples of synthesized audio in one ``audio-chunk``."""
RATES = (8000, 48000)
"""The sample rates a transcription's audio may have."""


@dataclass(frozen=True)
class Served:
    """What every connection shares: the settings, the ``describe`` answer, the engines and the kiosk's speaker
    (``speak``: None when the server may not speak on it)."""

    config: WyomingConfig
    info: Info
    desk: EngineDesk
    speak: Callable[[str], str | None] | None
    limits: Limits = field(default_factory=Limits)


class ClientHandler:
    """Serves one connection until the client leaves, is idle past ``client_timeout_s`` or breaks a bound."""

    def __init__(self, served: Served, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.served, self.reader, self.writer = served, reader, writer
        self._format: AudioStart | None = None
        self._audio = bytearray()
        self._language: str | None = None

    async def run(self) -> None:
        c = self.served.config
        try:
            while True:
                try:
                    event = await asyncio.wait_for(read_event(self.reader, self.served.limits), c.client_timeout_s)
                except TimeoutError:
                    log.info("wyoming: a client idle for %.0f s was closed", c.client_timeout_s)
                    break
                if event is None or not await self.handle(event):
                    break
        except Refused as exc:
            log.info("wyoming: refused a client's request (%s): %s", exc.code, exc)
            with contextlib.suppress(ConnectionError):
                await self.write(refusal(exc))
            await close_lingering(self.reader, self.writer)  # it may still be sending what was refused
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client left mid-event: nothing of it is kept
        finally:
            self.writer.close()
            with contextlib.suppress(ConnectionError):
                await self.writer.wait_closed()

    async def write(self, event: Event) -> None:
        await async_write_event(event, self.writer)

    async def handle(self, event: Event) -> bool:
        """Serve one event; False ends the connection."""
        if Describe.is_type(event.type):
            await self.write(self.served.info.event())
        elif Ping.is_type(event.type):
            await self.write(Pong(text=Ping.from_event(event).text).event())
        elif Transcribe.is_type(event.type):
            self._language = Transcribe.from_event(event).language
        elif AudioStart.is_type(event.type):
            self._format, self._audio = self._checked_format(AudioStart.from_event(event)), bytearray()
        elif AudioChunk.is_type(event.type):
            self._add(AudioChunk.from_event(event))
        elif AudioStop.is_type(event.type):
            await self._transcribe()
        elif Synthesize.is_type(event.type):
            await self._synthesize(Synthesize.from_event(event))
        return True  # other events (a satellite's, a wake word's) are not this server's: ignored, as Wyoming does

    @staticmethod
    def _checked_format(start: AudioStart) -> AudioStart:
        if start.width != 2 or start.channels not in (1, 2) or not RATES[0] <= start.rate <= RATES[1]:
            raise Refused(
                code="wyoming_bad_audio",
                message=f"audio of {start.rate} Hz, {start.width} bytes, {start.channels} channels: expected "
                f"16-bit PCM (width 2), 1 or 2 channels, {RATES[0]} to {RATES[1]} Hz",
            )
        return start

    def _add(self, chunk: AudioChunk) -> None:
        if self._format is None:
            raise Refused(code="wyoming_bad_event", message="audio-chunk before audio-start")
        f = self._format
        if (chunk.rate, chunk.width, chunk.channels) != (f.rate, f.width, f.channels):
            raise Refused(code="wyoming_bad_audio", message="an audio-chunk's format differs from its audio-start's")
        limit = int(self.served.config.max_audio_s * f.rate) * f.width * f.channels
        if len(self._audio) + len(chunk.audio) > limit:
            raise Refused(
                code="wyoming_too_long",
                message=f"the audio is longer than wyoming.max_audio_s = {self.served.config.max_audio_s:g} s",
            )
        self._audio += chunk.audio

    async def _transcribe(self) -> None:
        if self._format is None:
            raise Refused(code="wyoming_bad_event", message="audio-stop before audio-start")
        f, data = self._format, bytes(self._audio)
        self._format, self._audio = None, bytearray()
        samples = np.frombuffer(data[: len(data) - len(data) % (2 * f.channels)], dtype="<i2").astype(np.float32)
        samples = samples.reshape(-1, f.channels).mean(axis=1) / 32768.0
        desk = self.served.desk
        audio = to_model_rate(samples, f.rate, desk.recognizer.sample_rate)
        try:
            transcript = await desk.transcribe(audio)
        except EdgeVoiceError as exc:
            log.error("wyoming: a transcription failed: %s", exc)
            await self.write(Error(text=f"the transcription failed: {exc}", code=exc.code).event())
            return
        language = getattr(desk.recognizer, "language", None) or self._language  # what it was heard as
        await self.write(Transcript(text=transcript.text, language=language).event())

    async def _synthesize(self, request: Synthesize) -> None:
        c = self.served.config
        text = request.text.strip()
        if len(text) > c.max_text_chars:
            raise Refused(
                code="wyoming_too_long",
                message=f"the text has {len(text)} characters; wyoming.max_text_chars = {c.max_text_chars}",
            )
        desk = self.served.desk
        if request.voice is not None and request.voice.name == KIOSK_VOICE:
            if self.served.speak is None:
                await self.write(
                    Error(text="speaking on the kiosk is off (wyoming.speak_on_kiosk)", code="wyoming_off").event()
                )
                return
            if text and self.served.speak(text) is None:
                await self.write(
                    Error(text="the kiosk has texts waiting to be said already", code="wyoming_busy").event()
                )
                return
            audio = np.zeros(desk.sample_rate // 10, dtype=np.float32)  # said on the kiosk: a tenth of a second back
        else:
            try:
                audio = await desk.synthesize(text) if text else np.zeros(0, dtype=np.float32)
            except EdgeVoiceError as exc:
                log.error("wyoming: a synthesis failed: %s", exc)
                await self.write(Error(text=f"the synthesis failed: {exc}", code=exc.code).event())
                return
        await self._send_audio(audio, desk.sample_rate)

    async def _send_audio(self, audio: np.ndarray, rate: int) -> None:
        pcm = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        await self.write(AudioStart(rate=rate, width=2, channels=1).event())
        step = SAMPLES_PER_CHUNK * 2
        for start in range(0, len(pcm), step):
            await self.write(AudioChunk(rate=rate, width=2, channels=1, audio=pcm[start : start + step]).event())
        await self.write(AudioStop().event())
