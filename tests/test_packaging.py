"""The service files without a service manager: the unit's exposure score and verification, the sysusers snippet,
the default config, the maintainer scripts. (Installed and run under systemd: tests/test_service_nspawn.py.)"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from edgevoice.config.load import load_config
from edgevoice.paths import SYSTEM_CONFIG, SYSTEM_MODELS_DIR

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"
UNIT = PACKAGING / "edgevoice.service"

needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (systemd)")


def unit_settings(unit: Path = UNIT) -> dict[str, list[str]]:
    """The assignments of ``unit`` (a systemd unit file; a key may repeat), comments and section headers left out."""
    settings: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


@needs_analyze
def test_exposure_score_is_at_most_two() -> None:
    proc = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    match = re.search(r"Overall exposure level for edgevoice\.service: (\d+\.\d+)", proc.stdout)
    assert match, proc.stdout + proc.stderr
    assert float(match.group(1)) <= 2.0, proc.stdout
    flagged = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("✗")]
    # what is left on purpose (see docs/service.md): sound devices and the audio group, local sockets
    # (PulseAudio), the host's root, full /proc (ONNX Runtime reads /proc/cpuinfo), setpriority (compute_nice)
    assert set(flagged) <= {
        "DeviceAllow=",
        "PrivateDevices=",
        "SupplementaryGroups=",
        "RestrictAddressFamilies=~AF_UNIX",
        "RootDirectory=/RootImage=",
        "ProcSubset=",
        "SystemCallFilter=~@resources",
    }, proc.stdout


@needs_analyze
def test_unit_verifies_clean(tmp_path: Path) -> None:
    """systemd-analyze verify in a root holding the system's units, the edgevoice unit and its ExecStart."""
    root = tmp_path / "root"
    shutil.copytree("/lib/systemd/system", root / "lib/systemd/system", symlinks=True)
    shutil.copy(UNIT, root / "lib/systemd/system/edgevoice.service")
    program = root / "opt/edgevoice/bin/edgevoice"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    proc = subprocess.run(
        ["systemd-analyze", "verify", f"--root={root}", "edgevoice.service"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc


def test_unit_runs_the_packaged_config_and_models_as_a_notify_service_with_a_watchdog() -> None:
    s = unit_settings()
    assert s["Type"] == ["notify"] and s["NotifyAccess"] == ["main"]
    assert s["ExecStart"] == [f"/opt/edgevoice/bin/edgevoice run --config {SYSTEM_CONFIG}"]
    assert f"EDGEVOICE_MODELS_DIR={SYSTEM_MODELS_DIR}" in s["Environment"][0].split()
    assert s["WatchdogSec"] == ["10"] and s["Restart"] == ["on-failure"] and s["RestartPreventExitStatus"] == ["2"]
    assert s["User"] == ["edgevoice"] and s["SupplementaryGroups"] == ["audio"]
    # where the service may write: the debug recorder's files, a knowledge file the admin page rewrites,
    assert s["StateDirectory"] == ["edgevoice/debug edgevoice/knowledge edgevoice/review edgevoice/outbox"]
    assert s["RuntimeDirectory"] == ["edgevoice"]  # /run/edgevoice: the metrics socket (the default there)
    assert s["CacheDirectory"] == ["edgevoice"]  # and the cache: the knowledge's embeddings, the replies' audio
    for key in ("PrivateNetwork", "ProtectHome", "NoNewPrivileges", "MemoryDenyWriteExecute"):
        assert s[key] == ["yes"], key
    assert s["ProtectSystem"] == ["strict"] and s["DevicePolicy"] == ["closed"] and s["MemoryMax"] == ["2G"]


def test_default_config_loads_with_the_service_paths_and_privacy_defaults() -> None:
    config = load_config(PACKAGING / "edgevoice.toml")
    assert config.models.dir == str(SYSTEM_MODELS_DIR)
    assert config.debug.record_turns == 0 and config.debug.log_transcripts is False


@pytest.mark.skipif(shutil.which("systemd-sysusers") is None, reason="needs systemd-sysusers")
def test_sysusers_creates_a_system_user_without_login(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    for name in ("passwd", "group"):
        shutil.copy(f"/etc/{name}", tmp_path / "etc" / name)
    proc = subprocess.run(
        ["systemd-sysusers", f"--root={tmp_path}", str(PACKAGING / "edgevoice.sysusers")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    entry = next(line for line in (tmp_path / "etc/passwd").read_text().splitlines() if line.startswith("edgevoice:"))
    _, _, uid, gid, _, home, shell = entry.split(":")
    assert int(uid) < 1000 and home == "/var/lib/edgevoice" and shell == "/usr/sbin/nologin"
    members = [line for line in (tmp_path / "etc/group").read_text().splitlines() if f":{gid}:" in line]
    assert [m.split(":")[0] for m in members] == ["edgevoice"]


@pytest.mark.parametrize("script", ["postinst", "prerm", "postrm"])
def test_maintainer_scripts_are_valid_posix_shell(script: str) -> None:
    path = PACKAGING / "deb" / script
    assert path.stat().st_mode & 0o111, f"{script} must be executable"
    proc = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    if shutil.which("shellcheck"):
        proc = subprocess.run(["shellcheck", "-s", "sh", str(path)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout
