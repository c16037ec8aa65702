"""A WAV whose header cannot describe audio is reported as a bad WAV, naming the file and what is wrong: real files
with broken headers, read by :func:`read_audio` and by `edgevoice converse`."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import pytest
import soundfile

from edgevoice import cli
from edgevoice.audio.files import read_audio
from edgevoice.errors import AudioInputError


def good_wav(seconds: float = 0.5, rate: int = 16000) -> bytes:
    out = io.BytesIO()
    tone = 0.3 * np.sin(2 * np.pi * 440 * np.arange(int(seconds * rate)) / rate)
    soundfile.write(out, tone, rate, subtype="PCM_16", format="WAV")
    return out.getvalue()


def with_fmt(data: bytes, **fields: int) -> bytes:
    """``data`` (a canonical 44-byte-header WAV from :func:`good_wav`) with fields of its fmt chunk changed."""
    assert data[12:16] == b"fmt "
    names = ("format", "channels", "rate", "byte_rate", "align", "bits")
    values = dict(zip(names, struct.unpack_from("<HHIIHH", data, 20), strict=True)) | fields
    return data[:20] + struct.pack("<HHIIHH", *(values[n] for n in names)) + data[36:]


BROKEN = [
    ("zero-channels", lambda d: with_fmt(d, channels=0), "it says 0 channels"),
    ("zero-rate", lambda d: with_fmt(d, rate=0, byte_rate=0), "it says a sample rate of 0 Hz"),
    ("zero-bits", lambda d: with_fmt(d, bits=0), "it says 0 bits a sample"),
    ("cut-in-fmt", lambda d: d[:28], "its fmt chunk is cut short (8 of 16 bytes)"),
    ("header-only", lambda d: d[:12], "no fmt chunk in its 12 bytes"),
    ("no-data", lambda d: d[:36], "no data chunk in its 36 bytes"),
    ("data-first", lambda d: d[:12] + d[36:], "no fmt chunk before its data"),
]


@pytest.mark.parametrize(("name", "damage", "problem"), BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_header_is_a_bad_wav(tmp_path: Path, name: str, damage: object, problem: str) -> None:
    path = tmp_path / f"{name}.wav"
    path.write_bytes(damage(good_wav()))  # type: ignore[operator]
    with pytest.raises(AudioInputError) as err:
        read_audio(path, rate=16000)
    assert err.value.code == "audio_bad_header"
    assert err.value.message == f"{path}: a bad WAV header: {problem}"


def test_converse_reports_a_zero_channel_wav_as_a_bad_wav_not_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "question.wav"
    path.write_bytes(with_fmt(good_wav(), channels=0))
    assert cli.main(["converse", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"[audio_bad_header] {path}: a bad WAV header: it says 0 channels" in err, err
    assert "no such file" not in err.lower()


def test_a_good_wav_and_a_wav_with_extra_chunks_still_read(tmp_path: Path) -> None:
    data = good_wav()
    path = tmp_path / "good.wav"
    path.write_bytes(data)
    assert len(read_audio(path, rate=16000)) == 8000
    info = b"JUNK" + struct.pack("<I", 3) + b"abc" + b"\0"  # an odd-sized chunk, padded
    extra = data[:4] + struct.pack("<I", len(data) - 8 + len(info)) + data[8:36] + info + data[36:]
    path.write_bytes(extra)
    assert len(read_audio(path, rate=16000)) == 8000
