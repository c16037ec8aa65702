#!/usr/bin/env python3
"""Run `edgevoice converse` N times on one WAV and print the median time of each stage (ms).

    .venv/bin/python scripts/converse_times.py samples/question.wav -n 5

Each run is a fresh process (model load and warm-up are reported separately and excluded from the stages).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

STAGES = ("vad", "asr", "llm_first_token", "first_audio", "llm", "tts", "total")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wav", type=Path)
    parser.add_argument("-n", "--runs", type=int, default=5)
    parser.add_argument("--config")
    args = parser.parse_args()
    runs = []
    for i in range(args.runs):
        cmd = [sys.executable, "-m", "edgevoice", "converse", str(args.wav), "--json"]
        if args.config:
            cmd += ["--config", args.config]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return proc.returncode
        report = json.loads(proc.stdout)
        runs.append(report)
        print(f"run {i + 1}: {report['transcript']!r} -> {report['reply']!r}", file=sys.stderr)
    print(f"{'stage':<18}{'median ms':>10}{'min':>9}{'max':>9}")
    for stage in STAGES:
        values = [r["stages"][stage] for r in runs if stage in r["stages"]]
        if values:
            print(f"{stage:<18}{statistics.median(values):>10.1f}{min(values):>9.1f}{max(values):>9.1f}")
    ready = [r["ready_ms"] for r in runs]
    print(f"{'load + warm-up':<18}{statistics.median(ready):>10.1f}{min(ready):>9.1f}{max(ready):>9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
