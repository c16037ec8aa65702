from edgevoice.listen.vad import speech_segments

FRAME = 512
RATE = 16000


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
