"""The live loop's answering side: the responder thread, which answers each committed turn (or adopts the reply
begun for it when the visitor fell silent) into the playback ring, and the decision to begin that reply early.
A mixin of :class:`edgevoice.live.loop.VoiceLoop`, which owns the state it uses."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from edgevoice.audio.capture import NearEndGate
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.errors import EdgeVoiceError, StageError
from edgevoice.interfaces import FloatAudio
from edgevoice.listen.streaming_asr import Speculation, StreamingTranscriber
from edgevoice.live.events import LoopEvent, Speaking
from edgevoice.priority import lower_this_thread
from edgevoice.reply.output import FallbackReason, ReplyOutput
from edgevoice.reply.responder import ReplyTrace, Responder
from edgevoice.reply.speculation import SpeculativeReply

if TYPE_CHECKING:
    from edgevoice.listen.turn import Turn

log = logging.getLogger("edgevoice.live.loop")


class Answering:
    """The responder thread's work (see :class:`edgevoice.live.loop.VoiceLoop` for the state)."""

    _turns: queue.Queue[Turn | SpeculativeReply | None]
    _stop: threading.Event
    _cancel: threading.Event
    _replying: threading.Event
    _current_turn: int
    _compute_nice: int
    playback: PlaybackControl
    speaker: SharedRing
    output: ReplyOutput
    gate: NearEndGate | None
    errors: list[EdgeVoiceError]
    responder: Responder
    asr: StreamingTranscriber
    on_trace: Callable[[ReplyTrace, Turn], None] | None
    on_event: Callable[[LoopEvent], None]
    speculative_reply: bool
    speculative_replies: dict[str, int]
    _spec_lock: threading.Lock
    _spec_reply: SpeculativeReply | None
    _spec_seq: int
    _spec_valid: bool
    _turn_open: bool
    _turn_id: int
    _speculation_done: threading.Event

    def _respond(self) -> None:
        lower_this_thread(self._compute_nice)
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
        self._cancel.clear()
        spec.start(self.responder, self._cancel, self._emit_first, self._queued_s)
        turn = spec.wait_decision(self._stop)
        if turn is None:  # dropped (the visitor went on) or shutting down: nothing of it was heard
            self._cancel.set()
            try:
                spec.finish()
            except Exception as exc:  # a failure of a reply nobody hears is no turn's failure
                log.info("a dropped speculative reply failed: %s", exc)
            return
        self._answer(turn, spec)

    def _answer(self, turn: Turn, spec: SpeculativeReply | None = None) -> None:
        """Answer a committed turn: transcript, reply, playback, history, trace (``spec``: its reply was begun
        when the visitor fell silent; its audio is released now)."""
        if spec is None:
            self._cancel.clear()
        self._current_turn = turn.turn_id
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
                turn.tail if turn.tail is not None else turn.audio, speculation_valid=turn.speculation_valid
            )
            trace.speculative_transcript = self.asr.last_used_speculation
            if reply.fallback is not None:  # the budget ran out before this thread was free: the phrase plays
                self._cancel.set()
                trace.transcript = transcript.text
            elif spec is not None and spec.held is not None:
                trace.speculative_reply = True
                spec.held.release()  # the reply begun at the pause: what is ready plays now
                spec.finish()
                trace.settle_before(turn.committed_wall)
            else:
                self.responder.respond_to(transcript, trace, self._cancel, self._emit_first, queued_s=self._queued_s)
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
            trace.cancelled = self._cancel.is_set() and reply.fallback is None  # the visitor barged in
            trace.underruns = self.speaker.stats().underrun_events - underruns
            if trace.cancelled:
                self.playback.wait_flushed(self._stop)  # so the count of samples played is final
            if reply.fallback is None:  # a failed turn leaves no trace in the conversation
                self.responder.commit(trace, self.playback.played - start if trace.cancelled else None)
            else:
                trace.reply = self.output.fallback_text  # what the visitor heard
                self.output.wait_played(fallback=True)
            self._arm_gate(False)
            self._replying.clear()
            self.output.end()
        if not self._stop.is_set():
            self.responder.prefill_history()
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
        self.playback.expect_audio = not self._cancel.is_set()
        if first and n:
            self.on_event(Speaking(self._current_turn))
        return n

    # -- speculative replies (see edgevoice/reply/speculation.py) ------------------------------------------------
    def _on_speculation(self, spec: Speculation) -> None:
        """(The recognition worker) the tail is decoded: begin the reply now if all is ready for it, else at least
        put the question into the language model's cache."""
        self._speculation_done.set()
        with self._spec_lock:
            start = (
                self.speculative_reply
                and spec.stable
                and spec.turn_id == self._turn_id
                and spec.seq == self._spec_seq
                and self._spec_valid
                and self._turn_open
                and self._spec_reply is None
                and self._turns.unfinished_tasks == 0  # the responder is free: no reply queued or playing
                and not self._stop.is_set()
            )
            log.debug(
                "speculation %d.%d stable=%s current=%s valid=%s open=%s busy=%d: %s",
                spec.turn_id, spec.seq, spec.stable, spec.turn_id == self._turn_id and spec.seq == self._spec_seq,
                self._spec_valid, self._turn_open, self._turns.unfinished_tasks, "reply begun" if start else "prefill",
            )  # fmt: skip
            if start:
                reply = SpeculativeReply(spec.turn_id, spec.seq, spec.text, ReplyTrace(spec.turn_id, committed=0.0))
                self._spec_reply = reply
                self.speculative_replies["started"] += 1
                self._turns.put(reply)
        if not start:
            self.responder.prefill_turn(spec.text)

    def _drop_speculative_reply(self) -> None:
        """(The listener, holding ``_spec_lock``.)"""
        if self._spec_reply is not None:
            self.speculative_replies["dropped"] += 1
            self._spec_reply.drop()
            self._spec_reply = None
