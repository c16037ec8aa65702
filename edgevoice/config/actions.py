"""The ``[actions]`` section: which actions the knowledge's entries may trigger, when a visitor not understood gets
the staff call, and where the notifications of actions go (a webhook, MQTT, the journal) through the durable outbox
(docs/actions.md). Secrets are never values here: only the paths of files that hold them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from edgevoice.config.fields import rng as _rng
from edgevoice.errors import ConfigError

STAFF_CALL = "staff_call"
"""The built-in action: get a person to the kiosk."""

_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


def _check_names(key: str, value: tuple[str, ...]) -> None:
    for name in value:
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{key}: {name!r} is not an action name (lower-case letters, digits and _, at most 40)")


def _check_url(key: str, value: str) -> None:
    if value and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", value):
        raise ConfigError(f"{key} = {value!r}: must be an http:// or https:// URL, or empty (no webhook)")


def _check_topic(key: str, value: str) -> None:
    if not value or "#" in value or "+" in value or len(value) > 200:
        raise ConfigError(f"{key} = {value!r}: must be an MQTT topic without wildcards (# +), at most 200 characters")


def _check_prefix(key: str, value: str) -> None:
    if value and (not re.fullmatch(r"[A-Za-z0-9_/-]{1,100}", value) or value.startswith("/") or value.endswith("/")):
        raise ConfigError(f"{key} = {value!r}: an MQTT topic prefix (letters, digits, _ - /), such as 'homeassistant'")


@dataclass(frozen=True)
class ActionsConfig:
    """What the kiosk may do besides talk, and where it says so (docs/actions.md)."""

    declared: tuple[str, ...] = field(default=(STAFF_CALL,), metadata={"check": _check_names})
    """The actions entries may trigger (``action = "name"`` in a ``[[qa]]`` table); an entry naming any other is
    never acted on (a warning at load). ``staff_call`` is the built-in one."""
    not_understood_turns: int = field(default=3, metadata=_rng(0, 20))
    """Turns in a row the kiosk did not understand (asked again, or refused) after which the staff call is placed
    for the visitor; 0: never."""
    visitor_gap_s: float = field(default=90.0, metadata=_rng(5.0, 3600.0))
    """A turn this long after the last one starts a new visitor's count of turns not understood."""
    not_understood_reply: str = "I've asked a colleague to come and help you; please wait here."
    """What the kiosk says, after its reply, when it places the staff call for a visitor not understood; empty:
    nothing (the screen still shows it)."""
    kiosk_id: str = ""
    """The kiosk's name in every notification; empty: the host name."""
    webhook_url: str = field(default="", metadata={"check": _check_url})
    """POST each notification here as JSON; empty: no webhook."""
    webhook_secret_file: str = ""
    """A file holding the secret that signs each body (header ``X-Edgevoice-Signature: sha256=<hex HMAC>``);
    required with a webhook, read once at start."""
    webhook_timeout_s: float = field(default=5.0, metadata=_rng(0.5, 60.0))
    """Seconds to wait for the webhook's answer before the try counts as failed."""
    mqtt_host: str = ""
    """Publish each notification to this broker (QoS 1); empty: no MQTT."""
    mqtt_port: int = field(default=1883, metadata=_rng(1, 65535))
    mqtt_topic: str = field(default="edgevoice/actions", metadata={"check": _check_topic})
    """The topic; the action's name is appended (``edgevoice/actions/staff_call``)."""
    mqtt_discovery_prefix: str = field(default="", metadata={"check": _check_prefix})
    """Announce each declared action to Home Assistant's MQTT discovery under this prefix ("homeassistant", its
    default): an ``event`` entity per action on the kiosk's device, published retained at start; empty: none."""
    mqtt_tls: bool = False
    """Connect with TLS (port 8883 as a rule), the broker checked against ``mqtt_ca_file`` or the system's CAs."""
    mqtt_ca_file: str = ""
    mqtt_cert_file: str = ""
    """A client certificate (with ``mqtt_key_file``), for a broker that asks for one."""
    mqtt_key_file: str = ""
    mqtt_username: str = ""
    mqtt_password_file: str = ""
    """A file holding the MQTT password (with ``mqtt_username``)."""
    outbox_dir: str = ""
    """Where the outbox's file is kept; empty: the service's state directory (``/var/lib/edgevoice/outbox``),
    else ``$XDG_STATE_HOME/edgevoice/outbox``."""
    max_age_s: float = field(default=3600.0 * 6, metadata=_rng(60.0, 30 * 86400.0))
    """A notification not delivered this long after the action is marked failed (shown on the admin page)."""
    max_pending: int = field(default=1000, metadata=_rng(10, 100000))
    """At most this many notifications wait; past it the oldest is marked failed (``backlog full``)."""
    retry_max_s: float = field(default=300.0, metadata=_rng(1.0, 3600.0))
    """The longest wait between two tries of one notification (the back-off doubles from 1 s up to it)."""

    def __post_init__(self) -> None:
        if self.mqtt_password_file and not self.mqtt_username:
            raise ConfigError("actions.mqtt_password_file needs actions.mqtt_username")
        if bool(self.mqtt_cert_file) != bool(self.mqtt_key_file):
            raise ConfigError("actions.mqtt_cert_file and actions.mqtt_key_file go together: set both or neither")
        if self.webhook_url and not self.webhook_secret_file:
            raise ConfigError("actions.webhook_url needs actions.webhook_secret_file (the secret that signs each body)")
