"""``edgevoice bench``: argparse builder mounted by the main CLI (``add_bench_parser``) and its handler."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from edgevoice.cli_json import emit, human

__all__ = ["add_bench_parser"]


def add_bench_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "bench",
        help="benchmarks: each engine's speed by its knobs, the whole pipeline's voice-to-voice (--pipeline), "
        "the answers' quality (--quality)",
        description="Benchmarks of the kiosk on the installed models. With no option: the engine benchmarks "
        "(recognition real-time factor by audio_ctx and threads; language model prompt and generation tokens/s, "
        "first token cold and with the cached prefix; synthesis first audio and real-time factor; VAD time per "
        "frame). Medians of several runs; ratios compare the variants of one run.",
    )
    parser.add_argument(
        "--engines", action="store_true", help="the engine benchmarks (the default when nothing else is named)"
    )
    parser.add_argument(
        "--pipeline",
        action="store_true",
        help="voice-to-voice of the whole appliance (a self-test session per configuration), configurations side by "
        "side: the box's own and the --compare variants (default: Whisper's full window, the LLM on one thread)",
    )
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE[,...]",
        help="a configuration variant for --pipeline, e.g. 'endpointing.silence_ms=300' or "
        "'llm.threads=1,asr.threads=1' (repeatable)",
    )
    parser.add_argument(
        "--ablation",
        nargs="*",
        default=None,
        metavar="SECTION.KEY",
        help="with --pipeline: the configuration, then each latency technique switched the other way, and a table of "
        "each on and off side by side (default: every technique in edgevoice/bench/pipeline.py TECHNIQUES; or the "
        "true/false keys named, e.g. tts.presynthesize)",
    )
    parser.add_argument(
        "--idle",
        action="store_true",
        help="idle CPU: the appliance's share of a core while it listens to silence and to low room noise, its RSS "
        "and its busiest threads (`edgevoice run` in a private PulseAudio room; --compare adds variants, --rounds "
        "repeats them interleaved)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --idle: measurements per configuration")
    parser.add_argument("--turns", type=int, default=4, help="utterances per configuration with --pipeline")
    parser.add_argument(
        "--quality",
        action="store_true",
        help="answers on a venue's questions (the sample venue unless --venue), written and spoken: right facts, "
        "honest don't-know, small talk, invented facts per venue and split",
    )
    parser.add_argument(
        "--venue",
        action="append",
        default=[],
        metavar="DIR",
        help="with --quality: a venue directory (knowledge, persona.txt, questions.toml; venues/README.md), 'sample' "
        "for the sample venue, or 'all' for the sample venue and every venue under ./venues (repeatable)",
    )
    parser.add_argument(
        "--split",
        choices=("dev", "test", "both"),
        default="both",
        help="with --quality, or --pipeline with --voice: the questions' split",
    )
    parser.add_argument("--written-only", action="store_true", help="with --quality: the written questions only")
    parser.add_argument(
        "--learn",
        action="store_true",
        help="with --quality: each venue's first weeks: day 1 the development half, its misses attached to their "
        "right entries by a scripted operator, day 2 the test half; before and after the review (docs/measuring.md)",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="with --learn: also with the knowledge's compiled ways of asking (a finished compile's cache), alone and "
        "with the day-1 review",
    )
    parser.add_argument(
        "--voice",
        action="append",
        default=[],
        metavar="NAME",
        help="a voice that speaks the questions (repeatable). With --quality: the spoken questions' voices (default "
        "hibari-heart, espeak-en-gb+m3, festival-kal: three that are not the kiosk's; also espeak-en-us, espeak-en-gb, "
        "espeak-en-us+f3, festival-slt and the kiosk's own voice shifted: piper-joe, piper-joe-low-slow, "
        "piper-joe-high-fast). With --pipeline: the turns are the sample venue's questions spoken by these voices in "
        "turn instead of the self-test's utterances",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="with --quality and no --venue: the sample venue's full benchmark instead (the kiosk's voice shifted in "
        "pitch and tempo, clean and at 20/10 dB SNR: recognition WER, right facts, honest don't-knows, reply length, "
        "synthesizer round trip, phantoms; every installed model compared)",
    )
    parser.add_argument("--report", type=Path, metavar="OUT", help="also write the full report as JSON to OUT")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the full report as one JSON object on stdout (the tables go to stderr; docs/cli.md)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small subset (one voice, fewer questions; with --quality: one question of each kind a split)",
    )
    parser.add_argument("--defaults-only", action="store_true", help="only the configured models, no larger ones")
    parser.add_argument("--config")
    parser.set_defaults(handler=run_bench)
    return parser


def run_bench(args: argparse.Namespace) -> int:
    from edgevoice.config.load import find_config
    from edgevoice.models.configured import model_store
    from edgevoice.ownership import JSON_REPORT, check_output_path

    config = find_config(args.config)
    if args.report:
        check_output_path(args.report, key="--report", kind=JSON_REPORT)  # before the runs, not after
    store = model_store(config)
    engines = args.engines or not (args.quality or args.pipeline or args.idle)

    def progress(message: str) -> None:
        print(f"... {message}", file=sys.stderr, flush=True)

    report: dict[str, Any] = {"machine": machine()}
    if engines:
        from edgevoice.bench.engines import EngineOptions, format_engines, run_engines

        result = run_engines(config, store, EngineOptions.quick() if args.quick else EngineOptions(), progress)
        report["engines"] = result.as_dict()
        human(format_engines(result), json_mode=args.json)
    if args.pipeline:
        from edgevoice.bench import pipeline as bench

        techniques = None
        if args.ablation is not None:
            techniques = [bench.technique(key) for key in args.ablation] if args.ablation else list(bench.TECHNIQUES)
            variants = bench.ablation_variants(config, techniques)
        elif args.compare:
            variants = [bench.DEFAULT_VARIANTS[0], *(parse_variant(v) for v in args.compare)]
        else:
            variants = list(bench.DEFAULT_VARIANTS)
        spoken = []
        if args.voice:
            from edgevoice.bench.venue import sample_venue
            from edgevoice.bench.voices import voice_speaker

            questions = sample_venue().in_split(args.split)
            spoken = bench.voiced_utterances(questions, args.voice, args.turns, voice_speaker)
            progress(f"pipeline: {len(spoken)} turns of the sample venue's questions ({args.split}) in other voices")
        rows = bench.run_pipeline(
            config, store.models_dir, variants, turns=args.turns, progress=progress, utterances=spoken
        )
        report["pipeline"] = rows
        human(bench.format_pipeline(rows), json_mode=args.json)
        if techniques is not None:
            human("\n" + bench.format_ablation(rows, techniques, config), json_mode=args.json)
    if args.idle:
        from edgevoice.bench import idle

        idle_variants = [idle.IdleVariant("configured")]
        idle_variants += [idle.IdleVariant(v.name, v.overrides) for v in map(parse_variant, args.compare)]
        report["idle"] = idle.run_idle(config, store.models_dir, idle_variants, rounds=args.rounds, progress=progress)
        human(idle.format_idle(report["idle"]), json_mode=args.json)
    if args.quality and args.learn:
        from edgevoice.bench.venue_learning import finished_compile, format_learning, run_learning
        from edgevoice.bench.venue_quality import VenueOptions
        from edgevoice.bench.voices import DEFAULT_VOICES

        learn_options = VenueOptions(
            written_only=args.written_only, voices=tuple(args.voice) or DEFAULT_VOICES, per_kind=1 if args.quick else 0
        )
        compiled = finished_compile if args.compiled else None
        report["quality"] = run_learning(
            config, store, venues(args.venue), learn_options, compiled=compiled, progress=progress
        )
        human(format_learning(report["quality"]), json_mode=args.json)
    elif args.quality and not args.full:
        from edgevoice.bench.quality_report import format_venues
        from edgevoice.bench.venue_quality import VenueOptions, run_venues
        from edgevoice.bench.voices import DEFAULT_VOICES

        venue_options = VenueOptions(
            split=args.split,
            written_only=args.written_only,
            voices=tuple(args.voice) or DEFAULT_VOICES,
            per_kind=1 if args.quick else 0,
        )
        report["quality"] = run_venues(config, store, venues(args.venue), venue_options, progress=progress)
        human(format_venues(report["quality"]), json_mode=args.json)
    elif args.quality:
        from edgevoice.bench.quality import QualityOptions, quick_options, run_quality
        from edgevoice.bench.quality_report import format_quality

        options = quick_options() if args.quick else QualityOptions()
        if args.defaults_only:
            options = options.defaults_only(config)
        quality = run_quality(config, store, options, progress=progress)
        report["quality"] = quality
        human(format_quality(quality), json_mode=args.json)
    payload = report if (engines or args.pipeline or args.idle) else report["quality"]
    if args.report:
        args.report.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if args.json:
        emit(payload)
    return 0


def parse_variant(text: str) -> Any:
    """``"llm.threads=1,asr.audio_ctx=1500"`` -> a :class:`~edgevoice.bench.pipeline.Variant` (values are TOML)."""
    import tomllib

    from edgevoice.bench.pipeline import Variant
    from edgevoice.errors import ConfigError

    overrides: dict[str, dict[str, Any]] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot or not name:
            raise ConfigError(f"--compare {text!r}: expected SECTION.KEY=VALUE[,...]")
        try:
            parsed = tomllib.loads(f"v = {value.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            parsed = value.strip()  # a bare word: a string
        overrides.setdefault(section, {})[name] = parsed
    return Variant(text, overrides)


def machine() -> dict[str, Any]:
    import os
    import platform

    return {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}


def venues(names: list[str]) -> list[Any]:
    """The venues ``--venue`` names: directories, ``sample`` (also with none named) and ``all`` (the sample venue
    and every venue under ``./venues``)."""
    from edgevoice.bench.venue import SAMPLE, load_venue, sample_venue, venue_dirs

    out: list[Any] = []
    for name in names or [SAMPLE]:
        if name == "all":
            out += [sample_venue(), *(load_venue(d) for d in venue_dirs("venues"))]
        elif name == SAMPLE:
            out.append(sample_venue())
        else:
            out.append(load_venue(name))
    return out
