"""Writing into a TOML ``[[qa]]`` knowledge text by inserting text, so that its comments, order and layout stay.

A careful insert rather than a TOML editing library (none is a dependency): a way of asking goes into the entry's
``asked = [...]`` array (after its last value), or a new ``asked`` line goes after the entry's last key; a new entry
is a ``[[qa]]`` table at the end. Strings are written by ``tomli_w``. What cannot be found as expected (an ``asked``
that is no array of strings, a ``[[qa]]`` inside a multi-line string) gives a text that reads back differently, which
:mod:`edgevoice.kiosk.knowledge_edit` refuses: nothing here needs to be a full TOML reader.
"""

from __future__ import annotations

import re

import tomli_w

__all__ = ["append_asked", "append_table"]

_QA = re.compile(r"^[ \t]*\[\[[ \t]*qa[ \t]*\]\]", re.M)
_ASKED = re.compile(r"^[ \t]*(?:asked|\"asked\"|'asked')[ \t]*=[ \t]*", re.M)
_EXTRA_QUOTES = 2
"""A multi-line string's closing delimiter may have up to two more quotes, which belong to its text."""


def append_asked(text: str, index: int, question: str) -> str:
    """``text`` with ``question`` added to the ``asked`` of its ``[[qa]]`` table number ``index`` (from 0)."""
    starts = [m.start() for m in _QA.finditer(text)]
    if index >= len(starts):
        return text
    start, stop = starts[index], starts[index + 1] if index + 1 < len(starts) else len(text)
    end = _line_end(text)
    value = _string(question)
    if (m := _ASKED.search(text, start, stop)) is not None:
        return _into_array(text, m.end(), value, end) or text
    lines = text[start:stop].splitlines(keepends=True)
    keys = len(lines)
    while keys > 1 and (not lines[keys - 1].strip() or lines[keys - 1].lstrip().startswith("#")):
        keys -= 1
    at = start + sum(map(len, lines[:keys]))
    before = "" if text[:at].endswith(("\n", "\r")) else end
    return f"{text[:at]}{before}asked = [{value}]{end}{text[at:]}"


def append_table(text: str, question: str, answer: str) -> str:
    """``text`` with a ``[[qa]]`` table for ``question`` and ``answer`` at its end."""
    end = _line_end(text)
    if text and not text.endswith(("\n", "\r")):
        text += end
    blank = "" if not text.strip() or text.endswith(end * 2) else end
    table = f"[[qa]]{end}question = {_string(question)}{end}answer = {_string(answer)}{end}"
    return text + blank + table


def _line_end(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _string(value: str) -> str:
    """``value`` as a TOML string."""
    return tomli_w.dumps({"v": value}).removeprefix("v = ").rstrip("\n")


def _into_array(text: str, at: int, value: str, end: str) -> str | None:
    """``text`` with ``value`` after the last value of the array that opens at ``at``; None when no array of strings
    opens there."""
    if not text.startswith("[", at):
        return None
    i, last, comma = at + 1, None, None
    while i < len(text) and text[i] != "]":
        char = text[i]
        if char in " \t\r\n":
            i += 1
        elif char == "#":
            i = len(text) if (j := text.find("\n", i)) < 0 else j
        elif char == ",":
            comma, i = i, i + 1
        elif (after := _string_end(text, i)) is not None:
            last, comma, i = after, None, after
        else:
            return None
    if i >= len(text):
        return None
    if last is None:
        return f"{text[: at + 1]}{value}{text[at + 1 :]}"
    if comma is not None and "\n" in text[last:i]:  # a value a line, each with its comma: one more such line
        line = text[text.rfind("\n", 0, last) + 1 : last]
        indent = line[: len(line) - len(line.lstrip())]
        return f"{text[: comma + 1]}{end}{indent}{value},{text[comma + 1 :]}"
    return f"{text[:last]}, {value}{text[last:]}"


def _string_end(text: str, i: int) -> int | None:
    """Where the TOML string that starts at ``i`` ends (just after its closing quote); None: no string starts there."""
    for quote in ('"""', "'''"):
        if text.startswith(quote, i):
            j = i + 3
            while j < len(text):
                if quote == '"""' and text[j] == "\\":
                    j += 2
                elif text.startswith(quote, j):
                    close = j + 3
                    while close < len(text) and text[close] == quote[0] and close - j - 3 < _EXTRA_QUOTES:
                        close += 1
                    return close
                else:
                    j += 1
            return None
    quote = text[i]
    if quote not in "\"'":
        return None
    j = i + 1
    while j < len(text) and text[j] != "\n":
        if quote == '"' and text[j] == "\\":
            j += 2
        elif text[j] == quote:
            return j + 1
        else:
            j += 1
    return None
