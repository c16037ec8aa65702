"""Every error of the admin API is ``{"error": {"code", "message"}}`` with a stable code, and docs/admin.md lists
the page's own codes with their statuses."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from edgevoice.admin.api_errors import ADMIN_CODES, KIOSK_STATUS
from edgevoice.admin.app import MAX_FORM_BYTES
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.errors import ConfigError, EdgeVoiceError
from tests.admin_fakes import NEW_FACTS, OLD_FACTS, FakeAppliance
from tests.admin_fakes import admin_client as client

DOC = Path(__file__).resolve().parents[1] / "docs" / "admin.md"
TOKEN = "s3cret-token-0123456789"


@pytest.fixture
def venue(tmp_path: Path) -> Path:
    path = tmp_path / "venue.md"
    path.write_text(OLD_FACTS)
    return path


def documented_codes() -> dict[str, int]:
    """The table of docs/admin.md's "Errors": code → status."""
    return {m[1]: int(m[2]) for m in re.finditer(r"^\| `([a-z_0-9]+)` \| (\d{3}) \|", DOC.read_text(), re.M)}


def the_error(response: object, status: int, code: str) -> str:
    """The message of ``response``, checked to be exactly the error object with ``code`` and ``status``."""
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body
    return str(body["error"]["message"])


def test_the_documented_codes_are_the_codes() -> None:
    assert documented_codes() == ADMIN_CODES
    text = DOC.read_text()
    for code, status in KIOSK_STATUS.items():
        assert f"`{code}` ({status}" in text


def test_each_refusal_of_the_page_has_its_code(venue: Path, tmp_path: Path) -> None:
    appliance = FakeAppliance(venue)
    web = client(appliance)
    the_error(web.get("/api/turns", headers={"host": "attacker.example"}), 421, "admin_host_not_served")
    evil = {"origin": "http://attacker.example"}
    the_error(web.put("/api/knowledge", content=NEW_FACTS.encode(), headers=evil), 403, "admin_cross_site")
    the_error(web.get("/api/nothing"), 404, "admin_not_found")
    the_error(web.delete("/api/knowledge"), 405, "admin_method_not_allowed")
    the_error(web.put("/api/knowledge", content=b"x" * (MAX_FORM_BYTES + 1)), 413, "admin_too_large")
    the_error(web.post("/api/trigger"), 409, "trigger_unavailable")
    the_error(client(FakeAppliance(None)).put("/api/knowledge", content=b"x"), 409, "knowledge_not_editable")
    the_error(client(appliance, token=TOKEN).get("/api/status"), 401, "admin_token_needed")
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    runner = SelftestRunner(lambda folder: [sys.executable, "-c", f"open({str(fifo)!r}).read()"])
    try:
        held = client(appliance, selftest=runner)
        assert held.post("/api/selftest").status_code == 202
        the_error(held.post("/api/selftest"), 409, "selftest_running")
    finally:
        fifo.write_text("go")
        runner.close()
    assert venue.read_text() == OLD_FACTS and appliance.reloads == 0


def test_a_refused_save_keeps_the_kiosks_code(venue: Path) -> None:
    bad = '[[qa]]\nquestion = "When?"\n'
    message = the_error(client(FakeAppliance(venue)).put("/api/knowledge", content=bad.encode()), 422, "config_invalid")
    assert str(venue) in message and "needs an answer" in message
    busy = FakeAppliance(venue, reload_error=EdgeVoiceError("no reply ended within 10 s", code="kiosk_busy"))
    the_error(client(busy).put("/api/knowledge", content=NEW_FACTS.encode()), 503, "kiosk_busy")
    assert venue.read_text() == OLD_FACTS


class _Broken(FakeAppliance):
    """Its status fails: with an edgevoice error, or with an unexpected one."""

    def __init__(self, path: Path, error: Exception) -> None:
        super().__init__(path)
        self.error = error

    def status(self) -> Mapping[str, object]:
        raise self.error


def test_an_unexpected_error_is_answered_as_json_too(venue: Path) -> None:
    web = client(_Broken(venue, ConfigError("kiosk.knowledge_file: cannot read it")))
    assert "cannot read it" in the_error(web.get("/api/status"), 500, "config_invalid")
    from starlette.testclient import TestClient

    crashing = client(_Broken(venue, RuntimeError("a bug")))
    quiet = TestClient(crashing.app, base_url="http://localhost", raise_server_exceptions=False)
    message = the_error(quiet.get("/api/status"), 500, "admin_internal")
    assert "a bug" not in message  # the traceback goes to the log, not to whoever asked
