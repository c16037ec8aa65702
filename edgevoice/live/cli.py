"""The `edgevoice run` command: load, warm up, listen until SIGINT/SIGTERM, stop within two seconds."""

from __future__ import annotations

import faulthandler
import json
import logging
import signal
import sys
import threading
import time
from types import FrameType

from edgevoice.admin.appliance import AdminHandle, LiveAppliance, start_admin
from edgevoice.app import build_assistant, load_engines, load_turn_model, model_store
from edgevoice.cli_exit import stdout_closed
from edgevoice.clock import MonotonicClock
from edgevoice.config import Config
from edgevoice.config.listen_address import effective_listen
from edgevoice.converse import Assistant, trace_stages
from edgevoice.errors import EXIT_BROKEN_PIPE, AudioDeviceError
from edgevoice.events import answered_record
from edgevoice.live.assistant import LiveAssistant
from edgevoice.live.events import BargeIn, Fallback, LoopEvent, Partial, Speaking
from edgevoice.live.faults import arm as arm_faults
from edgevoice.live.faults import inject_faults
from edgevoice.live.loop import Turn
from edgevoice.live.metrics import Metrics, MetricsExporter
from edgevoice.live.recorder import TurnRecorder
from edgevoice.live.service import LoopProbe, Notifier, ServiceLog, ServiceMonitor
from edgevoice.memory import settle
from edgevoice.models.recheck import BackgroundRecheck
from edgevoice.reply.audio_cache import CachedSynthesizer
from edgevoice.reply.presynthesis import Presynthesis, disk_audio, known_replies
from edgevoice.reply.responder import ReplyTrace
from edgevoice.trace import TurnTimeline

log = logging.getLogger(__name__)

_STDOUT = threading.Lock()


def write_lines(lines: list[str]) -> bool:
    """Write whole lines to stdout, each call's lines together: records come from several threads (the recognition
    worker's partials, the responder's "speaking", the turns), and a ``print`` writes its text and its newline
    apart, so two threads printing at once can run two records into one line that no reader can parse.

    False when stdout's reader is gone (``run --json | head -3``): stdout then goes to /dev/null, and the caller
    stops the run, as SIGPIPE would have."""
    with _STDOUT:
        try:
            sys.stdout.write("".join(f"{line}\n" for line in lines))
            sys.stdout.flush()
        except BrokenPipeError:
            stdout_closed()
            return False
    return True


def turn_record(
    trace: ReplyTrace, turn: Turn, timeline: TurnTimeline, sample_rate: int, echo: dict[str, float | None] | None = None
) -> dict[str, object]:
    """One structured record per turn: what was said, the time each stage took and voice-to-voice (ms, see
    :mod:`edgevoice.trace`), the language model's and synthesizer's totals (``reply_ms``) and, with echo
    cancellation, what the canceller left of the reply (``echo``, see :meth:`LiveAssistant.reply_echo`)."""
    return {
        "event": "turn",
        "turn": trace.turn_id,
        "reason": turn.reason.value,
        "continues": turn.continues,
        "transcript": trace.transcript,
        "confidence": None if trace.confidence is None else round(trace.confidence, 3),
        "reply": trace.reply,
        "verdict": trace.verdict,
        "cancelled": trace.cancelled,
        "cut": trace.cut,
        "speculative_transcript": trace.speculative_transcript,
        "speculation_valid": turn.speculation_valid,
        "speculative_reply": trace.speculative_reply,
        "reply_seconds": round(sum(c.end_sample - c.start_sample for c in trace.clauses) / sample_rate, 3),
        "speech_end_s": round(turn.speech_end_t, 3),
        "committed_s": round(turn.committed_t, 3),
        "underruns": trace.underruns,
        "fallback": trace.fallback,
        "error": trace.error,
        **answered_record(trace.answered_by),
        **timeline.record(),
        "reply_ms": {k: round(v * 1000, 1) for k, v in trace_stages(trace).items() if k in ("llm", "tts")},
        "memory_trim_ms": None if trace.memory_trim_s is None else round(trace.memory_trim_s * 1000, 2),
        "words_verdict": None
        if turn.words_verdict is None
        else {"ms": round(turn.words_verdict[0] * 1000, 1), "tokens": turn.words_verdict[1]},
    } | ({"echo": echo} if echo is not None else {})


def event_record(event: LoopEvent) -> dict[str, object]:
    """The JSON line for one of the loop's events (a fallback's reason goes under ``text``)."""
    match event:
        case Partial(turn_id, text):
            return {"event": "partial", "turn": turn_id} | ({"text": text} if text else {})
        case Speaking(turn_id):
            return {"event": "speaking", "turn": turn_id}
        case BargeIn(turn_id):
            return {"event": "barge_in", "turn": turn_id}
        case Fallback(turn_id, reason):
            return {"event": "fallback", "turn": turn_id, "text": reason.value}


def start_metrics(config: Config) -> MetricsExporter | None:
    """The configured metrics exporter (``[metrics]``, the service's socket by default), or None when metrics are
    off."""
    m = config.metrics
    listen = effective_listen(m.listen)
    if not listen and not m.textfile:
        return None
    return MetricsExporter(Metrics(), listen=listen, textfile=m.textfile)


def presynthesized(voice: object) -> dict[str, object]:
    """The stopped record's count of clauses played from the presynthesized audio and of those synthesized when
    asked (none without ``[tts] presynthesize``)."""
    if not isinstance(voice, CachedSynthesizer):
        return {}
    return {"presynthesized_clauses": voice.hits, "synthesized_clauses": voice.misses}


def run_live(config: Config, *, json_lines: bool = False) -> int:
    # Under systemd (edgevoice.service): records go to the journal with structured fields, STATUS= follows the loop,
    # READY=1 comes after the warm-up and the stream watch feeds the watchdog. Outside it these do nothing.
    journal = ServiceLog(transcripts=config.debug.log_transcripts)
    journal.install()
    monitor = ServiceMonitor(Notifier())
    monitor.loading()
    recorder = TurnRecorder.from_config(config.debug.record_turns, config.debug.record_dir)  # None: off (default)

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
    stop, reader_gone = threading.Event(), threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    t0 = time.perf_counter()
    store = model_store(config)
    loaded, _ = load_engines(config, store)
    engines = inject_faults(loaded, release=stop)  # test-only knobs (edgevoice/live/faults.py); none by default
    turn_model = load_turn_model(config, store)
    exporter = start_metrics(config)

    def on_trace(trace: ReplyTrace, turn: Turn, timeline: TurnTimeline) -> None:
        echo = live.reply_echo() if live is not None else None
        record = turn_record(trace, turn, timeline, engines.synthesizer.sample_rate, echo)
        emit(record)
        if recorder is not None:
            recorder.record(turn.turn_id, turn.audio, record)
        if admin is not None:
            admin.appliance.add_turn(record)
        if exporter is not None:
            exporter.metrics.observe(
                timeline,
                cancelled=trace.cancelled,
                underruns=trace.underruns,
                answered_by=trace.answered_by,
            )
            exporter.update()

    live: LiveAssistant | None = None
    admin: AdminHandle | None = None
    # A model file changed after it was verified at load: hash every file again once ready (seconds of work, too
    # long to keep the first visitor waiting) and stop on a mismatch; only while no turn is in progress.
    recheck = BackgroundRecheck(
        store, on_error=lambda exc: stop.set(), idle=lambda: live is not None and live.loop.idle()
    )
    presynthesis: Presynthesis | None = None
    assistant: Assistant | None = None
    try:
        # a large knowledge is embedded in the background, only while no turn is in progress
        assistant = build_assistant(
            config, engines, clock=MonotonicClock(), live=True, idle=lambda: live is not None and live.loop.idle()
        )
        assistant.warm_up()
        if isinstance(voice := loaded.synthesizer, CachedSynthesizer):
            # the known replies' audio, made while nobody speaks, so that they play the moment a turn is committed
            presynthesis = Presynthesis(
                voice,
                known_replies(assistant.kiosk),
                max_sentences=config.kiosk.max_sentences,
                bounds=assistant.responder.bounds,
                disk=disk_audio(config.tts.presynthesized_dir, voice.voice_id),
                idle=lambda: live is not None and live.loop.idle(),
            )
        live = LiveAssistant(
            config,
            engines,
            turn_model,
            assistant.responder,
            on_trace=on_trace,
            on_event=lambda event: emit(event_record(event)),
        )
        # what start-up made lives as long as the process: frozen, the collection after each turn skips it
        log.info("start-up objects collected and frozen in %.0f ms", 1000 * settle())
        with live:
            try:
                live.start()
            except AudioDeviceError as exc:  # the device may still appear: its exit status, 69, has systemd retry
                journal.error(exc)
                raise
            load_ms = round((time.perf_counter() - t0) * 1000)
            arm_faults(engines)
            emit({"event": "ready", "load_ms": load_ms})
            running = live
            monitor.ready(
                LoopProbe(
                    progress=lambda: running.loop.samples_in,
                    input_alive=lambda: running.input is not None and running.input.is_alive(max_gap_s=1.0),
                    output_alive=lambda: running.output is not None and running.output.is_alive(max_gap_s=1.0),
                    errors=lambda: len(running.loop.errors),
                ),
                load_ms,
            )
            recheck.start()
            admin = start_admin(config, LiveAppliance(config, assistant, monitor, lambda: live))
            if presynthesis is not None:
                presynthesis.start()
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
                **presynthesized(loaded.synthesizer),
            }
        )
    finally:
        recheck.close()
        if admin is not None:
            admin.close()
        if assistant is not None:
            assistant.close()
        if presynthesis is not None:
            presynthesis.close()
        if live is None or live.threads_stopped:
            turn_model.close()
            loaded.close()
        else:  # a thread still inside an engine: freeing it now would crash the process; the exit reclaims it
            log.error("engines left to the process exit: a loop thread did not stop in time")
        if exporter is not None:
            exporter.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        journal.close()
    if recheck.error is not None:  # exit 2: a restart cannot mend the file
        raise recheck.error
    errors = live.loop.errors if live is not None else []
    if errors:
        print(f"edgevoice: {len(errors)} turn(s) failed; last: {errors[-1]}", file=sys.stderr)
    return EXIT_BROKEN_PIPE if reader_gone.is_set() else 0
