"""The MQTT sink, the one adapter of ``paho-mqtt`` (2.x): each notification published with QoS 1 to
``<topic>/<action>``, over TLS and with credentials read from files when configured. A try waits for the broker's
PUBACK; one that does not come in time fails, and the connection is made again for the next try (the message id in
the body lets a subscriber drop the copy that paho may still deliver)."""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Sequence
from pathlib import Path

from edgevoice.act.delivery import DeliveryFailed
from edgevoice.act.outbox import Row
from edgevoice.errors import ConfigError

__all__ = ["MqttSink"]

log = logging.getLogger(__name__)

KEEPALIVE_S = 30


class MqttSink:
    """Publishes rows to the broker at ``host:port``; connects on the first try and after a failed one."""

    def __init__(
        self,
        host: str,
        port: int,
        topic: str,
        *,
        client_id: str,
        timeout_s: float = 5.0,
        tls: bool = False,
        ca_file: str = "",
        cert_file: str = "",
        key_file: str = "",
        username: str = "",
        password_file: str = "",
        discovery: Sequence[tuple[str, str]] = (),
    ) -> None:
        """``discovery``: (topic, payload) messages published retained on every connection (Home Assistant's MQTT
        discovery: :mod:`edgevoice.act.mqtt_discovery`)."""
        self.host, self.port, self.topic, self.client_id = host, port, topic.rstrip("/"), client_id
        self.timeout_s = timeout_s
        self.tls, self.ca_file, self.cert_file, self.key_file = tls, ca_file, cert_file, key_file
        self.username = username
        self._password: str | None = None
        if password_file:
            try:
                self._password = Path(password_file).expanduser().read_text().strip()
            except OSError as exc:
                key = "actions.mqtt_password_file"
                raise ConfigError(f"{key} = {password_file!r}: cannot read it ({exc.strerror})", key=key) from exc
        self.discovery = tuple(discovery)
        self._client: object | None = None
        self._connected = threading.Event()
        self._refused: str | None = None

    def _connect(self) -> object:
        import paho.mqtt.client as mqtt

        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=mqtt.MQTTv311, clean_session=True
        )
        if self.tls:
            client.tls_set(
                ca_certs=self.ca_file or None,
                certfile=self.cert_file or None,
                keyfile=self.key_file or None,
                cert_reqs=ssl.CERT_REQUIRED,
                tls_version=ssl.PROTOCOL_TLS_CLIENT,
            )
        if self.username:
            client.username_pw_set(self.username, self._password)
        self._connected.clear()
        self._refused = None

        def on_connect(client: object, userdata: object, flags: object, reason: object, properties: object) -> None:
            if getattr(reason, "is_failure", False):
                self._refused = str(reason)
            self._connected.set()

        def on_disconnect(client: object, userdata: object, flags: object, reason: object, properties: object) -> None:
            self._connected.clear()

        client.on_connect = on_connect
        client.on_disconnect = on_disconnect
        client.connect_timeout = self.timeout_s
        try:
            client.connect(self.host, self.port, keepalive=KEEPALIVE_S)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise DeliveryFailed(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        client.loop_start()
        if not self._connected.wait(self.timeout_s) or self._refused is not None:
            self._drop(client)
            raise DeliveryFailed(
                f"broker {self.host}:{self.port} did not accept the connection: {self._refused or 'no answer'}"
            )
        return client

    def connect(self) -> object:
        """The connection, made now if there is none (the discovery messages published on it first)."""
        if self._client is None:
            client = self._connect()
            try:
                for topic, payload in self.discovery:
                    self._publish(client, topic, payload.encode(), retain=True)
            except DeliveryFailed:
                self._drop(client)
                raise
            self._client = client
        return self._client

    def _publish(self, client: object, topic: str, payload: bytes, *, retain: bool = False) -> None:
        info = client.publish(topic, payload, qos=1, retain=retain)  # type: ignore[attr-defined]
        try:
            info.wait_for_publish(self.timeout_s)
        except (RuntimeError, ValueError) as exc:  # not queued: the connection is gone
            raise DeliveryFailed(f"not published: {exc}") from None
        if not info.is_published():
            raise DeliveryFailed(f"no PUBACK from {self.host}:{self.port} in {self.timeout_s:.0f} s")

    def send(self, row: Row) -> None:
        client = self.connect()
        try:
            self._publish(client, f"{self.topic}/{row.action}", row.body.encode())
        except DeliveryFailed:
            self._reset()
            raise

    def _reset(self) -> None:
        if self._client is not None:
            self._drop(self._client)
            self._client = None

    @staticmethod
    def _drop(client: object) -> None:
        try:
            client.disconnect()  # type: ignore[attr-defined]
        finally:
            client.loop_stop()  # type: ignore[attr-defined]

    def close(self) -> None:
        self._reset()
