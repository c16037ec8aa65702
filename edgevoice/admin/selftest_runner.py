"""The admin page's self-test: `edgevoice selftest` in a child process, one at a time, its summary kept."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SUMMARY_LINES = 20
"""The last this many lines of the self-test's table and verdict are shown."""
TIMEOUT_S = 600.0


def selftest_command(config_source: str) -> Callable[[Path], list[str]]:
    """The argv of `edgevoice selftest` for the running config, its report and chart written into a given folder."""

    def argv(folder: Path) -> list[str]:
        args = [sys.executable, "-m", "edgevoice", "selftest", "--json"]
        if config_source != "<defaults>":
            args += ["--config", str(Path(config_source).resolve())]
        return [*args, "--report", str(folder / "selftest.json"), "--chart", str(folder / "selftest.png")]

    return argv


@dataclass
class SelftestState:
    running: bool = False
    runs: int = 0
    exit_code: int | None = None
    verdict: str = ""
    summary: str = ""
    seconds: float | None = None
    history: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "running": self.running,
            "runs": self.runs,
            "exit_code": self.exit_code,
            "verdict": self.verdict,
            "summary": self.summary,
            "seconds": self.seconds,
        }


class SelftestRunner:
    """Runs the self-test command on its own thread; :meth:`start` refuses a second run while one goes on, and
    :meth:`close` ends the child and joins the thread."""

    def __init__(self, argv: Callable[[Path], Sequence[str]], *, timeout_s: float = TIMEOUT_S) -> None:
        self._argv = argv
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._state = SelftestState()
        self._thread: threading.Thread | None = None
        self._child: subprocess.Popen[str] | None = None
        self._closed = False

    def state(self) -> SelftestState:
        with self._lock:
            return SelftestState(**{k: v for k, v in self._state.__dict__.items() if k != "history"})

    def start(self) -> bool:
        """Start a run; False when one is running already (or the runner is closed)."""
        with self._lock:
            if self._state.running or self._closed:
                return False
            self._state.running = True
            self._state.runs += 1
            self._thread = threading.Thread(target=self._run, name="edgevoice-admin-selftest", daemon=True)
            self._thread.start()
            return True

    def wait(self, timeout: float) -> bool:
        """Wait for the run in progress; True when none runs."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.state().running

    def _run(self) -> None:
        t0 = time.monotonic()
        code, verdict, summary = -1, "failed to run", ""
        with tempfile.TemporaryDirectory(prefix="edgevoice-selftest-") as folder:
            try:
                with self._lock:
                    if self._closed:
                        raise OSError("the admin page is stopping")
                    child = self._child = subprocess.Popen(
                        list(self._argv(Path(folder))),
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                        stdin=subprocess.DEVNULL,
                    )
                try:
                    out, err = child.communicate(timeout=self._timeout_s)
                except subprocess.TimeoutExpired:
                    child.kill()
                    out, err = child.communicate()
                    err += f"\nthe self-test took longer than {self._timeout_s:.0f} s and was stopped"
                code = child.returncode
                verdict = _verdict(out, code)
                summary = "\n".join(err.strip().splitlines()[-SUMMARY_LINES:])
            except OSError as exc:
                summary = str(exc)
        with self._lock:
            self._child = None
            s = self._state
            s.running, s.exit_code, s.verdict, s.summary = False, code, verdict, summary
            s.seconds = round(time.monotonic() - t0, 1)

    def close(self, timeout: float = 2.0) -> None:
        with self._lock:
            self._closed = True
            child = self._child
        if child is not None:
            with contextlib.suppress(OSError):
                child.terminate()
        if self._thread is not None:
            self._thread.join(timeout)


def _verdict(stdout: str, code: int) -> str:
    """The report's verdict ("pass", "over budget", ...), else what the exit status says."""
    with contextlib.suppress(ValueError, KeyError, TypeError):
        data = json.loads(stdout)
        return f"{data['verdict']} (p95 {data.get('verdict_on', '?')}, budget {data.get('budget_ms', '?')} ms)"
    return "pass" if code == 0 else f"failed (exit status {code})"
