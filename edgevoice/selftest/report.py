"""The self-test's verdict: per-stage p50/p95, each stage's share of the total, the budget, and the exit code."""

from __future__ import annotations

import platform
import statistics
from dataclasses import dataclass
from typing import Any

from edgevoice.selftest.appliance import Record
from edgevoice.selftest.session import SessionResult
from edgevoice.trace import STAGE_NAMES, percentile

DEFAULT_BUDGET_MS = 500.0
STAGE_BUDGET_MS = {
    # how a 500 ms voice-to-voice budget is meant to be spent (scaled to the configured budget)
    "endpointing": 220.0,
    "capture": 20.0,
    "recognition": 40.0,
    "first_token": 60.0,
    "first_clause": 80.0,
    "synthesis": 30.0,
    "queue": 20.0,
    "output": 30.0,
}
SPEAKER_SIDE = "voice-to-voice (speaker side)"
TRACE_TOTAL = "voice-to-voice (trace)"


@dataclass(frozen=True)
class Row:
    name: str
    p50_ms: float | None
    p95_ms: float | None
    share: float | None
    """The stage's part of the mean voice-to-voice (the shares of all stages add up to 1)."""
    budget_ms: float
    n: int

    @property
    def over(self) -> bool:
        return self.p95_ms is not None and self.p95_ms > self.budget_ms


def _ms(values: list[float]) -> tuple[float | None, float | None]:
    p50, p95 = percentile(values, 50), percentile(values, 95)
    return (None if p50 is None else round(p50, 1)), (None if p95 is None else round(p95, 1))


def rows(result: SessionResult, budget_ms: float = DEFAULT_BUDGET_MS) -> list[Row]:
    """The table: one row per stage, then voice-to-voice from the trace and as measured on the speaker side."""
    scale = budget_ms / DEFAULT_BUDGET_MS
    complete = [t for t in result.turns if t.get("voice_to_voice_ms") is not None]
    totals = [float(str(t["voice_to_voice_ms"])) for t in complete]
    mean_total = statistics.fmean(totals) if totals else None
    out: list[Row] = []
    for stage in STAGE_NAMES:
        values = [float(t["stages_ms"][stage]) for t in complete if stage in t["stages_ms"]]  # type: ignore[index,operator]
        p50, p95 = _ms(values)
        share = statistics.fmean(values) / mean_total if values and mean_total else None
        out.append(Row(stage, p50, p95, share, STAGE_BUDGET_MS[stage] * scale, len(values)))
    p50, p95 = _ms(totals)
    out.append(Row(TRACE_TOTAL, p50, p95, 1.0 if totals else None, budget_ms, len(totals)))
    speaker = [s * 1000 for s in result.speaker_side_s if s is not None]
    p50, p95 = _ms(speaker)
    out.append(Row(SPEAKER_SIDE, p50, p95, None, budget_ms, len(speaker)))
    return out


@dataclass(frozen=True)
class Group:
    """Voice-to-voice over a group of utterances (speaker side where measured, else the trace)."""

    name: str
    p50_ms: float | None
    p95_ms: float | None
    n: int


def _answering(result: SessionResult) -> list[Record]:
    """Per utterance, the turn that answered it: the second of a split utterance, else its only one."""
    extra = iter(result.extra_turns)
    split = result.split or [False] * len(result.turns)
    return [next(extra) if was_split else turn for turn, was_split in zip(result.turns, split, strict=True)]


def _latencies_ms(result: SessionResult) -> list[float | None]:
    """Per utterance: voice-to-voice on the speaker side when measured, else from its answering turn's trace."""
    speaker = result.speaker_side_s or [None] * len(result.turns)
    out: list[float | None] = []
    for turn, side in zip(_answering(result), speaker, strict=True):
        trace = turn.get("voice_to_voice_ms")
        out.append(side * 1000 if side is not None else None if trace is None else float(str(trace)))
    return out


def groups(result: SessionResult) -> list[Group]:
    """Voice-to-voice by path (answered from the knowledge or through the language model) and by the voice that
    asked: the model path and the voices other than the kiosk's own are reported apart from the rest."""
    if len(result.utterances) != len(result.turns):
        return []  # a partial result: not every utterance has its turn
    latencies = _latencies_ms(result)
    keys: dict[str, list[float]] = {}
    for turn, utterance, ms in zip(_answering(result), result.utterances, latencies, strict=True):
        path = "path: language model" if turn.get("llm") else "path: from the knowledge"
        for key in (path, f"voice: {utterance.voice}"):
            values = keys.setdefault(key, [])
            if ms is not None:
                values.append(ms)
    return [Group(name, *_ms(values), len(values)) for name, values in sorted(keys.items())]


def half_sentence_replies(result: SessionResult) -> tuple[int, int]:
    """(utterances answered in two halves, utterances with a pause in mid-sentence)."""
    paused = [u.paused for u in result.utterances]
    return sum(s for s, p in zip(result.split, paused, strict=False) if p), sum(paused)


def rejoined_halves(result: SessionResult) -> int:
    """Utterances answered in two halves whose second turn went on with the first (``endpointing.rejoin_ms``): the
    first reply was cut and the whole question answered."""
    extra = iter(result.extra_turns)
    split = result.split or [False] * len(result.turns)
    rejoined = 0
    for turn, was_split in zip(result.turns, split, strict=True):
        if was_split:
            continues = next(extra, {}).get("continues")
            rejoined += continues is not None and continues == turn.get("turn")
    return rejoined


def halves_record(result: SessionResult) -> dict[str, int]:
    split, paused = half_sentence_replies(result)
    return {"split": split, "paused": paused, "rejoined": rejoined_halves(result)}


def verdict_total(result: SessionResult, budget_ms: float) -> Row:
    """The row the verdict is taken on: the speaker side when it was measured, else the appliance's trace."""
    table = rows(result, budget_ms)
    speaker, trace = table[-1], table[-2]
    return speaker if speaker.n else trace


def exit_code(result: SessionResult, budget_ms: float) -> int:
    """0: every utterance answered and p95 voice-to-voice within budget; 1: over budget; 2: utterances went
    unanswered (a split utterance is answered by its second turn: it counts among the half-sentence replies)."""
    if not result.turns or any(t.get("voice_to_voice_ms") is None for t in _answering(result)):
        return 2
    total = verdict_total(result, budget_ms)
    if total.p95_ms is None:
        return 2
    return 1 if total.p95_ms > budget_ms else 0


def table(result: SessionResult, budget_ms: float) -> str:
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.0f}"

    lines = [f"{'stage':<32}{'p50 ms':>8}{'p95 ms':>8}{'share':>8}{'budget':>8}", "-" * 64]
    for row in rows(result, budget_ms):
        if row.name == TRACE_TOTAL:
            lines.append("-" * 64)
        share = "-" if row.share is None else f"{row.share * 100:.0f}%"
        flag = "  over" if row.over else ""
        lines.append(f"{row.name:<32}{fmt(row.p50_ms):>8}{fmt(row.p95_ms):>8}{share:>8}{row.budget_ms:>8.0f}{flag}")
    by = groups(result)
    if len(by) > 2:  # more than one path or voice
        lines += ["-" * 64, f"{'voice-to-voice by':<32}{'p50 ms':>8}{'p95 ms':>8}{'turns':>8}"]
        lines += [f"  {g.name:<30}{fmt(g.p50_ms):>8}{fmt(g.p95_ms):>8}{g.n:>8}" for g in by]
    split, paused = half_sentence_replies(result)
    if paused:
        lines.append(f"replies to half a sentence: {split} of {paused} utterances with a pause in mid-sentence")
        if split:
            lines.append(f"  of them cut when the visitor went on, and answered whole: {rejoined_halves(result)}")
    return "\n".join(lines)


def report(result: SessionResult, budget_ms: float, *, chart: str | None = None) -> dict[str, Any]:
    """The JSON report: the table, every turn's record, the speaker-side measurements, xruns and the verdict."""
    code = exit_code(result, budget_ms)
    return {
        "mode": result.mode,
        "budget_ms": budget_ms,
        "exit_code": code,
        "verdict": {0: "pass", 1: "over budget", 2: "unanswered turns"}[code],
        "verdict_on": verdict_total(result, budget_ms).name,
        "table": [row.__dict__ | {"over": row.over} for row in rows(result, budget_ms)],
        "speaker_side_ms": [None if s is None else round(s * 1000, 1) for s in result.speaker_side_s],
        "utterances": [{"text": u.text, "voice": u.voice, "paused": u.paused} for u in result.utterances],
        "by": [g.__dict__ for g in groups(result)],
        "half_sentence_replies": halves_record(result),
        "split": result.split,
        "extra_turns": result.extra_turns,
        "turns": result.turns,
        "stopped": result.stopped,
        "load_ms": result.ready.get("load_ms"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "python": platform.python_version(),
        },
        "chart": chart,
    }
