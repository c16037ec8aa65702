"""The operator's venue facts, parsed into entries.

Three ways to write them, told apart by their content:

* **Question and answer per line** (the sample venue): ``Where are the toilets? On every floor, next to the lifts.``
* **Markdown**: a heading names a topic and every bullet, numbered item or paragraph under it is one entry
  (``## Prices`` / ``- Adults 14 euros``); ``Term: text`` and ``Q: ...`` / ``A: ...`` lines work too. Emphasis,
  links and code marks are dropped: the model must not learn markdown from its own prompt.
* **Markdown tables**: each row is one entry named by its first cell, the other cells answer under their column's
  heading (``| Visitor | Price |`` / ``| Adults | 14 euros |`` gives "Adults: Price: 14 euros").
* **TOML**: ``[[qa]]`` tables with ``question``, ``answer`` and optional ``keywords`` (words visitors use that the
  answer does not contain, e.g. ``["restroom", "loo"]``).

Each entry is compiled back into one line of the system prompt, and indexed for retrieval
(:mod:`edgevoice.kiosk.retrieval`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass

from edgevoice import data
from edgevoice.config import MAX_KNOWLEDGE_BYTES
from edgevoice.errors import ConfigError
from edgevoice.kiosk.knowledge_guard import MAX_ENTRY_CHARS, check_characters, check_facts

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
    "parse_knowledge",
    "venue_vocabulary",
]

log = logging.getLogger(__name__)

MAX_LINE_CHARS = 2000
"""The longest line (or TOML question or answer) a knowledge text may have: a fact is a sentence or two."""

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
_TOML_QA = re.compile(r"^[ \t]*\[\[[ \t]*qa[ \t]*\]\]", re.M)
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+(.*)$")
_Q_LINE = re.compile(r"^\s*(?:\*\*|__)?(?:Q|Question)\s*[:.](?:\*\*|__)?\s*(.*)$", re.I)
_A_LINE = re.compile(r"^\s*(?:\*\*|__)?(?:A|Answer)\s*[:.](?:\*\*|__)?\s*(.*)$", re.I)
_TERM = re.compile(r"^([^:?.!]{1,60}?):\s+(\S.*)$")
_QUESTION_FIRST = re.compile(r"^([^?]{3,200}\?)\s+(\S.*)$")
_MD_LINK = re.compile(r"\[([^\[\]]*)\]\([^()]*\)")
_EMPHASIS = re.compile(
    r"\*\*(?=[^\s*])([^*]+?)(?<=\S)\*\*|__(?=[^\s_])([^_]+?)(?<=\S)__|~~(?=[^\s~])([^~]+?)(?<=\S)~~"
    r"|\*(?=[^\s*])([^*]+?)(?<=\S)\*|_(?=[^\s_])([^_]+?)(?<=\S)_|`([^`]+)`"
)
_TABLE_RULE = re.compile(r"^\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?$")


def entry_key(question: str, answer: str) -> str:
    """The name :attr:`Entry.key` gives an entry with this question and answer (12 hex digits of a SHA-256)."""
    return hashlib.sha256(f"{question.strip()}\n{answer.strip()}".encode()).hexdigest()[:12]


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
        entries = _parse_toml(text) if _TOML_QA.search(text) else _parse_markdown(text)
        if len(entries) > MAX_ENTRIES:
            raise ConfigError(
                f"knowledge: {len(entries):,} entries; at most {MAX_ENTRIES:,} are allowed (keep the facts visitors "
                "ask about, or split the venue)"
            )
        unlike = check_facts([(e.question, e.answer) for e in entries])
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc.message.removeprefix('knowledge: ')}", code=exc.code) from None
    duplicates = unlike + duplicate_questions(entries)
    if not entries:
        duplicates = [
            'knowledge: no facts in it: every question will be answered "I don\'t know" (write one '
            "'Question? Answer.' per line; see docs/knowledge.md)"
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
    """One message per question (an entry's question ending in "?") that entries answer differently."""
    answers: dict[str, list[Entry]] = {}
    for entry in entries:
        if entry.question.endswith("?"):
            key = " ".join(re.findall(r"\w+", entry.question.casefold()))
            answers.setdefault(key, []).append(entry)
    messages = []
    for same in answers.values():
        different = list(dict.fromkeys(e.answer for e in same))
        if len(different) > 1:
            listed = " / ".join(repr(a) for a in different)
            messages.append(f"knowledge: {same[0].question!r} is answered {len(different)} ways: {listed}")
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
        extra = sorted(set(table) - {"question", "answer", "keywords", "asked"})
        if extra:
            raise ConfigError(f"{where}: unknown key {extra[0]!r} (allowed: question, answer, keywords, asked)")
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
            )
        )
    return entries


def _clean(text: str) -> str:
    text = _MD_LINK.sub(r"\1", text)
    for _ in range(3):  # nested emphasis (**a *b* c**) comes off from the inside out
        stripped = _EMPHASIS.sub(_emphasised, text)
        if stripped == text:
            break
        text = stripped
    return " ".join(text.split())


def _emphasised(match: re.Match[str]) -> str:
    return match.group(match.lastindex or 0)  # the one alternative that matched: its group is the last that did


def _parse_markdown(text: str) -> list[Entry]:
    entries: list[Entry] = []
    topic = ""
    paragraph: list[str] = []
    paragraph_from = [0]  # the line the paragraph starts on
    question: str | None = None

    def flush() -> None:
        if paragraph:
            joined = " ".join(paragraph)
            if len(joined) > MAX_ENTRY_CHARS:  # lines without a blank line, heading or bullet between: one entry
                first = paragraph_from[0]
                raise ConfigError(
                    f"knowledge: lines {first}-{first + len(paragraph) - 1} are one paragraph, one entry of "
                    f"{len(joined):,} characters; at most {MAX_ENTRY_CHARS:,} are allowed (a fact is a sentence or "
                    "two: write one 'Question? Answer.' per line, or a blank line between facts)",
                    code="knowledge_entry_too_long",
                )
            entries.append(_entry(topic, joined))
            paragraph.clear()

    in_code = False
    lines = text.splitlines()
    if lines and max(map(len, lines)) > MAX_LINE_CHARS:
        for number, raw in enumerate(lines, 1):
            _check_length(raw, f"line {number}")
    number = 0
    while number < len(lines):
        line = lines[number].strip()
        number += 1
        if not line:
            if paragraph:
                flush()
            continue
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and "|" in line and number < len(lines) and _is_table_rule(lines[number]):
            flush()
            end = number + 1
            while end < len(lines) and "|" in lines[end]:
                end += 1
            entries.extend(_table(topic, lines[number - 1 : end], number))
            number = end
            continue
        if in_code or not line or line.startswith(("```", "---", "<!--")):
            flush()
            continue
        if line.startswith("|"):
            raise ConfigError(
                f"knowledge: line {number} looks like a table row, but its table has no header row followed by a "
                "|---|---| rule; write the table in full or the facts as lines"
            )
        if m := _HEADING.match(line):
            flush()
            topic = _clean(m.group(2).rstrip().rstrip("#"))
            continue
        if m := _Q_LINE.match(line):
            flush()
            question = _clean(m.group(1))
            continue
        if question is not None and (m := _A_LINE.match(line)):
            entries.append(Entry(question, _clean(m.group(1))))
            question = None
            continue
        if m := _ITEM.match(line):
            flush()
            entries.append(_entry(topic, m.group(1)))
            continue
        if _QUESTION_FIRST.match(_clean(line)) or _TERM.match(_clean(line)):
            flush()
            entries.append(_entry(topic, line))
            continue
        if not paragraph:
            paragraph_from[0] = number
        paragraph.append(line)
    flush()
    return [e for e in entries if e.answer]


def _table(topic: str, rows: Sequence[str], first: int) -> list[Entry]:
    """A Markdown table (``rows[0]`` its header, ``rows[1]`` the rule) as one entry per row: the row's first cell
    names it, the other cells answer it under their column's heading."""
    header = _cells(rows[0])
    entries = []
    for offset, row in enumerate(rows[2:], 2):
        cells = _cells(row)
        if len(cells) != len(header):
            raise ConfigError(
                f"knowledge: line {first + offset}: a table row with {len(cells)} cells under a header of {len(header)}"
            )
        if len(cells) == 1:
            entries.append(Entry(topic, cells[0]))
            continue
        name = f"{topic}, {cells[0]}" if topic and cells[0] else cells[0] or topic
        answer = "; ".join(f"{h}: {c}" if h else c for h, c in zip(header[1:], cells[1:], strict=True) if c)
        entries.append(Entry(name, answer))
    return entries


def _is_table_rule(line: str) -> bool:
    return "|" in line and _TABLE_RULE.match(line.strip()) is not None


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row.removeprefix("|")
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [_clean(cell.replace("\\|", "|")) for cell in re.split(r"(?<!\\)\|", row)]


def _entry(topic: str, text: str) -> Entry:
    """One bullet or line: ``Question? Answer``, ``Term: text`` or plain text under the current heading."""
    text = _clean(text)
    if m := _QUESTION_FIRST.match(text):
        return Entry(m.group(1), m.group(2))
    if m := _TERM.match(text):
        term = m.group(1).strip()
        return Entry(f"{topic}, {term}" if topic else term, m.group(2))
    return Entry(topic, text)


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
