"""A stand-in for the display's server (docs/display.md, "The kiosk screen"): the page's own files from
``edgevoice/display/static/`` and an ``/events`` stream whose messages a test scripts, served by uvicorn on a real
loopback port, with the Content-Security-Policy the real server sends; it records what the page posts to ``/talk``.
It can be stopped and started again on the same port, as a restarting service is."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from edgevoice.admin.server import AdminServer

STATIC = Path(__file__).resolve().parent.parent / "edgevoice" / "display" / "static"
CSP = "default-src 'self'"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hello(mode: str = "always", examples: tuple[str, ...] = (), **fields: object) -> dict[str, object]:
    return {
        "v": 1,
        "type": "hello",
        "mode": mode,
        "examples": list(examples),
        "clear_after_s": 20,
        "state": "idle",
        "exchange": None,
        **fields,
    }


class _SecurityHeaders:
    """Adds the real server's Content-Security-Policy to every response: the page must work under it (no inline
    script or style, nothing from elsewhere)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def with_csp(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"content-security-policy", CSP.encode())]
            await send(message)

        await self.app(scope, receive, with_csp)


class StandIn:
    """The stand-in server; :meth:`send` scripts the next message to every page connected."""

    def __init__(self, first: dict[str, object]) -> None:
        self.hello = first
        """The first message each connection gets (change it before :meth:`start` to restart "another" service)."""
        self.listen = f"127.0.0.1:{free_port()}"
        self.url = f"http://{self.listen}"
        self.posts: list[tuple[dict[str, object], str | None]] = []
        """Each post to /talk: its JSON body and its Origin header."""
        self.connections = 0
        self.refuse = 0
        """How many of the next connections to /events get 503 ``display_full``, as a full display answers."""
        self.refused = 0
        self._clients: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[object]]] = []
        self._seq = 0
        self._changed = threading.Condition()
        self._server: AdminServer | None = None
        app = Starlette(
            routes=[
                Route("/", lambda request: FileResponse(STATIC / "index.html")),
                Route("/events", self._events),
                Route("/talk", self._talk, methods=["POST"]),
                Mount("/static", StaticFiles(directory=STATIC)),
            ]
        )
        self.app = _SecurityHeaders(app)

    def start(self) -> None:
        self._server = AdminServer(self.app, self.listen, token=False)

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    def send(self, message: object) -> None:
        """A JSON object as one SSE message (a ``str`` goes as the data line as it is)."""
        with self._changed:
            clients = list(self._clients)
        assert clients, "no page is connected"
        for loop, queue in clients:
            loop.call_soon_threadsafe(queue.put_nowait, message)

    def wait_connections(self, count: int, timeout: float = 30.0) -> None:
        """Until ``count`` connections to /events have been made since the start, and one is open."""
        with self._changed:
            ok = self._changed.wait_for(lambda: self.connections >= count and self._clients, timeout)
        assert ok, f"{self.connections} connections to /events, not {count}"

    def wait_posts(self, count: int, timeout: float = 30.0) -> list[dict[str, object]]:
        with self._changed:
            ok = self._changed.wait_for(lambda: len(self.posts) >= count, timeout)
            assert ok, f"{len(self.posts)} posts to /talk, not {count}: {self.posts}"
            return [body for body, _ in self.posts]

    def _frame(self, message: object) -> str:
        self._seq += 1
        data = message if isinstance(message, str) else json.dumps(message)
        return f"id: {self._seq}\ndata: {data}\n\n"

    async def _events(self, request: Request) -> Response:
        with self._changed:
            if self.refuse > 0:
                self.refuse -= 1
                self.refused += 1
                self._changed.notify_all()
                error = {
                    "code": "display_full",
                    "message": "16 pages follow the display already ([display] max_clients)",
                }
                return JSONResponse({"error": error}, status_code=503)
        queue: asyncio.Queue[object] = asyncio.Queue()
        client = (asyncio.get_running_loop(), queue)

        async def stream() -> AsyncIterator[str]:
            try:
                yield "retry: 1000\n\n" + self._frame(self.hello)
                with self._changed:
                    self._clients.append(client)
                    self.connections += 1
                    self._changed.notify_all()
                while True:
                    yield self._frame(await queue.get())
            finally:
                with self._changed:
                    if client in self._clients:
                        self._clients.remove(client)

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    async def _talk(self, request: Request) -> Response:
        body = await request.json()
        with self._changed:
            self.posts.append((body, request.headers.get("origin")))
            self._changed.notify_all()
        return Response(status_code=204)
