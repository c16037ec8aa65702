"""The sections of what the service serves on a socket: its metrics, the admin page and the kiosk's screen, each with
the check of its listen address (loopback, a Unix socket, or a LAN address with a token) and its Host names."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgevoice.config.fields import rng as _rng
from edgevoice.errors import ConfigError


def _check_listen(key: str, value: str) -> None:
    if value and value != "off":
        from edgevoice.config.listen_address import parse_listen

        try:
            parse_listen(value)
        except ConfigError as exc:
            raise ConfigError(exc.message.replace("metrics.listen", key, 1)) from None


@dataclass(frozen=True)
class MetricsConfig:
    listen: str = field(default="", metadata={"check": _check_listen})
    """Serve Prometheus metrics on "127.0.0.1:PORT" / "[::1]:PORT" (loopback only) or "unix:/path"; "off": nowhere;
    empty: the service's socket under systemd ($RUNTIME_DIRECTORY/metrics.sock, /run/edgevoice/metrics.sock), else
    nowhere."""
    textfile: str = ""
    """Or write them to this file after every turn, for node_exporter's textfile collector; empty: off."""


def _check_admin_listen(key: str, value: str) -> None:
    if value and value != "off":
        from edgevoice.config.admin_listen import parse_admin_listen

        parse_admin_listen(value, token=True)  # a LAN address without a token is refused by AdminConfig


def _check_admin_hosts(key: str, value: tuple[str, ...]) -> None:
    from edgevoice.config.admin_listen import check_hosts

    check_hosts(key, value)


@dataclass(frozen=True)
class AdminConfig:
    listen: str = field(default="", metadata={"check": _check_admin_listen})
    """Serve the admin page (docs/admin.md) on "unix:/path" or "127.0.0.1:PORT" / "[::1]:PORT"; on another address
    only with ``token_file``; "off": nowhere; empty: the service's socket under systemd
    ($RUNTIME_DIRECTORY/admin.sock, /run/edgevoice/admin.sock), else nowhere."""
    token_file: str = ""
    """A file holding the token the page asks for (a header ``Authorization: Bearer <token>`` or its login form);
    required for a listen address that is not loopback; empty: no token (loopback and Unix sockets only)."""
    hosts: tuple[str, ...] = field(default=(), metadata={"check": _check_admin_hosts})
    """More host names the page answers to ("kiosk.local", "kiosk.local:8443"), besides the listen address (and the
    loopback names on loopback or a Unix socket); a request naming any other Host is refused (docs/admin.md)."""

    def __post_init__(self) -> None:
        if self.listen and self.listen != "off" and not self.token_file:
            from edgevoice.config.admin_listen import parse_admin_listen

            parse_admin_listen(self.listen, token=False)


def _check_display_listen(key: str, value: str) -> None:
    if value and value != "off":
        from edgevoice.config.listen_address import is_loopback, split_listen

        host, _port = split_listen(key, value)
        if host != "unix" and not is_loopback(host):
            raise ConfigError(
                f"{key} = {value!r}: the display is served on loopback (127.0.0.1:PORT, [::1]:PORT) or a Unix socket "
                "only: the browser showing it runs on the kiosk (docs/display.md)"
            )


@dataclass(frozen=True)
class DisplayConfig:
    """The kiosk's screen: live captions and state as Server-Sent Events, and its page (docs/display.md)."""

    listen: str = field(default="", metadata={"check": _check_display_listen})
    """Serve the display on "127.0.0.1:PORT" / "[::1]:PORT" or "unix:/path"; empty or "off": nowhere (the default:
    nothing of a conversation is shown unless the operator asks)."""
    clear_after_s: float = field(default=20.0, metadata=_rng(1.0, 600.0))
    """Seconds after an exchange ends (or last changed) before its words leave the screen and the server."""
    max_clients: int = field(default=16, metadata=_rng(1, 256))
    """Pages following the stream at once; one more is refused (HTTP 503, ``display_full``)."""
    examples: int = field(default=4, metadata=_rng(0, 20))
    """Example questions on the idle screen, taken from the knowledge's questions."""
    hosts: tuple[str, ...] = field(default=(), metadata={"check": _check_admin_hosts})
    """More host names the display answers to, as ``[admin] hosts``; any other Host is refused (DNS rebinding)."""


@dataclass(frozen=True)
class ReviewConfig:
    """The review inbox on the admin page: the questions the kiosk refused, asked again or answered with a low
    margin, kept as text for the operator (docs/admin.md, "Review inbox")."""

    enabled: bool = False
    """Keep such questions (text only, numbers masked); off, the default: nothing of a visitor's words is kept."""
    keep_days: int = field(default=14, metadata=_rng(1, 365))
    """An item is deleted this many days after it was last asked."""
    max_items: int = field(default=500, metadata=_rng(1, 10000))
    """At most this many items are kept; the oldest go first."""
    low_margin: float = field(default=0.08, metadata=_rng(0.0, 1.0))
    """An answered question goes to the inbox when its best entry's ranking score (cosine similarity plus a quarter
    of its word coverage) leads the second's by less than this (semantic matching only; 0: never)."""
    dir: str = ""
    """Where its file is kept; empty: the service's state directory ``/var/lib/edgevoice/review``
    (``$STATE_DIRECTORY``), else ``$XDG_STATE_HOME/edgevoice/review`` (``~/.local/state/edgevoice/review``)."""
