"""The capture front end: what the microphone callback does with each buffer before anything listens to it.

In the input device's callback (PortAudio's thread), 10 ms at a time:
1. the echo canceller removes the kiosk's own voice (:class:`edgevoice.audio.echo_path.EchoPath`, fed with the exact
   playback);
2. the :class:`NearEndGate` watches the cleaned level while the kiosk speaks and pauses the speaker the moment the
   visitor starts talking over it (barge-in's fast path);
3. the cleaned audio goes into the microphone ring, for the listener (VAD, endpointing, recognition).

Why in the callback and not in the listener thread: the callback runs every 10-20 ms whatever the engines do, while
the listener shares the cores and the GIL with whisper.cpp, llama.cpp and Piper and can fall far behind the
microphone during replies. Cancellation and the gate cost a small fraction of a 10 ms callback's budget.
"""

from __future__ import annotations

import logging

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.echo_path import EchoPath
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.audio.timing import SampleAnchor
from edgevoice.errors import EdgeVoiceError
from edgevoice.interfaces import FloatAudio

log = logging.getLogger(__name__)

FRAME = SAMPLE_RATE // 100
"""10 ms: the echo canceller's frame, and the gate's."""


def dbfs(frame: FloatAudio) -> float:
    """RMS level of ``frame`` in dBFS."""
    return float(10 * np.log10(float(np.mean(frame * frame)) + 1e-12))


class NearEndGate:
    """Pauses the speaker when the echo-cancelled microphone rises while the kiosk speaks.

    With the echo removed the cleaned microphone stays near silence while only the kiosk speaks and rises within a
    few tens of milliseconds of the visitor's first word, long before AEC3 lets the near end through in full (~200
    ms). ``frames`` consecutive 10 ms frames above ``level_db`` (one by default: the quickest pause), or one frame
    ``strong_margin_db`` above it, pause the speaker. A level cannot tell a word from a cough or a door, so it only
    *pauses*: the listener's VAD then confirms (the barge-in proper: flush and cancel) or, after ``confirm_s`` without
    confirmation, the reply resumes where it stopped.

    Fed from the capture callback only; the loop arms it while a reply plays (:attr:`armed`).

    While the canceller is still settling (:attr:`settling`: its first seconds of the kiosk's voice after a start or
    a restart) the level is ``settling_margin_db`` higher. Measured live (a room with the echo 10 dB down): the first
    reply's residue peaked at -50 to -52 dBFS about a second in and fell below -90 dBFS after 2.5 s, while every later
    reply peaked at -79 to -95; a CI run saw a first reply cut by its own echo. A visitor talking over the kiosk is
    louder than that margin (speech at the microphone: -20 to -30 dBFS).

    A pause the VAD does not confirm means the canceller let the kiosk's own voice through: it lost the echo path
    (the path's delay jumped: a stream's latency changed, a device stalled) and needs seconds of voice to find it
    again, during which its residue keeps crossing any level the visitor's speech would. So after such a pause the
    level stands down until the canceller shows it has the echo again: ``stand_down_s`` of the kiosk's voice (armed,
    not paused) with no frame within ``recovery_margin_db`` of the level. Meanwhile barge-in waits for the VAD, a few
    hundred milliseconds slower, instead of the reply stuttering (the simulation: docs/decisions/2026-12-07.md).
    """

    def __init__(
        self,
        playback: PlaybackControl,
        *,
        level_db: float = -40.0,
        frames: int = 1,
        strong_margin_db: float = 10.0,
        confirm_s: float = 0.5,
        settling_margin_db: float = 10.0,
        stand_down_s: float = 1.5,
        recovery_margin_db: float = 6.0,
    ) -> None:
        self.playback = playback
        self.level_db = level_db
        self.frames = frames
        self.strong_margin_db = strong_margin_db
        self.confirm_s = confirm_s
        self.settling_margin_db = settling_margin_db
        self.stand_down_s = stand_down_s
        self.recovery_margin_db = recovery_margin_db
        self.armed = False
        """Set by the loop while a reply is playing and not cancelled."""
        self.settling = False
        """Set by the capture front end while the echo canceller has not yet heard enough of the kiosk's voice."""
        self.pauses = 0
        self.false_pauses = 0
        """Pauses the VAD did not confirm (the reply resumed)."""
        self.samples = 0
        """10 ms frames fed so far, in samples: the gate's own clock (capture stream time)."""
        self.paused_at: int | None = None
        """Capture sample position (after cancellation) of the latest pause."""
        self._loud = 0
        self._paused_for = 0
        self._quiet_for: int | None = None
        """While standing down: samples of the kiosk's voice since the residue last came near the level; else None."""

    @property
    def standing_down(self) -> bool:
        """Whether the level is off for now: a pause was not confirmed (the canceller lost the echo) and the residue
        has not stayed clear of the level since."""
        return self._quiet_for is not None

    @property
    def level(self) -> float:
        """The level (dBFS) above which the cleaned microphone pauses the speaker now."""
        return self.level_db + self.settling_margin_db if self.settling else self.level_db

    def is_loud(self, frame: FloatAudio) -> bool:
        """Whether ``frame`` (echo-cancelled) is above the level that pauses the speaker."""
        return dbfs(frame) > self.level

    def feed(self, cleaned: FloatAudio) -> None:
        """One 10 ms frame of the echo-cancelled microphone."""
        self.samples += len(cleaned)
        playback = self.playback
        if not self.armed:
            self._loud = 0
            if playback.paused and not playback.flush_pending:  # the reply ended while paused (a pending flush
                playback.paused = False  # lifts the pause itself, after discarding the reply)
            return
        if playback.paused:
            self._paused_for += len(cleaned)
            if self._paused_for >= self.confirm_s * SAMPLE_RATE:
                log.info("barge-in not confirmed by the VAD: resuming the reply")
                playback.paused = False
                self._loud = 0
                self.false_pauses += 1
                self._quiet_for = 0
            return
        level, threshold = dbfs(cleaned), self.level
        if self._quiet_for is not None:
            quiet = 0 if level > threshold - self.recovery_margin_db else self._quiet_for + len(cleaned)
            self._quiet_for = quiet if quiet < self.stand_down_s * SAMPLE_RATE else None
            return
        self._loud = self._loud + 1 if level > threshold else 0
        if self._loud >= self.frames or level > threshold + self.strong_margin_db:
            playback.paused = True
            self.pauses += 1
            self.paused_at = self.samples
            self._paused_for = 0


class CaptureFrontEnd:
    """The microphone sink: ``front_end(frames, t_adc)`` is what the input stream's callback calls.

    Without an echo path (a headset kiosk) the audio goes to the ring as it came and there is no level gate:
    barge-in then waits for the VAD.

    It also dates the ring's samples: :meth:`adc_time_of` gives the capture (ADC) time of any ring sample, from the
    callbacks' ``t_adc`` and the canceller's known delay; the samples keep their numbering when a stream is
    reopened (call :meth:`resync` then)."""

    def __init__(
        self,
        mic: SharedRing,
        echo: EchoPath | None = None,
        gate: NearEndGate | None = None,
        playback: PlaybackControl | None = None,
    ) -> None:
        self.mic = mic
        self.echo = echo
        self.gate = gate
        self.playback = playback
        self.failures = 0
        """10 ms frames passed on uncancelled because the echo canceller failed."""
        self.last_error: EdgeVoiceError | None = None
        self.invalid_samples = 0
        """NaN or infinite samples from the device, replaced by silence (or full scale) before anything used them."""
        self._pending = np.zeros(0, dtype=np.float32)
        self._received = 0
        self._anchor = SampleAnchor(SAMPLE_RATE)
        self._delay = echo.delay if echo is not None else 0

    def adc_time_of(self, ring_index: float) -> float | None:
        """When ring sample ``ring_index`` (counted from the ring's first sample) was captured; None before any."""
        return self._anchor.time_of(ring_index - self._delay)

    def resync(self) -> None:
        """A new input stream: forget the old stream's timing (its ADC times do not continue the new one's)."""
        self._anchor = SampleAnchor(SAMPLE_RATE)

    def __call__(self, frames: FloatAudio, t_adc: float = 0.0) -> None:
        if not np.isfinite(frames).all():  # a float device gone wrong: never let NaN reach the canceller or models
            self.invalid_samples += int(np.count_nonzero(~np.isfinite(frames)))
            frames = np.clip(np.nan_to_num(frames, nan=0.0, posinf=1.0, neginf=-1.0), -1.0, 1.0).astype(np.float32)
        self._anchor.add(t_adc, self._received)
        self._received += len(frames)
        if self.echo is None:
            self.mic.write(frames)
            return
        pending = np.concatenate((self._pending, frames)) if len(self._pending) else frames
        usable = len(pending) - len(pending) % FRAME
        out = np.empty(usable, dtype=np.float32)
        # a reply is on its way (synthesized) or still playing (the gate is armed until it has been played out)
        speaking = (self.playback is not None and self.playback.expect_audio) or (
            self.gate is not None and self.gate.armed
        )
        for start in range(0, usable, FRAME):
            frame = pending[start : start + FRAME]
            out[start : start + FRAME] = cleaned = self._clean(frame, speaking)
            if self.gate is not None:
                self.gate.settling = self.echo.settling
                self.gate.feed(cleaned)
        self._pending = pending[usable:].copy()
        if usable:
            self.mic.write(out)

    def _clean(self, frame: FloatAudio, speaking: bool) -> FloatAudio:
        assert self.echo is not None
        try:
            return self.echo.process(frame, speaking=speaking)
        except EdgeVoiceError as exc:
            if self.failures == 0:  # once: this runs every 10 ms
                log.error("echo canceller failed, passing the raw microphone on: %s", exc)
            self.failures += 1
            self.last_error = exc
            return frame
