"""`edgevoice run` as a systemd service: readiness, status and watchdog notifications, and the journal.

- :class:`Notifier` speaks the sd_notify protocol: through ``systemd.daemon.notify`` (systemd-python) when it is
  installed, else by writing the datagram to ``$NOTIFY_SOCKET`` itself; without ``$NOTIFY_SOCKET`` (not started by
  systemd) it does nothing.
- :class:`ServiceMonitor` keeps ``STATUS=`` up to date (loading, listening, replying, degraded) and feeds the watchdog
  from the audio loop's progress: the stream watch in the main thread calls :meth:`ServiceMonitor.tick` every quarter
  second, and the watchdog is pinged only while the listener thread keeps consuming microphone audio. A listener that
  hangs stops the pings, and systemd kills and restarts the service (``WatchdogSec=`` in ``packaging/``).
- :class:`ServiceLog` sends the run's records (ready, each turn, stopped) to the journal with structured fields
  (``TURN_ID``, ``LATENCY_MS``, ``STAGE_<NAME>_MS`` ...) when stderr is connected to the journal, and routes Python
  logging there too. Elsewhere it is off and `edgevoice run` prints as before.

Transcripts and replies are personal data: they reach the journal only with ``[debug] log_transcripts = true``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from edgevoice.errors import EdgeVoiceError

log = logging.getLogger(__name__)
turn_log = logging.getLogger("edgevoice.turns")

STALL_S = 2.0
"""The listener is reported stalled (STATUS=degraded) when it consumed no microphone audio for this long while the
input stream delivers."""


# -- sd_notify ---------------------------------------------------------------------------------------------------------
def _library_notify() -> Callable[[str], bool] | None:
    try:
        from systemd import daemon
    except ImportError:
        return None
    notify: Callable[[str], bool] = daemon.notify
    return notify


def send_datagram(address: str, message: str) -> bool:
    """One sd_notify datagram to ``address`` (a socket path, or ``@name`` for an abstract socket)."""
    if address.startswith("@"):
        target = "\0" + address[1:]
    elif address.startswith("/"):
        target = address
    else:  # vsock and others: not for an appliance
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(target)
            sock.sendall(message.encode())
    except OSError as exc:
        log.debug("sd_notify to %s failed: %s", address, exc)
        return False
    return True


class Notifier:
    """sd_notify messages to the service manager; a no-op when ``$NOTIFY_SOCKET`` is not set."""

    def __init__(self, environ: Mapping[str, str] | None = None, *, use_library: bool = True) -> None:
        env = os.environ if environ is None else environ
        self.address = env.get("NOTIFY_SOCKET") or None
        self._library = _library_notify() if use_library and environ is None else None
        self.watchdog_s = watchdog_interval(env)
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *assignments: str) -> bool:
        """Send ``VAR=value`` assignments in one message; False when there is no service manager to tell."""
        if self.address is None:
            return False
        message = "\n".join(assignments)
        with self._lock:
            if self._library is not None:
                return bool(self._library(message))
            return send_datagram(self.address, message)

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def stopping(self, status: str = "stopping") -> bool:
        return self.send("STOPPING=1", f"STATUS={status}")


def watchdog_interval(environ: Mapping[str, str]) -> float | None:
    """``WatchdogSec=`` in seconds when the watchdog is meant for this process (``WATCHDOG_PID`` unset or ours)."""
    pid, usec = environ.get("WATCHDOG_PID"), environ.get("WATCHDOG_USEC")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    return value / 1e6 if value > 0 else None


# -- status and watchdog -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoopProbe:
    """What the monitor reads from the running loop (all called from the stream-watch thread)."""

    progress: Callable[[], int]
    """The listener's count of microphone samples consumed (``VoiceLoop.samples_in``)."""
    input_alive: Callable[[], bool]
    output_alive: Callable[[], bool]
    errors: Callable[[], int] = lambda: 0


class ServiceMonitor:
    """``STATUS=`` and the watchdog for `edgevoice run` (see the module doc). ``clock``: seconds, monotonic."""

    def __init__(self, notifier: Notifier, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.notifier = notifier
        self.clock = clock
        self.state = "loading"
        self.turns = 0
        self.pings = 0
        self._probe: LoopProbe | None = None
        self._replying_turn: int | None = None
        self._status = ""
        self._last_progress = -1
        self._progress_at_ping = -1
        self._last_advance = 0.0
        self._last_ping = float("-inf")
        self._lock = threading.Lock()

    # -- state changes (any thread) ---------------------------------------------------------------------------------
    def loading(self, what: str = "models") -> None:
        self._set_status(f"loading {what}")

    def ready(self, probe: LoopProbe, load_ms: int) -> None:
        """Every model is loaded and warmed and the streams run: READY=1."""
        self._probe = probe
        self._last_progress = self._progress_at_ping = probe.progress()
        self._last_advance = self.clock()
        self.state = "listening"
        status = self._compose()
        with self._lock:
            self._status = status
        self.notifier.ready(f"{status}; ready in {load_ms} ms")
        self._ping(self.clock())

    def replying(self, turn_id: int) -> None:
        self._replying_turn = turn_id
        self._set_status(self._compose())

    def turn_done(self) -> None:
        self.turns += 1
        self._replying_turn = None
        self._set_status(self._compose())

    def stopping(self) -> None:
        self.state = "stopping"
        self.notifier.stopping()

    # -- the periodic check (the stream-watch thread) ---------------------------------------------------------------
    def tick(self) -> None:
        """Called every fraction of a second by the thread that watches the streams.

        The watchdog is pinged when the listener consumed microphone audio since the last ping, or when no audio
        can come (the input stream is down: this very thread is reopening it, and a restart would not bring the
        device back; STATUS says degraded meanwhile). A listener that stops consuming audio the input stream
        delivers gets no more pings."""
        probe = self._probe
        if probe is None or self.state == "stopping":
            return
        now = self.clock()
        progress = probe.progress()
        if progress != self._last_progress:
            self._last_progress, self._last_advance = progress, now
        input_alive = probe.input_alive()
        healthy = progress != self._progress_at_ping or not input_alive
        interval = self.notifier.watchdog_s
        if healthy and interval is not None and now - self._last_ping >= min(1.0, interval / 4):
            self._progress_at_ping = progress
            self._ping(now)
        self._set_status(self._compose(now, input_alive=input_alive, output_alive=probe.output_alive()))

    def _ping(self, now: float) -> None:
        if self.notifier.watchdog_s is not None and self.notifier.watchdog():
            self._last_ping = now
            self.pings += 1

    def _compose(self, now: float | None = None, *, input_alive: bool = True, output_alive: bool = True) -> str:
        problems = []
        if not input_alive:
            problems.append("microphone stream down, reopening")
        elif now is not None and now - self._last_advance > STALL_S:
            problems.append(f"listener stalled for {now - self._last_advance:.0f} s")
        if not output_alive:
            problems.append("speaker stream down, reopening")
        errors = self._probe.errors() if self._probe is not None else 0
        counts = f"turns {self.turns}, errors {errors}"
        if problems:
            self.state = "degraded"
            return f"degraded: {'; '.join(problems)} ({counts})"
        if self._replying_turn is not None:
            self.state = "replying"
            return f"replying to turn {self._replying_turn} ({counts})"
        self.state = "listening"
        return f"listening ({counts})"

    def _set_status(self, status: str) -> None:
        with self._lock:
            if status == self._status:
                return
            self._status = status
        self.notifier.status(status)

    @property
    def status(self) -> str:
        return self._status


# -- the journal -------------------------------------------------------------------------------------------------------
def stderr_is_journal(environ: Mapping[str, str] | None = None) -> bool:
    """Whether stderr is a stream into the journal (systemd sets ``JOURNAL_STREAM`` to its device:inode)."""
    value = (os.environ if environ is None else environ).get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):
        return False
    return value == f"{st.st_dev}:{st.st_ino}"


def _field(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).upper()


def journal_fields(record: Mapping[str, Any], *, transcripts: bool) -> tuple[str, dict[str, object]]:
    """The journal message and structured fields of one `edgevoice run` record (``ready``, ``turn``, ...)."""
    event = str(record["event"])
    fields: dict[str, object] = {"EDGEVOICE_EVENT": event}
    if "turn" in record:
        fields["TURN_ID"] = record["turn"]
    if event == "turn":
        total = record.get("voice_to_voice_ms")
        stages = record.get("stages_ms") or {}
        assert isinstance(stages, Mapping)
        for stage, ms in stages.items():
            fields[f"STAGE_{_field(stage)}_MS"] = ms
        reply_ms = record.get("reply_ms") or {}
        assert isinstance(reply_ms, Mapping)
        for stage, ms in reply_ms.items():
            fields[f"REPLY_{_field(stage)}_MS"] = ms
        if total is not None:
            fields["LATENCY_MS"] = total
        keys = ("reason", "cancelled", "underruns", "reply_seconds", "speculation_valid", "llm", "llm_remote_error")
        for key in keys:
            if record.get(key) is not None:
                fields[_field(key)] = int(v) if isinstance(v := record[key], bool) else v
        if transcripts:
            fields["TRANSCRIPT"], fields["REPLY"] = record.get("transcript", ""), record.get("reply", "")
        latency = f"voice-to-voice {total} ms" if total is not None else "no reply played"
        stage_text = ", ".join(f"{k} {v}" for k, v in stages.items())
        message = f"turn {record['turn']}: {latency}" + (f" ({stage_text})" if stage_text else "")
        if record.get("cancelled"):
            message += ", interrupted by the visitor"
        return message, fields
    for key, value in record.items():
        if key not in ("event", "turn", "text"):
            fields[_field(key)] = value
    details = ", ".join(f"{k}={v}" for k, v in record.items() if k not in ("event", "text"))
    return f"{event}" + (f": {details}" if details else ""), fields


class ServiceLog:
    """The run's records and Python logging into the journal, with structured fields, when stderr goes there."""

    def __init__(
        self,
        *,
        transcripts: bool = False,
        enabled: bool | None = None,
        sender: Callable[..., object] | None = None,
    ) -> None:
        """``enabled``: None decides by ``$JOURNAL_STREAM``; ``sender`` replaces ``systemd.journal.send`` (tests)."""
        self.transcripts = transcripts
        self.enabled = stderr_is_journal() if enabled is None else enabled
        self._handler: logging.Handler | None = None
        self._replaced: list[logging.Handler] = []
        if self.enabled:
            try:
                from systemd.journal import JournalHandler
            except ImportError:  # systemd-python missing: plain stderr lines still reach the journal
                self.enabled = False
                return
            if sender is None:
                self._handler = JournalHandler(SYSLOG_IDENTIFIER="edgevoice")
            else:
                self._handler = JournalHandler(sender_function=sender, SYSLOG_IDENTIFIER="edgevoice")

    def install(self) -> None:
        """Route Python logging to the journal (instead of plain stderr lines); undone by :meth:`close`."""
        if self._handler is None:
            return
        root = logging.getLogger()
        self._replaced = [
            h
            for h in root.handlers
            if type(h) is logging.StreamHandler and h.stream in (sys.stderr, sys.__stderr__)  # basicConfig's
        ]
        for handler in self._replaced:
            root.removeHandler(handler)
        root.addHandler(self._handler)

    def record(self, record: Mapping[str, Any]) -> bool:
        """Send one run record to the journal; False when the journal is off (the caller prints it)."""
        if self._handler is None:
            return False
        if record.get("event") == "partial":  # partial transcripts: neither useful in a log nor private
            return True
        message, fields = journal_fields(record, transcripts=self.transcripts)
        # straight to the journal, whatever the logging levels (no args: the message is not %-formatted)
        self._handler.handle(
            turn_log.makeRecord(turn_log.name, logging.INFO, __file__, 0, message, (), None, extra=fields)
        )
        return True

    def error(self, exc: EdgeVoiceError) -> None:
        """A fatal error with its stable code and stage as fields (the exit status follows)."""
        log.error("%s", exc, extra={"ERROR_CODE": exc.code, "STAGE": exc.stage or ""})

    def close(self) -> None:
        if self._handler is None:
            return
        root = logging.getLogger()
        root.removeHandler(self._handler)
        for handler in self._replaced:
            root.addHandler(handler)
        with contextlib.suppress(Exception):
            self._handler.close()
