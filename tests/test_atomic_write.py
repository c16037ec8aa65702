"""Replacing a file in one rename (:mod:`edgevoice.atomic_write`): the new content or the old file, never a part, and no
temporary file left behind whatever fails. Real files in a temporary directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from edgevoice.atomic_write import atomic_write, replacing
from edgevoice.models.store import ModelStore


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_bytes_and_text_replace_the_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("old")
    atomic_write(target, b"new \x00 bytes")
    assert target.read_bytes() == b"new \x00 bytes"
    atomic_write(target, "caf\u00e9")
    assert target.read_bytes() == "caf\u00e9".encode()
    assert os.listdir(tmp_path) == ["file"]


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o640])
def test_the_mode_is_honoured(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "file"
    atomic_write(target, b"x", mode=mode)
    assert mode_of(target) == mode


def test_without_a_mode_the_file_is_the_owners_alone(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"old")
    target.chmod(0o644)
    atomic_write(target, b"new")
    assert mode_of(target) == 0o600


def test_a_failed_check_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("old")
    seen: list[str] = []

    def refuse(tmp: Path) -> None:
        seen.append(tmp.read_text())
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        atomic_write(target, "new", check=refuse)
    assert seen == ["new"]  # the check read what was written
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["file"]


def test_a_writer_that_raises_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt), replacing(target) as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["file"]


def test_a_rename_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    (target / "inside").mkdir(parents=True)  # a non-empty directory cannot be replaced by a file
    with pytest.raises(OSError):
        atomic_write(target, b"new", fsync=True)
    assert os.listdir(tmp_path) == ["taken"]
    assert os.listdir(target) == ["inside"]


def test_fsync_flushes_the_new_file_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "file"
    synced: list[tuple[bytes, bool]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append((os.read(fd, 100), target.exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic_write(target, b"durable", fsync=True)
    atomic_write(target, b"not flushed")
    assert synced == [(b"durable", False)]


def test_names_of_the_temporary_file(tmp_path: Path) -> None:
    with replacing(tmp_path / "file", prefix=".x-", suffix=".npz.tmp") as tmp:
        assert tmp.parent == tmp_path
        assert tmp.name.startswith(".x-") and tmp.name.endswith(".npz.tmp")
    with replacing(tmp_path / "file") as tmp:
        assert tmp.name.startswith(".file.")


def test_a_verification_stamp_that_cannot_be_written_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The model store's stamps (written with the helper; its own write left ``.verified-*`` files on a failure)."""
    state = tmp_path / ".state"
    (state / "verified.json" / "inside").mkdir(parents=True)  # the rename fails
    ModelStore(tmp_path)._update_stamps(lambda stamps: stamps.__setitem__("a.onnx", {}))  # logged, not raised
    assert os.listdir(state) == ["verified.json"]
