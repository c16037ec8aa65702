"""The activation gate and its inputs: the gate's rules per mode, input-event records through a real FIFO, the trigger
socket from a real `edgevoice trigger` process, a GPIO line through a stand-in gpiod, and the config's checks."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import timedelta
from enum import Enum
from pathlib import Path
from types import SimpleNamespace

import pytest

from edgevoice.config.load import config_from_dict
from edgevoice.config_check import effective_config
from edgevoice.errors import ConfigError, EdgeVoiceError
from edgevoice.live.activation import Activation, ActivationEvent, ActivationMode, Press, Release, Trigger
from edgevoice.live.activation_inputs import (
    INPUT_EVENT,
    GpioInput,
    KeyInput,
    TriggerSocket,
    activation_inputs,
    check_activation,
    key_code,
    parse_input_events,
    socket_path,
)

EV_SYN, EV_KEY, KEY_SPACE, KEY_A = 0, 1, 57, 30


def record(kind: int, code: int, value: int) -> bytes:
    return INPUT_EVENT.pack(1733390000, 250000, kind, code, value)


def key_stroke(code: int, *, repeats: int = 0) -> bytes:
    """What a keyboard sends for one press held through ``repeats`` auto-repeats, with its SYN reports."""
    syn = record(EV_SYN, 0, 0)
    return (
        record(4, 4, 0x7002C)  # EV_MSC scan code
        + record(EV_KEY, code, 1)
        + syn
        + (record(EV_KEY, code, 2) + syn) * repeats
        + record(EV_KEY, code, 0)
        + syn
    )


class Recording(Activation):
    """An :class:`Activation` that keeps what it was given and tells when it has ``n`` events."""

    def __init__(self, mode: ActivationMode, n: int) -> None:
        super().__init__(mode)
        self.n, self.got = n, threading.Event()
        self.seen: list[ActivationEvent] = []

    def _put(self, event: ActivationEvent) -> bool:
        self.seen.append(event)
        if len(self.seen) >= self.n:
            self.got.set()
        return super()._put(event)


def test_the_gate_takes_what_its_mode_uses_and_drops_repeats() -> None:
    ptt = Activation(ActivationMode.PUSH_TO_TALK)
    assert ptt.press() and not ptt.press() and ptt.held  # a second press while held is a repeat
    assert ptt.release() and not ptt.release() and not ptt.held
    assert not ptt.trigger()
    assert ptt.take() == [Press(), Release()] and ptt.take() == []
    trigger = Activation(ActivationMode.TRIGGER)
    assert trigger.press() and not trigger.release() and trigger.command("trigger")
    assert trigger.take() == [Trigger(), Trigger()]
    with pytest.raises(ConfigError, match="unknown command 'shout'"):
        trigger.command("shout")
    always = Activation()
    assert not always.press() and not always.trigger() and always.take() == []


def test_input_event_records_give_presses_and_releases_of_the_key_only() -> None:
    data = key_stroke(KEY_A) + key_stroke(KEY_SPACE, repeats=3) + key_stroke(KEY_SPACE)
    events, rest = parse_input_events(data, KEY_SPACE)
    assert events == [Press(), Release(), Press(), Release()] and rest == b""
    cut = len(data) - 10  # a read that ends inside a record keeps its start for the next read
    first, rest = parse_input_events(data[:cut], KEY_SPACE)
    second, rest = parse_input_events(rest + data[cut:], KEY_SPACE)
    assert first + second == events and rest == b""


def test_a_key_input_reads_a_real_input_event_stream_through_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "event-kbd"
    os.mkfifo(fifo)
    activation = Recording(ActivationMode.PUSH_TO_TALK, n=3)
    key = KeyInput(activation, str(fifo), "KEY_SPACE")
    key.start()
    try:
        with fifo.open("wb", buffering=0) as device:  # blocks until the reader has opened it
            device.write(key_stroke(KEY_A) + key_stroke(KEY_SPACE, repeats=5)[:30])  # cut inside a record
            device.write(key_stroke(KEY_SPACE, repeats=5)[30:] + record(EV_KEY, KEY_SPACE, 1))
            assert activation.got.wait(5)
            assert activation.held
        # the writer went away (an unplugged keyboard) with the key down: it is released
        assert key.close(2)
    finally:
        key.close(2)
    assert activation.seen == [Press(), Release(), Press(), Release()]
    assert not activation.held


def test_the_trigger_socket_takes_words_from_edgevoice_trigger(tmp_path: Path) -> None:
    path = str(tmp_path / "activation.sock")
    activation = Recording(ActivationMode.PUSH_TO_TALK, n=2)
    sock = TriggerSocket(activation, path)
    sock.start()
    try:
        assert Path(path).stat().st_mode & 0o777 == 0o600
        for word in ("press", "release"):
            done = subprocess.run(
                [sys.executable, "-m", "edgevoice", "trigger", word, "--socket", path, "--json"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            assert f'"sent": "{word}"' in done.stdout
        assert activation.got.wait(5)
    finally:
        assert sock.close(2)
    assert activation.seen == [Press(), Release()]
    assert not Path(path).exists()


def test_edgevoice_trigger_says_so_when_no_kiosk_listens(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "edgevoice", "trigger", "--socket", str(tmp_path / "none.sock"), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert '"code": "activation_socket"' in done.stdout and "cannot reach the trigger socket" in done.stderr


class FakeGpiod:
    """The part of gpiod 2.x that :class:`GpioInput` uses: one requested line whose edges the test queues."""

    class Direction(Enum):
        INPUT = 1

    class Edge(Enum):
        BOTH = 1

    class Bias(Enum):
        AS_IS, PULL_UP = 1, 2

    class EdgeEvent:
        class Type(Enum):
            RISING_EDGE, FALLING_EDGE = 1, 2

    line = SimpleNamespace(Direction=Direction, Edge=Edge, Bias=Bias)

    def __init__(self) -> None:
        self.requested: list[tuple[str, dict[int, SimpleNamespace]]] = []
        self.edges: list[object] = []
        self.released = False

    def LineSettings(self, **settings: object) -> SimpleNamespace:
        return SimpleNamespace(**settings)

    def request_lines(self, chip: str, *, consumer: str, config: dict[int, SimpleNamespace]) -> FakeGpiod:
        if chip != "/dev/gpiochip0":
            raise FileNotFoundError(2, "No such file or directory")
        self.requested.append((chip, config))
        return self

    def wait_edge_events(self, timeout: float) -> bool:
        return bool(self.edges)

    def read_edge_events(self) -> list[object]:
        edges, self.edges = self.edges, []
        return edges

    def release(self) -> None:
        self.released = True


def test_a_gpio_line_going_active_is_a_press_and_inactive_a_release() -> None:
    gpiod = FakeGpiod()
    rising, falling = (SimpleNamespace(event_type=t) for t in FakeGpiod.EdgeEvent.Type)
    gpiod.edges = [rising, falling, rising]
    activation = Recording(ActivationMode.PUSH_TO_TALK, n=3)
    line = GpioInput(activation, "/dev/gpiochip0", 17, gpiod=gpiod)  # type: ignore[arg-type]
    ((_, config),) = gpiod.requested
    settings = config[17]
    assert settings.active_low and settings.bias is FakeGpiod.Bias.PULL_UP
    assert settings.debounce_period == timedelta(milliseconds=10)
    line.start()
    assert activation.got.wait(5)
    assert line.close(2) and gpiod.released
    assert activation.seen == [Press(), Release(), Press()]
    with pytest.raises(EdgeVoiceError, match="gpio_line = 3: cannot request the line"):
        GpioInput(activation, "/dev/gpiochip9", 3, gpiod=gpiod)  # type: ignore[arg-type]


def test_the_activation_config_is_checked_at_load() -> None:
    config = config_from_dict({"activation": {"mode": "push_to_talk", "key": "KEY_ENTER", "device": "/dev/x"}})
    assert config.activation.mode == "push_to_talk" and key_code(config.activation.key) == 28
    assert key_code("BTN_0") == 0x100 and key_code("183") == 183
    with pytest.raises(ConfigError, match=r"activation\.key = 'KEY_NOPE'"):
        config_from_dict({"activation": {"key": "KEY_NOPE"}})
    with pytest.raises(ConfigError, match=r"activation\.mode = 'wake'"):
        config_from_dict({"activation": {"mode": "wake"}})
    with pytest.raises(ConfigError, match=r"activation\.socket = 'rel\.sock'"):
        config_from_dict({"activation": {"socket": "rel.sock"}})
    assert effective_config(config)["activation"]["key"] == "KEY_ENTER"  # a keyboard key is no secret


def test_config_check_finds_a_mode_nothing_drives_and_missing_devices(tmp_path: Path) -> None:
    def check(table: dict[str, object]) -> tuple[list[str], list[str]]:
        warnings: list[str] = []
        errors = check_activation(config_from_dict({"activation": table}).activation, warnings)
        return [e.message for e in errors], warnings

    errors, _ = check({"mode": "trigger", "socket": "off"})
    assert errors == [
        "activation.mode = 'trigger': nothing can open a turn (set activation.device, gpio_chip, or a socket: under "
        "the service one is made in its RuntimeDirectory)"
    ]
    missing = str(tmp_path / "event-kbd")
    errors, _ = check({"mode": "push_to_talk", "device": missing, "socket": "off"})
    assert errors == [f"activation.device = {missing!r}: no such device"]
    (tmp_path / "event-kbd").write_bytes(b"")
    assert check({"mode": "push_to_talk", "device": missing}) == ([], [])
    _, warnings = check({"device": missing})
    assert warnings == ["activation.device is set but activation.mode = 'always' listens always: it is unused"]


def test_the_socket_lives_in_the_services_runtime_directory() -> None:
    assert socket_path("", {"RUNTIME_DIRECTORY": "/run/edgevoice:/run/other"}) == "/run/edgevoice/activation.sock"
    assert socket_path("", {"XDG_RUNTIME_DIR": "/run/user/1000"}) == "/run/user/1000/edgevoice-activation.sock"
    assert socket_path("", {}) == "" and socket_path("off", {"RUNTIME_DIRECTORY": "/run/e"}) == ""
    assert socket_path("/tmp/a.sock", {"RUNTIME_DIRECTORY": "/run/e"}) == "/tmp/a.sock"


def test_always_mode_starts_no_input_and_the_others_start_what_is_configured(tmp_path: Path) -> None:
    table = {"device": str(tmp_path / "kbd"), "socket": str(tmp_path / "a.sock")}
    assert activation_inputs(Activation(), config_from_dict({"activation": table}).activation) == []
    config = config_from_dict({"activation": {**table, "mode": "trigger"}}).activation
    inputs = activation_inputs(Activation(ActivationMode.TRIGGER), config)
    try:
        assert [type(i) for i in inputs] == [KeyInput, TriggerSocket] and Path(table["socket"]).exists()
    finally:
        assert all(i.close(2) for i in inputs)
    assert not Path(table["socket"]).exists()
