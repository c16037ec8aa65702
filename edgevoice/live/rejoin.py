"""The committed turn a visitor may still go on with (``[endpointing] rejoin_ms``): its audio, the frames heard since
its commit, and when its reply was first heard; the listener asks it at each new turn's onset."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgevoice.audio import SAMPLE_RATE
from edgevoice.audio.chunk import AudioChunk
from edgevoice.listen.endpointing import EndpointingConfig

REJOIN_SLACK_S = 1.0
"""Audio kept after a commit beyond ``rejoin_ms``, for the speech that confirms a turn (``min_speech_ms``)."""
REJOIN_HEARD_S = 0.5
"""Speech that starts after the visitor has heard this much of the reply answers the reply (a barge-in with a
question of its own), however soon after the commit: it goes on with no turn. Half a second of a reply is a word
or two, too little to judge it and start another question."""


@dataclass(frozen=True)
class Rejoinable:
    """A committed turn that the visitor may still go on with."""

    turn_id: int
    frames: list[AudioChunk]
    speech_end_t: float
    played: int
    """Samples the output had played at the commit: more, and the reply is being heard."""
    since: list[AudioChunk] = field(default_factory=list)
    """The frames heard since the commit."""


class Rejoin:
    """Keeps the last committed turn while speech may still go on with it."""

    def __init__(self, config: EndpointingConfig) -> None:
        self.config = config
        self._turn: Rejoinable | None = None
        self._heard_from: float | None = None
        """Stream time at which the turn's reply was first heard (None: not yet)."""

    def committed(self, turn_id: int, frames: list[AudioChunk], speech_end_t: float, played: int) -> None:
        self._turn, self._heard_from = Rejoinable(turn_id, frames, speech_end_t, played), None

    def forget(self) -> None:
        self._turn, self._heard_from = None, None

    def hear(self, frame: AudioChunk, t: float, played: int) -> None:
        """A frame heard outside any turn at stream time ``t``, the output having played ``played`` samples."""
        turn = self._turn
        if turn is None:
            return
        turn.since.append(frame)
        if self._heard_from is None and played > turn.played:
            self._heard_from = t
        if len(turn.since) * len(frame) > (self.config.rejoin_ms / 1000 + REJOIN_SLACK_S) * SAMPLE_RATE:
            self.forget()

    def take(self, onset: float, *, reply_uncut: bool) -> Rejoinable | None:
        """The committed turn that speech starting at ``onset`` goes on with, if any, forgotten here: it ended less
        than ``rejoin_ms`` before, the visitor had heard at most :data:`REJOIN_HEARD_S` of its reply, that reply does
        not play on uncut (``reply_uncut``: only what cut it as a barge-in is the visitor, not the canceller's
        residue), and both together stay within ``max_turn_s``."""
        turn, heard_from = self._turn, self._heard_from
        self.forget()
        if turn is None or self.config.rejoin_ms <= 0 or reply_uncut:
            return None
        if onset - turn.speech_end_t > self.config.rejoin_ms / 1000:
            return None
        if heard_from is not None and onset - heard_from > REJOIN_HEARD_S:
            return None  # the visitor answers the reply
        if sum(map(len, turn.frames)) + sum(map(len, turn.since)) > self.config.max_turn_s * SAMPLE_RATE:
            return None
        return turn
