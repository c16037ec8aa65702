"""`edgevoice run --json` as a child process, its JSON records collected on a thread (for the self-test and the
tests through the real audio stack). Its stderr goes to a file, so a chatty child can never block on a full pipe."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import Self

from edgevoice.errors import SelftestError

Record = dict[str, object]


def verbose_flag() -> tuple[str, ...]:
    """``-v`` (the appliance logs its progress to its stderr) when ``$EDGEVOICE_TEST_VERBOSE`` is set."""
    return ("-v",) if os.environ.get("EDGEVOICE_TEST_VERBOSE") else ()


class ApplianceProcess:
    """``python -m edgevoice run --json [args]`` with ``env``; :meth:`next` waits for a record by event name."""

    def __init__(self, env: dict[str, str], args: tuple[str, ...] = (), *, cwd: Path | None = None) -> None:
        self._stderr = tempfile.TemporaryFile(mode="w+", prefix="edgevoice-run-")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "edgevoice", *verbose_flag(), "run", "--json", *args],
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self.records: queue.Queue[Record] = queue.Queue()
        self.seen: list[Record] = []
        self.garbled: deque[str] = deque(maxlen=3)
        """The last lines that began as a record but did not parse."""
        self._reader = threading.Thread(target=self._read, name="edgevoice-selftest-records", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                try:
                    self.records.put(json.loads(line))
                except json.JSONDecodeError:
                    self.garbled.append(line[:300])  # shown when a record is missed: never skipped silently

    def next(self, event: str, timeout: float) -> Record:
        """The next record of ``event`` (earlier records of other events are kept in :attr:`seen`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                record = self.records.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self.records.empty():
                    raise SelftestError(
                        f"edgevoice run exited ({self.proc.returncode}) while waiting for {event!r}: "
                        f"{self.stderr_tail()}"
                    ) from None
                continue
            self.seen.append(record)
            if record["event"] == event:
                return record
        recent = [r.get("event") for r in self.seen[-12:]]
        last = json.dumps(self.seen[-1])[:800] if self.seen else "none"
        raise SelftestError(
            f"no {event!r} record from edgevoice run within {timeout:.0f} s (its last records: {recent}; the last: "
            f"{last}; lines that did not parse: {list(self.garbled)}): {self.stderr_tail()}"
        )

    def maybe_next(self, event: str, timeout: float) -> Record | None:
        """The next record of ``event`` if one comes within ``timeout``, else None."""
        try:
            return self.next(event, timeout)
        except SelftestError:
            if self.proc.poll() is not None:
                raise
            return None

    def stderr_tail(self, chars: int = 4000) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read()[-chars:]

    def stop(self, timeout: float = 10.0) -> float:
        """SIGTERM, then wait for the exit; returns the seconds it took."""
        t = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=timeout)
        return time.monotonic() - t

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(timeout=5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
