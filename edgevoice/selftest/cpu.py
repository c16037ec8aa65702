"""A process's CPU time and memory, read from ``/proc`` as the kernel counts them: each native thread's CPU time,
the share of a core over a window, and the wait until a process has settled after its start-up work (the self-test
and the idle benchmark both measure the appliance this way)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
SETTLED_PCT = 40.0
"""An appliance is settled (its start-up work done) once a few seconds cost it less than this share of a core."""


@dataclass(frozen=True)
class ThreadTime:
    """One native thread's name and its CPU time so far (user + system, seconds)."""

    name: str
    cpu_s: float


def parse_stat(text: str) -> ThreadTime:
    """``/proc/<pid>/task/<tid>/stat`` -> the thread's name and CPU seconds (the name may hold spaces and ')')."""
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5), counted after the name
    return ThreadTime(name, (utime + stime) / TICKS)


def thread_times(pid: int) -> dict[int, ThreadTime]:
    """Every live thread of ``pid``: native thread id -> its time (threads that exit meanwhile are skipped)."""
    times: dict[int, ThreadTime] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            times[int(task.name)] = parse_stat((task / "stat").read_text())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return times


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Window:
    """CPU used over one measuring window: the share of a core, per thread name and in all."""

    wall_s: float
    cpu_s: float
    by_thread: dict[str, float] = field(default_factory=dict)
    rss_mb: float = 0.0

    @property
    def percent(self) -> float:
        return 100 * self.cpu_s / self.wall_s if self.wall_s else 0.0


def window(before: dict[int, ThreadTime], after: dict[int, ThreadTime], wall_s: float, rss: float) -> Window:
    """The CPU used between two samples of :func:`thread_times` (threads born in between count from zero)."""
    by_thread: dict[str, float] = {}
    total = 0.0
    for tid, now in after.items():
        used = now.cpu_s - (before[tid].cpu_s if tid in before else 0.0)
        total += used
        by_thread[now.name] = by_thread.get(now.name, 0.0) + used
    return Window(wall_s, total, by_thread, rss)


def settle(pids: Sequence[int], limit_s: float, window_s: float = 3.0) -> None:
    """Until two windows in a row cost every process less than :data:`SETTLED_PCT` of a core (or ``limit_s``): the
    work an appliance begins once ready (the models' recheck, the presynthesis of the known replies) runs for
    seconds to minutes, and is not what it costs while it waits for a visitor."""
    deadline = time.monotonic() + limit_s
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        quiet = quiet + 1 if all(w.percent < SETTLED_PCT for w in measure_all(pids, window_s)) else 0


def measure_all(pids: Sequence[int], seconds: float) -> list[Window]:
    """:func:`measure` for several processes over one window."""
    before, t0 = [thread_times(pid) for pid in pids], time.monotonic()
    time.sleep(seconds)
    after, t1 = [thread_times(pid) for pid in pids], time.monotonic()
    return [window(b, a, t1 - t0, rss_mb(pid)) for b, a, pid in zip(before, after, pids, strict=True)]
