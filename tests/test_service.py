"""The service glue without a service manager: sd_notify datagrams on a real socket, the watchdog and STATUS logic on
a manual clock, the journal fields, the fault-injection knob. (Under a real systemd: tests/test_service_nspawn.py.)"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgevoice.errors import ConfigError
from edgevoice.interfaces import Engines
from edgevoice.live.faults import STALL_LISTENER, StallingVad, inject_faults
from edgevoice.live.service import (
    LoopProbe,
    Notifier,
    ServiceLog,
    ServiceMonitor,
    journal_fields,
    send_datagram,
    stderr_is_journal,
    watchdog_interval,
)


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    path = str(tmp_path / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(2.0)
    yield path, sock
    sock.close()


def received(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


@pytest.mark.parametrize("use_library", [True, False], ids=["systemd-python", "own-datagram"])
def test_notifier_sends_ready_status_watchdog_and_stopping(
    notify_socket: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch, use_library: bool
) -> None:
    path, sock = notify_socket
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "10000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    notifier = Notifier(use_library=use_library)
    if use_library:
        assert notifier._library is not None, "systemd-python is a dependency: it must be importable"
    assert notifier.enabled and notifier.watchdog_s == 10.0
    assert notifier.ready("listening")
    assert received(sock) == ["READY=1", "STATUS=listening"]
    assert notifier.status("replying to turn 1")
    assert received(sock) == ["STATUS=replying to turn 1"]
    assert notifier.watchdog()
    assert received(sock) == ["WATCHDOG=1"]
    assert notifier.stopping()
    assert received(sock) == ["STOPPING=1", "STATUS=stopping"]


def test_notifier_is_a_no_op_outside_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    notifier = Notifier()
    assert not notifier.enabled
    assert notifier.ready("listening") is False and notifier.watchdog() is False


def test_datagram_to_an_abstract_socket() -> None:
    name = f"edgevoice-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2.0)
        assert send_datagram("@" + name, "WATCHDOG=1")
        assert sock.recv(100) == b"WATCHDOG=1"
    assert not send_datagram("@" + name, "WATCHDOG=1")  # nobody listening: False, no exception
    assert not send_datagram("vsock:2:1234", "READY=1")


def test_watchdog_interval_is_only_for_the_process_it_names() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "4000000"}) == 4.0
    assert watchdog_interval({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}) == 4.0
    assert watchdog_interval({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "soon"}) is None
    assert watchdog_interval({}) is None


class FakeNotifier(Notifier):
    def __init__(self, watchdog_s: float | None = 10.0) -> None:
        super().__init__({"NOTIFY_SOCKET": "/nowhere"})
        self.watchdog_s = watchdog_s
        self.sent: list[tuple[str, ...]] = []

    def send(self, *assignments: str) -> bool:
        self.sent.append(assignments)
        return True

    def statuses(self) -> list[str]:
        return [a.removeprefix("STATUS=") for msg in self.sent for a in msg if a.startswith("STATUS=")]

    def pings(self) -> int:
        return sum(msg == ("WATCHDOG=1",) for msg in self.sent)


class FakeLoop:
    def __init__(self) -> None:
        self.samples = 0
        self.input_alive = True
        self.output_alive = True
        self.errors = 0

    def probe(self) -> LoopProbe:
        return LoopProbe(
            progress=lambda: self.samples,
            input_alive=lambda: self.input_alive,
            output_alive=lambda: self.output_alive,
            errors=lambda: self.errors,
        )


def run_ticks(monitor: ServiceMonitor, clock: list[float], loop: FakeLoop, seconds: float, *, listening: bool) -> None:
    """Tick every 0.25 s for ``seconds``; the listener consumes a 32 ms frame per tick when ``listening``."""
    for _ in range(round(seconds / 0.25)):
        clock[0] += 0.25
        if listening:
            loop.samples += 512
        monitor.tick()


def test_watchdog_is_fed_only_while_the_listener_makes_progress() -> None:
    clock = [100.0]
    notifier, loop = FakeNotifier(watchdog_s=10.0), FakeLoop()
    monitor = ServiceMonitor(notifier, clock=lambda: clock[0])
    monitor.loading()
    assert notifier.statuses() == ["loading models"] and notifier.pings() == 0
    monitor.ready(loop.probe(), load_ms=1234)
    assert notifier.sent[1] == ("READY=1", "STATUS=listening (turns 0, errors 0); ready in 1234 ms")

    run_ticks(monitor, clock, loop, 10.0, listening=True)
    healthy_pings = notifier.pings()
    assert 9 <= healthy_pings <= 12  # at most one a second (a quarter of WatchdogSec=10)

    run_ticks(monitor, clock, loop, 15.0, listening=False)  # the listener hangs; the microphone still delivers
    assert notifier.pings() == healthy_pings, "a stalled listener must not feed the watchdog"
    assert monitor.state == "degraded"
    assert notifier.statuses()[-1].startswith("degraded: listener stalled for")

    run_ticks(monitor, clock, loop, 3.0, listening=True)  # progress again (never happens after a real kill)
    assert notifier.pings() > healthy_pings
    assert notifier.statuses()[-1] == "listening (turns 0, errors 0)"


def test_a_lost_microphone_degrades_the_status_but_keeps_the_watchdog_fed() -> None:
    """No audio can come while the input device is gone: the watch loop (which calls tick) is reopening it, and a
    restart would not bring the device back, so the watchdog stays fed and STATUS says what is wrong."""
    clock = [0.0]
    notifier, loop = FakeNotifier(watchdog_s=10.0), FakeLoop()
    monitor = ServiceMonitor(notifier, clock=lambda: clock[0])
    monitor.ready(loop.probe(), load_ms=1)
    loop.input_alive = False
    before = notifier.pings()
    run_ticks(monitor, clock, loop, 20.0, listening=False)
    assert notifier.pings() - before >= 18
    assert notifier.statuses()[-1] == "degraded: microphone stream down, reopening (turns 0, errors 0)"
    loop.input_alive, loop.output_alive = True, False
    run_ticks(monitor, clock, loop, 1.0, listening=True)
    assert notifier.statuses()[-1] == "degraded: speaker stream down, reopening (turns 0, errors 0)"


def test_status_follows_the_turns() -> None:
    clock = [0.0]
    notifier, loop = FakeNotifier(watchdog_s=None), FakeLoop()
    monitor = ServiceMonitor(notifier, clock=lambda: clock[0])
    monitor.ready(loop.probe(), load_ms=1)
    monitor.replying(1)
    assert monitor.state == "replying" and notifier.statuses()[-1] == "replying to turn 1 (turns 0, errors 0)"
    run_ticks(monitor, clock, loop, 1.0, listening=True)
    assert notifier.statuses()[-1] == "replying to turn 1 (turns 0, errors 0)"  # ticks do not repeat a status
    loop.errors = 1
    monitor.turn_done()
    assert monitor.state == "listening" and notifier.statuses()[-1] == "listening (turns 1, errors 1)"
    assert notifier.pings() == 0  # no WatchdogSec: never pinged
    n = len(notifier.sent)
    run_ticks(monitor, clock, loop, 2.0, listening=True)
    assert len(notifier.sent) == n  # unchanged status: nothing sent
    monitor.stopping()
    assert notifier.sent[-1] == ("STOPPING=1", "STATUS=stopping")
    run_ticks(monitor, clock, loop, 1.0, listening=False)
    assert notifier.sent[-1] == ("STOPPING=1", "STATUS=stopping")


TURN = {
    "event": "turn",
    "turn": 3,
    "reason": "complete",
    "transcript": "where are the toilets",
    "reply": "Down the hall on your left.",
    "cancelled": False,
    "underruns": 0,
    "stages_ms": {"endpointing": 210.0, "recognition": 180.5, "first_token": 140.0},
    "voice_to_voice_ms": 612.4,
    "marks_ms": {"speech_end": 0.0},
    "reply_ms": {"llm": 900.0, "tts": 120.0},
}


def test_turn_records_become_structured_journal_fields_without_the_words() -> None:
    message, fields = journal_fields(TURN, transcripts=False)
    assert message == "turn 3: voice-to-voice 612.4 ms (endpointing 210.0, recognition 180.5, first_token 140.0)"
    assert fields["TURN_ID"] == 3 and fields["LATENCY_MS"] == 612.4
    assert fields["STAGE_RECOGNITION_MS"] == 180.5 and fields["STAGE_FIRST_TOKEN_MS"] == 140.0
    assert fields["REPLY_LLM_MS"] == 900.0 and fields["CANCELLED"] == 0 and fields["EDGEVOICE_EVENT"] == "turn"
    assert "TRANSCRIPT" not in fields and "REPLY" not in fields
    assert "toilets" not in message
    _, with_words = journal_fields(TURN, transcripts=True)
    assert with_words["TRANSCRIPT"] == "where are the toilets" and with_words["REPLY"] == "Down the hall on your left."


def test_service_log_sends_records_and_logging_to_the_journal() -> None:
    sent: list[tuple[str, dict[str, object]]] = []
    journal = ServiceLog(enabled=True, sender=lambda text, /, **fields: sent.append((text, fields)))
    journal.install()
    try:
        assert journal.record(TURN)
        assert journal.record({"event": "partial", "turn": 4, "text": "where"})  # swallowed, not logged
        assert journal.record({"event": "ready", "load_ms": 5120})
        logging.getLogger("edgevoice.live.loop").error("turn %d failed in %s", 5, "asr")
        journal.error(ConfigError("llm.threads = 0: must be between 1 and 64"))
    finally:
        journal.close()
    assert logging.getLogger().handlers.count(journal._handler) == 0  # type: ignore[arg-type]
    messages = [m for m, _ in sent]
    assert messages[0].startswith("turn 3: voice-to-voice 612.4 ms")
    assert sent[0][1]["TURN_ID"] == 3 and sent[0][1]["STAGE_RECOGNITION_MS"] == 180.5
    assert sent[0][1]["PRIORITY"] == "6" and sent[0][1]["SYSLOG_IDENTIFIER"] == "edgevoice"
    assert messages[1] == "ready: load_ms=5120" and sent[1][1]["LOAD_MS"] == 5120
    assert messages[2] == "turn 5 failed in asr" and sent[2][1]["PRIORITY"] == "3"
    assert "[config_invalid]" in messages[3] and sent[3][1]["ERROR_CODE"] == "config_invalid"
    assert len(sent) == 4


def test_service_log_is_off_unless_stderr_is_the_journal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", "0:0")
    assert not stderr_is_journal()
    journal = ServiceLog()
    assert not journal.enabled and journal.record(TURN) is False


class RecordingVad:
    def __init__(self) -> None:
        self.frames = 0
        self.frame_samples = 512

    def probability(self, frame: object) -> float:
        self.frames += 1
        return 0.25


def test_stall_fault_blocks_the_vad_until_released() -> None:
    vad, release = RecordingVad(), threading.Event()
    engines = Engines(vad=vad, recognizer=None, llm=None, synthesizer=None)  # type: ignore[arg-type]
    assert inject_faults(engines, release, environ={}) is engines  # no knob: untouched
    faulty = inject_faults(engines, release, environ={STALL_LISTENER: "0"})
    stalling = faulty.vad
    assert isinstance(stalling, StallingVad) and stalling.frame_samples == 512  # everything else passes through
    result: list[float] = []
    worker = threading.Thread(target=lambda: result.append(stalling.probability(np.zeros(512, np.float32))))
    worker.start()
    assert stalling.stalled.wait(2.0)
    worker.join(0.2)
    assert worker.is_alive() and result == [] and vad.frames == 0
    release.set()
    worker.join(2.0)
    assert result == [0.25] and vad.frames == 1


def test_stall_fault_waits_its_delay() -> None:
    vad = RecordingVad()
    stalling = StallingVad(vad, after_s=3600.0, release=threading.Event())
    for _ in range(5):
        assert stalling.probability(np.zeros(512, np.float32)) == 0.25
    assert not stalling.stalled.is_set() and vad.frames == 5
