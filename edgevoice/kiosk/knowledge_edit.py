"""Writing into the operator's knowledge text: another way of asking an entry, or a new entry, in the text's own format.

Both functions take the knowledge text and return the new text (nothing is read or written here: the caller saves
it through :func:`edgevoice.admin.knowledge_file.save_and_reload`). The rest of the text is kept byte for byte: a
way of asking goes into the entry's ``Also asked:`` line (Markdown and a fact a line; one is written under the entry
when it has none) or its ``asked = [...]`` array (TOML), and a new entry goes at the end, written as most of the
file's entries are. Every result is read back before it is returned: it must give the same entries as before plus
the change, or nothing is returned (``knowledge_edit_failed``), so an unusual file is refused, never damaged.

A question or answer to write is refused (:class:`ConfigError`) when it is empty, too long
(``max_question_chars`` in ``data/kiosk/knowledge_limits.toml``), holds control characters
(``knowledge_edit_invalid``) or addresses the assistant (``data/en/instructions.txt``, ``knowledge_edit_instruction``).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from edgevoice import data
from edgevoice.errors import ConfigError
from edgevoice.kiosk.instructions import instruction
from edgevoice.kiosk.knowledge import Entry, is_toml, parse_knowledge
from edgevoice.kiosk.knowledge_guard import MAX_ENTRY_CHARS
from edgevoice.kiosk.knowledge_markdown import MAX_LINE_CHARS, Block, asked_line, clean_markup, read_markdown
from edgevoice.kiosk.knowledge_toml_edit import append_asked, append_table

__all__ = ["MAX_QUESTION_CHARS", "add_entry", "attach_question", "same_question"]

MAX_QUESTION_CHARS: int = data.table("kiosk/knowledge_limits.toml")["max_question_chars"]
"""The longest question (or way of asking) written into the knowledge, in characters."""

_ITEM_MARK = re.compile(r"^(\s*)([-*+•]|(\d+)([.)]))(\s+)")
_ONE_QUESTION = re.compile(r"[^?]{3,200}\?")
"""A question the ``Question? Answer.`` form can hold (the reader takes the entry's question up to its first "?")."""


def same_question(question: str) -> str:
    """``question`` as compared with an entry's ways of asking: its words in lower case, without punctuation."""
    return " ".join(re.findall(r"\w+", question.casefold()))


def attach_question(text: str, key: str, question: str, *, source: str = "knowledge") -> str:
    """The knowledge text with ``question`` added to the ways of asking of the entry whose :attr:`Entry.key` is
    ``key``; ``text`` itself when the entry already has it (its words, case and punctuation aside).

    Raises :class:`ConfigError` coded ``knowledge_entry_changed`` when no entry has that key (edited or deleted
    meanwhile), and as the module says for a question that cannot be written."""
    question = _checked(question, "question", source, MAX_QUESTION_CHARS, join_lines=False)
    entries = parse_knowledge(text, source=source, warnings=[])
    index = next((i for i, e in enumerate(entries) if e.key == key), None)
    if index is None:
        raise ConfigError(
            f"{source}: no entry is the one the question was to be attached to (key {key!r}): it was edited or "
            "deleted meanwhile; reload the knowledge and choose the entry again",
            code="knowledge_entry_changed",
        )
    entry = entries[index]
    toml = is_toml(text)
    written = question if toml else clean_markup(question)  # as the reader reads it back
    if same_question(written) in {same_question(q) for q in (entry.question, *entry.asked)}:
        return text
    if toml:
        new = append_asked(text, index, written)
    else:
        block = [b for b in read_markdown(text) if b.answer][index]
        new = _attach_markdown(text, block, written)
    expected = [*entries]
    expected[index] = replace(entry, asked=(*entry.asked, written))
    return _verified(new, expected, source, f"the question {question!r}")


def add_entry(text: str, question: str, answer: str, *, source: str = "knowledge") -> str:
    """The knowledge text with a new entry (``question``, ``answer``) appended in the file's own format; ``text``
    itself when an entry with that very question and answer is there already."""
    question = _checked(question, "question", source, MAX_QUESTION_CHARS, join_lines=False)
    answer = _checked(
        answer, "answer", source, min(MAX_ENTRY_CHARS, MAX_LINE_CHARS) - len(question) - 1, join_lines=True
    )
    entries = parse_knowledge(text, source=source, warnings=[])
    entry = Entry(clean_markup(question), clean_markup(answer))
    if any(e.key == entry.key for e in entries):
        return text
    expected = [*entries, entry]
    if is_toml(text):
        return _verified(append_table(text, question, answer), expected, source, f"the entry {question!r}")
    *preferred, last_resort = _new_entry_lines(text, read_markdown(text), entry)
    for lines in preferred:
        try:
            return _verified(_append(text, lines), expected, source, f"the entry {question!r}")
        except ConfigError as exc:
            if exc.code != "knowledge_edit_failed":
                raise
    return _verified(_append(text, last_resort), expected, source, f"the entry {question!r}")


def _checked(value: str, what: str, source: str, limit: int, *, join_lines: bool) -> str:
    """``value`` with its spaces collapsed (its lines joined, with ``join_lines``), or a :class:`ConfigError` saying
    why it cannot be written."""
    if join_lines:
        value = value.replace("\r\n", "\n").replace("\n", " ")
    bad = next((c for c in value if c != "\t" and unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)
    if bad is not None:
        raise ConfigError(
            f"{source}: the {what} to write holds the control character {bad!r}: a {what} is one line of text",
            code="knowledge_edit_invalid",
        )
    value = " ".join(value.split())
    if not value:
        raise ConfigError(f"{source}: the {what} to write is empty", code="knowledge_edit_invalid")
    if len(value) > limit:
        raise ConfigError(
            f"{source}: the {what} to write has {len(value):,} characters; at most {limit:,} are allowed",
            code="knowledge_edit_invalid",
        )
    if (phrase := instruction(value)) is not None:
        raise ConfigError(
            f"{source}: the {what} to write addresses the assistant ({phrase!r}): the knowledge holds facts and the "
            "ways visitors ask for them, never instructions",
            code="knowledge_edit_instruction",
        )
    return value


def _verified(new: str, expected: Sequence[Entry], source: str, what: str) -> str:
    """``new`` when it reads back as ``expected``; else a :class:`ConfigError` (the text could not be edited)."""
    if parse_knowledge(new, source=source, warnings=[]) != list(expected):
        raise ConfigError(
            f"{source}: {what} could not be written so that the file reads back as it should (an unusual layout "
            "near the entry?); nothing was changed: add it by hand (docs/knowledge.md, 'Other ways of asking')",
            code="knowledge_edit_failed",
        )
    return new


def _lines_of(text: str) -> tuple[list[str], str]:
    """The lines of ``text`` with their ends (split as the reader splits them), and the line end it uses."""
    return text.splitlines(keepends=True), "\r\n" if "\r\n" in text else "\n"


def _attach_markdown(text: str, block: Block, question: str) -> str:
    """``text`` with ``question`` added to the "Also asked" line that ends ``block``, or on a new one under it."""
    lines, end = _lines_of(text)
    last = lines[block.last]
    body = last.rstrip("\r\n")
    if block.asked and len(body) + len(question) + 3 <= MAX_LINE_CHARS:
        lines[block.last] = f"{body.rstrip()} | {question.replace('|', chr(92) + '|')}{last[len(body) :]}"
        return "".join(lines)
    indent = ""
    if block.asked:  # its line is full: the next goes under it, as far in
        indent = body[: len(body) - len(body.lstrip())]
    elif block.form == "item" and (m := _ITEM_MARK.match(lines[block.first])):
        indent = " " * len(m.group(0))  # under the item's text: Markdown keeps it in the item
    new = [asked_line([question], indent) + end]
    if block.form == "row" and block.table is not None:
        header, table_last = block.table
        new = [end, *new]  # a table ends at a blank line: the "Also asked" line is no row of it
        if block.last < table_last:  # the rows after it go on in a table of their own, under the same header
            new += [end, _ended(lines[header], end), _ended(lines[header + 1], end)]
    if not last.endswith(("\n", "\r")):
        lines[block.last] = last + end
        new[-1] = new[-1].removesuffix(end)
    lines[block.last + 1 : block.last + 1] = new
    return "".join(lines)


def _ended(line: str, end: str) -> str:
    return line if line.endswith(("\n", "\r")) else line + end


def _new_entry_lines(text: str, blocks: Sequence[Block], entry: Entry) -> list[list[str]]:
    """The ways to write ``entry`` after ``blocks``, the file's own first: as a bullet or a line when most of its
    entries are written so (and the question fits that form), else, and as the last resort, a ``Q:``/``A:`` pair."""
    forms = Counter(b.form for b in blocks if b.form in ("qa", "item", "line"))
    ways = []
    if _ONE_QUESTION.fullmatch(entry.question):
        most = max(forms, key=lambda f: (forms[f], max(i for i, b in enumerate(blocks) if b.form == f)), default="line")
        if most == "item":
            item = next(b for b in reversed(blocks) if b.form == "item")
            ways.append([f"{_next_mark(text.splitlines()[item.first])}{entry.question} {entry.answer}"])
        elif most == "line":
            ways.append([f"{entry.question} {entry.answer}"])
    ways.append(["", f"Q: {entry.question}", f"A: {entry.answer}"])
    return ways


def _next_mark(line: str) -> str:
    """The mark of the item after the one on ``line``: the same bullet, or the next number."""
    m = _ITEM_MARK.match(line)
    if m is None:
        return "- "
    if m.group(3) is not None:
        return f"{m.group(1)}{int(m.group(3)) + 1}{m.group(4)} "
    return f"{m.group(1)}{m.group(2)} "


def _append(text: str, lines: Sequence[str]) -> str:
    """``text`` with ``lines`` after its last line (a leading empty line: a blank line between, unless there is
    one)."""
    old, end = _lines_of(text)
    if old and not old[-1].endswith(("\n", "\r")):
        text += end
    if lines and lines[0] == "" and (not old or text.endswith(end * 2)):
        lines = lines[1:]
    return text + "".join(line + end for line in lines)
