"""The live loop's answering side: the responder thread, which answers each committed turn (or adopts the reply
begun for it when the visitor fell silent) into the playback ring, and the barge-in that cancels a reply."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from edgevoice.audio.capture import NearEndGate
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import Clock
from edgevoice.errors import EdgeVoiceError, StageError
from edgevoice.events import ChatMessage
from edgevoice.interfaces import FloatAudio
from edgevoice.kiosk.grounding_types import Verdict
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.listen.turn import Turn
from edgevoice.live.captions import ClauseCues
from edgevoice.live.events import (
    Announced,
    AskedAgain,
    BargeIn,
    LoopEvent,
    ReplyBegun,
    ReplyFinished,
    ReplyQueued,
    ReplyStarted,
    Shutdown,
    SpeakRequested,
    StageFailed,
    Transcribed,
    TurnCommitted,
    Withdrawn,
)
from edgevoice.live.mailbox import Mailbox
from edgevoice.memory import release_freed_memory
from edgevoice.priority import lower_this_thread
from edgevoice.reply.output import Fallback, FallbackReason, ReplyOutput
from edgevoice.reply.responder import Responder
from edgevoice.reply.speculation import SpeculativeReply
from edgevoice.reply.speech_text import normalize_for_speech
from edgevoice.reply.trace import ReplyTrace

log = logging.getLogger(__name__)

AnswererEvent = TurnCommitted | ReplyBegun | SpeakRequested | BargeIn | Withdrawn | Shutdown
"""What the answerer is told."""


class Answerer:
    """Answers committed turns one at a time on its own thread (:meth:`run`). It is told what happened with
    :meth:`tell`: a committed turn or a reply begun early waits in its inbox; a barge-in, a withdrawn turn and the
    shutdown take effect at once, on the caller's thread (a reply in progress must stop now), and overtake what
    waits. What it does it publishes: :class:`ReplyStarted`, :class:`BargeIn`, fallbacks, :class:`StageFailed`,
    and :class:`ReplyFinished` with each turn's trace."""

    def __init__(
        self,
        *,
        responder: Responder,
        asr: StreamingTranscriber,
        speaker: SharedRing,
        playback: PlaybackControl,
        gate: NearEndGate | None,
        clock: Clock,
        publish: Callable[[LoopEvent], None],
        fallback_audio: FloatAudio | None = None,
        fallback_text: str = "",
        budget_s: float | None = None,
        nice: int = 0,
        heard: Callable[[], int] | None = None,
    ) -> None:
        self.responder, self.asr = responder, asr
        self.speaker, self.playback, self.gate = speaker, playback, gate
        self._publish = publish
        self._nice = nice
        self._stop = threading.Event()
        self.cancel = threading.Event()
        """The current reply's work stops at its next token or clause (barge-in, fallback, shutdown)."""
        self._replying = threading.Event()
        self._inbox: Mailbox[AnswererEvent] = Mailbox()
        self._current_turn = 0
        self.barge_ins = 0
        self._withdrawal = threading.Lock()
        self._withdrawn = 0
        """The turn the visitor went on with after its commit (:class:`Withdrawn`): its exchange is forgotten."""
        self._exchange: tuple[int, list[ChatMessage]] = (0, [])
        """(turn, its messages) of the last exchange added to the conversation (the history may be trimmed since)."""
        self._transcripts: dict[int, str] = {}
        """The last few turns' transcripts, by turn id, as soon as they are known."""
        self.output = ReplyOutput(
            speaker,
            playback,
            self.cancel,
            self._stop,
            clock,
            fallback_audio=fallback_audio,
            fallback_text=fallback_text,
            budget_s=budget_s,
            on_fallback=self._fell_back,
        )
        self.captions = ClauseCues(lambda: playback.played, publish, heard=heard)
        """Publishes :class:`ClauseStarted` as each clause begins to play (its thread: :meth:`ClauseCues.run`)."""

    # -- what the listener tells it, and may ask ----------------------------------------------------------------------
    def tell(self, event: AnswererEvent) -> None:
        """(Any thread.) What happened: see the class's docstring."""
        match event:
            case TurnCommitted(turn, adopted):
                self.output.committed(turn.turn_id, turn.committed_wall)  # its reply budget runs from here
                if not adopted:  # else the reply begun for it (queued already) answers it
                    self._inbox.put(event)
            case ReplyBegun() | SpeakRequested():
                self._inbox.put(event)
            case BargeIn():
                self._barge_in()
            case Withdrawn(turn_id):
                self._withdraw(turn_id)
            case Shutdown():
                self._stop.set()
                self.cancel.set()
                self.captions.close()
                self._inbox.put(event)

    def tick(self) -> None:
        """(The listener, every frame, even without microphone audio.) A reply that queued no audio within its budget
        gets the fallback phrase, whatever this thread is stuck in."""
        self.output.check_budget()

    @property
    def busy(self) -> bool:
        """A turn or reply begun early is queued or being answered (done after its trace)."""
        return self._inbox.unfinished > 0

    @property
    def replying(self) -> bool:
        return self._replying.is_set()

    @property
    def reply_uncut(self) -> bool:
        """A reply plays and the visitor has not spoken over it."""
        return self._replying.is_set() and not self.cancel.is_set()

    @property
    def replying_to(self) -> int:
        """The turn whose reply is being answered or played (the last one, between replies; 0: none yet)."""
        return self._current_turn

    def transcript(self, turn_id: int) -> str | None:
        """Turn ``turn_id``'s transcript once it is known (the last few turns only)."""
        return self._transcripts.get(turn_id)

    def _barge_in(self) -> None:
        """The visitor speaks over the reply: silence the output now and cancel the reply's work (once)."""
        if self.cancel.is_set():
            return
        self.barge_ins += 1
        self.cancel.set()
        self.playback.request_flush()
        self._arm_gate(False)  # after the flush request: the gate lifts a pause only once the flush is done
        self._publish(BargeIn(self._current_turn))
        log.info("barge-in: output flushed, reply cancelled")

    def _withdraw(self, turn_id: int) -> None:
        with self._withdrawal:
            self._withdrawn = turn_id
            if self._exchange[0] == turn_id:  # answered already (and cut by the barge-in, most often)
                self.responder.forget(self._exchange[1])
                self._exchange = (0, [])
            elif self._current_turn == turn_id:
                self._barge_in()

    # -- the responder thread -------------------------------------------------------------------------------------
    def run(self) -> None:
        lower_this_thread(self._nice)
        while self.step():
            pass

    def step(self, timeout: float | None = None) -> bool:
        """Handle the next event of the inbox (waiting up to ``timeout`` for one); False once shut down."""
        event = self._inbox.get(timeout)
        if event is None:
            return not self._stop.is_set()
        try:
            match event:
                case Shutdown():
                    return False
                case ReplyBegun(reply):
                    self._speculate(reply)
                case TurnCommitted(turn):
                    self._answer(turn)
                case SpeakRequested():
                    self._announce(event)
        finally:
            self._inbox.task_done()
        return not self._stop.is_set()

    def _speculate(self, spec: SpeculativeReply) -> None:
        """Begin the reply for a speculation, its audio held; answer the turn with it if the listener adopts it."""
        self.cancel.clear()
        spec.start(self.responder, self.cancel, self._emit_first, self._queued_s)
        turn = spec.wait_decision()
        if turn is None:  # dropped (the visitor went on) or shutting down: nothing of it was heard
            self.cancel.set()
            try:
                spec.finish()
            except Exception as exc:  # a failure of a reply nobody hears is no turn's failure
                log.info("a dropped speculative reply failed: %s", exc)
            return
        self._answer(turn, spec)

    def _answer(self, turn: Turn, spec: SpeculativeReply | None = None) -> None:
        """Answer a committed turn: transcript, reply, playback, history, trace (``spec``: its reply was begun
        when the visitor fell silent; its audio is released now)."""
        with self._withdrawal:
            withdrawn = turn.turn_id == self._withdrawn  # the visitor went on before this thread got to it
            if not withdrawn:
                if spec is None:
                    self.cancel.clear()
                self._current_turn = turn.turn_id
        if withdrawn:
            log.info("turn %d: withdrawn before its reply, the visitor went on with it", turn.turn_id)
            if spec is not None:
                self.cancel.set()
                spec.finish()
            return
        trace = spec.trace if spec is not None else ReplyTrace(turn.turn_id, committed=turn.committed_wall)
        trace.committed = turn.committed_wall
        start = self.playback.played + self.speaker.available()
        trace.stream_start = start
        reply = self.output.begin(turn.turn_id, turn.committed_wall, trace)
        self.captions.follow(turn.turn_id, trace)
        if reply.fallback is not None:  # the phrase plays already (the budget ran out before this thread was free)
            self.captions.audible(turn.turn_id)
        self._replying.set()
        self._arm_gate(True)
        underruns = self.speaker.stats().underrun_events
        try:
            transcript = self.asr.finish(
                (turn.tail if turn.tail is not None else turn.audio).samples,
                turn_id=turn.turn_id,
                speculation_valid=turn.speculation_valid,
            )
            self._transcripts[turn.turn_id] = transcript.text
            self._publish(Transcribed(turn.turn_id, transcript.text))
            for old in sorted(self._transcripts)[:-4]:
                del self._transcripts[old]
            trace.speculative_transcript = self.asr.last_used_speculation
            if reply.fallback is not None:  # the budget ran out before this thread was free: the phrase plays
                self.cancel.set()
                trace.transcript = transcript.text
            elif spec is not None and spec.held is not None:
                trace.speculative_reply = True
                spec.held.release()  # the reply begun at the pause: what is ready plays now
                spec.finish()
                trace.settle_before(turn.committed_wall)
            else:
                self.responder.respond_to(transcript, trace, self.cancel, self._emit_first, queued_s=self._queued_s)
            if reply.fallback is None and self.output.samples:
                self._publish(ReplyQueued(trace, turn))  # its words are known as it plays (the actions act on it)
            self.playback.expect_audio = False  # all of the reply is queued: running dry now is its end
            self.output.wait_played()
        except EdgeVoiceError as exc:
            log.error("turn %d failed in %s: %s", turn.turn_id, exc.stage or "?", exc)
            self._publish(StageFailed(exc))
            trace.error = exc.code
            self.output.fallback(reply, FallbackReason.ERROR)
        except Exception as exc:  # an engine bug must cost one turn, not the service
            error = StageError("reply", f"unexpected {type(exc).__name__}: {exc}", code="stage_unexpected")
            log.exception("turn %d failed: %s", turn.turn_id, error)
            self._publish(StageFailed(error))
            trace.error = error.code
            self.output.fallback(reply, FallbackReason.ERROR)
        finally:
            self.playback.expect_audio = False
            if spec is not None:  # also when the held reply failed: no mark of this turn before its commit
                trace.settle_before(turn.committed_wall)
            trace.fallback = reply.fallback.value if reply.fallback is not None else None
            trace.cancelled = self.cancel.is_set() and reply.fallback is None  # the visitor barged in
            trace.underruns = self.speaker.stats().underrun_events - underruns
            if trace.cancelled:
                self.playback.wait_flushed(self._stop)  # so the count of samples played is final
            if reply.fallback is None:  # a failed turn leaves no trace in the conversation
                with self._withdrawal:
                    if self._withdrawn != turn.turn_id:  # nor one the visitor went on with
                        played = self.playback.played - start if trace.cancelled else None
                        self._exchange = (turn.turn_id, self.responder.commit(trace, played))
            else:
                trace.reply = self.output.fallback_text  # what the visitor heard
                self.output.wait_played(fallback=True)
            self.captions.finish(played_out=not trace.cancelled and self.speaker.available() == 0)
            self._arm_gate(False)
            self._replying.clear()
            self.output.end()
        if not self._stop.is_set():
            self.responder.prefill_history()
            if self._inbox.queued() == 0:  # nobody waits: the turn's cycles are collected, its freed pages go back
                trace.memory_trim_s = release_freed_memory()
        if trace.verdict == Verdict.UNHEARD.value and reply.fallback is None and not trace.cancelled:
            self._publish(AskedAgain(turn.turn_id))
        self._publish(ReplyFinished(trace, turn))

    def _announce(self, request: SpeakRequested) -> None:
        """Say a requested text between turns: a visitor's turn waiting goes first (the request queues behind it); the
        visitor who speaks over it cuts it short, as a reply. It never enters the conversation."""
        if self._inbox.holds((TurnCommitted, ReplyBegun)):
            self._inbox.put(request)
            return
        self.cancel.clear()
        self._replying.set()
        self._arm_gate(True)
        played = False
        try:
            for audio in self.responder.synthesizer.synthesize(normalize_for_speech(request.text)):
                if self.cancel.is_set() or self._inbox.holds((TurnCommitted, ReplyBegun)):
                    break  # a visitor's turn goes first
                self.output.emit(audio)
                self.playback.expect_audio = not self.cancel.is_set()
            else:
                self.playback.expect_audio = False
                self.output.wait_played()
                played = not self.cancel.is_set() and not self._stop.is_set()
        except Exception as exc:  # costs the announcement, never the loop
            error = exc if isinstance(exc, EdgeVoiceError) else StageError("tts", f"{type(exc).__name__}: {exc}")
            log.error("announcement %s failed: %s", request.request_id, error)
            self._publish(StageFailed(error))
        finally:
            self.playback.expect_audio = False
            if self.cancel.is_set():
                self.playback.wait_flushed(self._stop)
            self._arm_gate(False)
            self._replying.clear()
            self._publish(Announced(request.request_id, played))

    def _queued_s(self) -> float:
        return self.speaker.available() / self.responder.synthesizer.sample_rate

    def _arm_gate(self, armed: bool) -> None:
        if self.gate is not None:
            self.gate.armed = armed

    def _emit_first(self, audio: FloatAudio) -> int:
        """From the first synthesized audio until the reply ends, the output must never run dry."""
        first = self.output.samples == 0
        n = self.output.emit(audio)
        self.playback.expect_audio = not self.cancel.is_set()
        if first and n:
            self._publish(ReplyStarted(self._current_turn))
            self.captions.audible(self._current_turn)
        return n

    def _fell_back(self, event: Fallback) -> None:
        """(The output, on any thread) the fallback phrase replaced the reply: published; its caption may follow."""
        self._publish(event)
        self.captions.audible(event.turn_id)
