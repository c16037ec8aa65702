"""Where the admin page is served: ``[admin] listen`` parsed and checked like ``[metrics] listen``, except that an
address off loopback is allowed with a token (``[admin] token_file``); the host names of ``[admin] hosts`` and of a
request's Host header, parsed."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping

from edgevoice.config.listen_address import effective_listen, is_loopback, split_listen
from edgevoice.errors import ConfigError

_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")

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


def canonical_host(host: str) -> str | None:
    """``host`` as compared: lower case, an IP address in its canonical form, a trailing dot dropped; None when it
    is neither an IP address nor a DNS name."""
    host = host.lower().removesuffix(".")
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in host.split(".")):
        return None
    return host


def parse_authority(authority: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6]:port`` (as in a Host header) → (name, port or None); None when malformed."""
    if authority.startswith("["):
        v6, sep, rest = authority[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            return None
        host, port = v6, rest[1:] if rest else None
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    else:
        host, sep, port_text = authority.partition(":")
        port = port_text if sep else None
    if port is not None and not (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536):
        return None
    name = canonical_host(host)
    return None if name is None else (name, None if port is None else int(port))


def parse_host_entry(key: str, entry: str) -> tuple[str, int | None]:
    """One name of ``[admin] hosts``: ``"kiosk.local"``, ``"kiosk.local:8443"``, ``"192.168.1.20"``, ``"fe80::1"`` or
    ``"[fe80::1]:8080"``; :class:`ConfigError` naming ``key`` for anything else (a URL, a wildcard, a path)."""
    try:
        ipaddress.IPv6Address(entry)
        entry = f"[{entry}]"  # a bare IPv6 address: its colons are not a port
    except ValueError:
        pass
    parsed = parse_authority(entry) if entry.strip() == entry else None
    if parsed is None:
        raise ConfigError(
            f"{key}: {entry!r} is not a host name or address (expected a name as a browser's address bar shows it, "
            "'kiosk.local', '192.168.1.20', with ':PORT' if it differs from the listen port; no scheme, path or "
            "wildcard)"
        )
    return parsed


def check_hosts(key: str, entries: tuple[str, ...]) -> None:
    """Refuse, at load, an entry of ``[admin] hosts`` that is not a host name or address."""
    for entry in entries:
        parse_host_entry(key, entry)
