"""The webhook sink: each notification POSTed as its JSON body, signed with HMAC-SHA256 over
``<timestamp>.<body>`` with a secret read from a file, its id in a header so that the receiver dedupes a message
sent twice (at least once: a restart in the middle of a try sends it again). Stdlib HTTP, no redirects followed and
no proxy taken from the environment: the notification goes where the configuration says, or nowhere."""

from __future__ import annotations

import hashlib
import hmac
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from edgevoice.act.delivery import DeliveryFailed
from edgevoice.act.outbox import Row
from edgevoice.errors import ConfigError

__all__ = ["SIGNATURE_HEADER", "WebhookSink", "read_secret", "signature"]

SIGNATURE_HEADER = "X-Edgevoice-Signature"
ID_HEADER = "X-Edgevoice-Id"
TIMESTAMP_HEADER = "X-Edgevoice-Timestamp"
_RETRYABLE = frozenset({408, 425, 429})
"""4xx answers that are worth another try (a timeout, too early, too many); any other 4xx refuses the message."""


def read_secret(path: str, key: str) -> bytes:
    """The secret in the file ``path`` (surrounding whitespace dropped), named by config ``key`` in errors."""
    try:
        secret = Path(path).expanduser().read_bytes().strip()
    except OSError as exc:
        raise ConfigError(f"{key} = {path!r}: cannot read it ({exc.strerror})", key=key) from exc
    if len(secret) < 16:
        raise ConfigError(f"{key} = {path!r}: the secret must be at least 16 bytes", key=key)
    return secret


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """The header value a receiver recomputes: ``sha256=`` and the hex HMAC-SHA256 of ``<timestamp>.<body>``."""
    return "sha256=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class WebhookSink:
    """POSTs each row's body to ``url`` (timeout ``timeout_s``): a 2xx answer delivers it; a 5xx, 408, 425, 429,
    timeout or refused connection is tried again later; any other answer refuses it for good."""

    def __init__(self, url: str, secret: bytes, *, timeout_s: float, wall: Callable[[], float]) -> None:
        self.url, self._secret, self.timeout_s, self.wall = url, secret, timeout_s, wall
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)

    def send(self, row: Row) -> None:
        body = row.body.encode()
        timestamp = str(int(self.wall()))
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "User-Agent": "edgevoice",
                ID_HEADER: row.id,
                TIMESTAMP_HEADER: timestamp,
                SIGNATURE_HEADER: signature(self._secret, timestamp, body),
            },
        )
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                response.read(4096)
                status = response.status
        except urllib.error.HTTPError as exc:
            exc.close()
            raise DeliveryFailed(
                f"HTTP {exc.code}", permanent=300 <= exc.code < 500 and exc.code not in _RETRYABLE
            ) from None
        except (urllib.error.URLError, OSError) as exc:  # refused, unreachable, timed out, reset
            reason = getattr(exc, "reason", exc)
            raise DeliveryFailed(f"no answer: {reason}") from None
        if not 200 <= status < 300:
            raise DeliveryFailed(f"HTTP {status}", permanent=300 <= status < 500 and status not in _RETRYABLE)

    def close(self) -> None:
        pass
