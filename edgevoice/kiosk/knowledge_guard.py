"""What makes a text the venue's knowledge, and not merely a file that can be read.

Every fact goes to the language model and may be spoken to any visitor, so ``knowledge_file = "/etc/passwd"`` must
not become one fact holding the whole file. A knowledge file is refused, with an error naming it and what is wrong,
when it

* lies under a system directory, or is not a regular file (:mod:`edgevoice.config.knowledge_path`, before a
  byte is read);
* holds control characters, a NUL byte above all: binary content (``binary``);
* parses into an entry longer than a fact can be: a file of one giant entry (``entry_too_long``);
* is not written for people: less than half its words are words or values (``not_text``).

A text none of whose entries has a question or a topic (a heading, ``Question? Answer.``, ``Term: text``) is
allowed but warned about: such plain text may be facts, or something else entirely. The directories and thresholds
are in ``edgevoice/data/kiosk/knowledge_limits.toml``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from edgevoice import data
from edgevoice.errors import ConfigError

__all__ = [
    "MAX_ENTRY_CHARS",
    "MIN_WORD_SHARE",
    "check_characters",
    "check_facts",
    "word_share",
]

_LIMITS = data.table("kiosk/knowledge_limits.toml")
MAX_ENTRY_CHARS: int = _LIMITS["max_entry_chars"]
"""The longest entry (its question and answer together), in characters."""
MIN_WORD_SHARE: float = _LIMITS["min_word_share"]
"""The least share of the entries' tokens that are words or values (:func:`word_share`)."""

_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
"""Control characters no text file holds (tab, line feed, vertical tab, form feed and carriage return are text)."""
_WORD = re.compile(r"[^\W\d_]+(?:['’.&/-][^\W\d_]+)*")
"""A word the quick way (letters joined by an apostrophe, a hyphen, a dot, an ampersand or a slash)."""
_JOINERS = "'’.&/-"
_SPACE = re.compile(r"[\s\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]+")
"""Spaces, and the CJK punctuation that ends a word where no space does."""
_VALUE = re.compile(r"[€$£¥]?[+-]?\d\S*")
"""A number, a time, a price, a date, a range: starts with a digit (after a currency sign)."""
_OPENING = "\"'“‘«([{<*_~¿¡"
_CLOSING = "\"'”’»)]}>*_~.,;:!?…।॥"


def check_characters(text: str) -> None:
    """Refuse a text with a control character (a NUL byte above all): binary content, not text. The
    :class:`ConfigError` (coded ``knowledge_binary``) names the first one's line."""
    if (found := _CONTROL.search(text)) is not None:
        line = text.count("\n", 0, found.start()) + 1
        raise ConfigError(
            f"knowledge: line {line} holds the control character {found.group()!r}: binary content, not text "
            "(write the facts in a text editor; see docs/knowledge.md)",
            code="knowledge_binary",
        )


def word_share(texts: Sequence[str]) -> tuple[float, int]:
    """The share of the texts' tokens (split at spaces and at CJK punctuation) that are words or values (a number,
    a time, a price: :data:`_VALUE`), once quotes and punctuation around them are taken off, and the number of
    tokens."""
    tokens = [t.lstrip(_OPENING).rstrip(_CLOSING) for text in texts for t in _SPACE.split(text)]
    tokens = [t for t in tokens if t]
    written = sum(1 for t in tokens if _is_word(t) or _VALUE.fullmatch(t))
    return (written / len(tokens) if tokens else 1.0), len(tokens)


def _is_word(token: str) -> bool:
    """Letters (with the combining marks of scripts such as Devanagari), joined by an apostrophe, a hyphen, a dot,
    an ampersand or a slash: "don't", "Wi-Fi", "e.g", "and/or", "नमस्ते"."""
    if _WORD.fullmatch(token):
        return True
    return (
        unicodedata.category(token[0])[0] == "L"
        and token[-1] not in _JOINERS
        and all(unicodedata.category(c)[0] in "LM" or c in _JOINERS for c in token)
    )


def check_facts(facts: Sequence[tuple[str, str]]) -> list[str]:
    """Refuse entries (each a question, possibly empty, and an answer) that cannot be a venue's facts: one longer
    than :data:`MAX_ENTRY_CHARS` (``knowledge_entry_too_long``), or too few words among their tokens
    (:data:`MIN_WORD_SHARE`, ``knowledge_not_text``). Returns the warnings: entries none of which has a question or
    a topic."""
    for number, (question, answer) in enumerate(facts, 1):
        size = len(question) + len(answer)
        if size > MAX_ENTRY_CHARS:
            start = " ".join((question or answer).split()[:6])
            raise ConfigError(
                f"knowledge: entry {number} ({start!r} ...) has {size:,} characters; at most {MAX_ENTRY_CHARS:,} are "
                "allowed: a fact is a sentence or two (write one 'Question? Answer.' per line; see docs/knowledge.md)",
                code="knowledge_entry_too_long",
            )
    share, tokens = word_share([t for fact in facts for t in fact])
    if share < MIN_WORD_SHARE:
        raise ConfigError(
            f"knowledge: only {share:.0%} of its {tokens:,} whitespace-separated pieces are words or numbers (at least "
            f"{MIN_WORD_SHARE:.0%} expected): it is not facts written for visitors (is it the right file? see "
            "docs/knowledge.md)",
            code="knowledge_not_text",
        )
    if facts and not any(question for question, _ in facts):
        return [
            f"knowledge: none of its {len(facts)} entries has a question or a topic (a heading, 'Question? Answer.', "
            "'Term: text'): is it the venue's knowledge? (see docs/knowledge.md)"
        ]
    return []
