"""Recognition while the visitor speaks: stable segments decoded at pauses, partial transcripts, the tail at the end.

A turn is cut at its internal pauses (a silence the end-of-turn model judged incomplete). Each finished segment is
stable: it is decoded in the background as soon as the pause begins, and its text is kept. Meanwhile the segment in
progress is decoded now and then for a partial transcript. When the turn is committed only the tail (the audio
after the last pause) is left to decode. One worker thread owns the recognizer; the listener never waits for it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from edgevoice.audio import SAMPLE_RATE
from edgevoice.errors import EdgeVoiceError
from edgevoice.events import Transcript
from edgevoice.interfaces import FloatAudio, Recognizer
from edgevoice.priority import lower_this_thread
from edgevoice.thread_names import name_this_thread

log = logging.getLogger(__name__)

UNFINISHED_KEPT = 4


@dataclass
class _TurnState:
    turn_id: int
    segments: list[str] = field(default_factory=list)
    confidence: dict[int, float] = field(default_factory=dict)
    """The recognizer's confidence in each decoded segment that has one, by index (a carried segment has none)."""
    pending: int = 0
    speculation: Transcript | None = None
    speculating: bool = False
    spec_seq: int = 0
    """Numbers the speculations, so a segment adopts the one made for it, not a later one."""
    spec_results: dict[int, Transcript] = field(default_factory=dict)
    done: threading.Condition = field(default_factory=threading.Condition)


@dataclass(frozen=True)
class Speculation:
    """The transcript of a turn as it stands when the visitor fell silent (the ``seq``-th time in the turn)."""

    turn_id: int
    seq: int
    text: str
    """The stable segments and the speculatively decoded tail, joined."""
    stable: bool
    """No segment of the turn is still being decoded: ``text`` is what the turn's transcript will be if the visitor
    says nothing more."""
    confidence: float | None = None
    """The recognizer's confidence in ``text``, as :meth:`StreamingTranscriber.finish` gives it."""


def _least(turn: _TurnState, tail: Transcript) -> float | None:
    """The turn's confidence with ``tail`` as its last part: the least of its parts' (one misheard segment makes the
    question unsure); None when no part says. Called with ``turn.done`` held."""
    known = [c for i, c in turn.confidence.items() if turn.segments[i].strip()]
    if tail.text.strip() and tail.confidence is not None:
        known.append(tail.confidence)
    return min(known, default=None)


@dataclass(frozen=True, slots=True)
class _Stop:
    """The worker ends (:meth:`StreamingTranscriber.close`)."""


@dataclass(frozen=True)
class _Job:
    kind: str  # "segment" | "partial"
    turn: _TurnState
    audio: FloatAudio
    index: int = 0
    seq: int = 0


class StreamingTranscriber:
    def __init__(
        self,
        recognizer: Recognizer,
        *,
        prompt: str = "",
        on_partial: Callable[[int, str], None] | None = None,
        on_speculation: Callable[[Speculation], object] | None = None,
        nice: int = 0,
    ) -> None:
        """``nice``: how much to lower the worker thread's CPU priority (see :mod:`edgevoice.priority`)."""
        self._nice = nice
        self.recognizer = recognizer
        self.prompt = prompt
        self.on_partial = on_partial or (lambda _turn, _text: None)
        self.on_speculation = on_speculation or (lambda _speculation: None)
        self._jobs: queue.Queue[_Job | _Stop] = queue.Queue()
        self._turn: _TurnState | None = None
        self._unfinished: dict[int, _TurnState] = {}
        """Turns begun and not yet finished, by id: the responder may finish one after the next has begun."""
        self._states_lock = threading.Lock()
        self._lock = threading.Lock()  # the recognizer runs one decode at a time: worker or finish()
        self._worker = threading.Thread(target=self._work, name="edgevoice-asr", daemon=False)
        self.partials = 0
        self.segments_decoded = 0
        self.speculations_used = 0
        self.last_used_speculation = False
        self._closing = False

    # -- called by the listener (never blocks) ----------------------------------------------------------------------
    def start_turn(self, turn_id: int, *, carried: str | None = None) -> None:
        """A new turn; ``carried``: the transcript of the turn it continues (:meth:`carry`)."""
        self._turn = _TurnState(turn_id)
        with self._states_lock:
            self._unfinished[turn_id] = self._turn
            for old in sorted(self._unfinished)[:-UNFINISHED_KEPT]:  # dropped turns are never finished
                del self._unfinished[old]
        if carried is not None:
            self.carry(carried)

    def carry(self, text: str) -> None:
        """A segment of the current turn whose words are already known (the turn it continues): kept as it is."""
        turn = self._turn
        if turn is not None:
            with turn.done:
                turn.segments.append(text)

    def commit_segment(self, audio: FloatAudio, *, speculated: bool = False) -> None:
        """A stable segment of the current turn (it ended at a pause): decode it in the background.

        ``speculated``: nothing was said since the last :meth:`speculate`, whose result is then this segment's."""
        turn = self._turn
        if turn is None:
            return
        with turn.done:
            index = len(turn.segments)
            turn.segments.append("")
            turn.pending += 1
            seq = turn.spec_seq
        self._jobs.put(_Job("adopt" if speculated else "segment", turn, audio, index, seq))

    def partial(self, audio: FloatAudio) -> None:
        """The segment in progress: decode it for a partial transcript if the worker is idle (else skip it)."""
        if self._turn is not None and self._jobs.empty():
            self._jobs.put(_Job("partial", self._turn, audio))

    def speculate(self, audio: FloatAudio) -> int:
        """The visitor just fell silent: decode the tail now, while the end of the turn is still being confirmed.

        If the turn ends with no more speech, :meth:`finish` takes this result instead of decoding again. Returns
        the speculation's number within the turn (0: no turn)."""
        turn = self._turn
        if turn is None:
            return 0
        with turn.done:
            turn.speculation, turn.speculating = None, True
            turn.spec_seq += 1
            seq = turn.spec_seq
        self._jobs.put(_Job("speculative", turn, audio, seq))
        return seq

    # -- called by the responder --------------------------------------------------------------------------------------
    def finish(
        self,
        tail: FloatAudio,
        *,
        turn_id: int | None = None,
        speculation_valid: bool = False,
        timeout: float = 10.0,
    ) -> Transcript:
        """Wait for the turn's stable segments, decode the tail, return the whole transcript.

        ``turn_id``: the turn (a later one may have begun meanwhile); None: the current one.
        ``speculation_valid``: nothing was said after the last :meth:`speculate`, so its result is the tail's."""
        with self._states_lock:
            turn = self._turn if turn_id is None else self._unfinished.get(turn_id)
            if turn is not None:
                self._unfinished.pop(turn.turn_id, None)
                if turn is self._turn:
                    self._turn = None
        tail_text = None
        self.last_used_speculation = False
        if turn is not None and speculation_valid:
            with turn.done:
                if turn.speculating or turn.speculation is not None:
                    turn.done.wait_for(lambda: not turn.speculating, timeout)
                    tail_text = turn.speculation
            if tail_text is not None and tail_text.filtered == "error":
                tail_text = None  # the speculative decode failed: decode the tail again (and fail loudly if so)
        if tail_text is None:
            with self._lock:
                tail_text = self.recognizer.transcribe(tail, prompt=self.prompt)
        else:
            self.speculations_used += 1
            self.last_used_speculation = True
        if turn is None:
            return tail_text
        with turn.done:
            turn.done.wait_for(lambda: turn.pending == 0, timeout)
            parts = [*turn.segments, tail_text.text]
            confidence = _least(turn, tail_text)
        text = " ".join(p.strip() for p in parts if p.strip())
        filtered = tail_text.filtered if not text else None
        no_speech = tail_text.no_speech_prob if not text else 0.0
        return Transcript(text=text, no_speech_prob=no_speech, filtered=filtered, confidence=confidence)

    # -- worker ---------------------------------------------------------------------------------------------------
    def _work(self) -> None:
        name_this_thread("ev-asr")
        lower_this_thread(self._nice)
        while True:
            job = self._jobs.get()
            if isinstance(job, _Stop):
                return
            self._do(job)

    def run_queued(self) -> int:
        """Do the jobs queued so far on the caller's thread, for a loop driven step by step without the worker (a
        test, a simulation); returns how many there were. Never call it once :meth:`start` has run."""
        done = 0
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return done
            if isinstance(job, _Job):
                self._do(job)
                done += 1

    def _do(self, job: _Job) -> None:
        if self._closing:  # shutting down: drop the job, but release a responder waiting for its segment
            if job.kind in ("segment", "adopt"):
                self._store_segment(job, "")
            return
        if job.kind == "partial" and (job.turn is not self._turn or job.turn.speculating):
            return  # the visitor fell silent or the turn ended: a glimpse is moot, the CPU is not
        if job.kind == "adopt":
            # the speculative decode of this very audio was queued before this job: it is done by now
            speculation = job.turn.spec_results.get(job.seq)
            if speculation is not None and speculation.filtered != "error":
                self._store_segment(job, speculation.text, speculation.confidence)
                return
        self._decode(job)

    def _decode(self, job: _Job) -> None:
        decode = self.recognizer.transcribe
        prompt = self.prompt
        if job.kind == "partial":  # a glimpse for display: no prompt (a prompted decode costs 2.4 times as much)
            decode = getattr(self.recognizer, "transcribe_partial", decode)
            prompt = ""
        try:
            with self._lock:
                t = time.perf_counter()
                result = decode(job.audio, prompt=prompt)
            log.debug(
                "%s decode: %.0f ms, %.1f s of audio",
                job.kind,
                1000 * (time.perf_counter() - t),
                len(job.audio) / SAMPLE_RATE,
            )
        except EdgeVoiceError as exc:
            log.error("streaming recognition failed: %s", exc)
            result = Transcript(text="", filtered="error")
        text = result.text
        if job.kind == "speculative":
            with job.turn.done:
                job.turn.spec_results[job.index] = result
                latest = job.index == job.turn.spec_seq  # the one finish() may take
                if latest:
                    job.turn.speculation, job.turn.speculating = result, False
                stable = job.turn.pending == 0
                joined = " ".join(p.strip() for p in [*job.turn.segments, text] if p.strip())
                confidence = _least(job.turn, result)
                job.turn.done.notify_all()
            if latest:  # an empty one too: the listener waits for it before it ends the turn
                self.on_speculation(Speculation(job.turn.turn_id, job.index, joined, stable, confidence))
            return
        if job.kind == "partial":
            self.partials += 1
            if text:
                self.on_partial(job.turn.turn_id, " ".join([*job.turn.segments, text]).strip())
            return
        self.segments_decoded += 1
        self._store_segment(job, text, result.confidence)

    @staticmethod
    def _store_segment(job: _Job, text: str, confidence: float | None = None) -> None:
        with job.turn.done:
            job.turn.segments[job.index] = text
            if text.strip() and confidence is not None:
                job.turn.confidence[job.index] = confidence
            job.turn.pending -= 1
            job.turn.done.notify_all()

    def start(self) -> None:
        """Start the worker thread (owned: :meth:`close` joins it)."""
        self._worker.start()

    def close(self, timeout: float = 2.0) -> bool:
        """Stop the worker after its current job (jobs still queued are dropped); True once it has ended."""
        self._closing = True
        self._jobs.put(_Stop())
        if self._worker.is_alive():
            self._worker.join(timeout)
        return not self._worker.is_alive()
