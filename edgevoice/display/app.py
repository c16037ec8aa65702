"""The display's web app: its page, the event stream the page follows, and the talk button's endpoint.

Routes (docs/display.md): ``GET /`` the page; ``GET /static/{name}`` its files (nothing from the network:
``Content-Security-Policy: default-src 'self'``); ``GET /events`` the Server-Sent Events of
:class:`~edgevoice.display.feed.DisplayFeed`; ``POST /talk`` ``{"action": "press" | "release" | "trigger"}`` to
the activation gate. Every request passes the admin page's Host guard first (:mod:`edgevoice.admin.hosts`: DNS
rebinding applies here too; a change must come from the display's own origin).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from edgevoice.admin.hosts import HostGuard, ServedHosts
from edgevoice.display.clients import Client
from edgevoice.display.feed import DisplayFeed, DisplayFull
from edgevoice.live.activation import Activation, ActivationMode

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
RETRY_MS = 1000
"""How soon a browser reconnects after the stream ends (the service restarted, the page was disconnected)."""
KEEPALIVE_S = 15.0
"""A comment line this often keeps proxies and the browser from taking a quiet stream for a dead one."""
SEND_TIMEOUT_S = 10.0
"""A page that takes no data for this long while some waits for it is disconnected (its slot freed)."""
MAX_TALK_BODY = 1024
ACTIONS = ("press", "release", "trigger")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def display_error(code: str, message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=SECURITY_HEADERS)


class EventStream:
    """``GET /events``: a page's Server-Sent Events, from its hello until it goes, the feed drops it or closes."""

    def __init__(self, feed: DisplayFeed, *, keepalive_s: float = KEEPALIVE_S, send_timeout_s: float = SEND_TIMEOUT_S):
        self.feed, self.keepalive_s, self.send_timeout_s = feed, keepalive_s, send_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "GET":
            await display_error("display_method_not_allowed", "GET /events only", 405)(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        try:
            client, hello = self.feed.attach(loop.call_soon_threadsafe)
        except DisplayFull as exc:
            await display_error(exc.code, exc.message, 503)(scope, receive, send)
            return
        gone = asyncio.ensure_future(self._watch(receive, client))
        try:
            await self._stream(send, client, hello)
        except TimeoutError:
            log.info("display: a page that took no data for %.0f s was disconnected", self.send_timeout_s)
        finally:
            gone.cancel()
            self.feed.detach(client)

    async def _stream(self, send: Send, client: Client, hello: str) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"x-accel-buffering", b"no"),
            *((k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()),
        ]
        await self._send(send, {"type": "http.response.start", "status": 200, "headers": headers})
        await self._body(send, f"retry: {RETRY_MS}\n\n{hello}")
        while (frames := await client.next(self.keepalive_s)) is not None:
            await self._body(send, "".join(frames) if frames else ": keep-alive\n\n")
        await self._send(send, {"type": "http.response.body", "body": b"", "more_body": False})

    async def _body(self, send: Send, text: str) -> None:
        await self._send(send, {"type": "http.response.body", "body": text.encode(), "more_body": True})

    async def _send(self, send: Send, message: Any) -> None:
        await asyncio.wait_for(send(message), self.send_timeout_s)

    @staticmethod
    async def _watch(receive: Receive, client: Client) -> None:
        """The page went away: its queue closes, so its response ends."""
        while (await receive())["type"] != "http.disconnect":
            pass
        client.close()


def create_display_app(
    feed: DisplayFeed,
    *,
    hosts: ServedHosts,
    activation: Activation | None = None,
    static: Path = STATIC,
    keepalive_s: float = KEEPALIVE_S,
    send_timeout_s: float = SEND_TIMEOUT_S,
) -> HostGuard:
    """The display app over ``feed``; ``activation``: the gate ``/talk`` drives (None: as ``always``, no button)."""

    async def page(request: Request) -> Response:
        return _file(static, "index.html")

    async def static_file(request: Request) -> Response:
        return _file(static, request.path_params["name"])

    async def talk(request: Request) -> Response:
        if activation is None or activation.mode is ActivationMode.ALWAYS:
            message = "the kiosk always listens: no talk button ([activation] mode)"
            return display_error("display_no_button", message, 409)
        action = await _talk_action(request)
        if action is None:
            return display_error("display_bad_request", 'send JSON {"action": "press" | "release" | "trigger"}', 400)
        activation.command(action)  # a repeat or an action the mode ignores is no error: the button may bounce
        return Response(status_code=204, headers=SECURITY_HEADERS)

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/static/{name}", static_file, methods=["GET"]),
        Route("/events", EventStream(feed, keepalive_s=keepalive_s, send_timeout_s=send_timeout_s)),
        Route("/talk", talk, methods=["POST"]),
    ]
    return HostGuard(Starlette(routes=routes), hosts, page="display")


def _file(static: Path, name: str) -> Response:
    """A file of the page's own folder (no subfolder, no hidden file), with the page's security headers."""
    path = static / name
    if not _NAME.fullmatch(name) or not path.is_file():
        return display_error("display_not_found", f"no file {name!r} in the display's page", 404)
    return FileResponse(path, headers=SECURITY_HEADERS)


async def _talk_action(request: Request) -> str | None:
    """The action of a ``/talk`` body (at most :data:`MAX_TALK_BODY` bytes of JSON); None when it is not one."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_TALK_BODY:
            return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    action = data.get("action") if isinstance(data, dict) else None
    return action if action in ACTIONS else None
