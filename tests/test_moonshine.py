"""Moonshine tiny-en (:mod:`edgevoice.engines.moonshine_onnx`): its files in the manifest, their format checks, the
pieces long audio is cut into, and the real model beside whisper tiny.en on the self-test's recorded utterances."""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgevoice import app_engines
from edgevoice.audio import SAMPLE_RATE
from edgevoice.bench.scoring import corpus_wer
from edgevoice.config import Config
from edgevoice.config.load import config_from_dict
from edgevoice.engines.moonshine_onnx import MoonshineOnnxRecognizer, split_pieces
from edgevoice.errors import ModelChecksumError, ModelFormatError, ModelMissingError
from edgevoice.models.formats import check_format
from edgevoice.models.manifest import load_manifest
from edgevoice.models.ort_files import parse_token_list
from edgevoice.models.store import ModelStore
from edgevoice.selftest.utterances import UTTERANCES
from tests.conftest import heard_share

NAME = "moonshine-tiny-en"
MOONSHINE = Config(**{"models": Config().models.__class__(asr=NAME)})  # type: ignore[arg-type]


# -- without the model --------------------------------------------------------------------------------------------


def test_the_manifest_takes_three_checked_files_from_the_wheel_and_installs_them_only_when_named() -> None:
    manifest = load_manifest()
    spec = manifest.get(NAME)
    assert spec.role == "asr" and not spec.default
    assert NAME not in {m.name for m in manifest.defaults()}
    assert [s.requirement for s in spec.sources] == ["moonshine-voice==0.1.0"]
    assert [(o.format, o.size, o.sha256[:8]) for o in spec.outputs] == [
        ("ort", 13281600, "94e90a46"),
        ("ort", 30412256, "cf524c48"),
        ("token-list", 249974, "6884b35f"),
    ]


def test_an_ort_file_of_another_kind_or_cut_short_is_refused_naming_it(tmp_path: Path) -> None:
    other = tmp_path / "x.ort"
    other.write_bytes(b"\x08\x07\x12\x00" * 8)  # protobuf-ish: an .onnx renamed
    with pytest.raises(ModelFormatError, match=r"x\.ort: not an ONNX Runtime format model"):
        check_format(other, "ort")
    cut = tmp_path / "cut.ort"
    cut.write_bytes(b"\x00\x10\x00\x00ORTM")  # root offset past the end
    with pytest.raises(ModelFormatError, match=r"cut\.ort: ONNX Runtime model is truncated"):
        check_format(cut, "ort")
    with pytest.raises(ModelFormatError, match="does not exist"):
        check_format(tmp_path / "none.ort", "ort")


def test_a_token_list_is_read_back_and_a_cut_one_is_refused(tmp_path: Path) -> None:
    tokens = [b"<unk>", b"<s>", b"</s>", *(bytes([b]) for b in range(256)), b"x" * 200]
    raw = b"".join(
        (bytes([len(t)]) if len(t) < 128 else bytes([len(t) & 0x7F | 0x80, len(t) >> 7])) + t for t in tokens
    )
    path = tmp_path / "tokenizer.bin"
    path.write_bytes(raw)
    assert check_format(path, "token-list") == tokens
    path.write_bytes(raw[:-3])
    with pytest.raises(ModelFormatError, match=r"tokenizer\.bin: token list is truncated at token 259"):
        check_format(path, "token-list")
    assert parse_token_list(b"\x02ab\x01c", path) == [b"ab", b"c"]


def test_long_audio_is_cut_at_its_quietest_point_and_keeps_every_sample() -> None:
    rng = np.random.default_rng(0)
    audio = (rng.standard_normal(40 * SAMPLE_RATE) * 0.1).astype(np.float32)
    for quiet_s in (13.0, 27.0):  # 200 ms of near silence in each piece's search window
        start = int(quiet_s * SAMPLE_RATE)
        audio[start : start + 3200] *= 0.001
    pieces = split_pieces(audio, 16 * SAMPLE_RATE, 6 * SAMPLE_RATE)
    assert sum(p.size for p in pieces) == audio.size
    assert np.array_equal(np.concatenate(pieces), audio)
    cuts = np.cumsum([p.size for p in pieces])[:-1] / SAMPLE_RATE
    assert len(cuts) == 2 and 13.0 <= cuts[0] <= 13.2 and 27.0 <= cuts[1] <= 27.2  # inside the quiet stretches
    assert all(p.size <= 16 * SAMPLE_RATE for p in pieces)
    assert len(split_pieces(audio[: 16 * SAMPLE_RATE], 16 * SAMPLE_RATE, 6 * SAMPLE_RATE)) == 1


def test_a_moonshine_asr_name_opens_the_moonshine_engine_with_the_config_threads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import edgevoice.app_engines as engines
    import edgevoice.engines.moonshine_onnx as moonshine

    class Recorder:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.args, self.kwargs = args, kwargs

    files = (tmp_path / "e.ort", tmp_path / "d.ort", tmp_path / "t.bin")
    monkeypatch.setattr(moonshine, "MoonshineOnnxRecognizer", Recorder)
    monkeypatch.setattr(engines, "moonshine_files", lambda store, name: files if name == NAME else None)
    config = config_from_dict({"models": {"asr": NAME}, "asr": {"threads": 3}})
    rec: Any = app_engines.open_recognizer(config, ModelStore(tmp_path))
    assert rec.args == files and rec.kwargs == {"threads": 3}
    rec = app_engines.open_recognizer(config, ModelStore(tmp_path), threads=1, phantom_filters=False)
    assert rec.kwargs == {"threads": 1, "noise_flatness": None, "phantom_phrases": frozenset()}


def test_a_moonshine_model_not_installed_names_the_file_and_its_checksum(tmp_path: Path) -> None:
    config = config_from_dict({"models": {"asr": NAME}})
    with pytest.raises(ModelMissingError, match=r"moonshine-tiny-en\.encoder\.ort .*sha256 94e90a46"):
        app_engines.open_recognizer(config, ModelStore(tmp_path))


def test_moonshine_told_another_language_is_refused_as_english_only(tmp_path: Path) -> None:
    from edgevoice.config_check import check_language
    from edgevoice.errors import ConfigError

    config = config_from_dict({"models": {"asr": NAME}, "asr": {"language": "de"}})
    with pytest.raises(ConfigError, match="English-only"):
        check_language(config, tmp_path / "moonshine-tiny-en.encoder.ort")  # never read as a whisper file


# -- the real model -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def moonshine_files(store: ModelStore) -> tuple[Path, Path, Path]:
    """The installed Moonshine tiny-en files, installed first when missing (one 56 MB wheel from the index)."""
    from edgevoice.models.configured import moonshine_files

    store.install([NAME], progress=False)
    return moonshine_files(store, NAME)


@pytest.fixture(scope="session")
def moonshine(moonshine_files: tuple[Path, Path, Path]) -> MoonshineOnnxRecognizer:
    return MoonshineOnnxRecognizer(*moonshine_files, threads=2)


def _transcribe_all(recognizer: Any) -> tuple[list[str], list[float], list[float]]:
    texts, ms, confidences = [], [], []
    for u in UTTERANCES:
        audio = u.audio()
        t = time.perf_counter()
        heard = recognizer.transcribe(audio)
        ms.append((time.perf_counter() - t) * 1000)
        texts.append(heard.text)
        confidences.append(heard.confidence)
    return texts, ms, confidences


@pytest.mark.models
def test_moonshine_hears_the_selftest_utterances_no_worse_than_whisper(
    store: ModelStore, moonshine: MoonshineOnnxRecognizer, capsys: pytest.CaptureFixture[str]
) -> None:
    whisper = app_engines.open_recognizer(Config(), store, threads=2, initial_prompt="")
    try:
        w_texts, w_ms, _ = _transcribe_all(whisper)
    finally:
        whisper.close()
    m_texts, m_ms, m_conf = _transcribe_all(moonshine)
    refs = [u.text for u in UTTERANCES]
    m_wer, w_wer = corpus_wer(list(zip(refs, m_texts, strict=True))), corpus_wer(list(zip(refs, w_texts, strict=True)))
    with capsys.disabled():
        print(
            f"\n{len(refs)} self-test utterances, 2 threads: moonshine-tiny-en WER {m_wer:.3f}, "
            f"median {statistics.median(m_ms):.0f} ms; whisper-tiny.en WER {w_wer:.3f}, "
            f"median {statistics.median(w_ms):.0f} ms"
        )
    assert m_wer <= w_wer
    assert all(c is not None and 0.0 < c <= 1.0 for c in m_conf)


def _questions(seconds: float) -> tuple[list[np.ndarray], list[str]]:
    """Self-test utterances one after another, 0.5 s apart, until ``seconds`` are filled; the clips and their texts."""
    gap = np.zeros(int(0.5 * SAMPLE_RATE), dtype=np.float32)
    clips, said = [], []
    for u in UTTERANCES:
        if sum(c.size for c in clips) >= seconds * SAMPLE_RATE:
            break
        clips += [u.audio(), gap]
        said.append(u.text)
    return clips, said


@pytest.mark.models
def test_a_12_second_question_is_decoded_in_one_piece(moonshine: MoonshineOnnxRecognizer) -> None:
    """Past 9.3 s a decoder mask with one entry per encoder frame no longer broadcasts (the 10 s shape error)."""
    clips, said = _questions(12)
    audio = np.concatenate(clips)
    assert len(split_pieces(audio, 16 * SAMPLE_RATE, 6 * SAMPLE_RATE)) == 1
    assert heard_share(" ".join(said), moonshine.transcribe(audio).text) >= 0.9


@pytest.mark.models
def test_a_25_second_question_is_decoded_whole_across_its_pieces(moonshine: MoonshineOnnxRecognizer) -> None:
    clips, said = _questions(25)
    audio = np.concatenate(clips)
    assert audio.size / SAMPLE_RATE >= 25
    pieces = split_pieces(audio, 16 * SAMPLE_RATE, 6 * SAMPLE_RATE)
    assert len(pieces) == 2
    ends = np.cumsum([c.size for c in clips[::2]]) + np.arange(1, len(said) + 1) * clips[1].size
    before = int(np.searchsorted(ends, pieces[0].size))  # the question the cut falls after (in its gap)
    assert 0 < before < len(said) - 1
    across = " ".join(said[before : before + 2])
    heard = moonshine.transcribe(audio)
    assert heard_share(across, heard.text) == 1.0, (across, heard.text)  # every word either side of the cut
    assert heard_share(" ".join(said), heard.text) >= 0.9
    assert heard.confidence is not None and 0.0 < heard.confidence <= 1.0


@pytest.mark.models
@pytest.mark.parametrize(
    "make",
    [lambda: np.zeros(SAMPLE_RATE, np.float32), lambda: np.full(2 * SAMPLE_RATE, 1e-3, np.float32)],
    ids=["digital-silence", "dc-hum"],
)
def test_silence_gives_no_text(moonshine: MoonshineOnnxRecognizer, make: Callable[[], np.ndarray]) -> None:
    assert moonshine.transcribe(make()).text == ""


@pytest.mark.models
def test_a_corrupt_installed_file_is_named_with_its_expected_checksum(
    moonshine_files: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    for path in moonshine_files:
        shutil.copy(path, tmp_path / path.name)
    tokenizer = tmp_path / moonshine_files[2].name
    tokenizer.write_bytes(tokenizer.read_bytes()[:-10])
    config = config_from_dict({"models": {"asr": NAME}})
    with pytest.raises(ModelChecksumError, match=r"moonshine-tiny-en\.tokenizer\.bin .*expected sha256 6884b35f"):
        app_engines.open_recognizer(config, ModelStore(tmp_path))


@pytest.mark.models
def test_files_of_the_wrong_shape_are_refused_naming_the_file(moonshine_files: tuple[Path, Path, Path]) -> None:
    encoder, decoder, tokenizer = moonshine_files
    with pytest.raises(ModelFormatError, match=rf"{decoder.name}: not a Moonshine encoder"):
        MoonshineOnnxRecognizer(decoder, decoder, tokenizer)
    with pytest.raises(ModelFormatError, match=rf"{encoder.name}: not a Moonshine merged decoder"):
        MoonshineOnnxRecognizer(encoder, encoder, tokenizer)


@pytest.mark.models
def test_a_thank_you_that_was_said_is_kept(
    moonshine: MoonshineOnnxRecognizer, speak: Callable[[str], np.ndarray]
) -> None:
    """A phantom phrase that visitors also say is dropped only when the audio holds too little speech (as whisper)."""
    assert moonshine.transcribe(speak("Thank you.")).text.lower().startswith("thank you")
