"""The `edgevoice run` command's records: one per turn and per loop event, written whole to stdout (JSON lines)."""

from __future__ import annotations

import logging
import sys
import threading
import time

from edgevoice.cli_exit import stdout_closed
from edgevoice.converse import trace_stages
from edgevoice.events import answered_record
from edgevoice.live.events import ActionTaken, Announced, BargeIn, Fallback, LoopEvent, Partial, ReplyStarted
from edgevoice.live.loop import Turn
from edgevoice.reply.audio_cache import CachedSynthesizer
from edgevoice.reply.trace import ReplyTrace
from edgevoice.trace import TurnTimeline

log = logging.getLogger(__name__)

_STDOUT = threading.Lock()


def write_lines(lines: list[str]) -> bool:
    """Write whole lines to stdout, each call's lines together: records come from several threads (the recognition
    worker's partials, the responder's "speaking", the turns), and a ``print`` writes its text and its newline
    apart, so two threads printing at once can run two records into one line that no reader can parse.

    False when stdout's reader is gone (``run --json | head -3``): stdout then goes to /dev/null, and the caller
    stops the run, as SIGPIPE would have."""
    with _STDOUT:
        try:
            sys.stdout.write("".join(f"{line}\n" for line in lines))
            sys.stdout.flush()
        except BrokenPipeError:
            stdout_closed()
            return False
    return True


def unix_ms(times: tuple[float | None, ...]) -> list[float | None]:
    """perf_counter times as Unix times in ms (the wall clock read beside the counter now), for comparing with
    another process's clock (a browser's ``performance.timeOrigin + performance.now()``)."""
    offset = time.time() - time.perf_counter()
    return [None if t is None else round((t + offset) * 1000, 1) for t in times]


def turn_record(
    trace: ReplyTrace, turn: Turn, timeline: TurnTimeline, sample_rate: int, echo: dict[str, float | None] | None = None
) -> dict[str, object]:
    """One structured record per turn: what was said, the time each stage took and voice-to-voice (ms, see
    :mod:`edgevoice.trace`), the language model's and synthesizer's totals (``reply_ms``) and, with echo
    cancellation, what the canceller left of the reply (``echo``, see :meth:`LiveAssistant.reply_echo`)."""
    return {
        "event": "turn",
        "turn": trace.turn_id,
        "reason": turn.reason.value,
        "continues": turn.continues,
        "transcript": trace.transcript,
        "confidence": None if trace.confidence is None else round(trace.confidence, 3),
        "reply": trace.reply,
        "verdict": trace.verdict,
        "cancelled": trace.cancelled,
        "cut": trace.cut,
        "speculative_transcript": trace.speculative_transcript,
        "speculation_valid": turn.speculation_valid,
        "speculative_reply": trace.speculative_reply,
        "reply_seconds": round(sum(c.end_sample - c.start_sample for c in trace.clauses) / sample_rate, 3),
        "speech_end_s": round(turn.speech_end_t, 3),
        "committed_s": round(turn.committed_t, 3),
        "underruns": trace.underruns,
        "fallback": trace.fallback,
        "error": trace.error,
        **answered_record(trace.answered_by),
        **timeline.record(),
        "reply_ms": {k: round(v * 1000, 1) for k, v in trace_stages(trace).items() if k in ("llm", "tts")},
        "memory_trim_ms": None if trace.memory_trim_s is None else round(trace.memory_trim_s * 1000, 2),
        "clauses_played_unix_ms": unix_ms(timeline.clauses_played),
        "words_verdict": None
        if turn.words_verdict is None
        else {"ms": round(turn.words_verdict[0] * 1000, 1), "tokens": turn.words_verdict[1]},
    } | ({"echo": echo} if echo is not None else {})


def event_record(event: LoopEvent) -> dict[str, object] | None:
    """The JSON line for one of the loop's events (a fallback's reason goes under ``text``); None for those not
    written (a turn's record is written when it is finished: :func:`turn_record`)."""
    match event:
        case Partial(turn_id, text):
            return {"event": "partial", "turn": turn_id} | ({"text": text} if text else {})
        case ReplyStarted(turn_id):
            return {"event": "speaking", "turn": turn_id}
        case BargeIn(turn_id):
            return {"event": "barge_in", "turn": turn_id}
        case Fallback(turn_id, reason):
            return {"event": "fallback", "turn": turn_id, "text": reason.value}
        case ActionTaken(action, reason, message_id, turn_id):  # never the visitor's words
            return {"event": "action", "turn": turn_id, "action": action, "reason": reason, "id": message_id}
        case Announced(request_id, played):  # text said at Home Assistant's request (docs/wyoming.md)
            return {"event": "announced", "id": request_id, "played": played}
        case _:
            return None


def presynthesized(voice: object) -> dict[str, object]:
    """The stopped record's count of clauses played from the presynthesized audio and of those synthesized when
    asked (none without ``[tts] presynthesize``)."""
    if not isinstance(voice, CachedSynthesizer):
        return {}
    return {"presynthesized_clauses": voice.hits, "synthesized_clauses": voice.misses}
