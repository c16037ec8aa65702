"""A private PulseAudio server with null sinks: real-time audio streams for tests on a machine without a sound card.

    with PulseServer() as pulse, pulse.environ(source="mic.monitor", sink="spk"):
        recorder = pulse.record("spk.monitor")
        pulse.play(tone, sink="mic").wait()          # the "user" speaks into the mic
        ...                                          # the appliance listens on mic.monitor, speaks into spk
        heard = recorder.stop()                      # what the appliance said

Two null sinks, ``mic`` and ``spk``, each with a ``.monitor`` source; both hops are bit-exact at the sinks' rate.
PortAudio reaches the server through ALSA's ``pulse`` device, libpulse clients through ``PULSE_SERVER``.

The server runs in a private temporary HOME and XDG_RUNTIME_DIR (mode 700), as root and without systemd or D-Bus,
and is stopped by its pid on exit (SIGTERM, a bounded wait, then SIGKILL). It also gets SIGKILL if the thread that
started it dies (``setpriv --pdeathsig``), so a crashed test run leaves no server behind: start it from the main thread.

Pitfalls, and what this harness does about them:

- A fresh stream into a null sink loses its first milliseconds: PulseAudio rewinds the sink to start the new stream
  early, and what the monitor already got is not rewound. The sinks are loaded with ``norewinds=1``: nothing is
  lost (checked bit for bit).
- An idle null sink renders 2 s ahead, so a client on its monitor could wait 2 s for its first data. A low-latency
  recorder is kept on each monitor and the sink is suspended and resumed once (:meth:`PulseServer._prime`).
- The first input read can block for a second or more under load: wait for the first callback (or recorded bytes) before
  injecting audio.
- When a sink is unloaded, PulseAudio moves streams on it (or on its monitor) to another sink or source if one
  exists, so a stream survives a "vanished device" unless every sink is gone.
- In-process PortAudio reads ``PULSE_SERVER`` when a stream opens: enter :meth:`PulseServer.environ` first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import numpy as np
import numpy.typing as npt
import soundfile

from edgevoice.audio.pulse.clients import POLL_S, Player, Recorder, guarded, stop_process

FloatAudio = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class SinkSpec:
    name: str
    rate: int = 16000
    channels: int = 1

    def module_args(self) -> str:
        return (
            f"sink_name={self.name} rate={self.rate} channels={self.channels} format=s16le norewinds=1 "
            f"sink_properties=device.description={self.name}"
        )


class PulseServer:
    """A private PulseAudio server with null sinks (default ``mic`` and ``spk``, 16 kHz mono)."""

    def __init__(
        self,
        sinks: tuple[SinkSpec, ...] = (SinkSpec("mic"), SinkSpec("spk")),
        *,
        start_timeout: float = 10.0,
        stop_timeout: float = 5.0,
    ) -> None:
        self.sinks = {s.name: s for s in sinks}
        self._start_timeout, self._stop_timeout = start_timeout, stop_timeout
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._modules: dict[str, int] = {}
        self._children: list[Recorder | Player] = []
        self._keepers: dict[str, subprocess.Popen[bytes]] = {}
        self._count = 0

    # -- lifetime ------------------------------------------------------------------------------------------------
    def start(self) -> PulseServer:
        root = Path(tempfile.mkdtemp(prefix="ev-pulse-"))
        self._dir = root
        for sub in ("home", "xdg", "work"):
            (root / sub).mkdir(mode=0o700)
            (root / sub).chmod(0o700)
        self.socket = root / "xdg" / "native"
        self.env = {
            "PULSE_SERVER": f"unix:{self.socket}",
            "PULSE_COOKIE": str(root / "home" / "cookie"),
            "HOME": str(root / "home"),
            "XDG_RUNTIME_DIR": str(root / "xdg"),
        }
        args = [
            "pulseaudio",
            "-n",
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--use-pid-file=no",
            "--system=no",
            "--realtime=no",
            "--high-priority=no",
            "--disallow-module-loading=no",
            "--log-target=stderr",
            "-L",
            f"module-native-protocol-unix socket={self.socket} auth-anonymous=1",
        ]
        for spec in self.sinks.values():
            args += ["-L", f"module-null-sink {spec.module_args()}"]
        self._log = (root / "pulseaudio.log").open("wb")
        self._proc = subprocess.Popen(
            guarded(args),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env={**os.environ, **self.env},
            cwd=root,
        )
        try:
            self._wait_ready()
            self._modules = self._null_sink_modules()
            for name in self.sinks:
                self._prime(name)
        except BaseException:
            self.close()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self._start_timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"pulseaudio exited ({self._proc.returncode}): {self.log()}")
            if self.socket.exists():
                probe = subprocess.run(
                    ["pactl", "info"], env=self.client_env(), capture_output=True, timeout=5.0, check=False
                )
                if probe.returncode == 0:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(f"pulseaudio did not answer within {self._start_timeout} s: {self.log()}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=POLL_S)

    def _prime(self, name: str) -> None:
        """Make the null sink ``name`` render in small blocks from now on.

        An idle null sink renders 2 s ahead, so a client that connects to its monitor would wait up to 2 s for its
        first data. A low-latency recorder kept on the monitor for the server's lifetime lowers the sink's block
        size; suspending and resuming the sink then restarts its timer at once.
        """
        spec = self.sinks[name]
        keeper = subprocess.Popen(
            guarded(
                [
                    "parec",
                    f"--device={name}.monitor",
                    "--format=s16le",
                    f"--rate={spec.rate}",
                    f"--channels={spec.channels}",
                    "--raw",
                    "--latency-msec=10",
                    "--client-name=keepalive",
                ]
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self.client_env(),
        )
        self._keepers[name] = keeper
        deadline = time.monotonic() + self._start_timeout
        while not self._has_output(f"{name}.monitor"):
            if keeper.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"keep-alive recorder on {name}.monitor did not connect: {self.log()}")
            with contextlib.suppress(subprocess.TimeoutExpired):
                keeper.wait(timeout=POLL_S)
        self.pactl("suspend-sink", name, "1")
        self.pactl("suspend-sink", name, "0")

    def _has_output(self, source: str) -> bool:
        index = next(
            (
                line.split("\t")[0]
                for line in self.pactl("list", "short", "sources").splitlines()
                if line.split("\t")[1:2] == [source]
            ),
            None,
        )
        return index is not None and any(
            line.split("\t")[1:2] == [index] for line in self.pactl("list", "short", "source-outputs").splitlines()
        )

    def close(self) -> None:
        """Stop recorders and players, then the server (by its pid, bounded), and remove the private directory."""
        for child in self._children:
            child.stop()
        self._children.clear()
        for keeper in self._keepers.values():
            stop_process(keeper, timeout=5.0)
        self._keepers.clear()
        if self._proc is not None:
            stop_process(self._proc, self._stop_timeout)
            self._proc = None
            self._log.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> PulseServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def pid(self) -> int:
        assert self._proc is not None, "server not started"
        return self._proc.pid

    def log(self) -> str:
        return (self._dir / "pulseaudio.log").read_text(errors="replace") if self._dir else ""

    # -- clients -------------------------------------------------------------------------------------------------
    def client_env(self, *, source: str | None = None, sink: str | None = None) -> dict[str, str]:
        """Environment for a child process: the server, the private dirs and optionally its default source/sink."""
        env = {**os.environ, **self.env}
        for key, value in (("PULSE_SOURCE", source), ("PULSE_SINK", sink)):
            env.pop(key, None)
            if value is not None:
                env[key] = value
        return env

    @contextlib.contextmanager
    def environ(self, *, source: str | None = None, sink: str | None = None) -> Iterator[dict[str, str]]:
        """Point this process's libpulse clients (PortAudio's ALSA ``pulse`` device) at the server, optionally with a
        default source and sink; enter before creating streams. Only ``PULSE_*`` variables change (``PULSE_COOKIE``
        keeps libpulse from writing a cookie into the real HOME); all are restored on exit."""
        wanted = {key: self.env[key] for key in ("PULSE_SERVER", "PULSE_COOKIE")}
        if source is not None:
            wanted["PULSE_SOURCE"] = source
        if sink is not None:
            wanted["PULSE_SINK"] = sink
        keys = [*wanted, "PULSE_SOURCE", "PULSE_SINK"]
        saved = {key: os.environ.get(key) for key in keys}
        for key in ("PULSE_SOURCE", "PULSE_SINK"):
            os.environ.pop(key, None)
        os.environ.update(wanted)
        try:
            yield wanted
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def pactl(self, *args: str) -> str:
        proc = subprocess.run(["pactl", *args], env=self.client_env(), capture_output=True, timeout=10.0, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"pactl {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout.decode()

    def _work_file(self, stem: str, suffix: str) -> Path:
        assert self._dir is not None, "server not started"
        self._count += 1
        return self._dir / "work" / f"{stem}-{self._count}{suffix}"

    def play(self, audio: str | Path | FloatAudio, sink: str = "mic", *, rate: int | None = None) -> Player:
        """Play a sound file, or float samples at ``rate`` (default: the sink's rate), into ``sink``; returns at once.

        ``Player.wait()`` blocks until it has been played out.
        """
        if isinstance(audio, str | Path):
            path = Path(audio)
        else:
            path = self._work_file("play", ".wav")
            spec_rate = self.sinks[sink].rate if sink in self.sinks else 16000
            soundfile.write(str(path), np.clip(audio, -1.0, 1.0), rate or spec_rate, subtype="PCM_16")
        player = Player(self, path, sink, self._work_file("play", ".err"))
        self._children.append(player)
        return player

    def record(self, source: str = "spk.monitor", *, rate: int | None = None, channels: int = 1) -> Recorder:
        """Start recording ``source`` (default at its sink's rate); ``Recorder.stop()`` returns the samples."""
        if rate is None:
            sink = self.sinks.get(source.removesuffix(".monitor"))
            rate = sink.rate if sink else 16000
        recorder = Recorder(self, source, rate, channels, self._work_file("rec", ".raw"))
        self._children.append(recorder)
        return recorder

    # -- faults --------------------------------------------------------------------------------------------------
    def _null_sink_modules(self) -> dict[str, int]:
        modules: dict[str, int] = {}
        for line in self.pactl("list", "short", "modules").splitlines():
            fields = line.split("\t")
            if len(fields) >= 3 and fields[1] == "module-null-sink":
                for arg in fields[2].split():
                    if arg.startswith("sink_name="):
                        modules[arg.removeprefix("sink_name=")] = int(fields[0])
        return modules

    def unload_sink(self, name: str) -> None:
        """Remove the null sink ``name`` (and its monitor): streams on it die, as if a device were unplugged."""
        self.pactl("unload-module", str(self._modules.pop(name)))
        keeper = self._keepers.pop(name, None)
        if keeper is not None:
            stop_process(keeper, timeout=5.0)

    def reload_sink(self, name: str) -> None:
        """Bring back a sink removed by :meth:`unload_sink`, with its original settings."""
        index = self.pactl("load-module", "module-null-sink", self.sinks[name].module_args()).strip()
        self._modules[name] = int(index)
        self._prime(name)

    def add_echo(
        self, *, delay_ms: int = 40, gain_db: float = -10.0, source: str = "spk.monitor", sink: str = "mic"
    ) -> int:
        """A loudspeaker-to-microphone echo path: ``source`` looped into ``sink`` ``delay_ms`` late, ``gain_db``
        quieter (module-loopback; it drifts a little in rate, as a real room path between two clocks does).
        Returns the module index."""
        module = int(
            self.pactl(
                "load-module",
                "module-loopback",
                f"source={source}",
                f"sink={sink}",
                f"latency_msec={delay_ms}",
                "source_dont_move=true",
                "sink_dont_move=true",
            ).strip()
        )
        for line in self.pactl("list", "short", "sink-inputs").splitlines():
            index, _sink, _client, driver, *_ = line.split("\t")
            if driver == "module-loopback.c":
                self.pactl("set-sink-input-volume", index, f"{gain_db}dB")
        return module

    def sink_names(self) -> list[str]:
        return [line.split("\t")[1] for line in self.pactl("list", "short", "sinks").splitlines() if line]
