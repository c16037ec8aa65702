#!/usr/bin/env python3
"""Run the kiosk screen's live test N times and print how late each caption came after its clause was played.

    PYTHONPATH=$PWD .venv/bin/python scripts/caption_timing.py -n 5

Each run is ``pytest tests/test_display_live.py -s`` (a real ``edgevoice run`` in the private PulseAudio room, headless
chromium on its page, two spoken exchanges): the test prints one ``caption timing:`` line per run, each clause's
lateness (ms, negative: early) against the speaker sink's monitor recorded beside it (``late_ms``) and against the turn
record's own DAC times (``late_device_ms``); ``tests/caption_timing.py`` says how. The machine's load average is
printed before and after each run: on a shared machine the spread is partly the machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

MARK = "caption timing: "


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def summary(label: str, values: list[float], bound_ms: float) -> str:
    if not values:
        return f"{label}: none"
    return (
        f"{label}: n {len(values)}, median {statistics.median(values):.0f} ms, min {min(values):.0f}, "
        f"max {max(values):.0f}, |x| > {bound_ms:.0f} ms: {sum(abs(v) > bound_ms for v in values)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--runs", type=int, default=5)
    parser.add_argument("--bound-ms", type=float, default=150.0)
    args = parser.parse_args()
    rows: list[dict[str, float]] = []
    failed = 0
    for i in range(args.runs):
        before = load()
        cmd = [sys.executable, "-m", "pytest", "tests/test_display_live.py", "-s", "-q", "-p", "no:randomly"]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [line[line.index(MARK) + len(MARK) :] for line in proc.stdout.splitlines() if MARK in line]
        if proc.returncode != 0 or not lines:
            failed += 1
            print(f"run {i + 1}: failed (rc {proc.returncode})\n{proc.stdout[-3000:]}", file=sys.stderr)
            continue
        run = json.loads(lines[-1])
        rows += run
        late = [r["late_ms"] for r in run]
        sets = {key: sorted({r[key] for r in run}) for key in ("onset_gap_ms", "output_ms", "sink_latency_ms")}
        seen = "; ".join(f"{key} {value}" for key, value in sets.items())
        print(f"run {i + 1}: load {before} -> {load()}; late_ms {late}; {seen}", flush=True)
    print(summary("caption vs speaker monitor (late_ms)", [r["late_ms"] for r in rows], args.bound_ms))
    print(summary("caption vs record's DAC time (late_device_ms)", [r["late_device_ms"] for r in rows], args.bound_ms))
    print(summary("record's DAC time vs monitor (onset_gap_ms)", [r["onset_gap_ms"] for r in rows], args.bound_ms))
    print(f"runs failed: {failed}")
    return 1 if failed == args.runs else 0


if __name__ == "__main__":
    sys.exit(main())
