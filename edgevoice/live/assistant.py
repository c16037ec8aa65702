"""`edgevoice run`: the engines, the rings, the sound devices and the voice loop, owned together.

The audio callbacks run on PortAudio's threads and only copy between the devices and the shared-memory rings; the
listener and responder threads do the compute. A watchdog in the calling thread reopens a stream that died (device
unplugged, sound server restarted) without stopping the conversation.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.aec import EchoCanceller
from edgevoice.audio.capture import CaptureFrontEnd
from edgevoice.audio.devices import device_setting
from edgevoice.audio.echo_path import EchoPath
from edgevoice.audio.ring import SharedRing
from edgevoice.audio.streams import InputStream, OutputStream
from edgevoice.config import Config
from edgevoice.errors import AudioDeviceError, EdgeVoiceError
from edgevoice.interfaces import EndOfTurn, Engines, FloatAudio
from edgevoice.live.activation import Activation
from edgevoice.live.activation_inputs import InputThread, activation_inputs
from edgevoice.live.loop import LoopOptions, Turn, VoiceLoop
from edgevoice.reply.responder import Responder
from edgevoice.reply.speech_text import normalize_for_speech
from edgevoice.reply.trace import ReplyTrace
from edgevoice.trace import TurnTimeline, speech_end_index

if TYPE_CHECKING:
    from edgevoice.engines.wake_word import MicroWakeWord

log = logging.getLogger(__name__)

REOPEN_RETRY_S = 1.0
"""While a device is missing, how often the watch tries to open it again."""
RESAMPLE_QUALITY = "LQ"
"""soxr's streaming resamplers hold back part of each buffer: 27 ms at HQ, 9 ms at LQ (22.05 -> 16 kHz, measured).
Every millisecond on the device path is voice-to-voice latency, and LQ keeps speech band quality."""


@dataclass(frozen=True)
class XrunReport:
    input_overruns: int
    """Microphone samples dropped because the listener fell behind (ring full)."""
    input_device_xruns: int
    output_underruns: int
    """Times the speaker ran dry in the middle of a reply."""
    output_device_xruns: int
    """PortAudio's output-underflow flags, silence between replies included (the ALSA pulse plugin raises it when
    a callback is late even with nothing to play)."""
    output_device_xruns_in_reply: int
    """Of these, the ones between two blocks with sound: a gap a visitor could hear in a reply."""
    mic_high_water: int
    speaker_high_water: int
    reopened: int
    input_callback_max_ms: float
    output_callback_max_ms: float
    input_callback_max_gap_ms: float
    output_callback_max_gap_ms: float
    """Longest time between two callbacks (nominal period: [audio] frame_ms)."""
    echo_attenuation_db: float | None
    """Microphone level drop through the echo canceller while the kiosk spoke (None: no canceller or no reply)."""
    echo_failures: int = 0
    """10 ms microphone frames passed on uncancelled because the echo canceller failed."""
    echo_restarts: int = 0
    """Times the echo canceller started over for a reopened stream."""

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def speak_once(engines: Engines, text: str) -> FloatAudio | None:
    """``text`` synthesized now (at start-up), for playing later whatever state the engines are in."""
    if not text.strip():
        return None
    chunks = list(engines.synthesizer.synthesize(normalize_for_speech(text)))
    return np.concatenate(chunks).astype(np.float32) if chunks else None


class LiveAssistant:
    """Everything `edgevoice run` starts, with one owner: ``close()`` releases it all within a few seconds."""

    def __init__(
        self,
        config: Config,
        engines: Engines,
        turn_model: EndOfTurn,
        responder: Responder,
        *,
        wake_word: MicroWakeWord | None = None,
    ) -> None:
        """What the loop does is published on ``self.loop.bus`` (:mod:`edgevoice.live.events`); a finished turn's
        marks on the devices' clocks are :meth:`timeline`. ``wake_word``: the detector that ``wake_word`` mode needs
        (:func:`edgevoice.app_engines.open_wake_word`), closed with the rest."""
        self.config = config
        self.out_rate = engines.synthesizer.sample_rate
        self.mic = SharedRing.create(SAMPLE_RATE * 20)
        self.speaker = SharedRing.create(self.out_rate * 60)
        self.reference: SharedRing | None = None
        echo = None
        if config.audio.echo_cancellation:
            self.reference = SharedRing.create(self.out_rate * 10)
            canceller = EchoCanceller(SAMPLE_RATE, noise_suppression=config.audio.noise_suppression)
            echo = EchoPath(canceller, self.reference, self.out_rate)
        self.echo = echo
        self.wake_word = wake_word
        self.activation = Activation(
            config.activation.mode, trigger_timeout_s=config.activation.trigger_timeout_s, wake_word=self.wake_word
        )
        """When the kiosk listens; the admin page may call its ``trigger()`` (docs/activation.md)."""
        self.loop = VoiceLoop(
            mic=self.mic,
            speaker=self.speaker,
            vad=engines.vad,
            turn_model=turn_model,
            responder=responder,
            endpoint=config.endpointing,
            options=LoopOptions.from_config(
                config,
                echo_cancelled=echo is not None,
                fallback_audio=speak_once(engines, config.kiosk.fallback_phrase),
            ),
            reference=self.reference,
            activation=self.activation,
            heard=self.heard,
        )
        self.capture = CaptureFrontEnd(self.mic, echo, self.loop.gate, self.loop.playback)
        self.input: InputStream | None = None
        self.output: OutputStream | None = None
        self._played_base = 0
        """Playback position at which the current output stream started (its real sample 0)."""
        self.reopened = 0
        self.inputs: list[InputThread] = []
        """The key, GPIO line and trigger socket feeding :attr:`activation`, started with the loop."""
        self._closed = False
        self.threads_stopped = False
        """Set by :meth:`close`: every loop thread ended (so the engines may be freed)."""

    # -- devices ----------------------------------------------------------------------------------------------------
    def _open_input(self) -> InputStream:
        a = self.config.audio
        stream = InputStream(
            self.capture,
            device=device_setting(a.input_device),
            rate=a.input_rate or None,
            frame_ms=a.frame_ms,
            resample_quality=RESAMPLE_QUALITY,
        )
        stream.start()
        return stream

    def _open_output(self) -> OutputStream:
        a = self.config.audio
        self._played_base = self.loop.playback.played  # nothing is pulled before start()
        stream = OutputStream(
            self.loop.playback.pull,
            source_rate=self.out_rate,
            device=device_setting(a.output_device),
            rate=a.output_rate or None,
            frame_ms=a.frame_ms,
            resample_quality=RESAMPLE_QUALITY,
        )
        stream.start()
        return stream

    def start(self, *, first_input_timeout: float = 5.0) -> None:
        self.output = self._open_output()
        self.input = self._open_input()
        if not self.input.wait_running(first_input_timeout):
            raise AudioDeviceError(f"the input device delivered nothing within {first_input_timeout:.0f} s")
        self.loop.start()
        self.inputs = activation_inputs(self.activation, self.config.activation)
        for source in self.inputs:
            source.start()

    def watch(self, stop: threading.Event, period: float = 0.25, on_tick: Callable[[], None] | None = None) -> None:
        """Until ``stop`` is set: reopen any stream that died (a device unplugged, the sound server restarted),
        retrying every ``REOPEN_RETRY_S`` while the device is missing. Run in the main thread. ``on_tick`` is called
        after every check (the service's status and watchdog, :class:`edgevoice.live.service.ServiceMonitor`)."""
        retry_at = {"input": 0.0, "output": 0.0}
        missing_since: dict[str, float] = {}
        while not stop.wait(period):
            now = time.monotonic()
            for kind in ("input", "output"):
                stream = getattr(self, kind)
                if stream is not None and stream.is_alive(max_gap_s=1.0):
                    continue
                if stream is not None:
                    log.warning("%s stream died (%s): reopening", kind, stream.error or "no callbacks")
                    setattr(self, kind, None)
                    missing_since.setdefault(kind, now)
                    try:
                        stream.close()
                    except AudioDeviceError as exc:  # a hung device: leave its stream behind
                        log.error("%s", exc)
                if now < retry_at[kind]:
                    continue
                try:
                    if kind == "input":
                        self.capture.resync()
                    setattr(self, kind, self._open_input() if kind == "input" else self._open_output())
                    self.reopened += 1
                    log.warning("%s stream reopened after %.1f s", kind, now - missing_since.pop(kind, now))
                    self._restart_echo()
                except AudioDeviceError as exc:
                    first = kind not in missing_since
                    since = missing_since.setdefault(kind, now)
                    if first or int(now - since) // 30 != int(now - since - REOPEN_RETRY_S) // 30:
                        log.warning("cannot reopen the %s stream yet (%.0f s): %s", kind, now - since, exc)
                    retry_at[kind] = now + REOPEN_RETRY_S
            if on_tick is not None:
                on_tick()

    def heard(self) -> int:
        """(Any thread) the playback position (:attr:`PlaybackControl.played`'s count) that the speaker has played by
        now: the samples the output stream handed to its device and that reached the DAC, by the stream's DAC times.
        The captions follow it (:mod:`edgevoice.live.captions`); without a stream, the samples handed to one."""
        output = self.output
        if output is None:
            return self.loop.playback.played
        return self._played_base + output.real_played(time.perf_counter())

    def reply_echo(self) -> dict[str, float | None] | None:
        """The echo canceller's work since the last call (the turn's reply, when called once per turn):
        ``attenuation_db``, how much quieter the microphone became, and ``peak_residual_dbfs``, the loudest 10 ms the
        canceller let through, to set against ``barge_in_level_db``. None without echo cancellation."""
        if self.echo is None:
            return None
        echo = self.echo.take_reply_echo()
        attenuation, peak = echo.attenuation_db(), echo.peak_dbfs()
        return {
            "attenuation_db": None if attenuation is None else round(attenuation, 1),
            "peak_residual_dbfs": None if peak is None else round(peak, 1),
        }

    def _restart_echo(self) -> None:
        """A new stream, a new echo path: the canceller starts over (see :meth:`EchoPath.restart`)."""
        if self.echo is None:
            return
        try:
            self.echo.restart()
        except EdgeVoiceError as exc:  # the old canceller goes on: it re-learns, only slower
            log.error("echo canceller not restarted after the reopen: %s", exc)

    def timeline(self, trace: ReplyTrace, turn: Turn) -> TurnTimeline:
        """The turn's marks on the perf_counter scale (see :mod:`edgevoice.trace`), from the loop's trace and the
        devices' sample clocks. Call once the reply has been played (on its
        :class:`~edgevoice.live.events.ReplyFinished`)."""
        end = speech_end_index(turn.audio.samples, SAMPLE_RATE)
        handed = played = None
        clauses: tuple[float | None, ...] = ()
        output = self.output
        if trace.clauses and trace.stream_start is not None and output is not None:
            real = trace.stream_start + trace.clauses[0].start_sample - self._played_base
            if real >= 0:
                handed, played = output.pulled_time_of_real(real), output.dac_time_of_real(real)
            starts = (trace.stream_start + c.start_sample - self._played_base for c in trace.clauses)
            clauses = tuple(output.dac_time_of_real(r) if r >= 0 else None for r in starts)
        return TurnTimeline(
            turn.turn_id,
            speech_end=None if end is None else self.capture.adc_time_of(turn.audio.start + end),
            endpoint_audio=self.capture.adc_time_of(turn.audio.end),
            endpoint=turn.committed_wall,
            transcript=trace.transcript_done,
            first_token=trace.first_token,
            first_clause=trace.first_clause,
            first_audio=trace.first_audio,
            first_queued=trace.first_sample_queued,
            first_handed=handed,
            first_played=played,
            clauses_played=clauses,
        )

    def xruns(self) -> XrunReport:
        mic, spk = self.mic.stats(), self.speaker.stats()
        ins = self.input.stats() if self.input else None
        outs = self.output.stats() if self.output else None
        return XrunReport(
            input_overruns=mic.overrun_samples,
            input_device_xruns=ins.xruns if ins else 0,
            output_underruns=spk.underrun_events,
            output_device_xruns=outs.xruns if outs else 0,
            output_device_xruns_in_reply=outs.audible_xruns if outs else 0,
            mic_high_water=mic.high_water,
            speaker_high_water=spk.high_water,
            reopened=self.reopened,
            input_callback_max_ms=round(ins.max_callback_ms, 2) if ins else 0.0,
            output_callback_max_ms=round(outs.max_callback_ms, 2) if outs else 0.0,
            input_callback_max_gap_ms=round(ins.max_gap_ms, 1) if ins else 0.0,
            output_callback_max_gap_ms=round(outs.max_gap_ms, 1) if outs else 0.0,
            echo_attenuation_db=round(db, 1) if self.echo and (db := self.echo.attenuation_db()) is not None else None,
            echo_failures=self.capture.failures,
            echo_restarts=self.echo.restarts if self.echo is not None else 0,
        )

    def close(self, timeout: float = 1.0) -> None:
        """Stop the loop's threads (``timeout``), then the streams, then release the canceller and the rings.

        What a thread or a callback that did not stop may still touch is not released (it would crash the process)
        but left to the exit; :attr:`threads_stopped` tells the owner whether the engines may be freed."""
        if self._closed:
            return
        self._closed = True
        self.threads_stopped = self.loop.close(timeout=timeout)
        for source in self.inputs:
            self.threads_stopped &= source.close(timeout)
        streams_closed = True
        for stream in (self.input, self.output):
            if stream is None:
                continue
            try:
                stream.close()
            except AudioDeviceError as exc:  # a hung device: its callback may still run
                log.error("%s; the audio buffers are left to the exit", exc)
                streams_closed = False
        if not streams_closed:
            return
        if self.echo is not None and self.threads_stopped:
            self.echo.close()
        if self.wake_word is not None and self.threads_stopped:
            self.wake_word.close()
        for ring in (self.mic, self.speaker, self.reference):
            if ring is not None:
                ring.unlink()  # the name goes now; the mapping stays while a thread that did not stop may use it
                if self.threads_stopped:
                    ring.close()

    def __enter__(self) -> LiveAssistant:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
