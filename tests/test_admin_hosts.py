"""The admin page answers only to the host names it serves (DNS rebinding), on a real uvicorn server on a loopback
port and on a Unix socket, asked with raw HTTP requests whose Host and Origin headers are forged."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgevoice.admin.app import create_app
from edgevoice.admin.hosts import ServedHosts
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.admin.server import AdminServer
from edgevoice.clock import ManualClock
from edgevoice.config.admin_listen import parse_authority, parse_host_entry
from edgevoice.config.load import config_from_dict
from edgevoice.errors import ConfigError
from tests.admin_fakes import NEW_FACTS, OLD_FACTS, FakeAppliance, answer, fake_assistant
from tests.fakes import FakeLlm

EVIL = "attacker.example"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def raw_request(address: tuple[str, int] | str, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send ``head`` (request line and headers, as written) and ``body`` over a new connection; the status and
    body of the reply (the connection is closed after it)."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(address)
        length = f"Content-Length: {len(body)}\r\n" if body else ""
        sock.sendall(f"{head}{length}Connection: close\r\n\r\n".encode("latin-1") + body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    status_line, _, rest = reply.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def error_code(body: bytes) -> str:
    return str(json.loads(body)["error"]["code"])


class Served:
    """The admin page on ``listen``, a fake appliance behind it."""

    def __init__(self, tmp_path: Path, listen: str, declared: tuple[str, ...] = ()) -> None:
        self.venue = tmp_path / "venue.md"
        self.venue.write_text(OLD_FACTS)
        self.appliance = FakeAppliance(self.venue)
        self.runner = SelftestRunner(lambda folder: [sys.executable, "-c", ""])
        hosts = ServedHosts.for_listen(listen, declared)
        self.server = AdminServer(create_app(self.appliance, self.runner, hosts=hosts), listen, token=False)
        self.address = self.server.address
        self.port = self.address[1] if isinstance(self.address, tuple) else 0

    def ask(self, method: str, path: str, host: str | None, *extra: str, body: bytes = b"") -> tuple[int, bytes]:
        headers = "".join(f"{h}\r\n" for h in ((f"Host: {host}",) if host is not None else ()) + extra)
        return raw_request(self.address, f"{method} {path} HTTP/1.1\r\n{headers}", body)

    def close(self) -> None:
        self.server.close()
        self.runner.close()


@pytest.fixture
def loopback(tmp_path: Path) -> Iterator[Served]:
    served = Served(tmp_path, f"127.0.0.1:{_free_port()}")
    try:
        yield served
    finally:
        served.close()


# -- the real server on a loopback port ----------------------------------------------------------------------------
def test_a_rebound_name_can_neither_read_nor_replace_anything(loopback: Served) -> None:
    port = loopback.port
    forged = f"{EVIL}:{port}"
    status, body = loopback.ask("GET", "/api/turns", forged)
    assert status == 421 and error_code(body) == "admin_host_not_served", body
    assert b"when do you open" not in body and b"412" not in body
    status, body = loopback.ask(
        "PUT", "/api/knowledge", forged, f"Origin: http://{forged}", "Content-Type: text/markdown", body=b"evil\n"
    )
    assert status == 421 and error_code(body) == "admin_host_not_served", body
    assert loopback.venue.read_text() == OLD_FACTS and loopback.appliance.reloads == 0
    assert str(port) in json.loads(body)["error"]["message"]  # it says which names it serves


def test_every_route_refuses_an_unserved_host_before_it_runs(loopback: Served) -> None:
    port = loopback.port
    for method, path in (
        ("GET", "/"),
        ("GET", "/login"),
        ("POST", "/login"),
        ("POST", "/knowledge"),
        ("POST", "/selftest"),
        ("GET", "/api/status"),
        ("GET", "/api/knowledge"),
        ("POST", "/api/selftest"),
        ("POST", "/api/trigger"),
        ("GET", "/static/admin.css"),
        ("GET", "/no/such/page"),
        ("DELETE", "/api/knowledge"),
    ):
        status, body = loopback.ask(method, path, f"{EVIL}:{port}")
        assert status == 421 and error_code(body) == "admin_host_not_served", (method, path, body)
    assert loopback.runner.state().runs == 0 and loopback.appliance.reloads == 0


@pytest.mark.parametrize(
    "host",
    [
        f"{EVIL}",
        "127.0.0.1.attacker.example:{port}",
        "localhost.attacker.example:{port}",
        "127.0.0.1:{other}",  # another port: not this page
        "kiosk.local:{port}",  # not declared
    ],
)
def test_names_that_are_not_served_are_refused(loopback: Served, host: str) -> None:
    port = loopback.port
    status, body = loopback.ask("GET", "/api/status", host.format(port=port, other=port + 1))
    assert status == 421 and error_code(body) == "admin_host_not_served", body


def test_a_request_without_one_valid_host_is_refused(loopback: Served) -> None:
    port = loopback.port
    for host in ("127.0.0.1:99999", "::1", "a b", "u@127.0.0.1", f"127.0.0.1:{port}/x"):
        status, body = loopback.ask("GET", "/api/status", host)
        assert status == 400 and error_code(body) == "admin_host_invalid", (host, body)
    status, body = raw_request(loopback.address, "GET /api/status HTTP/1.0\r\n")  # HTTP/1.0 may leave Host out
    assert status == 400 and error_code(body) == "admin_host_invalid", body
    for head in (  # refused by uvicorn itself, before the app
        "GET /api/status HTTP/1.1\r\n",
        f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: {EVIL}:{port}\r\n",
    ):
        status, body = raw_request(loopback.address, head)
        assert status == 400 and b"uptime" not in body, body


def test_the_served_names_still_work(loopback: Served) -> None:
    port = loopback.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}", f"[::1]:{port}", "127.0.0.1"):
        status, body = loopback.ask("GET", "/api/status", host)
        assert status == 200 and json.loads(body)["uptime_s"] == 42, (host, body)
    status, body = loopback.ask(
        "PUT", "/api/knowledge", f"localhost:{port}", f"Origin: http://localhost:{port}", body=NEW_FACTS.encode()
    )
    assert status == 200 and json.loads(body)["entries"] == 2, body
    assert loopback.venue.read_text() == NEW_FACTS and loopback.appliance.loaded == NEW_FACTS


def test_a_change_from_a_page_that_is_not_this_one_is_refused(loopback: Served) -> None:
    """The Origin is compared with the served names and the request's own host and port, not taken on trust."""
    port = loopback.port
    host = f"127.0.0.1:{port}"
    for origin in (
        f"http://{EVIL}:{port}",  # another site (cross-site request forgery)
        f"http://localhost:{port + 1}",  # another page on this kiosk's loopback
        f"http://localhost:{port}",  # this page under another name: another origin to the browser
        "null",  # a sandboxed frame, a file:// page
    ):
        status, body = loopback.ask("PUT", "/api/knowledge", host, f"Origin: {origin}", body=NEW_FACTS.encode())
        assert status == 403 and error_code(body) == "admin_cross_site", (origin, body)
        status, body = loopback.ask("POST", "/api/trigger", host, f"Origin: {origin}")
        assert status == 403 and error_code(body) == "admin_cross_site", (origin, body)
    assert loopback.venue.read_text() == OLD_FACTS and loopback.appliance.reloads == 0
    status, _ = loopback.ask("PUT", "/api/knowledge", host, f"Origin: http://{host}", body=NEW_FACTS.encode())
    assert status == 200 and loopback.appliance.reloads == 1


def test_the_page_of_a_run_on_loopback_refuses_a_rebound_name(tmp_path: Path) -> None:
    """As reported: ``[admin] listen = "127.0.0.1:PORT"``, no token, the page ``edgevoice run`` starts."""
    from edgevoice.admin.appliance import LiveAppliance, start_admin
    from edgevoice.live.service import Notifier, ServiceMonitor

    venue = tmp_path / "venue.md"
    venue.write_text(OLD_FACTS)
    port = _free_port()
    config = config_from_dict(
        {
            "admin": {"listen": f"127.0.0.1:{port}"},
            "kiosk": {"knowledge_file": str(venue), "semantic": False, "mend_misheard": False},
        }
    )
    assistant = fake_assistant(config, FakeLlm("I do not know.", ManualClock()))
    appliance = LiveAppliance(config, assistant, ServiceMonitor(Notifier({})), lambda: None)
    handle = start_admin(config, appliance)
    assert handle is not None
    forged = f"Host: {EVIL}:{port}\r\nOrigin: http://{EVIL}:{port}\r\n"
    try:
        status, body = raw_request(("127.0.0.1", port), f"PUT /api/knowledge HTTP/1.1\r\n{forged}", NEW_FACTS.encode())
        assert status == 421 and error_code(body) == "admin_host_not_served"
        assert venue.read_text() == OLD_FACTS
        assert answer(assistant, "Is there a cloakroom?").reply != "Yes, by the entrance."
        own = f"Host: 127.0.0.1:{port}\r\n"
        status, body = raw_request(("127.0.0.1", port), f"PUT /api/knowledge HTTP/1.1\r\n{own}", NEW_FACTS.encode())
        assert status == 200 and json.loads(body)["entries"] == 2
    finally:
        handle.close()
    assert answer(assistant, "Is there a cloakroom?", 2).reply == "Yes, by the entrance."


# -- a Unix socket ---------------------------------------------------------------------------------------------------
def test_on_a_unix_socket_the_loopback_names_on_any_port_are_served(tmp_path: Path) -> None:
    served = Served(tmp_path, f"unix:{tmp_path / 'admin.sock'}")
    try:
        for host in ("localhost", "localhost:8080", "127.0.0.1:9", "[::1]:8080"):
            status, body = served.ask("GET", "/api/status", host)
            assert status == 200, (host, body)
        for host in (f"{EVIL}:8080", "admin", EVIL):  # an SSH tunnel to it reached through a rebound name
            status, body = served.ask("GET", "/api/turns", host)
            assert status == 421 and error_code(body) == "admin_host_not_served", (host, body)
        status, body = served.ask(
            "PUT", "/api/knowledge", "localhost:8080", "Origin: http://localhost:3000", body=NEW_FACTS.encode()
        )
        assert status == 403 and error_code(body) == "admin_cross_site"
        assert served.venue.read_text() == OLD_FACTS
    finally:
        served.close()


# -- the names served, as configured -------------------------------------------------------------------------------
def test_a_lan_address_serves_itself_and_the_declared_names_only() -> None:
    hosts = ServedHosts.for_listen("192.168.1.20:8080", ("kiosk.local", "Kiosk.Example:8443", "fe80::1"))
    for good in ("192.168.1.20:8080", "192.168.1.20", "kiosk.local:8080", "kiosk.local", "kiosk.example:8443"):
        assert hosts.allows(good), good
    assert hosts.allows("[fe80::1]:8080") and hosts.allows("[fe80:0::1]")
    for bad in ("localhost:8080", "127.0.0.1:8080", "192.168.1.20:8081", "kiosk.local:8443", f"{EVIL}:8080"):
        assert not hosts.allows(bad), bad
    wildcard = ServedHosts.for_listen("0.0.0.0:8080", ("kiosk.local",))
    assert wildcard.allows("localhost:8080") and wildcard.allows("kiosk.local:8080")
    assert not wildcard.allows("0.0.0.0:8080") and not wildcard.allows(f"{EVIL}:8080")


def test_hosts_are_checked_at_load() -> None:
    config = config_from_dict({"admin": {"listen": "127.0.0.1:8080", "hosts": ["kiosk.local", "[::1]:9000"]}})
    assert config.admin.hosts == ("kiosk.local", "[::1]:9000")
    for bad in ("*", "*.example", "http://kiosk.local", "kiosk.local/admin", "kiosk.local:0", " kiosk", "", "a_b"):
        with pytest.raises(ConfigError, match=r"admin\.hosts"):
            config_from_dict({"admin": {"hosts": [bad]}})
    with pytest.raises(ConfigError, match="list of strings"):
        config_from_dict({"admin": {"hosts": "kiosk.local"}})
    assert parse_host_entry("admin.hosts", "fe80::1") == ("fe80::1", None)
    assert parse_authority("[::1]:8080") == ("::1", 8080) and parse_authority("LOCALHOST.") == ("localhost", None)


def test_a_host_with_a_port_of_thousands_of_digits_is_refused_not_an_error() -> None:
    """Python refuses int() on more than 4,300 digits: such a Host must be malformed (400), not a 500 and a
    traceback in the journal for every request."""
    assert parse_authority("localhost:" + "1" * 5000) is None
    assert parse_authority("localhost:" + "0" * 5 + "80") is None
    assert parse_authority("localhost:08080") == ("localhost", 8080)
