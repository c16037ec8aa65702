"""Read the variables of a CTranslate2 (faster-whisper) Whisper ``model.bin``, memory-mapped.

Layout (``python/ctranslate2/specs/model_spec.py``, ``ModelSpec._serialize``), little-endian:

    binary version (uint32, 4..6) | spec name (string) | spec revision (uint32) |
    variable count (uint32), then per variable: name (string), rank (uint8), dims (uint32 each),
    dtype id (uint8), byte count (uint32), raw data |
    alias count (uint32), then per alias: alias name (string), target name (string)

where a string is a uint16 length (NUL terminator included) and the bytes. Quantized weights are stored as
int8 (one ``<name>_scale`` per output row) or int16 (one scale in all); bfloat16 is widened to float32.
Any malformed file raises :class:`~edgevoice.errors.ModelFormatError` naming the file.
"""

from __future__ import annotations

import contextlib
import mmap
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt

from edgevoice.errors import ModelFormatError

__all__ = ["Ct2Reader"]

# CTranslate2 DataType enum (include/ctranslate2/types.h)
_CT2_DTYPES: dict[int, str] = {0: "<f4", 1: "i1", 2: "<i2", 3: "<i4", 4: "<f2", 5: "bfloat16"}


class Ct2Reader:
    """Variables of a CTranslate2 Whisper ``model.bin``, memory-mapped (read-only, no copy); :meth:`close` it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with path.open("rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as exc:  # mmap refuses an empty file
            raise ModelFormatError(f"{path}: empty file, not a CTranslate2 model.bin") from exc
        self._pos = 0
        self.variables: dict[str, npt.NDArray[np.generic]] = {}
        try:
            self._parse()
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            raise ModelFormatError(f"{path}: not a readable CTranslate2 model.bin ({exc})") from exc

    def _take(self, n: int) -> memoryview:
        if self._pos + n > len(self._map):
            raise ModelFormatError(f"{self.path}: truncated CTranslate2 model.bin at offset {self._pos}")
        view = memoryview(self._map)[self._pos : self._pos + n]
        self._pos += n
        return view

    def _int(self, fmt: str) -> int:
        return int(struct.unpack("<" + fmt, self._take(struct.calcsize(fmt)))[0])

    def _str(self) -> str:
        return bytes(self._take(self._int("H"))).rstrip(b"\0").decode("utf-8")

    def _parse(self) -> None:
        version = self._int("I")
        if not 4 <= version <= 6:
            raise ModelFormatError(f"{self.path}: unsupported CTranslate2 binary version {version}")
        spec = self._str()
        if spec != "WhisperSpec":
            raise ModelFormatError(f"{self.path}: CTranslate2 spec is {spec!r}, not 'WhisperSpec'")
        self._int("I")  # spec revision
        for _ in range(self._int("I")):
            name = self._str()
            shape = tuple(self._int("I") for _ in range(self._int("B")))
            type_id, n_bytes = self._int("B"), self._int("I")
            dtype = _CT2_DTYPES.get(type_id)
            if dtype is None:
                raise ModelFormatError(f"{self.path}: variable {name} has unknown dtype id {type_id}")
            raw = self._take(n_bytes)
            if dtype == "bfloat16":
                bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
                array: npt.NDArray[np.generic] = bits.view(np.float32)
            else:
                array = np.frombuffer(raw, dtype=dtype)
            if array.size != int(np.prod(shape)):
                raise ModelFormatError(f"{self.path}: variable {name} holds {array.size} values for shape {shape}")
            self.variables[name] = array.reshape(shape)
        for _ in range(self._int("I")):
            alias, target = self._str(), self._str()
            self.variables[alias] = self.variables[target]
        if self._pos != len(self._map):
            raise ModelFormatError(f"{self.path}: {len(self._map) - self._pos} unexpected bytes after the aliases")

    def get(self, name: str) -> npt.NDArray[np.float32]:
        """A weight as float32, dequantized if CTranslate2 stored it as int8/int16 with a scale."""
        if name not in self.variables:
            raise ModelFormatError(f"{self.path}: missing CTranslate2 variable {name}")
        value = self.variables[name]
        scale = self.variables.get(name + "_scale")
        if value.dtype.kind == "i" and scale is not None:  # int8: one scale per output row; int16: one in all
            scale32 = scale.astype(np.float32).reshape((-1,) + (1,) * (value.ndim - 1) if scale.ndim else ())
            return value.astype(np.float32) / scale32
        return value.astype(np.float32, copy=False)

    def scalar(self, name: str) -> int:
        if name not in self.variables:
            raise ModelFormatError(f"{self.path}: missing CTranslate2 variable {name}")
        return int(self.variables[name].reshape(-1)[0])

    def count_layers(self, prefix: str) -> int:
        n = 0
        while any(k.startswith(f"{prefix}/layer_{n}/") for k in self.variables):
            n += 1
        return n

    def close(self) -> None:
        self.variables.clear()
        with contextlib.suppress(BufferError):  # an array still views the map (a traceback): the GC unmaps it
            self._map.close()
