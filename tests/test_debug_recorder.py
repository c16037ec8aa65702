"""The opt-in debug recorder: off by default (no audio on disk), a bounded ring of the newest turns when on."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
import soundfile

from edgevoice.config import Config
from edgevoice.config.load import load_config
from edgevoice.live.recorder import TurnRecorder, default_debug_dir


def speech(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.3 * rng.standard_normal(int(16000 * seconds))).clip(-1, 1).astype(np.float32)


def test_recording_is_off_by_default(tmp_path: Path) -> None:
    config = Config()
    assert config.debug.record_turns == 0 and config.debug.log_transcripts is False
    assert TurnRecorder.from_config(config.debug.record_turns, str(tmp_path)) is None
    assert list(tmp_path.iterdir()) == []


def test_config_turns_it_on(tmp_path: Path) -> None:
    path = tmp_path / "edgevoice.toml"
    path.write_text(f'[debug]\nrecord_turns = 3\nrecord_dir = "{tmp_path / "turns"}"\n')
    config = load_config(path)
    recorder = TurnRecorder.from_config(config.debug.record_turns, config.debug.record_dir)
    assert recorder is not None and recorder.keep == 3 and recorder.directory == tmp_path / "turns"
    path.write_text("[debug]\nrecord_turns = -1\n")
    with pytest.raises(Exception, match=r"debug.record_turns = -1: must be between 0 and 1000"):
        load_config(path)


def test_keeps_only_the_newest_turns_with_their_audio_and_record(tmp_path: Path) -> None:
    recorder = TurnRecorder(tmp_path / "turns", keep=2)
    clips = {turn: speech(0.5 + turn / 10, seed=turn) for turn in range(1, 5)}
    for turn, audio in clips.items():
        wav = recorder.record(turn, audio, {"event": "turn", "turn": turn, "transcript": f"question {turn}"})
        assert wav is not None and wav.is_file()
    assert recorder.turns() == ["000003-turn3", "000004-turn4"]
    files = sorted(p.name for p in (tmp_path / "turns").iterdir())
    assert files == ["000003-turn3.json", "000003-turn3.wav", "000004-turn4.json", "000004-turn4.wav"]
    heard, rate = soundfile.read(tmp_path / "turns" / "000004-turn4.wav", dtype="float32")
    assert rate == 16000 and len(heard) == len(clips[4])
    assert np.max(np.abs(heard - clips[4])) < 1 / 32767 + 1e-6  # 16-bit PCM of the same samples
    record = json.loads((tmp_path / "turns" / "000004-turn4.json").read_text())
    assert record["transcript"] == "question 4"
    for path in (tmp_path / "turns").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path  # the visitors' voices: owner only
    assert stat.S_IMODE((tmp_path / "turns").stat().st_mode) == 0o700


def test_numbering_runs_on_after_a_restart(tmp_path: Path) -> None:
    first = TurnRecorder(tmp_path, keep=3)
    for turn in (1, 2):
        first.record(turn, speech(0.2, turn), {"turn": turn})
    again = TurnRecorder(tmp_path, keep=3)  # a restarted service numbers its turns from 1 again
    for turn in (1, 2):
        again.record(turn, speech(0.2, turn + 10), {"turn": turn})
    assert again.turns() == ["000002-turn2", "000003-turn1", "000004-turn2"]  # the oldest went first


def test_a_directory_it_cannot_write_costs_the_recording_not_the_turn(tmp_path: Path) -> None:
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("x")
    recorder = TurnRecorder(blocked / "turns", keep=2)
    assert recorder.record(1, speech(0.2, 1), {"turn": 1}) is None
    assert recorder.failures == 1

    if os.geteuid() != 0:  # root writes anywhere: the read-only case needs an ordinary user
        readonly = tmp_path / "ro"
        readonly.mkdir(mode=0o500)
        assert TurnRecorder(readonly, keep=2).record(1, speech(0.2, 1), {"turn": 1}) is None


def test_no_partial_files_are_left_behind(tmp_path: Path) -> None:
    recorder = TurnRecorder(tmp_path, keep=1)
    bad_record = {"turn": 1, "value": float("nan")}
    recorder.record(1, np.full(1600, np.nan, np.float32), bad_record)  # NaN samples are written as silence
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["000001-turn1.json", "000001-turn1.wav"]
    heard, _ = soundfile.read(tmp_path / "000001-turn1.wav", dtype="float32")
    assert not np.any(heard)


def test_default_directory_is_the_service_state_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/edgevoice/debug:/var/lib/other")
    assert default_debug_dir() == Path("/var/lib/edgevoice/debug")
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_debug_dir() == tmp_path / "edgevoice" / "turns"
