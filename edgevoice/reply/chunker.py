"""Cutting a token stream into speakable pieces as soon as each piece is complete. Pure logic."""

from __future__ import annotations

import re

from edgevoice.errors import ConfigError

_TOKEN = re.compile(r"[^\s—]*—|[^\s—]+")
_ALNUM = re.compile(r"\w")
_CLOSERS = "\"')]}»”’"
_OPENERS = "\"'([{«“‘"
_DASHES = frozenset({"—", "–", "-"})
# Abbreviations, lower case without the final dot. NEVER: a sentence does not end after them ("e.g. the", "Dr. Li").
# MAY: they end one only when a capital follows ("at 10 a.m. Tickets"). NUMBERED: not before a digit ("No. 5").
_NEVER_END = frozenset({"e.g", "i.e", "cf", "mr", "mrs", "ms", "dr", "prof", "st", "vs", "approx", "jr", "sr", "mt"})
_MAY_END = frozenset({"a.m", "p.m", "etc"})
_NUMBERED = frozenset({"no", "nr", "nos"})
_DOTTED = re.compile(r"[a-z](?:\.[a-z])+")  # u.s, a.m
# A forced cut (no punctuation yet) avoids ending on one of these, for up to _SLACK more words.
# fmt: off
_WEAK = frozenset({
    "a", "an", "the", "of", "to", "in", "on", "at", "for", "with", "by", "from", "into", "onto", "about", "and", "or",
    "but", "nor", "so", "as", "than", "that", "if", "my", "your", "our", "their", "its", "his", "her", "this", "these",
    "those", "very", "not",
})
# fmt: on
_SLACK = 3
MAX_WORDS = 20
"""A piece without a clause mark is cut after this many words (and a few more, to avoid ending on a weak word)."""


class ClauseChunker:
    """Feed an LLM's streamed text; get speakable pieces back as early as they can be spoken well.

    The first piece ends at the first clause mark (``,`` ``;`` ``:`` a dash) or sentence end, or after
    ``first_max_words`` words when no punctuation has come, so speech starts after a few tokens. Later pieces are
    whole sentences, or clauses once they have ``min_words`` words, or are cut after ``max_words`` words. A mark
    only counts when a space follows it, so "9.50", "10:30" and "1,200" stay whole; "e.g." and "a.m." are no
    sentence ends (see the abbreviation lists above). A line break ends a sentence.

    ``feed(text, hurry=True)``: the speaker is about to run dry (little audio left queued), so the next piece is cut
    at its first clause mark or after ``hurry_max_words`` words, rather than waiting for a long clause or the
    sentence's end.
    """

    def __init__(
        self, *, first_max_words: int = 6, min_words: int = 4, max_words: int = MAX_WORDS, hurry_max_words: int = 4
    ) -> None:
        for key, value in (
            ("first_max_words", first_max_words),
            ("min_words", min_words),
            ("max_words", max_words),
            ("hurry_max_words", hurry_max_words),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 200:
                raise ConfigError(f"{key} = {value!r}: must be a whole number between 1 and 200")
        if max_words < min_words:
            raise ConfigError(f"max_words = {max_words!r}: must be at least min_words ({min_words})")
        self.first_max_words, self.min_words, self.max_words = first_max_words, min_words, max_words
        self.hurry_max_words = hurry_max_words
        self._pending = ""
        self._started = False  # whether the first piece of this reply has gone out

    def feed(self, text: str, *, hurry: bool = False) -> list[str]:
        self._pending += text
        out: list[str] = []
        while (cut := self._next_cut(hurry)) is not None:
            out.append(self._pending[:cut].strip())
            self._pending = self._pending[cut:].lstrip()
            self._started = True
        return out

    def flush(self) -> str:
        """The unfinished remainder; the chunker is then ready for the next reply."""
        rest, self._pending, self._started = self._pending.strip(), "", False
        return rest

    @property
    def pending(self) -> str:
        return self._pending

    def _next_cut(self, hurry: bool = False) -> int | None:
        """Where the next piece ends in the pending text, or None until more text has come."""
        early = hurry or not self._started
        words = 0
        text = self._pending
        for m in _TOKEN.finditer(text):
            token, end = m.group(), m.end()
            if end == len(text):
                return None  # the token may go on ("9." could become "9.50")
            kind = _boundary(token, text[end:])
            if kind is None:
                return None
            if _ALNUM.search(token):
                words += 1
            elif not words:
                continue  # a piece needs a word: "..." or "—" alone is not one
            if kind == "sentence" or (kind == "clause" and (early or words >= self.min_words)):
                return end
            limit = self.max_words if not early else self.first_max_words if not self._started else self.hurry_max_words
            weak = token.lower().strip(_OPENERS + _CLOSERS) in _WEAK
            if words >= limit + _SLACK or (words >= limit and not weak):
                return end
        return None


def _boundary(token: str, after: str) -> str | None:
    """What ends after ``token``: "sentence", "clause", "word", or None when the next word must be seen first."""
    space = after[: len(after) - len(after.lstrip())]
    if "\n" in space:
        return "sentence"
    if token in _DASHES or token.endswith("—"):
        return "clause"
    core = token.rstrip(_CLOSERS)
    if core.endswith(("!", "?")):
        return "sentence"
    if core.endswith((",", ";", ":")):
        return "clause"
    if not core.endswith("."):
        return "word"
    stem = core.lstrip(_OPENERS).lower()[:-1]
    never = stem in _NEVER_END or (len(stem) == 1 and stem.isalpha())  # an initial: "J. Smith"
    if never:
        return "word"
    if stem in _MAY_END or stem in _NUMBERED or _DOTTED.fullmatch(stem):
        following = after.lstrip()[:1]
        if not following:
            return None
        if stem in _NUMBERED:
            return "word" if following.isdigit() else "sentence"
        return "sentence" if following.isupper() else "word"
    return "sentence"
