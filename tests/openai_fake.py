"""A tiny OpenAI-compatible chat server on loopback that misbehaves on demand, for the remote model's fault tests.

Modes: ``ok`` (the reply as SSE chat chunks, then ``[DONE]``), ``http500``, ``malformed`` (an event that is not JSON),
``not_sse`` (a JSON body), ``empty`` (no text, then ``[DONE]``), ``truncated`` (the connection closes mid-reply),
``stall`` (headers and the role chunk, then nothing until :attr:`release` is set), ``late`` (nothing until
:attr:`release`, then the reply) and ``cut`` (the first clause and a word, then nothing until :attr:`release`);
``script``: the bytes a function gives, as they come, until it ends, the client goes or :attr:`release` is set.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WAIT_S = 30.0
"""The longest a stalled response waits for :attr:`FakeChatServer.release` (so no handler outlives a test)."""


def chunk(content: str | None = None, *, role: str | None = None, finish: str | None = None) -> bytes:
    delta: dict[str, str] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    body = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class FakeChatServer:
    """``POST /v1/chat/completions`` on 127.0.0.1, a free port; :attr:`requests` holds each request's JSON body and
    headers. Use as a context manager: leaving it releases any stalled response and stops the server."""

    def __init__(
        self,
        mode: str = "ok",
        reply: str = "The cafe is on the ground floor, next to the shop.",
        script: Callable[[], Iterable[bytes]] | None = None,
    ) -> None:
        self.mode, self.reply, self.script = mode, reply, script
        self.release = threading.Event()
        self.client_left = threading.Event()
        """Set when writing to a client failed: it closed the response."""
        self.requests: list[tuple[dict[str, Any], dict[str, str]]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                server.requests.append((body, dict(self.headers.items())))
                # the client may give up on the reply (cancelled): what a real server sees too
                try:
                    server.respond(self)
                except (BrokenPipeError, ConnectionResetError):
                    server.client_left.set()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._http.serve_forever, name="fake-chat-server", daemon=True)

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(5)

    def pieces(self) -> list[str]:
        words = self.reply.split(" ")
        return [w if i == 0 else " " + w for i, w in enumerate(words)]

    def respond(self, h: BaseHTTPRequestHandler) -> None:
        if self.mode == "http500":
            h.send_response(500)
            h.send_header("Content-Type", "application/json")
            h.end_headers()
            h.wfile.write(b'{"error": {"message": "model crashed"}}')
            return
        if self.mode == "not_sse":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.end_headers()
            h.wfile.write(json.dumps({"choices": [{"message": {"content": self.reply}}]}).encode())
            return
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()

        def send(data: bytes) -> None:
            h.wfile.write(data)
            h.wfile.flush()

        send(chunk(role="assistant"))
        if self.mode == "script" and self.script is not None:
            for data in self.script():
                if self.release.is_set():
                    return
                send(data)
            return
        if self.mode in ("stall", "late"):
            self.release.wait(WAIT_S)
            if self.mode == "stall":
                return
        if self.mode == "malformed":
            send(b"data: {this is not json\n\n")
            return
        pieces = [] if self.mode == "empty" else self.pieces()
        for i, piece in enumerate(pieces):
            send(chunk(piece))
            if self.mode == "truncated" and i == 2:
                return
            if self.mode == "cut" and i > 0 and pieces[i - 1].endswith(","):
                self.release.wait(WAIT_S)
                return
        send(chunk(finish="stop"))
        send(b"data: [DONE]\n\n")
