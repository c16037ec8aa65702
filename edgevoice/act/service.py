"""The notifications of a run, as ``[actions]`` configures them: the outbox opened under the state directory, its
sinks built (secrets read from their files once, here) and its delivery thread (:func:`open_notifications`)."""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from edgevoice.act.delivery import Delivery, DeliveryFailed, JournalSink, Sink, SystemClocks
from edgevoice.act.outbox import Outbox, default_outbox_dir
from edgevoice.config import Config
from edgevoice.config.actions import ActionsConfig
from edgevoice.errors import ConfigError

__all__ = ["JournalOnly", "Notifications", "check_actions", "notifying", "open_notifications"]

log = logging.getLogger(__name__)


@dataclass
class Notifications:
    """The outbox and its delivery, open for the run."""

    outbox: Outbox
    delivery: Delivery
    kiosk_id: str

    def queue(self, action: str, reason: str, *, entry: str, turn_id: int) -> str:
        """Write the notification of an action to the outbox (on disk when this returns) and wake the delivery;
        its message id."""
        message_id = uuid.uuid4().hex
        now = self.delivery.clocks.wall()
        body = {
            "id": message_id,
            "kiosk": self.kiosk_id,
            "action": action,
            "reason": reason,
            "entry": entry,
            "turn": turn_id,
            "at": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
        }
        self.outbox.add(message_id, action, body, list(self.delivery.sinks), now)
        self.delivery.wake()
        return message_id

    def close(self) -> None:
        self.delivery.close()
        self.outbox.close()


def sinks_of(config: ActionsConfig, kiosk_id: str) -> Mapping[str, Sink]:
    """The places ``config`` names, secrets read from their files (a ConfigError names the key of one unreadable)."""
    sinks: dict[str, Sink] = {"journal": JournalSink(log.info)}
    if config.webhook_url:
        from edgevoice.act.webhook import WebhookSink, read_secret

        secret = read_secret(config.webhook_secret_file, "actions.webhook_secret_file")
        sinks["webhook"] = WebhookSink(
            config.webhook_url, secret, timeout_s=config.webhook_timeout_s, wall=SystemClocks().wall
        )
    if config.mqtt_host:
        from edgevoice.act.mqtt import MqttSink
        from edgevoice.act.mqtt_discovery import discovery_messages

        prefix, topic = config.mqtt_discovery_prefix, config.mqtt_topic.rstrip("/")
        discovery = discovery_messages(prefix, topic, kiosk_id, config.declared) if prefix else []
        sinks["mqtt"] = MqttSink(
            config.mqtt_host,
            config.mqtt_port,
            config.mqtt_topic,
            client_id=f"edgevoice-{kiosk_id}"[:23],
            timeout_s=config.webhook_timeout_s,
            tls=config.mqtt_tls,
            ca_file=config.mqtt_ca_file,
            cert_file=config.mqtt_cert_file,
            key_file=config.mqtt_key_file,
            username=config.mqtt_username,
            password_file=config.mqtt_password_file,
            discovery=discovery,
        )
    return sinks


def open_notifications(config: ActionsConfig, directory: Path | None = None) -> Notifications:
    """The outbox (``[actions] outbox_dir``, else the state directory) with its delivery thread started: what a
    former run left waiting goes out first."""
    kiosk_id = config.kiosk_id or socket.gethostname()
    outbox = Outbox(
        directory or (Path(config.outbox_dir).expanduser() if config.outbox_dir else default_outbox_dir()),
        max_pending=config.max_pending,
    )
    try:
        sinks = sinks_of(config, kiosk_id)
        delivery = Delivery(outbox, sinks, max_age_s=config.max_age_s, retry_max_s=config.retry_max_s)
    except BaseException:
        outbox.close()
        raise
    announce_to_home_assistant(config, sinks)
    delivery.start()
    waiting = outbox.summary(limit=0)
    log.info("outbox: %s waiting, %s failed, in %s", waiting["pending"], waiting["failed"], outbox.path)
    return Notifications(outbox, delivery, kiosk_id)


def announce_to_home_assistant(config: ActionsConfig, sinks: Mapping[str, Sink]) -> None:
    """With ``mqtt_discovery_prefix``: connect to the broker now (before the delivery thread owns the connection),
    so that Home Assistant knows the actions before the first is taken; a broker down is told in the journal, and
    the announcement goes out with the first connection that works."""
    from edgevoice.act.mqtt import MqttSink

    sink = sinks.get("mqtt")
    if not config.mqtt_discovery_prefix or not isinstance(sink, MqttSink):
        return
    try:
        sink.connect()
        log.info("mqtt: %d actions announced to Home Assistant's discovery", len(sink.discovery))
    except DeliveryFailed as exc:
        log.warning("mqtt: the actions are announced to Home Assistant once the broker answers (%s)", exc)


class JournalOnly:
    """Actions with no webhook or broker configured: each is a line in the journal, with no outbox to keep."""

    def queue(self, action: str, reason: str, *, entry: str, turn_id: int) -> str:
        message_id = uuid.uuid4().hex
        log.info("action %s (%s) for turn %d: notification %s (journal only)", action, reason, turn_id, message_id)
        return message_id


def notifying(config: ActionsConfig) -> bool:
    """Whether ``config`` sends notifications anywhere but the journal (then an outbox keeps them)."""
    return bool(config.webhook_url or config.mqtt_host)


def check_actions(config: Config, warnings: list[str]) -> None:
    """What ``edgevoice config --check`` says of ``[actions]``: a secret file that cannot be read, or is too short, is
    an error naming its key; an entry that names an undeclared action is a warning."""
    from edgevoice.act.decide import undeclared_actions
    from edgevoice.kiosk.knowledge import parse_knowledge

    for sink in sinks_of(config.actions, "check").values():  # reads every secret file, connects nowhere
        sink.close()
    try:
        entries = parse_knowledge(config.knowledge_text(), source=config.knowledge_source(), warnings=[])
    except ConfigError:
        return  # the knowledge's own check reports it
    warnings += undeclared_actions(entries, config.actions.declared)
