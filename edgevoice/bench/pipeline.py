"""The whole pipeline's voice-to-voice, several configurations side by side in one run.

Each configuration is the box's own configuration with some keys changed; each runs a self-test session (the real
appliance in a private PulseAudio room answering the bundled utterances, see :mod:`edgevoice.selftest.session`),
one after the other, so they share the machine's state of the moment. Voice-to-voice is measured on the speaker side
(end of the utterance in the microphone recording → first reply sample in the loudspeaker recording); the median of
each configuration is compared with the first's (ratio).

Direct answers (an entry's own words) and the language model's replies take very different paths, so each turn is
also told by who answered it (the kiosk's own grounding of the turn's transcript under that configuration: the
gate, a direct answer or the model), and the model's turns get their own median.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgevoice.config import Config
from edgevoice.config.file import Overrides, write_config
from edgevoice.config.load import load_config
from edgevoice.engines.text_turn import MEASURED_THRESHOLD
from edgevoice.errors import ConfigError
from edgevoice.trace import percentile

if TYPE_CHECKING:
    from edgevoice.bench.venue import Question
    from edgevoice.bench.voices import SpeakFn
    from edgevoice.kiosk.grounding import Kiosk
    from edgevoice.selftest.session import SessionResult
    from edgevoice.selftest.utterances import Utterance


@dataclass(frozen=True)
class Variant:
    name: str
    overrides: Overrides


@dataclass(frozen=True)
class Technique:
    """A technique switched by one config key (``section.key``): the ablation runs the pipeline with it flipped
    from the configured value, beside the configuration itself. A true/false key by default; a key with another
    kind of value names the value that turns it ``off`` and the one that turns it ``on``."""

    name: str
    key: str
    """``section.key``, e.g. ``tts.presynthesize``."""
    on: bool | float = True
    off: bool | float = False

    def _configured(self, config: Config) -> object:
        section, _, key = self.key.partition(".")
        return getattr(getattr(config, section, None), key, None)

    def value(self, config: Config) -> bool:
        """Whether the technique is on in ``config``."""
        value = self._configured(config)
        if isinstance(self.on, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"--ablation {self.key}: not a true/false key of the configuration")
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"--ablation {self.key}: not a number key of the configuration")
        return value != self.off

    def flipped(self, config: Config) -> Variant:
        """The configuration with this technique switched the other way."""
        on = self.value(config)
        section, _, key = self.key.partition(".")
        return Variant(f"{self.name} {'off' if on else 'on'}", {section: {key: self.off if on else self.on}})


TECHNIQUES = (
    Technique("presynthesized replies", "tts.presynthesize"),
    Technique("speculative reply", "endpointing.speculative_reply"),
    Technique("question prefilled while spoken", "endpointing.prefill_while_speaking"),
    Technique("direct answers", "kiosk.direct_answers"),
    Technique("words' end of turn", "endpointing.text_incomplete_below", on=MEASURED_THRESHOLD, off=0.0),
    Technique("words and sound fused", "endpointing.text_complete_at", on=0.1, off=0.0),
    Technique("words' verdict first", "endpointing.words_first"),
    Technique("a resumed turn rejoined", "endpointing.rejoin_ms", on=1000, off=0),
)
"""What `edgevoice bench --pipeline --ablation` switches, one at a time: the reply audio made ahead of time, the
reply begun at the pause, the question put into the model's cache while it is spoken, the knowledge's answers spoken
without the model, a pause judged by its words as well as its sound, and the two fused (the words deciding first,
an unsure pause waiting ``unsure_silence_ms``) rather than the words only vetoing, Smart Turn asked only where the
words leave the pause open, and speech right after a commit
going on with the committed turn. A new technique with a switch adds
one line here (or is named on the command line: ``--ablation section.key``, a true/false key)."""


def technique(key: str) -> Technique:
    """The technique switched by ``key`` (``section.key``): one of :data:`TECHNIQUES`, else one named by its key."""
    for known in TECHNIQUES:
        if known.key == key:
            return known
    section, dot, name = key.partition(".")
    if not dot or not section or not name:
        raise ConfigError(f"--ablation {key!r}: expected SECTION.KEY (a true/false key)")
    return Technique(key, key)


def ablation_variants(config: Config, techniques: Sequence[Technique] = TECHNIQUES) -> list[Variant]:
    """The configuration as it is, then each technique flipped."""
    return [Variant("configured", {}), *(t.flipped(config) for t in techniques)]


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
    utterances: Sequence[Utterance] = (),
) -> list[dict[str, Any]]:
    """Each of the ``variants`` answering ``turns`` of the self-test's bundled utterances, or the ``utterances``
    given (:func:`voiced_utterances`)."""
    from edgevoice.selftest.session import run_session

    base = None if config.source == "<defaults>" else Path(config.source)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="edgevoice-bench-") as tmp:
        for i, variant in enumerate(variants):
            path = Path(tmp) / f"variant-{i}.toml"
            write_config(path, variant.overrides, base=base)
            progress(f"pipeline: {variant.name} ({len(utterances) or turns} turns)")
            result = run_session(
                turns, models_dir=models_dir, config_path=str(path), progress=progress, utterances=utterances
            )
            rows.append(summarize(variant, result, _kiosk(load_config(path))))
    first = rows[0]["speaker_side_p50_ms"] if rows else None
    for row in rows:
        value = row["speaker_side_p50_ms"]
        row["ratio"] = round(value / first, 2) if first and value is not None else None
    return rows


def voiced_utterances(
    questions: Sequence[Question], voices: Sequence[str], turns: int, speaker: Callable[[str], SpeakFn]
) -> list[Utterance]:
    """``turns`` utterances of the venue's ``questions`` (in order, again from the first when they run out), the
    ``i``-th spoken by ``voices[i % len(voices)]`` (voices that are not the kiosk's; ``speaker`` renders a voice by
    name, :func:`edgevoice.bench.voices.voice_speaker`): a question asked again comes in another voice whenever the
    number of questions is not a multiple of the number of voices."""
    from edgevoice.selftest.utterances import Utterance

    if not questions or not voices:
        raise ConfigError("the pipeline benchmark's spoken questions need at least one question and one voice")
    if turns < 1:
        raise ConfigError(f"--turns {turns}: at least one turn")
    speakers = {name: speaker(name) for name in voices}
    rendered: dict[tuple[str, str], Utterance] = {}
    out = []
    for i in range(turns):
        question, voice = questions[i % len(questions)], voices[i % len(voices)]
        key = (question.id, voice)
        if key not in rendered:
            audio = speakers[voice](question.text)
            rendered[key] = Utterance(f"{question.id}-{voice}", question.text, voice, recording=audio)
        out.append(rendered[key])
    return out


def answered_by(kiosk: Kiosk, transcript: str) -> str:
    """Who answers ``transcript`` under ``kiosk``: ``"gate"`` (not covered: "I don't know"), ``"direct"`` (an
    entry's own words), ``"small talk"`` (a reply of the persona) or ``"model"``."""
    grounding = kiosk.ground(transcript)
    if grounding.small_talk is not None:
        return "small talk"
    return "gate" if not grounding.known else "direct" if grounding.direct is not None else "model"


def summarize(variant: Variant, result: SessionResult, kiosk: Kiosk) -> dict[str, Any]:
    """One configuration's row: medians over all turns and over the model's turns, and every turn."""
    from edgevoice.selftest.report import halves_record

    per_turn = []
    for i, turn in enumerate(result.turns):
        side = result.speaker_side_s[i] if i < len(result.speaker_side_s) else None
        transcript = str(turn.get("transcript") or "")
        utterance = result.utterances[i] if i < len(result.utterances) else None
        per_turn.append(
            {
                "said": None if utterance is None else utterance.text,
                "voice": None if utterance is None else utterance.voice,
                "transcript": transcript,
                "reason": turn.get("reason"),
                "whole": None if utterance is None else not utterance.paused,
                "answered_by": answered_by(kiosk, transcript) if transcript else None,
                "speaker_side_ms": None if side is None else round(side * 1000, 1),
                "voice_to_voice_ms": turn.get("voice_to_voice_ms"),
                "stages_ms": dict(turn.get("stages_ms") or {}),  # type: ignore[call-overload]
            }
        )
    measured = [t for t in per_turn if t["speaker_side_ms"] is not None]
    speaker = [float(t["speaker_side_ms"]) for t in measured]
    model = [float(t["speaker_side_ms"]) for t in measured if t["answered_by"] == "model"]
    direct = [float(t["speaker_side_ms"]) for t in measured if t["answered_by"] == "direct"]
    direct_commit = [c for t in per_turn if t["answered_by"] == "direct" and (c := _commit_to_audio(t)) is not None]
    trace = [float(str(t["voice_to_voice_ms"])) for t in per_turn if t["voice_to_voice_ms"] is not None]
    commit = [c for t in per_turn if (c := _commit_after_speech(t)) is not None]
    stages: dict[str, list[float]] = {}
    for t in per_turn:
        for stage, ms in t["stages_ms"].items():
            stages.setdefault(stage, []).append(float(ms))
    return {
        "variant": variant.name,
        "overrides": {k: dict(v) for k, v in variant.overrides.items()},
        "turns": len(result.turns),
        "speaker_side_p50_ms": _round(percentile(speaker, 50)),
        "speaker_side_p95_ms": _round(percentile(speaker, 95)),
        "model_turns": sum(t["answered_by"] == "model" for t in per_turn),
        "model_speaker_side_p50_ms": _round(percentile(model, 50)),
        "direct_turns": sum(t["answered_by"] == "direct" for t in per_turn),
        "direct_speaker_side_p50_ms": _round(percentile(direct, 50)),
        "direct_commit_to_audio_p50_ms": _round(percentile(direct_commit, 50)),
        "trace_p50_ms": _round(percentile(trace, 50)),
        "commit_after_speech_p50_ms": _round(percentile(commit, 50)),
        "commit_after_speech_p95_ms": _round(percentile(commit, 95)),
        "whole_questions_waited": sum(t["whole"] is True and t["reason"] not in (None, "complete") for t in per_turn),
        "whole_questions": sum(t["whole"] is True for t in per_turn),
        "stages_p50_ms": {k: round(statistics.median(v), 1) for k, v in stages.items()},
        "output_underruns": result.stopped.get("output_underruns"),
        "half_sentence_replies": halves_record(result),
        "per_turn": per_turn,
    }


COMMIT_TO_AUDIO = ("recognition", "first_token", "first_clause", "synthesis")
"""The stages from the commit to the reply's first synthesized audio (:data:`edgevoice.trace.STAGES`)."""


COMMIT_AFTER_SPEECH = ("endpointing", "capture")
"""The stages from the visitor's last voiced sample to the turn's commit (:data:`edgevoice.trace.STAGES`)."""


def _commit_after_speech(turn: dict[str, Any]) -> float | None:
    stages = turn["stages_ms"]
    if not all(stage in stages for stage in COMMIT_AFTER_SPEECH):
        return None
    return sum(float(stages[stage]) for stage in COMMIT_AFTER_SPEECH)


def _commit_to_audio(turn: dict[str, Any]) -> float | None:
    stages = turn["stages_ms"]
    if not all(stage in stages for stage in COMMIT_TO_AUDIO):
        return None
    return sum(float(stages[stage]) for stage in COMMIT_TO_AUDIO)


def _kiosk(config: Config) -> Kiosk:
    from edgevoice.app import build_kiosk

    return build_kiosk(config)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def format_pipeline(rows: Sequence[dict[str, Any]]) -> str:
    width = max([24, *(len(r["variant"]) + 2 for r in rows)])
    lines = [
        "voice-to-voice, whole pipeline (speaker side, ms)",
        f"{'variant':<{width}}{'p50':>8}{'p95':>8}{'ratio':>8}{'direct p50':>12}{'model p50':>11}{'commit p50/95':>15}"
        f"{'waited':>8}{'trace p50':>11}  stages p50",
    ]
    for r in rows:

        def fmt(v: object) -> str:
            return "-" if v is None else f"{v:.0f}" if isinstance(v, float) else str(v)

        stages = ", ".join(f"{k} {v:.0f}" for k, v in r["stages_p50_ms"].items())
        model = f"{fmt(r['model_speaker_side_p50_ms'])} ({r['model_turns']})"
        direct = f"{fmt(r['direct_speaker_side_p50_ms'])} ({r['direct_turns']})"
        commit = f"{fmt(r['commit_after_speech_p50_ms'])}/{fmt(r['commit_after_speech_p95_ms'])}"
        waited = f"{r['whole_questions_waited']}/{r['whole_questions']}"
        lines.append(
            f"{r['variant']:<{width}}{fmt(r['speaker_side_p50_ms']):>8}{fmt(r['speaker_side_p95_ms']):>8}"
            f"{fmt(r['ratio']):>8}{direct:>12}{model:>11}{commit:>15}{waited:>8}{fmt(r['trace_p50_ms']):>11}  {stages}"
        )
    lines.append(
        "direct / model p50: the turns read out from the knowledge / answered by the language model (their count in "
        "brackets); commit: the visitor's last voiced sample to the turn's commit (endpointing + capture); waited: "
        "questions said without a pause whose turn waited for a longer silence (not ended at the pause) / all of them"
    )
    return "\n".join(lines)


def format_ablation(rows: Sequence[dict[str, Any]], techniques: Sequence[Technique], config: Config) -> str:
    """Each technique on and off side by side: the configured row (``rows[0]``) and the row with that technique
    flipped (``rows[1:]``, in the order of ``techniques``). Columns: all turns' p50 and p95 on the speaker side,
    the direct answers' and the model's p50, the off/on ratio of the p50, and the questions with a pause in
    mid-sentence answered in two halves."""

    def fmt(v: object) -> str:
        return "-" if v is None else f"{v:.0f}" if isinstance(v, float) else str(v)

    lines = [
        "ablation: voice-to-voice with each technique on and off (speaker side, ms; one run, same machine)",
        f"{'technique':<26}{'':>4}{'p50':>8}{'p95':>8}{'direct p50':>12}{'commit>audio':>14}{'model p50':>11}"
        f"{'off/on':>8}{'halves (rejoined)':>19}",
    ]
    for t, flipped in zip(techniques, rows[1:], strict=True):
        on, off = (rows[0], flipped) if t.value(config) else (flipped, rows[0])
        for label, row in (("on", on), ("off", off)):
            ratio = ""
            if label == "off" and on["speaker_side_p50_ms"] and off["speaker_side_p50_ms"] is not None:
                ratio = f"{off['speaker_side_p50_ms'] / on['speaker_side_p50_ms']:.2f}"
            lines.append(
                f"{t.name if label == 'on' else '':<26}{label:>4}{fmt(row['speaker_side_p50_ms']):>8}"
                f"{fmt(row['speaker_side_p95_ms']):>8}{fmt(row['direct_speaker_side_p50_ms']):>12}"
                f"{fmt(row['direct_commit_to_audio_p50_ms']):>14}{fmt(row['model_speaker_side_p50_ms']):>11}{ratio:>8}"
                f"{_halves(row):>19}"
            )
    lines.append(
        "direct p50: the turns answered with an entry's own words; commit>audio: their commit to first synthesized "
        "audio (recognition, first token, first clause, synthesis); halves: questions with a pause in mid-sentence "
        "answered in two halves, of those asked (rejoined: of them, the first reply cut when the visitor went on and "
        "the whole answered)"
    )
    return "\n".join(lines)


def _halves(row: dict[str, Any]) -> str:
    halves = row.get("half_sentence_replies") or {}
    if not halves.get("paused"):
        return "-"
    return f"{halves['split']}/{halves['paused']} ({halves.get('rejoined', 0)})"
