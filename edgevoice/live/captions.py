"""Which clause of the reply the visitor hears now: :class:`~edgevoice.live.events.ClauseStarted` published as the
speaker plays each clause's first sample.

Each clause of a reply lies in the playback stream at ``trace.stream_start + clause.start_sample``
(:class:`~edgevoice.reply.trace.ReplyTrace`). Two counts on that stream tell how far the reply got: ``handed``, the
samples the output callback handed to the sound device (:attr:`~edgevoice.audio.playback.PlaybackControl.played`),
and ``heard``, those that reached its DAC by now, which the device plays after its buffer (tens of ms, more under
load): :class:`~edgevoice.live.assistant.LiveAssistant` gives it from the output stream's DAC times. A caption
follows ``heard``. :class:`ClauseCues`, owned by the answerer, reads it every :data:`POLL_S` on a thread of its own
while a reply plays (and sleeps otherwise): the audio callback only counts, as before.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from edgevoice.live.events import ClauseStarted, LoopEvent
from edgevoice.reply.trace import ReplyTrace

POLL_S = 0.01
"""How often the playback position is read while a reply plays: a caption is at most this late."""
DRAIN_S = 2.0
"""How long the end of a reply waits for the device to play the clauses it was handed (a device's buffer holds
far less) before announcing them anyway: a device that stopped playing delays the reply's end no longer."""


class ClauseCues:
    """Publishes :class:`ClauseStarted` for the reply it follows, as the playback position passes each clause.

    The answerer calls :meth:`follow` when a reply begins, :meth:`audible` once its first audio was announced
    (:class:`~edgevoice.live.events.ReplyStarted`, or the fallback phrase: no caption comes before it) and
    :meth:`finish` when it is done; :meth:`run` is the thread that polls, :meth:`poll` one look (for tests).
    ``handed`` and ``heard``: the two counts of the module's docstring (``heard`` by default ``handed``: a caption
    then leads its sound by the device's buffer)."""

    def __init__(
        self,
        handed: Callable[[], int],
        publish: Callable[[LoopEvent], None],
        *,
        heard: Callable[[], int] | None = None,
        poll_s: float = POLL_S,
    ) -> None:
        self._handed, self._publish, self.poll_s = handed, publish, poll_s
        self._heard = heard if heard is not None else handed
        self._lock = threading.Lock()
        self._reply: tuple[int, ReplyTrace] | None = None
        self._audible = False
        self._next = 0
        """The index of the next clause to announce."""
        self._wake = threading.Event()
        """Set while a reply is audible: the thread polls."""
        self._stop = threading.Event()

    def follow(self, turn_id: int, trace: ReplyTrace) -> None:
        """(The answerer) the reply to ``turn_id`` begins; its clauses will be appended to ``trace``."""
        with self._lock:
            self._reply, self._next, self._audible = (turn_id, trace), 0, False

    def audible(self, turn_id: int) -> None:
        """(Any thread) the first audio of the reply to ``turn_id`` was announced: its captions may follow."""
        with self._lock:
            if self._reply is None or self._reply[0] != turn_id:
                return
            self._audible = True
        self._wake.set()

    def poll(self) -> int:
        """Publish each clause whose first sample was played since the last look; how many were."""
        return self._announce(self._heard())

    def finish(self, *, played_out: bool) -> None:
        """(The answerer) the reply is done: ``played_out``, every clause queued was handed to the device (none was
        flushed), else only those before the cut. Those not announced yet are as the device plays them (waiting at
        most :data:`DRAIN_S`, then at once), so that the reply's end is published after its last caption. The reply
        is then forgotten."""
        end = None if played_out else self._handed()
        for _ in range(math.ceil(DRAIN_S / max(self.poll_s, 0.001))):
            heard = self._heard()
            self._announce(heard if end is None else min(heard, end))
            if self._stop.is_set() or not self._due(end):
                break
            self._stop.wait(self.poll_s)
        self._announce(end)
        with self._lock:
            self._reply, self._audible = None, False
            self._wake.clear()

    def _due(self, end: int | None) -> bool:
        """A clause that starts before ``end`` (None: any) is still to be announced."""
        with self._lock:
            trace = self._reply[1] if self._reply is not None and self._audible else None
            if trace is None or trace.stream_start is None or self._next >= len(trace.clauses):
                return False
            return end is None or trace.stream_start + trace.clauses[self._next].start_sample < end

    def _announce(self, played: int | None) -> int:
        """Publish each clause not announced yet that starts before ``played`` (None: every one)."""
        with self._lock:
            if self._reply is None or not self._audible:
                return 0
            turn_id, trace = self._reply
            start, clauses, announced = trace.stream_start, trace.clauses, 0
            if start is None:
                return 0
            while self._next < len(clauses) and (played is None or start + clauses[self._next].start_sample < played):
                self._publish(ClauseStarted(turn_id, self._next, clauses[self._next].text))  # never blocks
                self._next += 1
                announced += 1
            return announced

    def run(self) -> None:
        """Until :meth:`close`: poll every :attr:`poll_s` while a reply is audible."""
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                return
            self.poll()
            self._stop.wait(self.poll_s)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
