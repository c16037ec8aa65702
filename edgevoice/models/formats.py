"""Cheap structural checks run on a model file before any native engine opens it.

A truncated download or a file of the wrong kind must give a :class:`ModelFormatError` that names the file, never a
crash inside llama.cpp, whisper.cpp or onnxruntime. These checks read headers only (a few MB for a GGUF with a large
vocabulary, a few bytes for ONNX) and check that what the header declares fits inside the file; the sha256 pinned in
the manifest is what proves the content.
"""

from __future__ import annotations

import io
import json
import mmap
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from edgevoice.errors import ModelFormatError
from edgevoice.models.ort_files import check_ort, check_token_list

if TYPE_CHECKING:
    from edgevoice.models.whisper_ggml import GgmlWhisperInfo

__all__ = [
    "FORMATS",
    "GgufInfo",
    "OnnxInfo",
    "check_format",
    "check_ggml_whisper",
    "check_gguf",
    "check_json",
    "check_onnx",
    "check_safetensors",
]

_GGUF_MAGIC = b"GGUF"
_GGUF_DEFAULT_ALIGNMENT = 32
_GGML_MAX_DIMS = 4
# GGUF value types: fixed-size scalars (struct code), 7 = bool, 8 = string, 9 = array.
_GGUF_SCALARS: dict[int, str] = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_GGUF_STRING = 8
_GGUF_ARRAY = 9


@dataclass(frozen=True)
class GgufInfo:
    """What the GGUF header says: enough to refuse a wrong or damaged file before llama.cpp loads it."""

    path: Path
    version: int
    tensor_count: int
    architecture: str | None
    name: str | None
    chat_template: str | None
    metadata: Mapping[str, str | int | float | bool] = field(hash=False, repr=False)

    @property
    def has_chat_template(self) -> bool:
        return bool(self.chat_template)


@dataclass(frozen=True)
class OnnxInfo:
    path: Path
    ir_version: int
    producer_name: str
    opset_versions: Mapping[str, int] = field(hash=False)


class _Truncated(Exception):
    """Internal: a read ran past the end of the file."""


class _GgufParser:
    """Reads a GGUF header straight from a read-only mmap; arrays are skipped, never materialised."""

    def __init__(self, buf: mmap.mmap) -> None:
        self.buf = buf
        self.size = len(buf)
        self.pos = 0

    def take(self, fmt: str) -> Any:
        width = struct.calcsize(fmt)
        if self.pos + width > self.size:
            raise _Truncated
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += width
        return value

    def string_length(self) -> int:
        length: int = self.take("<Q")
        if self.pos + length > self.size:
            raise _Truncated
        return length

    def string(self) -> str:
        length = self.string_length()
        raw = self.buf[self.pos : self.pos + length]
        self.pos += length
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.pos += self.string_length()

    def value(self, vtype: int) -> str | int | float | bool | None:
        """Reads a scalar or string; skips an array and returns None."""
        if vtype in _GGUF_SCALARS:
            value: int | float | bool = self.take(_GGUF_SCALARS[vtype])
            return value
        if vtype == _GGUF_STRING:
            return self.string()
        if vtype == _GGUF_ARRAY:
            self.skip_array()
            return None
        raise ModelFormatError(f"unknown GGUF value type {vtype} at byte {self.pos}")

    def skip_array(self) -> None:
        etype: int = self.take("<I")
        count: int = self.take("<Q")
        if etype in _GGUF_SCALARS:
            width = struct.calcsize(_GGUF_SCALARS[etype])
            if self.pos + width * count > self.size:
                raise _Truncated
            self.pos += width * count
        elif etype == _GGUF_STRING:
            if count > self.size:
                raise _Truncated
            unpack, buf, size, pos = struct.unpack_from, self.buf, self.size, self.pos
            for _ in range(count):
                if pos + 8 > size:
                    raise _Truncated
                pos += 8 + unpack("<Q", buf, pos)[0]
            if pos > size:
                raise _Truncated
            self.pos = pos
        elif etype == _GGUF_ARRAY:
            for _ in range(count):
                self.skip_array()
        else:
            raise ModelFormatError(f"unknown GGUF array element type {etype} at byte {self.pos}")


def _ggml_type_sizes() -> Mapping[int, tuple[int, int]]:
    from gguf.constants import GGML_QUANT_SIZES  # lazy: gguf imports numpy

    return {int(qtype): sizes for qtype, sizes in GGML_QUANT_SIZES.items()}


def check_gguf(path: Path) -> GgufInfo:
    """Parses the GGUF header and tensor table and checks every tensor's data lies inside the file."""
    path = Path(path)
    size = _nonempty_size(path, "GGUF")
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != _GGUF_MAGIC:
            raise ModelFormatError(f"{path}: not a GGUF file (it does not start with {_GGUF_MAGIC!r})")
        reader = _GgufParser(buf)
        reader.pos = 4
        try:
            return _parse_gguf(path, reader, size)
        except _Truncated:
            raise ModelFormatError(
                f"{path}: GGUF header is truncated or corrupt (ran past the end of the {size}-byte file "
                f"near byte {reader.pos}); reinstall the model"
            ) from None


def _parse_gguf(path: Path, reader: _GgufParser, size: int) -> GgufInfo:
    version: int = reader.take("<I")
    if version not in (2, 3):
        raise ModelFormatError(f"{path}: unsupported GGUF version {version} (2 or 3 expected)")
    tensor_count: int = reader.take("<Q")
    kv_count: int = reader.take("<Q")
    if tensor_count > size // 24 or kv_count > size // 12:
        raise ModelFormatError(f"{path}: implausible GGUF header ({tensor_count} tensors, {kv_count} keys)")
    metadata: dict[str, str | int | float | bool] = {}
    for _ in range(kv_count):
        key = reader.string()
        value = reader.value(reader.take("<I"))
        if value is not None:
            metadata[key] = value
    tensors: list[tuple[str, int, int, int]] = []  # name, ggml type, element count, offset
    for _ in range(tensor_count):
        name = reader.string()
        n_dims: int = reader.take("<I")
        if not 1 <= n_dims <= _GGML_MAX_DIMS:
            raise ModelFormatError(f"{path}: tensor {name!r} has {n_dims} dimensions (1..{_GGML_MAX_DIMS} allowed)")
        elements = 1
        for _ in range(n_dims):
            elements *= reader.take("<Q")
        tensors.append((name, reader.take("<I"), elements, reader.take("<Q")))
    alignment = metadata.get("general.alignment", _GGUF_DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise ModelFormatError(f"{path}: bad general.alignment {alignment!r}")
    data_start = -(-reader.pos // alignment) * alignment
    sizes = _ggml_type_sizes()
    for name, ggml_type, elements, offset in tensors:
        if ggml_type not in sizes:
            raise ModelFormatError(f"{path}: tensor {name!r} has unknown ggml type {ggml_type}")
        block, type_size = sizes[ggml_type]
        nbytes = elements // block * type_size
        if offset % alignment or elements % block:
            raise ModelFormatError(f"{path}: tensor {name!r} is misaligned (offset {offset}, {elements} elements)")
        end = data_start + offset + nbytes
        if end > size:
            raise ModelFormatError(
                f"{path}: truncated: tensor {name!r} ends at byte {end} but the file has {size} bytes; "
                "reinstall the model"
            )

    def text(key: str) -> str | None:
        value = metadata.get(key)
        return value if isinstance(value, str) else None

    return GgufInfo(
        path=path,
        version=version,
        tensor_count=tensor_count,
        architecture=text("general.architecture"),
        name=text("general.name"),
        chat_template=text("tokenizer.chat_template"),
        metadata=metadata,
    )


def _read_varint(fh: BinaryIO, limit: int) -> int:
    result = shift = 0
    for _ in range(10):
        if fh.tell() >= limit:
            raise _Truncated
        byte = fh.read(1)
        if not byte:
            raise _Truncated
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return result
        shift += 7
    raise ValueError("varint longer than 10 bytes")


def _parse_opset(raw: bytes) -> tuple[str, int]:
    """An OperatorSetIdProto: field 1 domain (string), field 2 version (int64)."""
    domain, version, fh = "", 0, io.BytesIO(raw)
    while fh.tell() < len(raw):
        key = _read_varint(fh, len(raw))
        if key == 0x0A:
            domain = fh.read(_read_varint(fh, len(raw))).decode("utf-8", errors="replace")
        elif key == 0x10:
            version = _read_varint(fh, len(raw))
        else:
            break
    return domain or "ai.onnx", version


def check_onnx(path: Path) -> OnnxInfo:
    """Walks the top-level fields of the ModelProto (seeking over the graph) and checks they end exactly at EOF.

    That catches a truncated or padded file, a file of another kind and an empty file for the price of a few
    reads. It does not validate the graph: onnxruntime does that, and its errors are wrapped by the adapters.
    """
    path = Path(path)
    size = _nonempty_size(path, "ONNX")
    ir_version, producer, has_graph = 0, "", False
    opsets: dict[str, int] = {}
    with path.open("rb") as fh:
        try:
            while fh.tell() < size:
                key = _read_varint(fh, size)
                number, wire = key >> 3, key & 7
                if number == 0 or wire not in (0, 1, 2, 5):
                    raise ValueError(f"invalid protobuf field at byte {fh.tell()}")
                if wire == 0:
                    value = _read_varint(fh, size)
                    if number == 1:
                        ir_version = value
                    continue
                length = {1: 8, 5: 4}.get(wire) or _read_varint(fh, size)
                if fh.tell() + length > size:
                    raise _Truncated
                if number in (2, 8) and length < 4096:
                    raw = fh.read(length)
                    if number == 2:
                        producer = raw.decode("utf-8", errors="replace")
                    else:
                        domain, version = _parse_opset(raw)
                        opsets[domain] = version
                    continue
                has_graph = has_graph or number == 7
                fh.seek(length, 1)
        except _Truncated:
            raise ModelFormatError(f"{path}: ONNX file is truncated ({size} bytes); reinstall the model") from None
        except ValueError as exc:
            raise ModelFormatError(f"{path}: not an ONNX model ({exc})") from exc
    if not 1 <= ir_version <= 64 or not has_graph:
        raise ModelFormatError(
            f"{path}: not an ONNX model (ir_version {ir_version}, graph {'present' if has_graph else 'missing'})"
        )
    return OnnxInfo(path=path, ir_version=ir_version, producer_name=producer, opset_versions=opsets)


def check_ggml_whisper(path: Path) -> GgmlWhisperInfo:
    """whisper.cpp's ggml model format, checked by the converter's own reader."""
    from edgevoice.models.whisper_ggml import inspect_ggml  # lazy: keep the converter off the import path

    _nonempty_size(Path(path), "ggml whisper")
    return inspect_ggml(Path(path))


def check_json(path: Path) -> dict[str, Any]:
    """A JSON object (such as a Piper voice config)."""
    path = Path(path)
    _nonempty_size(path, "JSON")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFormatError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelFormatError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


_SAFETENSORS_MAX_HEADER = 100 * 1024 * 1024  # the format's own limit


def check_safetensors(path: Path) -> dict[str, tuple[int, ...]]:
    """A safetensors file (weights read by numpy): the JSON header's tensors fit the file exactly. Returns each
    tensor's shape."""
    path = Path(path)
    size = _nonempty_size(path, "safetensors")
    with path.open("rb") as fh:
        head = fh.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 2 <= length <= min(_SAFETENSORS_MAX_HEADER, size - 8):
            raise ModelFormatError(f"{path}: not a safetensors file (header length {length}, file {size} bytes)")
        raw = fh.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        shapes = {k: tuple(int(n) for n in v["shape"]) for k, v in tensors.items()}
        end = max((int(v["data_offsets"][1]) for v in tensors.values()), default=0)
    except (UnicodeDecodeError, ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise ModelFormatError(f"{path}: not a safetensors file (its header is not JSON)") from exc
    if 8 + length + end != size:
        raise ModelFormatError(
            f"{path}: safetensors file is truncated or padded: its header describes {8 + length + end} bytes, "
            f"the file has {size}; reinstall the model"
        )
    return shapes


_CHECKS: Mapping[str, Callable[[Path], object]] = {
    "onnx": check_onnx,
    "gguf": check_gguf,
    "ggml-whisper": check_ggml_whisper,
    "json": check_json,
    "safetensors": check_safetensors,
    "ort": check_ort,
    "token-list": check_token_list,
}
FORMATS: frozenset[str] = frozenset(_CHECKS)


def check_format(path: Path, fmt: str) -> object:
    """Runs the check for ``fmt`` (a manifest ``format`` value) and returns what it found."""
    try:
        check = _CHECKS[fmt]
    except KeyError:
        raise ModelFormatError(f"{path}: unknown model format {fmt!r} (known: {', '.join(sorted(_CHECKS))})") from None
    return check(path)


def _nonempty_size(path: Path, kind: str) -> int:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ModelFormatError(f"{path}: {kind} model file does not exist") from None
    if size == 0:
        raise ModelFormatError(f"{path}: {kind} model file is empty")
    return size
