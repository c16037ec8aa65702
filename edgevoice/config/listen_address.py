"""Where a ``listen`` setting serves (``[metrics] listen``, and ``[admin] listen`` through
:mod:`edgevoice.config.admin_listen`): ``"unix:/path"`` or ``"host:port"``, parsed and checked at load."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Mapping

from edgevoice.errors import ConfigError

__all__ = ["METRICS_SOCKET", "effective_listen", "is_loopback", "parse_listen", "split_listen"]

METRICS_SOCKET = "metrics.sock"
"""The socket's name in the service's ``RuntimeDirectory=`` (``/run/edgevoice/metrics.sock``)."""


def effective_listen(listen: str, environ: Mapping[str, str] = os.environ, socket_name: str = METRICS_SOCKET) -> str:
    """Where a ``listen`` setting serves: as configured; ``"off"``: nowhere (""); empty: under the service, the Unix
    socket ``socket_name`` in its ``RuntimeDirectory=`` (``$RUNTIME_DIRECTORY``, the first when systemd lists
    several), the one kind of endpoint its sandbox allows (``PrivateNetwork=yes``, ``RestrictAddressFamilies=AF_UNIX``);
    elsewhere nowhere."""
    if listen == "off":
        return ""
    if listen:
        return listen
    runtime = environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    return f"unix:{runtime.rstrip('/')}/{socket_name}" if runtime.startswith("/") else ""


def split_listen(key: str, value: str) -> tuple[str, str | int]:
    """``"unix:/path"`` → ("unix", path); ``"host:port"`` → (host, port), brackets taken off an IPv6 host; the
    errors name ``key``. Whether the host may be off loopback is the caller's rule."""
    if value.startswith("unix:"):
        path = value[5:]
        if not path.startswith("/"):
            raise ConfigError(f"{key} = {value!r}: a Unix socket needs an absolute path")
        return "unix", path
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{key} = {value!r}: must be 'HOST:PORT' or 'unix:/path'")
    return host.removeprefix("[").removesuffix("]"), int(port)


def parse_listen(value: str) -> tuple[str, str | int]:
    """``"unix:/path"`` → ("unix", path); ``"host:port"`` → (host, port) for a loopback host only."""
    host, port = split_listen("metrics.listen", value)
    if host != "unix" and not is_loopback(host):
        raise ConfigError(
            f"metrics.listen = {value!r}: metrics are served on loopback only (127.0.0.1 or ::1), or on a Unix "
            "socket; use a reverse proxy or node_exporter's textfile collector to publish them"
        )
    return host, port


def is_loopback(host: str) -> bool:
    """An address literal that is loopback, or a name that resolves (here, now) to loopback addresses only."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if not host:
        return False
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    return bool(found) and all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in found)
