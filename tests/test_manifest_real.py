"""The shipped model manifest, and (marked ``models``) the default models installed from it."""

from __future__ import annotations

import pytest

from edgevoice.models.formats import GgufInfo, check_format
from edgevoice.models.manifest import ROLES, load_manifest
from edgevoice.models.store import ModelStore

# The formats each role's engines expect for the main file of a model (asr: whisper.cpp's, Moonshine's).
ROLE_FORMAT = {
    "vad": {"onnx"},
    "turn": {"onnx"},
    "asr": {"ggml-whisper", "ort"},
    "llm": {"gguf"},
    "tts": {"onnx"},
    "embed": {"safetensors"},
}


def test_shipped_manifest_parses_and_covers_every_role() -> None:
    manifest = load_manifest()
    defaults = manifest.defaults()
    assert sorted(m.role for m in defaults) == sorted(ROLES)  # exactly one default per role
    assert {m.name for m in defaults} == {
        "silero-vad",
        "smart-turn-v3.2",
        "whisper-tiny.en",
        "qwen2.5-coder-0.5b-instruct-q4km",
        "piper-en_US-joe-medium",
        "all-minilm-l6-v2",
    }
    assert {"whisper-base", "qwen2.5-coder-1.5b-instruct-q4km"} <= set(manifest.names())
    for spec in manifest:
        assert spec.output().format in ROLE_FORMAT[spec.role], spec.name
        assert spec.license and spec.description, spec.name
        for pinned in [*(s.sha256 for s in spec.sources), *(o.sha256 for o in spec.outputs)]:
            assert len(set(pinned)) > 1, f"{spec.name}: placeholder sha256 {pinned}"
    piper = manifest.get("piper-en_US-joe-medium")
    assert [o.file for o in piper.outputs] == ["en_US-joe-medium.onnx", "en_US-joe-medium.onnx.json"]
    assert "CC0" in piper.license
    minilm = manifest.get("all-minilm-l6-v2")
    assert [o.format for o in minilm.outputs] == ["safetensors", "json", "json", "json"]
    assert "Apache-2.0" in minilm.license


@pytest.mark.models
def test_installed_default_models_verify() -> None:
    store = ModelStore()
    defaults = [m.name for m in store.manifest.defaults()]
    failures = [(r.file, r.status, r.expected_sha256, r.actual_sha256) for r in store.verify(defaults) if not r.ok]
    assert failures == []
    for name in defaults:
        spec = store.manifest.get(name)
        for out in spec.outputs:
            path = store.path(name, out.file)
            assert path.stat().st_size == out.size
    llm = check_format(store.path("qwen2.5-coder-0.5b-instruct-q4km"), "gguf")
    assert isinstance(llm, GgufInfo) and llm.architecture == "qwen2" and llm.has_chat_template


@pytest.mark.models
def test_an_installed_language_models_name_says_what_its_header_says() -> None:
    """A Coder model is called so: the name a config holds says what the model is."""
    store = ModelStore()
    checked = []
    for spec in store.manifest.by_role("llm"):
        if not (store.models_dir / spec.output().file).is_file():
            continue  # an optional model not installed here
        checked.append(spec.name)
        info = check_format(store.path(spec.name), "gguf")
        assert isinstance(info, GgufInfo) and info.name, spec.name
        header = info.name.lower().replace(" ", "-")  # "Qwen2.5 Coder 0.5B Instruct AWQ"
        assert ("coder" in spec.name) == ("coder" in header), (spec.name, info.name)
        assert spec.name.removesuffix("-q4km") in header, (spec.name, info.name)
    assert store.manifest.default_for("llm").name in checked
