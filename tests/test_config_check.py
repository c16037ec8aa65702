"""`edgevoice config --check` and `--print`: every problem before a start, each naming its file, model, checksum,
device or language; the effective configuration with secrets masked."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from edgevoice import cli
from edgevoice.config import Config
from edgevoice.config.load import config_from_dict, load_config
from edgevoice.config_check import MASK, check_config, effective_config, masked
from edgevoice.models.manifest import load_manifest


class FakePortAudio:
    """The part of ``pyaudio.PyAudio`` that finding a device uses: named devices, an optional default of each kind."""

    def __init__(self, inputs: list[str], outputs: list[str], *, defaults: bool = True) -> None:
        self.devices = [(name, 1, 0) for name in inputs] + [(name, 0, 2) for name in outputs]
        self.defaults = defaults
        self.terminated = False

    def get_device_count(self) -> int:
        return len(self.devices)

    def get_device_info_by_index(self, index: int) -> dict[str, Any]:
        name, ins, outs = self.devices[index]
        return {
            "index": index,
            "name": name,
            "hostApi": 0,
            "maxInputChannels": ins,
            "maxOutputChannels": outs,
            "defaultSampleRate": 48000.0,
        }

    def get_host_api_info_by_index(self, _index: int) -> dict[str, Any]:
        return {"name": "ALSA"}

    def _default(self, channels: int) -> dict[str, Any]:
        for index, device in enumerate(self.devices):
            if self.defaults and device[channels] > 0:
                return self.get_device_info_by_index(index)
        raise OSError("No Default Device Available")

    def get_default_input_device_info(self) -> dict[str, Any]:
        return self._default(1)

    def get_default_output_device_info(self) -> dict[str, Any]:
        return self._default(2)

    def terminate(self) -> None:
        self.terminated = True


def own_models(tmp_path: Path) -> dict[str, str]:
    """``[models]`` pointing at one's own model files (present, so found; no checksum pinned for them)."""
    files = {"vad": "vad.onnx", "turn": "turn.onnx", "asr": "ggml-small.bin", "llm": "llm.gguf", "tts": "voice.onnx"}
    for name in [*files.values(), "voice.onnx.json"]:
        (tmp_path / name).write_bytes(b"model")
    return {key: str(tmp_path / name) for key, name in files.items()}


def good_config(tmp_path: Path, **sections: dict[str, Any]) -> Config:
    raw: dict[str, Any] = {"models": own_models(tmp_path), "kiosk": {"semantic": False}}
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


def messages(config: Config, pa: FakePortAudio | None = None) -> list[str]:
    report = check_config(config, devices=pa is not None, portaudio=lambda: pa)
    return [e.message for e in report.errors]


def test_a_config_whose_models_knowledge_and_devices_exist_passes(tmp_path: Path) -> None:
    pa = FakePortAudio(["USB Mic"], ["Speaker"])
    report = check_config(good_config(tmp_path), portaudio=lambda: pa)
    assert report.ok and report.errors == [] and pa.terminated
    named = good_config(tmp_path, audio={"input_device": "usb mic", "output_device": "1"})
    assert messages(named, FakePortAudio(["USB Mic"], ["Speaker"])) == []


def test_every_problem_is_reported_at_once_each_naming_its_thing(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    vad = load_manifest().models["silero-vad"].output()
    (models / vad.file).write_bytes(b"not the model")  # a corrupt manifest model
    config = config_from_dict(
        {
            "models": {"dir": str(models), "llm": str(tmp_path / "missing.gguf")},
            "asr": {"language": "de"},
            "kiosk": {"knowledge_file": str(tmp_path / "venue.md")},
            "audio": {"input_device": "Headset"},
        }
    )
    found = messages(config, FakePortAudio(["USB Mic"], [], defaults=False))
    turn = load_manifest().models["smart-turn-v3.2"].output()

    def one(*parts: str) -> str:
        hits = [m for m in found if all(p in m for p in parts)]
        assert len(hits) == 1, (parts, found)
        return hits[0]

    one("kiosk.knowledge_file", "venue.md", "cannot read it")
    one("models.vad = 'silero-vad'", str(models / vad.file), "fails its checksum", f"expected sha256 {vad.sha256}")
    one("models.turn = 'smart-turn-v3.2'", str(models / turn.file), "not installed", turn.sha256)
    one("models.llm", "missing.gguf", "no such file")
    one("asr.language = 'de'", "whisper-tiny.en", "English-only")
    one("audio.input_device = 'Headset'", "matches no input device", "'USB Mic'")
    one("audio.output_device = ''", "no default output device")
    assert not any("models.embed" in m for m in found)  # missing: a warning (semantic matching falls back)


def test_a_missing_embedding_model_is_a_warning_only(tmp_path: Path) -> None:
    config = good_config(tmp_path, kiosk={"semantic": True}, models={"embed": str(tmp_path / "minilm")})
    report = check_config(config, devices=False)
    assert report.ok and any("models.embed" in w and "minilm" in w for w in report.warnings), report.warnings


def test_the_voice_needs_its_config_beside_it(tmp_path: Path) -> None:
    config = good_config(tmp_path)
    (tmp_path / "voice.onnx.json").unlink()
    assert messages(config) == [f"models.tts = {str(tmp_path / 'voice.onnx')!r}: no {tmp_path / 'voice.onnx.json'} "
                                "(the voice's config, beside its model)"]  # fmt: skip


@pytest.mark.parametrize(
    ("asr", "language", "error"),
    [
        ("ggml-small.bin", "de", None),  # a multilingual model, by its name (the file is no real ggml here)
        ("ggml-small.en.bin", "de", "English-only"),
        ("ggml-small.en.bin", "auto", "English-only"),
        ("ggml-small.en.bin", "en", None),
        ("ggml-small.bin", "xx", "not a language Whisper knows"),
    ],
)
def test_the_language_must_fit_the_recognizer(tmp_path: Path, asr: str, language: str, error: str | None) -> None:
    models = dict(own_models(tmp_path), asr=str(tmp_path / "missing" / asr))  # not there: judged by its name
    config = config_from_dict({"models": models, "kiosk": {"semantic": False}, "asr": {"language": language}})
    language_errors = [m for m in messages(config) if m.startswith("asr.language")]
    if error is None:
        assert language_errors == []
    else:
        assert len(language_errors) == 1 and error in language_errors[0] and repr(language) in language_errors[0]


def test_the_command_exits_2_and_prints_every_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "edgevoice.toml"
    path.write_text(f'[models]\nllm = "{tmp_path}/a.gguf"\ntts = "{tmp_path}/v.onnx"\n[asr]\nlanguage = "fr"\n')
    assert cli.main(["config", "--check", "--no-devices", "--config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "models.llm" in err and "models.tts" in err and "asr.language = 'fr'" in err
    assert f"error(s) in {path}" in err

    assert cli.main(["config", "--no-devices", "--json", "--config", str(path)]) == 2
    out, _ = capsys.readouterr()
    report = json.loads(out)  # the whole of stdout is one JSON object
    assert report["ok"] is False and report["source"] == str(path)
    assert [w for w in report["warnings"] if "models.embed" in w], report["warnings"]  # not installed in this tier
    codes = {e["code"] for e in report["errors"]}
    assert {"model_missing", "config_invalid"} <= codes
    assert any("asr.language = 'fr'" in e["message"] for e in report["errors"])


def test_print_shows_the_effective_configuration_as_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "edgevoice.toml"
    path.write_text('[llm]\nthreads = 3\n[kiosk]\nname = "Zoe"\n')
    assert cli.main(["config", "--print", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    printed = tomllib.loads(out)
    assert config_from_dict(printed) == load_config(path)  # every default filled in, and it loads back the same
    assert printed["llm"]["threads"] == 3 and printed["llm"]["n_ctx"] == Config().llm.n_ctx

    assert cli.main(["config", "--print", "--json", "--config", str(path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["config"]["kiosk"]["name"] == "Zoe" and "errors" not in document  # --print alone checks nothing


def test_secrets_are_masked_and_key_files_shown() -> None:
    tables = {"llm": {"api_key": "sk-123", "api_key_file": "/etc/edgevoice/key", "token": "", "threads": 2}}
    assert masked(tables) == {"llm": {"api_key": MASK, "api_key_file": "/etc/edgevoice/key", "token": "", "threads": 2}}
    assert "source" not in effective_config(Config())


def test_the_installed_default_models_check_out_and_the_real_recognizer_is_english_only(store: Any) -> None:
    """On the real models (the models tier): the defaults pass, and the language is judged from the ggml file."""
    config = config_from_dict({"models": {"dir": str(store.models_dir)}})
    report = check_config(config, devices=False)
    assert report.ok, [e.message for e in report.errors]
    german = check_config(config_from_dict({"models": {"dir": str(store.models_dir)}, "asr": {"language": "de"}}),
                          devices=False)  # fmt: skip
    [error] = german.errors
    assert error.message.startswith("asr.language = 'de': models.asr = 'whisper-tiny.en' (ggml-tiny.en.bin)")


def test_the_devices_are_found_on_a_real_sound_server(pulse: Any) -> None:
    """PortAudio through ALSA's pulse plugin to a private PulseAudio server (the audio tier)."""
    report = check_config(config_from_dict({"audio": {"input_device": "pulse", "output_device": "Headset"}}))
    device_errors = [e.message for e in report.errors if e.code.startswith("audio_device")]
    assert len(device_errors) == 1, device_errors
    assert device_errors[0].startswith("audio.output_device = 'Headset': output device 'Headset' matches no")
    assert "'pulse'" in device_errors[0]  # the devices there are, to choose from


SEVEN_BAD_VALUES = """\
[llm]
threads = 0
n_ctx = "large"
[vad]
threshold = 2.0
[asr]
max_seconds = 99
[kiosk]
max_sentences = 0
direct_answer = true
[tts]
provider = "tpu"
"""
SEVEN_KEYS = [
    "llm.threads",
    "llm.n_ctx",
    "vad.threshold",
    "asr.max_seconds",
    "kiosk.max_sentences",
    "kiosk.direct_answer",
    "tts.provider",
]


def test_every_value_error_of_a_file_is_reported_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``threads = 0`` used to hide the six errors after it: each is listed with its key, in the file's order."""
    path = tmp_path / "edgevoice.toml"
    path.write_text(SEVEN_BAD_VALUES)
    assert cli.main(["config", "--check", "--no-devices", "--config", str(path)]) == 2
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("edgevoice: error: [config_invalid] ")]
    assert [line.split("] ", 1)[1].split(" ")[0].rstrip(":") for line in lines] == SEVEN_KEYS, err
    assert "kiosk.direct_answer: unknown key (allowed here: " in err and f"7 error(s) in {path}" in err
    assert out == ""

    assert cli.main(["config", "--json", "--config", str(path)]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["source"] == str(path)
    assert [e["key"] for e in report["errors"]] == SEVEN_KEYS
    assert {e["code"] for e in report["errors"]} == {"config_invalid"}
    assert report["errors"][0]["message"] == "llm.threads = 0: must be between 1 and 64"


def test_every_other_command_stops_at_load_with_every_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "edgevoice.toml"
    path.write_text(SEVEN_BAD_VALUES)
    assert cli.main(["say", "Hello.", "--out", str(tmp_path / "hello.wav"), "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"edgevoice: error: [config_invalid] 7 errors in {path}:" in err
    assert all(f"\n  {key}" in err for key in SEVEN_KEYS), err

    assert cli.main(["run", "--json", "--config", str(path)]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "config_invalid" and [e["key"] for e in error["errors"]] == SEVEN_KEYS


def test_rules_between_keys_are_reported_beside_the_values(tmp_path: Path) -> None:
    from edgevoice.errors import ConfigErrors

    with pytest.raises(ConfigErrors) as caught:
        config_from_dict({"llm": {"backend": "openai", "threads": 0}, "tts": {"threads": "two"}})
    assert [e.key for e in caught.value.errors] == ["llm.threads", "tts.threads"]  # llm's own rule waits for its values
    with pytest.raises(ConfigErrors) as caught:
        config_from_dict({"llm": {"backend": "openai"}, "tts": {"threads": "two"}})
    assert [e.key for e in caught.value.errors] == ["llm", "tts.threads"]
    assert caught.value.errors[0].message.startswith("llm.base_url: must be set")


def test_only_missing_sound_devices_exit_69_as_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from edgevoice.audio import devices

    path = tmp_path / "edgevoice.toml"
    models = "\n".join(f'{key} = "{value}"' for key, value in own_models(tmp_path).items())
    path.write_text(f"[models]\n{models}\n[kiosk]\nsemantic = false\n")
    monkeypatch.setattr(devices, "start_portaudio", lambda: FakePortAudio([], [], defaults=False))
    assert cli.main(["config", "--config", str(path)]) == 69  # the sound server may come later: not 2
    assert "[audio_device] audio.input_device = ''" in capsys.readouterr().err
    assert cli.main(["config", "--config", str(path), "--json"]) == 69
    assert {e["code"] for e in json.loads(capsys.readouterr().out)["errors"]} == {"audio_device"}

    path.write_text(path.read_text() + '[asr]\nlanguage = "xx"\n')  # and an error a restart will not mend: 2
    assert cli.main(["config", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "[audio_device] audio.input_device" in err and "[config_invalid] asr.language = 'xx'" in err


def test_an_answer_longer_than_one_reply_may_be_is_warned_of(tmp_path: Path) -> None:
    """A direct read-out is held to the reply bounds like any reply: the operator hears of an answer that would be
    cut (a price list of many clauses) before a visitor hears half of it."""
    prices = "Adults pay 14 euros, " + ", ".join(f"group {n} pays {n} euros" for n in range(1, 12)) + "."
    knowledge = f"How much are tickets? {prices}\n\nWhen do you open? At nine, every day.\n"
    report = check_config(good_config(tmp_path, kiosk={"knowledge": knowledge}), devices=False)
    [warning] = [w for w in report.warnings if "longer than one reply" in w]
    assert "entry 1 ('How much are tickets?')" in warning and "max_clauses = 8" in warning and report.ok
    roomy = good_config(tmp_path, kiosk={"knowledge": knowledge, "max_clauses": 20})
    assert not [w for w in check_config(roomy, devices=False).warnings if "longer than one reply" in w]


def test_the_check_notes_that_the_knowledge_is_not_compiled_without_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "edgevoice.toml"
    path.write_text(f'[models]\ndir = "{tmp_path}/models"\n[kiosk]\nsemantic = false\n')
    cli.main(["config", "--no-devices", "--json", "--config", str(path)])
    report = json.loads(capsys.readouterr().out)
    assert [n for n in report["notes"] if n.startswith("the knowledge is not compiled: no model")], report["notes"]
    assert not [w for w in report["warnings"] if "compile" in w]  # a note, not a warning nor an error
    assert not [e for e in report["errors"] if "compile" in e["message"]]
    cli.main(["config", "--no-devices", "--config", str(path)])
    assert "edgevoice: note: the knowledge is not compiled" in capsys.readouterr().err
