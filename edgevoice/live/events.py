"""What happens in the live loop, as typed, frozen events.

The parts of the loop tell each other what happened with these values (the listener tells the answerer of a
committed turn, a barge-in, a withdrawn turn), and publish them on the loop's :class:`~edgevoice.live.bus.EventBus`
for whoever follows the conversation (the JSON lines of ``edgevoice run --json``, the turn records, a screen, the
review inbox). *Control* events (:data:`CONTROL`) overtake data wherever events wait in a queue: a barge-in or the
shutdown is never stuck behind a turn waiting for its reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from edgevoice.errors import EdgeVoiceError
from edgevoice.listen.turn import Turn
from edgevoice.reply.output import Fallback as Fallback  # raised by the reply's output, published with the others
from edgevoice.reply.output import FallbackReason as FallbackReason

if TYPE_CHECKING:
    from edgevoice.reply.speculation import SpeculativeReply
    from edgevoice.reply.trace import ReplyTrace


@dataclass(frozen=True, slots=True)
class SpeechStarted:
    """The visitor began turn ``turn_id``: speech at ``t`` (stream seconds; a push-to-talk press: the press)."""

    turn_id: int
    t: float


@dataclass(frozen=True, slots=True)
class Partial:
    """A partial transcript of turn ``turn_id`` while the visitor speaks (``text`` may be empty)."""

    turn_id: int
    text: str


@dataclass(frozen=True, slots=True)
class TurnCommitted:
    """The listener ended ``turn``: its reply budget runs from now. ``adopted``: the reply begun when the visitor fell
    silent answers it (it is not queued again)."""

    turn: Turn
    adopted: bool = False

    @property
    def turn_id(self) -> int:
        return self.turn.turn_id


@dataclass(frozen=True, slots=True)
class ReplyBegun:
    """A reply begun for turn ``reply.turn_id`` when the visitor fell silent, its audio held until the turn is
    committed (:mod:`edgevoice.reply.speculation`)."""

    reply: SpeculativeReply

    @property
    def turn_id(self) -> int:
        return self.reply.turn_id


@dataclass(frozen=True, slots=True)
class Withdrawn:
    """The visitor went on speaking right after turn ``turn_id`` was committed; the turn that goes on answers the
    whole, so this one's reply stops (or never starts) and its exchange leaves the conversation."""

    turn_id: int


@dataclass(frozen=True, slots=True)
class Listening:
    """The activation gate opened (``listening``) or closed: a push-to-talk press or release, a trigger and the end
    of the turn it opened (or its timeout). Never published in ``always`` mode, which always listens."""

    listening: bool


@dataclass(frozen=True, slots=True)
class Transcribed:
    """The final transcript of turn ``turn_id`` is known (the reply is being made)."""

    turn_id: int
    text: str


@dataclass(frozen=True, slots=True)
class ReplyStarted:
    """The first audio of the reply to turn ``turn_id`` was queued for playback."""

    turn_id: int


@dataclass(frozen=True, slots=True)
class ReplyQueued:
    """All of the reply to turn ``turn`` is queued for playback, its words known (``trace``: its verdict, the entries
    ranked, the reply), and it is playing: a read-out answer (presynthesized) has barely begun. Not published for a
    turn given the fallback phrase. The actions act on it, so that a notification is on disk while its spoken
    confirmation plays (docs/actions.md)."""

    trace: ReplyTrace
    turn: Turn

    @property
    def turn_id(self) -> int:
        return self.turn.turn_id


@dataclass(frozen=True, slots=True)
class ClauseStarted:
    """The first sample of clause ``index`` of the reply to turn ``turn_id`` was just played at the speaker (by the
    output stream's DAC times, within about 10 ms: :mod:`edgevoice.live.captions`): the moment a caption of ``text``
    belongs on a screen. The fallback phrase is a clause too."""

    turn_id: int
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class AskedAgain:
    """The reply to turn ``turn_id`` asked the visitor to say it again (the words were most likely misheard:
    the grounding's ``unheard`` verdict); published when the reply is done, before :class:`ReplyFinished`."""

    turn_id: int


@dataclass(frozen=True, slots=True)
class BargeIn:
    """The visitor spoke over the reply to turn ``turn_id`` (or pressed the key, or triggered): the reply is silenced
    and cancelled."""

    turn_id: int


@dataclass(frozen=True, slots=True)
class ReplyFinished:
    """Turn ``turn`` is done: answered, cut by a barge-in, or given the fallback phrase; ``trace`` says how."""

    trace: ReplyTrace
    turn: Turn

    @property
    def turn_id(self) -> int:
        return self.turn.turn_id


@dataclass(frozen=True, slots=True)
class ActionTaken:
    """The kiosk took ``action`` for turn ``turn_id`` (``reason``: "asked", the entry read out declares it; or
    "not_understood", the staff call after turns not understood): its notification ``message_id`` is in the durable
    outbox already (docs/actions.md)."""

    action: str
    reason: str
    message_id: str
    turn_id: int


@dataclass(frozen=True, slots=True)
class SpeakRequested:
    """A request, from outside the conversation (Home Assistant, through the Wyoming server), to say ``text`` on the
    kiosk's speaker: published on the bus, taken by the loop, spoken between visitors' turns (a turn waiting goes
    first; a visitor who speaks over it cuts it short). ``request_id`` names it in :class:`Announced`."""

    request_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Announced:
    """The request ``request_id`` is done: ``played`` to its end, or not (cut by a visitor, a failure, the stop)."""

    request_id: str
    played: bool


@dataclass(frozen=True, slots=True)
class StageFailed:
    """A stage failed (a model raised, an engine bug): it cost a frame, a verdict or a turn, never the loop."""

    error: EdgeVoiceError


@dataclass(frozen=True, slots=True)
class Shutdown:
    """The loop stops: work in progress is cut short and the parts' threads end."""


LoopEvent = (
    SpeechStarted
    | Partial
    | TurnCommitted
    | ReplyBegun
    | Withdrawn
    | Listening
    | Transcribed
    | ReplyStarted
    | ReplyQueued
    | ClauseStarted
    | AskedAgain
    | BargeIn
    | Fallback
    | ReplyFinished
    | ActionTaken
    | SpeakRequested
    | Announced
    | StageFailed
    | Shutdown
)

CONTROL: tuple[type, ...] = (BargeIn, Withdrawn, Shutdown)
"""Events that overtake data in every queue (Pipecat's system frames)."""


def is_control(event: object) -> bool:
    return isinstance(event, CONTROL)
