"""The display's event stream on a real uvicorn on a loopback port, fed by a real EventBus: the messages in order and
in their schema, the hello of a page that connects mid-exchange, the clearing, the bounds (1,000 connections, a
page that never reads, max_clients) and the Host, Origin and /talk checks; read with raw sockets."""

from __future__ import annotations

import gc
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from edgevoice.admin.hosts import ServedHosts
from edgevoice.admin.server import AdminServer
from edgevoice.audio.chunk import AudioChunk
from edgevoice.clock import ManualClock
from edgevoice.display.app import create_display_app
from edgevoice.display.clients import Client
from edgevoice.display.feed import DisplayFeed
from edgevoice.listen.endpointing import TurnEndReason
from edgevoice.listen.turn import Turn
from edgevoice.live.activation import Activation, Trigger
from edgevoice.live.bus import EventBus
from edgevoice.live.events import (
    ClauseStarted,
    Partial,
    ReplyFinished,
    ReplyStarted,
    SpeechStarted,
    Transcribed,
    TurnCommitted,
)
from edgevoice.reply.trace import ReplyTrace

EVIL = "attacker.example"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def until(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Wait (a bound, not a timing) for ``condition``, looking every 10 ms."""
    done = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if condition():
            return True
        done.wait(0.01)
    return condition()


def turn(turn_id: int) -> Turn:
    audio = AudioChunk(np.zeros(1600, np.float32), start=0)
    return Turn(turn_id, audio, audio.end_s, audio.end_s, 0.0, TurnEndReason.COMPLETE, audio)


def exchange_events(turn_id: int = 3) -> list[object]:
    return [
        SpeechStarted(turn_id, 1.0),
        Partial(turn_id, "where is the"),
        TurnCommitted(turn(turn_id)),
        Transcribed(turn_id, "Where is the cafe?"),
        ReplyStarted(turn_id),
        ClauseStarted(turn_id, 0, "The cafe is upstairs."),
        ClauseStarted(turn_id, 1, "It opens at ten."),
        ReplyFinished(ReplyTrace(turn_id, committed=0.0), turn(turn_id)),
    ]


class Stream:
    """A page following ``/events`` over a raw socket (HTTP/1.0: the body is the stream, to the close)."""

    def __init__(self, port: int, host: str | None = None, *, read: bool = True) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        host = host or f"127.0.0.1:{port}"
        self.sock.sendall(f"GET /events HTTP/1.0\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode())
        self.buffer = b""
        self.status = 0
        self.head = b""
        self.ids: list[int] = []
        self.retry: str | None = None
        if read:
            self._read_head()

    def _read_head(self) -> None:
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            assert chunk, "closed before the headers"
            self.buffer += chunk
        self.head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        self.status = int(self.head.split()[1])

    def body(self) -> bytes:
        """The rest of a refusal's body."""
        while chunk := self.sock.recv(65536):
            self.buffer += chunk
        return self.buffer

    def next(self) -> dict[str, object]:
        """The next message (``retry:`` and comment lines skipped)."""
        while True:
            while b"\n\n" not in self.buffer:
                chunk = self.sock.recv(65536)
                assert chunk, "the stream ended"
                self.buffer += chunk
            block, _, self.buffer = self.buffer.partition(b"\n\n")
            fields = dict(line.split(": ", 1) for line in block.decode().split("\n") if not line.startswith(":"))
            self.retry = fields.pop("retry", self.retry)
            if "data" in fields:
                assert set(fields) == {"id", "data"}, fields  # no event: field
                self.ids.append(int(fields["id"]))
                message: dict[str, object] = json.loads(fields["data"])
                assert message["v"] == 1
                return message

    def close(self) -> None:
        self.sock.close()


class NeverHeard:
    """A wake-word detector that hears nothing (the button is the trigger)."""

    def heard(self, audio: object) -> bool:
        return False

    def reset(self) -> None:
        pass


class Served:
    def __init__(self, static: Path, *, mode: str = "always", keepalive_s: float = 15.0, **feed: object) -> None:
        self.bus = EventBus()
        self.activation = Activation(mode, wake_word=NeverHeard() if mode == "wake_word" else None)
        self.feed = DisplayFeed(self.bus, mode=mode, examples=lambda: ["Where is the cafe?"], **feed)  # type: ignore[arg-type]
        self.port = free_port()
        listen = f"127.0.0.1:{self.port}"
        app = create_display_app(
            self.feed,
            hosts=ServedHosts.for_listen(listen),
            activation=self.activation,
            static=static,
            send_timeout_s=1.0,
            keepalive_s=keepalive_s,
        )
        self.server = AdminServer(app, listen, token=False, name="display")

    def publish(self, *events: object) -> None:
        for event in events:
            self.bus.publish(event)  # type: ignore[arg-type]

    def ask(
        self, method: str, path: str, *headers: str, host: str | None = None, body: bytes = b""
    ) -> tuple[int, bytes, bytes]:
        lines = [f"Host: {host or f'127.0.0.1:{self.port}'}", *headers, f"Content-Length: {len(body)}"]
        with socket.create_connection(("127.0.0.1", self.port), timeout=20) as sock:
            sock.sendall(
                f"{method} {path} HTTP/1.0\r\n{''.join(h + chr(13) + chr(10) for h in lines)}\r\n".encode() + body
            )
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        head, _, rest = reply.partition(b"\r\n\r\n")
        return int(head.split()[1]), head, rest

    def close(self) -> None:
        self.feed.close()
        self.server.close()


@pytest.fixture
def static(tmp_path: Path) -> Path:
    (tmp_path / "index.html").write_text("<!doctype html><title>kiosk</title>")
    (tmp_path / "display.css").write_text("body{}")
    return tmp_path


@pytest.fixture
def served(static: Path) -> Iterator[Served]:
    s = Served(static)
    try:
        yield s
    finally:
        s.close()


def test_a_page_gets_the_hello_then_each_event_in_order_in_schema_1(served: Served) -> None:
    page = Stream(served.port)
    assert page.status == 200 and b"text/event-stream" in page.head
    hello = page.next()
    assert page.retry == "1000"  # the browser reconnects a second after the stream ends
    assert hello == {
        "v": 1,
        "type": "hello",
        "mode": "always",
        "examples": ["Where is the cafe?"],
        "clear_after_s": 20.0,
        "state": "listening",
        "exchange": None,
    }
    served.publish(*exchange_events(3))
    got = [page.next() for _ in range(9)]
    assert got == [
        {"v": 1, "type": "state", "state": "hearing"},
        {"v": 1, "type": "partial", "turn": 3, "text": "where is the"},
        {"v": 1, "type": "state", "state": "thinking"},
        {"v": 1, "type": "transcript", "turn": 3, "text": "Where is the cafe?"},
        {"v": 1, "type": "state", "state": "speaking"},
        {"v": 1, "type": "clause", "turn": 3, "index": 0, "text": "The cafe is upstairs."},
        {"v": 1, "type": "clause", "turn": 3, "index": 1, "text": "It opens at ten."},
        {"v": 1, "type": "end", "turn": 3},
        {"v": 1, "type": "state", "state": "listening"},
    ]
    assert page.ids[1:] == list(range(page.ids[1], page.ids[1] + 9))  # numbered in order, after the hello's
    page.close()


def test_a_page_connecting_mid_exchange_gets_it_in_its_hello(served: Served) -> None:
    first = Stream(served.port)
    first.next()
    served.publish(*exchange_events(5)[:6])  # up to the first clause heard
    while first.next().get("type") != "clause":
        pass  # once the first page has it, the feed has applied it
    late = Stream(served.port)
    hello = late.next()
    assert hello["state"] == "speaking"
    assert hello["exchange"] == {
        "turn": 5,
        "transcript": "Where is the cafe?",
        "clauses": ["The cafe is upstairs."],
        "current": 0,
    }
    served.publish(ClauseStarted(5, 1, "It opens at ten."))
    assert late.next() == {"v": 1, "type": "clause", "turn": 5, "index": 1, "text": "It opens at ten."}
    first.close()
    late.close()


def test_the_exchange_is_cleared_after_clear_after_s_on_the_server_too(static: Path) -> None:
    clock = ManualClock()
    served = Served(static, clock=clock, clear_after_s=20.0, poll_s=0.02)
    try:
        page = Stream(served.port)
        page.next()
        served.publish(*exchange_events(2))
        while page.next().get("type") != "end":
            pass
        served.feed.tick()
        assert served.feed.exchange is not None  # not yet: the clock has not moved
        clock.advance(19.9)
        served.feed.tick()
        assert served.feed.exchange is not None
        clock.advance(0.2)
        assert page.next() == {"v": 1, "type": "state", "state": "listening"}
        assert page.next() == {"v": 1, "type": "clear"}  # the feed's own thread cleared it
        assert served.feed.exchange is None
        later = Stream(served.port)
        assert later.next()["exchange"] is None  # a page connecting now learns nothing of it
        page.close()
        later.close()
    finally:
        served.close()


def test_a_thousand_connections_leave_no_page_behind_and_the_one_past_max_clients_is_refused(static: Path) -> None:
    served = Served(static, max_clients=3)
    try:
        for _ in range(1000):
            page = Stream(served.port)
            assert page.next()["type"] == "hello"
            page.close()
        assert until(lambda: served.feed.clients == 0)
        gc.collect()
        assert not [o for o in gc.get_objects() if isinstance(o, Client)]  # every page's queue is gone
        assert served.bus.subscribers == 1  # the feed's one subscription, whatever the pages
        pages = [Stream(served.port) for _ in range(3)]
        for page in pages:
            page.next()
        refused = Stream(served.port)
        assert refused.status == 503
        assert json.loads(refused.body())["error"]["code"] == "display_full"
        assert served.feed.refused == 1
        pages[0].close()
        assert until(lambda: served.feed.clients == 2)
        again = Stream(served.port)
        assert again.status == 200 and again.next()["type"] == "hello"
        for page in [*pages[1:], again, refused]:
            page.close()
    finally:
        served.close()


def test_a_page_that_never_reads_is_dropped_and_never_holds_up_the_feed_or_the_bus(static: Path) -> None:
    served = Served(static, client_queue=16)
    try:
        stuck = Stream(served.port, read=False)  # asks, and never reads a byte
        assert until(lambda: served.feed.clients == 1)
        records = served.bus.subscribe(name="records", maxsize=10_000)  # stands for the loop's other followers
        words = "where " * 300
        for i in range(4000):  # ~7 MB of partials: more than the socket buffers hold
            served.bus.publish(Partial(1, f"{i} {words}"))
        assert len(records.drain()) == 4000  # every other follower got every event: nothing waited
        assert until(lambda: served.feed.clients == 0)  # fell behind, disconnected, its slot freed
        assert served.feed.disconnected >= 1
        page = Stream(served.port)  # the feed and the server go on
        hello = page.next()
        assert hello["type"] == "hello" and len(str(hello["exchange"])) < 3000
        page.close()
        stuck.close()
    finally:
        served.close()


def test_an_unserved_host_and_a_foreign_origin_are_refused(static: Path) -> None:
    served = Served(static, mode="push_to_talk")
    try:
        page = Stream(served.port, host=f"{EVIL}:{served.port}")
        refusal = json.loads(page.body())["error"]
        assert page.status == 421 and refusal["code"] == "admin_host_not_served"
        assert "this display page does not serve" in refusal["message"] and "[display] hosts" in refusal["message"]
        page.close()
        assert served.feed.clients == 0
        status, _, body = served.ask(
            "POST",
            "/talk",
            f"Origin: http://{EVIL}:{served.port}",
            "Content-Type: application/json",
            body=b'{"action": "press"}',
        )
        assert status == 403 and json.loads(body)["error"]["code"] == "admin_cross_site"
        assert served.activation is not None and not served.activation.held
        own = f"Origin: http://127.0.0.1:{served.port}"
        status, _, _ = served.ask("POST", "/talk", own, body=b'{"action": "press"}')
        assert status == 204 and served.activation.held
    finally:
        served.close()


@pytest.mark.parametrize(
    ("mode", "action", "status"),
    [
        ("always", "press", 409),
        ("push_to_talk", "press", 204),
        ("push_to_talk", "release", 204),
        ("trigger", "trigger", 204),
        ("trigger", "press", 204),
        ("wake_word", "trigger", 204),
    ],
)
def test_talk_drives_the_activation_gate_in_each_mode(static: Path, mode: str, action: str, status: int) -> None:
    served = Served(static, mode=mode)
    try:
        assert served.activation is not None
        if action == "release":
            served.activation.press()
        got, _, body = served.ask("POST", "/talk", body=json.dumps({"action": action}).encode())
        assert got == status, body
        if mode == "always":
            assert json.loads(body)["error"]["code"] == "display_no_button"
        elif mode == "push_to_talk":
            assert served.activation.held is (action == "press")
        else:
            assert [type(e) for e in served.activation.take()] == [Trigger]
    finally:
        served.close()


@pytest.mark.parametrize("body", [b"", b"press", b'{"action": "shout"}', b"[]", b'{"action": "' + b"x" * 5000 + b'"}'])
def test_talk_refuses_a_bad_body(static: Path, body: bytes) -> None:
    served = Served(static, mode="trigger")
    try:
        status, _, reply = served.ask("POST", "/talk", body=body)
        assert status == 400 and json.loads(reply)["error"]["code"] == "display_bad_request"
        assert served.activation is not None and served.activation.take() == []
    finally:
        served.close()


def test_the_page_and_its_files_are_served_with_their_policy_and_nothing_else(served: Served) -> None:
    status, head, body = served.ask("GET", "/")
    assert status == 200 and body.startswith(b"<!doctype html>")
    assert b"content-security-policy: default-src 'self'" in head.lower()
    status, head, _ = served.ask("GET", "/static/display.css")
    assert status == 200 and b"text/css" in head
    for path in ("/static/..%2Fsecret", "/static/.hidden", "/static/missing.js"):
        status, _, body = served.ask("GET", path)
        assert status == 404, path
    status, _, body = served.ask("POST", "/events")
    assert status == 405 and json.loads(body)["error"]["code"] == "display_method_not_allowed"


def test_a_quiet_stream_sends_keep_alive_comments(static: Path) -> None:
    served = Served(static, keepalive_s=0.05)
    try:
        page = Stream(served.port)
        page.next()
        while b": keep-alive\n\n" not in page.buffer:
            chunk = page.sock.recv(65536)
            assert chunk
            page.buffer += chunk
        served.publish(Partial(1, "hello"))
        assert page.next() == {"v": 1, "type": "partial", "turn": 1, "text": "hello"}  # comments are no messages
        page.close()
    finally:
        served.close()
