"""The bus subscriber that acts (:class:`ActionTaker`): on its own thread, so a slow disk never slows the audio
(docs/events.md). Each turn goes to the :class:`~edgevoice.act.decide.ActionDecider` once, as soon as its reply is
queued and playing (:class:`~edgevoice.live.events.ReplyQueued`; a turn without one when it is finished): an action
decided is written to the outbox while its confirmation plays, then published as
:class:`~edgevoice.live.events.ActionTaken` (docs/actions.md). The staff call placed for a visitor not understood is
said to them (:class:`~edgevoice.live.events.SpeakRequested`, the text from the configuration)."""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from edgevoice.act.decide import ActionDecider
from edgevoice.kiosk.knowledge import Entry
from edgevoice.live.events import ActionTaken, LoopEvent, ReplyFinished, ReplyQueued, SpeakRequested
from edgevoice.reply.trace import ReplyTrace

__all__ = ["ActionTaker"]

TURNS_KEPT = 16
"""Turns remembered as decided at :class:`ReplyQueued` (their :class:`ReplyFinished` is then not decided again)."""


class Queue(Protocol):
    def queue(self, action: str, reason: str, *, entry: str, turn_id: int) -> str: ...


class ActionTaker:
    """A subscriber of the loop's bus: the actions turns call for, queued on ``notifications`` (the outbox) and
    published with ``publish``; ``not_understood_reply``: what the kiosk says when it places the staff call for a
    visitor not understood (empty: nothing). Never logs what was said."""

    def __init__(
        self,
        decider: ActionDecider,
        notifications: Queue,
        entries: Callable[[], Sequence[Entry]],
        publish: Callable[[LoopEvent], None],
        *,
        not_understood_reply: str = "",
    ) -> None:
        self.decider, self.notifications, self.entries, self.publish = decider, notifications, entries, publish
        self.not_understood_reply = not_understood_reply
        self.taken = 0
        self._decided: deque[int] = deque(maxlen=TURNS_KEPT)

    def __call__(self, event: LoopEvent) -> None:
        if isinstance(event, ReplyQueued):
            self._decided.append(event.turn_id)
            self._decide(event.trace, event.turn_id)
        elif isinstance(event, ReplyFinished) and event.turn_id not in self._decided:
            self._decide(event.trace, event.turn_id)

    def _decide(self, trace: ReplyTrace, turn_id: int) -> None:
        decision = self.decider.decide(trace, self.entries())
        if decision is None:
            return
        message_id = self.notifications.queue(decision.action, decision.reason, entry=decision.entry, turn_id=turn_id)
        self.taken += 1
        self.publish(ActionTaken(decision.action, decision.reason, message_id, turn_id))
        if decision.reason == "not_understood" and self.not_understood_reply:
            self.publish(SpeakRequested(uuid.uuid4().hex, self.not_understood_reply))
