"""`--json` means the same on every command: one JSON object on stdout (``run``: one per line), nothing else there,
``{"error": {...}}`` and its code's exit status on a failure, a usage error included; `-v` and `--json` stand
anywhere on the line; one condition gives one exit status, whichever command meets it."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import pytest

from edgevoice import cli
from edgevoice.audio import streams
from edgevoice.audio.devices import DeviceInfo
from edgevoice.errors import EXIT_UNAVAILABLE, AudioDeviceError, ModelChecksumError
from edgevoice.live.cli import write_lines


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every leaf command of the parser tree by its full name ("models verify")."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {prefix.strip(): parser}
    found: dict[str, argparse.ArgumentParser] = {}
    for name, child in subs[0].choices.items():
        found |= commands(child, f"{prefix} {name}")
    return found


def test_every_command_takes_json_as_a_flag() -> None:
    leaves = commands(cli.build_parser())
    assert {"converse", "run", "devices", "say", "config", "bench", "tune", "selftest", "models list"} <= set(leaves)
    for name, parser in leaves.items():
        options = {o: a for a in parser._actions for o in a.option_strings}
        assert "--json" in options, f"edgevoice {name} has no --json"
        flag = options["--json"]
        assert flag.nargs == 0 and flag.const is True, f"edgevoice {name}: --json takes a value"


def test_no_sound_device_is_the_error_run_stops_with(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(streams, "list_devices", lambda: [])
    assert cli.main(["devices"]) == EXIT_UNAVAILABLE == 69  # as `run` and `config --check`: the unit retries on 69
    out, err = capsys.readouterr()
    assert out == "" and "edgevoice: error: [audio_device] no sound devices found" in err
    assert cli.main(["devices", "--json"]) == 69
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["code"] == "audio_device" and "no sound devices found" in err


def test_devices_as_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    mic = DeviceInfo(index=3, name="USB Mic", host_api="ALSA", max_input_channels=1, max_output_channels=0,
                     default_rate=48000)  # fmt: skip
    monkeypatch.setattr(streams, "list_devices", lambda: [mic])
    assert cli.main(["devices", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out) == {
        "devices": [
            {
                "index": 3,
                "name": "USB Mic",
                "host_api": "ALSA",
                "max_input_channels": 1,
                "max_output_channels": 0,
                "default_rate": 48000,
            }
        ]
    }
    assert cli.main(["devices"]) == 0
    assert "USB Mic" in capsys.readouterr().out


def test_a_failure_under_json_is_an_error_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["converse", str(tmp_path / "missing.wav"), "--json"]) == 2
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert error["code"] == "audio_missing" and "missing.wav" in error["message"]
    assert f"edgevoice: error: [{error['code']}]" in err  # and for people, on stderr as without --json


def test_models_verify_and_list_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["models", "verify", "silero-vad", "--json", "--dir", str(tmp_path)]) == 2  # model_missing's
    out = capsys.readouterr().out
    report = json.loads(out)
    assert report["ok"] is False and report["models_dir"] == str(tmp_path)
    [entry] = report["files"]
    assert entry["model"] == "silero-vad" and entry["status"] == "missing" and len(entry["expected_sha256"]) == 64

    assert cli.main(["models", "list", "--json", "--dir", str(tmp_path)]) == 0
    listed = json.loads(capsys.readouterr().out)
    vad = next(m for m in listed["models"] if m["name"] == "silero-vad")
    assert vad["state"] == "-" and vad["default"] is True and vad["role"] == "vad"

    assert cli.main(["models", "install", "no-such-model", "--json", "--dir", str(tmp_path)]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["message"]


def test_models_use_the_configs_models_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "edgevoice.toml"
    config.write_text(f'[models]\ndir = "{tmp_path / "kiosk-models"}"\n')
    assert cli.main(["models", "list", "--json", "--config", str(config)]) == 0
    assert json.loads(capsys.readouterr().out)["models_dir"] == str(tmp_path / "kiosk-models")
    assert cli.main(["models", "list", "--json", "--config", str(config), "--dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["models_dir"] == str(tmp_path)  # --dir first


def test_run_reports_a_bad_config_as_an_error_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "edgevoice.toml"
    config.write_text("[llm]\nthreads = 0\n")
    assert cli.main(["run", "--json", "--config", str(config)]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == {
        "error": {
            "code": "config_invalid",
            "message": "llm.threads = 0: must be between 1 and 64",
            "key": "llm.threads",
        }
    }


def _one_object(out: str) -> dict[str, object]:
    assert out.count("\n") == 1, out
    document = json.loads(out)
    assert isinstance(document, dict)
    return document


@pytest.mark.parametrize("place", ["after", "before", "top"])
def test_a_usage_error_under_json_is_an_error_object_on_every_command(
    place: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in commands(cli.build_parser()):
        words = name.split()
        line = {
            "after": [*words, "--bogus", "--json"],
            "before": [*words, "--json", "--bogus"],
            "top": ["--json", *words, "--bogus"],
        }[place]
        assert cli.main(line) == 2, line
        out, err = capsys.readouterr()
        error = _one_object(out)["error"]
        assert isinstance(error, dict) and error["code"] == "usage", (line, error)
        assert "usage: edgevoice" in err and "edgevoice: error: [usage]" in err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (["--json"], "the following arguments are required: command"),
        (["--json", "nosuch"], "invalid choice: 'nosuch'"),
        (["models", "--json"], "the following arguments are required: COMMAND"),
        (["converse", "--json"], "the following arguments are required: input"),
        (["trigger", "push", "--json"], "invalid choice: 'push'"),
        (["models", "install", "--all", "silero-vad", "--json"], "give model names or --all, not both"),
    ],
)
def test_usage_errors_of_the_top_level_and_of_arguments_are_error_objects(
    line: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(line) == 2
    error = _one_object(capsys.readouterr().out)["error"]
    assert error == {"code": "usage", "message": error["message"]} and message in str(error["message"])


def test_verbose_and_json_stand_anywhere_on_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    for name, leaf in commands(parser).items():
        assert "-v" in leaf._option_string_actions, f"edgevoice {name} does not take -v"
    assert parser.parse_args(["-v", "devices"]).verbose is True
    assert parser.parse_args(["devices", "-v"]).verbose is True
    assert parser.parse_args(["models", "list", "--verbose"]).verbose is True
    assert getattr(parser.parse_args(["devices"]), "verbose", False) is False

    config = tmp_path / "edgevoice.toml"
    config.write_text('[kiosk]\nname = "Zoe"\n')
    for line in (
        ["--json", "config", "--print", "--config", str(config)],
        ["config", "--print", "--config", str(config), "--json", "-v"],
        ["-v", "--json", "config", "--print", "-v", "--config", str(config)],
    ):
        assert cli.main(line) == 0, line
        assert _one_object(capsys.readouterr().out)["config"]["kiosk"]["name"] == "Zoe"  # type: ignore[index]


def test_one_condition_has_one_exit_status_whichever_command_meets_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from edgevoice import run as live_run

    def stops_with(error: Exception) -> object:
        def run_live(*_args: object, **_kwargs: object) -> int:
            raise error

        return run_live

    monkeypatch.setattr(live_run, "run_live", stops_with(AudioDeviceError("no default input device")))
    assert cli.main(["run"]) == 69  # what `devices` and `config --check` give for no sound device
    monkeypatch.setattr(live_run, "run_live", stops_with(ModelChecksumError("silero_vad.onnx: sha256 differs")))
    assert cli.main(["run", "--json"]) == 2  # what `models verify` and `config --check` give for a mismatch
    assert _one_object(capsys.readouterr().out)["error"] == {
        "code": "model_checksum",
        "message": "silero_vad.onnx: sha256 differs",
    }


def test_say_as_json_with_the_real_voice(store: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hello.wav"
    assert cli.main(["say", "Hello there.", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["out"] == str(out) and out.stat().st_size > 44 and result["seconds"] > 0.3
    assert result["sample_rate"] == 22050


def test_bench_prints_its_report_as_json_and_its_table_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from edgevoice.bench import quality_report, venue_quality

    quality = {"rows": [{"venue": "sample", "right_facts_percent": 80.0}], "items": []}
    monkeypatch.setattr(venue_quality, "run_venues", lambda *_a, **_k: quality)  # the wiring, not the benchmark
    monkeypatch.setattr(quality_report, "format_venues", lambda q: f"TABLE {q['rows'][0]['venue']}")
    out = tmp_path / "report.json"
    assert cli.main(["bench", "--quality", "--written-only", "--report", str(out), "--json"]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out) == json.loads(out.read_text()) == quality
    assert "TABLE sample" in printed.err and "TABLE" not in printed.out
    assert cli.main(["bench", "--quality", "--written-only"]) == 0
    assert capsys.readouterr().out.strip() == "TABLE sample"  # without --json: the table on stdout, as before


class _SlowStdout:
    """A stdout whose every write lets the other threads run before it is done: where two threads' writes can
    interleave, they do."""

    def __init__(self) -> None:
        self.written: list[str] = []

    def write(self, text: str) -> int:
        time.sleep(0.0005)
        self.written.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_run_records_from_several_threads_stay_one_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # the recognition worker's partials, the responder's "speaking" and the turn records are written by different
    # threads; a record run into another's line was lost to every reader (the barge-in test's missing "speaking")
    out = _SlowStdout()
    monkeypatch.setattr(sys, "stdout", out)

    def writer(name: str) -> None:
        for i in range(40):
            write_lines([json.dumps({"event": name, "i": i})])

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("partial", "speaking", "turn")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = "".join(out.written).splitlines()
    assert len(lines) == 120
    records = [json.loads(line) for line in lines]
    assert sorted((r["event"], r["i"]) for r in records) == sorted(
        (name, i) for name in ("partial", "speaking", "turn") for i in range(40)
    )
