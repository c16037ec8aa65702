"""The echo-cancelled microphone path: the playback mirrored into a reference ring cancels its own echo."""

from __future__ import annotations

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.echo_path import EchoPath
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing

pytest.importorskip("livekit")


def speechlike(seconds: float, seed: int) -> np.ndarray:
    """Noise shaped by a syllable-rate envelope: broadband like speech, loud and quiet in turns."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    envelope = 0.5 * (1 + np.sin(2 * np.pi * 4 * np.arange(n) / RATE)) ** 2
    return (0.1 * envelope * rng.standard_normal(n)).astype(np.float32)


def test_playback_is_mirrored_and_its_echo_cancelled() -> None:
    from edgevoice.audio.aec import EchoCanceller

    reply = speechlike(4.0, seed=1)
    with (
        SharedRing.create(RATE * 10) as speaker,
        SharedRing.create(RATE * 10) as reference,
        EchoCanceller(RATE) as canceller,
    ):
        playback = PlaybackControl(speaker, reference)
        path = EchoPath(canceller, reference, RATE)
        speaker.write(reply)
        pulls = len(reply) // 160 + 20
        played = np.concatenate([playback.pull(160) for _ in range(pulls)])
        np.testing.assert_array_equal(played, reply)  # the real samples; the stream pads the rest with silence
        # every buffer handed to the device, the padding included, went to the reference ring
        assert reference.available() == pulls * 160
        device = np.concatenate([played, np.zeros(pulls * 160 - len(played), np.float32)])
        echo = np.zeros_like(device)
        echo[480:] = 0.3 * device[:-480]  # 30 ms later, -10 dB
        # the reference is consumed as the capture frames come in, 10 ms at a time
        for i in range(0, len(echo) - 160, 160):
            path.process(echo[i : i + 160], speaking=True)
        attenuation = path.attenuation_db()
    assert attenuation is not None and attenuation > 20, attenuation


def test_between_replies_the_output_pulls_silence_without_allocating_and_still_mirrors_it() -> None:
    import tracemalloc

    with SharedRing.create(RATE * 10) as speaker, SharedRing.create(RATE * 10) as reference:
        playback = PlaybackControl(speaker, reference)
        playback.pull(441)
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            pulled = [len(playback.pull(441)) for _ in range(100)]
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert pulled == [0] * 100 and playback.played == 0
        assert peak - before < 441 * 4  # not one buffer's worth made: np.zeros each time was 1,764 bytes a pull
        assert reference.available() == 101 * 441  # the device's timeline, its silence included
        assert not reference.read(reference.available()).any()
        speaker.write(np.ones(100, np.float32))  # something to play: pulled as before
        assert np.array_equal(playback.pull(441), np.ones(100, np.float32)) and playback.played == 100


def converse_then_reopen(*, restart: bool, first_back: str) -> tuple[float, float]:
    """A reply's echo cancelled (40 ms late, -10 dB), then the devices gone and back a second apart: the microphone
    first (capture goes on, no playback for a second) or the speaker first (playback queued, nobody captures). Then
    the next reply through the same path. Returns its attenuation (dB) and its loudest cleaned 10 ms (dBFS)."""
    from edgevoice.audio.aec import EchoCanceller

    frame, delay = 160, 640
    with SharedRing.create(RATE * 10) as reference, EchoCanceller(RATE) as canceller:
        path = EchoPath(canceller, reference, RATE)

        def reply(far: np.ndarray) -> None:
            device = np.concatenate([np.zeros(RATE // 2, np.float32), far, np.zeros(RATE // 2, np.float32)])
            echo = np.zeros_like(device)
            echo[delay:] = 0.3 * device[:-delay]
            for i in range(0, len(device) - frame, frame):
                reference.write(device[i : i + frame])
                path.process(echo[i : i + frame], speaking=True)

        reply(speechlike(3.0, seed=1))
        if first_back == "microphone":
            for _ in range(RATE // frame):
                path.process(np.zeros(frame, np.float32), speaking=False)
        else:
            reference.write(np.zeros(RATE, np.float32))
        if restart:
            path.restart()
        path.take_reply_echo()
        reply(speechlike(3.0, seed=2))
        echo = path.take_reply_echo()
        path.close()
    attenuation, peak = echo.attenuation_db(), echo.peak_dbfs()
    assert attenuation is not None and peak is not None
    return attenuation, peak


@pytest.mark.parametrize("first_back", ["microphone", "speaker"])
def test_after_a_reopen_the_canceller_starts_over_and_the_echo_stays_far_below_the_barge_in_level(
    first_back: str,
) -> None:
    attenuation, peak = converse_then_reopen(restart=True, first_back=first_back)
    # as on the first reply (measured: 75-77 dB, peaks -89 to -92 dBFS); the barge-in level is -40 dBFS
    assert attenuation > 50 and peak < -60, (attenuation, peak)
    # what the restart is for: carried over, the canceller let the echo through (measured: 35 dB and -44 dBFS with
    # the microphone back first, 7 dB and -25 dBFS with the speaker first: its reference a second off)
    kept_attenuation, kept_peak = converse_then_reopen(restart=False, first_back=first_back)
    assert kept_peak > peak + 20, (kept_attenuation, kept_peak)


class CountingCanceller:
    """Stands in for the WebRTC canceller: passes the capture through, records what happened to it."""

    capture_delay = 0

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name, self.renewals = log, name, 0

    def renewed(self) -> CountingCanceller:
        self.renewals += 1
        return CountingCanceller(self.log, f"{self.name}.{self.renewals}")

    def process_render(self, frame: np.ndarray) -> None:
        self.log.append(f"render {self.name}")

    def process_capture(self, frame: np.ndarray) -> np.ndarray:
        self.log.append(f"capture {self.name}")
        return frame

    def close(self) -> None:
        self.log.append(f"close {self.name}")


def test_a_restart_swaps_the_canceller_at_the_next_frame_and_drops_the_stale_reference() -> None:
    log: list[str] = []
    with SharedRing.create(RATE * 10) as reference:
        path = EchoPath(CountingCanceller(log, "a"), reference, RATE)  # type: ignore[arg-type]
        path.restart()  # the input came back ...
        path.restart()  # ... and the output, before the next frame: one swap, the first renewal never used
        assert log == ["close a.1"] and path.restarts == 0
        reference.write(np.zeros(RATE, np.float32))  # a second queued while the microphone was gone
        path.process(np.zeros(160, np.float32), speaking=False)
        assert path.restarts == 1
        # the old one closed, then only the newest 0.2 s of reference rendered, then the capture frame
        assert log == ["close a.1", "close a"] + ["render a.2"] * 20 + ["capture a.2"]
        assert reference.available() == 0
        path.close()
    assert log[-1] == "close a.2"


def test_the_canceller_is_settling_for_its_first_seconds_of_the_kiosks_voice_and_again_after_a_restart() -> None:
    from edgevoice.audio.echo_path import SETTLING_S

    frame = np.zeros(160, np.float32)
    with SharedRing.create(RATE * 10) as reference:
        path = EchoPath(CountingCanceller([], "a"), reference, RATE)  # type: ignore[arg-type]
        for _ in range(1000):  # ten seconds of listening: the canceller learns nothing of its echo
            path.process(frame, speaking=False)
        assert path.settling
        spoken = int(SETTLING_S * RATE) // 160
        for _ in range(spoken - 1):
            path.process(frame, speaking=True)
        assert path.settling
        path.process(frame, speaking=True)
        assert not path.settling
        path.restart()  # a stream reopened: a new echo path, learnt anew
        path.process(frame, speaking=False)
        assert path.settling
        path.close()
