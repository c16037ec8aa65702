"""`edgevoice run` as its own process, through a real PulseAudio server: the harness speaks into the "mic" sink and
records the "spk" sink. A three-turn conversation: intelligible replies, zero xruns, clean shutdown."""

from __future__ import annotations

import json
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from edgevoice.pipeline import Engines
from edgevoice.pulse import PulseServer
from tests.conftest import wer

pytestmark = pytest.mark.models

ROOT = Path(__file__).resolve().parent.parent
RATE = 16000
QUESTIONS = (
    "How much is a ticket for a student?",
    "Where is the whale skeleton?",
    "Is there a cafe in the museum?",
)


class LiveProcess:
    """`edgevoice run --json` with its stdout records collected on a thread."""

    def __init__(self, pulse: PulseServer, models_dir: Path) -> None:
        env = pulse.client_env(source="mic.monitor", sink="spk")
        env["EDGEVOICE_MODELS_DIR"] = str(models_dir)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "edgevoice", "run", "--json"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.records: queue.Queue[dict[str, object]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.records.put(json.loads(line))

    def next(self, event: str, timeout: float) -> dict[str, object]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                record = self.records.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise AssertionError(f"edgevoice run exited {self.proc.returncode}: {self.stderr()}") from None
                continue
            if record["event"] == event:
                return record
        raise AssertionError(f"no {event!r} record within {timeout} s; stderr: {self.stderr()}")

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read()[-4000:]

    def close(self) -> None:
        self._reader.join(timeout=5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def stop(self) -> float:
        t = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)
        return time.monotonic() - t


@pytest.fixture
def live(pulse: PulseServer, store) -> Iterator[LiveProcess]:  # type: ignore[no-untyped-def]
    """`edgevoice run` in a room with an echo: what the kiosk says reaches its microphone 40 ms later, 10 dB down."""
    pulse.add_echo(delay_ms=40, gain_db=-10.0)
    process = LiveProcess(pulse, store.models_dir)
    try:
        process.next("ready", timeout=120)
        yield process
    finally:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait()
        process.close()


def spans(audio: np.ndarray, *, threshold: float = 0.02, gap_s: float = 0.6) -> list[tuple[int, int]]:
    """(start, end) sample spans where the signal is audible, pauses shorter than ``gap_s`` bridged."""
    loud = np.flatnonzero(np.abs(audio) > threshold)
    if len(loud) == 0:
        return []
    breaks = np.flatnonzero(np.diff(loud) > gap_s * RATE)
    starts = np.concatenate([[loud[0]], loud[breaks + 1]])
    ends = np.concatenate([loud[breaks], [loud[-1]]])
    return [(int(a), int(b) + 1) for a, b in zip(starts, ends, strict=True)]


def visitor_spans(mic: np.ndarray, spk: np.ndarray, offset: int, *, gap_s: float = 0.6) -> list[tuple[int, int]]:
    """Where the visitor speaks in the mic recording, which also holds the kiosk's echo: 10 ms frames whose level
    clearly exceeds the loudest echo the speaker recording predicts nearby (echo path: 40 ms, -10 dB)."""
    hop = RATE // 100
    shift = offset + int(0.04 * RATE)
    echo = np.zeros(len(mic), dtype=np.float32)
    lo, hi = max(shift, 0), min(len(mic), shift + len(spk))
    if hi > lo:
        echo[lo:hi] = spk[lo - shift : hi - shift] * 10 ** (-10 / 20)
    n = len(mic) // hop
    mic_rms = np.sqrt(np.mean(mic[: n * hop].reshape(n, hop) ** 2, axis=1))
    echo_rms = np.sqrt(np.mean(echo[: n * hop].reshape(n, hop) ** 2, axis=1))
    echo_env = np.max(np.stack([np.roll(echo_rms, k) for k in range(-4, 5)]), axis=0)  # +-40 ms of slack
    active = mic_rms > 2.0 * echo_env + 0.01
    frame_gap = gap_s * 100 / RATE  # spans() counts its gap in samples; here one "sample" is a 10 ms frame
    return [(a * hop, b * hop) for a, b in spans(active.astype(np.float32), threshold=0.5, gap_s=frame_gap)]


def test_three_turn_conversation_through_the_audio_stack(
    pulse: PulseServer, live: LiveProcess, speak: Callable[[str], np.ndarray], engines: Engines
) -> None:
    mic_rec, spk_rec = pulse.record("mic.monitor", rate=RATE), pulse.record("spk.monitor", rate=RATE)
    mic_rec.wait_started()
    spk_rec.wait_started()
    offset = mic_rec.samples - spk_rec.samples  # spk sample i was recorded at the same moment as mic sample i+offset
    turns = []
    for question in QUESTIONS:
        pulse.play(np.concatenate([np.zeros(RATE // 2, np.float32), speak(question)]), sink="mic").wait()
        turn = live.next("turn", timeout=60)
        turns.append(turn)
        spk_rec.wait_more(0.8)  # the reply has left the ring; let the device play its buffer out
    stop_seconds = live.stop()
    stopped = live.next("stopped", timeout=5)
    mic, spk = mic_rec.stop(), spk_rec.stop()

    assert live.proc.returncode == 0, live.stderr()
    assert stop_seconds < 2.0
    # no sample lost on the way in and no gap while a reply plays: the rings count both exactly
    for key in ("input_overruns", "input_device_xruns", "output_underruns"):
        assert stopped[key] == 0, (key, stopped)
    # PortAudio's own output-underflow flag (ALSA's pulse plugin) also fires while silence is played; on a busy
    # two-core CI machine it was seen once in about ten runs, with the ring counters at zero
    assert int(str(stopped["output_device_xruns"])) <= 1, stopped

    for question, turn in zip(QUESTIONS, turns, strict=True):
        assert wer(question, str(turn["transcript"])) <= 0.2, turn
        # the kiosk's own voice, echoed into the microphone, did not interrupt it
        assert turn["reply"] and not turn["cancelled"], turn
    assert stopped["echo_attenuation_db"] is not None and stopped["echo_attenuation_db"] >= 10, stopped

    utterances, replies = visitor_spans(mic, spk, offset), spans(spk)
    assert len(utterances) == 3 and len(replies) == 3, (utterances, replies)
    latencies = []
    for (_, utterance_end), (reply_start, reply_end), turn in zip(utterances, replies, turns, strict=True):
        heard = engines.recognizer.transcribe(spk[reply_start:reply_end]).text
        assert wer(str(turn["reply"]), heard) <= 0.35, (turn["reply"], heard)
        latencies.append((reply_start + offset - utterance_end) / RATE)
    assert all(0 < lat < 5 for lat in latencies), latencies
    for turn in turns:
        print(json.dumps(turn))
    print(
        f"\nvoice-to-voice (end of utterance -> first reply sample on the speaker): {latencies}, "
        f"median {statistics.median(latencies) * 1000:.0f} ms; xruns: {stopped}"
    )


def test_barge_in_stops_the_reply_and_the_interruption_is_answered(
    pulse: PulseServer, live: LiveProcess, speak: Callable[[str], np.ndarray]
) -> None:
    mic_rec, spk_rec = pulse.record("mic.monitor", rate=RATE), pulse.record("spk.monitor", rate=RATE)
    mic_rec.wait_started()
    spk_rec.wait_started()
    offset = mic_rec.samples - spk_rec.samples
    pulse.play(np.concatenate([np.zeros(RATE // 2, np.float32), speak("What is the special exhibition?")]), sink="mic")
    live.next("speaking", timeout=60)
    spk_rec.wait_more(0.5)  # half a second of the reply is out
    pulse.play(speak("Where are the toilets please?"), sink="mic").wait()
    assert live.next("barge_in", timeout=10)["turn"] == 1
    first = live.next("turn", timeout=30)
    second = live.next("turn", timeout=60)
    spk_rec.wait_more(0.8)
    live.stop()
    mic, spk = mic_rec.stop(), spk_rec.stop()

    assert first["cancelled"] is True
    assert second["turn"] == 2 and "toilet" in str(second["transcript"]).lower()
    assert second["reply"] and second["cancelled"] is False
    # the speaker went quiet soon after the visitor started speaking over it
    onset = visitor_spans(mic, spk, offset)[1][0]  # the interruption
    replies = spans(spk, gap_s=0.3)
    stop_at = next(end for start, end in replies if start + offset < onset < end + offset + RATE) + offset
    stop_latency = (stop_at - onset) / RATE
    print(f"\nbarge-in: the speaker stopped {stop_latency * 1000:.0f} ms after the visitor's onset")
    assert stop_latency < 0.5
