"""Home Assistant's MQTT discovery of the kiosk's actions against a real broker (Debian's ``mosquitto``, as
tests/test_notify_mqtt.py starts it): at start the kiosk publishes, retained, one ``event`` entity per declared
action, whose state topic is where that action's notifications go; the entity's template turns a notification into
the event Home Assistant records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgevoice.act.service import open_notifications
from edgevoice.config.load import config_from_dict
from edgevoice.errors import ConfigError, ConfigErrors
from tests.test_notify_mqtt import MOSQUITTO, Broker, Subscriber, broker, password_file

__all__ = ["broker"]  # the fixture

pytestmark = pytest.mark.skipif(
    MOSQUITTO is None, reason="Debian's mosquitto is not installed (scripts/setup installs it)"
)


def test_the_actions_are_announced_to_home_assistant_and_their_events_match(tmp_path: Path, broker: Broker) -> None:
    config = config_from_dict(
        {
            "actions": {
                "declared": ["staff_call", "show_map"],
                "kiosk_id": "front desk",
                "mqtt_host": "127.0.0.1",
                "mqtt_port": broker.port,
                "mqtt_username": "kiosk",
                "mqtt_password_file": password_file(tmp_path),
                "mqtt_discovery_prefix": "homeassistant",
                "outbox_dir": str(tmp_path / "outbox"),
            }
        }
    ).actions
    notifications = open_notifications(config)
    try:
        discovery = Subscriber(broker.port, topic="homeassistant/#")  # after the start: the configs are retained
        assert discovery.wait_for(2)
        configs = dict(discovery.messages)
        assert sorted(configs) == [
            "homeassistant/event/edgevoice_front_desk/show_map/config",
            "homeassistant/event/edgevoice_front_desk/staff_call/config",
        ]
        staff = configs["homeassistant/event/edgevoice_front_desk/staff_call/config"]
        assert staff["state_topic"] == "edgevoice/actions/staff_call" and staff["event_types"] == ["staff_call"]
        assert staff["unique_id"] == "edgevoice_front_desk_staff_call"
        assert staff["device"]["identifiers"] == ["edgevoice_front_desk"]  # type: ignore[index]

        actions = Subscriber(broker.port)
        message_id = notifications.queue("staff_call", "not_understood", entry="", turn_id=7)
        assert actions.wait_for(1)
        topic, body = actions.messages[0]
        assert topic == staff["state_topic"] and body["id"] == message_id
        jinja2 = pytest.importorskip("jinja2")
        env = jinja2.Environment()
        env.filters["to_json"] = json.dumps  # Home Assistant's filter
        event = json.loads(env.from_string(str(staff["value_template"])).render(value_json=body))
        assert event == {
            "event_type": "staff_call",
            "reason": "not_understood",
            "id": message_id,
            "entry": "",
            "turn": 7,
        }
        discovery.close()
        actions.close()
    finally:
        notifications.close()


def test_a_broker_down_at_start_does_not_stop_the_start(tmp_path: Path) -> None:
    from tests.display_stand_in import free_port

    config = config_from_dict(
        {
            "actions": {
                "mqtt_host": "127.0.0.1",
                "mqtt_port": free_port(),
                "mqtt_discovery_prefix": "homeassistant",
                "webhook_timeout_s": 0.5,
                "outbox_dir": str(tmp_path / "outbox"),
            }
        }
    ).actions
    open_notifications(config).close()  # the announcement waits for the first connection that works


@pytest.mark.parametrize("prefix", ["/homeassistant", "home assistant", "ha/#"])
def test_a_bad_discovery_prefix_is_refused_at_load(prefix: str) -> None:
    with pytest.raises((ConfigError, ConfigErrors), match="mqtt_discovery_prefix"):
        config_from_dict({"actions": {"mqtt_discovery_prefix": prefix}})
