"""A throwaway copy of this machine booted by a real systemd, for the service tests (``tests/test_service_nspawn.py``).

PID 1 of the test machine is not systemd, but ``systemd-nspawn --boot`` starts one in a container. The container's
root is an overlay: this machine's own root as the read-only lower layer, a tmpfs as the upper layer, mounted in a
private mount namespace (``unshare -m``). So the container has exactly the host's Debian packages (``dpkg -i`` of the
edgevoice package resolves its dependencies against them), everything it writes is lost when it stops, and nothing
reaches the host. (``nspawn --volatile=overlay`` refuses the host's root directory, hence the explicit overlay.)

Commands run inside with ``nsenter`` into the container's namespaces (there is no machined to ask), so a test drives
systemctl and journalctl directly and asserts on what they say.

    with Container(work_dir, binds=[Bind(host_path, "/run/pulse/native")], files={"/etc/x": "..."}) as box:
        box.run("systemctl", "start", "edgevoice")
        box.prop("edgevoice", "ActiveState")
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from tests import waiting

T = TypeVar("T")

TARGET = "edgevoice-test.target"
TARGET_UNIT = """[Unit]
Description=edgevoice service tests: the basic system, nothing of the host's own services
Requires=sysinit.target basic.target
After=sysinit.target basic.target
AllowIsolate=yes
"""


def nspawn_unavailable() -> str | None:
    """Why a container cannot be booted here, or None when it can."""
    missing = [tool for tool in ("systemd-nspawn", "unshare", "nsenter", "dpkg-deb") if shutil.which(tool) is None]
    if missing:
        return f"needs {', '.join(missing)} (apt-get install systemd-container util-linux)"
    if os.geteuid() != 0:
        return "systemd-nspawn needs root"
    if not Path("/usr/lib/systemd/systemd").exists():
        return "needs systemd installed (the container boots /usr/lib/systemd/systemd)"
    with open("/proc/filesystems") as fh:
        if "overlay" not in fh.read():
            return "the kernel has no overlay file system"
    return None


def poll(probe: Callable[[], T | None], timeout: float) -> T | None:
    """``probe()`` every 0.1 s until it returns something true (returned), or None after ``timeout`` seconds."""
    return waiting.poll(probe, timeout, interval=0.1)


@dataclass(frozen=True)
class Bind:
    source: Path
    target: str
    read_only: bool = True


class Container:
    """This machine's root in a throwaway overlay, booted by systemd-nspawn (see the module doc)."""

    def __init__(
        self,
        work: Path,
        *,
        binds: list[Bind] | None = None,
        files: Mapping[str, str] | None = None,
        boot_timeout: float = 60.0,
    ) -> None:
        self.work = work
        self.binds = binds or []
        self.files = {f"/etc/systemd/system/{TARGET}": TARGET_UNIT, **(files or {})}
        self.boot_timeout = boot_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self.leader: int | None = None
        self.console = work / "console.log"

    # -- lifetime -----------------------------------------------------------------------------------------------------
    def start(self) -> Container:
        seed = self.work / "seed"  # copied into the upper layer before the overlay is mounted
        for path, text in self.files.items():
            target = seed / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        layers, merged = self.work / "layers", self.work / "merged"
        layers.mkdir()
        merged.mkdir()
        nspawn = [
            "systemd-nspawn",
            "--quiet",
            "--register=no",
            "--keep-unit",
            "--private-network",
            f"--directory={merged}",
            f"--machine=ev{os.getpid()}",
            *[f"--bind{'-ro' if b.read_only else ''}={b.source}:{b.target}" for b in self.binds],
            "--boot",
            "--",
            f"systemd.unit={TARGET}",
            "systemd.firstboot=off",
        ]
        script = " && ".join(
            [
                f"mount -t tmpfs -o mode=0755 edgevoice-test {shlex.quote(str(layers))}",
                f"mkdir {shlex.quote(str(layers / 'upper'))} {shlex.quote(str(layers / 'work'))}",
                f"cp -a {shlex.quote(str(seed))}/. {shlex.quote(str(layers / 'upper'))}/",
                f"mount -t overlay overlay -o lowerdir=/,upperdir={layers / 'upper'},workdir={layers / 'work'} "
                f"{shlex.quote(str(merged))}",
                "exec " + shlex.join(nspawn),
            ]
        )
        with self.console.open("wb") as console:
            self._proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self.leader = self._wait(self._find_leader, self.boot_timeout, "the container's systemd to start")
            self._wait(self._booted, self.boot_timeout, f"the container to reach {TARGET}")
        except BaseException:
            self.close()
            raise
        return self

    def _find_leader(self) -> int | None:
        """The container's PID 1 as seen from here: the process under nspawn that runs systemd."""
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise RuntimeError(f"systemd-nspawn exited ({self._proc.returncode}): {self.console_text()}")
        todo, seen = [self._proc.pid], set()
        while todo:
            pid = todo.pop()
            seen.add(pid)
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "systemd" and pid != self._proc.pid:
                    return pid
                for task in Path(f"/proc/{pid}/task").iterdir():
                    todo += [int(c) for c in (task / "children").read_text().split() if int(c) not in seen]
            except (FileNotFoundError, ProcessLookupError):
                continue
        return None

    def _booted(self) -> bool:
        state = self.run("systemctl", "is-system-running", check=False).stdout.strip()
        return state in ("running", "degraded")

    def _wait(self, probe: Callable[[], T | None], timeout: float, what: str) -> T:
        """As :meth:`wait_for`, for the container itself: the error carries its console."""
        value = poll(probe, timeout)
        if value is None:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}: {self.console_text()[-3000:]}")
        return value

    def close(self, timeout: float = 30.0) -> None:
        """Power the container off (bounded), killing it if it does not go."""
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)  # nspawn asks the container's systemd to power off
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                if self.leader is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.leader, signal.SIGKILL)  # ends the container's whole PID namespace
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10.0)

    def __enter__(self) -> Container:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def console_text(self) -> str:
        return self.console.read_text(errors="replace") if self.console.exists() else ""

    # -- inside -------------------------------------------------------------------------------------------------------
    def run(
        self,
        *cmd: str,
        check: bool = True,
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command inside the container as root (its namespaces, a minimal environment)."""
        assert self.leader is not None, "container not started"
        environment = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        environment.update(env or {})
        args = ["nsenter", f"--target={self.leader}", "--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup"]
        args += ["--root", "--wd", "env", "-i", *[f"{k}={v}" for k, v in environment.items()], *cmd]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, input=input, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def write(self, path: str, text: str) -> None:
        self.run("sh", "-c", f"mkdir -p {shlex.quote(str(Path(path).parent))} && cat > {shlex.quote(path)}", input=text)

    def props(self, unit: str, *names: str) -> dict[str, str]:
        out = self.run("systemctl", "show", unit, *[f"--property={n}" for n in names]).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def prop(self, unit: str, name: str) -> str:
        return self.props(unit, name).get(name, "")

    def wait_for(self, probe: Callable[[], T | None], timeout: float, what: str) -> T:
        """``probe()`` every 0.1 s until it returns something true (returned), failing after ``timeout``."""
        value = poll(probe, timeout)
        if value is None:
            raise AssertionError(f"waited {timeout:.0f} s for {what}")
        return value

    def journal(self, *args: str) -> str:
        return self.run("journalctl", "--no-pager", "-o", "cat", *args, check=False).stdout
