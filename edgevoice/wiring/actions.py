"""The actions' wiring: the knowledge's declared actions and the staff call, taken by a subscriber of the loop's bus
(:func:`subscribe_actions`), their notifications sent through the outbox (docs/actions.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from edgevoice.config import Config
from edgevoice.wiring.records import RECORDS_QUEUE

if TYPE_CHECKING:
    from edgevoice.act.service import Notifications
    from edgevoice.converse import Assistant
    from edgevoice.live.assistant import LiveAssistant

__all__ = ["subscribe_actions"]

log = logging.getLogger(__name__)


def subscribe_actions(config: Config, assistant: Assistant, live: LiveAssistant) -> Notifications | None:
    """The actions the knowledge's entries declare and the staff call (docs/actions.md), taken by a subscriber of
    the loop's bus; their notifications go through the outbox (returned) when a webhook or broker is configured,
    else to the journal only (None)."""
    from edgevoice.act.decide import ActionDecider, undeclared_actions
    from edgevoice.act.service import JournalOnly, notifying, open_notifications
    from edgevoice.live.actions import ActionTaker

    c = config.actions
    for warning in undeclared_actions(assistant.kiosk.entries, c.declared):
        log.warning("%s", warning)
    notifications = open_notifications(c) if notifying(c) else None
    decider = ActionDecider(c.declared, not_understood_turns=c.not_understood_turns, visitor_gap_s=c.visitor_gap_s)
    kiosk_of = assistant  # the knowledge as reloaded
    bus = live.loop.bus
    taker = ActionTaker(
        decider,
        notifications or JournalOnly(),
        lambda: kiosk_of.kiosk.entries,
        bus.publish,
        not_understood_reply=c.not_understood_reply,
    )
    bus.subscribe(taker, name="actions", maxsize=RECORDS_QUEUE)  # a staff call must not be dropped in a burst
    return notifications
