"""The turn records: the bus subscriber (:class:`TurnRecords`) that sends each finished turn's record to the output and
the journal, the debug recorder, the admin page and the metrics, and the other events' JSON lines to the output."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from edgevoice.live.events import LoopEvent, ReplyFinished

if TYPE_CHECKING:
    from edgevoice.admin.appliance import AdminHandle
    from edgevoice.live.loop import Turn
    from edgevoice.live.metrics import MetricsExporter
    from edgevoice.live.recorder import TurnRecorder
    from edgevoice.reply.trace import ReplyTrace
    from edgevoice.trace import TurnTimeline

__all__ = ["RECORDS_QUEUE", "TurnRecords"]

RECORDS_QUEUE = 4096
"""Events the turn records may fall behind by (a slow disk under the metrics file) before the oldest are dropped."""


class TurnRecords:
    """Follows the loop's events (a subscriber of its bus): each turn's record goes to ``emit`` (the output and the
    journal), the debug recorder, the admin page once it is up (:attr:`admin`) and the metrics; the other events
    that have a JSON line to ``emit``. :attr:`echo` and :attr:`timeline` are the live assistant's, once it is
    built."""

    def __init__(
        self,
        emit: Callable[[dict[str, object]], None],
        recorder: TurnRecorder | None,
        exporter: MetricsExporter | None,
        sample_rate: int,
    ) -> None:
        self.emit, self.recorder, self.exporter, self.sample_rate = emit, recorder, exporter, sample_rate
        self.echo: Callable[[], dict[str, float | None] | None] = lambda: None
        self.timeline: Callable[[ReplyTrace, Turn], TurnTimeline] | None = None
        self.admin: AdminHandle | None = None

    def __call__(self, event: LoopEvent) -> None:
        from edgevoice.live.cli import event_record

        if isinstance(event, ReplyFinished):
            self.finished(event.trace, event.turn)
        elif (record := event_record(event)) is not None:
            self.emit(record)

    def finished(self, trace: ReplyTrace, turn: Turn) -> None:
        from edgevoice.live.cli import turn_record

        assert self.timeline is not None, "TurnRecords.timeline is set once the live assistant is built"
        timeline = self.timeline(trace, turn)
        record = turn_record(trace, turn, timeline, self.sample_rate, self.echo())
        self.emit(record)
        if self.recorder is not None:
            self.recorder.record(turn.turn_id, turn.audio.samples, record)
        if self.admin is not None:
            self.admin.appliance.add_turn(record)
        if self.exporter is not None:
            self.exporter.metrics.observe(
                timeline,
                cancelled=trace.cancelled,
                underruns=trace.underruns,
                answered_by=trace.answered_by,
            )
            self.exporter.update()
