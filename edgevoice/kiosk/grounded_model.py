"""The language model behind the kiosk's grounding: a wrapper that consults the
:class:`~edgevoice.kiosk.grounding.Kiosk` about the visitor's last question (gate, direct answer, retrieved facts) and
checks a partly covered question's reply sentence by sentence (see :mod:`edgevoice.kiosk.grounding`)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from edgevoice.events import ChatMessage
from edgevoice.interfaces import LanguageModel
from edgevoice.kiosk.prompt import DONT_KNOW

if TYPE_CHECKING:
    from edgevoice.kiosk.grounding import Grounding, Kiosk

__all__ = ["MAX_HELD_SENTENCES", "GroundedModel"]

MAX_HELD_SENTENCES = 2
"""A reply held back for checking is cut after this many sentences (the responder speaks no more)."""
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


class GroundedModel:
    """A :class:`~edgevoice.interfaces.LanguageModel` that consults the :class:`Kiosk` before the model answers.

    The last message, if the visitor's, is grounded: an uncovered question gets :data:`DONT_KNOW` at once, a covered
    one goes to the model (with its retrieved facts in retrieval mode). Anything else (``prefill``,
    ``count_tokens``, ``forget_messages``, ``close``...) is the wrapped model's."""

    def __init__(self, llm: LanguageModel, kiosk: Kiosk) -> None:
        self.llm = llm
        self.kiosk = kiosk
        self.last_grounding: Grounding | None = None
        """The grounding of the last question answered (for benchmarks and logs)."""
        self.last_verdict = ""
        """Who answered the last question: ``"gate"`` (not covered), ``"unsupported"`` (the model's reply was
        replaced) or ``"model"``."""

    def _rewrite(self, messages: Sequence[ChatMessage]) -> tuple[list[ChatMessage], Grounding | None]:
        if not messages or messages[-1].role != "user":
            return list(messages), None
        grounding = self.kiosk.ground(messages[-1].content)
        turn = replace(messages[-1], content=self.kiosk.user_turn(messages[-1].content, grounding))
        return [*messages[:-1], turn], grounding

    def stream_reply(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Iterator[str]:
        rewritten, grounding = self._rewrite(messages)
        self.last_grounding = grounding
        self.last_verdict = "model"
        if grounding is not None and not grounding.known:
            self.last_verdict = "gate"
            yield DONT_KNOW
            return
        if grounding is not None and grounding.direct is not None:
            self.last_verdict = "direct"
            yield grounding.direct  # the operator's own words: right, speakable, and at once
            return
        stream = self.llm.stream_reply(rewritten, max_tokens=max_tokens)
        if grounding is None or grounding.coverage >= self.kiosk.verify_below:
            yield from stream
            return
        # A partly covered question: each sentence is held back until it is complete and checked, with what was
        # said before it, against the knowledge (empty pieces keep the caller's cancel checks going). A supported
        # sentence is spoken at once; the first unsupported one ends the reply ("I don't know" if nothing was said).
        question = messages[-1].content
        spoken, pending, sentences = "", "", 0
        try:
            for piece in stream:
                pending += piece
                yield ""
                while (end := _SENTENCE_END.search(pending)) is not None:
                    sentence, pending = pending[: end.end()], pending[end.end() :]
                    if not self.kiosk.supported(spoken + sentence, question):
                        self.last_verdict = "unsupported"
                        if not spoken:
                            yield DONT_KNOW
                        return
                    spoken += sentence
                    sentences += 1
                    yield sentence
                if sentences >= MAX_HELD_SENTENCES:
                    return
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if pending.strip() and sentences < MAX_HELD_SENTENCES:  # the reply ended without a full stop
            if self.kiosk.supported(spoken + pending, question):
                yield pending
                spoken += pending
            else:
                self.last_verdict = "unsupported"
        if not spoken.strip():
            self.last_verdict = "unsupported"
            yield DONT_KNOW

    def prefill(self, messages: Sequence[ChatMessage]) -> int:
        """The wrapped model's prefill, of the prompt exactly as :meth:`stream_reply` will send it."""
        prefill = getattr(self.llm, "prefill", None)
        rewritten, grounding = self._rewrite(messages)
        if prefill is None or (grounding is not None and (not grounding.known or grounding.direct is not None)):
            return 0  # a model without a cache, or a question that will not reach the model
        return int(prefill(rewritten))

    def __getattr__(self, name: str) -> Any:
        if name in ("llm", "kiosk") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.llm, name)
