"""The producer side of the playback ring: the reply in progress, or the fallback phrase that replaces it.

One reply at a time writes into the playback ring (:meth:`ReplyOutput.emit`, from the responder's threads). The
fallback phrase, synthesized once at start-up, can replace a reply from any thread (:meth:`ReplyOutput.fallback`):
the responder's when a stage raised, the listener's when no reply audio came within the reply budget
(:meth:`ReplyOutput.check_budget`), whatever state the engines are in (a hung one included). A lock makes the two
producers take turns, and the reply's cancel event stops the reply's own audio once the phrase took over.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import Clock
from edgevoice.interfaces import FloatAudio
from edgevoice.reply.trace import ReplyTrace, SpokenClause

log = logging.getLogger(__name__)


class FallbackReason(enum.StrEnum):
    """Why the fallback phrase replaced a reply; ``value`` is the name the turn records use."""

    ERROR = "error"
    """A stage raised."""
    LATE = "late"
    """No reply audio within the reply budget."""


@dataclass(frozen=True, slots=True)
class Fallback:
    """The fallback phrase replaced the reply to turn ``turn_id``."""

    turn_id: int
    reason: FallbackReason


@dataclass
class Reply:
    """The reply in progress."""

    turn_id: int
    committed: float
    """When its turn was committed (the budget counts from here)."""
    trace: ReplyTrace
    fallback: FallbackReason | None = None
    """Why the fallback phrase replaced the reply; None while the reply is its own."""


class ReplyOutput:
    def __init__(
        self,
        speaker: SharedRing,
        playback: PlaybackControl,
        cancel: threading.Event,
        stop: threading.Event,
        clock: Clock,
        *,
        fallback_audio: FloatAudio | None = None,
        fallback_text: str = "",
        budget_s: float | None = None,
        on_fallback: Callable[[Fallback], None] = lambda _event: None,
    ) -> None:
        """``cancel``: the reply's cancel event (barge-in, shutdown, fallback); ``stop``: the loop's."""
        self.speaker, self.playback = speaker, playback
        self.cancel, self.stop, self.clock = cancel, stop, clock
        self.fallback_audio, self.fallback_text, self.budget_s = fallback_audio, fallback_text, budget_s
        self.on_fallback = on_fallback
        self.fallbacks = 0
        self.samples = 0
        """Samples of the current reply written to the ring: its position (clauses count from its start)."""
        self.reply: Reply | None = None
        self._pending: tuple[int, float] | None = None
        """The last turn committed by the listener whose reply has not begun (its responder still busy)."""
        self._lock = threading.Lock()

    def committed(self, turn_id: int, committed: float) -> None:
        """(The listener) turn ``turn_id`` was committed at ``committed``: its budget runs from now, also while the
        responder is still busy (ending a dropped speculative reply stuck in an engine, say)."""
        with self._lock:
            self._pending = (turn_id, committed)

    def begin(self, turn_id: int, committed: float, trace: ReplyTrace) -> Reply:
        """The responder begins the reply to ``turn_id``. When the budget ran out before it could, the fallback
        phrase already plays: the returned reply has ``fallback`` set and ``trace`` takes over its marks."""
        with self._lock:
            if self._pending is not None and self._pending[0] == turn_id:
                self._pending = None
            late = self.reply
            if late is not None and late.turn_id == turn_id and late.fallback is not None:
                trace.stream_start = late.trace.stream_start
                trace.first_audio, trace.first_sample_queued = late.trace.first_audio, late.trace.first_sample_queued
                trace.clauses = late.trace.clauses
                late.trace = trace
                return late
            self.samples = 0
            self.reply = Reply(turn_id, committed, trace)
            return self.reply

    def end(self) -> None:
        with self._lock:
            self.reply = None
            if self._pending is not None:  # committed while this reply played out (a barge-in): it is next
                self._pending = (self._pending[0], max(self._pending[1], self.clock.now()))

    # -- the reply's own audio -------------------------------------------------------------------------------------
    def emit(self, audio: FloatAudio) -> int:
        """Queue audio for playback, waiting for room (never dropping), until the reply is cancelled.

        Returns the end position of this audio within the reply (samples)."""
        rest = audio
        while len(rest) and not self.cancel.is_set():
            with self._lock:
                if self.cancel.is_set() or (self.reply is not None and self.reply.fallback is not None):
                    break  # a fallback took over (while this thread waited, or before the reply began)
                n = self._write(rest)
            rest = rest[n:]
            if len(rest):
                self.stop.wait(0.01)
        return self.samples

    def _write(self, audio: FloatAudio) -> int:
        """Write what fits (the caller holds the lock); returns how many samples went in."""
        free = self.speaker.free()
        n = self.speaker.write(audio[:free]) if free else 0
        self.samples += n
        return n

    def wait_played(self, *, fallback: bool = False) -> None:
        """Until the reply has left the ring (barge-in stays armed meanwhile); a fallback phrase is played out."""
        while self.speaker.available() > 0 and not self.stop.is_set() and (fallback or not self.cancel.is_set()):
            self.stop.wait(0.02)

    # -- the fallback phrase ---------------------------------------------------------------------------------------
    def check_budget(self) -> None:
        """(The listener, every frame) a reply with no audio queued ``budget_s`` after its turn gets the fallback,
        begun or not."""
        reply, budget, pending = self.reply, self.budget_s, self._pending
        if reply is None and pending is not None and budget is not None and self.clock.now() - pending[1] > budget:
            self._late_before_begin(*pending)
            return
        if (
            reply is not None
            and budget is not None
            and reply.fallback is None
            and self.samples == 0
            and not self.cancel.is_set()
            and self.clock.now() - reply.committed > budget
        ):
            log.warning("turn %d: no reply within %.1f s: fallback phrase", reply.turn_id, budget)
            self.fallback(reply, FallbackReason.LATE)

    def _late_before_begin(self, turn_id: int, committed: float) -> None:
        """The budget ran out before the responder could begin the reply: the phrase plays now, for that turn."""
        with self._lock:
            if self.reply is not None or self._pending != (turn_id, committed):
                return  # it began meanwhile: the usual check takes over
            if self.fallback_audio is None:
                self._pending = None
                return
            log.warning("turn %d: the responder is still busy after %.1f s: fallback phrase", turn_id, self.budget_s)
            self._pending = None
            trace = ReplyTrace(turn_id, committed=committed)
            trace.stream_start = self.playback.played + self.speaker.available()
            self.samples = 0
            self.reply = Reply(turn_id, committed, trace)
            self.cancel.set()  # whatever the busy responder computes is not this turn's reply
            self._fall_back(self.reply, FallbackReason.LATE)
        self.on_fallback(Fallback(turn_id, FallbackReason.LATE))

    def fallback(self, reply: Reply, reason: FallbackReason) -> bool:
        """Replace ``reply`` with the fallback phrase (from any thread): cancel its work and queue the phrase, unless
        the visitor barged in, the reply already speaks, or there is no phrase. True when the phrase was queued."""
        with self._lock:
            if reply.fallback is not None or self.reply is not reply:
                return False
            if self.cancel.is_set() or self.samples > 0 or self.fallback_audio is None:
                return False  # a barge-in, or the reply already speaks (its first audio is in the ring)
            self.cancel.set()  # the reply's language model and synthesizer stop at their next token or clause
            self._fall_back(reply, reason)
        self.on_fallback(Fallback(reply.turn_id, reason))
        return True

    def _fall_back(self, reply: Reply, reason: FallbackReason) -> None:
        """(Holding the lock) queue the phrase in place of ``reply``."""
        if self.fallback_audio is None:
            return
        reply.fallback = reason
        self.fallbacks += 1
        start = self.samples
        self._write(self.fallback_audio)  # the ring holds a minute; a failed reply queued nothing
        trace = reply.trace
        trace.first_audio = trace.first_sample_queued = self.clock.now()
        trace.clauses.append(SpokenClause(self.fallback_text, start, self.samples))
