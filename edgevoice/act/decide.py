"""When the kiosk acts (pure: no clock, no I/O): the entry it read out declares an action, or the visitor was not
understood several turns in a row and gets the staff call. It acts exactly when the grounding read an entry out
directly (the same measured decision as its answer, :mod:`edgevoice.kiosk.read_out`), never on the model's words,
and only on actions the configuration declares: nothing a visitor says can name, add or change one."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from edgevoice.config.actions import STAFF_CALL
from edgevoice.kiosk.answer_types import without_yes_no
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.kiosk.knowledge import Entry
from edgevoice.reply.trace import ReplyTrace

__all__ = ["ActionDecider", "Decision", "undeclared_actions"]

log = logging.getLogger(__name__)

_NOT_UNDERSTOOD = frozenset({Verdict.UNHEARD.value, Verdict.GATE.value, Verdict.UNSUPPORTED.value})


@dataclass(frozen=True, slots=True)
class Decision:
    """Take ``action`` (``reason``: "asked" or "not_understood"); ``entry``: the question of the entry read out (the
    operator's words, never the visitor's)."""

    action: str
    reason: str
    entry: str = ""


def undeclared_actions(entries: Sequence[Entry], declared: Sequence[str]) -> list[str]:
    """One warning per entry whose action the configuration does not declare (such an entry is never acted on)."""
    return [
        f"knowledge: the entry {e.question or e.answer[:40]!r} names the action {e.action!r}, which [actions] declared "
        f"does not list: it is read out, and nothing is done"
        for e in entries
        if e.action and e.action not in declared
    ]


class ActionDecider:
    """Follows finished turns one by one (:meth:`decide`) and says which, if any, calls for an action.

    ``not_understood_turns`` turns in a row that the kiosk asked again or refused (``unheard``, ``gate``,
    ``unsupported``), each within ``visitor_gap_s`` of the last, place the staff call once for that visitor; a turn
    understood, or a gap, starts the count again."""

    def __init__(self, declared: Sequence[str], *, not_understood_turns: int, visitor_gap_s: float) -> None:
        self.declared = frozenset(declared)
        self.not_understood_turns, self.visitor_gap_s = not_understood_turns, visitor_gap_s
        self._missed = 0
        self._called = False
        self._last: float | None = None

    def decide(self, trace: ReplyTrace, entries: Sequence[Entry]) -> Decision | None:
        """The action ``trace``'s turn calls for (``entries``: the knowledge as loaded now), None for none."""
        if trace.fallback is not None or trace.error is not None or not trace.transcript.strip():
            return None  # a fault, or no words: neither an answer nor the visitor's failure to be understood
        if self._last is not None and trace.committed - self._last > self.visitor_gap_s:
            self._missed, self._called = 0, False  # another visitor, most likely
        self._last = trace.committed
        if trace.verdict in _NOT_UNDERSTOOD:
            self._missed += 1
            if (
                self.not_understood_turns
                and self._missed >= self.not_understood_turns
                and not self._called
                and STAFF_CALL in self.declared
            ):
                self._called = True
                return Decision(STAFF_CALL, "not_understood")
            return None
        self._missed = 0
        entry = read_out_entry(trace, entries)
        if entry is None or not entry.action:
            return None
        if entry.action not in self.declared:
            log.warning("turn %d: the entry read out names the undeclared action %r", trace.turn_id, entry.action)
            return None
        if entry.action == STAFF_CALL:
            self._called = True
        return Decision(entry.action, "asked", entry.question)


def read_out_entry(trace: ReplyTrace, entries: Sequence[Entry]) -> Entry | None:
    """The entry ``trace``'s reply read out as the operator wrote it (verdict ``direct``), None when the reply was
    anything else: the model's words, small talk, a refusal."""
    if trace.verdict != Verdict.DIRECT.value or not trace.ranked:
        return None
    entry = next((e for e in entries if e.key == trace.ranked[0]), None)
    if entry is None:
        return None
    reply = trace.reply.strip()
    return entry if reply in (entry.answer.strip(), without_yes_no(entry.answer).strip()) else None
