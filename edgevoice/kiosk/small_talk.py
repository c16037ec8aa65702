"""Small talk: greetings, thanks, "can you hear me?", "who are you?", "what can you do?", "how are you?", goodbye.

Nothing in the knowledge answers these, and a small model asked them with the knowledge in its prompt declines
("I don't know that, please ask at the desk."), so the kiosk answers them itself, at once, with a short reply in
the persona. The kinds, their trigger patterns and their replies are data (``edgevoice/data/en/small_talk.toml``,
or an operator's own file of the same form); this module holds the mechanism: a question is small talk when,
once the patterns of every kind are taken out, nothing is left but stop words and the persona's own words.

Patterns miss rewordings ("is anybody listening to me?"), so with a sentence encoder a question no pattern takes
whole is small talk by meaning: close to one kind's examples and clearly closer to them than to the venue's own
entries and to the examples of what visitors ask anywhere ("where are the toilets?"). A question that carries small
talk and something more ("hi, where is the café?") is a question: its meaning lies with the entry it asks about.
"""

from __future__ import annotations

import re
import string
import tomllib
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from edgevoice import data
from edgevoice.errors import ConfigError
from edgevoice.kiosk.knowledge import venue_vocabulary
from edgevoice.kiosk.retrieval import terms
from edgevoice.words import words

__all__ = ["DEFAULT_SMALL_TALK", "SmallTalk", "SmallTalkKind"]

DEFAULT_SMALL_TALK = "en/small_talk.toml"
"""The packaged phrases (``edgevoice/data/en/small_talk.toml``)."""

Floats = npt.NDArray[np.float32]
Embed = Callable[[Sequence[str]], Floats]
"""Texts to L2-normalised sentence vectors (the kiosk's encoder)."""


@dataclass(frozen=True, slots=True)
class SmallTalkKind:
    """One kind of small talk: what triggers it and what the kiosk says to it."""

    name: str
    patterns: tuple[re.Pattern[str], ...]
    replies: tuple[str, ...]
    examples: tuple[str, ...] = ()
    """What visitors say for this kind, for the match by meaning."""


@dataclass(frozen=True, slots=True)
class MeaningRule:
    """When a question no pattern takes whole is small talk by meaning (the file's ``[meaning]``)."""

    min_similarity: float = 0.5
    """The least cosine with the nearest example of a kind."""
    margin: float = 0.1
    """By how much that cosine beats the nearest example of a question and the closest knowledge entry."""


def _placeholders(template: str) -> set[str]:
    return {field for _, field, _, _ in string.Formatter().parse(template) if field}


class SmallTalk:
    """The small-talk kinds of one persona: :meth:`reply` says whether a question is small talk and what to say."""

    def __init__(
        self, table: Mapping[str, Any], persona: str, *, source: str = DEFAULT_SMALL_TALK, embed: Embed | None = None
    ) -> None:
        """``table``: the parsed file (see its header); ``persona``: the kiosk's persona, whose name, role and
        venue fill the replies' placeholders and whose words a small-talk question may carry ("hello Sam").
        ``embed``: the kiosk's sentence encoder, for small talk by meaning (None: the patterns alone decide)."""
        try:
            pattern = re.compile(str(table.get("persona", {}).get("pattern", "(?!)")))
            kinds = [
                SmallTalkKind(
                    name,
                    tuple(re.compile(rf"(?<!\S){p}(?!\S)") for p in spec["patterns"]),
                    tuple(str(r) for r in spec["replies"]),
                    tuple(str(e) for e in spec.get("examples", ())),
                )
                for name, spec in table["kinds"].items()
            ]
            questions = tuple(str(e) for e in table.get("questions", {}).get("examples", ()))
            meaning = table.get("meaning", {})
            self.rule = MeaningRule(float(meaning.get("min_similarity", 0.5)), float(meaning.get("margin", 0.1)))
        except (KeyError, TypeError, AttributeError, ValueError, re.error) as exc:
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
        examples = [(kind, e) for kind in self.kinds for e in kind.examples]
        self._example_kinds: tuple[SmallTalkKind, ...] = tuple(kind for kind, _ in examples)
        self._examples: Floats | None = None
        """The kinds' examples, then the questions' examples, embedded (None: no encoder or no examples)."""
        if embed is not None and examples:
            self._examples = np.ascontiguousarray(embed([e for _, e in examples] + list(questions)), dtype=np.float32)

    @classmethod
    def load(cls, persona: str, path: str | Path = "", *, embed: Embed | None = None) -> SmallTalk:
        """The small talk of ``path`` (a TOML file; empty: the packaged phrases) for ``persona``."""
        if not path:
            return cls(data.table(DEFAULT_SMALL_TALK), persona, embed=embed)
        try:
            table = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"small-talk file {path}: {exc}") from exc
        return cls(table, persona, source=str(path), embed=embed)

    @property
    def by_meaning(self) -> bool:
        """Whether small talk is also found by meaning (an encoder was given and the kinds have examples)."""
        return self._examples is not None

    def kind_of(self, question: str, vector: Floats | None = None, nearest_entry: float = -1.0) -> SmallTalkKind | None:
        """The kind of small talk ``question`` is, or None when it asks something more, or carries no small talk.

        When the patterns take it whole, the first kind in the file's order that it carries; else, given the
        question's ``vector`` (embedded by the same encoder), the kind of its nearest example when that example is
        close (:class:`MeaningRule`) and clearly closer than every example of a question and than ``nearest_entry``
        (the question's cosine with its closest knowledge entry)."""
        found = self._by_patterns(question)
        if found is not None or vector is None or self._examples is None:
            return found
        cosines = np.einsum("ij,j->i", self._examples, vector)  # no BLAS threads to wait for (semantic.py)
        n = len(self._example_kinds)
        best = int(np.argmax(cosines[:n]))
        rival = max(float(cosines[n:].max(initial=-1.0)), nearest_entry)
        similarity = float(cosines[best])
        if similarity < self.rule.min_similarity or similarity - rival < self.rule.margin:
            return None
        return self._example_kinds[best]

    def _by_patterns(self, question: str) -> SmallTalkKind | None:
        """The first kind (in the file's order) ``question`` carries when nothing but stop words and the persona's
        words is left once every kind's patterns are taken out."""
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

    def reply(self, question: str, vector: Floats | None = None, nearest_entry: float = -1.0) -> str | None:
        """The reply to ``question`` when it is small talk (:meth:`kind_of`), else None: one of its kind's replies
        that the persona fills, those with placeholders first; the same words get the same reply."""
        kind = self.kind_of(question, vector, nearest_entry)
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
