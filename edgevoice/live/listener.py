"""The live loop's listening side: microphone frames → Silero VAD → the endpointing state machine → committed
turns, with the partial transcripts, the speculative decode when the visitor falls silent, Smart Turn at each pause,
and barge-in detection while a reply plays. Every silence decision is the endpointer's; this reacts to its events."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.capture import NearEndGate
from edgevoice.audio.chunk import AudioChunk
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import Clock
from edgevoice.errors import EdgeVoiceError, StageError
from edgevoice.interfaces import EndOfTurn, VoiceActivity
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
    pause_verdict,
)
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.listen.turn import Turn
from edgevoice.live.activation import Activation, ActivationMode, Press, Release, Trigger
from edgevoice.live.answering import AnswererEvent
from edgevoice.live.events import BargeIn, Listening, LoopEvent, SpeechStarted, StageFailed, TurnCommitted, Withdrawn
from edgevoice.live.rejoin import Rejoin
from edgevoice.reply.speculation import SpeculativeReplies

log = logging.getLogger(__name__)

FRAME = 512
PREROLL_S = 0.3
PARTIAL_FRAMES = 31
"""A partial transcript about every second of a turn in progress."""
PARTIAL_MAX_FRAMES = 313
"""A partial transcript covers the last 10 s at most: a long monologue must not cost ever longer decodes."""
SPECULATION_WAIT_S = 0.4
"""At a pause, how long the listener waits for a speculative decode still running before it asks Smart Turn."""
WORDS_WAIT_S = 1.5
"""The longest a pause that sounds complete waits for its transcript, for the words' verdict (on two busy cores
the speculative decode can take over a second; the reply could not begin before it anyway)."""
MIC_BURST = 160
"""Samples one microphone callback writes at the default ``audio.frame_ms`` (10 ms): the listener sleeps until a frame
is that close to complete, then polls for it."""
BARGE_IN_FRAMES = 2
"""VAD frames of speech during a reply that confirm a barge-in (64 ms)."""


class ReplyView(Protocol):
    """What the listener may know of the reply side (:class:`~edgevoice.live.answering.Answerer`): read only."""

    @property
    def replying(self) -> bool:
        """A reply is being answered or played."""

    @property
    def reply_uncut(self) -> bool:
        """A reply plays and nobody spoke over it."""

    @property
    def replying_to(self) -> int:
        """The turn whose reply is being answered or played (0: none yet)."""

    def transcript(self, turn_id: int) -> str | None:
        """Turn ``turn_id``'s transcript, once known."""

    def tick(self) -> None:
        """Called every frame (and every 0.1 s without microphone audio): the reply budget's clock."""


class Listener:
    """Reads the microphone ring on its own thread (:meth:`run`), or is fed frame by frame (:meth:`feed`), and tells
    the answerer what happened (``tell``: a committed turn, a barge-in, a withdrawn turn); publishes what it hears
    (``publish``: speech started, failures)."""

    def __init__(
        self,
        *,
        mic: SharedRing,
        vad: VoiceActivity,
        turn_model: EndOfTurn,
        endpointer: Endpointer,
        asr: StreamingTranscriber,
        speculation: SpeculativeReplies,
        reply: ReplyView,
        tell: Callable[[AnswererEvent], None],
        publish: Callable[[LoopEvent], None],
        played: Callable[[], int],
        gate: NearEndGate | None,
        clock: Clock,
        activation: Activation | None = None,
    ) -> None:
        """``activation``: when to listen (:mod:`edgevoice.live.activation`); None listens always. When Smart Turn
        finds a pause complete, the words' verdict that ``speculation`` took on the transcript may still find it
        incomplete (``endpointing.text_incomplete_below``). ``played``: the samples the output has played."""
        self.mic, self.vad, self.turn_model, self.endpointer = mic, vad, turn_model, endpointer
        self.asr, self.speculation, self.reply, self.gate = asr, speculation, reply, gate
        self._tell, self._publish, self._played = tell, publish, played
        self.clock = clock
        self._stop = threading.Event()
        self.samples_in = 0
        self._ids = itertools.count(1)
        self._preroll: deque[AudioChunk] = deque(maxlen=int(PREROLL_S * SAMPLE_RATE / FRAME) + 1)
        self._turn: list[AudioChunk] | None = None
        self._turn_id = 0
        self._segment_start = 0
        self._last_partial = 0
        self._held: Turn | None = None
        """A turn cut at ``max_turn_s``, waiting for the visitor to pause before it is answered."""
        self._early_verdict: float | None = None
        """Smart Turn's verdict taken when the visitor fell silent, for the pause that follows (None: none)."""
        self._silence_audio: list[AudioChunk] | None = None
        """The turn's frames up to the moment the visitor fell silent (for the early verdict)."""
        self._loud = 0
        self.activation = activation or Activation()
        self._armed_at: int | None = None
        """Trigger mode: the microphone sample at which the open trigger came (None: not listening)."""
        self._armed_turn = 0
        self._heard = False
        """Push-to-talk: the VAD heard speech in the turn held so far."""
        self._pressed_at = 0
        """Push-to-talk: the microphone sample at which the key went down."""
        self._speech_end = 0.0
        self._rejoin = Rejoin(endpointer.config)
        self._continues: int | None = None
        """The turn that the turn in progress goes on with (None: it is a turn of its own)."""
        self._listening = False
        """What :class:`Listening` last said (push-to-talk and trigger modes)."""

    @property
    def in_turn(self) -> bool:
        """A turn is open, or cut and waiting for the visitor's pause."""
        return self._turn is not None or self._held is not None

    def run(self) -> None:
        """Until :meth:`close`: every frame of the microphone ring, fed as it comes."""
        self.vad.reset()
        while not self._stop.is_set():
            if not self.mic.wait_for(FRAME, timeout=0.1, stop=self._stop, rate=SAMPLE_RATE, burst=MIC_BURST):
                self.reply.tick()  # no microphone audio (a dead device): the budget still holds
                continue
            while self.mic.available() >= FRAME and not self._stop.is_set():
                self.feed(AudioChunk(self.mic.read(FRAME), self.samples_in))

    def close(self) -> None:
        """Stop :meth:`run` (at its next frame, or within 0.1 s without microphone audio)."""
        self._stop.set()

    def feed(self, chunk: AudioChunk) -> None:
        """One microphone frame (:data:`FRAME` samples, following the last). A failure costs this frame, never the
        listener."""
        self.samples_in = chunk.end
        try:
            self._on_frame(chunk)
            self._note_listening()
        except EdgeVoiceError as exc:
            # a failing VAD or end-of-turn model costs this frame (or this pause verdict), never the loop
            log.error("listener: %s", exc)
            self._publish(StageFailed(exc))
        except Exception as exc:  # a bug must not leave the kiosk deaf: drop the turn in progress
            error = StageError("listen", f"unexpected {type(exc).__name__}: {exc}", code="stage_unexpected")
            log.exception("listener: %s", error)
            self._publish(StageFailed(error))
            self._turn = None
            self.speculation.abort()
            if self._held is None:  # else the endpointer still waits for the pause that answers it
                self.endpointer.reset(t=self.samples_in / SAMPLE_RATE)

    def _barge_in(self) -> None:
        self._tell(BargeIn(self.reply.replying_to))

    def _on_frame(self, frame: AudioChunk) -> None:
        self.reply.tick()
        mode = self.activation.mode
        if mode is ActivationMode.PUSH_TO_TALK:
            self._push_to_talk(frame)
            return
        if self.activation.triggered_mode and not self._triggered(frame):
            return
        probability = self.vad.probability(frame.samples)
        if self._held is not None:
            # speech meanwhile is neither kept (the turn's audio is bounded) nor a new turn nor a barge-in
            for event in self.endpointer.feed(FRAME / SAMPLE_RATE, probability):
                if isinstance(event, CutTurnPause):
                    self._answer_held()
            return
        self._preroll.append(frame)
        if self._turn is not None:
            self._turn.append(frame)
        else:
            self._rejoin.hear(frame, self.samples_in / SAMPLE_RATE, self._played())
        events = self.endpointer.feed(FRAME / SAMPLE_RATE, probability)
        self._on_silence(events)
        if self.reply.replying:
            # barge-in must not wait for the turn's min_speech confirmation: two loud frames (64 ms) are enough
            self._loud = self._loud + 1 if self._speech_over_reply(frame, probability) else 0
            if self._loud >= BARGE_IN_FRAMES:
                self._barge_in()
        else:
            self._loud = 0
        pending: list[EndpointEvent] = [e for e in events if not isinstance(e, (Silence, SilenceEnd))]
        while pending:
            event = pending.pop(0)
            if isinstance(event, SpeechStart):
                self._start_turn(onset=event.t)
            elif isinstance(event, Pause) and self._turn is not None:
                pending += self._judge_pause()
            elif isinstance(event, TurnEnd) and self._turn is not None:
                self._end_turn(event)
                return
        speaking = self.endpointer.state == EndpointState.SPEECH
        if self._turn is not None and speaking and len(self._turn) - self._last_partial >= PARTIAL_FRAMES:
            self._last_partial = len(self._turn)
            recent = self._turn[max(self._segment_start, len(self._turn) - PARTIAL_MAX_FRAMES) :]
            self.asr.partial(AudioChunk.join(recent).samples)

    def _note_listening(self) -> None:
        """Publish :class:`Listening` when the gate opens or closes (not in ``always`` mode: it never closes)."""
        mode = self.activation.mode
        if mode is ActivationMode.ALWAYS:
            return
        listening = self._turn is not None if mode is ActivationMode.PUSH_TO_TALK else self._armed_at is not None
        if listening != self._listening:
            self._listening = listening
            self._publish(Listening(listening))

    def _push_to_talk(self, frame: AudioChunk) -> None:
        """The turn is what the microphone hears while the key is held, committed on release; a press while the
        kiosk speaks interrupts it. Nothing is heard while the key is up (not even by the VAD)."""
        for event in self.activation.take():
            if isinstance(event, Press):
                if self.reply.replying:
                    self._barge_in()
                if self._turn is None:
                    self._preroll.clear()  # the turn starts at the press: nothing from before it is kept
                    self._start_turn()
                    self._heard, self._pressed_at = False, self.samples_in - FRAME
            elif isinstance(event, Release) and self._turn is not None:
                self._release_turn()
        if self._turn is None:
            return
        if len(self._turn) * FRAME < self.endpointer.config.max_turn_s * SAMPLE_RATE:  # beyond: kept until the release
            self._turn.append(frame)
            if self.endpointer.is_speech(self.vad.probability(frame.samples)):
                self._heard, self._speech_end = True, self.samples_in / SAMPLE_RATE
        if len(self._turn) - self._last_partial >= PARTIAL_FRAMES:
            self._last_partial = len(self._turn)
            self.asr.partial(AudioChunk.join(self._turn[max(0, len(self._turn) - PARTIAL_MAX_FRAMES) :]).samples)

    def _release_turn(self) -> None:
        """The key went up: commit the turn now, whatever the visitor's pauses; a turn without speech is dropped."""
        assert self._turn is not None
        if not self._heard:
            log.info("push-to-talk turn %d released without speech: dropped", self._turn_id)
            self._turn = None
            self.speculation.abort()
            return
        # the release came with this frame, which is not the turn's; nor are those beyond max_turn_s
        unheard = self.samples_in - self._pressed_at - len(self._turn) * FRAME
        end = (self.samples_in - FRAME) / SAMPLE_RATE
        self._end_turn(
            TurnEnd(end, self._speech_end, TurnEndReason.RELEASED, self._pressed_at / SAMPLE_RATE), unheard=unheard
        )

    def _triggered(self, frame: AudioChunk) -> bool:
        """Trigger and wake-word mode: whether this frame is listened to. A trigger (the wake word in the frames not
        listened to) opens listening and interrupts a reply; the turn that follows closes it once ended, as does
        ``trigger_timeout_s`` without speech."""
        woke = self._armed_at is None and not self.in_turn and self.activation.hear(frame.samples)
        if any(isinstance(e, Trigger) for e in self.activation.take()):
            if self.reply.replying:
                self._barge_in()
            if not self.in_turn and self._armed_at is None:
                self._armed_at, self._armed_turn = self.samples_in, self._turn_id
                self._preroll.clear()  # speech before the trigger is not part of the turn
                self.endpointer.reset(t=self.samples_in / SAMPLE_RATE)
                self.vad.reset()
                self.activation.listening_starts()
        if self._armed_at is None or woke:  # the wake word's own frame is not the turn's
            return self.in_turn  # a turn cut at max_turn_s still waits for its pause
        if self._turn_id != self._armed_turn and not self.in_turn:
            self._armed_at = None  # the turn opened by the trigger has ended
            return False
        waited = (self.samples_in - self._armed_at) / SAMPLE_RATE
        idle = self._turn_id == self._armed_turn and self.endpointer.state is EndpointState.IDLE
        if idle and waited >= self.activation.trigger_timeout_s:
            log.info("trigger: nobody spoke within %.0f s", self.activation.trigger_timeout_s)
            self._armed_at = None
            return False
        return True

    def _start_turn(self, *, onset: float | None = None) -> None:
        """A turn begins (its speech's ``onset`` in stream seconds; None: push-to-talk). Speech soon enough after a
        committed turn goes on with it: the committed turn is withdrawn and this one holds both."""
        rejoin = None
        if onset is not None and self.activation.mode is ActivationMode.ALWAYS:
            rejoin = self._rejoin.take(onset, reply_uncut=self.reply.reply_uncut)
        self._rejoin.forget()
        self._turn = list(self._preroll) if rejoin is None else [*rejoin.frames, *rejoin.since]
        self._turn_id = next(self._ids)
        self._segment_start = self._last_partial = 0
        self._early_verdict = self._silence_audio = None
        self._continues = None
        self.speculation.open_turn(self._turn_id)
        self._publish(SpeechStarted(self._turn_id, self.samples_in / SAMPLE_RATE if onset is None else onset))
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

    def _judge_pause(self) -> list[EndpointEvent]:
        """Smart Turn's verdict on the turn at a pause; an incomplete turn's audio so far is decoded now."""
        assert self._turn is not None
        early, self._early_verdict = self._early_verdict, None
        valid = self.speculation.valid
        if early is not None and valid:  # asked at the silence's onset, nothing said since
            p = early
        else:
            if valid and not self.reply.replying:
                # the speculative decode still runs: Smart Turn beside it would slow whisper.cpp's two threads on a
                # small machine; one after the other both are done sooner
                self.speculation.decoded.wait(SPECULATION_WAIT_S)
            p = self._turn_probability(AudioChunk.join(self._turn))
        words = self._words_probability()
        decided = pause_verdict(p, words, self.endpointer.config)
        threshold = self.endpointer.config.complete_threshold
        if p >= threshold > decided.p and not decided.unsure:
            log.info("turn %d: sounds complete (%.2f), but its words do not end a sentence (%.3f): %r",
                     self._turn_id, p, words, self.speculation.transcript)  # fmt: skip
        elif decided.unsure:
            log.info("turn %d: unsure (sound %.2f, words %.3f): ends after %d ms of silence",
                     self._turn_id, p, words, decided.max_silence_ms)  # fmt: skip
        verdict = self.endpointer.report_turn_probability(decided.p, max_silence_ms=decided.max_silence_ms)
        if not any(isinstance(e, TurnEnd) for e in verdict) and not decided.unsure:
            # an incomplete turn: what was said up to this pause is stable, decode it now (an unsure one keeps its
            # speculative decode and the reply begun for it: they stand if the visitor says nothing more)
            segment = AudioChunk.join(self._turn[self._segment_start :])
            self.asr.commit_segment(segment.samples, speculated=valid)
            self._segment_start = self._last_partial = len(self._turn)
            self.speculation.invalidate()
        return verdict

    def _end_turn(self, event: TurnEnd, *, unheard: int = 0) -> None:
        """Hand the ended turn to the answerer (or to the reply begun for it; a cut one once the visitor pauses).
        ``unheard``: samples read since the turn's last frame (a push-to-talk release: the frame it came in)."""
        assert self._turn is not None
        joined = AudioChunk.join(self._turn)
        audio = AudioChunk(joined.samples, self.samples_in - unheard - len(joined))  # a rejoined turn: contiguous
        tail_audio = AudioChunk.join(self._turn[self._segment_start :]).samples
        tail = AudioChunk(tail_audio, audio.end - len(tail_audio))
        turn = Turn(
            self._turn_id,
            audio,
            event.speech_end_t,
            self.samples_in / SAMPLE_RATE,
            self.clock.now(),
            event.reason,
            tail,
            speculation_valid=self.speculation.valid and event.reason is not TurnEndReason.MAX_LENGTH,
            words_verdict=self.speculation.words_cost if self.speculation.valid else None,
            continues=self._continues,
        )
        rejoinable = event.reason in (TurnEndReason.COMPLETE, TurnEndReason.SILENCE_TIMEOUT)
        if rejoinable and self.activation.mode is ActivationMode.ALWAYS:
            self._rejoin.committed(turn.turn_id, self._turn, event.speech_end_t, self._played())
        self._turn = None
        if self.speculation.close_turn(turn, lambda adopted: self._commit(adopted, adopted=True)):
            return
        if event.reason is TurnEndReason.MAX_LENGTH:  # a monologue: answer what was kept once the visitor pauses
            log.info("turn %d reached max_turn_s: held until the visitor pauses", turn.turn_id)
            self._held = turn
            return
        self._commit(turn)

    def _answer_held(self) -> None:
        assert self._held is not None
        held, self._held = self._held, None
        self._commit(
            dataclasses.replace(held, committed_t=self.samples_in / SAMPLE_RATE, committed_wall=self.clock.now())
        )

    def _commit(self, turn: Turn, *, adopted: bool = False) -> None:
        """The turn is the answerer's now (``adopted``: the reply begun at its pause answers it); its reply budget
        runs from here."""
        event = TurnCommitted(turn, adopted)
        self._tell(event)
        self._publish(event)

    def _on_silence(self, events: list[EndpointEvent]) -> None:
        """Start decoding the moment the visitor falls silent (speculation), so that recognition runs while the
        end of the turn is still being confirmed; any sound afterwards invalidates it."""
        if self._turn is None:
            return
        turn = self._turn
        if any(isinstance(e, SilenceEnd) for e in events):
            self._early_verdict = self._silence_audio = None
            self.speculation.invalidate()  # the visitor goes on: what was begun for the pause is moot
        elif any(isinstance(e, Silence) for e in events):
            self.speculation.silence(lambda: self.asr.speculate(AudioChunk.join(turn[self._segment_start :]).samples))
            self._silence_audio = list(turn)
        elif (
            self.speculation.valid
            and self._early_verdict is None
            and self._silence_audio is not None
            and self.speculation.decoded.is_set()
        ):
            # Smart Turn's verdict on the turn as it was when the visitor fell silent, the silence still to come as
            # zeros, computed once the speculative decode is done and before the pause is long enough: the verdict
            # is ready when it is
            silence = np.zeros(int(self.endpointer.config.silence_ms * SAMPLE_RATE / 1000) - FRAME, np.float32)
            silent = AudioChunk(silence, self.samples_in)
            self._early_verdict = self._turn_probability(AudioChunk.join([*self._silence_audio, silent]))
            self._silence_audio = None

    def _turn_probability(self, audio: AudioChunk) -> float:
        """Smart Turn's probability that the turn is complete; 0 (wait for the silence timeout) if it fails."""
        try:
            return self.turn_model.probability_complete(audio.samples)
        except EdgeVoiceError as exc:
            log.error("end-of-turn model failed, waiting for the silence timeout: %s", exc)
            self._publish(StageFailed(exc))
            return 0.0

    def _words_probability(self) -> float | None:
        """The words' verdict on the turn as the speculative decode heard it at the visitor's silence, taken by the
        recognition worker while Smart Turn judged the sound (:class:`SpeculativeReplies`); None when there is
        nothing to judge (no judge, no decode for this silence, or it failed: the sound decides alone)."""
        if not (self.speculation.judges_words and self.speculation.valid):
            return None
        # the reply waits for this verdict too: waiting for it delays no answer
        self.speculation.judged.wait(WORDS_WAIT_S)
        return self.speculation.words_complete

    def _speech_over_reply(self, frame: AudioChunk, probability: float) -> bool:
        """Speech by the VAD, and with echo cancellation also as loud as the level that pauses the speaker: the VAD
        judges the shape of a sound more than its level, and the faint residue of the kiosk's own voice after the
        canceller must not cut its reply."""
        if not self.endpointer.is_speech(probability):
            return False
        if self.gate is None:
            return True
        return self.gate.is_loud(frame.samples)
