"""The display as a run starts it from ``[display]``: off by default, on loopback or a Unix socket only, its socket
checked by ``edgevoice config --check`` like the admin page's, served and closed with the run."""

from __future__ import annotations

import json
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgevoice.config import DisplayConfig
from edgevoice.config.load import config_from_dict
from edgevoice.config_check import check_config
from edgevoice.display.server import start_display
from edgevoice.errors import ConfigError
from edgevoice.live.activation import Activation
from edgevoice.live.bus import EventBus
from edgevoice.ownership import CODE
from tests.test_display_stream import free_port


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ev-") as name:
        yield Path(name)


def test_the_display_is_off_unless_configured() -> None:
    bus = EventBus()
    assert start_display(DisplayConfig(), bus, Activation(), lambda: []) is None
    assert start_display(DisplayConfig(listen="off"), bus, Activation(), lambda: []) is None
    assert bus.subscribers == 0  # nothing follows the conversation


@pytest.mark.parametrize(
    ("display", "wrong"),
    [
        ({"listen": "0.0.0.0:8470"}, "display.listen = '0.0.0.0:8470': the display is served on loopback"),
        ({"listen": "127.0.0.1"}, "display.listen = '127.0.0.1': must be 'HOST:PORT'"),
        ({"clear_after_s": 0.5}, "display.clear_after_s = 0.5: must be between 1.0 and 600.0"),
        ({"max_clients": 0}, "display.max_clients = 0: must be between 1 and 256"),
        ({"hosts": ["http://kiosk.local"]}, "display.hosts: 'http://kiosk.local' is not a host name"),
    ],
)
def test_bad_display_settings_are_refused_at_load_naming_the_key(display: dict[str, object], wrong: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"display": display})
    assert wrong in str(refused.value)


def test_config_check_refuses_a_file_where_the_display_socket_goes(short_dir: Path) -> None:
    victim = short_dir / "display.sock"
    victim.write_bytes(b"keep me\n")
    report = check_config(config_from_dict({"display": {"listen": f"unix:{victim}"}}), devices=False)
    assert [e.message for e in report.errors if e.code == CODE] == [
        f"display.listen: {victim} exists and is a regular file, not a socket; it is not replaced "
        "(name another path, or remove it)"
    ]
    assert victim.read_bytes() == b"keep me\n"


def test_a_configured_display_serves_the_loops_events_and_closes_with_the_run(short_dir: Path) -> None:
    bus = EventBus()
    port = free_port()
    config = DisplayConfig(listen=f"127.0.0.1:{port}", examples=1)
    handle = start_display(
        config, bus, Activation("trigger"), lambda: ["Opening hours", "Where is the cafe?", "Wi-Fi?"]
    )
    assert handle is not None and bus.subscribers == 1
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            sock.sendall(f"GET /events HTTP/1.0\r\nHost: localhost:{port}\r\n\r\n".encode())
            data = b""
            while b"\n\n" not in data.partition(b"retry: 1000\n\n")[2]:
                data += sock.recv(65536)
        hello = json.loads(data.split(b"data: ", 1)[1].split(b"\n", 1)[0])
        assert hello["mode"] == "trigger" and hello["examples"] == ["Where is the cafe?"] and hello["state"] == "idle"
        busy = start_display(config, EventBus(), Activation(), lambda: [])  # the port is taken: logged, not served
        assert busy is None
    finally:
        handle.close()
    assert bus.subscribers == 0
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
