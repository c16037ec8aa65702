"""Smart Turn v3.2 with edgevoice's own features: identical to the reference front end, and the real model tells a
finished question from one cut off mid-sentence."""

from __future__ import annotations

import importlib.util
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.engines.smart_turn_onnx import SmartTurn, smart_turn_features
from edgevoice.models.distributions import fetch_distribution
from edgevoice.models.manifest import load_manifest
from edgevoice.paths import default_download_cache

REFERENCE = "pipecat/audio/turn/smart_turn/_whisper_features.py"


@pytest.fixture(scope="module")
def reference_features(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """pipecat's numpy feature extractor for Smart Turn v3 (BSD-2-Clause), taken from the pinned wheel for this test."""
    (source,) = load_manifest().get("smart-turn-v3.2").sources
    wheel = fetch_distribution(source, default_download_cache(), progress=False)
    path = tmp_path_factory.mktemp("pipecat") / "whisper_features.py"
    with zipfile.ZipFile(wheel) as zf:
        path.write_bytes(zf.read(REFERENCE))
    spec = importlib.util.spec_from_file_location("pipecat_whisper_features", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_whisper_log_mel_features


@pytest.mark.parametrize("seconds", [0.7, 3.0, 9.5])
def test_features_match_the_reference_front_end(reference_features, seconds: float) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    n = int(seconds * RATE)
    audio = (0.2 * np.sin(2 * np.pi * 220 * np.arange(n) / RATE) + 0.05 * rng.standard_normal(n)).astype(np.float32)
    ours = smart_turn_features(audio)
    # the reference takes the last 8 s, left-padded with silence, as pipecat's analyzer prepares them
    window = audio[-8 * RATE :]
    padded = np.concatenate([np.zeros(8 * RATE - len(window), np.float32), window])
    theirs = reference_features(padded, do_normalize=True)
    assert ours.shape == (1, 80, 800)
    np.testing.assert_allclose(ours[0], theirs, atol=2e-4)


@pytest.mark.models
def test_a_finished_question_is_complete_and_a_cut_one_is_less_so(
    store,
    speak: Callable[[str], np.ndarray],  # type: ignore[no-untyped-def]
) -> None:
    model = SmartTurn(Path(store.path("smart-turn-v3.2")))
    complete = model.probability_complete(speak("How much is a ticket for a student?"))
    cut = model.probability_complete(speak("How much is a ticket for a student and")[: int(2.0 * RATE)])
    assert complete > 0.5, complete
    assert cut < complete, (cut, complete)
