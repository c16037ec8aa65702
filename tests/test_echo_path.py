"""The echo-cancelled microphone path: the playback mirrored into a reference ring cancels its own echo."""

from __future__ import annotations

import numpy as np
import pytest

from edgevoice.echo_path import EchoPath
from edgevoice.playback import PlaybackControl
from edgevoice.ring import SharedRing

pytest.importorskip("livekit")

RATE = 16000


def speechlike(seconds: float, seed: int) -> np.ndarray:
    """Noise shaped by a syllable-rate envelope: broadband like speech, loud and quiet in turns."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    envelope = 0.5 * (1 + np.sin(2 * np.pi * 4 * np.arange(n) / RATE)) ** 2
    return (0.1 * envelope * rng.standard_normal(n)).astype(np.float32)


def test_playback_is_mirrored_and_its_echo_cancelled() -> None:
    from edgevoice.aec import EchoCanceller

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
