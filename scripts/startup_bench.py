#!/usr/bin/env python3
"""How long `edgevoice run` takes to be ready, and `edgevoice converse` to answer one question, stage by stage, for
one or more checkouts side by side (before and after a change), interleaved start by start so that all see the
machine's load of the moment.

    git worktree add /tmp/before <commit>; ln -s $PWD/.venv /tmp/before/.venv
    .venv/bin/python scripts/startup_bench.py --checkout /tmp/before --checkout . --starts 5

Each start is a fresh process on a private PulseAudio server (as the self-test's), with the installed models and a
cache directory of its own per checkout, warmed by one start that is not counted (the knowledge's embeddings, the
presynthesized replies and, where the checkout keeps it, the prompt prefix's state: what a kiosk's restart finds).
"Ready" is the `ready` record on stdout: ``spawn`` is from the process's start (imports included), ``load_ms`` the
appliance's own figure (from the first model load). The checkout's `ready` record gives the stages when it has them.
Then `edgevoice converse` on a WAV of ``--question`` (made once by this checkout's `edgevoice say`), wall time of the
whole command. The load average is printed with every figure: on a shared box, compare only one run's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edgevoice.audio.pulse import PulseServer
from edgevoice.paths import default_models_dir

READY_TIMEOUT_S = 300.0
CONVERSE_STAGES = ("vad", "asr", "llm_first_token", "first_audio", "tts", "total")
"""The question's own stages (`converse --json`): the first turn's cost, to see that nothing moved into it."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", action="append", type=Path, help="a checkout to measure (default: this one)")
    parser.add_argument("--starts", type=int, default=5, help="counted starts per checkout (the median is printed)")
    parser.add_argument("--converse", type=int, default=3, help="counted `edgevoice converse` runs per checkout")
    parser.add_argument("--question", default="How much are tickets?")
    parser.add_argument("--config", help="edgevoice.toml for every run (default: none, the sample venue)")
    args = parser.parse_args()
    checkouts = [c.resolve() for c in args.checkout or [Path.cwd()]]
    work = Path(tempfile.mkdtemp(prefix="edgevoice-startup-"))
    caches = {c: work / f"cache-{i}" for i, c in enumerate(checkouts)}
    extra = ("--config", args.config) if args.config else ()
    ready: dict[Path, list[dict[str, object]]] = {c: [] for c in checkouts}
    for round_ in range(args.starts + 1):  # round 0 warms each checkout's cache
        for checkout in checkouts:
            record = start_once(checkout, caches[checkout], extra)
            label = "warm-up" if round_ == 0 else f"start {round_}"
            print(f"{checkout.name or checkout}: {label}: {json.dumps(record)}", file=sys.stderr)
            if round_:
                ready[checkout].append(record)
    wav = work / "question.wav"
    run_checked([sys.executable, "-m", "edgevoice", "say", args.question, "--out", str(wav), *extra], Path.cwd())
    answers: dict[Path, list[dict[str, object]]] = {c: [] for c in checkouts}
    for round_ in range(args.converse + 1):
        for checkout in checkouts:
            record = converse_once(checkout, caches[checkout], wav, extra)
            print(f"{checkout.name or checkout}: converse {round_ or 'warm-up'}: {json.dumps(record)}", file=sys.stderr)
            if round_:
                answers[checkout].append(record)
    report(checkouts, ready, answers)
    return 0


def checkout_env(checkout: Path, cache: Path) -> dict[str, str]:
    """What a run of ``checkout`` is given: its own code, its own cache, the installed models."""
    return {
        "PYTHONPATH": str(checkout),
        "EDGEVOICE_CACHE_DIR": str(cache),
        "EDGEVOICE_MODELS_DIR": os.environ.get("EDGEVOICE_MODELS_DIR", str(default_models_dir())),
    }


def start_once(checkout: Path, cache: Path, extra: tuple[str, ...]) -> dict[str, object]:
    """One `edgevoice run --json` until its ready record, then SIGTERM; the record with ``spawn_ms`` and the load."""
    with PulseServer() as pulse:
        env = {**pulse.client_env(source="mic.monitor", sink="spk"), **checkout_env(checkout, cache)}
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "edgevoice", "run", "--json", *extra],
            cwd=checkout,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        record: dict[str, object] = {}
        try:
            for line in proc.stdout:
                if line.startswith("{") and json.loads(line).get("event") == "ready":
                    record = json.loads(line)
                    record["spawn_ms"] = round((time.perf_counter() - t0) * 1000)
                    break
                if time.perf_counter() - t0 > READY_TIMEOUT_S:
                    break
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        if not record:
            raise SystemExit(f"{checkout}: no ready record (exit status {proc.returncode})")
        record["load_avg"] = round(load, 1)
        return record


def converse_once(checkout: Path, cache: Path, wav: Path, extra: tuple[str, ...]) -> dict[str, object]:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    out = run_checked([sys.executable, "-m", "edgevoice", "converse", str(wav), "--json", *extra], checkout, cache)
    wall = round((time.perf_counter() - t0) * 1000)
    result = json.loads(out)
    return {
        "wall_ms": wall,
        "ready_ms": result.get("ready_ms"),
        **{f"{stage}_ms": result.get("stages", {}).get(stage) for stage in CONVERSE_STAGES},
        "reply": result.get("reply"),
        "load_avg": round(load, 1),
    }


def run_checked(cmd: list[str], checkout: Path, cache: Path | None = None) -> str:
    env = {**os.environ, **checkout_env(checkout, cache)} if cache is not None else dict(os.environ)
    env.pop("CACHE_DIRECTORY", None)
    proc = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} in {checkout}: exit status {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def keys(records: dict[Path, list[dict[str, object]]], name: str) -> list[str]:
    """The keys of the records' ``name`` mappings (a checkout without them has none)."""
    found: list[str] = []
    for recs in records.values():
        for r in recs:
            value = r.get(name)
            if isinstance(value, dict):
                found += [k for k in value if k not in found]
    return found


def median(values: list[float]) -> str:
    return f"{statistics.median(values):8.0f} [{min(values):.0f}-{max(values):.0f}]" if values else "-"


def report(
    checkouts: list[Path], ready: dict[Path, list[dict[str, object]]], answers: dict[Path, list[dict[str, object]]]
) -> None:
    print(f"{'':32}" + "".join(f"{c.name[:30]:>32}" for c in checkouts))

    def row(label: str, values: dict[Path, list[float]]) -> None:
        print(f"{label:32}" + "".join(f"{median(values[c]):>32}" for c in checkouts))

    def field(records: dict[Path, list[dict[str, object]]], *path: str) -> dict[Path, list[float]]:
        out: dict[Path, list[float]] = {}
        for c, recs in records.items():
            values = []
            for r in recs:
                value: object = r
                for key in path:
                    value = value.get(key) if isinstance(value, dict) else None
                if isinstance(value, (int, float)):
                    values.append(float(value))
            out[c] = values
        return out

    print("edgevoice run, ms to ready (median [min-max]):")
    row("  from spawn", field(ready, "spawn_ms"))
    row("  load_ms", field(ready, "load_ms"))
    for stage in keys(ready, "stages_ms"):
        row(f"  stage {stage}", field(ready, "stages_ms", stage))
    for step in keys(ready, "steps_ms"):
        row(f"    step {step}", field(ready, "steps_ms", step))
    row("  load average at start", field(ready, "load_avg"))
    print("edgevoice converse, one question (ms):")
    row("  wall (whole command)", field(answers, "wall_ms"))
    row("  ready_ms (its own figure)", field(answers, "ready_ms"))
    for stage in CONVERSE_STAGES:
        row(f"  stage {stage}", field(answers, f"{stage}_ms"))
    row("  load average at start", field(answers, "load_avg"))
    for c in checkouts:
        replies = {str(r.get("reply")) for r in answers[c]}
        print(f"  {c.name}: replies {sorted(replies)}")


if __name__ == "__main__":
    raise SystemExit(main())
