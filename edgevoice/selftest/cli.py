"""`edgevoice selftest`: the real pipeline against the bundled utterances, a latency table, a JSON report and a
waterfall chart; exits non-zero when p95 voice-to-voice exceeds the budget (a post-install health check)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_selftest_parser(sub: Any) -> None:
    p = sub.add_parser(
        "selftest",
        help="measure voice-to-voice latency on this box with the real pipeline (no microphone needed)",
        description=__doc__,
    )
    p.add_argument("--config")
    p.add_argument("--turns", type=int, help="utterances to answer (default: each bundled utterance once)")
    p.add_argument("--budget-ms", type=float, help="p95 voice-to-voice budget (default [selftest] budget_ms, 500)")
    p.add_argument("--report", type=Path, default=Path("edgevoice-selftest.json"), help="JSON report to write")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the report as one JSON object on stdout (the table goes to stderr; docs/cli.md)",
    )
    p.add_argument("--chart", type=Path, default=Path("edgevoice-selftest.png"), help="waterfall chart (PNG)")
    p.add_argument(
        "--hardware",
        action="store_true",
        help="use the configured sound devices instead of a private PulseAudio loop (the utterances are played "
        "through this process's default output device; only the appliance's own trace measures the turns)",
    )
    p.set_defaults(handler=_cmd_selftest)


def _cmd_selftest(args: argparse.Namespace) -> int:
    from edgevoice.cli_json import emit, human
    from edgevoice.config.load import find_config
    from edgevoice.models.configured import model_store
    from edgevoice.ownership import JSON_REPORT, PNG, check_output_path
    from edgevoice.selftest.chart import waterfall
    from edgevoice.selftest.report import report, table
    from edgevoice.selftest.session import run_session
    from edgevoice.selftest.utterances import UTTERANCES

    config = find_config(args.config)
    check_output_path(args.report, key="--report", kind=JSON_REPORT)  # before a session of minutes, not after
    check_output_path(args.chart, key="--chart", kind=PNG)
    budget = args.budget_ms if args.budget_ms is not None else config.selftest.budget_ms
    store = model_store(config)
    result = run_session(
        len(UTTERANCES) if args.turns is None else args.turns,
        models_dir=store.models_dir,
        config_path=None if config.source == "<defaults>" else str(Path(config.source).resolve()),
        hardware=args.hardware,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    chart = waterfall(result, args.chart, budget_ms=budget)
    data = report(result, budget, chart=str(chart))
    args.report.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    stopped = result.stopped
    lines = [
        table(result, budget),
        f"\n{len(result.turns)} turns ({result.mode}); xruns: input overruns {stopped.get('input_overruns')}, "
        f"output underruns {stopped.get('output_underruns')}; echo attenuation {stopped.get('echo_attenuation_db')} dB",
        f"report: {args.report}  chart: {chart}",
        f"verdict: {data['verdict']} (p95 {data['verdict_on']} against {budget:.0f} ms)",
    ]
    human("\n".join(lines), json_mode=args.json)
    if args.json:
        emit(data)
    return int(data["exit_code"])
