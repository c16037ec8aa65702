"""The ``[wyoming]`` section: the Wyoming protocol server through which Home Assistant uses the kiosk's recognizer and
voice, and sends it text to speak (docs/wyoming.md). Off unless ``listen`` is set."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from edgevoice.config.fields import rng as _rng
from edgevoice.errors import ConfigError


def _check_listen(key: str, value: str) -> None:
    if value and not re.fullmatch(r"tcp://(\[[0-9A-Fa-f:.]+\]|[^\s/:\[\]]+):\d{1,5}|unix:///?\S+", value):
        raise ConfigError(
            f"{key} = {value!r}: must be 'tcp://HOST:PORT' (tcp://127.0.0.1:10700; tcp://0.0.0.0:10700 for the LAN), "
            "'unix:///path', or empty (no Wyoming server)"
        )
    if value.startswith("tcp://") and not 0 < int(value.rsplit(":", 1)[1]) < 65536:
        raise ConfigError(f"{key} = {value!r}: the port must be 1 to 65535")


@dataclass(frozen=True)
class WyomingConfig:
    """Home Assistant's way in (docs/wyoming.md): speech to text, text to speech, and text to speak on the kiosk.
    Nothing else is reachable through it: no action, no configuration, no knowledge."""

    listen: str = field(default="", metadata={"check": _check_listen})
    """Where the server listens: ``tcp://127.0.0.1:10700``, ``tcp://0.0.0.0:10700`` (the LAN, for Home Assistant on
    another machine), ``unix:///run/edgevoice/wyoming.sock``; empty: no server."""
    max_clients: int = field(default=4, metadata=_rng(1, 64))
    """Connections served at once; one more is told so (an ``error`` event, code ``wyoming_busy``) and closed."""
    max_audio_s: float = field(default=30.0, metadata=_rng(1.0, 300.0))
    """The longest audio one transcription takes; more is refused (code ``wyoming_too_long``)."""
    max_text_chars: int = field(default=1000, metadata=_rng(10, 20000))
    """The longest text one synthesis (or kiosk announcement) takes; more is refused (code ``wyoming_too_long``)."""
    speak_on_kiosk: bool = True
    """Offer the voice ``kiosk``: a synthesis asked of it is spoken on the kiosk's own speaker (between visitors'
    turns; a visitor who speaks over it cuts it short) instead of being sent back."""
    idle_wait_s: float = field(default=10.0, metadata=_rng(0.0, 120.0))
    """How long a request waits for the kiosk to be between turns before it uses the shared models anyway (a
    visitor's turn goes first)."""
    client_timeout_s: float = field(default=30.0, metadata=_rng(1.0, 600.0))
    """A connection that sends nothing for this long is closed."""


def wyoming_warnings(config: WyomingConfig) -> list[str]:
    """What ``edgevoice config --check`` says of ``[wyoming]``: a TCP address off loopback is open to whoever
    reaches it (the protocol has no authentication)."""
    from urllib.parse import urlparse

    from edgevoice.config.listen_address import is_loopback

    url = urlparse(config.listen)
    if url.scheme != "tcp" or is_loopback(url.hostname or ""):
        return []
    speak = ", and make the kiosk speak" if config.speak_on_kiosk else ""
    return [
        f"wyoming.listen = {config.listen!r}: whoever reaches it can use the recognizer and the voice{speak} (Wyoming "
        "has no authentication); let only Home Assistant's address through (packaging/wyoming-network.conf, "
        "docs/wyoming.md)"
    ]
