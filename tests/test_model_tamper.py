"""A real model file corrupted in place with its mtime put back: `config --check` and `converse` refuse it, naming the
file and its expected sha256 (the models tier: a models directory of the installed defaults, the VAD copied)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from edgevoice.config.load import config_from_dict
from edgevoice.config_check import check_config

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "question.wav"


def edgevoice(*args: str, models: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EDGEVOICE_MODELS_DIR": str(models), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "edgevoice", *args], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )


def defaults_with_own_vad(store: Any, models: Path) -> Path:
    """``models`` made a models directory of the installed defaults, linked, but for the VAD's file: a copy, which a
    test may change; its path."""
    models.mkdir()
    for spec in store.manifest.defaults():
        for output in spec.outputs:
            (models / output.file).symlink_to(store.models_dir / output.file)
    vad = models / "silero_vad.onnx"
    vad.unlink()
    vad.write_bytes((store.models_dir / "silero_vad.onnx").read_bytes())
    return vad


def test_a_model_corrupted_in_place_is_refused_by_config_check_and_converse(tmp_path: Path, store: Any) -> None:
    models = tmp_path / "models"
    vad = defaults_with_own_vad(store, models)
    expected = store.manifest.models["silero-vad"].outputs[0].sha256
    config = config_from_dict({"models": {"dir": str(models)}})
    assert check_config(config, devices=False).ok  # verified once, stamped

    st = vad.stat()
    data = bytearray(vad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with vad.open("r+b") as fh:
        fh.write(data)
    os.utime(vad, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (vad.stat().st_size, vad.stat().st_mtime_ns, vad.stat().st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)

    check = edgevoice("config", "--check", "--json", "--no-devices", models=models)
    assert check.returncode == 2, check.stdout
    [error] = json.loads(check.stdout)["errors"]
    assert error["code"] == "model_checksum"
    assert str(vad) in error["message"] and f"expected sha256 {expected}" in error["message"]

    converse = edgevoice("converse", str(SAMPLE), models=models)
    assert converse.returncode == 2, converse.stdout
    assert "[model_checksum]" in converse.stderr and str(vad) in converse.stderr and expected in converse.stderr
    assert "Assistant:" not in converse.stdout
