"""Which finished turns go to the review inbox (:func:`review_reason`), and the bus subscriber that puts them there
(:class:`ReviewCollector`): on its own thread, so a slow disk never slows the audio (docs/events.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.prompt import DONT_KNOW, DONT_KNOW_BUT, REDIRECT
from edgevoice.live.events import LoopEvent, ReplyFinished
from edgevoice.reply.trace import ReplyTrace
from edgevoice.review.store import Ranked, ReviewStore

__all__ = ["ReviewCollector", "review_reason"]

log = logging.getLogger(__name__)

_REFUSED = frozenset({Verdict.GATE.value, Verdict.UNSUPPORTED.value})
_REDIRECTED = REDIRECT.split("{place}")[0]
_ANSWERED = frozenset({Verdict.MODEL.value, Verdict.DIRECT.value, Verdict.ECHO.value})


def review_reason(trace: ReplyTrace, low_margin: float) -> str | None:
    """Why the turn of ``trace`` belongs in the inbox ("refused", "asked_again", "low_margin"), None when it does not:
    a turn with no words, a fallback or error (a fault, not the knowledge), small talk, or an answer whose best entry
    led the next by at least ``low_margin``."""
    if not trace.transcript.strip() or trace.fallback is not None or trace.error is not None or trace.verdict is None:
        return None
    if trace.verdict == Verdict.UNHEARD.value:
        return "asked_again"
    reply = trace.reply.strip()
    if trace.verdict in _REFUSED or reply.startswith((DONT_KNOW, DONT_KNOW_BUT)):
        return "refused"
    if trace.verdict == Verdict.MODEL.value and reply.startswith(_REDIRECTED):
        return "refused"  # the model's refusal, sending the visitor to a place the knowledge names
    if trace.verdict in _ANSWERED and trace.margin is not None and trace.margin < low_margin:
        return "low_margin"
    return None


class ReviewCollector:
    """A subscriber of the loop's bus: each :class:`~edgevoice.live.events.ReplyFinished` that
    :func:`review_reason` keeps goes to ``store``, with the question of each entry it ranked first as ``entries``
    (the knowledge as now loaded) has it. Never logs what was said."""

    def __init__(self, store: ReviewStore, entries: Callable[[], Sequence[Entry]], *, low_margin: float) -> None:
        self.store, self.entries, self.low_margin = store, entries, low_margin
        self.kept = 0

    def __call__(self, event: LoopEvent) -> None:
        if isinstance(event, ReplyFinished):
            self.finished(event.trace)

    def finished(self, trace: ReplyTrace) -> None:
        reason = review_reason(trace, self.low_margin)
        if reason is None:
            return
        by_key = {e.key: e for e in self.entries()}
        ranked = [Ranked(key, by_key[key].question or by_key[key].answer) for key in trace.ranked if key in by_key]
        kept = self.store.add(
            trace.transcript,
            reason=reason,
            verdict=trace.verdict,
            reply=trace.reply,
            ranked=ranked,
            margin=trace.margin,
        )
        if kept is not None:
            self.kept += 1
            log.info("turn %d went to the review inbox (%s)", trace.turn_id, reason)
