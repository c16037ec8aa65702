"""What the input and output streams share: PortAudio's stream lifetime (open, start, stop, close, each step
bounded), the callback statistics (:class:`StreamStats`) and the liveness check the loop uses to reopen a device
that stopped delivering. The streams themselves are in :mod:`edgevoice.audio.streams`."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import numpy as np

from edgevoice.audio.devices import SampleFormat, bounded_call, find_device, open_stream, start_portaudio
from edgevoice.errors import AudioDeviceError
from edgevoice.thread_names import name_this_thread

PA_CONTINUE, PA_ABORT = 0, 2  # PaStreamCallbackResult (pyaudio is imported only when a stream opens)
INPUT_OVERFLOW, OUTPUT_UNDERFLOW = 0x2, 0x4  # PaStreamCallbackFlags
_STATS_WINDOW = 1000  # callbacks in the p99 window (10 s of 10 ms buffers)


@dataclass(frozen=True, slots=True)
class StreamStats:
    callbacks: int
    device_frames: int
    xruns: int
    """Input overflows (InputStream) or output underflows (OutputStream) reported by PortAudio."""
    max_callback_ms: float
    p99_callback_ms: float
    """Over the last 1000 callbacks."""
    last_callback_age_s: float | None
    """Seconds since the last callback returned; None before the first one."""
    max_gap_ms: float = 0.0
    """Longest time between the starts of two callbacks: a late callback (the GIL held elsewhere) shows here."""
    audible_xruns: int = 0
    """Output only: underflows between two blocks with sound (a gap heard in a reply), not in the silence between
    replies nor at a reply's edges."""


class Stream:
    """What input and output streams share: the PortAudio instance, lifetime, statistics and liveness."""

    kind: Literal["input", "output"]

    def __init__(self, stop_timeout: float) -> None:
        self._stop_timeout = stop_timeout
        self._pa: Any = None
        self._stream: Any = None
        self._durations = np.zeros(_STATS_WINDOW)
        self._callbacks = 0
        self._device_frames = 0
        self._xruns = 0
        self._audible_xruns = 0
        self._max_duration = 0.0
        self._max_gap = 0.0
        self._last_start: float | None = None
        self._last_callback: float | None = None
        self._started_at: float | None = None
        self._first_callback = threading.Event()
        self._error: BaseException | None = None

    def _open(
        self, device: str | int | None, rate: int | None, frame_ms: float, sample_format: SampleFormat, channels: int
    ) -> None:
        self._pa = start_portaudio()
        try:
            self.device = find_device(self._pa, device, self.kind)
            self.rate = int(rate or self.device.default_rate)
            self.frames_per_buffer = max(1, round(self.rate * frame_ms / 1000))
            self.channels = channels
            self.sample_format = sample_format
            self._dtype = np.dtype("<i2") if sample_format == "int16" else np.dtype("<f4")
            self._stream = open_stream(
                self._pa,
                self.device,
                self.kind,
                rate=self.rate,
                channels=channels,
                sample_format=sample_format,
                frames_per_buffer=self.frames_per_buffer,
                callback=self._callback,
            )
        except BaseException:
            self.close()
            raise

    def _callback(self, in_data: bytes | None, frame_count: int, time_info: dict[str, float], status: int) -> Any:
        raise NotImplementedError

    def _done(self, start: float) -> None:
        """Bookkeeping at the end of every callback."""
        end = time.perf_counter()
        duration = end - start
        self._durations[self._callbacks % _STATS_WINDOW] = duration
        self._max_duration = max(self._max_duration, duration)
        if self._last_start is not None:
            self._max_gap = max(self._max_gap, start - self._last_start)
        self._last_start = start
        if not self._callbacks:  # PortAudio's callback thread, named once for top -H and bench --idle
            name_this_thread(f"ev-audio-{self.kind}")
        self._callbacks += 1
        self._last_callback = end
        self._first_callback.set()

    # -- lifetime ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        if self._stream is None:
            raise AudioDeviceError(f"{self.kind} stream is closed")
        self._started_at = time.perf_counter()
        try:
            self._stream.start_stream()
        except OSError as exc:
            raise AudioDeviceError(f"cannot start {self.kind} device {self.device.name!r}: {exc}") from exc

    def stop(self) -> None:
        """Stop the callbacks (bounded by ``stop_timeout``); :meth:`start` resumes."""
        stream = self._stream
        if stream is not None and not stream.is_stopped():
            bounded_call(stream.stop_stream, self._stop_timeout, f"stopping the {self.kind} stream")

    def close(self) -> None:
        """Stop, close the stream and release PortAudio (each step bounded). Safe to call twice."""
        stream, pa = self._stream, self._pa
        self._stream = self._pa = None
        try:
            if stream is not None:
                bounded_call(stream.close, self._stop_timeout, f"closing the {self.kind} stream")
        finally:
            if pa is not None:
                bounded_call(pa.terminate, self._stop_timeout, "stopping PortAudio")

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- health --------------------------------------------------------------------------------------------------
    def wait_running(self, timeout: float) -> bool:
        """Wait for the first callback (the first input read can take over a second on a loaded machine)."""
        return self._first_callback.wait(timeout)

    def is_alive(self, max_gap_s: float = 0.5, startup_s: float = 2.0) -> bool:
        """False once the stream died: PortAudio stopped it, a callback failed, or no callback came for
        ``max_gap_s`` (``startup_s`` after :meth:`start` for the first one, which can take over a second).
        Reopen the stream then."""
        stream = self._stream
        if stream is None or self._error is not None or self._started_at is None or not stream.is_active():
            return False
        if self._last_callback is None:
            return time.perf_counter() - self._started_at <= max(max_gap_s, startup_s)
        return time.perf_counter() - self._last_callback <= max_gap_s

    @property
    def error(self) -> BaseException | None:
        """The exception that stopped the callback (raised by the sink/source or by the conversion), if any."""
        return self._error

    def stats(self) -> StreamStats:
        n = min(self._callbacks, _STATS_WINDOW)
        last = self._last_callback
        return StreamStats(
            callbacks=self._callbacks,
            device_frames=self._device_frames,
            xruns=self._xruns,
            max_callback_ms=self._max_duration * 1000,
            p99_callback_ms=float(np.percentile(self._durations[:n], 99)) * 1000 if n else 0.0,
            last_callback_age_s=None if last is None else time.perf_counter() - last,
            max_gap_ms=self._max_gap * 1000,
            audible_xruns=self._audible_xruns,
        )
