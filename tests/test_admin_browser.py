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
from edgevoice.admin.hosts import ServedHosts
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
    app = create_app(appliance, runner, hosts=ServedHosts.for_listen(listen), token=token)
    server = AdminServer(app, listen, token=token is not None)
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


def test_a_browser_sent_to_a_rebound_name_gets_nothing(served: tuple[str, FakeAppliance], tmp_path: Path) -> None:
    """DNS rebinding as the browser meets it: attacker.example resolves to 127.0.0.1 (chromium's resolver rules), so
    the browser reaches the page, but asks for it by the attacker's name."""
    url, appliance = served
    port = url.rpartition(":")[2]
    rebound = "--host-resolver-rules=MAP attacker.example 127.0.0.1"
    dom = chromium(f"http://attacker.example:{port}/", tmp_path, rebound, "--dump-dom").stdout
    assert "admin_host_not_served" in dom and 'id="status"' not in dom and "We open at nine" not in dom
    dom = chromium(f"http://attacker.example:{port}/api/knowledge", tmp_path, rebound, "--dump-dom").stdout
    assert "admin_host_not_served" in dom and "We open at nine" not in dom
    assert "We open at nine" in chromium(f"{url}/", tmp_path, "--dump-dom").stdout  # its own name still works
    assert appliance.reloads == 0 and appliance.knowledge_text() == OLD_FACTS


@pytest.mark.parametrize("served", [True], indirect=True)
def test_with_a_token_the_browser_gets_the_login_form(served: tuple[str, FakeAppliance], tmp_path: Path) -> None:
    url, _ = served
    dom = chromium(f"{url}/", tmp_path, "--dump-dom").stdout
    assert 'id="login"' in dom and 'type="password"' in dom and 'id="status"' not in dom
    pixels = screenshot(f"{url}/", tmp_path, "login.png")
    assert share_of(pixels[:30], HEADER_BLUE) > 0.8 and pixels.std() > 20


class DevTools:
    """chromium driven over its DevTools pipe (``--remote-debugging-pipe``: JSON messages ended by NUL on fds 3 and
    4), so that the test types into the page and presses its buttons as an operator would."""

    def __init__(self, tmp_path: Path) -> None:
        import os

        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire() -> None:  # in the child: its fd 3 reads our commands, its fd 4 writes the replies
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.process = subprocess.Popen(
            [
                "chromium",
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                f"--user-data-dir={tmp_path / 'profile'}",
                "--window-size=1280,800",
                "about:blank",
            ],
            preexec_fn=wire,
            close_fds=False,  # the fds 3 and 4 made in wire() must stay open for chromium
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._id = 0
        self.events: list[dict[str, object]] = []
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]
        self.send("Page.enable", session=True)

    def _read(self) -> dict[str, object]:
        import json
        import os

        while b"\0" not in self._buffer:
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise EOFError("chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(message))

    def send(self, method: str, *, session: bool = False, **params: object) -> dict:  # type: ignore[type-arg]
        import json
        import os

        self._id += 1
        message: dict[str, object] = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                assert "error" not in reply, reply
                return dict(reply.get("result", {}))  # type: ignore[call-overload]
            self.events.append(reply)

    def wait_event(self, method: str) -> None:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read())
        self.events.clear()

    def load(self, action: str, **params: object) -> None:
        """Run an action that loads a page (a navigation, a form's submit) and wait for the page's load event."""
        self.events.clear()
        self.send(action, session=True, **params)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> object:
        return self.send("Runtime.evaluate", session=True, expression=expression, returnByValue=True)["result"].get(
            "value"
        )

    def screenshot(self) -> np.ndarray:
        import base64
        import io

        from PIL import Image

        data = base64.b64decode(self.send("Page.captureScreenshot", session=True)["data"])
        with Image.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB")).astype(np.int16)

    def close(self) -> None:
        import contextlib
        import os

        with contextlib.suppress(OSError, EOFError):
            os.write(self._to_child, b'{"id": 0, "method": "Browser.close"}\0')
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        os.close(self._to_child)
        os.close(self._from_child)


def test_an_operator_edits_the_knowledge_in_the_browser(served: tuple[str, FakeAppliance], tmp_path: Path) -> None:
    import json

    url, appliance = served
    browser = DevTools(tmp_path)
    try:
        browser.load("Page.navigate", url=f"{url}/")
        assert browser.evaluate("document.querySelector('textarea').value") == OLD_FACTS
        submit = "document.querySelector('#knowledge form').submit()"
        browser.evaluate(f"document.querySelector('textarea').value = {json.dumps(NEW_FACTS)}")
        browser.load("Runtime.evaluate", expression=submit)
        message = str(browser.evaluate("document.getElementById('knowledge-message').textContent"))
        assert message.startswith("Saved and reloaded") and "2 entries" in message
        assert appliance.loaded == NEW_FACTS
        assert share_of(browser.screenshot(), (0xE6, 0xF6, 0xEA), 2) > 0.001, "no green confirmation drawn"

        bad = '[[qa]]\\nquestion = "When?"\\n'
        browser.evaluate(f"document.querySelector('textarea').value = '{bad}'")
        browser.load("Runtime.evaluate", expression=submit)
        message = str(browser.evaluate("document.getElementById('knowledge-message').textContent"))
        assert message.startswith("Not saved") and "venue.md" in message and "needs an answer" in message
        assert appliance.knowledge_text() == NEW_FACTS and appliance.reloads == 1  # the file kept
        assert share_of(browser.screenshot(), (0xFD, 0xE8, 0xE8), 2) > 0.001, "no red error drawn"
    finally:
        browser.close()
