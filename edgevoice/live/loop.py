"""The live conversation loop: microphone ring → VAD + endpointing → responder → playback ring.

Threads, all owned here and joined on ``close()`` (bounded):
- the *listener* reads the microphone ring in 32 ms frames, runs Silero VAD and the endpointing state machine,
  asks Smart Turn when a pause begins, detects barge-in, and hands each committed turn to the responder;
- the *responder* transcribes the turn, streams the reply through the LLM and synthesizer into the playback ring.
The audio device callbacks (see :mod:`edgevoice.audio.streams`) only copy into and out of the rings.
Stream time is counted in microphone samples, so the listener's logic is the same on real and simulated audio.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from edgevoice.audio.capture import NearEndGate
from edgevoice.audio.playback import PlaybackControl
from edgevoice.audio.ring import SharedRing
from edgevoice.clock import Clock, MonotonicClock
from edgevoice.errors import EdgeVoiceError, StageError
from edgevoice.interfaces import EndOfTurn, FloatAudio
from edgevoice.listen.endpointing import Endpointer, EndpointingConfig, EndpointState, Pause, SpeechStart, TurnEnd
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.listen.turn import Turn as Turn  # re-exported: part of this module's API
from edgevoice.live.answering import Answering
from edgevoice.live.events import BargeIn, LoopEvent, Partial
from edgevoice.reply.output import ReplyOutput
from edgevoice.reply.responder import ReplyTrace, Responder
from edgevoice.reply.speculation import SpeculativeReply

log = logging.getLogger(__name__)

RATE = 16000
FRAME = 512
PREROLL_S = 0.3
PARTIAL_FRAMES = 31
"""A partial transcript about every second of a turn in progress."""
PARTIAL_MAX_FRAMES = 313
"""A partial transcript covers the last 10 s at most: a long monologue must not cost ever longer decodes."""
SPECULATION_WAIT_S = 0.4
"""At a pause, how long the listener waits for a speculative decode still running before it asks Smart Turn."""
BARGE_IN_FRAMES = 2
"""VAD frames of speech during a reply that confirm a barge-in (64 ms)."""


class VoiceLoop(Answering):
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
    ) -> None:
        """``mic`` holds the microphone as the listener should hear it (echo-cancelled, when ``reference`` is set:
        the ring the playback mirrors every buffer into, for the canceller). ``barge_in_level_db``: with an
        echo-cancelled microphone, arm a :class:`~edgevoice.audio.capture.NearEndGate` at that level (:attr:`gate`,
        which the capture callback feeds) so the speaker pauses before the VAD confirms a barge-in. ``compute_nice``:
        how much lower the CPU priority of the responder and recognition threads is than the listener's.

        ``fallback_audio`` (the fallback phrase, synthesized at start-up) is played instead of a reply that failed,
        or that queued no audio within ``reply_budget_s`` of the end of the turn: the reply's work is cancelled
        and the visitor hears the phrase whatever state the engines are in (a hung engine included).

        ``speculative_reply``: start the reply the moment the visitor falls silent, its audio held until the turn
        is committed (:mod:`edgevoice.reply.speculation`).

        ``on_trace`` gets each finished turn; ``on_event`` gets the events of :mod:`edgevoice.live.events` (partial
        transcripts, a reply's first audio, barge-ins, fallbacks). Both run on the loop's threads.
        """
        self.mic, self.speaker = mic, speaker
        self.playback = PlaybackControl(speaker, reference)
        self.gate = NearEndGate(self.playback, level_db=barge_in_level_db) if barge_in_level_db is not None else None
        self.vad = vad
        self.turn_model = turn_model
        self.responder = responder
        self.endpointer = Endpointer(endpoint, threshold=vad_threshold)
        self.clock = clock or MonotonicClock()
        self.on_trace = on_trace
        self.on_event = on_event or (lambda _event: None)
        self._current_turn = 0
        self._turns: queue.Queue[Turn | SpeculativeReply | None] = queue.Queue()
        self._stop = threading.Event()
        self._cancel = threading.Event()
        self._replying = threading.Event()
        self._ids = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self.samples_in = 0
        self.errors: list[EdgeVoiceError] = []
        self.barge_ins = 0
        self._preroll: deque[FloatAudio] = deque(maxlen=int(PREROLL_S * RATE / FRAME) + 1)
        self._turn: list[FloatAudio] | None = None
        self._held: Turn | None = None
        """A turn that reached ``max_turn_s``, waiting for the visitor to pause before it is answered."""
        self._held_silence = 0
        self._early_verdict: float | None = None
        """Smart Turn's verdict taken when the visitor fell silent, for the pause that follows (None: none)."""
        self._silence_audio: list[FloatAudio] | None = None
        """The turn's frames up to the moment the visitor fell silent (for the early verdict)."""
        self._speculation_done = threading.Event()
        self._turn_id = 0
        self._segment_start = 0
        self._last_partial = 0
        self._speculated = self._spec_valid = False
        self._loud = 0
        self.asr = StreamingTranscriber(
            responder.recognizer,
            prompt=responder.asr_prompt,
            on_partial=lambda turn_id, text: self.on_event(Partial(turn_id, text)),
            on_speculation=self._on_speculation,
            nice=compute_nice,
        )
        self._compute_nice = compute_nice
        self.speculative_reply = speculative_reply
        self._spec_lock = threading.Lock()
        """Guards the speculation state shared by the listener and the recognition worker (below)."""
        self._spec_seq = 0
        self._spec_reply: SpeculativeReply | None = None
        self._turn_open = False
        self.speculative_replies = {"started": 0, "adopted": 0, "dropped": 0}
        self.output = ReplyOutput(
            speaker,
            self.playback,
            self._cancel,
            self._stop,
            self.clock,
            fallback_audio=fallback_audio,
            fallback_text=fallback_text,
            budget_s=reply_budget_s,
            on_fallback=lambda event: self.on_event(event),
        )

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.responder.resume()  # a model interrupted when an earlier loop closed works again
        self.asr.start()
        for name, target in (("listener", self._listen), ("responder", self._respond)):
            thread = threading.Thread(target=target, name=f"edgevoice-{name}", daemon=False)
            thread.start()
            self._threads.append(thread)

    def close(self, timeout: float = 2.0) -> bool:
        """Stop the listener, the responder and the recognition worker within ``timeout`` seconds in all.

        Work in progress is cut short (the reply is cancelled, the language model interrupted between two tokens
        or prefill chunks). Returns True when every thread has ended: only then may the engines be freed (a thread
        still inside llama.cpp while its model is freed crashes the process)."""
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._cancel.set()
        self._turns.put(None)
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
        return (
            self.mic.available() < FRAME
            and self._turn is None
            and self._held is None
            and self._turns.unfinished_tasks == 0  # queued or being answered (task_done after its trace)
        )

    @property
    def false_barge_ins(self) -> int:
        """Level-triggered pauses the VAD did not confirm (the reply resumed)."""
        return self.gate.false_pauses if self.gate is not None else 0

    # -- listener -------------------------------------------------------------------------------------------------
    def _listen(self) -> None:
        self.vad.reset()  # type: ignore[attr-defined]
        while not self._stop.is_set():
            if not self.mic.wait_for(FRAME, timeout=0.1, stop=self._stop):
                self.output.check_budget()  # no microphone audio (a dead device): the reply budget still holds
                continue
            while self.mic.available() >= FRAME and not self._stop.is_set():
                frame = self.mic.read(FRAME)
                self.samples_in += FRAME
                try:
                    self._on_frame(frame)
                except EdgeVoiceError as exc:
                    # a failing VAD or end-of-turn model costs this frame (or this pause verdict), never the loop
                    log.error("listener: %s", exc)
                    self.errors.append(exc)
                except Exception as exc:  # a bug must not leave the kiosk deaf: drop the turn in progress
                    error = StageError("listen", f"unexpected {type(exc).__name__}: {exc}", code="stage_unexpected")
                    log.exception("listener: %s", error)
                    self.errors.append(error)
                    self._turn = None
                    with self._spec_lock:
                        self._turn_open = False
                        self._drop_speculative_reply()
                    self.endpointer.reset(t=self.samples_in / RATE)

    def _on_frame(self, frame: FloatAudio) -> None:
        t = self.samples_in / RATE
        self.output.check_budget()
        probability = self.vad.probability(frame)  # type: ignore[attr-defined]
        if self._held is not None:
            self._hold(probability)
            return
        self._preroll.append(frame)
        if self._turn is not None:
            self._turn.append(frame)
        self._watch_for_silence(probability)
        if self._replying.is_set():
            # barge-in must not wait for the turn's min_speech confirmation: two loud frames (64 ms) are enough
            self._loud = self._loud + 1 if self._speech_over_reply(frame, probability) else 0
            if self._loud >= BARGE_IN_FRAMES and not self._cancel.is_set():
                self._barge_in()
        else:
            self._loud = 0
        events = list(self.endpointer.feed(FRAME / RATE, probability))
        while events:
            event = events.pop(0)
            if isinstance(event, SpeechStart):
                self._turn = list(self._preroll)
                self._turn_id = next(self._ids)
                self._segment_start = self._last_partial = 0
                with self._spec_lock:
                    self._speculated, self._spec_valid = False, False
                    self._turn_open = True
                self.asr.start_turn(self._turn_id)
            elif isinstance(event, Pause) and self._turn is not None:
                early, self._early_verdict = self._early_verdict, None
                if early is not None and self._spec_valid:  # asked at the silence's onset, nothing said since
                    p = early
                else:
                    if self._spec_valid and not self._replying.is_set():
                        # the speculative decode still runs: Smart Turn beside it would slow whisper.cpp's two
                        # threads by half on two cores; one after the other both are done sooner
                        self._speculation_done.wait(SPECULATION_WAIT_S)
                    p = self._turn_probability(np.concatenate(self._turn))
                verdict = self.endpointer.report_turn_probability(p)
                if not any(isinstance(e, TurnEnd) for e in verdict):
                    # an incomplete turn: what was said up to this pause is stable, decode it now
                    segment = np.concatenate(self._turn[self._segment_start :])
                    self.asr.commit_segment(segment, speculated=self._spec_valid)
                    self._segment_start = self._last_partial = len(self._turn)
                    with self._spec_lock:
                        self._spec_valid = False
                        self._drop_speculative_reply()
                events += verdict
            elif isinstance(event, TurnEnd) and self._turn is not None:
                audio = np.concatenate(self._turn)
                tail = np.concatenate(self._turn[self._segment_start :] or [np.zeros(0, np.float32)])
                turn = Turn(
                    self._turn_id,
                    audio,
                    event.speech_end_t,
                    t,
                    self.clock.now(),
                    event.reason,
                    tail,
                    speculation_valid=self._spec_valid and event.reason != "max_length",
                    start_index=self.samples_in - len(audio),
                )
                self._turn = None
                with self._spec_lock:  # no speculative reply can start for this turn from here on
                    self._turn_open = False
                    spec, self._spec_reply = self._spec_reply, None
                    if spec is not None and turn.speculation_valid and spec.seq == self._spec_seq:
                        self.output.committed(turn.turn_id, turn.committed_wall)
                        self.speculative_replies["adopted"] += 1
                        spec.adopt(turn)  # its responder answers this turn: its audio is ready or on the way
                        return
                    if spec is not None:
                        self.speculative_replies["dropped"] += 1
                        spec.drop()
                    if event.reason == "max_length":  # a monologue: answer what was kept once the visitor pauses
                        log.info("turn %d reached max_turn_s: held until the visitor pauses", turn.turn_id)
                        self._held, self._held_silence = turn, 0
                        return
                    self.output.committed(turn.turn_id, turn.committed_wall)  # its reply budget runs from here
                    self._turns.put(turn)
        speaking = self.endpointer.state == EndpointState.SPEECH
        if self._turn is not None and speaking and len(self._turn) - self._last_partial >= PARTIAL_FRAMES:
            self._last_partial = len(self._turn)
            recent = self._turn[max(self._segment_start, len(self._turn) - PARTIAL_MAX_FRAMES) :]
            self.asr.partial(np.concatenate(recent))

    def _hold(self, probability: float) -> None:
        """A turn cut at ``max_turn_s`` waits for the visitor's pause: ``silence_ms`` below the VAD's low threshold.
        Speech meanwhile is neither kept (the turn's audio is bounded) nor a new turn nor a barge-in."""
        assert self._held is not None
        self._held_silence = self._held_silence + 1 if probability < self.endpointer.neg_threshold else 0
        if self._held_silence * FRAME / RATE * 1000 >= self.endpointer.config.silence_ms:
            t = self.samples_in / RATE
            held, self._held = self._held, None
            turn = dataclasses.replace(held, committed_t=t, committed_wall=self.clock.now())
            self.output.committed(turn.turn_id, turn.committed_wall)
            self._turns.put(turn)
            self.endpointer.reset(t=t)

    def _watch_for_silence(self, probability: float) -> None:
        """Start decoding the moment the visitor falls silent (speculation), so that recognition runs while the
        end of the turn is still being confirmed; any speech afterwards invalidates it."""
        if self._turn is None:
            return
        if probability >= self.endpointer.threshold:
            self._early_verdict = self._silence_audio = None
            if self._speculated:
                with self._spec_lock:
                    self._speculated = self._spec_valid = False
                    self._drop_speculative_reply()  # the visitor goes on: what was begun for the pause is moot
        elif (
            not self._speculated
            and probability < self.endpointer.neg_threshold
            and self.endpointer.state == EndpointState.SPEECH
        ):
            with self._spec_lock:
                self._speculated = self._spec_valid = True
                self._spec_seq = self.asr.speculate(np.concatenate(self._turn[self._segment_start :]))
            self._speculation_done.clear()
            self._silence_audio = list(self._turn)
        elif (
            self._spec_valid
            and self._early_verdict is None
            and self._silence_audio is not None
            and self._speculation_done.is_set()
        ):
            # Smart Turn's verdict on the turn as it was when the visitor fell silent, the silence still to come as
            # zeros, computed once the speculative decode is done (the two at once slowed whisper.cpp's threads by
            # half on two cores) and before the pause is long enough: the verdict is ready when it is
            silence = np.zeros(int(self.endpointer.config.silence_ms * RATE / 1000) - FRAME, np.float32)
            self._early_verdict = self._turn_probability(np.concatenate([*self._silence_audio, silence]))
            self._silence_audio = None

    def _turn_probability(self, audio: FloatAudio) -> float:
        """Smart Turn's probability that the turn is complete; 0 (wait for the silence timeout) if it fails."""
        try:
            return self.turn_model.probability_complete(audio)
        except EdgeVoiceError as exc:
            log.error("end-of-turn model failed, waiting for the silence timeout: %s", exc)
            self.errors.append(exc)
            return 0.0

    def _speech_over_reply(self, frame: FloatAudio, probability: float) -> bool:
        """Speech by the VAD, and with echo cancellation also as loud as the level that pauses the speaker: the VAD
        judges the shape of a sound more than its level, and the faint residue of the kiosk's own voice after the
        canceller must not cut its reply."""
        if probability < self.endpointer.threshold:
            return False
        if self.gate is None:
            return True
        return self.gate.is_loud(frame)

    def _barge_in(self) -> None:
        """The visitor speaks over the reply: silence the output now and cancel the reply's work."""
        self.barge_ins += 1
        self._cancel.set()
        self.playback.request_flush()
        self._arm_gate(False)  # after the flush request: the gate lifts a pause only once the flush is done
        self.on_event(BargeIn(self._current_turn))
        log.info("barge-in: output flushed, reply cancelled")
