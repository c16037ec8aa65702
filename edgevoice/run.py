"""The `edgevoice run` command: load, warm up, listen until SIGINT/SIGTERM, stop within two seconds.

The parts are built by :mod:`edgevoice.app`; this module drives them: the signals, the records on stdout and the
journal, the service's state and the main wait."""

from __future__ import annotations

import faulthandler
import json
import logging
import signal
import sys
import threading
import time
from types import FrameType

from edgevoice.app_live import Appliance, LoadedModels, build_appliance, load_models
from edgevoice.config import Config
from edgevoice.errors import EXIT_BROKEN_PIPE, AudioDeviceError
from edgevoice.live.cli import presynthesized, write_lines
from edgevoice.live.faults import arm as arm_faults
from edgevoice.live.recorder import TurnRecorder
from edgevoice.live.service import LoopProbe, Notifier, ServiceLog, ServiceMonitor
from edgevoice.memory import settle

log = logging.getLogger(__name__)


def run_live(config: Config, *, json_lines: bool = False) -> int:
    # Under systemd (edgevoice.service): records go to the journal with structured fields, STATUS= follows the loop,
    # READY=1 comes after the warm-up and the stream watch feeds the watchdog. Outside it these do nothing.
    journal = ServiceLog(transcripts=config.debug.log_transcripts)
    journal.install()
    monitor = ServiceMonitor(Notifier())
    monitor.loading()
    recorder = TurnRecorder.from_config(config.debug.record_turns, config.debug.record_dir)  # None: off (default)
    stop, reader_gone = threading.Event(), threading.Event()

    def emit(record: dict[str, object]) -> None:
        if record["event"] == "speaking" and isinstance(turn := record["turn"], int):
            monitor.replying(turn)
        elif record["event"] == "turn":
            monitor.turn_done()
        if journal.record(record) and not json_lines:
            return
        if json_lines:
            lines = [json.dumps(record)]
        elif record["event"] in ("speaking", "partial"):
            return
        elif record["event"] == "turn":
            lines = [
                f"Visitor:   {record['transcript']}",
                f"Assistant: {record['reply']}",
                f"  voice-to-voice {record['voice_to_voice_ms']} ms, stages {record['stages_ms']}",
            ]
        else:
            lines = [f"[{record['event']}] " + ", ".join(f"{k}={v}" for k, v in record.items() if k != "event")]
        if not write_lines(lines):
            reader_gone.set()
            stop.set()

    faulthandler.enable()  # a crash in a native engine leaves every thread's Python stack in the log

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    t0 = time.perf_counter()
    models = load_models(config, release=stop)
    stages_ms = {"models": ms(time.perf_counter() - t0)}
    appliance: Appliance | None = None
    try:
        appliance = build_appliance(config, models, stop=stop, emit=emit, recorder=recorder)
        stages_ms["appliance"] = ms(time.perf_counter() - t0) - stages_ms["models"]
        live = appliance.live
        # what start-up made lives as long as the process: frozen, the collection after each turn skips it
        log.info("start-up objects collected and frozen in %.0f ms", 1000 * settle())
        with live:
            try:
                live.start()
            except AudioDeviceError as exc:  # the device may still appear: its exit status, 69, has systemd retry
                journal.error(exc)
                raise
            load_ms = ms(time.perf_counter() - t0)
            stages_ms["streams"] = load_ms - stages_ms["models"] - stages_ms["appliance"]
            arm_faults(models.engines)
            emit(ready_record(load_ms, stages_ms, models, appliance))
            monitor.ready(
                LoopProbe(
                    progress=lambda: live.loop.samples_in,
                    input_alive=lambda: live.input is not None and live.input.is_alive(max_gap_s=1.0),
                    output_alive=lambda: live.output is not None and live.output.is_alive(max_gap_s=1.0),
                    errors=lambda: live.loop.failures,
                ),
                load_ms,
            )
            appliance.start_services(monitor)
            live.watch(stop, on_tick=monitor.tick)
            monitor.stopping()
            t_stop = time.perf_counter()
            xruns = live.xruns()
        emit(
            {
                "event": "stopped",
                "stop_ms": round((time.perf_counter() - t_stop) * 1000),
                **xruns.as_dict(),
                "speculative_replies": live.loop.speculative_replies,
                "fallbacks": live.loop.output.fallbacks,
                "barge_ins": live.loop.barge_ins,
                "speaker_pauses": live.loop.gate.pauses if live.loop.gate is not None else 0,
                "false_barge_ins": live.loop.false_barge_ins,
                **presynthesized(models.loaded.synthesizer),
            }
        )
    finally:
        if appliance is not None:
            appliance.close()
        models.close(engines_free=appliance is None or appliance.live.threads_stopped)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        journal.close()
    if appliance.recheck.error is not None:  # exit 2: a restart cannot mend the file
        raise appliance.recheck.error
    errors = live.loop.errors
    if errors:
        print(f"edgevoice: {live.loop.failures} turn(s) failed; last: {errors[-1]}", file=sys.stderr)
    return EXIT_BROKEN_PIPE if reader_gone.is_set() else 0


def ms(seconds: float) -> int:
    return round(seconds * 1000)


def ready_record(
    load_ms: int, stages_ms: dict[str, int], models: LoadedModels, appliance: Appliance
) -> dict[str, object]:
    """The ``ready`` record: ``load_ms`` (the start-up's milliseconds, the process's imports before it excluded), its
    three stages (``models``: the engines' loads side by side, then the kiosk's; ``appliance``: the assistant, its
    warm-up and the live loop's parts; ``streams``: the audio streams opened), each load and step in ``steps_ms``, and
    how the prompt prefix came (``prefix``: ``restored`` from the copy an earlier start kept, or ``evaluated``)."""
    steps = {f"load_{name}": ms(s) for name, s in models.load_s.items()}
    steps |= {name: ms(s) for name, s in appliance.startup_s.items()}
    return {
        "event": "ready",
        "load_ms": load_ms,
        "stages_ms": stages_ms,
        "steps_ms": steps,
        "prefix": appliance.assistant.prefix_warmed,
    }
