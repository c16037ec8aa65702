"""The reply check: whether a sentence of the model's reply keeps to the knowledge (no invented number or words),
only echoes the question, or names only what an entry says. Used by
:class:`~edgevoice.kiosk.grounded_model.GroundedModel` on the replies :class:`~edgevoice.kiosk.grounding.Kiosk`
marks for checking (see :mod:`edgevoice.kiosk.grounding`)."""

from __future__ import annotations

import re
from collections.abc import Set

from edgevoice import data
from edgevoice.kiosk.retrieval import BM25Index, near, terms

__all__ = ["REPLY_FILLER", "ReplyCheck"]

_MEASURE = re.compile(r"\d\s*([A-Za-z]+)")
REPLY_FILLER = frozenset(terms(" ".join(data.words("en/reply_filler.txt"))))
"""Words any reply may use without the knowledge having them (``edgevoice/data/en/reply_filler.txt``)."""


class ReplyCheck:
    """The knowledge's words (``index``) and the persona's, against which a reply is checked."""

    def __init__(self, index: BM25Index, persona_terms: Set[str]) -> None:
        self._index = index
        self._persona_terms = frozenset(persona_terms)

    def unsupported(self, reply: str, question: str) -> list[str]:
        """The reply's content words that neither the knowledge, the persona nor the question contains."""
        known = set(terms(question)) | self._persona_terms
        out = []
        for term in dict.fromkeys(terms(reply)):
            if term in known or term in REPLY_FILLER or term in self._index.idf:
                continue
            if not any(near(term, v) for v in self._index.idf):
                out.append(term)
        return out

    def supported(self, reply: str, question: str) -> bool:
        """Whether ``reply`` keeps to the knowledge: no number or measure (the word after a number) and not two
        words from elsewhere (a small model's inventions bring words the venue never wrote: "founded in 1965",
        "10 metres"). The limits were set on the development questions."""
        missing = self.unsupported(reply, question)
        if not missing:
            return True
        measures = {t for m in _MEASURE.finditer(reply) for t in terms(m.group(1))}
        return not any(t[0].isdigit() or t in measures for t in missing) and len(missing) < 2

    def echoes(self, reply: str, question: str) -> bool:
        """Whether ``reply`` says nothing but what ``question`` asked ("Is photography permitted?" "Yes,
        photography is permitted."): it has content words, and each is the question's (a refusal, whose words are
        all filler, is not an echo)."""
        said = set(terms(reply)) - REPLY_FILLER - self._persona_terms
        asked = set(terms(question))
        return bool(said) and all(t in asked or any(near(t, a) for a in asked) for t in said)

    def names_only(self, text: str, source: str) -> bool:
        """Whether ``text`` names something (a content word other than filler) and only what ``source`` says
        ("the front desk" in "Ask at the front desk.")."""
        named = set(terms(text)) - REPLY_FILLER
        return bool(named) and named <= set(terms(source))
