"""The shared-memory audio ring: wrap-around, overrun/underrun accounting, barge-in flush, and real processes."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import platform
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.ring import RingStats, SharedRing
from edgevoice.errors import ConfigError, EdgeVoiceError

ROOT = Path(__file__).resolve().parents[1]
SHM = Path("/dev/shm")
PREFIX = f"evtest_{os.getpid()}_"
MakeRing = Callable[..., SharedRing]


def _name() -> str:
    return PREFIX + uuid.uuid4().hex[:8]


def _ours() -> set[str]:
    """Shared memory blocks this test session created and has not removed."""
    return {p.name for p in SHM.iterdir() if p.name.startswith(PREFIX)} if SHM.is_dir() else set()


@pytest.fixture(params=["plain", "atomic"])
def make_ring(request: pytest.FixtureRequest) -> Iterator[MakeRing]:
    """``make_ring(capacity, channels=1)`` in both orderings; every ring is closed and unlinked afterwards."""
    made: list[SharedRing] = []

    def make(capacity: int, channels: int = 1) -> SharedRing:
        ring = SharedRing.create(capacity, _name(), channels=channels, ordering=request.param)
        made.append(ring)
        return ring

    yield make
    for ring in made:
        owner = ring.owner
        ring.close()
        if owner:
            ring.unlink()


def _known_signal(n: int) -> np.ndarray:
    """One second of a chirp plus a ramp: every sample differs, so a lost, repeated or swapped block shows."""
    t = np.arange(n, dtype=np.float64) / RATE
    return (0.5 * np.sin(2 * np.pi * (200 + 900 * t) * t) + 1e-6 * np.arange(n)).astype(np.float32)


def test_random_chunks_match_a_reference_queue(make_ring: MakeRing) -> None:
    capacity = 1000  # not a power of two: every wrap position gets exercised
    ring = make_ring(capacity)
    rng = np.random.default_rng(20240611)
    ref: deque[float] = deque()
    next_value, overrun_samples, overrun_events, underruns, high = 0, 0, 0, 0, 0
    for _ in range(3000):
        n = int(rng.integers(0, 400))
        chunk = np.arange(next_value, next_value + n, dtype=np.float32)
        next_value += n
        fits = min(n, capacity - len(ref))
        assert ring.write(chunk) == fits
        ref.extend(chunk[:fits].tolist())
        if fits < n:
            overrun_samples, overrun_events = overrun_samples + n - fits, overrun_events + 1
        high = max(high, len(ref))
        assert ring.available() == len(ref) and ring.free() == capacity - len(ref)
        m = int(rng.integers(0, 450))
        if rng.random() < 0.5:
            expected = [ref[i] for i in range(min(m, len(ref)))]
            np.testing.assert_array_equal(ring.peek(m), expected)
            got = ring.read(m)
        else:
            got = np.full(m, np.nan, dtype=np.float32)
            k = ring.read_into(got)
            if k < m:
                assert not got[k:].any()
                underruns += 1
            got = got[:k]
        np.testing.assert_array_equal(got, [ref.popleft() for _ in range(min(m, len(ref)))])
    stats = ring.stats()
    assert stats.written + overrun_samples == next_value
    assert stats.read == stats.written - len(ref)
    assert (stats.overrun_samples, stats.overrun_events) == (overrun_samples, overrun_events)
    assert stats.underrun_events == underruns
    assert stats.high_water == high
    assert overrun_events > 50 and underruns > 50  # the random walk did reach both edges


def test_overrun_keeps_the_oldest_and_drops_the_newest(make_ring: MakeRing) -> None:
    ring = make_ring(10)
    assert ring.write(np.arange(6)) == 6
    assert ring.write(np.arange(100, 106)) == 4
    assert ring.write(np.arange(200, 203)) == 0
    stats = ring.stats()
    assert (stats.overrun_samples, stats.overrun_events, stats.high_water) == (5, 2, 10)
    np.testing.assert_array_equal(ring.read(20), [0, 1, 2, 3, 4, 5, 100, 101, 102, 103])
    assert ring.write(np.arange(300, 307)) == 7  # wraps: 4 slots at the end, 3 at the start
    np.testing.assert_array_equal(ring.read(20), np.arange(300, 307))


def test_underrun_zero_fills_and_counts_only_when_asked(make_ring: MakeRing) -> None:
    ring = make_ring(64)
    ring.write(np.ones(5))
    out = np.full(8, 7.0, dtype=np.float32)
    assert ring.read_into(out) == 5
    np.testing.assert_array_equal(out, [1, 1, 1, 1, 1, 0, 0, 0])
    assert (ring.stats().underrun_samples, ring.stats().underrun_events) == (3, 1)
    out[:] = 7.0
    assert ring.read_into(out, count_underrun=False) == 0  # idle between replies: silence, not an underrun
    assert not out.any()
    ring.write(np.ones(8))
    assert ring.read_into(out) == 8  # a full read is no underrun
    assert (ring.stats().underrun_samples, ring.stats().underrun_events) == (3, 1)
    with pytest.raises(EdgeVoiceError) as err:
        ring.read_into(np.zeros(4))  # float64: would silently fill a copy
    assert err.value.code == "ring_shape"


def test_high_water_and_reset_stats(make_ring: MakeRing) -> None:
    ring = make_ring(100)
    for size in (30, 50):
        ring.write(np.zeros(size))
    ring.read(60)
    ring.write(np.zeros(10))
    assert ring.stats() == RingStats(90, 60, 0, 0, 0, 0, 80, 100)
    ring.write(np.zeros(200))
    ring.read_into(np.zeros(200, dtype=np.float32))
    ring.reset_stats()
    assert ring.stats() == RingStats(0, 0, 0, 0, 0, 0, 0, 100)
    ring.write(np.zeros(7))
    assert ring.stats() == RingStats(7, 0, 0, 0, 0, 0, 7, 100)


def test_discard_all_silences_at_once_and_the_stream_goes_on(make_ring: MakeRing) -> None:
    ring = make_ring(50)
    ring.write(np.arange(40))
    ring.read(30)
    ring.write(np.arange(40, 70))  # wraps
    assert ring.discard_all() == 40
    assert ring.available() == 0 and ring.discard_all() == 0
    out = np.empty(4, dtype=np.float32)
    assert ring.read_into(out, count_underrun=False) == 0 and not out.any()
    ring.write(np.arange(100, 150))
    np.testing.assert_array_equal(ring.read(50), np.arange(100, 150))
    assert ring.stats().read == 30 + 40 + 50  # discarded frames count as consumed


def test_channels_and_shapes(make_ring: MakeRing) -> None:
    ring = make_ring(5, channels=2)
    frames = np.arange(16, dtype=np.float32).reshape(8, 2)
    assert ring.write(frames[:3]) == 3
    np.testing.assert_array_equal(ring.read(2), frames[:2])
    assert ring.write(frames[3:]) == 4  # wraps
    np.testing.assert_array_equal(ring.peek(9), frames[2:7])
    out = np.empty((6, 2), dtype=np.float32)
    assert ring.read_into(out) == 5
    np.testing.assert_array_equal(out, np.vstack([frames[2:7], [[0, 0]]]))
    for bad in (np.zeros(4), np.zeros((4, 3)), np.float32(1.0)):
        with pytest.raises(EdgeVoiceError) as err:
            ring.write(bad)
        assert err.value.code == "ring_shape"


def test_pickles_as_its_name_and_attaches_without_owning(make_ring: MakeRing) -> None:
    ring = make_ring(32)
    assert len(pickle.dumps(ring)) < 200
    other = pickle.loads(pickle.dumps(ring))
    try:
        assert (other.name, other.capacity, other.owner, ring.owner) == (ring.name, 32, False, True)
        other.write(np.arange(3))
        np.testing.assert_array_equal(ring.read(5), [0, 1, 2])
        with pytest.raises(EdgeVoiceError) as err:
            other.unlink()
        assert err.value.code == "ring_not_owner"
    finally:
        other.close()
    assert ring.name in _ours()  # closing an attached handle leaves the block alone


def test_context_manager_owner_unlinks_and_closed_handles_refuse() -> None:
    with SharedRing.create(16, _name()) as ring:
        assert ring.name in _ours() and ring.ordering in ("plain", "atomic")
        if platform.machine().lower() in ("x86_64", "amd64"):
            assert ring.ordering == "plain"
    assert ring.name not in _ours() and ring.closed
    for call in (lambda: ring.write(np.zeros(1)), lambda: ring.read(1), ring.available, lambda: pickle.dumps(ring)):
        with pytest.raises(EdgeVoiceError) as err:
            call()
        assert err.value.code == "ring_closed"
    ring.close()  # idempotent


def test_bad_arguments_and_foreign_blocks() -> None:
    with pytest.raises(ConfigError, match="capacity"):
        SharedRing.create(0)
    with pytest.raises(ConfigError, match="channels"):
        SharedRing.create(10, channels=0)
    with pytest.raises(EdgeVoiceError) as err:
        SharedRing.attach(_name())
    assert err.value.code == "ring_missing"
    foreign = shared_memory.SharedMemory(_name(), create=True, size=4096)
    try:
        with pytest.raises(EdgeVoiceError) as err:
            SharedRing.attach(foreign.name)
        assert err.value.code == "ring_format"
    finally:
        foreign.close()
        foreign.unlink()
    with SharedRing.create(8, _name()) as ring:
        with pytest.raises(EdgeVoiceError) as err:
            SharedRing.create(8, ring.name)
        assert err.value.code == "ring_exists"
        with pytest.raises(EdgeVoiceError) as err:
            ring.wait_for(9, timeout=0)
        assert err.value.code == "ring_invalid"


class _ProducingStop:
    """A stand-in for the stop event whose every wait lets a producer add a few frames."""

    def __init__(self, ring: SharedRing, per_wait: int) -> None:
        self.ring, self.per_wait, self.waits = ring, per_wait, 0
        self.timeouts: list[float | None] = []

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        self.timeouts.append(timeout)
        self.ring.write(np.zeros(self.per_wait))
        return False


def test_wait_for(make_ring: MakeRing) -> None:
    ring = make_ring(64)
    assert ring.wait_for(0, timeout=0)
    assert not ring.wait_for(1, timeout=0)
    producer = _ProducingStop(ring, per_wait=10)
    assert ring.wait_for(32, timeout=60, stop=producer)
    assert producer.waits == 4 and ring.available() == 40
    stop = threading.Event()
    stop.set()
    started = time.monotonic()
    assert not ring.wait_for(64, timeout=60, stop=stop)  # shutdown does not wait out the timeout
    assert time.monotonic() - started < 5


def test_wait_for_a_real_time_producer_sleeps_as_long_as_the_missing_frames_take() -> None:
    with SharedRing.create(64, _name()) as ring:
        producer = _ProducingStop(ring, per_wait=10)
        assert ring.wait_for(32, timeout=60, stop=producer, rate=1000.0)
    # 32, 22, 12 then 2 frames missing at 1000 frames/s; never below the poll interval
    assert producer.timeouts == pytest.approx([0.032, 0.022, 0.012, 0.002])
    with SharedRing.create(64, _name()) as ring:
        producer = _ProducingStop(ring, per_wait=10)
        assert ring.wait_for(32, timeout=60, stop=producer, rate=1000.0, burst=10)
    # a write of up to 10 frames may complete them: the sleep ends 10 frames early, then the ring is polled
    assert producer.timeouts == pytest.approx([0.022, 0.012, 0.002, 0.002])


# -- real processes ------------------------------------------------------------------------------------------------


def _produce(ring: SharedRing, total: int, frame: int) -> None:
    """Child process: write a known signal in callback-sized frames, never overrunning (waits for room)."""
    signal = _known_signal(total)
    deadline = time.monotonic() + 60
    pos = 0
    try:
        while pos < total and time.monotonic() < deadline:
            room = min(frame, ring.free(), total - pos)
            if room:
                pos += ring.write(signal[pos : pos + room])
            else:
                time.sleep(0.0002)  # back-pressure in the producer only; the test never sleeps to synchronise
    finally:
        ring.close()


def cross_process_round_trip(ordering: str = "auto") -> tuple[np.ndarray, RingStats, int | None]:
    """A spawned child produces one second through a 0.128 s ring while this process consumes it."""
    ctx = multiprocessing.get_context("spawn")
    with SharedRing.create(2048, _name(), ordering=ordering) as ring:  # type: ignore[arg-type]
        child = ctx.Process(target=_produce, args=(ring, RATE, 160))
        child.start()
        chunks, got, deadline = [], 0, time.monotonic() + 60
        try:
            while got < RATE and time.monotonic() < deadline:
                if ring.wait_for(1, timeout=1.0):
                    chunks.append(ring.read(RATE - got))
                    got += len(chunks[-1])
            child.join(30)
        finally:
            if child.is_alive():
                child.kill()
                child.join()
        return np.concatenate(chunks), ring.stats(), child.exitcode


@pytest.mark.parametrize("ordering", ["auto", "atomic"])
def test_a_second_process_produces_one_second_bit_exact(ordering: str) -> None:
    before = _ours()
    received, stats, exitcode = cross_process_round_trip(ordering)
    assert exitcode == 0
    assert received.dtype == np.float32 and len(received) == RATE
    assert np.array_equal(received.view(np.uint32), _known_signal(RATE).view(np.uint32))
    assert (stats.written, stats.read, stats.overrun_samples, stats.underrun_samples) == (RATE, RATE, 0, 0)
    assert stats.high_water <= 2048
    assert _ours() == before  # no block left behind


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_no_resource_tracker_noise_and_no_leak_in_a_fresh_interpreter() -> None:
    """The tracker writes to stderr after the parent exits (leak warnings, a KeyError on a double unregister), so
    the whole round trip runs in its own interpreter and its stderr, the tracker's included, must stay empty."""
    before = _ours()
    done = _run_python(
        """
        from tests.test_ring import cross_process_round_trip
        if __name__ == "__main__":
            received, stats, exitcode = cross_process_round_trip()
            assert exitcode == 0 and len(received) == 16000, (exitcode, len(received))
            print("ok", stats.written)
        """
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "ok 16000", "")
    assert _ours() == before


def test_an_unrelated_process_that_attaches_does_not_destroy_the_block(make_ring: MakeRing) -> None:
    """A process with its own resource tracker must neither unlink the block at exit nor warn about a leak."""
    ring = make_ring(100)
    done = _run_python(
        f"""
        import numpy as np
        from edgevoice.audio.ring import SharedRing
        ring = SharedRing.attach({ring.name!r})
        print(ring.write(np.arange(5, dtype=np.float32)))
        ring.close()
        """
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "5", "")
    assert ring.name in _ours()
    np.testing.assert_array_equal(ring.read(10), np.arange(5))
