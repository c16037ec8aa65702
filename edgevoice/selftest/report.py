"""The self-test's verdict: per-stage p50/p95, each stage's share of the total, the budget, and the exit code."""

from __future__ import annotations

import platform
import statistics
from dataclasses import dataclass
from typing import Any

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


def verdict_total(result: SessionResult, budget_ms: float) -> Row:
    """The row the verdict is taken on: the speaker side when it was measured, else the appliance's trace."""
    table = rows(result, budget_ms)
    speaker, trace = table[-1], table[-2]
    return speaker if speaker.n else trace


def exit_code(result: SessionResult, budget_ms: float) -> int:
    """0: every turn answered and p95 voice-to-voice within budget; 1: over budget; 2: turns went unanswered."""
    if not result.turns or any(t.get("voice_to_voice_ms") is None for t in result.turns):
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
        "utterances": [u.text for u in result.utterances],
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
