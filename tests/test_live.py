"""`edgevoice run` as its own process, through a real PulseAudio server: the harness speaks into the "mic" sink and
records the "spk" sink. A three-turn conversation: intelligible replies, zero xruns, clean shutdown."""

from __future__ import annotations

import itertools
import json
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.pulse import PulseServer
from edgevoice.interfaces import Engines
from edgevoice.selftest import measure
from edgevoice.selftest.appliance import ApplianceProcess
from tests.conftest import heard_share, wer

pytestmark = [pytest.mark.models, pytest.mark.audio]

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = (
    "How much is a ticket for a student?",
    "Where is the whale skeleton?",
    "Is there a cafe in the museum?",
)


class LiveProcess(ApplianceProcess):
    """`edgevoice run --json` in the private PulseAudio room: listening on "mic", speaking into "spk"."""

    def __init__(self, pulse: PulseServer, models_dir: Path) -> None:
        env = pulse.client_env(source="mic.monitor", sink="spk")
        env["EDGEVOICE_MODELS_DIR"] = str(models_dir)
        super().__init__(env, cwd=ROOT)

    def stderr(self) -> str:
        return self.stderr_tail()


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
    return measure.spans(audio, RATE, threshold=threshold, gap_s=gap_s)


def longest_pause(reply: np.ndarray) -> float:
    inner = spans(reply, gap_s=0.05)
    return max((b[0] - a[1] for a, b in itertools.pairwise(inner)), default=0) / RATE


def visitor_spans(mic: np.ndarray, played: list[tuple[np.ndarray, int]]) -> list[tuple[int, int]]:
    """Where the visitor's clips are in the microphone recording (each found by cross-correlation)."""
    found = measure.played_spans(mic, played, RATE)
    assert all(span is not None for span in found), found
    return [span for span in found if span is not None]


def test_three_turn_conversation_through_the_audio_stack(
    pulse: PulseServer, live: LiveProcess, speak: Callable[[str], np.ndarray], engines: Engines
) -> None:
    # the visitor's questions are synthesized before the conversation starts: the voice computing in this process
    # while a reply plays takes both cores at the appliance's own priority (a 69 ms stall of its audio callbacks
    # was seen that way), which no visitor does
    clips = [np.concatenate([np.zeros(RATE // 2, np.float32), speak(question)]) for question in QUESTIONS]
    mic_rec, spk_rec = pulse.record("mic.monitor", rate=RATE), pulse.record("spk.monitor", rate=RATE)
    mic_rec.wait_started()
    spk_rec.wait_started()
    offset = mic_rec.samples - spk_rec.samples  # spk sample i was recorded at the same moment as mic sample i+offset
    turns, played = [], []
    for clip in clips:
        played.append((clip, mic_rec.samples))
        pulse.play(clip, sink="mic").wait()
        turn = live.next("turn", timeout=60)
        turns.append(turn)
        spk_rec.wait_more(0.8)  # the reply has left the ring; let the device play its buffer out
    stop_seconds = live.stop()
    stopped = live.next("stopped", timeout=5)
    mic, spk = mic_rec.stop(), spk_rec.stop()
    print("\n" + json.dumps(stopped))

    assert live.proc.returncode == 0, live.stderr()
    assert stop_seconds < 2.0
    # no sample lost on the way in and no gap while a reply plays: the rings count both exactly
    for key in ("input_overruns", "input_device_xruns", "output_underruns", "output_device_xruns_in_reply"):
        assert stopped[key] == 0, (key, stopped)
    # PortAudio's own output-underflow flag (ALSA's pulse plugin) also fires while silence is played, when a
    # callback is late with nothing to play (up to 4 seen on a busy CI machine): counted, not a gap anyone hears

    for question, turn in zip(QUESTIONS, turns, strict=True):
        assert wer(question, str(turn["transcript"])) <= 0.2, turn
        # the kiosk's own voice, echoed into the microphone, did not interrupt it
        assert turn["reply"] and not turn["cancelled"], turn
    # nor paused it for good: a pause is a half-second gap in the reply. On loaded CI machines the canceller lost the
    # echo (attenuation 18.9 and 26.8 dB against 40-50 on a quiet one: the room's delay moved) and its residue paused
    # a reply that the VAD then resumed; after one such pause the level stands down (NearEndGate), so at most one,
    # and never a confirmed one
    print("\necho per reply:", [turn["echo"] for turn in turns])
    assert stopped["speaker_pauses"] == stopped["false_barge_ins"] <= 1, stopped
    assert stopped["echo_attenuation_db"] is not None and stopped["echo_attenuation_db"] >= 10, stopped

    # replies are told apart by the visitor's turns between them (seconds); a pause inside one is the rings' to
    # count (above). A CI run once recorded a 0.67 s silence after a reply's first clause with no underrun in the
    # ring and no pause: the audio server's side under load, printed here rather than counted as a fourth reply
    utterances, replies = visitor_spans(mic, played), spans(spk, gap_s=1.5)
    print("\nlongest silence inside each reply (s):", [longest_pause(spk[a:b]) for a, b in replies])
    assert len(utterances) == 3 and len(replies) == 3, (utterances, replies)
    latencies = []
    for (_, utterance_end), (reply_start, reply_end), turn in zip(utterances, replies, turns, strict=True):
        heard = engines.recognizer.transcribe(spk[reply_start:reply_end]).text
        # the reply came through: its words are in what tiny.en hears of the recording (which once added a looped
        # "the first Sunday, the first Sunday" after a reply without it; the recognizer's own words do not count)
        assert heard_share(str(turn["reply"]), heard) >= 0.65, (turn["reply"], heard)
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
    question = np.concatenate([np.zeros(RATE // 2, np.float32), speak("What is the special exhibition?")])
    interruption = speak("Where are the toilets please?")  # both made before: nothing computes here meanwhile
    mic_rec, spk_rec = pulse.record("mic.monitor", rate=RATE), pulse.record("spk.monitor", rate=RATE)
    mic_rec.wait_started()
    spk_rec.wait_started()
    offset = mic_rec.samples - spk_rec.samples
    pulse.play(question, sink="mic")
    live.next("speaking", timeout=60)
    spk_rec.wait_more(0.5)  # half a second of the reply is out
    played = (interruption, mic_rec.samples)
    pulse.play(interruption, sink="mic").wait()
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
    onset = visitor_spans(mic, [played])[0][0]  # the interruption
    replies = spans(spk, gap_s=0.3)
    stop_at = next(end for start, end in replies if start + offset < onset < end + offset + RATE) + offset
    stop_latency = (stop_at - onset) / RATE
    print(f"\nbarge-in: the speaker stopped {stop_latency * 1000:.0f} ms after the visitor's onset")
    assert stop_latency < 0.25  # median 90 ms, 81-138 ms (docs/decisions/); room here for a busy one
