"""`edgevoice models bundle`: an offline bundle round-trips into a models directory with no index and no cache.

Uses the two small real models (Silero VAD, Smart Turn: 11 MB + 12 MB of distributions) from the download cache that
scripts/setup filled (the package index when they are not there)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgevoice.errors import ModelInstallError
from edgevoice.models.store import ModelStore
from edgevoice.paths import default_download_cache

SMALL = ["silero-vad", "smart-turn-v3.2"]
NO_NETWORK = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bundle")
    store = ModelStore(models_dir=tmp_path_factory.mktemp("unused"), download_cache=default_download_cache())
    dists = store.bundle(directory, SMALL, progress=False)
    assert sorted(p.name for p in dists) == ["pipecat_ai-1.14.0-py3-none-any.whl", "silero_vad-6.2.3-py3-none-any.whl"]
    return directory


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_bundle_holds_the_pinned_distributions_the_manifest_and_their_sums(bundle: Path) -> None:
    store = ModelStore(models_dir=bundle / "x")
    names = sorted(p.name for p in bundle.iterdir())
    assert names == [
        "SHA256SUMS",
        "manifest.toml",
        "pipecat_ai-1.14.0-py3-none-any.whl",
        "silero_vad-6.2.3-py3-none-any.whl",
    ]
    assert store.manifest.path is not None
    assert (bundle / "manifest.toml").read_bytes() == store.manifest.path.read_bytes()
    pinned = {s.package: s.sha256 for name in SMALL for s in store.manifest.get(name).sources}
    sums = dict(reversed(line.split("  ")) for line in (bundle / "SHA256SUMS").read_text().splitlines())
    assert sums == {
        "pipecat_ai-1.14.0-py3-none-any.whl": pinned["pipecat-ai"],
        "silero_vad-6.2.3-py3-none-any.whl": pinned["silero-vad"],
    }
    for name, digest in sums.items():
        assert sha256(bundle / name) == digest


def test_install_from_the_bundle_needs_no_index_and_no_cache(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in NO_NETWORK.items():
        monkeypatch.setenv(key, value)
    cache = tmp_path / "empty-cache"
    store = ModelStore(models_dir=tmp_path / "models", download_cache=cache)
    paths = store.install(SMALL, progress=False, find_links=bundle)
    assert sorted(p.name for p in paths) == ["silero_vad.onnx", "smart-turn-v3.2-cpu.onnx"]
    results = store.verify(SMALL)
    assert [r.status for r in results] == ["ok", "ok"]
    assert not cache.exists() or not any(cache.iterdir())  # nothing was downloaded


def test_a_tampered_bundle_is_refused(bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in NO_NETWORK.items():
        monkeypatch.setenv(key, value)
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    for path in bundle.iterdir():
        if path.suffix != ".whl":
            os.link(path, tampered / path.name)
    good = bundle / "silero_vad-6.2.3-py3-none-any.whl"
    data = bytearray(good.read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tampered / good.name).write_bytes(bytes(data))
    store = ModelStore(models_dir=tmp_path / "models", download_cache=tmp_path / "cache")
    with pytest.raises(ModelInstallError, match="sha256"):
        store.install(["silero-vad"], progress=False, find_links=tampered)
    assert not (tmp_path / "models" / "silero_vad.onnx").exists()


def test_bundle_command_line(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli-bundle"
    env = {**os.environ, **NO_NETWORK, "EDGEVOICE_DOWNLOAD_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "edgevoice", "models", "bundle", str(out), "silero-vad", "--find-links", str(bundle)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"install with: edgevoice models install --find-links {out}" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["SHA256SUMS", "manifest.toml", "silero_vad-6.2.3-py3-none-any.whl"]

    proc = subprocess.run(
        [sys.executable, "-m", "edgevoice", "models", "bundle", str(out), "silero-vad", "--all"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "give model names or --all, not both" in proc.stderr
