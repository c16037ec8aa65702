"""Numbers written as words, read as digits: "ten euros" is "10 euros", "two hundred" is "200", "twenty past nine"
is "9:20", so that the reply check compares a value however the model or the operator wrote it (the knowledge's
"about four weeks" supports a reply's "4 weeks", and a reply's invented "ten euros" is a value like "10 euros").

The numbers are read by text2num (``alpha2digit``); a lone "one" or "two" stays a word ("the nearest one", "one of
the best" are no values). The clock phrases it does not read are the words of ``edgevoice/data/en/clock.toml``.
"""

from __future__ import annotations

import re
from functools import cache

from text_to_num import alpha2digit

from edgevoice import data

__all__ = ["as_digits"]


@cache
def _clock() -> tuple[re.Pattern[str], re.Pattern[str], dict[str, int]]:
    """The clock phrases as patterns: ``minutes past hour`` and ``minutes [minutes] to hour``; and the fractions."""
    table = data.table("en/clock.toml")
    fractions = {str(k).lower(): int(v) for k, v in table["fractions"].items()}

    def alternatives(ws: list[str] | dict[str, int]) -> str:
        return "|".join(re.escape(str(w).lower()) for w in ws)

    minute = rf"(?:a\s+)?(?P<m>\d{{1,2}}|{alternatives(fractions)})"
    unit = rf"(?:\s+(?:{alternatives(table['minutes'])}))"
    hour = r"(?P<h>\d{1,2})\b"
    past = re.compile(rf"\b{minute}{unit}?\s+(?:{alternatives(table['past'])})\s+{hour}", re.IGNORECASE)
    # "to" only after a fraction or the word "minutes": "from 10 to 12" is a span of hours, not 11:50
    to = re.compile(
        rf"\b(?:a\s+)?(?:(?P<f>{alternatives(fractions)})|(?P<m>\d{{1,2}}){unit})\s+"
        rf"(?:{alternatives(table['to'])})\s+{hour}",
        re.IGNORECASE,
    )
    return past, to, fractions


def _minutes(said: str, fractions: dict[str, int]) -> int:
    return fractions[said.lower()] if said.lower() in fractions else int(said)


def _time(hour: int, minutes: int) -> str:
    return f"{hour}:{minutes:02d}"


def as_digits(text: str) -> str:
    """``text`` with its numbers written as words in digits ("ten euros" is "10 euros", "a quarter to ten" is
    "9:45", "eleven o'clock" is "11 o'clock"); a clock phrase whose hour or minutes are out of range is left as
    it was."""
    if not any(c.isalpha() for c in text):
        return text
    text = alpha2digit(text, "en")
    past, to, fractions = _clock()

    def after(m: re.Match[str]) -> str:
        hour, minutes = int(m.group("h")), _minutes(m.group("m"), fractions)
        return _time(hour, minutes) if 0 < hour <= 24 and 0 < minutes < 60 else m.group(0)

    def before(m: re.Match[str]) -> str:
        hour = int(m.group("h"))
        minutes = _minutes(m.group("f") or m.group("m"), fractions)
        if not (0 < hour <= 24 and 0 < minutes < 60):
            return m.group(0)
        return _time(hour - 1 if hour > 1 else 12, 60 - minutes)

    return to.sub(before, past.sub(after, text))
