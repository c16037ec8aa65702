"""The kiosk screen's packaging without a desktop: the systemd user unit that starts chromium full screen on the page
(packaging/edgevoice-display.service), its wait for the page at boot, and the page's files in the wheel. (The page in
a real browser, with the unit's flags: tests/test_display_browser.py.)"""

from __future__ import annotations

import fnmatch
import shlex
import shutil
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.test_packaging import unit_settings

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "packaging" / "edgevoice-display.service"
STATIC = ROOT / "edgevoice" / "display" / "static"
PAGE = "http://127.0.0.1:8470/"


def test_the_unit_starts_chromium_full_screen_on_the_page_and_restarts_it() -> None:
    s = unit_settings(UNIT)
    (command,) = s["ExecStart"]
    program, *flags = shlex.split(command)
    assert program == "/usr/bin/chromium"
    assert {"--kiosk", f"--app={PAGE}", "--noerrdialogs", "--disable-infobars", "--incognito"} <= set(flags)
    assert s["Restart"] == ["on-failure"]
    assert s["WantedBy"] == ["graphical-session.target"] and s["PartOf"] == ["graphical-session.target"]
    (wait,) = s["ExecStartPre"]
    assert "/dev/tcp/127.0.0.1/8470" in wait  # the same address as the page it opens


def test_the_units_wait_returns_once_the_page_listens() -> None:
    """The ExecStartPre= loop, run as systemd runs it, on a free port: it goes on trying while nothing listens there,
    and ends as soon as something does."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        (wait,) = unit_settings(UNIT)["ExecStartPre"]
        command = shlex.split(wait.replace("/8470", f"/{port}").replace("sleep 2", "sleep 0.05"))
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                process.wait(0.5)  # nothing listens yet: it keeps trying (a wrong wait would have returned)
            listener.listen(4)
            assert process.wait(30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
            for stream in (process.stdout, process.stderr):
                assert stream is not None
                stream.close()


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None or not Path("/usr/bin/chromium").exists(),
    reason="needs systemd-analyze and chromium",
)
def test_the_unit_verifies_clean(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["systemd-analyze", "verify", "--user", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"XDG_RUNTIME_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},  # a user manager's, without a session
    )
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc


def test_the_page_is_in_the_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["edgevoice"]
    files = [p.relative_to(ROOT / "edgevoice").as_posix() for p in STATIC.iterdir()]
    assert sorted(files) == ["display/static/display.css", "display/static/display.js", "display/static/index.html"]
    assert [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)] == []


def test_the_debian_package_installs_the_user_unit() -> None:
    build = (ROOT / "scripts" / "build-deb").read_text()
    assert 'packaging/edgevoice-display.service "$stage/usr/lib/systemd/user/edgevoice-display.service"' in build
