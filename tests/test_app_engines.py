"""The config's mapping onto the engine adapters' constructors (:mod:`edgevoice.app_engines`): what a caller leaves out
comes from the config, what it names wins. The adapters are replaced by recorders; one test opens the real model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgevoice import app_engines
from edgevoice.config import Config
from edgevoice.config.load import config_from_dict
from edgevoice.models.store import ModelStore


class Recorder:
    """Stands in for an adapter class: keeps what it was built with."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {"llm": tmp_path / "m.gguf", "asr": tmp_path / "w.bin", "vad": tmp_path / "v.onnx"}
    paths["turn"] = tmp_path / "t.onnx"
    for path in paths.values():
        path.write_bytes(b"x")
    return paths


def configured(files: dict[str, Path], **tables: dict[str, Any]) -> Config:
    return config_from_dict({"models": {key: str(path) for key, path in files.items()}, **tables})


def test_the_llm_takes_the_config_and_each_override(
    monkeypatch: pytest.MonkeyPatch, files: dict[str, Path], tmp_path: Path
) -> None:
    import edgevoice.engines.llamacpp as llamacpp

    monkeypatch.setattr(llamacpp, "LlamaCppModel", Recorder)
    config = configured(
        files,
        llm={"n_ctx": 4096, "threads": 3, "n_batch": 64, "n_gpu_layers": 5, "seed": 7, "temperature": 0.4},
    )
    store = ModelStore(tmp_path)
    llm: Any = app_engines.open_llm(config, store)
    assert llm.args == (files["llm"],)
    assert llm.kwargs == {
        "n_ctx": 4096, "threads": 3, "n_batch": 64, "n_gpu_layers": 5, "seed": 7,
        "temperature": 0.4, "top_p": 0.9, "repeat_penalty": 1.1, "prefix_states": None,
    }  # fmt: skip
    other = tmp_path / "other.gguf"
    other.write_bytes(b"x")
    llm = app_engines.open_llm(
        config, store, name=str(other), threads=1, n_batch=512, n_gpu_layers=0, temperature=0.0, top_p=0.5
    )
    assert llm.args == (other,)
    assert llm.kwargs == {
        "n_ctx": 4096, "threads": 1, "n_batch": 512, "n_gpu_layers": 0, "seed": 7,
        "temperature": 0.0, "top_p": 0.5, "repeat_penalty": 1.1, "prefix_states": None,
    }  # fmt: skip


def test_the_recognizer_takes_the_config_and_can_drop_its_phantom_filters(
    monkeypatch: pytest.MonkeyPatch, files: dict[str, Path], tmp_path: Path
) -> None:
    import edgevoice.engines.whispercpp as whispercpp

    monkeypatch.setattr(whispercpp, "WhisperCppRecognizer", Recorder)
    config = configured(files, asr={"threads": 4, "audio_ctx": 768, "language": "de", "initial_prompt": "Zoo."})
    store = ModelStore(tmp_path)
    rec: Any = app_engines.open_recognizer(config, store)
    assert rec.args == (files["asr"],)
    assert rec.kwargs == {"threads": 4, "audio_ctx": 768, "language": "de", "initial_prompt": "Zoo."}
    rec = app_engines.open_recognizer(config, store, threads=2, audio_ctx=0, initial_prompt="", phantom_filters=False)
    assert rec.kwargs == {
        "threads": 2, "audio_ctx": 0, "language": "de", "initial_prompt": "",
        "no_speech_threshold": 1.0, "noise_flatness": None, "phantom_phrases": (),
    }  # fmt: skip


def test_the_vad_and_the_turn_model_take_their_threads(
    monkeypatch: pytest.MonkeyPatch, files: dict[str, Path], tmp_path: Path
) -> None:
    import edgevoice.engines.silero_onnx as silero
    import edgevoice.engines.smart_turn_onnx as smart_turn

    monkeypatch.setattr(silero, "SileroVad", Recorder)
    monkeypatch.setattr(smart_turn, "SmartTurn", Recorder)
    config, store = configured(files, vad={"threads": 3}), ModelStore(tmp_path)
    vad: Any = app_engines.open_vad(config, store)
    assert (vad.args, vad.kwargs) == ((files["vad"],), {"threads": 3})
    assert app_engines.open_vad(config, store, threads=1).kwargs == {"threads": 1}  # type: ignore[attr-defined]
    turn: Any = app_engines.open_turn_model(config, store)
    assert (turn.args, turn.kwargs) == ((files["turn"],), {"threads": 1})


def test_the_kiosk_voice_takes_the_config_and_the_plain_voice_its_own_settings(
    monkeypatch: pytest.MonkeyPatch, files: dict[str, Path], tmp_path: Path
) -> None:
    import edgevoice.engines.piper_onnx as piper

    monkeypatch.setattr(piper, "PiperSynthesizer", Recorder)
    onnx = tmp_path / "voice.onnx"
    onnx.write_bytes(b"x")
    tts = {"threads": 2, "length_scale": 1.2, "sentence_silence_ms": 300, "provider": "cuda"}
    config, store = configured({**files, "tts": onnx}, tts=tts), ModelStore(tmp_path)
    voice: Any = app_engines.open_voice(config, store)
    assert (voice.args, voice.kwargs) == ((onnx, tmp_path / "voice.onnx.json"), tts)
    voice = app_engines.open_voice(config, store, files=(onnx, tmp_path / "c.json"), sentence_silence_ms=0)
    assert (voice.args, voice.kwargs) == ((onnx, tmp_path / "c.json"), {**tts, "sentence_silence_ms": 0})
    plain: Any = app_engines.open_plain_voice(config, store, length_scale=0.9, noise_scale=0.0, noise_w=0.0)
    assert plain.kwargs == {"threads": 1, "length_scale": 0.9, "noise_scale": 0.0, "noise_w": 0.0, "provider": "cpu"}


def test_no_wake_word_detector_outside_wake_word_mode() -> None:
    assert app_engines.open_wake_word(Config()) is None


@pytest.mark.models
def test_the_configured_llm_opens_and_answers(store: ModelStore) -> None:
    from edgevoice.events import ChatMessage

    llm = app_engines.open_llm(Config(), store, threads=1)
    try:
        reply = "".join(llm.stream_reply([ChatMessage("user", "Say yes.")], max_tokens=4))
    finally:
        llm.close()
    assert reply.strip()
