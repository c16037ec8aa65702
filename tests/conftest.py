"""Shared fixtures, and the test tiers: every test is marked ``unit``, ``models``, ``audio`` or ``system``.

A test is put in the ``models`` or ``audio`` tier by the fixtures it uses (:data:`TIER_FIXTURES`), or by a mark of its
own where its body loads a model or starts a sound server itself; what is left is ``unit``, and runs with no model
directory and no download cache to read (``scripts/test --quick`` runs that tier alone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from rapidfuzz.distance import LCSseq

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.files import to_model_rate
from edgevoice.bench.scoring import word_error_rate as wer  # noqa: F401  (the tests' word error rate)
from edgevoice.bench.scoring import words
from edgevoice.config import Config
from edgevoice.interfaces import Engines
from tests.conftest_audio import pulse  # noqa: F401  (fixture)

NEEDS_MORE = ("models", "audio", "system", "browser")
"""The tiers above ``unit``: a test marked with any of them is not a unit test."""
TIER_FIXTURES = {
    "models": {
        # the installed default models
        "store",
        "engines",
        "speak",
        "minilm",
        "semantic",
        # model distributions from the download cache (fetched when missing)
        "ct2_tiny_dir",
        "ggml_tiny",
        "ggml_base",
        "assets",
        "reference_features",
        "bundle",
    },
    "audio": {"pulse", "room"},
}
"""Fixtures that load models or start a PulseAudio server, by tier: a test that uses one, directly or through another
fixture, is in that tier."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tiers: those its fixtures need, and ``unit`` when it needs none."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for tier, fixtures in TIER_FIXTURES.items():
            if used & fixtures and item.get_closest_marker(tier) is None:
                item.add_marker(tier)
        if not any(item.get_closest_marker(tier) for tier in NEEDS_MORE):
            item.add_marker("unit")


@pytest.fixture(autouse=True)
def _no_configuration_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command run by a test finds no configuration of the machine it runs on (``$EDGEVOICE_CONFIG``): a
    developer's kiosk config must not change what a test sees."""
    monkeypatch.delenv("EDGEVOICE_CONFIG", raising=False)


@pytest.fixture(autouse=True)
def _unit_tests_find_no_models(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A unit test sees an empty models directory and download cache (paths nothing creates): one that reaches for
    an installed model fails here instead of passing only where the models happen to be installed."""
    if request.node.get_closest_marker("unit") is None:
        return
    nowhere = tmp_path_factory.getbasetemp() / "unit-tests-have-no-models"
    monkeypatch.setenv("EDGEVOICE_MODELS_DIR", str(nowhere / "models"))
    monkeypatch.setenv("EDGEVOICE_DOWNLOAD_CACHE", str(nowhere / "downloads"))


@pytest.fixture(scope="session")
def store():  # type: ignore[no-untyped-def]
    from edgevoice.models.store import ModelStore

    return ModelStore()


@pytest.fixture(scope="session")
def engines(store) -> Iterator[Engines]:  # type: ignore[no-untyped-def]
    from edgevoice.app import load_engines

    loaded, _ = load_engines(Config(), store)
    yield loaded
    loaded.close()


@pytest.fixture(scope="session")
def speak(store) -> Callable[[str], np.ndarray]:  # type: ignore[no-untyped-def]
    """Speech for a text at 16 kHz, made by the default voice without its sampling noise, so every test run hears
    exactly the same audio."""
    from edgevoice.engines.piper_onnx import PiperSynthesizer
    from edgevoice.models.configured import piper_files
    from edgevoice.reply.speech_text import normalize_for_speech

    tts = PiperSynthesizer(*piper_files(store, Config().models.tts), noise_scale=0.0, noise_w=0.0)

    def make(text: str) -> np.ndarray:
        audio = np.concatenate(list(tts.synthesize(normalize_for_speech(text))))
        return to_model_rate(audio, tts.sample_rate, SAMPLE_RATE)

    return make


def heard_share(reference: str, hypothesis: str) -> float:
    """Share of the reference's words found, in order, in the hypothesis (longest common subsequence): what was
    said and came through, with words the recognizer added (a looped tail on a recording) not counted against it."""
    ref = words(reference)
    return LCSseq.similarity(ref, words(hypothesis)) / max(1, len(ref))


def config_with_knowledge(tmp_path: Path, knowledge: bytes | None) -> Path:
    """A config file in ``tmp_path`` whose knowledge file holds ``knowledge`` (None: no such file), with stand-in
    model files of its own, so that ``edgevoice config --no-devices`` checks the knowledge alone, with no models
    installed."""
    path = tmp_path / "venue.md"
    if knowledge is not None:
        path.write_bytes(knowledge)
    config = tmp_path / "edgevoice.toml"
    models = {key: tmp_path / f"{key}.onnx" for key in ("vad", "turn", "asr", "llm", "tts")}
    for model in [*models.values(), tmp_path / "tts.onnx.json"]:
        model.write_bytes(b"model")
    tables = "".join(f'{key} = "{model}"\n' for key, model in models.items())
    config.write_text(f'[models]\n{tables}[kiosk]\nknowledge_file = "{path}"\nsemantic = false\n')
    return config
