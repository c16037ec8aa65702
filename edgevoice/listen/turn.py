"""A committed turn: the visitor's audio and what the listener knew when it ended it."""

from __future__ import annotations

from dataclasses import dataclass

from edgevoice.audio.chunk import AudioChunk
from edgevoice.listen.endpointing import TurnEndReason


@dataclass(frozen=True)
class Turn:
    turn_id: int
    audio: AudioChunk
    """The turn's audio; ``audio.start`` is its microphone-ring index, and it ends at ``audio.end``, the last sample
    the endpointer had heard when it committed."""
    speech_end_t: float
    """Stream time (s) at which the visitor's speech ended, per the VAD frames."""
    committed_t: float
    """Stream time (s) at which the endpointer committed the turn."""
    committed_wall: float
    reason: TurnEndReason
    tail: AudioChunk | None = None
    """The audio after the turn's last internal pause: all that is left to decode once the turn is committed."""
    speculation_valid: bool = False
    """The tail was already decoded when the visitor fell silent, and nothing was said since."""
    continues: int | None = None
    """The committed turn this one goes on with (the visitor resumed within ``rejoin_ms``): this turn's audio and
    transcript hold both, and that turn was withdrawn."""
    words_verdict: tuple[float, int] | None = None
    """The words' verdict at the turn's last pause: its seconds and the tokens it decoded (the rest were read ahead
    from the partial transcripts); None: not judged."""
