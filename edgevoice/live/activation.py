"""When the kiosk listens: always, while a key or GPIO line is held (push-to-talk), or for one turn after a trigger
or the wake word.

:class:`Activation` is the gate: inputs call :meth:`~Activation.press`, :meth:`~Activation.release` and
:meth:`~Activation.trigger` from their own threads (a key, a GPIO line, the trigger socket of
:mod:`edgevoice.live.activation_inputs`, the admin page), and the listener takes the queued events at its next
microphone frame (:meth:`~Activation.take`) and acts on them (see :mod:`edgevoice.live.listener`).
"""

from __future__ import annotations

import enum
import threading
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from edgevoice.errors import ConfigError
from edgevoice.interfaces import FloatAudio


class ActivationMode(enum.StrEnum):
    ALWAYS = "always"
    """Listen always; a turn ends on silence (and Smart Turn's verdict)."""
    PUSH_TO_TALK = "push_to_talk"
    """Listen only while the key or line is held; the turn ends on release."""
    TRIGGER = "trigger"
    """A press or trigger opens one turn, which ends on silence; nobody speaking closes it after a timeout."""
    WAKE_WORD = "wake_word"
    """As ``trigger``, and the wake word is a trigger too."""


class WakeWord(Protocol):
    """A streaming wake-word detector (:class:`edgevoice.engines.wake_word.MicroWakeWord`)."""

    def heard(self, audio: FloatAudio) -> bool: ...

    def reset(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Press:
    """The key or line went down."""


@dataclass(frozen=True, slots=True)
class Release:
    """The key or line went up."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """Open one turn (a press in trigger mode, a trigger datagram, the admin page)."""


ActivationEvent = Press | Release | Trigger


class Activation:
    """The listening gate: thread-safe, fed by the inputs, read by the listener once a microphone frame.

    In ``always`` mode it takes nothing (every call returns False). In ``push_to_talk`` a press while held and a
    release while not are repeats and ignored; a trigger is ignored. In ``trigger`` and ``wake_word`` mode a press is
    a trigger and a release is ignored; in ``wake_word`` mode :meth:`hear` triggers when ``wake_word`` hears it."""

    def __init__(
        self,
        mode: ActivationMode | str = ActivationMode.ALWAYS,
        *,
        trigger_timeout_s: float = 8.0,
        wake_word: WakeWord | None = None,
    ) -> None:
        self.mode = ActivationMode(mode)
        if (self.mode is ActivationMode.WAKE_WORD) != (wake_word is not None):
            raise ConfigError(f"activation.mode = {self.mode.value!r}: a wake-word detector goes with wake_word mode")
        self.wake_word = wake_word
        self.trigger_timeout_s = trigger_timeout_s
        """In trigger mode: how long a trigger waits for speech before listening stops again."""
        self._lock = threading.Lock()
        self._events: deque[ActivationEvent] = deque(maxlen=64)
        self._held = False
        self.counts = {"press": 0, "release": 0, "trigger": 0}
        """Events accepted, by kind (repeats and those the mode ignores are not counted), for a status page."""

    @property
    def held(self) -> bool:
        """In push-to-talk: the key or line is down."""
        return self._held

    @property
    def triggered_mode(self) -> bool:
        """A turn is opened by a trigger (``trigger`` or ``wake_word`` mode)."""
        return self.mode in (ActivationMode.TRIGGER, ActivationMode.WAKE_WORD)

    def press(self) -> bool:
        if self.triggered_mode:
            return self.trigger()
        with self._lock:
            if self.mode is not ActivationMode.PUSH_TO_TALK or self._held:
                return False
            self._held = True
            return self._put(Press())

    def release(self) -> bool:
        with self._lock:
            if self.mode is not ActivationMode.PUSH_TO_TALK or not self._held:
                return False
            self._held = False
            return self._put(Release())

    def trigger(self) -> bool:
        with self._lock:
            if not self.triggered_mode:
                return False
            return self._put(Trigger())

    def hear(self, audio: FloatAudio) -> bool:
        """Microphone audio while nothing is listened to: the wake word in it is a trigger (True)."""
        return self.wake_word is not None and self.wake_word.heard(audio) and self.trigger()

    def listening_starts(self) -> None:
        """A trigger was acted on: the wake-word detector forgets what it heard before."""
        if self.wake_word is not None:
            self.wake_word.reset()

    def _put(self, event: ActivationEvent) -> bool:
        self._events.append(event)
        self.counts[type(event).__name__.lower()] += 1
        return True

    def take(self) -> list[ActivationEvent]:
        """The events since the last call, oldest first."""
        with self._lock:
            events = list(self._events)
            self._events.clear()
            return events

    def command(self, word: str) -> bool:
        """``press``, ``release`` or ``trigger`` by name (the socket's datagrams); an unknown word raises."""
        actions = {"press": self.press, "release": self.release, "trigger": self.trigger}
        if word not in actions:
            raise ConfigError(f"activation: unknown command {word!r} (one of: {', '.join(actions)})")
        return actions[word]()
