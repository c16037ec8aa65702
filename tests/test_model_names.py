"""A model renamed in the manifest: its former names (``formerly``) still load the same files, with a warning, so a
kiosk whose config names a model the old way starts after an upgrade; ``config --check`` says what to write."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from edgevoice.config import Config
from edgevoice.config.load import load_config
from edgevoice.config_check import check_config
from edgevoice.errors import ModelError
from edgevoice.models.configured import resolve
from edgevoice.models.manifest import load_manifest, parse_manifest
from tests.test_model_store import new_store, world  # noqa: F401  (fixture)

RENAMED = {
    "qwen2.5-0.5b-instruct-q4km": "qwen2.5-coder-0.5b-instruct-q4km",
    "qwen2.5-1.5b-instruct-q4km": "qwen2.5-coder-1.5b-instruct-q4km",
}
"""The language models' names before 2026-12-07, which hid that they are the Coder models, and their names now."""


def test_the_shipped_manifest_keeps_the_coder_models_former_names() -> None:
    manifest = load_manifest()
    for old, new in RENAMED.items():
        assert manifest.find(old) is manifest.find(new) is manifest.models[new]
        assert old not in manifest.names()  # listed once, by the name that says what it is
        assert new in (manifest.former_name(old) or "")
    assert Config().models.llm == "qwen2.5-coder-0.5b-instruct-q4km"
    assert manifest.find("qwen2.5-7b-instruct") is None and manifest.former_name("silero-vad") is None


def test_a_former_name_loads_the_same_file_with_a_warning(
    world: SimpleNamespace,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    world.data["models"]["chunky"]["formerly"] = ["old-chunky"]
    store = new_store(world, parse_manifest(world.data))
    store.install(["chunky"], progress=False, find_links=world.dists)
    with caplog.at_level(logging.WARNING):
        path = resolve(store, "llm", "old-chunky")
    assert path == world.models / "chunky.gguf" and path.read_bytes() == world.gguf
    [record] = [r for r in caplog.records if "old-chunky" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "models.llm" in record.getMessage() and "now called 'chunky'" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert resolve(store, "llm", "chunky") == path
        assert store.manifest.get("old-chunky").name == "chunky"  # `edgevoice models install old-chunky` too
    warned = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert len(warned) == 1 and "'old-chunky'" in warned[0]  # the current name warns of nothing


@pytest.mark.parametrize(
    ("formerly", "problem"),
    [
        ({"chunky": ["voice"]}, "'voice' is the name of another model"),
        ({"chunky": ["old"], "voice": ["old"]}, "'old' is already a former name of 'chunky'"),
        ({"chunky": "old"}, "expected a list of model names"),
    ],
)
def test_a_former_name_that_is_ambiguous_is_refused(
    world: SimpleNamespace,  # noqa: F811
    formerly: dict[str, object],
    problem: str,
) -> None:
    for name, names in formerly.items():
        world.data["models"][name]["formerly"] = names
    with pytest.raises(ModelError, match=".formerly: " + problem):
        parse_manifest(world.data)


def test_config_check_warns_of_a_former_name_and_checks_the_model(tmp_path: Path) -> None:
    path = tmp_path / "edgevoice.toml"
    path.write_text('[models]\nllm = "qwen2.5-0.5b-instruct-q4km"\n', encoding="utf-8")
    report = check_config(load_config(path), devices=False)
    [warning] = [w for w in report.warnings if "qwen2.5-0.5b-instruct-q4km" in w]
    assert warning.startswith("models.llm: ") and "'qwen2.5-coder-0.5b-instruct-q4km'" in warning
    # the unit tier has no models installed: the model is looked for, under its current name
    [missing] = [e for e in report.errors if "models.llm" in e.message]
    assert "edgevoice models install" in missing.message
