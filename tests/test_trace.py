"""Per-turn latency traces: the arithmetic on synthetic timelines, and the true end of speech found in the audio."""

from __future__ import annotations

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.timing import PullLog, SampleAnchor
from edgevoice.trace import MARKS, STAGE_NAMES, TurnTimeline, percentile, speech_end_index


def timeline(**offsets_ms: float) -> TurnTimeline:
    """A turn whose marks lie ``offsets_ms`` after an arbitrary origin (the clock does not start at zero)."""
    origin = 5000.0
    return TurnTimeline(7, **{k: origin + v / 1000 for k, v in offsets_ms.items()})


FULL = {
    "speech_end": 0,
    "endpoint_audio": 230,
    "endpoint": 262,
    "transcript": 270,
    "first_token": 390,
    "first_clause": 610,
    "first_audio": 640,
    "first_queued": 641,
    "first_handed": 660,
    "first_played": 700,
}


def test_stages_are_the_gaps_between_marks_and_add_up_to_voice_to_voice() -> None:
    t = timeline(**FULL)
    stages = t.stages()
    assert list(stages) == list(STAGE_NAMES)
    expected = {
        "endpointing": 230,
        "capture": 32,
        "recognition": 8,
        "first_token": 120,
        "first_clause": 220,
        "synthesis": 30,
        "queue": 20,
        "output": 40,
    }
    assert {k: round(v * 1000, 3) for k, v in stages.items()} == expected
    total = t.voice_to_voice()
    assert total == pytest.approx(0.700)
    assert sum(stages.values()) == pytest.approx(total)


def test_a_turn_that_never_played_has_no_voice_to_voice_and_only_its_known_stages() -> None:
    marks = {k: v for k, v in FULL.items() if k in ("speech_end", "endpoint_audio", "endpoint", "transcript")}
    t = timeline(**marks)
    assert t.voice_to_voice() is None
    assert set(t.stages()) == {"endpointing", "capture", "recognition"}
    record = t.record()
    assert record["voice_to_voice_ms"] is None
    assert record["marks_ms"] == {m: (float(FULL[m]) if m in marks else None) for m in MARKS}


def test_without_a_true_end_of_speech_nothing_is_relative() -> None:
    t = timeline(**{k: v for k, v in FULL.items() if k != "speech_end"})
    assert t.voice_to_voice() is None
    assert set(t.relative_ms().values()) == {None}
    assert "endpointing" not in t.stages() and "capture" in t.stages()


def test_the_record_is_in_milliseconds() -> None:
    record = timeline(**FULL).record()
    assert record["voice_to_voice_ms"] == 700.0
    assert record["stages_ms"]["first_clause"] == 220.0  # type: ignore[index]
    assert record["marks_ms"]["first_played"] == 700.0  # type: ignore[index]


def speech_then_silence(speech_s: float, silence_s: float, *, noise_db: float = -70.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n_speech, n_silence = int(speech_s * RATE), int(silence_s * RATE)
    t = np.arange(n_speech) / RATE
    voiced = 0.3 * np.sin(2 * np.pi * 180 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))  # syllable-like envelope
    audio = np.concatenate([voiced, np.zeros(n_silence)])
    return (audio + rng.standard_normal(len(audio)) * 10 ** (noise_db / 20)).astype(np.float32)


@pytest.mark.parametrize("noise_db", [-80.0, -50.0])
def test_the_true_end_of_speech_is_found_within_a_frame(noise_db: float) -> None:
    audio = np.concatenate([np.zeros(RATE // 4, np.float32), speech_then_silence(1.2, 0.4, noise_db=noise_db)])
    end = speech_end_index(audio, RATE)
    assert end is not None
    true_end = RATE // 4 + int(1.2 * RATE)
    assert abs(end - true_end) <= RATE // 100


def test_a_quiet_tail_of_the_word_still_counts_as_speech() -> None:
    audio = speech_then_silence(1.0, 0.5)
    fade = np.linspace(1.0, 0.03, 1600, dtype=np.float32)  # the last 100 ms fade out by 30 dB
    audio[RATE - 1600 : RATE] *= fade
    end = speech_end_index(audio, RATE)
    assert end is not None and RATE - 160 <= end <= RATE


def test_silence_and_steady_noise_have_no_end_of_speech() -> None:
    rng = np.random.default_rng(1)
    assert speech_end_index(np.zeros(RATE, np.float32), RATE) is None
    assert speech_end_index((rng.standard_normal(RATE) * 0.05).astype(np.float32), RATE) is None
    assert speech_end_index(np.zeros(10, np.float32), RATE) is None


def test_pull_log_tells_when_a_real_sample_was_handed_to_the_device() -> None:
    log = PullLog()
    log.add(220, 0, t=1.00)  # silence: nothing queued yet
    log.add(220, 100, t=1.01)  # the reply starts 100 samples before this pull's end
    log.add(220, 220, t=1.02)
    assert log.time_of_real(0) == 1.01 and log.index_of_real(0) == 220
    assert log.time_of_real(150) == 1.02 and log.index_of_real(150) == 490
    assert log.time_of_real(320) is None


def test_a_sample_keeps_the_dac_time_it_was_pulled_with_when_an_underrun_moves_the_line() -> None:
    """After an underrun the device's samples lie on a later line: a turn's record, made after the reply, must not
    move the reply's samples onto it (under load that put them up to 150 ms after they were heard)."""
    rate = 100.0
    anchor, log = SampleAnchor(rate), PullLog()
    for index in range(0, 640, 10):
        anchor.add(1.0 + index / rate, index)  # DAC time of each callback's first sample: offset 1.0 s
    log.pulled = 640
    log.add(10, 10, t=7.0, dac=anchor.time_of(log.pulled))
    for index in range(650, 1290, 10):
        anchor.add(1.5 + index / rate, index)  # a 0.5 s gap: the line is now 0.5 s later
    assert anchor.time_of(640) == pytest.approx(7.9)
    assert log.dac_time_of_real(0, rate) == pytest.approx(7.4)
    assert log.dac_time_of_real(5, rate) == pytest.approx(7.45)
    assert log.dac_time_of_real(10, rate) is None  # not pulled


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5


def test_a_reply_begun_before_the_commit_counts_its_model_time_from_its_transcript() -> None:
    from edgevoice.converse import trace_stages
    from edgevoice.reply.trace import ReplyTrace

    trace = ReplyTrace(1, committed=0.0)
    trace.transcript_done, trace.first_token, trace.first_audio = 1.0, 1.2, 1.4  # while the turn was still open
    trace.done, trace.synthesis_s = 3.0, 0.5
    trace.committed = 1.5
    trace.settle_before(1.5)
    assert (trace.transcript_done, trace.first_token, trace.first_audio) == (1.5, 1.5, 1.5)
    stages = trace_stages(trace)
    assert stages["asr"] == 0.0 and stages["first_audio"] == 0.0  # nothing of it left after the commit
    assert stages["llm"] == 1.5 and stages["tts"] == 0.5  # the work itself, never negative
