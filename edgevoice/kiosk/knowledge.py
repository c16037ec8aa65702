"""The operator's venue facts, parsed into entries.

Three ways to write them, told apart by their content:

* **Question and answer per line** (the sample venue): ``Where are the toilets? On every floor, next to the lifts.``
* **Markdown**: a heading names a topic and every bullet, numbered item or paragraph under it is one entry
  (``## Prices`` / ``- Day pass 20 euros``); ``Term: text`` and ``Q: ...`` / ``A: ...`` lines work too. Emphasis,
  links and code marks are dropped: the model must not learn markdown from its own prompt.
* **Markdown tables**: each row is one entry named by its first cell, the other cells answer under their column's
  heading (``| Item | Price |`` / ``| Day pass | 20 euros |`` gives "Day pass: Price: 20 euros").
* **TOML**: ``[[qa]]`` tables with ``question``, ``answer`` and optional ``keywords`` (words visitors use that the
  answer does not contain, e.g. ``["restroom", "loo"]``) and ``asked`` (other ways visitors ask it).

In the first three, a line ``Also asked: is there a cash point? | where can I get cash?`` right after an entry gives
its other ways of asking (:mod:`edgevoice.kiosk.knowledge_markdown`, which reads them).

Each entry is compiled back into one line of the system prompt, and indexed for retrieval
(:mod:`edgevoice.kiosk.retrieval`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from edgevoice import data
from edgevoice.config import MAX_KNOWLEDGE_BYTES
from edgevoice.errors import ConfigError
from edgevoice.kiosk.knowledge_guard import check_characters, check_facts
from edgevoice.kiosk.knowledge_markdown import ALSO_ASKED, MAX_LINE_CHARS, read_markdown
from edgevoice.kiosk.knowledge_markdown import clean_markup as _clean

__all__ = [
    "MAX_ENTRIES",
    "MAX_KNOWLEDGE_BYTES",
    "MAX_LINE_CHARS",
    "Entry",
    "compile_knowledge",
    "duplicate_questions",
    "entry_key",
    "estimate_tokens",
    "example_turns",
    "is_toml",
    "parse_knowledge",
    "venue_vocabulary",
    "with_asked",
]

log = logging.getLogger(__name__)

MAX_ENTRIES = 10_000
"""The most entries a knowledge text may have. Each is embedded once (then kept in the embedding cache): 10,000
entries take several minutes on two cores at the first start, about 45 MB of vectors, and grounding a question
over them stays within a few tens of milliseconds (``python -m edgevoice.bench.knowledge_size``)."""

MAX_DUPLICATE_WARNINGS = 10
"""At most this many conflicting duplicates are listed one by one; the rest are counted."""

CHARS_PER_TOKEN = 4.0
"""English text in the Qwen2.5 tokenizer: about four characters a token."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One fact: the question or topic it answers (may be empty), the answer, extra words visitors may use."""

    question: str
    answer: str
    keywords: tuple[str, ...] = ()
    asked: tuple[str, ...] = ()
    """Other ways visitors ask this entry (the operator's review, or compiled when the knowledge was saved)."""
    action: str = ""
    """The action the kiosk takes when it reads this entry out (TOML ``action = "staff_call"``; docs/actions.md)."""

    @property
    def key(self) -> str:
        """A stable name for the entry: its question and answer, not the ways of asking attached to it."""
        return entry_key(self.question, self.answer)

    def line(self) -> str:
        """The entry as one line of the prompt."""
        if not self.question:
            return self.answer
        if self.question.rstrip().endswith(("?", ".", "!", ":")):
            return f"{self.question} {self.answer}"
        return f"{self.question}: {self.answer}"

    def search_text(self) -> str:
        """What retrieval matches a question against."""
        return " ".join((self.question, self.answer, *self.keywords))


# Every pattern below runs in time linear in its line: no two quantifiers can take the same characters.
_ACTION = re.compile(r"[a-z][a-z0-9_]{0,39}")
_TOML_QA = re.compile(r"^[ \t]*\[\[[ \t]*qa[ \t]*\]\]", re.M)


def entry_key(question: str, answer: str) -> str:
    """The name :attr:`Entry.key` gives an entry with this question and answer (12 hex digits of a SHA-256)."""
    return hashlib.sha256(f"{question.strip()}\n{answer.strip()}".encode()).hexdigest()[:12]


def is_toml(text: str) -> bool:
    """Whether a knowledge text is written as TOML ``[[qa]]`` tables (else it is Markdown or a fact a line)."""
    return _TOML_QA.search(text) is not None


def parse_knowledge(text: str, *, source: str = "knowledge", warnings: list[str] | None = None) -> list[Entry]:
    """The entries of a knowledge text (TOML ``[[qa]]``, Markdown or one question-and-answer per line).

    A text that cannot be read as entries raises a :class:`ConfigError` naming ``source`` (where the text comes
    from) and the line. A text without a single fact, and a question answered twice, differently, are warnings:
    appended to ``warnings`` when given, else logged. A text over :data:`MAX_KNOWLEDGE_BYTES` or :data:`MAX_ENTRIES`
    entries is refused, the limit named."""
    try:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_KNOWLEDGE_BYTES:
            raise ConfigError(
                f"knowledge: {size:,} bytes; at most {MAX_KNOWLEDGE_BYTES:,} are allowed (keep the facts visitors ask "
                "about, or split the venue)"
            )
        check_characters(text)
        notes: list[str] = []
        entries = _parse_toml(text) if is_toml(text) else _parse_markdown(text, notes)
        if len(entries) > MAX_ENTRIES:
            raise ConfigError(
                f"knowledge: {len(entries):,} entries; at most {MAX_ENTRIES:,} are allowed (keep the facts visitors "
                "ask about, or split the venue)"
            )
        unlike = check_facts([(e.question, e.answer) for e in entries])
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc.message.removeprefix('knowledge: ')}", code=exc.code) from None
    duplicates = [*notes, *unlike, *duplicate_questions(entries)]  # notes: unattached "Also asked" lines
    if not entries:
        duplicates = [
            *notes,
            'knowledge: no facts in it: every question will be answered "I don\'t know" (write one '
            "'Question? Answer.' per line; see docs/knowledge.md)",
        ]
    if len(duplicates) > MAX_DUPLICATE_WARNINGS:
        more = len(duplicates) - MAX_DUPLICATE_WARNINGS
        duplicates = [*duplicates[:MAX_DUPLICATE_WARNINGS], f"knowledge: {more} more questions are answered two ways"]
    for warning in duplicates:
        warning = f"{source}: {warning.removeprefix('knowledge: ')}"
        if warnings is None:
            log.warning("%s", warning)
        else:
            warnings.append(warning)
    return entries


def duplicate_questions(entries: Sequence[Entry]) -> list[str]:
    """One message per question (an entry's question ending in "?", or one of its other ways of asking) that entries
    answer differently."""
    answers: dict[str, tuple[str, list[Entry]]] = {}
    for entry in entries:
        own = (entry.question,) if entry.question.endswith("?") else ()
        for question in (*own, *entry.asked):
            key = " ".join(re.findall(r"\w+", question.casefold()))
            answers.setdefault(key, (question, []))[1].append(entry)
    messages = []
    for question, same in answers.values():
        different = list(dict.fromkeys(e.answer for e in same))
        if len(different) > 1:
            listed = " / ".join(repr(a) for a in different)
            messages.append(f"knowledge: {question!r} is answered {len(different)} ways: {listed}")
    return messages


def _check_length(text: str, where: str) -> None:
    if len(text) > MAX_LINE_CHARS:
        raise ConfigError(
            f"knowledge: {where} has {len(text)} characters; at most {MAX_LINE_CHARS} are allowed (split it)"
        )


def _parse_toml(text: str) -> list[Entry]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"knowledge: not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - {"qa"})
    if unknown:
        raise ConfigError(f"knowledge: unknown key {unknown[0]!r} (allowed at the top: [[qa]] tables)")
    entries = []
    for number, table in enumerate(data["qa"], 1):
        where = f"knowledge: [[qa]] number {number}"
        extra = sorted(set(table) - {"question", "answer", "keywords", "asked", "action"})
        if extra:
            raise ConfigError(f"{where}: unknown key {extra[0]!r} (allowed: question, answer, keywords, asked, action)")
        action = table.get("action", "")
        if not isinstance(action, str) or (action and not _ACTION.fullmatch(action)):
            raise ConfigError(f"{where}: action must be an action's name (lower-case letters, digits and _)")
        question, answer = table.get("question", ""), table.get("answer")
        keywords, asked = table.get("keywords", []), table.get("asked", [])
        if not isinstance(answer, str) or not answer.strip():
            raise ConfigError(f"{where}: needs an answer (a non-empty string)")
        if not isinstance(question, str):
            raise ConfigError(f"{where}: question must be a string")
        if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
            raise ConfigError(f"{where}: keywords must be a list of strings")
        if not isinstance(asked, list) or not all(isinstance(a, str) for a in asked):
            raise ConfigError(f"{where}: asked must be a list of strings (other ways visitors ask it)")
        for value in (question, answer, *keywords, *asked):
            _check_length(value, where.removeprefix("knowledge: "))
        entries.append(
            Entry(
                _clean(question),
                _clean(answer),
                tuple(k.strip() for k in keywords if k.strip()),
                tuple(a.strip() for a in asked if a.strip()),
                action,
            )
        )
    return entries


def _parse_markdown(text: str, notes: list[str]) -> list[Entry]:
    unattached: list[int] = []
    blocks = read_markdown(text, unattached)
    if unattached:
        listed = ", ".join(map(str, unattached[:MAX_DUPLICATE_WARNINGS]))
        more = (
            f" and {len(unattached) - MAX_DUPLICATE_WARNINGS} more" if len(unattached) > MAX_DUPLICATE_WARNINGS else ""
        )
        notes.append(
            f"knowledge: line{'s' if len(unattached) > 1 else ''} {listed}{more}: {ALSO_ASKED[0]!r} with no entry "
            "before it (a heading between, or the start of the file) is left out; write it on the line after the "
            "entry it belongs to"
        )
    return [Entry(b.question, b.answer, asked=tuple(b.asked)) for b in blocks if b.answer]


def compile_knowledge(entries: Sequence[Entry]) -> str:
    """The entries as prompt text, one per line."""
    return "\n".join(entry.line() for entry in entries)


def estimate_tokens(text: str) -> int:
    """About how many language-model tokens ``text`` takes (no tokenizer needed: used before a model is loaded)."""
    return round(len(text) / CHARS_PER_TOKEN)


_NAME = re.compile(
    r"(?:\b[A-Z][\w'-]*[a-z][\w'-]*|\b[A-Z]{2,}\b)(?:\s+(?:(?:of|the|de|du|van|von|and)\s+)*[A-Z][\w'-]+)*"
)
_NOT_NAMES = frozenset(data.words("en/not_names.txt"))
"""Sentence starts, days and months: capitalised, but not names (``edgevoice/data/en/not_names.txt``)."""


def venue_vocabulary(entries: Sequence[Entry], *, also: Sequence[str] = (), limit: int = 30) -> list[str]:
    """The venue's own names (capitalised words and phrases that are not sentence starts, days or months), in order
    of first appearance in ``also`` (the persona, say) and the entries: the words a general recognizer gets wrong
    (a British spelling written as the American one)."""
    seen: dict[str, None] = {}
    texts = [*also, *(t for e in entries for t in (e.question, e.answer, *e.keywords))]
    for text in texts:
        for m in _NAME.finditer(text.replace('"', " ")):
            words = m.group(0).split()
            while words and words[0] in _NOT_NAMES:
                words = words[1:]
            if words:
                seen.setdefault(" ".join(words), None)
    return list(seen)[:limit]


def example_turns(entries: Sequence[Entry], n: int) -> list[tuple[str, str]]:
    """``n`` example turns from the knowledge, spread over it: entries written as a question, answered with their
    own answer (so a small model sees that a covered question is answered from the facts, not declined)."""
    asked = [e for e in entries if e.question.endswith("?") and len(e.answer) <= 160]
    if n <= 0 or not asked:
        return []
    step = len(asked) / min(n, len(asked))
    return [(asked[int(i * step)].question, asked[int(i * step)].answer) for i in range(min(n, len(asked)))]


def with_asked(entries: Sequence[Entry], asked: Mapping[str, Sequence[str]]) -> list[Entry]:
    """``entries`` with the questions ``asked`` gives for each one's :attr:`Entry.key` added to its
    :attr:`Entry.asked` (those it has already left out)."""
    out = []
    for entry in entries:
        more = tuple(q for q in dict.fromkeys(asked.get(entry.key, ())) if q not in entry.asked)
        out.append(replace(entry, asked=entry.asked + more) if more else entry)
    return out
