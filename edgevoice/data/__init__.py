"""The data files that ship with the package (the sample venue, the English word lists, the benchmarks' questions)
and the loader that reads each once.

Word lists are plain text, one word or phrase a line, with ``#`` comments; tables are TOML. Each file's header says
what it is for.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["sample_knowledge", "sample_persona", "table", "text", "words"]


@cache
def text(path: str) -> str:
    """The file ``path`` (relative to this package, e.g. ``"sample_venue/persona.txt"``) as text."""
    return resources.files(__name__).joinpath(path).read_text(encoding="utf-8")


@cache
def words(path: str) -> tuple[str, ...]:
    """The entries of a word list: one a line, blank lines and ``#`` comments left out, in file order."""
    out = []
    for line in text(path).splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            out.append(entry)
    return tuple(out)


@cache
def table(path: str) -> dict[str, Any]:
    """A TOML data file, parsed."""
    return tomllib.loads(text(path))


def sample_persona() -> str:
    """The sample venue's persona: the default ``[kiosk] persona``."""
    return text("sample_venue/persona.txt").strip()


def sample_knowledge() -> str:
    """The sample venue's facts, one question and its answer a line: the default ``[kiosk] knowledge``."""
    return text("sample_venue/knowledge.txt")
