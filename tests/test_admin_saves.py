"""Saving the knowledge through the admin page: text that is not UTF-8 is refused as the command line refuses it,
and saves at once, one of which the kiosk cannot load, leave the file and the kiosk's knowledge the same (the real
server, real concurrent requests)."""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import httpx2
import pytest

from edgevoice.admin.app import create_app
from edgevoice.admin.hosts import ServedHosts
from edgevoice.admin.knowledge_file import backup_path
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.admin.server import AdminServer
from edgevoice.config.load import config_from_dict
from edgevoice.errors import ConfigError
from tests.admin_fakes import OLD_FACTS, FakeAppliance
from tests.admin_fakes import admin_client as client

NOT_UTF8 = b"What time do you open? We open at nine.\nIs there a caf\xe9? Yes, on the roof.\n"
BAD_BYTE = NOT_UTF8.index(b"\xe9")
OVERLAP_WAIT_S = 2.0
"""How long the failing reload waits for another save to reload meanwhile: saves that overlap do so at once; a save
made to wait its turn never does, and the wait ends unmet (the test asserts no time)."""


@pytest.fixture
def venue(tmp_path: Path) -> Path:
    path = tmp_path / "venue.md"
    path.write_text(OLD_FACTS)
    return path


# -- not UTF-8 -----------------------------------------------------------------------------------------------------
def test_text_that_is_not_utf8_is_refused_with_its_line_and_byte(venue: Path) -> None:
    appliance = FakeAppliance(venue)
    result = client(appliance).put("/api/knowledge", content=NOT_UTF8)
    assert result.status_code == 422, result.text
    error = result.json()["error"]
    assert error["code"] == "knowledge_not_utf8"
    assert "line 2" in error["message"] and f"byte {BAD_BYTE}" in error["message"] and str(venue) in error["message"]
    assert venue.read_text() == OLD_FACTS and not backup_path(venue).exists() and appliance.reloads == 0
    assert "\ufffd" not in venue.read_text()


def test_the_editor_form_refuses_text_that_is_not_utf8(venue: Path) -> None:
    appliance = FakeAppliance(venue)
    body = b"text=Is+there+a+caf%E9%3F+Yes.%0A"  # what a form in another encoding would send
    page = client(appliance).post(
        "/knowledge", content=body, headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert page.status_code == 422 and "Not saved" in page.text and "not UTF-8" in page.text and "byte 14" in page.text
    assert venue.read_text() == OLD_FACTS and appliance.reloads == 0
    ok = client(appliance).post("/knowledge", data={"text": "Is there a café? Yes.\n"})
    assert ok.status_code == 200 and venue.read_text() == "Is there a café? Yes.\n"


def test_the_command_line_refuses_the_same_bytes_with_the_same_code(venue: Path) -> None:
    venue.write_bytes(NOT_UTF8)
    config = config_from_dict({"kiosk": {"knowledge_file": str(venue)}})
    with pytest.raises(ConfigError, match=f"byte {BAD_BYTE}") as caught:
        config.knowledge_text()
    assert caught.value.code == "knowledge_not_utf8"


# -- saves at once -------------------------------------------------------------------------------------------------
class OverlappingReloads(FakeAppliance):
    """Loads its file as the kiosk does (what :attr:`loads` lists, in order); a text holding ``FAIL`` cannot be
    loaded, and its reload waits first for another save's reload to happen meanwhile, as when saves overlap."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.loads: list[str] = []
        self.failing = threading.Event()
        self.other_reloaded = threading.Event()
        self._lock = threading.Lock()
        self.in_reload = 0
        self.most_in_reload = 0

    def reload_knowledge(self) -> object:
        assert self.knowledge_path is not None
        with self._lock:
            self.in_reload += 1
            self.most_in_reload = max(self.most_in_reload, self.in_reload)
        try:
            text = self.knowledge_path.read_text()
            if "FAIL" in text:
                self.failing.set()
                self.other_reloaded.wait(OVERLAP_WAIT_S)
                raise ConfigError(f"kiosk.knowledge_file = {str(self.knowledge_path)!r}: line 1: cannot load it")
            if self.failing.is_set():
                self.other_reloaded.set()
            with self._lock:
                self.loaded = text
                self.loads.append(text)
                self.reloads += 1
            return None
        finally:
            with self._lock:
                self.in_reload -= 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nine_saves_at_once_with_one_failing_leave_the_file_as_the_kiosk_loaded_it(venue: Path) -> None:
    appliance = OverlappingReloads(venue)
    listen = f"127.0.0.1:{_free_port()}"
    runner = SelftestRunner(lambda folder: [sys.executable, "-c", ""])
    server = AdminServer(create_app(appliance, runner, hosts=ServedHosts.for_listen(listen)), listen, token=False)
    texts = [f"What is number {i}? It is {i}.\n" for i in range(8)]
    codes: dict[str, int] = {}

    def put(text: str) -> None:
        with httpx2.Client(timeout=60) as http:
            codes[text] = http.put(f"http://{listen}/api/knowledge", content=text.encode()).status_code

    failing = "FAIL: what cannot be loaded? This.\n"
    first = threading.Thread(target=put, args=(failing,))
    others = [threading.Thread(target=put, args=(text,)) for text in texts]
    try:
        first.start()
        assert appliance.failing.wait(30), "the failing save never reached its reload"
        for thread in others:
            thread.start()
        for thread in [first, *others]:
            thread.join(60)
    finally:
        server.close()
        runner.close()
    assert codes == {failing: 422} | dict.fromkeys(texts, 200), codes
    assert venue.read_text() == appliance.loaded == appliance.loads[-1], "the file and the kiosk's knowledge differ"
    assert sorted(appliance.loads) == sorted(texts)
    assert appliance.most_in_reload == 1, "two saves reloaded at once"
    assert backup_path(venue).read_text() == appliance.loads[-2]  # .bak: the version before the last save


def test_a_failed_save_leaves_the_backup_as_it_was(venue: Path) -> None:
    appliance = FakeAppliance(venue)
    web = client(appliance)
    assert web.put("/api/knowledge", content=b"Where is it? Here.\n").status_code == 200
    assert backup_path(venue).read_text() == OLD_FACTS
    appliance.reload_error = ConfigError("kiosk.knowledge_file: line 1: cannot load it")
    refused = web.put("/api/knowledge", content=b"Where is it? There.\n")
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "config_invalid"
    assert venue.read_text() == "Where is it? Here.\n" and backup_path(venue).read_text() == OLD_FACTS


def test_a_previous_file_that_cannot_be_put_back_is_said_loudly(venue: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from edgevoice.admin import knowledge_file

    written = knowledge_file.write_atomically

    def disk_full_on_the_way_back(path: Path, data: bytes) -> None:
        if path == venue and data == OLD_FACTS.encode():
            raise OSError(28, "No space left on device")
        written(path, data)

    monkeypatch.setattr(knowledge_file, "write_atomically", disk_full_on_the_way_back)
    appliance = FakeAppliance(venue, reload_error=ConfigError("kiosk.knowledge_file: line 1: cannot load it"))
    refused = client(appliance).put("/api/knowledge", content=b"Where is it? There.\n")
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "knowledge_not_restored"
    assert "No space left on device" in error["message"] and "venue.md.bak the previous one" in error["message"]
    assert backup_path(venue).read_text() == OLD_FACTS  # the previous version is kept where the message says
