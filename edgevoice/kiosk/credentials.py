"""Questions for credentials, codes and secrets, and secrets written where they do not belong.

Everything in the knowledge is public (``docs/knowledge.md``), but a small model asked "what is the admin password?"
gladly makes one up from whatever value is at hand ("The admin password is 40 euros."). So a question that names a
secret (a word of ``edgevoice/data/en/secrets.txt``: password, code, PIN, login...) is answered only by an entry
that answers that very question (:func:`answers_secret`); anything else gets the refusal without the model.

The persona is not a source of facts: a persona sentence that names a secret ("The admin password is hunter2.") is
left out of the prompt (:func:`persona_without_secrets`), so the model never reads it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Set

from edgevoice import data
from edgevoice.kiosk.knowledge import Entry
from edgevoice.kiosk.retrieval import terms

log = logging.getLogger(__name__)

__all__ = ["SECRET_TERMS", "answers_secret", "asks_secret", "persona_without_secrets"]

SECRET_TERMS = frozenset(t for w in data.words("en/secrets.txt") for t in terms(w))
"""The search terms of the words that name a secret (``edgevoice/data/en/secrets.txt``)."""

_SENTENCE = re.compile(r"(?:[^.!?]|[.!?](?=\S))+[.!?]*")


def asks_secret(question: str) -> frozenset[str]:
    """The secret words ``question`` names, as search terms (empty: it asks for no secret)."""
    return frozenset(terms(question)) & SECRET_TERMS


def answers_secret(question: str, entry: Entry, neutral: Set[str] = frozenset()) -> bool:
    """Whether ``entry`` answers the secret ``question`` asks for: the question says what the secret is for (a word
    besides the secret words and the ``neutral`` ones: "the wifi password", not "the password"), the entry's own
    question (or keywords) asks about that, and the entry has every word of the question, the secret words
    included, as they are (no near spellings). A secret that an entry about something else happens to mention is not
    that entry's answer."""
    asked = set(terms(question)) - set(neutral)
    subject = asked - SECRET_TERMS
    if not subject or not subject <= set(terms(" ".join((entry.question, *entry.keywords)))):
        return False
    return asked <= set(terms(entry.search_text()))


def persona_without_secrets(persona: str) -> str:
    """``persona`` without its sentences that name a secret (each left out with a warning): the persona says who the
    kiosk is, never a fact to tell, least of all a secret."""
    sentences = _SENTENCE.findall(persona)
    kept = []
    for number, sentence in enumerate(sentences, 1):
        named = set(terms(sentence)) & SECRET_TERMS
        if named:  # the log names the word, never the sentence: it may hold the secret itself
            log.warning("persona: sentence %d names a secret (%s) and is left out of the prompt", number, min(named))
            continue
        kept.append(sentence)
    return "".join(kept).strip() if len(kept) < len(sentences) else persona
