"""The ``edgevoice`` command line."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from edgevoice import __version__
from edgevoice.cli_exit import run_command
from edgevoice.cli_json import emit, human
from edgevoice.cli_parser import CommandParser
from edgevoice.config import Config
from edgevoice.config.load import find_config
from edgevoice.errors import AudioDeviceError, ConfigError, ConfigErrors, EdgeVoiceError, combined_status

JSON_HELP = "print the result as one JSON object on stdout, nothing else there (docs/cli.md)"

STAGE_ORDER = ("vad", "asr", "llm_first_token", "first_audio", "llm", "tts", "total")
STAGE_LABELS = {
    "vad": "speech detection (VAD)",
    "asr": "recognition (whisper.cpp)",
    "llm_first_token": "LLM first token",
    "first_audio": "transcript -> first audio",
    "llm": "LLM generation",
    "tts": "synthesis (Piper)",
    "total": "total",
}


def _cmd_converse(args: argparse.Namespace) -> int:
    from edgevoice.app import build_assistant, build_kiosk, load_engines_with
    from edgevoice.audio import SAMPLE_RATE
    from edgevoice.audio.files import check_output_path, read_audio, write_wav
    from edgevoice.models.configured import model_store

    config = find_config(args.config)
    if args.out:
        check_output_path(args.out)
    audio = read_audio(args.input, rate=SAMPLE_RATE)
    t = time.perf_counter()
    store = model_store(config)
    # one question: only the prompt prefix is warmed (read back when an earlier start kept it); the recognizer's and
    # the voice's first run is the question's own
    engines, _, load_times = load_engines_with(config, store, {})
    try:
        t_kiosk = time.perf_counter()
        assistant = build_assistant(config, engines, kiosk=build_kiosk(config, store=store))
        load_times["kiosk"] = time.perf_counter() - t_kiosk
        try:
            prefix = assistant.warm_prefix()
            ready = time.perf_counter() - t
            result = assistant.converse(audio)
        finally:
            assistant.close()  # a large knowledge's background embedding: kept in the cache for the next call
    finally:
        engines.close()
    if args.out and not result.no_speech:
        write_wav(args.out, result.audio, result.sample_rate)
    if args.json:
        report = result.to_json()
        report["load_ms"] = {k: round(v * 1000, 1) for k, v in load_times.items()}
        report["ready_ms"] = round(ready * 1000, 1)
        report["prefix"] = prefix
        report["out"] = str(args.out) if args.out and not result.no_speech else None
        emit(report)
        return 0
    if result.no_speech:
        print("No speech found in the input: nothing to answer.")
    else:
        print(f"Visitor:   {result.transcript}")
        print(f"Assistant: {result.reply}")
        if args.out:
            print(f"Reply audio: {args.out} ({len(result.audio) / result.sample_rate:.2f} s)")
    print(f"\nModels loaded and warmed in {ready * 1000:.0f} ms. Time per stage:")
    stages = result.stage_ms()
    for name in STAGE_ORDER:
        if name in stages:
            print(f"  {STAGE_LABELS[name]:<28} {stages[name]:8.1f} ms")
    return 0


def _cmd_say(args: argparse.Namespace) -> int:
    from edgevoice.app_engines import open_voice
    from edgevoice.audio.files import check_output_path, write_wav
    from edgevoice.models.configured import model_store
    from edgevoice.reply.speech_text import normalize_for_speech

    config = find_config(args.config)
    check_output_path(args.out)
    import numpy as np

    # as it always spoke: [tts]'s threads and speed, no pause between sentences, on the CPU
    tts = open_voice(config, model_store(config), sentence_silence_ms=0, provider="cpu")
    audio = np.concatenate(list(tts.synthesize(normalize_for_speech(args.text))))
    write_wav(args.out, audio, tts.sample_rate)
    seconds = len(audio) / tts.sample_rate
    if args.json:
        emit({"out": str(args.out), "seconds": round(seconds, 3), "sample_rate": tts.sample_rate})
    else:
        print(f"{args.out}: {seconds:.2f} s at {tts.sample_rate} Hz")
    return 0


def _cmd_devices(args: argparse.Namespace) -> int:
    from edgevoice.audio.streams import list_devices

    devices = list_devices()
    if not devices:  # as `run` and `config --check` find it: the device may come later (exit status 69)
        raise AudioDeviceError(
            "no sound devices found (is the sound server running, the sound card there, this user in the audio group?)"
        )
    if args.json:
        emit({"devices": [dataclasses.asdict(d) for d in devices]})
    else:
        for d in devices:
            print(
                f"{d.index:>3}  {d.name:<40} in={d.max_input_channels} out={d.max_output_channels} "
                f"rate={d.default_rate:.0f} ({d.host_api})"
            )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from edgevoice.config_check import refuse_foreign_paths
    from edgevoice.run import run_live

    config = find_config(args.config)
    refuse_foreign_paths(config)  # before minutes of loading, not after
    return run_live(config, json_lines=args.json)


def _cmd_trigger(args: argparse.Namespace) -> int:
    from edgevoice.live.activation_inputs import SERVICE_SOCKET, send_command, socket_path

    path = args.socket or socket_path(find_config(args.config).activation.socket)
    if not args.socket and not (path and Path(path).exists()) and Path(SERVICE_SOCKET).exists():
        path = SERVICE_SOCKET  # an operator's shell (root) beside the service
    if not path:
        raise EdgeVoiceError("no trigger socket: set [activation] socket or pass --socket", code="activation_socket")
    send_command(path, args.action)
    if args.json:
        emit({"sent": args.action, "socket": path})
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    import tomli_w

    from edgevoice.config.load import config_path
    from edgevoice.config_check import ConfigReport, check_config, effective_config

    printing, checking = args.print_config, args.check or not args.print_config
    config: Config | None = None
    try:
        config = find_config(args.config)
    except ConfigError as exc:
        if not checking:
            raise
        errors = exc.errors if isinstance(exc, ConfigErrors) else [exc]  # every value's error, each with its key
        report: ConfigReport | None = ConfigReport(str(config_path(args.config)), errors=list(errors))
    else:
        report = check_config(config, devices=not args.no_devices) if checking else None
    if args.json:
        document = report.as_json() if report is not None else {"source": config.source if config else None}
        emit(document | ({"config": effective_config(config)} if printing and config is not None else {}))
    elif printing and config is not None:
        print(f"# effective configuration (from {config.source}, defaults filled in, secrets masked)")
        print(tomli_w.dumps(effective_config(config), multiline_strings=True), end="")
    if report is None:
        return 0
    for note in report.notes:
        print(f"edgevoice: note: {note}", file=sys.stderr)
    for warning in report.warnings:
        print(f"edgevoice: warning: {warning}", file=sys.stderr)
    for error in report.errors:
        print(f"edgevoice: error: {error}", file=sys.stderr)
    if report.errors:
        print(f"edgevoice: {len(report.errors)} error(s) in {report.source}", file=sys.stderr)
        return combined_status([e.code for e in report.errors])
    if not args.json:
        warned = f", {len(report.warnings)} warning(s)" if report.warnings else ""
        human(f"config OK ({report.source}){warned}", json_mode=printing)
    return 0


def build_parser() -> argparse.ArgumentParser:
    from edgevoice.bench.cli import add_bench_parser
    from edgevoice.bench.tune import add_tune_parser
    from edgevoice.knowledge_cli import add_knowledge_parser
    from edgevoice.models.cli import add_models_parser
    from edgevoice.selftest.cli import add_selftest_parser

    parser = CommandParser(prog="edgevoice", description="Offline voice assistant for kiosks.")
    parser.add_argument("--version", action="version", version=f"edgevoice {__version__}")
    parser.add_argument(
        "--json", dest="json_before_command", action="store_true", help="the command's --json, before its name"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("converse", help="answer one recorded question: WAV in, spoken reply out")
    p.add_argument("input", type=Path, help="a WAV file (any rate, any number of channels)")
    p.add_argument("--out", type=Path, help="where to write the reply as WAV")
    p.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout (transcript, reply, stages in ms)"
    )
    p.add_argument("--config", help="edgevoice.toml to use")
    p.set_defaults(handler=_cmd_converse)

    p = sub.add_parser("run", help="the live assistant: listen on the microphone and answer on the speaker")
    p.add_argument("--config")
    p.add_argument(
        "--json", action="store_true", help="print one JSON object per line on stdout, one per event (ready, turn, ...)"
    )
    p.set_defaults(handler=_cmd_run)

    p = sub.add_parser(
        "devices",
        help="list the sound devices (for [audio] input_device / output_device); exit status 69 when there are none",
    )
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(handler=_cmd_devices)

    p = sub.add_parser(
        "trigger",
        help="open one turn of a kiosk in [activation] mode = 'trigger' (or press/release its push-to-talk)",
    )
    p.add_argument("action", nargs="?", default="trigger", choices=["trigger", "press", "release"])
    p.add_argument("--socket", help="the kiosk's trigger socket (default: as its configuration says)")
    p.add_argument("--config")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(handler=_cmd_trigger)

    p = sub.add_parser("say", help="speak a text with the configured voice into a WAV file")
    p.add_argument("text")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument("--config")
    p.set_defaults(handler=_cmd_say)

    p = sub.add_parser(
        "config",
        help="check the configuration before a start (exit status 2 on errors), or print it",
        description="Check the configuration: its values, the knowledge, the models (installed and matching their "
        "checksums), the recognizer's language, the sound devices and the files the service writes. Every "
        "problem is reported; the exit status is 2 when there is an error (69 when the only ones are sound devices "
        "not found, as for `run`). --check is the default.",
    )
    p.add_argument("--config")
    p.add_argument("--check", action="store_true", help="check everything (the default without --print)")
    p.add_argument(
        "--print",
        dest="print_config",
        action="store_true",
        help="print the effective configuration as TOML (defaults filled in, secrets masked)",
    )
    p.add_argument("--no-devices", action="store_true", help="leave the sound devices out of the check")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(handler=_cmd_config)

    add_bench_parser(sub)
    add_knowledge_parser(sub)
    add_models_parser(sub)
    add_selftest_parser(sub)
    add_tune_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; returns the exit status (docs/cli.md)."""
    return run_command(build_parser(), argv)
