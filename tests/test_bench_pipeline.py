"""`edgevoice bench --pipeline`'s summary of one configuration: every turn told by who answered it, and the language
model's turns given their own median (direct answers and model replies take very different paths)."""

from __future__ import annotations

from dataclasses import replace

from edgevoice.bench.pipeline import Variant, answered_by, format_pipeline, summarize
from edgevoice.config import Config
from edgevoice.kiosk.grounding import Kiosk
from edgevoice.selftest.session import SessionResult


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
