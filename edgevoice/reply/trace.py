"""What one reply did: its clauses' places in the playback stream and the ``Clock`` marks of its stages.

Filled in by the responder and the reply output as the reply happens; read by the live loop's reports, the
benchmarks and the history (which keeps only the clauses the visitor heard).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edgevoice.events import Answered

RANKED_KEPT = 3
"""Entries of the grounding a trace names (:attr:`ReplyTrace.ranked`): the review inbox shows them."""


@dataclass
class SpokenClause:
    """One clause handed to the playback ring, and where it lies in the playback stream."""

    text: str
    start_sample: int
    """Position in the playback stream (samples written before this clause)."""
    end_sample: int


@dataclass
class ReplyTrace:
    """Wall-clock marks (``Clock`` seconds) of one reply, filled in as it happens."""

    turn_id: int
    committed: float
    """When the turn was committed (the endpoint decision); the ASR starts right after."""
    transcript_done: float | None = None
    first_token: float | None = None
    first_clause: float | None = None
    first_audio: float | None = None
    first_sample_queued: float | None = None
    done: float | None = None
    transcript: str = ""
    confidence: float | None = None
    """The recognizer's confidence in the transcript (:attr:`~edgevoice.events.Transcript.confidence`)."""
    reply: str = ""
    verdict: str | None = None
    """Who answered, as the grounding names it (:class:`~edgevoice.kiosk.grounding_types.Verdict`: "direct",
    "model", "gate", "unheard"...); None without grounding."""
    ranked: tuple[str, ...] = ()
    """The keys (:attr:`~edgevoice.kiosk.knowledge.Entry.key`) of the entries the kiosk ranked first for the
    question, best first, at most :data:`RANKED_KEPT`; empty without grounding."""
    margin: float | None = None
    """How far the best entry's ranking score led the second's (:attr:`~edgevoice.kiosk.grounding_types.Grounding.
    margin`); None without grounding by meaning."""
    cancelled: bool = False
    speculative_transcript: bool = False
    """The transcript was decoded while the end of the turn was being confirmed."""
    synthesis_s: float = 0.0
    """Time spent inside the synthesizer."""
    clauses: list[SpokenClause] = field(default_factory=list)
    stream_start: int | None = None
    """Playback-stream position of the reply's sample 0 (clauses count from there); None outside the live loop."""
    underruns: int = 0
    """Times the speaker ran dry while this reply played."""
    fallback: str | None = None
    """Why the fallback phrase was spoken instead of a reply ("error": a stage failed; "late": no reply audio within
    the reply budget); None for a reply of its own."""
    error: str | None = None
    """The code of the error that ended the turn, if one did."""
    answered_by: Answered | None = None
    """Which language model answered, and what kept the remote one from answering; None when none did (the kiosk
    answered by itself, or the reply was cut before a model had)."""
    speculative_reply: bool = False
    """The reply was begun when the visitor fell silent, before the turn was committed (its audio held)."""
    reply_began: float | None = None
    """When a reply begun before the commit had its transcript (the marks are settled at the commit; the language
    model's and synthesizer's totals count from here)."""
    cut: str | None = None
    """Which bound ended the reply before the model did (:class:`~edgevoice.events.Cut`: "chars", "clauses",
    "seconds", "tokens"); None when the model ended it (or the sentence limit, a barge-in)."""
    memory_trim_s: float | None = None
    """Seconds spent after the reply collecting its reference cycles and giving freed memory back to the system
    (:mod:`edgevoice.memory`); None when it was not done (a turn was waiting)."""

    def settle_before(self, committed: float) -> None:
        """A reply begun before its turn was committed: marks that fell before the commit count as reached at the
        commit (those stages cost nothing after it; the wait for the held audio shows in the queue stage)."""
        if self.transcript_done is not None and self.transcript_done < committed and self.reply_began is None:
            self.reply_began = self.transcript_done
        for mark in ("transcript_done", "first_token", "first_clause", "first_audio"):
            value = getattr(self, mark)
            if value is not None and value < committed:
                setattr(self, mark, committed)
