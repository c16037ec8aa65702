"""The Wyoming server of a run, as ``[wyoming]`` configures it (:func:`start_wyoming`): what ``describe`` answers
(the recognizer's and the voice's languages, from the configured models) and the server on the loop's engines."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from wyoming.info import AsrModel, AsrProgram, Attribution, Info, TtsProgram, TtsVoice

from edgevoice import __version__
from edgevoice.config import Config
from edgevoice.interfaces import Engines
from edgevoice.live.bus import EventBus
from edgevoice.live.loop import VoiceLoop
from edgevoice.models.configured import piper_files
from edgevoice.models.store import ModelStore
from edgevoice.wyoming_server.engine_desk import EngineDesk
from edgevoice.wyoming_server.handler import KIOSK_VOICE, Served
from edgevoice.wyoming_server.kiosk_speaker import KioskSpeaker
from edgevoice.wyoming_server.server import WyomingServer

__all__ = ["WyomingService", "describe", "serve_the_loop", "start_wyoming", "voice_languages"]

log = logging.getLogger(__name__)

LOWER_THAN_THE_LOOP = 5
"""How much lower the CPU priority of the Wyoming requests' work is than the loop's compute threads'."""
ATTRIBUTION = Attribution(name="edgevoice", url="https://github.com/edgevoice/edgevoice")


def voice_languages(voice_config: Path) -> list[str]:
    """The language of a Piper voice (its ``.onnx.json``: ``language.code``, such as "en_US"); none when unknown."""
    try:
        voice = json.loads(voice_config.read_text(encoding="utf-8"))
        code = voice.get("language", {}).get("code") or voice.get("espeak", {}).get("voice")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(code)] if code else []


def asr_languages(config: Config) -> list[str]:
    language = config.asr.language
    if language != "auto":
        return [language]
    from edgevoice.engines.whispercpp import whisper_languages

    return list(whisper_languages())


def describe(config: Config, tts_languages: Sequence[str], *, speak_on_kiosk: bool) -> Info:
    """The ``info`` answer: one speech-to-text program with the configured recognizer, one text-to-speech program
    with the configured voice and, with ``speak_on_kiosk``, the voice ``kiosk`` (said on the kiosk's speaker)."""
    asr = AsrModel(
        name=config.models.asr,
        description=f"edgevoice's recognizer ({config.models.asr})",
        attribution=ATTRIBUTION,
        installed=True,
        version=__version__,
        languages=asr_languages(config),
    )
    voices = [
        TtsVoice(
            name=config.models.tts,
            description=f"edgevoice's voice ({config.models.tts})",
            attribution=ATTRIBUTION,
            installed=True,
            version=__version__,
            languages=list(tts_languages),
        )
    ]
    if speak_on_kiosk:
        voices.append(
            TtsVoice(
                name=KIOSK_VOICE,
                description="said aloud on the kiosk's own speaker (a tenth of a second of silence comes back)",
                attribution=ATTRIBUTION,
                installed=True,
                version=__version__,
                languages=list(tts_languages),
            )
        )
    return Info(
        asr=[
            AsrProgram(
                name="edgevoice-asr",
                description="edgevoice speech to text",
                attribution=ATTRIBUTION,
                installed=True,
                version=__version__,
                models=[asr],
            )
        ],
        tts=[
            TtsProgram(
                name="edgevoice-tts",
                description="edgevoice text to speech",
                attribution=ATTRIBUTION,
                installed=True,
                version=__version__,
                voices=voices,
            )
        ],
    )


class WyomingService:
    """The running server and the kiosk's speaker it hands texts to; :meth:`close` stops both."""

    def __init__(self, server: WyomingServer, speaker: KioskSpeaker | None) -> None:
        self.server, self.speaker = server, speaker

    def close(self) -> None:
        self.server.close()
        if self.speaker is not None:
            self.speaker.close()


def start_wyoming(
    config: Config,
    engines: Engines,
    *,
    voice_config: Path | None,
    bus: EventBus | None,
    idle: Callable[[], bool],
    nice: int = 5,
) -> WyomingService | None:
    """The server ``[wyoming] listen`` names, started on ``engines`` (the loop's: a request waits for ``idle``, up to
    ``idle_wait_s``); None when it is off. ``bus``: the loop's, where texts to say on the kiosk are published (None:
    none are taken)."""
    c = config.wyoming
    if not c.listen:
        return None
    speaker = KioskSpeaker(bus) if bus is not None and c.speak_on_kiosk else None
    languages = voice_languages(voice_config) if voice_config is not None else []
    desk = EngineDesk(engines.recognizer, engines.synthesizer, idle=idle, idle_wait_s=c.idle_wait_s, nice=nice)
    served = Served(
        c, describe(config, languages, speak_on_kiosk=speaker is not None), desk, speaker.offer if speaker else None
    )
    try:
        server = WyomingServer(served).start()
    except BaseException:
        desk.close()
        if speaker is not None:
            speaker.close()
        raise
    return WyomingService(server, speaker)


def serve_the_loop(config: Config, store: ModelStore, engines: Engines, loop: VoiceLoop) -> WyomingService | None:
    """``edgevoice run``'s server (None when ``[wyoming] listen`` is off): on the loop's engines, at a lower CPU
    priority than its compute threads, taking texts to say on its bus."""
    if not config.wyoming.listen:
        return None
    _, voice_config = piper_files(store, config.models.tts)
    nice = config.audio.compute_nice + LOWER_THAN_THE_LOOP
    return start_wyoming(config, engines, voice_config=voice_config, bus=loop.bus, idle=loop.idle, nice=nice)
