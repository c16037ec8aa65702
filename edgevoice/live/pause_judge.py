"""What the visitor's pauses set going: the speculative decode the moment the visitor falls silent, and whether the
turn is complete at the pause: the words' verdict that the recognition worker took on the speculative transcript,
fused with Smart Turn's verdict on its sound (:func:`~edgevoice.listen.endpointing.pause_verdict`). Smart Turn is
asked only when the words leave the pause open (``[endpointing] words_first``; else always, beside the words), early,
as the visitor falls silent, once the speculative decode and the words' verdict are done (the verdict is then ready
when the pause is long enough), or else at the pause. The turn's assembly (:mod:`edgevoice.live.turn_assembly`)
asks it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.chunk import AudioChunk
from edgevoice.errors import EdgeVoiceError
from edgevoice.interfaces import EndOfTurn
from edgevoice.listen.endpointing import (
    EndpointEvent,
    EndpointingConfig,
    PauseVerdict,
    Silence,
    SilenceEnd,
    pause_verdict,
    sound_decides,
)
from edgevoice.listen.streaming_asr import StreamingTranscriber
from edgevoice.live.events import LoopEvent, StageFailed
from edgevoice.reply.speculation import SpeculativeReplies

log = logging.getLogger(__name__)

SPECULATION_WAIT_S = 0.4
"""At a pause, how long to wait for a speculative decode still running before Smart Turn is asked."""
WORDS_WAIT_S = 1.5
"""The longest a pause that sounds complete waits for its transcript, for the words' verdict (on two busy cores
the speculative decode can take over a second; the reply could not begin before it anyway)."""


class Replying(Protocol):
    """What the pauses' judge may know of the reply side: read only."""

    @property
    def replying(self) -> bool:
        """A reply is being answered or played."""


class PauseJudge:
    """Judges the pauses of the turn in progress; holds the early verdict taken when the visitor fell silent."""

    def __init__(
        self,
        *,
        turn_model: EndOfTurn,
        config: EndpointingConfig,
        asr: StreamingTranscriber,
        speculation: SpeculativeReplies,
        reply: Replying,
        publish: Callable[[LoopEvent], None],
    ) -> None:
        self.turn_model, self.config, self.reply = turn_model, config, reply
        self.asr, self.speculation, self._publish = asr, speculation, publish
        self._words_first = config.words_first and speculation.judges_words
        """Smart Turn asked only when the words' verdict leaves the pause open (``[endpointing] words_first``)."""
        self._early_verdict: float | None = None
        """Smart Turn's verdict taken when the visitor fell silent, for the pause that follows (None: none)."""
        self._silence_audio: list[AudioChunk] | None = None
        """The turn's frames up to the moment the visitor fell silent (for the early verdict)."""

    def use_turn_model(self, turn_model: EndOfTurn) -> None:
        """Smart Turn's stand-in from now on (a test's)."""
        self.turn_model = turn_model

    def forget(self) -> None:
        """A turn starts, or the visitor goes on after a silence: no early verdict stands."""
        self._early_verdict = self._silence_audio = None

    def hear(self, events: Sequence[EndpointEvent], turn: list[AudioChunk], segment: int, frame: AudioChunk) -> None:
        """The endpointer's ``events`` at a ``frame`` of the open ``turn`` (``segment``: the frame after its last
        pause). Decoding starts the moment the visitor falls silent (speculation), so that recognition runs while the
        end of the turn is still being confirmed; any sound afterwards invalidates it."""
        if any(isinstance(e, SilenceEnd) for e in events):
            self.forget()
            self.speculation.invalidate()  # the visitor goes on: what was begun for the pause is moot
        elif any(isinstance(e, Silence) for e in events):
            self.speculation.silence(lambda: self.asr.speculate(AudioChunk.join(turn[segment:]).samples))
            self._silence_audio = list(turn)
        else:
            self._still_silent(frame)

    def _still_silent(self, frame: AudioChunk) -> None:
        """A ``frame`` of the silence: once the speculative decode is done (and, words first, the words' verdict on
        it is in and leaves the pause open), Smart Turn's verdict on the turn as it was when the visitor fell silent,
        the silence still to come as zeros (taken before the pause is long enough, the verdict is ready when it is)."""
        if not (
            self.speculation.valid
            and self._early_verdict is None
            and self._silence_audio is not None
            and self.speculation.is_decoded
        ):
            return
        if self._words_first:
            if not self.speculation.judged.is_set():
                return  # the words' verdict is being taken: it may make the sound's moot
            if not sound_decides(self.speculation.words_complete, self.config):
                self._silence_audio = None  # the words decide this pause alone
                return
        silence = np.zeros(int(self.config.silence_ms * SAMPLE_RATE / 1000) - len(frame), np.float32)
        silent = AudioChunk(silence, frame.end)
        self._early_verdict = self._turn_probability(AudioChunk.join([*self._silence_audio, silent]))
        self._silence_audio = None

    def verdict(self, turn_id: int, frames: Sequence[AudioChunk], *, valid: bool) -> PauseVerdict:
        """Turn ``turn_id`` (its ``frames`` so far) at a pause (``valid``: the speculative decode begun at the
        silence stands)."""
        early, self._early_verdict = self._early_verdict, None
        words = self._words_probability() if self._words_first else None
        p: float | None = None
        if not self._words_first or sound_decides(words, self.config):
            if early is not None and valid:  # asked at the silence's onset, nothing said since
                p = early
            else:
                if valid and not self.reply.replying:
                    # the speculative decode still runs: Smart Turn beside it would slow whisper.cpp's two threads
                    # on a small machine; one after the other both are done sooner
                    self.speculation.wait_decoded(SPECULATION_WAIT_S)
                p = self._turn_probability(AudioChunk.join(frames))
        if not self._words_first:
            words = self._words_probability()
        decided = pause_verdict(p, words, self.config)
        if p is not None and p >= self.config.complete_threshold > decided.p and not decided.unsure:
            log.info("turn %d: sounds complete (%.2f), but its words do not end a sentence (%.3f): %r",
                     turn_id, p, words, self.speculation.transcript)  # fmt: skip
        elif decided.unsure:
            log.info("turn %d: unsure (sound %.2f, words %.3f): ends after %d ms of silence",
                     turn_id, p, words, decided.max_silence_ms)  # fmt: skip
        return decided

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
        self.speculation.wait_judged(WORDS_WAIT_S)
        return self.speculation.words_complete
