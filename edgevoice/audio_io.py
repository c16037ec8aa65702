"""Sound devices through PortAudio (PyAudio) callback streams: the only module that imports pyaudio.

:class:`InputStream` hands mono float32 audio at the model rate (16 kHz) to a sink that must never block (the loop
passes a ring buffer's write); :class:`OutputStream` pulls model-rate audio (22.05 kHz Piper, or 16 kHz) from a
source that must never block (a ring buffer's read). Both resample with a streaming soxr resampler only when the
device runs at another rate, count PortAudio's overflow/underflow flags and their own callback durations, and can
tell when the device stopped delivering (unplugged, sound server gone) so the loop can reopen them.

Times. Every time this module reports is on the :func:`time.perf_counter` scale (the scale of
:class:`edgevoice.clock.MonotonicClock`): PortAudio's own stream times (``input_buffer_adc_time``,
``output_buffer_dac_time``, ``current_time``) are moved onto it in each callback by the offset
``perf_counter() - current_time`` measured in that callback.

Which sample is played when. The output stream numbers the samples it pulls from the source (silence it pads in
when the source runs dry included): source sample ``m`` becomes device sample ``j = m * rate / source_rate`` (soxr's
streaming output is aligned with its input; it only withholds a few ms of it). Each callback records the device
index ``D`` of the first sample of its buffer and that sample's DAC time ``T``, so source sample ``m`` reaches the
DAC at ``T + (m * rate / source_rate - D) / rate``. PortAudio's ``T`` jitters with the callback's scheduling
(±10 ms under load), so :meth:`OutputStream.dac_time_of` fits the line ``T - D / rate`` over the last 64 callbacks
(median) and returns ``offset + m / source_rate``; :meth:`InputStream.adc_time_of` does the same for captured
samples. Counting only the samples the source really returned (not the padding) gives
:meth:`OutputStream.real_played` (how much of a reply the visitor has heard, for barge-in) and
:meth:`OutputStream.dac_time_of_real`.

PortAudio scans devices once, when the first PyAudio instance starts: a device plugged in later is seen only
after every stream has been closed and a new one is opened. PyAudio's start-up prints ALSA/JACK probing noise from
C to fd 2; it is silenced by redirecting fd 2 while PortAudio starts (other threads' stderr is lost meanwhile).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt
import soxr

from edgevoice.errors import AudioDeviceError

FloatAudio = npt.NDArray[np.float32]
SampleFormat = Literal["int16", "float32"]
AudioSink = Callable[[FloatAudio, float], None]
"""``on_audio(frames, t_adc)``: mono float32 at the model rate; ``t_adc`` is the ADC time of ``frames[0]``."""
AudioSource = Callable[[int], npt.NDArray[np.floating[Any]]]
"""``source(n)``: up to ``n`` mono samples at the source rate; fewer (even none) when it has nothing to play."""

MODEL_RATE = 16000
_PA_CONTINUE, _PA_ABORT = 0, 2  # PaStreamCallbackResult (pyaudio is imported only when a stream opens)
_INPUT_OVERFLOW, _OUTPUT_UNDERFLOW = 0x2, 0x4  # PaStreamCallbackFlags
_PA_INT16, _PA_FLOAT32 = 0x8, 0x1  # PaSampleFormat
_STATS_WINDOW = 1000  # callbacks in the p99 window (10 s of 10 ms buffers)
_PULL_LOG = 4096  # source pulls remembered for real_played / dac_time_of_real


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """PortAudio's ALSA and JACK probing print from C straight to fd 2; keep it out of the user's terminal."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _portaudio() -> Any:
    """A started ``pyaudio.PyAudio`` (caller terminates it)."""
    try:
        import pyaudio
    except ImportError as exc:
        raise AudioDeviceError("PyAudio is not installed (pip install pyaudio==0.2.14)") from exc
    with _quiet_stderr():
        return pyaudio.PyAudio()


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    index: int
    name: str
    host_api: str
    max_input_channels: int
    max_output_channels: int
    default_rate: int


def _device_info(pa: Any, raw: dict[str, Any]) -> DeviceInfo:
    return DeviceInfo(
        index=int(raw["index"]),
        name=str(raw["name"]),
        host_api=str(pa.get_host_api_info_by_index(raw["hostApi"])["name"]),
        max_input_channels=int(raw["maxInputChannels"]),
        max_output_channels=int(raw["maxOutputChannels"]),
        default_rate=round(raw["defaultSampleRate"]),
    )


def list_devices() -> list[DeviceInfo]:
    """Every device PortAudio sees now (for ``edgevoice devices``)."""
    pa = _portaudio()
    try:
        return [_device_info(pa, pa.get_device_info_by_index(i)) for i in range(pa.get_device_count())]
    finally:
        pa.terminate()


def _find_device(pa: Any, device: str | int | None, kind: Literal["input", "output"]) -> DeviceInfo:
    """The device by index, by name (exact, else a unique case-insensitive substring) or the default one."""
    devices = [_device_info(pa, pa.get_device_info_by_index(i)) for i in range(pa.get_device_count())]
    usable = [d for d in devices if (d.max_input_channels if kind == "input" else d.max_output_channels) > 0]
    names = ", ".join(f"{d.index}: {d.name!r}" for d in usable) or "none"
    if device is None:
        try:
            raw = pa.get_default_input_device_info() if kind == "input" else pa.get_default_output_device_info()
        except OSError as exc:
            raise AudioDeviceError(f"no default {kind} device ({kind} devices: {names})") from exc
        return _device_info(pa, raw)
    if isinstance(device, int):
        found = [d for d in usable if d.index == device]
    else:
        found = [d for d in usable if d.name.lower() == device.lower()] or [
            d for d in usable if device.lower() in d.name.lower()
        ]
    if len(found) == 1:
        return found[0]
    problem = "matches several" if found else "matches no"
    raise AudioDeviceError(
        f"{kind} device {device!r} {problem} {kind} device ({kind} devices: {names})", code="audio_device_missing"
    )


def _bounded(call: Callable[[], object], timeout: float, what: str) -> None:
    """Run a PortAudio call that can hang on a dead device; give up after ``timeout`` (the helper thread, stuck in
    C, is then left behind: nothing can interrupt it)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller below
            failure.append(exc)

    worker = threading.Thread(target=run, name=f"edgevoice-audio-{what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise AudioDeviceError(f"{what} did not return within {timeout} s (device hung)")
    if failure:
        raise AudioDeviceError(f"{what} failed: {failure[0]}") from failure[0]


class _Anchor:
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
        n = min(self._n, self._SIZE)
        return float(np.median(self._offsets[:n])) if n else None


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


class _Stream:
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
        self._max_duration = 0.0
        self._max_gap = 0.0
        self._last_start: float | None = None
        self._last_callback: float | None = None
        self._started_at: float | None = None
        self._first_callback = threading.Event()
        self._error: BaseException | None = None

    def _open(
        self,
        device: str | int | None,
        rate: int | None,
        frame_ms: float,
        sample_format: SampleFormat,
        channels: int,
    ) -> None:
        self._pa = _portaudio()
        try:
            self.device = _find_device(self._pa, device, self.kind)
            self.rate = int(rate or self.device.default_rate)
            self.frames_per_buffer = max(1, round(self.rate * frame_ms / 1000))
            self.channels = channels
            self.sample_format = sample_format
            self._dtype = np.dtype("<i2") if sample_format == "int16" else np.dtype("<f4")
            pa_format = _PA_INT16 if sample_format == "int16" else _PA_FLOAT32
            where = f"{self.kind} device {self.device.index} {self.device.name!r}"
            try:
                if self.kind == "input":
                    self._pa.is_format_supported(
                        self.rate, input_device=self.device.index, input_channels=channels, input_format=pa_format
                    )
                else:
                    self._pa.is_format_supported(
                        self.rate, output_device=self.device.index, output_channels=channels, output_format=pa_format
                    )
            except ValueError as exc:
                raise AudioDeviceError(
                    f"{where} does not take {channels} channel(s) of {sample_format} at {self.rate} Hz: {exc}"
                ) from exc
            try:
                with _quiet_stderr():
                    self._stream = self._pa.open(
                        rate=self.rate,
                        channels=channels,
                        format=pa_format,
                        input=self.kind == "input",
                        output=self.kind == "output",
                        input_device_index=self.device.index if self.kind == "input" else None,
                        output_device_index=self.device.index if self.kind == "output" else None,
                        frames_per_buffer=self.frames_per_buffer,
                        start=False,
                        stream_callback=self._callback,
                    )
            except OSError as exc:
                raise AudioDeviceError(f"cannot open {where} at {self.rate} Hz: {exc}") from exc
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
            _bounded(stream.stop_stream, self._stop_timeout, f"stopping the {self.kind} stream")

    def close(self) -> None:
        """Stop, close the stream and release PortAudio (each step bounded). Safe to call twice."""
        stream, pa = self._stream, self._pa
        self._stream = self._pa = None
        try:
            if stream is not None:
                _bounded(stream.close, self._stop_timeout, f"closing the {self.kind} stream")
        finally:
            if pa is not None:
                _bounded(pa.terminate, self._stop_timeout, "stopping PortAudio")

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
        )


class InputStream(_Stream):
    """A capture device, delivering mono float32 at ``out_rate`` to ``on_audio(frames, t_adc)``.

    ``on_audio`` runs on PortAudio's thread and must never block; if it raises, the stream aborts
    (:attr:`error` holds the exception, :meth:`is_alive` turns false).
    """

    kind = "input"

    def __init__(
        self,
        on_audio: AudioSink,
        *,
        device: str | int | None = None,
        rate: int | None = None,
        out_rate: int = MODEL_RATE,
        frame_ms: float = 10.0,
        sample_format: SampleFormat = "int16",
        channels: int = 1,
        resample_quality: str = "HQ",
        stop_timeout: float = 2.0,
    ) -> None:
        super().__init__(stop_timeout)
        self._sink = on_audio
        self.out_rate = out_rate
        self._out_frames = 0
        self._anchor = _Anchor(out_rate)
        self._open(device, rate, frame_ms, sample_format, channels)
        self._resampler = (
            soxr.ResampleStream(self.rate, out_rate, 1, dtype="float32", quality=resample_quality)
            if self.rate != out_rate
            else None
        )

    @property
    def latency(self) -> float:
        """PortAudio's input latency of the stream, in seconds."""
        return float(self._stream.get_input_latency()) if self._stream is not None else 0.0

    @property
    def frames_delivered(self) -> int:
        """Samples (at ``out_rate``) handed to ``on_audio`` so far: the index of the next one."""
        return self._out_frames

    def adc_time_of(self, index: float) -> float | None:
        """When delivered sample ``index`` (at ``out_rate``) was captured, smoothed over the last callbacks
        (``t_adc`` of ``on_audio`` is PortAudio's value for one buffer, with its jitter); None before any audio."""
        offset = self._anchor.offset()
        return None if offset is None else offset + index / self.out_rate

    def _callback(self, in_data: bytes | None, frame_count: int, time_info: dict[str, float], status: int) -> Any:
        start = time.perf_counter()
        flag = _PA_CONTINUE
        try:
            if status & _INPUT_OVERFLOW:
                self._xruns += 1
            adc, now = time_info["input_buffer_adc_time"], time_info["current_time"]
            t_adc = start - (now - adc) if adc > 0 else start - frame_count / self.rate
            raw = np.frombuffer(in_data or b"", dtype=self._dtype)
            samples = raw.astype(np.float32) * (1 / 32768) if self._dtype.kind == "i" else raw.astype(np.float32)
            if self.channels > 1:
                samples = samples.reshape(-1, self.channels).mean(axis=1, dtype=np.float32)
            if self._resampler is not None:
                # Output sample k sits at input position k * rate / out_rate: date the first one from there.
                t_first = t_adc + (self._out_frames * self.rate / self.out_rate - self._device_frames) / self.rate
                samples = self._resampler.resample_chunk(samples)
            else:
                t_first = t_adc
            self._device_frames += frame_count
            if len(samples):
                self._anchor.add(t_first, self._out_frames)
                self._sink(samples, t_first)
                self._out_frames += len(samples)
        except Exception as exc:  # kept for the owner: error / is_alive()
            self._error = exc
            flag = _PA_ABORT
        self._done(start)
        return None, flag


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


class OutputStream(_Stream):
    """A playback device, pulling mono audio at ``source_rate`` from ``source(n)``.

    ``source`` runs on PortAudio's thread and must never block; what it does not return is played as silence.
    """

    kind = "output"

    def __init__(
        self,
        source: AudioSource,
        *,
        source_rate: int = MODEL_RATE,
        device: str | int | None = None,
        rate: int | None = None,
        frame_ms: float = 10.0,
        sample_format: SampleFormat = "int16",
        channels: int = 1,
        resample_quality: str = "HQ",
        stop_timeout: float = 2.0,
    ) -> None:
        super().__init__(stop_timeout)
        self._source = source
        self.source_rate = source_rate
        self._source_frames = 0
        self._real_frames = 0
        self._pulls: deque[_Pull] = deque(maxlen=_PULL_LOG)
        self._pulls_lock = threading.Lock()
        self._timing: OutputTiming | None = None
        self._anchor = _Anchor(source_rate)
        self._fifo = np.zeros(0, np.float32)
        self._open(device, rate, frame_ms, sample_format, channels)
        self._pull_block = max(1, round(source_rate * frame_ms / 1000))
        self._resampler = (
            soxr.ResampleStream(source_rate, self.rate, 1, dtype="float32", quality=resample_quality)
            if self.rate != source_rate
            else None
        )

    @property
    def latency(self) -> float:
        """PortAudio's output latency of the stream, in seconds."""
        return float(self._stream.get_output_latency()) if self._stream is not None else 0.0

    @property
    def timing(self) -> OutputTiming | None:
        """The latest callback's timing (None before the first callback)."""
        return self._timing

    @property
    def frames_pulled(self) -> int:
        """Source samples pulled so far, padding included: the source index of the next one."""
        return self._source_frames

    @property
    def real_frames_pulled(self) -> int:
        """Samples the source actually returned so far."""
        return self._real_frames

    def dac_time_of(self, source_index: float) -> float | None:
        """When source sample ``source_index`` reaches (or reached) the DAC, on the perf_counter scale (the
        callbacks' DAC times fitted to the sample count); None before the first callback."""
        offset = self._anchor.offset()
        return None if offset is None else offset + source_index / self.source_rate

    def played(self, at: float) -> int:
        """Source samples (padding included) that reached the DAC by time ``at``."""
        offset = self._anchor.offset()
        if offset is None:
            return 0
        emitted = self._device_frames * self.source_rate / self.rate
        return int(np.clip(math.floor((at - offset) * self.source_rate), 0, min(emitted, self._source_frames)))

    def real_played(self, at: float) -> int:
        """Samples the source returned that reached the DAC by time ``at`` (of a reply: how much was heard)."""
        index = self.played(at)
        with self._pulls_lock:
            pulls = list(self._pulls)
        for pull in reversed(pulls):
            if pull.start <= index:
                return pull.real_before + min(index - pull.start, pull.real)
        return pulls[0].real_before if pulls else 0

    def dac_time_of_real(self, real_index: int) -> float | None:
        """When the ``real_index``-th sample the source returned reaches the DAC (None if not pulled yet or
        forgotten: only the last 4096 pulls are kept)."""
        with self._pulls_lock:
            pulls = list(self._pulls)
        for pull in reversed(pulls):
            if pull.real_before <= real_index < pull.real_before + pull.real:
                return self.dac_time_of(pull.start + real_index - pull.real_before)
        return None

    def _pull(self, n: int) -> FloatAudio:
        got = np.asarray(self._source(n), dtype=np.float32).reshape(-1)
        if len(got) > n:
            raise ValueError(f"audio source returned {len(got)} samples for a request of {n}")
        if len(got):
            with self._pulls_lock:
                self._pulls.append(_Pull(self._source_frames, self._real_frames, len(got)))
        self._source_frames += n
        self._real_frames += len(got)
        return got if len(got) == n else np.concatenate((got, np.zeros(n - len(got), np.float32)))

    def _render(self, n: int) -> FloatAudio:
        if self._resampler is None:
            return self._pull(n)
        for _ in range(64):  # soxr withholds its first few ms: the first callback pulls a little more
            if len(self._fifo) >= n:
                break
            want = max(self._pull_block, math.ceil((n - len(self._fifo)) * self.source_rate / self.rate))
            self._fifo = np.concatenate((self._fifo, self._resampler.resample_chunk(self._pull(want))))
        else:
            raise RuntimeError("resampler produced no output")
        block, self._fifo = self._fifo[:n], self._fifo[n:]
        return block

    def _callback(self, in_data: bytes | None, frame_count: int, time_info: dict[str, float], status: int) -> Any:
        start = time.perf_counter()
        flag = _PA_CONTINUE
        try:
            if status & _OUTPUT_UNDERFLOW:
                self._xruns += 1
            dac, now = time_info["output_buffer_dac_time"], time_info["current_time"]
            dac_time = start + (dac - now) if dac > 0 else start + self.latency
            self._timing = OutputTiming(self._device_frames, dac_time, start)
            self._anchor.add(dac_time, self._device_frames * self.source_rate / self.rate)
            block = np.clip(self._render(frame_count), -1.0, 1.0)
            if self.channels > 1:
                block = np.repeat(block, self.channels)
            data = (block * 32767).astype(self._dtype) if self._dtype.kind == "i" else block.astype(self._dtype)
            out = data.tobytes()
            self._device_frames += frame_count
        except Exception as exc:  # kept for the owner: error / is_alive()
            self._error = exc
            out, flag = bytes(frame_count * self.channels * self._dtype.itemsize), _PA_ABORT
        self._done(start)
        return out, flag
