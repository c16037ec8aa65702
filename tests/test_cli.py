"""`edgevoice converse` as a user runs it: a separate process, real models, real files, and every error message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.conftest import wer, words
from tests.test_model_tamper import defaults_with_own_vad

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "question.wav"
SAMPLE_TEXT = "How much is a ticket for a student?"


def edgevoice(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgevoice", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        cwd=cwd or ROOT,
    )


def test_bad_config_fails_at_start_with_key_value_and_range(tmp_path: Path) -> None:
    config = tmp_path / "edgevoice.toml"
    config.write_text("[llm]\nthreads = 0\n")
    proc = edgevoice("converse", str(SAMPLE), "--config", str(config))
    assert proc.returncode == 2
    assert "[config_invalid] llm.threads = 0: must be between 1 and 64" in proc.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "no such file"), (b"RIFF\x00\x00garbage-not-a-wav", "not a readable audio file")],
)
def test_unreadable_wav_is_a_clear_error(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "input.wav"
    if content is not None:
        path.write_bytes(content)
    proc = edgevoice("converse", str(path))
    assert proc.returncode == 2
    assert message in proc.stderr and str(path) in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.models
def test_converse_json_on_a_stereo_44k_recording(tmp_path: Path) -> None:
    audio, rate = sf.read(SAMPLE, dtype="float32")
    import soxr

    stereo = np.stack([soxr.resample(audio, rate, 44100)] * 2, axis=1)
    recording = tmp_path / "question-44k-stereo.wav"
    sf.write(recording, stereo, 44100, subtype="PCM_24")
    out = tmp_path / "reply.wav"
    proc = edgevoice("converse", str(recording), "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert wer(SAMPLE_TEXT, report["transcript"]) <= 0.15, report
    assert "nine" in words(report["reply"]), report
    assert report["no_speech"] is False
    assert set(report["stages"]) >= {"vad", "asr", "llm_first_token", "first_audio", "llm", "tts", "total"}
    assert all(v > 0 for v in report["stages"].values())
    reply, reply_rate = sf.read(out, dtype="float32")
    assert reply_rate == 22050 and reply.ndim == 1
    assert len(reply) / reply_rate == pytest.approx(report["reply_seconds"], abs=0.01)
    assert np.abs(reply).max() > 0.1


@pytest.mark.models
def test_converse_prints_transcript_reply_and_stage_times(tmp_path: Path) -> None:
    proc = edgevoice("converse", str(SAMPLE), "--out", str(tmp_path / "reply.wav"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    visitor = next(line for line in lines if line.startswith("Visitor:"))
    assert wer(SAMPLE_TEXT, visitor.removeprefix("Visitor:")) <= 0.15
    assert any(line.startswith("Assistant:") for line in lines)
    for label in ("recognition (whisper.cpp)", "LLM first token", "transcript -> first audio", "total"):
        assert any(label in line and line.rstrip().endswith("ms") for line in lines), label


@pytest.mark.models
def test_silent_input_is_no_speech(tmp_path: Path) -> None:
    silent = tmp_path / "silence.wav"
    sf.write(silent, np.zeros(48000, dtype=np.float32), 16000)
    out = tmp_path / "reply.wav"
    proc = edgevoice("converse", str(silent), "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["no_speech"] is True and report["transcript"] == "" and report["reply"] == ""
    assert not out.exists()


@pytest.mark.models
def test_missing_model_names_the_install_command(tmp_path: Path) -> None:
    proc = edgevoice("converse", str(SAMPLE), env={"EDGEVOICE_MODELS_DIR": str(tmp_path / "empty")})
    assert proc.returncode == 2
    assert "[model_missing]" in proc.stderr
    assert "edgevoice models install" in proc.stderr


@pytest.mark.models
def test_corrupt_model_file_is_refused_with_its_name(tmp_path: Path, store) -> None:  # type: ignore[no-untyped-def]
    good = store.path("qwen2.5-coder-0.5b-instruct-q4km")
    truncated = tmp_path / "truncated.gguf"
    with open(good, "rb") as src:
        truncated.write_bytes(src.read(4 << 20))
    config = tmp_path / "edgevoice.toml"
    config.write_text(f'[models]\nllm = "{truncated}"\n')
    proc = edgevoice("converse", str(SAMPLE), "--config", str(config))
    assert proc.returncode == 2, proc.stderr
    assert "[model_format]" in proc.stderr and str(truncated) in proc.stderr

    garbage = tmp_path / "voice.onnx"
    garbage.write_bytes(b"\x00not an onnx model" * 100)
    (tmp_path / "voice.onnx.json").write_text(
        store.path("piper-en_US-joe-medium", "en_US-joe-medium.onnx.json").read_text()
    )
    config.write_text(f'[models]\ntts = "{garbage}"\n')
    proc = edgevoice("converse", str(SAMPLE), "--config", str(config))
    assert proc.returncode == 2, proc.stderr
    assert "[model_format]" in proc.stderr and str(garbage) in proc.stderr


@pytest.mark.models
def test_checksum_mismatch_names_file_and_both_hashes(tmp_path: Path, store) -> None:  # type: ignore[no-untyped-def]
    models = tmp_path / "models"
    vad = defaults_with_own_vad(store, models)
    data = bytearray((store.models_dir / "silero_vad.onnx").read_bytes())
    data[-1] ^= 0xFF
    vad.write_bytes(bytes(data))
    proc = edgevoice("converse", str(SAMPLE), env={"EDGEVOICE_MODELS_DIR": str(models)})
    assert proc.returncode == 2
    assert "[model_checksum]" in proc.stderr and str(vad) in proc.stderr
    expected = store.manifest.models["silero-vad"].outputs[0].sha256
    assert expected in proc.stderr
    import hashlib

    assert hashlib.sha256(bytes(data)).hexdigest() in proc.stderr


def _closed_early(args: list[str], *, lines: int) -> tuple[int, str]:
    """Run ``edgevoice ARGS`` with stdout a real pipe whose reader takes ``lines`` lines (0: none) and closes it, as
    ``| head -N`` does; the exit status and stderr."""
    with subprocess.Popen(
        [sys.executable, "-m", "edgevoice", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        for _ in range(lines):
            proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        return proc.wait(timeout=300), err


def test_a_reader_that_closes_early_ends_the_command_quietly(tmp_path: Path) -> None:
    # more than a pipe holds (64 KiB), so the writer is still writing when `head -1` goes away
    knowledge = "".join(f"Q: Is room {i} open? A: Room {i} is open from nine to five.\n" for i in range(4000))
    config = tmp_path / "edgevoice.toml"
    config.write_text(f"[kiosk]\nknowledge = '''\n{knowledge}'''\n")
    assert config.stat().st_size > 3 * 65536
    status, err = _closed_early(["config", "--print", "--config", str(config)], lines=1)
    assert (status, err) == (141, "")  # 128 + SIGPIPE, as a shell reports; no BrokenPipeError traceback

    status, err = _closed_early(["models", "list", "--dir", str(tmp_path)], lines=0)
    assert (status, err) == (141, "")


def test_a_usage_error_under_json_is_one_object_on_stdout() -> None:
    proc = edgevoice("config", "--json", "--bogus")
    assert proc.returncode == 2
    assert json.loads(proc.stdout) == {"error": {"code": "usage", "message": "unrecognized arguments: --bogus"}}
    assert "usage: edgevoice" in proc.stderr


def test_run_records_to_a_reader_gone_say_so_without_a_traceback() -> None:
    """`run --json | head -3`: the records' writer (called from the loop's threads) finds the reader gone and says so
    (the run then stops and exits 141); a record written after it goes to /dev/null."""
    script = (
        "import sys\n"
        "from edgevoice.live.cli import write_lines\n"
        'results = [write_lines([\'{"event": "partial", "text": "\' + \'x\' * 1000 + \'"}\']) for _ in range(200)]\n'
        "print(results[0], results.count(False), file=sys.stderr)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader is gone before the first record
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 0
    assert err == "False 1\n"  # the first record finds the reader gone, the later ones go to /dev/null
