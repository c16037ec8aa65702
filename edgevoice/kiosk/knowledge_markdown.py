"""The Markdown and line-per-fact knowledge formats: which lines make each entry, and the other ways of asking it.

A heading names a topic and every bullet, numbered item or paragraph under it is one entry; ``Question? Answer.``,
``Term: text`` and ``Q: ...`` / ``A: ...`` lines are entries too, and a table gives one entry per row. A line that
opens with a lead-in of ``edgevoice/data/en/also_asked.txt`` lists other ways visitors ask the entry written before
it, separated by ``|`` (``Also asked: is there a cash point? | where can I get cash?``); a heading between them, or
no entry before it, leaves it unattached (reported by line, never read as an entry of its own). Each entry is read
as a :class:`Block` that knows its lines, so an editor can write next to it (:mod:`edgevoice.kiosk.knowledge_edit`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from edgevoice import data
from edgevoice.errors import ConfigError
from edgevoice.kiosk.knowledge_guard import MAX_ENTRY_CHARS

__all__ = ["ALSO_ASKED", "MAX_LINE_CHARS", "Block", "asked_line", "clean_markup", "read_markdown", "split_asked"]

MAX_LINE_CHARS = 2000
"""The longest line (or TOML question or answer) a knowledge text may have: a fact is a sentence or two."""

ALSO_ASKED = data.words("en/also_asked.txt")
"""The lead-ins of a line of other ways of asking; the first is the one written (``data/en/also_asked.txt``)."""

# Every pattern below runs in time linear in its line: no two quantifiers can take the same characters.
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
_LEAD_INS = "|".join(r"[ \t]+".join(map(re.escape, lead.split())) for lead in sorted(ALSO_ASKED, key=len, reverse=True))
_EMPHASIS_MARK = r"(?:\*\*|__|\*|_)"
_ALSO = re.compile(
    rf"^[ \t]*(?:(?:[-*+•]|\d+[.)])[ \t]+)?{_EMPHASIS_MARK}?(?:{_LEAD_INS})[ \t]*(?:{_EMPHASIS_MARK}[ \t]*)?:", re.I
)
"""A line of other ways of asking: a lead-in and a colon, perhaps as a list item, perhaps emphasised."""
_SEPARATOR = re.compile(r"(?<!\\)\|")


Form = Literal["qa", "item", "line", "paragraph", "row"]


@dataclass(slots=True)
class Block:
    """One entry as read: its question (or topic, may be empty), its answer, the other ways of asking written under
    it, and where it is. Lines are counted from 0; ``last`` is its last line, its "Also asked" lines included."""

    question: str
    answer: str
    form: Form
    """How it is written: ``"qa"`` (a ``Q:``/``A:`` pair), ``"item"`` (a bullet or numbered item), ``"line"``,
    ``"paragraph"`` or ``"row"`` (of a table)."""
    first: int
    last: int
    asked: list[str] = field(default_factory=list)
    table: tuple[int, int] | None = None
    """For a row: its table's header line and last row."""


def clean_markup(text: str) -> str:
    """``text`` without Markdown links, emphasis and code marks, its spaces collapsed."""
    text = _MD_LINK.sub(r"\1", text)
    for _ in range(3):  # nested emphasis (**a *b* c**) comes off from the inside out
        stripped = _EMPHASIS.sub(_emphasised, text)
        if stripped == text:
            break
        text = stripped
    return " ".join(text.split())


def _emphasised(match: re.Match[str]) -> str:
    return match.group(match.lastindex or 0)  # the one alternative that matched: its group is the last that did


def split_asked(line: str) -> list[str] | None:
    """The ways of asking a line of them lists (``\\|`` is a ``|`` inside one); None for any other line."""
    m = _ALSO.match(line)
    if m is None:
        return None
    rest = line[m.end() :].strip().lstrip("*_").strip()
    pieces = (clean_markup(p.replace("\\|", "|")) for p in _SEPARATOR.split(rest))
    return [p for p in pieces if p]


def asked_line(questions: Sequence[str], indent: str = "") -> str:
    """The line that lists ``questions`` as other ways of asking (no line end)."""
    return f"{indent}{ALSO_ASKED[0]}: " + " | ".join(q.replace("|", "\\|") for q in questions)


def _check_length(text: str, where: str) -> None:
    if len(text) > MAX_LINE_CHARS:
        raise ConfigError(
            f"knowledge: {where} has {len(text)} characters; at most {MAX_LINE_CHARS} are allowed (split it)"
        )


def read_markdown(text: str, unattached: list[int] | None = None) -> list[Block]:
    """The entries of a Markdown or line-per-fact text, in order, with the lines of each. The line numbers (from 1)
    of "Also asked" lines with no entry before them are appended to ``unattached``."""
    blocks: list[Block] = []
    topic = ""
    paragraph: list[str] = []
    paragraph_from = [0]  # the line the paragraph starts on
    question: tuple[str, int] | None = None  # a Q: line waiting for its A:, and where it is
    last: list[Block | None] = [None]  # the entry an "Also asked" line belongs to

    def flush(end: int) -> None:
        if paragraph:
            joined = " ".join(paragraph)
            if len(joined) > MAX_ENTRY_CHARS:  # lines without a blank line, heading or bullet between: one entry
                first = paragraph_from[0] + 1
                raise ConfigError(
                    f"knowledge: lines {first}-{first + len(paragraph) - 1} are one paragraph, one entry of "
                    f"{len(joined):,} characters; at most {MAX_ENTRY_CHARS:,} are allowed (a fact is a sentence or "
                    "two: write one 'Question? Answer.' per line, or a blank line between facts)",
                    code="knowledge_entry_too_long",
                )
            add(_entry(topic, joined, "paragraph", paragraph_from[0], end - 1))
            paragraph.clear()

    def add(block: Block) -> None:
        blocks.append(block)
        last[0] = block

    in_code = False
    lines = text.splitlines()
    if lines and max(map(len, lines)) > MAX_LINE_CHARS:
        for number, raw in enumerate(lines, 1):
            _check_length(raw, f"line {number}")
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line:
            flush(i - 1)
            continue
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and (asked := split_asked(line)) is not None:
            flush(i - 1)
            owner = last[0] if question is None else None
            if owner is None:
                if unattached is not None:
                    unattached.append(i)
            else:
                owner.asked.extend(asked)
                owner.last = i - 1
            continue
        if not in_code and "|" in line and i < len(lines) and _is_table_rule(lines[i]):
            flush(i - 1)
            end = i + 1
            while end < len(lines) and "|" in lines[end] and split_asked(lines[end]) is None:
                end += 1
            for block in _table(topic, lines[i - 1 : end], i - 1):
                add(block)
            i = end
            continue
        if in_code or line.startswith(("```", "---", "<!--")):
            flush(i - 1)
            continue
        if line.startswith("|"):
            raise ConfigError(
                f"knowledge: line {i} looks like a table row, but its table has no header row followed by a "
                "|---|---| rule; write the table in full or the facts as lines"
            )
        if m := _HEADING.match(line):
            flush(i - 1)
            topic = clean_markup(m.group(2).rstrip().rstrip("#"))
            last[0] = None
            continue
        if m := _Q_LINE.match(line):
            flush(i - 1)
            question = (clean_markup(m.group(1)), i - 1)
            continue
        if question is not None and (m := _A_LINE.match(line)):
            add(Block(question[0], clean_markup(m.group(1)), "qa", question[1], i - 1))
            question = None
            continue
        if m := _ITEM.match(line):
            flush(i - 1)
            add(_entry(topic, m.group(1), "item", i - 1, i - 1))
            continue
        if _QUESTION_FIRST.match(clean_markup(line)) or _TERM.match(clean_markup(line)):
            flush(i - 1)
            add(_entry(topic, line, "line", i - 1, i - 1))
            continue
        if not paragraph:
            paragraph_from[0] = i - 1
        paragraph.append(line)
    flush(len(lines))
    return blocks


def _table(topic: str, rows: Sequence[str], first: int) -> list[Block]:
    """A Markdown table (``rows[0]`` its header, ``rows[1]`` the rule, starting on line ``first``) as one entry per
    row: the row's first cell names it, the other cells answer it under their column's heading."""
    header = _cells(rows[0])
    blocks = []
    span = (first, first + len(rows) - 1)
    for offset, row in enumerate(rows[2:], 2):
        cells = _cells(row)
        if len(cells) != len(header):
            raise ConfigError(
                f"knowledge: line {first + offset + 1}: a table row with {len(cells)} cells under a header of "
                f"{len(header)}"
            )
        if len(cells) == 1:
            blocks.append(Block(topic, cells[0], "row", first + offset, first + offset, table=span))
            continue
        name = f"{topic}, {cells[0]}" if topic and cells[0] else cells[0] or topic
        answer = "; ".join(f"{h}: {c}" if h else c for h, c in zip(header[1:], cells[1:], strict=True) if c)
        blocks.append(Block(name, answer, "row", first + offset, first + offset, table=span))
    return blocks


def _is_table_rule(line: str) -> bool:
    return "|" in line and _TABLE_RULE.match(line.strip()) is not None


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row.removeprefix("|")
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [clean_markup(cell.replace("\\|", "|")) for cell in re.split(r"(?<!\\)\|", row)]


def _entry(topic: str, text: str, form: Form, first: int, last: int) -> Block:
    """One bullet or line: ``Question? Answer``, ``Term: text`` or plain text under the current heading."""
    text = clean_markup(text)
    if m := _QUESTION_FIRST.match(text):
        return Block(m.group(1), m.group(2), form, first, last)
    if m := _TERM.match(text):
        term = m.group(1).strip()
        return Block(f"{topic}, {term}" if topic else term, m.group(2), form, first, last)
    return Block(topic, text, form, first, last)
