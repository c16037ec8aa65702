"""The bounds every reply is held to on the kiosk itself, whatever the model does: characters, clauses, pieces and
seconds. Pure logic; the time comes from the injected :class:`~edgevoice.clock.Clock`.

A model's own limits cannot be trusted: a server may ignore ``max_tokens``, send a reply of thousands of clauses
without a full stop (``max_sentences`` counts only sentences) or one piece of megabytes. :class:`ReplyLimit` sits
between the model's stream and the clause chunker in the responder, the one place every reply passes on its way to
the voice (the grounded model's, the hedge's, a direct answer, the speculative reply's, ``converse``'s), and ends the
reply at the first bound it reaches. A cut reply ends cleanly: the clause that reaches the clause bound gets a full
stop; otherwise the reply ends after its last whole word, with a full stop (:func:`closed`). What it was cut by goes
into the turn record (:class:`~edgevoice.events.Cut`). The remote model's client bounds what it reads from the
network as well (:mod:`edgevoice.engines.openai_remote`), so a giant reply is never held whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from edgevoice.clock import Clock
from edgevoice.events import Cut, reply_chars
from edgevoice.reply.chunker import MAX_WORDS

__all__ = ["ReplyBounds", "ReplyLimit", "closed"]

_PIECE = re.compile(r"(\S+)(\s*)")
_ALNUM = re.compile(r"\w")
_CLOSERS = "\"')]}»”’"
_CLAUSE_MARKS = ",;:—–-"
_SENTENCE_MARKS = ".!?…"


@dataclass(frozen=True)
class ReplyBounds:
    """The most one reply may hold: ``max_tokens`` pieces from the model (``[llm] max_tokens``) and
    :func:`~edgevoice.events.reply_chars` characters for them, ``max_clauses`` clauses of any ending (``[kiosk]
    max_clauses``), read within ``max_seconds`` (``[kiosk] max_reply_s``). The defaults are the configuration's."""

    max_tokens: int = 80
    max_clauses: int = 8
    max_seconds: float = 20.0

    @property
    def max_chars(self) -> int:
        return reply_chars(self.max_tokens)


def closed(text: str) -> str:
    """``text`` ending as a sentence does: a trailing clause mark becomes a full stop, one is added after a word."""
    text = text.rstrip()
    core = text.rstrip(_CLOSERS)
    if not core or not _ALNUM.search(core):
        return ""
    if core.endswith(tuple(_SENTENCE_MARKS)):
        return text
    closers = text[len(core) :]
    return core.rstrip(_CLAUSE_MARKS).rstrip() + "." + closers


class ReplyLimit:
    """One reply's text held to its :class:`ReplyBounds` as it streams in.

    :meth:`feed` takes each piece of the model's and returns what of it may go on to the chunker: whole words with
    the space after them (the last word of a piece is held back until the next shows where it ends, which the chunker
    needs to see too). Once a bound is reached :attr:`cut` says which and nothing more passes: the caller stops
    reading the model and ends what it holds with :func:`closed`. At the end of a reply that was not cut,
    :meth:`finish` gives the word held back.

    A clause ends at any mark (``,`` ``;`` ``:`` a dash, ``.`` ``!`` ``?``) or line break followed by a space, or after
    the chunker's :data:`~edgevoice.reply.chunker.MAX_WORDS` words without one (where it cuts a piece too).
    The clause that reaches ``max_clauses`` passes with a full stop; any word after it cuts the reply."""

    def __init__(self, bounds: ReplyBounds, clock: Clock) -> None:
        self.bounds, self.clock = bounds, clock
        self.started = clock.now()
        self.cut: Cut | None = None
        self.chars = 0
        """Characters read from the model (up to the bound; the rest of a longer piece is never looked at)."""
        self.clauses = 0
        self.pieces = 0
        self._words = 0  # words since the last clause ended
        self._held = ""
        self._full = False  # the last clause allowed has passed

    def feed(self, piece: str) -> str:
        if self.cut is not None:
            return ""
        if piece:
            self.pieces += 1
        if self.pieces > self.bounds.max_tokens:
            return self._stop(Cut.TOKENS)
        if self.clock.now() - self.started > self.bounds.max_seconds:
            return self._stop(Cut.SECONDS)
        room = self.bounds.max_chars - self.chars
        text = piece[:room]
        self.chars += len(text)
        out = self._words_of(self._held + text, end=False)
        if len(piece) > room and self.cut is None:
            self._stop(Cut.CHARS)  # the word held back may be cut mid-way: dropped
        return out

    def finish(self) -> str:
        """The rest of a reply that ended by itself (the word held back); nothing after a cut."""
        if self.cut is not None:
            return ""
        return self._words_of(self._held, end=True)

    def _stop(self, cut: Cut) -> str:
        self.cut, self._held = cut, ""
        return ""

    def _words_of(self, text: str, *, end: bool) -> str:
        """The whole words of ``text`` that may pass, counting clauses; holds back its last word unless ``end``."""
        self._held = ""
        lead = len(text) - len(text.lstrip())
        out = [text[:lead]] if not self._full else []
        for m in _PIECE.finditer(text, lead):
            word, space = m.group(1), m.group(2)
            if not space and not end:
                self._held = word
                break
            if self._full:
                self._stop(Cut.CLAUSES)
                break
            if _ALNUM.search(word):
                self._words += 1
            if self._words and (_ends_clause(word, space) or self._words >= MAX_WORDS):
                self.clauses += 1
                self._words = 0
                if self.clauses >= self.bounds.max_clauses:
                    self._full = True
                    last = closed(word)
                    if not last:  # a lone dash ended it: the full stop goes after the word before
                        out.append(closed("".join(out)) + space)
                        out[:-1] = []
                        continue
                    word = last
            out.append(word + space)
        return "".join(out)


def _ends_clause(word: str, space: str) -> bool:
    if "\n" in space:
        return True
    core = word.rstrip(_CLOSERS)
    return core.endswith(tuple(_CLAUSE_MARKS + _SENTENCE_MARKS)) or word in ("—", "–", "-")
