"""PortAudio callback streams on real-time devices: a private PulseAudio server's null sinks (see tests/pulse.py).

The "user" plays into the ``mic`` sink and the InputStream listens on ``mic.monitor``; the OutputStream plays into
``spk`` and the harness records ``spk.monitor``. Both hops are bit-exact at 16 kHz.
"""

from __future__ import annotations

import queue
import threading
import time

import numpy as np
import numpy.typing as npt
import pytest
import soxr

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.pulse import PulseServer
from edgevoice.audio.streams import InputStream, OutputStream, SampleFormat, list_devices
from edgevoice.errors import AudioDeviceError
from tests import conftest_audio
from tests.waiting import poll

pytest.importorskip("pyaudio")

pulse = conftest_audio.pulse  # the fixture, for this module even before tests/conftest.py imports it

Audio = npt.NDArray[np.float32]


def faded(audio: npt.NDArray[np.floating], rate: int, fade_s: float = 0.01) -> Audio:
    ramp = np.minimum(1.0, np.minimum(np.arange(len(audio)), np.arange(len(audio))[::-1]) / (fade_s * rate))
    return (audio * ramp).astype(np.float32)


def tone(freq: float, seconds: float, amplitude: float, rate: int = RATE) -> Audio:
    return faded(amplitude * np.sin(2 * np.pi * freq * np.arange(round(seconds * rate)) / rate), rate)


def chirp(rate: int, seconds: float = 0.5, f0: float = 200.0, f1: float = 3000.0, delay: float = 0.0) -> Audio:
    """A 200 Hz - 3 kHz sweep, optionally delayed by a fraction of a sample."""
    t = (np.arange(round(seconds * rate)) - delay) / rate
    return faded(0.5 * np.sin(2 * np.pi * (f0 * t + (f1 - f0) / (2 * seconds) * t**2)), rate)


def find_chirp(haystack: Audio) -> tuple[int, float]:
    """Where the 16 kHz chirp is in ``haystack`` and its correlation, aligned to a tenth of a sample (a clip that
    starts at source sample m is played from device position m * rate / source_rate, rarely a whole number)."""
    return max((find(haystack, chirp(RATE, delay=delay)) for delay in np.arange(0.0, 1.0, 0.1)), key=lambda r: r[1])


def find(haystack: Audio, needle: Audio) -> tuple[int, float]:
    """Where ``needle`` best matches in ``haystack`` and the normalized correlation there."""
    scores = np.correlate(haystack, needle, "valid")
    at = int(np.argmax(scores))
    window = haystack[at : at + len(needle)]
    return at, float(scores[at] / (np.linalg.norm(needle) * np.linalg.norm(window) + 1e-12))


class Capture:
    """An ``on_audio`` sink that keeps everything, with waits on what has arrived."""

    def __init__(self) -> None:
        self.chunks: list[Audio] = []
        self.times: list[float] = []
        self.count = 0
        self._cond = threading.Condition()

    def __call__(self, frames: Audio, t_adc: float) -> None:
        with self._cond:
            self.chunks.append(frames.copy())
            self.times.append(t_adc)
            self.count += len(frames)
            self._cond.notify_all()

    def wait_for(self, samples: int, timeout: float = 10.0) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: self.count >= samples, timeout), f"{self.count} < {samples} samples"

    def wait_until(self, t: float, timeout: float = 10.0) -> None:
        """Until audio captured at time ``t`` (perf_counter scale) has arrived."""
        with self._cond:
            assert self._cond.wait_for(lambda: bool(self.times) and self.times[-1] >= t, timeout)

    def audio(self) -> Audio:
        with self._cond:
            return np.concatenate(self.chunks) if self.chunks else np.zeros(0, np.float32)

    def time_of(self, index: int) -> float:
        start = 0
        with self._cond:
            for frames, t in zip(self.chunks, self.times, strict=True):
                if index < start + len(frames):
                    return t + (index - start) / RATE
                start += len(frames)
        raise IndexError(index)


class Clip:
    """An output source that plays each queued clip once, silence otherwise."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Audio] = queue.SimpleQueue()
        self._current: Audio | None = None
        self._pos = 0
        self.finished = threading.Event()

    def play(self, audio: Audio) -> None:
        self.finished.clear()
        self._queue.put(audio)

    def __call__(self, n: int) -> Audio:
        if self._current is None:
            try:
                self._current, self._pos = self._queue.get_nowait(), 0
            except queue.Empty:
                return np.zeros(0, np.float32)
        out = self._current[self._pos : self._pos + n]
        self._pos += len(out)
        if self._pos >= len(self._current):
            self._current = None
            self.finished.set()
        return out


def wait_dead(stream: InputStream | OutputStream, timeout: float = 3.0) -> float:
    """Seconds until ``stream.is_alive()`` turned false (polled every 10 ms: a stream that stops hearing from its
    device raises nothing to wait on)."""
    start = time.perf_counter()
    assert poll(lambda: not stream.is_alive(max_gap_s=0.2), timeout, interval=0.01), "stream still alive"
    return time.perf_counter() - start


def test_list_devices_sees_the_pulse_device(pulse: PulseServer) -> None:
    devices = {d.name: d for d in list_devices()}
    assert "pulse" in devices, devices
    device = devices["pulse"]
    assert device.host_api == "ALSA"
    assert device.max_input_channels >= 1 and device.max_output_channels >= 1
    assert device.default_rate > 0


@pytest.mark.parametrize(
    ("rate", "sample_format", "channels"),
    [(16000, "int16", 1), (None, "int16", 1), (16000, "float32", 2)],
    ids=["device-16k", "device-default-rate", "float32-stereo"],
)
def test_input_stream_captures_a_tone_at_16k(
    pulse: PulseServer, rate: int | None, sample_format: SampleFormat, channels: int
) -> None:
    played = tone(440.0, 1.0, 0.3)
    capture = Capture()
    with (
        pulse.environ(source="mic.monitor"),
        InputStream(capture, device="pulse", rate=rate, sample_format=sample_format, channels=channels) as stream,
    ):
        assert stream.wait_running(5.0)
        pulse.play(played, "mic").wait()
        capture.wait_for(capture.count + RATE // 5)
        stream.stop()
        stats = stream.stats()
        adc_first = stream.adc_time_of(0)
    assert adc_first is not None
    assert stream.rate == (rate or stream.device.default_rate)
    audio = capture.audio()
    onset = int(np.argmax(np.abs(audio) > 0.1))
    assert onset > 0, "tone not captured"
    steady = audio[onset + RATE // 10 : onset + RATE // 10 + RATE // 2]  # 0.5 s inside the tone
    spectrum = np.abs(np.fft.rfft(steady * np.hanning(len(steady)), n=8 * len(steady)))
    peak_hz = np.fft.rfftfreq(8 * len(steady), 1 / RATE)[np.argmax(spectrum)]
    assert abs(peak_hz - 440.0) < 1.0
    assert np.sqrt(np.mean(steady**2)) == pytest.approx(0.3 / np.sqrt(2), rel=0.02)
    if rate == RATE:  # no resampling anywhere: bit-exact
        _, score = find(audio, played)
        assert score > 0.9999
    # ADC times follow the sample count (PortAudio's per-buffer times, moved onto perf_counter, jitter by up to
    # a few buffers under load); the smoothed mapping lies on that line
    starts = np.cumsum([0] + [len(c) for c in capture.chunks[:-1]])
    residual = np.array(capture.times) - starts / RATE
    assert np.ptp(residual) < 0.05
    assert adc_first - capture.times[0] == pytest.approx(0.0, abs=0.02)
    assert stats.xruns == 0
    assert stats.callbacks > 100 and stats.device_frames == stats.callbacks * stream.frames_per_buffer


@pytest.mark.parametrize(
    ("source_rate", "device_rate", "sample_format", "channels"),
    [(16000, 16000, "int16", 1), (22050, 16000, "int16", 1), (16000, None, "int16", 1), (16000, 16000, "float32", 2)],
    ids=["16k-on-16k", "piper-22k-on-16k", "16k-on-default-rate", "float32-stereo"],
)
def test_output_stream_plays_a_chirp_and_knows_when(
    pulse: PulseServer, source_rate: int, device_rate: int | None, sample_format: SampleFormat, channels: int
) -> None:
    clip = chirp(source_rate)
    recorder = pulse.record("spk.monitor")
    recorder.wait_started()
    capture, source = Capture(), Clip()
    with (
        pulse.environ(source="spk.monitor", sink="spk"),
        InputStream(capture, device="pulse", rate=RATE) as loopback,
        OutputStream(
            source,
            source_rate=source_rate,
            device="pulse",
            rate=device_rate,
            sample_format=sample_format,
            channels=channels,
        ) as out,
    ):
        assert loopback.wait_running(5.0) and out.wait_running(5.0)
        source.play(clip)
        assert source.finished.wait(5.0)
        first, last = out.dac_time_of_real(0), out.dac_time_of_real(len(clip) - 1)
        assert first is not None and last is not None
        capture.wait_until(last + 0.1)
        recorder.wait_more(0.05)
        timing, stats, latency = out.timing, out.stats(), out.latency
        heard_all, heard_none = out.real_played(last + 0.01), out.real_played(first - 0.01)
    heard = recorder.stop()
    at, score = find_chirp(heard)
    assert score > 0.999, f"recorded chirp correlates {score:.4f}"
    # the sample index <-> DAC time mapping: the loopback capture sees the chirp when the stream said it would play
    at, score = find_chirp(capture.audio())
    assert score > 0.999
    assert capture.time_of(at) - first == pytest.approx(0.0, abs=0.01)
    assert last - first == pytest.approx((len(clip) - 1) / source_rate, abs=0.001)
    assert (heard_none, heard_all) == (0, len(clip))
    assert timing is not None and 0.0 < timing.dac_time - timing.callback_time < 0.2
    assert 0.0 < latency < 0.2
    assert stats.callbacks > 0  # xruns are checked on an unloaded run in the next test


def test_streams_run_three_seconds_without_xruns(pulse: PulseServer) -> None:
    capture, source = Capture(), Clip()
    source.play(tone(300.0, 3.5, 0.2))
    with (
        pulse.environ(source="mic.monitor", sink="spk"),
        InputStream(capture, device="pulse", rate=RATE) as inp,
        OutputStream(source, source_rate=22050, device="pulse", rate=RATE) as out,
    ):
        capture.wait_for(3 * RATE)
        into, outof = inp.stats(), out.stats()
    assert (into.xruns, outof.xruns) == (0, 0)
    assert into.callbacks >= 300 and outof.callbacks >= 290
    assert into.p99_callback_ms < 5.0 and outof.p99_callback_ms < 5.0
    assert into.last_callback_age_s is not None and into.last_callback_age_s < 0.5


def test_output_underflows_in_silence_are_told_apart_from_gaps_in_sound(pulse: PulseServer) -> None:
    # the callback is driven by hand on a stream that is open but not started, with PortAudio's underflow flag
    source = Clip()
    timing = {"output_buffer_dac_time": 0.0, "current_time": 0.0}
    with pulse.environ(sink="spk"):
        out = OutputStream(source, device="pulse", rate=RATE)
    try:
        underflow = 0x4  # paOutputUnderflow
        out._callback(None, 160, timing, underflow)  # late, nothing to play
        source.play(np.full(320, 0.1, np.float32))
        out._callback(None, 160, timing, 0)  # sound
        out._callback(None, 160, timing, underflow)  # late in the middle of the sound
        out._callback(None, 160, timing, underflow)  # late right after the sound: the gap is after its end
        out._callback(None, 160, timing, underflow)  # late in silence again
        source.play(np.full(160, 0.1, np.float32))
        out._callback(None, 160, timing, underflow)  # late before the next sound begins
        stats = out.stats()
    finally:
        out.close()
    assert (stats.xruns, stats.audible_xruns) == (5, 1)


def test_a_missing_device_is_named(pulse: PulseServer) -> None:
    with pytest.raises(AudioDeviceError) as missing:
        InputStream(Capture(), device="no-such-mic")
    assert missing.value.code == "audio_device_missing"
    assert "'no-such-mic'" in str(missing.value) and "'pulse'" in str(missing.value)
    with pytest.raises(AudioDeviceError, match="output device 999"):
        OutputStream(Clip(), device=999)
    with pytest.raises(AudioDeviceError, match="does not take 64 channel"):
        InputStream(Capture(), device="pulse", channels=64)


def test_a_vanished_device_is_detected_and_the_stream_reopens(pulse: PulseServer) -> None:
    # PulseAudio moves a stream whose source vanished to another source if there is one: remove both.
    with pulse.environ(source="mic.monitor"):
        stream = InputStream(Capture(), device="pulse", rate=RATE)
        with stream:
            assert stream.wait_running(5.0) and stream.is_alive()
            pulse.unload_sink("mic")
            pulse.unload_sink("spk")
            assert wait_dead(stream) < 1.0
        pulse.reload_sink("mic")
        pulse.reload_sink("spk")
        capture = Capture()
        with InputStream(capture, device="pulse", rate=RATE) as again:
            assert again.wait_running(5.0)
            pulse.play(tone(440.0, 0.3, 0.3), "mic").wait()
            capture.wait_for(capture.count + RATE // 10)
            assert again.is_alive()
    assert np.max(np.abs(capture.audio())) == pytest.approx(0.3, rel=0.02)


def test_a_failing_sink_aborts_the_stream(pulse: PulseServer) -> None:
    def broken(frames: Audio, t_adc: float) -> None:
        raise RuntimeError("ring full")

    with pulse.environ(source="mic.monitor"), InputStream(broken, device="pulse", rate=RATE) as stream:
        wait_dead(stream)
        assert isinstance(stream.error, RuntimeError)


def test_output_resampling_keeps_the_sample_count() -> None:
    """soxr's streaming output stays aligned with its input: the basis of the index <-> DAC time mapping."""
    stream = soxr.ResampleStream(22050, RATE, 1, dtype="float32", quality="HQ")
    impulse = np.zeros(22050, np.float32)
    impulse[1000] = 1.0
    out = np.concatenate([stream.resample_chunk(impulse[i : i + 220]) for i in range(0, len(impulse), 220)])
    assert int(np.argmax(out)) == round(1000 * RATE / 22050)
