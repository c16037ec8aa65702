"""The end-of-turn state machine on simulated time: synthetic Silero probabilities in 32 ms frames."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from edgevoice.errors import ConfigError, TurnError, VadError
from edgevoice.listen.endpointing import (
    CutTurnPause,
    Endpointer,
    EndpointEvent,
    EndpointingConfig,
    EndpointState,
    Pause,
    Silence,
    SilenceEnd,
    SpeechResume,
    SpeechStart,
    TurnEnd,
    TurnEndReason,
    pause_verdict,
    sound_decides,
)

F = 0.032  # Silero VAD: 512 samples at 16 kHz
SPEECH, SILENCE = 0.9, 0.05
Verdict = Callable[[Pause], float | None]


def run(
    ep: Endpointer,
    probs: Sequence[float],
    verdict: Verdict | None = None,
    frame_s: float = F,
    *,
    silences: bool = False,
    wait_ms: Callable[[Pause], int | None] = lambda _pause: None,
) -> list[tuple[int, EndpointEvent]]:
    """Feed every probability; answer each Pause at once with ``verdict(pause)`` unless it returns None (an
    incomplete one waiting ``wait_ms(pause)``, None: the configured long wait).
    Returns (index of the frame during which it happened, event); Silence and SilenceEnd only with ``silences``."""
    out: list[tuple[int, EndpointEvent]] = []
    for i, p in enumerate(probs):
        for event in ep.feed(frame_s, p):
            if isinstance(event, (Silence, SilenceEnd)) and not silences:
                continue
            out.append((i, event))
            if isinstance(event, Pause) and verdict is not None:
                answer = verdict(event)
                if answer is not None:
                    reported = ep.report_turn_probability(answer, seq=event.seq, max_silence_ms=wait_ms(event))
                    out.extend((i, e) for e in reported)
    return out


def frames(*spans: tuple[float, int]) -> list[float]:
    return [p for p, n in spans for _ in range(n)]


def approx(t: float) -> object:
    return pytest.approx(t, abs=1e-9)


def complete(_: Pause) -> float:
    return 0.93


def incomplete(_: Pause) -> float:
    return 0.08


def test_defaults() -> None:
    cfg = EndpointingConfig()
    assert (cfg.silence_ms, cfg.min_speech_ms, cfg.incomplete_max_silence_ms) == (192, 120, 1200)
    assert (cfg.complete_threshold, cfg.max_turn_s, cfg.speculative_reply) == (0.5, 30.0, True)
    ep = Endpointer()
    assert (ep.threshold, ep.neg_threshold) == (0.5, 0.35)


def test_a_complete_turn_ends_one_silence_window_after_the_speech() -> None:
    ep = Endpointer()
    events = run(ep, frames((SILENCE, 10), (SPEECH, 20), (SILENCE, 20)), complete)
    # Speech occupies frames 10..29. It is confirmed after 4 frames (128 ms >= 120 ms), dated at its onset.
    # Silence from 30 * F; 6 frames (192 ms) reach silence_ms: the pause and the complete verdict both land at the
    # end of frame 35.
    assert events == [
        (13, SpeechStart(approx(10 * F))),
        (35, Pause(approx(36 * F), approx(30 * F), approx(10 * F), 1)),
        (35, TurnEnd(approx(36 * F), approx(30 * F), TurnEndReason.COMPLETE, approx(10 * F))),
    ]
    assert events[-1][1].t - events[-1][1].speech_end_t == approx(0.192)  # type: ignore[union-attr]
    assert ep.state is EndpointState.IDLE


def test_an_incomplete_turn_waits_until_the_long_silence() -> None:
    ep = Endpointer()
    events = run(ep, frames((SPEECH, 20), (SILENCE, 60)), incomplete)
    # Speech ends at 20 * F; 1.2 s / 32 ms = 37.5, so the 38th silent frame (index 57) ends the turn.
    assert events == [
        (3, SpeechStart(0.0)),
        (25, Pause(approx(26 * F), approx(20 * F), 0.0, 1)),
        (57, TurnEnd(approx(58 * F), approx(20 * F), TurnEndReason.SILENCE_TIMEOUT, 0.0)),
    ]
    assert ep.state is EndpointState.IDLE


def test_an_unsure_turn_ends_after_its_shorter_silence_and_the_next_pause_waits_long_again() -> None:
    # the first pause is unsure (700 ms), the second incomplete (the configured 1.2 s)
    events = run(
        Endpointer(),
        frames((SPEECH, 20), (SILENCE, 10), (SPEECH, 20), (SILENCE, 60)),
        incomplete,
        wait_ms=lambda pause: 700 if pause.seq == 1 else None,
    )
    # the visitor resumes 320 ms into the unsure pause: the same turn goes on; its next pause waits the whole 1.2 s
    # again (38 frames after the speech that ends at frame 50)
    assert [(i, type(e).__name__) for i, e in events] == [
        (3, "SpeechStart"), (25, "Pause"), (33, "SpeechResume"), (55, "Pause"), (87, "TurnEnd"),
    ]  # fmt: skip
    assert events[-1][1] == TurnEnd(approx(88 * F), approx(50 * F), "silence_timeout", 0.0)

    # 700 ms / 32 ms = 21.9: the 22nd silent frame (index 41) ends an unsure turn
    events = run(Endpointer(), frames((SPEECH, 20), (SILENCE, 60)), incomplete, wait_ms=lambda _pause: 700)
    assert events[-1] == (41, TurnEnd(approx(42 * F), approx(20 * F), TurnEndReason.SILENCE_TIMEOUT, 0.0))


@pytest.mark.parametrize(
    ("sound", "words", "decision"),
    [
        (0.9, None, "complete"),  # no words: the sound decides
        (0.2, None, "incomplete"),
        (0.99, 0.001, "incomplete"),  # "where can i find": the words veto a complete sound
        (0.1, 0.3, "complete"),  # words that clearly end a sentence end the turn whatever the sound
        (0.9, 0.03, "unsure"),  # in between: a shorter wait ...
        (0.99, 0.03, "complete"),  # ... unless the sound is sure
    ],
)
def test_a_pause_fuses_the_sound_and_the_words(sound: float, words: float | None, decision: str) -> None:
    cfg = EndpointingConfig()
    decided = pause_verdict(sound, words, cfg)
    got = "complete" if decided.p >= cfg.complete_threshold else "unsure" if decided.unsure else "incomplete"
    assert got == decision
    assert decided.max_silence_ms == (cfg.unsure_silence_ms if decided.unsure else cfg.incomplete_max_silence_ms)


@pytest.mark.parametrize("words", [None, 0.0, 0.001, 0.004, 0.005, 0.03, 0.099, 0.1, 0.5, 1.0])
@pytest.mark.parametrize(
    "cfg", [EndpointingConfig(), EndpointingConfig(text_complete_at=0.0), EndpointingConfig(text_incomplete_below=0.0)]
)
def test_the_sound_is_needed_exactly_where_it_can_change_the_verdict(
    words: float | None, cfg: EndpointingConfig
) -> None:
    def outcome(sound: float | None) -> tuple[bool, int, bool]:
        decided = pause_verdict(sound, words, cfg)
        return decided.p >= cfg.complete_threshold, decided.max_silence_ms, decided.unsure

    outcomes = {outcome(sound) for sound in (0.0, 0.3, 0.5, 0.7, 0.98, 1.0)}
    decides = sound_decides(words, cfg)
    assert decides == (len(outcomes) > 1)
    if decides:
        with pytest.raises(ValueError, match="needs Smart Turn"):
            pause_verdict(None, words, cfg)
    else:  # asked or not: the same turn end and the same wait
        assert outcomes == {outcome(None)}


def test_without_the_words_tiers_the_sound_decides_and_the_words_only_veto() -> None:
    before = EndpointingConfig(text_complete_at=0.0)
    assert pause_verdict(0.9, 0.03, before).p == 0.9  # complete as Smart Turn hears it
    assert pause_verdict(0.2, 0.9, before).p == 0.2  # and incomplete
    assert pause_verdict(0.9, 0.001, before).p == 0.001
    off = EndpointingConfig(text_incomplete_below=0.0)
    assert pause_verdict(0.2, 0.9, off).p == 0.2
    # an unsure wait is never longer than the incomplete one
    short = EndpointingConfig(incomplete_max_silence_ms=500)
    assert pause_verdict(0.9, 0.03, short).max_silence_ms == 500


def test_no_verdict_at_all_still_ends_at_the_long_silence() -> None:
    ep = Endpointer()
    events = run(ep, frames((SPEECH, 20), (SILENCE, 60)))
    assert [(i, type(e).__name__) for i, e in events] == [(3, "SpeechStart"), (25, "Pause"), (57, "TurnEnd")]
    assert events[-1][1] == TurnEnd(approx(58 * F), approx(20 * F), "silence_timeout", 0.0)


def test_speech_resuming_mid_pause_continues_the_same_turn() -> None:
    ep = Endpointer()
    verdicts = iter([0.2, 0.9])
    events = run(ep, frames((SPEECH, 20), (SILENCE, 15), (SPEECH, 10), (SILENCE, 10)), lambda _: next(verdicts))
    assert events == [
        (3, SpeechStart(0.0)),
        (25, Pause(approx(26 * F), approx(20 * F), 0.0, 1)),  # incomplete: keep listening
        (38, SpeechResume(approx(35 * F))),  # speech back at frame 35, confirmed after 4 frames
        (50, Pause(approx(51 * F), approx(45 * F), 0.0, 2)),
        (50, TurnEnd(approx(51 * F), approx(45 * F), "complete", 0.0)),  # one turn, from the first onset
    ]


def test_a_60_ms_blip_starts_nothing_and_120_ms_does() -> None:
    ep = Endpointer()
    assert run(ep, frames((SILENCE, 5), (SPEECH, 3), (SILENCE, 50)), frame_s=0.02) == []  # 60 ms
    assert run(ep, frames((SPEECH, 1), (SILENCE, 2), (SPEECH, 2), (SILENCE, 3))) == []  # 32 ms, then 64 ms
    events = run(ep, frames((SPEECH, 6), (SILENCE, 1)), frame_s=0.02)  # exactly 120 ms
    assert [e for _, e in events] == [SpeechStart(approx(58 * 0.02 + 8 * F))]
    assert ep.state is EndpointState.SPEECH


def test_a_blip_during_a_pause_neither_resumes_nor_resets_the_silence() -> None:
    ep = Endpointer()
    events = run(ep, frames((SPEECH, 20), (SILENCE, 15), (SPEECH, 2), (SILENCE, 40)), incomplete)
    assert [type(e).__name__ for _, e in events] == ["SpeechStart", "Pause", "TurnEnd"]
    # Exactly as without the blip: 1.2 s after the speech ended at 20 * F, in frame 57.
    assert events[-1] == (57, TurnEnd(approx(58 * F), approx(20 * F), "silence_timeout", 0.0))


def test_hysteresis() -> None:
    ep = Endpointer()
    # Between the thresholds: never starts a turn...
    assert run(ep, frames((0.45, 100))) == []
    # ...but keeps one going: a second of 0.4 after speech is still speech.
    events = run(ep, frames((SPEECH, 5), (0.4, 31), (0.3, 7)), complete)
    assert [(i, type(e).__name__) for i, e in events] == [(3, "SpeechStart"), (41, "Pause"), (41, "TurnEnd")]
    assert events[-1][1].speech_end_t == approx(ep.now - 7 * F)  # type: ignore[union-attr]
    # Once silent, 0.45 does not bring speech back: the silence keeps counting from the last speech frame.
    ep = Endpointer()
    events = run(ep, frames((SPEECH, 10), (0.3, 1), (0.45, 6)), incomplete)
    assert [(i, type(e).__name__) for i, e in events] == [(3, "SpeechStart"), (15, "Pause")]


def test_max_length_cuts_a_turn_which_waits_for_the_visitors_pause() -> None:
    ep = Endpointer(EndpointingConfig(max_turn_s=2.0))
    # 2.0 s / 32 ms = 62.5: the turn is cut at the end of frame 62. The speech that goes on starts nothing, nor do
    # pauses shorter than silence_ms; six silent frames (192 ms) end the wait, and listening starts over.
    events = run(ep, frames((SPEECH, 70), (SILENCE, 5), (SPEECH, 10), (SILENCE, 6), (SPEECH, 4)))
    assert events == [
        (3, SpeechStart(0.0)),
        (62, TurnEnd(approx(63 * F), approx(63 * F), TurnEndReason.MAX_LENGTH, 0.0)),
        (90, CutTurnPause(approx(91 * F))),
        (94, SpeechStart(approx(91 * F))),
    ]
    assert ep.state is EndpointState.SPEECH


def test_max_length_also_bounds_a_turn_waiting_in_a_pause() -> None:
    ep = Endpointer(EndpointingConfig(max_turn_s=2.0, incomplete_max_silence_ms=5000))
    events = run(ep, frames((SPEECH, 20), (SILENCE, 50)), incomplete)
    assert events[-2] == (62, TurnEnd(approx(63 * F), approx(20 * F), "max_length", 0.0))
    assert events[-1] == (68, CutTurnPause(approx(69 * F)))  # the visitor was already silent: 6 frames more


def test_silence_and_its_end_are_reported_once_each_during_a_turn() -> None:
    ep = Endpointer()
    # between the thresholds, neither; below neg_threshold during speech: Silence; at threshold again: SilenceEnd
    events = run(
        ep,
        frames((SILENCE, 3), (SPEECH, 10), (0.4, 2), (SILENCE, 3), (0.4, 1), (SILENCE, 1), (SPEECH, 6), (SILENCE, 7)),
        complete,
        silences=True,
    )
    assert [(i, type(e).__name__) for i, e in events] == [
        (6, "SpeechStart"),
        (15, "Silence"),
        (20, "SilenceEnd"),
        (26, "Silence"),
        (31, "Pause"),
        (31, "TurnEnd"),
    ]
    assert events[1][1] == Silence(approx(16 * F))
    # after the turn, silence and sound start nothing
    assert run(ep, frames((SPEECH, 1), (SILENCE, 5)), silences=True) == []


def test_a_verdict_arriving_after_speech_resumed_is_ignored() -> None:
    ep = Endpointer()
    events = run(ep, frames((SPEECH, 20), (SILENCE, 10), (SPEECH, 5)))  # Pause at frame 25 left unanswered
    assert [type(e).__name__ for _, e in events] == ["SpeechStart", "Pause", "SpeechResume"]
    first_pause = events[1][1]
    assert isinstance(first_pause, Pause)
    assert ep.report_turn_probability(0.99) == []
    assert ep.report_turn_probability(0.99, seq=first_pause.seq) == []
    assert ep.state is EndpointState.SPEECH
    # The next pause is only answered by its own verdict, not by a late one quoting the first.
    events = run(ep, frames((SILENCE, 6)))
    second_pause = events[0][1]
    assert isinstance(second_pause, Pause) and second_pause.seq == first_pause.seq + 1
    assert ep.report_turn_probability(0.99, seq=first_pause.seq) == []
    assert ep.state is EndpointState.PAUSE_PENDING_VERDICT
    assert ep.report_turn_probability(0.99, seq=second_pause.seq) == [
        TurnEnd(approx(ep.now), second_pause.speech_end_t, "complete", 0.0)
    ]
    assert ep.report_turn_probability(0.99) == []  # nothing pending any more


def test_pure_silence_and_noise_below_threshold_give_no_events() -> None:
    ep = Endpointer()
    rng = np.random.default_rng(7)
    assert run(ep, rng.uniform(0.0, 0.49, 2000).tolist()) == []
    assert ep.state is EndpointState.IDLE and ep.now == approx(2000 * F)
    assert ep.report_turn_probability(1.0) == []


def test_reset_forgets_the_turn_and_restarts_stream_time() -> None:
    ep = Endpointer()
    events = run(ep, frames((SPEECH, 20), (SILENCE, 7)))
    pause = events[-1][1]
    assert isinstance(pause, Pause)
    ep.reset()
    assert ep.state is EndpointState.IDLE and ep.now == 0.0
    assert ep.report_turn_probability(0.9, seq=pause.seq) == []
    assert run(ep, frames((SILENCE, 2), (SPEECH, 4))) == [(5, SpeechStart(approx(2 * F)))]
    ep.reset(t=100.0)
    assert run(ep, frames((SPEECH, 4))) == [(3, SpeechStart(100.0))]
    later = run(ep, frames((SILENCE, 7)))
    assert isinstance(later[0][1], Pause) and later[0][1].seq > pause.seq  # never reused across resets


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"min_speech_ms": -1}, "endpointing.min_speech_ms"),
        ({"silence_ms": 0}, "endpointing.silence_ms"),
        ({"silence_ms": True}, "endpointing.silence_ms"),
        ({"silence_ms": 300, "incomplete_max_silence_ms": 250}, "endpointing.incomplete_max_silence_ms"),
        ({"complete_threshold": 1.1}, "endpointing.complete_threshold"),
        ({"max_turn_s": 0.0}, "endpointing.max_turn_s"),
        ({"max_turn_s": "30"}, "endpointing.max_turn_s"),
    ],
)
def test_bad_config_names_the_key(changes: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=f"^\\[config_invalid\\] {key} = "):
        EndpointingConfig(**changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "thresholds",
    [{"threshold": 1.5}, {"threshold": math.nan}, {"threshold": 0.3}, {"neg_threshold": 0.6}],
)
def test_bad_thresholds_name_the_vad_key(thresholds: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match=r"^\[config_invalid\] (vad\.threshold|neg_threshold) = "):
        Endpointer(**thresholds)


def test_bad_inputs_are_stage_errors() -> None:
    ep = Endpointer()
    for frame_s, prob in ((0.0, 0.5), (math.inf, 0.5), (F, math.nan), (F, 1.5)):
        with pytest.raises(VadError):
            ep.feed(frame_s, prob)
    with pytest.raises(TurnError):
        ep.report_turn_probability(math.nan)
    assert ep.now == 0.0  # rejected frames do not advance time


def test_speech_still_unconfirmed_when_the_turn_ends_can_start_the_next_turn() -> None:
    ep = Endpointer()
    events = run(ep, frames((SPEECH, 20), (SILENCE, 7), (SPEECH, 2)))  # the verdict is late; speech begins again
    assert [type(e).__name__ for _, e in events] == ["SpeechStart", "Pause"]
    assert ep.report_turn_probability(0.9) == [TurnEnd(approx(29 * F), approx(20 * F), "complete", 0.0)]
    assert run(ep, frames((SPEECH, 2))) == [(1, SpeechStart(approx(27 * F)))]  # onset kept from before the end
