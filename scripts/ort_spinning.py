"""ONNX Runtime's thread pools with and without spinning: the time of a VAD frame, a Smart Turn verdict and a Piper
sentence's first audio, and the process's CPU time over the same calls, on one and on two threads; and the share of a
core that the VAD takes at the listener's pace (a frame every 32 ms), where a spinning pool burns what it saves.

    PYTHONPATH=$PWD .venv/bin/python scripts/ort_spinning.py [--rounds 200]

Each engine is opened twice, with the sessions' spinning as edgevoice sets it (off) and as ONNX Runtime's default
(on), and the two are called alternately so that a loaded machine weighs on both alike. Prints medians.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from unittest import mock

import numpy as np
import onnxruntime as ort

from edgevoice.config import Config
from edgevoice.models.store import ModelStore


def spinning_default() -> mock._patch[object]:
    """A patch under which edgevoice's sessions keep ONNX Runtime's default (spinning)."""
    real = ort.SessionOptions.add_session_config_entry

    def keep_spinning(self: ort.SessionOptions, key: str, value: str) -> None:
        if not key.endswith("allow_spinning"):
            real(self, key, value)

    return mock.patch.object(ort.SessionOptions, "add_session_config_entry", keep_spinning)


def timed(call: Callable[[], object]) -> tuple[float, float]:
    """Wall and process CPU time of one call, in ms."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return 1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    from edgevoice.app_engines import open_turn_model, open_vad, open_voice

    config, store = Config(), ModelStore()
    rng = np.random.default_rng(0)
    frame = (0.01 * rng.standard_normal(512)).astype(np.float32)
    clip = (0.01 * rng.standard_normal(16000 * 3)).astype(np.float32)
    sentence = "The galleries open at nine in the morning."
    print(f"{'engine':<18} {'threads':>7} {'spinning':>9} {'ms p50':>8} {'cpu ms p50':>11}")
    for threads in (1, 2):
        engines: dict[str, list[Callable[[], object]]] = {"vad frame": [], "smart turn": [], "piper first audio": []}
        for spinning in (False, True):
            with spinning_default() if spinning else contextlib.nullcontext():
                vad = open_vad(config, store, threads=threads)
                turn = open_turn_model(config, store, threads=threads)
                voice = open_voice(config, store, threads=threads)
            engines["vad frame"].append(lambda vad=vad: vad.probability(frame))
            engines["smart turn"].append(lambda turn=turn: turn.probability_complete(clip))
            engines["piper first audio"].append(lambda voice=voice: next(iter(voice.synthesize(sentence))))
        for name, calls in engines.items():
            rounds = args.rounds if name == "vad frame" else max(5, args.rounds // 10)
            times: list[list[tuple[float, float]]] = [[], []]
            for _ in range(rounds):
                for i, call in enumerate(calls):
                    times[i].append(timed(call))
            for i, spinning in enumerate((False, True)):
                wall = statistics.median(t[0] for t in times[i])
                cpu = statistics.median(t[1] for t in times[i])
                print(f"{name:<18} {threads:>7} {'on' if spinning else 'off':>9} {wall:>8.2f} {cpu:>11.2f}")
        for i, spinning in enumerate((False, True)):  # the listener's pace: a frame every 32 ms, asleep between
            call, cpu, start = engines["vad frame"][i], time.process_time(), time.perf_counter()
            for _ in range(150):
                call()
                time.sleep(0.032)
            share = 100 * (time.process_time() - cpu) / (time.perf_counter() - start)
            print(f"{'vad every 32 ms':<18} {threads:>7} {'on' if spinning else 'off':>9} {share:>7.2f}% of a core")


if __name__ == "__main__":
    main()
