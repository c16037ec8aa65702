"""What the kiosk and the model it grounds share: the :class:`Grounding` of a question, the :class:`Verdict` on who
answered it, and :class:`GroundingSource`, the narrow face of the kiosk that
:class:`~edgevoice.kiosk.grounded_model.GroundedModel` consults. Both sides import this module, neither the other."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from edgevoice.events import ChatMessage
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.reply_check import ReplyCheck

__all__ = ["Grounding", "GroundingSource", "Verdict"]


class Verdict(Enum):
    """Who answered a question (its value is the name the quality benchmark prints)."""

    MODEL = "model"
    """The language model, its reply spoken as it came."""
    GATE = "gate"
    """Not covered by the knowledge: "I don't know", without the model."""
    DIRECT = "direct"
    """An entry's answer as the operator wrote it, without the model."""
    UNSUPPORTED = "unsupported"
    """The model's reply (or its rest) kept not to the knowledge and was cut or replaced by "I don't know"."""
    ECHO = "echo"
    """The model's reply only echoed the question and was replaced by the best entry's answer."""
    UNHEARD = "unheard"
    """The recognizer unsure of the words, and the knowledge (or the model, or the reply check) refusing them as
    heard: asked to say it again."""
    SMALL_TALK = "small talk"
    """Small talk ("hello", "thank you", "who are you?"): a reply of the persona, without the model."""


@dataclass(frozen=True, slots=True)
class Grounding:
    """What the knowledge says about one question."""

    known: bool
    """False: answer DONT_KNOW without asking the model."""
    coverage: float
    """Best entry's idf-weighted share of the question's terms (1.0 for a question with no content words)."""
    entries: tuple[Entry, ...] = ()
    """The best-ranked entries, best first."""
    direct: str | None = None
    """The answer to speak as it stands, without the model: one entry covers every word of the question and no
    other entry rivals it (see :meth:`edgevoice.kiosk.matching.Matcher.ground`)."""
    similarity: float | None = None
    """Semantic matching: the best entry's cosine similarity to the question (None: matched by words only)."""
    question: str = ""
    """The question as grounded: the transcript, or the transcript with misheard venue words replaced (then always
    one an entry answers outright: :attr:`direct` is set)."""
    small_talk: str | None = None
    """The question is small talk (:mod:`edgevoice.kiosk.small_talk`): the reply to speak as it stands, without the
    model."""
    margin: float | None = None
    """Semantic matching: how far the best entry's ranking score leads the second's (None: matched by words only, or
    a knowledge of one entry)."""
    direct_entry: Entry | None = None
    """The entry whose answer :attr:`direct` is (None without a direct answer): what a read-out reads."""


class GroundingSource(Protocol):
    """What a grounded model asks the kiosk: the grounding of a question, the message the model sees for it, and
    the check every reply of the model goes through."""

    @property
    def reply_check(self) -> str:
        """The part of a reply that is checked and then spoken as a whole: "clause" or "sentence"."""
        ...

    @property
    def check(self) -> ReplyCheck: ...

    @property
    def prefix(self) -> list[ChatMessage]:
        """The messages every conversation starts with (the system prompt and the example turns)."""
        ...

    def ground(self, question: str) -> Grounding: ...

    def ground_follow_up(self, question: str, previous: str | None) -> Grounding: ...

    def user_turn(self, question: str, grounding: Grounding) -> str: ...

    def refusal(self, grounding: Grounding) -> str: ...

    def about(self, grounding: Grounding, entry: Entry) -> bool:
        """Whether the question grounded is about ``entry``, so that its answer may be read out to it."""
        ...

    def small_talk(self, question: str) -> bool: ...
