"""The review inbox's wiring: the finished turns worth an operator's look go to the inbox by a subscriber of the loop's
bus (:func:`subscribe_review`; which turns: :mod:`edgevoice.live.review_inbox`, the inbox: docs/admin.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgevoice.config import Config

if TYPE_CHECKING:
    from edgevoice.converse import Assistant
    from edgevoice.live.assistant import LiveAssistant
    from edgevoice.review.store import ReviewStore

__all__ = ["subscribe_review"]


def subscribe_review(config: Config, review: ReviewStore, assistant: Assistant, live: LiveAssistant) -> None:
    """``review`` (``[review] enabled``, opened by the caller, who closes it) fed by a subscriber of the loop's bus."""
    from edgevoice.live.review_inbox import ReviewCollector

    kiosk_of = assistant  # the knowledge as reloaded: the ranked entries' questions as the operator sees them
    collect = ReviewCollector(review, lambda: kiosk_of.kiosk.entries, low_margin=config.review.low_margin)
    live.loop.bus.subscribe(collect, name="review")
