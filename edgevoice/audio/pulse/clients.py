"""Clients of the private PulseAudio server: ``parec`` recorders and ``paplay`` players, as child processes that die
with the thread that started them (``setpriv --pdeathsig``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt


class ServerEnv(Protocol):
    """What a client needs of the server it talks to (:class:`edgevoice.audio.pulse.server.PulseServer`)."""

    def client_env(self) -> dict[str, str]: ...


FloatAudio = npt.NDArray[np.float32]

POLL_S = 0.01


def guarded(args: list[str]) -> list[str]:
    """``args`` run so that the child gets SIGKILL when the thread that started it dies (``setpriv --pdeathsig``,
    which then execs the command under the same pid); unguarded where util-linux's setpriv is missing."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", *args] if setpriv else args


def stop_process(proc: subprocess.Popen[bytes], timeout: float, sig: int = signal.SIGTERM) -> None:
    """Signal ``proc`` by its pid, wait up to ``timeout``, then SIGKILL and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5.0)


class Recorder:
    """``parec`` writing raw s16le from one source to a file; :meth:`stop` returns what it recorded."""

    def __init__(self, server: ServerEnv, source: str, rate: int, channels: int, path: Path) -> None:
        self.source, self.rate, self.channels, self.path = source, rate, channels, path
        self._server = server
        self._file = path.open("wb")
        self._errors = path.with_suffix(".err").open("w+b")
        self._proc: subprocess.Popen[bytes] = subprocess.Popen(
            guarded(
                [
                    "parec",
                    f"--device={source}",
                    "--format=s16le",
                    f"--rate={rate}",
                    f"--channels={channels}",
                    "--raw",
                    "--latency-msec=10",
                    "--process-time-msec=5",
                ]
            ),
            stdout=self._file,
            stderr=self._errors,
            env=server.client_env(),
        )
        self._result: FloatAudio | None = None

    @property
    def samples(self) -> int:
        """Samples (per channel) recorded so far."""
        return self.path.stat().st_size // (2 * self.channels)

    def wait_for(self, samples: int, timeout: float = 10.0) -> None:
        """Block until at least ``samples`` samples have been recorded (the null sink renders in real time, so a
        live recorder always progresses, silence included)."""
        deadline = time.monotonic() + timeout
        while self.samples < samples:
            if self._proc.poll() is not None:
                raise RuntimeError(f"parec on {self.source} exited: {self._stderr()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"parec on {self.source}: {self.samples} of {samples} samples after {timeout} s")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=POLL_S)

    def wait_started(self, timeout: float = 10.0) -> None:
        """Block until the recorder delivers data: from then on nothing played into the source is missed."""
        self.wait_for(1, timeout)

    def wait_more(self, seconds: float, timeout: float = 10.0) -> None:
        """Block until ``seconds`` more audio than recorded now has been recorded."""
        self.wait_for(self.samples + round(seconds * self.rate), timeout)

    def stop(self) -> FloatAudio:
        """Stop recording; float32 samples (channels interleaved in an ``(n, channels)`` array if more than one)."""
        if self._result is None:
            stop_process(self._proc, timeout=5.0, sig=signal.SIGINT)
            self._file.close()
            self._errors.close()
            raw = np.frombuffer(self.path.read_bytes(), dtype="<i2")
            raw = raw[: len(raw) // self.channels * self.channels]
            audio = (raw.astype(np.float32) / 32768.0).reshape(-1, self.channels)
            self._result = audio[:, 0].copy() if self.channels == 1 else audio
        return self._result

    def _stderr(self) -> str:
        return self.path.with_suffix(".err").read_text(errors="replace").strip()


class Player:
    """``paplay`` of one WAV file into a sink."""

    def __init__(self, server: ServerEnv, path: Path, sink: str, log: Path) -> None:
        self.sink = sink
        self._log = log
        with log.open("wb") as errors:
            self._proc: subprocess.Popen[bytes] = subprocess.Popen(
                guarded(["paplay", f"--device={sink}", str(path)]),  # default (large) buffer: no gaps under load
                stdout=subprocess.DEVNULL,
                stderr=errors,
                env=server.client_env(),
            )

    def wait(self, timeout: float = 30.0) -> None:
        """Block until everything was played (paplay drains before it exits)."""
        try:
            rc = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        if rc != 0:
            err = self._log.read_text(errors="replace").strip()
            raise RuntimeError(f"paplay into {self.sink} failed ({rc}): {err}")

    def done(self) -> bool:
        return self._proc.poll() is not None

    def stop(self) -> None:
        stop_process(self._proc, timeout=5.0)
