"""The quality benchmark: its scoring and audio (no models), and a small run on the real default models."""

from __future__ import annotations

import numpy as np
import pytest

from edgevoice.bench.audio_set import VOICES, mix_at_snr, non_speech_clips, pink_noise, speech_power, with_pauses
from edgevoice.bench.quality_report import format_quality
from edgevoice.bench.quality_set import IN_KNOWLEDGE, OUT_OF_KNOWLEDGE
from edgevoice.bench.scoring import corpus_wer, has_fact, has_markup, is_dont_know, word_error_rate, words
from edgevoice.kiosk.prompt import DONT_KNOW, OFF_TOPIC

# --- scoring -------------------------------------------------------------------------------------------------------


def test_words_compare_what_is_said_not_how_it_is_written() -> None:
    assert words("What's the Wi-Fi password?") == words("what is the wifi password")
    assert words("It costs €14, from 10am.") == words("It costs fourteen euros from ten a.m.")
    assert words("The Harbour centre, network HarbourMuseum") == words("the harbor center network harbor museum")
    assert words("Harbour") != words("Harbor Museum")
    assert word_error_rate("Where is the whale skeleton?", "Where is the wail skeleton") == 0.2
    assert word_error_rate("Where is the cafe?", "") == 1.0
    assert corpus_wer([("one two three four", "one two three four"), ("five six", "five")]) == pytest.approx(1 / 6)
    # a compound written in one word or two sounds the same, either way round; other words still count
    assert word_error_rate("Ask at the cloakroom.", "Ask at the cloak room.") == 0.0
    assert word_error_rate("Ask at the cloak room.", "Ask at the cloakroom.") == 0.0
    assert word_error_rate("Ask at the cloakroom.", "Ask at the cloak rooms.") == 0.5
    assert word_error_rate("the cloak and the room", "the cloakroom") == 0.8  # not next to each other: not split


def test_word_error_rate_counts_substitutions_deletions_and_insertions() -> None:
    assert word_error_rate("where is the whale", "where is a whale skeleton") == 0.5  # one swapped, one added
    assert word_error_rate("where is the whale", "where whale") == 0.5
    assert word_error_rate("", "") == 0.0
    assert word_error_rate("", "hello there") == 2.0  # against no reference, every word is an error
    assert word_error_rate("It's 10 am, the cloakroom.", "it is ten a m the cloak room") == 0.0
    # all errors over all reference words; a pair without reference words adds its hypothesis's words
    pairs = [("the cloak room", "the cloakroom"), ("", "um"), ("one two", "one three four")]
    assert corpus_wer(pairs) == pytest.approx(3 / 5)


def test_facts_must_all_be_there_and_a_dont_know_is_no_fact() -> None:
    tours = (("11 am", "eleven"), ("3 pm", "three p m"))
    assert has_fact("Tours start at 11 am and 3 pm.", tours)
    assert has_fact("Tours are at eleven in the morning and at three p.m.", tours)
    assert not has_fact("Tours start at 11 am.", tours)
    assert has_fact("It is closed on Mondays.", (("Monday",),))
    assert not has_fact("It is closed on Monday.", (("Mondays",),))
    assert not has_fact("It is closed on Sunday.", (("Monday",),))
    assert not has_fact("I don't know that, please ask at the desk. Tours are at 11 am and 3 pm.", tours)
    assert has_fact("The museum pass costs €40.", (("40 euros",),))


@pytest.mark.parametrize(
    ("reply", "declines"),
    [
        (DONT_KNOW, True),
        (OFF_TOPIC, True),
        ("I'm not sure, please ask a member of staff.", True),
        ("I do not know.", True),
        ("The whale skeleton is on the first floor.", False),
        ("Nobody knows the answer better than the desk.", False),
    ],
)
def test_dont_know(reply: str, declines: bool) -> None:
    assert is_dont_know(reply) is declines


def test_markup_detection() -> None:
    assert has_markup("**Tickets**: 14 euros")
    assert has_markup("- first\n- second")
    assert has_markup("Here 😀")
    assert not has_markup("Tickets cost fourteen euros, children go free.")


def test_the_question_set_is_well_formed() -> None:
    ids = [q.id for q in IN_KNOWLEDGE + OUT_OF_KNOWLEDGE]
    assert len(ids) == len(set(ids))
    assert all(q.in_knowledge for q in IN_KNOWLEDGE) and not any(q.in_knowledge for q in OUT_OF_KNOWLEDGE)
    assert len(IN_KNOWLEDGE) >= 20 and len(OUT_OF_KNOWLEDGE) >= 12


# --- audio ---------------------------------------------------------------------------------------------------------


def test_noise_is_mixed_at_the_measured_snr() -> None:
    rng = np.random.default_rng(0)
    t = np.arange(16000) / 16000
    speech = with_pauses((0.3 * np.sin(2 * np.pi * 220 * t) * np.hanning(16000)).astype(np.float32))
    for snr in (20.0, 10.0, 0.0):
        mixed, measured = mix_at_snr(speech, snr, rng)
        assert measured == pytest.approx(snr, abs=0.05)
        noise = mixed.astype(np.float64) - speech
        assert 10 * np.log10(speech_power(speech) / np.mean(noise**2)) == pytest.approx(snr, abs=0.05)
        assert len(mixed) == len(speech) and mixed.dtype == np.float32


def test_speech_power_ignores_the_pauses() -> None:
    tone = (0.1 * np.sin(np.arange(16000) / 3.0)).astype(np.float32)
    assert speech_power(with_pauses(tone, 2.0, 2.0)) == pytest.approx(speech_power(tone), rel=0.05)


def test_pink_noise_falls_three_db_per_octave() -> None:
    noise = pink_noise(16000 * 8, np.random.default_rng(1))
    power = np.abs(np.fft.rfft(noise)) ** 2
    freqs = np.fft.rfftfreq(len(noise), 1 / 16000)

    def band(lo: float) -> float:
        return float(power[(freqs >= lo) & (freqs < 2 * lo)].mean())

    for lo in (250.0, 500.0, 1000.0, 2000.0):
        assert 10 * np.log10(band(lo) / band(2 * lo)) == pytest.approx(3.0, abs=0.5)
    assert np.sqrt(np.mean(noise**2)) == pytest.approx(1.0, rel=1e-3)


def test_voices_differ_in_pitch_and_tempo() -> None:
    assert len({(v.pitch, v.tempo) for v in VOICES}) == len(VOICES) >= 3
    tone = np.sin(2 * np.pi * 200 * np.arange(22050) / 22050).astype(np.float32)
    for voice in VOICES:
        audio = voice.render(lambda text, length_scale: (tone * 0 + tone, 22050), "x")
        # the same samples read as if recorded at rate * pitch: duration divided by pitch, frequency times pitch
        assert len(audio) == pytest.approx(16000 / voice.pitch, rel=0.01)
        peak = np.argmax(np.abs(np.fft.rfft(audio))) * 16000 / len(audio)
        assert peak == pytest.approx(200 * voice.pitch, rel=0.02)


def test_non_speech_clips_are_quiet_enough_and_varied() -> None:
    clips = non_speech_clips(np.random.default_rng(2))
    assert len(clips) >= 6 and all(len(a) == 48000 and a.dtype == np.float32 for a in clips.values())
    assert all(float(np.max(np.abs(a))) <= 1.0 for a in clips.values())


# --- a small run on the real models (the full benchmark is run by hand: edgevoice bench --quality --full) -------------


@pytest.mark.models
@pytest.mark.slow
def test_quality_benchmark_on_a_few_questions(store) -> None:  # type: ignore[no-untyped-def]
    from edgevoice.bench.quality import QualityOptions, run_quality
    from edgevoice.config import Config

    by_id = {q.id: q for q in IN_KNOWLEDGE + OUT_OF_KNOWLEDGE}
    questions = tuple(by_id[i] for i in ("adult-price", "whale-floor", "football", "capital"))
    options = QualityOptions(
        questions=questions, voices=VOICES[:1], conditions=(None, 10.0), compare_prompt=False, round_trip_draws=3
    )
    options = options.defaults_only(Config())
    report = run_quality(Config(), store, options)

    assert report["snr_measured_db"]["10 dB"][0] == pytest.approx(10.0, abs=0.1)
    (recognition,) = report["recognition"]
    assert recognition["no_speech_found"] == 0
    assert recognition["wer_percent"]["clean"] <= 20.0, recognition
    assert recognition["wer_percent"]["10 dB"] <= 35.0, recognition
    (answers,) = report["answers"]
    text = answers["by_input"]["text"]
    # the two questions far outside the knowledge never reach the model: an exact "don't know"
    assert text["dont_know_percent"] == 100.0 and text["gated_out_of_knowledge_percent"] == 100.0
    assert answers["replies_with_markup"] == 0 and answers["reply_sentences_max"] <= 2
    assert 3 <= answers["reply_words_mean"] <= 40
    (round_trip,) = report["round_trip"]
    assert round_trip["replies"] >= 2 and round_trip["draws"] == 3 and round_trip["wer_percent"] <= 25.0, round_trip
    per_draw = round_trip["draw_wer_percent"]  # each rendering's WER; the overall one lies within them
    assert len(per_draw) == 3 and min(per_draw) - 0.01 <= round_trip["wer_percent"] <= max(per_draw) + 0.01
    on, off = report["phantoms"]
    assert (on["setup"], off["setup"]) == ("filters on", "filters off")
    assert len(on["with_text"]) <= len(off["with_text"])
    table = format_quality(report)
    assert "Recognition" in table and "Targets" in table and "right facts" in table
