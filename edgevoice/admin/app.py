"""The admin web app (Starlette): status, the last turns, the knowledge editor with its reload, the self-test and
a trigger, over a narrow :class:`Appliance` face of the running kiosk (a ten-line fake in the tests).

Every request must name a host the page serves, and a change asked by a browser must come from a page of it
(:class:`~edgevoice.admin.hosts.HostGuard`, before any route): on loopback without a token, a page on any site the
kiosk's browser opens could otherwise post a new knowledge file, directly or through a name re-pointed at
127.0.0.1. With a token (``[admin] token_file``) every route but the login form asks for it: ``Authorization:
Bearer <token>`` or the cookie the login form sets; both are compared in constant time. Errors under ``/api/`` are
``{"error": {"code", "message"}}`` (:mod:`edgevoice.admin.api_errors`).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from edgevoice.admin import pages
from edgevoice.admin.api_errors import (
    error_response,
    handle_exception,
    handle_http_exception,
    kiosk_error,
    status_of,
)
from edgevoice.admin.hosts import HostGuard, ServedHosts
from edgevoice.admin.inbox import Inbox
from edgevoice.admin.inbox_page import inbox_section
from edgevoice.admin.knowledge_file import content_sha256, decode_text, save_and_reload
from edgevoice.admin.selftest_runner import SelftestRunner
from edgevoice.errors import EdgeVoiceError
from edgevoice.kiosk.knowledge import MAX_KNOWLEDGE_BYTES
from edgevoice.trace import STAGE_NAMES

if TYPE_CHECKING:
    from edgevoice.review.store import ReviewStore

__all__ = ["COOKIE", "Appliance", "create_app"]

COOKIE = "edgevoice_admin"
MAX_FORM_BYTES = 4 * MAX_KNOWLEDGE_BYTES
"""A form larger than this is refused unread (the knowledge, url-encoded, with room to spare)."""
DONE = {
    "attach": "Attached and reloaded in {reload_ms} ms: {entries} entries.",
    "add": "Added and reloaded in {reload_ms} ms: {entries} entries.",
    "settle": "Marked rightly refused: it will not be kept again.",
    "delete": "Deleted.",
    "clear": "Deleted all: {deleted} questions.",
}
"""What the page says when an inbox action is done (the action's JSON fills it in)."""


def _text_field(name: str, value: object) -> str:
    """A form's field (bytes as sent) or a JSON body's as text; ``review_invalid`` when it is not UTF-8 text."""
    if isinstance(value, str):
        return value
    if not isinstance(value, bytes):
        raise EdgeVoiceError(f"the field {name!r} is not text", code="review_invalid")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise EdgeVoiceError(f"the field {name!r} is not UTF-8 text", code="review_invalid") from None


class Appliance(Protocol):
    """What the admin page reads from and asks of the running kiosk."""

    @property
    def log_transcripts(self) -> bool: ...

    @property
    def knowledge_path(self) -> Path | None:
        """The knowledge file (None: the knowledge is written in the configuration and cannot be edited here)."""
        ...

    def status(self) -> Mapping[str, object]:
        """Flat values (ready, uptime ...), and the tables ``models`` (role → name, sha256) and ``xruns``."""
        ...

    def turns(self) -> Sequence[Mapping[str, object]]:
        """The last turns' records (oldest first), as `edgevoice run --json` prints them."""
        ...

    def knowledge_text(self) -> str: ...

    def reload_knowledge(self) -> object:
        """Rebuild the kiosk from the knowledge file and swap it in between two turns; raises on failure."""
        ...

    def trigger(self) -> bool:
        """Start a turn as if activated; False when the activation mode has no trigger."""
        ...


def create_app(
    appliance: Appliance,
    selftest: SelftestRunner,
    *,
    hosts: ServedHosts,
    token: str | None = None,
    review: ReviewStore | None = None,
    outbox: Callable[[], Mapping[str, object]] | None = None,
) -> Starlette:
    """The admin app answering for ``hosts`` only; ``token``: the one every request must bring (None: none, for
    loopback and Unix sockets); ``review``: the review inbox's store (None: ``[review]`` is off)."""
    saving = asyncio.Lock()  # saves wait their turn here, not on a worker thread the status page needs
    inbox = Inbox(review, appliance, time.perf_counter)

    def authorized(request: Request) -> bool:
        if token is None:
            return True
        header = request.headers.get("authorization", "")
        given = header[7:] if header[:7].lower() == "bearer " else request.cookies.get(COOKIE, "")
        return hmac.compare_digest(given.encode(), token.encode())

    def guarded(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def check(request: Request) -> Response:
            if authorized(request):
                return await endpoint(request)
            if request.url.path.startswith("/api/"):
                return error_response("admin_token_needed", "a token is needed (Authorization: Bearer <token>)")
            return RedirectResponse("/login", status_code=303)

        return check

    def visible_turns() -> list[dict[str, object]]:
        hide = not appliance.log_transcripts
        return [{**t, "transcript": None, "reply": None} if hide else dict(t) for t in appliance.turns()]

    def page(
        message: str = "",
        error: bool = False,
        text: str | None = None,
        status_code: int = 200,
        inbox_message: str = "",
        base: str | None = None,
    ) -> Response:
        """The page; ``text``: the editor's text (default: the file's), ``base``: the version of the file it was
        made from (:func:`content_sha256`; default: the file's now), sent back with it by the form."""
        path = appliance.knowledge_path
        knowledge = appliance.knowledge_text() if text is None else text
        if base is None and path is not None:
            try:
                base = content_sha256(path.read_bytes())
            except OSError:
                base = ""
        sections = [
            pages.status_section(appliance.status()),
            pages.turns_section(visible_turns(), STAGE_NAMES),
            pages.knowledge_section(
                None if path is None else str(path),
                knowledge,
                message,
                error,
                base or "",
            ),
            pages.selftest_section(selftest.state().as_json()),
        ]
        if inbox.enabled:
            assert review is not None
            current = inbox.current_entries()
            choices = [(e.key, e.question or e.answer) for e in current]
            listing = inbox.listing(current)
            sections.append(
                inbox_section(listing, choices, keep_days=review.keep_days, message=inbox_message, error=error)
            )
        if outbox is not None:  # [actions] notifications: what waits and what failed (docs/actions.md)
            from edgevoice.admin.outbox_page import outbox_section

            sections.append(outbox_section(outbox()))
        return HTMLResponse(pages.admin_page("edgevoice admin", sections), status_code=status_code)

    async def bounded_body(request: Request) -> bytes | None:
        """The request's body; None when it is larger than :data:`MAX_FORM_BYTES` (read no further)."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_FORM_BYTES:
                return None
        return b"".join(chunks)

    async def form(request: Request) -> dict[str, bytes] | None:
        """The url-encoded form's fields as the bytes sent (decoded by whoever reads one: the knowledge is refused
        when it is not UTF-8); None when the form is larger than :data:`MAX_FORM_BYTES` (read no further)."""
        body = await bounded_body(request)
        if body is None:
            return None
        fields = parse_qsl(body.decode("latin-1"), keep_blank_values=True, encoding="latin-1")  # byte for byte
        return {k: v.encode("latin-1") for k, v in reversed(fields)}  # the first of a repeated field

    too_large = PlainTextResponse("the form is too large", status_code=413)

    def save(data: bytes, base: str | None = None) -> dict[str, object]:
        """Decode, write and reload (:class:`EdgeVoiceError` naming the file and line); the outcome as JSON.
        ``base``: the version of the file the text was made from; another is not written over
        (``knowledge_changed_meanwhile``: a review action or another operator saved meanwhile)."""
        path = appliance.knowledge_path
        if path is None:
            raise EdgeVoiceError(
                "no [kiosk] knowledge_file is configured: the knowledge is not editable", code="knowledge_not_editable"
            )
        text = decode_text(data, f"kiosk.knowledge_file = {str(path)!r}")
        saved = save_and_reload(path, text, appliance.reload_knowledge, time.perf_counter, expected_sha256=base)
        return {
            "ok": True,
            "entries": saved.entries,
            "warnings": list(saved.warnings),
            "reload_ms": round(saved.reload_ms, 1),
        }

    async def save_in_turn(data: bytes, base: str | None = None) -> dict[str, object] | EdgeVoiceError:
        """:func:`save`, one at a time, on a worker thread; an error returned."""
        return await in_turn(save, data, base)

    async def in_turn(action: Callable[..., dict[str, object]], *args: Any) -> dict[str, object] | EdgeVoiceError:
        """``action`` (a save, an inbox action), one at a time, on a worker thread; an error returned."""
        async with saving:
            try:
                return await run_in_threadpool(action, *args)
            except EdgeVoiceError as exc:
                return exc

    # -- HTML -------------------------------------------------------------------------------------------------------
    async def index(request: Request) -> Response:
        return await run_in_threadpool(page)

    async def knowledge_form(request: Request) -> Response:
        fields = await form(request)
        if fields is None:
            return too_large
        data = fields.get("text", b"")
        base = fields.get("sha256", b"").decode("latin-1") or None  # a form without one: written whatever is there
        result = await save_in_turn(data, base)
        if isinstance(result, EdgeVoiceError):
            shown = data.decode("utf-8", "replace")  # for the editor only: nothing was written
            message = f"Not saved: {result.message}"
            if result.code == "knowledge_changed_meanwhile":  # saving the text again now replaces that change
                message += ". Your text is kept below; saving it again replaces the other change"
                base = None
            return await run_in_threadpool(lambda: page(message, True, shown, status_of(result), base=base))
        warnings = "; ".join(map(str, result["warnings"]))  # type: ignore[call-overload]
        message = f"Saved and reloaded in {result['reload_ms']} ms: {result['entries']} entries." + (
            f" Warnings: {warnings}" if warnings else ""
        )
        return await run_in_threadpool(page, message)

    async def inbox_form(request: Request) -> Response:
        fields = await form(request)
        if fields is None:
            return too_large
        action, item = request.path_params.get("action", "clear"), request.path_params.get("item_id")
        result = await in_turn(inbox_action, action, item, fields)
        if isinstance(result, EdgeVoiceError):
            shown = f"Not done: {result.message}"
            return await run_in_threadpool(lambda: page(error=True, status_code=status_of(result), inbox_message=shown))
        return await run_in_threadpool(lambda: page(inbox_message=DONE[action].format(**result)))

    def inbox_action(action: str, item: int | None, fields: Mapping[str, object]) -> dict[str, object]:
        """One action of the inbox (``fields``: a form's or a JSON body's)."""
        text = {k: _text_field(k, v) for k, v in fields.items()}
        if action == "clear":
            return inbox.clear()
        assert item is not None
        if action == "attach":
            key = text.get("key", "")
            return inbox.attach(item, text.get("other", "") if key == "other" else key, text.get("question"))
        if action == "add":
            return inbox.add(item, text.get("answer", ""), text.get("question"))
        if action == "settle":
            return inbox.settle(item)
        if action == "delete":
            return inbox.delete(item)
        raise HTTPException(404)

    async def selftest_form(request: Request) -> Response:
        selftest.start()
        return RedirectResponse("/#selftest", status_code=303)

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return HTMLResponse(pages.login_page(failed=False))
        fields = await form(request)
        if fields is None:
            return too_large
        given = fields.get("token", b"")
        if token is None or hmac.compare_digest(given, token.encode()):
            response = RedirectResponse("/", status_code=303)
            if token is not None:
                response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
            return response
        return HTMLResponse(pages.login_page(failed=True), status_code=401)

    # -- JSON -------------------------------------------------------------------------------------------------------
    async def api_status(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(lambda: dict(appliance.status())))

    async def api_outbox(request: Request) -> Response:
        if outbox is None:
            return error_response("admin_not_found", "no notifications are configured ([actions], docs/actions.md)")
        return JSONResponse(await run_in_threadpool(lambda: dict(outbox())))

    async def api_turns(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(visible_turns))

    async def api_knowledge(request: Request) -> Response:
        if request.method == "GET":
            return PlainTextResponse(await run_in_threadpool(appliance.knowledge_text))
        body = await bounded_body(request)
        if body is None:
            return error_response("admin_too_large", f"the knowledge sent is over {MAX_FORM_BYTES:,} bytes")
        base = request.headers.get("if-match", "").strip().strip('"') or None  # the version the text was made from
        result = await save_in_turn(body, base)
        return kiosk_error(result) if isinstance(result, EdgeVoiceError) else JSONResponse(result)

    async def api_selftest(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse(selftest.state().as_json())
        if not selftest.start():
            return error_response("selftest_running", "a self-test is running; one runs at a time")
        return JSONResponse(selftest.state().as_json(), status_code=202)

    async def api_review(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse(await run_in_threadpool(inbox.listing))
        return await api_review_action(request)

    async def api_review_action(request: Request) -> Response:
        item, action = request.path_params.get("item_id"), request.path_params.get("action")
        if action is None:  # DELETE /api/review/N: that item; DELETE /api/review: all
            action = "clear" if item is None else "delete"
        body = await bounded_body(request)
        if body is None:
            return error_response("admin_too_large", f"the request is over {MAX_FORM_BYTES:,} bytes")
        try:
            fields = json.loads(body) if body.strip() else {}
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error_response("review_invalid", "the body is not a JSON object")
        if not isinstance(fields, dict) or action not in DONE:
            return error_response("review_invalid" if action in DONE else "admin_not_found", f"{action}: not an action")
        result = await in_turn(inbox_action, action, item, fields)
        return kiosk_error(result) if isinstance(result, EdgeVoiceError) else JSONResponse(result)

    async def api_trigger(request: Request) -> Response:
        if await run_in_threadpool(appliance.trigger):
            return JSONResponse({"ok": True})
        return error_response("trigger_unavailable", "the activation mode takes no trigger ([activation] mode)")

    routes = [
        Route("/", guarded(index)),
        Route("/knowledge", guarded(knowledge_form), methods=["POST"]),
        Route("/selftest", guarded(selftest_form), methods=["POST"]),
        Route("/inbox/clear", guarded(inbox_form), methods=["POST"]),
        Route("/inbox/{item_id:int}/{action}", guarded(inbox_form), methods=["POST"]),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/api/status", guarded(api_status)),
        Route("/api/turns", guarded(api_turns)),
        Route("/api/outbox", guarded(api_outbox)),
        Route("/api/knowledge", guarded(api_knowledge), methods=["GET", "PUT"]),
        Route("/api/selftest", guarded(api_selftest), methods=["GET", "POST"]),
        Route("/api/trigger", guarded(api_trigger), methods=["POST"]),
        Route("/api/review", guarded(api_review), methods=["GET", "DELETE"]),
        Route("/api/review/{item_id:int}", guarded(api_review_action), methods=["DELETE"]),
        Route("/api/review/{item_id:int}/{action}", guarded(api_review_action), methods=["POST"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(HostGuard, hosts=hosts)],
        exception_handlers={
            HTTPException: handle_http_exception,
            EdgeVoiceError: handle_exception,
            Exception: handle_exception,
        },
    )
