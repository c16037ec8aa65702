"""Cheap structural checks of the files of a model shipped in ONNX Runtime's own format: an ``.ort`` flatbuffer
(``format = "ort"``) and a list of length-prefixed token byte strings (``format = "token-list"``, Moonshine's
``tokenizer.bin``). As in :mod:`edgevoice.models.formats`, they refuse a file of another kind, an empty or a cut one
before the engine opens it; the manifest's sha256 is what proves the content."""

from __future__ import annotations

import struct
from pathlib import Path

from edgevoice.errors import ModelFormatError

__all__ = ["check_ort", "check_token_list", "parse_token_list"]

_ORT_IDENTIFIER = b"ORTM"
MIN_TOKENS = 259
"""A byte-level vocabulary holds at least its 256 byte tokens and three specials."""


def check_ort(path: Path) -> int:
    """An ONNX Runtime format model: the flatbuffer's identifier ``ORTM`` and a root offset inside the file. Returns
    the file's size."""
    size = _size(path, "ONNX Runtime (.ort)")
    with path.open("rb") as fh:
        head = fh.read(8)
    if len(head) < 8 or head[4:8] != _ORT_IDENTIFIER:
        raise ModelFormatError(f"{path}: not an ONNX Runtime format model (no ORTM identifier)")
    (root,) = struct.unpack("<I", head[:4])
    if not 8 <= root < size:
        raise ModelFormatError(f"{path}: ONNX Runtime model is truncated ({size} bytes); reinstall the model")
    return size


def parse_token_list(raw: bytes, path: Path) -> list[bytes]:
    """The tokens of a token list: each a length (one byte, or two when the first has its high bit set: base 128,
    low bits first) and that many bytes, ending exactly at the end of the file."""
    tokens: list[bytes] = []
    i = 0
    while i < len(raw):
        n, i = raw[i], i + 1
        if n >= 128:
            if i >= len(raw):
                raise ModelFormatError(f"{path}: token list is truncated at token {len(tokens)}; reinstall the model")
            n, i = (n & 0x7F) | raw[i] << 7, i + 1
        if i + n > len(raw):
            raise ModelFormatError(f"{path}: token list is truncated at token {len(tokens)}; reinstall the model")
        tokens.append(raw[i : i + n])
        i += n
    return tokens


def check_token_list(path: Path) -> list[bytes]:
    """A token list of at least :data:`MIN_TOKENS` tokens. Returns the tokens."""
    _size(path, "token list")
    tokens = parse_token_list(path.read_bytes(), path)
    if len(tokens) < MIN_TOKENS:
        raise ModelFormatError(f"{path}: not a token list ({len(tokens)} entries, expected at least {MIN_TOKENS})")
    return tokens


def _size(path: Path, kind: str) -> int:
    try:
        size = Path(path).stat().st_size
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: {kind} model file does not exist") from None
    if size == 0:
        raise ModelFormatError(f"{path}: {kind} model file is empty")
    return size
