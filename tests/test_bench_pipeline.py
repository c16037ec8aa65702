"""`edgevoice bench --pipeline`'s summary of one configuration: every turn told by who answered it, and the language
model's turns given their own median (direct answers and model replies take very different paths)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from edgevoice.bench.pipeline import Variant, answered_by, format_pipeline, summarize, voiced_utterances
from edgevoice.bench.venue import Question, sample_venue
from edgevoice.bench.voices import voice_speaker
from edgevoice.config import Config
from edgevoice.errors import ConfigError
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.selftest.session import SessionResult
from edgevoice.selftest.utterances import Utterance


def word_kiosk() -> Kiosk:
    """The sample venue matched by words only (no sentence encoder to load)."""
    config = Config()
    return Kiosk.from_config(replace(config, kiosk=replace(config.kiosk, semantic=False)))


def turn(transcript: str, v2v_ms: float, first_token_ms: float) -> dict[str, object]:
    return {
        "event": "turn",
        "transcript": transcript,
        "voice_to_voice_ms": v2v_ms,
        "stages_ms": {"endpointing": 250.0, "first_token": first_token_ms},
    }


def test_each_turn_is_told_by_who_answered_it_and_the_models_turns_get_their_own_median() -> None:
    kiosk = word_kiosk()
    assert answered_by(kiosk, "Where is the whale skeleton?") == "direct"
    assert answered_by(kiosk, "Where do I drop off my jacket?") == "model"
    assert answered_by(kiosk, "Can I bring my dog?") == "gate"
    result = SessionResult(
        turns=[
            turn("Where is the whale skeleton?", 600, 0),
            turn("Is it free for kids?", 900, 140),
            turn("Where do I drop off my jacket?", 2200, 300),
            turn("Can I bring my dog?", 550, 0),
        ],
        speaker_side_s=[0.65, 0.95, None, 0.6],  # the jacket's reply was not found in the recording
    )
    row = summarize(Variant("configured", {}), result, kiosk)

    assert [t["answered_by"] for t in row["per_turn"]] == ["direct", "model", "model", "gate"]
    assert row["model_turns"] == 2
    assert row["model_speaker_side_p50_ms"] == 950.0  # the one model turn measured on the speaker side
    assert row["speaker_side_p50_ms"] == 650.0
    assert row["stages_p50_ms"]["first_token"] == 70.0
    row["ratio"] = 1.0
    table = format_pipeline([row])
    assert "model p50" in table and "950 (2)" in table


def test_the_ablation_flips_each_technique_from_the_configured_value_and_shows_on_and_off_side_by_side() -> None:
    import pytest

    from edgevoice.bench.pipeline import TECHNIQUES, ablation_variants, format_ablation, technique
    from edgevoice.errors import ConfigError

    config = Config()
    off_by_default = replace(config, tts=replace(config.tts, presynthesize=False))
    presynth, speculative = technique("tts.presynthesize"), technique("endpointing.speculative_reply")
    assert presynth in TECHNIQUES and technique("reply.stream_clauses").key == "reply.stream_clauses"
    variants = ablation_variants(off_by_default, [presynth, speculative])
    assert [v.overrides for v in variants] == [
        {},
        {"tts": {"presynthesize": True}},
        {"endpointing": {"speculative_reply": False}},
    ]
    assert variants[1].name == "presynthesized replies on" and variants[2].name == "speculative reply off"
    with pytest.raises(ConfigError, match="not a true/false key"):
        ablation_variants(config, [technique("llm.threads")])
    with pytest.raises(ConfigError, match=r"SECTION\.KEY"):
        technique("presynthesize")

    kiosk = word_kiosk()

    def row(name: str, direct_ms: float, model_ms: float) -> dict[str, object]:
        result = SessionResult(
            turns=[
                {
                    **turn("Where is the whale skeleton?", direct_ms, 0),
                    "stages_ms": {
                        "recognition": 5.0,
                        "first_token": 1.0,
                        "first_clause": 0.0,
                        "synthesis": direct_ms / 10,
                    },
                },
                turn("Where do I drop off my jacket?", model_ms, 300),
            ],
            speaker_side_s=[direct_ms / 1000, model_ms / 1000],
        )
        return summarize(Variant(name, {}), result, kiosk)

    rows = [
        row("configured", 900, 2000),
        row("presynthesized replies on", 600, 2000),
        row("speculative reply off", 1000, 2600),
    ]
    assert rows[1]["direct_speaker_side_p50_ms"] == 600.0 and rows[1]["direct_commit_to_audio_p50_ms"] == 66.0
    lines = format_ablation(rows, [presynth, speculative], off_by_default).splitlines()
    on, off = (line.split() for line in lines[2:4])
    # presynthesis is off in this configuration: the flipped row is its "on", the configured row its "off"
    assert on[:7] == ["presynthesized", "replies", "on", "1300", "1930", "600", "66"]
    assert off[:4] == ["off", "1450", "1945", "900"] and off[-2:] == [f"{1450 / 1300:.2f}", "-"]
    spec_on, spec_off = (line.split() for line in lines[4:6])
    assert spec_on[3] == "1450" and spec_off[1] == "1800" and spec_off[-2] == f"{1800 / 1450:.2f}"


def test_the_words_check_is_switched_by_its_threshold_and_the_table_counts_half_sentence_replies() -> None:
    import pytest

    from edgevoice.bench.pipeline import TECHNIQUES, ablation_variants, format_ablation
    from edgevoice.engines.text_turn import MEASURED_THRESHOLD
    from edgevoice.errors import ConfigError

    (words,) = [t for t in TECHNIQUES if t.key == "endpointing.text_incomplete_below"]
    config = Config()
    off = replace(config, endpointing=replace(config.endpointing, text_incomplete_below=0.0))
    on = replace(config, endpointing=replace(config.endpointing, text_incomplete_below=0.02))
    assert not words.value(off) and words.value(on)
    assert ablation_variants(off, [words])[1].overrides == {
        "endpointing": {"text_incomplete_below": MEASURED_THRESHOLD}
    }
    (flipped,) = ablation_variants(on, [words])[1:]
    assert flipped.name == "words' end of turn off" and flipped.overrides == {
        "endpointing": {"text_incomplete_below": 0.0}
    }
    with pytest.raises(ConfigError, match="not a number key"):
        replace(words, key="tts.presynthesize").value(config)

    kiosk = word_kiosk()

    def row(split: bool) -> dict[str, object]:
        result = SessionResult(
            turns=[turn("Where can I leave?" if split else "Where can I leave my coat?", 900, 0)],
            split=[split],
            speaker_side_s=[0.9],
            utterances=[Utterance("coat_pause", "Where can I leave | my coat?")],
        )
        return summarize(Variant("x", {}), result, kiosk)

    # the check is off in this configuration: the flipped row (no split) is its "on"
    lines = format_ablation([row(True), row(False)], [words], off).splitlines()
    assert lines[2].split()[-2:] == ["0/1", "(0)"] and lines[3].split()[-2:] == ["1/1", "(0)"]


def test_bench_pipeline_ablation_runs_the_configuration_and_each_switch_flipped_and_prints_the_table(
    monkeypatch, capsys, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from edgevoice import cli
    from edgevoice.bench import pipeline

    ran: list[list[Variant]] = []
    kiosk = word_kiosk()

    def fake_run(config, models_dir, variants, *, turns, progress, utterances=()):  # type: ignore[no-untyped-def]
        ran.append(list(variants))
        rows = []
        for i, variant in enumerate(variants):
            result = SessionResult(turns=[turn("Where is the whale skeleton?", 500, 0)], speaker_side_s=[0.5 + i / 10])
            rows.append(summarize(variant, result, kiosk) | {"ratio": 1.0 + i / 5})
        return rows

    monkeypatch.setattr(pipeline, "run_pipeline", fake_run)
    monkeypatch.chdir(tmp_path)  # no ./edgevoice.toml: the defaults
    assert cli.main(["bench", "--pipeline", "--ablation", "tts.presynthesize", "--turns", "2"]) == 0
    assert [v.overrides for v in ran[0]] == [{}, {"tts": {"presynthesize": False}}]
    out = capsys.readouterr().out
    assert "ablation: voice-to-voice with each technique on and off" in out
    on, off = (line.split() for line in out.splitlines()[-3:-1])
    assert on[:5] == ["presynthesized", "replies", "on", "500", "500"] and off[:3] == ["off", "600", "600"]
    assert off[-2:] == ["1.20", "-"]


def test_the_spoken_turns_cycle_the_questions_and_the_voices_and_render_each_pair_once() -> None:
    questions = tuple(Question(f"q{i}", f"question {i}?") for i in range(4))
    rendered: list[tuple[str, str]] = []

    def speaker(voice: str):  # type: ignore[no-untyped-def]
        def speak(text: str) -> np.ndarray:
            rendered.append((voice, text))
            return np.full(160, len(rendered), np.float32)

        return speak

    turns = voiced_utterances(questions, ["a", "b", "c"], 14, speaker)

    assert [(u.text, u.voice) for u in turns[:5]] == [
        ("question 0?", "a"), ("question 1?", "b"), ("question 2?", "c"), ("question 3?", "a"), ("question 0?", "b"),
    ]  # fmt: skip
    assert len({(u.text, u.voice) for u in turns}) == len(rendered) == 12  # 4 questions x 3 voices, each once
    assert turns[12] is turns[0] and turns[12].audio() is turns[0].audio()  # asked again: the same rendering
    assert len({u.name for u in turns}) == 12
    with pytest.raises(ConfigError, match="at least one question and one voice"):
        voiced_utterances(questions, [], 3, speaker)
    with pytest.raises(ConfigError, match="--turns 0"):
        voiced_utterances(questions, ["a"], 0, speaker)


def test_the_sample_venues_questions_are_spoken_by_other_voices_for_real() -> None:
    questions = sample_venue().in_split("dev")[:2]
    turns = voiced_utterances(questions, ["espeak-en-gb+m3", "festival-kal"], 2, voice_speaker)

    for utterance, question in zip(turns, questions, strict=True):
        audio = utterance.audio()
        assert utterance.text == question.text and not utterance.paused
        assert audio.dtype == np.float32 and audio.ndim == 1
        assert 0.5 < len(audio) / 16000 < 8 and float(np.abs(audio).max()) > 0.05  # a spoken question at 16 kHz


def test_the_summary_tells_each_turns_voice_and_the_commit_after_the_last_word() -> None:
    kiosk = word_kiosk()
    spoken = [Utterance("w", "Where is the whale skeleton?", "festival-kal", recording=np.zeros(1, np.float32))]
    stages = {"endpointing": 260.0, "capture": 90.0, "recognition": 5.0}
    result = SessionResult(
        turns=[
            {"transcript": "Where is the whale skeleton?", "voice_to_voice_ms": 500.0, "stages_ms": stages},
            {"transcript": "Is it free?", "reason": "silence_timeout", "stages_ms": {}},
            {"transcript": "Where can I leave my coat?", "reason": "silence_timeout", "stages_ms": {}},
        ],
        speaker_side_s=[0.55, None, None],
        utterances=[*spoken, spoken[0], Utterance("c", "Where can I leave | my coat?", "hibari-heart")],
    )
    row = summarize(Variant("configured", {}), result, kiosk)

    assert row["per_turn"][0]["voice"] == "festival-kal"
    assert row["per_turn"][0]["said"] == "Where is the whale skeleton?"
    assert row["commit_after_speech_p50_ms"] == 350.0
    # a whole question ended by the longer silence waited; one said with a pause in it may rightly wait
    assert (row["whole_questions_waited"], row["whole_questions"]) == (1, 2)
    assert row["direct_turns"] == 2 and row["direct_speaker_side_p50_ms"] == 550.0  # the one measured
    row["ratio"] = 1.0
    assert "350/350" in format_pipeline([row]) and "1/2" in format_pipeline([row])


def test_bench_pipeline_with_voices_answers_the_sample_venues_questions_spoken_by_them(
    monkeypatch, capsys, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from edgevoice import cli
    from edgevoice.bench import pipeline

    heard: list[list[Utterance]] = []

    def fake_run(config, models_dir, variants, *, turns, progress, utterances=()):  # type: ignore[no-untyped-def]
        heard.append(list(utterances))
        result = SessionResult(turns=[turn("Where is the whale skeleton?", 500, 0)], speaker_side_s=[0.5])
        return [summarize(v, result, word_kiosk()) | {"ratio": 1.0} for v in variants]

    monkeypatch.setattr(pipeline, "run_pipeline", fake_run)
    monkeypatch.chdir(tmp_path)
    argv = ["bench", "--pipeline", "--compare", "tts.presynthesize=false", "--turns", "3", "--split", "test"]
    assert cli.main([*argv, "--voice", "espeak-en-gb+m3", "--voice", "espeak-en-us"]) == 0
    test_half = [q.text for q in sample_venue().in_split("test")]
    assert [(u.text, u.voice) for u in heard[0]] == [
        (test_half[0], "espeak-en-gb+m3"), (test_half[1], "espeak-en-us"), (test_half[2], "espeak-en-gb+m3"),
    ]  # fmt: skip
    assert all(len(u.audio()) > 8000 for u in heard[0])
    assert "direct p50" in capsys.readouterr().out
