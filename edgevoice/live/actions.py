"""The bus subscriber that acts (:class:`ActionTaker`): on its own thread, so a slow disk never slows the audio
(docs/events.md). Each finished turn goes to the :class:`~edgevoice.act.decide.ActionDecider`; an action decided is
written to the outbox, then published as :class:`~edgevoice.live.events.ActionTaken` (docs/actions.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from edgevoice.act.decide import ActionDecider
from edgevoice.kiosk.knowledge import Entry
from edgevoice.live.events import ActionTaken, LoopEvent, ReplyFinished

__all__ = ["ActionTaker"]


class Queue(Protocol):
    def queue(self, action: str, reason: str, *, entry: str, turn_id: int) -> str: ...


class ActionTaker:
    """A subscriber of the loop's bus: the actions finished turns call for, queued on ``notifications`` (the
    outbox) and published with ``publish``. Never logs what was said."""

    def __init__(
        self,
        decider: ActionDecider,
        notifications: Queue,
        entries: Callable[[], Sequence[Entry]],
        publish: Callable[[LoopEvent], None],
    ) -> None:
        self.decider, self.notifications, self.entries, self.publish = decider, notifications, entries, publish
        self.taken = 0

    def __call__(self, event: LoopEvent) -> None:
        if not isinstance(event, ReplyFinished):
            return
        decision = self.decider.decide(event.trace, self.entries())
        if decision is None:
            return
        message_id = self.notifications.queue(
            decision.action, decision.reason, entry=decision.entry, turn_id=event.turn_id
        )
        self.taken += 1
        self.publish(ActionTaken(decision.action, decision.reason, message_id, event.turn_id))
