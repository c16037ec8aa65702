"""The language model behind the kiosk's grounding: a wrapper that consults the kiosk
(:class:`~edgevoice.kiosk.grounding_types.GroundingSource`) about the visitor's last question (gate, direct answer,
retrieved facts) and checks clause by clause (or sentence by sentence) every reply of the model against the entries
retrieved for its question, however well they cover it (see :mod:`edgevoice.kiosk.grounding`): a fully covered
question is no guarantee that the model keeps to its facts ("When was the hotel built?" "In 1985.").

Two mistakes of a small model are mended on the way out:

* **A refusal that answers** ("I don't know that, please ask at <a place>."): the model borrowed the refusal's words
  to send the visitor where the best-matching entry says. When the place it names is the one that entry gives, the
  refusal is dropped ("Please ask at <that place>."); any other place becomes the plain
  :data:`~edgevoice.kiosk.prompt.DONT_KNOW`, since an invented desk is no better than an invented fact.
* **An echo**: a first sentence that says nothing the question did not ("Is photography permitted?" "Yes,
  photography is permitted.", or the visitor's own words said back: "Each children have to pay.", for "do children
  have to pay?" misheard as a statement) asserts without a fact behind it. The best-matching entry's answer, as the
  operator wrote it, is spoken instead ("Yes, without flash.") when the question is about that entry
  (:meth:`~edgevoice.kiosk.grounding.Kiosk.about`), else :data:`~edgevoice.kiosk.prompt.DONT_KNOW`. Small talk said
  back ("Hello!") is no echo.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import Any

from edgevoice.events import Answered, ChatMessage, Cut
from edgevoice.interfaces import LanguageModel
from edgevoice.kiosk.grounding_types import Grounding, GroundingSource, Verdict
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.prompt import ASK_AGAIN, DONT_KNOW, DONT_KNOW_OPENING, REDIRECT

__all__ = ["MAX_HELD_SENTENCES", "GroundedModel"]

_DECLINE = DONT_KNOW_OPENING
"""The opening of the refusal, which a small model completes with a place."""

MAX_HELD_SENTENCES = 2
"""A reply held back for checking is cut after this many sentences (the responder speaks no more)."""
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_CLAUSE_END = re.compile(r"[.!?,;:](?:\s|$)")


def _next_cut(text: str, by_clause: bool) -> tuple[int, bool] | None:
    """Where the first part of ``text`` to check ends (a clause or, ``by_clause`` false, a sentence), and whether
    that part ends a sentence; None: no part is complete yet. A mark at the very end of the text right after a digit
    waits for what comes next ("9." may become "9.50", "1," "1,200")."""
    m = (_CLAUSE_END if by_clause else _SENTENCE_END).search(text)
    if m is None or (m.end() == len(text) and m.end() - m.start() == 1 and m.start() and text[m.start() - 1].isdigit()):
        return None
    return m.end(), text[m.start()] in ".!?"


def _close(stream: Iterator[str]) -> None:
    """Close a reply stream that has a ``close`` (a generator), in this thread, when its consumer is done with it."""
    close = getattr(stream, "close", None)
    if close is not None:
        close()


def previous_question(earlier: Sequence[ChatMessage], prefix: Sequence[ChatMessage]) -> str | None:
    """The visitor's last question in ``earlier`` (the messages before the current question), None at a
    conversation's start: the example turns of the ``prefix`` it starts with are none of the visitor's."""
    if list(earlier[: len(prefix)]) == list(prefix):
        earlier = earlier[len(prefix) :]
    return next((m.content for m in reversed(earlier) if m.role == "user"), None)


class GroundedModel:
    """A :class:`~edgevoice.interfaces.LanguageModel` that consults the kiosk before the model answers.

    The last message, if the visitor's, is grounded: an uncovered question gets the refusal at once, a covered
    one goes to the model (with its retrieved facts in retrieval mode). Anything else (``prefill``,
    ``count_tokens``, ``forget_messages``, ``close``...) is the wrapped model's."""

    def __init__(self, llm: LanguageModel, kiosk: GroundingSource) -> None:
        self.llm = llm
        self.kiosk = kiosk
        self.last_grounding: Grounding | None = None
        """The grounding of the last question answered (for benchmarks and logs)."""
        self.last_verdict: Verdict | None = None
        """Who answered the last question (None: none asked yet)."""
        self.last_read_out: Entry | None = None
        """The entry whose answer was the last reply, as the operator wrote it (a direct answer or the answer said
        instead of an echo); None when the reply was no entry's read-out."""
        self._asked = False  # the last reply was the wrapped model's (not the kiosk's own words)

    @property
    def answered_by(self) -> Answered | None:
        """Which model answered the last question (the wrapped model's ``answered_by`` when it names one, else the
        local model); None when the kiosk answered without asking one (the gate, a direct answer)."""
        if self.last_verdict in (None, Verdict.GATE, Verdict.DIRECT):
            return None
        if hasattr(self.llm, "answered_by"):
            answered = self.llm.answered_by
            return answered if isinstance(answered, Answered) else None
        return Answered("local")

    @property
    def last_cut(self) -> Cut | None:
        """The bound the wrapped model's last reply stopped at (None when the kiosk answered without asking it)."""
        cut = getattr(self.llm, "last_cut", None) if self._asked else None
        return cut if isinstance(cut, Cut) else None

    def _rewrite(self, messages: Sequence[ChatMessage]) -> tuple[list[ChatMessage], Grounding | None]:
        if not messages or messages[-1].role != "user":
            return list(messages), None
        previous = previous_question(messages[:-1], self.kiosk.prefix)
        grounding = self.kiosk.ground_follow_up(messages[-1].content, previous)
        turn = replace(messages[-1], content=self.kiosk.user_turn(messages[-1].content, grounding))
        return [*messages[:-1], turn], grounding

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        rewritten, grounding = self._rewrite(messages)
        self.last_grounding = grounding
        self.last_verdict = Verdict.MODEL
        self.last_read_out = None
        self._asked = False
        ask_again = grounding is not None and messages[-1].unsure and not self._asked_again(messages[:-1])
        if grounding is not None and not grounding.known:
            if ask_again:
                self.last_verdict = Verdict.UNHEARD
                yield ASK_AGAIN  # most likely misheard: "I don't know" would send the visitor away for nothing
                return
            self.last_verdict = Verdict.GATE
            yield self.kiosk.refusal(grounding)  # a near miss hears what its entry does say
            return
        if grounding is not None and grounding.small_talk is not None:
            self.last_verdict = Verdict.SMALL_TALK
            yield grounding.small_talk  # a reply in the persona, at once: the model would decline it
            return
        if grounding is not None and grounding.direct is not None:
            self.last_verdict = Verdict.DIRECT
            self.last_read_out = grounding.direct_entry
            yield grounding.direct  # the operator's own words: right, speakable, and at once
            return
        self._asked = True
        stream = self._mend_refusal(self.llm.stream_reply(rewritten, max_tokens=max_tokens), grounding)
        try:
            if grounding is None:  # not the visitor's turn: nothing to check the reply against
                yield from stream
            elif ask_again:
                yield from self._unless_refused(self._checked(stream, messages[-1].content, grounding))
            else:
                yield from self._checked(stream, messages[-1].content, grounding)
        finally:
            stream.close()

    def _unless_refused(self, reply: Iterator[str]) -> Generator[str, None, None]:
        """``reply`` to a question heard unsure, but asking the visitor to say it again where it is the plain
        refusal (the model's own, or the reply check's): whoever refuses, a question most likely misheard is asked
        for again, as at the gate. Pieces are held (an empty piece goes out for each) only while the reply could
        still be the refusal."""
        held: str | None = ""
        for piece in reply:
            if held is None:
                yield piece
                continue
            held += piece
            if held.strip() == DONT_KNOW:
                self.last_verdict = Verdict.UNHEARD
                yield ASK_AGAIN
                return
            if DONT_KNOW.startswith(held.lstrip()):
                yield ""
                continue
            yield held
            held = None
        if held:
            yield held

    @staticmethod
    def _asked_again(earlier: Sequence[ChatMessage]) -> bool:
        """The kiosk's last reply in ``earlier`` asked the visitor to say it again: once is enough (a visitor the
        recognizer cannot hear is not asked over and over), so the refusal follows. (The prefix's example turns
        never ask again.)"""
        return next((m.content for m in reversed(earlier) if m.role == "assistant"), None) == ASK_AGAIN

    def _checked(self, stream: Iterator[str], question: str, grounding: Grounding) -> Generator[str, None, None]:
        """The reply to ``question``: each clause (``reply_check = "clause"``) or sentence is held back until
        it is complete and checked, with what was said before it, against the knowledge (an empty piece goes out for
        each piece of the model's, so the caller's cancel checks go on). A supported part is spoken at once; the
        first unsupported one ends the reply, with "I don't know" when it ends the first sentence (after what of it
        was said: a reply whose first sentence fails declines, whichever the unit).

        The check of a part is the check of the whole reply up to its end, so a sentence spoken clause by clause
        passes or stops exactly where the sentence-level check of the same words would: clauses only let its
        supported start out sooner. The first sentence's clauses are kept back while that sentence could still turn
        out to be an echo of the question (no content word yet that the question does not have)."""
        by_clause = self.kiosk.reply_check == "clause"
        may_echo = not self.kiosk.small_talk(question)  # "Hello!" "Hello! How can I help?": said back, no echo
        spoken, held, pending, sentences = "", "", "", 0
        for piece in stream:
            pending += piece
            yield ""
            while (cut := _next_cut(pending, by_clause)) is not None:
                end, ends_sentence = cut
                part, pending = pending[:end], pending[end:]
                if not self.kiosk.check.supported(spoken + held + part, question, grounding.entries):
                    self.last_verdict = Verdict.UNSUPPORTED
                    if not sentences:  # the first sentence failed: the refusal follows what of it was said
                        yield f" {DONT_KNOW}" if spoken else DONT_KNOW
                    return
                held += part
                if not sentences and may_echo:  # the first sentence: an echo of the question is said otherwise
                    if ends_sentence and self.kiosk.check.echoes(held, question) and grounding.entries:
                        yield self._instead_of_echo(grounding)
                        return
                    if not ends_sentence and self.kiosk.check.echoes(f"{held} {question}", question):
                        continue  # no content word the question lacks yet: the sentence may still echo it
                released, held = held, ""
                spoken += released
                sentences += ends_sentence
                yield released
            if sentences >= MAX_HELD_SENTENCES:
                return
        rest = held + pending
        if rest.strip() and sentences < MAX_HELD_SENTENCES:  # the reply ended without a full stop
            if not sentences and may_echo and grounding.entries and self.kiosk.check.echoes(spoken + rest, question):
                yield self._instead_of_echo(grounding)
                return
            if self.kiosk.check.supported(spoken + rest, question, grounding.entries):
                yield rest
                spoken += rest
            else:
                self.last_verdict = Verdict.UNSUPPORTED
                if spoken.strip() and not sentences:
                    yield f" {DONT_KNOW}"
                    return
        if not spoken.strip():
            self.last_verdict = Verdict.UNSUPPORTED
            yield DONT_KNOW

    def _mend_refusal(self, stream: Iterator[str], grounding: Grounding | None) -> Generator[str, None, None]:
        """``stream`` with a refusal that names a place mended (see the module's doc). Pieces are held (an empty
        piece goes out for each, so the caller's cancel checks go on) only while the reply could still be the
        refusal: its opening, then up to the end of the place it names."""
        held = ""
        try:
            for piece in stream:
                held += piece
                if not _DECLINE.lower().startswith(held.lower()[: len(_DECLINE)]):
                    break  # not a refusal
                end = _SENTENCE_END.search(held, len(_DECLINE)) if len(held) > len(_DECLINE) else None
                if end is None:
                    yield ""
                    continue
                mended = self._redirect(held[len(_DECLINE) : end.start() + 1], grounding)
                yield mended
                if mended == DONT_KNOW:
                    return  # a refusal ends the reply
                held = held[end.start() + 1 :]
                break
            else:  # the stream ended while held: an unfinished opening, or a place without a full stop
                if held.lower().startswith(_DECLINE.lower()) and held[len(_DECLINE) :].strip():
                    yield self._redirect(held[len(_DECLINE) :], grounding)
                elif held:
                    yield held
                return
            if held:
                yield held
            yield from stream
        finally:
            _close(stream)

    def _instead_of_echo(self, grounding: Grounding | None) -> str:
        """What is said instead of a reply that echoes the question: the best-matching entry's answer, as the
        operator wrote it, when the question is about that entry (:data:`~edgevoice.kiosk.prompt.DONT_KNOW`
        without one)."""
        self.last_verdict = Verdict.ECHO
        if grounding is None or not grounding.entries or not self.kiosk.about(grounding, grounding.entries[0]):
            return DONT_KNOW  # an echo has no fact behind it, and the best entry is about something else
        self.last_read_out = grounding.entries[0]
        return grounding.entries[0].answer

    def _redirect(self, place: str, grounding: Grounding | None) -> str:
        """The refusal that sends the visitor to ``place`` ("the front desk."): :data:`~edgevoice.kiosk.prompt.REDIRECT`
        to that place when the best-matching entry's answer names it, else the plain refusal."""
        best = grounding.entries[0] if grounding is not None and grounding.entries else None
        if best is None or not self.kiosk.check.names_only(place, best.answer):
            return DONT_KNOW
        place = place.strip()
        return REDIRECT.format(place=place if place.endswith((".", "!", "?")) else f"{place}.")

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        """The wrapped model's prefill, of the prompt exactly as :meth:`stream_reply` will send it."""
        prefill = getattr(self.llm, "prefill", None)
        rewritten, grounding = self._rewrite(messages)
        if prefill is None or (
            grounding is not None
            and (not grounding.known or grounding.direct is not None or grounding.small_talk is not None)
        ):
            return 0  # a model without a cache, or a question that will not reach the model
        return int(prefill(rewritten))

    def __getattr__(self, name: str) -> Any:
        if name in ("llm", "kiosk") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.llm, name)
