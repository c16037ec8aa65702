"""edgevoice.service under a real systemd: the Debian package built by scripts/build-deb, installed with dpkg into a
throwaway copy of this machine booted by systemd-nspawn (tests/nspawn_container.py), with the default models from an
offline bundle (`edgevoice models bundle`).

The container has no sound card: the service reaches a private PulseAudio server that runs here (edgevoice.audio.pulse),
its socket bound into the container at /run/pulse/native, the way a kiosk reaches a system-wide PulseAudio (a
drop-in sets PULSE_SERVER). The test speaks into the "mic" sink and hears the "spk" sink.

The tests share one container and run in file order: install, READY, a turn, SIGTERM, broken config, corrupt model,
watchdog, the debug recorder, W^X, the cgroup limits (where the host delegates them), purge. Each puts back the files
it changed and starts the service when it needs it running (a start loads and warms every model: seconds on an idle
box, a minute on a busy one).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgevoice.audio.pulse import PulseServer
from edgevoice.models.store import ModelStore
from edgevoice.paths import default_download_cache
from edgevoice.trace import STAGE_NAMES
from tests.conftest_audio import pulse_available
from tests.nspawn_container import Bind, Container, nspawn_unavailable

ROOT = Path(__file__).resolve().parent.parent
UNIT = "edgevoice.service"
MODELS = "/var/lib/edgevoice/models"
CONFIG = "/etc/edgevoice/edgevoice.toml"
PULSE_DROPIN = "/etc/systemd/system/edgevoice.service.d/pulse.conf"
FAULT_DROPIN = "/etc/systemd/system/edgevoice.service.d/fault.conf"
STARTING, STARTED = "7d4958e842da4a758f6c1cdc7b36dcc5", "39f53479d3a045ac8e11786248231fbf"  # systemd's message ids

_why_not = nspawn_unavailable() or pulse_available()
pytestmark = [
    pytest.mark.system,
    pytest.mark.models,
    pytest.mark.audio,
    pytest.mark.slow,
    pytest.mark.skipif(_why_not is not None, reason=f"no service manager test here: {_why_not}"),
]

METRICS_SOCKET = "/run/edgevoice/metrics.sock"
SCRAPE = """import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"GET /metrics HTTP/1.0\\r\\n\\r\\n")
data = b""
while chunk := s.recv(65536):
    data += chunk
sys.stdout.write(data.decode())
"""


# -- fixtures ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("deb")
    proc = subprocess.run(
        [str(ROOT / "scripts" / "build-deb"), "--out", str(out), "--compression", "none"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    (package,) = out.glob("edgevoice_*.deb")
    return package


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bundle")
    ModelStore(models_dir=directory / "unused", download_cache=default_download_cache()).bundle(
        directory, progress=False
    )
    return directory


@pytest.fixture(scope="module")
def room() -> Iterator[PulseServer]:
    with PulseServer() as server:
        yield server


@pytest.fixture(scope="module")
def box(deb: Path, bundle: Path, room: PulseServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    pulse = "[Service]\nEnvironment=PULSE_SERVER=unix:/run/pulse/native PULSE_SOURCE=mic.monitor PULSE_SINK=spk\n"
    container = Container(
        tmp_path_factory.mktemp("container"),
        binds=[
            Bind(room.socket, "/run/pulse/native", read_only=False),
            Bind(deb.parent, "/mnt/deb"),
            Bind(bundle, "/mnt/bundle"),
        ],
        files={PULSE_DROPIN: pulse},
    )
    with container:
        yield container


@pytest.fixture(scope="module")
def installed(box: Container, deb: Path) -> subprocess.CompletedProcess[str]:
    """``dpkg -i`` of the package, models from the bundle (the post-install also starts the service)."""
    # A container image's policy-rc.d (docker's "exit 101") forbids starting services during package installs; a
    # kiosk has none, and this copy of the machine is thrown away.
    box.run("rm", "-f", "/usr/sbin/policy-rc.d")
    t = time.monotonic()
    proc = box.run(
        "dpkg", "-i", f"/mnt/deb/{deb.name}", env={"EDGEVOICE_MODELS_BUNDLE": "/mnt/bundle"}, check=False, timeout=900
    )
    print(f"dpkg -i took {time.monotonic() - t:.1f} s")
    return proc


# -- helpers -------------------------------------------------------------------------------------------------------
def journal_records(box: Container, *matches: str, since_cursor: str | None = None) -> list[dict[str, str]]:
    """The unit's journal entries (JSON) with every ``FIELD=value`` of ``matches``, after ``since_cursor``.

    The matches are applied here: journalctl 252 with both a field match and --after-cursor returns nothing."""
    args = ["-u", UNIT, "-o", "json"]
    if since_cursor:
        args += ["--after-cursor", since_cursor]
    wanted = [m.split("=", 1) for m in matches]
    entries = [json.loads(line) for line in box.journal(*args).splitlines() if line.startswith("{")]
    return [e for e in entries if all(e.get(k) == v for k, v in wanted)]


def cursor(box: Container) -> str:
    out = box.run("journalctl", "-n", "0", "--show-cursor", "--no-pager", check=False).stdout
    match = re.search(r"-- cursor: (\S+)", out)
    assert match, out
    return match.group(1)


def unit_log(box: Container, since: str) -> str:
    messages = [r.get("MESSAGE", "") for r in journal_records(box, since_cursor=since)]
    return "\n".join(m if isinstance(m, str) else bytes(m).decode(errors="replace") for m in messages)  # blobs: lists


def restart(box: Container) -> None:
    proc = box.run("systemctl", "restart", UNIT, check=False, timeout=240)
    assert proc.returncode == 0, proc.stderr + box.journal("-u", UNIT, "-n", "40")
    assert box.prop(UNIT, "ActiveState") == "active"


def ensure_running(box: Container) -> None:
    if box.prop(UNIT, "ActiveState") != "active":
        box.run("systemctl", "reset-failed", UNIT, check=False)
        restart(box)


def proc_status(box: Container, pid: str) -> dict[str, str]:
    text = box.run("cat", f"/proc/{pid}/status").stdout
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line)}


def speak(room: PulseServer, box: Container) -> None:
    room.play(ROOT / "samples" / "question.wav", sink="mic").wait(timeout=30)


def wait_turn(box: Container, since: str, turn: int, timeout: float = 90.0) -> dict[str, str]:
    def done() -> dict[str, str] | None:
        found = [
            r for r in journal_records(box, "EDGEVOICE_EVENT=turn", since_cursor=since) if r["TURN_ID"] == str(turn)
        ]
        return found[0] if found else None

    return box.wait_for(done, timeout, f"turn {turn} in the journal")


# -- the tests, in order -------------------------------------------------------------------------------------------
def test_package_installs_the_user_the_config_the_models_and_starts_the_service(
    box: Container, installed: subprocess.CompletedProcess[str]
) -> None:
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "installing the models from the bundle /mnt/bundle" in installed.stdout
    assert "models installed and verified in /var/lib/edgevoice/models" in installed.stdout
    assert box.run("id", "-nG", "edgevoice").stdout.split() == ["edgevoice"]  # audio comes from the unit only
    assert box.run("cat", CONFIG).stdout == (ROOT / "packaging" / "edgevoice.toml").read_text()
    assert box.run("dpkg-query", "-W", "-f=${Conffiles}", "edgevoice").stdout.split()[0] == CONFIG
    verify = box.run("/usr/bin/edgevoice", "models", "verify", "--dir", MODELS, check=False)
    assert verify.returncode == 0 and re.search(r"^(\d+) of \1 files ok$", verify.stderr, re.M), verify.stderr
    assert box.run("systemctl", "is-enabled", UNIT).stdout.strip() == "enabled"
    props = box.props(UNIT, "ActiveState", "SubState", "NRestarts", "StatusText")
    assert props["ActiveState"] == "active" and props["SubState"] == "running", box.journal("-u", UNIT)
    assert props["StatusText"].startswith("listening (turns 0, errors 0)")
    assert box.run("test", "-e", "/var/cache/edgevoice/downloads", check=False).returncode != 0  # nothing fetched


def test_unit_verifies_and_scores_at_most_two_in_the_installed_system(box: Container, installed: object) -> None:
    verify = box.run("systemd-analyze", "verify", "/lib/systemd/system/edgevoice.service", check=False)
    assert verify.returncode == 0 and verify.stdout.strip() == "" and verify.stderr.strip() == "", verify
    security = box.run("systemd-analyze", "security", "--no-pager", UNIT, check=False).stdout
    match = re.search(r"Overall exposure level for edgevoice.service: (\d+\.\d)", security)
    assert match and float(match.group(1)) <= 2.0, security


def test_ready_comes_after_the_models_are_loaded_and_warmed(box: Container, installed: object) -> None:
    since = cursor(box)
    box.run("systemctl", "stop", UNIT, timeout=60)
    box.run("systemctl", "start", "--no-block", UNIT)
    seen = box.wait_for(
        lambda: (
            (p := box.props(UNIT, "ActiveState", "StatusText"))["ActiveState"] == "activating"
            and p["StatusText"] == "loading models"
            and p
        ),
        10.0,
        "activating with STATUS=loading models",
    )
    assert seen
    box.wait_for(lambda: box.prop(UNIT, "ActiveState") == "active", 180.0, "active")

    def entry(*matches: str) -> dict[str, str] | None:
        found = journal_records(box, *matches, since_cursor=since)  # journald may lag the unit's state a little
        return found[-1] if found else None

    ready = box.wait_for(lambda: entry("EDGEVOICE_EVENT=ready"), 10.0, "the ready record")
    starting = box.wait_for(lambda: entry(f"MESSAGE_ID={STARTING}", "_PID=1"), 10.0, "systemd's Starting entry")
    started = box.wait_for(lambda: entry(f"MESSAGE_ID={STARTED}", "_PID=1"), 10.0, "systemd's Started entry")
    t_starting, t_ready, t_started = (int(e["_SOURCE_REALTIME_TIMESTAMP"]) for e in (starting, ready, started))
    assert t_starting < t_ready <= t_started  # systemd saw READY=1 only after the models were loaded and warmed
    assert int(ready["LOAD_MS"]) > 500 and (t_started - t_starting) / 1000 >= int(ready["LOAD_MS"]) * 0.9
    props = box.props(UNIT, "MainPID", "StatusText")
    assert props["StatusText"].startswith("listening (turns 0, errors 0); ready in")

    status = proc_status(box, props["MainPID"])
    uid = box.run("id", "-u", "edgevoice").stdout.strip()
    audio = box.run("getent", "group", "audio").stdout.split(":")[2]
    assert status["Uid"].split()[0] == uid
    assert set(status["Groups"].split()) == {audio, box.run("id", "-g", "edgevoice").stdout.strip()}
    assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2" and int(status["CapEff"], 16) == 0
    hardening = box.props(UNIT, "MemoryDenyWriteExecute", "PrivateNetwork", "ProtectSystem", "DevicePolicy")
    assert hardening == {
        "MemoryDenyWriteExecute": "yes",
        "PrivateNetwork": "yes",
        "ProtectSystem": "strict",
        "DevicePolicy": "closed",
    }


def test_a_turn_is_answered_and_journaled_with_latencies_and_no_audio_on_disk(
    box: Container, room: PulseServer, installed: object
) -> None:
    ensure_running(box)
    since = cursor(box)
    heard = room.record("spk.monitor")
    statuses: set[str] = set()
    speak(room, box)
    record = box.wait_for(
        lambda: (
            statuses.add(box.prop(UNIT, "StatusText"))
            or next(iter(journal_records(box, "EDGEVOICE_EVENT=turn", since_cursor=since)), None)
        ),
        90.0,
        "the turn's journal record",
    )
    reply = heard.stop()
    turn = int(record["TURN_ID"])  # 1 after the restart above (more when this test runs alone on a used service)
    assert f"replying to turn {turn} (turns {turn - 1}, errors 0)" in statuses, statuses
    assert box.prop(UNIT, "StatusText") == f"listening (turns {turn}, errors 0)"
    latency = float(record["LATENCY_MS"])
    stages = {k: float(v) for k, v in record.items() if k.startswith("STAGE_") and k.endswith("_MS")}
    assert set(stages) == {f"STAGE_{name.upper()}_MS" for name in STAGE_NAMES}, sorted(stages)
    # every stage journaled, none negative, and together they are the voice-to-voice latency (0.1 ms rounding each;
    # recognition may be 0 when the speculative decode was done at the endpoint, the LLM when answered directly)
    assert latency > 0 and min(stages.values()) >= 0
    assert abs(sum(stages.values()) - latency) <= 0.1 * len(stages), (latency, stages)
    # (the synthesizer's time is 0 for a reply played from the presynthesized audio, [tts] presynthesize)
    assert "REPLY_LLM_MS" in record and "REPLY_TTS_MS" in record and float(record["REPLY_TTS_MS"]) >= 0
    assert record["MESSAGE"].startswith(f"turn {turn}: voice-to-voice ")
    assert "TRANSCRIPT" not in record and "REPLY" not in record  # [debug] log_transcripts is off
    assert record["SYSLOG_IDENTIFIER"] == "edgevoice" and record["PRIORITY"] == "6"
    assert float(np.sqrt(np.mean(reply**2))) > 0.01  # the reply was spoken

    # privacy: with the default configuration no audio reaches the disk, nor any text of the review inbox (off).
    # ProtectSystem=strict leaves the service its StateDirectory (the debug recorder's, the admin page's knowledge,
    # the review inbox's) and its private /tmp and /var/tmp (under these) writable, no more.
    assert box.props(UNIT, "ReadWritePaths", "StateDirectory") == {
        "ReadWritePaths": "",
        "StateDirectory": "edgevoice/debug edgevoice/knowledge edgevoice/outbox edgevoice/review",
    }
    writable = box.run(
        "find", "/var/lib/edgevoice/debug", "/var/lib/edgevoice/review", "/tmp", "/var/tmp", "-type", "f"
    ).stdout.split()
    assert writable == [], writable

    # metrics: on by default under the unit, on the socket in its RuntimeDirectory (the sandbox allows AF_UNIX only),
    # reachable by root and counting the turn just answered
    assert box.prop(UNIT, "RuntimeDirectory") == "edgevoice"
    assert box.run("stat", "-c", "%F %a %U", METRICS_SOCKET).stdout.split() == ["socket", "700", "edgevoice"]
    scrape = box.run("python3", "-c", SCRAPE, METRICS_SOCKET).stdout
    assert scrape.startswith("HTTP/1.0 200"), scrape[:200]
    answered = [line for line in scrape.splitlines() if line.startswith('edgevoice_turns_total{outcome="answered"}')]
    assert answered and float(answered[0].rsplit(" ", 1)[1]) >= 1, answered


def test_sigterm_during_a_reply_stops_cleanly_within_two_seconds(
    box: Container, room: PulseServer, installed: object
) -> None:
    ensure_running(box)
    since = cursor(box)
    speak(room, box)
    box.wait_for(lambda: box.prop(UNIT, "StatusText").startswith("replying"), 60.0, "STATUS=replying")
    t = time.monotonic()
    box.run("systemctl", "stop", UNIT, timeout=30)  # SIGTERM, then waits for the exit
    elapsed = time.monotonic() - t
    props = box.props(UNIT, "ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
    clean = {"ActiveState": "inactive", "Result": "success", "ExecMainCode": "1", "ExecMainStatus": "0"}
    assert props == clean, box.journal("-u", UNIT, "-n", "80")  # a crash: faulthandler's stacks are in there
    assert elapsed < 2.0, f"stop took {elapsed:.2f} s"
    stopped = box.wait_for(
        lambda: journal_records(box, "EDGEVOICE_EVENT=stopped", since_cursor=since), 10.0, "the stopped record"
    )
    assert len(stopped) == 1 and int(stopped[0]["STOP_MS"]) < 2000


def test_a_broken_config_fails_once_with_the_reason_in_the_journal(box: Container, installed: object) -> None:
    default = box.run("cat", CONFIG).stdout
    since = cursor(box)
    box.write(CONFIG, default + "\n[llm]\nthreads = 0\n")
    try:
        assert box.run("systemctl", "restart", UNIT, check=False, timeout=240).returncode != 0
        time.sleep(5.0)  # two RestartSec=2 periods: a restart would have happened by now
        props = box.props(UNIT, "ActiveState", "Result", "ExecMainStatus", "NRestarts")
        assert props == {"ActiveState": "failed", "Result": "exit-code", "ExecMainStatus": "2", "NRestarts": "0"}
        assert "[config_invalid] llm.threads = 0: must be between 1 and 64" in unit_log(box, since)
    finally:
        box.write(CONFIG, default)
        box.run("systemctl", "reset-failed", UNIT)


def test_a_corrupt_model_fails_once_with_the_reason_in_the_journal(box: Container, installed: object) -> None:
    model = f"{MODELS}/silero_vad.onnx"
    since = cursor(box)
    box.run("mv", model, f"{model}.good")
    flip = "import sys; d = bytearray(open(sys.argv[1], 'rb').read()); d[1000] ^= 1; open(sys.argv[2], 'wb').write(d)"
    box.run("python3", "-c", flip, f"{model}.good", model)
    try:
        assert box.run("systemctl", "restart", UNIT, check=False, timeout=240).returncode != 0
        time.sleep(5.0)
        props = box.props(UNIT, "ActiveState", "Result", "ExecMainStatus", "NRestarts")
        assert props == {"ActiveState": "failed", "Result": "exit-code", "ExecMainStatus": "2", "NRestarts": "0"}
        log = unit_log(box, since)
        assert "[model_checksum] model file /var/lib/edgevoice/models/silero_vad.onnx (silero-vad) fails" in log, log
    finally:
        box.run("mv", f"{model}.good", model)
        box.run("systemctl", "reset-failed", UNIT)


def test_a_hung_listener_is_killed_by_the_watchdog_and_restarted(box: Container, installed: object) -> None:
    box.write(FAULT_DROPIN, "[Service]\nEnvironment=EDGEVOICE_FAULT_STALL_LISTENER_S=5\n")
    box.run("systemctl", "daemon-reload")
    try:
        since = cursor(box)
        restart(box)
        first = box.prop(UNIT, "MainPID")
        box.wait_for(
            lambda: box.prop(UNIT, "StatusText").startswith("degraded: listener stalled"), 30.0, "STATUS=degraded"
        )
        box.wait_for(lambda: "Watchdog timeout" in unit_log(box, since), 60.0, "the watchdog to fire")
        box.wait_for(
            lambda: (
                (p := box.props(UNIT, "ActiveState", "MainPID", "NRestarts"))["ActiveState"] == "active"
                and p["MainPID"] not in ("0", first)
                and p["NRestarts"] == "1"
            ),
            240.0,
            "the restarted service to be ready again",
        )

        # faulthandler's stack of the hung thread, written on SIGABRT: the dying process's last lines reach the
        # journal on its own time, which can be after the restart
        def dumped() -> str | None:
            text = unit_log(box, since)
            return text if "edgevoice/live/faults.py" in text else None

        log = box.wait_for(dumped, 30.0, "faulthandler's stack in the journal")
        assert "fault injection: the listener stalls now" in log
        assert "Killing process" in log and "SIGABRT" in log, log[-3000:]
    finally:
        box.run("systemctl", "stop", UNIT, timeout=60)
        box.run("rm", "-f", FAULT_DROPIN)
        box.run("systemctl", "daemon-reload")


def test_debug_recorder_keeps_only_the_newest_turns(box: Container, room: PulseServer, installed: object) -> None:
    default = box.run("cat", CONFIG).stdout
    box.write(CONFIG, default.replace("record_turns = 0", "record_turns = 1").replace("= false", "= true"))
    try:
        restart(box)
        since = cursor(box)
        for turn in (1, 2):
            speak(room, box)
            record = wait_turn(box, since, turn)
        assert "ticket" in record["TRANSCRIPT"].lower() and record["REPLY"].strip(), record  # log_transcripts = true
        files = box.run("find", "/var/lib/edgevoice/debug", "-type", "f", "-printf", "%f %m %u\n").stdout.split("\n")
        kept = sorted(line for line in files if line)
        assert [line.split()[0] for line in kept] == ["000002-turn2.json", "000002-turn2.wav"], kept
        assert all(line.split()[1:] == ["600", "edgevoice"] for line in kept), kept
        saved = json.loads(box.run("cat", "/var/lib/edgevoice/debug/000002-turn2.json").stdout)
        assert saved["turn"] == 2 and saved["transcript"] == record["TRANSCRIPT"]
    finally:
        box.run("systemctl", "stop", UNIT, timeout=60)
        box.write(CONFIG, default)
        box.run("rm", "-rf", "/var/lib/edgevoice/debug")


def test_memory_deny_write_execute_is_enforced_and_the_engines_live_with_it(box: Container, installed: object) -> None:
    """The service loaded every engine and answered with MemoryDenyWriteExecute=yes (above). Here: the filter is
    really active for that user (a W+X mapping is refused), and ctypes callbacks (llama-cpp-python's log and abort
    callbacks) still work under it (libffi's static trampolines need no W+X page)."""
    run = ["systemd-run", "--wait", "--pipe", "--quiet", "-p", "MemoryDenyWriteExecute=yes", "-p", "User=edgevoice"]
    wx = "import mmap; mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)"
    refused = box.run(*run, "/opt/edgevoice/bin/python", "-c", wx, check=False)
    assert refused.returncode != 0 and "PermissionError" in refused.stdout + refused.stderr, refused
    callback = "import ctypes; print(ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: x + 1)(41))"
    works = box.run(*run, "/opt/edgevoice/bin/python", "-c", callback, check=False)
    assert works.returncode == 0 and works.stdout.strip() == "42", works


def test_device_policy_and_memory_max_are_enforced_where_cgroups_allow(box: Container, installed: object) -> None:
    """DevicePolicy=/DeviceAllow= and MemoryMax= are cgroup controls. A container on a cgroup-v1 host (this test
    machine) gets no controllers delegated: its systemd accepts the settings but cannot enforce them."""
    if box.prop("systemd-journald.service", "MemoryCurrent") in ("", "[not set]"):
        pytest.skip("the container's systemd has no cgroup controllers (cgroup v1 host): not enforceable here")
    run = ["systemd-run", "--wait", "--pipe", "--quiet"]
    device = "import os; os.open('/dev/net/tun', os.O_RDWR); print('opened')"
    policy = ["-p", "DevicePolicy=closed", "-p", "DeviceAllow=char-alsa rw"]
    assert box.run(*run, "python3", "-c", device, check=False).stdout.strip() == "opened"  # without the policy
    blocked = box.run(*run, *policy, "python3", "-c", device, check=False)
    assert blocked.returncode != 0 and "PermissionError" in blocked.stdout + blocked.stderr, blocked
    grow = "x = bytearray(512 << 20); x[::4096] = b'1' * len(x[::4096]); print('allocated')"
    killed = box.run(*run, "-p", "MemoryMax=128M", "-p", "MemorySwapMax=0", "python3", "-c", grow, check=False)
    assert killed.returncode != 0 and "allocated" not in killed.stdout, killed


def test_purge_removes_the_service_and_its_data(box: Container, installed: object) -> None:
    proc = box.run("dpkg", "--purge", "edgevoice", check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert box.prop(UNIT, "LoadState") == "not-found"
    for path in ("/opt/edgevoice", "/var/lib/edgevoice", "/etc/edgevoice", "/usr/bin/edgevoice"):
        assert box.run("test", "-e", path, check=False).returncode != 0, path
