"""The echo-cancelled microphone: 10 ms capture frames cleaned of the kiosk's own voice, with the playback as
reference.

The output callback copies every sample it hands to the device (silence included) into a *reference ring*, so the
reference is the device's exact timeline. The listener calls :meth:`EchoPath.process` with each 10 ms microphone
frame: all reference audio queued so far is passed to the canceller first (it precedes its own echo by the output
and input latencies, which AEC3 needs), then the capture frame. Runs on the listener thread only.
"""

from __future__ import annotations

import math

import numpy as np
import soxr

from edgevoice.aec import EchoCanceller
from edgevoice.interfaces import FloatAudio
from edgevoice.ring import SharedRing

RATE = 16000
FRAME = RATE // 100


class EchoPath:
    def __init__(self, canceller: EchoCanceller, reference: SharedRing, reference_rate: int) -> None:
        self.canceller = canceller
        self.reference = reference
        self._resampler = (
            soxr.ResampleStream(reference_rate, RATE, 1, dtype="float32", quality="HQ")
            if reference_rate != RATE
            else None
        )
        self._render = np.zeros(0, dtype=np.float32)
        self.energy_in = 0.0
        self.energy_out = 0.0
        """Capture energy before and after cancellation while the kiosk speaks (see :meth:`attenuation_db`)."""

    def process(self, frame: FloatAudio, *, speaking: bool) -> FloatAudio:
        """Clean one 10 ms capture frame; ``speaking``: the kiosk is playing a reply (counts toward attenuation)."""
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
            self.energy_in += float(np.dot(frame, frame))
            self.energy_out += float(np.dot(cleaned, cleaned))
        return cleaned

    @property
    def delay(self) -> int:
        """Samples by which :meth:`process`'s output lags its input (the canceller's framing)."""
        return self.canceller.capture_delay

    def attenuation_db(self) -> float | None:
        """How much quieter the microphone signal became while the kiosk spoke (echo return loss enhancement when
        only the echo was heard); None before any reply."""
        if self.energy_in <= 0:
            return None
        return 10 * math.log10(self.energy_in / max(self.energy_out, 1e-12))

    def close(self) -> None:
        self.canceller.close()
