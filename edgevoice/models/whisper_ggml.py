"""Convert CTranslate2 (faster-whisper) Whisper weights to whisper.cpp's ggml file, and check ggml files.

No package ships a ggml Whisper model; packages ship CTranslate2 weights. This module takes the variables of
CTranslate2's ``model.bin`` (read by :mod:`edgevoice.models.ct2_reader`) and writes the legacy whisper.cpp ggml
layout (``models/convert-pt-to-ggml.py``):

    magic 0x67676d6c | 11 x int32 hparams | mel filters (n_mel, n_fft, float32 data) |
    vocabulary (count, then len + raw bytes per token) | tensors (n_dims, name_len, ftype, dims reversed, name, data)

CTranslate2 fuses the query/key/value projections (cross-attention: key/value) and stores a zero key bias;
whisper.cpp wants them split and has no key bias. Dropping a key bias is exact in any case: it adds the same
``q . b_k`` to every attention logit of a query, which softmax cancels.

:func:`inspect_ggml` parses a ggml file without loading the weights and checks it against the tensor names,
shapes and types that whisper.cpp's ``whisper_model_load`` requires, so a corrupt file fails with
:class:`~edgevoice.errors.ModelFormatError` instead of crashing the native loader.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt

from edgevoice.atomic_write import replacing
from edgevoice.errors import ModelFormatError, ModelMissingError
from edgevoice.models.ct2_reader import Ct2Reader

__all__ = ["GGML_MAGIC", "GgmlWhisperInfo", "WhisperHParams", "convert_ct2_to_ggml", "inspect_ggml", "required_tensors"]

GGML_MAGIC = 0x67676D6C
N_FFT_BINS = 201  # whisper n_fft = 400 -> 201 rfft bins
EOT_TOKEN = "<|endoftext|>"

# ggml type id -> (block size, bytes per block), from ggml's type traits
# fmt: off
_GGML_TYPES: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2),  # F32, F16
    2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),  # Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210),  # Q2_K .. Q6_K
}
# fmt: on
# hparams.ftype (ggml_ftype, modulo GGML_QNT_VERSION_FACTOR) -> ggml type of the matrix weights
_FTYPE_TO_WTYPE: dict[int, int] = {0: 0, 1: 1, 2: 2, 3: 3, 7: 8, 8: 6, 9: 7, 10: 10, 11: 11, 12: 12, 13: 13, 14: 14}
_QNT_VERSION_FACTOR = 1000


@dataclass(frozen=True, slots=True)
class WhisperHParams:
    n_vocab: int
    n_audio_ctx: int
    n_audio_state: int
    n_audio_head: int
    n_audio_layer: int
    n_text_ctx: int
    n_text_state: int
    n_text_head: int
    n_text_layer: int
    n_mels: int
    ftype: int

    def as_tuple(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in self.__dataclass_fields__)

    @property
    def is_multilingual(self) -> bool:
        return self.n_vocab >= 51865


@dataclass(frozen=True)
class GgmlWhisperInfo:
    """What a whisper.cpp ggml file holds, weights left on disk."""

    hparams: WhisperHParams
    mel_filters: npt.NDArray[np.float32]
    vocab: list[bytes]
    tensors: dict[str, tuple[tuple[int, ...], int]]
    """name -> (shape in PyTorch order, ggml type id of the stored data)."""


def required_tensors(hp: WhisperHParams) -> dict[str, tuple[tuple[int, ...], int]]:
    """The tensors whisper.cpp's loader creates for ``hp``: name -> (PyTorch-order shape, ggml type)."""
    wtype = _FTYPE_TO_WTYPE.get(hp.ftype % _QNT_VERSION_FACTOR)
    if wtype is None:
        raise ValueError(f"unsupported ftype {hp.ftype}")
    vtype = 0 if wtype == 0 else 1  # conv weights: F16 unless the whole model is F32
    a, t = hp.n_audio_state, hp.n_text_state
    req: dict[str, tuple[tuple[int, ...], int]] = {
        "encoder.positional_embedding": ((hp.n_audio_ctx, a), 0),
        "encoder.conv1.weight": ((a, hp.n_mels, 3), vtype),
        "encoder.conv1.bias": ((a, 1), 0),
        "encoder.conv2.weight": ((a, a, 3), vtype),
        "encoder.conv2.bias": ((a, 1), 0),
        "encoder.ln_post.weight": ((a,), 0),
        "encoder.ln_post.bias": ((a,), 0),
        "decoder.positional_embedding": ((hp.n_text_ctx, t), 0),
        "decoder.token_embedding.weight": ((hp.n_vocab, t), wtype),
        "decoder.ln.weight": ((t,), 0),
        "decoder.ln.bias": ((t,), 0),
    }

    def block(prefix: str, n: int, attns: tuple[str, ...]) -> None:
        req.update({f"{prefix}.mlp_ln.{p}": ((n,), 0) for p in ("weight", "bias")})
        req[f"{prefix}.mlp.0.weight"] = ((4 * n, n), wtype)
        req[f"{prefix}.mlp.0.bias"] = ((4 * n,), 0)
        req[f"{prefix}.mlp.2.weight"] = ((n, 4 * n), wtype)
        req[f"{prefix}.mlp.2.bias"] = ((n,), 0)
        for attn in attns:
            req.update({f"{prefix}.{attn}_ln.{p}": ((n,), 0) for p in ("weight", "bias")})
            for proj in ("query", "key", "value", "out"):
                req[f"{prefix}.{attn}.{proj}.weight"] = ((n, n), wtype)
                if proj != "key":
                    req[f"{prefix}.{attn}.{proj}.bias"] = ((n,), 0)

    for i in range(hp.n_audio_layer):
        block(f"encoder.blocks.{i}", a, ("attn",))
    for i in range(hp.n_text_layer):
        block(f"decoder.blocks.{i}", t, ("attn", "cross_attn"))
    return req


# ---------------------------------------------------------------------------------------------------------------
# conversion


def _ggml_tensors(ct2: Ct2Reader) -> Iterator[tuple[str, npt.NDArray[np.float32]]]:
    """(openai name, float32 array in PyTorch layout) for every tensor whisper.cpp reads."""
    g = ct2.get

    def lin(dst: str, src: str) -> Iterator[tuple[str, npt.NDArray[np.float32]]]:
        yield f"{dst}.weight", g(f"{src}/weight")
        yield f"{dst}.bias", g(f"{src}/bias")

    def norm(dst: str, src: str) -> Iterator[tuple[str, npt.NDArray[np.float32]]]:
        yield f"{dst}.weight", g(f"{src}/gamma")
        yield f"{dst}.bias", g(f"{src}/beta")

    def split(dst: str, src: str, names: tuple[str, ...]) -> Iterator[tuple[str, npt.NDArray[np.float32]]]:
        weight, bias = g(f"{src}/weight"), g(f"{src}/bias")
        n = weight.shape[0] // len(names)
        for k, proj in enumerate(names):
            yield f"{dst}.{proj}.weight", weight[k * n : (k + 1) * n]
            if proj != "key":  # whisper.cpp has no key bias (see module docstring)
                yield f"{dst}.{proj}.bias", bias[k * n : (k + 1) * n]

    def ffn(dst: str, src: str) -> Iterator[tuple[str, npt.NDArray[np.float32]]]:
        yield from norm(f"{dst}.mlp_ln", f"{src}/ffn/layer_norm")
        yield from lin(f"{dst}.mlp.0", f"{src}/ffn/linear_0")
        yield from lin(f"{dst}.mlp.2", f"{src}/ffn/linear_1")

    def self_attn(dst: str, src: str) -> Iterator[tuple[str, npt.NDArray[np.float32]]]:
        yield from norm(f"{dst}.attn_ln", f"{src}/self_attention/layer_norm")
        yield from split(f"{dst}.attn", f"{src}/self_attention/linear_0", ("query", "key", "value"))
        yield from lin(f"{dst}.attn.out", f"{src}/self_attention/linear_1")

    yield "encoder.positional_embedding", g("encoder/position_encodings/encodings")
    for conv in ("conv1", "conv2"):
        yield f"encoder.{conv}.weight", g(f"encoder/{conv}/weight")
        yield f"encoder.{conv}.bias", g(f"encoder/{conv}/bias").reshape(-1, 1)
    for i in range(ct2.count_layers("encoder")):
        yield from self_attn(f"encoder.blocks.{i}", f"encoder/layer_{i}")
        yield from ffn(f"encoder.blocks.{i}", f"encoder/layer_{i}")
    yield from norm("encoder.ln_post", "encoder/layer_norm")
    yield "decoder.positional_embedding", g("decoder/position_encodings/encodings")
    yield "decoder.token_embedding.weight", g("decoder/embeddings/weight")
    for i in range(ct2.count_layers("decoder")):
        dst, src = f"decoder.blocks.{i}", f"decoder/layer_{i}"
        yield from self_attn(dst, src)
        yield from norm(f"{dst}.cross_attn_ln", f"{src}/attention/layer_norm")
        yield from lin(f"{dst}.cross_attn.query", f"{src}/attention/linear_0")
        yield from split(f"{dst}.cross_attn", f"{src}/attention/linear_1", ("key", "value"))
        yield from lin(f"{dst}.cross_attn.out", f"{src}/attention/linear_2")
        yield from ffn(dst, src)
    yield from norm("decoder.ln", "decoder/layer_norm")


def _hparams(ct2: Ct2Reader) -> WhisperHParams:
    n_audio_ctx, n_audio_state = ct2.variables["encoder/position_encodings/encodings"].shape
    n_text_ctx, n_text_state = ct2.variables["decoder/position_encodings/encodings"].shape
    return WhisperHParams(
        n_vocab=ct2.variables["decoder/embeddings/weight"].shape[0],
        n_audio_ctx=n_audio_ctx,
        n_audio_state=n_audio_state,
        n_audio_head=ct2.scalar("encoder/num_heads"),
        n_audio_layer=ct2.count_layers("encoder"),
        n_text_ctx=n_text_ctx,
        n_text_state=n_text_state,
        n_text_head=ct2.scalar("decoder/num_heads"),
        n_text_layer=ct2.count_layers("decoder"),
        n_mels=ct2.variables["encoder/conv1/weight"].shape[1],
        ftype=1,
    )


def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's ``bytes_to_unicode`` (the byte-level alphabet of vocabulary.txt)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + extra)] = b
            extra += 1
    return table


def _regular_tokens(vocabulary: Path) -> list[bytes]:
    """Raw bytes of the regular tokens, in id order, up to (not including) ``<|endoftext|>``.

    This is exactly what whisper.cpp's converters write (the tiktoken ranks; special tokens are implied).
    """
    decoder = _byte_decoder()
    tokens: list[bytes] = []
    for line in vocabulary.read_bytes().decode("utf-8").split("\n"):
        if line == EOT_TOKEN:
            return tokens
        try:
            tokens.append(bytes(decoder[c] for c in line))
        except KeyError as exc:
            raise ModelFormatError(f"{vocabulary}: token {line!r} is not GPT-2 byte-level text") from exc
    raise ModelFormatError(f"{vocabulary}: no {EOT_TOKEN} token")


def convert_ct2_to_ggml(model_bin: Path, vocabulary: Path, mel_filters: Path, out: Path) -> None:
    """Write a whisper.cpp ggml f16 model converted from CTranslate2 weights.

    model_bin: CT2 model.bin; vocabulary: CT2 vocabulary.txt; mel_filters: openai mel_filters.npz.
    Writes ``out`` atomically (a temporary file in the same folder, then rename).
    """
    for p in (model_bin, vocabulary, mel_filters):
        if not p.is_file():
            raise ModelMissingError(f"{p}: file not found")
    ct2 = Ct2Reader(model_bin)
    try:
        hp = _hparams(ct2)
        tokens = _regular_tokens(vocabulary)
        if len(tokens) > hp.n_vocab:
            raise ModelFormatError(f"{vocabulary}: {len(tokens)} tokens for a model of {hp.n_vocab}")
        with np.load(mel_filters) as npz:
            key = f"mel_{hp.n_mels}"
            if key not in npz:
                raise ModelFormatError(f"{mel_filters}: no {key} filters")
            filters = np.ascontiguousarray(npz[key], dtype="<f4")
        if filters.shape != (hp.n_mels, N_FFT_BINS):
            raise ModelFormatError(f"{mel_filters}: {key} has shape {filters.shape}")
        required = required_tensors(hp)
        out.parent.mkdir(parents=True, exist_ok=True)
        with replacing(out, mode=0o644, fsync=True, suffix=".tmp") as tmp:
            with tmp.open("wb") as f:
                f.write(struct.pack("<12i", GGML_MAGIC, *hp.as_tuple()))
                f.write(struct.pack("<2i", *filters.shape))
                f.write(filters.tobytes())
                f.write(struct.pack("<i", len(tokens)))
                for tok in tokens:
                    f.write(struct.pack("<i", len(tok)) + tok)
                written = _write_tensors(f, ct2, required, model_bin)
            if missing := sorted(set(required) - written):
                raise ModelFormatError(f"{model_bin}: no source for tensors {missing[:5]}")
    finally:
        ct2.close()


def _write_tensors(
    f: BinaryIO, ct2: Ct2Reader, required: dict[str, tuple[tuple[int, ...], int]], source: Path
) -> set[str]:
    written: set[str] = set()
    for name, array in _ggml_tensors(ct2):
        shape, ttype = required.get(name, ((), -1))
        if array.shape != shape:
            raise ModelFormatError(f"{source}: {name} has shape {array.shape}, whisper.cpp expects {shape}")
        data = np.ascontiguousarray(array, dtype="<f4" if ttype == 0 else "<f2")
        encoded = name.encode("utf-8")
        f.write(struct.pack("<3i", data.ndim, len(encoded), ttype))
        f.write(struct.pack(f"<{data.ndim}i", *reversed(data.shape)))
        f.write(encoded)
        f.write(data.tobytes())
        written.add(name)
    return written


# ---------------------------------------------------------------------------------------------------------------
# ggml inspection


class _Cursor:
    def __init__(self, f: BinaryIO, path: Path, size: int) -> None:
        self.f, self.path, self.size = f, path, size

    def read(self, n: int, what: str) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise ModelFormatError(f"{self.path}: truncated file (reading {what} at offset {self.f.tell()})")
        return data

    def ints(self, n: int, what: str) -> tuple[int, ...]:
        return struct.unpack(f"<{n}i", self.read(4 * n, what))

    def fail(self, message: str) -> ModelFormatError:
        return ModelFormatError(f"{self.path}: {message} (offset {self.f.tell()})")


def inspect_ggml(path: Path) -> GgmlWhisperInfo:
    """Parse a whisper.cpp ggml file fully without loading its weights (data is seeked past).

    Raises ModelMissingError if ``path`` is not a file and ModelFormatError, naming the file, on a bad magic,
    a truncated file, trailing bytes, or tensors that differ from what whisper.cpp's loader requires.
    """
    if not path.is_file():
        raise ModelMissingError(f"{path}: model file not found")
    size = path.stat().st_size
    with path.open("rb") as f:
        cur = _Cursor(f, path, size)
        if size < 4 or cur.ints(1, "magic")[0] != GGML_MAGIC:
            raise ModelFormatError(f"{path}: not a whisper.cpp ggml model (bad magic)")
        hp = WhisperHParams(*cur.ints(11, "hparams"))
        if min(hp.as_tuple()[:10]) <= 0 or hp.ftype < 0 or hp.n_mels > 512 or hp.n_vocab > 1 << 20:
            raise cur.fail(f"implausible hparams {hp}")
        n_mel, n_fft = cur.ints(2, "mel filter shape")
        if (n_mel, n_fft) != (hp.n_mels, N_FFT_BINS):
            raise cur.fail(f"mel filters are {n_mel}x{n_fft}, expected {hp.n_mels}x{N_FFT_BINS}")
        filters = np.frombuffer(cur.read(4 * n_mel * n_fft, "mel filters"), dtype="<f4")
        filters = filters.astype(np.float32).reshape(n_mel, n_fft)
        (n_tokens,) = cur.ints(1, "vocabulary size")
        if not 0 < n_tokens <= hp.n_vocab:
            raise cur.fail(f"vocabulary of {n_tokens} tokens for n_vocab {hp.n_vocab}")
        vocab: list[bytes] = []
        for _ in range(n_tokens):
            (length,) = cur.ints(1, "token length")
            if not 0 <= length <= 1024:
                raise cur.fail(f"token length {length}")
            vocab.append(cur.read(length, "token"))
        tensors = _read_tensor_headers(cur)
    try:
        required = required_tensors(hp)
    except ValueError as exc:
        raise ModelFormatError(f"{path}: {exc}") from exc
    if missing := sorted(set(required) - set(tensors)):
        raise ModelFormatError(f"{path}: missing tensors {missing[:5]} ({len(missing)} in all)")
    if extra := sorted(set(tensors) - set(required)):
        raise ModelFormatError(f"{path}: unknown tensors {extra[:5]}")
    for name, (shape, ttype) in required.items():
        got_shape, got_type = tensors[name]
        if (got_shape, got_type) != (shape, ttype):
            raise ModelFormatError(f"{path}: {name} is {got_shape} type {got_type}, expected {shape} type {ttype}")
    return GgmlWhisperInfo(hparams=hp, mel_filters=filters, vocab=vocab, tensors=tensors)


def _read_tensor_headers(cur: _Cursor) -> dict[str, tuple[tuple[int, ...], int]]:
    tensors: dict[str, tuple[tuple[int, ...], int]] = {}
    while (pos := cur.f.tell()) < cur.size:
        if cur.size - pos < 12:
            raise cur.fail(f"{cur.size - pos} trailing bytes after the last tensor")
        n_dims, name_len, ttype = cur.ints(3, "tensor header")
        if not (1 <= n_dims <= 4 and 0 < name_len <= 256 and ttype in _GGML_TYPES):
            raise cur.fail(f"corrupt tensor header or trailing garbage ({n_dims=}, {name_len=}, {ttype=})")
        dims = cur.ints(n_dims, "tensor dims")
        try:
            name = cur.read(name_len, "tensor name").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise cur.fail("tensor name is not UTF-8") from exc
        block, block_bytes = _GGML_TYPES[ttype]
        n_elements = int(np.prod(dims, dtype=np.int64))
        if min(dims) <= 0 or dims[0] % block:
            raise cur.fail(f"tensor {name} has invalid dims {dims} for type {ttype}")
        if name in tensors:
            raise cur.fail(f"tensor {name} appears twice")
        end = cur.f.tell() + n_elements // block * block_bytes
        if end > cur.size:
            raise cur.fail(f"truncated file: tensor {name} data runs {end - cur.size} bytes past the end")
        cur.f.seek(end)
        tensors[name] = (tuple(reversed(dims)), ttype)
    return tensors
