"""A single-producer/single-consumer ring of float32 audio in shared memory, safe to use from an audio callback.

One side writes (microphone callback, TTS worker), the other reads (VAD worker, speaker callback), as threads of
one process or as two processes. ``write`` and ``read`` never block or lock, so both may run in a PyAudio callback;
worker threads/processes that want to wait for data use :meth:`SharedRing.wait_for` (sleep-polling).

Ownership: the handle :meth:`SharedRing.create` returns owns the block and alone may ``unlink()`` it (``with
SharedRing.create(...) as ring:`` closes and unlinks on exit); every other handle (:meth:`~SharedRing.attach`, or
unpickled in a ``multiprocessing`` child) only close it. If the owner dies without unlinking, Python's resource
tracker removes the block. Attached handles never register with that tracker (``track=False`` of Python 3.13).
The usual workaround, register then unregister, is wrong for ``multiprocessing`` children: they share the creator's
tracker, so their unregister drops the creator's entry (a ``KeyError`` when the creator unlinks; no crash cleanup).

Layout: a 384-byte header of uint64 words, then ``capacity * channels`` float32 samples. The header has three
128-byte lines, so the two sides never write to one cache line: identity and reset baselines; the producer's words
(write position, overrun samples/events, high-water mark); the consumer's (read position, underrun samples/events).
Positions count frames since creation and never wrap (2**64 frames at 16 kHz is 36 million years).

Why this is correct across processes, on x86-64 and aarch64:

- Each position is one aligned 8-byte word written by one side only: never torn (aligned 8-byte accesses are
  single-copy atomic on both), never lost to a concurrent write.
- The producer reads the read position *before* it overwrites a slot and copies the samples *before* it publishes
  the new write position; the consumer reads the write position *before* it reads a slot and copies the samples
  out *before* it publishes the new read position. Another core must observe these orders too. x86-64 (TSO) keeps
  stores in order with stores and loads with loads, and each step is a separate opaque C call that the compiler
  cannot reorder, so plain numpy loads and stores suffice (ordering ``"plain"``). aarch64 reorders both, so there
  positions are read with an acquire load and published with a release store (``__atomic_load_8`` /
  ``__atomic_store_8`` from libatomic, called through ``ctypes.PyDLL``, which keeps the GIL inside an audio
  callback): ordering ``"atomic"``. Without libatomic on such a CPU the ring refuses to start
  (``ring_no_atomics``: install ``libatomic1``) rather than risk stale audio.
- Statistics counters are plain stores by their owning side; a reader may see them a little late, which is
  harmless. :meth:`SharedRing.reset_stats` is the one exception to single-writer: see there.
"""

from __future__ import annotations

import os
import platform
import struct
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from edgevoice.audio.shared_block import UntrackedBlock, libatomic
from edgevoice.errors import ConfigError, EdgeVoiceError

Ordering = Literal["auto", "plain", "atomic"]
FloatArray = npt.NDArray[np.float32]

_MAGIC = 0x4556_5249_4E47_0001  # "EVRING" + format version 1
_HEADER_BYTES = 384
# Word indices. Line 0 (words 0-15): identity, reset baselines; line 1 (16-31): producer's; line 2 (32-47): consumer's.
_W_MAGIC, _W_CAPACITY, _W_CHANNELS, _W_WRITTEN_BASE, _W_READ_BASE = 0, 1, 2, 3, 4
_W_WRITE, _W_OVERRUN_SAMPLES, _W_OVERRUN_EVENTS, _W_HIGH_WATER = 16, 17, 18, 19
_W_READ, _W_UNDERRUN_SAMPLES, _W_UNDERRUN_EVENTS = 32, 33, 34
_ACQUIRE, _RELEASE = 2, 3  # C11 memory_order values used by libatomic


@dataclass(frozen=True, slots=True)
class RingStats:
    """Counters since creation or the last :meth:`SharedRing.reset_stats`; sample counts are frames."""

    written: int
    read: int
    overrun_samples: int
    """Samples the producer dropped because the ring was full (always the newest ones)."""
    overrun_events: int
    underrun_samples: int
    """Samples ``read_into`` had to fill with zeros because the ring ran dry."""
    underrun_events: int
    high_water: int
    """The fullest the ring was seen by the producer."""
    capacity: int


class _Stop(Protocol):
    def is_set(self) -> bool: ...
    def wait(self, timeout: float | None = ...) -> bool: ...


class SharedRing:
    """SPSC ring of float32 frames in one shared-memory block. See the module docstring for the protocol."""

    def __init__(self, block: Any, *, owner: bool, ordering: Ordering = "auto") -> None:
        """Use :meth:`create` or :meth:`attach`."""
        self._closed = True  # until fully set up
        self.name: str = block.name
        buf: memoryview = block.buf
        # Validate and resolve everything that can fail before the first numpy view pins the buffer.
        magic, capacity, channels = struct.unpack_from("=3Q", buf, 0) if len(buf) >= _HEADER_BYTES else (0, 0, 0)
        if magic != _MAGIC or len(buf) < _HEADER_BYTES + 4 * capacity * channels:
            raise EdgeVoiceError(f"shared memory {self.name!r} is not an edgevoice ring", code="ring_format")
        if ordering == "auto":
            ordering = "plain" if platform.machine().lower() in ("x86_64", "amd64") else "atomic"
        atomics = libatomic() if ordering == "atomic" else None
        self.capacity: int = capacity
        self.channels: int = channels
        self.ordering: Ordering = ordering
        self._hdr = np.frombuffer(buf, dtype=np.uint64, count=_HEADER_BYTES // 8)
        data = np.frombuffer(buf, dtype=np.float32, count=capacity * channels, offset=_HEADER_BYTES)
        self._data: FloatArray = data if channels == 1 else data.reshape(capacity, channels)
        del data
        hdr = self._hdr
        self._load: Callable[[int], int] = lambda word: int(hdr[word])
        self._store: Callable[[int, int], None] = hdr.__setitem__
        if atomics is not None:
            load, store, base = *atomics, int(hdr.ctypes.data)
            self._load = lambda word: int(load(base + 8 * word, _ACQUIRE))
            self._store = lambda word, value: store(base + 8 * word, value, _RELEASE)
        self._owner_pid = os.getpid() if owner else None
        self._block = block  # set after the views, so that a dropped handle frees the views first
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------------------------
    @classmethod
    def create(
        cls, capacity: int, name: str | None = None, *, channels: int = 1, ordering: Ordering = "auto"
    ) -> SharedRing:
        """A new ring of ``capacity`` frames; the returned handle owns the block and must :meth:`unlink` it."""
        if isinstance(capacity, bool) or not isinstance(capacity, int) or not 1 <= capacity <= 2**31:
            raise ConfigError(f"capacity = {capacity!r}: must be a whole number between 1 and {2**31}")
        if isinstance(channels, bool) or not isinstance(channels, int) or not 1 <= channels <= 64:
            raise ConfigError(f"channels = {channels!r}: must be a whole number between 1 and 64")
        try:
            block = shared_memory.SharedMemory(name=name, create=True, size=_HEADER_BYTES + 4 * capacity * channels)
        except FileExistsError as exc:
            raise EdgeVoiceError(f"shared memory {name!r} already exists", code="ring_exists") from exc
        buf = typing.cast(memoryview, block.buf)
        struct.pack_into("=3Q", buf, 0, 0, capacity, channels)  # a new block is all zeros
        struct.pack_into("=Q", buf, 0, _MAGIC)  # last: nobody sees a half-made header with a valid magic
        try:
            return cls(block, owner=True, ordering=ordering)
        except BaseException:
            block.close()
            block.unlink()
            raise

    @classmethod
    def attach(cls, name: str, *, ordering: Ordering = "auto") -> SharedRing:
        """Open an existing ring by name (capacity and channels come from its header); never the owner."""
        block = UntrackedBlock(name)
        try:
            return cls(block, owner=False, ordering=ordering)
        except BaseException:
            block.close()
            raise

    def __reduce__(self) -> tuple[Callable[[str, Ordering], SharedRing], tuple[str, Ordering]]:
        """Pickles as its name: the receiving process attaches, not as owner."""
        self._check_open()
        return (_attach_pickled, (self.name, self.ordering))

    @property
    def owner(self) -> bool:
        """True for the creating handle, in the creating process only (a forked child inherits no ownership)."""
        return self._owner_pid is not None and self._owner_pid == os.getpid()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Unmap this handle (idempotent). The block itself lives on until the owner unlinks it."""
        if self._closed:
            return
        self._closed = True
        del self._hdr, self._data, self._load, self._store  # every view into the buffer goes before the unmap
        self._block.close()

    def unlink(self) -> None:
        """Remove the block from the system (owner only; handles still open keep their mapping until closed)."""
        if not self.owner:
            raise EdgeVoiceError(f"ring {self.name!r} is not owned by this handle", code="ring_not_owner")
        self._block.unlink()
        self._owner_pid = None

    def __enter__(self) -> SharedRing:
        return self

    def __exit__(self, *exc: object) -> None:
        owner = self.owner
        self.close()
        if owner:
            self.unlink()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.available()}/{self.capacity} queued"
        return f"SharedRing({self.name!r}, channels={self.channels}, owner={self.owner}, {state})"

    # -- producer side -----------------------------------------------------------------------------------------------
    def write(self, samples: npt.ArrayLike) -> int:
        """Append what fits and return how many frames were written. Never blocks.

        When the ring is full the *newest* frames (the tail of ``samples``) are dropped and counted as an overrun:
        what is queued stays a contiguous stream, and the producer never has to move the consumer's read position.
        """
        x = self._frames(samples)
        n = len(x)
        if n == 0:
            return 0
        hdr, cap = self._hdr, self.capacity
        w = int(hdr[_W_WRITE])  # our own word: a plain load sees our last store
        r = self._load(_W_READ)
        k = min(n, cap - (w - r))
        if k < n:
            hdr[_W_OVERRUN_SAMPLES] += n - k
            hdr[_W_OVERRUN_EVENTS] += 1
        if k:
            i = w % cap
            first = min(k, cap - i)
            self._data[i : i + first] = x[:first]
            if k > first:
                self._data[: k - first] = x[first:k]
            self._store(_W_WRITE, w + k)  # publish only after the copy
        fill = w + k - r
        if fill > int(hdr[_W_HIGH_WATER]):
            hdr[_W_HIGH_WATER] = fill
        return k

    # -- consumer side -----------------------------------------------------------------------------------------------
    def read(self, n: int) -> FloatArray:
        """Up to ``n`` frames, oldest first, as a new array (possibly empty). Never blocks."""
        return self._take(n, advance=True)

    def peek(self, n: int) -> FloatArray:
        """Like :meth:`read` but leaves the frames queued."""
        return self._take(n, advance=False)

    def read_into(self, out: FloatArray, *, count_underrun: bool = True) -> int:
        """Fill ``out`` with queued frames and zeros after them; return the frames read. Never blocks. A shortfall
        counts as an underrun only if ``count_underrun`` (the output callback passes "playing", not between replies).
        """
        if out.dtype != np.float32:
            raise EdgeVoiceError(f"read_into needs a float32 array, got {out.dtype}", code="ring_shape")
        m = len(self._frames(out))
        r, k = self._readable(m)
        self._copy_out(r, k, out)
        if k:
            self._store(_W_READ, r + k)
        if k < m:
            out[k:] = 0.0
            if count_underrun:
                self._hdr[_W_UNDERRUN_SAMPLES] += m - k
                self._hdr[_W_UNDERRUN_EVENTS] += 1
        return k

    def discard_all(self) -> int:
        """Drop everything queued (barge-in: silence the output now) and return how many frames were dropped."""
        self._check_open()
        r, w = int(self._hdr[_W_READ]), self._load(_W_WRITE)
        if w > r:
            self._store(_W_READ, w)
        return w - r

    def wait_for(
        self,
        n: int,
        timeout: float,
        poll_s: float = 0.002,
        *,
        stop: _Stop | None = None,
        rate: float | None = None,
        burst: int = 0,
    ) -> bool:
        """Sleep-poll until ``n`` frames are queued: True, or False after ``timeout`` s or once ``stop`` is set.

        For worker threads/processes only, never for an audio callback. ``stop`` (a ``threading.Event`` or
        ``multiprocessing.Event``) makes shutdown prompt: it is waited on instead of sleeping. ``rate`` and
        ``burst``: a producer that writes in real time (a microphone), ``rate`` frames per second in writes of up to
        ``burst`` frames (an audio callback's worth). Polling before the missing frames can have come only finds the
        ring short, so the wait sleeps until ``burst`` frames before they are due, then polls every ``poll_s`` for
        the write that completes them: a few wake-ups per 32 ms frame instead of sixteen, and as prompt.
        """
        if not 0 <= n <= self.capacity:
            raise EdgeVoiceError(f"wait_for({n}): can never be met by a ring of {self.capacity}", code="ring_invalid")
        deadline = time.monotonic() + timeout
        while (queued := self.available()) < n:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                return False
            step = min(max(poll_s, (n - queued - burst) / rate) if rate else poll_s, left)
            if stop is not None:
                stop.wait(step)
            else:
                time.sleep(step)
        return True

    # -- either side -------------------------------------------------------------------------------------------------
    def available(self) -> int:
        """Frames queued now."""
        self._check_open()
        return self._load(_W_WRITE) - self._load(_W_READ)

    def free(self) -> int:
        """Frames that can be written now without an overrun."""
        return self.capacity - self.available()

    def stats(self) -> RingStats:
        self._check_open()
        h = [int(v) for v in self._hdr]
        return RingStats(
            written=h[_W_WRITE] - h[_W_WRITTEN_BASE],
            read=h[_W_READ] - h[_W_READ_BASE],
            overrun_samples=h[_W_OVERRUN_SAMPLES],
            overrun_events=h[_W_OVERRUN_EVENTS],
            underrun_samples=h[_W_UNDERRUN_SAMPLES],
            underrun_events=h[_W_UNDERRUN_EVENTS],
            high_water=h[_W_HIGH_WATER],
            capacity=self.capacity,
        )

    def reset_stats(self) -> None:
        """Start the counters again; the high-water mark restarts at the current fill.

        This writes both sides' counter words, so call it while the other side is idle (between turns, before a
        stream starts); a counter the other side bumps at that same instant may keep its old value. Positions are
        never touched, so the audio itself is unaffected either way.
        """
        self._check_open()
        hdr = self._hdr
        w, r = self._load(_W_WRITE), self._load(_W_READ)
        hdr[_W_WRITTEN_BASE], hdr[_W_READ_BASE] = w, r
        hdr[_W_OVERRUN_SAMPLES] = hdr[_W_OVERRUN_EVENTS] = 0
        hdr[_W_UNDERRUN_SAMPLES] = hdr[_W_UNDERRUN_EVENTS] = 0
        hdr[_W_HIGH_WATER] = w - r

    # -- internals ---------------------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise EdgeVoiceError(f"ring {self.name!r} is closed", code="ring_closed")

    def _frames(self, samples: npt.ArrayLike) -> FloatArray:
        self._check_open()
        x = np.asarray(samples, dtype=np.float32)
        if x.shape[1:] != self._data.shape[1:] or x.ndim != self._data.ndim:
            want = f"(n, {self.channels})" if self.channels > 1 else "(n,)"
            raise EdgeVoiceError(f"ring frames must have shape {want}, got {x.shape}", code="ring_shape")
        return x

    def _take(self, n: int, *, advance: bool) -> FloatArray:
        r, k = self._readable(n)
        out = np.empty((k, self.channels) if self.channels > 1 else k, dtype=np.float32)
        self._copy_out(r, k, out)
        if k and advance:
            self._store(_W_READ, r + k)
        return out

    def _readable(self, n: int) -> tuple[int, int]:
        self._check_open()
        if n < 0:
            raise EdgeVoiceError(f"cannot read {n} frames", code="ring_invalid")
        r = int(self._hdr[_W_READ])
        w = self._load(_W_WRITE)  # before any slot is read
        return r, min(n, w - r)

    def _copy_out(self, r: int, k: int, out: FloatArray) -> None:
        if not k:
            return
        i = r % self.capacity
        first = min(k, self.capacity - i)
        out[:first] = self._data[i : i + first]
        if k > first:
            out[first:k] = self._data[: k - first]


def _attach_pickled(name: str, ordering: Ordering) -> SharedRing:
    return SharedRing.attach(name, ordering=ordering)
