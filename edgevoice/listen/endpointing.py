"""When has the visitor finished speaking? The end-of-turn state machine and its settings. Pure logic: no clock,
no engine.

It is fed one VAD frame at a time, ``(frame_seconds, speech_probability)`` from Silero VAD, and keeps its own stream
time (the sum of the frame durations since the last :meth:`Endpointer.reset`). It makes every silence decision of the
live loop and answers with typed events:

- :class:`SpeechStart` once speech has lasted ``min_speech_ms`` (its ``t`` is the onset, the start of the first
  speech frame, so the caller can keep the audio from there);
- :class:`Silence` the first frame below ``neg_threshold`` during speech (the visitor fell silent: the caller may
  begin decoding and replying speculatively), and :class:`SilenceEnd` at the next frame at ``threshold`` or above
  (the visitor made a sound again: whatever was begun for the silence is moot);
- :class:`Pause` once the silence after speech reaches ``silence_ms``: the caller now runs Smart Turn on the turn
  audio and reports the probability back with :meth:`Endpointer.report_turn_probability`;
- :class:`TurnEnd` when the turn is over, for a :class:`TurnEndReason`: ``COMPLETE`` (Smart Turn says so; ended at
  once, at the current stream time), ``SILENCE_TIMEOUT`` (incomplete, or no verdict yet, but the silence reached
  ``incomplete_max_silence_ms``, or the shorter wait the verdict asked for: an unsure pause, see
  :func:`pause_verdict`) or ``MAX_LENGTH`` (the turn reached ``max_turn_s``);
- :class:`SpeechResume` when speech comes back during a pause, again after ``min_speech_ms``: the same turn goes
  on, and a verdict that arrives afterwards for the earlier pause is ignored;
- :class:`CutTurnPause` after a ``MAX_LENGTH`` end, once the visitor pauses (``silence_ms`` below ``neg_threshold``):
  the cut turn may be answered now. Speech meanwhile starts no turn; listening starts over after it.

A frame is speech with hysteresis: it takes ``threshold`` to become speech and falling below ``neg_threshold`` to
stop being speech (Silero's own rule). Short voiced blips (a cough, a door) neither start nor resume a turn.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields

from edgevoice.errors import ConfigError, TurnError, VadError

_EPS = 1e-9  # stream time is a sum of float frame durations: compare durations with this slack
NEG_THRESHOLD = 0.35
"""Once speaking, a frame is silence only below this speech probability (Silero's hysteresis)."""


def _rng(lo: float, hi: float) -> dict[str, tuple[float, float]]:
    return {"range": (lo, hi)}


@dataclass(frozen=True)
class EndpointingConfig:
    """The ``[endpointing]`` table: when a turn ends. Each number's allowed range is in its ``range`` metadata."""

    silence_ms: int = field(default=192, metadata=_rng(60, 3000))
    """Silence after which the turn ends if Smart Turn judges it complete (counted in 32 ms VAD frames: the default
    is six frames)."""
    incomplete_max_silence_ms: int = field(default=1200, metadata=_rng(100, 10000))
    """Longest wait after an incomplete-sounding turn; at least ``silence_ms``."""
    min_speech_ms: int = field(default=120, metadata=_rng(30, 2000))
    """Shorter voiced blips neither start nor resume a turn."""
    complete_threshold: float = field(default=0.5, metadata=_rng(0.05, 0.95))
    """Smart Turn probability at or above which the turn is complete."""
    text_incomplete_below: float = field(default=0.005, metadata=_rng(0.0, 0.5))
    """When Smart Turn finds the turn complete, judge its transcript so far too (the language model's probability
    that the sentence ends there, :mod:`edgevoice.engines.text_turn`); below this the turn is incomplete after all
    ("where can I find"). The default is the threshold measured for the default model (``docs/decisions/``); 0
    turns the check off. Off without a local model."""
    text_complete_at: float = field(default=0.1, metadata=_rng(0.0, 1.0))
    """Words this likely to end a sentence end the turn at the pause whatever Smart Turn hears; words between
    ``text_incomplete_below`` and this leave the turn unsure: it ends after ``unsure_silence_ms`` unless Smart Turn is
    at least ``complete_sure`` (:func:`pause_verdict`; measured by ``scripts/pause_eval.py``). 0: the words only
    veto a complete-sounding pause, as Smart Turn alone decides otherwise."""
    complete_sure: float = field(default=0.98, metadata=_rng(0.05, 1.0))
    """Smart Turn probability that ends an unsure turn at the pause."""
    unsure_silence_ms: int = field(default=700, metadata=_rng(100, 10000))
    """Silence after which an unsure turn ends (never longer than ``incomplete_max_silence_ms``)."""
    rejoin_ms: int = field(default=1000, metadata=_rng(0, 5000))
    """Speech that starts this soon after the end of a committed turn's speech, before half a second of its reply was
    heard, goes on with that turn: its reply is cut (or never begins), it leaves the conversation, and the whole is
    answered as one question. A pause inside a
    sentence that sounded and read finished then costs the visitor the start of a wrong reply, not the answer to
    half a question (``docs/live-loop.md``). 0: every turn is a question of its own."""
    max_turn_s: float = field(default=30.0, metadata=_rng(2.0, 120.0))
    """A turn is cut off after this long, measured from its onset, and answered once the visitor pauses."""
    speculative_reply: bool = True
    """Begin the reply the moment the visitor falls silent (its audio held back until the turn is committed), so the
    language model and the synthesizer work while the end of the turn is being confirmed."""
    prefill_while_speaking: bool = True
    """Put each partial transcript of a question bound for the language model into its cache while the visitor
    speaks, so that its reply evaluates only the words said since."""
    words_first: bool = True
    """At a pause, take the words' verdict first and ask Smart Turn only when its answer can change the outcome
    (:func:`sound_decides`): the words decide most pauses alone, and on two cores their verdict and the reply begun
    after it then do not share the cores with Smart Turn. False: both verdicts side by side, as before."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if "range" not in f.metadata:
                continue
            value = getattr(self, f.name)
            lo, hi = f.metadata["range"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
                raise ConfigError(f"endpointing.{f.name} = {value!r}: must be a number between {lo} and {hi}")
        if self.incomplete_max_silence_ms < self.silence_ms:
            raise ConfigError(
                f"endpointing.incomplete_max_silence_ms = {self.incomplete_max_silence_ms!r}: "
                f"must be at least endpointing.silence_ms ({self.silence_ms})"
            )


@dataclass(frozen=True, slots=True)
class PauseVerdict:
    """What a pause's verdicts decide: the probability to report (:meth:`Endpointer.report_turn_probability`) and,
    for a turn that is not complete, how long a silence ends it (ms)."""

    p: float
    max_silence_ms: int
    unsure: bool = False
    """Neither complete nor incomplete: the turn ends after ``unsure_silence_ms`` if nothing more is said."""


def sound_decides(words: float | None, config: EndpointingConfig) -> bool:
    """Whether Smart Turn's verdict can change what :func:`pause_verdict` decides after the words' verdict
    ``words`` (None: not judged): no when the words are under ``text_incomplete_below`` (incomplete whatever the
    sound) or, fused, at ``text_complete_at`` or more (complete whatever the sound)."""
    if words is None or config.text_incomplete_below <= 0.0:
        return True
    if words < config.text_incomplete_below:
        return False
    return config.text_complete_at <= 0.0 or words < config.text_complete_at


def pause_verdict(sound: float | None, words: float | None, config: EndpointingConfig) -> PauseVerdict:
    """Fuse Smart Turn's probability (``sound``; None: not asked, allowed only where :func:`sound_decides` says it
    changes nothing) with the words' (``words``; None: not judged) at a pause.

    Without words, or with ``text_complete_at`` 0, the sound decides and words under ``text_incomplete_below`` veto
    a complete one. Otherwise the words decide first: under ``text_incomplete_below`` the turn is incomplete, at
    ``text_complete_at`` or more it is complete, and in between it is complete only when the sound is sure
    (``complete_sure``); else it is unsure and ends after ``unsure_silence_ms`` of silence."""
    long = config.incomplete_max_silence_ms
    if sound is None:
        if sound_decides(words, config):
            raise ValueError(f"a pause whose words ({words!r}) leave it open needs Smart Turn's verdict")
        sound = 1.0  # any: the words decide alone
    if words is None or config.text_incomplete_below <= 0.0:
        return PauseVerdict(sound, long)
    if words < config.text_incomplete_below:
        return PauseVerdict(min(sound, words), long)
    if config.text_complete_at <= 0.0:
        return PauseVerdict(sound, long)
    if words >= config.text_complete_at or sound >= config.complete_sure:
        return PauseVerdict(1.0, long)
    return PauseVerdict(0.0, min(config.unsure_silence_ms, long), unsure=True)


class TurnEndReason(enum.StrEnum):
    """Why a turn ended; ``value`` is the name the turn records use (and a member equals it)."""

    COMPLETE = "complete"
    SILENCE_TIMEOUT = "silence_timeout"
    MAX_LENGTH = "max_length"
    RELEASED = "released"
    """Push-to-talk: the key was released (:mod:`edgevoice.live.activation`); the endpointer never gives it."""


@dataclass(frozen=True, slots=True)
class SpeechStart:
    """A turn began; ``t`` is its onset (stream seconds)."""

    t: float


@dataclass(frozen=True, slots=True)
class Silence:
    """The visitor fell silent at ``t`` (a frame below ``neg_threshold`` during speech)."""

    t: float


@dataclass(frozen=True, slots=True)
class SilenceEnd:
    """A frame at ``threshold`` or above after a :class:`Silence`: the visitor made a sound again at ``t``."""

    t: float


@dataclass(frozen=True, slots=True)
class Pause:
    """Silence reached ``silence_ms`` at ``t``: run Smart Turn on the audio from ``start_t`` to ``speech_end_t``
    and answer with ``report_turn_probability(p, seq=pause.seq)``."""

    t: float
    speech_end_t: float
    """End of the last speech frame."""
    start_t: float
    """Onset of the turn."""
    seq: int
    """Numbers the pauses of this endpointer; a verdict quoting an older one is ignored."""


@dataclass(frozen=True, slots=True)
class SpeechResume:
    """Speech came back during a pause; ``t`` is its onset. The turn goes on."""

    t: float


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """The turn is over at ``t``; the visitor's speech ended at ``speech_end_t``."""

    t: float
    speech_end_t: float
    reason: TurnEndReason
    start_t: float
    """Onset of the turn."""


@dataclass(frozen=True, slots=True)
class CutTurnPause:
    """The visitor paused at ``t`` after a turn cut at ``max_turn_s``: answer that turn now."""

    t: float


EndpointEvent = SpeechStart | Silence | SilenceEnd | Pause | SpeechResume | TurnEnd | CutTurnPause


class EndpointState(enum.Enum):
    IDLE = "idle"
    SPEECH = "speech"
    PAUSE_PENDING_VERDICT = "pause_pending_verdict"
    PAUSE_INCOMPLETE = "pause_incomplete"
    CUT = "cut"
    """A turn was cut at ``max_turn_s``: waiting for the visitor to pause."""


class Endpointer:
    """The end-of-turn state machine; see the module docstring. Not thread-safe: one listener feeds it."""

    def __init__(
        self,
        config: EndpointingConfig | None = None,
        *,
        threshold: float = 0.5,
        neg_threshold: float = NEG_THRESHOLD,
    ) -> None:
        """``threshold``: the speech probability at which a frame becomes speech (``[vad] threshold``)."""
        for key, value in (("vad.threshold", threshold), ("neg_threshold", neg_threshold)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.01 <= value <= 0.99:
                raise ConfigError(f"{key} = {value!r}: must be a number between 0.01 and 0.99")
        if neg_threshold > threshold:
            raise ConfigError(f"vad.threshold = {threshold!r}: must be at least {neg_threshold} (the speech end)")
        self.config = config or EndpointingConfig()
        self.threshold, self.neg_threshold = threshold, neg_threshold
        self._seq = 0  # pause numbers stay unique across resets, so no stale verdict can match a new pause
        self.reset()

    def reset(self, *, t: float = 0.0) -> None:
        """Forget any turn in progress; stream time continues from ``t``."""
        self._t = t
        self._state = EndpointState.IDLE
        self._voiced = False
        self._silent = False  # a Silence was reported and no SilenceEnd since
        self._cut_silence = 0.0  # in CUT: how long the visitor has been below neg_threshold
        self._onset: float | None = None  # start of voiced frames not yet confirmed as speech
        self._turn_start = 0.0
        self._speech_end = 0.0
        self._max_silence_ms = self.config.incomplete_max_silence_ms  # set by each verdict

    @property
    def state(self) -> EndpointState:
        return self._state

    @property
    def now(self) -> float:
        """Stream time: the end of the last frame fed."""
        return self._t

    def is_speech(self, prob: float) -> bool:
        """Whether a frame of speech probability ``prob`` is loud enough to start speech."""
        return prob >= self.threshold

    def feed(self, frame_s: float, prob: float) -> list[EndpointEvent]:
        """Advance by one VAD frame of ``frame_s`` seconds with speech probability ``prob``."""
        if not (math.isfinite(frame_s) and frame_s > 0):
            raise VadError(f"frame duration must be a positive number of seconds, got {frame_s!r}")
        if not 0.0 <= prob <= 1.0:  # NaN fails too
            raise VadError(f"speech probability must be in [0, 1], got {prob!r}")
        cfg = self.config
        start, end = self._t, self._t + frame_s
        self._t = end
        state = self._state
        if state is EndpointState.CUT:
            return self._wait_for_pause(frame_s, prob)
        events: list[EndpointEvent] = []
        if prob >= self.threshold:
            if self._silent:
                self._silent = False
                events.append(SilenceEnd(end))
        elif prob < self.neg_threshold and state is EndpointState.SPEECH and not self._silent:
            self._silent = True
            events.append(Silence(end))
        self._voiced = prob >= (self.neg_threshold if self._voiced else self.threshold)
        if state is EndpointState.SPEECH:
            if self._voiced:
                self._speech_end = end
            elif end - self._speech_end >= cfg.silence_ms / 1000 - _EPS:
                self._seq += 1
                self._state = EndpointState.PAUSE_PENDING_VERDICT
                self._max_silence_ms = cfg.incomplete_max_silence_ms  # until the verdict says otherwise
                events.append(Pause(end, self._speech_end, self._turn_start, self._seq))
        elif self._voiced:  # idle or paused: voiced frames must last min_speech_ms to count
            if self._onset is None:
                self._onset = start
            if end - self._onset >= cfg.min_speech_ms / 1000 - _EPS:
                onset, self._onset = self._onset, None
                self._speech_end = end
                self._state = EndpointState.SPEECH
                if state is EndpointState.IDLE:
                    self._turn_start = onset
                    self._silent = False
                    events.append(SpeechStart(onset))
                else:
                    events.append(SpeechResume(onset))
        else:
            self._onset = None
            if state is not EndpointState.IDLE and end - self._speech_end >= self._max_silence_ms / 1000 - _EPS:
                events.append(self._end(TurnEndReason.SILENCE_TIMEOUT))
        if self._state is not EndpointState.IDLE and end - self._turn_start >= cfg.max_turn_s - _EPS:
            if self._state is EndpointState.SPEECH and self._voiced:
                self._speech_end = end
            events.append(self._end(TurnEndReason.MAX_LENGTH))
        return events

    def report_turn_probability(
        self, p: float, *, seq: int | None = None, max_silence_ms: int | None = None
    ) -> list[EndpointEvent]:
        """Smart Turn's answer to a :class:`Pause` (``seq`` names which one; pass it when the answer comes from
        another thread). Complete: the turn ends now. Incomplete: wait for more speech or for ``max_silence_ms`` of
        silence (default ``incomplete_max_silence_ms``). An answer that is no longer wanted (speech resumed, the
        turn ended, another pause since) is ignored."""
        if not 0.0 <= p <= 1.0:
            raise TurnError(f"end-of-turn probability must be in [0, 1], got {p!r}", code="turn_probability_invalid")
        if self._state is not EndpointState.PAUSE_PENDING_VERDICT or (seq is not None and seq != self._seq):
            return []
        if p >= self.config.complete_threshold:
            return [self._end(TurnEndReason.COMPLETE)]
        self._state = EndpointState.PAUSE_INCOMPLETE
        self._max_silence_ms = self.config.incomplete_max_silence_ms if max_silence_ms is None else max_silence_ms
        return []

    def _end(self, reason: TurnEndReason) -> TurnEnd:
        """Close the turn. Voiced frames not yet confirmed carry over: they may start the next turn; a turn cut at
        ``max_turn_s`` first waits for the visitor's pause."""
        self._state = EndpointState.CUT if reason is TurnEndReason.MAX_LENGTH else EndpointState.IDLE
        self._silent = False
        self._cut_silence = 0.0
        return TurnEnd(self._t, self._speech_end, reason, self._turn_start)

    def _wait_for_pause(self, frame_s: float, prob: float) -> list[EndpointEvent]:
        """(CUT) ``silence_ms`` below ``neg_threshold`` ends the wait; speech meanwhile starts nothing."""
        self._cut_silence = self._cut_silence + frame_s if prob < self.neg_threshold else 0.0
        if self._cut_silence < self.config.silence_ms / 1000 - _EPS:
            return []
        self.reset(t=self._t)
        return [CutTurnPause(self._t)]
