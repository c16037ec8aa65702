"""Where the admin page is served: ``[admin] listen`` parsed and checked like ``[metrics] listen``, except that an
address off loopback is allowed with a token (``[admin] token_file``)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from edgevoice.errors import ConfigError
from edgevoice.live.metrics import effective_listen, is_loopback, split_listen

SERVICE_SOCKET = "admin.sock"
"""The socket's name in the service's ``RuntimeDirectory=`` (``/run/edgevoice/admin.sock``)."""


def effective_admin_listen(listen: str, environ: Mapping[str, str] = os.environ) -> str:
    """Where ``[admin] listen`` serves: as configured; ``"off"``: nowhere (""); empty: under the service, a Unix
    socket in its ``RuntimeDirectory=`` (the only endpoint its sandbox allows); elsewhere nowhere."""
    return effective_listen(listen, environ, SERVICE_SOCKET)


def parse_admin_listen(value: str, *, token: bool) -> tuple[str, str | int]:
    """``"unix:/path"`` → ("unix", path); ``"host:port"`` → (host, port), a host off loopback only with ``token``
    (a name counts as loopback when it resolves to loopback addresses only)."""
    host, port = split_listen("admin.listen", value)
    if host == "unix":
        return host, port
    if not host:
        raise ConfigError(f"admin.listen = {value!r}: name the address to listen on (127.0.0.1 for loopback)")
    if not token and not is_loopback(host):
        raise ConfigError(
            f"admin.listen = {value!r}: off loopback the admin page needs a token; set admin.token_file "
            "(docs/admin.md), or listen on 127.0.0.1 or a Unix socket"
        )
    return host, port


def read_token(path: str) -> str:
    """The token in ``path`` (its first line, stripped); refused when unreadable, empty or too short to guess."""
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as fh:
            token = fh.readline(1024).strip()
    except OSError as exc:
        raise ConfigError(f"admin.token_file = {path!r}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"admin.token_file = {path!r}: not UTF-8 text") from None
    if len(token) < 16:
        raise ConfigError(f"admin.token_file = {path!r}: the token must have at least 16 characters")
    return token
