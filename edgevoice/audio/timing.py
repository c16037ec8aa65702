"""Which sample is captured or played when: the bookkeeping between sample indices and device times behind
:mod:`edgevoice.audio.streams`'s streams. No PortAudio and no clock reads here: the streams' callbacks feed it.

The output stream numbers the samples it pulls from its source (silence it pads in when the source runs dry
included): source sample ``m`` becomes device sample ``j = m * rate / source_rate`` (soxr's streaming output is
aligned with its input; it only withholds a few ms of it). Each callback records the device index ``D`` of the first
sample of its buffer and that sample's DAC time ``T``, so source sample ``m`` reaches the DAC at
``T + (m * rate / source_rate - D) / rate``. PortAudio's ``T`` jitters with the callback's scheduling (±10 ms under
load), so a :class:`SampleAnchor` fits the line ``T - D / rate`` over the last 64 callbacks (median), from which
:meth:`~edgevoice.audio.streams.OutputStream.dac_time_of` returns ``offset + m / source_rate``;
:meth:`~edgevoice.audio.streams.InputStream.adc_time_of` does the same for captured samples. The :class:`PullLog` counts
only the samples the source really returned (not the padding), which gives
:meth:`~edgevoice.audio.streams.OutputStream.real_played` (how much of a reply the visitor has heard, for barge-in) and
:meth:`~edgevoice.audio.streams.OutputStream.dac_time_of_real`. The line holds only between two underruns: the device
then plays nothing for a while and its later samples lie on a line that much later. So each pull keeps the DAC time
of its first sample as the line put it when it was pulled, and a sample's DAC time asked later (a turn's record, made
after the reply) is read from there when the line has moved by more than :data:`LINE_MOVED_S` since.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass

import numpy as np

__all__ = ["LINE_MOVED_S", "OutputTiming", "PullLog", "SampleAnchor"]

_PULL_LOG = 4096  # source pulls remembered for real_played / dac_time_of_real
LINE_MOVED_S = 0.02
"""A line moved by more than this since a sample was pulled has moved for a reason (an underrun), not wavered with
the callbacks' scheduling: that sample's DAC time is then the one it was pulled with."""


class SampleAnchor:
    """Sample index <-> time. PortAudio's time of each callback's buffer jitters with the callback's scheduling
    (±10 ms under load through the ALSA ``pulse`` plugin, at times even backwards), but samples are evenly spaced:
    the median over the last 64 callbacks of ``time - index / rate`` fixes the line and follows clock drift."""

    _SIZE = 64

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._offsets = np.zeros(self._SIZE)
        self._n = 0

    def add(self, t: float, index: float) -> None:
        self._offsets[self._n % self._SIZE] = t - index / self.rate
        self._n += 1

    def offset(self) -> float | None:
        """The fitted ``time - index / rate``; None before the first :meth:`add`."""
        n = min(self._n, self._SIZE)
        return float(np.median(self._offsets[:n])) if n else None

    def time_of(self, index: float) -> float | None:
        """The time of sample ``index`` on the fitted line; None before the first :meth:`add`."""
        offset = self.offset()
        return None if offset is None else offset + index / self.rate

    def samples_by(self, t: float) -> int | None:
        """How many samples lie wholly before time ``t`` (sample ``i`` spans ``time_of(i)`` to ``time_of(i + 1)``),
        unclipped: negative before sample 0, beyond the samples seen so far after them; None before any :meth:`add`."""
        offset = self.offset()
        return None if offset is None else math.floor((t - offset) * self.rate)


@dataclass(frozen=True, slots=True)
class OutputTiming:
    """What one output callback knew: device sample ``device_frame`` reaches the DAC at ``dac_time``."""

    device_frame: int
    dac_time: float
    callback_time: float


@dataclass(frozen=True, slots=True)
class _Pull:
    start: int  # source index of the pull's first sample
    real_before: int  # real (not padded) samples pulled before it
    real: int  # real samples at the head of this pull
    t: float  # when it was pulled (the callback's start)
    dac: float | None  # its first sample's DAC time, on the line as it was then


class PullLog:
    """The samples an output stream pulled from its source, padding included, and which of them were real (returned
    by the source). Written by the stream's callback, read from other threads; remembers the last 4096 pulls."""

    def __init__(self) -> None:
        self.pulled = 0
        """Source samples pulled so far, padding included: the source index of the next one."""
        self.real = 0
        """Samples the source actually returned so far."""
        self._pulls: deque[_Pull] = deque(maxlen=_PULL_LOG)
        self._lock = threading.Lock()

    def add(self, n: int, real: int, t: float = 0.0, dac: float | None = None) -> None:
        """A pull of ``n`` samples at time ``t`` of which the source returned the first ``real`` (the rest is
        padding); ``dac``: when its first sample reaches the DAC, as the stream's line says now."""
        if real:
            with self._lock:
                self._pulls.append(_Pull(self.pulled, self.real, real, t, dac))
        self.pulled += n
        self.real += real

    def real_before(self, index: int) -> int:
        """Real samples among the first ``index`` source samples pulled."""
        with self._lock:
            pulls = list(self._pulls)
        for pull in reversed(pulls):
            if pull.start <= index:
                return pull.real_before + min(index - pull.start, pull.real)
        return pulls[0].real_before if pulls else 0

    def index_of_real(self, real_index: int) -> int | None:
        """The source index of the ``real_index``-th real sample (None if not pulled yet or forgotten)."""
        pull = self._pull_of_real(real_index)
        return None if pull is None else pull.start + real_index - pull.real_before

    def time_of_real(self, real_index: int) -> float | None:
        """When the ``real_index``-th real sample was pulled (None if not pulled yet or forgotten)."""
        pull = self._pull_of_real(real_index)
        return None if pull is None else pull.t

    def dac_time_of_real(self, real_index: int, rate: float) -> float | None:
        """When the ``real_index``-th real sample reaches the DAC (``rate``: the source's), from the time its pull
        was given; None if not pulled yet, forgotten or pulled without one."""
        pull = self._pull_of_real(real_index)
        return None if pull is None or pull.dac is None else pull.dac + (real_index - pull.real_before) / rate

    def _pull_of_real(self, real_index: int) -> _Pull | None:
        with self._lock:
            pulls = list(self._pulls)
        for pull in reversed(pulls):
            if pull.real_before <= real_index < pull.real_before + pull.real:
                return pull
        return None
