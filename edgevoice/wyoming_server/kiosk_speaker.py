"""Text to say on the kiosk's speaker, asked through the Wyoming server (:class:`KioskSpeaker`): published on the
loop's bus as :class:`~edgevoice.live.events.SpeakRequested`, which the loop takes and speaks between turns; a few at
most wait at once. Nothing here touches the loop's parts, and nothing waits for a client: the audio never does."""

from __future__ import annotations

import threading
import uuid

from edgevoice.live.bus import EventBus
from edgevoice.live.events import Announced, LoopEvent, SpeakRequested

__all__ = ["KioskSpeaker"]


class KioskSpeaker:
    """Hands texts to the loop (:meth:`offer`), at most ``max_waiting`` not yet spoken at once."""

    def __init__(self, bus: EventBus, *, max_waiting: int = 3) -> None:
        self.bus, self.max_waiting = bus, max_waiting
        self._waiting: set[str] = set()
        self._lock = threading.Lock()
        self.spoken = 0
        self._subscription = bus.subscribe(self._follow, name="wyoming-speak")

    def offer(self, text: str) -> str | None:
        """The request's id once the loop has it to say; None when ``max_waiting`` wait already."""
        with self._lock:
            if len(self._waiting) >= self.max_waiting:
                return None
            request_id = uuid.uuid4().hex
            self._waiting.add(request_id)
        self.bus.publish(SpeakRequested(request_id, text))
        return request_id

    def _follow(self, event: LoopEvent) -> None:
        if isinstance(event, Announced):
            with self._lock:
                if event.request_id in self._waiting:
                    self._waiting.discard(event.request_id)
                    self.spoken += event.played

    def close(self) -> None:
        self._subscription.close()
