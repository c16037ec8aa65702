"""A reply begun before its turn is over: generated and synthesized while the end of the turn is being confirmed,
its audio held back until the turn is committed.

The moment the visitor falls silent the tail of the turn is decoded (speculative recognition, see
:mod:`edgevoice.listen.streaming_asr`). When that transcript is final as far as anyone can know (no segment still being
decoded), the loop starts the reply for it at once (:class:`SpeculativeReply`): the language model streams, the first
clause is synthesized, and the audio waits in a :class:`HeldAudio` buffer. The listener meanwhile confirms the end
of the turn (the silence timeout and Smart Turn's verdict):

- the turn ends with nothing said since: the reply is *adopted*: the held audio goes to the speaker at once and the
  rest of the reply streams after it; the language model's and synthesizer's time until then is hidden behind the
  endpointing wait;
- the visitor speaks again, or the pause was judged incomplete: the reply is *dropped*: cancelled at its next token
  or clause, and nothing of it was heard or enters the conversation.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from edgevoice.errors import EdgeVoiceError
from edgevoice.events import Transcript
from edgevoice.interfaces import FloatAudio, TextEndOfTurn
from edgevoice.listen.streaming_asr import Speculation
from edgevoice.priority import background, lower_this_thread
from edgevoice.reply.responder import Responder
from edgevoice.reply.trace import ReplyTrace

if TYPE_CHECKING:
    from edgevoice.listen.turn import Turn

log = logging.getLogger(__name__)


DECISION_TIMEOUT_S = 60.0


class HeldAudio:
    """Reply audio kept back until :meth:`release`, then written in order; later audio goes straight through.

    ``emit`` is the reply's emit callback (the synthesis thread calls it); ``release`` may come from another thread.
    Positions count every sample emitted, held or not, so the reply's clause positions hold after the release."""

    def __init__(self, write: Callable[[FloatAudio], int]) -> None:
        self._write = write
        self._lock = threading.Lock()
        self._chunks: list[FloatAudio] = []
        self._released = False
        self.position = 0

    def emit(self, audio: FloatAudio) -> int:
        with self._lock:  # in order with a release in progress
            self.position += len(audio)
            if self._released:
                self._write(audio)
            else:
                self._chunks.append(audio)
            return self.position

    def release(self) -> None:
        with self._lock:
            self._released = True
            chunks, self._chunks = self._chunks, []
            for chunk in chunks:
                self._write(chunk)

    @property
    def held_samples(self) -> int:
        with self._lock:
            return sum(len(c) for c in self._chunks)


class SpeculativeReply:
    """The reply to turn ``turn_id`` for speculation ``seq`` (its transcript ``text``), run on its own thread.

    The listener decides its fate once: :meth:`adopt` (with the committed turn) or :meth:`drop`."""

    def __init__(self, turn_id: int, seq: int, text: str, trace: ReplyTrace, confidence: float | None = None) -> None:
        self.turn_id, self.seq, self.text, self.trace = turn_id, seq, text, trace
        self.confidence = confidence
        self.turn: Turn | None = None
        self._decided = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.held: HeldAudio | None = None

    # -- the listener's side --------------------------------------------------------------------------------------
    def adopt(self, turn: Turn) -> None:
        self.turn = turn
        self._decided.set()

    def drop(self) -> None:
        self._decided.set()

    @property
    def decided(self) -> bool:
        return self._decided.is_set()

    # -- the responder's side -------------------------------------------------------------------------------------
    def start(
        self,
        responder: Responder,
        cancel: threading.Event,
        write: Callable[[FloatAudio], int],
        queued_s: Callable[[], float],
    ) -> None:
        """Begin the reply on a thread of its own (``edgevoice-speculate``), its audio held."""
        held = self.held = HeldAudio(write)

        def run() -> None:
            try:
                heard = Transcript(text=self.text, confidence=self.confidence)
                responder.respond_to(heard, self.trace, cancel, held.emit, queued_s=queued_s)
            except BaseException as exc:  # handed to the responder thread by finish()
                self._error = exc

        self._thread = threading.Thread(target=run, name="edgevoice-speculate", daemon=False)
        self._thread.start()

    def wait_decision(self, timeout: float = DECISION_TIMEOUT_S) -> Turn | None:
        """The committed turn when adopted; None when dropped (shutting down drops it too, see
        :meth:`SpeculativeReplies.abort`) or undecided after ``timeout`` (a turn that never ended: a safety net, the
        listener decides every speculation it started)."""
        self._decided.wait(timeout)
        return self.turn

    def finish(self) -> None:
        """Wait for the reply to end; re-raise what stopped it."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error


class SpeculativeReplies:
    """Which silence of which turn may get a reply begun early, the reply begun, and how many were started, adopted
    and dropped: the state the listener and the recognition worker share, behind one lock.

    The listener opens each turn (:meth:`open_turn`), reports the visitor falling silent (:meth:`silence`) and
    making a sound again or pausing incompletely (:meth:`invalidate`), and decides at the turn's end
    (:meth:`close_turn`). The recognition worker reports each speculative decode (:meth:`on_decoded`); the reply it
    starts goes to ``submit`` (the responder's queue) when ``busy()`` is false, else the transcript only goes to
    ``prefill`` (the language model's cache).

    ``words``: the transcript's own end-of-turn judge, asked by the recognition worker right after the decode, while
    the listener asks Smart Turn about the sound: the two verdicts are taken side by side, and the reply starts only
    after the words' one, when it is at least ``incomplete_below`` (a reply to half a sentence would be dropped)."""

    def __init__(
        self,
        *,
        enabled: bool,
        submit: Callable[[SpeculativeReply], None],
        busy: Callable[[], bool],
        prefill: Callable[[str], object],
        words: TextEndOfTurn | None = None,
        incomplete_below: float = 0.0,
        on_error: Callable[[EdgeVoiceError], None] = lambda _error: None,
    ) -> None:
        self.enabled = enabled
        self._words = words if incomplete_below > 0.0 else None
        self.incomplete_below = incomplete_below
        self._on_error = on_error
        self._closed = False
        self.counts = {"started": 0, "adopted": 0, "dropped": 0}
        self.decoded = threading.Event()
        """Set when the latest speculative decode is done (cleared at each silence)."""
        self.transcript = ""
        """The turn's transcript as of the latest speculative decode (valid while :attr:`decoded` is set)."""
        self.judged = threading.Event()
        """Set when the words' verdict on the latest speculative decode is in (:attr:`words_complete`)."""
        self.words_complete: float | None = None
        """The words' probability that the transcript ends a sentence; None: not judged (no judge, or it failed)."""
        self.words_cost: tuple[float, int] | None = None
        """What that verdict cost: seconds, and the tokens the judge decoded (None: not judged)."""
        self._submit, self._busy, self._prefill = submit, busy, prefill
        self._lock = threading.Lock()
        self._turn_id = 0
        self._seq = 0
        self._valid = False
        self._open = False
        self._reply: SpeculativeReply | None = None

    @property
    def judges_words(self) -> bool:
        return self._words is not None

    @property
    def valid(self) -> bool:
        """The visitor fell silent and has said nothing since: the speculative decode stands for the turn's tail."""
        return self._valid

    @property
    def is_decoded(self) -> bool:
        """The latest speculative decode is done (:attr:`decoded`)."""
        return self.decoded.is_set()

    def wait_decoded(self, timeout: float) -> bool:
        """Until the latest speculative decode is done, ``timeout`` seconds at most; whether it is."""
        return self.decoded.wait(timeout)

    def wait_judged(self, timeout: float) -> bool:
        """Until the words' verdict on the latest speculative decode is in, ``timeout`` seconds at most."""
        return self.judged.wait(timeout)

    # -- the listener's side --------------------------------------------------------------------------------------
    def open_turn(self, turn_id: int) -> None:
        with self._lock:
            self._turn_id, self._valid, self._open = turn_id, False, True

    def silence(self, speculate: Callable[[], int]) -> None:
        """The visitor fell silent: ``speculate()`` queues the decode of the tail and returns its number."""
        with self._lock:
            self._valid = True
            self._seq = speculate()
            self.transcript = ""
            self.words_complete = self.words_cost = None
        self.decoded.clear()
        self.judged.clear()

    def invalidate(self) -> None:
        """The visitor goes on (or the pause was incomplete): what was begun for the silence is moot."""
        with self._lock:
            self._valid = False
            self._drop()

    def close(self) -> None:
        """The loop stops: no reply begins any more, and the one begun is dropped."""
        self._closed = True
        self.abort()

    def abort(self) -> None:
        """The turn in progress was abandoned (or the loop stops): no reply may start for it, and the one begun is
        dropped."""
        with self._lock:
            self._open = False
            self._drop()

    def close_turn(self, turn: Turn, on_adopt: Callable[[Turn], None]) -> bool:
        """The turn ended: adopt the reply begun for its last silence if it still stands (after ``on_adopt(turn)``)
        and return True; else drop any reply begun and return False. No reply can start for the turn afterwards."""
        with self._lock:
            self._open = False
            reply, self._reply = self._reply, None
            if reply is not None and turn.speculation_valid and reply.seq == self._seq:
                on_adopt(turn)
                self.counts["adopted"] += 1
                reply.adopt(turn)  # its responder answers this turn: its audio is ready or on the way
                return True
            if reply is not None:
                self.counts["dropped"] += 1
                reply.drop()
            return False

    def _drop(self) -> None:
        """(Holding the lock.)"""
        if self._reply is not None:
            self.counts["dropped"] += 1
            self._reply.drop()
            self._reply = None

    # -- the recognition worker's side ----------------------------------------------------------------------------
    def on_decoded(self, spec: Speculation) -> None:
        """The tail is decoded: judge its words (when asked to), then begin the reply now if all is ready for it and
        the words may end the turn, else at least put the question into the language model's cache."""
        with self._lock:
            current = spec.turn_id == self._turn_id and spec.seq == self._seq
            if current:
                self.transcript = spec.text
        self.decoded.set()
        started, decoded = time.perf_counter(), getattr(self._words, "tokens_decoded", 0)
        words = self._judge(spec.text) if current else None
        cost = (time.perf_counter() - started, getattr(self._words, "tokens_decoded", 0) - decoded)
        with self._lock:
            current = spec.turn_id == self._turn_id and spec.seq == self._seq  # a silence may have come meanwhile
            if current:
                self.words_complete = words
                self.words_cost = cost if words is not None else None
                self.judged.set()
            unfinished = words is not None and words < self.incomplete_below
            start = (
                self.enabled
                and bool(spec.text.strip())  # nothing heard (a cough, a door): nothing to reply to
                and spec.stable
                and current
                and not unfinished
                and self._valid
                and self._open
                and self._reply is None
                and not self._busy()  # the responder is free: no reply queued or playing
                and not self._closed
            )
            log.debug(
                "speculation %d.%d stable=%s current=%s valid=%s open=%s words=%s: %s",
                spec.turn_id, spec.seq, spec.stable, current, self._valid, self._open, words,
                "reply begun" if start else "prefill",
            )  # fmt: skip
            if start:
                trace = ReplyTrace(spec.turn_id, committed=0.0)
                reply = SpeculativeReply(spec.turn_id, spec.seq, spec.text, trace, spec.confidence)
                self._reply = reply
                self.counts["started"] += 1
                self._submit(reply)
        if not start and spec.text.strip():
            self._prefill(spec.text)

    def on_partial(self, text: str) -> None:
        """A partial transcript of the turn in progress: the words' judge reads it now, so that at the pause only the
        words said since are left for it to read (its cache keeps the last text judged). Skipped once the visitor
        has fallen silent: the speculative decode queued then must not wait for it."""
        with self._lock:
            if self._words is None or self._valid or not self._open or not text.strip():
                return
        self._judge(text)

    def _judge(self, text: str) -> float | None:
        """The words' verdict on ``text``; None when there is no judge, no words, or it failed (logged: the sound
        decides alone)."""
        if self._words is None or not text.strip():
            return None
        try:
            return self._words.probability_complete(text)
        except EdgeVoiceError as exc:
            log.error("text end-of-turn failed, the sound decides: %s", exc)
            self._on_error(exc)
            return None


class PrefillAhead:
    """The partial transcripts of the turn in progress put into the language model's cache while the visitor
    speaks, on a thread of its own (:meth:`run`), so that a reply through the model finds its hint and most of its
    question evaluated at the pause and evaluates only the words said since.

    Only the latest partial transcript waits (an older one is moot); none is begun once the visitor has fallen silent
    (``silent()``: the speculative decode and the verdicts then need the cores), one under way stops at its next
    small step then (:func:`edgevoice.priority.background`), and ``prefill`` itself skips a question that will not
    reach the model (a direct answer, small talk, "I don't know") and a model that is busy."""

    def __init__(self, prefill: Callable[[str], object], *, silent: Callable[[], bool], nice: int = 0) -> None:
        self._prefill, self._silent, self._nice = prefill, silent, nice
        self._stop = threading.Event()
        self._text: str | None = None
        self._ready = threading.Condition()
        self.prefilled = 0
        """Partial transcripts prefilled (the model evaluated them, or found them in its cache already)."""

    def offer(self, text: str) -> None:
        """(Any thread.) The turn's latest partial transcript; replaces one still waiting."""
        with self._ready:
            self._text = text
            self._ready.notify()

    def close(self) -> None:
        """End :meth:`run` (after the prefill under way, which the model's interrupt cuts short)."""
        with self._ready:
            self._stop.set()
            self._ready.notify()

    def run(self) -> None:
        lower_this_thread(self._nice)
        while not self._stop.is_set():
            with self._ready:
                self._ready.wait_for(lambda: self._text is not None or self._stop.is_set(), timeout=0.5)
                text, self._text = self._text, None
            if text is None or self._stop.is_set() or self._silent():
                continue
            with background(yield_to=self._silent):  # stops between two small steps once the visitor is silent
                if self._prefill(text):
                    self.prefilled += 1
