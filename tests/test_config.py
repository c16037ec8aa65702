from pathlib import Path

import pytest

from edgevoice.config import Config
from edgevoice.config.load import config_from_dict, load_config
from edgevoice.errors import ConfigError


def test_defaults_need_no_file() -> None:
    config = load_config(None)
    assert config == Config()
    assert config.llm.max_tokens > 0
    assert "Harbour City Museum" in config.kiosk.persona
    assert "14 euros" in config.knowledge_text()


def test_values_are_read_and_typed(tmp_path: Path) -> None:
    path = tmp_path / "edgevoice.toml"
    path.write_text('[llm]\nthreads = 1\ntemperature = 0\n[kiosk]\nname = "Max"\n')
    config = load_config(path)
    assert config.llm.threads == 1
    assert config.llm.temperature == 0.0 and isinstance(config.llm.temperature, float)
    assert config.kiosk.name == "Max"
    assert config.source == str(path)


@pytest.mark.parametrize(
    ("raw", "fragments"),
    [
        ({"llm": {"threads": 0}}, ["llm.threads = 0", "between 1 and 64"]),
        ({"llm": {"threads": "two"}}, ["llm.threads = 'two'", "whole number"]),
        ({"vad": {"threshold": 1.5}}, ["vad.threshold = 1.5", "between 0.05 and 0.95"]),
        ({"asr": {"audio_ctx": 4000}}, ["asr.audio_ctx = 4000", "between 0 and 1500"]),
        ({"llm": {"threads": True}}, ["llm.threads = True", "whole number"]),
        ({"kiosk": {"persona": 3}}, ["kiosk.persona = 3", "string"]),
        ({"llm": {"thread": 2}}, ["llm.thread", "unknown key", "threads"]),
        ({"nonsense": {}}, ["nonsense", "unknown key", "kiosk"]),
        ({"llm": 5}, ["llm = 5", "table"]),
    ],
)
def test_bad_values_name_key_value_and_allowed(raw: dict[str, object], fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict(raw)
    assert err.value.code == "config_invalid"
    for fragment in fragments:
        assert fragment in str(err.value)


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm\nthreads = 2")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)


def test_knowledge_file_replaces_inline_text(tmp_path: Path) -> None:
    facts = tmp_path / "facts.md"
    facts.write_text("The shop sells umbrellas.")
    config = config_from_dict({"kiosk": {"knowledge_file": str(facts)}})
    assert config.knowledge_text() == "The shop sells umbrellas."
    missing = config_from_dict({"kiosk": {"knowledge_file": str(tmp_path / "nope.md")}})
    with pytest.raises(ConfigError, match=r"kiosk.knowledge_file = .*nope.md"):
        missing.knowledge_text()


def test_example_config_loads_and_matches_the_defaults() -> None:
    example = Path(__file__).resolve().parent.parent / "edgevoice.example.toml"
    config = load_config(example)
    assert config.models == Config().models
    assert config.llm == Config().llm
    assert config.asr == Config().asr
    assert config.tts == Config().tts
    assert config.vad == Config().vad
    assert config.audio == Config().audio
    assert config.endpointing == Config().endpointing
    assert config.review == Config().review
