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
        help="measure the kiosk (--quality: recognition, answers, speech round trip)",
        description="Benchmarks of the kiosk on the installed models.",
    )
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
    from edgevoice.bench.quality import QualityOptions, quick_options, run_quality
    from edgevoice.bench.quality_report import format_quality
    from edgevoice.cli import find_config
    from edgevoice.engines.factory import model_store

    if not args.quality:
        print("edgevoice bench: name a benchmark (--quality)", file=sys.stderr)
        return 2
    config = find_config(args.config)
    options = quick_options() if args.quick else QualityOptions()
    if args.defaults_only:
        options = options.defaults_only(config)

    def progress(message: str) -> None:
        print(f"... {message}", file=sys.stderr, flush=True)

    report = run_quality(config, model_store(config), options, progress=progress)
    print(format_quality(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0
