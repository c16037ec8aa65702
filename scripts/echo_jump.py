"""What a jump in the echo path's delay does to the kiosk's barge-in gate: false pauses, with the stand-down on and
off, and how soon a visitor's voice pauses the reply.

The canceller (AEC3) hears the default voice reading eight sentences through a room that returns it 10 dB
down, 80 ms late, with a -70 dBFS noise floor; at the given moments the room's delay changes (as when a stream's
latency moves). The gate sees the cleaned microphone; with no VAD here, every pause it makes before the visitor
speaks is a false one. Prints one line per scenario and gate setting ("off": ``stand_down_s`` 0, the level back
at the next frame).

    PYTHONPATH=$PWD .venv/bin/python scripts/echo_jump.py
"""

from __future__ import annotations

import types

import numpy as np
import soxr

from edgevoice.app_engines import open_plain_voice
from edgevoice.audio.aec import EchoCanceller
from edgevoice.audio.capture import FRAME, NearEndGate
from edgevoice.audio.echo_path import SETTLING_S
from edgevoice.config import Config
from edgevoice.engines.piper_onnx import PiperSynthesizer
from edgevoice.models.store import ModelStore
from edgevoice.reply.speech_text import normalize_for_speech

RATE = 16000
KIOSK = (  # Harvard sentences (IEEE 1969): any speech does, none of a venue's
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "It is easy to tell the depth of a well.",
    "These days a chicken leg is a rare dish.",
    "The box was thrown beside the parked truck.",
    "Four hours of steady work faced us.",
    "A large size in stockings is hard to sell.",
    "The juice of lemons makes fine punch.",
)
VISITOR = "Rice is often served in round bowls."
SCENARIOS: dict[str, tuple[list[tuple[float, int]], float | None]] = {
    # name: ([(time s, new delay ms)], visitor onset s)
    "steady room": ([], None),
    "delay 80 -> 100 ms at 6 s": ([(6.0, 100)], None),
    "delay 80 -> 60 ms at 6 s": ([(6.0, 60)], None),
    "three jumps (5, 10, 14 s)": ([(5.0, 100), (10.0, 140), (14.0, 90)], None),
    "steady room, visitor at 8 s (-25 dBFS)": ([], 8.0),
}


def voice() -> PiperSynthesizer:
    return open_plain_voice(Config(), ModelStore(), noise_scale=0.0, noise_w=0.0)


def say(tts: PiperSynthesizer, text: str) -> np.ndarray:
    audio = np.concatenate(list(tts.synthesize(normalize_for_speech(text))))
    return soxr.resample(audio, tts.sample_rate, RATE).astype(np.float32)


def run(
    kiosk: np.ndarray,
    visitor: np.ndarray,
    jumps: list[tuple[float, int]],
    visitor_at: float | None,
    stand_down_s: float,
) -> tuple[list[float], float | None]:
    n = len(kiosk) + RATE
    ref = np.zeros(n, np.float32)
    ref[: len(kiosk)] = kiosk
    delay = np.full(n, 80 * RATE // 1000)
    for at, ms in jumps:
        delay[int(at * RATE) :] = ms * RATE // 1000
    source = np.arange(n) - delay
    mic = np.where(source >= 0, ref[np.clip(source, 0, n - 1)], 0) * 10 ** (-10 / 20)
    mic += np.random.default_rng(0).normal(0, 10 ** (-70 / 20), n)
    onset = None
    if visitor_at is not None:
        voiced = visitor[np.abs(visitor) > 0.01]
        v = visitor / np.sqrt(np.mean(voiced**2)) * 10 ** (-25 / 20)
        start = int(visitor_at * RATE)
        mic[start : start + len(v)] += v[: n - start]
        onset = start + int(np.argmax(np.abs(v) > 0.01))
    mic = mic.astype(np.float32)
    playback = types.SimpleNamespace(paused=False, flush_pending=False)
    gate = NearEndGate(playback, stand_down_s=stand_down_s)  # type: ignore[arg-type]
    gate.armed = True
    pauses = []
    with EchoCanceller(RATE) as canceller:
        for k in range(n // FRAME):
            canceller.process_render(ref[k * FRAME : (k + 1) * FRAME])
            cleaned = canceller.process_capture(mic[k * FRAME : (k + 1) * FRAME])
            gate.settling = k * FRAME < SETTLING_S * RATE  # as EchoPath.settling
            before = gate.pauses
            gate.feed(cleaned)
            if gate.pauses != before:
                pauses.append(k * FRAME / RATE)
    if onset is None:
        return pauses, None
    false = [p for p in pauses if p * RATE < onset - 2 * FRAME]
    late = [p for p in pauses if p * RATE >= onset - 2 * FRAME]
    return false, (late[0] * RATE - onset) / RATE * 1000 if late else None


def main() -> None:
    tts = voice()
    kiosk = np.concatenate([say(tts, text) for text in KIOSK])
    visitor = say(tts, VISITOR)
    print(f"the kiosk's voice: {len(kiosk) / RATE:.1f} s")
    print(f"{'scenario':42} {'stand-down':>10} {'false pauses':>13}  visitor paused after")
    for name, (jumps, visitor_at) in SCENARIOS.items():
        for label, stand_down_s in (("off", 0.0), ("on", NearEndGate.__init__.__kwdefaults__["stand_down_s"])):
            false, latency = run(kiosk, visitor, jumps, visitor_at, stand_down_s)
            heard = "" if visitor_at is None else f"{latency:.0f} ms" if latency is not None else "not (VAD's turn)"
            print(f"{name:42} {label:>10} {len(false):>13}  {heard}")


if __name__ == "__main__":
    main()
