"""The turn in progress, assembled frame by frame: the preroll, the turn's frames, the endpointer's events, Smart Turn
at each pause (and its early verdict when the visitor falls silent), the speculative decode at that silence, the
partial transcripts, a turn that goes on with the one just committed, and a turn cut at ``max_turn_s`` held until the
visitor pauses. It builds the :class:`~edgevoice.listen.turn.Turn` and commits it. When to listen, and what is a
barge-in, are the listener's (:mod:`edgevoice.live.listener`), which feeds this one."""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections import deque
from collections.abc import Callable
from typing import Protocol

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.chunk import AudioChunk
from edgevoice.clock import Clock
from edgevoice.interfaces import EndOfTurn
from edgevoice.listen.endpointing import (
    CutTurnPause,
    Endpointer,
    EndpointEvent,
    EndpointState,
    Pause,
    Silence,
    SilenceEnd,
    SpeechStart,
    TurnEnd,
    TurnEndReason,
)
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.listen.turn import Turn
from edgevoice.live.answering import AnswererEvent
from edgevoice.live.events import LoopEvent, SpeechStarted, TurnCommitted, Withdrawn
from edgevoice.live.pause_judge import PauseJudge, Replying
from edgevoice.live.rejoin import Rejoin
from edgevoice.reply.speculation import SpeculativeReplies

log = logging.getLogger(__name__)

FRAME = 512
"""Samples in one of the listener's frames (32 ms)."""
PREROLL_S = 0.3
PARTIAL_FRAMES = 31
"""A partial transcript about every second of a turn in progress."""
PARTIAL_MAX_FRAMES = 313
"""A partial transcript covers the last 10 s at most: a long monologue must not cost ever longer decodes."""


class ReplyState(Replying, Protocol):
    """What turn assembly may know of the reply side (:class:`~edgevoice.live.answering.Answerer`): read only."""

    @property
    def reply_uncut(self) -> bool:
        """A reply plays and nobody spoke over it."""

    def transcript(self, turn_id: int) -> str | None:
        """Turn ``turn_id``'s transcript, once known."""


class TurnAssembly:
    """Owns the turn in progress, fed by the listener one frame at a time with the VAD's speech probability:
    :meth:`hear` then :meth:`act` (:meth:`hear_held` while a cut turn waits); in push-to-talk :meth:`press`,
    :meth:`keep`, :meth:`partial`, then :meth:`end` or :meth:`abandon`. ``at``: the microphone samples read so far
    (the frame's end). It tells the answerer of a committed or withdrawn turn (``tell``), and publishes them, each
    turn's start and Smart Turn's failures (``publish``)."""

    def __init__(
        self,
        *,
        turn_model: EndOfTurn,
        endpointer: Endpointer,
        asr: StreamingTranscriber,
        speculation: SpeculativeReplies,
        reply: ReplyState,
        tell: Callable[[AnswererEvent], None],
        publish: Callable[[LoopEvent], None],
        played: Callable[[], int],
        clock: Clock,
        may_rejoin: Callable[[], bool],
    ) -> None:
        """``played``: the samples the output has played. ``may_rejoin``: whether speech soon after a commit may go on
        with the committed turn (the listener's activation mode says)."""
        self.endpointer, self.asr, self.speculation, self.reply = endpointer, asr, speculation, reply
        self._tell, self._publish, self._played, self._may_rejoin = tell, publish, played, may_rejoin
        self.clock = clock
        self._pauses = PauseJudge(
            turn_model=turn_model,
            config=endpointer.config,
            asr=asr,
            speculation=speculation,
            reply=reply,
            publish=publish,
        )
        self._ids = itertools.count(1)
        self._preroll: deque[AudioChunk] = deque(maxlen=int(PREROLL_S * SAMPLE_RATE / FRAME) + 1)
        self._turn: list[AudioChunk] | None = None
        self._turn_id = 0
        self._segment_start = 0
        self._last_partial = 0
        self._held: Turn | None = None
        """A turn cut at ``max_turn_s``, waiting for the visitor to pause before it is answered."""
        self._rejoin = Rejoin(endpointer.config)
        self._max_turn_s = endpointer.config.max_turn_s
        self._continues: int | None = None
        """The turn that the turn in progress goes on with (None: it is a turn of its own)."""

    # -- what the listener may ask ------------------------------------------------------------------------------------
    @property
    def in_turn(self) -> bool:
        """A turn is open, or cut and waiting for the visitor's pause."""
        return self._turn is not None or self._held is not None

    @property
    def turn_open(self) -> bool:
        """A turn is being heard (not one cut and held)."""
        return self._turn is not None

    @property
    def held(self) -> bool:
        """A turn cut at ``max_turn_s`` waits for the visitor's pause: nothing heard meanwhile is kept."""
        return self._held is not None

    @property
    def turn_id(self) -> int:
        """The latest turn's id (0: none yet)."""
        return self._turn_id

    @property
    def idle(self) -> bool:
        """The endpointer waits for speech."""
        return self.endpointer.state is EndpointState.IDLE

    def is_speech(self, probability: float) -> bool:
        return self.endpointer.is_speech(probability)

    def has_room(self) -> bool:
        """Push-to-talk: the open turn is shorter than ``max_turn_s`` (beyond, frames are not kept)."""
        return self.kept < self._max_turn_s * SAMPLE_RATE

    @property
    def turn_model(self) -> EndOfTurn:
        return self._pauses.turn_model

    def use_turn_model(self, turn_model: EndOfTurn) -> None:
        """Smart Turn's stand-in from now on (a test's)."""
        self._pauses.use_turn_model(turn_model)

    # -- what the listener tells it -----------------------------------------------------------------------------------
    def hear(self, frame: AudioChunk, probability: float) -> list[EndpointEvent]:
        """A frame listened to, no turn held: kept (in the preroll, and in the open turn or for the committed turn that
        speech may go on with), fed to the endpointer, the speculative decode begun if the visitor fell silent. The
        endpointer's events are for :meth:`act`."""
        self._preroll.append(frame)
        if self._turn is not None:
            self._turn.append(frame)
        else:
            self._rejoin.hear(frame, frame.end / SAMPLE_RATE, self._played())
        events = self.endpointer.feed(FRAME / SAMPLE_RATE, probability)
        if self._turn is not None:
            self._pauses.hear(events, self._turn, self._segment_start, frame)
        return events

    def act(self, events: list[EndpointEvent], at: int) -> None:
        """The endpointer's events of the frame just heard: a turn starts, is judged at a pause, or ends; while the
        visitor speaks, a partial transcript about every second."""
        pending: list[EndpointEvent] = [e for e in events if not isinstance(e, (Silence, SilenceEnd))]
        while pending:
            event = pending.pop(0)
            if isinstance(event, SpeechStart):
                self._start_turn(at, onset=event.t)
            elif isinstance(event, Pause) and self._turn is not None:
                pending += self._judge_pause()
            elif isinstance(event, TurnEnd) and self._turn is not None:
                self.end(event, at)
                return
        if self._turn is not None and self.endpointer.state == EndpointState.SPEECH:
            self.partial()

    def hear_held(self, probability: float, at: int) -> None:
        """A frame while a cut turn waits: its speech is neither kept nor a new turn; the visitor's pause commits it."""
        for event in self.endpointer.feed(FRAME / SAMPLE_RATE, probability):
            if isinstance(event, CutTurnPause):
                assert self._held is not None
                held, self._held = self._held, None
                self._commit(dataclasses.replace(held, committed_t=at / SAMPLE_RATE, committed_wall=self.clock.now()))

    def press(self, at: int) -> None:
        """Push-to-talk: the key went down with the frame ending at ``at``; the turn starts at the press."""
        self._preroll.clear()  # nothing from before the press is kept
        self._start_turn(at)

    def keep(self, frame: AudioChunk) -> None:
        """Push-to-talk, the key held: a frame of the open turn (while :meth:`has_room`)."""
        assert self._turn is not None
        self._turn.append(frame)

    @property
    def kept(self) -> int:
        """Samples of the open turn kept so far."""
        assert self._turn is not None
        return len(self._turn) * FRAME

    def abandon(self) -> None:
        """The open turn goes, unanswered (a push-to-talk turn without speech)."""
        self._turn = None
        self.speculation.abort()

    def restart(self, at: int) -> None:
        """Listening starts afresh (a trigger): nothing heard before is part of the next turn."""
        self._preroll.clear()
        self.endpointer.reset(t=at / SAMPLE_RATE)

    def drop(self, at: int) -> None:
        """A bug cost this frame: the open turn goes (a cut one still waits for the pause that answers it)."""
        self.abandon()
        if self._held is None:
            self.endpointer.reset(t=at / SAMPLE_RATE)

    # -- the turn -----------------------------------------------------------------------------------------------------
    def _start_turn(self, at: int, *, onset: float | None = None) -> None:
        """A turn begins (its speech's ``onset`` in stream seconds; None: push-to-talk). Speech soon enough after a
        committed turn goes on with it: the committed turn is withdrawn and this one holds both."""
        rejoin = None
        if onset is not None and self._may_rejoin():
            rejoin = self._rejoin.take(onset, reply_uncut=self.reply.reply_uncut)
        self._rejoin.forget()
        self._turn = list(self._preroll) if rejoin is None else [*rejoin.frames, *rejoin.since]
        self._turn_id = next(self._ids)
        self._segment_start = self._last_partial = 0
        self._pauses.forget()
        self._continues = None
        self.speculation.open_turn(self._turn_id)
        self._publish(SpeechStarted(self._turn_id, at / SAMPLE_RATE if onset is None else onset))
        if rejoin is None:
            self.asr.start_turn(self._turn_id)
            return
        self._continues = rejoin.turn_id
        self._tell(Withdrawn(rejoin.turn_id))
        self._publish(Withdrawn(rejoin.turn_id))
        carried = self.reply.transcript(rejoin.turn_id)
        self.asr.start_turn(self._turn_id, carried=carried)
        if carried is None:  # not recognized yet (the responder was busy): decode it again as this turn's first part
            self.asr.commit_segment(AudioChunk.join(rejoin.frames).samples)
        self._segment_start = self._last_partial = len(rejoin.frames)
        log.info("turn %d goes on with turn %d (%r), committed %.2f s before the visitor went on",
                 self._turn_id, rejoin.turn_id, carried, (onset or 0.0) - rejoin.speech_end_t)  # fmt: skip

    def partial(self) -> None:
        """A partial transcript of the open turn (its last :data:`PARTIAL_MAX_FRAMES` since its last pause), every
        :data:`PARTIAL_FRAMES`."""
        assert self._turn is not None
        if len(self._turn) - self._last_partial >= PARTIAL_FRAMES:
            self._last_partial = len(self._turn)
            recent = self._turn[max(self._segment_start, len(self._turn) - PARTIAL_MAX_FRAMES) :]
            self.asr.partial(AudioChunk.join(recent).samples)

    def _judge_pause(self) -> list[EndpointEvent]:
        """The pause's verdict, told to the endpointer; an incomplete turn's audio so far is decoded now."""
        assert self._turn is not None
        valid = self.speculation.valid
        decided = self._pauses.verdict(self._turn_id, self._turn, valid=valid)
        verdict = self.endpointer.report_turn_probability(decided.p, max_silence_ms=decided.max_silence_ms)
        if not any(isinstance(e, TurnEnd) for e in verdict) and not decided.unsure:
            # an incomplete turn: what was said up to this pause is stable, decode it now (an unsure one keeps its
            # speculative decode and the reply begun for it: they stand if the visitor says nothing more)
            segment = AudioChunk.join(self._turn[self._segment_start :])
            self.asr.commit_segment(segment.samples, speculated=valid)
            self._segment_start = self._last_partial = len(self._turn)
            self.speculation.invalidate()
        return verdict

    def end(self, event: TurnEnd, at: int, *, unheard: int = 0) -> None:
        """Hand the ended turn to the answerer (or to the reply begun for it; a cut one once the visitor pauses).
        ``unheard``: samples read since the turn's last frame (a push-to-talk release: the frame it came in)."""
        assert self._turn is not None
        joined = AudioChunk.join(self._turn)
        audio = AudioChunk(joined.samples, at - unheard - len(joined))  # a rejoined turn: contiguous
        tail_audio = AudioChunk.join(self._turn[self._segment_start :]).samples
        tail = AudioChunk(tail_audio, audio.end - len(tail_audio))
        turn = Turn(
            self._turn_id,
            audio,
            event.speech_end_t,
            at / SAMPLE_RATE,
            self.clock.now(),
            event.reason,
            tail,
            speculation_valid=self.speculation.valid and event.reason is not TurnEndReason.MAX_LENGTH,
            words_verdict=self.speculation.words_cost if self.speculation.valid else None,
            continues=self._continues,
        )
        rejoinable = event.reason in (TurnEndReason.COMPLETE, TurnEndReason.SILENCE_TIMEOUT)
        if rejoinable and self._may_rejoin():
            self._rejoin.committed(turn.turn_id, self._turn, event.speech_end_t, self._played())
        self._turn = None
        if self.speculation.close_turn(turn, lambda adopted: self._commit(adopted, adopted=True)):
            return
        if event.reason is TurnEndReason.MAX_LENGTH:  # a monologue: answer what was kept once the visitor pauses
            log.info("turn %d reached max_turn_s: held until the visitor pauses", turn.turn_id)
            self._held = turn
            return
        self._commit(turn)

    def _commit(self, turn: Turn, *, adopted: bool = False) -> None:
        """The turn is the answerer's now (``adopted``: the reply begun at its pause answers it); its reply budget
        runs from here."""
        event = TurnCommitted(turn, adopted)
        self._tell(event)
        self._publish(event)
