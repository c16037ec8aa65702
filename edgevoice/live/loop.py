"""The live conversation loop: microphone ring → VAD + endpointing → responder → playback ring.

Two threads, both owned here and joined on ``close()`` (bounded), each with the object that owns its state:
- the *listener* (:class:`~edgevoice.live.listener.Listener`) reads the microphone ring in 32 ms frames, runs Silero
  VAD and the endpointing state machine, asks Smart Turn when a pause begins, detects barge-in, and hands each
  committed turn to the responder;
- the *responder* (:class:`~edgevoice.live.answering.Answerer`) transcribes the turn and streams the reply through
  the LLM and synthesizer into the playback ring.
A reply begun when the visitor fell silent is shared between the two (:class:`~edgevoice.reply.speculation.
SpeculativeReplies`). The audio device callbacks (see :mod:`edgevoice.audio.streams`) only copy into and out of the
rings. Stream time is counted in microphone samples, so the listener's logic is the same on real and simulated audio.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from edgevoice.audio.capture import NearEndGate
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import Clock, MonotonicClock
from edgevoice.errors import EdgeVoiceError
from edgevoice.interfaces import EndOfTurn, FloatAudio, TextEndOfTurn
from edgevoice.listen.endpointing import Endpointer, EndpointingConfig
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.listen.turn import Turn as Turn  # re-exported: part of this module's API
from edgevoice.live.activation import Activation
from edgevoice.live.answering import Answerer
from edgevoice.live.events import LoopEvent, Partial
from edgevoice.live.listener import FRAME, Listener
from edgevoice.reply.output import ReplyOutput
from edgevoice.reply.responder import Responder
from edgevoice.reply.speculation import PrefillAhead, SpeculativeReplies
from edgevoice.reply.trace import ReplyTrace
from edgevoice.thread_names import name_this_thread

log = logging.getLogger(__name__)


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


class VoiceLoop:
    def __init__(
        self,
        *,
        mic: SharedRing,
        speaker: SharedRing,
        vad: object,
        turn_model: EndOfTurn,
        responder: Responder,
        endpoint: EndpointingConfig,
        vad_threshold: float = 0.5,
        clock: Clock | None = None,
        on_trace: Callable[[ReplyTrace, Turn], None] | None = None,
        on_event: Callable[[LoopEvent], None] | None = None,
        reference: SharedRing | None = None,
        barge_in_level_db: float | None = None,
        compute_nice: int = 0,
        fallback_audio: FloatAudio | None = None,
        fallback_text: str = "",
        reply_budget_s: float | None = None,
        speculative_reply: bool = False,
        prefill_while_speaking: bool = False,
        activation: Activation | None = None,
        text_turn: TextEndOfTurn | None = None,
    ) -> None:
        """``mic`` holds the microphone as the listener should hear it (echo-cancelled, when ``reference`` is set:
        the ring the playback mirrors every buffer into, for the canceller). ``vad_threshold``: the speech
        probability at which a frame becomes speech. ``barge_in_level_db``: with an echo-cancelled microphone, arm
        a :class:`~edgevoice.audio.capture.NearEndGate` at that level (:attr:`gate`, which the capture callback
        feeds) so the speaker pauses before the VAD confirms a barge-in. ``compute_nice``: how much lower the CPU
        priority of the responder and recognition threads is than the listener's.

        ``fallback_audio`` (the fallback phrase, synthesized at start-up) is played instead of a reply that failed,
        or that queued no audio within ``reply_budget_s`` of the end of the turn: the reply's work is cancelled
        and the visitor hears the phrase whatever state the engines are in (a hung engine included).

        ``speculative_reply``: start the reply the moment the visitor falls silent, its audio held until the turn
        is committed (:mod:`edgevoice.reply.speculation`). ``prefill_while_speaking``: put each partial transcript
        into the language model's cache while the visitor speaks (:class:`~edgevoice.reply.speculation.PrefillAhead`).

        ``activation``: when the listener listens (:mod:`edgevoice.live.activation`); None: always.

        ``text_turn``: judges the words of a pause Smart Turn finds complete, on the recognition worker right after
        the speculative decode; by default the responder's local language model's judge (:func:`text_end_of_turn`).

        ``on_trace`` gets each finished turn; ``on_event`` gets the events of :mod:`edgevoice.live.events` (partial
        transcripts, a reply's first audio, barge-ins, fallbacks). Both run on the loop's threads.
        """
        self.mic, self.speaker = mic, speaker
        self.playback = PlaybackControl(speaker, reference)
        self.gate = NearEndGate(self.playback, level_db=barge_in_level_db) if barge_in_level_db is not None else None
        self.responder = responder
        self.clock = clock or MonotonicClock()
        self.on_event = on_event or (lambda _event: None)
        self.errors: list[EdgeVoiceError] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.asr = StreamingTranscriber(
            responder.recognizer,
            prompt=responder.asr_prompt,
            on_partial=self._on_partial,
            on_speculation=lambda spec: self.speculation.on_decoded(spec),
            nice=compute_nice,
        )
        self.answerer = Answerer(
            responder=responder,
            asr=self.asr,
            speaker=speaker,
            playback=self.playback,
            gate=self.gate,
            clock=self.clock,
            stop=self._stop,
            errors=self.errors,
            emit=self._emit,
            on_trace=on_trace,
            fallback_audio=fallback_audio,
            fallback_text=fallback_text,
            budget_s=reply_budget_s,
            nice=compute_nice,
        )
        self.speculation = SpeculativeReplies(
            enabled=speculative_reply,
            submit=self.answerer.submit,
            busy=lambda: self.answerer.busy,
            prefill=responder.prefill_turn,
            stop=self._stop,
            words=text_turn if text_turn is not None else text_end_of_turn(responder.llm, endpoint),
            incomplete_below=endpoint.text_incomplete_below,
            errors=self.errors,
        )
        self.prefill_ahead = (
            PrefillAhead(
                responder.prefill_turn, silent=lambda: self.speculation.valid, stop=self._stop, nice=compute_nice
            )
            if prefill_while_speaking
            else None
        )
        self.listener = Listener(
            mic=mic,
            vad=vad,
            turn_model=turn_model,
            endpointer=Endpointer(endpoint, threshold=vad_threshold),
            asr=self.asr,
            speculation=self.speculation,
            answerer=self.answerer,
            gate=self.gate,
            clock=self.clock,
            stop=self._stop,
            errors=self.errors,
            activation=activation,
        )

    def _emit(self, event: LoopEvent) -> None:
        self.on_event(event)

    def _on_partial(self, turn_id: int, text: str) -> None:
        """(The recognition worker.) A partial transcript: shown, read ahead by the words' judge and, with
        ``prefill_while_speaking``, handed to the prefill thread."""
        self._emit(Partial(turn_id, text))
        self.speculation.on_partial(text)
        if self.prefill_ahead is not None:
            self.prefill_ahead.offer(text)

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.responder.resume()  # a model interrupted when an earlier loop closed works again
        self.asr.start()
        threads = [("listener", self.listener.run), ("responder", self.answerer.run)]
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
        self._stop.set()
        self.speculation.abort()  # a reply begun early and waiting for its turn's end is dropped
        self.answerer.shut_down()
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

    # -- what the parts own, under the names callers use ----------------------------------------------------------
    @property
    def vad(self) -> object:
        return self.listener.vad

    @vad.setter
    def vad(self, vad: object) -> None:
        self.listener.vad = vad

    @property
    def turn_model(self) -> EndOfTurn:
        return self.listener.turn_model

    @turn_model.setter
    def turn_model(self, model: EndOfTurn) -> None:
        self.listener.turn_model = model

    @property
    def on_trace(self) -> Callable[[ReplyTrace, Turn], None] | None:
        return self.answerer.on_trace

    @on_trace.setter
    def on_trace(self, on_trace: Callable[[ReplyTrace, Turn], None] | None) -> None:
        self.answerer.on_trace = on_trace

    @property
    def activation(self) -> Activation:
        """The listening gate: ``press()``, ``release()``, ``trigger()`` from any thread."""
        return self.listener.activation

    @property
    def endpointer(self) -> Endpointer:
        return self.listener.endpointer

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
    def speculative_reply(self) -> bool:
        """Whether a reply may begin when the visitor falls silent."""
        return self.speculation.enabled

    @speculative_reply.setter
    def speculative_reply(self, enabled: bool) -> None:
        self.speculation.enabled = enabled

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
