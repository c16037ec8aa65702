"""The admin page's error responses: ``{"error": {"code": ..., "message": ...}}``, as ``--json`` prints a command's
error (:mod:`edgevoice.cli_json`), with the HTTP status each code is answered with.

The codes are stable (scripts key on them, not on the message); docs/admin.md lists them. A failure of the kiosk
itself (invalid knowledge, a reload that could not happen) keeps its :class:`~edgevoice.errors.EdgeVoiceError`
code.
"""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from edgevoice.errors import EdgeVoiceError

__all__ = [
    "ADMIN_CODES",
    "KIOSK_STATUS",
    "error_response",
    "handle_exception",
    "handle_http_exception",
    "kiosk_error",
    "status_of",
]

ADMIN_CODES: dict[str, int] = {
    "admin_host_invalid": 400,
    "admin_host_not_served": 421,
    "admin_cross_site": 403,
    "admin_token_needed": 401,
    "admin_too_large": 413,
    "admin_not_found": 404,
    "admin_method_not_allowed": 405,
    "admin_internal": 500,
    "knowledge_not_editable": 409,
    "selftest_running": 409,
    "trigger_unavailable": 409,
    "review_off": 409,
    "review_gone": 404,
    "review_invalid": 422,
}
"""Each code of the admin page's own errors and its HTTP status."""

KIOSK_STATUS: dict[str, int] = {"kiosk_busy": 503, "knowledge_entry_changed": 409, "knowledge_changed_meanwhile": 409}
"""The status of an :class:`~edgevoice.errors.EdgeVoiceError` from the kiosk, by code; any other: 422 (the text sent
cannot be used)."""

log = logging.getLogger(__name__)

_FROM_HTTP = {404: "admin_not_found", 405: "admin_method_not_allowed", 413: "admin_too_large"}


def error_response(code: str, message: str, status: int | None = None) -> JSONResponse:
    """The JSON error; its status from :data:`ADMIN_CODES` unless given."""
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status or ADMIN_CODES[code])


def status_of(exc: EdgeVoiceError) -> int:
    """The HTTP status of an error met while doing what a request asked."""
    return ADMIN_CODES.get(exc.code) or KIOSK_STATUS.get(exc.code, 422)


def kiosk_error(exc: EdgeVoiceError) -> JSONResponse:
    """An error met while doing what a request asked (its code kept) as the admin page answers it."""
    return error_response(exc.code, exc.message, status_of(exc))


async def handle_http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, a method the route does not take): JSON under ``/api/``."""
    assert isinstance(exc, HTTPException)
    if not request.url.path.startswith("/api/"):
        return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)
    code = _FROM_HTTP.get(exc.status_code, "admin_internal")
    return error_response(code, f"{request.method} {request.url.path}: {exc.detail}", exc.status_code)


async def handle_exception(request: Request, exc: Exception) -> Response:
    """An error nobody caught (it is logged by the server as well): JSON under ``/api/``, its code when it has one."""
    if isinstance(exc, EdgeVoiceError):  # handled here, so not logged by the server
        log.warning("admin page: %s %s: %s", request.method, request.url.path, exc)
        message = f"{request.method} {request.url.path}: [{exc.code}] {exc.message}"
        if request.url.path.startswith("/api/"):
            return error_response(exc.code, exc.message, 500)
        return PlainTextResponse(message, status_code=500)
    if request.url.path.startswith("/api/"):
        return error_response("admin_internal", f"{request.method} {request.url.path}: {type(exc).__name__}")
    return PlainTextResponse("Internal Server Error", status_code=500)
