"""Cutting a token stream into speakable pieces as soon as each piece is complete. Pure logic."""

from __future__ import annotations

import re

# A sentence ends at . ! or ? followed by white space; "9.50" or "a.m.," do not end one.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]?\s+")


class SentenceChunker:
    """Feed text pieces; get whole sentences back the moment their end is seen."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> list[str]:
        self._pending += text
        out: list[str] = []
        while True:
            m = _BOUNDARY.search(self._pending)
            if m is None:
                break
            sentence = self._pending[: m.end()].strip()
            self._pending = self._pending[m.end() :]
            if sentence:
                out.append(sentence)
        return out

    def flush(self) -> str:
        """The unfinished remainder (the model stopped without a final full stop)."""
        rest, self._pending = self._pending.strip(), ""
        return rest

    @property
    def pending(self) -> str:
        return self._pending
