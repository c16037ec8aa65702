"""The inputs that drive the activation gate (:mod:`edgevoice.live.activation`), each on one thread that ``close()``
stops:

- :class:`KeyInput` reads a Linux input-event device (``/dev/input/by-id/...``) directly: ``struct input_event`` is
  five fields, and the ``evdev`` package is built from source against kernel headers (no wheel on the index);
- :class:`GpioInput` waits for edges on a GPIO line through libgpiod's Python binding (``gpiod``, optional);
- :class:`TriggerSocket` takes ``press``, ``release`` and ``trigger`` datagrams on a Unix socket in the service's
  ``RuntimeDirectory=`` (``edgevoice trigger`` sends them).

And what `edgevoice config --check` finds wrong with ``[activation]`` (:func:`check_activation`).
"""

from __future__ import annotations

import logging
import os
import select
import socket
import struct
import threading
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from edgevoice.clock import Clock
from edgevoice.config.keys import KEY_CODES as KEY_CODES
from edgevoice.config.keys import key_code as key_code
from edgevoice.errors import ConfigError, EdgeVoiceError
from edgevoice.live.activation import Activation, ActivationEvent, ActivationMode, Press, Release
from edgevoice.log_throttle import ThrottledWarning
from edgevoice.ownership import BoundSocket, check_socket, claim_socket

if TYPE_CHECKING:
    from edgevoice.config import ActivationConfig

log = logging.getLogger(__name__)

SOCKET_NAME = "activation.sock"
"""The trigger socket's name in the service's ``RuntimeDirectory=``."""
SOCKET_KEY = "activation.socket"
SERVICE_SOCKET = f"/run/edgevoice/{SOCKET_NAME}"
"""Where the shipped unit's socket is (``RuntimeDirectory=edgevoice``)."""
REOPEN_S = 1.0
"""While an input device is missing (unplugged), how often it is opened again."""
POLL_S = 0.2
"""How often an input thread looks at its stop flag while no event comes."""

EV_KEY = 1
INPUT_EVENT = struct.Struct("@llHHi")
"""``struct input_event``: a ``timeval`` (two native longs), type, code, value."""


def parse_input_events(data: bytes, code: int) -> tuple[list[ActivationEvent], bytes]:
    """The presses and releases of key ``code`` in a stream of ``struct input_event`` records, and the bytes left
    over (a record cut between two reads). Auto-repeat (value 2) and other keys and event types are skipped."""
    events: list[ActivationEvent] = []
    whole = len(data) - len(data) % INPUT_EVENT.size
    for _sec, _usec, kind, key, value in INPUT_EVENT.iter_unpack(data[:whole]):
        if kind == EV_KEY and key == code and value in (0, 1):
            events.append(Press() if value == 1 else Release())
    return events, data[whole:]


class InputThread:
    """One thread that feeds ``activation`` until :meth:`close`."""

    name = "input"

    def __init__(self, activation: Activation) -> None:
        self.activation = activation
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run_logged, name=f"edgevoice-{self.name}", daemon=False)

    def start(self) -> None:
        self._thread.start()

    def _run_logged(self) -> None:
        try:
            self.run()
        except Exception:  # the kiosk then only stops hearing this input: say so loudly, once
            log.exception("activation %s stopped", self.name)

    def run(self) -> None:
        raise NotImplementedError

    def _feed(self, event: ActivationEvent) -> None:
        if isinstance(event, Press):
            self.activation.press()
        elif isinstance(event, Release):
            self.activation.release()
        else:
            self.activation.trigger()

    def close(self, timeout: float = 1.0) -> bool:
        """Stop the thread within ``timeout`` s and release what it read from; True when it ended."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        self._release()
        return True

    def _release(self) -> None:
        """Free what the input holds (called once its thread has ended, or was never started)."""


class KeyInput(InputThread):
    """Presses and releases of one key on a Linux input-event device (or any file or FIFO of such records).

    A device that goes away (unplugged, its FIFO's writer gone) is opened again every :data:`REOPEN_S`; a key held
    when it went is released."""

    name = "key"

    def __init__(self, activation: Activation, device: str, key: str) -> None:
        super().__init__(activation)
        self.device, self.code = device, key_code(key)

    def run(self) -> None:
        warned = False
        while not self._stop.is_set():
            try:
                fd = os.open(self.device, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as exc:
                if not warned:
                    log.warning("activation key device %s cannot be opened yet: %s", self.device, exc.strerror)
                    warned = True
                self._stop.wait(REOPEN_S)
                continue
            warned = False
            try:
                self._read(fd)
            finally:
                os.close(fd)
                self.activation.release()  # the key cannot be released on a device that is gone
            self._stop.wait(REOPEN_S)

    def _read(self, fd: int) -> None:
        rest = b""
        while not self._stop.is_set():
            ready, _, _ = select.select([fd], [], [], POLL_S)
            if not ready:
                continue
            try:
                data = os.read(fd, INPUT_EVENT.size * 64)
            except BlockingIOError:
                continue
            except OSError as exc:  # ENODEV: unplugged
                log.warning("activation key device %s: %s", self.device, exc.strerror)
                return
            if not data:
                return
            events, rest = parse_input_events(rest + data, self.code)
            for event in events:
                self._feed(event)


class GpioInput(InputThread):
    """Edges of one GPIO line through libgpiod (the ``gpiod`` package, installed with ``edgevoice[gpio]``): the line
    going active is a press, going inactive a release; ``active_low`` for a button that pulls the line to ground."""

    name = "gpio"

    def __init__(
        self,
        activation: Activation,
        chip: str,
        line: int,
        *,
        active_low: bool = True,
        debounce_ms: int = 10,
        gpiod: ModuleType | None = None,
    ) -> None:
        super().__init__(activation)
        self.gpiod = gpiod or import_gpiod()
        from datetime import timedelta

        g = self.gpiod
        settings = g.LineSettings(
            direction=g.line.Direction.INPUT,
            edge_detection=g.line.Edge.BOTH,
            bias=g.line.Bias.PULL_UP if active_low else g.line.Bias.AS_IS,
            active_low=active_low,
            debounce_period=timedelta(milliseconds=debounce_ms),
        )
        try:
            self.request = g.request_lines(chip, consumer="edgevoice", config={line: settings})
        except OSError as exc:
            raise EdgeVoiceError(
                f"activation.gpio_chip = {chip!r}, gpio_line = {line}: cannot request the line ({exc.strerror or exc})",
                code="activation_gpio",
            ) from exc

    def run(self) -> None:
        rising = self.gpiod.EdgeEvent.Type.RISING_EDGE
        while not self._stop.is_set():
            if not self.request.wait_edge_events(POLL_S):
                continue
            for event in self.request.read_edge_events():
                self._feed(Press() if event.event_type == rising else Release())

    def _release(self) -> None:
        self.request.release()


def import_gpiod() -> ModuleType:
    try:
        import gpiod  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise EdgeVoiceError(
            "activation.gpio_chip: the gpiod package is not installed (pip install 'edgevoice[gpio]')",
            code="activation_gpio",
        ) from exc
    return gpiod  # type: ignore[no-any-return, unused-ignore]


def socket_path(configured: str, environ: Mapping[str, str] = os.environ) -> str:
    """Where the trigger socket is: as configured; empty: ``$RUNTIME_DIRECTORY/activation.sock`` under the service
    (the first directory when systemd lists several), else ``$XDG_RUNTIME_DIR/edgevoice-activation.sock``; ``"off"``
    or none of these: nowhere ("")."""
    if configured == "off":
        return ""
    if configured:
        return configured
    runtime = environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    if runtime.startswith("/"):
        return f"{runtime.rstrip('/')}/{SOCKET_NAME}"
    xdg = environ.get("XDG_RUNTIME_DIR", "")
    return f"{xdg.rstrip('/')}/edgevoice-{SOCKET_NAME}" if xdg.startswith("/") else ""


class TriggerSocket(InputThread):
    """A Unix datagram socket that takes ``press``, ``release`` and ``trigger`` (one word a datagram). Only the
    service's user and root can write to it (mode 0600)."""

    name = "trigger-socket"

    def __init__(self, activation: Activation, path: str, *, clock: Clock | None = None) -> None:
        super().__init__(activation)
        self.path = path
        self.refused = ThrottledWarning(log, f"trigger socket {path}: datagrams that are no command", clock=clock)
        """Unknown datagrams: anyone who may write to the socket could send thousands a second."""
        claim_socket(SOCKET_KEY, path)  # a stale socket left by a process that was killed; nothing else
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self.sock.bind(path)
            os.chmod(path, 0o600)
            self._bound = BoundSocket(path)
        except OSError as exc:
            self.sock.close()
            raise EdgeVoiceError(
                f"activation.socket = {path!r}: cannot bind ({exc.strerror})", code="activation_socket"
            ) from exc
        self.sock.settimeout(POLL_S)

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(64)
            except TimeoutError:
                continue
            word = data.decode("ascii", "replace").strip().lower()
            try:
                self.activation.command(word)
            except ConfigError as exc:
                self.refused.warn("trigger socket: %s", exc)

    def _release(self) -> None:
        self.refused.flush()
        self.sock.close()
        self._bound.remove()


def send_command(path: str, word: str = "trigger") -> None:
    """Send ``word`` to the trigger socket at ``path`` (what ``edgevoice trigger`` does)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto(word.encode("ascii"), path)
        except OSError as exc:
            raise EdgeVoiceError(
                f"cannot reach the trigger socket {path}: {exc.strerror} (is `edgevoice run` running with "
                '[activation] mode = "trigger" or "push_to_talk"?)',
                code="activation_socket",
            ) from exc


def activation_inputs(activation: Activation, config: ActivationConfig) -> list[InputThread]:
    """The inputs ``config`` names, not started; none in ``always`` mode. A socket that cannot be bound or a GPIO
    line that cannot be requested raises (the operator asked for it); a key device that is missing is waited for."""
    if activation.mode is ActivationMode.ALWAYS:
        return []
    inputs: list[InputThread] = []
    try:
        if config.device:
            inputs.append(KeyInput(activation, config.device, config.key))
        if config.gpio_chip:
            inputs.append(GpioInput(activation, config.gpio_chip, config.gpio_line, active_low=config.gpio_active_low))
        if path := socket_path(config.socket):
            inputs.append(TriggerSocket(activation, path))
    except EdgeVoiceError:
        for made in inputs:
            made.close()
        raise
    return inputs


def check_activation_socket(config: ActivationConfig, warnings: list[str] | None) -> None:
    """Refuse, untouched, what :class:`TriggerSocket` would refuse at its path (anything but a stale socket); a
    socket served now is a warning in ``warnings`` (refused when it is None)."""
    if config.mode != ActivationMode.ALWAYS and (path := socket_path(config.socket)):
        check_socket(SOCKET_KEY, path, warnings)


def check_activation(config: ActivationConfig, warnings: list[str]) -> list[EdgeVoiceError]:
    """What `edgevoice config --check` finds wrong with ``[activation]``: a mode with no input to drive it, a key
    device or GPIO chip that is not there or not readable, the gpiod package missing (the socket's path:
    :func:`check_activation_socket`)."""
    errors: list[EdgeVoiceError] = []
    inputs = [k for k in ("device", "gpio_chip") if getattr(config, k)]
    if config.mode == ActivationMode.ALWAYS:
        if inputs:
            warnings.append(
                f"activation.{inputs[0]} is set but activation.mode = 'always' listens always: it is unused"
            )
        return errors
    if config.mode == ActivationMode.WAKE_WORD:
        from edgevoice.engines.wake_word import check_wake_word

        try:
            check_wake_word(config.wake_word)
        except EdgeVoiceError as exc:
            errors.append(exc)
    elif not inputs and not socket_path(config.socket):
        errors.append(
            ConfigError(
                f"activation.mode = {config.mode!r}: nothing can open a turn (set activation.device, gpio_chip, or a "
                "socket: under the service one is made in its RuntimeDirectory)"
            )
        )
    for key in inputs:
        path = Path(getattr(config, key))
        if not path.exists():
            errors.append(ConfigError(f"activation.{key} = {str(path)!r}: no such device"))
        elif not os.access(path, os.R_OK):
            errors.append(ConfigError(f"activation.{key} = {str(path)!r}: not readable by this user (group input?)"))
    if config.gpio_chip:
        try:
            import_gpiod()
        except EdgeVoiceError as exc:
            errors.append(exc)
    return errors
