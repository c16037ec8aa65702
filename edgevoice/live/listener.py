"""The live loop's listening side: reads the microphone ring in 32 ms frames, runs Silero VAD, decides when to
listen (always, push-to-talk, a trigger or the wake word: :mod:`edgevoice.live.activation`) and detects barge-in
while a reply plays; the turn in progress is assembled from the frames it listens to
(:class:`~edgevoice.live.turn_assembly.TurnAssembly`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.capture import NearEndGate
from edgevoice.audio.chunk import AudioChunk
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import Clock
from edgevoice.errors import EdgeVoiceError, StageError
from edgevoice.interfaces import EndOfTurn, VoiceActivity
from edgevoice.listen.endpointing import Endpointer, TurnEnd, TurnEndReason
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.live.activation import Activation, ActivationMode, Press, Release, Trigger
from edgevoice.live.answering import AnswererEvent
from edgevoice.live.events import BargeIn, Listening, LoopEvent, StageFailed
from edgevoice.live.turn_assembly import FRAME, ReplyState, TurnAssembly
from edgevoice.reply.speculation import SpeculativeReplies

log = logging.getLogger(__name__)

MIC_BURST = 160
"""Samples one microphone callback writes at the default ``audio.frame_ms`` (10 ms): the listener sleeps until a frame
is that close to complete, then polls for it."""
BARGE_IN_FRAMES = 2
"""VAD frames of speech during a reply that confirm a barge-in (64 ms)."""


class ReplyView(ReplyState, Protocol):
    """What the listener may know of the reply side (:class:`~edgevoice.live.answering.Answerer`): read only."""

    @property
    def replying_to(self) -> int:
        """The turn whose reply is being answered or played (0: none yet)."""

    def tick(self) -> None:
        """Called every frame (and every 0.1 s without microphone audio): the reply budget's clock."""


class Listener:
    """Reads the microphone ring on its own thread (:meth:`run`), or is fed frame by frame (:meth:`feed`): hears the
    frames it listens to into the turn in progress, and tells the answerer of a barge-in (``tell``; the turn's
    assembly tells it of a committed and a withdrawn turn); publishes failures (``publish``)."""

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
        self.mic, self.vad, self.reply, self.gate = mic, vad, reply, gate
        self._tell, self._publish = tell, publish
        self._stop = threading.Event()
        self.samples_in = 0
        self._assembly = TurnAssembly(
            turn_model=turn_model,
            endpointer=endpointer,
            asr=asr,
            speculation=speculation,
            reply=reply,
            tell=tell,
            publish=publish,
            played=played,
            clock=clock,
            may_rejoin=lambda: self.activation.mode is ActivationMode.ALWAYS,  # the trigger modes never rejoin
        )
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
        self._listening = False
        """What :class:`Listening` last said (push-to-talk and trigger modes)."""

    @property
    def in_turn(self) -> bool:
        """A turn is open, or cut and waiting for the visitor's pause."""
        return self._assembly.in_turn

    @property
    def endpointer(self) -> Endpointer:
        """The endpointing state machine of the turn's assembly (read only)."""
        return self._assembly.endpointer

    @property
    def turn_model(self) -> EndOfTurn:
        """Smart Turn, asked at each pause; a test may set another."""
        return self._assembly.turn_model

    @turn_model.setter
    def turn_model(self, turn_model: EndOfTurn) -> None:
        self._assembly.use_turn_model(turn_model)

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
            self._assembly.drop(self.samples_in)

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
        if self._assembly.held:
            # speech meanwhile is neither kept (the turn's audio is bounded) nor a new turn nor a barge-in
            self._assembly.hear_held(probability, self.samples_in)
            return
        events = self._assembly.hear(frame, probability)
        if self.reply.replying:
            # barge-in must not wait for the turn's min_speech confirmation: two loud frames (64 ms) are enough
            self._loud = self._loud + 1 if self._speech_over_reply(frame, probability) else 0
            if self._loud >= BARGE_IN_FRAMES:
                self._barge_in()
        else:
            self._loud = 0
        self._assembly.act(events, self.samples_in)

    def _note_listening(self) -> None:
        """Publish :class:`Listening` when the gate opens or closes (not in ``always`` mode: it never closes)."""
        mode = self.activation.mode
        if mode is ActivationMode.ALWAYS:
            return
        pushed = mode is ActivationMode.PUSH_TO_TALK
        listening = self._assembly.turn_open if pushed else self._armed_at is not None
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
                if not self._assembly.turn_open:
                    self._assembly.press(self.samples_in)
                    self._heard, self._pressed_at = False, self.samples_in - FRAME
            elif isinstance(event, Release) and self._assembly.turn_open:
                self._release_turn()
        if not self._assembly.turn_open:
            return
        if self._assembly.has_room():  # beyond max_turn_s: kept until the release, unheard
            self._assembly.keep(frame)
            if self._assembly.is_speech(self.vad.probability(frame.samples)):
                self._heard, self._speech_end = True, self.samples_in / SAMPLE_RATE
        self._assembly.partial()

    def _release_turn(self) -> None:
        """The key went up: the turn ends now, whatever the visitor's pauses; a turn without speech is dropped."""
        if not self._heard:
            log.info("push-to-talk turn %d released without speech: dropped", self._assembly.turn_id)
            self._assembly.abandon()
            return
        # the release came with this frame, which is not the turn's; nor are those beyond max_turn_s
        unheard = self.samples_in - self._pressed_at - self._assembly.kept
        end = (self.samples_in - FRAME) / SAMPLE_RATE
        released = TurnEnd(end, self._speech_end, TurnEndReason.RELEASED, self._pressed_at / SAMPLE_RATE)
        self._assembly.end(released, self.samples_in, unheard=unheard)

    def _triggered(self, frame: AudioChunk) -> bool:
        """Trigger and wake-word mode: whether this frame is listened to. A trigger (the wake word in the frames not
        listened to) opens listening and interrupts a reply; the turn that follows closes it once ended, as does
        ``trigger_timeout_s`` without speech."""
        woke = self._armed_at is None and not self.in_turn and self.activation.hear(frame.samples)
        if any(isinstance(e, Trigger) for e in self.activation.take()):
            if self.reply.replying:
                self._barge_in()
            if not self.in_turn and self._armed_at is None:
                self._armed_at, self._armed_turn = self.samples_in, self._assembly.turn_id
                self._assembly.restart(self.samples_in)  # speech before the trigger is not part of the turn
                self.vad.reset()
                self.activation.listening_starts()
        if self._armed_at is None or woke:  # the wake word's own frame is not the turn's
            return self.in_turn  # a turn cut at max_turn_s still waits for its pause
        if self._assembly.turn_id != self._armed_turn and not self.in_turn:
            self._armed_at = None  # the turn opened by the trigger has ended
            return False
        waited = (self.samples_in - self._armed_at) / SAMPLE_RATE
        idle = self._assembly.turn_id == self._armed_turn and self._assembly.idle
        if idle and waited >= self.activation.trigger_timeout_s:
            log.info("trigger: nobody spoke within %.0f s", self.activation.trigger_timeout_s)
            self._armed_at = None
            return False
        return True

    def _speech_over_reply(self, frame: AudioChunk, probability: float) -> bool:
        """Speech by the VAD, and with echo cancellation also as loud as the level that pauses the speaker: the VAD
        judges the shape of a sound more than its level, and the faint residue of the kiosk's own voice after the
        canceller must not cut its reply."""
        if not self._assembly.is_speech(probability):
            return False
        if self.gate is None:
            return True
        return self.gate.is_loud(frame.samples)
