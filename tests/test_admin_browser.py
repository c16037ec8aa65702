"""The admin page in a real browser: Debian's chromium, headless, against the page served by uvicorn on a loopback
port (a fake appliance behind it). Its screenshots and rendered DOM are checked."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from edgevoice.admin.app import create_app
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.admin.server import AdminServer
from tests.admin_fakes import NEW_FACTS, OLD_FACTS, FakeAppliance

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (scripts/setup adds it)"),
]

TOKEN = "s3cret-token-0123456789"
HEADER_BLUE = (0x1F, 0x3A, 0x5F)
"""The page header's colour (edgevoice/admin/pages.py)."""
BUTTON_GREEN = (0x1F, 0x6F, 0x43)
"""Its buttons' colour: "Save and reload" and "Run the self-test"."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chromium(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "chromium",
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1280,800",
            *args,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )


def screenshot(url: str, tmp_path: Path, name: str) -> np.ndarray:
    from PIL import Image

    out = tmp_path / name
    chromium(url, tmp_path, f"--screenshot={out}")
    with Image.open(out) as image:
        return np.asarray(image.convert("RGB")).astype(np.int16)


def share_of(pixels: np.ndarray, colour: tuple[int, int, int], tolerance: int = 12) -> float:
    return float((np.abs(pixels - np.array(colour)).max(axis=-1) <= tolerance).mean())


@pytest.fixture
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeAppliance]]:
    venue = tmp_path / "venue.md"
    venue.write_text(OLD_FACTS)
    appliance = FakeAppliance(venue)
    runner = SelftestRunner(lambda folder: [sys.executable, "-c", ""])
    token = TOKEN if getattr(request, "param", False) else None
    listen = f"127.0.0.1:{_free_port()}"
    server = AdminServer(create_app(appliance, runner, token=token), listen, token=token is not None)
    try:
        yield f"http://{listen}", appliance
    finally:
        server.close()
        runner.close()


def test_the_page_renders_its_four_regions(served: tuple[str, FakeAppliance], tmp_path: Path) -> None:
    url, _ = served
    pixels = screenshot(f"{url}/", tmp_path, "admin.png")
    assert pixels.shape[:2] == (800, 1280)
    assert pixels.std() > 20, "a blank screenshot"
    assert share_of(pixels[:30], HEADER_BLUE) > 0.8, "the header is not drawn"
    body = pixels[60:]
    assert share_of(body, (255, 255, 255), 2) > 0.2, "no section drawn (white boxes)"
    assert share_of(body, (0xF4, 0xF5, 0xF7), 2) > 0.02, "the page's background is missing"
    left, right = body[:, :640], body[:, 640:]
    assert share_of(left, (255, 255, 255), 2) > 0.1 and share_of(right, (255, 255, 255), 2) > 0.1, (
        "the sections are not laid out in two columns"
    )
    assert share_of(left, BUTTON_GREEN) > 0.001 and share_of(right, BUTTON_GREEN) > 0.001, "a button is missing"
    assert share_of(pixels[-20:], (0xF4, 0xF5, 0xF7), 2) > 0.9, "the page overflows the window (a scroll bar)"
    dom = chromium(f"{url}/", tmp_path, "--dump-dom").stdout
    for region in ('id="status"', 'id="turns"', 'id="knowledge"', 'id="selftest"'):
        assert region in dom
    assert "whisper-tiny.en" in dom and "Run the self-test" in dom and "We open at nine" in dom


def test_the_editor_shows_the_reloaded_file(served: tuple[str, FakeAppliance], tmp_path: Path) -> None:
    import httpx2

    url, appliance = served
    assert httpx2.put(f"{url}/api/knowledge", content=NEW_FACTS.encode(), timeout=30).json()["ok"]
    dom = chromium(f"{url}/", tmp_path, "--dump-dom").stdout
    assert "Is there a cloakroom?" in dom and appliance.reloads == 1


@pytest.mark.parametrize("served", [True], indirect=True)
def test_with_a_token_the_browser_gets_the_login_form(served: tuple[str, FakeAppliance], tmp_path: Path) -> None:
    url, _ = served
    dom = chromium(f"{url}/", tmp_path, "--dump-dom").stdout
    assert 'id="login"' in dom and 'type="password"' in dom and 'id="status"' not in dom
    pixels = screenshot(f"{url}/", tmp_path, "login.png")
    assert share_of(pixels[:30], HEADER_BLUE) > 0.8 and pixels.std() > 20
