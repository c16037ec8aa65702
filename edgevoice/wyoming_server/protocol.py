"""Wyoming events read with bounds (the ``wyoming`` package's reader takes any length a peer announces): a header
line, its data and its payload each have a limit, and a peer past one is told why (:class:`Refused`) and closed."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass

from wyoming.error import Error
from wyoming.event import Event

__all__ = ["LINGER_S", "Limits", "Refused", "close_lingering", "read_event", "refusal"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The largest header line, data and payload one event may have (bytes)."""

    line: int = 16 * 1024
    data: int = 256 * 1024
    payload: int = 1024 * 1024


class Refused(Exception):
    """A request the server will not serve: ``code`` and the message go back to the peer as an ``error`` event."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


def refusal(exc: Refused) -> Event:
    return Error(text=str(exc), code=exc.code).event()


def _length(header: dict[str, object], key: str, limit: int) -> int:
    value = header.get(key) or 0
    if not isinstance(value, int) or value < 0:
        raise Refused(code="wyoming_bad_event", message=f"{key} must be a non-negative integer")
    if value > limit:
        raise Refused(code="wyoming_too_large", message=f"{key} {value} is over the limit of {limit} bytes")
    return value


async def read_event(reader: asyncio.StreamReader, limits: Limits) -> Event | None:
    """The next event from ``reader``; None at the end of the stream. Raises :class:`Refused` for an event past
    ``limits`` or not in the protocol's form (the reader's own limit bounds the line: pass ``limits.line`` to
    ``asyncio.start_server``)."""
    try:
        line = await reader.readline()
    except ValueError:  # asyncio's LimitOverrunError: the line is longer than the reader's limit
        raise Refused(
            code="wyoming_too_large", message=f"an event's header line is over the limit of {limits.line} bytes"
        ) from None
    if not line:
        return None
    try:
        header = json.loads(line)
    except ValueError:
        raise Refused(code="wyoming_bad_event", message="an event's header line is not JSON") from None
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise Refused(code="wyoming_bad_event", message="an event's header must be a JSON object with a 'type'")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise Refused(code="wyoming_bad_event", message="an event's 'data' must be a JSON object")
    data_length = _length(header, "data_length", limits.data)
    payload_length = _length(header, "payload_length", limits.payload)
    if data_length:
        try:
            more = json.loads(await reader.readexactly(data_length))
        except ValueError:
            raise Refused(code="wyoming_bad_event", message="an event's data is not JSON") from None
        if not isinstance(more, dict):
            raise Refused(code="wyoming_bad_event", message="an event's data must be a JSON object")
        data.update(more)
    payload = await reader.readexactly(payload_length) if payload_length else None
    return Event(type=header["type"], data=data, payload=payload)


LINGER_S = 1.0
"""How long a refused client's last bytes are read and dropped before its connection is closed."""


async def close_lingering(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Close a refused client's connection without resetting it: stop writing, then read and drop what it still
    sends for up to :data:`LINGER_S`, so the kernel does not answer its unread bytes with a reset that loses the
    refusal (an HTTP server's lingering close)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LINGER_S
    with contextlib.suppress(ConnectionError, OSError, TimeoutError, asyncio.IncompleteReadError):
        if writer.can_write_eof():
            writer.write_eof()
        while (left := deadline - loop.time()) > 0:
            if not await asyncio.wait_for(reader.read(65536), left):
                break
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
