"""The consumer side of the playback ring, as the output device callback sees it: flush and pause on request,
count what was played, mirror every buffer into the echo canceller's reference ring."""

from __future__ import annotations

import threading
import time

import numpy as np

from edgevoice.audio.ring import SharedRing
from edgevoice.audio.silence import Silence

_NOTHING = np.zeros(0, dtype=np.float32)
_NOTHING.flags.writeable = False


class PlaybackControl:
    """Lets any thread silence the output at once: the output callback, the ring's only consumer, does the flush."""

    def __init__(self, ring: SharedRing, reference: SharedRing | None = None) -> None:
        self.ring = ring
        self.reference = reference
        """When set, every buffer handed to the device (silence included) is copied here for echo cancellation."""
        self._flush = False
        self.flushed_samples = 0
        self.played = 0
        """Samples handed to the device (flushed ones excluded): the playback-stream position."""
        self.expect_audio = False
        """True while a reply is being synthesized: running dry then is an underrun (an audible gap)."""
        self._zeros = Silence()

    def request_flush(self) -> None:
        self._flush = True

    @property
    def flush_pending(self) -> bool:
        """A flush was requested and the output callback has not carried it out yet."""
        return self._flush

    paused = False
    """While True the speaker plays silence and the queued reply waits (a barge-in not yet confirmed)."""

    def wait_flushed(self, stop: threading.Event, timeout: float = 0.5) -> bool:
        """Wait (polling: the callback takes no locks) until the output callback has carried out the flush."""
        deadline = time.monotonic() + timeout
        while self._flush and time.monotonic() < deadline and not stop.is_set():
            stop.wait(0.005)
        return not self._flush

    def read_into(self, out: np.ndarray) -> int:
        """Called from the output callback: fill ``out`` (zeros where nothing is queued)."""
        if self._flush:
            self._flush = False
            self.paused = False
            self.flushed_samples += self.ring.discard_all()
        if self.paused:
            out[:] = 0.0
            return 0
        n = self.ring.read_into(out, count_underrun=self.expect_audio)
        self.played += n
        return n

    def pull(self, n: int) -> np.ndarray:
        """Called from the output callback: up to ``n`` queued samples; the stream plays silence for the rest."""
        if not self._flush and not self.expect_audio and not self.ring.available():  # nothing to play: no allocation
            if self.reference is not None:
                self.reference.write(self._zeros(n))
            return _NOTHING
        out = np.zeros(n, dtype=np.float32)
        got = self.read_into(out)
        if self.reference is not None:
            self.reference.write(out)
        return out[:got]
