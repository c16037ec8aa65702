"""The whole pipeline's voice-to-voice, several configurations side by side in one run.

Each configuration is the box's own configuration with some keys changed; each runs a self-test session (the real
appliance in a private PulseAudio room answering the bundled utterances, see :mod:`edgevoice.selftest.session`),
one after the other, so they share the machine's state of the moment. Voice-to-voice is measured on the speaker side
(end of the utterance in the microphone recording → first reply sample in the loudspeaker recording); the median of
each configuration is compared with the first's (ratio).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgevoice.config import Config
from edgevoice.config_file import Overrides, write_config
from edgevoice.trace import percentile


@dataclass(frozen=True)
class Variant:
    name: str
    overrides: Overrides


DEFAULT_VARIANTS = (
    Variant("configured", {}),
    Variant("whisper full window", {"asr": {"audio_ctx": 1500}}),
    Variant("llm 1 thread", {"llm": {"threads": 1}}),
)
"""What `edgevoice bench --pipeline` compares when no variants are named: the box's configuration, recognition with
Whisper's whole 30 s window instead of one sized to the utterance, and the language model on one core."""


def run_pipeline(
    config: Config,
    models_dir: Path,
    variants: Sequence[Variant] = DEFAULT_VARIANTS,
    *,
    turns: int = 4,
    progress: Callable[[str], None] = lambda _m: None,
) -> list[dict[str, Any]]:
    from edgevoice.selftest.session import run_session

    base = None if config.source == "<defaults>" else Path(config.source)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="edgevoice-bench-") as tmp:
        for i, variant in enumerate(variants):
            path = Path(tmp) / f"variant-{i}.toml"
            write_config(path, variant.overrides, base=base)
            progress(f"pipeline: {variant.name} ({turns} turns)")
            result = run_session(turns, models_dir=models_dir, config_path=str(path), progress=progress)
            speaker = [s * 1000 for s in result.speaker_side_s if s is not None]
            trace = [float(str(t["voice_to_voice_ms"])) for t in result.turns if t.get("voice_to_voice_ms") is not None]
            stages: dict[str, list[float]] = {}
            for turn in result.turns:
                for stage, ms in dict(turn.get("stages_ms") or {}).items():  # type: ignore[call-overload]
                    stages.setdefault(stage, []).append(float(ms))
            rows.append(
                {
                    "variant": variant.name,
                    "overrides": {k: dict(v) for k, v in variant.overrides.items()},
                    "turns": len(result.turns),
                    "speaker_side_p50_ms": _round(percentile(speaker, 50)),
                    "speaker_side_p95_ms": _round(percentile(speaker, 95)),
                    "trace_p50_ms": _round(percentile(trace, 50)),
                    "stages_p50_ms": {k: round(statistics.median(v), 1) for k, v in stages.items()},
                    "output_underruns": result.stopped.get("output_underruns"),
                }
            )
    first = rows[0]["speaker_side_p50_ms"] if rows else None
    for row in rows:
        value = row["speaker_side_p50_ms"]
        row["ratio"] = round(value / first, 2) if first and value is not None else None
    return rows


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def format_pipeline(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "voice-to-voice, whole pipeline (speaker side, ms)",
        f"{'variant':<24}{'p50':>8}{'p95':>8}{'ratio':>8}{'trace p50':>11}  stages p50",
    ]
    for r in rows:

        def fmt(v: object) -> str:
            return "-" if v is None else f"{v:.0f}" if isinstance(v, float) else str(v)

        stages = ", ".join(f"{k} {v:.0f}" for k, v in r["stages_p50_ms"].items())
        lines.append(
            f"{r['variant']:<24}{fmt(r['speaker_side_p50_ms']):>8}{fmt(r['speaker_side_p95_ms']):>8}"
            f"{fmt(r['ratio']):>8}{fmt(r['trace_p50_ms']):>11}  {stages}"
        )
    return "\n".join(lines)
