"""The live conversation loop: microphone ring → VAD + endpointing → responder → playback ring.

Two threads, both owned here and joined on ``close()`` (bounded), each with the object that owns its state:
- the *listener* (:class:`~edgevoice.live.listener.Listener`) reads the microphone ring in 32 ms frames
  (:class:`~edgevoice.audio.chunk.AudioChunk`), runs Silero VAD and the endpointing state machine, asks Smart Turn
  when a pause begins, detects barge-in, and tells the answerer what happened (a committed turn, a barge-in, a
  withdrawn turn: :mod:`edgevoice.live.events`);
- the *answerer* (:class:`~edgevoice.live.answering.Answerer`) transcribes the turn and streams the reply through
  the LLM and synthesizer into the playback ring.
A reply begun when the visitor fell silent is shared between the two (:class:`~edgevoice.reply.speculation.
SpeculativeReplies`). Each part publishes what it does on the loop's :class:`~edgevoice.live.bus.EventBus`, which
others follow without ever slowing the loop down (docs/events.md). The audio device callbacks (see
:mod:`edgevoice.audio.streams`) only copy into and out of the rings. Stream time is counted in microphone samples,
so the listener's logic is the same on real and simulated audio.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from edgevoice.audio.capture import NearEndGate
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import Clock, MonotonicClock
from edgevoice.config import Config
from edgevoice.errors import EdgeVoiceError
from edgevoice.interfaces import EndOfTurn, FloatAudio, TextEndOfTurn, VoiceActivity
from edgevoice.listen.endpointing import Endpointer, EndpointingConfig
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.listen.turn import Turn as Turn  # re-exported: part of this module's API
from edgevoice.live.activation import Activation
from edgevoice.live.answering import Answerer
from edgevoice.live.bus import EventBus
from edgevoice.live.events import LoopEvent, Partial, ReplyBegun, Shutdown, SpeakRequested, StageFailed
from edgevoice.live.listener import FRAME, Listener
from edgevoice.reply.output import ReplyOutput
from edgevoice.reply.responder import Responder
from edgevoice.reply.speculation import PrefillAhead, SpeculativeReplies
from edgevoice.thread_names import name_this_thread

log = logging.getLogger(__name__)

ERRORS_KEPT = 100
"""The loop's latest failures kept for the service's status (older ones are in the journal)."""


def text_end_of_turn(llm: object, endpoint: EndpointingConfig) -> TextEndOfTurn | None:
    """The local language model's judge of a transcript's end (``endpointing.text_incomplete_below``); None when
    that is off, or the model has none (a remote model, a test's fake), or it cannot be made (logged)."""
    make = getattr(llm, "end_of_turn_model", None)
    if endpoint.text_incomplete_below <= 0.0 or make is None:
        return None
    try:
        judge: TextEndOfTurn | None = make()
    except Exception as exc:  # the sound alone still ends turns: worse, not broken
        log.error("no text end-of-turn check (%s: %s); Smart Turn decides alone", type(exc).__name__, exc)
        return None
    return judge


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """How the loop behaves, from the config (:meth:`from_config`) or a test.

    ``vad_threshold``: the speech probability at which a frame becomes speech. ``barge_in_level_db``: with an
    echo-cancelled microphone, arm a :class:`~edgevoice.audio.capture.NearEndGate` at that level (the loop's
    :attr:`~VoiceLoop.gate`, which the capture callback feeds) so the speaker pauses before the VAD confirms a
    barge-in. ``compute_nice``: how much lower the CPU priority of the responder and recognition threads is than the
    listener's.

    ``fallback_audio`` (the fallback phrase, synthesized at start-up) is played instead of a reply that failed, or
    that queued no audio within ``reply_budget_s`` of the end of the turn: the reply's work is cancelled and the
    visitor hears the phrase whatever state the engines are in (a hung engine included).

    ``speculative_reply``: start the reply the moment the visitor falls silent, its audio held until the turn is
    committed (:mod:`edgevoice.reply.speculation`). ``prefill_while_speaking``: put each partial transcript into the
    language model's cache while the visitor speaks (:class:`~edgevoice.reply.speculation.PrefillAhead`)."""

    vad_threshold: float = 0.5
    barge_in_level_db: float | None = None
    compute_nice: int = 0
    fallback_audio: FloatAudio | None = field(default=None, repr=False)
    fallback_text: str = ""
    reply_budget_s: float | None = None
    speculative_reply: bool = False
    prefill_while_speaking: bool = False

    @staticmethod
    def from_config(config: Config, *, echo_cancelled: bool, fallback_audio: FloatAudio | None) -> LoopOptions:
        return LoopOptions(
            vad_threshold=config.vad.threshold,
            barge_in_level_db=config.audio.barge_in_level_db if echo_cancelled else None,
            compute_nice=config.audio.compute_nice,
            fallback_audio=fallback_audio,
            fallback_text=config.kiosk.fallback_phrase,
            reply_budget_s=config.kiosk.reply_budget_s,
            speculative_reply=config.endpointing.speculative_reply,
            prefill_while_speaking=config.endpointing.prefill_while_speaking,
        )


class VoiceLoop:
    """The listener, the answerer and the recognition worker, wired together; what they do is published on
    :attr:`bus` (:mod:`edgevoice.live.events`)."""

    def __init__(
        self,
        *,
        mic: SharedRing,
        speaker: SharedRing,
        vad: VoiceActivity,
        turn_model: EndOfTurn,
        responder: Responder,
        endpoint: EndpointingConfig,
        options: LoopOptions | None = None,
        clock: Clock | None = None,
        reference: SharedRing | None = None,
        activation: Activation | None = None,
        text_turn: TextEndOfTurn | None = None,
        heard: Callable[[], int] | None = None,
    ) -> None:
        """``mic`` holds the microphone as the listener should hear it (echo-cancelled, when ``reference`` is set:
        the ring the playback mirrors every buffer into, for the canceller).

        ``activation``: when the listener listens (:mod:`edgevoice.live.activation`); None: always.

        ``text_turn``: judges the words of a pause Smart Turn finds complete, on the recognition worker right after
        the speculative decode; by default the responder's local language model's judge (:func:`text_end_of_turn`).

        ``heard``: the playback position (:attr:`PlaybackControl.played`'s count) the speaker has played by now, which
        the captions follow; by default the samples handed to the device (:mod:`edgevoice.live.captions`).
        """
        options = options or LoopOptions()
        self.mic, self.speaker = mic, speaker
        self.responder = responder
        self.clock = clock or MonotonicClock()
        self.bus = EventBus()
        """Every event of the loop (:mod:`edgevoice.live.events`), for whoever follows the conversation."""
        self.errors: deque[EdgeVoiceError] = deque(maxlen=ERRORS_KEPT)
        """The latest failures of any part (:class:`StageFailed`), newest last."""
        self.failures = 0
        """Every failure since the loop was built (:attr:`errors` keeps the latest only)."""
        self.bus.subscribe_inline(self._count_error)
        self.bus.subscribe_inline(self._take_request)
        self.playback = PlaybackControl(speaker, reference)
        level = options.barge_in_level_db
        self.gate = NearEndGate(self.playback, level_db=level) if level is not None else None
        self._threads: list[threading.Thread] = []
        self.asr = StreamingTranscriber(
            responder.recognizer,
            prompt=responder.asr_prompt,
            on_partial=self._on_partial,
            on_speculation=lambda spec: self.speculation.on_decoded(spec),
            nice=options.compute_nice,
        )
        self.answerer = Answerer(
            responder=responder,
            asr=self.asr,
            speaker=speaker,
            playback=self.playback,
            gate=self.gate,
            clock=self.clock,
            publish=self.bus.publish,
            fallback_audio=options.fallback_audio,
            fallback_text=options.fallback_text,
            budget_s=options.reply_budget_s,
            nice=options.compute_nice,
            heard=heard,
        )
        answerer = self.answerer
        self.speculation = SpeculativeReplies(
            enabled=options.speculative_reply,
            submit=lambda reply: answerer.tell(ReplyBegun(reply)),
            busy=lambda: answerer.busy,
            prefill=responder.prefill_turn,
            words=text_turn if text_turn is not None else text_end_of_turn(responder.llm, endpoint),
            incomplete_below=endpoint.text_incomplete_below,
            on_error=lambda error: self.bus.publish(StageFailed(error)),
        )
        self.prefill_ahead = (
            PrefillAhead(responder.prefill_turn, silent=lambda: self.speculation.valid, nice=options.compute_nice)
            if options.prefill_while_speaking
            else None
        )
        self.listener = Listener(
            mic=mic,
            vad=vad,
            turn_model=turn_model,
            endpointer=Endpointer(endpoint, threshold=options.vad_threshold),
            asr=self.asr,
            speculation=self.speculation,
            reply=answerer,
            tell=answerer.tell,
            publish=self.bus.publish,
            played=lambda: self.playback.played,
            gate=self.gate,
            clock=self.clock,
            activation=activation,
        )

    def _count_error(self, event: LoopEvent) -> None:
        if isinstance(event, StageFailed):
            self.errors.append(event.error)
            self.failures += 1

    def _take_request(self, event: LoopEvent) -> None:
        """A request published on the bus for the loop to carry out (text to speak) goes to the answerer's inbox."""
        if isinstance(event, SpeakRequested):
            self.answerer.tell(event)

    def _on_partial(self, turn_id: int, text: str) -> None:
        """(The recognition worker.) A partial transcript: published, read ahead by the words' judge and, with
        ``prefill_while_speaking``, handed to the prefill thread."""
        self.bus.publish(Partial(turn_id, text))
        self.speculation.on_partial(text)
        if self.prefill_ahead is not None:
            self.prefill_ahead.offer(text)

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.responder.resume()  # a model interrupted when an earlier loop closed works again
        self.asr.start()
        threads = [
            ("listener", self.listener.run),
            ("responder", self.answerer.run),
            ("captions", self.answerer.captions.run),
        ]
        if self.prefill_ahead is not None:
            threads.append(("prefill", self.prefill_ahead.run))
        for name, target in threads:
            thread = threading.Thread(target=named(target, f"ev-{name}"), name=f"edgevoice-{name}", daemon=False)
            thread.start()
            self._threads.append(thread)

    def close(self, timeout: float = 2.0) -> bool:
        """Stop the listener, the responder and the recognition worker within ``timeout`` seconds in all.

        Work in progress is cut short (the reply is cancelled, the language model interrupted between two tokens
        or prefill chunks). Returns True when every thread has ended: only then may the engines be freed (a thread
        still inside llama.cpp while its model is freed crashes the process)."""
        deadline = time.monotonic() + timeout
        self.listener.close()
        self.speculation.close()  # a reply begun early and waiting for its turn's end is dropped
        if self.prefill_ahead is not None:
            self.prefill_ahead.close()
        self.answerer.tell(Shutdown())
        self.bus.publish(Shutdown())
        self.responder.interrupt()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if not self.asr.close(max(0.0, deadline - time.monotonic())):
            alive.append("edgevoice-asr")
        if alive:
            log.error("still running %.1f s after the stop request: %s", timeout, ", ".join(alive))
            return False
        self._threads.clear()
        self.bus.close(max(0.5, deadline - time.monotonic()))  # what the subscribers have queued is delivered
        self.responder.resume()  # nothing of this loop computes any more: the model serves its next user
        return True

    def __enter__(self) -> VoiceLoop:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def idle(self) -> bool:
        """Nothing in progress: the microphone ring read out, no turn open, held or queued, no reply playing."""
        return self.mic.available() < FRAME and not self.listener.in_turn and not self.answerer.busy

    # -- what the service reports -----------------------------------------------------------------------------------
    @property
    def activation(self) -> Activation:
        """The listening gate: ``press()``, ``release()``, ``trigger()`` from any thread."""
        return self.listener.activation

    @property
    def samples_in(self) -> int:
        """Microphone samples the listener has read."""
        return self.listener.samples_in

    @property
    def output(self) -> ReplyOutput:
        return self.answerer.output

    @property
    def barge_ins(self) -> int:
        return self.answerer.barge_ins

    @property
    def false_barge_ins(self) -> int:
        """Level-triggered pauses the VAD did not confirm (the reply resumed)."""
        return self.gate.false_pauses if self.gate is not None else 0

    @property
    def speculative_replies(self) -> dict[str, int]:
        """Replies begun early: how many were started, adopted and dropped."""
        return self.speculation.counts


def named(target: Callable[[], None], name: str) -> Callable[[], None]:
    """``target``, run on a thread that first takes the kernel name ``name``."""

    def run() -> None:
        name_this_thread(name)
        target()

    return run
