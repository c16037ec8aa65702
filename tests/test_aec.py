"""Echo cancellation (WebRTC AEC3 through livekit) on a synthetic kiosk echo.

The far end is the bundled question (the default voice, 16 kHz) played three times, then 3 s of silence. The "mic"
gets a delayed, 10 dB quieter, reverberant copy (direct path plus a 60 ms exponentially decaying noise tail), a
-60 dBFS noise floor, and a near-end talker (the same recording pitched up by 25 %) once over the far end (double
talk) and once alone. The APM is deterministic: the same input gives the same output bit for bit.

Measured (livekit 1.2.1, 16 kHz, noise suppression on): ERLE 41.4 dB (delay 30 or 60 ms; 29.5 dB without noise
suppression); a near-end talker alone comes through unchanged; in double talk it keeps its level (-1 dB) and a
waveform correlation of 0.94 with what the APM makes of it without echo.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import soxr

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.aec import CAPTURE_DELAY, EchoCanceller
from edgevoice.audio.files import read_audio
from edgevoice.errors import EdgeVoiceError

pytest.importorskip("livekit.rtc")

FRAME = RATE // 100
SPEECH = Path(__file__).resolve().parents[1] / "samples" / "question.wav"
Audio = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Scene:
    far: Audio
    mic: Audio
    echo: Audio
    near: Audio
    double_talk: slice
    near_alone: slice


def kiosk_echo(delay_ms: float, *, echo_db: float = -10.0, noise_db: float = -60.0, seed: int = 0) -> Scene:
    rng = np.random.default_rng(seed)
    speech = read_audio(SPEECH, rate=RATE)
    far = np.concatenate([speech, speech[::-1], speech, np.zeros(3 * RATE, np.float32)])
    n = len(far)
    tail = np.arange(int(0.06 * RATE))
    response = 0.3 * rng.standard_normal(len(tail)) * np.exp(-tail / (0.02 * RATE))
    response[0] = 1.0
    echo = np.concatenate([np.zeros(round(delay_ms * RATE / 1000)), np.convolve(far, response)])[:n]
    echo *= np.sqrt(np.mean(far**2) / np.mean(echo**2)) * 10 ** (echo_db / 20)
    other = soxr.resample(speech, round(RATE * 1.25), RATE)  # another, higher voice
    voiced = np.flatnonzero(np.abs(other) > 0.01)
    other = 0.5 * other[voiced[0] : voiced[-1]]
    near = np.zeros(n)
    double_talk = slice(4 * RATE, 4 * RATE + len(other))
    near_alone = slice(round(9.6 * RATE), round(9.6 * RATE) + len(other))
    near[double_talk] = near[near_alone] = other
    mic = echo + near + rng.standard_normal(n) * 10 ** (noise_db / 20)
    return Scene(far, mic.astype(np.float32), echo, near, double_talk, near_alone)


def cancel(scene: Scene, *, render: Audio | None = None, **options: Any) -> Audio:
    """The mic signal through a fresh canceller, realigned by its capture delay."""
    render = scene.far if render is None else render
    out = np.zeros_like(scene.mic)
    with EchoCanceller(RATE, **options) as aec:
        for start in range(0, len(scene.mic) - FRAME + 1, FRAME):
            frame = slice(start, start + FRAME)
            aec.process_render(render[frame])
            out[frame] = aec.process_capture(scene.mic[frame])
        delay = aec.capture_delay
    return np.concatenate([out[delay:], np.zeros(delay, np.float32)])


def db(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> float:
    return float(10 * np.log10(np.sum(a**2) / max(float(np.sum(b**2)), 1e-20)))


def correlation(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-20))


def echo_only(scene: Scene, after_s: float = 1.5) -> npt.NDArray[np.intp]:
    """Samples of the 10 ms frames where only the echo is heard (no near end), after ``after_s`` of convergence."""
    frames = len(scene.mic) // FRAME
    echo_rms = np.sqrt(np.mean(scene.echo[: frames * FRAME].reshape(frames, FRAME) ** 2, axis=1))
    talking = np.any(scene.near[: frames * FRAME].reshape(frames, FRAME) != 0, axis=1)
    starts = np.arange(frames) * FRAME
    chosen = (starts >= after_s * RATE) & (echo_rms > 0.1 * np.sqrt(np.mean(scene.echo**2))) & ~talking
    return (starts[chosen][:, None] + np.arange(FRAME)).ravel()


def erle(scene: Scene, out: Audio) -> float:
    """Echo return loss enhancement: echo energy in the mic over what is left of it, in dB."""
    where = echo_only(scene)
    return db(scene.mic[where], out[where])


@pytest.mark.parametrize("delay_ms", [30, 60])
def test_echo_is_cancelled_and_the_near_end_survives(delay_ms: int) -> None:
    scene = kiosk_echo(delay_ms)
    out = cancel(scene, stream_delay_ms=delay_ms)
    assert erle(scene, out) >= 30.0  # measured 41.4 dB
    # Reference: what the same APM makes of the near end (and noise) without any echo. The APM's high-pass and
    # suppressor change the waveform's phase a little, so the raw near end is no waveform reference.
    without_echo = replace(scene, mic=(scene.mic - scene.echo).astype(np.float32))
    clean = cancel(without_echo, render=np.zeros_like(scene.far), stream_delay_ms=delay_ms)
    alone, both = scene.near_alone, scene.double_talk
    assert correlation(out[alone], clean[alone]) > 0.999
    assert db(out[alone], scene.near[alone]) == pytest.approx(0.0, abs=1.0)  # measured -0.3 dB
    assert correlation(out[both], clean[both]) > 0.85  # measured 0.94
    assert db(out[both], scene.near[both]) == pytest.approx(0.0, abs=3.0)  # measured -1.0 dB


def test_without_noise_suppression_the_echo_is_still_cancelled() -> None:
    scene = kiosk_echo(40)
    assert erle(scene, cancel(scene, noise_suppression=False, stream_delay_ms=40)) >= 20.0  # measured 29.5 dB


def test_the_render_reference_is_what_cancels_the_echo() -> None:
    scene = kiosk_echo(40)
    assert erle(scene, cancel(scene, render=np.zeros_like(scene.far), stream_delay_ms=40)) < 3.0  # measured 0.3


def test_a_wrong_delay_hint_still_converges() -> None:
    scene = kiosk_echo(60)
    assert erle(scene, cancel(scene, stream_delay_ms=0)) >= 30.0


def test_processing_is_deterministic() -> None:
    scene = kiosk_echo(40)
    assert np.array_equal(cancel(scene, stream_delay_ms=40), cancel(scene, stream_delay_ms=40))


@pytest.mark.parametrize("noise_suppression", [True, False])
def test_capture_delay_is_what_the_apm_adds(noise_suppression: bool) -> None:
    rng = np.random.default_rng(1)
    noise = (0.1 * rng.standard_normal(RATE)).astype(np.float32)
    out = np.zeros_like(noise)
    with EchoCanceller(RATE, noise_suppression=noise_suppression) as aec:
        for start in range(0, RATE, FRAME):
            aec.process_render(np.zeros(FRAME, np.float32))
            out[start : start + FRAME] = aec.process_capture(noise[start : start + FRAME])
        delay = aec.capture_delay
    assert delay == CAPTURE_DELAY[(RATE, noise_suppression)]
    probe = noise[RATE // 4 : RATE // 2]
    lags = [correlation(out[RATE // 4 + lag : RATE // 2 + lag], probe) for lag in range(400)]
    assert int(np.argmax(lags)) == delay


def test_bad_frames_and_rates_are_refused() -> None:
    with pytest.raises(EdgeVoiceError) as rate:
        EchoCanceller(22050)
    assert rate.value.code == "aec_rate"
    aec = EchoCanceller(RATE)
    with pytest.raises(ValueError, match="160 samples"):
        aec.process_capture(np.zeros(320, np.float32))
    aec.close()
    aec.close()
    with pytest.raises(EdgeVoiceError) as closed:
        aec.process_render(np.zeros(FRAME, np.float32))
    assert closed.value.code == "aec_closed"
