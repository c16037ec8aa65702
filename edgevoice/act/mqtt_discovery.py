"""Home Assistant's MQTT discovery of the kiosk's actions (pure: the messages, not their sending): one ``event``
entity per declared action, on the kiosk's device, whose events are the notifications published to
``<topic>/<action>`` (docs/actions.md, "Home Assistant")."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

__all__ = ["discovery_messages"]

EVENT_TEMPLATE = (
    "{{ {'event_type': value_json.action, 'reason': value_json.reason, 'id': value_json.id, "
    "'entry': value_json.entry, 'turn': value_json.turn} | to_json }}"
)
"""A notification's JSON as Home Assistant's event entity takes it (``event_type`` is the action's name)."""


def node_id(kiosk_id: str) -> str:
    """The kiosk's id as a discovery topic's node id (letters, digits, ``_`` and ``-`` only)."""
    return "edgevoice_" + re.sub(r"[^A-Za-z0-9_-]", "_", kiosk_id)


def discovery_messages(prefix: str, topic: str, kiosk_id: str, actions: Sequence[str]) -> list[tuple[str, str]]:
    """(topic, retained JSON payload) for each action: ``<prefix>/event/edgevoice_<kiosk>/<action>/config``."""
    node = node_id(kiosk_id)
    device = {"identifiers": [node], "name": f"edgevoice {kiosk_id}", "manufacturer": "edgevoice", "model": "kiosk"}
    messages = []
    for action in actions:
        config = {
            "name": action.replace("_", " "),
            "unique_id": f"{node}_{action}",
            "object_id": f"{node}_{action}",
            "state_topic": f"{topic}/{action}",
            "event_types": [action],
            "value_template": EVENT_TEMPLATE,
            "qos": 1,
            "device": device,
        }
        messages.append((f"{prefix}/event/{node}/{action}/config", json.dumps(config, sort_keys=True)))
    return messages
