"""The echo-cancelled microphone: 10 ms capture frames cleaned of the kiosk's own voice, with the playback as
reference.

The output callback copies every sample it hands to the device (silence included) into a *reference ring*, so the
reference is the device's exact timeline. The capture front end (:mod:`edgevoice.audio.capture`, in the input callback)
calls :meth:`EchoPath.process` with each 10 ms microphone frame: all reference audio queued so far is passed to the
canceller first (it precedes its own echo by the output and input latencies, which AEC3 needs), then the capture
frame. Runs on that one thread only.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
import soxr

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.aec import EchoCanceller
from edgevoice.audio.ring import SharedRing
from edgevoice.interfaces import FloatAudio

FRAME = SAMPLE_RATE // 100
REFERENCE_KEPT_S = 0.2
"""On a restart, the reference older than this is dropped: longer than any output plus input latency, shorter than
what queues while one stream is gone and the other is back (a second)."""
SETTLING_S = 3.0
"""How much of the kiosk's voice a fresh canceller hears before it is trusted to have converged: live, the first
reply's residue peaked about a second in and fell to where later replies stay after 2.5 s."""


@dataclass(slots=True)
class ReplyEcho:
    """What the canceller left of the kiosk's voice while it spoke: over one reply (see
    :meth:`EchoPath.take_reply_echo`) or since startup (:meth:`EchoPath.attenuation_db`)."""

    energy_in: float = 0.0
    energy_out: float = 0.0
    peak_out: float = 0.0
    """The loudest cleaned 10 ms frame's mean power: against the barge-in level, how near the residue came to it."""

    def add(self, frame: FloatAudio, cleaned: FloatAudio) -> None:
        e_out = float(np.dot(cleaned, cleaned))
        self.energy_in += float(np.dot(frame, frame))
        self.energy_out += e_out
        self.peak_out = max(self.peak_out, e_out / len(cleaned))

    def attenuation_db(self) -> float | None:
        if self.energy_in <= 0:
            return None
        return 10 * math.log10(self.energy_in / max(self.energy_out, 1e-12))

    def peak_dbfs(self) -> float | None:
        return None if self.energy_in <= 0 else 10 * math.log10(self.peak_out + 1e-12)


class EchoPath:
    def __init__(self, canceller: EchoCanceller, reference: SharedRing, reference_rate: int) -> None:
        self.canceller = canceller
        self.reference = reference
        self.reference_rate = reference_rate
        self._resampler = self._new_resampler()
        self._render = np.zeros(0, dtype=np.float32)
        self._renewal: EchoCanceller | None = None
        """A fresh canceller waiting to replace :attr:`canceller` at the next frame (see :meth:`restart`)."""
        self._renewal_lock = threading.Lock()
        self.restarts = 0
        self.heard = 0
        """Samples cancelled while the kiosk spoke, since the canceller (re)started."""
        self._total = ReplyEcho()
        self._reply = ReplyEcho()

    def _new_resampler(self) -> soxr.ResampleStream | None:
        if self.reference_rate == SAMPLE_RATE:
            return None
        return soxr.ResampleStream(self.reference_rate, SAMPLE_RATE, 1, dtype="float32", quality="HQ")

    def restart(self) -> None:
        """A stream was reopened: the echo path is a new one (another device, other latencies), so start over as at
        startup. From any thread; the capture thread swaps the canceller in at its next frame.

        Why: AEC3 carried over from the old streams trusts what it had learnt, and with the streams back at
        different moments its estimate of the echo path is wrong: the next reply's echo can get through near the
        barge-in level and the kiosk interrupts itself. Started over, it cancels as well as at startup."""
        renewal = self.canceller.renewed()  # built here, not in the audio callback
        with self._renewal_lock:
            previous, self._renewal = self._renewal, renewal
        if previous is not None:
            previous.close()

    def _renew(self) -> None:
        """(Capture thread) swap in the fresh canceller, and keep only the newest reference: what is still to
        come back as echo, not what was queued while the microphone was gone."""
        if not self._renewal_lock.acquire(blocking=False):
            return  # being replaced right now: next frame
        try:
            renewal, self._renewal = self._renewal, None
        finally:
            self._renewal_lock.release()
        if renewal is None:
            return
        old, self.canceller = self.canceller, renewal
        old.close()
        stale = self.reference.available() - int(REFERENCE_KEPT_S * self.reference_rate)
        if stale > 0:
            self.reference.read(stale)
        self._resampler = self._new_resampler()
        self._render = np.zeros(0, dtype=np.float32)
        self.heard = 0
        self.restarts += 1

    def process(self, frame: FloatAudio, *, speaking: bool) -> FloatAudio:
        """Clean one 10 ms capture frame; ``speaking``: the kiosk is playing a reply (counts toward attenuation)."""
        if self._renewal is not None:
            self._renew()
        queued = self.reference.available()
        if queued:
            ref = self.reference.read(queued)
            if self._resampler is not None:
                ref = self._resampler.resample_chunk(ref)
            self._render = np.concatenate([self._render, ref])
        while len(self._render) >= FRAME:
            self.canceller.process_render(self._render[:FRAME])
            self._render = self._render[FRAME:]
        cleaned = self.canceller.process_capture(frame)
        if speaking:
            self.heard += len(frame)
            self._total.add(frame, cleaned)
            self._reply.add(frame, cleaned)
        return cleaned

    @property
    def settling(self) -> bool:
        """Whether the canceller has heard less than :data:`SETTLING_S` of the kiosk's voice since it (re)started:
        its residue may still come near the barge-in level."""
        return self.heard < SETTLING_S * SAMPLE_RATE

    @property
    def delay(self) -> int:
        """Samples by which :meth:`process`'s output lags its input (the canceller's framing)."""
        return self.canceller.capture_delay

    def attenuation_db(self) -> float | None:
        """How much quieter the microphone signal became while the kiosk spoke (echo return loss enhancement when
        only the echo was heard); None before any reply."""
        return self._total.attenuation_db()

    def take_reply_echo(self) -> ReplyEcho:
        """The echo measured since the last call (one reply's, when called after each); starts the next count.
        Safe from any thread: the callback adds to whichever count it holds, a frame or so may land in either."""
        reply, self._reply = self._reply, ReplyEcho()
        return reply

    def close(self) -> None:
        with self._renewal_lock:
            renewal, self._renewal = self._renewal, None
        if renewal is not None:
            renewal.close()
        self.canceller.close()
