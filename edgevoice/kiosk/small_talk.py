"""Small talk: greetings, thanks, "can you hear me?", "who are you?", "what can you do?", "how are you?", goodbye.

Nothing in the knowledge answers these, and a small model asked them with the knowledge in its prompt declines
("I don't know that, please ask at the desk."), so the kiosk answers them itself, at once, with a short reply in
the persona. The kinds, their trigger patterns and their replies are data (``edgevoice/data/en/small_talk.toml``,
or an operator's own file of the same form); this module holds the mechanism: a question is small talk when,
once the patterns of every kind are taken out, nothing is left but stop words and the persona's own words. A
question that carries small talk and something more ("hi, where is the café?") is a question.
"""

from __future__ import annotations

import re
import string
import tomllib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgevoice import data
from edgevoice.errors import ConfigError
from edgevoice.kiosk.knowledge import venue_vocabulary
from edgevoice.kiosk.retrieval import terms
from edgevoice.words import words

__all__ = ["DEFAULT_SMALL_TALK", "SmallTalk", "SmallTalkKind"]

DEFAULT_SMALL_TALK = "en/small_talk.toml"
"""The packaged phrases (``edgevoice/data/en/small_talk.toml``)."""


@dataclass(frozen=True, slots=True)
class SmallTalkKind:
    """One kind of small talk: what triggers it and what the kiosk says to it."""

    name: str
    patterns: tuple[re.Pattern[str], ...]
    replies: tuple[str, ...]


def _placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


class SmallTalk:
    """The small-talk kinds of one persona: :meth:`reply` says whether a question is small talk and what to say."""

    def __init__(self, table: Mapping[str, Any], persona: str, *, source: str = DEFAULT_SMALL_TALK) -> None:
        """``table``: the parsed file (see its header); ``persona``: the kiosk's persona, whose name, role and
        venue fill the replies' placeholders and whose words a small-talk question may carry ("hello Otto")."""
        try:
            pattern = re.compile(str(table.get("persona", {}).get("pattern", "(?!)")))
            kinds = [
                SmallTalkKind(
                    name,
                    tuple(re.compile(rf"(?<!\S){p}(?!\S)") for p in spec["patterns"]),
                    tuple(str(r) for r in spec["replies"]),
                )
                for name, spec in table["kinds"].items()
            ]
        except (KeyError, TypeError, AttributeError, re.error) as exc:
            raise ConfigError(f"{source}: bad small-talk table ({exc!r}); see its header for the form") from exc
        self.fields = persona_fields(persona, pattern)
        """What fills the replies' placeholders (``name``, ``role``, ``venue``), as far as the persona says."""
        self.kinds: tuple[SmallTalkKind, ...] = tuple(kinds)
        for kind in self.kinds:
            if not kind.patterns or not any(_placeholders(r) <= {"name", "role", "venue"} for r in kind.replies):
                raise ConfigError(f"{source}: small-talk kind {kind.name!r} needs patterns and replies")
            if not any(not _placeholders(r) for r in kind.replies):
                raise ConfigError(f"{source}: small-talk kind {kind.name!r} needs a reply without placeholders")
        self.persona_terms = frozenset(terms(persona))

    @classmethod
    def load(cls, persona: str, path: str | Path = "") -> SmallTalk:
        """The small talk of ``path`` (a TOML file; empty: the packaged phrases) for ``persona``."""
        if not path:
            return cls(data.table(DEFAULT_SMALL_TALK), persona)
        try:
            table = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"small-talk file {path}: {exc}") from exc
        return cls(table, persona, source=str(path))

    def kind_of(self, question: str) -> SmallTalkKind | None:
        """The kind of small talk ``question`` is (the first in the file's order that it carries), or None when it
        asks something more, or carries no small talk at all."""
        rest = " ".join(words(question, hyphens=False))
        found: list[SmallTalkKind] = []
        for kind in self.kinds:
            for pattern in kind.patterns:
                rest, n = pattern.subn(" ", rest)
                if n and kind not in found:
                    found.append(kind)
        if not found or set(terms(rest)) - self.persona_terms:
            return None
        return min(found, key=self.kinds.index)

    def reply(self, question: str) -> str | None:
        """The reply to ``question`` when it is small talk, else None: one of its kind's replies that the persona
        fills, those with placeholders first; the same words get the same reply."""
        kind = self.kind_of(question)
        if kind is None:
            return None
        usable = [r for r in kind.replies if _placeholders(r) <= self.fields.keys()]
        usable = [r for r in usable if _placeholders(r)] or usable  # the persona's own words when it has them
        pick = zlib.crc32(" ".join(words(question)).encode()) % len(usable)
        return usable[pick].format(**self.fields)


def persona_fields(persona: str, pattern: re.Pattern[str]) -> dict[str, str]:
    """``name`` and ``role`` from the persona's text by ``pattern``'s named groups, and ``venue``: the first of the
    venue's own names in the role (with its "the" when the persona writes one). Only what was found."""
    found = pattern.search(persona)
    if found is None:
        return {}
    fields = {k: v.strip() for k, v in found.groupdict().items() if k in ("name", "role") and v and v.strip()}
    role = fields.get("role", "")
    names = [n for n in venue_vocabulary([], also=[role]) if n != fields.get("name")]
    if names:
        venue = names[0]
        article = re.search(rf"\b(the)\s+{re.escape(venue)}", role, re.IGNORECASE)
        fields["venue"] = f"{article.group(1)} {venue}" if article else venue
    return fields
