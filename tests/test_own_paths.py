"""Every socket and file edgevoice creates replaces only what is its own (:mod:`edgevoice.ownership`): real files,
real sockets, `edgevoice run`, `config --check` and the commands that write files, as an operator would meet them."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgevoice import cli
from edgevoice.admin.knowledge_file import backup_path, save_and_reload
from edgevoice.admin.server import bind
from edgevoice.clock import ManualClock
from edgevoice.config.load import config_from_dict
from edgevoice.config_check import check_config
from edgevoice.errors import ConfigError
from edgevoice.live.activation import Activation
from edgevoice.live.activation_inputs import TriggerSocket
from edgevoice.live.metrics import Metrics, MetricsExporter
from edgevoice.ownership import CODE, JSON_REPORT, WAV, SocketState, check_file, check_output_path, socket_state

ROOT = Path(__file__).resolve().parent.parent
KEEP = b"keep me: the operator's file\n"


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose paths fit a Unix socket address (108 bytes)."""
    with tempfile.TemporaryDirectory(prefix="ev-") as name:
        yield Path(name)


def stale_socket(path: Path, kind: socket.SocketKind = socket.SOCK_DGRAM) -> None:
    """A socket file nobody listens on: what a killed process leaves."""
    sock = socket.socket(socket.AF_UNIX, kind)
    sock.bind(str(path))
    sock.close()


class Counting(Activation):
    """The gate, and an event set when a trigger comes (so a test waits for it, never for a time)."""

    def __init__(self) -> None:
        super().__init__("trigger")
        self.came = threading.Event()

    def trigger(self) -> bool:
        self.came.set()
        return super().trigger()


# --- the activation socket ----------------------------------------------------------------------------------------


def edgevoice(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """An edgevoice command in its own process, with no models installed (nothing it refuses may need one)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EDGEVOICE_MODELS_DIR": str(directory / "no-models")}
    return subprocess.run(
        [sys.executable, "-m", "edgevoice", *args], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )


def edgevoice_run(directory: Path, config_text: str) -> subprocess.CompletedProcess[str]:
    config = directory / "edgevoice.toml"
    config.write_text(config_text)
    return edgevoice(directory, "run", "--config", str(config))


def test_a_file_at_the_activation_socket_survives_run_and_config_check(short_dir: Path) -> None:
    victim = short_dir / "notes.txt"
    victim.write_bytes(KEEP)
    run = edgevoice_run(short_dir, f'[activation]\nmode = "trigger"\nsocket = "{victim}"\n')
    assert run.returncode == 2, run.stderr[-2000:]
    assert f"[{CODE}] activation.socket: {victim} exists and is a regular file, not a socket" in run.stderr
    assert "model" not in run.stderr.lower()  # refused before loading anything
    assert victim.read_bytes() == KEEP

    check = edgevoice(
        short_dir, "config", "--check", "--json", "--no-devices", "--config", str(short_dir / "edgevoice.toml")
    )
    assert check.returncode == 2
    errors = [e for e in json.loads(check.stdout)["errors"] if e["code"] == CODE]
    assert len(errors) == 1 and errors[0]["message"].startswith(f"activation.socket: {victim} exists"), errors
    assert victim.read_bytes() == KEEP


def test_a_stale_activation_socket_is_replaced(short_dir: Path) -> None:
    path = short_dir / "activation.sock"
    stale_socket(path)
    assert socket_state("activation.socket", str(path)) is SocketState.STALE
    activation = Counting()
    source = TriggerSocket(activation, str(path))
    source.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
            client.sendto(b"trigger", str(path))
        assert activation.came.wait(10)
    finally:
        assert source.close(5)
    assert not path.exists()  # its own socket goes with it


def test_a_socket_another_process_serves_is_refused_and_keeps_working(short_dir: Path) -> None:
    path = short_dir / "activation.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as other:
        other.bind(str(path))
        other.settimeout(10)
        with pytest.raises(ConfigError, match="is a socket another process serves") as err:
            TriggerSocket(Activation("trigger"), str(path))
        assert err.value.code == CODE and "activation.socket" in err.value.message
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
            client.sendto(b"trigger", str(path))
        assert other.recv(64) == b"trigger"  # still the other process's
        run = edgevoice_run(short_dir, f'[activation]\nmode = "trigger"\nsocket = "{path}"\n')
        assert run.returncode == 2 and f"activation.socket: {path} is a socket another process serves" in run.stderr
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
            client.sendto(b"release", str(path))
        assert other.recv(64) == b"release"  # and still there
        report = check_config(config_from_dict({"activation": {"mode": "trigger", "socket": str(path)}}), devices=False)
        assert not [e for e in report.errors if e.code == CODE]  # the running service's own: a warning
        assert any("activation.socket" in w and "served by a running process" in w for w in report.warnings)


# --- the admin and metrics sockets --------------------------------------------------------------------------------


def test_the_admin_socket_replaces_only_a_stale_socket(short_dir: Path) -> None:
    victim = short_dir / "admin.sock"
    victim.write_bytes(KEEP)
    with pytest.raises(ConfigError, match=r"admin\.listen: .* not a socket; it is not replaced"):
        bind(f"unix:{victim}", token=False)
    assert victim.read_bytes() == KEEP
    report = check_config(config_from_dict({"admin": {"listen": f"unix:{victim}"}}), devices=False)
    assert [e.message for e in report.errors if e.code == CODE] == [
        f"admin.listen: {victim} exists and is a regular file, not a socket; it is not replaced "
        "(name another path, or remove it)"
    ]
    victim.unlink()
    stale_socket(victim, socket.SOCK_STREAM)
    served = bind(f"unix:{victim}", token=False)
    try:
        with pytest.raises(ConfigError, match="another process serves"):
            bind(f"unix:{victim}", token=False)
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(victim))  # the first is untouched
    finally:
        served.close()


def test_metrics_leave_a_served_socket_alone(short_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = short_dir / "metrics.sock"
    with socket.socket(socket.AF_UNIX) as other:
        other.bind(str(path))
        other.listen(8)
        with caplog.at_level(logging.WARNING):
            exporter = MetricsExporter(Metrics(), listen=f"unix:{path}")
        exporter.close()
        assert "another process serves" in caplog.text and "metrics are not served" in caplog.text
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(10)
            client.connect(str(path))  # still the other's, and still there after close


# --- files: outputs, reports, backups -----------------------------------------------------------------------------


def test_a_file_is_replaced_only_by_its_own_kind(tmp_path: Path) -> None:
    check_file("--out", tmp_path / "new.wav", WAV)  # nothing there
    (tmp_path / "empty.wav").touch()
    check_file("--out", tmp_path / "empty.wav", WAV)
    (tmp_path / "old.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")
    check_file("--out", tmp_path / "old.wav", WAV)
    (tmp_path / "old.json").write_text('\n {"turns": []}\n')
    check_file("--report", tmp_path / "old.json", JSON_REPORT)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(KEEP)
    with pytest.raises(ConfigError) as err:
        check_file("--out", notes, WAV)
    assert err.value.code == CODE
    assert (
        err.value.message
        == f"--out: {notes} exists and is not a WAV file; it is not replaced (name a new file, or remove it)"
    )
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ConfigError, match="is a FIFO"):
        check_file("--report", tmp_path / "fifo", JSON_REPORT)
    os.symlink(notes, tmp_path / "link.wav")
    with pytest.raises(ConfigError, match="is not a WAV file"):  # judged by what it points to
        check_file("--out", tmp_path / "link.wav", WAV)
    target = tmp_path / "elsewhere" / "created-through-the-link.wav"
    target.parent.mkdir()
    os.symlink(target, tmp_path / "dangling.wav")
    with pytest.raises(ConfigError, match="is a symbolic link to nothing"):
        check_output_path(tmp_path / "dangling.wav", key="--out", kind=WAV)
    assert not target.exists()


def _no_work(*_: object, **__: object) -> None:
    raise AssertionError("work started before the output path was checked")


def test_commands_refuse_to_overwrite_a_file_of_another_kind_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("edgevoice.models.configured.piper_files", _no_work)
    monkeypatch.setattr("edgevoice.selftest.session.run_session", _no_work)
    monkeypatch.setattr("edgevoice.bench.tune.tune", _no_work)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(KEEP)
    for argv in (
        ["say", "Hello.", "--out", str(notes)],
        ["selftest", "--report", str(notes)],
        ["selftest", "--report", str(tmp_path / "new.json"), "--chart", str(notes)],
        ["tune", "--out", str(notes)],
    ):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"[{CODE}] --" in err and str(notes) in err, (argv, err)
    assert notes.read_bytes() == KEEP


def test_the_knowledge_backup_replaces_only_a_text_file(tmp_path: Path) -> None:
    knowledge = tmp_path / "venue.md"
    knowledge.write_text("Q: When do you open?\nA: At nine.\n")
    backup_path(knowledge).write_bytes(b"\x00\x01binary, not a backup")
    with pytest.raises(ConfigError, match=r"\(its backup\): .*venue.md.bak exists and is not a UTF-8 text file"):
        save_and_reload(knowledge, "Q: When do you close?\nA: At six.\n", reload=lambda: None, clock=lambda: 0.0)
    assert "nine" in knowledge.read_text() and backup_path(knowledge).read_bytes().startswith(b"\x00")
    backup_path(knowledge).write_text("Q: old\nA: old\n")
    save_and_reload(knowledge, "Q: When do you close?\nA: At six.\n", reload=lambda: None, clock=lambda: 0.0)
    assert "nine" in backup_path(knowledge).read_text() and "six" in knowledge.read_text()


# --- a flood of datagrams -----------------------------------------------------------------------------------------


def test_a_flood_of_garbage_datagrams_logs_a_line_and_a_count(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = short_dir / "activation.sock"
    activation = Counting()
    clock = ManualClock()
    source = TriggerSocket(activation, str(path), clock=clock)
    source.start()
    flood = 3000
    with caplog.at_level(logging.WARNING, logger="edgevoice"):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
                for i in range(flood):
                    client.sendto(b"\xff garbage %d" % i, str(path))  # blocks while the queue is full: none lost
                client.sendto(b"trigger", str(path))
            assert activation.came.wait(30)
            clock.advance(61.0)  # the next interval: the count, one more line, then a count again at shutdown
            activation.came.clear()
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
                for _ in range(5):
                    client.sendto(b"bogus", str(path))
                client.sendto(b"trigger", str(path))
            assert activation.came.wait(30)
        finally:
            assert source.close(5)
    lines = [r.getMessage() for r in caplog.records if "trigger socket" in r.getMessage()]
    assert len(lines) == 4, lines
    assert "unknown command" in lines[0]
    assert f"datagrams that are no command: {flood - 1} more in the last 61 s" in lines[1]
    assert "unknown command 'bogus'" in lines[2]
    assert ": 4 more in the last 0 s" in lines[3]
    assert source.refused.total == flood + 5


def test_a_bundle_leaves_a_foreign_manifest_and_sums_alone(tmp_path: Path) -> None:
    from edgevoice.models.store import ModelStore

    store = ModelStore(tmp_path / "models", download_cache=tmp_path / "cache")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "manifest.toml").write_bytes(KEEP)  # not TOML: someone else's file
    with pytest.raises(ConfigError, match=r"models bundle: .*manifest\.toml exists and is not a TOML config"):
        store.bundle(bundle, progress=False)
    (bundle / "manifest.toml").write_text("schema = 1\n")
    (bundle / "SHA256SUMS").write_bytes(b"\x7fELF\x00\x00")
    with pytest.raises(ConfigError, match=r"SHA256SUMS exists and is not a UTF-8 text file"):
        store.bundle(bundle, progress=False)
    assert (bundle / "SHA256SUMS").read_bytes() == b"\x7fELF\x00\x00" and not (tmp_path / "cache").exists()


def test_another_users_socket_is_never_replaced(short_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root, to make a socket as another user")
    path = short_dir / "admin.sock"
    stale_socket(path, socket.SOCK_STREAM)
    os.chmod(path, 0o600)  # root's, as the service's socket is the service user's
    os.chown(short_dir, 65534, 65534)  # a directory where nobody could remove it
    child = os.fork()
    if child == 0:  # as nobody, who may not connect to it: never taken for stale
        os.setgid(65534)
        os.setuid(65534)
        try:
            assert socket_state("admin.listen", str(path)) is SocketState.LIVE
            with pytest.raises(ConfigError, match="another process serves"):
                bind(f"unix:{path}", token=False)
        except BaseException:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert path.exists()
