#!/usr/bin/env python3
"""Cost of the shared-memory ring per 10 ms audio frame (160 samples at 16 kHz): the audio callback's budget.

Usage: .venv/bin/python scripts/bench_ring.py [--frames N] [--frame-samples 160]

For each memory ordering (plain numpy stores, the x86-64 default; libatomic acquire/release, the aarch64 default)
it prints the per-call latency of ``write`` and ``read_into`` (median and p99, in microseconds) and the throughput
of a write+read pair, as samples per second and as a multiple of real time at 16 kHz.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.ring import SharedRing


def bench(ordering: str, frames: int, frame_samples: int) -> None:
    frame = np.random.default_rng(0).standard_normal(frame_samples).astype(np.float32)
    out = np.empty(frame_samples, dtype=np.float32)
    write_ns = np.empty(frames, dtype=np.int64)
    read_ns = np.empty(frames, dtype=np.int64)
    clock = time.perf_counter_ns
    with SharedRing.create(SAMPLE_RATE, ordering=ordering) as ring:  # type: ignore[arg-type]
        for _ in range(1000):  # warm up
            ring.write(frame)
            ring.read_into(out)
        start = clock()
        for i in range(frames):
            t0 = clock()
            ring.write(frame)
            t1 = clock()
            ring.read_into(out)
            read_ns[i], write_ns[i] = clock() - t1, t1 - t0
        total_s = (clock() - start) / 1e9
        assert ring.stats().overrun_events == 0 and ring.stats().underrun_events == 0
    rate = frames * frame_samples / total_s
    budget_us = 1e6 * frame_samples / SAMPLE_RATE
    print(f"{ordering:>6}:", end="")
    for label, ns in (("write", write_ns), ("read_into", read_ns)):
        med, p99 = np.percentile(ns, [50, 99]) / 1e3
        print(f"  {label} median {med:5.2f} µs, p99 {p99:5.2f} µs;", end="")
    print(
        f"  write+read {rate / 1e6:6.1f} M samples/s = {rate / SAMPLE_RATE:,.0f}x real time (budget {budget_us:.0f} µs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=200_000)
    parser.add_argument("--frame-samples", type=int, default=160)
    args = parser.parse_args()
    print(f"{platform.machine()}, Python {platform.python_version()}, {args.frame_samples}-sample frames")
    for ordering in ("plain", "atomic"):
        bench(ordering, args.frames, args.frame_samples)


if __name__ == "__main__":
    main()
