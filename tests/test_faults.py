"""Faults the appliance survives while it keeps answering, through the real audio stack: `edgevoice run` as its own
process in a private PulseAudio room (as in ``tests/test_live.py``), faults injected with the test-only knobs of
:mod:`edgevoice.live.faults` or done to the room itself.

Fault → behaviour:
- the language model or the synthesizer raises → that turn gets the spoken fallback phrase, the next turn is
  answered;
- the language model hangs (stuck in native code) past the reply budget → the fallback phrase within the budget,
  the next turn answered once it returns;
- the microphone and speaker vanish (the sinks unloaded, as a USB speakerphone unplugged) and come back → the
  streams reopen by themselves and the next turn is answered;
- the disk under the metrics file and the debug recorder is full, or read-only → no crash, every turn answered.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from edgevoice.audio import SAMPLE_RATE as RATE
from edgevoice.audio.pulse import PulseServer
from edgevoice.selftest.appliance import ApplianceProcess, Record
from tests.conftest import wer

pytestmark = [pytest.mark.models, pytest.mark.audio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
FALLBACK = "Sorry, could you say that again?"
QUESTIONS = ("How much is a ticket for a student?", "Where is the whale skeleton?")
TO_THE_MODEL = "[kiosk]\ndirect_answers = false\n"
"""Both questions are answered from the knowledge without the language model by default: a fault injected into the
model needs them to reach it."""


@contextmanager
def appliance(
    pulse: PulseServer,
    store,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    *,
    env: dict[str, str] | None = None,
    config: str = "",
    echo: bool = True,
) -> Iterator[ApplianceProcess]:
    """``edgevoice run`` in the PulseAudio room (its speaker echoed into the microphone unless not ``echo``)."""
    if echo:
        pulse.add_echo(delay_ms=40, gain_db=-10.0)
    environ = pulse.client_env(source="mic.monitor", sink="spk") | (env or {})
    environ["EDGEVOICE_MODELS_DIR"] = str(store.models_dir)
    path = tmp_path / "edgevoice.toml"
    path.write_text(config, encoding="utf-8")
    process = ApplianceProcess(environ, ("--config", str(path)), cwd=ROOT)
    try:
        process.next("ready", timeout=180)
        yield process
    finally:
        process.close()


@pytest.fixture
def speak(speak: Callable[[str], np.ndarray]) -> Callable[[str], np.ndarray]:
    """The questions synthesized once, before any appliance runs: the voice computing in this process while a
    reply plays would take both cores at the appliance's own priority."""
    clips = {question: speak(question) for question in QUESTIONS}
    return lambda text: clips[text] if text in clips else speak(text)


def ask(pulse: PulseServer, app: ApplianceProcess, speak: Callable[[str], np.ndarray], question: str) -> Record:
    pulse.play(np.concatenate([np.zeros(RATE // 2, np.float32), speak(question)]), sink="mic").wait()
    while True:
        turn = app.next("turn", timeout=90)
        # a turn with nothing heard and nothing said (the last of the kiosk's own echo once the gate is off) is
        # not the question's: seen once in several runs after the fallback phrase
        if turn["transcript"] or turn["reply"]:
            return turn


@contextmanager
def status_socket(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    """A datagram socket for the appliance's sd_notify messages (``$NOTIFY_SOCKET``, as systemd would give it): its
    ``STATUS=`` says which sound streams are down."""
    address = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        yield address, sock


def next_status(sock: socket.socket, wanted: Callable[[str], bool], timeout: float = 15.0) -> str:
    """The next ``STATUS=`` the appliance reports that is ``wanted`` (those before it are passed over)."""
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            message = sock.recv(4096).decode()
        except TimeoutError:
            break
        for line in message.split("\n"):
            if line.startswith("STATUS="):
                seen.append(line.removeprefix("STATUS="))
                if wanted(seen[-1]):
                    return seen[-1]
    raise AssertionError(f"no such status within {timeout:.0f} s; reported: {seen}")


def stop(app: ApplianceProcess) -> Record:
    assert app.stop() < 2.0
    assert app.proc.returncode == 0, app.stderr_tail()
    return app.next("stopped", timeout=5)


def assert_answered(turn: Record, question: str, stopped: Record | None = None, log: str = "") -> None:
    """Heard right, answered, not cut: on failure the whole record, the appliance's totals (``stopped``: a barge-in?
    how loud was the echo?) and the tail of its log."""
    assert wer(question, str(turn["transcript"])) <= 0.25, (turn, stopped, log)
    assert turn["reply"] and turn["fallback"] is None and not turn["cancelled"], (turn, stopped, log)


@pytest.mark.parametrize("stage", ["LLM", "TTS"])
def test_an_engine_that_raises_costs_one_turn_its_fallback_phrase(
    pulse: PulseServer, store, speak: Callable[[str], np.ndarray], engines, tmp_path: Path, stage: str
) -> None:  # type: ignore[no-untyped-def]
    spk_rec = pulse.record("spk.monitor", rate=RATE)
    spk_rec.wait_started()
    # the turn after the fault goes through the model: on two cores its prefill (25-30 tokens a second) can run past
    # the default 4 s budget on a loaded machine, and that late fallback is not the fault under test
    config = TO_THE_MODEL + "reply_budget_s = 20.0\n" if stage == "LLM" else ""
    with appliance(pulse, store, tmp_path, env={f"EDGEVOICE_FAULT_{stage}": "raise@1"}, config=config) as app:
        failed = ask(pulse, app, speak, QUESTIONS[0])
        spk_rec.wait_more(2.5)  # the phrase is played out
        heard = spk_rec.stop()
        answered = ask(pulse, app, speak, QUESTIONS[1])
        stopped = stop(app)
    assert failed["fallback"] == "error" and failed["error"] == "injected_fault" and failed["reply"] == FALLBACK
    # the phrase started within 4 s of the commit (the default reply budget; a raise does not wait the budget out),
    # plus the output device's buffer: voice to voice adds the endpointing and the recognition, which a loaded CI
    # machine stretched past 4 s
    marks = failed["marks_ms"]
    assert isinstance(marks, dict)
    assert marks["first_played"] - marks["endpoint"] < 4000 + 300, marks
    assert min(failed["stages_ms"].values()) >= 0, failed  # type: ignore[union-attr]
    # the visitor heard the phrase (the recording's silence before it cut off: Whisper tiny.en heard only "Sorry."
    # in one run of several when given the 12 s of silence too)
    loud = np.flatnonzero(np.abs(heard) > 0.01)
    assert len(loud), "nothing was played"
    phrase = heard[max(0, loud[0] - RATE // 4) : loud[-1] + RATE // 4]
    assert wer(FALLBACK, engines.recognizer.transcribe(phrase).text) <= 0.3, engines.recognizer.transcribe(phrase)
    assert_answered(answered, QUESTIONS[1])
    assert stopped["output_underruns"] == 0


BUDGET_S = 10.0
"""The hung-model test's reply budget: the turn after the hang goes through the model, which took over 4 s from the
commit on a loaded CI machine (its median is 2 s on an idle one); the hang (20 s) still runs well past it."""


def test_a_hung_language_model_gets_the_fallback_within_the_budget_and_recovers(
    pulse: PulseServer, store, speak: Callable[[str], np.ndarray], tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with appliance(
        pulse,
        store,
        tmp_path,
        env={"EDGEVOICE_FAULT_LLM": "hang@1:20"},
        config=TO_THE_MODEL + f"reply_budget_s = {BUDGET_S}\n",
    ) as app:
        t = time.monotonic()
        late = ask(pulse, app, speak, QUESTIONS[0])
        # the turn record comes once the engine returned (20 s after it was called), not at the next question's
        # timeout: a loose bound, as the question's own playing and recognition take longer on a loaded machine
        assert time.monotonic() - t < 50
        answered = ask(pulse, app, speak, QUESTIONS[1])
        stop(app)
        log = app.stderr_tail(8000)
    assert late["fallback"] == "late" and late["reply"] == FALLBACK and late["error"] is None, (late, log)
    # the phrase started within the budget after the turn was committed, plus the output device's buffer
    marks = late["marks_ms"]
    assert isinstance(marks, dict)
    assert marks["first_played"] - marks["endpoint"] < BUDGET_S * 1000 + 300, marks
    assert_answered(answered, QUESTIONS[1])


def test_the_sound_devices_vanish_and_come_back_and_the_streams_reopen(
    pulse: PulseServer, store, speak: Callable[[str], np.ndarray], tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with (
        status_socket(tmp_path) as (address, statuses),
        appliance(pulse, store, tmp_path, env={"NOTIFY_SOCKET": address}) as app,
    ):
        assert_answered(ask(pulse, app, speak, QUESTIONS[0]), QUESTIONS[0], log=app.stderr_tail(6000))
        pulse.unload_sink("mic")  # a USB speakerphone unplugged: microphone and loudspeaker gone at once
        pulse.unload_sink("spk")
        # the appliance notices (no callbacks for a second) and retries every second
        next_status(statuses, lambda s: "microphone stream down" in s and "speaker stream down" in s)
        assert app.proc.poll() is None, app.stderr_tail()
        # plugged back in, its microphone found before its loudspeaker: the two streams reopen on different
        # retries. Carried over, the echo canceller then let the reply's echo through up to -43 dBFS (the barge-in
        # level is -40): a CI run saw the kiosk interrupt its own reply after a reopen like this
        pulse.reload_sink("mic")
        status = next_status(statuses, lambda s: "microphone stream down" not in s)
        pulse.reload_sink("spk")
        pulse.add_echo(delay_ms=40, gain_db=-10.0)
        if not status.startswith("listening"):
            next_status(statuses, lambda s: s.startswith("listening"))  # both streams back
        answered = ask(pulse, app, speak, QUESTIONS[1])
        stopped = stop(app)
        log = app.stderr_tail(6000)
    assert_answered(answered, QUESTIONS[1], stopped, log)
    assert stopped["reopened"] >= 2 and stopped["echo_restarts"] >= 1, stopped
    # the canceller started over: the echo's loudest 10 ms stays well below the barge-in level (measured: -60 to
    # -61 dBFS; -43 to -47 without the restart)
    echo = answered["echo"]
    assert isinstance(echo, dict) and echo["peak_residual_dbfs"] < -50, (echo, stopped, log)


def mount_tmpfs(path: Path, options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.decode().strip()}")


@pytest.mark.parametrize("disk", ["full", "read-only"])
def test_a_full_or_read_only_disk_does_not_stop_the_kiosk(
    pulse: PulseServer, store, speak: Callable[[str], np.ndarray], tmp_path: Path, disk: str
) -> None:  # type: ignore[no-untyped-def]
    mount = tmp_path / "disk"
    mount_tmpfs(mount, "size=16k" if disk == "full" else "size=16k,ro")
    try:
        if disk == "full":
            subprocess.run(["dd", "if=/dev/zero", f"of={mount / 'filler'}", "bs=1k", "count=64"], capture_output=True)
        config = (
            f'[metrics]\ntextfile = "{mount / "edgevoice.prom"}"\n\n'
            f'[debug]\nrecord_turns = 3\nrecord_dir = "{mount / "turns"}"\n'
        )
        with appliance(pulse, store, tmp_path, config=config) as app:
            turns = [ask(pulse, app, speak, q) for q in QUESTIONS]
            stopped = stop(app)
            log = app.stderr_tail(20000)
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
    for question, turn in zip(QUESTIONS, turns, strict=True):
        assert_answered(turn, question, stopped, log)
    assert stopped["output_underruns"] == 0
    assert "cannot write" in log, log[-2000:]  # reported, not fatal
