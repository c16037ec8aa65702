"""The live loop's answering side: the responder thread, which answers each committed turn (or adopts the reply
begun for it when the visitor fell silent) into the playback ring, and the barge-in that cancels a reply."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from edgevoice.audio.capture import NearEndGate
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import Clock
from edgevoice.errors import EdgeVoiceError, StageError
from edgevoice.events import ChatMessage
from edgevoice.interfaces import FloatAudio
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.listen.turn import Turn
from edgevoice.live.events import BargeIn, LoopEvent, Speaking
from edgevoice.memory import release_freed_memory
from edgevoice.priority import lower_this_thread
from edgevoice.reply.output import FallbackReason, ReplyOutput
from edgevoice.reply.responder import Responder
from edgevoice.reply.speculation import SpeculativeReply
from edgevoice.reply.trace import ReplyTrace

log = logging.getLogger(__name__)


class Answerer:
    """Answers committed turns one at a time on its own thread (:meth:`run`); :meth:`submit` queues a turn or a
    speculative reply, :meth:`barge_in` cuts the reply that plays."""

    def __init__(
        self,
        *,
        responder: Responder,
        asr: StreamingTranscriber,
        speaker: SharedRing,
        playback: PlaybackControl,
        gate: NearEndGate | None,
        clock: Clock,
        stop: threading.Event,
        errors: list[EdgeVoiceError],
        emit: Callable[[LoopEvent], None],
        on_trace: Callable[[ReplyTrace, Turn], None] | None = None,
        fallback_audio: FloatAudio | None = None,
        fallback_text: str = "",
        budget_s: float | None = None,
        nice: int = 0,
    ) -> None:
        self.responder, self.asr = responder, asr
        self.speaker, self.playback, self.gate = speaker, playback, gate
        self._stop, self.errors, self._emit, self.on_trace = stop, errors, emit, on_trace
        self._nice = nice
        self.cancel = threading.Event()
        """The current reply's work stops at its next token or clause (barge-in, fallback, shutdown)."""
        self._replying = threading.Event()
        self._turns: queue.Queue[Turn | SpeculativeReply | None] = queue.Queue()
        self._current_turn = 0
        self.barge_ins = 0
        self._withdrawal = threading.Lock()
        self._withdrawn = 0
        """The turn the visitor went on with after its commit (:meth:`withdraw`): its exchange is forgotten."""
        self._exchange: tuple[int, list[ChatMessage]] = (0, [])
        """(turn, its messages) of the last exchange added to the conversation (the history may be trimmed since)."""
        self.transcripts: dict[int, str] = {}
        """The last few turns' transcripts, by turn id, as soon as they are known."""
        self.output = ReplyOutput(
            speaker,
            playback,
            self.cancel,
            stop,
            clock,
            fallback_audio=fallback_audio,
            fallback_text=fallback_text,
            budget_s=budget_s,
            on_fallback=emit,
        )

    # -- the listener's side --------------------------------------------------------------------------------------
    def submit(self, item: Turn | SpeculativeReply) -> None:
        self._turns.put(item)

    @property
    def busy(self) -> bool:
        """A turn or speculative reply queued or being answered (done after its trace)."""
        return self._turns.unfinished_tasks > 0

    @property
    def replying(self) -> bool:
        return self._replying.is_set()

    def barge_in(self) -> None:
        """The visitor speaks over the reply: silence the output now and cancel the reply's work (once)."""
        if self.cancel.is_set():
            return
        self.barge_ins += 1
        self.cancel.set()
        self.playback.request_flush()
        self._arm_gate(False)  # after the flush request: the gate lifts a pause only once the flush is done
        self._emit(BargeIn(self._current_turn))
        log.info("barge-in: output flushed, reply cancelled")

    def withdraw(self, turn_id: int) -> None:
        """The visitor went on speaking right after turn ``turn_id`` was committed, and the turn that goes on will
        answer the whole: its reply stops if it plays (or never starts), and its exchange leaves the conversation."""
        with self._withdrawal:
            self._withdrawn = turn_id
            if self._exchange[0] == turn_id:  # answered already (and cut by the barge-in, most often)
                self.responder.forget(self._exchange[1])
                self._exchange = (0, [])
            elif self._current_turn == turn_id:
                self.barge_in()

    def shut_down(self) -> None:
        """Cancel the reply in progress and end :meth:`run` after it."""
        self.cancel.set()
        self._turns.put(None)

    # -- the responder thread -------------------------------------------------------------------------------------
    def run(self) -> None:
        lower_this_thread(self._nice)
        while not self._stop.is_set():
            item = self._turns.get()
            if item is None:
                return
            try:
                if isinstance(item, SpeculativeReply):
                    self._speculate(item)
                else:
                    self._answer(item)
            finally:
                self._turns.task_done()

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
        self._replying.set()
        self._arm_gate(True)
        underruns = self.speaker.stats().underrun_events
        try:
            transcript = self.asr.finish(
                turn.tail if turn.tail is not None else turn.audio,
                turn_id=turn.turn_id,
                speculation_valid=turn.speculation_valid,
            )
            self.transcripts[turn.turn_id] = transcript.text
            for old in sorted(self.transcripts)[:-4]:
                del self.transcripts[old]
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
            self.playback.expect_audio = False  # all of the reply is queued: running dry now is its end
            self.output.wait_played()
        except EdgeVoiceError as exc:
            log.error("turn %d failed in %s: %s", turn.turn_id, exc.stage or "?", exc)
            self.errors.append(exc)
            trace.error = exc.code
            self.output.fallback(reply, FallbackReason.ERROR)
        except Exception as exc:  # an engine bug must cost one turn, not the service
            error = StageError("reply", f"unexpected {type(exc).__name__}: {exc}", code="stage_unexpected")
            log.exception("turn %d failed: %s", turn.turn_id, error)
            self.errors.append(error)
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
                        added = self.responder.commit(trace, self.playback.played - start if trace.cancelled else None)
                        self._exchange = (turn.turn_id, added)
            else:
                trace.reply = self.output.fallback_text  # what the visitor heard
                self.output.wait_played(fallback=True)
            self._arm_gate(False)
            self._replying.clear()
            self.output.end()
        if not self._stop.is_set():
            self.responder.prefill_history()
            if self._turns.qsize() == 0:  # nobody waits: the turn's cycles are collected, its freed pages go back
                trace.memory_trim_s = release_freed_memory()
        try:
            if self.on_trace is not None:
                self.on_trace(trace, turn)
        except Exception as exc:  # a failing report (a full disk under the metrics file) costs no turn
            log.exception("turn %d: reporting failed: %s", turn.turn_id, exc)

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
            self._emit(Speaking(self._current_turn))
        return n
