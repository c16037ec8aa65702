"""One self-test session: the real appliance (`edgevoice run`, its own process, the real models) answering the bundled
utterances, measured on the speaker side.

Without audio hardware (the default) the session starts a private PulseAudio server with two null sinks, "mic" and
"spk", and an echo path from the loudspeaker back into the microphone (40 ms, -10 dB, as in a kiosk), exactly like the
tests: the utterances are played into "mic", the appliance listens on its monitor and speaks into "spk", and both
monitors are recorded. Voice-to-voice on the speaker side is the time from the end of each utterance in the microphone
recording (found there by cross-correlation with the clip played, see :mod:`edgevoice.selftest.measure`) to the first
reply sample in the loudspeaker recording. The appliance's own per-stage trace comes with each
turn record (see :mod:`edgevoice.trace`).

With ``hardware=True`` the appliance runs on the configured devices and the session plays the utterances through
the default output device of this process; only the appliance's own trace (to the DAC time of the first reply
sample) measures the turns then, since nothing records the room.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.errors import SelftestError
from edgevoice.interfaces import FloatAudio
from edgevoice.selftest import measure
from edgevoice.selftest.appliance import ApplianceProcess, Record
from edgevoice.selftest.cpu import settle
from edgevoice.selftest.utterances import UTTERANCES, Utterance

LEAD_S = 0.5
"""Silence played before each utterance."""
ECHO_DELAY_MS, ECHO_GAIN_DB = 40, -10.0
READY_TIMEOUT_S = 180.0
TURN_TIMEOUT_S = 60.0
SPLIT_WAIT_S = 8.0
"""How long the self-test waits, after the turn of an utterance with a pause in it, for a second turn: the appliance
answered its first half, then heard the rest as a new question."""
SETTLE_LIMIT_S = 120.0
"""The longest the self-test waits, once the appliance is ready, for the work it begins then (the models' recheck,
the presynthesis of the known replies: a minute or two on two cores for a large venue) to end. Turns spoken during
it measured a first token of 2.9-3.3 s and a listener 1.2 s behind, against the steady state the self-test reports."""


@dataclass
class SessionResult:
    turns: list[Record] = field(default_factory=list)
    """The appliance's turn records, one per utterance: its first (the one that answered it, unless it was split)."""
    split: list[bool] = field(default_factory=list)
    """Per utterance: answered in two turns (its first half as a question of its own)."""
    extra_turns: list[Record] = field(default_factory=list)
    """The second turns of the split utterances."""
    speaker_side_s: list[float | None] = field(default_factory=list)
    """Voice-to-voice measured in the recordings, per utterance (None: no reply heard, or hardware mode)."""
    stopped: Record = field(default_factory=dict)
    """The appliance's last record: xrun counters and shutdown time."""
    ready: Record = field(default_factory=dict)
    utterances: list[Utterance] = field(default_factory=list)
    mode: str = "private-audio"


def pick(n: int) -> list[Utterance]:
    """``n`` bundled utterances, cycling through them."""
    if n < 1:
        raise SelftestError(f"the self-test needs at least one turn, not {n}")
    return [UTTERANCES[i % len(UTTERANCES)] for i in range(n)]


def run_session(
    turns: int,
    *,
    models_dir: Path,
    config_path: str | None = None,
    hardware: bool = False,
    progress: Callable[[str], None] = lambda _line: None,
    utterances: Sequence[Utterance] = (),
) -> SessionResult:
    """``turns`` of the bundled utterances, or the ``utterances`` given (a benchmark's, all of them)."""
    utterances = list(utterances) or pick(turns)
    args = ("--config", config_path) if config_path else ()
    if hardware:
        return _hardware_session(utterances, models_dir, args, progress)
    from edgevoice.audio.pulse import PulseServer

    with PulseServer() as pulse:
        pulse.add_echo(delay_ms=ECHO_DELAY_MS, gain_db=ECHO_GAIN_DB)
        env = pulse.client_env(source="mic.monitor", sink="spk")
        env["EDGEVOICE_MODELS_DIR"] = str(models_dir)
        progress("starting the appliance (loading and warming the models)")
        with ApplianceProcess(env, args) as app:
            result = SessionResult(utterances=utterances, ready=app.next("ready", READY_TIMEOUT_S))
            progress("waiting for its start-up work (the models' recheck, the presynthesis) to end")
            settle([app.proc.pid], SETTLE_LIMIT_S)
            mic_rec, spk_rec = (
                pulse.record("mic.monitor", rate=SAMPLE_RATE),
                pulse.record("spk.monitor", rate=SAMPLE_RATE),
            )
            mic_rec.wait_started()
            spk_rec.wait_started()
            offset = mic_rec.samples - spk_rec.samples  # spk sample i was recorded with mic sample i + offset
            played: list[tuple[FloatAudio, int]] = []
            for i, utterance in enumerate(utterances, 1):
                audio = np.concatenate([np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32), utterance.audio()])
                played.append((audio, mic_rec.samples))
                pulse.play(audio, sink="mic").wait()
                rest = _collect_turn(app, result, i, utterance, progress)
                if rest is not None:
                    progress(f"  answered in two halves; then {rest.get('transcript')!r} -> {rest.get('reply')!r}")
                spk_rec.wait_more(0.8)  # the reply has left the ring; the device plays its buffer out
            app.stop()
            result.stopped = app.next("stopped", 10.0)
        mic, spk = mic_rec.stop(), spk_rec.stop()
    result.speaker_side_s = speaker_side(mic, spk, offset, played)
    return result


def _collect_turn(
    app: ApplianceProcess, result: SessionResult, i: int, utterance: Utterance, progress: Callable[[str], None]
) -> Record | None:
    """The turn record of utterance ``i`` (just played) into ``result``, and for an utterance with a pause in it the
    second turn it may have been split into (returned too; None: not split)."""
    turn = app.next("turn", TURN_TIMEOUT_S)
    result.turns.append(turn)
    progress(f"turn {i}/{len(result.utterances)}: {turn.get('transcript')!r} -> {turn.get('reply')!r}")
    rest = app.maybe_next("turn", SPLIT_WAIT_S) if utterance.paused else None
    result.split.append(rest is not None)
    if rest is not None:
        result.extra_turns.append(rest)
    return rest


def speaker_side(
    mic: FloatAudio, spk: FloatAudio, offset: int, played: list[tuple[FloatAudio, int]]
) -> list[float | None]:
    """Per utterance, end of the utterance (mic recording) → first reply sample (speaker recording), seconds.
    ``played``: each clip played into the microphone, with the microphone recording's length when it was played."""
    heard = measure.played_spans(mic, played, SAMPLE_RATE)
    return measure.reply_latencies(heard, measure.spans(spk, SAMPLE_RATE), offset, SAMPLE_RATE)


def _hardware_session(
    utterances: list[Utterance], models_dir: Path, args: tuple[str, ...], progress: Callable[[str], None]
) -> SessionResult:
    from edgevoice.audio.streams import OutputStream

    env = dict(os.environ)
    env["EDGEVOICE_MODELS_DIR"] = str(models_dir)
    progress("starting the appliance on the configured sound devices")
    with ApplianceProcess(env, args) as app:
        result = SessionResult(utterances=utterances, ready=app.next("ready", READY_TIMEOUT_S), mode="hardware")
        settle([app.proc.pid], SETTLE_LIMIT_S)
        for i, utterance in enumerate(utterances, 1):
            queue = np.concatenate([np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32), utterance.audio()])
            position = [0]

            def source(n: int, audio: FloatAudio = queue, pos: list[int] = position) -> FloatAudio:
                chunk = audio[pos[0] : pos[0] + n]
                pos[0] += len(chunk)
                return chunk

            with OutputStream(source, source_rate=SAMPLE_RATE) as speaker:
                deadline = time.monotonic() + len(queue) / SAMPLE_RATE + 5.0
                while position[0] < len(queue) and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(speaker.latency + 0.1)
            _collect_turn(app, result, i, utterance, progress)
            time.sleep(0.8)  # the turn record comes once the reply has been played
        app.stop()
        result.stopped = app.next("stopped", 10.0)
    result.speaker_side_s = [None] * len(utterances)
    return result
