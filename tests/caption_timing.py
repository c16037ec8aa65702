"""Caption timing against a referee outside the appliance: the speaker sink's monitor, recorded while the page
shows the captions, tells when each clause's first sample was really played.

- :class:`RecordingClock` puts the recording's samples on this process's wall clock: the null sink plays in real
  time and the recorder's file grows as it does, so sample ``n`` was played no later than the first look (every
  2 ms, on a thread) that found the file holding it; the line under the earliest looks is the clock.
- :func:`reply_onset` finds a reply's first sample in the recording: the kiosk plays exact zeros between replies
  (the rings pad with silence; the sink's path is bit-exact), so the reply begins at the first non-zero sample after
  50 ms of them.
- Each later clause lies that many samples after the first as the turn record's clause times say: their differences
  are sample counts at the voice's rate (one fitted line, so its offset cancels), not the output stream's guess of
  when the DAC plays them.
- :func:`page_skew_ms` reads the page's clock (``performance.timeOrigin + performance.now()``) against this process's
  between two wall-clock reads.

:func:`caption_timing` gives, per clause, the caption's lateness on the referee (``late_ms``, negative: early) and
on the turn record's own DAC times (``late_device_ms``).
"""

from __future__ import annotations

import re
import threading
import time

import numpy as np

from edgevoice.audio.pulse import PulseServer
from edgevoice.audio.pulse.clients import Recorder
from edgevoice.interfaces import FloatAudio
from tests.test_display_browser import Browser

LOOK_S = 0.002
QUIET_S = 0.05
"""Exact zeros before a reply's first sample."""


class RecordingClock:
    """When each sample of ``recorder``'s recording was played, in Unix seconds (see the module's docstring)."""

    def __init__(self, recorder: Recorder) -> None:
        self.rate = recorder.rate
        self._recorder = recorder
        self._looks: list[tuple[float, int]] = []
        """(time, samples) at each look that found the file grown."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recording-clock")
        self._thread.start()

    def _run(self) -> None:
        seen = -1
        while not self._stop.wait(LOOK_S):
            n = self._recorder.samples
            t = time.time()
            if n > seen:
                self._looks.append((t, n))
                seen = n

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def offset(self, around: float, span_s: float = 20.0) -> float:
        """Unix time of sample 0 fitted to the looks within ``span_s`` of ``around`` (the sink's clock may drift
        from the wall clock over a long recording)."""
        near = [t - n / self.rate for t, n in self._looks if abs(t - around) <= span_s and n > 0]
        assert near, f"no look at the recording within {span_s} s of {around}"
        return min(near)

    def time_of(self, index: int, around: float) -> float:
        return self.offset(around) + index / self.rate

    def index_at(self, t: float) -> int:
        return round((t - self.offset(t)) * self.rate)


def reply_onset(recording: FloatAudio, near: int, rate: int, *, before_s: float = 1.5, after_s: float = 0.5) -> int:
    """The first non-zero sample after :data:`QUIET_S` of exact zeros, from ``before_s`` before ``near`` (where the
    output stream says the reply began) to ``after_s`` after it."""
    start = max(0, near - round(before_s * rate))
    segment = recording[start : near + round(after_s * rate)]
    loud = np.flatnonzero(segment)
    quiet = round(QUIET_S * rate)
    gaps = np.diff(np.concatenate([[-quiet - 1], loud])) > quiet
    found = loud[gaps]
    assert len(found), f"no reply onset within {before_s} s before and {after_s} s after sample {near}"
    return start + int(found[0])


def sink_latency_ms(pulse: PulseServer, sink: str = "spk") -> float | None:
    """The null sink's configured latency: how far ahead of its clock it renders, so how much sooner than the sink
    counts a sample played its monitor may have it (the referee's own lead, at most)."""
    for block in pulse.pactl("list", "sinks").split("Sink #")[1:]:
        if f"Name: {sink}\n" in block and (found := re.search(r"Latency: \d+ usec, configured (\d+) usec", block)):
            return int(found.group(1)) / 1000
    return None


def page_skew_ms(browser: Browser, looks: int = 5) -> float:
    """The page's Unix ms (``performance.timeOrigin + performance.now()``) minus this process's, from the look with
    the shortest round trip."""
    best: tuple[float, float] | None = None
    for _ in range(looks):
        t0 = time.time()
        page = browser.evaluate("performance.timeOrigin + performance.now()")
        t1 = time.time()
        assert isinstance(page, float | int)
        if best is None or t1 - t0 < best[0]:
            best = (t1 - t0, float(page) - (t0 + t1) / 2 * 1000)
    assert best is not None
    return best[1]


def caption_timing(
    recording: FloatAudio,
    clock: RecordingClock,
    turn: dict[str, object],
    captions: list[dict[str, object]],
    origin: float,
    skew_ms: float,
) -> list[dict[str, object]]:
    """Per caption of ``turn``: ``late_ms`` (the page's receipt against the referee) and ``late_device_ms``
    (against the turn record's ``clauses_played_unix_ms``), both negative when the caption came first;
    ``onset_gap_ms``: the referee's first sample against the record's (positive: played later than it said)."""
    played = turn["clauses_played_unix_ms"]
    assert isinstance(played, list) and len(played) == len(captions) and played[0] is not None, (played, captions)
    first = float(played[0]) / 1000
    onset = reply_onset(recording, clock.index_at(first), clock.rate)
    heard0 = clock.time_of(onset, first) * 1000
    rows = []
    for caption, device in zip(captions, played, strict=True):
        at = origin + float(caption["at"]) - skew_ms  # type: ignore[arg-type]
        heard = heard0 + float(device) - float(played[0])
        rows.append(
            {
                "turn": turn["turn"],
                "index": caption["index"],
                "late_ms": round(at - heard, 1),
                "late_device_ms": round(at - float(device), 1),
                "onset_gap_ms": round(heard0 - float(played[0]), 1),
                "output_ms": turn.get("stages_ms", {}).get("output"),  # type: ignore[attr-defined]
                "sink_latency_ms": turn.get("sink_latency_ms"),
            }
        )
    return rows
