"""Idle CPU: what the appliance costs while nobody speaks, read from outside as the kernel counts it.

`edgevoice run` listens in a private PulseAudio room (null sinks) to silence, then to low room noise; after it is
ready and has settled, its CPU time (utime + stime of every thread, from ``/proc``) is read over a window and divided
by the window's wall time: the share of one core. The threads that use the most are listed by their native name
(ONNX Runtime, OpenBLAS and llama.cpp name theirs; Python's carry the process name). Configurations (and environment
variables) run side by side, several rounds each, so that the comparison is within one run on a loaded machine.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.config import Config
from edgevoice.config.file import Overrides, write_config
from edgevoice.selftest.cpu import Window, measure_all, settle

NOISE_DBFS = -50.0
"""Level of the room noise phase: a quiet room's hum, well under the VAD's speech threshold."""


def room_noise(seconds: float, seed: int = 0) -> np.ndarray:
    """Low broadband noise at :data:`NOISE_DBFS`, darker than white (a short moving average), like a room's hum."""
    white = np.random.default_rng(seed).standard_normal(int(seconds * SAMPLE_RATE))
    dark = np.convolve(white, np.ones(8) / 8, mode="same")
    rms = float(np.sqrt(np.mean(dark**2))) or 1.0
    return (dark * (10 ** (NOISE_DBFS / 20) / rms)).astype(np.float32)


@dataclass(frozen=True)
class IdleVariant:
    """A configuration to measure: config keys changed from the box's own, environment variables set, and the
    checkout the appliance runs from (None: this one; another: the same box before a change)."""

    name: str
    overrides: Overrides = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None


def run_idle(
    config: Config,
    models_dir: Path,
    variants: Sequence[IdleVariant] = (IdleVariant("configured"),),
    *,
    rounds: int = 3,
    seconds: float = 20.0,
    settle_limit_s: float = 600.0,
    progress: Callable[[str], None] = lambda _m: None,
) -> list[dict[str, Any]]:
    """Each variant's idle CPU in silence and in room noise, ``rounds`` windows of each.

    The variants' appliances run side by side, each in a room of its own, and are measured over the same windows:
    on a machine whose load drifts they see the same load, and their start-up (minutes on a loaded box) is paid
    once. The windows begin once every appliance has settled (:func:`settle`)."""
    from contextlib import ExitStack

    from edgevoice.audio.pulse import PulseServer
    from edgevoice.selftest.appliance import ApplianceProcess

    base = None if config.source == "<defaults>" else Path(config.source)
    windows: list[list[dict[str, Window]]] = [[] for _ in variants]
    with tempfile.TemporaryDirectory(prefix="edgevoice-idle-") as tmp, ExitStack() as stack:
        rooms, apps = [], []
        for i, variant in enumerate(variants):
            path = Path(tmp) / f"variant-{i}.toml"
            write_config(path, variant.overrides, base=base)
            pulse = stack.enter_context(PulseServer())
            env = pulse.client_env(source="mic.monitor", sink="spk")
            env["EDGEVOICE_MODELS_DIR"] = str(models_dir)
            env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")  # the knowledge's embeddings are made once
            env.update(variant.env)
            rooms.append(pulse)
            apps.append(stack.enter_context(ApplianceProcess(env, ("--config", str(path)), cwd=variant.cwd)))
        progress(f"idle: starting {len(apps)} appliance(s)")
        for app in apps:
            app.next("ready", timeout=900)
        progress("idle: waiting for the start-up work (models' recheck, presynthesis) to end")
        settle([app.proc.pid for app in apps], settle_limit_s)
        for r in range(rounds):
            progress(f"idle: round {r + 1}/{rounds}, silence")
            for i, phase in enumerate(measure_all([app.proc.pid for app in apps], seconds)):
                windows[i].append({"silence": phase})
            players = [pulse.play(room_noise(seconds + 4), "mic", rate=SAMPLE_RATE) for pulse in rooms]
            time.sleep(2)
            progress(f"idle: round {r + 1}/{rounds}, room noise")
            for i, phase in enumerate(measure_all([app.proc.pid for app in apps], seconds)):
                windows[i][-1]["noise"] = phase
            for player in players:
                player.stop()
        for app in apps:
            app.stop()
    return [summarize(variant.name, runs) for variant, runs in zip(variants, windows, strict=True)]


def summarize(name: str, runs: Sequence[dict[str, Window]]) -> dict[str, Any]:
    """A variant's row: the median share of a core in silence and in noise, RSS, and the busiest threads."""
    row: dict[str, Any] = {"variant": name, "rounds": len(runs), "load_avg": os.getloadavg()[0]}
    for phase in ("silence", "noise"):
        windows = [run[phase] for run in runs]
        row[f"{phase}_cpu_pct"] = round(statistics.median(w.percent for w in windows), 1)
        row[f"{phase}_cpu_pct_runs"] = [round(w.percent, 1) for w in windows]
        names = {n for w in windows for n in w.by_thread}
        threads = {n: statistics.median(100 * w.by_thread.get(n, 0.0) / w.wall_s for w in windows) for n in names}
        row[f"{phase}_threads"] = {n: round(p, 1) for n, p in sorted(threads.items(), key=lambda t: -t[1]) if p >= 0.1}
    row["rss_mb"] = round(max(run[phase].rss_mb for run in runs for phase in run), 0)
    return row


def format_idle(rows: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'variant':<28} {'silence %':>10} {'noise %':>8} {'RSS MB':>7}  load  runs (silence / noise)"]
    for row in rows:
        lines.append(
            f"{row['variant']:<28} {row['silence_cpu_pct']:>10.1f} {row['noise_cpu_pct']:>8.1f} {row['rss_mb']:>7.0f}"
            f"  {row['load_avg']:.1f}  {row['silence_cpu_pct_runs']} / {row['noise_cpu_pct_runs']}"
        )
    for row in rows:
        busiest = ", ".join(f"{n} {p}" for n, p in list(row["silence_threads"].items())[:6])
        lines.append(f"  {row['variant']}: threads in silence (% of a core): {busiest}")
    return "\n".join(lines)
