import numpy as np

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.config import VadConfig
from edgevoice.events import Segment
from edgevoice.listen.vad import find_speech, speech_segments, utterance_span

FRAME = 512


def segs(probs: list[float], **kw: int) -> list[tuple[int, int]]:
    kw.setdefault("pad_ms", 0)
    return [
        (s.start // FRAME, s.end // FRAME) for s in speech_segments(probs, frame_samples=FRAME, sample_rate=RATE, **kw)
    ]


def test_silence_has_no_segments() -> None:
    assert segs([0.01] * 100) == []


def test_one_utterance_with_a_short_pause_is_one_segment() -> None:
    probs = [0.0] * 10 + [0.9] * 20 + [0.1] * 5 + [0.9] * 20 + [0.0] * 30
    assert segs(probs, min_silence_ms=400) == [(10, 55)]


def test_a_long_pause_splits_and_a_blip_is_dropped() -> None:
    probs = [0.9] * 20 + [0.0] * 20 + [0.9] * 2 + [0.0] * 20 + [0.9] * 15
    assert segs(probs, min_silence_ms=300, min_speech_ms=200) == [(0, 20), (62, 77)]


def test_hysteresis_keeps_speech_through_mid_probabilities() -> None:
    probs = [0.9] * 10 + [0.4] * 10 + [0.9] * 10 + [0.0] * 20
    assert segs(probs, min_silence_ms=100) == [(0, 30)]


def test_padding_is_clamped_to_the_audio() -> None:
    probs = [0.9] * 10 + [0.0] * 20
    (segment,) = speech_segments(probs, frame_samples=FRAME, sample_rate=RATE, pad_ms=100, total_samples=30 * FRAME)
    assert segment.start == 0
    assert segment.end == 10 * FRAME + 1600


class FakeVad:
    """Frame probabilities from a list, and a record of resets."""

    frame_samples = FRAME

    def __init__(self, probs: list[float]) -> None:
        self.probs = np.array(probs, dtype=np.float32)
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def probabilities(self, audio: np.ndarray) -> np.ndarray:
        return self.probs[: len(audio) // FRAME]


def test_find_speech_resets_the_vad_and_takes_the_configured_thresholds() -> None:
    vad = FakeVad([0.0] * 10 + [0.6] * 20 + [0.0] * 30)
    audio = np.zeros(60 * FRAME, dtype=np.float32)
    (segment,) = find_speech(vad, audio, VadConfig(pad_ms=0), sample_rate=RATE)
    assert (segment.start, segment.end, vad.resets) == (10 * FRAME, 30 * FRAME, 1)
    assert find_speech(vad, audio, VadConfig(threshold=0.7), sample_rate=RATE) == []
    assert vad.resets == 2


def test_the_utterance_spans_all_segments_cut_to_the_longest_allowed() -> None:
    segments = [Segment(100, 200, RATE), Segment(500, 900, RATE)]
    assert utterance_span(segments, 10_000) == (100, 900)
    assert utterance_span(segments, 300) == (100, 400)
    assert utterance_span([], 300) is None
