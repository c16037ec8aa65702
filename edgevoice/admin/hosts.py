"""The Host names the admin page answers to, and the guard that refuses every other before a handler runs.

DNS rebinding: a page on a name the attacker controls (``attacker.example``) has that name re-pointed at
127.0.0.1, and the visitor's browser then sends it to the admin page as a same-origin request with ``Host:
attacker.example:PORT`` (and a matching ``Origin``). Only a Host the page serves is proof that the browser meant this
page, so a request naming any other is refused, whatever route it asks for. A change (any method but GET, HEAD and
OPTIONS) from a browser must also come from a page of the admin page itself: an ``Origin`` that is a served name,
on the same host and port as the request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from edgevoice.admin.api_errors import error_response
from edgevoice.config.admin_listen import canonical_host, parse_admin_listen, parse_authority, parse_host_entry
from edgevoice.config.listen_address import is_loopback

__all__ = ["LOOPBACK_NAMES", "HostGuard", "ServedHosts"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""The names a browser on the kiosk uses for its own loopback; no one else can point them anywhere."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class ServedHosts:
    """Each served name with the ports a request may name it with (None: any port; a Host without a port is taken
    for any served name, as clients and proxies leave out the scheme's default port)."""

    ports: Mapping[str, frozenset[int] | None]

    @classmethod
    def for_listen(cls, listen: str, declared: Iterable[str] = ()) -> ServedHosts:
        """The names served on ``listen`` ("unix:/path" or "host:port", as ``[admin] listen``) and the ``declared``
        ones (``[admin] hosts``).

        On loopback (or a wildcard address, which includes loopback): the loopback names, on the listen port. On
        another address: that address only. On a Unix socket: the loopback names on any port (an SSH tunnel's local
        port is the operator's choice). A declared name without a port: on the listen port (any, on a socket)."""
        host, port = parse_admin_listen(listen, token=True)
        names: set[str] = set()
        listen_port: int | None = None
        if host == "unix":
            names.update(LOOPBACK_NAMES)
        else:
            listen_port = int(port)
            wildcard = host in ("0.0.0.0", "::")
            if wildcard or is_loopback(host):
                names.update(LOOPBACK_NAMES)
            if not wildcard:
                names.add(canonical_host(host) or host.lower())
        ports: dict[str, frozenset[int] | None] = {
            name: None if listen_port is None else frozenset({listen_port}) for name in names
        }
        for entry in declared:
            name, given = parse_host_entry("admin.hosts", entry)
            wanted = given if given is not None else listen_port
            before = ports.get(name, frozenset())
            if wanted is None or before is None:
                ports[name] = None
            else:
                ports[name] = before | {wanted}
        return cls(ports)

    def allows(self, authority: str) -> bool:
        """Whether a Host header's value names this page."""
        parsed = parse_authority(authority)
        if parsed is None or parsed[0] not in self.ports:
            return False
        allowed = self.ports[parsed[0]]
        return parsed[1] is None or allowed is None or parsed[1] in allowed

    def same_origin(self, origin: str, authority: str) -> bool:
        """Whether a browser's ``Origin`` is a page of this app: http(s), a served name, the request's own host and
        port (``authority``: its Host, already allowed)."""
        parts = urlsplit(origin)
        if parts.scheme not in _DEFAULT_PORTS or parts.path or parts.query or not parts.netloc:
            return False
        mine, theirs = parse_authority(authority), parse_authority(parts.netloc)
        if mine is None or theirs is None or not self.allows(parts.netloc):
            return False
        default = _DEFAULT_PORTS[parts.scheme]
        return (mine[0], mine[1] or default) == (theirs[0], theirs[1] or default)

    def describe(self) -> str:
        """The served names for an error message: ``127.0.0.1:8080, localhost:8080, ...``."""
        out = []
        for name, ports in sorted(self.ports.items()):
            shown = f"[{name}]" if ":" in name else name
            out.extend([f"{shown}:*"] if ports is None else [f"{shown}:{p}" for p in sorted(ports)])
        return ", ".join(out)


class HostGuard:
    """ASGI middleware: a request whose Host is not served is refused (421, or 400 when it has no single valid
    Host), and a change whose ``Origin`` is not this page is refused (403), before any route is looked up."""

    def __init__(self, app: ASGIApp, hosts: ServedHosts, *, page: str = "admin") -> None:
        """``page``: whose guard it is ("admin", "display"), as its refusals name it and its ``[page] hosts``."""
        self.app = app
        self.hosts = hosts
        self.page = page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await error_response(*refusal)(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[str, str] | None:
        """(code, message) of the refusal; None when the request may go on."""
        hosts = [v.decode("latin-1") for k, v in scope["headers"] if k == b"host"]
        if len(hosts) != 1 or parse_authority(hosts[0]) is None:
            return "admin_host_invalid", "the request needs exactly one Host header holding a host name or address"
        if not self.hosts.allows(hosts[0]):
            return (
                "admin_host_not_served",
                f"this {self.page} page does not serve the host {hosts[0]!r} (it serves {self.hosts.describe()}; "
                f"[{self.page}] hosts declares more, docs/{self.page}.md)",
            )
        origins = [v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"]
        if scope.get("method", "GET") in SAFE_METHODS or not origins:
            return None  # reading, or a script or curl (browsers send Origin with every change)
        if len(origins) == 1 and self.hosts.same_origin(origins[0], hosts[0]):
            return None
        return "admin_cross_site", f"a change asked by a page of another site ({origins[0]!r}) is refused"
