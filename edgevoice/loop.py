"""The live conversation loop: microphone ring → VAD + endpointing → responder → playback ring.

Threads, all owned here and joined on ``close()`` (bounded):
- the *listener* reads the microphone ring in 32 ms frames, runs Silero VAD and the endpointing state machine,
  asks Smart Turn when a pause begins, detects barge-in, and hands each committed turn to the responder;
- the *responder* transcribes the turn, streams the reply through the LLM and synthesizer into the playback ring.
The audio device callbacks (see :mod:`edgevoice.audio_io`) only copy into and out of the rings.
Stream time is counted in microphone samples, so the listener's logic is the same on real and simulated audio.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from edgevoice.clock import Clock, MonotonicClock
from edgevoice.endpointing import EndpointConfig, Endpointer, Pause, SpeechStart, TurnEnd
from edgevoice.errors import EdgeVoiceError
from edgevoice.interfaces import EndOfTurn, FloatAudio
from edgevoice.responder import ReplyTrace, Responder
from edgevoice.ring import SharedRing

log = logging.getLogger(__name__)

RATE = 16000
FRAME = 512
PREROLL_S = 0.3


@dataclass(frozen=True)
class Turn:
    turn_id: int
    audio: FloatAudio
    speech_end_t: float
    """Stream time (s) at which the visitor's speech ended, per the VAD frames."""
    committed_t: float
    """Stream time (s) at which the endpointer committed the turn."""
    committed_wall: float
    reason: str


class PlaybackControl:
    """Lets any thread silence the output at once: the output callback, the ring's only consumer, does the flush."""

    def __init__(self, ring: SharedRing) -> None:
        self.ring = ring
        self._flush = False
        self.flushed_samples = 0
        self.played = 0
        """Samples handed to the device (flushed ones excluded): the playback-stream position."""

    def request_flush(self) -> None:
        self._flush = True

    def read_into(self, out: np.ndarray) -> int:
        """Called from the output callback."""
        if self._flush:
            self._flush = False
            self.flushed_samples += self.ring.discard_all()
        queued = self.ring.available()
        n = self.ring.read_into(out, count_underrun=queued > 0)
        self.played += n
        return n


class VoiceLoop:
    def __init__(
        self,
        *,
        mic: SharedRing,
        speaker: SharedRing,
        vad: object,
        turn_model: EndOfTurn,
        responder: Responder,
        endpoint: EndpointConfig,
        clock: Clock | None = None,
        on_trace: Callable[[ReplyTrace, Turn], None] | None = None,
    ) -> None:
        self.mic, self.speaker = mic, speaker
        self.playback = PlaybackControl(speaker)
        self.vad = vad
        self.turn_model = turn_model
        self.responder = responder
        self.endpointer = Endpointer(endpoint)
        self.clock = clock or MonotonicClock()
        self.on_trace = on_trace
        self._turns: queue.Queue[Turn | None] = queue.Queue()
        self._stop = threading.Event()
        self._cancel = threading.Event()
        self._replying = threading.Event()
        self._ids = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self.samples_in = 0
        self.errors: list[EdgeVoiceError] = []
        self.barge_ins = 0
        self._reply_samples = 0

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        for name, target in (("listener", self._listen), ("responder", self._respond)):
            thread = threading.Thread(target=target, name=f"edgevoice-{name}", daemon=False)
            thread.start()
            self._threads.append(thread)

    def close(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._cancel.set()
        self._turns.put(None)
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()

    def __enter__(self) -> VoiceLoop:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- listener -------------------------------------------------------------------------------------------------
    def _listen(self) -> None:
        frames: deque[FloatAudio] = deque(maxlen=int(PREROLL_S * RATE / FRAME) + 1)
        turn: list[FloatAudio] | None = None
        self.vad.reset()  # type: ignore[attr-defined]
        while not self._stop.is_set():
            if not self.mic.wait_for(FRAME, timeout=0.1):
                continue
            frame = self.mic.read(FRAME)
            self.samples_in += FRAME
            t = self.samples_in / RATE
            probability = self.vad.probability(frame)  # type: ignore[attr-defined]
            frames.append(frame)
            if turn is not None:
                turn.append(frame)
            events = list(self.endpointer.feed(FRAME / RATE, probability))
            while events:
                event = events.pop(0)
                if isinstance(event, SpeechStart):
                    turn = list(frames)
                    if self._replying.is_set():
                        self._barge_in()
                elif isinstance(event, Pause) and turn is not None:
                    p = self.turn_model.probability_complete(np.concatenate(turn))
                    events += self.endpointer.report_turn_probability(p)
                elif isinstance(event, TurnEnd) and turn is not None:
                    audio = np.concatenate(turn)
                    self._turns.put(Turn(next(self._ids), audio, event.speech_end_t, t, self.clock.now(), event.reason))
                    turn = None

    def _barge_in(self) -> None:
        """The visitor speaks over the reply: silence the output now and cancel the reply's work."""
        self.barge_ins += 1
        self._cancel.set()
        self.playback.request_flush()
        log.info("barge-in: output flushed, reply cancelled")

    # -- responder ------------------------------------------------------------------------------------------------
    def _respond(self) -> None:
        while not self._stop.is_set():
            turn = self._turns.get()
            if turn is None:
                return
            self._cancel.clear()
            self._reply_samples = 0
            self._replying.set()
            trace = ReplyTrace(turn.turn_id, committed=turn.committed_wall)
            start = self.playback.played + self.speaker.available()
            try:
                self.responder.respond(turn.audio, trace, self._cancel, self._emit)
                self._wait_played()
            except EdgeVoiceError as exc:
                log.error("turn %d failed in %s: %s", turn.turn_id, exc.stage or "?", exc)
                self.errors.append(exc)
            finally:
                trace.cancelled = self._cancel.is_set()
                played = self.playback.played - start if trace.cancelled else None
                self.responder.commit(trace, played)
                self._replying.clear()
            if self.on_trace is not None:
                self.on_trace(trace, turn)

    def _emit(self, audio: FloatAudio) -> int:
        """Queue synthesized audio for playback, waiting for room (never dropping).

        Returns the end position of this audio within the current reply (samples)."""
        rest = audio
        while len(rest) and not self._cancel.is_set():
            n = self.speaker.write(rest[: self.speaker.free()]) if self.speaker.free() else 0
            rest = rest[n:]
            self._reply_samples += n
            if len(rest):
                self._stop.wait(0.01)
        return self._reply_samples

    def _wait_played(self) -> None:
        """Barge-in stays armed until the reply has left the ring."""
        while self.speaker.available() > 0 and not self._cancel.is_set() and not self._stop.is_set():
            self._stop.wait(0.02)
