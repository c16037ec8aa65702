"""The MQTT sink against a real broker: Debian's ``mosquitto``, started by the test on a free loopback port, with a
password file and (one test) TLS with a certificate made by ``openssl``. A subscriber (paho) receives what the
outbox delivers with QoS 1; a broker that is down holds the notification in the outbox until it is up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgevoice.act.delivery import Delivery
from edgevoice.act.mqtt import MqttSink
from edgevoice.act.outbox import Outbox
from edgevoice.act.service import Notifications
from tests.display_stand_in import free_port

MOSQUITTO = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin")
pytestmark = pytest.mark.skipif(
    MOSQUITTO is None, reason="Debian's mosquitto is not installed (scripts/setup installs it)"
)
PASSWORD = "kiosk-password"


class Broker:
    """mosquitto on ``port``, with a password file (user ``kiosk``), TLS when ``certs`` is given."""

    def __init__(self, folder: Path, port: int, certs: tuple[Path, Path] | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        passwords = folder / "passwords"
        passwords.write_text("")
        subprocess.run(["mosquitto_passwd", "-b", str(passwords), "kiosk", PASSWORD], check=True, capture_output=True)
        passwords.chmod(0o600)
        lines = [f"listener {port} 127.0.0.1", "allow_anonymous false", f"password_file {passwords}"]
        if os.geteuid() == 0:
            lines.append("user root")  # else it drops to the user mosquitto, who cannot read the test's files
        if certs is not None:
            lines += [f"certfile {certs[0]}", f"keyfile {certs[1]}"]
        conf = folder / "mosquitto.conf"
        conf.write_text("\n".join(lines) + "\n")
        assert MOSQUITTO is not None
        self.port = port
        self.process = subprocess.Popen(
            [MOSQUITTO, "-c", str(conf), "-v"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stderr is not None
        for line in self.process.stderr:  # mosquitto says when it listens
            if " running" in line or "Error" in line:
                break
        self._drain = threading.Thread(target=self.process.stderr.read, daemon=True)
        self._drain.start()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        self._drain.join(5)
        assert self.process.stderr is not None
        self.process.stderr.close()


class Subscriber:
    """A paho client subscribed to ``topic`` (``edgevoice/actions/#``) with QoS 1."""

    def __init__(self, port: int, tls_ca: Path | None = None, topic: str = "edgevoice/actions/#") -> None:
        import paho.mqtt.client as mqtt

        self.messages: list[tuple[str, dict[str, object]]] = []
        self.got = threading.Condition()
        ready = threading.Event()
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="test-subscriber")
        client.username_pw_set("kiosk", PASSWORD)
        if tls_ca is not None:
            client.tls_set(ca_certs=str(tls_ca))

        def on_connect(c: mqtt.Client, *_: object) -> None:
            c.subscribe(topic, qos=1)

        def on_subscribe(*_: object) -> None:
            ready.set()

        def on_message(c: mqtt.Client, userdata: object, message: mqtt.MQTTMessage) -> None:
            with self.got:
                self.messages.append((message.topic, json.loads(message.payload)))
                self.got.notify_all()

        client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, on_message
        client.connect("127.0.0.1", port)
        client.loop_start()
        assert ready.wait(10), "the test's subscriber could not subscribe"
        self.client = client

    def wait_for(self, n: int) -> bool:
        with self.got:
            return self.got.wait_for(lambda: len(self.messages) >= n, 10)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker", free_port())
    yield b
    b.stop()


def outbox_to(tmp_path: Path, sink: MqttSink) -> Notifications:
    outbox = Outbox(tmp_path / "outbox", max_pending=100)
    return Notifications(outbox, Delivery(outbox, {"mqtt": sink}, max_age_s=3600, retry_max_s=60), "desk-1")


def password_file(tmp_path: Path) -> str:
    path = tmp_path / "mqtt.password"
    path.write_text(PASSWORD + "\n")
    return str(path)


def test_a_notification_reaches_a_subscriber_with_qos_1(tmp_path: Path, broker: Broker) -> None:
    subscriber = Subscriber(broker.port)
    sink = MqttSink(
        "127.0.0.1",
        broker.port,
        "edgevoice/actions",
        client_id="kiosk-1",
        username="kiosk",
        password_file=password_file(tmp_path),
    )
    n = outbox_to(tmp_path, sink)
    message_id = n.queue("staff_call", "asked", entry="I need help?", turn_id=2)
    assert n.delivery.run_once() == 1  # the broker's PUBACK came back
    assert subscriber.wait_for(1)
    topic, body = subscriber.messages[0]
    assert topic == "edgevoice/actions/staff_call" and body["id"] == message_id and body["kiosk"] == "desk-1"
    assert n.outbox.summary()["pending"] == 0
    subscriber.close()
    n.close()


def test_a_wrong_password_is_tried_again_not_lost(tmp_path: Path, broker: Broker) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password")
    n = outbox_to(
        tmp_path,
        MqttSink(
            "127.0.0.1", broker.port, "edgevoice/actions", client_id="k", username="kiosk", password_file=str(wrong)
        ),
    )
    n.queue("staff_call", "asked", entry="", turn_id=1)
    assert n.delivery.run_once() == 0
    (row,) = n.outbox.summary()["pending_rows"]  # type: ignore[misc]
    assert "did not accept" in row["error"]
    n.close()


def test_a_broker_that_is_down_gets_the_notification_once_up(tmp_path: Path) -> None:
    port = free_port()
    clocks_sink = MqttSink(
        "127.0.0.1",
        port,
        "edgevoice/actions",
        client_id="kiosk-2",
        timeout_s=2,
        username="kiosk",
        password_file=password_file(tmp_path),
    )
    n = outbox_to(tmp_path, clocks_sink)
    message_id = n.queue("show_map", "asked", entry="", turn_id=1)
    assert n.delivery.run_once() == 0  # refused: nothing listens
    assert n.outbox.summary()["pending"] == 1
    broker = Broker(tmp_path / "broker", port)
    try:
        subscriber = Subscriber(port)
        n.outbox.shift(-10)  # due now (the back-off of the failed try is over)
        assert n.delivery.run_once() == 1
        assert subscriber.wait_for(1) and subscriber.messages[0][1]["id"] == message_id
        subscriber.close()
    finally:
        broker.stop()
        n.close()


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made by openssl."""
    cert, key = folder / "broker.pem", folder / "broker.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed (makes the test certificate)")
def test_tls_with_the_brokers_ca_from_a_file(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path)
    port = free_port()
    broker = Broker(tmp_path / "broker", port, certs=(cert, key))
    try:
        subscriber = Subscriber(port, tls_ca=cert)
        sink = MqttSink(
            "127.0.0.1",
            port,
            "edgevoice/actions",
            client_id="kiosk-3",
            tls=True,
            ca_file=str(cert),
            username="kiosk",
            password_file=password_file(tmp_path),
        )
        n = outbox_to(tmp_path, sink)
        n.queue("staff_call", "asked", entry="", turn_id=1)
        assert n.delivery.run_once() == 1
        assert subscriber.wait_for(1)
        subscriber.close()
        n.close()
    finally:
        broker.stop()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed (makes the test certificate)")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # paho-mqtt 2.2 leaves the socket of
# a failed TLS handshake to the garbage collector
def test_a_broker_its_ca_file_does_not_vouch_for_is_not_sent_to(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path)
    port = free_port()
    broker = Broker(tmp_path / "broker", port, certs=(cert, key))
    try:
        untrusted = outbox_to(
            tmp_path, MqttSink("127.0.0.1", port, "edgevoice/actions", client_id="k4", tls=True, timeout_s=2)
        )
        untrusted.queue("staff_call", "asked", entry="", turn_id=1)
        assert untrusted.delivery.run_once() == 0  # the system's CAs do not vouch for it
        (row,) = untrusted.outbox.summary()["pending_rows"]  # type: ignore[misc]
        assert "certificate" in row["error"]
        untrusted.close()
    finally:
        broker.stop()
