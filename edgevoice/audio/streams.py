"""Sound devices through PortAudio (PyAudio) callback streams.

:class:`InputStream` hands mono float32 audio at the model rate (16 kHz) to a sink that must never block (the loop
passes a ring buffer's write); :class:`OutputStream` pulls model-rate audio (22.05 kHz Piper, or 16 kHz) from a
source that must never block (a ring buffer's read). Both resample with a streaming soxr resampler only when the
device runs at another rate, count PortAudio's overflow/underflow flags and their own callback durations, and can
tell when the device stopped delivering (unplugged, sound server gone) so the loop can reopen them.

Times. Every time this module reports is on the :func:`time.perf_counter` scale (the scale of
:class:`edgevoice.clock.MonotonicClock`): PortAudio's own stream times (``input_buffer_adc_time``,
``output_buffer_dac_time``, ``current_time``) are moved onto it in each callback by the offset
``perf_counter() - current_time`` measured in that callback.

Which sample is played (or was captured) when: each callback feeds :mod:`edgevoice.audio.timing`, which maps
sample indices to device times (:meth:`InputStream.adc_time_of`, :meth:`OutputStream.dac_time_of`) and tells the
samples the source really returned from the silence padded in (:meth:`OutputStream.real_played`,
:meth:`OutputStream.dac_time_of_real`). Devices are found and opened in :mod:`edgevoice.audio.devices`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import soxr

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.devices import DeviceInfo as DeviceInfo  # re-exported: part of this module's API
from edgevoice.audio.devices import SampleFormat
from edgevoice.audio.devices import list_devices as list_devices
from edgevoice.audio.silence import Silence
from edgevoice.audio.stream_common import INPUT_OVERFLOW, OUTPUT_UNDERFLOW, PA_ABORT, PA_CONTINUE, Stream
from edgevoice.audio.stream_common import StreamStats as StreamStats  # re-exported: part of this module's API
from edgevoice.audio.timing import LINE_MOVED_S, OutputTiming, PullLog, SampleAnchor

FloatAudio = npt.NDArray[np.float32]
AudioSink = Callable[[FloatAudio, float], None]
"""``on_audio(frames, t_adc)``: mono float32 at the model rate; ``t_adc`` is the ADC time of ``frames[0]``."""
AudioSource = Callable[[int], npt.NDArray[np.floating[Any]]]
"""``source(n)``: up to ``n`` mono samples at the source rate; fewer (even none) when it has nothing to play."""


class InputStream(Stream):
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
        out_rate: int = SAMPLE_RATE,
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
        self._anchor = SampleAnchor(out_rate)
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
        return self._anchor.time_of(index)

    def _callback(self, in_data: bytes | None, frame_count: int, time_info: dict[str, float], status: int) -> Any:
        start = time.perf_counter()
        flag = PA_CONTINUE
        try:
            if status & INPUT_OVERFLOW:
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
            flag = PA_ABORT
        self._done(start)
        return None, flag


class OutputStream(Stream):
    """A playback device, pulling mono audio at ``source_rate`` from ``source(n)``.

    ``source`` runs on PortAudio's thread and must never block; what it does not return is played as silence.
    """

    kind = "output"

    def __init__(
        self,
        source: AudioSource,
        *,
        source_rate: int = SAMPLE_RATE,
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
        self._log = PullLog()
        self._timing: OutputTiming | None = None
        self._anchor = SampleAnchor(source_rate)
        self._fifo = np.zeros(0, np.float32)
        self._callback_start = 0.0
        self._line: float | None = None
        """The DAC line as of this callback (its offset), for the DAC times of the samples it pulls."""
        self._was_audible = False
        self._zeros = Silence()
        """``n`` samples of silence, read only, made again only when a longer block is asked for."""
        self._silent_bytes = b""
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
        return self._log.pulled

    @property
    def real_frames_pulled(self) -> int:
        """Samples the source actually returned so far."""
        return self._log.real

    def dac_time_of(self, source_index: float) -> float | None:
        """When source sample ``source_index`` reaches (or reached) the DAC, on the perf_counter scale (the
        callbacks' DAC times fitted to the sample count); None before the first callback."""
        return self._anchor.time_of(source_index)

    def played(self, at: float) -> int:
        """Source samples (padding included) that reached the DAC by time ``at``."""
        done = self._anchor.samples_by(at)
        emitted = self._device_frames * self.source_rate / self.rate
        return 0 if done is None else int(np.clip(done, 0, min(emitted, self._log.pulled)))

    def real_played(self, at: float) -> int:
        """Samples the source returned that reached the DAC by time ``at`` (of a reply: how much was heard)."""
        return self._log.real_before(self.played(at))

    def pulled_time_of_real(self, real_index: int) -> float | None:
        """When the ``real_index``-th sample the source returned was pulled: handed to the device by a callback
        (None if not pulled yet or forgotten)."""
        return self._log.time_of_real(real_index)

    def dac_time_of_real(self, real_index: int) -> float | None:
        """When the ``real_index``-th sample the source returned reaches the DAC: on the line of the callbacks' DAC
        times, unless the line moved by more than :data:`~edgevoice.audio.timing.LINE_MOVED_S` since the sample was
        pulled (an underrun since moves the line, not the samples played before it), then as the line put it then.
        None if not pulled yet or forgotten: only the last 4096 pulls are kept."""
        index = self._log.index_of_real(real_index)
        if index is None:
            return None
        on_line, pulled_with = self.dac_time_of(index), self._log.dac_time_of_real(real_index, self.source_rate)
        if on_line is None or pulled_with is None or abs(on_line - pulled_with) <= LINE_MOVED_S:
            return on_line  # the line has only wavered since (the samples' spacing stays exact)
        return pulled_with

    def _pull(self, n: int) -> FloatAudio:
        got = np.asarray(self._source(n), dtype=np.float32).reshape(-1)
        if len(got) > n:
            raise ValueError(f"audio source returned {len(got)} samples for a request of {n}")
        if not len(got):  # nothing to play (between replies): no allocation, no fit of the line
            self._log.add(n, 0)
            return self._zeros(n)
        if self._line is None:
            self._line = self._anchor.offset() or 0.0
        dac = self._line + self._log.pulled / self.source_rate
        self._log.add(n, len(got), self._callback_start, dac)
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
        flag = PA_CONTINUE
        try:
            underflow = bool(status & OUTPUT_UNDERFLOW)
            self._xruns += underflow
            self._callback_start = start
            dac, now = time_info["output_buffer_dac_time"], time_info["current_time"]
            dac_time = start + (dac - now) if dac > 0 else start + self.latency
            self._timing = OutputTiming(self._device_frames, dac_time, start)
            self._anchor.add(dac_time, self._device_frames * self.source_rate / self.rate)
            # for this callback's pulls, their DAC times as of now: fitted here while sound plays (ready before the
            # source hands its samples over), when first needed after silence (a median: not on every silent buffer)
            self._line = (self._anchor.offset() or 0.0) if self._was_audible else None
            block = self._render(frame_count)
            audible = bool(np.any(block))
            # the flag reports that the device ran dry before this block: a gap heard when it fell between two
            # blocks with sound (not before a reply's first block or after its last)
            self._audible_xruns += underflow and audible and self._was_audible
            self._was_audible = audible
            if audible:
                block = np.clip(block, -1.0, 1.0)
                if self.channels > 1:
                    block = np.repeat(block, self.channels)
                data = (block * 32767).astype(self._dtype) if self._dtype.kind == "i" else block.astype(self._dtype)
                out = data.tobytes()
            else:  # silence: zero bytes in either sample format, kept from the last silent buffer of this size
                size = frame_count * self.channels * self._dtype.itemsize
                if len(self._silent_bytes) != size:
                    self._silent_bytes = bytes(size)
                out = self._silent_bytes
            self._device_frames += frame_count
        except Exception as exc:  # kept for the owner: error / is_alive()
            self._error = exc
            out, flag = bytes(frame_count * self.channels * self._dtype.itemsize), PA_ABORT
        self._done(start)
        return out, flag
