"""The idle-CPU benchmark's accounting: per-thread CPU from /proc, and the share of a core over a window."""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from edgevoice.bench.idle import format_idle, room_noise, summarize
from edgevoice.selftest.cpu import TICKS, ThreadTime, parse_stat, thread_times, window


def test_parse_stat_reads_utime_and_stime_even_when_the_name_holds_spaces_and_parentheses() -> None:
    text = "4242 (ort (intra) 1) S 1 2 3 0 -1 4194560 100 0 0 0 30 12 0 0 20 0 9 0 555 1000 200"
    parsed = parse_stat(text)
    assert parsed.name == "ort (intra) 1"
    assert parsed.cpu_s == (30 + 12) / TICKS


def test_window_counts_threads_born_meanwhile_from_zero_and_sums_threads_of_one_name() -> None:
    before = {1: ThreadTime("python", 10.0), 2: ThreadTime("ort", 1.0)}
    after = {1: ThreadTime("python", 10.5), 2: ThreadTime("ort", 1.25), 3: ThreadTime("python", 0.25)}
    w = window(before, after, wall_s=10.0, rss=100.0)
    assert w.cpu_s == 1.0
    assert w.percent == 10.0
    assert w.by_thread == {"python": 0.75, "ort": 0.25}


def test_a_spinning_thread_shows_in_this_process_s_own_thread_times() -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    before = thread_times(os.getpid())
    thread = threading.Thread(target=spin)
    thread.start()
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:  # until the kernel has counted at least a tick of it
            after = thread_times(os.getpid())
            if window(before, after, 1.0, 0.0).cpu_s >= 2 / TICKS:
                break
            stop.wait(0.01)
    finally:
        stop.set()
        thread.join()
    assert window(before, after, 1.0, 0.0).cpu_s >= 2 / TICKS
    assert set(after) - set(before)  # the spinning thread is one of this process's tasks


def test_room_noise_is_at_its_level_and_not_silence() -> None:
    noise = room_noise(2.0)
    rms_dbfs = 20 * np.log10(np.sqrt(np.mean(noise.astype(np.float64) ** 2)))
    assert abs(rms_dbfs - -50.0) < 0.1
    assert np.count_nonzero(np.abs(noise) * 32768 >= 1) > len(noise) // 2  # survives 16-bit PCM


def test_summary_takes_the_median_of_the_rounds_and_lists_the_busiest_threads_first() -> None:
    runs = [
        {"silence": window({}, {1: ThreadTime("a", 3.0), 2: ThreadTime("b", 1.0)}, 100.0, 500.0)},
        {"silence": window({}, {1: ThreadTime("a", 5.0), 2: ThreadTime("b", 2.0)}, 100.0, 600.0)},
        {"silence": window({}, {1: ThreadTime("a", 30.0), 2: ThreadTime("b", 0.0)}, 100.0, 550.0)},
    ]
    for run in runs:
        run["noise"] = run["silence"]
    row = summarize("x", runs)
    assert row["silence_cpu_pct"] == 7.0  # medians of 4, 7 and 30
    assert row["silence_cpu_pct_runs"] == [4.0, 7.0, 30.0]
    assert list(row["silence_threads"]) == ["a", "b"]
    assert row["silence_threads"]["a"] == 5.0
    assert row["rss_mb"] == 600
    assert "x" in format_idle([row])
