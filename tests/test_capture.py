"""The capture front end: 10 ms framing of odd-sized callback buffers, the echo path in the callback, and the
near-end gate that pauses the speaker (simulated frames, no clock)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from edgevoice.audio.capture import FRAME, CaptureFrontEnd, NearEndGate
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.errors import EdgeVoiceError


@pytest.fixture
def rings() -> Iterator[tuple[SharedRing, SharedRing]]:
    with SharedRing.create(16000 * 5) as mic, SharedRing.create(22050 * 5) as spk:
        yield mic, spk


def level(db: float, n: int = FRAME) -> np.ndarray:
    """A steady signal whose mean square is ``db`` dBFS."""
    return np.full(n, 10 ** (db / 20), dtype=np.float32)


class HalvingEcho:
    """Stands in for the echo path: halves the signal and records which frames it saw."""

    delay = 128
    settling = False

    def __init__(self, fail_after: int | None = None) -> None:
        self.frames: list[int] = []
        self.fail_after = fail_after

    def process(self, frame: np.ndarray, *, speaking: bool) -> np.ndarray:
        if self.fail_after is not None and len(self.frames) >= self.fail_after:
            raise EdgeVoiceError("canceller gone", code="aec_failed")
        self.frames.append(len(frame))
        return frame * 0.5


def test_odd_sized_buffers_are_cleaned_in_10_ms_frames_and_nothing_is_lost(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    mic, _ = rings
    echo = HalvingEcho()
    front = CaptureFrontEnd(mic, echo)  # type: ignore[arg-type]
    audio = np.linspace(-0.5, 0.5, 1000, dtype=np.float32)
    for start, size in ((0, 147), (147, 13), (160, 500), (660, 340)):  # like a 44.1 -> 16 kHz resampler's output
        front(audio[start : start + size])
    assert set(echo.frames) == {FRAME} and len(echo.frames) == 1000 // FRAME
    got = mic.read(mic.available())
    np.testing.assert_allclose(got, audio[: len(got)] * 0.5)
    assert len(got) == 1000 - 1000 % FRAME  # the rest waits for the next buffer


def test_without_an_echo_path_the_audio_goes_straight_to_the_ring(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, _ = rings
    front = CaptureFrontEnd(mic)
    front(np.ones(37, dtype=np.float32))
    assert mic.available() == 37


def test_a_failing_canceller_passes_the_raw_microphone_on(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, _ = rings
    front = CaptureFrontEnd(mic, HalvingEcho(fail_after=1))  # type: ignore[arg-type]
    front(np.ones(3 * FRAME, dtype=np.float32))
    np.testing.assert_allclose(mic.read(3 * FRAME), np.r_[np.full(FRAME, 0.5), np.ones(2 * FRAME)])
    assert front.failures == 2 and front.last_error is not None and front.last_error.code == "aec_failed"


def test_the_gate_pauses_after_two_frames_above_the_level_and_only_while_armed(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    _, spk = rings
    playback = PlaybackControl(spk)
    gate = NearEndGate(playback, level_db=-40.0, frames=2)
    for _ in range(5):
        gate.feed(level(-35))
    assert not playback.paused  # not armed: the kiosk is not speaking
    gate.armed = True
    gate.feed(level(-60))
    gate.feed(level(-35))
    assert not playback.paused
    gate.feed(level(-35))
    assert playback.paused and gate.pauses == 1 and gate.paused_at == 8 * FRAME


def test_by_default_the_first_frame_above_the_level_pauses(rings: tuple[SharedRing, SharedRing]) -> None:
    _, spk = rings
    playback = PlaybackControl(spk)
    gate = NearEndGate(playback, level_db=-40.0)
    gate.armed = True
    gate.feed(level(-45))
    assert not playback.paused
    gate.feed(level(-38))
    assert playback.paused and gate.paused_at == 2 * FRAME


def test_one_frame_well_above_the_level_pauses_at_once(rings: tuple[SharedRing, SharedRing]) -> None:
    _, spk = rings
    playback = PlaybackControl(spk)
    gate = NearEndGate(playback, level_db=-40.0, frames=2, strong_margin_db=10.0)
    gate.armed = True
    gate.feed(level(-41))
    gate.feed(level(-31))
    assert not playback.paused  # one frame, but not 10 dB above
    gate.feed(level(-60))
    gate.feed(level(-29))
    assert playback.paused


def test_while_the_canceller_settles_the_gate_wants_a_louder_voice(rings: tuple[SharedRing, SharedRing]) -> None:
    mic, spk = rings
    playback = PlaybackControl(spk)
    gate = NearEndGate(playback, level_db=-40.0, strong_margin_db=10.0, settling_margin_db=10.0)
    echo = HalvingEcho()
    echo.settling = True
    front = CaptureFrontEnd(mic, echo, gate)  # type: ignore[arg-type]
    gate.armed = True
    front(level(-29, 3 * FRAME))  # halved: -35 dBFS, a fresh canceller's residue can come this near
    assert not playback.paused and gate.settling and not gate.is_loud(level(-35))
    assert gate.is_loud(level(-25))
    front(level(-19))  # -25 dBFS: a visitor
    assert playback.paused and gate.pauses == 1
    playback.paused = False
    echo.settling = False  # converged: the usual level
    front(level(-29))
    assert playback.paused and gate.pauses == 2 and not gate.settling


def test_an_unconfirmed_pause_resumes_after_the_confirmation_window(rings: tuple[SharedRing, SharedRing]) -> None:
    _, spk = rings
    playback = PlaybackControl(spk)
    gate = NearEndGate(playback, level_db=-40.0, confirm_s=0.1)
    gate.armed = True
    gate.feed(level(-20))
    assert playback.paused
    for _ in range(9):
        gate.feed(level(-20))
    assert playback.paused  # 90 ms: still waiting for the VAD
    gate.feed(level(-20))
    assert not playback.paused and gate.false_pauses == 1


def test_after_an_unconfirmed_pause_the_level_stands_down_until_the_residue_stays_clear_of_it(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    _, spk = rings
    playback = PlaybackControl(spk)
    gate = NearEndGate(playback, level_db=-40.0, confirm_s=0.1, stand_down_s=0.2, recovery_margin_db=6.0)
    gate.armed = True
    for _ in range(11):  # the canceller lost the echo: its residue pauses the reply, the VAD hears no one
        gate.feed(level(-30))
    assert not playback.paused and gate.false_pauses == 1 and gate.standing_down
    for db in (-20, -60, -36):  # residue louder still, or back near the level: the reply plays on
        for _ in range(19):
            gate.feed(level(db))
    assert not playback.paused and gate.pauses == 1 and gate.standing_down
    for _ in range(19):
        gate.feed(level(-50))  # 190 ms clear of the level: not yet enough
    gate.armed = False  # between replies nothing counts
    for _ in range(50):
        gate.feed(level(-60))
    gate.armed = True
    assert gate.standing_down
    gate.feed(level(-50))  # 200 ms of the kiosk's voice clear of the level: the canceller has the echo again
    assert not gate.standing_down
    gate.feed(level(-30))
    assert playback.paused and gate.pauses == 2


def test_a_pause_is_lifted_by_the_flush_not_before_it(rings: tuple[SharedRing, SharedRing]) -> None:
    _, spk = rings
    playback = PlaybackControl(spk)
    gate = NearEndGate(playback, level_db=-40.0)
    gate.armed = True
    gate.feed(level(-20))
    spk.write(np.ones(1000, dtype=np.float32))
    # the VAD confirmed: the loop requests the flush, then disarms the gate
    playback.request_flush()
    gate.armed = False
    gate.feed(level(-60))
    assert playback.paused  # lifting it now could let queued reply audio out before the flush
    out = np.zeros(220, dtype=np.float32)
    playback.read_into(out)
    assert not playback.paused and not out.any() and spk.available() == 0
    # a reply that simply ended while paused is unpaused by the gate
    gate.armed = True
    gate.feed(level(-20))
    gate.armed = False
    gate.feed(level(-60))
    assert not playback.paused


def test_ring_samples_are_dated_by_their_capture_time_less_the_cancellers_delay(
    rings: tuple[SharedRing, SharedRing],
) -> None:
    mic, _ = rings
    front = CaptureFrontEnd(mic, HalvingEcho())  # type: ignore[arg-type]
    assert front.adc_time_of(0) is None
    for k in range(10):  # 10 ms buffers captured at 100.000 s, 100.010 s, ... (a little jitter)
        front(np.zeros(FRAME, np.float32), 100.0 + k * 0.01 + (0.002 if k % 3 == 0 else 0.0))
    # ring sample 1600 is the canceller's output for input sample 1600 - 128, captured at 100 + 1472 / 16000 s
    assert front.adc_time_of(1600) == pytest.approx(100.0 + 1472 / 16000, abs=1e-9)
    front.resync()  # a reopened stream: its times start afresh
    assert front.adc_time_of(1600) is None
