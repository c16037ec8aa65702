"""The spoken venue benchmark's voices (:mod:`edgevoice.bench.voices`): the default set is none of the kiosk's own,
Festival renders 16 kHz speech that Whisper hears back, a missing Festival is named; and the table's per-voice rows."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE
from edgevoice.bench.quality_report import format_venues
from edgevoice.bench.scoring import word_error_rate
from edgevoice.bench.venue_quality import venue_rows
from edgevoice.bench.voices import DEFAULT_VOICES, FESTIVAL, voice_names, voice_speaker
from edgevoice.config import Config
from edgevoice.errors import ConfigError

SENTENCE = "Where can I leave my coat while I visit the gallery?"

needs_festival = pytest.mark.skipif(shutil.which("text2wave") is None, reason="Festival is not installed")


def test_default_voices_are_three_or_more_and_none_is_the_kiosks() -> None:
    assert len(DEFAULT_VOICES) >= 3 and set(DEFAULT_VOICES) <= set(voice_names())
    kiosk_voice = Config().models.tts
    assert kiosk_voice.startswith("piper-")
    assert not any(v.startswith("piper-") for v in DEFAULT_VOICES)  # the kiosk's voice, shifted or not
    assert len({v.split("-")[0] for v in DEFAULT_VOICES}) >= 3  # three synthesis methods, not one voice varied


def test_an_unknown_voice_is_refused_with_the_names() -> None:
    with pytest.raises(ConfigError, match="festival-kal"):
        voice_speaker("festival-nobody")


def test_festival_missing_is_named_with_its_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ConfigError, match="apt-get install festival festvox-kallpc16k"):
        voice_speaker("festival-kal")(SENTENCE)


@needs_festival
def test_a_festival_voice_that_is_not_installed_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FESTIVAL, "kal", ("no_such_voice", "festvox-nothing"))
    with pytest.raises(ConfigError, match=r"no_such_voice .*festvox-nothing"):
        voice_speaker("festival-kal")(SENTENCE)


@needs_festival
@pytest.mark.parametrize("name", [f"festival-{v}" for v in FESTIVAL])
def test_festival_speaks_16_khz_float_audio_of_a_sentences_length(name: str) -> None:
    audio = voice_speaker(name)(SENTENCE)
    assert audio.dtype == np.float32 and audio.ndim == 1
    seconds = len(audio) / SAMPLE_RATE  # 11 words: 2.5 to 5 s at a speaking pace of 130 to 260 words a minute
    assert 2.5 <= seconds <= 5.5, seconds
    assert 0.05 <= float(np.max(np.abs(audio))) <= 1.0
    spectrum = np.abs(np.fft.rfft(audio)) ** 2
    freqs = np.fft.rfftfreq(len(audio), 1 / SAMPLE_RATE)
    assert spectrum[(freqs > 100) & (freqs < 4000)].sum() > 0.8 * spectrum.sum()  # speech band, at 16 kHz


@needs_festival
@pytest.mark.models
@pytest.mark.parametrize("name", [f"festival-{v}" for v in FESTIVAL])
def test_whisper_hears_festival_back(store: Any, name: str) -> None:
    from edgevoice.bench.audio_set import with_pauses
    from edgevoice.bench.quality import open_recognizer

    config = Config()
    rec = open_recognizer(store, config, config.models.asr)
    try:
        heard = rec.transcribe(with_pauses(voice_speaker(name)(SENTENCE))).text
    finally:
        rec.close()
    assert word_error_rate(SENTENCE, heard) <= 0.3, heard


def _items(voice: str, kinds_right: Sequence[tuple[str, bool]], split: str = "test") -> list[dict[str, Any]]:
    return [
        {"voice": voice, "input": "written" if voice == "written" else "spoken clean", "split": split, "kind": kind,
         "right": right, "invented": []}
        for kind, right in kinds_right
    ]  # fmt: skip


def test_rows_give_every_voice_and_all_voices_together() -> None:
    items = (
        _items("written", [("fact", True), ("out", True)])
        + _items("hibari-heart", [("fact", True), ("out", True)])
        + _items("festival-kal", [("fact", False), ("out", True)])
    )
    rows = venue_rows("library", items)
    by_voice = {(r["input"], r["voice"]): r for r in rows}
    assert list(by_voice) == [
        ("written", "written"),
        ("spoken clean", "all"),
        ("spoken clean", "hibari-heart"),
        ("spoken clean", "festival-kal"),
    ]
    assert by_voice["spoken clean", "all"]["right_facts_percent"] == 50.0
    assert by_voice["spoken clean", "hibari-heart"]["right_facts_percent"] == 100.0
    assert by_voice["spoken clean", "festival-kal"]["right_facts_percent"] == 0.0
    assert by_voice["spoken clean", "festival-kal"]["dont_know_percent"] == 100.0
    assert {r["split"] for r in rows} == {"test"}  # no dev questions: no dev rows

    one_voice = venue_rows("library", _items("festival-kal", [("fact", True)]))
    assert [r["voice"] for r in one_voice] == ["all"]  # one voice: its row would repeat the pooled one

    table = format_venues({"voices": ["hibari-heart", "festival-kal"], "conditions": ["clean"], "rows": rows,
                           "models": {"asr": "a", "llm": "b"}, "seconds": 1.0})  # fmt: skip
    lines = [line.split() for line in table.splitlines()]
    assert ["library", "test", "spoken", "clean", "festival-kal", "0.0", "%", "100.0", "%"] in [
        line[:9] for line in lines
    ]
