"""``edgevoice bench``: argparse builder mounted by the main CLI (``add_bench_parser``) and its handler."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

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
    parser.add_argument("--turns", type=int, default=4, help="utterances per configuration with --pipeline")
    parser.add_argument(
        "--quality",
        action="store_true",
        help="spoken questions about the sample venue, several voices, clean and at 20/10 dB SNR: recognition WER, "
        "right facts, honest don't-knows, reply length, synthesizer round trip; every installed model compared",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the full report as JSON to OUT")
    parser.add_argument("--quick", action="store_true", help="a small subset (one voice, fewer questions)")
    parser.add_argument("--defaults-only", action="store_true", help="only the configured models, no larger ones")
    parser.add_argument("--config")
    parser.set_defaults(handler=run_bench)
    return parser


def run_bench(args: argparse.Namespace) -> int:
    from edgevoice.config import find_config
    from edgevoice.engines.factory import model_store

    config = find_config(args.config)
    store = model_store(config)
    engines = args.engines or not (args.quality or args.pipeline)

    def progress(message: str) -> None:
        print(f"... {message}", file=sys.stderr, flush=True)

    report: dict[str, Any] = {"machine": machine()}
    if engines:
        from edgevoice.bench.engines import EngineOptions, format_engines, run_engines

        result = run_engines(config, store, EngineOptions.quick() if args.quick else EngineOptions(), progress)
        report["engines"] = result.as_dict()
        print(format_engines(result))
    if args.pipeline:
        from edgevoice.bench.pipeline import DEFAULT_VARIANTS, format_pipeline, run_pipeline

        variants = [DEFAULT_VARIANTS[0], *(parse_variant(v) for v in args.compare)] if args.compare else None
        rows = run_pipeline(config, store.models_dir, variants or DEFAULT_VARIANTS, turns=args.turns, progress=progress)
        report["pipeline"] = rows
        print(format_pipeline(rows))
    if args.quality:
        from edgevoice.bench.quality import QualityOptions, quick_options, run_quality
        from edgevoice.bench.quality_report import format_quality

        options = quick_options() if args.quick else QualityOptions()
        if args.defaults_only:
            options = options.defaults_only(config)
        quality = run_quality(config, store, options, progress=progress)
        report["quality"] = quality
        print(format_quality(quality))
    if args.json:
        payload = report if (engines or args.pipeline) else report["quality"]
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
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
