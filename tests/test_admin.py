"""The admin page (edgevoice/admin/): every route on a fake appliance, the token rules, the knowledge editor's
checks and the kiosk's reload between two replies."""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

import httpx2
import pytest
from starlette.testclient import TestClient

from edgevoice.admin.app import COOKIE, create_app
from edgevoice.admin.hosts import ServedHosts
from edgevoice.admin.knowledge_file import backup_path
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.admin.server import WORKER_THREADS, AdminServer
from edgevoice.clock import ManualClock
from edgevoice.config.admin_listen import effective_admin_listen, parse_admin_listen, read_token
from edgevoice.config.load import config_from_dict
from edgevoice.config_check import check_admin
from edgevoice.errors import ConfigError
from tests.admin_fakes import (
    HOSTS,
    NEW_FACTS,
    OLD_FACTS,
    FakeActivation,
    FakeAppliance,
    HeldLlm,
    answer,
    fake_assistant,
    kiosk_config,
)
from tests.admin_fakes import admin_client as client
from tests.fakes import FakeLlm

TOKEN = "s3cret-token-0123456789"
REPORT = '{"verdict": "pass", "verdict_on": "total", "budget_ms": 500}'


def held_selftest(fifo: Path) -> SelftestRunner:
    """A self-test stand-in that prints its report once the test writes to ``fifo`` (never a sleep)."""
    code = f"import sys; open({str(fifo)!r}).read(); print({REPORT!r}); print('p95 412 ms', file=sys.stderr)"
    return SelftestRunner(lambda folder: [sys.executable, "-c", code])


@pytest.fixture
def venue(tmp_path: Path) -> Path:
    path = tmp_path / "venue.md"
    path.write_text(OLD_FACTS)
    return path


# -- pages ---------------------------------------------------------------------------------------------------------
def test_the_page_shows_status_models_turns_knowledge_and_the_selftest_button(venue: Path) -> None:
    page = client(FakeAppliance(venue)).get("/")
    assert page.status_code == 200
    for region in ('id="status"', 'id="turns"', 'id="knowledge"', 'id="selftest"'):
        assert region in page.text
    assert "whisper-tiny.en" in page.text and "0123456789ab" in page.text
    assert "output_underruns" in page.text and "21.5" in page.text
    assert "412" in page.text and "120.5" in page.text  # voice-to-voice and a stage time
    assert "We open at nine in the morning." in page.text  # the file, in the editor
    assert "<textarea" in page.text


def test_transcripts_are_shown_only_with_log_transcripts(venue: Path) -> None:
    hidden = client(FakeAppliance(venue, log_transcripts=False))
    assert "when do you open" not in hidden.get("/").text
    assert "—" in hidden.get("/").text
    assert hidden.get("/api/turns").json()[0]["transcript"] is None
    assert hidden.get("/api/turns").json()[0]["stages_ms"]["recognition"] == 120.5
    shown = client(FakeAppliance(venue, log_transcripts=True))
    assert "when do you open" in shown.get("/").text
    assert shown.get("/api/turns").json()[0]["reply"] == "We open at nine."


def test_status_api(venue: Path) -> None:
    status = client(FakeAppliance(venue)).get("/api/status").json()
    assert status["ready"] is True and status["xruns"]["output_underruns"] == 3


# -- the knowledge -------------------------------------------------------------------------------------------------
def test_a_valid_knowledge_file_is_written_kept_as_bak_and_reloaded(venue: Path) -> None:
    appliance = FakeAppliance(venue)
    result = client(appliance).put("/api/knowledge", content=NEW_FACTS.encode())
    assert result.status_code == 200, result.text
    assert result.json()["ok"] and result.json()["entries"] == 2
    assert venue.read_text() == NEW_FACTS and backup_path(venue).read_text() == OLD_FACTS
    assert appliance.reloads == 1 and appliance.loaded == NEW_FACTS
    assert client(appliance).get("/api/knowledge").text == NEW_FACTS


def test_the_editor_form_saves_and_says_so(venue: Path) -> None:
    appliance = FakeAppliance(venue)
    page = client(appliance).post("/knowledge", data={"text": NEW_FACTS})
    assert page.status_code == 200
    assert "Saved and reloaded" in page.text and "2 entries" in page.text
    assert appliance.loaded == NEW_FACTS


def test_invalid_knowledge_is_refused_with_file_and_line_and_the_file_kept(venue: Path) -> None:
    appliance = FakeAppliance(venue)
    bad = '[[qa]]\nquestion = "When?"\nanswer = "Nine."\n[[qa]]\nquestion = "Where?"\nanswr = "Here."\n'
    result = client(appliance).put("/api/knowledge", content=bad.encode())
    assert result.status_code == 422
    error = result.json()["error"]
    assert error["code"] == "config_invalid" and str(venue) in error["message"] and "answr" in error["message"]
    assert venue.read_text() == OLD_FACTS and not backup_path(venue).exists() and appliance.reloads == 0
    page = client(appliance).post("/knowledge", data={"text": bad})
    assert page.status_code == 422 and "Not saved" in page.text and "answr" in page.text


def test_a_reload_that_fails_puts_the_previous_file_back(venue: Path) -> None:
    appliance = FakeAppliance(venue, reload_error=ConfigError("kiosk.knowledge_file: line 3: nothing to say"))
    result = client(appliance).put("/api/knowledge", content=NEW_FACTS.encode())
    assert result.status_code == 422 and "line 3" in result.json()["error"]["message"]
    assert venue.read_text() == OLD_FACTS


def test_inline_knowledge_is_shown_but_not_editable() -> None:
    appliance = FakeAppliance(None)
    assert "knowledge_file" in client(appliance).get("/").text
    refused = client(appliance).put("/api/knowledge", content=NEW_FACTS.encode())
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "knowledge_not_editable"


# -- self-test and trigger -----------------------------------------------------------------------------------------
def test_the_selftest_runs_one_at_a_time_and_its_summary_is_shown(venue: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    runner = held_selftest(fifo)
    web = client(FakeAppliance(venue), selftest=runner)
    try:
        assert web.post("/api/selftest").status_code == 202
        assert web.post("/api/selftest").status_code == 409  # one at a time
        assert "is running" in web.get("/").text
        fifo.write_text("go")
        assert runner.wait(30)
        state = web.get("/api/selftest").json()
        assert state["exit_code"] == 0 and state["verdict"].startswith("pass") and state["runs"] == 1
        page = web.get("/").text
        assert "pass" in page and "p95 412 ms" in page
        assert web.post("/selftest", follow_redirects=False).status_code == 303  # the button starts another
        fifo.write_text("go")
        assert runner.wait(30) and runner.state().runs == 2
    finally:
        runner.close()


def test_trigger_needs_a_mode_with_a_trigger(venue: Path) -> None:
    appliance = FakeAppliance(venue)
    assert client(appliance).post("/api/trigger").status_code == 409
    appliance.activation = FakeActivation()
    assert client(appliance).post("/api/trigger").status_code == 200
    assert appliance.activation.triggered == 1


# -- the token -----------------------------------------------------------------------------------------------------
def test_with_a_token_every_route_asks_for_it(venue: Path) -> None:
    web = client(FakeAppliance(venue), token=TOKEN)
    assert web.get("/api/status").status_code == 401
    assert web.put("/api/knowledge", content=NEW_FACTS.encode()).status_code == 401
    assert venue.read_text() == OLD_FACTS
    assert web.post("/api/trigger").status_code == 401
    assert web.get("/", follow_redirects=False).headers["location"] == "/login"
    assert web.get("/api/status", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert web.get("/api/status", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_the_login_form_sets_the_cookie(venue: Path) -> None:
    web = client(FakeAppliance(venue), token=TOKEN)
    assert web.post("/login", data={"token": "wrong"}).status_code == 401
    assert COOKIE not in web.cookies
    logged = web.post("/login", data={"token": TOKEN}, follow_redirects=False)
    assert logged.status_code == 303 and "httponly" in logged.headers["set-cookie"].lower()
    assert web.get("/").status_code == 200 and 'id="status"' in web.get("/").text


def test_a_lan_address_needs_a_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="token_file"):
        config_from_dict({"admin": {"listen": "192.168.1.20:8080"}})
    config = config_from_dict({"admin": {"listen": "0.0.0.0:8080", "token_file": str(tmp_path / "token")}})
    assert config.admin.listen == "0.0.0.0:8080"
    for loopback in ("127.0.0.1:8080", "[::1]:8080", "localhost:8080", "unix:/run/edgevoice/admin.sock"):
        assert config_from_dict({"admin": {"listen": loopback}}).admin.listen == loopback
    with pytest.raises(ConfigError, match="absolute path"):
        parse_admin_listen("unix:admin.sock", token=False)


def test_the_token_file_is_checked(tmp_path: Path) -> None:
    token = tmp_path / "token"
    config = config_from_dict({"admin": {"listen": "0.0.0.0:8080", "token_file": str(token)}})
    with pytest.raises(ConfigError, match="cannot read"):
        check_admin(config)
    token.write_text("short\n")
    with pytest.raises(ConfigError, match="16 characters"):
        check_admin(config)
    token.write_text(TOKEN + "\n")
    check_admin(config)
    assert read_token(str(token)) == TOKEN


def test_the_service_socket_is_the_default_under_systemd() -> None:
    assert effective_admin_listen("", {"RUNTIME_DIRECTORY": "/run/edgevoice"}) == "unix:/run/edgevoice/admin.sock"
    assert effective_admin_listen("", {}) == ""
    assert effective_admin_listen("off", {"RUNTIME_DIRECTORY": "/run/edgevoice"}) == ""


# -- the server ----------------------------------------------------------------------------------------------------
def test_served_on_a_unix_socket_only_the_owner_may_open(venue: Path, tmp_path: Path) -> None:
    path = tmp_path / "admin.sock"
    runner = SelftestRunner(lambda folder: [sys.executable, "-c", ""])
    app = create_app(FakeAppliance(venue), runner, hosts=ServedHosts.for_listen(f"unix:{path}"))
    server = AdminServer(app, f"unix:{path}", token=False)
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(path)), timeout=10) as http:
            assert http.get("http://localhost/api/status").json()["uptime_s"] == 42
    finally:
        server.close()
        runner.close()
    assert not path.exists()


def test_a_file_at_the_socket_path_is_never_removed(venue: Path, tmp_path: Path) -> None:
    path = tmp_path / "admin.sock"
    path.write_text("not a socket")
    with pytest.raises(ConfigError, match="not a socket"):
        AdminServer(object(), f"unix:{path}", token=False)
    assert path.read_text() == "not a socket"


# -- the kiosk's reload --------------------------------------------------------------------------------------------
def test_the_kiosk_answers_from_the_new_file_after_a_reload(venue: Path) -> None:
    assistant = fake_assistant(kiosk_config(venue, semantic=False), FakeLlm("Nine.", ManualClock()))
    assert answer(assistant, "What time do you open?").reply == "We open at nine in the morning."
    venue.write_text(NEW_FACTS)
    assistant.reload_knowledge()
    assert answer(assistant, "What time do you open?", 2).reply == "We open at ten in the morning."
    assert answer(assistant, "Is there a cloakroom?", 3).reply == "Yes, by the entrance."


def test_invalid_knowledge_leaves_the_kiosk_as_it_was(venue: Path) -> None:
    assistant = fake_assistant(kiosk_config(venue, semantic=False), FakeLlm("Nine.", ManualClock()))
    kiosk = assistant.kiosk
    venue.write_text('[[qa]]\nquestion = "When?"\n')
    with pytest.raises(ConfigError, match="needs an answer"):
        assistant.reload_knowledge()
    assert assistant.kiosk is kiosk
    assert answer(assistant, "What time do you open?").reply == "We open at nine in the morning."


def test_a_reply_in_flight_ends_with_the_knowledge_it_began_with(venue: Path) -> None:
    llm = HeldLlm("We open early, at nine.", ManualClock())
    assistant = fake_assistant(kiosk_config(venue, semantic=False), llm)
    replies: list[str] = []
    turn = threading.Thread(target=lambda: replies.append(answer(assistant, "Do you open early in the morning?").reply))
    turn.start()
    assert llm.started.wait(10)
    old_prompt = llm.prompts[-1]
    venue.write_text(NEW_FACTS)
    reload = threading.Thread(target=assistant.reload_knowledge)
    reload.start()
    reload.join(0.2)
    assert reload.is_alive()  # waits for the reply in flight
    llm.release.set()
    turn.join(10)
    reload.join(10)
    assert not turn.is_alive() and not reload.is_alive()
    assert replies and replies[0].startswith("We open early")  # the turn in flight was answered
    assert "nine" in old_prompt[0].content
    assert answer(assistant, "What time do you open?", 2).reply == "We open at ten in the morning."


def test_a_reload_gives_up_when_no_reply_ends(venue: Path) -> None:
    llm = HeldLlm("We open early, at nine.", ManualClock())
    assistant = fake_assistant(kiosk_config(venue, semantic=False), llm)
    turn = threading.Thread(target=answer, args=(assistant, "Do you open early in the morning?"))
    turn.start()
    assert llm.started.wait(10)
    venue.write_text(NEW_FACTS)
    try:
        with pytest.raises(Exception, match="not reloaded") as caught:
            assistant.reload_knowledge(timeout=0.1)
        assert getattr(caught.value, "code", None) == "kiosk_busy"
    finally:
        llm.release.set()
        turn.join(10)
    assert answer(assistant, "What time do you open?", 2).reply == "We open at nine in the morning."


# -- the running appliance -----------------------------------------------------------------------------------------
class _Loop:
    errors: tuple[object, ...] = ()
    barge_ins = 2
    output = type("Output", (), {"fallbacks": 1})()


class _Xruns:
    def as_dict(self) -> dict[str, object]:
        return {"output_underruns": 4, "echo_attenuation_db": 18.0}


class _Live:
    loop = _Loop()
    activation: FakeActivation | None = None

    def xruns(self) -> _Xruns:
        return _Xruns()


def test_the_live_appliance_reports_the_run_and_triggers_its_activation(venue: Path, tmp_path: Path) -> None:
    from edgevoice.admin.appliance import LiveAppliance, start_admin
    from edgevoice.live.service import Notifier, ServiceMonitor

    config = kiosk_config(venue, semantic=False)
    assistant = fake_assistant(config, FakeLlm("Nine.", ManualClock()))
    live = _Live()
    clock = ManualClock()
    appliance = LiveAppliance(config, assistant, ServiceMonitor(Notifier({})), lambda: live, clock=clock.now)  # type: ignore[arg-type,return-value]
    clock.advance(61)
    status = appliance.status()
    assert status["uptime_s"] == 61 and status["barge_ins"] == 2 and status["fallbacks"] == 1
    assert status["xruns"] == {"output_underruns": 4, "echo_attenuation_db": 18.0}
    assert status["models"]["asr"]["name"] == config.models.asr  # type: ignore[index]
    assert len(status["models"]["asr"]["sha256"]) == 12  # type: ignore[index]
    assert "1 entries" in str(status["knowledge"])
    assert appliance.trigger() is False  # no activation at all
    live.activation = FakeActivation(accepts=False)
    assert appliance.trigger() is False  # "always" or push-to-talk: no trigger
    live.activation = FakeActivation()
    assert appliance.trigger() is True and live.activation.triggered == 1
    appliance.add_turn({"turn": 1, "transcript": "hi"})
    assert appliance.turns() == [{"turn": 1, "transcript": "hi"}]

    served = config_from_dict(
        {"admin": {"listen": f"unix:{tmp_path / 'admin.sock'}"}, "kiosk": {"knowledge_file": str(venue)}}
    )
    handle = start_admin(served, appliance)
    assert handle is not None
    try:
        with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(tmp_path / "admin.sock")), timeout=10) as http:
            assert http.get("http://localhost/api/turns").json() == [{"turn": 1, "transcript": None, "reply": None}]
            assert http.put("http://localhost/api/knowledge", content=NEW_FACTS.encode()).json()["entries"] == 2
    finally:
        handle.close()
    assert answer(assistant, "Is there a cloakroom?").reply == "Yes, by the entrance."
    assert start_admin(config_from_dict({"admin": {"listen": "off"}}), appliance) is None


def test_a_form_too_large_is_refused_unread(venue: Path) -> None:
    from edgevoice.admin.app import MAX_FORM_BYTES

    appliance = FakeAppliance(venue)
    result = client(appliance).post("/knowledge", data={"text": "x" * (MAX_FORM_BYTES + 1)})
    assert result.status_code == 413 and venue.read_text() == OLD_FACTS and appliance.reloads == 0


def test_a_knowledge_file_too_large_is_refused_unread(venue: Path) -> None:
    from edgevoice.admin.app import MAX_FORM_BYTES

    appliance = FakeAppliance(venue)
    result = client(appliance).put("/api/knowledge", content=b"x" * (MAX_FORM_BYTES + 1))
    assert result.status_code == 413 and venue.read_text() == OLD_FACTS and appliance.reloads == 0


def test_a_change_asked_by_another_site_is_refused(venue: Path) -> None:
    appliance = FakeAppliance(venue)
    web = client(appliance)
    evil = {"origin": "http://attacker.example"}
    assert web.post("/knowledge", data={"text": NEW_FACTS}, headers=evil).status_code == 403
    assert web.put("/api/knowledge", content=NEW_FACTS.encode(), headers=evil).status_code == 403
    assert web.post("/api/trigger", headers=evil).status_code == 403
    assert venue.read_text() == OLD_FACTS and appliance.reloads == 0
    assert web.get("/", headers=evil).status_code == 200  # reading is no change
    # the page's own form (its origin is the page's host) and a script without an Origin still work
    own = {"origin": "http://localhost"}
    assert web.post("/knowledge", data={"text": NEW_FACTS}, headers=own).status_code == 200
    assert web.put("/api/knowledge", content=OLD_FACTS.encode()).status_code == 200
    assert appliance.reloads == 2


class _SlowStatus(FakeAppliance):
    """Its status waits until released, counting how many wait at once."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.release = threading.Event()
        self.waiting = 0
        self.most = 0
        self.lock = threading.Lock()
        self.four_waiting = threading.Event()

    def status(self) -> Mapping[str, object]:
        with self.lock:
            self.waiting += 1
            self.most = max(self.most, self.waiting)
            if self.waiting >= WORKER_THREADS:
                self.four_waiting.set()
        assert self.release.wait(20)
        with self.lock:
            self.waiting -= 1
        return super().status()


def test_the_server_runs_blocking_work_on_a_few_threads_only(venue: Path, tmp_path: Path) -> None:
    path = tmp_path / "admin.sock"
    appliance = _SlowStatus(venue)
    runner = SelftestRunner(lambda folder: [sys.executable, "-c", ""])
    server = AdminServer(create_app(appliance, runner, hosts=HOSTS), f"unix:{path}", token=False)
    codes: list[int] = []

    def get() -> None:
        with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(path)), timeout=30) as http:
            codes.append(http.get("http://localhost/api/status").status_code)

    clients = [threading.Thread(target=get) for _ in range(3 * WORKER_THREADS)]
    try:
        for c in clients:
            c.start()
        assert appliance.four_waiting.wait(20)
        appliance.release.set()
        for c in clients:
            c.join(30)
    finally:
        appliance.release.set()
        server.close()
        runner.close()
    assert codes == [200] * (3 * WORKER_THREADS)  # every request answered, in turn
    assert appliance.most == WORKER_THREADS


def test_the_trigger_reaches_the_real_activation_in_trigger_mode_only(venue: Path) -> None:
    from edgevoice.admin.appliance import LiveAppliance
    from edgevoice.live.activation import Activation
    from edgevoice.live.service import Notifier, ServiceMonitor

    config = kiosk_config(venue, semantic=False)
    assistant = fake_assistant(config, FakeLlm("Nine.", ManualClock()))
    live = _Live()
    appliance = LiveAppliance(config, assistant, ServiceMonitor(Notifier({})), lambda: live)  # type: ignore[arg-type,return-value]
    runner = SelftestRunner(lambda folder: [sys.executable, "-c", ""])
    web = TestClient(create_app(appliance, runner, hosts=HOSTS), base_url="http://localhost")
    for mode, code in (("always", 409), ("push_to_talk", 409), ("trigger", 200)):
        live.activation = Activation(mode)  # type: ignore[assignment]
        assert web.post("/api/trigger").status_code == code, mode
        assert web.get("/api/status").json()["activation"] == mode
    assert live.activation.counts["trigger"] == 1  # type: ignore[union-attr]
