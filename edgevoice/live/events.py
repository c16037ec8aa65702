"""What the live loop reports while it runs, as typed events for ``VoiceLoop(on_event=...)``."""

from __future__ import annotations

from dataclasses import dataclass

from edgevoice.reply.output import Fallback as Fallback  # raised by the reply's output, reported with the others
from edgevoice.reply.output import FallbackReason as FallbackReason


@dataclass(frozen=True, slots=True)
class Partial:
    """A partial transcript of turn ``turn_id`` while the visitor speaks (``text`` may be empty)."""

    turn_id: int
    text: str


@dataclass(frozen=True, slots=True)
class Speaking:
    """The first audio of the reply to turn ``turn_id`` was queued."""

    turn_id: int


@dataclass(frozen=True, slots=True)
class BargeIn:
    """The visitor spoke over the reply to turn ``turn_id``: it was silenced and cancelled."""

    turn_id: int


LoopEvent = Partial | Speaking | BargeIn | Fallback
