"""The Wyoming requests' model work (:class:`EngineDesk`): one request at a time, on one thread of its own at a lower
CPU priority than the live loop, each after waiting for the kiosk to be between turns (a visitor's turn goes first).
The engines are the loop's own (whisper.cpp's context takes its lock per decode, the voice's espeak bridge its own),
so a request never runs in one at the same time as the loop; at worst a turn that begins meanwhile waits for one
decode."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from edgevoice.events import Transcript
from edgevoice.interfaces import FloatAudio, Recognizer, Synthesizer
from edgevoice.priority import lower_this_thread
from edgevoice.reply.speech_text import normalize_for_speech
from edgevoice.thread_names import name_this_thread

__all__ = ["EngineDesk"]

log = logging.getLogger(__name__)

T = TypeVar("T")

IDLE_POLL_S = 0.05
"""How often a request waiting for the kiosk to fall idle looks again."""


class EngineDesk:
    """Runs transcriptions and syntheses for Wyoming's clients (``idle``: the kiosk is between turns)."""

    def __init__(
        self,
        recognizer: Recognizer,
        synthesizer: Synthesizer,
        *,
        idle: Callable[[], bool] = lambda: True,
        idle_wait_s: float = 10.0,
        nice: int = 5,
    ) -> None:
        self.recognizer, self.synthesizer = recognizer, synthesizer
        self.idle, self.idle_wait_s = idle, idle_wait_s
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(
            1, thread_name_prefix="edgevoice-wyoming", initializer=self._begin, initargs=(nice,)
        )

    @staticmethod
    def _begin(nice: int) -> None:
        name_this_thread("ev-wyoming")
        lower_this_thread(nice)

    async def transcribe(self, audio: FloatAudio) -> Transcript:
        """``audio``: mono float32 at the recognizer's rate."""
        return await self._run(lambda: self.recognizer.transcribe(audio))

    async def synthesize(self, text: str) -> FloatAudio:
        """The voice's audio of ``text`` (mono float32 at :attr:`sample_rate`), numbers and signs read out as words."""

        def speak() -> FloatAudio:
            chunks = list(self.synthesizer.synthesize(normalize_for_speech(text)))
            return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)

        return await self._run(speak)

    @property
    def sample_rate(self) -> int:
        return self.synthesizer.sample_rate

    async def _run(self, work: Callable[[], T]) -> T:
        def when_idle() -> T:
            waited = 0.0
            while not self.idle() and waited < self.idle_wait_s and not self._stop.is_set():
                self._stop.wait(IDLE_POLL_S)
                waited += IDLE_POLL_S
            return work()

        return await asyncio.get_running_loop().run_in_executor(self._pool, when_idle)

    def close(self) -> None:
        """Stop: requests not begun are dropped; one in progress ends first (an engine call cannot be cut)."""
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
